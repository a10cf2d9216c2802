/* backends/cuda/cuda.c: CUDA contexts, device buffers and lf_eval on the GPU.
 *
 * The eval is the driver's pipeline (backends/driver.c: cuda_ready makes the
 * device current, then backends/program.c's program_eval and program_build, as the
 * CPU's, with this file's parts (cuda_parts: program cache lookup, plan and
 * in-place decision, kernel source, memory cache and statistics are
 * program.c's): plan (fusion/) -> per kernel layout and CUDA source
 * (codegen/, dialect cg_dialect_cuda) -> module from the cache or NVRTC
 * (compile_part) -> per run, launch plans (cg_cuda_plan_kernel) and
 * argument words (cg_cuda_fill_args) -> cuLaunchKernel on the context's
 * stream, asynchronously.
 *
 * Module cache, two levels (backends/kcache.c, as the CPU backend):
 *  - in memory, per context: keyed by the FNV hash of the source without
 *    comments, confirmed by comparing that text; holds the loaded CUmodule
 *    and the entry points looked up so far;
 *  - on disk (backends/diskcache.c): the CUBIN (or PTX), keyed by a SHA-256
 *    of that text, the NVRTC version, the target (sm_XY or compute_XY) and
 *    the options; verified on load, and recompiled when the driver refuses
 *    a verified entry.
 * A graph's program (one per output set, in graph.h's program cache; it
 * starts with the shared header of backends/program.h) keeps the schedule, each kernel's layout, parameters and
 * module, the temporaries' device memory, each kernel's scratch, and the
 * launch plan and argument words of the buffer addresses it last ran with:
 * re-evaluating the same outputs into the same buffers plans, emits, looks up
 * and allocates nothing, and only launches.
 *
 * Sort kernels (fusion/plan_sort.c) run on the device too: their key pass
 * is a generated kernel as above, bound to a work area instead of its
 * first slot; the sort module's launches and the output pass that follow
 * are sort.c's (cuda_sort_*: module loaded once per context, plans and
 * lookups at program build, memory per run before the first launch).
 * None of this has run on a GPU: the emulation of tests/test_cuda_codegen.c
 * and the fake driver of tests/test_cuda.c are what checked it.
 *
 * What must stay true (see also cuda.h): every fallible step of an eval
 * (planning, compiling, loading, entry lookups, allocating temporaries,
 * scratch and sort memory, the argument size check) is done for all kernels before the first
 * launch; an output goes straight into the user's buffer only when no kernel
 * reads that buffer and no other output names it (cpu.c's rule), else
 * through a temporary copied at the end with cuMemcpyDtoDAsync; a scratch is
 * zeroed when allocated and kernels leave its tickets zero.
 */
#include "backends/cuda/cuda.h"

#include "backends/diskcache.h"
#include "backends/host.h"
#include "backends/program.h"
#include "backends/sha256.h"
#include "codegen/codegen.h"

#include <stdlib.h>
#include <string.h>

enum {
    CLASSIC_PARAM_BYTES = 4096,                 /* kernel argument limit before CUDA 12.1 */
    LARGE_PARAM_BYTES = 32764                   /* limit from 12.1 on Volta and newer */
};

/* Sets the context's CUDA context current on this thread. */
static CUresult make_current(cuda_state *cs) { return cs->drv.CtxSetCurrent(cs->cu); }

/* ---- the state -------------------------------------------------------------------------- */

static void module_release(kcache_entry *base, void *arg) {
    cuda_state *cs = arg;
    cuda_module *m = (cuda_module *)base;
    if (m->mod) cs->drv.ModuleUnload(m->mod);
}

static void state_free(void *p) {
    cuda_state *cs = p;
    if (!cs) return;
    if (cs->stream) {
        make_current(cs);
        cs->drv.StreamSynchronize(cs->stream);
    }
    kcache_clear(&cs->modules, module_release, cs);
    if (cs->sort_module) {
        if (cs->sort_module->mod) cs->drv.ModuleUnload(cs->sort_module->mod);
        graph_free(cs->sort_module);
    }
    if (cs->stream) {
        cuda_mem_trim(cs);
        cs->drv.StreamDestroy(cs->stream);
    }
    graph_free(cs->alloc.bins);
    if (cs->retained) cs->drv.DevicePrimaryCtxRelease(cs->dev);
    cuda_nvrtc_unload(&cs->nv);
    cuda_driver_unload(&cs->drv);
    graph_free(cs->cache_dir);
    graph_free(cs);
}

/* The device number: $LF_CUDA_DEVICE, else 0; -1 when the variable is bad. */
static int device_ordinal(void) {
    const char *e = getenv("LF_CUDA_DEVICE");
    if (!e || !*e) return 0;
    char *end;
    long v = strtol(e, &end, 10);
    return (*end || v < 0 || v > 1 << 20) ? -1 : (int)v;
}

/* Opens the CUDA backend for ctx (sets ctx->state[LF_BACKEND_CUDA]). On
 * failure returns LF_ERR_BACKEND with why ("cuda: cuInit failed:
 * CUDA_ERROR_NO_DEVICE: ...") or LF_ERR_NOMEM, and ctx is unchanged. */
