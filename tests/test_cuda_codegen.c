/* tests/test_cuda_codegen.c: the CUDA code generator, checked without a GPU.
 *
 * - nvrtc: every kernel codegen prints for the seed examples (the bench
 *   cases), the fusion suite's shapes and LF_TEST_NGRAPHS random graphs of
 *   the differential generator (tests/randgraph.c), fused and unfused,
 *   compiles with NVRTC to a CUBIN for sm_90, all variants at once (no
 *   LF_VARIANT), through the backend's own dlopen path. No warning of the
 *   compiler is allowed either (an unused or narrowed value is a bug hint).
 * - emulated: the CUDA text of fused random graphs is compiled as host C++
 *   against a small shim (threadIdx/blockIdx per OS thread, __shared__ as
 *   one static copy per block run, __syncthreads as a pthread barrier,
 *   atomicAdd as an atomic) and run with the launch plan of
 *   codegen/emit_cuda.c over host memory, block after block; the outputs
 *   must match the reference evaluator as tests/diffcheck.h allows: bool
 *   and integers byte for byte, floats bit for bit unless device math
 *   (lazyfuse.h's exempt functions) or a float sum (device order) is in
 *   the output's cone, then within the cone's bound; an output whose cone
 *   has a float sum that is cancellation noise is skipped, noted and
 *   counted (at most 1 + graphs / 50 of them). Both
 *   index widths and the vec/scalar elementwise entries are exercised.
 *   Sort kernels run as the backend runs them (backends/cuda/sort.c): the
 *   generated key pass, the sort module's plan (codegen/sort_cuda.c, built
 *   once per test on the emulation; 32 threads per block to keep it fast,
 *   the backend's own 256-thread plan on the first sort of the random graphs
 *   and on two of the large cases) and its output pass. Sort outputs must
 *   equal the reference bit for bit (values moved as bits, positions
 *   exact); in the random graphs a sort's input may come from reductions or
 *   math the emulation rounds differently, and a difference is then allowed
 *   only as far as that rounding explains it (sort_check); the large cases
 *   have exact inputs and allow none. This
 *   checks the kernels' logic (indexing, grid-stride loops, block trees,
 *   the last-block ticket, epilogues, row passes); it cannot check what only
 *   a GPU shows (warp scheduling, memory model, device math accuracy): the
 *   same suites run on a device through LF_TEST_BACKEND=cuda
 *   (scripts/gpu-check.sh).
 *
 * Both run only with LF_TEST_NVRTC=1 (meson's `cuda-codegen` entry runs the
 * NVRTC test, `cuda-emulated` the emulated ones, side by side),
 * since they compile hundreds of kernels; elsewhere they skip saying so.
 */
#include "cuda_emu.h"
#include "diffcheck.h"
#include "randgraph.h"
#include "testutil.h"

#include "backends/cuda/cuda.h"
#include "codegen/codegen.h"
#include "fusion/fusion.h"
#include "graph/graph.h"
#include "tools/seed_examples.h"

#include <criterion/criterion.h>
#include <dlfcn.h>
#include <inttypes.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static bool enabled(void) {
    const char *e = getenv("LF_TEST_NVRTC");
    return e && strcmp(e, "1") == 0;
}

static int env_int(const char *name, int dflt) {
    const char *e = getenv(name);
    return e ? atoi(e) : dflt;
}

static lf_ctx *ref_ctx(void) {
    lf_ctx_options o;
    lf_ctx_options_init(&o);
    o.backend = LF_BACKEND_REFERENCE;
    lf_ctx *ctx = lf_ctx_new(&o);
    cr_assert(ctx != NULL, "%s", lf_errmsg(NULL));
    return ctx;
}

/* ---- NVRTC: every kernel compiles --------------------------------------------------- */

typedef struct seen_set {
    uint64_t *h;
    int n, cap;
} seen_set;

static bool seen_add(seen_set *s, uint64_t h) {
    for (int i = 0; i < s->n; i++)
        if (s->h[i] == h) return false;
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 256;
        s->h = realloc(s->h, (size_t)s->cap * sizeof *s->h);
        cr_assert(s->h != NULL);
    }
    s->h[s->n++] = h;
    return true;
}

typedef struct nvrtc_run {
    seen_set seen;
    int compiled;
    const char *what;
} nvrtc_run;

/* Emits every kernel of the graph's plan (fused and unfused) and compiles
 * each new one. */
static void compile_plans(nvrtc_run *run, lf_graph *g, int n, lf_node **outs) {
    for (int fused = 0; fused < 2; fused++) {
        fuse_schedule *s = NULL;
        cr_assert_eq(fuse_plan(g, n, outs, fused, &s), LF_OK, "%s: %s", run->what, lf_errmsg(g->ctx));
        for (int k = 0; k < s->nkernels; k++) {
            cg_layout *lay = cg_layout_new(s, k);
            cr_assert(lay != NULL);
            cg_text t = {0};
            cg_emit_kernel(s, lay, cg_dialect_cuda(), &t);
            cr_assert(!t.nomem);
            char *key = cg_strip_comments(t.s);
            cr_assert(key != NULL);
            bool fresh = seen_add(&run->seen, cg_source_hash(key));
            graph_free(key);
            if (fresh) {
                char *log = NULL, err[512] = "";
                size_t bytes = 0;
                lf_status st = cuda_nvrtc_compile_for_arch(t.s, 90, &log, &bytes, err, sizeof err);
                if (st != LF_OK || (log && *log)) tu_note("---- %s kernel %d source:\n%s\n", run->what, k, t.s);
                cr_assert_eq(st, LF_OK, "%s (%s) kernel %d: %s\n%s", run->what, fused ? "fused" : "unfused", k,
                             err, log ? log : "");
                cr_assert(log == NULL || !*log, "%s kernel %d: NVRTC warns:\n%s", run->what, k, log);
                cr_assert_gt(bytes, 0);
                run->compiled++;
                graph_free(log);
            }
            cg_text_free(&t);
            graph_free(lay);
        }
        fuse_schedule_free(s);
    }
}

Test(cuda_codegen, every_kernel_compiles_with_nvrtc, .timeout = 3000) {
    if (!enabled()) cr_skip_test("LF_TEST_NVRTC=1 runs it (meson test cuda-codegen)");
    char why[256];
    cr_assert(cuda_nvrtc_available(why, sizeof why), "NVRTC is required for this test: %s", why);
    nvrtc_run run = {.what = "?"};
    lf_ctx *ctx = ref_ctx();
    /* the bench cases, at sizes that pick each strategy's usual shapes */
    for (int i = 0; i < seed_nexamples; i++) {
        const seed_example *ex = &seed_examples[i];
        lf_graph *g = lf_graph_new(ctx);
        lf_node *outs[SEED_MAX_OUTS];
        int64_t n = strcmp(ex->name, "matmul_zip_reduce") == 0 ? 48 : strcmp(ex->name, "softmax_rows") == 0 ? 96
                    : strcmp(ex->name, "conv3x3") == 0                                           ? 71
                                                                                                 : 5000;
        int nout = ex->build(ctx, g, n, outs);
        cr_assert_gt(nout, 0, "%s: %s", ex->name, lf_errmsg(ctx));
        run.what = ex->name;
        compile_plans(&run, g, nout, outs);
        lf_graph_free(g);
    }
    int bench_kernels = run.compiled;
    /* the differential generator's graphs */
    uint64_t seed = tu_seed();
    int ngraphs = env_int("LF_TEST_NGRAPHS", 150);
    char what[96];
    for (int gi = 0; gi < ngraphs; gi++) {
        gen G;
        lf_node *outs[3];
        int nout = gen_graph(&G, ctx, seed, gi, outs);
        snprintf(what, sizeof what, "graph %d (LF_TEST_SEED=%" PRIu64 ")", gi, seed);
        run.what = what;
        compile_plans(&run, G.g, nout, outs);
        lf_graph_free(G.g);
    }
    tu_note("cuda_codegen: NVRTC compiled %d distinct kernels for sm_90 (%d from the bench cases, %d from %d random graphs)\n",
            run.compiled, bench_kernels, run.compiled - bench_kernels, ngraphs);
    free(run.seen.h);
    lf_ctx_destroy(ctx);
}

/* ---- emulated: the kernels' logic on the host ------------------------------------------ */

/* The sort module on the emulator, built on first use, and how its plans
 * are made: threads per block 0 (the backend's own plan, cg_cuda_plan_sort)
 * or 32..256 (cg_cuda_plan_sort_with, the path the shape picks at that
 * block size); real_once: the next sort kernel uses the backend's plan,
 * then the flag clears. */
