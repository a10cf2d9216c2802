/* fusion/plan_scatter.c: the scatter rules (plan.c's top comment, "Scatter").
 *
 *   A scatter node S (and so lf_bincount) is a store whose index is data. S
 *   is always a root with a kernel of its own that nothing joins: an
 *   elementwise loop over S's positions whose body computes idx and values
 *   there with their producers inlined (map -> scatter: a histogram of
 *   floor(x*256) reads x once, in one kernel), and whose one store combines
 *   the value into S's slot at the position's target. dst is read from a
 *   slot (an input or a root: its elements are the starting values) or is a
 *   constant fill (bincount's zeros: a run-time scalar, no kernel, no memory); its
 *   base load at the positions (gathered coordinate 0) gives the kernel its
 *   buffer and is otherwise unused. The combine order is lazyfuse.h's
 *   (graph/scatter.c): positions in blocks of LF_SCATTER_BLOCK, each block
 *   folding into a partial per destination element, partials combined into
 *   dst in block order; SET keeps the highest position. The index is
 *   checked in the kernel (error flag, nothing written out of bounds), as a
 *   gather's is.
 */
#include "fusion/plan.h"

#include <string.h>

void fuse_scatter_fixed_roots(planner *p) {
    for (int id = 0; id < p->nn; id++) {
        const lf_node *n = p->g->nodes[id];
        if (!p->needed[id] || n->kind != NODE_SCATTER) continue;
        p->root[id] = true;
        const lf_node *d = n->inputs[0];
        if (d->kind != NODE_INPUT && d->kind != NODE_CONST) p->root[d->id] = true;
    }
}

bool fuse_scatter_instances(planner *p, inst *i) {
    const lf_node *n = i->node;
    graph_scatter_geom gm;
    graph_scatter_geom_of(n, &gm);
    fuse_step sd = fuse_make_step(gm.ndim, gm.shape, 0, gm.dst_strides);
    fuse_step si = fuse_make_step(gm.ndim, gm.shape, 0, gm.idx_strides);
    fuse_step sv = fuse_make_step(gm.ndim, gm.shape, 0, gm.val_strides);
    fuse_map *md = fuse_scratch_alloc(&p->iar, sizeof *md), *mi = fuse_scratch_alloc(&p->iar, sizeof *mi),
             *mv = fuse_scratch_alloc(&p->iar, sizeof *mv);
    fuse_step *st = fuse_scratch_alloc(&p->iar, 3 * sizeof *st);
    if (!md || !mi || !mv || !st) return false;
    st[0] = sd, st[1] = si, st[2] = sv;
    *md = (fuse_map){1, &st[0]};
    *mi = (fuse_map){1, &st[1]};
    *mv = (fuse_map){1, &st[2]};
    i->in[0] = fuse_add_inst(p, n->inputs[0], i->kernel, md);
    i->in[1] = fuse_add_inst(p, n->inputs[1], i->kernel, mi);
    i->in[2] = fuse_add_inst(p, n->inputs[2], i->kernel, mv);
    return i->in[0] && i->in[1] && i->in[2];
}

void fuse_scatter_kernel(planner *p, int k, fuse_kernel *kn) {
    const lf_node *n = p->g->nodes[k];
    graph_scatter_geom gm;
    graph_scatter_geom_of(n, &gm);
    kn->scatter = n;
    kn->ndim = gm.ndim;
    memcpy(kn->shape, gm.shape, sizeof kn->shape);
    kn->numel = gm.numel;
    const lf_node *d = n->inputs[0];
    kn->scat_dst_slot = d->kind == NODE_CONST ? -1 : p->slot_of[d->id];
    kn->scat_idx_expr = -1;
    for (int j = 0; j < p->kcount[k]; j++)
        if (p->klist[k][j]->node == n) kn->scat_idx_expr = p->klist[k][j]->in[1]->expr;
}
