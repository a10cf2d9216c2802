/* graph/scalar.c: what each scalar operator means, element by element.
 *
 * This is the semantic ground truth of lazyfuse: the reference evaluator calls
 * it for every element, and every backend is tested against it. It must stay
 * plainly correct and free of undefined behaviour for every input:
 *  - integer arithmetic wraps (done in uint64_t, then narrowed);
 *  - integer x % 0 and x % -1 are 0; integer x ** negative is 0 unless |x| == 1;
 *  - fmod is C's: the result takes the dividend's sign (x % takes the
 *    divisor's); integer fmod(x, 0) and fmod(x, -1) are 0 (NumPy's np.fmod);
 *  - integer x // 0 is 0 and MIN // -1 wraps to MIN (NumPy's results); float
 *    // is NumPy's npy_floor_divide (fmod-based, see float_floordiv);
 *  - shifts by a count outside [0, width) give 0, or -1 for >> of a negative
 *    value (NumPy's npy_lshift / npy_rshift); >> is arithmetic;
 *  - float -> integer casts truncate, saturate, and send NaN to 0;
 *  - f32 results are rounded to float after every operation (+ - * / and
 *    sqrt are computed in double and rounded once, which is exact rounding;
 *    other functions call the float version of libm); f16 and bf16 compute
 *    as f32 and round that result to nearest even in their format (from
 *    float, the kernels' rounding; a conversion from f64 or an integer
 *    rounds once from double);
 *  - integers wrap at their own width (i8 at 8 bits, u8 modulo 256);
 *    unsigned % // min max compare >> are unsigned (a u64 is held as its
 *    bits in lf_scalar.i);
 *  - NaN and Inf propagate as IEEE 754 and C's libm say; min/max are NumPy's
 *    minimum/maximum (a NaN operand, the first if both, is returned; of equal
 *    values, +0 and -0, the second); sign(+-0) is +0;
 *  - complex values (c64, c128) follow graph/complex.h's formulas, compiled
 *    here from the same text the kernels print; a c64's parts are f32
 *    values held in double, converted to float around each operator;
 *    sum, prod and mean of complex accumulate in c128;
 *  - reductions (graph_red_*) accumulate floats, and means of integers, in
 *    double and integer sums and products in wrapping int64, keep the first
 *    extreme (the first NaN) for min/max/argmin/argmax, and round once.
 */
#include "graph/graph.h"
#include "graph/complex.h"
#include "graph/random.h"

#include <math.h>
#include <string.h>

const op_info graph_ops[LF_NOPS] = {
#define LF_OP(ID, text, arity, syntax, typing, cname) \
    [LF_OP_##ID] = {text, arity, OPSYN_##syntax, OPTY_##typing, cname},
#include "lazyfuse_ops.def"
};

const red_info graph_reds[LF_NREDS] = {
#define LF_RED(ID, text, identity) [LF_RED_##ID] = {text, identity},
#include "lazyfuse_ops.def"
};

const char *lf_op_name(lf_op op) { return (unsigned)op < LF_NOPS ? graph_ops[op].text : "?"; }
const char *lf_reduce_op_name(lf_reduce_op op) {
    return (unsigned)op < LF_NREDS ? graph_reds[op].text : "?";
}

/* ---- conversions ------------------------------------------------------------ */

static bool is_unsigned(lf_dtype t) { return (unsigned)t < LF_NDTYPES && graph_dtypes[t].kind == DTYPE_UINT; }

/* Narrows a wrapped 64-bit result to bool or integer dtype t: two's
 * complement at t's width (digits + 1 bits: i32 wraps at 32 bits), or
 * modulo 2^digits for an unsigned t (u8: 200 + 100 is 44). */
static int64_t wrap(lf_dtype t, uint64_t v) {
    if (graph_dtypes[t].kind == DTYPE_BOOL) return v != 0;
    bool u = is_unsigned(t);
    int width = graph_dtypes[t].digits + (u ? 0 : 1);
    if (width >= 64) return (int64_t)v;
    uint64_t mask = (UINT64_C(1) << width) - 1;
    v &= mask;
    if (!u && v >> (width - 1)) v |= ~mask; /* negative: sign-extend */
    return (int64_t)v;
}

/* Rounds x to nearest even in a binary float format of `digits`
 * significand digits whose normal numbers start at 2^(emin - 1) and whose
 * finite values stay below 2^maxexp (beyond: +-inf). NaN, inf and zeros
 * pass through. nearbyint rounds half to even in the default mode. */
static double round_to_format(double x, int digits, int emin, int maxexp) {
    if (x == 0 || isnan(x) || isinf(x)) return x;
    int e;
    (void)frexp(x, &e); /* |x| = m 2^e, m in [0.5, 1) */
    int q = (e > emin ? e : emin) - digits;
    double r = ldexp(nearbyint(ldexp(x, -q)), q);
    if (fabs(r) >= ldexp(1.0, maxexp)) return copysign(INFINITY, x);
    return r;
}

/* The value of double x in float dtype t, rounded to nearest even (x is
 * computed exactly or rounded once to f32 first, so rounding from double
 * here is the rounding from float that the kernels do). */
static double round_float(lf_dtype t, double x) {
    switch (t) {
    case LF_F64: return x;
    case LF_F32: return (double)(float)x;
    case LF_F16: return round_to_format(x, 11, -13, 16);
    default: return round_to_format(x, 8, -125, 128); /* bf16 */
    }
}

/* f16 and bf16 bits of float x, rounded to nearest even; NaN becomes the
 * quiet NaN of its sign (as the kernels' lf_st_f16 / lf_st_bf16 do). x is
 * already a value of the dtype unless it is NaN. */
static uint16_t half_bits(lf_dtype t, double v) {
    float f = (float)round_float(t, v);
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t sign = (uint16_t)(x >> 16 & 0x8000);
    if (isnan(f)) return sign | (t == LF_F16 ? 0x7e00 : 0x7fc0);
    if (t == LF_BF16) return (uint16_t)(x >> 16); /* exact: f is a bf16 value */
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) return sign | 0x7c00;
    if (ax < 0x38800000u) /* below 2^-14: a subnormal, k 2^-24 */
        return sign | (uint16_t)ldexp(fabs((double)f), 24);
    return sign | (uint16_t)(((ax >> 23) - 112) << 10 | (ax >> 13 & 0x3ff));
}

