/* tests/test_cpu.c: the compiled CPU backend (backends/cpu, codegen/).
 *
 * Every result is compared with the reference evaluator on the same graph
 * (LF_BACKEND_REFERENCE) on fresh random inputs (LF_TEST_SEED replays a run).
 *
 * - Odd sizes: 0, 1, 2 and sizes around the vector width, CG_LANES (16), the
 *   pool's grain (256), CG_FULL_BLOCK and the parallel threshold, for an
 *   elementwise graph with broadcasting, full reductions of f32 and i32, a
 *   row softmax, column reductions and a reduction over axes (0, 2) of a 3-d
 *   array, on 1, 2 and 3 threads with LF_CPU_PARALLEL_MIN=1 (small arrays
 *   are split too). Floats within 1e-5 relative of the reference (bit-exact
 *   where no rounding order is involved), integers and arg indices exact, and
 *   every result bit-identical across thread counts.
 *   Stencils (nine slices of one input added: one kernel) at the same sizes.
 *   Under valgrind the sweeps take the sizes up to 4097 and one larger size
 *   drawn from the seed.
 * - IEEE semantics: NaN, +-Inf and -0 through arithmetic, min/max,
 *   comparisons, rounding, casts (saturating, NaN -> 0) and integer corner
 *   cases (% by 0 and -1, negative powers, wraparound), bit for bit: once
 *   with many outputs per kernel over broadcast grids, once with every op in
 *   a kernel of its own (the loop GCC vectorizes); reductions over NaN and
 *   all-infinite arrays split over several blocks and threads; no fast-math
 *   reassociation and no contraction of a*b+c into an fma.
 * - Math accuracy: every transcendental operator on f32 and f64 over ~20,000
 *   inputs spanning its domain (random ones beside fixed known-hard inputs:
 *   EDGES, PAIRS), each in a kernel of its own (so libmvec's vector
 *   functions run where the C dialect declares them), max ulp distance to
 *   the reference (scalar libm) <= 4 for lazyfuse.h's exempt functions and
 *   0 (bits, zero signs included) for cbrt, fmod, sqrt and rsqrt, NaN and
 *   +-Inf exact; a table of the measured figures goes to meson's test log
 *   (tu_note).
 * - Kernel cache: program reuse, in-memory hits for a rebuilt graph (also of
 *   another size), disk hits in a new context, corrupt and truncated entries
 *   rebuilt, an unusable cache folder, 1,000 rebuilds compile nothing.
 * - Compiler problems: CC=false and a missing CC fall back to the interpreter
 *   (one warning) or fail with LF_ERR_BACKEND under LF_COMPILE_REQUIRE; a
 *   compiler that fails on the kernel reports its log; LF_COMPILE=never.
 *   Failed evals leave the output buffers untouched.
 * - Output aliasing (an output buffer that is also an input, through a
 *   reversed view too; two outputs into one buffer; inputs as outputs) and
 *   the LF_DEBUG=source dump.
 *
 * Each test gets a private kernel cache folder ($LF_CACHE_DIR, removed after
 * it), so every test compiles its kernels cold; the number of distinct kernel
 * structures per test is kept to a few dozen.
 */
#include "testutil.h"

#include "backends/cpu/cpu.h"
#include "backends/diskcache.h"
#include "codegen/codegen.h"
#include "graph/graph.h"

#include <criterion/criterion.h>
#include <dlpack/dlpack.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <ftw.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- per-test setup ------------------------------------------------------------ */

static size_t base_bytes;
static char tmpdir[256];    /* private folder of the test, removed after it */
static char cache_dir[300]; /* tmpdir/cache: $LF_CACHE_DIR */

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f) {
    (void)st, (void)flag, (void)f;
    remove(p);
    return 0;
}

static void setup(void) {
    tu_seed(); /* prints the seed now, not inside a stderr capture */
    base_bytes = lf_debug_live_bytes();
    snprintf(tmpdir, sizeof tmpdir, "/tmp/lf-test-cpu-XXXXXX");
    cr_assert_not_null(mkdtemp(tmpdir), "mkdtemp: %s", strerror(errno));
    snprintf(cache_dir, sizeof cache_dir, "%s/cache", tmpdir);
    setenv("LF_CACHE_DIR", cache_dir, 1);
    unsetenv("LF_COMPILE"); /* these tests are about compiling */
    unsetenv("LF_DEBUG");
    unsetenv("LF_CPU_PARALLEL_MIN");
}

