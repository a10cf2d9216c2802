/* tests/testutil.h: helpers shared by the Criterion tests.
 *
 * A seeded random source (LF_TEST_SEED replays a run; the seed is printed in
 * the log, beside every failing test too), notes that reach meson's log
 * under --tap (tu_note), buffers from host arrays of any dtype, reading any
 * buffer back as doubles, and a NaN-aware closeness check. Helpers assert
 * through Criterion, so a failed helper fails the calling test.
 */
#ifndef LF_TESTUTIL_H
#define LF_TESTUTIL_H

#include "lazyfuse.h"

#include <stdbool.h>
#include <stdint.h>

/* The test seed: $LF_TEST_SEED if set, else time-based; the runner prints it
 * at the start, again beside each failing test and at the end of a run with
 * failures. */
uint64_t tu_seed(void);
/* A line for the log (printf format; end it with \n): under Criterion's
 * --tap, which meson uses, a test's own stderr is discarded, so notes go
 * through the runner (testutil.c) into meson's log. Use it for every
 * diagnostic a test prints. */
void tu_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Next pseudo-random 64-bit value (splitmix64) from a per-process state
 * started at tu_seed(). */
uint64_t tu_rand(void);
double tu_uniform(double lo, double hi);       /* uniform in [lo, hi) */
int64_t tu_randint(int64_t lo, int64_t hi);    /* uniform in [lo, hi] */

/* A context on the reference backend, or on the CPU backend (fusion planner
 * + compiled kernels) when LF_TEST_BACKEND=cpu, or on the CUDA backend when
 * LF_TEST_BACKEND=cuda; asserts on failure, except that without a usable
 * CUDA device the calling test is skipped (cr_skip_test, with the reason)
 * unless LF_TEST_REQUIRE_CUDA is set (scripts/gpu-check.sh sets it). */
lf_ctx *tu_ctx(void);
/* A buffer of dtype t and shape, filled from doubles (converted as a C cast
 * would; bool is v != 0). vals may be NULL (zero-filled). Asserts on failure. */
lf_buffer *tu_buf(lf_ctx *ctx, lf_dtype t, int ndim, const int64_t *shape, const double *vals);
/* Reads any buffer into doubles (out has numel entries). An i64 above 2^53
 * loses its low bits: compare integer and bool results with tu_read_raw. */
void tu_read(const lf_buffer *b, double *out);
/* The buffer's bytes as lf_buffer_read gives them (malloc'd, at least one
 * byte; the caller frees it). Asserts on failure. */
void *tu_read_raw(const lf_buffer *b);
/* Evaluates one node into a new buffer of its shape; asserts LF_OK with the
 * error message in the failure text. */
lf_buffer *tu_eval1(lf_ctx *ctx, lf_graph *g, lf_node *n);
/* Equal within atol + rtol*|b|; NaN equals NaN; infinities must match exactly. */
bool tu_close(double a, double b, double rtol, double atol);
/* Entries of folder dir other than "." and ".." (names starting with a dot
 * only when hidden is true), or -1 when it cannot be opened. */
int tu_dir_entries(const char *dir, bool hidden);
/* Sends stderr into a temporary file until tu_capture_stderr_end, which
 * restores it and returns what was written (malloc'd, NUL-terminated). */
void tu_capture_stderr_start(void);
char *tu_capture_stderr_end(void);
/* Whether the test runs under valgrind (false when valgrind.h is absent). */
bool tu_on_valgrind(void);
/* Occurrences of sub in s (overlapping ones included). */
int tu_count_substr(const char *s, const char *sub);
/* Asserts that buffer b holds want[0..n) within tolerances, naming `what`. */
void tu_expect(const char *what, const lf_buffer *b, const double *want, int64_t n,
               double rtol, double atol);

/* A suite whose every test gets a fresh context `ctx` (tu_ctx) and graph `g`,
 * freed after the test, with the allocation-failure hook reset. Use at file
 * scope in place of TestSuite(name). */
#define TU_GRAPH_SUITE(name)                                               \
    static lf_ctx *ctx;                                                    \
    static lf_graph *g;                                                    \
    static void tu_suite_setup(void) {                                     \
        ctx = tu_ctx();                                                    \
        g = lf_graph_new(ctx);                                             \
        cr_assert(g != NULL, "lf_graph_new: %s", lf_errmsg(ctx));          \
    }                                                                      \
    static void tu_suite_teardown(void) {                                  \
        lf_debug_fail_alloc(0, false);                                     \
        lf_graph_free(g);                                                  \
        lf_ctx_destroy(ctx);                                               \
    }                                                                      \
    TestSuite(name, .init = tu_suite_setup, .fini = tu_suite_teardown)

#endif
