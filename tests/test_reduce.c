/* tests/test_reduce.c: reductions in the reference evaluator.
 *
 * Covers sum, prod, min, max, mean, argmin and argmax over one axis, several
 * axes (negative ones too), all axes (axes NULL) and no axes, with keepdims
 * true and false, on every dtype; the output dtypes of lazyfuse.h; float
 * accumulation in double (f32 sums that a float accumulator gets wrong) and
 * integer accumulation in int64 with wraparound; empty reductions (sum 0,
 * prod 1, mean NaN; min / max / argmin / argmax fail with LF_ERR_SHAPE when
 * building); NaN propagation; the first-occurrence and first-NaN rules of
 * argmin / argmax and their row-major index over several reduced axes;
 * reductions of 0-d arrays, of broadcast views and of maps (matmul written as
 * a zip-reduce, a softmax row).
 */
#include "testutil.h"

#include <criterion/criterion.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TU_GRAPH_SUITE(reduce);

#define SH(...) (int64_t[]){__VA_ARGS__}
#define V(...) (double[]){__VA_ARGS__}
#define AX(...) (int[]){__VA_ARGS__}

static const char *const dtn[] = {"bool", "i32", "i64", "f32", "f64"};

static lf_node *red(lf_reduce_op op, lf_node *x, int naxes, const int *axes, bool keepdims) {
    lf_node *r = lf_reduce(g, op, x, naxes, axes, keepdims);
    cr_assert(r != NULL, "lf_reduce(%s): %s", lf_reduce_op_name(op), lf_errmsg(ctx));
    return r;
}

/* Checks dtype and shape, evaluates n and compares with want within rtol. */
static void chk_tol(const char *what, lf_node *n, lf_dtype t, int ndim, const int64_t *shape,
                    const double *want, double rtol) {
    cr_assert(n != NULL, "%s: node is NULL: %s", what, lf_errmsg(ctx));
    cr_assert_eq(lf_node_dtype(n), t, "%s: dtype %s, want %s", what,
                 lf_dtype_name(lf_node_dtype(n)), dtn[t]);
    cr_assert_eq(lf_node_ndim(n), ndim, "%s: ndim %d, want %d", what, lf_node_ndim(n), ndim);
    int64_t count = 1;
    for (int d = 0; d < ndim; d++) {
        cr_assert_eq(lf_node_dim(n, d), shape[d], "%s: dim %d is %lld, want %lld", what, d,
                     (long long)lf_node_dim(n, d), (long long)shape[d]);
        count *= shape[d];
    }
    lf_buffer *b = tu_eval1(ctx, g, n);
    tu_expect(what, b, want, count, rtol, 0);
    lf_buffer_free(b);
}

static void chk(const char *what, lf_node *n, lf_dtype t, int ndim, const int64_t *shape,
                const double *want) {
    chk_tol(what, n, t, ndim, shape, want, 0);
}

static lf_node *in(lf_dtype t, int ndim, const int64_t *shape, const double *v) {
    lf_node *x = lf_input(g, tu_buf(ctx, t, ndim, shape, v));
    cr_assert(x != NULL, "%s", lf_errmsg(ctx));
    return x;
}

static lf_node *iota3(lf_dtype t) { /* iota(24) reshaped [2,3,4]: x[i,j,k] = 12i + 4j + k */
    lf_node *x = lf_reshape(g, lf_iota(g, t, 24), 3, SH(2, 3, 4));
    cr_assert(x != NULL, "%s", lf_errmsg(ctx));
    return x;
}

/* Reads element 0 of a node's result as raw int64 (for values beyond 2^53). */
static int64_t eval_i64(lf_node *n) {
    cr_assert(n != NULL, "%s", lf_errmsg(ctx));
    cr_assert_eq(lf_node_dtype(n), LF_I64);
    lf_buffer *b = tu_eval1(ctx, g, n);
    int64_t v[1];
    cr_assert_eq(lf_buffer_numel(b), 1);
    cr_assert_eq(lf_buffer_read(b, v, sizeof v), LF_OK);
    lf_buffer_free(b);
    return v[0];
}

/* Evaluates a 0-d f32 node. */
static float eval_f32(lf_node *n) {
    cr_assert(n != NULL, "%s", lf_errmsg(ctx));
    cr_assert_eq(lf_node_dtype(n), LF_F32);
    lf_buffer *b = tu_eval1(ctx, g, n);
    float v;
    cr_assert_eq(lf_buffer_read(b, &v, sizeof v), LF_OK);
    lf_buffer_free(b);
    return v;
}

static bool within_ulps_f32(float a, float b, int ulps) {
    if (a == b) return true;
    if (isnan(a) || isnan(b) || isinf(a) || isinf(b) || (a < 0) != (b < 0)) return false;
    int32_t ia, ib;
    memcpy(&ia, &a, 4);
    memcpy(&ib, &b, 4);
    int64_t d = (int64_t)ia - ib;
    return (d < 0 ? -d : d) <= ulps;
}

/* ---- axes and keepdims --------------------------------------------------------- */

Test(reduce, sum_one_axis) {
    lf_node *x = iota3(LF_F64);
    chk("sum axis 0", red(LF_RED_SUM, x, 1, AX(0), false), LF_F64, 2, SH(3, 4),
        V(12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32, 34));
    chk("sum axis -3", red(LF_RED_SUM, x, 1, AX(-3), false), LF_F64, 2, SH(3, 4),
        V(12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32, 34));
    chk("sum axis 1", red(LF_RED_SUM, x, 1, AX(1), false), LF_F64, 2, SH(2, 4),
        V(12, 15, 18, 21, 48, 51, 54, 57));
    chk("sum axis 2", red(LF_RED_SUM, x, 1, AX(2), false), LF_F64, 2, SH(2, 3),
        V(6, 22, 38, 54, 70, 86));
    chk("sum axis -1", red(LF_RED_SUM, x, 1, AX(-1), false), LF_F64, 2, SH(2, 3),
        V(6, 22, 38, 54, 70, 86));
    chk("sum axis 2 keepdims", red(LF_RED_SUM, x, 1, AX(2), true), LF_F64, 3, SH(2, 3, 1),
        V(6, 22, 38, 54, 70, 86));
    chk("sum axis 0 keepdims", red(LF_RED_SUM, x, 1, AX(0), true), LF_F64, 3, SH(1, 3, 4),
        V(12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32, 34));
    chk("sum axis -2 keepdims", red(LF_RED_SUM, x, 1, AX(-2), true), LF_F64, 3, SH(2, 1, 4),
        V(12, 15, 18, 21, 48, 51, 54, 57));
}

