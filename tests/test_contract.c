/* tests/test_contract.c: contractions (lazyfuse.h, "Contractions").
 *
 * Every case is checked bit for bit against an oracle written here from the
 * definition (fmaf steps in blocks of LF_CONTRACT_BLOCK, each block's float
 * partial added into a double, rounded once), on the reference evaluator,
 * the schedule interpreter (LF_COMPILE_NEVER) and compiled CPU kernels on 1,
 * 2 and 3 threads (the suite runs with LF_CPU_PARALLEL_MIN=1, so ranges
 * split). The predicate (graph_contraction) is tested on what is and is not
 * a contraction.
 */
#include "graph/graph.h"
#include "fusion/fusion.h"
#include "lazyfuse.h"
#include "testutil.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- the oracle ------------------------------------------------------------------- */

static float contract_def(int64_t K, const float *x, int64_t xs, const float *y, int64_t ys) {
    double acc = 0.0;
    float part = 0.0f;
    for (int64_t k = 0; k < K; k++) {
        part = fmaf(x[k * xs], y[k * ys], part);
        if ((k + 1) % LF_CONTRACT_BLOCK == 0) {
            acc += part;
            part = 0.0f;
        }
    }
    return (float)(acc + part);
}

/* Values in [-1, 1) with, when special, NaN, +-Inf, -0.0 and huge values
 * sprinkled in (about 1 in 40 each). */
static void fill(float *v, int64_t n, bool special) {
    for (int64_t i = 0; i < n; i++) {
        v[i] = (float)tu_uniform(-1, 1);
        if (!special) continue;
        int r = (int)tu_randint(0, 199);
        if (r == 0) v[i] = NAN;
        else if (r == 1) v[i] = INFINITY;
        else if (r == 2) v[i] = -INFINITY;
        else if (r < 8) v[i] = -0.0f;
        else if (r < 10) v[i] = 3e37f;
    }
}

/* Equal bits, or both NaN (a NaN's sign and payload are the hardware's:
 * x86 makes inf * 0 a negative NaN, and propagates an operand's). */
static bool same_bits(const float *a, const float *b, int64_t n, int64_t *at) {
    for (int64_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof(float)) && !(a[i] != a[i] && b[i] != b[i])) {
            *at = i;
            return false;
        }
    return true;
}

/* ---- running one graph everywhere --------------------------------------------------- */

/* Builds the case's graph on g from its host inputs; returns the output. */
typedef lf_node *(*build_fn)(lf_graph *g, const void *cs);

static lf_ctx *cur; /* the context graphs are built on */

static lf_node *in_f32(lf_graph *g, int ndim, const int64_t *shape, const float *v) {
    lf_ctx *c = cur;
    lf_buffer *b = lf_buffer_new(c, LF_F32, ndim, shape);
    cr_assert(b != NULL, "%s", lf_errmsg(c));
    int64_t n = lf_buffer_numel(b);
    if (n) cr_assert_eq(lf_buffer_write(b, v, (size_t)n * sizeof(float)), LF_OK);
    lf_node *x = lf_input(g, b);
    lf_buffer_free(b);
    return x;
}

static void eval_on(lf_ctx *c, build_fn build, const void *cs, float *out, int64_t n) {
    cur = c;
    lf_graph *g = lf_graph_new(c);
    lf_node *y = build(g, cs);
    cr_assert(y != NULL, "%s", lf_errmsg(c));
    lf_buffer *b = lf_buffer_new_like(c, y);
    cr_assert(b != NULL, "%s", lf_errmsg(c));
    cr_assert_eq(lf_eval(g, 1, &y, &b), LF_OK, "%s", lf_errmsg(c));
    cr_assert_eq(lf_buffer_numel(b), n);
    if (n) cr_assert_eq(lf_buffer_read(b, out, (size_t)n * sizeof(float)), LF_OK);
    lf_buffer_free(b);
    lf_graph_free(g);
}

