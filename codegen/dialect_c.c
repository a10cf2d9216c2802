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
 * libm functions that glibc's libmvec implements are called as lf_<fn>,
 * declared `simd` so GCC vectorizes loops that call them, and defined per
 * kernel so that every vector width and the scalar call go through one
 * libmvec variant (cg_c_vmath_defs: an element's result never depends on
 * its position in the array); libmvec's accuracy (a few ulp, stated in
 * lazyfuse.h and tested) is then the only difference from the reference
 * evaluator outside reductions. The normal random numbers are the one
 * helper a C kernel declares and does not define: cg_c_random_object holds
 * them, compiled once per disk cache by the CPU backend (graph/random.h).
 */
#include "codegen/codegen.h"
#include "graph/complex.h"
#include "graph/random.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* graph/random.h's code as text (LF_INLINE is not a macro here) */
#define STRINGIZE_(...) #__VA_ARGS__
#define STRINGIZE(...) STRINGIZE_(__VA_ARGS__)

/* Streaming stores (emit_c.c's streaming elementwise kernels): lf_stream
 * copies a tile to dst, the part of dst on whole 64-byte lines with
 * non-temporal stores (no read of the line, no cache fill) and the
 * unaligned head and tail with plain ones; lf_sfence orders them before
 * what follows (the pool publishing that the run is done). Without SSE
 * (another architecture) both are plain. */
#define PRELUDE_STREAM                                                                          \
    "static __attribute__((noinline, unused)) void lf_stream(void *restrict dst, const void *restrict src, int64_t bytes) {\n" \
    "    typedef float lf_nt4 __attribute__((vector_size(16)));\n"                             \
    "    typedef float lf_nt8 __attribute__((vector_size(32)));\n"                             \
    "    typedef float lf_nt16 __attribute__((vector_size(64)));\n"                            \
    "    char *d = (char *)dst;\n"                                                             \
    "    const char *s = (const char *)src;\n"                                                 \
    "    int64_t head = (int64_t)((64 - ((uintptr_t)d & 63)) & 63);\n"                         \
    "    if (head > bytes) head = bytes;\n"                                                    \
    "    __builtin_memcpy(d, s, (__SIZE_TYPE__)head);\n"                                       \
    "    d += head, s += head, bytes -= head;\n"                                               \
    "#if defined(__clang__) && defined(__SSE__)\n"                                             \
    "    for (; bytes >= 16; bytes -= 16, d += 16, s += 16) { lf_nt4 v; __builtin_memcpy(&v, s, 16); __builtin_nontemporal_store(v, (lf_nt4 *)d); }\n" \
    "#elif defined(__AVX512F__)\n"                                                             \
    "    for (; bytes >= 64; bytes -= 64, d += 64, s += 64) { lf_nt16 v; __builtin_memcpy(&v, s, 64); __builtin_ia32_movntps512((float *)d, v); }\n" \
    "#elif defined(__AVX__)\n"                                                                 \
    "    for (; bytes >= 32; bytes -= 32, d += 32, s += 32) { lf_nt8 v; __builtin_memcpy(&v, s, 32); __builtin_ia32_movntps256((float *)d, v); }\n" \
    "#elif defined(__SSE__)\n"                                                                 \
    "    for (; bytes >= 16; bytes -= 16, d += 16, s += 16) { lf_nt4 v; __builtin_memcpy(&v, s, 16); __builtin_ia32_movntps((float *)d, v); }\n" \
    "#endif\n"                                                                                 \
    "    (void)sizeof(lf_nt4), (void)sizeof(lf_nt8), (void)sizeof(lf_nt16);\n"                 \
    "    __builtin_memcpy(d, s, (__SIZE_TYPE__)bytes);\n"                                      \
    "}\n"                                                                                      \
    "LF_INLINE void lf_sfence(void) {\n"                                                       \
    "#if defined(__SSE__)\n"                                                                   \
    "    __builtin_ia32_sfence();\n"                                                           \
    "#endif\n"                                                                                 \
    "}\n"

#define PRELUDE_C                                                                               \
    "/* lazyfuse generated kernel (C dialect). */\n"                                           \
    "#include <stdint.h>\n"                                                                    \
    "#include <math.h>\n"                                                                      \
    "typedef int64_t lf_idx; /* index arithmetic */\n"                                         \
    "#define LF_ENTRY __attribute__((visibility(\"default\")))\n"                             \
    "#define LF_INLINE static inline __attribute__((always_inline))\n"                         \
    "#define LF_FUNC static\n"                                                                  \
    "#define LF_RANDOM_NORMAL_EXTERN __attribute__((simd(\"notinbranch\"), const, nothrow, leaf))\n" \
    "/* libm for graph/complex.h, before any renaming */\n"                                 \
    STRINGIZE(GRAPH_COMPLEX_LIBM) "\n"                                                          \
    PRELUDE_STREAM

/* The object every C kernel that calls lf_random_normal is linked with
 * (PRELUDE_C declares it; the CPU backend compiles this once per disk cache
 * with the kernels' flags and -c): graph/random.h's code, the normal itself
 * defined with its vector variants (GCC's simd clones, one per x86 ISA),
 * hidden in the kernel's shared object like the rest of it. */
