/* tests/test_eval.c: the reference evaluator, elementwise.
 *
 * Covers every operator of lazyfuse_ops.def applied elementwise (lf_apply, the
 * convenience calls, lf_map / lf_zipwith with parsed and built fns) on every
 * dtype and every pair / triple of dtypes, against an independent scalar model
 * written here from the rules in lazyfuse.h (libm for the float functions; f32
 * through the float versions, compared within a few ulps), plus hand-computed
 * spot checks of the rules that matter most: dtype promotion and weak
 * literals, integer wraparound, x % 0, Python-sign modulo, integer powers,
 * round half to even, saturating casts, NaN and Inf propagation, where /
 * select, sigmoid, rsqrt, erf. Also broadcasting edge cases (size-0 and 0-d
 * operands, eight-input zipwith), sources (const, fill, iota, arange),
 * several outputs in one lf_eval, in-place evaluation, the seeds'
 * gaussian_pdf against a plain C loop, and random nodes (Random123's
 * Philox4x32-10 known answers, every distribution and dtype against a plain C
 * Philox and the formulas of lazyfuse.h, the normal against libm's
 * Box-Muller, moments / tails / KS of 10^6 draws, zero-size, views).
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

TU_GRAPH_SUITE(eval);

/* ---- a typed scalar model, independent of the library ------------------- */

typedef struct val {
    lf_dtype t; /* dtype */
    int64_t i;  /* bool, i32, i64 */
    double f;   /* f32 (holding a float exactly), f64 */
} val;

static const char *const dtn[] = {"bool", "i32", "i64", "f32", "f64"};

static bool is_float(lf_dtype t) { return t == LF_F32 || t == LF_F64; }

static val vi(lf_dtype t, int64_t i) {
    val v = {t, i, 0.0};
    return v;
}

static val vf(lf_dtype t, double f) {
    val v = {t, 0, t == LF_F32 ? (double)(float)f : f};
    return v;
}

/* NumPy promotion, written out from the header's rules. */
static lf_dtype promo(lf_dtype a, lf_dtype b) {
    if (a == b) return a;
    if (a == LF_BOOL) return b;
    if (b == LF_BOOL) return a;
    if (!is_float(a) && !is_float(b)) return LF_I64; /* i32 with i64 */
    return LF_F64; /* f32 with f64, or an integer with a float */
}

/* The cast rules: float->int truncates and saturates, NaN -> 0; int->int
 * keeps the value (only widening or in-range values are used here);
 * ->bool is != 0 (NaN is nonzero). */
static val conv(val v, lf_dtype to) {
    val r = {to, 0, 0.0};
    if (to == LF_BOOL) {
        r.i = is_float(v.t) ? v.f != 0 : v.i != 0;
    } else if (to == LF_F32) {
        r.f = is_float(v.t) ? (double)(float)v.f : (double)(float)v.i;
    } else if (to == LF_F64) {
        r.f = is_float(v.t) ? v.f : (double)v.i;
    } else if (is_float(v.t)) {
        double x = v.f;
        if (isnan(x)) r.i = 0;
        else if (to == LF_I32)
            r.i = x >= 2147483647.0 ? INT32_MAX : x <= -2147483648.0 ? INT32_MIN : (int64_t)x;
        else
            r.i = x >= 9223372036854775807.0 ? INT64_MAX
                  : x <= -9223372036854775808.0 ? INT64_MIN : (int64_t)x;
    } else {
        r.i = to == LF_I32 ? (int64_t)(int32_t)(uint32_t)(uint64_t)v.i : v.i;
    }
    return r;
}

enum { TY_ARITH, TY_DIV, TY_FLOAT, TY_SAME, TY_CMP, TY_LOGIC, TY_PRED, TY_SELECT, TY_BITS, TY_SHIFT, TY_PART };

static const struct {
    const char *text;
    int arity;
    int typing;
} opinfo[LF_NOPS] = {
#define LF_OP(ID, text, arity, syntax, typing, cname) {text, arity, TY_##typing},
#include "lazyfuse_ops.def"
};

static double pymod(double a, double b) {
    double r = fmod(a, b);
    if (r != 0) {
        if ((r < 0) != (b < 0)) r += b;
    } else {
        r = copysign(0.0, b);
    }
    return r;
}

static float pymodf(float a, float b) {
    float r = fmodf(a, b);
    if (r != 0) {
        if ((r < 0) != (b < 0)) r += b;
    } else {
        r = copysignf(0.0f, b);
    }
    return r;
}

/* NumPy's npy_floor_divide, written from its definition in lazyfuse.h. */
static double npy_floordiv(double a, double b) {
    if (b == 0) return a / b;
    double mod = fmod(a, b), div = (a - mod) / b;
    if (mod != 0 && (b < 0) != (mod < 0)) div -= 1.0;
    if (div == 0) return copysign(0.0, a / b);
    double fl = floor(div);
    return div - fl > 0.5 ? fl + 1.0 : fl;
}

static float npy_floordivf(float a, float b) {
    if (b == 0) return a / b;
    float mod = fmodf(a, b), div = (a - mod) / b;
    if (mod != 0 && (b < 0) != (mod < 0)) div -= 1.0f;
    if (div == 0) return copysignf(0.0f, a / b);
    float fl = floorf(div);
    return div - fl > 0.5f ? fl + 1.0f : fl;
}

/* NumPy's minimum/maximum: a NaN operand (the first when both are); of equal values the second */
static double fmin_nan(double a, double b) { return isnan(a) ? a : isnan(b) ? b : a < b ? a : b; }
static double fmax_nan(double a, double b) { return isnan(a) ? a : isnan(b) ? b : a > b ? a : b; }

/* One float operator in dtype t (f32 through the float libm functions). */
static double ref_float(lf_op op, lf_dtype t, double a, double b, double c) {
    bool s = t == LF_F32;
    float fa = (float)a, fb = (float)b, fc = (float)c;
    switch (op) {
    case LF_OP_ADD: return s ? fa + fb : a + b;
    case LF_OP_SUB: return s ? fa - fb : a - b;
    case LF_OP_MUL: return s ? fa * fb : a * b;
    case LF_OP_DIV: return s ? fa / fb : a / b;
    case LF_OP_MOD: return s ? pymodf(fa, fb) : pymod(a, b);
    case LF_OP_FLOORDIV: return s ? npy_floordivf(fa, fb) : npy_floordiv(a, b);
    case LF_OP_POW: return s ? powf(fa, fb) : pow(a, b);
    case LF_OP_NEG: return -a;
    case LF_OP_MIN: return fmin_nan(a, b);
    case LF_OP_MAX: return fmax_nan(a, b);
    case LF_OP_ABS: return fabs(a);
    case LF_OP_SIGN: return isnan(a) ? a : a > 0 ? 1.0 : a < 0 ? -1.0 : 0.0;
    case LF_OP_FLOOR: return floor(a);
    case LF_OP_CEIL: return ceil(a);
    case LF_OP_ROUND: return rint(a); /* default rounding mode: half to even */
    case LF_OP_TRUNC: return trunc(a);
    case LF_OP_SQRT: return s ? sqrtf(fa) : sqrt(a);
    case LF_OP_RSQRT: return s ? (double)(float)(1.0 / sqrt(a)) : 1.0 / sqrt(a);
    case LF_OP_CBRT: return s ? cbrtf(fa) : cbrt(a);
    case LF_OP_EXP: return s ? expf(fa) : exp(a);
    case LF_OP_EXP2: return s ? exp2f(fa) : exp2(a);
    case LF_OP_EXPM1: return s ? expm1f(fa) : expm1(a);
    case LF_OP_LOG: return s ? logf(fa) : log(a);
    case LF_OP_LOG2: return s ? log2f(fa) : log2(a);
    case LF_OP_LOG10: return s ? log10f(fa) : log10(a);
    case LF_OP_LOG1P: return s ? log1pf(fa) : log1p(a);
    case LF_OP_SIN: return s ? sinf(fa) : sin(a);
    case LF_OP_COS: return s ? cosf(fa) : cos(a);
    case LF_OP_TAN: return s ? tanf(fa) : tan(a);
    case LF_OP_ASIN: return s ? asinf(fa) : asin(a);
    case LF_OP_ACOS: return s ? acosf(fa) : acos(a);
    case LF_OP_ATAN: return s ? atanf(fa) : atan(a);
    case LF_OP_ATAN2: return s ? atan2f(fa, fb) : atan2(a, b);
    case LF_OP_SINH: return s ? sinhf(fa) : sinh(a);
    case LF_OP_COSH: return s ? coshf(fa) : cosh(a);
    case LF_OP_TANH: return s ? tanhf(fa) : tanh(a);
    case LF_OP_ASINH: return s ? asinhf(fa) : asinh(a);
    case LF_OP_ACOSH: return s ? acoshf(fa) : acosh(a);
    case LF_OP_ATANH: return s ? atanhf(fa) : atanh(a);
    case LF_OP_FMOD: return s ? fmodf(fa, fb) : fmod(a, b); /* the dividend's sign */
    case LF_OP_SIGMOID: {
        double r = 1.0 / (1.0 + exp(-a));
        return s ? (double)(float)r : r;
    }
    case LF_OP_ERF: return s ? erff(fa) : erf(a);
    case LF_OP_HYPOT: return s ? hypotf(fa, fb) : hypot(a, b);
    case LF_OP_FMA: return s ? fmaf(fa, fb, fc) : fma(a, b, c);
    case LF_OP_REAL: case LF_OP_CONJ: return a; /* of a real value (complex: test_complex.c) */
    case LF_OP_IMAG: return 0.0;
    case LF_OP_ANGLE: return s ? atan2f(0.0f, fa) : atan2(0.0, a);
    default: cr_assert_fail("no float reference for op %s", opinfo[op].text);
    }
    return 0;
}

static int64_t wrap(lf_dtype t, uint64_t v) {
    return t == LF_I32 ? (int64_t)(int32_t)(uint32_t)v : (int64_t)v;
}

static int64_t ipow(lf_dtype t, int64_t a, int64_t b) {
    if (b < 0) return a == 1 ? 1 : a == -1 ? ((b & 1) ? -1 : 1) : 0;
    uint64_t r = 1, x = (uint64_t)a;
    uint64_t e = (uint64_t)b;
    while (e) {
        if (e & 1) r *= x;
        x *= x;
        e >>= 1;
    }
    return wrap(t, r);
}