Test(reduce, sum_several_axes) {
    lf_node *x = iota3(LF_F64);
    chk("sum (0,2)", red(LF_RED_SUM, x, 2, AX(0, 2), false), LF_F64, 1, SH(3), V(60, 92, 124));
    chk("sum (-1,0)", red(LF_RED_SUM, x, 2, AX(-1, 0), false), LF_F64, 1, SH(3), V(60, 92, 124));
    chk("sum (0,2) keepdims", red(LF_RED_SUM, x, 2, AX(0, 2), true), LF_F64, 3, SH(1, 3, 1),
        V(60, 92, 124));
    chk("sum (1,2)", red(LF_RED_SUM, x, 2, AX(1, 2), false), LF_F64, 1, SH(2), V(66, 210));
    chk("sum (0,1)", red(LF_RED_SUM, x, 2, AX(0, 1), false), LF_F64, 1, SH(4), V(60, 66, 72, 78));
    chk("sum (0,1,2)", red(LF_RED_SUM, x, 3, AX(0, 1, 2), false), LF_F64, 0, NULL, V(276));
    chk("sum (2,-2,0) keepdims", red(LF_RED_SUM, x, 3, AX(2, -2, 0), true), LF_F64, 3, SH(1, 1, 1),
        V(276));
    chk("max (0,1)", red(LF_RED_MAX, x, 2, AX(0, 1), false), LF_F64, 1, SH(4), V(20, 21, 22, 23));
    chk("min (1,2) keepdims", red(LF_RED_MIN, x, 2, AX(2, 1), true), LF_F64, 3, SH(2, 1, 1), V(0, 12));
    chk("mean (0,2)", red(LF_RED_MEAN, x, 2, AX(0, 2), false), LF_F64, 1, SH(3), V(7.5, 11.5, 15.5));
    chk("prod (0,2) of x+1", red(LF_RED_PROD, lf_add(g, x, lf_const(g, LF_F64, 1)), 2, AX(0, 2), false),
        LF_F64, 1, SH(3), V(1.0 * 2 * 3 * 4 * 13 * 14 * 15 * 16, 5.0 * 6 * 7 * 8 * 17 * 18 * 19 * 20,
                             9.0 * 10 * 11 * 12 * 21 * 22 * 23 * 24));
}

Test(reduce, all_axes) {
    lf_node *x = iota3(LF_F64);
    chk("sum all", red(LF_RED_SUM, x, 0, NULL, false), LF_F64, 0, NULL, V(276));
    chk("sum all keepdims", red(LF_RED_SUM, x, 0, NULL, true), LF_F64, 3, SH(1, 1, 1), V(276));
    /* naxes > 0 with axes NULL is an error (tests/test_errors.c, reduce_bad_axes) */
    chk("mean all", red(LF_RED_MEAN, x, 0, NULL, false), LF_F64, 0, NULL, V(11.5));
    chk("max all", red(LF_RED_MAX, x, 0, NULL, false), LF_F64, 0, NULL, V(23));
    chk("min all keepdims", red(LF_RED_MIN, x, 0, NULL, true), LF_F64, 3, SH(1, 1, 1), V(0));
    chk("argmax all", red(LF_RED_ARGMAX, x, 0, NULL, false), LF_I64, 0, NULL, V(23));
    chk("argmin all keepdims", red(LF_RED_ARGMIN, x, 0, NULL, true), LF_I64, 3, SH(1, 1, 1), V(0));
    /* 1-d */
    lf_node *v = lf_arange(g, LF_F64, 1, 6, 1);
    chk("prod 1-d", red(LF_RED_PROD, v, 1, AX(0), false), LF_F64, 0, NULL, V(120));
    chk("prod 1-d keepdims", red(LF_RED_PROD, v, 1, AX(-1), true), LF_F64, 1, SH(1), V(120));
}

/* naxes 0 with a non-NULL axes array reduces over nothing. */
Test(reduce, no_axes) {
    lf_node *x = in(LF_I32, 2, SH(2, 3), V(1, -2, 3, 4, 5, -6));
    int dummy = 0;
    chk("sum over ()", red(LF_RED_SUM, x, 0, &dummy, false), LF_I64, 2, SH(2, 3), V(1, -2, 3, 4, 5, -6));
    chk("max over ()", red(LF_RED_MAX, x, 0, &dummy, true), LF_I32, 2, SH(2, 3), V(1, -2, 3, 4, 5, -6));
    chk("argmax over ()", red(LF_RED_ARGMAX, x, 0, &dummy, false), LF_I64, 2, SH(2, 3),
        V(0, 0, 0, 0, 0, 0));
    chk("mean over ()", red(LF_RED_MEAN, x, 0, &dummy, false), LF_F64, 2, SH(2, 3),
        V(1, -2, 3, 4, 5, -6));
}

/* ---- every op on every dtype ----------------------------------------------------- */

static lf_dtype want_dtype(lf_reduce_op op, lf_dtype t) {
    switch (op) {
    case LF_RED_SUM: case LF_RED_PROD: return t == LF_F32 || t == LF_F64 ? t : LF_I64;
    case LF_RED_MEAN: return t == LF_F32 ? LF_F32 : LF_F64;
    case LF_RED_MIN: case LF_RED_MAX: return t;
    case LF_RED_ARGMIN: case LF_RED_ARGMAX: return LF_I64;
    default: cr_assert_fail("bad op");
    }
    return t;
}

