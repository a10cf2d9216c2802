/* tests/test_parse.c: the expression parser and printer (graph/parse.c).
 *
 * Round trips (parse -> print -> parse gives an equal fn) for the lecture
 * examples, every operator of the op table, casts, constants and random
 * expression trees (built with the builder API and written by this file's own
 * fully parenthesized printer); precedence and associativity checked by
 * evaluating parsed fns on scalars; exact error messages; sticky errors;
 * snprintf-like truncation of lf_fn_print; nothing crashes on mangled input.
 * Depth: inputs nested 100,000 deep of every kind, a 200,000-deep builder fn's
 * round trip and every other walk over a deep fn (typing, fusion, the
 * reference evaluator, the schedule interpreter, both emitters, DOT labels)
 * run on a thread with a 64 KiB stack (a tenth of the depth under valgrind).
 */
#include "codegen/codegen.h"
#include "fusion/fusion.h"
#include "graph/graph.h"
#include "testutil.h"

#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GAUSS "(x, m, s) -> exp(-0.5*((x-m)/s)**2) / (s*2.5066282746)"
#define POLAR                                                                         \
    "(r1, t1, r2, t2) -> sqrt((r1*cos(t1) - r2*cos(t2))**2 + (r1*sin(t1) - r2*sin(t2))**2)"

/* ---- helpers ---------------------------------------------------------------------- */

TU_GRAPH_SUITE(parse);

/* Parses src into g, asserting success. */
static lf_fn *parse_ok(const char *src) {
    lf_fn *f = lf_fn_parse(g, src);
    cr_assert(f != NULL, "parse of \"%s\" failed: %s", src, lf_graph_errmsg(g));
    return f;
}

/* lf_fn_print into a malloc'd string; asserts the length is consistent. */
static char *print(const lf_fn *f) {
    int n = lf_fn_print(f, NULL, 0);
    cr_assert(n >= 0, "lf_fn_print failed");
    char *s = malloc((size_t)n + 1);
    cr_assert(s != NULL);
    cr_assert_eq(lf_fn_print(f, s, (size_t)n + 1), n);
    cr_assert_eq(strlen(s), (size_t)n, "printed \"%s\": length %d", s, n);
    return s;
}

/* Prints f, parses the text into graph pg, asserts the result equals f;
 * returns the text. */
static char *roundtrip_in(lf_graph *pg, const lf_fn *f) {
    char *s = print(f);
    lf_fn *f2 = lf_fn_parse(pg, s);
    cr_assert(f2 != NULL, "reparse of \"%s\" failed: %s", s, lf_graph_errmsg(pg));
    cr_assert(lf_fn_equal(f, f2), "reparse of \"%s\" differs", s);
    return s;
}

static char *roundtrip(const lf_fn *f) { return roundtrip_in(g, f); }

/* Evaluates f on scalars: every parameter of dtype t, args given as doubles.
 * Returns the result as a double and its dtype in *rt. */
static double eval_fn(const lf_fn *f, lf_dtype t, const double *args, lf_dtype *rt) {
    lf_dtype params[LF_MAX_ARGS];
    lf_scalar a[LF_MAX_ARGS];
    for (int i = 0; i < f->nparams; i++) {
        params[i] = t;
        if (graph_dtype_is_float(t)) a[i].f = t == LF_F32 ? (double)(float)args[i] : args[i];
        else a[i].i = t == LF_BOOL ? args[i] != 0 : (int64_t)args[i];
    }
    size_t n = (size_t)f->nexprs;
    lf_dtype *et = malloc(n * sizeof *et), *ct = malloc(n * sizeof *ct);
    lf_scalar *vals = malloc(n * sizeof *vals);
    cr_assert(et && ct && vals);
    lf_dtype r = graph_fn_types(f, params, et, ct);
    cr_assert(r < LF_NDTYPES);
    lf_scalar v = graph_fn_eval(f, params, et, ct, a, vals);
    free(et);
    free(ct);
    free(vals);
    if (rt) *rt = r;
    return graph_dtype_is_float(r) ? v.f : (double)v.i;
}

/* Parses src and evaluates it with f64 parameters. */
static double eval_src(const char *src, const double *args) {
    return eval_fn(parse_ok(src), LF_F64, args, NULL);
}

/* The result expression of f. */
static const fn_expr *result_of(const lf_fn *f) {
    cr_assert(f->result >= 0 && f->result < f->nexprs);
    return &f->exprs[f->result];
}

/* ---- the lecture examples ------------------------------------------------------------ */

Test(parse, gaussian_pdf) {
    lf_fn *f = parse_ok(GAUSS);
    cr_assert_eq(lf_fn_arity(f), 3);
    char *s = roundtrip(f);
    cr_assert_str_eq(s, "(x, m, s) -> exp((-0.5)*((x - m)/s)**2)/(s*2.5066282746)");
    free(s);
    double args[3] = {1.25, 0.5, 2.0};
    double z = (1.25 - 0.5) / 2.0, want = exp(-0.5 * z * z) / (2.0 * 2.5066282746);
    lf_dtype rt;
    cr_assert(tu_close(eval_fn(f, LF_F64, args, &rt), want, 1e-15, 0));
    cr_assert_eq(rt, LF_F64);
    /* weak literals: f32 parameters keep the result f32 */
    eval_fn(f, LF_F32, args, &rt);
    cr_assert_eq(rt, LF_F32);
}

Test(parse, polar_distance) {
    lf_fn *f = parse_ok(POLAR);
    cr_assert_eq(lf_fn_arity(f), 4);
    char *s = roundtrip(f);
    cr_assert_str_eq(s, "(r1, t1, r2, t2) -> sqrt((r1*cos(t1) - r2*cos(t2))**2 + "
                        "(r1*sin(t1) - r2*sin(t2))**2)");
    free(s);
    double a[4] = {2.0, 0.3, 1.5, -1.1};
    double want = hypot(a[0] * cos(a[1]) - a[2] * cos(a[3]), a[0] * sin(a[1]) - a[2] * sin(a[3]));
    cr_assert(tu_close(eval_fn(f, LF_F64, a, NULL), want, 1e-14, 0));
}

/* ---- every operator, alias, cast and constant -------------------------------------------- */

static bool tight(const char *op) {
    return !strcmp(op, "*") || !strcmp(op, "/") || !strcmp(op, "//") || !strcmp(op, "%") ||
           !strcmp(op, "**");
}

Test(parse, every_operator) {
    static const char *const names[3] = {"a", "b", "c"};
    for (int op = 0; op < LF_NOPS; op++) {
        const op_info *oi = &graph_ops[op];
        char src[128], params[32] = "(";
        for (int k = 0; k < oi->arity; k++) {
            strcat(params, names[k]);
            strcat(params, k + 1 < oi->arity ? ", " : ") -> ");
        }
        switch (oi->syntax) {
        case OPSYN_INFIX:
            snprintf(src, sizeof src, "%sa%s%s%sb", params, tight(oi->text) ? "" : " ", oi->text,
                     tight(oi->text) ? "" : " ");
            break;
        case OPSYN_PREFIX:
            snprintf(src, sizeof src, "%s%s%sa", params, oi->text,
                     strcmp(oi->text, "-") && strcmp(oi->text, "~") ? " " : "");
            break;
        case OPSYN_CALL:
            snprintf(src, sizeof src, "%s%s(a%s%s)", params, oi->text, oi->arity > 1 ? ", b" : "",
                     oi->arity > 2 ? ", c" : "");
            break;
        }
        lf_fn *f = parse_ok(src);
        const fn_expr *e = result_of(f);
        cr_assert_eq(e->kind, EXPR_OP, "%s", src);
        cr_assert_eq(e->op, (lf_op)op, "%s: op %d, want %d", src, (int)e->op, op);
        for (int k = 0; k < oi->arity; k++) {
            const fn_expr *a = &f->exprs[e->arg[k]];
            cr_assert(a->kind == EXPR_PARAM && a->param == k, "%s: operand %d", src, k);
        }
        lf_fn *ref = graph_fn_for_op(g, (lf_op)op);
        cr_assert(ref != NULL);
        cr_assert(lf_fn_equal(f, ref), "%s differs from graph_fn_for_op", src);
        /* the canonical spelling prints back unchanged */
        char *s = roundtrip(f);
        cr_assert_str_eq(s, src);
        free(s);
    }
}

Test(parse, aliases) {
    static const char *const pairs[][2] = {
        {"(a, b) -> pow(a, b)", "(a, b) -> a**b"},
        {"(a, b) -> a && b", "(a, b) -> a and b"},
        {"(a, b) -> a || b", "(a, b) -> a or b"},
        {"(a) -> !a", "(a) -> not a"},
        {"(a, b) -> !a && !b || a", "(a, b) -> ((not a) and (not b)) or a"},
        {"(a) -> +a", "(a) -> a"},
        {"(a) -> + + a", "(a) -> a"},
    };
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        lf_fn *x = parse_ok(pairs[i][0]), *y = parse_ok(pairs[i][1]);
        cr_assert(lf_fn_equal(x, y), "%s vs %s", pairs[i][0], pairs[i][1]);
        free(roundtrip(x));
    }
    lf_fn *p = parse_ok("(a, b) -> pow(a, b)");
    cr_assert_eq(result_of(p)->op, LF_OP_POW);
}