static int64_t imod(int64_t a, int64_t b) {
    if (b == 0 || b == -1) return 0;
    int64_t r = a % b;
    if (r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
}

/* Floor division as Python's, with NumPy's x // 0 == 0 and MIN // -1 == MIN. */
static int64_t ifloordiv(lf_dtype t, int64_t a, int64_t b) {
    if (b == 0) return 0;
    if (b == -1) return a == (t == LF_I32 ? INT32_MIN : INT64_MIN) ? a : -a;
    int64_t q = a / b, r = a % b;
    return r != 0 && (r < 0) != (b < 0) ? q - 1 : q;
}

/* a * 2**b, wrapping; 0 for a count outside [0, width). */
static int64_t ishl(lf_dtype t, int64_t a, int64_t b) {
    int w = t == LF_I32 ? 32 : 64;
    if (b < 0 || b >= w) return 0;
    return wrap(t, (uint64_t)a * ((uint64_t)1 << b));
}

/* floor(a / 2**b); for a count outside [0, width) the sign: -1 or 0. */
static int64_t ishr(lf_dtype t, int64_t a, int64_t b) {
    int w = t == LF_I32 ? 32 : 64;
    if (b < 0 || b >= w || b == 63) return a < 0 ? -1 : 0;
    return ifloordiv(LF_I64, a, (int64_t)1 << b);
}

/* One integer (or bool, for the SAME and BITS ops) operator in dtype t, wrapping. */
static int64_t ref_int(lf_op op, lf_dtype t, int64_t a, int64_t b) {
    uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
    if (t == LF_BOOL && op == LF_OP_BITNOT) return !a;
    switch (op) {
    case LF_OP_FLOORDIV: return ifloordiv(t, a, b);
    case LF_OP_BITAND: return (int64_t)(ua & ub);
    case LF_OP_BITOR: return (int64_t)(ua | ub);
    case LF_OP_BITXOR: return (int64_t)(ua ^ ub);
    case LF_OP_BITNOT: return -1 - a;
    case LF_OP_LSHIFT: return ishl(t, a, b);
    case LF_OP_RSHIFT: return ishr(t, a, b);
    case LF_OP_ADD: return wrap(t, ua + ub);
    case LF_OP_SUB: return wrap(t, ua - ub);
    case LF_OP_MUL: return wrap(t, ua * ub);
    case LF_OP_MOD: return imod(a, b);
    case LF_OP_FMOD: return b == 0 || b == -1 ? 0 : a % b; /* C's %; NumPy's fmod(x, 0) == 0 */
    case LF_OP_POW: return ipow(t, a, b);
    case LF_OP_NEG: return wrap(t, 0 - ua);
    case LF_OP_MIN: return a < b ? a : b;
    case LF_OP_MAX: return a > b ? a : b;
    case LF_OP_ABS: return a < 0 ? wrap(t, 0 - ua) : a;
    case LF_OP_SIGN: return (a > 0) - (a < 0);
    case LF_OP_FLOOR: case LF_OP_CEIL: case LF_OP_ROUND: case LF_OP_TRUNC: case LF_OP_CONJ: return a;
    default: cr_assert_fail("no integer reference for op %s", opinfo[op].text);
    }
    return 0;
}

static bool truth(val v) { return conv(v, LF_BOOL).i != 0; }

/* The result of op on x[0..arity), with dtype, by the header's rules. */
static val ref_apply(lf_op op, const val *x) {
    int ar = opinfo[op].arity, ty = opinfo[op].typing;
    lf_dtype p = x[0].t;
    for (int k = 1; k < ar; k++) p = promo(p, x[k].t);
    switch (ty) {
    case TY_ARITH: case TY_DIV: case TY_FLOAT: case TY_SAME: case TY_BITS: case TY_SHIFT: case TY_PART: {
        lf_dtype ct = p;
        if ((ty == TY_ARITH || ty == TY_SHIFT) && ct == LF_BOOL) ct = LF_I32;
        if ((ty == TY_DIV || ty == TY_FLOAT || ty == TY_PART) && !is_float(ct)) ct = LF_F64;
        val c[3] = {vi(ct, 0), vi(ct, 0), vi(ct, 0)};
        for (int k = 0; k < ar; k++) c[k] = conv(x[k], ct);
        if (is_float(ct)) return vf(ct, ref_float(op, ct, c[0].f, c[1].f, c[2].f));
        return vi(ct, ref_int(op, ct, c[0].i, c[1].i));
    }
    case TY_CMP: {
        val a = conv(x[0], p), b = conv(x[1], p);
        bool r = false;
        if (is_float(p)) {
            switch (op) {
            case LF_OP_LT: r = a.f < b.f; break;
            case LF_OP_LE: r = a.f <= b.f; break;
            case LF_OP_GT: r = a.f > b.f; break;
            case LF_OP_GE: r = a.f >= b.f; break;
            case LF_OP_EQ: r = a.f == b.f; break;
            case LF_OP_NE: r = a.f != b.f; break;
            default: cr_assert_fail("no comparison reference for %s", opinfo[op].text);
            }
        } else {
            switch (op) {
            case LF_OP_LT: r = a.i < b.i; break;
            case LF_OP_LE: r = a.i <= b.i; break;
            case LF_OP_GT: r = a.i > b.i; break;
            case LF_OP_GE: r = a.i >= b.i; break;
            case LF_OP_EQ: r = a.i == b.i; break;
            case LF_OP_NE: r = a.i != b.i; break;
            default: cr_assert_fail("no comparison reference for %s", opinfo[op].text);
            }
        }
        return vi(LF_BOOL, r);
    }
    case TY_LOGIC:
        switch (op) {
        case LF_OP_AND: return vi(LF_BOOL, truth(x[0]) && truth(x[1]));
        case LF_OP_OR: return vi(LF_BOOL, truth(x[0]) || truth(x[1]));
        case LF_OP_NOT: return vi(LF_BOOL, !truth(x[0]));
        default: cr_assert_fail("no logic reference for %s", opinfo[op].text);
        }
        break;
    case TY_PRED:
        switch (op) {
        case LF_OP_ISNAN: return vi(LF_BOOL, is_float(x[0].t) && isnan(x[0].f));
        case LF_OP_ISINF: return vi(LF_BOOL, is_float(x[0].t) && isinf(x[0].f));
        case LF_OP_SIGNBIT: return vi(LF_BOOL, is_float(x[0].t) ? signbit(x[0].f) != 0 : x[0].t != LF_BOOL && x[0].i < 0);
        default: cr_assert_fail("no predicate reference for %s", opinfo[op].text);
        }
        break;
    case TY_SELECT: {
        lf_dtype rt = promo(x[1].t, x[2].t);
        return conv(truth(x[0]) ? x[1] : x[2], rt);
    }
    }
    cr_assert_fail("unknown typing for %s", opinfo[op].text);
    return x[0];
}

/* Allowed error in ulps: exactly rounded operators must match exactly. */
static int op_ulps(lf_op op, lf_dtype t) {
    switch (op) {
    case LF_OP_ADD: case LF_OP_SUB: case LF_OP_MUL: case LF_OP_DIV: case LF_OP_MOD: case LF_OP_FMOD:
    case LF_OP_FLOORDIV: case LF_OP_NEG: case LF_OP_MIN: case LF_OP_MAX: case LF_OP_ABS: case LF_OP_SIGN:
    case LF_OP_FLOOR: case LF_OP_CEIL: case LF_OP_ROUND: case LF_OP_TRUNC: case LF_OP_SQRT:
    case LF_OP_WHERE:
        return 0;
    case LF_OP_FMA: return t == LF_F32 ? 1 : 0;
    default: return t == LF_F32 ? 8 : 4;
    }
}

/* Ordered integer keys for ulp distances. */
static int64_t key32(float x) {
    int32_t i;
    memcpy(&i, &x, sizeof i);
    return i < 0 ? -(int64_t)(i & 0x7fffffff) : (int64_t)i;
}

static int64_t key64(double x) {
    int64_t i;
    memcpy(&i, &x, sizeof i);
    return i < 0 ? -(i & INT64_MAX) : i;
}

static bool close_ulps(double got, double want, lf_dtype t, int ulps) {
    if (isnan(got) || isnan(want)) return isnan(got) && isnan(want);
    if (isinf(got) || isinf(want)) return got == want;
    if (got == want) return true;
    if (fabs(got - want) <= (t == LF_F32 ? FLT_MIN : DBL_MIN)) return true; /* subnormal noise */
    if ((got < 0) != (want < 0)) return false;
    int64_t d = t == LF_F32 ? key32((float)got) - key32((float)want) : key64(got) - key64(want);
    return (d < 0 ? -d : d) <= ulps;
}

static bool val_match(val got, val want, int ulps) {
    if (got.t != want.t) return false;
    if (!is_float(got.t)) return got.i == want.i;
    return close_ulps(got.f, want.f, got.t, ulps);
}

static const char *vstr(char *buf, size_t cap, val v) {
    if (is_float(v.t)) snprintf(buf, cap, "%s %.17g", dtn[v.t], v.f);
    else snprintf(buf, cap, "%s %" PRId64, dtn[v.t], v.i);
    return buf;
}

/* ---- raw buffers of vals ------------------------------------------------ */

static void put(void *base, int64_t k, val v) {
    switch (v.t) {
    case LF_BOOL: ((uint8_t *)base)[k] = v.i != 0; break;
    case LF_I32: ((int32_t *)base)[k] = (int32_t)v.i; break;
    case LF_I64: ((int64_t *)base)[k] = v.i; break;
    case LF_F32: ((float *)base)[k] = (float)v.f; break;
    case LF_F64: ((double *)base)[k] = v.f; break;
    default: cr_assert_fail("bad dtype");
    }
}

static val get(const void *base, lf_dtype t, int64_t k) {
    switch (t) {
    case LF_BOOL: return vi(t, ((const uint8_t *)base)[k]);
    case LF_I32: return vi(t, ((const int32_t *)base)[k]);
    case LF_I64: return vi(t, ((const int64_t *)base)[k]);
    case LF_F32: return vf(t, ((const float *)base)[k]);
    case LF_F64: return vf(t, ((const double *)base)[k]);
    default: cr_assert_fail("bad dtype");
    }
    return vi(t, 0);
}

/* A buffer of dtype t and shape filled from v (all of dtype t). */
static lf_buffer *vbuf(lf_dtype t, int ndim, const int64_t *shape, const val *v) {
    lf_buffer *b = lf_buffer_new(ctx, t, ndim, shape);
    cr_assert(b != NULL, "lf_buffer_new: %s", lf_errmsg(ctx));
    size_t bytes = lf_buffer_bytes(b);
    unsigned char *host = malloc(bytes ? bytes : 1);
    cr_assert(host != NULL);
    for (int64_t k = 0; k < lf_buffer_numel(b); k++) {
        cr_assert_eq(v[k].t, t);
        put(host, k, v[k]);
    }
    cr_assert_eq(lf_buffer_write(b, host, bytes), LF_OK, "write: %s", lf_errmsg(ctx));
    free(host);
    return b;
}

/* Reads a buffer as vals (malloc'd, numel entries). */
static val *vread(const lf_buffer *b) {
    int64_t n = lf_buffer_numel(b);
    size_t bytes = lf_buffer_bytes(b);
    unsigned char *host = malloc(bytes ? bytes : 1);
    val *out = malloc((size_t)(n ? n : 1) * sizeof *out);
    cr_assert(host != NULL && out != NULL);
    cr_assert_eq(lf_buffer_read(b, host, bytes), LF_OK);
    for (int64_t k = 0; k < n; k++) out[k] = get(host, lf_buffer_dtype(b), k);
    free(host);
    return out;
}

/* ---- small helpers over the fixture graph ------------------------------- */

static lf_node *in1(lf_dtype t, int64_t n, const double *v) {
    lf_node *x = lf_input(g, tu_buf(ctx, t, 1, &n, v));
    cr_assert(x != NULL, "lf_input: %s", lf_errmsg(ctx));
    return x;
}

static lf_node *inS(lf_dtype t, int ndim, const int64_t *shape, const double *v) {
    lf_node *x = lf_input(g, tu_buf(ctx, t, ndim, shape, v));
    cr_assert(x != NULL, "lf_input: %s", lf_errmsg(ctx));
    return x;
}

static lf_fn *parse(const char *src) {
    lf_fn *f = lf_fn_parse(g, src);
    cr_assert(f != NULL, "lf_fn_parse(\"%s\"): %s", src, lf_errmsg(ctx));
    return f;
}

static lf_node *map(const char *src, lf_node *x) {
    lf_node *y = lf_map(g, parse(src), x);
    cr_assert(y != NULL, "lf_map(\"%s\"): %s", src, lf_errmsg(ctx));
    return y;
}

static lf_node *zip2(const char *src, lf_node *a, lf_node *b) {
    lf_node *y = lf_zipwith(g, parse(src), 2, (lf_node *[]){a, b});
    cr_assert(y != NULL, "lf_zipwith(\"%s\"): %s", src, lf_errmsg(ctx));
    return y;
}

/* Asserts n has dtype t and count elements, evaluates it, and compares with
 * want within rtol (exactly for rtol 0). */
static void chk_tol(const char *what, lf_node *n, lf_dtype t, int64_t count, const double *want,
                    double rtol) {
    cr_assert(n != NULL, "%s: node is NULL: %s", what, lf_errmsg(ctx));
    cr_assert_eq(lf_node_dtype(n), t, "%s: dtype %s, want %s", what,
                 lf_dtype_name(lf_node_dtype(n)), dtn[t]);
    cr_assert_eq(lf_node_numel(n), count, "%s: numel %lld, want %lld", what,
                 (long long)lf_node_numel(n), (long long)count);
    lf_buffer *b = tu_eval1(ctx, g, n);
    tu_expect(what, b, want, count, rtol, 0.0);
    lf_buffer_free(b);
}

static void chk(const char *what, lf_node *n, lf_dtype t, int64_t count, const double *want) {
    chk_tol(what, n, t, count, want, 0.0);
}

/* Evaluates n and returns its raw elements as vals (malloc'd). */
static val *eval_vals(lf_node *n) {
    lf_buffer *b = tu_eval1(ctx, g, n);
    val *v = vread(b);
    lf_buffer_free(b);
    return v;
}

static void chk_shape(lf_node *n, int ndim, const int64_t *shape) {
    cr_assert(n != NULL, "node is NULL: %s", lf_errmsg(ctx));
    cr_assert_eq(lf_node_ndim(n), ndim, "ndim %d, want %d", lf_node_ndim(n), ndim);
    for (int d = 0; d < ndim; d++)
        cr_assert_eq(lf_node_dim(n, d), shape[d], "dim %d is %lld, want %lld", d,
                     (long long)lf_node_dim(n, d), (long long)shape[d]);
}

/* ---- dtypes -------------------------------------------------------------- */

Test(eval, dtype_promote_table) {
    /* rows a, columns b, in the order bool i32 i64 f32 f64 */
    static const lf_dtype want[5][5] = {
        {LF_BOOL, LF_I32, LF_I64, LF_F32, LF_F64},
        {LF_I32, LF_I32, LF_I64, LF_F64, LF_F64},
        {LF_I64, LF_I64, LF_I64, LF_F64, LF_F64},
        {LF_F32, LF_F64, LF_F64, LF_F32, LF_F64},
        {LF_F64, LF_F64, LF_F64, LF_F64, LF_F64},
    };
    for (int a = 0; a < 5; a++)
        for (int b = 0; b < 5; b++)
            cr_expect_eq(lf_dtype_promote((lf_dtype)a, (lf_dtype)b), want[a][b],
                         "promote(%s, %s) = %s, want %s", dtn[a], dtn[b],
                         lf_dtype_name(lf_dtype_promote((lf_dtype)a, (lf_dtype)b)),
                         dtn[want[a][b]]);
}

Test(eval, dtype_size_and_name) {
    static const size_t sizes[5] = {1, 4, 8, 4, 8};
    for (int t = 0; t < 5; t++) {
        cr_expect_eq(lf_dtype_size((lf_dtype)t), sizes[t], "size of %s", dtn[t]);
        cr_expect_str_eq(lf_dtype_name((lf_dtype)t), dtn[t]);
    }
    cr_expect_eq(lf_dtype_size(LF_NDTYPES), 0);
    cr_expect_str_eq(lf_dtype_name(LF_NDTYPES), "?");
    cr_expect_str_eq(lf_dtype_name((lf_dtype)-1), "?");
}

Test(eval, op_and_reduce_names) {
    cr_expect_str_eq(lf_op_name(LF_OP_ADD), "+");
    cr_expect_str_eq(lf_op_name(LF_OP_POW), "**");
    cr_expect_str_eq(lf_op_name(LF_OP_AND), "and");
    cr_expect_str_eq(lf_op_name(LF_OP_SQRT), "sqrt");
    cr_expect_str_eq(lf_op_name(LF_OP_WHERE), "where");
    for (int op = 0; op < LF_NOPS; op++) cr_expect_str_eq(lf_op_name((lf_op)op), opinfo[op].text);
    cr_expect_str_eq(lf_reduce_op_name(LF_RED_SUM), "sum");
    cr_expect_str_eq(lf_reduce_op_name(LF_RED_ARGMAX), "argmax");
}

/* Dtypes of nodes built from non-weak operands. */
Test(eval, node_dtype_promotion) {
    int64_t n = 2;
    lf_node *b = in1(LF_BOOL, n, NULL), *i = in1(LF_I32, n, NULL), *l = in1(LF_I64, n, NULL);
    lf_node *f = in1(LF_F32, n, NULL), *d = in1(LF_F64, n, NULL);
    struct { lf_node *y; lf_dtype t; const char *what; } cases[] = {
        {lf_add(g, i, f), LF_F64, "i32+f32"},
        {lf_add(g, f, i), LF_F64, "f32+i32"},
        {lf_add(g, l, f), LF_F64, "i64+f32"},
        {lf_add(g, i, l), LF_I64, "i32+i64"},
        {lf_add(g, b, b), LF_I32, "bool+bool"},
        {lf_sub(g, b, l), LF_I64, "bool-i64"},
        {lf_mul(g, b, f), LF_F32, "bool*f32"},
        {lf_mul(g, f, d), LF_F64, "f32*f64"},
        {lf_mul(g, f, f), LF_F32, "f32*f32"},
        {lf_mul(g, f, lf_const(g, LF_F64, 0.5)), LF_F64, "f32*const f64"},
        {lf_mul(g, f, lf_const(g, LF_F32, 0.5)), LF_F32, "f32*const f32"},
        {lf_div(g, i, i), LF_F64, "i32/i32"},
        {lf_div(g, b, b), LF_F64, "bool/bool"},
        {lf_div(g, f, f), LF_F32, "f32/f32"},
        {lf_div(g, f, b), LF_F32, "f32/bool"},
        {lf_div(g, l, f), LF_F64, "i64/f32"},
        {lf_mod(g, i, i), LF_I32, "i32%i32"},
        {lf_mod(g, b, b), LF_I32, "bool%bool"},
        {lf_pow(g, i, l), LF_I64, "i32**i64"},
        {lf_pow(g, f, f), LF_F32, "f32**f32"},
        {lf_lt(g, i, d), LF_BOOL, "i32<f64"},
        {lf_eq(g, f, f), LF_BOOL, "f32==f32"},
        {lf_logical_and(g, d, i), LF_BOOL, "f64 and i32"},
        {lf_logical_not(g, f), LF_BOOL, "not f32"},
        {lf_neg(g, b), LF_I32, "-bool"},
        {lf_neg(g, f), LF_F32, "-f32"},
        {lf_abs(g, b), LF_BOOL, "abs(bool)"},
        {lf_sign(g, i), LF_I32, "sign(i32)"},
        {lf_floor(g, l), LF_I64, "floor(i64)"},
        {lf_round(g, f), LF_F32, "round(f32)"},
        {lf_minimum(g, b, b), LF_BOOL, "min(bool,bool)"},
        {lf_minimum(g, b, i), LF_I32, "min(bool,i32)"},
        {lf_maximum(g, i, f), LF_F64, "max(i32,f32)"},
        {lf_sqrt(g, i), LF_F64, "sqrt(i32)"},
        {lf_sqrt(g, b), LF_F64, "sqrt(bool)"},
        {lf_sqrt(g, f), LF_F32, "sqrt(f32)"},
        {lf_exp(g, l), LF_F64, "exp(i64)"},
        {lf_sigmoid(g, f), LF_F32, "sigmoid(f32)"},
        {lf_atan2(g, f, f), LF_F32, "atan2(f32,f32)"},
        {lf_atan2(g, f, i), LF_F64, "atan2(f32,i32)"},
        {lf_hypot(g, f, b), LF_F32, "hypot(f32,bool)"},
        {lf_hypot(g, i, i), LF_F64, "hypot(i32,i32)"},
        {lf_fma(g, f, f, f), LF_F32, "fma(f32,f32,f32)"},
        {lf_fma(g, i, i, i), LF_F64, "fma(i32,i32,i32)"},
        {lf_fma(g, f, f, d), LF_F64, "fma(f32,f32,f64)"},
        {lf_isnan(g, f), LF_BOOL, "isnan(f32)"},
        {lf_isinf(g, i), LF_BOOL, "isinf(i32)"},
        {lf_select(g, d, i, f), LF_F64, "where(f64, i32, f32)"},
        {lf_select(g, b, b, b), LF_BOOL, "where(bool, bool, bool)"},
        {lf_select(g, b, f, b), LF_F32, "where(bool, f32, bool)"},
        {lf_apply(g, LF_OP_WHERE, i, l, i), LF_I64, "apply where(i32, i64, i32)"},
        {lf_cast(g, d, LF_I32), LF_I32, "cast f64->i32"},
        {lf_cast(g, i, LF_BOOL), LF_BOOL, "cast i32->bool"},
        {lf_reduce(g, LF_RED_SUM, i, 0, NULL, false), LF_I64, "sum(i32)"},
        {lf_reduce(g, LF_RED_SUM, b, 0, NULL, false), LF_I64, "sum(bool)"},
        {lf_reduce(g, LF_RED_MEAN, i, 0, NULL, false), LF_F64, "mean(i32)"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        cr_assert(cases[k].y != NULL, "%s: NULL: %s", cases[k].what, lf_errmsg(ctx));
        cr_expect_eq(lf_node_dtype(cases[k].y), cases[k].t, "%s: dtype %s, want %s",
                     cases[k].what, lf_dtype_name(lf_node_dtype(cases[k].y)), dtn[cases[k].t]);
    }
    cr_assert_eq(lf_graph_status(g), LF_OK, "%s", lf_graph_errmsg(g));
}

/* Weak literals in expression strings and lf_fn_const. */
Test(eval, weak_literals) {
    double v3[] = {1, 3, 0};
    lf_node *f = in1(LF_F32, 3, v3), *d = in1(LF_F64, 3, v3), *i = in1(LF_I32, 3, v3);
    lf_node *l = in1(LF_I64, 3, v3), *b = in1(LF_BOOL, 3, v3);

    chk("f32*0.5", map("(x) -> x*0.5", f), LF_F32, 3, (double[]){0.5, 1.5, 0});
    chk("f64*0.5", map("(x) -> x*0.5", d), LF_F64, 3, (double[]){0.5, 1.5, 0});
    chk("i32*0.5", map("(x) -> x*0.5", i), LF_F64, 3, (double[]){0.5, 1.5, 0});
    chk("i64*0.5", map("(x) -> x*0.5", l), LF_F64, 3, (double[]){0.5, 1.5, 0});
    chk("bool*0.5", map("(x) -> x*0.5", b), LF_F64, 3, (double[]){0.5, 0.5, 0});
    chk("i32*2", map("(x) -> x*2", i), LF_I32, 3, (double[]){2, 6, 0});
    chk("i64*2", map("(x) -> x*2", l), LF_I64, 3, (double[]){2, 6, 0});
    chk("bool*2", map("(x) -> x*2", b), LF_I64, 3, (double[]){2, 2, 0});
    chk("f32*2", map("(x) -> x*2", f), LF_F32, 3, (double[]){2, 6, 0});
    chk("i64*2.0", map("(x) -> x*2.0", l), LF_F64, 3, (double[]){2, 6, 0});
    chk("bool+2.5", map("(x) -> x + 2.5", b), LF_F64, 3, (double[]){3.5, 3.5, 2.5});
    chk("i32/2", map("(x) -> x/2", i), LF_F64, 3, (double[]){0.5, 1.5, 0});
    chk("f32/2", map("(x) -> x/2", f), LF_F32, 3, (double[]){0.5, 1.5, 0});
    chk("f32**2", map("(x) -> x**2", f), LF_F32, 3, (double[]){1, 9, 0});
    chk("i32**2", map("(x) -> x**2", i), LF_I32, 3, (double[]){1, 9, 0});
    chk("i32 > 0.5", map("(x) -> x > 0.5", i), LF_BOOL, 3, (double[]){1, 1, 0});
    chk("min(f32, 0.5)", map("(x) -> min(x, 0.5)", f), LF_F32, 3, (double[]){0.5, 0.5, 0});
    chk("sqrt(i32)", map("(x) -> sqrt(x)", i), LF_F64, 3, (double[]){1, sqrt(3.0), 0});
    chk("-bool", map("(x) -> -x", b), LF_I32, 3, (double[]){-1, -1, 0});
    chk("f32(i64)*2", map("(x) -> f32(x) * 2", l), LF_F32, 3, (double[]){2, 6, 0});
    chk("const 2", map("(x) -> 2", f), LF_I64, 3, (double[]){2, 2, 2});
    chk("const 2.5", map("(x) -> 2.5", i), LF_F64, 3, (double[]){2.5, 2.5, 2.5});
    chk("const 2*3", map("(x) -> 2*3", b), LF_I64, 3, (double[]){6, 6, 6});
    chk("i32*f32", zip2("(x, y) -> x*y + 1", i, f), LF_F64, 3, (double[]){2, 10, 1});
    /* 0.1 as f32 times an f32 stays in f32: the literal is rounded to float */
    chk("f32*0.1", map("(x) -> x*0.1", f), LF_F32, 3,
        (double[]){(float)0.1, (float)(3.0f * (float)0.1), 0});

    /* builder: a weak float literal keeps f32, a weak int literal keeps i32 */
    lf_fn *fb = lf_fn_new(g, 1);
    cr_assert(fb != NULL, "%s", lf_errmsg(ctx));
    int e = lf_fn_op(fb, LF_OP_MUL, lf_fn_param(fb, 0), lf_fn_const(fb, 0.5), -1);
    cr_assert(e >= 0, "%s", lf_errmsg(ctx));
    cr_assert_eq(lf_fn_set_result(fb, e), LF_OK);
    cr_assert_eq(lf_fn_arity(fb), 1);
    chk("builder f32*0.5", lf_map(g, fb, f), LF_F32, 3, (double[]){0.5, 1.5, 0});
    chk("builder i32*0.5", lf_map(g, fb, i), LF_F64, 3, (double[]){0.5, 1.5, 0});
    lf_fn *fi = lf_fn_new(g, 1);
    e = lf_fn_op(fi, LF_OP_ADD, lf_fn_param(fi, 0), lf_fn_const_int(fi, 3), -1);
    cr_assert_eq(lf_fn_set_result(fi, e), LF_OK);
    chk("builder i32+3", lf_map(g, fi, i), LF_I32, 3, (double[]){4, 6, 3});
    chk("builder f32+3", lf_map(g, fi, f), LF_F32, 3, (double[]){4, 6, 3});
    chk("builder bool+3", lf_map(g, fi, b), LF_I64, 3, (double[]){4, 4, 3});
    lf_fn *fc = lf_fn_new(g, 1);
    e = lf_fn_cast(fc, LF_I32, lf_fn_op(fc, LF_OP_MUL, lf_fn_param(fc, 0), lf_fn_const(fc, 2.5), -1));
    cr_assert_eq(lf_fn_set_result(fc, e), LF_OK);
    chk("builder i32(x*2.5)", lf_map(g, fc, f), LF_I32, 3, (double[]){2, 7, 0});
}

/* ---- every operator on every dtype combination --------------------------- */

/* The value set of one dtype; small: the 6-value set for ternary sweeps. */
static int vals_for(lf_dtype t, bool small, val *out) {
    static const double fv[] = {0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 1.5, 2.5, -2.5, 3.0,
                                -7.0, 0.1, 100.0, 0.0 /* big */, INFINITY, -INFINITY, NAN};
    static const double fsmall[] = {0.0, -1.0, 2.5, 0.1, INFINITY, NAN};
    static const int64_t i32v[] = {0, 1, -1, 2, 3, -3, 7, -7, 100, 46341, INT32_MAX, INT32_MIN};
    static const int64_t i64v[] = {0, 1, -1, 2, 3, -3, 7, -7, 100, 3037000500LL, INT64_MAX,
                                   INT64_MIN};
    static const int ismall[] = {0, 1, 7, 9, 10, 11};
    int n = 0;
    switch (t) {
    case LF_BOOL:
        out[n++] = vi(t, 0);
        out[n++] = vi(t, 1);
        break;
    case LF_I32: case LF_I64: {
        const int64_t *src = t == LF_I32 ? i32v : i64v;
        if (small)
            for (int k = 0; k < 6; k++) out[n++] = vi(t, src[ismall[k]]);
        else
            for (int k = 0; k < 12; k++) out[n++] = vi(t, src[k]);
        break;
    }
    case LF_F32: case LF_F64:
        if (small) {
            for (int k = 0; k < 6; k++) out[n++] = vf(t, fsmall[k]);
        } else {
            for (int k = 0; k < 17; k++) out[n++] = vf(t, fv[k]);
            out[13] = vf(t, t == LF_F32 ? 1e30 : 1e300);
        }
        break;
    default: cr_assert_fail("bad dtype");
    }
    return n;
}

/* Operand tuples the sweep leaves to dedicated tests. */
static bool skip_tuple(lf_op op, const val *x) {
    if (op == LF_OP_POW) {
        lf_dtype p = promo(x[0].t, x[1].t);
        if (!is_float(p) && x[1].i > 100) return true; /* huge exponents: own test */
    }
    if (op == LF_OP_MOD) {
        if (is_float(x[1].t) && isinf(x[1].f)) return true; /* x % inf: not specified */
    }
    return false;
}

/* Applies op to every tuple of values of every combination of dtypes. */

/* One test per arity (few processes: Criterion forks one per test, which
 * dominates a valgrind run); every mismatch is reported, at most 3 per op and
 * dtype combination, and the sweep goes on to the next one. */
/* Every operator of arity ar on dtype combination combo (operand k of dtype
 * combo / 5^k % 5) over every tuple of the operands' special values, all
 * evaluated together: one lf_eval with an output per operator, so the
 * compiled backends make a few kernels a combination (siblings over the same
 * inputs merge) instead of one per operator, each a compile. Tuples the
 * oracle leaves unspecified (skip_tuple) are computed but not compared. */
static void sweep_combo(int ar, int combo) {
    lf_dtype ts[3] = {(lf_dtype)(combo % 5), (lf_dtype)(combo / 5 % 5), (lf_dtype)(combo / 25)};
    val lists[3][17];
    int lens[3] = {1, 1, 1};
    int64_t n = 1;
    for (int k = 0; k < ar; k++) {
        lens[k] = vals_for(ts[k], ar == 3, lists[k]);
        n *= lens[k];
    }
    val *args[3];
    for (int k = 0; k < 3; k++) {
        args[k] = calloc((size_t)n, sizeof(val));
        cr_assert(args[k] != NULL);
    }
    for (int64_t idx = 0; idx < n; idx++) {
        int64_t r = idx;
        for (int k = 0; k < 3; k++) {
            args[k][idx] = k < ar ? lists[k][r % lens[k]] : vi(LF_BOOL, 0);
            if (k < ar) r /= lens[k];
        }
    }
    lf_graph *gg = lf_graph_new(ctx);
    cr_assert(gg != NULL);
    lf_node *in[3] = {NULL, NULL, NULL};
    lf_buffer *bufs[3] = {NULL, NULL, NULL};
    for (int k = 0; k < ar; k++) {
        bufs[k] = vbuf(ts[k], 1, &n, args[k]);
        in[k] = lf_input(gg, bufs[k]);
    }
    lf_node *ys[LF_NOPS];
    lf_op ops[LF_NOPS];
    lf_buffer *outs[LF_NOPS];
    int ny = 0;
    char names[LF_NOPS][64];
    for (int op = 0; op < LF_NOPS; op++) {
        if (opinfo[op].arity != ar) continue;
        char *combo_name = names[ny];
        snprintf(combo_name, 64, "%s(%s%s%s%s%s)", opinfo[op].text, dtn[ts[0]], ar > 1 ? ", " : "",
                 ar > 1 ? dtn[ts[1]] : "", ar > 2 ? ", " : "", ar > 2 ? dtn[ts[2]] : "");
        bool refused = false; /* a float operand of & | ^ ~ << >> */
        for (int k = 0; k < ar; k++)
            refused |= (opinfo[op].typing == TY_BITS || opinfo[op].typing == TY_SHIFT) && is_float(ts[k]);
        if (refused) { /* in a graph of its own: the error is sticky */
            lf_graph *gr = lf_graph_new(ctx);
            lf_node *rin[3] = {NULL, NULL, NULL};
            for (int k = 0; k < ar; k++) rin[k] = lf_input(gr, bufs[k]);
            lf_node *y = lf_apply(gr, (lf_op)op, rin[0], rin[1], rin[2]);
            cr_assert(y == NULL, "%s: built, want a typing error", combo_name);
            cr_assert_eq(lf_graph_status(gr), LF_ERR_DTYPE, "%s: %s", combo_name, lf_graph_errmsg(gr));
            cr_assert(strstr(lf_graph_errmsg(gr), "must be") != NULL, "%s: %s", combo_name, lf_graph_errmsg(gr));
            lf_graph_free(gr);
            continue;
        }
        lf_node *y = lf_apply(gg, (lf_op)op, in[0], in[1], in[2]);
        cr_assert(y != NULL, "%s: lf_apply failed: %s", combo_name, lf_errmsg(ctx));
        val first[3] = {args[0][0], args[1][0], args[2][0]};
        lf_dtype want_t = ref_apply((lf_op)op, first).t;
        cr_assert_eq(lf_node_dtype(y), want_t, "%s: dtype %s, want %s", combo_name,
                     lf_dtype_name(lf_node_dtype(y)), dtn[want_t]);
        ys[ny] = y;
        ops[ny] = (lf_op)op;
        outs[ny] = lf_buffer_new_like(ctx, y);
        cr_assert(outs[ny] != NULL);
        ny++;
    }
    cr_assert_eq(lf_eval(gg, ny, ys, outs), LF_OK, "%s...: eval: %s", names[0], lf_errmsg(ctx));
    for (int q = 0; q < ny; q++) {
        lf_op op = ops[q];
        val *got = vread(outs[q]);
        int reported = 0;
        for (int64_t k = 0; k < n && reported < 3; k++) {
            val tup[3] = {args[0][k], args[1][k], args[2][k]};
            if (skip_tuple(op, tup)) continue;
            val want = ref_apply(op, tup);
            if (!val_match(got[k], want, op_ulps(op, want.t))) {
                char s0[64], s1[64], s2[64], sg[64], sw[64];
                cr_expect_fail("%s: operands (%s%s%s%s%s) gave %s, want %s", names[q],
                               vstr(s0, 64, tup[0]), ar > 1 ? ", " : "",
                               ar > 1 ? vstr(s1, 64, tup[1]) : "", ar > 2 ? ", " : "",
                               ar > 2 ? vstr(s2, 64, tup[2]) : "", vstr(sg, 64, got[k]),
                               vstr(sw, 64, want));
                reported++;
            }
        }
        free(got);
        lf_buffer_free(outs[q]);
    }
    lf_graph_free(gg);
    for (int k = 0; k < 3; k++) {
        lf_buffer_free(bufs[k]);
        free(args[k]);
    }
}

static void sweep_arity(int arity) {
    int n = 0;
    for (int op = 0; op < LF_NOPS; op++) n += opinfo[op].arity == arity;
    cr_assert(n > 0, "no operator of arity %d", arity);
    int ncombo = arity == 1 ? 5 : arity == 2 ? 25 : 125;
    for (int combo = 0; combo < ncombo; combo++) sweep_combo(arity, combo);
}

Test(eval, every_unary_op) { sweep_arity(1); }
Test(eval, every_binary_op) { sweep_arity(2); }
Test(eval, every_ternary_op) { sweep_arity(3); }

/* The same model through fns: lf_map / lf_zipwith of parsed one-op fns. */
Test(eval, fns_on_every_dtype) {
    static const struct { const char *src; lf_op op; } bin[] = {
        {"(a, b) -> a + b", LF_OP_ADD},  {"(a, b) -> a - b", LF_OP_SUB},
        {"(a, b) -> a * b", LF_OP_MUL},  {"(a, b) -> a / b", LF_OP_DIV},
        {"(a, b) -> a % b", LF_OP_MOD},  {"(a, b) -> a < b", LF_OP_LT},
        {"(a, b) -> a == b", LF_OP_EQ},  {"(a, b) -> a and b", LF_OP_AND},
        {"(a, b) -> min(a, b)", LF_OP_MIN}, {"(a, b) -> max(a, b)", LF_OP_MAX},
        {"(a, b) -> hypot(a, b)", LF_OP_HYPOT},
        /* NumPy's and numexpr's spellings (issue 14) */
        {"(a, b) -> fmod(a, b)", LF_OP_FMOD}, {"(a, b) -> power(a, b)", LF_OP_POW},
        {"(a, b) -> minimum(a, b)", LF_OP_MIN}, {"(a, b) -> maximum(a, b)", LF_OP_MAX},
        {"(a, b) -> arctan2(a, b)", LF_OP_ATAN2},
    };
    static const struct { const char *src; lf_op op; } un[] = {
        {"(a) -> -a", LF_OP_NEG},       {"(a) -> exp(a)", LF_OP_EXP},
        {"(a) -> abs(a)", LF_OP_ABS},   {"(a) -> not a", LF_OP_NOT},
        {"(a) -> round(a)", LF_OP_ROUND}, {"(a) -> isnan(a)", LF_OP_ISNAN},
        {"(a) -> sigmoid(a)", LF_OP_SIGMOID},
        {"(a) -> absolute(a)", LF_OP_ABS}, {"(a) -> arcsin(a)", LF_OP_ASIN},
        {"(a) -> arccos(a)", LF_OP_ACOS}, {"(a) -> arctan(a)", LF_OP_ATAN},
        {"(a) -> arcsinh(a)", LF_OP_ASINH}, {"(a) -> arccosh(a)", LF_OP_ACOSH},
        {"(a) -> arctanh(a)", LF_OP_ATANH}, {"(a) -> asinh(a)", LF_OP_ASINH},
        {"(a) -> acosh(a)", LF_OP_ACOSH}, {"(a) -> atanh(a)", LF_OP_ATANH},
    };
    for (int ta = 0; ta < 5; ta++) {
        val la[17];
        int na = vals_for((lf_dtype)ta, true, la);
        for (size_t u = 0; u < sizeof un / sizeof un[0]; u++) {
            int64_t n = na;
            lf_node *y = map(un[u].src, lf_input(g, vbuf((lf_dtype)ta, 1, &n, la)));
            lf_dtype wt = ref_apply(un[u].op, la).t;
            cr_assert_eq(lf_node_dtype(y), wt, "%s on %s: dtype %s, want %s", un[u].src, dtn[ta],
                         lf_dtype_name(lf_node_dtype(y)), dtn[wt]);
            val *got = eval_vals(y);
            for (int k = 0; k < na; k++) {
                val want = ref_apply(un[u].op, &la[k]);
                char s0[64], sg[64], sw[64];
                cr_assert(val_match(got[k], want, op_ulps(un[u].op, want.t)),
                          "%s on %s: gave %s, want %s", un[u].src, vstr(s0, 64, la[k]),
                          vstr(sg, 64, got[k]), vstr(sw, 64, want));
            }
            free(got);
        }
        for (int tb = 0; tb < 5; tb++) {
            val lb[17];
            int nb = vals_for((lf_dtype)tb, true, lb);
            int64_t n = (int64_t)na * nb;
            val *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
            for (int p = 0; p < na; p++)
                for (int q = 0; q < nb; q++) {
                    a[p * nb + q] = la[p];
                    b[p * nb + q] = lb[q];
                }
            lf_node *xa = lf_input(g, vbuf((lf_dtype)ta, 1, &n, a));
            lf_node *xb = lf_input(g, vbuf((lf_dtype)tb, 1, &n, b));
            for (size_t u = 0; u < sizeof bin / sizeof bin[0]; u++) {
                lf_node *y = zip2(bin[u].src, xa, xb);
                val t0[2] = {a[0], b[0]};
                lf_dtype wt = ref_apply(bin[u].op, t0).t;
                cr_assert_eq(lf_node_dtype(y), wt, "%s on %s, %s: dtype %s, want %s", bin[u].src,
                             dtn[ta], dtn[tb], lf_dtype_name(lf_node_dtype(y)), dtn[wt]);
                val *got = eval_vals(y);
                for (int64_t k = 0; k < n; k++) {
                    val tup[2] = {a[k], b[k]};
                    val want = ref_apply(bin[u].op, tup);
                    char s0[64], s1[64], sg[64], sw[64];
                    cr_assert(val_match(got[k], want, op_ulps(bin[u].op, want.t)),
                              "%s on (%s, %s): gave %s, want %s", bin[u].src, vstr(s0, 64, a[k]),
                              vstr(s1, 64, b[k]), vstr(sg, 64, got[k]), vstr(sw, 64, want));
                }
                free(got);
            }
            free(a);
            free(b);
        }
    }
}

/* Every cast, through lf_cast and through casts in parsed fns. */
Test(eval, cast_sweep) {
    static const char *const castfn[] = {"(x) -> bool(x)", "(x) -> i32(x)", "(x) -> i64(x)",
                                         "(x) -> f32(x)", "(x) -> f64(x)"};
    for (int from = 0; from < 5; from++) {
        val v[17];
        int n = vals_for((lf_dtype)from, false, v);
        int64_t nn = n;
        lf_node *x = lf_input(g, vbuf((lf_dtype)from, 1, &nn, v));
        for (int to = 0; to < 5; to++) {
            for (int via = 0; via < 2; via++) {
                lf_node *y = via ? map(castfn[to], x) : lf_cast(g, x, (lf_dtype)to);
                cr_assert(y != NULL, "cast %s->%s: %s", dtn[from], dtn[to], lf_errmsg(ctx));
                cr_assert_eq(lf_node_dtype(y), (lf_dtype)to);
                val *got = eval_vals(y);
                for (int k = 0; k < n; k++) {
                    /* narrowing i64 -> i32 out of range is left unspecified here */
                    if (from == LF_I64 && to == LF_I32 && (v[k].i > INT32_MAX || v[k].i < INT32_MIN))
                        continue;
                    val want = conv(v[k], (lf_dtype)to);
                    char s0[64], sg[64], sw[64];
                    cr_assert(val_match(got[k], want, 0), "%s %s -> %s: gave %s, want %s",
                              via ? "parsed cast" : "lf_cast", vstr(s0, 64, v[k]), dtn[to],
                              vstr(sg, 64, got[k]), vstr(sw, 64, want));
                }
                free(got);
            }
        }
    }
}

/* ---- hand-computed spot checks ------------------------------------------- */

Test(eval, integer_wraparound) {
    chk("INT32_MAX+1", lf_add(g, lf_const(g, LF_I32, INT32_MAX), lf_const(g, LF_I32, 1)), LF_I32, 1,
        (double[]){INT32_MIN});
    chk("INT32_MIN-1", lf_sub(g, lf_const(g, LF_I32, INT32_MIN), lf_const(g, LF_I32, 1)), LF_I32,
        1, (double[]){INT32_MAX});
    chk("65536*65536 i32", lf_mul(g, lf_const(g, LF_I32, 65536), lf_const(g, LF_I32, 65536)),
        LF_I32, 1, (double[]){0});
    chk("46341*46341 i32", lf_mul(g, lf_const(g, LF_I32, 46341), lf_const(g, LF_I32, 46341)),
        LF_I32, 1, (double[]){46341.0 * 46341.0 - 4294967296.0});
    chk("-INT32_MIN", lf_neg(g, lf_const(g, LF_I32, INT32_MIN)), LF_I32, 1, (double[]){INT32_MIN});
    chk("abs(INT32_MIN)", lf_abs(g, lf_const(g, LF_I32, INT32_MIN)), LF_I32, 1,
        (double[]){INT32_MIN});
    chk("parsed x+1 on INT32_MAX", map("(x) -> x + 1", in1(LF_I32, 1, (double[]){INT32_MAX})),
        LF_I32, 1, (double[]){INT32_MIN});
    /* bool + bool is i32 arithmetic: true + true == 2 */
    chk("true+true", lf_add(g, lf_const(g, LF_BOOL, 1), lf_const(g, LF_BOOL, 1)), LF_I32, 1,
        (double[]){2});

    /* i64: read raw, doubles cannot hold these */
    int64_t big[3] = {INT64_MAX, INT64_MIN, INT64_MIN};
    int64_t one[3] = {1, -1, 0};
    int64_t n = 3;
    lf_buffer *bb = lf_buffer_new(ctx, LF_I64, 1, &n), *ob = lf_buffer_new(ctx, LF_I64, 1, &n);
    cr_assert_eq(lf_buffer_write(bb, big, sizeof big), LF_OK);
    cr_assert_eq(lf_buffer_write(ob, one, sizeof one), LF_OK);
    lf_node *x = lf_input(g, bb), *o = lf_input(g, ob);
    val *s = eval_vals(lf_add(g, x, o));
    cr_expect_eq(s[0].i, INT64_MIN);
    cr_expect_eq(s[1].i, INT64_MAX);
    cr_expect_eq(s[2].i, INT64_MIN);
    free(s);
    val *ng = eval_vals(lf_neg(g, x));
    cr_expect_eq(ng[0].i, -INT64_MAX);
    cr_expect_eq(ng[1].i, INT64_MIN);
    free(ng);
    val *m = eval_vals(lf_mul(g, lf_const(g, LF_I64, 4294967296.0), lf_const(g, LF_I64, 4294967296.0)));
    cr_expect_eq(m[0].i, 0);
    free(m);
}

Test(eval, integer_mod) {
    double a[] = {-7, 7, 7, -7, 5, 0, 6, -6, INT32_MIN, INT32_MAX};
    double b[] = {3, -3, 3, -3, 0, 0, 3, 4, -1, -1};
    double want[] = {2, -2, 1, -1, 0, 0, 0, 2, 0, 0};
    for (int t = LF_I32; t <= LF_I64; t++) {
        chk("i % i", lf_mod(g, in1((lf_dtype)t, 10, a), in1((lf_dtype)t, 10, b)), (lf_dtype)t, 10,
            want);
        chk("parsed %", zip2("(a, b) -> a % b", in1((lf_dtype)t, 10, a), in1((lf_dtype)t, 10, b)),
            (lf_dtype)t, 10, want);
    }
    /* INT64_MIN % -1 must be 0, not a trap */
    val *r = eval_vals(lf_mod(g, lf_const(g, LF_I64, -9223372036854775808.0), lf_const(g, LF_I64, -1)));
    cr_expect_eq(r[0].i, 0);
    free(r);
    /* bool % bool is i32 */
    chk("bool % bool",
        lf_mod(g, in1(LF_BOOL, 4, (double[]){1, 1, 0, 0}), in1(LF_BOOL, 4, (double[]){1, 0, 1, 0})),
        LF_I32, 4, (double[]){0, 0, 0, 0});
    /* weak literal: x % 3 */
    chk("x % 3", map("(x) -> x % 3", in1(LF_I32, 4, (double[]){-7, -1, 5, 0})), LF_I32, 4,
        (double[]){2, 2, 2, 0});
    chk("x % -3", map("(x) -> x % -3", in1(LF_I64, 4, (double[]){-7, -1, 5, 0})), LF_I64, 4,
        (double[]){-1, -1, -1, 0});
}

/* fmod is C's (the dividend's sign), % is Python's (the divisor's); the
 * NumPy / numexpr spellings are the same operators (issue 14). */
Test(eval, fmod_and_numpy_spellings) {
    double a[] = {-7, 7, 7.5, -7.5, 5, -0.0, 0.0, 1e-3, NAN, INFINITY, 3};
    double b[] = {3, -3, 2, 2, 0, 1, -1, -1, 2, 2, INFINITY};
    double want[] = {-1, 1, 1.5, -1.5, NAN, -0.0, 0.0, 1e-3, NAN, NAN, 3};
    for (int t = LF_F32; t <= LF_F64; t++) {
        double w[11];
        for (int i = 0; i < 11; i++) w[i] = t == LF_F32 ? (double)(float)want[i] : want[i];
        lf_node *x = in1((lf_dtype)t, 11, a), *y = in1((lf_dtype)t, 11, b);
        chk("fmod", lf_fmod(g, x, y), (lf_dtype)t, 11, w);
        lf_node *p = zip2("(a, b) -> fmod(a, b)", x, y);
        chk("parsed fmod", p, (lf_dtype)t, 11, w);
        val *r = eval_vals(p);
        cr_expect(signbit(r[5].f) && !signbit(r[6].f), "fmod(-0.0, 1) keeps the dividend's sign");
        free(r);
    }
    /* integers: C's %, fmod(x, 0) == fmod(x, -1) == 0 (NumPy), no trap at MIN */
    chk("i32 fmod", zip2("(a, b) -> fmod(a, b)", in1(LF_I32, 6, (double[]){-7, 7, -7, 5, -2147483648.0, 9}),
                         in1(LF_I32, 6, (double[]){3, -3, -3, 0, -1, 4})),
        LF_I32, 6, (double[]){-1, 1, -1, 0, 0, 1});
    val *r = eval_vals(lf_fmod(g, lf_const(g, LF_I64, -9223372036854775808.0), lf_const(g, LF_I64, -1)));
    cr_expect_eq(r[0].i, 0);
    free(r);
    chk("bool fmod is i32", lf_fmod(g, in1(LF_BOOL, 2, (double[]){1, 1}), in1(LF_BOOL, 2, (double[]){1, 0})),
        LF_I32, 2, (double[]){0, 0});
    chk("x fmod 3 (weak literal)", map("(x) -> fmod(x, 3)", in1(LF_I64, 4, (double[]){-7, -1, 5, 0})), LF_I64, 4,
        (double[]){-1, -1, 2, 0});
    /* inverse hyperbolics, new with the spellings */
    lf_node *h = in1(LF_F64, 5, (double[]){0, 1, 0.5, -INFINITY, 2});
    chk_tol("asinh", lf_asinh(g, h), LF_F64, 5, (double[]){0, asinh(1.0), asinh(0.5), -INFINITY, asinh(2.0)}, 1e-15);
    chk_tol("acosh", lf_acosh(g, h), LF_F64, 5, (double[]){NAN, 0, NAN, NAN, acosh(2.0)}, 1e-15);
    chk_tol("atanh", lf_atanh(g, h), LF_F64, 5, (double[]){0, INFINITY, atanh(0.5), NAN, NAN}, 1e-15);
    /* f32 asinh: the host evaluators call libm's asinhf (bit for bit); CUDA's
       device asinhf is within its documented 3 ulp (lazyfuse.h, "CUDA
       backend"; on an H200 asinhf(1) came out 1 ulp above glibc's) */
    const char *backend = getenv("LF_TEST_BACKEND");
    chk_tol("arcsinh f32", map("(x) -> arcsinh(x)", in1(LF_F32, 1, (double[]){1})), LF_F32, 1,
            (double[]){asinhf(1.0f)}, backend && !strcmp(backend, "cuda") ? 3 * FLT_EPSILON : 0);
    /* each spelling is its operator: equal fns, printed with the table's name */
    static const char *const same[][2] = {
        {"(a, b) -> power(a, b)", "(a, b) -> a**b"},        {"(a, b) -> pow(a, b)", "(a, b) -> a**b"},
        {"(a, b) -> minimum(a, b)", "(a, b) -> min(a, b)"}, {"(a, b) -> maximum(a, b)", "(a, b) -> max(a, b)"},
        {"(a, b) -> arctan2(a, b)", "(a, b) -> atan2(a, b)"}, {"(a) -> absolute(a)", "(a) -> abs(a)"},
        {"(a) -> arcsin(a)", "(a) -> asin(a)"},             {"(a) -> arccos(a)", "(a) -> acos(a)"},
        {"(a) -> arctan(a)", "(a) -> atan(a)"},             {"(a) -> arcsinh(a)", "(a) -> asinh(a)"},
        {"(a) -> arccosh(a)", "(a) -> acosh(a)"},           {"(a) -> arctanh(a)", "(a) -> atanh(a)"},
    };
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
        lf_fn *f1 = parse(same[i][0]), *f2 = parse(same[i][1]);
        cr_expect(lf_fn_equal(f1, f2), "%s is not %s", same[i][0], same[i][1]);
        char buf[64];
        lf_fn_print(f1, buf, sizeof buf);
        cr_expect_str_eq(buf, same[i][1]);
    }
    /* minimum / maximum propagate NaN as NumPy's do (not fmin / fmax) */
    chk("minimum NaN", zip2("(a, b) -> minimum(a, b)", in1(LF_F64, 2, (double[]){NAN, 1}), in1(LF_F64, 2, (double[]){1, NAN})),
        LF_F64, 2, (double[]){NAN, NAN});
    /* an expression as a NumPy user writes it */
    lf_node *u = in1(LF_F64, 3, (double[]){0.25, -0.5, 0.75}), *v = in1(LF_F64, 3, (double[]){2, -3, 0.5});
    double wx[3];
    for (int i = 0; i < 3; i++) {
        double p = (double[]){0.25, -0.5, 0.75}[i], q = (double[]){2, -3, 0.5}[i];
        wx[i] = atan2(asin(p), fabs(q)) + pow(fmin(p, q), 2) + fmod(q, 0.4) + atanh(p);
    }
    chk_tol("numpy-style expression",
            zip2("(a, b) -> arctan2(arcsin(a), absolute(b)) + power(minimum(a, b), 2) + fmod(b, 0.4) + arctanh(a)", u,
                 v),
            LF_F64, 3, wx, 1e-14);
}

Test(eval, float_mod) {
    double a[] = {-7, 7, 7.5, -7.5, 5, -0.5, 1e-3, NAN, INFINITY};
    double b[] = {3, -3, 2, 2, 0, 1, -1, 2, 2};
    double want64[] = {2, -2, 1.5, 0.5, NAN, 0.5, 1e-3 - 1, NAN, NAN};
    chk("f64 %", lf_mod(g, in1(LF_F64, 9, a), in1(LF_F64, 9, b)), LF_F64, 9, want64);
    double want32[] = {2, -2, 1.5, 0.5, NAN, 0.5, (float)1e-3f - 1.0f, NAN, NAN};
    chk("f32 %", lf_mod(g, in1(LF_F32, 9, a), in1(LF_F32, 9, b)), LF_F32, 9, want32);
    chk("parsed f32 % 3", map("(x) -> x % 3", in1(LF_F32, 3, (double[]){-7, 7, -0.25})), LF_F32, 3,
        (double[]){2, 1, 2.75});
    /* an int with a float: f64 */
    chk("i32 % f32", lf_mod(g, in1(LF_I32, 2, (double[]){-7, 7}), in1(LF_F32, 2, (double[]){3, -3})),
        LF_F64, 2, (double[]){2, -2});
}

Test(eval, integer_pow) {
    double a[] = {2, -2, 3, 0, 2, 1, -1, -1, 0, -3, 5, 7};
    double b[] = {10, 3, 0, 0, -1, -5, -3, -2, -1, -1, -2, 1};
    double want[] = {1024, -8, 1, 1, 0, 1, -1, 1, 0, 0, 0, 7};
    for (int t = LF_I32; t <= LF_I64; t++) {
        chk("i ** i", lf_pow(g, in1((lf_dtype)t, 12, a), in1((lf_dtype)t, 12, b)), (lf_dtype)t, 12,
            want);
        chk("parsed **", zip2("(a, b) -> a ** b", in1((lf_dtype)t, 12, a), in1((lf_dtype)t, 12, b)),
            (lf_dtype)t, 12, want);
    }
    chk("x ** -1", map("(x) -> x ** (-1)", in1(LF_I32, 4, (double[]){1, -1, 2, 0})), LF_I32, 4,
        (double[]){1, -1, 0, 0});
    /* wraparound */
    chk("2**31 i32", lf_pow(g, lf_const(g, LF_I32, 2), lf_const(g, LF_I32, 31)), LF_I32, 1,
        (double[]){INT32_MIN});
    chk("2**32 i32", lf_pow(g, lf_const(g, LF_I32, 2), lf_const(g, LF_I32, 32)), LF_I32, 1,
        (double[]){0});
    chk("3**20 i32", lf_pow(g, lf_const(g, LF_I32, 3), lf_const(g, LF_I32, 20)), LF_I32, 1,
        (double[]){(double)ipow(LF_I32, 3, 20)});
    val *r = eval_vals(lf_pow(g, lf_const(g, LF_I64, 3), lf_const(g, LF_I64, 40)));
    cr_expect_eq(r[0].i, (int64_t)(uint64_t)12157665459056928801ULL, "3**40 wraps: got %" PRId64, r[0].i);
    free(r);
    r = eval_vals(lf_pow(g, lf_const(g, LF_I64, 2), lf_const(g, LF_I64, 62)));
    cr_expect_eq(r[0].i, INT64_C(1) << 62);
    free(r);
    /* bool ** bool is i32 */
    chk("bool ** bool",
        lf_pow(g, in1(LF_BOOL, 4, (double[]){0, 0, 1, 1}), in1(LF_BOOL, 4, (double[]){0, 1, 0, 1})),
        LF_I32, 4, (double[]){1, 0, 1, 1});
}

/* Exponents far too large to loop over: the answer needs square-and-multiply. */
Test(eval, integer_pow_huge_exponent, .timeout = 20) {
    int64_t base[] = {3, -1, 1, 2, 0, -3, 5};
    int64_t ex[] = {INT64_MAX, INT64_MAX, INT64_MAX, 64, INT64_MAX, INT64_MAX - 1, 1000000007};
    int64_t n = 7;
    lf_buffer *bb = lf_buffer_new(ctx, LF_I64, 1, &n), *eb = lf_buffer_new(ctx, LF_I64, 1, &n);
    cr_assert_eq(lf_buffer_write(bb, base, sizeof base), LF_OK);
    cr_assert_eq(lf_buffer_write(eb, ex, sizeof ex), LF_OK);
    val *r = eval_vals(lf_pow(g, lf_input(g, bb), lf_input(g, eb)));
    for (int k = 0; k < 7; k++)
        cr_expect_eq(r[k].i, ipow(LF_I64, base[k], ex[k]), "%" PRId64 "**%" PRId64 ": got %" PRId64
                     ", want %" PRId64, base[k], ex[k], r[k].i, ipow(LF_I64, base[k], ex[k]));
    free(r);
    chk("3**INT32_MAX i32",
        lf_pow(g, lf_const(g, LF_I32, 3), lf_const(g, LF_I32, INT32_MAX)), LF_I32, 1,
        (double[]){(double)ipow(LF_I32, 3, INT32_MAX)});
}

Test(eval, round_half_even) {
    double x[] = {0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.5, 2.4999, -0.7, 0.0, 1e15 + 0.5, NAN, INFINITY};
    double r[] = {0, 2, 2, -0.0, -2, -2, 4, 2, -1, 0, 1e15, NAN, INFINITY};
    double fl[] = {0, 1, 2, -1, -2, -3, 3, 2, -1, 0, 1e15, NAN, INFINITY};
    double ce[] = {1, 2, 3, -0.0, -1, -2, 4, 3, -0.0, 0, 1e15 + 1, NAN, INFINITY};
    double tr[] = {0, 1, 2, -0.0, -1, -2, 3, 2, -0.0, 0, 1e15, NAN, INFINITY};
    lf_node *d = in1(LF_F64, 13, x);
    chk("round f64", lf_round(g, d), LF_F64, 13, r);
    chk("floor f64", lf_floor(g, d), LF_F64, 13, fl);
    chk("ceil f64", lf_ceil(g, d), LF_F64, 13, ce);
    chk("trunc f64", lf_trunc(g, d), LF_F64, 13, tr);
    chk("parsed round f64", map("(x) -> round(x)", d), LF_F64, 13, r);
    lf_node *f = in1(LF_F32, 9, x);
    chk("round f32", lf_round(g, f), LF_F32, 9, r);
    chk("floor f32", lf_floor(g, f), LF_F32, 9, fl);
    /* integers are kept as they are */
    chk("round i32", lf_round(g, in1(LF_I32, 3, (double[]){-3, 0, 7})), LF_I32, 3,
        (double[]){-3, 0, 7});
    chk("ceil i64", lf_ceil(g, in1(LF_I64, 2, (double[]){-3, 7})), LF_I64, 2, (double[]){-3, 7});
}

Test(eval, casts) {
    double x[] = {NAN, 1e30, -1e30, 2.9, -2.9, INFINITY, -INFINITY, 2147483647.5, -2147483648.9,
                  0.0, -0.0, 0.5};
    lf_node *d = in1(LF_F64, 12, x);
    chk("f64->i32", lf_cast(g, d, LF_I32), LF_I32, 12,
        (double[]){0, INT32_MAX, INT32_MIN, 2, -2, INT32_MAX, INT32_MIN, INT32_MAX, INT32_MIN, 0, 0,
                   0});
    chk("f64->bool", lf_cast(g, d, LF_BOOL), LF_BOOL, 12,
        (double[]){1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1});
    val *r = eval_vals(lf_cast(g, d, LF_I64));
    int64_t want64[] = {0, INT64_MAX, INT64_MIN, 2, -2, INT64_MAX, INT64_MIN, 2147483647,
                        -2147483648LL, 0, 0, 0};
    for (int k = 0; k < 12; k++)
        cr_expect_eq(r[k].i, want64[k], "f64->i64 of %g: got %" PRId64, x[k], r[k].i);
    free(r);
    lf_node *f = in1(LF_F32, 7, x);
    chk("f32->i32", lf_cast(g, f, LF_I32), LF_I32, 7,
        (double[]){0, INT32_MAX, INT32_MIN, 2, -2, INT32_MAX, INT32_MIN});
    chk("f64->f32", lf_cast(g, in1(LF_F64, 3, (double[]){0.1, 1e300, -1e300}), LF_F32), LF_F32, 3,
        (double[]){(float)0.1, INFINITY, -INFINITY});
    chk("bool->f32", lf_cast(g, in1(LF_BOOL, 2, (double[]){0, 1}), LF_F32), LF_F32, 2,
        (double[]){0, 1});
    chk("i32->bool", lf_cast(g, in1(LF_I32, 3, (double[]){0, -5, 2}), LF_BOOL), LF_BOOL, 3,
        (double[]){0, 1, 1});
    chk("i32->f32", lf_cast(g, in1(LF_I32, 2, (double[]){16777217, -3}), LF_F32), LF_F32, 2,
        (double[]){16777216, -3});
    /* bool buffers are normalized on write */
    lf_buffer *bb = lf_buffer_new(ctx, LF_BOOL, 1, (int64_t[]){3});
    uint8_t raw[3] = {0, 2, 255};
    cr_assert_eq(lf_buffer_write(bb, raw, 3), LF_OK);
    chk("normalized bool", lf_cast(g, lf_input(g, bb), LF_I32), LF_I32, 3, (double[]){0, 1, 1});
}

Test(eval, min_max_propagate_nan) {
    double a[] = {1, NAN, NAN, 2, -INFINITY, 0};
    double b[] = {NAN, 1, NAN, 3, INFINITY, -1};
    for (int t = LF_F32; t <= LF_F64; t++) {
        lf_node *x = in1((lf_dtype)t, 6, a), *y = in1((lf_dtype)t, 6, b);
        chk("minimum", lf_minimum(g, x, y), (lf_dtype)t, 6,
            (double[]){NAN, NAN, NAN, 2, -INFINITY, -1});
        chk("maximum", lf_maximum(g, x, y), (lf_dtype)t, 6,
            (double[]){NAN, NAN, NAN, 3, INFINITY, 0});
        chk("parsed min", zip2("(a, b) -> min(a, b)", x, y), (lf_dtype)t, 6,
            (double[]){NAN, NAN, NAN, 2, -INFINITY, -1});
        chk("parsed max", zip2("(a, b) -> max(a, b)", x, y), (lf_dtype)t, 6,
            (double[]){NAN, NAN, NAN, 3, INFINITY, 0});
    }
    chk("min i32", lf_minimum(g, in1(LF_I32, 2, (double[]){INT32_MIN, 5}),
                              in1(LF_I32, 2, (double[]){INT32_MAX, -5})),
        LF_I32, 2, (double[]){INT32_MIN, -5});
}

Test(eval, nan_inf_propagation) {
    double a[] = {INFINITY, INFINITY, 0, 1, -1, NAN, 0, INFINITY};
    double b[] = {-INFINITY, 0, 0, 0, 0, 1, INFINITY, INFINITY};
    for (int t = LF_F32; t <= LF_F64; t++) {
        lf_node *x = in1((lf_dtype)t, 8, a), *y = in1((lf_dtype)t, 8, b);
        chk("add", lf_add(g, x, y), (lf_dtype)t, 8,
            (double[]){NAN, INFINITY, 0, 1, -1, NAN, INFINITY, INFINITY});
        chk("mul", lf_mul(g, x, y), (lf_dtype)t, 8,
            (double[]){-INFINITY, NAN, 0, 0, -0.0, NAN, NAN, INFINITY});
        chk("div", lf_div(g, x, y), (lf_dtype)t, 8,
            (double[]){NAN, INFINITY, NAN, INFINITY, -INFINITY, NAN, 0, NAN});
        lf_node *s = in1((lf_dtype)t, 7, (double[]){INFINITY, -INFINITY, 0, -1, NAN, 1, -0.0});
        chk_tol("exp", lf_exp(g, s), (lf_dtype)t, 7,
                (double[]){INFINITY, 0, 1, exp(-1.0), NAN, M_E, 1}, t == LF_F32 ? 1e-6 : 1e-15);
        chk("log", lf_log(g, s), (lf_dtype)t, 7, (double[]){INFINITY, NAN, -INFINITY, NAN, NAN, 0,
                                                             -INFINITY});
        chk("sqrt", lf_sqrt(g, s), (lf_dtype)t, 7, (double[]){INFINITY, NAN, 0, NAN, NAN, 1, -0.0});
        chk_tol("tanh", lf_tanh(g, s), (lf_dtype)t, 7,
                (double[]){1, -1, 0, tanh(-1.0), NAN, tanh(1.0), 0}, t == LF_F32 ? 1e-6 : 1e-15);
    }
    /* integer 0/0 is true division */
    chk("i32/i32 by 0", lf_div(g, in1(LF_I32, 3, (double[]){1, 0, -1}), in1(LF_I32, 3, (double[]){0, 0, 0})),
        LF_F64, 3, (double[]){INFINITY, NAN, -INFINITY});
    chk("parsed exp(x)/x", map("(x) -> exp(x) / x", in1(LF_F64, 2, (double[]){INFINITY, 0})), LF_F64,
        2, (double[]){NAN, INFINITY});
}

Test(eval, isnan_isinf) {
    double x[] = {0, NAN, INFINITY, -INFINITY, -NAN, 1e300, -3};
    for (int t = LF_F32; t <= LF_F64; t++) {
        lf_node *d = in1((lf_dtype)t, 7, x);
        chk("isnan", lf_isnan(g, d), LF_BOOL, 7, (double[]){0, 1, 0, 0, 1, 0, 0});
        chk("isinf", lf_isinf(g, d), LF_BOOL, 7,
            (double[]){0, 0, 1, 1, 0, t == LF_F32 ? 1 : 0, 0});
        chk("parsed isnan or isinf", map("(x) -> isnan(x) or isinf(x)", d), LF_BOOL, 7,
            (double[]){0, 1, 1, 1, 1, t == LF_F32 ? 1 : 0, 0});
    }
    chk("isnan i32", lf_isnan(g, in1(LF_I32, 2, (double[]){0, 1})), LF_BOOL, 2, (double[]){0, 0});
    chk("isinf i64", lf_isinf(g, in1(LF_I64, 2, (double[]){0, 1})), LF_BOOL, 2, (double[]){0, 0});
}

/* signbit reads the sign bit (NumPy's np.signbit): -0.0 and -NaN too, which
   no comparison can see; integers x < 0, bool never. */
Test(eval, signbit_reads_the_bit) {
    double x[] = {0, -0.0, NAN, -NAN, INFINITY, -INFINITY, -3, 2, -1e-300};
    for (int t = LF_F32; t <= LF_F64; t++) {
        lf_node *d = in1((lf_dtype)t, 9, x);
        double want[] = {0, 1, 0, 1, 0, 1, 1, 0, 1};
        chk("signbit", lf_signbit(g, d), LF_BOOL, 9, want);
        chk("parsed signbit", map("(x) -> signbit(x)", d), LF_BOOL, 9, want);
        chk("signbit of a fused -x", map("(x) -> signbit(-x)", d), LF_BOOL, 9,
            (double[]){1, 0, 1, 0, 1, 0, 0, 1, 0});
    }
    chk("signbit i32", lf_signbit(g, in1(LF_I32, 3, (double[]){-1, 0, 5})), LF_BOOL, 3, (double[]){1, 0, 0});
    chk("signbit i64", lf_signbit(g, in1(LF_I64, 2, (double[]){-7, 7})), LF_BOOL, 2, (double[]){1, 0});
    chk("signbit bool", lf_signbit(g, in1(LF_BOOL, 2, (double[]){1, 0})), LF_BOOL, 2, (double[]){0, 0});
}

Test(eval, comparisons_in_promoted_dtype) {
    /* i32 16777217 vs f32 16777216: compared in f64, so not equal */
    lf_node *i = in1(LF_I32, 1, (double[]){16777217});
    lf_node *f = in1(LF_F32, 1, (double[]){16777216});
    chk("i32 == f32", lf_eq(g, i, f), LF_BOOL, 1, (double[]){0});
    chk("i32 > f32", lf_gt(g, i, f), LF_BOOL, 1, (double[]){1});
    /* i64 2^53+1 vs f64 2^53: compared in f64, where they are equal */
    int64_t v = (INT64_C(1) << 53) + 1, one = 1;
    lf_buffer *lb = lf_buffer_new(ctx, LF_I64, 1, &one);
    cr_assert_eq(lf_buffer_write(lb, &v, sizeof v), LF_OK);
    chk("i64 == f64", lf_eq(g, lf_input(g, lb), lf_const(g, LF_F64, 9007199254740992.0)), LF_BOOL, 1,
        (double[]){1});
    /* NaN compares false except != */
    lf_node *n = in1(LF_F64, 2, (double[]){NAN, 1});
    lf_node *m = in1(LF_F64, 2, (double[]){NAN, NAN});
    chk("nan ==", lf_eq(g, n, m), LF_BOOL, 2, (double[]){0, 0});
    chk("nan !=", lf_ne(g, n, m), LF_BOOL, 2, (double[]){1, 1});
    chk("nan <", lf_lt(g, n, m), LF_BOOL, 2, (double[]){0, 0});
    chk("nan >=", lf_ge(g, n, m), LF_BOOL, 2, (double[]){0, 0});
    /* i32 vs i64 extremes */
    chk("i32 < i64",
        lf_lt(g, in1(LF_I32, 2, (double[]){INT32_MAX, -1}), in1(LF_I64, 2, (double[]){4294967296.0, -2})),
        LF_BOOL, 2, (double[]){1, 0});
    chk("bool == i32", lf_eq(g, in1(LF_BOOL, 2, (double[]){1, 1}), in1(LF_I32, 2, (double[]){1, 2})),
        LF_BOOL, 2, (double[]){1, 0});
    chk("parsed chain", zip2("(a, b) -> a <= b and not (a == b) or a != a", n, in1(LF_F64, 2, (double[]){0, 2})),
        LF_BOOL, 2, (double[]){1, 1});
}

Test(eval, logic_truth_values) {
    double a[] = {0, 2.5, NAN, -0.0, 0, 1};
    double b[] = {0, 0, 1, 1, -3, 7};
    lf_node *x = in1(LF_F64, 6, a), *y = in1(LF_I32, 6, b);
    chk("and", lf_logical_and(g, x, y), LF_BOOL, 6, (double[]){0, 0, 1, 0, 0, 1});
    chk("or", lf_logical_or(g, x, y), LF_BOOL, 6, (double[]){0, 1, 1, 1, 1, 1});
    chk("not", lf_logical_not(g, x), LF_BOOL, 6, (double[]){1, 0, 0, 1, 1, 0});
    chk("parsed &&/||/!", zip2("(a, b) -> !(a && b) || !b", x, y), LF_BOOL, 6,
        (double[]){1, 1, 0, 1, 1, 0});
}

Test(eval, where_select_broadcast) {
    /* c [3,1] bool, a [1,4] i32, b 0-d f32 -> [3,4] f64 */
    lf_node *c = inS(LF_BOOL, 2, (int64_t[]){3, 1}, (double[]){1, 0, 1});
    lf_node *a = inS(LF_I32, 2, (int64_t[]){1, 4}, (double[]){1, 2, 3, 4});
    lf_node *b = lf_const(g, LF_F32, -0.5);
    lf_node *y = lf_select(g, c, a, b);
    chk_shape(y, 2, (int64_t[]){3, 4});
    double want[] = {1, 2, 3, 4, -0.5, -0.5, -0.5, -0.5, 1, 2, 3, 4};
    chk("select", y, LF_F64, 12, want);
    chk("apply where", lf_apply(g, LF_OP_WHERE, c, a, b), LF_F64, 12, want);
    lf_node *z = lf_zipwith(g, parse("(c, a, b) -> where(c, a, b)"), 3, (lf_node *[]){c, a, b});
    chk_shape(z, 2, (int64_t[]){3, 4});
    chk("parsed where", z, LF_F64, 12, want);
    /* a float condition: nonzero (NaN included) is true */
    lf_node *cf = in1(LF_F64, 4, (double[]){0, 2.5, -0.0, NAN});
    chk("float condition", lf_select(g, cf, in1(LF_I32, 4, (double[]){1, 2, 3, 4}), lf_const(g, LF_I32, -1)),
        LF_I32, 4, (double[]){-1, 2, -1, 4});
    /* a condition of shape [2,1,1] against a [3] and b [2,1] */
    lf_node *c3 = inS(LF_I64, 3, (int64_t[]){2, 1, 1}, (double[]){0, 5});
    lf_node *a3 = in1(LF_F64, 3, (double[]){10, 20, 30});
    lf_node *b3 = inS(LF_F64, 2, (int64_t[]){2, 1}, (double[]){-1, -2});
    lf_node *y3 = lf_select(g, c3, a3, b3);
    chk_shape(y3, 3, (int64_t[]){2, 2, 3});
    chk("select 3-d", y3, LF_F64, 12, (double[]){-1, -1, -1, -2, -2, -2, 10, 20, 30, 10, 20, 30});
    /* where of NaN values passes them through */
    chk("select nan", lf_select(g, lf_const(g, LF_BOOL, 1), lf_const(g, LF_F64, NAN), lf_const(g, LF_F64, 0)),
        LF_F64, 1, (double[]){NAN});
}

Test(eval, sigmoid_rsqrt_erf) {
    double x[] = {0, INFINITY, -INFINITY, NAN, 2, -2, 40, -40};
    double sg[8], er[8];
    for (int k = 0; k < 8; k++) {
        sg[k] = 1.0 / (1.0 + exp(-x[k]));
        er[k] = erf(x[k]);
    }
    sg[3] = NAN;
    cr_assert_eq(sg[0], 0.5);
    cr_assert_eq(er[1], 1.0);
    cr_assert_eq(er[2], -1.0);
    for (int t = LF_F32; t <= LF_F64; t++) {
        double tol = t == LF_F32 ? 1e-6 : 1e-14;
        lf_node *d = in1((lf_dtype)t, 8, x);
        chk_tol("sigmoid", lf_sigmoid(g, d), (lf_dtype)t, 8, sg, tol);
        chk_tol("erf", lf_erf(g, d), (lf_dtype)t, 8, er, tol);
        chk_tol("parsed sigmoid", map("(x) -> sigmoid(x)", d), (lf_dtype)t, 8, sg, tol);
        lf_node *r = in1((lf_dtype)t, 6, (double[]){4, 0.25, 0, -1, INFINITY, 2});
        chk_tol("rsqrt", lf_rsqrt(g, r), (lf_dtype)t, 6, (double[]){0.5, 2, INFINITY, NAN, 0, M_SQRT1_2},
                tol);
    }
    chk("sigmoid exact points", lf_sigmoid(g, in1(LF_F64, 3, (double[]){0, INFINITY, -INFINITY})),
        LF_F64, 3, (double[]){0.5, 1, 0});
    chk("erf(0)", lf_erf(g, lf_const(g, LF_F64, 0)), LF_F64, 1, (double[]){0});
    chk("rsqrt(i32 4)", lf_rsqrt(g, lf_const(g, LF_I32, 4)), LF_F64, 1, (double[]){0.5});
}

Test(eval, transcendentals_hand_values) {
    lf_node *one = lf_const(g, LF_F64, 1);
    chk_tol("exp2(3)", lf_exp2(g, lf_const(g, LF_F64, 3)), LF_F64, 1, (double[]){8}, 1e-15);
    chk_tol("log2(1024)", lf_log2(g, lf_const(g, LF_F64, 1024)), LF_F64, 1, (double[]){10}, 1e-15);
    chk_tol("log10(1000)", lf_log10(g, lf_const(g, LF_I32, 1000)), LF_F64, 1, (double[]){3}, 1e-15);
    chk_tol("cbrt(-27)", lf_cbrt(g, lf_const(g, LF_F64, -27)), LF_F64, 1, (double[]){-3}, 1e-15);
    chk_tol("atan2(1,1)", lf_atan2(g, one, one), LF_F64, 1, (double[]){M_PI_4}, 1e-15);
    chk("hypot(3,4)", lf_hypot(g, lf_const(g, LF_F32, 3), lf_const(g, LF_F32, 4)), LF_F32, 1,
        (double[]){5});
    chk_tol("acos(-1)", lf_acos(g, lf_const(g, LF_F64, -1)), LF_F64, 1, (double[]){M_PI}, 1e-15);
    chk("asin(2)", lf_asin(g, lf_const(g, LF_F64, 2)), LF_F64, 1, (double[]){NAN});
    chk("log1p(-1)", lf_log1p(g, lf_const(g, LF_F64, -1)), LF_F64, 1, (double[]){-INFINITY});
    chk("expm1(0)", lf_expm1(g, lf_const(g, LF_F64, 0)), LF_F64, 1, (double[]){0});
    chk("cosh(0)", lf_cosh(g, lf_const(g, LF_F32, 0)), LF_F32, 1, (double[]){1});
    chk("sinh(-inf)", lf_sinh(g, lf_const(g, LF_F64, -INFINITY)), LF_F64, 1, (double[]){-INFINITY});
    chk("fma(2,3,4)", lf_fma(g, lf_const(g, LF_I32, 2), lf_const(g, LF_I32, 3), lf_const(g, LF_I32, 4)),
        LF_F64, 1, (double[]){10});
    /* fma rounds once: 0.1*10 - 1 is 2^-54 + ..., not 0 */
    chk("fma single rounding",
        lf_fma(g, lf_const(g, LF_F64, 0.1), lf_const(g, LF_F64, 10), lf_const(g, LF_F64, -1)), LF_F64,
        1, (double[]){fma(0.1, 10, -1)});
    cr_assert_neq(fma(0.1, 10, -1), 0.0);
    chk("pow(-8, 1/3.)", lf_pow(g, lf_const(g, LF_F64, -8), lf_const(g, LF_F64, 1.0 / 3)), LF_F64, 1,
        (double[]){NAN});
    chk("pow(0, -1)", lf_pow(g, lf_const(g, LF_F64, 0), lf_const(g, LF_F64, -1)), LF_F64, 1,
        (double[]){INFINITY});
    chk("pow(nan, 0)", lf_pow(g, lf_const(g, LF_F64, NAN), lf_const(g, LF_F64, 0)), LF_F64, 1,
        (double[]){1});
    chk("sign f64", lf_sign(g, in1(LF_F64, 5, (double[]){-3, 0, 2, NAN, -INFINITY})), LF_F64, 5,
        (double[]){-1, 0, 1, NAN, -1});
    chk("sign i32", lf_sign(g, in1(LF_I32, 3, (double[]){-3, 0, INT32_MAX})), LF_I32, 3,
        (double[]){-1, 0, 1});
    chk("parsed constants", map("(x) -> x * pi + e", lf_const(g, LF_F64, 1)), LF_F64, 1,
        (double[]){M_PI + M_E});
}

/* ---- broadcasting --------------------------------------------------------- */

Test(eval, broadcast_column_row) {
    lf_node *a = inS(LF_F64, 2, (int64_t[]){3, 1}, (double[]){0, 10, 20});
    lf_node *b = inS(LF_F64, 2, (int64_t[]){1, 4}, (double[]){1, 2, 3, 4});
    lf_node *y = lf_add(g, a, b);
    chk_shape(y, 2, (int64_t[]){3, 4});
    chk("[3,1]+[1,4]", y, LF_F64, 12, (double[]){1, 2, 3, 4, 11, 12, 13, 14, 21, 22, 23, 24});
    lf_node *y2 = lf_sub(g, b, a);
    chk_shape(y2, 2, (int64_t[]){3, 4});
    chk("[1,4]-[3,1]", y2, LF_F64, 12, (double[]){1, 2, 3, 4, -9, -8, -7, -6, -19, -18, -17, -16});
}

Test(eval, broadcast_leading_axes) {
    lf_node *a = in1(LF_I32, 4, (double[]){1, 2, 3, 4});
    lf_node *b = inS(LF_I32, 2, (int64_t[]){3, 4}, (double[]){0, 0, 0, 0, 10, 10, 10, 10, 20, 20, 20, 20});
    lf_node *y = lf_mul(g, a, b);
    chk_shape(y, 2, (int64_t[]){3, 4});
    chk("[4]*[3,4]", y, LF_I32, 12, (double[]){0, 0, 0, 0, 10, 20, 30, 40, 20, 40, 60, 80});
    /* [2,1,3] + [4,1] -> [2,4,3] */
    lf_node *c = inS(LF_F64, 3, (int64_t[]){2, 1, 3}, (double[]){1, 2, 3, 4, 5, 6});
    lf_node *d = inS(LF_F64, 2, (int64_t[]){4, 1}, (double[]){0, 100, 200, 300});
    lf_node *z = lf_add(g, c, d);
    chk_shape(z, 3, (int64_t[]){2, 4, 3});
    double want[24];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 4; j++)
            for (int k = 0; k < 3; k++) want[(i * 4 + j) * 3 + k] = (i * 3 + k + 1) + 100 * j;
    chk("[2,1,3]+[4,1]", z, LF_F64, 24, want);
}

