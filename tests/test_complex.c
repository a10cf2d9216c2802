/* tests/test_complex.c: the complex dtypes c64 and c128 (issue 31) on the
 * context's evaluator (reference; compiled CPU as complex-cpu; the schedule
 * interpreter as complex-interp), against oracles written here from the
 * header's formulas: products and quotients written out (not C's _Complex
 * operators), Smith's division, exp/log/sqrt/abs/angle, casts, promotion,
 * sum/prod/mean, equality, the operators refused with LF_ERR_DTYPE, and
 * DLPack codes. Results must equal the oracle bit for bit where the header
 * fixes the formula with only + - * / (c64's are computed in float here,
 * as the formula says), and within a few ulps for the libm functions.
 */
#include "graph/graph.h"
#include "testutil.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

TU_GRAPH_SUITE(complex);

/* A c64 (or c128) input of n values re[i] + im[i] i. */
static lf_node *cin(lf_dtype t, int64_t n, const double *re, const double *im) {
    lf_buffer *b = lf_buffer_new(ctx, t, 1, &n);
    cr_assert(b != NULL, "%s", lf_errmsg(ctx));
    size_t sz = lf_dtype_size(t);
    unsigned char *raw = malloc((size_t)(n ? n : 1) * sz);
    for (int64_t i = 0; i < n; i++) {
        lf_scalar v = {{.f = re[i]}, im[i]};
        if (t == LF_C64) {
            v.f = (float)v.f;
            v.im = (float)v.im;
        }
        graph_scalar_store(raw, t, i, v);
    }
    cr_assert_eq(lf_buffer_write(b, raw, (size_t)n * sz), LF_OK);
    free(raw);
    lf_node *x = lf_input(g, b);
    lf_buffer_free(b);
    return x;
}

static lf_scalar *run(lf_node *y, int64_t n) {
    lf_buffer *b = tu_eval1(ctx, g, y);
    void *raw = tu_read_raw(b);
    lf_scalar *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = graph_scalar_load(raw, lf_node_dtype(y), i);
    free(raw);
    lf_buffer_free(b);
    return v;
}

static lf_node *zip(const char *src, lf_node *a, lf_node *b) {
    lf_fn *f = lf_fn_parse(g, src);
    cr_assert(f != NULL, "parse %s: %s", src, lf_errmsg(ctx));
    lf_node *y = lf_zipwith(g, f, 2, (lf_node *[]){a, b});
    cr_assert(y != NULL, "%s: %s", src, lf_errmsg(ctx));
    return y;
}

static lf_node *map1(const char *src, lf_node *a) {
    lf_fn *f = lf_fn_parse(g, src);
    cr_assert(f != NULL, "parse %s: %s", src, lf_errmsg(ctx));
    lf_node *y = lf_map(g, f, a);
    cr_assert(y != NULL, "%s: %s", src, lf_errmsg(ctx));
    return y;
}

static bool same(double a, double b) { return (isnan(a) && isnan(b)) || (a == b && signbit(a) == signbit(b)); }

#define N 12
static const double ARE[N] = {1, -2.5, 0, 3e30, 1e-30, -0.0, INFINITY, 7, 0.1, -3, 2, 1e20};
static const double AIM[N] = {2, 0.5, 0, -4e30, 3e-30, 0.0, 1, -7, 0.2, 0, -2, 1e-20};
static const double BRE[N] = {3, 1, 2, 2e-30, 1e30, 1, 2, 0, -0.3, 0, 0.5, 1e-20};
static const double BIM[N] = {-1, 4, 0, 1, -1e30, 0, 0, 7, 0.7, 2, 0, 1e20};