static double half_value(lf_dtype t, uint16_t h) {
    if (t == LF_BF16) {
        uint32_t x = (uint32_t)h << 16;
        float f;
        memcpy(&f, &x, 4);
        return f;
    }
    int e = h >> 10 & 0x1f, m = h & 0x3ff;
    double v = e == 0x1f ? (m ? NAN : INFINITY) : e ? ldexp(1024 + m, e - 25) : ldexp(m, -24);
    return (h & 0x8000) ? -v : v;
}

/* Float x to integer dtype t: truncated, saturated at t's extremes
 * (beyond +-2^digits, or 0 and 2^digits for unsigned t), NaN to 0. */
static int64_t saturate(double x, lf_dtype t) {
    if (isnan(x)) return 0;
    double limit = ldexp(1.0, graph_dtypes[t].digits); /* 2^31 for i32: exact */
    if (is_unsigned(t)) {
        if (x >= limit) return graph_dtype_int_max(t);
        if (x <= 0) return 0;
        return (int64_t)(uint64_t)x;
    }
    if (x >= limit) return graph_dtype_int_max(t);
    if (x <= -limit) return graph_dtype_int_min(t);
    return (int64_t)x;
}

int graph_pow_exponent_class(lf_scalar v, lf_dtype t) {
    if (graph_dtype_is_complex(t)) return 0; /* complex ** is always lf_pow_<c> */
    double y = graph_dtype_is_float(t) ? v.f : t == LF_BOOL ? (double)(v.i != 0) : is_unsigned(t) ? (double)(uint64_t)v.i : (double)v.i;
    static const double special[] = {0.5, 2, 1, 0, -1};
    for (int k = 0; k < (int)(sizeof special / sizeof special[0]); k++)
        if (y == special[k]) return k + 1; /* -0 == 0 */
    return 0;
}

lf_scalar graph_scalar_convert(lf_scalar v, lf_dtype from, lf_dtype to) {
    lf_scalar r = {{0}, 0};
    if (graph_dtype_is_complex(to)) { /* (x, 0) of a real x; parts rounded */
        lf_dtype p = graph_dtype_part(to);
        if (graph_dtype_is_complex(from)) {
            r.f = round_float(p, v.f);
            r.im = round_float(p, v.im);
            return r;
        }
        r = graph_scalar_convert(v, from, p);
        r.im = 0;
        return r;
    }
    if (graph_dtype_is_complex(from)) { /* the real part (NumPy); bool: either part */
        if (to == LF_BOOL) {
            r.i = v.f != 0 || v.im != 0;
            return r;
        }
        lf_scalar re = {{.f = v.f}, 0};
        return graph_scalar_convert(re, graph_dtype_part(from), to);
    }
    if (graph_dtype_is_float(from)) {
        double x = v.f;
        if (graph_dtype_is_float(to)) r.f = round_float(to, x);
        else if (to == LF_BOOL) r.i = x != 0;
        else r.i = saturate(x, to);
    } else {
        int64_t x = v.i;
        bool u = is_unsigned(from);
        if (to == LF_F32) r.f = u ? (double)(float)(uint64_t)x : (double)(float)x; /* one rounding */
        else if (graph_dtype_is_float(to)) /* f64; f16 and bf16 by way of f64 */
            r.f = round_float(to, u ? (double)(uint64_t)x : (double)x);
        else r.i = wrap(to, (uint64_t)x);
    }
    return r;
}