const char cg_c_random_object[] =
    "/* lazyfuse: lf_random_normal for C kernels (graph/random.h) */\n"
    "#include <stdint.h>\n"
    "#include <math.h>\n"
    "#define LF_INLINE static inline __attribute__((always_inline))\n"
    STRINGIZE(GRAPH_RANDOM_BITS_CODE) "\n"
    STRINGIZE(GRAPH_RANDOM_NORMAL_OF_CODE) "\n"
    "#undef LF_INLINE\n"
    "#define LF_INLINE __attribute__((simd(\"notinbranch\")))\n"
    STRINGIZE(GRAPH_RANDOM_NORMAL_CODE) "\n";

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
    "/* the small and unsigned integers (graph/scalar.c): float -> integer\n"
    "   truncates, saturates (unsigned at 0), NaN -> 0; shifts as i32's, >> of\n"
    "   an unsigned value logical; // % ** of unsigned values unsigned */\n"
    "LF_INLINE int8_t lf_f2i8(double x) { return x != x ? 0 : x >= 128.0 ? 127 : x <= -128.0 ? -128 : (int8_t)x; }\n"
    "LF_INLINE int8_t lf_shl_i8(int8_t a, int8_t b) { return (uint64_t)(int64_t)b < 8u ? (int8_t)((uint64_t)a << b) : 0; }\n"
    "LF_INLINE int8_t lf_shr_i8(int8_t a, int8_t b) {\n    int s = (uint64_t)(int64_t)b < 8u ? (int)b : 7;\n    return (int8_t)(a < 0 ? ~(~(int32_t)a >> s) : (int32_t)a >> s);\n}\n"
    "LF_INLINE uint8_t lf_f2u8(double x) { return x != x ? 0 : x >= 256.0 ? 255 : x <= 0 ? 0 : (uint8_t)x; }\n"
    "LF_INLINE uint8_t lf_shl_u8(uint8_t a, uint8_t b) { return (uint64_t)b < 8u ? (uint8_t)((uint64_t)a << b) : 0; }\n"
    "LF_INLINE uint8_t lf_shr_u8(uint8_t a, uint8_t b) { return (uint64_t)b < 8u ? (uint8_t)((uint64_t)a >> b) : 0; }\n"
    "LF_INLINE int16_t lf_f2i16(double x) { return x != x ? 0 : x >= 32768.0 ? 32767 : x <= -32768.0 ? -32768 : (int16_t)x; }\n"
    "LF_INLINE int16_t lf_shl_i16(int16_t a, int16_t b) { return (uint64_t)(int64_t)b < 16u ? (int16_t)((uint64_t)a << b) : 0; }\n"
    "LF_INLINE int16_t lf_shr_i16(int16_t a, int16_t b) {\n    int s = (uint64_t)(int64_t)b < 16u ? (int)b : 15;\n    return (int16_t)(a < 0 ? ~(~(int32_t)a >> s) : (int32_t)a >> s);\n}\n"
    "LF_INLINE uint16_t lf_f2u16(double x) { return x != x ? 0 : x >= 65536.0 ? 65535 : x <= 0 ? 0 : (uint16_t)x; }\n"
    "LF_INLINE uint16_t lf_shl_u16(uint16_t a, uint16_t b) { return (uint64_t)b < 16u ? (uint16_t)((uint64_t)a << b) : 0; }\n"
    "LF_INLINE uint16_t lf_shr_u16(uint16_t a, uint16_t b) { return (uint64_t)b < 16u ? (uint16_t)((uint64_t)a >> b) : 0; }\n"
    "LF_INLINE uint32_t lf_f2u32(double x) { return x != x ? 0 : x >= 4294967296.0 ? 4294967295u : x <= 0 ? 0 : (uint32_t)x; }\n"
    "LF_INLINE uint32_t lf_shl_u32(uint32_t a, uint32_t b) { return (uint64_t)b < 32u ? (uint32_t)((uint64_t)a << b) : 0; }\n"
    "LF_INLINE uint32_t lf_shr_u32(uint32_t a, uint32_t b) { return (uint64_t)b < 32u ? (uint32_t)((uint64_t)a >> b) : 0; }\n"
    "LF_INLINE uint64_t lf_f2u64(double x) { return x != x ? 0 : x >= 18446744073709551616.0 ? 18446744073709551615ull : x <= 0 ? 0 : (uint64_t)x; }\n"
    "LF_INLINE uint64_t lf_shl_u64(uint64_t a, uint64_t b) { return (uint64_t)b < 64u ? (uint64_t)((uint64_t)a << b) : 0; }\n"
    "LF_INLINE uint64_t lf_shr_u64(uint64_t a, uint64_t b) { return (uint64_t)b < 64u ? (uint64_t)((uint64_t)a >> b) : 0; }\n"
    "LF_INLINE uint64_t lf_umod(uint64_t a, uint64_t b) { return b ? a % b : 0; }\n"
    "LF_INLINE uint64_t lf_udiv(uint64_t a, uint64_t b) { return b ? a / b : 0; }\n"
    "LF_INLINE uint64_t lf_upow(uint64_t b, uint64_t e) {\n"
    "    uint64_t r = 1;\n"
    "    while (e) { if (e & 1) r *= b; b *= b; e >>= 1; }\n"
    "    return r;\n"
    "}\n"
    "/* f16 and bf16: stored as their bits, computed in float; lf_st_* rounds\n"
    "   to nearest even (NaN: the quiet NaN of its sign, overflow: inf),\n"
    "   lf_rnd_* is the float value of that rounding, lf_d2* rounds a double\n"
    "   once (graph/scalar.c's round_to_format) */\n"
    "LF_INLINE float lf_u2f(uint32_t u) { union { uint32_t u; float f; } c = {u}; return c.f; }\n"
    "LF_INLINE uint32_t lf_f2u(float f) { union { float f; uint32_t u; } c = {f}; return c.u; }\n"
    "/* branch-free: every case computed, then chosen by a mask (lf_sel: with\n"
    "   ?: GCC made branches, which mispredict on mixed exponents) */\n"
    "LF_INLINE uint32_t lf_sel(int c, uint32_t a, uint32_t b) { uint32_t m = 0u - (uint32_t)(c != 0); return (a & m) | (b & ~m); }\n"
    "LF_INLINE float lf_ld_f16(uint16_t h) {\n"
    "    uint32_t s = (uint32_t)(h & 0x8000u) << 16, e = (uint32_t)(h >> 10) & 0x1fu, m = h & 0x3ffu;\n"
    "    uint32_t nrm = s | ((e + 112u) << 23) | (m << 13), spec = s | 0x7f800000u | (m << 13);\n"
    "    uint32_t sub = s | lf_f2u((float)(int32_t)m * 5.9604644775390625e-8f); /* m 2^-24, exact */\n"
    "    return lf_u2f(lf_sel(e == 0x1fu, spec, lf_sel(e == 0, sub, nrm)));\n"
    "}\n"
    "LF_INLINE uint16_t lf_st_f16(float f) {\n"
    "    uint32_t x = lf_f2u(f), sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;\n"
    "    uint32_t nrm = (ax + 0xc8000fffu + ((ax >> 13) & 1u)) >> 13; /* exponent rebiased, nearest even */\n"
    "    uint32_t sub = lf_f2u(lf_u2f(ax) + 0.5f) - 0x3f000000u; /* below 2^-14: the add rounds to k 2^-24 */\n"
    "    uint32_t r = lf_sel(ax < 0x38800000u, sub, nrm);\n"
    "    r = lf_sel(ax >= 0x477ff000u, 0x7c00u, r); /* 65520 and up round to inf */\n"
    "    r = lf_sel(ax > 0x7f800000u, 0x7e00u, r);\n"
    "    return (uint16_t)(sign | r);\n"
    "}\n"
    "LF_INLINE float lf_ld_bf16(uint16_t h) { return lf_u2f((uint32_t)h << 16); }\n"
    "LF_INLINE uint16_t lf_st_bf16(float f) {\n"
    "    uint32_t x = lf_f2u(f), r = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;\n"
    "    return (uint16_t)lf_sel((x & 0x7fffffffu) > 0x7f800000u, ((x >> 16) & 0x8000u) | 0x7fc0u, r);\n"
    "}\n"
    "LF_INLINE float lf_rnd_f16(float f) { return lf_ld_f16(lf_st_f16(f)); }\n"
    "LF_INLINE float lf_rnd_bf16(float f) { return lf_ld_bf16(lf_st_bf16(f)); }\n"
    "LF_INLINE float lf_d2half(double x, int digits, int emin, int maxexp) {\n"
    "    if (x == 0 || x != x || x - x != 0) return (float)x; /* zeros, NaN, inf */\n"
    "    int e;\n"
    "    (void)frexp(x, &e);\n"
    "    int q = (e > emin ? e : emin) - digits;\n"
    "    double r = ldexp(nearbyint(ldexp(x, -q)), q);\n"
    "    return fabs(r) >= ldexp(1.0, maxexp) ? (float)copysign((double)INFINITY, x) : (float)r;\n"
    "}\n"
    "LF_INLINE float lf_d2f16(double x) { return lf_d2half(x, 11, -13, 16); }\n"
    "LF_INLINE float lf_d2bf16(double x) { return lf_d2half(x, 8, -125, 128); }\n"
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
    "   position (and on CUDA), correctly rounded; other y call pow. And\n"
    "   +-0 ** y for y < 0 is set here: +inf, or -0's -inf when y is an odd\n"
    "   integer (glibc 2.36's vector pow gives +inf for -0 ** -1). x ** 2 is\n"
    "   x * x (exact: pow is correctly rounded there), which GCC did itself\n"
    "   for a literal 2 when pow was called by its builtin name; x ** 1 is x,\n"
    "   x ** 0 is 1 (NaN too) and x ** -1 is 1 / x (pow's values, +-0 and\n"
    "   +-inf included; 1 / x is correctly rounded). A constant exponent of\n"
    "   one of these values reaches here as a literal (graph_pow_exponent_class)\n"
    "   and the compiler keeps only its branch. sqrt and 1 / x are computed\n"
    "   whatever y is: under C's trapping math the compiler may not speculate\n"
    "   them out of a branch, and a branch keeps the loop from vectorizing\n"
    "   (pow too: its vector variants are declared notinbranch; when y is a\n"
    "   literal of a class the unused call is dropped, pow being const).\n"
    "   The choice is made on bits (lf_blend_*, c ? b : a): with ?: GCC sank\n"
    "   each value into the arm that uses it and the loop stayed scalar\n"
    "   (x ** 0.5 ran 4x slower than sqrt(x), x ** 0.7 called a padded\n"
    "   vector pow once per element); for the same reason -0's square root\n"
    "   becomes +0 by fabs (a bit operation), not by + 0.0, which the\n"
    "   compiler would sink into the branch. */\n"
    "LF_INLINE float lf_blend_f32(int c, float a, float b) {\n"
    "    union { float f; uint32_t u; } x = {a}, y = {b}, r;\n"
    "    uint32_t m = -(uint32_t)(c != 0);\n"
    "    r.u = (x.u & ~m) | (y.u & m);\n"
    "    return r.f;\n"
    "}\n"
    "LF_INLINE double lf_blend_f64(int c, double a, double b) {\n"
    "    union { double f; uint64_t u; } x = {a}, y = {b}, r;\n"
    "    uint64_t m = -(uint64_t)(c != 0);\n"
    "    r.u = (x.u & ~m) | (y.u & m);\n"
    "    return r.f;\n"
    "}\n"
    "LF_INLINE float lf_pow_f32(float x, float y) {\n"
    "    float sq = fabsf(sqrtf(x)), x2 = x * x, inv = 1.0f / x, pw = powf(x, y), hy = y * 0.5f;\n"
    "    float z = lf_blend_f32((y == truncf(y)) & (hy != truncf(hy)), (float)INFINITY, copysignf((float)INFINITY, x));\n"
    "    float r = lf_blend_f32((x == 0) & (y < 0), pw, z);\n"
    "    r = lf_blend_f32(y == -1, r, inv);\n"
    "    r = lf_blend_f32(y == 0, r, 1.0f);\n"
    "    r = lf_blend_f32(y == 1, r, x);\n"
    "    r = lf_blend_f32(y == 2, r, x2);\n"
    "    return lf_blend_f32(y == 0.5f, r, lf_blend_f32(x == -(float)INFINITY, sq, (float)INFINITY));\n"
    "}\n"
    "LF_INLINE double lf_pow_f64(double x, double y) {\n"
    "    double sq = fabs(sqrt(x)), x2 = x * x, inv = 1.0 / x, pw = pow(x, y), hy = y * 0.5;\n"
    "    double z = lf_blend_f64((y == trunc(y)) & (hy != trunc(hy)), (double)INFINITY, copysign((double)INFINITY, x));\n"
    "    double r = lf_blend_f64((x == 0) & (y < 0), pw, z);\n"
    "    r = lf_blend_f64(y == -1, r, inv);\n"
    "    r = lf_blend_f64(y == 0, r, 1.0);\n"
    "    r = lf_blend_f64(y == 1, r, x);\n"
    "    r = lf_blend_f64(y == 2, r, x2);\n"
    "    return lf_blend_f64(y == 0.5, r, lf_blend_f64(x == -(double)INFINITY, sq, (double)INFINITY));\n"
    "}\n"
    "/* atan2(y, x) with y == +-0 set here as C's atan2 has it: +-0 for x > 0\n"
    "   or x == +0, +-pi for x < 0 or x == -0 (glibc 2.36's vector atan2 gave\n"
    "   +pi for (-0, -0.5) and 0 for (+-0, -0)); a NaN x stays atan2's NaN. */\n"
    "LF_INLINE float lf_atan2_f32(float y, float x) {\n"
    "    float z = x < 0 || (x == 0 && signbit(x)) ? copysignf(3.14159274f, y) : copysignf(0.0f, y);\n"
    "    return y == 0 && x == x ? z : atan2f(y, x);\n"
    "}\n"
    "LF_INLINE double lf_atan2_f64(double y, double x) {\n"
    "    double z = x < 0 || (x == 0 && signbit(x)) ? copysign(3.141592653589793, y) : copysign(0.0, y);\n"
    "    return y == 0 && x == x ? z : atan2(y, x);\n"
    "}\n"
    "/* min/max as NumPy's minimum/maximum: a NaN operand is returned (the\n"
    "   first when both are), of equal values (+0, -0) the second */\n"
    "LF_INLINE float lf_fmin_f32(float a, float b) { return (a < b || a != a) ? a : b; }\n"
    "LF_INLINE float lf_fmax_f32(float a, float b) { return (a > b || a != a) ? a : b; }\n"
    "LF_INLINE double lf_fmin_f64(double a, double b) { return (a < b || a != a) ? a : b; }\n"
    "LF_INLINE double lf_fmax_f64(double a, double b) { return (a > b || a != a) ? a : b; }\n"
    "/* sign: NaN stays NaN, +-0 gives +0 (NumPy) */\n"
    "LF_INLINE float lf_sign_f32(float x) { return x != x ? x : x > 0 ? 1.0f : x < 0 ? -1.0f : 0.0f; }\n"
    "LF_INLINE double lf_sign_f64(double x) { return x != x ? x : x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0; }\n"
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
    STRINGIZE(GRAPH_RANDOM_BITS_CODE) "\n"
    "#ifdef LF_RANDOM_NORMAL_EXTERN\n"
    "/* compiled once per cache, linked in (cg_c_random_object) */\n"
    "LF_RANDOM_NORMAL_EXTERN double lf_random_normal(int64_t i, uint64_t seed);\n"
    "#else\n"
    STRINGIZE(GRAPH_RANDOM_NORMAL_OF_CODE) "\n"
    STRINGIZE(GRAPH_RANDOM_NORMAL_CODE) "\n"
    "#endif\n"
    "/* complex c64, c128: graph/complex.h's types and formulas */\n"
    STRINGIZE(GRAPH_COMPLEX_CODE) "\n"
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
    "/* the extra steps of an index map (a reshape of a non-contiguous view;\n"
    "   a remapped view, lf_pad / lf_concat: nd < 0 marks a step whose axes\n"
    "   carry mode, shift and extent, graph_remap_coord's arithmetic) */\n"
    "LF_FUNC int64_t lf_steps(const int64_t *d, int64_t lin) {\n"
    "    int64_t n = *d++;\n"
    "    for (int64_t s = 0; s < n; s++) {\n"
    "        int64_t nd = d[0] < 0 ? -d[0] : d[0], off = d[1], out = off;\n"
    "        const int64_t *shape = d + 2, *strides = d + 2 + nd, *rm = d[0] < 0 ? d + 2 + 2 * nd : 0;\n"
    "        for (int64_t k = nd - 1; k >= 0; k--) {\n"
    "            int64_t q = shape[k] ? lin % shape[k] : 0;\n"
    "            lin = shape[k] ? lin / shape[k] : 0;\n"
    "            if (rm && rm[3 * k]) {\n"
    "                int64_t u = q - rm[3 * k + 1], e = rm[3 * k + 2];\n"
    "                if (rm[3 * k] == 1) {\n"
    "                    q = u < 0 ? 0 : u >= e ? e - 1 : u;\n"
    "                } else if (e <= 1) {\n"
    "                    q = 0;\n"
    "                } else {\n"
    "                    int64_t p = 2 * (e - 1);\n"
    "                    u %= p;\n"
    "                    if (u < 0) u += p;\n"
    "                    q = u >= e ? p - u : u;\n"
    "                }\n"
    "            }\n"
    "            out += q * strides[k];\n"
    "        }\n"
    "        lin = out;\n"
    "        d += 2 + (rm ? 5 : 2) * nd;\n"
    "    }\n"
    "    return lin;\n"
    "}\n"
    "/* a remapped coordinate u of a view axis: mode 0 none, 1 clamp into\n"
    "   [0, e), 2 reflect with period 2(e-1) (graph_remap_coord's arithmetic) */\n"
    "LF_INLINE int64_t lf_rmp(int64_t u, int64_t mode, int64_t e) {\n"
    "    if (mode == 0) return u;\n"
    "    if (mode == 1) return u < 0 ? 0 : u >= e ? e - 1 : u;\n"
    "    if (e <= 1) return 0;\n"
    "    int64_t p = 2 * (e - 1);\n"
    "    u %= p;\n"
    "    if (u < 0) u += p;\n"
    "    return u >= e ? p - u : u;\n"
    "}\n"
    "/* a split remapped read (cg_access.param_split) over one row: d is its\n"
    "   lf_steps data (one remapped step), lin the view position at the row's\n"
    "   element 0, ax the view axis the row moves by k per element. base: the\n"
    "   element index without axis ax's term; u: axis ax's input coordinate\n"
    "   (before its remap) at element 0; t, mode, e: that axis' stride, remap\n"
    "   and input extent; inner: the index at element 0 where no remap applies;\n"
    "   [lo, hi): the elements whose coordinate needs no remap */\n"
    "typedef struct lf_rrow { int64_t base, u, k, t, mode, e, inner, lo, hi; } lf_rrow;\n"
    "LF_INLINE int64_t lf_floordiv_pos(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }\n"
    "LF_FUNC lf_rrow lf_remap_row(const int64_t *d, int64_t lin, int64_t ax, int64_t k) {\n"
    "    lf_rrow r;\n"
    "    int64_t nd = -d[1];\n"
    "    const int64_t *shape = d + 3, *strides = d + 3 + nd, *rm = d + 3 + 2 * nd;\n"
    "    r.base = d[2];\n"
    "    r.u = r.t = r.mode = r.e = 0;\n"
    "    r.k = k;\n"
    "    for (int64_t a = nd - 1; a >= 0; a--) {\n"
    "        int64_t q = lin % shape[a];\n"
    "        lin /= shape[a];\n"
    "        int64_t u = rm[3 * a] ? q - rm[3 * a + 1] : q;\n"
    "        if (a == ax) {\n"
    "            r.u = u;\n"
    "            r.t = strides[a];\n"
    "            r.mode = rm[3 * a];\n"
    "            r.e = rm[3 * a + 2];\n"
    "            continue;\n"
    "        }\n"
    "        r.base += lf_rmp(u, rm[3 * a], rm[3 * a + 2]) * strides[a];\n"
    "    }\n"
    "    r.inner = r.base + r.u * r.t;\n"
    "    if (r.mode == 0) { /* the row never leaves the input on ax */\n"
    "        r.lo = INT64_MIN;\n"
    "        r.hi = INT64_MAX;\n"
    "    } else if (k > 0) { /* 0 <= u + k*j < e */\n"
    "        r.lo = -lf_floordiv_pos(r.u, k);\n"
    "        r.hi = -lf_floordiv_pos(r.u - r.e, k);\n"
    "    } else { /* k < 0: with m = -k, 0 <= u - m*j < e */\n"
    "        r.lo = lf_floordiv_pos(r.u - r.e, -k) + 1;\n"
    "        r.hi = lf_floordiv_pos(r.u, -k) + 1;\n"
    "    }\n"
    "    return r;\n"
    "}\n"
    "/* its element index at row element j (any j: clamps or reflects) */\n"
    "LF_INLINE int64_t lf_remap_at(const lf_rrow *r, int64_t j) {\n"
    "    return r->base + r->t * lf_rmp(r->u + r->k * j, r->mode, r->e);\n"
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