Test(parse, casts) {
    for (int t = 0; t < LF_NDTYPES; t++) {
        char src[64];
        snprintf(src, sizeof src, "(x) -> %s(x)", lf_dtype_name((lf_dtype)t));
        lf_fn *f = parse_ok(src);
        const fn_expr *e = result_of(f);
        cr_assert_eq(e->kind, EXPR_CAST, "%s", src);
        cr_assert_eq(e->cast_to, (lf_dtype)t, "%s", src);
        lf_fn *b = lf_fn_new(g, 1);
        cr_assert_eq(lf_fn_set_result(b, lf_fn_cast(b, (lf_dtype)t, lf_fn_param(b, 0))), LF_OK);
        cr_assert(lf_fn_equal(f, b), "%s", src);
        char *s = roundtrip(f);
        cr_assert_str_eq(s, src);
        free(s);
        lf_dtype rt;
        double one = 2.75;
        eval_fn(f, LF_F64, &one, &rt);
        cr_assert_eq(rt, (lf_dtype)t, "%s gives %s", src, lf_dtype_name(rt));
    }
    double v = -2.75;
    cr_assert_eq(eval_src("(x) -> i32(x) + 0", &v), -2.0);
    cr_assert_eq(eval_src("(x) -> bool(x) + 0", &v), 1.0);
}

/* Asserts that src's result is a constant of the given kind and bits. */
static void expect_const(const char *src, bool is_int, int64_t i, double f) {
    lf_fn *fn = parse_ok(src);
    const fn_expr *e = result_of(fn);
    cr_assert_eq(e->kind, EXPR_CONST, "%s: not a constant", src);
    cr_assert_eq(e->is_int, is_int, "%s: is_int %d", src, e->is_int);
    if (is_int) {
        cr_assert_eq(e->value.i, i, "%s: %lld, want %lld", src, (long long)e->value.i,
                     (long long)i);
    } else {
        lf_scalar want = {.f = f};
        cr_assert(e->value.i == want.i || (isnan(f) && isnan(e->value.f) &&
                                            signbit(f) == signbit(e->value.f)),
                  "%s: %.17g, want %.17g", src, e->value.f, f);
    }
    free(roundtrip(fn));
}

Test(parse, literals_and_constants) {
    expect_const("(x) -> 2", true, 2, 0);
    expect_const("(x) -> 0", true, 0, 0);
    expect_const("(x) -> 9223372036854775807", true, INT64_MAX, 0);
    expect_const("(x) -> -9223372036854775808", true, INT64_MIN, 0);
    expect_const("(x) -> -7", true, -7, 0);
    expect_const("(x) -> (-7)", true, -7, 0);
    expect_const("(x) -> 2.0", false, 0, 2.0);
    expect_const("(x) -> 2e0", false, 0, 2.0);
    expect_const("(x) -> .5", false, 0, 0.5);
    expect_const("(x) -> 5.", false, 0, 5.0);
    expect_const("(x) -> 1e-3", false, 0, 1e-3);
    expect_const("(x) -> 1E+3", false, 0, 1e3);
    expect_const("(x) -> 2.5066282746", false, 0, 2.5066282746);
    expect_const("(x) -> -0.5", false, 0, -0.5);
    expect_const("(x) -> (-0.5)", false, 0, -0.5);
    expect_const("(x) -> -0.0", false, 0, -0.0);
    expect_const("(x) -> 0.0", false, 0, 0.0);
    expect_const("(x) -> 1e999", false, 0, INFINITY);
    expect_const("(x) -> 4.9406564584124654e-324", false, 0, 4.9406564584124654e-324);
    expect_const("(x) -> 1.7976931348623157e308", false, 0, DBL_MAX);
    expect_const("(x) -> pi", false, 0, 3.14159265358979323846);
    expect_const("(x) -> e", false, 0, 2.71828182845904523536);
    expect_const("(x) -> inf", false, 0, INFINITY);
    expect_const("(x) -> -inf", false, 0, -INFINITY);
    expect_const("(x) -> nan", false, 0, NAN);
    expect_const("(x) -> -nan", false, 0, -NAN);
    expect_const("(x) -> -pi", false, 0, -3.14159265358979323846);

    /* the printer's spellings */
    static const struct {
        const char *src, *printed;
    } p[] = {
        {"(x) -> -0.5", "(x) -> (-0.5)"},
        {"(x) -> -inf", "(x) -> (-inf)"},
        {"(x) -> 100.0", "(x) -> 100.0"},
        {"(x) -> 1e20", "(x) -> 1e+20"},
        {"(x) -> 0.1", "(x) -> 0.1"},
        {"(x) -> -0.0", "(x) -> (-0.0)"},
        {"(x) -> -3", "(x) -> (-3)"},
        {"(x) -> -(3)", "(x) -> -(3)"},
        {"(x) -> -(-3)", "(x) -> -(-3)"},
        {"(x) -> - -3", "(x) -> -(-3)"},
        {"(x) -> x - -3", "(x) -> x - (-3)"},
        {"(x) -> -2**2", "(x) -> -2**2"},
        {"(x) -> (-2)**2", "(x) -> (-2)**2"},
        {"(x) -> (-x)**2", "(x) -> (-x)**2"},
        {"(x) -> 2**-1", "(x) -> 2**(-1)"},
        {"(x) -> 2**-x", "(x) -> 2**-x"},
    };
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) {
        char *s = roundtrip(parse_ok(p[i].src));
        cr_assert_str_eq(s, p[i].printed, "%s printed as %s", p[i].src, s);
        free(s);
    }
    /* -(3) is a negation of a literal, not the literal -3 */
    const fn_expr *e = result_of(parse_ok("(x) -> -(3)"));
    cr_assert(e->kind == EXPR_OP && e->op == LF_OP_NEG);
}

/* A parameter may take a constant's name and hides it (issue 14): numexpr's
 * own test expression, a minus before it is a negation (not a folded
 * constant), the other constants stay, and the printed text reads back. */
Test(parse, parameters_shadow_constants) {
    double v[4] = {2, 3, 5, 7};
    cr_assert_eq(eval_src("(b, c, d, e) -> b*c+d*e", v), 2.0 * 3 + 5 * 7);
    lf_fn *f = parse_ok("(b, c, d, e) -> b*c+d*e");
    char *s = roundtrip(f);
    cr_assert_str_eq(s, "(b, c, d, e) -> b*c + d*e");
    free(s);
    cr_assert_eq(eval_src("(e) -> -e", v), -2.0);
    const fn_expr *neg = result_of(parse_ok("(e) -> -e"));
    cr_assert(neg->kind == EXPR_OP && neg->op == LF_OP_NEG, "-e of a parameter e folded into a constant");
    cr_assert_eq(eval_src("(e) -> -e**2", v), -4.0);
    cr_assert_eq(eval_src("(pi) -> pi * e", v), 2.0 * 2.71828182845904523536);
    cr_assert_eq(eval_src("(e) -> pi + e", v), 3.14159265358979323846 + 2.0);
    double w[2] = {1.5, 4};
    cr_assert_eq(eval_src("(nan, inf) -> nan + inf", w), 5.5);
    cr_assert(isnan(eval_src("(x, inf) -> nan + inf", w)));
    /* with a parameter named inf, an infinite constant prints as 1e999 */
    lf_fn *fi = parse_ok("(inf) -> inf + 1e999 - -1e999");
    s = roundtrip(fi);
    cr_assert_str_eq(s, "(inf) -> inf + 1e999 - (-1e999)");
    free(s);
    s = roundtrip(parse_ok("(x) -> x + 1e999"));
    cr_assert_str_eq(s, "(x) -> x + inf");
    free(s);
    /* the expression through a graph, on whatever backend the suite runs */
    lf_fn *nf = parse_ok("(b, c, d, e) -> b*c+d*e");
    lf_node *in[4];
    for (int i = 0; i < 4; i++) in[i] = lf_const(g, LF_F64, v[i]);
    lf_node *y = lf_zipwith(g, nf, 4, in);
    cr_assert(y != NULL, "%s", lf_errmsg(ctx));
    lf_buffer *b = tu_eval1(ctx, g, y);
    double got = 0;
    cr_assert_eq(lf_buffer_read(b, &got, sizeof got), LF_OK);
    cr_assert_eq(got, 41.0);
    lf_buffer_free(b);
}

/* A fn of no parameters (issue 14): parses, prints back, evaluates, is
 * typed by the literal rules. */
Test(parse, no_parameters) {
    lf_fn *f = parse_ok("() -> 1+1");
    cr_assert_eq(lf_fn_arity(f), 0);
    char *s = roundtrip(f);
    cr_assert_str_eq(s, "() -> 1 + 1");
    free(s);
    lf_dtype rt;
    cr_assert_eq(eval_fn(f, LF_F64, NULL, &rt), 2.0);
    cr_assert_eq(rt, LF_I64);
    cr_assert_eq(eval_fn(parse_ok("(  ) -> sqrt(4.0) * pi"), LF_F64, NULL, &rt), 2 * 3.14159265358979323846);
    cr_assert_eq(rt, LF_F64);
    eval_fn(parse_ok("() -> f32(1) / 3"), LF_F64, NULL, &rt);
    cr_assert_eq(rt, LF_F32);
    cr_assert(!lf_fn_equal(f, parse_ok("(x) -> 1+1")), "arity differs");
    lf_fn *b = lf_fn_new(g, 0);
    cr_assert(b != NULL, "%s", lf_graph_errmsg(g));
    cr_assert_eq(lf_fn_set_result(b, lf_fn_op(b, LF_OP_ADD, lf_fn_const_int(b, 1), lf_fn_const_int(b, 1), -1)), LF_OK);
    cr_assert(lf_fn_equal(f, b));
    s = roundtrip(b);
    cr_assert_str_eq(s, "() -> 1 + 1");
    free(s);
}

