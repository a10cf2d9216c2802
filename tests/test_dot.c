/* tests/test_dot.c: the graph visualizer (lf_dump_dot, both views).
 *
 * For every seed example: both views are well-formed DOT (structural check:
 * a digraph, balanced braces and quotes, every edge between declared nodes),
 * the fused view has one cluster per kernel the same plan runs (compared with
 * lf_ctx_last_stats after an eval), and when Graphviz's dot is installed it
 * parses each file (dot -Tsvg exits 0). Plus the error cases.
 */
#include "testutil.h"
#include "seed_examples.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Writes one view into a malloc'd string. */
static char *dump(lf_graph *g, int n, lf_node **outs, lf_dot_mode mode, lf_ctx *ctx) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    cr_assert_not_null(f);
    lf_status st = lf_dump_dot(g, n, outs, mode, f);
    fclose(f);
    cr_assert_eq(st, LF_OK, "dump_dot: %s", lf_errmsg(ctx));
    return text;
}

static int count(const char *text, const char *needle) {
    int k = 0;
    for (const char *p = text; (p = strstr(p, needle)); p++) k++;
    return k;
}

/* Structural DOT check: digraph, balanced braces outside strings, closed
 * strings, and every "a -> b" edge names nodes declared with a label. */
static void check_dot(const char *name, const char *text) {
    cr_assert(strncmp(text, "digraph ", 8) == 0, "%s: not a digraph", name);
    int depth = 0;
    bool in_str = false;
    for (const char *p = text; *p; p++) {
        if (in_str) {
            if (*p == '\\' && p[1]) p++;
            else if (*p == '"') in_str = false;
        } else if (*p == '"') in_str = true;
        else if (*p == '{') depth++;
        else if (*p == '}') cr_assert_geq(--depth, 0, "%s: unbalanced braces", name);
    }
    cr_assert_not(in_str, "%s: unterminated string", name);
    cr_assert_eq(depth, 0, "%s: unbalanced braces", name);
    /* edges are lines "  a -> b ..." (an fn's "->" inside a label is not) */
    int edges = 0;
    for (const char *line = text; line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        char from[32], to[32], decl[40];
        if (sscanf(line, " %31[a-z0-9] -> %31[a-z0-9]", from, to) != 2) continue;
        edges++;
        snprintf(decl, sizeof decl, " %s [", from);
        cr_assert(strstr(text, decl), "%s: edge from undeclared node %s", name, from);
        snprintf(decl, sizeof decl, " %s [", to);
        cr_assert(strstr(text, decl), "%s: edge to undeclared node %s", name, to);
    }
    /* a one-node graph (random_fill's graph view: a lone source that is the
       output) has no edge to draw */
    if (count(text, "[label=") > 1) cr_assert_gt(edges, 0, "%s: no edges", name);
}

/* Runs `dot -Tsvg` on text when dot is installed; asserts it accepts it. */
static void graphviz_parses(const char *name, const char *text) {
    if (system("command -v dot >/dev/null 2>&1") != 0) return;
    char path[] = "/tmp/lazyfuse-dot-test-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    FILE *f = fdopen(fd, "w");
    fputs(text, f);
    fclose(f);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "dot -Tsvg %s -o /dev/null 2>/dev/null", path);
    int rc = system(cmd);
    unlink(path);
    cr_assert_eq(rc, 0, "%s: dot -Tsvg rejected the output", name);
}

