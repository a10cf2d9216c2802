/* tests/test_sort.c: lf_sort, lf_argsort and lf_topk against an oracle.
 *
 * The oracle is written here, independently of graph/sort.c: per row, qsort
 * of the positions along the axis with a comparator that implements NumPy's
 * order directly on the elements (NaN after everything, every NaN equal,
 * -0.0 == +0.0; descending the negated comparison) and breaks ties by
 * position, so its result is the unique stable order. The sorted node's
 * input is evaluated on its own first and read back as raw bytes, so maps
 * and views in front of the sort are covered without re-deriving them; the
 * sorted values are compared byte for byte (a -0.0 must stay -0.0, a NaN
 * keep its sign and payload) and the indices exactly.
 *
 * Inputs mix special values (NaN of both signs and several payloads, +-0,
 * +-Inf, denormals, extremes of the integer dtypes), heavy ties (values
 * from a set of four) and random bits, for every dtype, 1-3-d shapes with
 * extents 0..6, every axis (positive and negative), both directions, and
 * topk with every k. Also: sort of a sort, gather by argsort equals sort,
 * topk equals the first k of sort / argsort, a row of 2^20 and 1000 rows of
 * 1000 (2^17 and 300 x 300 under valgrind), the keys of graph_sort_key (the
 * contract other evaluators use), and the DOT labels.
 */
#include "testutil.h"

#include "graph/graph.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TU_GRAPH_SUITE(sort);

#define SH(...) (int64_t[]){__VA_ARGS__}

static const lf_dtype dtypes[] = {LF_F32, LF_F64, LF_I32, LF_I64, LF_BOOL};

/* ---- the oracle -------------------------------------------------------------- */

static int cmp_f(double a, double b) {
    if (isnan(a)) return isnan(b) ? 0 : 1;
    if (isnan(b)) return -1;
    return (a > b) - (a < b);
}

/* NumPy's ascending order of two elements of dtype t (raw bytes). */
static int cmp_elem(lf_dtype t, const void *a, const void *b) {
    switch (t) {
    case LF_F32: {
        float x, y;
        memcpy(&x, a, 4);
        memcpy(&y, b, 4);
        return cmp_f(x, y);
    }
    case LF_F64: {
        double x, y;
        memcpy(&x, a, 8);
        memcpy(&y, b, 8);
        return cmp_f(x, y);
    }
    case LF_I32: {
        int32_t x, y;
        memcpy(&x, a, 4);
        memcpy(&y, b, 4);
        return (x > y) - (x < y);
    }
    case LF_I64: {
        int64_t x, y;
        memcpy(&x, a, 8);
        memcpy(&y, b, 8);
        return (x > y) - (x < y);
    }
    default: {
        int x = *(const unsigned char *)a != 0, y = *(const unsigned char *)b != 0;
        return x - y;
    }
    }
}

static struct {
    lf_dtype t;
    bool desc;
    const unsigned char *row; /* the row's first element */
    size_t step;              /* bytes between elements of the row */
} O;

static int cmp_pos(const void *pa, const void *pb) {
    int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
    int c = cmp_elem(O.t, O.row + (size_t)a * O.step, O.row + (size_t)b * O.step);
    if (O.desc) c = -c;
    return c ? c : (a > b) - (a < b);
}

/* ---- inputs ---------------------------------------------------------------------- */

static void quiet_nan32(uint32_t *b) {
    if ((*b & 0x7f800000u) == 0x7f800000u && (*b & 0x7fffffu)) *b |= 0x400000u;
}
static void quiet_nan64(uint64_t *b) {
    const uint64_t exp = UINT64_C(0x7ff0000000000000), man = UINT64_C(0xfffffffffffff);
    if ((*b & exp) == exp && (*b & man)) *b |= UINT64_C(1) << 51;
}

