/* fusion/plan_sort.c: the sort rules (plan.c's top comment, "Sort").
 *
 *   A sort node (lf_sort, lf_argsort, lf_topk) is always a root with a
 *   kernel of its own: an elementwise loop over its input x's space with
 *   the sorted axis moved innermost (the other axes in order, then the
 *   axis), so that the loop's row-major order visits x's rows one after
 *   the other. Its body computes x at each position with x's elementwise
 *   producers inlined (map -> sort: the keys' map is computed in the sort's
 *   first pass, never stored apart). Its store is not a store into the
 *   node's slot: a backend writes the body's value as a sort key into its
 *   own row-major work array (codegen: lf_k_run writes keys, lf_k_raw the
 *   values themselves), sorts each row, and writes the node's first k
 *   entries per row (values or positions) to the slot; the interpreter does
 *   the same with graph_eval_sort. The kernel's stores still name the
 *   slots, so the buffer plan, lifetimes and statistics treat them as any
 *   kernel's outputs.
 *   Siblings: a second sort node with the same input, axis, k and order
 *   that wants the other output (topk's values and indices, sort and
 *   argsort of one key) joins the first one's kernel, so one pass over the
 *   keys and one sort give both. Nothing else joins a sort kernel and a
 *   sort joins nothing else. The sort's consumers read its slot: a gather
 *   of a payload by argsort's indices is a load in the consumer's kernel
 *   (plan_gather.c), so the payload is not stored twice.
 */
#include "fusion/plan.h"

#include <string.h>

void fuse_sort_fixed_roots(planner *p) {
    for (int id = 0; id < p->nn; id++)
        if (p->needed[id] && p->g->nodes[id]->kind == NODE_SORT) p->root[id] = true;
}

/* The space of sort node n's kernel: x's shape with the axis moved last. */
static void fuse_sort_space(const lf_node *n, int *ndim, int64_t *shape) {
    const lf_node *x = n->inputs[0];
    int a = n->u.sort.axis, d = 0;
    for (int i = 0; i < x->ndim; i++)
        if (i != a) shape[d++] = x->shape[i];
    shape[d++] = x->shape[a];
    *ndim = d;
}

bool fuse_sort_instances(planner *p, inst *i) {
    const lf_node *n = i->node, *x = n->inputs[0];
    int a = n->u.sort.axis, ndim;
    int64_t dense[LF_MAX_DIMS], shape[LF_MAX_DIMS], strides[LF_MAX_DIMS];
    graph_contiguous_strides(x->ndim, x->shape, dense);
    fuse_sort_space(n, &ndim, shape);
    int d = 0;
    for (int k = 0; k < x->ndim; k++)
        if (k != a) strides[d++] = dense[k];
    strides[d] = dense[a];
    fuse_step *st = fuse_scratch_alloc(&p->iar, sizeof *st);
    fuse_map *m = fuse_scratch_alloc(&p->iar, sizeof *m);
    if (!st || !m) return false;
    *st = fuse_make_step(ndim, shape, 0, strides);
    *m = (fuse_map){1, st};
    return (i->in[0] = fuse_add_inst(p, x, i->kernel, m)) != NULL;
}

int fuse_sort_sibling(const planner *p, int e) {
    const lf_node *n = p->g->nodes[e];
    for (int id = e - 1; id >= 0; id--) {
        const lf_node *o = p->g->nodes[id];
        if (!p->needed[id] || !p->root[id] || o->kind != NODE_SORT || p->merged_into[id] >= 0) continue;
        if (o->inputs[0] != n->inputs[0] || o->u.sort.axis != n->u.sort.axis || o->u.sort.k != n->u.sort.k ||
            o->u.sort.descending != n->u.sort.descending || o->u.sort.indices == n->u.sort.indices)
            continue;
        bool taken = false; /* the kernel has one node of each kind at most */
        for (int j = id + 1; j < e && !taken; j++) taken = p->needed[j] && p->root[j] && p->merged_into[j] == id;
        if (!taken) return id;
    }
    return -1;
}

void fuse_sort_kernel(planner *p, int k, fuse_kernel *kn) {
    const lf_node *n = p->g->nodes[k];
    fuse_sort_space(n, &kn->ndim, kn->shape);
    kn->numel = n->inputs[0]->numel;
    kn->sort = n;
    kn->sort_values = kn->sort_indices = NULL;
    for (int e = k; e >= 0; e = p->next_member[e]) {
        const lf_node *x = p->g->nodes[e];
        if (fuse_unit_of(p, e) != k || !p->root[e] || x->kind != NODE_SORT) continue;
        if (x->u.sort.indices) kn->sort_indices = x;
        else kn->sort_values = x;
    }
}
