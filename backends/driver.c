/* backends/driver.c: lf_eval, the pipeline in one place, and the hooks that
 * graph/ctx.c calls to open a device backend and move device buffers' bytes.
 *
 * Reads as straight-line code: check the request, then hand it to the
 * context's backend. No path changes a buffer unless the whole eval succeeds
 * (an output buffer may also be an input).
 *
 *     CUDA:       check -> plan -> codegen -> NVRTC or cache hit -> launch
 *                 (backends/cuda: asynchronous; the kernels write the outputs)
 *     CPU:        check -> plan -> codegen -> compile or cache hit -> run
 *                 (backends/cpu: the kernels write the outputs themselves)
 *     fallback:   check -> plan (fusion/) -> schedule interpreter -> copy out
 *     REFERENCE:  check -> node-by-node oracle (graph/eval_ref.c) -> copy out
 *
 * The CPU backend falls back to the interpreter of fusion/interp.c when no C
 * compiler works or compiling is off (LF_COMPILE_NEVER). AUTO resolves to
 * CUDA when lf_ctx_new can open it, else to CPU. The statistics of the last
 * eval live in the context.
 *
 * What must stay true: a device context's buffers (ctx->cuda set) have no
 * host data, so only the CUDA backend touches them, except that the host
 * evaluators (a test switching ctx->backend to REFERENCE on such a context)
 * run on host copies of the graph's input buffers made for that one call.
 */
#include "backends/cpu/cpu.h"
#ifdef LF_WITH_CUDA
#include "backends/cuda/cuda.h"
#endif
#include "fusion/fusion.h"
#include "graph/graph.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>


static void print_stats(const lf_eval_stats *st, const fuse_schedule *s, bool fused, const char *backend) {
    fprintf(stderr,
            "lazyfuse fusion: %d kernel%s (fusion %s), read %zu B, written %zu B, "
            "materialized %zu B, temporaries avoided %zu B, planned in %.6f s\n",
            st->kernels, st->kernels == 1 ? "" : "s", fused ? "on" : "off", st->bytes_read,
            st->bytes_written, st->bytes_materialized, st->temp_bytes_avoided, st->plan_seconds);
    if (!s) {
        fprintf(stderr,
                "lazyfuse %s: program %s, kernels compiled %d, from disk %d, from memory %d, "
                "codegen+compile+load %.6f s\n",
                backend, st->program_reused ? "reused" : "built", st->kernels_compiled, st->kernels_disk_hits,
                st->kernels_memory_hits, st->compile_seconds);
        return;
    }
    fuse_schedule_print(s, stderr);
}

/* Host copies of a device context's input buffers for the host evaluators
 * (see the top); unstage_inputs frees them and clears data again. */
static void unstage_inputs(lf_graph *g) {
    for (int i = 0; i < g->nbound; i++) {
        lf_buffer *b = g->bound[i];
        if (!b->dev) continue;
        graph_free(b->data);
        b->data = NULL;
    }
}

static lf_status stage_inputs(lf_graph *g) {
    for (int i = 0; i < g->nbound; i++) {
        lf_buffer *b = g->bound[i];
        if (!b->dev || b->data) continue;
        b->data = graph_malloc(b->bytes);
        lf_status st = b->data ? driver_buffer_read(b, b->data, "eval")
                               : graph_error(g->ctx, LF_ERR_NOMEM, "eval: out of memory");
        if (st != LF_OK) {
            unstage_inputs(g);
            return st;
        }
    }
    return LF_OK;
}

#ifdef LF_WITH_CUDA
/* A device kernel raised the index-error flag (no output was written): the
 * reference evaluator on host copies of the inputs names the first bad
 * index, as it would have on the host (the slow path of an error only). */
static lf_status index_error_message(lf_graph *g, int n, lf_node *const *outs) {
    char keep[LF_ERRMSG_CAP];
    memcpy(keep, g->ctx->errmsg, sizeof keep);
    void **results = graph_calloc((size_t)n, sizeof *results);
    lf_status st = results ? stage_inputs(g) : LF_ERR_NOMEM;
    if (st == LF_OK) {
        st = graph_eval_reference(g, n, outs, results);
        unstage_inputs(g);
    }
    if (results)
        for (int i = 0; i < n; i++) graph_free(results[i]);
    graph_free(results);
    if (st == LF_ERR_INDEX) return st;
    memcpy(g->ctx->errmsg, keep, sizeof keep); /* the device's own message */
    return LF_ERR_INDEX;
}
#endif

