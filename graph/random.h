/* graph/random.h: the random node's element function, one text for every
 * evaluator.
 *
 * GRAPH_RANDOM_CODE is the C source (also valid CUDA C++) of three helpers
 * that compute element i of a random node as lazyfuse.h states it:
 *
 *   int64_t lf_random_bits(int64_t i, uint64_t seed, int wide)
 *       x0 zero-extended (wide 0: i32, the caller wraps), x1:x0 (wide 1: i64)
 *   double lf_random_uniform(int64_t i, uint64_t seed, int wide)
 *       24 bits (wide 0: f32, exact in float) or 53 bits (wide 1: f64)
 *   double lf_random_normal(int64_t i, uint64_t seed)
 *       the f64 normal; f32 rounds it (lf_random_normal_of(x): the same
 *       of a given block x[0..3], for tests of chosen blocks)
 *
 * graph/scalar.c compiles the macro (graph_random_value, used by the reference
 * evaluator and the schedule interpreter) and codegen/dialect_c.c prints it,
 * stringized, in cg_prelude_helpers for both dialects, so the reference and
 * the kernels run literally the same code. What must stay true: the code
 * uses only integer arithmetic, + - * / on doubles and sqrt (correctly
 * rounded on every target; the kernels compile without contraction:
 * -ffp-contract=off, NVRTC -fmad=false), reads a double's bits through a
 * union (binary64 on every target), no libm function, no # and no
 * macro of the prelude other than LF_INLINE (which the stringizing must not
 * expand: nothing that includes this header before stringizing defines it).
 * Constants like 1.0 / 120 are folded or divided, both correctly rounded.
 *
 * The code comes in three parts, GRAPH_RANDOM_CODE being all three in order:
 * GRAPH_RANDOM_BITS_CODE (Philox, bits, uniform), GRAPH_RANDOM_NORMAL_OF_CODE
 * and GRAPH_RANDOM_NORMAL_CODE (lf_random_normal alone). The C dialect's
 * kernels only declare lf_random_normal (as a `simd` function) and the CPU
 * backend links them with one object compiled once per disk cache from the
 * three parts (cg_c_random_object, codegen/dialect_c.c), where LF_INLINE is
 * redefined before the last part so that it defines the exported vector
 * variants: the normal's straight-line body, inlined, made each kernel that
 * draws normal numbers cost about three times a plain kernel to compile.
 */
#ifndef LF_GRAPH_RANDOM_H
#define LF_GRAPH_RANDOM_H

/* Philox4x32-10: counter (c0..c3), key (k0, k1) -> x[0..3]. Round: hi/lo of
 * M0 * c0 and M1 * c2; then (hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0); the
 * key is bumped by the Weyl constants before rounds 2..10.
 *
 * The code is straight-line so that a kernel's element loop vectorizes:
 * GCC 12 vectorizes no loop that holds an inner loop or control flow it
 * cannot if-convert, and it turns selects between values computed on either
 * side (x < c ? y * k : y) back into branches that skip work, which it then
 * cannot if-convert (a skipped double operation may trap). So the ten rounds
 * are written out, the 32-bit words are held in 64-bit variables (the
 * vectorizer then keeps one element per 64-bit lane instead of packing and
 * unpacking 32-bit lanes around each multiply: uniform f32 about 2.2x
 * faster), the normal's exponent is read off the bits of a double, and its
 * data-dependent choices are integer arithmetic or products with a 0.0/1.0
 * flag. Every value is the same, bit for bit, as that of the loop-and-branch
 * text this replaced (tests/test_eval.c keeps that text as its reference). */
#define GRAPH_RANDOM_CODE GRAPH_RANDOM_BITS_CODE GRAPH_RANDOM_NORMAL_OF_CODE GRAPH_RANDOM_NORMAL_CODE

