/* tools/demo.c: lazyfuse-demo, the project's main job.
 *
 * Builds the Numba lecture notes' gaussian_pdf
 *     (x, m, s) -> exp(-0.5*((x-m)/s)**2) / (s*2.5066282746)
 * (parsed from that string with lf_fn_parse) over n float32 values drawn
 * uniformly from [-3, 3) by a fixed-seed generator, with mean 0 and sigma 1 as
 * f32 constant nodes, and beside it the sum of squares of x (a LF_RED_SUM
 * reduction of x*x). Both outputs are evaluated by one lf_eval call, then
 * checked against a plain C loop: expf in float for the density (every
 * element within 1e-6 + 1e-5*|ref|; the largest absolute, relative and ulp
 * errors are printed) and a double accumulation for the sum (relative error
 * at most 1e-5 against the library's f32 result).
 *
 * It prints the backend, the median of 3 timed runs of lf_eval and of the
 * plain loop, a few values, what the fusion planner did (kernels, bytes of
 * temporaries stored and avoided) and what the CPU backend did (kernels
 * compiled or found in its caches). The plain loop is the hand-written
 * single-threaded C a user would write; lazyfuse runs compiled, vectorized
 * kernels on every core, so this is a demo, not a benchmark (lazyfuse-bench
 * in benches/ measures against the machine's memory bandwidth).
 *
 * Usage: lazyfuse-demo [--n N]     (default n = 10000000)
 * Exit status: 0 when the check passes, 1 when it fails or a lazyfuse call
 * fails (with lf_errmsg printed), 2 for a bad command line.
 */
#include "lazyfuse.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DEMO_SEED 20140324u /* the date of the seed talk; any fixed value */
#define NRUNS 3             /* timed repetitions; the median is reported */
#define PDF_RTOL 1e-5
#define PDF_ATOL 1e-6
#define SUM_RTOL 1e-5

static const char *const GAUSS_SRC = "(x, m, s) -> exp(-0.5*((x-m)/s)**2) / (s*2.5066282746)";