/* ---- float operators ----------------------------------------------------------- */

/* One-argument float functions; f32 calls the float libm version. */
static double float_fn1(lf_op op, bool f32, double x) {
    float xf = (float)x;
    switch (op) {
    case LF_OP_SQRT: return f32 ? sqrtf(xf) : sqrt(x);
    case LF_OP_RSQRT: return f32 ? 1.0f / sqrtf(xf) : 1.0 / sqrt(x);
    case LF_OP_CBRT: return f32 ? cbrtf(xf) : cbrt(x);
    case LF_OP_EXP: return f32 ? expf(xf) : exp(x);
    case LF_OP_EXP2: return f32 ? exp2f(xf) : exp2(x);
    case LF_OP_EXPM1: return f32 ? expm1f(xf) : expm1(x);
    case LF_OP_LOG: return f32 ? logf(xf) : log(x);
    case LF_OP_LOG2: return f32 ? log2f(xf) : log2(x);
    case LF_OP_LOG10: return f32 ? log10f(xf) : log10(x);
    case LF_OP_LOG1P: return f32 ? log1pf(xf) : log1p(x);
    case LF_OP_SIN: return f32 ? sinf(xf) : sin(x);
    case LF_OP_COS: return f32 ? cosf(xf) : cos(x);
    case LF_OP_TAN: return f32 ? tanf(xf) : tan(x);
    case LF_OP_ASIN: return f32 ? asinf(xf) : asin(x);
    case LF_OP_ACOS: return f32 ? acosf(xf) : acos(x);
    case LF_OP_ATAN: return f32 ? atanf(xf) : atan(x);
    case LF_OP_SINH: return f32 ? sinhf(xf) : sinh(x);
    case LF_OP_COSH: return f32 ? coshf(xf) : cosh(x);
    case LF_OP_TANH: return f32 ? tanhf(xf) : tanh(x);
    case LF_OP_ASINH: return f32 ? asinhf(xf) : asinh(x);
    case LF_OP_ACOSH: return f32 ? acoshf(xf) : acosh(x);
    case LF_OP_ATANH: return f32 ? atanhf(xf) : atanh(x);
    case LF_OP_SIGMOID: return f32 ? 1.0f / (1.0f + expf(-xf)) : 1.0 / (1.0 + exp(-x));
    case LF_OP_ERF: return f32 ? erff(xf) : erf(x);
    case LF_OP_NEG: return -x;
    case LF_OP_ABS: return fabs(x);
    case LF_OP_FLOOR: return floor(x);
    case LF_OP_CEIL: return ceil(x);
    case LF_OP_ROUND: return nearbyint(x); /* default rounding mode: half to even */
    case LF_OP_TRUNC: return trunc(x);
    case LF_OP_SIGN: return isnan(x) ? x : x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0; /* sign(-0.0) is +0.0 */
    default: return NAN;
    }
}

/* Python's modulo: the result takes the divisor's sign. */
static double float_mod(double a, double b, bool f32) {
    double r = f32 ? fmodf((float)a, (float)b) : fmod(a, b);
    if (r != 0) {
        if ((r < 0) != (b < 0)) r += b;
    } else {
        r = copysign(0.0, b);
    }
    return r;
}

/* NumPy's floor division (npy_floor_divide, npy_divmod: CPython's float
 * divmod): b == 0 gives a / b; else the quotient of a - fmod(a, b), moved
 * down by one when the remainder's sign differs from b's, snapped to the
 * nearest integer, and a zero quotient takes the sign of a / b. f32 runs
 * the same steps in float. */
static double float_floordiv(double a, double b) {
    if (b == 0) return a / b;
    double mod = fmod(a, b), div = (a - mod) / b;
    if (mod != 0) { /* NaN too */
        if ((b < 0) != (mod < 0)) div -= 1.0;
    }
    if (div != 0) { /* NaN too */
        double fl = floor(div);
        if (div - fl > 0.5) fl += 1.0;
        return fl;
    }
    return copysign(0.0, a / b);
}

static float float_floordivf(float a, float b) {
    if (b == 0) return a / b;
    float mod = fmodf(a, b), div = (a - mod) / b;
    if (mod != 0) { /* NaN too */
        if ((b < 0) != (mod < 0)) div -= 1.0f;
    }
    if (div != 0) { /* NaN too */
        float fl = floorf(div);
        if (div - fl > 0.5f) fl += 1.0f;
        return fl;
    }
    return copysignf(0.0f, a / b);
}

