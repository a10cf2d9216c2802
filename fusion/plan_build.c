/* fusion/plan_build.c: pass 2, from the final roots and merges to the
 * schedule: the buffer plan (input, output and temporary slots), each
 * kernel's fns, loads, reductions and stores, the memory plan (temporaries
 * sharing blocks by liveness), the traffic statistics; and printing a
 * schedule (LF_DEBUG=fusion).
 */
#include "fusion/plan.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

/* ---- pass 2: building the schedule ------------------------------------------------------------ */

typedef struct kbuild {
    pload loads[GRAPH_MAX_PARAMS + 1]; /* loads of the fn being built */
    int nloads;                        /* used entries (<= GRAPH_MAX_PARAMS) */
} kbuild;

/* Copies a scratch map into graph_malloc'd memory. */
static bool map_keep(fuse_map *dst, const fuse_map *src) {
    dst->steps = graph_malloc((size_t)src->nsteps * sizeof *dst->steps);
    if (!dst->steps) return false;
    memcpy(dst->steps, src->steps, (size_t)src->nsteps * sizeof *dst->steps);
    dst->nsteps = src->nsteps;
    return true;
}

/* Whether expression i of f is weak (a literal not yet met by a strong value),
 * given the weakness of its operands; mirrors graph_fn_types. */
static bool expr_weak(const lf_fn *f, int i, const bool *weak) {
    const fn_expr *e = &f->exprs[i];
    switch (e->kind) {
    case EXPR_CONST: return true;
    case EXPR_PARAM:
    case EXPR_SCALAR:
    case EXPR_CALL:
    case EXPR_CAST: return false;
    case EXPR_OP: break;
    }
    const op_info *oi = &graph_ops[e->op];
    if (oi->typing == OPTY_CMP || oi->typing == OPTY_LOGIC || oi->typing == OPTY_PRED) return false;
    for (int k = oi->typing == OPTY_SELECT ? 1 : 0; k < oi->arity; k++)
        if (!weak[e->arg[k]]) return false;
    return true;
}

/* Emits the code of one instance into f (its inputs' instances are emitted
 * already). Loads were numbered in kb; grp as for leaf_load. Returns false
 * on failure. */
static bool emit_inst(planner *p, lf_fn *f, const kbuild *kb, inst *i, int grp) {
    const lf_node *n = i->node;
    if (fuse_is_leaf(p, n, i->kernel)) {
        fn_expr e;
        if (n->kind == NODE_CONST) { /* a run-time scalar, numbered by number_scalars */
            e = graph_fn_blank_expr(EXPR_SCALAR);
            e.node = n;
            e.cast_to = n->dtype;
            e.param = -1;
        } else {
            pload l;
            fuse_leaf_load(p, i, grp, &l);
            e = graph_fn_blank_expr(EXPR_PARAM);
            e.param = fuse_find_load(kb->loads, kb->nloads, &l);
            assert(e.param >= 0);
        }
        return (i->expr = graph_fn_add(f, &e)) >= 0;
    }
    switch (n->kind) {
    case NODE_VIEW: i->expr = i->in[0]->expr; return true;
    case NODE_REDUCE: /* the seed of a reduction kernel: folded, not emitted */
        if (p->root[n->id]) return true;
        if (graph_contraction(n, NULL)) /* an inlined small contraction (plan_contract.c) */
            return (i->expr = fuse_small_contraction(f, i, fuse_inst_inputs(p, i))) >= 0;
        { /* an inlined small reduction (plan.c): identity, then each element, rounded once */
            lf_dtype acc = graph_red_acc_dtype(n->u.reduce.op, n->inputs[0]->dtype);
            fn_expr c = graph_fn_blank_expr(EXPR_CONST);
            c.is_int = acc != LF_F64;
            if (c.is_int) c.value.i = n->u.reduce.op == LF_RED_PROD;
            else c.value.f = n->u.reduce.op == LF_RED_PROD ? 1.0 : 0.0;
            int r = graph_fn_add(f, &c);
            for (int j = 0, cnt = fuse_inst_inputs(p, i); r >= 0 && j < cnt; j++) {
                fn_expr x = graph_fn_blank_expr(EXPR_CAST);
                x.cast_to = acc;
                x.arg[0] = i->in[j]->expr;
                int xv = graph_fn_add(f, &x);
                if (xv < 0) return false;
                fn_expr o = graph_fn_blank_expr(EXPR_OP);
                o.op = n->u.reduce.op == LF_RED_PROD ? LF_OP_MUL : LF_OP_ADD;
                o.arg[0] = r;
                o.arg[1] = xv;
                r = graph_fn_add(f, &o);
            }
            if (r < 0) return false;
            fn_expr out = graph_fn_blank_expr(EXPR_CAST);
            out.cast_to = n->dtype;
            out.arg[0] = r;
            return (i->expr = graph_fn_add(f, &out)) >= 0;
        }
    case NODE_SCAN: return true;   /* the seed of a scan kernel, likewise */
    case NODE_SORT: i->expr = i->in[0]->expr; return true; /* the key (plan_sort.c) */
    case NODE_SCATTER: { /* its own kernel: the values in dst's dtype (plan_scatter.c) */
        if (n->inputs[2]->dtype == n->dtype) {
            i->expr = i->in[2]->expr;
            return true;
        }
        fn_expr c = graph_fn_blank_expr(EXPR_CAST);
        c.cast_to = n->dtype;
        c.arg[0] = i->in[2]->expr;
        return (i->expr = graph_fn_add(f, &c)) >= 0;
    }
    case NODE_MAP: break;
    default: return false;
    }
    const lf_fn *g = n->u.map.fn;
    int *map = fuse_scratch_alloc(&p->tmp, (size_t)g->nexprs * (sizeof(int) + sizeof(bool)));
    if (!map) return false;
    bool *weak = (bool *)(map + g->nexprs);
    /* only the expressions the result depends on */
    for (int x = 0; x < g->nexprs; x++) map[x] = x == g->result ? 1 : 0;
    for (int x = g->result; x >= 0; x--)
        if (map[x])
            for (int k = 0; k < 3; k++)
                if (g->exprs[x].arg[k] >= 0) map[g->exprs[x].arg[k]] = 1;
    for (int x = 0; x <= g->result; x++) {
        if (!map[x]) continue;
        fn_expr e = g->exprs[x];
        weak[x] = expr_weak(g, x, weak);
        if (e.kind == EXPR_PARAM) {
            map[x] = i->in[e.param]->expr;
            continue;
        }
        for (int k = 0; k < 3; k++)
            if (e.arg[k] >= 0) e.arg[k] = map[e.arg[k]];
        if ((map[x] = graph_fn_add(f, &e)) < 0) return false;
    }
    int r = map[g->result];
    if (weak[g->result]) { /* a weak result: the reference rounds it to the node's dtype */
        fn_expr c = graph_fn_blank_expr(EXPR_CAST);
        c.cast_to = n->dtype;
        c.arg[0] = r;
        if ((r = graph_fn_add(f, &c)) < 0) return false;
    }
    i->expr = r;
    return true;
}

