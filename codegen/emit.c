/* codegen/emit.c: the emitter. Prints one laid-out kernel as source text.
 *
 * The emitter walks a cg_layout (codegen/layout.c) and the kernel's fns and
 * prints the loop skeleton of the kernel's strategy with the fns' expressions
 * inside; the dialect gives type names, the prelude and qualifiers.
 *
 *  - ELEMENTWISE: lf_k_run(B, P, begin, end) over flat elements: per row
 *    segment the outer axes are unravelled once (index arithmetic hoisted
 *    out of the inner loop), then a unit-stride inner loop the compiler
 *    vectorizes; loads invariant in it are hoisted before it.
 *  - REDUCE_INNER: lf_k_run over output elements; each pass folds its
 *    reduced positions into CG_LANES independent accumulators (the
 *    innermost loop is split into lanes so it vectorizes without reordering
 *    anything the shape does not fix), combined in lane order.
 *  - REDUCE_OUTER: lf_k_run over (outer output, block of innermost outputs);
 *    the innermost loop runs over outputs, each accumulating in reduced
 *    order (the reference's order: results are bit-identical).
 *  - REDUCE_FULL: lf_k_pass<q> computes one partial per block of the
 *    outermost reduced axis, lf_k_fin<q> combines them in block order; then
 *    lf_k_epi and lf_k_row.
 * A value of the reduction order never depends on the number of threads:
 * lanes and blocks are fixed by the shape alone.
 *
 * Names in the generated text: b<k> buffer k; o<a>_<L> offset of access a at
 * loop level L; s<a> its innermost stride; h<a> a hoisted invariant load;
 * <x>v<i> expression i of an fn; acc<r>/arg<r> accumulators of reduction r;
 * res<r> its finished value. Comments name graph nodes (n<id>); they are not
 * part of the structural key (the key is taken from cg_strip_comments).
 */
#include "codegen/codegen.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>

/* ---- text ----------------------------------------------------------------------------- */

void cg_text_free(cg_text *t) {
    graph_free(t->s);
    memset(t, 0, sizeof *t);
}

static void text_vappend(cg_text *t, const char *fmt, va_list ap) {
    if (t->nomem) return;
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0) return;
    if (t->len + (size_t)n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 4096;
        while (cap < t->len + (size_t)n + 1) cap *= 2;
        char *s = graph_realloc(t->s, cap);
        if (!s) {
            t->nomem = true;
            return;
        }
        t->s = s;
        t->cap = cap;
    }
    vsnprintf(t->s + t->len, (size_t)n + 1, fmt, ap);
    t->len += (size_t)n;
}

void cg_printf(cg_text *t, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    text_vappend(t, fmt, ap);
    va_end(ap);
}

char *cg_strip_comments(const char *text) {
    char *out = graph_malloc(strlen(text) + 1), *o = out;
    if (!out) return NULL;
    for (const char *p = text; *p; p++) {
        if (p[0] == '/' && p[1] == '*') {
            const char *end = strstr(p + 2, "*/");
            if (!end) break;
            p = end + 1;
            continue;
        }
        *o++ = *p;
    }
    *o = 0;
    return out;
}

