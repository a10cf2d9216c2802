/* tests/test_fusion.c: the fusion planner and the schedule interpreter.
 *
 * - Structural tests: the seed examples (gaussian_pdf, polar_distance as one
 *   parsed fn and as a DAG of lf_apply nodes, hypot, a 32-op chain,
 *   sum_of_squares, matmul as a zip-reduce) plan to one kernel with no
 *   temporaries; with fusion off every op is its own kernel; epilogues,
 *   barriers and the multiple-consumer rule do what plan.c says.
 * - Row kernels and horizontal fusion: softmax (keepdims or reshaped back)
 *   and layer norm (one or two trailing axes) are one kernel with no
 *   temporary; row values that are outputs are stored by the epilogue;
 *   where the row rule does not apply the old rules take over; several
 *   outputs over one space and several reductions of one input are one
 *   kernel; merges respect LF_MAX_ARGS and FUSE_MAX_STORES; allocation
 *   failures inside row kernels are clean; a chain of 3 x FUSE_MAX_OPS
 *   operations is split into 3 kernels; 10^4 outputs of one eval are
 *   right (planned and on the reused program); one scan of a root for a
 *   kernel it might join costs a constant, not the root's instances (issue 26).
 * - Differential test: random DAGs (mixed ops and dtypes, broadcasting,
 *   views with transposes and negative-step slices, reductions with keepdims,
 *   shared nodes, several outputs, NaN/Inf inputs, zero-size and odd shapes;
 *   softmax-, layer-norm- and three-pass-like row patterns over trailing or
 *   arbitrary axes, sibling reductions, outputs chosen over one space)
 *   evaluated fused, unfused, and by the reference evaluator, each output
 *   compared as its cone allows (tests/diffcheck.h): integers and bool as
 *   bytes; floats bit for bit on the interpreter, and compiled unless a
 *   libmvec function or a float sum is in the output's cone (then within
 *   the cone's bound); any NaN for a NaN. A compiled output whose cone has a
 *   float sum that is cancellation noise is skipped, noted (tu_note) and
 *   counted. LF_TEST_SEED replays a run; LF_TEST_GRAPH=i runs only graph i
 *   of it.
 */
#include "backend_arg.h"
#include "diffcheck.h"
#include "randgraph.h"
#include "testutil.h"

#include "backends/cpu/cpu.h"
#include "fusion/fusion.h"
#include "graph/graph.h"

#include <criterion/criterion.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *GAUSS = "(x, m, s) -> exp(-0.5*((x-m)/s)**2) / (s*2.5066282746)";
static const char *POLAR =
    "(r1, t1, r2, t2) -> sqrt((r1*cos(t1) - r2*cos(t2))**2 + (r1*sin(t1) - r2*sin(t2))**2)";

/* A context on the default backend with fusion on (1) or off (0). */
/* The backend the fused and unfused plans run on: CUDA with
 * LF_TEST_BACKEND=cuda (scripts/gpu-check.sh), else the CPU. */
static lf_backend planned_backend(void) {
    lf_backend b;
    return backend_from_name(getenv("LF_TEST_BACKEND"), &b) && b == LF_BACKEND_CUDA ? LF_BACKEND_CUDA : LF_BACKEND_CPU;
}

static lf_ctx *fctx(int fusion) {
    lf_ctx_options o;
    lf_ctx_options_init(&o);
    o.fusion = fusion;
    o.backend = planned_backend();
    lf_ctx *ctx = lf_ctx_new(&o);
    if (!ctx && o.backend == LF_BACKEND_CUDA) cr_skip_test("no usable CUDA device: %s", lf_errmsg(NULL));
    cr_assert(ctx != NULL, "lf_ctx_new: %s", lf_errmsg(NULL));
    cr_assert_eq(lf_ctx_backend(ctx), o.backend);
    return ctx;
}

static lf_buffer *ramp(lf_ctx *ctx, lf_dtype t, int ndim, const int64_t *shape) {
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= shape[d];
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = (double)((i * 7) % 13) / 4.0 - 1.3;
    lf_buffer *b = tu_buf(ctx, t, ndim, shape, v);
    free(v);
    return b;
}

static int compare_output(lf_ctx *ctx, lf_graph *g, lf_node *out, const void *got, const void *want,
                          const char *what, char *msg, int cap, bool scalar_math);

/* Evaluates outs on ctx (fused as configured), checks against the reference
 * backend on the same graph as far as each output's cone allows
 * (compare_output), and returns the stats of the fused eval. */
static lf_eval_stats eval_checked(lf_ctx *ctx, lf_graph *g, int n, lf_node **outs) {
    lf_buffer *got[4], *want[4];
    for (int i = 0; i < n; i++) {
        got[i] = lf_buffer_new_like(ctx, outs[i]);
        want[i] = lf_buffer_new_like(ctx, outs[i]);
        cr_assert(got[i] && want[i]);
    }
    cr_assert_eq(lf_eval(g, n, outs, got), LF_OK, "eval: %s", lf_errmsg(ctx));
    lf_eval_stats st;
    cr_assert_eq(lf_ctx_last_stats(ctx, &st), LF_OK);
    lf_backend b = ctx->backend;
    ctx->backend = LF_BACKEND_REFERENCE;
    cr_assert_eq(lf_eval(g, n, outs, want), LF_OK, "reference eval: %s", lf_errmsg(ctx));
    ctx->backend = b;
    for (int i = 0; i < n; i++) {
        void *a = tu_read_raw(got[i]), *w = tu_read_raw(want[i]);
        char what[32], msg[600];
        snprintf(what, sizeof what, "output %d", i);
        cr_assert_eq(compare_output(ctx, g, outs[i], a, w, what, msg, sizeof msg, false), 1, "%s", msg);
        free(a);
        free(w);
        lf_buffer_free(got[i]);
        lf_buffer_free(want[i]);
    }
    return st;
}

typedef lf_node *(*builder)(lf_graph *g, lf_ctx *ctx);

/* Runs one example with fusion on and off; returns both stats. */
static void run_example(const char *name, builder build, lf_eval_stats *on, lf_eval_stats *off) {
    for (int f = 1; f >= 0; f--) {
        lf_ctx *ctx = fctx(f);
        lf_graph *g = lf_graph_new(ctx);
        lf_node *out = build(g, ctx);
        cr_assert(out != NULL, "%s: %s", name, lf_graph_errmsg(g));
        *(f ? on : off) = eval_checked(ctx, g, 1, &out);
        lf_graph_free(g);
        lf_ctx_destroy(ctx);
    }
    if (getenv("LF_TEST_VERBOSE"))
        tu_note("%-22s fused: %d kernel(s), %zu temp bytes | unfused: %d kernels, %zu temp bytes\n",
                name, on->kernels, on->bytes_materialized, off->kernels, off->bytes_materialized);
}

/* ---- the seed examples -------------------------------------------------------- */

enum { N = 1000 };

static lf_node *gaussian_pdf(lf_graph *g, lf_ctx *ctx) {
    int64_t n = N;
    lf_node *x = lf_input(g, ramp(ctx, LF_F32, 1, &n));
    return lf_zipwith(g, lf_fn_parse(g, GAUSS), 3,
                      (lf_node *[]){x, lf_const(g, LF_F32, 0.0), lf_const(g, LF_F32, 1.0)});
}

static lf_node *polar_parsed(lf_graph *g, lf_ctx *ctx) {
    int64_t n = N;
    lf_node *in[4];
    for (int i = 0; i < 4; i++) in[i] = lf_input(g, ramp(ctx, LF_F64, 1, &n));
    return lf_zipwith(g, lf_fn_parse(g, POLAR), 4, in);
}

static lf_node *polar_dag(lf_graph *g, lf_ctx *ctx) {
    int64_t n = N;
    lf_node *r1 = lf_input(g, ramp(ctx, LF_F64, 1, &n)), *t1 = lf_input(g, ramp(ctx, LF_F64, 1, &n));
    lf_node *r2 = lf_input(g, ramp(ctx, LF_F64, 1, &n)), *t2 = lf_input(g, ramp(ctx, LF_F64, 1, &n));
    lf_node *two = lf_const(g, LF_F64, 2);
    lf_node *dx = lf_sub(g, lf_mul(g, r1, lf_cos(g, t1)), lf_mul(g, r2, lf_cos(g, t2)));
    lf_node *dy = lf_sub(g, lf_mul(g, r1, lf_sin(g, t1)), lf_mul(g, r2, lf_sin(g, t2)));
    return lf_sqrt(g, lf_add(g, lf_pow(g, dx, two), lf_pow(g, dy, two)));
}

static lf_node *hypot_dag(lf_graph *g, lf_ctx *ctx) {
    int64_t n = N;
    lf_node *x = lf_abs(g, lf_input(g, ramp(ctx, LF_F32, 1, &n)));
    lf_node *y = lf_abs(g, lf_input(g, ramp(ctx, LF_F32, 1, &n)));
    lf_node *t = lf_minimum(g, x, y), *m = lf_maximum(g, x, y);
    t = lf_div(g, t, m);
    lf_node *one = lf_const(g, LF_F32, 1);
    return lf_mul(g, m, lf_sqrt(g, lf_add(g, one, lf_mul(g, t, t))));
}

static lf_node *chain32(lf_graph *g, lf_ctx *ctx) {
    int64_t n = N;
    lf_node *x = lf_input(g, ramp(ctx, LF_F32, 1, &n));
    lf_node *c = lf_const(g, LF_F32, 0.75);
    for (int i = 0; i < 32; i++) {
        switch (i % 4) {
        case 0: x = lf_add(g, x, c); break;
        case 1: x = lf_mul(g, x, c); break;
        case 2: x = lf_sin(g, x); break;
        default: x = lf_neg(g, x); break;
        }
    }
    return x;
}

static lf_node *sum_of_squares(lf_graph *g, lf_ctx *ctx) {
    int64_t n = N;
    lf_node *x = lf_input(g, ramp(ctx, LF_F32, 1, &n));
    return lf_reduce(g, LF_RED_SUM, lf_mul(g, x, x), 0, NULL, false);
}

enum { MI = 7, MJ = 9, MK = 5 };

static lf_node *matmul_zip_reduce(lf_graph *g, lf_ctx *ctx) {
    lf_node *a = lf_input(g, ramp(ctx, LF_F64, 2, (int64_t[]){MI, MJ}));
    lf_node *b = lf_input(g, ramp(ctx, LF_F64, 2, (int64_t[]){MJ, MK}));
    lf_node *p = lf_mul(g, lf_expand_dims(g, a, 2), lf_expand_dims(g, b, 0)); /* [I,J,K] */
    return lf_reduce(g, LF_RED_SUM, p, 1, (int[]){1}, false);
}

static lf_node *norm_epilogue(lf_graph *g, lf_ctx *ctx) {
    lf_node *x = lf_input(g, ramp(ctx, LF_F32, 2, (int64_t[]){6, 11}));
    lf_node *s = lf_reduce(g, LF_RED_SUM, lf_mul(g, x, x), 1, (int[]){1}, false);
    return lf_add(g, lf_sqrt(g, s), lf_const(g, LF_F32, 1));
}

Test(fusion, gaussian_pdf_one_kernel) {
    lf_eval_stats on, off;
    run_example("gaussian_pdf", gaussian_pdf, &on, &off);
    cr_expect_eq(on.kernels, 1);
    cr_expect_eq(on.bytes_materialized, 0);
    cr_expect_eq(on.bytes_read, N * 4, "read %zu", on.bytes_read);
    cr_expect_eq(on.bytes_written, N * 4, "written %zu", on.bytes_written);
    cr_expect_eq(off.kernels, 1); /* one zipwith of one parsed fn; constants are literals */
    cr_expect_eq(off.bytes_materialized, 0);
    cr_expect_eq(on.temp_bytes_avoided, 0);
}

Test(fusion, polar_distance_parsed_one_kernel) {
    lf_eval_stats on, off;
    run_example("polar_distance (fn)", polar_parsed, &on, &off);
    cr_expect_eq(on.kernels, 1);
    cr_expect_eq(on.bytes_materialized, 0);
    cr_expect_eq(off.kernels, 1);
}

Test(fusion, polar_distance_dag_one_kernel) {
    lf_eval_stats on, off;
    run_example("polar_distance (DAG)", polar_dag, &on, &off);
    cr_expect_eq(on.kernels, 1);
    cr_expect_eq(on.bytes_materialized, 0);
    cr_expect_eq(off.kernels, 14); /* 14 ops; the constant 2 is a literal */
    cr_expect_eq(off.bytes_materialized, 13 * N * 8);
    cr_expect_eq(on.temp_bytes_avoided, off.bytes_materialized);
}

Test(fusion, hypot_one_kernel) {
    lf_eval_stats on, off;
    run_example("hypot", hypot_dag, &on, &off);
    cr_expect_eq(on.kernels, 1);
    cr_expect_eq(on.bytes_materialized, 0);
    cr_expect_eq(off.kernels, 9); /* 9 ops; the constant 1 is a literal */
}

Test(fusion, chain_of_32_ops_one_kernel) {
    lf_eval_stats on, off;
    run_example("chain32", chain32, &on, &off);
    cr_expect_eq(on.kernels, 1);
    cr_expect_eq(on.bytes_materialized, 0);
    cr_expect_eq(off.kernels, 32);
    cr_expect_eq(off.bytes_materialized, 31 * N * 4);
}

Test(fusion, sum_of_squares_one_kernel) {
    lf_eval_stats on, off;
    run_example("sum_of_squares", sum_of_squares, &on, &off);
    cr_expect_eq(on.kernels, 1);
    cr_expect_eq(on.bytes_materialized, 0);
    cr_expect_eq(on.bytes_read, N * 4);
    cr_expect_eq(on.bytes_written, 4);
    cr_expect_eq(off.kernels, 2);
    cr_expect_eq(off.bytes_materialized, N * 4);
    cr_expect_eq(on.temp_bytes_avoided, N * 4);
}

Test(fusion, matmul_zip_reduce_one_kernel_no_temporary) {
    lf_eval_stats on, off;
    run_example("matmul_zip_reduce", matmul_zip_reduce, &on, &off);
    cr_expect_eq(on.kernels, 1);
    cr_expect_eq(on.bytes_materialized, 0);
    cr_expect_eq(on.bytes_read, (MI * MJ + MJ * MK) * 8);
    cr_expect_eq(on.bytes_written, MI * MK * 8);
    cr_expect_eq(off.kernels, 2);
    cr_expect_eq(off.bytes_materialized, MI * MJ * MK * 8); /* the I x J x K product */
}

Test(fusion, reduce_then_map_is_an_epilogue) {
    lf_eval_stats on, off;
    run_example("sqrt(sum(x*x))+1 rows", norm_epilogue, &on, &off);
    cr_expect_eq(on.kernels, 1);
    cr_expect_eq(on.bytes_materialized, 0);
    cr_expect_eq(off.kernels, 4); /* mul, sum, sqrt, add */
}

/* ---- manual control and the multiple-consumer rule ---------------------------------- */

Test(fusion, materialize_is_a_barrier) {
    lf_ctx *ctx = fctx(1);
    lf_graph *g = lf_graph_new(ctx);
    int64_t n = 100;
    lf_node *x = lf_input(g, ramp(ctx, LF_F32, 1, &n));
    lf_node *sq = lf_mul(g, x, x);
    lf_node *s = lf_reduce(g, LF_RED_SUM, sq, 0, NULL, false);
    cr_assert_eq(lf_node_materialize(g, sq), LF_OK);
    lf_eval_stats st = eval_checked(ctx, g, 1, &s);
    cr_expect_eq(st.kernels, 2);
    cr_expect_eq(st.bytes_materialized, 400);
    cr_expect_eq(lf_node_materialize(g, NULL), LF_ERR_NULL);
    cr_expect_eq(lf_node_materialize(NULL, sq), LF_ERR_NULL);
    lf_graph_free(g);
    lf_ctx_destroy(ctx);
}

Test(fusion, shared_cheap_node_is_recomputed) {
    lf_ctx *ctx = fctx(1);
    lf_graph *g = lf_graph_new(ctx);
    int64_t n = 50;
    lf_node *x = lf_input(g, ramp(ctx, LF_F64, 1, &n));
    lf_node *y = lf_add(g, lf_mul(g, x, x), x); /* 2 cheap ops */
    lf_node *a = lf_reduce(g, LF_RED_SUM, y, 0, NULL, false);
    lf_node *b = lf_reduce(g, LF_RED_MAX, y, 0, NULL, false);
    lf_node *rev = lf_slice(g, y, 0, LF_NONE, LF_NONE, -1);
    lf_node *c = lf_sub(g, y, rev); /* y at two index maps in one kernel */
    lf_eval_stats st = eval_checked(ctx, g, 3, (lf_node *[]){a, b, c});
    cr_expect_eq(st.kernels, 2); /* sum and max share a pass (horizontal); c is elementwise */
    cr_expect_eq(st.bytes_materialized, 0);
    lf_graph_free(g);
    lf_ctx_destroy(ctx);
}