Test(parse, literal_dtypes) {
    static const struct {
        const char *src;
        lf_dtype param, want;
    } c[] = {
        {"(x) -> x + 2", LF_I32, LF_I32},     {"(x) -> x + 2.0", LF_I32, LF_F64},
        {"(x) -> x*0.5", LF_F32, LF_F32},     {"(x) -> x + 2", LF_BOOL, LF_I64},
        {"(x) -> 2 + 3", LF_F32, LF_I64},     {"(x) -> 2 + 3.0", LF_I32, LF_F64},
        {"(x) -> x / 2", LF_I32, LF_F64},     {"(x) -> x < 2", LF_F32, LF_BOOL},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        lf_dtype rt;
        double one = 1;
        eval_fn(parse_ok(c[i].src), c[i].param, &one, &rt);
        cr_assert_eq(rt, c[i].want, "%s with %s gives %s, want %s", c[i].src,
                     lf_dtype_name(c[i].param), lf_dtype_name(rt), lf_dtype_name(c[i].want));
    }
}

/* ---- precedence and associativity ---------------------------------------------------- */

Test(parse, precedence_by_evaluation) {
    static const struct {
        const char *src;
        double a, b, c, want;
    } c[] = {
        {"(a, b, c) -> a - b - c", 10, 3, 2, 5},
        {"(a, b, c) -> a - (b - c)", 10, 3, 2, 9},
        {"(a, b, c) -> a/b/c", 24, 4, 2, 3},
        {"(a, b, c) -> a/(b/c)", 24, 4, 2, 12},
        {"(a, b, c) -> a**b**c", 2, 3, 2, 512},
        {"(a, b, c) -> (a**b)**c", 2, 3, 2, 64},
        {"(a, b, c) -> -a**2", 3, 0, 0, -9},
        {"(a, b, c) -> (-a)**2", 3, 0, 0, 9},
        {"(a, b, c) -> -2**2 + a", 0, 0, 0, -4},
        {"(a, b, c) -> (-2)**2 + a", 0, 0, 0, 4},
        {"(a, b, c) -> 2.0**-1 + a", 0, 0, 0, 0.5},
        {"(a, b, c) -> 2**-1 + a", 0, 0, 0, 0}, /* integer ** negative is 0 */
        {"(a, b, c) -> a**-b*c", 2, 1, 3, 1.5},
        {"(a, b, c) -> a + b*c", 2, 3, 4, 14},
        {"(a, b, c) -> (a + b)*c", 2, 3, 4, 20},
        {"(a, b, c) -> a*b % c", 5, 3, 4, 3},
        {"(a, b, c) -> a % b*c", 5, 3, 4, 8},
        {"(a, b, c) -> a - b + c", 1, 2, 3, 2},
        {"(a, b, c) -> -a + b", 1, 5, 0, 4},
        {"(a, b, c) -> a - -b", 1, 5, 0, 6},
        {"(a, b, c) -> a*-b", 2, 5, 0, -10},
        {"(a, b, c) -> a + b < c*2", 1, 2, 2, 1},
        {"(a, b, c) -> not a and b", 1, 0, 0, 0},
        {"(a, b, c) -> not (a and b)", 1, 0, 0, 1},
        {"(a, b, c) -> not a or b", 1, 1, 0, 1},
        {"(a, b, c) -> a or b and c", 1, 0, 0, 1},
        {"(a, b, c) -> (a or b) and c", 1, 0, 0, 0},
        {"(a, b, c) -> not a < b", 1, 2, 0, 0},
        {"(a, b, c) -> not not a", 3, 0, 0, 1},
        {"(a, b, c) -> a < (b == c)", 1, 2, 3, 0},
        {"(a, b, c) -> (a < b) == (b < c)", 1, 2, 3, 1},
        {"(a, b, c) -> a == b or b != c", 1, 2, 2, 0},
        {"(a, b, c) -> a < b and b <= c", 1, 2, 2, 1},
        {"(a, b, c) -> max(a, b)*min(b, c) - abs(-c)", 1, 2, 3, 1},
        {"(a, b, c) -> where(a > b, a, b) + fma(a, b, c)", 1, 2, 3, 7},
        {"(a, b, c) -> a\n  +\tb\r\n * c", 1, 2, 3, 7},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        double args[3] = {c[i].a, c[i].b, c[i].c};
        lf_fn *f = parse_ok(c[i].src);
        double got = eval_fn(f, LF_F64, args, NULL);
        cr_assert(tu_close(got, c[i].want, 1e-15, 0), "%s at (%g, %g, %g): %.17g, want %.17g",
                  c[i].src, c[i].a, c[i].b, c[i].c, got, c[i].want);
        /* the printed form evaluates the same */
        char *s = roundtrip(f);
        lf_fn *f2 = parse_ok(s);
        cr_assert(tu_close(eval_fn(f2, LF_F64, args, NULL), c[i].want, 1e-15, 0), "%s", s);
        free(s);
    }
}

/* The integer operators: Python's levels, checked on i64 values. */
Test(parse, integer_operator_precedence) {
    static const struct {
        const char *src;
        double a, b, c, want;
    } c[] = {
        {"(a, b, c) -> a | b ^ c", 1, 3, 1, 3},       /* 1 | (3 ^ 1) */
        {"(a, b, c) -> (a | b) ^ c", 1, 3, 1, 2},
        {"(a, b, c) -> a ^ b & c", 1, 3, 2, 3},       /* 1 ^ (3 & 2) */
        {"(a, b, c) -> (a ^ b) & c", 1, 3, 2, 2},
        {"(a, b, c) -> a & b << c", 12, 3, 2, 12},    /* 12 & (3 << 2) */
        {"(a, b, c) -> (a & b) << c", 12, 3, 2, 0},
        {"(a, b, c) -> a << b + c", 1, 2, 1, 8},      /* 1 << (2 + 1) */
        {"(a, b, c) -> (a << b) + c", 1, 2, 1, 5},
        {"(a, b, c) -> a >> b >> c", 64, 2, 1, 8},    /* left-associative */
        {"(a, b, c) -> a >> (b >> c)", 64, 2, 1, 32},
        {"(a, b, c) -> a + b // c", 1, 7, 2, 4},
        {"(a, b, c) -> (a + b) // c", 1, 7, 2, 4},
        {"(a, b, c) -> a // b*c", 7, 2, 3, 9},        /* (7 // 2)*3 */
        {"(a, b, c) -> a // (b*c)", 7, 2, 3, 1},
        {"(a, b, c) -> -a // b", 7, 2, 0, -4},
        {"(a, b, c) -> a // b // c", 100, 3, 4, 8},
        {"(a, b, c) -> ~a + b", 0, 5, 0, 4},          /* (~0) + 5 */
        {"(a, b, c) -> ~(a + b)", 0, 5, 0, -6},
        {"(a, b, c) -> ~a**b", 2, 2, 0, -5},          /* ~(2**2) */
        {"(a, b, c) -> (~a)**b", 2, 2, 0, 9},
        {"(a, b, c) -> -~a", 2, 0, 0, 3},
        {"(a, b, c) -> ~-a", 2, 0, 0, 1},
        {"(a, b, c) -> ~~a", 5, 0, 0, 5},
        {"(a, b, c) -> a**~b", 2, -3, 0, 4},         /* 2**(~-3) = 2**2 */
        {"(a, b, c) -> a & 7 == b", 13, 5, 0, 1},     /* (13 & 7) == 5 */
        {"(a, b, c) -> a | b < c", 1, 2, 4, 1},       /* (1 | 2) < 4 */
        {"(a, b, c) -> not a & b", 2, 1, 0, 1},       /* not (2 & 1) */
        {"(a, b, c) -> a & b and c", 3, 1, 1, 1},
        {"(a, b, c) -> (a >> 2) & 7", 29, 0, 0, 7},
        {"(a, b, c) -> a >> 2 & 7", 29, 0, 0, 7},
        {"(a, b, c) -> (a*b) // 4 & 7", 9, 11, 0, 0}, /* (99 // 4) & 7 = 24 & 7 */
        {"(a, b, c) -> a ^ -1", 5, 0, 0, -6},
        {"(a, b, c) -> a << -1", 5, 0, 0, 0},
        {"(a, b, c) -> a >> 64", -5, 0, 0, -1},
        {"(a, b, c) -> a // 0", 5, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        double args[3] = {c[i].a, c[i].b, c[i].c};
        lf_fn *f = parse_ok(c[i].src);
        double got = eval_fn(f, LF_I64, args, NULL);
        cr_assert_eq(got, c[i].want, "%s at (%g, %g, %g): %g, want %g", c[i].src, c[i].a, c[i].b,
                     c[i].c, got, c[i].want);
        char *s = roundtrip(f);
        lf_fn *f2 = parse_ok(s);
        cr_assert_eq(eval_fn(f2, LF_I64, args, NULL), c[i].want, "%s", s);
        free(s);
    }
    /* printed forms: minimal parentheses, spaces as written here */
    static const char *const printed[][2] = {
        {"(a, b) -> (a | b) ^ a & b", "(a, b) -> (a | b) ^ a & b"},
        {"(a, b) -> ((a >> 2) & 7) | (b << 1)", "(a, b) -> a >> 2 & 7 | b << 1"},
        {"(a, b) -> a // (b // 2)", "(a, b) -> a//(b//2)"},
        {"(a, b) -> (a + b) << 2", "(a, b) -> a + b << 2"},
        {"(a, b) -> a + (b << 2)", "(a, b) -> a + (b << 2)"},
        {"(a, b) -> ~(a & b)", "(a, b) -> ~(a & b)"},
        {"(a, b) -> ~(-a)", "(a, b) -> ~-a"},
        {"(a, b) -> ~(-2)", "(a, b) -> ~(-2)"},
        {"(a, b) -> -(~2)", "(a, b) -> -~2"},
        {"(a, b) -> (~a)**2", "(a, b) -> (~a)**2"},
        {"(a, b) -> (a & b) == 0", "(a, b) -> a & b == 0"},
        {"(a, b) -> a & (b == 0)", "(a, b) -> a & (b == 0)"},
        {"(a, b) -> a - (b ^ 1)", "(a, b) -> a - (b ^ 1)"},
    };
    for (size_t i = 0; i < sizeof printed / sizeof printed[0]; i++) {
        char *s = roundtrip(parse_ok(printed[i][0]));
        cr_assert_str_eq(s, printed[i][1], "printed from %s: %s", printed[i][0], s);
        free(s);
    }
}

Test(parse, precedence_by_structure) {
    static const char *const same[][2] = {
        {"(a, b, c) -> a - b - c", "(a, b, c) -> (a - b) - c"},
        {"(a, b, c) -> a**b**c", "(a, b, c) -> a**(b**c)"},
        {"(a, b, c) -> -a**2", "(a, b, c) -> -(a**2)"},
        {"(a, b, c) -> not a and b", "(a, b, c) -> (not a) and b"},
        {"(a, b, c) -> a or b and c", "(a, b, c) -> a or (b and c)"},
        {"(a, b, c) -> a + b*c**2", "(a, b, c) -> a + (b*(c**2))"},
        {"(a, b, c) -> a < b + c", "(a, b, c) -> a < (b + c)"},
        {"(a, b, c) -> not a == b", "(a, b, c) -> not (a == b)"},
        {"(a, b, c) -> a | b ^ c & a", "(a, b, c) -> a | (b ^ (c & a))"},
        {"(a, b, c) -> a & b << c + a", "(a, b, c) -> a & (b << (c + a))"},
        {"(a, b, c) -> a + b // c % a", "(a, b, c) -> a + ((b // c) % a)"},
        {"(a, b, c) -> ~a**b", "(a, b, c) -> ~(a**b)"},
        {"(a, b, c) -> a | b == c", "(a, b, c) -> (a | b) == c"},
        {"(a, b, c) -> a << b << c", "(a, b, c) -> (a << b) << c"},
        {"(a, b, c) -> a&&b&c", "(a, b, c) -> a and (b & c)"},
        {"(a, b, c) -> a||b|c", "(a, b, c) -> a or (b | c)"},
    };
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++)
        cr_assert(lf_fn_equal(parse_ok(same[i][0]), parse_ok(same[i][1])), "%s vs %s",
                  same[i][0], same[i][1]);
    cr_assert(!lf_fn_equal(parse_ok("(a, b, c) -> a - b - c"),
                           parse_ok("(a, b, c) -> a - (b - c)")));
    /* hash-consing: a shared subexpression is stored once */
    lf_fn *f = parse_ok("(x) -> sin(x + 1)*sin(x + 1)");
    cr_assert_eq(f->nexprs, 5, "%d expressions", f->nexprs); /* x, 1, x+1, sin, * */
}

