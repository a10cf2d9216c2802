/* tests/test_wrap.c: buffers over memory the caller owns (lf_buffer_wrap).
 *
 * Runs on the suite's backend (tu_ctx: reference, or the compiled CPU
 * backend as 'wrap-cpu'). What must hold: a wrapped buffer is read and
 * written in place (the caller's array holds the result, no copy out);
 * release is called exactly once, when the last reference goes, and never
 * when the wrap fails; every argument error has its status and message; a
 * strided wrap reads as a view (transposed, reversed, broadcast) and is
 * refused as an output or a write destination; outputs that share memory
 * with inputs are staged, outputs over overlapping memory refused; a failed
 * eval leaves wrapped output memory untouched.
 */
#include "graph/graph.h"
#include "testutil.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

TU_GRAPH_SUITE(wrap);

static int released;
static void *released_arg;
static void count_release(void *arg) {
    released++;
    released_arg = arg;
}

static lf_node *gaussian(lf_graph *gr, lf_node *x) {
    return lf_map(gr, lf_fn_parse(gr, "(x) -> exp(-0.5*x*x) / 2.5066282746"), x);
}

Test(wrap, eval_reads_and_writes_in_place) {
    enum { N = 3000 };
    static float x[N], y[N];
    for (int i = 0; i < N; i++) x[i] = (float)(i * 0.003 - 4.5), y[i] = -1;
    int64_t n = N;
    released = 0;
    lf_buffer *xb = lf_buffer_wrap(ctx, LF_F32, 1, &n, NULL, x, count_release, x);
    lf_buffer *yb = lf_buffer_wrap(ctx, LF_F32, 1, &n, NULL, y, count_release, y);
    cr_assert(xb && yb, "%s", lf_errmsg(ctx));
    cr_expect_eq(lf_buffer_bytes(yb), sizeof y);
    lf_node *out = gaussian(g, lf_input(g, xb));
    cr_assert_eq(lf_eval(g, 1, &out, &yb), LF_OK, "%s", lf_errmsg(ctx));
    for (int i = 0; i < N; i++) {
        float want = (float)(exp(-0.5 * (double)x[i] * x[i]) / 2.5066282746);
        if (!tu_close(y[i], want, 1e-5, 1e-30)) cr_assert_fail("y[%d] = %g, want %g", i, y[i], want);
    }
    cr_expect_eq(x[7], (float)(7 * 0.003 - 4.5), "the input is untouched");
    float back[N];
    cr_assert_eq(lf_buffer_read(yb, back, sizeof back), LF_OK);
    cr_expect(memcmp(back, y, sizeof y) == 0, "lf_buffer_read gives the memory's contents");
    /* lf_buffer_write lands in the caller's memory */
    for (int i = 0; i < N; i++) back[i] = (float)i;
    cr_assert_eq(lf_buffer_write(xb, back, sizeof back), LF_OK);
    cr_expect_eq(x[N - 1], (float)(N - 1));
    /* release: once, after the last reference (the graph reads xb) */
    lf_buffer_free(xb);
    lf_buffer_free(xb); /* a second free is a no-op */
    cr_expect_eq(released, 0, "the graph still reads x");
    lf_buffer_free(yb);
    cr_expect_eq(released, 1, "y: nothing else holds it");
    cr_expect_eq(released_arg, y);
    lf_graph_free(g);
    g = lf_graph_new(ctx);
    cr_expect_eq(released, 2, "x released with the graph");
    cr_expect_eq(released_arg, x);
}

Test(wrap, ctx_destroy_releases_and_null_release_is_fine) {
    static double a[4], b[4];
    int64_t n = 4;
    released = 0;
    cr_assert(lf_buffer_wrap(ctx, LF_F64, 1, &n, NULL, a, count_release, a));
    cr_assert(lf_buffer_wrap(ctx, LF_F64, 1, &n, NULL, b, NULL, NULL));
    lf_graph_free(g);
    lf_ctx_destroy(ctx);
    cr_expect_eq(released, 1);
    ctx = tu_ctx();
    g = lf_graph_new(ctx);
}