Test(fusion, shared_expensive_node_is_materialized) {
    lf_ctx *ctx = fctx(1);
    lf_graph *g = lf_graph_new(ctx);
    lf_node *x = lf_input(g, ramp(ctx, LF_F64, 2, (int64_t[]){5, 10}));
    lf_node *y = lf_exp(g, x); /* transcendental */
    /* reductions over different axes: two kernels, so y is computed once, stored */
    lf_node *a = lf_reduce(g, LF_RED_SUM, y, 1, (int[]){1}, false);
    lf_node *b = lf_reduce(g, LF_RED_MAX, y, 1, (int[]){0}, false);
    lf_eval_stats st = eval_checked(ctx, g, 2, (lf_node *[]){a, b});
    cr_expect_eq(st.kernels, 3);
    cr_expect_eq(st.bytes_materialized, 400);
    /* used twice by one consumer at one index map: one instance, inlined */
    lf_node *c = lf_reduce(g, LF_RED_SUM, lf_mul(g, y, y), 0, NULL, false);
    st = eval_checked(ctx, g, 1, &c);
    cr_expect_eq(st.kernels, 1);
    lf_graph_free(g);
    lf_ctx_destroy(ctx);
}

Test(fusion, temporaries_share_memory_by_liveness) {
    lf_ctx *ctx = fctx(0);
    lf_graph *g = lf_graph_new(ctx);
    int64_t n = 64;
    lf_node *x = lf_input(g, ramp(ctx, LF_F64, 1, &n));
    for (int i = 0; i < 6; i++) x = lf_exp(g, lf_neg(g, x));
    fuse_schedule *s = NULL;
    cr_assert_eq(fuse_plan(g, 1, &x, false, &s), LF_OK);
    cr_expect_eq(s->nkernels, 12);
    int temps = 0;
    for (int j = 0; j < s->nslots; j++) temps += s->slots[j].kind == FUSE_SLOT_TEMP;
    cr_expect_eq(temps, 11);
    cr_expect_eq(s->nblocks, 2, "a chain needs two blocks, got %d", s->nblocks);
    for (int j = 0; j < s->nslots; j++)
        for (int k = 0; k < s->nslots; k++) {
            const fuse_slot *a = &s->slots[j], *b = &s->slots[k];
            if (j == k || a->kind != FUSE_SLOT_TEMP || b->kind != FUSE_SLOT_TEMP || a->block != b->block)
                continue;
            cr_expect(a->last_use < b->def || b->last_use < a->def, "slots %d and %d overlap", j, k);
        }
    fuse_schedule_free(s);
    lf_graph_free(g);
    lf_ctx_destroy(ctx);
}

Test(fusion, many_inputs_split_to_fit_the_parameter_limit) {
    lf_ctx *ctx = fctx(1);
    lf_graph *g = lf_graph_new(ctx);
    int64_t n = 10;
    lf_node *acc = NULL;
    for (int i = 0; i < 20; i++) {
        lf_node *x = lf_input(g, ramp(ctx, LF_I32, 1, &n));
        acc = acc ? lf_add(g, acc, x) : x;
    }
    lf_eval_stats st = eval_checked(ctx, g, 1, &acc);
    cr_expect_gt(st.kernels, 1);
    cr_expect_leq(st.kernels, 4);
    lf_graph_free(g);
    lf_ctx_destroy(ctx);
}

/* A chain of 3 x FUSE_MAX_OPS operations is split into 3 kernels of at most
 * FUSE_MAX_OPS each (two stored temporaries), and still matches the reference. */
Test(fusion, long_chain_split_at_the_size_cap) {
    lf_ctx *ctx = fctx(1);
    lf_graph *g = lf_graph_new(ctx);
    int64_t n = 64;
    lf_fn *f = lf_fn_parse(g, "(v) -> v * 0.999 + 0.001"); /* two operations */
    lf_node *v = lf_input(g, ramp(ctx, LF_F32, 1, &n));
    for (int i = 0; i < 3 * FUSE_MAX_OPS / 2; i++) v = lf_map(g, f, v);
    fuse_schedule *s = NULL;
    cr_assert_eq(fuse_plan(g, 1, &v, true, &s), LF_OK, "%s", lf_errmsg(ctx));
    cr_expect_eq(s->nkernels, 3);
    for (int k = 0; k < s->nkernels; k++) {
        int ops = 0;
        for (int e = 0; e < s->kernels[k].body->nexprs; e++)
            ops += s->kernels[k].body->exprs[e].kind == EXPR_OP;
        cr_expect_leq(ops, FUSE_MAX_OPS, "kernel %d has %d ops", k, ops);
        cr_expect_geq(ops, FUSE_MAX_OPS - 2, "kernel %d has %d ops", k, ops);
    }
    fuse_schedule_free(s);
    lf_eval_stats st = eval_checked(ctx, g, 1, &v);
    cr_expect_eq(st.kernels, 3);
    cr_expect_eq(st.bytes_materialized, 2 * (size_t)n * 4);
    lf_graph_free(g);
    lf_ctx_destroy(ctx);
}

/* 10^4 outputs in one eval, each reading one input at its own index map
 * (the planner's instance table and its index of kernels whose loads are
 * full keep this linear): every output is right, and siblings merge up to
 * FUSE_MAX_STORES roots (their loads read one buffer, which counts once
 * under the LF_MAX_ARGS buffer cap). */
Test(fusion, ten_thousand_outputs) {
    enum { NOUT = 10000, W = 4 };
    lf_ctx *ctx = fctx(1);
    lf_graph *g = lf_graph_new(ctx);
    int64_t len = NOUT + W - 1;
    float *x = malloc((size_t)len * sizeof *x);
    for (int64_t i = 0; i < len; i++) x[i] = (float)i;
    lf_buffer *xb = lf_buffer_new(ctx, LF_F32, 1, &len);
    cr_assert_eq(lf_buffer_write(xb, x, (size_t)len * sizeof *x), LF_OK);
    lf_node *xn = lf_input(g, xb);
    lf_fn *f = lf_fn_parse(g, "(v) -> v * 2 + 1");
    lf_node **outs = malloc(NOUT * sizeof *outs);
    lf_buffer **dsts = malloc(NOUT * sizeof *dsts);
    for (int i = 0; i < NOUT; i++) {
        outs[i] = lf_map(g, f, lf_slice(g, xn, 0, i, i + W, 1));
        dsts[i] = lf_buffer_new(ctx, LF_F32, 1, (int64_t[]){W});
        cr_assert(dsts[i]);
    }
    cr_assert_eq(lf_graph_status(g), LF_OK, "%s", lf_graph_errmsg(g));
    for (int rep = 0; rep < 2; rep++) { /* planned, then the reused program */
        cr_assert_eq(lf_eval(g, NOUT, outs, dsts), LF_OK, "%s", lf_errmsg(ctx));
        lf_eval_stats st;
        cr_assert_eq(lf_ctx_last_stats(ctx, &st), LF_OK);
        cr_expect_eq(st.kernels, NOUT / FUSE_MAX_STORES); /* one buffer: siblings merge to the store cap */
        cr_expect_eq(st.bytes_written, (size_t)NOUT * W * 4);
        for (int i = 0; i < NOUT; i++) {
            float y[W];
            cr_assert_eq(lf_buffer_read(dsts[i], y, sizeof y), LF_OK);
            for (int j = 0; j < W; j++)
                cr_assert_eq(y[j], 2.0f * (float)(i + j) + 1.0f, "output %d[%d] = %g", i, j, y[j]);
        }
    }
    for (int i = 0; i < NOUT; i++) lf_buffer_free(dsts[i]);
    free(dsts);
    free(outs);
    free(x);
    lf_buffer_free(xb);
    lf_graph_free(g);
    lf_ctx_destroy(ctx);
}

Test(fusion, stats_api_arguments) {
    lf_eval_stats st;
    cr_expect_eq(lf_ctx_last_stats(NULL, &st), LF_ERR_NULL);
    lf_ctx *ctx = fctx(1);
    cr_expect_eq(lf_ctx_last_stats(ctx, NULL), LF_ERR_NULL);
    cr_expect_eq(lf_ctx_last_stats(ctx, &st), LF_OK);
    cr_expect_eq(st.kernels, 0);
    lf_ctx_destroy(ctx);
}

Test(fusion, fused_eval_loop_in_flat_memory) {
    lf_ctx *ctx = fctx(1);
    int64_t n = 16;
    lf_buffer *xb = ramp(ctx, LF_F32, 1, &n), *yb = tu_buf(ctx, LF_F32, 1, &n, NULL);
    lf_buffer *sb = tu_buf(ctx, LF_F32, 0, NULL, NULL);
    size_t live0 = 0;
    for (int cycle = 0; cycle < 3000; cycle++) {
        lf_graph *g = lf_graph_new(ctx);
        lf_node *x = lf_input(g, xb);
        lf_node *y = lf_zipwith(g, lf_fn_parse(g, GAUSS), 3,
                                (lf_node *[]){x, lf_const(g, LF_F32, 0.5), lf_const(g, LF_F32, 2)});
        lf_node *s = lf_reduce(g, LF_RED_SUM, lf_mul(g, x, x), 0, NULL, false);
        cr_assert_eq(lf_eval(g, 2, (lf_node *[]){y, s}, (lf_buffer *[]){yb, sb}), LF_OK);
        cr_assert_eq(lf_eval(g, 1, &s, &sb), LF_OK); /* a graph evaluated twice */
        lf_graph_free(g);
        if (cycle == 0) live0 = lf_debug_live_bytes();
        cr_assert_eq(lf_debug_live_bytes(), live0, "cycle %d", cycle);
    }
    lf_ctx_destroy(ctx);
}

/* Fails every allocation of lf_eval(g, n, outs, d) in turn (single and
 * sticky failures alternating) until one eval gets through: each failure
 * must be LF_ERR_NOMEM with an "out of memory" message, leak nothing (the
 * graph's program cache included: a failed eval keeps no program), leave
 * every output buffer byte for byte as it was, and leave the graph usable.
 * Returns how many allocations failed. */
static int sweep_eval_failures(lf_ctx *ctx, lf_graph *g, int n, lf_node **outs, lf_buffer **d) {
    unsigned char *before[8], *after[8];
    cr_assert_leq(n, 8);
    for (int i = 0; i < n; i++) {
        size_t bytes = lf_buffer_bytes(d[i]);
        before[i] = malloc(bytes + 1);
        after[i] = malloc(bytes + 1);
        cr_assert(before[i] && after[i]);
        lf_buffer_read(d[i], before[i], bytes);
    }
    size_t base = lf_debug_live_bytes();
    int failures = 0;
    for (int64_t k = 1;; k++) {
        lf_debug_fail_alloc(k, k % 2 == 0);
        lf_status st = lf_eval(g, n, outs, d);
        lf_debug_fail_alloc(0, false);
        if (st == LF_OK) break; /* the eval that gets through keeps its program in the graph's cache */
        cr_assert_eq(lf_debug_live_bytes(), base, "allocation %lld: leaked %zu bytes", (long long)k,
                     lf_debug_live_bytes() - base);
        failures++;
        cr_assert_eq(st, LF_ERR_NOMEM, "allocation %lld: %s", (long long)k, lf_errmsg(ctx));
        cr_assert(strstr(lf_errmsg(ctx), "out of memory"), "message: %s", lf_errmsg(ctx));
        for (int i = 0; i < n; i++) {
            lf_buffer_read(d[i], after[i], lf_buffer_bytes(d[i]));
            cr_assert(!memcmp(after[i], before[i], lf_buffer_bytes(d[i])),
                      "allocation %lld: a failed eval changed output %d", (long long)k, i);
        }
        cr_assert_eq(lf_graph_status(g), LF_OK, "a failed eval poisoned the graph");
    }
    for (int i = 0; i < n; i++) {
        free(before[i]);
        free(after[i]);
    }
    return failures;
}

/* Every allocation of a fused eval (plan and interpreter) fails in turn: the
 * eval fails cleanly, changes no output, leaks nothing, and leaves the graph
 * usable. The graph has multi-load kernels, a two-step index map, an
 * epilogue, a materialized shared node and two outputs. */
Test(fusion, every_eval_allocation_failure_is_clean) {
    lf_ctx *ctx = fctx(1);
    lf_graph *g = lf_graph_new(ctx);
    lf_node *a = lf_input(g, ramp(ctx, LF_F64, 2, (int64_t[]){4, 6}));
    lf_node *b = lf_input(g, ramp(ctx, LF_F64, 1, (int64_t[]){6}));
    lf_node *t = lf_reshape(g, lf_transpose(g, a), 2, (int64_t[]){4, 6}); /* two steps */
    lf_node *e = lf_exp(g, lf_add(g, t, b));                              /* shared, expensive */
    lf_node *r = lf_reduce(g, LF_RED_SUM, lf_mul(g, e, a), 1, (int[]){1}, false);
    lf_node *o1 = lf_sqrt(g, lf_abs(g, r));                                /* epilogue */
    lf_node *o2 = lf_sub(g, e, lf_slice(g, e, 1, LF_NONE, LF_NONE, -1));
    lf_node *outs[2] = {o1, o2};
    lf_buffer *d[2] = {lf_buffer_new_like(ctx, o1), lf_buffer_new_like(ctx, o2)};
    double sentinel[24];
    for (int i = 0; i < 24; i++) sentinel[i] = -777;
    lf_buffer_write(d[1], sentinel, sizeof sentinel);
    int failures = sweep_eval_failures(ctx, g, 2, outs, d);
    cr_expect_gt(failures, 20, "only %d allocations swept", failures);
    lf_eval_stats st;
    lf_ctx_last_stats(ctx, &st);
    cr_expect_eq(st.kernels, 3, "kernels %d", st.kernels);
    cr_expect_eq(st.bytes_materialized, 24 * 8);
    eval_checked(ctx, g, 2, outs);
    lf_graph_free(g);
    lf_ctx_destroy(ctx);
}

/* ---- row kernels (reduce -> broadcast -> map) and horizontal fusion ----------------- */

enum { SR = 64, SC = 100 };

/* Reduces x over the given axes; keepdims, or (keep false) reduced without
 * keepdims and reshaped back, as a user who forgot keepdims would write it. */

/* softmax along the last axis, written the natural way */
static lf_node *softmax_of(lf_graph *g, lf_node *x, bool keep) {
    lf_node *m = row_reduce(g, LF_RED_MAX, x, 1, (int[]){-1}, keep);
    lf_node *e = lf_exp(g, lf_sub(g, x, m));
    lf_node *s = row_reduce(g, LF_RED_SUM, e, 1, (int[]){-1}, keep);
    return lf_div(g, e, s);
}

static lf_node *softmax_rows(lf_graph *g, lf_ctx *ctx) {
    return softmax_of(g, lf_input(g, ramp(ctx, LF_F32, 2, (int64_t[]){SR, SC})), true);
}

static lf_node *softmax_rows_nokeep(lf_graph *g, lf_ctx *ctx) {
    return softmax_of(g, lf_input(g, ramp(ctx, LF_F32, 2, (int64_t[]){SR, SC})), false);
}

/* layer norm over the given trailing axes of x, with gain and bias over them */
static lf_node *layer_norm_of(lf_graph *g, lf_node *x, int na, const int *axes, lf_node *gain, lf_node *bias) {
    lf_node *mean = row_reduce(g, LF_RED_MEAN, x, na, axes, true);
    lf_node *d = lf_sub(g, x, mean);
    lf_node *var = row_reduce(g, LF_RED_MEAN, lf_mul(g, d, d), na, axes, true);
    lf_node *y = lf_div(g, d, lf_sqrt(g, lf_add(g, var, lf_const(g, LF_F64, 1e-5))));
    return lf_add(g, lf_mul(g, y, gain), bias);
}

enum { LR = 32, LC = 48 };

static lf_node *layer_norm(lf_graph *g, lf_ctx *ctx) {
    lf_node *x = lf_input(g, ramp(ctx, LF_F64, 2, (int64_t[]){LR, LC}));
    lf_node *gain = lf_input(g, ramp(ctx, LF_F64, 1, (int64_t[]){LC}));
    lf_node *bias = lf_input(g, ramp(ctx, LF_F64, 1, (int64_t[]){LC}));
    return layer_norm_of(g, x, 1, (int[]){-1}, gain, bias);
}

static lf_node *layer_norm_2axes(lf_graph *g, lf_ctx *ctx) {
    lf_node *x = lf_input(g, ramp(ctx, LF_F64, 3, (int64_t[]){4, 6, 8}));
    lf_node *gain = lf_input(g, ramp(ctx, LF_F64, 2, (int64_t[]){6, 8}));
    return layer_norm_of(g, x, 2, (int[]){1, 2}, gain, lf_const(g, LF_F64, 0.5));
}

/* Plans outs with fusion on (no eval). */
static fuse_schedule *plan_on(lf_graph *g, int n, lf_node **outs) {
    fuse_schedule *s = NULL;
    cr_assert_eq(fuse_plan(g, n, outs, true, &s), LF_OK, "plan: %s", lf_graph_errmsg(g));
    return s;
}

/* A random node is a source like iota: fused into every consumer, at any
 * index map, never stored unless it is an output or marked; unfused it is a
 * kernel of its own and a temporary. */
static lf_node *noisy(lf_graph *g, lf_ctx *ctx) {
    int64_t n = N;
    lf_node *x = lf_input(g, ramp(ctx, LF_F32, 1, &n));
    lf_node *nz = lf_random(g, LF_F32, LF_RANDOM_NORMAL, 1, &n, 0xfeed);
    return lf_add(g, x, lf_mul(g, lf_const(g, LF_F32, 0.1), nz));
}