/* ---- random expression trees -------------------------------------------------------------- */

typedef struct sbuf {
    char *s;
    size_t len, cap;
} sbuf;

static void sput(sbuf *b, const char *fmt, ...) {
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int n = vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        cr_assert(n >= 0);
        if (b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return;
        }
        b->cap = 2 * b->cap + (size_t)n + 64;
        b->s = realloc(b->s, b->cap);
        cr_assert(b->s != NULL);
    }
}

/* Optional whitespace between tokens. */
static const char *ws(void) {
    static const char *const w[] = {"", "", "", " ", "  ", "\n", "\t ", "\r\n"};
    return w[tu_rand() % 8];
}

static const char *const pnames[LF_MAX_ARGS] = {"x", "y", "z", "w", "u", "v", "s", "t"};

static double rand_double(void) {
    switch (tu_rand() % 12) {
    case 0: return 0.0;
    case 1: return -0.0;
    case 2: return INFINITY;
    case 3: return -INFINITY;
    case 4: return NAN;
    case 5: return -NAN;
    case 6: return 4.9406564584124654e-324;
    case 7: return (double)tu_randint(-100, 100) / 4;
    case 8: return ldexp(tu_uniform(-1, 1), (int)tu_randint(-1074, 1024));
    default: return tu_uniform(-10, 10);
    }
}

static int64_t rand_int(void) {
    switch (tu_rand() % 6) {
    case 0: return INT64_MIN;
    case 1: return INT64_MAX;
    case 2: return (int64_t)tu_rand();
    default: return tu_randint(-20, 20);
    }
}

/* Writes a float literal the way the grammar reads it (not via lf_fn_print). */
static void put_double(sbuf *b, double v) {
    const char *sign = signbit(v) ? "-" : "";
    double a = fabs(v);
    char num[64];
    if (isnan(v)) snprintf(num, sizeof num, "nan");
    else if (isinf(v)) snprintf(num, sizeof num, "inf");
    else snprintf(num, sizeof num, "%.17g", a);
    if (!strpbrk(num, ".ein")) strcat(num, ".0");
    sput(b, *sign ? "(%s%s%s%s)" : "%s%s%s%s", ws(), sign, num, ws());
}

/* Builds a random expression in f and writes it to b: every operand of an
 * operator is in parentheses ("(A) + (B)", "- (A)"), so precedence never
 * matters; the caller parenthesizes the whole. Aliases (pow, &&, ||, !) and
 * random whitespace are mixed in. */
static int gen(lf_fn *f, sbuf *b, int depth) {
    int np = lf_fn_arity(f);
    if (depth == 0 || tu_rand() % 5 == 0) {
        unsigned r = tu_rand() % 10;
        if (r < 5) {
            int k = (int)(tu_rand() % (unsigned)np);
            sput(b, "%s%s", pnames[k], ws());
            return lf_fn_param(f, k);
        }
        if (r < 8) {
            int64_t v = rand_int();
            sput(b, v < 0 ? "(%s%lld)" : "%s%lld", ws(), (long long)v);
            return lf_fn_const_int(f, v);
        }
        double v = rand_double();
        put_double(b, v);
        return lf_fn_const(f, v);
    }
    if (tu_rand() % 12 == 0) {
        lf_dtype t = (lf_dtype)(tu_rand() % LF_NDTYPES);
        sput(b, "%s%s(", lf_dtype_name(t), ws());
        int a = gen(f, b, depth - 1);
        sput(b, ")%s", ws());
        return lf_fn_cast(f, t, a);
    }
    lf_op op = (lf_op)(tu_rand() % LF_NOPS);
    const op_info *oi = &graph_ops[op];
    int a[3] = {-1, -1, -1};
    bool alias = tu_rand() % 3 == 0;
    if (oi->syntax == OPSYN_CALL || (op == LF_OP_POW && alias)) {
        sput(b, "%s%s(", op == LF_OP_POW ? "pow" : oi->text, ws());
        for (int k = 0; k < oi->arity; k++) {
            if (k) sput(b, ",%s", ws());
            a[k] = gen(f, b, depth - 1);
        }
        sput(b, ")%s", ws());
    } else if (oi->syntax == OPSYN_INFIX) {
        const char *text = oi->text;
        if (alias && op == LF_OP_AND) text = "&&";
        if (alias && op == LF_OP_OR) text = "||";
        sput(b, "(%s", ws());
        a[0] = gen(f, b, depth - 1);
        sput(b, ") %s (", text);
        a[1] = gen(f, b, depth - 1);
        sput(b, ")%s", ws());
    } else {
        const char *text = alias && op == LF_OP_NOT ? "!" : oi->text;
        sput(b, "%s%s (", text, ws());
        a[0] = gen(f, b, depth - 1);
        sput(b, ")");
    }
    return lf_fn_op(f, op, a[0], a[1], a[2]);
}

Test(parse, random_trees) {
    int trees = 3000;
    lf_graph *rg = NULL;
    sbuf b = {0};
    for (int i = 0; i < trees; i++) {
        if (i % 100 == 0) {
            lf_graph_free(rg);
            rg = lf_graph_new(ctx);
            cr_assert(rg != NULL);
        }
        int np = (int)tu_randint(1, LF_MAX_ARGS);
        lf_fn *f = lf_fn_new(rg, np);
        b.len = 0;
        sput(&b, "%s(", ws());
        for (int k = 0; k < np; k++) sput(&b, "%s%s%s%s", k ? "," : "", ws(), pnames[k], ws());
        sput(&b, ")%s->%s(", ws(), ws());
        int e = gen(f, &b, (int)tu_randint(0, 7));
        sput(&b, ")%s", ws());
        cr_assert_eq(lf_fn_set_result(f, e), LF_OK, "builder: %s", lf_graph_errmsg(rg));

        lf_fn *p = lf_fn_parse(rg, b.s);
        cr_assert(p != NULL, "parse of \"%s\": %s", b.s, lf_graph_errmsg(rg));
        cr_assert(lf_fn_equal(f, p), "\"%s\" parses to a different fn", b.s);

        int n = lf_fn_print(f, NULL, 0);
        cr_assert(n > 0);
        char *s = malloc((size_t)n + 1);
        cr_assert_eq(lf_fn_print(f, s, (size_t)n + 1), n);
        cr_assert_eq(strlen(s), (size_t)n);
        lf_fn *q = lf_fn_parse(rg, s);
        cr_assert(q != NULL, "reparse of printed \"%s\" (from \"%s\"): %s", s, b.s,
                  lf_graph_errmsg(rg));
        cr_assert(lf_fn_equal(f, q), "printed \"%s\" (from \"%s\") parses differently", s, b.s);
        free(s);
    }
    lf_graph_free(rg);
    free(b.s);
}

/* Mangled strings never crash; a failure is always a parse error with a
 * position, and a success still round-trips. */
