/* tools/seed_examples.c: see seed_examples.h. The graphs follow the seeds:
 * gaussian_pdf and polar_distance (Numba notes, @vectorize examples), hypot
 * (the notes' first @jit example, step by step), matmul as zip then reduce
 * (the fusion lecture's A.view(I, J, 1) * B.view(1, J, K) summed over J),
 * plus STREAM's triad (a*b+c), the sum of squares, a row softmax, and
 * elementwise chains of 8 and 32 ops, and the random primitive (fused into a
 * map, and alone filling a buffer), and the scan primitive (a cumulative
 * sum, of rows, and between two maps), and two stencils that read one input
 * through many shifted slices (a width-9 moving average, a 3x3 conv over a
 * padded image), and issue 16's row and contraction cases (a layer norm;
 * the zip-reduce matmul with a bias + relu epilogue, with a row-scaled
 * operand, batched, and a matrix-vector product), and issue 30's cases
 * where a plain C loop was ahead (a 5x5 stencil, a 31-tap convolution, two
 * histograms of one index, an embedding lookup, k-means' assignment step
 * written directly). The graphs of existing
 * names must not
 * change: tests, the visualizer and recorded benchmark runs mean them. */
#include "seed_examples.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A 1-d or 2-d f32 input filled with uniform values in [lo, hi) from a fixed
 * linear congruential sequence; bound into g, the caller's reference dropped. */
void seed_fill_f32(float *host, int64_t n, float lo, float hi, uint32_t seed) {
    uint32_t s = seed * 2654435761u + 1;
    for (int64_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        host[i] = lo + (hi - lo) * (float)(s >> 8) * (1.0f / 16777216.0f);
    }
}

static lf_node *input_f32(lf_ctx *ctx, lf_graph *g, int ndim, const int64_t *shape, float lo,
                          float hi, uint32_t seed) {
    lf_buffer *b = lf_buffer_new(ctx, LF_F32, ndim, shape);
    if (!b) return NULL;
    int64_t n = lf_buffer_numel(b);
    float *host = malloc((size_t)(n ? n : 1) * sizeof *host);
    if (!host) {
        lf_buffer_free(b);
        return NULL;
    }
    seed_fill_f32(host, n, lo, hi, seed);
    lf_status st = lf_buffer_write(b, host, (size_t)n * sizeof *host);
    free(host);
    lf_node *x = st == LF_OK ? lf_input(g, b) : NULL;
    lf_buffer_free(b); /* the graph holds it now */
    return x;
}

static lf_node *c32(lf_graph *g, double v) { return lf_const(g, LF_F32, v); }

static int gaussian_pdf(lf_ctx *ctx, lf_graph *g, int64_t n, lf_node **outs) {
    lf_fn *f = lf_fn_parse(g, "(x, m, s) -> exp(-0.5*((x-m)/s)**2) / (s*2.5066282746)");
    lf_node *x = input_f32(ctx, g, 1, &n, -3, 3, 1);
    outs[0] = lf_zipwith(g, f, 3, (lf_node *[]){x, c32(g, 0), c32(g, 1)});
    return outs[0] ? 1 : 0;
}

/* The squared distance of two points in polar form (polar_to_cartesian
 * twice, then dx*dx + dy*dy: a DAG of builtin ops), over four inputs. */
static lf_node *polar_sq(lf_ctx *ctx, lf_graph *g, int64_t n) {
    lf_node *r1 = input_f32(ctx, g, 1, &n, 0.5f, 1.5f, 2), *t1 = input_f32(ctx, g, 1, &n, -3.14159f, 3.14159f, 3);
    lf_node *r2 = input_f32(ctx, g, 1, &n, 0.5f, 1.5f, 4), *t2 = input_f32(ctx, g, 1, &n, -3.14159f, 3.14159f, 5);
    lf_node *x1 = lf_mul(g, r1, lf_cos(g, t1)), *y1 = lf_mul(g, r1, lf_sin(g, t1));
    lf_node *x2 = lf_mul(g, r2, lf_cos(g, t2)), *y2 = lf_mul(g, r2, lf_sin(g, t2));
    lf_node *dx = lf_sub(g, x1, x2), *dy = lf_sub(g, y1, y2);
    return lf_add(g, lf_mul(g, dx, dx), lf_mul(g, dy, dy));
}

