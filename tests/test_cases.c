/* tests/test_cases.c: the fused plan of every seed example and bench case,
 * pinned: kernel count and temporary bytes (lf_eval_stats.kernels and
 * bytes_materialized) with fusion on, exact.
 *
 * Results are checked elsewhere (test_fusion, test_cuda_codegen, the bench's
 * own checks); this suite exists because a planner change can keep every
 * result right and still store a temporary it did not store before (spca's
 * [p, S] product came back that way, 264 MB at the bench's size, and every
 * result test passed). Each case is built at a small size on the CPU
 * backend's schedule interpreter (no C compiler: fast under ASan and
 * valgrind) and evaluated once; its stats must equal the table below.
 *
 * What must stay true: every entry of seed_examples[] and
 * seed_more_examples[] (tools/seed_examples.c, the bench's seed cases) has a
 * row here (a new example without one fails), and the bench's own-runner
 * cases (benches/lazyfuse_bench.c: const_sweep, inplace_axpy, sort_f32,
 * argsort_rows, topk_rows, spca) are rebuilt here as the bench builds them.
 * A changed figure is a planner decision changed: update the row only with
 * a reason in its comment.
 */
#include "testutil.h"

#include "seed_examples.h"
#include "spca.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A fused context on the schedule interpreter: the plan is the compiled
 * backend's, no kernel is compiled. */
static lf_ctx *interp_ctx(void) {
    lf_ctx_options o;
    lf_ctx_options_init(&o);
    o.fusion = 1;
    o.backend = LF_BACKEND_CPU;
    o.compile = LF_COMPILE_NEVER;
    o.threads = 1;
    lf_ctx *ctx = lf_ctx_new(&o);
    cr_assert(ctx != NULL, "lf_ctx_new: %s", lf_errmsg(NULL));
    return ctx;
}

/* Evaluates outs into fresh buffers (or into dsts when given) and returns the stats. */
static lf_eval_stats eval_stats(lf_ctx *ctx, lf_graph *g, const char *name, int n, lf_node *const *outs,
                                lf_buffer *const *dsts) {
    lf_buffer *own[8] = {NULL};
    cr_assert(n <= 8);
    for (int i = 0; !dsts && i < n; i++) {
        own[i] = lf_buffer_new_like(ctx, outs[i]);
        cr_assert(own[i] != NULL, "%s: %s", name, lf_errmsg(ctx));
    }
    cr_assert_eq(lf_eval(g, n, outs, dsts ? dsts : own), LF_OK, "%s: %s", name, lf_errmsg(ctx));
    lf_eval_stats st;
    cr_assert_eq(lf_ctx_last_stats(ctx, &st), LF_OK);
    for (int i = 0; i < n; i++) lf_buffer_free(own[i]);
    if (getenv("LF_TEST_VERBOSE"))
        fprintf(stderr, "%-18s %d kernel(s), %zu bytes materialized\n", name, st.kernels, st.bytes_materialized);
    return st;
}

typedef struct expect {
    const char *name;   /* the example's or bench case's name */
    int64_t n;          /* the size built (seed_example.build's n; own cases: see their builders) */
    int kernels;        /* lf_eval_stats.kernels, fused */
    size_t temp;        /* lf_eval_stats.bytes_materialized, fused */
} expect;

/* ---- the seed examples (tools/seed_examples.c) ------------------------------------------- */

static const expect seed_expect[] = {
    /* elementwise: one kernel, nothing stored */
    {"gaussian_pdf", 1000, 1, 0},
    {"polar_distance", 1000, 1, 0},
    {"pow_const", 1000, 1, 0},            /* ** of a constant node */
    {"hypot", 1000, 1, 0},
    {"triad", 1000, 1, 0},
    {"sum_of_squares", 1000, 1, 0},       /* map -> reduce */
    {"softmax_rows", 8, 1, 0},            /* [4096, 8]: one row kernel, max, sum and divide */
    {"matmul_zip_reduce", 16, 1, 0},      /* a contraction: the n^3 product is never stored */
    {"chain8", 1000, 1, 0},
    {"chain", 1000, 1, 0},                /* 32 ops, under FUSE_MAX_OPS */
    {"random_fused", 1000, 1, 0},         /* Philox in the kernel */
    {"random_fill", 1000, 1, 0},
    {"cumsum", 1000, 1, 0},
    {"cumsum_rows", 8, 1, 0},
    {"scan_fused", 1000, 1, 0},           /* map -> scan -> map */
    {"gather_perm", 1000, 1, 0},          /* the gather is a load */
    {"gather_rows", 8192, 1, 0},          /* [4096, 2] */
    {"histogram", 1000, 1, 0},            /* map -> scatter */
    {"stencil9", 1000, 1, 0},             /* nine slices, one input */
    {"conv3x3", 16, 1, 0},
    /* seed_more_examples */
    {"layer_norm", 8, 1, 0},              /* mean, variance, epilogue: one row kernel */
    {"matmul_bias_relu", 16, 1, 0},       /* relu(A @ B + bias): the epilogue joins the GEMM */
    {"matmul_scaled", 16, 1, 0},          /* the row scale is a prologue map */
    {"batched_matmul", 16, 1, 0},
    {"matvec", 16, 1, 0},
    /* issue 30's cases (pinned as they are; its targets in the comments) */
    {"stencil5x5", 16, 1, 0},             /* 25 slices */
    {"conv1d_31", 1000, 1, 0},            /* 31 slices */
    {"bincount2", 1000, 2, 0},            /* target: both histograms in one kernel */
    {"embedding", 1000, 1, 0},            /* lf_take: a load */
    {"kmeans_assign", 1000, 2, 62 * 16 * 4}, /* target: one kernel, the [62, 16] distances not stored */
};

