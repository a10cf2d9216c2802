/* tests/test_views.c: views in the reference evaluator.
 *
 * Covers reshape (with -1 inference, 0-d <-> 1-element, zero-size), permute,
 * transpose (2-d and 3-d), broadcast_to, expand_dims (negative axes too) and
 * slice (positive and negative steps, LF_NONE bounds, negative start / stop,
 * empty slices, start == extent with a negative step), views of views
 * (reshape of a transpose reads in the transposed logical order, as NumPy's
 * row-major reshape does), views of computed nodes, and views feeding maps and
 * reductions. Small cases are hand-computed; random chains of view ops are
 * checked against a tiny dense NumPy-like model written here (deterministic
 * given LF_TEST_SEED).
 */
#include "testutil.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TU_GRAPH_SUITE(views);

/* ---- helpers ---------------------------------------------------------------- */

static const char *shape_str(char *buf, size_t cap, int ndim, const int64_t *shape) {
    size_t k = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < ndim && k < cap; d++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%lld", d ? "," : "", (long long)shape[d]);
    if (k < cap) snprintf(buf + k, cap - k, "]");
    return buf;
}

static void chk_shape(const char *what, lf_node *n, int ndim, const int64_t *shape) {
    cr_assert(n != NULL, "%s: node is NULL: %s", what, lf_errmsg(ctx));
    int64_t got[LF_MAX_DIMS];
    int nd = lf_node_ndim(n);
    for (int d = 0; d < nd && d < LF_MAX_DIMS; d++) got[d] = lf_node_dim(n, d);
    char a[128], b[128];
    bool same = nd == ndim;
    for (int d = 0; same && d < ndim; d++) same = got[d] == shape[d];
    cr_assert(same, "%s: shape %s, want %s", what, shape_str(a, sizeof a, nd, got),
              shape_str(b, sizeof b, ndim, shape));
}

/* Checks shape and dtype, evaluates n and compares every element exactly. */
static void chk(const char *what, lf_node *n, int ndim, const int64_t *shape, const double *want) {
    chk_shape(what, n, ndim, shape);
    int64_t count = 1;
    for (int d = 0; d < ndim; d++) count *= shape[d];
    cr_assert_eq(lf_node_numel(n), count, "%s: numel", what);
    lf_buffer *b = tu_eval1(ctx, g, n);
    cr_assert_eq(lf_buffer_ndim(b), ndim, "%s: buffer ndim", what);
    tu_expect(what, b, want, count, 0, 0);
    lf_buffer_free(b);
}

/* iota(n) as f64, reshaped to shape. */
static lf_node *iota_shaped(int ndim, const int64_t *shape) {
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= shape[d];
    lf_node *x = lf_reshape(g, lf_iota(g, LF_F64, n), ndim, shape);
    cr_assert(x != NULL, "%s", lf_errmsg(ctx));
    return x;
}

/* The same values from a buffer (an input rather than a computed source). */
static lf_node *iota_input(int ndim, const int64_t *shape) {
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= shape[d];
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = (double)i;
    lf_node *x = lf_input(g, tu_buf(ctx, LF_F64, ndim, shape, v));
    free(v);
    cr_assert(x != NULL, "%s", lf_errmsg(ctx));
    return x;
}

#define SH(...) (int64_t[]){__VA_ARGS__}
#define V(...) (double[]){__VA_ARGS__}

/* ---- reshape -------------------------------------------------------------------- */

Test(views, reshape_basic_and_inferred) {
    lf_node *x = lf_iota(g, LF_F64, 24);
    double want[24];
    for (int i = 0; i < 24; i++) want[i] = i;
    chk("reshape [2,3,4]", lf_reshape(g, x, 3, SH(2, 3, 4)), 3, SH(2, 3, 4), want);
    chk("reshape [-1,6]", lf_reshape(g, x, 2, SH(-1, 6)), 2, SH(4, 6), want);
    chk("reshape [4,-1]", lf_reshape(g, x, 2, SH(4, -1)), 2, SH(4, 6), want);
    chk("reshape [2,-1,3]", lf_reshape(g, x, 3, SH(2, -1, 3)), 3, SH(2, 4, 3), want);
    chk("reshape [-1]", lf_reshape(g, lf_reshape(g, x, 2, SH(6, 4)), 1, SH(-1)), 1, SH(24), want);
    chk("reshape [1,24,1]", lf_reshape(g, x, 3, SH(1, 24, 1)), 3, SH(1, 24, 1), want);
    chk("reshape 8 dims", lf_reshape(g, x, 8, SH(1, 2, 1, 3, 1, 4, 1, 1)), 8,
        SH(1, 2, 1, 3, 1, 4, 1, 1), want);
    /* an input buffer reshaped */
    lf_node *y = iota_input(2, SH(3, 8));
    chk("input reshape [8,3]", lf_reshape(g, y, 2, SH(8, 3)), 2, SH(8, 3), want);
    /* integer dtype kept */
    lf_node *z = lf_reshape(g, lf_iota(g, LF_I32, 6), 2, SH(3, 2));
    cr_assert_eq(lf_node_dtype(z), LF_I32);
    chk("i32 reshape", z, 2, SH(3, 2), V(0, 1, 2, 3, 4, 5));
}

Test(views, reshape_scalar_and_one_element) {
    lf_node *c = lf_const(g, LF_F64, 5);
    chk("0-d -> [1]", lf_reshape(g, c, 1, SH(1)), 1, SH(1), V(5));
    chk("0-d -> [1,1,1]", lf_reshape(g, c, 3, SH(1, 1, 1)), 3, SH(1, 1, 1), V(5));
    chk("0-d -> [-1]", lf_reshape(g, c, 1, SH(-1)), 1, SH(1), V(5));
    lf_node *one = lf_reshape(g, lf_iota(g, LF_F64, 1), 2, SH(1, 1));
    lf_node *s = lf_reshape(g, one, 0, NULL);
    chk("[1,1] -> 0-d", s, 0, NULL, V(0));
    lf_buffer *b = tu_eval1(ctx, g, s);
    cr_assert_eq(lf_buffer_ndim(b), 0);
    cr_assert_eq(lf_buffer_numel(b), 1);
    /* a 0-d buffer input reshaped */
    lf_node *sb = lf_input(g, tu_buf(ctx, LF_I64, 0, NULL, V(-7)));
    chk("0-d input -> [1]", lf_reshape(g, sb, 1, SH(1)), 1, SH(1), V(-7));
}

Test(views, reshape_zero_size) {
    lf_node *z = lf_fill(g, LF_F64, 1, 2, SH(0, 3));
    chk("[0,3] -> [3,0]", lf_reshape(g, z, 2, SH(3, 0)), 2, SH(3, 0), NULL);
    chk("[0,3] -> [0]", lf_reshape(g, z, 1, SH(0)), 1, SH(0), NULL);
    chk("[0,3] -> [2,0,5]", lf_reshape(g, z, 3, SH(2, 0, 5)), 3, SH(2, 0, 5), NULL);
}

/* ---- permute / transpose ----------------------------------------------------- */

Test(views, permute_3d) {
    lf_node *x = iota_shaped(3, SH(2, 3, 4));
    /* out[i,j,k] = in[j,k,i] = 12j + 4k + i */
    chk("permute (2,0,1)", lf_permute(g, x, (int[]){2, 0, 1}), 3, SH(4, 2, 3),
        V(0, 4, 8, 12, 16, 20, 1, 5, 9, 13, 17, 21, 2, 6, 10, 14, 18, 22, 3, 7, 11, 15, 19, 23));
    /* out[i,j,k] = in[i,k,j] = 12i + 4k + j */
    chk("permute (0,2,1)", lf_permute(g, x, (int[]){0, 2, 1}), 3, SH(2, 4, 3),
        V(0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11, 12, 16, 20, 13, 17, 21, 14, 18, 22, 15, 19, 23));
    double ident[24];
    for (int i = 0; i < 24; i++) ident[i] = i;
    chk("permute identity", lf_permute(g, x, (int[]){0, 1, 2}), 3, SH(2, 3, 4), ident);
    /* permute of a permute back to the start */
    lf_node *p = lf_permute(g, lf_permute(g, x, (int[]){2, 0, 1}), (int[]){1, 2, 0});
    chk("permute inverse", p, 3, SH(2, 3, 4), ident);
    /* an input buffer permuted */
    chk("input permute (1,0)", lf_permute(g, iota_input(2, SH(2, 3)), (int[]){1, 0}), 2, SH(3, 2),
        V(0, 3, 1, 4, 2, 5));
}

Test(views, transpose_2d_3d) {
    chk("transpose [2,3]", lf_transpose(g, iota_shaped(2, SH(2, 3))), 2, SH(3, 2),
        V(0, 3, 1, 4, 2, 5));
    /* out[i,j,k] = in[k,j,i] = 12k + 4j + i */
    chk("transpose [2,3,4]", lf_transpose(g, iota_shaped(3, SH(2, 3, 4))), 3, SH(4, 3, 2),
        V(0, 12, 4, 16, 8, 20, 1, 13, 5, 17, 9, 21, 2, 14, 6, 18, 10, 22, 3, 15, 7, 19, 11, 23));
    chk("transpose 1-d", lf_transpose(g, lf_iota(g, LF_F64, 3)), 1, SH(3), V(0, 1, 2));
    chk("transpose 0-d", lf_transpose(g, lf_const(g, LF_F64, 2)), 0, NULL, V(2));
    lf_node *x = iota_input(2, SH(3, 4));
    chk("transpose twice", lf_transpose(g, lf_transpose(g, x)), 2, SH(3, 4),
        V(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11));
    chk("transpose [1,3]", lf_transpose(g, iota_shaped(2, SH(1, 3))), 2, SH(3, 1), V(0, 1, 2));
}

