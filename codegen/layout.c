/* codegen/layout.c: a scheduled kernel as one loop nest of affine accesses.
 *
 * Every load (through the first step of its index map) and every store of a
 * kernel is an affine function of the iteration-space multi-index: offset +
 * sum idx[d] * stride[d]. This file picks the loop order for the kernel's
 * strategy, drops extent-1 axes, merges adjacent axes that every access
 * walks as one (stride[a] == stride[b] * extent[b]), classifies each access
 * by its innermost stride, and numbers the runtime parameters.
 *
 * What must stay true: the loop nest visits exactly the iteration space;
 * merging never changes any access's linear value; reduced axes keep their
 * original relative order (argmin/argmax positions are row-major over them);
 * the layout depends on sizes only through which axes merge and which
 * strides are 0 or 1, and everything size-dependent is a parameter.
 */
#include "codegen/codegen.h"

#include <assert.h>
#include <math.h>
#include <string.h>

/* Strides, over the iteration space, of an epilogue load whose first step
 * reads the output multi-index (reduced axes are at index 0 there). */
static void epilogue_strides(const fuse_kernel *kn, const fuse_step *st, int64_t *out) {
    if (kn->kind == FUSE_KERNEL_SCAN) { /* a scan's epilogue runs over the whole space */
        memcpy(out, st->strides, (size_t)kn->ndim * sizeof *out);
        return;
    }
    bool keep = kn->out_ndim == kn->ndim;
    int m = 0;
    for (int d = 0; d < kn->ndim; d++) {
        bool red = kn->redmask & (1u << d);
        if (keep) out[d] = red ? 0 : st->strides[d];
        else out[d] = red ? 0 : st->strides[m++];
    }
}

static int add_buf(cg_layout *lay, int slot, bool written) {
    for (int b = 0; b < lay->nbufs; b++)
        if (lay->buf_slot[b] == slot) {
            lay->buf_written[b] |= written;
            return b;
        }
    lay->buf_slot[lay->nbufs] = slot;
    lay->buf_written[lay->nbufs] = written;
    return lay->nbufs++;
}

/* The accesses over the original iteration space (before reordering). */
static void collect_accesses(const fuse_schedule *s, const fuse_kernel *kn, cg_layout *lay) {
    int64_t dense[LF_MAX_DIMS], kept_dense[LF_MAX_DIMS], kept_ext[LF_MAX_DIMS];
    graph_contiguous_strides(kn->ndim, kn->shape, dense);
    int nk = 0;
    for (int d = 0; d < kn->ndim; d++)
        if (!(kn->redmask & (1u << d))) kept_ext[nk++] = kn->shape[d];
    int64_t kd[LF_MAX_DIMS];
    graph_contiguous_strides(nk, kept_ext, kd);
    for (int d = 0, m = 0; d < kn->ndim; d++) kept_dense[d] = (kn->redmask & (1u << d)) ? 0 : kd[m++];

    int epi = kn->npasses;
    for (int f = 0; f < kn->npasses + 2; f++) {
        int n;
        const fuse_load *ls = fuse_kernel_fn_loads(kn, f, &n, NULL);
        for (int j = 0; j < n; j++) {
            if (ls[j].src == FUSE_SRC_ACC) continue;
            cg_access *a = &lay->access[lay->naccess++];
            memset(a, 0, sizeof *a);
            a->fn = f;
            a->index = j;
            a->load = &ls[j];
            a->dtype = ls[j].dtype;
            a->buf = ls[j].src == FUSE_SRC_SLOT ? add_buf(lay, ls[j].slot, false) : -1;
            const fuse_step *st = &ls[j].map.steps[0];
            a->offset = st->offset;
            if (f == epi) epilogue_strides(kn, st, a->strides);
            else memcpy(a->strides, st->strides, sizeof a->strides);
            a->param_steps = ls[j].map.nsteps > 1 ? 0 : -1;
            a->param_split = -1;
            a->param_iota = -1;
            a->param_gather = -1;
            if (ls[j].src == FUSE_SRC_GATHER) { /* x's base: a buffer, a data-dependent offset */
                a->buf = add_buf(lay, ls[j].slot, false);
                a->param_gather = 0;
                if (lay->err_buf < 0) lay->err_buf = add_buf(lay, -1, true);
            }
            if (ls[j].src == FUSE_SRC_IOTA && ls[j].node->kind == NODE_RANDOM) {
                a->param_iota = 0; /* the seed */
            } else if (ls[j].src == FUSE_SRC_IOTA) {
                const lf_node *nd = ls[j].node;
                double st0 = nd->u.iota.start, sp = nd->u.iota.step;
                a->param_iota = 0;
                a->iota_exact = !graph_dtype_is_float(nd->dtype) && st0 == trunc(st0) &&
                                sp == trunc(sp) && fabs(st0) < 9e18 && fabs(sp) < 9e18;
                a->iota_unit = a->iota_exact && sp == 1;
            }
        }
    }
    for (int j = 0; j < kn->nstores; j++) {
        const fuse_store *so = &kn->stores[j];
        cg_access *a = &lay->access[lay->naccess++];
        memset(a, 0, sizeof *a);
        a->fn = -1;
        a->index = j;
        a->dtype = s->slots[so->slot].dtype;
        a->buf = add_buf(lay, so->slot, true);
        a->param_steps = -1;
        a->param_split = -1;
        a->param_iota = -1;
        a->param_gather = -1;
        bool full = !kn->epi || so->row || so->pos || kn->kind == FUSE_KERNEL_SCAN;
        memcpy(a->strides, full ? dense : kept_dense, sizeof a->strides);
        if (kn->kind == FUSE_KERNEL_SCATTER) { /* the target over the positions, plus the index (plan_scatter.c) */
            graph_scatter_geom gm;
            graph_scatter_geom_of(kn->scatter, &gm);
            memcpy(a->strides, gm.dst_strides, sizeof a->strides);
            a->param_gather = 0;
            if (lay->err_buf < 0) lay->err_buf = add_buf(lay, -1, true);
            lay->part_buf = add_buf(lay, -2, true);
            lay->part_entries = gm.nblocks * kn->scatter->numel;
            lay->dst_buf = kn->scat_dst_slot >= 0 ? add_buf(lay, kn->scat_dst_slot, false) : -1;
        }
    }
}