static const expect *seed_row(const char *name) {
    for (size_t i = 0; i < sizeof seed_expect / sizeof seed_expect[0]; i++)
        if (!strcmp(seed_expect[i].name, name)) return &seed_expect[i];
    return NULL;
}

static void check_seed(const seed_example *ex) {
    const expect *e = seed_row(ex->name);
    cr_assert(e != NULL, "seed example %s has no row in test_cases.c's seed_expect[]", ex->name);
    lf_ctx *ctx = interp_ctx();
    lf_graph *g = lf_graph_new(ctx);
    lf_node *outs[SEED_MAX_OUTS];
    int n = ex->build(ctx, g, e->n, outs);
    cr_assert(n > 0, "%s: %s", ex->name, lf_errmsg(ctx));
    lf_eval_stats st = eval_stats(ctx, g, ex->name, n, outs, NULL);
    cr_expect_eq(st.kernels, e->kernels, "%s: %d kernels, expected %d", ex->name, st.kernels, e->kernels);
    cr_expect_eq(st.bytes_materialized, e->temp, "%s: %zu bytes materialized, expected %zu", ex->name,
                 st.bytes_materialized, e->temp);
    lf_graph_free(g);
    lf_ctx_destroy(ctx);
}

Test(cases, seed_examples) {
    for (int i = 0; i < seed_nexamples; i++) check_seed(&seed_examples[i]);
}

Test(cases, seed_more_examples) {
    for (int i = 0; i < seed_nmore_examples; i++) check_seed(&seed_more_examples[i]);
}

/* ---- the bench's own-runner cases, built as benches/lazyfuse_bench.c builds them ---------- */

enum { S = 64, P = 1000, D = 3, K = 10 }; /* the bench's spca and topk_rows at 64 samples */

static lf_node *f32_input(lf_ctx *ctx, lf_graph *g, int ndim, const int64_t *shape, uint32_t seed) {
    lf_buffer *b = lf_buffer_new(ctx, LF_F32, ndim, shape);
    cr_assert(b != NULL);
    int64_t n = lf_buffer_numel(b);
    float *h = malloc((size_t)(n ? n : 1) * sizeof *h);
    cr_assert(h != NULL);
    seed_fill_f32(h, n, -1, 1, seed);
    cr_assert_eq(lf_buffer_write(b, h, (size_t)n * sizeof *h), LF_OK);
    free(h);
    lf_node *x = lf_input(g, b);
    lf_buffer_free(b);
    return x;
}

static void check_stats(const char *name, lf_eval_stats st, int kernels, size_t temp) {
    cr_expect_eq(st.kernels, kernels, "%s: %d kernels, expected %d", name, st.kernels, kernels);
    cr_expect_eq(st.bytes_materialized, temp, "%s: %zu bytes materialized, expected %zu", name,
                 st.bytes_materialized, temp);
}

/* const_sweep: gaussian_pdf with lf_const mean and sigma, one kernel */
Test(cases, const_sweep) {
    lf_ctx *ctx = interp_ctx();
    lf_graph *g = lf_graph_new(ctx);
    int64_t n = 1000;
    lf_node *x = f32_input(ctx, g, 1, &n, 1);
    lf_fn *f = lf_fn_parse(g, "(x, m, s) -> exp(-0.5*((x-m)/s)**2) / (s*2.5066282746)");
    lf_node *y = lf_zipwith(g, f, 3, (lf_node *[]){x, lf_const(g, LF_F32, 0.0), lf_const(g, LF_F32, 1.25)});
    cr_assert(y != NULL, "%s", lf_graph_errmsg(g));
    check_stats("const_sweep", eval_stats(ctx, g, "const_sweep", 1, &y, NULL), 1, 0);
    lf_graph_free(g);
    lf_ctx_destroy(ctx);
}