/* ---- broadcast_to / expand_dims ----------------------------------------------- */

Test(views, broadcast_to) {
    lf_node *r = lf_arange(g, LF_F64, 1, 4, 1);
    chk("[3] -> [2,3]", lf_broadcast_to(g, r, 2, SH(2, 3)), 2, SH(2, 3), V(1, 2, 3, 1, 2, 3));
    lf_node *c = lf_reshape(g, r, 2, SH(3, 1));
    chk("[3,1] -> [3,4]", lf_broadcast_to(g, c, 2, SH(3, 4)), 2, SH(3, 4),
        V(1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3));
    chk("0-d -> [2,2]", lf_broadcast_to(g, lf_const(g, LF_F64, 7), 2, SH(2, 2)), 2, SH(2, 2),
        V(7, 7, 7, 7));
    chk("[1] -> [0]", lf_broadcast_to(g, lf_iota(g, LF_F64, 1), 1, SH(0)), 1, SH(0), NULL);
    lf_node *two = lf_reshape(g, lf_arange(g, LF_F64, 1, 3, 1), 2, SH(2, 1));
    chk("[2,1] -> [2,2,2]", lf_broadcast_to(g, two, 3, SH(2, 2, 2)), 3, SH(2, 2, 2),
        V(1, 1, 2, 2, 1, 1, 2, 2));
    chk("[3] -> [3]", lf_broadcast_to(g, r, 1, SH(3)), 1, SH(3), V(1, 2, 3));
    chk("input [1,3] -> [2,1,3]", lf_broadcast_to(g, iota_input(2, SH(1, 3)), 3, SH(2, 1, 3)), 3,
        SH(2, 1, 3), V(0, 1, 2, 0, 1, 2));
    lf_node *b = lf_broadcast_to(g, lf_const(g, LF_I32, 3), 3, SH(2, 0, 4));
    chk("0-d -> [2,0,4]", b, 3, SH(2, 0, 4), NULL);
}

Test(views, expand_dims) {
    lf_node *x = iota_shaped(2, SH(2, 3));
    double w[6] = {0, 1, 2, 3, 4, 5};
    chk("axis 0", lf_expand_dims(g, x, 0), 3, SH(1, 2, 3), w);
    chk("axis 1", lf_expand_dims(g, x, 1), 3, SH(2, 1, 3), w);
    chk("axis 2", lf_expand_dims(g, x, 2), 3, SH(2, 3, 1), w);
    chk("axis -1", lf_expand_dims(g, x, -1), 3, SH(2, 3, 1), w);
    chk("axis -2", lf_expand_dims(g, x, -2), 3, SH(2, 1, 3), w);
    chk("axis -3", lf_expand_dims(g, x, -3), 3, SH(1, 2, 3), w);
    chk("0-d axis 0", lf_expand_dims(g, lf_const(g, LF_F64, 4), 0), 1, SH(1), V(4));
    chk("0-d axis -1", lf_expand_dims(g, lf_const(g, LF_F64, 4), -1), 1, SH(1), V(4));
    /* expand then broadcast: a column */
    lf_node *col = lf_broadcast_to(g, lf_expand_dims(g, lf_iota(g, LF_F64, 3), 1), 2, SH(3, 2));
    chk("expand+broadcast", col, 2, SH(3, 2), V(0, 0, 1, 1, 2, 2));
    /* up to 8 dims */
    lf_node *e = lf_iota(g, LF_F64, 2);
    for (int k = 0; k < 7; k++) e = lf_expand_dims(g, e, k % 2 ? -1 : 0);
    chk("8 dims", e, 8, SH(1, 1, 1, 1, 2, 1, 1, 1), V(0, 1));
}

/* ---- slices --------------------------------------------------------------------- */

Test(views, slice_1d) {
    lf_node *x = lf_iota(g, LF_F64, 10);
    chk("[2:8:2]", lf_slice(g, x, 0, 2, 8, 2), 1, SH(3), V(2, 4, 6));
    chk("[2:9:2]", lf_slice(g, x, 0, 2, 9, 2), 1, SH(4), V(2, 4, 6, 8));
    chk("[8:2:-2]", lf_slice(g, x, 0, 8, 2, -2), 1, SH(3), V(8, 6, 4));
    chk("[::-1]", lf_slice(g, x, 0, LF_NONE, LF_NONE, -1), 1, SH(10), V(9, 8, 7, 6, 5, 4, 3, 2, 1, 0));
    chk("[::3]", lf_slice(g, x, 0, LF_NONE, LF_NONE, 3), 1, SH(4), V(0, 3, 6, 9));
    chk("[:]", lf_slice(g, x, 0, LF_NONE, LF_NONE, 1), 1, SH(10), V(0, 1, 2, 3, 4, 5, 6, 7, 8, 9));
    chk("[-3:]", lf_slice(g, x, 0, -3, LF_NONE, 1), 1, SH(3), V(7, 8, 9));
    chk("[:-3]", lf_slice(g, x, 0, LF_NONE, -3, 1), 1, SH(7), V(0, 1, 2, 3, 4, 5, 6));
    chk("[-2:-5:-1]", lf_slice(g, x, 0, -2, -5, -1), 1, SH(3), V(8, 7, 6));
    chk("[-10:10]", lf_slice(g, x, 0, -10, 10, 1), 1, SH(10), V(0, 1, 2, 3, 4, 5, 6, 7, 8, 9));
    chk("[9::-4]", lf_slice(g, x, 0, 9, LF_NONE, -4), 1, SH(3), V(9, 5, 1));
    chk("[:0:-1]", lf_slice(g, x, 0, LF_NONE, 0, -1), 1, SH(9), V(9, 8, 7, 6, 5, 4, 3, 2, 1));
    chk("[:4:-3]", lf_slice(g, x, 0, LF_NONE, 4, -3), 1, SH(2), V(9, 6));
    chk("[0:1]", lf_slice(g, x, 0, 0, 1, 1), 1, SH(1), V(0));
    chk("[3::7]", lf_slice(g, x, 0, 3, LF_NONE, 7), 1, SH(1), V(3));
    chk("[1:10:100]", lf_slice(g, x, 0, 1, 10, 100), 1, SH(1), V(1));
    chk("[::-100]", lf_slice(g, x, 0, LF_NONE, LF_NONE, -100), 1, SH(1), V(9));
}

Test(views, slice_empty) {
    lf_node *x = lf_iota(g, LF_F64, 10);
    chk("[5:5]", lf_slice(g, x, 0, 5, 5, 1), 1, SH(0), NULL);
    chk("[5:2]", lf_slice(g, x, 0, 5, 2, 1), 1, SH(0), NULL);
    chk("[2:5:-1]", lf_slice(g, x, 0, 2, 5, -1), 1, SH(0), NULL);
    chk("[10:]", lf_slice(g, x, 0, 10, LF_NONE, 1), 1, SH(0), NULL);
    chk("[:0]", lf_slice(g, x, 0, LF_NONE, 0, 1), 1, SH(0), NULL);
    chk("[0::-1]", lf_slice(g, x, 0, 0, LF_NONE, -1), 1, SH(1), V(0));
    chk("[0:0:-1]", lf_slice(g, x, 0, 0, 0, -1), 1, SH(0), NULL);
    /* slices of an empty axis */
    lf_node *e = lf_iota(g, LF_F64, 0);
    chk("empty [:]", lf_slice(g, e, 0, LF_NONE, LF_NONE, 1), 1, SH(0), NULL);
    chk("empty [::-1]", lf_slice(g, e, 0, LF_NONE, LF_NONE, -1), 1, SH(0), NULL);
    chk("empty [0:0]", lf_slice(g, e, 0, 0, 0, 1), 1, SH(0), NULL);
    /* an empty slice of a 2-d array keeps the other axis */
    chk("[3,4][:, 2:2]", lf_slice(g, iota_shaped(2, SH(3, 4)), 1, 2, 2, 1), 2, SH(3, 0), NULL);
    /* an empty slice feeds a map and a sum */
    lf_node *s = lf_slice(g, x, 0, 7, 3, 1);
    lf_node *m = lf_mul(g, s, lf_const(g, LF_F64, 2));
    chk("map of empty slice", m, 1, SH(0), NULL);
    chk("sum of empty slice", lf_reduce(g, LF_RED_SUM, s, 0, NULL, false), 0, NULL, V(0));
}

/* Steps near INT64_MAX / INT64_MIN take one element (Python: len(range(0, 10,
 * 2**63 - 1)) == 1); the length is computed without overflow, and a one-element
 * slice of a 2-d array along its outer axis keeps a usable stride. */
