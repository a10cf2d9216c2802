/* graph/contract.c: contractions (matmul-shaped sums of products): the one
 * predicate and the one fold every evaluator, planner and emitter uses.
 *
 * A contraction (lazyfuse.h, "Contractions") is a float32 SUM reduction
 * over exactly one axis whose input is a map node (not marked materialized)
 * whose fn's result is a float32 product x * y of two float32
 * subexpressions, where x or y is independent of at least one kept axis
 * (the GEMM shape: A[:, :, None] * B[None, :, :]; matrix-vector and batched
 * forms included). An operand is independent of an axis when every map
 * input it reads has extent 1 there (right-aligned broadcasting; a missing
 * axis counts as extent 1).
 *
 * Its value: along the contracted axis in ascending order, in blocks of
 * LF_CONTRACT_BLOCK elements, a float partial from +0.0f updated by
 * fmaf(x, y, partial); each block's partial added, in block order, into a
 * double from 0.0; the double rounded to float once. graph_contract_fold
 * flushes a block's partial after its last element; graph_contract_finish
 * adds the last, incomplete block's partial (a complete block left +0.0f,
 * and adding +0.0 changes no double that started at +0.0). The sign of a
 * zero partial never shows: the double starts at +0.0, so it never holds
 * -0.0, and a zero partial added to it leaves it unchanged.
 */
#include "graph/graph.h"

#include <math.h>
#include <string.h>

/* Bit k set: expression i of f reads parameter k (f has at most 32 params). */
static bool param_deps(const lf_fn *f, uint32_t *dep, int n) {
    if (f->nexprs > n) return false;
    for (int i = 0; i < f->nexprs; i++) {
        const fn_expr *x = &f->exprs[i];
        dep[i] = 0;
        if (x->kind == EXPR_PARAM) dep[i] = x->param < 32 ? 1u << x->param : 0;
        for (int k = 0; k < 3; k++)
            if ((x->kind == EXPR_OP || x->kind == EXPR_CAST || x->kind == EXPR_CALL) && x->arg[k] >= 0) dep[i] |= dep[x->arg[k]];
    }
    return true;
}

bool graph_contraction(const lf_node *r, graph_contract *c) {
    if (!r || r->kind != NODE_REDUCE || r->u.reduce.op != LF_RED_SUM) return false;
    uint32_t axes = r->u.reduce.axes;
    if (!axes || (axes & (axes - 1))) return false; /* exactly one reduced axis */
    const lf_node *m = r->inputs[0];
    if (m->kind != NODE_MAP || m->dtype != LF_F32 || m->materialize || r->dtype != LF_F32) return false;
    const lf_fn *f = m->u.map.fn;
    if (f->result < 0) return false;
    const fn_expr *mul = &f->exprs[f->result];
    if (mul->kind != EXPR_OP || mul->op != LF_OP_MUL || m->u.map.ctype[f->result] != LF_F32 ||
        m->u.map.etype[f->result] != LF_F32)
        return false;
    int xa = mul->arg[0], ya = mul->arg[1];
    if (m->u.map.etype[xa] != LF_F32 || m->u.map.etype[ya] != LF_F32) return false;
    uint32_t dep[1024];
    if (!param_deps(f, dep, 1024)) return false; /* huge fns: never a contraction */
    /* the axes of the map's space each operand varies along */
    uint32_t xv = 0, yv = 0;
    for (int k = 0; k < m->ninputs; k++) {
        const lf_node *in = m->inputs[k];
        uint32_t v = 0;
        for (int d = 0; d < m->ndim; d++) {
            int j = in->ndim - m->ndim + d;
            if (j >= 0 && in->shape[j] != 1) v |= 1u << d;
        }
        if (dep[xa] & (1u << k)) xv |= v;
        if (dep[ya] & (1u << k)) yv |= v;
    }
    uint32_t kept = ((m->ndim < 32 ? (1u << m->ndim) : 0u) - 1u) & ~axes;
    if (!(kept & ~xv) && !(kept & ~yv)) return false;
    if (c) {
        c->map = m;
        c->x = xa;
        c->y = ya;
        for (c->axis = 0; !(axes & (1u << c->axis)); c->axis++) {}
        c->x_axes = xv;
        c->y_axes = yv;
    }
    return true;
}

void graph_contract_init(graph_contract_acc *a) {
    a->acc = 0.0;
    a->part = 0.0f;
    a->n = 0;
}

void graph_contract_fold(graph_contract_acc *a, float x, float y) {
    a->part = fmaf(x, y, a->part);
    if (++a->n == LF_CONTRACT_BLOCK) {
        a->acc += (double)a->part;
        a->part = 0.0f;
        a->n = 0;
    }
}

float graph_contract_finish(const graph_contract_acc *a) { return (float)(a->acc + (double)a->part); }
