/* graph/eval_ref.c: the reference evaluator, the oracle of every test.
 *
 * Naive on purpose: node by node in id order (a topological order), each
 * node materialized as a dense row-major host array, every element computed
 * through graph/scalar.c. Only nodes the outputs depend on are evaluated,
 * and an intermediate array is freed as soon as its last consumer has run.
 *
 * Reductions walk their input in row-major order and accumulate in double
 * (floating input, and mean of integers) or wrapping int64 (sum and prod of
 * integers), rounding once at the end, so results do not depend on anything
 * but the input. A contraction (graph/contract.c) evaluates its map's fn
 * again to fold the product's operands with fmaf in blocks, so it keeps the
 * map's inputs alive until it has run. Nothing here may change a buffer of
 * the caller: inputs are read in place, outputs go to fresh arrays that
 * lf_eval copies on success.
 */
#include "graph/graph.h"

#include <math.h>
#include <string.h>

/* ---- strided walk ------------------------------------------------------------ */

#define MAX_OPERANDS (LF_MAX_ARGS + 1)

/* Row-major walk over a shape, keeping one running element offset per
 * operand (each operand has its own strides over the walked axes). */
typedef struct walker {
    int ndim;                           /* axes walked */
    const int64_t *shape;               /* their extents */
    int64_t idx[LF_MAX_DIMS];           /* current multi-index */
    int nops;                           /* operands */
    int64_t off[MAX_OPERANDS];          /* current offset of each operand */
    int64_t strides[MAX_OPERANDS][LF_MAX_DIMS]; /* per operand, per axis */
} walker;

static void walk_start(walker *w, int ndim, const int64_t *shape, int nops) {
    memset(w, 0, sizeof *w);
    w->ndim = ndim;
    w->shape = shape;
    w->nops = nops;
}

/* Advances to the next element in row-major order. */
static void walk_next(walker *w) {
    for (int d = w->ndim - 1; d >= 0; d--) {
        for (int k = 0; k < w->nops; k++) w->off[k] += w->strides[k][d];
        if (++w->idx[d] < w->shape[d]) return;
        for (int k = 0; k < w->nops; k++) w->off[k] -= w->strides[k][d] * w->shape[d];
        w->idx[d] = 0;
    }
}

/* ---- one node ----------------------------------------------------------------- */

static void eval_const(const lf_node *n, void *out) {
    for (int64_t i = 0; i < n->numel; i++) graph_scalar_store(out, n->dtype, i, n->u.value);
}

static void eval_iota(const lf_node *n, void *out) {
    double start = n->u.iota.start, step = n->u.iota.step;
    /* integers with integral start and step are exact in int64 arithmetic */
    bool exact = !graph_dtype_is_float(n->dtype) && start == trunc(start) && step == trunc(step) &&
                 fabs(start) < 9e18 && fabs(step) < 9e18;
    for (int64_t i = 0; i < n->numel; i++) {
        lf_scalar v;
        if (exact) {
            v.i = (int64_t)((uint64_t)(int64_t)start + (uint64_t)i * (uint64_t)(int64_t)step);
            v = graph_scalar_convert(v, LF_I64, n->dtype);
        } else {
            v.f = start + (double)i * step;
            v = graph_scalar_convert(v, LF_F64, n->dtype);
        }
        graph_scalar_store(out, n->dtype, i, v);
    }
}

static void eval_random(const lf_node *n, void *out) {
    for (int64_t i = 0; i < n->numel; i++) graph_scalar_store(out, n->dtype, i, graph_random_value(n, i));
}

static void eval_view(const lf_node *n, const void *in, void *out) {
    size_t es = lf_dtype_size(n->dtype);
    if (n->u.view.remapped) { /* lf_pad, lf_concat: each coordinate remapped */
        int64_t pos[LF_MAX_DIMS] = {0};
        for (int64_t i = 0; i < n->numel; i++) {
            int64_t off = n->u.view.offset;
            for (int d = 0; d < n->ndim; d++)
                off += n->u.view.strides[d] *
                       graph_remap_coord(n->u.view.remap[d], pos[d], n->u.view.shift[d], n->u.view.ext[d]);
            memcpy((char *)out + (size_t)i * es, (const char *)in + (size_t)off * es, es);
            for (int d = n->ndim - 1; d >= 0 && ++pos[d] == n->shape[d]; d--) pos[d] = 0;
        }
        return;
    }
    walker w;
    walk_start(&w, n->ndim, n->shape, 1);
    w.off[0] = n->u.view.offset;
    memcpy(w.strides[0], n->u.view.strides, sizeof w.strides[0]);
    for (int64_t i = 0; i < n->numel; i++, walk_next(&w))
        memcpy((char *)out + (size_t)i * es, (const char *)in + (size_t)w.off[0] * es, es);
}

