/* tests/test_scalar.c: scalar semantics and fn typing, below the graph.
 *
 * Checks graph/scalar.c (conversions, integer edge cases that would be
 * undefined behaviour in plain C, float corner cases) and graph/fn.c (weak
 * literal typing, hash-consing, structural equality, builder errors) and the
 * dtype table (graph/dtype.c: the rows' consistency, promotion as a join),
 * using the internal header.
 */
#include "testutil.h"
#include "graph/graph.h"

#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

static lf_scalar I(int64_t v) { return (lf_scalar){.i = v}; }
static lf_scalar F(double v) { return (lf_scalar){.f = v}; }

Test(scalar, float_to_int_casts_saturate_and_send_nan_to_zero) {
    cr_assert_eq(graph_scalar_convert(F(NAN), LF_F64, LF_I32).i, 0);
    cr_assert_eq(graph_scalar_convert(F(1e30), LF_F64, LF_I32).i, INT32_MAX);
    cr_assert_eq(graph_scalar_convert(F(-1e30), LF_F64, LF_I32).i, INT32_MIN);
    cr_assert_eq(graph_scalar_convert(F(INFINITY), LF_F64, LF_I64).i, INT64_MAX);
    cr_assert_eq(graph_scalar_convert(F(-INFINITY), LF_F64, LF_I64).i, INT64_MIN);
    cr_assert_eq(graph_scalar_convert(F(-2.9), LF_F64, LF_I32).i, -2);
    cr_assert_eq(graph_scalar_convert(F(2147483647.5), LF_F64, LF_I32).i, INT32_MAX);
    cr_assert_eq(graph_scalar_convert(F(NAN), LF_F64, LF_BOOL).i, 1);
    cr_assert_eq(graph_scalar_convert(F(-0.0), LF_F64, LF_BOOL).i, 0);
}

Test(scalar, int_conversions_wrap_and_f32_rounds) {
    cr_assert_eq(graph_scalar_convert(I(INT64_C(0x100000005)), LF_I64, LF_I32).i, 5);
    cr_assert_eq(graph_scalar_convert(I(INT64_C(0x80000000)), LF_I64, LF_I32).i, INT32_MIN);
    cr_assert_eq(graph_scalar_convert(I(-7), LF_I64, LF_BOOL).i, 1);
    cr_assert_eq(graph_scalar_convert(F(0.1), LF_F64, LF_F32).f, (double)0.1f);
    cr_assert_eq(graph_scalar_convert(I((1 << 24) + 1), LF_I64, LF_F32).f, (double)(1 << 24));
}

Test(scalar, integer_edge_cases_have_no_undefined_behaviour) {
    /* each of these is UB in plain C; lazyfuse defines them */
    cr_assert_eq(graph_scalar_apply(LF_OP_ADD, LF_I64, I(INT64_MAX), I(1), I(0)).i, INT64_MIN);
    cr_assert_eq(graph_scalar_apply(LF_OP_ADD, LF_I32, I(INT32_MAX), I(1), I(0)).i, INT32_MIN);
    cr_assert_eq(graph_scalar_apply(LF_OP_MUL, LF_I64, I(INT64_MIN), I(-1), I(0)).i, INT64_MIN);
    cr_assert_eq(graph_scalar_apply(LF_OP_NEG, LF_I32, I(INT32_MIN), I(0), I(0)).i, INT32_MIN);
    cr_assert_eq(graph_scalar_apply(LF_OP_ABS, LF_I64, I(INT64_MIN), I(0), I(0)).i, INT64_MIN);
    cr_assert_eq(graph_scalar_apply(LF_OP_MOD, LF_I64, I(INT64_MIN), I(-1), I(0)).i, 0);
    cr_assert_eq(graph_scalar_apply(LF_OP_MOD, LF_I32, I(5), I(0), I(0)).i, 0);
    cr_assert_eq(graph_scalar_apply(LF_OP_MOD, LF_I32, I(-7), I(3), I(0)).i, 2);
    cr_assert_eq(graph_scalar_apply(LF_OP_MOD, LF_I32, I(7), I(-3), I(0)).i, -2);
    cr_assert_eq(graph_scalar_apply(LF_OP_POW, LF_I64, I(3), I(4), I(0)).i, 81);
    cr_assert_eq(graph_scalar_apply(LF_OP_POW, LF_I64, I(2), I(-1), I(0)).i, 0);
    cr_assert_eq(graph_scalar_apply(LF_OP_POW, LF_I64, I(-1), I(-3), I(0)).i, -1);
    cr_assert_eq(graph_scalar_apply(LF_OP_POW, LF_I32, I(2), I(31), I(0)).i, INT32_MIN);
    cr_assert_eq(graph_scalar_apply(LF_OP_POW, LF_I64, I(7), I(INT64_MAX), I(0)).i,
                 graph_scalar_apply(LF_OP_POW, LF_I64, I(7), I(INT64_MAX), I(0)).i);
}

/* fmod (issue 14): C's, the dividend's sign, where % takes the divisor's;
 * the inverse hyperbolics are libm's. */