/* Root k's instances in the order pass 2 builds them: depth first from the
 * root's own instance, each instance's inputs in argument order before it
 * (then any instance that walk does not reach, in list order). The order
 * depends only on the expression's structure, not on node ids, so the
 * parameters, expressions and run-time scalars of a kernel, and its text,
 * are the same whatever order the user created the nodes in (issue 29
 * item 4; the list itself is in node order). Uses inst.expr as the walk's
 * mark (pass 2 sets it again when it emits). NULL when out of memory. */
static inst **build_order(planner *p, int k) {
    int n = p->kcount[k];
    inst **order = fuse_scratch_alloc(&p->tmp, (size_t)(n ? n : 1) * sizeof *order);
    inst **stack = fuse_scratch_alloc(&p->tmp, (size_t)(n ? n : 1) * sizeof *stack);
    int *next = fuse_scratch_alloc(&p->tmp, (size_t)(n ? n : 1) * sizeof *next);
    if (!order || !stack || !next) return NULL;
    enum { UNSEEN = -1, SEEN = -2 };
    inst *seed = NULL;
    for (int j = 0; j < n; j++) {
        inst *i = p->klist[k][j];
        assert(i->kernel == k);
        i->expr = UNSEEN;
        if (i->node->id == k) seed = i;
    }
    int m = 0;
    for (int j = -1; j < n; j++) { /* the seed first, then what it does not reach */
        inst *start = j < 0 ? seed : p->klist[k][j];
        if (!start || start->expr != UNSEEN) continue;
        int top = 0;
        start->expr = SEEN;
        stack[top] = start, next[top++] = 0;
        while (top) {
            inst *i = stack[top - 1];
            int na = fuse_is_leaf(p, i->node, k) ? 0 : fuse_inst_inputs(p, i);
            if (na > LF_MAX_ARGS) na = LF_MAX_ARGS;
            inst *c = NULL;
            while (next[top - 1] < na && !c) {
                inst *x = i->in[next[top - 1]++];
                if (x && x->kernel == k && x->expr == UNSEEN) c = x;
            }
            if (c) {
                assert(top < n);
                c->expr = SEEN;
                stack[top] = c, next[top++] = 0;
            } else {
                order[m++] = i;
                top--;
            }
        }
    }
    assert(m == n);
    return order;
}

/* Adds the loads of root k's leaf instances (in build order) to kb (grp as
 * for leaf_load). */
static void collect_loads(planner *p, int k, inst *const *order, int grp, kbuild *kb) {
    for (int j = 0; j < p->kcount[k]; j++) {
        const inst *i = order[j];
        pload l;
        if (!fuse_is_leaf(p, i->node, k)) continue;
        if (!fuse_leaf_load(p, i, grp, &l) || fuse_find_load(kb->loads, kb->nloads, &l) >= 0) continue;
        assert(kb->nloads < GRAPH_MAX_PARAMS);
        kb->loads[kb->nloads++] = l;
    }
}

/* Creates an fn in the schedule's arena with the loads of kb as parameters,
 * and its load array. */
