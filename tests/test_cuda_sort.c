/* tests/test_cuda_sort.c: the CUDA sort module (codegen/sort_cuda.c),
 * checked without a GPU.
 *
 * - nvrtc: the module compiles with NVRTC to a CUBIN for sm_90 through the
 *   backend's own dlopen path, with no warning.
 * - emulated: the module, compiled as host C++ against the shim of
 *   tests/cuda_emu.c (an OS thread per CUDA thread), runs every path's plan
 *   (BLOCK, SELECT with k in {0, 1, 10, 64}, RADIX) over host memory on
 *   random keys of both widths, with many ties, n in {0, 1, 2, 31, 1000,
 *   4101, 70000} and several rows; keys_out and pos_out must equal an
 *   oracle exactly (qsort by key, then position). Small blocks (32 or 64
 *   threads) keep the emulation fast; the default 256 threads run on a few
 *   cases of each path.
 *
 * Both run only with LF_TEST_NVRTC=1 (meson's `cuda-sort` entry); elsewhere
 * they skip saying so.
 */
#include "cuda_emu.h"
#include "testutil.h"

#include "backends/cuda/cuda.h"
#include "codegen/codegen.h"

#include <criterion/criterion.h>
#include <dlfcn.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static bool enabled(void) {
    const char *e = getenv("LF_TEST_NVRTC");
    return e && strcmp(e, "1") == 0;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

Test(cuda_sort, module_compiles_with_nvrtc, .timeout = 600) {
    if (!enabled()) cr_skip_test("LF_TEST_NVRTC=1 runs it (meson test cuda-sort)");
    char why[256];
    cr_assert(cuda_nvrtc_available(why, sizeof why), "NVRTC is required for this test: %s", why);
    char *log = NULL, err[512] = "";
    size_t bytes = 0;
    lf_status st = cuda_nvrtc_compile_for_arch(cg_cuda_sort_source(), 90, &log, &bytes, err, sizeof err);
    cr_assert_eq(st, LF_OK, "%s\n%s", err, log ? log : "");
    cr_assert(log == NULL || !*log, "NVRTC warns:\n%s", log);
    cr_assert_gt(bytes, 0);
    graph_free(log);
}

/* ---- emulated ------------------------------------------------------------------------- */

typedef struct kp {
    uint64_t key;
    int64_t pos;
} kp;

static int kp_cmp(const void *a, const void *b) {
    const kp *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* Row r's keys: patterns with many ties (few distinct values, low or high
 * digits only, runs) and full-range random keys. */
static uint64_t gen_key(int pattern, bool wide, int64_t i) {
    int bits = wide ? 64 : 32;
    uint64_t mask = wide ? UINT64_MAX : UINT32_MAX, r = tu_rand();
    switch (pattern % 5) {
    case 0: return r % 7;                                                 /* ties, low digit */
    case 1: return r & mask;                                              /* distinct */
    case 2: return ((r % 5) << (bits - 8)) | ((r >> 40) % 3);             /* ties, high and low digits */
    case 3: return (uint64_t)(i / 37) * 0x0101010101010101ull & mask;    /* runs, every digit */
    default: return r % 2 ? mask : (r >> 8) & mask & 0xffff00ffffffff0full; /* the largest key, often */
    }
}

typedef struct emu {
    void *h;
    emu_launch_fn launch;
    int launches;
    int64_t blocks;
} emu;

