/* fusion/interp.c: the schedule interpreter.
 *
 * Runs a fused schedule without codegen: kernel by kernel in schedule order,
 * element by element in row-major order of each kernel's iteration space,
 * each load computed through its index map, the composed body evaluated in
 * registers by graph_fn_eval. It is the executable meaning of a schedule, so
 * fusion can be tested against the reference evaluator before any backend
 * exists.
 *
 * Reduction kernels run, for each output element: each pass in order (one
 * loop over the reduced positions folding that pass's reductions; a later
 * pass reads the finished results of earlier ones), then the epilogue once,
 * then the row pass (if any) over the same positions, storing full-size
 * values. Reductions fold exactly as graph/eval_ref.c does, so results are
 * bit-identical: for each output element the reduced positions are visited in
 * row-major order, floating values (and means of integers) accumulate in
 * double, integer sums and products in wrapping int64, and the result is
 * rounded once; min/max propagate NaN; argmin/argmax keep the first extreme
 * (the first NaN if any); an empty sum is 0, an empty product 1, an empty
 * mean NaN; a contraction folds its product's operands (fuse_red_contraction)
 * as graph_contract_fold does. Iotas and random nodes are computed as the
 * reference computes them.
 *
 * Constant nodes are read when a kernel runs (EXPR_SCALAR in graph_fn_eval,
 * a scatter's constant dst from its node), so a schedule follows
 * lf_scalar_set without being planned again.
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

/* A gather load met an index out of range in the running kernel. */
static _Thread_local bool index_bad;

