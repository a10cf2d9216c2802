/* fusion/plan_contract.c: contractions in the planner (rule of plan.c's
 * top comment, "Contractions"; the predicate and the fold are
 * graph/contract.c's).
 *
 *   Contractions. A contraction's product map is never a leaf in the
 *     contraction's own kernel: the kernel computes it from its operands
 *     (inlined), also when the map is a root (an output, or fusion off), so
 *     a contraction folds fmaf(x, y, partial) of the operands, never the
 *     rounded product; other kernels load the product when it is stored. A
 *     small contraction (plan.c's small reductions) whose product is not an
 *     output is inlined as the chain fma(x_j, y_j, r) from 0.0 in float,
 *     plus +0.0 (the double the value is defined by starts at +0.0: a -0.0
 *     partial gives +0.0), equal to graph_contract_fold's value (one block);
 *     when a round makes its product map a root (shared and expensive, or
 *     split), the contraction becomes a root too (fuse_contract_roots), so
 *     it never reads the rounded product. The load-cap and size splits
 *     never pick a root (plan_merge.c), so they never pick such a map again.
 *
 * Invariant a schedule gives (fuse_red_contraction): a contraction's fuse_red
 * names a float32 multiply in its pass fn, whose operands are the
 * contraction's x and y.
 */
#include "fusion/plan.h"

#include <assert.h>

void fuse_contract_maps(planner *p) {
    for (int id = 0; id < p->nn; id++) {
        graph_contract c;
        if (p->needed[id] && graph_contraction(p->g->nodes[id], &c)) p->cmap[c.map->id] = id + 1;
    }
}

bool fuse_contract_stored(const planner *p, const lf_node *r) {
    graph_contract c;
    return graph_contraction(r, &c) && p->output[c.map->id] >= 0;
}

bool fuse_contracts_map(const planner *p, int k, const lf_node *n) {
    graph_contract c;
    return p->cmap[n->id] && graph_contraction(p->g->nodes[k], &c) && c.map == n;
}

bool fuse_contract_roots(planner *p) {
    bool added = false;
    for (int g = 0; g < p->ngc; g++) { /* the needed gathers and contractions */
        int id = p->gc_ids[g];
        graph_contract c;
        if (p->needed[id] && !p->root[id] && graph_contraction(p->g->nodes[id], &c) && p->root[c.map->id])
            added = fuse_make_root(p, id);
    }
    return added;
}

bool fuse_red_contraction(const fuse_kernel *kn, int j, int *x, int *y) {
    const fuse_red *r = &kn->reds[j];
    if (kn->kind == FUSE_KERNEL_SCAN || !graph_contraction(r->node, NULL)) return false;
    const lf_fn *f = kn->passes[r->pass].fn;
    const fn_expr *m = &f->exprs[r->expr];
    assert(m->kind == EXPR_OP && m->op == LF_OP_MUL && kn->passes[r->pass].etype[m->arg[0]] == LF_F32 &&
           kn->passes[r->pass].etype[m->arg[1]] == LF_F32);
    *x = m->arg[0];
    *y = m->arg[1];
    return true;
}

int fuse_small_contraction(lf_fn *f, const inst *i, int cnt) {
    fn_expr c = graph_fn_blank_expr(EXPR_CONST); /* a weak 0.0: float here */
    c.value.f = 0.0;
    int zero = graph_fn_add(f, &c), r = zero;
    for (int j = 0; r >= 0 && j < cnt; j++) {
        const fn_expr *m = &f->exprs[i->in[j]->expr];
        assert(m->kind == EXPR_OP && m->op == LF_OP_MUL);
        fn_expr o = graph_fn_blank_expr(EXPR_OP);
        o.op = LF_OP_FMA;
        o.arg[0] = m->arg[0];
        o.arg[1] = m->arg[1];
        o.arg[2] = r;
        r = graph_fn_add(f, &o);
    }
    if (r < 0) return -1;
    fn_expr o = graph_fn_blank_expr(EXPR_OP);
    o.op = LF_OP_ADD;
    o.arg[0] = r;
    o.arg[1] = zero;
    return graph_fn_add(f, &o);
}
