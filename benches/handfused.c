/* benches/handfused.c: the c_handfused references (see handfused.h).
 *
 * How it is compiled (benches/meson.build, static library handfused, kept
 * out of the library): the project's -std=c11 (ISO C, so GCC contracts no
 * a*b+c into an FMA: -ffp-contract=off, as lazyfuse's kernels) plus
 *   -O3 -march=native -fno-builtin-sinf -fno-builtin-cosf -fno-math-errno
 *   -fopenmp-simd
 * and linked with -lmvec. No -ffast-math: f32 arithmetic rounded after
 * every operation, as lazyfuse's. glibc's <math.h> declares the vector
 * variants of expf, sinf and cosf only under __FAST_MATH__, so they are
 * declared here with `#pragma omp declare simd notinbranch` and
 * __attribute__((const)) (-fopenmp-simd
 * makes GCC read that pragma and nothing else of OpenMP): GCC then calls
 * libmvec's _ZGVeN16v_expf (AVX-512) or _ZGVdN8v_expf (AVX2) in the
 * vectorized loops, as lazyfuse's generated kernels do through their lf_
 * wrappers (codegen/dialect_c.c). -fno-builtin-sinf/-cosf keep GCC from
 * merging sinf and cosf of one angle into sincosf, which has no vector
 * variant (backends/cpu/cpu.c passes the same flags); -fno-math-errno lets
 * sqrtf vectorize to one instruction (lazyfuse's kernels have it too).
 * Row reductions are vectorized with `#pragma omp simd reduction`, which
 * allows reassociating that loop's sum or max: a hand-written loop sums
 * a row in 16 float lanes (lazyfuse sums in double), so results differ from
 * lazyfuse's by rounding only; lazyfuse-bench checks them against lazyfuse's
 * fused output at the peers' tolerance, 1e-3.
 *
 * The stencils sum their taps in the graph's order (acc + x * w, tap after
 * tap), so their results are lazyfuse's bit for bit; their tap loops are
 * unrolled so that each output's sum stays in a register.
 *
 * Every case does its whole work in one pass over memory: elementwise cases
 * read each input once and write the output once; the row cases read a row
 * from memory once and make their further passes over it (max / mean,
 * exp and sum / variance, the writing pass) while it is in L1 or L2.
 * The arithmetic is the graph's (tools/seed_examples.c), operation for
 * operation: divisions stay divisions (no reciprocal), so the references
 * compute the function lazyfuse computes, not a cheaper approximation.
 */
#include "handfused.h"
#include "seed_examples.h" /* the stencils' weights: seed_stencil_weight, the builders' own */

#include <math.h>
#include <string.h>

/* const: no side effect a vectorized loop must keep (with -fno-builtin-sinf
 * GCC no longer knows it of sinf and cosf, and would not vectorize them) */
#pragma omp declare simd notinbranch
float expf(float) __attribute__((const, nothrow));
#pragma omp declare simd notinbranch
float sinf(float) __attribute__((const, nothrow));
#pragma omp declare simd notinbranch
float cosf(float) __attribute__((const, nothrow));

const char hf_compiled_with[] =
    "-std=c11 -O3 -march=native -fno-builtin-sinf -fno-builtin-cosf -fno-math-errno -fopenmp-simd, -lmvec";

/* exp(-0.5*((x-m)/s)**2) / (s*2.5066282746) with m = 0, s = 1 (lf_consts
 * in the graph, so the kernel reads them as parameters; here they are
 * variables the compiler sees, as in a hand-written loop). */
static void gaussian_pdf(const hf_args *a, int64_t lo, int64_t hi) {
    const float *restrict x = a->in[0];
    float *restrict out = a->out;
    const float m = 0.0f, s = 1.0f;
    for (int64_t i = lo; i < hi; i++) {
        float t = (x[i] - m) / s;
        out[i] = expf(-0.5f * (t * t)) / (s * 2.5066282746f);
    }
}

/* Two polar points to Cartesian, their distance. */
static void polar_distance(const hf_args *a, int64_t lo, int64_t hi) {
    const float *restrict r1 = a->in[0], *restrict t1 = a->in[1];
    const float *restrict r2 = a->in[2], *restrict t2 = a->in[3];
    float *restrict out = a->out;
    for (int64_t i = lo; i < hi; i++) {
        float dx = r1[i] * cosf(t1[i]) - r2[i] * cosf(t2[i]);
        float dy = r1[i] * sinf(t1[i]) - r2[i] * sinf(t2[i]);
        out[i] = sqrtf(dx * dx + dy * dy);
    }
}

/* The seeds' step-by-step hypot: abs, min, max, div, sqrt. */
static void hypot_steps(const hf_args *a, int64_t lo, int64_t hi) {
    const float *restrict xs = a->in[0], *restrict ys = a->in[1];
    float *restrict out = a->out;
    for (int64_t i = lo; i < hi; i++) {
        float x = fabsf(xs[i]), y = fabsf(ys[i]);
        float t = x < y ? x : y, m = x < y ? y : x;
        t = t / m;
        out[i] = m * sqrtf(1.0f + t * t);
    }
}

