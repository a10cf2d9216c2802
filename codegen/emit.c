/* codegen/emit.c: the emitter's shared walker (see emit.h): everything a
 * kernel's skeleton prints inside its loops, the same for both dialects.
 *
 * The walker follows a cg_layout (codegen/layout.c) and the kernel's fns:
 * loads and stores through each access's index (hoisted when invariant in
 * the innermost loop), the fns' expressions in the dialect's types with
 * graph/scalar.c's semantics, the folds, combines and finished values of
 * the reductions, and the loop levels and reduced nests the skeletons open.
 * The skeletons that call it are in emit_c.c (C) and emit_cuda.c (CUDA);
 * kernel.c picks one. What must stay true: a reduction's order of folds
 * never depends on the number of threads (lanes and blocks are fixed by the
 * shape alone), and a skeleton prints nothing the walker could.
 *
 * Names in the generated text: b<k> buffer k; o<a>_<L> offset of access a at
 * loop level L; s<a> its innermost stride; h<a> a hoisted invariant load;
 * <x>v<i> expression i of an fn; acc<r>/arg<r> accumulators of reduction r;
 * res<r> its finished value. Comments name graph nodes (n<id>); they are not
 * part of the structural key (the key is taken from cg_strip_comments).
 */
#include "codegen/emit.h"

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

/* ---- the emitter's lines ------------------------------------------------------------------ */

/* snprintf for expression pieces: a piece that does not fit (never expected:
 * pieces are variable names in short wrappers) becomes a line that stops
 * the compile, never silently wrong code. */