static void teardown(void) {
    lf_debug_fail_alloc(0, false);
    nftw(tmpdir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(cpu, .init = setup, .fini = teardown);

static void expect_no_leak(void) {
    cr_assert_eq(lf_debug_live_bytes(), base_bytes, "live bytes %zu after destroying everything, %zu before",
                 lf_debug_live_bytes(), base_bytes);
}

/* ---- contexts, buffers, evaluation ------------------------------------------------ */

/* A CPU context (compile mode, cache folder or NULL for $LF_CACHE_DIR); threads
 * > 0 replaces its pool through the test hook. */
static lf_ctx *cpu_ctx(int threads, int compile, const char *cache) {
    lf_ctx_options o;
    lf_ctx_options_init(&o);
    o.backend = LF_BACKEND_CPU;
    o.compile = compile;
    o.cache_dir = cache;
    lf_ctx *c = lf_ctx_new(&o);
    cr_assert_not_null(c, "lf_ctx_new: %s", lf_errmsg(NULL));
    if (threads > 0) cr_assert_eq(cpu_set_threads(c, threads), LF_OK, "cpu_set_threads: %s", lf_errmsg(c));
    return c;
}

static lf_ctx *ref_ctx(void) {
    lf_ctx_options o;
    lf_ctx_options_init(&o);
    o.backend = LF_BACKEND_REFERENCE;
    lf_ctx *c = lf_ctx_new(&o);
    cr_assert_not_null(c, "lf_ctx_new: %s", lf_errmsg(NULL));
    return c;
}

static lf_buffer *raw_buf(lf_ctx *c, lf_dtype t, int ndim, const int64_t *shape, const void *data) {
    lf_buffer *b = lf_buffer_new(c, t, ndim, shape);
    cr_assert_not_null(b, "lf_buffer_new: %s", lf_errmsg(c));
    if (data && lf_buffer_bytes(b))
        cr_assert_eq(lf_buffer_write(b, data, lf_buffer_bytes(b)), LF_OK, "write: %s", lf_errmsg(c));
    return b;
}

/* An input node over a new buffer holding data; the graph keeps the buffer. */
static lf_node *in_node(lf_graph *g, lf_dtype t, int ndim, const int64_t *shape, const void *data) {
    lf_buffer *b = raw_buf(g->ctx, t, ndim, shape, data);
    lf_node *n = lf_input(g, b);
    lf_buffer_free(b);
    cr_assert_not_null(n, "lf_input: %s", lf_graph_errmsg(g));
    return n;
}

static void *raw_read(const lf_buffer *b) {
    size_t bytes = lf_buffer_bytes(b);
    void *p = malloc(bytes ? bytes : 1);
    cr_assert_not_null(p);
    if (bytes) cr_assert_eq(lf_buffer_read(b, p, bytes), LF_OK);
    return p;
}

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    cr_assert_not_null(p, "out of memory");
    return p;
}

/* Evaluates outs of g with the reference evaluator (the same graph, the
 * context switched to LF_BACKEND_REFERENCE for this one call). */
static void eval_reference(lf_graph *g, int n, lf_node *const *outs, lf_buffer *const *dsts) {
    lf_ctx *c = g->ctx;
    lf_backend keep = c->backend;
    c->backend = LF_BACKEND_REFERENCE;
    lf_status st = lf_eval(g, n, outs, dsts);
    c->backend = keep;
    cr_assert_eq(st, LF_OK, "reference eval: %s", lf_errmsg(c));
}

static double elem(lf_dtype t, const void *p, int64_t i) {
    switch (t) {
    case LF_BOOL: return ((const uint8_t *)p)[i];
    case LF_I32: return ((const int32_t *)p)[i];
    case LF_I64: return (double)((const int64_t *)p)[i];
    case LF_F32: return ((const float *)p)[i];
    case LF_F64: return ((const double *)p)[i];
    case LF_I8: return ((const int8_t *)p)[i];
    case LF_U8: return ((const uint8_t *)p)[i];
    case LF_I16: return ((const int16_t *)p)[i];
    case LF_U16: return ((const uint16_t *)p)[i];
    case LF_U32: return ((const uint32_t *)p)[i];
    case LF_U64: return (double)((const uint64_t *)p)[i];
    case LF_F16:
    case LF_BF16: return ((const uint16_t *)p)[i]; /* the bits: compared as bytes, shown in messages */
    default: return NAN;
    }
}

/* got against want (n elements of dtype t). Integers and bool exactly; floats
 * bit for bit when rtol is 0 (NaN: both NaN, any payload), else within rtol
 * relative (NaN both NaN, infinities equal). */
static void expect_match(const char *what, lf_dtype t, const void *got, const void *want, int64_t n,
                         double rtol) {
    size_t es = lf_dtype_size(t);
    for (int64_t i = 0; i < n; i++) {
        double a = elem(t, got, i), b = elem(t, want, i);
        bool ok;
        if (t == LF_F32 || t == LF_F64) {
            if (isnan(a) || isnan(b)) ok = isnan(a) && isnan(b);
            else if (rtol == 0) ok = !memcmp((const char *)got + i * es, (const char *)want + i * es, es);
            else if (isinf(a) || isinf(b)) ok = a == b;
            else ok = fabs(a - b) <= rtol * fabs(b);
        } else {
            ok = !memcmp((const char *)got + i * es, (const char *)want + i * es, es);
        }
        if (!ok) {
            long long gi = t == LF_I64 ? (long long)((const int64_t *)got)[i] : (long long)a;
            long long wi = t == LF_I64 ? (long long)((const int64_t *)want)[i] : (long long)b;
            cr_assert_fail("%s: element %" PRId64 " of %" PRId64 " (%s) is %.9g (%a; int %lld), reference %.9g "
                           "(%a; int %lld)%s",
                           what, i, n, lf_dtype_name(t), a, a, gi, b, b, wi,
                           rtol == 0 ? ", want bit-identical" : "");
        }
    }
}

/* The bytes of two results must be identical (thread-count independence). */
static void expect_same_bits(const char *what, lf_dtype t, const void *a, const void *b, int64_t n) {
    size_t es = lf_dtype_size(t);
    for (int64_t i = 0; i < n; i++)
        if (memcmp((const char *)a + i * es, (const char *)b + i * es, es))
            cr_assert_fail("%s: element %" PRId64 " of %" PRId64 " differs: %.17g (%a) vs %.17g (%a)", what, i, n,
                           elem(t, a, i), elem(t, a, i), elem(t, b, i), elem(t, b, i));
}

/* Evaluates outs[0..n) on g's (CPU) context and with the reference evaluator,
 * each into new buffers, and checks every output with expect_match(rtol[i]).
 * Returns the CPU eval's stats. */
static lf_eval_stats check_vs_reference(const char *what, lf_graph *g, int n, lf_node *const *outs,
                                        const double *rtol) {
    lf_ctx *c = g->ctx;
    enum { MAXOUTS = 64 }; /* ops_alone: every operator, and a cast to every dtype */
    lf_buffer *got[MAXOUTS], *want[MAXOUTS];
    cr_assert(n <= MAXOUTS);
    for (int i = 0; i < n; i++) {
        cr_assert_not_null(outs[i], "%s: output %d is NULL: %s", what, i, lf_graph_errmsg(g));
        got[i] = lf_buffer_new_like(c, outs[i]);
        want[i] = lf_buffer_new_like(c, outs[i]);
        cr_assert(got[i] && want[i]);
    }
    lf_status st = lf_eval(g, n, outs, got);
    cr_assert_eq(st, LF_OK, "%s: eval: %s: %s", what, lf_status_name(st), lf_errmsg(c));
    lf_eval_stats stats;
    cr_assert_eq(lf_ctx_last_stats(c, &stats), LF_OK);
    eval_reference(g, n, outs, want);
    for (int i = 0; i < n; i++) {
        void *a = raw_read(got[i]), *b = raw_read(want[i]);
        char w[200];
        snprintf(w, sizeof w, "%s, output %d", what, i);
        expect_match(w, lf_buffer_dtype(got[i]), a, b, lf_buffer_numel(got[i]), rtol ? rtol[i] : 0);
        free(a);
        free(b);
        lf_buffer_free(got[i]);
        lf_buffer_free(want[i]);
    }
    return stats;
}

static float *rand_f32(int64_t n, double lo, double hi) {
    float *v = xmalloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = (float)tu_uniform(lo, hi);
    return v;
}

static int32_t *rand_i32(int64_t n, int64_t lo, int64_t hi) {
    int32_t *v = xmalloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = (int32_t)tu_randint(lo, hi);
    return v;
}

#define SH(...) ((const int64_t[]){__VA_ARGS__})
#define AX(...) ((const int[]){__VA_ARGS__})

/* ==== 1. odd sizes, threads ======================================================== */

static const int64_t SIZES[] = {0,   1,    2,    15,    16,    17,    31,    33,    255,
                                256, 257, 1023, 4097, 65535, 65536, 65537, 200003};
enum { NSIZES = sizeof SIZES / sizeof SIZES[0], NT = 3, MAXO = 12 };
enum { NSMALL = 13 }; /* SIZES[0 .. NSMALL - 1] are at most 4097; the rest are large */
_Static_assert(NSIZES == 17, "NSMALL counts the sizes up to 4097");

/* The outputs a sweep builder makes, with their tolerance (0: bit-exact). */
typedef struct outset {
    int n;
    lf_node *outs[MAXO];
    double rtol[MAXO];
    const char *name[MAXO];
} outset;

static void add_out(outset *o, const char *name, lf_node *n, double rtol) {
    cr_assert(o->n < MAXO);
    o->name[o->n] = name;
    o->rtol[o->n] = rtol;
    o->outs[o->n++] = n;
}

/* Builds the outputs of size s on g from the host arrays h (made by gen). */
typedef void (*sweep_build)(lf_graph *g, int64_t s, void *const *h, outset *o);
/* Makes the host arrays of size s (random, freed by the sweep). */
typedef void (*sweep_gen)(int64_t s, void **h);

enum { MAXH = 4 };

/* For every size: the same graph on contexts of 1, 2 and 3 threads and on the
 * reference backend; each CPU result against the reference (tolerances of
 * the outset), and the 2- and 3-thread results bit-identical to 1 thread.
 * Under valgrind (CI's third pass, where the large sizes cost most of the
 * suite's time) the small sizes and one large size drawn from the seed. */
static void sweep(const char *name, sweep_gen gen, sweep_build build) {
    setenv("LF_CPU_PARALLEL_MIN", "1", 1); /* read when a context's CPU state is made */
    lf_ctx *ctxs[NT + 1];
    for (int t = 0; t < NT; t++) ctxs[t] = cpu_ctx(t + 1, LF_COMPILE_REQUIRE, NULL);
    ctxs[NT] = ref_ctx();
    int large = NSMALL + (int)(tu_seed() % (NSIZES - NSMALL));
    for (int si = 0; si < NSIZES; si++) {
        int64_t s = SIZES[si];
        if (tu_on_valgrind() && si >= NSMALL && si != large) continue;
        void *h[MAXH] = {0};
        gen(s, h);
        void *res[NT + 1][MAXO];
        lf_dtype dt[MAXO];
        int64_t numel[MAXO];
        outset first = {0};
        for (int k = 0; k <= NT; k++) {
            lf_graph *g = lf_graph_new(ctxs[k]);
            cr_assert_not_null(g);
            outset o = {0};
            build(g, s, h, &o);
            cr_assert_eq(lf_graph_status(g), LF_OK, "%s size %" PRId64 ": building: %s", name, s,
                         lf_graph_errmsg(g));
            if (o.n == 0) { /* nothing to evaluate at this size */
                lf_graph_free(g);
                continue;
            }
            lf_buffer *d[MAXO];
            for (int i = 0; i < o.n; i++) {
                d[i] = lf_buffer_new_like(ctxs[k], o.outs[i]);
                cr_assert_not_null(d[i]);
            }
            lf_status st = lf_eval(g, o.n, o.outs, d);
            cr_assert_eq(st, LF_OK, "%s size %" PRId64 " on %s: eval: %s: %s", name, s,
                         k < NT ? "the CPU backend" : "the reference", lf_status_name(st), lf_errmsg(ctxs[k]));
            if (k < NT) {
                lf_eval_stats stats;
                lf_ctx_last_stats(ctxs[k], &stats);
                cr_assert_eq(stats.kernels_compiled + stats.kernels_disk_hits + stats.kernels_memory_hits,
                             stats.kernels, "%s size %" PRId64 ": %d kernels, %d compiled, %d from disk, %d from "
                             "memory: the compiled path did not run every kernel",
                             name, s, stats.kernels, stats.kernels_compiled, stats.kernels_disk_hits,
                             stats.kernels_memory_hits);
            }
            for (int i = 0; i < o.n; i++) {
                res[k][i] = raw_read(d[i]);
                dt[i] = lf_buffer_dtype(d[i]);
                numel[i] = lf_buffer_numel(d[i]);
                lf_buffer_free(d[i]);
            }
            if (k == 0) first = o;
            lf_graph_free(g);
        }
        for (int i = 0; i < first.n; i++) {
            char w[200];
            for (int k = 0; k < NT; k++) {
                snprintf(w, sizeof w, "%s size %" PRId64 ", %s, %d thread(s) vs the reference", name, s,
                         first.name[i], k + 1);
                expect_match(w, dt[i], res[k][i], res[NT][i], numel[i], first.rtol[i]);
            }
            for (int k = 1; k < NT; k++) {
                snprintf(w, sizeof w, "%s size %" PRId64 ", %s, %d threads vs 1 thread", name, s, first.name[i],
                         k + 1);
                expect_same_bits(w, dt[i], res[k][i], res[0][i], numel[i]);
            }
            for (int k = 0; k <= NT; k++) free(res[k][i]);
        }
        for (int j = 0; j < MAXH; j++) free(h[j]);
    }
    for (int k = 0; k <= NT; k++) lf_ctx_destroy(ctxs[k]);
    unsetenv("LF_CPU_PARALLEL_MIN");
    expect_no_leak();
}

/* (a) x[s] with y[1] and a 0-d z: correctly rounded ops only, so bit-exact. */
static void gen_elementwise(int64_t s, void **h) {
    h[0] = rand_f32(s, -4, 4);
    h[1] = rand_f32(1, -2, 2);
    h[2] = rand_f32(1, -2, 2);
}

static void build_elementwise(lf_graph *g, int64_t s, void *const *h, outset *o) {
    lf_node *x = in_node(g, LF_F32, 1, &s, h[0]);
    lf_node *y = in_node(g, LF_F32, 1, SH(1), h[1]);
    lf_node *z = in_node(g, LF_F32, 0, NULL, h[2]);
    lf_fn *f = lf_fn_parse(g, "(x, y, z) -> (x*y + z) / (x*x + 1.0) - max(x, z) * sqrt(abs(x - y))");
    lf_node *xs[3] = {x, y, z};
    add_out(o, "f(x, y, z)", lf_zipwith(g, f, 3, xs), 0);
    add_out(o, "i32(x*100 - z)", lf_cast(g, lf_sub(g, lf_mul(g, x, lf_const(g, LF_F32, 100)), z), LF_I32), 0);
}

Test(cpu, sizes_elementwise, .timeout = 300) { sweep("elementwise", gen_elementwise, build_elementwise); }

/* (a1) streaming stores (codegen/emit_c.c): with LF_CPU_STREAM_MIN=0 every
 * elementwise kernel with a contiguous store writes it through tiles and
 * non-temporal stores. Outputs of each dtype (1-byte bools to 8-byte
 * values, so tile flushes start at every alignment), a broadcast operand,
 * a reversed (strided) load and a [2, s] output whose rows end inside a
 * tile; bit for bit against the reference at every size and thread count
 * (chunk edges anywhere in a tile). */
static void gen_stream(int64_t s, void **h) {
    h[0] = rand_f32(s, -4, 4);
    h[1] = rand_i32(s, -100, 100);
    h[2] = rand_f32(2, -2, 2);
}

static void build_stream(lf_graph *g, int64_t s, void *const *h, outset *o) {
    lf_node *x = in_node(g, LF_F32, 1, &s, h[0]);
    lf_node *k = in_node(g, LF_I32, 1, &s, h[1]);
    lf_node *y = in_node(g, LF_F32, 2, SH(2, 1), h[2]);
    lf_node *xk[2] = {x, k};
    add_out(o, "x * 3 - 1 (f32)", lf_zipwith(g, lf_fn_parse(g, "(x, k) -> x * 3.0 - 1.0"), 2, xk), 0);
    add_out(o, "f64(x) * k (f64)", lf_zipwith(g, lf_fn_parse(g, "(x, k) -> f64(x) * f64(k)"), 2, xk), 0);
    add_out(o, "k * 3 + 1 (i32)", lf_zipwith(g, lf_fn_parse(g, "(x, k) -> k * 3 + 1"), 2, xk), 0);
    add_out(o, "x > k / 50 (bool)", lf_zipwith(g, lf_fn_parse(g, "(x, k) -> x > f32(k) / 50.0"), 2, xk), 0);
    lf_node *rev = lf_slice(g, x, 0, LF_NONE, LF_NONE, -1);
    add_out(o, "x[::-1] - x (f32)", lf_sub(g, rev, x), 0);
    add_out(o, "y * x, [2, s] (f32)", lf_mul(g, y, x), 0);
}

Test(cpu, sizes_streaming_stores, .timeout = 300) {
    setenv("LF_CPU_STREAM_MIN", "0", 1); /* read when a context's CPU state is made */
    sweep("streaming stores", gen_stream, build_stream);
    unsetenv("LF_CPU_STREAM_MIN");
}

/* (a2) stencils over one input: a 9-tap moving average of x[s + 8] and a
 * 3x3 conv of a padded 2-d y[r + 2, c + 2] (nine loads of one buffer, one
 * kernel), with NaN and Inf among the inputs; f32 adds and multiplies only,
 * so bit-exact. */
static int64_t conv_rows(int64_t s) { return s / 211 + 1; }
static int64_t conv_cols(int64_t s) { return s % 211 + 1; }

static void gen_stencil(int64_t s, void **h) {
    int64_t ny = (conv_rows(s) + 2) * (conv_cols(s) + 2);
    h[0] = rand_f32(s + 8, -4, 4);
    h[1] = rand_f32(ny, -4, 4);
    float *x = h[0], *y = h[1];
    x[(s + 8) / 2] = NAN;
    x[(s + 8) / 3] = INFINITY;
    y[ny / 2] = -INFINITY;
    y[ny - 1] = NAN;
}

static void build_stencil(lf_graph *g, int64_t s, void *const *h, outset *o) {
    lf_node *x = in_node(g, LF_F32, 1, SH(s + 8), h[0]);
    int64_t r = conv_rows(s), c = conv_cols(s);
    lf_node *y = in_node(g, LF_F32, 2, SH(r + 2, c + 2), h[1]);
    lf_node *avg = NULL, *conv = NULL;
    for (int t = 0; t < 9; t++) {
        lf_node *v = lf_slice(g, x, 0, t, t + s, 1);
        avg = avg ? lf_add(g, avg, v) : v;
        lf_node *w = lf_mul(g, lf_slice(g, lf_slice(g, y, 0, t / 3, t / 3 + r, 1), 1, t % 3, t % 3 + c, 1),
                            lf_const(g, LF_F32, 0.25 * (t % 4) - 0.3));
        conv = conv ? lf_add(g, conv, w) : w;
    }
    add_out(o, "moving average of 9", lf_div(g, avg, lf_const(g, LF_F32, 9)), 0);
    add_out(o, "3x3 conv", conv, 0);
}

Test(cpu, sizes_stencil, .timeout = 300) { sweep("stencil", gen_stencil, build_stencil); }

/* (a2) random nodes (Philox of seed and flat index): bit-identical to the
 * reference at every size and thread count, fused with a map, through a
 * reversed view and a broadcast, and summed. */
static void gen_random(int64_t s, void **h) { h[0] = rand_f32(s, -4, 4); }

static void build_random(lf_graph *g, int64_t s, void *const *h, outset *o) {
    lf_node *x = in_node(g, LF_F32, 1, &s, h[0]);
    lf_node *nz = lf_random(g, LF_F32, LF_RANDOM_NORMAL, 1, &s, 0x5eed0000000000a1ull);
    add_out(o, "x + 0.1*normal f32", lf_add(g, x, lf_mul(g, lf_const(g, LF_F32, 0.1), nz)), 0);
    lf_node *u = lf_random(g, LF_F64, LF_RANDOM_UNIFORM, 1, &s, 7);
    add_out(o, "uniform f64 [::-1]", lf_slice(g, u, 0, LF_NONE, LF_NONE, -1), 0);
    add_out(o, "bits i32", lf_random(g, LF_I32, LF_RANDOM_BITS, 1, &s, UINT64_MAX), 0);
    add_out(o, "bits i64 * 3", lf_mul(g, lf_random(g, LF_I64, LF_RANDOM_BITS, 1, &s, 1ull << 40), lf_const(g, LF_I64, 3)), 0);
    lf_node *n2 = lf_random(g, LF_F64, LF_RANDOM_NORMAL, 2, (int64_t[]){s, 3}, 99);
    add_out(o, "normal f64 [s,3].T", lf_transpose(g, n2), 0);
    add_out(o, "uniform f32 [3] broadcast over s",
            lf_sub(g, lf_expand_dims(g, x, 1), lf_random(g, LF_F32, LF_RANDOM_UNIFORM, 1, SH(3), 3)), 0);
    add_out(o, "sum(uniform f64)", lf_reduce(g, LF_RED_SUM, u, 0, NULL, false), 1e-12);
}

Test(cpu, sizes_random, .timeout = 300) { sweep("random", gen_random, build_random); }

/* (a3) scans (lf_scan): bit-identical to the reference (which follows the
 * blocked order of lazyfuse.h) at every size and on 1, 2 and 3 threads,
 * through the one-pass row loop and the look-back split of a long row into
 * groups of 16 blocks (LF_CPU_PARALLEL_MIN=1 splits from two blocks on;
 * 200003 makes 4 groups, the last one short); h[1] has a length around one
 * group (16 blocks) for every size, on either side of the group boundary. */
static int64_t scan_len2(int64_t s) { return 16 * LF_SCAN_BLOCK + s % 4099 - 2049; }

static void gen_scan(int64_t s, void **h) {
    h[0] = rand_f32(s, -4, 4);
    h[1] = rand_f32(scan_len2(s), -4, 4);
    h[2] = rand_i32(s, -1000, 1000);
    h[3] = rand_f32(7 * s, -4, 4);
}

static void build_scan(lf_graph *g, int64_t s, void *const *h, outset *o) {
    int64_t s2 = scan_len2(s);
    lf_node *x = in_node(g, LF_F32, 1, &s, h[0]);
    lf_node *x2 = in_node(g, LF_F32, 1, &s2, h[1]);
    lf_node *k = in_node(g, LF_I32, 1, &s, h[2]);
    lf_node *c = lf_scan(g, LF_RED_SUM, x, 0, false);
    add_out(o, "cumsum f32", c, 0);
    add_out(o, "cumsum(x*x)/n", lf_div(g, lf_scan(g, LF_RED_SUM, lf_mul(g, x, x), 0, false), lf_const(g, LF_F32, 7)), 0);
    add_out(o, "cumsum f32 [::-1] + 1 (shifted read)",
            lf_add(g, lf_slice(g, c, 0, LF_NONE, LF_NONE, -1), lf_const(g, LF_F32, 1)), 0);
    add_out(o, "exclusive cumprod f64 (1 + x2/1000)",
            lf_scan(g, LF_RED_PROD, lf_add(g, lf_cast(g, lf_div(g, x2, lf_const(g, LF_F32, 1000)), LF_F64),
                                          lf_const(g, LF_F64, 1)), -1, true), 0);
    add_out(o, "cumsum x2 of a reversed view", lf_scan(g, LF_RED_SUM, lf_slice(g, x2, 0, LF_NONE, LF_NONE, -1), 0, false), 0);
    add_out(o, "exclusive cummin x2", lf_scan(g, LF_RED_MIN, x2, 0, true), 0);
    add_out(o, "cumsum i32 -> i64", lf_scan(g, LF_RED_SUM, k, 0, false), 0);
    add_out(o, "cummax i32", lf_scan(g, LF_RED_MAX, k, 0, false), 0);
    /* batched: [3, s] rows (along axis 1) and the short axis 0 (strided) */
    lf_node *m = lf_add(g, lf_expand_dims(g, x, 0), lf_reshape(g, lf_arange(g, LF_F32, 0, 3, 1), 2, SH(3, 1)));
    add_out(o, "cumsum rows [3,s] axis 1", lf_scan(g, LF_RED_SUM, m, 1, false), 0);
    add_out(o, "cumsum [3,s] axis 0 * 2", lf_mul(g, lf_scan(g, LF_RED_SUM, m, 0, false), lf_const(g, LF_F32, 2)), 0);
    /* rows end to end (a C-ordered input): 4 rows at once, then the rest one
       by one; in [1, 7, s] the groups stay within the run of 7 */
    lf_node *r7 = in_node(g, LF_F32, 2, SH(7, s), h[3]);
    add_out(o, "cumsum rows [7,s] axis 1", lf_scan(g, LF_RED_SUM, r7, 1, false), 0);
    add_out(o, "exclusive cummin [1,7,s] axis 2, + 1",
            lf_add(g, lf_scan(g, LF_RED_MIN, lf_reshape(g, r7, 3, SH(1, 7, s)), 2, true), lf_const(g, LF_F32, 1)), 0);
}

Test(cpu, sizes_scan, .timeout = 600) { sweep("scan", gen_scan, build_scan); }

/* (a3) gather and scatter: bit-identical to the reference at every size and
 * thread count: take with negative indices fused into a map, take_along_axis
 * over rows, histograms of floor(x*256) (counts and f32 weights: several
 * blocks, the blocked order), every scatter op into a large dst (one block),
 * SET with duplicates. */
static void gen_gather(int64_t s, void **h) {
    h[0] = rand_f32(s, 0, 1);
    h[1] = rand_i32(s, -s, s - 1);
    h[2] = rand_i32(3 * s, -3, 2);
}

static void build_gather(lf_graph *g, int64_t s, void *const *h, outset *o) {
    if (s == 0) return;
    lf_node *x = in_node(g, LF_F32, 1, &s, h[0]);
    lf_node *ii = in_node(g, LF_I32, 1, &s, h[1]);
    add_out(o, "x[idx]*2+1", lf_add(g, lf_mul(g, lf_gather(g, x, 0, ii), lf_const(g, LF_F32, 2)), lf_const(g, LF_F32, 1)), 0);
    lf_node *x3 = lf_reshape(g, lf_broadcast_to(g, lf_expand_dims(g, x, 1), 2, (int64_t[]){s, 3}), 2, (int64_t[]){s, 3});
    lf_node *i3 = in_node(g, LF_I32, 2, (int64_t[]){s, 3}, h[2]);
    add_out(o, "take_along_axis rows", lf_gather(g, lf_add(g, x3, lf_const(g, LF_F32, 0)), 1, i3), 0);
    lf_node *b = lf_cast(g, lf_map(g, lf_fn_parse(g, "(v) -> floor(v * 256)"), x), LF_I32);
    add_out(o, "histogram", lf_bincount(g, b, NULL, 256), 0);
    add_out(o, "weighted histogram f32", lf_bincount(g, b, x, 256), 0);
    /* add_out keeps the name's pointer: literals, not a local buffer */
    static const char *const what[] = {"scatter set into [s]", "scatter add into [s]", "scatter min into [s]",
                                       "scatter max into [s]", "scatter prod into [s]"};
    for (int op = 0; op <= LF_SCATTER_PROD; op++) {
        lf_node *dst = lf_map(g, lf_fn_parse(g, "(v) -> v + 0.5"), x);
        add_out(o, what[op], lf_scatter(g, (lf_scatter_op)op, dst, 0, ii, lf_map(g, lf_fn_parse(g, "(v) -> v * 1.25 - 0.5"), x)), 0);
    }
}

Test(cpu, sizes_gather_scatter, .timeout = 300) { sweep("gather/scatter", gen_gather, build_gather); }

/* x + 0.1*normal(seed) is one kernel that stores nothing but its output and
 * reads only x (a random load reads no memory); a new seed reuses the
 * compiled kernel (the seed is a parameter). */
Test(cpu, random_fuses_without_temporaries) {
    lf_ctx *c = cpu_ctx(2, LF_COMPILE_REQUIRE, NULL);
    int64_t n = 1001;
    float *xh = rand_f32(n, -1, 1);
    for (int round = 0; round < 2; round++) {
        lf_graph *g = lf_graph_new(c);
        lf_node *x = in_node(g, LF_F32, 1, &n, xh);
        lf_node *nz = lf_random(g, LF_F32, LF_RANDOM_NORMAL, 1, &n, 1000 + (uint64_t)round);
        lf_node *y = lf_add(g, x, lf_mul(g, lf_const(g, LF_F32, 0.1), nz));
        lf_buffer *d = lf_buffer_new_like(c, y);
        cr_assert_eq(lf_eval(g, 1, &y, &d), LF_OK, "%s", lf_errmsg(c));
        lf_eval_stats st;
        lf_ctx_last_stats(c, &st);
        cr_expect_eq(st.kernels, 1, "x + 0.1*normal: %d kernels", st.kernels);
        cr_expect_eq(st.bytes_materialized, 0, "x + 0.1*normal stored %zu bytes of temporaries", st.bytes_materialized);
        cr_expect_eq(st.bytes_read, (size_t)n * 4, "bytes read %zu: the random node must read nothing", st.bytes_read);
        cr_expect_eq(st.bytes_written, (size_t)n * 4);
        cr_expect_geq(st.temp_bytes_avoided, (size_t)n * 4 * 2, "unfused stores the normal and the product");
        if (round == 1) cr_expect_eq(st.kernels_compiled, 0, "a new seed recompiled (%d compiles)", st.kernels_compiled);
        /* the same values as the reference, bit for bit */
        float *got = raw_read(d);
        lf_ctx *r = ref_ctx();
        lf_graph *rg = lf_graph_new(r);
        lf_node *ry = lf_add(rg, in_node(rg, LF_F32, 1, &n, xh),
                             lf_mul(rg, lf_const(rg, LF_F32, 0.1),
                                    lf_random(rg, LF_F32, LF_RANDOM_NORMAL, 1, &n, 1000 + (uint64_t)round)));
        lf_buffer *rd = lf_buffer_new_like(r, ry);
        cr_assert_eq(lf_eval(rg, 1, &ry, &rd), LF_OK, "%s", lf_errmsg(r));
        float *want = raw_read(rd);
        expect_match("x + 0.1*normal vs the reference", LF_F32, got, want, n, 0);
        free(got);
        free(want);
        lf_ctx_destroy(r);
        lf_buffer_free(d);
        lf_graph_free(g);
    }
    free(xh);
    lf_ctx_destroy(c);
    expect_no_leak();
}

/* (b) sum, mean, max, argmax over everything, f32 and i32 (small integers:
 * many ties, argmax takes the first). */
static void gen_full(int64_t s, void **h) {
    h[0] = rand_f32(s, -1, 1);
    h[1] = rand_i32(s, -50, 50);
}

static void build_full(lf_graph *g, int64_t s, void *const *h, outset *o) {
    lf_node *xf = in_node(g, LF_F32, 1, &s, h[0]);
    lf_node *xi = in_node(g, LF_I32, 1, &s, h[1]);
    add_out(o, "sum f32", lf_reduce(g, LF_RED_SUM, xf, 0, NULL, false), 1e-5);
    add_out(o, "mean f32", lf_reduce(g, LF_RED_MEAN, xf, 0, NULL, false), 1e-5);
    add_out(o, "sum i32", lf_reduce(g, LF_RED_SUM, xi, 0, NULL, false), 0);
    add_out(o, "mean i32", lf_reduce(g, LF_RED_MEAN, xi, 0, NULL, false), 1e-12);
    if (s == 0) return; /* max and argmax of an empty set fail when built */
    add_out(o, "max f32", lf_reduce(g, LF_RED_MAX, xf, 0, NULL, false), 0);
    add_out(o, "argmax f32", lf_reduce(g, LF_RED_ARGMAX, xf, 0, NULL, false), 0);
    add_out(o, "max i32", lf_reduce(g, LF_RED_MAX, xi, 0, NULL, false), 0);
    add_out(o, "argmax i32", lf_reduce(g, LF_RED_ARGMAX, xi, 0, NULL, false), 0);
}

Test(cpu, sizes_full_reductions, .timeout = 300) { sweep("full reductions", gen_full, build_full); }

/* (b2) outputs of different shapes in one pass (plan_merge.c absorb_space):
 * a map over x[s] with the sum of x*x and the argmax (full reductions); a
 * map over [3, s] with its row sums (inner); a map over [s, 3] with its
 * column minima (outer). Each map is stored in pass 0 of its reduction's
 * kernel. */
static void gen_shapes(int64_t s, void **h) {
    h[0] = rand_f32(s, -3, 3);
    h[1] = rand_f32(3 * s, -3, 3);
}

static void build_shapes(lf_graph *g, int64_t s, void *const *h, outset *o) {
    lf_node *x = in_node(g, LF_F32, 1, &s, h[0]);
    lf_node *r = in_node(g, LF_F32, 2, SH(3, s), h[1]);
    lf_node *c = in_node(g, LF_F32, 2, SH(s, 3), h[1]);
    add_out(o, "x*3 + 1", lf_add(g, lf_mul(g, x, lf_const(g, LF_F32, 3)), lf_const(g, LF_F32, 1)), 0);
    add_out(o, "sum(x*x)", lf_reduce(g, LF_RED_SUM, lf_mul(g, x, x), 0, NULL, false), 1e-6);
    add_out(o, "abs(r) - 2", lf_sub(g, lf_abs(g, r), lf_const(g, LF_F32, 2)), 0);
    add_out(o, "row sums of r*r", lf_reduce(g, LF_RED_SUM, lf_mul(g, r, r), 1, AX(1), false), 1e-6);
    add_out(o, "c / 2", lf_div(g, c, lf_const(g, LF_F32, 2)), 0);
    if (s == 0) return; /* min and argmax of an empty set fail when built */
    add_out(o, "argmax x", lf_reduce(g, LF_RED_ARGMAX, lf_abs(g, x), 0, NULL, false), 0);
    add_out(o, "column minima of c", lf_reduce(g, LF_RED_MIN, lf_sub(g, c, lf_const(g, LF_F32, 1)), 1, AX(0), true), 0);
}

Test(cpu, sizes_outputs_of_different_shapes, .timeout = 300) {
    sweep("outputs of different shapes", gen_shapes, build_shapes);
}

/* (c) softmax over rows of [3, s]; the row argmax too. */
enum { SOFTMAX_ROWS = 3 };

static void gen_softmax(int64_t s, void **h) { h[0] = rand_f32(SOFTMAX_ROWS * s, -5, 5); }

static void build_softmax(lf_graph *g, int64_t s, void *const *h, outset *o) {
    if (s == 0) return; /* the row max of an empty row fails when built */
    lf_node *x = in_node(g, LF_F32, 2, SH(SOFTMAX_ROWS, s), h[0]);
    lf_node *m = lf_reduce(g, LF_RED_MAX, x, 1, AX(1), true);
    lf_node *e = lf_exp(g, lf_sub(g, x, m));
    lf_node *sm = lf_div(g, e, lf_reduce(g, LF_RED_SUM, e, 1, AX(1), true));
    add_out(o, "softmax", sm, 1e-5);
    add_out(o, "row argmax", lf_reduce(g, LF_RED_ARGMAX, x, 1, AX(-1), false), 0);
}

Test(cpu, sizes_softmax, .timeout = 300) { sweep("row softmax", gen_softmax, build_softmax); }

/* Row keeps (fusion/plan_keep.c): softmax's exp(x - max) is stored in the
 * sum's pass and read back by the row pass when a row fits the keep buffer
 * (CG_KEEP_BYTES), computed again when it does not; both ways give the same
 * bits. Rows of KEEP_LEN (kept) and KEEP_LEN + 1 (recomputed: the extra
 * element is -inf, whose exp is +0, so the max, the sum and every other
 * output are unchanged) agree bit for bit, at 1 and 3 threads, f32 and f64;
 * the source shows the keep. */
static void row_keep_edge(lf_dtype t) {
    const int64_t KEEP_LEN = CG_KEEP_BYTES / (int64_t)lf_dtype_size(t), R = 3, L = KEEP_LEN + 1;
    double *v = malloc((size_t)(R * L) * sizeof *v);
    cr_assert_not_null(v);
    for (int64_t i = 0; i < R * L; i++) v[i] = (double)((i * 7919) % 2003) / 200.0 - 5.0;
    for (int64_t r = 0; r < R; r++) v[r * L + L - 1] = -INFINITY;
    for (int threads = 1; threads <= 3; threads += 2) {
        setenv("LF_CPU_PARALLEL_MIN", "1", 1);
        lf_ctx *c = cpu_ctx(threads, LF_COMPILE_REQUIRE, NULL);
        unsetenv("LF_CPU_PARALLEL_MIN");
        double *got[2];
        for (int k = 0; k < 2; k++) { /* k = 0: rows of KEEP_LEN (the first columns), 1: of L */
            int64_t len = k ? L : KEEP_LEN;
            lf_graph *g = lf_graph_new(c);
            lf_node *x = lf_slice(g, lf_input(g, tu_buf(c, t, 2, (int64_t[]){R, L}, v)), 1, 0, len, 1);
            lf_node *m = lf_reduce(g, LF_RED_MAX, x, 1, AX(1), true);
            lf_node *e = lf_exp(g, lf_sub(g, x, m));
            lf_node *y = lf_div(g, e, lf_reduce(g, LF_RED_SUM, e, 1, AX(1), true));
            lf_buffer *d = lf_buffer_new_like(c, y);
            setenv("LF_DEBUG", "source", 1);
            tu_capture_stderr_start();
            lf_status st = lf_eval(g, 1, &y, &d);
            char *src = tu_capture_stderr_end();
            unsetenv("LF_DEBUG");
            cr_assert_eq(st, LF_OK, "%s", lf_errmsg(c));
            if (k == 0) cr_expect(strstr(src, "kept for the row pass") && strstr(src, "kept */"),
                                  "the row keep is missing from the source:\n%s", src);
            free(src);
            got[k] = malloc((size_t)(R * len) * sizeof(double));
            cr_assert_not_null(got[k]);
            tu_read(d, got[k]);
            lf_buffer_free(d);
            lf_graph_free(g);
        }
        for (int64_t r = 0; r < R; r++)
            for (int64_t j = 0; j < KEEP_LEN; j++) {
                double a = got[0][r * KEEP_LEN + j], b = got[1][r * L + j];
                cr_assert(!memcmp(&a, &b, sizeof a), "%s, %d threads, row %" PRId64 " element %" PRId64
                          ": kept %a, recomputed %a", lf_dtype_name(t), threads, r, j, a, b);
            }
        for (int64_t r = 0; r < R; r++)
            cr_assert(got[1][r * L + L - 1] == 0.0, "the -inf element's softmax is %g", got[1][r * L + L - 1]);
        free(got[0]);
        free(got[1]);
        lf_ctx_destroy(c);
    }
    free(v);
    expect_no_leak();
}

Test(cpu, row_keep_same_bits_as_recomputing_f32, .timeout = 300) { row_keep_edge(LF_F32); }
Test(cpu, row_keep_same_bits_as_recomputing_f64, .timeout = 300) { row_keep_edge(LF_F64); }

/* Issue 30, softmax_rows and layer_norm against a hand-written C loop: the
 * class of row reduce-then-map kernels. (a) A row max of f32 keeps its lane
 * accumulators in float (exact: a max only picks), not double, half the
 * vector work. (b) The 8-lane (AVX2) variant of a vector math function is
 * libmvec's 8-lane variant itself: GCC 12 vectorizes with 256-bit vectors on
 * AVX-512 CPUs too, and a 16-lane canonical variant made each 8-lane call
 * compute 16 exps. Results still match the reference within libmvec's
 * accuracy, NaN and -inf rows included. */
Test(cpu, softmax_row_max_in_float_and_exp_at_loop_width) {
    enum { R = 5, L = 300 };
    float *v = rand_f32(R * L, -20, 20);
    v[7] = NAN;
    for (int64_t j = 0; j < L; j++) v[2 * L + j] = -INFINITY;
    lf_ctx *c = cpu_ctx(2, LF_COMPILE_REQUIRE, NULL);
    lf_graph *g = lf_graph_new(c);
    lf_node *x = in_node(g, LF_F32, 2, (int64_t[]){R, L}, v);
    lf_node *m = lf_reduce(g, LF_RED_MAX, x, 1, AX(1), true);
    lf_node *e = lf_exp(g, lf_sub(g, x, m));
    lf_node *y = lf_div(g, e, lf_reduce(g, LF_RED_SUM, e, 1, AX(1), true));
    lf_node *mn = lf_reduce(g, LF_RED_MIN, x, 1, AX(1), false);
    setenv("LF_DEBUG", "source", 1);
    tu_capture_stderr_start();
    check_vs_reference("softmax", g, 2, (lf_node *[]){y, mn}, (const double[]){1e-5, 0});
    char *src = tu_capture_stderr_end();
    unsetenv("LF_DEBUG");
    cr_expect(strstr(src, "float acc"), "no float accumulator for the row max / min:\n%s", src);
    cr_expect(strstr(src, "const float x = "), "the max folds a double:\n%s", src);
    if (strstr(src, "LF_SIMD float lf_expf(float)"))
        cr_expect(strstr(src, "_ZGVdN8v_lf_expf\");\nLF_VWRAP lf_f8 lf_d_expf(lf_f8 x) { return _ZGVdN8v_expf(x); }"),
                  "the 8-lane expf is not libmvec's 8-lane one:\n%s", src);
    free(src);
    lf_graph_free(g);
    lf_ctx_destroy(c);
    free(v);
    expect_no_leak();
}

/* (d) reductions over axis 0 of [5, s] and of [s, 3]. */
static void gen_columns(int64_t s, void **h) {
    h[0] = rand_f32(5 * s, -1, 1);
    h[1] = rand_f32(3 * s, -1, 1);
}

static void build_columns(lf_graph *g, int64_t s, void *const *h, outset *o) {
    lf_node *a = in_node(g, LF_F32, 2, SH(5, s), h[0]);
    lf_node *b = in_node(g, LF_F32, 2, SH(s, 3), h[1]);
    add_out(o, "sum axis 0 of [5, s]", lf_reduce(g, LF_RED_SUM, a, 1, AX(0), false), 1e-5);
    add_out(o, "argmax axis 0 of [5, s]", lf_reduce(g, LF_RED_ARGMAX, a, 1, AX(0), false), 0);
    add_out(o, "sum axis 0 of [s, 3]", lf_reduce(g, LF_RED_SUM, b, 1, AX(0), false), 1e-5);
    if (s) add_out(o, "argmax axis 0 of [s, 3]", lf_reduce(g, LF_RED_ARGMAX, b, 1, AX(0), false), 0);
}

Test(cpu, sizes_column_reductions, .timeout = 300) { sweep("column reductions", gen_columns, build_columns); }

/* (e) reductions over axes (0, 2) of [3, 4, s] and of [s, 3, 2]. */
static void gen_axes02(int64_t s, void **h) {
    h[0] = rand_f32(12 * s, -1, 1);
    h[1] = rand_f32(6 * s, -1, 1);
}

static void build_axes02(lf_graph *g, int64_t s, void *const *h, outset *o) {
    lf_node *a = in_node(g, LF_F32, 3, SH(3, 4, s), h[0]);
    lf_node *b = in_node(g, LF_F32, 3, SH(s, 3, 2), h[1]);
    add_out(o, "sum (0,2) of [3, 4, s]", lf_reduce(g, LF_RED_SUM, a, 2, AX(0, 2), false), 1e-5);
    add_out(o, "sum (0,2) of [s, 3, 2]", lf_reduce(g, LF_RED_SUM, b, 2, AX(0, 2), true), 1e-5);
    if (!s) return;
    add_out(o, "max (0,2) of [3, 4, s]", lf_reduce(g, LF_RED_MAX, a, 2, AX(0, 2), false), 0);
    add_out(o, "argmin (0,2) of [3, 4, s]", lf_reduce(g, LF_RED_ARGMIN, a, 2, AX(0, 2), false), 0);
    add_out(o, "argmin (0,2) of [s, 3, 2]", lf_reduce(g, LF_RED_ARGMIN, b, 2, AX(0, -1), false), 0);
}

Test(cpu, sizes_axes_0_2, .timeout = 300) { sweep("reduction over axes (0, 2)", gen_axes02, build_axes02); }

/* ==== 2. NaN, Inf, -0 and integer corner cases ================================== */

static const double SPECIAL_BIN[] = {0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, 1e30, -1e-30, 1e-40,
                                     INFINITY, -INFINITY, NAN, -NAN};
enum { NSB = sizeof SPECIAL_BIN / sizeof SPECIAL_BIN[0] };

static const double SPECIAL_UN[] = {
    0.0,          -0.0,          0.5,           -0.5,          1.5,           -1.5,          2.5,
    -2.5,         3.5,           -3.5,          0.49999997,    -0.49999997,   1.0,           -1.0,
    7.0,          -7.0,          1e20,          -1e20,         8388607.5,     -8388607.5,    4503599627370495.5,
    -4503599627370495.5,       2147483647.0,  2147483647.5,  2147483648.0,  -2147483648.0, -2147483648.5,
    -2147483649.0, 3e9,          -3e9,          9.2e18,        -9.2e18,       9223372036854775807.0,
    -9223372036854775808.0,    1e19,          -1e19,         1e300,         -1e300,        1e-40,
    -1e-40,       1e-310,        FLT_MAX,       -FLT_MAX,      DBL_MAX,       INFINITY,      -INFINITY,
    NAN,          -NAN};
enum { NSU = sizeof SPECIAL_UN / sizeof SPECIAL_UN[0] };

/* An input of dtype t (f32 or f64) holding vals (converted as C does). */
static lf_node *float_input(lf_graph *g, lf_dtype t, int ndim, const int64_t *shape, const double *vals, int n) {
    if (t == LF_F64) return in_node(g, t, ndim, shape, vals);
    float *f = xmalloc((size_t)n * sizeof *f);
    for (int i = 0; i < n; i++) f[i] = (float)vals[i];
    lf_node *x = in_node(g, t, ndim, shape, f);
    free(f);
    return x;
}

/* Every op of bin (on all pairs of vals) and of un, and every cast, each in a
 * kernel of its own over a long flat array (each output gets another length,
 * so nothing is merged): a kernel storing many outputs may stay scalar, a
 * lone op is the loop GCC vectorizes, and that is the code path to check. */
static void ops_alone(const char *what, lf_dtype t, const void *vals, int nv, const lf_op *bin, int nbin,
                      const lf_op *un, int nun) {
    enum { REP = 6, MAXOPS = 64 };
    size_t es = lf_dtype_size(t);
    int64_t np = (int64_t)nv * nv * REP, nu = (int64_t)nv * 16 * REP;
    int64_t cap = (np > nu ? np : nu) + MAXOPS;
    char *xv = xmalloc((size_t)cap * es), *yv = xmalloc((size_t)cap * es), *uv = xmalloc((size_t)cap * es);
    for (int64_t i = 0; i < cap; i++) {
        memcpy(xv + i * es, (const char *)vals + ((i / nv) % nv) * es, es);
        memcpy(yv + i * es, (const char *)vals + (i % nv) * es, es);
        memcpy(uv + i * es, (const char *)vals + ((i * 7) % nv) * es, es);
    }
    lf_ctx *c = cpu_ctx(2, LF_COMPILE_REQUIRE, NULL);
    lf_graph *g = lf_graph_new(c);
    lf_node *outs[MAXOPS];
    int n = 0;
    for (int k = 0; k < nbin; k++, n++) {
        int64_t len = np + n;
        outs[n] = lf_apply(g, bin[k], in_node(g, t, 1, &len, xv), in_node(g, t, 1, &len, yv), NULL);
    }
    for (int k = 0; k < nun + LF_NDTYPES; k++) {
        if (k >= nun && (lf_dtype)(k - nun) == t) continue; /* no identity cast */
        cr_assert(n < MAXOPS);
        int64_t len = nu + n;
        lf_node *u = in_node(g, t, 1, &len, uv);
        outs[n++] = k < nun ? lf_apply(g, un[k], u, NULL, NULL) : lf_cast(g, u, (lf_dtype)(k - nun));
    }
    lf_eval_stats st = check_vs_reference(what, g, n, outs, NULL);
    cr_assert(st.kernels == n && st.kernels_compiled == n, "%s: %d outputs, %d kernels, %d compiled", what, n,
              st.kernels, st.kernels_compiled);
    lf_graph_free(g);
    lf_ctx_destroy(c);
    free(xv);
    free(yv);
    free(uv);
}

static void float_specials(lf_dtype t) {
    lf_ctx *c = cpu_ctx(2, LF_COMPILE_REQUIRE, NULL);
    lf_graph *g = lf_graph_new(c);
    char what[128];
    /* binary operators on every pair: x [m, 1] against y [1, m] */
    lf_node *x = float_input(g, t, 2, SH(NSB, 1), SPECIAL_BIN, NSB);
    lf_node *y = float_input(g, t, 2, SH(1, NSB), SPECIAL_BIN, NSB);
    static const lf_op bin[] = {LF_OP_ADD, LF_OP_SUB, LF_OP_MUL, LF_OP_DIV, LF_OP_MOD, LF_OP_MIN,
                                LF_OP_MAX, LF_OP_LT,  LF_OP_LE,  LF_OP_GT,  LF_OP_GE,  LF_OP_EQ,
                                LF_OP_NE,  LF_OP_AND, LF_OP_OR,  LF_OP_FLOORDIV};
    enum { NBIN = sizeof bin / sizeof bin[0] };
    lf_node *outs[NBIN + 2];
    for (int i = 0; i < NBIN; i++) outs[i] = lf_apply(g, bin[i], x, y, NULL);
    outs[NBIN] = lf_select(g, lf_lt(g, x, y), x, y);
    outs[NBIN + 1] = lf_select(g, x, y, lf_neg(g, y)); /* NaN and -0 as conditions */
    snprintf(what, sizeof what, "%s binary operators on special pairs", lf_dtype_name(t));
    check_vs_reference(what, g, NBIN + 2, outs, NULL);
    /* unary operators and casts */
    lf_node *u = float_input(g, t, 1, SH(NSU), SPECIAL_UN, NSU);
    static const lf_op un[] = {LF_OP_NEG,   LF_OP_ABS,  LF_OP_SIGN,  LF_OP_FLOOR, LF_OP_CEIL,
                               LF_OP_ROUND, LF_OP_TRUNC, LF_OP_ISNAN, LF_OP_ISINF, LF_OP_NOT,
                               LF_OP_SQRT,  LF_OP_RSQRT};
    enum { NUN = sizeof un / sizeof un[0] };
    lf_node *uo[NUN + 5];
    for (int i = 0; i < NUN; i++) uo[i] = lf_apply(g, un[i], u, NULL, NULL);
    uo[NUN] = lf_cast(g, u, LF_I32);
    uo[NUN + 1] = lf_cast(g, u, LF_I64);
    uo[NUN + 2] = lf_cast(g, u, LF_BOOL);
    uo[NUN + 3] = lf_cast(g, u, t == LF_F32 ? LF_F64 : LF_F32);
    uo[NUN + 4] = lf_zipwith(g, lf_fn_parse(g, "(a) -> i32(a * 2.0) + i32(-a)"), 1, &u);
    snprintf(what, sizeof what, "%s unary operators and casts on special values", lf_dtype_name(t));
    check_vs_reference(what, g, NUN + 5, uo, NULL);
    lf_graph_free(g);
    lf_ctx_destroy(c);
    /* the same operators one kernel each, on every pair again */
    double *vals = xmalloc(NSU * sizeof *vals);
    float *v32 = xmalloc(NSU * sizeof *v32);
    for (int i = 0; i < NSU; i++) vals[i] = SPECIAL_UN[i], v32[i] = (float)SPECIAL_UN[i];
    snprintf(what, sizeof what, "%s operators one kernel each", lf_dtype_name(t));
    ops_alone(what, t, t == LF_F32 ? (const void *)v32 : (const void *)vals, NSU, bin, NBIN, un, NUN);
    free(vals);
    free(v32);
}

Test(cpu, ieee_f32) {
    float_specials(LF_F32);
    expect_no_leak();
}

Test(cpu, ieee_f64) {
    float_specials(LF_F64);
    expect_no_leak();
}

/* float -> integer -> float keeps the integer's +0.0: a value in (-1, 0) or
 * -0.0 truncates to the integer 0, which converts back to +0.0, never -0.0
 * (GCC under -fno-trapping-math rewrote (double)(int32_t)x as trunc(x), giving
 * -0.0 in the scalar loop tails only). Every float dtype in, every integer
 * dtype between, every float dtype out, as cast nodes and inside fns; lengths
 * 1..37 put each value both in vectorized bodies and in scalar tails; each
 * result is bit-compared with the reference, and 1/x turns a wrong zero sign
 * into -inf. */
Test(cpu, cast_round_trip_zero_sign, .timeout = 300) {
    static const double v[] = {-0.5, -0.999, -0.0, -1e-300, -1e-40, -0.49999997, 0.0, 0.5, -1.5, 2.5};
    enum { NV = sizeof v / sizeof v[0] };
    static const lf_dtype fts[] = {LF_F32, LF_F64}, its[] = {LF_I32, LF_I64};
    lf_ctx *c = cpu_ctx(2, LF_COMPILE_REQUIRE, NULL);
    for (int fi = 0; fi < 2; fi++) {
        lf_graph *g = lf_graph_new(c);
        lf_node *outs[32];
        int n = 0;
        for (int64_t len = 1; len <= 37; len += 9) {
            double vals[40];
            for (int64_t i = 0; i < len; i++) vals[i] = v[(i * 3 + len) % NV];
            lf_node *x = float_input(g, fts[fi], 1, &len, vals, (int)len);
            for (int ii = 0; ii < 2; ii++)
                for (int fo = 0; fo < 2; fo++)
                    outs[n++] = lf_div(g, lf_const(g, LF_F64, 1.0),
                                       lf_cast(g, lf_cast(g, x, its[ii]), fts[fo]));
            outs[n++] = lf_zipwith(g, lf_fn_parse(g, "(a) -> 1 / (i32(a) + 0.0)"), 1, &x);
            outs[n++] = lf_zipwith(g, lf_fn_parse(g, "(a) -> 1.0 / f32(i64(a))"), 1, &x);
        }
        cr_assert(n <= 32);
        char what[96];
        snprintf(what, sizeof what, "%s -> integer -> float round trips", lf_dtype_name(fts[fi]));
        check_vs_reference(what, g, n, outs, NULL);
        lf_graph_free(g);
    }
    lf_ctx_destroy(c);
    expect_no_leak();
}

static void int_specials(lf_dtype t) {
    lf_ctx *c = cpu_ctx(2, LF_COMPILE_REQUIRE, NULL);
    lf_graph *g = lf_graph_new(c);
    int64_t v64[] = {0, 1, -1, 2, -2, 3, -3, 7, -7, 31, 63, 64, INT32_MAX, INT32_MIN, INT32_MAX - 1,
                     INT64_MAX, INT64_MIN, (int64_t)1 << 32, -((int64_t)1 << 32) - 5};
    enum { NV = sizeof v64 / sizeof v64[0] };
    int32_t v32[NV];
    for (int i = 0; i < NV; i++) v32[i] = (int32_t)(uint32_t)(uint64_t)v64[i]; /* wraps */
    const void *vals = t == LF_I32 ? (const void *)v32 : (const void *)v64;
    lf_node *x = in_node(g, t, 2, SH(NV, 1), vals), *y = in_node(g, t, 2, SH(1, NV), vals);
    static const lf_op bin[] = {LF_OP_ADD,    LF_OP_SUB,      LF_OP_MUL,    LF_OP_DIV,   LF_OP_MOD,
                                LF_OP_POW,    LF_OP_MIN,      LF_OP_MAX,    LF_OP_LT,    LF_OP_GE,
                                LF_OP_EQ,     LF_OP_AND,      LF_OP_FLOORDIV, LF_OP_BITAND, LF_OP_BITOR,
                                LF_OP_BITXOR, LF_OP_LSHIFT,   LF_OP_RSHIFT};
    enum { NBIN = sizeof bin / sizeof bin[0] };
    lf_node *outs[NBIN + 1];
    for (int i = 0; i < NBIN; i++) outs[i] = lf_apply(g, bin[i], x, y, NULL);
    outs[NBIN] = lf_select(g, lf_lt(g, x, y), lf_mul(g, x, x), y);
    char what[128];
    snprintf(what, sizeof what, "%s binary operators on corner pairs", lf_dtype_name(t));
    check_vs_reference(what, g, NBIN + 1, outs, NULL);
    lf_node *u = in_node(g, t, 1, SH(NV), vals);
    lf_node *uo[] = {lf_neg(g, u),          lf_abs(g, u),          lf_sign(g, u),         lf_floor(g, u),
                     lf_round(g, u),        lf_cast(g, u, LF_I32), lf_cast(g, u, LF_I64), lf_cast(g, u, LF_F32),
                     lf_cast(g, u, LF_F64), lf_cast(g, u, LF_BOOL), lf_isnan(g, u),       lf_sqrt(g, u),
                     lf_bitwise_not(g, u)};
    snprintf(what, sizeof what, "%s unary operators and casts on corner values", lf_dtype_name(t));
    check_vs_reference(what, g, (int)(sizeof uo / sizeof uo[0]), uo, NULL);
    lf_graph_free(g);
    lf_ctx_destroy(c);
    static const lf_op un[] = {LF_OP_NEG, LF_OP_ABS, LF_OP_SIGN, LF_OP_FLOOR, LF_OP_NOT, LF_OP_SQRT,
                               LF_OP_BITNOT};
    snprintf(what, sizeof what, "%s operators one kernel each", lf_dtype_name(t));
    ops_alone(what, t, vals, NV, bin, NBIN, un, (int)(sizeof un / sizeof un[0]));
}

Test(cpu, integer_corners) {
    int_specials(LF_I32);
    int_specials(LF_I64);
    /* the documented values themselves, not only agreement with the reference */
    lf_ctx *c = cpu_ctx(1, LF_COMPILE_REQUIRE, NULL);
    lf_graph *g = lf_graph_new(c);
    int32_t a[] = {7, -7, INT32_MIN, 2, -1, 1, -1, 0, INT32_MAX};
    int32_t b[] = {0, -1, -1, -3, -3, -5, -4, -2, 1};
    lf_node *x = in_node(g, LF_I32, 1, SH(9), a), *y = in_node(g, LF_I32, 1, SH(9), b);
    lf_node *outs[] = {lf_mod(g, x, y), lf_pow(g, x, y), lf_add(g, x, y)};
    lf_buffer *d[3];
    for (int i = 0; i < 3; i++) d[i] = lf_buffer_new_like(c, outs[i]);
    cr_assert_eq(lf_eval(g, 3, outs, d), LF_OK, "%s", lf_errmsg(c));
    int32_t mod[9], pw[9], add[9];
    lf_buffer_read(d[0], mod, sizeof mod);
    lf_buffer_read(d[1], pw, sizeof pw);
    lf_buffer_read(d[2], add, sizeof add);
    int32_t want_mod[] = {0, 0, 0, -1, -1, -4, -1, 0, 0};
    int32_t want_pow[] = {1, 0, 0, 0, -1, 1, 1, 0, INT32_MAX};
    int32_t want_add[] = {7, -8, INT32_MAX, -1, -4, -4, -5, -2, INT32_MIN};
    for (int i = 0; i < 9; i++) {
        cr_expect_eq(mod[i], want_mod[i], "%d %% %d = %d, want %d", a[i], b[i], mod[i], want_mod[i]);
        cr_expect_eq(pw[i], want_pow[i], "%d ** %d = %d, want %d", a[i], b[i], pw[i], want_pow[i]);
        cr_expect_eq(add[i], want_add[i], "%d + %d = %d, want %d (wrapping)", a[i], b[i], add[i], want_add[i]);
    }
    lf_graph_free(g);
    lf_ctx_destroy(c);
    expect_no_leak();
}

/* The integer operators of issue 13, compiled: the documented values
 * themselves (NumPy's), not only agreement with the reference. */
Test(cpu, integer_operator_values) {
    lf_ctx *c = cpu_ctx(1, LF_COMPILE_REQUIRE, NULL);
    lf_graph *g = lf_graph_new(c);
    enum { N = 12 };
    int32_t a[N] = {7, -7, INT32_MIN, INT32_MIN, 5, -5, 1, -1, 29, -29, 3, INT32_MAX};
    int32_t b[N] = {2, 2, -1, 0, 32, 32, -1, -1, 2, 2, 31, INT32_MIN};
    lf_node *x = in_node(g, LF_I32, 1, SH(N), a), *y = in_node(g, LF_I32, 1, SH(N), b);
    lf_node *outs[] = {lf_floor_divide(g, x, y), lf_left_shift(g, x, y), lf_right_shift(g, x, y),
                       lf_bitwise_xor(g, x, lf_bitwise_not(g, y))};
    lf_buffer *d[4];
    for (int i = 0; i < 4; i++) d[i] = lf_buffer_new_like(c, outs[i]);
    cr_assert_eq(lf_eval(g, 4, outs, d), LF_OK, "%s", lf_errmsg(c));
    int32_t got[4][N];
    for (int i = 0; i < 4; i++) lf_buffer_read(d[i], got[i], sizeof got[i]);
    int32_t want_fd[N] = {3, -4, INT32_MIN, 0, 0, -1, -1, 1, 14, -15, 0, -1};
    int32_t want_shl[N] = {28, -28, 0, INT32_MIN, 0, 0, 0, 0, 116, -116, INT32_MIN, 0};
    int32_t want_shr[N] = {1, -2, -1, INT32_MIN, 0, -1, 0, -1, 7, -8, 0, 0};
    for (int i = 0; i < N; i++) {
        cr_expect_eq(got[0][i], want_fd[i], "%d // %d = %d, want %d", a[i], b[i], got[0][i], want_fd[i]);
        cr_expect_eq(got[1][i], want_shl[i], "%d << %d = %d, want %d", a[i], b[i], got[1][i], want_shl[i]);
        cr_expect_eq(got[2][i], want_shr[i], "%d >> %d = %d, want %d", a[i], b[i], got[2][i], want_shr[i]);
        cr_expect_eq(got[3][i], a[i] ^ ~b[i], "%d ^ ~%d = %d", a[i], b[i], got[3][i]);
    }
    lf_graph_free(g);
    /* bool: logical; float //: NumPy's signs of zero, inf and NaN */
    g = lf_graph_new(c);
    uint8_t p[4] = {0, 0, 1, 1}, q[4] = {0, 1, 0, 1};
    lf_node *bp = in_node(g, LF_BOOL, 1, SH(4), p), *bq = in_node(g, LF_BOOL, 1, SH(4), q);
    double fa[] = {-0.0, 0.0, -1.0, 1.0, 1.0, 0.0, INFINITY, -7.5, 7.0, 1e300};
    double fb[] = {3.0, -3.0, INFINITY, INFINITY, 0.0, 0.0, 1.0, 2.0, -2.0, 1e-300};
    double fw[] = {-0.0, -0.0, -1.0, 0.0, INFINITY, NAN, NAN, -4.0, -4.0, INFINITY};
    enum { NF = sizeof fa / sizeof fa[0] };
    lf_node *fx = in_node(g, LF_F64, 1, SH(NF), fa), *fy = in_node(g, LF_F64, 1, SH(NF), fb);
    lf_node *bo[] = {lf_bitwise_and(g, bp, bq), lf_bitwise_or(g, bp, bq), lf_bitwise_xor(g, bp, bq),
                     lf_bitwise_not(g, bp), lf_floor_divide(g, fx, fy)};
    lf_buffer *e[5];
    for (int i = 0; i < 5; i++) e[i] = lf_buffer_new_like(c, bo[i]);
    cr_assert_eq(lf_eval(g, 5, bo, e), LF_OK, "%s", lf_errmsg(c));
    for (int i = 0; i < 4; i++) cr_expect_eq(lf_node_dtype(bo[i]), LF_BOOL);
    uint8_t r[4][4];
    for (int i = 0; i < 4; i++) lf_buffer_read(e[i], r[i], 4);
    for (int k = 0; k < 4; k++) {
        cr_expect_eq(r[0][k], p[k] & q[k]);
        cr_expect_eq(r[1][k], p[k] | q[k]);
        cr_expect_eq(r[2][k], p[k] ^ q[k]);
        cr_expect_eq(r[3][k], !p[k]);
    }
    double fr[NF];
    lf_buffer_read(e[4], fr, sizeof fr);
    for (int i = 0; i < NF; i++)
        cr_expect(isnan(fw[i]) ? isnan(fr[i]) : fr[i] == fw[i] && signbit(fr[i]) == signbit(fw[i]),
                  "%g // %g = %g, want %g", fa[i], fb[i], fr[i], fw[i]);
    lf_graph_free(g);
    lf_ctx_destroy(c);
    expect_no_leak();
}

/* Exact values of the documented float semantics, checked directly. */
Test(cpu, ieee_documented_values) {
    lf_ctx *c = cpu_ctx(1, LF_COMPILE_REQUIRE, NULL);
    lf_graph *g = lf_graph_new(c);
    float v[] = {-0.0f, 0.5f, -0.5f, 1.5f, -1.5f, 2.5f, -2.5f, NAN, INFINITY, -INFINITY, 3e9f, -3e9f};
    enum { NV = sizeof v / sizeof v[0] };
    lf_node *x = in_node(g, LF_F32, 1, SH(NV), v);
    lf_node *outs[] = {lf_abs(g, x), lf_round(g, x), lf_cast(g, x, LF_I32), lf_maximum(g, x, lf_const(g, LF_F32, 0)),
                       lf_sign(g, x)};
    lf_buffer *d[5];
    for (int i = 0; i < 5; i++) d[i] = lf_buffer_new_like(c, outs[i]);
    cr_assert_eq(lf_eval(g, 5, outs, d), LF_OK, "%s", lf_errmsg(c));
    float ab[NV], rd[NV], mx[NV], sg[NV];
    int32_t ci[NV];
    lf_buffer_read(d[0], ab, sizeof ab);
    lf_buffer_read(d[1], rd, sizeof rd);
    lf_buffer_read(d[2], ci, sizeof ci);
    lf_buffer_read(d[3], mx, sizeof mx);
    lf_buffer_read(d[4], sg, sizeof sg);
    cr_expect(ab[0] == 0 && !signbit(ab[0]), "abs(-0.0) = %a, want +0", ab[0]);
    float want_round[] = {-0.0f, 0.0f, -0.0f, 2.0f, -2.0f, 2.0f, -2.0f};
    for (int i = 0; i < 7; i++)
        cr_expect(rd[i] == want_round[i] && signbit(rd[i]) == signbit(want_round[i]), "round(%g) = %a, want %a", v[i],
                  rd[i], want_round[i]);
    int32_t want_ci[] = {0, 0, 0, 1, -1, 2, -2, 0, INT32_MAX, INT32_MIN, INT32_MAX, INT32_MIN};
    for (int i = 0; i < NV; i++) cr_expect_eq(ci[i], want_ci[i], "i32(%g) = %d, want %d", v[i], ci[i], want_ci[i]);
    cr_expect(isnan(mx[7]), "max(NaN, 0) = %g, want NaN", mx[7]);
    cr_expect(isnan(sg[7]) && sg[0] == 0 && !signbit(sg[0]), "sign(NaN) = %g, sign(-0) = %a (NumPy: +0)", sg[7], sg[0]);
    lf_graph_free(g);
    lf_ctx_destroy(c);
    expect_no_leak();
}

/* min, max, argmin, argmax (and sum) over arrays holding NaN or only
 * infinities, as full reductions split over several blocks and threads, as
 * inner (per row) and as outer (per column) reductions. */
static void nan_reductions(lf_dtype t) {
    setenv("LF_CPU_PARALLEL_MIN", "1", 1);
    lf_ctx *c = cpu_ctx(3, LF_COMPILE_REQUIRE, NULL);
    enum { N = 50000 };
    double *v = xmalloc(N * sizeof *v);
    /* cases: 0 NaN in blocks 1 and 2; 1 all +Inf; 2 all -Inf; 3 all NaN;
     * 4 -Inf first then NaN; 5 NaN at the last element only */
    for (int cs = 0; cs < 6; cs++) {
        for (int i = 0; i < N; i++) {
            switch (cs) {
            case 0: v[i] = tu_uniform(-1, 1); break;
            case 1: v[i] = INFINITY; break;
            case 2: v[i] = -INFINITY; break;
            case 3: v[i] = NAN; break;
            default: v[i] = tu_uniform(-1e30, 1e30); break;
            }
        }
        if (cs == 0) v[20000] = v[40000] = NAN, v[30000] = -INFINITY, v[100] = INFINITY;
        if (cs == 4) v[7] = -INFINITY, v[17000] = NAN, v[49000] = NAN;
        if (cs == 5) v[N - 1] = NAN;
        int64_t sizes[] = {N, 1000, 17};
        for (int si = 0; si < 3; si++) {
            int64_t n = sizes[si];
            lf_graph *g = lf_graph_new(c);
            lf_node *x = float_input(g, t, 1, &n, v + (N - n), (int)n);
            /* the same values as [r, cols] (inner) and transposed (outer) */
            int64_t cols = n == N ? 500 : n == 1000 ? 40 : 17, rows = n / cols;
            lf_node *m = lf_reshape(g, x, 2, SH(rows, cols));
            lf_node *mt = lf_transpose(g, m);
            lf_node *outs[] = {
                lf_reduce(g, LF_RED_MAX, x, 0, NULL, false),    lf_reduce(g, LF_RED_MIN, x, 0, NULL, false),
                lf_reduce(g, LF_RED_ARGMIN, x, 0, NULL, false), lf_reduce(g, LF_RED_ARGMAX, x, 0, NULL, false),
                lf_reduce(g, LF_RED_SUM, x, 0, NULL, false),    lf_reduce(g, LF_RED_MAX, m, 1, AX(1), false),
                lf_reduce(g, LF_RED_ARGMIN, m, 1, AX(1), false), lf_reduce(g, LF_RED_ARGMAX, m, 1, AX(1), false),
                lf_reduce(g, LF_RED_MIN, mt, 1, AX(0), false),  lf_reduce(g, LF_RED_ARGMIN, mt, 1, AX(0), false),
                lf_reduce(g, LF_RED_ARGMAX, m, 1, AX(0), false), lf_reduce(g, LF_RED_MAX, m, 1, AX(0), false),
            };
            int no = (int)(sizeof outs / sizeof outs[0]);
            double rtol[12];
            for (int i = 0; i < no; i++) rtol[i] = i == 4 ? 1e-5 : 0;
            char what[160];
            snprintf(what, sizeof what, "%s reductions, case %d, n %" PRId64, lf_dtype_name(t), cs, n);
            check_vs_reference(what, g, no, outs, rtol);
            lf_graph_free(g);
        }
    }
    /* the documented answers for two of them */
    lf_graph *g = lf_graph_new(c);
    for (int i = 0; i < N; i++) v[i] = INFINITY;
    int64_t n = N;
    lf_node *x = float_input(g, t, 1, &n, v, N);
    lf_node *am = lf_reduce(g, LF_RED_ARGMIN, x, 0, NULL, false);
    lf_buffer *b = lf_buffer_new_like(c, am);
    cr_assert_eq(lf_eval(g, 1, &am, &b), LF_OK, "%s", lf_errmsg(c));
    int64_t idx = -1;
    lf_buffer_read(b, &idx, sizeof idx);
    cr_expect_eq(idx, 0, "argmin of all +Inf (%s, %d elements) is %" PRId64 ", want 0", lf_dtype_name(t), N, idx);
    lf_graph_free(g);
    g = lf_graph_new(c);
    for (int i = 0; i < N; i++) v[i] = i % 3;
    v[33000] = NAN;
    v[45000] = NAN;
    x = float_input(g, t, 1, &n, v, N);
    am = lf_reduce(g, LF_RED_ARGMAX, x, 0, NULL, false);
    lf_buffer_free(b);
    b = lf_buffer_new_like(c, am);
    cr_assert_eq(lf_eval(g, 1, &am, &b), LF_OK, "%s", lf_errmsg(c));
    lf_buffer_read(b, &idx, sizeof idx);
    cr_expect_eq(idx, 33000, "argmax with NaN at 33000 and 45000 (%s) is %" PRId64 ", want 33000",
                 lf_dtype_name(t), idx);
    lf_graph_free(g);
    free(v);
    lf_ctx_destroy(c);
    unsetenv("LF_CPU_PARALLEL_MIN");
}

Test(cpu, nan_inf_reductions) {
    nan_reductions(LF_F32);
    nan_reductions(LF_F64);
    expect_no_leak();
}

/* (x + 1e8) - 1e8 in f32 is 0 for x = 1 (1e8 + 1 rounds to 1e8); a compiler
 * allowed to reassociate gives 1. a*b + c must round a*b first. */
Test(cpu, no_fast_math) {
    lf_ctx *c = cpu_ctx(1, LF_COMPILE_REQUIRE, NULL);
    lf_graph *g = lf_graph_new(c);
    enum { N = 1000 };
    float xs[N];
    for (int i = 0; i < N; i++) xs[i] = i < 4 ? (float)(i + 1) : (float)tu_uniform(-8, 8);
    lf_node *x = in_node(g, LF_F32, 1, SH(N), xs);
    lf_node *r = lf_map(g, lf_fn_parse(g, "(x) -> (x + 100000000.0) - 100000000.0"), x);
    lf_node *r64 = lf_map(g, lf_fn_parse(g, "(x) -> (x + 1e17) - 1e17"), lf_cast(g, x, LF_F64));
    /* a*b + c with c = -(a*b rounded): 0 unfused, the rounding error of a*b fused */
    float a[N], bb[N], cc[N];
    double a64[N], b64[N], c64[N];
    int differs = 0, differs64 = 0;
    for (int i = 0; i < N; i++) {
        a[i] = i == 0 ? 1.0f + 0x1p-12f : (float)tu_uniform(0.5, 2);
        bb[i] = i == 0 ? 1.0f + 0x1p-12f : (float)tu_uniform(0.5, 2);
        volatile float p = a[i] * bb[i];
        cc[i] = -p;
        differs += fmaf(a[i], bb[i], cc[i]) != 0.0f;
        a64[i] = tu_uniform(0.5, 2);
        b64[i] = tu_uniform(0.5, 2);
        volatile double p64 = a64[i] * b64[i];
        c64[i] = -p64;
        differs64 += fma(a64[i], b64[i], c64[i]) != 0.0;
    }
    cr_assert_gt(differs, N / 2, "the test values do not tell an fma apart (%d of %d)", differs, N);
    cr_assert_gt(differs64, N / 2, "the f64 test values do not tell an fma apart (%d of %d)", differs64, N);
    lf_node *A = in_node(g, LF_F32, 1, SH(N), a), *B = in_node(g, LF_F32, 1, SH(N), bb),
            *C = in_node(g, LF_F32, 1, SH(N), cc);
    lf_node *A64 = in_node(g, LF_F64, 1, SH(N), a64), *B64 = in_node(g, LF_F64, 1, SH(N), b64),
            *C64 = in_node(g, LF_F64, 1, SH(N), c64);
    lf_fn *mad = lf_fn_parse(g, "(a, b, c) -> a*b + c");
    lf_node *dag = lf_add(g, lf_mul(g, A, B), C); /* two nodes fused into one kernel */
    lf_node *parsed = lf_zipwith(g, mad, 3, (lf_node *[]){A, B, C});
    lf_node *dag64 = lf_add(g, lf_mul(g, A64, B64), C64);
    lf_node *parsed64 = lf_zipwith(g, mad, 3, (lf_node *[]){A64, B64, C64});
    lf_node *explicit_fma = lf_fma(g, A, B, C);
    lf_node *outs[] = {r, r64, dag, parsed, dag64, parsed64, explicit_fma};
    check_vs_reference("no fast-math", g, 7, outs, NULL);
    /* and the values themselves */
    lf_buffer *d = lf_buffer_new_like(c, r), *e = lf_buffer_new_like(c, dag), *f = lf_buffer_new_like(c, explicit_fma);
    cr_assert_eq(lf_eval(g, 3, (lf_node *[]){r, dag, explicit_fma}, (lf_buffer *[]){d, e, f}), LF_OK, "%s",
                 lf_errmsg(c));
    float rv[N], ev[N], fv[N];
    lf_buffer_read(d, rv, sizeof rv);
    lf_buffer_read(e, ev, sizeof ev);
    lf_buffer_read(f, fv, sizeof fv);
    cr_expect(rv[0] == 0.0f, "(1 + 1e8) - 1e8 in f32 = %g, want 0", rv[0]);
    cr_expect(rv[3] == 0.0f, "(4 + 1e8) - 1e8 in f32 = %g, want 0 (ties to even)", rv[3]);
    for (int i = 0; i < N; i++) {
        cr_assert(ev[i] == 0.0f, "a*b + c = %a for a = %a, b = %a, c = -(a*b): contracted into an fma?", ev[i], a[i],
                  bb[i]);
        cr_assert(fv[i] == fmaf(a[i], bb[i], cc[i]), "fma(%a, %a, %a) = %a, want %a", a[i], bb[i], cc[i], fv[i],
                  fmaf(a[i], bb[i], cc[i]));
    }
    lf_graph_free(g);
    lf_ctx_destroy(c);
    expect_no_leak();
}

/* x ** 0.5 gives C's pow at every position (issue 14): GCC's vectorizer
 * made pow(x, 0.5) a vector sqrt in the main loop and kept pow in the tail,
 * so -inf gave NaN or +inf and -0 gave -0 or +0 depending on where the
 * element sat. -inf, -0, NaN and the other values visit every position
 * modulo 16 (AVX-512's f32 width) and the tails of two lengths; the
 * exponent is a literal, a literal reached through an addition, and a
 * run-time array of 0.5s. Bit-identical to the reference (perfect squares
 * only: sqrt and pow agree there), -inf -> +inf and -0 -> +0 checked by
 * value too. */
Test(cpu, pow_half_at_every_position) {
    static const double V[] = {-INFINITY, -0.0, NAN, 4.0, 0.0, 2.25, INFINITY, -1.0};
    enum { NV = sizeof V / sizeof V[0] };
    lf_ctx *c = cpu_ctx(1, LF_COMPILE_REQUIRE, NULL);
    for (int t = LF_F32; t <= LF_F64; t++) {
        lf_graph *g = lf_graph_new(c);
        lf_node *outs[12];
        double *ins[12];
        int no = 0;
        for (int len = 16 * NV + 13; len <= 16 * NV + 23; len += 10) {
            double *x = xmalloc((size_t)len * sizeof *x), *x1 = xmalloc((size_t)len * sizeof *x1);
            double *half = xmalloc((size_t)len * sizeof *half);
            for (int i = 0; i < len; i++) {
                x[i] = V[(i % 16 + i / 16) % NV]; /* block b shifts the values by b */
                x1[i] = x[i] == 4.0 ? 3.0 : x[i] == 0.0 && !signbit(x[i]) ? -1.0 : x[i]; /* (x1 + 1): -inf, NaN, 4, 0 */
                half[i] = 0.5;
            }
            int64_t n = len;
            lf_node *a = float_input(g, (lf_dtype)t, 1, &n, x, len);
            ins[no] = x;
            outs[no++] = lf_map(g, lf_fn_parse(g, "(a) -> a ** 0.5"), a);
            ins[no] = x;
            outs[no++] = lf_zipwith(g, lf_fn_parse(g, "(a, b) -> a ** b"), 2,
                                    (lf_node *[]){a, float_input(g, (lf_dtype)t, 1, &n, half, len)});
            ins[no] = x1;
            outs[no++] = lf_map(g, lf_fn_parse(g, "(a) -> (a+1) ** 0.5"), float_input(g, (lf_dtype)t, 1, &n, x1, len));
            free(half);
        }
        char what[64];
        snprintf(what, sizeof what, "x ** 0.5, %s", lf_dtype_name((lf_dtype)t));
        lf_eval_stats st = check_vs_reference(what, g, no, outs, NULL);
        cr_expect_eq(st.kernels_compiled + st.kernels_disk_hits + st.kernels_memory_hits, st.kernels);
        /* the values themselves: C's pow at -inf and -0 */
        for (int k = 0; k < no; k++) {
            lf_buffer *b = lf_buffer_new_like(c, outs[k]);
            cr_assert_eq(lf_eval(g, 1, &outs[k], &b), LF_OK, "%s", lf_errmsg(c));
            double *got = xmalloc((size_t)lf_buffer_numel(b) * sizeof *got);
            void *raw = raw_read(b);
            for (int64_t i = 0; i < lf_buffer_numel(b); i++) got[i] = elem((lf_dtype)t, raw, i);
            for (int64_t i = 0; i < lf_buffer_numel(b); i++) {
                double in = k % 3 == 2 ? ins[k][i] + 1 : ins[k][i];
                if (in == -INFINITY) cr_expect(got[i] == INFINITY, "%s, output %d [%lld]: (-inf) ** 0.5 = %g", what, k, (long long)i, got[i]);
                if (in == 0) cr_expect(got[i] == 0 && !signbit(got[i]), "%s, output %d [%lld]: (%g) ** 0.5 = %g", what, k, (long long)i, in, got[i]);
                if (isnan(in)) cr_expect(isnan(got[i]), "%s, output %d [%lld]: nan ** 0.5 = %g", what, k, (long long)i, got[i]);
            }
            free(raw);
            free(got);
            lf_buffer_free(b);
        }
        for (int k = 0; k < no; k += 3) {
            free(ins[k]);
            free(ins[k + 2]);
        }
        lf_graph_free(g);
    }
    lf_ctx_destroy(c);
    expect_no_leak();
}

/* ==== 3. math accuracy ============================================================= */

typedef struct mfn {
    const char *name;
    lf_op op;
    int arity;
    int max_ulp; /* lazyfuse.h: 4 for the functions that call libmvec, 0 for those promised bit-identical */
} mfn;

/* cbrt, fmod, sqrt and rsqrt are not in lazyfuse.h's list of functions that
 * may differ (exp ... erf, asinh, acosh, atanh, pow, atan2, hypot, sigmoid):
 * the compiled result must be the reference's, 0 ulp. */
static const mfn MATH[] = {
    {"exp", LF_OP_EXP, 1, 4},       {"exp2", LF_OP_EXP2, 1, 4},   {"expm1", LF_OP_EXPM1, 1, 4},
    {"log", LF_OP_LOG, 1, 4},       {"log2", LF_OP_LOG2, 1, 4},   {"log10", LF_OP_LOG10, 1, 4},
    {"log1p", LF_OP_LOG1P, 1, 4},   {"sin", LF_OP_SIN, 1, 4},     {"cos", LF_OP_COS, 1, 4},
    {"tan", LF_OP_TAN, 1, 4},       {"asin", LF_OP_ASIN, 1, 4},   {"acos", LF_OP_ACOS, 1, 4},
    {"atan", LF_OP_ATAN, 1, 4},     {"sinh", LF_OP_SINH, 1, 4},   {"cosh", LF_OP_COSH, 1, 4},
    {"tanh", LF_OP_TANH, 1, 4},     {"erf", LF_OP_ERF, 1, 4},     {"cbrt", LF_OP_CBRT, 1, 0},
    {"sigmoid", LF_OP_SIGMOID, 1, 4}, {"pow", LF_OP_POW, 2, 4},   {"atan2", LF_OP_ATAN2, 2, 4},
    {"hypot", LF_OP_HYPOT, 2, 4},   {"asinh", LF_OP_ASINH, 1, 4}, {"acosh", LF_OP_ACOSH, 1, 4},
    {"atanh", LF_OP_ATANH, 1, 4},   {"fmod", LF_OP_FMOD, 2, 0},   {"sqrt", LF_OP_SQRT, 1, 0},
    {"rsqrt", LF_OP_RSQRT, 1, 0},
};
enum { NMATH = sizeof MATH / sizeof MATH[0], MATH_N = 20000, MAX_ULP = 4 };

/* Inputs every function gets first (and every pair of them for binary ones). */
static const double MATH_SPECIAL[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0,
                                      -3.0, 1e-300, 1e-40, -1e-40, 1e30, -1e30, 1e300, -1e300, FLT_MIN, DBL_MIN,
                                      FLT_TRUE_MIN, DBL_TRUE_MIN, FLT_MAX, -FLT_MAX, DBL_MAX, 1.0 + 1e-7, 1.0 - 1e-7,
                                      -1.0 - 1e-7, 0x1p-24, 0x1p-53};
enum { NMS = sizeof MATH_SPECIAL / sizeof MATH_SPECIAL[0] };

/* Per-function domain edges (f32 and f64 thresholds both) and known hard
 * inputs, fixed so that every run tests them (every unary function gets
 * all of them): where a formula or an algorithm switches or loses. */
static const double EDGES[] = {88.72283, 88.7228394, -87.33654, -103.97208, -103.972084, 709.782712893384,
                               -708.3964185322641, -745.1332191019411, 128.0, 127.99999, -149.0, -150.0,
                               1024.0, -1074.0, -1075.0, 89.41599, -89.41599, 710.4758600739439,
                               -710.4758600739439, 0.9999999, -0.9999999, 1.0000001, -1.0000001, 3.1415927,
                               1.5707964, 6.2831855, 3.141592653589793, 1.5707963267948966, 1e-8, -1e-8,
                               -0.99999994, -0.9999999999999999, 9.0, 10.0, 0.693147, 5.9, -5.9,
                               /* sigmoid = 1 / (1 + exp(-x)): for x below about -17 (f32) and -37 (f64)
                                  1 + exp(-x) is exp(-x) and the result is exp(x) with exp's error
                                  whole; near -88/-709 exp(-x) nears overflow, below it is inf and
                                  the result 0; above 17 / 37 the result rounds to 1 */
                               -16.5, -17.5, -36.5, -37.5, -40.25, -87.0, -88.5, -700.5, -709.5, -709.8, -744.5,
                               16.7, 17.4, 36.8, 37.5,
                               /* exp/expm1: the reduction by ln 2 and its half (k switches), the
                                  range where expm1 is x, near 0 */
                               0.34657359, -0.34657359, 0.3465735902799727, -0.3465735902799727, 1e-10,
                               -1e-10, 1.0397208, 37.0, -37.0, 3e-9,
                               /* log/log1p near 1 and 0 (cancellation in x - 1), log1p's sqrt(2)/2 switch */
                               1.0000001192092896, 0.99999994039535522, 1.0000000000000002, 0.99999999999999989,
                               1.0009765625, 0.99951171875, 0.41421356, -0.29289322, 0.41421356237309503,
                               -0.29289321881345248,
                               /* tanh/atanh/asinh/sinh near 0 (x itself) and where tanh turns 1 */
                               3.7252903e-09, -3.7252903e-09, 0.55, 0.625, 22.0, 19.06154746539849, 9.01,
                               /* sin/cos/tan: near multiples of pi where the reduction loses */
                               355.0, 103993.0, 710.0, 1e22, 8.7e6, 0x1.921fb6p+0, 0x1.921fb54442d18p+1,
                               /* asin/acos/atanh/acosh near +-1 and acos's 0.5 switch; erf's switches */
                               0.9999999999, -0.9999999999, 0.4999999, 0.5000001, 0.84375, 1.25, 2.857142857, 5.96,
                               1.0000000001, 1.0000001192092896, 268435456.0,
                               /* found by the random inputs at exactly the 4-ulp bound (commit of
                                  this list, seeds 1-5): logf near 0.884, sigmoid of f64 in exp(x)'s
                                  region and f32 sigmoid near -1.11; fixed so every run shows them */
                               0.88264399766921997, 0.88260871171951294, 0.88603758811950684,
                               0.88365167379379272, -219.05497562173241, -174.0337518428795,
                               -487.33831130803594, -1.1140514612197876};
enum { NEDGES = sizeof EDGES / sizeof EDGES[0] };

/* Fixed hard pairs for the binary functions, after every pair of
 * MATH_SPECIAL: pow near overflow and underflow, of 1 +- epsilon to large
 * powers, exact cases and square roots; atan2 of extreme ratios; hypot of
 * extreme magnitudes and exact triples; fmod of large x by small y (its
 * result is exact, however many steps). */
static const double PAIRS[][2] = {{2, 0.5},        {10, 308.25},     {2, 1023.9999},   {2, -1074},
                                  {0.5, 1074.5},   {1.0000000000000002, 1e17},      {0.9999999999999999, 1e17},
                                  {1.0000001, 1e9}, {0.99999994, 1e9}, {-8, 1.0 / 3},  {-2, 101},
                                  {1e-300, 1e300}, {1, -1e-300},     {-0.0, -1},       {1e300, 1e-300},
                                  {3, 4},          {1e308, 1e308},   {5e-324, 5e-324}, {1e154, 1e-154},
                                  {1e300, 3},      {5.5, 0.5},       {-7, 2},          {1e300, 1e-300},
                                  {3.4e38, 1.1e-38}, {6.2831853071795862, 3.1415926535897931},
                                  {88.7, 0.6931471805599453}, {16777217, 3}};
enum { NPAIRS = sizeof PAIRS / sizeof PAIRS[0] };

/* Magnitude 2^U(e0, e1), random sign when sgn. */
static double logu(double e0, double e1, bool sgn) {
    double m = exp2(tu_uniform(e0, e1));
    return sgn && (tu_rand() & 1) ? -m : m;
}

/* One input (x, and y for binary functions) for function f, sample i. */
static void math_sample(const mfn *f, bool f64, int i, double *x, double *y) {
    double emin = f64 ? -1074 : -149, emax = f64 ? 1024 : 128;
    *y = 0;
    if (f->arity == 1 && i < NMS) {
        *x = MATH_SPECIAL[i];
        return;
    }
    if (f->arity == 1 && i < NMS + NEDGES) {
        *x = EDGES[i - NMS];
        return;
    }
    if (f->arity == 2 && i < NMS * NMS) {
        *x = MATH_SPECIAL[i / NMS];
        *y = MATH_SPECIAL[i % NMS];
        return;
    }
    if (f->arity == 2 && i < NMS * NMS + 2 * NPAIRS) { /* each pair, and swapped */
        int p = (i - NMS * NMS) / 2, swap = (i - NMS * NMS) % 2;
        *x = PAIRS[p][swap];
        *y = PAIRS[p][!swap];
        return;
    }
    double u = tu_uniform(0, 1), full = logu(emin, emax, true);
    const char *n = f->name;
    if (!strcmp(n, "exp") || !strcmp(n, "sigmoid"))
        *x = u < 0.6 ? tu_uniform(f64 ? -746 : -104, f64 ? 710 : 89) : u < 0.8 ? tu_uniform(-1, 1) : full;
    else if (!strcmp(n, "exp2"))
        *x = u < 0.6 ? tu_uniform(f64 ? -1076 : -151, f64 ? 1025 : 129) : u < 0.8 ? tu_uniform(-1, 1) : full;
    else if (!strcmp(n, "expm1"))
        *x = u < 0.5 ? tu_uniform(f64 ? -40 : -20, f64 ? 710 : 89) : u < 0.8 ? logu(emin, 0, true) : full;
    else if (!strncmp(n, "log", 3) && strcmp(n, "log1p"))
        *x = u < 0.5   ? logu(emin, emax, false)
             : u < 0.8 ? tu_uniform(0.5, 2)
             : u < 0.9 ? tu_uniform(0.99, 1.01)
                       : -logu(emin, emax, false); /* NaN */
    else if (!strcmp(n, "log1p"))
        *x = u < 0.3   ? tu_uniform(-1, 1)
             : u < 0.5 ? -1 + logu(f64 ? -53 : -24, 0, false) /* near -1 */
             : u < 0.8 ? logu(emin, emax, false)
                       : logu(emin, 0, true);
    else if (!strcmp(n, "sin") || !strcmp(n, "cos") || !strcmp(n, "tan"))
        *x = u < 0.4 ? tu_uniform(-10, 10) : u < 0.6 ? tu_uniform(-1e4, 1e4) : u < 0.8 ? tu_uniform(-1e6, 1e6) : full;
    else if (!strcmp(n, "asin") || !strcmp(n, "acos"))
        *x = u < 0.7 ? tu_uniform(-1, 1) : u < 0.85 ? logu(emin, 0, true) : tu_uniform(-2, 2);
    else if (!strcmp(n, "atan") || !strcmp(n, "tanh") || !strcmp(n, "erf")) {
        double r = !strcmp(n, "erf") ? 6 : 20;
        *x = u < 0.5 ? tu_uniform(-r, r) : u < 0.75 ? tu_uniform(-1, 1) : full;
    }
    else if (!strcmp(n, "sinh") || !strcmp(n, "cosh"))
        *x = u < 0.6 ? tu_uniform(f64 ? -711 : -90, f64 ? 711 : 90) : u < 0.8 ? tu_uniform(-1, 1) : logu(emin, 7, true);
    else if (!strcmp(n, "sqrt") || !strcmp(n, "rsqrt")) /* exact: any x (negative: NaN) */
        *x = u < 0.8 ? logu(emin, emax, false) : u < 0.9 ? tu_uniform(0, 4) : full;
    else if (!strcmp(n, "cbrt") || !strcmp(n, "asinh"))
        *x = u < 0.8 ? full : tu_uniform(-10, 10);
    else if (!strcmp(n, "acosh"))
        *x = u < 0.5 ? 1 + logu(emin, 4, false) : u < 0.9 ? logu(0, emax, false) : tu_uniform(-2, 2);
    else if (!strcmp(n, "atanh"))
        *x = u < 0.6 ? tu_uniform(-1, 1) : u < 0.8 ? logu(emin, 0, true) : tu_uniform(-1.5, 1.5);
    else if (!strcmp(n, "pow")) {
        if (u < 0.4) *x = logu(-20, 20, false), *y = tu_uniform(-30, 30);
        else if (u < 0.6) *x = tu_uniform(0, 2), *y = tu_uniform(-200, 200);
        else if (u < 0.8) *x = -tu_uniform(0.1, 10), *y = (double)tu_randint(-20, 20);
        else *x = logu(emin, emax, false), *y = tu_uniform(-2, 2);
    } else if (!strcmp(n, "fmod")) { /* exact: any pair */
        *x = full, *y = u < 0.5 ? logu(emin, emax, true) : tu_uniform(-10, 10);
    } else if (!strcmp(n, "atan2")) {
        if (u < 0.5) *x = full, *y = logu(emin, emax, true);
        else *x = tu_uniform(-10, 10), *y = tu_uniform(-10, 10);
    } else { /* hypot */
        if (u < 0.6) *x = full, *y = logu(emin, emax, true);
        else if (u < 0.8) *x = tu_uniform(-10, 10), *y = tu_uniform(-10, 10);
        else *x = logu(emax - 30, emax, true), *y = logu(emin, emin + 60, true);
    }
}

/* Ordered integers: adjacent floats differ by 1, -0 and +0 are both 0. */
static int64_t ord32(float f) {
    int32_t i;
    memcpy(&i, &f, sizeof i);
    return i < 0 ? (int64_t)INT32_MIN - i : i;
}

static int64_t ord64(double d) {
    int64_t i;
    memcpy(&i, &d, sizeof i);
    return i < 0 ? INT64_MIN - i : i;
}

static uint64_t ulp_dist(int64_t a, int64_t b) { return a > b ? (uint64_t)a - (uint64_t)b : (uint64_t)b - (uint64_t)a; }

static void math_accuracy(lf_dtype t) {
    bool f64 = t == LF_F64;
    lf_ctx *c = cpu_ctx(2, LF_COMPILE_REQUIRE, NULL);
    lf_graph *g = lf_graph_new(c);
    double *xs[NMATH], *ys[NMATH];
    lf_node *outs[NMATH];
    for (int k = 0; k < NMATH; k++) {
        /* one length per function: each gets a kernel of its own, as a lone
         * elementwise op would (a kernel storing many outputs is not what a
         * user's exp(x) compiles to, and GCC may leave it unvectorized) */
        int64_t len = MATH_N + k;
        xs[k] = xmalloc((size_t)len * sizeof(double));
        ys[k] = xmalloc((size_t)len * sizeof(double));
        for (int i = 0; i < len; i++) {
            math_sample(&MATH[k], f64, i, &xs[k][i], &ys[k][i]);
            if (!f64) xs[k][i] = (float)xs[k][i], ys[k][i] = (float)ys[k][i];
        }
        lf_node *x = float_input(g, t, 1, &len, xs[k], (int)len);
        lf_node *y = MATH[k].arity == 2 ? float_input(g, t, 1, &len, ys[k], (int)len) : NULL;
        outs[k] = lf_apply(g, MATH[k].op, x, y, NULL);
        cr_assert_not_null(outs[k], "%s: %s", MATH[k].name, lf_graph_errmsg(g));
    }
    lf_buffer *got[NMATH], *want[NMATH];
    for (int k = 0; k < NMATH; k++) got[k] = lf_buffer_new_like(c, outs[k]), want[k] = lf_buffer_new_like(c, outs[k]);
    cr_assert_eq(lf_eval(g, NMATH, outs, got), LF_OK, "%s", lf_errmsg(c));
    lf_eval_stats st;
    lf_ctx_last_stats(c, &st);
    cr_assert_eq(st.kernels_compiled, st.kernels, "the math kernels were not compiled (%d of %d)",
                 st.kernels_compiled, st.kernels);
    eval_reference(g, NMATH, outs, want);
    char report[8192];
    int used = snprintf(report, sizeof report,
                        "lazyfuse cpu math accuracy, %s, %d inputs per function, %d kernel(s):\n"
                        "  %-8s %8s %8s %8s %s\n",
                        lf_dtype_name(t), MATH_N, st.kernels, "function", "max ulp", "#>0ulp", "#signed0",
                        "worst input -> got / reference");
    char failures[4096] = "";
    size_t fl = 0;
    for (int k = 0; k < NMATH; k++) {
        unsigned char *a = raw_read(got[k]), *b = raw_read(want[k]);
        uint64_t worst = 0;
        int worst_i = 0, inexact = 0, zero_sign = 0, special_bad = 0, special_i = -1;
        for (int i = 0; i < MATH_N + k; i++) {
            double gv = f64 ? ((double *)a)[i] : ((float *)a)[i];
            double wv = f64 ? ((double *)b)[i] : ((float *)b)[i];
            if (isnan(gv) || isnan(wv) || isinf(gv) || isinf(wv)) {
                bool ok = isnan(wv) ? isnan(gv) : gv == wv;
                if (!ok && special_bad++ == 0) special_i = i;
                continue;
            }
            uint64_t d = f64 ? ulp_dist(ord64(gv), ord64(wv)) : ulp_dist(ord32((float)gv), ord32((float)wv));
            if (d) inexact++;
            if (d == 0 && signbit(gv) != signbit(wv)) zero_sign++;
            if (d > worst) worst = d, worst_i = i;
        }
        const mfn *f = &MATH[k];
        double wx = xs[k][worst_i], wy = ys[k][worst_i];
        double gw = f64 ? ((double *)a)[worst_i] : ((float *)a)[worst_i];
        double ww = f64 ? ((double *)b)[worst_i] : ((float *)b)[worst_i];
        char in[96], win[96];
        if (f->arity == 2) snprintf(in, sizeof in, "(%.9g, %.9g)", wx, wy);
        else snprintf(in, sizeof in, "%.17g", wx);
        memcpy(win, in, sizeof win); /* in is reused below */
        if (used < (int)sizeof report)
            used += snprintf(report + used, sizeof report - (size_t)used, "  %-8s %8" PRIu64 " %8d %8d %s -> %a / %a\n",
                             f->name, worst, inexact, zero_sign, in, gw, ww);
        if (special_bad && fl < sizeof failures) {
            double sg = f64 ? ((double *)a)[special_i] : ((float *)a)[special_i];
            double sw = f64 ? ((double *)b)[special_i] : ((float *)b)[special_i];
            if (f->arity == 2) snprintf(in, sizeof in, "(%g, %g)", xs[k][special_i], ys[k][special_i]);
            else snprintf(in, sizeof in, "(%g)", xs[k][special_i]);
            fl += (size_t)snprintf(failures + fl, sizeof failures - fl,
                                   " %s%s = %g, reference %g (%d NaN/Inf mismatches);", f->name, in, sg, sw,
                                   special_bad);
        }
        if (worst > (uint64_t)f->max_ulp && fl < sizeof failures)
            fl += (size_t)snprintf(failures + fl, sizeof failures - fl, " %s: %" PRIu64 " ulp at %s (at most %d);",
                                   f->name, worst, win, f->max_ulp);
        if (f->max_ulp == 0 && zero_sign && fl < sizeof failures) /* exact: -0.0 is not +0.0 */
            fl += (size_t)snprintf(failures + fl, sizeof failures - fl, " %s: %d zeros of the other sign;", f->name,
                                   zero_sign);
        free(a);
        free(b);
    }
    tu_note("%s", report);
    for (int k = 0; k < NMATH; k++) {
        free(xs[k]);
        free(ys[k]);
    }
    lf_graph_free(g);
    lf_ctx_destroy(c);
    cr_expect(fl == 0, "%s math functions off the reference (NaN/Inf must match exactly, at most %d ulp, 0 for "
              "cbrt, fmod, sqrt, rsqrt):%s", lf_dtype_name(t), MAX_ULP, failures);
    expect_no_leak();
}

/* One value at every position of an array gives one result: the vector math
 * functions go through one libmvec variant whether GCC calls them from the
 * main vector loop, the vectorized epilogue or the scalar remainder
 * (codegen/dialect_c.c). Odd lengths put elements in all three; each length
 * is evaluated with 64 values drawn as math_sample draws them. Without
 * the wrappers, asinh of one value gave three different results by position. */
/* Writes n doubles into b (dtype t: f32 or f64), converted as C does. */
static void write_doubles(lf_buffer *b, lf_dtype t, const double *v, int64_t n) {
    float f[128];
    cr_assert(n <= 128);
    if (t == LF_F32)
        for (int64_t i = 0; i < n; i++) f[i] = (float)v[i];
    cr_assert_eq(lf_buffer_write(b, t == LF_F32 ? (const void *)f : (const void *)v, (size_t)n * lf_dtype_size(t)),
                 LF_OK);
}

static void math_position_independent(lf_dtype t) {
    bool f64 = t == LF_F64;
    static const int64_t lens[] = {29, 67};
    lf_ctx *c = cpu_ctx(1, LF_COMPILE_REQUIRE, NULL);
    char failures[4096] = "";
    size_t fl = 0;
    for (int k = 0; k < NMATH; k++)
        for (int li = 0; li < 2; li++) {
            int64_t len = lens[li];
            lf_graph *g = lf_graph_new(c);
            lf_buffer *xb = lf_buffer_new(c, t, 1, &len), *yb = lf_buffer_new(c, t, 1, &len);
            lf_node *out = lf_apply(g, MATH[k].op, lf_input(g, xb), MATH[k].arity == 2 ? lf_input(g, yb) : NULL, NULL);
            cr_assert_not_null(out, "%s: %s", MATH[k].name, lf_graph_errmsg(g));
            lf_buffer *ob = lf_buffer_new_like(c, out);
            double xs[67], ys[67], got[67];
            int bad = 0;
            for (int r = 0; r < 64 && !bad; r++) {
                double x, y;
                math_sample(&MATH[k], f64, 1000 + r, &x, &y);
                if (r < 4) x = (r & 1) ? -0.0 : 0.0, y = (r & 2) ? -0.0 : 3.0; /* signed zeros in every lane */
                for (int i = 0; i < len; i++) xs[i] = x, ys[i] = y;
                write_doubles(xb, t, xs, len);
                write_doubles(yb, t, ys, len);
                cr_assert_eq(lf_eval(g, 1, &out, &ob), LF_OK, "%s", lf_errmsg(c));
                tu_read(ob, got);
                for (int i = 1; i < len && !bad; i++)
                    if (memcmp(&got[i], &got[0], sizeof got[0]) && !(got[i] != got[i] && got[0] != got[0])) {
                        bad = 1;
                        fl += (size_t)snprintf(failures + fl, sizeof failures - fl,
                                               " %s(%.17g%s) length %lld: %.17g at 0, %.17g at %d;", MATH[k].name, x,
                                               MATH[k].arity == 2 ? ", y" : "", (long long)len, got[0], got[i], i);
                    }
            }
            lf_buffer_free(xb);
            lf_buffer_free(yb);
            lf_buffer_free(ob);
            lf_graph_free(g);
            if (fl > sizeof failures - 200) break;
        }
    cr_expect(fl == 0, "%s math results depend on the element's position:%s", lf_dtype_name(t), failures);
    lf_ctx_destroy(c);
}

Test(cpu, math_position_independent_f32, .timeout = 300) { math_position_independent(LF_F32); }
Test(cpu, math_position_independent_f64, .timeout = 300) { math_position_independent(LF_F64); }

Test(cpu, math_accuracy_f32, .timeout = 300) { math_accuracy(LF_F32); }
Test(cpu, math_accuracy_f64, .timeout = 300) { math_accuracy(LF_F64); }

/* ==== 4. kernel cache =============================================================== */

/* x [rows, cols] -> a = exp(x)*2 + 1 (a barrier), sums of a's rows, max of a*x:
 * three kernels of different structure. */
typedef struct cgraph {
    lf_graph *g;
    lf_buffer *xb;
    lf_node *outs[3];
} cgraph;

static void cache_graph(lf_ctx *c, int64_t rows, int64_t cols, const float *data, cgraph *cg) {
    cg->g = lf_graph_new(c);
    cr_assert_not_null(cg->g);
    cg->xb = raw_buf(c, LF_F32, 2, SH(rows, cols), data);
    lf_node *x = lf_input(cg->g, cg->xb);
    lf_node *a = lf_map(cg->g, lf_fn_parse(cg->g, "(x) -> exp(x) * 2.0 + 1.0"), x);
    cr_assert_eq(lf_node_materialize(cg->g, a), LF_OK, "%s", lf_graph_errmsg(cg->g));
    cg->outs[0] = a;
    cg->outs[1] = lf_reduce(cg->g, LF_RED_SUM, a, 1, AX(1), false);
    cg->outs[2] = lf_reduce(cg->g, LF_RED_MAX, lf_mul(cg->g, a, x), 0, NULL, false);
    cr_assert_eq(lf_graph_status(cg->g), LF_OK, "%s", lf_graph_errmsg(cg->g));
}

static const double CACHE_RTOL[3] = {1e-5, 1e-5, 1e-5};

static lf_eval_stats cache_check(const char *what, cgraph *cg) {
    return check_vs_reference(what, cg->g, 3, cg->outs, CACHE_RTOL);
}

static void free_cgraph(cgraph *cg) {
    lf_graph_free(cg->g);
    lf_buffer_free(cg->xb);
}

#define EXPECT_STATS(what, st, k, compiled, disk, mem, reused)                                                  \
    cr_assert((st).kernels == (k) && (st).kernels_compiled == (compiled) && (st).kernels_disk_hits == (disk) && \
                  (st).kernels_memory_hits == (mem) && (st).program_reused == (reused),                       \
              "%s: kernels %d compiled %d disk hits %d memory hits %d program_reused %d; want %d %d %d %d %d",   \
              what, (st).kernels, (st).kernels_compiled, (st).kernels_disk_hits, (st).kernels_memory_hits,     \
              (int)(st).program_reused, (k), (compiled), (disk), (mem), (int)(reused))

static float *rand_data(int64_t n) { return rand_f32(n, -3, 3); }

Test(cpu, cache_levels) {
    enum { R = 64, C = 50 };
    float *data = rand_data(R * C), *data2 = rand_data(R * C), *data3 = rand_data(37 * 91);
    lf_ctx *c = cpu_ctx(2, LF_COMPILE_REQUIRE, NULL);
    cgraph cg;
    cache_graph(c, R, C, data, &cg);
    lf_eval_stats st = cache_check("first eval", &cg);
    int K = st.kernels;
    cr_assert_geq(K, 2, "the cache graph should plan to several kernels, got %d", K);
    EXPECT_STATS("first eval", st, K, K, 0, 0, false);
    cr_assert_gt(st.compile_seconds, 0, "compile_seconds %g", st.compile_seconds);
    cr_assert_eq(tu_dir_entries(cache_dir, false), K, "%d files in the cache folder, want one per kernel (%d)",
                 tu_dir_entries(cache_dir, false), K);
    /* (a) the same outputs of the same graph: the program is reused, also with
     * new input data and new output buffers */
    st = cache_check("second eval", &cg);
    EXPECT_STATS("second eval", st, K, 0, 0, 0, true);
    cr_assert_eq(st.compile_seconds, 0);
    cr_assert_eq(lf_buffer_write(cg.xb, data2, sizeof(float) * R * C), LF_OK);
    st = cache_check("second eval, new data", &cg);
    EXPECT_STATS("second eval, new data", st, K, 0, 0, 0, true);
    /* other outputs of the same graph: a new program, kernels from memory */
    lf_node *sub[2] = {cg.outs[2], cg.outs[1]};
    st = check_vs_reference("other outputs", cg.g, 2, sub, CACHE_RTOL);
    cr_assert(!st.program_reused && st.kernels_compiled == 0 && st.kernels_disk_hits == 0,
              "other outputs: reused %d compiled %d disk %d", st.program_reused, st.kernels_compiled,
              st.kernels_disk_hits);
    free_cgraph(&cg);
    /* (b) the same structure in a new graph, same size and another size */
    cache_graph(c, R, C, data, &cg);
    st = cache_check("rebuilt graph", &cg);
    EXPECT_STATS("rebuilt graph", st, K, 0, 0, K, false);
    free_cgraph(&cg);
    cache_graph(c, 37, 91, data3, &cg);
    st = cache_check("rebuilt graph of another size", &cg);
    EXPECT_STATS("rebuilt graph of another size", st, K, 0, 0, K, false);
    free_cgraph(&cg);
    lf_ctx_destroy(c);
    /* (c) a new context on the same folder */
    c = cpu_ctx(3, LF_COMPILE_REQUIRE, NULL);
    cache_graph(c, R, C, data2, &cg);
    st = cache_check("new context", &cg);
    EXPECT_STATS("new context", st, K, 0, K, 0, false);
    lf_ctx_destroy(c);
    free(data);
    free(data2);
    free(data3);
    expect_no_leak();
}

/* Flips the middle byte of path, or truncates it to half its size. */
static void damage(const char *path, bool truncate_it) {
    int fd = open(path, O_RDWR);
    cr_assert_geq(fd, 0, "open %s: %s", path, strerror(errno));
    struct stat sb;
    cr_assert_eq(fstat(fd, &sb), 0);
    cr_assert_gt(sb.st_size, 2);
    if (truncate_it) {
        cr_assert_eq(ftruncate(fd, sb.st_size / 2), 0);
    } else {
        unsigned char byte;
        cr_assert_eq(pread(fd, &byte, 1, sb.st_size / 2), 1);
        byte ^= 0x5a;
        cr_assert_eq(pwrite(fd, &byte, 1, sb.st_size / 2), 1);
    }
    close(fd);
}

Test(cpu, cache_corrupt_entries) {
    enum { R = 40, C = 33 };
    float *data = rand_data(R * C);
    lf_ctx *c = cpu_ctx(2, LF_COMPILE_REQUIRE, NULL);
    cgraph cg;
    cache_graph(c, R, C, data, &cg);
    lf_eval_stats st = cache_check("first eval", &cg);
    int K = st.kernels;
    EXPECT_STATS("first eval", st, K, K, 0, 0, false);
    lf_ctx_destroy(c);
    DIR *d = opendir(cache_dir);
    cr_assert_not_null(d, "opendir %s: %s", cache_dir, strerror(errno));
    struct dirent *e;
    int n = 0;
    char path[600];
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "%s/%s", cache_dir, e->d_name);
        damage(path, n++ == 0);
    }
    closedir(d);
    cr_assert_eq(n, K, "%d cache entries, want %d", n, K);
    c = cpu_ctx(2, LF_COMPILE_REQUIRE, NULL);
    cache_graph(c, R, C, data, &cg);
    st = cache_check("after damaging every entry", &cg);
    EXPECT_STATS("after damaging every entry", st, K, K, 0, 0, false);
    lf_ctx_destroy(c);
    /* the rebuilt entries are good again */
    c = cpu_ctx(2, LF_COMPILE_REQUIRE, NULL);
    cache_graph(c, R, C, data, &cg);
    st = cache_check("after the rebuild", &cg);
    EXPECT_STATS("after the rebuild", st, K, 0, K, 0, false);
    lf_ctx_destroy(c);
    free(data);
    expect_no_leak();
}

