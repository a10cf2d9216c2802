/* tools/spca.h: the seed talk's sparse PCA (spca_unopt), as a lazyfuse graph
 * (spca_graph.c) and in plain C (spca_ref.c), shared by lazyfuse-spca
 * (tools/spca.c) and lazyfuse-bench's spca case.
 *
 * spca_ref is the hand-written reference that tools/spca.c checks lazyfuse against and
 * that lazyfuse-bench's spca case times (with 2 threads). It takes the
 * samples C [d, S] (row-major: C[j*S + s] is coordinate j of sample s) that
 * lazyfuse's lf_random node made, so both run on the same numbers, and
 * follows the graph's arithmetic: float32 values, products in float, sums of
 * float products in double rounded once to float (lazyfuse's reductions),
 * sqrt and division in float. Per sample s:
 *     c = C[:, s] / sqrt(sum_j C[j, s]^2)
 *     a = Vd @ c                                  (p values, kept in scratch)
 *     I = the k largest entries of a, largest first, ties to the lower index
 *     val[s] = sqrt(sum over I of a_i^2)
 * best = the first s of the largest val (the seed's strict >), and
 * opt_x = zeros(p) with opt_x[I] = a[I] / val[best] for that sample.
 * Built with -O3 -march=native -ffp-contract=off (tools/meson.build).
 */
#ifndef LF_SPCA_H
#define LF_SPCA_H

#include "lazyfuse.h"

#include <stdint.h>

#define SPCA_VD_SEED 61   /* Vd [p, d]: seed_fill_f32(.., -1, 1, SPCA_VD_SEED) */
/* Lines of lazyfuse code in spca_graph (spca_graph.c, between its markers;
 * the spca-lines test in tools/meson.build checks the figure). */
#define SPCA_GRAPH_LINES 18

/* The nodes spca_graph makes. */
typedef struct spca_nodes {
    lf_node *C;      /* the samples [d, S] f32 (evaluated alone, they feed spca_ref) */
    lf_node *opt_x;  /* [p] f32 */
    lf_node *best;   /* 0-d i64 */
    lf_node *val;    /* 0-d f32: val[best] */
} spca_nodes;

/* Builds the seed's spca_unopt over S normal samples (lf_random f32, seed)
 * of Vd [p, d] (an f32 node, usually an input) into g: see tools/spca.c.
 * LF_OK, or the graph's first error. */
lf_status spca_graph(lf_graph *g, lf_node *Vd, int64_t S, int64_t k, uint64_t seed, spca_nodes *o);

typedef struct spca_ref_result {
    int64_t best;  /* sample index of the largest val (the first one) */
    float val;     /* val[best] */
} spca_ref_result;

/* Runs the algorithm above on nthreads threads (1: the calling thread; more:
 * pthreads over contiguous ranges of samples, each keeping its own best,
 * merged in range order so the result equals the 1-thread one). Vd is
 * [p, d] row-major, C [d, S]; opt_x gets p floats. k must be 1..p; S >= 1.
 * Returns 0, or -1 when memory or threads cannot be had. */
int spca_ref(const float *Vd, const float *C, int64_t p, int d, int64_t S, int k, int nthreads,
             float *opt_x, spca_ref_result *out);

#endif /* LF_SPCA_H */
