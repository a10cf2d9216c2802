/* tests/test_cuda.c: the CUDA backend (backends/cuda).
 *
 * Three groups, so that most of it runs on machines without a GPU:
 *  1. no driver, and a fake driver (tests/fake_libcuda.c, loaded through
 *     LF_CUDA_LIBRARY; meson passes its path in LF_TEST_FAKE_CUDA): context
 *     creation and its errors, the AUTO fallback and its one warning, device
 *     buffers (round trips, zeroing, bool normalization), the caching
 *     allocator (reuse, out of memory with the context still usable), the
 *     program and module caches (memory and disk), load and launch failures
 *     leaving the outputs untouched, output aliasing, the host evaluators on
 *     a device context, and destroy freeing everything. The fake runs no
 *     kernel, but NVRTC is real: every eval here compiles the generated CUDA
 *     source for the fake's sm_90;
 *  2. NVRTC alone: a kernel compiles to a CUBIN for sm_90, and a syntax
 *     error's log reaches the message. These skip only when libnvrtc cannot
 *     be loaded at all, saying why;
 *  3. a real device (skipped cleanly without one): results against the CPU
 *     backend, reuse, out of device memory.
 */
#include "backends/cuda/cuda.h"
#include "codegen/codegen.h"
#include "testutil.h"
#include "timed_eval.h" /* benches/: lazyfuse-bench's timed region */

#include <dlpack/dlpack.h>

#include <criterion/criterion.h>
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Same layout as fake_libcuda.c's. */
typedef struct fake_counters {
    long inits, allocs, frees, bad_frees, memsets, htod, dtoh, dtod, syncs, loads, unloads,
        get_functions, launches, retains, releases, streams_created, streams_destroyed, set_current,
        ctx_syncs, events_created, events_destroyed;
    size_t live_bytes;
    unsigned last_grid[3], last_block[3];
} fake_counters;

static const char *fake_path(void) {
    const char *p = getenv("LF_TEST_FAKE_CUDA");
    if (!p || !*p) cr_skip_test("LF_TEST_FAKE_CUDA is not set (meson test sets it to fake_libcuda.so)");
    return p;
}

static void need_nvrtc(void) {
    char why[1024];
    if (!cuda_nvrtc_available(why, sizeof why)) {
        tu_note("test_cuda: skipping: libnvrtc cannot be loaded: %s\n", why);
        cr_skip_test("libnvrtc cannot be loaded: %s", why);
    }
}

/* A function of the fake driver (fake_cuda_counters, fake_cuda_log, ...). */
static void *fake_sym(const char *name) {
    void *h = dlopen(fake_path(), RTLD_NOW | RTLD_NOLOAD);
    cr_assert_not_null(h, "the fake driver is not loaded");
    void *p = dlsym(h, name);
    cr_assert_not_null(p, "fake driver lacks %s", name);
    dlclose(h); /* still loaded: the library opened it with RTLD_NODELETE */
    return p;
}

static fake_counters counters(void) {
    void (*get)(fake_counters *);
    void *sym = fake_sym("fake_cuda_counters");
    memcpy(&get, &sym, sizeof sym);
    fake_counters c;
    get(&c);
    return c;
}

static lf_ctx *new_ctx(lf_backend b, const char *cache_dir) {
    lf_ctx_options o;
    lf_ctx_options_init(&o);
    o.backend = b;
    o.cache_dir = cache_dir;
    return lf_ctx_new(&o);
}

/* A CUDA context on the fake driver (NVRTC must load: contexts need it). */
static lf_ctx *fake_ctx(const char *cache_dir) {
    setenv("LF_CUDA_LIBRARY", fake_path(), 1);
    need_nvrtc();
    lf_ctx *ctx = new_ctx(LF_BACKEND_CUDA, cache_dir);
    cr_assert_not_null(ctx, "fake CUDA context: %s", lf_errmsg(NULL));
    cr_assert_eq(lf_ctx_backend(ctx), LF_BACKEND_CUDA);
    return ctx;
}

static void expect_msg(const char *msg, const char *frag) {
    cr_expect(strstr(msg, frag) != NULL, "message lacks \"%s\": %s", frag, msg);
}

/* A fresh folder for a disk cache; rm_dir removes it and its files. */
static char *tmp_dir(void) {
    static char path[64];
    snprintf(path, sizeof path, "/tmp/lf-test-cuda-XXXXXX");
    cr_assert_not_null(mkdtemp(path), "mkdtemp: %s", strerror(errno));
    return path;
}

static void rm_dir(const char *dir) {
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_expect_eq(system(cmd), 0);
}

/* y = x*2 + 1 over n floats of ctx, evaluated into a new buffer; checks it. */
static void check_affine(lf_ctx *ctx, int64_t n) {
    float *host = malloc((size_t)n * sizeof *host), *got = malloc((size_t)n * sizeof *got);
    cr_assert(host && got);
    for (int64_t i = 0; i < n; i++) host[i] = (float)i * 0.25f - 3.0f;
    lf_buffer *xb = lf_buffer_new(ctx, LF_F32, 1, &n);
    cr_assert_not_null(xb, "%s", lf_errmsg(ctx));
    cr_assert_eq(lf_buffer_write(xb, host, (size_t)n * sizeof *host), LF_OK, "%s", lf_errmsg(ctx));
    lf_graph *g = lf_graph_new(ctx);
    lf_node *x = lf_input(g, xb);
    lf_node *y = lf_add(g, lf_mul(g, x, lf_const(g, LF_F32, 2.0)), lf_const(g, LF_F32, 1.0));
    lf_buffer *yb = tu_eval1(ctx, g, y);
    cr_assert_eq(lf_buffer_read(yb, got, (size_t)n * sizeof *got), LF_OK, "%s", lf_errmsg(ctx));
    for (int64_t i = 0; i < n; i++)
        cr_assert_eq(got[i], host[i] * 2.0f + 1.0f, "y[%lld] = %g", (long long)i, got[i]);
    lf_graph_free(g);
    lf_buffer_free(xb);
    lf_buffer_free(yb);
    free(host);
    free(got);
}

TestSuite(cuda, .timeout = 600);

/* ==== 1. no driver, fake driver ================================================== */

Test(cuda, no_driver_explicit_backend_fails) {
    setenv("LF_CUDA_LIBRARY", "/nonexistent/libcuda.so.1", 1);
    lf_ctx *ctx = new_ctx(LF_BACKEND_CUDA, NULL);
    cr_assert_null(ctx);
    const char *m = lf_errmsg(NULL);
    expect_msg(m, "ctx_new: cuda: cannot load /nonexistent/libcuda.so.1");
    expect_msg(m, "LF_CUDA_LIBRARY");
}

Test(cuda, no_driver_auto_falls_back_to_cpu_with_one_warning) {
    setenv("LF_CUDA_LIBRARY", "/nonexistent/libcuda.so.1", 1);
    unsetenv("LF_QUIET");
    tu_capture_stderr_start();
    lf_ctx *a = new_ctx(LF_BACKEND_AUTO, NULL);
    lf_ctx *b = new_ctx(LF_BACKEND_AUTO, NULL);
    char *err = tu_capture_stderr_end();
    cr_assert_not_null(a, "%s", lf_errmsg(NULL));
    cr_assert_not_null(b, "%s", lf_errmsg(NULL));
    cr_expect_eq(lf_ctx_backend(a), LF_BACKEND_CPU);
    cr_expect_eq(tu_count_substr(err, "lazyfuse: no usable CUDA device ("), 1, "stderr was:\n%s", err);
    expect_msg(err, "/nonexistent/libcuda.so.1");
    expect_msg(err, "using the CPU backend");
    free(err);
    check_affine(a, 1000);
    lf_ctx_destroy(a);
    lf_ctx_destroy(b);
}

Test(cuda, auto_fallback_is_quiet_with_LF_QUIET) {
    setenv("LF_CUDA_LIBRARY", "/nonexistent/libcuda.so.1", 1);
    setenv("LF_QUIET", "1", 1);
    tu_capture_stderr_start();
    lf_ctx *a = new_ctx(LF_BACKEND_AUTO, NULL);
    char *err = tu_capture_stderr_end();
    cr_assert_not_null(a);
    cr_expect_eq(lf_ctx_backend(a), LF_BACKEND_CPU);
    cr_expect_eq(err[0], 0, "stderr was: %s", err);
    free(err);
    lf_ctx_destroy(a);
}

Test(cuda, fake_driver_without_device) {
    setenv("LF_CUDA_LIBRARY", fake_path(), 1);
    setenv("FAKE_CUDA_INIT", "100", 1);
    unsetenv("LF_QUIET");
    cr_assert_null(new_ctx(LF_BACKEND_CUDA, NULL));
    const char *m = lf_errmsg(NULL);
    expect_msg(m, "ctx_new: cuda: cuInit failed");
    expect_msg(m, "CUDA_ERROR_NO_DEVICE");
    expect_msg(m, "no CUDA-capable device is detected");
    tu_capture_stderr_start();
    lf_ctx *a = new_ctx(LF_BACKEND_AUTO, NULL);
    char *err = tu_capture_stderr_end();
    cr_assert_not_null(a);
    cr_expect_eq(lf_ctx_backend(a), LF_BACKEND_CPU);
    expect_msg(err, "no CUDA-capable device is detected");
    free(err);
    lf_ctx_destroy(a);
    fake_counters c = counters();
    cr_expect_eq(c.retains, c.releases);
}

Test(cuda, fake_driver_bad_device_number) {
    setenv("LF_CUDA_LIBRARY", fake_path(), 1);
    setenv("LF_CUDA_DEVICE", "3", 1);
    cr_assert_null(new_ctx(LF_BACKEND_CUDA, NULL));
    expect_msg(lf_errmsg(NULL), "LF_CUDA_DEVICE=3 is not a device number (0..0)");
}

Test(cuda, missing_nvrtc_is_named) {
    setenv("LF_CUDA_LIBRARY", fake_path(), 1);
    setenv("LF_NVRTC_LIBRARY", "/nonexistent/libnvrtc.so", 1);
    cr_assert_null(new_ctx(LF_BACKEND_CUDA, NULL));
    expect_msg(lf_errmsg(NULL), "cannot load /nonexistent/libnvrtc.so (LF_NVRTC_LIBRARY)");
    fake_counters c = counters();
    cr_expect_eq(c.retains, c.releases, "primary context released on failure");
    cr_expect_eq(c.streams_created, c.streams_destroyed);
}