void cg_fmt(char *out, size_t cap, const char *f, ...) {
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

static void vline(cg_emitter *e, const char *fmt, va_list ap) {
    cg_printf(e->t, "%*s", 4 * e->depth, "");
    text_vappend(e->t, fmt, ap);
    cg_printf(e->t, "\n");
}

void cg_line(cg_emitter *e, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vline(e, fmt, ap);
    va_end(ap);
}

/* A line opening a block (it ends in "{"); what follows is indented until
 * close_block. */
void cg_open_block(cg_emitter *e, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vline(e, fmt, ap);
    va_end(ap);
    e->depth++;
}

void cg_close_block(cg_emitter *e) {
    e->depth--;
    cg_line(e, "}");
}

const char *cg_vtype(const cg_emitter *e, lf_dtype t) { return e->d->value_type[t]; }

/* Bool or integer dtype t's C storage type (graph/dtypes.def's c_type:
 * "int32_t"), or with `unsigned_twin` the unsigned type of t's width, in
 * which signed arithmetic wraps ("uint32_t"; bool's is uint64_t: no
 * wrapping operator reaches bool). */
static const char *int_type(lf_dtype t, bool unsigned_twin) {
    static const char *const c_type[LF_NDTYPES] = {
#define LF_DTYPE(ID, name, size, kind, rank, digits, maxexp, c_type_, ...) [LF_##ID] = c_type_,
#include "graph/dtypes.def"
    };
    if (!unsigned_twin) return c_type[t];
    switch (lf_dtype_size(t)) {
    case 1:
    case 2: return "uint32_t"; /* not uint8_t / uint16_t: those promote to int, whose * may overflow */
    case 4: return "uint32_t";
    default: return "uint64_t";
    }
}

/* Whether t is stored as 16 bits and computed in float (f16, bf16): loads
 * go through lf_ld_<name>, stores through lf_st_<name>, and each result is
 * rounded with lf_rnd_<name> (the prelude's helpers). */
static bool is_half(lf_dtype t) { return t == LF_F16 || t == LF_BF16; }

static bool is_unsigned(lf_dtype t) { return (unsigned)t < LF_NDTYPES && graph_dtypes[t].kind == DTYPE_UINT; }

/* Wraps out (a load of a buffer element) in the conversion of half dtype t
 * from its stored bits; other dtypes load as they are. */
static void load_bits(lf_dtype t, char *out, size_t cap) {
    if (!is_half(t)) return;
    expr_buf raw;
    cg_fmt(raw, sizeof raw, "%s", out);
    cg_fmt(out, cap, "lf_ld_%s(%s)", lf_dtype_name(t), raw);
}

/* Float dtype t's C value type (graph/dtypes.def's c_value: "float"), the
 * type a conversion to t casts to (the CUDA column spells the same types). */
static const char *const c_value_type[LF_NDTYPES] = {
#define LF_DTYPE(ID, name, size, kind, rank, digits, maxexp, c_type, c_value, ...) [LF_##ID] = c_value,
#include "graph/dtypes.def"
};

/* Converts C expression x of dtype `from` to dtype `to`, as
 * graph_scalar_convert does (x is already a value of from's value type). */
static void convert(char *out, size_t cap, const char *x, lf_dtype from, lf_dtype to) {
    if (from == to) {
        cg_fmt(out, cap, "%s", x);
        return;
    }
    if (graph_dtype_is_complex(to)) { /* (x, 0), or the parts converted (graph_scalar_convert) */
        lf_dtype p = graph_dtype_part(to);
        expr_buf re, im;
        if (graph_dtype_is_complex(from)) {
            cg_fmt(out, cap, "lf_mk_%s((%s)(%s).re, (%s)(%s).im)", lf_dtype_name(to), c_value_type[p], x,
                   c_value_type[p], x);
            return;
        }
        convert(re, sizeof re, x, from, p);
        cg_fmt(im, sizeof im, "%s", p == LF_F32 ? "0.0f" : "0.0");
        cg_fmt(out, cap, "lf_mk_%s(%s, %s)", lf_dtype_name(to), re, im);
        return;
    }
    if (graph_dtype_is_complex(from)) { /* the real part; bool: either part nonzero */
        if (to == LF_BOOL) {
            cg_fmt(out, cap, "((%s).re != 0 || (%s).im != 0)", x, x);
            return;
        }
        expr_buf re;
        cg_fmt(re, sizeof re, "(%s).re", x);
        convert(out, cap, re, graph_dtype_part(from), to);
        return;
    }
    bool ff = graph_dtype_is_float(from);
    switch (graph_dtypes[to].kind) {
    case DTYPE_FLOAT:
        if (!is_half(to)) cg_fmt(out, cap, "(%s)(%s)", c_value_type[to], x);
        else if (from == LF_F32 || is_half(from)) cg_fmt(out, cap, "lf_rnd_%s((float)(%s))", lf_dtype_name(to), x);
        else cg_fmt(out, cap, "lf_d2%s((double)(%s))", lf_dtype_name(to), x); /* f64, integers: one rounding from double */
        return;
    case DTYPE_BOOL: cg_fmt(out, cap, "((%s) != 0)", x); return;
    default: /* an integer: saturating from a float (lf_f2i32), wrapping from an integer */
        if (ff) cg_fmt(out, cap, "lf_f2%s((double)(%s))", lf_dtype_name(to), x);
        else if (lf_dtype_size(to) == 8) cg_fmt(out, cap, "(%s)(%s)", int_type(to, false), x);
        else cg_fmt(out, cap, "(%s)(%s)(%s)", int_type(to, false), int_type(to, true), x);
        return;
    }
}

/* The C expression of op applied in compute dtype ct to operands x[]. */
static void op_expr(char *out, size_t cap, lf_op op, lf_dtype ct, char x[3][sizeof(expr_buf)]) {
    const op_info *oi = &graph_ops[op];
    if (graph_dtype_is_complex(ct) && op != LF_OP_WHERE) { /* graph/complex.h's functions (the prelude's) */
        const char *tag = lf_dtype_name(ct), *fname = NULL;
        switch (op) {
        case LF_OP_ADD: fname = "add"; break;
        case LF_OP_SUB: fname = "sub"; break;
        case LF_OP_MUL: fname = "mul"; break;
        case LF_OP_DIV: fname = "div"; break;
        case LF_OP_POW: fname = "pow"; break;
        case LF_OP_EQ: fname = "eq"; break;
        case LF_OP_NE: fname = "ne"; break;
        case LF_OP_NEG: fname = "neg"; break;
        case LF_OP_CONJ: fname = "conj"; break;
        case LF_OP_ABS: fname = "abs"; break;
        case LF_OP_ANGLE: fname = "arg"; break;
        case LF_OP_SQRT: fname = "sqrt"; break;
        case LF_OP_EXP: fname = "exp"; break;
        case LF_OP_LOG: fname = "log"; break;
        case LF_OP_REAL: cg_fmt(out, cap, "(%s).re", x[0]); return;
        case LF_OP_IMAG: cg_fmt(out, cap, "(%s).im", x[0]); return;
        default: cg_fmt(out, cap, "\n#error lazyfuse: %s of complex\n", oi->text); return; /* refused when built */
        }
        if (oi->arity == 2) cg_fmt(out, cap, "lf_%s_%s(%s, %s)", fname, tag, x[0], x[1]);
        else cg_fmt(out, cap, "lf_%s_%s(%s)", fname, tag, x[0]);
        return;
    }
    if (is_half(ct)) { /* f16, bf16: f32's operator, its result rounded (graph/scalar.c) */
        expr_buf f;
        op_expr(f, sizeof f, op, LF_F32, x);
        bool rounds = oi->typing != OPTY_CMP && oi->typing != OPTY_LOGIC && oi->typing != OPTY_PRED &&
                      oi->typing != OPTY_SELECT;
        if (rounds) cg_fmt(out, cap, "lf_rnd_%s(%s)", lf_dtype_name(ct), f);
        else cg_fmt(out, cap, "%s", f);
        return;
    }
    switch (oi->typing) {
    case OPTY_CMP: cg_fmt(out, cap, "((%s) %s (%s))", x[0], oi->text, x[1]); return;
    case OPTY_LOGIC:
        if (op == LF_OP_NOT) cg_fmt(out, cap, "(!(%s))", x[0]);
        else cg_fmt(out, cap, "((%s) %s (%s))", x[0], op == LF_OP_AND ? "&&" : "||", x[1]);
        return;
    case OPTY_PRED:
        if (op == LF_OP_SIGNBIT && graph_dtype_is_float(ct)) /* copysign reads a NaN's sign bit too */
            cg_fmt(out, cap, ct == LF_F32 ? "(copysignf(1.0f, %s) < 0.0f)" : "(copysign(1.0, %s) < 0.0)", x[0]);
        else if (op == LF_OP_SIGNBIT && graph_dtype_is_int(ct) && !is_unsigned(ct))
            cg_fmt(out, cap, "((%s) < 0)", x[0]);
        else if (!graph_dtype_is_float(ct)) cg_fmt(out, cap, "0");
        else if (op == LF_OP_ISNAN) cg_fmt(out, cap, "((%s) != (%s))", x[0], x[0]);
        else cg_fmt(out, cap, "lf_isinf_%s(%s)", lf_dtype_name(ct), x[0]);
        return;
    case OPTY_SELECT: cg_fmt(out, cap, "((%s) ? (%s) : (%s))", x[0], x[1], x[2]); return;
    default: break;
    }
    if (graph_dtype_is_float(ct)) {
        bool f = ct == LF_F32;
        const char *sx = f ? "f" : "", *tag = lf_dtype_name(ct), *one = f ? "1.0f" : "1.0";
        switch (op) {
        case LF_OP_ADD: cg_fmt(out, cap, "((%s) + (%s))", x[0], x[1]); return;
        case LF_OP_SUB: cg_fmt(out, cap, "((%s) - (%s))", x[0], x[1]); return;
        case LF_OP_MUL: cg_fmt(out, cap, "((%s) * (%s))", x[0], x[1]); return;
        case LF_OP_DIV: cg_fmt(out, cap, "((%s) / (%s))", x[0], x[1]); return;
        case LF_OP_MOD: cg_fmt(out, cap, "lf_pymod_%s(%s, %s)", tag, x[0], x[1]); return;
        case LF_OP_FLOORDIV: cg_fmt(out, cap, "lf_floordiv_%s(%s, %s)", tag, x[0], x[1]); return;
        case LF_OP_POW: cg_fmt(out, cap, "lf_pow_%s(%s, %s)", tag, x[0], x[1]); return;
        case LF_OP_ATAN2: cg_fmt(out, cap, "lf_atan2_%s(%s, %s)", tag, x[0], x[1]); return;
        case LF_OP_MIN: cg_fmt(out, cap, "lf_fmin_%s(%s, %s)", tag, x[0], x[1]); return;
        case LF_OP_MAX: cg_fmt(out, cap, "lf_fmax_%s(%s, %s)", tag, x[0], x[1]); return;
        case LF_OP_NEG: cg_fmt(out, cap, "(-(%s))", x[0]); return;
        case LF_OP_REAL:
        case LF_OP_CONJ: cg_fmt(out, cap, "(%s)", x[0]); return;
        case LF_OP_IMAG: cg_fmt(out, cap, "(%s)0", c_value_type[ct]); return;
        case LF_OP_ANGLE: /* atan2(+0, x) without a libm call (graph/scalar.c's real_part_op) */
            cg_fmt(out, cap, "((%s) != (%s) ? (%s) : signbit(%s) ? %s : %s)", x[0], x[0], x[0], x[0],
                   f ? "0x1.921fb6p+1f" : "0x1.921fb54442d18p+1", f ? "0.0f" : "0.0");
            return;
        case LF_OP_SIGN: cg_fmt(out, cap, "lf_sign_%s(%s)", tag, x[0]); return;
        case LF_OP_ROUND: cg_fmt(out, cap, "nearbyint%s(%s)", sx, x[0]); return;
        case LF_OP_RSQRT: cg_fmt(out, cap, "(%s / sqrt%s(%s))", one, sx, x[0]); return;
        case LF_OP_SIGMOID:
            cg_fmt(out, cap, "(%s / (%s + exp%s(-(%s))))", one, one, sx, x[0]);
            return;
        default: break;
        }
        if (oi->arity == 1) cg_fmt(out, cap, "%s%s(%s)", oi->cname, sx, x[0]);
        else if (oi->arity == 2) cg_fmt(out, cap, "%s%s(%s, %s)", oi->cname, sx, x[0], x[1]);
        else cg_fmt(out, cap, "%s%s(%s, %s, %s)", oi->cname, sx, x[0], x[1], x[2]);
        return;
    }
    if (ct == LF_BOOL) { /* values are 0 or 1 */
        if (op == LF_OP_MIN) cg_fmt(out, cap, "((%s) && (%s))", x[0], x[1]);
        else if (op == LF_OP_MAX) cg_fmt(out, cap, "((%s) || (%s))", x[0], x[1]);
        else if (op == LF_OP_BITAND) cg_fmt(out, cap, "((%s) & (%s))", x[0], x[1]);
        else if (op == LF_OP_BITOR) cg_fmt(out, cap, "((%s) | (%s))", x[0], x[1]);
        else if (op == LF_OP_BITXOR) cg_fmt(out, cap, "((%s) ^ (%s))", x[0], x[1]);
        else if (op == LF_OP_BITNOT) cg_fmt(out, cap, "(!(%s))", x[0]);
        else cg_fmt(out, cap, "(%s)", x[0]);
        return;
    }
    const char *T = int_type(ct, false), *U = int_type(ct, true);
    if (is_unsigned(ct)) switch (op) { /* graph/scalar.c's uint_op */
        case LF_OP_MOD:
        case LF_OP_FMOD: cg_fmt(out, cap, "(%s)lf_umod(%s, %s)", T, x[0], x[1]); return;
        case LF_OP_FLOORDIV: cg_fmt(out, cap, "(%s)lf_udiv(%s, %s)", T, x[0], x[1]); return;
        case LF_OP_POW: cg_fmt(out, cap, "(%s)lf_upow(%s, %s)", T, x[0], x[1]); return;
        case LF_OP_ABS: cg_fmt(out, cap, "(%s)", x[0]); return;
        case LF_OP_SIGN: cg_fmt(out, cap, "(%s)((%s) != 0)", T, x[0]); return;
        default: break;
        }
    switch (op) {
    case LF_OP_ADD: cg_fmt(out, cap, "(%s)((%s)(%s) + (%s)(%s))", T, U, x[0], U, x[1]); return;
    case LF_OP_SUB: cg_fmt(out, cap, "(%s)((%s)(%s) - (%s)(%s))", T, U, x[0], U, x[1]); return;
    case LF_OP_MUL: cg_fmt(out, cap, "(%s)((%s)(%s) * (%s)(%s))", T, U, x[0], U, x[1]); return;
    case LF_OP_NEG: cg_fmt(out, cap, "(%s)((%s)0 - (%s)(%s))", T, U, U, x[0]); return;
    case LF_OP_MOD: cg_fmt(out, cap, "(%s)lf_imod(%s, %s)", T, x[0], x[1]); return;
    case LF_OP_FMOD: cg_fmt(out, cap, "(%s)lf_ifmod(%s, %s)", T, x[0], x[1]); return;
    case LF_OP_FLOORDIV: cg_fmt(out, cap, "(%s)(%s)lf_ifloordiv(%s, %s)", T, U, x[0], x[1]); return;
    case LF_OP_BITAND: cg_fmt(out, cap, "(%s)((%s) & (%s))", T, x[0], x[1]); return;
    case LF_OP_BITOR: cg_fmt(out, cap, "(%s)((%s) | (%s))", T, x[0], x[1]); return;
    case LF_OP_BITXOR: cg_fmt(out, cap, "(%s)((%s) ^ (%s))", T, x[0], x[1]); return;
    case LF_OP_BITNOT: cg_fmt(out, cap, "(%s)(~(%s))", T, x[0]); return;
    case LF_OP_LSHIFT: cg_fmt(out, cap, "lf_shl_%s(%s, %s)", lf_dtype_name(ct), x[0], x[1]); return;
    case LF_OP_RSHIFT: cg_fmt(out, cap, "lf_shr_%s(%s, %s)", lf_dtype_name(ct), x[0], x[1]); return;
    case LF_OP_POW: cg_fmt(out, cap, "(%s)(%s)lf_ipow(%s, %s)", T, U, x[0], x[1]); return;
    case LF_OP_MIN: cg_fmt(out, cap, "((%s) < (%s) ? (%s) : (%s))", x[1], x[0], x[1], x[0]); return;
    case LF_OP_MAX: cg_fmt(out, cap, "((%s) > (%s) ? (%s) : (%s))", x[1], x[0], x[1], x[0]); return;
    case LF_OP_ABS:
        cg_fmt(out, cap, "((%s) < 0 ? (%s)((%s)0 - (%s)(%s)) : (%s))", x[0], T, U, U, x[0], x[0]);
        return;
    case LF_OP_SIGN: cg_fmt(out, cap, "(%s)(((%s) > 0) - ((%s) < 0))", T, x[0], x[0]); return;
    default: cg_fmt(out, cap, "(%s)", x[0]); return; /* floor, ceil, round, trunc */
    }
}

/* ---- accesses ---------------------------------------------------------------------------- */

/* Which accesses belong to region reg (an fn index; stores: the elementwise
 * body, the epilogue's or the row pass's). */
bool cg_in_region(const cg_emitter *e, const cg_access *a, int reg) {
    if (a->fn >= 0) return a->fn == reg;
    const fuse_kernel *kn = e->kn;
    if (!kn->epi) return reg == 0;
    const fuse_store *so = &kn->stores[a->index];
    if (so->pos) return reg == 0; /* stored in pass 0 at each position */
    return so->row ? reg == kn->npasses + 1 : reg == kn->npasses;
}

static int access_id(const cg_emitter *e, const cg_access *a) { return (int)(a - e->lay->access); }

/* Shifted loads of one buffer (a stencil's taps: slices of one input at
 * other starts) differ only by a constant offset. In C kernels such a load
 * reads at the offset of the first load like it plus that constant, a
 * literal in the text, so the compiler addresses every tap from one base
 * register (base + index + displacement) instead of keeping one offset per
 * tap live in the loop (31 taps spilled them: conv1d_31 ran at 0.83x a
 * hand-written loop). Like a small stride (cg_declare_buffers), the
 * constant is structure: it is in the kernel's text, so a compiled kernel
 * only ever runs loads that differ by it. Loads of one region (fn), one
 * buffer, every loop stride equal, read without a step map, a split or a
 * gather; offsets within 2^20 elements. Returns the base load (a itself
 * when there is none) and the constant in *delta. */
static const cg_access *shift_base(const cg_emitter *e, const cg_access *a, int64_t *delta) {
    *delta = 0;
    if (!e->d->shift_loads || a->fn < 0 || !a->load || a->buf < 0 || a->param_steps >= 0 || a->param_split >= 0 ||
        a->param_gather >= 0)
        return a;
    const cg_layout *lay = e->lay;
    for (const cg_access *b = lay->access; b < a; b++) {
        if (b->fn != a->fn || !b->load || b->buf != a->buf || b->param_steps >= 0 || b->param_split >= 0 ||
            b->param_gather >= 0 || b->inner != a->inner)
            continue;
        bool same = true;
        for (int i = 0; i < lay->ndim && same; i++) same = b->strides[i] == a->strides[i];
        int64_t d = a->offset - b->offset;
        if (!same || d < -(1 << 20) || d > (1 << 20)) continue;
        *delta = d;
        return b;
    }
    return a;
}

/* Element index of access a at innermost index jv (NULL: at the base). */
static void access_index(const cg_emitter *e, const cg_access *a, const char *jv, char *out, size_t cap) {
    int id = access_id(e, a);
    int64_t delta;
    const cg_access *base = shift_base(e, a, &delta);
    char o[64];
    if (base != a) cg_fmt(o, sizeof o, "o%d_%d + %" PRId64, access_id(e, base), e->level, delta);
    else cg_fmt(o, sizeof o, "o%d_%d", id, e->level);
    expr_buf lin;
    if (!jv || a->inner == CG_INNER_INVARIANT) cg_fmt(lin, sizeof lin, "%s", o);
    else if (a->inner == CG_INNER_CONTIGUOUS) cg_fmt(lin, sizeof lin, "%s + %s", o, jv);
    else cg_fmt(lin, sizeof lin, "%s + %s * s%d", o, jv, id);
    if (e->split && a->param_split >= 0 && jv && e->split == 2 && a->split_contiguous)
        cg_fmt(out, cap, "ri%d + %s", id, jv);
    else if (e->split && a->param_split >= 0 && jv && e->split == 2)
        cg_fmt(out, cap, "ri%d + %s * (lf_idx)P[%d]", id, jv, a->param_split + 2);
    else if (e->split && a->param_split >= 0 && jv) cg_fmt(out, cap, "lf_remap_at(&rr%d, %s)", id, jv);
    else if (a->param_steps >= 0) cg_fmt(out, cap, "lf_steps(P + %d, %s)", a->param_steps, lin);
    else cg_fmt(out, cap, "%s", lin);
}

/* The base index of a gather's load or a scatter's store (access a, whose
 * class is forced STRIDED: never hoisted or vectorized) at innermost index
 * jv, and the multiply of the wrapped data index by the stride of the indexed
 * axis (axis_stride, as cg_fill_params passes it) or "" when that is 1. The
 * base needs no multiply when its stride along the loop is 0 or 1 either:
 * indexed loads are latency-bound and indexed stores read-modify-write, and
 * the fewer instructions each element takes, the more of them the core
 * keeps in flight. */
static void indexed_base(const cg_emitter *e, const cg_access *a, const char *jv, int64_t axis_stride, char *base,
                         char *step, size_t cap) {
    int64_t in = a->strides[e->lay->ndim - 1];
    if (a->param_steps >= 0 || !jv || (in != 0 && in != 1)) access_index(e, a, jv, base, cap);
    else if (in == 0) cg_fmt(base, cap, "o%d_%d", access_id(e, a), e->level);
    else cg_fmt(base, cap, "o%d_%d + %s", access_id(e, a), e->level, jv);
    if (axis_stride == 1) step[0] = 0;
    else cg_fmt(step, cap, " * (lf_idx)P[%d]", a->param_gather + 1);
}

/* The value of load access a at innermost index jv, in its value type. */
static void load_value(const cg_emitter *e, const cg_access *a, const char *jv, char *out, size_t cap) {
    expr_buf idx;
    if (e->vec && a->buf >= 0 && a->inner == CG_INNER_CONTIGUOUS) {
        cg_fmt(out, cap, "w%d.x[l]", access_id(e, a));
        load_bits(a->dtype, out, cap);
        return;
    }
    access_index(e, a, jv, idx, sizeof idx);
    if (a->param_gather >= 0) { /* x at the base plus the wrapped index, if in range */
        expr_buf iv, base, step;
        const cg_access *ia = cg_load_access(e->lay, a->fn, a->load->gidx);
        int pg = a->param_gather;
        indexed_base(e, a, jv, a->load->gstride, base, step, sizeof base);
        if (jv && ia->inner == CG_INNER_INVARIANT) { /* checked and wrapped once (cg_hoist_invariants) */
            int id = access_id(e, a);
            cg_fmt(out, cap, "(hg%d ? b%d[%s + hw%d] : (%s)0)", id, a->buf, base, id, e->d->type[a->dtype]);
            load_bits(a->dtype, out, cap);
            return;
        }
        load_value(e, ia, jv, iv, sizeof iv);
        cg_fmt(out, cap, "(lf_gok((int64_t)(%s), P[%d], b%d) ? b%d[%s + (lf_idx)lf_gwrap((int64_t)(%s), P[%d])%s] : (%s)0)",
               iv, pg, e->lay->err_buf, a->buf, base, iv, pg, step, e->d->type[a->dtype]);
        load_bits(a->dtype, out, cap);
        return;
    }
    if (a->buf >= 0) {
        cg_fmt(out, cap, "b%d[%s]", a->buf, idx);
        load_bits(a->dtype, out, cap);
        return;
    }
    expr_buf raw;
    const lf_node *nd = a->load->node;
    if (nd->kind == NODE_RANDOM) { /* Philox of (seed, flat index): graph/random.h */
        bool wide = lf_dtype_size(a->dtype) == 8;
        lf_random_dist dist = nd->u.random.dist;
        if (dist == LF_RANDOM_NORMAL) cg_fmt(raw, sizeof raw, "lf_random_normal(%s, (uint64_t)P[%d])", idx, a->param_iota);
        else
            cg_fmt(raw, sizeof raw, "lf_random_%s(%s, (uint64_t)P[%d], %d)", dist == LF_RANDOM_BITS ? "bits" : "uniform",
                idx, a->param_iota, wide);
        convert(out, cap, raw, dist == LF_RANDOM_BITS ? LF_I64 : LF_F64, a->dtype);
        return;
    }
    if (a->iota_unit && a->dtype == LF_I32) { /* the low 32 bits of the i64 sum below, in 32-bit lanes */
        cg_fmt(out, cap, "(int32_t)((uint32_t)P[%d] + (uint32_t)(%s))", a->param_iota, idx);
        return;
    }
    if (a->iota_unit) /* step 1 (P[param_iota + 1] is 1): lf_iota_int without the multiply */
        cg_fmt(raw, sizeof raw, "(int64_t)((uint64_t)P[%d] + (uint64_t)(%s))", a->param_iota, idx);
    else if (a->iota_exact)
        cg_fmt(raw, sizeof raw, "lf_iota_int(%s, P[%d], P[%d])", idx, a->param_iota, a->param_iota + 1);
    else
        cg_fmt(raw, sizeof raw, "lf_iota_float(%s, P[%d], P[%d])", idx, a->param_iota, a->param_iota + 1);
    convert(out, cap, raw, a->iota_exact ? LF_I64 : LF_F64, a->dtype);
}

/* Hoists the invariant loads of region reg (before an innermost loop), and
 * for a gather whose index is one of them (an embedding lookup: one table row
 * per output row) the index check and the wrapped row offset: hg<a> (in
 * range; the error flag is raised here, as the loop would for each element)
 * and hw<a>, so that the loop is a plain shifted load that vectorizes. */
void cg_hoist_invariants(cg_emitter *e, int reg) {
    for (int i = 0; i < e->lay->naccess; i++) {
        const cg_access *a = &e->lay->access[i];
        if (a->fn < 0 || !cg_in_region(e, a, reg) || a->inner != CG_INNER_INVARIANT) continue;
        expr_buf v;
        load_value(e, a, NULL, v, sizeof v);
        cg_line(e, "%sconst %s h%d = %s; /* n%d */", e->d->value_attr, cg_vtype(e, a->dtype), i, v, a->load->node->id);
    }
    for (int i = 0; i < e->lay->naccess; i++) {
        const cg_access *a = &e->lay->access[i];
        if (a->fn < 0 || a->param_gather < 0 || !cg_in_region(e, a, reg)) continue;
        const cg_access *ia = cg_load_access(e->lay, a->fn, a->load->gidx);
        if (ia->inner != CG_INNER_INVARIANT) continue;
        int pg = a->param_gather, h = access_id(e, ia);
        char step[48] = "";
        if (a->load->gstride != 1) cg_fmt(step, sizeof step, " * (lf_idx)P[%d]", pg + 1);
        cg_line(e, "%sconst int hg%d = lf_gok((int64_t)(h%d), P[%d], b%d);", e->d->value_attr, i, h, pg,
                e->lay->err_buf);
        cg_line(e, "%sconst lf_idx hw%d = hg%d ? (lf_idx)lf_gwrap((int64_t)(h%d), P[%d])%s : 0;", e->d->value_attr, i, i,
                h, pg, step);
    }
}

/* Declares o<a>_0 = offset for every access, then adds the contribution of
 * the flat index `flat` unravelled over loop axes [first, first + n). */
void cg_unravel(cg_emitter *e, const char *flat, int first, int n) {
    const cg_layout *lay = e->lay;
    for (int i = 0; i < lay->naccess; i++)
        cg_line(e, "%slf_idx o%d_0 = (lf_idx)P[%d];", e->d->value_attr, i, lay->access[i].param_offset);
    if (n == 0) return;
    cg_open_block(e, "{");
    cg_line(e, "lf_idx rest = %s, q;", flat);
    for (int ax = first + n - 1; ax >= first; ax--) {
        if (ax > first) {
            cg_line(e, "q = rest %% (lf_idx)P[%d];", lay->param_extent + ax);
            cg_line(e, "rest /= (lf_idx)P[%d];", lay->param_extent + ax);
        } else {
            cg_line(e, "q = rest;");
        }
        for (int i = 0; i < lay->naccess; i++)
            cg_line(e, "o%d_0 += q * (lf_idx)P[%d];", i, lay->access[i].param_offset + 1 + ax);
    }
    cg_close_block(e);
}

/* Opens a loop over loop axis ax (range [lo, hi) or the whole extent) and
 * declares the next level's offsets of region reg (all regions if reg < 0)
 * and position pos<level+1> when track_pos. */
void cg_open_level(cg_emitter *e, int ax, int reg, const char *lo, const char *hi, bool track_pos) {
    const cg_layout *lay = e->lay;
    int L = e->level;
    if (lo) cg_open_block(e, "for (lf_idx r%d = %s; r%d < %s; r%d++) {", L, lo, L, hi, L);
    else cg_open_block(e, "for (lf_idx r%d = 0; r%d < (lf_idx)P[%d]; r%d++) {", L, L, lay->param_extent + ax, L);
    for (int i = 0; i < lay->naccess; i++) {
        const cg_access *a = &lay->access[i];
        if (reg >= 0 && !cg_in_region(e, a, reg)) continue;
        cg_line(e, "%sconst lf_idx o%d_%d = o%d_%d + r%d * (lf_idx)P[%d];", e->d->value_attr, i, L + 1, i, L, L,
             a->param_offset + 1 + ax);
    }
    if (track_pos) cg_line(e, "const int64_t pos%d = pos%d * P[%d] + r%d;", L + 1, L, lay->param_extent + ax, L);
    e->level++;
}

void cg_close_level(cg_emitter *e) {
    e->level--;
    cg_close_block(e);
}

/* ---- fns ------------------------------------------------------------------------------------ */

/* The value of a FUSE_SRC_ACC load of reduction r. */
static void acc_value(const cg_emitter *e, int r, acc_form form, const char *jv, char *out, size_t cap) {
    lf_dtype t = e->kn->reds[r].node->dtype;
    if (form == ACC_SCALAR) cg_fmt(out, cap, "res%d", r);
    else if (form == ACC_ARRAY) cg_fmt(out, cap, "res%d[%s]", r, jv);
    else if (graph_dtype_is_float(t)) cg_fmt(out, cap, "(%s)R[%d].f", cg_vtype(e, t), r);
    else cg_fmt(out, cap, "(%s)R[%d].i", cg_vtype(e, t), r);
}

/* The value of the kernel's scalar j (a constant node of dtype t) as an
 * expression of value type: read from P, never printed as a literal, so the
 * source is the same for every value (cg_fill_scalars). */
static void scalar_value(const cg_emitter *e, int j, lf_dtype t, char *out, size_t cap) {
    int at = e->lay->param_scalar + j;
    if (graph_dtype_is_complex(t)) { /* the constant's value is real (lf_const): (value, 0) */
        expr_buf d;
        if (e->scalars_local) cg_fmt(d, sizeof d, "lf_sc%d", j);
        else cg_fmt(d, sizeof d, "lf_bits_f64(P[%d])", at);
        convert(out, cap, d, LF_F64, t);
        return;
    }
    if (e->scalars_local) cg_fmt(out, cap, "(%s)lf_sc%d", cg_vtype(e, t), j);
    else if (graph_dtype_is_float(t)) cg_fmt(out, cap, "(%s)lf_bits_f64(P[%d])", cg_vtype(e, t), at);
    else cg_fmt(out, cap, "(%s)P[%d]", cg_vtype(e, t), at);
}

/* A constant read as a float exponent (x, an EXPR_SCALAR operand of a
 * float **) whose value has a cost class (graph_pow_exponent_class: 0.5, 2,
 * 1, 0, -1) is printed as that literal in the ** call,
 * so that the compiler drops lf_pow_*'s call to pow (a vector pow for every
 * element otherwise: 14x slower for ** 0.5). Only for constants marked
 * pow_exponent: lf_scalar_set replans those when their class changes, so a
 * kernel never runs with a literal that is not the constant's value. */
static bool exponent_literal(const fn_expr *x, char *out, size_t cap) {
    if (x->kind != EXPR_SCALAR) return false;
    const lf_node *c = x->node;
    if (!c->pow_exponent || !graph_pow_exponent_class(c->u.value, c->dtype)) return false;
    double y = graph_dtype_is_float(c->dtype) ? c->u.value.f : c->dtype == LF_BOOL ? (double)(c->u.value.i != 0)
                                                                                  : (double)c->u.value.i;
    /* -0 prints as 0: pow(x, -0) is pow(x, 0), and the class is one kernel.
       Only the exponent operand is the literal: other reads of the constant
       (x * k) read its value from P, -0 included. */
    cg_fmt(out, cap, "%a", y + 0.0);
    return true;
}

/* The literal of an EXPR_CONST expression (exact: hex floats, NAN and
 * INFINITY with their sign, 64-bit integers). */
static void const_literal(const fn_expr *x, char *out, size_t cap) {
    if (x->is_int) cg_fmt(out, cap, "INT64_C(%" PRId64 ")", x->value.i);
    else if (isnan(x->value.f)) cg_fmt(out, cap, "%sNAN", signbit(x->value.f) ? "-" : "");
    else if (isinf(x->value.f)) cg_fmt(out, cap, "%sINFINITY", x->value.f < 0 ? "-" : "");
    else cg_fmt(out, cap, "%a", x->value.f);
}

/* ---- compares true over a row's interior ---------------------------------------------
 * In the interior [jl, jh) of a split row (emit_c.c, lf_pad and lf_concat
 * reads), a compare of the position with a constant (a padded border's
 * mask: iota >= before && iota < before + n) is usually true throughout:
 * the row checks that once, and the interior loop then reads 1 for it, so
 * the loop is the shifted loads alone. Which compares: <, <=, >, >= in fn 0
 * between an integer iota of step 1 read contiguously along the row (its
 * value rises by one per element) and a constant or run-time scalar. The
 * row checks that the compare holds at both ends of the interior and that
 * the iota does not wrap between them (it rises, over fewer than 2^31
 * elements); a monotone compare true at both ends is true in between.
 * Where a check fails the row has no interior (jh = jl) and the border
 * loop, which computes everything, runs the whole row. (A compare known
 * only to be constant, read from a per-row variable, is worse: GCC
 * unswitches the loop on it, and the versions past its limit of three do
 * not vectorize.) */

/* Whether expression i of fn f qualifies; *pos gets its iota operand. */
static bool row_true_compare(const cg_emitter *e, int f, int i, int *pos) {
    const fuse_kernel *kn = e->kn;
    if (f != 0 || kn->npasses < 1) return false;
    const lf_fn *fn = kn->passes[0].fn;
    const fn_expr *x = &fn->exprs[i];
    if (x->kind != EXPR_OP || (x->op != LF_OP_LT && x->op != LF_OP_LE && x->op != LF_OP_GT && x->op != LF_OP_GE))
        return false;
    int nl;
    const fuse_load *ls = fuse_kernel_fn_loads(kn, 0, &nl, NULL);
    int iota = -1;
    for (int k = 0; k < 2; k++) {
        const fn_expr *a = &fn->exprs[x->arg[k]];
        if (a->kind == EXPR_CONST || a->kind == EXPR_SCALAR) continue;
        if (a->kind != EXPR_PARAM || iota >= 0 || ls[a->param].src != FUSE_SRC_IOTA) return false;
        const cg_access *ac = cg_load_access(e->lay, 0, a->param);
        if (ac->load->node->kind != NODE_IOTA || !ac->iota_unit || ac->inner != CG_INNER_CONTIGUOUS ||
            ac->param_split >= 0 || ac->param_gather >= 0 || ac->param_steps >= 0)
            return false;
        iota = k;
    }
    *pos = iota;
    return iota >= 0;
}

/* Compare i of fn 0 at innermost index jv into out, and its iota operand's
 * value into val. */
static void compare_at(const cg_emitter *e, int i, int pos, const char *jv, char *out, char *val, size_t cap) {
    const fuse_kernel *kn = e->kn;
    const fn_expr *x = &kn->passes[0].fn->exprs[i];
    const lf_dtype *et = kn->passes[0].etype, *ct = kn->passes[0].ctype;
    char args[3][sizeof(expr_buf)];
    for (int k = 0; k < 2; k++) {
        const fn_expr *a = &kn->passes[0].fn->exprs[x->arg[k]];
        expr_buf raw;
        if (a->kind == EXPR_PARAM) load_value(e, cg_load_access(e->lay, 0, a->param), jv, raw, sizeof raw);
        else if (a->kind == EXPR_SCALAR) scalar_value(e, a->param, a->cast_to, raw, sizeof raw);
        else const_literal(a, raw, sizeof raw);
        if (k == pos) cg_fmt(val, cap, "%s", raw);
        convert(args[k], sizeof args[k], raw, et[x->arg[k]], ct[i]);
    }
    op_expr(out, cap, x->op, ct[i], args);
}

void cg_declare_row_true_compares(cg_emitter *e) {
    const fuse_kernel *kn = e->kn;
    if (kn->npasses < 1) return;
    int saved = e->split;
    e->split = 0; /* the iota is not a split read: its plain value */
    for (int i = 0; i < kn->passes[0].fn->nexprs; i++) {
        int pos;
        if (!row_true_compare(e, 0, i, &pos)) continue;
        expr_buf lo, hi, vlo, vhi;
        compare_at(e, i, pos, "jl", lo, vlo, sizeof lo);
        compare_at(e, i, pos, "(jh - 1)", hi, vhi, sizeof hi);
        cg_line(e, "if (jl < jh && (jh - jl > INT32_MAX || (%s) > (%s) || !%s || !%s)) jh = jl; /* expression %d */",
                vlo, vhi, lo, hi, i);
    }
    e->split = saved;
}

/* Emits fn f (region f of the kernel) at innermost index jv, its
 * expressions named <prefix>v<i>. */
static void emit_fn(cg_emitter *e, int f, const char *jv, acc_form form, const char *prefix) {
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
        int kept = -1; /* the row pass reads this value back (what computes it is left dead) */
        for (int t = 0; e->keep && f == kn->npasses + 1 && t < kn->nkeeps; t++)
            if (kn->keeps[t].row_expr == i) kept = t;
        if (kept >= 0) {
            cg_line(e, "%sconst %s %sv%d = lf_keep%d[%s]; /* n%d, kept */", e->d->value_attr, cg_vtype(e, et[i]),
                    prefix, i, kept, jv, kn->keeps[kept].node->id);
            continue;
        }
        switch (x->kind) {
        case EXPR_PARAM: {
            const fuse_load *ld = &ls[x->param];
            if (ld->src == FUSE_SRC_ACC) {
                acc_value(e, ld->red, form, jv, v, sizeof v);
            } else {
                const cg_access *a = cg_load_access(e->lay, f, x->param);
                if (a->inner == CG_INNER_INVARIANT && jv) cg_fmt(v, sizeof v, "h%d", access_id(e, a));
                else load_value(e, a, jv, v, sizeof v);
            }
            cg_fmt(notebuf, sizeof notebuf, " /* n%d */", ld->node->id);
            note = notebuf;
            break;
        }
        case EXPR_CONST:
            const_literal(x, v, sizeof v);
            break;
        case EXPR_SCALAR:
            scalar_value(e, x->param, x->cast_to, v, sizeof v);
            cg_fmt(notebuf, sizeof notebuf, " /* n%d */", x->node->id);
            note = notebuf;
            break;
        case EXPR_CAST: {
            expr_buf a;
            cg_fmt(a, sizeof a, "%sv%d", prefix, x->arg[0]);
            convert(v, sizeof v, a, et[x->arg[0]], x->cast_to);
            break;
        }
        case EXPR_CALL: { /* a user function (cg_emit_ufn_defs prints it) */
            const graph_ufn *u = x->call;
            char args[GRAPH_UFN_MAX_PARAMS][sizeof(expr_buf)] = {"", "", ""};
            for (int k = 0; k < u->nparams; k++) {
                expr_buf a;
                cg_fmt(a, sizeof a, "%sv%d", prefix, x->arg[k]);
                convert(args[k], sizeof args[k], a, et[x->arg[k]], u->params[k]);
            }
            expr_buf callee; /* a library function: through its address, a kernel parameter */
            int at = u->fp ? cg_ufn_param(e->lay, u) : -1;
            if (!u->fp) {
                cg_fmt(callee, sizeof callee, "%s", u->name);
            } else {
                char types[200] = "";
                for (int k = 0; k < u->nparams; k++)
                    snprintf(types + strlen(types), sizeof types - strlen(types), "%s%s", k ? ", " : "", cg_vtype(e, u->params[k]));
                cg_fmt(callee, sizeof callee, "((%s (*)(%s))(intptr_t)P[%d])", cg_vtype(e, u->ret), u->nparams ? types : "void", at);
            }
            cg_fmt(v, sizeof v, "%s%s(%s%s%s%s%s)%s", u->ret == LF_BOOL ? "(" : "", callee, args[0],
                   u->nparams > 1 ? ", " : "", args[1], u->nparams > 2 ? ", " : "", args[2],
                   u->ret == LF_BOOL ? " != 0)" : "");
            cg_fmt(notebuf, sizeof notebuf, " /* user function */");
            note = notebuf;
            break;
        }
        case EXPR_OP: {
            const op_info *oi = &graph_ops[x->op];
            int pos;
            if (e->split == 2 && row_true_compare(e, f, i, &pos)) { /* checked per row */
                cg_fmt(v, sizeof v, "1");
                cg_fmt(notebuf, sizeof notebuf, " /* %s, true in the interior */", oi->text);
                note = notebuf;
                break;
            }
            char args[3][sizeof(expr_buf)];
            for (int k = 0; k < oi->arity; k++) {
                expr_buf a;
                cg_fmt(a, sizeof a, "%sv%d", prefix, x->arg[k]);
                lf_dtype to = (oi->typing == OPTY_SELECT && k == 0) ? LF_BOOL : ct[i];
                if (k == 1 && x->op == LF_OP_POW && graph_dtype_is_float(ct[i]) &&
                    exponent_literal(&fn->exprs[x->arg[1]], a, sizeof a))
                    cg_fmt(args[k], sizeof args[k], "(%s)%s", cg_vtype(e, ct[i]), a);
                else
                    convert(args[k], sizeof args[k], a, et[x->arg[k]], to);
            }
            op_expr(v, sizeof v, x->op, ct[i], args);
            cg_fmt(notebuf, sizeof notebuf, " /* %s */", oi->text);
            note = notebuf;
            break;
        }
        }
        cg_line(e, "%sconst %s %sv%d = %s;%s", e->d->value_attr, cg_vtype(e, et[i]), prefix, i, v, note);
        for (int t = 0; e->keep && f < kn->npasses && t < kn->nkeeps; t++)
            if (kn->keeps[t].pass == f && kn->keeps[t].pass_expr == i)
                cg_line(e, "lf_keep%d[%s] = %sv%d; /* kept for the row pass */", t, jv, prefix, i);
    }
}