static double float_fn2(lf_op op, bool f32, double a, double b) {
    float af = (float)a, bf = (float)b;
    switch (op) {
    case LF_OP_ADD: return a + b;
    case LF_OP_SUB: return a - b;
    case LF_OP_MUL: return a * b;
    case LF_OP_DIV: return a / b;
    case LF_OP_MOD: return float_mod(a, b, f32);
    case LF_OP_FMOD: return f32 ? fmodf(af, bf) : fmod(a, b);
    case LF_OP_FLOORDIV: return f32 ? float_floordivf(af, bf) : float_floordiv(a, b);
    case LF_OP_POW: return f32 ? powf(af, bf) : pow(a, b);
    case LF_OP_MIN: return (a < b || isnan(a)) ? a : b; /* NumPy: a NaN operand (the first), */
    case LF_OP_MAX: return (a > b || isnan(a)) ? a : b; /* of equal values the second */
    case LF_OP_ATAN2: return f32 ? atan2f(af, bf) : atan2(a, b);
    case LF_OP_HYPOT: return f32 ? hypotf(af, bf) : hypot(a, b);
    default: return NAN;
    }
}

/* ---- integer operators ------------------------------------------------------------- */

static int64_t int_pow(int64_t base, int64_t e_, lf_dtype t) {
    uint64_t e = (uint64_t)e_;
    if (e_ < 0 && !is_unsigned(t)) {
        if (base == 1) return 1;
        if (base == -1) return (e & 1) ? -1 : 1;
        return 0;
    }
    uint64_t r = 1, b = (uint64_t)base;
    while (e) {
        if (e & 1) r *= b;
        b *= b;
        e >>= 1;
    }
    return wrap(t, r);
}