typedef struct emu_sorts {
    void *h;
    emu_launch_fn launch;
    int threads;
    bool real_once;
    bool strict;                   /* sort outputs must equal the reference's bits */
    int kernels, launches, real, paths[4];
    int exact, explained;          /* sort outputs equal to the reference, or within rounding of their input */
    int noise_skips;               /* outputs not compared: a float sum of their cone is cancellation noise */
    double seconds;                /* in the module's build and launches and the output passes */
} emu_sorts;

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Sort kernel k of s (layout lay, parameters P, buffer addresses addr with
 * the key pass's work area at addr[store 0's buffer]) after its key pass:
 * the module's launches, then the output pass into the slots in data. */
static void emu_sort_kernel(emu_sorts *es, const fuse_schedule *s, const cg_layout *lay, void **data, void *work,
                            const char *dir, int *id) {
    const fuse_kernel *kn = lay->kernel;
    double t0 = now_seconds();
    if (!es->h) {
        es->h = emu_build(cg_cuda_sort_source(), dir, (*id)++);
        es->launch = (emu_launch_fn)(uintptr_t)dlsym(es->h, "lf_emu_launch");
        cr_assert(es->launch != NULL);
    }
    graph_sort_geom gm;
    graph_sort_geom_of(kn->sort, &gm);
    lf_dtype t = kn->sort->inputs[0]->dtype;
    bool wide = graph_sort_key_wide(t);
    cg_cuda_sort_plan plan;
    bool real = es->threads == 0 || es->real_once;
    if (real) cg_cuda_plan_sort(gm.nrows, gm.n, gm.k, wide, false, true, &plan);
    else cr_assert(cg_cuda_plan_sort_with(gm.nrows, gm.n, gm.k, wide, false, true, CG_SORT_AUTO, es->threads, &plan));
    es->real += real;
    es->real_once = false;
    es->kernels++;
    es->paths[plan.path]++;
    size_t outs = (size_t)(gm.nrows * gm.k);
    int64_t *pos = malloc(outs * 8 + 16);
    void *scratch = plan.scratch_bytes ? malloc(plan.scratch_bytes) : NULL;
    uint64_t *words = malloc(((size_t)plan.nlaunches + 2) * CG_CUDA_SORT_WORDS * sizeof *words);
    cr_assert(pos && words && (scratch || !plan.scratch_bytes));
    memset(pos, 0x5a, outs * 8 + 16);
    if (scratch) memset(scratch, 0xa5, plan.scratch_bytes); /* needs no initialisation */
    uint64_t K = (uint64_t)(uintptr_t)work;
    cg_cuda_sort_fill_args(&plan, K, 0, (uint64_t)(uintptr_t)pos, (uint64_t)(uintptr_t)scratch, words);
    for (int l = 0; l < plan.nlaunches; l++) {
        const cg_cuda_sort_launch *la = &plan.launch[l];
        void *fn = dlsym(es->h, la->entry);
        cr_assert(fn != NULL, "sort entry %s missing", la->entry);
        unsigned grid = la->grid[0] > 3 ? 3 : la->grid[0]; /* every sort launch is grid-stride */
        cr_assert_eq(es->launch(fn, grid, la->block[0], 1, words + (size_t)l * plan.nwords), 0);
        es->launches++;
    }
    uint64_t vout = 0, iout = 0;
    for (int j = 0; j < kn->nstores; j++) {
        const fuse_slot *sl = &s->slots[kn->stores[j].slot];
        if (sl->node == kn->sort_values) vout = (uint64_t)(uintptr_t)data[kn->stores[j].slot];
        if (sl->node == kn->sort_indices) iout = (uint64_t)(uintptr_t)data[kn->stores[j].slot];
    }
    cr_assert(vout || !kn->sort_values);
    cr_assert(iout || !kn->sort_indices);
    cg_cuda_sort_launch wl;
    if (cg_cuda_plan_sort_write(gm.nrows, gm.k, real ? 0 : es->threads, &wl)) {
        size_t vs = lf_dtype_size(t);
        uint64_t V = K + cg_cuda_sort_values_offset(gm.nrows * gm.n, wide);
        cg_cuda_sort_write_args(gm.nrows, gm.n, gm.k, gm.inner, vs, V, (uint64_t)(uintptr_t)pos, vout, iout, words);
        void *fn = dlsym(es->h, wl.entry);
        cr_assert(fn != NULL, "sort entry %s missing", wl.entry);
        cr_assert_eq(es->launch(fn, wl.grid[0] > 3 ? 3 : wl.grid[0], wl.block[0], 1, words), 0);
        es->launches++;
    } else {
        cr_assert_eq(outs, 0u);
    }
    free(pos);
    free(scratch);
    free(words);
    es->seconds += now_seconds() - t0;
}

/* Runs schedule s on the emulator; results[i] receives output i
 * (malloc'd, the output's bytes). force64: launch the 64-bit entries. */
/* When set, emu_run_schedule ORs each kernel's index-error flag into it
 * instead of asserting that the flag stays 0 (tests of bad indices). */
static int32_t *emu_index_flag;

static void emu_run_schedule(const fuse_schedule *s, int n, void **results, const char *dir, int *id,
                             bool force64, int *launches, int *vec_launches, emu_sorts *es) {
    void **data = calloc((size_t)s->nslots + 1, sizeof *data);
    void **owned = calloc((size_t)s->nslots + 1, sizeof *owned);
    cr_assert(data && owned);
    for (int j = 0; j < s->nslots; j++) {
        const fuse_slot *sl = &s->slots[j];
        if (sl->kind == FUSE_SLOT_INPUT) {
            data[j] = fuse_slot_buffer(sl)->data;
        } else {
            /* poisoned, so a kernel that skips an element is caught */
            owned[j] = malloc(sl->bytes + 16);
            cr_assert(owned[j] != NULL);
            memset(owned[j], 0x7f, sl->bytes + 16);
            data[j] = owned[j];
        }
    }
    for (int k = 0; k < s->nkernels; k++) {
        cg_layout *lay = cg_layout_new(s, k);
        cr_assert(lay != NULL);
        const fuse_kernel *kn = lay->kernel;
        cg_text t = {0};
        cg_emit_kernel(s, lay, cg_dialect_cuda(), &t);
        cr_assert(!t.nomem);
        void *h = emu_build(t.s, dir, (*id)++);
        cg_text_free(&t);
        emu_launch_fn launch = (emu_launch_fn)(uintptr_t)dlsym(h, "lf_emu_launch");
        cr_assert(launch != NULL);
        int64_t *P = calloc((size_t)lay->nparams + 1, sizeof *P);
        uint64_t addr[CG_MAX_BUFS];
        cr_assert(P != NULL);
        cg_fill_params(lay, P);
        int32_t index_err = 0; /* gather loads' index-error flag (in-range indices: stays 0) */
        cg_partial *spart = lay->part_buf >= 0 ? calloc((size_t)lay->part_entries + 1, sizeof *spart) : NULL;
        for (int b = 0; b < lay->nbufs; b++)
            addr[b] = lay->buf_slot[b] == -2 ? (uint64_t)(uintptr_t)spart
                      : lay->buf_slot[b] < 0 ? (uint64_t)(uintptr_t)&index_err
                                            : (uint64_t)(uintptr_t)data[lay->buf_slot[b]];
        void *work = NULL; /* a sort kernel's keys and values (the key pass writes them) */
        if (kn->kind == FUSE_KERNEL_SORT) {
            lf_dtype st = kn->sort->inputs[0]->dtype;
            size_t wb = cg_cuda_sort_work_bytes(kn->numel, graph_sort_key_wide(st),
                                                kn->sort_values ? lf_dtype_size(st) : 0);
            work = malloc(wb + 16);
            cr_assert(work != NULL);
            memset(work, 0x7f, wb + 16);
            for (int i = 0; i < lay->naccess; i++)
                if (lay->access[i].fn < 0 && lay->access[i].index == 0) addr[lay->access[i].buf] = (uint64_t)(uintptr_t)work;
        }
        cg_cuda_plan plan;
        cg_cuda_plan_kernel(lay, P, addr, 1, &plan);
        void *scratch = plan.scratch_bytes ? calloc(1, plan.scratch_bytes) : NULL;
        cr_assert(!plan.scratch_bytes || scratch);
        uint64_t *words = calloc((size_t)plan.nwords, sizeof *words);
        cr_assert(words != NULL);
        cg_cuda_fill_args(lay, &plan, P, addr, (uint64_t)(uintptr_t)scratch, words);
        for (int l = 0; l < plan.nlaunches; l++) {
            char entry[64];
            snprintf(entry, sizeof entry, "%s", plan.launch[l].entry);
            size_t len = strlen(entry);
            if (force64 && len > 2 && strcmp(entry + len - 2, "32") == 0) memcpy(entry + len - 2, "64", 2);
            void *fn = dlsym(h, entry);
            cr_assert(fn != NULL, "entry %s missing from the module", entry);
            /* grid-stride launches work with any grid: keep it small (each
             * block is 256 OS threads here); a FULL pass needs its blocks */
            unsigned grid = plan.launch[l].grid[0];
            if (strncmp(entry, "lf_k_pass", 9) != 0 && grid > 3) grid = 3;
            cr_assert_eq(launch(fn, grid, plan.launch[l].block[0], plan.launch[l].block[1], words), 0);
            (*launches)++;
            if (strncmp(entry, "lf_k_vec", 8) == 0) (*vec_launches)++;
        }
        if (scratch && plan.scratch_bytes > plan.scratch_part) {
            /* every ticket is left zero for the next eval */
            const unsigned *ticket = (const unsigned *)((char *)scratch + plan.scratch_ticket);
            for (int q = 0; q < lay->kernel->npasses; q++) cr_assert_eq(ticket[q], 0u);
        }
        if (kn->kind == FUSE_KERNEL_SORT) {
            cr_assert(kn->sort->u.sort.k == 0 || kn->numel == 0 || plan.nlaunches == 1, "a sort's key pass is one launch");
            emu_sort_kernel(es, s, lay, data, work, dir, id);
        }
        if (emu_index_flag) *emu_index_flag |= index_err;
        else cr_assert_eq(index_err, 0, "kernel %d raised the index-error flag with in-range indices", k);
        free(work);
        free(spart);
        free(words);
        free(scratch);
        free(P);
        graph_free(lay);
        dlclose(h);
    }
    for (int i = 0; i < n; i++) {
        const fuse_slot *sl = &s->slots[s->out_slot[i]];
        results[i] = malloc(sl->bytes + 1);
        cr_assert(results[i] != NULL);
        memcpy(results[i], data[s->out_slot[i]], sl->bytes);
    }
    for (int j = 0; j < s->nslots; j++) free(owned[j]);
    free(owned);
    free(data);
}

