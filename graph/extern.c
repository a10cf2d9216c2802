/* graph/extern.c: lf_extern nodes and the steps lf_eval runs for them.
 *
 * An extern node is an input node (NODE_INPUT) over a buffer its graph owns
 * (the user never sees it) with n->ext set: every planner and evaluator
 * reads it as an input, so it is a fusion barrier by construction. Before an
 * eval, graph_extern_steps runs each extern node the outputs need, in id
 * order (an extern's inputs, extern nodes among them, have lower ids):
 * the backend's eval computes its inputs into temporary buffers (fused up
 * to the boundary), the callback runs on host arrays, and its result is
 * copied into the node's buffer.
 *
 * What must stay true: no user buffer is written by these steps (only the
 * graph's own extern buffers and temporaries), so a failed callback leaves
 * the eval's outputs untouched; the callback's output array is fresh,
 * zero-filled memory, copied into the node's buffer only on success; the
 * library's own callbacks (graph_extern.direct: lf_fft, which writes every
 * element and fails only before writing) write the node's buffer in place
 * on a host backend.
 */
#include "graph/graph.h"

#include <stdio.h>
#include <string.h>

lf_node *lf_extern(lf_graph *g, const char *name, lf_extern_fn fn, void *user, int nin, lf_node *const *ins,
                   lf_dtype t, int ndim, const int64_t *shape) {
    if (!graph_check_args(g, "extern", 0, NULL)) return NULL;
    if (nin < 0 || nin > LF_MAX_ARGS) {
        graph_fail(g, LF_ERR_INVALID, "extern: %d inputs (0 to %d allowed)", nin, LF_MAX_ARGS);
        return NULL;
    }
    if (!name || !fn || (nin > 0 && !ins)) {
        graph_fail(g, LF_ERR_NULL, "extern: %s is NULL", !name ? "name" : !fn ? "fn" : "ins");
        return NULL;
    }
    size_t len = strlen(name);
    bool printable = len > 0 && len < 64;
    for (size_t i = 0; printable && i < len; i++) printable = name[i] >= 0x20 && name[i] < 0x7f;
    if (!printable) {
        graph_fail(g, LF_ERR_INVALID, "extern: name must be 1 to 63 printable ASCII bytes");
        return NULL;
    }
    if (!graph_check_args(g, "extern", nin, ins)) return NULL;
    if ((unsigned)t >= LF_NDTYPES) {
        graph_fail(g, LF_ERR_DTYPE, "extern '%s': unknown dtype %d", name, (int)t);
        return NULL;
    }
    char msg[LF_ERRMSG_CAP];
    lf_status st = graph_shape_problem("extern", ndim, shape, msg, sizeof msg);
    if (st != LF_OK) {
        graph_fail(g, st, "%s", msg);
        return NULL;
    }
    int64_t numel;
    if (!graph_shape_numel(ndim, shape, lf_dtype_size(t), &numel)) {
        graph_fail(g, LF_ERR_OVERFLOW, "extern '%s': the shape's size overflows", name);
        return NULL;
    }
    graph_extern *e = graph_calloc(1, sizeof *e);
    if (!e) {
        graph_fail(g, LF_ERR_NOMEM, "extern: out of memory");
        return NULL;
    }
    snprintf(e->name, sizeof e->name, "%s", name);
    e->fn = fn;
    e->user = user;
    e->nin = nin;
    for (int k = 0; k < nin; k++) e->ins[k] = ins[k];
    lf_buffer *b = lf_buffer_new(g->ctx, t, ndim, shape);
    if (!b) {
        graph_free(e);
        graph_fail(g, LF_ERR_NOMEM, "extern '%s': %s", name, lf_errmsg(g->ctx));
        return NULL;
    }
    lf_node *n = lf_input(g, b);
    lf_buffer_free(b); /* the graph's reference keeps it */
    if (!n) {
        graph_free(e);
        return NULL;
    }
    n->ext = e;
    e->next = g->externs;
    g->externs = e;
    return n;
}

void graph_externs_destroy(lf_graph *g) {
    while (g->externs) {
        graph_extern *e = g->externs;
        g->externs = e->next;
        if (e->free_user) e->free_user(e->user);
        graph_free(e);
    }
}

static void stats_add(lf_eval_stats *acc, const lf_eval_stats *s) {
    acc->kernels += s->kernels;
    acc->bytes_read += s->bytes_read;
    acc->bytes_written += s->bytes_written;
    acc->temp_bytes_avoided += s->temp_bytes_avoided;
    acc->bytes_materialized += s->bytes_materialized;
    acc->plan_seconds += s->plan_seconds;
    acc->kernels_compiled += s->kernels_compiled;
    acc->kernels_disk_hits += s->kernels_disk_hits;
    acc->kernels_memory_hits += s->kernels_memory_hits;
    acc->compiler_runs += s->compiler_runs;
}