Test(cuda, fake_context_describes_and_releases_its_device) {
    size_t base = lf_debug_live_bytes();
    lf_ctx *ctx = fake_ctx(NULL);
    char name[512];
    int len = lf_ctx_device_name(ctx, name, sizeof name);
    cr_assert_gt(len, 0);
    cr_expect_eq((size_t)len, strlen(name));
    expect_msg(name, "Fake CUDA Device (sm_90, 132 SMs");
    expect_msg(name, "CUDA driver 12.4");
    expect_msg(name, "NVRTC ");
    cr_expect_eq(lf_ctx_device_name(ctx, NULL, 0), len);
    char small[8];
    cr_expect_eq(lf_ctx_device_name(ctx, small, sizeof small), len);
    cr_expect_eq(strlen(small), sizeof small - 1);
    lf_ctx_destroy(ctx);
    fake_counters c = counters();
    cr_expect_eq(c.retains, 1);
    cr_expect_eq(c.releases, 1);
    cr_expect_eq(c.streams_created, 1);
    cr_expect_eq(c.streams_destroyed, 1);
    cr_expect_eq(c.live_bytes, 0);
    cr_expect_eq(lf_debug_live_bytes(), base);
}

Test(cuda, device_name_of_host_contexts) {
    lf_ctx *ctx = new_ctx(LF_BACKEND_CPU, NULL);
    char name[256];
    int len = lf_ctx_device_name(ctx, name, sizeof name);
    cr_expect_gt(len, 0);
    expect_msg(name, "CPU");
    cr_expect_eq(lf_ctx_device_name(NULL, name, sizeof name), -1);
    expect_msg(lf_errmsg(NULL), "ctx_device_name");
    lf_ctx_destroy(ctx);
}

Test(cuda, fake_buffers_round_trip_every_dtype) {
    lf_ctx *ctx = fake_ctx(NULL);
    int64_t n = 1000;
    for (int t = 0; t < LF_NDTYPES; t++) {
        lf_buffer *b = lf_buffer_new(ctx, (lf_dtype)t, 1, &n);
        cr_assert_not_null(b, "%s", lf_errmsg(ctx));
        cr_expect_null(b->data, "device buffers have no host data");
        cr_expect_neq(b->dev, 0);
        size_t bytes = lf_buffer_bytes(b);
        unsigned char *in = malloc(bytes), *out = malloc(bytes);
        cr_assert(in && out);
        /* new buffers are zero (the fake fills fresh memory with 0xAB) */
        cr_assert_eq(lf_buffer_read(b, out, bytes), LF_OK, "%s", lf_errmsg(ctx));
        for (size_t i = 0; i < bytes; i++) cr_assert_eq(out[i], 0, "%s byte %zu", lf_dtype_name((lf_dtype)t), i);
        for (size_t i = 0; i < bytes; i++) in[i] = (unsigned char)(i * 7 + 3);
        cr_assert_eq(lf_buffer_write(b, in, bytes), LF_OK, "%s", lf_errmsg(ctx));
        cr_assert_eq(lf_buffer_read(b, out, bytes), LF_OK);
        for (size_t i = 0; i < bytes; i++) {
            unsigned char want = t == LF_BOOL ? in[i] != 0 : in[i];
            cr_assert_eq(out[i], want, "%s byte %zu", lf_dtype_name((lf_dtype)t), i);
        }
        /* the host checks still hold */
        cr_expect_eq(lf_buffer_write(b, in, bytes - 1), LF_ERR_INVALID);
        cr_expect_eq(lf_buffer_read(b, NULL, bytes), LF_ERR_NULL);
        free(in);
        free(out);
        lf_buffer_free(b);
    }
    /* zero-size buffers take no device memory */
    fake_counters before = counters();
    int64_t zero = 0;
    lf_buffer *z = lf_buffer_new(ctx, LF_F64, 1, &zero);
    cr_assert_not_null(z);
    cr_expect_eq(z->dev, 0);
    cr_expect_eq(lf_buffer_write(z, NULL, 0), LF_OK);
    cr_expect_eq(lf_buffer_read(z, NULL, 0), LF_OK);
    fake_counters after = counters();
    cr_expect_eq(after.allocs, before.allocs);
    cr_expect_eq(after.htod + after.dtoh, before.htod + before.dtoh);
    lf_ctx_destroy(ctx);
    cr_expect_eq(counters().live_bytes, 0);
}

Test(cuda, allocator_size_classes) {
    cr_expect_eq(cuda_alloc_class(1), 512);
    cr_expect_eq(cuda_alloc_class(512), 512);
    cr_expect_eq(cuda_alloc_class(513), 1024);
    cr_expect_eq(cuda_alloc_class(1 << 20), 1 << 20);
    cr_expect_eq(cuda_alloc_class((1 << 20) + 1), (1 << 20) + (1 << 18));
    cr_expect_eq(cuda_alloc_class(3 << 20), 3 << 20);
    cr_expect_eq(cuda_alloc_class((3 << 20) - 1000), 3 << 20);
    cr_expect_eq(cuda_alloc_class((size_t)7 << 30), (size_t)7 << 30);
    cr_expect_eq(cuda_alloc_class(((size_t)7 << 30) + 1), (size_t)8 << 30);
    for (size_t b = 1; b < ((size_t)1 << 40); b = b * 3 + 1) {
        size_t c = cuda_alloc_class(b);
        cr_assert_geq(c, b);
        cr_assert_leq(c, b <= 512 ? 512 : b + b / 4 + 512, "class of %zu is %zu", b, c);
        cr_assert_eq(cuda_alloc_class(c), c, "a class is its own class");
    }
}

Test(cuda, fake_allocator_reuses_freed_blocks) {
    lf_ctx *ctx = fake_ctx(NULL);
    cuda_alloc a0, a1;
    cuda_alloc_stats(ctx, &a0);
    int64_t n1 = 1000, n2 = 900, big1 = 3 << 18, big2 = (3 << 18) - 4000;
    lf_buffer *b = lf_buffer_new(ctx, LF_F32, 1, &n1);
    lf_buffer_free(b);
    b = lf_buffer_new(ctx, LF_F32, 1, &n2); /* 3600 bytes: the same 4 KiB class */
    cr_assert_not_null(b);
    lf_buffer *c = lf_buffer_new(ctx, LF_F32, 1, &big1);
    lf_buffer_free(c);
    c = lf_buffer_new(ctx, LF_F32, 1, &big2);
    cr_assert_not_null(c);
    cuda_alloc_stats(ctx, &a1);
    cr_expect_eq(a1.driver_allocs - a0.driver_allocs, 2, "two driver allocations, two reuses");
    cr_expect_eq(a1.reuses - a0.reuses, 2);
    /* a reused block is zeroed again */
    float got[900];
    cr_assert_eq(lf_buffer_read(b, got, sizeof got), LF_OK);
    for (int i = 0; i < 900; i++) cr_assert_eq(got[i], 0.0f);
    lf_ctx_destroy(ctx);
    fake_counters fc = counters();
    cr_expect_eq(fc.live_bytes, 0);
    cr_expect_eq(fc.bad_frees, 0);
}

Test(cuda, fake_out_of_device_memory_keeps_the_context_usable) {
    setenv("FAKE_CUDA_MEM", "1048576", 1); /* a 1 MiB device */
    lf_ctx *ctx = fake_ctx(NULL);
    int64_t n = 150000; /* 600,000 bytes: class 600,064 */
    lf_buffer *a = lf_buffer_new(ctx, LF_F32, 1, &n);
    cr_assert_not_null(a, "%s", lf_errmsg(ctx));
    lf_buffer *b = lf_buffer_new(ctx, LF_F32, 1, &n);
    cr_assert_null(b);
    cr_expect_str_eq(lf_errmsg(ctx), "buffer_new: cuda: out of device memory (600000 bytes)");
    /* the cache holds a's block once freed: a request of another class gets
       it back from the cache (freed, then the allocation retried) */
    lf_buffer_free(a);
    int64_t m = 200000; /* 800,000 bytes */
    fake_counters before = counters();
    lf_buffer *c = lf_buffer_new(ctx, LF_F32, 1, &m);
    cr_assert_not_null(c, "%s", lf_errmsg(ctx));
    fake_counters after = counters();
    cr_expect_eq(after.frees - before.frees, 1, "the cached block went back to the driver");
    float v[4] = {1, 2, 3, 4}, w[4];
    int64_t four = 4;
    lf_buffer *d = lf_buffer_new(ctx, LF_F32, 1, &four);
    cr_assert_not_null(d, "%s", lf_errmsg(ctx));
    cr_assert_eq(lf_buffer_write(d, v, sizeof v), LF_OK);
    cr_assert_eq(lf_buffer_read(d, w, sizeof w), LF_OK);
    cr_expect_arr_eq(v, w, sizeof v);
    lf_ctx_destroy(ctx);
    cr_expect_eq(counters().live_bytes, 0);
}

/* x (n floats, host values i/4 - 3), out (sentinel -777) and y = exp(x)*2+1
 * and s = sum(x) on ctx. */
typedef struct fixture {
    lf_buffer *xb, *yb, *sb;
    lf_graph *g;
    lf_node *y, *s;
} fixture;

static fixture make_fixture(lf_ctx *ctx, int64_t n) {
    fixture f;
    float *host = malloc((size_t)n * sizeof *host);
    cr_assert_not_null(host);
    for (int64_t i = 0; i < n; i++) host[i] = (float)i * 0.25f - 3.0f;
    f.xb = lf_buffer_new(ctx, LF_F32, 1, &n);
    f.yb = lf_buffer_new(ctx, LF_F32, 1, &n);
    f.sb = lf_buffer_new(ctx, LF_F32, 0, NULL);
    cr_assert(f.xb && f.yb && f.sb, "%s", lf_errmsg(ctx));
    cr_assert_eq(lf_buffer_write(f.xb, host, (size_t)n * sizeof *host), LF_OK);
    for (int64_t i = 0; i < n; i++) host[i] = -777.0f;
    cr_assert_eq(lf_buffer_write(f.yb, host, (size_t)n * sizeof *host), LF_OK);
    cr_assert_eq(lf_buffer_write(f.sb, host, sizeof *host), LF_OK);
    free(host);
    f.g = lf_graph_new(ctx);
    lf_node *x = lf_input(f.g, f.xb);
    f.y = lf_add(f.g, lf_mul(f.g, lf_exp(f.g, x), lf_const(f.g, LF_F32, 2.0)), lf_const(f.g, LF_F32, 1.0));
    f.s = lf_reduce(f.g, LF_RED_SUM, x, 0, NULL, false);
    cr_assert(f.y && f.s, "%s", lf_graph_errmsg(f.g));
    return f;
}