/* Reorders the axes to perm (new axis i = old axis perm[i]). */
static void permute(cg_layout *lay, int n, const int *perm, const int64_t *shape) {
    for (int i = 0; i < n; i++) lay->extent[i] = shape[perm[i]];
    lay->ndim = n;
    for (int a = 0; a < lay->naccess; a++) {
        int64_t st[LF_MAX_DIMS] = {0};
        for (int i = 0; i < n; i++) st[i] = lay->access[a].strides[perm[i]];
        memcpy(lay->access[a].strides, st, sizeof st);
    }
}

/* Whether loop axes i and i+1 can be walked as one. */
static bool mergeable(const cg_layout *lay, int i) {
    for (int a = 0; a < lay->naccess; a++) {
        const int64_t *st = lay->access[a].strides;
        if (st[i] != st[i + 1] * lay->extent[i + 1]) return false;
    }
    return true;
}

static void merge(cg_layout *lay, int i) {
    lay->extent[i] *= lay->extent[i + 1];
    for (int a = 0; a < lay->naccess; a++) {
        int64_t *st = lay->access[a].strides;
        st[i] = st[i + 1];
        memmove(st + i + 1, st + i + 2, (size_t)(lay->ndim - i - 2) * sizeof *st);
        st[lay->ndim - 1] = 0;
    }
    memmove(lay->extent + i + 1, lay->extent + i + 2, (size_t)(lay->ndim - i - 2) * sizeof(int64_t));
    lay->ndim--;
}

/* Merges adjacent axes inside [lo, hi) while possible; returns the new hi. */
static int merge_group(cg_layout *lay, int lo, int hi) {
    for (int i = hi - 2; i >= lo; i--)
        if (mergeable(lay, i)) {
            merge(lay, i);
            hi--;
        }
    return hi;
}

/* Whether load a (after the loop nest is final) can be split: its map is
 * step 0 then one remapped step (lf_pad, lf_concat) and step 0 walks the
 * view's axes separately. That holds when the view coordinates of its
 * offset, plus each loop axis' stride taken as a step of one view axis (the
 * outermost whose dense stride divides it), stay inside the view's extents
 * over the whole loop nest: the linear index step 0 computes is then
 * exactly sum c[d] * dense[d] with those coordinates, so along a row the
 * innermost loop moves coordinate *axis by *k per element and no other
 * coordinate moves. False (the kernel keeps lf_steps) otherwise. */