Test(scalar, fmod_and_inverse_hyperbolics) {
    cr_assert_eq(graph_scalar_apply(LF_OP_FMOD, LF_F64, F(-7), F(3), F(0)).f, -1.0);
    cr_assert_eq(graph_scalar_apply(LF_OP_FMOD, LF_F64, F(7), F(-3), F(0)).f, 1.0);
    cr_assert(signbit(graph_scalar_apply(LF_OP_FMOD, LF_F64, F(-6), F(3), F(0)).f));
    cr_assert(isnan(graph_scalar_apply(LF_OP_FMOD, LF_F64, F(1), F(0), F(0)).f));
    cr_assert_eq(graph_scalar_apply(LF_OP_FMOD, LF_F32, F(-7.5), F(2), F(0)).f, -1.5);
    cr_assert_eq(graph_scalar_apply(LF_OP_FMOD, LF_I32, I(-7), I(3), I(0)).i, -1);
    cr_assert_eq(graph_scalar_apply(LF_OP_FMOD, LF_I32, I(7), I(-3), I(0)).i, 1);
    cr_assert_eq(graph_scalar_apply(LF_OP_FMOD, LF_I32, I(5), I(0), I(0)).i, 0);
    cr_assert_eq(graph_scalar_apply(LF_OP_FMOD, LF_I64, I(INT64_MIN), I(-1), I(0)).i, 0);
    cr_assert_eq(graph_scalar_apply(LF_OP_ASINH, LF_F64, F(-1), F(0), F(0)).f, asinh(-1.0));
    cr_assert_eq(graph_scalar_apply(LF_OP_ACOSH, LF_F64, F(1), F(0), F(0)).f, 0.0);
    cr_assert(isnan(graph_scalar_apply(LF_OP_ACOSH, LF_F64, F(0.5), F(0), F(0)).f));
    cr_assert_eq(graph_scalar_apply(LF_OP_ATANH, LF_F32, F(1), F(0), F(0)).f, INFINITY);
    cr_assert_eq(graph_scalar_apply(LF_OP_ATANH, LF_F32, F(0.5), F(0), F(0)).f, (double)atanhf(0.5f));
    cr_assert_str_eq(lf_op_name(LF_OP_FMOD), "fmod");
    cr_assert_eq(graph_ops[LF_OP_FMOD].typing, OPTY_ARITH);
    cr_assert_eq(graph_ops[LF_OP_ASINH].typing, OPTY_FLOAT);
}

Test(scalar, float_corner_cases) {
    cr_assert(isnan(graph_scalar_apply(LF_OP_MIN, LF_F64, F(NAN), F(1), F(0)).f));
    cr_assert(isnan(graph_scalar_apply(LF_OP_MAX, LF_F64, F(1), F(NAN), F(0)).f));
    cr_assert_eq(graph_scalar_apply(LF_OP_MOD, LF_F64, F(-7), F(3), F(0)).f, 2.0);
    cr_assert_eq(graph_scalar_apply(LF_OP_MOD, LF_F64, F(7), F(-3), F(0)).f, -2.0);
    cr_assert(signbit(graph_scalar_apply(LF_OP_MOD, LF_F64, F(6), F(-3), F(0)).f));
    cr_assert(isnan(graph_scalar_apply(LF_OP_MOD, LF_F64, F(1), F(0), F(0)).f));
    cr_assert_eq(graph_scalar_apply(LF_OP_ROUND, LF_F64, F(2.5), F(0), F(0)).f, 2.0);
    cr_assert_eq(graph_scalar_apply(LF_OP_ROUND, LF_F64, F(-1.5), F(0), F(0)).f, -2.0);
    cr_assert(isnan(graph_scalar_apply(LF_OP_SIGN, LF_F64, F(NAN), F(0), F(0)).f));
    cr_assert(!signbit(graph_scalar_apply(LF_OP_SIGN, LF_F64, F(-0.0), F(0), F(0)).f)); /* NumPy: sign(-0.0) is +0.0 */
    cr_assert(signbit(graph_scalar_apply(LF_OP_MIN, LF_F64, F(0.0), F(-0.0), F(0)).f)); /* NumPy: the second */
    cr_assert(!signbit(graph_scalar_apply(LF_OP_MAX, LF_F64, F(-0.0), F(0.0), F(0)).f));
    cr_assert_eq(graph_scalar_apply(LF_OP_SIGMOID, LF_F64, F(-INFINITY), F(0), F(0)).f, 0.0);
    cr_assert_eq(graph_scalar_apply(LF_OP_RSQRT, LF_F64, F(0.0), F(0), F(0)).f, INFINITY);
    /* f32 results are rounded to float after each operation */
    double third = graph_scalar_apply(LF_OP_DIV, LF_F32, F(1), F(3), F(0)).f;
    cr_assert_eq(third, (double)(1.0f / 3.0f));
    cr_assert_eq(graph_scalar_apply(LF_OP_ISNAN, LF_I32, I(5), F(0), F(0)).i, 0);
    cr_assert_eq(graph_scalar_apply(LF_OP_SIGNBIT, LF_F64, F(-NAN), F(0), F(0)).i, 1);
    cr_assert_eq(graph_scalar_apply(LF_OP_SIGNBIT, LF_F64, F(NAN), F(0), F(0)).i, 0);
    cr_assert_eq(graph_scalar_apply(LF_OP_SIGNBIT, LF_F32, F(-0.0), F(0), F(0)).i, 1);
    cr_assert_eq(graph_scalar_apply(LF_OP_SIGNBIT, LF_I32, I(-5), F(0), F(0)).i, 1);
    cr_assert_eq(graph_scalar_apply(LF_OP_SIGNBIT, LF_U64, I(-5), F(0), F(0)).i, 0); /* 2^64 - 5 */
    cr_assert_eq(graph_scalar_apply(LF_OP_NE, LF_F64, F(NAN), F(NAN), F(0)).i, 1);
    cr_assert_eq(graph_scalar_apply(LF_OP_EQ, LF_F64, F(NAN), F(NAN), F(0)).i, 0);
}