Test(dot, seed_examples_both_views) {
    for (int i = 0; i < seed_nexamples; i++) {
        const seed_example *ex = &seed_examples[i];
        for (int fusion = 0; fusion <= 1; fusion++) {
            lf_ctx_options o;
            lf_ctx_options_init(&o);
            o.fusion = fusion;
            lf_ctx *ctx = lf_ctx_new(&o);
            lf_graph *g = lf_graph_new(ctx);
            lf_node *outs[SEED_MAX_OUTS];
            int64_t n = strcmp(ex->name, "matmul_zip_reduce") == 0 ? 5 : 7;
            int nout = ex->build(ctx, g, n, outs);
            cr_assert_gt(nout, 0, "%s: %s", ex->name, lf_errmsg(ctx));
            char *graph = dump(g, nout, outs, LF_DOT_GRAPH, ctx);
            char *fused = dump(g, nout, outs, LF_DOT_FUSED, ctx);
            check_dot(ex->name, graph);
            check_dot(ex->name, fused);
            cr_assert_eq(count(graph, "subgraph"), 0);
            /* every node of the graph view carries dtype and shape */
            cr_assert(strstr(graph, "f32 ["), "%s: no dtype/shape label", ex->name);
            lf_buffer *dst[SEED_MAX_OUTS];
            for (int k = 0; k < nout; k++) dst[k] = lf_buffer_new_like(ctx, outs[k]);
            cr_assert_eq(lf_eval(g, nout, outs, dst), LF_OK, "%s", lf_errmsg(ctx));
            lf_eval_stats st;
            cr_assert_eq(lf_ctx_last_stats(ctx, &st), LF_OK);
            cr_assert_eq(count(fused, "subgraph cluster_k"), st.kernels,
                         "%s (fusion %d): %d clusters, %d kernels", ex->name, fusion,
                         count(fused, "subgraph cluster_k"), st.kernels);
            if (st.bytes_materialized == 0)
                cr_assert_eq(count(fused, "label=\"temporary"), 0, "%s: temporaries drawn", ex->name);
            else
                cr_assert_gt(count(fused, "label=\"temporary"), 0, "%s: temporaries not drawn", ex->name);
            graphviz_parses(ex->name, graph);
            graphviz_parses(ex->name, fused);
            free(graph);
            free(fused);
            lf_ctx_destroy(ctx);
        }
    }
}

Test(dot, labels_are_escaped) {
    lf_ctx *ctx = tu_ctx();
    lf_graph *g = lf_graph_new(ctx);
    int64_t n = 3;
    lf_buffer *b = tu_buf(ctx, LF_F64, 1, &n, NULL);
    /* a long fn: the label is cut with "..." and stays valid DOT */
    lf_fn *f = lf_fn_parse(g, "(x) -> where(x > 0, sin(x)*cos(x)*tan(x)*exp(x)*log(x)*sqrt(x)*cbrt(x)*"
                                  "erf(x)*tanh(x)*sinh(x)*cosh(x)*atan(x)*asin(x), -x) + 1");
    cr_assert_not_null(f, "%s", lf_errmsg(ctx));
    lf_node *y = lf_map(g, f, lf_input(g, b));
    char *text = dump(g, 1, &y, LF_DOT_GRAPH, ctx);
    check_dot("long fn", text);
    cr_assert(strstr(text, "..."), "long label not shortened");
    graphviz_parses("long fn", text);
    free(text);
    text = dump(g, 0, NULL, LF_DOT_GRAPH, ctx); /* n = 0: every node */
    check_dot("all nodes", text);
    free(text);
    lf_ctx_destroy(ctx);
}

Test(dot, errors) {
    lf_ctx *ctx = tu_ctx();
    lf_graph *g = lf_graph_new(ctx);
    lf_node *x = lf_iota(g, LF_F32, 4);
    FILE *f = fopen("/dev/null", "w");
    cr_assert_eq(lf_dump_dot(NULL, 1, &x, LF_DOT_GRAPH, f), LF_ERR_NULL);
    cr_assert_str_eq(lf_errmsg(NULL), "dump_dot: graph is NULL");
    cr_assert_eq(lf_dump_dot(g, 1, &x, LF_DOT_GRAPH, NULL), LF_ERR_NULL);
    cr_assert_eq(lf_dump_dot(g, 0, NULL, LF_DOT_FUSED, f), LF_ERR_INVALID);
    cr_assert_str_eq(lf_errmsg(ctx), "dump_dot: the fused view needs outputs");
    cr_assert_eq(lf_dump_dot(g, 1, &x, (lf_dot_mode)7, f), LF_ERR_INVALID);
    lf_node *none = NULL;
    cr_assert_eq(lf_dump_dot(g, 1, &none, LF_DOT_GRAPH, f), LF_ERR_NULL);
    lf_graph *other = lf_graph_new(ctx);
    lf_node *y = lf_iota(other, LF_F32, 4);
    cr_assert_eq(lf_dump_dot(g, 1, &y, LF_DOT_FUSED, f), LF_ERR_STATE);
    /* a graph with a sticky error reports it */
    cr_assert_null(lf_add(g, x, lf_iota(g, LF_F32, 5)));
    cr_assert_eq(lf_dump_dot(g, 1, &x, LF_DOT_GRAPH, f), LF_ERR_SHAPE);
    cr_assert(strstr(lf_errmsg(ctx), "do not broadcast"), "%s", lf_errmsg(ctx));
    fclose(f);
    lf_ctx_destroy(ctx);
}