/* ---- one-kernel graphs for the disk-cache tests below ---- */

/* y = x * k + 1 (elementwise, kind 0) or sum(x * x) (a full reduction,
 * kind 1) over 1000 values; evaluates in c and returns the status, with the
 * kernel statistics in *st and the result checked when it succeeds. */
static lf_status eval_one_kernel(lf_ctx *c, int kind, double k, lf_eval_stats *st) {
    enum { N = 1000 };
    int64_t n = N;
    float x[N];
    for (int i = 0; i < N; i++) x[i] = (float)(i % 17) - 8.0f;
    lf_buffer *xb = lf_buffer_new(c, LF_F32, 1, &n);
    cr_assert_eq(lf_buffer_write(xb, x, sizeof x), LF_OK);
    lf_graph *g = lf_graph_new(c);
    lf_node *xn = lf_input(g, xb);
    lf_node *y = kind == 0 ? lf_add(g, lf_mul(g, xn, lf_const(g, LF_F32, k)), lf_const(g, LF_F32, 1))
                           : lf_reduce(g, LF_RED_SUM, lf_mul(g, xn, xn), 0, NULL, false);
    lf_buffer *yb = lf_buffer_new_like(c, y);
    lf_status status = lf_eval(g, 1, &y, &yb);
    if (status == LF_OK) {
        cr_assert_eq(lf_ctx_last_stats(c, st), LF_OK);
        float out[N];
        cr_assert_eq(lf_buffer_read(yb, out, kind == 0 ? sizeof out : sizeof(float)), LF_OK);
        double sum = 0;
        for (int i = 0; i < N; i++) sum += (double)x[i] * x[i];
        if (kind == 0)
            for (int i = 0; i < N; i++) cr_assert_eq(out[i], x[i] * (float)k + 1.0f, "element %d", i);
        else
            cr_assert_eq(out[0], (float)sum);
    }
    lf_graph_free(g);
    lf_buffer_free(xb);
    lf_buffer_free(yb);
    return status;
}