Test(parse, mangled_inputs) {
    static const char alphabet[] = "()+-*/%<>=!&|,.eE0123456789xyz \n_$";
    lf_graph *rg = NULL;
    sbuf b = {0};
    for (int i = 0; i < 3000; i++) {
        if (i % 100 == 0) {
            lf_graph_free(rg);
            rg = lf_graph_new(ctx);
        }
        lf_fn *f = lf_fn_new(rg, 3);
        b.len = 0;
        sput(&b, "(x, y, z) -> ");
        int e = gen(f, &b, 3);
        cr_assert(e >= 0);
        int edits = (int)tu_randint(1, 4);
        for (int k = 0; k < edits && b.len > 0; k++) {
            size_t at = (size_t)tu_randint(0, (int64_t)b.len - 1);
            char c = alphabet[tu_rand() % (sizeof alphabet - 1)];
            switch (tu_rand() % 3) {
            case 0: b.s[at] = c; break;
            case 1: memmove(b.s + at, b.s + at + 1, b.len - at); b.len--; break;
            default: sput(&b, " "); memmove(b.s + at + 1, b.s + at, b.len - at - 1);
                     b.s[at] = c; break;
            }
        }
        lf_graph *pg = lf_graph_new(ctx);
        lf_fn *p = lf_fn_parse(pg, b.s);
        if (p) {
            char *s = print(p);
            lf_fn *q = lf_fn_parse(pg, s);
            cr_assert(q && lf_fn_equal(p, q), "\"%s\" printed as \"%s\"", b.s, s);
            free(s);
        } else {
            cr_assert_eq(lf_graph_status(pg), LF_ERR_PARSE, "\"%s\": %s", b.s,
                         lf_graph_errmsg(pg));
            cr_assert(!strncmp(lf_graph_errmsg(pg), "parse error at ", 15), "%s",
                      lf_graph_errmsg(pg));
        }
        lf_graph_free(pg);
    }
    lf_graph_free(rg);
    free(b.s);
}

/* ---- errors ---------------------------------------------------------------------------- */

/* Parses src in a fresh graph and asserts the exact message. */
static void expect_error(const char *src, const char *msg) {
    lf_graph *eg = lf_graph_new(ctx);
    cr_assert(eg != NULL);
    lf_fn *f = lf_fn_parse(eg, src);
    cr_assert(f == NULL, "\"%s\" parsed", src);
    cr_assert_eq(lf_graph_status(eg), LF_ERR_PARSE, "\"%s\": %s", src,
                 lf_status_name(lf_graph_status(eg)));
    cr_assert_str_eq(lf_graph_errmsg(eg), msg, "\"%s\"", src);
    cr_assert_str_eq(lf_errmsg(ctx), msg, "\"%s\"", src);
    lf_graph_free(eg);
}

Test(parse, error_messages) {
    static const char *const c[][2] = {
        {"", "parse error at 1:1: expected '('"},
        {"   \n  ", "parse error at 2:3: expected '('"},
        {"x -> x", "parse error at 1:1: expected '('"},
        {"(x) x", "parse error at 1:5: expected '->'"},
        {"(x)", "parse error at 1:4: expected '->'"},
        {"(x) ->", "parse error at 1:7: unexpected end of input"},
        {"(x) -> (x + 1", "parse error at 1:14: expected ')'"},
        {"(x) -> x + 1)", "parse error at 1:13: unexpected ')' after the expression"},
        {"(x) -> x y", "parse error at 1:10: unexpected 'y' after the expression"},
        {"(x) -> sin(x", "parse error at 1:13: expected ')'"},
        {"(x) -> sin(x,)", "parse error at 1:14: unexpected ')'"},
        {"(x) -> foo(x)", "parse error at 1:8: unknown function 'foo'"},
        {"(x) -> foo + x", "parse error at 1:8: unknown name 'foo'"},
        {"(x) -> sin(x, x)", "parse error at 1:8: 'sin' takes 1 argument, got 2"},
        {"(x) -> atan2(x)", "parse error at 1:8: 'atan2' takes 2 arguments, got 1"},
        {"(x) -> where()", "parse error at 1:8: 'where' takes 3 arguments, got 0"},
        {"(x) -> f32(x, x)", "parse error at 1:8: 'f32' takes 1 argument, got 2"},
        {"(x) -> sin + 1", "parse error at 1:8: expected '(' after 'sin'"},
        {"(x) -> x(2)", "parse error at 1:8: 'x' is not a function"},
        {"(x) -> pi(2)", "parse error at 1:8: 'pi' is not a function"},
        {"(x) -> 1e", "parse error at 1:8: malformed number '1e'"},
        {"(x) -> x + 1e+", "parse error at 1:12: malformed number '1e+'"},
        {"(x) -> 1.5.3", "parse error at 1:8: malformed number '1.5.3'"},
        {"(x) -> 0x10", "parse error at 1:8: malformed number '0x10'"},
        {"(x) -> 2x", "parse error at 1:8: malformed number '2x'"},
        {"(x) -> 10000000000000000000000000000000000000000", "parse error at 1:8: integer literal out of range (more than 38 digits)"},
        {"(x) -> x + -99999999999999999999999999999999999999999",
         "parse error at 1:13: integer literal out of range (more than 38 digits)"},
        {"(a, b, c) -> a < b < c",
         "parse error at 1:20: comparisons do not chain (use 'and')"},
        {"(a, b, c) -> a < b == c",
         "parse error at 1:20: comparisons do not chain (use 'and')"},
        {"(a, b, c) -> not a >= b != c",
         "parse error at 1:25: comparisons do not chain (use 'and')"},
        {"(x, x) -> x", "parse error at 1:5: duplicate parameter 'x'"},
        {"(a, b, c, d, f, g, h, i, j) -> a", "parse error at 1:26: too many parameters (at most 8)"},
        {"() 1", "parse error at 1:4: expected '->'"},
        {"() -> ", "parse error at 1:7: unexpected end of input"},
        {"() -> x", "parse error at 1:7: unknown name 'x'"},
        {"(x,) -> x", "parse error at 1:4: expected a parameter name, got ')'"},
        {"(1) -> 1", "parse error at 1:2: expected a parameter name, got '1'"},
        {"(x", "parse error at 1:3: expected ')'"},
        {"(x,", "parse error at 1:4: unexpected end of input"},
        {"(sin) -> 1", "parse error at 1:2: parameter name 'sin' is a builtin name"},
        {"(x, sqrt) -> x", "parse error at 1:5: parameter name 'sqrt' is a builtin name"},
        {"(pi) -> pi(2)", "parse error at 1:9: 'pi' is not a function"},
        {"(e, e) -> e", "parse error at 1:5: duplicate parameter 'e'"},
        {"(and) -> 1", "parse error at 1:2: parameter name 'and' is a builtin name"},
        {"(f64) -> 1", "parse error at 1:2: parameter name 'f64' is a builtin name"},
        /* NumPy's spellings are builtin names too, with their own name in messages */
        {"(arcsin) -> 1", "parse error at 1:2: parameter name 'arcsin' is a builtin name"},
        {"(x, power) -> x", "parse error at 1:5: parameter name 'power' is a builtin name"},
        {"(x) -> power(x)", "parse error at 1:8: 'power' takes 2 arguments, got 1"},
        {"(x) -> arctanh + 1", "parse error at 1:8: expected '(' after 'arctanh'"},
        {"(x) -> fmod(x)", "parse error at 1:8: 'fmod' takes 2 arguments, got 1"},
        {"(x) -> x $ 1", "parse error at 1:10: unexpected character '$'"},
        {"(x) -> x = 1", "parse error at 1:10: unexpected character '='"},
        {"(x) -> x @ 1", "parse error at 1:10: unexpected character '@'"},
        {"(x) -> x & ", "parse error at 1:12: unexpected end of input"},
        {"(x) -> x << << 2", "parse error at 1:13: unexpected '<<'"},
        {"(x) -> x ~ 1", "parse error at 1:10: unexpected '~' after the expression"},
        {"(x) -> x // // 2", "parse error at 1:13: unexpected '//'"},
        {"(x) -> x >>> 2", "parse error at 1:12: unexpected '>'"},
        {"(x) -> x < y & 1", "parse error at 1:12: unknown name 'y'"},
        {"(a, b, c) -> a & b < c == 1",
         "parse error at 1:24: comparisons do not chain (use 'and')"},
        {"(x) -> x & not x", "parse error at 1:12: 'not' needs parentheses here"},
        {"(x) ->\n  x |\n  ^ 2", "parse error at 3:3: unexpected '^'"},
        {"(x) -> x + \x01", "parse error at 1:12: unexpected byte 0x01"},
        {"(x) -> x + \xc3\xa9", "parse error at 1:12: unexpected byte 0xC3"},
        {"(x) ->\n  x +\n  * 2", "parse error at 3:3: unexpected '*'"},
        {"(x) -> x * not x", "parse error at 1:12: 'not' needs parentheses here"},
        {"(x) -> x < not x", "parse error at 1:12: 'not' needs parentheses here"},
        {"(x) -> and", "parse error at 1:8: unexpected 'and'"},
        {"(x) -> x and", "parse error at 1:13: unexpected end of input"},
        {"(x) -> ()", "parse error at 1:9: unexpected ')'"},
        {"(x) -> x -> x", "parse error at 1:10: unexpected '->' after the expression"},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) expect_error(c[i][0], c[i][1]);
}

/* pre, then n1 copies of s1, then mid, then n2 copies of s2 (malloc'd). */
static char *repeat(const char *pre, const char *s1, int n1, const char *mid, const char *s2,
                    int n2) {
    sbuf b = {0};
    sput(&b, "%s", pre);
    for (int i = 0; i < n1; i++) sput(&b, "%s", s1);
    sput(&b, "%s", mid);
    for (int i = 0; i < n2; i++) sput(&b, "%s", s2);
    return b.s;
}