static void eval_map(const lf_node *n, const void *const *ins, lf_scalar *scratch, void *out) {
    const lf_fn *f = n->u.map.fn;
    lf_dtype params[LF_MAX_ARGS];
    walker w;
    walk_start(&w, n->ndim, n->shape, n->ninputs);
    for (int k = 0; k < n->ninputs; k++) {
        const lf_node *x = n->inputs[k];
        params[k] = x->dtype;
        graph_broadcast_strides(x->ndim, x->shape, n->ndim, n->shape, w.strides[k]);
    }
    lf_scalar args[LF_MAX_ARGS];
    for (int64_t i = 0; i < n->numel; i++, walk_next(&w)) {
        for (int k = 0; k < n->ninputs; k++) args[k] = graph_scalar_load(ins[k], params[k], w.off[k]);
        lf_scalar v = graph_fn_eval(f, params, n->u.map.etype, n->u.map.ctype, args, scratch);
        graph_scalar_store(out, n->dtype, i, v);
    }
}

static lf_status eval_reduce(const lf_node *n, const void *in, void *out) {
    const lf_node *x = n->inputs[0];
    lf_reduce_op op = n->u.reduce.op;
    lf_dtype acc_t = graph_red_acc_dtype(op, x->dtype);
    int64_t nout = n->numel;
    graph_red_acc *acc = graph_malloc((size_t)(nout ? nout : 1) * sizeof *acc);
    if (!acc) return LF_ERR_NOMEM;
    for (int64_t o = 0; o < nout; o++) graph_red_init(&acc[o], op, acc_t);
    /* strides over the input's axes: output offset (0 on reduced axes) and
       position inside the reduced set (row-major over the reduced axes) */
    walker w;
    walk_start(&w, x->ndim, x->shape, 2);
    int64_t ostride = 1, pstride = 1, count = 1;
    for (int d = x->ndim - 1; d >= 0; d--) {
        if (n->u.reduce.axes & (1u << d)) {
            w.strides[1][d] = pstride;
            pstride *= x->shape[d];
            count *= x->shape[d];
        } else {
            w.strides[0][d] = ostride;
            ostride *= x->shape[d];
        }
    }
    for (int64_t i = 0; i < x->numel; i++, walk_next(&w)) {
        lf_scalar v = graph_scalar_convert(graph_scalar_load(in, x->dtype, i), x->dtype, acc_t);
        graph_red_fold(&acc[w.off[0]], op, acc_t, v, w.off[1]);
    }
    for (int64_t o = 0; o < nout; o++)
        graph_scalar_store(out, n->dtype, o, graph_red_finish(&acc[o], op, acc_t, count, n->dtype));
    graph_free(acc);
    return LF_OK;
}

/* A contraction (graph/contract.c): the map's fn evaluated again at every
 * element of its space (row-major, so each output's positions come in
 * ascending order), its product's operands folded by graph_contract_fold.
 * mins are the map's inputs. */
