/* tests/test_ufn.c: user functions written in C (lf_fn_c, lf_fn_c_cuda).
 *
 * Each graph runs on the reference evaluator, the schedule interpreter
 * (fused and not) and compiled CPU kernels on 1, 2 and 3 threads, and must
 * equal, bit for bit, an oracle computed here with the same C body (only
 * operations whose rounding cannot differ: no a*b+c that a compiler could
 * contract). Inputs carry NaN, +-Inf, -0, odd sizes, zero-size arrays and
 * broadcasting. The fused CPU schedule's kernel count shows that a user
 * function fuses like a builtin (map(user, map(g, x)) is one kernel, and so
 * is a reduction over it). Errors: bad names and signatures, NULLs, a body
 * that does not compile (LF_ERR_COMPILE, the message at the user's line),
 * a name declared twice, arity; the kernel cache tells two bodies apart.
 */
#include "testutil.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static lf_ctx *ctx_of(lf_backend be, int threads, int compile, int fusion) {
    lf_ctx_options o;
    lf_ctx_options_init(&o);
    o.backend = be;
    o.threads = threads;
    o.compile = compile;
    o.fusion = fusion;
    lf_ctx *c = lf_ctx_new(&o);
    cr_assert(c != NULL, "%s", lf_errmsg(NULL));
    return c;
}

/* A buffer of dtype t and shape holding host data (numel elements). */
static lf_buffer *buffer_from_host(lf_ctx *c, lf_dtype t, int ndim, const int64_t *shape, const void *data) {
    lf_buffer *b = lf_buffer_new(c, t, ndim, shape);
    cr_assert(b != NULL, "%s", lf_errmsg(c));
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= shape[d];
    if (n) cr_assert_eq(lf_buffer_write(b, data, (size_t)n * lf_dtype_size(t)), LF_OK, "%s", lf_errmsg(c));
    return b;
}

typedef struct run_kind {
    lf_backend be;
    int threads, compile, fusion;
    const char *name;
} run_kind;

static const run_kind runs[] = {
    {LF_BACKEND_REFERENCE, 1, LF_COMPILE_AUTO, 1, "reference"},
    {LF_BACKEND_CPU, 2, LF_COMPILE_NEVER, 1, "interpreter"},
    {LF_BACKEND_CPU, 1, LF_COMPILE_NEVER, 0, "interpreter, fusion off"},
    {LF_BACKEND_CPU, 1, LF_COMPILE_REQUIRE, 1, "cpu, 1 thread"},
    {LF_BACKEND_CPU, 2, LF_COMPILE_REQUIRE, 1, "cpu, 2 threads"},
    {LF_BACKEND_CPU, 3, LF_COMPILE_REQUIRE, 1, "cpu, 3 threads"},
};
enum { NRUNS = sizeof runs / sizeof runs[0], RUN_COUNTED = 4 };

/* Special values first, then random ones. */
static void fill(float *x, int64_t n, double lo, double hi) {
    static const float special[] = {NAN, INFINITY, -INFINITY, -0.0f, 0.0f, 1.0f, -3.5f};
    for (int64_t i = 0; i < n; i++) x[i] = i < 7 ? special[i] : (float)tu_uniform(lo, hi);
}

static bool same_bits32(const void *a, const void *b, int64_t n, size_t size, int64_t *at) {
    for (int64_t i = 0; i < n; i++)
        if (memcmp((const char *)a + i * size, (const char *)b + i * size, size)) {
            *at = i;
            return false;
        }
    return true;
}

/* ---- the body under test and its oracle --------------------------------------------- */

static const char SMOOTH_SIG[] = "f32(f32 x, f32 k)";
static const char SMOOTH_BODY[] = "float t = x / k;\n"
                                  "return t / (1.0f + fabsf(t));";
static float smooth(float x, float k) {
    float t = x / k;
    return t / (1.0f + fabsf(t));
}

/* y = smooth(x * 2.0 + 1.0, k) with k broadcast from [1] or [n]. */
static void check_smooth(int64_t n, bool k_scalar) {
    float *x = malloc((size_t)(n ? n : 1) * sizeof *x), *k = malloc((size_t)(n ? n : 1) * sizeof *k);
    float *want = malloc((size_t)(n ? n : 1) * sizeof *want), *got = malloc((size_t)(n ? n : 1) * sizeof *got);
    fill(x, n, -50, 50);
    int64_t nk = k_scalar ? 1 : n;
    for (int64_t i = 0; i < nk; i++) k[i] = i == 1 ? -0.0f : (float)tu_uniform(0.5, 4);
    for (int64_t i = 0; i < n; i++) want[i] = smooth(x[i] * 2.0f + 1.0f, k[k_scalar ? 0 : i]);
    for (int r = 0; r < NRUNS; r++) {
        lf_ctx *c = ctx_of(runs[r].be, runs[r].threads, runs[r].compile, runs[r].fusion);
        lf_graph *g = lf_graph_new(c);
        lf_node *xn = lf_input(g, buffer_from_host(c, LF_F32, 1, &n, x));
        lf_node *kn = lf_input(g, buffer_from_host(c, LF_F32, 1, &nk, k));
        lf_fn *f = lf_fn_c(g, "smooth", SMOOTH_SIG, SMOOTH_BODY);
        cr_assert(f != NULL, "%s: lf_fn_c: %s", runs[r].name, lf_errmsg(c));
        lf_node *y = lf_zipwith(g, f, 2, (lf_node *[]){lf_map(g, lf_fn_parse(g, "(x) -> x * 2.0 + 1.0"), xn), kn});
        cr_assert(y != NULL, "%s", lf_errmsg(c));
        lf_buffer *out = lf_buffer_new(c, LF_F32, 1, &n);
        cr_assert_eq(lf_eval(g, 1, &y, &out), LF_OK, "%s: %s", runs[r].name, lf_errmsg(c));
        if (n) cr_assert_eq(lf_buffer_read(out, got, lf_buffer_bytes(out)), LF_OK);
        int64_t at = 0;
        cr_expect(same_bits32(got, want, n, sizeof *got, &at), "n=%lld on %s: element %lld is %a, want %a (x %a)",
                  (long long)n, runs[r].name, (long long)at, (double)got[at], (double)want[at], (double)x[at]);
        if (r == RUN_COUNTED && n) { /* one kernel: the user function fused with the map before it */
            lf_eval_stats st;
            lf_ctx_last_stats(c, &st);
            cr_expect_eq(st.kernels, 1, "map(user, map(g, x)): %d kernels, want 1", st.kernels);
        }
        lf_ctx_destroy(c);
    }
    free(x), free(k), free(want), free(got);
}