static lf_fn *start_fn(planner *p, fuse_schedule *s, const kbuild *kb, fuse_load **loads,
                       int *nloads) {
    lf_fn *f = graph_fn_create(s->arena, kb->nloads ? kb->nloads : 1, NULL);
    if (!f) return NULL;
    *loads = graph_calloc((size_t)(kb->nloads ? kb->nloads : 1), sizeof **loads);
    if (!*loads) return NULL;
    *nloads = kb->nloads; /* before the maps, so a failure frees the ones made */
    for (int j = 0; j < kb->nloads; j++) {
        const pload *l = &kb->loads[j];
        fuse_load *ld = &(*loads)[j];
        ld->src = l->src;
        ld->node = l->node;
        ld->dtype = l->node->dtype;
        ld->slot = l->src == FUSE_SRC_SLOT ? p->slot_of[l->node->id] : -1;
        if (l->src == FUSE_SRC_GATHER) {
            if (!fuse_gather_load(p, kb->loads, kb->nloads, l, ld)) return NULL;
            continue;
        }
        if (l->src != FUSE_SRC_ACC && !map_keep(&ld->map, l->map)) return NULL;
    }
    return f;
}

/* Types fn f for its loads into freshly allocated arrays. */
static bool type_fn(lf_fn *f, const fuse_load *loads, int nloads, lf_dtype **et, lf_dtype **ct) {
    if (f->nexprs == 0) return false;
    f->result = f->nexprs - 1;
    lf_dtype params[GRAPH_MAX_PARAMS] = {LF_BOOL};
    for (int j = 0; j < nloads; j++) params[j] = loads[j].dtype;
    *et = graph_malloc((size_t)f->nexprs * sizeof **et);
    *ct = graph_malloc((size_t)f->nexprs * sizeof **ct);
    return *et && *ct && graph_fn_types(f, params, *et, *ct) != LF_NDTYPES;
}

static bool add_store(fuse_kernel *kn, int slot, int expr, bool row, bool pos) {
    fuse_store *st = graph_realloc(kn->stores, (size_t)(kn->nstores + 1) * sizeof *st);
    if (!st) return false;
    kn->stores = st;
    st[kn->nstores++] = (fuse_store){slot, expr, row, pos};
    return true;
}

/* Whether root r's value must be stored. */
static bool is_stored(const planner *p, int r) {
    const lf_node *n = p->g->nodes[r];
    if (p->output[r] >= 0) return true;
    if (n->kind == NODE_INPUT) return false;
    if (n->materialize) return true;
    for (const inst *i = p->first[r]; i; i = i->next_node)
        if (fuse_unit_of(p, i->kernel) != fuse_unit_of(p, r)) return true;
    return false;
}

static int new_slot(fuse_schedule *s, fuse_slot_kind kind, const lf_node *n) {
    fuse_slot *sl = &s->slots[s->nslots];
    memset(sl, 0, sizeof *sl);
    sl->kind = kind;
    sl->node = n;
    sl->output = -1;
    sl->dtype = n->dtype;
    sl->numel = n->numel;
    sl->bytes = (size_t)n->numel * lf_dtype_size(n->dtype);
    sl->def = sl->last_use = sl->block = -1;
    return s->nslots++;
}

/* The buffer plan: input, output and temporary slots. */
lf_status fuse_plan_slots(planner *p, fuse_schedule *s, int n, lf_node *const *outs) {
    int nn = p->nn;
    s->slots = graph_calloc(2 * (size_t)nn + 1, sizeof *s->slots);
    s->out_slot = graph_calloc((size_t)n, sizeof *s->out_slot);
    if (!s->slots || !s->out_slot) return fuse_nomem(p);
    s->nouts = n;
    for (int id = 0; id < nn; id++) p->slot_of[id] = -1;
    /* one input slot per buffer, in node order: found by buffer in a hash
       table (open addressing, slot + 1; a scan of the slots made so far was
       quadratic in the inputs) */
    size_t cap = 16;
    while (cap < 2 * (size_t)nn) cap *= 2;
    int *bslot = fuse_scratch_calloc(&p->tmp, cap, sizeof *bslot);
    if (!bslot) return fuse_nomem(p);
    for (int id = 0; id < nn; id++) {
        const lf_node *x = p->g->nodes[id];
        if (!p->needed[id] || x->kind != NODE_INPUT) continue;
        uint64_t h = fuse_hash_mix(0, (uint64_t)(uintptr_t)x->u.buffer);
        size_t b = (size_t)(h ^ (h >> 29)) & (cap - 1);
        while (bslot[b] && fuse_slot_buffer(&s->slots[bslot[b] - 1]) != x->u.buffer) b = (b + 1) & (cap - 1);
        if (!bslot[b]) bslot[b] = new_slot(s, FUSE_SLOT_INPUT, x) + 1;
        p->slot_of[id] = bslot[b] - 1;
    }
    int *oslot = p->oslot;
    for (int id = 0; id < nn; id++) oslot[id] = -1;
    for (int i = 0; i < n; i++) {
        int id = outs[i]->id;
        if (oslot[id] < 0) {
            oslot[id] = new_slot(s, FUSE_SLOT_OUTPUT, outs[i]);
            s->slots[oslot[id]].output = i;
        }
        s->out_slot[i] = oslot[id];
    }
    for (int id = 0; id < nn; id++) {
        if (!p->needed[id] || !p->root[id]) continue;
        if (oslot[id] >= 0) {
            if (p->g->nodes[id]->kind != NODE_INPUT) p->slot_of[id] = oslot[id];
        } else if (is_stored(p, id)) {
            p->slot_of[id] = new_slot(s, FUSE_SLOT_TEMP, p->g->nodes[id]);
        }
    }
    return LF_OK;
}

