/* benches/scale_bench.c: lazyfuse-scale, the planning and compiling scale benchmark.
 *
 * lazyfuse-bench measures kernels on big arrays; this program measures what
 * grows with the size of the graph instead: planning, codegen, compiling and
 * the per-eval overhead of a reused program, on tiny arrays (so running the
 * kernels costs next to nothing). The shapes (issue 12, items 8 and 9):
 *
 *   chain N        x -> f(x) applied N times (f = v*0.999 + 0.001, two ops): one
 *                  long fused chain. "cold": fresh context and empty kernel
 *                  cache folder (plan + codegen + compile + run); "warm": a
 *                  second fresh context on the same folder (plan + disk-cache
 *                  loads + run).
 *   outputs N      one lf_eval of N outputs y_i = slice(x, i, i+8) * 2: one
 *                  input read at N index maps (cold, then the cached re-eval of
 *                  the same program: "reeval", median of --reps).
 *   pyramid D      a stencil pyramid: level k+1 = (a + b) * 0.5 of level k's
 *                  two shifted slices, D levels (the multiple-consumer rule
 *                  materializes every few levels).
 *   unfused N      chain N with fusion off: N kernels.
 *
 * Each line gives the eval's wall-clock time (CLOCK_MONOTONIC around lf_eval
 * only), lf_eval_stats' plan_seconds and compile_seconds, and the kernel
 * counts. Results are checked against a closed form where there is one. A case
 * that fails prints lf_errmsg and the others still run (exit status 1).
 *
 * Usage: lazyfuse-scale [--case NAME[,NAME..]] [--reps R] [--threads T]
 * with NAME one of chain1e4, chain1e5, outputs1e4, outputs1e5, pyramid400,
 * unfused1e5 (default: all).
 */
#include "lazyfuse.h"

#include <ftw.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PROG "lazyfuse-scale"
#define CHAIN_N 1024   /* elements of the chain's input */
#define SLICE_N 8      /* elements of each output of the outputs case */
#define PYRAMID_TOP 64 /* elements of the pyramid's top level */

static int threads = 1;
static int reps = 20;
static int failures = 0;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(path) != 0 ? 0 : 0;
}

static lf_ctx *new_ctx(const char *cache_dir, int fusion) {
    lf_ctx_options o;
    lf_ctx_options_init(&o);
    o.backend = LF_BACKEND_CPU;
    o.threads = threads;
    o.cache_dir = cache_dir;
    o.fusion = fusion;
    o.compile = LF_COMPILE_REQUIRE;
    o.compile_timeout = 600;
    lf_ctx *ctx = lf_ctx_new(&o);
    if (!ctx) fprintf(stderr, PROG ": lf_ctx_new: %s\n", lf_errmsg(NULL));
    return ctx;
}

static void report(const char *name, const char *phase, double secs, const lf_ctx *ctx) {
    lf_eval_stats st;
    memset(&st, 0, sizeof st);
    lf_ctx_last_stats(ctx, &st);
    printf("%-12s %-7s %10.4f s  plan %9.4f s  compile %9.4f s  kernels %6d  compiled %6d  disk %6d  "
           "memory %6d%s\n",
           name, phase, secs, st.plan_seconds, st.compile_seconds, st.kernels, st.kernels_compiled,
           st.kernels_disk_hits, st.kernels_memory_hits, st.program_reused ? "  reused" : "");
    fflush(stdout);
}

static void fail(const char *name, lf_ctx *ctx, const char *what) {
    fprintf(stderr, PROG ": %s: %s: %s\n", name, what, ctx ? lf_errmsg(ctx) : "?");
    failures++;
}

/* ---- chain ------------------------------------------------------------------ */

/* Builds and evaluates the chain of n maps in ctx; checks the result. */
static void chain_eval(const char *name, const char *phase, lf_ctx *ctx, int n) {
    lf_graph *g = lf_graph_new(ctx);
    lf_buffer *xb = lf_buffer_new(ctx, LF_F32, 1, (int64_t[]){CHAIN_N});
    lf_buffer *yb = lf_buffer_new(ctx, LF_F32, 1, (int64_t[]){CHAIN_N});
    float *x = malloc(CHAIN_N * sizeof *x), *y = malloc(CHAIN_N * sizeof *y);
    if (!g || !xb || !yb || !x || !y) {
        fail(name, ctx, "setup");
        goto out;
    }
    for (int i = 0; i < CHAIN_N; i++) x[i] = (float)i / CHAIN_N;
    lf_buffer_write(xb, x, CHAIN_N * sizeof *x);
    lf_fn *f = lf_fn_parse(g, "(v) -> v * 0.999 + 0.001");
    lf_node *v = lf_input(g, xb);
    for (int i = 0; i < n; i++) v = lf_map(g, f, v);
    double t0 = now();
    lf_status s = lf_eval(g, 1, &v, &yb);
    double t = now() - t0;
    if (s != LF_OK) {
        fail(name, ctx, "lf_eval");
        goto out;
    }
    report(name, phase, t, ctx);
    lf_buffer_read(yb, y, CHAIN_N * sizeof *y);
    /* float32 iteration of v*0.999 + 0.001 from the first input: same rounding */
    float want = x[CHAIN_N - 1];
    for (int i = 0; i < n; i++) want = want * 0.999f + 0.001f;
    if (!(fabsf(y[CHAIN_N - 1] - want) <= 1e-6f * (1 + fabsf(want)))) {
        fprintf(stderr, PROG ": %s: wrong result %g, want %g\n", name, y[CHAIN_N - 1], want);
        failures++;
    }
out:
    free(x), free(y);
    lf_buffer_free(xb), lf_buffer_free(yb);
    lf_graph_free(g);
}