/* Runs one plan on the emulator and compares with the oracle. */
static void check(emu *E, cg_cuda_sort_path path, int threads, bool wide, int64_t nrows, int64_t n, int64_t k,
                  bool want_keys, bool want_pos) {
    char what[160];
    snprintf(what, sizeof what, "path %d threads %d %s nrows %lld n %lld k %lld keys %d pos %d (LF_TEST_SEED=%" PRIu64 ")",
             (int)path, threads, wide ? "u64" : "u32", (long long)nrows, (long long)n, (long long)k, want_keys,
             want_pos, tu_seed());
    cg_cuda_sort_plan plan;
    cr_assert(cg_cuda_plan_sort_with(nrows, n, k, wide, want_keys, want_pos, path, threads, &plan), "%s: no plan",
              what);
    cr_assert_eq(plan.path, path, "%s", what);
    size_t kb = wide ? 8 : 4, elems = (size_t)(nrows * n), outs = (size_t)(nrows * k);
    unsigned char *K = malloc(elems * kb + 1);
    kp *want = malloc((elems + 1) * sizeof *want);
    unsigned char *kout = malloc(outs * kb + 16);
    int64_t *pout = malloc(outs * 8 + 16);
    void *scratch = plan.scratch_bytes ? malloc(plan.scratch_bytes) : NULL;
    uint64_t *words = malloc(((size_t)plan.nlaunches + 1) * CG_CUDA_SORT_WORDS * sizeof *words);
    cr_assert(K && want && kout && pout && words && (scratch || !plan.scratch_bytes));
    memset(kout, 0x5a, outs * kb + 16); /* poisoned: an output left unwritten shows */
    memset(pout, 0x5a, outs * 8 + 16);
    if (scratch) memset(scratch, 0xa5, plan.scratch_bytes); /* the plan says no initialisation is needed */
    int pattern0 = (int)(tu_rand() % 5);
    for (int64_t r = 0; r < nrows; r++)
        for (int64_t i = 0; i < n; i++) {
            uint64_t v = gen_key(pattern0 + (int)r, wide, i);
            if (wide)
                ((uint64_t *)K)[r * n + i] = v;
            else
                ((uint32_t *)K)[r * n + i] = (uint32_t)v;
            want[r * n + i] = (kp){v, i};
        }
    for (int64_t r = 0; r < nrows; r++) qsort(want + r * n, (size_t)n, sizeof *want, kp_cmp);
    cg_cuda_sort_fill_args(&plan, (uint64_t)(uintptr_t)K, (uint64_t)(uintptr_t)kout, (uint64_t)(uintptr_t)pout,
                           (uint64_t)(uintptr_t)scratch, words);
    for (int l = 0; l < plan.nlaunches; l++) {
        const cg_cuda_sort_launch *la = &plan.launch[l];
        void *fn = dlsym(E->h, la->entry);
        cr_assert(fn != NULL, "%s: entry %s missing", what, la->entry);
        cr_assert_eq(la->shared_bytes, 0u);
        cr_assert(la->block[0] % 32 == 0 && la->block[0] <= 256 && la->block[1] == 1 && la->grid[1] == 1);
        cr_assert_eq(E->launch(fn, la->grid[0], la->block[0], 1, words + (size_t)l * plan.nwords), 0, "%s", what);
        E->launches++;
        E->blocks += la->grid[0];
    }
    bool none = k == 0 || nrows == 0 || (!want_keys && !want_pos);
    cr_assert_eq(plan.nlaunches == 0, none, "%s: %d launches", what, plan.nlaunches);
    for (int64_t r = 0; r < nrows; r++)
        for (int64_t j = 0; j < k; j++) {
            const kp *w = &want[r * n + j];
            if (want_keys) {
                uint64_t got = wide ? ((uint64_t *)kout)[r * k + j] : ((uint32_t *)kout)[r * k + j];
                cr_assert_eq(got, w->key, "%s: row %lld entry %lld: key %#" PRIx64 ", want %#" PRIx64, what,
                             (long long)r, (long long)j, got, w->key);
            }
            if (want_pos)
                cr_assert_eq(pout[r * k + j], w->pos, "%s: row %lld entry %lld: position %lld, want %lld (key %#" PRIx64 ")",
                             what, (long long)r, (long long)j, (long long)pout[r * k + j], (long long)w->pos, w->key);
        }
    /* nothing past the outputs (or into an output not wanted) */
    const unsigned char *kb8 = kout, *pb8 = (const unsigned char *)pout;
    for (size_t i = want_keys ? outs * kb : 0; i < outs * kb + 16; i++) cr_assert_eq(kb8[i], 0x5a, "%s: keys_out byte %zu", what, i);
    for (size_t i = want_pos ? outs * 8 : 0; i < outs * 8 + 16; i++) cr_assert_eq(pb8[i], 0x5a, "%s: pos_out byte %zu", what, i);
    free(K);
    free(want);
    free(kout);
    free(pout);
    free(scratch);
    free(words);
}

static emu emu_open(const char *dir) {
    emu E = {0};
    E.h = emu_build(cg_cuda_sort_source(), dir, 0);
    E.launch = (emu_launch_fn)(uintptr_t)dlsym(E.h, "lf_emu_launch");
    cr_assert(E.launch != NULL);
    return E;
}

static const int64_t sizes[] = {0, 1, 2, 31, 1000, 4101, 70000};
enum { NSIZES = sizeof sizes / sizeof sizes[0] };

/* Rows of each size: several, fewer for the long ones. */
static int64_t rows_for(int64_t n) { return n >= 70000 ? 2 : n >= 4000 ? 3 : 4; }

Test(cuda_sort, emulated_block_path, .timeout = 600) {
    if (!enabled()) cr_skip_test("LF_TEST_NVRTC=1 runs it (meson test cuda-sort)");
    char dir[] = "/tmp/lf-emu-XXXXXX";
    cr_assert(mkdtemp(dir) != NULL);
    emu E = emu_open(dir);
    double t0 = now();
    for (int w = 0; w < 2; w++)
        for (int si = 0; si < NSIZES; si++) {
            int64_t n = sizes[si];
            if (n > 16 * 256) continue;
            int threads = n <= 16 * 32 ? 32 : 64; /* the smallest block that holds the row */
            if (n > 16 * 64) threads = 256;
            int64_t nrows = threads == 256 ? 1 : rows_for(n);
            check(&E, CG_SORT_BLOCK, threads, w, nrows, n, n, true, true);
            if (n > 0) check(&E, CG_SORT_BLOCK, threads, w, nrows, n, n / 3 + 1, w == 0, w == 1);
        }
    /* the default block on a row that leaves most threads with padding only */
    check(&E, CG_SORT_BLOCK, 0, true, 2, 300, 300, true, true);
    tu_note("cuda_sort: block path: %d launches, %" PRId64 " blocks emulated in %.1f s\n", E.launches,
            E.blocks, now() - t0);
    dlclose(E.h);
    rmdir(dir);
}

