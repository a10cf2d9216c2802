/* graph/gather.c: lf_gather (NumPy's take_along_axis and take) and lf_take
 * (NumPy's take along any axis), the gather geometry and its index check,
 * shared by every evaluator.
 *
 * A gather node has inputs x (inputs[0]) and idx (inputs[1], i32 or i64)
 * and an axis. Its shape is x's with the axis extent replaced by idx's and
 * the other axes broadcast against idx (a 1-d x: idx's shape, NumPy's
 * take). Output position pos reads idx at pos (broadcast) and x at pos with
 * the axis coordinate replaced by the index, wrapped as NumPy wraps negative
 * indices. A take node (u.gather.take, made by lf_take) is a gather whose
 * output axes are x's before the axis, then idx's, then x's after it; idx is
 * read on its own axes, x on the others: only graph_gather_geom_of knows,
 * every evaluator and the planner go through it.
 * An index out of range is an eval-time error, LF_ERR_INDEX,
 * reported for the lowest row-major output position (graph_gather_check):
 * the reference evaluator checks the whole node, and the kernels flag a bad
 * index as they meet it, never reading out of bounds, after which the host
 * finds the first one with this same function.
 */
#include "graph/graph.h"

#include <string.h>

lf_node *lf_gather(lf_graph *g, lf_node *x, int axis, lf_node *idx) {
    lf_node *in[2] = {x, idx};
    if (!graph_check_args(g, "gather", 2, in)) return NULL;
    if (axis < -x->ndim || axis >= x->ndim || x->ndim == 0) {
        graph_fail(g, LF_ERR_AXIS, "gather: axis %d out of range for %d dimensions", axis, x->ndim);
        return NULL;
    }
    if (axis < 0) axis += x->ndim;
    if (graph_dtype_is_complex(x->dtype)) { /* the kernels' out-of-range zero is not written for them */
        graph_fail(g, LF_ERR_DTYPE, "gather: dtype %s is not supported", lf_dtype_name(x->dtype));
        return NULL;
    }
    if (!graph_dtype_is_int(idx->dtype)) {
        graph_fail(g, LF_ERR_DTYPE, "gather: index dtype %s is not an integer dtype (i32 or i64)",
                   lf_dtype_name(idx->dtype));
        return NULL;
    }
    char a[160], b[160];
    int64_t shape[LF_MAX_DIMS];
    int ndim;
    if (x->ndim == 1) { /* take: idx's shape */
        ndim = idx->ndim;
        memcpy(shape, idx->shape, sizeof shape);
    } else {
        if (idx->ndim != x->ndim) {
            graph_fail(g, LF_ERR_SHAPE, "gather: index shape %s has %d dimensions, x %s has %d",
                       graph_shape_str(a, sizeof a, idx->ndim, idx->shape), idx->ndim,
                       graph_shape_str(b, sizeof b, x->ndim, x->shape), x->ndim);
            return NULL;
        }
        ndim = x->ndim;
        for (int d = 0; d < ndim; d++) {
            int64_t xe = x->shape[d], ie = idx->shape[d];
            if (d == axis) shape[d] = ie;
            else if (xe == ie || ie == 1) shape[d] = xe;
            else if (xe == 1) shape[d] = ie;
            else {
                graph_fail(g, LF_ERR_SHAPE,
                           "gather: index shape %s does not broadcast against x %s on axis %d (axis %d "
                           "is gathered)",
                           graph_shape_str(a, sizeof a, idx->ndim, idx->shape),
                           graph_shape_str(b, sizeof b, x->ndim, x->shape), d, axis);
                return NULL;
            }
        }
    }
    /* new_node is static in graph.c: go through a view-free path below */
    return graph_new_gather(g, x, axis, idx, ndim, shape, false);
}