/* libm functions glibc's libmvec implements for every x86-64 vector ISA
 * (name, arity); f32 versions add 'f'. This list is lazyfuse.h's list of
 * functions exempt from bit-identity on the CPU: a function added here must
 * be added there (and to test_eval's copy of it). cbrt is left out on
 * purpose: libmvec's cbrt is up to 2 ulp from libm's (cbrt(2.0)), so it
 * stays scalar libm, bit-identical to the reference. */
static const struct vm_fn {
    const char *name;
    int arity;
} vm_fns[] = {
    {"exp", 1},   {"exp2", 1},  {"expm1", 1}, {"log", 1},   {"log2", 1},  {"log10", 1}, {"log1p", 1},
    {"sin", 1},   {"cos", 1},   {"tan", 1},   {"asin", 1},  {"acos", 1},  {"atan", 1},  {"sinh", 1},
    {"cosh", 1},  {"tanh", 1},  {"asinh", 1}, {"acosh", 1}, {"atanh", 1}, {"erf", 1},   {"pow", 2},
    {"atan2", 2}, {"hypot", 2},
};
enum { VM_NFNS = (int)(sizeof vm_fns / sizeof vm_fns[0]) };

/* Position independence of vector math. GCC vectorizes a loop calling a
 * `simd` function with one vector variant in the main loop, another in the
 * vectorized epilogue and the scalar function in the remainder: glibc's
 * libmvec AVX-512, AVX2 and scalar libm give different bits for some inputs
 * (asinh of one value at positions 0..7, 8..11 and 12 of an array: three
 * results), so a result would depend on the element's position. So the
 * kernels call lf_<fn> instead (the names are #defined over the libm ones
 * after <math.h>): declared simd here, and defined per kernel for the
 * functions it uses (cg_c_vmath_defs), every variant GCC may call (SSE,
 * AVX, AVX2 and AVX-512 widths, and the scalar one) going through ONE
 * libmvec variant, the AVX2 one wherever AVX2 is there, narrower vectors
 * padded by repeating the last lane, an AVX-512 vector split in two halves.
 * Same input, same bits, at any position, thread count and chunking. Not
 * the AVX-512 variant on AVX-512 CPUs: GCC 12's -march=native tunes them
 * (skylake-avx512, cascadelake, icelake, sapphirerapids) to
 * prefer-vector-width=256, so a kernel's main loop calls the 8-lane (AVX2)
 * variant, which through a 16-lane canonical one computed every function
 * twice over (half the lanes padding): softmax_rows spent 2.2x the hand-
 * written loop's time in expf under perf (benches/measured/61-cpu-kernels.md).
 * (With every element on the vector path, glibc 2.36's vector pow showed
 * pow(-0, -1) = +inf; lf_pow_* sets +-0 ** negative y itself.) */
