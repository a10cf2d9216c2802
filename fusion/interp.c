/* fusion/interp.c: the schedule interpreter.
 *
 * Runs a fused schedule without codegen: kernel by kernel in schedule order,
 * element by element in row-major order of each kernel's iteration space,
 * each load computed through its index map, the composed body evaluated in
 * registers by graph_fn_eval. It is the executable meaning of a schedule, so
 * fusion can be tested against the reference evaluator before any backend
 * exists.
 *
 * Reductions fold exactly as graph/eval_ref.c does, so results are
 * bit-identical: for each output element the reduced positions are visited in
 * row-major order, floating values (and means of integers) accumulate in
 * double, integer sums and products in wrapping int64, and the result is
 * rounded once; min/max propagate NaN; argmin/argmax keep the first extreme
 * (the first NaN if any); an empty sum is 0, an empty product 1, an empty
 * mean NaN. Iotas are computed as the reference computes them.
 *
 * Memory: inputs are read in place; every output gets fresh memory (the
 * caller copies it into the user's buffers, so a failed eval changes
 * nothing); temporaries live in the schedule's shared memory blocks. All
 * allocation happens before the first kernel runs.
 */
#include "fusion/fusion.h"

#include <math.h>
#include <string.h>

/* ---- values ------------------------------------------------------------------- */

/* Element i of an iota node, as graph/eval_ref.c computes it. */
static lf_scalar iota_value(const lf_node *n, int64_t i) {
    double start = n->u.iota.start, step = n->u.iota.step;
    bool exact = !graph_dtype_is_float(n->dtype) && start == trunc(start) && step == trunc(step) &&
                 fabs(start) < 9e18 && fabs(step) < 9e18;
    lf_scalar v;
    if (exact) {
        v.i = (int64_t)((uint64_t)(int64_t)start + (uint64_t)i * (uint64_t)(int64_t)step);
        return graph_scalar_convert(v, LF_I64, n->dtype);
    }
    v.f = start + (double)i * step;
    return graph_scalar_convert(v, LF_F64, n->dtype);
}

static void load_all(const fuse_load *ls, int n, void *const *data, const int64_t *idx,
                     lf_scalar *args) {
    for (int j = 0; j < n; j++) {
        const fuse_load *l = &ls[j];
        if (l->src == FUSE_SRC_ACC) continue; /* set by the caller */
        int64_t e = fuse_map_apply(&l->map, idx);
        args[j] = l->src == FUSE_SRC_IOTA ? iota_value(l->node, e)
                                          : graph_scalar_load(data[l->slot], l->dtype, e);
    }
}

/* Advances a row-major multi-index over the axes listed in ax. */
static void next_index(int nax, const int *ax, const int64_t *shape, int64_t *idx) {
    for (int j = nax - 1; j >= 0; j--) {
        int d = ax[j];
        if (++idx[d] < shape[d]) return;
        idx[d] = 0;
    }
}

/* ---- reductions (as graph/eval_ref.c) --------------------------------------------- */

typedef struct red_acc {
    lf_scalar v;    /* running sum / product / extreme (double or int64) */
    int64_t arg;    /* argmin/argmax: position of the extreme in the reduced set */
    bool started;   /* min/max/arg: an element has been seen */
} red_acc;

static void fold(red_acc *a, lf_reduce_op op, bool fl, lf_scalar x, int64_t pos) {
    switch (op) {
    case LF_RED_SUM:
    case LF_RED_MEAN:
        if (fl) a->v.f += x.f;
        else a->v.i = (int64_t)((uint64_t)a->v.i + (uint64_t)x.i);
        return;
    case LF_RED_PROD:
        if (fl) a->v.f *= x.f;
        else a->v.i = (int64_t)((uint64_t)a->v.i * (uint64_t)x.i);
        return;
    default: break;
    }
    bool want_min = op == LF_RED_MIN || op == LF_RED_ARGMIN;
    bool better;
    if (!a->started) better = true;
    else if (fl) better = !isnan(a->v.f) && (isnan(x.f) || (want_min ? x.f < a->v.f : x.f > a->v.f));
    else better = want_min ? x.i < a->v.i : x.i > a->v.i;
    if (better) {
        a->v = x;
        a->arg = pos;
        a->started = true;
    }
}

/* ---- kernels ------------------------------------------------------------------------ */

static void store_all(const fuse_schedule *s, const fuse_kernel *kn, void *const *data,
                      const lf_scalar *vals, int64_t at) {
    for (int j = 0; j < kn->nstores; j++) {
        const fuse_slot *sl = &s->slots[kn->stores[j].slot];
        graph_scalar_store(data[kn->stores[j].slot], sl->dtype, at, vals[kn->stores[j].expr]);
    }
}

static void load_dtypes(const fuse_load *ls, int n, lf_dtype *params) {
    for (int j = 0; j < n; j++) params[j] = ls[j].dtype;
}

static void run_elementwise(const fuse_schedule *s, const fuse_kernel *kn, void *const *data,
                            lf_scalar *vals) {
    lf_dtype params[LF_MAX_ARGS];
    lf_scalar args[LF_MAX_ARGS];
    int ax[LF_MAX_DIMS];
    int64_t idx[LF_MAX_DIMS] = {0};
    load_dtypes(kn->loads, kn->nloads, params);
    for (int d = 0; d < kn->ndim; d++) ax[d] = d;
    for (int64_t i = 0; i < kn->numel; i++) {
        load_all(kn->loads, kn->nloads, data, idx, args);
        graph_fn_eval(kn->body, params, kn->body_etype, kn->body_ctype, args, vals);
        store_all(s, kn, data, vals, i);
        next_index(kn->ndim, ax, kn->shape, idx);
    }
}