Test(eval, broadcast_scalars) {
    /* a 0-d constant and a 0-d buffer with arrays */
    lf_buffer *sb = lf_buffer_new(ctx, LF_F64, 0, NULL);
    cr_assert(sb != NULL, "%s", lf_errmsg(ctx));
    cr_assert_eq(lf_buffer_ndim(sb), 0);
    cr_assert_eq(lf_buffer_numel(sb), 1);
    double three = 3;
    cr_assert_eq(lf_buffer_write(sb, &three, sizeof three), LF_OK);
    lf_node *s = lf_input(g, sb);
    chk_shape(s, 0, NULL);
    lf_node *a = inS(LF_F64, 2, (int64_t[]){2, 3}, (double[]){1, 2, 3, 4, 5, 6});
    lf_node *y = lf_mul(g, s, a);
    chk_shape(y, 2, (int64_t[]){2, 3});
    chk("0-d * [2,3]", y, LF_F64, 6, (double[]){3, 6, 9, 12, 15, 18});
    lf_node *z = lf_sub(g, a, lf_const(g, LF_F64, 1));
    chk("[2,3] - const", z, LF_F64, 6, (double[]){0, 1, 2, 3, 4, 5});
    /* 0-d with 0-d stays 0-d */
    lf_node *w = lf_add(g, s, lf_const(g, LF_F64, 0.5));
    chk_shape(w, 0, NULL);
    chk("0-d + 0-d", w, LF_F64, 1, (double[]){3.5});
    lf_buffer *wb = tu_eval1(ctx, g, w);
    cr_assert_eq(lf_buffer_ndim(wb), 0);
}