/* One special value of dtype t into dst: index s picks from the set. */
static void special(lf_dtype t, int s, void *dst) {
    static const uint32_t f32[] = {0x00000000, 0x80000000, 0x3f800000, 0xbf800000, 0x40200000, 0xc0200000,
                                   0x7f800000, 0xff800000, 0x7fc00000, 0xffc00000, 0x7fc12345, 0xffd00001,
                                   0x00000001, 0x80000001, 0x7f7fffff, 0xff7fffff};
    static const uint64_t f64[] = {0, UINT64_C(0x8000000000000000), UINT64_C(0x3ff0000000000000),
                                   UINT64_C(0xbff0000000000000), UINT64_C(0x4004000000000000),
                                   UINT64_C(0xc004000000000000), UINT64_C(0x7ff0000000000000),
                                   UINT64_C(0xfff0000000000000), UINT64_C(0x7ff8000000000000),
                                   UINT64_C(0xfff8000000000000), UINT64_C(0x7ff8000000012345),
                                   UINT64_C(0xfffc000000000001), 1, UINT64_C(0x8000000000000001),
                                   UINT64_C(0x7fefffffffffffff), UINT64_C(0xffefffffffffffff)};
    static const int64_t ints[] = {0, 1, -1, 2, -2, 7, -7, 100, INT32_MIN, INT32_MAX, INT32_MIN + 1,
                                   INT64_MIN, INT64_MAX, INT64_MIN + 1, -100, 3};
    s &= 15;
    switch (t) {
    case LF_F32: memcpy(dst, &f32[s], 4); break;
    case LF_F64: memcpy(dst, &f64[s], 8); break;
    case LF_I32: {
        int32_t v = (int32_t)(s < 11 ? ints[s] : ints[s - 8]);
        memcpy(dst, &v, 4);
        break;
    }
    case LF_I64: memcpy(dst, &ints[s], 8); break;
    default: *(unsigned char *)dst = (unsigned char)(s & 1); break;
    }
}

/* n random elements of dtype t. mode 0: from a set of four specials (ties);
 * 1: specials, random finite values and random bits mixed. NaNs are quiet
 * (a signalling NaN may be quieted by a conversion in a view or gather). */
static void random_fill(lf_dtype t, int mode, int64_t n, void *dst) {
    size_t es = lf_dtype_size(t);
    int set[4];
    for (int i = 0; i < 4; i++) set[i] = (int)tu_randint(0, 15);
    unsigned char *p = dst;
    for (int64_t i = 0; i < n; i++, p += es) {
        int r = (int)tu_randint(0, 2);
        if (mode == 0) special(t, set[tu_randint(0, 3)], p);
        else if (r == 0) special(t, (int)tu_randint(0, 15), p);
        else if (r == 1) {
            double v = (double)tu_randint(-5, 5) * 0.5;
            switch (t) {
            case LF_F32: {
                float f = (float)v;
                memcpy(p, &f, 4);
                break;
            }
            case LF_F64: memcpy(p, &v, 8); break;
            case LF_I32: {
                int32_t x = (int32_t)tu_randint(-5, 5);
                memcpy(p, &x, 4);
                break;
            }
            case LF_I64: {
                int64_t x = tu_randint(-5, 5);
                memcpy(p, &x, 8);
                break;
            }
            default: *p = (unsigned char)tu_randint(0, 1); break;
            }
        } else {
            uint64_t bits = tu_rand();
            if (t == LF_BOOL) *p = bits & 1;
            else if (es == 4) {
                uint32_t b = (uint32_t)bits;
                if (t == LF_F32) quiet_nan32(&b);
                memcpy(p, &b, 4);
            } else {
                if (t == LF_F64) quiet_nan64(&bits);
                memcpy(p, &bits, 8);
            }
        }
    }
}

static int64_t numel_of(int ndim, const int64_t *shape) {
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= shape[d];
    return n;
}