static bool split_remap(const cg_layout *lay, const cg_access *a, int *axis, int64_t *k) {
    if (!a->load || a->param_steps < 0 || a->param_gather >= 0 || a->buf < 0 || a->inner == CG_INNER_INVARIANT)
        return false;
    const fuse_map *m = &a->load->map;
    if (m->nsteps != 2 || !m->steps[1].remap) return false;
    const fuse_step *v = &m->steps[1];
    int n = v->ndim;
    int64_t dense[LF_MAX_DIMS], lo[LF_MAX_DIMS], hi[LF_MAX_DIMS], numel = 1;
    for (int d = n - 1; d >= 0; d--) {
        dense[d] = numel;
        if (__builtin_mul_overflow(numel, v->shape[d], &numel)) return false;
    }
    if (numel == 0 || a->offset < 0 || a->offset >= numel) return false;
    for (int d = 0; d < n; d++) lo[d] = hi[d] = (a->offset / dense[d]) % v->shape[d];
    *axis = -1;
    for (int i = 0; i < lay->ndim; i++) {
        int64_t s = a->strides[i], e = lay->extent[i];
        if (s == 0 || e <= 1) {
            if (i == lay->ndim - 1) return false; /* invariant along the row */
            continue;
        }
        int d = 0;
        while (s % dense[d] != 0) d++; /* dense[n-1] is 1: always ends */
        int64_t kk = s / dense[d], span;
        if (__builtin_mul_overflow(kk, e - 1, &span)) return false;
        if (span < 0) lo[d] += span;
        else hi[d] += span;
        if (lo[d] < 0 || hi[d] >= v->shape[d]) return false;
        if (i == lay->ndim - 1) {
            *axis = d;
            *k = kk;
        }
    }
    return *axis >= 0;
}