Test(fusion, random_is_a_source_never_stored) {
    lf_eval_stats on, off;
    run_example("x + 0.1*normal", noisy, &on, &off);
    cr_expect_eq(on.kernels, 1);
    cr_expect_eq(on.bytes_materialized, 0);
    cr_expect_eq(on.bytes_read, N * 4, "read %zu: a random load reads nothing", on.bytes_read);
    cr_expect_eq(on.bytes_written, N * 4);
    cr_expect_eq(off.kernels, 3, "unfused: random, *, +; got %d", off.kernels);
    cr_expect_eq(off.bytes_materialized, 2 * N * 4);
    cr_expect_eq(on.temp_bytes_avoided, 2 * N * 4);

    lf_ctx *ctx = fctx(1);
    lf_graph *g = lf_graph_new(ctx);
    /* two index maps of one random node (r + r.T, then a broadcast row) in one kernel */
    lf_node *r = lf_random(g, LF_F64, LF_RANDOM_UNIFORM, 2, (int64_t[]){9, 9}, 3);
    lf_node *y = lf_add(g, lf_add(g, r, lf_transpose(g, r)), lf_slice(g, r, 0, 4, 5, 1));
    lf_eval_stats st = eval_checked(ctx, g, 1, &y);
    cr_expect_eq(st.kernels, 1);
    cr_expect_eq(st.bytes_materialized, 0);
    cr_expect_eq(st.bytes_read, 0, "read %zu", st.bytes_read);
    /* shared by a reduction and a map (different kernels): recomputed, never stored */
    lf_node *s = lf_reduce(g, LF_RED_SUM, r, 1, (int[]){1}, true);
    lf_node *z = lf_sub(g, r, lf_mul(g, r, r));
    lf_node *outs[2] = {s, z};
    st = eval_checked(ctx, g, 2, outs);
    cr_expect_eq(st.bytes_materialized, 0);
    /* marked: stored once, loaded by the consumer */
    cr_assert_eq(lf_node_materialize(g, r), LF_OK);
    st = eval_checked(ctx, g, 1, &y);
    cr_expect_eq(st.kernels, 2);
    cr_expect_eq(st.bytes_materialized, 81 * 8);
    lf_graph_free(g);
    lf_ctx_destroy(ctx);
}

/* Allocation failures of an eval with random sources (fused, marked, as an
 * output) are clean. */
Test(fusion, random_eval_allocation_failures_are_clean) {
    lf_ctx *ctx = fctx(1);
    lf_graph *g = lf_graph_new(ctx);
    lf_node *x = lf_input(g, ramp(ctx, LF_F64, 2, (int64_t[]){4, 6}));
    lf_node *r = lf_random(g, LF_F64, LF_RANDOM_NORMAL, 2, (int64_t[]){4, 6}, 11);
    lf_node *u = lf_random(g, LF_F64, LF_RANDOM_UNIFORM, 1, (int64_t[]){6}, 12);
    cr_assert_eq(lf_node_materialize(g, u), LF_OK);
    lf_node *o1 = lf_reduce(g, LF_RED_MAX, lf_add(g, lf_transpose(g, lf_transpose(g, r)), x), 1, (int[]){1}, false);
    lf_node *o2 = lf_mul(g, x, u);
    lf_node *outs[3] = {o1, o2, r};
    lf_buffer *d[3] = {lf_buffer_new_like(ctx, o1), lf_buffer_new_like(ctx, o2), lf_buffer_new_like(ctx, r)};
    int failures = sweep_eval_failures(ctx, g, 3, outs, d);
    cr_expect_gt(failures, 10, "only %d allocations swept", failures);
    eval_checked(ctx, g, 3, outs);
    for (int i = 0; i < 3; i++) lf_buffer_free(d[i]);
    lf_graph_free(g);
    lf_ctx_destroy(ctx);
}

Test(fusion, softmax_rows_is_one_row_kernel) {
    lf_eval_stats on, off;
    run_example("softmax_rows", softmax_rows, &on, &off);
    cr_expect_leq(on.kernels, 2);
    cr_expect_eq(on.kernels, 1, "kernels %d", on.kernels);
    cr_expect_eq(on.bytes_materialized, 0, "materialized %zu", on.bytes_materialized);
    cr_expect_eq(on.bytes_read, SR * SC * 4, "read %zu", on.bytes_read);
    cr_expect_eq(on.bytes_written, SR * SC * 4, "written %zu", on.bytes_written);
    cr_expect_eq(off.kernels, 5); /* max, sub, exp, sum, div */
    cr_expect_eq(off.bytes_materialized, 2 * SR * SC * 4 + 2 * SR * 4); /* x-m, exp; max, sum */
    cr_expect_eq(on.temp_bytes_avoided, off.bytes_materialized);
    /* the shape of the kernel: pass 0 max, pass 1 sum, a row pass */
    lf_ctx *ctx = fctx(1);
    lf_graph *g = lf_graph_new(ctx);
    lf_node *y = softmax_rows(g, ctx);
    fuse_schedule *s = plan_on(g, 1, &y);
    cr_assert_eq(s->nkernels, 1);
    const fuse_kernel *kn = &s->kernels[0];
    cr_expect_eq(kn->npasses, 2);
    cr_expect_eq(kn->nreds, 2);
    cr_expect_eq(kn->reds[0].op, LF_RED_MAX);
    cr_expect_eq(kn->reds[1].op, LF_RED_SUM);
    cr_expect_eq(kn->reds[1].pass, 1);
    cr_expect_eq(kn->redmask, 2u);
    cr_expect(kn->row != NULL);
    cr_expect_eq(kn->nstores, 1);
    cr_expect(kn->stores[0].row);
    cr_expect_eq(kn->nrow_loads, 3, "row loads: x, max, sum"); /* x, acc max, acc sum */
    /* exp(x - max) is computed in the sum's pass and kept for the row pass */
    cr_assert_eq(kn->nkeeps, 1, "keeps %d", kn->nkeeps);
    cr_expect_eq(kn->keeps[0].pass, 1);
    cr_expect_eq(kn->keeps[0].node->u.map.fn->exprs[kn->keeps[0].node->u.map.fn->result].op, LF_OP_EXP);
    cr_expect_eq(kn->passes[1].fn->exprs[kn->keeps[0].pass_expr].op, LF_OP_EXP);
    cr_expect_eq(kn->row->exprs[kn->keeps[0].row_expr].op, LF_OP_EXP);
    char *text = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&text, &len);
    fuse_schedule_print(s, fp);
    fclose(fp);
    cr_expect(strstr(text, "row reduce") && strstr(text, "pass 1 [sum") && strstr(text, "row pass") &&
                  strstr(text, "keeps n"),
              "%s", text);
    free(text);
    fuse_schedule_free(s);
    lf_graph_free(g);
    lf_ctx_destroy(ctx);
}

Test(fusion, softmax_without_keepdims_is_one_row_kernel) {
    lf_eval_stats on, off;
    run_example("softmax_rows (reshape)", softmax_rows_nokeep, &on, &off);
    cr_expect_eq(on.kernels, 1);
    cr_expect_eq(on.bytes_materialized, 0);
}

Test(fusion, layer_norm_is_one_row_kernel) {
    lf_eval_stats on, off;
    run_example("layer_norm", layer_norm, &on, &off);
    cr_expect_eq(on.kernels, 1, "kernels %d", on.kernels);
    cr_expect_eq(on.bytes_materialized, 0);
    cr_expect_eq(on.bytes_read, (LR * LC + 2 * LC) * 8);
    cr_expect_eq(on.bytes_written, LR * LC * 8);
    cr_expect_geq(off.kernels, 9);
    { /* nothing transcendental is computed in a pass and again in the row pass: no keeps */
        lf_ctx *ctx = fctx(1);
        lf_graph *g = lf_graph_new(ctx);
        lf_node *y = layer_norm(g, ctx);
        fuse_schedule *s = plan_on(g, 1, &y);
        cr_assert_eq(s->nkernels, 1);
        cr_expect_eq(s->kernels[0].nkeeps, 0);
        fuse_schedule_free(s);
        lf_graph_free(g);
        lf_ctx_destroy(ctx);
    }
    run_example("layer_norm (2 axes)", layer_norm_2axes, &on, &off);
    cr_expect_eq(on.kernels, 1, "kernels %d", on.kernels);
    cr_expect_eq(on.bytes_materialized, 0);
}

/* The per-row values are outputs too: the epilogue stores them, still one pass. */
Test(fusion, row_kernel_stores_row_values_that_are_outputs) {
    lf_ctx *ctx = fctx(1);
    lf_graph *g = lf_graph_new(ctx);
    lf_node *x = lf_input(g, ramp(ctx, LF_F64, 2, (int64_t[]){7, 9}));
    lf_node *m = lf_reduce(g, LF_RED_MAX, x, 1, (int[]){1}, true);
    lf_node *e = lf_exp(g, lf_sub(g, x, m));
    lf_node *s = lf_reduce(g, LF_RED_SUM, e, 1, (int[]){1}, true);
    lf_node *y = lf_div(g, e, s);
    lf_node *lse = lf_add(g, lf_log(g, s), m); /* an epilogue of the row kernel */
    lf_node *z = lf_mul(g, x, lf_const(g, LF_F64, 3)); /* a sibling of the row pass */
    lf_eval_stats st = eval_checked(ctx, g, 4, (lf_node *[]){y, m, lse, z});
    cr_expect_eq(st.kernels, 1, "kernels %d", st.kernels);
    cr_expect_eq(st.bytes_materialized, 0);
    lf_graph_free(g);
    lf_ctx_destroy(ctx);
}

/* Where the rule does not apply, the existing rules take over (and agree). */
Test(fusion, row_rule_falls_back) {
    lf_ctx *ctx = fctx(1);
    lf_graph *g = lf_graph_new(ctx);
    lf_node *x = lf_input(g, ramp(ctx, LF_F32, 2, (int64_t[]){6, 5}));
    /* the second reduction is over other axes: no common row */
    lf_node *m = lf_reduce(g, LF_RED_MAX, x, 1, (int[]){1}, true);
    lf_node *e = lf_exp(g, lf_sub(g, x, m));
    lf_node *s = lf_reduce(g, LF_RED_SUM, e, 1, (int[]){0}, true);
    lf_node *y = lf_div(g, e, s);
    lf_eval_stats st = eval_checked(ctx, g, 1, &y);
    cr_expect_gt(st.kernels, 1);
    /* the map reads the reduction transposed: not the row broadcast (rows of
       more than SMALL_REDUCE elements: a smaller sum is inlined, one kernel) */
    lf_node *q = lf_input(g, ramp(ctx, LF_F32, 2, (int64_t[]){12, 12}));
    lf_node *mq = lf_reduce(g, LF_RED_SUM, q, 1, (int[]){1}, true);
    lf_node *yq = lf_sub(g, q, lf_transpose(g, mq));
    st = eval_checked(ctx, g, 1, &yq);
    cr_expect_eq(st.kernels, 2);
    /* the map's space is larger than the reductions' input: no row pass */
    lf_node *w = lf_input(g, ramp(ctx, LF_F32, 3, (int64_t[]){2, 6, 5}));
    lf_node *yw = lf_sub(g, w, m);
    st = eval_checked(ctx, g, 1, &yw);
    cr_expect_eq(st.kernels, 2);
    lf_graph_free(g);
    lf_ctx_destroy(ctx);
}

/* Outputs of different shapes in one pass (plan_merge.c, absorb_space): an
 * elementwise output and a reduction over its space (the demo's pdf and sum
 * of squares; per-row and per-column sums with a full-size map) are one
 * kernel reading x once, the map stored in pass 0 at each position. Not
 * when the reduction reads the elementwise output itself, nor when a
 * kernel between the two reads it. */
Test(fusion, elementwise_and_reduction_over_its_space_are_one_kernel) {
    lf_ctx *ctx = fctx(1);
    lf_graph *g = lf_graph_new(ctx);
    int64_t n = 1000;
    lf_node *x = lf_input(g, ramp(ctx, LF_F32, 1, &n));
    lf_fn *gauss = lf_fn_parse(g, "(x, m, s) -> exp(-0.5*((x-m)/s)**2) / (s*2.5066282746)");
    lf_node *pdf = lf_zipwith(g, gauss, 3, (lf_node *[]){x, lf_const(g, LF_F32, 0), lf_const(g, LF_F32, 1)});
    lf_node *ss = lf_reduce(g, LF_RED_SUM, lf_mul(g, x, x), 0, NULL, false);
    for (int order = 0; order < 2; order++) {
        lf_node *outs[2] = {order ? ss : pdf, order ? pdf : ss};
        lf_eval_stats st = eval_checked(ctx, g, 2, outs);
        cr_expect_eq(st.kernels, 1, "pdf and sum: %d kernels", st.kernels);
        cr_expect_eq(st.bytes_read, (size_t)n * 4, "read %zu", st.bytes_read);
        fuse_schedule *s = plan_on(g, 2, outs);
        cr_assert_eq(s->nkernels, 1);
        int pos = 0;
        for (int j = 0; j < s->kernels[0].nstores; j++) pos += s->kernels[0].stores[j].pos;
        cr_expect_eq(pos, 1, "one store in pass 0");
        fuse_schedule_free(s);
    }
    /* rows and columns of a matrix: a map with its row sums, another with its column maxima */
    lf_node *m = lf_input(g, ramp(ctx, LF_F64, 2, (int64_t[]){9, 14}));
    lf_node *sq = lf_mul(g, m, lf_const(g, LF_F64, 3));
    lf_node *rows = lf_reduce(g, LF_RED_SUM, lf_abs(g, m), 1, (int[]){1}, false);
    lf_node *cube = lf_mul(g, lf_mul(g, m, m), m);
    lf_node *cols = lf_reduce(g, LF_RED_MAX, lf_sub(g, m, lf_const(g, LF_F64, 1)), 1, (int[]){0}, true);
    lf_eval_stats st = eval_checked(ctx, g, 4, (lf_node *[]){sq, rows, cube, cols});
    cr_expect_leq(st.kernels, 2, "%d kernels", st.kernels);
    st = eval_checked(ctx, g, 2, (lf_node *[]){sq, rows});
    cr_expect_eq(st.kernels, 1, "map and row sums: %d kernels", st.kernels);
    st = eval_checked(ctx, g, 2, (lf_node *[]){cube, cols});
    cr_expect_eq(st.kernels, 1, "map and column maxima: %d kernels", st.kernels);
    /* the reduction reads the map itself: the map is stored, then read (two kernels) */
    lf_node *psum = lf_reduce(g, LF_RED_SUM, pdf, 0, NULL, false);
    st = eval_checked(ctx, g, 2, (lf_node *[]){pdf, psum});
    cr_expect_eq(st.kernels, 2, "pdf and sum(pdf): %d kernels", st.kernels);
    /* a kernel between them reads the map: it must run first, so no merge */
    lf_node *y = lf_input(g, ramp(ctx, LF_F32, 1, (int64_t[]){7}));
    lf_node *mid = lf_reduce(g, LF_RED_MAX, lf_add(g, pdf, lf_const(g, LF_F32, 1)), 0, NULL, false);
    lf_node *mid2 = lf_add(g, y, mid); /* its own space: a kernel between pdf and ss2 */
    lf_node *ss2 = lf_reduce(g, LF_RED_MIN, lf_mul(g, x, lf_const(g, LF_F32, 2)), 0, NULL, false);
    eval_checked(ctx, g, 3, (lf_node *[]){pdf, mid2, ss2});
    lf_graph_free(g);
    lf_ctx_destroy(ctx);
}

Test(fusion, multi_output_elementwise_is_one_kernel) {
    for (int f = 1; f >= 0; f--) {
        lf_ctx *ctx = fctx(f);
        lf_graph *g = lf_graph_new(ctx);
        lf_node *x = lf_input(g, ramp(ctx, LF_F32, 2, (int64_t[]){10, 20}));
        lf_node *y = lf_input(g, ramp(ctx, LF_F32, 2, (int64_t[]){10, 20}));
        lf_node *outs[2] = {lf_add(g, x, y), lf_mul(g, x, y)};
        lf_eval_stats st = eval_checked(ctx, g, 2, outs);
        cr_expect_eq(st.kernels, f ? 1 : 2, "fusion %d: kernels %d", f, st.kernels);
        cr_expect_eq(st.bytes_materialized, 0);
        if (f) {
            cr_expect_eq(st.bytes_read, 2 * 200 * 4);
            cr_expect_eq(st.bytes_written, 2 * 200 * 4);
            fuse_schedule *s = plan_on(g, 2, outs);
            cr_expect_eq(s->kernels[0].nstores, 2);
            cr_expect_eq(s->kernels[0].nloads, 2);
            fuse_schedule_free(s);
        }
        /* outputs over one space that share nothing still make one pass */
        lf_node *z = lf_input(g, ramp(ctx, LF_F32, 2, (int64_t[]){10, 20}));
        lf_node *o3[3] = {lf_sin(g, x), lf_cos(g, z), lf_fill(g, LF_F32, 2, 2, (int64_t[]){10, 20})};
        st = eval_checked(ctx, g, 3, o3);
        if (f) cr_expect_eq(st.kernels, 1, "kernels %d", st.kernels);
        /* many outputs over one space: kernels of at most FUSE_MAX_STORES stores */
        lf_node *many[40];
        for (int i = 0; i < 40; i++) many[i] = lf_add(g, x, lf_const(g, LF_F32, i));
        fuse_schedule *s = NULL;
        cr_assert_eq(fuse_plan(g, 40, many, f, &s), LF_OK);
        cr_expect_eq(s->nkernels, f ? 3 : 40, "kernels %d", s->nkernels);
        for (int k = 0; k < s->nkernels; k++) cr_expect_leq(s->kernels[k].nstores, FUSE_MAX_STORES);
        fuse_schedule_free(s);
        lf_graph_free(g);
        lf_ctx_destroy(ctx);
    }
}

