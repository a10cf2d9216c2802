/* tests/test_errors.c: every bad input, its status and its message.
 *
 * Covers NULL handles for every public call that takes one (no crash; NULL,
 * -1 or an error status; the message in lf_errmsg(NULL) or lf_errmsg(ctx)),
 * shapes that do not broadcast (the exact "zipwith: shapes [3,4] and [5] do
 * not broadcast"), bad and repeated axes, dtype and shape mismatches between
 * output buffers and nodes, reshape size mismatches, out-of-range slices, step
 * 0, too many dimensions, overflowing shape products and byte counts,
 * negative extents, fn arity mismatches, fn builder misuse, nodes of another
 * graph and buffers of another context, wrong byte counts, unknown enums,
 * bad sources (iota of bool, arange with step 0), an unavailable backend;
 * sticky errors (later builder calls return NULL, status and message stay the
 * first); and failed evaluations that must leave every output buffer
 * untouched (a bad second output, a failed graph, injected allocation
 * failures at every allocation of an eval).
 *
 * Each check asserts the status and the stable part of the message: the
 * calling function's name ("reshape", without the lf_ prefix) and the key
 * facts (shapes, dtypes, byte counts) where the error has them.
 */
#include "testutil.h"

#include "graph/graph.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif
#endif

TU_GRAPH_SUITE(errors);

#define SH(...) (int64_t[]){__VA_ARGS__}
#define V(...) (double[]){__VA_ARGS__}

/* A fresh graph of ctx (freed with ctx), for one sticky error each. */
static lf_graph *fresh(void) {
    lf_graph *gg = lf_graph_new(ctx);
    cr_assert(gg != NULL, "%s", lf_errmsg(ctx));
    return gg;
}

static lf_node *fill(lf_graph *gg, lf_dtype t, int ndim, const int64_t *shape) {
    lf_node *x = lf_fill(gg, t, 1, ndim, shape);
    cr_assert(x != NULL, "lf_fill: %s", lf_errmsg(ctx));
    return x;
}

/* true when msg contains one of the '|'-separated alternatives of alts. */
static bool has_any(const char *msg, const char *alts) {
    char buf[256];
    const char *p = alts;
    while (*p) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len >= sizeof buf) len = sizeof buf - 1;
        memcpy(buf, p, len);
        buf[len] = 0;
        if (strstr(msg, buf)) return true;
        if (!bar) break;
        p = bar + 1;
    }
    return false;
}

/* Asserts msg holds every needle (each a '|'-list of alternatives). */
static void vexpect_msg(const char *where, const char *msg, va_list ap) {
    cr_assert(msg != NULL, "%s: message is NULL", where);
    cr_expect(msg[0] != 0, "%s: message is empty", where);
    for (const char *n = va_arg(ap, const char *); n; n = va_arg(ap, const char *))
        cr_expect(has_any(msg, n), "%s: message \"%s\" lacks \"%s\"", where, msg, n);
}

static void expect_msg(const char *where, const char *msg, ...) {
    va_list ap;
    va_start(ap, msg);
    vexpect_msg(where, msg, ap);
    va_end(ap);
}

/* Asserts gg failed with status st (st2 also accepted when it is not LF_OK)
 * and that both the graph's and the context's messages hold the needles. */
static void expect_graph_err2(const char *where, lf_graph *gg, lf_status st, int st2, ...) {
    lf_status got = lf_graph_status(gg);
    cr_expect(got == st || (st2 != LF_OK && (int)got == st2), "%s: status %s, want %s%s%s", where,
              lf_status_name(got), lf_status_name(st), st2 != LF_OK ? " or " : "",
              st2 != LF_OK ? lf_status_name((lf_status)st2) : "");
    va_list ap;
    va_start(ap, st2);
    va_list ap2;
    va_copy(ap2, ap);
    vexpect_msg(where, lf_graph_errmsg(gg), ap);
    vexpect_msg(where, lf_errmsg(ctx), ap2);
    va_end(ap2);
    va_end(ap);
}

#define EXPECT_ERR(where, gg, st, ...) expect_graph_err2(where, gg, st, LF_OK, __VA_ARGS__, (char *)NULL)
#define EXPECT_MSG(where, msg, ...) expect_msg(where, msg, __VA_ARGS__, (char *)NULL)

/* ---- NULL handles ------------------------------------------------------------------ */

Test(errors, null_context_and_buffer_calls) {
    /* NULL options mean the defaults (AUTO: CUDA where a GPU is usable, else
       the CPU); the only context of the suite made without naming a backend */
    lf_ctx *dflt = lf_ctx_new(NULL);
    cr_assert(dflt != NULL, "lf_ctx_new(NULL): %s", lf_errmsg(NULL));
    cr_expect_neq(lf_ctx_backend(dflt), LF_BACKEND_AUTO);
    lf_ctx_destroy(dflt);
    lf_ctx_destroy(NULL);
    lf_ctx_options_init(NULL);
    (void)lf_ctx_backend(NULL);
    (void)lf_ctx_get_options(NULL);
    cr_expect(lf_errmsg(NULL) != NULL);

    cr_expect_null(lf_buffer_new(NULL, LF_F32, 1, SH(3)));
    EXPECT_MSG("buffer_new(NULL ctx)", lf_errmsg(NULL), "buffer_new");
    cr_expect_null(lf_buffer_new(ctx, LF_F32, 1, NULL));
    EXPECT_MSG("buffer_new(NULL shape)", lf_errmsg(ctx), "buffer_new");

    lf_buffer_free(NULL);
    float host[3] = {1, 2, 3};
    cr_expect_eq(lf_buffer_write(NULL, host, sizeof host), LF_ERR_NULL);
    EXPECT_MSG("buffer_write(NULL)", lf_errmsg(NULL), "buffer_write");
    cr_expect_eq(lf_buffer_read(NULL, host, sizeof host), LF_ERR_NULL);
    EXPECT_MSG("buffer_read(NULL)", lf_errmsg(NULL), "buffer_read");

    lf_buffer *b = tu_buf(ctx, LF_F32, 1, SH(3), V(4, 5, 6));
    cr_expect_eq(lf_buffer_write(b, NULL, sizeof host), LF_ERR_NULL);
    EXPECT_MSG("buffer_write(b, NULL)", lf_errmsg(ctx), "buffer_write");
    cr_expect_eq(lf_buffer_read(b, NULL, sizeof host), LF_ERR_NULL);
    EXPECT_MSG("buffer_read(b, NULL)", lf_errmsg(ctx), "buffer_read");
    tu_expect("untouched by failed writes", b, V(4, 5, 6), 3, 0, 0);

    (void)lf_buffer_dtype(NULL);
    cr_expect_eq(lf_buffer_ndim(NULL) <= 0, true);
    cr_expect_eq(lf_buffer_dim(NULL, 0), -1);
    cr_expect_eq(lf_buffer_numel(NULL) <= 0, true);
    cr_expect_eq(lf_buffer_bytes(NULL), 0);

    cr_expect_null(lf_buffer_new_like(NULL, NULL));
    lf_node *x = lf_iota(g, LF_F32, 3);
    cr_expect_null(lf_buffer_new_like(NULL, x));
    EXPECT_MSG("buffer_new_like(NULL ctx)", lf_errmsg(NULL), "buffer_new_like");
    cr_expect_null(lf_buffer_new_like(ctx, NULL));
    EXPECT_MSG("buffer_new_like(ctx, NULL)", lf_errmsg(ctx), "buffer_new_like");
}

Test(errors, null_graph_calls) {
    cr_expect_null(lf_graph_new(NULL));
    EXPECT_MSG("graph_new(NULL)", lf_errmsg(NULL), "graph_new");
    lf_graph_free(NULL);
    cr_expect_neq(lf_graph_status(NULL), LF_OK);
    cr_expect(lf_graph_errmsg(NULL) != NULL);
    (void)lf_node_dtype(NULL);
    cr_expect_eq(lf_node_ndim(NULL) <= 0, true);
    cr_expect_eq(lf_node_dim(NULL, 0), -1);
    cr_expect_eq(lf_node_numel(NULL) <= 0, true);
}

