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
 * The graph shapes of issue 26 (planning linear in every shape), each built
 * to about N nodes over [SHAPE_R, SHAPE_C] f32 arrays and evaluated by the
 * schedule interpreter (LF_COMPILE_NEVER: planning is what they measure):
 *
 *   accum N        acc = acc + x_i over N fresh inputs (a load cap every 8).
 *   zip8 N         v = (v + a + b + c + d + e + f + g) * 0.125, each step with
 *                  7 fresh inputs (N/8 steps of 8 nodes).
 *   diamond N      v = f(v) + g(v reversed along axis 1) repeated, f(v) =
 *                  v*0.75, g(v) = v*0.25 + 0.001: v is read at two index maps
 *                  of one kernel, so the multiple-consumer rule makes roots
 *                  (N/4 steps of 4 nodes).
 *   rownorm N      v = v / sum(v, axis 1, keepdims) repeated (N/2 steps:
 *                  the reduce and the zipwith that broadcasts it).
 *   mix N          a random mix (seeded, fixed) of those four steps and a
 *                  plain map, until N nodes.
 *
 * Their lines add the process's peak resident memory so far (getrusage; run
 * one case per process for a case's own peak) and check the result against
 * the same steps run in float on the host.
 *
 * Each line gives the eval's wall-clock time (CLOCK_MONOTONIC around lf_eval
 * only), lf_eval_stats' plan_seconds and compile_seconds, and the kernel
 * counts. Results are checked against a closed form where there is one. A case
 * that fails prints lf_errmsg and the others still run (exit status 1).
 *
 * Usage: lazyfuse-scale [--case NAME[,NAME..]] [--reps R] [--threads T] [--dot FILE]
 * with NAME one of chain1e4, chain1e5, outputs1e4, outputs1e5, pyramid400,
 * unfused1e5, and accum, zip8, diamond, rownorm, mix each at 1e3, 1e4, 1e5
 * (accum1e3 .. mix1e5), or a shape with any size (accum:2000) (default:
 * the named cases). --dot appends each shape's fused plan (lf_dump_dot,
 * LF_DOT_FUSED) to FILE, so that two builds' plans can be compared.
 */
#include "lazyfuse.h"

#include <ftw.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define PROG "lazyfuse-scale"
#define CHAIN_N 1024   /* elements of the chain's input */
#define SLICE_N 8      /* elements of each output of the outputs case */
#define PYRAMID_TOP 64 /* elements of the pyramid's top level */
#define SHAPE_R 4      /* rows of the issue 26 shapes' arrays */
#define SHAPE_C 8      /* columns */
#define SHAPE_N (SHAPE_R * SHAPE_C)

static int threads = 1;
static int reps = 20;
static int failures = 0;
static const char *dot_path = NULL; /* --dot: the shapes' fused plans (LF_DOT_FUSED) appended here */

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

/* ---- graph shapes (issue 26) ------------------------------------------------ */

enum { SH_ACCUM, SH_ZIP8, SH_DIAMOND, SH_ROWNORM, SH_MIX, NSHAPES };
static const char *const shape_names[NSHAPES] = {"accum", "zip8", "diamond", "rownorm", "mix"};

typedef struct shape_build {
    lf_ctx *ctx;
    lf_graph *g;
    lf_fn *add, *zip8, *f, *gf, *div, *chain;
    lf_buffer **bufs; /* the fresh inputs */
    int nbufs, capbufs;
    uint64_t seq;     /* the fresh inputs' values */
    float host[SHAPE_N]; /* the same steps in float */
} shape_build;

static float fresh_value(uint64_t k) { return 0.001f * (float)(k % 13 + 1); }

/* A fresh [SHAPE_R, SHAPE_C] input; its values also into vals. */
static lf_node *fresh_input(shape_build *B, float *vals) {
    if (B->nbufs == B->capbufs) {
        int cap = B->capbufs ? 2 * B->capbufs : 1024;
        lf_buffer **t = realloc(B->bufs, (size_t)cap * sizeof *t);
        if (!t) return NULL;
        B->bufs = t;
        B->capbufs = cap;
    }
    lf_buffer *b = lf_buffer_new(B->ctx, LF_F32, 2, (int64_t[]){SHAPE_R, SHAPE_C});
    if (!b) return NULL;
    B->bufs[B->nbufs++] = b;
    for (int j = 0; j < SHAPE_N; j++) vals[j] = fresh_value(B->seq++ + (uint64_t)j);
    lf_buffer_write(b, vals, sizeof(float) * SHAPE_N);
    return lf_input(B->g, b);
}

