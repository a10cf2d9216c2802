/* graph/fn.c: scalar functions (the f of map(f, x)).
 *
 * An fn is an expression DAG over its parameters, stored as an array of
 * expressions in topological order (operands have lower ids). Expressions are
 * hash-consed: adding one identical to an existing expression returns the
 * existing id, so common subexpressions are stored once, and structural
 * equality of two fns is a bottom-up lookup of one's expressions in the
 * other's table (no recursion, linear time). Nothing here recurses over
 * expressions (an fn may be nested to any depth; see graph.h).
 *
 * Typing is per use: the same fn applied to f32 or to i32 inputs gets
 * different expression dtypes (graph_fn_types). Literals are weak (see
 * lazyfuse.h): they take the dtype of the strong operands they meet. An
 * integer literal (or weak constant expression, whose value typing
 * computes) that an i32 operand cannot hold is never wrapped: a comparison
 * is typed to compare in i64 (exact), any other operator is reported to the
 * builder (graph_fn_types_checked), which refuses the node.
 */
#include "graph/graph.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- hash-consing ------------------------------------------------------------ */

/* Each fn keeps an open-addressing table of expression ids. It sits after
 * the fn's name array in the same struct (see struct fn_table below), so the
 * public struct in graph.h stays free of hashing details. */
typedef struct fn_table {
    int *slots;   /* expression ids, -1 empty */
    int cap;      /* power of two */
} fn_table;

typedef struct fn_full {
    struct lf_fn fn;  /* must be first: lf_fn pointers are fn_full pointers */
    fn_table table;   /* hash-consing index over fn.exprs */
} fn_full;

static uint64_t mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdULL;
}

static uint64_t expr_hash(const fn_expr *e) {
    uint64_t h = mix(0, (uint64_t)e->kind);
    switch (e->kind) {
    case EXPR_PARAM: return mix(h, (uint64_t)e->param);
    case EXPR_CONST: return mix(mix(h, (uint64_t)e->is_int | (uint64_t)e->beyond << 1), (uint64_t)e->value.i);
    case EXPR_CAST: return mix(mix(h, (uint64_t)e->cast_to), (uint64_t)e->arg[0]);
    case EXPR_SCALAR: return mix(h, (uint64_t)(uintptr_t)e->node);
    case EXPR_CALL:
        h = mix(h, (uint64_t)(uintptr_t)e->call);
        for (int k = 0; k < 3; k++) h = mix(h, (uint64_t)(int64_t)e->arg[k]);
        return h;
    case EXPR_OP:
        h = mix(h, (uint64_t)e->op);
        for (int k = 0; k < 3; k++) h = mix(h, (uint64_t)(int64_t)e->arg[k]);
        return h;
    }
    return h;
}

static bool expr_same(const fn_expr *a, const fn_expr *b) {
    if (a->kind != b->kind) return false;
    switch (a->kind) {
    case EXPR_PARAM: return a->param == b->param;
    case EXPR_CONST: /* bitwise: NaN equals NaN, -0 differs from +0 */
        return a->is_int == b->is_int && a->beyond == b->beyond && a->value.i == b->value.i &&
               a->big_hi == b->big_hi && a->big_lo == b->big_lo;
    case EXPR_CAST: return a->cast_to == b->cast_to && a->arg[0] == b->arg[0];
    case EXPR_SCALAR: return a->node == b->node;
    case EXPR_CALL:
        return a->call == b->call && a->arg[0] == b->arg[0] && a->arg[1] == b->arg[1] && a->arg[2] == b->arg[2];
    case EXPR_OP:
        return a->op == b->op && a->arg[0] == b->arg[0] && a->arg[1] == b->arg[1] &&
               a->arg[2] == b->arg[2];
    }
    return false;
}

/* Slot of e in f's table: its id if present, else an empty slot (-1 value). */
static int *table_find(const fn_full *ff, const fn_expr *e) {
    const fn_table *t = &ff->table;
    unsigned mask = (unsigned)t->cap - 1, i = (unsigned)expr_hash(e) & mask;
    for (;;) {
        int *s = &t->slots[i];
        if (*s < 0 || expr_same(&ff->fn.exprs[*s], e)) return s;
        i = (i + 1) & mask;
    }
}

