/* backends/mpi/shard.c: liblazyfuse-mpi, sharded arrays over MPI
 * (include/lazyfuse_mpi.h states the model; docs/mpi.md the design).
 *
 * lf_mpi_eval reads like a driver: analyse (which node is sharded along
 * which axis, which crosses ranks, which is refused) -> evaluate the local
 * part with the ordinary lf_eval into temporaries (for a cross node, its
 * own kernel on the block when that gives the rank's exact partial, else
 * its input) -> agree on the status (collective) -> combine what crosses
 * ranks on the host, in the order of positions (allgather folded in rank
 * order, or a relay (a contraction's accumulators, a scatter's or
 * bincount's running result and block partial too); a top-k's
 * candidates allgathered and selected; a
 * take's rows fetched from their holders by MPI_Alltoallv) -> every
 * result to host memory -> agree again ->
 * write the output buffers (nothing allocated after the agreement).
 *
 * What must stay true:
 *  - every rank takes the same decisions: the analysis reads only what is
 *    the same on every rank (node kinds, axes, replicated shapes, the
 *    blocks of sharded buffers), never a block's own extent;
 *  - no output buffer is written before every rank agreed that the eval
 *    succeeded, and no rank waits in a data collective that another rank
 *    skipped (each agreement comes before the communication it guards);
 *  - cross-rank folds use the reference evaluator's graph_red_fold,
 *    graph_scan_step, graph_contract_fold and graph_scatter_combine in the
 *    order of positions; no
 *    MPI reduction operator
 *    touches a value;
 *  - the core library is not changed and knows nothing of MPI; this file
 *    reads its internal structs (graph/graph.h) and is built with it;
 *  - memory comes from the core's allocator (graph_malloc), so
 *    lf_debug_live_bytes counts it and lf_debug_fail_alloc reaches it.
 */
#include "lazyfuse_mpi.h"

#include "graph/graph.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ---- contexts and the blocks of their buffers ---------------------------- */

typedef struct shard_buf {
    lf_buffer *b;             /* the rank's block (an lf_buffer of ctx) */
    int axis;                 /* sharded axis of the global array */
    int64_t global;           /* the axis' global extent */
    int64_t *starts, *counts; /* per rank: first row and rows held */
    struct shard_buf *next;
} shard_buf;

typedef struct mpi_ctx {
    lf_ctx *ctx;              /* the local context */
    MPI_Comm comm;            /* duplicate of the user's communicator */
    int rank, size;
    shard_buf *bufs;          /* sharded buffers of ctx */
    struct mpi_ctx *next;
} mpi_ctx;

static mpi_ctx *contexts; /* every live MPI context (the thread rule of MPI applies) */

static mpi_ctx *find_ctx(const lf_ctx *ctx) {
    for (mpi_ctx *m = contexts; m; m = m->next)
        if (m->ctx == ctx) return m;
    return NULL;
}

static shard_buf *find_buf(const mpi_ctx *m, const lf_buffer *b) {
    for (shard_buf *s = m->bufs; s; s = s->next)
        if (s->b == b) return s;
    return NULL;
}

static void free_shard(shard_buf *s) {
    graph_free(s->starts);
    graph_free(s->counts);
    graph_free(s);
}

lf_ctx *lf_ctx_new_mpi(MPI_Comm comm, const lf_ctx_options *opt) {
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        graph_error(NULL, LF_ERR_STATE, "lf_ctx_new_mpi: MPI is not initialised (call MPI_Init first)");
        return NULL;
    }
    mpi_ctx *m = graph_calloc(1, sizeof *m);
    lf_ctx *ctx = lf_ctx_new(opt);
    int ok = m && ctx, all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, comm); /* a status, not a value */
    if (!all_ok) {
        if (ok) graph_error(NULL, LF_ERR_BACKEND, "lf_ctx_new_mpi: lf_ctx_new failed on another rank");
        else if (!m) graph_error(NULL, LF_ERR_NOMEM, "lf_ctx_new_mpi: out of memory");
        graph_free(m);
        lf_ctx_destroy(ctx);
        return NULL;
    }
    MPI_Comm_dup(comm, &m->comm);
    MPI_Comm_rank(m->comm, &m->rank);
    MPI_Comm_size(m->comm, &m->size);
    m->ctx = ctx;
    m->next = contexts;
    contexts = m;
    return ctx;
}

void lf_ctx_destroy_mpi(lf_ctx *ctx) {
    if (!ctx) return;
    for (mpi_ctx **p = &contexts; *p; p = &(*p)->next) {
        if ((*p)->ctx != ctx) continue;
        mpi_ctx *m = *p;
        *p = m->next;
        while (m->bufs) {
            shard_buf *s = m->bufs;
            m->bufs = s->next;
            free_shard(s);
        }
        MPI_Comm_free(&m->comm);
        graph_free(m);
        break;
    }
    lf_ctx_destroy(ctx);
}

int lf_mpi_rank(const lf_ctx *ctx) {
    const mpi_ctx *m = find_ctx(ctx);
    return m ? m->rank : -1;
}

int lf_mpi_size(const lf_ctx *ctx) {
    const mpi_ctx *m = find_ctx(ctx);
    return m ? m->size : -1;
}

/* FNV-1a over bytes: the fingerprint ranks compare (a status check). */
static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++) h = (h ^ c[i]) * 1099511628211ull;
    return h;
}

lf_buffer *lf_mpi_buffer_new_sharded(lf_ctx *ctx, lf_dtype t, int ndim, const int64_t *shape, int axis,
                                     const int64_t *counts) {
    mpi_ctx *m = find_ctx(ctx);
    if (!m) {
        graph_error(ctx, ctx ? LF_ERR_STATE : LF_ERR_NULL, "lf_mpi_buffer_new_sharded: not a context of lf_ctx_new_mpi");
        return NULL;
    }
    lf_status st = LF_OK;
    char why[160] = "";
    shard_buf *s = graph_calloc(1, sizeof *s);
    int64_t *starts = graph_calloc((size_t)m->size, sizeof *starts), *cnt = graph_calloc((size_t)m->size, sizeof *cnt);
    if (!s || !starts || !cnt) st = LF_ERR_NOMEM, snprintf(why, sizeof why, "out of memory");
    else if (!shape || ndim < 1 || ndim > LF_MAX_DIMS)
        st = !shape ? LF_ERR_NULL : LF_ERR_SHAPE,
        snprintf(why, sizeof why, "a sharded array needs 1..%d dimensions and a shape", LF_MAX_DIMS);
    else if (axis < -ndim || axis >= ndim)
        st = LF_ERR_AXIS, snprintf(why, sizeof why, "axis %d out of range for %d dimensions", axis, ndim);
    if (st == LF_OK) {
        if (axis < 0) axis += ndim;
        int64_t n = shape[axis], sum = 0;
        for (int r = 0; r < m->size && st == LF_OK; r++) {
            cnt[r] = counts ? counts[r] : n / m->size + (r < n % m->size);
            if (cnt[r] < 0) st = LF_ERR_SHAPE, snprintf(why, sizeof why, "negative count %lld for rank %d", (long long)cnt[r], r);
            starts[r] = sum;
            sum += cnt[r];
        }
        if (st == LF_OK && sum != n)
            st = LF_ERR_SHAPE,
            snprintf(why, sizeof why, "counts sum to %lld, not the extent %lld of axis %d", (long long)sum, (long long)n, axis);
    }
    /* every rank must have asked for the same array: compare fingerprints */
    uint64_t h = fnv(1469598103934665603ull, &t, sizeof t);
    h = fnv(h, &ndim, sizeof ndim);
    h = fnv(h, &axis, sizeof axis);
    if (shape && ndim >= 0 && ndim <= LF_MAX_DIMS) h = fnv(h, shape, (size_t)ndim * sizeof *shape);
    if (cnt && st == LF_OK) h = fnv(h, cnt, (size_t)m->size * sizeof *cnt);
    /* without allocating (so that no rank can drop out of the collectives):
       the lowest failing rank and its status, and whether every fingerprint
       is the same (statuses and fingerprints, never array values) */
    uint64_t hmin = 0, hmax = 0;
    MPI_Allreduce(&h, &hmin, 1, MPI_UINT64_T, MPI_MIN, m->comm);
    MPI_Allreduce(&h, &hmax, 1, MPI_UINT64_T, MPI_MAX, m->comm);
    int pair[2] = {st != LF_OK ? m->rank : m->size, (int)st}, first[2];
    MPI_Allreduce(pair, first, 1, MPI_2INT, MPI_MINLOC, m->comm);
    lf_buffer *b = NULL;
    if (st == LF_OK && first[0] < m->size) {
        st = (lf_status)first[1];
        snprintf(why, sizeof why, "failed on rank %d", first[0]);
    } else if (st == LF_OK && hmin != hmax) {
        st = LF_ERR_INVALID;
        snprintf(why, sizeof why, "the ranks asked for different arrays (dtype, shape, axis or counts differ)");
    }
    if (st == LF_OK) {
        int64_t local[LF_MAX_DIMS];
        memcpy(local, shape, (size_t)ndim * sizeof *local);
        local[axis] = cnt[m->rank];
        b = lf_buffer_new(ctx, t, ndim, local);
        /* a local failure here (NOMEM, a bad dtype) is the same on every rank
           for a bad dtype; memory is agreed on below */
        int ok = b != NULL, all_ok = 0;
        MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, m->comm);
        if (!all_ok) {
            if (b) {
                lf_buffer_free(b);
                b = NULL;
                graph_error(ctx, LF_ERR_NOMEM, "lf_mpi_buffer_new_sharded: lf_buffer_new failed on another rank");
            }
        } else {
            s->b = b;
            s->axis = axis;
            s->global = shape[axis];
            s->starts = starts;
            s->counts = cnt;
            s->next = m->bufs;
            m->bufs = s;
            starts = cnt = NULL;
            s = NULL;
        }
    } else {
        graph_error(ctx, st, "lf_mpi_buffer_new_sharded: %s", why);
    }
    graph_free(s), graph_free(starts), graph_free(cnt);
    return b;
}

