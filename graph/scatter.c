/* graph/scatter.c: lf_scatter and lf_bincount, their geometry, combine
 * order and index check, shared by every evaluator.
 *
 * A scatter node has inputs dst, idx (i32 or i64) and values, an axis and
 * an op; its value has dst's dtype and shape. Its positions S are dst's
 * shape with the axis extent that idx and values broadcast to (a 1-d dst:
 * the broadcast shape of idx and values, any rank). The combine order is
 * lazyfuse.h's: SET keeps the highest position; the other ops fold blocks
 * of LF_SCATTER_BLOCK positions (dst of at most LF_SCATTER_SMALL elements;
 * else one block) into partials from the identity, then dst (+) part_0 (+)
 * part_1 ... . graph_eval_scatter is that order written plainly; the
 * kernels follow it (fusion/plan_scatter.c, the skeletons in codegen/).
 * A bincount is a scatter ADD whose node says nonneg: a negative index is
 * out of range there (np.bincount), never counted from the end; every
 * evaluator checks it (graph_scatter_check, fusion/interp.c, codegen/emit.c).
 */
#include "graph/graph.h"

#include <math.h>
#include <string.h>

lf_node *lf_scatter(lf_graph *g, lf_scatter_op op, lf_node *dst, int axis, lf_node *idx, lf_node *values) {
    lf_node *in[3] = {dst, idx, values};
    if (!graph_check_args(g, "scatter", 3, in)) return NULL;
    if ((unsigned)op > LF_SCATTER_PROD) {
        graph_fail(g, LF_ERR_INVALID, "scatter: unknown op %d", (int)op);
        return NULL;
    }
    if (axis < -dst->ndim || axis >= dst->ndim || dst->ndim == 0) {
        graph_fail(g, LF_ERR_AXIS, "scatter: axis %d out of range for %d dimensions", axis, dst->ndim);
        return NULL;
    }
    if (axis < 0) axis += dst->ndim;
    if (!graph_dtype_is_int(idx->dtype)) {
        graph_fail(g, LF_ERR_DTYPE, "scatter: index dtype %s is not an integer dtype (i32 or i64)",
                   lf_dtype_name(idx->dtype));
        return NULL;
    }
    if (dst->dtype > LF_F64) { /* the dtypes appended later: scatter's combine is not written for them yet */
        graph_fail(g, LF_ERR_DTYPE, "scatter: dtype %s is not supported (bool, i32, i64, f32, f64)",
                   lf_dtype_name(dst->dtype));
        return NULL;
    }
    if (dst->dtype == LF_BOOL && (op == LF_SCATTER_ADD || op == LF_SCATTER_PROD)) {
        graph_fail(g, LF_ERR_DTYPE, "scatter: %s into a bool array", op == LF_SCATTER_ADD ? "add" : "prod");
        return NULL;
    }
    char a[160], b[160], c[160];
    int sn;
    int64_t ss[LF_MAX_DIMS];
    if (dst->ndim == 1) {
        if (!graph_broadcast_shapes(idx->ndim, idx->shape, values->ndim, values->shape, &sn, ss)) {
            graph_fail(g, LF_ERR_SHAPE, "scatter: values %s do not broadcast against the index %s",
                       graph_shape_str(a, sizeof a, values->ndim, values->shape),
                       graph_shape_str(b, sizeof b, idx->ndim, idx->shape));
            return NULL;
        }
    } else {
        if (idx->ndim != dst->ndim) {
            graph_fail(g, LF_ERR_SHAPE, "scatter: index shape %s has %d dimensions, dst %s has %d",
                       graph_shape_str(a, sizeof a, idx->ndim, idx->shape), idx->ndim,
                       graph_shape_str(b, sizeof b, dst->ndim, dst->shape), dst->ndim);
            return NULL;
        }
        sn = dst->ndim;
        for (int d = 0; d < sn; d++) {
            if (d != axis && idx->shape[d] != dst->shape[d] && idx->shape[d] != 1) {
                graph_fail(g, LF_ERR_SHAPE, "scatter: index shape %s does not broadcast to dst %s on axis %d (axis %d is scattered)",
                           graph_shape_str(a, sizeof a, idx->ndim, idx->shape),
                           graph_shape_str(b, sizeof b, dst->ndim, dst->shape), d, axis);
                return NULL;
            }
            ss[d] = d == axis ? idx->shape[d] : dst->shape[d];
        }
        /* the axis extent: idx's and values' broadcast */
        if (values->ndim == sn && values->shape[axis] != 1 && ss[axis] == 1) ss[axis] = values->shape[axis];
        int on;
        int64_t os[LF_MAX_DIMS];
        bool ok = graph_broadcast_shapes(values->ndim, values->shape, sn, ss, &on, os) && on == sn &&
                  !memcmp(os, ss, (size_t)sn * sizeof *ss);
        if (!ok) {
            graph_fail(g, LF_ERR_SHAPE, "scatter: values %s do not broadcast to the positions %s (index %s)",
                       graph_shape_str(a, sizeof a, values->ndim, values->shape), graph_shape_str(b, sizeof b, sn, ss),
                       graph_shape_str(c, sizeof c, idx->ndim, idx->shape));
            return NULL;
        }
    }
    return graph_new_scatter(g, op, dst, axis, idx, values);
}