static int64_t int_mod(int64_t a, int64_t b) {
    if (b == 0 || b == -1) return 0;
    int64_t r = a % b;
    if (r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
}

/* Floor division: x // 0 is 0, MIN // -1 wraps to MIN (NumPy). */
static int64_t int_floordiv(int64_t a, int64_t b, lf_dtype t) {
    if (b == 0) return 0;
    if (b == -1) return wrap(t, 0 - (uint64_t)a);
    int64_t q = a / b;
    if (a % b != 0 && (a < 0) != (b < 0)) q--;
    return q;
}

/* Shifts in t's width (8 to 64 bits); a count outside [0, width) gives 0,
 * or -1 for >> of a negative value (NumPy). >> is arithmetic for signed t,
 * written without shifting a negative number, and logical for unsigned t. */
static int64_t int_shift(lf_op op, lf_dtype t, int64_t a, int64_t b) {
    uint64_t w = 8 * lf_dtype_size(t);
    bool in_range = (uint64_t)b < w; /* a negative count is huge here */
    if (op == LF_OP_LSHIFT) return in_range ? wrap(t, (uint64_t)a << b) : 0;
    if (is_unsigned(t)) return in_range ? (int64_t)((uint64_t)a >> b) : 0;
    if (!in_range) return a < 0 ? -1 : 0;
    return a < 0 ? ~(~a >> b) : a >> b;
}

/* Unsigned operators whose meaning differs from the signed ones' (the
 * others wrap the same bits); false when op is not one of them. */
static bool uint_op(lf_op op, lf_dtype t, uint64_t a, uint64_t b, int64_t *r) {
    switch (op) {
    case LF_OP_MOD:
    case LF_OP_FMOD: *r = b == 0 ? 0 : (int64_t)(a % b); return true;
    case LF_OP_FLOORDIV: *r = b == 0 ? 0 : (int64_t)(a / b); return true;
    case LF_OP_MIN: *r = (int64_t)(b < a ? b : a); return true;
    case LF_OP_MAX: *r = (int64_t)(b > a ? b : a); return true;
    case LF_OP_ABS: *r = (int64_t)a; return true;
    case LF_OP_SIGN: *r = a != 0; return true;
    case LF_OP_BITNOT: *r = wrap(t, ~a); return true;
    default: return false;
    }
}

static int64_t int_op(lf_op op, lf_dtype t, int64_t a, int64_t b) {
    uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
    int64_t ur;
    if (is_unsigned(t) && uint_op(op, t, ua, ub, &ur)) return ur;
    switch (op) {
    case LF_OP_ADD: return wrap(t, ua + ub);
    case LF_OP_SUB: return wrap(t, ua - ub);
    case LF_OP_MUL: return wrap(t, ua * ub);
    case LF_OP_MOD: return int_mod(a, b);
    case LF_OP_FMOD: return b == 0 || b == -1 ? 0 : a % b; /* C's %: the dividend's sign */
    case LF_OP_FLOORDIV: return int_floordiv(a, b, t);
    case LF_OP_BITAND: return a & b;
    case LF_OP_BITOR: return a | b;
    case LF_OP_BITXOR: return a ^ b;
    case LF_OP_BITNOT: return ~a;
    case LF_OP_LSHIFT:
    case LF_OP_RSHIFT: return int_shift(op, t, a, b);
    case LF_OP_POW: return int_pow(a, b, t);
    case LF_OP_NEG: return wrap(t, 0 - ua);
    case LF_OP_MIN: return b < a ? b : a;
    case LF_OP_MAX: return b > a ? b : a;
    case LF_OP_ABS: return a < 0 ? wrap(t, 0 - ua) : a;
    case LF_OP_SIGN: return (a > 0) - (a < 0);
    case LF_OP_FLOOR:
    case LF_OP_CEIL:
    case LF_OP_ROUND:
    case LF_OP_TRUNC:
    case LF_OP_CONJ: return a;
    default: return 0;
    }
}

static bool compare(lf_op op, bool fl, bool u, lf_scalar a, lf_scalar b) {
    if (u) { /* unsigned: a u64's bits compare as uint64_t */
        uint64_t x = (uint64_t)a.i, y = (uint64_t)b.i;
        switch (op) {
        case LF_OP_LT: return x < y;
        case LF_OP_LE: return x <= y;
        case LF_OP_GT: return x > y;
        case LF_OP_GE: return x >= y;
        case LF_OP_EQ: return x == y;
        default: return x != y;
        }
    }
    if (fl) {
        switch (op) {
        case LF_OP_LT: return a.f < b.f;
        case LF_OP_LE: return a.f <= b.f;
        case LF_OP_GT: return a.f > b.f;
        case LF_OP_GE: return a.f >= b.f;
        case LF_OP_EQ: return a.f == b.f;
        default: return a.f != b.f;
        }
    }
    switch (op) {
    case LF_OP_LT: return a.i < b.i;
    case LF_OP_LE: return a.i <= b.i;
    case LF_OP_GT: return a.i > b.i;
    case LF_OP_GE: return a.i >= b.i;
    case LF_OP_EQ: return a.i == b.i;
    default: return a.i != b.i;
    }
}

/* ---- complex operators ---------------------------------------------------------------- */

/* graph/complex.h's functions, the same text the kernels' prelude prints. */
#define LF_INLINE static inline
GRAPH_COMPLEX_LIBM
GRAPH_COMPLEX_CODE
#undef LF_INLINE

bool graph_op_complex_ok(lf_op op) {
    switch (op) {
    case LF_OP_ADD:
    case LF_OP_SUB:
    case LF_OP_MUL:
    case LF_OP_DIV:
    case LF_OP_POW:
    case LF_OP_NEG:
    case LF_OP_EQ:
    case LF_OP_NE:
    case LF_OP_ABS:
    case LF_OP_SQRT:
    case LF_OP_EXP:
    case LF_OP_LOG:
    case LF_OP_WHERE:
    case LF_OP_REAL:
    case LF_OP_IMAG:
    case LF_OP_ANGLE:
    case LF_OP_CONJ: return true;
    default: return false;
    }
}

/* op in lf_<C> (c64 or c128, R its component float) on a and b: the
 * function returns 0 with the complex result in *z, or 1 with a real one in
 * *part (abs, angle, real, imag; ==, != as 0 or 1). One text for both types. */
#define COMPLEX_OP(C, R)                                                                     \
    static int C##_op(lf_op op, lf_##C a, lf_##C b, lf_##C *z, R *part) {                     \
        switch (op) {                                                                        \
        case LF_OP_ADD: *z = lf_add_##C(a, b); return 0;                                     \
        case LF_OP_SUB: *z = lf_sub_##C(a, b); return 0;                                     \
        case LF_OP_MUL: *z = lf_mul_##C(a, b); return 0;                                     \
        case LF_OP_DIV: *z = lf_div_##C(a, b); return 0;                                     \
        case LF_OP_POW: *z = lf_pow_##C(a, b); return 0;                                     \
        case LF_OP_NEG: *z = lf_neg_##C(a); return 0;                                        \
        case LF_OP_CONJ: *z = lf_conj_##C(a); return 0;                                      \
        case LF_OP_SQRT: *z = lf_sqrt_##C(a); return 0;                                      \
        case LF_OP_EXP: *z = lf_exp_##C(a); return 0;                                        \
        case LF_OP_LOG: *z = lf_log_##C(a); return 0;                                        \
        case LF_OP_EQ: *part = (R)lf_eq_##C(a, b); return 1;                                 \
        case LF_OP_NE: *part = (R)lf_ne_##C(a, b); return 1;                                 \
        case LF_OP_ABS: *part = lf_abs_##C(a); return 1;                                     \
        case LF_OP_ANGLE: *part = lf_arg_##C(a); return 1;                                   \
        case LF_OP_REAL: *part = a.re; return 1;                                             \
        case LF_OP_IMAG: *part = a.im; return 1;                                             \
        default: *part = NAN; return 1; /* refused when nodes are built */                   \
        }                                                                                    \
    }