/* A plain loop over n values with the header's rules (values small: exact). */
static double ref_reduce(lf_reduce_op op, const double *v, int n, int stride) {
    double acc = op == LF_RED_PROD ? 1 : 0, best = v[0];
    int bi = 0;
    for (int i = 0; i < n; i++) {
        double x = v[i * stride];
        acc = op == LF_RED_PROD ? acc * x : acc + x;
        if (!isnan(best) && (isnan(x) || (op == LF_RED_MIN || op == LF_RED_ARGMIN ? x < best : x > best))) {
            best = x;
            bi = i;
        }
    }
    switch (op) {
    case LF_RED_SUM: case LF_RED_PROD: return acc;
    case LF_RED_MEAN: return acc / n;
    case LF_RED_MIN: case LF_RED_MAX: return best;
    default: return bi;
    }
}

Test(reduce, every_op_every_dtype) {
    static const double data[5][6] = {
        {1, 0, 1, 1, 1, 0},
        {3, -1, 4, 1, -5, 9},
        {3, -1, 4, 1, -5, 9},
        {3.5, -1, 4, 1, -5.25, 9},
        {3.5, -1, 4, 1, -5.25, 9},
    };
    for (int t = 0; t < 5; t++) {
        lf_node *x = in((lf_dtype)t, 2, SH(2, 3), data[t]);
        for (int op = 0; op < LF_NREDS; op++) {
            char what[64];
            lf_reduce_op o = (lf_reduce_op)op;
            lf_dtype wt = want_dtype(o, (lf_dtype)t);
            double w0[3], w1[2], wall[1];
            for (int j = 0; j < 3; j++) w0[j] = ref_reduce(o, data[t] + j, 2, 3);
            for (int i = 0; i < 2; i++) w1[i] = ref_reduce(o, data[t] + 3 * i, 3, 1);
            wall[0] = ref_reduce(o, data[t], 6, 1);
            double tol = wt == LF_F32 ? 1e-6 : 1e-15;
            snprintf(what, sizeof what, "%s(%s) axis 0", lf_reduce_op_name(o), dtn[t]);
            chk_tol(what, red(o, x, 1, AX(0), false), wt, 1, SH(3), w0, tol);
            snprintf(what, sizeof what, "%s(%s) axis 1 keepdims", lf_reduce_op_name(o), dtn[t]);
            chk_tol(what, red(o, x, 1, AX(1), true), wt, 2, SH(2, 1), w1, tol);
            snprintf(what, sizeof what, "%s(%s) all", lf_reduce_op_name(o), dtn[t]);
            chk_tol(what, red(o, x, 0, NULL, false), wt, 0, NULL, wall, tol);
        }
    }
}

Test(reduce, output_dtypes) {
    for (int t = 0; t < 5; t++) {
        lf_node *x = lf_fill(g, (lf_dtype)t, 1, 1, SH(3));
        for (int op = 0; op < LF_NREDS; op++) {
            lf_node *r = red((lf_reduce_op)op, x, 0, NULL, false);
            lf_dtype wt = want_dtype((lf_reduce_op)op, (lf_dtype)t);
            cr_expect_eq(lf_node_dtype(r), wt, "%s(%s): dtype %s, want %s",
                         lf_reduce_op_name((lf_reduce_op)op), dtn[t], lf_dtype_name(lf_node_dtype(r)),
                         dtn[wt]);
        }
    }
    cr_expect_str_eq(lf_reduce_op_name(LF_RED_SUM), "sum");
    cr_expect_str_eq(lf_reduce_op_name(LF_RED_PROD), "prod");
    cr_expect_str_eq(lf_reduce_op_name(LF_RED_MIN), "min");
    cr_expect_str_eq(lf_reduce_op_name(LF_RED_MAX), "max");
    cr_expect_str_eq(lf_reduce_op_name(LF_RED_MEAN), "mean");
    cr_expect_str_eq(lf_reduce_op_name(LF_RED_ARGMIN), "argmin");
    cr_expect_str_eq(lf_reduce_op_name(LF_RED_ARGMAX), "argmax");
}

/* ---- accumulation ----------------------------------------------------------------- */

Test(reduce, f32_sum_accumulates_in_double) {
    int64_t n = 1000000;
    float *h = malloc((size_t)n * sizeof *h);
    cr_assert(h != NULL);
    double ref = 0;
    float naive = 0;
    for (int64_t i = 0; i < n; i++) {
        h[i] = 0.1f;
        ref += (double)h[i];
        naive += h[i];
    }
    lf_buffer *b = lf_buffer_new(ctx, LF_F32, 1, &n);
    cr_assert_eq(lf_buffer_write(b, h, (size_t)n * sizeof *h), LF_OK);
    lf_node *x = lf_input(g, b);
    float got = eval_f32(red(LF_RED_SUM, x, 0, NULL, false));
    /* the double sum is 100000.0015; a float accumulator is off by ~1% */
    cr_assert(fabs(naive - ref) > 100, "the float accumulator should be far off here");
    cr_assert(within_ulps_f32(got, (float)ref, 1), "sum of 10^6 x 0.1f: %.9g, want %.9g", got,
              (float)ref);
    cr_assert(fabs(got - 100000.0) / 100000.0 < 1e-6);
    float mean = eval_f32(red(LF_RED_MEAN, x, 1, AX(0), false));
    cr_assert(within_ulps_f32(mean, (float)(ref / (double)n), 1), "mean: %.9g, want %.9g", mean,
              (float)(ref / (double)n));
    free(h);
}