/* + - * / and conj in c64: the header's formulas in float. */
Test(complex, c64_arithmetic_bit_exact) {
    lf_node *a = cin(LF_C64, N, ARE, AIM), *b = cin(LF_C64, N, BRE, BIM);
    const char *src[] = {"(a, b) -> a + b", "(a, b) -> a - b", "(a, b) -> a * b", "(a, b) -> a / b",
                         "(a, b) -> conj(a) * b - a"};
    for (int k = 0; k < 5; k++) {
        lf_node *y = zip(src[k], a, b);
        cr_assert_eq(lf_node_dtype(y), LF_C64);
        lf_scalar *v = run(y, N);
        for (int i = 0; i < N; i++) {
            float ar = (float)ARE[i], ai = (float)AIM[i], br = (float)BRE[i], bi = (float)BIM[i], wr, wi;
            if (k == 0) wr = ar + br, wi = ai + bi;
            else if (k == 1) wr = ar - br, wi = ai - bi;
            else if (k == 2) {
                float rr = ar * br, ii = ai * bi, ri = ar * bi, ir = ai * br;
                wr = rr - ii, wi = ri + ir;
            } else if (k == 3) {
                if (fabsf(br) >= fabsf(bi)) {
                    float r = bi / br, t = br + bi * r;
                    wr = (ar + ai * r) / t, wi = (ai - ar * r) / t;
                } else {
                    float r = br / bi, t = br * r + bi;
                    wr = (ar * r + ai) / t, wi = (ai * r - ar) / t;
                }
            } else {
                float cr = ar, ci = -ai; /* conj(a) * b - a */
                float rr = cr * br, ii = ci * bi, ri = cr * bi, ir = ci * br;
                wr = (rr - ii) - ar, wi = (ri + ir) - ai;
            }
            cr_expect(same(v[i].f, wr) && same(v[i].im, wi), "%s at %d: (%a, %a), want (%a, %a)", src[k], i, v[i].f,
                      v[i].im, (double)wr, (double)wi);
        }
        free(v);
    }
}

/* The functions in c128 against the formulas with libm's double versions. */
Test(complex, c128_functions) {
    lf_node *a = cin(LF_C128, N, ARE, AIM);
    const char *src[] = {"(a) -> abs(a)", "(a) -> angle(a)", "(a) -> real(a)", "(a) -> imag(a)", "(a) -> exp(a)",
                         "(a) -> log(a)", "(a) -> sqrt(a)"};
    for (int k = 0; k < 7; k++) {
        lf_node *y = map1(src[k], a);
        cr_assert_eq(lf_node_dtype(y), k < 4 ? LF_F64 : LF_C128, "%s", src[k]);
        lf_scalar *v = run(y, N);
        for (int i = 0; i < N; i++) {
            double x = ARE[i], z = AIM[i], wr = 0, wi = 0;
            switch (k) {
            case 0: wr = hypot(x, z); break;
            case 1: wr = atan2(z, x); break;
            case 2: wr = x; break;
            case 3: wr = z; break;
            case 4: wr = exp(x) * cos(z), wi = exp(x) * sin(z); break;
            case 5: wr = log(hypot(x, z)), wi = atan2(z, x); break;
            default:
                if (x == 0 && z == 0) wr = 0, wi = z;
                else {
                    double t = sqrt((fabs(x) + hypot(x, z)) / 2);
                    if (x >= 0) wr = t, wi = z / (2 * t);
                    else wr = fabs(z) / (2 * t), wi = copysign(t, z);
                }
            }
            bool ok = same(v[i].f, wr) && (k < 4 || same(v[i].im, wi));
            cr_expect(ok, "%s at %d: (%a, %a), want (%a, %a)", src[k], i, v[i].f, v[i].im, wr, wi);
        }
        free(v);
    }
}