Test(views, slice_extreme_steps) {
    lf_node *x = lf_iota(g, LF_F64, 10);
    chk("[0:10:MAX]", lf_slice(g, x, 0, 0, 10, INT64_MAX), 1, SH(1), V(0));
    chk("[5:10:MAX-1]", lf_slice(g, x, 0, 5, 10, INT64_MAX - 1), 1, SH(1), V(5));
    chk("[::MAX]", lf_slice(g, x, 0, LF_NONE, LF_NONE, INT64_MAX), 1, SH(1), V(0));
    chk("[9::MAX]", lf_slice(g, x, 0, 9, LF_NONE, INT64_MAX), 1, SH(1), V(9));
    chk("[10::MAX]", lf_slice(g, x, 0, 10, LF_NONE, INT64_MAX), 1, SH(0), NULL);
    chk("[::-MAX]", lf_slice(g, x, 0, LF_NONE, LF_NONE, -INT64_MAX), 1, SH(1), V(9));
    chk("[9:0:MIN+1]", lf_slice(g, x, 0, 9, 0, INT64_MIN + 1), 1, SH(1), V(9));
    chk("[0:9:MAX/2]", lf_slice(g, x, 0, 0, 9, INT64_MAX / 2), 1, SH(1), V(0));
    chk("[:-1:MAX]", lf_slice(g, x, 0, LF_NONE, -1, INT64_MAX), 1, SH(1), V(0));
    chk("[-10:10:MAX]", lf_slice(g, x, 0, -10, 10, INT64_MAX), 1, SH(1), V(0));
    chk("[0:0:MAX]", lf_slice(g, x, 0, 0, 0, INT64_MAX), 1, SH(0), NULL);
    chk("[0:10:9]", lf_slice(g, x, 0, 0, 10, 9), 1, SH(2), V(0, 9));
    chk("[9:0:-9]", lf_slice(g, x, 0, 9, LF_NONE, -9), 1, SH(2), V(9, 0));
    /* rows of a [4, 5] array: the stride would be step * 5 */
    lf_node *m = iota_input(2, SH(4, 5));
    chk("[1::MAX, :]", lf_slice(g, m, 0, 1, LF_NONE, INT64_MAX), 2, SH(1, 5), V(5, 6, 7, 8, 9));
    chk("[3::-MAX, :]", lf_slice(g, m, 0, 3, LF_NONE, -INT64_MAX), 2, SH(1, 5), V(15, 16, 17, 18, 19));
    lf_node *one = lf_slice(g, m, 0, 2, LF_NONE, INT64_MAX / 3);
    chk("row 2 transposed", lf_transpose(g, one), 2, SH(5, 1), V(10, 11, 12, 13, 14));
    chk("sum of row 2", lf_reduce(g, LF_RED_SUM, one, 0, NULL, false), 0, NULL, V(60));
}

/* start == extent is in range; with a negative step Python starts at the last element. */
Test(views, slice_start_at_extent_negative_step) {
    lf_node *x = lf_iota(g, LF_F64, 5);
    chk("[5::-1]", lf_slice(g, x, 0, 5, LF_NONE, -1), 1, SH(5), V(4, 3, 2, 1, 0));
    chk("[5:1:-2]", lf_slice(g, x, 0, 5, 1, -2), 1, SH(2), V(4, 2));
    chk("[5:4:-1]", lf_slice(g, x, 0, 5, 4, -1), 1, SH(0), NULL);
}

Test(views, slice_2d) {
    lf_node *x = iota_input(2, SH(4, 5));
    chk("[:, 1:4:2]", lf_slice(g, x, 1, 1, 4, 2), 2, SH(4, 2), V(1, 3, 6, 8, 11, 13, 16, 18));
    chk("[::-2, :]", lf_slice(g, x, 0, LF_NONE, LF_NONE, -2), 2, SH(2, 5),
        V(15, 16, 17, 18, 19, 5, 6, 7, 8, 9));
    chk("[:, ::-1]", lf_slice(g, x, 1, -1, LF_NONE, -1), 2, SH(4, 5),
        V(4, 3, 2, 1, 0, 9, 8, 7, 6, 5, 14, 13, 12, 11, 10, 19, 18, 17, 16, 15));
    /* both axes: x[1:3, ::-2] */
    lf_node *y = lf_slice(g, lf_slice(g, x, 0, 1, 3, 1), 1, LF_NONE, LF_NONE, -2);
    chk("[1:3, ::-2]", y, 2, SH(2, 3), V(9, 7, 5, 14, 12, 10));
    /* a slice of a slice on the same axis: x[1:9][::-2] */
    lf_node *z = lf_slice(g, lf_slice(g, lf_iota(g, LF_F64, 10), 0, 1, 9, 1), 0, LF_NONE, LF_NONE, -2);
    chk("[1:9][::-2]", z, 1, SH(4), V(8, 6, 4, 2));
    lf_node *w = lf_slice(g, lf_slice(g, lf_iota(g, LF_F64, 10), 0, LF_NONE, LF_NONE, -1), 0, 2, 7, 2);
    chk("[::-1][2:7:2]", w, 1, SH(3), V(7, 5, 3));
    /* 3-d middle axis */
    chk("[2,3,4][:, -1:0:-1, 1]",
        lf_slice(g, lf_slice(g, iota_shaped(3, SH(2, 3, 4)), 1, -1, 0, -1), 2, 1, 2, 1), 3,
        SH(2, 2, 1), V(9, 5, 21, 17));
}

Test(views, slices_of_transposes) {
    /* t = iota(12).reshape(3,4).T, shape [4,3], t[i,j] = 4j + i */
    lf_node *t = lf_transpose(g, iota_shaped(2, SH(3, 4)));
    chk("t", t, 2, SH(4, 3), V(0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11));
    chk("t[3:0:-2]", lf_slice(g, t, 0, 3, 0, -2), 2, SH(2, 3), V(3, 7, 11, 1, 5, 9));
    chk("t[:, ::-1]", lf_slice(g, t, 1, LF_NONE, LF_NONE, -1), 2, SH(4, 3),
        V(8, 4, 0, 9, 5, 1, 10, 6, 2, 11, 7, 3));
    chk("t[1:3, 1:]", lf_slice(g, lf_slice(g, t, 0, 1, 3, 1), 1, 1, LF_NONE, 1), 2, SH(2, 2),
        V(5, 9, 6, 10));
    /* transpose of a slice */
    lf_node *s = lf_slice(g, iota_input(2, SH(3, 4)), 1, LF_NONE, LF_NONE, -2);
    chk("x[:, ::-2].T", lf_transpose(g, s), 2, SH(2, 3), V(3, 7, 11, 1, 5, 9));
}

/* ---- views of views ------------------------------------------------------------ */

Test(views, reshape_of_transpose_is_row_major) {
    /* x = [[0,1,2],[3,4,5]]; x.T = [[0,3],[1,4],[2,5]] */
    for (int src = 0; src < 2; src++) {
        lf_node *x = src ? iota_input(2, SH(2, 3)) : iota_shaped(2, SH(2, 3));
        lf_node *t = lf_transpose(g, x);
        chk("x.T.reshape(6)", lf_reshape(g, t, 1, SH(6)), 1, SH(6), V(0, 3, 1, 4, 2, 5));
        chk("x.T.reshape(2,3)", lf_reshape(g, t, 2, SH(2, 3)), 2, SH(2, 3), V(0, 3, 1, 4, 2, 5));
        chk("x.T.reshape(-1,2)", lf_reshape(g, t, 2, SH(-1, 2)), 2, SH(3, 2), V(0, 3, 1, 4, 2, 5));
        chk("x.T.reshape(3,2).T", lf_transpose(g, lf_reshape(g, t, 2, SH(3, 2))), 2, SH(2, 3),
            V(0, 1, 2, 3, 4, 5));
        chk("x.T.reshape(6)[::2]", lf_slice(g, lf_reshape(g, t, 1, SH(6)), 0, LF_NONE, LF_NONE, 2), 1,
            SH(3), V(0, 1, 2));
    }
    /* 3-d: iota(24).reshape(2,3,4).transpose(1,2,0).reshape(4,6) */
    lf_node *p = lf_permute(g, iota_shaped(3, SH(2, 3, 4)), (int[]){1, 2, 0});
    /* p[j,k,i] = 12i + 4j + k, read row-major over (j,k,i) */
    double want[24];
    int n = 0;
    for (int j = 0; j < 3; j++)
        for (int k = 0; k < 4; k++)
            for (int i = 0; i < 2; i++) want[n++] = 12 * i + 4 * j + k;
    chk("permute(1,2,0).reshape(4,6)", lf_reshape(g, p, 2, SH(4, 6)), 2, SH(4, 6), want);
    chk("permute(1,2,0).reshape(24)", lf_reshape(g, p, 1, SH(24)), 1, SH(24), want);
}