/* Result dtype of fn text applied to the given parameter dtypes. */
static lf_dtype type_of(const char *src, int n, const lf_dtype *params) {
    lf_ctx *ctx = tu_ctx();
    lf_graph *g = lf_graph_new(ctx);
    lf_fn *f = lf_fn_parse(g, src);
    cr_assert_not_null(f, "%s: %s", src, lf_errmsg(ctx));
    cr_assert_eq(lf_fn_arity(f), n);
    lf_dtype et[64], ct[64];
    cr_assert_leq(f->nexprs, 64);
    lf_dtype t = graph_fn_types(f, params, et, ct);
    lf_ctx_destroy(ctx);
    return t;
}

Test(scalar, weak_literals_take_the_strong_dtype) {
    lf_dtype f32 = LF_F32, i32 = LF_I32, b = LF_BOOL, i64 = LF_I64;
    cr_assert_eq(type_of("(x) -> x*0.5", 1, &f32), LF_F32);
    cr_assert_eq(type_of("(x) -> x*2", 1, &f32), LF_F32);
    cr_assert_eq(type_of("(x) -> x+1", 1, &i32), LF_I32);
    cr_assert_eq(type_of("(x) -> x*0.5", 1, &i32), LF_F64);
    cr_assert_eq(type_of("(x) -> x+1", 1, &b), LF_I64);
    cr_assert_eq(type_of("(x) -> x+x", 1, &b), LF_I32);
    cr_assert_eq(type_of("(x) -> x/2", 1, &i32), LF_F64);
    cr_assert_eq(type_of("(x) -> x/2", 1, &f32), LF_F32);
    cr_assert_eq(type_of("(x) -> exp(x)", 1, &i64), LF_F64);
    cr_assert_eq(type_of("(x) -> 2 + 3", 1, &f32), LF_I64);
    cr_assert_eq(type_of("(x) -> 2 + 3.0", 1, &f32), LF_F64);
    cr_assert_eq(type_of("(x) -> x < 1", 1, &f32), LF_BOOL);
    cr_assert_eq(type_of("(x) -> where(x > 0, x, 0)", 1, &f32), LF_F32);
    cr_assert_eq(type_of("(x) -> where(x > 0, 1, 0)", 1, &f32), LF_I64);
    cr_assert_eq(type_of("(x) -> f32(x) * 2.0", 1, &i64), LF_F32);
    cr_assert_eq(type_of("(x) -> abs(x)", 1, &b), LF_BOOL);
    lf_dtype mixed[2] = {LF_I32, LF_F32};
    cr_assert_eq(type_of("(a, b) -> a + b", 2, mixed), LF_F64);
    cr_assert_eq(type_of("(a, b) -> a < b", 2, mixed), LF_BOOL);
}

Test(scalar, hash_consing_stores_each_expression_once) {
    lf_ctx *ctx = tu_ctx();
    lf_graph *g = lf_graph_new(ctx);
    lf_fn *f = lf_fn_new(g, 2);
    int x = lf_fn_param(f, 0), y = lf_fn_param(f, 1);
    int a = lf_fn_op(f, LF_OP_ADD, x, y, -1);
    int b = lf_fn_op(f, LF_OP_ADD, x, y, -1);
    cr_assert_eq(a, b);
    cr_assert_eq(lf_fn_param(f, 0), x);
    cr_assert_neq(lf_fn_op(f, LF_OP_ADD, y, x, -1), a, "operand order matters");
    cr_assert_eq(lf_fn_const(f, 2.0), lf_fn_const(f, 2.0));
    cr_assert_neq(lf_fn_const(f, 2.0), lf_fn_const_int(f, 2), "int and float literals differ");
    cr_assert_neq(lf_fn_const(f, 0.0), lf_fn_const(f, -0.0));
    cr_assert_eq(lf_fn_const(f, NAN), lf_fn_const(f, NAN));
    int before = f->nexprs;
    /* a long chain: CSE keeps the table exact through several rehashes */
    int e = a;
    for (int i = 0; i < 500; i++) e = lf_fn_op(f, LF_OP_MUL, e, lf_fn_const_int(f, i % 7), -1);
    int e2 = a;
    for (int i = 0; i < 500; i++) e2 = lf_fn_op(f, LF_OP_MUL, e2, lf_fn_const_int(f, i % 7), -1);
    cr_assert_eq(e, e2);
    cr_assert_eq(f->nexprs, before + 500 + 7 - (lf_fn_const_int(f, 2) < before ? 1 : 0));
    cr_assert_eq(lf_fn_set_result(f, e), LF_OK);
    lf_ctx_destroy(ctx);
}

