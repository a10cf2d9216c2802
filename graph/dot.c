/* graph/dot.c: Graphviz DOT of a deferred graph (the "graph" view).
 *
 * Draws the nodes the given outputs depend on (all nodes when n is 0), each
 * labelled with its id, what it computes, dtype and shape, with an edge from
 * each input to its consumer, and outputs marked. Labels are escaped so any
 * fn text is valid DOT. The fused view (kernels as clusters) is drawn by the
 * fusion stage with graph_dot_node_label for the same node labels.
 *
 * Also how error messages name a node (graph_node_str): the same names as
 * the labels, in one bounded line; it must never fail, allocate or write
 * past cap, since it runs on out-of-memory paths too.
 */
#include "graph/graph.h"

#include <string.h>

static const char *view_name(view_kind k) {
    switch (k) {
    case VIEW_RESHAPE: return "reshape";
    case VIEW_PERMUTE: return "permute";
    case VIEW_BROADCAST: return "broadcast_to";
    case VIEW_EXPAND: return "expand_dims";
    case VIEW_SLICE: return "slice";
    case VIEW_PAD: return "pad";
    case VIEW_CONCAT: return "concat";
    }
    return "view";
}

/* Appends printf-style text to buf of cap bytes at *len, never overflowing. */
static void append(char *buf, size_t cap, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void append(char *buf, size_t cap, size_t *len, const char *fmt, ...) {
    if (*len >= cap) return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(buf + *len, cap - *len, fmt, ap);
    va_end(ap);
    if (k > 0) *len += (size_t)k < cap - *len ? (size_t)k : cap - *len - 1;
}

/* Appends s with DOT string escapes (quotes and backslashes). */
static void append_escaped(char *buf, size_t cap, size_t *len, const char *s) {
    for (; *s && *len + 2 < cap; s++) {
        if (*s == '"' || *s == '\\') buf[(*len)++] = '\\';
        buf[(*len)++] = *s;
    }
    buf[*len] = 0;
}

const char *graph_dot_node_label(const lf_node *n, char *buf, size_t cap) {
    size_t len = 0;
    char shape[160], fn[96];
    buf[0] = 0;
    append(buf, cap, &len, "#%d ", n->id);
    switch (n->kind) {
    case NODE_INPUT: append(buf, cap, &len, n->ext ? "extern" : "input"); break; /* (its name may need escaping) */
    case NODE_CONST:
        if (graph_dtype_is_float(n->dtype)) append(buf, cap, &len, "const %g", n->u.value.f);
        else append(buf, cap, &len, "const %lld", (long long)n->u.value.i);
        break;
    case NODE_IOTA:
        append(buf, cap, &len, "iota %g + i*%g", n->u.iota.start, n->u.iota.step);
        break;
    case NODE_RANDOM: {
        static const char *const dist[] = {"uniform", "normal", "bits"};
        append(buf, cap, &len, "random %s seed %llu", dist[n->u.random.dist],
               (unsigned long long)n->u.random.seed);
        break;
    }
    case NODE_VIEW: append(buf, cap, &len, "%s", view_name(n->u.view.op)); break;
    case NODE_MAP: {
        int k = graph_fn_print(n->u.map.fn, fn, sizeof fn);
        if (k >= (int)sizeof fn) strcpy(fn + sizeof fn - 4, "...");
        append(buf, cap, &len, "%s ", n->ninputs == 1 ? "map" : "zipwith");
        append_escaped(buf, cap, &len, k < 0 ? "?" : fn);
        break;
    }
    case NODE_REDUCE: {
        append(buf, cap, &len, "reduce %s axes {", graph_reds[n->u.reduce.op].text);
        const char *sep = "";
        for (int d = 0; d < LF_MAX_DIMS; d++)
            if (n->u.reduce.axes & (1u << d)) {
                append(buf, cap, &len, "%s%d", sep, d);
                sep = ",";
            }
        append(buf, cap, &len, "}%s", n->u.reduce.keepdims ? " keepdims" : "");
        break;
    }
    case NODE_SCAN:
        append(buf, cap, &len, "scan %s axis %d%s", graph_reds[n->u.scan.op].text, n->u.scan.axis,
               n->u.scan.exclusive ? " exclusive" : "");
        break;
    case NODE_GATHER:
        append(buf, cap, &len, "%s axis %d", n->u.gather.take ? "take" : "gather", n->u.gather.axis);
        break;
    case NODE_SCATTER: {
        static const char *const ops[] = {"set", "add", "min", "max", "prod"};
        append(buf, cap, &len, "scatter %s axis %d", ops[n->u.scatter.op], n->u.scatter.axis);
        break;
    }
    case NODE_SORT: {
        /* "sort desc axis 1", "argsort axis 0", "topk k=10 largest axis 1",
           "argtopk k=10 largest axis 1" (the builders' names) */
        const lf_node *x = n->inputs[0];
        bool desc = n->u.sort.descending, ix = n->u.sort.indices;
        if (n->u.sort.k == x->shape[n->u.sort.axis])
            append(buf, cap, &len, "%s%s axis %d", ix ? "argsort" : "sort", desc ? " desc" : "", n->u.sort.axis);
        else
            append(buf, cap, &len, "%s k=%lld %s axis %d", ix ? "argtopk" : "topk", (long long)n->u.sort.k,
                   desc ? "largest" : "smallest", n->u.sort.axis);
        break;
    }
    }
    append(buf, cap, &len, "\\n%s %s", lf_dtype_name(n->dtype),
           graph_shape_str(shape, sizeof shape, n->ndim, n->shape));
    return buf;
}

/* ---- node names in messages ---- */

/* What made map node n, as the user wrote it: the operator of lf_apply and
 * its convenience calls (lower case: "add"), "select", "cast", else "map" or
 * "zipwith". Written into buf (cap > 0). */
static const char *map_name(const lf_node *n, char *buf, size_t cap) {
    static const char *const ids[LF_NOPS] = {
#define LF_OP(ID, text, arity, syntax, typing, cname) [LF_OP_##ID] = #ID,
#include "lazyfuse_ops.def"
    };
    const lf_graph *g = n->graph;
    const lf_fn *f = n->u.map.fn;
    for (int t = 0; t < LF_NDTYPES; t++)
        if (f && g->cast_fns[t] == f) return "cast";
    for (int op = 0; op < LF_NOPS; op++) {
        if (!f || g->op_fns[op] != f) continue;
        if (op == LF_OP_WHERE) return "select";
        size_t i = 0;
        for (; ids[op][i] && i + 1 < cap; i++) buf[i] = (char)(ids[op][i] >= 'A' && ids[op][i] <= 'Z' ? ids[op][i] - 'A' + 'a' : ids[op][i]);
        buf[i] = 0;
        return buf;
    }
    return n->ninputs == 1 ? "map" : "zipwith";
}

const char *graph_node_str(const lf_node *n, char *buf, size_t cap) {
    if (!buf || !cap) return buf;
    char what[64], name[16], shape[24 * LF_MAX_DIMS + 4];
    size_t len = 0;
    buf[0] = 0;
    if (!n) {
        append(buf, cap, &len, "node ?");
        return buf;
    }
    what[0] = 0;
    size_t wl = 0;
    switch (n->kind) {
    case NODE_INPUT:
        if (n->ext) append(what, sizeof what, &wl, "extern %s", n->ext->name);
        else append(what, sizeof what, &wl, "input");
        break;
    case NODE_CONST: append(what, sizeof what, &wl, n->ndim ? "fill" : "const"); break;
    case NODE_IOTA: append(what, sizeof what, &wl, "iota"); break;
    case NODE_RANDOM: append(what, sizeof what, &wl, "random"); break;
    case NODE_VIEW: append(what, sizeof what, &wl, "%s", view_name(n->u.view.op)); break;
    case NODE_MAP: append(what, sizeof what, &wl, "%s", map_name(n, name, sizeof name)); break;
    case NODE_REDUCE: append(what, sizeof what, &wl, "reduce %s", graph_reds[n->u.reduce.op].text); break;
    case NODE_SCAN: append(what, sizeof what, &wl, "scan %s", graph_reds[n->u.scan.op].text); break;
    case NODE_GATHER: append(what, sizeof what, &wl, n->u.gather.take ? "take" : "gather"); break;
    case NODE_SCATTER: {
        static const char *const ops[] = {"set", "add", "min", "max", "prod"};
        if (n->u.scatter.nonneg) append(what, sizeof what, &wl, "bincount");
        else append(what, sizeof what, &wl, "scatter %s", ops[n->u.scatter.op]);
        break;
    }
    case NODE_SORT: {
        const lf_node *x = n->inputs[0];
        append(what, sizeof what, &wl, "%s",
               n->u.sort.k != x->shape[n->u.sort.axis] ? "topk" : n->u.sort.indices ? "argsort" : "sort");
        break;
    }
    }
    if (!what[0]) append(what, sizeof what, &wl, "node");
    graph_shape_str(shape, sizeof shape, n->ndim, n->shape);
    const char *src = n->kind == NODE_MAP && n->u.map.fn ? n->u.map.fn->source : "";
    int k = snprintf(buf, cap, "node %d (%s %s%s%s%s%s)", n->id, what, lf_dtype_name(n->dtype), shape, src[0] ? " \"" : "",
                     src, src[0] ? "\"" : "");
    if (k >= 0 && (size_t)k >= cap) { /* cut: end with "..." where it fits */
        size_t end = cap - 1;
        for (size_t d = 0; d < 3 && end > d; d++) buf[end - 1 - d] = '.';
    }
    return buf;
}

void graph_fn_keep_source(lf_fn *f, const char *src) {
    size_t k = 0, cap = GRAPH_FN_SOURCE_KEEP;
    bool blank = false;
    for (const unsigned char *s = (const unsigned char *)src; *s; s++) {
        bool b = *s == ' ' || *s == '\t' || *s == '\n' || *s == '\r';
        if (b && (blank || !k)) continue; /* collapse blanks, none leading */
        blank = b;
        if (k == cap) {
            memcpy(f->source + k, "...", 4);
            return;
        }
        f->source[k++] = b ? ' ' : *s < 0x20 || *s >= 0x7f || *s == '"' ? '?' : (char)*s;
    }
    while (k && f->source[k - 1] == ' ') k--;
    f->source[k] = 0;
}

lf_status graph_dot_write_graph(lf_graph *g, int n, lf_node *const *outs, FILE *out) {
    bool *drawn = graph_calloc((size_t)(g->nnodes ? g->nnodes : 1), sizeof *drawn);
    bool *is_out = graph_calloc((size_t)(g->nnodes ? g->nnodes : 1), sizeof *is_out);
    if (!drawn || !is_out) {
        graph_free(drawn);
        graph_free(is_out);
        return graph_error(g->ctx, LF_ERR_NOMEM, "dump_dot: out of memory");
    }
    for (int i = 0; i < n; i++) drawn[outs[i]->id] = is_out[outs[i]->id] = true;
    for (int id = g->nnodes - 1; id >= 0; id--) {
        if (n > 0 && !drawn[id]) continue;
        drawn[id] = true;
        for (int k = 0; k < g->nodes[id]->ninputs; k++) drawn[g->nodes[id]->inputs[k]->id] = true;
    }
    char label[512];
    fprintf(out, "digraph lazyfuse {\n  rankdir=BT;\n  node [shape=box, fontname=\"monospace\"];\n");
    for (int id = 0; id < g->nnodes; id++) {
        if (!drawn[id]) continue;
        const lf_node *node = g->nodes[id];
        const char *style = node->kind == NODE_INPUT   ? ", style=filled, fillcolor=\"#dbe9f6\""
                            : is_out[id]               ? ", style=filled, fillcolor=\"#fde2c8\""
                            : node->kind == NODE_VIEW  ? ", style=dashed"
                                                       : "";
        fprintf(out, "  n%d [label=\"%s\"%s];\n", id, graph_dot_node_label(node, label, sizeof label),
                style);
        for (int k = 0; k < node->ninputs; k++)
            fprintf(out, "  n%d -> n%d;\n", node->inputs[k]->id, id);
    }
    fprintf(out, "}\n");
    graph_free(drawn);
    graph_free(is_out);
    return ferror(out) ? graph_error(g->ctx, LF_ERR_INVALID, "dump_dot: write error") : LF_OK;
}
