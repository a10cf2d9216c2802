/* backends/driver.c: the top floor. Makes and destroys contexts (choosing a
 * backend from the table of those built in), names every backend id
 * (lf_backend_name) and runs lf_eval, the same for every backend:
 *
 *     check -> backend_eval -> statistics
 *
 * where backend_eval, for a backend with parts (graph/backend.h), asks it to
 * get ready, runs the pipeline (backends/program.c's program_eval) with its
 * parts, or the host's interpreter where it cannot run kernels; so an eval
 * is
 *
 *     CUDA:       plan -> codegen (CUDA) -> NVRTC or cache hit -> launch
 *                 (backends/cuda: asynchronous; the kernels write the outputs)
 *     CPU:        plan -> codegen (C) -> compile or cache hit -> run
 *                 (backends/cpu: the kernels write the outputs themselves),
 *                 or, without a working compiler or with LF_COMPILE_NEVER,
 *                 plan -> schedule interpreter -> copy out (backends/host.c)
 *     REFERENCE:  node-by-node oracle (graph/eval_ref.c) -> copy out
 *
 * The two compiled backends write only what is theirs (program_parts: their
 * program struct, per-kernel preparation, compiling a batch of misses,
 * binding, run; ready and fall_back: whether they can run kernels now); the
 * pipeline is backends/program.c's program_eval and program_build, written
 * once: program cache -> plan -> in-place decision -> per kernel layout,
 * source, memory cache -> the backend compiles the misses -> bind -> run ->
 * statistics.
 *
 * AUTO tries the backends of auto_order in turn (CUDA, then the CPU); the
 * first that opens is the context's. The statistics of the last eval live
 * in the context.
 *
 * What must stay true: no path changes a buffer unless the whole eval
 * succeeds (an output buffer may also be an input, or share memory with one
 * when wrapped); a context's buffers are always memory of the backend that
 * opened it (ctx->be), whatever ctx->backend a test switches to; adding a
 * backend is a folder plus an entry in `builtin` (and in auto_order when
 * AUTO should try it). This file has no other per-backend code.
 */
#include "backends/cpu/cpu.h"
#include "backends/cpu/hostfn.h"
#include "backends/host.h"
#include "backends/program.h"
#ifdef LF_WITH_CUDA
#include "backends/cuda/cuda.h"
#endif
#include "graph/graph.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The backends built in, by lf_backend id (NULL: not part of this build). */
static const graph_backend *const builtin[GRAPH_BACKENDS] = {
    [LF_BACKEND_CPU] = &cpu_backend,
#ifdef LF_WITH_CUDA
    [LF_BACKEND_CUDA] = &cuda_backend,
#endif
    [LF_BACKEND_REFERENCE] = &host_reference_backend,
};

/* Every backend id's name (lf_backend_name), built in or not: a build
 * without CUDA still names the backend it lacks. */
static const char *const names[GRAPH_BACKENDS] = {
    [LF_BACKEND_AUTO] = "auto",
    [LF_BACKEND_CPU] = "cpu",
    [LF_BACKEND_CUDA] = "cuda",
    [LF_BACKEND_REFERENCE] = "reference",
};

const char *lf_backend_name(lf_backend b) { return (unsigned)b < GRAPH_BACKENDS ? names[b] : "?"; }

/* What AUTO tries, in order; the last is always available. */
static const lf_backend auto_order[] = {LF_BACKEND_CUDA, LF_BACKEND_CPU};