/* NumPy 2's promotion with real dtypes, weak literals, casts both ways. */
Test(complex, promotion_literals_and_casts) {
    cr_expect_eq(lf_dtype_promote(LF_C64, LF_F32), LF_C64);
    cr_expect_eq(lf_dtype_promote(LF_C64, LF_F16), LF_C64);
    cr_expect_eq(lf_dtype_promote(LF_C64, LF_BF16), LF_C64);
    cr_expect_eq(lf_dtype_promote(LF_C64, LF_F64), LF_C128);
    cr_expect_eq(lf_dtype_promote(LF_C64, LF_I16), LF_C64);
    cr_expect_eq(lf_dtype_promote(LF_C64, LF_I32), LF_C128);
    cr_expect_eq(lf_dtype_promote(LF_C64, LF_U64), LF_C128);
    cr_expect_eq(lf_dtype_promote(LF_C64, LF_C128), LF_C128);
    cr_expect_eq(lf_dtype_promote(LF_BOOL, LF_C64), LF_C64);
    cr_expect_str_eq(lf_dtype_name(LF_C64), "c64");
    cr_expect_eq(lf_dtype_size(LF_C128), 16);
    double re[3] = {1.5, -2, 0}, im[3] = {-1, 3, 0};
    lf_node *a = cin(LF_C64, 3, re, im);
    lf_node *y = map1("(a) -> a * 2 + 0.5", a); /* weak literals take c64 */
    cr_assert_eq(lf_node_dtype(y), LF_C64);
    lf_scalar *v = run(y, 3);
    for (int i = 0; i < 3; i++) {
        float r = (float)re[i], m = (float)im[i];
        /* a * (2, 0) + (0.5, 0) by the formulas */
        float rr = r * 2.0f, ii = m * 0.0f, ri = r * 0.0f, ir = m * 2.0f;
        cr_expect(same(v[i].f, (rr - ii) + 0.5f) && same(v[i].im, (ri + ir) + 0.0f), "at %d", i);
    }
    free(v);
    lf_node *xs[3] = {map1("(a) -> f32(a)", a), map1("(a) -> i32(a)", a), map1("(a) -> bool(a)", a)};
    int64_t want_i[3] = {1, -2, 0};
    for (int k = 0; k < 3; k++) {
        lf_scalar *w = run(xs[k], 3);
        for (int i = 0; i < 3; i++) {
            if (k == 0) cr_expect(same(w[i].f, (float)re[i]));
            else if (k == 1) cr_expect_eq(w[i].i, want_i[i]);
            else cr_expect_eq(w[i].i, re[i] != 0 || im[i] != 0);
        }
        free(w);
    }
    lf_node *up = map1("(a) -> c128(a) + f64(1)", a);
    cr_expect_eq(lf_node_dtype(up), LF_C128);
    lf_node *f = cin(LF_C64, 3, re, im);
    lf_node *mixed = zip("(a, b) -> real(a) + b", a, f); /* f32 + c64 */
    cr_expect_eq(lf_node_dtype(mixed), LF_C64);
}

Test(complex, equality_and_where) {
    double re[4] = {1, 1, NAN, 0}, im[4] = {2, -2, 0, -0.0}, re2[4] = {1, 1, NAN, -0.0}, im2[4] = {2, 2, 0, 0};
    lf_node *a = cin(LF_C128, 4, re, im), *b = cin(LF_C128, 4, re2, im2);
    lf_scalar *eq = run(zip("(a, b) -> a == b", a, b), 4), *ne = run(zip("(a, b) -> a != b", a, b), 4);
    int want[4] = {1, 0, 0, 1};
    for (int i = 0; i < 4; i++) {
        cr_expect_eq(eq[i].i, want[i], "== at %d", i);
        cr_expect_eq(ne[i].i, !want[i], "!= at %d", i);
    }
    free(eq);
    free(ne);
    lf_scalar *w = run(zip("(a, b) -> where(real(a) > 0.5, a, b)", a, b), 4);
    cr_expect(w[0].f == 1 && w[0].im == 2 && w[1].im == -2 && isnan(w[2].f) && w[3].im == 0);
    free(w);
}

/* sum, prod and mean accumulate in c128 (lf_add_c128 / lf_mul_c128 from
 * (0, 0) or (1, 0) in row-major order) and round once. */
Test(complex, reductions) {
    enum { M = 37 };
    double re[M], im[M];
    for (int i = 0; i < M; i++) re[i] = 0.1 * i - 1, im[i] = 1.0 / (i + 1);
    lf_node *a = cin(LF_C64, M, re, im);
    lf_node *s = lf_reduce(g, LF_RED_SUM, a, 0, NULL, false), *p = lf_reduce(g, LF_RED_PROD, a, 0, NULL, false);
    lf_node *m = lf_reduce(g, LF_RED_MEAN, a, 0, NULL, false);
    cr_assert(s && p && m, "%s", lf_errmsg(ctx));
    const char *be = getenv("LF_TEST_BACKEND"), *cm = getenv("LF_COMPILE");
    if (be && !strcmp(be, "cpu") && !(cm && !strcmp(cm, "never"))) { /* compiled kernels refuse them, clearly */
        lf_buffer *out = lf_buffer_new(ctx, LF_C64, 0, NULL);
        cr_expect_eq(lf_eval(g, 1, &s, &out), LF_ERR_DTYPE);
        cr_expect(strstr(lf_errmsg(ctx), "reduces complex values") != NULL, "%s", lf_errmsg(ctx));
        lf_buffer_free(out);
        return;
    }
    cr_expect_eq(lf_node_dtype(s), LF_C64);
    cr_expect_eq(lf_node_dtype(m), LF_C64);
    double sr = 0, si = 0, pr = 1, pi = 0;
    for (int i = 0; i < M; i++) {
        double xr = (float)re[i], xi = (float)im[i];
        sr += xr, si += xi;
        double rr = pr * xr, ii = pi * xi, ri = pr * xi, ir = pi * xr;
        pr = rr - ii, pi = ri + ir;
    }
    lf_scalar *vs = run(s, 1), *vp = run(p, 1), *vm = run(m, 1);
    cr_expect(same(vs[0].f, (float)sr) && same(vs[0].im, (float)si), "sum (%a, %a)", vs[0].f, vs[0].im);
    cr_expect(same(vp[0].f, (float)pr) && same(vp[0].im, (float)pi), "prod (%a, %a)", vp[0].f, vp[0].im);
    cr_expect(same(vm[0].f, (float)(sr / M)) && same(vm[0].im, (float)(si / M)), "mean");
    free(vs);
    free(vp);
    free(vm);
}