Test(fusion, two_reductions_of_one_input_are_one_kernel) {
    lf_ctx *ctx = fctx(1);
    lf_graph *g = lf_graph_new(ctx);
    lf_node *x = lf_input(g, ramp(ctx, LF_F64, 2, (int64_t[]){8, 30}));
    lf_node *a = lf_reduce(g, LF_RED_SUM, x, 1, (int[]){1}, false);
    lf_node *b = lf_reduce(g, LF_RED_MAX, x, 1, (int[]){1}, true);
    lf_node *c = lf_reduce(g, LF_RED_ARGMIN, lf_mul(g, x, x), 1, (int[]){1}, false);
    lf_eval_stats st = eval_checked(ctx, g, 3, (lf_node *[]){a, b, c});
    cr_expect_eq(st.kernels, 1, "kernels %d", st.kernels);
    cr_expect_eq(st.bytes_materialized, 0);
    cr_expect_eq(st.bytes_read, 8 * 30 * 8);
    fuse_schedule *s = plan_on(g, 3, (lf_node *[]){a, b, c});
    cr_expect_eq(s->kernels[0].nreds, 3);
    cr_expect_eq(s->kernels[0].npasses, 1);
    cr_expect_eq(s->kernels[0].nstores, 3);
    fuse_schedule_free(s);
    /* full reductions of one vector, and a mean of integers next to a sum */
    int64_t n = 100;
    lf_node *v = lf_input(g, ramp(ctx, LF_I32, 1, &n));
    lf_node *vs = lf_reduce(g, LF_RED_SUM, v, 0, NULL, false);
    lf_node *vm = lf_reduce(g, LF_RED_MEAN, v, 0, NULL, false);
    lf_node *vp = lf_reduce(g, LF_RED_PROD, lf_add(g, v, lf_const(g, LF_I32, 3)), 0, NULL, false);
    st = eval_checked(ctx, g, 3, (lf_node *[]){vs, vm, vp});
    cr_expect_eq(st.kernels, 1);
    lf_graph_free(g);
    lf_ctx_destroy(ctx);
}

Test(fusion, horizontal_siblings_merge) {
    lf_ctx *ctx = fctx(1);
    lf_graph *g = lf_graph_new(ctx);
    int64_t n = 64;
    lf_node *x = lf_input(g, ramp(ctx, LF_F64, 1, &n));
    lf_node *y = lf_input(g, ramp(ctx, LF_F64, 1, &n));
    /* two marked intermediates over one space sharing x: one kernel stores both */
    lf_node *p = lf_exp(g, x), *q = lf_mul(g, x, y);
    lf_node_materialize(g, p);
    lf_node_materialize(g, q);
    lf_node *r = lf_reduce(g, LF_RED_SUM, lf_add(g, p, q), 0, NULL, false);
    lf_eval_stats st = eval_checked(ctx, g, 1, &r);
    cr_expect_eq(st.kernels, 2, "kernels %d", st.kernels);
    cr_expect_eq(st.bytes_materialized, 2 * 64 * 8);
    /* a dependent pair does not merge: b reads a, which is stored first */
    lf_node *a = lf_add(g, x, lf_const(g, LF_F64, 1));
    lf_node *b = lf_mul(g, lf_slice(g, a, 0, LF_NONE, LF_NONE, -1), x);
    st = eval_checked(ctx, g, 2, (lf_node *[]){a, b});
    cr_expect_eq(st.kernels, 2, "kernels %d", st.kernels);
    /* an expensive node both siblings use is computed once in the merged kernel */
    lf_node *e = lf_exp(g, lf_sin(g, x));
    lf_node *o[2] = {lf_add(g, e, y), lf_mul(g, e, x)};
    st = eval_checked(ctx, g, 2, o);
    cr_expect_eq(st.kernels, 1);
    cr_expect_eq(st.bytes_materialized, 0);
    lf_graph_free(g);
    lf_ctx_destroy(ctx);
}

/* Merged kernels keep every fn within LF_MAX_ARGS loads. */
Test(fusion, merges_respect_the_parameter_limit) {
    lf_ctx *ctx = fctx(1);
    lf_graph *g = lf_graph_new(ctx);
    int64_t n = 12;
    lf_node *x = lf_input(g, ramp(ctx, LF_F32, 1, &n));
    lf_node *outs[4];
    for (int i = 0; i < 4; i++) {
        lf_node *acc = x;
        for (int k = 0; k < 4; k++) acc = lf_add(g, acc, lf_input(g, ramp(ctx, LF_F32, 1, &n)));
        outs[i] = acc; /* 5 loads each, x shared */
    }
    lf_eval_stats st = eval_checked(ctx, g, 4, outs);
    cr_expect_geq(st.kernels, 3); /* 17 distinct loads: at least 3 fns of 8 */
    cr_expect_leq(st.kernels, 4);
    fuse_schedule *s = plan_on(g, 4, outs);
    for (int k = 0; k < s->nkernels; k++) cr_expect_leq(s->kernels[k].nloads, LF_MAX_ARGS);
    fuse_schedule_free(s);
    /* nine reductions of one row: at most LF_MAX_ARGS in one kernel */
    lf_node *xr = lf_input(g, ramp(ctx, LF_F64, 2, (int64_t[]){3, 7}));
    lf_node *rs[9];
    for (int i = 0; i < 9; i++)
        rs[i] = lf_reduce(g, LF_RED_SUM, lf_mul(g, xr, lf_const(g, LF_F64, i + 1)), 1, (int[]){1}, false);
    fuse_schedule *s2 = plan_on(g, 9, rs);
    cr_expect_eq(s2->nkernels, 2);
    for (int k = 0; k < s2->nkernels; k++) cr_expect_leq(s2->kernels[k].nreds, LF_MAX_ARGS);
    fuse_schedule_free(s2);
    lf_graph_free(g);
    lf_ctx_destroy(ctx);
}

/* ---- stencils: the load caps count buffers, not index maps ---------------- */

/* A k x k stencil over x ([h + k - 1, w + k - 1]; h == 0: 1-d, [w + k - 1]):
 * sum over the taps of slice(x at the tap's offset) * weight, the weights
 * lf_const (a moving average when mean: the sum of the slices over k*k). */
static lf_node *stencil_of(lf_graph *g, lf_node *x, int k, int64_t h, int64_t w, bool mean) {
    lf_node *acc = NULL;
    int taps = h ? k * k : k;
    for (int t = 0; t < taps; t++) {
        int dy = h ? t / k : 0, dx = h ? t % k : t;
        lf_node *v = lf_slice(g, x, h ? 1 : 0, dx, dx + w, 1);
        if (h) v = lf_slice(g, v, 0, dy, dy + h, 1);
        if (!mean) v = lf_mul(g, v, lf_const(g, lf_node_dtype(x), 0.125 * (t % 7) - 0.375));
        acc = acc ? lf_add(g, acc, v) : v;
    }
    return mean ? lf_div(g, acc, lf_const(g, lf_node_dtype(x), taps)) : acc;
}

/* A context on the CPU (or LF_TEST_BACKEND) with fusion on, compiled or
 * interpreted (LF_COMPILE_NEVER). */
static lf_ctx *fctx_compile(int compile) {
    lf_ctx_options o;
    lf_ctx_options_init(&o);
    o.fusion = 1;
    o.backend = planned_backend();
    o.compile = compile;
    lf_ctx *ctx = lf_ctx_new(&o);
    if (!ctx && o.backend == LF_BACKEND_CUDA) cr_skip_test("no usable CUDA device: %s", lf_errmsg(NULL));
    cr_assert(ctx != NULL, "lf_ctx_new: %s", lf_errmsg(NULL));
    return ctx;
}

/* A 9-tap moving average (1-d), a 3x3, 5x5 and 7x7 conv over a padded 2-d
 * input (9, 25, 49 loads of one buffer) plan to one kernel with no
 * temporary and match the reference, compiled and interpreted, at odd sizes
 * and with NaN and Inf among the inputs. */
Test(fusion, stencil_taps_of_one_buffer_are_one_kernel, .timeout = 300) {
    static const struct { int k; int64_t h, w; bool mean; } cases[] = {
        {9, 0, 1, true}, {9, 0, 1001, true}, {9, 0, 4099, false}, {3, 17, 33, false},
        {3, 1, 1, true}, {5, 9, 31, false}, {7, 5, 13, false}, {7, 1, 2, true}};
    for (int mode = 0; mode < 2; mode++) {
        lf_ctx *ctx = fctx_compile(mode ? LF_COMPILE_NEVER : LF_COMPILE_AUTO);
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            int k = cases[c].k;
            int64_t h = cases[c].h, w = cases[c].w;
            int64_t sh[2] = {h + k - 1, w + k - 1};
            int nd = h ? 2 : 1;
            int64_t n = h ? sh[0] * sh[1] : sh[1];
            double *v = malloc((size_t)n * sizeof *v);
            for (int64_t i = 0; i < n; i++) v[i] = tu_uniform(-2, 2);
            v[n / 2] = NAN;
            v[n / 3] = INFINITY;
            v[n - 1] = -INFINITY;
            lf_graph *g = lf_graph_new(ctx);
            lf_node *x = lf_input(g, tu_buf(ctx, c % 2 ? LF_F64 : LF_F32, nd, h ? sh : sh + 1, v));
            free(v);
            lf_node *y = stencil_of(g, x, k, h, w, cases[c].mean);
            cr_assert(y != NULL, "%s", lf_graph_errmsg(g));
            fuse_schedule *s = plan_on(g, 1, &y);
            cr_expect_eq(s->nkernels, 1, "%dx%d taps: %d kernels", h ? k : 1, k, s->nkernels);
            cr_expect_eq(s->kernels[0].nloads, h ? k * k : k);
            fuse_schedule_free(s);
            lf_eval_stats st = eval_checked(ctx, g, 1, &y);
            cr_expect_eq(st.kernels, 1);
            cr_expect_eq(st.bytes_materialized, 0);
            lf_graph_free(g);
        }
        lf_ctx_destroy(ctx);
    }
}

/* The buffer cap still holds: the sum of nine different inputs is two
 * kernels; a 9x9 conv (81 loads of one buffer, past GRAPH_MAX_PARAMS) is
 * split, right; taps of one buffer plus eight other buffers split. */
Test(fusion, nine_buffers_or_too_many_taps_split) {
    lf_ctx *ctx = fctx(1);
    lf_graph *g = lf_graph_new(ctx);
    int64_t n = 37;
    lf_node *acc = NULL;
    for (int i = 0; i < 9; i++) {
        lf_node *x = lf_input(g, ramp(ctx, LF_F32, 1, &n));
        acc = acc ? lf_add(g, acc, x) : x;
    }
    lf_eval_stats st = eval_checked(ctx, g, 1, &acc);
    cr_expect_eq(st.kernels, 2);
    cr_expect_gt(st.bytes_materialized, 0);
    fuse_schedule *s = plan_on(g, 1, &acc);
    for (int k = 0; k < s->nkernels; k++) cr_expect_leq(s->kernels[k].nloads, LF_MAX_ARGS);
    fuse_schedule_free(s);
    /* 81 taps of one buffer */
    int64_t sh[2] = {12 + 8, 21 + 8};
    lf_node *x = lf_input(g, ramp(ctx, LF_F32, 2, sh));
    lf_node *y = stencil_of(g, x, 9, 12, 21, false);
    st = eval_checked(ctx, g, 1, &y);
    cr_expect_eq(st.kernels, 2, "%d kernels", st.kernels);
    s = plan_on(g, 1, &y);
    for (int k = 0; k < s->nkernels; k++) cr_expect_leq(s->kernels[k].nloads, GRAPH_MAX_PARAMS);
    fuse_schedule_free(s);
    /* 9 taps of x plus eight other buffers: 9 buffers */
    int64_t m = 40;
    lf_node *z = lf_input(g, ramp(ctx, LF_F32, 1, &m));
    lf_node *sum = stencil_of(g, z, 9, 0, 32, false);
    for (int i = 0; i < 8; i++) sum = lf_add(g, sum, lf_input(g, ramp(ctx, LF_F32, 1, (int64_t[]){32})));
    st = eval_checked(ctx, g, 1, &sum);
    cr_expect_eq(st.kernels, 2, "%d kernels", st.kernels);
    s = plan_on(g, 1, &sum);
    for (int k = 0; k < s->nkernels; k++) {
        int slots[GRAPH_MAX_PARAMS], ns = 0;
        for (int j = 0; j < s->kernels[k].nloads; j++) {
            int sl = s->kernels[k].loads[j].slot, seen = 0;
            for (int t = 0; t < ns; t++) seen |= slots[t] == sl;
            if (!seen) slots[ns++] = sl;
        }
        cr_expect_leq(ns, LF_MAX_ARGS, "kernel %d reads %d buffers", k, ns);
    }
    fuse_schedule_free(s);
    lf_graph_free(g);
    lf_ctx_destroy(ctx);
}

/* Outputs over one space reading one buffer at different maps merge up to
 * FUSE_MAX_STORES roots (the buffer counts once), not LF_MAX_ARGS. */
Test(fusion, siblings_reading_one_buffer_merge_past_eight_maps) {
    lf_ctx *ctx = fctx(1);
    lf_graph *g = lf_graph_new(ctx);
    int64_t n = 100;
    lf_node *x = lf_input(g, ramp(ctx, LF_F64, 1, &n));
    lf_node *outs[4];
    for (int i = 0; i < 4; i++) outs[i] = stencil_of(g, lf_slice(g, x, 0, 3 * i, 3 * i + 60, 1), 5, 0, 50, true);
    lf_eval_stats st = eval_checked(ctx, g, 4, outs);
    cr_expect_eq(st.kernels, 1);
    cr_expect_eq(st.bytes_materialized, 0);
    lf_graph_free(g);
    lf_ctx_destroy(ctx);
}

/* Every allocation of a fused eval of row kernels and horizontal merges
 * fails in turn: clean failure, nothing leaked, outputs untouched. */
Test(fusion, row_kernel_allocation_failures_are_clean) {
    lf_ctx *ctx = fctx(1);
    lf_graph *g = lf_graph_new(ctx);
    lf_node *x = lf_input(g, ramp(ctx, LF_F64, 2, (int64_t[]){5, 6}));
    lf_node *gain = lf_input(g, ramp(ctx, LF_F64, 1, (int64_t[]){6}));
    lf_node *y = softmax_of(g, x, true);
    lf_node *ln = layer_norm_of(g, x, 1, (int[]){1}, gain, gain);
    lf_node *mx = lf_reduce(g, LF_RED_MAX, x, 1, (int[]){1}, false);
    lf_node *outs[3] = {y, ln, mx};
    lf_buffer *d[3];
    for (int i = 0; i < 3; i++) d[i] = lf_buffer_new_like(ctx, outs[i]);
    int failures = sweep_eval_failures(ctx, g, 3, outs, d);
    cr_expect_gt(failures, 20, "only %d allocations swept", failures);
    lf_eval_stats st = eval_checked(ctx, g, 3, outs);
    cr_expect_leq(st.kernels, 2, "kernels %d", st.kernels);
    for (int i = 0; i < 3; i++) lf_buffer_free(d[i]);
    lf_graph_free(g);
    lf_ctx_destroy(ctx);
}

/* ---- the differential test --------------------------------------------------------- */


static bool compiled_run(void);

/* Output out of graph g (its bytes got) against the reference's (want), as
 * far as its cone allows (tests/diffcheck.h): the interpreter's arithmetic
 * is the reference's, so bit for bit; compiled, bit for bit unless libmvec
 * functions or float sums are in the cone, then within their bound. A
 * mismatch of a compiled output whose cone has a float sum that is
 * cancellation noise on the reference (dc_conditioning) is not a failure:
 * returns 0 after noting it with tu_note (what names the graph and the
 * output). Returns 1 when it matches, -1 with the failure in msg (cap
 * bytes) when it does not. scalar_math: got came from a context without
 * libmvec (scalar_math_ctx), whose exempt functions are the reference's
 * libm calls, so they do not loosen the bound. */
static int noise_skips; /* outputs compare_output did not compare */

static int compare_output(lf_ctx *ctx, lf_graph *g, lf_node *out, const void *got, const void *want,
                          const char *what, char *msg, int cap, bool scalar_math) {
    dc_cone c;
    dc_cone_init(&c, out, compiled_run());
    if (scalar_math) c.exempt = false;
    int64_t m = out->numel, bad = dc_first_bad(&c, out->dtype, got, want, m, dc_rel_bound(&c, 0));
    dc_cond cond = {0, false, -1};
    if (bad >= 0 && !dc_cone_exact(&c)) { /* the bound of the cone's reductions, measured on the reference */
        lf_backend saved = ctx->backend;
        ctx->backend = LF_BACKEND_REFERENCE;
        dc_conditioning(ctx, g, &c, &cond);
        ctx->backend = saved;
        if (!cond.noise) bad = dc_first_bad(&c, out->dtype, got, want, m, dc_rel_bound(&c, cond.rho));
    }
    if (bad >= 0 && cond.noise) {
        noise_skips++;
        tu_note("%s: not compared: its float sum n%d is cancellation noise on the reference\n", what, cond.node);
        dc_cone_free(&c);
        return 0;
    }
    if (bad >= 0) {
        char x[64], y[64];
        dc_format(x, sizeof x, out->dtype, got, bad);
        dc_format(y, sizeof y, out->dtype, want, bad);
        snprintf(msg, (size_t)cap, "%s (%s, %lld elements) element %lld is %s, reference %s (allowed: %s)", what,
                 lf_dtype_name(out->dtype), (long long)m, (long long)bad, x, y,
                 dc_cone_exact(&c) ? "the same bits, any NaN for a NaN"
                 : c.exempt        ? "the cone's bound: libmvec functions in it"
                                   : "the cone's bound: float sums in it");
        dc_cone_free(&c);
        return -1;
    }
    dc_cone_free(&c);
    return 1;
}