static int polar_distance(lf_ctx *ctx, lf_graph *g, int64_t n, lf_node **outs) {
    outs[0] = lf_sqrt(g, polar_sq(ctx, g, n));
    return outs[0] ? 1 : 0;
}

/* polar_distance with its square root written as a power of a constant
 * node, as a user of lf_const would: s ** c with c = 0.5 must cost what
 * sqrt(s) costs (the exponent's value class is part of the kernel:
 * graph_pow_exponent_class), the same bits. */
static int pow_const(lf_ctx *ctx, lf_graph *g, int64_t n, lf_node **outs) {
    outs[0] = lf_pow(g, polar_sq(ctx, g, n), c32(g, 0.5));
    return outs[0] ? 1 : 0;
}

static int hypot_steps(lf_ctx *ctx, lf_graph *g, int64_t n, lf_node **outs) {
    lf_node *x = lf_abs(g, input_f32(ctx, g, 1, &n, -10, 10, 6));
    lf_node *y = lf_abs(g, input_f32(ctx, g, 1, &n, -10, 10, 7));
    lf_node *t = lf_minimum(g, x, y);
    lf_node *m = lf_maximum(g, x, y);
    t = lf_div(g, t, m);
    outs[0] = lf_mul(g, m, lf_sqrt(g, lf_add(g, c32(g, 1), lf_mul(g, t, t))));
    return outs[0] ? 1 : 0;
}

static int triad(lf_ctx *ctx, lf_graph *g, int64_t n, lf_node **outs) {
    lf_node *a = input_f32(ctx, g, 1, &n, -1, 1, 13);
    lf_node *b = input_f32(ctx, g, 1, &n, -1, 1, 14);
    lf_node *c = input_f32(ctx, g, 1, &n, -1, 1, 15);
    outs[0] = lf_add(g, lf_mul(g, a, b), c);
    return outs[0] ? 1 : 0;
}

static int sum_of_squares(lf_ctx *ctx, lf_graph *g, int64_t n, lf_node **outs) {
    lf_node *x = input_f32(ctx, g, 1, &n, -1, 1, 8);
    outs[0] = lf_reduce(g, LF_RED_SUM, lf_mul(g, x, x), 0, NULL, false);
    return outs[0] ? 1 : 0;
}

static int softmax_rows(lf_ctx *ctx, lf_graph *g, int64_t n, lf_node **outs) {
    int64_t shape[2] = {4096, n};
    int last = -1;
    lf_node *x = input_f32(ctx, g, 2, shape, -4, 4, 9);
    lf_node *m = lf_reduce(g, LF_RED_MAX, x, 1, &last, true);
    lf_node *e = lf_exp(g, lf_sub(g, x, m));
    lf_node *s = lf_reduce(g, LF_RED_SUM, e, 1, &last, true);
    outs[0] = lf_div(g, e, s);
    return outs[0] ? 1 : 0;
}

static int matmul_zip_reduce(lf_ctx *ctx, lf_graph *g, int64_t n, lf_node **outs) {
    int64_t shape[2] = {n, n};
    int j = 1;
    lf_node *a = input_f32(ctx, g, 2, shape, -1, 1, 10); /* [I, J] */
    lf_node *b = input_f32(ctx, g, 2, shape, -1, 1, 11); /* [J, K] */
    lf_node *prod = lf_mul(g, lf_expand_dims(g, a, 2), lf_expand_dims(g, b, 0)); /* [I, J, K] */
    outs[0] = lf_reduce(g, LF_RED_SUM, prod, 1, &j, false);
    return outs[0] ? 1 : 0;
}

/* 4 * rounds cheap scalar ops on one input that keep values in a bounded
 * range: multiply, add, abs, subtract, repeated. */