static lf_status fixture_eval(fixture *f) {
    return lf_eval(f->g, 2, (lf_node *[]){f->y, f->s}, (lf_buffer *[]){f->yb, f->sb});
}

static void expect_sentinel(const lf_buffer *b) {
    int64_t n = lf_buffer_numel(b);
    float *got = malloc((size_t)n * sizeof *got);
    cr_assert_not_null(got);
    cr_assert_eq(lf_buffer_read(b, got, (size_t)n * sizeof *got), LF_OK);
    for (int64_t i = 0; i < n; i++) cr_assert_eq(got[i], -777.0f, "a failed eval wrote element %lld", (long long)i);
    free(got);
}

Test(cuda, fake_module_load_failure_is_a_backend_error) {
    setenv("FAKE_CUDA_LOAD", "200", 1);
    char *dir = tmp_dir();
    lf_ctx *ctx = fake_ctx(dir);
    fixture f = make_fixture(ctx, 1000);
    cr_assert_eq(fixture_eval(&f), LF_ERR_BACKEND);
    const char *m = lf_errmsg(ctx);
    expect_msg(m, "eval: loading CUDA kernel");
    expect_msg(m, "CUDA_ERROR_INVALID_IMAGE: device kernel image is invalid");
    expect_sentinel(f.yb);
    expect_sentinel(f.sb);
    lf_eval_stats st;
    lf_ctx_last_stats(ctx, &st);
    cr_expect_eq(st.kernels, 0, "statistics are zero after a failed eval");
    cr_expect_eq(counters().launches, 0);
    /* load first, then store: the image the driver refused is not cached
       (issue 12, item 3) */
    cr_expect_leq(tu_dir_entries(dir, false), 0, "a module the driver refused was stored on disk");
    lf_ctx_destroy(ctx);
    cr_expect_eq(counters().live_bytes, 0);
    rm_dir(dir);
}

Test(cuda, fake_launch_failure_is_a_backend_error) {
    setenv("FAKE_CUDA_LAUNCH", "719", 1);
    lf_ctx *ctx = fake_ctx(NULL);
    fixture f = make_fixture(ctx, 1000);
    cr_assert_eq(fixture_eval(&f), LF_ERR_BACKEND);
    const char *m = lf_errmsg(ctx);
    expect_msg(m, "eval: launching CUDA kernel 0");
    expect_msg(m, "CUDA_ERROR_LAUNCH_FAILED");
    expect_sentinel(f.yb); /* the first launch failed: nothing ran */
    expect_sentinel(f.sb);
    lf_ctx_destroy(ctx);
    cr_expect_eq(counters().live_bytes, 0);
}

Test(cuda, fake_program_module_and_disk_caches) {
    char *dir = tmp_dir();
    lf_ctx *ctx = fake_ctx(dir);
    fixture f = make_fixture(ctx, 100000);
    lf_eval_stats st;
    cr_assert_eq(fixture_eval(&f), LF_OK, "%s", lf_errmsg(ctx));
    lf_ctx_last_stats(ctx, &st);
    cr_expect_geq(st.kernels, 1);
    cr_expect_eq(st.kernels_compiled, st.kernels, "first eval compiles every kernel");
    cr_expect(!st.program_reused);
    cr_expect_gt(st.compile_seconds, 0);
    int kernels = st.kernels;
    fake_counters c1 = counters();
    cr_expect_eq(c1.loads, kernels);
    cr_expect_gt(c1.launches, 0);
    long launches_per_eval = c1.launches;
    /* the same outputs into the same buffers: only launches */
    cr_assert_eq(fixture_eval(&f), LF_OK, "%s", lf_errmsg(ctx));
    lf_ctx_last_stats(ctx, &st);
    cr_expect(st.program_reused);
    cr_expect_eq(st.kernels_compiled + st.kernels_memory_hits + st.kernels_disk_hits, 0);
    cr_expect_eq(st.kernels, kernels);
    fake_counters c2 = counters();
    cr_expect_eq(c2.launches - c1.launches, launches_per_eval);
    cr_expect_eq(c2.allocs, c1.allocs, "a cached re-eval allocates nothing");
    cr_expect_eq(c2.get_functions, c1.get_functions, "a cached re-eval looks nothing up");
    cr_expect_eq(c2.loads, c1.loads);
    /* host overhead of a cached re-eval (launches cost nothing on the fake) */
    int reps = 2000;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < reps; i++) cr_assert_eq(fixture_eval(&f), LF_OK);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double us = ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / reps / 1e3;
    tu_note("test_cuda: cached re-eval, %d kernel(s), %ld launch(es): %.2f us of host time (fake driver)\n",
            kernels, launches_per_eval, us);
    /* other output buffers: planned again, no compile */
    int64_t n = 100000;
    lf_buffer *y2 = lf_buffer_new(ctx, LF_F32, 1, &n);
    cr_assert_eq(lf_eval(f.g, 2, (lf_node *[]){f.y, f.s}, (lf_buffer *[]){y2, f.sb}), LF_OK, "%s", lf_errmsg(ctx));
    lf_ctx_last_stats(ctx, &st);
    cr_expect(st.program_reused);
    cr_expect_eq(st.kernels_compiled, 0);
    /* the same structure in a new graph: the in-memory module cache */
    fixture f2 = make_fixture(ctx, 5000);
    cr_assert_eq(fixture_eval(&f2), LF_OK, "%s", lf_errmsg(ctx));
    lf_ctx_last_stats(ctx, &st);
    cr_expect(!st.program_reused);
    cr_expect_eq(st.kernels_compiled, 0, "sizes are parameters: nothing to compile");
    cr_expect_eq(st.kernels_memory_hits, kernels);
    cr_expect_eq(counters().loads, c1.loads);
    lf_ctx_destroy(ctx);
    /* a new context: the disk cache */
    ctx = fake_ctx(dir);
    fixture f3 = make_fixture(ctx, 777);
    cr_assert_eq(fixture_eval(&f3), LF_OK, "%s", lf_errmsg(ctx));
    lf_ctx_last_stats(ctx, &st);
    cr_expect_eq(st.kernels_compiled, 0);
    cr_expect_eq(st.kernels_disk_hits, kernels);
    cr_expect_gt(tu_dir_entries(dir, false), 0);
    lf_ctx_destroy(ctx);
    fake_counters c3 = counters();
    cr_expect_eq(c3.live_bytes, 0);
    cr_expect_eq(c3.loads, c3.unloads);
    cr_expect_eq(c3.bad_frees, 0);
    rm_dir(dir);
}

/* A new value of a constant (lf_scalar_set) on a device context: the
 * program is reused, nothing is compiled, looked up or allocated; only the
 * launches happen (the argument words are patched in place). */
Test(cuda, fake_scalar_set_launches_without_compiling) {
    lf_ctx *ctx = fake_ctx(NULL);
    int64_t n = 50000;
    lf_buffer *xb = lf_buffer_new(ctx, LF_F32, 1, &n), *yb = lf_buffer_new(ctx, LF_F32, 1, &n);
    lf_buffer *sb = lf_buffer_new(ctx, LF_F32, 0, NULL);
    cr_assert(xb && yb && sb, "%s", lf_errmsg(ctx));
    lf_graph *g = lf_graph_new(ctx);
    lf_node *x = lf_input(g, xb);
    lf_node *c = lf_const(g, LF_F32, 2.0), *f = lf_fill(g, LF_F32, 1.0, 1, &n);
    lf_node *y = lf_add(g, lf_mul(g, x, c), f);
    lf_node *r = lf_mul(g, lf_reduce(g, LF_RED_SUM, lf_mul(g, x, c), 0, NULL, false), c);
    cr_assert_eq(lf_graph_status(g), LF_OK, "%s", lf_graph_errmsg(g));
    lf_node *outs[2] = {y, r};
    lf_buffer *dsts[2] = {yb, sb};
    lf_eval_stats st;
    cr_assert_eq(lf_eval(g, 2, outs, dsts), LF_OK, "%s", lf_errmsg(ctx));
    lf_ctx_last_stats(ctx, &st);
    cr_expect_eq(st.kernels_compiled + st.kernels_disk_hits, st.kernels);
    fake_counters c0 = counters();
    cr_assert_eq(lf_eval(g, 2, outs, dsts), LF_OK, "%s", lf_errmsg(ctx));
    fake_counters c1 = counters();
    long per_eval = c1.launches - c0.launches;
    cr_expect_gt(per_eval, 0);
    static const double values[] = {0.5, -0.0, NAN, INFINITY, -1e30, 3.0};
    for (int i = 0; i < 6; i++) {
        cr_assert_eq(lf_scalar_set(g, c, values[i]), LF_OK, "%s", lf_errmsg(ctx));
        cr_assert_eq(lf_scalar_set(g, f, -values[i]), LF_OK, "%s", lf_errmsg(ctx));
        cr_assert_eq(lf_eval(g, 2, outs, dsts), LF_OK, "%s", lf_errmsg(ctx));
        lf_ctx_last_stats(ctx, &st);
        cr_expect(st.program_reused, "value %g: the program was not reused", values[i]);
        cr_expect_eq(st.kernels_compiled + st.kernels_memory_hits + st.kernels_disk_hits, 0,
                     "value %g: kernels compiled or looked up", values[i]);
    }
    fake_counters c2 = counters();
    cr_expect_eq(c2.launches - c1.launches, 6 * per_eval);
    cr_expect_eq(c2.loads, c1.loads, "a new value loads no module");
    cr_expect_eq(c2.get_functions, c1.get_functions, "a new value looks nothing up");
    cr_expect_eq(c2.allocs, c1.allocs, "a new value allocates nothing");
    lf_graph_free(g);
    lf_ctx_destroy(ctx);
    cr_expect_eq(counters().live_bytes, 0);
}

/* Two output sets of one graph, alternating, into other buffers each time:
 * each finds its own program (no plan, no module load, no lookup). */