Test(ufn, map_of_map_every_evaluator) {
    check_smooth(0, true);
    check_smooth(7, true);
    check_smooth(1000, true);
    check_smooth(37, false);
}

/* Mixed dtypes: an i32 and an f32 argument converted to i64 and f64, a bool
 * result, then a select over it; unnamed parameters are p0 and p1. */
Test(ufn, mixed_dtypes_and_bool_result) {
    const int64_t n = 41;
    int32_t a[41];
    float b[41], want[41], got[41];
    fill(b, n, -100, 100);
    for (int i = 0; i < n; i++) a[i] = (int32_t)tu_randint(-100, 100);
    for (int i = 0; i < n; i++) {
        bool over = (double)(int64_t)a[i] * 0.5 > (double)b[i];
        want[i] = over ? b[i] : -1.0f;
    }
    for (int r = 0; r < NRUNS; r++) {
        lf_ctx *c = ctx_of(runs[r].be, runs[r].threads, runs[r].compile, runs[r].fusion);
        lf_graph *g = lf_graph_new(c);
        lf_node *an = lf_input(g, buffer_from_host(c, LF_I32, 1, &n, a));
        lf_node *bn = lf_input(g, buffer_from_host(c, LF_F32, 1, &n, b));
        lf_fn *f = lf_fn_c(g, "over", "bool(i64, f64)", "return (double)p0 * 0.5 > p1;");
        cr_assert(f != NULL, "%s", lf_errmsg(c));
        lf_node *m = lf_zipwith(g, f, 2, (lf_node *[]){an, bn});
        cr_assert(m != NULL, "%s", lf_errmsg(c));
        cr_expect_eq(lf_node_dtype(m), LF_BOOL);
        lf_node *y = lf_select(g, m, bn, lf_const(g, LF_F32, -1.0));
        lf_buffer *out = lf_buffer_new(c, LF_F32, 1, &n);
        cr_assert_eq(lf_eval(g, 1, &y, &out), LF_OK, "%s: %s", runs[r].name, lf_errmsg(c));
        cr_assert_eq(lf_buffer_read(out, got, lf_buffer_bytes(out)), LF_OK);
        int64_t at = 0;
        cr_expect(same_bits32(got, want, n, sizeof *got, &at), "%s: element %lld is %g, want %g", runs[r].name,
                  (long long)at, (double)got[at], (double)want[at]);
        lf_ctx_destroy(c);
    }
}

/* A reduction reads the user function in registers: sum(cube(x)) over rows
 * is one kernel. */
Test(ufn, reduce_over_user_function) {
    const int64_t shape[2] = {5, 9};
    double x[45], want[5] = {0}, got[5];
    for (int i = 0; i < 45; i++) x[i] = tu_uniform(-3, 3);
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 9; j++) want[i] += x[i * 9 + j] * x[i * 9 + j] * x[i * 9 + j];
    for (int r = 0; r < NRUNS; r++) {
        lf_ctx *c = ctx_of(runs[r].be, runs[r].threads, runs[r].compile, runs[r].fusion);
        lf_graph *g = lf_graph_new(c);
        lf_node *xn = lf_input(g, buffer_from_host(c, LF_F64, 2, shape, x));
        lf_fn *f = lf_fn_c(g, "cube", "f64(f64 v)", "return v * v * v;");
        lf_node *y = lf_reduce(g, LF_RED_SUM, lf_map(g, f, xn), 1, (int[]){1}, false);
        cr_assert(y != NULL, "%s", lf_errmsg(c));
        lf_buffer *out = lf_buffer_new(c, LF_F64, 1, shape);
        cr_assert_eq(lf_eval(g, 1, &y, &out), LF_OK, "%s: %s", runs[r].name, lf_errmsg(c));
        cr_assert_eq(lf_buffer_read(out, got, lf_buffer_bytes(out)), LF_OK);
        for (int i = 0; i < 5; i++)
            cr_expect(tu_close(got[i], want[i], 1e-12, 1e-12), "%s: row %d is %.17g, want %.17g", runs[r].name, i,
                      got[i], want[i]);
        if (r == RUN_COUNTED) {
            lf_eval_stats st;
            lf_ctx_last_stats(c, &st);
            cr_expect_eq(st.kernels, 1, "sum(map(user, x)): %d kernels, want 1", st.kernels);
        }
        lf_ctx_destroy(c);
    }
}