static lf_status cuda_open(lf_ctx *ctx, char *why, size_t cap) {
    cuda_state *cs = graph_calloc(1, sizeof *cs);
    if (!cs) {
        snprintf(why, cap, "cuda: out of memory");
        return LF_ERR_NOMEM;
    }
    char msg[1024], es[512];
    lf_status st = LF_ERR_BACKEND;
    CUresult r;
    if (cuda_driver_load(&cs->drv, msg, sizeof msg) != 0) {
        snprintf(why, cap, "cuda: %s", msg);
        goto fail;
    }
    cuda_driver *d = &cs->drv;
#define CHECK(call, what)                                                                   \
    if ((r = (call)) != CUDA_SUCCESS) {                                                     \
        snprintf(why, cap, "cuda: %s failed: %s", what, cuda_result_str(d, r, es, sizeof es)); \
        goto fail;                                                                          \
    }
    CHECK(d->Init(0), "cuInit");
    CHECK(d->DriverGetVersion(&cs->driver_version), "cuDriverGetVersion");
    int count = 0;
    CHECK(d->DeviceGetCount(&count), "cuDeviceGetCount");
    if (count <= 0) {
        snprintf(why, cap, "cuda: the driver (%s) reports no CUDA device", d->path);
        goto fail;
    }
    cs->ordinal = device_ordinal();
    if (cs->ordinal < 0 || cs->ordinal >= count) {
        snprintf(why, cap, "cuda: LF_CUDA_DEVICE=%s is not a device number (0..%d)",
                 getenv("LF_CUDA_DEVICE"), count - 1);
        goto fail;
    }
    CHECK(d->DeviceGet(&cs->dev, cs->ordinal), "cuDeviceGet");
    CHECK(d->DeviceGetName(cs->name, (int)sizeof cs->name - 1, cs->dev), "cuDeviceGetName");
    CHECK(d->DeviceGetAttribute(&cs->sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, cs->dev),
          "cuDeviceGetAttribute(multiprocessors)");
    CHECK(d->DeviceGetAttribute(&cs->cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, cs->dev),
          "cuDeviceGetAttribute(compute capability)");
    CHECK(d->DeviceGetAttribute(&cs->cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, cs->dev),
          "cuDeviceGetAttribute(compute capability)");
    CHECK(d->DeviceTotalMem(&cs->total_mem, cs->dev), "cuDeviceTotalMem");
    CHECK(d->DevicePrimaryCtxRetain(&cs->cu, cs->dev), "cuDevicePrimaryCtxRetain");
    cs->retained = true;
    CHECK(d->CtxSetCurrent(cs->cu), "cuCtxSetCurrent");
    CHECK(d->StreamCreate(&cs->stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
#undef CHECK
    if (cs->sm_count < 1) cs->sm_count = 1;
    if (cuda_nvrtc_load(&cs->nv, msg, sizeof msg) != 0) {
        snprintf(why, cap, "cuda: %s", msg);
        goto fail;
    }
    int sm = cs->cc_major * 10 + cs->cc_minor;
    cs->arch = cuda_nvrtc_target(&cs->nv, sm, &cs->ptx);
    if (!cs->arch) {
        snprintf(why, cap, "cuda: NVRTC %d.%d (%s) cannot compile for %s (sm_%d): its oldest target is sm_%d",
                 cs->nv.major, cs->nv.minor, cs->nv.path, cs->name, sm, cs->nv.archs[0]);
        goto fail;
    }
    cs->cache_dir = diskcache_dir(ctx->opt.cache_dir); /* NULL: no disk level */
    if (!cs->cache_dir && diskcache_dir_expected(ctx->opt.cache_dir)) {
        snprintf(why, cap, "cuda: out of memory");
        st = LF_ERR_NOMEM;
        goto fail;
    }
    if (kcache_disk_open(NULL, &cs->cache_dir) != LF_OK) { /* an unsafe folder: NULL, with a warning */
        snprintf(why, cap, "cuda: out of memory");
        st = LF_ERR_NOMEM;
        goto fail;
    }
    ctx->state[LF_BACKEND_CUDA] = cs;
    return LF_OK;
fail:
    state_free(cs);
    return st;
}

int cuda_device_description(const lf_ctx *ctx, char *buf, size_t cap) {
    const cuda_state *cs = ctx->state[LF_BACKEND_CUDA];
    return snprintf(buf, cap, "%s (sm_%d%d, %d SMs, %.1f GiB), CUDA driver %d.%d, NVRTC %d.%d%s [%s]",
                    cs->name, cs->cc_major, cs->cc_minor, cs->sm_count, (double)cs->total_mem / (1 << 30),
                    cs->driver_version / 1000, cs->driver_version % 1000 / 10, cs->nv.major, cs->nv.minor,
                    cs->ptx ? " (PTX, JIT by the driver)" : "", cs->nv.path);
}

void cuda_alloc_stats(const lf_ctx *ctx, cuda_alloc *out) {
    memset(out, 0, sizeof *out);
    if (ctx && ctx->state[LF_BACKEND_CUDA]) *out = ((const cuda_state *)ctx->state[LF_BACKEND_CUDA])->alloc;
    out->bins = NULL;
}

/* ---- buffers ---------------------------------------------------------------------------- */

/* Records a failed device allocation of bytes for `what`. */
lf_status cuda_alloc_error(lf_ctx *ctx, cuda_state *cs, CUresult r, bool host_nomem, size_t bytes,
                           const char *what) {
    char es[512];
    if (host_nomem) return graph_error(ctx, LF_ERR_NOMEM, "%s: out of memory", what);
    if (r == CUDA_ERROR_OUT_OF_MEMORY)
        return graph_error(ctx, LF_ERR_NOMEM, "%s: cuda: out of device memory (%zu bytes)", what, bytes);
    return graph_error(ctx, LF_ERR_BACKEND, "%s: cuda: allocating %zu bytes failed: %s", what, bytes,
                       cuda_result_str(&cs->drv, r, es, sizeof es));
}

/* Device memory of a buffer (bytes > 0), zero-filled; records "what: cuda:
 * ..." on ctx on failure (LF_ERR_NOMEM when out of device memory). */
static lf_status cuda_buffer_alloc(lf_ctx *ctx, size_t bytes, uint64_t *addr, const char *what) {
    cuda_state *cs = ctx->state[LF_BACKEND_CUDA];
    char es[512];
    CUresult r = make_current(cs);
    if (r != CUDA_SUCCESS)
        return graph_error(ctx, LF_ERR_BACKEND, "%s: cuda: cuCtxSetCurrent failed: %s", what,
                           cuda_result_str(&cs->drv, r, es, sizeof es));
    bool host_nomem;
    CUdeviceptr p;
    r = cuda_mem_alloc(cs, bytes, true, &p, &host_nomem);
    if (r != CUDA_SUCCESS) return cuda_alloc_error(ctx, cs, r, host_nomem, bytes, what);
    *addr = p;
    return LF_OK;
}

static void cuda_buffer_free(lf_ctx *ctx, uint64_t addr, size_t bytes) {
    cuda_state *cs = ctx->state[LF_BACKEND_CUDA];
    make_current(cs);
    cuda_mem_free(cs, addr, bytes);
}

/* Host -> device (returns when src may be reused) and device -> host (after
 * the stream's earlier work): bytes > 0. */
static lf_status cuda_buffer_write(lf_ctx *ctx, uint64_t dst, const void *src, size_t bytes, const char *what) {
    cuda_state *cs = ctx->state[LF_BACKEND_CUDA];
    char es[512];
    CUresult r = make_current(cs);
    if (r == CUDA_SUCCESS) r = cs->drv.MemcpyHtoDAsync(dst, src, bytes, cs->stream);
    if (r == CUDA_SUCCESS) r = cs->drv.StreamSynchronize(cs->stream);
    if (r != CUDA_SUCCESS)
        return graph_error(ctx, LF_ERR_BACKEND, "%s: cuda: copying %zu bytes to the device failed: %s", what,
                           bytes, cuda_result_str(&cs->drv, r, es, sizeof es));
    return LF_OK;
}

static lf_status cuda_buffer_read(lf_ctx *ctx, void *dst, uint64_t src, size_t bytes, const char *what) {
    cuda_state *cs = ctx->state[LF_BACKEND_CUDA];
    char es[512];
    CUresult r = make_current(cs);
    if (r == CUDA_SUCCESS) r = cs->drv.MemcpyDtoHAsync(dst, src, bytes, cs->stream);
    if (r == CUDA_SUCCESS) r = cs->drv.StreamSynchronize(cs->stream);
    if (r != CUDA_SUCCESS)
        return graph_error(ctx, LF_ERR_BACKEND,
                           "%s: cuda: copying %zu bytes from the device failed: %s (the error may "
                           "come from a kernel of an earlier lf_eval)",
                           what, bytes, cuda_result_str(&cs->drv, r, es, sizeof es));
    return LF_OK;
}

/* ---- the module cache ------------------------------------------------------------------- */

/* The disk-cache key of a kernel: SHA-256 hex + ".cubin" or ".ptx". */
static void disk_key(const cuda_state *cs, const char *text, char key[80]) {
    sha256_ctx c;
    uint8_t d[32];
    char hex[65], target[96];
    snprintf(target, sizeof target, "lazyfuse-cuda-1 NVRTC %d.%d --gpu-architecture=%s_%d", cs->nv.major,
             cs->nv.minor, cs->ptx ? "compute" : "sm", cs->arch);
    sha256_init(&c);
    sha256_update(&c, target, strlen(target) + 1);
    for (int i = 0; cuda_nvrtc_options[i]; i++)
        sha256_update(&c, cuda_nvrtc_options[i], strlen(cuda_nvrtc_options[i]) + 1);
    sha256_update(&c, text, strlen(text));
    sha256_final(&c, d);
    sha256_hex(d, hex);
    snprintf(key, 80, "%s.%s", hex, cs->ptx ? "ptx" : "cubin");
}

lf_status cuda_module_load(lf_ctx *ctx, cuda_state *cs, const char *key_text, const char *src, const char *name,
                           const char *what, CUmodule *mod, lf_eval_stats *st) {
    char key[80], es[512], err[1024];
    disk_key(cs, key_text, key);
    void *image = NULL;
    size_t len = 0;
    bool from_disk = false;
    CUresult r = CUDA_SUCCESS;
    *mod = NULL;
    lf_status status = kcache_disk_get(ctx, cs->cache_dir, key, &image, &len, &from_disk);
    if (status != LF_OK) return status;
    /* PTX must be NUL-terminated for cuModuleLoadData; nvrtcGetPTX's is */
    if (from_disk && cs->ptx && (!len || ((char *)image)[len - 1])) from_disk = false;
    if (from_disk && (r = cs->drv.ModuleLoadData(mod, image)) != CUDA_SUCCESS) {
        *mod = NULL; /* verified but refused (planted, another driver?): remove and rebuild it */
        from_disk = false;
        diskcache_remove(cs->cache_dir, key);
    }
    if (!from_disk) {
        graph_free(image);
        image = NULL;
        char *log = NULL;
        status = cuda_nvrtc_compile(&cs->nv, src, name, cs->arch, cs->ptx, &image, &len, &log, err, sizeof err);
        if (status != LF_OK) {
            status = graph_error(ctx, status, "eval: compiling %s failed: %s%s%s", what, err, log ? "\n" : "",
                                 log ? log : "");
            graph_free(log);
            graph_free(image);
            return status;
        }
        graph_free(log);
        r = cs->drv.ModuleLoadData(mod, image); /* load first, then store: a refused image is not cached */
        if (r != CUDA_SUCCESS) {
            *mod = NULL;
            char hint[256] = "";
            if (cs->driver_version / 1000 < cs->nv.major)
                snprintf(hint, sizeof hint,
                         " (NVRTC %d.%d is newer than the CUDA driver %d.%d: set LF_NVRTC_LIBRARY to "
                         "an NVRTC no newer than the driver, or update the driver)",
                         cs->nv.major, cs->nv.minor, cs->driver_version / 1000, cs->driver_version % 1000 / 10);
            graph_free(image);
            return graph_error(ctx, r == CUDA_ERROR_OUT_OF_MEMORY ? LF_ERR_NOMEM : LF_ERR_BACKEND,
                               "eval: loading %s failed: %s%s", what, cuda_result_str(&cs->drv, r, es, sizeof es),
                               hint);
        }
        kcache_disk_put(cs->cache_dir, key, image, len);
        st->kernels_compiled++;
    } else {
        st->kernels_disk_hits++;
    }
    graph_free(image);
    return LF_OK;
}

/* The CUDA backend's compile (program_parts): each miss's module, in
 * kernel order, from the disk cache or NVRTC (cuda_module_load), added to
 * the memory cache; stops at the first that fails. */
static lf_status compile_part(lf_ctx *ctx, void *state, program_miss *m, int nm, lf_eval_stats *st) {
    cuda_state *cs = state;
    for (int i = 0; i < nm; i++) {
        cuda_module *mod = (cuda_module *)m[i].e;
        char name[48], what[GRAPH_NODE_STR_CAP + 48], ns[GRAPH_NODE_STR_CAP];
        snprintf(name, sizeof name, "lazyfuse_kernel_%d.cu", m[i].k);
        snprintf(what, sizeof what, "CUDA kernel %d (computing %s)", m[i].k, graph_node_str(m[i].root, ns, sizeof ns));
        lf_status status = cuda_module_load(ctx, cs, mod->base.text, m[i].src.s, name, what, &mod->mod, st);
        cg_text_free(&m[i].src);
        if (status != LF_OK) return status;
        kcache_add(&cs->modules, &mod->base);
        m[i].done = true;
    }
    return LF_OK;
}

CUresult cuda_module_function(cuda_state *cs, cuda_module *m, const char *entry, CUfunction *fn) {
    for (int i = 0; i < m->nentries; i++)
        if (m->entry[i] == entry || !strcmp(m->entry[i], entry)) {
            *fn = m->fn[i];
            return CUDA_SUCCESS;
        }
    CUresult r = cs->drv.ModuleGetFunction(fn, m->mod, entry);
    if (r == CUDA_SUCCESS && m->nentries < CUDA_MODULE_ENTRIES) {
        m->entry[m->nentries] = entry;
        m->fn[m->nentries++] = *fn;
    }
    return r;
}

/* ---- programs --------------------------------------------------------------------------- */

typedef struct cuda_kernel {
    cg_layout *lay;                /* loop nest and accesses */
    int64_t *P;                    /* parameters */
    cuda_module *mod;              /* compiled module (owned by the cache) */
    uint64_t *addr;                /* buffer addresses the plan was made for (nbufs) */
    bool planned;                  /* plan, fn and words are valid for addr */
    cg_cuda_plan plan;             /* launches */
    CUfunction fn[CG_CUDA_MAX_LAUNCHES]; /* entry of each launch */
    uint64_t *words;               /* argument words (plan.nwords) */
    int words_cap;                 /* allocated words */
    CUdeviceptr scratch;           /* reductions' scratch (zeroed when made) */
    size_t scratch_bytes;          /* its size (0: none) */
    CUdeviceptr spart;             /* scatter kernels: the partials (lay->part_entries
                                      cg_partial), 0 */
    size_t spart_bytes;            /* their size */
    cuda_sort *sort;               /* sort kernels: the module's launches and the
                                      output pass (sort.c), else NULL */
} cuda_kernel;

typedef struct cuda_program {
    program base;                  /* outputs, plan, statistics (backends/program.h);
                                      base.owner: the cuda_state that owns the
                                      device memory below */
    cuda_state *cs;                /* that state */
    cuda_kernel *k;                /* base.s->nkernels */
    CUdeviceptr *blocks;           /* temporaries' memory blocks */
    uint64_t *slot_addr;           /* per run: device address of each slot */
    CUdeviceptr *fresh;            /* per run: outputs going through a temporary */
    int first_check;               /* first kernel with gather loads (index
                                      checks), nkernels when none */
    CUdeviceptr errflag;           /* their shared int32 index-error flag (zeroed;
                                      each run that raises it zeroes it again), 0 */
} cuda_program;

static void program_free(void *p) {
    cuda_program *pr = p;
    if (!pr) return;
    cuda_state *cs = pr->cs;
    make_current(cs);
    if (pr->k)
        for (int i = 0; i < pr->base.s->nkernels; i++) {
            cuda_kernel *ck = &pr->k[i];
            cuda_mem_free(cs, ck->scratch, ck->scratch_bytes);
            cuda_mem_free(cs, ck->spart, ck->spart_bytes);
            cuda_sort_free(cs, ck->sort);
            graph_free(ck->lay);
            graph_free(ck->P);
            graph_free(ck->addr);
            graph_free(ck->words);
        }
    if (pr->blocks)
        for (int b = 0; b < pr->base.s->nblocks; b++) cuda_mem_free(cs, pr->blocks[b], pr->base.s->block_bytes[b]);
    cuda_mem_free(cs, pr->errflag, sizeof(int32_t));
    graph_free(pr->blocks);
    graph_free(pr->slot_addr);
    graph_free(pr->fresh);
    graph_free(pr->k);
    program_release(&pr->base);
    graph_free(pr);
}

/* The CUDA backend's parts of program_build (backends/program.h). */
static program *create_part(void *state) {
    cuda_program *pr = graph_calloc(1, sizeof *pr);
    if (!pr) return NULL;
    pr->cs = state; /* program_free makes its context current */
    return &pr->base;
}

static kcache *cache_part(void *state) { return &((cuda_state *)state)->modules; }

static const cg_dialect *dialect_part(const void *state) {
    (void)state;
    return cg_dialect_cuda();
}

/* The temporaries' device memory and the per-kernel and per-run arrays. */
static lf_status prepare_part(lf_ctx *ctx, void *state, program *p) {
    cuda_state *cs = state;
    cuda_program *pr = (cuda_program *)p;
    const fuse_schedule *s = p->s;
    pr->k = graph_calloc((size_t)s->nkernels + 1, sizeof *pr->k);
    pr->blocks = graph_calloc((size_t)s->nblocks + 1, sizeof *pr->blocks);
    pr->slot_addr = graph_calloc((size_t)s->nslots + 1, sizeof *pr->slot_addr);
    pr->fresh = graph_calloc((size_t)p->n + 1, sizeof *pr->fresh);
    if (!pr->k || !pr->blocks || !pr->slot_addr || !pr->fresh)
        return graph_error(ctx, LF_ERR_NOMEM, "eval: out of memory building the CUDA program");
    for (int b = 0; b < s->nblocks; b++) {
        if (!s->block_bytes[b]) continue;
        bool host_nomem;
        CUresult r = cuda_mem_alloc(cs, s->block_bytes[b], false, &pr->blocks[b], &host_nomem);
        if (r != CUDA_SUCCESS) return cuda_alloc_error(ctx, cs, r, host_nomem, s->block_bytes[b], "eval");
    }
    return LF_OK;
}

/* Kernel k's parameters, its buffer addresses' array and a scatter's
 * partials on the device. */
static lf_status prepare_kernel_part(lf_ctx *ctx, void *state, program *p, int k, cg_layout *lay) {
    cuda_state *cs = state;
    cuda_kernel *ck = &((cuda_program *)p)->k[k];
    ck->lay = lay;
    ck->P = graph_calloc((size_t)lay->nparams + 1, sizeof *ck->P);
    ck->addr = graph_calloc((size_t)lay->nbufs + 1, sizeof *ck->addr);
    if (!ck->P || !ck->addr) return graph_error(ctx, LF_ERR_NOMEM, "eval: out of memory building the CUDA program");
    cg_fill_params(lay, ck->P);
    if (lay->part_buf >= 0 && lay->part_entries > 0) { /* a scatter's partials */
        bool host_nomem;
        size_t bytes = (size_t)lay->part_entries * sizeof(cg_partial);
        CUresult r = cuda_mem_alloc(cs, bytes, false, &ck->spart, &host_nomem);
        if (r != CUDA_SUCCESS) return cuda_alloc_error(ctx, cs, r, host_nomem, bytes, "eval");
        ck->spart_bytes = bytes;
    }
    return LF_OK;
}

static void bind_part(program *p, int k, kcache_entry *e) { ((cuda_program *)p)->k[k].mod = (cuda_module *)e; }

/* After the kernels' modules: the sort kernels' launches (the sort module,
 * sort.c) and the index-error flag of the kernels with gather loads. */
static lf_status finish_part(lf_ctx *ctx, void *state, program *p, lf_eval_stats *st) {
    cuda_state *cs = state;
    cuda_program *pr = (cuda_program *)p;
    const fuse_schedule *s = p->s;
    lf_status status;
    for (int k = 0; k < s->nkernels; k++)
        if (s->kernels[k].sort &&
            (status = cuda_sort_prepare(ctx, cs, s, pr->k[k].lay, k, &pr->k[k].sort, st)) != LF_OK)
            return status;
    pr->first_check = s->nkernels;
    for (int k = s->nkernels - 1; k >= 0; k--)
        if (pr->k[k].lay->err_buf >= 0) pr->first_check = k;
    if (pr->first_check < s->nkernels) {
        bool host_nomem;
        CUresult r = cuda_mem_alloc(cs, sizeof(int32_t), true, &pr->errflag, &host_nomem);
        if (r != CUDA_SUCCESS) return cuda_alloc_error(ctx, cs, r, host_nomem, sizeof(int32_t), "eval");
    }
    return LF_OK;
}

/* ---- running ---------------------------------------------------------------------------- */

/* Plans kernel k's launches for the addresses in ck->addr: scratch, entry
 * points, the argument size check, the words. Fails before any launch. */
static lf_status kernel_prepare(lf_ctx *ctx, cuda_state *cs, cuda_kernel *ck, int k) {
    char es[512];
    ck->planned = false;
    cg_cuda_plan *plan = &ck->plan;
    cg_cuda_plan_kernel(ck->lay, ck->P, ck->addr, cs->sm_count, plan);
    if (plan->nlaunches < 0 || plan->nlaunches > CG_CUDA_MAX_LAUNCHES || plan->nwords < 0)
        return graph_error(ctx, LF_ERR_BACKEND, "eval: CUDA kernel %d: bad launch plan (%d launches, %d words)",
                           k, plan->nlaunches, plan->nwords);
    if (plan->nlaunches == 0) {
        ck->planned = true;
        return LF_OK;
    }
    size_t arg_bytes = (size_t)plan->nwords * 8;
    int limit = cs->driver_version >= 12010 && cs->cc_major >= 7 ? LARGE_PARAM_BYTES : CLASSIC_PARAM_BYTES;
    if (arg_bytes > (size_t)limit)
        return graph_error(ctx, LF_ERR_BACKEND,
                           "eval: CUDA kernel %d takes %zu bytes of arguments, more than the %d that "
                           "CUDA driver %d.%d allows on sm_%d%d (12.1 or newer allows %d on Volta or "
                           "newer GPUs)",
                           k, arg_bytes, limit, cs->driver_version / 1000, cs->driver_version % 1000 / 10,
                           cs->cc_major, cs->cc_minor, LARGE_PARAM_BYTES);
    if (plan->scratch_bytes > ck->scratch_bytes) {
        cuda_mem_free(cs, ck->scratch, ck->scratch_bytes);
        ck->scratch = 0;
        ck->scratch_bytes = 0;
        bool host_nomem;
        CUresult r = cuda_mem_alloc(cs, plan->scratch_bytes, true, &ck->scratch, &host_nomem);
        if (r != CUDA_SUCCESS) return cuda_alloc_error(ctx, cs, r, host_nomem, plan->scratch_bytes, "eval");
        ck->scratch_bytes = plan->scratch_bytes;
    }
    for (int i = 0; i < plan->nlaunches; i++) {
        const char *entry = plan->launch[i].entry;
        CUresult r = entry ? cuda_module_function(cs, ck->mod, entry, &ck->fn[i]) : CUDA_ERROR_NOT_FOUND;
        if (r != CUDA_SUCCESS)
            return graph_error(ctx, LF_ERR_BACKEND, "eval: CUDA kernel %d lacks entry point %s: %s", k,
                               entry ? entry : "(null)", cuda_result_str(&cs->drv, r, es, sizeof es));
    }
    if (plan->nwords > ck->words_cap) {
        uint64_t *w = graph_realloc(ck->words, (size_t)plan->nwords * sizeof *w);
        if (!w) return graph_error(ctx, LF_ERR_NOMEM, "eval: out of memory");
        ck->words = w;
        ck->words_cap = plan->nwords;
    }
    cg_cuda_fill_args(ck->lay, plan, ck->P, ck->addr, ck->scratch, ck->words);
    if (graph_debug_on("launch"))
        for (int i = 0; i < plan->nlaunches; i++) {
            const cg_cuda_launch *l = &plan->launch[i];
            fprintf(stderr, "lazyfuse cuda: kernel %d launch %d: %s grid (%u,%u,%u) block (%u,%u,%u), %d words, "
                    "scratch %zu B\n", k, i, l->entry, l->grid[0], l->grid[1], l->grid[2], l->block[0],
                    l->block[1], l->block[2], plan->nwords, plan->scratch_bytes);
        }
    ck->planned = true;
    return LF_OK;
}

/* Gives the run's output temporaries and sort memory back to the
 * allocator (after its launches are queued, or before any). */
static void release_fresh(cuda_state *cs, cuda_program *pr) {
    for (int i = 0; i < pr->base.n; i++) {
        if (!pr->fresh[i]) continue;
        cuda_mem_free(cs, pr->fresh[i], pr->base.s->slots[pr->base.s->out_slot[i]].bytes);
        pr->fresh[i] = 0;
    }
    for (int k = 0; k < pr->base.s->nkernels; k++)
        if (pr->k[k].sort) cuda_sort_release(cs, pr->k[k].sort);
}

/* An index check of program p failed on the device, which cannot say
 * where: the message names the position and value, found again on the host
 * (host_index_error_message, which keeps the device's message when it
 * cannot). */
static lf_status device_index_error(const program *p) {
    lf_graph *g = p->s->graph;
    lf_node **outs = graph_calloc((size_t)p->n, sizeof *outs);
    if (!outs) return LF_ERR_INDEX;
    for (int i = 0; i < p->n; i++) outs[i] = g->nodes[p->out_ids[i]];
    lf_status st = host_index_error_message(g, p->n, outs);
    graph_free(outs);
    return st;
}

/* program_parts.run: runs the program (a cuda_program of state cs) writing
 * into dsts; fails only before the first launch, except when the driver
 * refuses a launch or copy. */
static lf_status run_part(lf_ctx *ctx, void *state, void *p, lf_buffer *const *dsts, lf_eval_stats *st) {
    cuda_state *cs = state;
    cuda_program *pr = p;
    const fuse_schedule *s = pr->base.s;
    int n = pr->base.n;
    uint64_t *data = pr->slot_addr;
    char es[512];
    lf_status status = LF_OK;
    for (int j = 0; j < s->nslots; j++) {
        const fuse_slot *sl = &s->slots[j];
        data[j] = sl->kind == FUSE_SLOT_INPUT ? fuse_slot_buffer(sl)->dev
                  : sl->kind == FUSE_SLOT_TEMP ? pr->blocks[sl->block]
                                               : 0;
    }
    /* outputs: in place when nothing reads the buffer and no other output
       names it, or written into an input it reads only at the position
       written (fuse_output_in_place) when no kernel may fail (cpu.c) */
    const lf_buffer **ins = graph_calloc((size_t)s->nslots + 1, sizeof *ins);
    bool *unsafe = graph_calloc(2 * ((size_t)n + 1), sizeof *unsafe), *own_input = unsafe ? unsafe + n + 1 : NULL;
    int nin = 0;
    if (ins && unsafe)
        for (int j = 0; j < s->nslots; j++)
            if (s->slots[j].kind == FUSE_SLOT_INPUT) ins[nin++] = fuse_slot_buffer(&s->slots[j]);
    if (!ins || !unsafe || !graph_dst_aliases(n, dsts, nin, ins, unsafe, own_input)) {
        graph_free(ins);
        graph_free(unsafe);
        status = graph_error(ctx, LF_ERR_NOMEM, "eval: out of memory running the CUDA program");
        goto fail;
    }
    graph_free(ins);
    for (int i = 0; i < n; i++) {
        const fuse_slot *sl = &s->slots[s->out_slot[i]];
        if (sl->kind != FUSE_SLOT_OUTPUT || sl->output != i) continue;
        lf_buffer *d = dsts[i];
        bool in_place = own_input[i] && pr->first_check == s->nkernels && fuse_output_in_place(s, i, d);
        bool safe = (!unsafe[i] || in_place) && sl->def < pr->first_check; /* index checks may fail the eval */
        if (safe) {
            data[s->out_slot[i]] = d->dev;
            st->outputs_in_place += unsafe[i];
        } else if (sl->bytes) {
            bool host_nomem;
            CUresult r = cuda_mem_alloc(cs, sl->bytes, false, &pr->fresh[i], &host_nomem);
            if (r != CUDA_SUCCESS) {
                graph_free(unsafe);
                status = cuda_alloc_error(ctx, cs, r, host_nomem, sl->bytes, "eval");
                goto fail;
            }
            data[s->out_slot[i]] = pr->fresh[i];
        }
    }
    graph_free(unsafe);
    /* sort kernels: their keys, values, positions and the module's scratch
       (sort.c), for this run */
    for (int k = 0; k < s->nkernels; k++)
        if (pr->k[k].sort && (status = cuda_sort_acquire(ctx, cs, pr->k[k].sort)) != LF_OK) goto fail;
    /* plan every kernel whose buffers moved; nothing is launched yet. The
       constants' current values (lf_scalar_set) go into P and the words */
    for (int k = 0; k < s->nkernels; k++) {
        cuda_kernel *ck = &pr->k[k];
        bool same = ck->planned;
        if (ck->lay->kernel->nscalars) {
            cg_fill_scalars(ck->lay, ck->P);
            if (same && ck->plan.nlaunches) cg_cuda_fill_scalar_args(ck->lay, ck->P, ck->words);
        }
        for (int b = 0; b < ck->lay->nbufs; b++) {
            uint64_t a = ck->sort && b == ck->sort->work_buf ? ck->sort->work /* the key pass's K and V */
                         : ck->lay->buf_slot[b] == -2 ? ck->spart
                         : ck->lay->buf_slot[b] < 0 ? pr->errflag
                                                    : data[ck->lay->buf_slot[b]];
            if (ck->addr[b] != a) {
                ck->addr[b] = a;
                same = false;
            }
        }
        if (!same && (status = kernel_prepare(ctx, cs, ck, k)) != LF_OK) goto fail;
        if (ck->sort) cuda_sort_fill(ck->sort, data);
    }
    /* launch */
    bool ran = false;
    for (int k = 0; k < s->nkernels; k++) {
        cuda_kernel *ck = &pr->k[k];
        void *params[1] = {ck->words};
        for (int i = 0; i < ck->plan.nlaunches; i++) {
            const cg_cuda_launch *l = &ck->plan.launch[i];
            CUresult r = cs->drv.LaunchKernel(ck->fn[i], l->grid[0], l->grid[1], l->grid[2], l->block[0],
                                              l->block[1], l->block[2], 0, cs->stream, params, NULL);
            if (r != CUDA_SUCCESS) {
                status = graph_error(ctx, LF_ERR_BACKEND, "eval: launching CUDA kernel %d (%s) failed: %s%s", k,
                                     l->entry, cuda_result_str(&cs->drv, r, es, sizeof es),
                                     ran ? " (earlier kernels of this eval ran: outputs may be partly "
                                           "written)"
                                         : "");
                goto fail;
            }
            ran = true;
        }
        if (ck->sort && (status = cuda_sort_launch(ctx, cs, ck->sort, k, ran)) != LF_OK) goto fail;
        ran |= ck->sort && (ck->sort->plan.nlaunches || ck->sort->has_write);
    }
    /* index checks: wait for the kernels, read the flag; a raised flag fails
       the eval before any output buffer is written (driver.c then finds the
       first bad index with the reference evaluator on host copies) */
    if (pr->errflag) {
        int32_t flag = 0;
        CUresult r = cs->drv.MemcpyDtoHAsync(&flag, pr->errflag, sizeof flag, cs->stream);
        if (r == CUDA_SUCCESS) r = cs->drv.StreamSynchronize(cs->stream);
        if (r == CUDA_SUCCESS && flag) r = cs->drv.MemsetD8Async(pr->errflag, 0, sizeof flag, cs->stream);
        if (r != CUDA_SUCCESS) {
            status = graph_error(ctx, LF_ERR_BACKEND, "eval: cuda: reading the index-error flag failed: %s",
                                 cuda_result_str(&cs->drv, r, es, sizeof es));
            goto fail;
        }
        if (flag) {
            graph_error(ctx, LF_ERR_INDEX, "gather: index out of range (found on the device)");
            status = device_index_error(&pr->base);
            goto fail;
        }
    }
    /* outputs not written in place */
    for (int i = 0; i < n; i++) {
        const fuse_slot *sl = &s->slots[s->out_slot[i]];
        uint64_t src = sl->kind == FUSE_SLOT_OUTPUT ? data[s->out_slot[i]] : fuse_slot_buffer(sl)->dev;
        if (sl->kind == FUSE_SLOT_OUTPUT && sl->output == i && !pr->fresh[i]) continue; /* in place */
        if (!dsts[i]->bytes || src == dsts[i]->dev) continue;
        CUresult r = cs->drv.MemcpyDtoDAsync(dsts[i]->dev, src, dsts[i]->bytes, cs->stream);
        if (r != CUDA_SUCCESS) {
            status = graph_error(ctx, LF_ERR_BACKEND, "eval: cuda: copying output %d failed: %s", i,
                                 cuda_result_str(&cs->drv, r, es, sizeof es));
            goto fail;
        }
        st->bytes_staged += dsts[i]->bytes;
    }
fail:
    release_fresh(cs, pr);
    return status;
}

static const program_parts cuda_parts = {
    .what = "CUDA kernel",
    .entry_size = sizeof(cuda_module),
    .create = create_part,
    .free = program_free,
    .cache = cache_part,
    .dialect = dialect_part,
    .prepare = prepare_part,
    .prepare_kernel = prepare_kernel_part,
    .compile = compile_part,
    .bind = bind_part,
    .finish = finish_part,
    .run = run_part,
};

/* graph_backend.ready: the context's device current on this thread; the
 * pipeline then runs with cuda_parts (kernels are launched asynchronously;
 * lf_buffer_read waits for them). */
static lf_status cuda_ready(lf_ctx *ctx, void **state, bool *on_host) {
    (void)on_host; /* every kernel runs on the device */
    cuda_state *cs = ctx->state[LF_BACKEND_CUDA];
    char es[512];
    CUresult r = make_current(cs);
    if (r != CUDA_SUCCESS)
        return graph_error(ctx, LF_ERR_BACKEND, "eval: cuda: cuCtxSetCurrent failed: %s",
                           cuda_result_str(&cs->drv, r, es, sizeof es));
    *state = cs;
    return LF_OK;
}

/* ---- the backend's table entry (graph/backend.h) ------------------------------------------ */

/* Opens the backend. For AUTO a failure is remembered for the process
 * (later contexts do not try again), unless a test steers the choice
 * through the environment. */
static lf_status backend_open(lf_ctx *ctx, char *why, size_t cap) {
    static int auto_unusable;
    bool steered = getenv("LF_CUDA_LIBRARY") || getenv("LF_NVRTC_LIBRARY") || getenv("LF_CUDA_DEVICE");
    bool automatic = ctx->opt.backend == LF_BACKEND_AUTO;
    if (automatic && !steered && __atomic_load_n(&auto_unusable, __ATOMIC_RELAXED)) {
        snprintf(why, cap, "cuda: unusable (found so earlier in this process)");
        return LF_ERR_BACKEND;
    }
    lf_status st = cuda_open(ctx, why, cap);
    if (st == LF_ERR_BACKEND && automatic && !steered) __atomic_store_n(&auto_unusable, 1, __ATOMIC_RELAXED);
    return st;
}

static void backend_close(lf_ctx *ctx) {
    state_free(ctx->state[LF_BACKEND_CUDA]);
    ctx->state[LF_BACKEND_CUDA] = NULL;
}

static lf_status backend_buffer_alloc(lf_buffer *b, const char *what) {
    return cuda_buffer_alloc(b->ctx, b->storage, &b->dev, what);
}
static void backend_buffer_free(lf_buffer *b) { cuda_buffer_free(b->ctx, b->dev, b->storage); }
static lf_status backend_buffer_write(lf_buffer *b, const void *src, const char *what) {
    return cuda_buffer_write(b->ctx, b->dev, src, b->storage, what);
}
static lf_status backend_buffer_read(const lf_buffer *b, void *dst, const char *what) {
    return cuda_buffer_read(b->ctx, dst, b->dev, b->storage, what);
}

static void backend_dlpack_device(const lf_ctx *ctx, int *type, int *id) {
    const cuda_state *cs = ctx->state[LF_BACKEND_CUDA];
    *type = 2; /* kDLCUDA */
    *id = cs->ordinal;
}

/* Waits for the context's stream (or, whole_device, for every stream of
 * the device's primary context, which CuPy and PyTorch share). */
static lf_status backend_synchronize(lf_ctx *ctx, bool whole_device, const char *what) {
    cuda_state *cs = ctx->state[LF_BACKEND_CUDA];
    char es[512];
    CUresult r = make_current(cs);
    if (r == CUDA_SUCCESS) r = whole_device ? cs->drv.CtxSynchronize() : cs->drv.StreamSynchronize(cs->stream);
    if (r != CUDA_SUCCESS)
        return graph_error(ctx, LF_ERR_BACKEND, "%s: cuda: %s failed (an earlier kernel's fault?): %s", what,
                           whole_device ? "cuCtxSynchronize" : "cuStreamSynchronize",
                           cuda_result_str(&cs->drv, r, es, sizeof es));
    return LF_OK;
}

static intptr_t backend_dlpack_stream(const lf_ctx *ctx) {
    const cuda_state *cs = ctx->state[LF_BACKEND_CUDA];
    return (intptr_t)cs->stream;
}

/* One event recorded on the stream that goes first, waited for by the
 * other; the stream values 1 and 2 of the protocol are the driver's own
 * handles of the legacy and per-thread default streams (CU_STREAM_LEGACY,
 * CU_STREAM_PER_THREAD), so every value is a CUstream as it is. */
static lf_status backend_stream_order(lf_ctx *ctx, intptr_t other, bool other_waits, const char *what) {
    cuda_state *cs = ctx->state[LF_BACKEND_CUDA];
    CUstream theirs = (CUstream)other;
    CUstream first = other_waits ? cs->stream : theirs, then = other_waits ? theirs : cs->stream;
    if (first == then) return LF_OK;
    char es[512];
    CUevent ev = NULL;
    const char *step = "cuCtxSetCurrent";
    CUresult r = make_current(cs);
    if (r == CUDA_SUCCESS) step = "cuEventCreate", r = cs->drv.EventCreate(&ev, CU_EVENT_DISABLE_TIMING);
    if (r == CUDA_SUCCESS) step = "cuEventRecord", r = cs->drv.EventRecord(ev, first);
    if (r == CUDA_SUCCESS) step = "cuStreamWaitEvent", r = cs->drv.StreamWaitEvent(then, ev, 0);
    if (ev) cs->drv.EventDestroy(ev); /* released by the driver once the wait is done */
    if (r != CUDA_SUCCESS)
        return graph_error(ctx, LF_ERR_BACKEND, "%s: cuda: ordering against stream %#lx: %s failed: %s", what,
                           (unsigned long)other, step, cuda_result_str(&cs->drv, r, es, sizeof es));
    return LF_OK;
}

const graph_backend cuda_backend = {
    .id = LF_BACKEND_CUDA,
    .name = "cuda",
    .label = "CUDA",
    .open = backend_open,
    .close = backend_close,
    .buffer_alloc = backend_buffer_alloc,
    .buffer_free = backend_buffer_free,
    .buffer_write = backend_buffer_write,
    .buffer_read = backend_buffer_read,
    .buffer_wrap = NULL, /* a wrapped address is taken as device memory of this context */
    .parts = &cuda_parts, /* compiler_runs stays 0: NVRTC counts none */
    .ready = cuda_ready,
    .dlpack_device = backend_dlpack_device,
    .device_name = cuda_device_description,
    .synchronize = backend_synchronize,
    .dlpack_stream = backend_dlpack_stream,
    .stream_order = backend_stream_order,
};