Test(reduce, f32_sum_random_large) {
    int64_t n = 1 << 20;
    float *h = malloc((size_t)n * sizeof *h);
    double ref = 0;
    for (int64_t i = 0; i < n; i++) {
        h[i] = (float)tu_uniform(0, 1);
        ref += (double)h[i];
    }
    lf_buffer *b = lf_buffer_new(ctx, LF_F32, 2, SH(1024, 1024));
    cr_assert_eq(lf_buffer_write(b, h, (size_t)n * sizeof *h), LF_OK);
    float got = eval_f32(red(LF_RED_SUM, lf_input(g, b), 0, NULL, false));
    cr_assert(within_ulps_f32(got, (float)ref, 1), "sum: %.9g, want %.9g", got, (float)ref);
    free(h);
}

Test(reduce, f32_cancellation_and_range) {
    /* in float, 1e8 + 1 == 1e8; in double the 1 survives */
    lf_node *x = in(LF_F32, 1, SH(3), V(1e8, 1, -1e8));
    cr_expect_eq(eval_f32(red(LF_RED_SUM, x, 0, NULL, false)), 1.0f);
    lf_node *m = in(LF_F32, 1, SH(4), V(1e8, 1, -1e8, 3));
    cr_expect_eq(eval_f32(red(LF_RED_MEAN, m, 0, NULL, false)), 1.0f);
    /* in float, 1e20 * 1e20 overflows; in double the product comes back to 1 */
    lf_node *p = in(LF_F32, 1, SH(4), V(1e20, 1e20, 1e-20, 1e-20));
    double pref = (double)1e20f * (double)1e20f * (double)1e-20f * (double)1e-20f;
    float pg = eval_f32(red(LF_RED_PROD, p, 0, NULL, false));
    cr_expect(within_ulps_f32(pg, (float)pref, 1), "prod: %.9g, want %.9g", pg, (float)pref);
    /* per row, along an axis */
    lf_node *r = in(LF_F32, 2, SH(2, 3), V(1e8, 1, -1e8, -1e8, 2, 1e8));
    chk("rows", red(LF_RED_SUM, r, 1, AX(1), false), LF_F32, 1, SH(2), V(1, 2));
    /* and the final rounding to f32 happens once */
    lf_node *o = in(LF_F32, 1, SH(2), V(3.4e38, 3.4e38));
    chk("overflow to inf", red(LF_RED_SUM, o, 0, NULL, false), LF_F32, 0, NULL, V(INFINITY));
    chk("mean without overflow", red(LF_RED_MEAN, o, 0, NULL, false), LF_F32, 0, NULL,
        V((float)3.4e38));
}

Test(reduce, integer_accumulation_int64) {
    /* i32 sums accumulate in int64: no 32-bit wrap */
    lf_node *x = in(LF_I32, 1, SH(3), V(INT32_MAX, INT32_MAX, INT32_MAX));
    chk("sum i32", red(LF_RED_SUM, x, 0, NULL, false), LF_I64, 0, NULL, V(3.0 * INT32_MAX));
    chk("prod i32", red(LF_RED_PROD, in(LF_I32, 1, SH(2), V(65536, 65536)), 0, NULL, false), LF_I64, 0,
        NULL, V(4294967296.0));
    chk("mean i32", red(LF_RED_MEAN, x, 0, NULL, false), LF_F64, 0, NULL, V(INT32_MAX));
    /* int64 wraps */
    int64_t n = 2, v[2] = {INT64_MAX, 1};
    lf_buffer *b = lf_buffer_new(ctx, LF_I64, 1, &n);
    cr_assert_eq(lf_buffer_write(b, v, sizeof v), LF_OK);
    cr_expect_eq(eval_i64(red(LF_RED_SUM, lf_input(g, b), 0, NULL, false)), INT64_MIN);
    int64_t w[2] = {INT64_C(1) << 32, INT64_C(1) << 32};
    lf_buffer *bw = lf_buffer_new(ctx, LF_I64, 1, &n);
    cr_assert_eq(lf_buffer_write(bw, w, sizeof w), LF_OK);
    cr_expect_eq(eval_i64(red(LF_RED_PROD, lf_input(g, bw), 0, NULL, false)), 0);
    int64_t e[3] = {INT64_MIN, INT64_MAX, -5};
    int64_t n3 = 3;
    lf_buffer *be = lf_buffer_new(ctx, LF_I64, 1, &n3);
    cr_assert_eq(lf_buffer_write(be, e, sizeof e), LF_OK);
    lf_node *xe = lf_input(g, be);
    cr_expect_eq(eval_i64(red(LF_RED_MIN, xe, 0, NULL, false)), INT64_MIN);
    cr_expect_eq(eval_i64(red(LF_RED_MAX, xe, 0, NULL, false)), INT64_MAX);
    cr_expect_eq(eval_i64(red(LF_RED_SUM, xe, 0, NULL, false)), -6);
    /* the i32 3*INT32_MAX is beyond i32 but exact in i64 */
    cr_expect_eq(eval_i64(red(LF_RED_SUM, x, 0, NULL, false)), INT64_C(3) * INT32_MAX);
    /* bool sums count */
    lf_node *t = lf_fill(g, LF_BOOL, 1, 2, SH(10, 100));
    chk("sum bool", red(LF_RED_SUM, t, 0, NULL, false), LF_I64, 0, NULL, V(1000));
    chk("sum bool axis", red(LF_RED_SUM, t, 1, AX(0), false), LF_I64, 1, SH(100), (double[100]){
        10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10,
        10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10,
        10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10,
        10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10,
        10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10});
    /* min/max identities must not leak into the result */
    chk("max of INT32_MIN", red(LF_RED_MAX, in(LF_I32, 1, SH(2), V(INT32_MIN, INT32_MIN)), 0, NULL, false),
        LF_I32, 0, NULL, V(INT32_MIN));
    chk("min of INT32_MAX", red(LF_RED_MIN, in(LF_I32, 1, SH(1), V(INT32_MAX)), 0, NULL, false), LF_I32,
        0, NULL, V(INT32_MAX));
    chk("min of bool trues", red(LF_RED_MIN, in(LF_BOOL, 1, SH(2), V(1, 1)), 0, NULL, false), LF_BOOL, 0,
        NULL, V(1));
    chk("max of bool falses", red(LF_RED_MAX, in(LF_BOOL, 1, SH(2), V(0, 0)), 0, NULL, false), LF_BOOL,
        0, NULL, V(0));
    chk("max of -inf", red(LF_RED_MAX, in(LF_F64, 1, SH(2), V(-INFINITY, -INFINITY)), 0, NULL, false),
        LF_F64, 0, NULL, V(-INFINITY));
    chk("argmax of -inf", red(LF_RED_ARGMAX, in(LF_F64, 1, SH(2), V(-INFINITY, -INFINITY)), 0, NULL, false),
        LF_I64, 0, NULL, V(0));
}

