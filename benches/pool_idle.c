/* benches/pool_idle.c: lazyfuse-pool-idle, what the CPU pool costs while it waits.
 *
 * The CPU backend's workers spin for a bounded time after a run before they
 * sleep (backends/cpu/pool.c), so that back-to-back evals do not pay a
 * thread wake-up each. This program measures what that costs:
 *
 *   idle   a CPU context evaluates a triad a*b+c at --n elements a few times
 *          (parallel: the pool's workers exist and have just run), then the
 *          program sleeps --seconds; the process's CPU time during the sleep
 *          (CLOCK_PROCESS_CPUTIME_ID) as a % of one core. It must stay under
 *          1%: the exit status is 1 otherwise.
 *   gaps   the same eval in a loop with a sleep of G microseconds between
 *          evals, for each G of --gaps, about 0.3 s each: the median eval
 *          time and the process's CPU time per iteration (the eval on every
 *          thread, plus any spinning; the sleep itself costs none). A gap
 *          longer than the workers' spin shows the full spin in that figure.
 *
 * Usage: lazyfuse-pool-idle [--threads T] [--n N] [--seconds S] [--gaps G,G..]
 * (defaults: all CPUs, 2^16, 2, 0,20,50,100,200,1000). The kernel cache is
 * a fresh folder, removed at exit.
 */
#include "lazyfuse.h"

#include <ftw.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PROG "lazyfuse-pool-idle"
#define MAX_GAPS 32
#define GAP_SECONDS 0.3

static double clock_s(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void sleep_s(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts)) {}
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

static int usage(void) {
    fprintf(stderr, "usage: " PROG " [--threads T] [--n N] [--seconds S] [--gaps G,G..]\n");
    return 2;
}

int main(int argc, char **argv) {
    int threads = 0;
    int64_t n = (int64_t)1 << 16; /* the smallest size the CPU backend runs in parallel */
    double seconds = 2.0;
    double gaps[MAX_GAPS] = {0, 20, 50, 100, 200, 1000};
    int ngaps = 6;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--threads") && v) threads = atoi(v);
        else if (!strcmp(argv[i], "--n") && v) n = atoll(v);
        else if (!strcmp(argv[i], "--seconds") && v) seconds = atof(v);
        else if (!strcmp(argv[i], "--gaps") && v) {
            ngaps = 0;
            for (char *s = argv[i + 1], *end; *s && ngaps < MAX_GAPS; s = *end ? end + 1 : end) {
                gaps[ngaps++] = strtod(s, &end);
                if (end == s || (*end && *end != ',')) return usage();
            }
        } else
            return usage();
        i++;
    }
    if (n < 1 || seconds <= 0 || threads < 0) return usage();

    char dir[] = "/tmp/" PROG "-XXXXXX";
    if (!mkdtemp(dir)) {
        perror(PROG ": mkdtemp");
        return 1;
    }
    int status = 1;
    lf_ctx_options o;
    lf_ctx_options_init(&o);
    o.backend = LF_BACKEND_CPU;
    o.threads = threads;
    o.cache_dir = dir;
    lf_ctx *ctx = lf_ctx_new(&o);
    if (!ctx) {
        fprintf(stderr, PROG ": lf_ctx_new: %s\n", lf_errmsg(NULL));
        goto out;
    }
    lf_buffer *in[3], *yb = lf_buffer_new(ctx, LF_F32, 1, &n);
    float *host = malloc((size_t)n * sizeof *host);
    double *t = NULL;
    lf_graph *g = lf_graph_new(ctx);
    bool ok = yb && host && g;
    for (int k = 0; k < 3; k++) {
        in[k] = lf_buffer_new(ctx, LF_F32, 1, &n);
        ok = ok && in[k];
        for (int64_t i = 0; ok && i < n; i++) host[i] = (float)(k + 1) + 1e-6f * (float)i;
        ok = ok && lf_buffer_write(in[k], host, (size_t)n * sizeof *host) == LF_OK;
    }
    lf_node *y = ok ? lf_add(g, lf_mul(g, lf_input(g, in[0]), lf_input(g, in[1])), lf_input(g, in[2]))
                    : NULL;
    for (int r = 0; ok && r < 5; r++) ok = y && lf_eval(g, 1, &y, &yb) == LF_OK; /* compile, start the pool */
    if (!ok) {
        fprintf(stderr, PROG ": %s\n", lf_errmsg(ctx));
        goto done;
    }

    /* idle: the workers have just run; they spin, then sleep */
    double wall0 = clock_s(CLOCK_MONOTONIC), cpu0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
    sleep_s(seconds);
    double cpu = clock_s(CLOCK_PROCESS_CPUTIME_ID) - cpu0, wall = clock_s(CLOCK_MONOTONIC) - wall0;
    double pct = 100.0 * cpu / wall;
    printf(PROG ": %d threads, triad at n = %lld\n",
           threads ? threads : (int)sysconf(_SC_NPROCESSORS_ONLN), (long long)n);
    printf("idle: %.3f ms of CPU time in %.2f s after a parallel eval = %.3f%% of a core (limit 1%%)\n",
           cpu * 1e3, wall, pct);
    status = pct < 1.0 ? 0 : 1;

    /* gaps: evals spaced by sleeps */
    printf("%10s %12s %14s %8s\n", "gap us", "eval us", "CPU us/iter", "iters");
    for (int k = 0; k < ngaps && ok; k++) {
        double one = clock_s(CLOCK_MONOTONIC);
        ok = lf_eval(g, 1, &y, &yb) == LF_OK;
        one = clock_s(CLOCK_MONOTONIC) - one;
        int iters = (int)(GAP_SECONDS / (one + gaps[k] * 1e-6 + 5e-6));
        iters = iters < 20 ? 20 : iters > 100000 ? 100000 : iters;
        free(t);
        if (!(t = malloc((size_t)iters * sizeof *t))) break;
        cpu0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
        for (int r = 0; r < iters && ok; r++) {
            if (gaps[k] > 0) sleep_s(gaps[k] * 1e-6);
            double t0 = clock_s(CLOCK_MONOTONIC);
            ok = lf_eval(g, 1, &y, &yb) == LF_OK;
            t[r] = clock_s(CLOCK_MONOTONIC) - t0;
        }
        cpu = clock_s(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
        qsort(t, (size_t)iters, sizeof *t, cmp_double);
        printf("%10.0f %12.2f %14.2f %8d\n", gaps[k], t[iters / 2] * 1e6, cpu / iters * 1e6, iters);
    }
    if (!ok) {
        fprintf(stderr, PROG ": %s\n", lf_errmsg(ctx));
        status = 1;
    }
done:
    free(t);
    free(host);
    lf_graph_free(g);
    lf_ctx_destroy(ctx);
out:
    nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    return status;
}