static void run_reduce(const fuse_schedule *s, const fuse_kernel *kn, void *const *data,
                       lf_scalar *vals) {
    lf_dtype params[LF_MAX_ARGS], eparams[LF_MAX_ARGS];
    lf_scalar args[LF_MAX_ARGS];
    int kept[LF_MAX_DIMS], red[LF_MAX_DIMS], nkept = 0, nred = 0;
    int64_t count = 1;
    for (int d = 0; d < kn->ndim; d++) {
        if (kn->redmask & (1u << d)) {
            red[nred++] = d;
            count *= kn->shape[d];
        } else {
            kept[nkept++] = d;
        }
    }
    load_dtypes(kn->loads, kn->nloads, params);
    load_dtypes(kn->epi_loads, kn->nepi_loads, eparams);
    lf_reduce_op op = kn->red_op;
    bool fl = graph_dtype_is_float(kn->red_in) || op == LF_RED_MEAN;
    lf_dtype acc_t = fl ? LF_F64 : LF_I64;
    bool keep = kn->out_ndim == kn->ndim; /* keepdims (or nothing reduced) */
    int64_t idx[LF_MAX_DIMS] = {0}, oidx[LF_MAX_DIMS];
    for (int64_t o = 0; o < kn->out_numel; o++) {
        red_acc acc;
        memset(&acc, 0, sizeof acc);
        if (op == LF_RED_PROD) {
            if (fl) acc.v.f = 1.0;
            else acc.v.i = 1;
        }
        for (int j = 0; j < nred; j++) idx[red[j]] = 0;
        for (int64_t pos = 0; pos < count; pos++) {
            load_all(kn->loads, kn->nloads, data, idx, args);
            graph_fn_eval(kn->body, params, kn->body_etype, kn->body_ctype, args, vals);
            lf_scalar v = graph_scalar_convert(vals[kn->red_expr], kn->red_in, acc_t);
            fold(&acc, op, fl, v, pos);
            next_index(nred, red, kn->shape, idx);
        }
        lf_scalar r = acc.v;
        if (op == LF_RED_ARGMIN || op == LF_RED_ARGMAX) {
            r.i = acc.arg;
        } else {
            if (op == LF_RED_MEAN) r.f = r.f / (double)count; /* 0/0 is NaN for empty sets */
            r = graph_scalar_convert(r, acc_t, kn->red_node->dtype);
        }
        /* the epilogue, at this element's index in the output's shape */
        int no = 0;
        for (int d = 0; d < kn->ndim; d++) {
            if (!(kn->redmask & (1u << d))) oidx[no++] = idx[d];
            else if (keep) oidx[no++] = 0;
        }
        load_all(kn->epi_loads, kn->nepi_loads, data, oidx, args);
        args[0] = r;
        graph_fn_eval(kn->epi, eparams, kn->epi_etype, kn->epi_ctype, args, vals);
        store_all(s, kn, data, vals, o);
        next_index(nkept, kept, kn->shape, idx);
    }
}

/* ---- the driver ------------------------------------------------------------------------ */

lf_status fuse_interpret(const fuse_schedule *s, void **results) {
    lf_ctx *ctx = s->graph->ctx;
    int maxexprs = 1;
    for (int k = 0; k < s->nkernels; k++) {
        const fuse_kernel *kn = &s->kernels[k];
        if (kn->body->nexprs > maxexprs) maxexprs = kn->body->nexprs;
        if (kn->epi && kn->epi->nexprs > maxexprs) maxexprs = kn->epi->nexprs;
    }
    lf_scalar *vals = graph_malloc((size_t)maxexprs * sizeof *vals);
    void **data = graph_calloc((size_t)s->nslots + 1, sizeof *data);
    void **blocks = graph_calloc((size_t)s->nblocks + 1, sizeof *blocks);
    lf_status st = LF_OK;
    if (!vals || !data || !blocks) goto nomem;
    for (int b = 0; b < s->nblocks; b++)
        if (s->block_bytes[b] && !(blocks[b] = graph_malloc(s->block_bytes[b]))) goto nomem;
    for (int i = 0; i < s->nouts; i++) results[i] = NULL;
    for (int i = 0; i < s->nouts; i++) {
        const fuse_slot *sl = &s->slots[s->out_slot[i]];
        if (sl->bytes && !(results[i] = graph_malloc(sl->bytes))) goto nomem;
    }
    for (int j = 0; j < s->nslots; j++) {
        const fuse_slot *sl = &s->slots[j];
        switch (sl->kind) {
        case FUSE_SLOT_INPUT: data[j] = sl->buffer->data; break;
        case FUSE_SLOT_OUTPUT: data[j] = results[sl->output]; break;
        case FUSE_SLOT_TEMP: data[j] = blocks[sl->block]; break;
        }
    }
    for (int k = 0; k < s->nkernels; k++) {
        const fuse_kernel *kn = &s->kernels[k];
        if (kn->epi) run_reduce(s, kn, data, vals);
        else run_elementwise(s, kn, data, vals);
    }
    /* an output evaluated twice: the later copies take the first's value */
    for (int i = 0; i < s->nouts; i++) {
        const fuse_slot *sl = &s->slots[s->out_slot[i]];
        if (sl->output != i && sl->bytes) memcpy(results[i], results[sl->output], sl->bytes);
    }
    goto done;
nomem:
    st = graph_error(ctx, LF_ERR_NOMEM, "eval: out of memory running the fused schedule");
    for (int i = 0; i < s->nouts; i++) {
        graph_free(results[i]);
        results[i] = NULL;
    }
done:
    if (blocks)
        for (int b = 0; b < s->nblocks; b++) graph_free(blocks[b]);
    graph_free(blocks);
    graph_free(data);
    graph_free(vals);
    return st;
}