/* Nesting has no limit: what used to be refused past 1,000 levels parses. */
Test(parse, deep_nesting) {
    char *src = repeat("(x) -> ", "(", 2000, "x", ")", 2000);
    lf_fn *f = parse_ok(src);
    cr_assert_eq(f->nexprs, 1);
    free(src);
    src = repeat("(x) -> ", "-", 100001, "x", "", 0);
    f = parse_ok(src);
    cr_assert_eq(f->nexprs, 100002);
    double one = 1;
    cr_assert_eq(eval_fn(f, LF_F64, &one, NULL), -1.0);
    free(src);
    src = repeat("(x) -> x", "**x", 5000, "", "", 0);
    f = parse_ok(src);
    cr_assert_eq(f->nexprs, 5001);
    cr_assert_eq(result_of(f)->op, LF_OP_POW);
    cr_assert_eq(f->exprs[result_of(f)->arg[0]].kind, EXPR_PARAM); /* right-nested */
    free(src);
    src = repeat("(x) -> sin(", "sin(", 3000, "x", ")", 3001);
    f = parse_ok(src);
    cr_assert_eq(f->nexprs, 3002);
    free(src);

    /* long flat chains are fine too */
    src = repeat("(x) -> x", " + x", 100000, "", "", 0);
    f = parse_ok(src);
    cr_assert_eq(f->nexprs, 100001);
    cr_assert_eq(eval_fn(f, LF_F64, &one, NULL), 100001.0);
    free(src);
}

/* ---- deep expressions on small thread stacks ------------------------------------------------ */

/* Thread stacks can be small (musl's default is 128 KiB, and programs that
 * make many threads ask for less): parsing, printing and every walk over an
 * fn must fit in SMALL_STACK whatever the nesting depth. */
#define SMALL_STACK ((size_t)64 * 1024)

#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define UNDER_VALGRIND() RUNNING_ON_VALGRIND
#endif
#endif
#ifndef UNDER_VALGRIND
#define UNDER_VALGRIND() 0
#endif

/* Depth n for the deep tests, a tenth of it under valgrind (the parser runs
 * some 50 times slower there; n/10 is still far past what a recursive parser
 * fits in 64 KiB). */
static int deep_n(int n) { return UNDER_VALGRIND() ? n / 10 : n; }

/* Runs fn(arg) on a new thread with a SMALL_STACK stack (PTHREAD_STACK_MIN
 * if that is larger) and waits for it. A stack overflow kills the test's
 * process, which Criterion reports as a crash. fn must not assert (the
 * assertions belong to the test's own thread): it stores what it saw. */
static void on_small_stack(void *(*fn)(void *), void *arg) {
    size_t size = SMALL_STACK;
    if (size < (size_t)PTHREAD_STACK_MIN) size = (size_t)PTHREAD_STACK_MIN;
    pthread_attr_t attr;
    pthread_t th;
    cr_assert_eq(pthread_attr_init(&attr), 0);
    cr_assert_eq(pthread_attr_setstacksize(&attr, size), 0);
    cr_assert_eq(pthread_create(&th, &attr, fn, arg), 0);
    cr_assert_eq(pthread_join(th, NULL), 0);
    pthread_attr_destroy(&attr);
}

/* On the thread: parse src into g, print the fn (when it parsed) and parse
 * the text back into g; or, when src is NULL, start from the fn given. */
typedef struct parse_job {
    lf_graph *g;     /* in: where the fns go */
    const char *src; /* in: the text to parse, or NULL */
    lf_fn *fn;       /* in (src NULL) or out: the fn */
    char *printed;   /* out: lf_fn_print of fn (malloc'd), or NULL */
    lf_fn *again;    /* out: printed parsed into g, or NULL */
    bool equal;      /* out: lf_fn_equal(fn, again) */
} parse_job;

static void *parse_thread(void *arg) {
    parse_job *j = arg;
    if (j->src) j->fn = lf_fn_parse(j->g, j->src);
    if (!j->fn) return NULL;
    int n = lf_fn_print(j->fn, NULL, 0);
    if (n < 0 || !(j->printed = malloc((size_t)n + 1))) return NULL;
    if (lf_fn_print(j->fn, j->printed, (size_t)n + 1) != n) return NULL;
    j->again = lf_fn_parse(j->g, j->printed);
    j->equal = j->again && lf_fn_equal(j->fn, j->again);
    return NULL;
}

/* Parses src on a small stack; asserts that it parses into nexprs
 * expressions, prints as `printed` (when not NULL) and reads back equal. */
static void deep_ok(const char *src, int nexprs, const char *printed) {
    lf_graph *dg = lf_graph_new(ctx);
    cr_assert(dg != NULL);
    parse_job j = {.g = dg, .src = src};
    on_small_stack(parse_thread, &j);
    cr_assert(j.fn != NULL, "%.60s...: %s", src, lf_graph_errmsg(dg));
    cr_assert_eq(j.fn->nexprs, nexprs, "%.60s...: %d expressions", src, j.fn->nexprs);
    cr_assert(j.printed != NULL, "%.60s...: not printed", src);
    if (printed) cr_assert_str_eq(j.printed, printed, "%.60s...", src);
    cr_assert(j.again != NULL, "%.60s...: the printed text does not parse: %s", src,
              lf_graph_errmsg(dg));
    cr_assert(j.equal, "%.60s...: the printed text parses to another fn", src);
    free(j.printed);
    lf_graph_free(dg);
}

/* Parses src on a small stack; asserts the exact parse error. */
static void deep_error(const char *src, const char *msg) {
    lf_graph *dg = lf_graph_new(ctx);
    cr_assert(dg != NULL);
    parse_job j = {.g = dg, .src = src};
    on_small_stack(parse_thread, &j);
    cr_assert_null(j.fn, "%.60s... parsed", src);
    cr_assert_eq(lf_graph_status(dg), LF_ERR_PARSE, "%.60s...: %s", src, lf_graph_errmsg(dg));
    cr_assert_str_eq(lf_graph_errmsg(dg), msg, "%.60s...", src);
    lf_graph_free(dg);
}

/* 100,000 levels of every kind of nesting the grammar has, on a 64 KiB
 * stack: each parses (and round-trips) or is a clean parse error. */
Test(parse, deep_inputs_small_stack) {
    const int N = deep_n(100000);
    char msg[128];
    char *s;
    /* parentheses */
    s = repeat("(x) -> ", "(", N, "x", ")", N);
    deep_ok(s, 1, "(x) -> x");
    free(s);
    s = repeat("(x) -> ", "(", N, "x", ")", N - 1);
    snprintf(msg, sizeof msg, "parse error at 1:%d: expected ')'", 7 + N + 1 + N - 1 + 1);
    deep_error(s, msg);
    free(s);
    /* unary minus (and plus, and not) */
    s = repeat("(x) -> ", "-", N, "x", "", 0);
    deep_ok(s, N + 1, s);
    free(s);
    s = repeat("(x) -> ", "-", N, "", "", 0);
    snprintf(msg, sizeof msg, "parse error at 1:%d: unexpected end of input", 7 + N + 1);
    deep_error(s, msg);
    free(s);
    s = repeat("(x) -> ", "-+", N, "x", "", 0);
    deep_ok(s, N + 1, NULL);
    free(s);
    s = repeat("(x) -> ", "not ", N, "x", "", 0);
    deep_ok(s, N + 1, s);
    free(s);
    s = repeat("(x) -> ", "-(", N, "1", ")", N); /* negations of a literal */
    deep_ok(s, N + 1, NULL);
    free(s);
    /* a right-nested power chain */
    s = repeat("(x) -> x", "**x", N - 1, "", "", 0);
    deep_ok(s, N, s);
    free(s);
    s = repeat("(x) -> x", "**-x", N - 1, "", "", 0); /* exponents negated: 2**-x */
    deep_ok(s, 2 * N - 1, s);
    free(s);
    s = repeat("(x) -> x", "**x", N - 1, "**", "", 0);
    snprintf(msg, sizeof msg, "parse error at 1:%d: unexpected end of input", 8 + 3 * (N - 1) + 3);
    deep_error(s, msg);
    free(s);
    /* a left-nested chain in parentheses: ((x + 1)*2 + 1)*2 */
    s = repeat("(x) -> ", "(", N, "x", " + 1)*2", N);
    deep_ok(s, 2 * N + 3, s);
    free(s);
    /* nested calls, in the last and in the first argument */
    s = repeat("(x) -> ", "exp(", N, "x", ")", N);
    deep_ok(s, N + 1, s);
    free(s);
    s = repeat("(x) -> ", "exp(", N, "x", ")", N - 1);
    snprintf(msg, sizeof msg, "parse error at 1:%d: expected ')'", 7 + 4 * N + 1 + N - 1 + 1);
    deep_error(s, msg);
    free(s);
    s = repeat("(x, y) -> ", "atan2(y, ", N, "x", ")", N);
    deep_ok(s, N + 2, s);
    free(s);
    s = repeat("(x, y) -> ", "where(", N, "x", ", x, y)", N);
    deep_ok(s, N + 2, s);
    free(s);
    s = repeat("(x) -> ", "f32(", N, "x", ")", N);
    deep_ok(s, N + 1, s);
    free(s);
    s = repeat("(x) -> ", "sin(", N, "x, x", ")", N);
    snprintf(msg, sizeof msg, "parse error at 1:%d: 'sin' takes 1 argument, got 2",
             7 + 4 * (N - 1) + 1);
    deep_error(s, msg);
    free(s);
}

/* A builder fn of the given depth: each level applies a random operator
 * (or a cast) to the level below, put in a random operand position; the
 * other operands are parameters and constants, negative ones included. */