/* An input node of g over a new buffer holding raw bytes. */
static lf_node *input_raw(lf_dtype t, int ndim, const int64_t *shape, const void *data) {
    lf_buffer *b = lf_buffer_new(ctx, t, ndim, shape);
    cr_assert(b != NULL, "lf_buffer_new: %s", lf_errmsg(ctx));
    size_t bytes = (size_t)numel_of(ndim, shape) * lf_dtype_size(t);
    cr_assert_eq(lf_buffer_write(b, data, bytes), LF_OK, "%s", lf_errmsg(ctx));
    lf_node *x = lf_input(g, b);
    cr_assert(x != NULL, "lf_input: %s", lf_errmsg(ctx));
    lf_buffer_free(b); /* the graph holds its reference */
    return x;
}

static lf_node *random_input(lf_dtype t, int mode, int ndim, const int64_t *shape) {
    int64_t n = numel_of(ndim, shape);
    void *data = malloc((size_t)n * lf_dtype_size(t) + 1);
    random_fill(t, mode, n, data);
    lf_node *x = input_raw(t, ndim, shape, data);
    free(data);
    return x;
}

/* Evaluates node n and returns its raw bytes (malloc'd, at least 1 byte). */
static void *eval_raw(lf_node *n) {
    cr_assert(n != NULL, "node is NULL: %s", lf_graph_errmsg(g));
    lf_buffer *b = tu_eval1(ctx, g, n);
    size_t bytes = lf_buffer_bytes(b);
    void *p = malloc(bytes + 1);
    cr_assert_eq(lf_buffer_read(b, p, bytes), LF_OK, "%s", lf_errmsg(ctx));
    lf_buffer_free(b);
    return p;
}

/* Evaluates two nodes in one lf_eval and returns their raw bytes. */
static void eval2_raw(lf_node *a, lf_node *b, void **ra, void **rb) {
    lf_node *outs[2] = {a, b};
    cr_assert(a && b, "node is NULL: %s", lf_graph_errmsg(g));
    lf_buffer *d[2] = {lf_buffer_new_like(ctx, a), lf_buffer_new_like(ctx, b)};
    cr_assert(d[0] && d[1], "%s", lf_errmsg(ctx));
    cr_assert_eq(lf_eval(g, 2, outs, d), LF_OK, "lf_eval: %s", lf_errmsg(ctx));
    void **r[2] = {ra, rb};
    for (int i = 0; i < 2; i++) {
        size_t bytes = lf_buffer_bytes(d[i]);
        *r[i] = malloc(bytes + 1);
        cr_assert_eq(lf_buffer_read(d[i], *r[i], bytes), LF_OK, "%s", lf_errmsg(ctx));
        lf_buffer_free(d[i]);
    }
}

static void hex(char *buf, const void *p, size_t es) {
    const unsigned char *b = p;
    for (size_t i = 0; i < es; i++) sprintf(buf + 2 * i, "%02x", b[es - 1 - i]);
}

/* Sorts x along axis (k < 0: lf_sort and lf_argsort; else lf_topk with this
 * k) and compares with the oracle on x's own evaluated bytes. */
