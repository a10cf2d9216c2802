/* tools/fft_filter.c: the seed talk's FFT filter, ifft(fft(image) *
 * fft(response)), as one lazyfuse graph, checked against the same filter
 * written directly against FFTW, and timed against it.
 *
 *   lazyfuse-fft-filter [N [REPS [THREADS]]]     (defaults 2048 5 1)
 *
 * image and response are N x N complex64 arrays of uniform values in
 * [-1, 1) (a fixed seed). lazyfuse: fft along axis 1 then axis 0 of each,
 * their product (one fused kernel between the transforms), then ifft along
 * axis 0 and axis 1 (NumPy's ifft2: divided by N^2). FFTW directly: two
 * single-precision 2-D forward plans, the product with the 1/N^2 scale
 * folded in, one 2-D backward plan (FFTW_ESTIMATE, THREADS threads, the
 * same for both). Prints the largest difference relative to the largest
 * magnitude, the median time of REPS runs of each (after one warm-up) and
 * their ratio; exits 1 if the difference passes 1e-4 (single precision,
 * two transforms of N^2 points) or anything fails. Times on a shared,
 * loaded machine are noisy: compare ratios from one run.
 */
#include "lazyfuse.h"

#include <fftw3.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *t, int n) {
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static float uniform(void) { /* xorshift64*: [-1, 1) */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    uint64_t r = rng_state * 0x2545F4914F6CDD1Dull;
    return (float)((double)(r >> 40) / (double)(1ull << 24) * 2.0 - 1.0);
}

/* y = ifft2(fft2(a) * fft2(b)) with FFTW's plans made once; *t: seconds of
 * one run (execute the three plans and the product). */
typedef struct direct {
    fftwf_complex *a, *b, *fa, *fb, *y;
    fftwf_plan pa, pb, py;
    int64_t n;
} direct;

static void direct_run(direct *d) {
    fftwf_execute(d->pa);
    fftwf_execute(d->pb);
    int64_t m = d->n * d->n;
    float s = (float)(1.0 / (double)m);
    for (int64_t i = 0; i < m; i++) { /* (fa * fb) / N^2, into fa */
        float ar = d->fa[i][0], ai = d->fa[i][1], br = d->fb[i][0], bi = d->fb[i][1];
        d->fa[i][0] = (ar * br - ai * bi) * s;
        d->fa[i][1] = (ar * bi + ai * br) * s;
    }
    fftwf_execute(d->py);
}