Test(reduce, mean_of_ints_is_f64) {
    chk("mean i32", red(LF_RED_MEAN, in(LF_I32, 1, SH(2), V(1, 2)), 0, NULL, false), LF_F64, 0, NULL,
        V(1.5));
    chk("mean i64 axis 1", red(LF_RED_MEAN, in(LF_I64, 2, SH(2, 2), V(1, 2, 3, 5)), 1, AX(1), false),
        LF_F64, 1, SH(2), V(1.5, 4));
    chk("mean bool", red(LF_RED_MEAN, in(LF_BOOL, 1, SH(4), V(1, 0, 1, 1)), 0, NULL, false), LF_F64, 0,
        NULL, V(0.75));
    chk("mean f32", red(LF_RED_MEAN, in(LF_F32, 1, SH(3), V(1, 2, 4)), 0, NULL, false), LF_F32, 0, NULL,
        V((float)(7.0 / 3)));
    chk("mean i32 (0,2)", red(LF_RED_MEAN, iota3(LF_I32), 2, AX(0, 2), true), LF_F64, 3, SH(1, 3, 1),
        V(7.5, 11.5, 15.5));
}

/* ---- empty reductions ------------------------------------------------------------- */

Test(reduce, empty_sum_prod_mean) {
    for (int t = 0; t < 5; t++) {
        lf_node *x = lf_fill(g, (lf_dtype)t, 1, 2, SH(0, 3));
        char what[64];
        snprintf(what, sizeof what, "sum %s [0,3] axis 0", dtn[t]);
        chk(what, red(LF_RED_SUM, x, 1, AX(0), false), want_dtype(LF_RED_SUM, (lf_dtype)t), 1, SH(3),
            V(0, 0, 0));
        snprintf(what, sizeof what, "prod %s [0,3] axis 0", dtn[t]);
        chk(what, red(LF_RED_PROD, x, 1, AX(0), false), want_dtype(LF_RED_PROD, (lf_dtype)t), 1, SH(3),
            V(1, 1, 1));
        snprintf(what, sizeof what, "mean %s [0,3] axis 0", dtn[t]);
        chk(what, red(LF_RED_MEAN, x, 1, AX(0), true), want_dtype(LF_RED_MEAN, (lf_dtype)t), 2, SH(1, 3),
            V(NAN, NAN, NAN));
        snprintf(what, sizeof what, "sum %s [0,3] all", dtn[t]);
        chk(what, red(LF_RED_SUM, x, 0, NULL, false), want_dtype(LF_RED_SUM, (lf_dtype)t), 0, NULL, V(0));
        snprintf(what, sizeof what, "prod %s [0,3] all", dtn[t]);
        chk(what, red(LF_RED_PROD, x, 0, NULL, true), want_dtype(LF_RED_PROD, (lf_dtype)t), 2, SH(1, 1),
            V(1));
        snprintf(what, sizeof what, "mean %s [0,3] all", dtn[t]);
        chk(what, red(LF_RED_MEAN, x, 0, NULL, false), want_dtype(LF_RED_MEAN, (lf_dtype)t), 0, NULL,
            V(NAN));
        /* reducing the non-empty axis leaves an empty result */
        snprintf(what, sizeof what, "sum %s [0,3] axis 1", dtn[t]);
        chk(what, red(LF_RED_SUM, x, 1, AX(1), false), want_dtype(LF_RED_SUM, (lf_dtype)t), 1, SH(0), NULL);
    }
    /* an empty input buffer, and an empty slice */
    lf_node *e = lf_input(g, tu_buf(ctx, LF_F64, 1, SH(0), NULL));
    chk("sum empty buffer", red(LF_RED_SUM, e, 0, NULL, false), LF_F64, 0, NULL, V(0));
    lf_node *s = lf_slice(g, lf_iota(g, LF_I32, 5), 0, 3, 3, 1);
    chk("prod empty slice", red(LF_RED_PROD, s, 1, AX(0), false), LF_I64, 0, NULL, V(1));
}

static void expect_empty_fails(lf_reduce_op op, int ndim, const int64_t *shape, int naxes,
                               const int *axes) {
    lf_graph *gg = lf_graph_new(ctx);
    lf_node *x = lf_fill(gg, LF_F64, 1, ndim, shape);
    cr_assert(x != NULL);
    lf_node *r = lf_reduce(gg, op, x, naxes, axes, false);
    cr_expect(r == NULL, "%s of an empty set should fail", lf_reduce_op_name(op));
    cr_expect_eq(lf_graph_status(gg), LF_ERR_SHAPE, "%s of an empty set: status %s",
                 lf_reduce_op_name(op), lf_status_name(lf_graph_status(gg)));
    cr_expect(strstr(lf_errmsg(ctx), lf_reduce_op_name(op)) != NULL ||
                  strstr(lf_errmsg(ctx), "reduce") != NULL,
              "message names the reduction: \"%s\"", lf_errmsg(ctx));
    lf_graph_free(gg);
}

