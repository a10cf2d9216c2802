/* codegen/dialect_c.c: the C dialect of the emitter (CPU backend).
 *
 * Supplies the strings the emitter needs for C: the prelude every kernel
 * starts with (helper functions carrying lazyfuse's scalar semantics,
 * graph/scalar.c being the ground truth), type names and the qualifier of
 * exported functions.
 *
 * What must stay true: every helper computes bit for bit what graph/scalar.c
 * computes, without undefined behaviour (integers wrap through unsigned
 * arithmetic, float -> int conversions saturate and send NaN to 0), and
 * stays branch-free where a loop should vectorize. The compile flags
 * (backends/cpu) never include a fast-math flag: f32 arithmetic is rounded
 * after every operation and NaN/Inf follow IEEE 754. With vector_math the
 * prelude declares the libm functions that glibc's libmvec implements as
 * `simd`, so GCC vectorizes loops that call them; libmvec's accuracy (a few
 * ulp, stated in lazyfuse.h and tested) is then the only difference from
 * the reference evaluator outside reductions.
 */
#include "codegen/codegen.h"
#include "graph/random.h"

/* graph/random.h's code as text (LF_INLINE is not a macro here) */
#define STRINGIZE_(...) #__VA_ARGS__
#define STRINGIZE(...) STRINGIZE_(__VA_ARGS__)

#define PRELUDE_C                                                                               \
    "/* lazyfuse generated kernel (C dialect). */\n"                                           \
    "#include <stdint.h>\n"                                                                    \
    "#include <math.h>\n"                                                                      \
    "typedef int64_t lf_idx; /* index arithmetic */\n"                                         \
    "#define LF_ENTRY __attribute__((visibility(\"default\")))\n"                             \
    "#define LF_INLINE static inline __attribute__((always_inline))\n"                         \
    "#define LF_FUNC static\n"

/* The helpers both dialects include after their own header (which defines
 * the integer types, NAN, INFINITY, LF_INLINE and LF_FUNC). */