/* The one file of the cache folder not named in skip (NULL: none), as a name. */
static void only_entry(char *name, size_t cap, const char *skip) {
    DIR *d = opendir(cache_dir);
    cr_assert_not_null(d, "opendir %s: %s", cache_dir, strerror(errno));
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' || (skip && !strcmp(e->d_name, skip))) continue;
        snprintf(name, cap, "%s", e->d_name);
        n++;
    }
    closedir(d);
    cr_assert_eq(n, 1, "%d new entries in the cache folder, want 1", n);
}

static void write_script(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "%s: %s", path, strerror(errno));
    fputs(text, f);
    fclose(f);
    cr_assert_eq(chmod(path, 0755), 0);
}

/* Issue 12, item 3: a compiler that makes an object without the kernel's
 * functions fails the eval, and nothing is stored: once the same $CC works
 * again (same cache key), the kernel is compiled, not loaded from a poisoned
 * entry. */
Test(cpu, cache_bad_compile_is_not_stored) {
    char cc[400];
    snprintf(cc, sizeof cc, "%s/cc-wrapper", tmpdir);
    write_script(cc, "#!/bin/sh\n# replaces the kernel's source by a file without its functions\n"
                     "for a do case \"$a\" in *.c) printf 'int lf_not_a_kernel;\\n' > \"$a\";; esac; done\n"
                     "exec cc \"$@\"\n");
    setenv("CC", cc, 1);
    lf_ctx *c = cpu_ctx(2, LF_COMPILE_REQUIRE, NULL);
    lf_eval_stats st;
    cr_assert_eq(eval_one_kernel(c, 0, 2.5, &st), LF_ERR_BACKEND);
    cr_assert(strstr(lf_errmsg(c), "lacks function"), "message: %s", lf_errmsg(c));
    cr_assert_leq(tu_dir_entries(cache_dir, true), 0, "the bad object was stored");
    lf_ctx_destroy(c);
    write_script(cc, "#!/bin/sh\nexec cc \"$@\"\n"); /* the compiler works again */
    c = cpu_ctx(2, LF_COMPILE_REQUIRE, NULL);
    cr_assert_eq(eval_one_kernel(c, 0, 2.5, &st), LF_OK, "after the compiler was fixed: %s", lf_errmsg(c));
    EXPECT_STATS("after the compiler was fixed", st, 1, 1, 0, 0, false);
    lf_ctx_destroy(c);
    unsetenv("CC");
    expect_no_leak();
}