Test(views, reshape_of_other_views) {
    chk("x[::-1].reshape(2,3)",
        lf_reshape(g, lf_slice(g, lf_iota(g, LF_F64, 6), 0, LF_NONE, LF_NONE, -1), 2, SH(2, 3)), 2,
        SH(2, 3), V(5, 4, 3, 2, 1, 0));
    lf_node *cols = lf_slice(g, iota_shaped(2, SH(3, 4)), 1, 1, 3, 1);
    chk("x[:, 1:3]", cols, 2, SH(3, 2), V(1, 2, 5, 6, 9, 10));
    chk("x[:, 1:3].reshape(2,3)", lf_reshape(g, cols, 2, SH(2, 3)), 2, SH(2, 3), V(1, 2, 5, 6, 9, 10));
    chk("x[:, 1:3].reshape(6)", lf_reshape(g, cols, 1, SH(-1)), 1, SH(6), V(1, 2, 5, 6, 9, 10));
    lf_node *bc = lf_broadcast_to(g, lf_iota(g, LF_F64, 3), 2, SH(2, 3));
    chk("broadcast.reshape(3,2)", lf_reshape(g, bc, 2, SH(3, 2)), 2, SH(3, 2), V(0, 1, 2, 0, 1, 2));
    chk("broadcast.T", lf_transpose(g, bc), 2, SH(3, 2), V(0, 0, 1, 1, 2, 2));
    chk("broadcast[:, ::-1]", lf_slice(g, lf_broadcast_to(g, lf_iota(g, LF_F64, 3), 2, SH(4, 3)), 1,
                                        LF_NONE, LF_NONE, -1),
        2, SH(4, 3), V(2, 1, 0, 2, 1, 0, 2, 1, 0, 2, 1, 0));
    chk("expand(reverse)", lf_expand_dims(g, lf_slice(g, lf_iota(g, LF_F64, 3), 0, LF_NONE, LF_NONE, -1), 0),
        2, SH(1, 3), V(2, 1, 0));
    /* a broadcast of a transpose of a slice */
    lf_node *ts = lf_transpose(g, lf_slice(g, iota_shaped(2, SH(2, 4)), 1, 1, 4, 2)); /* [[1,5],[3,7]] */
    chk("broadcast(T(slice))", lf_broadcast_to(g, lf_expand_dims(g, ts, 0), 3, SH(2, 2, 2)), 3,
        SH(2, 2, 2), V(1, 5, 3, 7, 1, 5, 3, 7));
}

Test(views, views_of_computed_nodes) {
    lf_node *x = iota_input(2, SH(2, 3));
    lf_node *m = lf_add(g, lf_mul(g, x, lf_const(g, LF_F64, 10)), lf_const(g, LF_F64, 1));
    chk("(10x+1).T", lf_transpose(g, m), 2, SH(3, 2), V(1, 31, 11, 41, 21, 51));
    chk("(10x+1).T.reshape(6)", lf_reshape(g, lf_transpose(g, m), 1, SH(6)), 1, SH(6),
        V(1, 31, 11, 41, 21, 51));
    chk("(10x+1)[:, ::-1]", lf_slice(g, m, 1, LF_NONE, LF_NONE, -1), 2, SH(2, 3),
        V(21, 11, 1, 51, 41, 31));
    lf_node *s = lf_reduce(g, LF_RED_SUM, x, 1, (int[]){1}, false); /* [3, 12] */
    chk("sum.broadcast", lf_broadcast_to(g, lf_expand_dims(g, s, 1), 2, SH(2, 2)), 2, SH(2, 2),
        V(3, 3, 12, 12));
    chk("sum[::-1]", lf_slice(g, s, 0, LF_NONE, LF_NONE, -1), 1, SH(2), V(12, 3));
}

Test(views, views_feed_maps_and_reductions) {
    /* x = [[0,5,1],[3,2,4]]; t = x.T = [[0,3],[5,2],[1,4]] */
    lf_node *x = lf_input(g, tu_buf(ctx, LF_F64, 2, SH(2, 3), V(0, 5, 1, 3, 2, 4)));
    lf_node *t = lf_transpose(g, x);
    lf_fn *f = lf_fn_parse(g, "(v) -> v*10 + 1");
    cr_assert(f != NULL, "%s", lf_errmsg(ctx));
    chk("map(T)", lf_map(g, f, t), 2, SH(3, 2), V(1, 31, 51, 21, 11, 41));
    chk("T + T[::-1]", lf_add(g, t, lf_slice(g, t, 0, LF_NONE, LF_NONE, -1)), 2, SH(3, 2),
        V(1, 7, 10, 4, 1, 7));
    chk("T * [3]-broadcast", lf_mul(g, t, lf_expand_dims(g, lf_iota(g, LF_F64, 3), 1)), 2, SH(3, 2),
        V(0, 0, 5, 2, 2, 8));
    chk("sum(T, 0)", lf_reduce(g, LF_RED_SUM, t, 1, (int[]){0}, false), 1, SH(2), V(6, 9));
    chk("sum(T, 1)", lf_reduce(g, LF_RED_SUM, t, 1, (int[]){1}, false), 1, SH(3), V(3, 7, 5));
    chk("argmax(T, 0)", lf_reduce(g, LF_RED_ARGMAX, t, 1, (int[]){0}, false), 1, SH(2), V(1, 2));
    chk("argmax(T, 1)", lf_reduce(g, LF_RED_ARGMAX, t, 1, (int[]){1}, false), 1, SH(3), V(1, 0, 1));
    chk("argmin(T) all", lf_reduce(g, LF_RED_ARGMIN, t, 0, NULL, false), 0, NULL, V(0));
    chk("argmax(T) all", lf_reduce(g, LF_RED_ARGMAX, t, 0, NULL, false), 0, NULL, V(2));
    chk("max(x[:, ::-1], 1)", lf_reduce(g, LF_RED_MAX, lf_slice(g, x, 1, LF_NONE, LF_NONE, -1), 1,
                                        (int[]){1}, true),
        2, SH(2, 1), V(5, 4));
    chk("argmax(x[:, ::-1], 1)", lf_reduce(g, LF_RED_ARGMAX, lf_slice(g, x, 1, LF_NONE, LF_NONE, -1),
                                           1, (int[]){1}, false),
        1, SH(2), V(1, 0));
    chk("sum(T.reshape(6)[1::2])",
        lf_reduce(g, LF_RED_SUM, lf_slice(g, lf_reshape(g, t, 1, SH(6)), 0, 1, LF_NONE, 2), 0, NULL,
                  false),
        0, NULL, V(9));
    lf_node *bc = lf_broadcast_to(g, lf_iota(g, LF_I32, 3), 2, SH(4, 3));
    chk("sum(broadcast, 0)", lf_reduce(g, LF_RED_SUM, bc, 1, (int[]){0}, false), 1, SH(3), V(0, 4, 8));
    chk("mean(broadcast)", lf_reduce(g, LF_RED_MEAN, bc, 0, NULL, true), 2, SH(1, 1), V(1));
}

Test(views, dims_queries) {
    lf_node *x = iota_shaped(3, SH(2, 3, 4));
    cr_expect_eq(lf_node_ndim(x), 3);
    cr_expect_eq(lf_node_dim(x, 0), 2);
    cr_expect_eq(lf_node_dim(x, 2), 4);
    cr_expect_eq(lf_node_dim(x, 3), -1);
    cr_expect_eq(lf_node_dim(x, 100), -1);
    cr_expect_eq(lf_node_numel(x), 24);
    lf_buffer *b = tu_buf(ctx, LF_F32, 3, SH(2, 3, 4), NULL);
    cr_expect_eq(lf_buffer_dim(b, -1), 4);
    cr_expect_eq(lf_buffer_dim(b, -3), 2);
    cr_expect_eq(lf_buffer_dim(b, -4), -1);
    cr_expect_eq(lf_buffer_dim(b, 3), -1);
    cr_expect_eq(lf_buffer_bytes(b), 96);
    lf_node *t = lf_transpose(g, lf_input(g, b));
    lf_buffer *tb = lf_buffer_new_like(ctx, t);
    cr_assert(tb != NULL);
    cr_expect_eq(lf_buffer_dim(tb, 0), 4);
    cr_expect_eq(lf_buffer_dim(tb, 2), 2);
    cr_expect_eq(lf_buffer_dtype(tb), LF_F32);
}

/* ---- random chains against a dense model --------------------------------------- */

typedef struct arr {
    int ndim;
    int64_t shape[LF_MAX_DIMS];
    int64_t n;
    double *d;
} arr;

static arr a_make(int ndim, const int64_t *shape) {
    arr a = {ndim, {0}, 1, NULL};
    for (int k = 0; k < ndim; k++) {
        a.shape[k] = shape[k];
        a.n *= shape[k];
    }
    a.d = calloc((size_t)(a.n ? a.n : 1), sizeof(double));
    cr_assert(a.d != NULL);
    return a;
}

static void unravel(int64_t flat, int ndim, const int64_t *shape, int64_t *idx) {
    for (int k = ndim - 1; k >= 0; k--) {
        idx[k] = shape[k] ? flat % shape[k] : 0;
        flat = shape[k] ? flat / shape[k] : 0;
    }
}

static int64_t ravel(int ndim, const int64_t *shape, const int64_t *idx) {
    int64_t f = 0;
    for (int k = 0; k < ndim; k++) f = f * shape[k] + idx[k];
    return f;
}

static arr m_permute(const arr *a, const int *perm) {
    int64_t sh[LF_MAX_DIMS];
    for (int k = 0; k < a->ndim; k++) sh[k] = a->shape[perm[k]];
    arr r = a_make(a->ndim, sh);
    for (int64_t f = 0; f < r.n; f++) {
        int64_t idx[LF_MAX_DIMS], in[LF_MAX_DIMS];
        unravel(f, r.ndim, r.shape, idx);
        for (int k = 0; k < a->ndim; k++) in[perm[k]] = idx[k];
        r.d[f] = a->d[ravel(a->ndim, a->shape, in)];
    }
    return r;
}