static void check_sort(const char *what, lf_node *x, int axis, bool desc, int64_t k) {
    cr_assert(x != NULL, "%s: x is NULL: %s", what, lf_graph_errmsg(g));
    lf_dtype t = lf_node_dtype(x);
    int ndim = lf_node_ndim(x), a = axis < 0 ? axis + ndim : axis;
    int64_t shape[LF_MAX_DIMS];
    for (int d = 0; d < ndim; d++) shape[d] = lf_node_dim(x, d);
    lf_node *s, *ix;
    if (k < 0) {
        s = lf_sort(g, x, axis, desc);
        ix = lf_argsort(g, x, axis, desc);
    } else {
        s = lf_topk(g, x, k, axis, desc);
        ix = lf_argtopk(g, x, k, axis, desc);
    }
    cr_assert(s && ix, "%s: %s", what, lf_graph_errmsg(g));
    int64_t n = shape[a], kk = k < 0 ? n : k;
    cr_assert_eq(lf_node_dtype(s), t);
    cr_assert_eq(lf_node_dtype(ix), LF_I64);
    cr_assert_eq(lf_node_ndim(s), ndim);
    for (int d = 0; d < ndim; d++) {
        cr_assert_eq(lf_node_dim(s, d), d == a ? kk : shape[d], "%s: extent %d", what, d);
        cr_assert_eq(lf_node_dim(ix, d), d == a ? kk : shape[d], "%s: extent %d", what, d);
    }
    unsigned char *xr = eval_raw(x), *sv, *si;
    eval2_raw(s, ix, (void **)&sv, (void **)&si);
    size_t es = lf_dtype_size(t);
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < a; d++) outer *= shape[d];
    for (int d = a + 1; d < ndim; d++) inner *= shape[d];
    int64_t *perm = malloc((size_t)(n ? n : 1) * sizeof *perm);
    const int64_t *gi = (const int64_t *)si;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            O.t = t;
            O.desc = desc;
            O.row = xr + (size_t)(o * n * inner + i) * es;
            O.step = (size_t)inner * es;
            for (int64_t j = 0; j < n; j++) perm[j] = j;
            qsort(perm, (size_t)n, sizeof *perm, cmp_pos);
            for (int64_t j = 0; j < kk; j++) {
                int64_t at = o * kk * inner + i + j * inner;
                const unsigned char *want = O.row + (size_t)perm[j] * O.step, *got = sv + (size_t)at * es;
                if (gi[at] != perm[j] || memcmp(want, got, es)) {
                    char hw[20], hg[20];
                    hex(hw, want, es);
                    hex(hg, got, es);
                    cr_assert_fail("%s: %s %s axis %d (%d-d, n %lld, k %lld), row (%lld,%lld) entry %lld: index %lld "
                                   "value 0x%s, want index %lld value 0x%s",
                                   what, lf_dtype_name(t), desc ? "desc" : "asc", axis, ndim, (long long)n,
                                   (long long)kk, (long long)o, (long long)i, (long long)j, (long long)gi[at], hg,
                                   (long long)perm[j], hw);
                }
            }
        }
    free(perm);
    free(xr);
    free(sv);
    free(si);
}

/* ---- the oracle itself, on hand-written cases --------------------------------------- */

Test(sort, special_values_by_hand) {
    double v[8] = {NAN, -0.0, 1, 0.0, -INFINITY, -NAN, INFINITY, -1};
    lf_node *x = input_raw(LF_F64, 1, SH(8), v);
    int64_t *ia = eval_raw(lf_argsort(g, x, 0, false)), *id = eval_raw(lf_argsort(g, x, 0, true));
    double *sa = eval_raw(lf_sort(g, x, -1, false));
    const int64_t wa[8] = {4, 7, 1, 3, 2, 6, 0, 5}, wd[8] = {0, 5, 6, 2, 1, 3, 7, 4};
    for (int j = 0; j < 8; j++) {
        cr_expect_eq(ia[j], wa[j], "ascending entry %d: %lld, want %lld", j, (long long)ia[j], (long long)wa[j]);
        cr_expect_eq(id[j], wd[j], "descending entry %d: %lld, want %lld", j, (long long)id[j], (long long)wd[j]);
        cr_expect(memcmp(&sa[j], &v[wa[j]], 8) == 0, "value %d", j);
    }
    cr_expect(signbit(sa[2]) && !signbit(sa[3]), "-0.0 then +0.0, signs kept");
    cr_expect(!signbit(sa[6]) && signbit(sa[7]), "NaN then -NaN, signs kept");
    free(ia);
    free(id);
    free(sa);
    check_sort("by hand", x, 0, false, -1);
    check_sort("by hand", x, 0, true, -1);
}

