/* tests/test_memory.c: ownership, allocation failure, flat memory.
 *
 * - The ownership rule of lazyfuse.h: a graph keeps the buffers it reads
 *   alive; lf_ctx_destroy frees whatever is left; live bytes return to zero.
 * - Allocation failure: every allocation of a whole build + eval is failed in
 *   turn (lf_debug_fail_alloc); each run must fail cleanly with LF_ERR_NOMEM
 *   or succeed, leave the output buffer untouched on failure, and leak nothing.
 * - A loop of 100,000 build/eval cycles runs in flat memory: the library's
 *   live bytes are the same after every cycle, and (without sanitizers) the
 *   process's resident set does not grow.
 */
#include "graph/graph.h"
#include "testutil.h"

#include <criterion/criterion.h>
#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char *GAUSS = "(x, m, s) -> exp(-0.5*((x-m)/s)**2) / (s*2.5066282746)";

Test(memory, graph_keeps_freed_buffer_alive) {
    size_t base = lf_debug_live_bytes();
    lf_ctx *ctx = tu_ctx();
    int64_t n = 4;
    lf_buffer *xb = tu_buf(ctx, LF_F64, 1, &n, (double[]){1, 2, 3, 4});
    lf_graph *g = lf_graph_new(ctx);
    lf_node *y = lf_mul(g, lf_input(g, xb), lf_const(g, LF_F64, 2));
    lf_buffer_free(xb); /* the graph still reads it */
    lf_buffer *out = tu_eval1(ctx, g, y);
    tu_expect("x*2 after lf_buffer_free", out, (double[]){2, 4, 6, 8}, 4, 0, 0);
    lf_graph_free(g); /* releases xb for good */
    lf_buffer_free(out);
    lf_ctx_destroy(ctx);
    cr_assert_eq(lf_debug_live_bytes(), base, "leaked %zu bytes",
                 lf_debug_live_bytes() - base);
}

/* A graph lists each buffer it reads once (its reference), however many
 * input nodes read it; lf_input skips the search of that list for a buffer
 * that no graph lists (lf_buffer.graphs), so a graph of many fresh inputs
 * is built in linear time. The count follows the buffer through two
 * graphs, a repeated lf_input, lf_input_rebind and the graphs' end, and
 * nothing leaks. */
Test(memory, buffer_listed_once_per_graph) {
    size_t base = lf_debug_live_bytes();
    lf_ctx *ctx = tu_ctx();
    int64_t n = 4;
    lf_buffer *xb = tu_buf(ctx, LF_F64, 1, &n, (double[]){1, 2, 3, 4});
    lf_buffer *yb = tu_buf(ctx, LF_F64, 1, &n, (double[]){10, 20, 30, 40});
    lf_graph *g1 = lf_graph_new(ctx), *g2 = lf_graph_new(ctx);
    cr_expect_eq(xb->graphs, 0);
    lf_node *a = lf_input(g1, xb), *b = lf_input(g1, xb);
    cr_expect_eq(g1->nbound, 1, "x read twice in g1: listed %d times", g1->nbound);
    cr_expect_eq(xb->graphs, 1);
    lf_node *c = lf_input(g2, xb);
    cr_expect_eq(xb->graphs, 2);
    lf_node *s1 = lf_add(g1, a, b);
    lf_buffer *o1 = tu_eval1(ctx, g1, s1);
    tu_expect("x + x", o1, (double[]){2, 4, 6, 8}, 4, 0, 0);
    lf_graph_free(g1);
    cr_expect_eq(xb->graphs, 1);
    lf_node *d = lf_input(g2, xb); /* listed in g2 already: found by the search */
    cr_expect_eq(g2->nbound, 1, "x read twice in g2: listed %d times", g2->nbound);
    cr_expect_eq(lf_input_rebind(g2, c, yb), LF_OK, "%s", lf_errmsg(ctx));
    cr_expect_eq(g2->nbound, 2, "x still read by d, y by c: %d listed", g2->nbound);
    cr_expect_eq(yb->graphs, 1);
    cr_expect_eq(lf_input_rebind(g2, d, yb), LF_OK, "%s", lf_errmsg(ctx));
    cr_expect_eq(g2->nbound, 1, "x read by nothing: %d listed", g2->nbound);
    cr_expect_eq(xb->graphs, 0);
    lf_buffer *o2 = tu_eval1(ctx, g2, lf_add(g2, c, d));
    tu_expect("y + y", o2, (double[]){20, 40, 60, 80}, 4, 0, 0);
    lf_buffer_free(xb);
    lf_buffer_free(yb);
    lf_graph_free(g2);
    lf_buffer_free(o1);
    lf_buffer_free(o2);
    lf_ctx_destroy(ctx);
    cr_assert_eq(lf_debug_live_bytes(), base, "leaked %zu bytes", lf_debug_live_bytes() - base);
}