/* Lays out kernel k of s into lay, which has room for CG_MAX_ACCESSES. */
static void layout_kernel(const fuse_schedule *s, int k, cg_layout *lay) {
    const fuse_kernel *kn = &s->kernels[k];
    memset(lay, 0, sizeof *lay);
    lay->kernel = kn;
    lay->err_buf = -1;
    lay->part_buf = lay->dst_buf = lay->param_scatter = lay->param_stream = -1;
    collect_accesses(s, kn, lay);

    /* loop order: non-unit axes, kept before reduced */
    int kept[LF_MAX_DIMS], red[LF_MAX_DIMS], nk = 0, nr = 0;
    for (int d = 0; d < kn->ndim; d++) {
        if (kn->shape[d] == 1) continue;
        if (kn->redmask & (1u << d)) red[nr++] = d;
        else kept[nk++] = d;
    }
    int perm[LF_MAX_DIMS], n = 0;
    switch (kn->kind) { /* the planner's kind is the loop nest (fusion.h) */
    case FUSE_KERNEL_SCAN:
        lay->strategy = CG_SCAN; /* kept axes, then the scanned axis */
        for (int i = 0; i < nk; i++) perm[n++] = kept[i];
        for (int i = 0; i < nr; i++) perm[n++] = red[i];
        break;
    case FUSE_KERNEL_ELEMENTWISE:
    case FUSE_KERNEL_SCATTER: /* a loop over the scatter's positions */
    case FUSE_KERNEL_SORT:    /* a loop over the sort's keys */
    case FUSE_KERNEL_NKINDS:
        lay->strategy = CG_ELEMENTWISE;
        for (int i = 0; i < nk; i++) perm[n++] = kept[i];
        break;
    case FUSE_KERNEL_REDUCE_FULL:
        lay->strategy = CG_REDUCE_FULL;
        for (int i = 0; i < nr; i++) perm[n++] = red[i];
        break;
    case FUSE_KERNEL_REDUCE_INNER:
        lay->strategy = CG_REDUCE_INNER;
        for (int i = 0; i < nk; i++) perm[n++] = kept[i];
        for (int i = 0; i < nr; i++) perm[n++] = red[i];
        break;
    case FUSE_KERNEL_REDUCE_OUTER:
        lay->strategy = CG_REDUCE_OUTER;
        for (int i = 0; i < nk - 1; i++) perm[n++] = kept[i];
        for (int i = 0; i < nr; i++) perm[n++] = red[i];
        perm[n++] = kept[nk - 1];
        break;
    }
    assert((lay->strategy == CG_ELEMENTWISE) == !kn->epi); /* folds, and only they, have an epilogue */
    permute(lay, n, perm, kn->shape);

    /* merge within groups; every strategy keeps at least one axis where its
       loops need one (an extent-1 axis, all strides 0) */
    int nkeep_outer = lay->strategy == CG_REDUCE_OUTER ? nk - 1 : nk;
    int g1 = merge_group(lay, 0, nkeep_outer);
    merge_group(lay, g1, g1 + nr);
    lay->nkept = g1;
    lay->nred = lay->ndim - g1 - (lay->strategy == CG_REDUCE_OUTER ? 1 : 0);
    if ((lay->strategy == CG_ELEMENTWISE && lay->ndim == 0) ||
        (lay->strategy != CG_ELEMENTWISE && lay->strategy != CG_REDUCE_OUTER && lay->nred == 0)) {
        lay->extent[lay->ndim] = 1; /* a unit innermost axis */
        for (int a = 0; a < lay->naccess; a++) lay->access[a].strides[lay->ndim] = 0;
        lay->ndim++;
        if (lay->strategy != CG_ELEMENTWISE) lay->nred = 1;
    }

    /* sizes */
    lay->count = 1;
    for (int i = 0; i < lay->nred; i++) lay->count *= lay->extent[lay->nkept + i];
    lay->out_numel = 1;
    for (int i = 0; i < lay->nkept; i++) lay->out_numel *= lay->extent[i];
    if (lay->strategy == CG_REDUCE_OUTER) lay->out_numel *= lay->extent[lay->ndim - 1];
    switch (lay->strategy) {
    case CG_ELEMENTWISE: lay->work = kn->numel; break;
    case CG_REDUCE_INNER: lay->work = lay->out_numel; break;
    case CG_SCAN: lay->work = lay->count ? lay->out_numel : 0; break;
    case CG_REDUCE_OUTER: {
        int64_t outer = 1, e = lay->extent[lay->ndim - 1];
        for (int i = 0; i < lay->nkept; i++) outer *= lay->extent[i];
        lay->work = outer * ((e + CG_OUTER_BLOCK - 1) / CG_OUTER_BLOCK);
        break;
    }
    case CG_REDUCE_FULL: {
        int64_t rest = 1;
        for (int i = 1; i < lay->nred; i++) rest *= lay->extent[i];
        lay->full_block = rest >= CG_FULL_BLOCK || rest == 0 ? 1 : CG_FULL_BLOCK / rest;
        if (cg_kernel_contracts(kn)) /* one block: the fold is one chain (emit_contract.c) */
            lay->full_block = lay->extent[0] > 1 ? lay->extent[0] : 1;
        lay->work = (lay->extent[0] + lay->full_block - 1) / lay->full_block;
        break;
    }
    }

    /* classes and parameter numbering */
    int p = 0;
    lay->param_extent = p;
    p += lay->ndim;
    lay->param_count = p++;
    lay->param_full_block = p++;
    lay->param_scalar = p;
    p += kn->nscalars;
    lay->param_ufn = p; /* library functions' addresses, by first call */
    for (int f = 0; f < kn->npasses + 2; f++) {
        const lf_fn *fn = f < kn->npasses ? kn->passes[f].fn : f == kn->npasses ? kn->epi : kn->row;
        for (int i = 0; fn && i < fn->nexprs; i++) {
            const graph_ufn *u = fn->exprs[i].call;
            if (fn->exprs[i].kind != EXPR_CALL || !u->fp || cg_ufn_param(lay, u) >= 0 || lay->nufn == CG_MAX_UFN) continue;
            lay->ufn[lay->nufn++] = u;
        }
    }
    p += lay->nufn;
    for (int a = 0; a < lay->naccess; a++) {
        cg_access *ac = &lay->access[a];
        int64_t in = lay->access[a].strides[lay->ndim - 1];
        ac->inner = in == 0 ? CG_INNER_INVARIANT : in == 1 ? CG_INNER_CONTIGUOUS : CG_INNER_STRIDED;
        if (ac->param_gather >= 0) ac->inner = CG_INNER_STRIDED; /* never hoisted or vectorized */
        ac->param_offset = p;
        p += 1 + lay->ndim;
    }
    for (int a = 0; a < lay->naccess; a++) {
        cg_access *ac = &lay->access[a];
        if (ac->param_iota < 0) continue;
        ac->param_iota = p;
        p += ac->load->node->kind == NODE_RANDOM ? 1 : 2; /* seed, or start and step */
    }
    for (int a = 0; a < lay->naccess; a++) {
        cg_access *ac = &lay->access[a];
        if (ac->param_steps < 0) continue;
        ac->param_steps = p;
        const fuse_map *m = &ac->load->map;
        p += 1; /* number of extra steps */
        for (int q = 1; q < m->nsteps; q++) p += 2 + (m->steps[q].remap ? 5 : 2) * m->steps[q].ndim;
    }
    for (int a = 0; a < lay->naccess && lay->strategy == CG_ELEMENTWISE && kn->kind == FUSE_KERNEL_ELEMENTWISE; a++) {
        cg_access *ac = &lay->access[a];
        if (!split_remap(lay, ac, &ac->split_axis, &ac->split_k)) continue;
        ac->param_split = p;
        p += 3; /* axis, k, interior stride */
        ac->split_contiguous = ac->load->map.steps[1].strides[ac->split_axis] * ac->split_k == 1;
    }
    for (int a = 0; a < lay->naccess; a++) {
        cg_access *ac = &lay->access[a];
        if (ac->param_gather < 0) continue;
        ac->param_gather = p;
        p += 2; /* x's extent and stride on the gathered axis */
    }
    if (kn->kind == FUSE_KERNEL_SCATTER) {
        lay->param_scatter = p;
        p += 4; /* block, positions, DN, nblocks */
        graph_scatter_geom gm;
        graph_scatter_geom_of(kn->scatter, &gm);
        lay->work = gm.nblocks;
    }
    if (lay->strategy == CG_ELEMENTWISE && kn->kind == FUSE_KERNEL_ELEMENTWISE) {
        bool contiguous_store = false;
        for (int a = 0; a < lay->naccess; a++)
            contiguous_store |= cg_access_streams(lay, &lay->access[a]);
        if (contiguous_store) lay->param_stream = p++;
    }
    lay->nparams = p;
    cg_contract_layout(lay); /* a contraction's packed GEMM: its own work items */
}