static int chain_ops(lf_ctx *ctx, lf_graph *g, int64_t n, lf_node **outs, int rounds, uint32_t seed) {
    lf_node *y = input_f32(ctx, g, 1, &n, -1, 1, seed);
    for (int i = 0; i < rounds; i++) {
        y = lf_mul(g, y, c32(g, 0.99));
        y = lf_add(g, y, c32(g, 0.01 * (i + 1)));
        y = lf_abs(g, y);
        y = lf_sub(g, y, c32(g, 0.25));
    }
    outs[0] = y;
    return outs[0] ? 1 : 0;
}

static int chain8(lf_ctx *ctx, lf_graph *g, int64_t n, lf_node **outs) {
    return chain_ops(ctx, g, n, outs, 2, 16);
}

static int chain32(lf_ctx *ctx, lf_graph *g, int64_t n, lf_node **outs) {
    return chain_ops(ctx, g, n, outs, 8, 12);
}

/* The seed talk's random primitive, fused: x + 0.1 * normal(seed), f32; the
 * normal is computed in the kernel and never stored. */
static int random_fused(lf_ctx *ctx, lf_graph *g, int64_t n, lf_node **outs) {
    lf_node *x = input_f32(ctx, g, 1, &n, -1, 1, 17);
    lf_node *z = lf_random(g, LF_F32, LF_RANDOM_NORMAL, 1, &n, 20140101);
    outs[0] = lf_add(g, x, lf_mul(g, c32(g, 0.1), z));
    return outs[0] ? 1 : 0;
}

/* Uniform f32 in [0, 1) written into a buffer: no input at all. */
static int random_fill(lf_ctx *ctx, lf_graph *g, int64_t n, lf_node **outs) {
    (void)ctx;
    outs[0] = lf_random(g, LF_F32, LF_RANDOM_UNIFORM, 1, &n, 42);
    return outs[0] ? 1 : 0;
}

/* The seed talk's scan primitive: an inclusive cumulative sum, f32. */
static int cumsum(lf_ctx *ctx, lf_graph *g, int64_t n, lf_node **outs) {
    lf_node *x = input_f32(ctx, g, 1, &n, -1, 1, 23);
    outs[0] = lf_scan(g, LF_RED_SUM, x, 0, false);
    return outs[0] ? 1 : 0;
}

/* Cumulative sums of 4096 rows of n, along the last axis. */
static int cumsum_rows(lf_ctx *ctx, lf_graph *g, int64_t n, lf_node **outs) {
    int64_t shape[2] = {4096, n};
    lf_node *x = input_f32(ctx, g, 2, shape, -1, 1, 29);
    outs[0] = lf_scan(g, LF_RED_SUM, x, -1, false);
    return outs[0] ? 1 : 0;
}

/* A scan between maps: cumsum(x*x) / n, one kernel when fused. */
static int scan_fused(lf_ctx *ctx, lf_graph *g, int64_t n, lf_node **outs) {
    lf_node *x = input_f32(ctx, g, 1, &n, -1, 1, 31);
    outs[0] = lf_div(g, lf_scan(g, LF_RED_SUM, lf_mul(g, x, x), 0, false), c32(g, (double)n));
    return outs[0] ? 1 : 0;
}

/* splitmix64's finalizer (Steele, Lea and Flood 2014): a bijection of 64-bit
 * words that mixes every input bit into every output bit. */
static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A pseudo-random bijection of [0, 2^bits): each step (multiply by an odd
 * number, add, xor with a right shift, all mod 2^bits) is invertible. */
static uint64_t permute_bits(uint64_t v, int bits, uint64_t key) {
    uint64_t mask = bits >= 64 ? ~0ull : (1ull << bits) - 1;
    int sh = bits / 2 > 0 ? bits / 2 : 1;
    for (int r = 0; r < 3; r++) {
        v = (v * (0x9e3779b97f4a7c15ull | 1) + (key >> (r * 16))) & mask;
        v ^= v >> sh;
        v = (v * (mix64(key + (uint64_t)r) | 1)) & mask;
    }
    return v;
}

/* An index input of n elements of dtype t (i32 or i64): a random
 * permutation of 0..n-1 (perm) or uniform in 0..range-1. Both are counter
 * based (element i is a function of seed and i) so benches/peers/common.py
 * makes the same arrays with a few vectorized NumPy passes: the permutation
 * walks a bijection of the next power of two until it lands below n (cycle
 * walking keeps it a bijection of 0..n-1), the uniform index is
 * mix64(seed * 2^32 + i) >> 11 modulo range. */