Test(reduce, empty_min_max_arg_fail) {
    lf_reduce_op ops[] = {LF_RED_MIN, LF_RED_MAX, LF_RED_ARGMIN, LF_RED_ARGMAX};
    for (int k = 0; k < 4; k++) {
        expect_empty_fails(ops[k], 2, SH(0, 3), 1, AX(0));
        expect_empty_fails(ops[k], 2, SH(0, 3), 0, NULL);
        expect_empty_fails(ops[k], 1, SH(0), 1, AX(-1));
        expect_empty_fails(ops[k], 3, SH(2, 0, 3), 2, AX(1, 2));
    }
    /* a non-empty reduced set over zero rows is fine: the result is empty */
    lf_node *x = lf_fill(g, LF_F64, 1, 2, SH(3, 0));
    chk("min [3,0] axis 0", red(LF_RED_MIN, x, 1, AX(0), false), LF_F64, 1, SH(0), NULL);
    chk("argmax [3,0] axis 0", red(LF_RED_ARGMAX, x, 1, AX(0), false), LF_I64, 1, SH(0), NULL);
}

/* ---- NaN and argmin / argmax rules ------------------------------------------------- */

Test(reduce, nan_propagation) {
    for (int t = LF_F32; t <= LF_F64; t++) {
        lf_node *x = in((lf_dtype)t, 1, SH(3), V(1, NAN, 0));
        chk("min nan", red(LF_RED_MIN, x, 0, NULL, false), (lf_dtype)t, 0, NULL, V(NAN));
        chk("max nan", red(LF_RED_MAX, x, 0, NULL, false), (lf_dtype)t, 0, NULL, V(NAN));
        chk("sum nan", red(LF_RED_SUM, x, 0, NULL, false), (lf_dtype)t, 0, NULL, V(NAN));
        chk("prod nan", red(LF_RED_PROD, x, 0, NULL, false), (lf_dtype)t, 0, NULL, V(NAN));
        chk("mean nan", red(LF_RED_MEAN, x, 0, NULL, false), (lf_dtype)t, 0, NULL, V(NAN));
        lf_node *f = in((lf_dtype)t, 1, SH(3), V(NAN, 5, -5));
        chk("min nan first", red(LF_RED_MIN, f, 0, NULL, false), (lf_dtype)t, 0, NULL, V(NAN));
        chk("max nan first", red(LF_RED_MAX, f, 0, NULL, false), (lf_dtype)t, 0, NULL, V(NAN));
        lf_node *l = in((lf_dtype)t, 1, SH(3), V(5, -5, NAN));
        chk("min nan last", red(LF_RED_MIN, l, 0, NULL, false), (lf_dtype)t, 0, NULL, V(NAN));
        chk("max nan last", red(LF_RED_MAX, l, 0, NULL, false), (lf_dtype)t, 0, NULL, V(NAN));
        lf_node *m = in((lf_dtype)t, 2, SH(2, 2), V(1, NAN, 2, 3));
        chk("min rows", red(LF_RED_MIN, m, 1, AX(1), false), (lf_dtype)t, 1, SH(2), V(NAN, 2));
        chk("max cols", red(LF_RED_MAX, m, 1, AX(0), false), (lf_dtype)t, 1, SH(2), V(2, NAN));
        lf_node *i = in((lf_dtype)t, 1, SH(2), V(INFINITY, -INFINITY));
        chk("min inf", red(LF_RED_MIN, i, 0, NULL, false), (lf_dtype)t, 0, NULL, V(-INFINITY));
        chk("sum inf-inf", red(LF_RED_SUM, i, 0, NULL, false), (lf_dtype)t, 0, NULL, V(NAN));
    }
}

Test(reduce, argmin_argmax_first_occurrence) {
    for (int t = LF_I32; t <= LF_F64; t++) {
        lf_node *x = in((lf_dtype)t, 1, SH(4), V(3, 1, 1, 3));
        chk("argmin first", red(LF_RED_ARGMIN, x, 0, NULL, false), LF_I64, 0, NULL, V(1));
        chk("argmax first", red(LF_RED_ARGMAX, x, 0, NULL, false), LF_I64, 0, NULL, V(0));
        lf_node *c = in((lf_dtype)t, 1, SH(3), V(7, 7, 7));
        chk("argmin equal", red(LF_RED_ARGMIN, c, 0, NULL, false), LF_I64, 0, NULL, V(0));
        chk("argmax equal", red(LF_RED_ARGMAX, c, 0, NULL, false), LF_I64, 0, NULL, V(0));
    }
    lf_node *b = in(LF_BOOL, 1, SH(3), V(0, 1, 1));
    chk("argmax bool", red(LF_RED_ARGMAX, b, 0, NULL, false), LF_I64, 0, NULL, V(1));
    chk("argmin bool", red(LF_RED_ARGMIN, b, 0, NULL, false), LF_I64, 0, NULL, V(0));
    lf_node *e = in(LF_I64, 1, SH(3), V(-9223372036854775808.0, 5, -9223372036854775808.0));
    chk("argmin INT64_MIN", red(LF_RED_ARGMIN, e, 0, NULL, false), LF_I64, 0, NULL, V(0));
    lf_node *i32 = in(LF_I32, 1, SH(3), V(INT32_MIN, INT32_MIN, INT32_MIN));
    chk("argmax all INT32_MIN", red(LF_RED_ARGMAX, i32, 0, NULL, false), LF_I64, 0, NULL, V(0));
    chk("argmin all INT32_MIN", red(LF_RED_ARGMIN, i32, 0, NULL, false), LF_I64, 0, NULL, V(0));
    /* infinities are ordinary extremes */
    lf_node *inf = in(LF_F64, 1, SH(3), V(INFINITY, 1, INFINITY));
    chk("argmax inf", red(LF_RED_ARGMAX, inf, 0, NULL, false), LF_I64, 0, NULL, V(0));
    chk("argmin -inf", red(LF_RED_ARGMIN, in(LF_F32, 1, SH(3), V(0, -INFINITY, -INFINITY)), 0, NULL, false),
        LF_I64, 0, NULL, V(1));
}

