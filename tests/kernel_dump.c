/* tests/kernel_dump.c: evaluates the seed examples, the bench's seed cases
 * and N random graphs (tests/randgraph.c) once each on one backend, so that
 * LF_DEBUG=source prints every kernel the eval pipeline emits. Not a test:
 * scripts/kernel-dump.sh runs it before and after a change that must not
 * change any emitted kernel, and diffs the texts.
 *
 *     kernel_dump cpu|cuda <fusion 0|1> <random graphs> <seed>
 *
 * For cuda, LF_CUDA_LIBRARY names the fake driver (build/tests/
 * fake_libcuda.so): its kernels run nothing, but every kernel is emitted
 * and compiled with the real NVRTC. An eval that fails is reported on
 * stdout and the run goes on (the text of the kernels emitted before the
 * failure is part of the dump either way).
 *
 * What must stay true: the graphs and their order depend only on the
 * arguments, so two runs over the same code print the same kernels.
 */
#include "randgraph.h"
#include "seed_examples.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int eval_outputs(lf_ctx *ctx, lf_graph *g, const char *name, int n, lf_node **outs) {
    lf_buffer *dst[8] = {NULL};
    int ok = 1;
    for (int i = 0; i < n && i < 8; i++) dst[i] = lf_buffer_new_like(ctx, outs[i]);
    fprintf(stderr, "/* ==== kernel_dump: %s ==== */\n", name);
    if (lf_eval(g, n, outs, dst) != LF_OK) {
        printf("%s: eval failed: %s\n", name, lf_errmsg(ctx));
        ok = 0;
    }
    for (int i = 0; i < n && i < 8; i++) lf_buffer_free(dst[i]);
    return ok;
}

static void run_examples(lf_ctx *ctx, const seed_example *ex, int count) {
    for (int e = 0; e < count; e++) {
        lf_graph *g = lf_graph_new(ctx);
        lf_node *outs[SEED_MAX_OUTS];
        int64_t n = ex[e].default_n > 256 ? 256 : ex[e].default_n; /* the kernel text does not depend on n */
        int nout = ex[e].build(ctx, g, n, outs);
        if (nout > 0) eval_outputs(ctx, g, ex[e].name, nout, outs);
        else printf("%s: build failed: %s\n", ex[e].name, lf_errmsg(ctx));
        lf_graph_free(g);
    }
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: kernel_dump cpu|cuda <fusion 0|1> <random graphs> <seed>\n");
        return 2;
    }
    lf_ctx_options o;
    lf_ctx_options_init(&o);
    o.backend = !strcmp(argv[1], "cuda") ? LF_BACKEND_CUDA : LF_BACKEND_CPU;
    o.fusion = atoi(argv[2]);
    o.compile = LF_COMPILE_REQUIRE;
    o.threads = 1;
    lf_ctx *ctx = lf_ctx_new(&o);
    if (!ctx) {
        fprintf(stderr, "kernel_dump: lf_ctx_new: %s\n", lf_errmsg(NULL));
        return 1;
    }
    run_examples(ctx, seed_examples, seed_nexamples);
    run_examples(ctx, seed_more_examples, seed_nmore_examples);
    int ngraphs = atoi(argv[3]);
    uint64_t seed = strtoull(argv[4], NULL, 0);
    for (int gi = 0; gi < ngraphs; gi++) {
        gen G;
        lf_node *outs[3];
        int nout = gen_graph(&G, ctx, seed, gi, outs);
        char name[64];
        snprintf(name, sizeof name, "random %d", gi);
        eval_outputs(ctx, G.g, name, nout, outs);
        lf_graph_free(G.g);
    }
    lf_ctx_destroy(ctx);
    return 0;
}
