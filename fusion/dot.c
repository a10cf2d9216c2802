/* fusion/dot.c: lf_dump_dot, the graph visualizer's two views.
 *
 * The graph view is graph/dot.c's. The fused view plans the outputs exactly
 * as lf_eval would (same fusion setting) and draws each kernel as a cluster
 * holding the graph nodes it computes, labelled with its number, its kind and
 * the bytes it moves; nodes computed by no kernel (inputs, views folded into
 * index maps, constants) stay outside. Every slot a kernel stores becomes a
 * cylinder (filled for outputs, red for materialized intermediates) with an
 * edge from the node it holds, so temporaries are visible at a glance.
 * Drawing changes nothing: no kernel runs and no buffer is touched.
 */
#include "fusion/fusion.h"

#include <stdlib.h>
#include <string.h>

/* Bytes a kernel reads: each distinct slot it loads, counted once. */
static size_t kernel_bytes_in(const fuse_schedule *s, const fuse_kernel *k, bool *seen) {
    size_t bytes = 0;
    memset(seen, 0, (size_t)s->nslots * sizeof *seen);
    for (int f = 0; f < k->npasses + 2; f++) { /* passes, epilogue, row pass */
        int n;
        const fuse_load *loads = fuse_kernel_fn_loads(k, f, &n, NULL);
        for (int i = 0; i < n; i++)
            if (loads[i].src == FUSE_SRC_SLOT && !seen[loads[i].slot]) {
                seen[loads[i].slot] = true;
                bytes += s->slots[loads[i].slot].bytes;
            }
    }
    return bytes;
}

static size_t kernel_bytes_out(const fuse_schedule *s, const fuse_kernel *k) {
    size_t bytes = 0;
    for (int i = 0; i < k->nstores; i++) bytes += s->slots[k->stores[i].slot].bytes;
    return bytes;
}

static void write_fused(const fuse_schedule *s, bool *seen, int *kernel_of, FILE *out) {
    lf_graph *g = s->graph;
    char label[512];
    /* a node recomputed by several kernels is drawn in the first, and says so */
    int *copies = kernel_of + g->nnodes;
    for (int id = 0; id < g->nnodes; id++) kernel_of[id] = -1, copies[id] = 0;
    for (int ki = s->nkernels - 1; ki >= 0; ki--)
        for (int j = 0; j < s->kernels[ki].nnodes; j++) {
            kernel_of[s->kernels[ki].nodes[j]] = ki;
            copies[s->kernels[ki].nodes[j]]++;
        }
    /* nodes the plan involves: computed by a kernel, or held by a slot, or
       reached from those through views */
    bool *drawn = seen + s->nslots;
    memset(drawn, 0, (size_t)g->nnodes * sizeof *drawn);
    for (int id = 0; id < g->nnodes; id++) drawn[id] = kernel_of[id] >= 0;
    for (int i = 0; i < s->nslots; i++) drawn[s->slots[i].node->id] = true;
    for (int id = g->nnodes - 1; id >= 0; id--)
        if (drawn[id])
            for (int k = 0; k < g->nodes[id]->ninputs; k++) drawn[g->nodes[id]->inputs[k]->id] = true;

    fprintf(out, "digraph lazyfuse_fused {\n  rankdir=BT;\n  compound=true;\n"
                 "  node [shape=box, fontname=\"monospace\"];\n");
    fprintf(out, "  label=\"%d kernel%s, fusion %s\";\n", s->nkernels, s->nkernels == 1 ? "" : "s",
            s->fused ? "on" : "off");
    for (int ki = 0; ki < s->nkernels; ki++) {
        const fuse_kernel *k = &s->kernels[ki];
        char kind[96];
        /* "elementwise", "reduce sum", or "reduce max sum, 2 passes + row map" */
        const char *what = "elementwise"; /* a scatter kernel too: a loop over its positions */
        switch (k->kind) {
        case FUSE_KERNEL_SORT:
            what = k->sort_indices && k->sort_values ? "sort (values, indices)" : k->sort_indices ? "sort (indices)" : "sort";
            break;
        case FUSE_KERNEL_SCAN: what = k->scan_exclusive ? "exclusive scan" : "scan"; break;
        case FUSE_KERNEL_REDUCE_FULL:
        case FUSE_KERNEL_REDUCE_INNER:
        case FUSE_KERNEL_REDUCE_OUTER: what = k->redmask ? "reduce" : "elementwise"; break; /* a fold over no axis */
        default: break;
        }
        size_t len = (size_t)snprintf(kind, sizeof kind, "%s", what);
        for (int j = 0; k->redmask && j < k->nreds && len < sizeof kind; j++)
            len += (size_t)snprintf(kind + len, sizeof kind - len, " %s", graph_reds[k->reds[j].op].text);
        if (k->redmask && k->npasses > 1 && len < sizeof kind)
            len += (size_t)snprintf(kind + len, sizeof kind - len, ", %d passes", k->npasses);
        if (k->row && len < sizeof kind) snprintf(kind + len, sizeof kind - len, " + row map");
        fprintf(out, "  subgraph cluster_k%d {\n    label=\"kernel %d: %s\\nin %zu B, out %zu B\";\n"
                     "    style=rounded; color=\"#3b6ea5\";\n",
                ki, ki, kind, kernel_bytes_in(s, k, seen), kernel_bytes_out(s, k));
        for (int j = 0; j < k->nnodes; j++) {
            int id = k->nodes[j];
            if (kernel_of[id] != ki) continue;
            fprintf(out, "    n%d [label=\"%s", id,
                    graph_dot_node_label(g->nodes[id], label, sizeof label));
            if (copies[id] > 1) fprintf(out, "\\n(recomputed in %d kernels)", copies[id]);
            fprintf(out, "\"];\n");
        }
        fprintf(out, "  }\n");
    }
    for (int id = 0; id < g->nnodes; id++) {
        if (!drawn[id]) continue;
        const lf_node *node = g->nodes[id];
        if (kernel_of[id] < 0)
            fprintf(out, "  n%d [label=\"%s\"%s];\n", id,
                    graph_dot_node_label(node, label, sizeof label),
                    node->kind == NODE_INPUT ? ", style=filled, fillcolor=\"#dbe9f6\""
                                             : ", style=dashed");
        for (int k = 0; k < node->ninputs; k++)
            if (drawn[node->inputs[k]->id]) fprintf(out, "  n%d -> n%d;\n", node->inputs[k]->id, id);
    }
    for (int i = 0; i < s->nslots; i++) {
        const fuse_slot *sl = &s->slots[i];
        if (sl->kind == FUSE_SLOT_INPUT) continue;
        bool temp = sl->kind == FUSE_SLOT_TEMP;
        fprintf(out, "  s%d [shape=cylinder, style=filled, fillcolor=\"%s\", label=\"%s %d\\n%s %zu B%s\"];\n",
                i, temp ? "#f4b6b6" : "#fde2c8", temp ? "temporary" : "output",
                temp ? i : sl->output, lf_dtype_name(sl->dtype), sl->bytes,
                temp && sl->block >= 0 ? "\\n(shared block)" : "");
        fprintf(out, "  n%d -> s%d [style=bold];\n", sl->node->id, i);
    }
    fprintf(out, "}\n");
}