COMPLEX_OP(c64, float)
COMPLEX_OP(c128, double)
#undef COMPLEX_OP

/* A complex operator (compute dtype ct complex): a complex result, a real
 * one in the component float, or a bool (== !=). */
static lf_scalar complex_apply(lf_op op, lf_dtype ct, lf_scalar a, lf_scalar b) {
    bool cmp = op == LF_OP_EQ || op == LF_OP_NE, real;
    double re, im, p = 0;
    if (ct == LF_C64) {
        lf_c64 z = {0, 0};
        float pf = 0;
        real = c64_op(op, lf_mk_c64((float)a.f, (float)a.im), lf_mk_c64((float)b.f, (float)b.im), &z, &pf);
        re = z.re, im = z.im, p = pf;
    } else {
        lf_c128 z = {0, 0};
        real = c128_op(op, lf_mk_c128(a.f, a.im), lf_mk_c128(b.f, b.im), &z, &p);
        re = z.re, im = z.im;
    }
    lf_scalar r = {{0}, 0};
    if (!real) r.f = re, r.im = im;
    else if (cmp) r.i = p != 0;
    else r.f = p;
    return r;
}

/* real, imag, angle of a real (float) operand x: x, 0, atan2(+0, x)
 * (NaN for NaN, pi rounded to the dtype for x < 0 and -0, else +0),
 * written without libm as the kernels write it. */
static double real_part_op(lf_op op, bool f32, double x) {
    if (op == LF_OP_REAL) return x;
    if (op == LF_OP_IMAG) return 0.0;
    if (isnan(x)) return x;
    return signbit(x) ? (f32 ? (double)0x1.921fb6p+1f : 0x1.921fb54442d18p+1) : 0.0;
}

lf_scalar graph_scalar_apply(lf_op op, lf_dtype ct, lf_scalar a, lf_scalar b, lf_scalar c) {
    lf_scalar r = {{0}, 0};
    if (graph_dtype_is_complex(ct) && op != LF_OP_WHERE) return complex_apply(op, ct, a, b);
    bool fl = graph_dtype_is_float(ct), f32 = fl && ct != LF_F64; /* f16, bf16 compute in f32 */
    switch (graph_ops[op].typing) {
    case OPTY_CMP: r.i = compare(op, fl, is_unsigned(ct), a, b); return r;
    case OPTY_LOGIC:
        r.i = op == LF_OP_AND ? (a.i && b.i) : op == LF_OP_OR ? (a.i || b.i) : !a.i;
        return r;
    case OPTY_PRED:
        if (op == LF_OP_SIGNBIT) /* the sign bit itself: -0.0 and -NaN too */
            r.i = fl ? signbit(a.f) != 0 : !is_unsigned(ct) && ct != LF_BOOL && a.i < 0;
        else
            r.i = fl && (op == LF_OP_ISNAN ? isnan(a.f) : isinf(a.f));
        return r;
    case OPTY_SELECT: return a.i ? b : c;
    default: break;
    }
    if (fl) {
        double x;
        if (op == LF_OP_CONJ) x = a.f;
        else if (graph_ops[op].typing == OPTY_PART) x = real_part_op(op, f32, a.f);
        else if (op == LF_OP_FMA) x = f32 ? fmaf((float)a.f, (float)b.f, (float)c.f) : fma(a.f, b.f, c.f);
        else if (graph_ops[op].arity == 1) x = float_fn1(op, f32, a.f);
        else x = float_fn2(op, f32, a.f, b.f);
        r.f = f32 ? round_float(ct, (double)(float)x) : x; /* f16, bf16: f32's result, rounded */
        return r;
    }
    if (ct == LF_BOOL) { /* only SAME and BITS ops reach here with bool */
        switch (op) {
        case LF_OP_MIN:
        case LF_OP_BITAND: r.i = a.i && b.i; break;
        case LF_OP_MAX:
        case LF_OP_BITOR: r.i = a.i || b.i; break;
        case LF_OP_BITXOR: r.i = !a.i != !b.i; break;
        case LF_OP_BITNOT: r.i = !a.i; break;
        default: r.i = a.i; break; /* abs, sign, rounding, conj */
        }
        return r;
    }
    r.i = int_op(op, ct, a.i, b.i);
    return r;
}