/* The expression dtype of expression i of fn f. */
static lf_dtype fn_etype(const fuse_kernel *kn, int f, int i) {
    if (f < kn->npasses) return kn->passes[f].etype[i];
    if (f == kn->npasses) return kn->epi_etype[i];
    return kn->row_etype[i];
}

static void cg_emit_sort_store(cg_emitter *e, const cg_access *a, const char *idx, const char *x, lf_dtype from);
static void cg_emit_scatter_fold(cg_emitter *e, const char *q, const char *val);

/* Stores of region reg at innermost index jv (NULL: at the base). */
static void emit_stores(cg_emitter *e, int reg, const char *jv, const char *prefix) {
    const cg_layout *lay = e->lay;
    const fuse_kernel *kn = e->kn;
    for (int i = 0; i < lay->naccess; i++) {
        const cg_access *a = &lay->access[i];
        if (a->fn >= 0 || !cg_in_region(e, a, reg)) continue;
        const fuse_store *so = &kn->stores[a->index];
        expr_buf idx, val, x;
        access_index(e, a, jv, idx, sizeof idx);
        cg_fmt(x, sizeof x, "%sv%d", prefix, so->expr);
        lf_dtype from = fn_etype(kn, reg, so->expr);
        if (kn->kind == FUSE_KERNEL_SORT) {
            cg_emit_sort_store(e, a, idx, x, from);
            continue;
        }
        if (kn->kind == FUSE_KERNEL_SCATTER) { /* combined into the block's partial at the target */
            int pg = a->param_gather;
            graph_scatter_geom gm;
            graph_scatter_geom_of(kn->scatter, &gm);
            expr_buf base, step;
            indexed_base(e, a, jv, gm.dst_axis_stride, base, step, sizeof base);
            cg_open_block(e, "{ /* scatter n%d */", kn->scatter->id);
            cg_line(e, "const int64_t lf_t = (int64_t)(%sv%d);", prefix, kn->scat_idx_expr);
            if (kn->scatter->u.scatter.nonneg) /* bincount: a negative index is out of range */
                cg_open_block(e, "if (lf_gok(lf_t, lf_t < 0 ? INT64_C(0) : P[%d], b%d)) {", pg, lay->err_buf);
            else cg_open_block(e, "if (lf_gok(lf_t, P[%d], b%d)) {", pg, lay->err_buf);
            cg_line(e, "const lf_idx lf_at = %s + (lf_idx)lf_gwrap(lf_t, P[%d])%s;", base, pg, step);
            convert(val, sizeof val, x, from, a->dtype);
            cg_emit_scatter_fold(e, "sp[lf_at]", val);
            cg_close_block(e);
            cg_close_block(e);
            continue;
        }
        if (a->dtype == LF_BOOL) cg_fmt(val, sizeof val, "(uint8_t)((%s) != 0)", x);
        else if (is_half(a->dtype)) { /* the value rounded, then its bits */
            expr_buf r;
            convert(r, sizeof r, x, from, a->dtype);
            cg_fmt(val, sizeof val, "lf_st_%s(%s)", lf_dtype_name(a->dtype), r);
        } else convert(val, sizeof val, x, from, a->dtype);
        if (e->vec) cg_line(e, "w%d.x[l] = %s; /* -> n%d */", i, val, e->s->slots[so->slot].node->id);
        else if (e->stream && cg_access_streams(lay, a))
            cg_line(e, "lf_w%d[%s - jt] = %s; /* -> n%d, through lf_w%d */", i, jv, val, e->s->slots[so->slot].node->id,
                    i);
        else cg_line(e, "b%d[%s] = %s; /* -> n%d */", a->buf, idx, val, e->s->slots[so->slot].node->id);
    }
}