#define GRAPH_RANDOM_BITS_CODE                                                                      \
    LF_INLINE void lf_philox_round(uint64_t *c, uint64_t k0, uint64_t k1) {                         \
        uint64_t p0 = (uint64_t)0xD2511F53u * c[0], p1 = (uint64_t)0xCD9E8D57u * c[2];              \
        uint64_t n0 = (p1 >> 32) ^ c[1] ^ k0, n2 = (p0 >> 32) ^ c[3] ^ k1;                          \
        c[1] = p1 & 0xFFFFFFFFu;                                                                    \
        c[3] = p0 & 0xFFFFFFFFu;                                                                    \
        c[0] = n0;                                                                                  \
        c[2] = n2;                                                                                  \
    }                                                                                               \
    LF_INLINE void lf_philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0, \
                                    uint32_t k1, uint32_t *x) {                                     \
        const uint32_t w0 = 0x9E3779B9u, w1 = 0xBB67AE85u; /* wrap mod 2^32 */                      \
        uint64_t y[4] = {c0, c1, c2, c3};                                                           \
        lf_philox_round(y, k0, k1);                                                                 \
        lf_philox_round(y, (uint32_t)(k0 + w0), (uint32_t)(k1 + w1));                               \
        lf_philox_round(y, (uint32_t)(k0 + 2u * w0), (uint32_t)(k1 + 2u * w1));                     \
        lf_philox_round(y, (uint32_t)(k0 + 3u * w0), (uint32_t)(k1 + 3u * w1));                     \
        lf_philox_round(y, (uint32_t)(k0 + 4u * w0), (uint32_t)(k1 + 4u * w1));                     \
        lf_philox_round(y, (uint32_t)(k0 + 5u * w0), (uint32_t)(k1 + 5u * w1));                     \
        lf_philox_round(y, (uint32_t)(k0 + 6u * w0), (uint32_t)(k1 + 6u * w1));                     \
        lf_philox_round(y, (uint32_t)(k0 + 7u * w0), (uint32_t)(k1 + 7u * w1));                     \
        lf_philox_round(y, (uint32_t)(k0 + 8u * w0), (uint32_t)(k1 + 8u * w1));                     \
        lf_philox_round(y, (uint32_t)(k0 + 9u * w0), (uint32_t)(k1 + 9u * w1));                     \
        x[0] = (uint32_t)y[0];                                                                      \
        x[1] = (uint32_t)y[1];                                                                      \
        x[2] = (uint32_t)y[2];                                                                      \
        x[3] = (uint32_t)y[3];                                                                      \
    }                                                                                               \
    LF_INLINE void lf_random_block(int64_t i, uint64_t seed, uint32_t *x) {                         \
        uint64_t c = (uint64_t)i;                                                                   \
        lf_philox4x32_10((uint32_t)c, (uint32_t)(c >> 32), 0u, 0u, (uint32_t)seed,                  \
                         (uint32_t)(seed >> 32), x);                                                \
    }                                                                                               \
    LF_INLINE int64_t lf_random_bits(int64_t i, uint64_t seed, int wide) {                          \
        uint32_t x[4];                                                                              \
        lf_random_block(i, seed, x);                                                                \
        uint64_t v = wide ? ((uint64_t)x[1] << 32 | x[0]) : (uint64_t)x[0];                         \
        return v >> 63 ? -(int64_t)~v - 1 : (int64_t)v; /* two's complement, no UB */               \
    }                                                                                               \
    LF_INLINE double lf_random_uniform(int64_t i, uint64_t seed, int wide) {                        \
        uint32_t x[4];                                                                              \
        lf_random_block(i, seed, x);                                                                \
        if (!wide) return (double)(x[0] >> 8) * (1.0 / 16777216.0);                                 \
        return (double)(((uint64_t)x[1] << 32 | x[0]) >> 11) * (1.0 / 9007199254740992.0);          \
    }

