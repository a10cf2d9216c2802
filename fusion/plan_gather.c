/* fusion/plan_gather.c: the gather rules (plan.c's top comment, "Gather").
 *
 *   A gather node G = x[idx along axis] is a load whose index is data. Its
 *   x and idx are read from slots: x is an input or a root (its positions
 *   are data, so it must exist in memory), idx an input or a root (the
 *   kernel reads it as an ordinary load; an index computed by a map is
 *   stored first: a kernel's loads are the fns' parameters and are all read
 *   before the fn runs, so a load cannot wait for a value the fn computes).
 *   G itself is never stored unless it is an output, marked, or fusion is
 *   off: each use is a leaf of the consumer's kernel that brings three
 *   loads into the consumer's fn: idx at G's position (broadcast), x at G's
 *   position with the gathered coordinate 0 (the base of the data-dependent
 *   address: its value is unused unless x is also read there, so it costs
 *   a parameter, not a memory access), and the FUSE_SRC_GATHER load itself
 *   (the base plus the wrapped index times x's stride on the axis). So
 *   exp(x[idx]) * w is one kernel reading idx, w and the gathered x.
 *   Index checks: an out-of-range index gives 0 and raises the kernel's
 *   error flag (never an out-of-bounds read); after the kernel the host
 *   finds the first bad index (fuse_report_index_error). Every index of a
 *   gather must be checked, so a gather is made a root when a use does not
 *   visit all of its elements (a slice of it, or an index map that is not
 *   one affine step onto all of it): then it is computed whole, once.
 */
#include "fusion/plan.h"

#include <stdlib.h>
#include <string.h>

/* x and idx of every needed gather are slots (inputs or roots). */
void fuse_gather_fixed_roots(planner *p) {
    for (int id = 0; id < p->nn; id++) {
        const lf_node *n = p->g->nodes[id];
        if (!p->needed[id] || n->kind != NODE_GATHER) continue;
        for (int k = 0; k < 2; k++)
            if (n->inputs[k]->kind != NODE_INPUT) p->root[n->inputs[k]->id] = true;
    }
}

typedef struct axis_use {
    int64_t extent, stride;
} axis_use;

static int cmp_use(const void *a, const void *b) {
    int64_t x = ((const axis_use *)a)->stride, y = ((const axis_use *)b)->stride;
    return (x > y) - (x < y);
}

/* Whether map m (one step) visits every element of an array of numel
 * elements: the axes that move, sorted by |stride|, tile it densely. */
static bool map_covers(const fuse_map *m, int64_t numel) {
    if (numel == 0) return true;
    if (m->nsteps != 1) return false;
    const fuse_step *st = &m->steps[0];
    axis_use u[LF_MAX_DIMS];
    int n = 0;
    int64_t low = st->offset;
    for (int d = 0; d < st->ndim; d++) {
        if (st->shape[d] == 0) return false;
        if (st->shape[d] == 1 || st->strides[d] == 0) continue;
        int64_t s = st->strides[d];
        if (s < 0) {
            low += s * (st->shape[d] - 1);
            s = -s;
        }
        u[n++] = (axis_use){st->shape[d], s};
    }
    if (low != 0) return false;
    qsort(u, (size_t)n, sizeof *u, cmp_use);
    int64_t want = 1;
    for (int j = 0; j < n; j++) {
        if (u[j].stride != want) return false;
        want *= u[j].extent;
    }
    return want == numel;
}

int fuse_gather_roots(planner *p) {
    int added = 0;
    for (int g = 0; g < p->ngc; g++) { /* the needed gathers and contractions */
        int id = p->gc_ids[g];
        const lf_node *n = p->g->nodes[id];
        if (!p->needed[id] || n->kind != NODE_GATHER || p->root[id]) continue;
        for (const inst *i = p->first[id]; i; i = i->next_node)
            if (!map_covers(i->map, n->numel)) {
                fuse_make_root(p, id);
                added++;
                break;
            }
    }
    return added;
}