void cg_declare_stream_tiles(cg_emitter *e) {
    const cg_layout *lay = e->lay;
    for (int i = 0; i < lay->naccess; i++)
        if (cg_access_streams(lay, &lay->access[i]))
            cg_line(e, "%s lf_s%d[%d]; /* tile of b%d */", e->d->type[lay->access[i].dtype], i, CG_STREAM_TILE,
                    lay->access[i].buf);
}

void cg_emit_stream_targets(cg_emitter *e, const char *from) {
    const cg_layout *lay = e->lay;
    for (int i = 0; i < lay->naccess; i++) {
        const cg_access *a = &lay->access[i];
        if (!cg_access_streams(lay, a)) continue;
        expr_buf idx;
        access_index(e, a, from, idx, sizeof idx);
        cg_line(e, "%s *restrict lf_w%d = lf_nt ? lf_s%d : &b%d[%s];", e->d->type[a->dtype], i, i, a->buf, idx);
    }
}

void cg_emit_stream_flush(cg_emitter *e, const char *from, const char *count) {
    const cg_layout *lay = e->lay;
    for (int i = 0; i < lay->naccess; i++) {
        const cg_access *a = &lay->access[i];
        if (!cg_access_streams(lay, a)) continue;
        expr_buf idx;
        access_index(e, a, from, idx, sizeof idx);
        cg_line(e, "lf_stream(&b%d[%s], lf_s%d, (%s) * (int64_t)sizeof lf_s%d[0]);", a->buf, idx, i, count, i);
    }
}

