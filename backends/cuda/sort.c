/* backends/cuda/sort.c: sort kernels (fusion/plan_sort.c) on the device.
 *
 * A sort kernel runs as three steps on the context's stream:
 *  1. the key pass, the kernel's own generated module (emit_cuda.c,
 *     launched by cuda.c like any kernel): per flat position p of its space
 *     (the sort input's rows, the sorted axis innermost) K[p], the sort key,
 *     and, when the kernel has a values node, V[p], the value itself; K and
 *     V share one work area bound as the buffer of the kernel's store 0
 *     (cg_cuda_sort_work_bytes);
 *  2. the sort module's launches (codegen/sort_cuda.c, planned here from the
 *     shape alone with want_pos: the first k positions of each row into pos);
 *  3. the module's output pass lf_sort_write: indices[at] = pos and
 *     values[at] = V[row, pos] at the nodes' dense places
 *     (graph_sort_row_base). Values are moved as bits, never decoded from
 *     keys: -0.0 and NaN payloads come out as the key pass computed them.
 * The module is one text for every graph, loaded once per context
 * (cuda_state.sort_module) through the same disk cache as the kernels; the
 * eval that loads it counts it in kernels_compiled or kernels_disk_hits.
 *
 * Memory: the work area, pos and the module's scratch come from the
 * context's caching allocator for each run, before its first launch
 * (cuda_sort_acquire: everything fallible first, as cuda.h requires), and
 * go back to it once the run's launches are queued (stream order keeps a
 * block from being reused before they finish). A program holds none of it
 * between evals.
 *
 * What is verified where: nothing here has run on a GPU (none on the
 * machine this was written on). tests/test_cuda_codegen.c runs the same
 * three steps (the generated key pass, the module's plans, the output pass)
 * on the host emulation of tests/cuda_emu.c and compares with the
 * reference exactly; tests/test_cuda.c runs this file's host logic (module
 * load, plans, lookups, memory, launch order, failures) against the fake
 * driver, which launches nothing.
 */
#include "backends/cuda/cuda.h"

#include <stdio.h>
#include <string.h>

/* Loads the sort module once per context. */
static lf_status sort_module(lf_ctx *ctx, cuda_state *cs, lf_eval_stats *st) {
    if (cs->sort_module) return LF_OK;
    cuda_module *m = graph_calloc(1, sizeof *m);
    if (!m) return graph_error(ctx, LF_ERR_NOMEM, "eval: out of memory loading the CUDA sort module");
    const char *src = cg_cuda_sort_source();
    lf_status status = cuda_module_load(ctx, cs, src, src, "lazyfuse_sort.cu", "the CUDA sort module", &m->mod, st);
    if (status != LF_OK) {
        graph_free(m);
        return status;
    }
    cs->sort_module = m;
    return LF_OK;
}

static lf_status lookup(lf_ctx *ctx, cuda_state *cs, const char *entry, int k, CUfunction *fn) {
    char es[512];
    CUresult r = cuda_module_function(cs, cs->sort_module, entry, fn);
    if (r != CUDA_SUCCESS)
        return graph_error(ctx, LF_ERR_BACKEND, "eval: the CUDA sort module (kernel %d) lacks entry point %s: %s", k,
                           entry, cuda_result_str(&cs->drv, r, es, sizeof es));
    return LF_OK;
}

lf_status cuda_sort_prepare(lf_ctx *ctx, cuda_state *cs, const fuse_schedule *s, const cg_layout *lay, int k,
                            cuda_sort **out, lf_eval_stats *st) {
    *out = NULL;
    const fuse_kernel *kn = lay->kernel;
    lf_status status = sort_module(ctx, cs, st);
    if (status != LF_OK) return status;
    cuda_sort *so = graph_calloc(1, sizeof *so);
    if (!so) return graph_error(ctx, LF_ERR_NOMEM, "eval: out of memory planning sort kernel %d", k);
    graph_sort_geom_of(kn->sort, &so->gm);
    lf_dtype t = kn->sort->inputs[0]->dtype;
    so->wide = graph_sort_key_wide(t);
    so->value_size = kn->sort_values ? lf_dtype_size(t) : 0;
    so->work_buf = so->values_slot = so->indices_slot = -1;
    for (int i = 0; i < lay->naccess; i++)
        if (lay->access[i].fn < 0 && lay->access[i].index == 0) so->work_buf = lay->access[i].buf;
    for (int j = 0; j < kn->nstores; j++) {
        const lf_node *nd = s->slots[kn->stores[j].slot].node;
        if (nd == kn->sort_values) so->values_slot = kn->stores[j].slot;
        if (nd == kn->sort_indices) so->indices_slot = kn->stores[j].slot;
    }
    const graph_sort_geom *gm = &so->gm;
    int64_t numel = gm->nrows * gm->n;
    cg_cuda_plan_sort(gm->nrows, gm->n, gm->k, so->wide, false, true, &so->plan);
    so->has_write = cg_cuda_plan_sort_write(gm->nrows, gm->k, 0, &so->write);
    if (so->has_write) { /* something to write: the key pass runs too */
        so->work_bytes = cg_cuda_sort_work_bytes(numel, so->wide, so->value_size);
        so->pos_bytes = (size_t)(gm->nrows * gm->k) * sizeof(int64_t);
        so->scratch_bytes = so->plan.scratch_bytes;
    }
    so->words = graph_calloc(((size_t)so->plan.nlaunches + 1) * CG_CUDA_SORT_WORDS, sizeof *so->words);
    if (!so->words || so->work_buf < 0) {
        bool nomem = !so->words;
        cuda_sort_free(cs, so);
        return nomem ? graph_error(ctx, LF_ERR_NOMEM, "eval: out of memory planning sort kernel %d", k)
                     : graph_error(ctx, LF_ERR_BACKEND, "eval: sort kernel %d has no store", k);
    }
    for (int l = 0; l < so->plan.nlaunches && status == LF_OK; l++)
        status = lookup(ctx, cs, so->plan.launch[l].entry, k, &so->fn[l]);
    if (status == LF_OK && so->has_write) status = lookup(ctx, cs, so->write.entry, k, &so->write_fn);
    if (status != LF_OK) {
        cuda_sort_free(cs, so);
        return status;
    }
    *out = so;
    return LF_OK;
}