/* Sort output n (its emulated bytes got, the reference's in want): bit for
 * bit equal, or, unless es->strict, different only as the rounding of n's
 * input allows: the input x (evaluated by the reference) may come from
 * reductions or math the emulation rounds differently (the other outputs'
 * tolerance), which can reorder near-ties; then each value must be within
 * that tolerance and each position must hold, in the reference's x, a value
 * within it of the reference's choice. Counts exact and explained outputs. */
static void sort_check(lf_ctx *ctx, lf_graph *g, const fuse_schedule *s, lf_node *n, const void *got,
                       lf_buffer *want, const char *what, bool force64, emu_sorts *es) {
    int64_t m = lf_buffer_numel(want);
    size_t bytes = lf_buffer_bytes(want), esz = lf_dtype_size(n->dtype);
    unsigned char *wb = malloc(bytes + 1);
    cr_assert(wb != NULL);
    cr_assert_eq(lf_buffer_read(want, wb, bytes), LF_OK);
    if (memcmp(got, wb, bytes) == 0) {
        es->exact++;
        free(wb);
        return;
    }
    int64_t bad = 0;
    while (bad < m && !memcmp((const unsigned char *)got + (size_t)bad * esz, wb + (size_t)bad * esz, esz)) bad++;
    if (es->strict) {
        char xg[64], xw[64];
        dc_format(xg, sizeof xg, n->dtype, got, bad);
        dc_format(xw, sizeof xw, n->dtype, wb, bad);
        fuse_schedule_print(s, stderr);
        cr_assert_fail("%s, %s entries: sort output n%d (%s, %lld elements) element %lld is %s, reference %s "
                       "(bits differ)",
                       what, force64 ? "64-bit" : "32-bit", n->id, lf_dtype_name(n->dtype), (long long)m, (long long)bad,
                       xg, xw);
    }
    if (n->u.sort.indices) {
        lf_node *x = n->inputs[0];
        dc_cone c; /* how far x may be from the reference's (tests/diffcheck.h) */
        dc_cone_init(&c, x, true);
        dc_cond cond = {0, false, -1};
        if (!dc_cone_exact(&c)) dc_conditioning(ctx, g, &c, &cond);
        double rel = dc_rel_bound(&c, cond.rho);
        lf_buffer *xb = lf_buffer_new_like(ctx, x);
        cr_assert_eq(lf_eval(g, 1, &x, &xb), LF_OK, "%s", lf_errmsg(ctx));
        void *xv = tu_read_raw(xb);
        size_t xsz = lf_dtype_size(x->dtype);
        graph_sort_geom gm;
        graph_sort_geom_of(n, &gm);
        for (int64_t e = 0; e < m; e++) {
            int64_t o = e / (gm.k * gm.inner), i = e % gm.inner;
            int64_t pg = ((const int64_t *)got)[e], pw = ((const int64_t *)wb)[e];
            cr_assert(pg >= 0 && pg < gm.n, "%s: sort output n%d element %lld: position %lld out of range", what, n->id,
                      (long long)e, (long long)pg);
            const unsigned char *a = (const unsigned char *)xv + (size_t)(o * gm.n * gm.inner + pg * gm.inner + i) * xsz;
            const unsigned char *b = (const unsigned char *)xv + (size_t)(o * gm.n * gm.inner + pw * gm.inner + i) * xsz;
            if (!cond.noise && !dc_element_ok(&c, x->dtype, a, b, 0, rel)) {
                char xa[64], xw[64];
                dc_format(xa, sizeof xa, x->dtype, a, 0);
                dc_format(xw, sizeof xw, x->dtype, b, 0);
                fuse_schedule_print(s, stderr);
                cr_assert_fail("%s, %s entries: argsort/top-k n%d element %lld is position %lld (x = %s), reference "
                               "%lld (x = %s)",
                               what, force64 ? "64-bit" : "32-bit", n->id, (long long)e, (long long)pg, xa, (long long)pw,
                               xw);
            }
        }
        dc_cone_free(&c);
        free(xv);
        lf_buffer_free(xb);
    } /* values: the tolerance check of every output follows */
    es->explained++;
    free(wb);
}

/* Runs graph g's fused plan on the emulator and compares every output
 * with the reference evaluator; what names the graph in failures. */
static void emu_check(lf_ctx *ctx, lf_graph *g, int nout, lf_node **outs, const char *what, const char *dir,
                      int *id, bool force64, int *kernels, int *launches, int *vec_launches, emu_sorts *es) {
    fuse_schedule *s = NULL;
    cr_assert_eq(fuse_plan(g, nout, outs, true, &s), LF_OK, "%s: %s", what, lf_errmsg(ctx));
    *kernels += s->nkernels;
    void *got[3];
    emu_run_schedule(s, nout, got, dir, id, force64, launches, vec_launches, es);
    for (int i = 0; i < nout; i++) {
        lf_buffer *want = lf_buffer_new_like(ctx, outs[i]);
        cr_assert_eq(lf_eval(g, 1, &outs[i], &want), LF_OK, "%s", lf_errmsg(ctx));
        int64_t m = lf_buffer_numel(want);
        if (outs[i]->kind == NODE_SORT) sort_check(ctx, g, s, outs[i], got[i], want, what, force64, es);
        void *w = tu_read_raw(want);
        dc_cone c; /* tests/diffcheck.h: what the emulation may differ by */
        dc_cone_init(&c, outs[i], true);
        int64_t bad = dc_first_bad(&c, outs[i]->dtype, got[i], w, m, dc_rel_bound(&c, 0));
        dc_cond cond = {0, false, -1};
        if (bad >= 0 && !dc_cone_exact(&c)) { /* the bound of the cone's float sums, on the reference */
            dc_conditioning(ctx, g, &c, &cond);
            if (!cond.noise) bad = dc_first_bad(&c, outs[i]->dtype, got[i], w, m, dc_rel_bound(&c, cond.rho));
        }
        if (bad >= 0 && cond.noise) {
            es->noise_skips++;
            tu_note("%s, %s entries: output %d not compared: its float sum n%d is cancellation noise on the "
                    "reference\n", what, force64 ? "64-bit" : "32-bit", i, cond.node);
        } else if (bad >= 0) {
            char x[64], y[64];
            dc_format(x, sizeof x, outs[i]->dtype, got[i], bad);
            dc_format(y, sizeof y, outs[i]->dtype, w, bad);
            fuse_schedule_print(s, stderr);
            cr_assert_fail("%s, %s entries: output %d (%s, %lld elements) element %lld is %s, reference %s "
                           "(allowed: %s)",
                           what, force64 ? "64-bit" : "32-bit", i, lf_dtype_name(outs[i]->dtype), (long long)m,
                           (long long)bad, x, y,
                           dc_cone_exact(&c) ? "the same bits, any NaN for a NaN"
                           : c.exempt        ? "the cone's bound: device math in it"
                                             : "the cone's bound: float sums in it");
        }
        dc_cone_free(&c);
        free(w);
        free(got[i]);
        lf_buffer_free(want);
    }
    fuse_schedule_free(s);
}