/* ---- sort kernels ---- */

void cg_emit_sort_key_defs(cg_emitter *e) {
    cg_printf(e->t, "#ifndef LF_SORT_KEYS\n#define LF_SORT_KEYS\n"
                    "/* sort keys: unsigned integers in the order of lazyfuse.h (graph_sort_key):\n"
                    "   -0.0 as +0.0, every NaN the largest (the canonical NaN's own key, above\n"
                    "   +inf's, so a key decodes to +0.0 or that NaN), integers with the sign bit\n"
                    "   flipped */\n"
                    "LF_INLINE uint32_t lf_skey_f32(float v) {\n"
                    "    union { float f; uint32_t u; } c = {v};\n"
                    "    uint32_t u = v == 0.0f ? 0u : c.u;\n"
                    "    u = (u >> 31) ? ~u : (u | 0x80000000u);\n"
                    "    return v != v ? %#xu : u;\n"
                    "}\n"
                    "LF_INLINE uint64_t lf_skey_f64(double v) {\n"
                    "    union { double f; uint64_t u; } c = {v};\n"
                    "    uint64_t u = v == 0.0 ? 0u : c.u;\n"
                    "    u = (u >> 63) ? ~u : (u | 0x8000000000000000ull);\n"
                    "    return v != v ? %#llxull : u;\n"
                    "}\n"
                    "/* a value its key does not give back: -0.0, or a NaN other than the\n"
                    "   canonical one (0x7fc00000, 0x7ff8000000000000) */\n"
                    "LF_INLINE int lf_sodd_f32(float v) {\n"
                    "    union { float f; uint32_t u; } c = {v};\n"
                    "    return (c.u == 0x80000000u) | ((v != v) & (c.u != 0x7fc00000u));\n"
                    "}\n"
                    "LF_INLINE int lf_sodd_f64(double v) {\n"
                    "    union { double f; uint64_t u; } c = {v};\n"
                    "    return (c.u == 0x8000000000000000ull) | ((v != v) & (c.u != 0x7ff8000000000000ull));\n"
                    "}\n"
                    "#endif\n",
              GRAPH_SORT_NAN_KEY32, (unsigned long long)GRAPH_SORT_NAN_KEY64);
}