static bool table_grow(fn_full *ff) {
    int cap = ff->table.cap ? ff->table.cap * 2 : 16;
    int *slots = graph_malloc((size_t)cap * sizeof *slots);
    if (!slots) return false;
    for (int i = 0; i < cap; i++) slots[i] = -1;
    graph_free(ff->table.slots);
    ff->table.slots = slots;
    ff->table.cap = cap;
    for (int id = 0; id < ff->fn.nexprs; id++) *table_find(ff, &ff->fn.exprs[id]) = id;
    return true;
}

/* ---- creation ----------------------------------------------------------------- */

lf_fn *graph_fn_create(lf_graph *g, int nparams, const char *const *names) {
    if (!graph_check_args(g, "fn_new", 0, NULL)) return NULL;
    if (nparams < 0 || nparams > GRAPH_MAX_PARAMS) {
        graph_fail(g, LF_ERR_ARITY, "fn_new: %d parameters (0 to %d allowed)", nparams,
                   GRAPH_MAX_PARAMS);
        return NULL;
    }
    fn_full *ff = graph_calloc(1, sizeof *ff);
    if (!ff) goto nomem;
    lf_fn *f = &ff->fn;
    f->graph = g;
    f->serial = g->serial;
    f->nparams = nparams;
    f->result = -1;
    f->next = g->fns; /* linked first so graph_destroy frees a half-made fn */
    g->fns = f;
    if (nparams && !(f->param_names = graph_calloc((size_t)nparams, sizeof *f->param_names))) {
        f->nparams = 0; /* nothing to free */
        goto nomem;
    }
    for (int i = 0; i < nparams; i++) {
        char tmp[16];
        if (!names) snprintf(tmp, sizeof tmp, "p%d", i);
        f->param_names[i] = graph_strdup(names ? names[i] : tmp);
        if (!f->param_names[i]) goto nomem;
    }
    if (!table_grow(ff)) goto nomem;
    return f;
nomem:
    graph_fail(g, LF_ERR_NOMEM, "fn_new: out of memory");
    return NULL;
}

void graph_fn_destroy(lf_fn *f) {
    fn_full *ff = (fn_full *)f;
    for (int i = 0; f->param_names && i < f->nparams; i++) graph_free(f->param_names[i]);
    graph_free(f->param_names);
    graph_free(f->exprs);
    graph_free(ff->table.slots);
    graph_free(ff);
}

int graph_fn_add(lf_fn *f, const fn_expr *e) {
    fn_full *ff = (fn_full *)f;
    lf_graph *g = f->graph;
    if (g->status != LF_OK) return -1;
    int *slot = table_find(ff, e);
    if (*slot >= 0) return *slot;
    if (f->nexprs == f->cap) {
        int cap = f->cap ? f->cap * 2 : 16;
        fn_expr *ex = graph_realloc(f->exprs, (size_t)cap * sizeof *ex);
        if (!ex) goto nomem;
        f->exprs = ex;
        f->cap = cap;
    }
    if (2 * (f->nexprs + 1) > ff->table.cap) {
        if (!table_grow(ff)) goto nomem;
        slot = table_find(ff, e);
    }
    int id = f->nexprs++;
    f->exprs[id] = *e;
    *slot = id;
    return id;
nomem:
    graph_fail(g, LF_ERR_NOMEM, "fn: out of memory");
    return -1;
}

/* ---- builder API ------------------------------------------------------------------ */

lf_fn *lf_fn_new(lf_graph *g, int nparams) {
    if (g && (nparams < 0 || nparams > LF_MAX_ARGS)) { /* the user's limit; fusion's fns may have more */
        if (graph_check_args(g, "fn_new", 0, NULL))
            graph_fail(g, LF_ERR_ARITY, "fn_new: %d parameters (0 to %d allowed)", nparams, LF_MAX_ARGS);
        return NULL;
    }
    return graph_fn_create(g, nparams, NULL);
}