static lf_node *input_index(lf_ctx *ctx, lf_graph *g, lf_dtype t, int ndim, const int64_t *shape, bool perm,
                            int64_t range, uint32_t seed) {
    lf_buffer *b = lf_buffer_new(ctx, t, ndim, shape);
    if (!b) return NULL;
    int64_t n = lf_buffer_numel(b);
    void *host = malloc((size_t)(n ? n : 1) * lf_dtype_size(t));
    if (!host) {
        lf_buffer_free(b);
        return NULL;
    }
    int bits = 1;
    while (bits < 63 && (1ll << bits) < n) bits++;
    uint64_t key = mix64(seed);
    for (int64_t i = 0; i < n; i++) {
        int64_t v;
        if (perm) {
            uint64_t w = permute_bits((uint64_t)i, bits, key);
            while (w >= (uint64_t)n) w = permute_bits(w, bits, key);
            v = (int64_t)w;
        } else {
            v = (int64_t)((mix64(((uint64_t)seed << 32) + (uint64_t)i) >> 11) % (uint64_t)range);
        }
        if (t == LF_I64) ((int64_t *)host)[i] = v;
        else ((int32_t *)host)[i] = (int32_t)v;
    }
    lf_status st = lf_buffer_write(b, host, (size_t)n * lf_dtype_size(t));
    free(host);
    lf_node *x = st == LF_OK ? lf_input(g, b) : NULL;
    lf_buffer_free(b);
    return x;
}

/* x[p]: a gather of f32 x by a random permutation p (i64). */
static int gather_perm(lf_ctx *ctx, lf_graph *g, int64_t n, lf_node **outs) {
    lf_node *x = input_f32(ctx, g, 1, &n, -1, 1, 23);
    lf_node *p = input_index(ctx, g, LF_I64, 1, &n, true, 0, 5);
    outs[0] = lf_gather(g, x, 0, p);
    return outs[0] ? 1 : 0;
}

/* take_along_axis(x, idx, 1) of a [4096, n/4096] f32 x, idx i32 uniform in
 * the row. */
static int gather_rows(lf_ctx *ctx, lf_graph *g, int64_t n, lf_node **outs) {
    int64_t sh[2] = {4096, n / 4096 > 0 ? n / 4096 : 1};
    lf_node *x = input_f32(ctx, g, 2, sh, -1, 1, 29);
    lf_node *i = input_index(ctx, g, LF_I32, 2, sh, false, sh[1], 7);
    outs[0] = lf_gather(g, x, 1, i);
    return outs[0] ? 1 : 0;
}

/* bincount(i32(floor(x*256)), 256) of f32 x in [0, 1): one kernel. */
static int histogram(lf_ctx *ctx, lf_graph *g, int64_t n, lf_node **outs) {
    lf_node *x = input_f32(ctx, g, 1, &n, 0, 1, 31);
    lf_fn *f = lf_fn_parse(g, "(v) -> floor(v * 256)");
    outs[0] = lf_bincount(g, lf_cast(g, lf_map(g, f, x), LF_I32), NULL, 256);
    return outs[0] ? 1 : 0;
}

/* The width-9 moving average of x (n + 8 elements, pre-padded): y[i] =
 * (x[i] + x[i+1] + ... + x[i+8]) / 9, the sum left to right in f32, for n
 * outputs: nine slices of x added, one kernel reading x once. */
static int stencil9(lf_ctx *ctx, lf_graph *g, int64_t n, lf_node **outs) {
    int64_t len = n + 8;
    lf_node *x = input_f32(ctx, g, 1, &len, -1, 1, SEED_STENCIL9_X);
    lf_node *acc = NULL;
    for (int k = 0; k < 9; k++) {
        lf_node *v = lf_slice(g, x, 0, k, k + n, 1);
        acc = acc ? lf_add(g, acc, v) : v;
    }
    outs[0] = lf_div(g, acc, c32(g, 9));
    return outs[0] ? 1 : 0;
}