static int cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Records the graph nodes kernel k (and its epilogues) computes. */
static bool kernel_nodes(planner *p, fuse_kernel *kn, int k) {
    int cap = 0;
    for (int e = k; e >= 0; e = p->next_member[e])
        if (e == k || p->merged_into[e] == k) cap += p->kcount[e];
    kn->nodes = graph_malloc((size_t)(cap ? cap : 1) * sizeof *kn->nodes);
    if (!kn->nodes) return false;
    for (int e = k; e >= 0; e = p->next_member[e]) {
        if (e != k && p->merged_into[e] != k) continue;
        for (int j = 0; j < p->kcount[e]; j++) {
            const lf_node *x = p->klist[e][j]->node;
            if (x->kind == NODE_INPUT || (p->root[x->id] && x->id != e)) continue;
            kn->nodes[kn->nnodes++] = x->id;
        }
    }
    qsort(kn->nodes, (size_t)kn->nnodes, sizeof *kn->nodes, cmp_int);
    int m = 0;
    for (int j = 0; j < kn->nnodes; j++)
        if (!m || kn->nodes[m - 1] != kn->nodes[j]) kn->nodes[m++] = kn->nodes[j];
    kn->nnodes = m;
    return true;
}

/* The slot root e's value is stored to, or -1. */
static int store_slot(const planner *p, int e) {
    return p->g->nodes[e]->kind == NODE_INPUT ? p->oslot[e] : p->slot_of[e];
}

/* Emits the instances of root e into f and stores e's value (if stored). */
static bool emit_root(planner *p, fuse_kernel *kn, lf_fn *f, const kbuild *kb, int e, inst *const *order,
                      int grp, bool row, bool pos, inst **seed) {
    *seed = NULL;
    for (int j = 0; j < p->kcount[e]; j++) {
        inst *i = order[j];
        if (i->node->id == e) *seed = i;
        if (!emit_inst(p, f, kb, i, grp)) return false;
    }
    assert(*seed);
    if (fuse_is_fold(p->g->nodes[e])) return true; /* folded, stored by the epilogue */
    int sl = store_slot(p, e);
    return sl < 0 || add_store(kn, sl, (*seed)->expr, row, pos);
}

/* Whether root e of kernel k is built into the fn of role r (and, for
 * ROLE_PASS, pass q): pass 0 also computes the ROLE_POS roots. */
static bool in_fn(const planner *p, int e, int k, role r, int q) {
    if (fuse_unit_of(p, e) != k || !p->root[e]) return false;
    if (r == ROLE_PASS && q == 0 && p->role[e] == ROLE_POS) return true;
    return p->role[e] == r && (r != ROLE_PASS || p->pass[e] == q);
}

/* Builds one fn of kernel k from the roots of the kernel with role r (and,
 * for ROLE_PASS, pass q), after the loads already in kb. */