lf_status lf_eval(lf_graph *g, int n, lf_node *const *outs, lf_buffer *const *dsts) {
    if (g) memset(&g->ctx->last_stats, 0, sizeof g->ctx->last_stats);
    lf_status st = graph_check_outputs(g, n, outs, dsts);
    if (st != LF_OK) return st;
    lf_ctx *ctx = g->ctx;
#ifdef LF_WITH_CUDA
    if (ctx->cuda && ctx->backend == LF_BACKEND_CUDA) {
        /* kernels are launched asynchronously; lf_buffer_read waits for them */
        lf_eval_stats stats;
        st = cuda_eval(g, n, outs, dsts, &stats);
        if (st == LF_ERR_INDEX) return index_error_message(g, n, outs);
        if (st == LF_OK) {
            ctx->last_stats = stats;
            if (graph_debug_on("fusion") && g->programs[0].p) print_stats(&stats, NULL, ctx->opt.fusion != 0, "cuda");
        }
        return st;
    }
#endif
    if (ctx->backend == LF_BACKEND_CPU && !ctx->cuda) {
        /* compiled kernels write the outputs themselves (all or nothing) */
        bool interpret = false;
        lf_eval_stats stats;
        st = cpu_eval(g, n, outs, dsts, &stats, &interpret);
        if (!interpret) {
            if (st == LF_OK) {
                ctx->last_stats = stats;
                if (graph_debug_on("fusion") && g->programs[0].p) print_stats(&stats, NULL, ctx->opt.fusion != 0, "cpu");
            }
            return st;
        }
    }
    /* the interpreter and the oracle return fresh arrays, copied out at the end */
    void **results = graph_calloc((size_t)n, sizeof *results);
    if (!results) return graph_error(ctx, LF_ERR_NOMEM, "eval: out of memory");
    if (ctx->cuda && (st = stage_inputs(g)) != LF_OK) {
        graph_free(results);
        return st;
    }
    if (ctx->backend == LF_BACKEND_REFERENCE) {
        st = graph_eval_reference(g, n, outs, results);
    } else {
        fuse_schedule *s = NULL;
        st = fuse_plan(g, n, outs, ctx->opt.fusion != 0, &s);
        if (st == LF_OK) st = fuse_interpret(s, results);
        if (st == LF_OK) {
            fuse_schedule_stats(s, &ctx->last_stats);
            if (graph_debug_on("fusion")) print_stats(&ctx->last_stats, s, s->fused, "interpreter");
        }
        fuse_schedule_free(s);
    }
    if (st == LF_OK)
        for (int i = 0; i < n && st == LF_OK; i++) {
            if (!dsts[i]->bytes) continue;
            if (ctx->cuda) st = driver_buffer_write(dsts[i], results[i], "eval");
            else memcpy(dsts[i]->data, results[i], dsts[i]->bytes);
        }
    if (ctx->cuda) unstage_inputs(g);
    if (st != LF_OK) memset(&ctx->last_stats, 0, sizeof ctx->last_stats);
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

/* ---- device hooks (graph/graph.h) ---------------------------------------------------------- */

lf_status driver_ctx_open(lf_ctx *ctx) {
#ifdef LF_WITH_CUDA
    /* AUTO remembers a failure for the process, unless a test steers the
       choice through the environment */
    static int auto_unusable;
    bool steered = getenv("LF_CUDA_LIBRARY") || getenv("LF_NVRTC_LIBRARY") || getenv("LF_CUDA_DEVICE");
    bool automatic = ctx->opt.backend == LF_BACKEND_AUTO;
    if (automatic && !steered && __atomic_load_n(&auto_unusable, __ATOMIC_RELAXED)) {
        ctx->backend = LF_BACKEND_CPU;
        return LF_OK;
    }
    char why[2048];
    lf_status st = cuda_open(ctx, why, sizeof why);
    if (st == LF_OK) {
        ctx->backend = LF_BACKEND_CUDA;
        return LF_OK;
    }
    if (st == LF_ERR_NOMEM) return graph_error(NULL, LF_ERR_NOMEM, "ctx_new: out of memory");
    if (!automatic) return graph_error(NULL, LF_ERR_BACKEND, "ctx_new: %s", why);
    static int warned;
    if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED) && !getenv("LF_QUIET"))
        fprintf(stderr, "lazyfuse: no usable CUDA device (%s); using the CPU backend\n", why);
    if (!steered) __atomic_store_n(&auto_unusable, 1, __ATOMIC_RELAXED);
    ctx->backend = LF_BACKEND_CPU;
    return LF_OK;