/* Issue 12, item 3: an entry that verifies (its key and checksum are right)
 * but lacks the kernel's functions is removed and rebuilt: the eval succeeds,
 * and the next context loads the rebuilt entry. */
Test(cpu, cache_entry_without_functions_is_rebuilt) {
    lf_ctx *c = cpu_ctx(2, LF_COMPILE_REQUIRE, NULL);
    lf_eval_stats st;
    char elementwise[256], reduction[256];
    cr_assert_eq(eval_one_kernel(c, 0, 3.0, &st), LF_OK, "%s", lf_errmsg(c));
    only_entry(elementwise, sizeof elementwise, NULL);
    cr_assert_eq(eval_one_kernel(c, 1, 0, &st), LF_OK, "%s", lf_errmsg(c));
    only_entry(reduction, sizeof reduction, elementwise);
    lf_ctx_destroy(c);
    /* the reduction's object (no lf_k_run) stored under the elementwise key */
    void *so;
    size_t len;
    cr_assert_eq(diskcache_get(cache_dir, reduction, &so, &len, NULL), DISKCACHE_HIT);
    cr_assert_eq(diskcache_put(cache_dir, elementwise, so, len, NULL), 0);
    graph_free(so); /* graph_malloc'd */
    c = cpu_ctx(2, LF_COMPILE_REQUIRE, NULL);
    cr_assert_eq(eval_one_kernel(c, 0, 3.0, &st), LF_OK, "with a planted entry: %s", lf_errmsg(c));
    EXPECT_STATS("with a planted entry", st, 1, 1, 0, 0, false);
    lf_ctx_destroy(c);
    c = cpu_ctx(2, LF_COMPILE_REQUIRE, NULL);
    cr_assert_eq(eval_one_kernel(c, 0, 3.0, &st), LF_OK, "%s", lf_errmsg(c));
    EXPECT_STATS("after the rebuild", st, 1, 0, 1, 0, false);
    lf_ctx_destroy(c);
}

/* Issue 12, item 1: a cache folder that others can write (or that another
 * user owns) could hold a planted object that would run as us: such a folder
 * is neither read nor written, one warning says so (once per process), and
 * the in-memory cache works as ever. The valid entry in it is not loaded. */
static void expect_folder_refused(const char *needle) {
    lf_eval_stats st;
    struct stat before, after;
    char entry[256], path[600];
    only_entry(entry, sizeof entry, NULL);
    snprintf(path, sizeof path, "%s/%s", cache_dir, entry);
    cr_assert_eq(stat(path, &before), 0);
    tu_capture_stderr_start();
    for (int round = 0; round < 2; round++) { /* two contexts: one warning */
        lf_ctx *c = cpu_ctx(2, LF_COMPILE_REQUIRE, NULL);
        lf_status r1 = eval_one_kernel(c, 0, 3.0, &st);
        lf_eval_stats st2;
        lf_status r2 = eval_one_kernel(c, 0, 3.0, &st2);
        lf_ctx_destroy(c);
        cr_assert(r1 == LF_OK && r2 == LF_OK);
        EXPECT_STATS("an unsafe cache folder", st, 1, 1, 0, 0, false);
        EXPECT_STATS("an unsafe cache folder, memory level", st2, 1, 0, 0, 1, false);
    }
    char *err = tu_capture_stderr_end();
    cr_expect_eq(tu_count_substr(err, "not using it"), getenv("LF_QUIET") ? 0 : 1, "stderr: %s", err);
    if (!getenv("LF_QUIET"))
        cr_expect(strstr(err, cache_dir) && strstr(err, needle), "the warning names the folder and why: %s", err);
    free(err);
    cr_assert_eq(stat(path, &after), 0);
    cr_expect(before.st_ino == after.st_ino && before.st_mtime == after.st_mtime, "the entry was rewritten");
    cr_expect_eq(tu_dir_entries(cache_dir, true), 1, "something was written into the folder");
}

/* Stores the one-kernel graph's entry in the (private) cache folder. */
static void store_one_entry(void) {
    lf_ctx *c = cpu_ctx(2, LF_COMPILE_REQUIRE, NULL);
    lf_eval_stats st;
    cr_assert_eq(eval_one_kernel(c, 0, 3.0, &st), LF_OK, "%s", lf_errmsg(c));
    EXPECT_STATS("first eval", st, 1, 1, 0, 0, false);
    lf_ctx_destroy(c);
}

Test(cpu, cache_folder_writable_by_others_is_not_used) {
    store_one_entry();
    cr_assert_eq(chmod(cache_dir, 0777), 0);
    expect_folder_refused("writable by group and others (mode 0777)");
    expect_no_leak();
}

Test(cpu, cache_folder_warning_quiet) {
    store_one_entry();
    cr_assert_eq(chmod(cache_dir, 0770), 0);
    setenv("LF_QUIET", "1", 1);
    expect_folder_refused("writable by its group");
    unsetenv("LF_QUIET");
    expect_no_leak();
}

Test(cpu, cache_folder_of_another_user_is_not_used) {
    store_one_entry();
    if (geteuid() != 0) {
        teardown();
        cr_skip_test("chown to another uid needs root");
    }
    cr_assert_eq(chown(cache_dir, 12345, 12345), 0, "chown: %s", strerror(errno));
    expect_folder_refused("owned by uid 12345");
    cr_assert_eq(chown(cache_dir, 0, 0), 0);
    expect_no_leak();
}

/* An entry owned by another uid in our own folder (root wrote it, or it is
 * left from a time the folder was open) is not loaded: it is removed with a
 * warning, and the kernel is compiled and stored again, as ours. */
Test(cpu, cache_entry_of_another_user_is_rebuilt) {
    store_one_entry();
    if (geteuid() != 0) {
        teardown();
        cr_skip_test("chown to another uid needs root");
    }
    char entry[256], path[600];
    only_entry(entry, sizeof entry, NULL);
    snprintf(path, sizeof path, "%s/%s", cache_dir, entry);
    cr_assert_eq(chown(path, 12345, 12345), 0);
    tu_capture_stderr_start();
    lf_ctx *c = cpu_ctx(2, LF_COMPILE_REQUIRE, NULL);
    lf_eval_stats st;
    lf_status r = eval_one_kernel(c, 0, 3.0, &st);
    lf_ctx_destroy(c);
    char *err = tu_capture_stderr_end();
    cr_assert_eq(r, LF_OK);
    EXPECT_STATS("an entry of another uid", st, 1, 1, 0, 0, false);
    cr_expect(strstr(err, "owned by uid 12345") && strstr(err, "not loading it"), "stderr: %s", err);
    free(err);
    struct stat sb;
    cr_assert_eq(stat(path, &sb), 0, "the kernel was not stored again");
    cr_expect_eq(sb.st_uid, geteuid());
    c = cpu_ctx(2, LF_COMPILE_REQUIRE, NULL);
    cr_assert_eq(eval_one_kernel(c, 0, 3.0, &st), LF_OK);
    EXPECT_STATS("after the rebuild", st, 1, 0, 1, 0, false);
    lf_ctx_destroy(c);
    expect_no_leak();
}

/* Issue 12, item 12: 8 processes starting cold on one cache folder compile
 * each kernel once (the entry's lock): one compiles, the others wait, then
 * load its entry. No lock file is left. */
Test(cpu, cache_cold_start_compiles_once, .timeout = 300) {
    enum { PMAX = 8 };
    int P = tu_on_valgrind() ? 4 : PMAX; /* 8 valgrinded processes on 2 cores: too slow */
    int go[2], res[2];
    cr_assert_eq(pipe(go), 0);
    cr_assert_eq(pipe(res), 0);
    double k = 1.0 + (double)(tu_randint(1, 1000000)) / 1024.0; /* a kernel no earlier run compiled */
    pid_t pids[PMAX];
    for (int p = 0; p < P; p++) {
        pids[p] = fork();
        cr_assert_geq(pids[p], 0);
        if (pids[p] == 0) {
            close(go[1]);
            close(res[0]);
            char b;
            if (read(go[0], &b, 1) < 0) _exit(2); /* all start together: EOF when the parent closes go */
            lf_ctx_options o;
            lf_ctx_options_init(&o);
            o.backend = LF_BACKEND_CPU;
            o.compile = LF_COMPILE_REQUIRE;
            lf_ctx *c = lf_ctx_new(&o);
            lf_eval_stats st = {0};
            int rc = c && eval_one_kernel(c, 0, k, &st) == LF_OK ? 0 : 1;
            int out[3] = {rc, st.kernels_compiled, st.kernels_disk_hits};
            if (write(res[1], out, sizeof out) != sizeof out) rc = 1;
            lf_ctx_destroy(c);
            _exit(rc);
        }
    }
    close(go[0]);
    close(res[1]);
    close(go[1]); /* go */
    int compiled = 0, disk = 0, failed = 0, got[3];
    for (int p = 0; p < P; p++) {
        cr_assert_eq(read(res[0], got, sizeof got), (ssize_t)sizeof got, "child %d said nothing", p);
        failed += got[0], compiled += got[1], disk += got[2];
    }
    for (int p = 0; p < P; p++) {
        int ws;
        cr_assert_eq(waitpid(pids[p], &ws, 0), pids[p]);
    }
    close(res[0]);
    cr_assert_eq(failed, 0, "%d processes failed", failed);
    cr_assert_eq(compiled, 1, "%d processes compiled the kernel (%d loaded it), want 1", compiled, disk);
    cr_assert_eq(disk, P - 1);
    cr_assert_eq(tu_dir_entries(cache_dir, true), 1, "a lock or temp file was left");
}

Test(cpu, cache_unwritable_folder) {
    enum { R = 16, C = 70 };
    float *data = rand_data(R * C);
    char file[300], dir[320];
    snprintf(file, sizeof file, "%s/plainfile", tmpdir);
    FILE *fp = fopen(file, "w");
    cr_assert_not_null(fp);
    fputs("not a folder\n", fp);
    fclose(fp);
    snprintf(dir, sizeof dir, "%s/sub", file);
    for (int round = 0; round < 2; round++) {
        lf_ctx *c = cpu_ctx(2, LF_COMPILE_AUTO, dir);
        cr_assert_str_eq(lf_ctx_get_options(c).cache_dir, dir);
        cgraph cg;
        cache_graph(c, R, C, data, &cg);
        lf_eval_stats st = cache_check(round ? "unusable cache folder, second context" : "unusable cache folder", &cg);
        EXPECT_STATS("unusable cache folder", st, st.kernels, st.kernels, 0, 0, false);
        st = cache_check("unusable cache folder, reused", &cg);
        EXPECT_STATS("unusable cache folder, reused", st, st.kernels, 0, 0, 0, true);
        lf_ctx_destroy(c);
    }
    cr_assert_eq(tu_dir_entries(cache_dir, false), -1, "$LF_CACHE_DIR was used although cache_dir was given");
    free(data);
    expect_no_leak();
}

Test(cpu, cache_thousand_rebuilds, .timeout = 300) {
    enum { R = 8, C = 24 };
    float *data = rand_data(R * C);
    lf_ctx *c = cpu_ctx(1, LF_COMPILE_REQUIRE, NULL);
    size_t base = 0;
    int compiled_after_first = 0, K = 0;
    for (int i = 0; i < 1000; i++) {
        cgraph cg;
        cache_graph(c, R, C, data, &cg);
        lf_buffer *d[3];
        for (int j = 0; j < 3; j++) d[j] = lf_buffer_new_like(c, cg.outs[j]);
        cr_assert_eq(lf_eval(cg.g, 3, cg.outs, d), LF_OK, "rebuild %d: %s", i, lf_errmsg(c));
        lf_eval_stats st;
        lf_ctx_last_stats(c, &st);
        if (i == 0) {
            K = st.kernels;
            cr_assert_eq(st.kernels_compiled, K);
        } else {
            compiled_after_first += st.kernels_compiled;
            cr_assert_eq(st.kernels_memory_hits, K, "rebuild %d: %d memory hits of %d kernels", i,
                         st.kernels_memory_hits, K);
        }
        for (int j = 0; j < 3; j++) lf_buffer_free(d[j]);
        if (i == 999) cache_check("rebuild 1000", &cg);
        free_cgraph(&cg);
        /* memory is flat: nothing accumulates per rebuild */
        if (i == 10) base = lf_debug_live_bytes();
        if (i > 10)
            cr_assert_eq(lf_debug_live_bytes(), base, "rebuild %d: %zu live bytes, %zu after rebuild 10", i,
                         lf_debug_live_bytes(), base);
    }
    cr_assert_eq(compiled_after_first, 0, "999 rebuilds compiled %d kernels", compiled_after_first);
    lf_ctx_destroy(c);
    free(data);
    expect_no_leak();
}

/* ==== 5. compiler problems ============================================================ */

/* A small graph of one elementwise kernel (structure 0) or one with a
 * reduction (structure 1). */
static lf_graph *small_graph(lf_ctx *c, int structure, lf_node **out) {
    lf_graph *g = lf_graph_new(c);
    float v[300];
    for (int i = 0; i < 300; i++) v[i] = (float)tu_uniform(-2, 2);
    lf_node *x = in_node(g, LF_F32, 2, SH(3, 100), v);
    if (structure == 0) *out = lf_map(g, lf_fn_parse(g, "(x) -> sin(x) * x + 1.0"), x);
    else *out = lf_reduce(g, LF_RED_SUM, lf_mul(g, x, lf_const(g, LF_F32, 3)), 1, AX(1), false);
    cr_assert_eq(lf_graph_status(g), LF_OK, "%s", lf_graph_errmsg(g));
    return g;
}

/* Evaluates a small graph expecting the interpreter (no compiled kernel). */
static void expect_interpreted(lf_ctx *c, int structure, const char *what) {
    lf_node *out;
    lf_graph *g = small_graph(c, structure, &out);
    double rtol = 1e-6;
    lf_eval_stats st = check_vs_reference(what, g, 1, &out, &rtol);
    cr_assert(st.kernels > 0 && st.kernels_compiled == 0 && st.kernels_disk_hits == 0 && st.kernels_memory_hits == 0 &&
                  !st.program_reused,
              "%s: kernels %d compiled %d disk %d memory %d reused %d; want the interpreter's stats", what, st.kernels,
              st.kernels_compiled, st.kernels_disk_hits, st.kernels_memory_hits, st.program_reused);
    lf_graph_free(g);
}

/* Evaluates a small graph expecting LF_ERR_BACKEND with every fragment in
 * the message, and the output buffer untouched. */
static void expect_backend_error(lf_ctx *c, int structure, const char *what, const char *const *frags) {
    lf_node *out;
    lf_graph *g = small_graph(c, structure, &out);
    lf_buffer *d = lf_buffer_new_like(c, out);
    int64_t n = lf_buffer_numel(d);
    float *sentinel = xmalloc((size_t)n * sizeof *sentinel), *after = xmalloc((size_t)n * sizeof *after);
    for (int64_t i = 0; i < n; i++) sentinel[i] = -12345.5f;
    lf_buffer_write(d, sentinel, (size_t)n * sizeof *sentinel);
    for (int round = 0; round < 2; round++) { /* a failed eval leaves nothing half-built behind */
        lf_status st = lf_eval(g, 1, &out, &d);
        const char *msg = lf_errmsg(c);
        cr_assert_eq(st, LF_ERR_BACKEND, "%s (round %d): %s, want LF_ERR_BACKEND; message: %s", what, round,
                     lf_status_name(st), msg);
        for (int i = 0; frags[i]; i++)
            cr_assert(strstr(msg, frags[i]), "%s: the message lacks \"%s\": %s", what, frags[i], msg);
        lf_eval_stats zero = {0}, stats;
        lf_ctx_last_stats(c, &stats);
        cr_assert(!memcmp(&stats, &zero, sizeof zero), "%s: stats not zero after a failed eval", what);
        lf_buffer_read(d, after, (size_t)n * sizeof *after);
        cr_assert(!memcmp(after, sentinel, (size_t)n * sizeof *after), "%s: the output buffer was changed", what);
    }
    free(sentinel);
    free(after);
    lf_buffer_free(d);
    lf_graph_free(g);
}

Test(cpu, cc_false_falls_back_once) {
    setenv("CC", "false", 1);
    lf_ctx *c = cpu_ctx(2, LF_COMPILE_AUTO, NULL);
    tu_capture_stderr_start();
    expect_interpreted(c, 0, "CC=false, structure 0");
    expect_interpreted(c, 1, "CC=false, structure 1");
    expect_interpreted(c, 0, "CC=false, structure 0 again");
    char *err = tu_capture_stderr_end();
    cr_assert_eq(tu_count_substr(err, "no working C compiler"), 1, "want the fallback warning once, stderr was:\n%s", err);
    cr_assert(strstr(err, "'false'"), "the warning does not name the compiler: %s", err);
    free(err);
    lf_ctx_destroy(c);
    cr_assert_eq(tu_dir_entries(cache_dir, false), -1, "nothing should have been cached");
    unsetenv("CC");
    expect_no_leak();
}

Test(cpu, cc_false_required) {
    setenv("CC", "false", 1);
    lf_ctx *c = cpu_ctx(2, LF_COMPILE_REQUIRE, NULL);
    tu_capture_stderr_start();
    expect_backend_error(c, 0, "CC=false, LF_COMPILE_REQUIRE", (const char *const[]){"false", "compiler", NULL});
    char *err = tu_capture_stderr_end();
    cr_assert_eq(err[0], 0, "LF_COMPILE_REQUIRE printed on stderr: %s", err);
    free(err);
    lf_ctx_destroy(c);
    unsetenv("CC");
    /* a new context compiles */
    c = cpu_ctx(2, LF_COMPILE_REQUIRE, NULL);
    lf_node *out;
    lf_graph *g = small_graph(c, 0, &out);
    double rtol = 1e-5;
    lf_eval_stats st = check_vs_reference("CC unset again, new context", g, 1, &out, &rtol);
    cr_assert_eq(st.kernels_compiled, st.kernels);
    lf_ctx_destroy(c);
    expect_no_leak();
}

Test(cpu, cc_missing) {
    setenv("CC", "/nonexistent/cc", 1);
    lf_ctx *c = cpu_ctx(2, LF_COMPILE_REQUIRE, NULL);
    expect_backend_error(c, 1, "CC=/nonexistent/cc, LF_COMPILE_REQUIRE",
                         (const char *const[]){"not found", "/nonexistent/cc", "compiler", NULL});
    lf_ctx_destroy(c);
    c = cpu_ctx(2, LF_COMPILE_AUTO, NULL);
    tu_capture_stderr_start();
    expect_interpreted(c, 1, "CC=/nonexistent/cc, auto");
    char *err = tu_capture_stderr_end();
    cr_assert_eq(tu_count_substr(err, "no working C compiler"), 1, "stderr was:\n%s", err);
    cr_assert(strstr(err, "not found"), "stderr was:\n%s", err);
    free(err);
    lf_ctx_destroy(c);
    unsetenv("CC");
    expect_no_leak();
}