#define VMATH_HEAD                                                                              \
    "#define LF_SIMD __attribute__((simd(\"notinbranch\"), const, nothrow, leaf))\n"           \
    "#define LF_VWRAP __attribute__((visibility(\"hidden\"), const, nothrow))\n"               \
    "typedef double lf_d2 __attribute__((vector_size(16)));\n"                                 \
    "typedef double lf_d4 __attribute__((vector_size(32)));\n"                                 \
    "typedef double lf_d8 __attribute__((vector_size(64)));\n"                                 \
    "typedef float lf_f4 __attribute__((vector_size(16)));\n"                                  \
    "typedef float lf_f8 __attribute__((vector_size(32)));\n"                                  \
    "typedef float lf_f16 __attribute__((vector_size(64)));\n"

/* The common part of the vector prelude: VMATH_HEAD, then for every
 * function its simd declarations and the #defines that rename the libm
 * names (built once, cg_dialect_c). */
static char vmath_prelude[8192];

static void vmath_prelude_build(void) {
    size_t n = 0;
    n += (size_t)snprintf(vmath_prelude + n, sizeof vmath_prelude - n, "%s", PRELUDE_C VMATH_HEAD);
    for (int i = 0; i < VM_NFNS; i++)
        for (int f = 0; f < 2; f++) {
            const char *t = f ? "float" : "double", *sx = f ? "f" : "";
            n += (size_t)snprintf(vmath_prelude + n, sizeof vmath_prelude - n,
                                  "LF_SIMD %s lf_%s%s(%s%s%s);\n#define %s%s lf_%s%s\n", t, vm_fns[i].name, sx, t,
                                  vm_fns[i].arity == 2 ? ", " : "", vm_fns[i].arity == 2 ? t : "", vm_fns[i].name,
                                  sx, vm_fns[i].name, sx);
        }
}