Test(scalar, fn_equal_is_structural) {
    lf_ctx *ctx = tu_ctx();
    lf_graph *g = lf_graph_new(ctx);
    lf_fn *a = lf_fn_parse(g, "(x, y) -> sin(x) * sin(x) + y");
    lf_fn *b = lf_fn_new(g, 2);
    int s = lf_fn_op(b, LF_OP_SIN, lf_fn_param(b, 0), -1, -1);
    lf_fn_set_result(b, lf_fn_op(b, LF_OP_ADD, lf_fn_op(b, LF_OP_MUL, s, s, -1),
                                 lf_fn_param(b, 1), -1));
    cr_assert(lf_fn_equal(a, b));
    cr_assert(lf_fn_equal(b, a));
    lf_fn *c = lf_fn_parse(g, "(x, y) -> sin(y) * sin(y) + x");
    cr_assert_not(lf_fn_equal(a, c));
    lf_fn *d = lf_fn_parse(g, "(p, q) -> sin(p) * sin(p) + q");
    cr_assert(lf_fn_equal(a, d), "parameter names are ignored");
    cr_assert_not(lf_fn_equal(a, NULL));
    lf_ctx_destroy(ctx);
}

Test(scalar, builder_errors_are_recorded_and_sticky) {
    lf_ctx *ctx = tu_ctx();
    lf_graph *g = lf_graph_new(ctx);
    lf_fn *f = lf_fn_new(g, 1);
    int x = lf_fn_param(f, 0);
    cr_assert_eq(lf_fn_op(f, LF_OP_ADD, x, -1, -1), -1);
    cr_assert_eq(lf_graph_status(g), LF_ERR_INVALID);
    cr_assert_str_eq(lf_errmsg(ctx), "fn_op '+': operand 2 is missing (id -1; fn has 1 expression)");
    cr_assert_eq(lf_fn_param(f, 0), -1, "sticky: later builder calls fail");
    cr_assert_eq(lf_fn_set_result(f, x), LF_ERR_INVALID);
    cr_assert_null(lf_fn_new(g, 1));
    lf_ctx_destroy(ctx);

    ctx = tu_ctx();
    g = lf_graph_new(ctx);
    cr_assert_null(lf_fn_new(g, 9));
    cr_assert_eq(lf_graph_status(g), LF_ERR_ARITY);
    cr_assert_str_eq(lf_graph_errmsg(g), "fn_new: 9 parameters (0 to 8 allowed)");
    lf_ctx_destroy(ctx);

    ctx = tu_ctx();
    g = lf_graph_new(ctx);
    f = lf_fn_new(g, 1);
    cr_assert_eq(lf_fn_op(f, (lf_op)999, 0, -1, -1), -1);
    cr_assert_str_eq(lf_errmsg(ctx), "fn_op: unknown operator 999");
    lf_ctx_destroy(ctx);

    ctx = tu_ctx();
    g = lf_graph_new(ctx);
    f = lf_fn_new(g, 2);
    cr_assert_eq(lf_fn_param(f, 2), -1);
    cr_assert_str_eq(lf_errmsg(ctx), "fn_param: parameter 2 out of range (fn has 2)");
    lf_ctx_destroy(ctx);

    ctx = tu_ctx();
    g = lf_graph_new(ctx);
    f = lf_fn_new(g, 1);
    x = lf_fn_param(f, 0);
    cr_assert_eq(lf_fn_set_result(f, x), LF_OK);
    cr_assert_eq(lf_fn_set_result(f, x), LF_ERR_STATE);
    lf_fn *unfinished = lf_fn_new(NULL, 1);
    cr_assert_null(unfinished);
    cr_assert_str_eq(lf_errmsg(NULL), "fn_new: graph is NULL");
    lf_ctx_destroy(ctx);
}

Test(scalar, op_table_is_consistent) {
    for (int op = 0; op < LF_NOPS; op++) {
        cr_assert(graph_ops[op].text && graph_ops[op].text[0], "op %d has no text", op);
        cr_assert(graph_ops[op].arity >= 1 && graph_ops[op].arity <= 3);
        if (graph_ops[op].syntax == OPSYN_INFIX) cr_assert_eq(graph_ops[op].arity, 2);
        if (graph_ops[op].syntax == OPSYN_PREFIX) cr_assert_eq(graph_ops[op].arity, 1);
        cr_assert_str_eq(lf_op_name((lf_op)op), graph_ops[op].text);
    }
    cr_assert_str_eq(lf_reduce_op_name(LF_RED_ARGMAX), "argmax");
    cr_assert_str_eq(lf_op_name((lf_op)-1), "?");
}

/* ---- integer operators (issue 13): // & | ^ ~ << >> ------------------------------------ */

static int64_t ap(lf_op op, lf_dtype t, int64_t a, int64_t b) {
    return graph_scalar_apply(op, t, I(a), I(b), I(0)).i;
}