/* The printer writes a call; declaring the same function again gives an
 * equal fn; a graph may call it inside a larger fn through composition. */
Test(ufn, print_and_redeclare) {
    lf_ctx *c = ctx_of(LF_BACKEND_REFERENCE, 1, 0, 1);
    lf_graph *g = lf_graph_new(c);
    lf_fn *a = lf_fn_c(g, "smooth", SMOOTH_SIG, SMOOTH_BODY);
    lf_fn *b = lf_fn_c(g, "smooth", SMOOTH_SIG, SMOOTH_BODY);
    cr_assert(a && b, "%s", lf_errmsg(c));
    cr_expect(lf_fn_equal(a, b));
    char buf[64];
    lf_fn_print(a, buf, sizeof buf);
    cr_expect_str_eq(buf, "(x, k) -> smooth(x, k)");
    lf_fn *z = lf_fn_c(g, "zero", "i32()", "return 42;");
    cr_assert(z != NULL, "%s", lf_errmsg(c));
    lf_node *y = lf_zipwith(g, z, 0, NULL);
    cr_assert(y != NULL, "%s", lf_errmsg(c));
    lf_buffer *out = lf_buffer_new(c, LF_I32, 0, NULL);
    cr_assert_eq(lf_eval(g, 1, &y, &out), LF_OK, "%s", lf_errmsg(c));
    int32_t v = 0;
    lf_buffer_read(out, &v, lf_buffer_bytes(out));
    cr_expect_eq(v, 42);
    lf_ctx_destroy(c);
}

/* lf_fn_parse calls a user function of the graph by name, and reads back
 * what lf_fn_print writes; the parsed fn runs the same on every evaluator. */
Test(ufn, parser_calls_by_name) {
    const int64_t n = 9;
    float x[9], want[9], got[9];
    fill(x, n, -5, 5);
    for (int i = 0; i < n; i++) want[i] = smooth(x[i] * 2.0f, 3.0f) + 1.0f;
    for (int r = 0; r < NRUNS; r++) {
        lf_ctx *c = ctx_of(runs[r].be, runs[r].threads, runs[r].compile, runs[r].fusion);
        lf_graph *g = lf_graph_new(c);
        cr_assert(lf_fn_c(g, "smooth", SMOOTH_SIG, SMOOTH_BODY) != NULL, "%s", lf_errmsg(c));
        lf_fn *f = lf_fn_parse(g, "(v) -> smooth(v * 2.0, 3.0) + 1");
        cr_assert(f != NULL, "%s", lf_errmsg(c));
        char text[128];
        lf_fn_print(f, text, sizeof text);
        lf_fn *again = lf_fn_parse(g, text);
        cr_expect(again && lf_fn_equal(f, again), "'%s' does not read back", text);
        lf_node *y = lf_map(g, f, lf_input(g, buffer_from_host(c, LF_F32, 1, &n, x)));
        lf_buffer *out = lf_buffer_new(c, LF_F32, 1, &n);
        cr_assert_eq(lf_eval(g, 1, &y, &out), LF_OK, "%s: %s", runs[r].name, lf_errmsg(c));
        lf_buffer_read(out, got, sizeof got);
        int64_t at = 0;
        cr_expect(same_bits32(got, want, n, sizeof *got, &at), "%s: element %lld is %a, want %a", runs[r].name,
                  (long long)at, (double)got[at], (double)want[at]);
        lf_ctx_destroy(c);
    }
    lf_ctx *c = ctx_of(LF_BACKEND_REFERENCE, 1, 0, 1);
    lf_graph *g = lf_graph_new(c);
    cr_expect(lf_fn_parse(g, "(v) -> smooth(v, 1.0)") == NULL); /* not declared on this graph */
    cr_expect(strstr(lf_errmsg(c), "unknown function 'smooth'") != NULL, "%s", lf_errmsg(c));
    lf_graph_free(g);
    g = lf_graph_new(c);
    lf_fn_c(g, "smooth", SMOOTH_SIG, SMOOTH_BODY);
    cr_expect(lf_fn_parse(g, "(v) -> smooth(v)") == NULL);
    cr_expect(strstr(lf_errmsg(c), "'smooth' takes 2 arguments, got 1") != NULL, "%s", lf_errmsg(c));
    lf_ctx_destroy(c);
}

/* The body is part of the kernel's key: two graphs on one context with the
 * same name and signature but other bodies run their own code, and the same
 * body again is a memory hit. */
Test(ufn, body_is_in_the_kernel_key) {
    lf_ctx *c = ctx_of(LF_BACKEND_CPU, 2, LF_COMPILE_REQUIRE, 1);
    const int64_t n = 5;
    float x[5] = {1, 2, 3, 4, 5}, got[5];
    const char *bodies[3] = {"return v + 1.0f;", "return v + 2.0f;", "return v + 1.0f;"};
    for (int t = 0; t < 3; t++) {
        lf_graph *g = lf_graph_new(c);
        lf_node *y = lf_map(g, lf_fn_c(g, "bump", "f32(f32 v)", bodies[t]), lf_input(g, buffer_from_host(c, LF_F32, 1, &n, x)));
        lf_buffer *out = lf_buffer_new(c, LF_F32, 1, &n);
        cr_assert_eq(lf_eval(g, 1, &y, &out), LF_OK, "%s", lf_errmsg(c));
        lf_buffer_read(out, got, lf_buffer_bytes(out));
        for (int i = 0; i < 5; i++) cr_expect_eq(got[i], x[i] + (t == 1 ? 2.0f : 1.0f), "body %d, element %d: %g", t, i, (double)got[i]);
        lf_eval_stats st;
        lf_ctx_last_stats(c, &st);
        cr_expect_eq(st.kernels_memory_hits, t == 2 ? 1 : 0, "body %d: %d memory hits", t, st.kernels_memory_hits);
        lf_buffer_free(out);
        lf_graph_free(g);
    }
    lf_ctx_destroy(c);
}

