/* tests/randgraph.h: random lazyfuse graphs for differential tests.
 *
 * gen_graph builds one random DAG (mixed ops and dtypes, broadcasting,
 * views with transposes and negative-step slices, reductions with keepdims,
 * shared nodes, several outputs, NaN/Inf inputs, zero-size and odd shapes,
 * softmax-, layer-norm- and three-pass-like row patterns, sibling
 * reductions, pads and concatenations with fused consumers) from a private
 * generator, so one graph replays alone from (seed, index). Used by test_fusion (fused/unfused vs the reference) and
 * test_cuda_codegen (CUDA kernels compiled and emulated).
 */
#ifndef LF_TEST_RANDGRAPH_H
#define LF_TEST_RANDGRAPH_H

#include "lazyfuse.h"

#include <stdbool.h>
#include <stdint.h>

/* A private generator per graph (splitmix64). */
typedef struct rng {
    uint64_t s;
} rng;

enum { POOL = 48 };

typedef struct gen {
    rng r;
    lf_ctx *ctx;
    lf_graph *g;
    lf_node *pool[POOL];
    int n;
    bool exponent_class_changed; /* set by gen_scalar_update: a constant read
                                    as a float ** exponent got a value of
                                    another class (graph_pow_exponent_class),
                                    so the next eval may replan and compile */
} gen;

/* Graph number `index` of a run seeded with `seed`: makes G->g, a new graph
 * of ctx (the caller frees it), builds it from G's own generator, stores
 * 1..3 outputs into outs and returns how many. */
int gen_graph(gen *G, lf_ctx *ctx, uint64_t seed, int index, lf_node **outs);

/* After gen_graph: gives some of G->g's constants (lf_const, lf_fill) a new
 * value with lf_scalar_set (drawn from the same special values, NaN, Inf and
 * -0.0 included) from G's generator; returns how many it changed, and sets
 * G->exponent_class_changed when one was an exponent whose class changed. */
int gen_scalar_update(gen *G);

/* lf_reduce over axes, reshaped back to x's rank when !keep (the
 * "reduce -> broadcast -> map" shape of softmax and layer norm either way). */
lf_node *row_reduce(lf_graph *g, lf_reduce_op op, lf_node *x, int na, const int *axes, bool keep);

#endif
