/* backends/program.c: the eval pipeline every compiled backend shares (see
 * program.h): program_eval (program cache -> build or reuse -> run ->
 * statistics) and program_build (plan with the in-place decision -> per
 * kernel layout, codegen, memory cache -> the backend compiles the misses
 * -> bind), calling the backend's parts.
 *
 * What must stay true: program_find matches exactly what program_plan
 * recorded (program.h); program_emit is the one place the backends enter
 * codegen for a kernel's source.
 */
#include "backends/program.h"

#include <stdio.h>
#include <string.h>

static bool matches(const program *p, const void *owner, const lf_graph *g, int n, lf_node *const *outs,
                    lf_buffer *const *dsts) {
    if (p->owner != owner || p->version != g->version || p->n != n || p->fused != (g->ctx->opt.fusion != 0))
        return false;
    for (int i = 0; i < n; i++)
        if (p->out_ids[i] != outs[i]->id || p->inplace[i] != fuse_in_place_target(p->s, dsts[i])) return false;
    return true;
}

void *program_find(lf_graph *g, void (*free_fn)(void *), const void *owner, int n, lf_node *const *outs,
                   lf_buffer *const *dsts) {
    for (int i = 0; i < GRAPH_PROGRAMS && g->programs[i].p; i++)
        if (g->programs[i].free == free_fn && matches(g->programs[i].p, owner, g, n, outs, dsts))
            return graph_program_use(g, i);
    return NULL;
}

lf_status program_plan(lf_graph *g, const void *owner, int n, lf_node *const *outs, lf_buffer *const *dsts,
                       program *p) {
    lf_ctx *ctx = g->ctx;
    p->owner = owner;
    p->version = g->version;
    p->fused = ctx->opt.fusion != 0;
    p->n = n;
    p->out_ids = graph_calloc((size_t)n, sizeof *p->out_ids);
    p->inplace = graph_calloc((size_t)n + 1, sizeof *p->inplace);
    if (!p->out_ids || !p->inplace) return graph_error(ctx, LF_ERR_NOMEM, "eval: out of memory");
    for (int i = 0; i < n; i++) p->out_ids[i] = outs[i]->id;
    lf_status status = fuse_plan(g, n, outs, p->fused, &p->s);
    if (status != LF_OK) return status;
    for (int i = 0; i < n; i++) /* outputs asked for in their own inputs */
        p->inplace[i] = fuse_plan_in_place(p->s, i, dsts[i]);
    fuse_schedule_stats(p->s, &p->stats);
    if (graph_debug_on("schedule")) fuse_schedule_print(p->s, stderr);
    return LF_OK;
}

void program_release(program *p) {
    graph_free(p->out_ids);
    graph_free(p->inplace);
    fuse_schedule_free(p->s);
    p->out_ids = NULL;
    p->inplace = NULL;
    p->s = NULL;
}

lf_status program_emit(lf_ctx *ctx, const fuse_schedule *s, const cg_layout *lay, const cg_dialect *d, int k,
                       const char *what, cg_text *src) {
    memset(src, 0, sizeof *src);
    const fuse_kernel *kn = lay->kernel;
    for (int j = 0; j < kn->nreds; j++) /* issue 31: complex sums are not written in the skeletons yet */
        if (graph_dtype_is_complex(kn->reds[j].in))
            return graph_error(ctx, LF_ERR_DTYPE,
                               "eval: %s %d reduces complex values (node %d, %s of %s), which compiled kernels do "
                               "not do yet; the reference evaluator and the schedule interpreter (LF_COMPILE=never) do",
                               what, k, kn->reds[j].node->id, graph_reds[kn->reds[j].op].text,
                               lf_dtype_name(kn->reds[j].in));
    cg_emit_kernel(s, lay, d, src);
    if (src->nomem) {
        cg_text_free(src);
        return graph_error(ctx, LF_ERR_NOMEM, "eval: out of memory generating %s %d", what, k);
    }
    if (graph_debug_on("source")) fprintf(stderr, "/* ---- lazyfuse %s %d ---- */\n%s\n", what, k, src->s);
    return LF_OK;
}

/* Looks kernel k (layout lay) up in the memory cache. A hit sets *hit_e to
 * the cached entry; a kernel equal to an earlier miss of this program sets
 * *same to that miss's index (*hit_e stays NULL); both count as memory hits
 * (as when the first was compiled). A miss is appended to m (*nm). */