/* Checks and resolves the options of lf_ctx_new (environment included). */
static bool resolve_options(const lf_ctx_options *opt, lf_ctx_options *out) {
    lf_ctx_options o;
    if (graph_options_read(opt, &o) != LF_OK) return false;
    if ((unsigned)o.backend >= GRAPH_BACKENDS) {
        graph_error(NULL, LF_ERR_INVALID, "ctx_new: unknown backend %d", (int)o.backend);
        return false;
    }
    if (o.threads < 0) {
        graph_error(NULL, LF_ERR_INVALID, "ctx_new: threads must be >= 0, got %d", o.threads);
        return false;
    }
    if (o.fusion < -1 || o.fusion > 1) {
        graph_error(NULL, LF_ERR_INVALID, "ctx_new: fusion must be -1, 0 or 1, got %d", o.fusion);
        return false;
    }
    if ((unsigned)o.compile > LF_COMPILE_NEVER) {
        graph_error(NULL, LF_ERR_INVALID, "ctx_new: compile must be 0, 1 or 2 (lf_compile_mode), got %d",
                    o.compile);
        return false;
    }
    if (isnan(o.compile_timeout) || o.compile_timeout < 0) {
        graph_error(NULL, LF_ERR_INVALID,
                    "ctx_new: compile_timeout must be a number of seconds > 0 (0: the default), got %g",
                    o.compile_timeout);
        return false;
    }
    if (o.compile_timeout == 0) { /* the option wins, then the environment, then the default */
        const char *env = getenv("LF_COMPILE_TIMEOUT");
        if (env && env[strspn(env, " \t")]) {
            char *end;
            double t = strtod(env, &end);
            if (end == env || end[strspn(end, " \t")] || isnan(t) || t < 0) {
                graph_error(NULL, LF_ERR_INVALID,
                            "ctx_new: LF_COMPILE_TIMEOUT must be a number of seconds > 0 (0: the default), got '%.64s'",
                            env);
                return false;
            }
            o.compile_timeout = t;
        }
        if (o.compile_timeout == 0) o.compile_timeout = LF_COMPILE_TIMEOUT_DEFAULT;
    }
    if (o.compile == LF_COMPILE_AUTO) {
        const char *env = getenv("LF_COMPILE");
        if (env && strcmp(env, "never") == 0) o.compile = LF_COMPILE_NEVER;
        if (env && strcmp(env, "always") == 0) o.compile = LF_COMPILE_REQUIRE;
    }
    if (o.fusion == -1) {
        const char *env = getenv("LF_FUSION");
        o.fusion = (env && strcmp(env, "0") == 0) ? 0 : 1;
    }
    *out = o;
    return true;
}

/* Opens the backend of a new context: the one asked for, or for AUTO the
 * first of auto_order that opens (one line on stderr the first time in the
 * process a device backend is passed over, unless $LF_QUIET is set). */
static lf_status open_backend(lf_ctx *ctx) {
    char why[2048];
    lf_backend want = ctx->opt.backend;
    if (want != LF_BACKEND_AUTO) {
        const graph_backend *be = builtin[want];
        if (!be)
            return graph_error(NULL, LF_ERR_BACKEND,
                               "ctx_new: the %s backend is not part of this build of lazyfuse "
                               "(configured with -D%s=disabled)",
                               lf_backend_name(want), lf_backend_name(want));
        lf_status st = be->open(ctx, why, sizeof why);
        if (st == LF_ERR_NOMEM) return graph_error(NULL, LF_ERR_NOMEM, "ctx_new: out of memory");
        if (st != LF_OK) return graph_error(NULL, st, "ctx_new: %s", why);
        ctx->be = be;
        ctx->backend = want;
        return LF_OK;
    }
    size_t count = sizeof auto_order / sizeof auto_order[0];
    for (size_t i = 0; i < count; i++) {
        const graph_backend *be = builtin[auto_order[i]];
        if (!be) continue;
        lf_status st = be->open(ctx, why, sizeof why);
        if (st == LF_ERR_NOMEM) return graph_error(NULL, LF_ERR_NOMEM, "ctx_new: out of memory");
        if (st == LF_OK) {
            ctx->be = be;
            ctx->backend = be->id;
            return LF_OK;
        }
        static int warned;
        if (i + 1 < count && !__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED) && !getenv("LF_QUIET"))
            fprintf(stderr, "lazyfuse: no usable %s device (%s); using the %s backend\n", be->label, why,
                    builtin[auto_order[count - 1]]->label);
    }
    return graph_error(NULL, LF_ERR_BACKEND, "ctx_new: no backend could be opened");
}

lf_ctx *lf_ctx_new(const lf_ctx_options *opt) {
    lf_ctx_options o;
    if (!resolve_options(opt, &o)) return NULL;
    lf_ctx *ctx = graph_calloc(1, sizeof *ctx);
    if (!ctx) {
        graph_error(NULL, LF_ERR_NOMEM, "ctx_new: out of memory");
        return NULL;
    }
    if (o.cache_dir) {
        char *dir = graph_strdup(o.cache_dir);
        if (!dir) {
            graph_free(ctx);
            graph_error(NULL, LF_ERR_NOMEM, "ctx_new: out of memory");
            return NULL;
        }
        o.cache_dir = dir;
    }
    ctx->opt = o;
    ctx->hostcc = &cpu_hostcc; /* user functions' host code (lf_fn_c) */
    if (open_backend(ctx) != LF_OK) {
        graph_free((char *)ctx->opt.cache_dir);
        graph_free(ctx);
        return NULL;
    }
    return ctx;
}

