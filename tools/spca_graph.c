/* tools/spca_graph.c: the seed talk's sparse PCA as one lazyfuse graph (see
 * spca.h and the header of tools/spca.c). The lines between the markers are
 * the whole of the lazyfuse code: the figure SPCA_GRAPH_LINES reports. */
#include "spca.h"

/* spca graph: begin */
lf_status spca_graph(lf_graph *g, lf_node *Vd, int64_t S, int64_t k, uint64_t seed, spca_nodes *o) {
    int64_t p = lf_node_dim(Vd, 0), d = lf_node_dim(Vd, 1);
    lf_node *C = lf_random(g, LF_F32, LF_RANDOM_NORMAL, 2, (int64_t[]){d, S}, seed);
    lf_node *norm = lf_sqrt(g, lf_reduce(g, LF_RED_SUM, lf_mul(g, C, C), 1, (int[]){0}, true));
    lf_node *Cn = lf_div(g, C, norm);                                      /* [d, S] */
    lf_node *prod = lf_mul(g, lf_expand_dims(g, Vd, 2), lf_expand_dims(g, Cn, 0)); /* [p, d, S] */
    lf_node *A = lf_reduce(g, LF_RED_SUM, prod, 1, (int[]){1}, false);     /* [p, S] */
    lf_node *vals = lf_topk(g, A, k, 0, true), *idx = lf_argtopk(g, A, k, 0, true); /* [k, S] */
    lf_node *val = lf_sqrt(g, lf_reduce(g, LF_RED_SUM, lf_mul(g, vals, vals), 1, (int[]){0}, false));
    lf_node *best = lf_reduce(g, LF_RED_ARGMAX, val, 0, NULL, false);     /* 0-d i64 */
    lf_node *vbest = lf_reduce(g, LF_RED_MAX, val, 0, NULL, false);       /* val[best] */
    lf_node *col = lf_reshape(g, best, 2, (int64_t[]){1, 1});              /* [1, 1] */
    lf_node *top_v = lf_gather(g, vals, 1, col), *top_i = lf_gather(g, idx, 1, col); /* [k, 1] */
    lf_node *zeros = lf_fill(g, LF_F32, 0.0, 1, &p);
    lf_node *opt_x = lf_scatter(g, LF_SCATTER_SET, zeros, 0, top_i, lf_div(g, top_v, vbest)); /* [p] */
    *o = (spca_nodes){C, opt_x, best, vbest};
    return lf_graph_status(g);
}
/* spca graph: end */
