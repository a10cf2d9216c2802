/* benches/timed_eval.c: lf_eval plus the wait for the device, between two
 * clock reads (see timed_eval.h). */
#include "timed_eval.h"

#include <time.h>

double bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

lf_status bench_eval(lf_ctx *ctx, lf_graph *g, int n, lf_node *const *outs, lf_buffer *const *dsts) {
    lf_status st = lf_eval(g, n, outs, dsts);
    return st != LF_OK ? st : lf_ctx_synchronize(ctx);
}

double bench_timed_eval(lf_ctx *ctx, lf_graph *g, int n, lf_node *const *outs, lf_buffer *const *dsts) {
    double t0 = bench_now();
    lf_status st = bench_eval(ctx, g, n, outs, dsts);
    double t1 = bench_now();
    return st == LF_OK ? t1 - t0 : -1;
}