Test(eval, broadcast_zero_size) {
    /* [0,3] + [1,3] -> [0,3] */
    lf_node *z = lf_fill(g, LF_F64, 1, 2, (int64_t[]){0, 3});
    lf_node *r = inS(LF_F64, 2, (int64_t[]){1, 3}, (double[]){1, 2, 3});
    lf_node *y = lf_add(g, z, r);
    chk_shape(y, 2, (int64_t[]){0, 3});
    cr_assert_eq(lf_node_numel(y), 0);
    lf_buffer *yb = tu_eval1(ctx, g, y);
    cr_assert_eq(lf_buffer_numel(yb), 0);
    cr_assert_eq(lf_buffer_bytes(yb), 0);
    cr_assert_eq(lf_buffer_dim(yb, 0), 0);
    cr_assert_eq(lf_buffer_dim(yb, 1), 3);
    /* [1] with [0] -> [0]; [0] with 0-d -> [0] */
    lf_node *e = lf_input(g, tu_buf(ctx, LF_I32, 1, (int64_t[]){0}, NULL));
    lf_node *y2 = lf_add(g, in1(LF_I32, 1, (double[]){5}), e);
    chk_shape(y2, 1, (int64_t[]){0});
    tu_eval1(ctx, g, y2);
    lf_node *y3 = lf_mul(g, e, lf_const(g, LF_F64, 2));
    chk_shape(y3, 1, (int64_t[]){0});
    cr_assert_eq(lf_node_dtype(y3), LF_F64);
    tu_eval1(ctx, g, y3);
    /* a zero-size buffer input of shape [2,0] broadcasting with [2,1] */
    lf_node *e2 = lf_input(g, tu_buf(ctx, LF_F32, 2, (int64_t[]){2, 0}, NULL));
    lf_node *y4 = lf_add(g, e2, inS(LF_F32, 2, (int64_t[]){2, 1}, (double[]){1, 2}));
    chk_shape(y4, 2, (int64_t[]){2, 0});
    tu_eval1(ctx, g, y4);
}

Test(eval, zero_size_arrays) {
    lf_node *a = lf_iota(g, LF_F64, 0);
    chk_shape(a, 1, (int64_t[]){0});
    lf_node *m = map("(x) -> exp(x) + 1", a);
    chk_shape(m, 1, (int64_t[]){0});
    lf_buffer *mb = tu_eval1(ctx, g, m);
    cr_assert_eq(lf_buffer_numel(mb), 0);
    char dummy;
    cr_assert_eq(lf_buffer_read(mb, &dummy, 0), LF_OK);
    lf_node *f = lf_fill(g, LF_I32, 7, 3, (int64_t[]){2, 0, 3});
    chk_shape(f, 3, (int64_t[]){2, 0, 3});
    lf_node *f2 = lf_mul(g, f, f);
    lf_buffer *fb = tu_eval1(ctx, g, f2);
    cr_assert_eq(lf_buffer_numel(fb), 0);
    cr_assert_eq(lf_buffer_ndim(fb), 3);
    /* several empty outputs with a non-empty one in one eval */
    lf_node *full = lf_add(g, lf_iota(g, LF_I64, 3), lf_const(g, LF_I64, 1));
    lf_buffer *b1 = lf_buffer_new_like(ctx, f2), *b2 = lf_buffer_new_like(ctx, full),
              *b3 = lf_buffer_new_like(ctx, m);
    cr_assert_eq(lf_eval(g, 3, (lf_node *[]){f2, full, m}, (lf_buffer *[]){b1, b2, b3}), LF_OK, "%s",
                 lf_errmsg(ctx));
    tu_expect("non-empty beside empties", b2, (double[]){1, 2, 3}, 3, 0, 0);
}

Test(eval, zipwith_eight_inputs) {
    lf_fn *f = parse("(x0, x1, x2, x3, x4, x5, x6, x7) -> "
                     "x0 + 2*x1 + 3*x2 + 4*x3 + 5*x4 + 6*x5 + 7*x6 + 8*x7");
    cr_assert_eq(lf_fn_arity(f), 8);
    double v0[6] = {1, 2, 3, 4, 5, 6}, v1[3] = {10, 20, 30}, v2[2] = {100, 200};
    double v4[3] = {0.5, 1.5, 2.5}, v5[1] = {-1}, v6[6] = {1, 0, 1, 0, 1, 1}, v7[3] = {7, 8, 9};
    lf_node *xs[8] = {
        inS(LF_F64, 2, (int64_t[]){2, 3}, v0), in1(LF_I32, 3, v1),
        inS(LF_F64, 2, (int64_t[]){2, 1}, v2), lf_const(g, LF_F64, 1000),
        inS(LF_F32, 2, (int64_t[]){1, 3}, v4), inS(LF_I64, 2, (int64_t[]){1, 1}, v5),
        inS(LF_BOOL, 2, (int64_t[]){2, 3}, v6), in1(LF_F64, 3, v7),
    };
    lf_node *y = lf_zipwith(g, f, 8, xs);
    chk_shape(y, 2, (int64_t[]){2, 3});
    double want[6];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            want[i * 3 + j] = v0[i * 3 + j] + 2 * v1[j] + 3 * v2[i] + 4 * 1000 + 5 * v4[j] +
                              6 * v5[0] + 7 * v6[i * 3 + j] + 8 * v7[j];
    chk("zipwith 8", y, LF_F64, 6, want);
    /* the parameters are bound in order: a non-symmetric fn */
    lf_fn *h = parse("(a, b, c, d, f, g, h, k) -> (((a - b) * c - d) / f + g - h) * k");
    lf_node *cs[8];
    double vals[8] = {9, 2, 3, 4, 5, 6, 7, 8};
    for (int k = 0; k < 8; k++) cs[k] = lf_const(g, LF_F64, vals[k]);
    chk("zipwith 8 order", lf_zipwith(g, h, 8, cs), LF_F64, 1,
        (double[]){(((9.0 - 2) * 3 - 4) / 5 + 6 - 7) * 8});
}