/* The rules of tests/diffcheck.h the differential relies on: bool and
 * integers compared as bytes (2^53 + 1 is not 2^53, though both are the
 * same double), exact cones bit for bit (-0.0 is not +0.0; NaNs of any
 * sign and payload are one), an inexact cone within its bound, and the
 * cancellation escape armed only by a float sum in the output's own cone:
 * x + 1 does not depend on sum(x) and is compared even when that sum is
 * pure cancellation (1e16 + 1 - 1e16 + 3: 3 in order, its terms 2e16). */
Test(fusion, diffcheck_rules) {
    lf_ctx *ctx = fctx(1);
    lf_graph *g = lf_graph_new(ctx);
    const double xv[4] = {1e16, 1, -1e16, 3};
    int64_t four = 4;
    lf_buffer *xb = tu_buf(ctx, LF_F64, 1, &four, xv);
    lf_node *x = lf_input(g, xb);
    lf_node *s = lf_reduce(g, LF_RED_SUM, x, 0, NULL, false);
    lf_node *a = lf_mul(g, x, s), *b = lf_add(g, x, lf_const(g, LF_F64, 1));
    lf_node *e = lf_map(g, lf_fn_parse(g, "(x) -> exp(x * 1e-16)"), x);
    cr_assert(a && b && e, "%s", lf_graph_errmsg(g));
    ctx->backend = LF_BACKEND_REFERENCE;
    dc_cone ca, cb, ce;
    dc_cone_init(&ca, a, true);
    dc_cone_init(&cb, b, true);
    dc_cone_init(&ce, e, true);
    cr_expect(ca.reduction && !ca.exempt && !dc_cone_exact(&ca));
    cr_expect(dc_cone_exact(&cb), "x + 1 has no sum and no libmvec function in its cone");
    cr_expect(ce.exempt && ce.exempt_op == LF_OP_EXP && !ce.reduction && ce.eps == 0x1p-53);
    dc_cond qa, qb;
    dc_conditioning(ctx, g, &ca, &qa);
    dc_conditioning(ctx, g, &cb, &qb);
    cr_expect(qa.noise && qa.node == s->id, "sum(x) feeds x * sum(x) and cancels: noise %d, node %d", qa.noise,
              qa.node);
    cr_expect(!qb.noise && qb.node == -1, "x + 1 does not depend on sum(x): noise %d, node %d", qb.noise, qb.node);
    dc_cone lanes_off; /* the interpreter: every cone exact */
    dc_cone_init(&lanes_off, a, false);
    cr_expect(dc_cone_exact(&lanes_off));
    dc_cone_free(&lanes_off);
    /* exact cone: bits */
    double w[3] = {1.5, 0.0, NAN}, gv[3] = {1.5, -0.0, -NAN};
    cr_expect_eq(dc_first_bad(&cb, LF_F64, gv, w, 3, dc_rel_bound(&cb, 0)), 1, "-0.0 for +0.0 in an exact cone");
    gv[1] = 0.0;
    cr_expect_eq(dc_first_bad(&cb, LF_F64, gv, w, 3, dc_rel_bound(&cb, 0)), -1, "NaN signs aside, equal");
    gv[0] = nextafter(1.5, 2);
    cr_expect_eq(dc_first_bad(&cb, LF_F64, gv, w, 3, dc_rel_bound(&cb, 0)), 0, "1 ulp off in an exact cone");
    /* inexact cone (exp, f64): a few ulp pass, 1e-12 relative does not */
    cr_expect_eq(dc_first_bad(&ce, LF_F64, gv, w, 3, dc_rel_bound(&ce, 0)), -1, "1 ulp after exp");
    gv[0] = 1.5 * (1 + 1e-12);
    cr_expect_eq(dc_first_bad(&ce, LF_F64, gv, w, 3, dc_rel_bound(&ce, 0)), 0, "1e-12 relative after an f64 exp");
    /* integers: bytes */
    int64_t iw[2] = {INT64_C(9007199254740993), 7}, ig[2] = {INT64_C(9007199254740992), 7};
    cr_assert_eq((double)iw[0], (double)ig[0]); /* what a comparison through double saw */
    cr_expect_eq(dc_first_bad(&ca, LF_I64, ig, iw, 2, 1.0), 0, "2^53 for 2^53 + 1, even in an inexact cone");
    dc_cone_free(&ca);
    dc_cone_free(&cb);
    dc_cone_free(&ce);
    lf_buffer_free(xb);
    lf_graph_free(g);
    lf_ctx_destroy(ctx);
}

enum { NGRAPHS = 20000 };

/* Graphs the differential test runs: $LF_TEST_NGRAPHS or NGRAPHS (meson runs
 * this suite twice: on the interpreter with every graph, and compiled with
 * fewer, since each new kernel costs a C compile). Under valgrind (CI's
 * third pass) a quarter of NGRAPHS: the graphs are drawn from the seed, so
 * each run samples a fresh quarter; the other passes run them all. */
static int ngraphs(void) {
    const char *e = getenv("LF_TEST_NGRAPHS");
    return e ? atoi(e) : tu_on_valgrind() ? NGRAPHS / 4 : NGRAPHS;
}

/* Compiled kernels: whether this run compiles (LF_COMPILE is not "never"). */
static bool compiled_run(void) {
    const char *e = getenv("LF_COMPILE");
    return !(e && strcmp(e, "never") == 0);
}

/* Evaluates out alone (fused) into an input buffer of g with its dtype and
 * shape, if g has one, and compares with want (the reference's values): the
 * in-place path when the output reads that input only where it writes,
 * staging otherwise (fusion/plan_inplace.c). The input's contents are put
 * back afterwards. Returns whether it ran. */
static bool check_into_an_input(lf_ctx *ctx, lf_graph *g, lf_node *out, const void *want, const char *where,
                                int *in_place) {
    lf_buffer *b = NULL;
    for (int id = 0; id < g->nnodes && !b; id++) {
        const lf_node *x = g->nodes[id];
        if (x->kind == NODE_INPUT && x->dtype == out->dtype && x->ndim == out->ndim &&
            !memcmp(x->shape, out->shape, (size_t)out->ndim * sizeof *out->shape))
            b = x->u.buffer;
    }
    if (!b) return false;
    size_t bytes = lf_buffer_bytes(b);
    void *keep = tu_read_raw(b);
    ctx->backend = planned_backend();
    ctx->opt.fusion = 1;
    cr_assert_eq(lf_eval(g, 1, &out, &b), LF_OK, "%s, into an input: %s", where, lf_errmsg(ctx));
    lf_eval_stats st;
    lf_ctx_last_stats(ctx, &st);
    *in_place += st.outputs_in_place;
    void *got = tu_read_raw(b);
    char what[200], msg[600];
    snprintf(what, sizeof what, "%s, into an input%s", where, st.outputs_in_place ? " (in place)" : " (staged)");
    /* the fused run matched (or was skipped as noise: then want is NULL) */
    cr_assert_neq(compare_output(ctx, g, out, got, want, what, msg, sizeof msg, false), -1, "%s", msg);
    lf_buffer_write(b, keep, bytes);
    free(keep);
    free(got);
    return true;
}

/* A compiled CPU context without the vector math library: LF_CPU_MARCH is
 * x86-64-v2 while its CPU state is made (backends/cpu/cpu.c turns libmvec
 * off below AVX2), so its exempt functions are the reference's libm calls
 * bit for bit (lazyfuse.h, "CPU backend"). Made on first use, kept. */
static lf_ctx *scalar_math_ctx(void) {
    static lf_ctx *sc;
    if (sc) return sc;
    const char *was = getenv("LF_CPU_MARCH");
    char *saved = was ? strdup(was) : NULL;
    setenv("LF_CPU_MARCH", "x86-64-v2", 1);
    sc = fctx(1);
    lf_graph *g = lf_graph_new(sc); /* one eval makes the CPU state while the variable is set */
    lf_node *x = lf_exp(g, lf_fill(g, LF_F32, 1.0, 1, (int64_t[]){1}));
    lf_buffer *b = lf_buffer_new_like(sc, x);
    cr_assert_eq(lf_eval(g, 1, &x, &b), LF_OK, "%s", lf_errmsg(sc));
    lf_buffer_free(b);
    lf_graph_free(g);
    if (saved) setenv("LF_CPU_MARCH", saved, 1);
    else unsetenv("LF_CPU_MARCH");
    free(saved);
    return sc;
}

/* A compiled output whose cone has libmvec functions can miss its bound
 * when a later subtraction cancels a libmvec result (its few ulp become a
 * large relative error; LF_TEST_SEED=209119458485972 LF_TEST_GRAPH=28 of
 * commit bcda7b5). The second opinion: the same graph, rebuilt from its
 * seed (and round), with the same fusion and outputs on scalar_math_ctx,
 * must match the reference with libmvec's allowance taken away. Returns
 * compare_output's verdict of that run (msg says why on -1). */
static int without_libmvec(uint64_t seed, int gi, int round, bool fused, int nout, int i, const void *want,
                           const char *what, char *msg, int cap) {
    lf_ctx *sc = scalar_math_ctx();
    sc->opt.fusion = fused;
    gen G;
    lf_node *outs[3];
    cr_assert_eq(gen_graph(&G, sc, seed, gi, outs), nout);
    if (round == 1) gen_scalar_update(&G);
    lf_buffer *b[3];
    for (int k = 0; k < nout; k++) b[k] = lf_buffer_new_like(sc, outs[k]);
    cr_assert_eq(lf_eval(G.g, nout, outs, b), LF_OK, "%s: without libmvec: %s", what, lf_errmsg(sc));
    void *got = tu_read_raw(b[i]);
    char what2[200];
    snprintf(what2, sizeof what2, "%s, without libmvec", what);
    int r = compare_output(sc, G.g, outs[i], got, want, what2, msg, cap, true);
    free(got);
    for (int k = 0; k < nout; k++) lf_buffer_free(b[k]);
    lf_graph_free(G.g);
    return r;
}

Test(fusion, differential_random_graphs, .timeout = 600) {
    uint64_t seed = tu_seed();
    const char *only = getenv("LF_TEST_GRAPH");
    int first = only ? atoi(only) : 0, last = only ? first + 1 : ngraphs();
    lf_ctx *ctx = fctx(1);
    int kernels_fused = 0, kernels_unfused = 0, coverbuf[10] = {0}, ill_conditioned = 0, scalar_rounds = 0;
    int into_inputs = 0, in_place = 0, libmvec_excused = 0; /* graphs with an output checked without libmvec */
    int *cover = getenv("LF_TEST_VERBOSE") ? coverbuf : NULL;
    for (int gi = first; gi < last; gi++) {
        gen G;
        lf_node *outs[3];
        if (getenv("LF_TEST_TRACE")) tu_note("graph %d\n", gi); /* which graph crashed the planner */
        int nout = gen_graph(&G, ctx, seed, gi, outs);
        double *last_want[3] = {NULL, NULL, NULL};
        bool excused = false; /* an output of this graph was checked without libmvec */
        /* round 1 (graphs with constants): new values set with lf_scalar_set,
           the same graph evaluated again: no compile, the same comparisons */
        for (int round = 0; round < 2; round++) {
        if (round == 1 && gen_scalar_update(&G) == 0) break;
        scalar_rounds += round;
        lf_buffer *res[3][3]; /* [fused, unfused, reference][output] */
        for (int mode = 0; mode < 3; mode++) {
            ctx->backend = mode == 2 ? LF_BACKEND_REFERENCE : planned_backend();
            ctx->opt.fusion = mode == 0;
            for (int i = 0; i < nout; i++) res[mode][i] = lf_buffer_new_like(ctx, outs[i]);
            lf_status st = lf_eval(G.g, nout, outs, res[mode]);
            cr_assert_eq(st, LF_OK, "graph %d (LF_TEST_SEED=%" PRIu64 " LF_TEST_GRAPH=%d), round %d, mode %d: %s",
                         gi, seed, gi, round, mode, lf_errmsg(ctx));
            if (round == 1 && mode < 2 && !G.exponent_class_changed) {
                /* new constant values: nothing to compile or plan (unless an
                   exponent changed class: lazyfuse.h, lf_const) */
                lf_eval_stats rs;
                lf_ctx_last_stats(ctx, &rs);
                cr_assert_eq(rs.kernels_compiled, 0, "graph %d (LF_TEST_SEED=%" PRIu64 " LF_TEST_GRAPH=%d) mode %d: "
                             "a new constant value compiled %d kernel(s)", gi, seed, gi, mode, rs.kernels_compiled);
                if (compiled_run()) /* both programs, fused and unfused, are in the graph's cache */
                    cr_assert(rs.program_reused, "graph %d (LF_TEST_SEED=%" PRIu64 " LF_TEST_GRAPH=%d) mode %d: "
                              "a new constant value replanned the program", gi, seed, gi, mode);
            }
            if (mode == 0 && compiled_run() && ctx->backend == LF_BACKEND_CPU) {
                /* compiled: 1 and 3 threads give bit-identical results */
                for (int t = 1; t <= 3; t += 2) {
                    cr_assert_eq(cpu_set_threads(ctx, t), LF_OK);
                    lf_buffer *again[3];
                    for (int i = 0; i < nout; i++) again[i] = lf_buffer_new_like(ctx, outs[i]);
                    cr_assert_eq(lf_eval(G.g, nout, outs, again), LF_OK, "%s", lf_errmsg(ctx));
                    for (int i = 0; i < nout; i++) {
                        size_t bytes = lf_buffer_bytes(again[i]);
                        void *x = malloc(bytes ? bytes : 1), *y = malloc(bytes ? bytes : 1);
                        lf_buffer_read(again[i], x, bytes);
                        lf_buffer_read(res[0][i], y, bytes);
                        cr_assert(memcmp(x, y, bytes) == 0,
                                  "graph %d (LF_TEST_SEED=%" PRIu64 " LF_TEST_GRAPH=%d) output %d: "
                                  "%d threads differ from 2", gi, seed, gi, i, t);
                        free(x);
                        free(y);
                        lf_buffer_free(again[i]);
                    }
                }
                cr_assert_eq(cpu_set_threads(ctx, 2), LF_OK);
            }
            lf_eval_stats s;
            lf_ctx_last_stats(ctx, &s);
            if (mode == 0 && round == 0) kernels_fused += s.kernels;
            if (mode == 1 && round == 0) kernels_unfused += s.kernels;
        }
        if (cover && round == 0) { /* what the plans exercised (LF_TEST_VERBOSE) */
            fuse_schedule *s = NULL;
            cr_assert_eq(fuse_plan(G.g, nout, outs, true, &s), LF_OK);
            bool seen[10] = {false};
            for (int k = 0; k < s->nkernels; k++) {
                const fuse_kernel *kn = &s->kernels[k];
                for (int j = 0; j < kn->nloads; j++) seen[0] |= kn->loads[j].map.nsteps > 1;
                seen[1] |= kn->epi && kn->nepi_loads + kn->nstores > 2;
                seen[2] |= kn->epi && kn->body->nexprs > 1;
                seen[3] |= kn->nnodes > 3;
                seen[6] |= kn->row != NULL;
                seen[7] |= kn->npasses > 1;
                seen[8] |= kn->nreds > 1 && kn->reds[1].pass == 0;
                seen[9] |= !kn->epi && kn->nstores > 1;
            }
            for (int j = 0; j < s->nslots; j++) seen[4] |= s->slots[j].kind == FUSE_SLOT_TEMP;
            for (int i = 0; i < nout; i++) seen[5] |= outs[i]->numel == 0;
            for (int j = 0; j < 10; j++) cover[j] += seen[j];
            fuse_schedule_free(s);
        }
        bool skipped = false; /* an output of this graph was not compared */
        for (int i = 0; i < nout; i++) {
            void *v[3];
            for (int mode = 0; mode < 3; mode++) v[mode] = tu_read_raw(res[mode][i]);
            bool compared = true;
            for (int mode = 0; mode < 2 && compared; mode++) {
                char what[160], msg[600];
                snprintf(what, sizeof what, "graph %d (LF_TEST_SEED=%" PRIu64 " LF_TEST_GRAPH=%d) round %d: %s output %d",
                         gi, seed, gi, round, mode ? "unfused" : "fused", i);
                int r = compare_output(ctx, G.g, outs[i], v[mode], v[2], what, msg, sizeof msg, false);
                if (r == -1 && compiled_run() && planned_backend() == LF_BACKEND_CPU) { /* libmvec cancelled? */
                    dc_cone c;
                    dc_cone_init(&c, outs[i], true);
                    bool exempt = c.exempt;
                    dc_cone_free(&c);
                    char msg2[600];
                    if (exempt && without_libmvec(seed, gi, round, mode == 0, nout, i, v[2], what, msg2, sizeof msg2) == 1) {
                        tu_note("%s: differs by more than libmvec's bound (%s); without libmvec it matches\n", what, msg);
                        libmvec_excused += !excused;
                        excused = true;
                        r = 1;
                    } else if (exempt) {
                        tu_note("%s: the check without libmvec: %s\n", what, msg2);
                    }
                }
                if (r == -1 && mode == 0) { /* the fused schedule, into the log */
                    fuse_schedule *s = NULL;
                    char *text = NULL;
                    size_t len = 0;
                    FILE *f = open_memstream(&text, &len);
                    if (f && fuse_plan(G.g, nout, outs, true, &s) == LF_OK) fuse_schedule_print(s, f);
                    if (f) fclose(f);
                    if (text) tu_note("%s", text);
                    free(text);
                    fuse_schedule_free(s);
                }
                cr_assert_neq(r, -1, "%s", msg);
                compared = r == 1;
            }
            if (!compared) {
                ill_conditioned += !skipped;
                skipped = true;
            }
            free(last_want[i]); /* the reference of the last round, for the check below */
            last_want[i] = compared ? v[2] : NULL;
            for (int mode = 0; mode < 3; mode++) {
                if (mode < 2 || !compared) free(v[mode]);
                lf_buffer_free(res[mode][i]);
            }
        }
        }
        /* after the rounds (they check the program cache): each output written
           into one of its graph's inputs, in place where the plan allows */
        for (int i = 0; i < nout; i++) {
            if (last_want[i]) {
                char where[120];
                snprintf(where, sizeof where, "graph %d (LF_TEST_SEED=%" PRIu64 " LF_TEST_GRAPH=%d) output %d", gi,
                         seed, gi, i);
                into_inputs += check_into_an_input(ctx, G.g, outs[i], last_want[i], where, &in_place);
            }
            free(last_want[i]);
        }
        lf_graph_free(G.g);
    }
    /* the escape above is for rare graphs; a rule that makes many is a bug */
    tu_note("differential: %d of %d graphs had an output not compared (a float sum in its cone is cancellation "
            "noise), %d outputs in all\n", ill_conditioned, last - first, noise_skips);
    tu_note("differential: %d of %d graphs had an output that missed libmvec's bound and matched without libmvec\n",
            libmvec_excused, last - first);
    cr_expect_leq(libmvec_excused, 1 + (last - first) / 50, "%d of %d graphs needed the check without libmvec",
                  libmvec_excused, last - first);
    cr_expect_leq(ill_conditioned, 1 + (last - first) / 50, "%d of %d graphs had cancelling float sums feeding their outputs",
                  ill_conditioned, last - first);
    if (getenv("LF_TEST_VERBOSE"))
        tu_note(
                "differential: %d graphs, %d kernels fused, %d unfused; graphs with: two-step "
                "index maps %d, epilogues %d, fused reduction inputs %d, kernels of 4+ nodes %d, "
                "temporaries %d, empty outputs %d, row passes %d, several reduction passes %d, "
                "horizontal reductions %d, multi-output elementwise kernels %d; evaluated again with new "
                "constant values %d; outputs written into an input %d (in place %d)\n",
                last - first, kernels_fused, kernels_unfused, coverbuf[0], coverbuf[1], coverbuf[2],
                coverbuf[3], coverbuf[4], coverbuf[5], coverbuf[6], coverbuf[7], coverbuf[8], coverbuf[9],
                scalar_rounds, into_inputs, in_place);
    lf_ctx_destroy(ctx);
}