void lf_mpi_buffer_free(lf_ctx *ctx, lf_buffer *b) {
    if (!b) return;
    mpi_ctx *m = find_ctx(ctx);
    if (m)
        for (shard_buf **p = &m->bufs; *p; p = &(*p)->next)
            if ((*p)->b == b) {
                shard_buf *s = *p;
                *p = s->next;
                free_shard(s);
                break;
            }
    lf_buffer_free(b);
}

lf_status lf_mpi_buffer_block(const lf_ctx *ctx, const lf_buffer *b, int *axis, int64_t *start, int64_t *count,
                              int64_t *global) {
    const mpi_ctx *m = find_ctx(ctx);
    if (!b) return LF_ERR_NULL;
    if (!m || b->ctx != ctx) return LF_ERR_STATE;
    const shard_buf *s = find_buf(m, b);
    int64_t ext = b->ndim ? b->shape[0] : 1;
    if (axis) *axis = s ? s->axis : -1;
    if (start) *start = s ? s->starts[m->rank] : 0;
    if (count) *count = s ? s->counts[m->rank] : ext;
    if (global) *global = s ? s->global : ext;
    return LF_OK;
}

/* ---- analysis: where each node lies -------------------------------------- */

/* One needed node: replicated (axis -1) or sharded along `axis` of its own
 * dimensions with the blocks of `lay`; `cross` marks a reduction over, or a
 * scan along, the sharded axis; `after` a node that uses such a result. */
typedef struct place {
    int axis;
    const shard_buf *lay;
    bool cross, after, needed;
} place;

typedef struct analysis {
    mpi_ctx *m;
    lf_graph *g;
    place *pl;             /* by node id */
    lf_status st;
    char msg[LF_ERRMSG_CAP];
} analysis;

static bool same_blocks(const shard_buf *a, const shard_buf *b, int size) {
    return a->global == b->global && !memcmp(a->counts, b->counts, (size_t)size * sizeof *a->counts);
}

static void refuse(analysis *A, const lf_node *n, const char *fmt, ...) {
    if (A->st != LF_OK) return;
    char node[256], what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    A->st = LF_ERR_BACKEND;
    snprintf(A->msg, sizeof A->msg, "mpi: %s %s", graph_node_str(n, node, sizeof node), what);
}

static const char *kind_word(const lf_node *n) {
    switch (n->kind) {
    case NODE_VIEW: return "a view (reshape, permute, slice, broadcast, pad, concat)";
    case NODE_GATHER:
        return "a gather (other than lf_take of a replicated table, and lf_take along axis 0 of a table sharded along "
               "axis 0)";
    case NODE_SCATTER: return "a scatter or bincount";
    case NODE_SORT: return "sort, argsort and top-k";
    case NODE_RANDOM: return "random";
    case NODE_IOTA: return "iota";
    default: return "this node";
    }
}

/* Places node n from its inputs' places (inputs first: ids are topological). */
static void place_node(analysis *A, lf_node *n) {
    place *p = &A->pl[n->id];
    p->axis = -1;
    p->lay = NULL;
    const lf_node *sharded_in = NULL;
    for (int k = 0; k < n->ninputs; k++) {
        const place *q = &A->pl[n->inputs[k]->id];
        if (q->cross || q->after) p->after = true;
        if (q->axis >= 0 && !sharded_in) sharded_in = n->inputs[k];
    }
    if (p->after) {
        refuse(A, n, "uses the result of a reduction, scan, take or top-k across ranks: evaluate that result first into a "
                     "buffer and read it from a second graph");
        return;
    }
    switch (n->kind) {
    case NODE_INPUT: {
        const shard_buf *s = find_buf(A->m, n->u.buffer);
        if (s) p->axis = s->axis, p->lay = s;
        return;
    }
    case NODE_CONST:
    case NODE_IOTA:
    case NODE_RANDOM:
        return; /* replicated: the same values on every rank */
    case NODE_MAP: {
        /* inputs broadcast right-aligned to n's shape */
        for (int k = 0; k < n->ninputs; k++) {
            const lf_node *x = n->inputs[k];
            const place *q = &A->pl[x->id];
            if (q->axis < 0) continue;
            int oa = q->axis + (n->ndim - x->ndim);
            if (p->axis < 0) p->axis = oa, p->lay = q->lay;
            else if (p->axis != oa) return refuse(A, n, "combines operands sharded along different axes");
            else if (!same_blocks(p->lay, q->lay, A->m->size))
                return refuse(A, n, "combines sharded operands with different blocks");
        }
        if (p->axis < 0) return;
        for (int k = 0; k < n->ninputs; k++) {
            const lf_node *x = n->inputs[k];
            if (A->pl[x->id].axis >= 0) continue;
            int d = p->axis - (n->ndim - x->ndim); /* x's axis under the sharded one */
            if (d >= 0 && x->shape[d] != 1) {
                if (x->kind == NODE_RANDOM || x->kind == NODE_IOTA)
                    return refuse(A, n, "meets %s along the sharded axis (its values would be the block's, not the "
                                        "global array's): not supported on sharded arrays yet",
                                  kind_word(x));
                return refuse(A, n, "reads replicated operand node %d along the sharded axis %d (extent %lld, not "
                                    "1): shard that operand too",
                              x->id, p->axis, (long long)x->shape[d]);
            }
        }
        return;
    }
    case NODE_REDUCE: {
        const place *q = &A->pl[n->inputs[0]->id];
        if (q->axis < 0) return;
        uint32_t axes = n->u.reduce.axes;
        if (!(axes & (1u << q->axis))) { /* local: the sharded axis is kept */
            int below = 0;
            for (int d = 0; d < q->axis; d++) below += (axes >> d) & 1;
            p->axis = n->u.reduce.keepdims ? q->axis : q->axis - below;
            p->lay = q->lay;
            return;
        }
        if (axes & ((1u << q->axis) - 1))
            return refuse(A, n, "reduces an axis before the sharded axis %d as well: not supported on sharded arrays "
                                "yet (reduce the sharded axis first)",
                          q->axis);
        p->cross = true; /* replicated result (a contraction too: cross_contract) */
        return;
    }
    case NODE_SCAN: {
        const place *q = &A->pl[n->inputs[0]->id];
        if (q->axis < 0) return;
        p->axis = q->axis, p->lay = q->lay;
        if (n->u.scan.axis == q->axis) p->cross = true;
        return;
    }
    case NODE_GATHER: {
        const place *qx = &A->pl[n->inputs[0]->id], *qi = &A->pl[n->inputs[1]->id];
        if (qx->axis < 0 && qi->axis < 0) return;
        if (qx->axis < 0 && n->u.gather.take) {
            p->axis = n->u.gather.axis + qi->axis;
            p->lay = qi->lay;
            return;
        }
        /* a table sharded along axis 0, read along that axis by lf_take (or
           lf_gather of a 1-d table): the rows travel (cross_take); the output
           has the index's place (sharded like it, or replicated) */
        if (qx->axis == 0 && n->u.gather.axis == 0 && (n->u.gather.take || n->inputs[0]->ndim == 1)) {
            if (qi->axis >= 0) p->axis = qi->axis, p->lay = qi->lay;
            p->cross = true;
            return;
        }
        break;
    }
    case NODE_SCATTER: {
        /* a replicated 1-d dst, indices sharded along axis 0 spanning the
           positions' rank (so their axis 0 is the positions' axis 0), values
           sharded with the same blocks or replicated without extent on that
           axis: a relay of the running result (cross_scatter) */
        const lf_node *dst = n->inputs[0], *ix = n->inputs[1], *vv = n->inputs[2];
        const place *qd = &A->pl[dst->id], *qi = &A->pl[ix->id], *qv = &A->pl[vv->id];
        if (qd->axis < 0 && qi->axis < 0 && qv->axis < 0) return; /* replicated operands: local */
        if (qd->axis >= 0)
            return refuse(A, n, "scatters into a sharded array: a scatter or bincount needs a replicated destination "
                                "on sharded arrays");
        if (dst->ndim != 1 || qi->axis != 0 || ix->ndim < vv->ndim)
            return refuse(A, n, "reads sharded data: a scatter or bincount is supported on sharded arrays only into a "
                                "replicated 1-d destination with its indices sharded along axis 0 (and at least the "
                                "values' rank)");
        if (qv->axis >= 0 ? qv->axis != 0 || vv->ndim != ix->ndim || !same_blocks(qv->lay, qi->lay, A->m->size)
                          : vv->ndim == ix->ndim && vv->shape[0] != 1)
            return refuse(A, n, "reads values that are not sharded like its indices along axis 0 (nor replicated with "
                                "extent 1 there): not supported on sharded arrays");
        p->cross = true; /* replicated result */
        return;
    }
    case NODE_SORT: {
        const place *q = &A->pl[n->inputs[0]->id];
        if (q->axis < 0) return;
        if (n->u.sort.axis != q->axis) { /* rows along another axis lie in the block: local */
            p->axis = q->axis, p->lay = q->lay;
            return;
        }
        /* along the sharded axis: a top-k (replicated result: cross_topk);
           a sort (sharded result) is told apart by its output buffer */
        p->cross = true;
        return;
    }
    default:
        break;
    }
    if (sharded_in) refuse(A, n, "reads sharded data: %s is not supported on sharded arrays yet", kind_word(n));
}

/* ---- cross-rank folds ------------------------------------------------------ */

/* The rank's rows [0, cnt) of x (dense host block, sharded along axis a,
 * a the first reduced axis) folded into accs[nout] (started by the caller
 * or by the previous rank): row-major over x, so within each output the
 * positions come in order. pos_base: the global position of the block's
 * first row within the reduced set. */