static arr m_broadcast(const arr *a, int ndim, const int64_t *shape) {
    arr r = a_make(ndim, shape);
    int off = ndim - a->ndim;
    for (int64_t f = 0; f < r.n; f++) {
        int64_t idx[LF_MAX_DIMS], in[LF_MAX_DIMS];
        unravel(f, ndim, shape, idx);
        for (int k = 0; k < a->ndim; k++) in[k] = a->shape[k] == 1 ? 0 : idx[k + off];
        r.d[f] = a->d[ravel(a->ndim, a->shape, in)];
    }
    return r;
}

/* Python's slice rules with checked (not clamped) bounds. */
static void slice_resolve(int64_t n, int64_t start, int64_t stop, int64_t step, int64_t *first,
                          int64_t *count) {
    if (start == LF_NONE) {
        start = step > 0 ? 0 : n - 1;
    } else {
        if (start < 0) start += n;
        if (step < 0 && start == n) start = n - 1;
    }
    if (stop == LF_NONE) stop = step > 0 ? n : -1;
    else if (stop < 0) stop += n;
    if (step > 0) *count = stop > start ? (stop - start + step - 1) / step : 0;
    else *count = start > stop ? (start - stop - step - 1) / (-step) : 0;
    *first = start;
}

static arr m_slice(const arr *a, int axis, int64_t start, int64_t stop, int64_t step) {
    int64_t first, count;
    slice_resolve(a->shape[axis], start, stop, step, &first, &count);
    int64_t sh[LF_MAX_DIMS];
    memcpy(sh, a->shape, sizeof sh);
    sh[axis] = count;
    arr r = a_make(a->ndim, sh);
    for (int64_t f = 0; f < r.n; f++) {
        int64_t idx[LF_MAX_DIMS];
        unravel(f, r.ndim, r.shape, idx);
        idx[axis] = first + idx[axis] * step;
        r.d[f] = a->d[ravel(a->ndim, a->shape, idx)];
    }
    return r;
}

static arr m_reshape(const arr *a, int ndim, const int64_t *shape) {
    int64_t sh[LF_MAX_DIMS], known = 1;
    int infer = -1;
    for (int k = 0; k < ndim; k++) {
        sh[k] = shape[k];
        if (shape[k] == -1) infer = k;
        else known *= shape[k];
    }
    if (infer >= 0) sh[infer] = a->n / known;
    arr r = a_make(ndim, sh);
    memcpy(r.d, a->d, (size_t)a->n * sizeof(double));
    return r;
}

static arr m_expand(const arr *a, int axis) {
    if (axis < 0) axis += a->ndim + 1;
    int64_t sh[LF_MAX_DIMS];
    for (int k = 0, j = 0; k <= a->ndim; k++) sh[k] = k == axis ? 1 : a->shape[j++];
    arr r = a_make(a->ndim + 1, sh);
    memcpy(r.d, a->d, (size_t)a->n * sizeof(double));
    return r;
}

/* Sum (op 0) or first argmax (op 1) over one axis. */
static arr m_reduce(const arr *a, int axis, int op) {
    int64_t sh[LF_MAX_DIMS];
    for (int k = 0, j = 0; k < a->ndim; k++)
        if (k != axis) sh[j++] = a->shape[k];
    arr r = a_make(a->ndim - 1, sh);
    for (int64_t f = 0; f < r.n; f++) {
        int64_t idx[LF_MAX_DIMS], in[LF_MAX_DIMS];
        unravel(f, r.ndim, r.shape, idx);
        for (int k = 0, j = 0; k < a->ndim; k++) in[k] = k == axis ? 0 : idx[j++];
        double acc = 0, best = -INFINITY;
        int64_t bi = 0;
        for (int64_t i = 0; i < a->shape[axis]; i++) {
            in[axis] = i;
            double v = a->d[ravel(a->ndim, a->shape, in)];
            acc += v;
            if (v > best) {
                best = v;
                bi = i;
            }
        }
        r.d[f] = op == 0 ? acc : (double)bi;
    }
    return r;
}

static void m_check(const char *what, lf_graph *gg, lf_node *n, const arr *m) {
    char a[128], b[128];
    cr_assert(n != NULL, "%s: node is NULL: %s", what, lf_errmsg(ctx));
    int64_t got[LF_MAX_DIMS];
    int nd = lf_node_ndim(n);
    for (int d = 0; d < nd; d++) got[d] = lf_node_dim(n, d);
    bool same = nd == m->ndim;
    for (int d = 0; same && d < nd; d++) same = got[d] == m->shape[d];
    cr_assert(same, "%s: shape %s, want %s (seed %llu)", what, shape_str(a, sizeof a, nd, got),
              shape_str(b, sizeof b, m->ndim, m->shape), (unsigned long long)tu_seed());
    lf_buffer *buf = lf_buffer_new_like(ctx, n);
    cr_assert(buf != NULL);
    cr_assert_eq(lf_eval(gg, 1, &n, &buf), LF_OK, "%s: eval: %s", what, lf_errmsg(ctx));
    tu_expect(what, buf, m->d, m->n, 0, 0);
    lf_buffer_free(buf);
}

/* A random shape of n elements (n > 0) in 1..4 dims, with extents of 1
 * sprinkled in and sometimes one extent given as -1. */
static int random_shape(int64_t n, int maxdims, int64_t *shape, bool *used_infer) {
    int ndim = (int)tu_randint(1, maxdims);
    for (int k = 0; k < ndim; k++) shape[k] = 1;
    int64_t rest = n;
    for (int64_t p = 2; rest > 1;) {
        if (rest % p == 0) {
            shape[tu_randint(0, ndim - 1)] *= p;
            rest /= p;
        } else {
            p++;
        }
    }
    *used_infer = false;
    if (tu_randint(0, 2) == 0) {
        shape[tu_randint(0, ndim - 1)] = -1;
        *used_infer = true;
    }
    return ndim;
}