/* A stencil pyramid (level k+1 = (a + b) * 0.5 of level k's two shifted
 * slices): the multiple-consumer rule materializes every third level over
 * about D/3 rounds, each re-deriving only the instances below its new roots;
 * the kernels are those of the full rounds (134 for depth 400). */
Test(fusion, stencil_pyramid_rounds) {
    enum { DEPTH = 400, TOP = 64 };
    lf_ctx *ctx = fctx(1);
    lf_graph *g = lf_graph_new(ctx);
    int64_t len = TOP + DEPTH;
    float *x = malloc((size_t)len * sizeof *x);
    /* distinct, non-linear values (an all-ones input cannot show a shifted
       or swapped slice); the reference pyramid is computed here in f32 with
       the same operations, so the comparison is exact */
    float *ref = malloc((size_t)len * sizeof *ref);
    for (int64_t i = 0; i < len; i++) ref[i] = x[i] = (float)((i * i + 3 * i) % 29) - 9.0f;
    lf_buffer *xb = lf_buffer_new(ctx, LF_F32, 1, &len);
    lf_buffer *yb = lf_buffer_new(ctx, LF_F32, 1, (int64_t[]){TOP});
    cr_assert_eq(lf_buffer_write(xb, x, (size_t)len * sizeof *x), LF_OK);
    lf_fn *f = lf_fn_parse(g, "(a, b) -> (a + b) * 0.5");
    lf_node *v = lf_input(g, xb);
    for (int k = 0; k < DEPTH; k++) {
        int64_t m = lf_node_dim(v, 0);
        lf_node *ab[2] = {lf_slice(g, v, 0, 0, m - 1, 1), lf_slice(g, v, 0, 1, m, 1)};
        v = lf_zipwith(g, f, 2, ab);
    }
    cr_assert_eq(lf_eval(g, 1, &v, &yb), LF_OK, "%s", lf_errmsg(ctx));
    lf_eval_stats st;
    cr_assert_eq(lf_ctx_last_stats(ctx, &st), LF_OK);
    cr_expect_eq(st.kernels, 134);
    float y[TOP];
    cr_assert_eq(lf_buffer_read(yb, y, sizeof y), LF_OK);
    for (int k = 0; k < DEPTH; k++)
        for (int64_t j = 0; j + 1 < len - k; j++) ref[j] = (ref[j] + ref[j + 1]) * 0.5f;
    for (int j = 0; j < TOP; j++) cr_assert_eq(y[j], ref[j], "y[%d] = %a, want %a", j, y[j], ref[j]);
    free(ref);
    free(x);
    lf_buffer_free(xb);
    lf_buffer_free(yb);
    lf_graph_free(g);
    lf_ctx_destroy(ctx);
}

/* ---- scans (fusion/plan_scan.c) ------------------------------------------------------------ */

static lf_node *scan_fused(lf_graph *g, lf_ctx *ctx) {
    int64_t n = 3 * N + 5;
    lf_node *x = lf_input(g, ramp(ctx, LF_F32, 1, &n));
    return lf_div(g, lf_scan(g, LF_RED_SUM, lf_mul(g, x, x), 0, false), lf_const(g, LF_F32, (double)n));
}

/* map -> scan -> map: cumsum(x*x)/n is one kernel and stores nothing but
 * its output; unfused it is three kernels. */
Test(fusion, scan_map_epilogue_one_kernel) {
    lf_eval_stats on, off;
    run_example("cumsum(x*x)/n", scan_fused, &on, &off);
    cr_expect_eq(on.kernels, 1);
    cr_expect_eq(on.bytes_materialized, 0);
    cr_expect_eq(on.bytes_read, (3 * N + 5) * 4);
    cr_expect_eq(on.bytes_written, (3 * N + 5) * 4);
    cr_expect_eq(off.kernels, 3);
    cr_expect_eq(off.bytes_materialized, 2 * (3 * N + 5) * 4);
}

static lf_node *scan_shifted(lf_graph *g, lf_ctx *ctx) {
    int64_t n = 777;
    lf_node *x = lf_input(g, ramp(ctx, LF_F64, 1, &n));
    lf_node *c = lf_scan(g, LF_RED_SUM, x, 0, false);
    /* c[1:] - c[:-1] reads the scan at other positions */
    return lf_sub(g, lf_slice(g, c, 0, 1, LF_NONE, 1), lf_slice(g, c, 0, 0, n - 1, 1));
}

/* A consumer reading the scan at another position is a kernel of its own
 * that loads the stored scan. */
Test(fusion, scan_shifted_read_is_a_separate_kernel) {
    lf_eval_stats on, off;
    run_example("cumsum(x)[1:] - cumsum(x)[:-1]", scan_shifted, &on, &off);
    cr_expect_eq(on.kernels, 2);
    cr_expect_eq(on.bytes_materialized, 777 * 8);
}

/* Batched scans along every axis, exclusive and inclusive, fused with a
 * producer and an epilogue, and a reduction of a scan (its own kernel):
 * fused, unfused and the interpreter agree with the reference. */
Test(fusion, scan_batched_axes_and_consumers) {
    for (int f = 1; f >= 0; f--) {
        lf_ctx *ctx = fctx(f);
        lf_graph *g = lf_graph_new(ctx);
        lf_node *x = lf_input(g, ramp(ctx, LF_F32, 3, (int64_t[]){4, 5, 6}));
        lf_node *outs[4];
        outs[0] = lf_sqrt(g, lf_abs(g, lf_scan(g, LF_RED_PROD, lf_add(g, x, lf_const(g, LF_F32, 1)), 0, true)));
        outs[1] = lf_scan(g, LF_RED_MAX, lf_neg(g, x), 1, false);
        outs[2] = lf_reduce(g, LF_RED_SUM, lf_scan(g, LF_RED_SUM, x, -1, false), 0, NULL, false);
        outs[3] = lf_add(g, lf_scan(g, LF_RED_MIN, x, 2, true), x);
        lf_eval_stats st = eval_checked(ctx, g, 4, outs);
        if (f) cr_expect_eq(st.kernels, 5, "%d kernels", st.kernels); /* 4 scans + the sum */
        lf_graph_free(g);
        lf_ctx_destroy(ctx);
    }
}

/* Every allocation of a fused eval with scans (a long row over threads, a
 * batched scan with an epilogue, a shifted read) fails in turn, cleanly. */
Test(fusion, scan_eval_allocation_failures_are_clean) {
    setenv("LF_CPU_PARALLEL_MIN", "1", 1);
    lf_ctx *ctx = fctx(1);
    lf_graph *g = lf_graph_new(ctx);
    int64_t n = 2 * LF_SCAN_BLOCK + 3;
    lf_node *x = lf_input(g, ramp(ctx, LF_F32, 1, &n));
    lf_node *m = lf_input(g, ramp(ctx, LF_F64, 2, (int64_t[]){5, 7}));
    lf_node *c = lf_scan(g, LF_RED_SUM, lf_mul(g, x, x), 0, false);
    lf_node *o1 = lf_div(g, c, lf_const(g, LF_F32, 3));
    lf_node *o2 = lf_add(g, lf_scan(g, LF_RED_MAX, m, 0, true), lf_slice(g, lf_scan(g, LF_RED_PROD, m, 1, false), 1, LF_NONE, LF_NONE, -1));
    lf_node *outs[2] = {o1, o2};
    lf_buffer *d[2] = {lf_buffer_new_like(ctx, o1), lf_buffer_new_like(ctx, o2)};
    int failures = sweep_eval_failures(ctx, g, 2, outs, d);
    cr_expect_gt(failures, 10, "only %d allocations swept", failures);
    eval_checked(ctx, g, 2, outs);
    lf_graph_free(g);
    lf_ctx_destroy(ctx);
    unsetenv("LF_CPU_PARALLEL_MIN");
}

/* ---- gather and scatter (issue 13) --------------------------------------------------------- */

/* exp(x[idx]) * w is one kernel: the gather is a load of x whose index is
 * data, read in registers; x and idx are read, nothing is stored. */
static lf_node *gathered(lf_graph *g, lf_ctx *ctx) {
    int64_t n = N;
    lf_node *x = lf_input(g, ramp(ctx, LF_F64, 1, &n));
    double iv[N];
    for (int i = 0; i < N; i++) iv[i] = (i * 37) % N - (i % 3 == 0 ? N : 0);
    lf_node *idx = lf_input(g, tu_buf(ctx, LF_I64, 1, &n, iv));
    lf_node *w = lf_input(g, ramp(ctx, LF_F64, 1, &n));
    lf_node *e = lf_map(g, lf_fn_parse(g, "(v) -> exp(v * 0.001)"), lf_gather(g, x, 0, idx));
    return lf_mul(g, e, w);
}

Test(fusion, gather_is_a_load_in_its_consumer) {
    lf_eval_stats on, off;
    run_example("exp(x[idx])*w", gathered, &on, &off);
    cr_expect_eq(on.kernels, 1);
    cr_expect_eq(on.bytes_materialized, 0);
    cr_expect_eq(on.bytes_read, 3 * N * 8, "read %zu: x, idx, w once", on.bytes_read);
    cr_expect_eq(off.kernels, 3, "unfused: gather, exp, *; got %d", off.kernels);

    lf_ctx *ctx = fctx(1);
    lf_graph *g = lf_graph_new(ctx);
    int64_t n = N;
    lf_node *x = lf_input(g, ramp(ctx, LF_F32, 1, &n));
    /* a computed index and a computed x are stored first (plan_gather.c) */
    lf_node *ci = lf_cast(g, lf_map(g, lf_fn_parse(g, "(i) -> (i * 7) % 1000"), lf_iota(g, LF_I64, N)), LF_I64);
    lf_node *cx = lf_map(g, lf_fn_parse(g, "(v) -> v * 2"), x);
    lf_node *y = lf_add(g, lf_gather(g, cx, 0, ci), lf_const(g, LF_F32, 1));
    lf_eval_stats st = eval_checked(ctx, g, 1, &y);
    cr_expect_eq(st.kernels, 3, "index, x, the consumer: %d", st.kernels);
    cr_expect_eq(st.bytes_materialized, N * 8 + N * 4);
    /* read through a slice: the gather is computed whole (every index is checked) */
    lf_node *xi = lf_input(g, tu_buf(ctx, LF_I32, 1, &n, NULL));
    lf_node *sl = lf_slice(g, lf_gather(g, x, 0, xi), 0, 10, 20, 1);
    st = eval_checked(ctx, g, 1, &sl);
    cr_expect_eq(st.kernels, 2);
    cr_expect_eq(st.bytes_materialized, N * 4);
    /* broadcast and reduced: still in registers */
    lf_node *s = lf_reduce(g, LF_RED_SUM, lf_gather(g, x, 0, xi), 0, NULL, false);
    st = eval_checked(ctx, g, 1, &s);
    cr_expect_eq(st.kernels, 1);
    cr_expect_eq(st.bytes_materialized, 0);
    lf_graph_free(g);
    lf_ctx_destroy(ctx);
}

/* A gather whose x is a reduction reads x from memory, so it never joins
 * the reduction's kernel (as an epilogue, a row pass or pass-0 work): there
 * x is a register value not yet stored (LF_TEST_SEED=72522318522711 graph
 * 12542 of commit f7c9831 gathered a max from its own epilogue and read
 * uninitialized memory). Row maxima of X gathered by a permutation, as an
 * output beside the maxima and alone; then the row pass's case: X minus
 * its row maxima gathered by column. */
Test(fusion, gather_of_a_reduction_waits_for_its_store) {
    lf_ctx *ctx = fctx(1);
    lf_graph *g = lf_graph_new(ctx);
    int64_t shape[2] = {6, 5}, six = 6;
    double xv[30], iv[6] = {5, 0, 3, 1, 4, 2};
    for (int i = 0; i < 30; i++) xv[i] = (double)((i * 17) % 23) - 11.0;
    lf_node *X = lf_input(g, tu_buf(ctx, LF_F64, 2, shape, xv));
    lf_node *idx = lf_input(g, tu_buf(ctx, LF_I64, 1, &six, iv));
    int ax1 = 1;
    lf_node *m = lf_reduce(g, LF_RED_MAX, X, 1, &ax1, false);
    lf_node *y = lf_mul(g, lf_gather(g, m, 0, idx), lf_const(g, LF_F64, 2));
    lf_node *both[2] = {y, m};
    cr_assert_eq(lf_graph_status(g), LF_OK, "%s", lf_graph_errmsg(g));
    lf_eval_stats st = eval_checked(ctx, g, 2, both);
    cr_expect_eq(st.kernels, 2, "the maxima, then the gather: %d kernels", st.kernels);
    st = eval_checked(ctx, g, 1, &y);
    cr_expect_eq(st.kernels, 2, "the maxima, then the gather: %d kernels", st.kernels);
    /* X minus its [6, 1] maxima gathered along axis 1 (index 0, five times):
       a [6, 5] map over X's space, a row-pass candidate of the maxima */
    double zeros[30] = {0};
    lf_node *i0 = lf_input(g, tu_buf(ctx, LF_I64, 2, shape, zeros));
    lf_node *z = lf_sub(g, X, lf_gather(g, lf_reduce(g, LF_RED_MAX, X, 1, &ax1, true), 1, i0));
    cr_assert_eq(lf_graph_status(g), LF_OK, "%s", lf_graph_errmsg(g));
    st = eval_checked(ctx, g, 1, &z);
    cr_expect_geq(st.kernels, 2, "the maxima are stored before the gather reads them: %d kernels", st.kernels);
    lf_graph_free(g);
    lf_ctx_destroy(ctx);
}

/* A histogram of floor(x*256) is one kernel that reads x once and stores
 * only the 256 counts (bincount's zeros are a literal). */
static lf_node *histogram(lf_graph *g, lf_ctx *ctx) {
    int64_t n = 100000;
    double *xv = malloc(sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n; i++) xv[i] = (double)((i * 7919) % 100000) / 100000.0;
    lf_node *x = lf_input(g, tu_buf(ctx, LF_F32, 1, &n, xv));
    free(xv);
    lf_node *b = lf_cast(g, lf_map(g, lf_fn_parse(g, "(v) -> floor(v * 256)"), x), LF_I32);
    return lf_bincount(g, b, NULL, 256);
}