/* ---- errors ------------------------------------------------------------------------------- */

static void expect_refused(const char *name, const char *sig, const char *body, lf_status want, const char *msg_has) {
    lf_ctx *c = ctx_of(LF_BACKEND_REFERENCE, 1, 0, 1);
    lf_graph *g = lf_graph_new(c);
    lf_fn *f = lf_fn_c(g, name, sig, body);
    cr_expect(f == NULL, "'%s' '%s' accepted", name ? name : "(null)", sig ? sig : "(null)");
    cr_expect_eq(lf_graph_status(g), want, "'%s' '%s': %s, want %s (%s)", name ? name : "(null)", sig ? sig : "(null)",
                 lf_status_name(lf_graph_status(g)), lf_status_name(want), lf_errmsg(c));
    cr_expect(strstr(lf_errmsg(c), msg_has) != NULL, "message \"%s\" lacks \"%s\"", lf_errmsg(c), msg_has);
    lf_ctx_destroy(c);
}

Test(ufn, bad_names_and_signatures) {
    expect_refused(NULL, "f32(f32)", "return p0;", LF_ERR_NULL, "name is NULL");
    expect_refused("f", NULL, "return p0;", LF_ERR_NULL, "signature is NULL");
    expect_refused("f", "f32(f32)", NULL, LF_ERR_NULL, "c_source is NULL");
    expect_refused("2f", "f32(f32)", "return p0;", LF_ERR_INVALID, "not a C identifier");
    expect_refused("lf_add", "f32(f32)", "return p0;", LF_ERR_INVALID, "reserved");
    expect_refused("a b", "f32(f32)", "return p0;", LF_ERR_INVALID, "not a C identifier");
    expect_refused("while", "f32(f32)", "return p0;", LF_ERR_INVALID, "reserved");
    expect_refused("f", "f16(f32)", "return p0;", LF_ERR_INVALID, "'f16' is not a dtype");
    expect_refused("f", "f32 f32", "return p0;", LF_ERR_INVALID, "expected '('");
    expect_refused("f", "f32(f32 x, f32 x)", "return x;", LF_ERR_INVALID, "names two parameters");
    expect_refused("f", "f32(f32 p1, f32)", "return p1;", LF_ERR_INVALID, "names two parameters");
    expect_refused("f", "f32(f32, f32, f32, f32)", "return p0;", LF_ERR_INVALID, "more than 3 parameters");
    expect_refused("f", "f32(f32 int)", "return 0;", LF_ERR_INVALID, "reserved");
    expect_refused("f", "f32(f32) x", "return p0;", LF_ERR_INVALID, "unexpected text");
    expect_refused("f", "f32(f32 f)", "return f;", LF_ERR_INVALID, "the function's name");
}

/* A body that does not compile: LF_ERR_COMPILE, the compiler's message at
 * the user's own line ("sq:2"), the graph's error sticky, nothing crashes. */
Test(ufn, body_that_does_not_compile) {
    lf_ctx *c = ctx_of(LF_BACKEND_CPU, 1, LF_COMPILE_AUTO, 1);
    lf_graph *g = lf_graph_new(c);
    lf_fn *f = lf_fn_c(g, "sq", "f32(f32 x)", "float y = x * x;\nreturn y +* ;\n");
    cr_assert(f == NULL);
    cr_expect_eq(lf_graph_status(g), LF_ERR_COMPILE, "%s", lf_status_name(lf_graph_status(g)));
    cr_expect(strstr(lf_errmsg(c), "sq:2") != NULL, "message lacks the user's line: %s", lf_errmsg(c));
    cr_expect(strstr(lf_errmsg(c), "fn_c 'sq'") != NULL, "message lacks the call: %s", lf_errmsg(c));
    cr_expect(lf_map(g, f, NULL) == NULL); /* sticky */
    lf_graph_free(g);
    /* an unknown identifier too: the line counts from the body's first */
    g = lf_graph_new(c);
    cr_expect(lf_fn_c(g, "sq", "f32(f32 x)", "return x;\n\n\nreturn nosuch;") == NULL);
    cr_expect_eq(lf_graph_status(g), LF_ERR_COMPILE);
    cr_expect(strstr(lf_errmsg(c), "sq:4") != NULL, "message lacks the user's line: %s", lf_errmsg(c));
    lf_graph_free(g);
    lf_ctx_destroy(c);
}