Test(views, random_view_chains) {
    static const int64_t starts[][4] = {{24, 0, 0, 0}, {4, 6, 0, 0}, {2, 3, 4, 0}, {3, 1, 8, 0},
                                        {2, 2, 3, 2}, {1, 24, 0, 0}, {6, 4, 0, 0}};
    static const int startdims[] = {1, 2, 3, 3, 4, 2, 2};
    for (int chain = 0; chain < 150; chain++) {
        lf_graph *gg = lf_graph_new(ctx);
        cr_assert(gg != NULL);
        lf_fn *fm = lf_fn_parse(gg, "(v) -> v*2 + 0.5");
        int s = (int)tu_randint(0, 6);
        arr m = a_make(startdims[s], starts[s]);
        for (int64_t i = 0; i < m.n; i++) m.d[i] = (double)i;
        lf_node *x;
        if (chain % 2) {
            x = lf_input(gg, tu_buf(ctx, LF_F64, m.ndim, m.shape, m.d));
        } else {
            x = lf_reshape(gg, lf_iota(gg, LF_F64, 24), m.ndim, m.shape);
        }
        char what[512];
        int wl = snprintf(what, sizeof what, "chain %d from %s", chain,
                          shape_str((char[64]){0}, 64, m.ndim, m.shape));
        for (int step = 0; step < 6; step++) {
            int kind = (int)tu_randint(0, 6);
            arr r;
            lf_node *y = NULL;
            char desc[128];
            if (kind == 0) {
                y = lf_transpose(gg, x);
                int perm[LF_MAX_DIMS];
                for (int k = 0; k < m.ndim; k++) perm[k] = m.ndim - 1 - k;
                r = m_permute(&m, perm);
                snprintf(desc, sizeof desc, ".T");
            } else if (kind == 1 && m.ndim > 0) {
                int perm[LF_MAX_DIMS];
                for (int k = 0; k < m.ndim; k++) perm[k] = k;
                for (int k = m.ndim - 1; k > 0; k--) {
                    int j = (int)tu_randint(0, k), tmp = perm[k];
                    perm[k] = perm[j];
                    perm[j] = tmp;
                }
                y = lf_permute(gg, x, perm);
                r = m_permute(&m, perm);
                int dl = snprintf(desc, sizeof desc, ".permute(");
                for (int k = 0; k < m.ndim; k++)
                    dl += snprintf(desc + dl, sizeof desc - (size_t)dl, "%s%d", k ? "," : "", perm[k]);
                snprintf(desc + dl, sizeof desc - (size_t)dl, ")");
            } else if (kind == 2 && m.ndim > 0) {
                int axis = (int)tu_randint(0, m.ndim - 1);
                int64_t n = m.shape[axis];
                static const int64_t steps[] = {-3, -2, -1, 1, 2, 3};
                int64_t step = steps[tu_randint(0, 5)];
                int64_t start = tu_randint(0, 3) == 0 ? LF_NONE : tu_randint(-n, n);
                int64_t stop = tu_randint(0, 3) == 0 ? LF_NONE : tu_randint(-n, n);
                y = lf_slice(gg, x, axis, start, stop, step);
                r = m_slice(&m, axis, start, stop, step);
                snprintf(desc, sizeof desc, ".slice(axis %d, %lld:%lld:%lld)", axis,
                         start == LF_NONE ? -999LL : (long long)start,
                         stop == LF_NONE ? -999LL : (long long)stop, (long long)step);
            } else if (kind == 3 && m.ndim < LF_MAX_DIMS) {
                int axis = (int)tu_randint(-m.ndim - 1, m.ndim);
                y = lf_expand_dims(gg, x, axis);
                r = m_expand(&m, axis);
                snprintf(desc, sizeof desc, ".expand_dims(%d)", axis);
            } else if (kind == 4 && m.n > 0) {
                int64_t sh[LF_MAX_DIMS];
                bool inf;
                int nd = random_shape(m.n, 4, sh, &inf);
                y = lf_reshape(gg, x, nd, sh);
                r = m_reshape(&m, nd, sh);
                snprintf(desc, sizeof desc, ".reshape%s", shape_str((char[64]){0}, 64, nd, sh));
            } else if (kind == 5 && m.ndim < LF_MAX_DIMS && m.n <= 200) {
                int64_t sh[LF_MAX_DIMS];
                int nd = m.ndim;
                if (tu_randint(0, 1)) { /* a new leading axis */
                    sh[0] = tu_randint(0, 4) == 0 ? 0 : 2;
                    memcpy(sh + 1, m.shape, (size_t)m.ndim * sizeof(int64_t));
                    nd++;
                } else { /* stretch the extents of 1 */
                    memcpy(sh, m.shape, (size_t)m.ndim * sizeof(int64_t));
                    for (int k = 0; k < nd; k++)
                        if (sh[k] == 1 && tu_randint(0, 1)) sh[k] = 3;
                }
                y = lf_broadcast_to(gg, x, nd, sh);
                r = m_broadcast(&m, nd, sh);
                snprintf(desc, sizeof desc, ".broadcast_to%s", shape_str((char[64]){0}, 64, nd, sh));
            } else if (kind == 6) {
                y = lf_map(gg, fm, x);
                r = a_make(m.ndim, m.shape);
                for (int64_t i = 0; i < m.n; i++) r.d[i] = m.d[i] * 2 + 0.5;
                snprintf(desc, sizeof desc, ".map(v*2+0.5)");
            } else {
                continue;
            }
            if (wl < (int)sizeof what - 1)
                wl += snprintf(what + wl, sizeof what - (size_t)wl, "%s", desc);
            m_check(what, gg, y, &r);
            free(m.d);
            m = r;
            x = y;
        }
        /* the final view feeds reductions over a random axis */
        if (m.ndim > 0) {
            int axis = (int)tu_randint(0, m.ndim - 1);
            arr su = m_reduce(&m, axis, 0);
            m_check(what, gg, lf_reduce(gg, LF_RED_SUM, x, 1, &axis, false), &su);
            free(su.d);
            if (m.shape[axis] > 0) {
                arr am = m_reduce(&m, axis, 1);
                m_check(what, gg, lf_reduce(gg, LF_RED_ARGMAX, x, 1, &axis, false), &am);
                free(am.d);
            }
        }
        free(m.d);
        lf_graph_free(gg);
    }
}

/* ---- pad and concatenate (hand-computed with NumPy 2's np.pad and
 * np.concatenate; random ones against the dense model below) ------------------ */

Test(views, pad_modes_1d) {
    lf_node *x = iota_input(1, SH(3));
    lf_node *x1 = lf_add(g, x, lf_const(g, LF_F64, 1)); /* [1 2 3], computed */
    chk("constant (2,1) 9", lf_pad(g, x1, SH(2), SH(1), LF_PAD_CONSTANT, 9), 1, SH(6), V(9, 9, 1, 2, 3, 9));
    chk("edge (2,1)", lf_pad(g, x1, SH(2), SH(1), LF_PAD_EDGE, 0), 1, SH(6), V(1, 1, 1, 2, 3, 3));
    chk("reflect (2,2)", lf_pad(g, x1, SH(2), SH(2), LF_PAD_REFLECT, 0), 1, SH(7), V(3, 2, 1, 2, 3, 2, 1));
    chk("reflect wider than the extent (5,0)", lf_pad(g, x1, SH(5), SH(0), LF_PAD_REFLECT, 0), 1, SH(8),
        V(2, 1, 2, 3, 2, 1, 2, 3));
    chk("reflect of one element", lf_pad(g, lf_slice(g, x1, 0, 1, 2, 1), SH(2), SH(1), LF_PAD_REFLECT, 0), 1,
        SH(4), V(2, 2, 2, 2));
    cr_expect_eq(lf_pad(g, x, SH(0), SH(0), LF_PAD_EDGE, 0), x, "no border: x itself");
}

Test(views, pad_modes_2d) {
    lf_node *x = iota_input(2, SH(2, 3));
    chk("edge ((1,0),(0,2))", lf_pad(g, x, SH(1, 0), SH(0, 2), LF_PAD_EDGE, 0), 2, SH(3, 5),
        V(0, 1, 2, 2, 2, 0, 1, 2, 2, 2, 3, 4, 5, 5, 5));
    chk("constant ((1,1),(2,0)) -1", lf_pad(g, x, SH(1, 2), SH(1, 0), LF_PAD_CONSTANT, -1), 2, SH(4, 5),
        V(-1, -1, -1, -1, -1, -1, -1, 0, 1, 2, -1, -1, 3, 4, 5, -1, -1, -1, -1, -1));
    chk("reflect ((0,3),(1,1))", lf_pad(g, x, SH(0, 1), SH(3, 1), LF_PAD_REFLECT, 0), 2, SH(5, 5),
        V(1, 0, 1, 2, 1, 4, 3, 4, 5, 4, 1, 0, 1, 2, 1, 4, 3, 4, 5, 4, 1, 0, 1, 2, 1));
    /* a transposed, computed x; the constant converted to x's dtype (i32: 2.7 -> 2) */
    lf_node *t = lf_cast(g, lf_transpose(g, x), LF_I32);
    chk("constant of a transpose", lf_pad(g, t, SH(0, 1), SH(1, 0), LF_PAD_CONSTANT, 2.7), 2, SH(4, 3),
        V(2, 0, 3, 2, 1, 4, 2, 2, 5, 2, 2, 2));
    /* an empty axis: constant pads it, edge and reflect refuse (NumPy too) */
    lf_node *e = iota_input(2, SH(0, 2));
    chk("constant of an empty axis", lf_pad(g, e, SH(1, 0), SH(1, 0), LF_PAD_CONSTANT, 3), 2, SH(2, 2),
        V(3, 3, 3, 3));
    chk("edge along the other axis", lf_pad(g, e, SH(0, 1), SH(0, 1), LF_PAD_EDGE, 0), 2, SH(0, 4), V(0));
}

Test(views, pad_specials_kept_bitwise) {
    double v[] = {NAN, -0.0, INFINITY, -INFINITY};
    lf_node *x = lf_input(g, tu_buf(ctx, LF_F32, 1, SH(4), v));
    lf_node *p = lf_pad(g, x, SH(2), SH(2), LF_PAD_REFLECT, 0);
    lf_buffer *b = tu_eval1(ctx, g, p);
    float got[8];
    cr_assert_eq(lf_buffer_read(b, got, sizeof got), LF_OK);
    float want[] = {INFINITY, -0.0f, NAN, -0.0f, INFINITY, -INFINITY, INFINITY, -0.0f};
    for (int i = 0; i < 8; i++)
        cr_expect(isnan(want[i]) ? isnan(got[i]) : memcmp(&got[i], &want[i], sizeof(float)) == 0,
                  "element %d: %g, want %g", i, got[i], want[i]);
    lf_buffer_free(b);
    lf_node *c = lf_pad(g, x, SH(1), SH(0), LF_PAD_CONSTANT, -0.0);
    b = tu_eval1(ctx, g, c);
    cr_assert_eq(lf_buffer_read(b, got, 5 * sizeof(float)), LF_OK);
    cr_expect(signbit(got[0]) && got[0] == 0, "the constant -0.0 keeps its sign");
    lf_buffer_free(b);
}

Test(views, concat_hand) {
    lf_node *x = iota_input(2, SH(2, 3));
    lf_node *tens = lf_mul(g, lf_slice(g, x, 1, 0, 1, 1), lf_const(g, LF_F64, 10));
    lf_node *empty = lf_slice(g, x, 1, 0, 0, 1);
    chk("axis -1 with an empty piece", lf_concat(g, 3, (lf_node *[]){x, tens, empty}, -1), 2, SH(2, 4),
        V(0, 1, 2, 0, 3, 4, 5, 30));
    chk("axis 0", lf_concat(g, 2, (lf_node *[]){x, lf_mul(g, x, lf_const(g, LF_F64, 10))}, 0), 2, SH(4, 3),
        V(0, 1, 2, 3, 4, 5, 0, 10, 20, 30, 40, 50));
    chk("one piece", lf_concat(g, 1, (lf_node *[]){x}, 1), 2, SH(2, 3), V(0, 1, 2, 3, 4, 5));
    chk("only empty pieces", lf_concat(g, 2, (lf_node *[]){empty, empty}, 1), 2, SH(2, 0), V(0));
    /* i32 and f32 promote to f64 (the header's rule); bool and i32 to i32 */
    lf_node *i = lf_cast(g, lf_slice(g, x, 0, 0, 1, 1), LF_I32);
    lf_node *f = lf_cast(g, lf_slice(g, x, 0, 1, 2, 1), LF_F32);
    lf_node *c = lf_concat(g, 2, (lf_node *[]){i, f}, 0);
    cr_expect_eq(lf_node_dtype(c), LF_F64);
    chk("i32 with f32", c, 2, SH(2, 3), V(0, 1, 2, 3, 4, 5));
    lf_node *bl = lf_cast(g, x, LF_BOOL);
    lf_node *bi = lf_concat(g, 2, (lf_node *[]){bl, i}, 0);
    cr_expect_eq(lf_node_dtype(bi), LF_I32);
    chk("bool with i32", bi, 2, SH(3, 3), V(0, 1, 1, 1, 1, 1, 0, 1, 2));
}