static lf_ctx *ctx_of(lf_backend be, int threads, int compile, int fusion) {
    lf_ctx_options o;
    lf_ctx_options_init(&o);
    o.backend = be;
    o.threads = threads;
    o.compile = compile;
    o.fusion = fusion;
    lf_ctx *c = lf_ctx_new(&o);
    cr_assert(c != NULL, "%s", lf_errmsg(NULL));
    return c;
}

/* The graph on the reference, the interpreter (fused and not) and compiled
 * CPU kernels on 1, 2, 3 threads, each bit for bit equal to want. With
 * kernels >= 0, the fused CPU schedule has that many kernels. Under valgrind
 * (CI's third pass, ~50x slower) a case runs the fused 2-thread kernels and
 * every third of the others, a different third per case and per seed, so
 * the suite as a whole still reaches every run kind. */
static void check_all(const char *what, build_fn build, const void *cs, const float *want, int64_t n, int kernels) {
    float *got = malloc((size_t)(n ? n : 1) * sizeof *got);
    struct {
        lf_backend be;
        int threads, compile, fusion;
        const char *name;
    } runs[] = {
        {LF_BACKEND_REFERENCE, 1, LF_COMPILE_AUTO, 1, "reference"},
        {LF_BACKEND_CPU, 2, LF_COMPILE_NEVER, 1, "interpreter"},
        {LF_BACKEND_CPU, 1, LF_COMPILE_NEVER, 0, "interpreter, fusion off"},
        {LF_BACKEND_CPU, 1, LF_COMPILE_REQUIRE, 1, "cpu, 1 thread"},
        {LF_BACKEND_CPU, 2, LF_COMPILE_REQUIRE, 1, "cpu, 2 threads"},
        {LF_BACKEND_CPU, 3, LF_COMPILE_REQUIRE, 1, "cpu, 3 threads"},
        {LF_BACKEND_CPU, 2, LF_COMPILE_REQUIRE, 0, "cpu, fusion off"},
    };
    static unsigned calls; /* under valgrind each case samples its runs: */
    calls++;               /* 2 threads fused (the kernel count) and a rotating third of the rest */
    for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
        if (tu_on_valgrind() && r != 4 && (r + calls + tu_seed()) % 3 != 0) continue;
        lf_ctx *c = ctx_of(runs[r].be, runs[r].threads, runs[r].compile, runs[r].fusion);
        eval_on(c, build, cs, got, n);
        int64_t at = 0;
        cr_expect(same_bits(got, want, n, &at), "%s on %s: element %lld is %a (%g), want %a (%g)", what, runs[r].name,
                  (long long)at, (double)got[at], (double)got[at], (double)want[at], (double)want[at]);
        if (kernels >= 0 && r == 4) {
            lf_eval_stats st;
            lf_ctx_last_stats(c, &st);
            cr_expect_eq(st.kernels, kernels, "%s: %d kernels, want %d", what, st.kernels, kernels);
        }
        lf_ctx_destroy(c);
    }
    free(got);
}

/* ---- matmul and its relatives --------------------------------------------------------- */

typedef struct mm_case {
    int64_t batch, M, K, N;  /* batch 0: no batch axis */
    const float *A, *B;      /* [batch,] M x K and [batch,] K x N, or B^T (N x K) when bt */
    bool bt;                 /* B given transposed: sum over the last axis */
    const float *bias;       /* N: relu(C + bias) epilogue, or NULL */
    const float *scale;      /* M: (A * scale[:, None]) prologue, or NULL */
} mm_case;

