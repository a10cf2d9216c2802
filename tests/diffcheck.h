/* tests/diffcheck.h: how far an evaluator's output may be from the
 * reference evaluator's, output by output, derived from what lazyfuse.h
 * promises about the nodes the output depends on (its cone).
 *
 * - Bool and integer outputs: raw bytes, always (never through double: an
 *   i64 above 2^53 would lose its low bits).
 * - Float outputs whose cone has no exempt math function and no float
 *   reduction: bit for bit (lazyfuse.h, "CPU backend", Results: every
 *   operator, cast and iota is bit-identical), NaN aside as dc_nan_same says.
 * - Float outputs whose cone has exempt functions (libmvec on the CPU,
 *   device math on CUDA: lazyfuse.h's list, exp ... erf, asinh, acosh,
 *   atanh, pow, atan2, hypot, sigmoid) or float sums/means/products (summed
 *   in double in another order): within dc_rel_bound, a relative bound in
 *   units of the cone's narrowest float epsilon (dc_cone.eps) scaled by the
 *   conditioning of the cone's float reductions (sum of |terms| over
 *   |result|, dc_conditioning, measured on the reference and only after a
 *   mismatch, since it adds nodes to the graph and evaluates them).
 * - A cone whose float sum is cancellation noise (dc_cond.noise) makes the
 *   output incomparable: the caller skips it, logs the skip with tu_note and
 *   bounds how many it skips.
 * What must stay true: the exempt list is lazyfuse.h's (no function the
 * header promises bit-identical may be added to it to make a test pass),
 * the NaN rule is the one function dc_nan_same, and a cone is only ever
 * widened (a node counted in a cone that it is not in makes the check
 * looser, never stricter).
 */
#ifndef LF_TEST_DIFFCHECK_H
#define LF_TEST_DIFFCHECK_H

#include "lazyfuse.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct dc_cone {
    int nnodes;      /* g->nnodes when the cone was taken */
    bool *in;        /* in[id]: node id is in the cone (the output included) */
    bool exempt;     /* an exempt math function is in it (only when asked) */
    int exempt_op;   /* one of them (lf_op), for messages; -1 if none */
    bool reduction;  /* a float sum, mean or product is in it (only when asked) */
    double eps;      /* 2^-24 if an f32 value is in it, else 2^-53 */
} dc_cone;

/* The cone of out in its graph. lanes: the evaluator sums floats in its own
 * order and calls exempt math (compiled CPU, CUDA); false for the CPU
 * interpreter, whose arithmetic is the reference's, so every cone is exact. */
void dc_cone_init(dc_cone *c, const lf_node *out, bool lanes);
void dc_cone_free(dc_cone *c);
/* Whether every float value of the output must be bit-identical. */
static inline bool dc_cone_exact(const dc_cone *c) { return !c->exempt && !c->reduction; }

/* The NaN rule: whether two values of float dtype t, at least one of them
 * NaN, count as the same. lazyfuse.h promises bit-identical results but
 * says nothing of NaN signs and payloads across evaluators (libm and the
 * compilers may give either sign), so: any NaN equals any NaN. One place to
 * change if the header comes to promise NaN bits. */
bool dc_nan_same(lf_dtype t, const void *a, const void *b);

/* The conditioning of c's float sums and means on the reference (ref is a
 * context on LF_BACKEND_REFERENCE; nodes are added to out's graph). */
typedef struct dc_cond {
    double rho;      /* the largest sum|terms| / |result| * terms (>= 0) */
    bool noise;      /* a sum is cancellation noise (see diffcheck.c) */
    int node;        /* the id of the sum that made it noise, -1 if none */
} dc_cond;
void dc_conditioning(lf_ctx *ref, lf_graph *g, const dc_cone *c, dc_cond *out);

/* The relative bound of an inexact cone (rho from dc_conditioning, 0 before
 * it was measured). */
double dc_rel_bound(const dc_cone *c, double rho);

/* Element j of got against want (host bytes of dtype t): raw bytes for bool
 * and integers, the NaN rule, then bit-identity for an exact cone or
 * |got - want| <= rel * |want| (infinities equal) for another. */
bool dc_element_ok(const dc_cone *c, lf_dtype t, const void *got, const void *want, int64_t j, double rel);
/* The first element of m that is not ok, or -1. */
int64_t dc_first_bad(const dc_cone *c, lf_dtype t, const void *got, const void *want, int64_t m, double rel);
/* Element j as a double, for messages; dc_format writes it exactly
 * (integers as integers, floats with %.17g and their bits). */
void dc_format(char *buf, int cap, lf_dtype t, const void *p, int64_t j);

#endif