lf_node *lf_bincount(lf_graph *g, lf_node *idx, lf_node *weights, int64_t nbins) {
    lf_node *in[2] = {idx, weights};
    if (!graph_check_args(g, "bincount", weights ? 2 : 1, in)) return NULL;
    if (nbins < 0) {
        graph_fail(g, LF_ERR_SHAPE, "bincount: nbins %lld is negative", (long long)nbins);
        return NULL;
    }
    if (!graph_dtype_is_int(idx->dtype)) {
        graph_fail(g, LF_ERR_DTYPE, "bincount: index dtype %s is not an integer dtype (i32 or i64)",
                   lf_dtype_name(idx->dtype));
        return NULL;
    }
    lf_dtype t = !weights || weights->dtype == LF_BOOL ? LF_I64 : weights->dtype;
    lf_node *zeros = lf_fill(g, t, 0, 1, &nbins);
    lf_node *w = weights ? weights : lf_fill(g, LF_I64, 1, 0, NULL);
    if (!zeros || !w) return NULL;
    lf_node *n = lf_scatter(g, LF_SCATTER_ADD, zeros, 0, idx, w);
    if (n) n->u.scatter.nonneg = true; /* np.bincount refuses negative values */
    return n;
}

void graph_scatter_geom_of(const lf_node *n, graph_scatter_geom *gm) {
    const lf_node *dst = n->inputs[0], *idx = n->inputs[1], *val = n->inputs[2];
    int axis = n->u.scatter.axis;
    memset(gm, 0, sizeof *gm);
    if (dst->ndim == 1) {
        graph_broadcast_shapes(idx->ndim, idx->shape, val->ndim, val->shape, &gm->ndim, gm->shape);
    } else {
        gm->ndim = dst->ndim;
        for (int d = 0; d < dst->ndim; d++) gm->shape[d] = d == axis ? idx->shape[d] : dst->shape[d];
        if (val->ndim == dst->ndim && val->shape[axis] != 1 && gm->shape[axis] == 1) gm->shape[axis] = val->shape[axis];
    }
    gm->numel = 1;
    for (int d = 0; d < gm->ndim; d++) gm->numel *= gm->shape[d];
    graph_broadcast_strides(idx->ndim, idx->shape, gm->ndim, gm->shape, gm->idx_strides);
    graph_broadcast_strides(val->ndim, val->shape, gm->ndim, gm->shape, gm->val_strides);
    int64_t ds[LF_MAX_DIMS];
    graph_contiguous_strides(dst->ndim, dst->shape, ds);
    gm->dst_axis_stride = ds[axis];
    gm->dst_extent = dst->shape[axis];
    if (dst->ndim > 1)
        for (int d = 0; d < dst->ndim; d++) gm->dst_strides[d] = d == axis ? 0 : ds[d];
    bool small = dst->numel <= LF_SCATTER_SMALL && n->u.scatter.op != LF_SCATTER_SET;
    gm->block = small ? LF_SCATTER_BLOCK : (gm->numel > 0 ? gm->numel : 1);
    gm->nblocks = (gm->numel + gm->block - 1) / gm->block;
}

lf_scalar graph_scatter_identity(lf_scatter_op op, lf_dtype t) {
    lf_scalar v;
    bool f = graph_dtype_is_float(t);
    switch (op) {
    case LF_SCATTER_ADD:
        if (f) v.f = -0.0;
        else v.i = 0;
        break;
    case LF_SCATTER_PROD:
        if (f) v.f = 1.0;
        else v.i = 1;
        break;
    case LF_SCATTER_MIN:
        if (f) v.f = INFINITY;
        else v.i = graph_dtype_int_max(t);
        break;
    case LF_SCATTER_MAX:
        if (f) v.f = -INFINITY;
        else v.i = graph_dtype_int_min(t);
        break;
    default: v.i = 0; break;
    }
    return v;
}

lf_scalar graph_scatter_combine(lf_scatter_op op, lf_dtype t, lf_scalar a, lf_scalar b) {
    lf_scalar r;
    if (t == LF_F32) {
        float x = (float)a.f, y = (float)b.f, z;
        switch (op) {
        case LF_SCATTER_ADD: z = x + y; break;
        case LF_SCATTER_PROD: z = x * y; break;
        case LF_SCATTER_MIN: z = x != x ? x : y != y ? y : y < x ? y : x; break;
        case LF_SCATTER_MAX: z = x != x ? x : y != y ? y : y > x ? y : x; break;
        default: z = y; break;
        }
        r.f = z;
        return r;
    }
    if (t == LF_F64) {
        double x = a.f, y = b.f;
        switch (op) {
        case LF_SCATTER_ADD: r.f = x + y; break;
        case LF_SCATTER_PROD: r.f = x * y; break;
        case LF_SCATTER_MIN: r.f = x != x ? x : y != y ? y : y < x ? y : x; break;
        case LF_SCATTER_MAX: r.f = x != x ? x : y != y ? y : y > x ? y : x; break;
        default: r.f = y; break;
        }
        return r;
    }
    int64_t x = a.i, y = b.i;
    switch (op) {
    case LF_SCATTER_ADD: r.i = (int64_t)((uint64_t)x + (uint64_t)y); break;
    case LF_SCATTER_PROD: r.i = (int64_t)((uint64_t)x * (uint64_t)y); break;
    case LF_SCATTER_MIN: r.i = y < x ? y : x; break;
    case LF_SCATTER_MAX: r.i = y > x ? y : x; break;
    default: r.i = y; break;
    }
    if (t == LF_I32) r.i = (int32_t)(uint32_t)(uint64_t)r.i;
    return r;
}