static lf_node *build_mm(lf_graph *g, const void *p) {
    const mm_case *c = p;
    bool b = c->batch > 0;
    int o = b ? 1 : 0;
    int64_t sa[3] = {c->batch, c->M, c->K}, sb[3] = {c->batch, c->K, c->N}, sbt[3] = {c->batch, c->N, c->K};
    lf_node *A = in_f32(g, 2 + o, b ? sa : sa + 1, c->A);
    lf_node *B = c->bt ? in_f32(g, 2 + o, b ? sbt : sbt + 1, c->B) : in_f32(g, 2 + o, b ? sb : sb + 1, c->B);
    if (c->scale) A = lf_mul(g, A, lf_expand_dims(g, in_f32(g, 1, &c->M, c->scale), 1));
    lf_node *prod;
    int ax;
    if (c->bt) { /* A[.., M, 1, K] * BT[.., 1, N, K], summed over K */
        prod = lf_mul(g, lf_expand_dims(g, A, 1 + o), lf_expand_dims(g, B, o));
        ax = 2 + o;
    } else { /* A[.., M, K, 1] * B[.., 1, K, N], summed over K */
        prod = lf_mul(g, lf_expand_dims(g, A, 2 + o), lf_expand_dims(g, B, o));
        ax = 1 + o;
    }
    lf_node *y = lf_reduce(g, LF_RED_SUM, prod, 1, &ax, false);
    if (c->bias) y = lf_maximum(g, lf_add(g, y, in_f32(g, 1, &c->N, c->bias)), lf_const(g, LF_F32, 0.0));
    return y;
}

/* The oracle of an mm_case. */
static void want_mm(const mm_case *c, float *C) {
    int64_t nb = c->batch ? c->batch : 1;
    float *x = malloc((size_t)(c->K ? c->K : 1) * sizeof *x);
    for (int64_t b = 0; b < nb; b++)
        for (int64_t m = 0; m < c->M; m++) {
            const float *a = c->A + (b * c->M + m) * c->K;
            for (int64_t k = 0; k < c->K; k++) x[k] = c->scale ? a[k] * c->scale[m] : a[k];
            for (int64_t n = 0; n < c->N; n++) {
                float v;
                if (c->bt) v = contract_def(c->K, x, 1, c->B + (b * c->N + n) * c->K, 1);
                else v = contract_def(c->K, x, 1, c->B + b * c->K * c->N + n, c->N);
                if (c->bias) {
                    v = v + c->bias[n];
                    v = v != v ? v : (v > 0.0f ? v : 0.0f); /* maximum propagates NaN */
                }
                C[(b * c->M + m) * c->N + n] = v;
            }
        }
    free(x);
}

static void run_mm(mm_case c, bool special, int kernels) {
    int64_t nb = c.batch ? c.batch : 1;
    int64_t na = nb * c.M * c.K, nbb = nb * c.K * c.N, nc = nb * c.M * c.N;
    float *A = malloc((size_t)(na ? na : 1) * sizeof *A), *B = malloc((size_t)(nbb ? nbb : 1) * sizeof *B);
    float *bias = malloc((size_t)(c.N ? c.N : 1) * sizeof *bias), *scale = malloc((size_t)(c.M ? c.M : 1) * sizeof *scale);
    float *C = malloc((size_t)(nc ? nc : 1) * sizeof *C);
    fill(A, na, special);
    fill(B, nbb, special);
    fill(bias, c.N, false);
    fill(scale, c.M, false);
    c.A = A;
    c.B = B;
    if (c.bias) c.bias = bias;
    if (c.scale) c.scale = scale;
    want_mm(&c, C);
    char what[128];
    snprintf(what, sizeof what, "%s[%lld] %lld x %lld x %lld%s%s%s", c.bt ? "A @ B^T" : "A @ B", (long long)c.batch,
             (long long)c.M, (long long)c.K, (long long)c.N, c.bias ? " +bias relu" : "", c.scale ? " scaled A" : "",
             special ? " specials" : "");
    check_all(what, build_mm, &c, C, nc, kernels);
    free(A);
    free(B);
    free(bias);
    free(scale);
    free(C);
}

static const mm_case ON = {0};
#define MARK ((const float *)&ON) /* "wanted": run_mm fills it */