const float seed_conv3x3_w[9] = {0.0625f, 0.125f, 0.0625f, 0.125f, 0.25f, 0.125f, 0.0625f, 0.125f, 0.0625f};

/* A 3x3 conv (a blur, weights seed_conv3x3_w as lf_consts) of an n x n
 * image given padded, x [n + 2, n + 2]: y[i,j] = sum over (dy, dx) of
 * x[i+dy, j+dx] * w[dy*3+dx], summed in tap order in f32; nine 2-d slices
 * of x, one kernel. */
static int conv3x3(lf_ctx *ctx, lf_graph *g, int64_t n, lf_node **outs) {
    int64_t sh[2] = {n + 2, n + 2};
    lf_node *x = input_f32(ctx, g, 2, sh, -1, 1, SEED_CONV3X3_X);
    lf_node *acc = NULL;
    for (int t = 0; t < 9; t++) {
        int dy = t / 3, dx = t % 3;
        lf_node *v = lf_slice(g, lf_slice(g, x, 0, dy, dy + n, 1), 1, dx, dx + n, 1);
        v = lf_mul(g, v, c32(g, seed_conv3x3_w[t]));
        acc = acc ? lf_add(g, acc, v) : v;
    }
    outs[0] = acc;
    return outs[0] ? 1 : 0;
}

/* Layer norm of the rows of x [4096, n]: mean over the row, the centred row,
 * its variance (the mean of the squared centred values), then
 * (x - mean) / sqrt(var + 1e-5) * gamma + beta with gamma and beta [n]
 * broadcast over the rows. Built as softmax_rows is: reductions kept as
 * [4096, 1] and broadcast back. */
static int layer_norm(lf_ctx *ctx, lf_graph *g, int64_t n, lf_node **outs) {
    int64_t shape[2] = {4096, n};
    int last = -1;
    lf_node *x = input_f32(ctx, g, 2, shape, SEED_LAYER_NORM_X_LO, SEED_LAYER_NORM_X_HI, SEED_LAYER_NORM_X);
    lf_node *gamma = input_f32(ctx, g, 1, &n, 0.5f, 1.5f, SEED_LAYER_NORM_GAMMA);
    lf_node *beta = input_f32(ctx, g, 1, &n, -1, 1, SEED_LAYER_NORM_BETA);
    lf_node *mean = lf_reduce(g, LF_RED_MEAN, x, 1, &last, true);
    lf_node *xc = lf_sub(g, x, mean);
    lf_node *var = lf_reduce(g, LF_RED_MEAN, lf_mul(g, xc, xc), 1, &last, true);
    lf_node *y = lf_div(g, xc, lf_sqrt(g, lf_add(g, var, c32(g, 1e-5))));
    outs[0] = lf_add(g, lf_mul(g, y, gamma), beta);
    return outs[0] ? 1 : 0;
}

/* sum over j of a[..., i, j, None] * b[..., None, j, k]: the zip-reduce
 * contraction of matmul_zip_reduce over the last two axes of a and b. */
static lf_node *zip_reduce(lf_graph *g, lf_node *a, lf_node *b) {
    int nd = lf_node_ndim(a);
    int j = nd - 1;
    lf_node *prod = lf_mul(g, lf_expand_dims(g, a, nd), lf_expand_dims(g, b, nd - 2)); /* [.., I, J, K] */
    return lf_reduce(g, LF_RED_SUM, prod, 1, &j, false);
}

/* relu(A @ B + bias[None, :]): the contraction with an epilogue. */
static int matmul_bias_relu(lf_ctx *ctx, lf_graph *g, int64_t n, lf_node **outs) {
    int64_t shape[2] = {n, n};
    lf_node *a = input_f32(ctx, g, 2, shape, -1, 1, SEED_MATMUL_A);
    lf_node *b = input_f32(ctx, g, 2, shape, -1, 1, SEED_MATMUL_B);
    lf_node *bias = input_f32(ctx, g, 1, &n, -1, 1, SEED_MATMUL_BIAS);
    outs[0] = lf_maximum(g, lf_add(g, zip_reduce(g, a, b), bias), c32(g, 0));
    return outs[0] ? 1 : 0;
}

/* (A * s[:, None]) @ B, s a per-row scale of A: the contraction with a
 * prologue on one operand. */
