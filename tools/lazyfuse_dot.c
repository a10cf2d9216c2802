/* tools/lazyfuse_dot.c: lazyfuse-dot, the graph visualizer's command line.
 *
 *   lazyfuse-dot [--out DIR] [--n N] [--no-svg] [NAME... | all]
 *
 * Builds each seed example (tools/seed_examples.c) and writes two Graphviz
 * files into DIR (default "."): NAME.graph.dot (the graph as built) and
 * NAME.fused.dot (the fused plan, each kernel a cluster). When Graphviz's
 * `dot` is on PATH, each is also rendered to .svg. It then evaluates the
 * example once at a small size with fusion on and off and prints kernels and
 * bytes of temporaries for both, so the plan can be read as numbers too.
 * Exit status: 0 on success, 1 if anything failed, 2 for a bad command line.
 */
#include "lazyfuse.h"
#include "seed_examples.h"

#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

extern char **environ;

static int usage(void) {
    fprintf(stderr, "usage: lazyfuse-dot [--out DIR] [--n N] [--no-svg] [NAME... | all]\nexamples:");
    for (int i = 0; i < seed_nexamples; i++) fprintf(stderr, " %s", seed_examples[i].name);
    fprintf(stderr, "\n");
    return 2;
}

/* Runs argv (PATH lookup); returns its exit status, or -1 if it could not start. */
static int run(char *const argv[]) {
    pid_t pid;
    if (posix_spawnp(&pid, argv[0], NULL, NULL, argv, environ) != 0) return -1;
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static bool have_dot(void) {
    char *argv[] = {"dot", "-V", NULL};
    FILE *null = freopen("/dev/null", "a", stderr) ? stderr : NULL; /* dot -V prints on stderr */
    int rc = run(argv);
    if (null) (void)!freopen("/dev/tty", "a", stderr);
    return rc == 0;
}

/* Writes one view of ex (size n) into path; returns 0 on success. */
static int write_view(const seed_example *ex, int64_t n, lf_dot_mode mode, const char *path) {
    lf_ctx *ctx = lf_ctx_new(NULL);
    if (!ctx) return fprintf(stderr, "lazyfuse-dot: %s\n", lf_errmsg(NULL)), 1;
    lf_graph *g = lf_graph_new(ctx);
    lf_node *outs[SEED_MAX_OUTS];
    int nout = g ? ex->build(ctx, g, n, outs) : 0;
    int rc = 1;
    FILE *f = nout ? fopen(path, "w") : NULL;
    if (!nout) fprintf(stderr, "lazyfuse-dot: %s: %s\n", ex->name, lf_errmsg(ctx));
    else if (!f) fprintf(stderr, "lazyfuse-dot: %s: %s\n", path, strerror(errno));
    else if (lf_dump_dot(g, nout, outs, mode, f) != LF_OK)
        fprintf(stderr, "lazyfuse-dot: %s: %s\n", ex->name, lf_errmsg(ctx));
    else rc = 0;
    if (f && fclose(f) != 0) rc = 1;
    lf_ctx_destroy(ctx);
    return rc;
}

/* Evaluates ex at a small size with fusion on or off; fills *st. */
static int small_eval(const seed_example *ex, bool fusion, lf_eval_stats *st) {
    lf_ctx_options o;
    lf_ctx_options_init(&o);
    o.fusion = fusion;
    lf_ctx *ctx = lf_ctx_new(&o);
    if (!ctx) return 1;
    lf_graph *g = lf_graph_new(ctx);
    lf_node *outs[SEED_MAX_OUTS];
    int64_t n = strcmp(ex->name, "matmul_zip_reduce") == 0 ? 16 : 64;
    int nout = g ? ex->build(ctx, g, n, outs) : 0;
    lf_buffer *dst[SEED_MAX_OUTS] = {NULL};
    for (int i = 0; i < nout; i++) dst[i] = lf_buffer_new_like(ctx, outs[i]);
    int rc = nout && lf_eval(g, nout, outs, dst) == LF_OK && lf_ctx_last_stats(ctx, st) == LF_OK ? 0 : 1;
    if (rc) fprintf(stderr, "lazyfuse-dot: %s: %s\n", ex->name, lf_errmsg(ctx));
    lf_ctx_destroy(ctx);
    return rc;
}

int main(int argc, char **argv) {
    const char *dir = ".";
    int64_t n = 0;
    bool svg = true;
    const seed_example *todo[64];
    int ntodo = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--out") == 0 && i + 1 < argc) dir = argv[++i];
        else if (strcmp(argv[i], "--n") == 0 && i + 1 < argc) {
            char *end;
            n = strtoll(argv[++i], &end, 10);
            if (*end || n < 1) return usage();
        } else if (strcmp(argv[i], "--no-svg") == 0) svg = false;
        else if (strcmp(argv[i], "all") == 0)
            for (int k = 0; k < seed_nexamples && ntodo < 64; k++) todo[ntodo++] = &seed_examples[k];
        else if (seed_find(argv[i]) && ntodo < 64) todo[ntodo++] = seed_find(argv[i]);
        else return usage();
    }
    if (ntodo == 0)
        for (int k = 0; k < seed_nexamples; k++) todo[ntodo++] = &seed_examples[k];
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "lazyfuse-dot: %s: %s\n", dir, strerror(errno));
        return 1;
    }
    svg = svg && have_dot();
    int failed = 0;
    printf("%-18s %8s %8s %12s %12s\n", "example", "kernels", "unfused", "temp bytes", "unfused");
    for (int t = 0; t < ntodo; t++) {
        const seed_example *ex = todo[t];
        static const char *const views[2] = {"graph", "fused"};
        for (int v = 0; v < 2; v++) {
            char path[4096], svgpath[4096];
            snprintf(path, sizeof path, "%s/%s.%s.dot", dir, ex->name, views[v]);
            if (write_view(ex, n ? n : ex->default_n, v ? LF_DOT_FUSED : LF_DOT_GRAPH, path)) {
                failed = 1;
                continue;
            }
            if (svg) {
                snprintf(svgpath, sizeof svgpath, "%s/%s.%s.svg", dir, ex->name, views[v]);
                char *dargv[] = {"dot", "-Tsvg", path, "-o", svgpath, NULL};
                if (run(dargv) != 0) {
                    fprintf(stderr, "lazyfuse-dot: dot failed on %s\n", path);
                    failed = 1;
                }
            }
        }
        lf_eval_stats on, off;
        if (small_eval(ex, true, &on) || small_eval(ex, false, &off)) {
            failed = 1;
            continue;
        }
        printf("%-18s %8d %8d %12zu %12zu\n", ex->name, on.kernels, off.kernels,
               on.bytes_materialized, off.bytes_materialized);
    }
    printf("(kernels and temporaries from one eval at a small size: 64 elements per row or"
           " vector, 16 for matmul; files in %s%s)\n", dir, svg ? ", with SVG" : "");
    return failed;
}