/* A fn of no parameters applied to no inputs is a 0-d value (issue 14), on
 * its own, as an output beside others, broadcast into a map, reduced, and
 * written into a 0-d buffer; typed by the literal rules. */
Test(eval, zipwith_no_inputs) {
    lf_node *two = lf_zipwith(g, parse("() -> 1+1"), 0, NULL);
    chk_shape(two, 0, NULL);
    chk("() -> 1+1", two, LF_I64, 1, (double[]){2});
    lf_node *s = lf_zipwith(g, parse("() -> sin(pi/6) * 4.0"), 0, (lf_node *[]){NULL});
    chk_shape(s, 0, NULL);
    chk_tol("() -> sin(pi/6)*4.0", s, LF_F64, 1, (double[]){4 * sin(M_PI / 6)}, 1e-15);
    chk("() -> f32(1)/3", lf_zipwith(g, parse("() -> f32(1)/3"), 0, NULL), LF_F32, 1, (double[]){1.0f / 3.0f});
    chk("() -> nan", lf_zipwith(g, parse("() -> nan"), 0, NULL), LF_F64, 1, (double[]){NAN});
    /* broadcast into an elementwise node and reduced */
    lf_node *x = in1(LF_F32, 4, (double[]){1, 2, 3, 4});
    lf_node *y = lf_add(g, x, two); /* i64 with f32: f64 */
    chk("x + (() -> 1+1)", y, LF_F64, 4, (double[]){3, 4, 5, 6});
    chk("sum(x * (() -> 1+1))", lf_reduce(g, LF_RED_SUM, lf_mul(g, x, two), 0, NULL, false), LF_F64, 1,
        (double[]){20});
    /* two outputs of one eval: the 0-d value and a node using it */
    lf_buffer *b0 = lf_buffer_new_like(ctx, two), *b1 = lf_buffer_new_like(ctx, y);
    cr_assert_eq(lf_eval(g, 2, (lf_node *[]){two, y}, (lf_buffer *[]){b0, b1}), LF_OK, "%s", lf_errmsg(ctx));
    int64_t got0 = 0;
    double got1[4];
    lf_buffer_read(b0, &got0, sizeof got0);
    lf_buffer_read(b1, got1, sizeof got1);
    cr_expect_eq(got0, 2);
    cr_expect(got1[0] == 3 && got1[3] == 6, "%g %g", got1[0], got1[3]);
    lf_buffer_free(b0);
    lf_buffer_free(b1);
}

/* ---- sources --------------------------------------------------------------- */

Test(eval, const_sources) {
    lf_node *c = lf_const(g, LF_F32, 1.5);
    chk_shape(c, 0, NULL);
    cr_assert_eq(lf_node_numel(c), 1);
    chk("const f32", c, LF_F32, 1, (double[]){1.5});
    chk("const f32 0.1", lf_const(g, LF_F32, 0.1), LF_F32, 1, (double[]){(float)0.1});
    chk("const i32 1e30", lf_const(g, LF_I32, 1e30), LF_I32, 1, (double[]){INT32_MAX});
    chk("const i32 -2.7", lf_const(g, LF_I32, -2.7), LF_I32, 1, (double[]){-2});
    chk("const i32 nan", lf_const(g, LF_I32, NAN), LF_I32, 1, (double[]){0});
    chk("const bool 0.5", lf_const(g, LF_BOOL, 0.5), LF_BOOL, 1, (double[]){1});
    chk("const bool 0", lf_const(g, LF_BOOL, 0), LF_BOOL, 1, (double[]){0});
    chk("const f64 inf", lf_const(g, LF_F64, -INFINITY), LF_F64, 1, (double[]){-INFINITY});
    val *r = eval_vals(lf_const(g, LF_I64, -1e30));
    cr_expect_eq(r[0].i, INT64_MIN);
    free(r);
    r = eval_vals(lf_const(g, LF_I64, NAN));
    cr_expect_eq(r[0].i, 0);
    free(r);
}

Test(eval, fill_sources) {
    lf_node *f = lf_fill(g, LF_F64, 2.5, 2, (int64_t[]){2, 3});
    chk_shape(f, 2, (int64_t[]){2, 3});
    chk("fill f64", f, LF_F64, 6, (double[]){2.5, 2.5, 2.5, 2.5, 2.5, 2.5});
    chk("fill i32 7.9", lf_fill(g, LF_I32, 7.9, 1, (int64_t[]){4}), LF_I32, 4, (double[]){7, 7, 7, 7});
    chk("fill bool -3", lf_fill(g, LF_BOOL, -3, 1, (int64_t[]){2}), LF_BOOL, 2, (double[]){1, 1});
    lf_node *f0 = lf_fill(g, LF_F32, 4, 0, NULL);
    chk_shape(f0, 0, NULL);
    chk("fill 0-d", f0, LF_F32, 1, (double[]){4});
    lf_node *fz = lf_fill(g, LF_F64, 1, 3, (int64_t[]){2, 0, 3});
    chk_shape(fz, 3, (int64_t[]){2, 0, 3});
    cr_assert_eq(lf_node_numel(fz), 0);
    lf_buffer *b = tu_eval1(ctx, g, fz);
    cr_assert_eq(lf_buffer_numel(b), 0);
}

Test(eval, iota_sources) {
    for (int t = LF_I32; t <= LF_F64; t++) {
        lf_node *x = lf_iota(g, (lf_dtype)t, 5);
        chk_shape(x, 1, (int64_t[]){5});
        chk("iota", x, (lf_dtype)t, 5, (double[]){0, 1, 2, 3, 4});
        lf_node *e = lf_iota(g, (lf_dtype)t, 0);
        chk_shape(e, 1, (int64_t[]){0});
        tu_eval1(ctx, g, e);
    }
    chk("iota 1", lf_iota(g, LF_I64, 1), LF_I64, 1, (double[]){0});
}

Test(eval, arange_sources) {
    chk("arange(0,1,.25)", lf_arange(g, LF_F64, 0, 1, 0.25), LF_F64, 4, (double[]){0, .25, .5, .75});
    chk("arange(5,0,-1.5)", lf_arange(g, LF_F64, 5, 0, -1.5), LF_F64, 4, (double[]){5, 3.5, 2, 0.5});
    chk("arange(0,2.5,1)", lf_arange(g, LF_F64, 0, 2.5, 1), LF_F64, 3, (double[]){0, 1, 2});
    chk("arange(-1,-2.5,-.5)", lf_arange(g, LF_F64, -1, -2.5, -0.5), LF_F64, 3,
        (double[]){-1, -1.5, -2});
    chk_tol("arange(0,1,.3)", lf_arange(g, LF_F64, 0, 1, 0.3), LF_F64, 4,
            (double[]){0, 0.3, 0.6, 0.9}, 1e-15);
    chk("arange i32 (0,10,3)", lf_arange(g, LF_I32, 0, 10, 3), LF_I32, 4, (double[]){0, 3, 6, 9});
    chk("arange i32 (10,0,-3)", lf_arange(g, LF_I32, 10, 0, -3), LF_I32, 4, (double[]){10, 7, 4, 1});
    chk("arange i64 (-3,3,1)", lf_arange(g, LF_I64, -3, 3, 1), LF_I64, 6,
        (double[]){-3, -2, -1, 0, 1, 2});
    chk("arange f32 (0,2,.5)", lf_arange(g, LF_F32, 0, 2, 0.5), LF_F32, 4, (double[]){0, .5, 1, 1.5});
    chk("arange(0,1,2)", lf_arange(g, LF_F64, 0, 1, 2), LF_F64, 1, (double[]){0});
    lf_node *e1 = lf_arange(g, LF_F64, 1, 0, 1);
    chk_shape(e1, 1, (int64_t[]){0});
    tu_eval1(ctx, g, e1);
    lf_node *e2 = lf_arange(g, LF_F64, 0, 0, 1);
    chk_shape(e2, 1, (int64_t[]){0});
    lf_node *e3 = lf_arange(g, LF_I32, 0, 5, -1);
    chk_shape(e3, 1, (int64_t[]){0});
    tu_eval1(ctx, g, e3);
}

/* ---- evaluation ------------------------------------------------------------- */

Test(eval, several_outputs_in_one_eval) {
    lf_node *x = in1(LF_F64, 4, (double[]){1, 2, 3, 4});
    lf_node *y = lf_mul(g, x, lf_const(g, LF_F64, 2));
    lf_node *s = lf_reduce(g, LF_RED_SUM, x, 0, NULL, false);
    lf_node *c = lf_gt(g, x, lf_const(g, LF_F64, 2));
    lf_node *k = lf_cast(g, y, LF_I32);
    lf_node *outs[5] = {y, s, c, k, y};
    lf_buffer *bufs[5];
    for (int i = 0; i < 5; i++) bufs[i] = lf_buffer_new_like(ctx, outs[i]);
    cr_assert_eq(lf_buffer_ndim(bufs[1]), 0);
    cr_assert_eq(lf_eval(g, 5, outs, bufs), LF_OK, "%s", lf_errmsg(ctx));
    tu_expect("y", bufs[0], (double[]){2, 4, 6, 8}, 4, 0, 0);
    tu_expect("sum", bufs[1], (double[]){10}, 1, 0, 0);
    tu_expect("cmp", bufs[2], (double[]){0, 0, 1, 1}, 4, 0, 0);
    tu_expect("cast", bufs[3], (double[]){2, 4, 6, 8}, 4, 0, 0);
    tu_expect("y again", bufs[4], (double[]){2, 4, 6, 8}, 4, 0, 0);
    cr_assert_eq(lf_buffer_dtype(bufs[2]), LF_BOOL);
    /* evaluating the same graph again gives the same results */
    cr_assert_eq(lf_eval(g, 2, (lf_node *[]){s, c}, (lf_buffer *[]){bufs[1], bufs[2]}), LF_OK);
    tu_expect("sum again", bufs[1], (double[]){10}, 1, 0, 0);
}

Test(eval, output_is_input) {
    lf_buffer *xb = tu_buf(ctx, LF_F64, 1, (int64_t[]){3}, (double[]){1, 2, 3});
    lf_node *x = lf_input(g, xb);
    lf_node *y = lf_mul(g, x, lf_const(g, LF_F64, 2));
    cr_assert_eq(lf_eval(g, 1, &y, &xb), LF_OK, "%s", lf_errmsg(ctx));
    tu_expect("x = x*2", xb, (double[]){2, 4, 6}, 3, 0, 0);
    /* the graph reads the buffer when evaluated: again doubles it */
    cr_assert_eq(lf_eval(g, 1, &y, &xb), LF_OK, "%s", lf_errmsg(ctx));
    tu_expect("x = x*2 again", xb, (double[]){4, 8, 12}, 3, 0, 0);

    /* an in-place result that reads other elements of its output: x.T*10 + x */
    lf_buffer *mb = tu_buf(ctx, LF_F64, 2, (int64_t[]){2, 2}, (double[]){1, 2, 3, 4});
    lf_node *m = lf_input(g, mb);
    lf_node *z = lf_add(g, lf_mul(g, lf_transpose(g, m), lf_const(g, LF_F64, 10)), m);
    cr_assert_eq(lf_eval(g, 1, &z, &mb), LF_OK, "%s", lf_errmsg(ctx));
    tu_expect("x = x.T*10 + x", mb, (double[]){11, 32, 23, 44}, 4, 0, 0);

    /* two outputs, one of them the input buffer, the other reading it */
    lf_buffer *pb = tu_buf(ctx, LF_I32, 1, (int64_t[]){3}, (double[]){1, 2, 3});
    lf_node *p = lf_input(g, pb);
    lf_node *p1 = lf_add(g, p, lf_const(g, LF_I32, 1));
    lf_node *ps = lf_reduce(g, LF_RED_SUM, p, 0, NULL, false);
    lf_buffer *sb = lf_buffer_new_like(ctx, ps);
    cr_assert_eq(lf_eval(g, 2, (lf_node *[]){p1, ps}, (lf_buffer *[]){pb, sb}), LF_OK, "%s",
                 lf_errmsg(ctx));
    tu_expect("p = p+1", pb, (double[]){2, 3, 4}, 3, 0, 0);
    tu_expect("sum(p) of the old p", sb, (double[]){6}, 1, 0, 0);
}

static void gaussian_case(lf_dtype t, int64_t n, double m, double s) {
    double *xs = malloc((size_t)n * sizeof *xs);
    for (int64_t i = 0; i < n; i++) xs[i] = tu_uniform(-4, 4);
    lf_node *x = lf_input(g, tu_buf(ctx, t, 1, &n, xs));
    lf_fn *f = parse("(x, m, s) -> exp(-0.5*((x-m)/s)**2) / (s*2.5066282746)");
    lf_node *y = lf_zipwith(g, f, 3, (lf_node *[]){x, lf_const(g, t, m), lf_const(g, t, s)});
    cr_assert(y != NULL, "%s", lf_errmsg(ctx));
    cr_assert_eq(lf_node_dtype(y), t, "gaussian_pdf dtype %s", lf_dtype_name(lf_node_dtype(y)));
    lf_buffer *yb = tu_eval1(ctx, g, y);
    double *got = malloc((size_t)n * sizeof *got);
    tu_read(yb, got);
    for (int64_t i = 0; i < n; i++) {
        double want;
        if (t == LF_F32) {
            float xf = (float)xs[i], mf = (float)m, sf = (float)s;
            float u = (xf - mf) / sf;
            want = expf(-0.5f * (u * u)) / (sf * 2.5066282746f);
        } else {
            double u = (xs[i] - m) / s;
            want = exp(-0.5 * (u * u)) / (s * 2.5066282746);
        }
        cr_assert(tu_close(got[i], want, t == LF_F32 ? 1e-5 : 1e-13, 0),
                  "gaussian_pdf(%s) at x=%.9g: %.9g, want %.9g", dtn[t], xs[i], got[i], want);
    }
    free(got);
    free(xs);
}

Test(eval, gaussian_pdf_f32) {
    gaussian_case(LF_F32, 1000, 0.0, 1.0);
    gaussian_case(LF_F32, 1000, 0.25, 1.5);
}

Test(eval, gaussian_pdf_f64) { gaussian_case(LF_F64, 1000, -0.5, 0.75); }

Test(eval, map_chains_and_builder) {
    lf_node *x = in1(LF_F64, 4, (double[]){-2, -1, 0.5, 3});
    /* map of map of zipwith */
    lf_node *a = map("(x) -> x*x + 1", x);
    lf_node *b = zip2("(a, b) -> a - b", a, x);
    lf_node *c = map("(v) -> -v ** 2", b);
    double want[4];
    double xv[4] = {-2, -1, 0.5, 3};
    for (int i = 0; i < 4; i++) {
        double t = xv[i] * xv[i] + 1 - xv[i];
        want[i] = -(t * t);
    }
    chk("chain", c, LF_F64, 4, want);
    /* a builder fn: (p0, p1) -> where(p0 > p1, p0 - p1, abs(p1) * 2.5) */
    lf_fn *f = lf_fn_new(g, 2);
    int p0 = lf_fn_param(f, 0), p1 = lf_fn_param(f, 1);
    int gt = lf_fn_op(f, LF_OP_GT, p0, p1, -1);
    int sub = lf_fn_op(f, LF_OP_SUB, p0, p1, -1);
    int ab = lf_fn_op(f, LF_OP_MUL, lf_fn_op(f, LF_OP_ABS, p1, -1, -1), lf_fn_const(f, 2.5), -1);
    int w = lf_fn_op(f, LF_OP_WHERE, gt, sub, ab);
    cr_assert(w >= 0, "%s", lf_errmsg(ctx));
    cr_assert_eq(lf_fn_set_result(f, w), LF_OK);
    lf_node *y = lf_zipwith(g, f, 2, (lf_node *[]){x, lf_const(g, LF_F64, -1)});
    chk("builder where", y, LF_F64, 4, (double[]){2.5, 2.5, 1.5, 4});
    /* map over every dtype: x*x + 1 */
    double v[3] = {0, 1, 3};
    for (int t = 0; t < 5; t++) {
        lf_node *m = map("(x) -> x*x + 1", in1((lf_dtype)t, 3, v));
        lf_dtype wt = t == LF_BOOL ? LF_I32 : (lf_dtype)t;
        chk("x*x+1 per dtype", m, wt, 3, t == LF_BOOL ? (double[]){1, 2, 2} : (double[]){1, 2, 10});
    }
}

/* ---- random nodes: Philox4x32-10 ------------------------------------------ */