Test(wrap, argument_errors) {
    static double mem[16];
    int64_t n = 4, big[2] = {INT64_MAX / 4, 8}, shape2[2] = {3, 4};
    released = 0;
    cr_expect_null(lf_buffer_wrap(NULL, LF_F64, 1, &n, NULL, mem, count_release, NULL));
    cr_expect_str_eq(lf_errmsg(NULL), "buffer_wrap: ctx is NULL");
    cr_expect_null(lf_buffer_wrap(ctx, (lf_dtype)17, 1, &n, NULL, mem, count_release, NULL));
    cr_expect_str_eq(lf_errmsg(ctx), "buffer_wrap: unknown dtype 17");
    cr_expect_null(lf_buffer_wrap(ctx, LF_F64, 1, &n, NULL, NULL, count_release, NULL));
    cr_expect_str_eq(lf_errmsg(ctx), "buffer_wrap: data is NULL for 32 bytes");
    cr_expect_null(lf_buffer_wrap(ctx, LF_F64, 1, &n, NULL, (char *)mem + 4, count_release, NULL));
    char want[200];
    snprintf(want, sizeof want, "buffer_wrap: data %p is not aligned to 8 bytes (the size of f64)", (void *)((char *)mem + 4));
    cr_expect_str_eq(lf_errmsg(ctx), want);
    cr_expect_null(lf_buffer_wrap(ctx, LF_F64, 2, big, NULL, mem, count_release, NULL));
    cr_expect_str_eq(lf_errmsg(ctx), "buffer_wrap: shape [2305843009213693951,8] of f64 overflows");
    int64_t neg = -1;
    cr_expect_null(lf_buffer_wrap(ctx, LF_F64, 1, &neg, NULL, mem, count_release, NULL));
    cr_expect(strstr(lf_errmsg(ctx), "buffer_wrap: ") == lf_errmsg(ctx), "%s", lf_errmsg(ctx));
    int64_t huge_strides[2] = {INT64_MAX / 2, 1};
    cr_expect_null(lf_buffer_wrap(ctx, LF_F64, 2, shape2, huge_strides, mem, count_release, NULL));
    cr_expect_str_eq(lf_errmsg(ctx), "buffer_wrap: strides [4611686018427387903,1] of shape [3,4] overflow");
    int64_t far_strides[2] = {INT64_MAX / 8, -(INT64_MAX / 8)};
    cr_expect_null(lf_buffer_wrap(ctx, LF_F64, 2, (int64_t[]){2, 2}, far_strides, mem, count_release, NULL));
    cr_expect_str_eq(lf_errmsg(ctx),
                     "buffer_wrap: strides [1152921504606846975,-1152921504606846975] of shape [2,2] reach more "
                     "than 9223372036854775807 bytes");
    cr_expect_eq(released, 0, "release is never called when the wrap fails");
    /* zero size: data may be NULL; any strides */
    int64_t zero[2] = {0, 5};
    lf_buffer *e = lf_buffer_wrap(ctx, LF_F64, 2, zero, (int64_t[]){-3, 0}, NULL, count_release, NULL);
    cr_assert(e, "%s", lf_errmsg(ctx));
    cr_expect_eq(lf_buffer_bytes(e), 0);
    lf_buffer_free(e);
    cr_expect_eq(released, 1);
}

/* A 3x4 row-major array read as its transpose, reversed along an axis, and
 * broadcast (stride 0): the inputs are views of the caller's memory. */
Test(wrap, strided_inputs_read_as_views) {
    static double m[12];
    for (int i = 0; i < 12; i++) m[i] = i * 1.5 - 4;
    lf_buffer *t = lf_buffer_wrap(ctx, LF_F64, 2, (int64_t[]){4, 3}, (int64_t[]){1, 4}, m, NULL, NULL);
    lf_buffer *r = lf_buffer_wrap(ctx, LF_F64, 2, (int64_t[]){3, 4}, (int64_t[]){4, -1}, m + 3, NULL, NULL);
    lf_buffer *bc = lf_buffer_wrap(ctx, LF_F64, 2, (int64_t[]){3, 4}, (int64_t[]){0, 1}, m + 4, NULL, NULL);
    cr_assert(t && r && bc, "%s", lf_errmsg(ctx));
    double want_t[12], want_r[12], want_b[12], got[12];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++) want_t[i * 3 + j] = m[j * 4 + i];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++) want_r[i * 4 + j] = m[i * 4 + 3 - j], want_b[i * 4 + j] = m[4 + j];
    cr_assert_eq(lf_buffer_read(t, got, sizeof got), LF_OK, "%s", lf_errmsg(ctx));
    cr_expect(memcmp(got, want_t, sizeof got) == 0, "transposed read");
    cr_assert_eq(lf_buffer_read(r, got, sizeof got), LF_OK);
    cr_expect(memcmp(got, want_r, sizeof got) == 0, "reversed read");
    /* through a graph: t, r and bc feed maps (t transposed back) */
    lf_node *ti = lf_permute(g, lf_input(g, t), (int[]){1, 0});
    lf_node *sum = lf_apply(g, LF_OP_ADD, lf_apply(g, LF_OP_MUL, ti, lf_input(g, r), NULL), lf_input(g, bc), NULL);
    lf_node *red = lf_reduce(g, LF_RED_SUM, lf_input(g, t), 1, (int[]){1}, false);
    lf_buffer *o1 = lf_buffer_new_like(ctx, sum), *o2 = lf_buffer_new_like(ctx, red);
    cr_assert_eq(lf_eval(g, 2, (lf_node *[]){sum, red}, (lf_buffer *[]){o1, o2}), LF_OK, "%s", lf_errmsg(ctx));
    double w1[12], w2[4];
    for (int i = 0; i < 12; i++) w1[i] = m[i] * want_r[i] + want_b[i];
    for (int i = 0; i < 4; i++) w2[i] = want_t[i * 3] + want_t[i * 3 + 1] + want_t[i * 3 + 2];
    tu_expect("x*reversed + broadcast", o1, w1, 12, 1e-15, 0);
    tu_expect("row sums of the transpose", o2, w2, 4, 1e-15, 0);
}