Test(reduce, argmin_argmax_first_nan) {
    for (int t = LF_F32; t <= LF_F64; t++) {
        lf_node *x = in((lf_dtype)t, 1, SH(4), V(1, NAN, 5, NAN));
        chk("argmax nan", red(LF_RED_ARGMAX, x, 0, NULL, false), LF_I64, 0, NULL, V(1));
        chk("argmin nan", red(LF_RED_ARGMIN, x, 0, NULL, false), LF_I64, 0, NULL, V(1));
        lf_node *y = in((lf_dtype)t, 1, SH(3), V(INFINITY, -INFINITY, NAN));
        chk("argmax nan after inf", red(LF_RED_ARGMAX, y, 0, NULL, false), LF_I64, 0, NULL, V(2));
        chk("argmin nan after -inf", red(LF_RED_ARGMIN, y, 0, NULL, false), LF_I64, 0, NULL, V(2));
        lf_node *z = in((lf_dtype)t, 1, SH(2), V(NAN, NAN));
        chk("argmax all nan", red(LF_RED_ARGMAX, z, 0, NULL, false), LF_I64, 0, NULL, V(0));
        lf_node *m = in((lf_dtype)t, 2, SH(2, 3), V(1, 3, 3, NAN, 0, NAN));
        chk("argmax rows", red(LF_RED_ARGMAX, m, 1, AX(1), false), LF_I64, 1, SH(2), V(1, 0));
        chk("argmin rows", red(LF_RED_ARGMIN, m, 1, AX(-1), true), LF_I64, 2, SH(2, 1), V(0, 0));
        chk("argmin cols", red(LF_RED_ARGMIN, m, 1, AX(0), false), LF_I64, 1, SH(3), V(1, 1, 1));
        chk("argmax cols", red(LF_RED_ARGMAX, m, 1, AX(0), false), LF_I64, 1, SH(3), V(1, 0, 1));
    }
}

Test(reduce, arg_over_several_axes_row_major) {
    /* x[i,j,k] = (7 * (12i + 4j + k)) % 24: a permutation of 0..23 */
    double v[24];
    for (int f = 0; f < 24; f++) v[f] = (7 * f) % 24;
    lf_node *x = in(LF_F64, 3, SH(2, 3, 4), v);
    /* over (1,2): index j*4 + k; row 0 max 22 at f=10, row 1 max 23 at f=17 (local 5) */
    chk("argmax (1,2)", red(LF_RED_ARGMAX, x, 2, AX(1, 2), false), LF_I64, 1, SH(2), V(10, 5));
    chk("argmin (1,2)", red(LF_RED_ARGMIN, x, 2, AX(1, 2), false), LF_I64, 1, SH(2), V(0, 2));
    chk("argmax (-1,1)", red(LF_RED_ARGMAX, x, 2, AX(-1, 1), false), LF_I64, 1, SH(2), V(10, 5));
    chk("argmax (1,2) keepdims", red(LF_RED_ARGMAX, x, 2, AX(1, 2), true), LF_I64, 3, SH(2, 1, 1),
        V(10, 5));
    chk("argmax all", red(LF_RED_ARGMAX, x, 0, NULL, false), LF_I64, 0, NULL, V(17));
    chk("argmin all", red(LF_RED_ARGMIN, x, 0, NULL, false), LF_I64, 0, NULL, V(0));
    /* over (0,2): index i*4 + k, per j */
    double wmax[3], wmin[3];
    for (int j = 0; j < 3; j++) {
        double bmax = -1, bmin = 99;
        for (int i = 0; i < 2; i++)
            for (int k = 0; k < 4; k++) {
                double e = v[12 * i + 4 * j + k];
                if (e > bmax) {
                    bmax = e;
                    wmax[j] = i * 4 + k;
                }
                if (e < bmin) {
                    bmin = e;
                    wmin[j] = i * 4 + k;
                }
            }
    }
    chk("argmax (0,2)", red(LF_RED_ARGMAX, x, 2, AX(0, 2), false), LF_I64, 1, SH(3), wmax);
    chk("argmin (2,0)", red(LF_RED_ARGMIN, x, 2, AX(2, 0), false), LF_I64, 1, SH(3), wmin);
    /* over (0,1): index i*3 + j, per k */
    double wk[4];
    for (int k = 0; k < 4; k++) {
        double b = -1;
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 3; j++)
                if (v[12 * i + 4 * j + k] > b) {
                    b = v[12 * i + 4 * j + k];
                    wk[k] = i * 3 + j;
                }
    }
    chk("argmax (0,1)", red(LF_RED_ARGMAX, x, 2, AX(0, 1), false), LF_I64, 1, SH(4), wk);
    /* first occurrence in row-major order over the reduced axes with ties */
    lf_node *t = in(LF_I32, 3, SH(2, 2, 2), V(0, 9, 9, 0, 4, 4, 4, 4));
    chk("argmax ties (1,2)", red(LF_RED_ARGMAX, t, 2, AX(1, 2), false), LF_I64, 1, SH(2), V(1, 0));
    chk("argmax ties (0,1)", red(LF_RED_ARGMAX, t, 2, AX(0, 1), false), LF_I64, 1, SH(2), V(1, 0));
}

/* ---- 0-d, views, maps ---------------------------------------------------------------- */

