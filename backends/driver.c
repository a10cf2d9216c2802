/* backends/driver.c: lf_eval, the pipeline in one place.
 *
 * Reads as straight-line code: check the request, run it, and only when
 * every result exists copy the results into the caller's buffers (a failed
 * eval changes no buffer, and an output buffer may also be an input).
 *
 * Today the only executor is the reference evaluator of graph/; the fusion
 * planner and the compiled backends slot in here as
 *     check -> plan (fusion/) -> verify -> codegen -> compile or cache hit -> run.
 */
#include "graph/graph.h"

#include <string.h>

lf_status lf_eval(lf_graph *g, int n, lf_node *const *outs, lf_buffer *const *dsts) {
    lf_status st = graph_check_outputs(g, n, outs, dsts);
    if (st != LF_OK) return st;
    lf_ctx *ctx = g->ctx;
    void **results = graph_calloc((size_t)n, sizeof *results);
    if (!results) return graph_error(ctx, LF_ERR_NOMEM, "eval: out of memory");
    st = graph_eval_reference(g, n, outs, results);
    if (st == LF_OK)
        for (int i = 0; i < n; i++)
            if (dsts[i]->bytes) memcpy(dsts[i]->data, results[i], dsts[i]->bytes);
    for (int i = 0; i < n; i++) graph_free(results[i]);
    graph_free(results);
    return st;
}
