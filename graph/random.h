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
 *       the f64 normal; f32 rounds it
 *
 * graph/scalar.c compiles the macro (graph_random_value, used by the reference
 * evaluator and the schedule interpreter) and codegen/dialect_c.c prints it,
 * stringized, in cg_prelude_helpers for both dialects, so the reference and
 * the kernels run literally the same code. What must stay true: the code
 * uses only integer arithmetic, + - * / on doubles and sqrt (correctly
 * rounded on every target; the kernels compile without contraction:
 * -ffp-contract=off, NVRTC -fmad=false), no libm function, no # and no
 * macro of the prelude other than LF_INLINE (which the stringizing must not
 * expand: nothing that includes this header before stringizing defines it).
 * Constants like 1.0 / 120 are folded or divided, both correctly rounded.
 */
#ifndef LF_GRAPH_RANDOM_H
#define LF_GRAPH_RANDOM_H

/* Philox4x32-10: counter (c0..c3), key (k0, k1) -> x[0..3]. Round: hi/lo of
 * M0 * c0 and M1 * c2; then (hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0); the
 * key is bumped by the Weyl constants before rounds 2..10. */
#define GRAPH_RANDOM_CODE                                                                           \
    LF_INLINE void lf_philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0, \
                                    uint32_t k1, uint32_t *x) {                                     \
        for (int r = 0; r < 10; r++) {                                                              \
            if (r) {                                                                                \
                k0 += (uint32_t)0x9E3779B9u;                                                        \
                k1 += (uint32_t)0xBB67AE85u;                                                        \
            }                                                                                       \
            uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;              \
            uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;      \
            c1 = (uint32_t)p1;                                                                      \
            c3 = (uint32_t)p0;                                                                      \
            c0 = n0;                                                                                \
            c2 = n2;                                                                                \
        }                                                                                           \
        x[0] = c0;                                                                                  \
        x[1] = c1;                                                                                  \
        x[2] = c2;                                                                                  \
        x[3] = c3;                                                                                  \
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
        return v >> 63 ? -(int64_t)~v - 1 : (int64_t)v; /* two's complement, no UB */              \
    }                                                                                               \
    LF_INLINE double lf_random_uniform(int64_t i, uint64_t seed, int wide) {                        \
        uint32_t x[4];                                                                              \
        lf_random_block(i, seed, x);                                                                \
        if (!wide) return (double)(x[0] >> 8) * (1.0 / 16777216.0);                                 \
        return (double)(((uint64_t)x[1] << 32 | x[0]) >> 11) * (1.0 / 9007199254740992.0);         \
    }                                                                                               \
    LF_INLINE double lf_random_normal(int64_t i, uint64_t seed) {                                   \
        uint32_t x[4];                                                                              \
        lf_random_block(i, seed, x);                                                                \
        /* u1 = j * 2^-53, j odd in [1, 2^53); normalize j to [2^52, 2^53) */                      \
        uint64_t j = (((uint64_t)x[1] << 32 | x[0]) >> 12) * 2 + 1;                                 \
        int s = 0;                                                                                  \
        for (int b = 32; b; b >>= 1)                                                                \
            if (j < (uint64_t)1 << (53 - b)) {                                                      \
                j <<= b;                                                                            \
                s += b;                                                                             \
            }                                                                                       \
        double m = (double)j * (1.0 / 4503599627370496.0), e = -(double)(s + 1);                    \
        if (m > 1.4142135623730951) {                                                               \
            m = m * 0.5;                                                                            \
            e = e + 1.0;                                                                            \
        }                                                                                           \
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
        /* 2 pi u2: octant o of b, a in [0, pi/4] */                                                \
        uint64_t b = ((uint64_t)x[3] << 32 | x[2]) >> 11, r = b & (((uint64_t)1 << 50) - 1);        \
        int o = (int)(b >> 50);                                                                     \
        double a = (double)((o & 1) ? ((uint64_t)1 << 50) - r : r) * (1.0 / 1125899906842624.0) *   \
                   0.78539816339744830962;                                                          \
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
        /* the angle within the quadrant: a (even octant) or pi/2 - a (odd) */                     \
        double cw = (o & 1) ? sn : cs, sw = (o & 1) ? cs : sn;                                      \
        int q = o >> 1;                                                                             \
        double c = q == 0 ? cw : q == 1 ? -sw : q == 2 ? -cw : sw;                                  \
        return rad * c;                                                                             \
    }

#endif /* LF_GRAPH_RANDOM_H */