Test(ufn, name_twice_and_arity) {
    lf_ctx *c = ctx_of(LF_BACKEND_REFERENCE, 1, 0, 1);
    lf_graph *g = lf_graph_new(c);
    cr_assert(lf_fn_c(g, "h", "f32(f32 x)", "return x;") != NULL, "%s", lf_errmsg(c));
    cr_expect(lf_fn_c(g, "h", "f32(f32 x)", "return -x;") == NULL);
    cr_expect_eq(lf_graph_status(g), LF_ERR_INVALID);
    cr_expect(strstr(lf_errmsg(c), "another user function") != NULL, "%s", lf_errmsg(c));
    lf_graph_free(g);
    g = lf_graph_new(c);
    lf_fn *two = lf_fn_c(g, "two", "f32(f32, f32)", "return p0 - p1;");
    const int64_t n = 3;
    lf_node *x = lf_input(g, lf_buffer_new(c, LF_F32, 1, &n));
    cr_expect(lf_map(g, two, x) == NULL);
    cr_expect_eq(lf_graph_status(g), LF_ERR_ARITY, "%s", lf_errmsg(c));
    lf_graph_free(g);
    lf_ctx_destroy(c);
}

/* ---- lf_extern ---------------------------------------------------------------------------- */

/* out[i] = sum of in0[0..i] in reverse: out[i] = sum_{j >= i} in0[j] (f64
 * accumulate, f32 result), plus in1[0] when a second input is given. */
static int suffix_sum(void *user, int nin, const lf_extern_array *ins, const lf_extern_array *out, char *msg,
                      size_t cap) {
    int *calls = user;
    (*calls)++;
    if (nin < 1 || ins[0].dtype != LF_F32 || out->dtype != LF_F32 || out->numel != ins[0].numel) {
        snprintf(msg, cap, "suffix_sum: unexpected arrays");
        return 1;
    }
    const float *x = ins[0].data;
    float *y = out->data;
    double add = nin > 1 && ins[1].numel ? ((const double *)ins[1].data)[0] : 0.0, s = 0;
    for (int64_t i = ins[0].numel - 1; i >= 0; i--) {
        s += x[i];
        y[i] = (float)(s + add);
    }
    return 0;
}

static int always_fails(void *user, int nin, const lf_extern_array *ins, const lf_extern_array *out, char *msg,
                        size_t cap) {
    (void)user, (void)nin, (void)ins;
    if (out->numel) ((float *)out->data)[0] = 123.0f; /* written, then dropped */
    snprintf(msg, cap, "the device is on fire");
    return 7;
}

/* y = sqrt(suffix_sum(x * 2 + 1, [shift])) + 1: the producer is one kernel
 * before the barrier, the consumer one after it. */
static void check_extern(int64_t n) {
    float *x = malloc((size_t)(n ? n : 1) * sizeof *x), *want = malloc((size_t)(n ? n : 1) * sizeof *want);
    float *got = malloc((size_t)(n ? n : 1) * sizeof *got);
    for (int64_t i = 0; i < n; i++) x[i] = (float)tu_uniform(0, 2);
    double shift = 0.25, s = 0;
    for (int64_t i = n - 1; i >= 0; i--) {
        s += (float)((float)(x[i] * 2.0f) + 1.0f);
        want[i] = sqrtf((float)(s + shift)) + 1.0f;
    }
    for (int r = 0; r < NRUNS; r++) {
        lf_ctx *c = ctx_of(runs[r].be, runs[r].threads, runs[r].compile, runs[r].fusion);
        lf_graph *g = lf_graph_new(c);
        int calls = 0;
        lf_node *xn = lf_input(g, buffer_from_host(c, LF_F32, 1, &n, x));
        lf_node *pre = lf_map(g, lf_fn_parse(g, "(v) -> v * 2.0 + 1.0"), xn);
        lf_node *e = lf_extern(g, "suffix_sum", suffix_sum, &calls, 2,
                               (lf_node *[]){pre, lf_input(g, buffer_from_host(c, LF_F64, 1, (int64_t[]){1}, &shift))}, LF_F32, 1, &n);
        lf_node *y = lf_map(g, lf_fn_parse(g, "(v) -> sqrt(v) + 1.0"), e);
        cr_assert(y != NULL, "%s", lf_errmsg(c));
        lf_buffer *out = lf_buffer_new(c, LF_F32, 1, &n);
        cr_assert_eq(lf_eval(g, 1, &y, &out), LF_OK, "%s: %s", runs[r].name, lf_errmsg(c));
        cr_expect_eq(calls, 1, "%s: %d calls", runs[r].name, calls);
        if (n) lf_buffer_read(out, got, lf_buffer_bytes(out));
        int64_t at = 0;
        cr_expect(same_bits32(got, want, n, sizeof *got, &at), "n=%lld on %s: element %lld is %a, want %a",
                  (long long)n, runs[r].name, (long long)at, (double)got[at], (double)want[at]);
        if (r == RUN_COUNTED && n) { /* the producer's kernel, then the consumer's (inputs are read in place) */
            lf_eval_stats st;
            lf_ctx_last_stats(c, &st);
            cr_expect_eq(st.kernels, 2, "producer | extern | consumer: %d kernels, want 2", st.kernels);
        }
        /* again: the callback runs once more, the programs are reused */
        cr_assert_eq(lf_eval(g, 1, &y, &out), LF_OK, "%s: %s", runs[r].name, lf_errmsg(c));
        cr_expect_eq(calls, 2);
        lf_ctx_destroy(c);
    }
    free(x), free(want), free(got);
}

Test(extern, every_evaluator_and_kernel_count) {
    check_extern(0);
    check_extern(1);
    check_extern(37);
    check_extern(3000);
}