static int matmul_scaled(lf_ctx *ctx, lf_graph *g, int64_t n, lf_node **outs) {
    int64_t shape[2] = {n, n};
    lf_node *a = input_f32(ctx, g, 2, shape, -1, 1, SEED_MATMUL_A);
    lf_node *b = input_f32(ctx, g, 2, shape, -1, 1, SEED_MATMUL_B);
    lf_node *s = input_f32(ctx, g, 1, &n, 0.5f, 1.5f, SEED_MATMUL_SCALE);
    outs[0] = zip_reduce(g, lf_mul(g, a, lf_expand_dims(g, s, 1)), b);
    return outs[0] ? 1 : 0;
}

/* SEED_BATCH products of [n/2, n/2] matrices, [b, m, m] x [b, m, m] with
 * m = max(1, n/2) (as many multiply-adds as one n x n product), written as
 * the zip-reduce with a batch axis. */
static int batched_matmul(lf_ctx *ctx, lf_graph *g, int64_t n, lf_node **outs) {
    int64_t m = seed_batched_side(n), shape[3] = {SEED_BATCH, m, m};
    lf_node *a = input_f32(ctx, g, 3, shape, -1, 1, SEED_MATMUL_A);
    lf_node *b = input_f32(ctx, g, 3, shape, -1, 1, SEED_MATMUL_B);
    outs[0] = zip_reduce(g, a, b);
    return outs[0] ? 1 : 0;
}

/* A [n, n] times x [n] as sum(A * x[None, :], axis=1). */
static int matvec(lf_ctx *ctx, lf_graph *g, int64_t n, lf_node **outs) {
    int64_t shape[2] = {n, n};
    int j = 1;
    lf_node *a = input_f32(ctx, g, 2, shape, -1, 1, SEED_MATMUL_A);
    lf_node *x = input_f32(ctx, g, 1, &n, -1, 1, SEED_MATVEC_X);
    outs[0] = lf_reduce(g, LF_RED_SUM, lf_mul(g, a, lf_expand_dims(g, x, 0)), 1, &j, false);
    return outs[0] ? 1 : 0;
}

/* ---- issue 30's cases: where a plain or tiled C loop was ahead ------------- */

/* Weights of the wide stencils: w[t] = (t + 1) / (taps * (taps + 1) / 2), so
 * that they sum to 1 (a smoothing kernel); exact in f32 only as an
 * approximation, the same float in every builder and reference. */
float seed_stencil_weight(int t, int taps) { return (float)(t + 1) / (float)(taps * (taps + 1) / 2); }

/* A 5x5 stencil of an n x n image given padded, x [n + 4, n + 4]:
 * y[i,j] = sum over (dy, dx) of x[i+dy, j+dx] * w[dy*5+dx], in tap order in
 * f32; 25 two-d slices of x, one kernel. */
static int stencil5x5(lf_ctx *ctx, lf_graph *g, int64_t n, lf_node **outs) {
    int64_t sh[2] = {n + 4, n + 4};
    lf_node *x = input_f32(ctx, g, 2, sh, -1, 1, SEED_STENCIL5X5_X);
    lf_node *acc = NULL;
    for (int t = 0; t < 25; t++) {
        int dy = t / 5, dx = t % 5;
        lf_node *v = lf_slice(g, lf_slice(g, x, 0, dy, dy + n, 1), 1, dx, dx + n, 1);
        v = lf_mul(g, v, c32(g, seed_stencil_weight(t, 25)));
        acc = acc ? lf_add(g, acc, v) : v;
    }
    outs[0] = acc;
    return outs[0] ? 1 : 0;
}

/* A 31-tap 1-d convolution of x given padded (n + 30 elements): y[i] = sum
 * over t of x[i+t] * w[t], in tap order in f32; 31 slices, one kernel. */
static int conv1d_31(lf_ctx *ctx, lf_graph *g, int64_t n, lf_node **outs) {
    int64_t len = n + 30;
    lf_node *x = input_f32(ctx, g, 1, &len, -1, 1, SEED_CONV1D_X);
    lf_node *acc = NULL;
    for (int t = 0; t < 31; t++) {
        lf_node *v = lf_mul(g, lf_slice(g, x, 0, t, t + n, 1), c32(g, seed_stencil_weight(t, 31)));
        acc = acc ? lf_add(g, acc, v) : v;
    }
    outs[0] = acc;
    return outs[0] ? 1 : 0;
}