static lf_status kernel_lookup(lf_ctx *ctx, const program_parts *parts, void *state, const fuse_schedule *s,
                               const cg_layout *lay, int k, program_miss *m, int *nm, int *same, kcache_entry **hit_e,
                               lf_eval_stats *st) {
    cg_text src;
    kcache_entry *e;
    bool hit;
    *hit_e = NULL;
    *same = -1;
    lf_status status = program_emit(ctx, s, lay, parts->dialect(state), k, parts->what, &src);
    if (status != LF_OK) return status;
    status = kcache_lookup(ctx, parts->cache(state), src.s, k, parts->what, parts->entry_size, &e, &hit);
    if (status != LF_OK || hit) cg_text_free(&src);
    if (status != LF_OK) return status;
    if (!hit)
        for (int j = 0; j < *nm; j++)
            if (m[j].e->hash == e->hash && !strcmp(m[j].e->text, e->text)) {
                kcache_discard(e);
                cg_text_free(&src);
                *same = j;
                hit = true;
                break;
            }
    if (hit) {
        st->kernels_memory_hits++;
        if (*same < 0) *hit_e = e;
        return LF_OK;
    }
    m[(*nm)++] = (program_miss){.k = k, .root = s->graph->nodes[lay->kernel->root], .lay = lay, .e = e, .src = src};
    return LF_OK;
}

lf_status program_build(lf_graph *g, const program_parts *parts, void *state, int n, lf_node *const *outs,
                        lf_buffer *const *dsts, program **out, lf_eval_stats *st) {
    lf_ctx *ctx = g->ctx;
    program_miss *m = NULL;
    int *same = NULL, nm = 0; /* per kernel: the earlier miss it equals, or -1 */
    *out = NULL;
    program *p = parts->create(state);
    if (!p) return graph_error(ctx, LF_ERR_NOMEM, "eval: out of memory");
    lf_status status = program_plan(g, state, n, outs, dsts, p);
    if (status == LF_OK && parts->prepare) status = parts->prepare(ctx, state, p);
    if (status != LF_OK) {
        parts->free(p);
        return status;
    }
    const fuse_schedule *s = p->s;
    double t0 = graph_now_seconds();
    if (!parts->dialect) { /* an interpreted program: the schedule is all it runs */
        *out = p;
        return LF_OK;
    }
    m = graph_calloc((size_t)s->nkernels + 1, sizeof *m);
    same = graph_calloc((size_t)s->nkernels + 1, sizeof *same);
    if (!m || !same) {
        status = graph_error(ctx, LF_ERR_NOMEM, "eval: out of memory building the program");
        goto fail;
    }
    for (int k = 0; k < s->nkernels; k++) {
        kcache_entry *e;
        cg_layout *lay = cg_layout_new(s, k);
        if (!lay) {
            status = graph_error(ctx, LF_ERR_NOMEM, "eval: out of memory building the program");
            goto fail;
        }
        if ((status = parts->prepare_kernel(ctx, state, p, k, lay)) != LF_OK ||
            (status = kernel_lookup(ctx, parts, state, s, lay, k, m, &nm, &same[k], &e, st)) != LF_OK)
            goto fail;
        if (e) parts->bind(p, k, e);
    }
    if (nm && (status = parts->compile(ctx, state, m, nm, st)) != LF_OK) goto fail;
    for (int i = 0; i < nm; i++) {
        cg_text_free(&m[i].src);
        parts->bind(p, m[i].k, m[i].e);
    }
    for (int k = 0; k < s->nkernels; k++)
        if (same[k] >= 0) parts->bind(p, k, m[same[k]].e);
    if (parts->finish && (status = parts->finish(ctx, state, p, st)) != LF_OK) goto fail;
    graph_free(m);
    graph_free(same);
    st->compile_seconds = graph_now_seconds() - t0;
    *out = p;
    return LF_OK;
fail:
    for (int i = 0; m && i < nm; i++) {
        cg_text_free(&m[i].src);
        if (m[i].done) continue;
        if (parts->discard) parts->discard(m[i].e);
        kcache_discard(m[i].e);
    }
    graph_free(m);
    graph_free(same);
    parts->free(p);
    return status;
}

lf_status program_eval(lf_graph *g, const program_parts *parts, void *state, int n, lf_node *const *outs,
                       lf_buffer *const *dsts, lf_eval_stats *stats) {
    void *p = program_find(g, parts->free, state, n, outs, dsts);
    bool fresh = !p;
    lf_status st;
    if (p) {
        stats->program_reused = true;
    } else {
        program *np;
        if ((st = program_build(g, parts, state, n, outs, dsts, &np, stats)) != LF_OK) return st;
        p = np;
    }
    if ((st = parts->run(g->ctx, state, p, dsts, stats)) != LF_OK) {
        if (fresh) parts->free(p); /* a failed eval leaves the graph's cache as it was */
        return st;
    }
    if (fresh) graph_program_put(g, p, parts->free);
    lf_eval_stats run = *stats;
    program_stats(p, &run, stats);
    return LF_OK;
}

void program_stats(const program *p, const lf_eval_stats *run, lf_eval_stats *out) {
    lf_eval_stats keep = *run;
    *out = p->stats;
    out->kernels_compiled = keep.kernels_compiled;
    out->kernels_disk_hits = keep.kernels_disk_hits;
    out->kernels_memory_hits = keep.kernels_memory_hits;
    out->compiler_runs = keep.compiler_runs;
    out->program_reused = keep.program_reused;
    out->compile_seconds = keep.compile_seconds;
    out->outputs_in_place = keep.outputs_in_place;
    out->bytes_staged = keep.bytes_staged;
    if (keep.program_reused) out->plan_seconds = 0;
}