lf_scalar graph_scalar_load(const void *base, lf_dtype t, int64_t i) {
    lf_scalar v = {{0}, 0};
    switch (t) {
    case LF_C64:
        v.f = ((const float *)base)[2 * i];
        v.im = ((const float *)base)[2 * i + 1];
        break;
    case LF_C128:
        v.f = ((const double *)base)[2 * i];
        v.im = ((const double *)base)[2 * i + 1];
        break;
    case LF_BOOL: v.i = ((const uint8_t *)base)[i]; break;
    case LF_I8: v.i = ((const int8_t *)base)[i]; break;
    case LF_U8: v.i = ((const uint8_t *)base)[i]; break;
    case LF_I16: v.i = ((const int16_t *)base)[i]; break;
    case LF_U16: v.i = ((const uint16_t *)base)[i]; break;
    case LF_I32: v.i = ((const int32_t *)base)[i]; break;
    case LF_U32: v.i = ((const uint32_t *)base)[i]; break;
    case LF_I64: v.i = ((const int64_t *)base)[i]; break;
    case LF_U64: v.i = (int64_t)((const uint64_t *)base)[i]; break;
    case LF_F16:
    case LF_BF16: v.f = half_value(t, ((const uint16_t *)base)[i]); break;
    case LF_F32: v.f = ((const float *)base)[i]; break;
    default: v.f = ((const double *)base)[i]; break;
    }
    return v;
}

void graph_scalar_store(void *base, lf_dtype t, int64_t i, lf_scalar v) {
    switch (t) {
    case LF_C64:
        ((float *)base)[2 * i] = (float)v.f;
        ((float *)base)[2 * i + 1] = (float)v.im;
        break;
    case LF_C128:
        ((double *)base)[2 * i] = v.f;
        ((double *)base)[2 * i + 1] = v.im;
        break;
    case LF_BOOL: ((uint8_t *)base)[i] = v.i != 0; break;
    case LF_I8: ((int8_t *)base)[i] = (int8_t)v.i; break;
    case LF_U8: ((uint8_t *)base)[i] = (uint8_t)v.i; break;
    case LF_I16: ((int16_t *)base)[i] = (int16_t)v.i; break;
    case LF_U16: ((uint16_t *)base)[i] = (uint16_t)v.i; break;
    case LF_I32: ((int32_t *)base)[i] = (int32_t)v.i; break;
    case LF_U32: ((uint32_t *)base)[i] = (uint32_t)v.i; break;
    case LF_I64: ((int64_t *)base)[i] = v.i; break;
    case LF_U64: ((uint64_t *)base)[i] = (uint64_t)v.i; break;
    case LF_F16:
    case LF_BF16: ((uint16_t *)base)[i] = half_bits(t, v.f); break;
    case LF_F32: ((float *)base)[i] = (float)v.f; break;
    default: ((double *)base)[i] = v.f; break;
    }
}

/* ---- reductions -------------------------------------------------------------------- */

lf_dtype graph_red_acc_dtype(lf_reduce_op op, lf_dtype in) {
    if (graph_dtype_is_complex(in)) return LF_C128; /* sum, prod, mean */
    if (graph_dtype_is_float(in) || op == LF_RED_MEAN) return LF_F64;
    return is_unsigned(in) ? LF_U64 : LF_I64; /* the same wrapping bits; u64 compares unsigned */
}

void graph_red_init(graph_red_acc *a, lf_reduce_op op, lf_dtype acc_t) {
    a->arg = 0;
    a->started = false;
    a->v.im = 0;
    if (acc_t == LF_F64 || acc_t == LF_C128) a->v.f = op == LF_RED_PROD ? 1.0 : 0.0;
    else a->v.i = op == LF_RED_PROD ? 1 : 0;
}

