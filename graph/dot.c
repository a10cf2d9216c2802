/* graph/dot.c: Graphviz DOT of a deferred graph (the "graph" view).
 *
 * Draws the nodes the given outputs depend on (all nodes when n is 0), each
 * labelled with its id, what it computes, dtype and shape, with an edge from
 * each input to its consumer, and outputs marked. Labels are escaped so any
 * fn text is valid DOT. The fused view (kernels as clusters) is drawn by the
 * fusion stage with graph_dot_node_label for the same node labels.
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
    case NODE_INPUT: append(buf, cap, &len, "input"); break;
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