static lf_fn *deep_builder_fn(lf_graph *dg, int depth) {
    lf_fn *f = lf_fn_new(dg, 2);
    cr_assert(f != NULL);
    int e = lf_fn_param(f, 0);
    for (int i = 0; i < depth; i++) {
        if (tu_rand() % 12 == 0) {
            e = lf_fn_cast(f, (lf_dtype)(tu_rand() % LF_NDTYPES), e);
            continue;
        }
        lf_op op = (lf_op)(tu_rand() % LF_NOPS);
        int arity = graph_ops[op].arity, at = (int)(tu_rand() % (unsigned)arity);
        int a[3] = {-1, -1, -1};
        for (int k = 0; k < arity; k++) {
            unsigned r = tu_rand() % 4;
            a[k] = k == at ? e
                 : r == 0  ? lf_fn_param(f, 1)
                 : r == 1  ? lf_fn_const_int(f, rand_int())
                 : r == 2  ? lf_fn_const(f, rand_double())
                           : lf_fn_param(f, 0);
        }
        e = lf_fn_op(f, op, a[0], a[1], a[2]);
    }
    cr_assert_eq(lf_fn_set_result(f, e), LF_OK, "%s", lf_graph_errmsg(dg));
    return f;
}

/* A builder fn 200,000 levels deep prints as text that parses back to an
 * equal fn, all on a 64 KiB stack: the parser takes any depth the builder
 * can make. */
Test(parse, deep_builder_roundtrip_small_stack) {
    lf_graph *dg = lf_graph_new(ctx);
    cr_assert(dg != NULL);
    int depth = deep_n(200000);
    lf_fn *f = deep_builder_fn(dg, depth);
    cr_assert(f->nexprs > depth);
    parse_job j = {.g = dg, .fn = f};
    on_small_stack(parse_thread, &j);
    cr_assert(j.printed != NULL, "not printed");
    cr_assert(j.again != NULL, "the printed text does not parse: %s", lf_graph_errmsg(dg));
    cr_assert(j.equal, "the printed text parses to another fn");
    cr_assert_eq(j.again->nexprs, f->nexprs);
    free(j.printed);
    lf_graph_free(dg);
}

/* On the thread: parse src, map it twice over x (fusion composes the two),
 * draw both DOT views, evaluate on the context's backend (the reference
 * evaluator), plan, interpret the schedule and emit every kernel in both
 * dialects. */
typedef struct walk_job {
    lf_graph *g;            /* in */
    lf_buffer *xb, *out;    /* in: input and result buffers */
    const char *src;        /* in */
    lf_fn *fn;              /* out: the parsed fn */
    lf_status dot, eval;    /* out: lf_dump_dot (both views), lf_eval */
    lf_status plan, interp; /* out: fuse_plan, fuse_interpret */
    double *interp_result;  /* out: fuse_interpret's result (graph_malloc'd) */
    size_t emitted;         /* out: bytes of source emitted */
    bool nomem;             /* out: an emitter ran out of memory */
} walk_job;

static void *walk_thread(void *arg) {
    walk_job *j = arg;
    j->dot = j->eval = j->plan = j->interp = LF_ERR_STATE;
    if (!(j->fn = lf_fn_parse(j->g, j->src))) return NULL;
    lf_node *x = lf_input(j->g, j->xb);
    lf_node *z = lf_map(j->g, j->fn, lf_map(j->g, j->fn, x));
    FILE *devnull = fopen("/dev/null", "w");
    if (!devnull) return NULL;
    j->dot = lf_dump_dot(j->g, 1, &z, LF_DOT_GRAPH, devnull);
    if (j->dot == LF_OK) j->dot = lf_dump_dot(j->g, 1, &z, LF_DOT_FUSED, devnull);
    fclose(devnull);
    j->eval = lf_eval(j->g, 1, &z, &j->out);
    fuse_schedule *s = NULL;
    if ((j->plan = fuse_plan(j->g, 1, &z, true, &s)) != LF_OK) return NULL;
    void *results[1] = {NULL};
    j->interp = fuse_interpret(s, results);
    j->interp_result = results[0];
    for (int k = 0; k < s->nkernels; k++) {
        cg_layout *lay = cg_layout_new(s, k);
        if (!lay) {
            j->nomem = true;
            break;
        }
        const cg_dialect *d[2] = {cg_dialect_c(false), cg_dialect_cuda()};
        for (int i = 0; i < 2; i++) {
            cg_text t = {0};
            cg_emit_kernel(s, lay, d[i], &t);
            j->emitted += t.len;
            j->nomem |= t.nomem;
            cg_text_free(&t);
        }
        graph_free(lay);
    }
    fuse_schedule_free(s);
    return NULL;
}

/* Every walk over a deep fn's expressions (parsing, printing for DOT
 * labels, typing, hash-consing as fusion composes two fns, the reference
 * evaluator, the schedule interpreter, the C and CUDA emitters) runs on a
 * 64 KiB stack: none of them recurses over the expression DAG. */
Test(parse, deep_fn_walks_small_stack) {
    enum { LEN = 5 };
    const int N = deep_n(20000);
    /* sin(1 - -sin(1 - ...x...)*0.5): values stay in [-1, 1] */
    char *src = repeat("(x) -> ", "sin(1 - -", N, "x", "*0.5)", N);
    double xs[LEN] = {0.0, -0.0, 1.5, -3.0, NAN}, want[LEN], got[LEN];
    int64_t n = LEN;
    walk_job j = {.g = g, .src = src};
    j.xb = tu_buf(ctx, LF_F64, 1, &n, xs);
    j.out = tu_buf(ctx, LF_F64, 1, &n, NULL);
    on_small_stack(walk_thread, &j);
    cr_assert(j.fn != NULL, "parse: %s", lf_graph_errmsg(g));
    cr_assert_eq(j.fn->nexprs, 4 * N + 3);
    cr_assert_eq(j.dot, LF_OK, "dot: %s", lf_graph_errmsg(g));
    cr_assert_eq(j.eval, LF_OK, "eval: %s", lf_errmsg(ctx));
    cr_assert_eq(j.plan, LF_OK, "plan: %s", lf_errmsg(ctx));
    cr_assert_eq(j.interp, LF_OK, "interpret: %s", lf_errmsg(ctx));
    cr_assert(!j.nomem && j.emitted > (size_t)2 * N * 20, "%zu bytes emitted", j.emitted);
    /* the same values on the scalar evaluator, here, on the full stack */
    lf_fn *f = parse_ok(src);
    for (int i = 0; i < LEN; i++) want[i] = eval_fn(f, LF_F64, &xs[i], NULL);
    for (int i = 0; i < LEN; i++) want[i] = eval_fn(f, LF_F64, &want[i], NULL);
    tu_read(j.out, got);
    for (int i = 0; i < LEN; i++) {
        cr_assert(tu_close(got[i], want[i], 0, 0), "eval: x=%g: %g, want %g", xs[i], got[i],
                  want[i]);
        cr_assert(tu_close(j.interp_result[i], want[i], 0, 0), "interpret: x=%g: %g, want %g",
                  xs[i], j.interp_result[i], want[i]);
    }
    graph_free(j.interp_result);
    lf_buffer_free(j.xb);
    lf_buffer_free(j.out);
    free(src);
}

Test(parse, null_and_sticky) {
    cr_assert_null(lf_fn_parse(NULL, "(x) -> x"));
    cr_assert(strlen(lf_errmsg(NULL)) > 0);

    cr_assert_null(lf_fn_parse(g, NULL));
    cr_assert_eq(lf_graph_status(g), LF_ERR_NULL);

    lf_graph *eg = lf_graph_new(ctx);
    lf_fn *good = lf_fn_parse(eg, "(x) -> x + 1");
    cr_assert_not_null(good);
    cr_assert_null(lf_fn_parse(eg, "(x) -> x +"));
    const char *first = "parse error at 1:11: unexpected end of input";
    cr_assert_str_eq(lf_graph_errmsg(eg), first);
    /* sticky: later calls fail and keep the first message */
    cr_assert_null(lf_fn_parse(eg, "(x) -> x * 2"));
    cr_assert_null(lf_fn_parse(eg, "(x) -> )"));
    cr_assert_str_eq(lf_graph_errmsg(eg), first);
    cr_assert_eq(lf_graph_status(eg), LF_ERR_PARSE);
    int64_t n = 4;
    lf_buffer *xb = tu_buf(ctx, LF_F32, 1, &n, NULL);
    lf_node *x = lf_input(eg, xb);
    cr_assert_null(lf_map(eg, good, x));
    cr_assert_str_eq(lf_graph_errmsg(eg), first);
    lf_graph_free(eg);
}

/* ---- printing ------------------------------------------------------------------------------ */

Test(parse, print_truncates) {
    lf_fn *f = parse_ok(GAUSS);
    char *full = print(f);
    int n = (int)strlen(full);
    char buf[256];
    for (int cap = 0; cap <= n + 2; cap++) {
        memset(buf, 'Z', sizeof buf);
        cr_assert_eq(lf_fn_print(f, cap ? buf : NULL, (size_t)cap), n, "cap %d", cap);
        if (cap == 0) {
            cr_assert_eq(buf[0], 'Z');
            continue;
        }
        size_t kept = (size_t)cap - 1 < (size_t)n ? (size_t)cap - 1 : (size_t)n;
        cr_assert_eq(strlen(buf), kept, "cap %d", cap);
        cr_assert(!strncmp(buf, full, kept), "cap %d", cap);
        cr_assert_eq(buf[cap], 'Z', "cap %d: wrote past the end", cap);
    }
    /* a buffer but cap 0: untouched */
    memset(buf, 'Z', sizeof buf);
    cr_assert_eq(lf_fn_print(f, buf, 0), n);
    cr_assert_eq(buf[0], 'Z');
    free(full);

    cr_assert_eq(lf_fn_print(NULL, buf, sizeof buf), -1);
    lf_fn *unfinished = lf_fn_new(g, 2);
    cr_assert_eq(lf_fn_print(unfinished, buf, sizeof buf), -1);
}