const char cg_prelude_helpers[] =
    "typedef union { double f; int64_t i; } lf_value;\n"
    "typedef struct { lf_value v; int64_t arg; } lf_partial;\n"
    "/* float -> integer: truncate, saturate, NaN -> 0 */\n"
    "LF_INLINE int32_t lf_f2i32(double x) {\n"
    "    return x != x ? 0 : x >= 2147483647.0 ? INT32_MAX : x <= -2147483648.0 ? INT32_MIN\n"
    "         : (int32_t)x;\n"
    "}\n"
    "LF_INLINE int64_t lf_f2i64(double x) {\n"
    "    return x != x ? 0 : x >= 9223372036854775808.0 ? INT64_MAX\n"
    "         : x < -9223372036854775808.0 ? INT64_MIN : (int64_t)x;\n"
    "}\n"
    "/* Python's modulo: the result takes the divisor's sign */\n"
    "LF_INLINE float lf_pymod_f32(float a, float b) {\n"
    "    float r = fmodf(a, b);\n"
    "    return r != 0 ? (((r < 0) != (b < 0)) ? r + b : r) : copysignf(0.0f, b);\n"
    "}\n"
    "LF_INLINE double lf_pymod_f64(double a, double b) {\n"
    "    double r = fmod(a, b);\n"
    "    return r != 0 ? (((r < 0) != (b < 0)) ? r + b : r) : copysign(0.0, b);\n"
    "}\n"
    "LF_INLINE int64_t lf_imod(int64_t a, int64_t b) {\n"
    "    if (b == 0 || b == -1) return 0;\n"
    "    int64_t r = a % b;\n"
    "    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;\n"
    "}\n"
    "/* C's remainder (fmod of integers): the dividend's sign; x by 0 or -1 is 0 */\n"
    "LF_INLINE int64_t lf_ifmod(int64_t a, int64_t b) { return (b == 0 || b == -1) ? 0 : a % b; }\n"
    "/* floor division: x // 0 is 0, MIN // -1 wraps (NumPy); wrapped by the caller */\n"
    "LF_INLINE uint64_t lf_ifloordiv(int64_t a, int64_t b) {\n"
    "    if (b == 0) return 0;\n"
    "    if (b == -1) return 0 - (uint64_t)a;\n"
    "    int64_t q = a / b;\n"
    "    return (uint64_t)(q - (a % b != 0 && (a < 0) != (b < 0)));\n"
    "}\n"
    "/* NumPy's npy_floor_divide (fmod-based), the same steps in each type */\n"
    "LF_INLINE float lf_floordiv_f32(float a, float b) {\n"
    "    if (b == 0) return a / b;\n"
    "    float mod = fmodf(a, b), div = (a - mod) / b;\n"
    "    if (mod != 0 && (b < 0) != (mod < 0)) div -= 1.0f;\n"
    "    if (div == 0) return copysignf(0.0f, a / b);\n"
    "    float fl = floorf(div);\n"
    "    return div - fl > 0.5f ? fl + 1.0f : fl;\n"
    "}\n"
    "LF_INLINE double lf_floordiv_f64(double a, double b) {\n"
    "    if (b == 0) return a / b;\n"
    "    double mod = fmod(a, b), div = (a - mod) / b;\n"
    "    if (mod != 0 && (b < 0) != (mod < 0)) div -= 1.0;\n"
    "    if (div == 0) return copysign(0.0, a / b);\n"
    "    double fl = floor(div);\n"
    "    return div - fl > 0.5 ? fl + 1.0 : fl;\n"
    "}\n"
    "/* shifts: a count outside [0, width) gives 0, or -1 for >> of a negative\n"
    "   value (NumPy); >> is arithmetic without shifting a negative number */\n"
    "LF_INLINE int32_t lf_shl_i32(int32_t a, int32_t b) {\n"
    "    return (uint32_t)b < 32u ? (int32_t)((uint32_t)a << b) : 0;\n"
    "}\n"
    "LF_INLINE int64_t lf_shl_i64(int64_t a, int64_t b) {\n"
    "    return (uint64_t)b < 64u ? (int64_t)((uint64_t)a << b) : 0;\n"
    "}\n"
    "LF_INLINE int32_t lf_shr_i32(int32_t a, int32_t b) {\n"
    "    int32_t s = (uint32_t)b < 32u ? b : 31;\n"
    "    return a < 0 ? ~(~a >> s) : a >> s;\n"
    "}\n"
    "LF_INLINE int64_t lf_shr_i64(int64_t a, int64_t b) {\n"
    "    int64_t s = (uint64_t)b < 64u ? b : 63;\n"
    "    return a < 0 ? ~(~a >> s) : a >> s;\n"
    "}\n"
    "LF_INLINE uint64_t lf_ipow(int64_t base, int64_t e) {\n"
    "    if (e < 0) return base == 1 ? 1u : base == -1 ? ((e & 1) ? (uint64_t)-1 : 1u) : 0u;\n"
    "    uint64_t r = 1, b = (uint64_t)base;\n"
    "    while (e) { if (e & 1) r *= b; b *= b; e >>= 1; }\n"
    "    return r;\n"
    "}\n"
    "/* x ** y. GCC's vectorizer replaces pow(x, 0.5) by a vector sqrt\n"
    "   (vect_recog_pow_pattern, even without fast-math) but keeps pow in the\n"
    "   scalar tail, and sqrt differs from pow at -inf (NaN, not +inf), at -0\n"
    "   (-0, not +0) and by 1 ulp for some finite x. So y == 0.5 is always the\n"
    "   square root with pow's special values: the same result at every\n"
    "   position (and on CUDA), correctly rounded; other y call pow. */\n"
    "LF_INLINE float lf_pow_f32(float x, float y) {\n"
    "    float h = x == -(float)INFINITY ? (float)INFINITY : sqrtf(x) + 0.0f;\n"
    "    return y == 0.5f ? h : powf(x, y);\n"
    "}\n"
    "LF_INLINE double lf_pow_f64(double x, double y) {\n"
    "    double h = x == -(double)INFINITY ? (double)INFINITY : sqrt(x) + 0.0;\n"
    "    return y == 0.5 ? h : pow(x, y);\n"
    "}\n"
    "/* min/max propagate NaN (as the canonical NaN) */\n"
    "LF_INLINE float lf_fmin_f32(float a, float b) { return (a != a || b != b) ? (float)NAN : (b < a ? b : a); }\n"
    "LF_INLINE float lf_fmax_f32(float a, float b) { return (a != a || b != b) ? (float)NAN : (b > a ? b : a); }\n"
    "LF_INLINE double lf_fmin_f64(double a, double b) { return (a != a || b != b) ? NAN : (b < a ? b : a); }\n"
    "LF_INLINE double lf_fmax_f64(double a, double b) { return (a != a || b != b) ? NAN : (b > a ? b : a); }\n"
    "LF_INLINE float lf_sign_f32(float x) { return x != x ? x : x > 0 ? 1.0f : x < 0 ? -1.0f : x; }\n"
    "LF_INLINE double lf_sign_f64(double x) { return x != x ? x : x > 0 ? 1.0 : x < 0 ? -1.0 : x; }\n"
    "LF_INLINE int lf_isinf_f32(float x) { return fabsf(x) == (float)INFINITY; }\n"
    "LF_INLINE int lf_isinf_f64(double x) { return fabs(x) == INFINITY; }\n"
    "/* iota element i: wrapping int64 (exact) or double */\n"
    "LF_INLINE int64_t lf_iota_int(int64_t i, int64_t start, int64_t step) {\n"
    "    return (int64_t)((uint64_t)start + (uint64_t)i * (uint64_t)step);\n"
    "}\n"
    "LF_INLINE double lf_iota_float(int64_t i, int64_t start_bits, int64_t step_bits) {\n"
    "    union { int64_t i; double f; } a = {start_bits}, b = {step_bits};\n"
    "    return a.f + (double)i * b.f;\n"
    "}\n"
    "/* a constant node's value passed in P as the bits of a double */\n"
    "LF_INLINE double lf_bits_f64(int64_t bits) {\n"
    "    union { int64_t i; double f; } a = {bits};\n"
    "    return a.f;\n"
    "}\n"
    "/* random nodes: Philox4x32-10 of (seed, flat index), graph/random.h */\n"
    STRINGIZE(GRAPH_RANDOM_CODE) "\n"
    "/* gather loads: whether index v is in range for extent n (NumPy's negative\n"
    "   indices count from the end), raising the kernel's error flag if not; the\n"
    "   wrapped index */\n"
    "LF_INLINE int lf_gok(int64_t v, int64_t n, volatile int32_t *err) {\n"
    "    /* v in [-n, n): one unsigned compare (no wrap: 0 <= n < 2^63) */\n"
    "    if ((uint64_t)v + (uint64_t)n < 2 * (uint64_t)n) return 1;\n"
    "    *err = 1;\n"
    "    return 0;\n"
    "}\n"
    "LF_INLINE int64_t lf_gwrap(int64_t v, int64_t n) { return v < 0 ? v + n : v; }\n"
    "/* scatter min/max: NaN propagates (graph_scatter_combine) */\n"
    "LF_INLINE float lf_scmin_f32(float x, float y) { return x != x ? x : y != y ? y : y < x ? y : x; }\n"
    "LF_INLINE float lf_scmax_f32(float x, float y) { return x != x ? x : y != y ? y : y > x ? y : x; }\n"
    "LF_INLINE double lf_scmin_f64(double x, double y) { return x != x ? x : y != y ? y : y < x ? y : x; }\n"
    "LF_INLINE double lf_scmax_f64(double x, double y) { return x != x ? x : y != y ? y : y > x ? y : x; }\n"
    "/* the extra steps of an index map (a reshape of a non-contiguous view) */\n"
    "LF_FUNC int64_t lf_steps(const int64_t *d, int64_t lin) {\n"
    "    int64_t n = *d++;\n"
    "    for (int64_t s = 0; s < n; s++) {\n"
    "        int64_t nd = d[0], off = d[1], out = off;\n"
    "        const int64_t *shape = d + 2, *strides = d + 2 + nd;\n"
    "        for (int64_t k = nd - 1; k >= 0; k--) {\n"
    "            int64_t q = shape[k] ? lin % shape[k] : 0;\n"
    "            lin = shape[k] ? lin / shape[k] : 0;\n"
    "            out += q * strides[k];\n"
    "        }\n"
    "        lin = out;\n"
    "        d += 2 + 2 * nd;\n"
    "    }\n"
    "    return lin;\n"
    "}\n"
    "/* combining two partial results of a reduction (fixed order) */\n"
    "LF_INLINE double lf_cmin_f(double a, double b) { return a != a ? a : b != b ? b : (b < a ? b : a); }\n"
    "LF_INLINE double lf_cmax_f(double a, double b) { return a != a ? a : b != b ? b : (b > a ? b : a); }\n"
    "LF_INLINE int64_t lf_cmin_i(int64_t a, int64_t b) { return b < a ? b : a; }\n"
    "LF_INLINE int64_t lf_cmax_i(int64_t a, int64_t b) { return b > a ? b : a; }\n"
    "/* arg: -1 means the partial saw only the start value (the extreme itself) */\n"
    "LF_INLINE void lf_carg_f(double *a, int64_t *aa, double b, int64_t ba, int want_min) {\n"
    "    int an = *a != *a, bn = b != b, take;\n"
    "    if (an || bn) take = bn && (!an || ba < *aa);\n"
    "    else if (b != *a) take = want_min ? b < *a : b > *a;\n"
    "    else take = ba >= 0 && (*aa < 0 || ba < *aa);\n"
    "    if (take) { *a = b; *aa = ba; }\n"
    "}\n"
    "LF_INLINE void lf_carg_i(int64_t *a, int64_t *aa, int64_t b, int64_t ba, int want_min) {\n"
    "    int take;\n"
    "    if (b != *a) take = want_min ? b < *a : b > *a;\n"
    "    else take = ba >= 0 && (*aa < 0 || ba < *aa);\n"
    "    if (take) { *a = b; *aa = ba; }\n"
    "}\n";