void cg_fill_params(const cg_layout *lay, int64_t *P) {
    for (int i = 0; i < lay->ndim; i++) P[lay->param_extent + i] = lay->extent[i];
    if (lay->param_scatter >= 0) {
        graph_scatter_geom gm;
        graph_scatter_geom_of(lay->kernel->scatter, &gm);
        P[lay->param_scatter] = gm.block;
        P[lay->param_scatter + 1] = gm.numel;
        P[lay->param_scatter + 2] = lay->kernel->scatter->numel;
        P[lay->param_scatter + 3] = gm.nblocks;
    }
    P[lay->param_count] = lay->count;
    P[lay->param_full_block] = lay->full_block;
    if (lay->param_stream >= 0) P[lay->param_stream] = 0;
    cg_fill_scalars(lay, P);
    for (int j = 0; j < lay->nufn; j++) P[lay->param_ufn + j] = (int64_t)(intptr_t)lay->ufn[j]->fp;
    for (int a = 0; a < lay->naccess; a++) {
        const cg_access *ac = &lay->access[a];
        P[ac->param_offset] = ac->offset;
        for (int i = 0; i < lay->ndim; i++) P[ac->param_offset + 1 + i] = ac->strides[i];
        if (ac->param_iota >= 0 && ac->load->node->kind == NODE_RANDOM) {
            memcpy(&P[ac->param_iota], &ac->load->node->u.random.seed, sizeof(uint64_t));
        } else if (ac->param_iota >= 0) {
            const lf_node *nd = ac->load->node;
            double st0 = nd->u.iota.start, sp = nd->u.iota.step;
            if (ac->iota_exact) {
                P[ac->param_iota] = (int64_t)st0;
                P[ac->param_iota + 1] = (int64_t)sp;
            } else {
                memcpy(&P[ac->param_iota], &st0, sizeof st0);
                memcpy(&P[ac->param_iota + 1], &sp, sizeof sp);
            }
        }
        if (ac->param_gather >= 0 && ac->load) {
            P[ac->param_gather] = ac->load->gextent;
            P[ac->param_gather + 1] = ac->load->gstride;
        } else if (ac->param_gather >= 0) { /* a scatter's store */
            graph_scatter_geom gm;
            graph_scatter_geom_of(lay->kernel->scatter, &gm);
            P[ac->param_gather] = gm.dst_extent;
            P[ac->param_gather + 1] = gm.dst_axis_stride;
        }
        if (ac->param_split >= 0) {
            P[ac->param_split] = ac->split_axis;
            P[ac->param_split + 1] = ac->split_k;
            P[ac->param_split + 2] = ac->load->map.steps[1].strides[ac->split_axis] * ac->split_k;
        }
        if (ac->param_steps < 0) continue;
        const fuse_map *m = &ac->load->map;
        int64_t *q = P + ac->param_steps;
        *q++ = m->nsteps - 1;
        for (int st = 1; st < m->nsteps; st++) {
            const fuse_step *sp = &m->steps[st];
            *q++ = sp->remap ? -sp->ndim : sp->ndim; /* lf_steps: < 0 marks a remapped step */
            *q++ = sp->offset;
            for (int i = 0; i < sp->ndim; i++) *q++ = sp->shape[i];
            for (int i = 0; i < sp->ndim; i++) *q++ = sp->strides[i];
            for (int i = 0; sp->remap && i < sp->ndim; i++) {
                *q++ = sp->mode[i];
                *q++ = sp->shift[i];
                *q++ = sp->ext[i];
            }
        }
    }
}