/* The key (or, with e->sort_raw, the value) of store 0's expression,
 * written at the loop position relative to `base` into the work array
 * lf_w; the other stores are not written (the backend does). The CUDA
 * dialect writes the key to lf_K[position] and, when the kernel has a
 * values node, the value itself to lf_V[position] (emit_cuda.c). */
static void cg_emit_sort_store(cg_emitter *e, const cg_access *a, const char *idx, const char *x, lf_dtype from) {
    if (a->index != 0) return; /* one value per position: the backend writes the slots */
    const lf_node *sn = e->kn->sort;
    bool desc = sn->u.sort.descending, wide = graph_sort_key_wide(from);
    const char *flip = desc ? (wide ? " ^ 0xffffffffffffffffull" : " ^ 0xffffffffu") : "";
    expr_buf key;
    switch (graph_dtypes[from].sort_key) { /* graph_sort_key's mapping, as text */
    case SORT_KEY_FLOAT: cg_fmt(key, sizeof key, "lf_skey_%s(%s)", lf_dtype_name(from), x); break;
    case SORT_KEY_SIGNED:
        if (wide) cg_fmt(key, sizeof key, "((uint64_t)(%s) ^ 0x8000000000000000ull)", x);
        else cg_fmt(key, sizeof key, "((uint32_t)(%s) ^ 0x80000000u)", x);
        break;
    case SORT_KEY_BOOL:
    default: cg_fmt(key, sizeof key, "(uint32_t)((%s) != 0)", x); break;
    }
    char keyed[sizeof key + 32];
    cg_fmt(keyed, sizeof keyed, "%s%s", key, flip);
    e->d->sort_store(e, idx, keyed, x, from);
}

/* ---- scatter kernels ---- */

/* The value held in partial expression q (an lf_partial) in dtype t. */
static void part_value(const cg_emitter *e, lf_dtype t, const char *q, char *out, size_t cap) {
    cg_fmt(out, cap, "((%s)%s.v.%s)", cg_vtype(e, t), q, graph_dtype_is_float(t) ? "f" : "i");
}

/* a (+) b in dtype t for scatter op op (graph_scatter_combine's meaning). */
static void scatter_combine(const cg_emitter *e, lf_scatter_op op, lf_dtype t, const char *a, const char *b, char *out,
                            size_t cap) {
    if (graph_dtype_is_float(t)) {
        const char *tag = lf_dtype_name(t);
        switch (op) {
        case LF_SCATTER_ADD: cg_fmt(out, cap, "((%s) + (%s))", a, b); return;
        case LF_SCATTER_PROD: cg_fmt(out, cap, "((%s) * (%s))", a, b); return;
        case LF_SCATTER_MIN: cg_fmt(out, cap, "lf_scmin_%s(%s, %s)", tag, a, b); return;
        case LF_SCATTER_MAX: cg_fmt(out, cap, "lf_scmax_%s(%s, %s)", tag, a, b); return;
        default: cg_fmt(out, cap, "(%s)", b); return;
        }
    }
    const char *T = int_type(t, false), *U = int_type(t, true);
    switch (op) {
    case LF_SCATTER_ADD: cg_fmt(out, cap, "(%s)((%s)(%s) + (%s)(%s))", T, U, a, U, b); return;
    case LF_SCATTER_PROD: cg_fmt(out, cap, "(%s)((%s)(%s) * (%s)(%s))", T, U, a, U, b); return;
    case LF_SCATTER_MIN: cg_fmt(out, cap, "((%s) < (%s) ? (%s) : (%s))", b, a, b, a); return;
    case LF_SCATTER_MAX: cg_fmt(out, cap, "((%s) > (%s) ? (%s) : (%s))", b, a, b, a); return;
    default: cg_fmt(out, cap, "(%s)", b); return;
    }
    (void)e;
}

/* Folds value val (dst's dtype) into partial lvalue q (an lf_partial). */
static void cg_emit_scatter_fold(cg_emitter *e, const char *q, const char *val) {
    const lf_node *n = e->kn->scatter;
    lf_dtype t = n->dtype;
    const char *f = graph_dtype_is_float(t) ? "f" : "i";
    if (n->u.scatter.op == LF_SCATTER_SET) {
        cg_line(e, "%s.v.%s = %s;", q, f, val);
        cg_line(e, "%s.arg = 1;", q);
        return;
    }
    expr_buf cur, r;
    part_value(e, t, q, cur, sizeof cur);
    scatter_combine(e, n->u.scatter.op, t, cur, val, r, sizeof r);
    cg_line(e, "%s.v.%s = %s;", q, f, r);
}

void cg_emit_scatter_init(cg_emitter *e, const char *q) {
    const lf_node *n = e->kn->scatter;
    lf_dtype t = n->dtype;
    lf_scalar id = graph_scatter_identity(n->u.scatter.op, t);
    if (graph_dtype_is_float(t)) {
        if (isinf(id.f)) cg_line(e, "%s.v.f = %sINFINITY;", q, id.f < 0 ? "-" : "");
        else cg_line(e, "%s.v.f = %s;", q, signbit(id.f) ? "-0.0" : "1.0");
    } else {
        cg_line(e, "%s.v.i = INT64_C(%" PRId64 ");", q, id.i);
    }
    cg_line(e, "%s.arg = 0;", q);
}

void cg_emit_scatter_finish(cg_emitter *e, const char *t, const char *nblocks, const char *dn) {
    const fuse_kernel *kn = e->kn;
    const cg_layout *lay = e->lay;
    const lf_node *n = kn->scatter;
    lf_dtype dt = n->dtype;
    const char *vt = cg_vtype(e, dt);
    expr_buf d;
    if (lay->dst_buf >= 0) {
        cg_fmt(d, sizeof d, "(%s)b%d[%s]", vt, lay->dst_buf, t);
    } else {
        scalar_value(e, kn->scat_dst_scalar, dt, d, sizeof d);
    }
    cg_line(e, "%s lf_acc = %s;", vt, d);
    cg_open_block(e, "for (lf_idx lf_b = 0; lf_b < (lf_idx)%s; lf_b++) {", nblocks);
    expr_buf q, pv, r;
    cg_fmt(q, sizeof q, "sp[lf_b * (lf_idx)%s + %s]", dn, t);
    part_value(e, dt, q, pv, sizeof pv);
    if (n->u.scatter.op == LF_SCATTER_SET) {
        cg_line(e, "if (%s.arg) lf_acc = %s;", q, pv);
    } else {
        scatter_combine(e, n->u.scatter.op, dt, "lf_acc", pv, r, sizeof r);
        cg_line(e, "lf_acc = %s;", r);
    }
    cg_close_block(e);
    const cg_access *st = NULL;
    for (int i = 0; i < lay->naccess; i++)
        if (lay->access[i].fn < 0) st = &lay->access[i];
    if (dt == LF_BOOL) cg_line(e, "b%d[%s] = (uint8_t)(lf_acc != 0);", st->buf, t);
    else cg_line(e, "b%d[%s] = lf_acc;", st->buf, t);
}