static lf_buffer *random_buffer(lf_ctx *ctx, int ndim, const int64_t *shape) {
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= shape[d];
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    cr_assert(v != NULL);
    for (int64_t i = 0; i < n; i++) v[i] = tu_uniform(-2.0, 2.0);
    lf_buffer *b = tu_buf(ctx, LF_F32, ndim, shape, v);
    free(v);
    return b;
}

/* Sizes where every thread of a block and several blocks have work: long
 * rows (block-wide trees), full reductions over several CG blocks (the
 * partials and the last-block ticket), column reductions, the bench cases
 * at odd and aligned sizes. Random graphs are too small for that. */
Test(cuda_codegen, emulated_large_kernels_match_the_reference, .timeout = 3000) {
    if (!enabled()) cr_skip_test("LF_TEST_NVRTC=1 runs it (meson test cuda-codegen)");
    char dir[] = "/tmp/lf-emu-XXXXXX";
    cr_assert(mkdtemp(dir) != NULL);
    lf_ctx *ctx = ref_ctx();
    int id = 0, launches = 0, vec_launches = 0, kernels = 0;
    emu_sorts es = {.threads = 32, .strict = true}; /* the sorts below have exact inputs */
    char what[128];
    for (int i = 0; i < seed_nexamples; i++) {
        const seed_example *ex = &seed_examples[i];
        bool mm = strcmp(ex->name, "matmul_zip_reduce") == 0, sm = strcmp(ex->name, "softmax_rows") == 0;
        bool sq = strcmp(ex->name, "conv3x3") == 0; /* n is the image's side */
        const int64_t sizes[2] = {mm ? 37 : sq ? 263 : 70001, mm ? 48 : sq ? 256 : 65536};
        for (int k = 0; k < 2; k++) {
            if (sm) continue; /* its 4096 rows are too many for the emulator: below */
            if (strcmp(ex->name, "cumsum_rows") == 0) continue; /* likewise: scans below */
            lf_graph *g = lf_graph_new(ctx);
            lf_node *outs[SEED_MAX_OUTS];
            int nout = ex->build(ctx, g, sizes[k], outs);
            cr_assert_gt(nout, 0, "%s: %s", ex->name, lf_errmsg(ctx));
            snprintf(what, sizeof what, "%s n=%lld", ex->name, (long long)sizes[k]);
            emu_check(ctx, g, nout, outs, what, dir, &id, k == 1, &kernels, &launches, &vec_launches, &es);
            lf_graph_free(g);
        }
    }
    /* softmax rows of every group size (32, 64, 128, 256 threads) */
    const int64_t rows[][2] = {{33, 300}, {9, 1500}, {6, 7000}, {3, 20001}};
    for (int ri = 0; ri < 4; ri++) {
        lf_graph *g = lf_graph_new(ctx);
        lf_buffer *xb = random_buffer(ctx, 2, rows[ri]);
        lf_node *x = lf_input(g, xb);
        lf_buffer_free(xb);
        const int ax = 1;
        lf_node *m = lf_reduce(g, LF_RED_MAX, x, 1, &ax, true);
        lf_node *e = lf_map(g, lf_fn_parse(g, "(x) -> exp(x)"), lf_sub(g, x, m));
        lf_node *out = lf_div(g, e, lf_reduce(g, LF_RED_SUM, e, 1, &ax, true));
        cr_assert(out != NULL, "%s", lf_errmsg(ctx));
        snprintf(what, sizeof what, "softmax rows [%lld, %lld]", (long long)rows[ri][0], (long long)rows[ri][1]);
        emu_check(ctx, g, 1, &out, what, dir, &id, ri % 2 == 1, &kernels, &launches, &vec_launches, &es);
        lf_graph_free(g);
    }
    /* reductions of every kind over sizes that fill blocks */
    const int64_t shapes[][3] = {{3, 40000, 1}, {2000, 7, 1}, {5, 3000, 3}, {1, 1, 70001}, {8, 10, 500}};
    for (int si = 0; si < 5; si++) {
        lf_graph *g = lf_graph_new(ctx);
        lf_buffer *xb = random_buffer(ctx, 3, shapes[si]);
        lf_node *x = lf_input(g, xb);
        lf_buffer_free(xb); /* the graph keeps its reference */
        lf_node *y = lf_map(g, lf_fn_parse(g, "(x) -> x * x - 0.25"), x);
        const int ax_last = 2, ax_mid = 1, ax_first = 0, ax_02[2] = {0, 2};
        lf_node *outs[3][3] = {
            {lf_reduce(g, LF_RED_SUM, y, 1, &ax_mid, false), lf_reduce(g, LF_RED_ARGMIN, x, 1, &ax_mid, false),
             lf_reduce(g, LF_RED_MEAN, y, 0, NULL, false)},
            {lf_reduce(g, LF_RED_MAX, x, 1, &ax_first, true), lf_reduce(g, LF_RED_ARGMAX, y, 0, NULL, false),
             lf_reduce(g, LF_RED_SUM, lf_permute(g, y, (int[]){2, 0, 1}), 2, ax_02, false)},
            {lf_reduce(g, LF_RED_PROD, lf_map(g, lf_fn_parse(g, "(x) -> 1 + x * 1e-4"), x), 1, &ax_last, false),
             lf_reduce(g, LF_RED_MIN, y, 2, ax_02, false), lf_reduce(g, LF_RED_SUM, y, 1, &ax_last, true)},
        };
        for (int k = 0; k < 3; k++) {
            /* the third set reduces the last axis: one row per element of the
             * first two, each a costly block-tree round in the emulator */
            if (k == 2 && shapes[si][0] * shapes[si][1] > 2000) continue;
            snprintf(what, sizeof what, "reductions %d of [%lld, %lld, %lld]", k, (long long)shapes[si][0],
                     (long long)shapes[si][1], (long long)shapes[si][2]);
            for (int j = 0; j < 3; j++) cr_assert(outs[k][j] != NULL, "%s: %s", what, lf_errmsg(ctx));
            emu_check(ctx, g, 3, outs[k], what, dir, &id, (si + k) % 2 == 1, &kernels, &launches, &vec_launches, &es);
        }
        lf_graph_free(g);
    }
    /* scans over several LF_SCAN_BLOCK blocks: rows (the scanned axis
     * innermost) and a strided axis, with a producer and an epilogue */
    const int64_t sshapes[][2] = {{5, 9001}, {9001, 3}};
    for (int si = 0; si < 2; si++) {
        lf_graph *g = lf_graph_new(ctx);
        lf_buffer *xb = random_buffer(ctx, 2, sshapes[si]);
        lf_node *x = lf_input(g, xb);
        lf_buffer_free(xb);
        lf_node *outs[3] = {
            lf_div(g, lf_scan(g, LF_RED_SUM, lf_mul(g, x, x), 1 - si, false), lf_const(g, LF_F32, 3)),
            lf_scan(g, LF_RED_PROD, lf_map(g, lf_fn_parse(g, "(x) -> 1 + x * 1e-4"), x), -1, true),
            lf_scan(g, LF_RED_MAX, x, 0, si == 0)};
        for (int j = 0; j < 3; j++) cr_assert(outs[j] != NULL, "%s", lf_errmsg(ctx));
        snprintf(what, sizeof what, "scans of [%lld, %lld]", (long long)sshapes[si][0], (long long)sshapes[si][1]);
        emu_check(ctx, g, 3, outs, what, dir, &id, si == 1, &kernels, &launches, &vec_launches, &es);
        lf_graph_free(g);
    }
    /* sorts on every path of the module, end to end (key pass, the module's
     * plan, output pass): f32 rows with signed zeros and NaNs of several
     * payloads (values compared as bits), long rows (RADIX at 32 threads),
     * a top-k of a map (SELECT), a batched argsort along axis 0 (inner 3)
     * and 64-bit keys; the BLOCK and SELECT ones with the backend's own plan
     * (256 threads) */
    {
        const int64_t shp[2] = {3, 1500};
        int64_t nel = shp[0] * shp[1];
        float *v = malloc((size_t)nel * sizeof *v);
        cr_assert(v != NULL);
        const uint32_t nans[3] = {0x7fc00000u, 0xffc00001u, 0x7f800abcu};
        for (int64_t i = 0; i < nel; i++) {
            int c = (int)(tu_rand() % 10);
            if (c == 0) v[i] = 0.0f;
            else if (c == 1) v[i] = -0.0f;
            else if (c == 2) memcpy(&v[i], &nans[tu_rand() % 3], 4);
            else v[i] = (float)tu_randint(-20, 20) * 0.5f;
        }
        lf_buffer *xb = lf_buffer_new(ctx, LF_F32, 2, shp);
        cr_assert(xb != NULL);
        cr_assert_eq(lf_buffer_write(xb, v, (size_t)nel * sizeof *v), LF_OK);
        free(v);
        for (int c = 0; c < 5; c++) {
            lf_graph *g = lf_graph_new(ctx);
            lf_node *x = lf_input(g, xb), *outs[3] = {NULL, NULL, NULL};
            int nout = 2;
            es.real_once = c == 1 || c == 2;
            if (c == 0) { /* RADIX at 32 threads, 32-bit keys; sort and argsort share one kernel */
                outs[0] = lf_sort(g, x, 1, false);
                outs[1] = lf_argsort(g, x, 1, false);
            } else if (c == 1) { /* SELECT, the backend's plan (a row of 4500 > 4096): top-10 of a map, descending */
                lf_node *row = lf_reshape(g, x, 2, (int64_t[]){1, 4500});
                lf_node *key = lf_map(g, lf_fn_parse(g, "(x) -> x * x - 3"), row);
                outs[0] = lf_topk(g, key, 10, 1, true), outs[1] = lf_argtopk(g, key, 10, 1, true);
            } else if (c == 4) { /* SELECT at 32 threads: ascending top-7 of a map (three rows) */
                lf_node *key = lf_map(g, lf_fn_parse(g, "(x) -> 2 - x"), x);
                outs[0] = lf_topk(g, key, 7, 1, false), outs[1] = lf_argtopk(g, key, 7, 1, false);
            } else if (c == 2) { /* BLOCK, the backend's plan: along axis 0 of a [500, 3] view (inner 3) */
                lf_node *y = lf_reshape(g, x, 2, (int64_t[]){1500, 3});
                outs[0] = lf_sort(g, lf_slice(g, y, 0, 0, 500, 1), 0, true);
                outs[1] = lf_argsort(g, lf_slice(g, y, 0, 0, 500, 1), 0, true);
            } else if (c == 3) { /* 64-bit keys, RADIX at 32 threads: a top-200 of f64 and i64 */
                lf_node *d = lf_cast(g, x, LF_F64);
                outs[0] = lf_topk(g, d, 200, 1, false), outs[1] = lf_argtopk(g, d, 200, 1, false);
                outs[2] = lf_topk(g, lf_cast(g, lf_map(g, lf_fn_parse(g, "(x) -> x * 1000"), lf_cast(g, x, LF_F64)), LF_I64),
                                  300, 1, true);
                nout = 3;
            }
            for (int j = 0; j < nout; j++) cr_assert(outs[j] != NULL, "sorts %d: %s", c, lf_errmsg(ctx));
            snprintf(what, sizeof what, "sorts %d of [3, 1500]", c);
            emu_check(ctx, g, nout, outs, what, dir, &id, c == 3, &kernels, &launches, &vec_launches, &es);
            lf_graph_free(g);
        }
        lf_buffer_free(xb);
        cr_assert_geq(es.real, 2, "the backend's own sort plan ran");
        cr_assert(es.paths[CG_SORT_BLOCK] && es.paths[CG_SORT_SELECT] && es.paths[CG_SORT_RADIX],
                  "sort paths: block %d, select %d, radix %d", es.paths[CG_SORT_BLOCK], es.paths[CG_SORT_SELECT],
                  es.paths[CG_SORT_RADIX]);
    }
    tu_note("cuda_codegen: emulated large graphs: %d kernels, %d launches (%d vec); sorts: %d kernels "
            "(%d with the backend's plan; block %d, select %d, radix %d), %d module launches in %.1f s; %d outputs "
            "not compared (cancellation noise)\n", kernels,
            launches, vec_launches, es.kernels, es.real, es.paths[CG_SORT_BLOCK], es.paths[CG_SORT_SELECT],
            es.paths[CG_SORT_RADIX], es.launches, es.seconds, es.noise_skips);
    cr_expect_eq(es.noise_skips, 0, "the large cases' inputs are random in [-2, 2): no sum of them cancels");
    if (es.h) dlclose(es.h);
    rmdir(dir);
    lf_ctx_destroy(ctx);
}