static lf_status build_fn(planner *p, fuse_schedule *s, fuse_kernel *kn, int k, role r, int q,
                          kbuild *kb, fuse_pass *out) {
    int grp = r != ROLE_BODY ? k : -1;
    int nroots = 0;
    for (int e = k; e >= 0; e = p->next_member[e]) nroots += in_fn(p, e, k, r, q);
    inst ***orders = fuse_scratch_alloc(&p->tmp, (size_t)(nroots ? nroots : 1) * sizeof *orders);
    if (!orders) return fuse_nomem(p);
    for (int e = k, t = 0; e >= 0; e = p->next_member[e]) {
        if (!in_fn(p, e, k, r, q)) continue;
        if (!(orders[t] = build_order(p, e))) return fuse_nomem(p);
        collect_loads(p, e, orders[t++], grp, kb);
    }
    out->fn = start_fn(p, s, kb, &out->loads, &out->nloads);
    if (!out->fn) return fuse_nomem(p);
    /* parameters first: the epilogue's stored reductions read them */
    for (int j = 0; j < kb->nloads; j++) {
        fn_expr e = graph_fn_blank_expr(EXPR_PARAM);
        e.param = j;
        if (kb->loads[j].src == FUSE_SRC_ACC && graph_fn_add(out->fn, &e) < 0) return fuse_nomem(p);
    }
    for (int e = k, t = 0; e >= 0; e = p->next_member[e]) {
        if (!in_fn(p, e, k, r, q)) continue;
        inst *seed;
        if (!emit_root(p, kn, out->fn, kb, e, orders[t++], grp, r == ROLE_ROW, p->role[e] == ROLE_POS, &seed))
            return fuse_nomem(p);
        if (r == ROLE_PASS) /* the reductions are listed in pass order, then node order */
            for (int j = 0; j < kn->nreds; j++)
                if (kn->reds[j].node->id == e) kn->reds[j].expr = seed->in[0]->expr;
    }
    if (r == ROLE_EPI) /* the kernel's reductions that are stored */
        for (int j = 0; j < kb->nloads; j++) {
            const lf_node *x = kb->loads[j].node;
            if (kb->loads[j].src != FUSE_SRC_ACC || p->slot_of[x->id] < 0) continue;
            bool dup = false;
            for (int t = 0; t < kn->nstores; t++) dup |= kn->stores[t].slot == p->slot_of[x->id];
            fn_expr e = graph_fn_blank_expr(EXPR_PARAM);
            e.param = j;
            int id = graph_fn_add(out->fn, &e);
            if (id < 0 || (!dup && !add_store(kn, p->slot_of[x->id], id, false, false))) return fuse_nomem(p);
        }
    if (!type_fn(out->fn, out->loads, out->nloads, &out->etype, &out->ctype)) return fuse_nomem(p);
    for (int j = 0; j < out->nloads; j++) /* ACC loads name their reduction */
        for (int t = 0; t < kn->nreds; t++)
            if (out->loads[j].src == FUSE_SRC_ACC && kn->reds[t].node == out->loads[j].node)
                out->loads[j].red = t;
    return LF_OK;
}

/* Index of constant node n in kn->scalars, added if new (cap: room for every
 * expression of the kernel's fns plus a scatter's dst); -1 when out of memory. */
static int scalar_index(fuse_kernel *kn, const lf_node *n, int cap) {
    for (int j = 0; j < kn->nscalars; j++)
        if (kn->scalars[j] == n) return j;
    if (!kn->scalars && !(kn->scalars = graph_malloc((size_t)cap * sizeof *kn->scalars))) return -1;
    kn->scalars[kn->nscalars] = n;
    return kn->nscalars++;
}

/* Numbers the constant nodes kernel kn reads (fuse_kernel.scalars): each
 * EXPR_SCALAR's param, then a scatter's constant dst. The fns are complete,
 * and hash-consing ignores param, so setting it here is safe. */
static bool number_scalars(fuse_kernel *kn) {
    int cap = 1;
    kn->scat_dst_scalar = -1;
    for (int f = 0; f < kn->npasses + 2; f++) {
        const lf_fn *fn = f < kn->npasses ? kn->passes[f].fn : f == kn->npasses ? kn->epi : kn->row;
        if (fn) cap += fn->nexprs;
    }
    for (int f = 0; f < kn->npasses + 2; f++) {
        lf_fn *fn = f < kn->npasses ? kn->passes[f].fn : f == kn->npasses ? kn->epi : kn->row;
        for (int i = 0; fn && i < fn->nexprs; i++) {
            fn_expr *x = &fn->exprs[i];
            if (x->kind == EXPR_SCALAR && (x->param = scalar_index(kn, x->node, cap)) < 0) return false;
        }
    }
    if (kn->kind == FUSE_KERNEL_SCATTER && kn->scat_dst_slot < 0 &&
        (kn->scat_dst_scalar = scalar_index(kn, kn->scatter->inputs[0], cap)) < 0)
        return false;
    return true;
}

static lf_status build_kernel(planner *p, fuse_schedule *s, int k, fuse_kernel *kn);

/* The kind of kernel kn with root node rn (fusion.h's fuse_kernel_kind): a
 * reduction's from its axes, as its loop nest will run them. */
static fuse_kernel_kind kernel_kind(const fuse_kernel *kn, const lf_node *rn) {
    if (rn->kind == NODE_SORT) return FUSE_KERNEL_SORT;
    if (rn->kind == NODE_SCATTER) return FUSE_KERNEL_SCATTER;
    if (!fuse_is_fold(rn)) return FUSE_KERNEL_ELEMENTWISE;
    if (rn->kind == NODE_SCAN) return FUSE_KERNEL_SCAN;
    int kept = 0, reduced = 0, last = -1; /* last: the innermost non-unit axis */
    for (int d = 0; d < kn->ndim; d++) {
        if (kn->shape[d] == 1) continue;
        if (kn->redmask & (1u << d)) reduced++;
        else kept++;
        last = d;
    }
    if (kept == 0) return FUSE_KERNEL_REDUCE_FULL;
    if (reduced == 0 || (kn->redmask & (1u << last))) return FUSE_KERNEL_REDUCE_INNER;
    return FUSE_KERNEL_REDUCE_OUTER;
}

/* Builds the kernel of root k (and of the roots that joined it) into kn. */
lf_status fuse_build_kernel(planner *p, fuse_schedule *s, int k, fuse_kernel *kn) {
    lf_status st = build_kernel(p, s, k, kn);
    if (st == LF_OK && !number_scalars(kn)) return fuse_nomem(p);
    return st;
}

