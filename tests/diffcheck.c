/* tests/diffcheck.c: see diffcheck.h. */
#include "diffcheck.h"

#include "testutil.h"

#include "graph/graph.h"

#include <criterion/criterion.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* lazyfuse.h, "CPU backend", Results: the functions that call libmvec and
 * may differ from the reference (within 4 ulp); on CUDA the same functions
 * are the device math library's. Nothing else: cbrt, sqrt, rsqrt, fmod,
 * floor, ... are promised bit-identical. */
static bool exempt_op(lf_op op) {
    switch (op) {
    case LF_OP_EXP: case LF_OP_EXP2: case LF_OP_EXPM1: case LF_OP_LOG: case LF_OP_LOG2: case LF_OP_LOG10:
    case LF_OP_LOG1P: case LF_OP_SIN: case LF_OP_COS: case LF_OP_TAN: case LF_OP_ASIN: case LF_OP_ACOS:
    case LF_OP_ATAN: case LF_OP_SINH: case LF_OP_COSH: case LF_OP_TANH: case LF_OP_SIGMOID: case LF_OP_ERF:
    case LF_OP_ASINH: case LF_OP_ACOSH: case LF_OP_ATANH: case LF_OP_POW: case LF_OP_ATAN2: case LF_OP_HYPOT:
        return true;
    default:
        return false;
    }
}

void dc_cone_init(dc_cone *c, const lf_node *out, bool lanes) {
    const lf_graph *g = out->graph;
    c->nnodes = g->nnodes;
    c->in = calloc((size_t)g->nnodes + 1, sizeof *c->in);
    cr_assert(c->in != NULL);
    c->exempt = c->reduction = false;
    c->exempt_op = -1;
    double eps = 0x1p-53; /* the coarsest float format in the cone: its epsilon */
#define DC_EPS(t) ((t) == LF_BF16 ? 0x1p-8 : (t) == LF_F16 ? 0x1p-11 : (t) == LF_F32 ? 0x1p-24 : 0x1p-53)
#define DC_SEE(t) (eps = DC_EPS(t) > eps ? DC_EPS(t) : eps)
    c->in[out->id] = true;
    for (int id = out->id; id >= 0; id--) { /* ids are topological: inputs have lower ids */
        if (!c->in[id]) continue;
        const lf_node *n = g->nodes[id];
        for (int k = 0; k < n->ninputs; k++) c->in[n->inputs[k]->id] = true;
        DC_SEE(n->dtype);
        if (n->kind == NODE_MAP) {
            const lf_fn *f = n->u.map.fn;
            for (int k = 0; k < n->ninputs; k++) { /* the types the fn computes in */
                if (n->u.map.etype) DC_SEE(n->u.map.etype[k]);
                if (n->u.map.ctype) DC_SEE(n->u.map.ctype[k]);
            }
            for (int e = 0; e < f->nexprs; e++) {
                const fn_expr *x = &f->exprs[e];
                if (x->kind == EXPR_CAST || x->kind == EXPR_SCALAR) DC_SEE(x->cast_to);
                if (lanes && x->kind == EXPR_OP && exempt_op(x->op)) {
                    c->exempt = true;
                    c->exempt_op = (int)x->op;
                }
            }
        }
        if (lanes && n->kind == NODE_REDUCE && graph_dtype_is_float(n->inputs[0]->dtype) &&
            (n->u.reduce.op == LF_RED_SUM || n->u.reduce.op == LF_RED_MEAN || n->u.reduce.op == LF_RED_PROD))
            c->reduction = true;
        if (lanes && n->kind == NODE_REDUCE && n->u.reduce.op == LF_RED_MEAN) c->reduction = true; /* integer means too */
    }
    c->eps = eps;
#undef DC_SEE
#undef DC_EPS
}

void dc_cone_free(dc_cone *c) {
    free(c->in);
    c->in = NULL;
}

bool dc_nan_same(lf_dtype t, const void *a, const void *b) {
    (void)t;
    (void)a;
    (void)b;
    return true; /* any NaN equals any NaN (see diffcheck.h) */
}