static void fold_block(const lf_node *r, const void *xb, int a, int64_t row0, graph_red_acc *acc) {
    const lf_node *x = r->inputs[0];
    lf_reduce_op op = r->u.reduce.op;
    lf_dtype acc_t = graph_red_acc_dtype(op, x->dtype);
    int64_t idx[LF_MAX_DIMS] = {0};
    /* output strides (kept axes) and reduced-position strides with the
       global extent on the sharded axis (a is the first reduced axis, so
       its stride is the product of the later reduced extents) */
    int64_t ost[LF_MAX_DIMS] = {0}, pst[LF_MAX_DIMS] = {0}, o = 1, ps = 1;
    for (int d = x->ndim - 1; d >= 0; d--) {
        if (r->u.reduce.axes & (1u << d)) {
            pst[d] = ps;
            ps *= x->shape[d];
        } else {
            ost[d] = o;
            o *= x->shape[d];
        }
    }
    for (int64_t i = 0; i < x->numel; i++) {
        int64_t oo = 0, pp = row0 * pst[a];
        for (int d = 0; d < x->ndim; d++) oo += idx[d] * ost[d], pp += idx[d] * pst[d];
        lf_scalar v = graph_scalar_convert(graph_scalar_load(xb, x->dtype, i), x->dtype, acc_t);
        graph_red_fold(&acc[oo], op, acc_t, v, pp);
        for (int d = x->ndim - 1; d >= 0; d--) {
            if (++idx[d] < x->shape[d]) break;
            idx[d] = 0;
        }
    }
}

/* Whether the local backend's own kernel for the reduction, run on the
 * block, gives the rank's partial exactly (its value is the partial: min and
 * max select, integer sums and products wrap), so that the cross reduction's
 * input stays fused and is never stored. argmin/argmax (the value is not in
 * the result) and float folds take the host fold of the stored input. */
static bool partial_from_kernel(lf_reduce_op op, lf_dtype acc_t) {
    if (op == LF_RED_MIN || op == LF_RED_MAX) return true;
    return (op == LF_RED_SUM || op == LF_RED_PROD) && acc_t != LF_F64;
}

static bool regroupable(lf_reduce_op op, lf_dtype acc_t) {
    if (op == LF_RED_MIN || op == LF_RED_MAX || op == LF_RED_ARGMIN || op == LF_RED_ARGMAX) return true;
    return acc_t != LF_F64; /* integer sums and products wrap: associative */
}

/* Reduction r over the sharded axis: xb is the rank's block of r's input,
 * or, when partial_from_kernel, r's own local result (the block reduced by
 * the local backend); out (r->numel elements of r's dtype) gets the global
 * result. */
static lf_status cross_reduce(mpi_ctx *m, const lf_node *r, const shard_buf *lay, int a, const void *xb, void *out) {
    const lf_node *x = r->inputs[0];
    lf_reduce_op op = r->u.reduce.op;
    lf_dtype acc_t = graph_red_acc_dtype(op, x->dtype);
    int64_t nout = r->numel, count = 1;
    for (int d = 0; d < x->ndim; d++)
        if (r->u.reduce.axes & (1u << d)) count *= d == a ? lay->global : x->shape[d];
    size_t bytes = (size_t)(nout ? nout : 1) * sizeof(graph_red_acc);
    graph_red_acc *acc = graph_malloc(bytes);
    graph_red_acc *all = regroupable(op, acc_t) ? graph_malloc(bytes * (size_t)m->size) : NULL;
    int ok = acc && (all || !regroupable(op, acc_t)), all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, m->comm); /* a status agreement */
    if (!all_ok) {
        graph_free(acc), graph_free(all);
        return LF_ERR_NOMEM;
    }
    for (int64_t o = 0; o < nout; o++) graph_red_init(&acc[o], op, acc_t);
    int64_t row0 = lay->starts[m->rank];
    if (all) {
        /* each rank folds its own rows from the identity; the partials are
           gathered and folded in rank order (the order of positions) */
        if (partial_from_kernel(op, acc_t))
            for (int64_t o = 0; o < nout; o++) {
                acc[o].v = graph_scalar_convert(graph_scalar_load(xb, r->dtype, o), r->dtype, acc_t);
                acc[o].started = true; /* min/max: every block is non-empty (lazyfuse_mpi.h) */
            }
        else
            fold_block(r, xb, a, row0, acc);
        MPI_Allgather(acc, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, m->comm);
        for (int64_t o = 0; o < nout; o++) graph_red_init(&acc[o], op, acc_t);
        for (int q = 0; q < m->size; q++)
            for (int64_t o = 0; o < nout; o++) {
                const graph_red_acc *p = &all[(size_t)q * (size_t)(nout ? nout : 1) + (size_t)o];
                bool ext = op == LF_RED_MIN || op == LF_RED_MAX || op == LF_RED_ARGMIN || op == LF_RED_ARGMAX;
                if (ext && !p->started) continue; /* an empty block */
                graph_red_fold(&acc[o], op, acc_t, p->v, p->arg);
            }
    } else {
        /* the relay: rank r continues rank r-1's running values */
        if (m->rank > 0) MPI_Recv(acc, (int)bytes, MPI_BYTE, m->rank - 1, 32, m->comm, MPI_STATUS_IGNORE);
        fold_block(r, xb, a, row0, acc);
        if (m->rank + 1 < m->size) MPI_Send(acc, (int)bytes, MPI_BYTE, m->rank + 1, 32, m->comm);
        MPI_Bcast(acc, (int)bytes, MPI_BYTE, m->size - 1, m->comm);
    }
    for (int64_t o = 0; o < nout; o++) graph_scalar_store(out, r->dtype, o, graph_red_finish(&acc[o], op, acc_t, count, r->dtype));
    graph_free(acc), graph_free(all);
    return LF_OK;
}

/* Contraction r (graph/contract.c) whose contracted axis is the sharded
 * one: a relay of graph_contract_acc (16 bytes per output element). Rank r
 * receives rank r-1's accumulators, walks its block of the map's space in
 * row-major order (so within each output the contracted positions come in
 * ascending order, as in graph/eval_ref.c's eval_contraction), evaluates
 * the map's fn on the host and folds x, y by graph_contract_fold, and passes
 * them on; the last rank broadcasts. The LF_CONTRACT_BLOCK blocks of the
 * fmaf chain count positions from the start of the whole axis (the
 * accumulator carries the count of its current block), so they fall where
 * they fall in one process, at any block boundary: the result is
 * lazyfuse.h's contraction value exactly, which every backend computes.
 * mins: the rank's stored values of the map's inputs. */
static lf_status cross_contract(mpi_ctx *m, const lf_node *r, const graph_contract *c, void *const *mins,
                                void *out) {
    const lf_node *mp = c->map;
    const lf_fn *f = mp->u.map.fn;
    int64_t nout = r->numel;
    size_t bytes = (size_t)(nout ? nout : 1) * sizeof(graph_contract_acc);
    graph_contract_acc *acc = graph_malloc(bytes);
    lf_scalar *scratch = graph_malloc((size_t)(f->nexprs > 0 ? f->nexprs : 1) * sizeof *scratch);
    int ok = acc && scratch, all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, m->comm); /* a status agreement */
    if (!all_ok) {
        graph_free(acc), graph_free(scratch);
        return LF_ERR_NOMEM;
    }
    if (m->rank > 0) MPI_Recv(acc, (int)bytes, MPI_BYTE, m->rank - 1, 34, m->comm, MPI_STATUS_IGNORE);
    else
        for (int64_t o = 0; o < nout; o++) graph_contract_init(&acc[o]);
    int64_t st[LF_MAX_ARGS][LF_MAX_DIMS], ost[LF_MAX_DIMS] = {0}, idx[LF_MAX_DIMS] = {0}, os = 1;
    lf_dtype params[LF_MAX_ARGS];
    for (int k = 0; k < mp->ninputs; k++) {
        params[k] = mp->inputs[k]->dtype;
        graph_broadcast_strides(mp->inputs[k]->ndim, mp->inputs[k]->shape, mp->ndim, mp->shape, st[k]);
    }
    for (int d = mp->ndim - 1; d >= 0; d--)
        if (d != c->axis) ost[d] = os, os *= mp->shape[d];
    lf_scalar args[LF_MAX_ARGS];
    for (int64_t i = 0; i < mp->numel; i++) {
        int64_t oo = 0;
        for (int d = 0; d < mp->ndim; d++) oo += idx[d] * ost[d];
        for (int k = 0; k < mp->ninputs; k++) {
            int64_t at = 0;
            for (int d = 0; d < mp->ndim; d++) at += idx[d] * st[k][d];
            args[k] = graph_scalar_load(mins[k], params[k], at);
        }
        graph_fn_eval(f, params, mp->u.map.etype, mp->u.map.ctype, args, scratch);
        graph_contract_fold(&acc[oo], (float)scratch[c->x].f, (float)scratch[c->y].f);
        for (int d = mp->ndim - 1; d >= 0; d--) {
            if (++idx[d] < mp->shape[d]) break;
            idx[d] = 0;
        }
    }
    if (m->rank + 1 < m->size) MPI_Send(acc, (int)bytes, MPI_BYTE, m->rank + 1, 34, m->comm);
    MPI_Bcast(acc, (int)bytes, MPI_BYTE, m->size - 1, m->comm);
    for (int64_t o = 0; o < nout; o++) ((float *)out)[o] = graph_contract_finish(&acc[o]);
    graph_free(acc), graph_free(scratch);
    return LF_OK;
}