Test(cuda, fake_program_cache_alternates_output_sets) {
    lf_ctx *ctx = fake_ctx(NULL);
    fixture f = make_fixture(ctx, 20000);
    lf_eval_stats st;
    cr_assert_eq(lf_eval(f.g, 1, &f.y, &f.yb), LF_OK, "%s", lf_errmsg(ctx));
    cr_assert_eq(lf_eval(f.g, 1, &f.s, &f.sb), LF_OK, "%s", lf_errmsg(ctx));
    fake_counters c0 = counters();
    for (int r = 0; r < 4; r++) {
        int64_t n = 20000;
        lf_buffer *y2 = lf_buffer_new(ctx, LF_F32, 1, &n), *s2 = lf_buffer_new(ctx, LF_F32, 0, NULL);
        cr_assert_eq(lf_eval(f.g, 1, &f.y, &y2), LF_OK, "%s", lf_errmsg(ctx));
        lf_ctx_last_stats(ctx, &st);
        cr_expect(st.program_reused, "round %d: y replanned", r);
        cr_assert_eq(lf_eval(f.g, 1, &f.s, &s2), LF_OK, "%s", lf_errmsg(ctx));
        lf_ctx_last_stats(ctx, &st);
        cr_expect(st.program_reused, "round %d: s replanned", r);
        lf_buffer_free(y2);
        lf_buffer_free(s2);
    }
    fake_counters c1 = counters();
    cr_expect_eq(c1.loads, c0.loads, "alternating output sets loaded modules");
    cr_expect_gt(c1.launches, c0.launches);
    lf_graph_free(f.g);
    lf_ctx_destroy(ctx);
    cr_expect_eq(counters().live_bytes, 0, "a cached program outlived its graph");
}

/* The argument words patched after lf_scalar_set (cg_fill_scalars,
 * cg_cuda_fill_scalar_args) are the words a fresh fill makes for the new
 * values: no driver needed. */
Test(cuda, scalar_args_follow_lf_scalar_set) {
    lf_ctx *ctx = new_ctx(LF_BACKEND_REFERENCE, NULL);
    cr_assert_not_null(ctx);
    int64_t n = 1000;
    lf_buffer *xb = lf_buffer_new(ctx, LF_F32, 1, &n);
    lf_graph *g = lf_graph_new(ctx);
    lf_node *x = lf_input(g, xb);
    lf_node *cs[4] = {lf_const(g, LF_F32, 2.0), lf_const(g, LF_F64, -1.0), lf_const(g, LF_I64, 3),
                      lf_fill(g, LF_BOOL, 1, 1, &n)};
    lf_node *y = lf_select(g, cs[3], lf_add(g, lf_mul(g, x, cs[0]), cs[1]), lf_cast(g, cs[2], LF_F64));
    lf_node *r = lf_reduce(g, LF_RED_MAX, lf_mul(g, y, cs[1]), 0, NULL, false);
    cr_assert_eq(lf_graph_status(g), LF_OK, "%s", lf_graph_errmsg(g));
    fuse_schedule *s = NULL;
    cr_assert_eq(fuse_plan(g, 2, (lf_node *[]){y, r}, true, &s), LF_OK, "%s", lf_errmsg(ctx));
    int with_scalars = 0;
    for (int k = 0; k < s->nkernels; k++) {
                cg_layout *lay = cg_layout_new(s, k);
        cr_assert(lay != NULL);
        with_scalars += lay->kernel->nscalars > 0;
        int64_t P[512], P2[512];
        uint64_t addr[CG_MAX_BUFS], words[1024], fresh[1024];
        cr_assert_lt(lay->nparams, 512);
        for (int b = 0; b < lay->nbufs; b++) addr[b] = 0x10000u * (uint64_t)(b + 1);
        cg_fill_params(lay, P);
        cg_cuda_plan plan;
        cg_cuda_plan_kernel(lay, P, addr, 132, &plan);
        cr_assert_lt(plan.nwords, 1024);
        cg_cuda_fill_args(lay, &plan, P, addr, 0x900000, words);
        cr_assert_eq(lf_scalar_set(g, cs[0], -0.0), LF_OK);
        cr_assert_eq(lf_scalar_set(g, cs[1], NAN), LF_OK);
        cr_assert_eq(lf_scalar_set(g, cs[2], -7), LF_OK);
        cr_assert_eq(lf_scalar_set(g, cs[3], 0), LF_OK);
        cg_fill_scalars(lay, P);
        cg_cuda_fill_scalar_args(lay, P, words);
        cg_fill_params(lay, P2);
        cg_cuda_fill_args(lay, &plan, P2, addr, 0x900000, fresh);
        cr_expect(memcmp(P, P2, (size_t)lay->nparams * sizeof *P) == 0, "kernel %d: P differs", k);
        cr_expect(memcmp(words, fresh, (size_t)plan.nwords * sizeof *words) == 0, "kernel %d: words differ", k);
        for (int j = 0; j < 4; j++) lf_scalar_set(g, cs[j], 2.0); /* back, for the next kernel */
        graph_free(lay);
    }
    cr_expect_gt(with_scalars, 0);
    fuse_schedule_free(s);
    lf_graph_free(g);
    lf_ctx_destroy(ctx);
}

/* An output written into an input it reads only where it writes runs in
 * place (no device copy, no temporary); one that reads it elsewhere (x[::-1])
 * goes through a temporary that the allocator's cache gives back each eval. */
Test(cuda, fake_output_that_is_also_an_input) {
    lf_ctx *ctx = fake_ctx(NULL);
    int64_t n = 4096;
    lf_buffer *xb = lf_buffer_new(ctx, LF_F32, 1, &n);
    lf_graph *g = lf_graph_new(ctx);
    lf_node *x = lf_input(g, xb);
    lf_node *y = lf_mul(g, x, lf_const(g, LF_F32, 3.0));
    lf_node *yrev = lf_mul(g, lf_slice(g, x, 0, LF_NONE, LF_NONE, -1), lf_const(g, LF_F32, 3.0));
    cuda_alloc a0, a1;
    lf_eval_stats st;
    fake_counters c0 = counters();
    cr_assert_eq(lf_eval(g, 1, &y, &xb), LF_OK, "%s", lf_errmsg(ctx));
    cr_assert_eq(lf_ctx_last_stats(ctx, &st), LF_OK);
    cr_expect_eq(st.outputs_in_place, 1);
    cr_expect_eq(st.bytes_staged, 0);
    cr_expect_eq(counters().dtod - c0.dtod, 0, "x*3 into x: no device copy");
    cr_assert_eq(lf_eval(g, 1, &yrev, &xb), LF_OK, "%s", lf_errmsg(ctx));
    cuda_alloc_stats(ctx, &a0);
    c0 = counters();
    cr_assert_eq(lf_eval(g, 1, &yrev, &xb), LF_OK, "%s", lf_errmsg(ctx));
    cuda_alloc_stats(ctx, &a1);
    cr_assert_eq(lf_ctx_last_stats(ctx, &st), LF_OK);
    cr_expect_eq(st.outputs_in_place, 0);
    cr_expect_eq(st.bytes_staged, (size_t)n * 4);
    cr_expect_eq(counters().dtod - c0.dtod, 1, "x[::-1]*3 into x: one device copy per eval");
    cr_expect_eq(a1.used_bytes, a0.used_bytes, "the temporary went back to the cache");
    cr_expect_eq(a1.driver_allocs, a0.driver_allocs, "and was reused");
    lf_graph_free(g);
    lf_ctx_destroy(ctx);
    cr_expect_eq(counters().live_bytes, 0);
}

/* An in-place output (x*0.5 + 1 into x) next to a gather whose index check
 * runs on the device: the check can fail the eval after the kernels ran, so
 * x must not be written in place (a failed eval changes no output); it is
 * staged through a temporary and copied once the check passed. The fake
 * driver runs no kernel, so the check passes here: what is tested is the
 * decision (tests/test_errors.c's in_place_output_survives_failed_gather
 * runs the failing eval on a device). */
Test(cuda, fake_in_place_output_waits_for_index_checks) {
    lf_ctx *ctx = fake_ctx(NULL);
    int64_t n = 4096, m = 3;
    lf_buffer *xb = lf_buffer_new(ctx, LF_F32, 1, &n);
    lf_buffer *ib = lf_buffer_new(ctx, LF_I64, 1, &m);
    lf_buffer *ob = lf_buffer_new(ctx, LF_F32, 1, &m);
    lf_graph *g = lf_graph_new(ctx);
    lf_node *x = lf_input(g, xb);
    lf_node *y = lf_add(g, lf_mul(g, x, lf_const(g, LF_F32, 0.5)), lf_const(g, LF_F32, 1));
    lf_node *t = lf_gather(g, y, 0, lf_input(g, ib)); /* runs after y's kernel */
    lf_eval_stats st;
    cr_assert_eq(lf_eval(g, 1, &y, &xb), LF_OK, "%s", lf_errmsg(ctx));
    cr_assert_eq(lf_ctx_last_stats(ctx, &st), LF_OK);
    cr_expect_eq(st.outputs_in_place, 1, "alone, x*0.5 + 1 into x runs in place");
    cr_assert_eq(lf_eval(g, 2, (lf_node *[]){y, t}, (lf_buffer *[]){xb, ob}), LF_OK, "%s", lf_errmsg(ctx));
    cr_assert_eq(lf_ctx_last_stats(ctx, &st), LF_OK);
    cr_expect_eq(st.outputs_in_place, 0, "beside a gather's index check, x is not written in place");
    cr_expect_geq(st.bytes_staged, (size_t)n * 4, "x is staged and copied after the check");
    lf_graph_free(g);
    lf_buffer_free(xb), lf_buffer_free(ib), lf_buffer_free(ob);
    lf_ctx_destroy(ctx);
    cr_expect_eq(counters().live_bytes, 0);
}

/* Device buffers of ctx: x (f32, values i*0.37 mod 5 - 2.5, with ties) and
 * a sentinel-filled output of each node. */
static lf_buffer *sentinel_like(lf_ctx *ctx, const lf_node *n) {
    lf_buffer *b = lf_buffer_new_like(ctx, n);
    cr_assert_not_null(b, "%s", lf_errmsg(ctx));
    size_t bytes = lf_buffer_bytes(b);
    unsigned char *h = malloc(bytes + 1);
    cr_assert_not_null(h);
    memset(h, 0x5c, bytes);
    cr_assert_eq(lf_buffer_write(b, h, bytes), LF_OK);
    free(h);
    return b;
}

static void expect_bytes(const lf_buffer *b, unsigned char v) {
    size_t bytes = lf_buffer_bytes(b);
    unsigned char *h = malloc(bytes + 1);
    cr_assert_not_null(h);
    cr_assert_eq(lf_buffer_read(b, h, bytes), LF_OK);
    for (size_t i = 0; i < bytes; i++) cr_assert_eq(h[i], v, "a failed eval wrote byte %zu", i);
    free(h);
}