/* Region reg's fn at innermost index jv, then its stores (emit_fn and
 * emit_stores with the same prefix). */
void cg_emit_body(cg_emitter *e, int reg, const char *jv, acc_form form, const char *prefix) {
    emit_fn(e, reg, jv, form, prefix);
    emit_stores(e, reg, jv, prefix);
}

/* ---- reductions ------------------------------------------------------------------------------- */

bool cg_red_float(const fuse_red *r) { return graph_dtype_is_float(r->in) || r->op == LF_RED_MEAN; }

/* min/max of f32 kept in float (see emit.h) */
static bool red_f32_extreme(const fuse_red *r) {
    return (r->op == LF_RED_MIN || r->op == LF_RED_MAX) && r->in == LF_F32;
}

const char *cg_acc_type(const fuse_red *r) {
    return red_f32_extreme(r) ? "float" : cg_red_float(r) ? "double" : "int64_t";
}
bool cg_red_arg(const fuse_red *r) { return r->op == LF_RED_ARGMIN || r->op == LF_RED_ARGMAX; }
static bool red_min(const fuse_red *r) { return r->op == LF_RED_MIN || r->op == LF_RED_ARGMIN; }

const char *cg_red_init(const fuse_red *r) {
    bool fl = cg_red_float(r);
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
static bool emit_add_or_mul(cg_emitter *e, const fuse_red *r, const char *a, const char *b) {
    bool fl = cg_red_float(r);
    const char *op;
    switch (r->op) {
    case LF_RED_SUM:
    case LF_RED_MEAN: op = "+"; break;
    case LF_RED_PROD: op = "*"; break;
    default: return false;
    }
    if (fl) cg_line(e, "%s %s= %s;", a, op, b);
    else cg_line(e, "%s = (int64_t)((uint64_t)%s %s (uint64_t)(%s));", a, a, op, b);
    return true;
}

/* Folds value x (an expression of dtype r->in) into acc `a` (and arg `g`)
 * at position pos. */
static void emit_fold(cg_emitter *e, const fuse_red *r, const char *a, const char *g, const char *x,
                      const char *pos) {
    bool fl = cg_red_float(r), f32 = red_f32_extreme(r);
    expr_buf v;
    convert(v, sizeof v, x, r->in, f32 ? LF_F32 : fl ? LF_F64 : LF_I64);
    const char *cmp = red_min(r) ? "<" : ">";
    if (emit_add_or_mul(e, r, a, v)) return;
    cg_open_block(e, "{");
    cg_line(e, "const %s x = %s;", f32 ? "float" : fl ? "double" : "int64_t", v);
    if (fl) cg_line(e, "const int better = (%s == %s) & ((x != x) | (x %s %s));", a, a, cmp, a);
    else cg_line(e, "const int better = x %s %s;", cmp, a);
    cg_line(e, "%s = better ? x : %s;", a, a);
    if (cg_red_arg(r)) cg_line(e, "%s = better ? %s : %s;", g, pos, g);
    cg_close_block(e);
}

/* Integer v as an int64_t literal: INT64_MAX / INT64_MIN by name, other
 * negatives as (-INT64_C(m) - 1) so that the extremes of narrower dtypes
 * read as C's own spelling of them. */
static const char *int64_literal(int64_t v, char *buf, size_t cap) {
    if (v == INT64_MAX) return "INT64_MAX";
    if (v == INT64_MIN) return "INT64_MIN";
    if (v < 0) cg_fmt(buf, cap, "(-INT64_C(%" PRId64 ") - 1)", -(v + 1));
    else cg_fmt(buf, cap, "INT64_C(%" PRId64 ")", v);
    return buf;
}

const char *cg_scan_identity(const fuse_red *r, char *buf, size_t cap) {
    bool fl = cg_red_float(r);
    switch (r->op) {
    case LF_RED_PROD: return fl ? "1.0" : "INT64_C(1)";
    case LF_RED_MIN: return fl ? "INFINITY" : int64_literal(graph_dtype_int_max(r->in), buf, cap);
    case LF_RED_MAX: return fl ? "-INFINITY" : int64_literal(graph_dtype_int_min(r->in), buf, cap);
    default: return fl ? "0.0" : "INT64_C(0)";
    }
}

/* Folds value x (dtype r->in) into accumulator a, as the reductions do. */
static void cg_emit_scan_fold(cg_emitter *e, const fuse_red *r, const char *a, const char *x) {
    emit_fold(e, r, a, "", x, "0");
}

void cg_emit_scan_fold_acc(cg_emitter *e, const fuse_red *r, const char *a, const char *b) {
    bool fl = cg_red_float(r);
    if (emit_add_or_mul(e, r, a, b)) return;
    cg_open_block(e, "{");
    cg_line(e, "const %s x = %s;", fl ? "double" : "int64_t", b);
    const char *cmp = r->op == LF_RED_MIN ? "<" : ">";
    if (fl) cg_line(e, "const int better = (%s == %s) & ((x != x) | (x %s %s));", a, a, cmp, a);
    else cg_line(e, "const int better = x %s %s;", cmp, a);
    cg_line(e, "%s = better ? x : %s;", a, a);
    cg_close_block(e);
}

/* One element at innermost index jv: the scanned value folded into
 * acc0[slot] (and tot[slot] when tot); with epi, res0 is the running value
 * (before the fold when exclusive) and the epilogue and its stores run. */
void cg_emit_scan_element(cg_emitter *e, const char *jv, const char *slot, bool tot, bool epi) {
    const fuse_kernel *kn = e->kn;
    const fuse_red *r = &kn->reds[0];
    if (epi) cg_declare_results(e, NULL);
    if (epi && kn->scan_exclusive) cg_finish_into(e, 0, slot, NULL);
    cg_emit_pass_body(e, 0, jv, ACC_SCALAR, slot, "0");
    if (tot) {
        char t[32], x[32];
        cg_fmt(t, sizeof t, "tot[%s]", slot);
        cg_fmt(x, sizeof x, "v%d", r->expr);
        cg_emit_scan_fold(e, r, t, x);
    }
    if (epi) {
        if (!kn->scan_exclusive) cg_finish_into(e, 0, slot, NULL);
        cg_emit_body(e, kn->npasses, jv, ACC_SCALAR, "e");
    }
}

/* Combines partial (b, bg) into (a, g), both of reduction r. */
void cg_emit_combine(cg_emitter *e, const fuse_red *r, const char *a, const char *g, const char *b,
                         const char *bg) {
    bool fl = cg_red_float(r);
    if (emit_add_or_mul(e, r, a, b)) return;
    switch (r->op) {
    case LF_RED_MIN: cg_line(e, "%s = lf_cmin_%s(%s, %s);", a, fl ? "f" : "i", a, b); return;
    case LF_RED_MAX: cg_line(e, "%s = lf_cmax_%s(%s, %s);", a, fl ? "f" : "i", a, b); return;
    default:
        cg_line(e, "lf_carg_%s(&%s, &%s, %s, %s, %d);", fl ? "f" : "i", a, g, b, bg, red_min(r));
        return;
    }
}

/* The finished value (the reduce node's dtype) of accumulator a/g. */
void cg_finish_value(const cg_emitter *e, const fuse_red *r, const char *a, const char *g, char *out,
                         size_t cap) {
    expr_buf x;
    lf_dtype t = r->node->dtype;
    if (cg_red_arg(r)) {
        cg_fmt(x, sizeof x, "(%s < 0 ? 0 : %s)", g, g);
        convert(out, cap, x, LF_I64, t);
    } else if (r->op == LF_RED_MEAN) {
        cg_fmt(x, sizeof x, "%s / (double)P[%d]", a, e->lay->param_count);
        convert(out, cap, x, LF_F64, t);
    } else {
        convert(out, cap, a, cg_red_float(r) ? LF_F64 : LF_I64, t);
    }
}

bool cg_pass_tracks_pos(const fuse_kernel *kn, int q) {
    for (int j = 0; j < kn->nreds; j++)
        if (kn->reds[j].pass == q && cg_red_arg(&kn->reds[j])) return true;
    return false;
}

/* Declares lane accumulators acc<r>[n], arg<r>[n] of pass q's reductions. */
void cg_declare_accs(cg_emitter *e, int q, const char *n, const char *count) {
    const fuse_kernel *kn = e->kn;
    for (int j = 0; j < kn->nreds; j++) {
        const fuse_red *r = &kn->reds[j];
        if (r->pass != q) continue;
        cg_line(e, "%s acc%d[%s]; /* n%d %s */", cg_acc_type(r), j, n, r->node->id,
             graph_reds[r->op].text);
        if (cg_red_arg(r)) cg_line(e, "int64_t arg%d[%s];", j, n);
        int cx, cy;
        bool con = fuse_red_contraction(kn, j, &cx, &cy); /* its block's float partial, its count */
        if (con) cg_line(e, "float cp%d[%s]; int64_t cn%d[%s];", j, n, j, n);
        cg_line(e, "for (int64_t l = 0; l < %s; l++) {", count);
        cg_line(e, "    acc%d[l] = %s;", j, cg_red_init(r));
        if (cg_red_arg(r)) cg_line(e, "    arg%d[l] = -1;", j);
        if (con) cg_line(e, "    cp%d[l] = 0.0f, cn%d[l] = 0;", j, j);
        cg_line(e, "}");
    }
}

/* The body of pass q at innermost index jv, folding into lane/element `slot`
 * at position pos. */
void cg_emit_pass_body(cg_emitter *e, int q, const char *jv, acc_form form, const char *slot,
                           const char *pos) {
    const fuse_kernel *kn = e->kn;
    emit_fn(e, q, jv, form, "");
    if (q == 0 && kn->kind != FUSE_KERNEL_SCAN) emit_stores(e, 0, jv, ""); /* pass 0's position stores (fuse_store.pos) */
    for (int j = 0; j < kn->nreds; j++) {
        const fuse_red *r = &kn->reds[j];
        if (r->pass != q) continue;
        char a[32], g[32], x[32];
        int cx, cy;
        if (fuse_red_contraction(kn, j, &cx, &cy)) {
            cg_emit_contract_fold(e, j, cx, cy, slot);
            continue;
        }
        cg_fmt(a, sizeof a, "acc%d[%s]", j, slot);
        cg_fmt(g, sizeof g, "arg%d[%s]", j, slot);
        cg_fmt(x, sizeof x, "v%d", r->expr);
        emit_fold(e, r, a, g, x, pos);
    }
}

/* Opens the reduced nest of region reg (INNER and FULL): a loop per
 * reduced axis but the innermost (lo/hi bound the outermost, FULL blocks, or
 * are NULL), then `if (jlo < jhi) {` around the innermost loop's range (so
 * hoisted loads never run for an empty loop) and the region's hoisted loads.
 * Writes the innermost range into jlo/jhi; returns the levels opened, which
 * close_reduced_nest takes. */
int cg_open_reduced_nest(cg_emitter *e, int reg, const char *lo, const char *hi, bool track_pos,
                             char jlo[32], char jhi[32]) {
    const cg_layout *lay = e->lay;
    int first = lay->nkept, inner = lay->ndim - 1, opened = 0;
    for (int ax = first; ax < inner; ax++, opened++)
        cg_open_level(e, ax, reg, ax == first ? lo : NULL, ax == first ? hi : NULL, track_pos);
    bool blocked = inner == first && lo;
    cg_fmt(jlo, 32, "%s", blocked ? lo : "0");
    if (blocked) cg_fmt(jhi, 32, "%s", hi);
    else cg_fmt(jhi, 32, "P[%d]", lay->param_extent + inner);
    cg_open_block(e, "if (%s < %s) {", jlo, jhi);
    cg_hoist_invariants(e, reg);
    return opened;
}

void cg_close_reduced_nest(cg_emitter *e, int opened) {
    cg_close_block(e);
    while (opened--) cg_close_level(e);
}

void cg_declare_buffers(cg_emitter *e) {
    const cg_layout *lay = e->lay;
    for (int b = 0; b < lay->nbufs; b++) {
        if (lay->buf_slot[b] == -2) { /* a scatter's partials */
            cg_line(e, "%slf_partial *%s b%d = (lf_partial *)B[%d]; /* scatter partials */", e->d->value_attr,
                    e->d->restrict_kw, b, b);
            continue;
        }
        if (lay->buf_slot[b] < 0) { /* the index-error flag of gather loads */
            cg_line(e, "%svolatile int32_t *b%d = (volatile int32_t *)B[%d]; /* index errors */", e->d->value_attr, b, b);
            continue;
        }
        const fuse_slot *sl = &e->s->slots[lay->buf_slot[b]];
        const char *t = e->d->type[sl->dtype];
        /* a slot that may share memory with another (an output written into
           its own input, fusion/plan_inplace.c) is not restrict */
        const char *rk = sl->may_alias ? "" : e->d->restrict_kw;
        if (lay->buf_written[b])
            cg_line(e, "%s%s *%s b%d = (%s *)B[%d]; /* n%d%s */", e->d->value_attr, t, rk, b, t, b, sl->node->id,
                    sl->may_alias ? ", may alias" : "");
        else
            cg_line(e, "%sconst %s *%s b%d = (const %s *)B[%d]; /* n%d%s */", e->d->value_attr, t, rk, b, t, b,
                    sl->node->id, sl->may_alias ? ", may alias" : "");
    }
    /* The constants' values (cg_fill_scalars), read once: read from P
       inside a loop, GCC did not see them as invariant there (the stores
       go through a pointer chosen at run time) and left x ** y with a
       constant y unvectorized. */
    const fuse_kernel *kn = lay->kernel;
    for (int j = 0; j < kn->nscalars; j++) {
        lf_dtype st = kn->scalars[j]->dtype; /* a complex constant's value is its real part, a double */
        if (graph_dtype_is_float(st) || graph_dtype_is_complex(st))
            cg_line(e, "%sconst double lf_sc%d = lf_bits_f64(P[%d]); /* n%d */", e->d->value_attr, j,
                    lay->param_scalar + j, kn->scalars[j]->id);
        else
            cg_line(e, "%sconst int64_t lf_sc%d = P[%d]; /* n%d */", e->d->value_attr, j, lay->param_scalar + j,
                    kn->scalars[j]->id);
    }
    e->scalars_local = true;
    for (int i = 0; i < lay->naccess; i++)
        if (lay->access[i].inner == CG_INNER_STRIDED) {
            const cg_access *ac = &lay->access[i];
            int64_t st = ac->strides[lay->ndim - 1];
            if (ac->param_gather < 0 && st >= -CG_SMALL_STRIDE && st <= CG_SMALL_STRIDE)
                /* a small stride is structure: the compiler vectorizes j * 3 (an
                   interleaved or transposed small operand), not j * P[..] */
                cg_line(e, "%sconst lf_idx s%d = %lld; /* small stride, baked in */", e->d->value_attr, i,
                        (long long)st);
            else
                cg_line(e, "%sconst lf_idx s%d = (lf_idx)P[%d];", e->d->value_attr, i, ac->param_offset + lay->ndim);
        }
}

/* Declares res<r> for every reduction (n: array length or NULL). */
void cg_declare_results(cg_emitter *e, const char *n) {
    const fuse_kernel *kn = e->kn;
    for (int j = 0; j < kn->nreds; j++) {
        const char *t = cg_vtype(e, kn->reds[j].node->dtype);
        if (n) cg_line(e, "%s res%d[%s];", t, j, n);
        else cg_line(e, "%s res%d;", t, j);
    }
}

void cg_finish_into(cg_emitter *e, int q, const char *slot, const char *dst_fmt_prefix) {
    const fuse_kernel *kn = e->kn;
    for (int j = 0; j < kn->nreds; j++) {
        const fuse_red *r = &kn->reds[j];
        if (r->pass != q) continue;
        char a[32], g[32];
        expr_buf v;
        cg_fmt(a, sizeof a, "acc%d[%s]", j, slot);
        cg_fmt(g, sizeof g, "arg%d[%s]", j, slot);
        cg_finish_value(e, r, a, g, v, sizeof v);
        if (dst_fmt_prefix) cg_line(e, "res%d[%s] = %s;", j, dst_fmt_prefix, v);
        else cg_line(e, "res%d = %s;", j, v);
    }
}

int cg_pass_reductions(const fuse_kernel *kn, int q) {
    int nq = 0;
    for (int j = 0; j < kn->nreds; j++) nq += kn->reds[j].pass == q;
    return nq;
}

/* ---- user functions ------------------------------------------------------------------------ */

/* Newlines in the text so far: the line the next one starts on is this + 1. */
static long text_lines(const cg_text *t) {
    long n = 0;
    for (size_t i = 0; i < t->len; i++) n += t->s[i] == '\n';
    return n;
}

void cg_emit_ufn_head(cg_text *out, const graph_ufn *u, const char *const *value_type, const char *qual) {
    cg_printf(out, "%s%s %s(", qual, value_type[u->ret], u->name);
    for (int k = 0; k < u->nparams; k++) cg_printf(out, "%s%s %s", k ? ", " : "", value_type[u->params[k]], u->pnames[k]);
    cg_printf(out, "%s)", u->nparams ? "" : "void");
}

void cg_emit_ufn_body(cg_text *out, const graph_ufn *u, const char *body) {
    cg_printf(out, " {\n#line 1 \"%s\"\n%s\n}\n", u->name, body);
}

void cg_emit_ufn_defs(cg_text *out, const cg_layout *lay, const cg_dialect *d) {
    const fuse_kernel *kn = lay->kernel;
    int nfns = kn->npasses + 2;
    for (int f = 0; f < nfns; f++) {
        const lf_fn *fn = f < kn->npasses ? kn->passes[f].fn : f == kn->npasses ? kn->epi : kn->row;
        for (int i = 0; fn && i < fn->nexprs; i++) {
            const graph_ufn *u = fn->exprs[i].call;
            if (fn->exprs[i].kind != EXPR_CALL) continue;
            if (u->fp) { /* a library function: called through P (C only) */
                if (!d->host_code)
                    cg_printf(out, "#error \"user function %s is host code from a shared library: CUDA kernels cannot call it\"\n", u->name);
                else if (cg_ufn_param(lay, u) < 0)
                    cg_printf(out, "#error \"more than %d library functions in one kernel\"\n", CG_MAX_UFN);
                continue;
            }
            /* guarded: a unit of several kernels defines it once (lf_fn_c keeps
               names unique in a graph) */
            cg_printf(out, "#ifndef LF_UFN_%s\n#define LF_UFN_%s\n", u->name, u->name);
            cg_emit_ufn_head(out, u, d->value_type, "LF_FUNC ");
            cg_emit_ufn_body(out, u, d->host_code ? u->c_body : u->cuda_body);
            /* back to the generated text's own numbering (its messages) */
            cg_printf(out, "#line %ld \"lazyfuse-kernel\"\n#endif\n", text_lines(out) + 2);
        }
    }
}