/* Common checks of the builder calls: a usable fn on a graph without error. */
static bool fn_usable(lf_fn *f, const char *what) {
    if (!f) {
        graph_error(NULL, LF_ERR_NULL, "%s: fn is NULL", what);
        return false;
    }
    return f->graph->status == LF_OK;
}

fn_expr graph_fn_blank_expr(expr_kind k) {
    fn_expr e;
    memset(&e, 0, sizeof e);
    e.kind = k;
    e.arg[0] = e.arg[1] = e.arg[2] = -1;
    return e;
}

int lf_fn_param(lf_fn *f, int index) {
    if (!fn_usable(f, "fn_param")) return -1;
    if (index < 0 || index >= f->nparams) {
        graph_fail(f->graph, LF_ERR_INVALID, "fn_param: parameter %d out of range (fn has %d)",
                   index, f->nparams);
        return -1;
    }
    fn_expr e = graph_fn_blank_expr(EXPR_PARAM);
    e.param = index;
    return graph_fn_add(f, &e);
}

int lf_fn_const(lf_fn *f, double value) {
    if (!fn_usable(f, "fn_const")) return -1;
    fn_expr e = graph_fn_blank_expr(EXPR_CONST);
    e.value.f = value;
    return graph_fn_add(f, &e);
}

int lf_fn_const_int(lf_fn *f, int64_t value) {
    if (!fn_usable(f, "fn_const_int")) return -1;
    fn_expr e = graph_fn_blank_expr(EXPR_CONST);
    e.is_int = true;
    e.value.i = value;
    return graph_fn_add(f, &e);
}

/* Checks that operand id is a valid expression of f. */
static bool operand_ok(lf_fn *f, const char *what, int k, int id) {
    if (id >= 0 && id < f->nexprs) return true;
    graph_fail(f->graph, LF_ERR_INVALID, "%s: operand %d is %s (id %d; fn has %d expression%s)",
               what, k + 1, id < 0 ? "missing" : "not an expression of this fn", id, f->nexprs,
               f->nexprs == 1 ? "" : "s");
    return false;
}

int lf_fn_op(lf_fn *f, lf_op op, int a, int b, int c) {
    if (!fn_usable(f, "fn_op")) return -1;
    if ((unsigned)op >= LF_NOPS) {
        graph_fail(f->graph, LF_ERR_INVALID, "fn_op: unknown operator %d", (int)op);
        return -1;
    }
    char what[32];
    snprintf(what, sizeof what, "fn_op '%s'", graph_ops[op].text);
    fn_expr e = graph_fn_blank_expr(EXPR_OP);
    e.op = op;
    int args[3] = {a, b, c};
    for (int k = 0; k < 3; k++) {
        if (k >= graph_ops[op].arity) {
            if (args[k] == -1) continue;
            graph_fail(f->graph, LF_ERR_ARITY, "%s: takes %d operand%s, operand %d must be -1",
                       what, graph_ops[op].arity, graph_ops[op].arity == 1 ? "" : "s", k + 1);
            return -1;
        }
        if (!operand_ok(f, what, k, args[k])) return -1;
        e.arg[k] = args[k];
    }
    return graph_fn_add(f, &e);
}

int lf_fn_cast(lf_fn *f, lf_dtype t, int a) {
    if (!fn_usable(f, "fn_cast")) return -1;
    if ((unsigned)t >= LF_NDTYPES) {
        graph_fail(f->graph, LF_ERR_DTYPE, "fn_cast: unknown dtype %d", (int)t);
        return -1;
    }
    if (!operand_ok(f, "fn_cast", 0, a)) return -1;
    fn_expr e = graph_fn_blank_expr(EXPR_CAST);
    e.cast_to = t;
    e.arg[0] = a;
    return graph_fn_add(f, &e);
}