/* Prints "(lf_<T><n>){v[i0], v[i1], ...}": lanes of vector v picked by
 * index (lane i of the new vector is v[min(i, last)]): a widening that
 * repeats v's last lane, or a narrowing. Plain vector subscripts and an
 * initializer, which every GCC with vector extensions compiles (no
 * __builtin_shufflevector: GCC 12 and later only). */
static void vm_lanes(cg_text *o, const char *T, int n, const char *v, int last) {
    cg_printf(o, "(lf_%s%d){", T, n);
    for (int i = 0; i < n; i++) cg_printf(o, "%s%s[%d]", i ? ", " : "", v, i < last ? i : last);
    cg_printf(o, "}");
}

/* The header "LF_VWRAP <ret> <fname>(<params>)" of a wrapper (ret and param
 * types are ty; one or two parameters x, y). */
static void vm_head(cg_text *o, const char *ty, const char *fname, int arity) {
    cg_printf(o, "LF_VWRAP %s %s(%s x", ty, fname, ty);
    if (arity == 2) cg_printf(o, ", %s y", ty);
    cg_printf(o, ")");
}

/* One variant of lf_<name> for vector type lf_<T><L> (isa letter, L lanes)
 * through the canonical libmvec variant (cisa, CL lanes): padded when L < CL,
 * two calls on the halves when L = 2 CL. */