/* The maps of a gather's x base and idx loads, from the map m of a use. */
static bool gather_maps(scratch *a, const lf_node *n, const fuse_map *m, const fuse_map **mx,
                        const fuse_map **mi) {
    graph_gather_geom gm;
    graph_gather_geom_of(n, &gm);
    fuse_step sx = fuse_make_step(n->ndim, n->shape, 0, gm.x_strides);
    fuse_step si = fuse_make_step(n->ndim, n->shape, 0, gm.idx_strides);
    *mx = fuse_map_compose(a, m, &sx);
    *mi = fuse_map_compose(a, m, &si);
    return *mx && *mi;
}

bool fuse_gather_instances(planner *p, inst *i) {
    const lf_node *n = i->node;
    const fuse_map *mx, *mi;
    if (!gather_maps(&p->iar, n, i->map, &mx, &mi)) return false;
    i->in[0] = fuse_add_inst(p, n->inputs[0], i->kernel, mx);
    i->in[1] = fuse_add_inst(p, n->inputs[1], i->kernel, mi);
    return i->in[0] && i->in[1];
}

/* The pload of a slot node: inputs are keyed by buffer (plan_vertical.c). */
static pload slot_pload(const lf_node *x, const fuse_map *m) {
    pload l;
    l.src = FUSE_SRC_SLOT;
    l.key = x->kind == NODE_INPUT ? (const void *)x->u.buffer : (const void *)x;
    l.node = x;
    l.map = m;
    return l;
}

bool fuse_gather_load(planner *p, const pload *loads, int nloads, const pload *l, fuse_load *ld) {
    const lf_node *n = l->node, *x = n->inputs[0], *idx = n->inputs[1];
    const fuse_map *mx, *mi;
    if (!gather_maps(&p->tmp, n, l->map, &mx, &mi)) return false;
    graph_gather_geom gm;
    graph_gather_geom_of(n, &gm);
    ld->slot = p->slot_of[x->id];
    ld->gextent = gm.x_extent;
    ld->gstride = gm.x_axis_stride;
    pload li = slot_pload(idx, mi);
    ld->gidx = fuse_find_load(loads, nloads, &li);
    ld->map.steps = graph_malloc((size_t)mx->nsteps * sizeof *mx->steps);
    if (!ld->map.steps) return false;
    memcpy(ld->map.steps, mx->steps, (size_t)mx->nsteps * sizeof *mx->steps);
    ld->map.nsteps = mx->nsteps;
    return ld->gidx >= 0 && ld->slot >= 0;
}

/* ---- the schedule's side (fusion.h) ---- */

lf_status fuse_report_index_error(const fuse_schedule *s, int k, void *const *data) {
    const fuse_kernel *kn = &s->kernels[k];
    if (kn->kind == FUSE_KERNEL_SCATTER) { /* its index may be computed in the kernel: the reference names it */
        lf_node *n = (lf_node *)kn->scatter;
        void *res = NULL;
        lf_status st = graph_eval_reference(s->graph, 1, &n, &res);
        graph_free(res);
        if (st == LF_ERR_INDEX) return st;
        char ns[GRAPH_NODE_STR_CAP];
        return graph_error(s->graph->ctx, LF_ERR_INDEX, "%s: index out of range", graph_node_str(n, ns, sizeof ns));
    }
    const lf_node *best = NULL;
    const void *best_idx = NULL;
    for (int f = 0; f < kn->npasses + 2; f++) { /* the gather of lowest id that has a bad index */
        int n;
        const fuse_load *ls = fuse_kernel_fn_loads(kn, f, &n, NULL);
        for (int j = 0; j < n; j++) {
            if (ls[j].src != FUSE_SRC_GATHER || (best && ls[j].node->id >= best->id)) continue;
            const void *idx = data[ls[ls[j].gidx].slot];
            lf_ctx *ctx = ls[j].node->graph->ctx;
            char keep[LF_ERRMSG_CAP];
            memcpy(keep, ctx->errmsg, sizeof keep);
            if (graph_gather_check(ls[j].node, idx) != LF_OK) {
                best = ls[j].node;
                best_idx = idx;
            }
            memcpy(ctx->errmsg, keep, sizeof keep);
        }
    }
    if (best) return graph_gather_check(best, best_idx);
    char ns[GRAPH_NODE_STR_CAP];
    return graph_error(s->graph->ctx, LF_ERR_INDEX, "gather: index out of range in kernel %d (computing %s)", k,
                       graph_node_str(s->graph->nodes[kn->root], ns, sizeof ns));
}