/* Runs extern node x: its inputs, the callback, the copy into its buffer. */
static lf_status run_extern(lf_graph *g, lf_node *x, const graph_backend *be, graph_eval_fn *eval,
                            lf_eval_stats *acc) {
    const graph_extern *e = x->ext;
    lf_ctx *ctx = g->ctx;
    bool dev = graph_ctx_on_device(ctx);
    lf_buffer *tmp[LF_MAX_ARGS] = {0};
    void *host[LF_MAX_ARGS] = {0};
    lf_extern_array in[LF_MAX_ARGS];
    void *out = NULL;
    lf_status st = LF_OK;
    char ns[GRAPH_NODE_STR_CAP];
    /* an input read in place (a dense buffer, extern results included) needs
       no step; the others are evaluated together into temporaries */
    lf_buffer *src[LF_MAX_ARGS], *dst[LF_MAX_ARGS];
    lf_node *todo[LF_MAX_ARGS];
    int ntodo = 0;
    for (int k = 0; k < e->nin && st == LF_OK; k++) {
        lf_node *in_k = e->ins[k];
        if (in_k->kind == NODE_INPUT && !in_k->u.buffer->strided) {
            src[k] = in_k->u.buffer;
            continue;
        }
        if (!(tmp[k] = lf_buffer_new(ctx, in_k->dtype, in_k->ndim, in_k->shape))) st = LF_ERR_NOMEM;
        src[k] = dst[ntodo] = tmp[k];
        todo[ntodo++] = in_k;
    }
    if (st == LF_OK && ntodo > 0) {
        lf_eval_stats s;
        memset(&s, 0, sizeof s);
        if ((st = graph_check_outputs(g, ntodo, todo, dst)) == LF_OK && (st = eval(be, g, ntodo, todo, dst, &s)) == LF_OK)
            stats_add(acc, &s);
    }
    for (int k = 0; k < e->nin && st == LF_OK; k++) {
        lf_buffer *b = src[k];
        in[k] = (lf_extern_array){.data = NULL, .dtype = b->dtype, .ndim = b->ndim, .shape = b->shape, .numel = b->numel};
        if (!b->bytes) continue;
        if (!dev) {
            in[k].data = b->data;
        } else if (!(host[k] = graph_malloc(b->bytes))) {
            st = graph_error(ctx, LF_ERR_NOMEM, "eval: out of memory for %s's inputs", graph_node_str(x, ns, sizeof ns));
        } else if ((st = lf_buffer_read(b, host[k], b->bytes)) == LF_OK) {
            in[k].data = host[k];
        }
    }
    lf_buffer *xb = x->u.buffer;
    bool direct = e->direct && !dev; /* lf_fft: into the node's own buffer, no copy */
    if (st == LF_OK && xb->bytes && direct) out = xb->data;
    else if (st == LF_OK && xb->bytes && !(out = graph_calloc(1, xb->bytes)))
        st = graph_error(ctx, LF_ERR_NOMEM, "eval: out of memory for %s's result", graph_node_str(x, ns, sizeof ns));
    if (st == LF_OK) {
        lf_extern_array o = {.data = out, .dtype = xb->dtype, .ndim = xb->ndim, .shape = xb->shape, .numel = xb->numel};
        char msg[1024] = "";
        if (e->fn(e->user, e->nin, in, &o, msg, sizeof msg) != 0) {
            msg[sizeof msg - 1] = 0;
            st = graph_error(ctx, LF_ERR_EXTERN, "eval: %s failed: %s", graph_node_str(x, ns, sizeof ns),
                             msg[0] ? msg : "(the callback gave no message)");
        }
    }
    if (st == LF_OK && xb->bytes && !direct) {
        if (xb->dtype == LF_BOOL)
            for (size_t i = 0; i < xb->bytes; i++) ((unsigned char *)out)[i] = ((unsigned char *)out)[i] != 0;
        if (dev) st = ctx->be->buffer_write(xb, out, "eval");
        else memcpy(xb->data, out, xb->bytes);
    }
    if (!direct) graph_free(out);
    for (int k = 0; k < e->nin; k++) {
        graph_free(host[k]);
        if (tmp[k]) lf_buffer_free(tmp[k]);
    }
    return st;
}

lf_status graph_extern_steps(lf_graph *g, int n, lf_node *const *outs, const graph_backend *be, graph_eval_fn *eval,
                             lf_eval_stats *acc) {
    memset(acc, 0, sizeof *acc);
    if (!g->externs) return LF_OK;
    bool *need = graph_calloc((size_t)g->nnodes, sizeof *need);
    if (!need) return graph_error(g->ctx, LF_ERR_NOMEM, "eval: out of memory");
    for (int i = 0; i < n; i++) need[outs[i]->id] = true;
    /* ids are topological: one walk from the top marks everything needed */
    for (int id = g->nnodes - 1; id >= 0; id--) {
        if (!need[id]) continue;
        const lf_node *x = g->nodes[id];
        for (int k = 0; k < x->ninputs; k++) need[x->inputs[k]->id] = true;
        for (int k = 0; x->ext && k < x->ext->nin; k++) need[x->ext->ins[k]->id] = true;
    }
    lf_status st = LF_OK;
    for (int id = 0; id < g->nnodes && st == LF_OK; id++)
        if (need[id] && g->nodes[id]->ext) st = run_extern(g, g->nodes[id], be, eval, acc);
    graph_free(need);
    return st;
}