/* libm functions glibc's libmvec implements for every x86-64 vector ISA. */
#define SIMD_DECLS                                                                              \
    "#define LF_SIMD __attribute__((simd(\"notinbranch\"), const, nothrow, leaf))\n"           \
    "LF_SIMD float expf(float); LF_SIMD double exp(double);\n"                                 \
    "LF_SIMD float exp2f(float); LF_SIMD double exp2(double);\n"                               \
    "LF_SIMD float expm1f(float); LF_SIMD double expm1(double);\n"                             \
    "LF_SIMD float logf(float); LF_SIMD double log(double);\n"                                 \
    "LF_SIMD float log2f(float); LF_SIMD double log2(double);\n"                               \
    "LF_SIMD float log10f(float); LF_SIMD double log10(double);\n"                             \
    "LF_SIMD float log1pf(float); LF_SIMD double log1p(double);\n"                             \
    "LF_SIMD float sinf(float); LF_SIMD double sin(double);\n"                                 \
    "LF_SIMD float cosf(float); LF_SIMD double cos(double);\n"                                 \
    "LF_SIMD float tanf(float); LF_SIMD double tan(double);\n"                                 \
    "LF_SIMD float asinf(float); LF_SIMD double asin(double);\n"                               \
    "LF_SIMD float acosf(float); LF_SIMD double acos(double);\n"                               \
    "LF_SIMD float atanf(float); LF_SIMD double atan(double);\n"                               \
    "LF_SIMD float sinhf(float); LF_SIMD double sinh(double);\n"                               \
    "LF_SIMD float coshf(float); LF_SIMD double cosh(double);\n"                               \
    "LF_SIMD float tanhf(float); LF_SIMD double tanh(double);\n"                               \
    "LF_SIMD float asinhf(float); LF_SIMD double asinh(double);\n"                             \
    "LF_SIMD float acoshf(float); LF_SIMD double acosh(double);\n"                             \
    "LF_SIMD float atanhf(float); LF_SIMD double atanh(double);\n"                             \
    "LF_SIMD float erff(float); LF_SIMD double erf(double);\n"                                 \
    "LF_SIMD float cbrtf(float); LF_SIMD double cbrt(double);\n"                               \
    "LF_SIMD float powf(float, float); LF_SIMD double pow(double, double);\n"                  \
    "LF_SIMD float atan2f(float, float); LF_SIMD double atan2(double, double);\n"              \
    "LF_SIMD float hypotf(float, float); LF_SIMD double hypot(double, double);\n"

static const cg_dialect c_scalar = {
    .name = "c",
    .prelude = PRELUDE_C,
    .restrict_kw = "restrict",
    .value_attr = "",
    .type = {"uint8_t", "int32_t", "int64_t", "float", "double"},
    .value_type = {"int", "int32_t", "int64_t", "float", "double"},
    .entry = "LF_ENTRY",
    .vector_math = false,
};

static const cg_dialect c_vector = {
    .name = "c",
    .prelude = PRELUDE_C SIMD_DECLS,
    .restrict_kw = "restrict",
    .value_attr = "",
    .type = {"uint8_t", "int32_t", "int64_t", "float", "double"},
    .value_type = {"int", "int32_t", "int64_t", "float", "double"},
    .entry = "LF_ENTRY",
    .vector_math = true,
};

const cg_dialect *cg_dialect_c(bool vector_math) { return vector_math ? &c_vector : &c_scalar; }