Test(sort, ints_and_bool_by_hand) {
    int32_t v[6] = {3, INT32_MIN, -1, 3, INT32_MAX, 0};
    lf_node *x = input_raw(LF_I32, 1, SH(6), v);
    int32_t *s = eval_raw(lf_sort(g, x, 0, true));
    const int32_t w[6] = {INT32_MAX, 3, 3, 0, -1, INT32_MIN};
    for (int j = 0; j < 6; j++) cr_expect_eq(s[j], w[j], "i32 desc entry %d", j);
    free(s);
    unsigned char b[5] = {1, 0, 1, 0, 0};
    lf_node *y = input_raw(LF_BOOL, 1, SH(5), b);
    int64_t *i = eval_raw(lf_argsort(g, y, 0, true));
    const int64_t wi[5] = {0, 2, 1, 3, 4};
    for (int j = 0; j < 5; j++) cr_expect_eq(i[j], wi[j], "bool desc entry %d", j);
    free(i);
}

/* ---- random batched cases, every dtype ------------------------------------------------- */

Test(sort, random_batched_every_dtype) {
    tu_seed();
    for (int iter = 0; iter < 300; iter++) {
        lf_dtype t = dtypes[iter % 5];
        int ndim = (int)tu_randint(1, 3);
        int64_t shape[3];
        for (int d = 0; d < ndim; d++) shape[d] = tu_randint(0, 6);
        if (iter % 7 == 0) shape[tu_randint(0, ndim - 1)] = 1;
        if (iter % 10 == 3) shape[tu_randint(0, ndim - 1)] = tu_randint(17, 70); /* past one merge run */
        lf_node *x = random_input(t, (int)tu_randint(0, 1), ndim, shape);
        int axis = (int)tu_randint(0, ndim - 1);
        if (tu_randint(0, 1)) axis -= ndim;
        bool desc = tu_randint(0, 1);
        int a = axis < 0 ? axis + ndim : axis;
        check_sort("random", x, axis, desc, -1);
        check_sort("random topk", x, axis, desc, tu_randint(0, shape[a]));
        if (iter % 20 == 19) { /* start a fresh graph now and then */
            lf_graph_free(g);
            g = lf_graph_new(ctx);
            cr_assert(g != NULL);
        }
    }
}

Test(sort, every_k_and_axis) {
    tu_seed();
    for (int ti = 0; ti < 5; ti++) {
        lf_node *x = random_input(dtypes[ti], 1, 3, SH(3, 5, 4));
        for (int axis = -3; axis < 3; axis++) {
            int64_t n = lf_node_dim(x, axis);
            for (int64_t k = 0; k <= n; k++) {
                check_sort("every k", x, axis, true, k);
                check_sort("every k", x, axis, false, k);
            }
        }
    }
}

Test(sort, zero_size_and_single) {
    tu_seed();
    for (int ti = 0; ti < 5; ti++) {
        lf_dtype t = dtypes[ti];
        check_sort("extent 0", random_input(t, 1, 1, SH(0)), 0, false, -1);
        check_sort("extent 0 topk", random_input(t, 1, 1, SH(0)), 0, true, 0);
        check_sort("extent 1", random_input(t, 1, 1, SH(1)), 0, true, -1);
        check_sort("extent 1 topk", random_input(t, 1, 1, SH(1)), 0, true, 1);
        check_sort("axis of 0, 3 rows", random_input(t, 1, 2, SH(3, 0)), 1, false, -1);
        check_sort("nrows 0", random_input(t, 1, 2, SH(0, 4)), 1, false, -1);
        check_sort("nrows 0 topk", random_input(t, 1, 2, SH(0, 4)), 1, true, 2);
        check_sort("nrows 0, 3-d", random_input(t, 1, 3, SH(2, 3, 0)), 0, false, -1);
        check_sort("rows of 1", random_input(t, 1, 2, SH(4, 1)), 1, false, -1);
        check_sort("k 0", random_input(t, 1, 2, SH(3, 5)), 1, false, 0);
        check_sort("k = extent", random_input(t, 1, 2, SH(3, 5)), 1, true, 5);
    }
}