/* Bound of an inexact cone. DC_K units of the cone's epsilon: lazyfuse.h's
 * 4 ulp for an exempt function, times 2 (an ulp is up to 2 epsilons of the
 * value), times 4 for a few exempt functions chained or a product of two
 * inexact values (relative errors add through *, /, and through exact
 * functions of slope about 1 in relative terms). A float reduction adds
 * 2^-53 per term times its condition number (both orders sum in double: each
 * is within terms * 2^-53 * sum|terms| of the exact sum; rho is terms *
 * sum|terms| / |result|, the worst over the cone), then its result is
 * rounded to the cone's dtype (in DC_K * eps). A subtraction after an
 * inexact value is not bounded in relative terms: a cancelling one shows as
 * a mismatch, and only a cancelling float sum of the cone excuses it
 * (dc_conditioning's noise); an exempt function whose result cancels later
 * is not excused here: test_fusion's differential then runs the same graph
 * compiled without libmvec (its scalar_math_ctx), which must match the
 * reference with no allowance for exempt functions. */
enum { DC_K = 32 };

double dc_rel_bound(const dc_cone *c, double rho) {
    return DC_K * (c->eps + 0x1p-53 * rho);
}

bool dc_element_ok(const dc_cone *c, lf_dtype t, const void *got, const void *want, int64_t j, double rel) {
    size_t es = lf_dtype_size(t);
    const unsigned char *a = (const unsigned char *)got + (size_t)j * es, *b = (const unsigned char *)want + (size_t)j * es;
    if (!memcmp(a, b, es)) return true;
    if (graph_dtype_is_complex(t)) { /* each part as its component float */
        lf_dtype p = graph_dtype_part(t);
        return dc_element_ok(c, p, a, b, 0, rel) && dc_element_ok(c, p, a + es / 2, b + es / 2, 0, rel);
    }
    if (!graph_dtype_is_float(t)) return false; /* bool and integers: the bytes */
    double x, y;
    x = graph_scalar_load(a, t, 0).f; /* every float dtype, f16 and bf16 too */
    y = graph_scalar_load(b, t, 0).f;
    if (isnan(x) || isnan(y)) return isnan(x) && isnan(y) && dc_nan_same(t, a, b);
    if (dc_cone_exact(c)) return false; /* bit for bit (-0.0 is not +0.0) */
    if (isinf(x) || isinf(y)) return false;
    double sub = t == LF_F64 ? DBL_TRUE_MIN : t == LF_F32 ? FLT_TRUE_MIN : t == LF_F16 ? 0x1p-24 : 0x1p-133;
    /* subnormal results: an ulp is absolute */
    return fabs(x - y) <= rel * fabs(y) + DC_K * sub;
}

int64_t dc_first_bad(const dc_cone *c, lf_dtype t, const void *got, const void *want, int64_t m, double rel) {
    size_t bytes = (size_t)m * lf_dtype_size(t);
    if (!memcmp(got, want, bytes)) return -1;
    for (int64_t j = 0; j < m; j++)
        if (!dc_element_ok(c, t, got, want, j, rel)) return j;
    return -1;
}

void dc_format(char *buf, int cap, lf_dtype t, const void *p, int64_t j) {
    switch (t) {
    case LF_BOOL: snprintf(buf, (size_t)cap, "%u", ((const uint8_t *)p)[j]); break;
    case LF_I32: snprintf(buf, (size_t)cap, "%" PRId32, ((const int32_t *)p)[j]); break;
    case LF_I64: snprintf(buf, (size_t)cap, "%" PRId64, ((const int64_t *)p)[j]); break;
    case LF_F32: {
        uint32_t u;
        memcpy(&u, (const float *)p + j, 4);
        snprintf(buf, (size_t)cap, "%.9g (0x%08" PRIx32 ")", (double)((const float *)p)[j], u);
        break;
    }
    case LF_I8:
    case LF_U8:
    case LF_I16:
    case LF_U16:
    case LF_U32: snprintf(buf, (size_t)cap, "%" PRId64, graph_scalar_load(p, t, j).i); break;
    case LF_U64: snprintf(buf, (size_t)cap, "%" PRIu64, ((const uint64_t *)p)[j]); break;
    case LF_F16:
    case LF_BF16: {
        uint16_t u;
        memcpy(&u, (const uint16_t *)p + j, 2);
        snprintf(buf, (size_t)cap, "%.5g (0x%04x)", graph_scalar_load(p, t, j).f, (unsigned)u);
        break;
    }
    case LF_C64:
    case LF_C128: {
        lf_scalar v = graph_scalar_load(p, t, j);
        snprintf(buf, (size_t)cap, "(%a, %a)", v.f, v.im);
        break;
    }
    default: {
        uint64_t u;
        memcpy(&u, (const double *)p + j, 8);
        snprintf(buf, (size_t)cap, "%.17g (0x%016" PRIx64 ")", ((const double *)p)[j], u);
        break;
    }
    }
}