Test(scalar, integer_floor_division) {
    static const struct { lf_dtype t; int64_t a, b, want; } c[] = {
        {LF_I32, 7, 2, 3},          {LF_I32, -7, 2, -4},       {LF_I32, 7, -2, -4},
        {LF_I32, -7, -2, 3},        {LF_I32, 6, -3, -2},       {LF_I32, -6, 3, -2},
        {LF_I32, 0, -5, 0},         {LF_I32, 5, 0, 0},         {LF_I32, -5, 0, 0},
        {LF_I32, 0, 0, 0},          {LF_I32, INT32_MIN, -1, INT32_MIN},
        {LF_I32, INT32_MIN, 1, INT32_MIN}, {LF_I32, INT32_MAX, -1, -INT32_MAX},
        {LF_I32, INT32_MIN, 2, INT32_MIN / 2}, {LF_I32, INT32_MIN, 3, -715827883},
        {LF_I32, INT32_MAX, INT32_MIN, -1}, {LF_I32, INT32_MIN, INT32_MAX, -2},
        {LF_I64, INT64_MIN, -1, INT64_MIN}, {LF_I64, INT64_MIN, 0, 0},
        {LF_I64, INT64_MAX, 2, INT64_MAX / 2}, {LF_I64, -INT64_MAX, 2, INT64_MIN / 2},
        {LF_I64, -1, INT64_MAX, -1}, {LF_I64, 1, INT64_MIN, -1}, {LF_I64, -1, INT64_MIN, 0},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++)
        cr_expect_eq(ap(LF_OP_FLOORDIV, c[i].t, c[i].a, c[i].b), c[i].want,
                     "%s: %lld // %lld = %lld, want %lld", lf_dtype_name(c[i].t),
                     (long long)c[i].a, (long long)c[i].b,
                     (long long)ap(LF_OP_FLOORDIV, c[i].t, c[i].a, c[i].b), (long long)c[i].want);
    /* x == (x // y)*y + x % y whenever y != 0 (Python's identity) */
    static const int64_t v[] = {0, 1, -1, 2, -2, 7, -7, 100, -100, INT32_MAX, INT32_MIN + 1};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        for (size_t j = 0; j < sizeof v / sizeof v[0]; j++) {
            if (v[j] == 0) continue;
            int64_t q = ap(LF_OP_FLOORDIV, LF_I64, v[i], v[j]), r = ap(LF_OP_MOD, LF_I64, v[i], v[j]);
            cr_expect_eq(q * v[j] + r, v[i], "%lld, %lld", (long long)v[i], (long long)v[j]);
        }
}

Test(scalar, bitwise_and_or_xor_not) {
    static const struct { lf_op op; lf_dtype t; int64_t a, b, want; } c[] = {
        {LF_OP_BITAND, LF_I32, 12, 10, 8},   {LF_OP_BITOR, LF_I32, 12, 10, 14},
        {LF_OP_BITXOR, LF_I32, 12, 10, 6},   {LF_OP_BITNOT, LF_I32, 12, 0, -13},
        {LF_OP_BITAND, LF_I32, -1, 0x55, 0x55}, {LF_OP_BITOR, LF_I32, INT32_MIN, 1, INT32_MIN + 1},
        {LF_OP_BITXOR, LF_I32, -1, INT32_MAX, INT32_MIN}, {LF_OP_BITNOT, LF_I32, INT32_MIN, 0, INT32_MAX},
        {LF_OP_BITNOT, LF_I32, -1, 0, 0},    {LF_OP_BITNOT, LF_I64, INT64_MAX, 0, INT64_MIN},
        {LF_OP_BITAND, LF_I64, INT64_MIN, -1, INT64_MIN}, {LF_OP_BITXOR, LF_I64, -2, 1, -1},
        {LF_OP_BITAND, LF_I64, INT64_C(0x123456789), INT64_C(0xff00000000), INT64_C(0x100000000)},
        /* bool: logical, 0 or 1 */
        {LF_OP_BITAND, LF_BOOL, 1, 1, 1},    {LF_OP_BITAND, LF_BOOL, 1, 0, 0},
        {LF_OP_BITOR, LF_BOOL, 0, 0, 0},     {LF_OP_BITOR, LF_BOOL, 0, 1, 1},
        {LF_OP_BITXOR, LF_BOOL, 1, 1, 0},    {LF_OP_BITXOR, LF_BOOL, 1, 0, 1},
        {LF_OP_BITNOT, LF_BOOL, 1, 0, 0},    {LF_OP_BITNOT, LF_BOOL, 0, 0, 1},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++)
        cr_expect_eq(ap(c[i].op, c[i].t, c[i].a, c[i].b), c[i].want, "%s %s on %lld, %lld",
                     graph_ops[c[i].op].text, lf_dtype_name(c[i].t), (long long)c[i].a,
                     (long long)c[i].b);
}

/* NumPy's npy_lshift / npy_rshift: counts outside [0, width) give 0, or -1
 * for >> of a negative value; never C's undefined behaviour. */