static void case_chain(const char *name, int n, int fusion) {
    char dir[] = "/tmp/lazyfuse-scale-XXXXXX";
    if (!mkdtemp(dir)) {
        perror(PROG ": mkdtemp");
        failures++;
        return;
    }
    lf_ctx *ctx = new_ctx(dir, fusion);
    if (ctx) chain_eval(name, "cold", ctx, n);
    lf_ctx_destroy(ctx);
    if (fusion && (ctx = new_ctx(dir, fusion))) { /* a fresh process would do the same */
        chain_eval(name, "warm", ctx, n);
        lf_ctx_destroy(ctx);
    }
    nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* ---- outputs ---------------------------------------------------------------- */

static void case_outputs(const char *name, int n) {
    char dir[] = "/tmp/lazyfuse-scale-XXXXXX";
    if (!mkdtemp(dir)) {
        perror(PROG ": mkdtemp");
        failures++;
        return;
    }
    lf_ctx *ctx = new_ctx(dir, 1);
    lf_graph *g = ctx ? lf_graph_new(ctx) : NULL;
    int64_t len = n + SLICE_N - 1;
    lf_buffer *xb = ctx ? lf_buffer_new(ctx, LF_F32, 1, &len) : NULL;
    lf_node **outs = calloc((size_t)n, sizeof *outs);
    lf_buffer **dsts = calloc((size_t)n, sizeof *dsts);
    float *x = malloc((size_t)len * sizeof *x);
    double *times = malloc((size_t)reps * sizeof *times);
    if (!g || !xb || !outs || !dsts || !x || !times) {
        fail(name, ctx, "setup");
        goto out;
    }
    for (int64_t i = 0; i < len; i++) x[i] = (float)i;
    lf_buffer_write(xb, x, (size_t)len * sizeof *x);
    lf_fn *f = lf_fn_parse(g, "(v) -> v * 2");
    lf_node *xn = lf_input(g, xb);
    for (int i = 0; i < n; i++) {
        outs[i] = lf_map(g, f, lf_slice(g, xn, 0, i, i + SLICE_N, 1));
        if (!(dsts[i] = lf_buffer_new(ctx, LF_F32, 1, (int64_t[]){SLICE_N}))) {
            fail(name, ctx, "setup");
            goto out;
        }
    }
    double t0 = now();
    lf_status s = lf_eval(g, n, outs, dsts);
    double t = now() - t0;
    if (s != LF_OK) {
        fail(name, ctx, "lf_eval");
        goto out;
    }
    report(name, "cold", t, ctx);
    for (int r = 0; r < reps; r++) {
        t0 = now();
        s = lf_eval(g, n, outs, dsts);
        times[r] = now() - t0;
        if (s != LF_OK) {
            fail(name, ctx, "lf_eval (again)");
            goto out;
        }
    }
    for (int a = 1; a < reps; a++) /* insertion sort: the median */
        for (int b = a; b > 0 && times[b] < times[b - 1]; b--) {
            double tmp = times[b];
            times[b] = times[b - 1];
            times[b - 1] = tmp;
        }
    report(name, "reeval", times[reps / 2], ctx);
    for (int i = 0; i < n; i += n / 7 + 1) {
        float y[SLICE_N];
        lf_buffer_read(dsts[i], y, sizeof y);
        for (int j = 0; j < SLICE_N; j++)
            if (y[j] != 2.0f * (float)(i + j)) {
                fprintf(stderr, PROG ": %s: output %d[%d] = %g, want %g\n", name, i, j, y[j],
                        2.0 * (i + j));
                failures++;
                goto out;
            }
    }
out:
    if (dsts)
        for (int i = 0; i < n; i++) lf_buffer_free(dsts[i]);
    free(dsts), free(outs), free(x), free(times);
    lf_buffer_free(xb);
    lf_graph_free(g);
    lf_ctx_destroy(ctx);
    nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* ---- pyramid ---------------------------------------------------------------- */

static void case_pyramid(const char *name, int depth) {
    char dir[] = "/tmp/lazyfuse-scale-XXXXXX";
    if (!mkdtemp(dir)) {
        perror(PROG ": mkdtemp");
        failures++;
        return;
    }
    lf_ctx *ctx = new_ctx(dir, 1);
    lf_graph *g = ctx ? lf_graph_new(ctx) : NULL;
    int64_t len = PYRAMID_TOP + depth;
    lf_buffer *xb = ctx ? lf_buffer_new(ctx, LF_F32, 1, &len) : NULL;
    lf_buffer *yb = ctx ? lf_buffer_new(ctx, LF_F32, 1, (int64_t[]){PYRAMID_TOP}) : NULL;
    float *x = malloc((size_t)len * sizeof *x);
    if (!g || !xb || !yb || !x) {
        fail(name, ctx, "setup");
        goto out;
    }
    for (int64_t i = 0; i < len; i++) x[i] = 1.0f; /* every level stays 1 */
    lf_buffer_write(xb, x, (size_t)len * sizeof *x);
    lf_fn *f = lf_fn_parse(g, "(a, b) -> (a + b) * 0.5");
    lf_node *v = lf_input(g, xb);
    for (int k = 0; k < depth; k++) {
        int64_t m = lf_node_dim(v, 0);
        lf_node *ab[2] = {lf_slice(g, v, 0, 0, m - 1, 1), lf_slice(g, v, 0, 1, m, 1)};
        v = lf_zipwith(g, f, 2, ab);
    }
    double t0 = now();
    lf_status s = lf_eval(g, 1, &v, &yb);
    double t = now() - t0;
    if (s != LF_OK) {
        fail(name, ctx, "lf_eval");
        goto out;
    }
    report(name, "cold", t, ctx);
    float y[PYRAMID_TOP];
    lf_buffer_read(yb, y, sizeof y);
    for (int j = 0; j < PYRAMID_TOP; j++)
        if (y[j] != 1.0f) {
            fprintf(stderr, PROG ": %s: y[%d] = %g, want 1\n", name, j, y[j]);
            failures++;
            break;
        }
out:
    free(x);
    lf_buffer_free(xb), lf_buffer_free(yb);
    lf_graph_free(g);
    lf_ctx_destroy(ctx);
    nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* ---- main ------------------------------------------------------------------- */

static const char *const names[] = {"chain1e4",   "chain1e5",   "outputs1e4",
                                    "outputs1e5", "pyramid400", "unfused1e5"};
enum { NCASES = sizeof names / sizeof *names };

static void run_case(int c) {
    switch (c) {
    case 0: case_chain(names[c], 10000, 1); break;
    case 1: case_chain(names[c], 100000, 1); break;
    case 2: case_outputs(names[c], 10000); break;
    case 3: case_outputs(names[c], 100000); break;
    case 4: case_pyramid(names[c], 400); break;
    case 5: case_chain(names[c], 100000, 0); break;
    }
}

int main(int argc, char **argv) {
    bool sel[NCASES] = {false}, any = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf("usage: " PROG " [--case NAME[,NAME..]] [--reps R] [--threads T]\ncases:");
            for (int c = 0; c < NCASES; c++) printf(" %s", names[c]);
            printf("\n");
            return 0;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, PROG ": %s: unknown flag or missing value (see --help)\n", a);
            return 2;
        }
        const char *val = argv[++i];
        if (!strcmp(a, "--reps")) {
            reps = atoi(val);
            if (reps < 1 || reps > 100000) {
                fprintf(stderr, PROG ": --reps: expected 1..100000, got '%s'\n", val);
                return 2;
            }
        } else if (!strcmp(a, "--threads")) {
            threads = atoi(val);
            if (threads < 0 || threads > 4096) {
                fprintf(stderr, PROG ": --threads: expected 0..4096, got '%s'\n", val);
                return 2;
            }
        } else if (!strcmp(a, "--case")) {
            for (const char *s = val; *s;) {
                size_t len = strcspn(s, ",");
                int c = 0;
                while (c < NCASES && (strlen(names[c]) != len || strncmp(names[c], s, len))) c++;
                if (c == NCASES) {
                    fprintf(stderr, PROG ": --case: unknown case '%.*s'\n", (int)len, s);
                    return 2;
                }
                sel[c] = any = true;
                s += len + (s[len] == ',');
            }
        } else {
            fprintf(stderr, PROG ": %s: unknown flag (see --help)\n", a);
            return 2;
        }
    }
    for (int c = 0; c < NCASES; c++)
        if (!any || sel[c]) run_case(c);
    return failures ? 1 : 0;
}