/* ---- keys through maps, views ------------------------------------------------------------ */

Test(sort, keys_from_maps) {
    tu_seed();
    lf_node *x = random_input(LF_F32, 1, 2, SH(6, 9));
    lf_fn *f = lf_fn_parse(g, "(x) -> abs(x) - 3");
    cr_assert(f != NULL, "%s", lf_errmsg(ctx));
    lf_node *m = lf_map(g, f, x);
    check_sort("sort(abs(x) - 3)", m, 1, false, -1);
    check_sort("sort(abs(x) - 3)", m, 0, true, -1);
    check_sort("topk(abs(x) - 3)", m, -1, true, 3);
    lf_node *y = random_input(LF_F64, 1, 2, SH(1, 9));
    lf_node *z = lf_apply(g, LF_OP_MUL, lf_abs(g, x), y, NULL); /* broadcast zipwith, f64 */
    check_sort("sort(abs(x) * y)", z, 1, true, -1);
    check_sort("sort(abs(x) * y)", z, 0, false, -1);
    lf_node *i = random_input(LF_I32, 0, 2, SH(4, 7));
    lf_fn *h = lf_fn_parse(g, "(i) -> i % 3 - 1");
    cr_assert(h != NULL, "%s", lf_errmsg(ctx));
    check_sort("sort(i % 3 - 1)", lf_map(g, h, i), 1, false, -1);
    check_sort("sort(x < 0)", lf_lt(g, x, lf_const(g, LF_F32, 0.0)), 1, true, -1);
}

Test(sort, inputs_that_are_views) {
    tu_seed();
    for (int ti = 0; ti < 5; ti++) {
        lf_dtype t = dtypes[ti];
        lf_node *x = random_input(t, 1, 2, SH(5, 8));
        lf_node *tr = lf_transpose(g, x);
        check_sort("transpose", tr, 1, false, -1);
        check_sort("transpose", tr, 0, true, -1);
        lf_node *sl = lf_slice(g, x, 1, 1, LF_NONE, 2);
        check_sort("slice step 2", sl, 1, true, -1);
        check_sort("slice step 2", sl, 0, false, 2);
        lf_node *rev = lf_slice(g, x, 1, LF_NONE, LF_NONE, -1);
        check_sort("slice step -1", rev, -1, false, -1);
        lf_node *b = lf_broadcast_to(g, random_input(t, 0, 1, SH(8)), 2, SH(3, 8));
        check_sort("broadcast", b, 1, true, -1);
        check_sort("broadcast", b, 0, false, -1);
        lf_node *p = lf_permute(g, random_input(t, 1, 3, SH(2, 3, 4)), (int[]){2, 0, 1});
        check_sort("permute 3-d", p, 1, false, -1);
        check_sort("permute 3-d", p, 2, true, 2);
    }
}

/* ---- identities between the three calls ----------------------------------------------- */

static void expect_same_bytes(const char *what, lf_node *a, lf_node *b) {
    void *ra, *rb;
    eval2_raw(a, b, &ra, &rb);
    size_t bytes = (size_t)lf_node_numel(a) * lf_dtype_size(lf_node_dtype(a));
    cr_expect_eq(lf_node_numel(a), lf_node_numel(b), "%s: sizes", what);
    cr_expect(memcmp(ra, rb, bytes) == 0, "%s: not the same bytes", what);
    free(ra);
    free(rb);
}