lf_node *lf_take(lf_graph *g, lf_node *x, int axis, lf_node *idx) {
    lf_node *in[2] = {x, idx};
    if (!graph_check_args(g, "take", 2, in)) return NULL;
    if (axis < -x->ndim || axis >= x->ndim || x->ndim == 0) {
        graph_fail(g, LF_ERR_AXIS, "take: axis %d out of range for %d dimensions", axis, x->ndim);
        return NULL;
    }
    if (axis < 0) axis += x->ndim;
    if (graph_dtype_is_complex(x->dtype)) {
        graph_fail(g, LF_ERR_DTYPE, "take: dtype %s is not supported", lf_dtype_name(x->dtype));
        return NULL;
    }
    if (!graph_dtype_is_int(idx->dtype)) {
        graph_fail(g, LF_ERR_DTYPE, "take: index dtype %s is not an integer dtype (i32 or i64)",
                   lf_dtype_name(idx->dtype));
        return NULL;
    }
    int ndim = x->ndim - 1 + idx->ndim;
    if (ndim > LF_MAX_DIMS) {
        char a[160], b[160];
        graph_fail(g, LF_ERR_SHAPE, "take: x %s with index %s gives %d dimensions (at most %d)",
                   graph_shape_str(a, sizeof a, x->ndim, x->shape),
                   graph_shape_str(b, sizeof b, idx->ndim, idx->shape), ndim, LF_MAX_DIMS);
        return NULL;
    }
    int64_t shape[LF_MAX_DIMS];
    int k = 0;
    for (int d = 0; d < axis; d++) shape[k++] = x->shape[d];
    for (int d = 0; d < idx->ndim; d++) shape[k++] = idx->shape[d];
    for (int d = axis + 1; d < x->ndim; d++) shape[k++] = x->shape[d];
    return graph_new_gather(g, x, axis, idx, ndim, shape, true);
}

void graph_gather_geom_of(const lf_node *n, graph_gather_geom *gm) {
    const lf_node *x = n->inputs[0], *idx = n->inputs[1];
    int axis = n->u.gather.axis;
    int64_t xd[LF_MAX_DIMS], id[LF_MAX_DIMS];
    graph_contiguous_strides(x->ndim, x->shape, xd);
    graph_contiguous_strides(idx->ndim, idx->shape, id);
    memset(gm, 0, sizeof *gm);
    gm->x_axis_stride = xd[axis];
    gm->x_extent = x->shape[axis];
    if (n->u.gather.take) { /* output axes: x's before the axis, idx's, x's after */
        int m = idx->ndim;
        for (int d = 0; d < n->ndim; d++) {
            if (d < axis) gm->x_strides[d] = xd[d];
            else if (d < axis + m) gm->idx_strides[d] = id[d - axis];
            else gm->x_strides[d] = xd[d - m + 1];
        }
        return;
    }
    for (int d = 0; d < n->ndim; d++) {
        gm->idx_strides[d] = idx->shape[d] == 1 ? 0 : id[d];
        if (x->ndim > 1 && d != axis) gm->x_strides[d] = x->shape[d] == 1 ? 0 : xd[d];
    }
}

lf_status graph_gather_check(const lf_node *n, const void *idx) {
    graph_gather_geom gm;
    graph_gather_geom_of(n, &gm);
    lf_dtype it = n->inputs[1]->dtype;
    int64_t pos[LF_MAX_DIMS] = {0};
    for (int64_t i = 0; i < n->numel; i++) {
        int64_t e = 0;
        for (int d = 0; d < n->ndim; d++) e += pos[d] * gm.idx_strides[d];
        int64_t v = graph_scalar_load(idx, it, e).i;
        if (graph_gather_wrap(v, gm.x_extent) < 0) {
            char ps[160], ns[GRAPH_NODE_STR_CAP];
            return graph_error(n->graph->ctx, LF_ERR_INDEX,
                               "%s: index %lld out of range for axis %d of size %lld at position %s",
                               graph_node_str(n, ns, sizeof ns), (long long)v, n->u.gather.axis, (long long)gm.x_extent,
                               graph_shape_str(ps, sizeof ps, n->ndim, pos));
        }
        for (int d = n->ndim - 1; d >= 0; d--) {
            if (++pos[d] < n->shape[d]) break;
            pos[d] = 0;
        }
    }
    return LF_OK;
}

lf_status graph_eval_gather(const lf_node *n, const void *x, const void *idx, void *out) {
    lf_status st = graph_gather_check(n, idx);
    if (st != LF_OK) return st;
    graph_gather_geom gm;
    graph_gather_geom_of(n, &gm);
    lf_dtype it = n->inputs[1]->dtype;
    int64_t pos[LF_MAX_DIMS] = {0};
    for (int64_t i = 0; i < n->numel; i++) {
        int64_t ie = 0, xe = 0;
        for (int d = 0; d < n->ndim; d++) {
            ie += pos[d] * gm.idx_strides[d];
            xe += pos[d] * gm.x_strides[d];
        }
        int64_t t = graph_gather_wrap(graph_scalar_load(idx, it, ie).i, gm.x_extent);
        graph_scalar_store(out, n->dtype, i, graph_scalar_load(x, n->dtype, xe + t * gm.x_axis_stride));
        for (int d = n->ndim - 1; d >= 0; d--) {
            if (++pos[d] < n->shape[d]) break;
            pos[d] = 0;
        }
    }
    return LF_OK;
}
