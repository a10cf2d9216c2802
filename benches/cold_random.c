/* benches/cold_random.c: the first eval of random-normal graphs (issue 30,
 * "Cold start"), against plain graphs of the same shape.
 *
 * Each measurement is one fresh context (2 threads) evaluating, for the
 * first time, y = x + 0.1 * normal(n) followed by k maps v -> v * v + 1
 * (k = 0..K-1: a kernel never compiled before, since k changes its text),
 * and the same graph with x in place of the normal ("plain": the floor, a
 * compile of a kernel without random numbers). Every context of one run
 * shares one disk cache folder, fresh and empty at the start (removed at
 * exit), so the first random-normal eval also compiles the normal's object
 * (cg_c_random_object, compiled once per cache) and the later ones only
 * their kernel. Prints per eval: the wall time from graph building to the
 * result (planning, codegen, compiling, loading and one run at n = 65536),
 * kernels compiled and compiler runs. Usage: lazyfuse-cold-random [K]
 * (default 4).
 */
#define _POSIX_C_SOURCE 200809L
#include "lazyfuse.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f) {
    (void)st, (void)flag, (void)f;
    remove(p);
    return 0;
}

/* One first eval in a fresh context on cache folder dir; 0 on success. */
static int first_eval(const char *dir, int k, int normal, const float *h) {
    int64_t n = 65536;
    lf_ctx_options o;
    lf_ctx_options_init(&o);
    o.backend = LF_BACKEND_CPU;
    o.threads = 2;
    o.cache_dir = dir;
    lf_ctx *c = lf_ctx_new(&o);
    if (!c) return fprintf(stderr, "lf_ctx_new: %s\n", lf_errmsg(NULL)), 1;
    double t0 = now();
    lf_graph *g = lf_graph_new(c);
    lf_buffer *xb = lf_buffer_new(c, LF_F32, 1, &n);
    lf_buffer_write(xb, h, (size_t)n * sizeof *h);
    lf_node *x = lf_input(g, xb);
    lf_node *z = normal ? lf_random(g, LF_F32, LF_RANDOM_NORMAL, 1, &n, 20140101) : x;
    lf_node *y = lf_add(g, x, lf_mul(g, lf_const(g, LF_F32, 0.1), z));
    for (int i = 0; i < k; i++) y = lf_map(g, lf_fn_parse(g, "(v) -> v * v + 1"), y);
    lf_buffer *out = lf_buffer_new_like(c, y);
    lf_status s = lf_eval(g, 1, &y, &out);
    double t1 = now();
    lf_eval_stats st;
    lf_ctx_last_stats(c, &st);
    if (s != LF_OK) fprintf(stderr, "lf_eval: %s\n", lf_errmsg(c));
    else
        printf("%-7s k=%d  first %7.1f ms  kernels compiled %d  compiler runs %d\n", normal ? "normal" : "plain", k,
               1e3 * (t1 - t0), st.kernels_compiled, st.compiler_runs);
    lf_graph_free(g);
    lf_ctx_destroy(c);
    return s != LF_OK;
}

int main(int argc, char **argv) {
    int K = argc > 1 ? atoi(argv[1]) : 4, bad = 0;
    char dir[] = "/tmp/lazyfuse-cold-random-XXXXXX";
    if (!mkdtemp(dir)) return perror("mkdtemp"), 1;
    float *h = calloc(65536, sizeof *h);
    for (int i = 0; h && i < 65536; i++) h[i] = (float)(i % 97) / 97.0f;
    for (int k = 0; h && k < K; k++) {
        bad |= first_eval(dir, k, 1, h);
        bad |= first_eval(dir, k, 0, h);
    }
    free(h);
    nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return bad || !h;
}