Test(scalar, shifts_at_every_count) {
    static const struct { lf_op op; lf_dtype t; int64_t a, b, want; } c[] = {
        {LF_OP_LSHIFT, LF_I32, 1, 0, 1},       {LF_OP_LSHIFT, LF_I32, 1, 31, INT32_MIN},
        {LF_OP_LSHIFT, LF_I32, 3, 31, INT32_MIN}, {LF_OP_LSHIFT, LF_I32, -1, 4, -16},
        {LF_OP_LSHIFT, LF_I32, INT32_MIN, 1, 0}, {LF_OP_LSHIFT, LF_I32, 0x40000000, 1, INT32_MIN},
        {LF_OP_LSHIFT, LF_I32, 1, 32, 0},      {LF_OP_LSHIFT, LF_I32, -1, 32, 0},
        {LF_OP_LSHIFT, LF_I32, 1, 33, 0},      {LF_OP_LSHIFT, LF_I32, 1, -1, 0},
        {LF_OP_LSHIFT, LF_I32, 5, INT32_MIN, 0}, {LF_OP_LSHIFT, LF_I32, 5, INT32_MAX, 0},
        {LF_OP_LSHIFT, LF_I64, 1, 63, INT64_MIN}, {LF_OP_LSHIFT, LF_I64, 1, 32, INT64_C(1) << 32},
        {LF_OP_LSHIFT, LF_I64, 1, 64, 0},      {LF_OP_LSHIFT, LF_I64, -1, -64, 0},
        {LF_OP_LSHIFT, LF_I64, 7, INT64_MIN, 0}, {LF_OP_LSHIFT, LF_I64, -3, 1, -6},
        {LF_OP_RSHIFT, LF_I32, 29, 2, 7},      {LF_OP_RSHIFT, LF_I32, -29, 2, -8},
        {LF_OP_RSHIFT, LF_I32, -1, 31, -1},    {LF_OP_RSHIFT, LF_I32, INT32_MIN, 31, -1},
        {LF_OP_RSHIFT, LF_I32, INT32_MAX, 31, 0}, {LF_OP_RSHIFT, LF_I32, INT32_MAX, 30, 1},
        {LF_OP_RSHIFT, LF_I32, 5, 32, 0},      {LF_OP_RSHIFT, LF_I32, -5, 32, -1},
        {LF_OP_RSHIFT, LF_I32, 5, -1, 0},      {LF_OP_RSHIFT, LF_I32, -5, -1, -1},
        {LF_OP_RSHIFT, LF_I32, -5, INT32_MIN, -1}, {LF_OP_RSHIFT, LF_I32, 0, 100, 0},
        {LF_OP_RSHIFT, LF_I64, INT64_MIN, 63, -1}, {LF_OP_RSHIFT, LF_I64, INT64_MAX, 63, 0},
        {LF_OP_RSHIFT, LF_I64, INT64_MIN, 1, INT64_MIN / 2}, {LF_OP_RSHIFT, LF_I64, -1, 64, -1},
        {LF_OP_RSHIFT, LF_I64, 1, 64, 0},      {LF_OP_RSHIFT, LF_I64, -7, -2, -1},
        {LF_OP_RSHIFT, LF_I64, INT64_C(1) << 40, 40, 1},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++)
        cr_expect_eq(ap(c[i].op, c[i].t, c[i].a, c[i].b), c[i].want, "%s: %lld %s %lld = %lld",
                     lf_dtype_name(c[i].t), (long long)c[i].a, graph_ops[c[i].op].text,
                     (long long)c[i].b, (long long)ap(c[i].op, c[i].t, c[i].a, c[i].b));
}

/* Same bits, NaN for NaN (the sign of a NaN is not specified). */
static bool same_float(double got, double want) {
    if (isnan(want)) return isnan(got);
    return got == want && signbit(got) == signbit(want);
}

/* np.floor_divide on floats: want for f64, want32 for the operands rounded
 * to f32 (both columns printed by NumPy 2.4's np.floor_divide). */
Test(scalar, float_floor_division_matches_numpy) {
    static const struct { double a, b, want, want32; } c[] = {
        {7.0, 2.0, 3.0, 3.0},          {-7.0, 2.0, -4.0, -4.0},      {7.0, -2.0, -4.0, -4.0},
        {-7.0, -2.0, 3.0, 3.0},        {7.5, 2.0, 3.0, 3.0},         {-7.5, 2.0, -4.0, -4.0},
        {1.0, 0.1, 9.0, 9.0},          {0.3, 0.1, 2.0, 3.0},         {6.0, 3.0, 2.0, 2.0},
        {-6.0, 3.0, -2.0, -2.0},       {0.0, 3.0, 0.0, 0.0},         {-0.0, 3.0, -0.0, -0.0},
        {0.0, -3.0, -0.0, -0.0},       {-0.0, -3.0, 0.0, 0.0},       {0.5, 2.0, 0.0, 0.0},
        {-0.5, 2.0, -1.0, -1.0},       {0.5, -2.0, -1.0, -1.0},      {-0.5, -2.0, 0.0, 0.0},
        {1.0, 0.0, INFINITY, INFINITY}, {-1.0, 0.0, -INFINITY, -INFINITY},
        {1.0, -0.0, -INFINITY, -INFINITY}, {0.0, 0.0, NAN, NAN},     {NAN, 0.0, NAN, NAN},
        {INFINITY, 0.0, INFINITY, INFINITY}, {1.0, INFINITY, 0.0, 0.0},
        {-1.0, INFINITY, -1.0, -1.0},  {1.0, -INFINITY, -1.0, -1.0}, {-1.0, -INFINITY, 0.0, 0.0},
        {0.0, INFINITY, 0.0, 0.0},     {-0.0, INFINITY, -0.0, -0.0}, {INFINITY, 1.0, NAN, NAN},
        {-INFINITY, 1.0, NAN, NAN},    {INFINITY, INFINITY, NAN, NAN}, {NAN, 1.0, NAN, NAN},
        {1.0, NAN, NAN, NAN},          {1e308, 1e-308, INFINITY, INFINITY},
        {1e300, 3.0, 3.3333333333333335e+299, NAN}, {-1e-300, 1e300, -1.0, -0.0},
        {16777216.0, 3.0, 5592405.0, 5592405.0},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        double got = graph_scalar_apply(LF_OP_FLOORDIV, LF_F64, F(c[i].a), F(c[i].b), F(0)).f;
        cr_expect(same_float(got, c[i].want), "f64 %g // %g = %.17g, want %.17g", c[i].a, c[i].b,
                  got, c[i].want);
        double a32 = (double)(float)c[i].a, b32 = (double)(float)c[i].b;
        double g32 = graph_scalar_apply(LF_OP_FLOORDIV, LF_F32, F(a32), F(b32), F(0)).f;
        cr_expect(same_float(g32, c[i].want32), "f32 %g // %g = %.9g, want %.9g", a32, b32, g32,
                  c[i].want32);
    }
}

