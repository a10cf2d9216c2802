/* tests/test_dtypes.c: the dtypes appended after the first five (i8 u8 i16
 * u16 u32 u64 f16 bf16) on the context's evaluator (reference; compiled CPU
 * as dtypes-cpu; the schedule interpreter as dtypes-interp), against oracles
 * written here from the header's rules: small integers wrap at their width
 * after every operation (NumPy's results: u8 200 + 100 is 44), unsigned
 * // % >> min max and comparisons are unsigned, f16 and bf16 round each
 * operation's float32 result to nearest even (the f16 oracle is GCC's
 * _Float16 conversion, the bf16 oracle frexp arithmetic), NaN, inf, -0,
 * overflow, zero-size and broadcast shapes, reductions' dtypes, the parser's
 * casts and literals, and DLPack codes. Promotion against NumPy 2 itself is
 * tests/dtype_promote_numpy.py.
 */
#include "graph/graph.h"
#include "testutil.h"

#include <criterion/criterion.h>
#include <dlpack/dlpack.h>
#include <math.h>
#include <string.h>

TU_GRAPH_SUITE(dtypes);

static lf_node *in1(lf_dtype t, int64_t n, const double *v) {
    lf_buffer *b = tu_buf(ctx, t, 1, &n, v);
    lf_node *x = lf_input(g, b);
    lf_buffer_free(b);
    return x;
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

/* Element i of node y's result, as graph/scalar.c holds it. */
static lf_scalar *eval_scalars(lf_node *y) {
    lf_buffer *b = tu_eval1(ctx, g, y);
    void *raw = tu_read_raw(b);
    int64_t n = lf_buffer_numel(b);
    lf_scalar *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = graph_scalar_load(raw, lf_node_dtype(y), i);
    free(raw);
    lf_buffer_free(b);
    return v;
}

/* ---- integers ---------------------------------------------------------------------- */

/* v (any integer) wrapped into integer dtype t: modulo 2^bits, signed t
 * two's complement, as lf_scalar holds it (a u64 as its bits). */
static int64_t oracle_wrap(lf_dtype t, uint64_t v) {
    int bits = 8 * (int)lf_dtype_size(t);
    if (bits < 64) v &= (UINT64_C(1) << bits) - 1;
    if (graph_dtypes[t].kind == DTYPE_SINT && bits < 64 && (v >> (bits - 1))) v |= ~((UINT64_C(1) << bits) - 1);
    return (int64_t)v;
}

Test(dtypes, numpy_wraparound_facts) {
    struct { lf_dtype t; const char *src; double a, b; int64_t want; } c[] = {
        {LF_U8, "(a, b) -> a + b", 200, 100, 44},          /* np.uint8(200) + np.uint8(100) */
        {LF_I8, "(a, b) -> a + b", 127, 1, -128},
        {LF_I8, "(a, b) -> a * b", -128, -1, -128},
        {LF_I16, "(a, b) -> a - b", -32768, 1, 32767},
        {LF_U16, "(a, b) -> a * b", 65535, 65535, 1},      /* no int overflow on the way */
        {LF_U32, "(a, b) -> a - b", 0, 1, 4294967295LL},
        {LF_U8, "(a, b) -> a // b", 250, 7, 35},
        {LF_U8, "(a, b) -> a % b", 250, 0, 0},
        {LF_I8, "(a, b) -> a // b", -128, -1, -128},
        {LF_I8, "(a, b) -> a % b", -7, 3, 2},
        {LF_U8, "(a, b) -> a >> b", 255, 7, 1},            /* logical */
        {LF_I8, "(a, b) -> a >> b", -128, 9, -1},          /* a count past the width */
        {LF_U8, "(a, b) -> a << b", 255, 1, 254},
        {LF_U16, "(a, b) -> a << b", 1, 16, 0},
        {LF_U8, "(a, b) -> a ** b", 3, 5, 243},
        {LF_U8, "(a, b) -> a ** b", 3, 6, 217},            /* 729 mod 256 */
        {LF_U8, "(a, b) -> min(a, b)", 255, 1, 1},
        {LF_U8, "(a, b) -> -a + b * 0", 1, 0, 255},
        {LF_U8, "(a, b) -> ~a + b", 0, 0, 255},
        {LF_I8, "(a, b) -> abs(a) + b", -128, 0, -128},
        {LF_U8, "(a, b) -> (a + b) * 2 + 1", 200, 100, 89}, /* every op wraps: (44 * 2 + 1) */
        {LF_I16, "(a, b) -> a * b // 3", 300, 300, 8154}, /* 90000 wraps to 24464 first */
    };
    for (size_t k = 0; k < sizeof c / sizeof c[0]; k++) {
        lf_node *y = zip(c[k].src, in1(c[k].t, 1, &c[k].a), in1(c[k].t, 1, &c[k].b));
        cr_assert_eq(lf_node_dtype(y), c[k].t, "%s on %s: dtype %s", c[k].src, lf_dtype_name(c[k].t),
                     lf_dtype_name(lf_node_dtype(y)));
        lf_scalar *v = eval_scalars(y);
        cr_expect_eq(v[0].i, c[k].want, "%s %s(%g, %g) = %lld, want %lld", lf_dtype_name(c[k].t), c[k].src, c[k].a,
                     c[k].b, (long long)v[0].i, (long long)c[k].want);
        free(v);
    }
}

/* Every integer dtype: + - * and the comparisons over its extremes and
 * small values (a broadcast [n,1] x [1,n] grid), against oracle_wrap. */
Test(dtypes, integer_arithmetic_grid_wraps) {
    static const lf_dtype ts[] = {LF_I8, LF_U8, LF_I16, LF_U16, LF_U32, LF_U64};
    for (size_t k = 0; k < sizeof ts / sizeof ts[0]; k++) {
        lf_dtype t = ts[k];
        bool u = graph_dtypes[t].kind == DTYPE_UINT;
        double vals[8] = {0, 1, 2, 5, 100, (double)graph_dtype_int_max(t), u ? 3 : -1, u ? 7 : (double)graph_dtype_int_min(t)};
        if (t == LF_U64) vals[5] = 18446744073709549568.0; /* 2^64 - 2^11 */
        int64_t n = 8;
        lf_buffer *ba = tu_buf(ctx, t, 2, (int64_t[]){n, 1}, vals), *bb = tu_buf(ctx, t, 2, (int64_t[]){1, n}, vals);
        lf_node *a = lf_input(g, ba), *b = lf_input(g, bb);
        lf_buffer_free(ba);
        lf_buffer_free(bb);
        lf_scalar *add = eval_scalars(zip("(a, b) -> a + b", a, b));
        lf_scalar *sub = eval_scalars(zip("(a, b) -> a - b", a, b));
        lf_scalar *mul = eval_scalars(zip("(a, b) -> a * b", a, b));
        lf_scalar *lt = eval_scalars(zip("(a, b) -> a < b", a, b));
        lf_scalar x[8];
        for (int i = 0; i < 8; i++) x[i] = graph_scalar_convert((lf_scalar){.f = vals[i]}, LF_F64, t);
        for (int i = 0; i < 8; i++)
            for (int j = 0; j < 8; j++) {
                uint64_t p = (uint64_t)x[i].i, q = (uint64_t)x[j].i;
                int at = i * 8 + j;
                bool less = u ? p < q : x[i].i < x[j].i;
                cr_expect_eq(add[at].i, oracle_wrap(t, p + q), "%s %llu + %llu", lf_dtype_name(t),
                             (unsigned long long)p, (unsigned long long)q);
                cr_expect_eq(sub[at].i, oracle_wrap(t, p - q), "%s -", lf_dtype_name(t));
                cr_expect_eq(mul[at].i, oracle_wrap(t, p * q), "%s *", lf_dtype_name(t));
                cr_expect_eq(lt[at].i, less, "%s <", lf_dtype_name(t));
            }
        free(add);
        free(sub);
        free(mul);
        free(lt);
    }
}

/* ---- f16 and bf16 ------------------------------------------------------------------ */

/* The oracles: f16 by GCC's _Float16 conversions (round to nearest even
 * from float and from double), bf16 by frexp arithmetic. */
static double f16_of(double x) { return (double)(_Float16)x; }
static double bf16_of(double x) {
    if (x == 0 || isnan(x) || isinf(x)) return x;
    int e;
    frexp(x, &e);
    int q = (e > -125 ? e : -125) - 8;
    double r = ldexp(nearbyint(ldexp(x, -q)), q);
    return fabs(r) >= 0x1p128 ? copysign(INFINITY, x) : r;
}
static double half_of(lf_dtype t, double x) { return t == LF_F16 ? f16_of(x) : bf16_of(x); }

static bool same_value(double a, double b) {
    return (isnan(a) && isnan(b)) || (a == b && signbit(a) == signbit(b));
}

static const double EDGE[] = {0.0, -0.0, 1.0, -1.0, 1.0 + 0x1p-11, 1.0 + 3 * 0x1p-11, 1.0 + 0x1p-8, 1.0 + 3 * 0x1p-8,
                              65504, 65519.99, 65520, -65536, 0x1p-24, 0x1p-25, 3 * 0x1p-26, 0x1p-14 - 0x1p-26,
                              1e-8, 1e30, 3.4e38, 1e300, 0x1p-133, 0x1p-134, 0.1, -2.7, 1e5,
                              NAN, -NAN, INFINITY, -INFINITY};
enum { NEDGE = sizeof EDGE / sizeof EDGE[0] };

Test(dtypes, half_casts_round_to_nearest_even) {
    static const lf_dtype halves[] = {LF_F16, LF_BF16};
    for (int h = 0; h < 2; h++) {
        lf_dtype t = halves[h];
        lf_node *x64 = in1(LF_F64, NEDGE, EDGE);
        lf_scalar *from64 = eval_scalars(lf_cast(g, x64, t)); /* one rounding from double */
        lf_scalar *from32 = eval_scalars(lf_cast(g, lf_cast(g, x64, LF_F32), t));
        lf_scalar *back = eval_scalars(lf_cast(g, lf_cast(g, x64, t), LF_F64));
        for (int i = 0; i < NEDGE; i++) {
            double w64 = half_of(t, EDGE[i]), w32 = half_of(t, (double)(float)EDGE[i]);
            cr_expect(same_value(from64[i].f, w64), "%s(%a) = %a, want %a", lf_dtype_name(t), EDGE[i], from64[i].f, w64);
            cr_expect(same_value(from32[i].f, w32), "%s(f32(%a)) = %a, want %a", lf_dtype_name(t), EDGE[i],
                      from32[i].f, w32);
            cr_expect(same_value(back[i].f, w64), "f64(%s(%a)) = %a", lf_dtype_name(t), EDGE[i], back[i].f);
        }
        free(from64);
        free(from32);
        free(back);
    }
}

/* Each operation of a fn rounds: (a * b + a) / 3 computes float32 steps and
 * rounds each to the dtype; the same value whether the steps are one fn or
 * materialized nodes (cast round trips through f32 in between). */
Test(dtypes, half_arithmetic_rounds_each_operation) {
    static const lf_dtype halves[] = {LF_F16, LF_BF16};
    for (int h = 0; h < 2; h++) {
        lf_dtype t = halves[h];
        double av[NEDGE], bv[NEDGE];
        for (int i = 0; i < NEDGE; i++) {
            av[i] = half_of(t, EDGE[i]);
            bv[i] = half_of(t, EDGE[(i * 7 + 3) % NEDGE]);
        }
        lf_node *a = in1(t, NEDGE, av), *b = in1(t, NEDGE, bv);
        lf_node *y = zip("(a, b) -> (a * b + a) / 3", a, b);
        cr_assert_eq(lf_node_dtype(y), t);
        lf_node *m = zip("(a, b) -> a * b", a, b);
        lf_node *s = lf_add(g, lf_cast(g, lf_cast(g, m, LF_F32), t), a);
        lf_node *d = lf_div(g, s, lf_const(g, t, 3));
        lf_scalar *got = eval_scalars(y), *steps = eval_scalars(d);
        lf_node *e = map1("(a) -> exp(a) + sqrt(a)", a);
        lf_scalar *ge = eval_scalars(e);
        for (int i = 0; i < NEDGE; i++) {
            float fa = (float)av[i], fb = (float)bv[i];
            double p = half_of(t, fa * fb), q = half_of(t, (float)p + fa), w = half_of(t, (float)q / 3.0f);
            cr_expect(same_value(got[i].f, w), "%s (%a * %a + a) / 3 = %a, want %a", lf_dtype_name(t), av[i], bv[i],
                      got[i].f, w);
            cr_expect(same_value(steps[i].f, got[i].f), "%s: fused %a, stepwise %a", lf_dtype_name(t), got[i].f,
                      steps[i].f);
            double we = half_of(t, (float)half_of(t, expf(fa)) + (float)half_of(t, sqrtf(fa)));
            cr_expect(fabs(ge[i].f - we) <= fabs(we) * 0x1p-7 || same_value(ge[i].f, we), "%s exp+sqrt(%a) = %a, want %a",
                      lf_dtype_name(t), av[i], ge[i].f, we);
        }
        free(got);
        free(steps);
        free(ge);
    }
}

/* signbit reads the stored sign bit: f16 / bf16 -0.0 and -NaN included;
   signed integers x < 0; unsigned never (200 is not negative in u8). */
Test(dtypes, signbit_of_every_new_dtype) {
    static const lf_dtype ts[] = {LF_I8, LF_U8, LF_I16, LF_U16, LF_U32, LF_U64, LF_F16, LF_BF16};
    double fv[] = {0, -0.0, NAN, -NAN, -INFINITY, -2, 3}, iv[] = {0, -1, 5, -100, 100, 7, -7}, uv[] = {0, 1, 200, 7, 9, 100, 3};
    for (int k = 0; k < 8; k++) {
        lf_dtype t = ts[k];
        bool fl = graph_dtype_is_float(t), un = graph_dtypes[t].kind == DTYPE_UINT;
        const double *v = fl ? fv : un ? uv : iv;
        lf_node *x = in1(t, 7, v);
        lf_node *ys[2] = {lf_signbit(g, x), map1("(x) -> signbit(x * 1)", x)};
        for (int j = 0; j < 2; j++) {
            cr_assert(ys[j] != NULL, "%s: %s", lf_dtype_name(t), lf_errmsg(ctx));
            cr_assert_eq(lf_node_dtype(ys[j]), LF_BOOL);
            lf_scalar *got = eval_scalars(ys[j]);
            for (int i = 0; i < 7; i++) {
                bool want = fl ? signbit(v[i]) != 0 : !un && v[i] < 0;
                cr_expect_eq(got[i].i != 0, want, "%s signbit(%g) [%d] = %lld", lf_dtype_name(t), v[i], j,
                             (long long)got[i].i);
            }
            free(got);
        }
    }
}

Test(dtypes, half_zero_size_broadcast_and_reductions) {
    lf_node *z = in1(LF_F16, 0, NULL);
    lf_buffer *bz = tu_eval1(ctx, g, lf_add(g, z, lf_const(g, LF_F16, 1)));
    cr_expect_eq(lf_buffer_numel(bz), 0);
    lf_buffer_free(bz);
    double col[3] = {1, 2, 3}, row[4] = {0.1, 0.2, 0.3, 1000};
    lf_buffer *bc = tu_buf(ctx, LF_BF16, 2, (int64_t[]){3, 1}, col), *br = tu_buf(ctx, LF_F16, 2, (int64_t[]){1, 4}, row);
    lf_node *c = lf_input(g, bc), *r = lf_input(g, br);
    lf_buffer_free(bc);
    lf_buffer_free(br);
    lf_node *y = lf_mul(g, c, r); /* bf16 * f16 promotes to f32 */
    cr_assert_eq(lf_node_dtype(y), LF_F32);
    lf_scalar *v = eval_scalars(y);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++) {
            double w = (double)((float)bf16_of(col[i]) * (float)f16_of(row[j]));
            cr_expect(same_value(v[i * 4 + j].f, w), "[%d,%d] = %a, want %a", i, j, v[i * 4 + j].f, w);
        }
    free(v);
    lf_node *s = lf_reduce(g, LF_RED_SUM, r, 0, NULL, false); /* f16: accumulated in double, rounded once */
    cr_assert_eq(lf_node_dtype(s), LF_F16);
    lf_scalar *sv = eval_scalars(s);
    double acc = 0;
    for (int j = 0; j < 4; j++) acc += f16_of(row[j]);
    cr_expect(same_value(sv[0].f, f16_of(acc)), "sum = %a, want %a", sv[0].f, f16_of(acc));
    free(sv);
    double u[3] = {200, 100, 255};
    lf_node *su = lf_reduce(g, LF_RED_SUM, in1(LF_U8, 3, u), 0, NULL, false);
    cr_assert_eq(lf_node_dtype(su), LF_U64, "sum of u8 is u64 (NumPy)");
    lf_scalar *suv = eval_scalars(su);
    cr_expect_eq(suv[0].i, 555);
    free(suv);
    lf_node *mx = lf_reduce(g, LF_RED_MAX, in1(LF_I8, 3, (double[]){-128, 127, 0}), 0, NULL, false);
    lf_scalar *mxv = eval_scalars(mx);
    cr_expect_eq(mxv[0].i, 127);
    free(mxv);
}

