/* tests/test_fft.c: lf_fft and lf_ifft (issue 31) on the context's
 * evaluator (reference; compiled CPU as fft-cpu), against a naive O(n^2)
 * DFT in long double written here: every axis of 1-D to 3-D arrays,
 * lengths that are powers of two, primes and 1, c64 and c128 and real
 * inputs (their result dtypes), ifft(fft(x)) == x within rounding, the
 * fusion boundary (elementwise producers and consumers fuse up to the
 * transform: kernel counts), zero-size batches and the errors.
 */
#include "graph/graph.h"
#include "testutil.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

TU_GRAPH_SUITE(fft);

/* A complex input of the given shape with values from the test's rng. */
static lf_node *cinput(lf_dtype t, int ndim, const int64_t *shape, lf_scalar **vals_out) {
    lf_buffer *b = lf_buffer_new(ctx, t, ndim, shape);
    cr_assert(b != NULL, "%s", lf_errmsg(ctx));
    int64_t n = lf_buffer_numel(b);
    lf_scalar *v = calloc((size_t)(n ? n : 1), sizeof *v);
    unsigned char *raw = calloc((size_t)(n ? n : 1), lf_dtype_size(t));
    for (int64_t i = 0; i < n; i++) {
        v[i].f = tu_uniform(-1, 1);
        v[i].im = graph_dtype_is_complex(t) ? tu_uniform(-1, 1) : 0;
        if (t == LF_C64 || t == LF_F32) v[i].f = (float)v[i].f, v[i].im = (float)v[i].im;
        graph_scalar_store(raw, t, i, v[i]);
    }
    cr_assert_eq(lf_buffer_write(b, raw, (size_t)n * lf_dtype_size(t)), LF_OK);
    free(raw);
    lf_node *x = lf_input(g, b);
    lf_buffer_free(b);
    *vals_out = v;
    return x;
}

static lf_scalar *run(lf_node *y) {
    lf_buffer *b = tu_eval1(ctx, g, y);
    int64_t n = lf_buffer_numel(b);
    void *raw = tu_read_raw(b);
    lf_scalar *v = calloc((size_t)(n ? n : 1), sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = graph_scalar_load(raw, lf_node_dtype(y), i);
    free(raw);
    lf_buffer_free(b);
    return v;
}

/* The naive DFT of x (shape, row-major) along axis, in long double. */
static void naive(const lf_scalar *x, int ndim, const int64_t *shape, int axis, bool inverse, long double *re,
                  long double *im) {
    int64_t n = shape[axis], inner = 1, outer = 1;
    for (int d = axis + 1; d < ndim; d++) inner *= shape[d];
    for (int d = 0; d < axis; d++) outer *= shape[d];
    const long double pi = 3.141592653589793238462643383279502884L;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t in = 0; in < inner; in++)
            for (int64_t k = 0; k < n; k++) {
                long double sr = 0, si = 0;
                for (int64_t j = 0; j < n; j++) {
                    const lf_scalar *v = &x[(o * n + j) * inner + in];
                    long double a = (inverse ? 2 : -2) * pi * (long double)((j * k) % n) / (long double)n;
                    long double c = cosl(a), s = sinl(a);
                    sr += v->f * c - v->im * s;
                    si += v->f * s + v->im * c;
                }
                if (inverse) sr /= n, si /= n;
                re[(o * n + k) * inner + in] = sr;
                im[(o * n + k) * inner + in] = si;
            }
}

/* fft or ifft of a fresh input against the naive DFT: error within tol
 * times the line's root-mean-square magnitude times log2(n) + 1. */
static void check(lf_dtype t, int ndim, const int64_t *shape, int axis, bool inverse) {
    lf_scalar *x;
    lf_node *in = cinput(t, ndim, shape, &x);
    lf_node *y = inverse ? lf_ifft(g, in, axis) : lf_fft(g, in, axis);
    cr_assert(y != NULL, "%s", lf_errmsg(ctx));
    lf_dtype want = t == LF_C64 || t == LF_F32 ? LF_C64 : LF_C128;
    cr_assert_eq(lf_node_dtype(y), want);
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= shape[d];
    lf_scalar *v = run(y);
    long double *re = calloc((size_t)(n ? n : 1), sizeof *re), *im = calloc((size_t)(n ? n : 1), sizeof *im);
    naive(x, ndim, shape, axis < 0 ? axis + ndim : axis, inverse, re, im);
    int64_t len = shape[axis < 0 ? axis + ndim : axis];
    double eps = want == LF_C64 ? 0x1p-23 : 0x1p-52;
    double tol = 8 * eps * (log2((double)len) + 1) * sqrt((double)len) * (inverse ? 1.0 / (double)len : 1.0);
    for (int64_t i = 0; i < n; i++) {
        double er = fabs((double)(v[i].f - re[i])), ei = fabs((double)(v[i].im - im[i]));
        cr_expect(er <= tol && ei <= tol, "%s %s axis %d n %lld at %lld: (%g, %g), want (%Lg, %Lg)",
                  inverse ? "ifft" : "fft", lf_dtype_name(t), axis, (long long)len, (long long)i, v[i].f, v[i].im, re[i],
                  im[i]);
    }
    free(x);
    free(v);
    free(re);
    free(im);
}

Test(fft, matches_naive_dft_every_axis) {
    static const int64_t lens[] = {1, 2, 3, 8, 13, 64, 97};
    for (int k = 0; k < 7; k++) {
        check(LF_C128, 1, (int64_t[]){lens[k]}, 0, false);
        check(LF_C64, 1, (int64_t[]){lens[k]}, 0, true);
    }
    int64_t s3[3] = {3, 5, 4};
    for (int axis = -3; axis < 3; axis++) {
        check(LF_C64, 3, s3, axis, false);
        check(LF_C128, 3, s3, axis, true);
    }
    check(LF_F64, 2, (int64_t[]){4, 6}, 1, false); /* real input: c128 */
    check(LF_F32, 2, (int64_t[]){6, 4}, 0, false); /* f32: c64 */
}

