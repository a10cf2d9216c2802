/* backends/driver.c: lf_eval, the pipeline in one place.
 *
 * Reads as straight-line code: check the request, then hand it to the
 * context's backend. No path changes a buffer unless the whole eval succeeds
 * (an output buffer may also be an input).
 *
 *     CPU:        check -> plan -> codegen -> compile or cache hit -> run
 *                 (backends/cpu: the kernels write the outputs themselves)
 *     fallback:   check -> plan (fusion/) -> schedule interpreter -> copy out
 *     REFERENCE:  check -> node-by-node oracle (graph/eval_ref.c) -> copy out
 *
 * The CPU backend (and AUTO, which resolves to it) falls back to the
 * interpreter of fusion/interp.c when no C compiler works or compiling is
 * off (LF_COMPILE_NEVER). The statistics of the last eval live in the context.
 */
#include "backends/cpu/cpu.h"
#include "fusion/fusion.h"
#include "graph/graph.h"

#include <stdlib.h>
#include <string.h>


static void print_stats(const lf_eval_stats *st, const fuse_schedule *s, bool fused) {
    fprintf(stderr,
            "lazyfuse fusion: %d kernel%s (fusion %s), read %zu B, written %zu B, "
            "materialized %zu B, temporaries avoided %zu B, planned in %.6f s\n",
            st->kernels, st->kernels == 1 ? "" : "s", fused ? "on" : "off", st->bytes_read,
            st->bytes_written, st->bytes_materialized, st->temp_bytes_avoided, st->plan_seconds);
    if (!s) {
        fprintf(stderr,
                "lazyfuse cpu: program %s, kernels compiled %d, from disk %d, from memory %d, "
                "codegen+compile+load %.6f s\n",
                st->program_reused ? "reused" : "built", st->kernels_compiled, st->kernels_disk_hits,
                st->kernels_memory_hits, st->compile_seconds);
        return;
    }
    fuse_schedule_print(s, stderr);
}

lf_status lf_eval(lf_graph *g, int n, lf_node *const *outs, lf_buffer *const *dsts) {
    if (g) memset(&g->ctx->last_stats, 0, sizeof g->ctx->last_stats);
    lf_status st = graph_check_outputs(g, n, outs, dsts);
    if (st != LF_OK) return st;
    lf_ctx *ctx = g->ctx;
    if (ctx->backend == LF_BACKEND_CPU) {
        /* compiled kernels write the outputs themselves (all or nothing) */
        bool interpret = false;
        lf_eval_stats stats;
        st = cpu_eval(g, n, outs, dsts, &stats, &interpret);
        if (!interpret) {
            if (st == LF_OK) {
                ctx->last_stats = stats;
                if (graph_debug_on("fusion") && g->program) print_stats(&stats, NULL, ctx->opt.fusion != 0);
            }
            return st;
        }
    }
    /* the interpreter and the oracle return fresh arrays, copied out at the end */
    void **results = graph_calloc((size_t)n, sizeof *results);
    if (!results) return graph_error(ctx, LF_ERR_NOMEM, "eval: out of memory");
    if (ctx->backend == LF_BACKEND_REFERENCE) {
        st = graph_eval_reference(g, n, outs, results);
    } else {
        fuse_schedule *s = NULL;
        st = fuse_plan(g, n, outs, ctx->opt.fusion != 0, &s);
        if (st == LF_OK) st = fuse_interpret(s, results);
        if (st == LF_OK) {
            fuse_schedule_stats(s, &ctx->last_stats);
            if (graph_debug_on("fusion")) print_stats(&ctx->last_stats, s, s->fused);
        }
        fuse_schedule_free(s);
    }
    if (st == LF_OK)
        for (int i = 0; i < n; i++)
            if (dsts[i]->bytes) memcpy(dsts[i]->data, results[i], dsts[i]->bytes);
    for (int i = 0; i < n; i++) graph_free(results[i]);
    graph_free(results);
    return st;
}

lf_status lf_ctx_last_stats(const lf_ctx *ctx, lf_eval_stats *out) {
    if (!ctx || !out)
        return graph_error(NULL, LF_ERR_NULL, "ctx_last_stats: %s is NULL", ctx ? "out" : "ctx");
    *out = ctx->last_stats;
    return LF_OK;
}