static void load_all(const fuse_load *ls, int n, void *const *data, const int64_t *idx,
                     lf_scalar *args) {
    for (int j = 0; j < n; j++) {
        const fuse_load *l = &ls[j];
        if (l->src == FUSE_SRC_ACC || l->src == FUSE_SRC_GATHER) continue; /* caller; below */
        if (l->src == FUSE_SRC_SLOT && !data[l->slot]) { /* empty: only a gather's base reads it */
            args[j].i = 0;
            continue;
        }
        int64_t e = fuse_map_apply(&l->map, idx);
        if (l->src == FUSE_SRC_IOTA)
            args[j] = l->node->kind == NODE_RANDOM ? graph_random_value(l->node, e) : iota_value(l->node, e);
        else
            args[j] = graph_scalar_load(data[l->slot], l->dtype, e);
    }
    for (int j = 0; j < n; j++) { /* gathers: their index loads are read above */
        const fuse_load *l = &ls[j];
        if (l->src != FUSE_SRC_GATHER) continue;
        int64_t t = graph_gather_wrap(args[l->gidx].i, l->gextent);
        if (t < 0) {
            index_bad = true;
            args[j].i = 0;
            args[j] = graph_scalar_convert(args[j], LF_I64, l->dtype);
            continue;
        }
        args[j] = graph_scalar_load(data[l->slot], l->dtype, fuse_map_apply(&l->map, idx) + t * l->gstride);
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

/* ---- kernels ------------------------------------------------------------------------ */

/* Stores of kn with the given row flag, at element `at`. */
static void store_all(const fuse_schedule *s, const fuse_kernel *kn, void *const *data,
                      const lf_scalar *vals, int64_t at, bool row, bool pos) {
    for (int j = 0; j < kn->nstores; j++) {
        if (kn->stores[j].row != row || kn->stores[j].pos != pos) continue;
        const fuse_slot *sl = &s->slots[kn->stores[j].slot];
        graph_scalar_store(data[kn->stores[j].slot], sl->dtype, at, vals[kn->stores[j].expr]);
    }
}

static void load_dtypes(const fuse_load *ls, int n, lf_dtype *params) {
    for (int j = 0; j < n; j++) params[j] = ls[j].dtype;
}

static void run_elementwise(const fuse_schedule *s, const fuse_kernel *kn, void *const *data,
                            lf_scalar *vals) {
    lf_dtype params[GRAPH_MAX_PARAMS];
    lf_scalar args[GRAPH_MAX_PARAMS];
    int ax[LF_MAX_DIMS];
    int64_t idx[LF_MAX_DIMS] = {0};
    load_dtypes(kn->loads, kn->nloads, params);
    for (int d = 0; d < kn->ndim; d++) ax[d] = d;
    for (int64_t i = 0; i < kn->numel; i++) {
        load_all(kn->loads, kn->nloads, data, idx, args);
        graph_fn_eval(kn->body, params, kn->body_etype, kn->body_ctype, args, vals);
        store_all(s, kn, data, vals, i, false, false);
        next_index(kn->ndim, ax, kn->shape, idx);
    }
}

/* A scatter kernel: the body at every position, its value combined into
 * the store's slot at the target in the order of lazyfuse.h (as
 * graph_eval_scatter: blocks into partials, then dst (+) partials). */
static lf_status run_scatter(const fuse_schedule *s, const fuse_kernel *kn, void *const *data, lf_scalar *vals) {
    const lf_node *n = kn->scatter;
    graph_scatter_geom gm;
    graph_scatter_geom_of(n, &gm);
    lf_scatter_op op = n->u.scatter.op;
    lf_dtype t = n->dtype, params[GRAPH_MAX_PARAMS];
    lf_scalar args[GRAPH_MAX_PARAMS];
    int ax[LF_MAX_DIMS];
    int64_t idx[LF_MAX_DIMS] = {0}, dn = n->numel;
    void *out = data[kn->stores[0].slot];
    lf_scalar *part = graph_malloc((size_t)(dn ? dn : 1) * sizeof *part);
    bool *set = graph_calloc((size_t)(dn ? dn : 1), sizeof *set);
    if (!part || !set) {
        graph_free(part);
        graph_free(set);
        return graph_error(s->graph->ctx, LF_ERR_NOMEM, "eval: out of memory running the fused schedule");
    }
    for (int64_t j = 0; j < dn; j++)
        graph_scalar_store(out, t, j, kn->scat_dst_slot >= 0 ? graph_scalar_load(data[kn->scat_dst_slot], t, j) : kn->scalars[kn->scat_dst_scalar]->u.value);
    load_dtypes(kn->loads, kn->nloads, params);
    for (int d = 0; d < kn->ndim; d++) ax[d] = d;
    for (int64_t b = 0; b < gm.nblocks; b++) {
        lf_scalar id = graph_scatter_identity(op, t);
        for (int64_t j = 0; j < dn; j++) part[j] = id, set[j] = false;
        int64_t hi = (b + 1) * gm.block < gm.numel ? (b + 1) * gm.block : gm.numel;
        for (int64_t i = b * gm.block; i < hi; i++) {
            load_all(kn->loads, kn->nloads, data, idx, args);
            graph_fn_eval(kn->body, params, kn->body_etype, kn->body_ctype, args, vals);
            int64_t te = 0;
            for (int d = 0; d < gm.ndim; d++) te += idx[d] * gm.dst_strides[d];
            int64_t iv = vals[kn->scat_idx_expr].i;
            int64_t w = iv < 0 && n->u.scatter.nonneg ? -1 : graph_gather_wrap(iv, gm.dst_extent); /* bincount */
            next_index(kn->ndim, ax, kn->shape, idx);
            if (w < 0) {
                index_bad = true;
                continue;
            }
            te += w * gm.dst_axis_stride;
            lf_scalar v = vals[kn->stores[0].expr];
            part[te] = op == LF_SCATTER_SET ? v : graph_scatter_combine(op, t, part[te], v);
            set[te] = true;
        }
        for (int64_t j = 0; j < dn; j++) {
            if (op == LF_SCATTER_SET) {
                if (set[j]) graph_scalar_store(out, t, j, part[j]);
            } else {
                graph_scalar_store(out, t, j, graph_scatter_combine(op, t, graph_scalar_load(out, t, j), part[j]));
            }
        }
    }
    graph_free(part);
    graph_free(set);
    return LF_OK;
}

/* A sort kernel (plan_sort.c): the body at every position of its space (the
 * sort input's rows one after the other), each value put back at its dense
 * place in the sort input, then graph_eval_sort of each sort node of the
 * kernel into its slot, as the reference evaluator does. */
static lf_status run_sort(const fuse_schedule *s, const fuse_kernel *kn, void *const *data, lf_scalar *vals) {
    const lf_node *n = kn->sort, *x = n->inputs[0];
    graph_sort_geom gm;
    graph_sort_geom_of(n, &gm);
    lf_dtype params[GRAPH_MAX_PARAMS];
    lf_scalar args[GRAPH_MAX_PARAMS];
    int ax[LF_MAX_DIMS];
    int64_t idx[LF_MAX_DIMS] = {0};
    size_t bytes = (size_t)x->numel * lf_dtype_size(x->dtype);
    void *keys = graph_malloc(bytes ? bytes : 1);
    if (!keys) return graph_error(s->graph->ctx, LF_ERR_NOMEM, "eval: out of memory running the fused schedule");
    load_dtypes(kn->loads, kn->nloads, params);
    for (int d = 0; d < kn->ndim; d++) ax[d] = d;
    for (int64_t i = 0; i < kn->numel; i++) {
        load_all(kn->loads, kn->nloads, data, idx, args);
        graph_fn_eval(kn->body, params, kn->body_etype, kn->body_ctype, args, vals);
        int64_t r = gm.n ? i / gm.n : 0, j = i - r * gm.n;
        graph_scalar_store(keys, x->dtype, graph_sort_row_base(&gm, r, false) + j * gm.x_stride,
                           vals[kn->stores[0].expr]);
        next_index(kn->ndim, ax, kn->shape, idx);
    }
    lf_status st = LF_OK;
    const lf_node *outs[2] = {kn->sort_values, kn->sort_indices};
    for (int o = 0; o < 2 && st == LF_OK; o++) {
        if (!outs[o]) continue;
        for (int j = 0; j < kn->nstores; j++)
            if (s->slots[kn->stores[j].slot].node == outs[o] && data[kn->stores[j].slot])
                st = graph_eval_sort(outs[o], keys, data[kn->stores[j].slot]);
    }
    graph_free(keys);
    return st;
}

/* Sets the ACC arguments of loads ls from the finished results res. */
static void load_acc(const fuse_load *ls, int n, const lf_scalar *res, lf_scalar *args) {
    for (int j = 0; j < n; j++)
        if (ls[j].src == FUSE_SRC_ACC) args[j] = res[ls[j].red];
}

static void run_reduce(const fuse_schedule *s, const fuse_kernel *kn, void *const *data,
                       lf_scalar *vals) {
    /* per fn parameter: GRAPH_MAX_PARAMS; per reduction: LF_MAX_ARGS */
    lf_dtype params[FUSE_MAX_PASSES][GRAPH_MAX_PARAMS], eparams[GRAPH_MAX_PARAMS], rparams[GRAPH_MAX_PARAMS];
    lf_scalar args[GRAPH_MAX_PARAMS], res[LF_MAX_ARGS];
    graph_red_acc acc[LF_MAX_ARGS];
    graph_contract_acc cacc[LF_MAX_ARGS]; /* contractions (graph/contract.c) */
    int cx[LF_MAX_ARGS], cy[LF_MAX_ARGS];  /* their operands in the pass fn, else -1 */
    lf_dtype acc_t[LF_MAX_ARGS];
    int kept[LF_MAX_DIMS], red[LF_MAX_DIMS], nkept = 0, nred = 0;
    int64_t count = 1, cstrides[LF_MAX_DIMS];
    for (int d = 0; d < kn->ndim; d++) {
        if (kn->redmask & (1u << d)) {
            red[nred++] = d;
            count *= kn->shape[d];
        } else {
            kept[nkept++] = d;
        }
    }
    graph_contiguous_strides(kn->ndim, kn->shape, cstrides);
    for (int q = 0; q < kn->npasses; q++) load_dtypes(kn->passes[q].loads, kn->passes[q].nloads, params[q]);
    load_dtypes(kn->epi_loads, kn->nepi_loads, eparams);
    load_dtypes(kn->row_loads, kn->nrow_loads, rparams);
    for (int j = 0; j < kn->nreds; j++) {
        acc_t[j] = graph_red_acc_dtype(kn->reds[j].op, kn->reds[j].in);
        if (!fuse_red_contraction(kn, j, &cx[j], &cy[j])) cx[j] = cy[j] = -1;
    }
    bool keep = kn->out_ndim == kn->ndim; /* keepdims (or nothing reduced) */
    bool pos_stores = false; /* pass 0 stores at positions (fuse_store.pos) */
    for (int j = 0; j < kn->nstores; j++) pos_stores |= kn->stores[j].pos;
    int64_t idx[LF_MAX_DIMS] = {0}, oidx[LF_MAX_DIMS];
    for (int64_t o = 0; o < kn->out_numel; o++) {
        for (int q = 0; q < kn->npasses; q++) {
            const fuse_pass *ps = &kn->passes[q];
            for (int j = 0; j < kn->nreds; j++)
                if (kn->reds[j].pass == q) {
                    graph_red_init(&acc[j], kn->reds[j].op, acc_t[j]);
                    graph_contract_init(&cacc[j]);
                }
            for (int j = 0; j < nred; j++) idx[red[j]] = 0;
            for (int64_t pos = 0; pos < count; pos++) {
                load_all(ps->loads, ps->nloads, data, idx, args);
                load_acc(ps->loads, ps->nloads, res, args);
                graph_fn_eval(ps->fn, params[q], ps->etype, ps->ctype, args, vals);
                if (q == 0 && pos_stores) { /* elementwise outputs at this position */
                    int64_t at = 0;
                    for (int d = 0; d < kn->ndim; d++) at += idx[d] * cstrides[d];
                    store_all(s, kn, data, vals, at, false, true);
                }
                for (int j = 0; j < kn->nreds; j++) {
                    const fuse_red *r = &kn->reds[j];
                    if (r->pass != q) continue;
                    if (cx[j] >= 0) {
                        graph_contract_fold(&cacc[j], (float)vals[cx[j]].f, (float)vals[cy[j]].f);
                        continue;
                    }
                    lf_scalar v = graph_scalar_convert(vals[r->expr], r->in, acc_t[j]);
                    graph_red_fold(&acc[j], r->op, acc_t[j], v, pos);
                }
                next_index(nred, red, kn->shape, idx);
            }
            for (int j = 0; j < kn->nreds; j++) {
                const fuse_red *r = &kn->reds[j];
                if (r->pass == q && cx[j] >= 0) res[j].f = graph_contract_finish(&cacc[j]);
                else if (r->pass == q) res[j] = graph_red_finish(&acc[j], r->op, acc_t[j], count, r->node->dtype);
            }
        }
        /* the epilogue, at this element's index in the output's shape */
        int no = 0;
        for (int d = 0; d < kn->ndim; d++) {
            if (!(kn->redmask & (1u << d))) oidx[no++] = idx[d];
            else if (keep) oidx[no++] = 0;
        }
        load_all(kn->epi_loads, kn->nepi_loads, data, oidx, args);
        load_acc(kn->epi_loads, kn->nepi_loads, res, args);
        graph_fn_eval(kn->epi, eparams, kn->epi_etype, kn->epi_ctype, args, vals);
        store_all(s, kn, data, vals, o, false, false);
        /* the row pass: full-size values over this element's row */
        if (kn->row) {
            for (int j = 0; j < nred; j++) idx[red[j]] = 0;
            for (int64_t pos = 0; pos < count; pos++) {
                int64_t at = 0;
                for (int d = 0; d < kn->ndim; d++) at += idx[d] * cstrides[d];
                load_all(kn->row_loads, kn->nrow_loads, data, idx, args);
                load_acc(kn->row_loads, kn->nrow_loads, res, args);
                graph_fn_eval(kn->row, rparams, kn->row_etype, kn->row_ctype, args, vals);
                store_all(s, kn, data, vals, at, true, false);
                next_index(nred, red, kn->shape, idx);
            }
        }
        next_index(nkept, kept, kn->shape, idx);
    }
}

/* A scan kernel: each row along the scanned axis in the blocked order of
 * lazyfuse.h (graph_scan_step, as graph/eval_ref.c), the epilogue at every
 * element right after its fold, storing at the element's position. */
static void run_scan(const fuse_schedule *s, const fuse_kernel *kn, void *const *data, lf_scalar *vals) {
    lf_dtype params[GRAPH_MAX_PARAMS], eparams[GRAPH_MAX_PARAMS];
    lf_scalar args[GRAPH_MAX_PARAMS], res[1];
    int kept[LF_MAX_DIMS], nkept = 0, ax = 0;
    int64_t cstrides[LF_MAX_DIMS], idx[LF_MAX_DIMS] = {0};
    for (int d = 0; d < kn->ndim; d++) {
        if (kn->redmask & (1u << d)) ax = d;
        else kept[nkept++] = d;
    }
    int64_t len = kn->shape[ax];
    if (len == 0 || kn->numel == 0) return;
    graph_contiguous_strides(kn->ndim, kn->shape, cstrides);
    load_dtypes(kn->loads, kn->nloads, params);
    load_dtypes(kn->epi_loads, kn->nepi_loads, eparams);
    const fuse_red *r = &kn->reds[0];
    lf_dtype acc_t = graph_red_acc_dtype(r->op, r->in);
    for (int64_t row = 0; row < kn->numel / len; row++) {
        graph_scan_state st;
        graph_scan_start(&st, r->op, r->in, kn->scan_exclusive);
        for (int64_t pos = 0; pos < len; pos++) {
            idx[ax] = pos;
            load_all(kn->loads, kn->nloads, data, idx, args);
            graph_fn_eval(kn->body, params, kn->body_etype, kn->body_ctype, args, vals);
            res[0] = graph_scan_step(&st, graph_scalar_convert(vals[r->expr], r->in, acc_t), r->node->dtype);
            int64_t at = 0;
            for (int d = 0; d < kn->ndim; d++) at += idx[d] * cstrides[d];
            load_all(kn->epi_loads, kn->nepi_loads, data, idx, args);
            load_acc(kn->epi_loads, kn->nepi_loads, res, args);
            graph_fn_eval(kn->epi, eparams, kn->epi_etype, kn->epi_ctype, args, vals);
            store_all(s, kn, data, vals, at, false, false);
        }
        idx[ax] = 0;
        next_index(nkept, kept, kn->shape, idx);
    }
}

/* ---- the driver ------------------------------------------------------------------------ */

lf_status fuse_interpret(const fuse_schedule *s, void **results) {
    lf_ctx *ctx = s->graph->ctx;
    int maxexprs = 1;
    for (int k = 0; k < s->nkernels; k++) {
        const fuse_kernel *kn = &s->kernels[k];
        for (int q = 0; q < kn->npasses; q++)
            if (kn->passes[q].fn->nexprs > maxexprs) maxexprs = kn->passes[q].fn->nexprs;
        if (kn->epi && kn->epi->nexprs > maxexprs) maxexprs = kn->epi->nexprs;
        if (kn->row && kn->row->nexprs > maxexprs) maxexprs = kn->row->nexprs;
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
        case FUSE_SLOT_INPUT: data[j] = fuse_slot_buffer(sl)->data; break;
        case FUSE_SLOT_OUTPUT: data[j] = results[sl->output]; break;
        case FUSE_SLOT_TEMP: data[j] = blocks[sl->block]; break;
        }
    }
    for (int k = 0; k < s->nkernels; k++) {
        const fuse_kernel *kn = &s->kernels[k];
        index_bad = false;
        switch (kn->kind) {
        case FUSE_KERNEL_SCAN: run_scan(s, kn, data, vals); break;
        case FUSE_KERNEL_SORT: st = run_sort(s, kn, data, vals); break;
        case FUSE_KERNEL_SCATTER: st = run_scatter(s, kn, data, vals); break;
        case FUSE_KERNEL_REDUCE_FULL:
        case FUSE_KERNEL_REDUCE_INNER:
        case FUSE_KERNEL_REDUCE_OUTER: run_reduce(s, kn, data, vals); break;
        case FUSE_KERNEL_ELEMENTWISE:
        case FUSE_KERNEL_NKINDS: run_elementwise(s, kn, data, vals); break;
        }
        if (st != LF_OK) goto fail;
        if (index_bad) {
            st = fuse_report_index_error(s, k, data);
            goto fail;
        }
    }
    /* an output evaluated twice: the later copies take the first's value */
    for (int i = 0; i < s->nouts; i++) {
        const fuse_slot *sl = &s->slots[s->out_slot[i]];
        if (sl->output != i && sl->bytes) memcpy(results[i], results[sl->output], sl->bytes);
    }
    goto done;
nomem:
    st = graph_error(ctx, LF_ERR_NOMEM, "eval: out of memory running the fused schedule");
fail:
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