/* ---- parser, refusals, DLPack ------------------------------------------------------ */

Test(dtypes, parser_casts_and_literals) {
    double v[3] = {0, 255, 7};
    lf_node *x = in1(LF_U8, 3, v);
    lf_node *y = map1("(x) -> f16(x) / bf16(2) + i8(x)", x); /* f16 / bf16 is f32; i8(255) is -1 */
    cr_expect_eq(lf_node_dtype(y), LF_F32);
    lf_scalar *r = eval_scalars(y);
    cr_expect(same_value(r[1].f, 255.0f / 2.0f - 1.0f), "%a", r[1].f);
    free(r);
    lf_node *c = map1("(x) -> x < 300", x); /* NEP 50: compared exactly */
    lf_scalar *cv = eval_scalars(c);
    for (int i = 0; i < 3; i++) cr_expect_eq(cv[i].i, 1);
    free(cv);
    cr_expect_null(lf_map(g, lf_fn_parse(g, "(x) -> x + 300"), x));
    cr_expect_eq(lf_graph_status(g), LF_ERR_DTYPE);
    cr_expect(strstr(lf_errmsg(ctx), "out of range for u8") != NULL, "%s", lf_errmsg(ctx));
}

Test(dtypes, sort_scatter_and_u64_extremes_refused) {
    lf_node *h = in1(LF_F16, 2, (double[]){1, 2});
    cr_expect_null(lf_sort(g, h, 0, false));
    cr_expect_eq(lf_graph_status(g), LF_ERR_DTYPE);
    cr_expect(strstr(lf_errmsg(ctx), "sort: dtype f16 is not supported") != NULL, "%s", lf_errmsg(ctx));
}