/* A plain Philox4x32-10, written here from Salmon et al. (SC 2011). */
static void philox(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
    uint32_t c[4] = {ctr[0], ctr[1], ctr[2], ctr[3]}, k0 = key[0], k1 = key[1];
    for (int r = 0; r < 10; r++) {
        uint64_t a = (uint64_t)0xD2511F53u * c[0], b = (uint64_t)0xCD9E8D57u * c[2];
        uint32_t n[4] = {(uint32_t)(b >> 32) ^ c[1] ^ k0, (uint32_t)b, (uint32_t)(a >> 32) ^ c[3] ^ k1,
                         (uint32_t)a};
        memcpy(c, n, sizeof c);
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    memcpy(out, c, sizeof c);
}

/* The block of element i of a random node of this seed (lazyfuse.h). */
static void rblock(uint64_t seed, int64_t i, uint32_t x[4]) {
    uint32_t ctr[4] = {(uint32_t)(uint64_t)i, (uint32_t)((uint64_t)i >> 32), 0, 0};
    uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    philox(ctr, key, x);
}

/* Random123's kat_vectors, philox4x32 10: counter, key, expected. */
static const uint32_t kat[3][10] = {
    {0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
    {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0x408f276d, 0x41c83b0e,
     0xa20bc7c6, 0x6d5451fd},
    {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0, 0xd16cfe09, 0x94fdcceb,
     0x5001e420, 0x24126ea1},
};

/* The library's own Philox (the text every kernel's prelude carries). */
#include "graph/random.h"
#define LF_INLINE static inline __attribute__((unused))
GRAPH_RANDOM_CODE
#undef LF_INLINE

static void eval_raw(lf_node *n, void *out, size_t bytes) {
    lf_buffer *b = tu_eval1(ctx, g, n);
    cr_assert_eq(lf_buffer_read(b, out, bytes), LF_OK, "%s", lf_errmsg(ctx));
    lf_buffer_free(b);
}

Test(eval, random_philox_known_answers) {
    for (int v = 0; v < 3; v++) {
        uint32_t x[4], y[4];
        philox(kat[v], kat[v] + 4, x);
        lf_philox4x32_10(kat[v][0], kat[v][1], kat[v][2], kat[v][3], kat[v][4], kat[v][5], y);
        for (int j = 0; j < 4; j++) {
            cr_expect_eq(x[j], kat[v][6 + j], "test philox, vector %d word %d: %08x", v, j, x[j]);
            cr_expect_eq(y[j], kat[v][6 + j], "library philox, vector %d word %d: %08x", v, j, y[j]);
        }
    }
    /* through the API: element 0 of seed 0 is the first vector's x1:x0 */
    int64_t one = 1, b;
    eval_raw(lf_random(g, LF_I64, LF_RANDOM_BITS, 1, &one, 0), &b, sizeof b);
    cr_expect_eq((uint64_t)b, 0xe169c58d6627e8d5ull, "bits i64 [0] of seed 0: %016" PRIx64, (uint64_t)b);
}

/* Every dtype and distribution against the formulas of lazyfuse.h over a
 * 3-d shape, for seeds with both halves set. */
Test(eval, random_matches_plain_philox) {
    static const uint64_t seeds[] = {0, 1, 42, 0xdeadbeefcafef00dull, UINT64_MAX};
    int64_t sh[3] = {3, 5, 7}, n = 105;
    for (size_t s = 0; s < sizeof seeds / sizeof *seeds; s++) {
        uint64_t seed = seeds[s];
        int32_t bi32[105];
        int64_t bi64[105];
        float uf[105];
        double ud[105], nd[105];
        float nf[105];
        eval_raw(lf_random(g, LF_I32, LF_RANDOM_BITS, 3, sh, seed), bi32, sizeof bi32);
        eval_raw(lf_random(g, LF_I64, LF_RANDOM_BITS, 3, sh, seed), bi64, sizeof bi64);
        eval_raw(lf_random(g, LF_F32, LF_RANDOM_UNIFORM, 3, sh, seed), uf, sizeof uf);
        eval_raw(lf_random(g, LF_F64, LF_RANDOM_UNIFORM, 3, sh, seed), ud, sizeof ud);
        eval_raw(lf_random(g, LF_F64, LF_RANDOM_NORMAL, 3, sh, seed), nd, sizeof nd);
        eval_raw(lf_random(g, LF_F32, LF_RANDOM_NORMAL, 3, sh, seed), nf, sizeof nf);
        for (int64_t i = 0; i < n; i++) {
            uint32_t x[4];
            rblock(seed, i, x);
            uint64_t w = (uint64_t)x[1] << 32 | x[0];
            cr_expect_eq((uint32_t)bi32[i], x[0], "seed %" PRIu64 " i32 bits [%" PRId64 "]", seed, i);
            cr_expect_eq((uint64_t)bi64[i], w, "seed %" PRIu64 " i64 bits [%" PRId64 "]", seed, i);
            cr_expect_eq(uf[i], (float)(x[0] >> 8) * 0x1p-24f, "seed %" PRIu64 " f32 uniform [%" PRId64 "]", seed, i);
            cr_expect_eq(ud[i], (double)(w >> 11) * 0x1p-53, "seed %" PRIu64 " f64 uniform [%" PRId64 "]", seed, i);
            cr_expect(uf[i] >= 0 && uf[i] < 1 && ud[i] >= 0 && ud[i] < 1);
            /* the normal against libm's Box-Muller of the same u1, u2 */
            double u1 = (double)((w >> 12) * 2 + 1) * 0x1p-53;
            double u2 = (double)(((uint64_t)x[3] << 32 | x[2]) >> 11) * 0x1p-53;
            double z = sqrt(-2 * log(u1)) * cos(2 * M_PI * u2);
            cr_expect(fabs(nd[i] - z) <= 1e-14 * (1 + fabs(z)), "seed %" PRIu64 " normal [%" PRId64 "]: %.17g vs libm %.17g",
                      seed, i, nd[i], z);
            cr_expect_eq(nf[i], (float)nd[i], "f32 normal is the f64 one rounded");
        }
    }
}

/* The normal of a block as graph/random.h computed it before it was made
 * branch-free (issue 13): a loop that normalizes j, branches on sqrt(2) and
 * on the octant. The branch-free text must give the same value, bit for bit. */
static double normal_loop_ref(const uint32_t x[4]) {
    uint64_t j = (((uint64_t)x[1] << 32 | x[0]) >> 12) * 2 + 1;
    int s = 0;
    for (int b = 32; b; b >>= 1)
        if (j < (uint64_t)1 << (53 - b)) {
            j <<= b;
            s += b;
        }
    double m = (double)j * (1.0 / 4503599627370496.0), e = -(double)(s + 1);
    if (m > 1.4142135623730951) {
        m = m * 0.5;
        e = e + 1.0;
    }
    double f = (m - 1.0) / (m + 1.0), z = f * f, p = 1.0 / 23;
    static const double inv[] = {21, 19, 17, 15, 13, 11, 9, 7, 5, 3};
    for (int k = 0; k < 10; k++) p = p * z + 1.0 / inv[k];
    double lg = e * 6.93147180369123816490e-01 + (e * 1.90821492927058770002e-10 + 2.0 * f * (p * z) + 2.0 * f);
    double rad = sqrt(-2.0 * lg);
    uint64_t b = ((uint64_t)x[3] << 32 | x[2]) >> 11, r = b & (((uint64_t)1 << 50) - 1);
    int o = (int)(b >> 50);
    double a = (double)((o & 1) ? ((uint64_t)1 << 50) - r : r) * (1.0 / 1125899906842624.0) * 0.78539816339744830962;
    double a2 = a * a;
    /* 1/19!, 1/17!, .., 1/3! and 1/20!, .., 1/2! with their signs */
    static const double sc[] = {1.0 / 121645100408832000.0, -1.0 / 355687428096000.0, 1.0 / 1307674368000.0,
                                -1.0 / 6227020800.0,        1.0 / 39916800.0,        -1.0 / 362880.0,
                                1.0 / 5040.0,               -1.0 / 120.0,            1.0 / 6.0};
    static const double cc[] = {1.0 / 2432902008176640000.0, -1.0 / 6402373705728000.0, 1.0 / 20922789888000.0,
                                -1.0 / 87178291200.0,        1.0 / 479001600.0,         -1.0 / 3628800.0,
                                1.0 / 40320.0,               -1.0 / 720.0,              1.0 / 24.0,
                                -0.5};
    double sn = sc[0], cs = cc[0];
    for (int k = 1; k < 9; k++) sn = sn * a2 + sc[k];
    sn = a - a * (a2 * sn);
    for (int k = 1; k < 10; k++) cs = cs * a2 + cc[k];
    cs = 1.0 + a2 * cs;
    double cw = (o & 1) ? sn : cs, sw = (o & 1) ? cs : sn;
    int q = o >> 1;
    double c = q == 0 ? cw : q == 1 ? -sw : q == 2 ? -cw : sw;
    return rad * c;
}

/* Blocks chosen at the edges of the branch-free steps (every exponent of
 * u1, both sides of sqrt(2), every octant and its ends), then 10^6 elements
 * of two seeds: same bits as the loop-and-branch text, and libm's
 * Box-Muller within 1e-14 (relative to 1 + |z|). */
Test(eval, random_normal_branch_free_same_values, .timeout = 60) {
    uint64_t hi1[] = {0, 1, 2, 3, 0x6A09E667F3BCCull, 0x6A09E667F3BCDull, 0x6A09E667F3BCEull,
                      ((uint64_t)1 << 52) - 1, 0x123456789ABCull};
    uint64_t hi2[] = {0, 1, ((uint64_t)1 << 50) - 1, (uint64_t)1 << 50, ((uint64_t)1 << 50) + 1, 0x123456789ABCDull};
    int checked = 0;
    for (int sh = 0; sh < 53; sh++)
        for (size_t u = 0; u < sizeof hi1 / sizeof *hi1; u++)
            for (int o = 0; o < 8; o++)
                for (size_t v = 0; v < sizeof hi2 / sizeof *hi2; v++) {
                    uint64_t a = (hi1[u] & (((uint64_t)1 << 52) - 1)) >> sh; /* 52-bit a of u1 */
                    uint64_t bb = ((uint64_t)o << 50) | (hi2[v] & (((uint64_t)1 << 50) - 1));
                    if (v == 3) bb = (uint64_t)o << 50; /* (1 << 50) masked: the octant's start */
                    uint64_t w1 = a << 12, w2 = bb << 11;
                    uint32_t x[4] = {(uint32_t)w1, (uint32_t)(w1 >> 32), (uint32_t)w2, (uint32_t)(w2 >> 32)};
                    double got = lf_random_normal_of(x), want = normal_loop_ref(x);
                    cr_expect_eq(memcmp(&got, &want, sizeof got), 0, "block %08x %08x %08x %08x: %.17g, loop text %.17g", x[0],
                                 x[1], x[2], x[3], got, want);
                    double u1 = (double)(a * 2 + 1) * 0x1p-53, u2 = (double)bb * 0x1p-53;
                    double z = sqrt(-2 * log(u1)) * cos(2 * M_PI * u2);
                    cr_expect(fabs(got - z) <= 1e-14 * (1 + fabs(z)), "block %08x %08x %08x %08x: %.17g vs libm %.17g", x[0],
                              x[1], x[2], x[3], got, z);
                    checked++;
                }
    cr_expect_eq(checked, 53 * 9 * 8 * 6);
    int64_t bad = 0;
    for (uint64_t seed = 5; seed < 7; seed++)
        for (int64_t i = 0; i < 500000; i++) {
            uint32_t x[4];
            rblock(seed, i, x);
            double got = lf_random_normal(i, seed), want = normal_loop_ref(x);
            bad += memcmp(&got, &want, sizeof got) != 0;
        }
    cr_expect_eq(bad, 0, "%" PRId64 " of 10^6 elements differ from the loop text", bad);
}

/* Moments, tail fractions and a Kolmogorov-Smirnov statistic of 10^6 draws;
 * the bounds are 5 standard errors (KS: 1.95/sqrt(n), the 0.1% level), so a
 * wrong transform fails and a correct one passes (the seeds are fixed). */
static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void random_stats(lf_dtype t, lf_random_dist dist, uint64_t seed) {
    int64_t n = 1000000;
    double *v = malloc((size_t)n * sizeof *v);
    cr_assert(v);
    lf_buffer *b = tu_eval1(ctx, g, lf_random(g, t, dist, 1, &n, seed));
    tu_read(b, v);
    lf_buffer_free(b);
    double sum = 0, sq = 0, t1 = 0, t2 = 0, t3 = 0;
    for (int64_t i = 0; i < n; i++) {
        sum += v[i];
        double a = fabs(v[i]);
        t1 += a > 1;
        t2 += a > 2;
        t3 += a > 3;
    }
    double mean = sum / (double)n;
    for (int64_t i = 0; i < n; i++) sq += (v[i] - mean) * (v[i] - mean);
    double var = sq / (double)(n - 1), rn = sqrt((double)n);
    bool normal = dist == LF_RANDOM_NORMAL;
    double want_mean = normal ? 0 : 0.5, want_var = normal ? 1 : 1.0 / 12;
    /* sd of the variance estimate: sqrt((mu4 - s^4) / n); mu4 = 3 (normal), 1/80 (uniform) */
    double var_se = normal ? sqrt(2.0) / rn : sqrt(1.0 / 80 - 1.0 / 144) / rn;
    cr_expect(fabs(mean - want_mean) < 5 * sqrt(want_var) / rn, "%s mean %.6f", dtn[t], mean);
    cr_expect(fabs(var - want_var) < 5 * var_se, "%s variance %.6f", dtn[t], var);
    if (normal) {
        const double p[3] = {0.31731050786291, 0.04550026389635, 0.00269979606326};
        double got[3] = {t1 / (double)n, t2 / (double)n, t3 / (double)n};
        for (int k = 0; k < 3; k++)
            cr_expect(fabs(got[k] - p[k]) < 5 * sqrt(p[k] * (1 - p[k]) / (double)n), "%s P(|z| > %d) = %.6f, want %.6f",
                      dtn[t], k + 1, got[k], p[k]);
    }
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    double d = 0;
    for (int64_t i = 0; i < n; i++) {
        double F = normal ? 0.5 * erfc(-v[i] / sqrt(2.0)) : v[i];
        double lo = F - (double)i / (double)n, hi = (double)(i + 1) / (double)n - F;
        if (lo > d) d = lo;
        if (hi > d) d = hi;
    }
    cr_expect(d < 1.95 / rn, "%s KS statistic %.6f, bound %.6f", dtn[t], d, 1.95 / rn);
    cr_log_info("random %s %s: mean %.6f variance %.6f KS D %.6f (0.1%% bound %.6f)", normal ? "normal" : "uniform",
                dtn[t], mean, var, d, 1.95 / rn);
    free(v);
}

Test(eval, random_normal_statistics, .timeout = 120) {
    random_stats(LF_F64, LF_RANDOM_NORMAL, 2024);
    random_stats(LF_F32, LF_RANDOM_NORMAL, 7);
}

Test(eval, random_uniform_statistics, .timeout = 120) {
    random_stats(LF_F64, LF_RANDOM_UNIFORM, 99);
    random_stats(LF_F32, LF_RANDOM_UNIFORM, 123456789);
}

Test(eval, random_zero_size_and_0d) {
    lf_node *e = lf_random(g, LF_F32, LF_RANDOM_NORMAL, 2, (int64_t[]){3, 0}, 5);
    chk_shape(e, 2, (int64_t[]){3, 0});
    cr_assert_eq(lf_buffer_numel(tu_eval1(ctx, g, e)), 0);
    cr_assert_eq(lf_buffer_numel(tu_eval1(ctx, g, lf_random(g, LF_I32, LF_RANDOM_BITS, 1, (int64_t[]){0}, 5))), 0);
    /* 0-d: element 0; shape may be NULL */
    lf_node *z = lf_random(g, LF_F64, LF_RANDOM_UNIFORM, 0, NULL, 77);
    double v;
    eval_raw(z, &v, sizeof v);
    uint32_t x[4];
    rblock(77, 0, x);
    cr_expect_eq(v, (double)(((uint64_t)x[1] << 32 | x[0]) >> 11) * 0x1p-53);
    /* a sum over an empty random is 0 */
    chk("sum of empty random", lf_reduce(g, LF_RED_SUM, e, 0, NULL, false), LF_F32, 1, (double[]){0});
}

/* Views of a random node read the node's own elements: the value at a view
 * position is the element of the flat index the view maps it to. */
Test(eval, random_views) {
    int64_t sh[2] = {4, 6};
    uint64_t seed = 31337;
    lf_node *r = lf_random(g, LF_F64, LF_RANDOM_NORMAL, 2, sh, seed);
    double base[24];
    eval_raw(r, base, sizeof base);
    double want[48];
    /* transpose: t[i][j] = r[j][i] */
    for (int i = 0; i < 6; i++)
        for (int j = 0; j < 4; j++) want[i * 4 + j] = base[j * 6 + i];
    chk("transpose(random)", lf_transpose(g, r), LF_F64, 24, want);
    /* slice r[1:4, 5:0:-2] */
    int k = 0;
    for (int i = 1; i < 4; i++)
        for (int j = 5; j > 0; j -= 2) want[k++] = base[i * 6 + j];
    chk("random[1:4, 5:0:-2]",
        lf_slice(g, lf_slice(g, r, 0, 1, 4, 1), 1, 5, 0, -2), LF_F64, k, want);
    /* broadcast a row: [1,6] -> [8,6] */
    lf_node *row = lf_slice(g, r, 0, 2, 3, 1);
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 6; j++) want[i * 6 + j] = base[2 * 6 + j];
    chk("broadcast(random[2:3])", lf_broadcast_to(g, row, 2, (int64_t[]){8, 6}), LF_F64, 48, want);
    /* a fused map over a transposed view: 2*t + 1 */
    for (int i = 0; i < 6; i++)
        for (int j = 0; j < 4; j++) want[i * 4 + j] = 2 * base[j * 6 + i] + 1;
    chk("2*transpose(random)+1",
        lf_add(g, lf_mul(g, lf_transpose(g, r), lf_const(g, LF_F64, 2)), lf_const(g, LF_F64, 1)), LF_F64, 24, want);
    /* a reshape of a reversed view (two map steps) */
    lf_node *rev = lf_reshape(g, lf_slice(g, lf_transpose(g, r), 0, LF_NONE, LF_NONE, -1), 1, (int64_t[]){24});
    for (int i = 0; i < 6; i++)
        for (int j = 0; j < 4; j++) want[i * 4 + j] = base[j * 6 + (5 - i)];
    chk("reshape(transpose(random)[::-1])", rev, LF_F64, 24, want);
    /* the same node as an output and inside a sum: one value per element */
    double s = 0;
    for (int i = 0; i < 24; i++) s += base[i];
    chk_tol("sum(random)", lf_reduce(g, LF_RED_SUM, r, 0, NULL, false), LF_F64, 1, &s, 1e-12);
}

/* ---- scans (lf_scan) ------------------------------------------------------
 * An independent model of lazyfuse.h's statement: blocks of LF_SCAN_BLOCK,
 * block totals from the identity, offsets folded in block order, the
 * running value of a block starting at its offset; double accumulation for
 * floats, wrapping int64 for integers, NaN propagation for min/max. */

static double sm_fold_f(int op, double a, double x) {
    switch (op) {
    case LF_RED_SUM: return a + x;
    case LF_RED_PROD: return a * x;
    case LF_RED_MIN: return isnan(a) ? a : (isnan(x) || x < a) ? x : a;
    default: return isnan(a) ? a : (isnan(x) || x > a) ? x : a;
    }
}

static int64_t sm_fold_i(int op, int64_t a, int64_t x) {
    switch (op) {
    case LF_RED_SUM: return (int64_t)((uint64_t)a + (uint64_t)x);
    case LF_RED_PROD: return (int64_t)((uint64_t)a * (uint64_t)x);
    case LF_RED_MIN: return x < a ? x : a;
    default: return x > a ? x : a;
    }
}

/* y[i*stride] for i < n from x[i*stride]; floats (fl) or integers (in xi/yi). */
static void scan_model(int op, lf_dtype in, bool excl, int64_t n, int64_t stride, const double *x, double *y,
                       const int64_t *xi, int64_t *yi) {
    bool fl = is_float(in);
    double idf = op == LF_RED_SUM ? 0.0 : op == LF_RED_PROD ? 1.0 : op == LF_RED_MIN ? INFINITY : -INFINITY;
    int64_t idi = op == LF_RED_SUM ? 0 : op == LF_RED_PROD ? 1 : 0;
    if (op == LF_RED_MIN) idi = in == LF_BOOL ? 1 : in == LF_I32 ? INT32_MAX : INT64_MAX;
    if (op == LF_RED_MAX) idi = in == LF_BOOL ? 0 : in == LF_I32 ? INT32_MIN : INT64_MIN;
    double offf = idf, totf = idf, accf = idf;
    int64_t offi = idi, toti = idi, acci = idi;
    for (int64_t i = 0; i < n; i++) {
        if (i && i % LF_SCAN_BLOCK == 0) {
            offf = sm_fold_f(op, offf, totf), accf = offf, totf = idf;
            offi = sm_fold_i(op, offi, toti), acci = offi, toti = idi;
        }
        double bf = accf;
        int64_t bi = acci;
        if (fl) {
            accf = sm_fold_f(op, accf, x[i * stride]);
            totf = sm_fold_f(op, totf, x[i * stride]);
            y[i * stride] = excl ? bf : accf;
        } else {
            acci = sm_fold_i(op, acci, xi[i * stride]);
            toti = sm_fold_i(op, toti, xi[i * stride]);
            yi[i * stride] = excl ? bi : acci;
        }
    }
}

static lf_dtype scan_out_dtype(int op, lf_dtype in) {
    if ((op == LF_RED_SUM || op == LF_RED_PROD) && !is_float(in)) return LF_I64;
    return in;
}

/* One 1-d scan of n random values checked exactly against the model. */
static void scan_case(int op, lf_dtype t, bool excl, int64_t n) {
    double *x = malloc((size_t)(n ? n : 1) * sizeof *x), *y = malloc((size_t)(n ? n : 1) * sizeof *y);
    int64_t *xi = malloc((size_t)(n ? n : 1) * sizeof *xi), *yi = malloc((size_t)(n ? n : 1) * sizeof *yi);
    for (int64_t i = 0; i < n; i++) {
        double v = t == LF_BOOL ? (double)tu_randint(0, 1)
                   : is_float(t) ? (op == LF_RED_PROD ? tu_uniform(0.9, 1.1) : tu_uniform(-10, 10))
                                 : (double)tu_randint(op == LF_RED_PROD ? -3 : -1000, op == LF_RED_PROD ? 3 : 1000);
        if (t == LF_F32) v = (double)(float)v;
        x[i] = v;
        xi[i] = (int64_t)v;
    }
    lf_node *s = lf_scan(g, op, lf_input(g, tu_buf(ctx, t, 1, &n, x)), 0, excl);
    cr_assert(s != NULL, "%s", lf_errmsg(ctx));
    lf_dtype ot = scan_out_dtype(op, t);
    cr_assert_eq(lf_node_dtype(s), ot, "scan %s of %s: dtype %s", lf_reduce_op_name(op), dtn[t],
                 lf_dtype_name(lf_node_dtype(s)));
    scan_model(op, t, excl, n, 1, x, y, xi, yi);
    lf_buffer *b = tu_eval1(ctx, g, s);
    size_t es = lf_dtype_size(ot);
    void *raw = malloc((size_t)(n ? n : 1) * es);
    cr_assert_eq(lf_buffer_read(b, raw, (size_t)n * es), LF_OK);
    for (int64_t i = 0; i < n; i++) {
        bool ok;
        if (ot == LF_F32) ok = memcmp(&((float *)raw)[i], &(float){(float)y[i]}, 4) == 0;
        else if (ot == LF_F64) ok = memcmp(&((double *)raw)[i], &y[i], 8) == 0;
        else if (ot == LF_I64) ok = ((int64_t *)raw)[i] == yi[i];
        else if (ot == LF_I32) ok = ((int32_t *)raw)[i] == (int32_t)yi[i];
        else ok = ((uint8_t *)raw)[i] == (uint8_t)(yi[i] != 0);
        cr_assert(ok, "scan %s%s of %s, n=%lld: element %lld differs", lf_reduce_op_name(op), excl ? " exclusive" : "",
                  dtn[t], (long long)n, (long long)i);
    }
    lf_buffer_free(b);
    free(raw), free(x), free(y), free(xi), free(yi);
}

Test(eval, scan_every_op_and_dtype) {
    static const int ops[4] = {LF_RED_SUM, LF_RED_PROD, LF_RED_MIN, LF_RED_MAX};
    for (int o = 0; o < 4; o++)
        for (int t = 0; t <= LF_F64; t++) /* the first five: scan_case's model reads them */
            for (int ex = 0; ex < 2; ex++) {
                scan_case(ops[o], (lf_dtype)t, ex, 1);
                scan_case(ops[o], (lf_dtype)t, ex, 37);
            }
}

/* Rows longer than a block: the blocked order, exactly. */
Test(eval, scan_blocked_order) {
    int64_t sizes[] = {LF_SCAN_BLOCK - 1, LF_SCAN_BLOCK, LF_SCAN_BLOCK + 1, 3 * LF_SCAN_BLOCK + 17};
    for (int k = 0; k < 4; k++) {
        scan_case(LF_RED_SUM, LF_F32, false, sizes[k]);
        scan_case(LF_RED_SUM, LF_F64, true, sizes[k]);
        scan_case(LF_RED_PROD, LF_F64, false, sizes[k]);
        scan_case(LF_RED_SUM, LF_I32, false, sizes[k]);
        scan_case(LF_RED_MAX, LF_F32, true, sizes[k]);
    }
}

/* Batched: every axis of a [3,5,4] array, and axis -1 == axis 2. */
Test(eval, scan_batched_axes) {
    int64_t sh[3] = {3, 5, 4};
    double x[60], y[60];
    for (int i = 0; i < 60; i++) x[i] = (double)(int)tu_randint(-50, 50) / 4;
    lf_node *in = lf_input(g, tu_buf(ctx, LF_F64, 3, sh, x));
    for (int ax = -1; ax < 3; ax++) {
        int a = ax < 0 ? 2 : ax;
        int64_t st[3] = {20, 4, 1};
        for (int i = 0; i < 60; i++) {
            int64_t idx[3] = {i / 20, i / 4 % 5, i % 4};
            if (idx[a] != 0) continue;
            scan_model(LF_RED_SUM, LF_F64, ax == 1, sh[a], st[a], x + i, y + i, NULL, NULL);
        }
        char what[64];
        snprintf(what, sizeof what, "scan sum axis %d", ax);
        lf_node *s = lf_scan(g, LF_RED_SUM, in, ax, ax == 1);
        chk_shape(s, 3, sh);
        chk(what, s, LF_F64, 60, y);
    }
}

Test(eval, scan_nan_inf) {
    int64_t n = 6;
    lf_node *x = lf_input(g, tu_buf(ctx, LF_F64, 1, &n, (double[]){3, 1, NAN, 0, -INFINITY, 5}));
    chk("cummin", lf_scan(g, LF_RED_MIN, x, 0, false), LF_F64, 6, (double[]){3, 1, NAN, NAN, NAN, NAN});
    chk("cummax", lf_scan(g, LF_RED_MAX, x, -1, false), LF_F64, 6, (double[]){3, 3, NAN, NAN, NAN, NAN});
    chk("cumsum", lf_scan(g, LF_RED_SUM, x, 0, false), LF_F64, 6, (double[]){3, 4, NAN, NAN, NAN, NAN});
    lf_node *y = lf_input(g, tu_buf(ctx, LF_F32, 1, &n, (double[]){1, INFINITY, 2, -INFINITY, 0, 1}));
    chk("cumsum inf", lf_scan(g, LF_RED_SUM, y, 0, false), LF_F32, 6, (double[]){1, INFINITY, INFINITY, NAN, NAN, NAN});
    chk("cummin excl", lf_scan(g, LF_RED_MIN, y, 0, true), LF_F32, 6,
        (double[]){INFINITY, 1, 1, 1, -INFINITY, -INFINITY});
    chk("cumprod excl", lf_scan(g, LF_RED_PROD, y, 0, true), LF_F32, 6, (double[]){1, 1, INFINITY, INFINITY, -INFINITY, NAN});
}

Test(eval, scan_exclusive_identities) {
    int64_t n = 3;
    lf_node *b = lf_input(g, tu_buf(ctx, LF_BOOL, 1, &n, (double[]){0, 1, 1}));
    chk("bool min excl", lf_scan(g, LF_RED_MIN, b, 0, true), LF_BOOL, 3, (double[]){1, 0, 0});
    chk("bool max excl", lf_scan(g, LF_RED_MAX, b, 0, true), LF_BOOL, 3, (double[]){0, 0, 1});
    chk("bool sum", lf_scan(g, LF_RED_SUM, b, 0, false), LF_I64, 3, (double[]){0, 1, 2});
    lf_node *i = lf_input(g, tu_buf(ctx, LF_I32, 1, &n, (double[]){5, -2, 7}));
    chk("i32 min excl", lf_scan(g, LF_RED_MIN, i, 0, true), LF_I32, 3, (double[]){INT32_MAX, 5, -2});
    chk("i32 max excl", lf_scan(g, LF_RED_MAX, i, 0, true), LF_I32, 3, (double[]){INT32_MIN, 5, 5});
    chk("i32 prod excl", lf_scan(g, LF_RED_PROD, i, 0, true), LF_I64, 3, (double[]){1, 5, -10});
    chk("i32 sum excl", lf_scan(g, LF_RED_SUM, i, 0, true), LF_I64, 3, (double[]){0, 5, 3});
}

Test(eval, scan_integer_wrap) {
    int64_t n = 3;
    lf_buffer *xb = lf_buffer_new(ctx, LF_I64, 1, &n);
    int64_t x[3] = {INT64_MAX, 1, INT64_MIN}, y[3];
    cr_assert_eq(lf_buffer_write(xb, x, sizeof x), LF_OK);
    eval_raw(lf_scan(g, LF_RED_SUM, lf_input(g, xb), 0, false), y, sizeof y);
    cr_expect_eq(y[0], INT64_MAX);
    cr_expect_eq(y[1], INT64_MIN);
    cr_expect_eq(y[2], 0);
    eval_raw(lf_scan(g, LF_RED_PROD, lf_input(g, xb), 0, false), y, sizeof y);
    cr_expect_eq(y[1], INT64_MAX);
    cr_expect_eq(y[2], INT64_MIN); /* INT64_MAX * INT64_MIN wraps to INT64_MIN */
    eval_raw(lf_scan(g, LF_RED_MIN, lf_input(g, xb), 0, true), y, sizeof y);
    cr_expect_eq(y[0], INT64_MAX);
    cr_expect_eq(y[2], 1);
    lf_buffer_free(xb);
}

Test(eval, scan_zero_size_and_unit_axes) {
    lf_node *z = lf_input(g, tu_buf(ctx, LF_F32, 2, (int64_t[]){3, 0}, NULL));
    lf_node *s = lf_scan(g, LF_RED_MAX, z, 1, false);
    chk_shape(s, 2, (int64_t[]){3, 0});
    cr_assert_eq(lf_buffer_numel(tu_eval1(ctx, g, s)), 0);
    cr_assert_eq(lf_buffer_numel(tu_eval1(ctx, g, lf_scan(g, LF_RED_SUM, z, 0, true))), 0);
    lf_node *u = lf_input(g, tu_buf(ctx, LF_F64, 2, (int64_t[]){4, 1}, (double[]){1, 2, 3, 4}));
    chk("size-1 axis", lf_scan(g, LF_RED_SUM, u, 1, false), LF_F64, 4, (double[]){1, 2, 3, 4});
    chk("size-1 axis excl", lf_scan(g, LF_RED_PROD, u, -1, true), LF_F64, 4, (double[]){1, 1, 1, 1});
    chk("axis 0", lf_scan(g, LF_RED_SUM, u, 0, false), LF_F64, 4, (double[]){1, 3, 6, 10});
}

/* lf_scan_dtype (issue 26): NumPy's cumsum(x, dtype=t) and cumprod(x,
 * dtype=t): x cast to t, the result in t, integer accumulation wrapping in t.
 * Expected values are NumPy's (np.cumsum(a, dtype=...)). On a fused backend
 * the cast in and out run in the scan's one kernel. */
Test(eval, scan_accumulator_dtype) {
    int64_t n = 4;
    lf_node *i = lf_input(g, tu_buf(ctx, LF_I32, 1, &n, (double[]){INT32_MAX, 1, 5, INT32_MIN}));
    chk("cumsum(i32, dtype=i64)", lf_scan_dtype(g, LF_RED_SUM, i, 0, false, LF_I64), LF_I64, 4,
        (double[]){2147483647.0, 2147483648.0, 2147483653.0, 5});
    chk("cumsum(i32, dtype=i32) wraps", lf_scan_dtype(g, LF_RED_SUM, i, 0, false, LF_I32), LF_I32, 4,
        (double[]){INT32_MAX, INT32_MIN, INT32_MIN + 5, 5});
    chk("cumprod(i32, dtype=i32) wraps", lf_scan_dtype(g, LF_RED_PROD, i, 0, false, LF_I32), LF_I32, 4,
        (double[]){INT32_MAX, INT32_MAX, 2147483643.0, INT32_MIN});
    chk("cumsum(i32, dtype=f64) exclusive", lf_scan_dtype(g, LF_RED_SUM, i, -1, true, LF_F64), LF_F64, 4,
        (double[]){0, 2147483647.0, 2147483648.0, 2147483653.0});
    /* f32 input in f64: no rounding to float between steps */
    lf_node *f = lf_input(g, tu_buf(ctx, LF_F32, 1, &n, (double[]){1e8, 1, 1, -0.0}));
    chk("cumsum(f32, dtype=f64)", lf_scan_dtype(g, LF_RED_SUM, f, 0, false, LF_F64), LF_F64, 4,
        (double[]){1e8, 100000001, 100000002, 100000002});
    chk("cumsum(f32) as f32", lf_scan_dtype(g, LF_RED_SUM, f, 0, false, LF_F32), LF_F32, 4,
        (double[]){1e8, 1e8, 100000000 /* 100000002 rounded to float */, 1e8});
    /* floats to integers: each value cast (truncated) before the sum */
    lf_node *d = lf_input(g, tu_buf(ctx, LF_F64, 1, &n, (double[]){1.7, -2.5, 3.9, NAN}));
    chk("cumsum(f64, dtype=i32)", lf_scan_dtype(g, LF_RED_SUM, d, 0, false, LF_I32), LF_I32, 4,
        (double[]){1, -1, 2, 2});
    chk("cummax(f64, dtype=i64) exclusive", lf_scan_dtype(g, LF_RED_MAX, d, 0, true, LF_I64), LF_I64, 4,
        (double[]){(double)INT64_MIN, 1, 1, 3});
    /* bool: a running or (sum) and and (prod) */
    int64_t m = 5;
    lf_node *b = lf_input(g, tu_buf(ctx, LF_I32, 1, &m, (double[]){0, 0, 3, 0, -1}));
    chk("cumsum(dtype=bool)", lf_scan_dtype(g, LF_RED_SUM, b, 0, false, LF_BOOL), LF_BOOL, 5,
        (double[]){0, 0, 1, 1, 1});
    lf_node *b2 = lf_input(g, tu_buf(ctx, LF_I64, 1, &m, (double[]){1, 2, 4, 0, 3}));
    chk("cumprod(dtype=bool)", lf_scan_dtype(g, LF_RED_PROD, b2, 0, false, LF_BOOL), LF_BOOL, 5,
        (double[]){1, 1, 1, 0, 0});
    chk("cumprod(dtype=bool) exclusive", lf_scan_dtype(g, LF_RED_PROD, b2, 0, true, LF_BOOL), LF_BOOL, 5,
        (double[]){1, 1, 1, 1, 0});
    /* 2-d along axis 0, zero-size rows, the same dtype as x (a plain scan) */
    lf_node *x2 = lf_input(g, tu_buf(ctx, LF_I32, 2, (int64_t[]){3, 2}, (double[]){1, 2, 3, 4, 5, 6}));
    chk("cumsum(2-d, axis 0, dtype=i32)", lf_scan_dtype(g, LF_RED_SUM, x2, 0, false, LF_I32), LF_I32, 6,
        (double[]){1, 2, 4, 6, 9, 12});
    lf_node *z = lf_input(g, tu_buf(ctx, LF_I32, 2, (int64_t[]){0, 3}, NULL));
    lf_node *zs = lf_scan_dtype(g, LF_RED_SUM, z, 1, false, LF_I32);
    chk_shape(zs, 2, (int64_t[]){0, 3});
    chk("cumsum(zero-size, dtype=i32)", zs, LF_I32, 0, NULL);
    lf_node *same = lf_scan_dtype(g, LF_RED_MIN, d, 0, false, LF_F64);
    chk("cummin(f64, dtype=f64)", same, LF_F64, 4, (double[]){1.7, -2.5, -2.5, NAN});
    /* fused: cast in, scan, cast out in one kernel */
    lf_node *one = lf_scan_dtype(g, LF_RED_SUM, i, 0, false, LF_I32);
    lf_buffer *ob = tu_eval1(ctx, g, one);
    lf_eval_stats st;
    cr_assert_eq(lf_ctx_last_stats(ctx, &st), LF_OK);
    if (lf_ctx_backend(ctx) != LF_BACKEND_REFERENCE)
        cr_expect_eq(st.kernels, 1, "cumsum(i32, dtype=i32): %d kernels, want 1", st.kernels);
    lf_buffer_free(ob);
}

/* A scan of an elementwise expression and an expression of a scan. */
Test(eval, scan_in_expressions) {
    int64_t n = 5;
    lf_node *x = lf_input(g, tu_buf(ctx, LF_F64, 1, &n, (double[]){1, 2, 3, 4, 5}));
    lf_node *c = lf_scan(g, LF_RED_SUM, lf_mul(g, x, x), 0, false);
    chk("cumsum(x*x)/5", lf_div(g, c, lf_const(g, LF_F64, 5)), LF_F64, 5, (double[]){0.2, 1, 2.8, 6, 11});
    chk("cumsum reversed", lf_slice(g, c, 0, LF_NONE, LF_NONE, -1), LF_F64, 5, (double[]){55, 30, 14, 5, 1});
}

/* ---- gather (issue 13) ------------------------------------------------------------------- */

/* NumPy's take: a 1-d x and any-shaped idx, negative indices from the end. */
Test(eval, gather_take) {
    double xv[10], want[6];
    for (int i = 0; i < 10; i++) xv[i] = 10 + i;
    lf_node *x = in1(LF_F32, 10, xv);
    lf_node *i1 = in1(LF_I64, 5, (double[]){3, -1, 0, 9, -10});
    chk("take(x, [3,-1,0,9,-10])", lf_gather(g, x, 0, i1), LF_F32, 5, (double[]){13, 19, 10, 19, 10});
    lf_node *i2 = inS(LF_I32, 2, (int64_t[]){2, 3}, (double[]){1, 2, 3, -2, -3, 4});
    lf_node *t2 = lf_gather(g, x, -1, i2);
    chk_shape(t2, 2, (int64_t[]){2, 3});
    chk("take(x, 2x3 i32)", t2, LF_F32, 6, (double[]){11, 12, 13, 18, 17, 14});
    /* 0-d index */
    lf_node *i0 = lf_input(g, tu_buf(ctx, LF_I64, 0, NULL, (double[]){7}));
    chk("take(x, 7)", lf_gather(g, x, 0, i0), LF_F32, 1, (double[]){17});
    /* a computed index is stored first; a computed x too */
    lf_node *ci = lf_cast(g, map("(i) -> (i * 3) % 10", lf_iota(g, LF_I64, 6)), LF_I64);
    lf_node *cx = map("(v) -> v * 2", x);
    for (int i = 0; i < 6; i++) want[i] = 2 * xv[(i * 3) % 10];
    chk("take(2x, (3i)%10)", lf_gather(g, cx, 0, ci), LF_F32, 6, want);
    /* NaN and infinities are gathered as they are */
    lf_node *xn = in1(LF_F64, 3, (double[]){NAN, INFINITY, -0.0});
    lf_node *tn = lf_gather(g, xn, 0, in1(LF_I32, 4, (double[]){2, 0, 1, 0}));
    val *v = eval_vals(tn);
    cr_expect(v[0].f == 0 && signbit(v[0].f), "-0.0 gathered");
    cr_expect(isnan(v[1].f) && isinf(v[2].f) && isnan(v[3].f), "NaN and Inf gathered");
    free(v);
}

/* take_along_axis on 2-d and 3-d arrays, with broadcasting of idx and x. */
Test(eval, gather_along_axis) {
    double xv[12], want[24];
    for (int i = 0; i < 12; i++) xv[i] = i;
    lf_node *x = inS(LF_F64, 2, (int64_t[]){3, 4}, xv); /* x[r][c] = 4r + c */
    /* axis 1, idx [3,2] */
    double iv[6] = {3, 0, -1, 1, 2, 2};
    lf_node *a1 = lf_gather(g, x, 1, inS(LF_I32, 2, (int64_t[]){3, 2}, iv));
    chk_shape(a1, 2, (int64_t[]){3, 2});
    for (int r = 0; r < 3; r++)
        for (int j = 0; j < 2; j++) {
            int64_t c = (int64_t)iv[r * 2 + j];
            want[r * 2 + j] = 4 * r + (c < 0 ? c + 4 : c);
        }
    chk("take_along_axis(x, idx, 1)", a1, LF_F64, 6, want);
    /* axis 0, idx [2,1] broadcast over the columns: rows picked */
    lf_node *a0 = lf_gather(g, x, 0, inS(LF_I64, 2, (int64_t[]){2, 1}, (double[]){2, -3}));
    chk_shape(a0, 2, (int64_t[]){2, 4});
    for (int c = 0; c < 4; c++) want[c] = 8 + c, want[4 + c] = c;
    chk("take_along_axis(x, [[2],[-3]], 0)", a0, LF_F64, 8, want);
    /* x broadcast: x [1,4], idx [3,2] on axis 1 */
    lf_node *xr = inS(LF_F64, 2, (int64_t[]){1, 4}, (double[]){5, 6, 7, 8});
    lf_node *ab = lf_gather(g, xr, 1, inS(LF_I32, 2, (int64_t[]){3, 2}, iv));
    for (int r = 0; r < 3; r++)
        for (int j = 0; j < 2; j++) {
            int64_t c = (int64_t)iv[r * 2 + j];
            want[r * 2 + j] = 5 + (c < 0 ? c + 4 : c);
        }
    chk("take_along_axis(x[1,4], idx[3,2], 1)", ab, LF_F64, 6, want);
    /* 3-d, middle axis, idx [2,1,3] broadcast over axis 1's... x [2,3,4] */
    double x3[24];
    for (int i = 0; i < 24; i++) x3[i] = i;
    lf_node *x3n = inS(LF_I32, 3, (int64_t[]){2, 3, 4}, x3);
    double i3[8] = {0, 2, 1, 0, 2, 2, 1, 0};
    lf_node *g3 = lf_gather(g, x3n, 1, inS(LF_I64, 3, (int64_t[]){2, 1, 4}, i3));
    chk_shape(g3, 3, (int64_t[]){2, 1, 4});
    for (int a = 0; a < 2; a++)
        for (int c = 0; c < 4; c++) want[a * 4 + c] = a * 12 + i3[a * 4 + c] * 4 + c;
    chk("take_along_axis(3-d, axis 1)", g3, LF_I32, 8, want);
    /* transposed x (a view is materialized first) and a reduction over a gather */
    lf_node *gt = lf_gather(g, lf_transpose(g, x), 1, inS(LF_I32, 2, (int64_t[]){4, 1}, (double[]){1, 2, 0, 1}));
    chk("take_along_axis(x.T, [[1],[2],[0],[1]], 1)", gt, LF_F64, 4, (double[]){4, 9, 2, 7});
    chk("sum(take_along_axis)", lf_reduce(g, LF_RED_SUM, gt, 0, NULL, false), LF_F64, 1, (double[]){22});
}

/* exp(x[idx]) * w and zero-size gathers. */
Test(eval, gather_fused_and_empty) {
    int64_t n = 1000, m = 777;
    double *xv = malloc(sizeof(double) * n), *iv = malloc(sizeof(double) * m), *wv = malloc(sizeof(double) * m),
           *want = malloc(sizeof(double) * m);
    for (int64_t i = 0; i < n; i++) xv[i] = tu_uniform(-2, 2);
    for (int64_t j = 0; j < m; j++) {
        iv[j] = (double)tu_randint(-n, n - 1);
        wv[j] = tu_uniform(-1, 1);
        int64_t t = (int64_t)iv[j] < 0 ? (int64_t)iv[j] + n : (int64_t)iv[j];
        want[j] = exp(xv[t]) * wv[j];
    }
    lf_node *x = in1(LF_F64, n, xv), *idx = in1(LF_I64, m, iv), *w = in1(LF_F64, m, wv);
    chk_tol("exp(x[idx])*w", zip2("(a, b) -> exp(a) * b", lf_gather(g, x, 0, idx), w), LF_F64, m, want, 1e-15);
    /* zero-size: an empty index, an empty x with an empty index, a zero extent elsewhere */
    chk("take(x, [])", lf_gather(g, x, 0, in1(LF_I64, 0, NULL)), LF_F64, 0, NULL);
    chk("take([], [])", lf_gather(g, in1(LF_F32, 0, NULL), 0, in1(LF_I32, 0, NULL)), LF_F32, 0, NULL);
    lf_node *e2 = lf_gather(g, inS(LF_F32, 2, (int64_t[]){0, 3}, NULL), 1, inS(LF_I64, 2, (int64_t[]){1, 5}, (double[]){0, 1, 2, 0, 1}));
    chk_shape(e2, 2, (int64_t[]){0, 5});
    chk("take_along_axis([0,3], [1,5], 1)", e2, LF_F32, 0, NULL);
    free(xv), free(iv), free(wv), free(want);
}

/* lf_take (issue 26): NumPy's take along any axis. An embedding lookup
 * (table [V, D], idx [N] -> [N, D]) without reshaping idx; idx of 0, 1, 2
 * dimensions on every axis of a 3-d x, checked against loops; zero sizes. */
Test(eval, take_any_axis) {
    /* embedding: 5 rows of 3 */
    double tv[15], want[64];
    for (int i = 0; i < 15; i++) tv[i] = 100 + i;
    lf_node *table = inS(LF_F32, 2, (int64_t[]){5, 3}, tv);
    double iv[4] = {4, 0, -1, 2};
    lf_node *e = lf_take(g, table, 0, in1(LF_I32, 4, iv));
    chk_shape(e, 2, (int64_t[]){4, 3});
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 3; c++) want[r * 3 + c] = tv[(((int)iv[r] + 5) % 5) * 3 + c];
    chk("take(table, idx, 0)", e, LF_F32, 12, want);
    /* columns of the table: axis 1 and -1 */
    lf_node *cidx = in1(LF_I64, 2, (double[]){2, -3});
    lf_node *ec = lf_take(g, table, -1, cidx);
    chk_shape(ec, 2, (int64_t[]){5, 2});
    for (int r = 0; r < 5; r++) want[r * 2] = tv[r * 3 + 2], want[r * 2 + 1] = tv[r * 3];
    chk("take(table, [2,-3], -1)", ec, LF_F32, 10, want);
    /* 3-d x [2,3,4], idx 0-d, 1-d and 2-d on each axis */
    double xv[24];
    for (int i = 0; i < 24; i++) xv[i] = i * 0.5 - 3;
    int64_t xs[3] = {2, 3, 4};
    lf_node *x = inS(LF_F64, 3, xs, xv);
    double i2v[4] = {1, 0, -1, 1};
    lf_node *i0 = lf_input(g, tu_buf(ctx, LF_I64, 0, NULL, (double[]){-1}));
    lf_node *i1 = in1(LF_I32, 3, (double[]){1, 1, 0});
    lf_node *i2 = inS(LF_I64, 2, (int64_t[]){2, 2}, i2v);
    lf_node *idxs[3] = {i0, i1, i2};
    const double *ivals[3] = {(double[]){-1}, (double[]){1, 1, 0}, i2v};
    int64_t ishapes[3][2] = {{0, 0}, {3, 0}, {2, 2}};
    int indims[3] = {0, 1, 2};
    for (int axis = 0; axis < 3; axis++)
        for (int k = 0; k < 3; k++) {
            lf_node *t = lf_take(g, x, axis, idxs[k]);
            cr_assert(t != NULL, "take axis %d idx %d-d: %s", axis, indims[k], lf_graph_errmsg(g));
            /* the expected shape: x's with the axis replaced by idx's */
            int64_t shape[LF_MAX_DIMS];
            int nd = 0;
            for (int d = 0; d < axis; d++) shape[nd++] = xs[d];
            for (int d = 0; d < indims[k]; d++) shape[nd++] = ishapes[k][d];
            for (int d = axis + 1; d < 3; d++) shape[nd++] = xs[d];
            chk_shape(t, nd, shape);
            int64_t ni = 1, before = 1, after = 1;
            for (int d = 0; d < indims[k]; d++) ni *= ishapes[k][d];
            for (int d = 0; d < axis; d++) before *= xs[d];
            for (int d = axis + 1; d < 3; d++) after *= xs[d];
            int64_t cnt = 0;
            for (int64_t b = 0; b < before; b++)
                for (int64_t j = 0; j < ni; j++)
                    for (int64_t a = 0; a < after; a++) {
                        int64_t v = (int64_t)ivals[k][j];
                        if (v < 0) v += xs[axis];
                        want[cnt++] = xv[(b * xs[axis] + v) * after + a];
                    }
            char what[64];
            snprintf(what, sizeof what, "take(x[2,3,4], %d-d idx, axis %d)", indims[k], axis);
            chk(what, t, LF_F64, cnt, want);
        }
    /* fused with its consumer: exp(table[idx]) * 2 */
    lf_node *ex = map("(v) -> v * 2", lf_take(g, table, 0, in1(LF_I64, 2, (double[]){1, 3})));
    for (int c = 0; c < 3; c++) want[c] = 2 * tv[3 + c], want[3 + c] = 2 * tv[9 + c];
    chk("take(table, [1,3], 0) * 2", ex, LF_F32, 6, want);
    lf_eval_stats st;
    cr_assert_eq(lf_ctx_last_stats(ctx, &st), LF_OK);
    if (lf_ctx_backend(ctx) != LF_BACKEND_REFERENCE) { /* one kernel, idx read where it lies */
        cr_expect_eq(st.kernels, 1, "take(table, idx) * 2: %d kernels, want 1", st.kernels);
        cr_expect_eq(st.bytes_materialized, 0, "take(table, idx) * 2: %zu bytes stored", st.bytes_materialized);
    }
    /* zero sizes: an empty index, an empty table */
    lf_node *z1 = lf_take(g, table, 0, in1(LF_I64, 0, NULL));
    chk_shape(z1, 2, (int64_t[]){0, 3});
    chk("take(table, [], 0)", z1, LF_F32, 0, NULL);
    lf_node *z2 = lf_take(g, inS(LF_F32, 2, (int64_t[]){0, 3}, NULL), 1, inS(LF_I32, 2, (int64_t[]){1, 2}, (double[]){0, 2}));
    chk_shape(z2, 3, (int64_t[]){0, 1, 2});
    chk("take([0,3], [1,2], 1)", z2, LF_F32, 0, NULL);
}