lf_status lf_fn_set_result(lf_fn *f, int e) {
    if (!f) return graph_error(NULL, LF_ERR_NULL, "fn_set_result: fn is NULL");
    lf_graph *g = f->graph;
    if (g->status != LF_OK) return g->status;
    if (f->result >= 0)
        return graph_fail(g, LF_ERR_STATE, "fn_set_result: the fn already has a result");
    if (!operand_ok(f, "fn_set_result", 0, e)) return g->status;
    f->result = e;
    return LF_OK;
}

int lf_fn_arity(const lf_fn *f) { return f ? f->nparams : -1; }

bool lf_fn_equal(const lf_fn *a, const lf_fn *b) {
    if (!a || !b || a->result < 0 || b->result < 0 || a->nparams != b->nparams) return false;
    if (a == b) return true;
    const fn_full *fb = (const fn_full *)b;
    /* match[i]: the id in b of the expression equal to a's expression i, or -1 */
    int *match = graph_malloc((size_t)a->nexprs * sizeof *match);
    if (!match) return false;
    for (int i = 0; i < a->nexprs; i++) {
        fn_expr e = a->exprs[i];
        bool mapped = true;
        for (int k = 0; k < 3; k++)
            if (e.arg[k] >= 0) {
                e.arg[k] = match[e.arg[k]];
                if (e.arg[k] < 0) mapped = false;
            }
        int *slot = mapped ? table_find(fb, &e) : NULL;
        match[i] = slot ? *slot : -1;
    }
    bool eq = match[a->result] == b->result;
    graph_free(match);
    return eq;
}

/* ---- typing -------------------------------------------------------------------------- */

/* Joins operand dtypes by the promotion rules, weak literals included.
 * *weak says whether the result is still weak (all operands weak). */
static lf_dtype join(int n, const lf_dtype *t, const bool *w, bool *weak) {
    bool any_strong = false, weak_float = false;
    lf_dtype p = LF_BOOL;
    for (int k = 0; k < n; k++) {
        if (w[k]) {
            if (graph_dtype_is_float(t[k])) weak_float = true;
        } else {
            p = any_strong ? lf_dtype_promote(p, t[k]) : t[k];
            any_strong = true;
        }
    }
    *weak = !any_strong;
    if (!any_strong) return weak_float ? LF_F64 : LF_I64;
    if (n > 1 && p == LF_BOOL) {
        for (int k = 0; k < n; k++)
            if (w[k]) p = LF_I64; /* bool meets an integer literal */
    }
    if (weak_float && !graph_dtype_is_float(p) && !graph_dtype_is_complex(p)) p = LF_F64;
    return p;
}

/* Whether integer v is outside the range of integer dtype t narrower than
 * i64 (a weak literal that t cannot hold; u64 holds no negative value). */
static bool outside_int(int64_t v, lf_dtype t) {
    if (t == LF_U64) return v < 0;
    return v < graph_dtype_int_min(t) || v > graph_dtype_int_max(t);
}

lf_dtype graph_fn_types(const lf_fn *f, const lf_dtype *params, lf_dtype *etype, lf_dtype *ctype) {
    return graph_fn_types_checked(f, params, etype, ctype, NULL);
}