/* The dense model: NumPy's reflect, by repeated reflection (not the period
 * formula the library uses). */
static int64_t m_reflect(int64_t u, int64_t n) {
    if (n == 1) return 0;
    while (u < 0 || u >= n) u = u < 0 ? -u : 2 * (n - 1) - u;
    return u;
}

static arr m_pad(const arr *a, const int64_t *before, const int64_t *after, lf_pad_mode mode, double value) {
    int64_t shape[LF_MAX_DIMS];
    for (int d = 0; d < a->ndim; d++) shape[d] = before[d] + a->shape[d] + after[d];
    arr r = a_make(a->ndim, shape);
    for (int64_t i = 0; i < r.n; i++) {
        int64_t idx[LF_MAX_DIMS];
        unravel(i, r.ndim, r.shape, idx);
        bool border = false;
        for (int d = 0; d < a->ndim; d++) {
            int64_t u = idx[d] - before[d], n = a->shape[d];
            border |= u < 0 || u >= n;
            idx[d] = mode == LF_PAD_REFLECT ? m_reflect(u, n) : u < 0 ? 0 : u >= n ? n - 1 : u;
        }
        r.d[i] = mode == LF_PAD_CONSTANT && border ? value : a->d[ravel(a->ndim, a->shape, idx)];
    }
    return r;
}

/* Random chains of views, pads, concatenations and stencils over pads,
 * against the dense model (every evaluator runs this suite: views,
 * views-cpu, views-cuda). */
Test(views, random_pad_concat) {
    static const int64_t starts[][3] = {{7, 0, 0}, {3, 5, 0}, {2, 3, 4}, {1, 6, 0}, {4, 1, 3}};
    static const int startdims[] = {1, 2, 3, 2, 3};
    for (int chain = 0; chain < 40; chain++) {
        lf_graph *gg = lf_graph_new(ctx);
        cr_assert(gg != NULL);
        int s = (int)tu_randint(0, 4);
        arr m = a_make(startdims[s], starts[s]);
        for (int64_t i = 0; i < m.n; i++) m.d[i] = (double)(i * 7 % 11) - 3;
        lf_node *x = chain % 2 ? lf_input(gg, tu_buf(ctx, LF_F64, m.ndim, m.shape, m.d))
                               : lf_add(gg, lf_input(gg, tu_buf(ctx, LF_F64, m.ndim, m.shape, m.d)),
                                        lf_const(gg, LF_F64, 0));
        char what[512];
        int wl = snprintf(what, sizeof what, "chain %d from %s", chain, shape_str((char[64]){0}, 64, m.ndim, m.shape));
        for (int step = 0; step < 4; step++) {
            int kind = (int)tu_randint(0, 4);
            arr r;
            lf_node *y;
            char desc[160];
            if (kind <= 1) { /* pad */
                int64_t before[LF_MAX_DIMS], after[LF_MAX_DIMS];
                lf_pad_mode mode = (lf_pad_mode)tu_randint(0, 2);
                for (int d = 0; d < m.ndim; d++) {
                    bool empty = m.shape[d] == 0 && mode != LF_PAD_CONSTANT;
                    before[d] = empty ? 0 : tu_randint(0, 4);
                    after[d] = empty ? 0 : tu_randint(0, 4);
                }
                double value = tu_randint(-5, 5) / 2.0;
                y = lf_pad(gg, x, before, after, mode, value);
                r = m_pad(&m, before, after, mode, value);
                snprintf(desc, sizeof desc, ".pad(mode %d, before[0] %lld, after[0] %lld)", (int)mode,
                         (long long)before[0], (long long)after[0]);
            } else if (kind == 2) { /* concat of slices, reversals and maps of x along an axis */
                int axis = (int)tu_randint(0, m.ndim - 1), n = (int)tu_randint(1, 4);
                lf_node *pieces[4];
                arr pm[4];
                int64_t total = 0;
                for (int k = 0; k < n; k++) {
                    int64_t e = m.shape[axis], lo = tu_randint(0, e), hi = tu_randint(lo, e);
                    bool rev = tu_randint(0, 2) == 0;
                    pieces[k] = rev ? lf_slice(gg, x, axis, hi > lo ? hi - 1 : lo, lo > 0 && hi > lo ? lo - 1 : LF_NONE, -1)
                                    : lf_slice(gg, x, axis, lo, hi, 1);
                    pm[k] = rev ? m_slice(&m, axis, hi > lo ? hi - 1 : lo, lo > 0 && hi > lo ? lo - 1 : LF_NONE, -1)
                                : m_slice(&m, axis, lo, hi, 1);
                    if (tu_randint(0, 2) == 0) {
                        pieces[k] = lf_mul(gg, pieces[k], lf_const(gg, LF_F64, -2));
                        for (int64_t i = 0; i < pm[k].n; i++) pm[k].d[i] *= -2;
                    }
                    total += pm[k].shape[axis];
                }
                y = lf_concat(gg, n, pieces, tu_randint(0, 1) ? axis : axis - m.ndim);
                int64_t shape[LF_MAX_DIMS];
                memcpy(shape, m.shape, sizeof shape);
                shape[axis] = total;
                r = a_make(m.ndim, shape);
                for (int64_t i = 0; i < r.n; i++) {
                    int64_t idx[LF_MAX_DIMS];
                    unravel(i, r.ndim, r.shape, idx);
                    int k = 0;
                    while (idx[axis] >= pm[k].shape[axis]) idx[axis] -= pm[k++].shape[axis];
                    r.d[i] = pm[k].d[ravel(pm[k].ndim, pm[k].shape, idx)];
                }
                for (int k = 0; k < n; k++) free(pm[k].d);
                snprintf(desc, sizeof desc, ".concat(%d pieces, axis %d)", n, axis);
            } else if (kind == 3 && m.ndim >= 2) {
                y = lf_transpose(gg, x);
                int perm[LF_MAX_DIMS];
                for (int k = 0; k < m.ndim; k++) perm[k] = m.ndim - 1 - k;
                r = m_permute(&m, perm);
                snprintf(desc, sizeof desc, ".T");
            } else { /* a 3-tap stencil along an axis of the edge-padded array */
                int axis = (int)tu_randint(0, m.ndim - 1);
                if (m.shape[axis] == 0) continue;
                int64_t before[LF_MAX_DIMS] = {0}, after[LF_MAX_DIMS] = {0};
                before[axis] = after[axis] = 1;
                lf_pad_mode mode = (lf_pad_mode)tu_randint(0, 2);
                lf_node *p = lf_pad(gg, x, before, after, mode, 0.5);
                arr pmod = m_pad(&m, before, after, mode, 0.5);
                int64_t e = m.shape[axis];
                y = lf_add(gg, lf_add(gg, lf_slice(gg, p, axis, 0, e, 1), lf_slice(gg, p, axis, 1, e + 1, 1)),
                           lf_mul(gg, lf_slice(gg, p, axis, 2, e + 2, 1), lf_const(gg, LF_F64, 3)));
                arr s0 = m_slice(&pmod, axis, 0, e, 1), s1 = m_slice(&pmod, axis, 1, e + 1, 1),
                    s2 = m_slice(&pmod, axis, 2, e + 2, 1);
                r = a_make(m.ndim, m.shape);
                for (int64_t i = 0; i < r.n; i++) r.d[i] = (s0.d[i] + s1.d[i]) + s2.d[i] * 3;
                free(pmod.d), free(s0.d), free(s1.d), free(s2.d);
                snprintf(desc, sizeof desc, ".stencil3(axis %d, mode %d)", axis, (int)mode);
            }
            if (r.n > 4000) { /* keep the model small */
                free(r.d);
                continue;
            }
            if (wl < (int)sizeof what - 1) wl += snprintf(what + wl, sizeof what - (size_t)wl, "%s", desc);
            m_check(what, gg, y, &r);
            free(m.d);
            m = r;
            x = y;
        }
        free(m.d);
        lf_graph_free(gg);
    }
}

/* Strided and reversed taps of a padded array (and of a concatenation),
 * transposed or not, two or three in one kernel: the reads the compiled
 * elementwise loop splits into a border (clamped or reflected per element)
 * and an interior (a plain shifted load), with rows that start and end
 * inside the border (LF_CPU_PARALLEL_MIN=1 cuts rows between threads on
 * views-cpu), reflect borders wider than the extent, and an axis of one
 * element. Against the dense model on every evaluator. */