Test(sort, identities) {
    tu_seed();
    for (int iter = 0; iter < 60; iter++) {
        lf_dtype t = dtypes[iter % 5];
        int ndim = (int)tu_randint(1, 3);
        int64_t shape[3];
        for (int d = 0; d < ndim; d++) shape[d] = tu_randint(1, 6);
        lf_node *x = random_input(t, (int)tu_randint(0, 1), ndim, shape);
        int axis = (int)tu_randint(-ndim, ndim - 1), a = axis < 0 ? axis + ndim : axis;
        bool d = tu_randint(0, 1);
        char what[96];
        snprintf(what, sizeof what, "%s %d-d axis %d %s", lf_dtype_name(t), ndim, axis, d ? "desc" : "asc");
        lf_node *s = lf_sort(g, x, axis, d), *i = lf_argsort(g, x, axis, d);
        /* gather by argsort is sort */
        expect_same_bytes(what, lf_gather(g, x, axis, i), s);
        /* sort of a sort: a stable sort keeps equal elements in position order
           in both directions, so the result is sort(x) whatever came first */
        expect_same_bytes(what, lf_sort(g, lf_sort(g, x, axis, !d), axis, d), s);
        expect_same_bytes(what, lf_sort(g, s, axis, d), s);
        check_sort("sort of a sort", lf_sort(g, x, axis, !d), axis, d, -1);
        /* topk is the first k of sort / argsort */
        int64_t k = tu_randint(0, shape[a]);
        lf_node *tv = lf_topk(g, x, k, axis, d), *ti = lf_argtopk(g, x, k, axis, d);
        cr_assert(tv && ti, "%s", lf_errmsg(ctx));
        expect_same_bytes(what, tv, lf_slice(g, s, a, 0, k, 1));
        expect_same_bytes(what, ti, lf_slice(g, i, a, 0, k, 1));
        if (iter % 10 == 9) {
            lf_graph_free(g);
            g = lf_graph_new(ctx);
            cr_assert(g != NULL);
        }
    }
}

/* ---- large rows ------------------------------------------------------------------------ */

/* Under valgrind (CI's third pass) smaller: a long row of 2^17 still takes
 * the CPU's long-row path (at least 65536 keys, fewer rows than threads). */
Test(sort, one_long_row) {
    tu_seed();
    int64_t n = (int64_t)1 << (tu_on_valgrind() ? 17 : 20);
    lf_node *x = random_input(LF_F32, 1, 1, SH(n));
    check_sort("2^20 f32", x, 0, false, -1);
    check_sort("2^20 f32 top 10", x, 0, true, 10);
    lf_node *y = random_input(LF_I64, 0, 1, SH(n)); /* four distinct values: long runs of ties */
    check_sort("2^20 i64 ties", y, 0, true, -1);
}

Test(sort, thousand_rows_of_thousand) {
    tu_seed();
    int64_t m = tu_on_valgrind() ? 300 : 1000;
    lf_node *x = random_input(LF_F64, 1, 2, SH(m, m));
    check_sort("rows axis 1", x, 1, true, -1);
    check_sort("rows axis 0", x, 0, false, -1);
    check_sort("rows top 5", x, -1, true, 5);
}

/* ---- graph_sort_key, the contract of every evaluator ----------------------------------- */