Test(cuda_codegen, emulated_kernels_match_the_reference, .timeout = 3000) {
    if (!enabled()) cr_skip_test("LF_TEST_NVRTC=1 runs it (meson test cuda-codegen)");
    char dir[] = "/tmp/lf-emu-XXXXXX";
    cr_assert(mkdtemp(dir) != NULL);
    lf_ctx *ctx = ref_ctx();
    uint64_t seed = tu_seed();
    const char *only = getenv("LF_TEST_GRAPH");
    int first = only ? atoi(only) : 0, last = only ? first + 1 : env_int("LF_TEST_EMU_NGRAPHS", 40);
    int id = 0, launches = 0, vec_launches = 0, kernels = 0;
    /* sorts: 32 threads per block (paths as the shape picks them at that
       size), the first with the backend's own plan */
    emu_sorts es = {.threads = 32, .real_once = true};
    /* A run of 40 graphs checks 2 or 3 sort outputs bit for bit, so now and
       then none (LF_TEST_SEED=362484150668854 with 15 graphs): the run goes
       on, up to 4x its count, until one sort output was checked (not with
       LF_TEST_GRAPH, which replays one graph). */
    int cap = only ? last : first + 4 * (last - first);
    for (int gi = first; gi < last || (es.exact == 0 && gi < cap); gi++) {
        if (gi >= last) last = gi + 1;
        gen G;
        lf_node *outs[3];
        int nout = gen_graph(&G, ctx, seed, gi, outs);
        char what[96];
        snprintf(what, sizeof what, "graph %d (LF_TEST_SEED=%" PRIu64 " LF_TEST_GRAPH=%d)", gi, seed, gi);
        emu_check(ctx, G.g, nout, outs, what, dir, &id, gi % 2 == 1, &kernels, &launches, &vec_launches, &es);
        lf_graph_free(G.g);
    }
    tu_note("cuda_codegen: emulated %d graphs, %d kernels, %d launches (%d vec); sorts: %d kernels "
            "(%d with the backend's plan; block %d, select %d, radix %d), %d module launches in %.1f s; sort outputs: "
            "%d bit-exact, %d within the rounding of their input; %d outputs not compared (cancellation noise)\n",
            last - first, kernels, launches, vec_launches, es.kernels, es.real, es.paths[CG_SORT_BLOCK],
            es.paths[CG_SORT_SELECT], es.paths[CG_SORT_RADIX], es.launches, es.seconds, es.exact, es.explained,
            es.noise_skips);
    cr_expect_leq(es.noise_skips, 1 + (last - first) / 50, "%d outputs of %d graphs skipped as cancellation noise",
                  es.noise_skips, last - first);
    cr_assert_gt(es.exact, 0, "no sort output of the random graphs was checked bit for bit");
    if (es.h) dlclose(es.h);
    rmdir(dir);
    lf_ctx_destroy(ctx);
}

/* The CUDA kernel of a bincount raises the index-error flag for a negative
 * value (np.bincount; issue 26, item 2) and for one >= nbins, for an i32
 * and an i64 index and every weights dtype, and not for valid values,
 * whose counts match the reference (the host then names the position
 * through the reference evaluator, as test_errors checks on the host
 * backends). */