/* Producers of the extern fuse with each other up to it, consumers after
 * it: map(map(map(x))) -> extern -> map(map(.)) is two kernels; an extern
 * of an extern runs in order, and an extern may be an output itself. */
Test(extern, chained_and_as_output) {
    const int64_t n = 11;
    float x[11], want1[11], want2[11], got[11];
    for (int i = 0; i < n; i++) x[i] = (float)i - 5.0f;
    double s = 0;
    for (int i = (int)n - 1; i >= 0; i--) want1[i] = (float)(s += (float)(fabsf(x[i]) * 3.0f));
    s = 0;
    for (int i = (int)n - 1; i >= 0; i--) want2[i] = (float)(s += want1[i]);
    for (int r = 0; r < NRUNS; r++) {
        lf_ctx *c = ctx_of(runs[r].be, runs[r].threads, runs[r].compile, runs[r].fusion);
        lf_graph *g = lf_graph_new(c);
        int calls = 0;
        lf_node *xn = lf_input(g, buffer_from_host(c, LF_F32, 1, &n, x));
        lf_node *p = lf_map(g, lf_fn_parse(g, "(v) -> v * 3.0"), lf_map(g, lf_fn_parse(g, "(v) -> abs(v)"), xn));
        lf_node *e1 = lf_extern(g, "first", suffix_sum, &calls, 1, &p, LF_F32, 1, &n);
        lf_node *e2 = lf_extern(g, "second", suffix_sum, &calls, 1, &e1, LF_F32, 1, &n);
        cr_assert(e2 != NULL, "%s", lf_errmsg(c));
        lf_buffer *o1 = lf_buffer_new(c, LF_F32, 1, &n), *o2 = lf_buffer_new(c, LF_F32, 1, &n);
        cr_assert_eq(lf_eval(g, 2, (lf_node *[]){e1, e2}, (lf_buffer *[]){o1, o2}), LF_OK, "%s: %s", runs[r].name,
                     lf_errmsg(c));
        cr_expect_eq(calls, 2);
        lf_buffer_read(o1, got, sizeof got);
        int64_t at = 0;
        cr_expect(same_bits32(got, want1, n, sizeof *got, &at), "%s: first, element %lld", runs[r].name, (long long)at);
        lf_buffer_read(o2, got, sizeof got);
        cr_expect(same_bits32(got, want2, n, sizeof *got, &at), "%s: second, element %lld", runs[r].name, (long long)at);
        if (r == RUN_COUNTED) {
            lf_eval_stats st;
            lf_ctx_last_stats(c, &st);
            /* abs and *3 fused into one kernel before the first extern, one
               kernel copying both extern results into the outputs */
            cr_expect_eq(st.kernels, 2, "%d kernels, want 2", st.kernels);
        }
        lf_ctx_destroy(c);
    }
}

/* A failing callback: LF_ERR_EXTERN with its message, the output buffer
 * untouched; the graph stays usable. */
Test(extern, callback_failure_leaves_outputs) {
    for (int r = 0; r < NRUNS; r++) {
        lf_ctx *c = ctx_of(runs[r].be, runs[r].threads, runs[r].compile, runs[r].fusion);
        lf_graph *g = lf_graph_new(c);
        const int64_t n = 4;
        float x[4] = {1, 2, 3, 4}, before[4] = {-1, -2, -3, -4}, got[4];
        lf_node *xn = lf_input(g, buffer_from_host(c, LF_F32, 1, &n, x));
        lf_node *e = lf_extern(g, "burn", always_fails, NULL, 1, &xn, LF_F32, 1, &n);
        lf_node *y = lf_apply(g, LF_OP_ADD, e, xn, NULL);
        lf_buffer *out = buffer_from_host(c, LF_F32, 1, &n, before);
        cr_expect_eq(lf_eval(g, 1, &y, &out), LF_ERR_EXTERN, "%s: %s", runs[r].name, lf_errmsg(c));
        cr_expect(strstr(lf_errmsg(c), "the device is on fire") && strstr(lf_errmsg(c), "extern burn"), "%s", lf_errmsg(c));
        lf_buffer_read(out, got, sizeof got);
        cr_expect(!memcmp(got, before, sizeof got), "%s: output changed", runs[r].name);
        /* the rest of the graph still evaluates */
        cr_expect_eq(lf_eval(g, 1, (lf_node *[]){lf_apply(g, LF_OP_NEG, xn, NULL, NULL)}, &out), LF_OK, "%s", lf_errmsg(c));
        lf_ctx_destroy(c);
    }
}