static lf_buffer *sort_input(lf_ctx *ctx, int64_t rows, int64_t n) {
    int64_t shape[2] = {rows, n};
    float *h = malloc((size_t)(rows * n) * sizeof *h);
    cr_assert_not_null(h);
    for (int64_t i = 0; i < rows * n; i++) h[i] = (float)fmod((double)i * 0.37, 5.0) - 2.5f;
    lf_buffer *b = lf_buffer_new(ctx, LF_F32, 2, shape);
    cr_assert_not_null(b, "%s", lf_errmsg(ctx));
    cr_assert_eq(lf_buffer_write(b, h, (size_t)(rows * n) * sizeof *h), LF_OK);
    free(h);
    return b;
}

/* A top-k (values and indices, the key from a map) and an argsort go through
 * the device path: the key pass, the sort module's launches and the output
 * pass, counted on the fake driver; nothing is copied to the host (the old
 * host fallback read the inputs back); the module loads once per context;
 * a cached re-eval allocates and looks up nothing on the driver. */
/* Both sort tests compile the sort module with the real NVRTC, which
 * under valgrind takes many minutes: CI's valgrind pass skips them (its
 * normal and sanitizer passes run them). */
static void skip_sort_module_on_valgrind(void) {
    if (tu_on_valgrind()) cr_skip_test("NVRTC compiling the sort module under valgrind: run in the other passes");
}

Test(cuda, fake_sorts_launch_on_the_device) {
    skip_sort_module_on_valgrind();
    char *dir = tmp_dir();
    lf_ctx *ctx = fake_ctx(dir);
    lf_buffer *xb = sort_input(ctx, 6, 300);
    lf_graph *g = lf_graph_new(ctx);
    lf_node *x = lf_input(g, xb), *key = lf_map(g, lf_fn_parse(g, "(x) -> x * x - 1"), x);
    lf_node *v = lf_topk(g, key, 5, 1, true), *ix = lf_argtopk(g, key, 5, 1, true);
    cr_assert(v && ix, "%s", lf_graph_errmsg(g));
    lf_buffer *vb = sentinel_like(ctx, v), *ib = sentinel_like(ctx, ix);
    fake_counters c0 = counters();
    cr_assert_eq(lf_eval(g, 2, (lf_node *[]){v, ix}, (lf_buffer *[]){vb, ib}), LF_OK, "%s", lf_errmsg(ctx));
    fake_counters c1 = counters();
    lf_eval_stats st;
    cr_assert_eq(lf_ctx_last_stats(ctx, &st), LF_OK);
    cr_expect_eq(st.kernels, 1, "values and indices: one sort kernel");
    cr_expect_eq(st.kernels_compiled, 2, "the kernel and the sort module");
    cr_expect_eq(c1.loads - c0.loads, 2);
    /* 6 rows of 300: the BLOCK path, one launch */
    cr_expect_eq(c1.launches - c0.launches, 3, "key pass, block sort, output pass");
    cr_expect_eq(c1.last_grid[0], 1u, "the output pass: 30 entries, one block");
    cr_expect_eq(c1.last_block[0], 256u);
    cr_expect_eq(c1.dtoh - c0.dtoh, 0, "nothing went to the host");
    cr_expect_eq(c1.htod - c0.htod, 0);
    cr_assert_eq(lf_eval(g, 2, (lf_node *[]){v, ix}, (lf_buffer *[]){vb, ib}), LF_OK, "%s", lf_errmsg(ctx));
    fake_counters c2 = counters();
    cr_assert_eq(lf_ctx_last_stats(ctx, &st), LF_OK);
    cr_expect(st.program_reused);
    cr_expect_eq(st.kernels_compiled + st.kernels_disk_hits + st.kernels_memory_hits, 0);
    cr_expect_eq(c2.launches - c1.launches, 3);
    cr_expect_eq(c2.allocs, c1.allocs, "a cached re-eval takes its sort memory from the cache");
    cr_expect_eq(c2.get_functions, c1.get_functions, "and looks nothing up");
    cr_expect_eq(c2.loads, c1.loads);
    /* a long argsort: the RADIX path (4 passes of 3 launches); the module is
       loaded already */
    lf_buffer *yb = sort_input(ctx, 2, 5000);
    lf_graph *g2 = lf_graph_new(ctx);
    lf_node *a = lf_argsort(g2, lf_input(g2, yb), 1, false);
    cr_assert_not_null(a, "%s", lf_graph_errmsg(g2));
    lf_buffer *ab = sentinel_like(ctx, a);
    cr_assert_eq(lf_eval(g2, 1, &a, &ab), LF_OK, "%s", lf_errmsg(ctx));
    fake_counters c3 = counters();
    cr_assert_eq(lf_ctx_last_stats(ctx, &st), LF_OK);
    cr_expect_eq(st.kernels_compiled, 1, "only the key pass: the module stays loaded");
    cr_expect_eq(c3.loads - c2.loads, 1);
    cr_expect_eq(c3.launches - c2.launches, 1 + 12 + 1, "key pass, 4 radix passes of 3 launches, output pass");
    cr_expect_eq(c3.dtoh - c2.dtoh, 0);
    lf_graph_free(g2);
    lf_buffer_free(yb);
    lf_buffer_free(ab);
    lf_graph_free(g);
    lf_buffer_free(xb);
    lf_buffer_free(vb);
    lf_buffer_free(ib);
    lf_ctx_destroy(ctx);
    /* a new context: the module comes from the disk cache */
    ctx = fake_ctx(dir);
    xb = sort_input(ctx, 6, 300);
    g = lf_graph_new(ctx);
    key = lf_map(g, lf_fn_parse(g, "(x) -> x * x - 1"), lf_input(g, xb));
    v = lf_topk(g, key, 5, 1, true), ix = lf_argtopk(g, key, 5, 1, true);
    cr_assert(v && ix, "%s", lf_graph_errmsg(g));
    vb = sentinel_like(ctx, v);
    ib = sentinel_like(ctx, ix);
    cr_assert_eq(lf_eval(g, 2, (lf_node *[]){v, ix}, (lf_buffer *[]){vb, ib}), LF_OK, "%s", lf_errmsg(ctx));
    cr_assert_eq(lf_ctx_last_stats(ctx, &st), LF_OK);
    cr_expect_eq(st.kernels_compiled, 0);
    cr_expect_eq(st.kernels_disk_hits, 2, "the key pass and the module");
    lf_graph_free(g);
    lf_buffer_free(xb);
    lf_buffer_free(vb);
    lf_buffer_free(ib);
    lf_ctx_destroy(ctx);
    fake_counters c4 = counters();
    cr_expect_eq(c4.live_bytes, 0);
    cr_expect_eq(c4.loads, c4.unloads);
    cr_expect_eq(c4.bad_frees, 0);
    rm_dir(dir);
}

/* The sort's memory (keys and values, positions, the radix scratch) is
 * taken before the first launch: when the device cannot hold it, the eval
 * fails with LF_ERR_NOMEM, launches nothing and leaves the output as it
 * was; the context stays usable for a smaller sort. */
Test(cuda, fake_sort_out_of_device_memory_launches_nothing) {
    skip_sort_module_on_valgrind();
    setenv("FAKE_CUDA_MEM", "1500000", 1);
    lf_ctx *ctx = fake_ctx(NULL);
    lf_buffer *xb = sort_input(ctx, 2, 20000); /* 160 KB */
    lf_graph *g = lf_graph_new(ctx);
    lf_node *a = lf_argsort(g, lf_input(g, xb), 1, false);
    lf_buffer *ab = sentinel_like(ctx, a); /* 320 KB; the radix scratch alone is about 1 MB */
    fake_counters c0 = counters();
    lf_status st = lf_eval(g, 1, &a, &ab);
    cr_assert_eq(st, LF_ERR_NOMEM, "%s: %s", lf_status_name(st), lf_errmsg(ctx));
    expect_msg(lf_errmsg(ctx), "eval: sort: cuda: out of device memory");
    cr_expect_eq(counters().launches - c0.launches, 0, "nothing was launched");
    expect_bytes(ab, 0x5c);
    /* a top-3 of the same rows (the SELECT path, no scratch) fits */
    lf_node *v = lf_topk(g, lf_input(g, xb), 3, 1, false);
    cr_assert_not_null(v, "%s", lf_graph_errmsg(g));
    lf_buffer *vb = sentinel_like(ctx, v);
    cr_assert_eq(lf_eval(g, 1, &v, &vb), LF_OK, "%s", lf_errmsg(ctx));
    cr_expect_eq(counters().launches - c0.launches, 3);
    lf_graph_free(g);
    lf_buffer_free(xb);
    lf_buffer_free(ab);
    lf_buffer_free(vb);
    lf_ctx_destroy(ctx);
    cr_expect_eq(counters().live_bytes, 0);
    cr_expect_eq(counters().bad_frees, 0);
}

Test(cuda, fake_host_evaluators_on_a_device_context) {
    /* tests switch ctx->backend to compare with the oracle: on a device
       context that runs on host copies of the inputs */
    lf_ctx *ctx = fake_ctx(NULL);
    for (int b = 0; b < 2; b++) {
        ctx->backend = b ? LF_BACKEND_CPU : LF_BACKEND_REFERENCE;
        check_affine(ctx, 3000);
    }
    ctx->backend = LF_BACKEND_CUDA;
    lf_ctx_destroy(ctx);
    cr_expect_eq(counters().live_bytes, 0);
}

static int wrap_released;
static void count_wrap_release(void *arg) {
    (void)arg;
    wrap_released++;
}

/* lf_buffer_wrap and DLPack on a device context: the wrapped address is
 * the device memory itself (written and read through another buffer over
 * it), a strided wrap reads back gathered, outputs land in place with the
 * host evaluators and with the CUDA path's aliasing (the fake runs no
 * kernel), release is called once and the allocator never frees the user's
 * memory; DLPack exports kDLCUDA at that address and refuses kDLCPU. */