Test(cuda_codegen, emulated_bincount_refuses_negative_values, .timeout = 600) {
    if (!enabled()) cr_skip_test("LF_TEST_NVRTC=1 runs it (meson test cuda-codegen)");
    char dir[] = "/tmp/lf-emu-XXXXXX";
    cr_assert(mkdtemp(dir) != NULL);
    lf_ctx *ctx = ref_ctx();
    int id = 0, launches = 0, vec_launches = 0, kernels = 0;
    emu_sorts es = {.threads = 32};
    static const lf_dtype its[2] = {LF_I32, LF_I64};
    static const lf_dtype wts[6] = {LF_NDTYPES, LF_BOOL, LF_I32, LF_I64, LF_F32, LF_F64};
    static const double xs[3][4] = {{0.1, 0.5, -0.001, 0.99}, {0.1, 1.5, 0.2, 0.99}, {0.1, 0.5, -0.0, 0.99}};
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 6; b++)
            for (int c = 0; c < 3; c++) {
                if ((c == 1 && b != 0) || (c == 2 && b != 0 && b != 4)) continue; /* each C++ compile costs */
                lf_graph *g = lf_graph_new(ctx);
                int64_t four = 4;
                lf_node *x = lf_input(g, tu_buf(ctx, LF_F64, 1, &four, xs[c]));
                lf_node *idx = lf_cast(g, lf_map(g, lf_fn_parse(g, "(v) -> floor(v * 4)"), x), its[a]);
                lf_node *w = wts[b] == LF_NDTYPES ? NULL
                                                  : lf_input(g, tu_buf(ctx, wts[b], 1, &four, (double[]){1, 1, 0, 1}));
                lf_node *h = lf_bincount(g, idx, w, 4);
                cr_assert(h, "%s", lf_errmsg(ctx));
                char what[96];
                snprintf(what, sizeof what, "bincount idx %s weights %s values %d", lf_dtype_name(its[a]),
                         w ? lf_dtype_name(wts[b]) : "none", c);
                if (c == 2) { /* valid: no flag, the reference's counts */
                    emu_check(ctx, g, 1, &h, what, dir, &id, a == 1, &kernels, &launches, &vec_launches, &es);
                } else {
                    fuse_schedule *s = NULL;
                    cr_assert_eq(fuse_plan(g, 1, &h, true, &s), LF_OK, "%s: %s", what, lf_errmsg(ctx));
                    int32_t flag = 0;
                    void *got[1];
                    emu_index_flag = &flag;
                    emu_run_schedule(s, 1, got, dir, &id, a == 1, &launches, &vec_launches, &es);
                    emu_index_flag = NULL;
                    cr_expect_neq(flag, 0, "%s: the kernel did not flag the bad value", what);
                    free(got[0]);
                    fuse_schedule_free(s);
                }
                lf_graph_free(g);
            }
    if (es.h) dlclose(es.h);
    rmdir(dir);
    lf_ctx_destroy(ctx);
}

/* The CUDA kernels of issue 26, item 8's edges: an i32 compared with an
 * integer literal beyond i32 compares exactly (in i64; the reference is
 * exact), and sign / minimum / maximum of signed zeros and NaN give NumPy's
 * bits (the emulated kernel's outputs compared bit for bit with the
 * reference, NaN as NaN). */
Test(cuda_codegen, emulated_numpy_edges, .timeout = 600) {
    if (!enabled()) cr_skip_test("LF_TEST_NVRTC=1 runs it (meson test cuda-codegen)");
    char dir[] = "/tmp/lf-emu-XXXXXX";
    cr_assert(mkdtemp(dir) != NULL);
    lf_ctx *ctx = ref_ctx();
    int id = 0, launches = 0, vec_launches = 0, kernels = 0;
    emu_sorts es = {.threads = 32};
    lf_graph *g = lf_graph_new(ctx);
    int64_t n = 8;
    lf_node *xi = lf_input(g, tu_buf(ctx, LF_I32, 1, &n, (double[]){0, -5, 2147483647, -2147483648, 7, 1, -1, 100}));
    lf_node *outs[2] = {lf_map(g, lf_fn_parse(g, "(x) -> x < 3000000000"), xi),
                        lf_map(g, lf_fn_parse(g, "(x) -> x == -2147483649"), xi)};
    cr_assert(outs[0] && outs[1], "%s", lf_errmsg(ctx));
    emu_check(ctx, g, 2, outs, "i32 vs literals beyond i32", dir, &id, false, &kernels, &launches, &vec_launches, &es);
    lf_graph_free(g);
    /* i64 against literals beyond int64: exact at INT64_MAX and INT64_MIN */
    g = lf_graph_new(ctx);
    lf_buffer *b64 = lf_buffer_new(ctx, LF_I64, 1, &n);
    static const int64_t x64[] = {0, -1, INT64_MAX, INT64_MIN, INT64_MAX - 1, INT64_MIN + 1, 12345, -7};
    cr_assert(b64 && lf_buffer_write(b64, x64, sizeof x64) == LF_OK);
    lf_node *x6 = lf_input(g, b64);
    lf_node *o64[3] = {lf_map(g, lf_fn_parse(g, "(x) -> x < 9223372036854775808"), x6),
                       lf_map(g, lf_fn_parse(g, "(x) -> -9223372036854775809 == x"), x6),
                       lf_map(g, lf_fn_parse(g, "(x) -> f32(x) + 18446744073709551616"), x6)};
    cr_assert(o64[0] && o64[1] && o64[2], "%s", lf_errmsg(ctx));
    emu_check(ctx, g, 3, o64, "i64 vs literals beyond i64", dir, &id, false, &kernels, &launches, &vec_launches, &es);
    lf_graph_free(g);
    lf_buffer_free(b64);
    for (int d = 0; d < 2; d++) {
        lf_dtype t = d ? LF_F64 : LF_F32;
        g = lf_graph_new(ctx);
        lf_node *a = lf_input(g, tu_buf(ctx, t, 1, &n, (double[]){0.0, -0.0, 0.0, -0.0, 1.0, NAN, -2.0, 2.0}));
        lf_node *b = lf_input(g, tu_buf(ctx, t, 1, &n, (double[]){-0.0, 0.0, 0.0, -0.0, NAN, 1.0, -2.0, 1.0}));
        lf_node *o[3] = {lf_sign(g, a), lf_minimum(g, a, b), lf_maximum(g, a, b)};
        cr_assert(o[0] && o[1] && o[2], "%s", lf_errmsg(ctx));
        fuse_schedule *s = NULL;
        cr_assert_eq(fuse_plan(g, 3, o, true, &s), LF_OK, "%s", lf_errmsg(ctx));
        void *got[3];
        emu_run_schedule(s, 3, got, dir, &id, false, &launches, &vec_launches, &es);
        for (int k = 0; k < 3; k++) {
            lf_buffer *want = lf_buffer_new_like(ctx, o[k]);
            cr_assert_eq(lf_eval(g, 1, &o[k], &want), LF_OK, "%s", lf_errmsg(ctx));
            unsigned char wb[64];
            cr_assert_eq(lf_buffer_read(want, wb, lf_buffer_bytes(want)), LF_OK);
            for (int i = 0; i < n; i++) {
                double gv, wv;
                if (t == LF_F32) {
                    float gf, wf;
                    memcpy(&gf, (char *)got[k] + i * 4, 4), memcpy(&wf, wb + i * 4, 4);
                    gv = gf, wv = wf;
                } else {
                    memcpy(&gv, (char *)got[k] + i * 8, 8), memcpy(&wv, wb + i * 8, 8);
                }
                cr_expect(isnan(gv) ? isnan(wv) : !isnan(wv) && memcmp((char *)got[k] + i * lf_dtype_size(t),
                                                                       wb + i * lf_dtype_size(t), lf_dtype_size(t)) == 0,
                          "%s output %d element %d: %g, reference %g", lf_dtype_name(t), k, i, gv, wv);
            }
            lf_buffer_free(want);
            free(got[k]);
        }
        fuse_schedule_free(s);
        lf_graph_free(g);
    }
    if (es.h) dlclose(es.h);
    rmdir(dir);
    lf_ctx_destroy(ctx);
}

/* The dtypes appended after the first five on the emulator, exactly as the
 * reference: small integers wrapping after every operation (u8 200 + 100),
 * unsigned // % >> and comparisons, i8 shifts past the width, u64 at its
 * top; f16 and bf16 rounding each float32 result, with NaN, inf, -0,
 * overflow (f16 65520), subnormals, casts from f64 and integers, broadcast
 * [n,1] x [1,n] and a zero-size output, in 32- and 64-bit entries. */