static lf_status build_kernel(planner *p, fuse_schedule *s, int k, fuse_kernel *kn) {
    const lf_node *rn = p->g->nodes[k];
    kbuild kb;
    lf_status st;
    memset(kn, 0, sizeof *kn);
    kn->root = k;
    kn->red_expr = -1;
    if (!kernel_nodes(p, kn, k)) return fuse_nomem(p);
    bool red = fuse_is_fold(rn);
    const lf_node *space = red ? rn->inputs[0] : rn;
    kn->ndim = space->ndim;
    memcpy(kn->shape, space->shape, sizeof kn->shape);
    kn->numel = space->numel;
    if (red) kn->redmask = fuse_fold_mask(rn);
    kn->kind = kernel_kind(kn, rn);
    const unit *u = p->unit[k];
    kn->npasses = u ? u->npasses : 1;
    kn->passes = graph_calloc((size_t)kn->npasses, sizeof *kn->passes);
    if (!kn->passes) return fuse_nomem(p);
    if (!red) {
        kb.nloads = 0;
        fuse_pass body;
        memset(&body, 0, sizeof body);
        st = build_fn(p, s, kn, k, ROLE_BODY, 0, &kb, &body);
        kn->body = body.fn, kn->loads = body.loads, kn->nloads = body.nloads;
        kn->body_etype = body.etype, kn->body_ctype = body.ctype;
        kn->passes[0] = body;
        if (st == LF_OK && rn->kind == NODE_SCATTER) fuse_scatter_kernel(p, k, kn);
        if (st == LF_OK && rn->kind == NODE_SORT) fuse_sort_kernel(p, k, kn);
        return st;
    }
    kn->scan_exclusive = rn->kind == NODE_SCAN && rn->u.scan.exclusive;
    kn->out_ndim = rn->ndim;
    memcpy(kn->out_shape, rn->shape, sizeof kn->out_shape);
    kn->out_numel = rn->numel;
    /* the reductions, by pass then node id */
    for (int e = k; e >= 0; e = p->next_member[e]) kn->nreds += fuse_unit_of(p, e) == k && p->root[e] && p->role[e] == ROLE_PASS;
    kn->reds = graph_calloc((size_t)kn->nreds, sizeof *kn->reds);
    if (!kn->reds) return fuse_nomem(p);
    int nr = 0;
    for (int q = 0; q < kn->npasses; q++)
        for (int e = k; e >= 0; e = p->next_member[e]) {
            const lf_node *x = p->g->nodes[e];
            if (fuse_unit_of(p, e) != k || !p->root[e] || p->role[e] != ROLE_PASS || p->pass[e] != q) continue;
            kn->reds[nr++] = (fuse_red){fuse_fold_op(x), q, -1, x->inputs[0]->dtype, x};
        }
    assert(nr == kn->nreds && kn->reds[0].node == rn);
    for (int q = 0; q < kn->npasses; q++) {
        kb.nloads = 0;
        fuse_pass *ps = &kn->passes[q];
        /* a pass's fn must not be empty: its reductions always emit */
        if ((st = build_fn(p, s, kn, k, ROLE_PASS, q, &kb, ps)) != LF_OK) {
            if (q == 0) { /* owned through the body fields from here on */
                kn->body = ps->fn, kn->loads = ps->loads, kn->nloads = ps->nloads;
                kn->body_etype = ps->etype, kn->body_ctype = ps->ctype;
                memset(ps, 0, sizeof *ps);
            }
            return st;
        }
        if (q == 0) {
            kn->body = ps->fn, kn->loads = ps->loads, kn->nloads = ps->nloads;
            kn->body_etype = ps->etype, kn->body_ctype = ps->ctype;
        }
    }
    kn->red_op = kn->reds[0].op;
    kn->red_expr = kn->reds[0].expr;
    kn->red_in = kn->reds[0].in;
    kn->red_node = rn;
    /* epilogue: load 0 is the root reduction, then every other stored one */
    kb.nloads = 0;
    for (int j = 0; j < kn->nreds; j++) {
        const lf_node *x = kn->reds[j].node;
        if (j == 0 || p->slot_of[x->id] >= 0) kb.loads[kb.nloads++] = (pload){FUSE_SRC_ACC, x, x, NULL};
    }
    fuse_pass epi;
    memset(&epi, 0, sizeof epi);
    st = build_fn(p, s, kn, k, ROLE_EPI, 0, &kb, &epi);
    kn->epi = epi.fn, kn->epi_loads = epi.loads, kn->nepi_loads = epi.nloads;
    kn->epi_etype = epi.etype, kn->epi_ctype = epi.ctype;
    if (st != LF_OK || !u || !u->row) return st;
    /* the row pass */
    kb.nloads = 0;
    fuse_pass row;
    memset(&row, 0, sizeof row);
    st = build_fn(p, s, kn, k, ROLE_ROW, 0, &kb, &row);
    kn->row = row.fn, kn->row_loads = row.loads, kn->nrow_loads = row.nloads;
    kn->row_etype = row.etype, kn->row_ctype = row.ctype;
    if (st == LF_OK && !fuse_row_keeps(p, k, kn)) return fuse_nomem(p);
    return st;
}