Test(fusion, histogram_is_one_kernel) {
    lf_eval_stats on, off;
    run_example("bincount(i32(floor(x*256)), 256)", histogram, &on, &off);
    cr_expect_eq(on.kernels, 1);
    cr_expect_eq(on.bytes_materialized, 0);
    cr_expect_eq(on.bytes_read, 100000 * 4, "read %zu: x once", on.bytes_read);
    cr_expect_eq(on.bytes_written, 256 * 8);
    cr_expect_gt(off.kernels, 2);
}

/* Allocation failures of evals with gathers and scatters (fused, through a
 * slice, as outputs) are clean. */
/* Gathers in place bring three loads each (the gather, its idx and x's
 * base): three of them with their own x and idx are nine, over the fn's
 * limit of LF_MAX_ARGS. The planner makes one a root (stored), directly in
 * the consumer's fn or below an inlined map, instead of building a kernel
 * with nine parameters (an assertion failed there: random graph 10161 of
 * LF_TEST_SEED=76009831845292). */
Test(fusion, gathers_over_the_load_limit_split) {
    lf_ctx *ctx = fctx(1);
    for (int nested = 0; nested < 2; nested++) {
        lf_graph *g = lf_graph_new(ctx);
        int64_t n = N;
        lf_node *t[3];
        for (int k = 0; k < 3; k++) {
            lf_node *x = lf_input(g, ramp(ctx, LF_F32, 1, &n));
            lf_node *ix = lf_cast(g, lf_map(g, lf_fn_parse(g, "(i) -> (i * 7 + 3) % 997"), lf_iota(g, LF_I64, N)),
                                  LF_I32);
            lf_node *ixr = lf_add(g, ix, lf_const(g, LF_I32, k)); /* stored: a computed index */
            t[k] = lf_gather(g, x, 0, ixr);
        }
        if (nested) t[0] = lf_map(g, lf_fn_parse(g, "(v) -> v * 0.5 + 1"), t[0]);
        lf_node *y = lf_zipwith(g, lf_fn_parse(g, "(a, b, c) -> a * b - c"), 3, t);
        cr_assert(y != NULL, "%s", lf_errmsg(ctx));
        lf_eval_stats st = eval_checked(ctx, g, 1, &y);
        cr_expect_leq(st.kernels, 3 + 1 + 1, "%d kernels", st.kernels); /* 3 indices, a gather, the consumer */
        lf_graph_free(g);
    }
    lf_ctx_destroy(ctx);
}

Test(fusion, gather_scatter_allocation_failures_are_clean) {
    lf_ctx *ctx = fctx(1);
    lf_graph *g = lf_graph_new(ctx);
    lf_node *x = lf_input(g, ramp(ctx, LF_F64, 2, (int64_t[]){4, 6}));
    lf_node *i = lf_input(g, tu_buf(ctx, LF_I64, 2, (int64_t[]){4, 3}, (double[]){0, 5, -1, 2, 2, 3, 1, 0, 4, -6, 5, 5}));
    lf_node *t = lf_gather(g, x, 1, i);
    lf_node *o1 = lf_reduce(g, LF_RED_MAX, lf_mul(g, t, t), 1, (int[]){1}, false);
    lf_node *o2 = lf_scatter(g, LF_SCATTER_ADD, x, 1, i, lf_slice(g, t, 1, 0, 3, 1));
    lf_node *o3 = lf_bincount(g, lf_reshape(g, lf_add(g, i, lf_const(g, LF_I64, 6)), 1, (int64_t[]){12}), NULL, 12);
    lf_node *outs[3] = {o1, o2, o3};
    lf_buffer *d[3] = {lf_buffer_new_like(ctx, o1), lf_buffer_new_like(ctx, o2), lf_buffer_new_like(ctx, o3)};
    int failures = sweep_eval_failures(ctx, g, 3, outs, d);
    cr_expect_gt(failures, 10, "only %d allocations swept", failures);
    eval_checked(ctx, g, 3, outs);
    for (int k = 0; k < 3; k++) lf_buffer_free(d[k]);
    lf_graph_free(g);
    lf_ctx_destroy(ctx);
}

/* Small reductions (plan.c): a sum or product over at most SMALL_REDUCE
 * elements is inlined as an unrolled fold, bit-identical to the reference
 * (the identity first, each element in the accumulator dtype, rounded
 * once), so a contraction over a tiny axis fuses into its consumer. Larger
 * ones, outputs and min/max stay reduction kernels. */
Test(fusion, small_reductions_are_inlined) {
    for (int f = 1; f >= 0; f--) {
        lf_ctx *ctx = fctx(f);
        lf_graph *g = lf_graph_new(ctx);
        lf_node *v = lf_input(g, ramp(ctx, LF_F32, 2, (int64_t[]){40, 3}));
        lf_node *c = lf_input(g, ramp(ctx, LF_F32, 2, (int64_t[]){3, 17}));
        lf_node *prod = lf_mul(g, lf_expand_dims(g, v, 2), lf_expand_dims(g, c, 0)); /* [40,3,17] */
        lf_node *a = lf_reduce(g, LF_RED_SUM, prod, 1, (int[]){1}, false);     /* [40,17] = v @ c */
        lf_node *y = lf_mul(g, a, a);
        lf_eval_stats st = eval_checked(ctx, g, 1, &y);
        cr_expect_eq(st.kernels, f ? 1 : 3, "fusion %d: kernels %d", f, st.kernels); /* mul, sum, mul */
        if (f) cr_expect_eq(st.bytes_materialized, 0);
        /* keepdims, a product over two axes (2 x 4 = 8 elements), integers */
        lf_node *xi = lf_input(g, ramp(ctx, LF_I32, 3, (int64_t[]){2, 9, 4}));
        lf_node *pi = lf_reduce(g, LF_RED_PROD, xi, 2, (int[]){0, 2}, true);
        lf_node *yi = lf_add(g, pi, lf_const(g, LF_I64, 1));
        st = eval_checked(ctx, g, 1, &yi);
        cr_expect_eq(st.kernels, f ? 1 : 2);
        /* nine elements: a reduction kernel of its own, stored for the map */
        lf_node *x9 = lf_input(g, ramp(ctx, LF_F64, 2, (int64_t[]){9, 5}));
        lf_node *s9 = lf_reduce(g, LF_RED_SUM, x9, 1, (int[]){0}, false);
        lf_node *y9 = lf_sqrt(g, lf_abs(g, s9));
        st = eval_checked(ctx, g, 1, &y9);
        cr_expect_eq(st.kernels, f ? 1 : 3); /* the map is the reduction's epilogue */
        lf_node *m3 = lf_reduce(g, LF_RED_MAX, v, 1, (int[]){1}, false); /* max: not inlined */
        lf_node *ym = lf_neg(g, m3);
        st = eval_checked(ctx, g, 1, &ym);
        cr_expect_eq(st.kernels, f ? 1 : 2);
        lf_graph_free(g);
        lf_ctx_destroy(ctx);
    }
}

/* Sorts (plan_sort.c): the key's map is computed in the sort's own kernel
 * (no stored key), topk's values and indices are one kernel, a gather of a
 * payload by argsort's indices is a load in its consumer, and every result
 * equals the reference's bit for bit. */
Test(fusion, sort_fuses_its_key_map_and_siblings) {
    for (int f = 1; f >= 0; f--) {
        lf_ctx *ctx = fctx(f);
        lf_graph *g = lf_graph_new(ctx);
        lf_node *x = lf_input(g, ramp(ctx, LF_F32, 2, (int64_t[]){7, 30}));
        lf_node *key = lf_sub(g, lf_abs(g, x), lf_const(g, LF_F32, 0.5));
        lf_node *outs[2] = {lf_topk(g, key, 4, 1, true), lf_argtopk(g, key, 4, 1, true)};
        cr_assert(outs[0] && outs[1], "%s", lf_errmsg(ctx));
        lf_eval_stats st = eval_checked(ctx, g, 2, outs);
        cr_expect_eq(st.kernels, f ? 1 : 4, "fusion %d: kernels %d", f, st.kernels);
        if (f) cr_expect_eq(st.bytes_materialized, 0);
        /* along axis 0, descending and ascending, values only */
        lf_node *s0 = lf_sort(g, key, 0, false);
        st = eval_checked(ctx, g, 1, &s0);
        cr_expect_eq(st.kernels, f ? 1 : 3); /* abs, sub, sort */
        /* take_along_axis(payload, argsort(key)) * 2: the sort, then one kernel */
        lf_node *pay = lf_input(g, ramp(ctx, LF_F64, 2, (int64_t[]){7, 30}));
        lf_node *ord = lf_argsort(g, key, 1, true);
        lf_node *y = lf_mul(g, lf_gather(g, pay, 1, ord), lf_const(g, LF_F64, 2.0));
        st = eval_checked(ctx, g, 1, &y);
        if (f) {
            cr_expect_eq(st.kernels, 2);
            cr_expect_eq(st.bytes_materialized, (size_t)7 * 30 * 8); /* the indices only */
        }
        /* a sort's input computed by an inlined small contraction (as spca) */
        lf_node *v = lf_input(g, ramp(ctx, LF_F32, 2, (int64_t[]){50, 3}));
        lf_node *c = lf_input(g, ramp(ctx, LF_F32, 2, (int64_t[]){3, 11}));
        lf_node *a = lf_reduce(g, LF_RED_SUM, lf_mul(g, lf_expand_dims(g, v, 2), lf_expand_dims(g, c, 0)), 1,
                               (int[]){1}, false);
        lf_node *tk[2] = {lf_argtopk(g, a, 5, 0, true), lf_topk(g, a, 5, 0, true)}; /* either order */
        cr_assert(tk[0] && tk[1]);
        st = eval_checked(ctx, g, 2, tk);
        if (f) {
            cr_expect_eq(st.kernels, 1);
            cr_expect_eq(st.bytes_materialized, 0);
        }
        lf_graph_free(g);
        lf_ctx_destroy(ctx);
    }
}

/* Small reductions nested in each other multiply their loads: sum over 8
 * of sum over 8 of x reads 64 positions of x; with one more input the fn
 * passes the 64-load cap, and the split makes one of them a root (a
 * reduction kernel) instead of failing. A small sum of an expensive input
 * (a float function: sqrt) is not inlined: a consumer reading it broadcast would compute the
 * exps again at each of its positions. Values as the reference's. */
Test(fusion, nested_small_reductions_split) {
    lf_ctx *ctx = fctx(1);
    lf_graph *g = lf_graph_new(ctx);
    lf_node *x = lf_input(g, ramp(ctx, LF_F32, 3, (int64_t[]){8, 8, 50}));
    lf_node *z = lf_input(g, ramp(ctx, LF_F32, 1, (int64_t[]){50}));
    lf_node *s1 = lf_reduce(g, LF_RED_SUM, x, 1, (int[]){0}, false);   /* [8, 50] */
    lf_node *s2 = lf_reduce(g, LF_RED_SUM, s1, 1, (int[]){0}, false);  /* [50] */
    lf_node *y = lf_add(g, s2, z);
    lf_eval_stats st = eval_checked(ctx, g, 1, &y);
    /* the outer sum made a root: a reduction kernel with the inner one inlined, y its epilogue */
    cr_expect_eq(st.kernels, 1, "kernels %d", st.kernels);
    fuse_schedule *s = plan_on(g, 1, &y);
    cr_expect(s->nkernels == 1 && s->kernels[0].redmask != 0 && s->kernels[0].nloads <= GRAPH_MAX_PARAMS);
    fuse_schedule_free(s);
    /* three levels, 512 positions of x */
    lf_node *x3 = lf_input(g, ramp(ctx, LF_F64, 4, (int64_t[]){8, 8, 8, 20}));
    lf_node *t = x3;
    for (int l = 0; l < 3; l++) t = lf_reduce(g, LF_RED_SUM, t, 1, (int[]){0}, false);
    lf_node *y3 = lf_mul(g, t, lf_const(g, LF_F64, 3.0));
    st = eval_checked(ctx, g, 1, &y3);
    cr_expect_eq(st.kernels, 2, "kernels %d", st.kernels);
    /* exp: the small sum stays a reduction kernel, the broadcast consumer reads it */
    lf_node *e = lf_input(g, ramp(ctx, LF_F32, 2, (int64_t[]){30, 4}));
    lf_node *se = lf_reduce(g, LF_RED_SUM, lf_sqrt(g, lf_abs(g, e)), 1, (int[]){1}, true); /* [30, 1] */
    lf_node *big = lf_input(g, ramp(ctx, LF_F32, 2, (int64_t[]){30, 200}));
    lf_node *yb = lf_mul(g, se, big);
    s = plan_on(g, 1, &yb);
    bool reduce_kernel = false;
    for (int k = 0; k < s->nkernels; k++) reduce_kernel |= s->kernels[k].redmask != 0;
    cr_expect(reduce_kernel, "sum(sqrt(|e|)) was inlined into the broadcast consumer");
    fuse_schedule_free(s);
    eval_checked(ctx, g, 1, &yb);
    lf_graph_free(g);
    lf_ctx_destroy(ctx);
}

/* Issue 26: the merges' scan of a root for a kernel it might join costs at
 * most a constant (its distinct loads, at most GRAPH_MAX_PARAMS + 1, and
 * their ACC checks), not the root's instances: a reduction over a chain of
 * `len` maps (len instances, one distinct load) tried against an earlier
 * reduction kernel over the same space visits a handful of loads at every
 * len, where a walk over the instances visits len of them; the shapes of
 * benches/scale_bench.c (accumulation, 8-input zipwiths, diamonds, row
 * normalisations) at two sizes stay under the same bound. fuse_schedule's
 * scan_max is a count, not a time: deterministic on any machine. */
static fuse_schedule *plan_shape(lf_ctx *ctx, lf_graph *g, int shape, int steps, lf_node **out) {
    int64_t sh[2] = {4, 8};
    lf_fn *add = lf_fn_parse(g, "(a, b) -> a + b");
    lf_fn *z8 = lf_fn_parse(g, "(a, b, c, d, e, f, g, h) -> (a + b + c + d + e + f + g + h) * 0.125");
    lf_fn *f = lf_fn_parse(g, "(v) -> v * 0.75"), *gf = lf_fn_parse(g, "(v) -> v * 0.25 + 0.001");
    lf_fn *dv = lf_fn_parse(g, "(a, b) -> a / b"), *ch = lf_fn_parse(g, "(v) -> v * 0.999 + 0.001");
    lf_node *x = lf_input(g, ramp(ctx, LF_F32, 2, sh)), *v = x, *first = NULL;
    uint64_t seed = 26;
    for (int i = 0; i < steps; i++) {
        int step = shape;
        if (shape == 5) { /* a fixed mix of steps 0..3 and plain maps (splitmix64), as the scale bench's mix */
            uint64_t z = (seed += 0x9e3779b97f4a7c15u);
            z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
            z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
            step = (int)((z ^ (z >> 31)) % 5);
        }
        switch (step) {
        case 0: v = lf_zipwith(g, add, 2, (lf_node *[]){v, lf_input(g, ramp(ctx, LF_F32, 2, sh))}); break;
        case 1: {
            lf_node *xs[8] = {v};
            for (int k = 1; k < 8; k++) xs[k] = lf_input(g, ramp(ctx, LF_F32, 2, sh));
            v = lf_zipwith(g, z8, 8, xs);
            break;
        }
        case 2: {
            lf_node *rev = lf_slice(g, v, 1, LF_NONE, LF_NONE, -1);
            v = lf_zipwith(g, add, 2, (lf_node *[]){lf_map(g, f, v), lf_map(g, gf, rev)});
            break;
        }
        case 3: v = lf_zipwith(g, dv, 2, (lf_node *[]){v, lf_reduce(g, LF_RED_SUM, v, 1, (int[]){1}, true)}); break;
        default: v = lf_map(g, ch, v); break; /* 4: the chain under a reduction */
        }
    }
    lf_node *outs[2] = {v, NULL};
    int n = 1;
    if (shape == 4) { /* sum(x) first, then sum(chain(x)): the second is scanned for the first's kernel */
        first = lf_reduce(g, LF_RED_SUM, x, 1, (int[]){1}, false);
        outs[0] = first;
        outs[1] = lf_reduce(g, LF_RED_SUM, v, 1, (int[]){1}, false);
        n = 2;
    }
    cr_assert_eq(lf_graph_status(g), LF_OK, "%s", lf_graph_errmsg(g));
    fuse_schedule *s = NULL;
    cr_assert_eq(fuse_plan(g, n, outs, true, &s), LF_OK, "%s", lf_errmsg(ctx));
    *out = outs[n - 1];
    return s;
}

Test(fusion, scanning_a_root_costs_a_constant) {
    static const char *names[] = {"accum", "zip8", "diamond", "rownorm", "reduced chain"};
    static const int steps[][2] = {{32, 128}, {8, 32}, {16, 64}, {16, 64}, {50, 200}};
    const uint64_t bound = 2 * (GRAPH_MAX_PARAMS + 1);
    for (int shape = 0; shape < 5; shape++)
        for (int z = 0; z < 2; z++) {
            lf_ctx *ctx = fctx(1);
            lf_graph *g = lf_graph_new(ctx);
            lf_node *v;
            fuse_schedule *s = plan_shape(ctx, g, shape, steps[shape][z], &v);
            cr_expect_leq(s->scan_max, bound, "%s, %d steps: one scan of a root visited %" PRIu64
                          " instances or loads (bound %" PRIu64 ")", names[shape], steps[shape][z],
                          s->scan_max, bound);
            if (shape == 4) cr_expect_gt(s->scan_work, 0, "the chain's reduction was never scanned");
            fuse_schedule_free(s);
            lf_graph_free(g);
            lf_ctx_destroy(ctx);
        }
}