Test(memory, ctx_destroy_frees_everything) {
    size_t base = lf_debug_live_bytes();
    lf_ctx *ctx = tu_ctx();
    int64_t shape[2] = {3, 5};
    lf_buffer *a = tu_buf(ctx, LF_F32, 2, shape, NULL);
    lf_graph *g1 = lf_graph_new(ctx);
    lf_graph *g2 = lf_graph_new(ctx);
    cr_assert_not_null(lf_fn_parse(g1, GAUSS));
    cr_assert_not_null(lf_exp(g2, lf_input(g2, a)));
    (void)lf_buffer_new(ctx, LF_I64, 1, (int64_t[]){100});
    lf_ctx_destroy(ctx); /* graphs, fns, nodes and buffers left alive */
    cr_assert_eq(lf_debug_live_bytes(), base, "leaked %zu bytes",
                 lf_debug_live_bytes() - base);
}

/* One complete build + eval, as a user writes it; returns the status of the
 * first failing call (or LF_OK). On failure of lf_eval, the output buffer
 * must still hold its sentinel. Frees everything it made. */
static lf_status build_and_eval(int64_t n) {
    lf_status st = LF_OK;
    /* the CPU backend, named: AUTO would pick CUDA on a machine with a GPU
       (and sweep the driver's setup instead of a user's build + eval) */
    lf_ctx_options o;
    lf_ctx_options_init(&o);
    o.backend = LF_BACKEND_CPU;
    lf_ctx *ctx = lf_ctx_new(&o);
    if (!ctx) return LF_ERR_NOMEM;
    lf_buffer *xb = lf_buffer_new(ctx, LF_F32, 1, &n);
    lf_buffer *pdf = lf_buffer_new(ctx, LF_F32, 1, &n);
    lf_buffer *ss = lf_buffer_new(ctx, LF_F64, 0, NULL);
    lf_graph *g = lf_graph_new(ctx);
    if (!xb || !pdf || !ss || !g) {
        cr_assert(strstr(lf_errmsg(ctx), "out of memory"), "message: %s", lf_errmsg(ctx));
        lf_ctx_destroy(ctx);
        return LF_ERR_NOMEM;
    }
    float host[64], sentinel[64];
    for (int i = 0; i < n; i++) host[i] = (float)i / 8 - 2, sentinel[i] = -777.0f;
    cr_assert_eq(lf_buffer_write(xb, host, (size_t)n * sizeof(float)), LF_OK);
    cr_assert_eq(lf_buffer_write(pdf, sentinel, (size_t)n * sizeof(float)), LF_OK);
    lf_fn *gauss = lf_fn_parse(g, GAUSS);
    lf_node *x = lf_input(g, xb);
    lf_node *y = lf_zipwith(g, gauss, 3,
                            (lf_node *[]){x, lf_const(g, LF_F32, 0.0), lf_const(g, LF_F32, 1.0)});
    lf_node *t = lf_transpose(g, lf_reshape(g, x, 2, (int64_t[]){4, -1}));
    lf_node *s = lf_reduce(g, LF_RED_SUM, lf_cast(g, lf_mul(g, t, t), LF_F64), 0, NULL, false);
    st = lf_eval(g, 2, (lf_node *[]){y, s}, (lf_buffer *[]){pdf, ss});
    if (st != LF_OK) {
        cr_assert_eq(st, LF_ERR_NOMEM, "status %s: %s", lf_status_name(st), lf_errmsg(ctx));
        cr_assert(strstr(lf_errmsg(ctx), "out of memory"), "message: %s", lf_errmsg(ctx));
        float got[64];
        cr_assert_eq(lf_buffer_read(pdf, got, (size_t)n * sizeof(float)), LF_OK);
        cr_assert(memcmp(got, sentinel, (size_t)n * sizeof(float)) == 0,
                  "a failed eval changed the output buffer");
    } else {
        float got[64];
        double sum = 0, want = 0;
        lf_buffer_read(pdf, got, (size_t)n * sizeof(float));
        lf_buffer_read(ss, &sum, sizeof sum);
        for (int i = 0; i < n; i++) {
            float e = expf(-0.5f * host[i] * host[i]) / 2.5066282746f;
            cr_assert(tu_close(got[i], e, 1e-5, 1e-7), "pdf[%d] = %g, want %g", i, got[i], e);
            want += (double)(host[i] * host[i]);
        }
        cr_assert(tu_close(sum, want, 1e-12, 0), "sum %g, want %g", sum, want);
    }
    lf_graph_free(g);
    lf_ctx_destroy(ctx);
    return st;
}