/* Everything complex values have no meaning for is refused when built. */
Test(complex, refused_operators) {
    double re[2] = {1, 2}, im[2] = {0, 1};
    lf_node *a = cin(LF_C64, 2, re, im), *b = cin(LF_C64, 2, re, im);
    const char *bad2[] = {"(a, b) -> a < b", "(a, b) -> a >= b", "(a, b) -> min(a, b)", "(a, b) -> a % b",
                          "(a, b) -> a // b", "(a, b) -> atan2(a, b)"};
    for (int k = 0; k < 6; k++) {
        lf_fn *f = lf_fn_parse(g, bad2[k]);
        cr_assert(f != NULL);
        lf_node *y = lf_zipwith(g, f, 2, (lf_node *[]){a, b});
        cr_expect(y == NULL, "%s accepted", bad2[k]);
        cr_expect(strstr(lf_errmsg(ctx), "complex") != NULL, "%s: %s", bad2[k], lf_errmsg(ctx));
        lf_graph_free(g);
        g = lf_graph_new(ctx);
        a = cin(LF_C64, 2, re, im);
        b = cin(LF_C64, 2, re, im);
    }
    const char *bad1[] = {"(a) -> sin(a)", "(a) -> floor(a)", "(a) -> isnan(a)", "(a) -> sign(a)", "(a) -> ~a"};
    for (int k = 0; k < 5; k++) {
        lf_fn *f = lf_fn_parse(g, bad1[k]);
        cr_assert(f != NULL);
        cr_expect(lf_map(g, f, a) == NULL, "%s accepted", bad1[k]);
        lf_graph_free(g);
        g = lf_graph_new(ctx);
        a = cin(LF_C64, 2, re, im);
    }
    lf_reduce_op ops[4] = {LF_RED_MIN, LF_RED_MAX, LF_RED_ARGMIN, LF_RED_ARGMAX};
    for (int k = 0; k < 4; k++) {
        cr_expect(lf_reduce(g, ops[k], a, 0, NULL, false) == NULL);
        cr_expect(strstr(lf_errmsg(ctx), "complex") != NULL, "%s", lf_errmsg(ctx));
        lf_graph_free(g);
        g = lf_graph_new(ctx);
        a = cin(LF_C64, 2, re, im);
    }
    cr_expect(lf_sort(g, a, 0, false) == NULL);
    cr_expect(strstr(lf_errmsg(ctx), "order") != NULL, "%s", lf_errmsg(ctx));
    lf_graph_free(g);
    g = lf_graph_new(ctx);
    cr_expect(lf_iota(g, LF_C64, 4) == NULL);
    lf_graph_free(g);
    g = lf_graph_new(ctx);
    int64_t n2 = 2;
    cr_expect(lf_random(g, LF_C128, LF_RANDOM_UNIFORM, 1, &n2, 1) == NULL);
}

Test(complex, dlpack_codes) {
    cr_expect_eq(graph_dtype_from_dlpack(GRAPH_DL_COMPLEX, 64), LF_C64);
    cr_expect_eq(graph_dtype_from_dlpack(GRAPH_DL_COMPLEX, 128), LF_C128);
    cr_expect_eq(graph_dtypes[LF_C64].dl_code, GRAPH_DL_COMPLEX);
}
