/* graph/complex.h: complex arithmetic (c64, c128), one text for every
 * evaluator.
 *
 * GRAPH_COMPLEX_CODE is the C source (also valid CUDA C++) of the two
 * complex value types and their operators, with the formulas lazyfuse.h
 * states under "Complex":
 *
 *   typedef struct { float re, im; } lf_c64;   (and lf_c128 of doubles)
 *   lf_mk_c64(re, im)  lf_add_c64  lf_sub_c64  lf_mul_c64  lf_div_c64
 *   lf_neg_c64  lf_conj_c64  lf_eq_c64  lf_ne_c64 (int)
 *   lf_abs_c64  lf_arg_c64 (the component float)
 *   lf_exp_c64  lf_log_c64  lf_sqrt_c64  lf_pow_c64
 *
 * graph/scalar.c compiles the macro (graph_scalar_apply's complex
 * operators, used by the reference evaluator and the schedule interpreter)
 * and codegen/dialect_c.c prints it, stringized, in the prelude of both
 * dialects, so every evaluator runs literally the same formulas: products
 * and quotients are written out (never C's _Complex operators, whose
 * __mulsc3 / __divsc3 rescale and recover infinities differently, nor
 * CUDA's cuComplex, which differs again). Each step rounds in the component
 * float: the kernels compile without contraction (-ffp-contract=off, NVRTC
 * -fmad=false). The product's real part is written rr + a.im * -b.im,
 * which is rr - a.im * b.im bit for bit (negation is exact, and x - y is
 * x + (-y) in IEEE 754), because GCC 12's vectorizer recognizes the
 * rr - ii form as a complex multiply and emits vfmaddsub even under
 * -ffp-contract=off (one rounding fewer: (1e20f + 1e-20f i)(1e-20f + 1e20f i)
 * gave -0x1.91cap-27 instead of 0 at -O3 -march=native). Functions call libm's (or CUDA's) hypot, atan2, exp, log,
 * cos, sin, sqrt, in the float versions for c64: on the CPU the same libm
 * as the reference; CUDA's versions differ in their last bits.
 *
 * Must stay true: no # and no macro of the prelude other than LF_INLINE
 * inside the code (it is stringized); nothing that includes this header
 * before stringizing defines LF_INLINE.
 */
#ifndef LF_GRAPH_COMPLEX_H
#define LF_GRAPH_COMPLEX_H

/* The functions of one complex type: S its suffix (c64), R its component
 * type (float), F libm's suffix for R ("f" or nothing). */