/* Whether a float sum or mean of the cone is dominated by cancellation on
 * the reference (|result| <= 1e-9 * the sum of |terms| somewhere, with some
 * term nonzero): its sign and low digits are then rounding noise. Or whether
 * its terms are noise themselves: their mean magnitude is at most 1e-6 of
 * an earlier sum or mean's result of the cone (LF_TEST_SEED=83044988397918
 * graph 92 of commit f7c9831: mean(x - mean(x)) over 20 equal values of
 * 1.4e10, whose mean is off by 2 ulp on the reference and 3 in lanes). The
 * compiled backends round float sums in another order than the reference
 * (16 lanes and fixed blocks, lazyfuse.h "CPU backend"), and a discontinuous
 * consumer (a comparison, argmax, a division by zero) turns that noise into
 * any value (LF_TEST_SEED=64323225818024 graph 24 of commit 1ee0b22:
 * mean(x - mean(x)) of 30 integers is 8.9e-17 in order and -2.8e-17 in
 * lanes, and argmax(x * it) picks another element). Also measures rho, the
 * bound's condition number. Only sums of the cone count: one elsewhere in
 * the graph cannot change this output. */
void dc_conditioning(lf_ctx *ref, lf_graph *g, const dc_cone *c, dc_cond *out) {
    out->rho = 0;
    out->noise = false;
    out->node = -1;
    double big = 0; /* the largest |result| of the cone's sums and means so far */
    int nn = c->nnodes;
    for (int id = 0; id < nn && !out->noise; id++) {
        if (!c->in[id]) continue;
        lf_node *r = g->nodes[id];
        if (r->kind != NODE_REDUCE || (r->u.reduce.op != LF_RED_SUM && r->u.reduce.op != LF_RED_MEAN)) continue;
        lf_node *x = r->inputs[0];
        if (!graph_dtype_is_float(x->dtype) && r->u.reduce.op != LF_RED_MEAN) continue;
        int axes[LF_MAX_DIMS], na = 0;
        for (int d = 0; d < x->ndim; d++)
            if (r->u.reduce.axes & (1u << d)) axes[na++] = d;
        lf_node *mag = lf_reduce(g, LF_RED_SUM, lf_abs(g, lf_cast(g, x, LF_F64)), na, axes, r->u.reduce.keepdims);
        lf_node *val = lf_cast(g, r, LF_F64);
        cr_assert(mag && val, "%s", lf_graph_errmsg(g));
        lf_node *both[2] = {val, mag};
        lf_buffer *b[2] = {lf_buffer_new_like(ref, val), lf_buffer_new_like(ref, mag)};
        cr_assert_eq(lf_eval(g, 2, both, b), LF_OK, "%s", lf_errmsg(ref));
        int64_t m = lf_buffer_numel(b[0]);
        double *v = malloc((size_t)(m ? m : 1) * sizeof *v), *a = malloc((size_t)(m ? m : 1) * sizeof *a);
        cr_assert(v && a);
        tu_read(b[0], v);
        tu_read(b[1], a);
        double terms = (double)(x->numel / (r->numel ? r->numel : 1)); /* per result */
        if (r->u.reduce.op == LF_RED_MEAN) /* the mean of the terms: compare with their mean magnitude */
            for (int64_t j = 0; j < m; j++) a[j] /= terms;
        for (int64_t j = 0; j < m && !out->noise; j++) {
            if (!(a[j] > 0) || !isfinite(a[j])) continue;
            double mean_term = r->u.reduce.op == LF_RED_MEAN ? a[j] : a[j] / (terms > 0 ? terms : 1);
            if (fabs(v[j]) <= 1e-9 * a[j] || mean_term <= 1e-6 * big) {
                out->noise = true;
                out->node = id;
            } else {
                double rho = terms * a[j] / fabs(v[j]);
                if (rho > out->rho) out->rho = rho;
            }
        }
        for (int64_t j = 0; j < m; j++)
            if (isfinite(v[j]) && fabs(v[j]) > big) big = fabs(v[j]);
        free(v);
        free(a);
        lf_buffer_free(b[0]);
        lf_buffer_free(b[1]);
    }
}