bool cg_access_streams(const cg_layout *lay, const cg_access *a) {
    return lay->strategy == CG_ELEMENTWISE && !lay->kernel->scatter && !lay->kernel->sort && a->fn < 0 &&
           a->buf >= 0 && a->inner == CG_INNER_CONTIGUOUS;
}

int64_t cg_stream_bytes(const cg_layout *lay) {
    int64_t bytes = 0;
    for (int a = 0; a < lay->naccess; a++) {
        const cg_access *ac = &lay->access[a];
        if (ac->buf >= 0 && ac->inner != CG_INNER_INVARIANT)
            bytes += lay->work * (int64_t)lf_dtype_size(ac->dtype);
    }
    return bytes;
}

void cg_fill_scalars(const cg_layout *lay, int64_t *P) {
    const fuse_kernel *kn = lay->kernel;
    for (int j = 0; j < kn->nscalars; j++) {
        const lf_node *c = kn->scalars[j];
        if (graph_dtype_is_float(c->dtype)) memcpy(&P[lay->param_scalar + j], &c->u.value.f, sizeof(double));
        else P[lay->param_scalar + j] = c->u.value.i;
    }
}

int64_t cg_scan_blocks(const cg_layout *lay) {
    return (lay->count + LF_SCAN_BLOCK - 1) / LF_SCAN_BLOCK;
}

const cg_access *cg_load_access(const cg_layout *lay, int f, int j) {
    for (int a = 0; a < lay->naccess; a++)
        if (lay->access[a].fn == f && lay->access[a].index == j) return &lay->access[a];
    return NULL;
}

cg_layout *cg_layout_new(const fuse_schedule *s, int k) {
    cg_layout *full = graph_malloc(sizeof *full + CG_MAX_ACCESSES * sizeof full->access[0]);
    if (!full) return NULL;
    layout_kernel(s, k, full);
    size_t bytes = sizeof *full + (size_t)full->naccess * sizeof full->access[0];
    cg_layout *lay = graph_malloc(bytes);
    if (lay) memcpy(lay, full, bytes);
    graph_free(full);
    return lay;
}

int cg_ufn_param(const cg_layout *lay, const graph_ufn *u) {
    for (int j = 0; j < lay->nufn; j++)
        if (lay->ufn[j] == u) return lay->param_ufn + j;
    return -1;
}
