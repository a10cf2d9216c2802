/* benches/dtype_bench.c: triad (a * b + c) and chain8 (the seed examples'
 * chain of 8 cheap ops) in f32, f16 and bf16 on the CPU backend, one
 * process: each case's bandwidth (bytes its kernel must read and write per
 * second) as a fraction of memcpy's over the same number of bytes, so that
 * the halves' cost (16-bit loads and stores converted to float and rounded
 * after each op, graph/scalar.c's rule) reads against the f32 figure.
 *
 *   dtype-bench [n]     (default n = 2^24 elements; median of 7 evals after
 *                        one warm-up that compiles)
 *
 * Not a test and not installed; the figures depend on the machine's load.
 */
#include "lazyfuse.h"
#include "timed_eval.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { REPS = 7 };

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

/* Seconds per memcpy of `bytes` (median). */
static double copy_seconds(size_t bytes) {
    char *a = malloc(bytes), *b = malloc(bytes);
    if (!a || !b) exit(1);
    memset(a, 1, bytes);
    memset(b, 2, bytes);
    double t[REPS];
    for (int r = 0; r < REPS; r++) {
        double t0 = bench_now();
        memcpy(b, a, bytes);
        t[r] = bench_now() - t0;
    }
    free(a);
    free(b);
    return median(t, REPS);
}

/* Seconds per eval (median) of the case in dtype t over n elements. */
static double case_seconds(lf_ctx *ctx, const char *which, lf_dtype t, int64_t n) {
    lf_buffer *in[3], *out = lf_buffer_new(ctx, t, 1, &n);
    float *host = malloc((size_t)n * sizeof *host);
    for (int64_t i = 0; i < n; i++) host[i] = (float)((i % 1000) / 500.0 - 1.0);
    lf_graph *g = lf_graph_new(ctx);
    for (int k = 0; k < 3; k++) { /* the values arrive in t through a cast node evaluated once */
        lf_buffer *f = lf_buffer_new(ctx, LF_F32, 1, &n);
        lf_buffer_write(f, host, (size_t)n * sizeof *host);
        in[k] = lf_buffer_new(ctx, t, 1, &n);
        lf_graph *cg = lf_graph_new(ctx);
        lf_node *c = lf_cast(cg, lf_input(cg, f), t);
        if (lf_eval(cg, 1, &c, &in[k]) != LF_OK) fprintf(stderr, "cast: %s\n", lf_errmsg(ctx));
        lf_graph_free(cg);
        lf_buffer_free(f);
    }
    lf_node *y;
    if (!strcmp(which, "triad")) {
        y = lf_add(g, lf_mul(g, lf_input(g, in[0]), lf_input(g, in[1])), lf_input(g, in[2]));
    } else {
        y = lf_input(g, in[0]);
        for (int i = 0; i < 2; i++) {
            y = lf_mul(g, y, lf_const(g, t, 0.99));
            y = lf_add(g, y, lf_const(g, t, 0.01 * (i + 1)));
            y = lf_abs(g, y);
            y = lf_sub(g, y, lf_const(g, t, 0.25));
        }
    }
    double s[REPS];
    if (lf_eval(g, 1, &y, &out) != LF_OK) fprintf(stderr, "%s %s: %s\n", which, lf_dtype_name(t), lf_errmsg(ctx));
    for (int r = 0; r < REPS; r++) s[r] = bench_timed_eval(ctx, g, 1, &y, &out);
    lf_graph_free(g);
    for (int k = 0; k < 3; k++) lf_buffer_free(in[k]);
    lf_buffer_free(out);
    free(host);
    return median(s, REPS);
}

int main(int argc, char **argv) {
    int64_t n = argc > 1 ? atoll(argv[1]) : (int64_t)1 << 24;
    lf_ctx_options o;
    lf_ctx_options_init(&o);
    o.backend = LF_BACKEND_CPU;
    lf_ctx *ctx = lf_ctx_new(&o);
    if (!ctx) {
        fprintf(stderr, "dtype-bench: %s\n", lf_errmsg(NULL));
        return 1;
    }
    static const lf_dtype ts[] = {LF_F32, LF_F16, LF_BF16};
    static const char *const cases[] = {"triad", "chain8"};
    printf("%-8s %-5s %12s %10s %14s\n", "case", "dtype", "ms/eval", "GB/s", "of memcpy");
    for (int c = 0; c < 2; c++)
        for (int k = 0; k < 3; k++) {
            size_t bytes = (size_t)n * lf_dtype_size(ts[k]) * (c == 0 ? 4 : 2); /* 3 reads + 1 write, or 1 + 1 */
            double s = case_seconds(ctx, cases[c], ts[k], n), cs = copy_seconds(bytes / 2); /* memcpy reads and writes */
            printf("%-8s %-5s %12.3f %10.2f %13.0f%%\n", cases[c], lf_dtype_name(ts[k]), 1e3 * s, bytes / s / 1e9,
                   100.0 * (bytes / s) / (bytes / cs));
        }
    lf_ctx_destroy(ctx);
    return 0;
}