Test(sort, keys_follow_the_order) {
    tu_seed();
    for (int ti = 0; ti < 5; ti++) {
        lf_dtype t = dtypes[ti];
        unsigned char vals[64 * 8];
        random_fill(t, 1, 64, vals);
        for (int s = 0; s < 16; s++) special(t, s, vals + (size_t)(48 + s) * lf_dtype_size(t));
        size_t es = lf_dtype_size(t);
        for (int i = 0; i < 64; i++)
            for (int j = 0; j < 64; j++) {
                lf_scalar a = graph_scalar_load(vals, t, i), b = graph_scalar_load(vals, t, j);
                int want = cmp_elem(t, vals + i * es, vals + j * es);
                for (int d = 0; d < 2; d++) {
                    uint64_t ka = graph_sort_key(t, a, d), kb = graph_sort_key(t, b, d);
                    int got = (ka > kb) - (ka < kb);
                    cr_assert_eq(got, d ? -want : want, "%s %s: elements %d and %d", lf_dtype_name(t),
                                 d ? "desc" : "asc", i, j);
                    if (!graph_sort_key_wide(t)) cr_assert(ka < (UINT64_C(1) << 32), "%s: narrow key", lf_dtype_name(t));
                }
            }
    }
    /* the extremes: every NaN is the canonical NaN's key, above +inf's
       ascending and below every other key descending */
    lf_scalar nan = {.f = -NAN}, inf = {.f = INFINITY};
    cr_expect_eq(graph_sort_key(LF_F32, nan, false), GRAPH_SORT_NAN_KEY32);
    cr_expect_gt(graph_sort_key(LF_F32, nan, false), graph_sort_key(LF_F32, inf, false));
    cr_expect_eq(graph_sort_key(LF_F32, nan, true), ~GRAPH_SORT_NAN_KEY32 & UINT32_MAX);
    cr_expect_lt(graph_sort_key(LF_F32, nan, true), graph_sort_key(LF_F32, inf, true));
    cr_expect_eq(graph_sort_key(LF_F64, nan, false), GRAPH_SORT_NAN_KEY64);
    cr_expect_gt(graph_sort_key(LF_F64, nan, false), graph_sort_key(LF_F64, inf, false));
    cr_expect_eq(graph_sort_key(LF_F64, (lf_scalar){.f = -0.0}, false), graph_sort_key(LF_F64, (lf_scalar){.f = 0.0}, false));
    cr_expect_eq(graph_sort_key(LF_I32, (lf_scalar){.i = INT32_MIN}, false), 0);
    cr_expect_eq(graph_sort_key(LF_BOOL, (lf_scalar){.i = 1}, true), UINT32_MAX - 1);
}

Test(sort, geometry) {
    lf_node *x = lf_fill(g, LF_F32, 0, 3, SH(2, 5, 3));
    lf_node *v = lf_topk(g, x, 2, 1, true), *i = lf_argtopk(g, x, 2, 1, true);
    cr_assert(v && i);
    graph_sort_geom gm;
    graph_sort_geom_of(v, &gm);
    cr_expect_eq(gm.nrows, 6);
    cr_expect_eq(gm.n, 5);
    cr_expect_eq(gm.k, 2);
    cr_expect_eq(gm.inner, 3);
    cr_expect_eq(gm.x_stride, 3);
    cr_expect_eq(gm.out_stride, 3);
    /* row 4 = (o 1, i 1): x base 1*5*3 + 1, out base 1*2*3 + 1 */
    cr_expect_eq(graph_sort_row_base(&gm, 4, false), 16);
    cr_expect_eq(graph_sort_row_base(&gm, 4, true), 7);
    cr_expect_eq(v->kind, NODE_SORT);
    cr_expect(v->u.sort.descending && !v->u.sort.indices && i->u.sort.indices);
    cr_expect_eq(v->u.sort.axis, 1);
    cr_expect_eq(v->u.sort.k, 2);
}

Test(sort, dot_labels) {
    lf_node *x = lf_fill(g, LF_F32, 0, 2, SH(3, 20));
    lf_node *v = lf_topk(g, x, 10, -1, true), *i = lf_argtopk(g, x, 10, -1, true);
    cr_assert(v && i);
    char buf[256];
    cr_expect(strstr(graph_dot_node_label(lf_sort(g, x, 1, true), buf, sizeof buf), "sort desc axis 1"), "%s", buf);
    cr_expect(strstr(graph_dot_node_label(lf_argsort(g, x, 0, false), buf, sizeof buf), "argsort axis 0"), "%s", buf);
    cr_expect(strstr(graph_dot_node_label(v, buf, sizeof buf), " topk k=10 largest axis 1\\n"), "%s", buf);
    cr_expect(strstr(graph_dot_node_label(i, buf, sizeof buf), "argtopk k=10 largest axis 1"), "%s", buf);
    cr_expect(strstr(buf, "i64 [3,10]"), "%s", buf);
}