#else
    if (ctx->opt.backend == LF_BACKEND_CUDA)
        return graph_error(NULL, LF_ERR_BACKEND,
                           "ctx_new: the cuda backend is not part of this build of lazyfuse "
                           "(configured with -Dcuda=disabled)");
    ctx->backend = LF_BACKEND_CPU;
    return LF_OK;
#endif
}

#ifdef LF_WITH_CUDA
lf_status driver_buffer_alloc(lf_buffer *b, const char *what) {
    return cuda_buffer_alloc(b->ctx, b->bytes, &b->dev, what);
}
void driver_buffer_free(lf_buffer *b) { cuda_buffer_free(b->ctx, b->dev, b->bytes); }
lf_status driver_buffer_write(lf_buffer *b, const void *src, const char *what) {
    return cuda_buffer_write(b->ctx, b->dev, src, b->bytes, what);
}
lf_status driver_buffer_read(const lf_buffer *b, void *dst, const char *what) {
    return cuda_buffer_read(b->ctx, dst, b->dev, b->bytes, what);
}
#else
/* no device contexts exist in this build: never called */
lf_status driver_buffer_alloc(lf_buffer *b, const char *what) {
    return graph_error(b->ctx, LF_ERR_BACKEND, "%s: no device backend in this build", what);
}
void driver_buffer_free(lf_buffer *b) { (void)b; }
lf_status driver_buffer_write(lf_buffer *b, const void *src, const char *what) {
    (void)src;
    return graph_error(b->ctx, LF_ERR_BACKEND, "%s: no device backend in this build", what);
}
lf_status driver_buffer_read(const lf_buffer *b, void *dst, const char *what) {
    (void)dst;
    return graph_error(b->ctx, LF_ERR_BACKEND, "%s: no device backend in this build", what);
}
#endif

/* The CPU's model name from /proc/cpuinfo, "unknown CPU" without one. */
static void cpu_model(char *buf, size_t cap) {
    snprintf(buf, cap, "unknown CPU");
    FILE *fp = fopen("/proc/cpuinfo", "r");
    if (!fp) return;
    char line[512];
    while (fgets(line, sizeof line, fp))
        if (!strncmp(line, "model name", 10)) {
            const char *v = strchr(line, ':');
            if (!v) break;
            v++;
            while (*v == ' ' || *v == '\t') v++;
            size_t len = strcspn(v, "\n");
            snprintf(buf, cap, "%.*s", (int)len, v);
            break;
        }
    fclose(fp);
}

int lf_ctx_device_name(const lf_ctx *ctx, char *buf, size_t cap) {
    if (buf && cap) buf[0] = 0;
    if (!ctx) {
        graph_error(NULL, LF_ERR_NULL, "ctx_device_name: ctx is NULL");
        return -1;
    }
    if (!buf && cap) {
        graph_error((lf_ctx *)ctx, LF_ERR_NULL, "ctx_device_name: buf is NULL");
        return -1;
    }
    char tmp[1];
#ifdef LF_WITH_CUDA
    if (ctx->cuda) return cuda_device_description(ctx, cap ? buf : tmp, cap ? cap : 1);
#endif
    char model[256];
    cpu_model(model, sizeof model);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    return snprintf(cap ? buf : tmp, cap ? cap : 1, "%s, %ld CPU%s", model, cpus, cpus == 1 ? "" : "s");
}
