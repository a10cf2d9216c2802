/* tools/seed_examples.h: the seed documents' example graphs, by name.
 *
 * Shared by lazyfuse-dot, the DOT test and the benchmarks, so every program
 * means the same graph by the same name. Each builder makes its input
 * buffers (filled with deterministic data in the example's natural range),
 * binds them into the graph and releases its own reference, so freeing the
 * graph (or the context) frees everything. Only the public API is used.
 */
#ifndef LF_SEED_EXAMPLES_H
#define LF_SEED_EXAMPLES_H

#include "lazyfuse.h"

#define SEED_MAX_OUTS 2

typedef struct seed_example {
    const char *name;     /* as given on command lines */
    const char *what;     /* one line: what it computes */
    int64_t default_n;    /* size parameter used by the tools (see build) */
    /* Builds the example into g. n is the element count of elementwise
     * examples, the row length of softmax_rows (4096 rows), and the side of
     * matmul_zip_reduce (I = J = K = n). Stores the outputs into outs and
     * returns how many, or 0 on failure (lf_errmsg(ctx) says why). */
    int (*build)(lf_ctx *ctx, lf_graph *g, int64_t n, lf_node **outs);
} seed_example;

extern const seed_example seed_examples[];
extern const int seed_nexamples;

/* The example called name, or NULL. */
const seed_example *seed_find(const char *name);

#endif