/* Scan s along the sharded axis a: a relay of one state per row. */
static lf_status cross_scan(mpi_ctx *m, const lf_node *s, int a, const void *xb, void *out) {
    const lf_node *x = s->inputs[0];
    int64_t len = x->shape[a], inner = 1, outer = 1;
    for (int d = a + 1; d < x->ndim; d++) inner *= x->shape[d];
    for (int d = 0; d < a; d++) outer *= x->shape[d];
    int64_t rows = outer * inner;
    size_t bytes = (size_t)(rows ? rows : 1) * sizeof(graph_scan_state);
    graph_scan_state *st = graph_malloc(bytes);
    int ok = st != NULL, all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, m->comm); /* a status agreement */
    if (!all_ok) {
        graph_free(st);
        return LF_ERR_NOMEM;
    }
    lf_dtype acc_t = graph_red_acc_dtype(s->u.scan.op, x->dtype);
    if (m->rank > 0) MPI_Recv(st, (int)bytes, MPI_BYTE, m->rank - 1, 33, m->comm, MPI_STATUS_IGNORE);
    else
        for (int64_t r = 0; r < rows; r++) graph_scan_start(&st[r], s->u.scan.op, x->dtype, s->u.scan.exclusive);
    for (int64_t ou = 0; ou < outer; ou++)
        for (int64_t in = 0; in < inner; in++) {
            graph_scan_state *row = &st[ou * inner + in];
            for (int64_t i = 0; i < len; i++) {
                int64_t at = (ou * len + i) * inner + in;
                lf_scalar v = graph_scalar_convert(graph_scalar_load(xb, x->dtype, at), x->dtype, acc_t);
                graph_scalar_store(out, s->dtype, at, graph_scan_step(row, v, s->dtype));
            }
        }
    if (m->rank + 1 < m->size) MPI_Send(st, (int)bytes, MPI_BYTE, m->rank + 1, 33, m->comm);
    graph_free(st);
    return LF_OK;
}

/* Whether scan s along the sharded axis runs in parallel: an inclusive
 * integer, bool, min or max scan (associative: element i of rank r is the
 * fold of rank r's offset and the local scan's element i, exactly the
 * sequential value), its local part the local backend's own fused kernel.
 * Float sums and products, and exclusive scans (whose block total needs
 * the last input element, which the fused kernel does not keep), take the
 * relay. */
static bool scan_in_parallel(const lf_node *s) {
    return !s->u.scan.exclusive &&
           partial_from_kernel(s->u.scan.op, graph_red_acc_dtype(s->u.scan.op, s->inputs[0]->dtype));
}

/* The parallel scan: loc is the local scan of the rank's block (s's dtype);
 * each row's block total (its last element) is allgathered, the rank's
 * offset is the totals of the ranks before it folded in rank order from the
 * identity, and out[i] = offset (+) loc[i]. */
static lf_status cross_scan_parallel(mpi_ctx *m, const lf_node *s, int a, const void *loc, void *out) {
    const lf_node *x = s->inputs[0];
    lf_reduce_op op = s->u.scan.op;
    lf_dtype acc_t = graph_red_acc_dtype(op, x->dtype);
    int64_t len = x->shape[a], inner = 1, outer = 1;
    for (int d = a + 1; d < x->ndim; d++) inner *= x->shape[d];
    for (int d = 0; d < a; d++) outer *= x->shape[d];
    int64_t rows = outer * inner;
    size_t bytes = (size_t)(rows ? rows : 1) * sizeof(graph_red_acc);
    graph_red_acc *tot = graph_malloc(bytes), *all = graph_malloc(bytes * (size_t)m->size);
    int ok = tot && all, all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, m->comm); /* a status agreement */
    if (!all_ok) {
        graph_free(tot), graph_free(all);
        return LF_ERR_NOMEM;
    }
    graph_red_acc id = {.v = graph_scan_identity(op, x->dtype), .arg = 0, .started = true};
    for (int64_t ou = 0; ou < outer; ou++)
        for (int64_t in = 0; in < inner; in++) {
            graph_red_acc *t = &tot[ou * inner + in];
            *t = id;
            if (len > 0)
                t->v = graph_scalar_convert(graph_scalar_load(loc, s->dtype, (ou * len + len - 1) * inner + in), s->dtype,
                                            acc_t);
        }
    MPI_Allgather(tot, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, m->comm);
    for (int64_t row = 0; row < rows; row++) { /* tot becomes the rank's offset */
        tot[row] = id;
        for (int q = 0; q < m->rank; q++)
            graph_red_fold(&tot[row], op, acc_t, all[(size_t)q * (size_t)(rows ? rows : 1) + (size_t)row].v, 0);
    }
    for (int64_t ou = 0; ou < outer; ou++)
        for (int64_t in = 0; in < inner; in++)
            for (int64_t i = 0; i < len; i++) {
                int64_t at = (ou * len + i) * inner + in;
                graph_red_acc v = tot[ou * inner + in];
                graph_red_fold(&v, op, acc_t, graph_scalar_convert(graph_scalar_load(loc, s->dtype, at), s->dtype, acc_t), 0);
                graph_scalar_store(out, s->dtype, at, graph_scalar_convert(v.v, acc_t, s->dtype));
            }
    graph_free(tot), graph_free(all);
    return LF_OK;
}

/* ---- top-k along the sharded axis ------------------------------------------ */

/* lazyfuse.h's total order of one dtype's values: NumPy's (NaN last, every
 * NaN equal, -0.0 == +0.0), unsigned integers as unsigned. <0, 0, >0. */
static int order_cmp(lf_dtype t, lf_scalar a, lf_scalar b) {
    if (graph_dtype_is_float(t)) {
        bool na = a.f != a.f, nb = b.f != b.f;
        if (na || nb) return na - nb;
        return (a.f > b.f) - (a.f < b.f);
    }
    if (t == LF_U64) return ((uint64_t)a.i > (uint64_t)b.i) - ((uint64_t)a.i < (uint64_t)b.i);
    return (a.i > b.i) - (a.i < b.i);
}

/* One candidate: its value and its global position along the axis. */
typedef struct cand {
    lf_scalar v;
    int64_t pos;
} cand;

static lf_dtype cand_t;   /* qsort's context (the MPI thread rule applies) */
static bool cand_desc;

/* The stable order of lf_sort: by value (reversed for descending), ties by
 * position; strict, since positions differ. */
static int cand_cmp(const void *pa, const void *pb) {
    const cand *a = pa, *b = pb;
    int c = order_cmp(cand_t, a->v, b->v);
    if (cand_desc) c = -c;
    if (c) return c;
    return (a->pos > b->pos) - (a->pos < b->pos);
}

/* Top-k node s (values or positions) along the sharded axis a: xb is the
 * rank's block of s's input (stored by the local eval). Each rank selects
 * its block's k best per row on the host (positions made global), an
 * MPI_Allgather collects every rank's k candidates per row (a heap of the
 * k best kept while reading the row: O(len log k)), and every rank
 * keeps the k best of the size * k in lf_sort's stable order. Exact: the k
 * best of the whole row are among the union of each block's k best, and the
 * order (value, then global position) is strict, so every rank picks the
 * same entries, with the one-process tie rule. k is at most the smallest
 * block (the builder checks it on each rank). out: s's replicated result. */
static lf_status cross_topk(mpi_ctx *m, const lf_node *s, const shard_buf *lay, int a, const void *xb, void *out) {
    const lf_node *x = s->inputs[0];
    int64_t len = x->shape[a], inner = 1, outer = 1, k = s->u.sort.k;
    for (int d = a + 1; d < x->ndim; d++) inner *= x->shape[d];
    for (int d = 0; d < a; d++) outer *= x->shape[d];
    /* every rank must have built the same k (a status check, not a value) */
    int64_t kk[2] = {-k, k};
    MPI_Allreduce(MPI_IN_PLACE, kk, 2, MPI_INT64_T, MPI_MAX, m->comm);
    if (-kk[0] != kk[1]) {
        graph_error(m->ctx, LF_ERR_INVALID, "lf_mpi_eval: top-k along the sharded axis: the ranks built different k (%lld .. %lld)",
                    (long long)-kk[0], (long long)kk[1]);
        return LF_ERR_INVALID;
    }
    int64_t rows = outer * inner, per = rows * k; /* candidates of one rank */
    size_t bytes = (size_t)(per ? per : 1) * sizeof(cand);
    cand *mine = graph_malloc(bytes), *all = graph_malloc(bytes * (size_t)m->size);
    cand *row = graph_malloc((size_t)(k * m->size) * sizeof(cand) + sizeof(cand));
    int ok = mine && all && row && (size_t)per * sizeof(cand) <= (size_t)INT32_MAX, all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, m->comm); /* a status agreement */
    if (!all_ok) {
        graph_free(mine), graph_free(all), graph_free(row);
        return LF_ERR_NOMEM;
    }
    cand_t = x->dtype, cand_desc = s->u.sort.descending;
    int64_t row0 = lay->starts[m->rank];
    for (int64_t ou = 0; ou < outer; ou++)
        for (int64_t in = 0; in < inner; in++) {
            /* the block's k best: a heap whose root is the worst kept */
            cand *h = &mine[(ou * inner + in) * k];
            int64_t kept = 0;
            for (int64_t i = 0; i < len && k > 0; i++) {
                cand c = {graph_scalar_load(xb, x->dtype, (ou * len + i) * inner + in), row0 + i};
                int64_t at;
                if (kept < k) { /* sift up */
                    for (at = kept++; at > 0 && cand_cmp(&h[(at - 1) / 2], &c) < 0; at = (at - 1) / 2) h[at] = h[(at - 1) / 2];
                } else if (cand_cmp(&c, &h[0]) < 0) { /* better than the worst kept: sift down */
                    for (at = 0;;) {
                        int64_t ch = 2 * at + 1;
                        if (ch >= k) break;
                        if (ch + 1 < k && cand_cmp(&h[ch], &h[ch + 1]) < 0) ch++;
                        if (cand_cmp(&h[ch], &c) < 0) break;
                        h[at] = h[ch], at = ch;
                    }
                } else
                    continue;
                h[at] = c;
            }
            qsort(h, (size_t)k, sizeof *h, cand_cmp);
        }
    MPI_Allgather(mine, (int)(per * (int64_t)sizeof(cand)), MPI_BYTE, all, (int)(per * (int64_t)sizeof(cand)), MPI_BYTE,
                  m->comm);
    for (int64_t r = 0; r < rows; r++) {
        for (int q = 0; q < m->size; q++) memcpy(&row[q * k], &all[(size_t)q * (size_t)per + (size_t)(r * k)], (size_t)k * sizeof *row);
        qsort(row, (size_t)(k * m->size), sizeof *row, cand_cmp);
        int64_t ou = r / (inner ? inner : 1), in = r % (inner ? inner : 1);
        for (int64_t j = 0; j < k; j++) {
            int64_t at = (ou * k + j) * inner + in;
            if (s->u.sort.indices) graph_scalar_store(out, LF_I64, at, (lf_scalar){.i = row[j].pos});
            else graph_scalar_store(out, s->dtype, at, row[j].v);
        }
    }
    graph_free(mine), graph_free(all), graph_free(row);
    return LF_OK;
}