const fuse_load *fuse_kernel_fn_loads(const fuse_kernel *kn, int f, int *n, int64_t *iters) {
    int64_t it = kn->numel;
    const fuse_load *ls = NULL;
    *n = 0;
    if (f == 0) {
        *n = kn->nloads, ls = kn->loads;
    } else if (f < kn->npasses) {
        *n = kn->passes[f].nloads, ls = kn->passes[f].loads;
    } else if (f == kn->npasses) {
        *n = kn->nepi_loads, ls = kn->epi_loads, it = kn->out_numel;
    } else if (f == kn->npasses + 1) {
        *n = kn->nrow_loads, ls = kn->row_loads;
    }
    if (iters) *iters = it;
    return ls;
}

/* Slot lifetimes and the sharing of memory blocks between temporaries. */
lf_status fuse_plan_memory(planner *p, fuse_schedule *s) {
    for (int k = 0; k < s->nkernels; k++) {
        const fuse_kernel *kn = &s->kernels[k];
        for (int j = 0; j < kn->nstores; j++) s->slots[kn->stores[j].slot].def = k;
        for (int f = 0; f < kn->npasses + 2; f++) {
            int n;
            const fuse_load *ls = fuse_kernel_fn_loads(kn, f, &n, NULL);
            for (int j = 0; j < n; j++)
                if (ls[j].src == FUSE_SRC_SLOT || ls[j].src == FUSE_SRC_GATHER) s->slots[ls[j].slot].last_use = k;
        }
    }
    int ntemp = 0;
    for (int j = 0; j < s->nslots; j++) ntemp += s->slots[j].kind == FUSE_SLOT_TEMP;
    s->block_bytes = graph_calloc((size_t)(ntemp ? ntemp : 1), sizeof *s->block_bytes);
    int *busy = graph_calloc((size_t)(ntemp ? ntemp : 1), sizeof *busy);
    if (!s->block_bytes || !busy) {
        graph_free(busy);
        return fuse_nomem(p);
    }
    for (int k = 0; k < s->nkernels; k++) {
        const fuse_kernel *kn = &s->kernels[k];
        for (int j = 0; j < kn->nstores; j++) {
            fuse_slot *sl = &s->slots[kn->stores[j].slot];
            if (sl->kind != FUSE_SLOT_TEMP || sl->block >= 0) continue;
            /* best fit among free blocks: the smallest that holds it, else the largest */
            int best = -1;
            for (int b = 0; b < s->nblocks; b++) {
                if (busy[b] >= k) continue;
                if (best < 0) best = b;
                else {
                    bool fits = s->block_bytes[b] >= sl->bytes, bfits = s->block_bytes[best] >= sl->bytes;
                    if ((fits && (!bfits || s->block_bytes[b] < s->block_bytes[best])) ||
                        (!fits && !bfits && s->block_bytes[b] > s->block_bytes[best]))
                        best = b;
                }
            }
            if (best < 0) best = s->nblocks++;
            sl->block = best;
            if (sl->bytes > s->block_bytes[best]) s->block_bytes[best] = sl->bytes;
            busy[best] = sl->last_use > k ? sl->last_use : k;
        }
    }
    graph_free(busy);
    return LF_OK;
}

/* The traffic statistics of lazyfuse.h (bytes_read: per kernel, per slot it
 * loads, the largest min(slot bytes, loop iterations x element size) over
 * its loads of that slot), in one walk over the loads. */
lf_status fuse_plan_traffic(planner *p, fuse_schedule *s) {
    int *mark = fuse_scratch_calloc(&p->keep, (size_t)s->nslots + 1, sizeof *mark);
    size_t *cur = fuse_scratch_calloc(&p->keep, (size_t)s->nslots + 1, sizeof *cur);
    if (!mark || !cur) return fuse_nomem(p);
    for (int j = 0; j < s->nslots; j++) {
        mark[j] = -1;
        if (s->slots[j].kind == FUSE_SLOT_TEMP) s->bytes_materialized += s->slots[j].bytes;
    }
    for (int k = 0; k < s->nkernels; k++) {
        const fuse_kernel *kn = &s->kernels[k];
        for (int j = 0; j < kn->nstores; j++) s->bytes_written += s->slots[kn->stores[j].slot].bytes;
        for (int f = 0; f < kn->npasses + 2; f++) {
            int n;
            int64_t iters;
            const fuse_load *ls = fuse_kernel_fn_loads(kn, f, &n, &iters);
            for (int j = 0; j < n; j++) {
                if (ls[j].src != FUSE_SRC_SLOT && ls[j].src != FUSE_SRC_GATHER) continue;
                int sl = ls[j].slot;
                size_t want = (size_t)iters * lf_dtype_size(s->slots[sl].dtype);
                if (want > s->slots[sl].bytes) want = s->slots[sl].bytes;
                if (mark[sl] != k) mark[sl] = k, cur[sl] = 0;
                if (want > cur[sl]) {
                    s->bytes_read += want - cur[sl];
                    cur[sl] = want;
                }
            }
        }
    }
    return LF_OK;
}
/* ---- statistics and printing ---------------------------------------------------------------------- */