Test(cpu, cc_fails_on_the_kernel) {
    const char *cc0 = getenv("CC");
    char cc[512], keep[512] = "";
    if (cc0) snprintf(keep, sizeof keep, "%s", cc0);
    snprintf(cc, sizeof cc, "%s -include /nonexistent/lf.h", cc0 && *cc0 ? cc0 : "cc");
    setenv("CC", cc, 1);
    for (int mode = 0; mode < 2; mode++) {
        lf_ctx *c = cpu_ctx(2, mode ? LF_COMPILE_REQUIRE : LF_COMPILE_AUTO, NULL);
        tu_capture_stderr_start();
        expect_backend_error(c, mode, mode ? "a failing compile, REQUIRE" : "a failing compile, AUTO",
                             (const char *const[]){"compiling kernel", "/nonexistent/lf.h", NULL});
        char *err = tu_capture_stderr_end();
        cr_assert_eq(tu_count_substr(err, "no working C compiler"), 0, "a compiler that runs fell back: %s", err);
        free(err);
        /* the folder may exist (the entry's lock made it); no entry, temp or lock file is left */
        cr_assert_leq(tu_dir_entries(cache_dir, true), 0, "a failed compile left a cache entry");
        /* the same context works once the compiler does */
        if (keep[0]) setenv("CC", keep, 1);
        else unsetenv("CC");
        lf_node *out;
        lf_graph *g = small_graph(c, mode, &out);
        double rtol = 1e-5;
        lf_eval_stats st = check_vs_reference("the same context, compiler fixed", g, 1, &out, &rtol);
        cr_assert_eq(st.kernels_compiled, st.kernels);
        lf_graph_free(g);
        lf_ctx_destroy(c);
        /* and a new one */
        c = cpu_ctx(1, LF_COMPILE_REQUIRE, NULL);
        g = small_graph(c, 1 - mode, &out);
        check_vs_reference("a new context, compiler fixed", g, 1, &out, &rtol);
        lf_graph_free(g);
        lf_ctx_destroy(c);
        nftw(cache_dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
        setenv("CC", cc, 1);
    }
    if (keep[0]) setenv("CC", keep, 1);
    else unsetenv("CC");
    expect_no_leak();
}

Test(cpu, compile_never) {
    setenv("LF_COMPILE", "never", 1);
    setenv("CC", "false", 1);
    tu_capture_stderr_start();
    lf_ctx *c = cpu_ctx(2, LF_COMPILE_AUTO, NULL);
    cr_assert_eq(lf_ctx_get_options(c).compile, LF_COMPILE_NEVER);
    expect_interpreted(c, 0, "LF_COMPILE=never");
    expect_interpreted(c, 1, "LF_COMPILE=never");
    lf_ctx_destroy(c);
    unsetenv("LF_COMPILE");
    c = cpu_ctx(2, LF_COMPILE_NEVER, NULL);
    expect_interpreted(c, 1, "lf_ctx_options.compile = LF_COMPILE_NEVER");
    lf_ctx_destroy(c);
    char *err = tu_capture_stderr_end();
    cr_assert_eq(err[0], 0, "LF_COMPILE=never printed on stderr: %s", err);
    free(err);
    unsetenv("CC");
    /* REQUIRE is not overridden by the environment */
    setenv("LF_COMPILE", "never", 1);
    c = cpu_ctx(2, LF_COMPILE_REQUIRE, NULL);
    cr_assert_eq(lf_ctx_get_options(c).compile, LF_COMPILE_REQUIRE);
    lf_node *out;
    lf_graph *g = small_graph(c, 0, &out);
    double rtol = 1e-5;
    lf_eval_stats st = check_vs_reference("REQUIRE with LF_COMPILE=never", g, 1, &out, &rtol);
    cr_assert_eq(st.kernels_compiled, st.kernels);
    lf_ctx_destroy(c);
    unsetenv("LF_COMPILE");
    expect_no_leak();
}

/* ==== 6. output aliasing ============================================================= */

enum { AN = 1024 };

/* Writes x0 into xb (and zeros into zb), evaluates outs into dsts on the CPU
 * backend, reads xb and zb; the same with the reference evaluator; both
 * buffers must end bit-identical. */
static void alias_case_rtol(const char *what, lf_graph *g, int n, lf_node *const *outs, lf_buffer *const *dsts,
                            lf_buffer *xb, lf_buffer *zb, const float *x0, double rtol) {
    static const float zeros[AN];
    float got_x[AN], got_z[AN], want_x[AN], want_z[AN];
    for (int r = 0; r < 2; r++) {
        lf_buffer_write(xb, x0, sizeof got_x);
        lf_buffer_write(zb, zeros, sizeof zeros);
        if (r == 0) {
            lf_status st = lf_eval(g, n, outs, dsts);
            cr_assert_eq(st, LF_OK, "%s: %s", what, lf_errmsg(g->ctx));
        } else {
            eval_reference(g, n, outs, dsts);
        }
        lf_buffer_read(xb, r ? want_x : got_x, sizeof got_x);
        lf_buffer_read(zb, r ? want_z : got_z, sizeof got_z);
    }
    char w[200];
    snprintf(w, sizeof w, "%s: buffer x", what);
    expect_match(w, LF_F32, got_x, want_x, AN, rtol);
    snprintf(w, sizeof w, "%s: buffer z", what);
    expect_match(w, LF_F32, got_z, want_z, AN, rtol);
}

/* alias_case_rtol bit for bit. */
static void alias_case(const char *what, lf_graph *g, int n, lf_node *const *outs, lf_buffer *const *dsts,
                       lf_buffer *xb, lf_buffer *zb, const float *x0) {
    alias_case_rtol(what, g, n, outs, dsts, xb, zb, x0, 0);
}

/* One buffer named for two outputs: LF_ERR_INVALID, both buffers unchanged. */
static void alias_refused(const char *what, lf_graph *g, int n, lf_node *const *outs, lf_buffer *const *dsts,
                          lf_buffer *xb, lf_buffer *zb, const float *x0) {
    static const float zeros[AN];
    float got_x[AN], got_z[AN];
    lf_buffer_write(xb, x0, sizeof got_x);
    lf_buffer_write(zb, zeros, sizeof zeros);
    cr_assert_eq(lf_eval(g, n, outs, dsts), LF_ERR_INVALID, "%s: %s", what, lf_errmsg(g->ctx));
    cr_expect(strstr(lf_errmsg(g->ctx), "have the same buffer"), "%s: %s", what, lf_errmsg(g->ctx));
    lf_buffer_read(xb, got_x, sizeof got_x);
    lf_buffer_read(zb, got_z, sizeof got_z);
    cr_expect(memcmp(got_x, x0, sizeof got_x) == 0, "%s: buffer x changed", what);
    cr_expect(memcmp(got_z, zeros, sizeof got_z) == 0, "%s: buffer z changed", what);
}

Test(cpu, output_aliasing) {
    setenv("LF_CPU_PARALLEL_MIN", "1", 1);
    lf_ctx *c = cpu_ctx(3, LF_COMPILE_REQUIRE, NULL);
    float x0[AN];
    for (int i = 0; i < AN; i++) x0[i] = (float)tu_uniform(-10, 10);
    lf_buffer *xb = raw_buf(c, LF_F32, 1, SH(AN), x0), *zb = raw_buf(c, LF_F32, 1, SH(AN), NULL);
    lf_graph *g = lf_graph_new(c);
    lf_node *x = lf_input(g, xb);
    lf_node *rev = lf_slice(g, x, 0, LF_NONE, LF_NONE, -1);
    lf_node *two = lf_const(g, LF_F32, 2), *one = lf_const(g, LF_F32, 1);
    lf_node *y = lf_add(g, lf_mul(g, x, two), one);
    lf_node *yrev = lf_add(g, lf_mul(g, rev, two), one);
    lf_node *mix = lf_sub(g, x, lf_mul(g, rev, one));
    lf_node *m = lf_reshape(g, x, 2, SH(32, 32));
    lf_node *tr = lf_reshape(g, lf_add(g, lf_transpose(g, m), one), 1, SH(AN));
    lf_node *shift = lf_add(g, lf_slice(g, lf_add(g, x, one), 0, 0, AN, 1), lf_const(g, LF_F32, 0));
    cr_assert_eq(lf_graph_status(g), LF_OK, "%s", lf_graph_errmsg(g));
    alias_case("y = x*2+1 into x", g, 1, (lf_node *[]){y}, (lf_buffer *[]){xb}, xb, zb, x0);
    alias_case("x[::-1]*2+1 into x", g, 1, (lf_node *[]){yrev}, (lf_buffer *[]){xb}, xb, zb, x0);
    alias_case("x - x[::-1] into x", g, 1, (lf_node *[]){mix}, (lf_buffer *[]){xb}, xb, zb, x0);
    alias_case("transpose(x as 32x32) + 1 into x", g, 1, (lf_node *[]){tr}, (lf_buffer *[]){xb}, xb, zb, x0);
    alias_case("x[::-1] (a view) into x", g, 1, (lf_node *[]){rev}, (lf_buffer *[]){xb}, xb, zb, x0);
    alias_refused("two outputs into z", g, 2, (lf_node *[]){y, yrev}, (lf_buffer *[]){zb, zb}, xb, zb, x0);
    alias_refused("two outputs into x", g, 2, (lf_node *[]){yrev, y}, (lf_buffer *[]){xb, xb}, xb, zb, x0);
    alias_case("input x into z", g, 1, (lf_node *[]){x}, (lf_buffer *[]){zb}, xb, zb, x0);
    alias_case("input x into x", g, 1, (lf_node *[]){x}, (lf_buffer *[]){xb}, xb, zb, x0);
    alias_case("input x into z, x+1 into x", g, 2, (lf_node *[]){x, shift}, (lf_buffer *[]){zb, xb}, xb, zb, x0);
    alias_case("y into x, then input x into z", g, 2, (lf_node *[]){y, x}, (lf_buffer *[]){xb, zb}, xb, zb, x0);
    alias_case("x[::-1]*2+1 into x, then x[::-1] into z", g, 2, (lf_node *[]){yrev, rev}, (lf_buffer *[]){xb, zb}, xb,
               zb, x0);
    lf_graph_free(g);
    lf_ctx_destroy(c);
    unsetenv("LF_CPU_PARALLEL_MIN");
    expect_no_leak();
}

/* The aliasing checks run again on every eval of a reused program (they are
 * a hash set now, not a scan per output): an input as a destination is still
 * caught on the cached path, and a twice-named buffer is still refused. */
Test(cpu, output_aliasing_on_the_reused_program) {
    setenv("LF_CPU_PARALLEL_MIN", "1", 1);
    lf_ctx *c = cpu_ctx(2, LF_COMPILE_REQUIRE, NULL);
    float x0[AN];
    for (int i = 0; i < AN; i++) x0[i] = (float)tu_uniform(-10, 10);
    lf_buffer *xb = raw_buf(c, LF_F32, 1, SH(AN), x0), *zb = raw_buf(c, LF_F32, 1, SH(AN), NULL);
    lf_buffer *wb = raw_buf(c, LF_F32, 1, SH(AN), NULL);
    lf_graph *g = lf_graph_new(c);
    lf_node *x = lf_input(g, xb);
    lf_node *rev = lf_slice(g, x, 0, LF_NONE, LF_NONE, -1);
    lf_node *two = lf_const(g, LF_F32, 2), *one = lf_const(g, LF_F32, 1);
    lf_node *yrev = lf_add(g, lf_mul(g, rev, two), one);
    lf_node *y = lf_add(g, lf_mul(g, x, two), one);
    cr_assert_eq(lf_graph_status(g), LF_OK, "%s", lf_graph_errmsg(g));
    lf_eval_stats st;
    /* planned with safe destinations, then reused with aliased ones */
    cr_assert_eq(lf_eval(g, 1, &yrev, &zb), LF_OK, "%s", lf_errmsg(c));
    alias_case("reused: x[::-1]*2+1 into x", g, 1, (lf_node *[]){yrev}, (lf_buffer *[]){xb}, xb, zb, x0);
    cr_assert_eq(lf_eval(g, 1, &yrev, &zb), LF_OK, "%s", lf_errmsg(c));
    cr_assert_eq(lf_ctx_last_stats(c, &st), LF_OK);
    cr_expect(st.program_reused);
    cr_assert_eq(lf_eval(g, 2, (lf_node *[]){y, yrev}, (lf_buffer *[]){zb, wb}), LF_OK, "%s", lf_errmsg(c));
    alias_refused("reused: two outputs into z", g, 2, (lf_node *[]){y, yrev}, (lf_buffer *[]){zb, zb}, xb, zb, x0);
    alias_refused("reused: two outputs into x", g, 2, (lf_node *[]){y, yrev}, (lf_buffer *[]){xb, xb}, xb, zb, x0);
    cr_assert_eq(lf_eval(g, 2, (lf_node *[]){y, yrev}, (lf_buffer *[]){zb, wb}), LF_OK, "%s", lf_errmsg(c));
    cr_assert_eq(lf_ctx_last_stats(c, &st), LF_OK);
    cr_expect(st.program_reused);
    lf_buffer_free(wb);
    lf_graph_free(g);
    lf_ctx_destroy(c);
    unsetenv("LF_CPU_PARALLEL_MIN");
    expect_no_leak();
}

/* How an output reached its buffer (lf_eval_stats). */
typedef enum written { WRITTEN_DIRECT, WRITTEN_IN_PLACE, WRITTEN_STAGED } written;

/* Evaluates out into dst (x0 in xb first) and expects the stats to say how
 * the output was written: straight into a buffer nothing reads, in place
 * into a buffer it reads (no copy), or staged (copied after the kernels);
 * then checks both buffers against the reference (alias_case). */
static void in_place_case(const char *what, lf_graph *g, lf_node *out, lf_buffer *dst, lf_buffer *xb, lf_buffer *zb,
                          const float *x0, written how, double rtol) {
    lf_eval_stats st;
    lf_buffer_write(xb, x0, AN * sizeof(float));
    cr_assert_eq(lf_eval(g, 1, &out, &dst), LF_OK, "%s: %s", what, lf_errmsg(g->ctx));
    cr_assert_eq(lf_ctx_last_stats(g->ctx, &st), LF_OK);
    cr_expect_eq(st.outputs_in_place, how == WRITTEN_IN_PLACE, "%s: %d outputs in place", what, st.outputs_in_place);
    cr_expect_eq(st.bytes_staged, how == WRITTEN_STAGED ? AN * sizeof(float) : 0, "%s: %zu bytes staged", what,
                 st.bytes_staged);
    alias_case_rtol(what, g, 1, &out, &dst, xb, zb, x0, rtol);
}

/* An output written into an input it reads only at the position it writes
 * runs in place (no copy); any other read of that input (reversed, shifted,
 * reduced after, a partially overlapping wrap) stages. Results always equal
 * the reference's, at every thread count the test uses. */
Test(cpu, outputs_written_into_their_own_inputs) {
    setenv("LF_CPU_PARALLEL_MIN", "1", 1);
    for (int threads = 1; threads <= 3; threads += 2) {
        lf_ctx *c = cpu_ctx(threads, LF_COMPILE_REQUIRE, NULL);
        float x0[AN];
        for (int i = 0; i < AN; i++) x0[i] = (float)tu_uniform(-10, 10);
        x0[3] = NAN, x0[7] = INFINITY, x0[11] = -0.0f;
        lf_buffer *xb = raw_buf(c, LF_F32, 1, SH(AN), x0), *zb = raw_buf(c, LF_F32, 1, SH(AN), NULL);
        lf_buffer *mb = raw_buf(c, LF_F32, 2, SH(32, 32), x0);
        lf_graph *g = lf_graph_new(c);
        lf_node *x = lf_input(g, xb), *m = lf_input(g, mb);
        lf_node *half = lf_const(g, LF_F32, 0.5), *one = lf_const(g, LF_F32, 1);
        lf_node *axpy = lf_add(g, lf_mul(g, x, half), one);
        lf_node *rev = lf_add(g, lf_mul(g, lf_slice(g, x, 0, LF_NONE, LF_NONE, -1), half), one);
        /* softmax of each row of m: a row kernel reading m only where it writes */
        lf_node *mx = lf_reduce(g, LF_RED_MAX, m, 1, (int[]){1}, true);
        lf_node *e = lf_zipwith(g, lf_fn_parse(g, "(a, b) -> exp(a - b)"), 2, (lf_node *[]){m, mx});
        lf_node *sm = lf_div(g, e, lf_reduce(g, LF_RED_SUM, e, 1, (int[]){1}, true));
        /* x*2 stored while sum(x) is still to be read: only a later kernel reads x */
        lf_node *centred = lf_sub(g, x, lf_reduce(g, LF_RED_SUM, x, 0, NULL, false));
        cr_assert_eq(lf_graph_status(g), LF_OK, "%s", lf_graph_errmsg(g));
        in_place_case("x*0.5+1 into x", g, axpy, xb, xb, zb, x0, WRITTEN_IN_PLACE, 0);
        in_place_case("x*0.5+1 into z", g, axpy, zb, xb, zb, x0, WRITTEN_DIRECT, 0);
        in_place_case("x[::-1]*0.5+1 into x", g, rev, xb, xb, zb, x0, WRITTEN_STAGED, 0);
        in_place_case("x*0.5+1 into x again", g, axpy, xb, xb, zb, x0, WRITTEN_IN_PLACE, 0);
        in_place_case("softmax rows of m into m", g, sm, mb, mb, zb, x0, WRITTEN_IN_PLACE, 1e-5);
        alias_case("x - sum(x) into x", g, 1, &centred, &xb, xb, zb, x0);
        lf_graph_free(g);
        lf_buffer_free(mb);
        lf_ctx_destroy(c);
    }
    unsetenv("LF_CPU_PARALLEL_MIN");
    expect_no_leak();
}

/* Wrapped buffers over overlapping memory are distinct buffers sharing
 * elements: writing one while reading the other stages, whether they overlap
 * shifted by one element or exactly (two wraps of one array). An eval into
 * the input itself and one into another buffer are two programs, each
 * reused afterwards. */
Test(cpu, overlapping_wraps_stage_and_in_place_programs_are_cached) {
    setenv("LF_CPU_PARALLEL_MIN", "1", 1);
    lf_ctx *c = cpu_ctx(2, LF_COMPILE_REQUIRE, NULL);
    static float mem[AN + 1], before[AN + 1];
    for (int i = 0; i <= AN; i++) mem[i] = before[i] = (float)tu_uniform(-10, 10);
    lf_buffer *wa = lf_buffer_wrap(c, LF_F32, 1, SH(AN), NULL, mem, NULL, NULL);
    lf_buffer *shifted = lf_buffer_wrap(c, LF_F32, 1, SH(AN), NULL, mem + 1, NULL, NULL);
    lf_buffer *same = lf_buffer_wrap(c, LF_F32, 1, SH(AN), NULL, mem, NULL, NULL);
    cr_assert(wa && shifted && same, "%s", lf_errmsg(c));
    lf_graph *g = lf_graph_new(c);
    lf_node *y = lf_add(g, lf_mul(g, lf_input(g, wa), lf_const(g, LF_F32, 0.5)), lf_const(g, LF_F32, 1));
    lf_eval_stats st;
    cr_assert_eq(lf_eval(g, 1, &y, &shifted), LF_OK, "%s", lf_errmsg(c));
    cr_assert_eq(lf_ctx_last_stats(c, &st), LF_OK);
    cr_expect_eq(st.outputs_in_place, 0);
    cr_expect_eq(st.bytes_staged, AN * sizeof(float));
    cr_expect_eq(mem[0], before[0]);
    for (int i = 0; i < AN; i++)
        cr_assert_eq(mem[i + 1], before[i] * 0.5f + 1, "shifted wrap: element %d is %a, want %a", i, mem[i + 1],
                     before[i] * 0.5f + 1);
    memcpy(mem, before, sizeof mem);
    cr_assert_eq(lf_eval(g, 1, &y, &same), LF_OK, "%s", lf_errmsg(c));
    cr_assert_eq(lf_ctx_last_stats(c, &st), LF_OK);
    cr_expect_eq(st.outputs_in_place, 0);
    cr_expect_eq(st.bytes_staged, AN * sizeof(float));
    for (int i = 0; i < AN; i++) cr_assert_eq(mem[i], before[i] * 0.5f + 1, "same wrap: element %d", i);
    /* into wa itself: in place, a program of its own; then both are reused */
    bool reused[4];
    lf_buffer *dst[4] = {wa, same, wa, same};
    for (int r = 0; r < 4; r++) {
        memcpy(mem, before, sizeof mem);
        cr_assert_eq(lf_eval(g, 1, &y, &dst[r]), LF_OK, "%s", lf_errmsg(c));
        cr_assert_eq(lf_ctx_last_stats(c, &st), LF_OK);
        reused[r] = st.program_reused;
        cr_expect_eq(st.outputs_in_place, dst[r] == wa, "eval %d: %d in place", r, st.outputs_in_place);
        for (int i = 0; i < AN; i++) cr_assert_eq(mem[i], before[i] * 0.5f + 1, "eval %d: element %d", r, i);
    }
    cr_expect(!reused[0] && reused[1] && reused[2] && reused[3], "programs reused: %d %d %d %d", reused[0], reused[1],
              reused[2], reused[3]);
    lf_graph_free(g);
    lf_buffer_free(wa);
    lf_buffer_free(shifted);
    lf_buffer_free(same);
    lf_ctx_destroy(c);
    unsetenv("LF_CPU_PARALLEL_MIN");
    expect_no_leak();
}

/* ==== 7. LF_DEBUG=source ============================================================= */

Test(cpu, debug_source_dump) {
    setenv("LF_DEBUG", "source", 1);
    lf_ctx *c = cpu_ctx(1, LF_COMPILE_REQUIRE, NULL);
    lf_node *out;
    lf_graph *g = small_graph(c, 0, &out);
    lf_buffer *d = lf_buffer_new_like(c, out);
    tu_capture_stderr_start();
    lf_status st = lf_eval(g, 1, &out, &d);
    char *err = tu_capture_stderr_end();
    cr_assert_eq(st, LF_OK, "%s", lf_errmsg(c));
    cr_assert(strstr(err, "lf_k_run"), "no lf_k_run in the dump:\n%s", err);
    cr_assert(strstr(err, "/* n"), "no node comment in the dump:\n%s", err);
    cr_assert(strstr(err, "sin"), "the dump lacks the kernel's body:\n%s", err);
    free(err);
    unsetenv("LF_DEBUG");
    lf_graph_free(g);
    lf_ctx_destroy(c);
    expect_no_leak();
}

/* A small innermost stride (an interleaved or transposed small operand: the
 * columns of an [n, 3] array) is printed as a literal, so the compiler can
 * vectorize the strided load; a large one stays a run-time parameter. The
 * results equal the reference either way. */
Test(cpu, small_inner_strides_are_baked_in) {
    setenv("LF_DEBUG", "source", 1);
    lf_ctx *c = cpu_ctx(2, LF_COMPILE_REQUIRE, NULL);
    lf_graph *g = lf_graph_new(c);
    double v[60 * 20];
    for (int i = 0; i < 60 * 20; i++) v[i] = (double)((i * 7) % 23) - 11.0;
    lf_node *x3 = lf_input(g, tu_buf(c, LF_F32, 2, (int64_t[]){400, 3}, v));
    lf_node *x20 = lf_input(g, tu_buf(c, LF_F32, 2, (int64_t[]){60, 20}, v));
    lf_node *y3 = lf_add(g, lf_slice(g, x3, 1, 0, 1, 1), lf_slice(g, x3, 1, 2, 3, 1));   /* [400, 1]: stride 3 */
    lf_node *y20 = lf_mul(g, lf_slice(g, x20, 1, 5, 6, 1), lf_const(g, LF_F32, 2.0)); /* [60, 1]: stride 20 */
    lf_node *outs[2] = {lf_reshape(g, y3, 1, (int64_t[]){400}), lf_reshape(g, y20, 1, (int64_t[]){60})};
    for (int i = 0; i < 2; i++) {
        lf_buffer *d = lf_buffer_new_like(c, outs[i]);
        tu_capture_stderr_start();
        lf_status st = lf_eval(g, 1, &outs[i], &d);
        char *err = tu_capture_stderr_end();
        cr_assert_eq(st, LF_OK, "%s", lf_errmsg(c));
        bool baked = strstr(err, "= 3; /* small stride, baked in */") != NULL;
        cr_expect_eq(baked, i == 0, "output %d: stride literal %s:\n%s", i, baked ? "printed" : "missing", err);
        if (i == 1) cr_expect(strstr(err, "= 20; /* small stride") == NULL);
        free(err);
        double got[400];
        tu_read(d, got);
        for (int j = 0; j < (i ? 60 : 400); j++) {
            double want = i ? v[j * 20 + 5] * 2.0 : v[j * 3] + v[j * 3 + 2];
            cr_assert(got[j] == want, "output %d element %d: %g, want %g", i, j, got[j], want);
        }
        lf_buffer_free(d);
    }
    unsetenv("LF_DEBUG");
    lf_graph_free(g);
    lf_ctx_destroy(c);
    expect_no_leak();
}

/* ==== 8. run-time scalars (lf_const, lf_fill, lf_scalar_set) ========================== */

/* One graph with constants of every dtype in every kernel kind: elementwise
 * (with a fill), a reduction with a constant in its input and epilogue, a
 * row pass, a scan, a scatter into a fill. */
typedef struct scalar_graph {
    lf_graph *g;
    lf_node *c[5];                 /* f32, f64, i32, bool, i64 constants */
    lf_node *fill;                 /* f32 fill of x's shape */
    lf_node *dst;                  /* i32 fill, a scatter's destination */
    lf_node *outs[6];
} scalar_graph;

enum { SCALAR_N = 3000 };

static scalar_graph make_scalar_graph(lf_ctx *c, const float *x0, const int32_t *i0, const double *v) {
    scalar_graph s;
    lf_graph *g = s.g = lf_graph_new(c);
    lf_node *x = in_node(g, LF_F32, 1, SH(SCALAR_N), x0);
    lf_node *idx = in_node(g, LF_I32, 1, SH(SCALAR_N), i0);
    static const lf_dtype ts[5] = {LF_F32, LF_F64, LF_I32, LF_BOOL, LF_I64};
    for (int k = 0; k < 5; k++) s.c[k] = lf_const(g, ts[k], v[k]);
    s.fill = lf_fill(g, LF_F32, v[5], 1, SH(SCALAR_N));
    s.dst = lf_fill(g, LF_I32, v[6], 1, SH(7));
    lf_node *y = lf_add(g, lf_mul(g, x, s.c[0]), s.fill);
    lf_node *z = lf_select(g, s.c[3], lf_sub(g, x, s.c[1]), lf_mul(g, lf_cast(g, x, LF_I32), s.c[2]));
    lf_node *r = lf_add(g, lf_reduce(g, LF_RED_SUM, lf_maximum(g, x, s.c[0]), 0, NULL, false), s.c[1]);
    lf_node *x2 = lf_reshape(g, x, 2, SH(30, 100));
    lf_node *m = lf_reduce(g, LF_RED_MAX, lf_mul(g, x2, s.c[0]), 1, (int[]){1}, true);
    lf_node *row = lf_sub(g, lf_mul(g, x2, s.c[0]), lf_add(g, m, s.c[4]));
    lf_node *sc = lf_scan(g, LF_RED_SUM, lf_mul(g, lf_cast(g, x, LF_I64), s.c[4]), 0, false);
    lf_node *sct = lf_scatter(g, LF_SCATTER_ADD, s.dst, 0, idx, lf_mul(g, lf_cast(g, x, LF_I32), s.c[2]));
    s.outs[0] = y, s.outs[1] = z, s.outs[2] = r, s.outs[3] = row, s.outs[4] = sc, s.outs[5] = sct;
    cr_assert_eq(lf_graph_status(g), LF_OK, "%s", lf_graph_errmsg(g));
    return s;
}

static const double SCALAR_VALUES[] = {0.5, -0.0, 0.0, NAN, INFINITY, -INFINITY, 1e10, -3.75, 1.0, 2.7,
                                       -2.5, 1e300, -1e-300, 3.4e38 * 10, 7.0};
enum { NSCALAR_VALUES = sizeof SCALAR_VALUES / sizeof SCALAR_VALUES[0] };

/* Sets every constant of s from round r's values. */
static void scalar_values(int r, double *v) {
    for (int k = 0; k < 7; k++) v[k] = SCALAR_VALUES[(r * 3 + k * 5) % NSCALAR_VALUES];
}

/* A new value for every constant of a built graph: bit-identical to the
 * reference for every value (NaN, +-Inf, -0.0, overflowing f32 and
 * truncated integers included), with the program reused and nothing
 * compiled or looked up; then a rebuilt graph with other values finds every
 * kernel in memory, and a new context finds them on disk: a value is not
 * part of a kernel's identity. */
Test(cpu, scalar_set_reuses_the_program, .timeout = 300) {
    setenv("LF_CPU_PARALLEL_MIN", "1", 1);
    lf_ctx *c = cpu_ctx(2, LF_COMPILE_REQUIRE, NULL);
    float *x0 = rand_f32(SCALAR_N, -4, 4);
    int32_t *i0 = rand_i32(SCALAR_N, -7, 6);
    x0[5] = NAN, x0[17] = INFINITY, x0[40] = -0.0f, x0[41] = -INFINITY;
    double v[7];
    scalar_values(0, v);
    scalar_graph s = make_scalar_graph(c, x0, i0, v);
    double rtol[6] = {0, 0, 1e-6, 0, 0, 0}; /* the f32 sum: a fixed order of lanes */
    lf_eval_stats st = check_vs_reference("scalars, first values", s.g, 6, s.outs, rtol);
    cr_expect(!st.program_reused);
    int kernels = st.kernels;
    /* y and z are stored in pass 0 of r's kernel (plan_merge.c absorb_space): a
       reduction kernel with pass-0 stores, a row kernel, a scan, a scatter */
    cr_expect_geq(kernels, 4);
    for (int r = 1; r < 2 * NSCALAR_VALUES; r++) {
        scalar_values(r, v);
        for (int k = 0; k < 5; k++) cr_assert_eq(lf_scalar_set(s.g, s.c[k], v[k]), LF_OK, "%s", lf_errmsg(c));
        cr_assert_eq(lf_scalar_set(s.g, s.fill, v[5]), LF_OK);
        cr_assert_eq(lf_scalar_set(s.g, s.dst, v[6]), LF_OK);
        char what[64];
        snprintf(what, sizeof what, "scalars, round %d", r);
        st = check_vs_reference(what, s.g, 6, s.outs, rtol);
        cr_expect(st.program_reused, "%s: the program was not reused", what);
        cr_expect_eq(st.kernels_compiled, 0, "%s: compiled %d", what, st.kernels_compiled);
        cr_expect_eq(st.kernels_memory_hits + st.kernels_disk_hits, 0, "%s: looked kernels up", what);
        cr_expect_eq(st.plan_seconds, 0);
        cr_expect_eq(st.kernels, kernels);
    }
    /* the same structure with other values: every kernel from memory */
    scalar_values(7, v);
    scalar_graph s2 = make_scalar_graph(c, x0, i0, v);
    st = check_vs_reference("scalars, rebuilt graph", s2.g, 6, s2.outs, rtol);
    cr_expect(!st.program_reused);
    cr_expect_eq(st.kernels_compiled, 0, "a rebuilt graph with other values compiled %d kernel(s)", st.kernels_compiled);
    cr_expect_eq(st.kernels_memory_hits, kernels);
    lf_graph_free(s2.g);
    lf_graph_free(s.g);
    lf_ctx_destroy(c);
    /* a new context: the disk cache's keys hold no value either */
    c = cpu_ctx(1, LF_COMPILE_REQUIRE, NULL);
    scalar_values(11, v);
    scalar_graph s3 = make_scalar_graph(c, x0, i0, v);
    st = check_vs_reference("scalars, new context", s3.g, 6, s3.outs, rtol);
    cr_expect_eq(st.kernels_compiled, 0, "a new context compiled %d kernel(s)", st.kernels_compiled);
    cr_expect_eq(st.kernels_disk_hits, kernels);
    lf_graph_free(s3.g);
    lf_ctx_destroy(c);
    free(x0);
    free(i0);
    unsetenv("LF_CPU_PARALLEL_MIN");
    expect_no_leak();
}

/* Constants never reach the source text: two values, one text. */
Test(cpu, scalar_values_are_not_in_the_source) {
    lf_ctx *c = cpu_ctx(1, LF_COMPILE_REQUIRE, NULL);
    char *src[2];
    for (int k = 0; k < 2; k++) {
        lf_graph *g = lf_graph_new(c);
        lf_node *x = lf_iota(g, LF_F32, 100);
        lf_node *y = lf_add(g, lf_mul(g, x, lf_const(g, LF_F32, k ? 0.1 : 12345.0)),
                            lf_fill(g, LF_F64, k ? -7.5 : 98765.0, 1, SH(100)));
        lf_buffer *d = lf_buffer_new_like(c, y);
        setenv("LF_DEBUG", "source", 1);
        tu_capture_stderr_start();
        lf_status st = lf_eval(g, 1, &y, &d);
        src[k] = tu_capture_stderr_end();
        unsetenv("LF_DEBUG");
        cr_assert_eq(st, LF_OK, "%s", lf_errmsg(c));
        lf_buffer_free(d);
        lf_graph_free(g);
    }
    cr_expect(strstr(src[0], "lf_k_run"), "no dump:\n%s", src[0]);
    cr_expect_null(strstr(src[0], "12345"), "a constant's value is in the source:\n%s", src[0]);
    cr_expect_null(strstr(src[0], "0x1.81c8p+13"), "a constant's value is in the source:\n%s", src[0]);
    cr_expect_null(strstr(src[0], "98765"), "a fill's value is in the source:\n%s", src[0]);
    cr_expect_str_eq(src[0], src[1], "other values, other source");
    free(src[0]);
    free(src[1]);
    lf_ctx_destroy(c);
    expect_no_leak();
}

/* A constant exponent: its value class (graph_pow_exponent_class: 0.5, 2, 1,
 * 0, -1, or any other value) is part of the kernel, its value is not. The
 * kernel of a class value computes the power without pow (the literal
 * reaches lf_pow_*, the compiler keeps one branch): each class compiles once,
 * a new value of the same class reuses the program, a new class replans and
 * finds or compiles that class's kernel, and every result is the
 * reference's (pow's bound: these kernels are exact, the general one calls
 * the vector pow). */
Test(cpu, pow_exponent_class_specialises_the_kernel, .timeout = 300) {
    lf_ctx *c = cpu_ctx(1, LF_COMPILE_REQUIRE, NULL);
    enum { N = 1000 };
    float *x0 = rand_f32(N, -3, 3);
    const float special[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1.0f, -1.0f, 1e-40f, -2.5f, 3.4e38f};
    for (int i = 0; i < (int)(sizeof special / sizeof *special); i++) x0[i * 7] = special[i];
    lf_graph *g = lf_graph_new(c);
    lf_node *x = in_node(g, LF_F32, 1, SH(N), x0);
    lf_node *k = lf_const(g, LF_F32, 0.5);
    /* k also read as a plain value, in the same kernel */
    lf_node *y[2] = {lf_pow(g, x, k), lf_mul(g, x, k)};
    cr_assert_eq(lf_graph_status(g), LF_OK, "%s", lf_graph_errmsg(g));
    /* value, its class, whether the program is reused, whether a kernel compiles */
    static const struct { double v; bool reused, compiles; } steps[] = {
        {0.5, false, true},  {0.5, true, false},  {0.7, false, true},   {0.9, true, false},
        {-3.25, true, false}, {2, false, true},   {1, false, true},     {0, false, true},
        {-0.0, true, false}, {-1, false, true},   {NAN, false, false},  {0.5, false, false},
        {2, false, false},   {1e30, false, false},
    };
    double rtol[2] = {4 * 1.2e-7, 0}; /* pow's bound (lazyfuse.h); the class kernels are exact */
    for (int r = 0; r < (int)(sizeof steps / sizeof *steps); r++) {
        cr_assert_eq(lf_scalar_set(g, k, steps[r].v), LF_OK, "%s", lf_errmsg(c));
        char what[64];
        snprintf(what, sizeof what, "x ** %g (step %d)", steps[r].v, r);
        lf_eval_stats st = check_vs_reference(what, g, 2, y, rtol);
        cr_expect_eq(st.program_reused, steps[r].reused, "%s: program reused %d", what, st.program_reused);
        cr_expect_eq(st.kernels_compiled, steps[r].compiles ? 1 : 0, "%s: compiled %d", what, st.kernels_compiled);
    }
    /* the source: a class value is a literal with no pow left to call, another value is read from P */
    char *src[2];
    for (int s = 0; s < 2; s++) {
        cr_assert_eq(lf_scalar_set(g, k, s ? 0.75 : 0.5), LF_OK);
        setenv("LF_DEBUG", "source", 1);
        lf_graph *g2 = lf_graph_new(c); /* a fresh graph: the source is printed when a program is built */
        lf_node *x2 = in_node(g2, LF_F32, 1, SH(N), x0);
        lf_node *k2 = lf_const(g2, LF_F32, s ? 0.75 : 0.5);
        lf_node *y2 = lf_add(g2, lf_pow(g2, x2, k2), lf_mul(g2, x2, k2));
        lf_buffer *d = lf_buffer_new_like(c, y2);
        tu_capture_stderr_start();
        lf_status est = lf_eval(g2, 1, &y2, &d);
        src[s] = tu_capture_stderr_end();
        unsetenv("LF_DEBUG");
        cr_assert_eq(est, LF_OK, "%s", lf_errmsg(c));
        lf_buffer_free(d);
        lf_graph_free(g2);
    }
    cr_expect(strstr(src[0], "(float)0x1p-1"), "x ** 0.5: no literal exponent in\n%s", src[0]);
    cr_expect_null(strstr(src[1], "(float)0x1.8p-1"), "x ** 0.75: the value is in the source\n%s", src[1]);
    cr_expect(strcmp(src[0], src[1]) != 0, "two classes, one source");
    free(src[0]);
    free(src[1]);
    lf_graph_free(g);
    free(x0);
    lf_ctx_destroy(c);
    expect_no_leak();
}

/* A constant that a map reads directly as an exponent is marked, and only
 * that one: a cast in between or a constant used otherwise keeps
 * lf_scalar_set free of replanning (scalar_set_reuses_the_program). */
Test(cpu, pow_exponent_marks_only_direct_exponents) {
    lf_ctx *c = cpu_ctx(1, LF_COMPILE_NEVER, NULL);
    lf_graph *g = lf_graph_new(c);
    lf_node *x = lf_iota(g, LF_F32, 10);
    lf_node *a = lf_const(g, LF_F32, 2), *b = lf_const(g, LF_F64, 2), *i = lf_const(g, LF_I32, 2),
            *d = lf_const(g, LF_F32, 2);
    lf_node *p = lf_zipwith(g, lf_fn_parse(g, "(x, y) -> x ** y"), 2, (lf_node *[]){x, a});
    lf_node *q = lf_zipwith(g, lf_fn_parse(g, "(x, y) -> x ** f32(y)"), 2, (lf_node *[]){x, b});
    lf_node *r = lf_pow(g, lf_cast(g, x, LF_I32), i); /* integer power: no class */
    lf_node *s = lf_mul(g, x, d);
    cr_assert(p && q && r && s, "%s", lf_graph_errmsg(g));
    cr_expect(a->pow_exponent);
    cr_expect(!b->pow_exponent, "an exponent through a cast was marked");
    cr_expect(!i->pow_exponent, "an integer power's exponent was marked");
    cr_expect(!d->pow_exponent, "a factor was marked");
    lf_graph_free(g);
    lf_ctx_destroy(c);
}

/* ==== 9. the program cache of a graph (one program per output set, LRU) =============== */

/* Evaluates outs of g into fresh buffers (freed after: no program may keep a
 * pointer to them), checks them against the reference, returns whether the
 * program was reused. */
static bool eval_fresh(const char *what, lf_graph *g, int n, lf_node *const *outs) {
    lf_eval_stats st = check_vs_reference(what, g, n, outs, (double[]){1e-5, 1e-5, 1e-5});
    if (st.program_reused) {
        cr_expect_eq(st.kernels_compiled + st.kernels_memory_hits + st.kernels_disk_hits, 0, "%s", what);
        cr_expect_eq(st.plan_seconds, 0, "%s", what);
    }
    return st.program_reused;
}

Test(cpu, program_cache_per_output_set, .timeout = 300) {
    setenv("LF_CPU_PARALLEL_MIN", "1", 1);
    lf_ctx *c = cpu_ctx(2, LF_COMPILE_REQUIRE, NULL);
    float *x0 = rand_f32(5000, -3, 3);
    lf_graph *g = lf_graph_new(c);
    lf_node *x = in_node(g, LF_F32, 1, SH(5000), x0);
    lf_node *k = lf_const(g, LF_F32, 0.5);
    lf_node *y = lf_exp(g, lf_mul(g, x, k));
    lf_node *sets[5][2] = {
        {y, NULL},                                                  /* A */
        {lf_reduce(g, LF_RED_SUM, y, 0, NULL, false), lf_mul(g, y, k)}, /* B */
        {lf_sin(g, lf_sub(g, x, k)), NULL},                         /* C */
        {lf_reduce(g, LF_RED_MAX, lf_reshape(g, y, 2, SH(50, 100)), 1, (int[]){1}, false), NULL}, /* D */
        {lf_scan(g, LF_RED_SUM, x, 0, false), lf_mul(g, y, y)},     /* E */
    };
    int nout[5] = {1, 2, 1, 1, 2};
    cr_assert_eq(lf_graph_status(g), LF_OK, "%s", lf_graph_errmsg(g));
    /* two output sets alternating: a lookup each, never a plan */
    cr_expect(!eval_fresh("A first", g, nout[0], sets[0]));
    cr_expect(!eval_fresh("B first", g, nout[1], sets[1]));
    for (int r = 0; r < 5; r++) {
        cr_expect(eval_fresh("A again", g, nout[0], sets[0]), "round %d: A replanned", r);
        cr_expect(eval_fresh("B again", g, nout[1], sets[1]), "round %d: B replanned", r);
        cr_assert_eq(lf_scalar_set(g, k, 0.25 * r - 1), LF_OK);
    }
    /* four sets fit; a fifth drops the least recently used */
    cr_expect(!eval_fresh("C first", g, nout[2], sets[2]));
    cr_expect(!eval_fresh("D first", g, nout[3], sets[3]));   /* cache: D C B A */
    cr_expect(!eval_fresh("E first", g, nout[4], sets[4]));   /* E D C B, A dropped */
    cr_expect(eval_fresh("B kept", g, nout[1], sets[1]));     /* B E D C */
    cr_expect(!eval_fresh("A was dropped", g, nout[0], sets[0])); /* A B E D, C dropped */
    cr_expect(eval_fresh("D kept", g, nout[3], sets[3]));     /* D A B E */
    cr_expect(!eval_fresh("C was dropped", g, nout[2], sets[2]));
    /* fusion off is another program of the same outputs */
    c->opt.fusion = 0;
    cr_expect(!eval_fresh("C unfused", g, nout[2], sets[2]));
    c->opt.fusion = 1;
    cr_expect(eval_fresh("C fused kept", g, nout[2], sets[2]));
    /* a fusion barrier makes every cached program stale: all are freed */
    size_t cached = lf_debug_live_bytes();
    cr_assert_eq(lf_node_materialize(g, y), LF_OK);
    cr_expect_lt(lf_debug_live_bytes(), cached, "lf_node_materialize kept the stale programs");
    cr_expect(!eval_fresh("C after a barrier", g, nout[2], sets[2]));
    cr_expect(eval_fresh("C again", g, nout[2], sets[2]));
    lf_graph_free(g);
    cr_expect_leq(lf_debug_live_bytes(), cached, "the graph's programs outlived it");
    lf_ctx_destroy(c);
    free(x0);
    unsetenv("LF_CPU_PARALLEL_MIN");
    expect_no_leak();
}

/* ==== 10. cold start: a program's misses compiled together ========================== */

/* An unfused context (every map its own kernel) of `threads` threads. */
static lf_ctx *unfused_ctx(int threads) {
    lf_ctx_options o;
    lf_ctx_options_init(&o);
    o.backend = LF_BACKEND_CPU;
    o.compile = LF_COMPILE_REQUIRE;
    o.fusion = 0;
    lf_ctx *c = lf_ctx_new(&o);
    cr_assert_not_null(c, "lf_ctx_new: %s", lf_errmsg(NULL));
    cr_assert_eq(cpu_set_threads(c, threads), LF_OK, "cpu_set_threads: %s", lf_errmsg(c));
    return c;
}

/* The maps of a chain over x, one kernel each with fusion off; kernel 1
 * (x * 1234.5) prints the constant as 0x1.34ap+10, which a compiler wrapper
 * can look for. */
static const char *const CHAIN[] = {"(x) -> exp(x * 0.25)", "(x) -> x * 1234.5", "(x) -> x + 1.0",
                                    "(x) -> sin(x * 0.0001)", "(x) -> x * x - 3.0", "(x) -> sqrt(abs(x))"};
enum { CHAIN_LEN = sizeof CHAIN / sizeof CHAIN[0], CHAIN_N = 3000 };

/* Evaluates maps CHAIN[first..first+len) over x in c against the reference;
 * returns the stats and, when out is not NULL, the result (malloc'd). */
static lf_eval_stats eval_chain(lf_ctx *c, const float *x, int first, int len, float **out) {
    lf_graph *g = lf_graph_new(c);
    lf_node *y = in_node(g, LF_F32, 1, SH(CHAIN_N), x);
    for (int i = first; i < first + len; i++) y = lf_map(g, lf_fn_parse(g, CHAIN[i]), y);
    cr_assert_eq(lf_graph_status(g), LF_OK, "%s", lf_graph_errmsg(g));
    lf_eval_stats st = check_vs_reference("chain", g, 1, &y, (const double[]){1e-5});
    if (out) {
        lf_buffer *b = lf_buffer_new_like(c, y);
        cr_assert_eq(lf_eval(g, 1, &y, &b), LF_OK, "%s", lf_errmsg(c));
        *out = raw_read(b);
        lf_buffer_free(b);
    }
    lf_graph_free(g);
    return st;
}

/* Issue 14, "Cold start": the six kernels a program misses are compiled in
 * one compiler run on one thread, in two at once on two; the results are
 * the reference's, bit for bit the same on 1 and 2 threads; a second
 * context with the same disk cache loads every kernel from it. */
Test(cpu, cold_program_one_compiler_run_per_unit) {
    float *x = rand_f32(CHAIN_N, -2, 2), *y[3];
    char cc[400], runs[400], script[1000];
    snprintf(cc, sizeof cc, "%s/cc-counting", tmpdir);
    snprintf(runs, sizeof runs, "%s/runs", tmpdir);
    snprintf(script, sizeof script, "#!/bin/sh\nfor a do case \"$a\" in *.c) echo run >> '%s';; esac; done\nexec cc \"$@\"\n", runs);
    write_script(cc, script); /* counts the compiles (not the probe), beside compiler_runs */
    setenv("CC", cc, 1);
    for (int t = 1; t <= 2; t++) {
        char dir[400];
        snprintf(dir, sizeof dir, "%s/cache-%d", tmpdir, t);
        setenv("LF_CACHE_DIR", dir, 1);
        unlink(runs);
        lf_ctx *c = unfused_ctx(t);
        lf_eval_stats st = eval_chain(c, x, 0, CHAIN_LEN, &y[t]);
        EXPECT_STATS("cold", st, CHAIN_LEN, CHAIN_LEN, 0, 0, false);
        cr_expect_eq(st.compiler_runs, t, "%d threads: %d compiler runs, want %d", t, st.compiler_runs, t);
        int lines = 0;
        FILE *f = fopen(runs, "r");
        for (int ch; f && (ch = fgetc(f)) != EOF;) lines += ch == '\n';
        if (f) fclose(f);
        cr_expect_eq(lines, t, "%d threads: the compiler ran %d times, want %d", t, lines, t);
        cr_expect_eq(tu_dir_entries(dir, false), CHAIN_LEN, "%d threads: %d cache entries, want one per kernel", t,
                     tu_dir_entries(dir, false));
        lf_ctx_destroy(c);
        c = unfused_ctx(t); /* a second context: every kernel from disk, no compiler run */
        st = eval_chain(c, x, 0, CHAIN_LEN, NULL);
        EXPECT_STATS("from disk", st, CHAIN_LEN, 0, CHAIN_LEN, 0, false);
        cr_expect_eq(st.compiler_runs, 0);
        lf_ctx_destroy(c);
    }
    expect_same_bits("1 and 2 threads", LF_F32, y[1], y[2], CHAIN_N);
    unsetenv("CC");
    setenv("LF_CACHE_DIR", cache_dir, 1);
    free(y[1]);
    free(y[2]);
    free(x);
    expect_no_leak();
}

/* A kernel shared by two programs of one context is a memory hit in the
 * second, whose new kernels are compiled together; a kernel that appears
 * twice in one program is compiled once (the second a memory hit). */
Test(cpu, cold_shared_kernel_is_a_memory_hit) {
    float *x = rand_f32(CHAIN_N, -2, 2);
    lf_ctx *c = unfused_ctx(1);
    lf_eval_stats st = eval_chain(c, x, 0, 3, NULL);
    EXPECT_STATS("first program", st, 3, 3, 0, 0, false);
    cr_expect_eq(st.compiler_runs, 1);
    st = eval_chain(c, x, 0, CHAIN_LEN, NULL); /* kernels 0-2 shared */
    EXPECT_STATS("second program", st, CHAIN_LEN, CHAIN_LEN - 3, 0, 3, false);
    cr_expect_eq(st.compiler_runs, 1);
    /* exp(x*0.25) twice in one cold program: compiled once */
    lf_ctx_destroy(c);
    char dir[400];
    snprintf(dir, sizeof dir, "%s/cache-2", tmpdir);
    setenv("LF_CACHE_DIR", dir, 1);
    c = unfused_ctx(2);
    lf_graph *g = lf_graph_new(c);
    lf_node *a = in_node(g, LF_F32, 1, SH(CHAIN_N), x);
    lf_node *b = lf_map(g, lf_fn_parse(g, CHAIN[3]), lf_map(g, lf_fn_parse(g, CHAIN[0]), a));
    lf_node *y = lf_map(g, lf_fn_parse(g, CHAIN[0]), b);
    st = check_vs_reference("a kernel twice", g, 1, &y, (const double[]){1e-5});
    cr_expect(st.kernels == 3 && st.kernels_compiled == 2 && st.kernels_memory_hits == 1 && st.compiler_runs == 1,
              "kernels %d compiled %d memory hits %d compiler runs %d; want 3 2 1 1", st.kernels,
              st.kernels_compiled, st.kernels_memory_hits, st.compiler_runs);
    lf_graph_free(g);
    lf_ctx_destroy(c);
    setenv("LF_CACHE_DIR", cache_dir, 1);
    free(x);
    expect_no_leak();
}

/* Issue 30, cold start: the normal random numbers' code (graph/random.h) is
 * compiled once per disk cache into an object every kernel that draws them
 * links (cg_c_random_object), not into each such kernel: a context's first
 * random-normal kernel takes two compiler runs (the object, the kernel), a
 * second, different one in the same context one, and a kernel in a second
 * context on the same cache folder one (the object from disk). Every result
 * is the reference's, bit for bit. */
static lf_eval_stats eval_normal(lf_ctx *c, const float *x, int variant) {
    lf_graph *g = lf_graph_new(c);
    int64_t n = CHAIN_N;
    lf_node *z = lf_random(g, variant == 1 ? LF_F64 : LF_F32, LF_RANDOM_NORMAL, 1, &n, 1234 + (uint64_t)variant);
    lf_node *y = lf_add(g, in_node(g, LF_F32, 1, &n, x), lf_mul(g, lf_const(g, LF_F32, 0.5), z));
    if (variant == 2) y = lf_map(g, lf_fn_parse(g, "(v) -> v * v"), y);
    cr_assert_eq(lf_graph_status(g), LF_OK, "%s", lf_graph_errmsg(g));
    lf_eval_stats st = check_vs_reference("normal", g, 1, &y, (const double[]){0});
    lf_graph_free(g);
    return st;
}

Test(cpu, cold_random_normal_object_compiled_once) {
    float *x = rand_f32(CHAIN_N, -2, 2);
    lf_ctx *c = cpu_ctx(2, LF_COMPILE_REQUIRE, NULL);
    lf_eval_stats st = eval_normal(c, x, 0);
    cr_expect(st.kernels_compiled == 1 && st.compiler_runs == 2, "first: compiled %d in %d runs, want 1 in 2",
              st.kernels_compiled, st.compiler_runs);
    st = eval_normal(c, x, 1);
    cr_expect(st.kernels_compiled == 1 && st.compiler_runs == 1, "second: compiled %d in %d runs, want 1 in 1",
              st.kernels_compiled, st.compiler_runs);
    lf_ctx_destroy(c);
    c = cpu_ctx(2, LF_COMPILE_REQUIRE, NULL); /* same folder: the object from disk */
    st = eval_normal(c, x, 2);
    cr_expect(st.kernels_compiled == 1 && st.compiler_runs == 1, "new context: compiled %d in %d runs, want 1 in 1",
              st.kernels_compiled, st.compiler_runs);
    lf_ctx_destroy(c);
    free(x);
    expect_no_leak();
}

/* A compiler wrapper that fails any unit holding CHAIN's kernel 1. */
static const char FAILING_CC[] = "#!/bin/sh\n"
                                 "for a do case \"$a\" in *.c) if grep -q '0x1.34ap+10' \"$a\"; then\n"
                                 "  echo \"$a:1:1: error: injected failure\" >&2; exit 1; fi;; esac; done\n"
                                 "exec cc \"$@\"\n";

/* A compile error in one kernel of a unit: the eval fails with that
 * kernel's own message (its number, the node it computes as every message
 * names a node, and the compiler's error), the kernel
 * before it is stored as when kernels were compiled one by one, and
 * neither the failing kernel nor any after it is; on 1 and 2 threads. */
Test(cpu, cold_compile_error_names_its_kernel) {
    char cc[400];
    snprintf(cc, sizeof cc, "%s/cc-wrapper", tmpdir);
    write_script(cc, FAILING_CC);
    float *x = rand_f32(CHAIN_N, -2, 2);
    for (int t = 1; t <= 2; t++) {
        char dir[400];
        snprintf(dir, sizeof dir, "%s/cache-%d", tmpdir, t);
        setenv("LF_CACHE_DIR", dir, 1);
        setenv("CC", cc, 1);
        lf_ctx *c = unfused_ctx(t);
        lf_graph *g = lf_graph_new(c);
        lf_node *y = in_node(g, LF_F32, 1, SH(CHAIN_N), x);
        for (int i = 0; i < CHAIN_LEN; i++) y = lf_map(g, lf_fn_parse(g, CHAIN[i]), y);
        lf_buffer *yb = lf_buffer_new_like(c, y);
        cr_assert_eq(lf_eval(g, 1, &y, &yb), LF_ERR_BACKEND);
        const char *msg = lf_errmsg(c);
        /* kernel 1 named by its root, the map of CHAIN[1] (node 2: the input is 0) */
        cr_expect(strstr(msg, "eval: compiling kernel 1 (computing node 2 (map f32[3000] \"(x) -> x * 1234.5\")) "
                              "failed: C compiler failed (exit status 1)") &&
                      strstr(msg, "injected failure"),
                  "%d threads: message: %s", t, msg);
        lf_eval_stats st;
        cr_assert_eq(lf_ctx_last_stats(c, &st), LF_OK);
        cr_expect_eq(st.kernels, 0, "stats after a failed eval are zero");
        cr_expect_eq(tu_dir_entries(dir, false), 1, "%d threads: %d cache entries, want kernel 0's only", t,
                     tu_dir_entries(dir, false));
        lf_graph_free(g);
        lf_buffer_free(yb);
        lf_ctx_destroy(c);
        /* the compiler works again (same $CC, same keys): kernel 0 from disk, the others compiled */
        write_script(cc, "#!/bin/sh\nexec cc \"$@\"\n");
        c = unfused_ctx(t);
        lf_eval_stats st2 = eval_chain(c, x, 0, CHAIN_LEN, NULL);
        EXPECT_STATS("after the failure", st2, CHAIN_LEN, CHAIN_LEN - 1, 1, 0, false);
        lf_ctx_destroy(c);
        unsetenv("CC");
        write_script(cc, FAILING_CC);
    }
    setenv("LF_CACHE_DIR", cache_dir, 1);
    free(x);
    expect_no_leak();
}

/* 4 processes starting cold on one cache folder with the same program of
 * six kernels still compile each kernel once: the misses' locks are taken
 * in key order before the unit is compiled, so one process compiles, the
 * others wait and load every kernel from disk. No lock file is left. */
Test(cpu, cold_program_processes_compile_each_kernel_once, .timeout = 300) {
    enum { P = 4 };
    int go[2], res[2];
    cr_assert_eq(pipe(go), 0);
    cr_assert_eq(pipe(res), 0);
    float *x = rand_f32(CHAIN_N, -2, 2);
    pid_t pids[P];
    for (int p = 0; p < P; p++) {
        pids[p] = fork();
        cr_assert_geq(pids[p], 0);
        if (pids[p] == 0) {
            close(go[1]);
            close(res[0]);
            char b;
            if (read(go[0], &b, 1) < 0) _exit(2); /* all start together */
            lf_ctx *c = unfused_ctx(2);
            lf_eval_stats st = eval_chain(c, x, 0, CHAIN_LEN, NULL);
            int out[3] = {0, st.kernels_compiled, st.kernels_disk_hits};
            int rc = write(res[1], out, sizeof out) == sizeof out ? 0 : 1;
            lf_ctx_destroy(c);
            _exit(rc);
        }
    }
    close(go[0]);
    close(res[1]);
    close(go[1]); /* go */
    int compiled = 0, disk = 0, got[3];
    for (int p = 0; p < P; p++) {
        cr_assert_eq(read(res[0], got, sizeof got), (ssize_t)sizeof got, "child %d said nothing", p);
        compiled += got[1], disk += got[2];
    }
    for (int p = 0; p < P; p++) {
        int ws;
        cr_assert_eq(waitpid(pids[p], &ws, 0), pids[p]);
        cr_assert(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "child %d failed", p);
    }
    close(res[0]);
    free(x);
    cr_assert_eq(compiled, CHAIN_LEN, "%d kernels compiled in all (%d loaded), want each once (%d)", compiled, disk,
                 CHAIN_LEN);
    cr_assert_eq(disk, (P - 1) * CHAIN_LEN);
    cr_assert_eq(tu_dir_entries(cache_dir, true), CHAIN_LEN, "a lock or temp file was left");
}

/* The names and inode numbers of a folder's entries, sorted into one string
 * (a removed and rebuilt entry gets a new inode). */
static void entry_fingerprint(const char *dir, char *out, size_t cap) {
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "opendir %s: %s", dir, strerror(errno));
    char lines[64][320];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 64) {
        if (e->d_name[0] == '.') continue;
        char path[600];
        struct stat sb;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        cr_assert_eq(stat(path, &sb), 0);
        snprintf(lines[n++], sizeof lines[0], "%s@%llu;", e->d_name, (unsigned long long)sb.st_ino);
    }
    closedir(d);
    qsort(lines, (size_t)n, sizeof lines[0], (int (*)(const void *, const void *))strcmp);
    size_t len = 0;
    out[0] = '\0';
    for (int i = 0; i < n; i++) len += (size_t)snprintf(out + len, len < cap ? cap - len : 0, "%s", lines[i]);
}