/* Fails the kth allocation (and, sticky, every one after it) for k = 1, 2,
 * ...: each build + eval must fail cleanly or succeed, and leak nothing. A
 * success does not mean the kth allocation was never reached: some failures
 * are survived (a disk-cache entry that cannot be loaded is rebuilt, and the
 * eval returns LF_OK), so the sweep goes on until 25 runs in a row pass, the
 * rule test_cpu.c's sweep follows. */
static void sweep(bool sticky) {
    size_t base = lf_debug_live_bytes();
    int failures = 0, ok_in_a_row = 0;
    int64_t k;
    for (k = 1; k < 10000 && ok_in_a_row < 25; k++) {
        lf_debug_fail_alloc(k, sticky);
        lf_status st = build_and_eval(32);
        lf_debug_fail_alloc(0, false);
        cr_assert_eq(lf_debug_live_bytes(), base, "allocation %lld failed: leaked %zu bytes",
                     (long long)k, lf_debug_live_bytes() - base);
        if (st == LF_OK) {
            ok_in_a_row++;
        } else {
            failures++;
            ok_in_a_row = 0;
        }
    }
    cr_assert_eq(ok_in_a_row, 25, "the sweep did not finish: %lld tries, %d failed", (long long)(k - 1), failures);
    cr_assert_gt(failures, 20, "only %d allocations were swept", failures);
    tu_note("memory sweep (%s): %lld tries, %d failed cleanly\n", sticky ? "sticky" : "single", (long long)(k - 1),
            failures);
}

Test(memory, every_allocation_failure_is_clean) { sweep(false); }
Test(memory, sticky_allocation_failure_is_clean) { sweep(true); }

/* Resident set in bytes, from /proc/self/statm. */
static long rss_bytes(void) {
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return -1;
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = -1;
    fclose(f);
    return resident * sysconf(_SC_PAGESIZE);
}

/* ASan and valgrind hold freed blocks back on purpose (quarantine), so the
 * resident set is only meaningful without them; live bytes are always. */
#if defined(__SANITIZE_ADDRESS__)
#define RSS_MEANINGFUL() false
#elif defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define RSS_MEANINGFUL() (!RUNNING_ON_VALGRIND)
#endif
#endif
#ifndef RSS_MEANINGFUL
#define RSS_MEANINGFUL() true
#endif