static lf_status eval_contraction(const lf_node *n, const graph_contract *c, const void *const *mins,
                                  lf_scalar *scratch, void *out) {
    const lf_node *m = c->map;
    const lf_fn *f = m->u.map.fn;
    int64_t nout = n->numel;
    graph_contract_acc *acc = graph_malloc((size_t)(nout ? nout : 1) * sizeof *acc);
    if (!acc) return LF_ERR_NOMEM;
    for (int64_t o = 0; o < nout; o++) graph_contract_init(&acc[o]);
    lf_dtype params[LF_MAX_ARGS];
    walker w;
    walk_start(&w, m->ndim, m->shape, m->ninputs + 1);
    int ko = m->ninputs; /* operand ko: the output element */
    for (int k = 0; k < m->ninputs; k++) {
        params[k] = m->inputs[k]->dtype;
        graph_broadcast_strides(m->inputs[k]->ndim, m->inputs[k]->shape, m->ndim, m->shape, w.strides[k]);
    }
    int64_t ostride = 1;
    for (int d = m->ndim - 1; d >= 0; d--)
        if (d != c->axis) {
            w.strides[ko][d] = ostride;
            ostride *= m->shape[d];
        }
    lf_scalar args[LF_MAX_ARGS];
    for (int64_t i = 0; i < m->numel; i++, walk_next(&w)) {
        for (int k = 0; k < m->ninputs; k++) args[k] = graph_scalar_load(mins[k], params[k], w.off[k]);
        graph_fn_eval(f, params, m->u.map.etype, m->u.map.ctype, args, scratch);
        graph_contract_fold(&acc[w.off[ko]], (float)scratch[c->x].f, (float)scratch[c->y].f);
    }
    for (int64_t o = 0; o < nout; o++) ((float *)out)[o] = graph_contract_finish(&acc[o]);
    graph_free(acc);
    return LF_OK;
}

/* Each row along the axis in the blocked order of lazyfuse.h (graph_scan_step). */
static void eval_scan(const lf_node *n, const void *in, void *out) {
    const lf_node *x = n->inputs[0];
    int ax = n->u.scan.axis;
    int64_t len = n->shape[ax], inner = 1;
    for (int d = ax + 1; d < n->ndim; d++) inner *= n->shape[d];
    int64_t rows = len && inner ? n->numel / len : 0;
    lf_dtype acc_t = graph_red_acc_dtype(n->u.scan.op, x->dtype);
    for (int64_t r = 0; r < rows; r++) {
        int64_t base = (r / inner) * len * inner + r % inner;
        graph_scan_state st;
        graph_scan_start(&st, n->u.scan.op, x->dtype, n->u.scan.exclusive);
        for (int64_t i = 0; i < len; i++) {
            int64_t at = base + i * inner;
            lf_scalar v = graph_scalar_convert(graph_scalar_load(in, x->dtype, at), x->dtype, acc_t);
            graph_scalar_store(out, n->dtype, at, graph_scan_step(&st, v, n->dtype));
        }
    }
}

/* ---- the driver ------------------------------------------------------------------- */