Test(cuda_codegen, emulated_new_dtypes, .timeout = 600) {
    if (!enabled()) cr_skip_test("LF_TEST_NVRTC=1 runs it (meson test cuda-codegen)");
    char dir[] = "/tmp/lf-emu-XXXXXX";
    cr_assert(mkdtemp(dir) != NULL);
    lf_ctx *ctx = ref_ctx();
    int id = 0, launches = 0, vec_launches = 0, kernels = 0;
    emu_sorts es = {.threads = 32};
    static const double iv[] = {0, 1, 2, 7, 100, 127, 200, 255, -1, -128, 65535, 4294967295.0, 18446744073709549568.0};
    static const double fv[] = {0.0, -0.0, 1.0, -1.0, 1.0 + 0x1p-11, 1.0 + 0x1p-8, 65504, 65520, 0x1p-24, 0x1p-25,
                                3 * 0x1p-26, 1e-8, 3.4e38, 0.1, -2.7, 1e5, NAN, INFINITY, -INFINITY, 1e300};
    int64_t ni = sizeof iv / sizeof iv[0], nf = sizeof fv / sizeof fv[0];
    static const lf_dtype ints[] = {LF_I8, LF_U8, LF_I16, LF_U16, LF_U32, LF_U64};
    static const char *const ifns[] = {"(a, b) -> (a + b) * 3 - (a >> 1)", "(a, b) -> a // (b + 1) + a % (b | 1)",
                                       "(a, b) -> where(a < b, a << 5, ~b) + min(a, b) - max(a, b)"};
    for (int force64 = 0; force64 < 2; force64++) {
        for (size_t k = 0; k < sizeof ints / sizeof ints[0]; k++) {
            lf_graph *g = lf_graph_new(ctx);
            lf_node *a = lf_input(g, tu_buf(ctx, ints[k], 2, (int64_t[]){ni, 1}, iv));
            lf_node *b = lf_input(g, tu_buf(ctx, ints[k], 2, (int64_t[]){1, ni}, iv));
            lf_node *o[3];
            for (int f = 0; f < 3; f++) o[f] = lf_zipwith(g, lf_fn_parse(g, ifns[f]), 2, (lf_node *[]){a, b});
            cr_assert(o[0] && o[1] && o[2], "%s", lf_errmsg(ctx));
            char what[64];
            snprintf(what, sizeof what, "%s grid", lf_dtype_name(ints[k]));
            emu_check(ctx, g, 3, o, what, dir, &id, force64, &kernels, &launches, &vec_launches, &es);
            lf_graph_free(g);
        }
        for (int h = 0; h < 2; h++) {
            lf_dtype t = h ? LF_BF16 : LF_F16;
            lf_graph *g = lf_graph_new(ctx);
            lf_node *x = lf_input(g, tu_buf(ctx, LF_F64, 2, (int64_t[]){nf, 1}, fv));
            lf_node *a = lf_cast(g, x, t); /* one rounding from double */
            lf_node *b = lf_cast(g, lf_input(g, tu_buf(ctx, LF_F64, 2, (int64_t[]){1, nf}, fv)), t);
            lf_node *u = lf_input(g, tu_buf(ctx, LF_U16, 1, &ni, iv));
            lf_node *o[3] = {lf_zipwith(g, lf_fn_parse(g, "(a, b) -> (a * b + a) / 3 - sqrt(b)"), 2, (lf_node *[]){a, b}),
                             lf_add(g, lf_cast(g, u, t), lf_cast(g, lf_cast(g, x, LF_F32), t)),
                             lf_add(g, lf_cast(g, lf_slice(g, u, 0, 0, 0, 1), t), lf_const(g, t, 1))}; /* zero-size */
            cr_assert(o[0] && o[1] && o[2], "%s", lf_errmsg(ctx));
            emu_check(ctx, g, 3, o, lf_dtype_name(t), dir, &id, force64, &kernels, &launches, &vec_launches, &es);
            lf_graph_free(g);
        }
        for (int c = 0; c < 2; c++) { /* complex (issue 31): graph/complex.h in the CUDA prelude */
            lf_dtype t = c ? LF_C128 : LF_C64;
            lf_graph *g = lf_graph_new(ctx);
            lf_node *a = lf_cast(g, lf_input(g, tu_buf(ctx, LF_F64, 2, (int64_t[]){nf, 1}, fv)), t);
            lf_node *b = lf_cast(g, lf_input(g, tu_buf(ctx, LF_F64, 2, (int64_t[]){1, nf}, fv)), t);
            static const char *const cfns[] = {"(a, b) -> sqrt(a - 2.5) * b / (a + 1) - conj(sqrt(b)) ** 2",
                                               "(a, b) -> abs(exp(a * 0.01) - b) + angle(log(a - b))",
                                               "(a, b) -> f64(a == b) + real(where(imag(sqrt(a - b)) > 0, a, -b))"};
            lf_node *o[3];
            for (int f = 0; f < 3; f++) o[f] = lf_zipwith(g, lf_fn_parse(g, cfns[f]), 2, (lf_node *[]){a, b});
            cr_assert(o[0] && o[1] && o[2], "%s", lf_errmsg(ctx));
            emu_check(ctx, g, 3, o, lf_dtype_name(t), dir, &id, force64, &kernels, &launches, &vec_launches, &es);
            lf_graph_free(g);
        }
    }
    cr_expect_gt(launches, 0);
    if (es.h) dlclose(es.h);
    rmdir(dir);
    lf_ctx_destroy(ctx);
}

/* lf_pad and lf_concat on the emulator at sizes with several blocks: a
 * reflect border wider than the extent, a padded 5-tap convolution (one
 * kernel), an edge pad feeding a row reduction, and a concatenation of
 * pieces of three dtypes with NaN, Inf and -0.0 in them, each against the
 * reference evaluator (the random graphs cover them small). */
Test(cuda_codegen, emulated_pad_and_concat, .timeout = 600) {
    if (!enabled()) cr_skip_test("LF_TEST_NVRTC=1 runs it (meson test cuda-codegen)");
    char dir[] = "/tmp/lf-emu-XXXXXX";
    cr_assert(mkdtemp(dir) != NULL);
    lf_ctx *ctx = ref_ctx();
    int id = 0, launches = 0, vec_launches = 0, kernels = 0;
    emu_sorts es = {.threads = 32};
    for (int force64 = 0; force64 < 2; force64++) {
        lf_graph *g = lf_graph_new(ctx);
        static double v[37 * 301];
        for (int i = 0; i < 37 * 301; i++) v[i] = tu_uniform(-2.0, 2.0);
        v[0] = NAN, v[1] = INFINITY, v[2] = -INFINITY, v[3] = -0.0, v[305] = NAN; /* in the borders' reach */
        lf_buffer *xb = tu_buf(ctx, LF_F32, 2, (int64_t[]){37, 301}, v);
        lf_node *x = lf_input(g, xb);
        lf_buffer_free(xb);
        lf_node *wide = lf_pad(g, x, (int64_t[]){40, 3}, (int64_t[]){1, 700}, LF_PAD_REFLECT, 0);
        lf_node *p = lf_pad(g, x, (int64_t[]){0, 2}, (int64_t[]){0, 2}, LF_PAD_CONSTANT, -1.5);
        lf_node *conv = NULL;
        for (int t = 0; t < 5; t++) {
            lf_node *v = lf_mul(g, lf_slice(g, p, 1, t, t + 301, 1), lf_const(g, LF_F32, 0.25 * (t + 1)));
            conv = conv ? lf_add(g, conv, v) : v;
        }
        lf_node *edge = lf_reduce(g, LF_RED_MAX, lf_pad(g, x, (int64_t[]){2, 5}, (int64_t[]){3, 0}, LF_PAD_EDGE, 0),
                                  1, (int[]){1}, false);
        lf_node *i32 = lf_cast(g, lf_slice(g, x, 1, 0, 7, 1), LF_I32);
        lf_node *f64 = lf_mul(g, lf_cast(g, lf_slice(g, x, 1, 100, LF_NONE, 1), LF_F64), lf_const(g, LF_F64, 3));
        lf_node *cat = lf_concat(g, 4, (lf_node *[]){i32, lf_slice(g, x, 1, 0, 0, 1), f64, x}, -1);
        lf_node *outs[3] = {lf_add(g, wide, lf_const(g, LF_F32, 1)), conv, edge};
        cr_assert(outs[0] && outs[1] && outs[2] && cat, "%s", lf_errmsg(ctx));
        emu_check(ctx, g, 3, outs, "pad: wide reflect, padded convolution, edge + max", dir, &id, force64, &kernels,
                  &launches, &vec_launches, &es);
        lf_node *cat_out = lf_sub(g, cat, lf_const(g, LF_F64, 0.5));
        emu_check(ctx, g, 1, &cat_out, "concat of i32, an empty piece, f64 and f32", dir, &id, force64, &kernels,
                  &launches, &vec_launches, &es);
        lf_graph_free(g);
    }
    tu_note("cuda_codegen: pad and concat: %d kernels, %d launches emulated\n", kernels, launches);
    cr_expect_gt(launches, 0);
    if (es.h) dlclose(es.h);
    rmdir(dir);
    lf_ctx_destroy(ctx);
}

/* User functions (lf_fn_c, lf_fn_c_cuda): kernels calling them compile with
 * NVRTC (the body as a __device__ function, fused with builtin maps and a
 * reduction); an error in the CUDA body comes back in NVRTC's log at the
 * body's own line; a library function (host code) is refused by name. */