#define GRAPH_COMPLEX_FNS(S, R, F)                                                                   \
    typedef struct lf_##S {                                                                          \
        R re, im;                                                                                    \
    } lf_##S;                                                                                        \
    LF_INLINE lf_##S lf_mk_##S(R re, R im) {                                                         \
        lf_##S z;                                                                                    \
        z.re = re;                                                                                   \
        z.im = im;                                                                                   \
        return z;                                                                                    \
    }                                                                                                \
    LF_INLINE lf_##S lf_add_##S(lf_##S a, lf_##S b) { return lf_mk_##S(a.re + b.re, a.im + b.im); } \
    LF_INLINE lf_##S lf_sub_##S(lf_##S a, lf_##S b) { return lf_mk_##S(a.re - b.re, a.im - b.im); } \
    LF_INLINE lf_##S lf_neg_##S(lf_##S a) { return lf_mk_##S(-a.re, -a.im); }                        \
    LF_INLINE lf_##S lf_conj_##S(lf_##S a) { return lf_mk_##S(a.re, -a.im); }                        \
    LF_INLINE int lf_eq_##S(lf_##S a, lf_##S b) { return a.re == b.re && a.im == b.im; }             \
    LF_INLINE int lf_ne_##S(lf_##S a, lf_##S b) { return !(a.re == b.re && a.im == b.im); }          \
    LF_INLINE lf_##S lf_mul_##S(lf_##S a, lf_##S b) {                                                \
        R rr = a.re * b.re, nii = a.im * -b.im, ri = a.re * b.im, ir = a.im * b.re;                   \
        return lf_mk_##S(rr + nii, ri + ir);                                                         \
    }                                                                                                \
    LF_INLINE lf_##S lf_div_##S(lf_##S a, lf_##S b) {                                                \
        R ac = b.re < 0 ? -b.re : b.re, ad = b.im < 0 ? -b.im : b.im;                                \
        if (ac >= ad) {                                                                              \
            R r = b.im / b.re, t = b.re + b.im * r;                                                  \
            return lf_mk_##S((a.re + a.im * r) / t, (a.im - a.re * r) / t);                          \
        }                                                                                            \
        R r = b.re / b.im, t = b.re * r + b.im;                                                      \
        return lf_mk_##S((a.re * r + a.im) / t, (a.im * r - a.re) / t);                              \
    }                                                                                                \
    LF_INLINE R lf_abs_##S(lf_##S a) { return lf_m_hypot##F(a.re, a.im); }                                \
    LF_INLINE R lf_arg_##S(lf_##S a) { return lf_m_atan2##F(a.im, a.re); }                                \
    LF_INLINE lf_##S lf_exp_##S(lf_##S a) {                                                          \
        R e = lf_m_exp##F(a.re);                                                                          \
        return lf_mk_##S(e * lf_m_cos##F(a.im), e * lf_m_sin##F(a.im));                                        \
    }                                                                                                \
    LF_INLINE lf_##S lf_log_##S(lf_##S a) { return lf_mk_##S(lf_m_log##F(lf_abs_##S(a)), lf_arg_##S(a)); } \
    LF_INLINE lf_##S lf_sqrt_##S(lf_##S a) {                                                         \
        if (a.re == 0 && a.im == 0) return lf_mk_##S(0, a.im);                                       \
        R ar = a.re < 0 ? -a.re : a.re;                                                              \
        R t = lf_m_sqrt##F((ar + lf_abs_##S(a)) / 2);                                                     \
        if (a.re >= 0) return lf_mk_##S(t, a.im / (2 * t));                                          \
        return lf_mk_##S((a.im < 0 ? -a.im : a.im) / (2 * t), lf_m_copysign##F(t, a.im));                 \
    }                                                                                                \
    LF_INLINE lf_##S lf_pow_##S(lf_##S a, lf_##S b) {                                                \
        if (a.re == 0 && a.im == 0) return lf_mk_##S(b.re == 0 && b.im == 0 ? 1 : 0, 0);             \
        return lf_exp_##S(lf_mul_##S(b, lf_log_##S(a)));                                             \
    }

#define GRAPH_COMPLEX_CODE GRAPH_COMPLEX_FNS(c64, float, f) GRAPH_COMPLEX_FNS(c128, double, )

/* The libm functions the formulas call, as lf_m_<name>: every evaluator
 * defines them before GRAPH_COMPLEX_CODE, where the names are still libm's
 * (the C dialect's vector-math prelude renames hypot, exp, ... to its
 * libmvec wrappers afterwards; complex stays with scalar libm, so that the
 * compiled kernels and the reference give the same bits). */
#define GRAPH_COMPLEX_LIBM_FNS(R, F)                                                                 \
    LF_INLINE R lf_m_hypot##F(R a, R b) { return hypot##F(a, b); }                                   \
    LF_INLINE R lf_m_atan2##F(R a, R b) { return atan2##F(a, b); }                                   \
    LF_INLINE R lf_m_exp##F(R a) { return exp##F(a); }                                               \
    LF_INLINE R lf_m_log##F(R a) { return log##F(a); }                                               \
    LF_INLINE R lf_m_cos##F(R a) { return cos##F(a); }                                               \
    LF_INLINE R lf_m_sin##F(R a) { return sin##F(a); }                                               \
    LF_INLINE R lf_m_sqrt##F(R a) { return sqrt##F(a); }                                             \
    LF_INLINE R lf_m_copysign##F(R a, R b) { return copysign##F(a, b); }

#define GRAPH_COMPLEX_LIBM GRAPH_COMPLEX_LIBM_FNS(float, f) GRAPH_COMPLEX_LIBM_FNS(double, )

#endif