lf_status lf_dump_dot(lf_graph *g, int n, lf_node *const *outs, lf_dot_mode mode, FILE *out) {
    if (!g) return graph_error(NULL, LF_ERR_NULL, "dump_dot: graph is NULL");
    lf_ctx *ctx = g->ctx;
    if (!out) return graph_error(ctx, LF_ERR_NULL, "dump_dot: FILE is NULL");
    if (g->status != LF_OK) {
        memcpy(ctx->errmsg, g->errmsg, sizeof g->errmsg);
        return g->status;
    }
    if (n < 0 || (n > 0 && !outs)) return graph_error(ctx, LF_ERR_INVALID, "dump_dot: bad outputs");
    for (int i = 0; i < n; i++) {
        if (!outs[i]) return graph_error(ctx, LF_ERR_NULL, "dump_dot: output %d is NULL", i);
        if (!graph_owns(g, outs[i]))
            return graph_error(ctx, LF_ERR_STATE,
                               "dump_dot: output %d belongs to another graph (or to a freed one)", i);
    }
    if (mode == LF_DOT_GRAPH) return graph_dot_write_graph(g, n, outs, out);
    if (mode != LF_DOT_FUSED) return graph_error(ctx, LF_ERR_INVALID, "dump_dot: unknown mode %d", (int)mode);
    if (n == 0) return graph_error(ctx, LF_ERR_INVALID, "dump_dot: the fused view needs outputs");
    fuse_schedule *s = NULL;
    lf_status st = fuse_plan(g, n, outs, ctx->opt.fusion != 0, &s);
    if (st != LF_OK) return st;
    bool *seen = graph_malloc((size_t)(s->nslots + g->nnodes) * sizeof *seen);
    int *kernel_of = graph_malloc((size_t)(2 * g->nnodes + 1) * sizeof *kernel_of);
    if (!seen || !kernel_of) {
        st = graph_error(ctx, LF_ERR_NOMEM, "dump_dot: out of memory");
    } else {
        write_fused(s, seen, kernel_of, out);
        if (ferror(out)) st = graph_error(ctx, LF_ERR_INVALID, "dump_dot: write error");
    }
    graph_free(seen);
    graph_free(kernel_of);
    fuse_schedule_free(s);
    return st;
}