Test(dtypes, u64_min_refused) {
    lf_node *x = in1(LF_U64, 2, (double[]){1, 2});
    cr_expect_null(lf_reduce(g, LF_RED_MIN, x, 0, NULL, false));
    cr_expect_eq(lf_graph_status(g), LF_ERR_DTYPE);
}

Test(dtypes, dlpack_codes_round_trip) {
    static const struct { lf_dtype t; uint8_t code, bits; } c[] = {
        {LF_I8, kDLInt, 8},     {LF_U8, kDLUInt, 8},   {LF_I16, kDLInt, 16},     {LF_U16, kDLUInt, 16},
        {LF_U32, kDLUInt, 32},  {LF_U64, kDLUInt, 64}, {LF_F16, kDLFloat, 16},   {LF_BF16, kDLBfloat, 16},
    };
    for (size_t k = 0; k < sizeof c / sizeof c[0]; k++) {
        int64_t n = 3;
        lf_buffer *b = tu_buf(ctx, c[k].t, 1, &n, (double[]){1, 2, 3});
        DLManagedTensor *t = NULL;
        cr_assert_eq(lf_buffer_to_dlpack(b, &t), LF_OK, "%s", lf_errmsg(ctx));
        cr_expect_eq(t->dl_tensor.dtype.code, c[k].code, "%s", lf_dtype_name(c[k].t));
        cr_expect_eq(t->dl_tensor.dtype.bits, c[k].bits, "%s", lf_dtype_name(c[k].t));
        lf_buffer *back = lf_buffer_from_dlpack(ctx, t);
        cr_assert(back != NULL, "%s", lf_errmsg(ctx));
        cr_expect_eq(lf_buffer_dtype(back), c[k].t);
        double got[3];
        tu_read(back, got);
        for (int i = 0; i < 3; i++) cr_expect_eq(got[i], i + 1);
        lf_buffer_free(back);
        lf_buffer_free(b);
    }
}