Test(memory, hundred_thousand_cycles_in_flat_memory, .timeout = 600) {
    lf_ctx *ctx = tu_ctx();
    int64_t n = 16;
    double xs[16];
    for (int i = 0; i < 16; i++) xs[i] = i - 8;
    lf_buffer *xb = tu_buf(ctx, LF_F32, 1, &n, xs);
    lf_buffer *yb = tu_buf(ctx, LF_F32, 1, &n, NULL);
    lf_buffer *sb = tu_buf(ctx, LF_F32, 0, NULL, NULL);
    size_t live0 = 0;
    long rss1000 = 0;
    for (int cycle = 0; cycle < 100000; cycle++) {
        lf_graph *g = lf_graph_new(ctx);
        lf_node *x = lf_input(g, xb);
        lf_fn *f = lf_fn_parse(g, GAUSS);
        lf_node *y = lf_zipwith(g, f, 3,
                                (lf_node *[]){x, lf_const(g, LF_F32, 0.5), lf_const(g, LF_F32, 2)});
        lf_node *s = lf_reduce(g, LF_RED_SUM, lf_mul(g, x, x), 0, NULL, false);
        lf_status st = lf_eval(g, 2, (lf_node *[]){y, s}, (lf_buffer *[]){yb, sb});
        cr_assert_eq(st, LF_OK, "cycle %d: %s", cycle, lf_errmsg(ctx));
        lf_graph_free(g);
        if (cycle == 0) live0 = lf_debug_live_bytes();
        if (cycle == 999) rss1000 = rss_bytes();
        if (lf_debug_live_bytes() != live0)
            cr_assert_fail("cycle %d: live bytes %zu, after cycle 0 %zu", cycle,
                           lf_debug_live_bytes(), live0);
    }
    float sum;
    lf_buffer_read(sb, &sum, sizeof sum);
    cr_assert_eq(sum, 344.0f); /* sum of (i-8)^2 for i in 0..15 */
    long growth = rss_bytes() - rss1000;
    lf_ctx_destroy(ctx);
    if (RSS_MEANINGFUL())
        cr_assert_lt(growth, 4L << 20, "resident set grew by %ld bytes over 99,000 cycles", growth);
}

/* lf_buffer_new gives zeros without touching them: a 1 GiB buffer is
 * address space until written (calloc maps zero pages), so creating one costs
 * no resident memory and no time to fill; its contents still read as zeros,
 * and a buffer made after a freed one (memory that may be reused) too. */
Test(memory, big_buffer_zeroed_lazily, .timeout = 120) {
    lf_ctx *ctx = tu_ctx();
    if (lf_ctx_backend(ctx) != LF_BACKEND_CPU && lf_ctx_backend(ctx) != LF_BACKEND_REFERENCE)
        cr_skip_test("host buffers only");
    int64_t n = (int64_t)1 << 28; /* f32: 1 GiB */
    /* meson test sets MALLOC_PERTURB_, under which glibc's calloc writes every
       block it hands out; this test process (Criterion forks one per test)
       turns that off to see what lf_buffer_new itself does */
    mallopt(M_PERTURB, 0);
    long rss0 = rss_bytes();
    lf_buffer *b = lf_buffer_new(ctx, LF_F32, 1, &n);
    cr_assert_not_null(b, "%s", lf_errmsg(ctx));
    long growth = rss_bytes() - rss0;
    if (RSS_MEANINGFUL())
        cr_assert_lt(growth, 64L << 20, "a new 1 GiB buffer made %ld bytes resident", growth);
    const float *data = b->data;
    for (int64_t i = 0; i < n; i += n / 1024 + 7) cr_assert_eq(data[i], 0.0f, "element %lld", (long long)i);
    cr_assert_eq(data[n - 1], 0.0f);
    lf_buffer_free(b);
    /* small buffers come from reused heap memory: still zeros */
    int64_t m = 1000;
    for (int round = 0; round < 2; round++) {
        lf_buffer *s = lf_buffer_new(ctx, LF_F64, 1, &m);
        cr_assert_not_null(s);
        double *d = s->data;
        for (int64_t i = 0; i < m; i++) cr_assert_eq(d[i], 0.0, "round %d element %lld", round, (long long)i);
        for (int64_t i = 0; i < m; i++) d[i] = 1.5; /* dirty the block for the next round */
        lf_buffer_free(s);
    }
    lf_ctx_destroy(ctx);
}