/* ---- lf_take of a table sharded along the take axis ------------------------- */

static lf_status agree(mpi_ctx *m, lf_status st, const char *msg);

/* The rank holding global row g of lay (a non-empty block). */
static int owner_of(const shard_buf *lay, int size, int64_t g) {
    int lo = 0, hi = size - 1; /* the last rank whose start <= g */
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (lay->starts[mid] <= g) lo = mid;
        else hi = mid - 1;
    }
    while (lo > 0 && lay->counts[lo] == 0) lo--; /* empty blocks share the start */
    return lo;
}

/* Take node t along axis 0 of a table sharded along axis 0 (lay): xb is the
 * rank's block of the table, ib the rank's indices (its block, or all of
 * them when replicated; istart: the global position of the block's first
 * row along idx's sharded axis ia, -1 replicated). The indices are checked
 * first (collectively: the lowest failing rank's first bad index fails
 * every rank, LF_ERR_INDEX), then each rank sends the rows it needs to
 * their owners (MPI_Alltoall of counts, MPI_Alltoallv of 8-byte row
 * numbers) and the owners send the rows back (MPI_Alltoallv of the row
 * slabs). out: the rank's part of t (rows in idx order). */
static lf_status cross_take(mpi_ctx *m, const lf_node *t, const shard_buf *lay, int ia, int64_t istart, const void *xb,
                            const void *ib, void *out) {
    const lf_node *x = t->inputs[0], *idx = t->inputs[1];
    int P = m->size;
    int64_t nidx = idx->numel, slab = 1;
    for (int d = 1; d < x->ndim; d++) slab *= x->shape[d];
    size_t es = lf_dtype_size(x->dtype), sb = (size_t)slab * es;
    /* 1. the indices, wrapped against the global extent; the first bad one */
    int64_t *want = graph_malloc((size_t)(nidx ? nidx : 1) * sizeof *want);
    int *cnt = graph_malloc(5 * (size_t)P * sizeof *cnt);
    lf_status st = want && cnt ? LF_OK : LF_ERR_NOMEM;
    char msg[LF_ERRMSG_CAP] = "lf_mpi_eval: out of memory";
    int64_t pos[LF_MAX_DIMS] = {0};
    for (int64_t i = 0; i < nidx && st == LF_OK; i++) {
        int64_t v = graph_scalar_load(ib, idx->dtype, i).i;
        if ((want[i] = graph_gather_wrap(v, lay->global)) < 0) {
            char ps[160], ns[GRAPH_NODE_STR_CAP];
            int64_t gp[LF_MAX_DIMS];
            memcpy(gp, pos, sizeof gp);
            if (ia >= 0) gp[ia] += istart; /* the position in the global index array */
            st = LF_ERR_INDEX;
            snprintf(msg, sizeof msg, "%s: index %lld out of range for axis 0 of size %lld at position %s",
                     graph_node_str(t, ns, sizeof ns), (long long)v, (long long)lay->global,
                     graph_shape_str(ps, sizeof ps, idx->ndim, gp));
        }
        for (int d = idx->ndim - 1; d >= 0; d--) {
            if (++pos[d] < idx->shape[d]) break;
            pos[d] = 0;
        }
    }
    /* 2. who asks whom for how many rows */
    int *sc = cnt, *rc = cnt + P, *sd = cnt + 2 * P, *rd = cnt + 3 * P, *cur = cnt + 4 * P;
    int64_t *req = NULL, *got = NULL;
    int *slot = NULL;
    char *rows = NULL, *back = NULL;
    int64_t nrecv = 0;
    if (st == LF_OK) {
        memset(sc, 0, (size_t)P * sizeof *sc);
        for (int64_t i = 0; i < nidx; i++) sc[owner_of(lay, P, want[i])]++;
        if (nidx > INT32_MAX || (double)nidx * (double)sb > INT32_MAX) {
            st = LF_ERR_INVALID;
            snprintf(msg, sizeof msg, "lf_mpi_eval: a take across ranks of more than 2^31 bytes (MPI counts are int)");
        }
    }
    if ((st = agree(m, st, msg)) != LF_OK) goto out;
    MPI_Alltoall(sc, 1, MPI_INT, rc, 1, MPI_INT, m->comm);
    sd[0] = rd[0] = 0;
    for (int q = 1; q < P; q++) sd[q] = sd[q - 1] + sc[q - 1], rd[q] = rd[q - 1] + rc[q - 1];
    nrecv = rd[P - 1] + rc[P - 1];
    req = graph_malloc((size_t)(nidx ? nidx : 1) * sizeof *req);
    slot = graph_malloc((size_t)(nidx ? nidx : 1) * sizeof *slot);
    got = graph_malloc((size_t)(nrecv ? nrecv : 1) * sizeof *got);
    rows = graph_malloc((size_t)(nrecv ? nrecv : 1) * sb + 1);
    back = graph_malloc((size_t)(nidx ? nidx : 1) * sb + 1);
    st = req && slot && got && rows && back && (double)nrecv * (double)sb <= INT32_MAX ? LF_OK : LF_ERR_NOMEM;
    if ((st = agree(m, st, "lf_mpi_eval: out of memory (a take across ranks)")) != LF_OK) goto out;
    /* 3. requests: local row numbers, grouped by owner in idx order */
    memcpy(cur, sd, (size_t)P * sizeof *cur);
    for (int64_t i = 0; i < nidx; i++) {
        int q = owner_of(lay, P, want[i]);
        slot[i] = cur[q];
        req[cur[q]++] = want[i] - lay->starts[q];
    }
    MPI_Alltoallv(req, sc, sd, MPI_INT64_T, got, rc, rd, MPI_INT64_T, m->comm);
    /* 4. the owners answer with the rows */
    for (int64_t r = 0; r < nrecv; r++) memcpy(rows + (size_t)r * sb, (const char *)xb + (size_t)got[r] * sb, sb);
    for (int q = 0; q < P; q++) sc[q] *= (int)sb, sd[q] *= (int)sb, rc[q] *= (int)sb, rd[q] *= (int)sb;
    MPI_Alltoallv(rows, rc, rd, MPI_BYTE, back, sc, sd, MPI_BYTE, m->comm);
    for (int64_t i = 0; i < nidx; i++) memcpy((char *)out + (size_t)i * sb, back + (size_t)slot[i] * sb, sb);
out:
    graph_free(want), graph_free(cnt), graph_free(req), graph_free(slot), graph_free(got), graph_free(rows),
        graph_free(back);
    return st;
}

/* ---- scatter and bincount of sharded positions into a replicated dst -------- */

/* Scatter node s (lazyfuse.h's order): positions S sharded along axis 0
 * (this rank: rows row0 .. of S, its idx and values blocks dense in ib, vb),
 * dst replicated (db). The indices are checked first (collectively: the
 * lowest failing rank's first bad position, the lowest global one, fails
 * every rank with LF_ERR_INDEX naming its global position). Then a relay of
 * the one-process state in position order: the running result, the current
 * LF_SCATTER_BLOCK block's partial and the count of positions in that block
 * (2 dn + 1 scalars): rank r receives rank r-1's state, folds its positions
 * as graph_eval_scatter does, flushing the partial into the result where a
 * block ends (blocks count from the first global position, wherever the
 * rank boundaries fall), passes it on; the last rank flushes the last block
 * and broadcasts the result. So every op (SET too) gives the one-process
 * value exactly, which every backend computes. Integer ops other than SET
 * combine exactly in any grouping: those run in parallel instead (each
 * rank's partial from the identity, MPI_Allgather, the partials combined
 * into dst in rank order). out: dn elements of s's dtype. */