#define GRAPH_RANDOM_NORMAL_OF_CODE                                                                 \
    LF_INLINE double lf_random_normal_of(const uint32_t *x) {                                       \
        /* u1 = j * 2^-53, j odd in [1, 2^53), exact in double: u1 = m 2^e,  */                     \
        /* m in [sqrt(2)/2, sqrt(2)], read off the bits (binary64: 52 bits of */                    \
        /* mantissa, exponent biased by 1023): the mantissa with exponent 0  */                     \
        /* (m in [1, 2)), halved (exponent -1) above sqrt(2); no branch      */                     \
        union { double f; uint64_t u; } v;                                                          \
        v.f = (double)(int64_t)((((uint64_t)x[1] << 32 | x[0]) >> 12) * 2 + 1);                     \
        uint64_t mb = (v.u & (((uint64_t)1 << 52) - 1)) | (uint64_t)1023 << 52;                     \
        uint64_t h = (uint64_t)(mb > (uint64_t)0x3FF6A09E667F3BCDu); /* sqrt(2) */                  \
        double e = (double)((int64_t)(v.u >> 52) - 1076 + (int64_t)h); /* 1076 = 1023 + 53 */       \
        v.u = mb - (h << 52);                                                                       \
        double m = v.f;                                                                             \
        double f = (m - 1.0) / (m + 1.0), z = f * f;                                                \
        double p = 1.0 / 23;                                                                        \
        p = p * z + 1.0 / 21;                                                                       \
        p = p * z + 1.0 / 19;                                                                       \
        p = p * z + 1.0 / 17;                                                                       \
        p = p * z + 1.0 / 15;                                                                       \
        p = p * z + 1.0 / 13;                                                                       \
        p = p * z + 1.0 / 11;                                                                       \
        p = p * z + 1.0 / 9;                                                                        \
        p = p * z + 1.0 / 7;                                                                        \
        p = p * z + 1.0 / 5;                                                                        \
        p = p * z + 1.0 / 3;                                                                        \
        double lg = e * 6.93147180369123816490e-01 +                                                \
                    (e * 1.90821492927058770002e-10 + 2.0 * f * (p * z) + 2.0 * f);                 \
        double rad = sqrt(-2.0 * lg);                                                               \
        /* 2 pi u2: octant o of b, a in [0, pi/4] (reflected in odd octants: */                     \
        /* 2^50 - r); the selects here and below are products with 0 or 1   */                      \
        /* (exact: every term is finite and >= 0), which GCC cannot turn     */                     \
        /* into branches that skip work                                     */                      \
        uint64_t b = ((uint64_t)x[3] << 32 | x[2]) >> 11, o = b >> 50, q = o >> 1;                  \
        double odd = (double)(int64_t)(o & 1);                                                      \
        double ar = (double)(int64_t)(b & (((uint64_t)1 << 50) - 1));                               \
        ar = ar + odd * (1125899906842624.0 - 2.0 * ar);                                            \
        double a = ar * (1.0 / 1125899906842624.0) * 0.78539816339744830962;                        \
        double a2 = a * a;                                                                          \
        double sn = 1.0 / 121645100408832000.0;                                                     \
        sn = sn * a2 - 1.0 / 355687428096000.0;                                                     \
        sn = sn * a2 + 1.0 / 1307674368000.0;                                                       \
        sn = sn * a2 - 1.0 / 6227020800.0;                                                          \
        sn = sn * a2 + 1.0 / 39916800.0;                                                            \
        sn = sn * a2 - 1.0 / 362880.0;                                                              \
        sn = sn * a2 + 1.0 / 5040.0;                                                                \
        sn = sn * a2 - 1.0 / 120.0;                                                                 \
        sn = sn * a2 + 1.0 / 6.0;                                                                   \
        sn = a - a * (a2 * sn);                                                                     \
        double cs = 1.0 / 2432902008176640000.0;                                                    \
        cs = cs * a2 - 1.0 / 6402373705728000.0;                                                    \
        cs = cs * a2 + 1.0 / 20922789888000.0;                                                      \
        cs = cs * a2 - 1.0 / 87178291200.0;                                                         \
        cs = cs * a2 + 1.0 / 479001600.0;                                                           \
        cs = cs * a2 - 1.0 / 3628800.0;                                                             \
        cs = cs * a2 + 1.0 / 40320.0;                                                               \
        cs = cs * a2 - 1.0 / 720.0;                                                                 \
        cs = cs * a2 + 1.0 / 24.0;                                                                  \
        cs = cs * a2 - 0.5;                                                                         \
        cs = 1.0 + a2 * cs;                                                                         \
        /* quadrant q: cos of the angle is cw, -sw, -cw, sw, where cw is the  */                    \
        /* cosine within the quadrant: cs (even octant) or sn (odd: pi/2 - a) */                    \
        double w = (double)(int64_t)((o ^ q) & 1); /* 1: sn */                                      \
        double c = sn * w + cs * (1.0 - w);                                                         \
        double sg = 1.0 - 2.0 * (double)(int64_t)((q ^ (q >> 1)) & 1);                              \
        return rad * (sg * c);                                                                      \
    }

#define GRAPH_RANDOM_NORMAL_CODE                                                                    \
    LF_INLINE double lf_random_normal(int64_t i, uint64_t seed) {                                   \
        uint32_t x[4];                                                                              \
        lf_random_block(i, seed, x);                                                                \
        return lf_random_normal_of(x);                                                              \
    }

#endif /* LF_GRAPH_RANDOM_H */