void fuse_schedule_stats(const fuse_schedule *s, lf_eval_stats *st) {
    memset(st, 0, sizeof *st);
    st->kernels = s->nkernels;
    st->plan_seconds = s->plan_seconds;
    st->bytes_read = s->bytes_read;
    st->bytes_written = s->bytes_written;
    st->bytes_materialized = s->bytes_materialized;
    st->temp_bytes_avoided = s->unfused_temp_bytes > s->bytes_materialized
                                 ? s->unfused_temp_bytes - s->bytes_materialized
                                 : 0;
}

static void print_loads(FILE *fp, const char *what, const fuse_load *ls, int n) {
    static const char *const src[] = {"slot", "iota", "acc", "gather"};
    fprintf(fp, "; %s", what);
    for (int j = 0; j < n; j++) {
        if (ls[j].src == FUSE_SRC_ACC) fprintf(fp, " acc%d", ls[j].red);
        else fprintf(fp, " %s%d(%d steps)", ls[j].node->kind == NODE_RANDOM ? "random" : src[ls[j].src], ls[j].slot,
                     ls[j].map.nsteps);
    }
}

void fuse_schedule_print(const fuse_schedule *s, FILE *fp) {
    for (int k = 0; k < s->nkernels; k++) {
        const fuse_kernel *kn = &s->kernels[k];
        char sh[160];
        fprintf(fp, "  kernel %d: root %d, ", k, kn->root);
        if (kn->kind == FUSE_KERNEL_SORT) {
            fprintf(fp, "sort rows of %s (%s, k %lld%s%s), %d body exprs",
                    graph_shape_str(sh, sizeof sh, kn->ndim, kn->shape),
                    kn->sort->u.sort.descending ? "descending" : "ascending", (long long)kn->sort->u.sort.k,
                    kn->sort_values ? ", values" : "", kn->sort_indices ? ", indices" : "", kn->body->nexprs);
        } else if (!kn->epi) {
            fprintf(fp, "elementwise over %s, %d body exprs", graph_shape_str(sh, sizeof sh, kn->ndim, kn->shape),
                    kn->body->nexprs);
        } else {
            fprintf(fp, "%s over %s axes {", kn->kind == FUSE_KERNEL_SCAN ? "scan" : kn->row ? "row reduce" : "reduce",
                    graph_shape_str(sh, sizeof sh, kn->ndim, kn->shape));
            for (int d = 0, first = 1; d < kn->ndim; d++)
                if (kn->redmask & (1u << d)) fprintf(fp, first-- ? "%d" : ",%d", d);
            fprintf(fp, "}");
            for (int q = 0; q < kn->npasses; q++) {
                fprintf(fp, ", pass %d [", q);
                for (int j = 0, first = 1; j < kn->nreds; j++)
                    if (kn->reds[j].pass == q)
                        fprintf(fp, "%s%s #%d", first-- ? "" : " ", graph_reds[kn->reds[j].op].text,
                                kn->reds[j].node->id);
                fprintf(fp, "] %d exprs", kn->passes[q].fn->nexprs);
            }
            fprintf(fp, ", epilogue %d exprs", kn->epi->nexprs);
            if (kn->row) fprintf(fp, ", row pass %d exprs", kn->row->nexprs);
            for (int j = 0; j < kn->nkeeps; j++)
                fprintf(fp, ", keeps n%d (pass %d)", kn->keeps[j].node->id, kn->keeps[j].pass);
        }
        fprintf(fp, "; nodes");
        for (int j = 0; j < kn->nnodes; j++) fprintf(fp, " %d", kn->nodes[j]);
        for (int q = 0; q < kn->npasses; q++) {
            char what[32];
            snprintf(what, sizeof what, kn->npasses > 1 ? "pass %d loads" : "loads", q);
            print_loads(fp, what, kn->passes[q].loads, kn->passes[q].nloads);
        }
        if (kn->epi) print_loads(fp, "epilogue loads", kn->epi_loads, kn->nepi_loads);
        if (kn->row) print_loads(fp, "row loads", kn->row_loads, kn->nrow_loads);
        fprintf(fp, "; stores");
        for (int j = 0; j < kn->nstores; j++)
            fprintf(fp, " slot%d%s", kn->stores[j].slot, kn->stores[j].row ? "(row)" : kn->stores[j].pos ? "(pass 0)" : "");
        fprintf(fp, "\n");
    }
    for (int j = 0; j < s->nslots; j++) {
        const fuse_slot *sl = &s->slots[j];
        static const char *const kinds[] = {"input", "output", "temp"};
        fprintf(fp, "  slot %d: %s node %d, %zu bytes, kernels %d..%d", j, kinds[sl->kind],
                sl->node->id, sl->bytes, sl->def, sl->last_use);
        if (sl->block >= 0) fprintf(fp, ", block %d", sl->block);
        fprintf(fp, "\n");
    }
}