static lf_status cross_scatter(mpi_ctx *m, const lf_node *s, int64_t row0, const void *db, const void *ib,
                               const void *vb, void *out) {
    graph_scatter_geom gm;
    graph_scatter_geom_of(s, &gm);
    lf_scatter_op op = s->u.scatter.op;
    lf_dtype t = s->dtype, it = s->inputs[1]->dtype, vt = s->inputs[2]->dtype;
    int64_t dn = s->numel;
    bool small = dn <= LF_SCATTER_SMALL && op != LF_SCATTER_SET;
    int64_t block = small ? LF_SCATTER_BLOCK : INT64_MAX;
    /* integer ops other than SET combine exactly in any grouping (wrapping
       add and prod, min, max): each rank's partial from the identity, an
       allgather, the partials combined into dst in rank order */
    bool exact = op != LF_SCATTER_SET && t != LF_F32 && t != LF_F64;
    size_t nst = 2 * (size_t)dn + 1; /* result, partial, count in the block */
    lf_scalar *state = graph_malloc(nst * sizeof *state);
    lf_scalar *all = exact ? graph_malloc((size_t)(dn ? dn : 1) * (size_t)m->size * sizeof *all) : NULL;
    lf_status st = state && (all || !exact) ? LF_OK : LF_ERR_NOMEM;
    char msg[LF_ERRMSG_CAP] = "lf_mpi_eval: out of memory (a scatter across ranks)";
    if (st == LF_OK && (double)nst * sizeof *state * (exact ? m->size : 1) > INT32_MAX) {
        st = LF_ERR_INVALID;
        snprintf(msg, sizeof msg, "lf_mpi_eval: a scatter across ranks into more than 2^31 bytes of state (MPI counts are int)");
    }
    /* 1. the indices: the first bad one of this rank's block, its global position */
    int64_t pos[LF_MAX_DIMS] = {0};
    for (int64_t i = 0; i < gm.numel && st == LF_OK; i++) {
        int64_t e = 0;
        for (int d = 0; d < gm.ndim; d++) e += pos[d] * gm.idx_strides[d];
        int64_t v = graph_scalar_load(ib, it, e).i;
        bool neg = v < 0 && s->u.scatter.nonneg;
        if (neg || graph_gather_wrap(v, gm.dst_extent) < 0) {
            char ps[160], ns[GRAPH_NODE_STR_CAP];
            int64_t gp[LF_MAX_DIMS];
            memcpy(gp, pos, sizeof gp);
            gp[0] += row0; /* the position in the global positions S */
            graph_shape_str(ps, sizeof ps, gm.ndim, gp);
            graph_node_str(s, ns, sizeof ns);
            st = LF_ERR_INDEX;
            if (neg)
                snprintf(msg, sizeof msg, "%s: negative value %lld at position %s (bincount counts values 0 .. %lld)",
                         ns, (long long)v, ps, (long long)gm.dst_extent - 1);
            else
                snprintf(msg, sizeof msg, "%s: index %lld out of range for axis %d of size %lld at position %s", ns,
                         (long long)v, s->u.scatter.axis, (long long)gm.dst_extent, ps);
        }
        for (int d = gm.ndim - 1; d >= 0; d--) {
            if (++pos[d] < gm.shape[d]) break;
            pos[d] = 0;
        }
    }
    if ((st = agree(m, st, msg)) != LF_OK) {
        graph_free(state), graph_free(all);
        return st;
    }
    lf_scalar *res = state, *part = state + dn, id = graph_scatter_identity(op, t);
    int64_t k;
    if (exact) { /* 2a. in parallel: partials allgathered, combined in rank order */
        for (int64_t j = 0; j < dn; j++) res[j] = graph_scalar_load(db, t, j), part[j] = id;
        memset(pos, 0, sizeof pos);
        for (int64_t i = 0; i < gm.numel; i++) {
            int64_t ie = 0, ve = 0;
            for (int d = 0; d < gm.ndim; d++) ie += pos[d] * gm.idx_strides[d], ve += pos[d] * gm.val_strides[d];
            int64_t te = graph_gather_wrap(graph_scalar_load(ib, it, ie).i, gm.dst_extent);
            part[te] = graph_scatter_combine(op, t, part[te], graph_scalar_convert(graph_scalar_load(vb, vt, ve), vt, t));
            for (int d = gm.ndim - 1; d >= 0; d--) {
                if (++pos[d] < gm.shape[d]) break;
                pos[d] = 0;
            }
        }
        int pb = (int)((size_t)dn * sizeof *part);
        MPI_Allgather(part, pb, MPI_BYTE, all, pb, MPI_BYTE, m->comm);
        for (int q = 0; q < m->size; q++)
            for (int64_t j = 0; j < dn; j++) res[j] = graph_scatter_combine(op, t, res[j], all[(size_t)q * (size_t)dn + (size_t)j]);
        for (int64_t j = 0; j < dn; j++) graph_scalar_store(out, t, j, res[j]);
        graph_free(state), graph_free(all);
        return LF_OK;
    }
    /* 2b. the relay */
    if (m->rank > 0) {
        MPI_Recv(state, (int)(nst * sizeof *state), MPI_BYTE, m->rank - 1, 33, m->comm, MPI_STATUS_IGNORE);
        k = state[2 * dn].i;
    } else {
        for (int64_t j = 0; j < dn; j++) res[j] = graph_scalar_load(db, t, j), part[j] = id;
        k = 0;
    }
    memset(pos, 0, sizeof pos);
    for (int64_t i = 0; i < gm.numel; i++) {
        int64_t ie = 0, ve = 0;
        for (int d = 0; d < gm.ndim; d++) ie += pos[d] * gm.idx_strides[d], ve += pos[d] * gm.val_strides[d];
        int64_t te = graph_gather_wrap(graph_scalar_load(ib, it, ie).i, gm.dst_extent);
        lf_scalar v = graph_scalar_convert(graph_scalar_load(vb, vt, ve), vt, t);
        if (op == LF_SCATTER_SET) res[te] = v;
        else {
            if (k == block) { /* the previous block ended: flush it */
                for (int64_t j = 0; j < dn; j++) res[j] = graph_scatter_combine(op, t, res[j], part[j]), part[j] = id;
                k = 0;
            }
            part[te] = graph_scatter_combine(op, t, part[te], v);
            k++;
        }
        for (int d = gm.ndim - 1; d >= 0; d--) {
            if (++pos[d] < gm.shape[d]) break;
            pos[d] = 0;
        }
    }
    state[2 * dn].i = k;
    if (m->rank + 1 < m->size)
        MPI_Send(state, (int)(nst * sizeof *state), MPI_BYTE, m->rank + 1, 33, m->comm);
    else if (op != LF_SCATTER_SET && k > 0)
        for (int64_t j = 0; j < dn; j++) res[j] = graph_scatter_combine(op, t, res[j], part[j]);
    MPI_Bcast(res, (int)((size_t)dn * sizeof *res), MPI_BYTE, m->size - 1, m->comm);
    for (int64_t j = 0; j < dn; j++) graph_scalar_store(out, t, j, res[j]);
    graph_free(state);
    return LF_OK;
}

/* ---- sort and argsort along the sharded axis: a sample sort ------------------ */

/* One element in the sort: its row (the batched axes, row-major), value and
 * global position along the axis. Ordered by row, then lf_sort's order. */
typedef struct skey {
    int64_t row;
    lf_scalar v;
    int64_t pos;
} skey;

static int skey_cmp(const void *pa, const void *pb) {
    const skey *a = pa, *b = pb;
    if (a->row != b->row) return (a->row > b->row) - (a->row < b->row);
    cand ca = {a->v, a->pos}, cb = {b->v, b->pos};
    return cand_cmp(&ca, &cb);
}

/* An element's place in the output: its offset in the receiving rank's
 * block, and its value (or global position, for argsort). */
typedef struct sput {
    int64_t at;
    lf_scalar v;
} sput;

/* Sort or argsort node s along the sharded axis a (output sharded with the
 * input's blocks lay): xb is the rank's block of s's input. A sample sort:
 * (1) each rank sorts its block's elements on the host by the strict key
 * (row, value in lf_sort's order, global position); (2) P - 1 regular
 * samples per rank are allgathered and every rank picks the same P - 1
 * splitters from the sorted samples; (3) each rank's sorted run is cut at
 * the splitters and sent to the bucket's rank (MPI_Alltoall of counts,
 * MPI_Alltoallv of 24-byte keys); (4) each rank sorts what it received: a
 * contiguous range of the global order, whose offset an allgather of the
 * bucket sizes gives; the element at global rank G lies in row G / len at
 * position G % len of the sorted axis; (5) a second MPI_Alltoallv sends
 * each (offset, value) to the rank whose block holds that position. Exact:
 * the key is strict, so every rank agrees on the order, which is lf_sort's
 * stable order (ties by global position). */