Test(reduce, zero_d_input) {
    lf_node *c = lf_const(g, LF_F64, 5);
    chk("sum 0-d", red(LF_RED_SUM, c, 0, NULL, false), LF_F64, 0, NULL, V(5));
    chk("sum 0-d keepdims", red(LF_RED_SUM, c, 0, NULL, true), LF_F64, 0, NULL, V(5));
    chk("prod 0-d", red(LF_RED_PROD, c, 0, NULL, false), LF_F64, 0, NULL, V(5));
    chk("min 0-d", red(LF_RED_MIN, c, 0, NULL, false), LF_F64, 0, NULL, V(5));
    chk("argmax 0-d", red(LF_RED_ARGMAX, c, 0, NULL, false), LF_I64, 0, NULL, V(0));
    lf_node *i = lf_const(g, LF_I32, 5);
    chk("mean 0-d i32", red(LF_RED_MEAN, i, 0, NULL, false), LF_F64, 0, NULL, V(5));
    chk("sum 0-d i32", red(LF_RED_SUM, i, 0, NULL, false), LF_I64, 0, NULL, V(5));
    lf_node *b = lf_input(g, tu_buf(ctx, LF_F32, 0, NULL, V(NAN)));
    chk("max 0-d nan", red(LF_RED_MAX, b, 0, NULL, false), LF_F32, 0, NULL, V(NAN));
    chk("argmin 0-d nan", red(LF_RED_ARGMIN, b, 0, NULL, false), LF_I64, 0, NULL, V(0));
    /* a reduction of a reduction */
    lf_node *s = red(LF_RED_SUM, red(LF_RED_SUM, iota3(LF_F64), 1, AX(2), false), 0, NULL, false);
    chk("sum of sum", red(LF_RED_SUM, s, 0, NULL, false), LF_F64, 0, NULL, V(276));
}

Test(reduce, broadcast_view_input) {
    lf_node *bc = lf_broadcast_to(g, in(LF_F64, 1, SH(3), V(1, 2, 3)), 2, SH(4, 3));
    chk("sum axis 0", red(LF_RED_SUM, bc, 1, AX(0), false), LF_F64, 1, SH(3), V(4, 8, 12));
    chk("sum all", red(LF_RED_SUM, bc, 0, NULL, false), LF_F64, 0, NULL, V(24));
    chk("max axis 1", red(LF_RED_MAX, bc, 1, AX(1), false), LF_F64, 1, SH(4), V(3, 3, 3, 3));
    chk("argmax all", red(LF_RED_ARGMAX, bc, 0, NULL, false), LF_I64, 0, NULL, V(2));
    chk("argmin axis 0", red(LF_RED_ARGMIN, bc, 1, AX(0), false), LF_I64, 1, SH(3), V(0, 0, 0));
    chk("prod axis 0", red(LF_RED_PROD, bc, 1, AX(0), false), LF_F64, 1, SH(3), V(1, 16, 81));
    chk("mean axis 0 keepdims", red(LF_RED_MEAN, bc, 1, AX(0), true), LF_F64, 2, SH(1, 3), V(1, 2, 3));
    lf_node *big = lf_broadcast_to(g, lf_const(g, LF_F32, 0.5), 2, SH(100, 10));
    chk("sum broadcast const", red(LF_RED_SUM, big, 0, NULL, false), LF_F32, 0, NULL, V(500));
    lf_node *col = lf_broadcast_to(g, in(LF_I32, 2, SH(2, 1), V(3, -4)), 2, SH(2, 5));
    chk("sum column broadcast", red(LF_RED_SUM, col, 1, AX(1), false), LF_I64, 1, SH(2), V(15, -20));
    /* a transposed view */
    lf_node *t = lf_transpose(g, iota3(LF_F64));
    chk("sum (T, axis 0)", red(LF_RED_SUM, t, 1, AX(0), false), LF_F64, 2, SH(3, 2),
        V(6, 54, 22, 70, 38, 86));
}

Test(reduce, matmul_as_zip_reduce) {
    /* C[i,k] = sum_j A[i,j] * B[j,k] as reduce(zipwith(*, A[i,j,1], B[1,j,k]), j) */
    double a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {7, 8, 9, 10, 11, 12};
    lf_node *A = lf_expand_dims(g, in(LF_F64, 2, SH(2, 3), a), 2);
    lf_node *B = lf_expand_dims(g, in(LF_F64, 2, SH(3, 2), b), 0);
    lf_fn *mul = lf_fn_parse(g, "(x, y) -> x * y");
    cr_assert(mul != NULL);
    lf_node *P = lf_zipwith(g, mul, 2, (lf_node *[]){A, B});
    cr_assert(P != NULL, "%s", lf_errmsg(ctx));
    cr_assert_eq(lf_node_dim(P, 0), 2);
    cr_assert_eq(lf_node_dim(P, 1), 3);
    cr_assert_eq(lf_node_dim(P, 2), 2);
    double c[4];
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 2; k++) {
            c[i * 2 + k] = 0;
            for (int j = 0; j < 3; j++) c[i * 2 + k] += a[i * 3 + j] * b[j * 2 + k];
        }
    chk("matmul", red(LF_RED_SUM, P, 1, AX(1), false), LF_F64, 2, SH(2, 2), c);
    cr_assert_eq(c[0], 58);
    cr_assert_eq(c[3], 154);
}

Test(reduce, softmax_row) {
    double x[6] = {1, 2, 3, -1, 0, 1000};
    lf_node *X = in(LF_F64, 2, SH(2, 3), x);
    lf_node *mx = red(LF_RED_MAX, X, 1, AX(1), true);
    lf_node *e = lf_exp(g, lf_sub(g, X, mx));
    lf_node *s = red(LF_RED_SUM, e, 1, AX(1), true);
    lf_node *y = lf_div(g, e, s);
    double want[6];
    for (int r = 0; r < 2; r++) {
        double m = fmax(fmax(x[3 * r], x[3 * r + 1]), x[3 * r + 2]), sum = 0;
        for (int k = 0; k < 3; k++) sum += exp(x[3 * r + k] - m);
        for (int k = 0; k < 3; k++) want[3 * r + k] = exp(x[3 * r + k] - m) / sum;
    }
    chk_tol("softmax", y, LF_F64, 2, SH(2, 3), want, 1e-15);
    /* x - mean(x) along rows */
    lf_node *c = lf_sub(g, X, red(LF_RED_MEAN, X, 1, AX(-1), true));
    chk("centered", c, LF_F64, 2, SH(2, 3), V(-1, 0, 1, -1 - 333, -333, 1000 - 333));
}