Test(contract, odd_sizes) {
    static const int64_t sz[] = {1, 7, 17, 255, 257, 300};
    for (int i = 0; i < 6; i++) { /* each size on each of M, K, N, the others small */
        run_mm((mm_case){.M = sz[i], .K = 9, .N = 5}, false, 1);
        run_mm((mm_case){.M = 6, .K = sz[i], .N = 17}, false, 1);
        run_mm((mm_case){.M = 3, .K = 13, .N = sz[i]}, false, 1);
    }
    run_mm((mm_case){.M = 257, .K = 300, .N = 255}, false, 1);
    run_mm((mm_case){.M = 33, .K = 1000, .N = 40}, false, 1); /* four blocks, the last short */
}

Test(contract, specials) {
    run_mm((mm_case){.M = 17, .K = 300, .N = 33}, true, 1);
    run_mm((mm_case){.M = 40, .K = 257, .N = 9, .bt = true}, true, 1);
}

Test(contract, zero_size_axes) {
    run_mm((mm_case){.M = 5, .K = 0, .N = 7}, false, -1); /* sums of nothing: +0.0 */
    run_mm((mm_case){.M = 0, .K = 5, .N = 7}, false, -1);
    run_mm((mm_case){.M = 5, .K = 5, .N = 0}, false, -1);
}

Test(contract, transposed_batched) {
    run_mm((mm_case){.M = 19, .K = 300, .N = 21, .bt = true}, false, 1);
    run_mm((mm_case){.batch = 3, .M = 17, .K = 260, .N = 9}, false, 1);
    run_mm((mm_case){.batch = 2, .M = 7, .K = 300, .N = 5, .bt = true}, false, 1);
}

/* Matrix-vector products (A @ B^T with N = 1: one reduced axis, the inner
 * layout): the compiled CPU kernel runs groups of 8 outputs' chains side by
 * side, then the rest one by one (emit_contract.c, contraction rows). Sizes
 * around the group and the 3-thread split, a per-row prologue load
 * (scale), an epilogue (bias, relu), a batch whose vector moves along it,
 * specials, several blocks and a short last one, and zero-size axes. */
Test(contract, matvec_output_groups) {
    static const int64_t Ms[] = {1, 7, 8, 9, 16, 17, 25, 300};
    for (int i = 0; i < 8; i++) {
        run_mm((mm_case){.M = Ms[i], .K = 300, .N = 1, .bt = true}, i % 2 == 1, 1);
        run_mm((mm_case){.M = Ms[i], .K = 257, .N = 1, .bt = true, .scale = MARK, .bias = MARK}, i % 2 == 0, 1);
    }
    run_mm((mm_case){.batch = 3, .M = 17, .K = 600, .N = 1, .bt = true, .scale = MARK}, true, 1);
    run_mm((mm_case){.M = 41, .K = 1000, .N = 1, .bt = true}, false, 1); /* four blocks, the last short */
    run_mm((mm_case){.M = 19, .K = 0, .N = 1, .bt = true, .bias = MARK}, false, -1); /* sums of nothing: +0.0 */
    run_mm((mm_case){.M = 0, .K = 9, .N = 1, .bt = true}, false, -1);
}

Test(contract, prologue_epilogue_one_kernel) {
    run_mm((mm_case){.M = 70, .K = 300, .N = 50, .bias = MARK}, false, 1);
    run_mm((mm_case){.M = 70, .K = 300, .N = 50, .scale = MARK}, false, 1);
    run_mm((mm_case){.M = 33, .K = 257, .N = 65, .bias = MARK, .scale = MARK}, true, 1);
    run_mm((mm_case){.M = 4, .K = 3, .N = 5, .bias = MARK}, false, 1); /* K = 3: inlined small contraction */
}

/* matvec and a scalar factor: y[m] = sum_k A[m, k] * v[k] (v a row vector
 * [1, K] or [K]), and sum_k A[m, k] * s. */