Test(cuda, fake_wrapped_device_memory_and_dlpack) {
    lf_ctx *ctx = fake_ctx(NULL);
    int64_t n = 8;
    lf_buffer *owner = lf_buffer_new(ctx, LF_F32, 1, &n);
    cr_assert_not_null(owner, "%s", lf_errmsg(ctx));
    void *dev = (void *)(uintptr_t)owner->dev;
    wrap_released = 0;
    lf_buffer *w = lf_buffer_wrap(ctx, LF_F32, 1, &n, NULL, dev, count_wrap_release, NULL);
    cr_assert_not_null(w, "%s", lf_errmsg(ctx));
    cr_expect_eq(w->dev, owner->dev);
    cr_expect_null(w->data, "device memory has no host pointer");
    float vals[8] = {1, 2, 3, 4, 5, 6, 7, 8}, got[8];
    cr_assert_eq(lf_buffer_write(w, vals, sizeof vals), LF_OK, "%s", lf_errmsg(ctx));
    cr_assert_eq(lf_buffer_read(owner, got, sizeof got), LF_OK, "%s", lf_errmsg(ctx));
    cr_expect(memcmp(got, vals, sizeof got) == 0, "written through the wrap, read through the owner");
    lf_buffer *rev = lf_buffer_wrap(ctx, LF_F32, 1, &n, (int64_t[]){-1}, (float *)dev + 7, NULL, NULL);
    cr_assert_not_null(rev, "%s", lf_errmsg(ctx));
    cr_assert_eq(lf_buffer_read(rev, got, sizeof got), LF_OK, "%s", lf_errmsg(ctx));
    for (int i = 0; i < 8; i++) cr_expect_eq(got[i], vals[7 - i], "reversed read, element %d", i);
    /* the host evaluators write the wrapped output in place */
    lf_graph *g = lf_graph_new(ctx);
    lf_node *y = lf_mul(g, lf_input(g, rev), lf_const(g, LF_F32, 2.0));
    ctx->backend = LF_BACKEND_REFERENCE;
    cr_assert_eq(lf_eval(g, 1, &y, &w), LF_OK, "%s", lf_errmsg(ctx));
    ctx->backend = LF_BACKEND_CUDA;
    cr_assert_eq(lf_buffer_read(owner, got, sizeof got), LF_OK);
    for (int i = 0; i < 8; i++) cr_expect_eq(got[i], 2 * vals[7 - i], "y[%d]", i);
    /* on the CUDA path the output overlaps its input: staged (one device copy) */
    fake_counters c0 = counters();
    cr_assert_eq(lf_eval(g, 1, &y, &w), LF_OK, "%s", lf_errmsg(ctx));
    cr_expect_eq(counters().dtod - c0.dtod, 1, "an output over memory the program reads is staged");
    /* DLPack */
    DLManagedTensor *t = NULL;
    cr_assert_eq(lf_buffer_to_dlpack(w, &t), LF_OK, "%s", lf_errmsg(ctx));
    cr_expect_eq(t->dl_tensor.device.device_type, kDLCUDA);
    cr_expect_eq(t->dl_tensor.device.device_id, 0);
    cr_expect_eq(t->dl_tensor.data, dev);
    lf_buffer *back = lf_buffer_from_dlpack(ctx, t);
    cr_assert_not_null(back, "%s", lf_errmsg(ctx));
    cr_expect_eq(back->dev, owner->dev);
    lf_buffer_free(back); /* runs the export's deleter */
    static float host[8];
    DLManagedTensor cpu_t = {.dl_tensor = {.data = host, .device = {kDLCPU, 0}, .ndim = 1,
                                           .dtype = {kDLFloat, 32, 1}, .shape = &n}};
    cr_expect_null(lf_buffer_from_dlpack(ctx, &cpu_t));
    cr_expect_str_eq(lf_errmsg(ctx), "buffer_from_dlpack: the tensor is on device type 1, device 0; this cuda "
                                     "context takes device type 2 (kDLCUDA), device 0");
    cuda_alloc a0, a1;
    cuda_alloc_stats(ctx, &a0);
    lf_graph_free(g);
    lf_buffer_free(rev);
    lf_buffer_free(w);
    cuda_alloc_stats(ctx, &a1);
    cr_expect_eq(wrap_released, 1);
    cr_expect_eq(a1.used_bytes, a0.used_bytes, "the allocator never frees wrapped memory");
    lf_buffer_free(owner);
    lf_ctx_destroy(ctx);
    cr_expect_eq(counters().live_bytes, 0);
}

/* ---- ordering: synchronization, DLPack streams, releases ---- */

static const char *fake_log(void) {
    const char *(*f)(void);
    void *p = fake_sym("fake_cuda_log");
    memcpy(&f, &p, sizeof p);
    return f();
}
static void fake_log_clear(void) {
    void (*f)(void);
    void *p = fake_sym("fake_cuda_log_clear");
    memcpy(&f, &p, sizeof p);
    f();
}
static intptr_t fake_foreign_stream(void) {
    void *(*f)(void);
    void *p = fake_sym("fake_cuda_foreign_stream");
    memcpy(&f, &p, sizeof p);
    return (intptr_t)f();
}

/* Position of word w in the fake's log (-1: absent), from index from on. */
static long log_pos(const char *log, const char *w, long from) {
    const char *p = strstr(log + from, w);
    return p ? (long)(p - log) : -1;
}

Test(cuda, synchronize_waits_for_the_stream_and_host_contexts_return_at_once) {
    cr_expect_eq(lf_ctx_synchronize(NULL), LF_ERR_NULL);
    lf_ctx *cpu = new_ctx(LF_BACKEND_CPU, NULL), *ref = new_ctx(LF_BACKEND_REFERENCE, NULL);
    cr_assert(cpu && ref);
    cr_expect_eq(lf_ctx_synchronize(cpu), LF_OK);
    cr_expect_eq(lf_ctx_synchronize(ref), LF_OK);
    cr_expect_eq(lf_ctx_dlpack_stream(cpu), -1, "a host context has no stream");
    lf_ctx_destroy(cpu);
    lf_ctx_destroy(ref);
    lf_ctx *ctx = fake_ctx(NULL);
    fake_log_clear();
    long s0 = counters().syncs;
    cr_expect_eq(lf_ctx_synchronize(ctx), LF_OK, "%s", lf_errmsg(ctx));
    cr_expect_eq(counters().syncs, s0 + 1);
    cr_expect_str_eq(fake_log(), "sync:ours");
    cr_expect_neq(lf_ctx_dlpack_stream(ctx), -1);
    lf_ctx_destroy(ctx);
}

/* lazyfuse-bench's timed region (benches/timed_eval.c) holds the wait for
 * the device: with a fake synchronization of 30 ms, a timed eval takes at
 * least that, and the fake saw the launch before the wait. */
Test(cuda, bench_timed_region_contains_the_synchronization) {
    setenv("FAKE_CUDA_SYNC_US", "30000", 1);
    lf_ctx *ctx = fake_ctx(NULL);
    int64_t n = 4096;
    lf_buffer *xb = lf_buffer_new(ctx, LF_F32, 1, &n);
    cr_assert_not_null(xb);
    lf_graph *g = lf_graph_new(ctx);
    lf_node *y = lf_add(g, lf_mul(g, lf_input(g, xb), lf_const(g, LF_F32, 2.0)), lf_const(g, LF_F32, 1.0));
    lf_buffer *yb = lf_buffer_new_like(ctx, y);
    cr_assert_not_null(yb);
    cr_assert_eq(lf_eval(g, 1, &y, &yb), LF_OK, "%s", lf_errmsg(ctx)); /* compiles */
    fake_log_clear();
    double t0 = bench_now();
    cr_assert_eq(lf_eval(g, 1, &y, &yb), LF_OK, "%s", lf_errmsg(ctx));
    double untimed = bench_now() - t0;
    cr_expect_lt(untimed, 0.030, "lf_eval alone waited for the device (%g s)", untimed);
    cr_expect_eq(log_pos(fake_log(), "sync", 0), -1, "lf_eval synchronized: %s", fake_log());
    fake_log_clear();
    double s = bench_timed_eval(ctx, g, 1, &y, &yb);
    cr_assert_geq(s, 0.030, "the timed region (%g s) does not hold the 30 ms synchronization", s);
    long launch = log_pos(fake_log(), "launch", 0);
    cr_expect_geq(launch, 0, "%s", fake_log());
    cr_expect_gt(log_pos(fake_log(), "sync:ours", launch), launch, "launch, then the wait: %s", fake_log());
    lf_graph_free(g);
    lf_buffer_free(xb);
    lf_buffer_free(yb);
    lf_ctx_destroy(ctx);
}

Test(cuda, dlpack_export_orders_the_consumer_stream_after_our_work) {
    lf_ctx *ctx = fake_ctx(NULL);
    int64_t n = 16;
    lf_buffer *b = lf_buffer_new(ctx, LF_F32, 1, &n);
    cr_assert_not_null(b);
    intptr_t foreign = fake_foreign_stream();
    DLManagedTensor *t = NULL;
    /* 0 is ambiguous in the protocol, and nothing is exported */
    cr_expect_eq(lf_buffer_to_dlpack_stream(b, 0, &t), LF_ERR_INVALID);
    cr_expect_null(t);
    expect_msg(lf_errmsg(ctx), "0 is ambiguous");
    cr_expect_eq(lf_buffer_to_dlpack_stream(b, -7, &t), LF_ERR_INVALID);
    /* -1: no ordering, no event */
    fake_log_clear();
    cr_assert_eq(lf_buffer_to_dlpack_stream(b, -1, &t), LF_OK, "%s", lf_errmsg(ctx));
    cr_expect_str_eq(fake_log(), "");
    t->deleter(t);
    /* a consumer stream: an event recorded on ours, waited for on theirs */
    fake_log_clear();
    cr_assert_eq(lf_buffer_to_dlpack_stream(b, foreign, &t), LF_OK, "%s", lf_errmsg(ctx));
    const char *log = fake_log();
    long rec = log_pos(log, "record:E", 0), wait = log_pos(log, "wait:foreign<E", 0);
    cr_expect(rec >= 0 && wait > rec, "record on ours, then the consumer waits: %s", log);
    cr_expect_neq(log_pos(log, "@ours", 0), -1, "%s", log);
    /* the legacy default stream (1) too */
    DLManagedTensor *t2 = NULL;
    fake_log_clear();
    cr_assert_eq(lf_buffer_to_dlpack_stream(b, 1, &t2), LF_OK, "%s", lf_errmsg(ctx));
    cr_expect_neq(log_pos(fake_log(), "wait:legacy<E", 0), -1, "%s", fake_log());
    /* the deleter waits for the device before the buffer goes */
    lf_buffer_free(b);
    fake_log_clear();
    long cs0 = counters().ctx_syncs;
    t2->deleter(t2);
    cr_expect_eq(counters().ctx_syncs, cs0 + 1, "the deleter waits for the whole device");
    fake_counters c0 = counters();
    t->deleter(t); /* the last reference: the memory goes back to the allocator after the wait */
    cr_expect_eq(counters().ctx_syncs, c0.ctx_syncs + 1);
    cr_expect_eq(counters().events_created, counters().events_destroyed, "every event destroyed");
    lf_ctx_destroy(ctx);
}

