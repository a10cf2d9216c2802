/* tools/spca.c: lazyfuse-spca, the seed talk's sparse PCA written with lazyfuse.
 *
 * The talk (shared/seeds/004, "Sparse PCA") samples S = (4 / epsilon)^d
 * random directions c in R^d (p = 1000 features, d = 3, epsilon = 0.1 gives
 * 64000 samples, k = 10), and for each computes a = Vd @ (c / |c|), keeps
 * the k largest entries of a, and scores the sample by the norm of those k;
 * the best sample's k entries, divided by that norm and scattered into
 * zeros(p), are the answer opt_x. Its CPU version loops over samples in
 * Python; its GPU version needs cuRAND, a batched matmul, a k-selection
 * kernel, a scatter kernel and a host loop over every sample to find the
 * best. Here the whole thing is one graph (spca_graph in spca_graph.c):
 *
 *   C  [d, S]  = lf_random normal f32 (Philox, the seed --seed)
 *   Cn [d, S]  = C / sqrt(sum(C*C, axis 0, keepdims))
 *   A  [p, S]  = sum over d of Vd[p, d, 1] * Cn[1, d, S]     (zip-reduce)
 *   vals, idx [k, S] = lf_topk, lf_argtopk(A, k, axis 0, largest)
 *   val [S]    = sqrt(sum(vals^2, axis 0))
 *   best       = argmax(val) (the first maximum, as the seed's strict >)
 *   opt_x [p]  = scatter SET of vals[:, best] / max(val) at idx[:, best]
 *                into zeros(p)  (lf_fill + lf_gather + lf_scatter)
 *
 * and one lf_eval computes opt_x, best and val[best]; nothing goes back to
 * the host in between. The planner stores the small Cn (its sqrt and the
 * random normal's Box-Muller are computed once per element) and computes A
 * from it inside the top-k's pass (A is never stored: --stats shows
 * bytes_materialized, Cn, the [k, S] candidates and val only). float32 throughout: the benchmark and the seeds' GPU version
 * are single precision, it halves the traffic, and a top-k of float32
 * values needs nothing more.
 *
 * Vd [p, d] is uniform in [-1, 1) from tools/seed_examples.c's fixed LCG
 * (seed_fill_f32, seed SPCA_VD_SEED), so benches/peers/common.py makes the
 * same matrix; it stands for the talk's Vd (the leading d eigenvectors
 * scaled by their singular values), which only has to be a fixed p x d.
 *
 * Check: the samples C are evaluated into a buffer of their own (the same
 * lf_random node; its bits do not depend on how it is evaluated), read to
 * the host, and the same algorithm runs in plain C on them (tools/spca_ref.c,
 * one thread): the best sample must be the same, val[best] and every
 * element of opt_x equal within 1e-5 (relative, absolute for small values).
 *
 * Usage: lazyfuse-spca [--backend cpu|cuda|reference] [--samples S] [--p P]
 *                      [--d D] [--k K] [--seed N] [--threads T] [--stats]
 *                      [--max-temp-bytes N]
 * Defaults: cpu, S = 64000, p = 1000, d = 3, k = 10, seed 2014, every CPU.
 * --backend cuda without a usable GPU prints "skipped" and exits 0.
 * --max-temp-bytes N fails the run when the eval's bytes_materialized (the
 * temporaries it stored) exceeds N: the meson test 'spca' uses it to catch
 * a plan that stores the S x p product again.
 * Exit status: 0 when the check passes, 1 when it fails, a lazyfuse call
 * fails (lf_errmsg printed) or the temporaries pass --max-temp-bytes, 2 for
 * a bad command line.
 */
#include "backend_arg.h"
#include "lazyfuse.h"
#include "seed_examples.h"
#include "spca.h"

#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PROG "lazyfuse-spca"
#define SPCA_TOL 1e-5     /* opt_x and val against the plain C program */

typedef struct options {
    lf_backend backend;
    const char *backend_name;
    int64_t S, p, k;
    int d, threads;
    uint64_t seed;
    bool stats;
    int64_t max_temp;  /* --max-temp-bytes: fail above this bytes_materialized; -1: no limit */
} options;

static int usage(FILE *f) {
    fprintf(f, "usage: " PROG " [--backend cpu|cuda|reference] [--samples S] [--p P] [--d D] [--k K]\n"
               "                     [--seed N] [--threads T] [--stats] [--max-temp-bytes N]\n");
    return 2;
}