/* With a warm disk cache, an allocation failure while a new context loads
 * the program's kernels from it fails the eval with LF_ERR_NOMEM and a
 * message that says so, or is survived; it never removes a valid entry (a
 * transient ENOMEM says nothing about the entry) and leaks nothing. */
Test(cpu, warm_cache_allocation_failures_keep_entries, .timeout = 600) {
    float *x = rand_f32(CHAIN_N, -2, 2);
    char dir[400], before[64 * 320], after[64 * 320];
    snprintf(dir, sizeof dir, "%s/warm", tmpdir);
    setenv("LF_CACHE_DIR", dir, 1);
    lf_ctx *c0 = unfused_ctx(2);
    eval_chain(c0, x, 0, CHAIN_LEN, NULL);
    lf_ctx_destroy(c0);
    entry_fingerprint(dir, before, sizeof before);
    cr_assert_eq(tu_dir_entries(dir, false), CHAIN_LEN);
    int failed = 0, ok_in_a_row = 0, k;
    for (k = 1; k <= 2000 && ok_in_a_row < 25; k++) {
        lf_ctx *c = unfused_ctx(2);
        lf_graph *g = lf_graph_new(c);
        lf_node *y = in_node(g, LF_F32, 1, SH(CHAIN_N), x);
        for (int i = 0; i < CHAIN_LEN; i++) y = lf_map(g, lf_fn_parse(g, CHAIN[i]), y);
        lf_buffer *yb = lf_buffer_new_like(c, y);
        cr_assert(yb && lf_graph_status(g) == LF_OK);
        lf_debug_fail_alloc(k, false);
        lf_status st = lf_eval(g, 1, &y, &yb);
        lf_debug_fail_alloc(0, false);
        if (st == LF_OK) {
            lf_eval_stats es;
            lf_ctx_last_stats(c, &es);
            ok_in_a_row += es.kernels_disk_hits == CHAIN_LEN; /* a survived failure may have compiled */
        } else {
            cr_assert_eq(st, LF_ERR_NOMEM, "allocation %d: %s: %s", k, lf_status_name(st), lf_errmsg(c));
            cr_expect(strstr(lf_errmsg(c), "out of memory") && !strstr(lf_errmsg(c), "?"),
                      "allocation %d: the message names no reason: %s", k, lf_errmsg(c));
            ok_in_a_row = 0;
            failed++;
        }
        lf_graph_free(g);
        lf_buffer_free(yb);
        lf_ctx_destroy(c);
        expect_no_leak();
        entry_fingerprint(dir, after, sizeof after);
        cr_assert_str_eq(after, before, "allocation %d (%s) removed or rebuilt a cache entry", k,
                         st == LF_OK ? "survived" : "failed");
    }
    cr_expect(ok_in_a_row == 25 && failed > 10, "%d tries, %d failed, %d passed in a row at the end", k - 1, failed,
              ok_in_a_row);
    tu_note("warm-cache allocation sweep: %d tries, %d failed cleanly, no entry removed\n", k - 1, failed);
    setenv("LF_CACHE_DIR", cache_dir, 1);
    free(x);
}

/* An allocation failure anywhere in a cold program of several kernels (the
 * lookups, the locks, the units' sources, the compiles on two threads, the
 * binding and storing) fails the eval with LF_ERR_NOMEM and leaks nothing;
 * each try starts cold (a fresh cache folder). */
Test(cpu, cold_program_allocation_failures_leak_nothing, .timeout = 600) {
    enum { LEN = 4 };
    float *x = rand_f32(CHAIN_N, -2, 2);
    int failed = 0, ok_in_a_row = 0, k;
    for (k = 1; k <= 2000 && ok_in_a_row < 25; k++) { /* some failures are survived: until 25 pass in a row */
        char dir[400];
        snprintf(dir, sizeof dir, "%s/cache-%d", tmpdir, k);
        setenv("LF_CACHE_DIR", dir, 1);
        lf_ctx *c = unfused_ctx(2);
        lf_graph *g = lf_graph_new(c);
        lf_node *y = in_node(g, LF_F32, 1, SH(CHAIN_N), x);
        for (int i = 0; i < LEN; i++) y = lf_map(g, lf_fn_parse(g, CHAIN[i]), y);
        lf_buffer *yb = lf_buffer_new_like(c, y);
        cr_assert(yb && lf_graph_status(g) == LF_OK);
        lf_debug_fail_alloc(k, false);
        lf_status st = lf_eval(g, 1, &y, &yb);
        lf_debug_fail_alloc(0, false);
        if (st == LF_OK) {
            ok_in_a_row++;
        } else {
            cr_assert_eq(st, LF_ERR_NOMEM, "allocation %d: %s: %s", k, lf_status_name(st), lf_errmsg(c));
            ok_in_a_row = 0;
            failed++;
        }
        lf_graph_free(g);
        lf_buffer_free(yb);
        lf_ctx_destroy(c);
        expect_no_leak();
    }
    cr_expect(ok_in_a_row == 25 && failed > 20, "%d tries, %d failed, %d passed in a row at the end", k - 1, failed,
              ok_in_a_row);
    setenv("LF_CACHE_DIR", cache_dir, 1);
    free(x);
}