/* Advances pos over shape (row-major); idx/val/dst offsets follow. */
static void next_pos(const graph_scatter_geom *gm, int64_t *pos) {
    for (int d = gm->ndim - 1; d >= 0; d--) {
        if (++pos[d] < gm->shape[d]) return;
        pos[d] = 0;
    }
}

/* The index check alone (used after a kernel raised its flag). */
static lf_status graph_scatter_check(const lf_node *n, const void *idx) {
    graph_scatter_geom gm;
    graph_scatter_geom_of(n, &gm);
    lf_dtype it = n->inputs[1]->dtype;
    int64_t pos[LF_MAX_DIMS] = {0};
    for (int64_t i = 0; i < gm.numel; i++, next_pos(&gm, pos)) {
        int64_t e = 0;
        for (int d = 0; d < gm.ndim; d++) e += pos[d] * gm.idx_strides[d];
        int64_t v = graph_scalar_load(idx, it, e).i;
        if (v < 0 && n->u.scatter.nonneg) {
            char ps[160], ns[GRAPH_NODE_STR_CAP];
            return graph_error(n->graph->ctx, LF_ERR_INDEX,
                               "%s: negative value %lld at position %s (bincount counts values 0 .. %lld)",
                               graph_node_str(n, ns, sizeof ns), (long long)v, graph_shape_str(ps, sizeof ps, gm.ndim, pos),
                               (long long)gm.dst_extent - 1);
        }
        if (graph_gather_wrap(v, gm.dst_extent) < 0) {
            char ps[160], ns[GRAPH_NODE_STR_CAP];
            return graph_error(n->graph->ctx, LF_ERR_INDEX,
                               "%s: index %lld out of range for axis %d of size %lld at position %s",
                               graph_node_str(n, ns, sizeof ns),
                               (long long)v, n->u.scatter.axis, (long long)gm.dst_extent,
                               graph_shape_str(ps, sizeof ps, gm.ndim, pos));
        }
    }
    return LF_OK;
}

lf_status graph_eval_scatter(const lf_node *n, const void *dst, const void *idx, const void *values, void *out) {
    lf_status st = graph_scatter_check(n, idx);
    if (st != LF_OK) return st;
    graph_scatter_geom gm;
    graph_scatter_geom_of(n, &gm);
    lf_scatter_op op = n->u.scatter.op;
    lf_dtype t = n->dtype, it = n->inputs[1]->dtype, vt = n->inputs[2]->dtype;
    int64_t dn = n->numel;
    for (int64_t j = 0; j < dn; j++) graph_scalar_store(out, t, j, graph_scalar_load(dst, t, j));
    lf_scalar *part = NULL;
    if (op != LF_SCATTER_SET && dn) {
        part = graph_malloc((size_t)dn * sizeof *part);
        char ns[GRAPH_NODE_STR_CAP];
        if (!part)
            return graph_error(n->graph->ctx, LF_ERR_NOMEM, "eval: out of memory in %s", graph_node_str(n, ns, sizeof ns));
    }
    int64_t pos[LF_MAX_DIMS] = {0};
    for (int64_t b = 0; b < gm.nblocks; b++) {
        lf_scalar id = graph_scatter_identity(op, t);
        if (part)
            for (int64_t j = 0; j < dn; j++) part[j] = id;
        int64_t hi = (b + 1) * gm.block < gm.numel ? (b + 1) * gm.block : gm.numel;
        for (int64_t i = b * gm.block; i < hi; i++, next_pos(&gm, pos)) {
            int64_t ie = 0, ve = 0, te = 0;
            for (int d = 0; d < gm.ndim; d++) {
                ie += pos[d] * gm.idx_strides[d];
                ve += pos[d] * gm.val_strides[d];
                te += pos[d] * gm.dst_strides[d];
            }
            te += graph_gather_wrap(graph_scalar_load(idx, it, ie).i, gm.dst_extent) * gm.dst_axis_stride;
            lf_scalar v = graph_scalar_convert(graph_scalar_load(values, vt, ve), vt, t);
            if (op == LF_SCATTER_SET) graph_scalar_store(out, t, te, v);
            else part[te] = graph_scatter_combine(op, t, part[te], v);
        }
        if (part)
            for (int64_t j = 0; j < dn; j++)
                graph_scalar_store(out, t, j, graph_scatter_combine(op, t, graph_scalar_load(out, t, j), part[j]));
    }
    graph_free(part);
    return LF_OK;
}