static int ordered_release_syncs = -1;
static void record_syncs_at_release(void *arg) {
    (void)arg;
    ordered_release_syncs = (int)counters().syncs;
}

Test(cuda, dlpack_import_waits_for_the_producer_stream_and_releases_after_our_work) {
    lf_ctx *ctx = fake_ctx(NULL);
    int64_t n = 16;
    lf_buffer *owner = lf_buffer_new(ctx, LF_F32, 1, &n);
    cr_assert_not_null(owner);
    intptr_t foreign = fake_foreign_stream();
    DLManagedTensor t = {.dl_tensor = {.data = (void *)(uintptr_t)owner->dev, .device = {kDLCUDA, 0}, .ndim = 1,
                                       .dtype = {kDLFloat, 32, 1}, .shape = &n},
                         .deleter = NULL};
    cr_expect_null(lf_buffer_from_dlpack_stream(ctx, &t, 0));
    expect_msg(lf_errmsg(ctx), "buffer_from_dlpack_stream: stream 0");
    fake_log_clear();
    lf_buffer *b = lf_buffer_from_dlpack_stream(ctx, &t, foreign);
    cr_assert_not_null(b, "%s", lf_errmsg(ctx));
    const char *log = fake_log();
    long rec = log_pos(log, "record:E", 0), wait = log_pos(log, "wait:ours<E", 0);
    cr_expect(rec >= 0 && wait > rec && log_pos(log, "@foreign", 0) >= 0,
              "recorded on the producer's stream, then ours waits: %s", log);
    lf_buffer_free(b);
    /* a wrapped buffer's release (an imported tensor's deleter) comes after
       our stream is done: the fake counted a sync before the callback */
    lf_buffer *w = lf_buffer_wrap(ctx, LF_F32, 1, &n, NULL, (void *)(uintptr_t)owner->dev, record_syncs_at_release,
                                  NULL);
    cr_assert_not_null(w);
    lf_graph *g = lf_graph_new(ctx);
    lf_node *y = lf_mul(g, lf_input(g, w), lf_const(g, LF_F32, 3.0));
    lf_buffer *yb = lf_buffer_new_like(ctx, y);
    cr_assert_eq(lf_eval(g, 1, &y, &yb), LF_OK, "%s", lf_errmsg(ctx));
    int before = (int)counters().syncs;
    lf_buffer_free(w);
    cr_expect_eq(ordered_release_syncs, -1, "the graph still reads it: not released");
    lf_graph_free(g);
    cr_expect_eq(ordered_release_syncs, before + 1, "released after one wait for our stream");
    lf_buffer_free(yb);
    lf_buffer_free(owner);
    lf_ctx_destroy(ctx);
}

Test(cuda, fake_destroy_frees_what_the_user_left) {
    size_t base = lf_debug_live_bytes();
    lf_ctx *ctx = fake_ctx(NULL);
    fixture f = make_fixture(ctx, 50000);
    cr_assert_eq(fixture_eval(&f), LF_OK, "%s", lf_errmsg(ctx));
    fixture f2 = make_fixture(ctx, 10);
    (void)f2;
    lf_ctx_destroy(ctx); /* graphs with programs, buffers, modules */
    fake_counters c = counters();
    cr_expect_eq(c.live_bytes, 0);
    cr_expect_eq(c.loads, c.unloads);
    cr_expect_eq(c.retains, c.releases);
    cr_expect_eq(c.streams_created, c.streams_destroyed);
    cr_expect_eq(c.bad_frees, 0);
    cr_expect_eq(lf_debug_live_bytes(), base);
}

/* One context, build and eval on the fake driver with a warm disk cache;
 * returns the first failing status. A failure must be LF_ERR_NOMEM saying
 * "out of memory", and a failed eval must leave the outputs untouched. */
static lf_status sweep_once(const char *dir) {
    lf_ctx *ctx = new_ctx(LF_BACKEND_CUDA, dir);
    if (!ctx) {
        cr_assert(strstr(lf_errmsg(NULL), "out of memory"), "ctx_new: %s", lf_errmsg(NULL));
        return LF_ERR_NOMEM;
    }
    int64_t n = 3000;
    lf_buffer *xb = lf_buffer_new(ctx, LF_F32, 1, &n), *yb = lf_buffer_new(ctx, LF_F32, 1, &n),
              *sb = lf_buffer_new(ctx, LF_F32, 0, NULL);
    lf_graph *g = lf_graph_new(ctx);
    lf_status st = LF_ERR_NOMEM;
    if (!xb || !yb || !sb || !g) {
        cr_assert(strstr(lf_errmsg(ctx), "out of memory"), "%s", lf_errmsg(ctx));
        goto done;
    }
    float host[3000];
    for (int i = 0; i < 3000; i++) host[i] = -777.0f;
    cr_assert_eq(lf_buffer_write(yb, host, sizeof host), LF_OK, "%s", lf_errmsg(ctx));
    lf_node *x = lf_input(g, xb);
    lf_node *y = lf_add(g, lf_mul(g, lf_exp(g, x), lf_const(g, LF_F32, 2.0)), lf_const(g, LF_F32, 1.0));
    lf_node *s = lf_reduce(g, LF_RED_SUM, x, 0, NULL, false);
    st = lf_eval(g, 2, (lf_node *[]){y, s}, (lf_buffer *[]){yb, sb});
    if (st != LF_OK) {
        cr_assert_eq(st, LF_ERR_NOMEM, "%s: %s", lf_status_name(st), lf_errmsg(ctx));
        cr_assert(strstr(lf_errmsg(ctx), "out of memory"), "%s", lf_errmsg(ctx));
        expect_sentinel(yb);
    } else {
        st = lf_eval(g, 2, (lf_node *[]){y, s}, (lf_buffer *[]){yb, sb}); /* the cached program */
        cr_assert(st == LF_OK || st == LF_ERR_NOMEM, "%s", lf_errmsg(ctx));
    }
done:
    lf_ctx_destroy(ctx);
    return st;
}

Test(cuda, fake_allocation_failure_sweep) {
    char *dir = tmp_dir();
    lf_ctx *warm = fake_ctx(dir); /* compile once: the sweep loads from disk */
    fixture f = make_fixture(warm, 3000);
    cr_assert_eq(fixture_eval(&f), LF_OK, "%s", lf_errmsg(warm));
    lf_ctx_destroy(warm);
    size_t base = lf_debug_live_bytes();
    /* some failures are survived (no disk cache folder: compile instead; no
       memory for a free list entry: give the block back to the driver), so
       an LF_OK does not mean the last allocation was passed: sticky failures
       first, until 25 runs in a row succeed, then each allocation alone */
    int last_failed = 0, failures = 0;
    for (int sticky = 1; sticky >= 0; sticky--) {
        int ok_in_a_row = 0;
        for (int k = 1; sticky ? ok_in_a_row < 25 : k <= last_failed + 25; k++) {
            cr_assert_lt(k, 20000);
            lf_debug_fail_alloc(k, sticky);
            lf_status st = sweep_once(dir);
            lf_debug_fail_alloc(0, false);
            cr_assert_eq(lf_debug_live_bytes(), base, "allocation %d failed: leaked %zu bytes", k,
                         lf_debug_live_bytes() - base);
            fake_counters c = counters();
            cr_assert_eq(c.live_bytes, 0, "allocation %d failed: device memory leaked", k);
            cr_assert_eq(c.retains, c.releases);
            cr_assert_eq(c.loads, c.unloads);
            cr_assert_eq(c.bad_frees, 0);
            if (st == LF_OK) {
                ok_in_a_row++;
            } else {
                ok_in_a_row = 0;
                failures++;
                if (sticky) last_failed = k;
            }
        }
    }
    cr_assert_gt(last_failed, 20, "only %d allocations were swept", last_failed);
    tu_note("test_cuda: allocation sweep: %d allocations, %d failed evals\n", last_failed, failures);
    rm_dir(dir);
}

/* ==== 2. NVRTC ===================================================================== */

static const char *const SAXPY =
    "extern \"C\" __global__ void saxpy(float a, const float *x, float *y, long long n) {\n"
    "    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;\n"
    "    if (i < n) y[i] = a * x[i] + y[i];\n"
    "}\n";

Test(cuda, nvrtc_compiles_a_kernel_for_sm90) {
    need_nvrtc();
    char err[1024] = "", *log = NULL;
    size_t bytes = 0;
    lf_status st = cuda_nvrtc_compile_for_arch(SAXPY, 90, &log, &bytes, err, sizeof err);
    cr_assert_eq(st, LF_OK, "%s\n%s", err, log ? log : "");
    cr_expect_gt(bytes, 0);
    graph_free(log);
}

Test(cuda, nvrtc_syntax_error_log_reaches_the_message) {
    need_nvrtc();
    char err[1024] = "", *log = NULL;
    lf_status st = cuda_nvrtc_compile_for_arch("extern \"C\" __global__ void k(float *x) { x[0] = ; }", 90,
                                               &log, NULL, err, sizeof err);
    cr_assert_eq(st, LF_ERR_BACKEND);
    expect_msg(err, "NVRTC_ERROR_COMPILATION");
    expect_msg(err, "sm_90");
    cr_assert_not_null(log);
    expect_msg(log, "error");
    expect_msg(log, "expected an expression");
    graph_free(log);
}

Test(cuda, nvrtc_no_contraction_and_cpp17) {
    need_nvrtc();
    int fmad = 0, std = 0;
    for (int i = 0; cuda_nvrtc_options[i]; i++) {
        fmad += !strcmp(cuda_nvrtc_options[i], "-fmad=false");
        std += !strcmp(cuda_nvrtc_options[i], "--std=c++17");
        cr_expect(!strstr(cuda_nvrtc_options[i], "fast-math"), "%s", cuda_nvrtc_options[i]);
    }
    cr_expect_eq(fmad, 1);
    cr_expect_eq(std, 1);
    /* C++17 is on: if constexpr compiles */
    char err[1024] = "", *log = NULL;
    lf_status st = cuda_nvrtc_compile_for_arch(
        "template <int N> __device__ int f() { if constexpr (N > 1) return N; else return 0; }\n"
        "extern \"C\" __global__ void k(int *x) { x[0] = f<3>(); }\n",
        90, &log, NULL, err, sizeof err);
    cr_expect_eq(st, LF_OK, "%s\n%s", err, log ? log : "");
    graph_free(log);
}