lf_dtype graph_fn_types_checked(const lf_fn *f, const lf_dtype *params, lf_dtype *etype, lf_dtype *ctype,
                                graph_fn_literal *bad) {
    /* per expression: whether it is weak, and then its value (a weak
       expression has no parameter below it: it is a constant, computed here
       as graph_fn_eval would) */
    struct wk {
        bool weak;
        lf_scalar v;
    } wkbuf[64];
    struct wk *wk = f->nexprs <= 64 ? wkbuf : graph_malloc((size_t)f->nexprs * sizeof *wk);
    if (!wk) return LF_NDTYPES;
    if (bad) bad->expr = bad->lit = -1;
    for (int i = 0; i < f->nexprs; i++) {
        const fn_expr *e = &f->exprs[i];
        bool *wi = &wk[i].weak;
        switch (e->kind) {
        case EXPR_PARAM:
            etype[i] = ctype[i] = params[e->param];
            *wi = false;
            break;
        case EXPR_CONST:
            etype[i] = ctype[i] = e->is_int ? LF_I64 : LF_F64;
            *wi = true;
            wk[i].v = e->value;
            break;
        case EXPR_CAST:
            etype[i] = e->cast_to;
            ctype[i] = etype[e->arg[0]];
            *wi = false;
            if (bad && bad->expr < 0 && graph_dtype_is_int(e->cast_to) &&
                f->exprs[e->arg[0]].kind == EXPR_CONST && f->exprs[e->arg[0]].beyond) {
                bad->expr = i; /* i64(2**70): NumPy raises OverflowError */
                bad->lit = e->arg[0];
                bad->dtype = e->cast_to;
            }
            break;
        case EXPR_SCALAR:
            etype[i] = ctype[i] = e->cast_to;
            *wi = false;
            break;
        case EXPR_CALL: /* each argument converted to its parameter's dtype */
            etype[i] = ctype[i] = e->call->ret;
            *wi = false;
            break;
        case EXPR_OP: {
            const op_info *oi = &graph_ops[e->op];
            lf_dtype t[3], tj[3];
            bool w[3], rweak;
            int first = oi->typing == OPTY_SELECT ? 1 : 0, nbeyond = 0;
            for (int k = 0; k < oi->arity; k++) {
                t[k] = etype[e->arg[k]];
                w[k] = wk[e->arg[k]].weak;
                bool big = f->exprs[e->arg[k]].kind == EXPR_CONST && f->exprs[e->arg[k]].beyond;
                tj[k] = big ? LF_I64 : t[k]; /* a weak integer for the join */
                nbeyond += big && k >= first;
            }
            lf_dtype j = join(oi->arity - first, tj + first, w + first, &rweak);
            lf_dtype ct = j, et = j;
            switch (oi->typing) {
            case OPTY_ARITH:
            case OPTY_SHIFT: ct = et = (j == LF_BOOL ? LF_I32 : j); break;
            case OPTY_DIV:
            case OPTY_FLOAT:
                ct = et = graph_dtype_is_float(j) || graph_dtype_is_complex(j) ? j : LF_F64;
                break;
            case OPTY_PART: /* the component float of a complex */
                ct = graph_dtype_is_float(j) || graph_dtype_is_complex(j) ? j : LF_F64;
                et = graph_dtype_part(ct);
                break;
            case OPTY_SAME:
                if (e->op == LF_OP_ABS) et = graph_dtype_part(j); /* abs of a complex is real */
                break;
            case OPTY_BITS: /* a float here is refused by graph_fn_bad_operand */
            case OPTY_SELECT: break;
            case OPTY_CMP: et = LF_BOOL; rweak = false; break;
            case OPTY_LOGIC: ct = et = LF_BOOL; rweak = false; break;
            case OPTY_PRED: ct = t[0]; et = LF_BOOL; rweak = false; break;
            }
            /* A weak integer that an integer dtype narrower than i64 (or
               u64) cannot hold, meeting an operand of it (NEP 50): a
               comparison compares exactly (in i64; f64 against u64);
               anything else is refused (bad), never wrapped. */
            if (graph_dtype_is_int(ct) && ct != LF_I64) {
                lf_dtype narrow = ct;
                for (int k = first; k < oi->arity; k++) {
                    const struct wk *a = &wk[e->arg[k]];
                    if (!a->weak || t[k] != LF_I64 || !outside_int(a->v.i, narrow)) continue;
                    if (oi->typing == OPTY_CMP) ct = narrow == LF_U64 ? LF_F64 : LF_I64;
                    else if (bad && bad->expr < 0) {
                        bad->expr = i;
                        bad->value = a->v.i;
                        bad->dtype = narrow;
                    }
                }
            }
            /* A literal beyond int64 (NEP 50 again): a float operator reads
               its double; a comparison with integers compares exactly (f64
               with the literal as +-inf: graph_fn_exact_compares); any other
               integer operator, and a comparison of two of them, refuses it. */
            if (nbeyond && !graph_dtype_is_float(ct)) {
                if (oi->typing == OPTY_CMP && nbeyond == 1) ct = LF_F64;
                else if (bad && bad->expr < 0)
                    for (int k = first; k < oi->arity; k++) {
                        const fn_expr *a = &f->exprs[e->arg[k]];
                        if (a->kind != EXPR_CONST || !a->beyond) continue;
                        bad->expr = i;
                        bad->lit = e->arg[k];
                        bad->dtype = ct == LF_BOOL ? LF_I64 : ct;
                        break;
                    }
            }
            etype[i] = et;
            ctype[i] = ct;
            *wi = rweak;
            if (rweak) { /* its value, as graph_fn_eval computes it */
                lf_scalar x[3] = {0};
                for (int k = 0; k < oi->arity; k++)
                    x[k] = graph_scalar_convert(wk[e->arg[k]].v, t[k], oi->typing == OPTY_SELECT && k == 0 ? LF_BOOL : ct);
                wk[i].v = graph_scalar_apply(e->op, ct, x[0], x[1], x[2]);
            }
            break;
        }
        }
    }
    if (wk != wkbuf) graph_free(wk);
    const fn_expr *r = &f->exprs[f->result];
    if (bad && bad->expr < 0 && r->kind == EXPR_CONST && r->beyond) { /* the weak result becomes i64 */
        bad->expr = f->result;
        bad->lit = f->result;
        bad->dtype = LF_I64;
    }
    return etype[f->result];
}