static void vm_variant(cg_text *o, const char *name, bool f32, int arity, char isa, int L, char cisa, int CL) {
    const char *T = f32 ? "f" : "d", *vs = arity == 2 ? "vv" : "v";
    char ty[16], fname[64];
    snprintf(ty, sizeof ty, "lf_%s%d", T, L);
    snprintf(fname, sizeof fname, "lf_%c_%s", isa, name);
    vm_head(o, ty, fname, arity);
    cg_printf(o, " __asm__(\"_ZGV%cN%d%s_lf_%s\");\n", isa, L, vs, name);
    vm_head(o, ty, fname, arity);
    if (L == CL) {
        cg_printf(o, " { return _ZGV%cN%d%s_%s(x%s); }\n", cisa, CL, vs, name, arity == 2 ? ", y" : "");
        return;
    }
    if (L == 2 * CL) { /* two calls, on the low and the high half */
        cg_printf(o, " {\n");
        for (int h = 0; h < 2; h++) {
            cg_printf(o, "    lf_%s%d x%d = {", T, CL, h);
            for (int i = 0; i < CL; i++) cg_printf(o, "%sx[%d]", i ? ", " : "", h * CL + i);
            cg_printf(o, "};\n");
            if (arity == 2) {
                cg_printf(o, "    lf_%s%d y%d = {", T, CL, h);
                for (int i = 0; i < CL; i++) cg_printf(o, "%sy[%d]", i ? ", " : "", h * CL + i);
                cg_printf(o, "};\n");
            }
            cg_printf(o, "    lf_%s%d r%d = _ZGV%cN%d%s_%s(x%d%s);\n", T, CL, h, cisa, CL, vs, name, h,
                      arity == 2 ? (h ? ", y1" : ", y0") : "");
        }
        cg_printf(o, "    return (lf_%s%d){", T, L);
        for (int i = 0; i < L; i++) cg_printf(o, "%sr%d[%d]", i ? ", " : "", i / CL, i % CL);
        cg_printf(o, "};\n}\n");
        return;
    }
    cg_printf(o, " {\n    lf_%s%d r = _ZGV%cN%d%s_%s(", T, CL, cisa, CL, vs, name);
    vm_lanes(o, T, CL, "x", L - 1);
    if (arity == 2) {
        cg_printf(o, ", ");
        vm_lanes(o, T, CL, "y", L - 1);
    }
    cg_printf(o, ");\n    return ");
    vm_lanes(o, T, L, "r", L - 1);
    cg_printf(o, ";\n}\n");
}