/* Two histograms of one index, idx = i32(floor(x * 256)) of f32 x in [0, 1):
 * the counts (i64) and the sums of x per bin (f32, the weights' dtype). */
static int bincount2(lf_ctx *ctx, lf_graph *g, int64_t n, lf_node **outs) {
    lf_node *x = input_f32(ctx, g, 1, &n, 0, 1, SEED_BINCOUNT2_X);
    lf_fn *f = lf_fn_parse(g, "(v) -> floor(v * 256)");
    lf_node *idx = lf_cast(g, lf_map(g, f, x), LF_I32);
    outs[0] = lf_bincount(g, idx, NULL, 256);
    outs[1] = lf_bincount(g, idx, x, 256);
    return outs[0] && outs[1] ? 2 : 0;
}

/* An embedding lookup: rows of a table [SEED_EMBED_ROWS, SEED_EMBED_DIM]
 * f32 picked by a 1-d i32 index of n / SEED_EMBED_DIM uniform values
 * (lf_take along axis 0): [n / DIM, DIM] out. */
static int embedding(lf_ctx *ctx, lf_graph *g, int64_t n, lf_node **outs) {
    int64_t tsh[2] = {SEED_EMBED_ROWS, SEED_EMBED_DIM}, m = n / SEED_EMBED_DIM > 0 ? n / SEED_EMBED_DIM : 1;
    lf_node *table = input_f32(ctx, g, 2, tsh, -1, 1, SEED_EMBED_TABLE);
    lf_node *idx = input_index(ctx, g, LF_I32, 1, &m, false, SEED_EMBED_ROWS, SEED_EMBED_IDX);
    outs[0] = lf_take(g, table, 0, idx);
    return outs[0] ? 1 : 0;
}

/* k-means' assignment step written directly: for x [N, D] and centres
 * c [K, D] (N = n / D, D = SEED_KMEANS_D, K = SEED_KMEANS_K), the index of
 * the nearest centre, argmin over K of sum over D of (x - c)^2: i64 [N]. */
static int kmeans_assign(lf_ctx *ctx, lf_graph *g, int64_t n, lf_node **outs) {
    int64_t m = n / SEED_KMEANS_D > 0 ? n / SEED_KMEANS_D : 1;
    int64_t xsh[2] = {m, SEED_KMEANS_D}, csh[2] = {SEED_KMEANS_K, SEED_KMEANS_D};
    int last = 2, mid = 1;
    lf_node *x = input_f32(ctx, g, 2, xsh, -1, 1, SEED_KMEANS_X);
    lf_node *c = input_f32(ctx, g, 2, csh, -1, 1, SEED_KMEANS_C);
    lf_node *d = lf_sub(g, lf_expand_dims(g, x, 1), lf_expand_dims(g, c, 0)); /* [N, K, D] */
    lf_node *dist = lf_reduce(g, LF_RED_SUM, lf_mul(g, d, d), 1, &last, false); /* [N, K] */
    outs[0] = lf_reduce(g, LF_RED_ARGMIN, dist, 1, &mid, false);
    return outs[0] ? 1 : 0;
}