Test(extern, bad_arguments) {
    lf_ctx *c = ctx_of(LF_BACKEND_REFERENCE, 1, 0, 1);
    const int64_t n = 3, neg = -1;
    struct {
        const char *name;
        lf_extern_fn fn;
        int nin, ndim;
        const int64_t *shape;
        lf_dtype t;
        lf_status want;
    } cases[] = {
        {NULL, suffix_sum, 1, 1, &n, LF_F32, LF_ERR_NULL},   {"x", NULL, 1, 1, &n, LF_F32, LF_ERR_NULL},
        {"", suffix_sum, 1, 1, &n, LF_F32, LF_ERR_INVALID},  {"x", suffix_sum, 9, 1, &n, LF_F32, LF_ERR_INVALID},
        {"x", suffix_sum, -1, 1, &n, LF_F32, LF_ERR_INVALID}, {"x", suffix_sum, 1, 1, &neg, LF_F32, LF_ERR_SHAPE},
        {"x", suffix_sum, 1, 9, &n, LF_F32, LF_ERR_SHAPE},   {"x", suffix_sum, 1, 1, &n, (lf_dtype)99, LF_ERR_DTYPE},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lf_graph *g = lf_graph_new(c);
        lf_node *x = lf_input(g, lf_buffer_new(c, LF_F32, 1, &n));
        lf_node *ins[LF_MAX_ARGS + 1] = {x, x, x, x, x, x, x, x, x};
        cr_expect(lf_extern(g, cases[i].name, cases[i].fn, NULL, cases[i].nin, ins, cases[i].t, cases[i].ndim,
                            cases[i].shape) == NULL, "case %zu accepted", i);
        cr_expect_eq(lf_graph_status(g), cases[i].want, "case %zu: %s (%s)", i, lf_status_name(lf_graph_status(g)),
                     lf_errmsg(c));
        lf_graph_free(g);
    }
    lf_graph *g = lf_graph_new(c);
    lf_node *x = lf_input(g, lf_buffer_new(c, LF_F32, 1, &n));
    lf_node *e = lf_extern(g, "x", suffix_sum, NULL, 1, &x, LF_F32, 1, &n);
    cr_expect_eq(lf_input_rebind(g, e, lf_buffer_new(c, LF_F32, 1, &n)), LF_ERR_INVALID, "%s", lf_errmsg(c));
    lf_graph *other = lf_graph_new(c);
    cr_expect(lf_extern(other, "x", suffix_sum, NULL, 1, &x, LF_F32, 1, &n) == NULL);
    cr_expect_eq(lf_graph_status(other), LF_ERR_STATE, "%s", lf_errmsg(c));
    lf_ctx_destroy(c);
}

/* ---- lf_fn_from_library ------------------------------------------------------------------- */

/* The oracle: the same code as tests/ufn_lib.c. */
static float lib_diff3(float a, float b) { return (a - b) / 3.0f; }

/* z = lib_diff3(x + 1, y) and t = lib_tri(i) and lib_is_neg(x) on every
 * evaluator: a library function fuses (called through a kernel parameter)
 * and a graph may call several. */
Test(library, every_evaluator) {
    const int64_t n = 29;
    float x[29], y[29], want[29], got[29];
    int64_t iv[29], tri[29], gti[29];
    uint8_t neg[29], gneg[29];
    fill(x, n, -10, 10);
    fill(y, n, -10, 10);
    for (int i = 0; i < n; i++) {
        iv[i] = tu_randint(-1000, 1000);
        tri[i] = iv[i] * (iv[i] + 1) / 2;
        want[i] = lib_diff3(x[i] + 1.0f, y[i]);
        neg[i] = (double)x[i] < 0;
    }
    for (int r = 0; r < NRUNS; r++) {
        lf_ctx *c = ctx_of(runs[r].be, runs[r].threads, runs[r].compile, runs[r].fusion);
        lf_graph *g = lf_graph_new(c);
        lf_fn *d3 = lf_fn_from_library(g, "diff3", "f32(f32, f32)", LF_TEST_UFN_LIB, "lib_diff3");
        lf_fn *tr = lf_fn_from_library(g, "tri", "i64(i64)", LF_TEST_UFN_LIB, "lib_tri");
        lf_fn *ng = lf_fn_from_library(g, "is_neg", "bool(f64)", LF_TEST_UFN_LIB, "lib_is_neg");
        cr_assert(d3 && tr && ng, "%s: %s", runs[r].name, lf_errmsg(c));
        lf_node *xn = lf_input(g, buffer_from_host(c, LF_F32, 1, &n, x));
        lf_node *yn = lf_input(g, buffer_from_host(c, LF_F32, 1, &n, y));
        lf_node *in = lf_input(g, buffer_from_host(c, LF_I64, 1, &n, iv));
        lf_node *z = lf_zipwith(g, d3, 2, (lf_node *[]){lf_map(g, lf_fn_parse(g, "(v) -> v + 1.0"), xn), yn});
        lf_node *t = lf_map(g, tr, in), *s = lf_map(g, ng, xn);
        cr_assert(z && t && s, "%s", lf_errmsg(c));
        lf_buffer *oz = lf_buffer_new(c, LF_F32, 1, &n), *ot = lf_buffer_new(c, LF_I64, 1, &n),
                  *os = lf_buffer_new(c, LF_BOOL, 1, &n);
        cr_assert_eq(lf_eval(g, 3, (lf_node *[]){z, t, s}, (lf_buffer *[]){oz, ot, os}), LF_OK, "%s: %s", runs[r].name,
                     lf_errmsg(c));
        lf_buffer_read(oz, got, sizeof got);
        lf_buffer_read(ot, gti, sizeof gti);
        lf_buffer_read(os, gneg, sizeof gneg);
        int64_t at = 0;
        cr_expect(same_bits32(got, want, n, sizeof *got, &at), "%s: diff3 element %lld is %a, want %a", runs[r].name,
                  (long long)at, (double)got[at], (double)want[at]);
        cr_expect(!memcmp(gti, tri, sizeof tri), "%s: tri differs", runs[r].name);
        cr_expect(!memcmp(gneg, neg, sizeof neg), "%s: is_neg differs", runs[r].name);
        if (r == RUN_COUNTED) {
            lf_eval_stats st;
            lf_ctx_last_stats(c, &st);
            cr_expect_leq(st.kernels, 2, "%d kernels", st.kernels);
            lf_eval_stats one;
            lf_eval(g, 1, &z, &oz);
            lf_ctx_last_stats(c, &one);
            cr_expect_eq(one.kernels, 1, "diff3(map(x), y): %d kernels, want 1", one.kernels);
        }
        lf_ctx_destroy(c);
    }
}