/* Row softmax: the row's max, exp(x - max) written and summed, then each
 * divided by the sum (the row is in cache for the second and third pass). */
static void softmax_rows(const hf_args *a, int64_t lo, int64_t hi) {
    int64_t n = a->cols;
    for (int64_t r = lo; r < hi; r++) {
        const float *restrict x = a->in[0] + r * n;
        float *restrict y = a->out + r * n;
        float m = -INFINITY, s = 0.0f;
#pragma omp simd reduction(max : m)
        for (int64_t j = 0; j < n; j++) m = x[j] > m ? x[j] : m;
#pragma omp simd reduction(+ : s)
        for (int64_t j = 0; j < n; j++) {
            float e = expf(x[j] - m);
            y[j] = e;
            s += e;
        }
        for (int64_t j = 0; j < n; j++) y[j] = y[j] / s;
    }
}

/* Layer norm of a row: mean, variance of the centred row, then
 * (x - mean) / sqrt(var + 1e-5) * gamma + beta. */
static void layer_norm(const hf_args *a, int64_t lo, int64_t hi) {
    int64_t n = a->cols;
    const float *restrict gamma = a->in[1], *restrict beta = a->in[2];
    for (int64_t r = lo; r < hi; r++) {
        const float *restrict x = a->in[0] + r * n;
        float *restrict y = a->out + r * n;
        float s = 0.0f, q = 0.0f;
#pragma omp simd reduction(+ : s)
        for (int64_t j = 0; j < n; j++) s += x[j];
        float mean = s / (float)n;
#pragma omp simd reduction(+ : q)
        for (int64_t j = 0; j < n; j++) {
            float c = x[j] - mean;
            q += c * c;
        }
        float d = sqrtf(q / (float)n + 1e-5f);
        for (int64_t j = 0; j < n; j++) y[j] = (x[j] - mean) / d * gamma[j] + beta[j];
    }
}

enum { CONV_TAPS = 31 };

/* 31-tap convolution: each output's taps in tap order (acc = acc + x[i + t]
 * * w[t], as the graph sums them), the tap loop unrolled so that GCC
 * vectorizes across outputs with the sums in registers: 31 loads, products
 * and sums per vector of outputs and one store. */
static void conv1d_31(const hf_args *a, int64_t lo, int64_t hi) {
    const float *restrict x = a->in[0];
    float *restrict out = a->out;
    float w[CONV_TAPS];
    for (int t = 0; t < CONV_TAPS; t++) w[t] = seed_stencil_weight(t, CONV_TAPS);
    for (int64_t i = lo; i < hi; i++) {
        float acc = x[i] * w[0];
#pragma GCC unroll 32
        for (int t = 1; t < CONV_TAPS; t++) acc = acc + x[i + t] * w[t];
        out[i] = acc;
    }
}

/* 5x5 stencil of an n x n image given padded to (n + 4)^2 (cols = n), row
 * by row: each output's 25 taps in tap order (row dy, column dx), unrolled,
 * vectorized across the row with the sums in registers; the 5 input rows a
 * row reads (5 (n + 4) floats) stay in L1/L2 for the next rows. */
static void stencil5x5(const hf_args *a, int64_t lo, int64_t hi) {
    int64_t n = a->cols, np = n + 4;
    float w[25];
    for (int t = 0; t < 25; t++) w[t] = seed_stencil_weight(t, 25);
    for (int64_t r = lo; r < hi; r++) {
        const float *restrict x = a->in[0] + r * np;
        float *restrict y = a->out + r * n;
        for (int64_t j = 0; j < n; j++) {
            float acc = x[j] * w[0];
#pragma GCC unroll 32
            for (int t = 1; t < 25; t++) acc = acc + x[(t / 5) * np + j + t % 5] * w[t];
            y[j] = acc;
        }
    }
}

static const hf_case hf_cases[] = {
    {"gaussian_pdf", gaussian_pdf, 1, 0, 0, 0},
    {"polar_distance", polar_distance, 4, 0, 0, 0},
    {"hypot", hypot_steps, 2, 0, 0, 0},
    {"softmax_rows", softmax_rows, 1, 1, 0, 0},
    {"layer_norm", layer_norm, 3, 1, 0, 0},
    {"conv1d_31", conv1d_31, 1, 0, 1, CONV_TAPS - 1},
    {"stencil5x5", stencil5x5, 1, 1, 2, 4},
};

const hf_case *hf_find(const char *name) {
    for (size_t i = 0; i < sizeof hf_cases / sizeof hf_cases[0]; i++)
        if (!strcmp(hf_cases[i].name, name)) return &hf_cases[i];
    return 0;
}