/* inplace_axpy: x = x*0.5 + 1 into x's own buffer, one kernel */
Test(cases, inplace_axpy) {
    lf_ctx *ctx = interp_ctx();
    lf_graph *g = lf_graph_new(ctx);
    int64_t n = 1000;
    lf_buffer *xb = lf_buffer_new(ctx, LF_F32, 1, &n);
    cr_assert(xb != NULL);
    float h[1000];
    seed_fill_f32(h, n, -1, 1, 2);
    cr_assert_eq(lf_buffer_write(xb, h, sizeof h), LF_OK);
    lf_node *y = lf_add(g, lf_mul(g, lf_input(g, xb), lf_const(g, LF_F32, 0.5)), lf_const(g, LF_F32, 1));
    cr_assert(y != NULL, "%s", lf_graph_errmsg(g));
    check_stats("inplace_axpy", eval_stats(ctx, g, "inplace_axpy", 1, &y, &xb), 1, 0);
    lf_buffer_free(xb);
    lf_graph_free(g);
    lf_ctx_destroy(ctx);
}

/* sort_f32 and argsort_rows: the sort's own kernel, the keys read in its
 * first pass; the sort's work memory is the backend's, not a temporary */
Test(cases, sort_f32_argsort_rows) {
    lf_ctx *ctx = interp_ctx();
    lf_graph *g = lf_graph_new(ctx);
    int64_t n = 1000, sh[2] = {4096, 2};
    lf_node *s = lf_sort(g, f32_input(ctx, g, 1, &n, 43), 0, false);
    lf_node *a = lf_argsort(g, f32_input(ctx, g, 2, sh, 47), 1, false);
    cr_assert(s && a, "%s", lf_graph_errmsg(g));
    check_stats("sort_f32", eval_stats(ctx, g, "sort_f32", 1, &s, NULL), 1, 0);
    check_stats("argsort_rows", eval_stats(ctx, g, "argsort_rows", 1, &a, NULL), 1, 0);
    lf_graph_free(g);
    lf_ctx_destroy(ctx);
}

/* topk_rows: values and indices are siblings of one kernel */
Test(cases, topk_rows) {
    lf_ctx *ctx = interp_ctx();
    lf_graph *g = lf_graph_new(ctx);
    int64_t sh[2] = {S, P};
    lf_node *x = f32_input(ctx, g, 2, sh, 53);
    lf_node *outs[2] = {lf_topk(g, x, K, 1, true), lf_argtopk(g, x, K, 1, true)};
    cr_assert(outs[0] && outs[1], "%s", lf_graph_errmsg(g));
    check_stats("topk_rows", eval_stats(ctx, g, "topk_rows", 2, outs, NULL), 1, 0);
    lf_graph_free(g);
    lf_ctx_destroy(ctx);
}

/* spca (tools/spca_graph.c), outputs as the bench asks for them: opt_x, best,
 * val. 6 kernels: Cn = C / |C| over [d, S] (the random normal and the
 * column norm, a small sum, computed in it), the top-k over [p, S] whose key
 * pass computes A = Vd @ Cn from the stored Cn (the small-reduction rule:
 * Cn is expensive, so it is stored rather than A), val's sum over k, the
 * argmax and max of val, best reshaped to [1, 1] (a gather's index is read
 * from memory: plan.c's Gather rule) and the scatter of opt_x. Stored:
 * Cn [3, S] f32 768, the top-k's values [k, S] f32 2,560 and indices
 * [k, S] i64 5,120, val [S] f32 256 and the [1, 1] i64 index 8: 8,712
 * bytes. With A stored it would be 256,000 more. */
Test(cases, spca) {
    lf_ctx *ctx = interp_ctx();
    lf_graph *g = lf_graph_new(ctx);
    int64_t sh[2] = {P, D};
    spca_nodes o;
    cr_assert_eq(spca_graph(g, f32_input(ctx, g, 2, sh, SPCA_VD_SEED), S, K, 2014, &o), LF_OK, "%s",
                 lf_graph_errmsg(g));
    lf_node *outs[3] = {o.opt_x, o.best, o.val};
    lf_eval_stats st = eval_stats(ctx, g, "spca", 3, outs, NULL);
    check_stats("spca", st, 6, 3 * S * 4 + K * S * 4 + K * S * 8 + S * 4 + 8);
    lf_graph_free(g);
    lf_ctx_destroy(ctx);
}