Test(library, errors) {
    lf_ctx *c = ctx_of(LF_BACKEND_CPU, 1, LF_COMPILE_AUTO, 1);
    lf_graph *g = lf_graph_new(c);
    cr_expect(lf_fn_from_library(g, "f", "f32(f32)", "/nonexistent/libnothing.so", "x") == NULL);
    cr_expect_eq(lf_graph_status(g), LF_ERR_INVALID);
    cr_expect(strstr(lf_errmsg(c), "cannot load '/nonexistent/libnothing.so'") != NULL, "%s", lf_errmsg(c));
    lf_graph_free(g);
    g = lf_graph_new(c);
    cr_expect(lf_fn_from_library(g, "f", "f32(f32)", LF_TEST_UFN_LIB, "lib_nosuch") == NULL);
    cr_expect_eq(lf_graph_status(g), LF_ERR_INVALID);
    cr_expect(strstr(lf_errmsg(c), "no function 'lib_nosuch'") != NULL, "%s", lf_errmsg(c));
    lf_graph_free(g);
    g = lf_graph_new(c);
    cr_expect(lf_fn_from_library(g, "f", "f32(f32)", NULL, "lib_tri") == NULL);
    cr_expect_eq(lf_graph_status(g), LF_ERR_NULL);
    lf_graph_free(g);
    g = lf_graph_new(c);
    cr_expect(lf_fn_from_library(g, "f", "f32[f32]", LF_TEST_UFN_LIB, "lib_diff3") == NULL);
    cr_expect_eq(lf_graph_status(g), LF_ERR_INVALID, "%s", lf_errmsg(c));
    lf_graph_free(g);
    lf_ctx_destroy(c);
}

/* ---- allocation failures ---------------------------------------------------------------- */

/* lf_fn_c (its host function already compiled on this context), a map over
 * it, an extern and an eval, on ctx; the status of the first failure. */
static lf_status build_ufn_extern(lf_ctx *c) {
    const int64_t n = 40;
    float x[40];
    for (int i = 0; i < n; i++) x[i] = (float)i;
    lf_graph *g = lf_graph_new(c);
    if (!g) return LF_ERR_NOMEM;
    int calls = 0;
    lf_buffer *xb = lf_buffer_new(c, LF_F32, 1, &n), *out = NULL;
    if (!xb || lf_buffer_write(xb, x, sizeof x) != LF_OK) {
        if (xb) lf_buffer_free(xb);
        lf_graph_free(g);
        return LF_ERR_NOMEM;
    }
    lf_node *y = lf_map(g, lf_fn_c(g, "smooth1", "f32(f32 v)", "return v / (1.0f + fabsf(v));"), lf_input(g, xb));
    lf_node *e = lf_extern(g, "suffix", suffix_sum, &calls, 1, &y, LF_F32, 1, &n);
    lf_node *z = lf_map(g, lf_fn_parse(g, "(v) -> smooth1(v) * 2"), e);
    lf_status st = lf_graph_status(g);
    if (st == LF_OK && !(out = lf_buffer_new(c, LF_F32, 1, &n))) st = LF_ERR_NOMEM;
    if (st == LF_OK) st = lf_eval(g, 1, &z, &out);
    if (out) lf_buffer_free(out);
    if (xb) lf_buffer_free(xb);
    lf_graph_free(g);
    return st;
}

/* Each allocation in turn fails once: every run ends in LF_OK or
 * LF_ERR_NOMEM and leaks nothing (the sweep ends after 25 runs in a row
 * pass, as test_memory's does). */
Test(ufn, every_allocation_failure_is_clean) {
    for (int r = 0; r < 2; r++) {
        lf_ctx *c = ctx_of(r ? LF_BACKEND_CPU : LF_BACKEND_REFERENCE, 2, LF_COMPILE_NEVER, 1);
        cr_assert_eq(build_ufn_extern(c), LF_OK, "%s", lf_errmsg(c)); /* compiles the host function once */
        size_t base = lf_debug_live_bytes();
        int failures = 0, ok_in_a_row = 0;
        int64_t k;
        for (k = 1; k < 5000 && ok_in_a_row < 25; k++) {
            lf_debug_fail_alloc(k, false);
            lf_status st = build_ufn_extern(c);
            lf_debug_fail_alloc(0, false);
            cr_assert(st == LF_OK || st == LF_ERR_NOMEM, "allocation %lld failed: %s (%s)", (long long)k, lf_status_name(st),
                      lf_errmsg(c));
            cr_assert_eq(lf_debug_live_bytes(), base, "allocation %lld failed: leaked %zu bytes", (long long)k,
                         lf_debug_live_bytes() - base);
            if (st == LF_OK) ok_in_a_row++;
            else failures++, ok_in_a_row = 0;
        }
        cr_expect_eq(ok_in_a_row, 25, "the sweep did not finish");
        cr_expect_gt(failures, 20, "only %d allocations were swept", failures);
        lf_ctx_destroy(c);
    }
}