Test(views, split_pad_reads) {
    static const int64_t steps[] = {1, 1, 2, 3, -1, -2};
    for (int round = 0; round < 60; round++) {
        lf_graph *gg = lf_graph_new(ctx);
        cr_assert(gg != NULL);
        int ndim = (int)tu_randint(1, 3);
        int64_t shape[LF_MAX_DIMS];
        for (int d = 0; d < ndim; d++) shape[d] = tu_randint(0, 9) == 0 ? 1 : tu_randint(2, d == ndim - 1 ? 70 : 6);
        arr m = a_make(ndim, shape);
        for (int64_t i = 0; i < m.n; i++) m.d[i] = (double)(i * 13 % 17) - 8 + (i % 3) * 0.25;
        lf_node *x = lf_input(gg, tu_buf(ctx, LF_F64, m.ndim, m.shape, m.d));
        int64_t before[LF_MAX_DIMS], after[LF_MAX_DIMS];
        lf_pad_mode mode = (lf_pad_mode)tu_randint(0, 2);
        for (int d = 0; d < ndim; d++) {
            int64_t w = mode == LF_PAD_REFLECT ? 3 * shape[d] + 2 : 5;
            before[d] = tu_randint(0, 3) == 0 ? 0 : tu_randint(0, w);
            after[d] = tu_randint(0, 3) == 0 ? 0 : tu_randint(0, w);
        }
        double value = tu_randint(-4, 4) / 4.0;
        lf_node *p;
        arr pm;
        char what[256];
        int axis = (int)tu_randint(0, ndim - 1);
        if (round % 4 == 3) { /* a concatenation: x, then x reversed times 3 */
            lf_node *rev = lf_mul(gg, lf_slice(gg, x, axis, LF_NONE, LF_NONE, -1), lf_const(gg, LF_F64, 3));
            p = lf_concat(gg, 2, (lf_node *[]){x, rev}, axis);
            arr r = m_slice(&m, axis, LF_NONE, LF_NONE, -1);
            int64_t sh[LF_MAX_DIMS];
            memcpy(sh, m.shape, sizeof sh);
            sh[axis] *= 2;
            pm = a_make(ndim, sh);
            for (int64_t i = 0; i < pm.n; i++) {
                int64_t idx[LF_MAX_DIMS] = {0};
                unravel(i, ndim, sh, idx);
                bool second = idx[axis] >= m.shape[axis];
                if (second) idx[axis] -= m.shape[axis];
                pm.d[i] = second ? r.d[ravel(ndim, r.shape, idx)] * 3 : m.d[ravel(ndim, m.shape, idx)];
            }
            free(r.d);
            snprintf(what, sizeof what, "round %d: concat along axis %d of %s", round, axis,
                     shape_str((char[64]){0}, 64, ndim, shape));
        } else {
            p = lf_pad(gg, x, before, after, mode, value);
            pm = m_pad(&m, before, after, mode, value);
            snprintf(what, sizeof what, "round %d: pad mode %d of %s, axis %d before %lld after %lld", round,
                     (int)mode, shape_str((char[64]){0}, 64, ndim, shape), axis, (long long)before[axis],
                     (long long)after[axis]);
        }
        /* taps: slices along axis with a step, shifted by t */
        int64_t step = steps[tu_randint(0, 5)], e = pm.shape[axis];
        int ntaps = (int)tu_randint(2, 3);
        int64_t span = e - (ntaps - 1);
        if (span < 1) {
            free(m.d), free(pm.d);
            lf_graph_free(gg);
            continue;
        }
        lf_node *y = NULL;
        arr r = {0};
        for (int t = 0; t < ntaps; t++) {
            int64_t lo = t, hi = t + span;
            lf_node *s = step > 0 ? lf_slice(gg, p, axis, lo, hi, step) : lf_slice(gg, p, axis, hi - 1, lo > 0 ? lo - 1 : LF_NONE, step);
            arr sm = step > 0 ? m_slice(&pm, axis, lo, hi, step) : m_slice(&pm, axis, hi - 1, lo > 0 ? lo - 1 : LF_NONE, step);
            double w = (double)(t + 1);
            s = lf_mul(gg, s, lf_const(gg, LF_F64, w));
            for (int64_t i = 0; i < sm.n; i++) sm.d[i] *= w;
            if (!y) {
                y = s;
                r = sm;
            } else {
                y = lf_add(gg, y, s);
                for (int64_t i = 0; i < sm.n; i++) r.d[i] += sm.d[i];
                free(sm.d);
            }
        }
        if (ndim >= 2 && round % 3 == 1) { /* the loop's inner axis walks an outer axis of the view */
            int perm[LF_MAX_DIMS];
            for (int k = 0; k < ndim; k++) perm[k] = ndim - 1 - k;
            y = lf_transpose(gg, y);
            arr tr = m_permute(&r, perm);
            free(r.d);
            r = tr;
            strncat(what, ", transposed", sizeof what - strlen(what) - 1);
        }
        char full[320];
        snprintf(full, sizeof full, "%s, %d taps step %lld", what, ntaps, (long long)step);
        m_check(full, gg, y, &r);
        free(m.d), free(pm.d), free(r.d);
        lf_graph_free(gg);
    }
}

/* The compares of the position that a split row reads as true in its
 * interior (codegen/emit.c, "compares true over a row's interior"): a pad
 * along the rows combined with a user's mask on an arange of the padded
 * row, where the mask is true over the whole interior, false over it,
 * changes inside it, or runs on an i32 arange that wraps past INT32_MAX;
 * each compare direction, i32 and i64. The row must fall back to its
 * border loop wherever the mask is not true throughout: checked bit for
 * bit against the reference evaluator. */
Test(views, split_pad_reads_with_position_masks) {
    lf_ctx_options o;
    lf_ctx_options_init(&o);
    o.backend = LF_BACKEND_REFERENCE;
    lf_ctx *ref = lf_ctx_new(&o);
    cr_assert(ref != NULL, "%s", lf_errmsg(NULL));
    static const lf_op ops[] = {LF_OP_LT, LF_OP_LE, LF_OP_GT, LF_OP_GE};
    for (int round = 0; round < 48; round++) {
        int64_t rows = tu_randint(1, 4), n = tu_randint(2, 70), before = tu_randint(0, 5), after = tu_randint(0, 5);
        int64_t e = n + before + after;
        bool wrap = round % 6 == 5;
        lf_dtype it = wrap || round % 2 ? LF_I32 : LF_I64;
        double start = wrap ? (double)INT32_MAX - (double)tu_randint(0, e) : (double)tu_randint(-3, 3);
        int64_t k; /* the mask's threshold: around the interior, or inside it */
        switch (round % 4) {
        case 0: k = (int64_t)start - 10; break;
        case 1: k = (int64_t)start + e + 10; break;
        default: k = (int64_t)start + tu_randint(0, e); break;
        }
        lf_op op = ops[tu_randint(0, 3)];
        lf_graph *gg[2];
        lf_node *y[2];
        double *x = malloc((size_t)(rows * n) * sizeof *x);
        cr_assert(x != NULL);
        for (int64_t i = 0; i < rows * n; i++) x[i] = (double)(i * 7 % 11) - 5 + 0.5;
        for (int w = 0; w < 2; w++) {
            lf_ctx *c = w ? ref : ctx;
            gg[w] = lf_graph_new(c);
            lf_node *in = lf_input(gg[w], tu_buf(c, LF_F64, 2, (int64_t[]){rows, n}, x));
            lf_node *p = lf_pad(gg[w], in, (int64_t[]){0, before}, (int64_t[]){0, after}, LF_PAD_CONSTANT, 0.25);
            lf_node *pos = lf_reshape(gg[w], lf_arange(gg[w], it, start, start + (double)e, 1), 2, (int64_t[]){1, e});
            lf_node *kc = lf_const(gg[w], it, (double)k);
            lf_node *mask = lf_apply(gg[w], op, pos, kc, NULL);
            y[w] = lf_add(gg[w], lf_select(gg[w], mask, p, lf_const(gg[w], LF_F64, -1)),
                          lf_mul(gg[w], p, lf_const(gg[w], LF_F64, 2)));
            cr_assert(y[w] != NULL, "%s", lf_errmsg(c));
        }
        char what[200];
        snprintf(what, sizeof what, "round %d: [%lld, %lld] padded %lld + %lld, %s arange from %.0f, op %d, k %lld",
                 round, (long long)rows, (long long)n, (long long)before, (long long)after,
                 it == LF_I32 ? "i32" : "i64", start, (int)op, (long long)k);
        lf_buffer *got = tu_eval1(ctx, gg[0], y[0]), *want = tu_eval1(ref, gg[1], y[1]);
        double *a = tu_read_raw(got), *b = tu_read_raw(want);
        cr_assert(memcmp(a, b, (size_t)(rows * e) * sizeof *a) == 0, "%s: the compiled result differs from the reference",
                  what);
        free(a), free(b), free(x);
        lf_buffer_free(got);
        lf_buffer_free(want);
        lf_graph_free(gg[0]);
        lf_graph_free(gg[1]);
    }
    lf_ctx_destroy(ref);
}