/* splitmix64: a small, fixed-seed generator, so every run sees the same x. */
static uint64_t rng_next(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Uniform float in [lo, hi): drawn in double, rounded to float, and kept
 * below hi when rounding would reach it. */
static float rng_uniformf(uint64_t *state, float lo, float hi) {
    double u = (double)(rng_next(state) >> 11) * 0x1.0p-53; /* [0, 1) */
    float v = (float)(lo + (hi - lo) * u);
    return v < hi ? v : nextafterf(hi, lo);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double median3(double a, double b, double c) {
    if (a > b) { double t = a; a = b; b = t; }
    if (b > c) { b = c; }
    return a > b ? a : b;
}

/* The plain C loop the library is checked and timed against: the same
 * operations in float, as the seed's float32 ufunc would run them. */
static double plain_loop(const float *x, float *pdf, int64_t n, float m, float s) {
    const float sqrt_2pi = 2.5066282746f;
    double ss = 0.0;
    for (int64_t i = 0; i < n; i++) {
        float z = (x[i] - m) / s;
        pdf[i] = expf(-0.5f * (z * z)) / (s * sqrt_2pi);
        ss += (double)x[i] * (double)x[i];
    }
    return ss;
}

/* Distance in units in the last place between two finite floats. */
static int64_t ulp_distance(float a, float b) {
    int32_t ia, ib;
    memcpy(&ia, &a, sizeof ia);
    memcpy(&ib, &b, sizeof ib);
    int64_t la = ia < 0 ? (int64_t)INT32_MIN - ia : ia; /* monotone integer order */
    int64_t lb = ib < 0 ? (int64_t)INT32_MIN - ib : ib;
    return la > lb ? la - lb : lb - la;
}

static int usage(const char *prog) {
    fprintf(stderr, "usage: %s [--n N]   (N >= 0 float32 values, default 10000000)\n", prog);
    return 2;
}

/* Prints a failed lazyfuse call with lf_errmsg and returns 1 (the exit
 * status). st is the call's status, or LF_OK for calls that return NULL. */
static int lf_fail(const lf_ctx *ctx, const char *what, lf_status st) {
    if (st != LF_OK)
        fprintf(stderr, "lazyfuse-demo: %s failed: %s: %s\n", what, lf_status_name(st),
                lf_errmsg(ctx));
    else
        fprintf(stderr, "lazyfuse-demo: %s failed: %s\n", what, lf_errmsg(ctx));
    return 1;
}

int main(int argc, char **argv) {
    int64_t n = 10000000;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("usage: %s [--n N]   (N >= 0 float32 values, default 10000000)\n", argv[0]);
            return 0;
        } else if (strcmp(argv[i], "--n") == 0 && i + 1 < argc) {
            char *end;
            errno = 0;
            long long v = strtoll(argv[++i], &end, 10);
            if (errno || *end || end == argv[i] || v < 0 || (uint64_t)v > SIZE_MAX / sizeof(float) / 4)
                return usage(argv[0]);
            n = v;
        } else {
            return usage(argv[0]);
        }
    }
    size_t bytes = (size_t)n * sizeof(float);

    int rc = 1;
    lf_ctx *ctx = NULL;
    lf_graph *g = NULL;
    lf_buffer *xb = NULL, *pdfb = NULL, *ssb = NULL;
    float *x = malloc(bytes ? bytes : 1);
    float *pdf = malloc(bytes ? bytes : 1);  /* lazyfuse's result */
    float *ref = malloc(bytes ? bytes : 1);  /* the plain loop's result */
    if (!x || !pdf || !ref) {
        fprintf(stderr, "lazyfuse-demo: out of memory for n = %" PRId64 "\n", n);
        goto out;
    }
    uint64_t state = DEMO_SEED;
    for (int64_t i = 0; i < n; i++) x[i] = rng_uniformf(&state, -3.0f, 3.0f);

    /* ---- build the deferred graph: nothing is computed here ---- */
    ctx = lf_ctx_new(NULL);
    if (!ctx) {
        fprintf(stderr, "lazyfuse-demo: lf_ctx_new failed: %s\n", lf_errmsg(NULL));
        goto out;
    }
    lf_status st;
    xb = lf_buffer_new(ctx, LF_F32, 1, &n);
    pdfb = lf_buffer_new(ctx, LF_F32, 1, &n);
    ssb = lf_buffer_new(ctx, LF_F32, 0, NULL);
    if (!xb || !pdfb || !ssb) {
        rc = lf_fail(ctx, "lf_buffer_new", LF_OK);
        goto out;
    }
    if ((st = lf_buffer_write(xb, x, bytes)) != LF_OK) {
        rc = lf_fail(ctx, "lf_buffer_write", st);
        goto out;
    }
    g = lf_graph_new(ctx);
    if (!g) {
        rc = lf_fail(ctx, "lf_graph_new", LF_OK);
        goto out;
    }
    lf_fn *gauss = lf_fn_parse(g, GAUSS_SRC);
    lf_node *xn = lf_input(g, xb);
    lf_node *mean = lf_const(g, LF_F32, 0.0);
    lf_node *sigma = lf_const(g, LF_F32, 1.0);
    lf_node *y = lf_zipwith(g, gauss, 3, (lf_node *[]){xn, mean, sigma});
    lf_node *ss = lf_reduce(g, LF_RED_SUM, lf_mul(g, xn, xn), 0, NULL, false);
    /* Builder errors are sticky: one check covers the whole chain. */
    if ((st = lf_graph_status(g)) != LF_OK) {
        fprintf(stderr, "lazyfuse-demo: building the graph failed: %s: %s\n",
                lf_status_name(st), lf_graph_errmsg(g));
        goto out;
    }

    char printed[256];
    if (lf_fn_print(gauss, printed, sizeof printed) < 0) snprintf(printed, sizeof printed, "?");
    printf("lazyfuse-demo: gaussian_pdf and sum of squares over n = %" PRId64 " float32 values\n", n);
    printf("  x        uniform in [-3, 3), splitmix64 seed %u\n", DEMO_SEED);
    printf("  fn       %s\n", GAUSS_SRC);
    printf("  parsed   %s\n", printed);
    printf("  outputs  pdf = zipwith(fn, x, m = 0 (f32), s = 1 (f32)) [%s]; "
           "ss = sum(x*x) [%s, 0-d]\n",
           lf_dtype_name(lf_node_dtype(y)), lf_dtype_name(lf_node_dtype(ss)));
    printf("  backend  %s\n", lf_backend_name(lf_ctx_backend(ctx)));

    /* ---- evaluate both outputs in one lf_eval call, NRUNS times ---- */
    double t_lf[NRUNS];
    for (int r = 0; r < NRUNS; r++) {
        double t0 = now_s();
        st = lf_eval(g, 2, (lf_node *[]){y, ss}, (lf_buffer *[]){pdfb, ssb});
        t_lf[r] = now_s() - t0;
        if (st != LF_OK) {
            rc = lf_fail(ctx, "lf_eval", st);
            goto out;
        }
    }
    float ss_lf;
    if ((st = lf_buffer_read(pdfb, pdf, bytes)) != LF_OK ||
        (st = lf_buffer_read(ssb, &ss_lf, sizeof ss_lf)) != LF_OK) {
        rc = lf_fail(ctx, "lf_buffer_read", st);
        goto out;
    }

    /* ---- the plain C loop, NRUNS times ---- */
    double t_c[NRUNS], ss_ref = 0.0;
    for (int r = 0; r < NRUNS; r++) {
        double t0 = now_s();
        ss_ref = plain_loop(x, ref, n, 0.0f, 1.0f);
        t_c[r] = now_s() - t0;
    }

    /* ---- check ---- */
    int64_t bad = 0, first_bad = -1, max_ulp = 0;
    double max_abs = 0.0, max_rel = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double a = pdf[i], b = ref[i], err = fabs(a - b);
        if (!(err <= PDF_ATOL + PDF_RTOL * fabs(b))) { /* NaN fails too */
            if (first_bad < 0) first_bad = i;
            bad++;
        }
        if (!(err <= max_abs)) max_abs = err;
        double rel = b != 0.0 ? err / fabs(b) : err;
        if (!(rel <= max_rel)) max_rel = rel;
        if (isfinite(a) && isfinite(b)) {
            int64_t u = ulp_distance(pdf[i], ref[i]);
            if (u > max_ulp) max_ulp = u;
        }
    }
    double ss_err = fabs((double)ss_lf - ss_ref);
    double ss_rel = ss_ref != 0.0 ? ss_err / fabs(ss_ref) : ss_err;
    bool ss_ok = ss_rel <= SUM_RTOL; /* false for NaN */

    printf("\nvalues (lazyfuse pdf, plain-loop pdf):\n");
    int64_t idx[4] = {0, 1, n / 2, n - 1};
    for (int k = 0; k < 4; k++) {
        if (idx[k] < 0 || idx[k] >= n || (k > 0 && idx[k] <= idx[k - 1])) continue;
        int64_t i = idx[k];
        printf("  x[%" PRId64 "] = %+.7f   pdf = %.8g   (loop %.8g)\n", i, x[i], pdf[i], ref[i]);
    }
    printf("  sum of squares = %.9g   (loop, in double: %.12g)\n", ss_lf, ss_ref);

    printf("\ncheck against the plain C loop:\n");
    printf("  pdf  max abs error %.3g, max rel error %.3g, max %" PRId64 " ulp; "
           "%" PRId64 " of %" PRId64 " outside %.0e + %.0e*|ref|  %s\n",
           max_abs, max_rel, max_ulp, bad, n, PDF_ATOL, PDF_RTOL, bad ? "FAIL" : "ok");
    if (bad)
        printf("  first bad element: x[%" PRId64 "] = %.9g: lazyfuse %.9g, loop %.9g\n",
               first_bad, x[first_bad], pdf[first_bad], ref[first_bad]);
    printf("  sum  rel error %.3g (tolerance %.0e)  %s\n", ss_rel, SUM_RTOL, ss_ok ? "ok" : "FAIL");

    double m_lf = median3(t_lf[0], t_lf[1], t_lf[2]);
    double m_c = median3(t_c[0], t_c[1], t_c[2]);
    printf("\ntiming (median of %d runs):\n", NRUNS);
    printf("  lazyfuse lf_eval (pdf and sum, one call)  %10.3f ms\n", 1e3 * m_lf);
    printf("  plain C loop (pdf and sum, one loop)      %10.3f ms\n", 1e3 * m_c);
    if (m_c > 0.0) printf("  ratio lazyfuse / loop                     %10.1fx\n", m_lf / m_c);
    lf_eval_stats fs;
    if (lf_ctx_last_stats(ctx, &fs) == LF_OK)
        printf("\nfusion: %d kernel%s for the pdf and the sum together; %zu bytes of temporaries\n"
               "  stored, %zu avoided; %zu bytes read, %zu written; planned in %.3f ms\n",
               fs.kernels, fs.kernels == 1 ? "" : "s", fs.bytes_materialized,
               fs.temp_bytes_avoided, fs.bytes_read, fs.bytes_written, 1e3 * fs.plan_seconds);
    if (lf_ctx_last_stats(ctx, &fs) == LF_OK)
        printf("cpu backend: last eval %s its compiled program (first eval: kernels compiled\n"
               "  or loaded from the kernel cache; see lazyfuse-bench for bandwidth figures)\n",
               fs.program_reused ? "reused" : "built");

    rc = (bad == 0 && ss_ok) ? 0 : 1;
    printf("\n%s\n", rc == 0 ? "lazyfuse-demo: OK" : "lazyfuse-demo: CHECK FAILED");

out:
    if (g) lf_graph_free(g);
    lf_buffer_free(xb);
    lf_buffer_free(pdfb);
    lf_buffer_free(ssb);
    lf_ctx_destroy(ctx);
    free(x);
    free(pdf);
    free(ref);
    return rc;
}