/* ---- scatter and bincount (issue 13) ------------------------------------------------------- */

/* Every op with duplicates, SET's highest position, negative indices. */
Test(eval, scatter_ops_with_duplicates) {
    double dv[5] = {1, 2, 3, 4, 5};
    lf_node *dst = in1(LF_F64, 5, dv);
    lf_node *idx = in1(LF_I64, 6, (double[]){0, 2, -1, 2, 0, 2});
    lf_node *vals_ = in1(LF_F64, 6, (double[]){10, 20, 30, 40, 50, 60});
    chk("scatter set", lf_scatter(g, LF_SCATTER_SET, dst, 0, idx, vals_), LF_F64, 5, (double[]){50, 2, 60, 4, 30});
    chk("scatter add", lf_scatter(g, LF_SCATTER_ADD, dst, 0, idx, vals_), LF_F64, 5, (double[]){61, 2, 123, 4, 35});
    chk("scatter min", lf_scatter(g, LF_SCATTER_MIN, dst, 0, idx, vals_), LF_F64, 5, (double[]){1, 2, 3, 4, 5});
    chk("scatter max", lf_scatter(g, LF_SCATTER_MAX, dst, 0, idx, vals_), LF_F64, 5, (double[]){50, 2, 60, 4, 30});
    chk("scatter prod", lf_scatter(g, LF_SCATTER_PROD, dst, 0, idx, vals_), LF_F64, 5,
        (double[]){500, 2, 3 * 20 * 40 * 60, 4, 150});
    /* integer dst, float values converted first (truncation), 0-d values broadcast */
    lf_node *di = in1(LF_I32, 4, (double[]){0, 0, 0, 0});
    lf_node *vf = in1(LF_F32, 3, (double[]){1.9, -2.5, 7.2});
    chk("scatter add i32 <- f32", lf_scatter(g, LF_SCATTER_ADD, di, 0, in1(LF_I32, 3, (double[]){3, 3, 1}), vf), LF_I32, 4,
        (double[]){0, 7, 0, -1});
    lf_node *one = lf_const(g, LF_I64, 5);
    chk("scatter set of a constant", lf_scatter(g, LF_SCATTER_SET, di, 0, in1(LF_I64, 2, (double[]){-4, 2}), one), LF_I32, 4,
        (double[]){5, 0, 5, 0});
    /* NaN: min/max propagate it, set and add carry it */
    lf_node *dn = in1(LF_F32, 3, (double[]){1, 1, 1});
    lf_node *in3 = in1(LF_I64, 3, (double[]){0, 1, 0});
    lf_node *vn = in1(LF_F32, 3, (double[]){NAN, -3, 5});
    val *v = eval_vals(lf_scatter(g, LF_SCATTER_MIN, dn, 0, in3, vn));
    cr_expect(isnan(v[0].f) && v[1].f == -3 && v[2].f == 1, "min with NaN: %g %g %g", v[0].f, v[1].f, v[2].f);
    free(v);
    v = eval_vals(lf_scatter(g, LF_SCATTER_MAX, dn, 0, in3, vn));
    cr_expect(isnan(v[0].f) && v[1].f == 1 && v[2].f == 1, "max with NaN");
    free(v);
    v = eval_vals(lf_scatter(g, LF_SCATTER_SET, dn, 0, in3, vn));
    cr_expect(v[0].f == 5 && v[1].f == -3, "set: the later position wins over NaN");
    free(v);
}

/* put_along_axis on 2-d arrays; a 1-d dst with a 2-d index. */
Test(eval, scatter_along_axis) {
    double dv[12] = {0};
    lf_node *dst = inS(LF_F64, 2, (int64_t[]){3, 4}, dv);
    /* axis 1: row r gets values at columns idx[r] */
    lf_node *idx = inS(LF_I64, 2, (int64_t[]){3, 2}, (double[]){0, 3, 1, 1, -1, 0});
    lf_node *vals_ = inS(LF_F64, 2, (int64_t[]){3, 2}, (double[]){1, 2, 3, 4, 5, 6});
    chk("put_along_axis set", lf_scatter(g, LF_SCATTER_SET, dst, 1, idx, vals_), LF_F64, 12,
        (double[]){1, 0, 0, 2, 0, 4, 0, 0, 6, 0, 0, 5});
    chk("add.at along axis 1", lf_scatter(g, LF_SCATTER_ADD, dst, 1, idx, vals_), LF_F64, 12,
        (double[]){1, 0, 0, 2, 0, 7, 0, 0, 6, 0, 0, 5});
    /* axis 0 with idx [1,4] broadcast over... values [1,1] broadcast */
    lf_node *i0 = inS(LF_I32, 2, (int64_t[]){1, 4}, (double[]){2, 0, 2, 1});
    chk("add along axis 0", lf_scatter(g, LF_SCATTER_ADD, dst, 0, i0, lf_const(g, LF_F64, 1)), LF_F64, 12,
        (double[]){0, 1, 0, 0, 0, 0, 0, 1, 1, 0, 1, 0});
    /* 1-d dst, 2-d index */
    lf_node *d1 = in1(LF_I64, 3, (double[]){0, 0, 0});
    lf_node *i2 = inS(LF_I64, 2, (int64_t[]){2, 2}, (double[]){0, 2, 2, 2});
    chk("add.at(dst, 2x2)", lf_scatter(g, LF_SCATTER_ADD, d1, 0, i2, lf_const(g, LF_I64, 1)), LF_I64, 3, (double[]){1, 0, 3});
    /* zero-size positions leave dst; an empty dst with no positions */
    chk("scatter of nothing", lf_scatter(g, LF_SCATTER_ADD, d1, 0, in1(LF_I64, 0, NULL), lf_const(g, LF_I64, 1)), LF_I64, 3,
        (double[]){0, 0, 0});
    chk("scatter into nothing", lf_scatter(g, LF_SCATTER_MAX, in1(LF_F32, 0, NULL), 0, in1(LF_I64, 0, NULL), lf_const(g, LF_F32, 1)),
        LF_F32, 0, NULL);
}

