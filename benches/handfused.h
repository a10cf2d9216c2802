/* benches/handfused.h: the c_handfused references of lazyfuse-bench.
 *
 * For each transcendental case (gaussian_pdf, polar_distance, hypot,
 * softmax_rows, layer_norm) and the stencils (stencil5x5, conv1d_31) a
 * hand-written C loop that does the whole case in one pass over memory, compiled apart with -O3 -march=native and calling
 * glibc's vector math library (libmvec), so that the sin/cos/exp calls
 * vectorize: what a careful C programmer writes, as the floor lazyfuse's
 * fused kernel is measured against (issue 16). The benchmark splits the
 * range over its threads (static chunks, as stream_copy's) and times it in
 * the same process and repetitions as lazyfuse's eval; see handfused.c for
 * how it is compiled. Built only where the compiler takes those flags and
 * libmvec is found (benches/meson.build defines LF_BENCH_HANDFUSED then).
 */
#ifndef LF_BENCH_HANDFUSED_H
#define LF_BENCH_HANDFUSED_H

#include <stdint.h>

typedef struct hf_args {
    float *out;            /* the output, as lazyfuse's (C order) */
    const float *in[4];    /* the case's inputs, in the seed builder's order */
    int64_t cols;          /* row cases: the (output) row length; else unused */
} hf_args;

/* Computes elements lo..hi (elementwise cases) or rows lo..hi (row cases)
 * of the output. Ranges of different calls may run at once. */
typedef void (*hf_range_fn)(const hf_args *a, int64_t lo, int64_t hi);

typedef struct hf_case {
    const char *name;      /* the lazyfuse-bench case */
    hf_range_fn run;
    int ninputs;           /* in[0 .. ninputs) */
    int rows;              /* 1: the range counts rows of cols; 0: elements */
    int halo_dims;         /* stencils: the input is the output grown by halo
                              along its last halo_dims axes (1: a line, 2: a
                              square image); 0: the input's shape is the output's */
    int halo;
} hf_case;

/* The reference of case name, or NULL. */
const hf_case *hf_find(const char *name);

/* How handfused.c was compiled, one line (for the report). */
extern const char hf_compiled_with[];

#endif