typedef struct mv_case {
    int64_t M, K;
    const float *A, *v;
    int kind; /* 0: v [K]; 1: v [1, K]; 2: a scalar constant */
} mv_case;

static lf_node *build_mv(lf_graph *g, const void *p) {
    const mv_case *c = p;
    int64_t sa[2] = {c->M, c->K}, sr[2] = {1, c->K};
    lf_node *A = in_f32(g, 2, sa, c->A);
    lf_node *v = c->kind == 0 ? in_f32(g, 1, &c->K, c->v) : c->kind == 1 ? in_f32(g, 2, sr, c->v) : lf_const(g, LF_F32, c->v[0]);
    int ax = 1;
    return lf_reduce(g, LF_RED_SUM, lf_mul(g, A, v), 1, &ax, false);
}

Test(contract, matvec_and_broadcasts) {
    static const int64_t Ms[] = {1, 7, 300}, Ks[] = {1, 17, 257, 600};
    for (int kind = 0; kind < 3; kind++)
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 4; j++) {
                mv_case c = {.M = Ms[i], .K = Ks[j], .kind = kind};
                float *A = malloc((size_t)(c.M * c.K) * sizeof *A), *v = malloc((size_t)c.K * sizeof *v);
                float *y = malloc((size_t)c.M * sizeof *y);
                fill(A, c.M * c.K, kind == 0);
                fill(v, c.K, false);
                c.A = A;
                c.v = v;
                for (int64_t m = 0; m < c.M; m++) y[m] = contract_def(c.K, A + m * c.K, 1, v, kind == 2 ? 0 : 1);
                char what[96];
                snprintf(what, sizeof what, "matvec %lld x %lld, %s", (long long)c.M, (long long)c.K,
                         kind == 0 ? "v [K]" : kind == 1 ? "v [1, K]" : "a scalar");
                check_all(what, build_mv, &c, y, c.M, -1);
                free(A);
                free(v);
                free(y);
            }
}

/* Two contractions of one matrix added in the epilogue:
 * y[m] = sum_k A[m, k] v[k] + sum_k A[m, k] w[k] (one kernel with two
 * reductions: the compiled CPU kernel's scalar contraction rows). */
typedef struct mv2_case {
    int64_t M, K;
    const float *A, *v, *w;
} mv2_case;

static lf_node *build_mv2(lf_graph *g, const void *p) {
    const mv2_case *c = p;
    int64_t sa[2] = {c->M, c->K};
    lf_node *A = in_f32(g, 2, sa, c->A);
    int ax = 1;
    lf_node *y = lf_reduce(g, LF_RED_SUM, lf_mul(g, A, in_f32(g, 1, &c->K, c->v)), 1, &ax, false);
    lf_node *z = lf_reduce(g, LF_RED_SUM, lf_mul(g, A, in_f32(g, 1, &c->K, c->w)), 1, &ax, false);
    return lf_add(g, y, z);
}

Test(contract, two_matvecs_one_matrix) {
    static const int64_t Ms[] = {1, 9, 35}, Ks[] = {5, 300};
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 2; j++) {
            mv2_case c = {.M = Ms[i], .K = Ks[j]};
            float *A = malloc((size_t)(c.M * c.K) * sizeof *A), *v = malloc((size_t)c.K * sizeof *v);
            float *w = malloc((size_t)c.K * sizeof *w), *y = malloc((size_t)c.M * sizeof *y);
            fill(A, c.M * c.K, true);
            fill(v, c.K, false);
            fill(w, c.K, false);
            c.A = A;
            c.v = v;
            c.w = w;
            for (int64_t m = 0; m < c.M; m++)
                y[m] = contract_def(c.K, A + m * c.K, 1, v, 1) + contract_def(c.K, A + m * c.K, 1, w, 1);
            char what[96];
            snprintf(what, sizeof what, "two matvecs %lld x %lld", (long long)c.M, (long long)c.K);
            check_all(what, build_mv2, &c, y, c.M, -1);
            free(A);
            free(v);
            free(w);
            free(y);
        }
}