/* Every builder given a NULL graph returns NULL with a message naming it. */
Test(errors, null_graph_to_builders) {
    lf_buffer *b = tu_buf(ctx, LF_F32, 1, SH(3), NULL);
    lf_node *x = lf_iota(g, LF_F32, 3);
    lf_fn *f = lf_fn_parse(g, "(a) -> a");
    cr_assert(x && f);
#define NULLG(call, name)                                                 \
    do {                                                                  \
        cr_expect_null(call, #call " should fail");                       \
        EXPECT_MSG(#call, lf_errmsg(NULL), name, "NULL");                 \
    } while (0)
    NULLG(lf_input(NULL, b), "input");
    NULLG(lf_const(NULL, LF_F32, 1), "const");
    NULLG(lf_fill(NULL, LF_F32, 1, 1, SH(2)), "fill");
    NULLG(lf_iota(NULL, LF_F32, 2), "iota");
    NULLG(lf_arange(NULL, LF_F32, 0, 2, 1), "arange");
    NULLG(lf_reshape(NULL, x, 1, SH(3)), "reshape");
    NULLG(lf_permute(NULL, x, (int[]){0}), "permute");
    NULLG(lf_transpose(NULL, x), "transpose");
    NULLG(lf_broadcast_to(NULL, x, 2, SH(2, 3)), "broadcast_to");
    NULLG(lf_expand_dims(NULL, x, 0), "expand_dims");
    NULLG(lf_slice(NULL, x, 0, 0, 1, 1), "slice");
    NULLG(lf_fn_parse(NULL, "(a) -> a"), "fn_parse:");
    NULLG(lf_fn_new(NULL, 1), "fn_new");
    NULLG(lf_map(NULL, f, x), "map");
    NULLG(lf_zipwith(NULL, f, 1, &x), "zipwith");
    NULLG(lf_select(NULL, x, x, x), "select:");
    NULLG(lf_cast(NULL, x, LF_I32), "cast");
    NULLG(lf_add(NULL, x, x), "add:");
    NULLG(lf_apply(NULL, LF_OP_SQRT, x, NULL, NULL), "sqrt:|apply:");
    NULLG(lf_reduce(NULL, LF_RED_SUM, x, 0, NULL, false), "reduce:");
#undef NULLG
    lf_buffer *o = lf_buffer_new_like(ctx, x);
    cr_expect_eq(lf_eval(NULL, 1, &x, &o), LF_ERR_NULL);
    EXPECT_MSG("eval(NULL)", lf_errmsg(NULL), "eval");
    /* none of this touched the graph that was passed nowhere */
    cr_expect_eq(lf_graph_status(g), LF_OK);
}

/* NULL nodes, shapes and fns inside a valid graph: LF_ERR_NULL, sticky. */
Test(errors, null_arguments_in_a_graph) {
    lf_graph *gg;
#define NULLARG(call, name)                                          \
    do {                                                             \
        gg = fresh();                                                \
        lf_node *x = fill(gg, LF_F32, 1, SH(3));                     \
        lf_fn *f1 = lf_fn_parse(gg, "(a) -> a");                     \
        cr_assert(f1 != NULL);                                       \
        (void)x;                                                     \
        (void)f1;                                                    \
        cr_expect_null(call, #call " should fail");                  \
        EXPECT_ERR(#call, gg, LF_ERR_NULL, name, "NULL");            \
    } while (0)
    NULLARG(lf_input(gg, NULL), "input");
    NULLARG(lf_fill(gg, LF_F32, 1, 2, NULL), "fill");
    NULLARG(lf_reshape(gg, NULL, 1, SH(3)), "reshape");
    NULLARG(lf_reshape(gg, x, 1, NULL), "reshape");
    NULLARG(lf_permute(gg, NULL, (int[]){0}), "permute");
    NULLARG(lf_permute(gg, x, NULL), "permute");
    NULLARG(lf_transpose(gg, NULL), "transpose");
    NULLARG(lf_broadcast_to(gg, NULL, 1, SH(3)), "broadcast_to");
    NULLARG(lf_broadcast_to(gg, x, 2, NULL), "broadcast_to");
    NULLARG(lf_expand_dims(gg, NULL, 0), "expand_dims");
    NULLARG(lf_slice(gg, NULL, 0, 0, 1, 1), "slice");
    NULLARG(lf_fn_parse(gg, NULL), "fn_parse:");
    NULLARG(lf_map(gg, NULL, x), "map");
    NULLARG(lf_map(gg, f1, NULL), "map");
    NULLARG(lf_zipwith(gg, f1, 1, NULL), "zipwith");
    NULLARG(lf_zipwith(gg, NULL, 1, &x), "zipwith");
    NULLARG(lf_zipwith(gg, lf_fn_parse(gg, "(a, b) -> a + b"), 2, ((lf_node *[]){x, NULL})),
            "zipwith");
    NULLARG(lf_select(gg, NULL, x, x), "select:");
    NULLARG(lf_select(gg, x, x, NULL), "select:");
    NULLARG(lf_cast(gg, NULL, LF_F64), "cast");
    NULLARG(lf_add(gg, x, NULL), "add");
    NULLARG(lf_neg(gg, NULL), "neg");
    NULLARG(lf_fma(gg, x, NULL, x), "fma");
    NULLARG(lf_reduce(gg, LF_RED_SUM, NULL, 0, NULL, false), "reduce:");
#undef NULLARG
}

Test(errors, null_fn_builder_calls) {
    cr_expect_eq(lf_fn_param(NULL, 0), -1);
    cr_expect_eq(lf_fn_const(NULL, 1), -1);
    cr_expect_eq(lf_fn_const_int(NULL, 1), -1);
    cr_expect_eq(lf_fn_op(NULL, LF_OP_ADD, 0, 0, -1), -1);
    cr_expect_eq(lf_fn_cast(NULL, LF_F32, 0), -1);
    cr_expect_eq(lf_fn_set_result(NULL, 0), LF_ERR_NULL);
    EXPECT_MSG("fn_set_result(NULL)", lf_errmsg(NULL), "fn_set_result");
    cr_expect(lf_fn_arity(NULL) <= 0);
    char buf[16] = "untouched";
    cr_expect_eq(lf_fn_print(NULL, buf, sizeof buf), -1);
    lf_fn *f = lf_fn_parse(g, "(a) -> a + 1");
    cr_assert(f != NULL);
    cr_expect_not(lf_fn_equal(f, NULL));
    cr_expect_not(lf_fn_equal(NULL, f));
    (void)lf_fn_equal(NULL, NULL);
    cr_expect_eq(lf_graph_status(g), LF_OK, "NULL fns do not touch other graphs");
}

Test(errors, null_eval_arguments) {
    lf_graph *gg;
    lf_buffer *o = tu_buf(ctx, LF_F64, 1, SH(2), V(7, 7));
    lf_node *y;
#define NULLEVAL(call)                                                                \
    do {                                                                              \
        gg = fresh();                                                                 \
        y = fill(gg, LF_F64, 1, SH(2));                                               \
        cr_expect_eq(call, LF_ERR_NULL, #call);                                       \
        EXPECT_MSG(#call, lf_errmsg(ctx), "eval");                                    \
        tu_expect(#call " leaves the output", o, V(7, 7), 2, 0, 0);                   \
    } while (0)
    NULLEVAL(lf_eval(gg, 1, NULL, &o));
    NULLEVAL(lf_eval(gg, 1, &y, NULL));
    NULLEVAL(lf_eval(gg, 1, (lf_node *[]){NULL}, &o));
    NULLEVAL(lf_eval(gg, 1, &y, (lf_buffer *[]){NULL}));
    NULLEVAL(lf_eval(gg, 2, ((lf_node *[]){y, NULL}), ((lf_buffer *[]){o, o})));
#undef NULLEVAL
    gg = fresh();
    y = fill(gg, LF_F64, 1, SH(2));
    cr_expect_eq(lf_eval(gg, -1, &y, &o), LF_ERR_INVALID);
    EXPECT_MSG("eval(n = -1)", lf_errmsg(ctx), "eval:", "-1");
    tu_expect("eval(n = -1) leaves the output", o, V(7, 7), 2, 0, 0);
    cr_expect_eq(lf_eval(gg, 0, &y, &o), LF_ERR_INVALID);
    EXPECT_MSG("eval(n = 0)", lf_errmsg(ctx), "eval:", "0");
    tu_expect("eval(n = 0) leaves the output", o, V(7, 7), 2, 0, 0);
}

Test(errors, status_and_enum_names) {
    static const char *const names[] = {
        "LF_OK", "LF_ERR_NULL", "LF_ERR_INVALID", "LF_ERR_SHAPE", "LF_ERR_AXIS",
        "LF_ERR_RANGE", "LF_ERR_DTYPE", "LF_ERR_OVERFLOW", "LF_ERR_ARITY", "LF_ERR_PARSE",
        "LF_ERR_NOMEM", "LF_ERR_BACKEND", "LF_ERR_STATE", "LF_ERR_INDEX", "LF_ERR_COMPILE", "LF_ERR_EXTERN"};
    for (int s = 0; s <= LF_ERR_EXTERN; s++) cr_expect_str_eq(lf_status_name((lf_status)s), names[s]);
    cr_expect(lf_status_name((lf_status)99) != NULL);
    cr_expect(lf_status_name((lf_status)-1) != NULL);
    cr_expect_str_eq(lf_dtype_name((lf_dtype)99), "?");
    cr_expect_eq(lf_dtype_size((lf_dtype)99), 0);
    cr_expect(lf_backend_name((lf_backend)99) != NULL);
    cr_expect(lf_op_name((lf_op)999) != NULL);
    cr_expect(lf_reduce_op_name((lf_reduce_op)99) != NULL);
    (void)lf_dtype_promote((lf_dtype)99, LF_F32);
}

/* ---- shapes ----------------------------------------------------------------------- */

Test(errors, shapes_do_not_broadcast) {
    lf_node *a = fill(g, LF_F32, 2, SH(3, 4)), *b = fill(g, LF_F32, 1, SH(5));
    lf_fn *f = lf_fn_parse(g, "(x, y) -> x + y");
    cr_assert(f != NULL);
    cr_expect_null(lf_zipwith(g, f, 2, (lf_node *[]){a, b}));
    cr_expect_eq(lf_graph_status(g), LF_ERR_SHAPE);
    cr_expect_str_eq(lf_errmsg(ctx), "zipwith: shapes [3,4] and [5] do not broadcast");
    cr_expect_str_eq(lf_graph_errmsg(g), "zipwith: shapes [3,4] and [5] do not broadcast");

    lf_graph *g2 = fresh();
    lf_node *a2 = fill(g2, LF_F32, 2, SH(3, 4)), *b2 = fill(g2, LF_F32, 1, SH(5));
    cr_expect_null(lf_add(g2, a2, b2));
    EXPECT_ERR("add", g2, LF_ERR_SHAPE, "shapes [3,4] and [5] do not broadcast");
    cr_expect(strncmp(lf_errmsg(ctx), "add:", 4) == 0, "message \"%s\" should start with \"add:\"",
              lf_errmsg(ctx));

    lf_graph *g3 = fresh();
    cr_expect_null(lf_mul(g3, fill(g3, LF_I32, 1, SH(2)), fill(g3, LF_I32, 2, SH(3, 3))));
    EXPECT_ERR("mul", g3, LF_ERR_SHAPE, "mul", "[2]", "[3,3]");

    lf_graph *g4 = fresh();
    cr_expect_null(lf_select(g4, fill(g4, LF_BOOL, 1, SH(2)), fill(g4, LF_F32, 1, SH(3)),
                             lf_const(g4, LF_F32, 0)));
    EXPECT_ERR("select", g4, LF_ERR_SHAPE, "select|where", "[2]", "[3]");

    /* the third input does not fit the broadcast of the first two */
    lf_graph *g5 = fresh();
    lf_fn *f3 = lf_fn_parse(g5, "(x, y, z) -> x + y + z");
    cr_expect_null(lf_zipwith(g5, f3, 3,
                              (lf_node *[]){fill(g5, LF_F64, 2, SH(3, 1)), fill(g5, LF_F64, 2, SH(1, 4)),
                                            fill(g5, LF_F64, 1, SH(5))}));
    EXPECT_ERR("zipwith 3", g5, LF_ERR_SHAPE, "zipwith", "[5]", "do not broadcast");

    /* [0] does not broadcast with [2] */
    lf_graph *g6 = fresh();
    cr_expect_null(lf_sub(g6, fill(g6, LF_F64, 1, SH(0)), fill(g6, LF_F64, 1, SH(2))));
    EXPECT_ERR("sub [0] [2]", g6, LF_ERR_SHAPE, "sub", "[0]", "[2]");
}

Test(errors, broadcast_to_bad_shapes) {
    lf_graph *gg = fresh();
    cr_expect_null(lf_broadcast_to(gg, fill(gg, LF_F32, 1, SH(3)), 1, SH(4)));
    EXPECT_ERR("[3] -> [4]", gg, LF_ERR_SHAPE, "broadcast_to", "[3]", "[4]");
    gg = fresh();
    cr_expect_null(lf_broadcast_to(gg, fill(gg, LF_F32, 2, SH(2, 3)), 1, SH(3)));
    EXPECT_ERR("[2,3] -> [3]", gg, LF_ERR_SHAPE, "broadcast_to", "[2,3]", "[3]");
    gg = fresh();
    cr_expect_null(lf_broadcast_to(gg, fill(gg, LF_F32, 1, SH(3)), 2, SH(3, 0)));
    EXPECT_ERR("[3] -> [3,0]", gg, LF_ERR_SHAPE, "broadcast_to", "[3]", "[3,0]");
    gg = fresh();
    cr_expect_null(lf_broadcast_to(gg, fill(gg, LF_F32, 1, SH(1)), 1, SH(-2)));
    EXPECT_ERR("[1] -> [-2]", gg, LF_ERR_SHAPE, "broadcast_to:", "-2");
}

Test(errors, reshape_errors) {
    lf_graph *gg = fresh();
    cr_expect_null(lf_reshape(gg, fill(gg, LF_F32, 2, SH(2, 3)), 2, SH(4, 2)));
    EXPECT_ERR("reshape [2,3] -> [4,2]", gg, LF_ERR_SHAPE, "reshape", "[2,3]", "[4,2]");
    gg = fresh();
    cr_expect_null(lf_reshape(gg, fill(gg, LF_F32, 2, SH(2, 3)), 2, SH(4, -1)));
    EXPECT_ERR("reshape [2,3] -> [4,-1]", gg, LF_ERR_SHAPE, "reshape", "[2,3]");
    gg = fresh();
    cr_expect_null(lf_reshape(gg, fill(gg, LF_F32, 2, SH(2, 3)), 3, SH(-1, -1, 3)));
    EXPECT_ERR("reshape two -1", gg, LF_ERR_SHAPE, "reshape:", "-1");
    gg = fresh();
    cr_expect_null(lf_reshape(gg, fill(gg, LF_F32, 2, SH(2, 3)), 2, SH(-2, -3)));
    EXPECT_ERR("reshape negative extents", gg, LF_ERR_SHAPE, "reshape:", "-2");
    gg = fresh();
    cr_expect_null(lf_reshape(gg, fill(gg, LF_F32, 1, SH(6)), 9, SH(1, 1, 1, 1, 1, 1, 1, 2, 3)));
    EXPECT_ERR("reshape 9 dims", gg, LF_ERR_SHAPE, "reshape", "9 dimensions");
    gg = fresh();
    cr_expect_null(lf_reshape(gg, fill(gg, LF_F32, 1, SH(6)), -1, SH(6)));
    EXPECT_ERR("reshape ndim -1", gg, LF_ERR_SHAPE, "reshape:", "-1");
    gg = fresh();
    cr_expect_null(lf_reshape(gg, fill(gg, LF_F32, 0, NULL), 1, SH(2)));
    EXPECT_ERR("reshape 0-d -> [2]", gg, LF_ERR_SHAPE, "reshape", "[2]");
}

Test(errors, too_many_dims) {
    int64_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 2};
    cr_expect_null(lf_buffer_new(ctx, LF_F32, 9, nine));
    EXPECT_MSG("buffer_new 9 dims", lf_errmsg(ctx), "buffer_new", "9 dimensions");
    cr_expect_null(lf_buffer_new(ctx, LF_F32, -1, nine));
    EXPECT_MSG("buffer_new ndim -1", lf_errmsg(ctx), "buffer_new");
    lf_graph *gg = fresh();
    cr_expect_null(lf_fill(gg, LF_F32, 0, 9, nine));
    EXPECT_ERR("fill 9 dims", gg, LF_ERR_SHAPE, "fill", "9 dimensions");
    gg = fresh();
    cr_expect_null(lf_broadcast_to(gg, lf_const(gg, LF_F32, 0), 9, nine));
    EXPECT_ERR("broadcast_to 9 dims", gg, LF_ERR_SHAPE, "broadcast_to", "9 dimensions");
    gg = fresh();
    lf_node *e = fill(gg, LF_F32, 8, SH(1, 1, 1, 1, 1, 1, 1, 2));
    cr_expect_null(lf_expand_dims(gg, e, 0));
    EXPECT_ERR("expand_dims of 8 dims", gg, LF_ERR_SHAPE, "expand_dims", "9 dimensions");
}

Test(errors, shape_overflow) {
    int64_t big[2] = {INT64_MAX / 2, 3};
    cr_expect_null(lf_buffer_new(ctx, LF_F32, 2, big));
    EXPECT_MSG("buffer_new overflow", lf_errmsg(ctx), "buffer_new", "overflow");
    lf_graph *gg = fresh();
    cr_expect_null(lf_fill(gg, LF_F32, 0, 2, big));
    EXPECT_ERR("fill overflow", gg, LF_ERR_OVERFLOW, "fill:", "[4611686018427387903,3]", "overflow");
    /* the element count fits, the byte count does not */
    gg = fresh();
    cr_expect_null(lf_fill(gg, LF_F64, 0, 1, SH(INT64_MAX / 2)));
    EXPECT_ERR("fill byte overflow", gg, LF_ERR_OVERFLOW, "fill", "overflow");
    cr_expect_null(lf_buffer_new(ctx, LF_F64, 1, SH(INT64_MAX / 2)));
    EXPECT_MSG("buffer_new byte overflow", lf_errmsg(ctx), "buffer_new", "overflow");
    gg = fresh();
    cr_expect_null(lf_iota(gg, LF_F64, INT64_MAX));
    EXPECT_ERR("iota overflow", gg, LF_ERR_OVERFLOW, "iota", "overflow");
    /* a broadcast of two valid (lazy, never evaluated) nodes overflows */
    gg = fresh();
    lf_node *tall = lf_fill(gg, LF_BOOL, 0, 2, SH(INT64_MAX / 2, 1));
    cr_assert(tall != NULL, "a bool [INT64_MAX/2, 1] node is valid: %s", lf_errmsg(ctx));
    cr_expect_null(lf_logical_or(gg, tall, fill(gg, LF_BOOL, 2, SH(1, 3))));
    EXPECT_ERR("broadcast overflow", gg, LF_ERR_OVERFLOW, "or:", "[4611686018427387903,3]", "overflow");
    gg = fresh();
    cr_expect_null(lf_broadcast_to(gg, lf_const(gg, LF_BOOL, 1), 2, big));
    EXPECT_ERR("broadcast_to overflow", gg, LF_ERR_OVERFLOW, "broadcast_to", "overflow");
    gg = fresh();
    cr_expect_null(lf_arange(gg, LF_F64, 0, 1e300, 1));
    EXPECT_ERR("arange count overflow", gg, LF_ERR_OVERFLOW, "arange:", "overflow");
}

Test(errors, negative_extents) {
    cr_expect_null(lf_buffer_new(ctx, LF_F32, 2, SH(-1, 3)));
    EXPECT_MSG("buffer_new [-1,3]", lf_errmsg(ctx), "buffer_new", "-1");
    lf_graph *gg = fresh();
    cr_expect_null(lf_fill(gg, LF_F32, 0, 1, SH(-5)));
    EXPECT_ERR("fill [-5]", gg, LF_ERR_SHAPE, "fill:", "-5");
    gg = fresh();
    cr_expect_null(lf_iota(gg, LF_F32, -1));
    EXPECT_ERR("iota -1", gg, LF_ERR_SHAPE, "iota:", "-1");
}

/* ---- axes ---------------------------------------------------------------------------- */

Test(errors, reduce_bad_axes) {
    lf_graph *gg;
#define BADRED(naxes, axes, what, ...)                                                   \
    do {                                                                                 \
        gg = fresh();                                                                    \
        cr_expect_null(lf_reduce(gg, LF_RED_SUM, fill(gg, LF_F32, 3, SH(2, 3, 4)), naxes, \
                                 axes, false), what);                                    \
        EXPECT_ERR(what, gg, LF_ERR_AXIS, "reduce|sum", __VA_ARGS__);                    \
    } while (0)
    BADRED(1, ((int[]){3}), "axis 3 of 3-d", "axis 3");
    BADRED(1, ((int[]){-4}), "axis -4 of 3-d", "axis -4");
    BADRED(2, ((int[]){0, 0}), "repeated 0", "repeated");
    BADRED(2, ((int[]){1, -2}), "1 and -2", "repeated");
    BADRED(4, ((int[]){0, 1, 2, 0}), "4 axes of 3-d", "axis|axes");
    BADRED(1, ((int[]){100}), "axis 100", "axis 100");
#undef BADRED
    gg = fresh();
    cr_expect_null(lf_reduce(gg, LF_RED_SUM, fill(gg, LF_F32, 1, SH(3)), -1, (int[]){0}, false));
    EXPECT_ERR("naxes -1", gg, LF_ERR_AXIS, "reduce", "-1");
    /* naxes > 0 with no array is an error, not a reduction over every axis */
    gg = fresh();
    cr_expect_null(lf_reduce(gg, LF_RED_SUM, fill(gg, LF_F32, 2, SH(2, 3)), 1, NULL, false));
    cr_expect_eq(lf_graph_status(gg), LF_ERR_NULL);
    cr_expect_str_eq(lf_graph_errmsg(gg),
                     "reduce sum: 1 axes but the axes array is NULL (0 and NULL reduce all axes)");
    gg = fresh();
    cr_expect_null(lf_reduce(gg, LF_RED_ARGMAX, fill(gg, LF_F32, 2, SH(2, 3)), 2, NULL, true));
    EXPECT_ERR("naxes 2, axes NULL", gg, LF_ERR_NULL, "reduce argmax:", "2 axes", "NULL");
    gg = fresh();
    cr_expect_null(lf_reduce(gg, LF_RED_SUM, fill(gg, LF_F32, 1, SH(3)), -1, NULL, false));
    EXPECT_ERR("naxes -1, axes NULL", gg, LF_ERR_AXIS, "reduce", "-1");
    /* 0 and NULL: every axis */
    gg = fresh();
    lf_node *all = lf_reduce(gg, LF_RED_SUM, fill(gg, LF_F32, 2, SH(2, 3)), 0, NULL, false);
    cr_expect(all != NULL && lf_node_ndim(all) == 0, "%s", lf_graph_errmsg(gg));
    gg = fresh();
    cr_expect_null(lf_reduce(gg, LF_RED_MAX, lf_const(gg, LF_F32, 1), 1, (int[]){0}, false));
    EXPECT_ERR("axis 0 of 0-d", gg, LF_ERR_AXIS, "reduce|max", "0");
    /* the other reductions check too */
    for (int op = 0; op < LF_NREDS; op++) {
        gg = fresh();
        cr_expect_null(lf_reduce(gg, (lf_reduce_op)op, fill(gg, LF_I32, 2, SH(2, 2)), 1, (int[]){2},
                                 true));
        char what[32];
        snprintf(what, sizeof what, "%s axis 2 of 2-d", lf_reduce_op_name((lf_reduce_op)op));
        EXPECT_ERR(what, gg, LF_ERR_AXIS, lf_reduce_op_name((lf_reduce_op)op), "axis 2");
    }
}

Test(errors, permute_bad_axes) {
    lf_graph *gg;
#define BADPERM(perm, what, fact)                                                       \
    do {                                                                                \
        gg = fresh();                                                                   \
        cr_expect_null(lf_permute(gg, fill(gg, LF_F32, 3, SH(2, 3, 4)), perm), what);   \
        EXPECT_ERR(what, gg, LF_ERR_AXIS, "permute:", fact);                            \
    } while (0)
    BADPERM(((int[]){0, 0, 1}), "repeated 0", "axis 0 repeated");
    BADPERM(((int[]){0, 1, 3}), "axis 3", "axis 3");
    BADPERM(((int[]){2, 2, 2}), "all 2", "repeated");
    BADPERM(((int[]){-1, 0, 1}), "axis -1", "axis -1");
#undef BADPERM
}

Test(errors, expand_dims_bad_axes) {
    lf_graph *gg = fresh();
    cr_expect_null(lf_expand_dims(gg, fill(gg, LF_F32, 2, SH(2, 3)), 3));
    EXPECT_ERR("axis 3 of 2-d", gg, LF_ERR_AXIS, "expand_dims:", "axis 3");
    gg = fresh();
    cr_expect_null(lf_expand_dims(gg, fill(gg, LF_F32, 2, SH(2, 3)), -4));
    EXPECT_ERR("axis -4 of 2-d", gg, LF_ERR_AXIS, "expand_dims:", "axis -4");
    gg = fresh();
    cr_expect_null(lf_expand_dims(gg, lf_const(gg, LF_F32, 0), 1));
    EXPECT_ERR("axis 1 of 0-d", gg, LF_ERR_AXIS, "expand_dims:", "axis 1");
}

Test(errors, slice_bad_axis_and_range) {
    lf_graph *gg;
#define BADSLICE(st, axis, start, stop, step, what, ...)                                  \
    do {                                                                                  \
        gg = fresh();                                                                     \
        cr_expect_null(lf_slice(gg, fill(gg, LF_F32, 2, SH(10, 4)), axis, start, stop, step), \
                       what);                                                             \
        EXPECT_ERR(what, gg, st, "slice", __VA_ARGS__);                                   \
    } while (0)
    BADSLICE(LF_ERR_AXIS, 2, 0, 1, 1, "axis 2 of 2-d", "axis 2");
    BADSLICE(LF_ERR_AXIS, -3, 0, 1, 1, "axis -3 of 2-d", "axis -3");
    BADSLICE(LF_ERR_AXIS, 100, 0, 1, 1, "axis 100", "axis 100");
    BADSLICE(LF_ERR_RANGE, 0, 11, LF_NONE, 1, "start 11 of 10", "start 11");
    BADSLICE(LF_ERR_RANGE, 0, -11, LF_NONE, 1, "start -11 of 10", "start -11");
    BADSLICE(LF_ERR_RANGE, 0, 0, 11, 1, "stop 11 of 10", "stop 11");
    BADSLICE(LF_ERR_RANGE, 0, LF_NONE, -11, -1, "stop -11 of 10", "stop -11");
    BADSLICE(LF_ERR_RANGE, 1, 0, 5, 1, "stop 5 of 4", "stop 5");
    BADSLICE(LF_ERR_RANGE, 0, 0, 10, 0, "step 0", "step");
    BADSLICE(LF_ERR_RANGE, 0, LF_NONE, LF_NONE, 0, "step 0 with LF_NONE", "step");
    BADSLICE(LF_ERR_RANGE, 0, INT64_MAX, LF_NONE, 1, "start INT64_MAX", "start");
    BADSLICE(LF_ERR_RANGE, 0, LF_NONE, INT64_MIN + 1, 1, "stop INT64_MIN+1", "stop");
    BADSLICE(LF_ERR_RANGE, 0, INT64_MIN + 1, LF_NONE, INT64_MAX, "start INT64_MIN+1", "start");
    BADSLICE(LF_ERR_RANGE, 0, 0, INT64_MAX, INT64_MAX, "stop INT64_MAX", "stop");
    BADSLICE(LF_ERR_RANGE, 0, INT64_MAX, INT64_MIN + 1, -1, "start MAX stop MIN+1", "start");
    BADSLICE(LF_ERR_RANGE, 0, 0, 10, INT64_MIN, "step INT64_MIN", "step");
#undef BADSLICE
    gg = fresh();
    cr_expect_null(lf_slice(gg, lf_const(gg, LF_F32, 1), 0, 0, 1, 1));
    EXPECT_ERR("slice of 0-d", gg, LF_ERR_AXIS, "slice");
}

/* ---- dtypes -------------------------------------------------------------------------- */

Test(errors, eval_output_mismatch) {
    lf_buffer *f32b = tu_buf(ctx, LF_F32, 1, SH(3), V(9, 9, 9));
    lf_buffer *b4 = tu_buf(ctx, LF_F64, 1, SH(4), V(9, 9, 9, 9));
    lf_buffer *b31 = tu_buf(ctx, LF_F64, 2, SH(3, 1), V(9, 9, 9));
    lf_buffer *b0 = tu_buf(ctx, LF_F64, 0, NULL, V(9));
    lf_node *y = lf_add(g, lf_iota(g, LF_F64, 3), lf_const(g, LF_F64, 1));
    cr_assert(y != NULL);
    cr_expect_eq(lf_eval(g, 1, &y, &f32b), LF_ERR_DTYPE);
    EXPECT_MSG("eval f64 into f32", lf_errmsg(ctx), "eval", "f64", "f32");
    cr_expect_eq(lf_eval(g, 1, &y, &b4), LF_ERR_SHAPE);
    EXPECT_MSG("eval [3] into [4]", lf_errmsg(ctx), "eval", "[3]", "[4]");
    cr_expect_eq(lf_eval(g, 1, &y, &b31), LF_ERR_SHAPE);
    EXPECT_MSG("eval [3] into [3,1]", lf_errmsg(ctx), "eval", "[3]", "[3,1]");
    lf_node *s = lf_reduce(g, LF_RED_SUM, y, 0, NULL, true); /* [1] */
    cr_expect_eq(lf_eval(g, 1, &s, &b0), LF_ERR_SHAPE);
    EXPECT_MSG("eval [1] into []", lf_errmsg(ctx), "eval", "[1]");
    /* an i32 sum is i64: an i32 buffer does not take it */
    lf_buffer *i32b = tu_buf(ctx, LF_I32, 0, NULL, V(9));
    lf_node *si = lf_reduce(g, LF_RED_SUM, lf_iota(g, LF_I32, 3), 0, NULL, false);
    cr_expect_eq(lf_eval(g, 1, &si, &i32b), LF_ERR_DTYPE);
    EXPECT_MSG("eval i64 into i32", lf_errmsg(ctx), "eval", "i64", "i32");
    tu_expect("f32b untouched", f32b, V(9, 9, 9), 3, 0, 0);
    tu_expect("b4 untouched", b4, V(9, 9, 9, 9), 4, 0, 0);
    tu_expect("b31 untouched", b31, V(9, 9, 9), 3, 0, 0);
    tu_expect("b0 untouched", b0, V(9), 1, 0, 0);
    tu_expect("i32b untouched", i32b, V(9), 1, 0, 0);
    /* eval errors are not builder errors: the graph still evaluates */
    lf_buffer *ok = lf_buffer_new_like(ctx, y);
    cr_expect_eq(lf_eval(g, 1, &y, &ok), LF_OK, "%s", lf_errmsg(ctx));
    tu_expect("good eval after bad ones", ok, V(1, 2, 3), 3, 0, 0);
}

Test(errors, random_bad_arguments) {
    lf_graph *gg = fresh();
    cr_expect_null(lf_random(gg, LF_I32, LF_RANDOM_NORMAL, 1, SH(4), 1));
    EXPECT_ERR("random normal i32", gg, LF_ERR_DTYPE, "random: dtype i32 makes no sense for the normal distribution");
    gg = fresh();
    cr_expect_null(lf_random(gg, LF_BOOL, LF_RANDOM_UNIFORM, 1, SH(4), 1));
    EXPECT_ERR("random uniform bool", gg, LF_ERR_DTYPE, "random:", "bool", "uniform", "f32 or f64");
    gg = fresh();
    cr_expect_null(lf_random(gg, LF_F32, LF_RANDOM_BITS, 1, SH(4), 1));
    EXPECT_ERR("random bits f32", gg, LF_ERR_DTYPE, "random:", "f32", "bits", "i32 or i64");
    gg = fresh();
    cr_expect_null(lf_random(gg, (lf_dtype)17, LF_RANDOM_BITS, 1, SH(4), 1));
    EXPECT_ERR("random dtype 17", gg, LF_ERR_DTYPE, "random:", "17");
    gg = fresh();
    cr_expect_null(lf_random(gg, LF_F32, (lf_random_dist)3, 1, SH(4), 1));
    EXPECT_ERR("random dist 3", gg, LF_ERR_INVALID, "random:", "distribution 3");
    gg = fresh();
    cr_expect_null(lf_random(gg, LF_F32, (lf_random_dist)-1, 1, SH(4), 1));
    EXPECT_ERR("random dist -1", gg, LF_ERR_INVALID, "random:", "distribution -1");
    gg = fresh();
    cr_expect_null(lf_random(gg, LF_F64, LF_RANDOM_NORMAL, 2, NULL, 1));
    EXPECT_ERR("random NULL shape", gg, LF_ERR_NULL, "random:", "NULL");
    gg = fresh();
    cr_expect_null(lf_random(gg, LF_F64, LF_RANDOM_NORMAL, LF_MAX_DIMS + 1, SH(1, 1, 1, 1, 1, 1, 1, 1, 1), 1));
    EXPECT_ERR("random too many dims", gg, LF_ERR_SHAPE, "random:", "dimensions");
    gg = fresh();
    cr_expect_null(lf_random(gg, LF_F64, LF_RANDOM_NORMAL, -1, SH(1), 1));
    EXPECT_ERR("random ndim -1", gg, LF_ERR_SHAPE, "random:", "-1");
    gg = fresh();
    cr_expect_null(lf_random(gg, LF_F32, LF_RANDOM_UNIFORM, 2, SH(3, -2), 1));
    EXPECT_ERR("random negative extent", gg, LF_ERR_SHAPE, "random:", "-2", "axis 1");
    gg = fresh();
    cr_expect_null(lf_random(gg, LF_F64, LF_RANDOM_UNIFORM, 2, SH(INT64_MAX / 4, 8), 1));
    EXPECT_ERR("random overflow", gg, LF_ERR_OVERFLOW, "random:", "overflow");
    /* sticky: a later good call still fails with the first error */
    cr_expect_null(lf_random(gg, LF_F64, LF_RANDOM_UNIFORM, 1, SH(2), 1));
    EXPECT_ERR("random sticky", gg, LF_ERR_OVERFLOW, "random:", "overflow");
    cr_expect_null(lf_random(NULL, LF_F32, LF_RANDOM_UNIFORM, 1, SH(2), 1));
    EXPECT_MSG("random NULL graph", lf_errmsg(NULL), "random", "NULL");
}

Test(errors, bad_dtypes_and_enums) {
    lf_graph *gg = fresh();
    cr_expect_null(lf_iota(gg, LF_BOOL, 3));
    EXPECT_ERR("iota bool", gg, LF_ERR_DTYPE, "iota", "bool");
    gg = fresh();
    cr_expect_null(lf_arange(gg, LF_BOOL, 0, 3, 1));
    EXPECT_ERR("arange bool", gg, LF_ERR_DTYPE, "arange", "bool");
    gg = fresh();
    cr_expect_null(lf_const(gg, (lf_dtype)99, 1));
    EXPECT_ERR("const dtype 99", gg, LF_ERR_DTYPE, "const:", "99");
    gg = fresh();
    cr_expect_null(lf_fill(gg, LF_NDTYPES, 1, 1, SH(2)));
    char ndt[16];
    snprintf(ndt, sizeof ndt, "%d", (int)LF_NDTYPES);
    EXPECT_ERR("fill dtype LF_NDTYPES", gg, LF_ERR_DTYPE, "fill:", ndt);
    gg = fresh();
    cr_expect_null(lf_cast(gg, fill(gg, LF_F32, 1, SH(2)), (lf_dtype)-1));
    EXPECT_ERR("cast to -1", gg, LF_ERR_DTYPE, "cast:", "-1");
    gg = fresh();
    cr_expect_null(lf_reduce(gg, (lf_reduce_op)99, fill(gg, LF_F32, 1, SH(2)), 0, NULL, false));
    EXPECT_ERR("reduce op 99", gg, LF_ERR_INVALID, "reduce:", "99");
    gg = fresh();
    lf_node *x = fill(gg, LF_F32, 1, SH(2));
    cr_expect_null(lf_apply(gg, (lf_op)999, x, NULL, NULL));
    EXPECT_ERR("apply op 999", gg, LF_ERR_INVALID, "apply:", "999");
    gg = fresh();
    x = fill(gg, LF_F32, 1, SH(2));
    cr_expect_null(lf_apply(gg, LF_NOPS, x, x, x));
    EXPECT_ERR("apply op LF_NOPS", gg, LF_ERR_INVALID, "apply:", "operator");
    cr_expect_null(lf_buffer_new(ctx, (lf_dtype)97, 1, SH(2)));
    EXPECT_MSG("buffer_new dtype 97", lf_errmsg(ctx), "buffer_new", "dtype");
    lf_ctx_options o;
    lf_ctx_options_init(&o);
    o.backend = (lf_backend)42;
    cr_expect_null(lf_ctx_new(&o));
    EXPECT_MSG("ctx_new backend 42", lf_errmsg(NULL), "ctx_new:", "42");
}

Test(errors, arange_bad_arguments) {
    lf_graph *gg = fresh();
    cr_expect_null(lf_arange(gg, LF_F64, 0, 10, 0));
    EXPECT_ERR("arange step 0", gg, LF_ERR_RANGE, "arange:", "step");
    gg = fresh();
    cr_expect_null(lf_arange(gg, LF_F64, 0, NAN, 1));
    EXPECT_ERR("arange stop nan", gg, LF_ERR_RANGE, "arange:", "finite");
    gg = fresh();
    cr_expect_null(lf_arange(gg, LF_F64, 0, 10, INFINITY / INFINITY));
    EXPECT_ERR("arange step nan", gg, LF_ERR_RANGE, "arange:", "finite");
    gg = fresh();
    cr_expect_null(lf_arange(gg, LF_F64, -INFINITY, 0, 1));
    cr_expect_neq(lf_graph_status(gg), LF_OK, "arange from -inf");
    EXPECT_MSG("arange from -inf", lf_errmsg(ctx), "arange");
}

/* Where no GPU, driver or NVRTC is usable, asking for CUDA is an error that
 * says why (tests/test_cuda.c covers each cause with a fake driver). */
Test(errors, cuda_backend_unavailable) {
    lf_ctx_options o;
    lf_ctx_options_init(&o);
    o.backend = LF_BACKEND_CUDA;
    lf_ctx *c = lf_ctx_new(&o);
    if (c) {
        cr_expect_eq(lf_ctx_backend(c), LF_BACKEND_CUDA);
        lf_ctx_destroy(c);
        cr_skip_test("a CUDA device is usable here");
    }
    EXPECT_MSG("ctx_new cuda", lf_errmsg(NULL), "CUDA|cuda");
}

/* ---- fns ------------------------------------------------------------------------------- */

Test(errors, fn_arity_mismatch) {
    lf_graph *gg = fresh();
    lf_fn *f2 = lf_fn_parse(gg, "(a, b) -> a + b");
    cr_assert(f2 != NULL);
    cr_expect_null(lf_map(gg, f2, fill(gg, LF_F32, 1, SH(3))));
    EXPECT_ERR("map of a 2-parameter fn", gg, LF_ERR_ARITY, "map", "2");
    gg = fresh();
    lf_fn *f1 = lf_fn_parse(gg, "(a) -> -a");
    lf_node *x = fill(gg, LF_F32, 1, SH(3));
    cr_expect_null(lf_zipwith(gg, f1, 2, (lf_node *[]){x, x}));
    EXPECT_ERR("zipwith 2 inputs, 1 parameter", gg, LF_ERR_ARITY, "zipwith", "1", "2");
    gg = fresh();
    lf_fn *f3 = lf_fn_parse(gg, "(a, b, c) -> a + b + c");
    x = fill(gg, LF_F32, 1, SH(3));
    cr_expect_null(lf_zipwith(gg, f3, 2, (lf_node *[]){x, x}));
    EXPECT_ERR("zipwith 2 inputs, 3 parameters", gg, LF_ERR_ARITY, "zipwith", "3", "2");
    gg = fresh();
    f1 = lf_fn_parse(gg, "(a) -> a");
    x = fill(gg, LF_F32, 1, SH(3));
    cr_expect_null(lf_zipwith(gg, f1, 0, (lf_node *[]){x}));
    EXPECT_ERR("zipwith 0 inputs", gg, LF_ERR_ARITY, "zipwith:", "0");
    gg = fresh();
    lf_node *nine[9];
    for (int k = 0; k < 9; k++) nine[k] = fill(gg, LF_F32, 1, SH(3));
    f1 = lf_fn_parse(gg, "(a) -> a");
    cr_expect_null(lf_zipwith(gg, f1, 9, nine));
    EXPECT_ERR("zipwith 9 inputs", gg, LF_ERR_ARITY, "zipwith:", "9");
    gg = fresh();
    cr_expect_null(lf_fn_new(gg, -1));
    EXPECT_ERR("fn_new -1", gg, LF_ERR_ARITY, "fn_new:", "-1", "0 to 8");
    gg = fresh();
    cr_expect_null(lf_zipwith(gg, lf_fn_parse(gg, "(a) -> a"), -1, NULL));
    EXPECT_ERR("zipwith -1 inputs", gg, LF_ERR_ARITY, "zipwith:", "-1");
    /* a fn of no parameters: zipwith of 0 inputs, not map */
    gg = fresh();
    lf_fn *f0 = lf_fn_parse(gg, "() -> 1 + 1");
    cr_assert(f0 != NULL, "%s", lf_graph_errmsg(gg));
    cr_expect_null(lf_map(gg, f0, fill(gg, LF_F32, 1, SH(3))));
    EXPECT_ERR("map of a 0-parameter fn", gg, LF_ERR_ARITY, "map: fn takes 0 parameters, got 1 input");
    gg = fresh();
    cr_expect_null(lf_fn_new(gg, 9));
    EXPECT_ERR("fn_new 9", gg, LF_ERR_ARITY, "fn_new:", "9");
    gg = fresh();
    cr_expect_null(lf_fn_parse(gg, "(a, b, c, d, f, g, h, i, j) -> a"));
    cr_expect_neq(lf_graph_status(gg), LF_OK);
    EXPECT_MSG("parse 9 parameters", lf_errmsg(ctx), "9|parameter");
}

Test(errors, apply_wrong_operands) {
    lf_graph *gg = fresh();
    lf_node *x = fill(gg, LF_F32, 1, SH(3));
    cr_expect_null(lf_apply(gg, LF_OP_ADD, x, NULL, NULL));
    EXPECT_ERR("add with one operand", gg, LF_ERR_NULL, "add:", "input 1");
    gg = fresh();
    x = fill(gg, LF_F32, 1, SH(3));
    cr_expect_null(lf_apply(gg, LF_OP_SQRT, x, x, NULL));
    EXPECT_ERR("sqrt with two operands", gg, LF_ERR_ARITY, "sqrt:");
    gg = fresh();
    x = fill(gg, LF_F32, 1, SH(3));
    cr_expect_null(lf_apply(gg, LF_OP_WHERE, x, x, NULL));
    EXPECT_ERR("where with two operands", gg, LF_ERR_NULL, "where:", "input 2");
}

Test(errors, fn_builder_misuse) {
    lf_graph *gg;
    lf_fn *f;
    int p;
#define BADFN(expr, what, ...)                                                  \
    do {                                                                        \
        gg = fresh();                                                           \
        f = lf_fn_new(gg, 2);                                                   \
        cr_assert(f != NULL);                                                   \
        p = lf_fn_param(f, 0);                                                  \
        cr_assert(p >= 0);                                                      \
        cr_expect_eq((expr), -1, what);                                         \
        cr_expect_neq(lf_graph_status(gg), LF_OK, what);                        \
        EXPECT_MSG(what, lf_graph_errmsg(gg), __VA_ARGS__);                     \
        EXPECT_MSG(what, lf_errmsg(ctx), __VA_ARGS__);                          \
    } while (0)
    BADFN(lf_fn_op(f, LF_OP_ADD, -5, p, -1), "negative operand id", "fn_op", "operand");
    BADFN(lf_fn_op(f, LF_OP_ADD, p, 1000, -1), "operand id out of range", "fn_op", "operand");
    BADFN(lf_fn_op(f, LF_OP_ADD, p, -1, -1), "missing operand", "fn_op");
    BADFN(lf_fn_op(f, (lf_op)999, p, p, -1), "unknown op", "fn_op");
    BADFN(lf_fn_cast(f, LF_F32, -1), "cast of -1", "fn_cast");
    BADFN(lf_fn_cast(f, (lf_dtype)99, p), "cast to dtype 99", "fn_cast");
    BADFN(lf_fn_param(f, 2), "parameter 2 of 2", "fn_param", "2");
    BADFN(lf_fn_param(f, -1), "parameter -1", "fn_param", "-1");
#undef BADFN
    /* the error is sticky on the graph; every builder call returns -1 after it */
    gg = fresh();
    f = lf_fn_new(gg, 1);
    p = lf_fn_param(f, 0);
    cr_expect_eq(lf_fn_op(f, LF_OP_NEG, -7, -1, -1), -1);
    lf_status first = lf_graph_status(gg);
    cr_expect_neq(first, LF_OK);
    cr_expect_eq(lf_fn_const(f, 1.0), -1);
    cr_expect_eq(lf_fn_param(f, 0), -1);
    cr_expect_eq(lf_graph_status(gg), first);

    gg = fresh();
    f = lf_fn_new(gg, 1);
    cr_expect_neq(lf_fn_set_result(f, -1), LF_OK);
    EXPECT_MSG("set_result -1", lf_errmsg(ctx), "fn_set_result");
    gg = fresh();
    f = lf_fn_new(gg, 1);
    cr_expect_neq(lf_fn_set_result(f, 42), LF_OK);
    EXPECT_MSG("set_result 42", lf_errmsg(ctx), "fn_set_result", "not an expression|42");

    /* an unfinished fn (no result) cannot be used or printed */
    gg = fresh();
    f = lf_fn_new(gg, 1);
    char buf[32];
    cr_expect_eq(lf_fn_print(f, buf, sizeof buf), -1);
    cr_expect_null(lf_map(gg, f, fill(gg, LF_F32, 1, SH(2))));
    EXPECT_ERR("map of an unfinished fn", gg, LF_ERR_STATE, "map:", "result");
}

/* "unused operands: -1": lf_apply rejects an extra input (LF_ERR_ARITY, see
 * apply_wrong_operands); lf_fn_op should not silently drop one either. */
Test(errors, fn_op_extra_operand) {
    lf_graph *gg = fresh();
    lf_fn *f = lf_fn_new(gg, 2);
    int p = lf_fn_param(f, 0), q = lf_fn_param(f, 1);
    cr_assert(p >= 0 && q >= 0);
    cr_expect_eq(lf_fn_op(f, LF_OP_SQRT, p, q, -1), -1, "sqrt given a second operand");
    cr_expect_neq(lf_graph_status(gg), LF_OK);
    EXPECT_MSG("fn_op extra operand", lf_errmsg(ctx), "fn_op");
    gg = fresh();
    f = lf_fn_new(gg, 2);
    p = lf_fn_param(f, 0);
    q = lf_fn_param(f, 1);
    cr_expect_eq(lf_fn_op(f, LF_OP_ADD, p, q, p), -1, "+ given a third operand");
    cr_expect_neq(lf_graph_status(gg), LF_OK);
}

/* lf_add is lf_apply(g, LF_OP_ADD, ...); its messages start with "add:", a
 * NULL graph included (no graph to record into: lf_errmsg(NULL)). */
Test(errors, add_null_graph_message_prefix) {
    lf_node *x = lf_iota(g, LF_F32, 3);
    cr_expect_null(lf_add(NULL, x, x));
    cr_expect(strncmp(lf_errmsg(NULL), "add:", 4) == 0, "message \"%s\" should start with \"add:\"",
              lf_errmsg(NULL));
}

Test(errors, parse_error) {
    lf_graph *gg = fresh();
    lf_node *x = fill(gg, LF_F32, 1, SH(2));
    lf_fn *ok = lf_fn_parse(gg, "(x) -> x");
    cr_assert(ok != NULL);
    cr_expect_null(lf_fn_parse(gg, "(x) -> x +"));
    EXPECT_ERR("parse", gg, LF_ERR_PARSE, "parse error at 1:");
    cr_expect_null(lf_map(gg, ok, x), "builder calls after a parse error fail");
    cr_expect_eq(lf_graph_status(gg), LF_ERR_PARSE);
}

/* A float operand of & | ^ ~ << >> is a typing error when the node is
 * built (map, zipwith, the convenience builders), naming the operator and
 * the dtype; integer and bool operands build; the error is sticky. */
Test(errors, bitwise_operator_on_float) {
    static const struct {
        const char *src;
        lf_dtype t;
        const char *want;
    } c[] = {
        {"(x) -> x & 1", LF_F32, "map: &: operands must be integers or bool, got f32"},
        {"(x) -> 3 | x", LF_F64, "map: |: operands must be integers or bool, got f64"},
        {"(x) -> x ^ x", LF_F32, "map: ^: operands must be integers or bool, got f32 (use ** for powers; ^ is bitwise xor)"},
        {"(x) -> ~x", LF_F64, "map: ~: operand must be an integer or bool, got f64"},
        {"(x) -> x << 2", LF_F32, "map: <<: operands must be integers or bool, got f32"},
        {"(x) -> 1 >> x", LF_F64, "map: >>: operands must be integers or bool, got f64"},
        {"(x) -> x & 1.5", LF_I32, "map: &: operands must be integers or bool, got f64"},
        {"(x) -> (x + 0.5) >> 1", LF_I64, "map: >>: operands must be integers or bool, got f64"},
        {"(x) -> sqrt(x) & 1", LF_I32, "map: &: operands must be integers or bool, got f64"},
        {"(x) -> ~(x / 2)", LF_I32, "map: ~: operand must be an integer or bool, got f64"},
        /* ^ applied to floats in a fn hints at ** (issue 14) */
        {"(x) -> x ^ 2", LF_F64, "map: ^: operands must be integers or bool, got f64 (use ** for powers; ^ is bitwise xor)"},
        {"(x) -> (x + 1) ^ 0.5", LF_I32, "map: ^: operands must be integers or bool, got f64 (use ** for powers; ^ is bitwise xor)"},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        lf_graph *gg = fresh();
        lf_node *x = fill(gg, c[i].t, 1, SH(2));
        lf_fn *f = lf_fn_parse(gg, c[i].src);
        cr_assert(f != NULL, "%s: %s", c[i].src, lf_graph_errmsg(gg));
        cr_expect_null(lf_map(gg, f, x), "%s on %s built", c[i].src, lf_dtype_name(c[i].t));
        cr_expect_eq(lf_graph_status(gg), LF_ERR_DTYPE, "%s", c[i].src);
        cr_expect_str_eq(lf_graph_errmsg(gg), c[i].want, "%s", c[i].src);
        cr_expect_str_eq(lf_errmsg(ctx), c[i].want, "%s (context message)", c[i].src);
        cr_expect_null(lf_map(gg, lf_fn_parse(gg, "(x) -> x"), x), "sticky after %s", c[i].src);
        lf_graph_free(gg);
    }
    /* the same fns on integer and bool inputs build */
    lf_graph *gg = fresh();
    lf_node *xi = fill(gg, LF_I32, 1, SH(2)), *xb = fill(gg, LF_BOOL, 1, SH(2));
    for (size_t i = 0; i < 6; i++) {
        lf_fn *f = lf_fn_parse(gg, c[i].src);
        cr_expect(lf_map(gg, f, xi) != NULL, "%s on i32: %s", c[i].src, lf_graph_errmsg(gg));
        cr_expect(lf_map(gg, f, xb) != NULL, "%s on bool: %s", c[i].src, lf_graph_errmsg(gg));
    }
    lf_graph_free(gg);
    /* zipwith and the convenience builders */
    gg = fresh();
    lf_node *a = fill(gg, LF_I64, 1, SH(2)), *b = fill(gg, LF_F32, 1, SH(2));
    lf_fn *f = lf_fn_parse(gg, "(a, b) -> a ^ b");
    cr_expect_null(lf_zipwith(gg, f, 2, (lf_node *[]){a, b}));
    EXPECT_ERR("zipwith i64 ^ f32", gg, LF_ERR_DTYPE,
               "zipwith: ^: operands must be integers or bool, got f32 (use ** for powers; ^ is bitwise xor)");
    lf_graph_free(gg);
    /* lf_bitwise_xor asks for xor by name: no hint */
    gg = fresh();
    cr_expect_null(lf_bitwise_xor(gg, fill(gg, LF_F64, 1, SH(2)), fill(gg, LF_I32, 1, SH(2))));
    cr_expect_str_eq(lf_graph_errmsg(gg), "bitxor: ^: operands must be integers or bool, got f64");
    lf_graph_free(gg);
    gg = fresh();
    a = fill(gg, LF_I32, 1, SH(2));
    b = fill(gg, LF_F64, 1, SH(2));
    cr_expect_null(lf_bitwise_and(gg, b, a));
    EXPECT_ERR("bitwise_and", gg, LF_ERR_DTYPE, "bitand: &: operands must be integers or bool, got f64");
    lf_graph_free(gg);
    gg = fresh();
    cr_expect_null(lf_bitwise_not(gg, fill(gg, LF_F32, 1, SH(2))));
    EXPECT_ERR("bitwise_not", gg, LF_ERR_DTYPE, "bitnot: ~: operand must be an integer or bool, got f32");
    lf_graph_free(gg);
    gg = fresh();
    cr_expect_null(lf_right_shift(gg, fill(gg, LF_I32, 1, SH(2)), fill(gg, LF_F32, 1, SH(2))));
    EXPECT_ERR("right_shift", gg, LF_ERR_DTYPE, "rshift: >>: operands", "got f32");
    lf_graph_free(gg);
    /* floor division takes floats */
    gg = fresh();
    cr_expect(lf_floor_divide(gg, fill(gg, LF_F32, 1, SH(2)), fill(gg, LF_I32, 1, SH(2))) != NULL,
              "%s", lf_graph_errmsg(gg));
    lf_graph_free(gg);
}

/* ---- graphs and contexts ----------------------------------------------------------------- */

Test(errors, nodes_of_another_graph) {
    lf_graph *g1 = fresh(), *g2 = fresh();
    lf_node *x1 = fill(g1, LF_F32, 1, SH(3)), *x2 = fill(g2, LF_F32, 1, SH(3));
    cr_expect_null(lf_add(g1, x1, x2));
    EXPECT_ERR("add across graphs", g1, LF_ERR_STATE, "add", "graph");
    cr_expect_eq(lf_graph_status(g2), LF_OK, "the other graph is not affected");

    lf_graph *g3 = fresh();
    lf_fn *f2 = lf_fn_parse(g2, "(a) -> a * 2");
    cr_assert(f2 != NULL);
    cr_expect_null(lf_map(g3, f2, fill(g3, LF_F32, 1, SH(3))));
    EXPECT_ERR("map with an fn of another graph", g3, LF_ERR_STATE, "map", "graph");

    lf_graph *g4 = fresh();
    cr_expect_null(lf_reshape(g4, x2, 1, SH(3)));
    EXPECT_ERR("reshape of a node of another graph", g4, LF_ERR_STATE, "reshape");
    lf_graph *g5 = fresh();
    lf_fn *z = lf_fn_parse(g5, "(a, b) -> a - b");
    cr_expect_null(lf_zipwith(g5, z, 2, (lf_node *[]){fill(g5, LF_F32, 1, SH(3)), x2}));
    EXPECT_ERR("zipwith with a node of another graph", g5, LF_ERR_STATE, "zipwith");

    lf_graph *g6 = fresh();
    lf_buffer *o = tu_buf(ctx, LF_F32, 1, SH(3), V(5, 5, 5));
    cr_expect_eq(lf_eval(g6, 1, &x2, &o), LF_ERR_STATE);
    EXPECT_MSG("eval of a node of another graph", lf_errmsg(ctx), "eval", "graph");
    tu_expect("untouched", o, V(5, 5, 5), 3, 0, 0);
    /* g2 itself still evaluates x2 */
    cr_expect_eq(lf_eval(g2, 1, &x2, &o), LF_OK, "%s", lf_errmsg(ctx));
}

/* A node or fn of a freed graph whose address a new graph reuses: the owner
 * pointer matches, the graph's serial does not. Simulated here without touching
 * freed memory (the owner pointer of a live graph's node rewritten); the real
 * sequence follows in nodes_of_a_freed_graph. */
Test(errors, node_with_a_reused_graph_address) {
    lf_graph *g1 = fresh(), *g2 = fresh();
    lf_node *x1 = fill(g1, LF_F32, 1, SH(3));
    lf_fn *f1 = lf_fn_parse(g1, "(a) -> a + 1");
    cr_assert(x1 && f1);
    x1->graph = g2; /* what a stale handle reads when g2 sits where g1 was */
    f1->graph = g2;
    cr_expect_null(lf_neg(g2, x1));
    EXPECT_ERR("neg of a stale node", g2, LF_ERR_STATE, "neg", "freed");
    lf_graph *g3 = fresh();
    f1->graph = g3;
    cr_expect_null(lf_map(g3, f1, fill(g3, LF_F32, 1, SH(3))));
    EXPECT_ERR("map with a stale fn", g3, LF_ERR_STATE, "map", "freed");
    lf_graph *g4 = fresh();
    x1->graph = g4;
    lf_buffer *o = tu_buf(ctx, LF_F32, 1, SH(3), V(5, 5, 5));
    cr_expect_eq(lf_eval(g4, 1, &x1, &o), LF_ERR_STATE);
    EXPECT_MSG("eval of a stale node", lf_errmsg(ctx), "eval", "freed");
    tu_expect("untouched", o, V(5, 5, 5), 3, 0, 0);
    x1->graph = g1;
    f1->graph = g1;
}

/* The real sequence: free a graph, make another (malloc usually hands back the
 * same address), use the old node. Reading a freed node is undefined
 * behaviour, which ASan and valgrind rightly report, so this runs only without
 * them; lazyfuse.h says the check is best effort. */
Test(errors, nodes_of_a_freed_graph) {
#if defined(__SANITIZE_ADDRESS__)
    cr_skip_test("reads freed memory on purpose (ASan reports it)");
#elif defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
    if (RUNNING_ON_VALGRIND) cr_skip_test("reads freed memory on purpose (valgrind reports it)");
#endif
#endif
    lf_graph *g1 = lf_graph_new(ctx);
    lf_node *x1 = lf_fill(g1, LF_F32, 2, 1, SH(3));
    cr_assert_not_null(x1);
    lf_graph_free(g1);
    lf_graph *g2 = lf_graph_new(ctx);
    cr_assert_not_null(g2);
    cr_expect_null(lf_neg(g2, x1));
    EXPECT_ERR("neg of a node of a freed graph", g2, LF_ERR_STATE, "neg", "another graph");
    lf_graph_free(g2);
}

Test(errors, buffers_of_another_context) {
    lf_ctx *c2 = tu_ctx();
    lf_buffer *b2 = tu_buf(c2, LF_F32, 1, SH(3), V(1, 2, 3));
    lf_graph *gg = fresh();
    cr_expect_null(lf_input(gg, b2));
    EXPECT_ERR("input of another context's buffer", gg, LF_ERR_STATE, "input", "context");
    gg = fresh();
    lf_node *y = fill(gg, LF_F32, 1, SH(3));
    cr_expect_eq(lf_eval(gg, 1, &y, &b2), LF_ERR_STATE);
    EXPECT_MSG("eval into another context's buffer", lf_errmsg(ctx), "eval", "context");
    tu_expect("untouched", b2, V(1, 2, 3), 3, 0, 0);
    /* a node of a graph of c2 into a buffer of ctx */
    lf_graph *h = lf_graph_new(c2);
    lf_node *hy = lf_fill(h, LF_F32, 2, 1, SH(3));
    lf_buffer *mine = tu_buf(ctx, LF_F32, 1, SH(3), V(7, 7, 7));
    cr_expect_eq(lf_eval(h, 1, &hy, &mine), LF_ERR_STATE);
    EXPECT_MSG("eval of c2's graph into ctx's buffer", lf_errmsg(c2), "eval", "context");
    tu_expect("untouched", mine, V(7, 7, 7), 3, 0, 0);
    lf_ctx_destroy(c2);
}

Test(errors, wrong_byte_counts) {
    lf_buffer *b = tu_buf(ctx, LF_F32, 1, SH(3), V(1, 2, 3));
    float host[4] = {9, 9, 9, 9};
    cr_expect_eq(lf_buffer_write(b, host, 8), LF_ERR_INVALID);
    EXPECT_MSG("write 8 of 12", lf_errmsg(ctx), "buffer_write", "8", "12");
    cr_expect_eq(lf_buffer_write(b, host, 16), LF_ERR_INVALID);
    EXPECT_MSG("write 16 of 12", lf_errmsg(ctx), "buffer_write", "16", "12");
    tu_expect("untouched by wrong-size writes", b, V(1, 2, 3), 3, 0, 0);
    cr_expect_eq(lf_buffer_read(b, host, 16), LF_ERR_INVALID);
    EXPECT_MSG("read 16 of 12", lf_errmsg(ctx), "buffer_read", "16", "12");
    cr_expect_eq(lf_buffer_read(b, host, 0), LF_ERR_INVALID);
    EXPECT_MSG("read 0 of 12", lf_errmsg(ctx), "buffer_read", "0", "12");
    cr_expect(host[0] == 9 && host[3] == 9, "a failed read leaves the host array");
    lf_buffer *e = tu_buf(ctx, LF_F64, 1, SH(0), NULL);
    cr_expect_eq(lf_buffer_write(e, host, 8), LF_ERR_INVALID);
    EXPECT_MSG("write 8 of 0", lf_errmsg(ctx), "buffer_write", "8", "0");
}

/* ---- sticky errors -------------------------------------------------------------------- */

Test(errors, sticky_errors) {
    lf_node *x = fill(g, LF_F32, 2, SH(3, 4)), *y = fill(g, LF_F32, 1, SH(5));
    lf_node *ok = lf_mul(g, x, x); /* built before the failure */
    cr_assert(ok != NULL);
    lf_fn *f = lf_fn_parse(g, "(a) -> a + 1");
    cr_assert(f != NULL);
    cr_expect_null(lf_add(g, x, y));
    cr_expect_eq(lf_graph_status(g), LF_ERR_SHAPE);
    char first[512];
    snprintf(first, sizeof first, "%s", lf_graph_errmsg(g));
    cr_expect(strstr(first, "shapes [3,4] and [5] do not broadcast") != NULL, "%s", first);
    cr_expect_str_eq(lf_errmsg(ctx), first);

    /* valid calls now return NULL; invalid ones do not replace the first error */
    cr_expect_null(lf_add(g, x, x));
    cr_expect_null(lf_const(g, LF_F32, 1));
    cr_expect_null(lf_iota(g, LF_F32, 3));
    cr_expect_null(lf_map(g, f, x));
    cr_expect_null(lf_reduce(g, LF_RED_SUM, x, 0, NULL, false));
    cr_expect_null(lf_fn_parse(g, "(a) -> a"));
    cr_expect_null(lf_iota(g, LF_BOOL, 3));
    cr_expect_null(lf_reshape(g, x, 1, SH(7)));
    cr_expect_null(lf_slice(g, x, 0, 0, 1, 0));
    cr_expect_null(lf_reshape(g, NULL, 1, SH(7)));
    cr_expect_eq(lf_graph_status(g), LF_ERR_SHAPE);
    cr_expect_str_eq(lf_graph_errmsg(g), first);
    cr_expect_str_eq(lf_errmsg(ctx), first);

    /* eval reports the first error, even for nodes built before it */
    lf_buffer *o = tu_buf(ctx, LF_F32, 2, SH(3, 4), NULL);
    float sentinel[12];
    for (int k = 0; k < 12; k++) sentinel[k] = -1234.5f;
    cr_assert_eq(lf_buffer_write(o, sentinel, sizeof sentinel), LF_OK);
    cr_expect_eq(lf_eval(g, 1, &ok, &o), LF_ERR_SHAPE);
    cr_expect_str_eq(lf_errmsg(ctx), first);
    float back[12];
    cr_assert_eq(lf_buffer_read(o, back, sizeof back), LF_OK);
    cr_expect(memcmp(back, sentinel, sizeof back) == 0, "output of a failed graph was changed");

    /* a chain of builder calls checked once at the end */
    lf_graph *gc = fresh();
    lf_fn *fc = lf_fn_parse(gc, "(a) -> a * 2");
    lf_node *r = lf_reduce(gc, LF_RED_SUM,
                           lf_map(gc, fc, lf_add(gc, fill(gc, LF_F32, 2, SH(3, 4)), fill(gc, LF_F32, 1, SH(5)))),
                           1, (int[]){0}, false);
    cr_expect_null(r);
    cr_expect_eq(lf_graph_status(gc), LF_ERR_SHAPE);
    cr_expect(strstr(lf_graph_errmsg(gc), "add:") != NULL &&
                  strstr(lf_graph_errmsg(gc), "[3,4] and [5]") != NULL,
              "the chain reports the first error: %s", lf_graph_errmsg(gc));

    /* other graphs of the context keep working */
    lf_graph *g2 = fresh();
    lf_node *z = lf_add(g2, lf_iota(g2, LF_F32, 3), lf_const(g2, LF_F32, 1));
    cr_assert(z != NULL, "%s", lf_errmsg(ctx));
    lf_buffer *zb = tu_eval1(ctx, g2, z);
    tu_expect("another graph", zb, V(1, 2, 3), 3, 0, 0);
    cr_expect_eq(lf_graph_status(g), LF_ERR_SHAPE, "and the failed one stays failed");
}

/* ---- failed evaluations leave outputs untouched ----------------------------------------- */

static void fill_sentinel(lf_buffer *b, unsigned char byte) {
    size_t n = lf_buffer_bytes(b);
    unsigned char *h = malloc(n ? n : 1);
    memset(h, byte, n);
    cr_assert_eq(lf_buffer_write(b, h, n), LF_OK);
    free(h);
}

static void expect_sentinel(const char *what, const lf_buffer *b, unsigned char byte) {
    size_t n = lf_buffer_bytes(b);
    unsigned char *h = malloc(n ? n : 1);
    cr_assert_eq(lf_buffer_read(b, h, n), LF_OK);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(h[i], byte, "%s: byte %zu changed to 0x%02x", what, i, h[i]);
    free(h);
}

Test(errors, failed_eval_second_output_bad) {
    lf_node *x = lf_input(g, tu_buf(ctx, LF_F64, 1, SH(4), V(1, 2, 3, 4)));
    lf_node *y1 = lf_mul(g, x, x);
    lf_node *y2 = lf_reduce(g, LF_RED_SUM, x, 0, NULL, false);
    lf_buffer *b1 = lf_buffer_new_like(ctx, y1);
    lf_buffer *b2 = lf_buffer_new(ctx, LF_F32, 0, NULL); /* wrong dtype for y2 */
    fill_sentinel(b1, 0xA5);
    fill_sentinel(b2, 0xA5);
    cr_expect_eq(lf_eval(g, 2, (lf_node *[]){y1, y2}, (lf_buffer *[]){b1, b2}), LF_ERR_DTYPE);
    EXPECT_MSG("second output dtype", lf_errmsg(ctx), "eval:", "output 1", "f64", "f32");
    expect_sentinel("first output", b1, 0xA5);
    expect_sentinel("second output", b2, 0xA5);
    /* wrong shape of the third output */
    lf_buffer *b3 = lf_buffer_new(ctx, LF_F64, 1, SH(5));
    lf_buffer *b2ok = lf_buffer_new_like(ctx, y2);
    fill_sentinel(b2ok, 0x5A);
    fill_sentinel(b3, 0x5A);
    cr_expect_eq(lf_eval(g, 3, (lf_node *[]){y1, y2, y1}, (lf_buffer *[]){b1, b2ok, b3}), LF_ERR_SHAPE);
    expect_sentinel("first output (shape)", b1, 0xA5);
    expect_sentinel("second output (shape)", b2ok, 0x5A);
    expect_sentinel("third output (shape)", b3, 0x5A);
    /* an output that is also an input, with a bad sibling */
    lf_buffer *xb = tu_buf(ctx, LF_F64, 1, SH(4), V(1, 2, 3, 4));
    lf_node *xi = lf_input(g, xb);
    lf_node *x2 = lf_add(g, xi, xi);
    cr_expect_eq(lf_eval(g, 2, (lf_node *[]){x2, x2}, (lf_buffer *[]){xb, b3}), LF_ERR_SHAPE);
    tu_expect("in-place output untouched", xb, V(1, 2, 3, 4), 4, 0, 0);
}

/* One buffer for two outputs is an error, not "the last one wins": the
 * exact message, nothing written, and the same outputs into two buffers work. */
Test(errors, eval_same_buffer_for_two_outputs) {
    lf_node *x = lf_input(g, tu_buf(ctx, LF_F64, 1, SH(4), V(1, 2, 3, 4)));
    lf_node *y1 = lf_mul(g, x, x);
    lf_node *y2 = lf_add(g, x, x);
    lf_buffer *b = lf_buffer_new_like(ctx, y1);
    lf_buffer *c = lf_buffer_new_like(ctx, y1);
    fill_sentinel(b, 0xA5);
    fill_sentinel(c, 0x5A);
    cr_expect_eq(lf_eval(g, 2, (lf_node *[]){y1, y2}, (lf_buffer *[]){b, b}), LF_ERR_INVALID);
    cr_expect_str_eq(lf_errmsg(ctx), "eval: outputs 0 and 1 have the same buffer (each output needs its own)");
    expect_sentinel("shared buffer", b, 0xA5);
    /* the same node twice into one buffer, the pair not adjacent */
    cr_expect_eq(lf_eval(g, 3, (lf_node *[]){y1, y2, y1}, (lf_buffer *[]){b, c, b}), LF_ERR_INVALID);
    cr_expect_str_eq(lf_errmsg(ctx), "eval: outputs 0 and 2 have the same buffer (each output needs its own)");
    expect_sentinel("shared buffer (3 outputs)", b, 0xA5);
    expect_sentinel("other buffer (3 outputs)", c, 0x5A);
    /* an input buffer given for two outputs is refused too, left as it was */
    lf_buffer *xb = tu_buf(ctx, LF_F64, 1, SH(4), V(1, 2, 3, 4));
    lf_node *xi = lf_input(g, xb);
    lf_node *x2 = lf_add(g, xi, xi);
    cr_expect_eq(lf_eval(g, 2, (lf_node *[]){x2, y1}, (lf_buffer *[]){xb, xb}), LF_ERR_INVALID);
    tu_expect("in-place output untouched", xb, V(1, 2, 3, 4), 4, 0, 0);
    /* the graph is not failed: distinct buffers evaluate */
    cr_expect_eq(lf_eval(g, 2, (lf_node *[]){y1, y2}, (lf_buffer *[]){b, c}), LF_OK, "%s", lf_errmsg(ctx));
    tu_expect("y1", b, V(1, 4, 9, 16), 4, 0, 0);
    tu_expect("y2", c, V(2, 4, 6, 8), 4, 0, 0);
}

Test(errors, failed_eval_alloc_failure) {
    lf_node *x = lf_input(g, tu_buf(ctx, LF_F64, 2, SH(3, 4), NULL));
    lf_node *y = lf_exp(g, lf_add(g, lf_transpose(g, x), lf_const(g, LF_F64, 1)));
    lf_node *s = lf_reduce(g, LF_RED_SUM, y, 1, (int[]){0}, false);
    lf_buffer *by = lf_buffer_new_like(ctx, y), *bs = lf_buffer_new_like(ctx, s);
    fill_sentinel(by, 0x3C);
    fill_sentinel(bs, 0x3C);
    lf_debug_fail_alloc(1, true);
    lf_status st = lf_eval(g, 2, (lf_node *[]){y, s}, (lf_buffer *[]){by, bs});
    lf_debug_fail_alloc(0, false);
    cr_expect_eq(st, LF_ERR_NOMEM, "eval with every allocation failing: %s", lf_status_name(st));
    EXPECT_MSG("alloc failure", lf_errmsg(ctx), "memory|alloc");
    expect_sentinel("y after alloc failure", by, 0x3C);
    expect_sentinel("s after alloc failure", bs, 0x3C);
}

/* Fails the k-th allocation of an eval for every k until the eval succeeds. */
Test(errors, failed_eval_alloc_sweep) {
    double xv[12];
    for (int k = 0; k < 12; k++) xv[k] = k * 0.25;
    lf_buffer *xb = tu_buf(ctx, LF_F64, 2, SH(3, 4), xv);
    lf_buffer *ib = tu_buf(ctx, LF_I32, 1, SH(4), V(1, 2, 3, 4));
    bool done = false;
    for (int64_t k = 1; k <= 500 && !done; k++) {
        lf_graph *gg = fresh();
        lf_node *x = lf_input(gg, xb), *iv = lf_input(gg, ib);
        lf_fn *f = lf_fn_parse(gg, "(a, b) -> a * b + sqrt(a)");
        lf_node *y = lf_zipwith(gg, f, 2, (lf_node *[]){lf_transpose(gg, x), lf_expand_dims(gg, iv, 1)});
        lf_node *s = lf_reduce(gg, LF_RED_MAX, y, 1, (int[]){1}, true);
        lf_node *xs = lf_mul(gg, x, lf_const(gg, LF_F64, 2));
        cr_assert(y && s && xs, "%s", lf_errmsg(ctx));
        lf_buffer *by = lf_buffer_new_like(ctx, y), *bs = lf_buffer_new_like(ctx, s);
        fill_sentinel(by, 0x77);
        fill_sentinel(bs, 0x77);
        lf_debug_fail_alloc(k, false);
        lf_status st = lf_eval(gg, 3, (lf_node *[]){y, s, xs}, (lf_buffer *[]){by, bs, xb});
        lf_debug_fail_alloc(0, false);
        if (st == LF_OK) {
            done = true;
            double want[12], ws[4], got[12];
            for (int i = 0; i < 4; i++) {
                ws[i] = -INFINITY;
                for (int j = 0; j < 3; j++) {
                    double a = xv[j * 4 + i];
                    want[i * 3 + j] = a * (i + 1) + sqrt(a);
                    if (want[i * 3 + j] > ws[i]) ws[i] = want[i * 3 + j];
                }
            }
            tu_expect("y", by, want, 12, 1e-15, 0);
            tu_expect("s", bs, ws, 4, 1e-15, 0);
            tu_read(xb, got);
            for (int i = 0; i < 12; i++) cr_expect_eq(got[i], xv[i] * 2, "x = x*2 at %d", i);
        } else {
            cr_expect_eq(st, LF_ERR_NOMEM, "fail at allocation %lld: %s (%s)", (long long)k,
                         lf_status_name(st), lf_errmsg(ctx));
            expect_sentinel("y", by, 0x77);
            expect_sentinel("s", bs, 0x77);
            double got[12];
            tu_read(xb, got);
            for (int i = 0; i < 12; i++)
                cr_assert_eq(got[i], xv[i], "in-place x changed by a failed eval (allocation %lld)",
                             (long long)k);
        }
        lf_graph_free(gg);
        lf_buffer_free(by);
        lf_buffer_free(bs);
    }
    cr_expect(done, "eval never succeeded within 500 injected failures");
}

/* Allocation failures while building give LF_ERR_NOMEM, sticky, and no crash. */
Test(errors, builder_alloc_failure) {
    for (int64_t k = 1; k <= 200; k++) {
        lf_graph *gg = lf_graph_new(ctx);
        cr_assert(gg != NULL);
        lf_debug_fail_alloc(k, false);
        lf_fn *f = lf_fn_parse(gg, "(x, m, s) -> exp(-0.5*((x-m)/s)**2) / (s*2.5066282746)");
        lf_node *x = lf_iota(gg, LF_F32, 8);
        lf_node *y = f ? lf_zipwith(gg, f, 3, (lf_node *[]){x, lf_const(gg, LF_F32, 0), lf_const(gg, LF_F32, 1)})
                       : NULL;
        lf_node *r = lf_reduce(gg, LF_RED_SUM, lf_reshape(gg, y, 2, SH(2, 4)), 1, (int[]){1}, false);
        lf_debug_fail_alloc(0, false);
        if (r) {
            cr_expect_eq(lf_graph_status(gg), LF_OK);
            lf_graph_free(gg);
            return;
        }
        cr_expect_eq(lf_graph_status(gg), LF_ERR_NOMEM, "allocation %lld: %s (%s)", (long long)k,
                     lf_status_name(lf_graph_status(gg)), lf_graph_errmsg(gg));
        lf_graph_free(gg);
    }
    cr_expect_fail("building never succeeded within 200 injected failures");
}

Test(errors, scan_bad_arguments) {
    lf_graph *gg = fresh();
    lf_node *x = lf_fill(gg, LF_F32, 0.0, 2, SH(3, 4));
    cr_expect_null(lf_scan(gg, LF_RED_ARGMAX, x, 0, false));
    EXPECT_ERR("scan argmax", gg, LF_ERR_INVALID, "scan: op argmax is not supported (sum, prod, min, max)");
    gg = fresh();
    x = lf_fill(gg, LF_F32, 0.0, 2, SH(3, 4));
    cr_expect_null(lf_scan(gg, LF_RED_MEAN, x, 0, false));
    EXPECT_ERR("scan mean", gg, LF_ERR_INVALID, "scan: op mean is not supported (sum, prod, min, max)");
    gg = fresh();
    x = lf_fill(gg, LF_F32, 0.0, 2, SH(3, 4));
    cr_expect_null(lf_scan(gg, (lf_reduce_op)99, x, 0, false));
    EXPECT_ERR("scan op 99", gg, LF_ERR_INVALID, "scan: unknown reduction 99");
    gg = fresh();
    x = lf_fill(gg, LF_F32, 0.0, 2, SH(3, 4));
    cr_expect_null(lf_scan(gg, LF_RED_SUM, x, 2, false));
    EXPECT_ERR("scan axis 2", gg, LF_ERR_AXIS, "scan sum: axis 2 out of range for 2 dimensions");
    gg = fresh();
    x = lf_fill(gg, LF_F32, 0.0, 2, SH(3, 4));
    cr_expect_null(lf_scan(gg, LF_RED_MIN, x, -3, true));
    EXPECT_ERR("scan axis -3", gg, LF_ERR_AXIS, "scan min: axis -3 out of range for 2 dimensions");
    /* sticky: a later good call still fails with the first error */
    cr_expect_null(lf_scan(gg, LF_RED_MIN, x, -1, true));
    EXPECT_ERR("scan sticky", gg, LF_ERR_AXIS, "scan min: axis -3 out of range for 2 dimensions");
    gg = fresh();
    x = lf_fill(gg, LF_F32, 0.0, 0, NULL);
    cr_expect_null(lf_scan(gg, LF_RED_MAX, x, 0, false));
    EXPECT_ERR("scan of a 0-d node", gg, LF_ERR_AXIS, "scan max: axis 0 out of range for 0 dimensions");
    gg = fresh();
    cr_expect_null(lf_scan(gg, LF_RED_SUM, NULL, 0, false));
    EXPECT_ERR("scan of NULL", gg, LF_ERR_NULL, "scan: input 0 is NULL");
    lf_graph *g2 = fresh();
    lf_node *y = lf_fill(g2, LF_F32, 0.0, 1, SH(3));
    gg = fresh();
    cr_expect_null(lf_scan(gg, LF_RED_SUM, y, 0, false));
    EXPECT_ERR("scan of a foreign node", gg, LF_ERR_STATE, "scan: input 0 belongs to another graph (or to a freed one)");
    cr_expect_null(lf_scan(NULL, LF_RED_SUM, y, 0, false));
    EXPECT_MSG("scan NULL graph", lf_errmsg(NULL), "scan", "NULL");
}

/* lf_scan_dtype (issue 26): lf_scan's errors, and an unknown accumulator dtype. */
Test(errors, scan_dtype_bad_arguments) {
    lf_graph *gg = fresh();
    lf_node *x = lf_fill(gg, LF_I32, 0.0, 2, SH(3, 4));
    cr_expect_null(lf_scan_dtype(gg, LF_RED_SUM, x, 0, false, (lf_dtype)99));
    EXPECT_ERR("scan dtype 99", gg, LF_ERR_INVALID, "scan: unknown accumulator dtype 99");
    gg = fresh();
    x = lf_fill(gg, LF_I32, 0.0, 2, SH(3, 4));
    cr_expect_null(lf_scan_dtype(gg, LF_RED_SUM, x, 0, false, (lf_dtype)-1));
    EXPECT_ERR("scan dtype -1", gg, LF_ERR_INVALID, "scan: unknown accumulator dtype -1");
    gg = fresh();
    x = lf_fill(gg, LF_I32, 0.0, 2, SH(3, 4));
    cr_expect_null(lf_scan_dtype(gg, LF_RED_SUM, x, 2, false, LF_I64));
    EXPECT_ERR("scan dtype axis 2", gg, LF_ERR_AXIS, "scan sum: axis 2 out of range for 2 dimensions");
    gg = fresh();
    x = lf_fill(gg, LF_I32, 0.0, 2, SH(3, 4));
    cr_expect_null(lf_scan_dtype(gg, LF_RED_ARGMAX, x, 0, false, LF_I64));
    EXPECT_ERR("scan dtype argmax", gg, LF_ERR_INVALID, "scan: op argmax is not supported (sum, prod, min, max)");
    gg = fresh();
    cr_expect_null(lf_scan_dtype(gg, LF_RED_SUM, NULL, 0, false, LF_I64));
    EXPECT_ERR("scan dtype of NULL", gg, LF_ERR_NULL, "scan: input 0 is NULL");
    cr_expect_null(lf_scan_dtype(NULL, LF_RED_SUM, NULL, 0, false, LF_I64));
    EXPECT_MSG("scan dtype NULL graph", lf_errmsg(NULL), "scan", "NULL");
}

/* ---- gather (issue 13) ------------------------------------------------------------------ */

Test(errors, gather_builder_arguments) {
    lf_graph *g1 = fresh();
    lf_node *x = fill(g1, LF_F32, 2, SH(3, 4)), *i = fill(g1, LF_I64, 2, SH(3, 2));
    cr_expect_null(lf_gather(g1, x, 2, i));
    cr_expect_eq(lf_graph_status(g1), LF_ERR_AXIS);
    cr_expect_str_eq(lf_errmsg(ctx), "gather: axis 2 out of range for 2 dimensions");
    lf_graph *g2 = fresh();
    cr_expect_null(lf_gather(g2, fill(g2, LF_F32, 1, SH(3)), -2, fill(g2, LF_I32, 1, SH(2))));
    cr_expect_str_eq(lf_errmsg(ctx), "gather: axis -2 out of range for 1 dimensions");
    lf_graph *g3 = fresh();
    cr_expect_null(lf_gather(g3, fill(g3, LF_F32, 1, SH(3)), 0, fill(g3, LF_F32, 1, SH(2))));
    cr_expect_eq(lf_graph_status(g3), LF_ERR_DTYPE);
    cr_expect_str_eq(lf_errmsg(ctx), "gather: index dtype f32 is not an integer dtype (i32 or i64)");
    lf_graph *g4 = fresh();
    cr_expect_null(lf_gather(g4, fill(g4, LF_F32, 2, SH(3, 4)), 1, fill(g4, LF_I32, 2, SH(2, 2))));
    cr_expect_eq(lf_graph_status(g4), LF_ERR_SHAPE);
    cr_expect_str_eq(lf_errmsg(ctx),
                     "gather: index shape [2,2] does not broadcast against x [3,4] on axis 0 (axis 1 is gathered)");
    lf_graph *g5 = fresh();
    cr_expect_null(lf_gather(g5, fill(g5, LF_F32, 2, SH(3, 4)), 1, fill(g5, LF_I32, 1, SH(2))));
    cr_expect_eq(lf_graph_status(g5), LF_ERR_SHAPE);
    cr_expect_str_eq(lf_errmsg(ctx), "gather: index shape [2] has 1 dimensions, x [3,4] has 2");
    lf_graph *g6 = fresh();
    cr_expect_null(lf_gather(g6, fill(g6, LF_F32, 0, NULL), 0, fill(g6, LF_I32, 1, SH(2))));
    cr_expect_eq(lf_graph_status(g6), LF_ERR_AXIS);
    cr_expect_null(lf_gather(NULL, x, 0, i));
    EXPECT_MSG("gather(NULL graph)", lf_errmsg(NULL), "gather", "NULL");
    lf_graph *g7 = fresh();
    cr_expect_null(lf_gather(g7, fill(g7, LF_F32, 1, SH(3)), 0, NULL));
    cr_expect_eq(lf_graph_status(g7), LF_ERR_NULL);
    cr_expect_null(lf_gather(g7, x, 0, i)); /* sticky (x and i are of another graph too) */
    cr_expect_eq(lf_graph_status(g7), LF_ERR_NULL);
}

/* lf_take (issue 26): its own name in every builder message. */
Test(errors, take_builder_arguments) {
    lf_graph *g1 = fresh();
    cr_expect_null(lf_take(g1, fill(g1, LF_F32, 2, SH(3, 4)), 2, fill(g1, LF_I64, 1, SH(2))));
    cr_expect_eq(lf_graph_status(g1), LF_ERR_AXIS);
    cr_expect_str_eq(lf_errmsg(ctx), "take: axis 2 out of range for 2 dimensions");
    lf_graph *g2 = fresh();
    cr_expect_null(lf_take(g2, fill(g2, LF_F32, 0, NULL), 0, fill(g2, LF_I64, 1, SH(2))));
    cr_expect_str_eq(lf_errmsg(ctx), "take: axis 0 out of range for 0 dimensions");
    lf_graph *g3 = fresh();
    cr_expect_null(lf_take(g3, fill(g3, LF_F32, 2, SH(3, 4)), -1, fill(g3, LF_F64, 1, SH(2))));
    cr_expect_eq(lf_graph_status(g3), LF_ERR_DTYPE);
    cr_expect_str_eq(lf_errmsg(ctx), "take: index dtype f64 is not an integer dtype (i32 or i64)");
    lf_graph *g4 = fresh();
    cr_expect_null(lf_take(g4, fill(g4, LF_F32, 5, SH(2, 2, 2, 2, 2)), 1, fill(g4, LF_I32, 5, SH(1, 1, 1, 1, 1))));
    cr_expect_eq(lf_graph_status(g4), LF_ERR_SHAPE);
    cr_expect_str_eq(lf_errmsg(ctx), "take: x [2,2,2,2,2] with index [1,1,1,1,1] gives 9 dimensions (at most 8)");
    cr_expect_null(lf_take(NULL, NULL, 0, NULL));
    EXPECT_MSG("take(NULL graph)", lf_errmsg(NULL), "take", "NULL");
    lf_graph *g5 = fresh();
    cr_expect_null(lf_take(g5, NULL, 0, fill(g5, LF_I32, 1, SH(2))));
    cr_expect_eq(lf_graph_status(g5), LF_ERR_NULL);
    cr_expect_str_eq(lf_errmsg(ctx), "take: input 0 is NULL");
    /* an index out of range: lf_eval's LF_ERR_INDEX, the output untouched */
    lf_graph *g6 = fresh();
    lf_node *tab = lf_input(g6, tu_buf(ctx, LF_F64, 2, (int64_t[]){3, 2}, (double[]){1, 2, 3, 4, 5, 6}));
    lf_node *t = lf_take(g6, tab, 0, lf_input(g6, tu_buf(ctx, LF_I64, 1, (int64_t[]){2}, (double[]){1, 3})));
    double seven[4] = {7, 7, 7, 7};
    lf_buffer *o = tu_buf(ctx, LF_F64, 2, (int64_t[]){2, 2}, seven);
    cr_expect_eq(lf_eval(g6, 1, &t, &o), LF_ERR_INDEX);
    char want[128];
    snprintf(want, sizeof want, "node %d (take f64[2,2]): index 3 out of range for axis 0 of size 3 at position [1,0]", t->id);
    cr_expect_str_eq(lf_errmsg(ctx), want);
    tu_expect("take output untouched", o, seven, 4, 0, 0);
    char lab[256]; /* the DOT views name it */
    cr_expect(strstr(graph_dot_node_label(t, lab, sizeof lab), "take axis 0\\nf64 [2,2]") != NULL, "%s", lab);
    lf_buffer_free(o);
}

/* An index out of range fails the eval with LF_ERR_INDEX, names the node, the
 * first (lowest row-major) position and the value, and changes no output:
 * on the suite's backend, and on the CPU backend at 1, 2 and 3 threads. */
static void gather_index_errors_on(lf_ctx *c) {
    lf_graph *gg = lf_graph_new(c);
    int64_t n = 10, m = 5000;
    double *xv = malloc(sizeof(double) * (size_t)n), *iv = malloc(sizeof(double) * (size_t)m);
    for (int64_t k = 0; k < n; k++) xv[k] = (double)k;
    for (int64_t k = 0; k < m; k++) iv[k] = (double)(k % 19 - 9);
    iv[3] = 12, iv[4000] = -11, iv[4999] = 10;
    lf_node *x = lf_input(gg, tu_buf(c, LF_F64, 1, &n, xv));
    lf_node *idx = lf_input(gg, tu_buf(c, LF_I64, 1, &m, iv));
    lf_node *t = lf_gather(gg, x, 0, idx);
    lf_node *y = lf_zipwith(gg, lf_fn_parse(gg, "(a, b) -> exp(a) * b"), 2, (lf_node *[]){t, lf_const(gg, LF_F64, 2)});
    lf_node *s = lf_add(gg, x, lf_const(gg, LF_F64, 1)); /* a second output, computed first */
    cr_assert(y && s, "%s", lf_errmsg(c));
    double seven[5000];
    for (int k = 0; k < m; k++) seven[k] = 7;
    lf_buffer *oy = tu_buf(c, LF_F64, 1, &m, seven), *os = tu_buf(c, LF_F64, 1, &n, seven);
    char want[160];
    snprintf(want, sizeof want, "node %d (gather f64[5000]): index 12 out of range for axis 0 of size 10 at position [3]", t->id);
    for (int rep = 0; rep < 2; rep++) {
        cr_expect_eq(lf_eval(gg, 2, (lf_node *[]){s, y}, (lf_buffer *[]){os, oy}), LF_ERR_INDEX);
        cr_expect_str_eq(lf_errmsg(c), want);
        tu_expect("y untouched", oy, seven, m, 0, 0);
        tu_expect("s untouched", os, seven, n, 0, 0);
    }
    /* a 2-d take_along_axis: the lowest row-major position, a negative value */
    lf_node *x2 = lf_input(gg, tu_buf(c, LF_F32, 2, (int64_t[]){2, 3}, (double[]){1, 2, 3, 4, 5, 6}));
    lf_node *i2 = lf_input(gg, tu_buf(c, LF_I32, 2, (int64_t[]){2, 2}, (double[]){0, 2, -4, 3}));
    lf_node *t2 = lf_gather(gg, x2, 1, i2);
    lf_buffer *o2 = tu_buf(c, LF_F32, 2, (int64_t[]){2, 2}, seven);
    cr_expect_eq(lf_eval(gg, 1, &t2, &o2), LF_ERR_INDEX);
    snprintf(want, sizeof want, "node %d (gather f32[2,2]): index -4 out of range for axis 1 of size 3 at position [1,0]", t2->id);
    cr_expect_str_eq(lf_errmsg(c), want);
    tu_expect("t2 untouched", o2, seven, 4, 0, 0);
    /* read through a slice that skips the bad position: still every index is checked */
    lf_node *sl = lf_slice(gg, t, 0, 10, 20, 1);
    lf_buffer *o3 = tu_buf(c, LF_F64, 1, (int64_t[]){10}, seven);
    cr_expect_eq(lf_eval(gg, 1, &sl, &o3), LF_ERR_INDEX);
    cr_expect(strstr(lf_errmsg(c), "at position [3]") != NULL, "%s", lf_errmsg(c));
    tu_expect("slice untouched", o3, seven, 10, 0, 0);
    /* the output is also the index's buffer: untouched too */
    lf_node *ti = lf_cast(gg, lf_gather(gg, x, 0, idx), LF_I64);
    lf_buffer *ib = tu_buf(c, LF_I64, 1, &m, iv);
    lf_node *ii = lf_input(gg, ib);
    lf_node *tii = lf_cast(gg, lf_gather(gg, x, 0, ii), LF_I64);
    (void)ti;
    cr_expect_eq(lf_eval(gg, 1, &tii, &ib), LF_ERR_INDEX);
    tu_expect("index buffer untouched", ib, iv, m, 0, 0);
    lf_buffer_free(oy), lf_buffer_free(os), lf_buffer_free(o2), lf_buffer_free(o3), lf_buffer_free(ib);
    lf_graph_free(gg);
    free(xv), free(iv);
}

/* Runs check on a fresh context of backend b with threads and compile mode
 * as given (0: the defaults), then destroys it. */
static void on_fresh_ctx(void (*check)(lf_ctx *), lf_backend b, int threads, lf_compile_mode compile) {
    lf_ctx_options o;
    lf_ctx_options_init(&o);
    o.backend = b;
    o.threads = threads;
    o.compile = compile;
    lf_ctx *c = lf_ctx_new(&o);
    cr_assert(c != NULL, "%s", lf_errmsg(NULL));
    check(c);
    lf_ctx_destroy(c);
}

Test(errors, gather_index_out_of_range) {
    gather_index_errors_on(ctx);
    for (int threads = 1; threads <= 3; threads++)
        on_fresh_ctx(gather_index_errors_on, LF_BACKEND_CPU, threads, LF_COMPILE_AUTO);
    on_fresh_ctx(gather_index_errors_on, LF_BACKEND_REFERENCE, 0, LF_COMPILE_AUTO);
}

/* A failed eval changes no output, also one written in place into its own
 * input: x = x*0.5 + 1 into x runs in place (each element read only where it
 * is written) unless a later kernel can still fail the eval, as a gather's
 * index check can; then x must come out of the failed eval unchanged. (The
 * in-place decision's `first_check == s->nkernels` condition in
 * backends/cpu/cpu.c and backends/cuda/cuda.c guards this.) */
static void in_place_output_survives_failed_gather_on(lf_ctx *c) {
    lf_graph *gg = lf_graph_new(c);
    enum { N = 300 };
    double xv[N], seven[N];
    for (int i = 0; i < N; i++) xv[i] = i * 0.25 - 7, seven[i] = 7;
    int64_t n = N, m = 4;
    lf_buffer *xb = tu_buf(c, LF_F64, 1, &n, xv);
    lf_node *x = lf_input(gg, xb);
    lf_node *y = lf_add(gg, lf_mul(gg, x, lf_const(gg, LF_F64, 0.5)), lf_const(gg, LF_F64, 1));
    lf_node *idx = lf_input(gg, tu_buf(c, LF_I64, 1, &m, (double[]){0, 5, N + 3, 2}));
    lf_node *t = lf_gather(gg, y, 0, idx); /* runs after y's kernel */
    cr_assert(y && t, "%s", lf_errmsg(c));
    lf_buffer *ot = tu_buf(c, LF_F64, 1, &m, seven);
    /* both orders of the outputs: the in-place one first and second */
    cr_expect_eq(lf_eval(gg, 2, (lf_node *[]){y, t}, (lf_buffer *[]){xb, ot}), LF_ERR_INDEX, "%s", lf_errmsg(c));
    tu_expect("x (the in-place output) untouched by the failed eval", xb, xv, N, 0, 0);
    tu_expect("the gather's output untouched", ot, seven, m, 0, 0);
    cr_expect_eq(lf_eval(gg, 2, (lf_node *[]){t, y}, (lf_buffer *[]){ot, xb}), LF_ERR_INDEX, "%s", lf_errmsg(c));
    tu_expect("x untouched (outputs in the other order)", xb, xv, N, 0, 0);
    /* the same eval with a good index writes x in place and succeeds */
    lf_node *idx2 = lf_input(gg, tu_buf(c, LF_I64, 1, &m, (double[]){0, 5, N - 1, 2}));
    lf_node *t2 = lf_gather(gg, y, 0, idx2);
    cr_assert_eq(lf_eval(gg, 2, (lf_node *[]){y, t2}, (lf_buffer *[]){xb, ot}), LF_OK, "%s", lf_errmsg(c));
    double want[N];
    for (int i = 0; i < N; i++) want[i] = xv[i] * 0.5 + 1;
    tu_expect("x*0.5 + 1 into x", xb, want, N, 0, 0);
    tu_expect("the gather of y", ot, (double[]){want[0], want[5], want[N - 1], want[2]}, m, 0, 0);
    lf_buffer_free(xb), lf_buffer_free(ot);
    lf_graph_free(gg);
}

Test(errors, in_place_output_survives_failed_gather) {
    in_place_output_survives_failed_gather_on(ctx);
    for (int threads = 1; threads <= 3; threads++)
        on_fresh_ctx(in_place_output_survives_failed_gather_on, LF_BACKEND_CPU, threads, LF_COMPILE_AUTO);
    on_fresh_ctx(in_place_output_survives_failed_gather_on, LF_BACKEND_CPU, 2, LF_COMPILE_NEVER);
    on_fresh_ctx(in_place_output_survives_failed_gather_on, LF_BACKEND_REFERENCE, 0, LF_COMPILE_AUTO);
}

/* The range check at its edges: -n and n-1 are in range, -n-1 and n are not,
 * nor the extremes of int64 (whose sum with n must not wrap into range), and
 * nothing is in range of an empty axis; on the compiled CPU backend, the
 * interpreter and the reference. */
static void gather_index_edges_on(lf_ctx *c) {
    const int64_t n = 6;
    const int64_t good[] = {-6, 5, 0, -1};
    const int64_t bad[] = {6, -7, INT64_MAX, INT64_MIN, INT64_MIN + 1, INT64_MAX - 5, INT64_MIN + 6};
    double xv[6] = {10, 11, 12, 13, 14, 15};
    for (int empty = 0; empty < 2; empty++)
        for (size_t k = 0; k < sizeof good / sizeof *good + sizeof bad / sizeof *bad; k++) {
            bool ok = !empty && k < sizeof good / sizeof *good;
            int64_t v = k < sizeof good / sizeof *good ? good[k] : bad[k - sizeof good / sizeof *good];
            lf_graph *gg = lf_graph_new(c);
            int64_t xn = empty ? 0 : n, one = 1;
            lf_node *x = lf_input(gg, tu_buf(c, LF_F32, 1, &xn, xv));
            lf_buffer *ib = lf_buffer_new(c, LF_I64, 1, &one);
            cr_assert(ib && lf_buffer_write(ib, &v, sizeof v) == LF_OK, "%s", lf_errmsg(c));
            lf_node *t = lf_gather(gg, x, 0, lf_input(gg, ib));
            lf_buffer *o = tu_buf(c, LF_F32, 1, &one, (double[]){7});
            cr_assert(t != NULL, "%s", lf_errmsg(c));
            lf_status st = lf_eval(gg, 1, &t, &o);
            if (ok) {
                cr_expect_eq(st, LF_OK, "index %lld: %s", (long long)v, lf_errmsg(c));
                tu_expect("in range", o, (double[]){xv[v < 0 ? v + n : v]}, 1, 0, 0);
            } else {
                cr_expect_eq(st, LF_ERR_INDEX, "index %lld of extent %lld", (long long)v, (long long)xn);
                tu_expect("untouched", o, (double[]){7}, 1, 0, 0);
            }
            lf_buffer_free(ib), lf_buffer_free(o);
            lf_graph_free(gg);
        }
}

Test(errors, gather_index_range_edges) {
    on_fresh_ctx(gather_index_edges_on, LF_BACKEND_CPU, 0, LF_COMPILE_AUTO);
    on_fresh_ctx(gather_index_edges_on, LF_BACKEND_CPU, 0, LF_COMPILE_NEVER); /* the schedule interpreter */
    on_fresh_ctx(gather_index_edges_on, LF_BACKEND_REFERENCE, 0, LF_COMPILE_AUTO);
}

Test(errors, scatter_and_bincount_builder_arguments) {
    lf_graph *g1 = fresh();
    lf_node *d = fill(g1, LF_F32, 2, SH(3, 4)), *i = fill(g1, LF_I64, 2, SH(3, 2)), *v = fill(g1, LF_F32, 2, SH(3, 2));
    cr_expect_null(lf_scatter(g1, LF_SCATTER_ADD, d, -3, i, v));
    cr_expect_eq(lf_graph_status(g1), LF_ERR_AXIS);
    cr_expect_str_eq(lf_errmsg(ctx), "scatter: axis -3 out of range for 2 dimensions");
    lf_graph *g2 = fresh();
    cr_expect_null(lf_scatter(g2, LF_SCATTER_SET, fill(g2, LF_F32, 1, SH(3)), 0, fill(g2, LF_F64, 1, SH(2)),
                              fill(g2, LF_F32, 1, SH(2))));
    cr_expect_eq(lf_graph_status(g2), LF_ERR_DTYPE);
    cr_expect_str_eq(lf_errmsg(ctx), "scatter: index dtype f64 is not an integer dtype (i32 or i64)");
    lf_graph *g3 = fresh();
    cr_expect_null(lf_scatter(g3, LF_SCATTER_ADD, fill(g3, LF_F32, 2, SH(3, 4)), 1, fill(g3, LF_I32, 2, SH(2, 2)),
                              fill(g3, LF_F32, 0, NULL)));
    cr_expect_eq(lf_graph_status(g3), LF_ERR_SHAPE);
    cr_expect_str_eq(lf_errmsg(ctx),
                     "scatter: index shape [2,2] does not broadcast to dst [3,4] on axis 0 (axis 1 is scattered)");
    lf_graph *g4 = fresh();
    cr_expect_null(lf_scatter(g4, LF_SCATTER_ADD, fill(g4, LF_F32, 2, SH(3, 4)), 1, fill(g4, LF_I32, 2, SH(3, 2)),
                              fill(g4, LF_F32, 2, SH(3, 5))));
    cr_expect_eq(lf_graph_status(g4), LF_ERR_SHAPE);
    cr_expect_str_eq(lf_errmsg(ctx), "scatter: values [3,5] do not broadcast to the positions [3,2] (index [3,2])");
    lf_graph *g5 = fresh();
    cr_expect_null(lf_scatter(g5, LF_SCATTER_ADD, fill(g5, LF_F32, 1, SH(4)), 0, fill(g5, LF_I32, 1, SH(3)),
                              fill(g5, LF_F32, 1, SH(2))));
    cr_expect_str_eq(lf_errmsg(ctx), "scatter: values [2] do not broadcast against the index [3]");
    lf_graph *g6 = fresh();
    cr_expect_null(lf_scatter(g6, (lf_scatter_op)9, fill(g6, LF_F32, 1, SH(4)), 0, fill(g6, LF_I32, 1, SH(3)),
                              fill(g6, LF_F32, 1, SH(3))));
    cr_expect_eq(lf_graph_status(g6), LF_ERR_INVALID);
    cr_expect_str_eq(lf_errmsg(ctx), "scatter: unknown op 9");
    lf_graph *g7 = fresh();
    cr_expect_null(lf_scatter(g7, LF_SCATTER_ADD, fill(g7, LF_BOOL, 1, SH(4)), 0, fill(g7, LF_I32, 1, SH(3)),
                              fill(g7, LF_F32, 1, SH(3))));
    cr_expect_eq(lf_graph_status(g7), LF_ERR_DTYPE);
    cr_expect_str_eq(lf_errmsg(ctx), "scatter: add into a bool array");
    lf_graph *g8 = fresh();
    cr_expect_null(lf_bincount(g8, fill(g8, LF_I32, 1, SH(3)), NULL, -1));
    cr_expect_eq(lf_graph_status(g8), LF_ERR_SHAPE);
    cr_expect_str_eq(lf_errmsg(ctx), "bincount: nbins -1 is negative");
    lf_graph *g9 = fresh();
    cr_expect_null(lf_bincount(g9, fill(g9, LF_F32, 1, SH(3)), NULL, 4));
    cr_expect_eq(lf_graph_status(g9), LF_ERR_DTYPE);
    cr_expect_str_eq(lf_errmsg(ctx), "bincount: index dtype f32 is not an integer dtype (i32 or i64)");
    lf_graph *g10 = fresh();
    cr_expect_null(lf_bincount(g10, fill(g10, LF_I32, 1, SH(3)), fill(g10, LF_F32, 1, SH(2)), 4));
    cr_expect_eq(lf_graph_status(g10), LF_ERR_SHAPE);
    cr_expect_null(lf_bincount(NULL, i, NULL, 3));
    EXPECT_MSG("bincount(NULL graph)", lf_errmsg(NULL), "bincount", "NULL");
    lf_graph *g11 = fresh();
    cr_expect_null(lf_scatter(g11, LF_SCATTER_ADD, fill(g11, LF_F32, 1, SH(4)), 0, NULL, fill(g11, LF_F32, 1, SH(3))));
    cr_expect_eq(lf_graph_status(g11), LF_ERR_NULL);
}

/* Out-of-range scatter indices (a computed index too) fail the eval with
 * LF_ERR_INDEX naming the lowest position, outputs untouched. */
static void scatter_index_errors_on(lf_ctx *c) {
    lf_graph *gg = lf_graph_new(c);
    int64_t n = 300000;
    double *xv = malloc(sizeof(double) * (size_t)n);
    for (int64_t k = 0; k < n; k++) xv[k] = (double)((k * 7919) % 1000) / 1000.0;
    xv[200001] = 1.5, xv[250000] = -0.5; /* floor(x*256) out of 0..255 (-128, later, is negative) */
    lf_node *x = lf_input(gg, tu_buf(c, LF_F32, 1, &n, xv));
    lf_node *h = lf_bincount(gg, lf_cast(gg, lf_map(gg, lf_fn_parse(gg, "(v) -> floor(v * 256)"), x), LF_I32), NULL, 256);
    lf_node *y = lf_add(gg, x, lf_const(gg, LF_F32, 1));
    cr_assert(h && y, "%s", lf_errmsg(c));
    double seven[300];
    for (int k = 0; k < 300; k++) seven[k] = 7;
    lf_buffer *oh = tu_buf(c, LF_I64, 1, (int64_t[]){256}, seven), *oy = lf_buffer_new_like(c, y);
    char want[160];
    snprintf(want, sizeof want, "node %d (bincount i64[256]): index 384 out of range for axis 0 of size 256 at position [200001]", h->id);
    cr_expect_eq(lf_eval(gg, 2, (lf_node *[]){y, h}, (lf_buffer *[]){oy, oh}), LF_ERR_INDEX);
    cr_expect_str_eq(lf_errmsg(c), want);
    tu_expect("histogram untouched", oh, seven, 256, 0, 0);
    /* put_along_axis with a negative out-of-range index */
    lf_node *d = lf_input(gg, tu_buf(c, LF_F64, 2, (int64_t[]){2, 3}, seven));
    lf_node *i = lf_input(gg, tu_buf(c, LF_I64, 2, (int64_t[]){2, 2}, (double[]){0, 1, 2, -4}));
    lf_node *s = lf_scatter(gg, LF_SCATTER_SET, d, 1, i, lf_const(gg, LF_F64, 1));
    lf_buffer *os = tu_buf(c, LF_F64, 2, (int64_t[]){2, 3}, seven);
    cr_expect_eq(lf_eval(gg, 1, &s, &os), LF_ERR_INDEX);
    snprintf(want, sizeof want, "node %d (scatter set f64[2,3]): index -4 out of range for axis 1 of size 3 at position [1,1]", s->id);
    cr_expect_str_eq(lf_errmsg(c), want);
    tu_expect("put_along_axis untouched", os, seven, 6, 0, 0);
    lf_buffer_free(oh), lf_buffer_free(oy), lf_buffer_free(os);
    lf_graph_free(gg);
    free(xv);
}

/* np.bincount refuses negative values (issue 26, item 2): floor(x*4) of
 * {0.1, 0.5, -0.001, 0.99} is -1 at position [2], an LF_ERR_INDEX naming
 * position and value (never a count in the top bin), for an i32 and an i64
 * index and every weights dtype, outputs untouched; a value >= nbins keeps
 * scatter's message; the lowest bad position is named, whatever the
 * thread count; all-valid values still count. */
static void bincount_negative_on(lf_ctx *c) {
    static const lf_dtype its[2] = {LF_I32, LF_I64};
    static const lf_dtype wts[6] = {LF_NDTYPES, LF_BOOL, LF_I32, LF_I64, LF_F32, LF_F64};
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 6; b++) {
            lf_graph *gg = lf_graph_new(c);
            lf_node *x = lf_input(gg, tu_buf(c, LF_F64, 1, SH(4), V(0.1, 0.5, -0.001, 0.99)));
            lf_node *idx = lf_cast(gg, lf_map(gg, lf_fn_parse(gg, "(v) -> floor(v * 4)"), x), its[a]);
            lf_node *w = wts[b] == LF_NDTYPES ? NULL : lf_input(gg, tu_buf(c, wts[b], 1, SH(4), V(1, 1, 1, 1)));
            lf_node *h = lf_bincount(gg, idx, w, 4);
            cr_assert(h, "%s", lf_errmsg(c));
            lf_buffer *o = tu_buf(c, lf_node_dtype(h), 1, SH(4), V(7, 7, 7, 7));
            char want[160];
            snprintf(want, sizeof want,
                     "node %d (bincount %s[4]): negative value -1 at position [2] (bincount counts values 0 .. 3)", h->id,
                     lf_dtype_name(lf_node_dtype(h)));
            cr_expect_eq(lf_eval(gg, 1, &h, &o), LF_ERR_INDEX, "idx %s weights %s: %s", lf_dtype_name(its[a]),
                         w ? lf_dtype_name(wts[b]) : "none", lf_errmsg(c));
            cr_expect_str_eq(lf_errmsg(c), want);
            tu_expect("bincount output untouched", o, V(7, 7, 7, 7), 4, 0, 0);
            lf_buffer_free(o);
            lf_graph_free(gg);
        }
    /* a large computed index: the lowest bad position wins (a negative
       value after a too-large one, and the other way round) */
    int64_t n = 300000;
    double *xv = malloc(sizeof(double) * (size_t)n);
    cr_assert(xv);
    for (int64_t k = 0; k < n; k++) xv[k] = (double)((k * 7919) % 1000) / 1000.0;
    for (int order = 0; order < 2; order++) {
        xv[order ? 250000 : 200001] = 1.5, xv[order ? 200001 : 250000] = -0.5;
        lf_graph *gg = lf_graph_new(c);
        lf_node *x = lf_input(gg, tu_buf(c, LF_F32, 1, &n, xv));
        lf_node *h = lf_bincount(gg, lf_cast(gg, lf_map(gg, lf_fn_parse(gg, "(v) -> floor(v * 256)"), x), LF_I32), x, 256);
        cr_assert(h, "%s", lf_errmsg(c));
        double seven[256];
        for (int k = 0; k < 256; k++) seven[k] = 7;
        lf_buffer *o = tu_buf(c, LF_F32, 1, SH(256), seven);
        char want[160];
        if (order) snprintf(want, sizeof want, "node %d (bincount f32[256]): negative value -128 at position [200001] (bincount counts values 0 .. 255)", h->id);
        else snprintf(want, sizeof want, "node %d (bincount f32[256]): index 384 out of range for axis 0 of size 256 at position [200001]", h->id);
        cr_expect_eq(lf_eval(gg, 1, &h, &o), LF_ERR_INDEX);
        cr_expect_str_eq(lf_errmsg(c), want);
        tu_expect("histogram untouched", o, seven, 256, 0, 0);
        lf_buffer_free(o);
        lf_graph_free(gg);
    }
    free(xv);
    /* valid values count; -0.0 is bin 0 */
    lf_graph *gg = lf_graph_new(c);
    lf_node *x = lf_input(gg, tu_buf(c, LF_F64, 1, SH(5), V(0.1, 0.5, -0.0, 0.99, 0.3)));
    lf_node *h = lf_bincount(gg, lf_cast(gg, lf_map(gg, lf_fn_parse(gg, "(v) -> floor(v * 4)"), x), LF_I64), NULL, 4);
    cr_assert(h, "%s", lf_errmsg(c));
    lf_buffer *o = lf_buffer_new_like(c, h);
    cr_expect_eq(lf_eval(gg, 1, &h, &o), LF_OK, "%s", lf_errmsg(c));
    tu_expect("bincount of valid values", o, V(2, 1, 1, 1), 4, 0, 0);
    lf_buffer_free(o);
    lf_graph_free(gg);
}

Test(errors, bincount_negative_values) {
    bincount_negative_on(ctx); /* this run's backend (reference, cpu or cuda) */
    on_fresh_ctx(bincount_negative_on, LF_BACKEND_REFERENCE, 1, LF_COMPILE_AUTO);
    on_fresh_ctx(bincount_negative_on, LF_BACKEND_CPU, 0, LF_COMPILE_NEVER); /* the schedule interpreter */
    for (int threads = 1; threads <= 3; threads++)
        on_fresh_ctx(bincount_negative_on, LF_BACKEND_CPU, threads, LF_COMPILE_AUTO);
}

Test(errors, scatter_index_out_of_range) {
    scatter_index_errors_on(ctx);
    for (int threads = 1; threads <= 3; threads++)
        on_fresh_ctx(scatter_index_errors_on, LF_BACKEND_CPU, threads, LF_COMPILE_AUTO);
}

/* lf_scalar_set (lazyfuse.h): the exact messages; the graph does not fail,
 * and the value converts as lf_const converts it. */
Test(errors, scalar_set_arguments) {
    lf_graph *g1 = fresh(), *g2 = fresh();
    lf_node *c1 = lf_const(g1, LF_F32, 1.0), *c2 = lf_const(g2, LF_F32, 1.0);
    lf_node *x1 = lf_input(g1, tu_buf(ctx, LF_F32, 1, SH(3), V(1, 2, 3)));
    lf_node *y1 = lf_mul(g1, x1, c1);
    cr_assert(c1 && c2 && x1 && y1, "%s", lf_errmsg(ctx));

    cr_expect_eq(lf_scalar_set(NULL, c1, 2.0), LF_ERR_NULL);
    cr_expect_str_eq(lf_errmsg(NULL), "scalar_set: graph is NULL");
    cr_expect_eq(lf_scalar_set(g1, NULL, 2.0), LF_ERR_NULL);
    cr_expect_str_eq(lf_errmsg(ctx), "scalar_set: node is NULL");
    cr_expect_eq(lf_scalar_set(g1, c2, 2.0), LF_ERR_STATE);
    cr_expect_str_eq(lf_errmsg(ctx), "scalar_set: node belongs to another graph (or to a freed one)");
    cr_expect_eq(lf_scalar_set(g1, x1, 2.0), LF_ERR_INVALID);
    cr_expect_str_eq(lf_errmsg(ctx), "scalar_set: node 1 (input f32[3]) is not a constant (only lf_const and lf_fill nodes take a value)");
    cr_expect_eq(lf_scalar_set(g1, y1, 2.0), LF_ERR_INVALID);
    cr_expect_str_eq(lf_errmsg(ctx), "scalar_set: node 2 (mul f32[3]) is not a constant (only lf_const and lf_fill nodes take a value)");
    lf_node *v1 = lf_broadcast_to(g1, c1, 1, SH(3)); /* a view of a constant is not one */
    cr_expect_eq(lf_scalar_set(g1, v1, 2.0), LF_ERR_INVALID);
    cr_expect_eq(lf_graph_status(g1), LF_OK, "a refused scalar_set does not fail the graph");
    cr_expect_eq(lf_graph_status(g2), LF_OK);
    lf_buffer *o = tu_buf(ctx, LF_F32, 1, SH(3), NULL);
    cr_expect_eq(lf_eval(g1, 1, &y1, &o), LF_OK, "%s", lf_errmsg(ctx));
    tu_expect("value unchanged by the refused calls", o, V(1, 2, 3), 3, 0, 0);
    cr_expect_eq(lf_scalar_set(g1, c1, -0.5), LF_OK, "%s", lf_errmsg(ctx));
    cr_expect_eq(lf_eval(g1, 1, &y1, &o), LF_OK, "%s", lf_errmsg(ctx));
    tu_expect("new value", o, V(-0.5, -1, -1.5), 3, 0, 0);

    /* conversions: as lf_const (a cast of the double) */
    lf_graph *g3 = fresh();
    lf_node *ci = lf_const(g3, LF_I32, 0), *cb = lf_const(g3, LF_BOOL, 0), *cf = lf_const(g3, LF_F32, 0);
    lf_node *fi = lf_fill(g3, LF_I64, 0, 1, SH(2));
    struct { double v; double i32, b, f32, i64; } cases[] = {
        {2.7, 2, 1, (float)2.7, 2},   {-2.7, -2, 1, (float)-2.7, -2},
        {NAN, 0, 1, NAN, 0},          {1e20, 2147483647, 1, (float)1e20, 9223372036854775807.0},
        {-0.0, 0, 0, -0.0, 0},        {-INFINITY, -2147483648.0, 1, -INFINITY, -9223372036854775808.0},
        {0.1, 0, 1, (float)0.1, 0},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        cr_assert_eq(lf_scalar_set(g3, ci, cases[k].v), LF_OK);
        cr_assert_eq(lf_scalar_set(g3, cb, cases[k].v), LF_OK);
        cr_assert_eq(lf_scalar_set(g3, cf, cases[k].v), LF_OK);
        cr_assert_eq(lf_scalar_set(g3, fi, cases[k].v), LF_OK);
        lf_node *again[4] = {lf_const(g3, LF_I32, cases[k].v), lf_const(g3, LF_BOOL, cases[k].v),
                             lf_const(g3, LF_F32, cases[k].v), lf_fill(g3, LF_I64, cases[k].v, 1, SH(2))};
        lf_node *set[4] = {ci, cb, cf, fi};
        double want[4] = {cases[k].i32, cases[k].b, cases[k].f32, cases[k].i64};
        for (int j = 0; j < 4; j++) {
            lf_buffer *a = tu_eval1(ctx, g3, set[j]), *b = tu_eval1(ctx, g3, again[j]);
            double va[2], vb[2];
            tu_read(a, va);
            tu_read(b, vb);
            cr_expect(memcmp(&va[0], &vb[0], sizeof va[0]) == 0 || (isnan(va[0]) && isnan(vb[0])),
                      "value %g, node %d: scalar_set gives %g, lf_const %g", cases[k].v, j, va[0], vb[0]);
            cr_expect(va[0] == want[j] || (isnan(va[0]) && isnan(want[j])), "value %g, node %d: %g, want %g",
                      cases[k].v, j, va[0], want[j]);
            if (j == 2) cr_expect_eq(!!signbit(va[0]), !!signbit(want[j]), "the sign of %g", cases[k].v);
            lf_buffer_free(a);
            lf_buffer_free(b);
        }
    }

    /* a failed graph: its first error, nothing done */
    lf_graph *g4 = fresh();
    lf_node *c4 = lf_const(g4, LF_F32, 1.0);
    cr_expect_null(lf_reshape(g4, c4, 1, SH(5)));
    lf_status first = lf_graph_status(g4);
    cr_expect_neq(first, LF_OK);
    cr_expect_eq(lf_scalar_set(g4, c4, 3.0), first);
    cr_expect_eq(lf_graph_status(g4), first);
}

/* ---- sort, argsort, topk ------------------------------------------------------------------ */

Test(errors, sort_bad_arguments) {
    static const char *const names[2] = {"sort", "argsort"};
    for (int w = 0; w < 2; w++) {
        lf_node *(*call)(lf_graph *, lf_node *, int, bool) = w ? lf_argsort : lf_sort;
        char want[128];
        lf_graph *gg = fresh();
        lf_node *x = fill(gg, LF_F32, 2, SH(3, 5));
        cr_expect_null(call(gg, x, 2, false));
        snprintf(want, sizeof want, "%s: axis 2 out of range for 2 dimensions", names[w]);
        cr_expect_eq(lf_graph_status(gg), LF_ERR_AXIS);
        cr_expect_str_eq(lf_errmsg(ctx), want);
        cr_expect_str_eq(lf_graph_errmsg(gg), want);
        /* sticky: a good call still fails with the first error */
        cr_expect_null(call(gg, x, 1, true));
        cr_expect_eq(lf_graph_status(gg), LF_ERR_AXIS);
        cr_expect_str_eq(lf_graph_errmsg(gg), want);
        gg = fresh();
        cr_expect_null(call(gg, fill(gg, LF_I32, 2, SH(3, 5)), -3, true));
        snprintf(want, sizeof want, "%s: axis -3 out of range for 2 dimensions", names[w]);
        cr_expect_eq(lf_graph_status(gg), LF_ERR_AXIS);
        cr_expect_str_eq(lf_errmsg(ctx), want);
        gg = fresh();
        cr_expect_null(call(gg, fill(gg, LF_F64, 0, NULL), 0, false));
        snprintf(want, sizeof want, "%s: axis 0 out of range for 0 dimensions", names[w]);
        cr_expect_eq(lf_graph_status(gg), LF_ERR_AXIS);
        cr_expect_str_eq(lf_errmsg(ctx), want);
        gg = fresh();
        cr_expect_null(call(gg, NULL, 0, false));
        snprintf(want, sizeof want, "%s: input 0 is NULL", names[w]);
        cr_expect_eq(lf_graph_status(gg), LF_ERR_NULL);
        cr_expect_str_eq(lf_errmsg(ctx), want);
        lf_graph *other = fresh();
        lf_node *y = fill(other, LF_F32, 1, SH(4));
        gg = fresh();
        cr_expect_null(call(gg, y, 0, false));
        snprintf(want, sizeof want, "%s: input 0 belongs to another graph (or to a freed one)", names[w]);
        cr_expect_eq(lf_graph_status(gg), LF_ERR_STATE);
        cr_expect_str_eq(lf_errmsg(ctx), want);
        cr_expect_eq(lf_graph_status(other), LF_OK, "the other graph is not failed");
        cr_expect_null(call(NULL, y, 0, false));
        snprintf(want, sizeof want, "%s: graph is NULL", names[w]);
        cr_expect_str_eq(lf_errmsg(NULL), want);
    }
}

Test(errors, topk_bad_arguments) {
    static const char *const names[2] = {"topk", "argtopk"};
    for (int w = 0; w < 2; w++) {
        lf_node *(*call)(lf_graph *, lf_node *, int64_t, int, bool) = w ? lf_argtopk : lf_topk;
        char want[128];
        /* k out of range: negative and past the extent; the axis in the message is normalized */
        lf_graph *gg = fresh();
        lf_node *x = fill(gg, LF_F32, 2, SH(3, 5));
        cr_expect_null(call(gg, x, 7, -1, true));
        snprintf(want, sizeof want, "%s: k = 7 out of range 0..5 for axis 1 of x [3,5]", names[w]);
        cr_expect_eq(lf_graph_status(gg), LF_ERR_SHAPE);
        cr_expect_str_eq(lf_errmsg(ctx), want);
        cr_expect_str_eq(lf_graph_errmsg(gg), want);
        /* sticky: a good call returns NULL, the first error stays */
        cr_expect_null(call(gg, x, 2, 1, true));
        cr_expect_null(lf_sort(gg, x, 0, false));
        cr_expect_str_eq(lf_graph_errmsg(gg), want);
        gg = fresh();
        x = fill(gg, LF_I64, 3, SH(2, 4, 6));
        cr_expect_null(call(gg, x, -1, 0, false));
        snprintf(want, sizeof want, "%s: k = -1 out of range 0..2 for axis 0 of x [2,4,6]", names[w]);
        cr_expect_str_eq(lf_errmsg(ctx), want);
        gg = fresh();
        x = fill(gg, LF_F32, 2, SH(3, 0));
        cr_expect_null(call(gg, x, 1, 1, false));
        snprintf(want, sizeof want, "%s: k = 1 out of range 0..0 for axis 1 of x [3,0]", names[w]);
        cr_expect_str_eq(lf_errmsg(ctx), want);
        /* valid edges: k = 0 and k = extent */
        gg = fresh();
        x = fill(gg, LF_F32, 2, SH(3, 5));
        lf_node *r = call(gg, x, 0, 1, true);
        cr_expect(r && lf_node_dim(r, 1) == 0);
        r = call(gg, x, 5, 1, false);
        cr_expect(r && lf_node_dim(r, 1) == 5 && lf_node_dtype(r) == (w ? LF_I64 : LF_F32));
        /* bad axis, 0-d x */
        gg = fresh();
        x = fill(gg, LF_F32, 2, SH(3, 5));
        cr_expect_null(call(gg, x, 1, 2, true));
        cr_expect_eq(lf_graph_status(gg), LF_ERR_AXIS);
        snprintf(want, sizeof want, "%s: axis 2 out of range for 2 dimensions", names[w]);
        cr_expect_str_eq(lf_errmsg(ctx), want);
        gg = fresh();
        cr_expect_null(call(gg, fill(gg, LF_F32, 2, SH(3, 5)), 1, -3, true));
        snprintf(want, sizeof want, "%s: axis -3 out of range for 2 dimensions", names[w]);
        cr_expect_str_eq(lf_errmsg(ctx), want);
        gg = fresh();
        cr_expect_null(call(gg, fill(gg, LF_F32, 0, NULL), 0, 0, true));
        snprintf(want, sizeof want, "%s: axis 0 out of range for 0 dimensions", names[w]);
        cr_expect_str_eq(lf_errmsg(ctx), want);
        /* NULL x, a node of another graph, NULL graph */
        gg = fresh();
        cr_expect_null(call(gg, NULL, 1, 0, true));
        cr_expect_eq(lf_graph_status(gg), LF_ERR_NULL);
        snprintf(want, sizeof want, "%s: input 0 is NULL", names[w]);
        cr_expect_str_eq(lf_errmsg(ctx), want);
        gg = fresh();
        cr_expect_null(call(gg, x, 1, 0, true));
        cr_expect_eq(lf_graph_status(gg), LF_ERR_STATE);
        snprintf(want, sizeof want, "%s: input 0 belongs to another graph (or to a freed one)", names[w]);
        cr_expect_str_eq(lf_errmsg(ctx), want);
        cr_expect_null(call(NULL, x, 1, 0, true));
        snprintf(want, sizeof want, "%s: graph is NULL", names[w]);
        cr_expect_str_eq(lf_errmsg(NULL), want);
        /* an eval of a failed graph reports the first error */
        gg = fresh();
        x = fill(gg, LF_F32, 1, SH(5));
        lf_node *s = lf_sort(gg, x, 0, false);
        cr_assert_not_null(s);
        cr_expect_null(call(gg, x, 9, 0, true));
        lf_buffer *b = lf_buffer_new(ctx, LF_F32, 1, SH(5));
        cr_expect_eq(lf_eval(gg, 1, &s, &b), LF_ERR_SHAPE);
        snprintf(want, sizeof want, "%s: k = 9 out of range 0..5 for axis 0 of x [5]", names[w]);
        cr_expect_str_eq(lf_errmsg(ctx), want);
        lf_buffer_free(b);
    }
}

/* ---- issue 26, item 6: messages name nodes a user can find ----------------- */

/* "node <id> (<op> <dtype><shape>)" into buf, for the expected messages. */
static const char *named(char *buf, size_t cap, const lf_node *n, const char *rest) {
    snprintf(buf, cap, "node %d (%s)", n->id, rest);
    return buf;
}

#define EXPECT_NAMED(st_want, call, n, rest)                                                                       \
    do {                                                                                                           \
        char w_[512];                                                                                              \
        lf_status st_ = (call);                                                                                    \
        cr_expect_eq(st_, st_want, "%s: %s: %s", #call, lf_status_name(st_), lf_errmsg(ctx));                     \
        cr_expect(strstr(lf_errmsg(ctx), named(w_, sizeof w_, n, rest)) != NULL, "want \"%s\" in: %s", w_,        \
                  lf_errmsg(ctx));                                                                                 \
        cr_expect(!strstr(lf_errmsg(ctx), " n0") && !strstr(lf_errmsg(ctx), "n1:"), "an n<id> in: %s",            \
                  lf_errmsg(ctx));                                                                                 \
    } while (0)

/* Failing calls of every kind that names a node: the operation as the user
 * wrote it (builder or operator), dtype and shape, and a parsed fn's text. */
Test(errors, messages_name_nodes_by_op_dtype_shape) {
    lf_graph *g = fresh();
    static double zeros[3000];
    lf_node *a = lf_input(g, tu_buf(ctx, LF_F32, 2, SH(1000, 3), zeros));
    lf_node *b = lf_input(g, tu_buf(ctx, LF_F32, 2, SH(1000, 3), zeros));
    lf_node *y = lf_add(g, a, b);
    lf_node *m = lf_map(g, lf_fn_parse(g, "(x) -> x * 2 + sin(x) - cos(x) * 3.5 + tan(x) / 7"), a);
    lf_node *m2 = lf_map(g, lf_fn_parse(g, "(x) ->\n\tx\n   + 1"), a);
    lf_node *r = lf_reduce(g, LF_RED_SUM, y, 1, (int[]){0}, false);
    lf_node *k = lf_cast(g, y, LF_I32);
    lf_node *sl = lf_slice(g, y, 0, 0, 10, 1);
    lf_node *sel = lf_select(g, lf_lt(g, a, b), a, b);
    cr_assert(y && m && m2 && r && k && sl && sel, "%s", lf_errmsg(ctx));
    lf_buffer *f64 = tu_buf(ctx, LF_F64, 2, SH(1000, 3), zeros), *flat = tu_buf(ctx, LF_F32, 1, SH(3000), zeros);
    /* dtype and shape mismatches of an output */
    EXPECT_NAMED(LF_ERR_DTYPE, lf_eval(g, 1, &y, &f64), y, "add f32[1000,3]");
    EXPECT_NAMED(LF_ERR_SHAPE, lf_eval(g, 1, &y, &flat), y, "add f32[1000,3]");
    EXPECT_NAMED(LF_ERR_DTYPE, lf_eval(g, 1, &m, &f64), m,
                 "map f32[1000,3] \"(x) -> x * 2 + sin(x) - cos(x) * 3.5 + t...\"");
    EXPECT_NAMED(LF_ERR_DTYPE, lf_eval(g, 1, &m2, &f64), m2, "map f32[1000,3] \"(x) -> x + 1\"");
    EXPECT_NAMED(LF_ERR_SHAPE, lf_eval(g, 1, &r, &flat), r, "reduce sum f32[3]");
    EXPECT_NAMED(LF_ERR_DTYPE, lf_eval(g, 1, &k, &f64), k, "cast i32[1000,3]");
    EXPECT_NAMED(LF_ERR_SHAPE, lf_eval(g, 1, &sl, &flat), sl, "slice f32[10,3]");
    EXPECT_NAMED(LF_ERR_DTYPE, lf_eval(g, 1, &sel, &f64), sel, "select f32[1000,3]");
    /* a constant wanted */
    EXPECT_NAMED(LF_ERR_INVALID, lf_scalar_set(g, y, 2.0), y, "add f32[1000,3]");
    /* an index out of range at eval */
    lf_graph *g2 = fresh();
    lf_node *x = lf_input(g2, tu_buf(ctx, LF_F64, 1, SH(4), V(1, 2, 3, 4)));
    lf_node *t = lf_gather(g2, x, 0, lf_input(g2, tu_buf(ctx, LF_I64, 1, SH(2), V(1, 7))));
    lf_node *sc = lf_scatter(g2, LF_SCATTER_MAX, x, 0, lf_input(g2, tu_buf(ctx, LF_I32, 1, SH(2), V(9, 0))),
                             lf_const(g2, LF_F64, 5));
    cr_assert(t && sc, "%s", lf_errmsg(ctx));
    lf_buffer *o2 = tu_buf(ctx, LF_F64, 1, SH(2), V(0, 0)), *o4 = tu_buf(ctx, LF_F64, 1, SH(4), V(0, 0, 0, 0));
    EXPECT_NAMED(LF_ERR_INDEX, lf_eval(g2, 1, &t, &o2), t, "gather f64[2]");
    EXPECT_NAMED(LF_ERR_INDEX, lf_eval(g2, 1, &sc, &o4), sc, "scatter max f64[4]");
}

/* graph_node_str never writes past cap, always ends its text, cuts with
 * "...", and GRAPH_NODE_STR_CAP holds the longest name whole. */
Test(errors, node_names_are_bounded) {
    lf_graph *g = fresh();
    int64_t big[LF_MAX_DIMS];
    for (int d = 0; d < LF_MAX_DIMS; d++) big[d] = d == 0 ? 1000000007 : 1;
    lf_node *x = lf_fill(g, LF_F64, 0, LF_MAX_DIMS, big);
    lf_node *m = lf_map(g, lf_fn_parse(g, "(value_with_a_long_name) -> value_with_a_long_name * 2 + 1 + 2 + 3 + 4"), x);
    cr_assert(m, "%s", lf_graph_errmsg(g));
    char full[GRAPH_NODE_STR_CAP];
    graph_node_str(m, full, sizeof full);
    size_t n = strlen(full);
    cr_assert(n < sizeof full && full[n - 1] == ')' && !strstr(full, "..\"...") && strstr(full, "1000000007,1,1"),
              "not whole: %s", full);
    cr_assert(strstr(full, "...\")"), "a long source is cut to 40 bytes and \"...\": %s", full);
    for (size_t cap = 1; cap <= n + 1; cap++) {
        char buf[GRAPH_NODE_STR_CAP + 16];
        memset(buf, '#', sizeof buf);
        graph_node_str(m, buf, cap);
        size_t l = strnlen(buf, cap);
        cr_assert_lt(l, cap, "cap %zu: not ended", cap);
        for (size_t i = cap; i < sizeof buf; i++) cr_assert_eq(buf[i], '#', "cap %zu: wrote byte %zu", cap, i);
        if (cap <= n) cr_assert(l < 3 || !strcmp(buf + l - 3, "..."), "cap %zu: cut without \"...\": %s", cap, buf);
        else cr_assert_str_eq(buf, full);
    }
    cr_assert_str_eq(graph_node_str(NULL, full, sizeof full), "node ?");
}

/* lf_pad and lf_concat: each bad call fails a fresh graph with its status
 * and a message naming the node as graph_node_str does. */
typedef lf_node *(*pad_case)(lf_graph *g, lf_node *x, lf_node *y);

static void expect_pad_error(const char *what, pad_case build, lf_status st, const char *msg) {
    lf_ctx *c = tu_ctx();
    lf_graph *gg = lf_graph_new(c);
    lf_node *x = lf_input(gg, tu_buf(c, LF_F32, 2, SH(2, 3), NULL));
    lf_node *y = lf_add(gg, x, x);
    cr_assert(x && y, "%s", lf_errmsg(c));
    cr_expect_null(build(gg, x, y), "%s: a node", what);
    cr_expect_eq(lf_graph_status(gg), st, "%s: status %s", what, lf_status_name(lf_graph_status(gg)));
    cr_expect_str_eq(lf_graph_errmsg(gg), msg, "%s", what);
    lf_graph_free(gg);
    lf_ctx_destroy(c);
}

static lf_node *pad_negative(lf_graph *g, lf_node *x, lf_node *y) {
    (void)x;
    return lf_pad(g, y, SH(0, 1), SH(-2, 0), LF_PAD_EDGE, 0);
}
static lf_node *pad_null_widths(lf_graph *g, lf_node *x, lf_node *y) {
    (void)y;
    return lf_pad(g, x, NULL, SH(0, 0), LF_PAD_CONSTANT, 0);
}
static lf_node *pad_null_node(lf_graph *g, lf_node *x, lf_node *y) {
    (void)x, (void)y;
    return lf_pad(g, NULL, SH(0, 0), SH(0, 0), LF_PAD_CONSTANT, 0);
}
static lf_node *pad_bad_mode(lf_graph *g, lf_node *x, lf_node *y) {
    (void)y;
    return lf_pad(g, x, SH(1, 1), SH(1, 1), (lf_pad_mode)7, 0);
}
static lf_node *pad_empty_axis(lf_graph *g, lf_node *x, lf_node *y) {
    (void)y;
    lf_node *e = lf_slice(g, x, 1, 0, 0, 1);
    return lf_pad(g, e, SH(0, 1), SH(0, 0), LF_PAD_REFLECT, 0);
}
static lf_node *pad_overflow(lf_graph *g, lf_node *x, lf_node *y) {
    (void)y;
    return lf_pad(g, x, SH(INT64_MAX, 0), SH(0, 0), LF_PAD_CONSTANT, 0);
}
static lf_node *concat_mismatch(lf_graph *g, lf_node *x, lf_node *y) {
    return lf_concat(g, 2, (lf_node *[]){x, lf_transpose(g, y)}, 0);
}
static lf_node *concat_ranks(lf_graph *g, lf_node *x, lf_node *y) {
    return lf_concat(g, 2, (lf_node *[]){x, lf_reshape(g, y, 1, SH(6))}, 1);
}
static lf_node *concat_axis(lf_graph *g, lf_node *x, lf_node *y) {
    return lf_concat(g, 2, (lf_node *[]){x, y}, -3);
}
static lf_node *concat_count(lf_graph *g, lf_node *x, lf_node *y) {
    (void)y;
    lf_node *xs[LF_CONCAT_MAX + 1];
    for (int i = 0; i <= LF_CONCAT_MAX; i++) xs[i] = x;
    return lf_concat(g, LF_CONCAT_MAX + 1, xs, 0);
}
static lf_node *concat_zero(lf_graph *g, lf_node *x, lf_node *y) {
    (void)x, (void)y;
    return lf_concat(g, 0, NULL, 0);
}
static lf_node *concat_null_piece(lf_graph *g, lf_node *x, lf_node *y) {
    (void)y;
    return lf_concat(g, 2, (lf_node *[]){x, NULL}, 0);
}
static lf_node *concat_null_array(lf_graph *g, lf_node *x, lf_node *y) {
    (void)x, (void)y;
    return lf_concat(g, 2, NULL, 0);
}
static lf_node *concat_scalar(lf_graph *g, lf_node *x, lf_node *y) {
    (void)x, (void)y;
    lf_node *c = lf_const(g, LF_F32, 1);
    return lf_concat(g, 2, (lf_node *[]){c, c}, 0);
}

Test(errors, pad_and_concat_arguments) {
    expect_pad_error("negative width", pad_negative, LF_ERR_SHAPE,
                     "pad: negative width -2 after axis 0 of node 1 (add f32[2,3])");
    expect_pad_error("NULL before", pad_null_widths, LF_ERR_NULL, "pad: before is NULL for node 0 (input f32[2,3])");
    expect_pad_error("NULL node", pad_null_node, LF_ERR_NULL, "pad: input 0 is NULL");
    expect_pad_error("unknown mode", pad_bad_mode, LF_ERR_INVALID,
                     "pad: unknown mode 7 (LF_PAD_CONSTANT, LF_PAD_EDGE or LF_PAD_REFLECT)");
    expect_pad_error("reflect of an empty axis", pad_empty_axis, LF_ERR_SHAPE,
                     "pad: cannot reflect-pad axis 1 of node 2 (slice f32[2,0]): the axis is empty");
    expect_pad_error("padded extent overflows", pad_overflow, LF_ERR_OVERFLOW,
                     "pad: axis 0 of node 0 (input f32[2,3]) padded by 9223372036854775807 and 0 overflows");
    expect_pad_error("extents differ", concat_mismatch, LF_ERR_SHAPE,
                     "concat: piece 1 node 2 (permute f32[3,2]) does not match piece 0 node 0 (input f32[2,3]) "
                     "except on axis 0");
    expect_pad_error("ranks differ", concat_ranks, LF_ERR_SHAPE,
                     "concat: piece 1 node 2 (reshape f32[6]) does not match piece 0 node 0 (input f32[2,3]) "
                     "except on axis 1");
    expect_pad_error("axis out of range", concat_axis, LF_ERR_AXIS, "concat: axis -3 out of range for 2 dimensions");
    expect_pad_error("too many pieces", concat_count, LF_ERR_SHAPE, "concat: 33 pieces (1 to 32)");
    expect_pad_error("no pieces", concat_zero, LF_ERR_SHAPE, "concat: 0 pieces (1 to 32)");
    expect_pad_error("a NULL piece", concat_null_piece, LF_ERR_NULL, "concat: input 1 is NULL");
    expect_pad_error("NULL pieces", concat_null_array, LF_ERR_NULL, "concat: xs is NULL");
    expect_pad_error("0-d pieces", concat_scalar, LF_ERR_SHAPE,
                     "concat: piece 0 node 2 (const f32[]) is 0-d (pieces need at least one axis)");
    /* a NULL graph */
    cr_expect_null(lf_pad(NULL, NULL, NULL, NULL, LF_PAD_EDGE, 0));
    cr_expect_str_eq(lf_errmsg(NULL), "pad: graph is NULL");
    cr_expect_null(lf_concat(NULL, 1, NULL, 0));
    cr_expect_str_eq(lf_errmsg(NULL), "concat: graph is NULL");
}