/* Whether operand k of expression e (an EXPR_OP of f) is a literal beyond
 * int64 compared with an integer or bool (etype from graph_fn_types). */
static bool beyond_vs_integer(const lf_fn *f, const fn_expr *e, int k, const lf_dtype *etype) {
    if (graph_ops[e->op].typing != OPTY_CMP) return false;
    const fn_expr *a = &f->exprs[e->arg[k]], *o = &f->exprs[e->arg[1 - k]];
    return a->kind == EXPR_CONST && a->beyond && !(o->kind == EXPR_CONST && o->beyond) &&
           !graph_dtype_is_float(etype[e->arg[1 - k]]);
}

lf_fn *graph_fn_exact_compares(lf_fn *f, const lf_dtype *etype) {
    bool any = false;
    for (int i = 0; i < f->nexprs && !any; i++) {
        const fn_expr *e = &f->exprs[i];
        for (int k = 0; e->kind == EXPR_OP && k < graph_ops[e->op].arity; k++) any |= beyond_vs_integer(f, e, k, etype);
    }
    if (!any) return f;
    lf_fn *c = graph_fn_create(f->graph, f->nparams, (const char *const *)f->param_names);
    int *map = c ? graph_malloc((size_t)f->nexprs * sizeof *map) : NULL;
    if (!map) {
        if (c) graph_fail(f->graph, LF_ERR_NOMEM, "fn: out of memory");
        return NULL;
    }
    for (int i = 0; i < f->nexprs; i++) {
        fn_expr e = f->exprs[i];
        for (int k = 0; k < 3; k++)
            if (e.arg[k] >= 0) e.arg[k] = map[e.arg[k]];
        for (int k = 0; e.kind == EXPR_OP && k < graph_ops[e.op].arity; k++) {
            if (!beyond_vs_integer(f, &f->exprs[i], k, etype)) continue;
            fn_expr inf = graph_fn_blank_expr(EXPR_CONST);
            inf.value.f = f->exprs[f->exprs[i].arg[k]].value.f > 0 ? INFINITY : -INFINITY;
            e.arg[k] = graph_fn_add(c, &inf);
        }
        if ((map[i] = graph_fn_add(c, &e)) < 0) {
            graph_free(map);
            return NULL;
        }
    }
    c->result = map[f->result];
    graph_free(map);
    memcpy(c->source, f->source, sizeof c->source);
    return c;
}

int graph_fn_beyond_str(const fn_expr *e, char *buf, size_t cap) {
    const char *sign = e->value.f < 0 ? "-" : "";
    if (e->big_hi)
        return snprintf(buf, cap, "%s%llu%019llu", sign, (unsigned long long)e->big_hi, (unsigned long long)e->big_lo);
    return snprintf(buf, cap, "%s%llu", sign, (unsigned long long)e->big_lo);
}

