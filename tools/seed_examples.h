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
     * examples (stencil9: of its output; its input has n + 8), the row
     * length of softmax_rows and layer_norm (4096 rows), the side of
     * matmul_zip_reduce (I = J = K = n) and of the other contraction cases
     * (batched_matmul: 8 products of side n/2), and of conv3x3's output (its input is n + 2 square). Stores the outputs into outs and
     * returns how many, or 0 on failure (lf_errmsg(ctx) says why). */
    int (*build)(lf_ctx *ctx, lf_graph *g, int64_t n, lf_node **outs);
} seed_example;

extern const seed_example seed_examples[];
extern const int seed_nexamples;

/* Issue 16's row and contraction cases (layer_norm, matmul_bias_relu,
 * matmul_scaled, batched_matmul, matvec): built like the others, but kept
 * out of seed_examples[], whose every entry the tests build at sizes meant
 * for elementwise cases. */
extern const seed_example seed_more_examples[];
extern const int seed_nmore_examples;

/* The example called name (in either table), or NULL. */
const seed_example *seed_find(const char *name);

/* The values of an example's f32 input: n of them, uniform in [lo, hi) from
 * a fixed sequence named by seed (what the builders bind), so a program can
 * recompute an example with a plain loop (lazyfuse-bench's stencil checks). */
void seed_fill_f32(float *host, int64_t n, float lo, float hi, uint32_t seed);

/* stencil9 and conv3x3 read their input x filled by seed_fill_f32 with
 * these; conv3x3's weights, row-major over the 3x3 taps, are lf_consts. */
#define SEED_STENCIL9_X 37   /* seed of stencil9's x, in [-1, 1) */
#define SEED_CONV3X3_X 41    /* seed of conv3x3's x, in [-1, 1) */
/* issue 30's cases (seed_more_examples): seeds of their inputs, in [-1, 1)
 * unless said; the embedding table's shape; k-means' dims and centres */
#define SEED_STENCIL5X5_X 79
#define SEED_CONV1D_X 83
#define SEED_BINCOUNT2_X 89  /* in [0, 1) */
#define SEED_EMBED_TABLE 97
#define SEED_EMBED_IDX 11    /* input_index's seed (uniform in 0..ROWS-1) */
#define SEED_EMBED_ROWS 4096
#define SEED_EMBED_DIM 64
#define SEED_KMEANS_X 101
#define SEED_KMEANS_C 103
#define SEED_KMEANS_D 16
#define SEED_KMEANS_K 16
/* The wide stencils' weight t of taps: (t + 1) / (taps (taps + 1) / 2). */
float seed_stencil_weight(int t, int taps);
extern const float seed_conv3x3_w[9];

/* layer_norm: x [4096, n] in [LO, HI), gamma [n] in [0.5, 1.5), beta [n] in
 * [-1, 1), each filled by seed_fill_f32 with these seeds. */
#define SEED_LAYER_NORM_X 67
#define SEED_LAYER_NORM_X_LO -4.0f
#define SEED_LAYER_NORM_X_HI 4.0f
#define SEED_LAYER_NORM_GAMMA 71
#define SEED_LAYER_NORM_BETA 73
/* The contraction cases (matmul_bias_relu, matmul_scaled, batched_matmul,
 * matvec): A and B in [-1, 1) with matmul_zip_reduce's seeds, bias and x in
 * [-1, 1), the row scale s in [0.5, 1.5). */
#define SEED_MATMUL_A 10
#define SEED_MATMUL_B 11
#define SEED_MATMUL_BIAS 79
#define SEED_MATMUL_SCALE 83
#define SEED_MATVEC_X 89
/* batched_matmul: SEED_BATCH products of seed_batched_side(n) square matrices */
#define SEED_BATCH 8
static inline int64_t seed_batched_side(int64_t n) { return n / 2 > 0 ? n / 2 : 1; }

#endif