/* The product is an output too: it is stored, and the contraction still
 * folds its operands (not the rounded product). */
Test(contract, product_also_an_output) {
    lf_ctx *cs[] = {ctx_of(LF_BACKEND_REFERENCE, 1, 0, 1), ctx_of(LF_BACKEND_CPU, 2, LF_COMPILE_NEVER, 1),
                    ctx_of(LF_BACKEND_CPU, 2, LF_COMPILE_REQUIRE, 1), ctx_of(LF_BACKEND_CPU, 2, LF_COMPILE_REQUIRE, 0)};
    int64_t M = 9, K = 300, N = 11, sa[2] = {M, K}, sb[2] = {K, N};
    float *A = malloc((size_t)(M * K) * sizeof *A), *B = malloc((size_t)(K * N) * sizeof *B), C[99], got[99];
    fill(A, M * K, false);
    fill(B, K * N, false);
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) C[m * N + n] = contract_def(K, A + m * K, 1, B + n, N);
    float *P = malloc((size_t)(M * K * N) * sizeof *P);
    for (int r = 0; r < 4; r++) {
        cur = cs[r];
        lf_graph *g = lf_graph_new(cs[r]);
        lf_node *p = lf_mul(g, lf_expand_dims(g, in_f32(g, 2, sa, A), 2), lf_expand_dims(g, in_f32(g, 2, sb, B), 0));
        int ax = 1;
        lf_node *outs[2] = {lf_reduce(g, LF_RED_SUM, p, 1, &ax, false), p};
        lf_buffer *bs[2] = {lf_buffer_new_like(cs[r], outs[0]), lf_buffer_new_like(cs[r], outs[1])};
        cr_assert_eq(lf_eval(g, 2, outs, bs), LF_OK, "%s", lf_errmsg(cs[r]));
        lf_buffer_read(bs[0], got, sizeof got);
        int64_t at = 0;
        cr_expect(same_bits(got, C, M * N, &at), "run %d: element %lld", r, (long long)at);
        lf_buffer_read(bs[1], P, (size_t)(M * K * N) * sizeof *P);
        cr_expect_eq(P[(5 * K + 7) * N + 3], A[5 * K + 7] * B[7 * N + 3]);
        lf_graph_free(g);
        lf_ctx_destroy(cs[r]);
    }
    free(A);
    free(B);
    free(P);
}

/* ---- the predicate --------------------------------------------------------------------- */