lf_status graph_eval_reference(lf_graph *g, int n, lf_node *const *outs, void **results) {
    lf_ctx *ctx = g->ctx;
    int nn = g->nnodes;
    lf_status st = LF_OK;
    int *uses = graph_calloc((size_t)nn, sizeof *uses);   /* consumers still to run; -1 unneeded */
    void **vals = graph_calloc((size_t)nn, sizeof *vals); /* dense value of each node */
    bool *owned = graph_calloc((size_t)nn, sizeof *owned);
    int maxexprs = 1;
    for (int i = 0; i < nn; i++)
        if (g->nodes[i]->kind == NODE_MAP && g->nodes[i]->u.map.fn->nexprs > maxexprs)
            maxexprs = g->nodes[i]->u.map.fn->nexprs;
    lf_scalar *scratch = graph_malloc((size_t)maxexprs * sizeof *scratch);
    if (!uses || !vals || !owned || !scratch) {
        st = graph_error(ctx, LF_ERR_NOMEM, "eval: out of memory");
        goto done;
    }
    /* needed nodes, and how many needed consumers each has; outputs get one
       extra use so they survive to the end */
    bool *needed = owned; /* reuse as scratch before evaluation starts */
    for (int i = 0; i < n; i++) {
        needed[outs[i]->id] = true;
        uses[outs[i]->id]++;
    }
    for (int id = nn - 1; id >= 0; id--) {
        if (!needed[id]) continue;
        const lf_node *node = g->nodes[id];
        for (int k = 0; k < node->ninputs; k++) {
            needed[node->inputs[k]->id] = true;
            uses[node->inputs[k]->id]++;
        }
        graph_contract c; /* a contraction reads its map's inputs too */
        if (graph_contraction(node, &c))
            for (int k = 0; k < c.map->ninputs; k++) {
                needed[c.map->inputs[k]->id] = true;
                uses[c.map->inputs[k]->id]++;
            }
    }
    for (int id = 0; id < nn; id++) {
        if (!needed[id]) uses[id] = -1;
        needed[id] = false; /* back to meaning "owned" */
    }
    for (int id = 0; id < nn && st == LF_OK; id++) {
        if (uses[id] < 0) continue;
        const lf_node *node = g->nodes[id];
        if (node->kind == NODE_INPUT) {
            vals[id] = node->u.buffer->data;
            continue;
        }
        size_t bytes = (size_t)node->numel * lf_dtype_size(node->dtype);
        void *out = graph_malloc(bytes ? bytes : 1);
        if (!out) {
            char ns[GRAPH_NODE_STR_CAP];
            st = graph_error(ctx, LF_ERR_NOMEM, "eval: out of memory (%zu bytes for %s)", bytes,
                             graph_node_str(node, ns, sizeof ns));
            break;
        }
        vals[id] = out;
        owned[id] = true;
        const void *ins[LF_MAX_ARGS];
        for (int k = 0; k < node->ninputs; k++) ins[k] = vals[node->inputs[k]->id];
        switch (node->kind) {
        case NODE_CONST: eval_const(node, out); break;
        case NODE_IOTA: eval_iota(node, out); break;
        case NODE_RANDOM: eval_random(node, out); break;
        case NODE_VIEW: eval_view(node, ins[0], out); break;
        case NODE_MAP: eval_map(node, ins, scratch, out); break;
        case NODE_REDUCE: {
            graph_contract c;
            if (graph_contraction(node, &c)) {
                const void *mins[LF_MAX_ARGS];
                for (int k = 0; k < c.map->ninputs; k++) mins[k] = vals[c.map->inputs[k]->id];
                char ns[GRAPH_NODE_STR_CAP];
                if (eval_contraction(node, &c, mins, scratch, out) != LF_OK)
                    st = graph_error(ctx, LF_ERR_NOMEM, "eval: out of memory in %s", graph_node_str(node, ns, sizeof ns));
                break;
            }
            char ns[GRAPH_NODE_STR_CAP];
            if (eval_reduce(node, ins[0], out) != LF_OK)
                st = graph_error(ctx, LF_ERR_NOMEM, "eval: out of memory in %s", graph_node_str(node, ns, sizeof ns));
            break;
        }
        case NODE_SCAN: eval_scan(node, ins[0], out); break;
        case NODE_GATHER: st = graph_eval_gather(node, ins[0], ins[1], out); break;
        case NODE_SCATTER: st = graph_eval_scatter(node, ins[0], ins[1], ins[2], out); break;
        case NODE_SORT: st = graph_eval_sort(node, ins[0], out); break;
        case NODE_INPUT: break;
        }
        /* free inputs whose last consumer this was (a contraction's map's too) */
        graph_contract c;
        bool contract = graph_contraction(node, &c);
        for (int k = 0; k < node->ninputs + (contract ? c.map->ninputs : 0); k++) {
            int in = k < node->ninputs ? node->inputs[k]->id : c.map->inputs[k - node->ninputs]->id;
            if (--uses[in] == 0 && owned[in]) {
                graph_free(vals[in]);
                vals[in] = NULL;
                owned[in] = false;
            }
        }
    }
    for (int i = 0; i < n && st == LF_OK; i++) {
        const lf_node *o = outs[i];
        size_t bytes = (size_t)o->numel * lf_dtype_size(o->dtype);
        if (!bytes) continue;
        results[i] = graph_malloc(bytes);
        if (!results[i]) {
            st = graph_error(ctx, LF_ERR_NOMEM, "eval: out of memory (%zu bytes for output %d)",
                             bytes, i);
            break;
        }
        memcpy(results[i], vals[o->id], bytes);
    }
    if (st != LF_OK)
        for (int i = 0; i < n; i++) {
            graph_free(results[i]);
            results[i] = NULL;
        }
done:
    if (vals && owned)
        for (int id = 0; id < nn; id++)
            if (owned[id]) graph_free(vals[id]);
    graph_free(uses);
    graph_free(vals);
    graph_free(owned);
    graph_free(scratch);
    return st;
}