Test(cuda, nvrtc_target_choice) {
    cuda_nvrtc nv;
    memset(&nv, 0, sizeof nv);
    int archs[] = {75, 80, 86, 89, 90};
    nv.narchs = 5;
    memcpy(nv.archs, archs, sizeof archs);
    bool ptx;
    cr_expect_eq(cuda_nvrtc_target(&nv, 90, &ptx), 90);
    cr_expect(!ptx);
    cr_expect_eq(cuda_nvrtc_target(&nv, 87, &ptx), 86);
    cr_expect(ptx, "an unknown sm_87 gets compute_86 PTX");
    cr_expect_eq(cuda_nvrtc_target(&nv, 120, &ptx), 90);
    cr_expect(ptx);
    cr_expect_eq(cuda_nvrtc_target(&nv, 70, &ptx), 0, "too old for this NVRTC");
    nv.narchs = 0;
    cr_expect_eq(cuda_nvrtc_target(&nv, 70, &ptx), 70);
    cr_expect(!ptx);
}

/* ==== 3. a real device =============================================================== */

/* A CUDA context on the machine's own driver, or a skip saying why not. */
static lf_ctx *device_ctx(void) {
    unsetenv("LF_CUDA_LIBRARY");
    lf_ctx *ctx = new_ctx(LF_BACKEND_CUDA, NULL);
    if (!ctx) {
        if (getenv("LF_TEST_REQUIRE_CUDA")) cr_assert_fail("no usable CUDA device: %s", lf_errmsg(NULL));
        cr_skip_test("no usable CUDA device: %s", lf_errmsg(NULL));
    }
    char name[512];
    lf_ctx_device_name(ctx, name, sizeof name);
    tu_note("test_cuda: device: %s\n", name);
    return ctx;
}

Test(cuda, device_results_match_the_cpu_backend) {
    lf_ctx *ctx = device_ctx();
    lf_ctx *cpu = new_ctx(LF_BACKEND_CPU, NULL);
    cr_assert_not_null(cpu);
    int64_t n = 1000003;
    float *host = malloc((size_t)n * sizeof *host), *a = malloc((size_t)n * sizeof *a),
          *b = malloc((size_t)n * sizeof *b);
    cr_assert(host && a && b);
    for (int64_t i = 0; i < n; i++) host[i] = (float)tu_uniform(-4, 4);
    float sa = 0, sb = 0;
    for (int round = 0; round < 3; round++)
        for (int which = 0; which < 2; which++) {
            lf_ctx *c = which ? cpu : ctx;
            lf_buffer *xb = lf_buffer_new(c, LF_F32, 1, &n), *yb = lf_buffer_new(c, LF_F32, 1, &n),
                      *sbuf = lf_buffer_new(c, LF_F32, 0, NULL);
            cr_assert(xb && yb && sbuf, "%s", lf_errmsg(c));
            cr_assert_eq(lf_buffer_write(xb, host, (size_t)n * sizeof *host), LF_OK, "%s", lf_errmsg(c));
            lf_graph *g = lf_graph_new(c);
            lf_fn *gauss = lf_fn_parse(g, "(x, m, s) -> exp(-0.5*((x-m)/s)**2) / (s*2.5066282746)");
            lf_node *x = lf_input(g, xb);
            lf_node *y = lf_zipwith(g, gauss, 3, (lf_node *[]){x, lf_const(g, LF_F32, 0.5), lf_const(g, LF_F32, 1.5)});
            lf_node *s = lf_reduce(g, LF_RED_SUM, lf_mul(g, x, x), 0, NULL, false);
            for (int rep = 0; rep < 2; rep++)
                cr_assert_eq(lf_eval(g, 2, (lf_node *[]){y, s}, (lf_buffer *[]){yb, sbuf}), LF_OK, "%s",
                             lf_errmsg(c));
            cr_assert_eq(lf_buffer_read(yb, which ? b : a, (size_t)n * sizeof *a), LF_OK, "%s", lf_errmsg(c));
            cr_assert_eq(lf_buffer_read(sbuf, which ? &sb : &sa, sizeof sa), LF_OK, "%s", lf_errmsg(c));
            lf_graph_free(g);
            lf_buffer_free(xb);
            lf_buffer_free(yb);
            lf_buffer_free(sbuf);
        }
    for (int64_t i = 0; i < n; i++) cr_assert(tu_close(a[i], b[i], 1e-5, 1e-7), "y[%lld]: %g vs %g", (long long)i, a[i], b[i]);
    cr_expect(tu_close(sa, sb, 1e-6, 0), "sum %g vs %g", sa, sb);
    free(host);
    free(a);
    free(b);
    lf_ctx_destroy(cpu);
    lf_ctx_destroy(ctx);
}

Test(cuda, device_out_of_memory_keeps_the_context_usable) {
    lf_ctx *ctx = device_ctx();
    int64_t huge = (int64_t)1 << 47; /* 512 TiB of f32 */
    cr_assert_null(lf_buffer_new(ctx, LF_F32, 1, &huge));
    expect_msg(lf_errmsg(ctx), "buffer_new: cuda: out of device memory (562949953421312 bytes)");
    check_affine(ctx, 12345);
    lf_ctx_destroy(ctx);
}

Test(cuda, device_auto_picks_cuda) {
    lf_ctx *dev = device_ctx();
    lf_ctx_destroy(dev);
    lf_ctx *ctx = new_ctx(LF_BACKEND_AUTO, NULL);
    cr_assert_not_null(ctx);
    cr_expect_eq(lf_ctx_backend(ctx), LF_BACKEND_CUDA);
    lf_ctx_destroy(ctx);
}

/* The DLPack stream protocol against a second stream of the device (as
 * CuPy's or PyTorch's would be): an import waits for the producer's queued
 * memsets, an export's consumer stream waits for our queued kernels. Large
 * enough (64 Mi floats) that the unordered way loses the race. */
Test(cuda, device_dlpack_streams_order_work) {
    lf_ctx *ctx = device_ctx();
    cuda_state *cs = ctx->state[LF_BACKEND_CUDA];
    CUstream other = NULL;
    cr_assert_eq(cs->drv.StreamCreate(&other, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    int64_t n = (int64_t)1 << 26;
    size_t bytes = (size_t)n * 4;
    lf_buffer *owner = lf_buffer_new(ctx, LF_F32, 1, &n);
    cr_assert_not_null(owner, "%s", lf_errmsg(ctx));
    cr_assert_eq(lf_ctx_synchronize(ctx), LF_OK);
    /* producer: 0x3f bytes (0.74739...f) written on the other stream, a few
       times over so that it is still running when we launch */
    for (int k = 0; k < 8; k++)
        cr_assert_eq(cs->drv.MemsetD8Async(owner->dev, (unsigned char)(k == 7 ? 0x3f : 0x11 + k), bytes, other),
                     CUDA_SUCCESS);
    DLManagedTensor t = {.dl_tensor = {.data = (void *)(uintptr_t)owner->dev, .device = {kDLCUDA, cs->ordinal},
                                       .ndim = 1, .dtype = {kDLFloat, 32, 1}, .shape = &n}};
    lf_buffer *x = lf_buffer_from_dlpack_stream(ctx, &t, (intptr_t)other);
    cr_assert_not_null(x, "%s", lf_errmsg(ctx));
    lf_graph *g = lf_graph_new(ctx);
    lf_node *y = lf_mul(g, lf_input(g, x), lf_const(g, LF_F32, 2.0));
    lf_buffer *yb = lf_buffer_new_like(ctx, y);
    cr_assert_eq(lf_eval(g, 1, &y, &yb), LF_OK, "%s", lf_errmsg(ctx));
    /* consumer: reads y on the other stream after the export's ordering */
    DLManagedTensor *out = NULL;
    cr_assert_eq(lf_buffer_to_dlpack_stream(yb, (intptr_t)other, &out), LF_OK, "%s", lf_errmsg(ctx));
    float *host = malloc(bytes);
    cr_assert_not_null(host);
    cr_assert_eq(cs->drv.MemcpyDtoHAsync(host, (CUdeviceptr)(uintptr_t)out->dl_tensor.data, bytes, other),
                 CUDA_SUCCESS);
    cr_assert_eq(cs->drv.StreamSynchronize(other), CUDA_SUCCESS);
    float one;
    memset(&one, 0x3f, 4);
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) bad += host[i] != 2 * one;
    cr_expect_eq(bad, 0, "%lld of %lld elements saw unordered data", (long long)bad, (long long)n);
    out->deleter(out);
    free(host);
    lf_graph_free(g);
    lf_buffer_free(x);
    lf_buffer_free(yb);
    lf_buffer_free(owner);
    cs->drv.StreamDestroy(other);
    lf_ctx_destroy(ctx);
}

/* lf_buffer_set_data is for host memory: on a device context it refuses a
 * wrapped device buffer (LF_ERR_INVALID, naming device memory) and leaves it
 * at its address. */
Test(cuda, fake_buffer_set_data_refuses_device_memory) {
    lf_ctx *ctx = fake_ctx(NULL);
    int64_t n = 8;
    lf_buffer *owner = lf_buffer_new(ctx, LF_F32, 1, &n), *other = lf_buffer_new(ctx, LF_F32, 1, &n);
    cr_assert(owner && other, "%s", lf_errmsg(ctx));
    lf_buffer *w = lf_buffer_wrap(ctx, LF_F32, 1, &n, NULL, (void *)(uintptr_t)owner->dev, NULL, NULL);
    cr_assert_not_null(w, "%s", lf_errmsg(ctx));
    cr_expect_eq(lf_buffer_set_data(w, (void *)(uintptr_t)other->dev), LF_ERR_INVALID);
    cr_expect(strstr(lf_errmsg(ctx), "buffer_set_data: the buffer is device memory"), "%s", lf_errmsg(ctx));
    cr_expect_eq(w->dev, owner->dev, "a refused call moved the buffer");
    lf_buffer_free(w), lf_buffer_free(owner), lf_buffer_free(other);
    lf_ctx_destroy(ctx);
}
