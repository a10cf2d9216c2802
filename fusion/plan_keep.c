/* fusion/plan_keep.c: row keeps, the rule that stops a row kernel computing
 * an expensive value twice per element.
 *
 * In a row kernel (reduce -> broadcast -> map: softmax, layer norm) a node
 * inlined both into a pass (where it feeds a reduction) and into the row
 * pass (where it feeds the outputs) is computed in each: softmax's
 * exp(x - max) runs in the sum's pass and again in the writing pass. When
 * such a node has a transcendental operation in its fused expression, the
 * kernel records a keep: the pass writes the node's value into a row-sized
 * buffer of the backend's (in cache), and the row pass reads it back there
 * instead of computing it again. The values are the same bits either way
 * (the same expression on the same loads), so a backend may ignore keeps
 * (the interpreter and the CUDA backend do) or use them only when a row
 * fits its buffer (the C backend: cg_keep_rows).
 *
 * What must stay true: a keep names an expression of pass `pass`'s fn and
 * one of the row fn that are instances of the same graph node at the same
 * index map, so they compute the same value; no keep's row expression lies
 * beneath another keep's (the outermost shared value is kept); at most
 * FUSE_MAX_KEEPS per kernel.
 */
#include "fusion/plan.h"

/* The instance of node n at map m among pass q's roots of kernel k, or NULL. */
static const inst *pass_instance(const planner *p, int k, const lf_node *n, const fuse_map *m, int *q) {
    for (int e = k; e >= 0; e = p->next_member[e]) {
        if (fuse_unit_of(p, e) != k || !p->root[e] || p->role[e] != ROLE_PASS) continue;
        for (int j = 0; j < p->kcount[e]; j++) {
            const inst *i = p->klist[e][j];
            if (i->node == n && fuse_map_equal(i->map, m)) {
                *q = p->pass[e];
                return i;
            }
        }
    }
    return NULL;
}

/* Marks every instance beneath i (not i itself) as covered. */
static void cover_below(const inst *i, const inst **covered, int *ncovered, int cap) {
    for (int k = 0; k < LF_MAX_ARGS; k++) {
        const inst *x = i->in[k];
        if (!x) continue;
        bool seen = false;
        for (int c = 0; c < *ncovered && !seen; c++) seen = covered[c] == x;
        if (seen) continue;
        if (*ncovered < cap) covered[(*ncovered)++] = x;
        cover_below(x, covered, ncovered, cap);
    }
}

bool fuse_row_keeps(planner *p, int k, fuse_kernel *kn) {
    kn->nkeeps = 0;
    if (!kn->row) return true;
    /* the candidates: expensive maps of the row fn also computed in a pass */
    int cap = 0;
    for (int e = k; e >= 0; e = p->next_member[e])
        if (fuse_unit_of(p, e) == k && p->root[e] && p->role[e] == ROLE_ROW) cap += p->kcount[e];
    if (!cap) return true;
    const inst **covered = fuse_scratch_alloc(&p->tmp, (size_t)cap * sizeof *covered);
    if (!covered) return false;
    int ncovered = 0;
    for (int e = k; e >= 0; e = p->next_member[e]) {
        if (fuse_unit_of(p, e) != k || !p->root[e] || p->role[e] != ROLE_ROW) continue;
        for (int j = 0; j < p->kcount[e]; j++) {
            const inst *i = p->klist[e][j];
            int q;
            if (i->node->kind == NODE_MAP && p->trans[i->node->id] && !fuse_is_leaf(p, i->node, e) &&
                pass_instance(p, k, i->node, i->map, &q))
                cover_below(i, covered, &ncovered, cap);
        }
    }
    for (int e = k; e >= 0; e = p->next_member[e]) {
        if (fuse_unit_of(p, e) != k || !p->root[e] || p->role[e] != ROLE_ROW) continue;
        for (int j = 0; j < p->kcount[e] && kn->nkeeps < FUSE_MAX_KEEPS; j++) {
            const inst *i = p->klist[e][j];
            int q;
            const inst *pi;
            if (i->node->kind != NODE_MAP || !p->trans[i->node->id] || fuse_is_leaf(p, i->node, e)) continue;
            if (!(pi = pass_instance(p, k, i->node, i->map, &q))) continue;
            bool below = false, dup = false;
            for (int c = 0; c < ncovered && !below; c++) below = covered[c] == i;
            for (int t = 0; t < kn->nkeeps && !dup; t++) dup = kn->keeps[t].row_expr == i->expr;
            if (below || dup) continue;
            kn->keeps[kn->nkeeps++] = (fuse_keep){q, pi->expr, i->expr, i->node->dtype, i->node};
        }
    }
    return true;
}