/* ==== 11. input rebinding (lf_input_rebind) ============================================ */

static void release_count(void *arg) { ++*(int *)arg; }

/* Random values with the special ones (NaN, +-Inf, -0.0) sprinkled in. */
static void rebind_values(float *x, int32_t *idx, int64_t n, int round) {
    for (int64_t i = 0; i < n; i++) x[i] = (float)tu_uniform(-4, 4);
    for (int64_t i = 0; i < n; i++) idx[i] = (int32_t)tu_randint(-7, 6);
    if (n > 50) x[(round * 7) % n] = NAN, x[(round * 11 + 3) % n] = INFINITY, x[(round * 13 + 5) % n] = -0.0f,
                x[(round * 17 + 9) % n] = -INFINITY;
}

/* A graph over three inputs (a dense f32 x, a strided f32 view t of a
 * wrapped matrix, an i32 index) with every kernel kind: elementwise, a
 * reduction, a row pass, a scan, a scatter, a gather. Each round points the
 * inputs at new buffers of new values: the outputs match the reference
 * evaluator (and y a plain C loop over the new x), the program is reused,
 * nothing is compiled, looked up or planned; the old buffers are released
 * (a wrapped one's release called once) as soon as the graph lets them go.
 * Run on the compiled backend and on the interpreter. */
static void rebind_rounds(lf_ctx *c, bool compiled) {
    enum { N = 3000, ROUNDS = 6 };
    float *x0 = xmalloc(N * sizeof *x0), *m0 = xmalloc(N * sizeof *m0);
    int32_t *i0 = xmalloc(N * sizeof *i0);
    rebind_values(x0, i0, N, 0);
    rebind_values(m0, i0, N, 1);
    lf_graph *g = lf_graph_new(c);
    lf_buffer *xb = raw_buf(c, LF_F32, 1, SH(N), x0), *ib = raw_buf(c, LF_I32, 1, SH(N), i0);
    int released[ROUNDS + 1] = {0};
    /* t: the transpose of a 30 x 100 matrix, wrapped with strides (1, 100) */
    lf_buffer *tb = lf_buffer_wrap(c, LF_F32, 2, SH(100, 30), SH(1, 100), m0, release_count, &released[0]);
    cr_assert_not_null(tb, "%s", lf_errmsg(c));
    lf_node *x = lf_input(g, xb), *idx = lf_input(g, ib), *t = lf_input(g, tb);
    lf_buffer_free(xb), lf_buffer_free(ib), lf_buffer_free(tb);
    lf_node *k = lf_const(g, LF_F32, 2.0);
    lf_node *y = lf_add(g, lf_mul(g, x, k), lf_const(g, LF_F32, 1.0));
    lf_node *r = lf_reduce(g, LF_RED_SUM, lf_maximum(g, x, k), 0, NULL, false);
    lf_node *x2 = lf_reshape(g, x, 2, SH(30, 100));
    lf_node *row = lf_sub(g, x2, lf_reduce(g, LF_RED_MAX, lf_mul(g, x2, lf_transpose(g, t)), 1, AX(1), true));
    lf_node *sc = lf_scan(g, LF_RED_SUM, lf_cast(g, x, LF_I64), 0, false);
    lf_node *sct = lf_scatter(g, LF_SCATTER_ADD, lf_fill(g, LF_I32, 0, 1, SH(7)), 0, idx, lf_cast(g, x, LF_I32));
    lf_node *gat = lf_take(g, lf_reshape(g, t, 1, SH(-1)), 0, lf_map(g, lf_fn_parse(g, "(i) -> i + 7"), idx));
    lf_node *outs[] = {y, r, row, sc, sct, gat};
    cr_assert_eq(lf_graph_status(g), LF_OK, "%s", lf_graph_errmsg(g));
    double rtol[6] = {0, 1e-6, 0, 0, 0, 0};
    lf_eval_stats st = check_vs_reference("rebind, first buffers", g, 6, outs, rtol);
    int kernels = st.kernels;
    for (int round = 1; round <= ROUNDS; round++) {
        float *xv = xmalloc(N * sizeof *xv), *mv = xmalloc(N * sizeof *mv);
        int32_t *iv = xmalloc(N * sizeof *iv);
        rebind_values(xv, iv, N, 2 * round);
        rebind_values(mv, iv, N, 2 * round + 1);
        lf_buffer *nx = raw_buf(c, LF_F32, 1, SH(N), xv), *ni = raw_buf(c, LF_I32, 1, SH(N), iv);
        lf_buffer *nt = lf_buffer_wrap(c, LF_F32, 2, SH(100, 30), SH(1, 100), mv, release_count, &released[round]);
        cr_assert_not_null(nt, "%s", lf_errmsg(c));
        cr_assert_eq(lf_input_rebind(g, x, nx), LF_OK, "%s", lf_errmsg(c));
        cr_assert_eq(lf_input_rebind(g, idx, ni), LF_OK, "%s", lf_errmsg(c));
        cr_assert_eq(lf_input_rebind(g, t, nt), LF_OK, "%s", lf_errmsg(c));
        cr_expect_eq(released[round - 1], 1, "round %d: the old wrapped buffer was released %d times", round,
                     released[round - 1]);
        free(m0); /* released: the old wrapped memory is ours again */
        m0 = mv;
        lf_buffer_free(nx), lf_buffer_free(ni), lf_buffer_free(nt);
        char what[64];
        snprintf(what, sizeof what, "rebind, round %d", round);
        st = check_vs_reference(what, g, 6, outs, rtol);
        if (compiled) {
            cr_expect(st.program_reused, "%s: the program was not reused", what);
            cr_expect_eq(st.kernels_compiled, 0, "%s: compiled %d", what, st.kernels_compiled);
            cr_expect_eq(st.kernels_memory_hits + st.kernels_disk_hits, 0, "%s: looked kernels up", what);
            cr_expect_eq(st.plan_seconds, 0);
            cr_expect_eq(st.kernels, kernels);
        }
        /* y against a plain loop over the new x: the graph reads the new data */
        lf_buffer *yb = lf_buffer_new_like(c, y);
        cr_assert_eq(lf_eval(g, 1, &y, &yb), LF_OK, "%s", lf_errmsg(c));
        float *got = raw_read(yb);
        for (int64_t i = 0; i < N; i++) {
            float want = xv[i] * 2.0f + 1.0f;
            cr_assert(memcmp(&got[i], &want, sizeof want) == 0 || (isnan(got[i]) && isnan(want)),
                      "%s: y[%lld] = %g, want %g", what, (long long)i, got[i], want);
        }
        free(got);
        lf_buffer_free(yb);
        free(xv), free(iv);
    }
    cr_expect_eq(released[ROUNDS], 0);
    lf_graph_free(g);
    cr_expect_eq(released[ROUNDS], 1, "the last wrapped buffer was released %d times", released[ROUNDS]);
    for (int r = 0; r < ROUNDS; r++) cr_expect_eq(released[r], 1, "buffer %d released %d times", r, released[r]);
    free(m0), free(x0), free(i0);
}

Test(cpu, input_rebind_reuses_the_program, .timeout = 300) {
    setenv("LF_CPU_PARALLEL_MIN", "1", 1);
    lf_ctx *c = cpu_ctx(2, LF_COMPILE_REQUIRE, NULL);
    rebind_rounds(c, true);
    lf_ctx_destroy(c);
    c = cpu_ctx(2, LF_COMPILE_NEVER, NULL);
    rebind_rounds(c, false);
    lf_ctx_destroy(c);
    expect_no_leak();
}

/* Every refusal of lf_input_rebind: status, message, and nothing changed
 * (the graph still evaluates its old buffer, and has not failed). */
Test(cpu, input_rebind_errors) {
    lf_ctx *c = cpu_ctx(1, LF_COMPILE_AUTO, NULL), *c2 = ref_ctx();
    float x0[4] = {1, 2, 3, 4}, m[6] = {1, 2, 3, 4, 5, 6};
    lf_graph *g = lf_graph_new(c), *g2 = lf_graph_new(c);
    lf_node *x = in_node(g, LF_F32, 1, SH(4), x0);
    lf_node *y = lf_add(g, x, x);
    lf_node *other = in_node(g2, LF_F32, 1, SH(4), x0);
    lf_buffer *f64 = raw_buf(c, LF_F64, 1, SH(4), NULL), *five = raw_buf(c, LF_F32, 1, SH(5), NULL);
    lf_buffer *ok = raw_buf(c, LF_F32, 1, SH(4), NULL), *elsewhere = raw_buf(c2, LF_F32, 1, SH(4), NULL);
    lf_buffer *strided = lf_buffer_wrap(c, LF_F32, 1, SH(4), SH(-1), m + 3, NULL, NULL);
    lf_buffer *strided2 = lf_buffer_wrap(c, LF_F32, 1, SH(3), SH(2), m, NULL, NULL);
    lf_buffer *strided3 = lf_buffer_wrap(c, LF_F32, 1, SH(3), SH(-2), m + 4, NULL, NULL);
    cr_assert(f64 && five && ok && elsewhere && strided && strided2 && strided3);
    struct { lf_graph *g; lf_node *n; lf_buffer *b; lf_status st; const char *msg; } cases[] = {
        {NULL, x, ok, LF_ERR_NULL, "input_rebind: graph is NULL"},
        {g, NULL, ok, LF_ERR_NULL, "input_rebind: node is NULL"},
        {g, x, NULL, LF_ERR_NULL, "input_rebind: buffer is NULL"},
        {g, other, ok, LF_ERR_STATE, "input_rebind: node belongs to another graph (or to a freed one)"},
        {g, x, elsewhere, LF_ERR_STATE, "input_rebind: buffer belongs to another context"},
        {g, y, ok, LF_ERR_INVALID, "is not an input (only nodes lf_input returned)"},
        {g, x, f64, LF_ERR_DTYPE, "reads f32, the new buffer is f64"},
        {g, x, five, LF_ERR_SHAPE, "has shape [4], the new buffer [5]"},
        {g, x, strided, LF_ERR_INVALID, "reads C-contiguous memory, the new buffer is laid out otherwise"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lf_status st = lf_input_rebind(cases[i].g, cases[i].n, cases[i].b);
        const char *msg = lf_errmsg(cases[i].g ? c : NULL);
        cr_expect_eq(st, cases[i].st, "case %zu: %s, want %s (%s)", i, lf_status_name(st),
                     lf_status_name(cases[i].st), msg);
        cr_expect(strstr(msg, cases[i].msg), "case %zu: message \"%s\" lacks \"%s\"", i, msg, cases[i].msg);
    }
    /* a strided input takes only the same layout */
    lf_node *s = lf_input(g, strided2);
    cr_assert_not_null(s);
    cr_expect_eq(lf_input_rebind(g, s, strided3), LF_ERR_INVALID);
    cr_expect(strstr(lf_errmsg(c), "reads strided memory"), "%s", lf_errmsg(c));
    cr_expect_eq(lf_graph_status(g), LF_OK, "a refused rebind failed the graph: %s", lf_graph_errmsg(g));
    lf_buffer *yb = lf_buffer_new_like(c, y);
    cr_assert_eq(lf_eval(g, 1, &y, &yb), LF_OK, "%s", lf_errmsg(c));
    float got[4];
    cr_assert_eq(lf_buffer_read(yb, got, sizeof got), LF_OK);
    for (int i = 0; i < 4; i++) cr_expect_eq(got[i], 2 * x0[i]);
    /* rebinding to its own buffer is a no-op; a failed graph reports its error */
    lf_node *sum = lf_add(g, s, s);
    cr_assert_not_null(sum);
    lf_node *five_in = lf_input(g, five);
    cr_assert_null(lf_add(g, x, five_in), "[4] + [5] must not broadcast");
    cr_expect_eq(lf_input_rebind(g, x, ok), LF_ERR_SHAPE, "a failed graph's rebind gives its first error");
    lf_buffer_free(yb), lf_buffer_free(f64), lf_buffer_free(five), lf_buffer_free(ok), lf_buffer_free(elsewhere);
    lf_buffer_free(strided), lf_buffer_free(strided2), lf_buffer_free(strided3);
    lf_graph_free(g), lf_graph_free(g2);
    lf_ctx_destroy(c), lf_ctx_destroy(c2);
    expect_no_leak();
}

/* f32 values with the edge cases at the front (NaN, +-Inf, -0, 0, the
 * largest and the smallest normal), then uniform ones. */
static float *set_data_values(int64_t n, unsigned round) {
    static const float edge[] = {NAN, INFINITY, -INFINITY, -0.0f, 0.0f, FLT_MAX, FLT_MIN};
    float *v = rand_f32(n, -4, 4);
    for (int64_t i = 0; i < n && i < 7; i++) v[i] = edge[(i + round) % 7];
    return v;
}

/* One evaluator's rounds of lf_buffer_set_data: a graph reading a wrapped
 * x [R, C] and a broadcast y [C] (x*y + x, 2x, and sum(x*y + x)) is pointed at
 * new memory each round, its output too; each round matches the reference
 * evaluator and a plain loop (2x is exact), reuses its program without a
 * compile (compiled), and an output moved onto x's memory (in place) gives
 * the same bits. */
static void set_data_rounds(lf_ctx *c, bool compiled, int64_t R, int64_t C) {
    int64_t n = R * C;
    float *x0 = set_data_values(n, 0), *y0 = set_data_values(C, 0);
    lf_buffer *xb = lf_buffer_wrap(c, LF_F32, 2, SH(R, C), NULL, n ? x0 : NULL, NULL, NULL);
    lf_buffer *yb = lf_buffer_wrap(c, LF_F32, 1, SH(C), NULL, C ? y0 : NULL, NULL, NULL);
    cr_assert(xb && yb, "%s", lf_errmsg(c));
    lf_graph *g = lf_graph_new(c);
    lf_node *x = lf_input(g, xb), *y = lf_input(g, yb);
    lf_node *z = lf_add(g, lf_mul(g, x, y), x), *d = lf_add(g, x, x);
    lf_node *outs[3] = {z, d, lf_reduce(g, LF_RED_SUM, z, 0, NULL, false)};
    cr_assert_eq(lf_graph_status(g), LF_OK, "%s", lf_graph_errmsg(g));
    double rtol[3] = {0, 0, 1e-5};
    check_vs_reference("set_data, first", g, 3, outs, rtol);
    float *out0 = xmalloc((size_t)n * sizeof *out0);
    lf_buffer *ob = lf_buffer_wrap(c, LF_F32, 2, SH(R, C), NULL, n ? out0 : NULL, NULL, NULL);
    cr_assert_not_null(ob, "%s", lf_errmsg(c));
    float *xo = x0, *yo = y0, *oo = out0;
    for (unsigned round = 1; round <= 4; round++) {
        float *xv = set_data_values(n, round), *yv = set_data_values(C, round);
        float *ov = xmalloc((size_t)n * sizeof *ov);
        cr_assert_eq(lf_buffer_set_data(xb, n ? xv : NULL), LF_OK, "%s", lf_errmsg(c));
        cr_assert_eq(lf_buffer_set_data(yb, C ? yv : NULL), LF_OK, "%s", lf_errmsg(c));
        cr_assert_eq(lf_buffer_set_data(ob, n ? ov : NULL), LF_OK, "%s", lf_errmsg(c));
        free(xo), free(yo), free(oo); /* no graph reads the old memory now */
        xo = xv, yo = yv, oo = ov;
        char what[96];
        snprintf(what, sizeof what, "set_data [%lld, %lld], round %u", (long long)R, (long long)C, round);
        lf_eval_stats st = check_vs_reference(what, g, 3, outs, rtol);
        if (compiled) {
            cr_expect(st.program_reused, "%s: the program was not reused", what);
            cr_expect_eq(st.kernels_compiled, 0, "%s: compiled %d", what, st.kernels_compiled);
        }
        /* 2x against a plain loop over the new memory */
        cr_assert_eq(lf_eval(g, 1, &d, &ob), LF_OK, "%s", lf_errmsg(c));
        for (int64_t i = 0; i < n; i++) {
            float want = 2.0f * xv[i];
            cr_assert(memcmp(&ov[i], &want, sizeof want) == 0 || (isnan(ov[i]) && isnan(want)),
                      "%s: 2x[%lld] = %g, want %g", what, (long long)i, ov[i], want);
        }
        /* x*y + x into the moved output, then into x's own memory (in place) */
        lf_buffer *zb = lf_buffer_new_like(c, z);
        cr_assert_eq(lf_eval(g, 1, &z, &zb), LF_OK, "%s", lf_errmsg(c));
        float *want = raw_read(zb);
        cr_assert_eq(lf_eval(g, 1, &z, &ob), LF_OK, "%s", lf_errmsg(c));
        expect_match(what, LF_F32, ov, want, n, 0);
        float *xcopy = xmalloc((size_t)n * sizeof *xcopy);
        if (n) memcpy(xcopy, xv, (size_t)n * sizeof *xcopy);
        cr_assert_eq(lf_buffer_set_data(ob, n ? xv : NULL), LF_OK, "%s", lf_errmsg(c));
        cr_assert_eq(lf_eval(g, 1, &z, &ob), LF_OK, "%s", lf_errmsg(c));
        expect_match(what, LF_F32, xv, want, n, 0);
        if (n) memcpy(xv, xcopy, (size_t)n * sizeof *xcopy);
        cr_assert_eq(lf_buffer_set_data(ob, n ? ov : NULL), LF_OK, "%s", lf_errmsg(c));
        free(xcopy), free(want);
        lf_buffer_free(zb);
    }
    lf_graph_free(g);
    lf_buffer_free(xb), lf_buffer_free(yb), lf_buffer_free(ob);
    free(xo), free(yo), free(oo);
}

Test(cpu, buffer_set_data_every_evaluator, .timeout = 300) {
    setenv("LF_CPU_PARALLEL_MIN", "1", 1);
    static const int64_t sizes[][2] = {{37, 29}, {1, 1}, {0, 5}, {3, 0}};
    lf_ctx *ctxs[3] = {ref_ctx(), cpu_ctx(2, LF_COMPILE_NEVER, NULL), cpu_ctx(2, LF_COMPILE_REQUIRE, NULL)};
    for (int k = 0; k < 3; k++) {
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) set_data_rounds(ctxs[k], k == 2, sizes[s][0], sizes[s][1]);
        lf_ctx_destroy(ctxs[k]);
    }
    expect_no_leak();
}

static void deleter_noop(void *arg) { (void)arg; }

/* Every refusal of lf_buffer_set_data: status, message, and the buffer
 * unchanged (the graph still reads the old memory). */
Test(cpu, buffer_set_data_errors) {
    lf_ctx *c = cpu_ctx(1, LF_COMPILE_AUTO, NULL);
    float x0[4] = {1, 2, 3, 4}, m[8] = {0};
    char raw[sizeof(float) * 5];
    lf_buffer *xb = lf_buffer_wrap(c, LF_F32, 1, SH(4), NULL, x0, NULL, NULL);
    lf_buffer *own = raw_buf(c, LF_F32, 1, SH(4), NULL);
    lf_buffer *strided = lf_buffer_wrap(c, LF_F32, 1, SH(4), SH(2), m, NULL, NULL);
    lf_buffer *released = lf_buffer_wrap(c, LF_F32, 1, SH(4), NULL, m, deleter_noop, NULL);
    lf_buffer *exported = lf_buffer_wrap(c, LF_F32, 1, SH(4), NULL, m, NULL, NULL);
    lf_buffer *freed = lf_buffer_wrap(c, LF_F32, 1, SH(4), NULL, m, NULL, NULL);
    cr_assert(xb && own && strided && released && exported && freed, "%s", lf_errmsg(c));
    lf_graph *g = lf_graph_new(c);
    lf_node *x = lf_input(g, xb);
    lf_node *y = lf_add(g, x, x);
    cr_assert_not_null(lf_input(g, freed)); /* the graph keeps it alive after lf_buffer_free */
    lf_buffer_free(freed);
    struct DLManagedTensor *t = NULL;
    cr_assert_eq(lf_buffer_to_dlpack(exported, &t), LF_OK, "%s", lf_errmsg(c));
    struct { lf_buffer *b; void *data; lf_status st; const char *msg; } cases[] = {
        {NULL, m, LF_ERR_NULL, "buffer_set_data: buffer is NULL"},
        {xb, NULL, LF_ERR_NULL, "data is NULL for 16 bytes"},
        {xb, raw + 1, LF_ERR_INVALID, "is not aligned to 4 bytes"},
        {own, m, LF_ERR_INVALID, "(this one is lazyfuse's own memory)"},
        {strided, m, LF_ERR_INVALID, "(this one is a strided wrap)"},
        {released, m, LF_ERR_INVALID, "(this one is a wrap with a release callback)"},
        {exported, m, LF_ERR_STATE, "was exported (DLPack)"},
        {freed, m, LF_ERR_STATE, "the buffer was freed"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lf_status st = lf_buffer_set_data(cases[i].b, cases[i].data);
        const char *msg = lf_errmsg(cases[i].b ? c : NULL);
        cr_expect_eq(st, cases[i].st, "case %zu: %s, want %s (%s)", i, lf_status_name(st),
                     lf_status_name(cases[i].st), msg);
        cr_expect(strstr(msg, cases[i].msg), "case %zu: message \"%s\" lacks \"%s\"", i, msg, cases[i].msg);
    }
    lf_buffer *yb = lf_buffer_new_like(c, y);
    cr_assert_eq(lf_eval(g, 1, &y, &yb), LF_OK, "%s", lf_errmsg(c));
    float got[4];
    cr_assert_eq(lf_buffer_read(yb, got, sizeof got), LF_OK);
    for (int i = 0; i < 4; i++) cr_expect_eq(got[i], 2 * x0[i], "the refused calls moved x: y[%d] = %g", i, got[i]);
    t->deleter(t);
    lf_buffer_free(yb), lf_buffer_free(xb), lf_buffer_free(own), lf_buffer_free(strided);
    lf_buffer_free(released), lf_buffer_free(exported);
    lf_graph_free(g);
    lf_ctx_destroy(c);
    expect_no_leak();
}

/* Two input nodes over one buffer share a slot in a program: rebinding one
 * of them drops the programs (the kernels now load two buffers where they
 * loaded one: planned and compiled again), and each node reads its own
 * buffer afterwards; rebinding it back finds the first kernels in memory.
 * The shared buffer stays bound while the other node reads it. */
Test(cpu, input_rebind_shared_buffer, .timeout = 120) {
    lf_ctx *c = cpu_ctx(1, LF_COMPILE_REQUIRE, NULL);
    float a0[5] = {1, 2, 3, 4, 5}, b0[5] = {10, 20, 30, 40, 50};
    lf_graph *g = lf_graph_new(c);
    lf_buffer *ab = raw_buf(c, LF_F32, 1, SH(5), a0), *bb = raw_buf(c, LF_F32, 1, SH(5), b0);
    lf_node *p = lf_input(g, ab), *q = lf_input(g, ab);
    lf_node *y = lf_sub(g, lf_mul(g, p, lf_const(g, LF_F32, 3)), q); /* 3p - q */
    lf_eval_stats st = check_vs_reference("shared, first", g, 1, &y, NULL);
    cr_assert_eq(lf_input_rebind(g, q, bb), LF_OK, "%s", lf_errmsg(c));
    st = check_vs_reference("shared, q rebound", g, 1, &y, NULL);
    cr_expect(!st.program_reused);
    cr_assert_eq(lf_input_rebind(g, q, ab), LF_OK, "%s", lf_errmsg(c));
    st = check_vs_reference("shared, q back", g, 1, &y, NULL);
    cr_expect(!st.program_reused);
    cr_expect_eq(st.kernels_compiled, 0, "the first structure's kernels are in memory");
    cr_assert_eq(lf_input_rebind(g, q, bb), LF_OK, "%s", lf_errmsg(c));
    lf_buffer *yb = lf_buffer_new_like(c, y);
    cr_assert_eq(lf_eval(g, 1, &y, &yb), LF_OK, "%s", lf_errmsg(c));
    float got[5];
    cr_assert_eq(lf_buffer_read(yb, got, sizeof got), LF_OK);
    for (int i = 0; i < 5; i++) cr_expect_eq(got[i], 3 * a0[i] - b0[i], "y[%d] = %g", i, got[i]);
    /* the buffer both read: p still holds it after lf_buffer_free */
    lf_buffer_free(ab), lf_buffer_free(bb);
    cr_assert_eq(lf_eval(g, 1, &y, &yb), LF_OK, "%s", lf_errmsg(c));
    cr_assert_eq(lf_buffer_read(yb, got, sizeof got), LF_OK);
    for (int i = 0; i < 5; i++) cr_expect_eq(got[i], 3 * a0[i] - b0[i]);
    lf_buffer_free(yb);
    lf_graph_free(g);
    lf_ctx_destroy(c);
    expect_no_leak();
}

/* ==== 11. canonical kernels: the text does not depend on construction order ========= */

/* One structure built with its leaves (and, for the last, its inner nodes)
 * created in one order or the other: `flip` picks the order. The outputs
 * compute the same values either way. */
static lf_node *build_ordered(lf_graph *g, int which, bool flip, const float *const *h, int64_t n) {
    lf_node *a = NULL, *b = NULL, *c = NULL;
    const int64_t *sh = SH(n);
    switch (which) {
    case 0: { /* x*c + 1: the constant created before or after the input */
        lf_node *k = NULL;
        if (flip) k = lf_const(g, LF_F32, 0.75);
        a = in_node(g, LF_F32, 1, sh, h[0]);
        if (!flip) k = lf_const(g, LF_F32, 0.75);
        return lf_map(g, lf_fn_parse(g, "(x) -> x + 1"), lf_zipwith(g, lf_fn_parse(g, "(x, c) -> x * c"), 2,
                                                                     (lf_node *[]){a, k}));
    }
    case 1: /* a*b - c over three inputs created in two orders */
        if (flip) {
            c = in_node(g, LF_F32, 1, sh, h[2]);
            b = in_node(g, LF_F32, 1, sh, h[1]);
            a = in_node(g, LF_F32, 1, sh, h[0]);
        } else {
            a = in_node(g, LF_F32, 1, sh, h[0]);
            b = in_node(g, LF_F32, 1, sh, h[1]);
            c = in_node(g, LF_F32, 1, sh, h[2]);
        }
        return lf_zipwith(g, lf_fn_parse(g, "(a, b, c) -> a * b - c"), 3, (lf_node *[]){a, b, c});
    default: { /* exp(a) + b*2 with the two inner maps created in two orders, then summed */
        a = in_node(g, LF_F32, 1, sh, h[0]);
        b = in_node(g, LF_F32, 1, sh, h[1]);
        lf_node *u = NULL, *v = NULL;
        if (flip) v = lf_map(g, lf_fn_parse(g, "(x) -> x * 2"), b);
        u = lf_map(g, lf_fn_parse(g, "(x) -> exp(x)"), a);
        if (!flip) v = lf_map(g, lf_fn_parse(g, "(x) -> x * 2"), b);
        lf_node *y = lf_zipwith(g, lf_fn_parse(g, "(u, v) -> u + v"), 2, (lf_node *[]){u, v});
        return lf_reduce(g, LF_RED_SUM, y, 1, (const int[]){0}, false);
    }
    }
}

/* The same expression built in another order compiles nothing: its kernels
 * are the first build's (memory hits), on 1 and 2 threads. Fails when the
 * kernels' parameters or expressions follow node ids (before issue 29 item
 * 4 the first two structures compiled again). */
Test(cpu, kernels_do_not_depend_on_construction_order) {
    const int64_t n = 1000;
    float *h[3] = {rand_f32(n, -2, 2), rand_f32(n, -2, 2), rand_f32(n, -2, 2)};
    for (int t = 1; t <= 2; t++) {
        char dir[400]; /* a cold cache per thread count: the first order compiles */
        snprintf(dir, sizeof dir, "%s/cache-order-%d", tmpdir, t);
        lf_ctx *ctx = cpu_ctx(t, LF_COMPILE_REQUIRE, dir);
        for (int which = 0; which < 3; which++)
            for (int flip = 0; flip < 2; flip++) {
                lf_graph *g = lf_graph_new(ctx);
                lf_node *y = build_ordered(g, which, flip, (const float *const *)h, n);
                char what[80];
                snprintf(what, sizeof what, "structure %d built %s, %d threads", which, flip ? "flipped" : "first", t);
                lf_eval_stats st = check_vs_reference(what, g, 1, &y, (const double[]){1e-5});
                if (flip)
                    cr_expect(st.kernels_compiled == 0 && st.kernels_disk_hits == 0 &&
                                  st.kernels_memory_hits == st.kernels,
                              "%s: %d kernels, %d compiled, %d from disk, %d from memory; want every kernel "
                              "from memory (the first order's)",
                              what, st.kernels, st.kernels_compiled, st.kernels_disk_hits, st.kernels_memory_hits);
                lf_graph_free(g);
            }
        lf_ctx_destroy(ctx);
    }
    for (int i = 0; i < 3; i++) free(h[i]);
    expect_no_leak();
}