/* The scalar lf_<name>: every lane of the canonical vector (cisa, CL lanes)
 * set to x (a true broadcast: x's sign of zero is kept), lane 0 returned. */
static void vm_scalar(cg_text *o, const char *name, bool f32, int arity, char cisa, int CL) {
    const char *t = f32 ? "float" : "double", *T = f32 ? "f" : "d", *vs = arity == 2 ? "vv" : "v";
    char fname[64];
    snprintf(fname, sizeof fname, "lf_s_%s", name);
    vm_head(o, t, fname, arity);
    cg_printf(o, " __asm__(\"lf_%s\");\n", name);
    vm_head(o, t, fname, arity);
    cg_printf(o, " { return _ZGV%cN%d%s_%s(", cisa, CL, vs, name);
    for (int a = 0; a < arity; a++) {
        cg_printf(o, "%s(lf_%s%d){", a ? ", " : "", T, CL);
        for (int i = 0; i < CL; i++) cg_printf(o, "%s%s", i ? ", " : "", a ? "y" : "x");
        cg_printf(o, "}");
    }
    cg_printf(o, ")[0]; }\n");
}

/* Every variant of lf_<name> (name with its f suffix) through the libmvec
 * variant of cisa with CL lanes; the AVX-512 (e) variant only under
 * __AVX512F__ (GCC calls it only there). */
static void vm_isa(cg_text *o, const char *name, bool f32, int arity, char cisa, int CL) {
    const char *T = f32 ? "f" : "d", *vs = arity == 2 ? "vv" : "v";
    int w = f32 ? 4 : 2; /* lanes of a 16-byte vector */
    cg_printf(o, "lf_%s%d _ZGV%cN%d%s_%s(lf_%s%d", T, CL, cisa, CL, vs, name, T, CL);
    if (arity == 2) cg_printf(o, ", lf_%s%d", T, CL);
    cg_printf(o, ");\n");
    vm_scalar(o, name, f32, arity, cisa, CL);
    vm_variant(o, name, f32, arity, 'b', w, cisa, CL);
    vm_variant(o, name, f32, arity, 'c', 2 * w, cisa, CL);
    vm_variant(o, name, f32, arity, 'd', 2 * w, cisa, CL);
    cg_printf(o, "#if defined(__AVX512F__)\n");
    vm_variant(o, name, f32, arity, 'e', 4 * w, cisa, CL);
    cg_printf(o, "#endif\n");
}

/* Without AVX2 (an x86-64 CPU before Haswell, or a virtual one that hides
 * it, with -march=native) libmvec's AVX2 entries would fault: every lane
 * and the scalar call go to scalar libm (__builtin_<fn>, since the libm
 * name is #defined to lf_<fn>), only the SSE variant GCC may call there. */
