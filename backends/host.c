/* backends/host.c: the host evaluators behind a backend (see host.h): the
 * REFERENCE backend's table entry, the interpreter fallback (the driver
 * sends an eval there when a backend's ready or fall_back says so: the CPU
 * without a compiler or room to compile), the CUDA backend's index-error
 * message, the host's device name.
 *
 *     REFERENCE:  check -> node-by-node oracle (graph/eval_ref.c) -> copy out
 *     fallback:   check -> program cache or plan (fusion/; program_eval, as
 *                 the compiled backends) -> schedule interpreter -> copy out
 *
 * What must stay true: outputs are written only after the whole evaluation
 * succeeded (results are fresh arrays until then); a device context's input
 * buffers are copied to the host for the one call (stage_inputs) and their
 * data pointer cleared again (unstage_inputs), so only its own backend ever
 * sees a device buffer with host data.
 */
#include "backends/host.h"

#include "backends/program.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void host_print_stats(const lf_eval_stats *st, const fuse_schedule *s, bool fused, const char *backend) {
    fprintf(stderr,
            "lazyfuse fusion: %d kernel%s (fusion %s), read %zu B, written %zu B, "
            "materialized %zu B, temporaries avoided %zu B, planned in %.6f s\n",
            st->kernels, st->kernels == 1 ? "" : "s", fused ? "on" : "off", st->bytes_read,
            st->bytes_written, st->bytes_materialized, st->temp_bytes_avoided, st->plan_seconds);
    if (!s) {
        fprintf(stderr,
                "lazyfuse %s: program %s, kernels compiled %d (compiler runs %d), from disk %d, from memory %d, "
                "codegen+compile+load %.6f s\n",
                backend, st->program_reused ? "reused" : "built", st->kernels_compiled, st->compiler_runs,
                st->kernels_disk_hits, st->kernels_memory_hits, st->compile_seconds);
        return;
    }
    fuse_schedule_print(s, stderr);
}

/* Host copies of a device context's input buffers (their whole storage) for
 * the host evaluators; unstage_inputs frees them and clears data again. */
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
        b->data = graph_malloc(b->storage);
        lf_status st = b->data ? g->ctx->be->buffer_read(b, b->data, "eval")
                               : graph_error(g->ctx, LF_ERR_NOMEM, "eval: out of memory");
        if (st != LF_OK) {
            unstage_inputs(g);
            return st;
        }
    }
    return LF_OK;
}

lf_status host_index_error_message(lf_graph *g, int n, lf_node *const *outs) {
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

/* Runs the reference evaluator on outs[0..n) of g (s NULL) or the schedule
 * interpreter on s (outs unused: the schedule names its n outputs) into
 * fresh arrays, then copies them into dsts. */
static lf_status host_run(lf_graph *g, const fuse_schedule *s, int n, lf_node *const *outs, lf_buffer *const *dsts) {
    lf_ctx *ctx = g->ctx;
    bool device = graph_ctx_on_device(ctx);
    /* the interpreter and the oracle return fresh arrays, copied out at the end */
    void **results = graph_calloc((size_t)n, sizeof *results);
    if (!results) return graph_error(ctx, LF_ERR_NOMEM, "eval: out of memory");
    lf_status st = device ? stage_inputs(g) : LF_OK;
    if (st != LF_OK) {
        graph_free(results);
        return st;
    }
    st = s ? fuse_interpret(s, results) : graph_eval_reference(g, n, outs, results);
    if (st == LF_OK)
        for (int i = 0; i < n && st == LF_OK; i++) {
            if (!dsts[i]->bytes) continue;
            if (device) st = ctx->be->buffer_write(dsts[i], results[i], "eval");
            else memcpy(dsts[i]->data, results[i], dsts[i]->bytes);
        }
    if (device) unstage_inputs(g);
    for (int i = 0; i < n; i++) graph_free(results[i]);
    graph_free(results);
    return st;
}

/* ---- the schedule interpreter as a program (backends/program.h) ----
 * The pipeline is the compiled backends' (program_eval): the graph's
 * program cache, planning once per output set, the run; an interpreted
 * program is the plan alone (no dialect: nothing is emitted or compiled),
 * owned by the context. */

static program *interp_create(void *state) {
    (void)state;
    return graph_calloc(1, sizeof(program));
}

void host_program_free(void *p) {
    if (!p) return;
    program_release(p);
    graph_free(p);
}

static lf_status interp_run(lf_ctx *ctx, void *state, void *p, lf_buffer *const *dsts, lf_eval_stats *st) {
    (void)ctx, (void)state;
    const program *pr = p;
    lf_graph *g = pr->s->graph;
    lf_status status = host_run(g, pr->s, pr->n, NULL, dsts);
    if (status == LF_OK && graph_debug_on("fusion")) {
        lf_eval_stats shown = pr->stats;
        if (st->program_reused) shown.plan_seconds = 0;
        host_print_stats(&shown, pr->s, pr->s->fused, "interpreter");
    }
    return status;
}

static const program_parts interp_parts = {
    .what = "kernel",
    .create = interp_create,
    .free = host_program_free,
    .run = interp_run,
};

lf_status host_eval(lf_graph *g, int n, lf_node *const *outs, lf_buffer *const *dsts, lf_eval_stats *stats,
                    bool reference) {
    memset(stats, 0, sizeof *stats);
    lf_status st = reference ? host_run(g, NULL, n, outs, dsts)
                             : program_eval(g, &interp_parts, g->ctx, n, outs, dsts, stats);
    if (st != LF_OK) memset(stats, 0, sizeof *stats);
    return st;
}

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

int host_device_name(const lf_ctx *ctx, char *buf, size_t cap) {
    (void)ctx;
    char model[256];
    cpu_model(model, sizeof model);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    return snprintf(buf, cap, "%s, %ld CPU%s", model, cpus, cpus == 1 ? "" : "s");
}

/* ---- the REFERENCE backend ---------------------------------------------------------------- */

static lf_status reference_open(lf_ctx *ctx, char *why, size_t cap) {
    (void)ctx, (void)why, (void)cap;
    return LF_OK;
}

static lf_status reference_eval(lf_graph *g, int n, lf_node *const *outs, lf_buffer *const *dsts,
                                lf_eval_stats *stats) {
    return host_eval(g, n, outs, dsts, stats, true);
}

const graph_backend host_reference_backend = {
    .id = LF_BACKEND_REFERENCE,
    .name = "reference",
    .label = "reference",
    .open = reference_open,
    .close = NULL, /* no state */
    /* host memory: no buffer entries */
    .eval = reference_eval,
    .device_name = host_device_name,
};