/* Typing: & | ^ ~ keep bool and promote; << >> take bool as i32; // is
 * arithmetic; a float operand of a bitwise operator is found. */
Test(scalar, integer_operator_typing) {
    lf_ctx *ctx = tu_ctx(); /* typing only: the suite's backend (reference) */
    cr_assert(ctx != NULL);
    lf_graph *g = lf_graph_new(ctx);
    static const struct { const char *src; lf_dtype a, b, want; int bad; } c[] = {
        {"(a, b) -> a & b", LF_BOOL, LF_BOOL, LF_BOOL, -1},
        {"(a, b) -> a | b", LF_BOOL, LF_I32, LF_I32, -1},
        {"(a, b) -> a ^ b", LF_I32, LF_I64, LF_I64, -1},
        {"(a, b) -> ~a", LF_BOOL, LF_BOOL, LF_BOOL, -1},
        {"(a, b) -> ~a", LF_I32, LF_BOOL, LF_I32, -1},
        {"(a, b) -> a << b", LF_BOOL, LF_BOOL, LF_I32, -1},
        {"(a, b) -> a >> b", LF_I32, LF_BOOL, LF_I32, -1},
        {"(a, b) -> a >> b", LF_I32, LF_I64, LF_I64, -1},
        {"(a, b) -> a & 1", LF_I32, LF_I32, LF_I32, -1},
        {"(a, b) -> a & 1", LF_BOOL, LF_I32, LF_I64, -1}, /* bool meets an integer literal */
        {"(a, b) -> 6 & 3", LF_F32, LF_I32, LF_I64, -1},
        {"(a, b) -> a // b", LF_BOOL, LF_BOOL, LF_I32, -1},
        {"(a, b) -> a // b", LF_I32, LF_I32, LF_I32, -1},
        {"(a, b) -> a // b", LF_F32, LF_F32, LF_F32, -1},
        {"(a, b) -> a // 2", LF_F32, LF_F32, LF_F32, -1},
        {"(a, b) -> a // b", LF_I32, LF_F32, LF_F64, -1},
        {"(a, b) -> a & b", LF_F32, LF_I32, LF_F64, 0},
        {"(a, b) -> a | b", LF_I32, LF_F64, LF_F64, 1},
        {"(a, b) -> ~a", LF_F64, LF_I32, LF_F64, 0},
        {"(a, b) -> a << 1.0", LF_I32, LF_I32, LF_F64, 1},
        {"(a, b) -> i32(a) >> b", LF_F32, LF_I32, LF_I32, -1},
        {"(a, b) -> a >> b", LF_U64, LF_I64, LF_F64, 2},  /* no common integer dtype: the pair */
        {"(a, b) -> a & b", LF_I8, LF_U64, LF_F64, 2},
        {"(a, b) -> a << b", LF_U64, LF_U32, LF_U64, -1},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        lf_fn *f = lf_fn_parse(g, c[i].src);
        cr_assert(f != NULL, "%s", lf_graph_errmsg(g));
        lf_dtype params[2] = {c[i].a, c[i].b}, et[16], ct[16];
        cr_assert(f->nexprs <= 16);
        cr_expect_eq(graph_fn_types(f, params, et, ct), c[i].want, "%s on %s, %s", c[i].src,
                     lf_dtype_name(c[i].a), lf_dtype_name(c[i].b));
        int k = -1, bad = graph_fn_bad_operand(f, et, &k);
        cr_expect_eq(bad >= 0 ? k : -1, c[i].bad, "%s on %s, %s: bad operand %d", c[i].src,
                     lf_dtype_name(c[i].a), lf_dtype_name(c[i].b), bad >= 0 ? k : -1);
        if (bad >= 0) cr_expect_eq(bad, f->result);
    }
    lf_graph_free(g);
    /* through the builders: u64 >> i64 has no integer dtype (NumPy 2 raises) */
    g = lf_graph_new(ctx);
    cr_assert_null(lf_apply(g, LF_OP_RSHIFT, lf_const(g, LF_U64, 8), lf_const(g, LF_I64, 1), NULL));
    cr_expect_eq(lf_graph_status(g), LF_ERR_DTYPE);
    cr_expect(strstr(lf_graph_errmsg(g), "u64 and i64 have no common integer dtype") != NULL, "%s",
              lf_graph_errmsg(g));
    lf_graph_free(g);
    lf_ctx_destroy(ctx);
}

/* ---- the dtype table (graph/dtypes.def, graph/dtype.c) ---- */

/* The table's rows agree with the public calls and with themselves: sizes
 * and names through lf_dtype_*, distinct promotion ranks, each DLPack code
 * found back, integer extremes as C's, and sort-key widths by size. */