const seed_example seed_examples[] = {
    {"gaussian_pdf", "exp(-0.5*((x-m)/s)**2) / (s*sqrt(2 pi)), one parsed fn", 1 << 24, gaussian_pdf},
    {"polar_distance", "distance of two points in polar form, a DAG of 15 builtin ops", 1 << 24, polar_distance},
    {"pow_const", "polar_distance with sqrt written as ** of a constant node (lf_const 0.5)", 1 << 24, pow_const},
    {"hypot", "the seeds' step-by-step hypot(x, y) (abs, min, max, div, sqrt)", 1 << 24, hypot_steps},
    {"triad", "STREAM's triad a*b+c over three inputs (lf_mul, lf_add)", 1 << 24, triad},
    {"sum_of_squares", "sum(x*x) over all elements", 1 << 24, sum_of_squares},
    {"softmax_rows", "row softmax of a [4096, n] matrix: max, exp, sum, divide", 4096, softmax_rows},
    {"matmul_zip_reduce", "sum over j of A[i,j,None] * B[None,j,k], n x n x n", 256, matmul_zip_reduce},
    {"chain8", "a chain of 8 cheap elementwise ops", 1 << 24, chain8},
    {"chain", "a chain of 32 cheap elementwise ops", 1 << 24, chain32},
    {"random_fused", "x + 0.1 * normal(seed), f32 (Philox computed in the kernel)", 1 << 24, random_fused},
    {"random_fill", "uniform f32 in [0, 1) into a buffer (Philox, no input)", 1 << 24, random_fill},
    {"cumsum", "inclusive cumulative sum of x, f32 (lf_scan)", 1 << 24, cumsum},
    {"cumsum_rows", "cumulative sums of a [4096, n] matrix along its rows, f32", 4096, cumsum_rows},
    {"scan_fused", "cumsum(x*x) / n, f32: the scan between two maps, one kernel", 1 << 24, scan_fused},
    {"gather_perm", "x[p], f32 x gathered by a random permutation p (i64)", 1 << 24, gather_perm},
    {"gather_rows", "take_along_axis(x, idx, 1) of [4096, n/4096] f32, idx i32", 1 << 24, gather_rows},
    {"histogram", "bincount(i32(floor(x*256)), 256) of f32 x, one kernel", 1 << 24, histogram},
    {"stencil9", "width-9 moving average of f32 x (n + 8 in, n out), nine slices added", 1 << 24, stencil9},
    {"conv3x3", "3x3 blur of an n x n f32 image given padded [n+2, n+2], 9 slices", 2048, conv3x3},
};
const int seed_nexamples = (int)(sizeof seed_examples / sizeof seed_examples[0]);

/* Not in seed_examples[]: the tests that walk that table build every entry
 * at sizes chosen for the elementwise cases (tests/test_cuda_codegen.c
 * builds 70001 and 5000; a contraction or a 4096-row case at those sizes is
 * gigabytes). */
const seed_example seed_more_examples[] = {
    {"layer_norm", "layer norm of the rows of [4096, n]: mean, centred, variance, * gamma + beta", 4096, layer_norm},
    {"matmul_bias_relu", "relu(A @ B + bias[None, :]), A @ B as the zip-reduce, n x n", 256, matmul_bias_relu},
    {"matmul_scaled", "(A * s[:, None]) @ B, s a per-row scale, A @ B as the zip-reduce, n x n", 256, matmul_scaled},
    {"batched_matmul", "8 zip-reduce products of [n/2, n/2] matrices ([8, m, m] x [8, m, m])", 256, batched_matmul},
    {"matvec", "A [n, n] times x [n] as sum(A * x[None, :], axis=1)", 256, matvec},
    {"stencil5x5", "5x5 weighted stencil of an n x n f32 image given padded [n+4, n+4], 25 slices", 2048, stencil5x5},
    {"conv1d_31", "31-tap 1-d convolution of f32 x (n + 30 in, n out), 31 slices", 1 << 24, conv1d_31},
    {"bincount2", "counts and sums of x per bin of i32(floor(x*256)), two bincounts of one index", 1 << 24, bincount2},
    {"embedding", "rows of a [4096, 64] f32 table taken by n/64 i32 indices (lf_take)", 1 << 24, embedding},
    {"kmeans_assign", "argmin over 16 centres of sum over 16 dims of (x - c)^2, x [n/16, 16]", 1 << 24, kmeans_assign},
};
const int seed_nmore_examples = (int)(sizeof seed_more_examples / sizeof seed_more_examples[0]);

const seed_example *seed_find(const char *name) {
    for (int i = 0; i < seed_nexamples; i++)
        if (strcmp(seed_examples[i].name, name) == 0) return &seed_examples[i];
    for (int i = 0; i < seed_nmore_examples; i++)
        if (strcmp(seed_more_examples[i].name, name) == 0) return &seed_more_examples[i];
    return NULL;
}
