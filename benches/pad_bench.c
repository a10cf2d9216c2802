/* benches/pad_bench.c: what a remapped read (lf_pad, lf_concat) costs.
 *
 * A 5-tap convolution along the rows of an f32 [512, 8192] array with a
 * zero border of 2, two ways in one process: lf_pad inside the graph (one
 * fused kernel, the border a select over a clamped read; compiled, each row
 * is split into a border clamped per element and an interior of plain
 * shifted loads, codegen/emit_c.c) and the same stencil over a buffer
 * padded beforehand (plain affine loads), the two alternating. Prints the
 * median of 15 timed evals of each after 3 warm-up ones, and the kernel and temporary counts of each,
 * and checks that both ways give the same bits (the pre-padded buffer is x
 * with the zero border); the ratio is what to read, on a shared machine the
 * absolute times are noise.
 */
#include "lazyfuse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { ROWS = 512, COLS = 8192, WARM = 3, RUNS = 15 };

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(void) {
    lf_ctx *ctx = lf_ctx_new(NULL);
    if (!ctx) {
        fprintf(stderr, "pad_bench: %s\n", lf_errmsg(NULL));
        return 1;
    }
    int64_t shape[2] = {ROWS, COLS}, padded[2] = {ROWS, COLS + 4};
    lf_buffer *x = lf_buffer_new(ctx, LF_F32, 2, shape), *xp = lf_buffer_new(ctx, LF_F32, 2, padded);
    lf_buffer *out = lf_buffer_new(ctx, LF_F32, 2, shape);
    float *host = calloc((size_t)ROWS * COLS, sizeof *host), *hostp = calloc((size_t)ROWS * (COLS + 4), sizeof *hostp);
    float *got[2] = {malloc((size_t)ROWS * COLS * sizeof(float)), malloc((size_t)ROWS * COLS * sizeof(float))};
    if (!x || !xp || !out || !host || !hostp || !got[0] || !got[1]) {
        fprintf(stderr, "pad_bench: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < (size_t)ROWS * COLS; i++) host[i] = (float)(i % 97) * 0.01f;
    for (size_t r = 0; r < ROWS; r++) /* x with a zero border of 2 on each side of a row */
        for (size_t c = 0; c < COLS; c++) hostp[r * (COLS + 4) + 2 + c] = host[r * COLS + c];
    lf_buffer_write(x, host, (size_t)ROWS * COLS * sizeof *host);
    lf_buffer_write(xp, hostp, (size_t)ROWS * (COLS + 4) * sizeof *hostp);
    static const double w[5] = {0.1, 0.2, 0.4, 0.2, 0.1};
    lf_graph *g[2];
    lf_node *acc[2];
    for (int way = 0; way < 2; way++) {
        g[way] = lf_graph_new(ctx);
        lf_node *p = way == 0 ? lf_pad(g[way], lf_input(g[way], x), (int64_t[]){0, 2}, (int64_t[]){0, 2},
                                       LF_PAD_CONSTANT, 0)
                              : lf_input(g[way], xp);
        acc[way] = NULL;
        for (int t = 0; t < 5; t++) {
            lf_node *v = lf_mul(g[way], lf_slice(g[way], p, 1, t, t + COLS, 1), lf_const(g[way], LF_F32, w[t]));
            acc[way] = acc[way] ? lf_add(g[way], acc[way], v) : v;
        }
    }
    /* the two ways alternate (which goes first too), so both see the same
       load of a shared machine */
    double times[2][RUNS], median[2];
    lf_eval_stats st[2];
    for (int r = 0; r < WARM + RUNS; r++)
        for (int q = 0; q < 2; q++) {
            int way = (r + q) % 2;
            double t0 = now();
            if (lf_eval(g[way], 1, &acc[way], &out) != LF_OK) {
                fprintf(stderr, "pad_bench: %s\n", lf_errmsg(ctx));
                return 1;
            }
            if (r >= WARM) times[way][r - WARM] = now() - t0;
            lf_ctx_last_stats(ctx, &st[way]);
            if (r == WARM + RUNS - 1) lf_buffer_read(out, got[way], (size_t)ROWS * COLS * sizeof(float));
        }
    for (int way = 0; way < 2; way++) {
        qsort(times[way], RUNS, sizeof times[way][0], cmp_double);
        median[way] = times[way][RUNS / 2];
        printf("%-22s median %9.3f ms, %d kernel(s), %zu temporary bytes, last eval compiled %d\n",
               way == 0 ? "lf_pad in the graph:" : "pre-padded buffer:", median[way] * 1e3, st[way].kernels,
               st[way].bytes_materialized, st[way].kernels_compiled);
        lf_graph_free(g[way]);
    }
    printf("ratio (lf_pad / pre-padded): %.2fx\n", median[0] / median[1]);
    if (memcmp(got[0], got[1], (size_t)ROWS * COLS * sizeof(float))) {
        fprintf(stderr, "pad_bench: the two ways differ\n");
        return 1;
    }
    printf("both ways give the same bits\n");
    free(host), free(hostp), free(got[0]), free(got[1]);
    lf_ctx_destroy(ctx);
    return 0;
}