static void vm_scalar_only(cg_text *o, const char *name, bool f32, int arity) {
    const char *t = f32 ? "float" : "double", *T = f32 ? "f" : "d", *vs = arity == 2 ? "vv" : "v";
    int w = f32 ? 4 : 2;
    char fname[64], ty[16];
    snprintf(fname, sizeof fname, "lf_s_%s", name);
    vm_head(o, t, fname, arity);
    cg_printf(o, " __asm__(\"lf_%s\");\n", name);
    vm_head(o, t, fname, arity);
    cg_printf(o, " { return __builtin_%s(x%s); }\n", name, arity == 2 ? ", y" : "");
    snprintf(fname, sizeof fname, "lf_b_%s", name);
    snprintf(ty, sizeof ty, "lf_%s%d", T, w);
    vm_head(o, ty, fname, arity);
    cg_printf(o, " __asm__(\"_ZGVbN%d%s_lf_%s\");\n", w, vs, name);
    vm_head(o, ty, fname, arity);
    cg_printf(o, " { return (%s){", ty);
    for (int i = 0; i < w; i++) {
        cg_printf(o, "%s__builtin_%s(x[%d]", i ? ", " : "", name, i);
        if (arity == 2) cg_printf(o, ", y[%d]", i);
        cg_printf(o, ")");
    }
    cg_printf(o, "}; }\n");
}

/* The definitions of lf_<fn> for one function and dtype, once per unit. */
static void vm_defs(cg_text *o, int i, bool f32) {
    char name[32];
    snprintf(name, sizeof name, "%s%s", vm_fns[i].name, f32 ? "f" : "");
    cg_printf(o, "#ifndef LF_VM_%s\n#define LF_VM_%s\n#if defined(__AVX2__)\n", name, name);
    vm_isa(o, name, f32, vm_fns[i].arity, 'd', f32 ? 8 : 4);
    cg_printf(o, "#else\n");
    vm_scalar_only(o, name, f32, vm_fns[i].arity);
    cg_printf(o, "#endif\n#endif\n");
}

/* Marks in used[i][f32] the vector math function i that fn f computes in
 * dtype f32 or f64 (ctype: f's compute dtypes). */
static void vm_scan_fn(const lf_fn *f, const lf_dtype *ctype, bool used[][2]) {
    if (!f) return;
    for (int e = 0; e < f->nexprs; e++) {
        if (f->exprs[e].kind != EXPR_OP || !graph_dtype_is_float(ctype[e])) continue;
        lf_op op = f->exprs[e].op;
        const char *cn = op == LF_OP_SIGMOID ? "exp" : graph_ops[op].cname; /* sigmoid: 1/(1+exp(-x)) */
        for (int i = 0; i < VM_NFNS; i++)
            if (!strcmp(cn, vm_fns[i].name)) used[i][ctype[e] != LF_F64] = true; /* f16, bf16 call the float variant */
    }
}

void cg_c_vmath_defs(cg_text *out, const fuse_kernel *kn) {
    bool used[VM_NFNS][2];
    memset(used, 0, sizeof used);
    for (int f = 0; f < kn->npasses + 2; f++) {
        const lf_fn *fn = f < kn->npasses ? kn->passes[f].fn : f == kn->npasses ? kn->epi : kn->row;
        const lf_dtype *ct = f < kn->npasses ? kn->passes[f].ctype : f == kn->npasses ? kn->epi_ctype : kn->row_ctype;
        vm_scan_fn(fn, ct, used);
    }
    for (int i = 0; i < VM_NFNS; i++)
        for (int t = 0; t < 2; t++)
            if (used[i][t]) vm_defs(out, i, t);
}

static const cg_dialect c_scalar = {
    .name = "c",
    .prelude = PRELUDE_C,
    .restrict_kw = "restrict",
    .value_attr = "",
    .type = {
#define LF_DTYPE(ID, name, size, kind, rank, digits, maxexp, c_type, ...) [LF_##ID] = c_type,
#include "graph/dtypes.def"
    },
    .value_type = {
#define LF_DTYPE(ID, name, size, kind, rank, digits, maxexp, c_type, c_value, ...) [LF_##ID] = c_value,
#include "graph/dtypes.def"
    },
    .entry = "LF_ENTRY",
    .vector_math = false,
    .host_code = true,
    .shift_loads = true,
    .skeleton = cg_c_skeletons,
    .sort_store = cg_c_sort_store,
};

static const cg_dialect c_vector = {
    .name = "c",
    .prelude = vmath_prelude, /* PRELUDE_C, VMATH_HEAD, the simd declarations */
    .restrict_kw = "restrict",
    .value_attr = "",
    .type = {
#define LF_DTYPE(ID, name, size, kind, rank, digits, maxexp, c_type, ...) [LF_##ID] = c_type,
#include "graph/dtypes.def"
    },
    .value_type = {
#define LF_DTYPE(ID, name, size, kind, rank, digits, maxexp, c_type, c_value, ...) [LF_##ID] = c_value,
#include "graph/dtypes.def"
    },
    .entry = "LF_ENTRY",
    .vector_math = true,
    .host_code = true,
    .shift_loads = true,
    .kernel_defs = cg_c_vmath_defs,
    .skeleton = cg_c_skeletons,
    .sort_store = cg_c_sort_store,
};

const cg_dialect *cg_dialect_c(bool vector_math) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    if (vector_math) pthread_once(&once, vmath_prelude_build);
    return vector_math ? &c_vector : &c_scalar;
}