int main(int argc, char **argv) {
    int64_t n = argc > 1 ? atoll(argv[1]) : 2048;
    int reps = argc > 2 ? atoi(argv[2]) : 5;
    int threads = argc > 3 ? atoi(argv[3]) : 1;
    if (n < 1 || reps < 1 || threads < 1) {
        fprintf(stderr, "usage: %s [N [REPS [THREADS]]]\n", argv[0]);
        return 2;
    }
    int64_t m = n * n, shape[2] = {n, n};
    size_t bytes = (size_t)m * sizeof(fftwf_complex);

    /* ---- the filter written against FFTW ---- */
    direct d = {.n = n};
    d.a = fftwf_malloc(bytes), d.b = fftwf_malloc(bytes), d.fa = fftwf_malloc(bytes), d.fb = fftwf_malloc(bytes);
    d.y = fftwf_malloc(bytes);
    if (!d.a || !d.b || !d.fa || !d.fb || !d.y) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    fftwf_init_threads();
    fftwf_plan_with_nthreads(threads);
    d.pa = fftwf_plan_dft_2d((int)n, (int)n, d.a, d.fa, FFTW_FORWARD, FFTW_ESTIMATE);
    d.pb = fftwf_plan_dft_2d((int)n, (int)n, d.b, d.fb, FFTW_FORWARD, FFTW_ESTIMATE);
    d.py = fftwf_plan_dft_2d((int)n, (int)n, d.fa, d.y, FFTW_BACKWARD, FFTW_ESTIMATE);
    for (int64_t i = 0; i < m; i++) d.a[i][0] = uniform(), d.a[i][1] = uniform();
    for (int64_t i = 0; i < m; i++) d.b[i][0] = uniform(), d.b[i][1] = uniform();

    /* ---- the same filter as one lazyfuse graph ---- */
    lf_ctx_options opt;
    lf_ctx_options_init(&opt);
    opt.backend = LF_BACKEND_CPU;
    opt.threads = threads;
    lf_ctx *ctx = lf_ctx_new(&opt);
    if (!ctx) {
        fprintf(stderr, "lf_ctx_new: %s\n", lf_errmsg(NULL));
        return 1;
    }
    lf_buffer *ba = lf_buffer_new(ctx, LF_C64, 2, shape), *bb = lf_buffer_new(ctx, LF_C64, 2, shape);
    lf_buffer *by = lf_buffer_new(ctx, LF_C64, 2, shape);
    lf_graph *g = lf_graph_new(ctx);
    if (!ba || !bb || !by || !g || lf_buffer_write(ba, d.a, bytes) != LF_OK || lf_buffer_write(bb, d.b, bytes) != LF_OK) {
        fprintf(stderr, "setup: %s\n", lf_errmsg(ctx));
        return 1;
    }
    lf_node *fa = lf_fft(g, lf_fft(g, lf_input(g, ba), 1), 0);
    lf_node *fb = lf_fft(g, lf_fft(g, lf_input(g, bb), 1), 0);
    lf_node *prod = lf_mul(g, fa, fb);
    lf_node *y = lf_ifft(g, lf_ifft(g, prod, 0), 1);
    if (!y) {
        fprintf(stderr, "graph: %s\n", lf_errmsg(ctx));
        return 1;
    }

    double *tl = malloc((size_t)reps * sizeof *tl), *td = malloc((size_t)reps * sizeof *td);
    for (int r = -1; r < reps; r++) { /* r = -1: warm-up (kernel compile, FFTW plans) */
        double t0 = now();
        lf_status st = lf_eval(g, 1, &y, &by);
        double t1 = now();
        if (st != LF_OK) {
            fprintf(stderr, "lf_eval: %s\n", lf_errmsg(ctx));
            return 1;
        }
        direct_run(&d);
        double t2 = now();
        if (r >= 0) tl[r] = t1 - t0, td[r] = t2 - t1;
    }
    lf_eval_stats stats;
    lf_ctx_last_stats(ctx, &stats);

    fftwf_complex *ly = fftwf_malloc(bytes);
    if (!ly || lf_buffer_read(by, ly, bytes) != LF_OK) {
        fprintf(stderr, "read: %s\n", lf_errmsg(ctx));
        return 1;
    }
    double maxdiff = 0, maxmag = 0;
    for (int64_t i = 0; i < m; i++) {
        double dr = fabs((double)ly[i][0] - d.y[i][0]), di = fabs((double)ly[i][1] - d.y[i][1]);
        maxdiff = fmax(maxdiff, fmax(dr, di));
        maxmag = fmax(maxmag, hypot(d.y[i][0], d.y[i][1]));
    }
    double rel = maxmag > 0 ? maxdiff / maxmag : maxdiff;
    double ml = median(tl, reps), md = median(td, reps);
    printf("fft_filter %lldx%lld complex64, %d threads, %d reps (median; shared machine, noisy)\n", (long long)n,
           (long long)n, threads, reps);
    printf("  lazyfuse graph : %9.3f ms  (lf_eval_stats: %d kernels, the transforms not counted)\n", 1e3 * ml,
           stats.kernels);
    printf("  FFTW directly  : %9.3f ms\n", 1e3 * md);
    printf("  ratio          : %9.3f (lazyfuse / FFTW)\n", ml / md);
    printf("  max |diff| / max |y| = %.3g %s\n", rel, rel <= 1e-4 ? "(ok)" : "(TOO LARGE)");

    fftwf_free(ly);
    free(tl);
    free(td);
    lf_graph_free(g);
    lf_buffer_free(ba);
    lf_buffer_free(bb);
    lf_buffer_free(by);
    lf_ctx_destroy(ctx);
    fftwf_destroy_plan(d.pa);
    fftwf_destroy_plan(d.pb);
    fftwf_destroy_plan(d.py);
    fftwf_free(d.a);
    fftwf_free(d.b);
    fftwf_free(d.fa);
    fftwf_free(d.fb);
    fftwf_free(d.y);
    fftwf_cleanup_threads();
    return rel <= 1e-4 ? 0 : 1;
}