Test(parse, print_builder_fns) {
    lf_fn *f = lf_fn_new(g, 2);
    int a = lf_fn_param(f, 0), b = lf_fn_param(f, 1);
    int two = lf_fn_const_int(f, 2), half = lf_fn_const(f, 0.5);
    /* -(2) * p0 + (p1 - 0.5)**-p0 */
    int t = lf_fn_op(f, LF_OP_MUL, lf_fn_op(f, LF_OP_NEG, two, -1, -1), a, -1);
    int u = lf_fn_op(f, LF_OP_POW, lf_fn_op(f, LF_OP_SUB, b, half, -1),
                     lf_fn_op(f, LF_OP_NEG, a, -1, -1), -1);
    cr_assert_eq(lf_fn_set_result(f, lf_fn_op(f, LF_OP_ADD, t, u, -1)), LF_OK);
    char *s = roundtrip(f);
    cr_assert_str_eq(s, "(p0, p1) -> -(2)*p0 + (p1 - 0.5)**-p0");
    free(s);
}

Test(parse, print_deep_and_shared) {
    /* a deep chain prints (and parses back: deep_builder_roundtrip_small_stack) */
    lf_fn *f = lf_fn_new(g, 1);
    int e = lf_fn_param(f, 0);
    for (int i = 0; i < 50000; i++) e = lf_fn_op(f, i % 2 ? LF_OP_NEG : LF_OP_SIN, e, -1, -1);
    cr_assert_eq(lf_fn_set_result(f, e), LF_OK);
    char *s = print(f);
    cr_assert(!strncmp(s, "(p0) -> -sin(-sin(", 18), "%.40s", s);
    free(s);

    /* a shared subexpression is written out at each use: 2^k growth */
    lf_fn *d = lf_fn_new(g, 1);
    e = lf_fn_param(d, 0);
    for (int i = 0; i < 12; i++) e = lf_fn_op(d, LF_OP_MUL, e, lf_fn_op(d, LF_OP_SIN, e, -1, -1), -1);
    cr_assert_eq(lf_fn_set_result(d, e), LF_OK);
    s = roundtrip(d); /* hash-consing folds the text back to 25 expressions */
    free(s);

    /* too long for an int: -1, fast, and the buffer still holds a prefix */
    lf_fn *h = lf_fn_new(g, 1);
    e = lf_fn_param(h, 0);
    for (int i = 0; i < 100; i++) e = lf_fn_op(h, LF_OP_ADD, e, e, -1);
    cr_assert_eq(lf_fn_set_result(h, e), LF_OK);
    char buf[64];
    cr_assert_eq(lf_fn_print(h, buf, sizeof buf), -1);
    cr_assert_eq(strlen(buf), sizeof buf - 1);
    cr_assert(!strncmp(buf, "(p0) -> p0 + p0 + (p0 + p0) + (", 31), "%s", buf);
}

Test(parse, allocation_failures) {
    size_t before = lf_debug_live_bytes();
    for (int k = 1; k < 200; k++) {
        lf_graph *ag = lf_graph_new(ctx);
        cr_assert(ag != NULL);
        lf_debug_fail_alloc(k, false);
        lf_fn *f = lf_fn_parse(ag, POLAR);
        lf_debug_fail_alloc(0, false);
        if (f) {
            free(roundtrip_in(ag, f));
        } else {
            cr_assert_eq(lf_graph_status(ag), LF_ERR_NOMEM, "k=%d: %s", k, lf_graph_errmsg(ag));
        }
        lf_graph_free(ag);
    }
    /* deep enough for the parser's stack of frames to grow (it starts at 64) */
    char *deep = repeat("(x) -> ", "sin(-", 300, "x", ")", 300);
    bool parsed = false;
    for (int k = 1; k < 200 && !parsed; k++) {
        lf_graph *ag = lf_graph_new(ctx);
        cr_assert(ag != NULL);
        lf_debug_fail_alloc(k, false);
        lf_fn *f = lf_fn_parse(ag, deep);
        lf_debug_fail_alloc(0, false);
        if ((parsed = f != NULL)) cr_assert_eq(f->nexprs, 601);
        else cr_assert_eq(lf_graph_status(ag), LF_ERR_NOMEM, "k=%d: %s", k, lf_graph_errmsg(ag));
        lf_graph_free(ag);
    }
    cr_assert(parsed);
    free(deep);
    cr_assert_eq(lf_debug_live_bytes(), before);
}

/* ---- README.md's operator table --------------------------------------------------------- */

/* The README's "Expression syntax" block lists the operator levels, one a
 * line, rising. Every symbol or keyword operator of the op table must be on
 * it (prefix symbols on the "unary" line), and the order must be the
 * parser's: for two infix operators L on a lower line than H, "a L (b H c)"
 * prints without parentheses; on the same line it keeps them. */
#define README_MAX_LEVELS 32
typedef struct {
    char tok[README_MAX_LEVELS][12][8]; /* operators of each level */
    int ntok[README_MAX_LEVELS];
    bool unary[README_MAX_LEVELS];      /* the line starts with "unary" */
    int nlevels;
} readme_levels;

static void read_readme_levels(readme_levels *rl) {
    FILE *fp = fopen(LF_TEST_README, "r");
    cr_assert(fp != NULL, "cannot open %s", LF_TEST_README);
    memset(rl, 0, sizeof *rl);
    char line[512];
    int state = 0; /* 0 before the heading line, 1 before the fence, 2 inside */
    while (fgets(line, sizeof line, fp) && state < 3) {
        if (state == 0 && strstr(line, "Operators, by rising precedence")) state = 1;
        else if (state == 1 && !strncmp(line, "```", 3)) state = 2;
        else if (state == 2 && !strncmp(line, "```", 3)) state = 3;
        else if (state == 2) {
            cr_assert_lt(rl->nlevels, README_MAX_LEVELS);
            char *end = strstr(line, "    "); /* the operators end at a run of spaces */
            if (end) *end = '\0';
            int lv = rl->nlevels++, depth = 0;
            for (char *t = strtok(line, " \t\n"); t; t = strtok(NULL, " \t\n")) {
                if (t[0] == '(') depth++;
                bool skip = depth > 0 || !strcmp(t, "unary");
                if (t[strlen(t) - 1] == ')') depth--;
                if (!strcmp(t, "unary")) rl->unary[lv] = true;
                if (skip) continue;
                cr_assert_lt(rl->ntok[lv], 12);
                cr_assert_lt(strlen(t), sizeof rl->tok[0][0]);
                strcpy(rl->tok[lv][rl->ntok[lv]++], t);
            }
        }
    }
    fclose(fp);
    cr_assert_eq(state, 3, "README.md: no operator table after \"Operators, by rising precedence\"");
}

/* The README level of op (prefix symbols: only on the "unary" line), -1 when missing. */
static int readme_level(const readme_levels *rl, lf_op op) {
    const op_info *oi = &graph_ops[op];
    bool prefix_sym = oi->syntax == OPSYN_PREFIX && !(oi->text[0] >= 'a' && oi->text[0] <= 'z');
    for (int lv = 0; lv < rl->nlevels; lv++) {
        if (prefix_sym != rl->unary[lv]) continue;
        for (int t = 0; t < rl->ntok[lv]; t++)
            if (!strcmp(rl->tok[lv][t], oi->text)) return lv;
    }
    return -1;
}

Test(parse, readme_operator_table) {
    readme_levels rl;
    read_readme_levels(&rl);
    int level[LF_NOPS];
    for (int op = 0; op < LF_NOPS; op++) {
        level[op] = -1;
        if (graph_ops[op].syntax == OPSYN_CALL) continue;
        level[op] = readme_level(&rl, (lf_op)op);
        cr_expect_geq(level[op], 0, "README.md's operator table does not list %s \"%s\"",
                      graph_ops[op].syntax == OPSYN_INFIX ? "infix" : "prefix", graph_ops[op].text);
    }
    for (int l = 0; l < LF_NOPS; l++)
        for (int h = 0; h < LF_NOPS; h++) {
            if (l == h || level[l] < 0 || level[h] < 0 || level[l] > level[h]) continue;
            if (graph_ops[l].syntax != OPSYN_INFIX || graph_ops[h].syntax != OPSYN_INFIX) continue;
            char src[96];
            snprintf(src, sizeof src, "(a, b, c) -> a %s (b %s c)", graph_ops[l].text, graph_ops[h].text);
            char *s = print(parse_ok(src));
            bool parens = strchr(strstr(s, "->"), '(') != NULL;
            cr_expect_eq(parens, level[l] == level[h],
                         "README.md puts \"%s\" %s \"%s\", but %s prints as %s", graph_ops[l].text,
                         level[l] == level[h] ? "on the level of" : "below", graph_ops[h].text, src, s);
            free(s);
        }
}

/* Integer literals beyond int64 (up to 38 digits) parse, print back with
 * their digits as written (not their nearest double: 2^63 + 1 and 2^63 are
 * one double) and reparse to the same fn; two such literals that share a
 * double stay two expressions. */
Test(parse, integer_literals_beyond_int64) {
    static const struct {
        const char *src, *printed;
    } cs[] = {
        {"(x) -> x < 9223372036854775808", "9223372036854775808"},
        {"(x) -> x < 9223372036854775809", "9223372036854775809"},
        {"(x) -> x > -9223372036854775809", "(-9223372036854775809)"},
        {"(x) -> x < 00012345678901234567890123456789012345678", "12345678901234567890123456789012345678"},
        {"(x) -> x == 10000000000000000000", "10000000000000000000"},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        char *s = roundtrip(parse_ok(cs[i].src));
        cr_expect(strstr(s, cs[i].printed) != NULL, "%s printed as \"%s\", want %s in it", cs[i].src, s, cs[i].printed);
        free(s);
    }
    lf_fn *two = parse_ok("(x) -> (x < 9223372036854775808) + (x < 9223372036854775809)");
    char *s = print(two);
    cr_expect(strstr(s, "9223372036854775808") && strstr(s, "9223372036854775809"), "one literal left: %s", s);
    free(s);
}