void lf_ctx_destroy(lf_ctx *ctx) {
    if (!ctx) return;
    while (ctx->graphs) graph_destroy(ctx->graphs);
    while (ctx->buffers) {
        lf_buffer *b = ctx->buffers;
        b->refs = 1;
        graph_buffer_release(b);
    }
    for (int i = 0; i < GRAPH_BACKENDS; i++) /* every backend that made state here */
        if (builtin[i] && builtin[i]->close) builtin[i]->close(ctx);
    if (ctx->hostcc) ctx->hostcc->close(ctx); /* after the graphs that point into it */
    graph_free((char *)ctx->opt.cache_dir);
    graph_free(ctx);
}

/* One eval on backend be, written once for every backend: a backend with
 * parts runs the pipeline (program_eval: program cache -> plan -> in-place
 * -> layouts -> codegen -> kernel cache -> compile the misses -> run), or
 * the host's schedule interpreter where it says it cannot run kernels
 * (ready) or could not build them (fall_back); one without parts evaluates
 * by itself (the reference). */
static lf_status backend_eval(const graph_backend *be, lf_graph *g, int n, lf_node *const *outs,
                              lf_buffer *const *dsts, lf_eval_stats *stats) {
    lf_ctx *ctx = g->ctx;
    memset(stats, 0, sizeof *stats);
    if (!be->parts) return be->eval(g, n, outs, dsts, stats);
    void *state = NULL;
    bool on_host = false;
    lf_status st = be->ready(ctx, &state, &on_host);
    if (st != LF_OK) return st;
    if (on_host) return host_eval(g, n, outs, dsts, stats, false);
    char keep[LF_ERRMSG_CAP]; /* the message to put back if fall_back handles a failure */
    if (be->fall_back) memcpy(keep, ctx->errmsg, sizeof keep);
    st = program_eval(g, be->parts, state, n, outs, dsts, stats);
    if (st != LF_OK && be->fall_back && be->fall_back(ctx, state)) {
        memcpy(ctx->errmsg, keep, sizeof keep); /* the failure was the backend's, and is handled */
        return host_eval(g, n, outs, dsts, stats, false);
    }
    return st;
}

lf_status lf_eval(lf_graph *g, int n, lf_node *const *outs, lf_buffer *const *dsts) {
    if (g) memset(&g->ctx->last_stats, 0, sizeof g->ctx->last_stats);
    lf_status st = graph_check_outputs(g, n, outs, dsts);
    if (st != LF_OK) return st;
    lf_ctx *ctx = g->ctx;
    if ((st = graph_check_dst_memory(ctx, n, dsts)) != LF_OK) return st;
    const graph_backend *be = builtin[ctx->backend];
    if (!be || (be != ctx->be && be->buffer_alloc)) /* a device backend runs on its own buffers only */
        return graph_error(ctx, LF_ERR_STATE, "eval: the %s backend cannot run on this context's buffers",
                           lf_backend_name(ctx->backend));
    lf_eval_stats stats, steps;
    /* lf_extern nodes first: their inputs, callbacks and results (graph/extern.c) */
    if ((st = graph_extern_steps(g, n, outs, be, backend_eval, &steps)) != LF_OK) return st;
    if ((st = backend_eval(be, g, n, outs, dsts, &stats)) != LF_OK) return st;
    if (g->externs) { /* the steps' kernels count too */
        stats.kernels += steps.kernels;
        stats.bytes_read += steps.bytes_read;
        stats.bytes_written += steps.bytes_written;
        stats.temp_bytes_avoided += steps.temp_bytes_avoided;
        stats.bytes_materialized += steps.bytes_materialized;
        stats.plan_seconds += steps.plan_seconds;
        stats.kernels_compiled += steps.kernels_compiled;
        stats.kernels_disk_hits += steps.kernels_disk_hits;
        stats.kernels_memory_hits += steps.kernels_memory_hits;
        stats.compiler_runs += steps.compiler_runs;
    }
    ctx->last_stats = stats;
    /* a compiled program's line (the host evaluators print their own) */
    bool compiled = stats.program_reused || stats.kernels_compiled || stats.kernels_disk_hits ||
                    stats.kernels_memory_hits || (stats.kernels == 0 && g->programs[0].p);
    if (graph_debug_on("fusion") && g->programs[0].p && g->programs[0].free != host_program_free &&
        be->id != LF_BACKEND_REFERENCE && compiled)
        host_print_stats(&stats, NULL, ctx->opt.fusion != 0, be->name);
    return LF_OK;
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
    return ctx->be->device_name(ctx, cap ? buf : tmp, cap ? cap : 1);
}