static bool parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out) {
    char *end;
    long long v = s ? strtoll(s, &end, 10) : 0;
    if (!s || !*s || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

static int parse_args(int argc, char **argv, options *o) {
    *o = (options){LF_BACKEND_CPU, "cpu", 64000, 1000, 10, 3, 0, 2014, false, -1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int64_t x;
        if (!strcmp(a, "--stats")) { o->stats = true; continue; }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); return 0; }
        if (!v) { fprintf(stderr, PROG ": %s needs a value\n", a); return usage(stderr); }
        i++;
        if (!strcmp(a, "--backend")) {
            if (!backend_from_name(v, &o->backend) || o->backend == LF_BACKEND_AUTO) {
                fprintf(stderr, PROG ": --backend: cpu, cuda or reference, not '%s'\n", v);
                return usage(stderr);
            }
            o->backend_name = v;
        } else if (!strcmp(a, "--samples") && parse_i64(v, 1, INT64_C(1) << 32, &x)) o->S = x;
        else if (!strcmp(a, "--p") && parse_i64(v, 1, INT64_C(1) << 24, &x)) o->p = x;
        else if (!strcmp(a, "--d") && parse_i64(v, 1, 16, &x)) o->d = (int)x;
        else if (!strcmp(a, "--k") && parse_i64(v, 1, 1 << 20, &x)) o->k = x;
        else if (!strcmp(a, "--seed") && parse_i64(v, 0, INT64_MAX, &x)) o->seed = (uint64_t)x;
        else if (!strcmp(a, "--threads") && parse_i64(v, 0, 1024, &x)) o->threads = (int)x;
        else if (!strcmp(a, "--max-temp-bytes") && parse_i64(v, 0, INT64_MAX, &x)) o->max_temp = x;
        else { fprintf(stderr, PROG ": bad option or value: %s %s\n", a, v); return usage(stderr); }
    }
    if (o->k > o->p) { fprintf(stderr, PROG ": --k %" PRId64 " exceeds --p %" PRId64 "\n", o->k, o->p); return 2; }
    return -1;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static bool close_to(double got, double want) {
    return fabs(got - want) <= SPCA_TOL * fmax(fabs(want), 1e-3);
}

int main(int argc, char **argv) {
    options o;
    int rc = parse_args(argc, argv, &o);
    if (rc >= 0) return rc;
    lf_ctx_options co;
    lf_ctx_options_init(&co);
    co.backend = o.backend;
    co.threads = o.threads;
    lf_ctx *ctx = lf_ctx_new(&co);
    if (!ctx) {
        if (o.backend == LF_BACKEND_CUDA) {
            printf(PROG ": skipped: no usable CUDA device (%s)\n", lf_errmsg(NULL));
            return 0;
        }
        fprintf(stderr, PROG ": %s\n", lf_errmsg(NULL));
        return 1;
    }
    int64_t p = o.p, d = o.d, S = o.S, k = o.k;
    float *Vd = malloc((size_t)(p * d) * sizeof *Vd), *C = malloc((size_t)(d * S) * sizeof *C);
    float *opt_x = malloc((size_t)p * sizeof *opt_x), *ref_x = malloc((size_t)p * sizeof *ref_x);
    if (!Vd || !C || !opt_x || !ref_x) {
        fprintf(stderr, PROG ": out of memory\n");
        return 1;
    }
    seed_fill_f32(Vd, p * d, -1, 1, SPCA_VD_SEED);
    lf_buffer *vb = lf_buffer_new(ctx, LF_F32, 2, (int64_t[]){p, d});
    lf_buffer *xb = lf_buffer_new(ctx, LF_F32, 1, &p);
    lf_buffer *bb = lf_buffer_new(ctx, LF_I64, 0, NULL), *valb = lf_buffer_new(ctx, LF_F32, 0, NULL);
    lf_buffer *cb = lf_buffer_new(ctx, LF_F32, 2, (int64_t[]){d, S});
    lf_graph *g = lf_graph_new(ctx);
    spca_nodes n = {0};
    const char *step = "build";
    bool ok = vb && xb && bb && valb && cb && g && lf_buffer_write(vb, Vd, (size_t)(p * d) * sizeof *Vd) == LF_OK &&
              spca_graph(g, lf_input(g, vb), S, k, o.seed, &n) == LF_OK;
    double t_first = 0, t_warm = 0;
    lf_eval_stats st;
    memset(&st, 0, sizeof st);
    lf_node *outs[3] = {n.opt_x, n.best, n.val};
    lf_buffer *dsts[3] = {xb, bb, valb};
    if (ok) { /* the first eval plans and compiles; the second finds it all cached */
        step = "eval";
        double t0 = now_s();
        ok = lf_eval(g, 3, outs, dsts) == LF_OK;
        t_first = now_s() - t0;
        t0 = now_s();
        ok = ok && lf_eval(g, 3, outs, dsts) == LF_OK;
        int64_t b = 0;
        ok = ok && lf_buffer_read(bb, &b, sizeof b) == LF_OK; /* waits for a CUDA eval */
        t_warm = now_s() - t0;
        ok = ok && lf_ctx_last_stats(ctx, &st) == LF_OK;
    }
    int64_t best = -1;
    float val = NAN;
    ok = ok && lf_buffer_read(xb, opt_x, (size_t)p * sizeof *opt_x) == LF_OK &&
         lf_buffer_read(bb, &best, sizeof best) == LF_OK && lf_buffer_read(valb, &val, sizeof val) == LF_OK;
    /* the same samples for the plain C program: the random node alone */
    if (ok) step = "eval of the samples";
    ok = ok && lf_eval(g, 1, &n.C, &cb) == LF_OK && lf_buffer_read(cb, C, (size_t)(d * S) * sizeof *C) == LF_OK;
    if (!ok) {
        fprintf(stderr, PROG ": %s failed: %s\n", step,
                g && lf_graph_status(g) != LF_OK ? lf_graph_errmsg(g) : lf_errmsg(ctx));
        lf_ctx_destroy(ctx);
        return 1;
    }
    spca_ref_result ref;
    double t0 = now_s();
    if (spca_ref(Vd, C, p, (int)d, S, (int)k, 1, ref_x, &ref) != 0) {
        fprintf(stderr, PROG ": the plain C program ran out of memory\n");
        lf_ctx_destroy(ctx);
        return 1;
    }
    double t_ref = now_s() - t0;

    printf(PROG ": backend %s, p = %" PRId64 ", d = %" PRId64 ", S = %" PRId64 " samples, k = %" PRId64
                ", seed %" PRIu64 "\n", lf_backend_name(lf_ctx_backend(ctx)), p, d, S, k, o.seed);
    printf("lazyfuse: best sample %" PRId64 ", val %.7g; first eval %.1f ms (plan + compile), then %.2f ms\n",
           best, (double)val, t_first * 1e3, t_warm * 1e3);
    printf("plain C (1 thread): best sample %" PRId64 ", val %.7g; %.2f ms\n", ref.best, (double)ref.val,
           t_ref * 1e3);
    printf("opt_x, its nonzero entries (index: value):");
    int shown = 0;
    for (int64_t i = 0; i < p && shown < 12; i++)
        if (opt_x[i] != 0) printf("%s %" PRId64 ": %.6f", shown++ ? "," : "", i, (double)opt_x[i]);
    printf("\n");
    printf("lazyfuse code: %d lines (spca_graph in tools/spca_graph.c)\n", SPCA_GRAPH_LINES);
    if (o.stats)
        printf("lf_eval_stats: kernels %d, bytes_materialized %zu (temporaries), temp_bytes_avoided %zu, "
               "bytes_read %zu, bytes_written %zu; an S x p temporary would be %" PRId64 " bytes\n",
               st.kernels, st.bytes_materialized, st.temp_bytes_avoided, st.bytes_read, st.bytes_written,
               S * p * 4);

    double worst = 0;
    bool same = best == ref.best && close_to(val, ref.val);
    for (int64_t i = 0; i < p; i++) {
        double e = fabs((double)opt_x[i] - (double)ref_x[i]) / fmax(fabs((double)ref_x[i]), 1e-3);
        if (!(e <= worst)) worst = e;
        if (!close_to(opt_x[i], ref_x[i])) same = false;
    }
    printf("check against the plain C program on the same samples: %s (best %" PRId64 " vs %" PRId64
           ", largest opt_x difference %.3g relative, tolerance %.0e)\n",
           same ? "ok" : "MISMATCH", best, ref.best, worst, SPCA_TOL);
    bool small = o.max_temp < 0 || st.bytes_materialized <= (uint64_t)o.max_temp;
    if (!small)
        printf("temporaries: bytes_materialized %zu exceeds --max-temp-bytes %" PRId64 ": FAILED\n",
               st.bytes_materialized, o.max_temp);
    lf_ctx_destroy(ctx);
    free(Vd);
    free(C);
    free(opt_x);
    free(ref_x);
    return same && small ? 0 : 1;
}