/* One step of shape sh on v (host mirrors it); *nodes grows by the nodes made. */
static lf_node *shape_step(shape_build *B, int sh, lf_node *v, int *nodes) {
    float a[SHAPE_N];
    lf_graph *g = B->g;
    switch (sh) {
    case SH_ACCUM: {
        lf_node *x = fresh_input(B, a);
        if (!x) return NULL;
        for (int j = 0; j < SHAPE_N; j++) B->host[j] = B->host[j] + a[j];
        *nodes += 2;
        return lf_zipwith(g, B->add, 2, (lf_node *[]){v, x});
    }
    case SH_ZIP8: {
        lf_node *xs[8] = {v};
        float sum[SHAPE_N];
        memcpy(sum, B->host, sizeof sum);
        for (int k = 1; k < 8; k++) {
            if (!(xs[k] = fresh_input(B, a))) return NULL;
            for (int j = 0; j < SHAPE_N; j++) sum[j] += a[j];
        }
        for (int j = 0; j < SHAPE_N; j++) B->host[j] = sum[j] * 0.125f;
        *nodes += 8;
        return lf_zipwith(g, B->zip8, 8, xs);
    }
    case SH_DIAMOND: {
        float o[SHAPE_N];
        for (int r = 0; r < SHAPE_R; r++)
            for (int c = 0; c < SHAPE_C; c++)
                o[r * SHAPE_C + c] = B->host[r * SHAPE_C + c] * 0.75f + (B->host[r * SHAPE_C + SHAPE_C - 1 - c] * 0.25f + 0.001f);
        memcpy(B->host, o, sizeof o);
        *nodes += 4;
        lf_node *rev = lf_slice(g, v, 1, LF_NONE, LF_NONE, -1);
        return lf_zipwith(g, B->add, 2, (lf_node *[]){lf_map(g, B->f, v), lf_map(g, B->gf, rev)});
    }
    case SH_ROWNORM: {
        for (int r = 0; r < SHAPE_R; r++) {
            float s = 0;
            for (int c = 0; c < SHAPE_C; c++) s += B->host[r * SHAPE_C + c];
            for (int c = 0; c < SHAPE_C; c++) B->host[r * SHAPE_C + c] /= s;
        }
        lf_node *s = lf_reduce(g, LF_RED_SUM, v, 1, (int[]){1}, true);
        *nodes += 2; /* the reduce and the division (which broadcasts it) */
        return lf_zipwith(g, B->div, 2, (lf_node *[]){v, s});
    }
    default: /* a plain map */
        for (int j = 0; j < SHAPE_N; j++) B->host[j] = B->host[j] * 0.999f + 0.001f;
        *nodes += 1;
        return lf_map(g, B->chain, v);
    }
}