uint64_t cg_source_hash(const char *text) {
    uint64_t h = 1469598103934665603ull;
    for (const char *p = text; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
    return h;
}

/* ---- the emitter ----------------------------------------------------------------------- */

typedef struct emitter {
    cg_text *t;
    const fuse_schedule *s;
    const cg_layout *lay;
    const fuse_kernel *kn;
    const cg_dialect *d;
    int depth;         /* indentation */
    int level;         /* current loop level (names o<a>_<level>) */
    bool vec;          /* CUDA vector body: contiguous loads and stores go
                          through the 4-element registers w<a>.x[l] */
} emitter;

typedef char expr_buf[768];

/* snprintf for expression pieces: a piece that does not fit (never expected:
 * pieces are variable names in short wrappers) becomes a line that stops
 * the compile, never silently wrong code. */
static void fmt(char *out, size_t cap, const char *f, ...) __attribute__((format(printf, 3, 4)));
static void fmt(char *out, size_t cap, const char *f, ...) {
    va_list ap;
    va_start(ap, f);
    int n = vsnprintf(out, cap, f, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < cap) return;
    /* what snprintf would write, without its truncation warning for the
     * smallest callers' buffers (16 bytes still hold "\n#error") */
    static const char too_long[] = "\n#error lazyfuse: expression piece too long\n";
    size_t m = sizeof too_long - 1 < cap - 1 ? sizeof too_long - 1 : cap - 1;
    memcpy(out, too_long, m);
    out[m] = 0;
}

static void line(emitter *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void vline(emitter *e, const char *fmt, va_list ap) {
    cg_printf(e->t, "%*s", 4 * e->depth, "");
    text_vappend(e->t, fmt, ap);
    cg_printf(e->t, "\n");
}

static void line(emitter *e, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vline(e, fmt, ap);
    va_end(ap);
}

/* A line opening a block (it ends in "{"); what follows is indented until
 * close_block. */
static void open_block(emitter *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void open_block(emitter *e, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vline(e, fmt, ap);
    va_end(ap);
    e->depth++;
}

static void close_block(emitter *e) {
    e->depth--;
    line(e, "}");
}

static const char *vtype(const emitter *e, lf_dtype t) { return e->d->value_type[t]; }

/* Converts C expression x of dtype `from` to dtype `to`, as
 * graph_scalar_convert does (x is already a value of from's value type). */
static void convert(char *out, size_t cap, const char *x, lf_dtype from, lf_dtype to) {
    if (from == to) {
        fmt(out, cap, "%s", x);
        return;
    }
    bool ff = graph_dtype_is_float(from);
    switch (to) {
    case LF_F32: fmt(out, cap, "(float)(%s)", x); return;
    case LF_F64: fmt(out, cap, "(double)(%s)", x); return;
    case LF_BOOL: fmt(out, cap, "((%s) != 0)", x); return;
    case LF_I32:
        if (ff) fmt(out, cap, "lf_f2i32((double)(%s))", x);
        else fmt(out, cap, "(int32_t)(uint32_t)(%s)", x);
        return;
    default:
        if (ff) fmt(out, cap, "lf_f2i64((double)(%s))", x);
        else fmt(out, cap, "(int64_t)(%s)", x);
        return;
    }
}

/* The C expression of op applied in compute dtype ct to operands x[]. */
static void op_expr(char *out, size_t cap, lf_op op, lf_dtype ct, char x[3][sizeof(expr_buf)]) {
    const op_info *oi = &graph_ops[op];
    switch (oi->typing) {
    case OPTY_CMP: fmt(out, cap, "((%s) %s (%s))", x[0], oi->text, x[1]); return;
    case OPTY_LOGIC:
        if (op == LF_OP_NOT) fmt(out, cap, "(!(%s))", x[0]);
        else fmt(out, cap, "((%s) %s (%s))", x[0], op == LF_OP_AND ? "&&" : "||", x[1]);
        return;
    case OPTY_PRED:
        if (!graph_dtype_is_float(ct)) fmt(out, cap, "0");
        else if (op == LF_OP_ISNAN) fmt(out, cap, "((%s) != (%s))", x[0], x[0]);
        else fmt(out, cap, "lf_isinf_%s(%s)", ct == LF_F32 ? "f32" : "f64", x[0]);
        return;
    case OPTY_SELECT: fmt(out, cap, "((%s) ? (%s) : (%s))", x[0], x[1], x[2]); return;
    default: break;
    }
    if (graph_dtype_is_float(ct)) {
        bool f = ct == LF_F32;
        const char *sx = f ? "f" : "", *tag = f ? "f32" : "f64", *one = f ? "1.0f" : "1.0";
        switch (op) {
        case LF_OP_ADD: fmt(out, cap, "((%s) + (%s))", x[0], x[1]); return;
        case LF_OP_SUB: fmt(out, cap, "((%s) - (%s))", x[0], x[1]); return;
        case LF_OP_MUL: fmt(out, cap, "((%s) * (%s))", x[0], x[1]); return;
        case LF_OP_DIV: fmt(out, cap, "((%s) / (%s))", x[0], x[1]); return;
        case LF_OP_MOD: fmt(out, cap, "lf_pymod_%s(%s, %s)", tag, x[0], x[1]); return;
        case LF_OP_FLOORDIV: fmt(out, cap, "lf_floordiv_%s(%s, %s)", tag, x[0], x[1]); return;
        case LF_OP_MIN: fmt(out, cap, "lf_fmin_%s(%s, %s)", tag, x[0], x[1]); return;
        case LF_OP_MAX: fmt(out, cap, "lf_fmax_%s(%s, %s)", tag, x[0], x[1]); return;
        case LF_OP_NEG: fmt(out, cap, "(-(%s))", x[0]); return;
        case LF_OP_SIGN: fmt(out, cap, "lf_sign_%s(%s)", tag, x[0]); return;
        case LF_OP_ROUND: fmt(out, cap, "nearbyint%s(%s)", sx, x[0]); return;
        case LF_OP_RSQRT: fmt(out, cap, "(%s / sqrt%s(%s))", one, sx, x[0]); return;
        case LF_OP_SIGMOID:
            fmt(out, cap, "(%s / (%s + exp%s(-(%s))))", one, one, sx, x[0]);
            return;
        default: break;
        }
        if (oi->arity == 1) fmt(out, cap, "%s%s(%s)", oi->cname, sx, x[0]);
        else if (oi->arity == 2) fmt(out, cap, "%s%s(%s, %s)", oi->cname, sx, x[0], x[1]);
        else fmt(out, cap, "%s%s(%s, %s, %s)", oi->cname, sx, x[0], x[1], x[2]);
        return;
    }
    if (ct == LF_BOOL) { /* values are 0 or 1 */
        if (op == LF_OP_MIN) fmt(out, cap, "((%s) && (%s))", x[0], x[1]);
        else if (op == LF_OP_MAX) fmt(out, cap, "((%s) || (%s))", x[0], x[1]);
        else if (op == LF_OP_BITAND) fmt(out, cap, "((%s) & (%s))", x[0], x[1]);
        else if (op == LF_OP_BITOR) fmt(out, cap, "((%s) | (%s))", x[0], x[1]);
        else if (op == LF_OP_BITXOR) fmt(out, cap, "((%s) ^ (%s))", x[0], x[1]);
        else if (op == LF_OP_BITNOT) fmt(out, cap, "(!(%s))", x[0]);
        else fmt(out, cap, "(%s)", x[0]);
        return;
    }
    const char *T = ct == LF_I32 ? "int32_t" : "int64_t", *U = ct == LF_I32 ? "uint32_t" : "uint64_t";
    switch (op) {
    case LF_OP_ADD: fmt(out, cap, "(%s)((%s)(%s) + (%s)(%s))", T, U, x[0], U, x[1]); return;
    case LF_OP_SUB: fmt(out, cap, "(%s)((%s)(%s) - (%s)(%s))", T, U, x[0], U, x[1]); return;
    case LF_OP_MUL: fmt(out, cap, "(%s)((%s)(%s) * (%s)(%s))", T, U, x[0], U, x[1]); return;
    case LF_OP_NEG: fmt(out, cap, "(%s)((%s)0 - (%s)(%s))", T, U, U, x[0]); return;
    case LF_OP_MOD: fmt(out, cap, "(%s)lf_imod(%s, %s)", T, x[0], x[1]); return;
    case LF_OP_FLOORDIV: fmt(out, cap, "(%s)(%s)lf_ifloordiv(%s, %s)", T, U, x[0], x[1]); return;
    case LF_OP_BITAND: fmt(out, cap, "(%s)((%s) & (%s))", T, x[0], x[1]); return;
    case LF_OP_BITOR: fmt(out, cap, "(%s)((%s) | (%s))", T, x[0], x[1]); return;
    case LF_OP_BITXOR: fmt(out, cap, "(%s)((%s) ^ (%s))", T, x[0], x[1]); return;
    case LF_OP_BITNOT: fmt(out, cap, "(%s)(~(%s))", T, x[0]); return;
    case LF_OP_LSHIFT: fmt(out, cap, "lf_shl_%s(%s, %s)", ct == LF_I32 ? "i32" : "i64", x[0], x[1]); return;
    case LF_OP_RSHIFT: fmt(out, cap, "lf_shr_%s(%s, %s)", ct == LF_I32 ? "i32" : "i64", x[0], x[1]); return;
    case LF_OP_POW: fmt(out, cap, "(%s)(%s)lf_ipow(%s, %s)", T, U, x[0], x[1]); return;
    case LF_OP_MIN: fmt(out, cap, "((%s) < (%s) ? (%s) : (%s))", x[1], x[0], x[1], x[0]); return;
    case LF_OP_MAX: fmt(out, cap, "((%s) > (%s) ? (%s) : (%s))", x[1], x[0], x[1], x[0]); return;
    case LF_OP_ABS:
        fmt(out, cap, "((%s) < 0 ? (%s)((%s)0 - (%s)(%s)) : (%s))", x[0], T, U, U, x[0], x[0]);
        return;
    case LF_OP_SIGN: fmt(out, cap, "(%s)(((%s) > 0) - ((%s) < 0))", T, x[0], x[0]); return;
    default: fmt(out, cap, "(%s)", x[0]); return; /* floor, ceil, round, trunc */
    }
}

/* ---- accesses ---------------------------------------------------------------------------- */

/* Which accesses belong to region reg (an fn index; stores: the elementwise
 * body, the epilogue's or the row pass's). */
static bool in_region(const emitter *e, const cg_access *a, int reg) {
    if (a->fn >= 0) return a->fn == reg;
    const fuse_kernel *kn = e->kn;
    if (!kn->epi) return reg == 0;
    bool row = kn->stores[a->index].row;
    return row ? reg == kn->npasses + 1 : reg == kn->npasses;
}

static int access_id(const emitter *e, const cg_access *a) { return (int)(a - e->lay->access); }

/* Element index of access a at innermost index jv (NULL: at the base). */
static void access_index(const emitter *e, const cg_access *a, const char *jv, char *out, size_t cap) {
    int id = access_id(e, a);
    expr_buf lin;
    if (!jv || a->inner == CG_INNER_INVARIANT) fmt(lin, sizeof lin, "o%d_%d", id, e->level);
    else if (a->inner == CG_INNER_CONTIGUOUS) fmt(lin, sizeof lin, "o%d_%d + %s", id, e->level, jv);
    else fmt(lin, sizeof lin, "o%d_%d + %s * s%d", id, e->level, jv, id);
    if (a->param_steps >= 0) fmt(out, cap, "lf_steps(P + %d, %s)", a->param_steps, lin);
    else fmt(out, cap, "%s", lin);
}

/* The value of load access a at innermost index jv, in its value type. */
static void load_value(const emitter *e, const cg_access *a, const char *jv, char *out, size_t cap) {
    expr_buf idx;
    if (e->vec && a->buf >= 0 && a->inner == CG_INNER_CONTIGUOUS) {
        fmt(out, cap, "w%d.x[l]", access_id(e, a));
        return;
    }
    access_index(e, a, jv, idx, sizeof idx);
    if (a->buf >= 0) {
        fmt(out, cap, "b%d[%s]", a->buf, idx);
        return;
    }
    expr_buf raw;
    const lf_node *nd = a->load->node;
    if (nd->kind == NODE_RANDOM) { /* Philox of (seed, flat index): graph/random.h */
        bool wide = a->dtype == LF_F64 || a->dtype == LF_I64;
        lf_random_dist dist = nd->u.random.dist;
        if (dist == LF_RANDOM_NORMAL) fmt(raw, sizeof raw, "lf_random_normal(%s, (uint64_t)P[%d])", idx, a->param_iota);
        else
            fmt(raw, sizeof raw, "lf_random_%s(%s, (uint64_t)P[%d], %d)", dist == LF_RANDOM_BITS ? "bits" : "uniform",
                idx, a->param_iota, wide);
        convert(out, cap, raw, dist == LF_RANDOM_BITS ? LF_I64 : LF_F64, a->dtype);
        return;
    }
    if (a->iota_exact)
        fmt(raw, sizeof raw, "lf_iota_int(%s, P[%d], P[%d])", idx, a->param_iota, a->param_iota + 1);
    else
        fmt(raw, sizeof raw, "lf_iota_float(%s, P[%d], P[%d])", idx, a->param_iota, a->param_iota + 1);
    convert(out, cap, raw, a->iota_exact ? LF_I64 : LF_F64, a->dtype);
}

/* Hoists the invariant loads of region reg (before an innermost loop). */
static void hoist_invariants(emitter *e, int reg) {
    for (int i = 0; i < e->lay->naccess; i++) {
        const cg_access *a = &e->lay->access[i];
        if (a->fn < 0 || !in_region(e, a, reg) || a->inner != CG_INNER_INVARIANT) continue;
        expr_buf v;
        load_value(e, a, NULL, v, sizeof v);
        line(e, "%sconst %s h%d = %s; /* n%d */", e->d->value_attr, vtype(e, a->dtype), i, v, a->load->node->id);
    }
}

/* Declares o<a>_0 = offset for every access, then adds the contribution of
 * the flat index `flat` unravelled over loop axes [first, first + n). */
static void unravel(emitter *e, const char *flat, int first, int n) {
    const cg_layout *lay = e->lay;
    for (int i = 0; i < lay->naccess; i++)
        line(e, "%slf_idx o%d_0 = (lf_idx)P[%d];", e->d->value_attr, i, lay->access[i].param_offset);
    if (n == 0) return;
    open_block(e, "{");
    line(e, "lf_idx rest = %s, q;", flat);
    for (int ax = first + n - 1; ax >= first; ax--) {
        if (ax > first) {
            line(e, "q = rest %% (lf_idx)P[%d];", lay->param_extent + ax);
            line(e, "rest /= (lf_idx)P[%d];", lay->param_extent + ax);
        } else {
            line(e, "q = rest;");
        }
        for (int i = 0; i < lay->naccess; i++)
            line(e, "o%d_0 += q * (lf_idx)P[%d];", i, lay->access[i].param_offset + 1 + ax);
    }
    close_block(e);
}

/* Opens a loop over loop axis ax (range [lo, hi) or the whole extent) and
 * declares the next level's offsets of region reg (all regions if reg < 0)
 * and position pos<level+1> when track_pos. */
static void open_level(emitter *e, int ax, int reg, const char *lo, const char *hi, bool track_pos) {
    const cg_layout *lay = e->lay;
    int L = e->level;
    if (lo) open_block(e, "for (lf_idx r%d = %s; r%d < %s; r%d++) {", L, lo, L, hi, L);
    else open_block(e, "for (lf_idx r%d = 0; r%d < (lf_idx)P[%d]; r%d++) {", L, L, lay->param_extent + ax, L);
    for (int i = 0; i < lay->naccess; i++) {
        const cg_access *a = &lay->access[i];
        if (reg >= 0 && !in_region(e, a, reg)) continue;
        line(e, "%sconst lf_idx o%d_%d = o%d_%d + r%d * (lf_idx)P[%d];", e->d->value_attr, i, L + 1, i, L, L,
             a->param_offset + 1 + ax);
    }
    if (track_pos) line(e, "const int64_t pos%d = pos%d * P[%d] + r%d;", L + 1, L, lay->param_extent + ax, L);
    e->level++;
}

static void close_level(emitter *e) {
    e->level--;
    close_block(e);
}

/* ---- fns ------------------------------------------------------------------------------------ */

/* How ACC loads read finished reductions. */
typedef enum acc_form { ACC_SCALAR, ACC_ARRAY, ACC_R } acc_form;

/* The value of a FUSE_SRC_ACC load of reduction r. */
static void acc_value(const emitter *e, int r, acc_form form, const char *jv, char *out, size_t cap) {
    lf_dtype t = e->kn->reds[r].node->dtype;
    if (form == ACC_SCALAR) fmt(out, cap, "res%d", r);
    else if (form == ACC_ARRAY) fmt(out, cap, "res%d[%s]", r, jv);
    else if (graph_dtype_is_float(t)) fmt(out, cap, "(%s)R[%d].f", vtype(e, t), r);
    else fmt(out, cap, "(%s)R[%d].i", vtype(e, t), r);
}

/* Emits fn f (region f of the kernel) at innermost index jv, its
 * expressions named <prefix>v<i>. */
static void emit_fn(emitter *e, int f, const char *jv, acc_form form, const char *prefix) {
    const fuse_kernel *kn = e->kn;
    const lf_fn *fn;
    const lf_dtype *et, *ct;
    if (f < kn->npasses) {
        fn = kn->passes[f].fn;
        et = kn->passes[f].etype;
        ct = kn->passes[f].ctype;
    } else if (f == kn->npasses) {
        fn = kn->epi;
        et = kn->epi_etype;
        ct = kn->epi_ctype;
    } else {
        fn = kn->row;
        et = kn->row_etype;
        ct = kn->row_ctype;
    }
    int nl;
    const fuse_load *ls = fuse_kernel_fn_loads(kn, f, &nl, NULL);
    for (int i = 0; i < fn->nexprs; i++) {
        const fn_expr *x = &fn->exprs[i];
        expr_buf v;
        const char *note = "";
        char notebuf[64] = "";
        switch (x->kind) {
        case EXPR_PARAM: {
            const fuse_load *ld = &ls[x->param];
            if (ld->src == FUSE_SRC_ACC) {
                acc_value(e, ld->red, form, jv, v, sizeof v);
            } else {
                const cg_access *a = cg_load_access(e->lay, f, x->param);
                if (a->inner == CG_INNER_INVARIANT && jv) fmt(v, sizeof v, "h%d", access_id(e, a));
                else load_value(e, a, jv, v, sizeof v);
            }
            fmt(notebuf, sizeof notebuf, " /* n%d */", ld->node->id);
            note = notebuf;
            break;
        }
        case EXPR_CONST:
            if (x->is_int) fmt(v, sizeof v, "INT64_C(%" PRId64 ")", x->value.i);
            else if (isnan(x->value.f)) fmt(v, sizeof v, "%sNAN", signbit(x->value.f) ? "-" : "");
            else if (isinf(x->value.f)) fmt(v, sizeof v, "%sINFINITY", x->value.f < 0 ? "-" : "");
            else fmt(v, sizeof v, "%a", x->value.f);
            break;
        case EXPR_CAST: {
            expr_buf a;
            fmt(a, sizeof a, "%sv%d", prefix, x->arg[0]);
            convert(v, sizeof v, a, et[x->arg[0]], x->cast_to);
            break;
        }
        case EXPR_OP: {
            const op_info *oi = &graph_ops[x->op];
            char args[3][sizeof(expr_buf)];
            for (int k = 0; k < oi->arity; k++) {
                expr_buf a;
                fmt(a, sizeof a, "%sv%d", prefix, x->arg[k]);
                lf_dtype to = (oi->typing == OPTY_SELECT && k == 0) ? LF_BOOL : ct[i];
                convert(args[k], sizeof args[k], a, et[x->arg[k]], to);
            }
            op_expr(v, sizeof v, x->op, ct[i], args);
            fmt(notebuf, sizeof notebuf, " /* %s */", oi->text);
            note = notebuf;
            break;
        }
        }
        line(e, "%sconst %s %sv%d = %s;%s", e->d->value_attr, vtype(e, et[i]), prefix, i, v, note);
    }
}

/* The expression dtype of expression i of fn f. */
static lf_dtype fn_etype(const fuse_kernel *kn, int f, int i) {
    if (f < kn->npasses) return kn->passes[f].etype[i];
    if (f == kn->npasses) return kn->epi_etype[i];
    return kn->row_etype[i];
}

/* Stores of region reg at innermost index jv (NULL: at the base). */
static void emit_stores(emitter *e, int reg, const char *jv, const char *prefix) {
    const cg_layout *lay = e->lay;
    const fuse_kernel *kn = e->kn;
    for (int i = 0; i < lay->naccess; i++) {
        const cg_access *a = &lay->access[i];
        if (a->fn >= 0 || !in_region(e, a, reg)) continue;
        const fuse_store *so = &kn->stores[a->index];
        expr_buf idx, val, x;
        access_index(e, a, jv, idx, sizeof idx);
        fmt(x, sizeof x, "%sv%d", prefix, so->expr);
        lf_dtype from = fn_etype(kn, reg, so->expr);
        if (a->dtype == LF_BOOL) fmt(val, sizeof val, "(uint8_t)((%s) != 0)", x);
        else convert(val, sizeof val, x, from, a->dtype);
        if (e->vec) line(e, "w%d.x[l] = %s; /* -> n%d */", i, val, e->s->slots[so->slot].node->id);
        else line(e, "b%d[%s] = %s; /* -> n%d */", a->buf, idx, val, e->s->slots[so->slot].node->id);
    }
}

/* Region reg's fn at innermost index jv, then its stores (emit_fn and
 * emit_stores with the same prefix). */
static void emit_body(emitter *e, int reg, const char *jv, acc_form form, const char *prefix) {
    emit_fn(e, reg, jv, form, prefix);
    emit_stores(e, reg, jv, prefix);
}

/* ---- reductions ------------------------------------------------------------------------------- */

static bool red_float(const fuse_red *r) { return graph_dtype_is_float(r->in) || r->op == LF_RED_MEAN; }
static bool red_arg(const fuse_red *r) { return r->op == LF_RED_ARGMIN || r->op == LF_RED_ARGMAX; }
static bool red_min(const fuse_red *r) { return r->op == LF_RED_MIN || r->op == LF_RED_ARGMIN; }

static const char *red_init(const fuse_red *r) {
    bool fl = red_float(r);
    switch (r->op) {
    case LF_RED_PROD: return fl ? "1.0" : "1";
    case LF_RED_MIN:
    case LF_RED_ARGMIN: return fl ? "INFINITY" : "INT64_MAX";
    case LF_RED_MAX:
    case LF_RED_ARGMAX: return fl ? "-INFINITY" : "INT64_MIN";
    default: return fl ? "0.0" : "0";
    }
}

/* a = a + b or a * b for sum, mean and prod (wrapping in int64 for
 * integers); false for the other reductions. */
static bool emit_add_or_mul(emitter *e, const fuse_red *r, const char *a, const char *b) {
    bool fl = red_float(r);
    const char *op;
    switch (r->op) {
    case LF_RED_SUM:
    case LF_RED_MEAN: op = "+"; break;
    case LF_RED_PROD: op = "*"; break;
    default: return false;
    }
    if (fl) line(e, "%s %s= %s;", a, op, b);
    else line(e, "%s = (int64_t)((uint64_t)%s %s (uint64_t)(%s));", a, a, op, b);
    return true;
}

/* Folds value x (an expression of dtype r->in) into acc `a` (and arg `g`)
 * at position pos. */
static void emit_fold(emitter *e, const fuse_red *r, const char *a, const char *g, const char *x,
                      const char *pos) {
    bool fl = red_float(r);
    expr_buf v;
    convert(v, sizeof v, x, r->in, fl ? LF_F64 : LF_I64);
    const char *cmp = red_min(r) ? "<" : ">";
    if (emit_add_or_mul(e, r, a, v)) return;
    open_block(e, "{");
    line(e, "const %s x = %s;", fl ? "double" : "int64_t", v);
    if (fl) line(e, "const int better = (%s == %s) & ((x != x) | (x %s %s));", a, a, cmp, a);
    else line(e, "const int better = x %s %s;", cmp, a);
    line(e, "%s = better ? x : %s;", a, a);
    if (red_arg(r)) line(e, "%s = better ? %s : %s;", g, pos, g);
    close_block(e);
}

/* Combines partial (b, bg) into (a, g), both of reduction r. */
static void emit_combine(emitter *e, const fuse_red *r, const char *a, const char *g, const char *b,
                         const char *bg) {
    bool fl = red_float(r);
    if (emit_add_or_mul(e, r, a, b)) return;
    switch (r->op) {
    case LF_RED_MIN: line(e, "%s = lf_cmin_%s(%s, %s);", a, fl ? "f" : "i", a, b); return;
    case LF_RED_MAX: line(e, "%s = lf_cmax_%s(%s, %s);", a, fl ? "f" : "i", a, b); return;
    default:
        line(e, "lf_carg_%s(&%s, &%s, %s, %s, %d);", fl ? "f" : "i", a, g, b, bg, red_min(r));
        return;
    }
}

/* The finished value (the reduce node's dtype) of accumulator a/g. */
static void finish_value(const emitter *e, const fuse_red *r, const char *a, const char *g, char *out,
                         size_t cap) {
    expr_buf x;
    lf_dtype t = r->node->dtype;
    if (red_arg(r)) {
        fmt(x, sizeof x, "(%s < 0 ? 0 : %s)", g, g);
        convert(out, cap, x, LF_I64, t);
    } else if (r->op == LF_RED_MEAN) {
        fmt(x, sizeof x, "%s / (double)P[%d]", a, e->lay->param_count);
        convert(out, cap, x, LF_F64, t);
    } else {
        convert(out, cap, a, red_float(r) ? LF_F64 : LF_I64, t);
    }
}

static bool pass_tracks_pos(const fuse_kernel *kn, int q) {
    for (int j = 0; j < kn->nreds; j++)
        if (kn->reds[j].pass == q && red_arg(&kn->reds[j])) return true;
    return false;
}

/* Declares lane accumulators acc<r>[n], arg<r>[n] of pass q's reductions. */
static void declare_accs(emitter *e, int q, const char *n, const char *count) {
    const fuse_kernel *kn = e->kn;
    for (int j = 0; j < kn->nreds; j++) {
        const fuse_red *r = &kn->reds[j];
        if (r->pass != q) continue;
        line(e, "%s acc%d[%s]; /* n%d %s */", red_float(r) ? "double" : "int64_t", j, n, r->node->id,
             graph_reds[r->op].text);
        if (red_arg(r)) line(e, "int64_t arg%d[%s];", j, n);
        line(e, "for (int64_t l = 0; l < %s; l++) {", count);
        line(e, "    acc%d[l] = %s;", j, red_init(r));
        if (red_arg(r)) line(e, "    arg%d[l] = -1;", j);
        line(e, "}");
    }
}

/* The body of pass q at innermost index jv, folding into lane/element `slot`
 * at position pos. */
static void emit_pass_body(emitter *e, int q, const char *jv, acc_form form, const char *slot,
                           const char *pos) {
    const fuse_kernel *kn = e->kn;
    emit_fn(e, q, jv, form, "");
    for (int j = 0; j < kn->nreds; j++) {
        const fuse_red *r = &kn->reds[j];
        if (r->pass != q) continue;
        char a[32], g[32], x[32];
        fmt(a, sizeof a, "acc%d[%s]", j, slot);
        fmt(g, sizeof g, "arg%d[%s]", j, slot);
        fmt(x, sizeof x, "v%d", r->expr);
        emit_fold(e, r, a, g, x, pos);
    }
}

/* Opens the reduced nest of region reg (INNER and FULL): a loop per
 * reduced axis but the innermost (lo/hi bound the outermost, FULL blocks, or
 * are NULL), then `if (jlo < jhi) {` around the innermost loop's range (so
 * hoisted loads never run for an empty loop) and the region's hoisted loads.
 * Writes the innermost range into jlo/jhi; returns the levels opened, which
 * close_reduced_nest takes. */
static int open_reduced_nest(emitter *e, int reg, const char *lo, const char *hi, bool track_pos,
                             char jlo[32], char jhi[32]) {
    const cg_layout *lay = e->lay;
    int first = lay->nkept, inner = lay->ndim - 1, opened = 0;
    for (int ax = first; ax < inner; ax++, opened++)
        open_level(e, ax, reg, ax == first ? lo : NULL, ax == first ? hi : NULL, track_pos);
    bool blocked = inner == first && lo;
    fmt(jlo, 32, "%s", blocked ? lo : "0");
    if (blocked) fmt(jhi, 32, "%s", hi);
    else fmt(jhi, 32, "P[%d]", lay->param_extent + inner);
    open_block(e, "if (%s < %s) {", jlo, jhi);
    hoist_invariants(e, reg);
    return opened;
}

static void close_reduced_nest(emitter *e, int opened) {
    close_block(e);
    while (opened--) close_level(e);
}

/* The reduced nest of pass q (INNER and FULL): levels over the reduced axes
 * but the innermost, then the innermost axis split into lanes. lo/hi bound
 * the outermost reduced axis (FULL blocks) or are NULL. */
static void emit_lane_nest(emitter *e, int q, acc_form form, const char *lo, const char *hi) {
    const cg_layout *lay = e->lay;
    bool pos = pass_tracks_pos(e->kn, q);
    int inner = lay->ndim - 1;
    char jlo[32], jhi[32];
    if (pos) line(e, "const int64_t pos%d = 0;", e->level);
    int opened = open_reduced_nest(e, q, lo, hi, pos, jlo, jhi);
    char posx[64];
    fmt(posx, sizeof posx, "pos%d * P[%d] + jj", e->level, lay->param_extent + inner);
    line(e, "int64_t j = %s;", jlo);
    open_block(e, "for (; j + %d <= %s; j += %d) {", CG_LANES, jhi, CG_LANES);
    /* not unrolled: GCC's loop vectorizer (not SLP) calls the simd math */
    line(e, "_Pragma(\"GCC unroll 1\")");
    open_block(e, "for (int64_t l = 0; l < %d; l++) {", CG_LANES);
    line(e, "const int64_t jj = j + l;");
    emit_pass_body(e, q, "jj", form, "l", posx);
    close_block(e);
    close_block(e);
    open_block(e, "for (int64_t l = 0; j + l < %s; l++) {", jhi);
    line(e, "const int64_t jj = j + l;");
    emit_pass_body(e, q, "jj", form, "l", posx);
    close_block(e);
    close_reduced_nest(e, opened);
}

/* Combines pass q's lanes into acc<r>[0] / arg<r>[0] in lane order. */
static void combine_lanes(emitter *e, int q) {
    const fuse_kernel *kn = e->kn;
    for (int j = 0; j < kn->nreds; j++) {
        const fuse_red *r = &kn->reds[j];
        if (r->pass != q) continue;
        open_block(e, "for (int64_t l = 1; l < %d; l++) {", CG_LANES);
        char a[32], g[32], b[32], bg[32];
        fmt(a, sizeof a, "acc%d[0]", j);
        fmt(g, sizeof g, "arg%d[0]", j);
        fmt(b, sizeof b, "acc%d[l]", j);
        fmt(bg, sizeof bg, "arg%d[l]", j);
        emit_combine(e, r, a, g, b, bg);
        close_block(e);
    }
}

/* The row pass over the reduced nest (INNER and FULL). */
static void emit_row_nest(emitter *e, acc_form form, const char *lo, const char *hi) {
    const fuse_kernel *kn = e->kn;
    int reg = kn->npasses + 1;
    char jlo[32], jhi[32];
    int opened = open_reduced_nest(e, reg, lo, hi, false, jlo, jhi);
    open_block(e, "for (int64_t jj = %s; jj < %s; jj++) {", jlo, jhi);
    emit_body(e, reg, "jj", form, "r");
    close_block(e);
    close_reduced_nest(e, opened);
}

/* ---- function skeletons --------------------------------------------------------------------- */

static void declare_buffers(emitter *e) {
    const cg_layout *lay = e->lay;
    for (int b = 0; b < lay->nbufs; b++) {
        const fuse_slot *sl = &e->s->slots[lay->buf_slot[b]];
        const char *t = e->d->type[sl->dtype];
        if (lay->buf_written[b])
            line(e, "%s%s *%s b%d = (%s *)B[%d]; /* n%d */", e->d->value_attr, t, e->d->restrict_kw, b, t, b,
                 sl->node->id);
        else
            line(e, "%sconst %s *%s b%d = (const %s *)B[%d]; /* n%d */", e->d->value_attr, t, e->d->restrict_kw,
                 b, t, b, sl->node->id);
    }
    for (int i = 0; i < lay->naccess; i++)
        if (lay->access[i].inner == CG_INNER_STRIDED)
            line(e, "%sconst lf_idx s%d = (lf_idx)P[%d];", e->d->value_attr, i,
                 lay->access[i].param_offset + lay->ndim);
}

static void open_fn(emitter *e, const char *sig) {
    open_block(e, "%s void lf_k_%s {", e->d->entry, sig);
    e->level = 0;
}

#define ARGS_RUN "void *const *restrict B, const int64_t *restrict P, int64_t begin, int64_t end"

static void emit_elementwise(emitter *e) {
    const cg_layout *lay = e->lay;
    int inner = lay->ndim - 1;
    open_fn(e, "run(" ARGS_RUN ")");
    declare_buffers(e);
    line(e, "const int64_t E = P[%d];", lay->param_extent + inner);
    line(e, "int64_t at = begin;");
    open_block(e, "while (at < end) {");
    line(e, "const int64_t row = at / E, j0 = at - row * E;");
    line(e, "const int64_t j1 = end - at < E - j0 ? j0 + (end - at) : E;");
    unravel(e, "row", 0, inner);
    hoist_invariants(e, 0);
    open_block(e, "for (int64_t j = j0; j < j1; j++) {");
    emit_body(e, 0, "j", ACC_SCALAR, "");
    close_block(e);
    line(e, "at += j1 - j0;");
    close_block(e);
    close_block(e);
}

/* Declares res<r> for every reduction (n: array length or NULL). */
static void declare_results(emitter *e, const char *n) {
    const fuse_kernel *kn = e->kn;
    for (int j = 0; j < kn->nreds; j++) {
        const char *t = vtype(e, kn->reds[j].node->dtype);
        if (n) line(e, "%s res%d[%s];", t, j, n);
        else line(e, "%s res%d;", t, j);
    }
}

static void finish_into(emitter *e, int q, const char *slot, const char *dst_fmt_prefix) {
    const fuse_kernel *kn = e->kn;
    for (int j = 0; j < kn->nreds; j++) {
        const fuse_red *r = &kn->reds[j];
        if (r->pass != q) continue;
        char a[32], g[32];
        expr_buf v;
        fmt(a, sizeof a, "acc%d[%s]", j, slot);
        fmt(g, sizeof g, "arg%d[%s]", j, slot);
        finish_value(e, r, a, g, v, sizeof v);
        if (dst_fmt_prefix) line(e, "res%d[%s] = %s;", j, dst_fmt_prefix, v);
        else line(e, "res%d = %s;", j, v);
    }
}

static void emit_inner(emitter *e) {
    const fuse_kernel *kn = e->kn;
    const cg_layout *lay = e->lay;
    open_fn(e, "run(" ARGS_RUN ")");
    declare_buffers(e);
    open_block(e, "for (int64_t out = begin; out < end; out++) {");
    unravel(e, "out", 0, lay->nkept);
    declare_results(e, NULL);
    for (int q = 0; q < kn->npasses; q++) {
        open_block(e, "{ /* pass %d */", q);
        char lanes[16];
        fmt(lanes, sizeof lanes, "%d", CG_LANES);
        declare_accs(e, q, lanes, lanes);
        emit_lane_nest(e, q, ACC_SCALAR, NULL, NULL);
        combine_lanes(e, q);
        finish_into(e, q, "0", NULL);
        close_block(e);
    }
    open_block(e, "{ /* epilogue */");
    emit_body(e, kn->npasses, NULL, ACC_SCALAR, "e");
    close_block(e);
    if (kn->row) {
        open_block(e, "{ /* row pass */");
        emit_row_nest(e, ACC_SCALAR, NULL, NULL);
        close_block(e);
    }
    close_block(e);
    close_block(e);
}

static void emit_outer(emitter *e) {
    const fuse_kernel *kn = e->kn;
    const cg_layout *lay = e->lay;
    int last = lay->ndim - 1;
    open_fn(e, "run(" ARGS_RUN ")");
    declare_buffers(e);
    line(e, "const int64_t EK = P[%d], nblk = (EK + %d) / %d;", lay->param_extent + last,
         CG_OUTER_BLOCK - 1, CG_OUTER_BLOCK);
    open_block(e, "for (int64_t u = begin; u < end; u++) {");
    line(e, "const int64_t out = u / nblk, k0 = (u - out * nblk) * %d;", CG_OUTER_BLOCK);
    line(e, "const int64_t K = EK - k0 < %d ? EK - k0 : %d;", CG_OUTER_BLOCK, CG_OUTER_BLOCK);
    unravel(e, "out", 0, lay->nkept);
    for (int i = 0; i < lay->naccess; i++)
        line(e, "o%d_0 += k0 * P[%d];", i, lay->access[i].param_offset + 1 + last);
    char blk[16];
    fmt(blk, sizeof blk, "%d", CG_OUTER_BLOCK);
    declare_results(e, blk);
    for (int q = 0; q < kn->npasses; q++) {
        open_block(e, "{ /* pass %d */", q);
        bool pos = pass_tracks_pos(kn, q);
        declare_accs(e, q, blk, "K");
        if (pos) line(e, "const int64_t pos0 = 0;");
        int opened = 0;
        for (int ax = lay->nkept; ax < last; ax++, opened++) open_level(e, ax, q, NULL, NULL, pos);
        hoist_invariants(e, q);
        char posx[16];
        fmt(posx, sizeof posx, "pos%d", e->level);
        open_block(e, "for (int64_t kk = 0; kk < K; kk++) {");
        emit_pass_body(e, q, "kk", ACC_ARRAY, "kk", posx);
        close_block(e);
        while (opened--) close_level(e);
        open_block(e, "for (int64_t kk = 0; kk < K; kk++) {");
        finish_into(e, q, "kk", "kk");
        close_block(e);
        close_block(e);
    }
    hoist_invariants(e, kn->npasses);
    open_block(e, "for (int64_t kk = 0; kk < K; kk++) { /* epilogue */");
    emit_body(e, kn->npasses, "kk", ACC_ARRAY, "e");
    close_block(e);
    if (kn->row) {
        int reg = kn->npasses + 1, opened = 0;
        open_block(e, "{ /* row pass */");
        for (int ax = lay->nkept; ax < last; ax++, opened++) open_level(e, ax, reg, NULL, NULL, false);
        hoist_invariants(e, reg);
        open_block(e, "for (int64_t kk = 0; kk < K; kk++) {");
        emit_body(e, reg, "kk", ACC_ARRAY, "r");
        close_block(e);
        while (opened--) close_level(e);
        close_block(e);
    }
    close_block(e);
    close_block(e);
}

/* lo, hi: the outermost-axis range of block blk (FULL). */
static void block_bounds(emitter *e) {
    const cg_layout *lay = e->lay;
    line(e, "const int64_t lo = blk * P[%d];", lay->param_full_block);
    line(e, "const int64_t hi = P[%d] - lo < P[%d] ? P[%d] : lo + P[%d];", lay->param_extent,
         lay->param_full_block, lay->param_extent, lay->param_full_block);
}

int cg_pass_reductions(const fuse_kernel *kn, int q) {
    int nq = 0;
    for (int j = 0; j < kn->nreds; j++) nq += kn->reds[j].pass == q;
    return nq;
}

static void emit_full(emitter *e) {
    const fuse_kernel *kn = e->kn;
    for (int q = 0; q < kn->npasses; q++) {
        int nq = cg_pass_reductions(kn, q);
        char sig[256];
        fmt(sig, sizeof sig,
                 "pass%d(void *const *restrict B, const int64_t *restrict P, lf_value *restrict R, "
                 "int64_t begin, int64_t end, lf_partial *restrict part)",
                 q);
        open_fn(e, sig);
        line(e, "(void)R;");
        declare_buffers(e);
        open_block(e, "for (int64_t blk = begin; blk < end; blk++) {");
        block_bounds(e);
        unravel(e, "0", 0, 0);
        char lanes[16];
        fmt(lanes, sizeof lanes, "%d", CG_LANES);
        declare_accs(e, q, lanes, lanes);
        emit_lane_nest(e, q, ACC_R, "lo", "hi");
        combine_lanes(e, q);
        for (int j = 0, m = 0; j < kn->nreds; j++) {
            const fuse_red *r = &kn->reds[j];
            if (r->pass != q) continue;
            line(e, "part[blk * %d + %d].v.%s = acc%d[0];", nq, m, red_float(r) ? "f" : "i", j);
            if (red_arg(r)) line(e, "part[blk * %d + %d].arg = arg%d[0];", nq, m, j);
            else line(e, "part[blk * %d + %d].arg = -1;", nq, m);
            m++;
        }
        close_block(e);
        close_block(e);

        fmt(sig, sizeof sig,
                 "fin%d(const int64_t *restrict P, lf_value *restrict R, const lf_partial *restrict "
                 "part, int64_t nblocks)",
                 q);
        open_fn(e, sig);
        for (int j = 0, m = 0; j < kn->nreds; j++) {
            const fuse_red *r = &kn->reds[j];
            if (r->pass != q) continue;
            bool fl = red_float(r);
            open_block(e, "{ /* n%d %s */", r->node->id, graph_reds[r->op].text);
            line(e, "%s acc%d[1] = {%s};", fl ? "double" : "int64_t", j, red_init(r));
            line(e, "int64_t arg%d[1] = {-1};", j);
            open_block(e, "for (int64_t b = 0; b < nblocks; b++) {");
            char a[32], g[32], b[64], bg[64];
            fmt(a, sizeof a, "acc%d[0]", j);
            fmt(g, sizeof g, "arg%d[0]", j);
            fmt(b, sizeof b, "part[b * %d + %d].v.%s", nq, m, fl ? "f" : "i");
            fmt(bg, sizeof bg, "part[b * %d + %d].arg", nq, m);
            emit_combine(e, r, a, g, b, bg);
            close_block(e);
            expr_buf v;
            finish_value(e, r, a, g, v, sizeof v);
            line(e, "R[%d].%s = %s;", j, graph_dtype_is_float(r->node->dtype) ? "f" : "i", v);
            close_block(e);
            m++;
        }
        line(e, "(void)P;");
        close_block(e);
    }
    open_fn(e, "epi(void *const *restrict B, const int64_t *restrict P, lf_value *restrict R)");
    declare_buffers(e);
    unravel(e, "0", 0, 0);
    emit_body(e, kn->npasses, NULL, ACC_R, "e");
    close_block(e);
    if (kn->row) {
        open_fn(e, "row(void *const *restrict B, const int64_t *restrict P, lf_value *restrict R, "
                   "int64_t begin, int64_t end)");
        declare_buffers(e);
        open_block(e, "for (int64_t blk = begin; blk < end; blk++) {");
        block_bounds(e);
        unravel(e, "0", 0, 0);
        emit_row_nest(e, ACC_R, "lo", "hi");
        close_block(e);
        close_block(e);
    }
}


/* ---- CUDA skeletons ------------------------------------------------------------------------
 * Each body is a template over the index type lf_idx, instantiated by two
 * extern "C" __global__ entries, lf_k_<name>32 (int) and lf_k_<name>64
 * (long long); emit_cuda.c picks 32 when every index of the launch fits.
 * The single kernel parameter `a` (lf_args) holds B, R, part, ticket and P;
 * the macros B, P and R name its fields so the shared pieces above print
 * the same text as for C. Every thread of a block reaches every
 * __syncthreads (loops that contain one have block-uniform bounds).
 *
 *  - run (ELEMENTWISE): grid-stride loop over flat elements.
 *  - vec (ELEMENTWISE, one contiguous axis; emitted when
 *    cg_cuda_vectorizable): each thread takes 4 consecutive elements with
 *    one 4-element (16-byte for f32) load per input and store per output;
 *    a scalar loop takes the tail. Used when every pointer is aligned.
 *  - rows (INNER): a group of blockDim.x threads per output element,
 *    blockDim.y outputs per block; thread x folds positions x, x + G, ...,
 *    then the group combines through shared memory in a fixed tree.
 *  - cols (OUTER): a thread per output, consecutive threads on consecutive
 *    innermost outputs (coalesced reads); each folds its reduced positions
 *    in the reference's order.
 *  - pass<q> (FULL): a block per CG block of the outermost axis writes its
 *    partial; the last block to finish (an integer ticket, no float
 *    atomics) combines the partials in a fixed tree, writes R and, after
 *    the last pass, runs the epilogue; row: grid-stride over positions.
 */

/* Calls to the device math library in fn (sqrt, rsqrt and fma are single
 * instructions and do not count). */
static int math_calls(const lf_fn *fn) {
    int n = 0;
    for (int i = 0; i < fn->nexprs; i++) {
        const fn_expr *x = &fn->exprs[i];
        if (x->kind != EXPR_OP) continue;
        lf_op op = x->op;
        if ((graph_ops[op].typing == OPTY_FLOAT && op != LF_OP_SQRT && op != LF_OP_RSQRT && op != LF_OP_FMA) ||
            op == LF_OP_POW || op == LF_OP_MOD)
            n++;
    }
    return n;
}

bool cg_cuda_vectorizable(const cg_layout *lay) {
    if (lay->strategy != CG_ELEMENTWISE || lay->ndim != 1) return false;
    /* four lanes of many inlined math calls compile slowly (polar_distance:
     * 230 ms) and such kernels gain little from wide loads */
    if (math_calls(lay->kernel->passes[0].fn) > 3) return false;
    for (int i = 0; i < lay->naccess; i++) {
        const cg_access *a = &lay->access[i];
        if (a->param_steps >= 0 || a->inner == CG_INNER_STRIDED) return false;
        if (a->fn < 0 && a->inner != CG_INNER_CONTIGUOUS) return false;
    }
    return true;
}

static const char *cuda_names[] = {"run", "vec", "rows", "cols", "row", "pass0", "pass1",
                                   "pass2", "pass3", "pass4", "pass5", "pass6", "pass7"};

static void cuda_open_body(emitter *e, const char *name) {
    line(e, "template <typename lf_idx>");
    open_block(e, "static __device__ __forceinline__ void lf_body_%s(const lf_args &a) {", name);
    e->level = 0;
    declare_buffers(e);
    line(e, "const lf_idx lf_tid = (lf_idx)blockIdx.x * blockDim.x + threadIdx.x;");
    line(e, "const lf_idx lf_stride = (lf_idx)gridDim.x * blockDim.x;");
    line(e, "(void)lf_tid; (void)lf_stride;");
}

/* Closes body `name` and prints its two entries; variant32/64 are the
 * LF_VARIANT values that compile them (1 and 2: 32- and 64-bit run, rows,
 * cols, row and pass entries; 3 and 4: the vec entries): a module built with
 * -DLF_VARIANT=v instantiates only variant v's bodies, one without it all of
 * them (what the backend compiles today). */
static void cuda_close_body(emitter *e, const char *name, int variant32, int variant64) {
    close_block(e);
    for (int w = 32; w <= 64; w += 32) {
        line(e, "#if !defined(LF_VARIANT) || LF_VARIANT == %d", w == 32 ? variant32 : variant64);
        line(e,
             "extern \"C\" __global__ void __launch_bounds__(256) lf_k_%s%d(const lf_args a) "
             "{ lf_body_%s<%s>(a); }",
             name, w, name, w == 32 ? "int" : "long long");
        line(e, "#endif");
    }
}

/* lf_idx <name> = product of the extents of loop axes [first, first + n). */
static void cuda_extent_product(emitter *e, const char *name, int first, int n) {
    line(e, "lf_idx %s = 1;", name);
    for (int ax = first; ax < first + n; ax++)
        line(e, "%s *= (lf_idx)P[%d];", name, e->lay->param_extent + ax);
}

/* Opens the offsets of region reg (all regions when reg < 0) at flat
 * position `flat` of loop axes [first, ndim): the outer ones go into the
 * next level's offsets; returns the innermost index expression in jv. */
static void cuda_position(emitter *e, int reg, const char *flat, int first, char jv[32]) {
    const cg_layout *lay = e->lay;
    int inner = lay->ndim - 1, L = e->level;
    if (first >= inner) {
        fmt(jv, 32, "%s", flat);
        return;
    }
    line(e, "lf_idx rest%d = %s;", L, flat);
    line(e, "const lf_idx jin%d = rest%d %% (lf_idx)P[%d];", L, L, lay->param_extent + inner);
    line(e, "rest%d /= (lf_idx)P[%d];", L, lay->param_extent + inner);
    for (int i = 0; i < lay->naccess; i++)
        if (reg < 0 || in_region(e, &lay->access[i], reg))
            line(e, "%slf_idx o%d_%d = o%d_%d;", e->d->value_attr, i, L + 1, i, L);
    for (int ax = inner - 1; ax >= first; ax--) {
        if (ax > first) {
            line(e, "{");
            line(e, "    const lf_idx q = rest%d %% (lf_idx)P[%d];", L, lay->param_extent + ax);
            line(e, "    rest%d /= (lf_idx)P[%d];", L, lay->param_extent + ax);
        } else {
            line(e, "{");
            line(e, "    const lf_idx q = rest%d;", L);
        }
        for (int i = 0; i < lay->naccess; i++)
            if (reg < 0 || in_region(e, &lay->access[i], reg))
                line(e, "    o%d_%d += q * (lf_idx)P[%d];", i, L + 1, lay->access[i].param_offset + 1 + ax);
        line(e, "}");
    }
    e->level++;
    fmt(jv, 32, "jin%d", L);
}

/* Shared arrays of pass q's reductions (every reduction when q < 0). */
static void cuda_declare_shared(emitter *e, int q) {
    const fuse_kernel *kn = e->kn;
    for (int j = 0; j < kn->nreds; j++) {
        const fuse_red *r = &kn->reds[j];
        if (q >= 0 && r->pass != q) continue;
        line(e, "__shared__ %s sacc%d[256];", red_float(r) ? "double" : "int64_t", j);
        if (red_arg(r)) line(e, "__shared__ int64_t sarg%d[256];", j);
    }
}

/* Combines the acc<r>[0] of pass q over a group of G threads (thread tx at
 * shared index slot) into sacc<r>[slot - tx] through a fixed tree. */
static void cuda_group_combine(emitter *e, int q, const char *G) {
    const fuse_kernel *kn = e->kn;
    for (int j = 0; j < kn->nreds; j++) {
        const fuse_red *r = &kn->reds[j];
        if (r->pass != q) continue;
        line(e, "sacc%d[slot] = acc%d[0];", j, j);
        if (red_arg(r)) line(e, "sarg%d[slot] = arg%d[0];", j, j);
    }
    line(e, "__syncthreads();");
    open_block(e, "for (int s = %s / 2; s > 0; s >>= 1) {", G);
    open_block(e, "if (tx < s) {");
    for (int j = 0; j < kn->nreds; j++) {
        const fuse_red *r = &kn->reds[j];
        if (r->pass != q) continue;
        char a[32], g[32], b[48], bg[48];
        fmt(a, sizeof a, "sacc%d[slot]", j);
        fmt(g, sizeof g, "sarg%d[slot]", j);
        fmt(b, sizeof b, "sacc%d[slot + s]", j);
        fmt(bg, sizeof bg, "sarg%d[slot + s]", j);
        emit_combine(e, r, a, g, b, bg);
    }
    close_block(e);
    line(e, "__syncthreads();");
    close_block(e);
}

/* Finished value of reduction j from the group's shared slot `base`. */
static void cuda_finished(emitter *e, int j, const char *base, char *out, size_t cap) {
    char a[48], g[48];
    fmt(a, sizeof a, "sacc%d[%s]", j, base);
    fmt(g, sizeof g, "sarg%d[%s]", j, base);
    finish_value(e, &e->kn->reds[j], a, g, out, cap);
}

static void cuda_elementwise(emitter *e) {
    const cg_layout *lay = e->lay;
    int inner = lay->ndim - 1;
    cuda_open_body(e, "run");
    line(e, "const lf_idx E = (lf_idx)P[%d];", lay->param_extent + inner);
    cuda_extent_product(e, "T", 0, lay->ndim);
    open_block(e, "for (lf_idx at = lf_tid; at < T; at += lf_stride) {");
    if (inner > 0) {
        line(e, "const lf_idx row = at / E, j = at - row * E;");
        unravel(e, "row", 0, inner);
    } else {
        line(e, "const lf_idx j = at; (void)E;");
        unravel(e, "0", 0, 0);
    }
    hoist_invariants(e, 0);
    emit_body(e, 0, "j", ACC_SCALAR, "");
    close_block(e);
    cuda_close_body(e, "run", 1, 2);
    if (!cg_cuda_vectorizable(lay)) return;

    cuda_open_body(e, "vec");
    line(e, "const lf_idx T = (lf_idx)P[%d];", lay->param_extent);
    unravel(e, "0", 0, 0);
    hoist_invariants(e, 0);
    open_block(e, "for (lf_idx g = lf_tid; g < T / 4; g += lf_stride) {");
    line(e, "const lf_idx j0 = g * 4;");
    for (int i = 0; i < lay->naccess; i++) {
        const cg_access *a = &lay->access[i];
        if (a->buf < 0 || a->inner != CG_INNER_CONTIGUOUS) continue;
        const char *t = e->d->type[a->dtype];
        if (a->fn >= 0)
            line(e, "const lf_v4<%s> w%d = *(const lf_v4<%s> *)(b%d + o%d_0 + j0);", t, i, t, a->buf, i);
        else
            line(e, "lf_v4<%s> w%d;", t, i);
    }
    line(e, "#pragma unroll");
    open_block(e, "for (int l = 0; l < 4; l++) {");
    line(e, "const lf_idx j = j0 + l; (void)j;");
    e->vec = true;
    emit_body(e, 0, "j", ACC_SCALAR, "");
    e->vec = false;
    close_block(e);
    for (int i = 0; i < lay->naccess; i++) {
        const cg_access *a = &lay->access[i];
        if (a->fn >= 0 || a->buf < 0) continue;
        const char *t = e->d->type[a->dtype];
        line(e, "*(lf_v4<%s> *)(b%d + o%d_0 + j0) = w%d;", t, a->buf, i, i);
    }
    close_block(e);
    open_block(e, "for (lf_idx j = T / 4 * 4 + lf_tid; j < T; j += lf_stride) {");
    emit_body(e, 0, "j", ACC_SCALAR, "");
    close_block(e);
    cuda_close_body(e, "vec", 3, 4);
}

/* The loop of one thread over its positions p = tx, tx + G, ... < C of the
 * reduced axes [first, ndim) for pass q (or, q == npasses + 1, the row
 * pass); flat positions are base + p. */
static void cuda_thread_positions(emitter *e, int q, int first, const char *base, const char *G,
                                  acc_form form) {
    const fuse_kernel *kn = e->kn;
    open_block(e, "for (lf_idx p = tx; p < C; p += %s) {", G);
    line(e, "const lf_idx fl = %s + p; (void)fl;", base);
    int level = e->level;
    char jv[32];
    cuda_position(e, q, "fl", first, jv);
    hoist_invariants(e, q);
    if (q == kn->npasses + 1) {
        emit_body(e, q, jv, form, "r");
    } else {
        emit_pass_body(e, q, jv, form, "0", "(int64_t)fl");
    }
    e->level = level;
    close_block(e);
}

static void cuda_inner(emitter *e) {
    const fuse_kernel *kn = e->kn;
    const cg_layout *lay = e->lay;
    cuda_open_body(e, "rows");
    cuda_declare_shared(e, -1);
    line(e, "const int tx = threadIdx.x, G = blockDim.x, slot = threadIdx.y * G + tx;");
    line(e, "(void)slot;");
    cuda_extent_product(e, "NOUT", 0, lay->nkept);
    line(e, "const lf_idx C = (lf_idx)P[%d];", lay->param_count);
    open_block(e, "for (lf_idx base = (lf_idx)blockIdx.x * blockDim.y; base < NOUT; "
            "base += (lf_idx)gridDim.x * blockDim.y) {");
    line(e, "const lf_idx out = base + threadIdx.y;");
    line(e, "const bool live = out < NOUT;");
    unravel(e, "(live ? out : 0)", 0, lay->nkept);
    declare_results(e, NULL);
    for (int q = 0; q < kn->npasses; q++) {
        open_block(e, "{ /* pass %d */", q);
        declare_accs(e, q, "1", "1");
        open_block(e, "if (live) {");
        cuda_thread_positions(e, q, lay->nkept, "0", "G", ACC_SCALAR);
        close_block(e);
        cuda_group_combine(e, q, "G");
        for (int j = 0; j < kn->nreds; j++) {
            if (kn->reds[j].pass != q) continue;
            expr_buf v;
            cuda_finished(e, j, "threadIdx.y * G", v, sizeof v);
            line(e, "res%d = %s;", j, v);
        }
        line(e, "__syncthreads();");
        close_block(e);
    }
    open_block(e, "if (live && tx == 0) { /* epilogue */");
    emit_body(e, kn->npasses, NULL, ACC_SCALAR, "e");
    close_block(e);
    if (kn->row) {
        open_block(e, "if (live) { /* row pass */");
        cuda_thread_positions(e, kn->npasses + 1, lay->nkept, "0", "G", ACC_SCALAR);
        close_block(e);
    }
    close_block(e);
    cuda_close_body(e, "rows", 1, 2);
}

static void cuda_outer(emitter *e) {
    const fuse_kernel *kn = e->kn;
    const cg_layout *lay = e->lay;
    int last = lay->ndim - 1;
    cuda_open_body(e, "cols");
    line(e, "const lf_idx EK = (lf_idx)P[%d];", lay->param_extent + last);
    cuda_extent_product(e, "NOUT", 0, lay->nkept);
    line(e, "NOUT *= EK;");
    open_block(e, "for (lf_idx u = lf_tid; u < NOUT; u += lf_stride) {");
    line(e, "const lf_idx out = u / EK, k = u - out * EK;");
    unravel(e, "out", 0, lay->nkept);
    for (int i = 0; i < lay->naccess; i++)
        line(e, "o%d_0 += k * (lf_idx)P[%d];", i, lay->access[i].param_offset + 1 + last);
    declare_results(e, NULL);
    for (int q = 0; q < kn->npasses; q++) {
        open_block(e, "{ /* pass %d */", q);
        bool pos = pass_tracks_pos(kn, q);
        declare_accs(e, q, "1", "1");
        if (pos) line(e, "const int64_t pos0 = 0;");
        int opened = 0;
        for (int ax = lay->nkept; ax < last; ax++, opened++) open_level(e, ax, q, NULL, NULL, pos);
        char posx[16];
        fmt(posx, sizeof posx, "pos%d", e->level);
        emit_pass_body(e, q, NULL, ACC_SCALAR, "0", posx);
        while (opened--) close_level(e);
        finish_into(e, q, "0", NULL);
        close_block(e);
    }
    open_block(e, "{ /* epilogue */");
    emit_body(e, kn->npasses, NULL, ACC_SCALAR, "e");
    close_block(e);
    if (kn->row) {
        int reg = kn->npasses + 1, opened = 0;
        open_block(e, "{ /* row pass */");
        for (int ax = lay->nkept; ax < last; ax++, opened++) open_level(e, ax, reg, NULL, NULL, false);
        emit_body(e, reg, NULL, ACC_SCALAR, "r");
        while (opened--) close_level(e);
        close_block(e);
    }
    close_block(e);
    cuda_close_body(e, "cols", 1, 2);
}

static void cuda_full(emitter *e) {
    const fuse_kernel *kn = e->kn;
    const cg_layout *lay = e->lay;
    for (int q = 0; q < kn->npasses; q++) {
        int nq = cg_pass_reductions(kn, q);
        cuda_open_body(e, cuda_names[5 + q]);
        cuda_declare_shared(e, q);
        line(e, "__shared__ int lf_last;");
        line(e, "const int tx = threadIdx.x, slot = tx;");
        line(e, "const lf_idx blk = blockIdx.x;");
        line(e, "const lf_idx lo = blk * (lf_idx)P[%d];", lay->param_full_block);
        line(e, "const lf_idx hi = (lf_idx)P[%d] - lo < (lf_idx)P[%d] ? (lf_idx)P[%d] : lo + (lf_idx)P[%d];",
             lay->param_extent, lay->param_full_block, lay->param_extent, lay->param_full_block);
        unravel(e, "0", 0, 0);
        cuda_extent_product(e, "Cin", 1, lay->ndim - 1);
        line(e, "const lf_idx C = (hi - lo) * Cin;");
        declare_accs(e, q, "1", "1");
        open_block(e, "{");
        cuda_thread_positions(e, q, 0, "lo * Cin", "(lf_idx)blockDim.x", ACC_R);
        close_block(e);
        cuda_group_combine(e, q, "(int)blockDim.x");
        open_block(e, "if (tx == 0) {");
        for (int j = 0, m = 0; j < kn->nreds; j++) {
            const fuse_red *r = &kn->reds[j];
            if (r->pass != q) continue;
            line(e, "a.part[blk * %d + %d].v.%s = sacc%d[0];", nq, m, red_float(r) ? "f" : "i", j);
            if (red_arg(r)) line(e, "a.part[blk * %d + %d].arg = sarg%d[0];", nq, m, j);
            else line(e, "a.part[blk * %d + %d].arg = -1;", nq, m);
            m++;
        }
        line(e, "__threadfence();");
        line(e, "lf_last = atomicAdd(&a.ticket[%d], 1u) == gridDim.x - 1;", q);
        close_block(e);
        line(e, "__syncthreads();");
        open_block(e, "if (lf_last) { /* the last block combines the partials in a fixed order */");
        line(e, "__threadfence();");
        for (int j = 0, m = 0; j < kn->nreds; j++) {
            const fuse_red *r = &kn->reds[j];
            if (r->pass != q) continue;
            bool fl = red_float(r);
            line(e, "acc%d[0] = %s;", j, red_init(r));
            if (red_arg(r)) line(e, "arg%d[0] = -1;", j);
            open_block(e, "for (lf_idx b = tx; b < (lf_idx)gridDim.x; b += blockDim.x) {");
            line(e, "const %s pv = __ldcg(&a.part[b * %d + %d].v.%s);", fl ? "double" : "long long", nq, m,
                 fl ? "f" : "i");
            line(e, "const long long pa = __ldcg(&a.part[b * %d + %d].arg); (void)pa;", nq, m);
            char a[32], g[32];
            fmt(a, sizeof a, "acc%d[0]", j);
            fmt(g, sizeof g, "arg%d[0]", j);
            emit_combine(e, r, a, g, "pv", "pa");
            close_block(e);
            m++;
        }
        cuda_group_combine(e, q, "(int)blockDim.x");
        open_block(e, "if (tx == 0) {");
        for (int j = 0; j < kn->nreds; j++) {
            const fuse_red *r = &kn->reds[j];
            if (r->pass != q) continue;
            expr_buf v;
            cuda_finished(e, j, "0", v, sizeof v);
            line(e, "R[%d].%s = %s;", j, graph_dtype_is_float(r->node->dtype) ? "f" : "i", v);
        }
        line(e, "a.ticket[%d] = 0;", q);
        if (q == kn->npasses - 1) {
            open_block(e, "{ /* epilogue */");
            emit_body(e, kn->npasses, NULL, ACC_R, "e");
            close_block(e);
        }
        close_block(e);
        close_block(e);
        cuda_close_body(e, cuda_names[5 + q], 1, 2);
    }
    if (kn->row) {
        cuda_open_body(e, "row");
        unravel(e, "0", 0, 0);
        cuda_extent_product(e, "C", 0, lay->ndim);
        line(e, "const lf_idx tx = lf_tid;");
        cuda_thread_positions(e, kn->npasses + 1, 0, "0", "lf_stride", ACC_R);
        cuda_close_body(e, "row", 1, 2);
    }
}

static void cuda_emit(emitter *e) {
    const cg_layout *lay = e->lay;
    cg_printf(e->t, "struct lf_args {\n    void *B[%d];\n    lf_value *R;\n    lf_partial *part;\n"
                    "    unsigned int *ticket;\n    long long P[%d];\n};\n",
              lay->nbufs > 0 ? lay->nbufs : 1, lay->nparams > 0 ? lay->nparams : 1);
    cg_printf(e->t, "#define B (a.B)\n#define P (a.P)\n#define R (a.R)\n");
    switch (lay->strategy) {
    case CG_ELEMENTWISE: cuda_elementwise(e); break;
    case CG_REDUCE_INNER: cuda_inner(e); break;
    case CG_REDUCE_OUTER: cuda_outer(e); break;
    case CG_REDUCE_FULL: cuda_full(e); break;
    }
}

static const char *strategy_name(cg_strategy s) {
    switch (s) {
    case CG_ELEMENTWISE: return "elementwise";
    case CG_REDUCE_FULL: return "full reduction";
    case CG_REDUCE_INNER: return "inner reduction";
    default: return "outer reduction";
    }
}

void cg_emit_kernel(const fuse_schedule *s, const cg_layout *lay, const cg_dialect *d, cg_text *out) {
    emitter e = {.t = out, .s = s, .lay = lay, .kn = lay->kernel, .d = d};
    const fuse_kernel *kn = lay->kernel;
    cg_printf(out, "%s%s", d->prelude, cg_prelude_helpers);
    cg_printf(out, "/* kernel: %s over %d loop axes", strategy_name(lay->strategy), lay->ndim);
    cg_printf(out, "; graph nodes:");
    for (int i = 0; i < kn->nnodes; i++) cg_printf(out, " n%d", kn->nodes[i]);
    cg_printf(out, " */\n");
    if (d->cuda) {
        cuda_emit(&e);
        return;
    }
    switch (lay->strategy) {
    case CG_ELEMENTWISE: emit_elementwise(&e); break;
    case CG_REDUCE_INNER: emit_inner(&e); break;
    case CG_REDUCE_OUTER: emit_outer(&e); break;
    case CG_REDUCE_FULL: emit_full(&e); break;
    }
}