Test(fft, inverse_undoes_forward) {
    lf_scalar *x;
    int64_t shape[2] = {16, 12};
    lf_node *in = cinput(LF_C128, 2, shape, &x);
    lf_node *y = lf_ifft(g, lf_fft(g, in, 1), 1);
    cr_assert(y != NULL, "%s", lf_errmsg(ctx));
    lf_scalar *v = run(y);
    for (int i = 0; i < 16 * 12; i++)
        cr_expect(fabs(v[i].f - x[i].f) < 1e-14 && fabs(v[i].im - x[i].im) < 1e-14, "at %d", i);
    free(x);
    free(v);
}

/* The filter shape: ifft(fft(a) * fft(b)) with elementwise work before and
 * after. Kernels: the casts/maps feeding each fft (one kernel per extern
 * input evaluated), the product between the transforms (one kernel), and
 * the consumer after the ifft (one kernel). */
Test(fft, elementwise_fuses_up_to_the_boundary) {
    lf_scalar *xa, *xb;
    int64_t shape[2] = {8, 8};
    lf_node *a = cinput(LF_C64, 2, shape, &xa), *b = cinput(LF_C64, 2, shape, &xb);
    lf_fn *twice = lf_fn_parse(g, "(z) -> z * 2 + 1");
    lf_node *fa = lf_fft(g, lf_fft(g, lf_map(g, twice, a), 1), 0);
    lf_node *fb = lf_fft(g, lf_fft(g, b, 1), 0);
    lf_fn *mul = lf_fn_parse(g, "(p, q) -> p * conj(q) * 0.5");
    lf_node *prod = lf_zipwith(g, mul, 2, (lf_node *[]){fa, fb});
    lf_node *back = lf_ifft(g, lf_ifft(g, prod, 0), 1);
    lf_fn *mag = lf_fn_parse(g, "(z) -> abs(z) + real(z)");
    lf_node *y = lf_map(g, mag, back);
    cr_assert(y != NULL, "%s", lf_errmsg(ctx));
    lf_buffer *out = lf_buffer_new(ctx, LF_F32, 2, shape);
    cr_assert_eq(lf_eval(g, 1, &y, &out), LF_OK, "%s", lf_errmsg(ctx));
    lf_eval_stats st;
    cr_assert_eq(lf_ctx_last_stats(ctx, &st), LF_OK);
    /* map before fa's first fft (1), product (1), consumer (1); b is read
       in place, each fft's input is the previous fft's buffer */
    const char *be = getenv("LF_TEST_BACKEND");
    if (be && !strcmp(be, "cpu")) cr_expect_eq(st.kernels, 3, "kernels %d", st.kernels); /* the reference counts none */
    /* the value: a circular cross-correlation, checked at one point by the naive sum */
    float *h = malloc(64 * sizeof *h);
    cr_assert_eq(lf_buffer_read(out, h, 64 * sizeof *h), LF_OK);
    /* y[i] = |c[i]| + re(c[i]) with c = 0.5 * sum_j a2[i + j] conj(b[j]) (indices mod 8 per axis) */
    for (int p = 0; p < 64; p += 9) {
        int pi = p / 8, pj = p % 8;
        long double cr_ = 0, ci = 0;
        for (int q = 0; q < 64; q++) {
            int qi = q / 8, qj = q % 8;
            int r = ((pi + qi) % 8) * 8 + (pj + qj) % 8;
            long double ar = 2.0L * xa[r].f + 1, ai = 2.0L * xa[r].im, br = xb[q].f, bi = -xb[q].im;
            cr_ += ar * br - ai * bi;
            ci += ar * bi + ai * br;
        }
        cr_ *= 0.5L, ci *= 0.5L; /* ifft(F(a) conj(F(b))) is the circular cross-correlation */
        double want = (double)(sqrtl(cr_ * cr_ + ci * ci) + cr_);
        cr_expect(fabs(h[p] - want) < 1e-3, "y at (%d, %d): %g, want %g", pi, pj, h[p], want);
    }
    free(h);
    lf_buffer_free(out);
    free(xa);
    free(xb);
}

Test(fft, zero_size_batches_and_errors) {
    lf_scalar *x;
    lf_node *e = cinput(LF_C64, 2, (int64_t[]){0, 4}, &x);
    free(x);
    lf_node *y = lf_fft(g, e, 1);
    cr_assert(y != NULL, "%s", lf_errmsg(ctx));
    lf_buffer *b = tu_eval1(ctx, g, y);
    cr_expect_eq(lf_buffer_numel(b), 0);
    lf_buffer_free(b);
    cr_expect(lf_fft(g, e, 0) == NULL);
    cr_expect(strstr(lf_errmsg(ctx), "no points") != NULL, "%s", lf_errmsg(ctx));
    lf_graph_free(g);
    g = lf_graph_new(ctx);
    lf_node *c = lf_const(g, LF_C64, 1.0);
    cr_expect(lf_fft(g, c, 0) == NULL);
    lf_graph_free(g);
    g = lf_graph_new(ctx);
    lf_node *z = cinput(LF_C128, 1, (int64_t[]){4}, &x);
    free(x);
    cr_expect(lf_ifft(g, z, 1) == NULL);
    cr_expect(strstr(lf_errmsg(ctx), "axis 1 out of range") != NULL, "%s", lf_errmsg(ctx));
}