Test(scalar, dtype_table_rows_are_consistent) {
    for (int t = 0; t < LF_NDTYPES; t++) {
        const graph_dtype_info *d = &graph_dtypes[t];
        cr_expect_eq(lf_dtype_size((lf_dtype)t), d->size, "%s", d->name);
        cr_expect_str_eq(lf_dtype_name((lf_dtype)t), d->name);
        cr_expect_eq(graph_dtype_from_dlpack(d->dl_code, (int)d->size * 8), (lf_dtype)t, "%s", d->name);
        cr_expect_eq(graph_sort_key_wide((lf_dtype)t), d->size == 8, "%s", d->name);
        for (int u = 0; u < t; u++) cr_expect_neq(graph_dtypes[u].rank, d->rank, "%s and %s", graph_dtypes[u].name, d->name);
    }
    cr_expect_eq(graph_dtype_from_dlpack(GRAPH_DL_FLOAT, 16), LF_F16);
    cr_expect_eq(graph_dtype_from_dlpack(GRAPH_DL_BFLOAT, 16), LF_BF16);
    cr_expect_eq(graph_dtype_from_dlpack(GRAPH_DL_UINT, 8), LF_U8);
    cr_expect_eq(graph_dtype_from_dlpack(GRAPH_DL_FLOAT, 8), LF_NDTYPES);
    cr_expect_eq(graph_dtype_from_dlpack(GRAPH_DL_COMPLEX, 64), LF_C64);
    cr_expect_eq(graph_dtype_from_dlpack(GRAPH_DL_COMPLEX, 128), LF_C128);
    cr_expect_eq(graph_dtype_from_dlpack(GRAPH_DL_COMPLEX, 32), LF_NDTYPES);
    cr_expect_eq(graph_dtype_int_min(LF_I8), INT8_MIN);
    cr_expect_eq(graph_dtype_int_max(LF_I8), INT8_MAX);
    cr_expect_eq(graph_dtype_int_max(LF_U16), UINT16_MAX);
    cr_expect_eq(graph_dtype_int_max(LF_U32), (int64_t)UINT32_MAX);
    cr_expect_eq(graph_dtype_int_max(LF_U64), -1); /* its bits, as lf_scalar holds a u64 */
    cr_expect_eq(graph_dtype_int_min(LF_BOOL), 0);
    cr_expect_eq(graph_dtype_int_max(LF_BOOL), 1);
    cr_expect_eq(graph_dtype_int_min(LF_I32), INT32_MIN);
    cr_expect_eq(graph_dtype_int_max(LF_I32), INT32_MAX);
    cr_expect_eq(graph_dtype_int_min(LF_I64), INT64_MIN);
    cr_expect_eq(graph_dtype_int_max(LF_I64), INT64_MAX);
    cr_expect_eq(lf_dtype_size(LF_NDTYPES), 0);
    cr_expect_str_eq(lf_dtype_name(LF_NDTYPES), "?");
}

/* Promotion from the table is a lattice join, as NumPy's is: commutative,
 * associative, idempotent, bool its bottom; and the join never loses a
 * kind's reach (a float operand gives a float, an integer with an integer
 * an integer). test_eval's dtype_promote_table holds the values. */
Test(scalar, dtype_promotion_is_a_join) {
    for (int a = 0; a < LF_NDTYPES; a++) {
        cr_expect_eq(lf_dtype_promote((lf_dtype)a, (lf_dtype)a), (lf_dtype)a);
        cr_expect_eq(lf_dtype_promote(LF_BOOL, (lf_dtype)a), (lf_dtype)a);
        for (int b = 0; b < LF_NDTYPES; b++) {
            lf_dtype ab = lf_dtype_promote((lf_dtype)a, (lf_dtype)b);
            cr_expect_eq(ab, lf_dtype_promote((lf_dtype)b, (lf_dtype)a), "%d %d", a, b);
            if (graph_dtype_is_complex((lf_dtype)a) || graph_dtype_is_complex((lf_dtype)b))
                cr_expect(graph_dtype_is_complex(ab), "promote(%s, %s) = %s", lf_dtype_name((lf_dtype)a),
                          lf_dtype_name((lf_dtype)b), lf_dtype_name(ab));
            else if (graph_dtype_is_float((lf_dtype)a) || graph_dtype_is_float((lf_dtype)b))
                cr_expect(graph_dtype_is_float(ab), "promote(%s, %s) = %s", lf_dtype_name((lf_dtype)a),
                          lf_dtype_name((lf_dtype)b), lf_dtype_name(ab));
            else if (graph_dtype_is_int((lf_dtype)a) && graph_dtype_is_int((lf_dtype)b) &&
                     !((a == LF_U64 && graph_dtypes[b].kind == DTYPE_SINT) ||
                       (b == LF_U64 && graph_dtypes[a].kind == DTYPE_SINT))) /* NumPy: u64 with signed is f64 */
                cr_expect(graph_dtype_is_int(ab), "promote(%s, %s) = %s", lf_dtype_name((lf_dtype)a),
                          lf_dtype_name((lf_dtype)b), lf_dtype_name(ab));
            /* associative over the first five dtypes; with the later ones
               NumPy's promote_types is not (f32 with i8 is f32, then with
               u16 f32; i8 with u16 is i32, then with f32 f64) and neither
               is this table, which follows it */
            for (int c = 0; c < LF_NDTYPES && a <= LF_F64 && b <= LF_F64 && c <= LF_F64; c++)
                cr_expect_eq(lf_dtype_promote(ab, (lf_dtype)c),
                             lf_dtype_promote((lf_dtype)a, lf_dtype_promote((lf_dtype)b, (lf_dtype)c)), "%d %d %d", a,
                             b, c);
        }
    }
    cr_expect_eq(lf_dtype_promote((lf_dtype)99, LF_I32), LF_F64); /* unknown: f64, as before */
}