Test(cuda_sort, emulated_select_path, .timeout = 600) {
    if (!enabled()) cr_skip_test("LF_TEST_NVRTC=1 runs it (meson test cuda-sort)");
    char dir[] = "/tmp/lf-emu-XXXXXX";
    cr_assert(mkdtemp(dir) != NULL);
    emu E = emu_open(dir);
    double t0 = now();
    const int64_t ks[] = {0, 1, 10, 64};
    for (int w = 0; w < 2; w++)
        for (int si = 0; si < NSIZES; si++)
            for (int ki = 0; ki < 4; ki++) {
                int64_t n = sizes[si], k = ks[ki];
                if (k > n) continue;
                check(&E, CG_SORT_SELECT, 32, w, rows_for(n), n, k, (ki + si) % 3 != 0, (ki + si) % 3 != 1);
            }
    /* the default block: 256 threads at k = 1, 128 at k = 10, 32 at k = 64 */
    check(&E, CG_SORT_SELECT, 0, false, 2, 5000, 1, true, true);
    check(&E, CG_SORT_SELECT, 0, true, 2, 5000, 10, true, true);
    check(&E, CG_SORT_SELECT, 0, true, 1, 5000, 64, true, true);
    tu_note("cuda_sort: select path: %d launches, %" PRId64 " blocks emulated in %.1f s\n", E.launches,
            E.blocks, now() - t0);
    dlclose(E.h);
    rmdir(dir);
}

Test(cuda_sort, emulated_radix_path, .timeout = 600) {
    if (!enabled()) cr_skip_test("LF_TEST_NVRTC=1 runs it (meson test cuda-sort)");
    char dir[] = "/tmp/lf-emu-XXXXXX";
    cr_assert(mkdtemp(dir) != NULL);
    emu E = emu_open(dir);
    double t0 = now();
    for (int w = 0; w < 2; w++)
        for (int si = 0; si < NSIZES; si++) {
            int64_t n = sizes[si];
            int64_t k = si % 2 ? n : n > 100 ? 100 : n;
            check(&E, CG_SORT_RADIX, 32, w, rows_for(n), n, k, si != 3, si != 4);
        }
    /* the default tile of 4096 keys: a row of two tiles */
    check(&E, CG_SORT_RADIX, 0, false, 1, 4101, 4101, true, true);
    tu_note("cuda_sort: radix path: %d launches, %" PRId64 " blocks emulated in %.1f s\n", E.launches,
            E.blocks, now() - t0);
    dlclose(E.h);
    rmdir(dir);
}

Test(cuda_sort, plans) {
    cg_cuda_sort_plan p;
    cg_cuda_plan_sort(10, 4096, 4096, true, true, true, &p);
    cr_assert_eq(p.path, CG_SORT_BLOCK);
    cr_assert_eq(p.nlaunches, 1);
    cr_assert_eq(p.launch[0].grid[0], 10u);
    cr_assert_eq(p.launch[0].block[0], 256u);
    cr_assert_eq(p.scratch_bytes, 0u);
    cg_cuda_plan_sort(10, 4097, 64, false, true, true, &p);
    cr_assert_eq(p.path, CG_SORT_SELECT);
    cr_assert_eq(p.launch[0].block[0], 32u);
    cg_cuda_plan_sort(3, 100000, 65, false, false, true, &p);
    cr_assert_eq(p.path, CG_SORT_RADIX);
    cr_assert_eq(p.nlaunches, 12);
    cr_assert_eq(p.tiles, 25);
    cr_assert_eq(p.launch[0].grid[0], 75u);
    cr_assert_eq(p.launch[1].grid[0], 3u);
    cr_assert_geq(p.scratch_bytes, (size_t)3 * 100000 * 24 + 3 * 256 * 25 * 8);
    cg_cuda_plan_sort(3, 100000, 65, true, true, true, &p);
    cr_assert_eq(p.nlaunches, 24);
    cg_cuda_plan_sort(0, 100, 5, true, true, true, &p);
    cr_assert_eq(p.nlaunches, 0);
    cr_assert(!cg_cuda_plan_sort_with(1, 5000, 5, true, true, true, CG_SORT_BLOCK, 256, &p));
    cr_assert(!cg_cuda_plan_sort_with(1, 5000, 65, true, true, true, CG_SORT_SELECT, 256, &p));
    cr_assert(!cg_cuda_plan_sort_with(1, 50, 51, true, true, true, CG_SORT_AUTO, 0, &p));
    cr_assert(!cg_cuda_plan_sort_with(1, 50, 5, true, true, true, CG_SORT_AUTO, 48, &p));
}