static uint64_t mix_next(uint64_t *s) { /* splitmix64 */
    uint64_t z = (*s += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

static void case_shape(const char *name, int sh, int n) {
    shape_build B;
    memset(&B, 0, sizeof B);
    lf_ctx_options o;
    lf_ctx_options_init(&o);
    o.backend = LF_BACKEND_CPU;
    o.threads = threads;
    o.compile = LF_COMPILE_NEVER;
    lf_ctx *ctx = B.ctx = lf_ctx_new(&o);
    if (!ctx) {
        fail(name, NULL, "lf_ctx_new");
        return;
    }
    lf_graph *g = B.g = lf_graph_new(ctx);
    lf_buffer *yb = lf_buffer_new(ctx, LF_F32, 2, (int64_t[]){SHAPE_R, SHAPE_C});
    if (!g || !yb) {
        fail(name, ctx, "setup");
        goto out;
    }
    B.add = lf_fn_parse(g, "(a, b) -> a + b");
    B.zip8 = lf_fn_parse(g, "(a, b, c, d, e, f, g, h) -> (a + b + c + d + e + f + g + h) * 0.125");
    B.f = lf_fn_parse(g, "(v) -> v * 0.75");
    B.gf = lf_fn_parse(g, "(v) -> v * 0.25 + 0.001");
    B.div = lf_fn_parse(g, "(a, b) -> a / b");
    B.chain = lf_fn_parse(g, "(v) -> v * 0.999 + 0.001");
    lf_node *v = fresh_input(&B, B.host);
    uint64_t seed = 26;
    int nodes = 1;
    while (v && nodes < n) {
        int step = sh;
        if (sh == SH_MIX) step = (int)(mix_next(&seed) % 5); /* 4: a plain map */
        v = shape_step(&B, step, v, &nodes);
    }
    if (!v) {
        fail(name, ctx, "build");
        goto out;
    }
    if (dot_path) { /* the plan, to compare two builds' decisions */
        FILE *fp = fopen(dot_path, "a");
        if (!fp || lf_dump_dot(g, 1, &v, LF_DOT_FUSED, fp) != LF_OK) fail(name, ctx, "--dot");
        if (fp) fclose(fp);
    }
    double t0 = now();
    lf_status s = lf_eval(g, 1, &v, &yb);
    double t = now() - t0;
    if (s != LF_OK) {
        fail(name, ctx, "lf_eval");
        goto out;
    }
    lf_eval_stats st;
    memset(&st, 0, sizeof st);
    lf_ctx_last_stats(ctx, &st);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("%-12s %-7s %10.4f s  plan %9.4f s  kernels %6d  nodes %7d  peak RSS %7.1f MB\n", name, "interp", t,
           st.plan_seconds, st.kernels, nodes, ru.ru_maxrss / 1024.0);
    fflush(stdout);
    float y[SHAPE_N];
    lf_buffer_read(yb, y, sizeof y);
    for (int j = 0; j < SHAPE_N; j++)
        if (!(fabsf(y[j] - B.host[j]) <= 1e-3f * (1 + fabsf(B.host[j])))) {
            fprintf(stderr, PROG ": %s: y[%d] = %g, want %g\n", name, j, y[j], B.host[j]);
            failures++;
            break;
        }
out:
    for (int i = 0; i < B.nbufs; i++) lf_buffer_free(B.bufs[i]);
    free(B.bufs);
    lf_buffer_free(yb);
    lf_graph_free(g);
    lf_ctx_destroy(ctx);
}

/* ---- main ------------------------------------------------------------------- */

static const char *const names[] = {
    "chain1e4",   "chain1e5",   "outputs1e4", "outputs1e5", "pyramid400", "unfused1e5",
    "accum1e3",   "accum1e4",   "accum1e5",   "zip8_1e3",   "zip8_1e4",   "zip8_1e5",
    "diamond1e3", "diamond1e4", "diamond1e5", "rownorm1e3", "rownorm1e4", "rownorm1e5",
    "mix1e3",     "mix1e4",     "mix1e5"};
enum { NCASES = sizeof names / sizeof *names };

static void run_case(int c) {
    switch (c) {
    case 0: case_chain(names[c], 10000, 1); break;
    case 1: case_chain(names[c], 100000, 1); break;
    case 2: case_outputs(names[c], 10000); break;
    case 3: case_outputs(names[c], 100000); break;
    case 4: case_pyramid(names[c], 400); break;
    case 5: case_chain(names[c], 100000, 0); break;
    default: { /* the shapes: three sizes each */
        int k = c - 6, pw[3] = {1000, 10000, 100000};
        case_shape(names[c], k / 3, pw[k % 3]);
    }
    }
}

enum { MAX_PENDING = 64 };
static struct {
    int shape, n;
    char name[64];
} pending[MAX_PENDING];
static int npending;

int main(int argc, char **argv) {
    bool sel[NCASES] = {false}, any = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf("usage: " PROG " [--case NAME[,NAME..]] [--reps R] [--threads T] [--dot FILE]\ncases:");
            for (int c = 0; c < NCASES; c++) printf(" %s", names[c]);
            printf("\n");
            return 0;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, PROG ": %s: unknown flag or missing value (see --help)\n", a);
            return 2;
        }
        const char *val = argv[++i];
        if (!strcmp(a, "--dot")) {
            dot_path = val;
        } else if (!strcmp(a, "--reps")) {
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
                const char *colon = memchr(s, ':', len);
                if (c == NCASES && colon) { /* a shape at any size: run now, in order */
                    int sh = 0;
                    while (sh < NSHAPES && (strlen(shape_names[sh]) != (size_t)(colon - s) ||
                                            strncmp(shape_names[sh], s, (size_t)(colon - s))))
                        sh++;
                    long sz = atol(colon + 1);
                    if (sh < NSHAPES && sz >= 1 && sz <= 100000000) {
                        pending[npending].shape = sh;
                        pending[npending].n = (int)sz;
                        snprintf(pending[npending].name, sizeof pending[npending].name, "%.*s", (int)len, s);
                        if (npending < MAX_PENDING - 1) npending++;
                        any = true;
                        s += len + (s[len] == ',');
                        continue;
                    }
                }
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
        if (any ? sel[c] : c < 6) run_case(c);
    for (int i = 0; i < npending; i++) case_shape(pending[i].name, pending[i].shape, pending[i].n);
    return failures ? 1 : 0;
}