/* bincount with and without weights, computed indices (a histogram). */
Test(eval, bincount) {
    lf_node *idx = in1(LF_I64, 7, (double[]){1, 3, 1, 0, 3, 3, 5});
    chk("bincount", lf_bincount(g, idx, NULL, 6), LF_I64, 6, (double[]){1, 2, 0, 3, 0, 1});
    lf_node *w = in1(LF_F64, 7, (double[]){0.5, 1, 2, 4, 8, 16, 32});
    chk("bincount weights", lf_bincount(g, idx, w, 7), LF_F64, 7, (double[]){4, 2.5, 0, 25, 0, 32, 0});
    chk("bincount empty", lf_bincount(g, in1(LF_I32, 0, NULL), NULL, 3), LF_I64, 3, (double[]){0, 0, 0});
    chk("bincount nbins 0", lf_bincount(g, in1(LF_I32, 0, NULL), NULL, 0), LF_I64, 0, NULL);
    /* histogram of floor(x*256) over a large x: several blocks, f32 weights summed in block order */
    int64_t n = 200003;
    double *xv = malloc(sizeof(double) * (size_t)n), want[256] = {0};
    for (int64_t i = 0; i < n; i++) {
        xv[i] = (double)(float)tu_uniform(0, 0.999); /* (float) of a value near 1 can be 1.0f: bin 256 */
        want[(int)floor((float)xv[i] * 256.0f)]++;
    }
    lf_node *x = in1(LF_F32, n, xv);
    lf_node *h = lf_bincount(g, lf_cast(g, map("(v) -> floor(v * 256)", x), LF_I32), NULL, 256);
    chk("histogram", h, LF_I64, 256, want);
    /* f32 weights: the blocked order of lazyfuse.h */
    lf_node *hw = lf_bincount(g, lf_cast(g, map("(v) -> floor(v * 256)", x), LF_I32), x, 256);
    float part[256], acc[256];
    for (int j = 0; j < 256; j++) acc[j] = 0;
    for (int64_t b = 0; b * LF_SCATTER_BLOCK < n; b++) {
        for (int j = 0; j < 256; j++) part[j] = -0.0f;
        for (int64_t i = b * LF_SCATTER_BLOCK; i < n && i < (b + 1) * LF_SCATTER_BLOCK; i++) {
            float xf = (float)xv[i];
            part[(int)floor(xf * 256.0f)] += xf;
        }
        for (int j = 0; j < 256; j++) acc[j] += part[j];
    }
    for (int j = 0; j < 256; j++) want[j] = acc[j];
    chk("weighted histogram (f32, blocked order)", hw, LF_F32, 256, want);
    free(xv);
}

/* ---- NumPy's results at the edges, on every evaluator (issue 26, item 8) -------------- */

/* A context of backend b (compile mode cm, 2 threads). */
static lf_ctx *edge_ctx(lf_backend b, lf_compile_mode cm) {
    lf_ctx_options o;
    lf_ctx_options_init(&o);
    o.backend = b;
    o.compile = cm;
    o.threads = 2;
    lf_ctx *c = lf_ctx_new(&o);
    cr_assert(c != NULL, "%s", lf_errmsg(NULL));
    return c;
}

/* The bits of element k of a float buffer's host copy, and whether it is NaN. */
static uint64_t fbits(lf_dtype t, const unsigned char *p, int64_t k, bool *nan) {
    if (t == LF_F32) {
        float f;
        memcpy(&f, p + 4 * k, 4);
        *nan = isnan(f);
        uint32_t u;
        memcpy(&u, &f, 4);
        return u;
    }
    double d;
    memcpy(&d, p + 8 * k, 8);
    *nan = isnan(d);
    uint64_t u;
    memcpy(&u, &d, 8);
    return u;
}

/* fn src over the columns of ins (n values each, repeated to 67 elements so
 * compiled kernels take their vector loops and tails) on context c, against
 * want (NULL: the reference evaluator's result). lazyfuse.h's promise: every
 * non-NaN result bit for bit (signed zeros included), NaN where NaN. */
static void edge_case(lf_ctx *c, const char *cname, lf_dtype t, const char *src, int nin, const double *const *ins,
                      int n, const double *want) {
    enum { LEN = 67 };
    lf_graph *gg = lf_graph_new(c);
    lf_node *xs[3];
    for (int k = 0; k < nin; k++) {
        double v[LEN];
        for (int i = 0; i < LEN; i++) v[i] = ins[k][i % n];
        int64_t len = LEN;
        xs[k] = lf_input(gg, tu_buf(c, t, 1, &len, v));
    }
    lf_node *y = lf_zipwith(gg, lf_fn_parse(gg, src), nin, xs);
    cr_assert(y != NULL, "%s: %s", src, lf_errmsg(c));
    lf_buffer *b = lf_buffer_new_like(c, y);
    cr_assert_eq(lf_eval(gg, 1, &y, &b), LF_OK, "%s: %s", src, lf_errmsg(c));
    unsigned char got[LEN * 8], ref[LEN * 8];
    cr_assert_eq(lf_buffer_read(b, got, lf_buffer_bytes(b)), LF_OK);
    if (want) {
        for (int i = 0; i < LEN; i++) {
            double wv = want[i % n];
            if (t == LF_F32) {
                float f = (float)wv;
                memcpy(ref + 4 * i, &f, 4);
            } else memcpy(ref + 8 * i, &wv, 8);
        }
    } else {
        /* the reference evaluator on the same fn and inputs */
        lf_ctx *rc = edge_ctx(LF_BACKEND_REFERENCE, LF_COMPILE_AUTO);
        lf_graph *rg = lf_graph_new(rc);
        lf_node *rx[3];
        for (int k = 0; k < nin; k++) {
            double v[LEN];
            for (int i = 0; i < LEN; i++) v[i] = ins[k][i % n];
            int64_t len = LEN;
            rx[k] = lf_input(rg, tu_buf(rc, t, 1, &len, v));
        }
        lf_node *ry = lf_zipwith(rg, lf_fn_parse(rg, src), nin, rx);
        lf_buffer *rb = lf_buffer_new_like(rc, ry);
        cr_assert_eq(lf_eval(rg, 1, &ry, &rb), LF_OK, "%s", lf_errmsg(rc));
        cr_assert_eq(lf_buffer_read(rb, ref, lf_buffer_bytes(rb)), LF_OK);
        lf_buffer_free(rb);
        lf_graph_free(rg);
        lf_ctx_destroy(rc);
    }
    for (int i = 0; i < LEN; i++) {
        bool gn, rn;
        uint64_t gb = fbits(t, got, i, &gn), rb = fbits(t, ref, i, &rn);
        cr_expect(gn == rn && (gn || gb == rb), "%s, %s, \"%s\" element %d (inputs %g %g): bits %#llx, %s %#llx",
                  cname, lf_dtype_name(t), src, i, ins[0][i % n], nin > 1 ? ins[1][i % n] : 0.0,
                  (unsigned long long)gb, want ? "NumPy" : "reference", (unsigned long long)rb);
    }
    lf_buffer_free(b);
    lf_graph_free(gg);
}

/* sign(-0.0) is +0.0; minimum/maximum of +0 and -0 give the second operand
 * and a NaN operand propagates (NumPy 2.4 checked); the fns GCC rewrites as
 * -x (x*(-1), x/(-1), (-0.0)-x) keep their zeros' signs and their NaN-ness
 * (a NaN's sign is not promised: lazyfuse.h). On this run's backend, the
 * reference, the interpreter and compiled kernels. */
Test(eval, numpy_edges_on_every_evaluator, .timeout = 300) {
    struct {
        lf_ctx *c;
        const char *name;
    } cs[4] = {{ctx, "this run's backend"},
               {edge_ctx(LF_BACKEND_REFERENCE, LF_COMPILE_AUTO), "reference"},
               {edge_ctx(LF_BACKEND_CPU, LF_COMPILE_NEVER), "interpreter"},
               {edge_ctx(LF_BACKEND_CPU, LF_COMPILE_REQUIRE), "compiled"}};
    static const double sx[] = {-0.0, 0.0, -2.5, 3.0, NAN, -NAN, INFINITY, -INFINITY};
    static const double sw[] = {0.0, 0.0, -1.0, 1.0, NAN, NAN, 1.0, -1.0};
    static const double a[] = {0.0, -0.0, 0.0, -0.0, 1.0, NAN, NAN, -NAN, 2.0, -1.0};
    static const double b[] = {-0.0, 0.0, 0.0, -0.0, NAN, 1.0, -NAN, NAN, 2.0, 1.0};
    static const double mn[] = {-0.0, 0.0, 0.0, -0.0, NAN, NAN, NAN, NAN, 2.0, -1.0};
    static const double mx[] = {-0.0, 0.0, 0.0, -0.0, NAN, NAN, NAN, NAN, 2.0, 1.0};
    static const double nx[] = {0.0, -0.0, 1.5, NAN, -NAN, INFINITY, -INFINITY};
    static const double neg[] = {-0.0, 0.0, -1.5, NAN, NAN, -INFINITY, INFINITY};
    static const double *one[1] = {sx}, *two[2] = {a, b}, *nxs[1] = {nx};
    static const lf_dtype fts[2] = {LF_F32, LF_F64};
    for (int k = 0; k < 4; k++)
        for (int d = 0; d < 2; d++) {
            lf_dtype t = fts[d];
            edge_case(cs[k].c, cs[k].name, t, "(x) -> sign(x)", 1, one, 8, sw);
            edge_case(cs[k].c, cs[k].name, t, "(a, b) -> minimum(a, b)", 2, two, 10, mn);
            edge_case(cs[k].c, cs[k].name, t, "(a, b) -> maximum(a, b)", 2, two, 10, mx);
            edge_case(cs[k].c, cs[k].name, t, "(a, b) -> min(a, b)", 2, two, 10, mn);
            static const char *const negs[] = {"(x) -> x * (-1)", "(x) -> x / (-1)", "(x) -> (-0.0) - x",
                                               "(x) -> -x", "(x) -> x * -1.0"};
            for (int q = 0; q < 5; q++) {
                edge_case(cs[k].c, cs[k].name, t, negs[q], 1, nxs, 7, neg);
                edge_case(cs[k].c, cs[k].name, t, negs[q], 1, nxs, 7, NULL);
            }
        }
    for (int k = 1; k < 4; k++) lf_ctx_destroy(cs[k].c);
}

/* Evaluates fn src on the i32 column xs (n values) on context c; returns
 * the result read as doubles (malloc'd), its dtype in *t. */
static double *lit_eval(lf_ctx *c, const char *src, lf_dtype xt, const double *xs, int n, lf_dtype *t) {
    lf_graph *gg = lf_graph_new(c);
    int64_t len = n;
    lf_node *x = lf_input(gg, tu_buf(c, xt, 1, &len, xs));
    lf_node *y = lf_map(gg, lf_fn_parse(gg, src), x);
    cr_assert(y != NULL, "%s: %s", src, lf_errmsg(c));
    *t = lf_node_dtype(y);
    lf_buffer *b = lf_buffer_new_like(c, y);
    cr_assert_eq(lf_eval(gg, 1, &y, &b), LF_OK, "%s: %s", src, lf_errmsg(c));
    double *out = malloc(sizeof(double) * (size_t)n);
    cr_assert(out);
    tu_read(b, out);
    lf_buffer_free(b);
    lf_graph_free(gg);
    return out;
}

/* NEP 50 at the edge of a dtype (issue 26, item 8): an integer literal that
 * the i32 operand cannot hold is compared exactly (NumPy 2: x < 3000000000
 * is True for every i32 x) and refused when the node is built for any other
 * operator (NumPy 2: OverflowError), never wrapped; a float literal beyond
 * f32 against an f32 operand is f32 (1e19; 1e39 is inf), as NumPy 2. On this
 * run's backend, the reference, the interpreter and compiled kernels. */
Test(eval, literals_outside_the_operands_range, .timeout = 300) {
    lf_ctx *cs[4] = {ctx, edge_ctx(LF_BACKEND_REFERENCE, LF_COMPILE_AUTO), edge_ctx(LF_BACKEND_CPU, LF_COMPILE_NEVER),
                     edge_ctx(LF_BACKEND_CPU, LF_COMPILE_REQUIRE)};
    static const double xi[] = {0, -5, 2147483647, -2147483648, 7, 1, -1, 100};
    static const struct {
        const char *src;
        double want; /* for every x */
    } cmp[] = {
        {"(x) -> x < 3000000000", 1},         {"(x) -> x <= 2147483648", 1},
        {"(x) -> x > -3000000000", 1},        {"(x) -> x >= -2147483649", 1},
        {"(x) -> x == 3000000000", 0},        {"(x) -> x != -3000000000", 1},
        {"(x) -> 3000000000 > x", 1},         {"(x) -> (x + 1) < 4294967296", 1},
        {"(x) -> x == 4294967296 + 0", 0},    {"(x) -> x > 2000000000 + 2000000000", 0},
        {"(x) -> x < 9223372036854775807", 1},
    };
    for (int k = 0; k < 4; k++) {
        for (size_t q = 0; q < sizeof cmp / sizeof cmp[0]; q++) {
            lf_dtype t;
            double *r = lit_eval(cs[k], cmp[q].src, LF_I32, xi, 8, &t);
            cr_expect_eq(t, LF_BOOL, "%s", cmp[q].src);
            for (int i = 0; i < 8; i++)
                cr_expect_eq(r[i], cmp[q].want, "context %d: \"%s\" at x = %g gives %g", k, cmp[q].src, xi[i], r[i]);
            free(r);
        }
        /* in range: still i32, wrapping as documented */
        lf_dtype t;
        double *r = lit_eval(cs[k], "(x) -> x + (-2147483648)", LF_I32, xi, 8, &t);
        cr_expect(t == LF_I32 && r[0] == -2147483648.0 && r[2] == -1, "in-range literal: %s %g %g", lf_dtype_name(t),
                  r[0], r[2]);
        free(r);
        /* true division computes in f64: the literal is exact (NumPy: float64) */
        r = lit_eval(cs[k], "(x) -> x / 3000000000", LF_I32, xi, 8, &t);
        cr_expect(t == LF_F64 && r[2] == 2147483647.0 / 3000000000.0, "x / 3000000000: %s %.17g", lf_dtype_name(t), r[2]);
        free(r);
        /* f32 meets float literals beyond its range */
        static const double xf[] = {0, 1, -1, 3e38};
        r = lit_eval(cs[k], "(x) -> x + 1e19", LF_F32, xf, 4, &t);
        cr_expect(t == LF_F32 && r[0] == (double)1e19f && r[3] == (double)(3e38f + 1e19f), "x + 1e19: %s %g", lf_dtype_name(t), r[0]);
        free(r);
        r = lit_eval(cs[k], "(x) -> x * 1e39", LF_F32, xf, 4, &t);
        cr_expect(t == LF_F32 && isnan(r[0]) && r[1] == INFINITY && r[2] == -INFINITY, "x * 1e39: %s %g %g %g",
                  lf_dtype_name(t), r[0], r[1], r[2]);
        free(r);
        r = lit_eval(cs[k], "(x) -> x < 1e39", LF_F32, xf, 4, &t);
        cr_expect(t == LF_BOOL && r[0] == 1 && r[3] == 1, "x < 1e39");
        free(r);
    }
    /* refused when built: the operator, the literal and the dtype named */
    static const struct {
        const char *src, *msg;
    } bad[] = {
        {"(x) -> x + 3000000000", "map: +: integer literal 3000000000 is out of range for i32"},
        {"(x) -> 3000000000 * x", "map: *: integer literal 3000000000 is out of range for i32"},
        {"(x) -> x - -2147483649", "map: -: integer literal -2147483649 is out of range for i32"},
        {"(x) -> x + (2000000000 + 2000000000)", "map: +: integer literal 4000000000 is out of range for i32"},
        {"(x) -> min(x, 3000000000)", "map: min: integer literal 3000000000 is out of range for i32"},
        {"(x) -> x & 4294967296", "map: &: integer literal 4294967296 is out of range for i32"},
        {"(x) -> x << 3000000000", "map: <<: integer literal 3000000000 is out of range for i32"},
        {"(x) -> x // 3000000000", "map: //: integer literal 3000000000 is out of range for i32"},
        {"(x) -> where(x > 0, x, 3000000000)", "map: where: integer literal 3000000000 is out of range for i32"},
        {"(x) -> (x < 3000000000) + (x + 3000000000)", "map: +: integer literal 3000000000 is out of range for i32"},
    };
    for (size_t q = 0; q < sizeof bad / sizeof bad[0]; q++) {
        lf_graph *gg = lf_graph_new(ctx);
        int64_t len = 3;
        lf_node *x = lf_input(gg, tu_buf(ctx, LF_I32, 1, &len, xi));
        lf_fn *f = lf_fn_parse(gg, bad[q].src);
        cr_assert(f != NULL, "%s: %s", bad[q].src, lf_errmsg(ctx));
        cr_expect_null(lf_map(gg, f, x), "%s was built", bad[q].src);
        cr_expect_eq(lf_graph_status(gg), LF_ERR_DTYPE, "%s", bad[q].src);
        cr_expect(strncmp(lf_errmsg(ctx), bad[q].msg, strlen(bad[q].msg)) == 0, "%s: \"%s\", want \"%s ...\"",
                  bad[q].src, lf_errmsg(ctx), bad[q].msg);
        lf_graph_free(gg);
    }
    /* the same literal through the builder API, and against an i64 operand (fits) */
    lf_graph *gg = lf_graph_new(ctx);
    int64_t len = 3;
    lf_fn *f = lf_fn_new(gg, 1);
    lf_fn_set_result(f, lf_fn_op(f, LF_OP_ADD, lf_fn_param(f, 0), lf_fn_const_int(f, 3000000000), -1));
    cr_expect_null(lf_map(gg, f, lf_input(gg, tu_buf(ctx, LF_I32, 1, &len, xi))));
    cr_expect_eq(lf_graph_status(gg), LF_ERR_DTYPE);
    lf_graph_free(gg);
    lf_dtype t;
    double *r = lit_eval(ctx, "(x) -> x + 3000000000", LF_I64, xi, 3, &t);
    cr_expect(t == LF_I64 && r[1] == 2999999995.0, "i64 + 3000000000: %s %g", lf_dtype_name(t), r[1]);
    free(r);
    for (int k = 1; k < 4; k++) lf_ctx_destroy(cs[k]);
}

/* fn src on an i64 column of exact values (tu_buf takes doubles, which
 * cannot hold INT64_MAX); the result read as int64 (bool: 0 or 1). */
static void lit_eval_i64(lf_ctx *c, const char *src, const int64_t *xs, int n, int64_t *out, lf_dtype *t) {
    lf_graph *gg = lf_graph_new(c);
    int64_t len = n;
    lf_buffer *xb = lf_buffer_new(c, LF_I64, 1, &len);
    cr_assert(xb && lf_buffer_write(xb, xs, (size_t)n * sizeof *xs) == LF_OK);
    lf_node *y = lf_map(gg, lf_fn_parse(gg, src), lf_input(gg, xb));
    cr_assert(y != NULL, "%s: %s", src, lf_errmsg(c));
    *t = lf_node_dtype(y);
    lf_buffer *b = lf_buffer_new_like(c, y);
    cr_assert_eq(lf_eval(gg, 1, &y, &b), LF_OK, "%s: %s", src, lf_errmsg(c));
    if (*t == LF_BOOL) {
        uint8_t v[16];
        cr_assert(n <= 16 && lf_buffer_read(b, v, (size_t)n) == LF_OK);
        for (int i = 0; i < n; i++) out[i] = v[i];
    } else {
        cr_assert(*t == LF_I64 && lf_buffer_read(b, out, (size_t)n * sizeof *out) == LF_OK);
    }
    lf_buffer_free(b);
    lf_buffer_free(xb);
    lf_graph_free(gg);
}

/* NEP 50 past int64 (issue 26, items 7 and 8): an integer literal beyond
 * int64 parses; against an integer it compares exactly (x < 2**63 is true
 * for x = INT64_MAX, which no comparison in f64 with 2^63 gives: the i64
 * rounds to 2^63), every other integer operator refuses it when the node
 * is built naming the literal and the dtype; against a float it is its
 * nearest double, as NumPy converts a Python int. On this run's backend,
 * the reference, the interpreter and compiled kernels. */
Test(eval, literals_beyond_int64, .timeout = 300) {
    lf_ctx *cs[4] = {ctx, edge_ctx(LF_BACKEND_REFERENCE, LF_COMPILE_AUTO), edge_ctx(LF_BACKEND_CPU, LF_COMPILE_NEVER),
                     edge_ctx(LF_BACKEND_CPU, LF_COMPILE_REQUIRE)};
    static const int64_t xs[] = {0, -1, INT64_MAX, INT64_MIN, INT64_MAX - 1, INT64_MIN + 1, 12345, -7};
    static const double xi[] = {0, -5, 2147483647, -2147483648, 7, 1, -1, 100};
    static const struct {
        const char *src;
        int64_t want; /* for every x */
    } cmp[] = {
        {"(x) -> x < 9223372036854775808", 1},   {"(x) -> x <= 9223372036854775808", 1},
        {"(x) -> x >= 9223372036854775808", 0},  {"(x) -> x == 9223372036854775808", 0},
        {"(x) -> x != 18446744073709551616", 1}, {"(x) -> x > -9223372036854775809", 1},
        {"(x) -> -9223372036854775809 < x", 1},  {"(x) -> 100000000000000000000 <= x", 0},
        {"(x) -> (x + 1) < 9223372036854775808", 1}, {"(x) -> x == -9223372036854775809", 0},
    };
    for (int k = 0; k < 4; k++) {
        for (size_t q = 0; q < sizeof cmp / sizeof cmp[0]; q++) {
            lf_dtype t;
            int64_t r[8];
            lit_eval_i64(cs[k], cmp[q].src, xs, 8, r, &t);
            cr_expect_eq(t, LF_BOOL, "%s", cmp[q].src);
            for (int i = 0; i < 8; i++)
                cr_expect_eq(r[i], cmp[q].want, "context %d: \"%s\" at x = %lld gives %lld", k, cmp[q].src,
                             (long long)xs[i], (long long)r[i]);
            /* an i32 operand too */
            double *ri = lit_eval(cs[k], cmp[q].src, LF_I32, xi, 8, &t);
            for (int i = 0; i < 8; i++)
                cr_expect_eq(ri[i], (double)cmp[q].want, "context %d: \"%s\" at i32 x = %g", k, cmp[q].src, xi[i]);
            free(ri);
        }
        /* a float operand: the literal's nearest double, in the float's dtype */
        static const double xf[] = {0, 1, -1, 9223372036854775808.0};
        lf_dtype t;
        double *r = lit_eval(cs[k], "(x) -> x + 18446744073709551616", LF_F64, xf, 4, &t);
        cr_expect(t == LF_F64 && r[0] == 18446744073709551616.0 && r[3] == 18446744073709551616.0 + 9223372036854775808.0,
                  "f64 x + 2**64: %s %.17g", lf_dtype_name(t), r[0]);
        free(r);
        r = lit_eval(cs[k], "(x) -> x < 9223372036854775808", LF_F64, xf, 4, &t);
        cr_expect(t == LF_BOOL && r[0] == 1 && r[3] == 0, "f64 x < 2**63 at 2^63: %g (NumPy: False)", r[3]);
        free(r);
        r = lit_eval(cs[k], "(x) -> x * 100000000000000000000", LF_F32, xf, 4, &t);
        cr_expect(t == LF_F32 && r[1] == (double)1e20f && r[2] == -(double)1e20f, "f32 x * 10**20: %s %g",
                  lf_dtype_name(t), r[1]);
        free(r);
        r = lit_eval(cs[k], "(x) -> x / 9223372036854775808", LF_I32, xi, 8, &t);
        cr_expect(t == LF_F64 && r[2] == 2147483647.0 / 9223372036854775808.0, "i32 x / 2**63: %s %.17g",
                  lf_dtype_name(t), r[2]);
        free(r);
    }
    static const struct {
        const char *src;
        lf_dtype x;
        const char *msg;
    } bad[] = {
        {"(x) -> x + 9223372036854775808", LF_I64, "map: +: integer literal 9223372036854775808 is out of range for i64"},
        {"(x) -> x + 9223372036854775808", LF_I32, "map: +: integer literal 9223372036854775808 is out of range for i32"},
        {"(x) -> x // -9223372036854775809", LF_I64,
         "map: //: integer literal -9223372036854775809 is out of range for i64"},
        {"(x) -> where(x > 0, x, 1180591620717411303424)", LF_I64,
         "map: where: integer literal 1180591620717411303424 is out of range for i64"},
        {"(x) -> x & 18446744073709551616", LF_BOOL, "map: &: integer literal 18446744073709551616 is out of range for i64"},
        {"(x) -> i64(1180591620717411303424) + x", LF_F64,
         "map: i64: integer literal 1180591620717411303424 is out of range for i64"},
        {"(x) -> 9223372036854775808 < 18446744073709551616", LF_I64,
         "map: <: integer literal 9223372036854775808 is out of range for i64"},
        {"(x) -> 9223372036854775808", LF_F64, "map: result: integer literal 9223372036854775808 is out of range for i64"},
    };
    for (size_t q = 0; q < sizeof bad / sizeof bad[0]; q++) {
        lf_graph *gg = lf_graph_new(ctx);
        int64_t len = 3;
        lf_node *x = lf_input(gg, tu_buf(ctx, bad[q].x, 1, &len, xi));
        lf_fn *f = lf_fn_parse(gg, bad[q].src);
        cr_assert(f != NULL, "%s: %s", bad[q].src, lf_errmsg(ctx));
        cr_expect_null(lf_map(gg, f, x), "%s was built", bad[q].src);
        cr_expect_eq(lf_graph_status(gg), LF_ERR_DTYPE, "%s", bad[q].src);
        cr_expect(strncmp(lf_errmsg(ctx), bad[q].msg, strlen(bad[q].msg)) == 0, "%s: \"%s\", want \"%s ...\"",
                  bad[q].src, lf_errmsg(ctx), bad[q].msg);
        lf_graph_free(gg);
    }
    for (int k = 1; k < 4; k++) lf_ctx_destroy(cs[k]);
}
