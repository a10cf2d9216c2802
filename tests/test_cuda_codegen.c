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
 *   must match the reference evaluator as the compiled CPU backend must
 *   (floats within 1e-4 relative: device-order reductions and libm). Both
 *   index widths and the vec/scalar elementwise entries are exercised. This
 *   checks the kernels' logic (indexing, grid-stride loops, block trees,
 *   the last-block ticket, epilogues, row passes); it cannot check what only
 *   a GPU shows (warp scheduling, memory model, device math accuracy): the
 *   same suites run on a device through LF_TEST_BACKEND=cuda
 *   (scripts/gpu-check.sh).
 *
 * Both tests run only with LF_TEST_NVRTC=1 (meson's `cuda-codegen` entry),
 * since they compile hundreds of kernels; elsewhere they skip saying so.
 */
#include "cuda_emu.h"
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
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
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
            if (s->kernels[k].sort) continue; /* no CUDA sort kernels yet: the backend sorts on the host */
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
                if (st != LF_OK || (log && *log)) fprintf(stderr, "---- %s kernel %d source:\n%s\n", run->what, k, t.s);
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
    fprintf(stderr, "cuda_codegen: NVRTC compiled %d distinct kernels for sm_90 (%d from the bench cases, %d from %d random graphs)\n",
            run.compiled, bench_kernels, run.compiled - bench_kernels, ngraphs);
    free(run.seen.h);
    lf_ctx_destroy(ctx);
}

/* ---- emulated: the kernels' logic on the host ------------------------------------------ */

/* Runs schedule s on the emulator; results[i] receives output i
 * (malloc'd, the output's bytes). force64: launch the 64-bit entries. */
static void emu_run_schedule(const fuse_schedule *s, int n, void **results, const char *dir, int *id,
                             bool force64, int *launches, int *vec_launches) {
    void **data = calloc((size_t)s->nslots + 1, sizeof *data);
    void **owned = calloc((size_t)s->nslots + 1, sizeof *owned);
    cr_assert(data && owned);
    for (int j = 0; j < s->nslots; j++) {
        const fuse_slot *sl = &s->slots[j];
        if (sl->kind == FUSE_SLOT_INPUT) {
            data[j] = sl->buffer->data;
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
        cr_assert_eq(index_err, 0, "kernel %d raised the index-error flag with in-range indices", k);
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

static double element(lf_dtype t, const void *p, int64_t j) {
    switch (t) {
    case LF_BOOL: return ((const uint8_t *)p)[j];
    case LF_I32: return ((const int32_t *)p)[j];
    case LF_I64: return (double)((const int64_t *)p)[j];
    case LF_F32: return ((const float *)p)[j];
    default: return ((const double *)p)[j];
    }
}

static bool same(lf_dtype t, double a, double b) {
    if (t == LF_F32 || t == LF_F64) return tu_close(a, b, 1e-4, 1e-6);
    return a == b;
}

/* Runs graph g's fused plan on the emulator and compares every output
 * with the reference evaluator; what names the graph in failures. */
static void emu_check(lf_ctx *ctx, lf_graph *g, int nout, lf_node **outs, const char *what, const char *dir,
                      int *id, bool force64, int *kernels, int *launches, int *vec_launches) {
    fuse_schedule *s = NULL;
    cr_assert_eq(fuse_plan(g, nout, outs, true, &s), LF_OK, "%s: %s", what, lf_errmsg(ctx));
    for (int k = 0; k < s->nkernels; k++)
        if (s->kernels[k].sort) { /* the CUDA backend runs graphs with sorts on the host: nothing to emulate */
            fuse_schedule_free(s);
            return;
        }
    *kernels += s->nkernels;
    void *got[3];
    emu_run_schedule(s, nout, got, dir, id, force64, launches, vec_launches);
    for (int i = 0; i < nout; i++) {
        lf_buffer *want = lf_buffer_new_like(ctx, outs[i]);
        cr_assert_eq(lf_eval(g, 1, &outs[i], &want), LF_OK, "%s", lf_errmsg(ctx));
        int64_t m = lf_buffer_numel(want);
        double *w = malloc((size_t)(m ? m : 1) * sizeof *w);
        cr_assert(w != NULL);
        tu_read(want, w);
        for (int64_t j = 0; j < m; j++) {
            double v = element(outs[i]->dtype, got[i], j);
            if (!same(outs[i]->dtype, v, w[j])) {
                fuse_schedule_print(s, stderr);
                cr_assert_fail("%s, %s entries: output %d (%s, %lld elements) element %lld is %.17g, "
                               "reference %.17g",
                               what, force64 ? "64-bit" : "32-bit", i, lf_dtype_name(outs[i]->dtype),
                               (long long)m, (long long)j, v, w[j]);
            }
        }
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
            emu_check(ctx, g, nout, outs, what, dir, &id, k == 1, &kernels, &launches, &vec_launches);
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
        emu_check(ctx, g, 1, &out, what, dir, &id, ri % 2 == 1, &kernels, &launches, &vec_launches);
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
            emu_check(ctx, g, 3, outs[k], what, dir, &id, (si + k) % 2 == 1, &kernels, &launches, &vec_launches);
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
        emu_check(ctx, g, 3, outs, what, dir, &id, si == 1, &kernels, &launches, &vec_launches);
        lf_graph_free(g);
    }
    fprintf(stderr, "cuda_codegen: emulated large graphs: %d kernels, %d launches (%d vec)\n", kernels, launches,
            vec_launches);
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
    for (int gi = first; gi < last; gi++) {
        gen G;
        lf_node *outs[3];
        int nout = gen_graph(&G, ctx, seed, gi, outs);
        char what[96];
        snprintf(what, sizeof what, "graph %d (LF_TEST_SEED=%" PRIu64 " LF_TEST_GRAPH=%d)", gi, seed, gi);
        emu_check(ctx, G.g, nout, outs, what, dir, &id, gi % 2 == 1, &kernels, &launches, &vec_launches);
        lf_graph_free(G.g);
    }
    fprintf(stderr, "cuda_codegen: emulated %d graphs, %d kernels, %d launches (%d vec)\n", last - first, kernels,
            launches, vec_launches);
    rmdir(dir);
    lf_ctx_destroy(ctx);
}