void cuda_sort_release(cuda_state *cs, cuda_sort *so) {
    cuda_mem_free(cs, so->work, so->work_bytes);
    cuda_mem_free(cs, so->pos, so->pos_bytes);
    cuda_mem_free(cs, so->scratch, so->scratch_bytes);
    so->work = so->pos = so->scratch = 0;
}

void cuda_sort_free(cuda_state *cs, cuda_sort *so) {
    if (!so) return;
    cuda_sort_release(cs, so);
    graph_free(so->words);
    graph_free(so);
}

lf_status cuda_sort_acquire(lf_ctx *ctx, cuda_state *cs, cuda_sort *so) {
    if (!so->has_write) return LF_OK;
    struct {
        size_t bytes;
        CUdeviceptr *addr;
    } want[3] = {{so->work_bytes, &so->work}, {so->pos_bytes, &so->pos}, {so->scratch_bytes, &so->scratch}};
    for (int i = 0; i < 3; i++) {
        if (!want[i].bytes) continue;
        bool host_nomem;
        CUresult r = cuda_mem_alloc(cs, want[i].bytes, false, want[i].addr, &host_nomem);
        if (r != CUDA_SUCCESS) {
            *want[i].addr = 0;
            cuda_sort_release(cs, so);
            return cuda_alloc_error(ctx, cs, r, host_nomem, want[i].bytes, "eval: sort");
        }
    }
    return LF_OK;
}

void cuda_sort_fill(cuda_sort *so, const uint64_t *slot_addr) {
    if (!so->has_write) return;
    const graph_sort_geom *gm = &so->gm;
    cg_cuda_sort_fill_args(&so->plan, so->work, 0, so->pos, so->scratch, so->words);
    uint64_t V = so->work + cg_cuda_sort_values_offset(gm->nrows * gm->n, so->wide);
    uint64_t vout = so->values_slot >= 0 ? slot_addr[so->values_slot] : 0;
    uint64_t iout = so->indices_slot >= 0 ? slot_addr[so->indices_slot] : 0;
    cg_cuda_sort_write_args(gm->nrows, gm->n, gm->k, gm->inner, so->value_size, V, so->pos, vout, iout,
                            so->words + (size_t)so->plan.nlaunches * CG_CUDA_SORT_WORDS);
}

lf_status cuda_sort_launch(lf_ctx *ctx, cuda_state *cs, const cuda_sort *so, int k, bool ran) {
    if (!so->has_write) return LF_OK;
    char es[512];
    int n = so->plan.nlaunches;
    for (int l = 0; l <= n; l++) {
        const cg_cuda_sort_launch *la = l < n ? &so->plan.launch[l] : &so->write;
        void *params[1] = {so->words + (size_t)l * CG_CUDA_SORT_WORDS};
        if (graph_debug_on("launch"))
            fprintf(stderr, "lazyfuse cuda: kernel %d sort launch %d: %s grid (%u,%u,%u) block (%u,%u,%u), scratch %zu B\n",
                    k, l, la->entry, la->grid[0], la->grid[1], la->grid[2], la->block[0], la->block[1], la->block[2],
                    so->scratch_bytes);
        CUresult r = cs->drv.LaunchKernel(l < n ? so->fn[l] : so->write_fn, la->grid[0], la->grid[1], la->grid[2],
                                          la->block[0], la->block[1], la->block[2], la->shared_bytes, cs->stream,
                                          params, NULL);
        if (r != CUDA_SUCCESS)
            return graph_error(ctx, LF_ERR_BACKEND, "eval: launching CUDA kernel %d (%s, the sort module) failed: %s%s",
                               k, la->entry, cuda_result_str(&cs->drv, r, es, sizeof es),
                               ran || l ? " (earlier kernels of this eval ran: outputs may be partly written)" : "");
    }
    return LF_OK;
}