Test(wrap, strided_destinations_refused) {
    static double m[12], src[12];
    lf_buffer *t = lf_buffer_wrap(ctx, LF_F64, 2, (int64_t[]){4, 3}, (int64_t[]){1, 4}, m, NULL, NULL);
    cr_assert(t);
    cr_expect_eq(lf_buffer_write(t, src, sizeof src), LF_ERR_INVALID);
    cr_expect_str_eq(lf_errmsg(ctx), "buffer_write: the buffer wraps strided memory (strides [1,4]); only "
                                     "C-contiguous buffers can be written");
    lf_node *x = lf_fill(g, LF_F64, 2.0, 2, (int64_t[]){4, 3});
    cr_expect_eq(lf_eval(g, 1, &x, &t), LF_ERR_INVALID);
    cr_expect_str_eq(lf_errmsg(ctx), "eval: output 0's buffer wraps strided memory (strides [1,4]); an output "
                                     "buffer must be C-contiguous");
    for (int i = 0; i < 12; i++) cr_expect_eq(m[i], 0.0);
    /* C-contiguous strides given explicitly are a plain buffer */
    lf_buffer *c = lf_buffer_wrap(ctx, LF_F64, 2, (int64_t[]){4, 3}, (int64_t[]){3, 1}, m, NULL, NULL);
    cr_assert_eq(lf_eval(g, 1, &x, &c), LF_OK, "%s", lf_errmsg(ctx));
    for (int i = 0; i < 12; i++) cr_expect_eq(m[i], 2.0);
}

/* Two wraps of one array: the output overlaps what the program reads (a
 * reversal), so it is staged and the result is right; two outputs over
 * overlapping memory are refused. */
Test(wrap, aliasing_between_wraps) {
    static double m[64];
    double want[64];
    for (int i = 0; i < 64; i++) m[i] = i, want[i] = 2.0 * (63 - i);
    int64_t n = 64;
    lf_buffer *rev = lf_buffer_wrap(ctx, LF_F64, 1, &n, (int64_t[]){-1}, m + 63, NULL, NULL);
    lf_buffer *out = lf_buffer_wrap(ctx, LF_F64, 1, &n, NULL, m, NULL, NULL);
    cr_assert(rev && out);
    lf_node *y = lf_apply(g, LF_OP_MUL, lf_input(g, rev), lf_const(g, LF_F64, 2.0), NULL);
    cr_assert_eq(lf_eval(g, 1, &y, &out), LF_OK, "%s", lf_errmsg(ctx));
    for (int i = 0; i < 64; i++) cr_expect_eq(m[i], want[i], "m[%d] = %g, want %g", i, m[i], want[i]);
    int64_t h = 40;
    lf_buffer *lo = lf_buffer_wrap(ctx, LF_F64, 1, &h, NULL, m, NULL, NULL);
    lf_buffer *hi = lf_buffer_wrap(ctx, LF_F64, 1, &h, NULL, m + 24, NULL, NULL);
    lf_node *f = lf_fill(g, LF_F64, 7.0, 1, &h);
    cr_expect_eq(lf_eval(g, 2, (lf_node *[]){f, f}, (lf_buffer *[]){lo, hi}), LF_ERR_INVALID);
    cr_expect_str_eq(lf_errmsg(ctx), "eval: outputs 0 and 1 are different buffers over overlapping memory");
    for (int i = 0; i < 64; i++) cr_expect_eq(m[i], want[i], "untouched");
}

/* A gather with an index out of range fails the eval: the wrapped output's
 * memory is as before, on every backend. */
Test(wrap, failed_eval_leaves_wrapped_output_untouched) {
    enum { N = 5000 };
    static double x[N], y[N];
    static int64_t idx[N];
    for (int i = 0; i < N; i++) x[i] = i, y[i] = -3, idx[i] = N - 1 - i;
    idx[N - 10] = N + 5;
    int64_t n = N;
    lf_buffer *xb = lf_buffer_wrap(ctx, LF_F64, 1, &n, NULL, x, NULL, NULL);
    lf_buffer *ib = lf_buffer_wrap(ctx, LF_I64, 1, &n, NULL, idx, NULL, NULL);
    lf_buffer *yb = lf_buffer_wrap(ctx, LF_F64, 1, &n, NULL, y, NULL, NULL);
    lf_node *gat = lf_gather(g, lf_input(g, xb), 0, lf_input(g, ib));
    lf_node *out = lf_apply(g, LF_OP_ADD, gat, lf_const(g, LF_F64, 1.0), NULL);
    cr_expect_eq(lf_eval(g, 1, &out, &yb), LF_ERR_INDEX);
    for (int i = 0; i < N; i++)
        if (y[i] != -3) cr_assert_fail("y[%d] = %g changed by a failed eval", i, y[i]);
    idx[N - 10] = 9;
    cr_assert_eq(lf_eval(g, 1, &out, &yb), LF_OK, "%s", lf_errmsg(ctx));
    cr_expect_eq(y[0], N);
    cr_expect_eq(y[N - 10], 10.0);
}