Test(cuda_codegen, user_functions_compile_with_nvrtc) {
    if (!enabled()) cr_skip_test("LF_TEST_NVRTC=1 runs it (meson test cuda-codegen)");
    char why[256];
    cr_assert(cuda_nvrtc_available(why, sizeof why), "NVRTC is required for this test: %s", why);
    lf_ctx *ctx = ref_ctx();
    lf_graph *g = lf_graph_new(ctx);
    const int64_t shape[2] = {64, 33};
    lf_node *x = lf_input(g, lf_buffer_new(ctx, LF_F32, 2, shape));
    lf_node *i = lf_input(g, lf_buffer_new(ctx, LF_I32, 2, shape));
    lf_fn *smooth = lf_fn_c(g, "smooth", "f32(f32 x, f32 k)", "float t = x / k;\nreturn t / (1.0f + fabsf(t));");
    lf_fn *pick = lf_fn_c_cuda(g, "pick", "f64(bool b, i64 n, f64 v)", "return b ? (double)n : v;",
                               "return b ? __ll2double_rn(n) : v;");
    cr_assert(smooth && pick, "%s", lf_errmsg(ctx));
    lf_node *a = lf_zipwith(g, smooth, 2, (lf_node *[]){lf_map(g, lf_fn_parse(g, "(v) -> v * 2.0"), x), x});
    lf_node *b = lf_zipwith(g, pick, 3, (lf_node *[]){lf_map(g, lf_fn_parse(g, "(v) -> v > 0"), a), i, a});
    lf_node *outs[2] = {a, lf_reduce(g, LF_RED_SUM, b, 1, (int[]){1}, false)};
    cr_assert(outs[1] != NULL, "%s", lf_errmsg(ctx));
    nvrtc_run run = {.what = "user functions"};
    compile_plans(&run, g, 2, outs);
    cr_expect_gt(run.compiled, 0);
    free(run.seen.h);
    lf_graph_free(g);

    /* a CUDA body with an error: NVRTC's log names the body's line */
    g = lf_graph_new(ctx);
    x = lf_input(g, lf_buffer_new(ctx, LF_F32, 2, shape));
    lf_fn *bad = lf_fn_c_cuda(g, "bad", "f32(f32 v)", "return v;", "float w = v;\nreturn w +* ;");
    cr_assert(bad != NULL, "%s", lf_errmsg(ctx));
    lf_node *y = lf_map(g, bad, x);
    fuse_schedule *s = NULL;
    cr_assert_eq(fuse_plan(g, 1, &y, true, &s), LF_OK);
    cg_layout *lay = cg_layout_new(s, 0);
    cg_text t = {0};
    cg_emit_kernel(s, lay, cg_dialect_cuda(), &t);
    char *log = NULL, err[512] = "";
    size_t bytes = 0;
    cr_expect_neq(cuda_nvrtc_compile_for_arch(t.s, 90, &log, &bytes, err, sizeof err), LF_OK);
    cr_expect(log && strstr(log, "bad(2)"), "NVRTC's log lacks the body's line 2: %s", log ? log : err);
    graph_free(log);
    cg_text_free(&t);
    graph_free(lay);
    fuse_schedule_free(s);
    lf_graph_free(g);
    lf_ctx_destroy(ctx);
}

/* signbit in the CUDA dialect: the sign bit itself (copysign), -0.0 and
 * -NaN included, on f32, f64, f16 (computed in float), bf16 and integers;
 * NVRTC compiles the kernels, the emulator's results match the reference's
 * bit for bit (a comparison-made signbit fails on -NaN). */
static lf_graph *signbit_graph(lf_ctx *ctx, lf_node **outs) {
    static const double v[] = {NAN, -NAN, -0.0, 0.0, -1.5, 2.0, INFINITY, -INFINITY};
    int64_t n = 8;
    lf_graph *g = lf_graph_new(ctx);
    lf_node *x = lf_input(g, tu_buf(ctx, LF_F64, 1, &n, v));
    lf_node *x32 = lf_input(g, tu_buf(ctx, LF_F32, 1, &n, v));
    lf_node *xi = lf_input(g, tu_buf(ctx, LF_I64, 1, &n, (double[]){0, -1, 5, -7, 1, 2, 3, -9}));
    lf_node *xu = lf_input(g, tu_buf(ctx, LF_U8, 1, &n, (double[]){0, 1, 200, 255, 1, 2, 3, 9}));
    outs[0] = lf_signbit(g, x);
    outs[1] = lf_map(g, lf_fn_parse(g, "(a) -> signbit(-a) or signbit(a * 2.0)"), x32);
    outs[2] = lf_signbit(g, lf_cast(g, x, LF_F16));
    outs[3] = lf_signbit(g, lf_cast(g, x32, LF_BF16));
    outs[4] = lf_signbit(g, xi);
    outs[5] = lf_signbit(g, xu);
    for (int i = 0; i < 6; i++) cr_assert(outs[i] != NULL, "%s", lf_errmsg(ctx));
    return g;
}

Test(cuda_codegen, signbit_compiles_with_nvrtc) {
    if (!enabled()) cr_skip_test("LF_TEST_NVRTC=1 runs it (meson test cuda-codegen)");
    char why[256];
    cr_assert(cuda_nvrtc_available(why, sizeof why), "NVRTC is required for this test: %s", why);
    lf_ctx *ctx = ref_ctx();
    lf_node *outs[6];
    lf_graph *g = signbit_graph(ctx, outs);
    nvrtc_run run = {.what = "signbit"};
    compile_plans(&run, g, 6, outs);
    cr_expect_gt(run.compiled, 0);
    free(run.seen.h);
    lf_graph_free(g);
    lf_ctx_destroy(ctx);
}

Test(cuda_codegen, emulated_signbit, .timeout = 600) {
    if (!enabled()) cr_skip_test("LF_TEST_NVRTC=1 runs it (meson test cuda-codegen)");
    char dir[] = "/tmp/lf-emu-XXXXXX";
    cr_assert(mkdtemp(dir) != NULL);
    lf_ctx *ctx = ref_ctx();
    int id = 0, launches = 0, vec_launches = 0, kernels = 0;
    emu_sorts es = {.threads = 32};
    lf_node *outs[6];
    lf_graph *g = signbit_graph(ctx, outs);
    for (int i = 0; i < 6; i += 3) /* emu_check takes up to 3 outputs */
        emu_check(ctx, g, 3, outs + i, "signbit", dir, &id, false, &kernels, &launches, &vec_launches, &es);
    /* the reference itself reads the bit: -NaN and -0.0 are negative */
    lf_buffer *b = tu_eval1(ctx, g, outs[0]);
    unsigned char got[8];
    cr_assert_eq(lf_buffer_read(b, got, sizeof got), LF_OK);
    cr_expect(!got[0] && got[1] && got[2] && !got[3], "signbit(NaN, -NaN, -0, 0) = %d %d %d %d", got[0], got[1],
              got[2], got[3]);
    lf_buffer_free(b);
    lf_graph_free(g);
    cr_expect_gt(launches, 0);
    if (es.h) dlclose(es.h);
    rmdir(dir);
    lf_ctx_destroy(ctx);
}

/* A user function's CUDA kernels on the emulator: smooth(x * 2, k) fused
 * with a map and with a row sum (several blocks), against the reference
 * evaluator (which calls the host copy of the same body). */
Test(cuda_codegen, emulated_user_functions, .timeout = 600) {
    if (!enabled()) cr_skip_test("LF_TEST_NVRTC=1 runs it (meson test cuda-codegen)");
    char dir[] = "/tmp/lf-emu-XXXXXX";
    cr_assert(mkdtemp(dir) != NULL);
    lf_ctx *ctx = ref_ctx();
    int id = 0, launches = 0, vec_launches = 0, kernels = 0;
    emu_sorts es = {.threads = 32};
    lf_graph *g = lf_graph_new(ctx);
    const int64_t shape[2] = {37, 3001};
    lf_node *x = lf_input(g, random_buffer(ctx, 2, shape));
    lf_node *k = lf_input(g, random_buffer(ctx, 1, (int64_t[]){3001}));
    lf_fn *smooth = lf_fn_c(g, "smooth", "f32(f32 x, f32 k)", "float t = x / k;\nreturn t / (1.0f + fabsf(t));");
    cr_assert(smooth != NULL, "%s", lf_errmsg(ctx));
    lf_node *a = lf_zipwith(g, smooth, 2, (lf_node *[]){lf_map(g, lf_fn_parse(g, "(v) -> v * 2.0"), x), k});
    lf_node *outs[2] = {a, lf_reduce(g, LF_RED_SUM, lf_map(g, lf_fn_parse(g, "(v) -> smooth(v, 3.0) + 1"), x), 1,
                                     (int[]){1}, false)};
    cr_assert(outs[0] && outs[1], "%s", lf_errmsg(ctx));
    emu_check(ctx, g, 2, outs, "user functions", dir, &id, false, &kernels, &launches, &vec_launches, &es);
    cr_expect_gt(launches, 0);
    tu_note("cuda_codegen: user functions: %d kernels, %d emulated launches\n", kernels, launches);
    lf_graph_free(g);
    if (es.h) dlclose(es.h);
    rmdir(dir);
    lf_ctx_destroy(ctx);
}