/* Big blocks (GRAPH_BIG_BLOCK and more) are mapped apart with huge pages
 * asked for: their data is 64-byte aligned, graph_calloc's are zero, the
 * live-byte counter is exact, graph_realloc moves contents across the
 * threshold in both directions, and the failure hook fails them as any
 * other allocation. */
Test(memory, big_blocks_aligned_counted_and_moved) {
    size_t live0 = lf_debug_live_bytes();
    size_t sizes[] = {GRAPH_BIG_BLOCK - 1, GRAPH_BIG_BLOCK, GRAPH_BIG_BLOCK + 1, 3 * GRAPH_BIG_BLOCK + 4095};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        unsigned char *p = graph_calloc(1, sizes[k]);
        cr_assert_not_null(p, "%zu bytes", sizes[k]);
        if (sizes[k] >= GRAPH_BIG_BLOCK) cr_expect_eq((uintptr_t)p % 64, 0, "%zu bytes at %p", sizes[k], (void *)p);
        cr_expect_eq(lf_debug_live_bytes() - live0, sizes[k]);
        cr_expect_eq(p[0], 0);
        cr_expect_eq(p[sizes[k] / 2], 0);
        cr_expect_eq(p[sizes[k] - 1], 0);
        p[0] = 1, p[sizes[k] - 1] = 2; /* the last byte is writable */
        graph_free(p);
        cr_expect_eq(lf_debug_live_bytes(), live0);
    }
    /* realloc: small -> big -> bigger -> small, contents kept */
    size_t steps[] = {1000, GRAPH_BIG_BLOCK + 10, 2 * GRAPH_BIG_BLOCK, 500};
    unsigned char *p = NULL;
    size_t have = 0;
    for (size_t k = 0; k < sizeof steps / sizeof *steps; k++) {
        unsigned char *q = graph_realloc(p, steps[k]);
        cr_assert_not_null(q, "realloc to %zu", steps[k]);
        size_t keep = have < steps[k] ? have : steps[k];
        for (size_t i = 0; i < keep; i += 97) cr_assert_eq(q[i], (unsigned char)(i * 31 + 7), "step %zu byte %zu", k, i);
        for (size_t i = 0; i < steps[k]; i++) q[i] = (unsigned char)(i * 31 + 7);
        cr_expect_eq(lf_debug_live_bytes() - live0, steps[k]);
        p = q, have = steps[k];
    }
    /* an injected failure leaves the old block whole */
    unsigned char *big = graph_realloc(p, 2 * GRAPH_BIG_BLOCK);
    cr_assert_not_null(big);
    lf_debug_fail_alloc(1, false);
    cr_expect_null(graph_realloc(big, 3 * GRAPH_BIG_BLOCK));
    cr_expect_eq(big[499], (unsigned char)(499 * 31 + 7));
    cr_expect_eq(lf_debug_live_bytes() - live0, 2 * GRAPH_BIG_BLOCK);
    void *next = graph_malloc(GRAPH_BIG_BLOCK); /* the hook was spent: this one succeeds */
    cr_expect_not_null(next);
    graph_free(next);
    graph_free(big);
    cr_expect_eq(lf_debug_live_bytes(), live0);
}
