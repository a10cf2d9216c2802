/* benches/timed_eval.h: how lazyfuse-bench times an eval.
 *
 * On CUDA lf_eval returns once its kernels are queued, so a clock read
 * around lf_eval alone measures the launches. Every eval the benchmark
 * runs goes through bench_eval, which waits for the device
 * (lf_ctx_synchronize) before it returns: the clock read after it comes
 * after the kernels ran. On CPU contexts the wait returns at once.
 *
 * What must stay true: no timed region of lazyfuse-bench calls lf_eval
 * directly (one exception by design: the overhead case's cached_host line,
 * the host's time to queue a cached program, waits after its clock read) (tests/test_cuda.c checks bench_timed_eval against a fake
 * driver whose synchronization takes a known time).
 */
#ifndef LF_BENCH_TIMED_EVAL_H
#define LF_BENCH_TIMED_EVAL_H

#include "lazyfuse.h"

/* CLOCK_MONOTONIC in seconds. */
double bench_now(void);
/* lf_eval, then lf_ctx_synchronize(ctx) (ctx: g's context); the first
 * failure's status (the message in lf_errmsg(ctx)). */
lf_status bench_eval(lf_ctx *ctx, lf_graph *g, int n, lf_node *const *outs, lf_buffer *const *dsts);
/* bench_eval between two clock reads: the seconds, or -1 on failure. */
double bench_timed_eval(lf_ctx *ctx, lf_graph *g, int n, lf_node *const *outs, lf_buffer *const *dsts);

#endif
