/* tests/randgraph.c: the random graph generator of tests/randgraph.h.
 *
 * Every choice comes from the graph's own rng, so a graph is a pure
 * function of its seed; some graphs read one node through many slices
 * (gen_stencil: the taps of a stencil, past LF_MAX_ARGS loads of one
 * buffer), some hold contractions (gen_contract: matmul, transposed,
 * matrix-vector and batched, K past LF_CONTRACT_BLOCK in a twentieth); shapes
 * stay small (a few hundred elements) so thousands of graphs run in seconds
 * on the reference evaluator. Complex dtypes (c64, c128) are drawn like
 * the others: a complex input, constant, fill or cast goes at once through
 * one of COMPLEX_FNS (operators complex values take) to a real node, so the
 * complex arithmetic fuses into kernels whose other operators are real.
 */
#include "randgraph.h"
#include "testutil.h"

#include "graph/graph.h"

#include <criterion/criterion.h>

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* x, or x cast to i64 when x is u64 and op orders values (lazyfuse refuses
 * u64 min, max, argmin and argmax: graph_red_dtype_ok). */
static lf_node *orderable(lf_graph *g, lf_reduce_op op, lf_node *x) {
    bool orders = op == LF_RED_MIN || op == LF_RED_MAX || op == LF_RED_ARGMIN || op == LF_RED_ARGMAX;
    return x && orders && lf_node_dtype(x) == LF_U64 ? lf_cast(g, x, LF_I64) : x;
}

/* x, or x cast to one of the first five dtypes (bool i32 i64 f32 f64) when
 * its dtype is one appended later: sort and scatter take only those. */
static lf_node *first_five(lf_graph *g, lf_node *x) {
    lf_dtype t = lf_node_dtype(x);
    if (t <= LF_F64) return x;
    return lf_cast(g, x, graph_dtype_is_float(t) ? LF_F32 : LF_I64);
}

/* The real dtypes (bool .. bf16): complex ones come after them in the enum. */
enum { REAL_NDTYPES = LF_BF16 + 1 };

/* A complex x (c64, c128) mapped through one of the operators complex
 * values take, to a real node the rest of the generator can use with any
 * operator; a real x as it is. The complex map fuses with its consumers. */
static const char *const COMPLEX_FNS[] = {
    "(a) -> real(a * a + 1)",
    "(a) -> imag(conj(a) * 2 - sqrt(a))",
    "(a) -> abs(a / (a + 0.5))",
    "(a) -> angle(a - 0.25)",
    "(a) -> real(exp(a * 0.125)) + imag(log(a))",
    "(a) -> imag(sqrt(a) * (a - 1))",
    "(a) -> real(a ** 2) - abs(a)",
    "(a) -> f64(a == conj(a)) + f64(a != 0)",
    "(a) -> real(where(imag(a) > 0, a, -a) * c128(a))",
    "(a) -> f32(a + 1) - imag(a)",
};

static lf_node *decomplex(lf_graph *g, uint64_t pick_, lf_node *x) {
    if (!x || !graph_dtype_is_complex(lf_node_dtype(x))) return x;
    lf_fn *f = lf_fn_parse(g, COMPLEX_FNS[pick_ % (sizeof COMPLEX_FNS / sizeof *COMPLEX_FNS)]);
    return f ? lf_map(g, f, x) : NULL;
}

lf_node *row_reduce(lf_graph *g, lf_reduce_op op, lf_node *x, int na, const int *axes, bool keep) {
    x = orderable(g, op, x);
    lf_node *r = lf_reduce(g, op, x, na, axes, keep);
    if (keep) return r;
    int64_t sh[LF_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) {
        sh[d] = x->shape[d];
        for (int j = 0; j < na; j++)
            if ((axes[j] + x->ndim) % x->ndim == d) sh[d] = 1;
    }
    return lf_reshape(g, r, x->ndim, sh);
}

/* A private generator per graph, so one graph can be replayed alone. */