static lf_status cross_sort(mpi_ctx *m, const lf_node *s, const shard_buf *lay, int a, const void *xb, void *out) {
    const lf_node *x = s->inputs[0];
    int P = m->size;
    int64_t len = x->shape[a], inner = 1, outer = 1, glen = lay->global;
    for (int d = a + 1; d < x->ndim; d++) inner *= x->shape[d];
    for (int d = 0; d < a; d++) outer *= x->shape[d];
    int64_t nloc = x->numel, row0 = lay->starts[m->rank];
    skey *loc = graph_malloc((size_t)(nloc ? nloc : 1) * sizeof *loc);
    skey *samp = graph_malloc((size_t)P * (size_t)P * sizeof *samp); /* P - 1 per rank, + validity */
    int *cnt = graph_malloc(5 * (size_t)P * sizeof *cnt);
    int64_t *sizes = graph_malloc((size_t)P * sizeof *sizes);
    lf_status st = loc && samp && cnt && sizes ? LF_OK : LF_ERR_NOMEM;
    if (st == LF_OK && (double)nloc * sizeof(skey) > INT32_MAX) st = LF_ERR_INVALID;
    skey *recv = NULL;
    sput *puts = NULL, *got = NULL;
    int *sc = cnt, *rc = cnt + P, *sd = cnt + 2 * P, *rd = cnt + 3 * P, *cur = cnt + 4 * P;
    int64_t nrecv = 0;
    st = agree(m, st, st == LF_ERR_INVALID ? "lf_mpi_eval: a sort across ranks of more than 2^31 bytes per rank (MPI counts are int)"
                                           : "lf_mpi_eval: out of memory (a sort across ranks)");
    if (st != LF_OK) goto out;
    /* 1. the block's keys, sorted */
    cand_t = x->dtype, cand_desc = s->u.sort.descending;
    for (int64_t ou = 0; ou < outer; ou++)
        for (int64_t i = 0; i < len; i++)
            for (int64_t in = 0; in < inner; in++) {
                int64_t at = (ou * len + i) * inner + in;
                loc[at] = (skey){ou * inner + in, graph_scalar_load(xb, x->dtype, at), row0 + i};
            }
    qsort(loc, (size_t)nloc, sizeof *loc, skey_cmp);
    /* 2. regular samples (row -1 marks none: an empty block), splitters */
    skey mine[64], *ms = P <= 64 ? mine : samp + (size_t)(P - 1) * (size_t)P; /* spare room past the gathered */
    for (int j = 0; j < P - 1; j++)
        ms[j] = nloc ? loc[(int64_t)(j + 1) * nloc / P] : (skey){-1, {.i = 0}, 0};
    if (P > 1)
        MPI_Allgather(ms, (int)((P - 1) * sizeof(skey)), MPI_BYTE, samp, (int)((P - 1) * sizeof(skey)), MPI_BYTE,
                      m->comm);
    int nv = 0;
    for (int j = 0; j < P * (P - 1); j++)
        if (samp[j].row >= 0) samp[nv++] = samp[j];
    qsort(samp, (size_t)nv, sizeof *samp, skey_cmp);
    /* splitter b (0 .. P-2) is samp[(b + 1) * nv / P]; bucket b takes keys
       <= splitter b (and > splitter b - 1) */
    /* 3. cut the sorted run at the splitters */
    memset(sc, 0, (size_t)P * sizeof *sc);
    {
        int b = 0;
        for (int64_t e = 0; e < nloc; e++) {
            while (b < P - 1 && nv > 0 && skey_cmp(&loc[e], &samp[(int64_t)(b + 1) * nv / P]) > 0) b++;
            if (nv == 0) b = 0;
            sc[b]++;
        }
    }
    MPI_Alltoall(sc, 1, MPI_INT, rc, 1, MPI_INT, m->comm);
    sd[0] = rd[0] = 0;
    for (int q = 1; q < P; q++) sd[q] = sd[q - 1] + sc[q - 1], rd[q] = rd[q - 1] + rc[q - 1];
    nrecv = (int64_t)rd[P - 1] + rc[P - 1];
    recv = graph_malloc((size_t)(nrecv ? nrecv : 1) * sizeof *recv);
    puts = graph_malloc((size_t)(nrecv ? nrecv : 1) * sizeof *puts);
    got = graph_malloc((size_t)(nloc ? nloc : 1) * sizeof *got);
    st = recv && puts && got ? LF_OK : LF_ERR_NOMEM;
    if (st == LF_OK && (double)nrecv * sizeof(skey) > INT32_MAX) st = LF_ERR_INVALID;
    st = agree(m, st, st == LF_ERR_INVALID ? "lf_mpi_eval: a sort across ranks whose bucket exceeds 2^31 bytes (MPI counts are int)"
                                           : "lf_mpi_eval: out of memory (a sort across ranks)");
    if (st != LF_OK) goto out;
    for (int q = 0; q < P; q++) sc[q] *= (int)sizeof(skey), sd[q] *= (int)sizeof(skey), rc[q] *= (int)sizeof(skey),
                                rd[q] *= (int)sizeof(skey);
    MPI_Alltoallv(loc, sc, sd, MPI_BYTE, recv, rc, rd, MPI_BYTE, m->comm);
    /* 4. this rank's range of the global order */
    qsort(recv, (size_t)nrecv, sizeof *recv, skey_cmp);
    MPI_Allgather(&nrecv, 1, MPI_INT64_T, sizes, 1, MPI_INT64_T, m->comm);
    int64_t g0 = 0;
    for (int q = 0; q < m->rank; q++) g0 += sizes[q];
    /* 5. each element to the rank holding its sorted position */
    memset(sc, 0, (size_t)P * sizeof *sc);
    for (int64_t j = 0; j < nrecv; j++) sc[owner_of(lay, P, (g0 + j) % glen)]++;
    sd[0] = 0;
    for (int q = 1; q < P; q++) sd[q] = sd[q - 1] + sc[q - 1];
    memcpy(cur, sd, (size_t)P * sizeof *cur);
    for (int64_t j = 0; j < nrecv; j++) {
        int64_t G = g0 + j, row = G / glen, p = G % glen;
        int q = owner_of(lay, P, p);
        int64_t ou = row / inner, in = row % inner;
        puts[cur[q]++] = (sput){(ou * lay->counts[q] + (p - lay->starts[q])) * inner + in,
                                s->u.sort.indices ? (lf_scalar){.i = recv[j].pos} : recv[j].v};
    }
    MPI_Alltoall(sc, 1, MPI_INT, rc, 1, MPI_INT, m->comm);
    rd[0] = 0;
    for (int q = 1; q < P; q++) rd[q] = rd[q - 1] + rc[q - 1];
    for (int q = 0; q < P; q++) sc[q] *= (int)sizeof(sput), sd[q] *= (int)sizeof(sput), rc[q] *= (int)sizeof(sput),
                                rd[q] *= (int)sizeof(sput);
    MPI_Alltoallv(puts, sc, sd, MPI_BYTE, got, rc, rd, MPI_BYTE, m->comm);
    for (int64_t j = 0; j < nloc; j++) graph_scalar_store(out, s->dtype, got[j].at, got[j].v);
out:
    graph_free(loc), graph_free(samp), graph_free(cnt), graph_free(sizes), graph_free(recv), graph_free(puts),
        graph_free(got);
    return st;
}

/* ---- lf_mpi_eval ----------------------------------------------------------- */

/* The collective agreement: every rank learns the lowest failing rank's
 * status and message; returns that status (LF_OK when none failed) and
 * records the message on ctx. */
static lf_status agree(mpi_ctx *m, lf_status st, const char *msg) {
    /* (rank if failed else size, status) with MINLOC: the lowest failing
       rank and its status; no allocation, so every rank always takes part */
    int pair[2] = {st != LF_OK ? m->rank : m->size, (int)st}, first[2];
    MPI_Allreduce(pair, first, 1, MPI_2INT, MPI_MINLOC, m->comm);
    if (first[0] >= m->size) return LF_OK;
    char buf[LF_ERRMSG_CAP];
    snprintf(buf, sizeof buf, "%s", m->rank == first[0] ? msg : "");
    MPI_Bcast(buf, (int)sizeof buf, MPI_CHAR, first[0], m->comm);
    buf[sizeof buf - 1] = 0;
    graph_error(m->ctx, (lf_status)first[1], "rank %d: %s", first[0], buf);
    return (lf_status)first[1];
}