Test(contract, predicate) {
    lf_ctx *c = ctx_of(LF_BACKEND_REFERENCE, 1, 0, 1);
    lf_graph *g = lf_graph_new(c);
    int64_t s2[2] = {4, 5}, s3[3] = {4, 5, 6};
    lf_node *A = lf_input(g, lf_buffer_new(c, LF_F32, 2, s2));
    lf_node *B = lf_input(g, lf_buffer_new(c, LF_F32, 2, (int64_t[]){5, 6}));
    lf_node *A64 = lf_cast(g, A, LF_F64), *B64 = lf_cast(g, B, LF_F64);
    lf_node *Ai = lf_cast(g, A, LF_I32), *Bi = lf_cast(g, B, LF_I32);
    lf_node *prod = lf_mul(g, lf_expand_dims(g, A, 2), lf_expand_dims(g, B, 0));
    int ax1 = 1, ax12[2] = {1, 2}, ax0 = 0;
    graph_contract k;
    cr_expect(graph_contraction(lf_reduce(g, LF_RED_SUM, prod, 1, &ax1, false), &k), "matmul");
    cr_expect_eq(k.axis, 1);
    cr_expect(graph_contraction(lf_reduce(g, LF_RED_SUM, prod, 1, &ax1, true), NULL), "keepdims");
    cr_expect(!graph_contraction(lf_reduce(g, LF_RED_SUM, prod, 2, ax12, false), NULL), "two reduced axes");
    cr_expect(!graph_contraction(lf_reduce(g, LF_RED_SUM, prod, 0, NULL, false), NULL), "every axis");
    cr_expect(!graph_contraction(lf_reduce(g, LF_RED_MEAN, prod, 1, &ax1, false), NULL), "mean");
    cr_expect(!graph_contraction(lf_reduce(g, LF_RED_PROD, prod, 1, &ax1, false), NULL), "prod");
    cr_expect(!graph_contraction(lf_reduce(g, LF_RED_MAX, prod, 1, &ax1, false), NULL), "max");
    lf_node *p64 = lf_mul(g, lf_expand_dims(g, A64, 2), lf_expand_dims(g, B64, 0));
    cr_expect(!graph_contraction(lf_reduce(g, LF_RED_SUM, p64, 1, &ax1, false), NULL), "f64");
    lf_node *pi = lf_mul(g, lf_expand_dims(g, Ai, 2), lf_expand_dims(g, Bi, 0));
    cr_expect(!graph_contraction(lf_reduce(g, LF_RED_SUM, pi, 1, &ax1, false), NULL), "i32");
    lf_node *mixed = lf_mul(g, lf_expand_dims(g, A, 2), lf_expand_dims(g, B64, 0));
    cr_expect(!graph_contraction(lf_reduce(g, LF_RED_SUM, mixed, 1, &ax1, false), NULL), "f32 * f64");
    lf_node *padd = lf_add(g, lf_expand_dims(g, A, 2), lf_expand_dims(g, B, 0));
    cr_expect(!graph_contraction(lf_reduce(g, LF_RED_SUM, padd, 1, &ax1, false), NULL), "a sum of sums");
    lf_node *pneg = lf_neg(g, prod);
    cr_expect(!graph_contraction(lf_reduce(g, LF_RED_SUM, pneg, 1, &ax1, false), NULL), "-(x * y)");
    lf_node *rowdot = lf_mul(g, A, lf_add(g, A, lf_const(g, LF_F32, 1)));
    cr_expect(!graph_contraction(lf_reduce(g, LF_RED_SUM, rowdot, 1, &ax1, false), NULL), "row-wise dot");
    lf_node *mv = lf_mul(g, A, lf_input(g, lf_buffer_new(c, LF_F32, 1, (int64_t[]){5})));
    cr_expect(graph_contraction(lf_reduce(g, LF_RED_SUM, mv, 1, &ax1, false), NULL), "matvec");
    cr_expect(graph_contraction(lf_reduce(g, LF_RED_SUM, lf_mul(g, A, lf_const(g, LF_F32, 2)), 1, &ax1, false), NULL),
              "times a scalar");
    lf_node *full = lf_mul(g, lf_input(g, lf_buffer_new(c, LF_F32, 1, (int64_t[]){5})),
                           lf_input(g, lf_buffer_new(c, LF_F32, 1, (int64_t[]){5})));
    cr_expect(!graph_contraction(lf_reduce(g, LF_RED_SUM, full, 1, &ax0, false), NULL), "a dot: no kept axis");
    lf_node *bc = lf_mul(g, lf_broadcast_to(g, lf_expand_dims(g, A, 2), 3, s3), lf_expand_dims(g, B, 0));
    cr_expect(graph_contraction(lf_reduce(g, LF_RED_SUM, bc, 1, &ax1, false), NULL), "one operand broadcast");
    lf_node *marked = lf_mul(g, lf_expand_dims(g, A, 2), lf_expand_dims(g, B, 0));
    lf_node *mred = lf_reduce(g, LF_RED_SUM, marked, 1, &ax1, false);
    cr_expect(graph_contraction(mred, NULL));
    lf_node_materialize(g, marked);
    cr_expect(!graph_contraction(mred, NULL), "a marked product");
    lf_graph_free(g);
    lf_ctx_destroy(c);
}