static uint64_t rnext(rng *r) {
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
static int rint_(rng *r, int lo, int hi) { return lo + (int)(rnext(r) % (uint64_t)(hi - lo + 1)); }
static bool chance(rng *r, int percent) { return rint_(r, 0, 99) < percent; }


static void push(gen *G, lf_node *x) {
    if (!x) return;
    if (G->n < POOL) G->pool[G->n++] = x;
    else G->pool[rint_(&G->r, 0, POOL - 1)] = x;
}

static lf_node *pick(gen *G) {
    /* favour recent nodes, so graphs get deep */
    int lo = G->n > 6 && chance(&G->r, 60) ? G->n - 6 : 0;
    return G->pool[rint_(&G->r, lo, G->n - 1)];
}

/* Values in (-1, 0) and tiny negatives truncate to an integer zero: a cast
 * back to float must give +0.0, which 1/x tells from -0.0 (GCC with
 * -fno-trapping-math once turned (double)(int)x into trunc(x), -0.0). */
static const double SPECIAL[] = {0.0, -0.0, 1.0, -1.0, 0.5, 2.5, -3.75, 7.0, 1e10, -1e-10,
                                 NAN, INFINITY, -INFINITY, 3.0, -2.0, 100.0, -0.5, -0.999,
                                 -1e-300, 0.999, 2.0};
enum { NSPECIAL = sizeof SPECIAL / sizeof SPECIAL[0] };

static lf_node *new_input(gen *G) {
    int ndim = rint_(&G->r, 0, 3);
    int64_t shape[3];
    for (int d = 0; d < ndim; d++)
        shape[d] = chance(&G->r, 4) ? 0 : rint_(&G->r, 1, chance(&G->r, 30) ? 1 : 5);
    lf_dtype t = (lf_dtype)rint_(&G->r, 0, LF_NDTYPES - 1);
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= shape[d];
    double vals[125];
    for (int64_t i = 0; i < n; i++) {
        if ((graph_dtype_is_float(t) || graph_dtype_is_complex(t)) && chance(&G->r, 25))
            vals[i] = SPECIAL[rint_(&G->r, 0, NSPECIAL - 1)];
        else if (graph_dtype_is_float(t) || graph_dtype_is_complex(t))
            vals[i] = (double)rint_(&G->r, -400, 400) / 64.0;
        else if (t != LF_BOOL && chance(&G->r, 20)) /* an integer's extremes: wraparound */
            vals[i] = chance(&G->r, 50) ? (double)graph_dtype_int_min(t) + rint_(&G->r, 0, 2)
                      : t == LF_U64 ? 18446744073709549568.0 /* 2^64 - 2^11: u64's top range */
                                    : (double)graph_dtype_int_max(t) - rint_(&G->r, 0, 2);
        else
            vals[i] = rint_(&G->r, graph_dtypes[t].kind == DTYPE_UINT ? 0 : -6, 6);
    }
    lf_buffer *b;
    if (graph_dtype_is_complex(t)) { /* vals as real parts, imaginary parts of their own */
        b = lf_buffer_new(G->ctx, t, ndim, shape);
        cr_assert(b != NULL, "lf_buffer_new: %s", lf_errmsg(G->ctx));
        unsigned char raw[125 * 16];
        for (int64_t i = 0; i < n; i++) {
            lf_scalar v = {{.f = vals[i]}, chance(&G->r, 20) ? SPECIAL[rint_(&G->r, 0, NSPECIAL - 1)]
                                                             : (double)rint_(&G->r, -400, 400) / 64.0};
            graph_scalar_store(raw, t, i, graph_scalar_convert(v, LF_C128, t));
        }
        cr_assert_eq(lf_buffer_write(b, raw, (size_t)n * lf_dtype_size(t)), LF_OK);
    } else {
        b = tu_buf(G->ctx, t, ndim, shape, vals);
    }
    lf_node *x = lf_input(G->g, b);
    lf_buffer_free(b); /* the graph keeps it alive */
    return decomplex(G->g, rnext(&G->r), x);
}

/* Some node whose shape broadcasts with x (possibly a view of x or a constant). */
static lf_node *partner(gen *G, lf_node *x) {
    for (int tries = 0; tries < 8; tries++) {
        lf_node *y = pick(G);
        int nd;
        int64_t sh[LF_MAX_DIMS];
        if (graph_broadcast_shapes(x->ndim, x->shape, y->ndim, y->shape, &nd, sh)) return y;
    }
    if (chance(&G->r, 50))
        return decomplex(G->g, rnext(&G->r),
                         lf_const(G->g, (lf_dtype)rint_(&G->r, 0, LF_NDTYPES - 1), SPECIAL[rint_(&G->r, 0, NSPECIAL - 1)]));
    if (x->ndim >= 1 && chance(&G->r, 50)) /* reduce x over its last axis, keepdims */
        return lf_reduce(G->g, LF_RED_SUM, x, 1, (int[]){x->ndim - 1}, true);
    return x;
}

static const char *const FNS[] = {
    "(a, b) -> a * 2 + b",
    "(a, b) -> where(a > b, a, b * 3)",
    "(a, b) -> (a - b) / 2.0",
    "(a, b) -> min(a, b) - max(a, 1)",
    "(a) -> a * 0.5 - 1",
    "(a) -> 2",
    "(a) -> 1.5",
    "(a) -> i32(a) % 3",
    "(a) -> abs(a) + sqrt(abs(a))",
    "(a) -> not (a > 0)",
    "(a, b, c) -> fma(a, b, c)",
    "(a, b, c) -> where(a, b, c) + 1",
    "(a) -> exp(-a*a)",
    "(a, b) -> a ** 2 + b ** 3",
    "(a) -> -a",
    "(a, b) -> a % b",
    /* every float -> integer -> float round trip, its zero's sign made visible */
    "(a) -> 1.0 / f64(i32(a))",
    "(a) -> 1.0 / f32(i64(a))",
    "(a) -> 1 / (i32(a) + 0.0)",
    "(a) -> 1.0 / (f32(i32(a)) * a)",
    /* integer operators (issue 13): hashing and binning, any input dtype */
    "(a, b) -> a // b",
    "(a) -> a // 3 - a // -2.5",
    "(a) -> (i32(a)*31 + 7) // 4 & 15",
    "(a, b) -> i32(a) >> i32(b) | i32(b) << i32(a)",
    "(a, b) -> (i64(a) << (i64(b) & 63)) ^ ~i64(b)",
    "(a) -> ~i32(a) ^ i32(a) >> 31",
    "(a, b) -> bool(a) ^ bool(b) | ~bool(a) & bool(b)",
    /* NumPy's and numexpr's spellings, fmod and the inverse hyperbolics (issue 14) */
    "(a, b) -> fmod(a, b) + arctan2(a, absolute(b))",
    "(a) -> arcsinh(a) - arctanh(a * 0.125) + arccosh(absolute(a) + 1)",
    "(a, b) -> power(minimum(a, b), 2) - maximum(arcsin(a * 0.0625), arctan(b))",
    /* a fn of no parameters: a 0-d value (issue 14) */
    "() -> 2.5 * pi - 1",
};

/* The integer operators, drawn when every operand is an integer or bool. */
static bool intlike(const lf_node *x) { return !graph_dtype_is_float(lf_node_dtype(x)); }

static lf_node *gen_elementwise(gen *G) {
    lf_graph *g = G->g;
    lf_node *x = pick(G);
    switch (rint_(&G->r, 0, 5)) {
    case 0: { /* unary builtin */
        static const lf_op un[] = {LF_OP_NEG,   LF_OP_ABS,   LF_OP_SQRT,  LF_OP_EXP,   LF_OP_SIN,
                                   LF_OP_FLOOR, LF_OP_ISNAN, LF_OP_NOT,   LF_OP_SIGN,  LF_OP_LOG,
                                   LF_OP_TANH,  LF_OP_ROUND, LF_OP_ASINH, LF_OP_ACOSH, LF_OP_ATANH};
        if (intlike(x) && chance(&G->r, 30)) return lf_bitwise_not(g, x);
        return lf_apply(g, un[rint_(&G->r, 0, (int)(sizeof un / sizeof *un) - 1)], x, NULL, NULL);
    }
    case 1:
    case 2: { /* binary builtin */
        static const lf_op bin[] = {LF_OP_ADD, LF_OP_SUB, LF_OP_MUL, LF_OP_DIV, LF_OP_MOD,
                                    LF_OP_MIN, LF_OP_MAX, LF_OP_LT, LF_OP_EQ, LF_OP_AND,
                                    LF_OP_POW, LF_OP_HYPOT, LF_OP_ATAN2, LF_OP_FMOD};
        lf_node *y = partner(G, x);
        if (chance(&G->r, 50)) { lf_node *t = x; x = y; y = t; }
        /* u64 with a signed integer promotes to f64: refused by & | ^ << >> */
        if (intlike(x) && intlike(y) &&
            !graph_dtype_is_float(lf_dtype_promote(lf_node_dtype(x), lf_node_dtype(y))) && chance(&G->r, 40)) {
            static const lf_op iop[] = {LF_OP_FLOORDIV, LF_OP_BITAND, LF_OP_BITOR,
                                        LF_OP_BITXOR,   LF_OP_LSHIFT, LF_OP_RSHIFT};
            return lf_apply(g, iop[rint_(&G->r, 0, 5)], x, y, NULL);
        }
        if (chance(&G->r, 8)) return lf_floor_divide(g, x, y);
        return lf_apply(g, bin[rint_(&G->r, 0, (int)(sizeof bin / sizeof *bin) - 1)], x, y, NULL);
    }
    case 3: { /* select */
        lf_node *y = partner(G, x), *z = partner(G, x);
        int nd;
        int64_t sh[LF_MAX_DIMS];
        if (!graph_broadcast_shapes(y->ndim, y->shape, z->ndim, z->shape, &nd, sh)) z = y;
        return lf_select(g, lf_gt(g, x, lf_const(g, LF_F64, 0.25)), y, z);
    }
    case 4: return decomplex(g, rnext(&G->r), lf_cast(g, x, (lf_dtype)rint_(&G->r, 0, LF_NDTYPES - 1)));
    default: { /* parsed fn with weak literals */
        const char *src = FNS[rint_(&G->r, 0, (int)(sizeof FNS / sizeof *FNS) - 1)];
        lf_fn *f = lf_fn_parse(g, src);
        int ar = lf_fn_arity(f);
        lf_node *in[3] = {x, NULL, NULL};
        for (int k = 1; k < ar; k++) {
            in[k] = partner(G, x);
            int nd;
            int64_t sh[LF_MAX_DIMS];
            if (k == 2 && !graph_broadcast_shapes(in[1]->ndim, in[1]->shape, in[2]->ndim,
                                                  in[2]->shape, &nd, sh))
                in[2] = in[1];
        }
        return lf_zipwith(g, f, ar, in);
    }
    }
}

static lf_node *gen_view(gen *G) {
    lf_graph *g = G->g;
    lf_node *x = pick(G);
    if (x->ndim >= 4 || x->numel > 120) /* keep arrays small */
        return x->ndim >= 2 && chance(&G->r, 50) ? lf_transpose(g, x)
                                                 : lf_slice(g, lf_reshape(g, x, 1, (int64_t[]){-1}), 0,
                                                            LF_NONE, LF_NONE, -3);
    switch (rint_(&G->r, 0, 4)) {
    case 0: return x->ndim >= 2 ? lf_transpose(g, x) : lf_expand_dims(g, x, 0);
    case 1: {
        if (x->ndim == 0) return lf_expand_dims(g, x, 0);
        int a = rint_(&G->r, 0, x->ndim - 1);
        int64_t e = x->shape[a];
        if (chance(&G->r, 50)) return lf_slice(g, x, a, LF_NONE, LF_NONE, -rint_(&G->r, 1, 2));
        int64_t s0 = e ? rint_(&G->r, 0, (int)e - 1) : 0;
        return lf_slice(g, x, a, s0, LF_NONE, rint_(&G->r, 1, 2));
    }
    case 2: { /* reshape: flatten, or split / merge */
        if (chance(&G->r, 50) || x->numel == 0) return lf_reshape(g, x, 1, (int64_t[]){-1});
        int64_t n = x->numel;
        int64_t f = n % 2 == 0 ? 2 : n % 3 == 0 ? 3 : 1;
        return lf_reshape(g, x, 2, (int64_t[]){f, -1});
    }
    case 3: return lf_expand_dims(g, x, rint_(&G->r, -x->ndim - 1, x->ndim));
    default: {
        if (x->ndim >= 3) return lf_transpose(g, x);
        int64_t sh[LF_MAX_DIMS];
        sh[0] = rint_(&G->r, 1, 3);
        memcpy(sh + 1, x->shape, (size_t)x->ndim * sizeof *sh);
        for (int d = 1; d <= x->ndim; d++)
            if (sh[d] == 1 && chance(&G->r, 50)) sh[d] = 3;
        return lf_broadcast_to(g, x, x->ndim + 1, sh);
    }
    }
}

static lf_node *gen_reduce(gen *G) {
    lf_node *x = pick(G);
    lf_reduce_op op = (lf_reduce_op)rint_(&G->r, 0, LF_NREDS - 1);
    int axes[LF_MAX_DIMS], na = 0;
    for (int d = 0; d < x->ndim; d++)
        if (chance(&G->r, 50)) axes[na++] = d - (chance(&G->r, 30) ? x->ndim : 0);
    bool all = chance(&G->r, 20);
    int64_t cnt = 1, outn = 1;
    for (int d = 0; d < x->ndim; d++) {
        bool red = all;
        for (int j = 0; j < na; j++) red |= (axes[j] + x->ndim) % x->ndim == d;
        if (red) cnt *= x->shape[d];
        else outn *= x->shape[d];
    }
    bool needs = op == LF_RED_MIN || op == LF_RED_MAX || op == LF_RED_ARGMIN || op == LF_RED_ARGMAX;
    if (needs && cnt == 0 && outn != 0) op = LF_RED_SUM; /* empty sets fail by design */
    bool keep = chance(&G->r, 40);
    lf_node *r = lf_reduce(G->g, op, orderable(G->g, op, x), all ? 0 : na, all ? NULL : axes, keep);
    if (r && chance(&G->r, 25)) { /* a sibling over the same axes (horizontal) */
        lf_node *y = chance(&G->r, 50) ? x : lf_abs(G->g, x);
        op = (lf_reduce_op)rint_(&G->r, 0, LF_NREDS - 1);
        needs = op == LF_RED_MIN || op == LF_RED_MAX || op == LF_RED_ARGMIN || op == LF_RED_ARGMAX;
        if (needs && cnt == 0 && outn != 0) op = LF_RED_MEAN;
        push(G, lf_reduce(G->g, op, orderable(G->g, op, y), all ? 0 : na, all ? NULL : axes, chance(&G->r, 40)));
    }
    return r;
}

/* A reduction op valid for x reduced over mask (min/max/arg need elements). */
static lf_reduce_op safe_op(gen *G, const lf_node *x, uint32_t mask) {
    lf_reduce_op op = (lf_reduce_op)rint_(&G->r, 0, LF_NREDS - 1);
    int64_t cnt = 1, outn = 1;
    for (int d = 0; d < x->ndim; d++) {
        if (mask & (1u << d)) cnt *= x->shape[d];
        else outn *= x->shape[d];
    }
    bool needs = op == LF_RED_MIN || op == LF_RED_MAX || op == LF_RED_ARGMIN || op == LF_RED_ARGMAX;
    return needs && cnt == 0 && outn != 0 ? LF_RED_SUM : op;
}

static const char *const ROWFNS[] = {
    "(a, b) -> exp(a - b)",
    "(a, b) -> a - b",
    "(a, b) -> (a - b) * (a - b)",
    "(a, b) -> where(a > b, a, b) + 1",
    "(a, b) -> a * b",
};

/* reduce -> broadcast -> map: softmax-, layer-norm- and chain-like patterns
 * over one set of axes (trailing or any), keepdims or reshaped back. */
static lf_node *gen_row_pattern(gen *G) {
    lf_graph *g = G->g;
    lf_node *x = pick(G);
    for (int t = 0; t < 6 && x->ndim == 0; t++) x = pick(G);
    if (x->ndim == 0) return gen_elementwise(G);
    int axes[LF_MAX_DIMS], na = 0;
    uint32_t mask = 0;
    if (chance(&G->r, 30)) {
        for (int d = 0; d < x->ndim; d++)
            if (chance(&G->r, 50)) axes[na++] = d;
        if (!na) axes[na++] = x->ndim - 1;
    } else {
        for (int d = x->ndim - rint_(&G->r, 1, x->ndim); d < x->ndim; d++) axes[na++] = d - x->ndim;
    }
    for (int j = 0; j < na; j++) mask |= 1u << ((axes[j] + x->ndim) % x->ndim);
    bool keep = chance(&G->r, 70);
    lf_node *a = row_reduce(g, safe_op(G, x, mask), x, na, axes, keep);
    push(G, a);
    switch (rint_(&G->r, 0, 2)) {
    case 0: { /* softmax-like */
        lf_node *e = lf_zipwith(g, lf_fn_parse(g, ROWFNS[rint_(&G->r, 0, 4)]), 2, (lf_node *[]){x, a});
        lf_node *sm = row_reduce(g, safe_op(G, e, mask), e, na, axes, chance(&G->r, 70));
        push(G, e);
        push(G, sm);
        if (chance(&G->r, 50)) return lf_div(g, e, sm);
        return lf_zipwith(g, lf_fn_parse(g, "(a, b, c) -> a / b + c"), 3, (lf_node *[]){e, sm, a});
    }
    case 1: { /* layer-norm-like */
        lf_node *d = lf_sub(g, x, a);
        lf_node *v = row_reduce(g, LF_RED_MEAN, lf_mul(g, d, d), na, axes, chance(&G->r, 70));
        push(G, v);
        lf_node *y = lf_zipwith(g, lf_fn_parse(g, "(d, v) -> d / sqrt(v + 0.00001)"), 2, (lf_node *[]){d, v});
        return chance(&G->r, 50) ? lf_mul(g, y, partner(G, y)) : y;
    }
    default: { /* three passes and a horizontal pair */
        lf_node *b = row_reduce(g, safe_op(G, x, mask), lf_sub(g, x, a), na, axes, chance(&G->r, 70));
        lf_node *b2 = row_reduce(g, safe_op(G, x, mask), x, na, axes, keep);
        lf_node *c = row_reduce(g, safe_op(G, x, mask), lf_mul(g, x, b), na, axes, chance(&G->r, 70));
        push(G, b);
        push(G, b2);
        push(G, c);
        return lf_zipwith(g, lf_fn_parse(g, "(x, a, b, c) -> x - a + c * b"), 4, (lf_node *[]){x, a, b2, c});
    }
    }
}

/* A scan (lf_scan: any op, axis and exclusiveness) of a node, and now and
 * then a consumer at its own position (an epilogue) or at another one (a
 * reversed view along the axis: a kernel of its own). */
static lf_node *gen_scan(gen *G) {
    lf_graph *g = G->g;
    lf_node *x = pick(G);
    for (int t = 0; t < 6 && x->ndim == 0; t++) x = pick(G);
    if (x->ndim == 0) return gen_elementwise(G);
    static const lf_reduce_op ops[4] = {LF_RED_SUM, LF_RED_PROD, LF_RED_MIN, LF_RED_MAX};
    int axis = rint_(&G->r, -x->ndim, x->ndim - 1);
    lf_reduce_op op = ops[rint_(&G->r, 0, 3)];
    bool excl = chance(&G->r, 50);
    lf_dtype st = (lf_dtype)rint_(&G->r, 0, REAL_NDTYPES - 1); /* complex scans are refused */
    if (st == LF_U64 && (op == LF_RED_MIN || op == LF_RED_MAX)) st = LF_I64; /* refused for u64 */
    x = orderable(g, op, x);
    lf_node *s = chance(&G->r, 25) ? lf_scan_dtype(g, op, x, axis, excl, st) : lf_scan(g, op, x, axis, excl);
    switch (rint_(&G->r, 0, 3)) {
    case 0: return lf_add(g, s, lf_cast(g, x, lf_node_dtype(s)));
    case 1: push(G, s); return lf_slice(g, s, (axis + x->ndim) % x->ndim, LF_NONE, LF_NONE, -1);
    default: return s;
    }
}

/* An output candidate over the same space as o (a sibling), else any node. */
static lf_node *pick_sibling(gen *G, const lf_node *o) {
    for (int tries = 0; tries < 10; tries++) {
        lf_node *y = pick(G);
        if (y != o && y->ndim == o->ndim && !memcmp(y->shape, o->shape, (size_t)o->ndim * sizeof *o->shape))
            return y;
    }
    return pick(G);
}

/* A sort, argsort or topk (any axis, order and k, 0..extent included) of a
 * node, often a map's value (so the key's map fuses into the sort), and now
 * and then a payload gathered by argsort's indices (take_along_axis: a load
 * in the consumer) or an elementwise consumer of the sorted values. */
static lf_node *gen_sort(gen *G) {
    lf_graph *g = G->g;
    lf_node *x = pick(G);
    for (int t = 0; t < 6 && x->ndim == 0; t++) x = pick(G);
    if (x->ndim == 0) return gen_elementwise(G);
    x = first_five(g, x);
    int axis = rint_(&G->r, -x->ndim, x->ndim - 1);
    int64_t ext = x->shape[(axis + x->ndim) % x->ndim];
    bool desc = chance(&G->r, 50);
    switch (rint_(&G->r, 0, 4)) {
    case 0: return lf_sort(g, x, axis, desc);
    case 1: {
        lf_node *ord = lf_argsort(g, x, axis, desc);
        if (chance(&G->r, 50)) return ord;
        lf_node *pay = pick_sibling(G, x);
        if (pay->ndim != x->ndim || memcmp(pay->shape, x->shape, (size_t)x->ndim * sizeof *x->shape)) pay = x;
        push(G, ord);
        return lf_gather(g, pay, axis, ord);
    }
    case 2: return lf_add(g, lf_sort(g, x, axis, desc), lf_cast(g, x, lf_node_dtype(x)));
    default: {
        int64_t k = chance(&G->r, 30) ? ext : rint_(&G->r, 0, ext < 70 ? ext : 70);
        lf_node *v = lf_topk(g, x, k, axis, desc), *ix = lf_argtopk(g, x, k, axis, desc);
        if (!v || !ix) return gen_elementwise(G);
        push(G, ix);
        return v;
    }
    }
}

/* A gather of a pool node along a random axis with in-range indices (some
 * negative), idx broadcast on some axes; a 1-d x takes a 1-d or 2-d idx.
 * A third of them are lf_take instead: idx of 0, 1 or 2 dimensions (zero
 * extents too) along any axis, counted from either end. */
static lf_node *gen_gather(gen *G) {
    lf_graph *g = G->g;
    lf_node *x = pick(G);
    for (int t = 0; t < 6 && x->ndim == 0; t++) x = pick(G);
    if (x->ndim == 0) x = lf_reshape(g, x, 1, (int64_t[]){1});
    int axis = rint_(&G->r, 0, x->ndim - 1);
    int64_t e = x->shape[axis], ishape[LF_MAX_DIMS];
    int indim = x->ndim;
    if (x->ndim == 1) {
        indim = rint_(&G->r, 1, 2);
        for (int d = 0; d < indim; d++) ishape[d] = rint_(&G->r, 0, 5);
    } else {
        for (int d = 0; d < indim; d++) ishape[d] = d == axis ? rint_(&G->r, 0, 5) : chance(&G->r, 30) ? 1 : x->shape[d];
    }
    bool take = chance(&G->r, 35); /* lf_take: idx of 0..2 dims, any x rank */
    if (take) {
        indim = rint_(&G->r, 0, 2);
        if (x->ndim - 1 + indim > LF_MAX_DIMS) indim = 1;
        for (int d = 0; d < indim; d++) ishape[d] = rint_(&G->r, 0, 4);
        if (e == 0 && indim) ishape[0] = 0;
        if (e == 0 && !indim) indim = 1, ishape[0] = 0;
    } else if (e == 0) ishape[x->ndim == 1 ? 0 : axis] = 0; /* nothing to index: an empty gather */
    lf_dtype it = chance(&G->r, 50) ? LF_I32 : LF_I64;
    lf_node *bits = lf_random(g, it, LF_RANDOM_BITS, indim, ishape, rnext(&G->r));
    char src[96];
    snprintf(src, sizeof src, "(b) -> b %% %lld - %lld", (long long)(2 * (e ? e : 1)), (long long)(e ? e : 1));
    lf_fn *f = lf_fn_parse(g, src);
    if (take) return lf_take(g, x, rint_(&G->r, 0, 1) ? axis : axis - x->ndim, lf_map(g, f, bits));
    return lf_gather(g, x, axis, lf_map(g, f, bits));
}

/* A scatter (any op) into a pool node along a random axis, in-range
 * indices (some negative, with duplicates), random values of any dtype over
 * the positions; a 1-d dst takes a 1-d or 2-d index. */
static lf_node *gen_scatter(gen *G) {
    lf_graph *g = G->g;
    lf_node *d = pick(G);
    for (int t = 0; t < 6 && d->ndim == 0; t++) d = pick(G);
    if (d->ndim == 0) d = lf_reshape(g, d, 1, (int64_t[]){1});
    d = first_five(g, d);
    int axis = rint_(&G->r, 0, d->ndim - 1);
    int64_t e = d->shape[axis], ishape[LF_MAX_DIMS], sshape[LF_MAX_DIMS];
    int indim = d->ndim;
    if (d->ndim == 1) {
        indim = rint_(&G->r, 1, 2);
        for (int k = 0; k < indim; k++) ishape[k] = sshape[k] = rint_(&G->r, 0, 6);
    } else {
        for (int k = 0; k < indim; k++) {
            sshape[k] = k == axis ? rint_(&G->r, 0, 6) : d->shape[k];
            ishape[k] = k != axis && chance(&G->r, 30) ? 1 : sshape[k];
        }
    }
    if (e == 0) ishape[d->ndim == 1 ? 0 : axis] = sshape[d->ndim == 1 ? 0 : axis] = 0;
    lf_dtype it = chance(&G->r, 50) ? LF_I32 : LF_I64;
    lf_node *bits = lf_random(g, it, LF_RANDOM_BITS, indim, ishape, rnext(&G->r));
    char src[96];
    snprintf(src, sizeof src, "(b) -> b %% %lld - %lld", (long long)(2 * (e ? e : 1)), (long long)(e ? e : 1));
    lf_node *idx = lf_map(g, lf_fn_parse(g, src), bits);
    lf_dtype vt = (lf_dtype)rint_(&G->r, 1, 4);
    lf_node *val = lf_random(g, vt, vt == LF_I32 || vt == LF_I64 ? LF_RANDOM_BITS : LF_RANDOM_UNIFORM, indim, sshape,
                             rnext(&G->r));
    if (vt == LF_I32 || vt == LF_I64) val = lf_map(g, lf_fn_parse(g, "(v) -> v % 7 - 3"), val);
    else if (chance(&G->r, 30)) val = lf_map(g, lf_fn_parse(g, "(v) -> v * 4 - 2"), val);
    lf_scatter_op op = (lf_scatter_op)rint_(&G->r, 0, 4);
    if (d->dtype == LF_BOOL && (op == LF_SCATTER_ADD || op == LF_SCATTER_PROD)) op = LF_SCATTER_MAX;
    return lf_scatter(g, op, d, axis, idx, val);
}

int gen_scalar_update(gen *G) {
    int changed = 0;
    G->exponent_class_changed = false;
    for (int id = 0; id < G->g->nnodes; id++) {
        lf_node *c = G->g->nodes[id];
        if (c->kind != NODE_CONST || !chance(&G->r, 70)) continue;
        double v = SPECIAL[rint_(&G->r, 0, NSPECIAL - 1)];
        int before = graph_pow_exponent_class(c->u.value, c->dtype);
        cr_assert_eq(lf_scalar_set(G->g, c, v), LF_OK, "scalar_set: %s", lf_errmsg(G->ctx));
        if (c->pow_exponent && graph_pow_exponent_class(c->u.value, c->dtype) != before)
            G->exponent_class_changed = true;
        changed++;
    }
    return changed;
}

/* A stencil: several slices of one node (taps at random offsets along one
 * or two axes, usually more than LF_MAX_ARGS of them, rarely more than
 * GRAPH_MAX_PARAMS) combined by adds, some scaled by a constant: many loads
 * of one buffer in one fn (the planner counts the buffer once). */
static lf_node *gen_stencil(gen *G) {
    lf_graph *g = G->g;
    lf_node *x = pick(G);
    for (int t = 0; t < 6 && (x->ndim == 0 || x->numel == 0); t++) x = pick(G);
    if (x->ndim == 0 || x->numel == 0) return NULL;
    if (lf_node_dtype(x) == LF_BOOL) x = lf_cast(g, x, LF_I32);
    bool shortest = true; /* every axis too short for nine distinct offsets: taps of the flat view */
    for (int d = 0; d < x->ndim; d++) shortest &= x->shape[d] < 12;
    if (shortest && x->numel >= 12 && chance(&G->r, 70)) x = lf_reshape(g, x, 1, (int64_t[]){-1});
    int a = rint_(&G->r, 0, x->ndim - 1), b = x->ndim >= 2 && chance(&G->r, 50) ? (a + 1) % x->ndim : -1;
    int64_t ea = x->shape[a], eb = b >= 0 ? x->shape[b] : 1;
    /* output extents: small enough that the taps have many distinct offsets */
    int64_t wa = rint_(&G->r, 1, ea > 9 ? (int)ea - 8 : 1), wb = b >= 0 ? rint_(&G->r, 1, eb > 3 ? (int)eb - 2 : 1) : 1;
    int taps = chance(&G->r, 3) ? rint_(&G->r, GRAPH_MAX_PARAMS - 2, GRAPH_MAX_PARAMS + 8) : rint_(&G->r, 2, 14);
    lf_node *acc = NULL;
    for (int t = 0; t < taps; t++) {
        int64_t oa = rint_(&G->r, 0, (int)(ea - wa)), ob = b >= 0 ? rint_(&G->r, 0, (int)(eb - wb)) : 0;
        lf_node *v = lf_slice(g, x, a, oa, oa + wa, 1);
        if (b >= 0) v = lf_slice(g, v, b, ob, ob + wb, 1);
        if (chance(&G->r, 30)) v = lf_mul(g, v, lf_const(g, lf_node_dtype(x), rint_(&G->r, -3, 3)));
        acc = acc ? lf_add(g, acc, v) : v;
    }
    return acc;
}

/* lf_pad (any mode, borders up to twice the extent so that reflect keeps
 * reflecting, a special constant) or lf_concat (pieces made from x along an
 * axis: slices, empty ones, casts to other dtypes, maps, another pool node of
 * the right shape), followed half the time by a consumer that fuses with it:
 * a map, a 3-tap stencil of slices, or a reduction. */
static lf_node *gen_pad_concat(gen *G) {
    lf_graph *g = G->g;
    lf_node *x = pick(G);
    if (x->ndim == 0) x = lf_expand_dims(g, x, 0);
    int a = rint_(&G->r, 0, x->ndim - 1);
    lf_node *y;
    if (chance(&G->r, 50)) {
        lf_pad_mode mode = (lf_pad_mode)rint_(&G->r, 0, 2);
        int64_t before[LF_MAX_DIMS], after[LF_MAX_DIMS];
        for (int d = 0; d < x->ndim; d++) {
            int64_t e = x->shape[d];
            bool pad = (d == a || chance(&G->r, 30)) && (e > 0 || mode == LF_PAD_CONSTANT);
            before[d] = pad ? rint_(&G->r, 0, (int)(2 * e + 1)) : 0;
            after[d] = pad ? rint_(&G->r, 0, (int)(2 * e + 1)) : 0;
        }
        y = lf_pad(g, x, before, after, mode, SPECIAL[rint_(&G->r, 0, NSPECIAL - 1)]);
    } else {
        int n = rint_(&G->r, 1, 5);
        lf_node *pieces[5];
        int64_t e = x->shape[a];
        for (int k = 0; k < n; k++) {
            int64_t lo = rint_(&G->r, 0, (int)e), hi = rint_(&G->r, (int)lo, (int)e);
            lf_node *p = lf_slice(g, x, a, lo, hi, 1);
            switch (rint_(&G->r, 0, 4)) {
            case 0: p = decomplex(g, rnext(&G->r), lf_cast(g, p, (lf_dtype)rint_(&G->r, 0, LF_NDTYPES - 1))); break;
            case 1: p = lf_apply(g, LF_OP_NEG, lf_cast(g, p, LF_F32), NULL, NULL); break;
            case 2: p = lf_slice(g, x, a, LF_NONE, LF_NONE, -1); break;
            default: break;
            }
            pieces[k] = p;
        }
        for (int t = 0; t < 4; t++) { /* a pool node that fits beside them */
            lf_node *o = pick(G);
            bool fits = o->ndim == x->ndim && o != x;
            for (int d = 0; fits && d < x->ndim; d++) fits = d == a || o->shape[d] == x->shape[d];
            if (fits) {
                pieces[rint_(&G->r, 0, n - 1)] = o;
                break;
            }
        }
        y = lf_concat(g, n, pieces, chance(&G->r, 50) ? a : a - x->ndim);
    }
    if (!y || y->ndim == 0 || chance(&G->r, 50)) return y;
    switch (rint_(&G->r, 0, 2)) {
    case 0: return lf_add(g, lf_mul(g, y, lf_const(g, lf_node_dtype(y), 2)), lf_const(g, lf_node_dtype(y), 1));
    case 1: {
        int64_t e = y->shape[a];
        if (e < 3 || lf_node_dtype(y) == LF_BOOL) return y;
        return lf_add(g, lf_add(g, lf_slice(g, y, a, 0, e - 2, 1), lf_slice(g, y, a, 1, e - 1, 1)),
                      lf_slice(g, y, a, 2, e, 1));
    }
    default: return lf_reduce(g, LF_RED_SUM, y, 1, &a, chance(&G->r, 50));
    }
}

/* An f32 input [r, c] of the generator's values (a tenth special). */
static lf_node *f32_matrix(gen *G, int64_t r, int64_t c) {
    int64_t shape[2] = {r, c}, n = r * c;
    double *vals = malloc((size_t)(n ? n : 1) * sizeof *vals);
    for (int64_t i = 0; i < n; i++)
        vals[i] = chance(&G->r, 10) ? SPECIAL[rint_(&G->r, 0, NSPECIAL - 1)] : (double)rint_(&G->r, -400, 400) / 64.0;
    lf_buffer *b = tu_buf(G->ctx, LF_F32, 2, shape, vals);
    free(vals);
    lf_node *x = lf_input(G->g, b);
    lf_buffer_free(b);
    return x;
}

/* A contraction (lazyfuse.h, "Contractions"): A @ B written as a zip-reduce
 * (B as given, or transposed: the inner form), a matrix-vector product, or
 * a batched matmul (a batch axis of 2); K crosses LF_CONTRACT_BLOCK in a
 * twentieth; operands sometimes through a map (a prologue) from the pool. */
static lf_node *gen_contract(gen *G) {
    lf_graph *g = G->g;
    int64_t M = rint_(&G->r, 1, 4), N = rint_(&G->r, 1, 4);
    int64_t K = chance(&G->r, 5) ? rint_(&G->r, 250, 300) : rint_(&G->r, chance(&G->r, 5) ? 0 : 1, 12);
    int form = rint_(&G->r, 0, 3);
    lf_node *A = f32_matrix(G, form == 3 ? 2 * M : M, K);
    if (form == 3) A = lf_reshape(g, A, 3, (int64_t[]){2, M, K});
    if (chance(&G->r, 30)) A = lf_mul(g, A, lf_const(g, LF_F32, SPECIAL[rint_(&G->r, 0, NSPECIAL - 1)]));
    if (chance(&G->r, 20)) A = lf_abs(g, A);
    int ax;
    lf_node *prod;
    switch (form) {
    case 0: /* A[:, :, None] * B[None, :, :] */
        prod = lf_mul(g, lf_expand_dims(g, A, 2), lf_expand_dims(g, f32_matrix(G, K, N), 0));
        ax = 1;
        break;
    case 1: /* A[:, None, :] * BT[None, :, :] over the last axis */
        prod = lf_mul(g, lf_expand_dims(g, A, 1), lf_expand_dims(g, f32_matrix(G, N, K), 0));
        ax = 2;
        break;
    case 2: /* A * v, v a row */
        prod = lf_mul(g, A, f32_matrix(G, 1, K));
        ax = 1;
        break;
    default: { /* batched: A[b, :, :, None] * B[b, None, :, :] */
        lf_node *B = lf_reshape(g, f32_matrix(G, 2 * K, N), 3, (int64_t[]){2, K, N});
        prod = lf_mul(g, lf_expand_dims(g, A, 3), lf_expand_dims(g, B, 1));
        ax = 2;
        break;
    }
    }
    lf_node *c = lf_reduce(g, LF_RED_SUM, prod, 1, &ax, chance(&G->r, 20));
    if (chance(&G->r, 30)) c = lf_maximum(g, c, lf_const(g, LF_F32, 0.0)); /* an epilogue */
    return c;
}

/* Builds random graph i; returns the outputs in outs (1..3). */
int gen_graph(gen *G, lf_ctx *ctx, uint64_t seed, int index, lf_node **outs) {
    memset(G, 0, sizeof *G);
    G->r.s = seed ^ (0xd1b54a32d192ed03ULL * (uint64_t)(index + 1));
    G->ctx = ctx;
    G->g = lf_graph_new(ctx);
    cr_assert(G->g != NULL, "lf_graph_new: %s", lf_errmsg(ctx));
    lf_graph *g = G->g;
    int ninputs = rint_(&G->r, 1, 3);
    for (int i = 0; i < ninputs; i++) push(G, new_input(G));
    if (chance(&G->r, 20)) push(G, lf_iota(g, (lf_dtype)rint_(&G->r, 1, REAL_NDTYPES - 1), rint_(&G->r, 1, 4)));
    if (chance(&G->r, 25)) { /* a random node over the first input's shape */
        const lf_node *s0 = G->pool[0];
        lf_random_dist dist = (lf_random_dist)rint_(&G->r, 0, 2);
        static const lf_dtype ints[] = {LF_I32, LF_I64, LF_I8, LF_U8, LF_I16, LF_U16, LF_U32, LF_U64};
        static const lf_dtype floats[] = {LF_F32, LF_F64, LF_F16, LF_BF16};
        lf_dtype t = dist == LF_RANDOM_BITS ? ints[rint_(&G->r, 0, 7)] : floats[rint_(&G->r, 0, 3)];
        push(G, lf_random(g, t, dist, s0->ndim, s0->shape, rnext(&G->r)));
    }
    if (chance(&G->r, 20))
        push(G, decomplex(g, rnext(&G->r),
                          lf_fill(g, (lf_dtype)rint_(&G->r, 0, LF_NDTYPES - 1), SPECIAL[rint_(&G->r, 0, NSPECIAL - 1)],
                                  1, (int64_t[]){rint_(&G->r, 1, 4)})));
    int nops = rint_(&G->r, 3, 24);
    for (int i = 0; i < nops; i++) {
        int k = rint_(&G->r, 0, 12);
        lf_node *x = k < 6 ? gen_elementwise(G) : k < 8 ? gen_view(G) : k < 10 ? gen_reduce(G)
                     : k < 11                          ? gen_row_pattern(G)
                     : k < 12                          ? gen_gather(G)
                                                       : gen_scatter(G);
        cr_assert(x != NULL, "builder failed: %s", lf_graph_errmsg(g));
        if (chance(&G->r, 4)) lf_node_materialize(g, x);
        push(G, x);
        if (chance(&G->r, 10)) push(G, gen_scan(G)); /* lf_scan in a tenth of the steps */
        if (chance(&G->r, 10)) push(G, gen_stencil(G)); /* many taps of one buffer */
        if (chance(&G->r, 8)) push(G, gen_sort(G)); /* sort, argsort, topk in an eighth */
        if (chance(&G->r, 3)) push(G, gen_contract(G)); /* matmul-shaped sums of products */
        if (chance(&G->r, 8)) push(G, gen_pad_concat(G)); /* lf_pad, lf_concat and a fused consumer */
    }
    if (chance(&G->r, 15)) push(G, gen_stencil(G)); /* a stencil as the first output */
    if (chance(&G->r, 10)) { /* an elementwise output and a reduction over its space: one pass */
        lf_node *x = pick(G), *y = lf_cast(g, x, LF_F32);
        int axes[LF_MAX_DIMS], na = 0;
        uint32_t mask = 0;
        for (int d = 0; d < x->ndim; d++)
            if (chance(&G->r, 50)) axes[na++] = d, mask |= 1u << d;
        if (!na) mask = x->ndim ? (1u << x->ndim) - 1 : 0;
        lf_node *in = lf_abs(g, y);
        outs[0] = lf_mul(g, y, lf_const(g, LF_F32, 0.5));
        outs[1] = lf_reduce(g, safe_op(G, in, mask), in, na, na ? axes : NULL, chance(&G->r, 40));
        return 2;
    }
    int nout = rint_(&G->r, 1, 3);
    bool siblings = chance(&G->r, 40); /* several outputs over one space */
    for (int i = 0; i < nout; i++)
        outs[i] = i == 0 ? G->pool[G->n - 1] : siblings ? pick_sibling(G, outs[0]) : pick(G);
    return nout;
}