int graph_fn_bad_operand(const lf_fn *f, const lf_dtype *etype, int *operand) {
    for (int i = 0; i < f->nexprs; i++) {
        const fn_expr *e = &f->exprs[i];
        if (e->kind != EXPR_OP) continue;
        const op_info *oi = &graph_ops[e->op];
        if (!graph_op_complex_ok(e->op)) /* an operator complex values do not take */
            for (int k = 0; k < oi->arity; k++)
                if (graph_dtype_is_complex(etype[e->arg[k]])) {
                    *operand = k;
                    return i;
                }
        if (oi->typing != OPTY_BITS && oi->typing != OPTY_SHIFT) continue;
        for (int k = 0; k < oi->arity; k++) {
            const fn_expr *a = &f->exprs[e->arg[k]];
            if (a->kind == EXPR_CONST && a->beyond) continue; /* an integer: graph_fn_types refuses it */
            if (graph_dtype_is_float(etype[e->arg[k]])) {
                *operand = k;
                return i;
            }
        }
        if (graph_dtype_is_float(etype[i])) { /* integer operands whose common dtype is a float: u64 with a signed one */
            *operand = oi->arity;
            return i;
        }
    }
    return -1;
}

/* ---- evaluation ------------------------------------------------------------------------ */

lf_scalar graph_fn_eval(const lf_fn *f, const lf_dtype *params, const lf_dtype *etype,
                        const lf_dtype *ctype, const lf_scalar *args, lf_scalar *vals) {
    (void)params;
    for (int i = 0; i < f->nexprs; i++) {
        const fn_expr *e = &f->exprs[i];
        switch (e->kind) {
        case EXPR_PARAM: vals[i] = args[e->param]; break;
        case EXPR_CONST: vals[i] = e->value; break;
        case EXPR_SCALAR: vals[i] = e->node->u.value; break; /* in cast_to already */
        case EXPR_CAST:
            vals[i] = graph_scalar_convert(vals[e->arg[0]], ctype[i], e->cast_to);
            break;
        case EXPR_CALL: {
            const graph_ufn *u = e->call;
            lf_scalar x[GRAPH_UFN_MAX_PARAMS] = {0};
            for (int k = 0; k < u->nparams; k++)
                x[k] = graph_scalar_convert(vals[e->arg[k]], etype[e->arg[k]], u->params[k]);
            vals[i].i = 0;
            u->entry(u->fp, x, &vals[i]);
            break;
        }
        case EXPR_OP: {
            const op_info *oi = &graph_ops[e->op];
            lf_scalar x[3] = {0};
            for (int k = 0; k < oi->arity; k++) {
                int a = e->arg[k];
                lf_dtype to = ctype[i];
                if (oi->typing == OPTY_SELECT && k == 0) to = LF_BOOL;
                x[k] = graph_scalar_convert(vals[a], etype[a], to);
            }
            vals[i] = graph_scalar_apply(e->op, ctype[i], x[0], x[1], x[2]);
            break;
        }
        }
    }
    return vals[f->result];
}

/* ---- fns of one builtin op ---------------------------------------------------------------- */

lf_fn *graph_fn_for_op(lf_graph *g, lf_op op) {
    static const char *const names[3] = {"a", "b", "c"};
    int n = graph_ops[op].arity;
    lf_fn *f = graph_fn_create(g, n, names);
    if (!f) return NULL;
    int p[3] = {-1, -1, -1};
    for (int k = 0; k < n; k++) p[k] = lf_fn_param(f, k);
    return lf_fn_set_result(f, lf_fn_op(f, op, p[0], p[1], p[2])) == LF_OK ? f : NULL;
}

lf_fn *graph_fn_for_cast(lf_graph *g, lf_dtype t) {
    static const char *const names[1] = {"x"};
    lf_fn *f = graph_fn_create(g, 1, names);
    if (!f) return NULL;
    return lf_fn_set_result(f, lf_fn_cast(f, t, lf_fn_param(f, 0))) == LF_OK ? f : NULL;
}