/* Issue 26, item 1: a planning round re-derives only the instances of the
 * kernels that a new root changes (plan_vertical.c, find_instances), so the
 * instances that pass 1 processes over all rounds (fuse_schedule.inst_work,
 * a count: deterministic) grow linearly with the graph for the shapes of
 * benches/scale_bench.c whose rounds add one root each (accumulation,
 * 8-input zipwiths, diamonds), at about 2,000 and 8,000 nodes (3 to 6
 * instances a node here). Re-deriving every instance below the highest
 * new root each round, as before, did about rounds x nodes / 2: some 2
 * million instances at 8,000 nodes of an accumulation, 25 times this
 * bound. Row normalisations are left out: their first round alone derives
 * every reduction's chain (quadratic, issue 26). */
/* Plans each of accum, zip8 and diamond at two sizes (steps) and expects
 * the work count of the schedule (work) within per_node a node, with at
 * least one round per 20 nodes (the shapes make one root a step). */
static void expect_linear_work(const char *what, uint64_t (*work)(const fuse_schedule *), uint64_t per_node) {
    static const char *names[] = {"accum", "zip8", "diamond"};
    static const int steps[][2] = {{1000, 4000}, {250, 1000}, {500, 2000}}; /* 2 / 8 / 4 nodes a step */
    for (int shape = 0; shape < 3; shape++)
        for (int z = 0; z < 2; z++) {
            lf_ctx *ctx = fctx(1);
            lf_graph *g = lf_graph_new(ctx);
            lf_node *v;
            fuse_schedule *s = plan_shape(ctx, g, shape, steps[shape][z], &v);
            uint64_t nodes = (uint64_t)g->nnodes, bound = per_node * nodes;
            cr_expect_gt(s->rounds, (int)(nodes / 20), "%s: %d rounds, fewer than the shape makes", names[shape], s->rounds);
            cr_expect_leq(work(s), bound, "%s, %" PRIu64 " nodes, %d rounds: %s %" PRIu64 " (bound %" PRIu64 ")",
                          names[shape], nodes, s->rounds, what, work(s), bound);
            fuse_schedule_free(s);
            lf_graph_free(g);
            lf_ctx_destroy(ctx);
        }
}

static uint64_t inst_work(const fuse_schedule *s) { return s->inst_work; }
static uint64_t victim_work(const fuse_schedule *s) { return s->victim_work; }

Test(fusion, rederiving_instances_costs_what_changes) {
    expect_linear_work("instances pass 1 processed", inst_work, 10);
}

/* Issue 26, item 1: the victim search (a kernel past a load cap makes a
 * root of its largest inlined subtree that fits) reads counts kept with the
 * instance lists: each round computes them for the instances pass 1
 * processed and upward from there while the capped counts change, and the
 * candidates sit in a heap per kernel. So the counts computed and entries
 * read over all rounds (fuse_schedule.victim_work, a count: deterministic)
 * grow linearly with the graph for the shapes whose rounds add one victim
 * each (accumulation, 8-input zipwiths) and for diamonds, at about 2,000
 * and 8,000 nodes (under 2 a node for accumulations and zipwiths, about
 * 10.5 for diamonds, whose first round computes every instance's counts).
 * The walk over the whole list of the first kernel past a cap, every
 * round, as before, read about rounds x nodes / 2 instances (an estimate
 * from the shape: 571 rounds over a list shrinking from 8,000 instances at
 * 8,000 nodes of an accumulation, about 2.3 million, 14 times this bound);
 * counts carried up a diamond chain to its top every round (before every
 * count past the caps was made one value) gave 2.0 million at 4,000 nodes. */
Test(fusion, searching_victims_costs_what_changes) {
    expect_linear_work("instances the victim search read", victim_work, 20);
}

/* Issue 26, item 1: the multiple-consumer rule is kept across rounds
 * (plan_vertical.c, fuse_add_shared_roots): a round evaluates again only the
 * nodes whose instances or costs changed, that it made roots, whose
 * candidacy rests on the merges' units, or whose witness (a candidate
 * beneath) stopped being one, and walks down for a candidate beneath only
 * from new candidates and those. So the nodes it evaluates and visits over
 * all rounds (fuse_schedule.shared_work, a count: deterministic) grow
 * linearly with the graph for accumulations, 8-input zipwiths and diamonds
 * at about 2,000 and 8,000 nodes. A diamond chain keeps a candidate a step
 * and makes one level a root a round; evaluating every candidate and
 * walking down from each every round, as before, gives about rounds x
 * candidates / 2 (checked: with every call a full evaluation the test
 * fails; the figures are in benches/measured/20-scale.md). */
static uint64_t shared_work(const fuse_schedule *s) { return s->shared_work; }

Test(fusion, checking_shared_nodes_costs_what_changes) {
    expect_linear_work("nodes the shared rule evaluated or visited", shared_work, 10);
}

/* Issue 26, item 1, what is kept of it: a chain of row normalisations
 * (x = x / sum(x, axis 1, keepdims)) derives, in its first round, in
 * every reduction's kernel, the chain beneath it down to the nearest root
 * (the whole chain before the wide-sharing rule, a band of about SHARE_CUT
 * reductions since: row_normalisation_chains_plan_in_linear_work), and the
 * index maps of those instances are stored once per distinct map
 * (plan_vertical.c, own_map): the broadcast read of a sum is the same map
 * in every kernel above it. So the maps pass 1 stores over all rounds
 * (fuse_schedule.maps_stored, a count) stay within 4 a node at 64 and 256
 * steps while pass 1 processes several instances a node.
 * Storing each composed map apart, as before, stores one per instance read
 * through a broadcast or a fold (checked: with own_map's lookup skipped the
 * test fails), half the planner's memory there. */
Test(fusion, row_normalisations_store_each_map_once) {
    static const int steps[] = {64, 256};
    for (int z = 0; z < 2; z++) {
        lf_ctx *ctx = fctx(1);
        lf_graph *g = lf_graph_new(ctx);
        lf_node *v;
        fuse_schedule *s = plan_shape(ctx, g, 3, steps[z], &v);
        uint64_t nodes = (uint64_t)g->nnodes;
        cr_expect_gt(s->inst_work, 8 * nodes, "%" PRIu64 " nodes: pass 1 processed %" PRIu64
                     " instances, too few for the maps to matter", nodes, s->inst_work);
        cr_expect_leq(s->maps_stored, 4 * nodes, "%" PRIu64 " nodes, %d rounds: %" PRIu64 " maps stored (bound %" PRIu64
                      ", instances processed %" PRIu64 ")", nodes, s->rounds, s->maps_stored, 4 * nodes, s->inst_work);
        fuse_schedule_free(s);
        lf_graph_free(g);
        lf_ctx_destroy(ctx);
    }
}

/* Issue 26, item 1: a chain of row normalisations (x = x / sum(x, axis 1,
 * keepdims), repeated), and a mix of it with accumulations, 8-input
 * zipwiths, diamonds and plain maps (the scale bench's mix), plan in work
 * linear in the graph: the wide-sharing rule (plan.c) cuts the chain into
 * bands when the first walk reaches it, instead of every reduction's kernel
 * inlining the whole chain beneath it (quadratic instances: rownorm at
 * 1,000 steps processed some 800 instances a node before), and the load cap
 * takes a victim in every independent kernel a round, so the bands settle
 * together (one victim a round made the merges redo every root above it:
 * about 36 merge steps a node at 1,000 steps, growing with the chain).
 * Bounds (counts, not times): 50 instances and 10 merge steps a node, at
 * two sizes each; the plan's values are checked at the smaller (by the
 * schedule interpreter: no compiles). */
Test(fusion, row_normalisation_chains_plan_in_linear_work) {
    static const int shapes[] = {3, 5}, steps[][2] = {{500, 2000}, {600, 2400}};
    static const char *names[] = {"rownorm", "mix"};
    for (int z = 0; z < 2; z++)
        for (int w = 0; w < 2; w++) {
            lf_ctx *ctx = fctx_compile(LF_COMPILE_NEVER); /* the values by the interpreter: no compiles */
            lf_graph *g = lf_graph_new(ctx);
            lf_node *v;
            fuse_schedule *s = plan_shape(ctx, g, shapes[z], steps[z][w], &v);
            uint64_t nodes = (uint64_t)g->nnodes;
            cr_expect_leq(s->inst_work, 80 * nodes, "%s, %" PRIu64 " nodes, %d rounds: pass 1 processed %" PRIu64
                          " instances (bound %" PRIu64 ")", names[z], nodes, s->rounds, s->inst_work, 80 * nodes);
            cr_expect_leq(s->merge_work, 15 * nodes, "%s, %" PRIu64 " nodes, %d rounds: the merges processed %" PRIu64
                          " roots (bound %" PRIu64 ")", names[z], nodes, s->rounds, s->merge_work, 15 * nodes);
            fuse_schedule_free(s);
            if (w == 0) eval_checked(ctx, g, 1, &v);
            lf_graph_free(g);
            lf_ctx_destroy(ctx);
        }
}

/* Issue 26, item 1: the merges of a round resume from the lowest node whose
 * root status changed (plan_merge.c: the steps of the roots below it are
 * the last round's and are kept; those above are undone through the undo
 * log and made again), so the roots that the merges process over all
 * rounds (fuse_schedule.merge_work, a count) grow linearly with the graph
 * for the shapes whose rounds add one root each near the top of what is
 * settled (accumulation, 8-input zipwiths, diamonds), at about 2,000 and
 * 8,000 nodes. Merging every root every round, as before, processes about
 * rounds x roots / 2 .. rounds x roots: at 8,000 nodes some 160,000
 * (accumulation) to 500,000 (zipwiths, diamonds) roots, 2 to 6 times this
 * bound of 10 a node (checked: the test fails when fuse_plan_merges starts
 * from node 0 every round). */
Test(fusion, merging_costs_what_changes) {
    static const char *names[] = {"accum", "zip8", "diamond"};
    static const int steps[][2] = {{1000, 4000}, {250, 1000}, {500, 2000}}; /* 2 / 8 / 4 nodes a step */
    for (int shape = 0; shape < 3; shape++)
        for (int z = 0; z < 2; z++) {
            lf_ctx *ctx = fctx(1);
            lf_graph *g = lf_graph_new(ctx);
            lf_node *v;
            fuse_schedule *s = plan_shape(ctx, g, shape, steps[shape][z], &v);
            uint64_t nodes = (uint64_t)g->nnodes, bound = 10 * nodes;
            cr_expect_gt(s->rounds, (int)(nodes / 20), "%s: %d rounds, fewer than the shape makes", names[shape], s->rounds);
            cr_expect_leq(s->merge_work, bound, "%s, %" PRIu64 " nodes, %d rounds: the merges processed %" PRIu64
                          " roots (bound %" PRIu64 ")", names[shape], nodes, s->rounds, s->merge_work, bound);
            fuse_schedule_free(s);
            lf_graph_free(g);
            lf_ctx_destroy(ctx);
        }
}

/* A small sum whose input is expensive only through a map much smaller than
 * the sum, read broadcast (spca's A = sum over d of Vd[p, d, 1] * Cn[1, d, S]
 * with Cn = exp(c) [3, S]): the small map is stored and the sum, now cheap,
 * is inlined into its consumer, so the [p, S] sum is never stored. Where the
 * expensive map is not at most 1/8 of the sum's elements ([3, S] under a
 * [4, S] sum), the sum stays a reduction kernel as before. Values as the
 * reference's. */
Test(fusion, small_reduction_stores_its_small_expensive_input) {
    enum { SS = 50 };
    lf_ctx *ctx = fctx(1);
    for (int p = 40; p >= 4; p -= 36) {
        lf_graph *g = lf_graph_new(ctx);
        lf_node *v = lf_input(g, ramp(ctx, LF_F32, 2, (int64_t[]){p, 3}));
        lf_node *c = lf_exp(g, lf_input(g, ramp(ctx, LF_F32, 2, (int64_t[]){3, SS}))); /* [3, S] */
        lf_node *prod = lf_mul(g, lf_expand_dims(g, v, 2), lf_expand_dims(g, c, 0));   /* [p, 3, S] */
        lf_node *a = lf_reduce(g, LF_RED_SUM, prod, 1, (int[]){1}, false);             /* [p, S] */
        lf_node *y = lf_reduce(g, LF_RED_MAX, a, 1, (int[]){0}, false);                /* [S] */
        lf_eval_stats st = eval_checked(ctx, g, 1, &y);
        if (p == 40) { /* exp(c) stored (3 * S f32), a inlined into the max */
            cr_expect_eq(st.kernels, 2, "p %d: kernels %d", p, st.kernels);
            cr_expect_eq(st.bytes_materialized, 3 * SS * 4, "p %d: materialized %zu", p, st.bytes_materialized);
        } else { /* [3, S] is more than 1/8 of [4, S]: a is a kernel of its own, stored */
            cr_expect_eq(st.kernels, 2, "p %d: kernels %d", p, st.kernels);
            cr_expect_eq(st.bytes_materialized, (size_t)p * SS * 4, "p %d: materialized %zu", p,
                         st.bytes_materialized);
        }
        lf_graph_free(g);
    }
    lf_ctx_destroy(ctx);
}

/* ---- pad and concatenate: loads through remapped index maps --------------------- */

static lf_node *padded_conv(lf_graph *g, lf_ctx *ctx) { /* 5-tap convolution, zero border */
    lf_node *x = lf_input(g, ramp(ctx, LF_F32, 2, (int64_t[]){3, N}));
    lf_node *p = lf_pad(g, x, (int64_t[]){0, 2}, (int64_t[]){0, 2}, LF_PAD_CONSTANT, 0);
    static const double w[5] = {0.1, 0.2, 0.4, 0.2, 0.1};
    lf_node *acc = NULL;
    for (int t = 0; t < 5; t++) {
        lf_node *v = lf_mul(g, lf_slice(g, p, 1, t, t + N, 1), lf_const(g, LF_F32, w[t]));
        acc = acc ? lf_add(g, acc, v) : v;
    }
    return acc;
}

static lf_node *reflect_map(lf_graph *g, lf_ctx *ctx) { /* pad(x) * 2 + 1 */
    lf_node *x = lf_input(g, ramp(ctx, LF_F64, 2, (int64_t[]){7, 9}));
    lf_node *p = lf_pad(g, x, (int64_t[]){3, 20}, (int64_t[]){12, 1}, LF_PAD_REFLECT, 0);
    return lf_add(g, lf_mul(g, p, lf_const(g, LF_F64, 2)), lf_const(g, LF_F64, 1));
}

static lf_node *concat_map(lf_graph *g, lf_ctx *ctx) { /* concat(a, exp(b), c) * 3 + 1 */
    lf_node *a = lf_input(g, ramp(ctx, LF_F32, 2, (int64_t[]){5, 4}));
    lf_node *b = lf_input(g, ramp(ctx, LF_F32, 2, (int64_t[]){5, 11}));
    lf_node *c = lf_input(g, ramp(ctx, LF_I32, 2, (int64_t[]){5, 1}));
    lf_node *cat = lf_concat(g, 3, (lf_node *[]){a, lf_exp(g, b), c}, -1);
    return lf_add(g, lf_mul(g, cat, lf_const(g, LF_F64, 3)), lf_const(g, LF_F64, 1));
}

static lf_node *moving_average(lf_graph *g, lf_ctx *ctx) { /* window 4 from a prefix sum */
    lf_node *x = lf_input(g, ramp(ctx, LF_F64, 1, (int64_t[]){N}));
    lf_node *c = lf_pad(g, lf_scan(g, LF_RED_SUM, x, 0, false), (int64_t[]){1}, (int64_t[]){0}, LF_PAD_CONSTANT, 0);
    lf_node *d = lf_sub(g, lf_slice(g, c, 0, 4, N + 1, 1), lf_slice(g, c, 0, 0, N - 3, 1));
    return lf_div(g, d, lf_const(g, LF_F64, 4));
}

Test(fusion, padded_convolution_one_kernel) {
    lf_eval_stats on, off;
    run_example("padded_conv", padded_conv, &on, &off);
    cr_expect_eq(on.kernels, 1);
    cr_expect_eq(on.bytes_materialized, 0);
    cr_expect_eq(on.bytes_written, 3 * N * 4);
}

Test(fusion, reflect_pad_map_one_kernel) {
    lf_eval_stats on, off;
    run_example("reflect_map", reflect_map, &on, &off);
    cr_expect_eq(on.kernels, 1);
    cr_expect_eq(on.bytes_materialized, 0);
}

Test(fusion, concat_map_one_kernel) {
    lf_eval_stats on, off;
    run_example("concat_map", concat_map, &on, &off);
    cr_expect_eq(on.kernels, 1);
    cr_expect_eq(on.bytes_materialized, 0);
    cr_expect_eq(on.bytes_written, 5 * 16 * 8);
}

Test(fusion, moving_average_of_a_prefix_sum) {
    lf_eval_stats on, off;
    run_example("moving_average", moving_average, &on, &off);
    cr_expect_eq(on.kernels, 2, "the scan, then its pad and the window difference"); /* the scan is stored */
    cr_expect_eq(on.bytes_materialized, N * 8);
}