lf_status lf_mpi_eval(lf_graph *g, int n, lf_node *const *outs, lf_buffer *const *dsts) {
    if (!g) return graph_error(NULL, LF_ERR_NULL, "lf_mpi_eval: graph is NULL");
    mpi_ctx *m = find_ctx(g->ctx);
    if (!m) return graph_error(g->ctx, LF_ERR_STATE, "lf_mpi_eval: the graph's context is not an MPI context");
    analysis A = {.m = m, .g = g, .st = LF_OK};
    int nloc = 0;
    lf_node **loc = NULL;  /* nodes the local lf_eval computes */
    lf_buffer **tmp = NULL; /* their temporaries */
    int *which = NULL;     /* per output: index into loc of what it needs */
    int *which2 = NULL;    /* per output: a take's indices (index into loc) */
    void **host = NULL;    /* per output: host result of a cross node */
    int (*wmap)[LF_MAX_ARGS] = NULL; /* per output: a contraction's map inputs (indices into loc) */
    lf_status st = LF_OK;

    if (g->status != LF_OK) {
        A.st = g->status;
        snprintf(A.msg, sizeof A.msg, "%s", g->errmsg);
    } else if (n < 1 || !outs || !dsts) {
        A.st = n < 1 ? LF_ERR_INVALID : LF_ERR_NULL;
        snprintf(A.msg, sizeof A.msg, "lf_mpi_eval: needs 1 or more outputs and their buffers");
    } else {
        for (int i = 0; i < n && A.st == LF_OK; i++)
            if (!outs[i] || !dsts[i] || !graph_owns(g, outs[i])) {
                A.st = !outs[i] || !dsts[i] ? LF_ERR_NULL : LF_ERR_STATE;
                snprintf(A.msg, sizeof A.msg, "lf_mpi_eval: output %d is NULL or not a node of this graph", i);
            }
    }
    if (A.st == LF_OK) {
        A.pl = graph_calloc((size_t)g->nnodes, sizeof *A.pl);
        loc = graph_calloc((2 + LF_MAX_ARGS) * (size_t)n, sizeof *loc);
        tmp = graph_calloc((2 + LF_MAX_ARGS) * (size_t)n, sizeof *tmp);
        wmap = graph_calloc((size_t)n, sizeof *wmap);
        which2 = graph_calloc((size_t)n, sizeof *which2);
        which = graph_calloc((size_t)n, sizeof *which);
        host = graph_calloc((size_t)n, sizeof *host);
        if (!A.pl || !loc || !tmp || !which || !which2 || !host || !wmap) A.st = LF_ERR_NOMEM, snprintf(A.msg, sizeof A.msg, "lf_mpi_eval: out of memory");
    }
    if (A.st == LF_OK) {
        for (int i = 0; i < n; i++) A.pl[outs[i]->id].needed = true;
        for (int id = g->nnodes - 1; id >= 0; id--)
            if (A.pl[id].needed)
                for (int k = 0; k < g->nodes[id]->ninputs; k++) A.pl[g->nodes[id]->inputs[k]->id].needed = true;
        for (int id = 0; id < g->nnodes && A.st == LF_OK; id++)
            if (A.pl[id].needed) place_node(&A, g->nodes[id]);
    }
    /* outputs: check their buffers, list what the local eval computes */
    for (int i = 0; i < n && A.st == LF_OK; i++) {
        lf_node *o = outs[i];
        const place *p = &A.pl[o->id];
        const shard_buf *d = find_buf(m, dsts[i]);
        char node[256];
        graph_node_str(o, node, sizeof node);
        if (dsts[i]->ctx != m->ctx) {
            A.st = LF_ERR_STATE;
            snprintf(A.msg, sizeof A.msg, "lf_mpi_eval: output %d's buffer belongs to another context", i);
        } else if (p->axis >= 0 && (!d || d->axis != p->axis || !same_blocks(d, p->lay, m->size))) {
            A.st = LF_ERR_INVALID;
            snprintf(A.msg, sizeof A.msg,
                     "lf_mpi_eval: output %d, %s, is sharded along axis %d: its buffer must be a sharded buffer "
                     "with the same blocks along that axis",
                     i, node, p->axis);
        } else if (p->cross && o->kind == NODE_SORT && d) {
            /* a sharded output: lf_sort / lf_argsort of the whole axis */
            const place *q = &A.pl[o->inputs[0]->id];
            if (d->axis != q->axis || !same_blocks(d, q->lay, m->size)) {
                A.st = LF_ERR_INVALID;
                snprintf(A.msg, sizeof A.msg,
                         "lf_mpi_eval: output %d, %s, a sort along the sharded axis %d: its buffer must be sharded "
                         "along that axis with its input's blocks",
                         i, node, q->axis);
            } else if (o->u.sort.k != o->inputs[0]->shape[q->axis]) {
                A.st = LF_ERR_INVALID;
                snprintf(A.msg, sizeof A.msg,
                         "lf_mpi_eval: output %d, %s: a top-k along the sharded axis needs a replicated buffer (a "
                         "sharded buffer is for lf_sort / lf_argsort of the whole axis)",
                         i, node);
            }
        } else if (p->axis < 0 && d) {
            A.st = LF_ERR_INVALID;
            snprintf(A.msg, sizeof A.msg, "lf_mpi_eval: output %d, %s, is replicated: its buffer must not be sharded", i,
                     node);
        } else if (dsts[i]->strided) {
            A.st = LF_ERR_INVALID;
            snprintf(A.msg, sizeof A.msg, "lf_mpi_eval: output %d's buffer is a strided wrap (not writable)", i);
        } else if (dsts[i]->dtype != o->dtype || dsts[i]->ndim != o->ndim ||
                   memcmp(dsts[i]->shape, o->shape, (size_t)o->ndim * sizeof *o->shape)) {
            A.st = LF_ERR_INVALID;
            snprintf(A.msg, sizeof A.msg, "lf_mpi_eval: output %d, %s: its buffer's dtype or (block) shape differs", i,
                     node);
        }
        for (int j = 0; j < i && A.st == LF_OK; j++)
            if (dsts[j] == dsts[i]) {
                A.st = LF_ERR_INVALID;
                snprintf(A.msg, sizeof A.msg, "lf_mpi_eval: outputs %d and %d have the same buffer", j, i);
            }
        if (A.st != LF_OK) break;
        graph_contract con;
        if (p->cross && o->kind == NODE_SCATTER) {
            /* a scatter across ranks: the host reads dst, idx and values */
            for (int a = 0; a < 3; a++) {
                int k = 0;
                while (k < nloc && loc[k] != o->inputs[a]) k++;
                if (k == nloc) loc[nloc++] = o->inputs[a];
                wmap[i][a] = k;
            }
            which[i] = wmap[i][0];
            continue;
        }
        if (p->cross && o->kind == NODE_REDUCE && graph_contraction(o, &con)) {
            /* a contraction across ranks: the host walks its map's inputs */
            for (int a = 0; a < con.map->ninputs; a++) {
                int k = 0;
                while (k < nloc && loc[k] != con.map->inputs[a]) k++;
                if (k == nloc) loc[nloc++] = con.map->inputs[a];
                wmap[i][a] = k;
            }
            which[i] = wmap[i][0];
            continue;
        }
        lf_node *need = o;
        if (p->cross && !(o->kind == NODE_REDUCE &&
                          partial_from_kernel(o->u.reduce.op, graph_red_acc_dtype(o->u.reduce.op, o->inputs[0]->dtype))) &&
            !(o->kind == NODE_SCAN && scan_in_parallel(o)))
            need = o->inputs[0]; /* the host folds the stored input */
        int k = 0;
        while (k < nloc && loc[k] != need) k++;
        if (k == nloc) loc[nloc++] = need;
        which[i] = k;
        if (p->cross && o->kind == NODE_GATHER) { /* a take across ranks: its indices too */
            for (k = 0; k < nloc && loc[k] != o->inputs[1];) k++;
            if (k == nloc) loc[nloc++] = o->inputs[1];
            which2[i] = k;
        }
    }
    /* the local part: one lf_eval of everything the outputs need */
    if (A.st == LF_OK) {
        for (int k = 0; k < nloc && A.st == LF_OK; k++)
            if (!(tmp[k] = lf_buffer_new_like(m->ctx, loc[k])))
                A.st = LF_ERR_NOMEM, snprintf(A.msg, sizeof A.msg, "%s", lf_errmsg(m->ctx));
        if (A.st == LF_OK && (A.st = lf_eval(g, nloc, loc, tmp)) != LF_OK)
            snprintf(A.msg, sizeof A.msg, "%s", lf_errmsg(m->ctx));
    }
    st = agree(m, A.st, A.msg);
    /* the cross-rank part: every rank reaches here together, or none does */
    lf_status st2 = LF_OK;
    for (int i = 0; i < n && st == LF_OK; i++) {
        const lf_node *o = outs[i];
        const place *p = &A.pl[o->id];
        if (!p->cross) continue;
        const lf_node *x = o->inputs[0];
        const place *q = &A.pl[x->id];
        graph_contract con;
        bool scat = o->kind == NODE_SCATTER;
        if (scat || (o->kind == NODE_REDUCE && graph_contraction(o, &con))) {
            int nm = scat ? 3 : con.map->ninputs;
            void *mins[LF_MAX_ARGS] = {0};
            lf_status s = LF_OK;
            host[i] = graph_malloc(dsts[i]->bytes ? dsts[i]->bytes : 1);
            if (!host[i]) s = LF_ERR_NOMEM;
            for (int a = 0; a < nm && s == LF_OK; a++) {
                lf_buffer *b = tmp[wmap[i][a]];
                if (!(mins[a] = graph_malloc(b->bytes ? b->bytes : 1))) s = LF_ERR_NOMEM;
                else s = lf_buffer_read(b, mins[a], b->bytes);
            }
            lf_status sa = agree(m, s, s == LF_ERR_NOMEM ? "lf_mpi_eval: out of memory" : lf_errmsg(m->ctx));
            if (sa == LF_OK && scat)
                sa = cross_scatter(m, o, A.pl[o->inputs[1]->id].lay->starts[m->rank], mins[0], mins[1], mins[2], host[i]);
            else if (sa == LF_OK)
                sa = cross_contract(m, o, &con, mins, host[i]);
            for (int a = 0; a < nm; a++) graph_free(mins[a]);
            if (sa != LF_OK) {
                if (sa == LF_ERR_NOMEM) graph_error(m->ctx, sa, "lf_mpi_eval: out of memory (on some rank)");
                st2 = sa;
                break;
            }
            continue;
        }
        bool take = o->kind == NODE_GATHER;
        lf_buffer *ibuf = take ? tmp[which2[i]] : NULL;
        void *xb = graph_malloc(tmp[which[i]]->bytes ? tmp[which[i]]->bytes : 1);
        void *ib = take ? graph_malloc(ibuf->bytes ? ibuf->bytes : 1) : NULL;
        host[i] = graph_malloc(dsts[i]->bytes ? dsts[i]->bytes : 1);
        lf_status s = LF_OK;
        if (!xb || !host[i] || (take && !ib)) s = LF_ERR_NOMEM;
        else s = lf_buffer_read(tmp[which[i]], xb, tmp[which[i]]->bytes);
        if (s == LF_OK && take) s = lf_buffer_read(ibuf, ib, ibuf->bytes);
        /* agree before the relay or allgather: a rank that failed to read
           must not leave the others waiting */
        lf_status sa = agree(m, s, s == LF_ERR_NOMEM ? "lf_mpi_eval: out of memory" : lf_errmsg(m->ctx));
        if (sa == LF_OK && take) {
            const place *qi = &A.pl[o->inputs[1]->id];
            sa = cross_take(m, o, q->lay, qi->axis, qi->axis >= 0 ? qi->lay->starts[m->rank] : -1, xb, ib, host[i]);
        } else if (sa == LF_OK)
            sa = o->kind == NODE_REDUCE ? cross_reduce(m, o, q->lay, q->axis, xb, host[i])
                 : o->kind == NODE_SORT && find_buf(m, dsts[i]) ? cross_sort(m, o, q->lay, q->axis, xb, host[i])
                 : o->kind == NODE_SORT ? cross_topk(m, o, q->lay, q->axis, xb, host[i])
                 : scan_in_parallel(o)  ? cross_scan_parallel(m, o, q->axis, xb, host[i])
                                        : cross_scan(m, o, q->axis, xb, host[i]);
        graph_free(xb), graph_free(ib);
        if (sa != LF_OK) {
            if (sa == LF_ERR_NOMEM) graph_error(m->ctx, sa, "lf_mpi_eval: out of memory (on some rank)");
            st2 = sa;
            break;
        }
    }
    if (st == LF_OK) st = st2; /* st2 was agreed already (every rank saw it) */
    /* every result in host memory, then agree: the commit below allocates
       nothing, so no rank can fail there after another has written */
    if (st == LF_OK) {
        lf_status sp = LF_OK;
        for (int i = 0; i < n && sp == LF_OK; i++) {
            if (host[i]) continue; /* a cross result, already on the host */
            if (!(host[i] = graph_malloc(dsts[i]->bytes ? dsts[i]->bytes : 1)))
                sp = graph_error(m->ctx, LF_ERR_NOMEM, "lf_mpi_eval: out of memory");
            else
                sp = lf_buffer_read(tmp[which[i]], host[i], dsts[i]->bytes);
        }
        st = agree(m, sp, lf_errmsg(m->ctx));
    }
    /* commit: only now do output buffers change, on every rank */
    if (st == LF_OK) {
        lf_status sc = LF_OK;
        for (int i = 0; i < n && sc == LF_OK; i++) sc = lf_buffer_write(dsts[i], host[i], dsts[i]->bytes);
        /* collective as every step; a host backend's write is a copy that
           cannot fail here (a device backend's copy could, and then some
           ranks have written: lazyfuse_mpi.h) */
        st = agree(m, sc, lf_errmsg(m->ctx));
    }
    for (int k = 0; k < nloc; k++) lf_buffer_free(tmp[k]);
    if (host)
        for (int i = 0; i < n; i++) graph_free(host[i]);
    graph_free(A.pl), graph_free(loc), graph_free(tmp), graph_free(which), graph_free(which2), graph_free(host), graph_free(wmap);
    return st;
}