void graph_red_fold(graph_red_acc *a, lf_reduce_op op, lf_dtype acc_t, lf_scalar x, int64_t pos) {
    bool fl = acc_t == LF_F64;
    if (acc_t == LF_C128) { /* sum, prod, mean: lf_add_c128 / lf_mul_c128 */
        lf_c128 v = lf_mk_c128(a->v.f, a->v.im), y = lf_mk_c128(x.f, x.im);
        v = op == LF_RED_PROD ? lf_mul_c128(v, y) : lf_add_c128(v, y);
        a->v.f = v.re;
        a->v.im = v.im;
        return;
    }
    switch (op) {
    case LF_RED_SUM:
    case LF_RED_MEAN:
        if (fl) a->v.f += x.f;
        else a->v.i = (int64_t)((uint64_t)a->v.i + (uint64_t)x.i);
        return;
    case LF_RED_PROD:
        if (fl) a->v.f *= x.f;
        else a->v.i = (int64_t)((uint64_t)a->v.i * (uint64_t)x.i);
        return;
    default: break;
    }
    bool want_min = op == LF_RED_MIN || op == LF_RED_ARGMIN;
    bool better;
    if (!a->started) better = true;
    else if (fl) better = !isnan(a->v.f) && (isnan(x.f) || (want_min ? x.f < a->v.f : x.f > a->v.f));
    else if (acc_t == LF_U64)
        better = want_min ? (uint64_t)x.i < (uint64_t)a->v.i : (uint64_t)x.i > (uint64_t)a->v.i;
    else better = want_min ? x.i < a->v.i : x.i > a->v.i;
    if (better) {
        a->v = x;
        a->arg = pos;
        a->started = true;
    }
}

lf_scalar graph_red_finish(const graph_red_acc *a, lf_reduce_op op, lf_dtype acc_t, int64_t count,
                           lf_dtype out) {
    lf_scalar r = a->v;
    if (op == LF_RED_ARGMIN || op == LF_RED_ARGMAX) {
        r.i = a->arg;
        return r;
    }
    if (op == LF_RED_MEAN) { /* 0/0 is NaN for empty sets */
        r.f = r.f / (double)count;
        if (acc_t == LF_C128) r.im = r.im / (double)count;
    }
    return graph_scalar_convert(r, acc_t, out);
}

/* ---- scans ---------------------------------------------------------------------------- */

lf_scalar graph_scan_identity(lf_reduce_op op, lf_dtype in) {
    lf_scalar v;
    bool fl = graph_dtype_is_float(in);
    switch (op) {
    case LF_RED_PROD:
        if (fl) v.f = 1.0;
        else v.i = 1;
        return v;
    case LF_RED_MIN:
        if (fl) v.f = INFINITY;
        else v.i = graph_dtype_int_max(in);
        return v;
    case LF_RED_MAX:
        if (fl) v.f = -INFINITY;
        else v.i = graph_dtype_int_min(in);
        return v;
    default:
        if (fl) v.f = 0.0;
        else v.i = 0;
        return v;
    }
}

/* An accumulator holding the identity (started: min/max compare with it). */
static void scan_identity_acc(graph_red_acc *a, lf_reduce_op op, lf_dtype in) {
    a->v = graph_scan_identity(op, in);
    a->arg = 0;
    a->started = true;
}

void graph_scan_start(graph_scan_state *s, lf_reduce_op op, lf_dtype in, bool exclusive) {
    s->op = op;
    s->in = in;
    s->acc_t = graph_red_acc_dtype(op, in);
    s->exclusive = exclusive;
    scan_identity_acc(&s->off, op, in);
    s->acc = s->tot = s->off;
    s->pos = 0;
}

lf_scalar graph_scan_step(graph_scan_state *s, lf_scalar x, lf_dtype out) {
    if (s->pos > 0 && s->pos % LF_SCAN_BLOCK == 0) { /* block b starts: O[b] = O[b-1] (+) T[b-1] */
        graph_red_fold(&s->off, s->op, s->acc_t, s->tot.v, 0);
        s->acc = s->off;
        scan_identity_acc(&s->tot, s->op, s->in);
    }
    lf_scalar before = s->acc.v;
    graph_red_fold(&s->acc, s->op, s->acc_t, x, 0);
    graph_red_fold(&s->tot, s->op, s->acc_t, x, 0);
    s->pos++;
    lf_scalar r = s->exclusive ? before : s->acc.v;
    return graph_scalar_convert(r, s->acc_t, out);
}

/* ---- random ------------------------------------------------------------------------ */

/* The helpers the kernels' prelude prints (graph/random.h), compiled here
 * for the reference evaluator and the schedule interpreter. */
#define LF_INLINE static inline
GRAPH_RANDOM_CODE
#undef LF_INLINE

lf_scalar graph_random_value(const lf_node *n, int64_t i) {
    uint64_t seed = n->u.random.seed;
    bool wide = lf_dtype_size(n->dtype) == 8;
    lf_scalar v;
    switch (n->u.random.dist) {
    case LF_RANDOM_BITS:
        v.i = lf_random_bits(i, seed, wide);
        return graph_scalar_convert(v, LF_I64, n->dtype);
    case LF_RANDOM_UNIFORM: v.f = lf_random_uniform(i, seed, wide); break;
    default: v.f = lf_random_normal(i, seed); break;
    }
    return graph_scalar_convert(v, LF_F64, n->dtype);
}
