/* tests/test_mpi.c: liblazyfuse-mpi under mpirun (suite 'mpi', run at
 * -np 1, 2, 3 and 4).
 *
 * Every rank makes the same global arrays from a seed, writes its block
 * into sharded buffers, evaluates with lf_mpi_eval, and compares its block
 * (or the replicated result) bit for bit with the same graph built over the
 * whole arrays and evaluated by this one process alone: on the same local
 * backend for local results, on LF_BACKEND_REFERENCE (and, for the orders
 * every backend shares, on the CPU backend too) for reductions and scans
 * across ranks, as lazyfuse_mpi.h promises. Random graphs of the supported
 * kinds run with random blocks (empty ones included); fixed cases cover
 * long scans (several LF_SCAN_BLOCK blocks), takes (of a replicated table,
 * and of a sharded table by indices that cross blocks), top-k, sort and
 * argsort along the sharded axis (ties across blocks), and the collective
 * error paths (a bad index in one rank's block, unsupported nodes, bad
 * output buffers: every rank fails with the same status and message, no
 * output changes).
 *
 * Not a Criterion suite: Criterion forks each test, which MPI does not
 * allow. Exits non-zero on rank 0 when any rank found a difference.
 */
#include "lazyfuse_mpi.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size, failures;
static int compared[5], float_folds, refused_by_builder; /* what the random graphs covered */

#define CHECK(cond, ...)                                                     \
    do {                                                                     \
        if (!(cond)) {                                                       \
            failures++;                                                      \
            fprintf(stderr, "rank %d: %s:%d: ", rank, __FILE__, __LINE__);   \
            fprintf(stderr, __VA_ARGS__);                                    \
            fputc('\n', stderr);                                             \
        }                                                                    \
    } while (0)

/* ---- a private generator (splitmix64), the same on every rank ------------- */

typedef struct rng {
    uint64_t s;
} rng;
static uint64_t next(rng *r) {
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static int pick(rng *r, int n) { return (int)(next(r) % (uint64_t)n); }
static double unit(rng *r) { return (double)(next(r) >> 11) / 9007199254740992.0; }

/* Fills a global array with values that find differences: NaN, +-Inf,
 * -0.0 and ordinary values for floats; small and extreme integers. */
static void fill(rng *r, lf_dtype t, int64_t n, void *p, bool specials) {
    for (int64_t i = 0; i < n; i++) {
        double v = unit(r) * 8 - 4;
        int k = pick(r, 40);
        if (specials && k == 0) v = NAN;
        else if (specials && k == 1) v = INFINITY;
        else if (specials && k == 2) v = -INFINITY;
        else if (k == 3) v = -0.0;
        switch (t) {
        case LF_BOOL: ((uint8_t *)p)[i] = v > 0; break;
        case LF_I32: ((int32_t *)p)[i] = k == 4 ? INT32_MAX : k == 5 ? INT32_MIN : (int32_t)(v * 1000); break;
        case LF_I64: ((int64_t *)p)[i] = k == 4 ? INT64_MAX : (int64_t)(v * 1e6); break;
        case LF_F32: ((float *)p)[i] = (float)v; break;
        default: ((double *)p)[i] = v; break;
        }
    }
}

/* ---- contexts --------------------------------------------------------------- */

static lf_ctx *mctx;            /* the MPI context (CPU backend) */
static lf_ctx *cpu1, *ref1;     /* one-process CPU and reference contexts */

static lf_compile_mode compile_mode = LF_COMPILE_NEVER; /* argv[2] "compiled": REQUIRE */

static lf_ctx *new_ctx(lf_backend be, bool mpi) {
    lf_ctx_options o;
    lf_ctx_options_init(&o);
    o.backend = be;
    o.threads = 1;
    o.compile = compile_mode; /* by default the CPU schedule interpreter: no compiles, seconds */
    return mpi ? lf_ctx_new_mpi(MPI_COMM_WORLD, &o) : lf_ctx_new(&o);
}

/* ---- one array, global and sharded --------------------------------------- */

typedef struct arr {
    lf_dtype t;
    int ndim;
    int64_t shape[LF_MAX_DIMS];
    int axis;           /* sharded axis, -1 replicated */
    void *global;       /* the whole array */
    lf_buffer *shard;   /* mctx: the rank's block (or the whole, replicated) */
} arr;

static int64_t numel(int ndim, const int64_t *s) {
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= s[d];
    return n;
}

/* The rank's block of a global array (rows start..start+count of axis). */
static void block_of(const arr *a, int64_t start, int64_t count, void *out) {
    size_t es = lf_dtype_size(a->t);
    int64_t outer = numel(a->axis, a->shape), inner = numel(a->ndim - a->axis - 1, a->shape + a->axis + 1);
    for (int64_t o = 0; o < outer; o++)
        memcpy((char *)out + (size_t)(o * count * inner) * es,
               (char *)a->global + (size_t)((o * a->shape[a->axis] + start) * inner) * es, (size_t)(count * inner) * es);
}

static void arr_make(arr *a, rng *r, lf_dtype t, int ndim, const int64_t *shape, int axis, const int64_t *counts,
                     bool specials) {
    a->t = t, a->ndim = ndim, a->axis = axis;
    memcpy(a->shape, shape, (size_t)ndim * sizeof *shape);
    int64_t n = numel(ndim, shape);
    a->global = malloc((size_t)(n ? n : 1) * lf_dtype_size(t));
    fill(r, t, n, a->global, specials);
    if (axis < 0) {
        a->shard = lf_buffer_new(mctx, t, ndim, shape);
        lf_buffer_write(a->shard, a->global, (size_t)n * lf_dtype_size(t));
        return;
    }
    a->shard = lf_mpi_buffer_new_sharded(mctx, t, ndim, shape, axis, counts);
    if (!a->shard) {
        CHECK(0, "lf_mpi_buffer_new_sharded: %s", lf_errmsg(mctx));
        return;
    }
    int64_t start, count;
    lf_mpi_buffer_block(mctx, a->shard, NULL, &start, &count, NULL);
    size_t bytes = (size_t)(count * numel(ndim, shape) / (shape[axis] ? shape[axis] : 1)) * lf_dtype_size(t);
    void *blk = malloc(bytes ? bytes : 1);
    block_of(a, start, count, blk);
    CHECK(lf_buffer_write(a->shard, blk, bytes) == LF_OK, "write block: %s", lf_errmsg(mctx));
    free(blk);
}

static void arr_free(arr *a) {
    lf_mpi_buffer_free(mctx, a->shard);
    free(a->global);
}

/* ---- graphs built twice: over blocks (mctx) and over whole arrays -------- */

/* A graph description replayed from a seed: the same on every rank and in
 * both builds. `in` are the inputs (block or global buffers). */
typedef struct built {
    lf_node *out;
    int final;     /* 0 elementwise, 1 reduce over the sharded axis, 2 reduce
                      along another axis, 3 scan along the sharded axis, 4 scan
                      along another axis */
    lf_reduce_op op;
} built;

static const lf_op binops[] = {LF_OP_ADD, LF_OP_SUB, LF_OP_MUL, LF_OP_DIV, LF_OP_MIN, LF_OP_MAX, LF_OP_HYPOT};
static const lf_op unops[] = {LF_OP_NEG, LF_OP_ABS, LF_OP_SQRT, LF_OP_EXP, LF_OP_FLOOR, LF_OP_SIN, LF_OP_TANH};

static built build(lf_graph *g, uint64_t seed, int nin, lf_buffer *const *in, int ndim, bool nonempty) {
    rng r = {seed};
    lf_node *pool[16];
    int np = 0;
    for (int k = 0; k < nin; k++) pool[np++] = lf_input(g, in[k]);
    int steps = 1 + pick(&r, 5);
    for (int s = 0; s < steps; s++) {
        lf_node *a = pool[pick(&r, np)], *b = pool[pick(&r, np)];
        lf_node *v;
        switch (pick(&r, 5)) {
        case 0: v = lf_apply(g, unops[pick(&r, 7)], a, NULL, NULL); break;
        case 1: v = lf_select(g, lf_lt(g, a, b), a, b); break;
        case 2: v = lf_mul(g, a, lf_const(g, LF_F32, 0.5 + pick(&r, 3))); break;
        default: v = lf_apply(g, binops[pick(&r, 7)], a, b, NULL); break;
        }
        if (np < 16) pool[np++] = v;
        else pool[pick(&r, 16)] = v;
    }
    /* the result reads a sharded input (pool[0]), so it is sharded */
    lf_node *x = lf_apply(g, binops[pick(&r, 7)], pool[np - 1], pool[0], NULL);
    built B = {.final = pick(&r, 5)};
    static const lf_reduce_op red[] = {LF_RED_SUM, LF_RED_PROD, LF_RED_MEAN, LF_RED_MIN,
                                       LF_RED_MAX, LF_RED_ARGMIN, LF_RED_ARGMAX};
    static const lf_reduce_op scn[] = {LF_RED_SUM, LF_RED_PROD, LF_RED_MIN, LF_RED_MAX};
    B.op = B.final == 1 || B.final == 2 ? red[pick(&r, nonempty ? 7 : 3)] : scn[pick(&r, 4)];
    if (pick(&r, 3) == 0) x = lf_cast(g, x, (lf_dtype)pick(&r, 5)); /* integer and bool folds too */
    bool keep = pick(&r, 2);
    int all = pick(&r, 3) == 0;
    switch (B.final) {
    case 0: B.out = x; break;
    case 1: B.out = all ? lf_reduce(g, B.op, x, 0, NULL, keep) : lf_reduce(g, B.op, x, 1, (int[]){0}, keep); break;
    case 2: B.out = ndim > 1 ? lf_reduce(g, B.op, x, 1, (int[]){ndim - 1}, keep) : x; break;
    case 3: B.out = lf_scan(g, B.op, x, 0, pick(&r, 2)); break;
    default: B.out = ndim > 1 ? lf_scan(g, B.op, x, ndim - 1, pick(&r, 2)) : x; break;
    }
    return B;
}

/* A node's shape (lazyfuse.h queries one extent at a time). */
static const int64_t *node_shape(const lf_node *o) {
    static int64_t s[4][LF_MAX_DIMS];
    static int k;
    k = (k + 1) % 4;
    for (int d = 0; d < lf_node_ndim(o); d++) s[k][d] = lf_node_dim(o, d);
    return s[k];
}

/* Evaluates node `o` of a one-process graph into a fresh host array. */
static void *eval_one(lf_ctx *ctx, lf_graph *g, lf_node *o) {
    lf_buffer *b = lf_buffer_new_like(ctx, o);
    size_t bytes = (size_t)numel(lf_node_ndim(o), node_shape(o)) * lf_dtype_size(lf_node_dtype(o));
    void *h = malloc(bytes ? bytes : 1);
    lf_status st = lf_eval(g, 1, &o, &b);
    CHECK(st == LF_OK, "one-process eval: %s", lf_errmsg(ctx));
    if (st != LF_OK) memset(h, 0, bytes);
    else lf_buffer_read(b, h, bytes);
    lf_buffer_free(b);
    return h;
}

/* Compares the rank's result (block or replicated) with a one-process
 * result: bytes for everything, except that a NaN equals any NaN (its sign
 * and payload are not promised, lazyfuse.h). */
static int same_bits(lf_dtype t, const void *a, const void *b, int64_t n, int64_t *where) {
    size_t es = lf_dtype_size(t);
    for (int64_t i = 0; i < n; i++) {
        const char *x = (const char *)a + (size_t)i * es, *y = (const char *)b + (size_t)i * es;
        if (!memcmp(x, y, es)) continue;
        if (t == LF_F32 && isnan(*(const float *)x) && isnan(*(const float *)y)) continue;
        if (t == LF_F64 && isnan(*(const double *)x) && isnan(*(const double *)y)) continue;
        *where = i;
        return 0;
    }
    return 1;
}

/* One random graph: sharded inputs along axis 0 with random blocks, a
 * replicated operand that broadcasts along the sharded axis, evaluated by
 * lf_mpi_eval and compared with one process. */
static void random_graph(uint64_t seed) {
    rng r = {seed * 7919 + 17};
    int ndim = 1 + pick(&r, 3);
    int64_t shape[3];
    shape[0] = pick(&r, 4) == 0 ? pick(&r, 4) : 1 + pick(&r, 40); /* sometimes fewer rows than ranks */
    for (int d = 1; d < ndim; d++) shape[d] = 1 + pick(&r, 5);
    /* blocks: balanced or random (empty blocks included) */
    int64_t counts[64];
    bool balanced = pick(&r, 3) == 0;
    int64_t left = shape[0];
    for (int q = 0; q < size; q++) {
        counts[q] = q == size - 1 ? left : (int64_t)pick(&r, (int)left + 1);
        left -= counts[q];
    }
    bool nonempty = true;
    for (int q = 0; q < size; q++) {
        int64_t c = balanced ? shape[0] / size + (q < shape[0] % size) : counts[q];
        if (c == 0) nonempty = false;
    }
    int nin = 1 + pick(&r, 3);
    arr a[4];
    lf_buffer *blocks[4], *wholes1[4], *wholes2[4];
    for (int k = 0; k < nin; k++) {
        lf_dtype t = (lf_dtype)(pick(&r, 3) ? LF_F32 + pick(&r, 2) : pick(&r, 3));
        arr_make(&a[k], &r, t, ndim, shape, 0, balanced ? NULL : counts, true);
        blocks[k] = a[k].shard;
    }
    /* a replicated operand over the trailing axes (extent 1 on the sharded one) */
    arr rep;
    int64_t rshape[3] = {1, shape[1], shape[2]};
    arr_make(&rep, &r, LF_F64, ndim, rshape, -1, NULL, false);
    blocks[nin] = rep.shard;
    for (int k = 0; k <= nin; k++) {
        arr *x = k < nin ? &a[k] : &rep;
        int64_t n = numel(x->ndim, x->shape);
        wholes1[k] = lf_buffer_new(cpu1, x->t, x->ndim, x->shape);
        wholes2[k] = lf_buffer_new(ref1, x->t, x->ndim, x->shape);
        lf_buffer_write(wholes1[k], x->global, (size_t)n * lf_dtype_size(x->t));
        lf_buffer_write(wholes2[k], x->global, (size_t)n * lf_dtype_size(x->t));
    }
    uint64_t gseed = next(&r);
    lf_graph *gm = lf_graph_new(mctx), *g1 = lf_graph_new(cpu1), *g2 = lf_graph_new(ref1);
    built Bm = build(gm, gseed, nin + 1, blocks, ndim, nonempty);
    built B1 = build(g1, gseed, nin + 1, wholes1, ndim, nonempty);
    built B2 = build(g2, gseed, nin + 1, wholes2, ndim, nonempty);
    if (!Bm.out || !B1.out || !B2.out) {
        /* a builder refused (a dtype rule): the same everywhere; nothing to compare */
        CHECK(!Bm.out && !B1.out && !B2.out, "graph %" PRIu64 ": built on some evaluators only", seed);
        refused_by_builder++;
        goto done;
    }
    bool cross = Bm.final == 1 || Bm.final == 3;
    lf_node *om = Bm.out;
    /* the output: sharded like the inputs unless the sharded axis was reduced */
    lf_buffer *dst;
    bool sharded_out = Bm.final != 1;
    const int64_t *os = node_shape(B1.out);
    int ond = lf_node_ndim(B1.out);
    if (sharded_out) dst = lf_mpi_buffer_new_sharded(mctx, lf_node_dtype(om), ond, os, 0, balanced ? NULL : counts);
    else dst = lf_buffer_new(mctx, lf_node_dtype(om), ond, os);
    CHECK(dst, "graph %" PRIu64 ": output buffer: %s", seed, lf_errmsg(mctx));
    lf_status st = lf_mpi_eval(gm, 1, &om, &dst);
    CHECK(st == LF_OK, "graph %" PRIu64 ": lf_mpi_eval: %s", seed, lf_errmsg(mctx));
    if (st == LF_OK) {
        void *want_ref = eval_one(ref1, g2, B2.out), *want_cpu = eval_one(cpu1, g1, B1.out);
        arr w = {.t = lf_node_dtype(om), .ndim = ond, .axis = 0, .global = NULL};
        memcpy(w.shape, os, (size_t)ond * sizeof *os);
        int64_t start = 0, count = 1, n = numel(ond, os);
        if (sharded_out) lf_mpi_buffer_block(mctx, dst, NULL, &start, &count, NULL);
        int64_t mine = sharded_out ? (os[0] ? n / os[0] * count : 0) : n;
        size_t es = lf_dtype_size(w.t);
        void *got = malloc((size_t)(mine ? mine : 1) * es), *exp_cpu = malloc((size_t)(mine ? mine : 1) * es),
             *exp_ref = malloc((size_t)(mine ? mine : 1) * es);
        lf_buffer_read(dst, got, (size_t)mine * es);
        if (sharded_out) {
            w.global = want_cpu, block_of(&w, start, count, exp_cpu);
            w.global = want_ref, block_of(&w, start, count, exp_ref);
        } else {
            memcpy(exp_cpu, want_cpu, (size_t)mine * es);
            memcpy(exp_ref, want_ref, (size_t)mine * es);
        }
        int64_t at = -1;
        /* local results: the local backend's (CPU interpreter); across ranks:
           the reference's order, which every backend shares except for
           float reductions */
        const void *want = cross ? exp_ref : exp_cpu;
        CHECK(same_bits(w.t, got, want, mine, &at), "graph %" PRIu64 " (final %d, op %d, %s, blocks %s): element %" PRId64
              " differs from one process (%s)", seed, Bm.final, (int)Bm.op, lf_dtype_name(w.t), balanced ? "balanced" : "random",
              at, cross ? "reference" : "cpu");
        bool float_fold = Bm.final == 1 && (w.t == LF_F32 || w.t == LF_F64) &&
                          (Bm.op == LF_RED_SUM || Bm.op == LF_RED_PROD || Bm.op == LF_RED_MEAN);
        compared[Bm.final]++;
        float_folds += float_fold;
        if (cross && !float_fold)
            CHECK(same_bits(w.t, got, exp_cpu, mine, &at), "graph %" PRIu64 ": element %" PRId64
                  " differs from one process on the CPU", seed, at);
        free(got), free(exp_cpu), free(exp_ref), free(want_ref), free(want_cpu);
    }
    lf_mpi_buffer_free(mctx, dst);
done:
    lf_graph_free(gm), lf_graph_free(g1), lf_graph_free(g2);
    for (int k = 0; k <= nin; k++) lf_buffer_free(wholes1[k]), lf_buffer_free(wholes2[k]);
    for (int k = 0; k < nin; k++) arr_free(&a[k]);
    arr_free(&rep);
}

/* A long scan and sum: several LF_SCAN_BLOCK blocks, blocks cut anywhere. */
static void long_scan(void) {
    rng r = {99};
    int64_t n = 3 * LF_SCAN_BLOCK + 123, counts[64], left = n;
    for (int q = 0; q < size; q++) {
        counts[q] = q == size - 1 ? left : (int64_t)pick(&r, (int)left / 2 + 1);
        left -= counts[q];
    }
    arr x;
    arr_make(&x, &r, LF_F32, 1, &n, 0, counts, false);
    lf_buffer *whole = lf_buffer_new(cpu1, LF_F32, 1, &n);
    lf_buffer_write(whole, x.global, (size_t)n * 4);
    lf_graph *gm = lf_graph_new(mctx), *g1 = lf_graph_new(cpu1);
    lf_node *sm = lf_scan(gm, LF_RED_SUM, lf_mul(gm, lf_input(gm, x.shard), lf_input(gm, x.shard)), 0, false);
    lf_node *s1 = lf_scan(g1, LF_RED_SUM, lf_mul(g1, lf_input(g1, whole), lf_input(g1, whole)), 0, false);
    lf_buffer *dst = lf_mpi_buffer_new_sharded(mctx, LF_F32, 1, &n, 0, counts);
    CHECK(lf_mpi_eval(gm, 1, &sm, &dst) == LF_OK, "long scan: %s", lf_errmsg(mctx));
    float *want = eval_one(cpu1, g1, s1); /* scans: every backend has the reference's order */
    int64_t start, count, at = -1;
    lf_mpi_buffer_block(mctx, dst, NULL, &start, &count, NULL);
    float *got = malloc((size_t)(count ? count : 1) * 4);
    lf_buffer_read(dst, got, (size_t)count * 4);
    CHECK(same_bits(LF_F32, got, want + start, count, &at), "long scan: element %" PRId64 " of the block differs", at);
    free(got), free(want);
    /* integer and max scans of the same blocks (the parallel path: local
       kernel scan + offsets from the ranks before), values that wrap i32 */
    arr xi;
    arr_make(&xi, &r, LF_I32, 1, &n, 0, counts, false);
    lf_buffer *wi = lf_buffer_new(cpu1, LF_I32, 1, &n);
    lf_buffer_write(wi, xi.global, (size_t)n * 4);
    for (int k = 0; k < 3; k++) {
        lf_reduce_op op = k == 0 ? LF_RED_SUM : k == 1 ? LF_RED_MAX : LF_RED_PROD;
        lf_graph *hm = lf_graph_new(mctx), *h1 = lf_graph_new(cpu1);
        lf_node *am = lf_scan_dtype(hm, op, lf_input(hm, xi.shard), 0, false, LF_I64);
        lf_node *a1 = lf_scan_dtype(h1, op, lf_input(h1, wi), 0, false, LF_I64);
        lf_dtype t = lf_node_dtype(am);
        lf_buffer *di = lf_mpi_buffer_new_sharded(mctx, t, 1, &n, 0, counts);
        CHECK(lf_mpi_eval(hm, 1, &am, &di) == LF_OK, "long int scan %d: %s", k, lf_errmsg(mctx));
        char *wv = eval_one(cpu1, h1, a1), *gv = malloc((size_t)(count ? count : 1) * lf_dtype_size(t));
        lf_buffer_read(di, gv, (size_t)count * lf_dtype_size(t));
        CHECK(same_bits(t, gv, wv + (size_t)start * lf_dtype_size(t), count, &at), "long int scan %d: element %" PRId64
              " of the block differs", k, at);
        free(gv), free(wv);
        lf_mpi_buffer_free(mctx, di);
        lf_graph_free(hm), lf_graph_free(h1);
    }
    lf_buffer_free(wi);
    arr_free(&xi);
    lf_mpi_buffer_free(mctx, dst);
    lf_graph_free(gm), lf_graph_free(g1);
    lf_buffer_free(whole);
    arr_free(&x);
}

/* Float sums and products over the sharded axis of many values of wide
 * magnitude (where regrouping the sum would change its bits): the relay
 * must give the reference's sequential order exactly. */
static void long_float_folds(void) {
    rng r = {123};
    int64_t n = 5000, counts[64], left = n;
    for (int q = 0; q < size; q++) {
        counts[q] = q == size - 1 ? left : 1 + (int64_t)pick(&r, (int)left / 2);
        left -= counts[q];
    }
    arr x;
    arr_make(&x, &r, LF_F64, 1, &n, 0, counts, false);
    for (int64_t i = 0; i < n; i++) /* wide magnitudes, both signs */
        ((double *)x.global)[i] = (unit(&r) - 0.5) * pow(10.0, pick(&r, 17) - 8);
    int64_t start, count;
    lf_mpi_buffer_block(mctx, x.shard, NULL, &start, &count, NULL);
    lf_buffer_write(x.shard, (double *)x.global + start, (size_t)count * 8);
    lf_buffer *whole = lf_buffer_new(ref1, LF_F64, 1, &n);
    lf_buffer_write(whole, x.global, (size_t)n * 8);
    static const lf_reduce_op ops[] = {LF_RED_SUM, LF_RED_MEAN, LF_RED_PROD};
    for (int k = 0; k < 3; k++) {
        lf_graph *gm = lf_graph_new(mctx), *g1 = lf_graph_new(ref1);
        lf_node *xm = lf_input(gm, x.shard), *x1 = lf_input(g1, whole);
        if (ops[k] == LF_RED_PROD) /* values near 1 */
            xm = lf_add(gm, lf_mul(gm, xm, lf_const(gm, LF_F64, 1e-9)), lf_const(gm, LF_F64, 1)),
            x1 = lf_add(g1, lf_mul(g1, x1, lf_const(g1, LF_F64, 1e-9)), lf_const(g1, LF_F64, 1));
        lf_node *sm = lf_reduce(gm, ops[k], xm, 0, NULL, false), *s1 = lf_reduce(g1, ops[k], x1, 0, NULL, false);
        lf_buffer *dst = lf_buffer_new(mctx, LF_F64, 0, NULL);
        CHECK(lf_mpi_eval(gm, 1, &sm, &dst) == LF_OK, "long %s: %s", lf_reduce_op_name(ops[k]), lf_errmsg(mctx));
        double got, *want = eval_one(ref1, g1, s1);
        lf_buffer_read(dst, &got, 8);
        CHECK(!memcmp(&got, want, 8), "long %s: %.17g, one process %.17g", lf_reduce_op_name(ops[k]), got, *want);
        free(want);
        lf_buffer_free(dst);
        lf_graph_free(gm), lf_graph_free(g1);
    }
    lf_buffer_free(whole);
    arr_free(&x);
}

/* Messages of every rank equal: each compares its own with rank 0's. */
static void same_message_everywhere(const char *what) {
    char mine[512], root[512];
    snprintf(mine, sizeof mine, "%s", lf_errmsg(mctx));
    memcpy(root, mine, sizeof root);
    MPI_Bcast(root, (int)sizeof root, MPI_CHAR, 0, MPI_COMM_WORLD);
    CHECK(!strcmp(mine, root), "%s: rank 0 says \"%s\", this rank \"%s\"", what, root, mine);
}

/* lf_take of a replicated table by sharded indices: correct when the
 * indices are good; a bad index in the last non-empty rank's block fails
 * every rank with LF_ERR_INDEX and one message, outputs untouched. */
static void take_and_collective_errors(void) {
    rng r = {5};
    int64_t V = 7, D = 3, n = 2 * size + 1;
    int64_t tshape[2] = {V, D};
    arr table;
    arr_make(&table, &r, LF_F32, 2, tshape, -1, NULL, true);
    arr idx = {.t = LF_I64, .ndim = 1, .shape = {n}, .axis = 0};
    idx.global = malloc((size_t)n * 8);
    for (int64_t i = 0; i < n; i++) ((int64_t *)idx.global)[i] = (int64_t)pick(&r, (int)(2 * V)) - V; /* negatives count from the end */
    idx.shard = lf_mpi_buffer_new_sharded(mctx, LF_I64, 1, &n, 0, NULL);
    int64_t start, count;
    lf_mpi_buffer_block(mctx, idx.shard, NULL, &start, &count, NULL);
    lf_buffer_write(idx.shard, (int64_t *)idx.global + start, (size_t)count * 8);
    int64_t oshape[2] = {n, D};
    lf_buffer *dst = lf_mpi_buffer_new_sharded(mctx, LF_F32, 2, oshape, 0, NULL);
    lf_graph *gm = lf_graph_new(mctx);
    lf_node *tm = lf_mul(gm, lf_take(gm, lf_input(gm, table.shard), 0, lf_input(gm, idx.shard)), lf_const(gm, LF_F32, 2));
    CHECK(lf_mpi_eval(gm, 1, &tm, &dst) == LF_OK, "take: %s", lf_errmsg(mctx));
    lf_buffer *tw = lf_buffer_new(cpu1, LF_F32, 2, tshape), *iw = lf_buffer_new(cpu1, LF_I64, 1, &n);
    lf_buffer_write(tw, table.global, (size_t)(V * D) * 4);
    lf_buffer_write(iw, idx.global, (size_t)n * 8);
    lf_graph *g1 = lf_graph_new(cpu1);
    lf_node *t1 = lf_mul(g1, lf_take(g1, lf_input(g1, tw), 0, lf_input(g1, iw)), lf_const(g1, LF_F32, 2));
    float *want = eval_one(cpu1, g1, t1), *got = malloc((size_t)(count * D > 0 ? count * D : 1) * 4);
    lf_buffer_read(dst, got, (size_t)(count * D) * 4);
    int64_t at = -1;
    CHECK(same_bits(LF_F32, got, want + start * D, count * D, &at), "take: element %" PRId64 " differs", at);

    /* a bad index in the last rank's block only (n >= size: it is not empty) */
    float *sentinel = malloc((size_t)(count * D > 0 ? count * D : 1) * 4);
    for (int64_t i = 0; i < count * D; i++) sentinel[i] = -12345.0f;
    lf_buffer_write(dst, sentinel, (size_t)(count * D) * 4);
    if (rank == size - 1) {
        int64_t bad = V + 3;
        lf_buffer_write(idx.shard, (int64_t *)idx.global + start, (size_t)count * 8);
        int64_t *blk = malloc((size_t)count * 8);
        memcpy(blk, (int64_t *)idx.global + start, (size_t)count * 8);
        blk[count - 1] = bad;
        lf_buffer_write(idx.shard, blk, (size_t)count * 8);
        free(blk);
    }
    lf_status st = lf_mpi_eval(gm, 1, &tm, &dst);
    CHECK(st == LF_ERR_INDEX, "bad index: status %s, message %s", lf_status_name(st), lf_errmsg(mctx));
    char want_prefix[32];
    snprintf(want_prefix, sizeof want_prefix, "rank %d: ", size - 1);
    CHECK(!strncmp(lf_errmsg(mctx), want_prefix, strlen(want_prefix)), "bad index: message \"%s\"", lf_errmsg(mctx));
    same_message_everywhere("bad index");
    lf_buffer_read(dst, got, (size_t)(count * D) * 4);
    CHECK(!memcmp(got, sentinel, (size_t)(count * D) * 4), "bad index: an output changed");

    /* unsupported: a scatter into a sharded dst, and a node after a cross reduction */
    lf_graph *gu = lf_graph_new(mctx);
    lf_node *xs = lf_input(gu, idx.shard);
    int64_t one = 1;
    lf_node *so = lf_scatter(gu, LF_SCATTER_ADD, xs, 0, lf_fill(gu, LF_I64, 0, 1, &one), lf_const(gu, LF_I64, 1));
    lf_buffer *sd = lf_mpi_buffer_new_sharded(mctx, LF_I64, 1, &n, 0, NULL);
    st = lf_mpi_eval(gu, 1, &so, &sd);
    CHECK(st == LF_ERR_BACKEND && strstr(lf_errmsg(mctx), "sharded array"), "scatter into sharded: %s %s",
          lf_status_name(st), lf_errmsg(mctx));
    same_message_everywhere("scatter into a sharded array");
    /* a top-k (k < the block) into a sharded buffer: refused, not a sort */
    lf_node *tk = lf_topk(gu, xs, 1, 0, true); /* every block has 2 or 3 rows (n = 2 size + 1) */
    st = lf_mpi_eval(gu, 1, &tk, &sd);
    CHECK(st == LF_ERR_INVALID && strstr(lf_errmsg(mctx), "replicated buffer"), "top-k into a sharded buffer: %s %s",
          lf_status_name(st), lf_errmsg(mctx));
    same_message_everywhere("top-k into a sharded buffer");
    lf_node *after = lf_sub(gu, xs, lf_reduce(gu, LF_RED_SUM, xs, 0, NULL, false));
    st = lf_mpi_eval(gu, 1, &after, &sd);
    CHECK(st == LF_ERR_BACKEND && strstr(lf_errmsg(mctx), "across ranks"), "after: %s %s", lf_status_name(st),
          lf_errmsg(mctx));
    /* a replicated buffer for a sharded output */
    lf_buffer *rep = lf_buffer_new(mctx, LF_I64, 1, (int64_t[]){count});
    lf_node *neg = lf_neg(gu, xs);
    st = lf_mpi_eval(gu, 1, &neg, &rep);
    CHECK(st == LF_ERR_INVALID, "replicated dst: %s %s", lf_status_name(st), lf_errmsg(mctx));
    same_message_everywhere("replicated dst");
    /* a view of sharded data */
    lf_node *rev = lf_slice(gu, xs, 0, LF_NONE, LF_NONE, -1);
    st = lf_mpi_eval(gu, 1, &rev, &sd);
    CHECK(st == LF_ERR_BACKEND && strstr(lf_errmsg(mctx), "view"), "view: %s %s", lf_status_name(st), lf_errmsg(mctx));

    lf_buffer_free(rep);
    lf_mpi_buffer_free(mctx, sd);
    lf_graph_free(gu);
    free(sentinel), free(got), free(want);
    lf_graph_free(gm), lf_graph_free(g1);
    lf_buffer_free(tw), lf_buffer_free(iw);
    lf_mpi_buffer_free(mctx, dst);
    arr_free(&table);
    arr_free(&idx);
}

/* Random blocks of n rows over the ranks, each at least `least` rows (the
 * same on every rank: r is replayed identically). */
static void random_counts(rng *r, int64_t n, int64_t least, int64_t *counts) {
    int64_t left = n - least * size;
    for (int q = 0; q < size; q++) {
        int64_t c = q == size - 1 ? left : (int64_t)pick(r, (int)left + 1);
        counts[q] = least + c;
        left -= c;
    }
}

/* Values with many ties across blocks: a few integers, or floats from
 * {-0.0, +0.0, 1, -1, NaN, +-inf}. */
static void fill_ties(rng *r, lf_dtype t, int64_t n, void *p) {
    static const double fv[] = {-0.0, 0.0, 1, -1, NAN, INFINITY, -INFINITY, 2.5};
    for (int64_t i = 0; i < n; i++) {
        int k = pick(r, 8);
        switch (t) {
        case LF_I32: ((int32_t *)p)[i] = k - 4; break;
        case LF_I64: ((int64_t *)p)[i] = k % 2 ? INT64_MIN + k : INT64_MAX - k; break;
        case LF_F64: ((double *)p)[i] = fv[k]; break;
        default: ((float *)p)[i] = (float)fv[k]; break;
        }
    }
}

/* lf_topk and lf_argtopk along the sharded axis (replicated results): the
 * same values and global positions as one process, ties (equal values, -0.0
 * and +0.0, NaNs) resolved by the lower global position across blocks;
 * rows of a 2-d array batched; a sort along the other axis stays local;
 * different k on different ranks fails collectively. */
static void topk_sharded(void) {
    rng r = {4242};
    static const lf_dtype dts[] = {LF_F32, LF_I32, LF_F64, LF_I64};
    for (int c = 0; c < 8; c++) {
        lf_dtype t = dts[c % 4];
        int ndim = 1 + c / 4;
        /* c == 3: empty blocks allowed, k = 0; c >= 6: long blocks, k up to 30 (the heap's every path) */
        int64_t least = c == 3 ? 0 : c >= 6 ? 10 + pick(&r, 20) : (c == 2 ? 2 : 1) + pick(&r, 3);
        int64_t n = least * size + pick(&r, c >= 6 ? 200 : 30), shape[2] = {n, 3}, counts[64];
        random_counts(&r, n, least, counts);
        int64_t k = least == 0 ? 0 : 1 + pick(&r, (int)least);
        arr x = {.t = t, .ndim = ndim, .shape = {n, 3}, .axis = 0};
        int64_t ne = numel(ndim, shape);
        x.global = malloc((size_t)(ne ? ne : 1) * lf_dtype_size(t));
        fill_ties(&r, t, ne, x.global);
        x.shard = lf_mpi_buffer_new_sharded(mctx, t, ndim, shape, 0, counts);
        int64_t start, count;
        lf_mpi_buffer_block(mctx, x.shard, NULL, &start, &count, NULL);
        size_t bb = (size_t)(count * ne / (n ? n : 1)) * lf_dtype_size(t);
        void *blk = malloc(bb ? bb : 1);
        block_of(&x, start, count, blk);
        lf_buffer_write(x.shard, blk, bb);
        free(blk);
        lf_buffer *whole = lf_buffer_new(cpu1, t, ndim, shape);
        lf_buffer_write(whole, x.global, (size_t)ne * lf_dtype_size(t));
        bool largest = c % 2 == 0;
        lf_graph *gm = lf_graph_new(mctx), *g1 = lf_graph_new(cpu1);
        lf_node *xm = lf_input(gm, x.shard), *x1 = lf_input(g1, whole);
        lf_node *om[3] = {lf_topk(gm, xm, k, 0, largest), lf_argtopk(gm, xm, k, 0, largest),
                          ndim > 1 ? lf_sort(gm, xm, 1, largest) : lf_neg(gm, xm)};
        lf_node *o1[3] = {lf_topk(g1, x1, k, 0, largest), lf_argtopk(g1, x1, k, 0, largest),
                          ndim > 1 ? lf_sort(g1, x1, 1, largest) : lf_neg(g1, x1)};
        int64_t kshape[2] = {k, 3};
        lf_buffer *dm[3] = {lf_buffer_new(mctx, t, ndim, kshape), lf_buffer_new(mctx, LF_I64, ndim, kshape),
                            lf_mpi_buffer_new_sharded(mctx, lf_node_dtype(om[2]), ndim, shape, 0, counts)};
        lf_status st = lf_mpi_eval(gm, 3, om, dm);
        CHECK(st == LF_OK, "topk %d: %s", c, lf_errmsg(mctx));
        for (int j = 0; j < 3 && st == LF_OK; j++) {
            lf_dtype ot = lf_node_dtype(o1[j]);
            size_t es = lf_dtype_size(ot);
            int64_t all = numel(ndim, node_shape(o1[j])), mine = j < 2 ? all : count * all / (n ? n : 1);
            char *want = eval_one(cpu1, g1, o1[j]), *got = malloc((size_t)(mine ? mine : 1) * es);
            lf_buffer_read(dm[j], got, (size_t)mine * es);
            int64_t at = -1, off = j < 2 ? 0 : start * all / (n ? n : 1);
            CHECK(same_bits(ot, got, want + (size_t)off * es, mine, &at),
                  "topk case %d (%s, n %lld, k %lld, %s) output %d: element %" PRId64 " differs from one process", c,
                  lf_dtype_name(t), (long long)n, (long long)k, largest ? "largest" : "smallest", j, at);
            free(want), free(got);
        }
        /* -0.0 and +0.0 tie: the bits must be the one-process entry's, not
           any equal value's (same_bits compares bytes) */
        if (c == 2 && size > 1 && k >= 1) {
            /* different k on different ranks: every rank fails the same way */
            lf_graph *gk = lf_graph_new(mctx);
            int64_t kr = rank == 0 ? 1 : (least >= 2 ? 2 : 1);
            if (least >= 2) {
                lf_node *tk = lf_topk(gk, lf_input(gk, x.shard), kr, 0, true);
                lf_buffer *dk = lf_buffer_new(mctx, t, ndim, (int64_t[]){kr, 3});
                st = lf_mpi_eval(gk, 1, &tk, &dk);
                CHECK(st == LF_ERR_INVALID && strstr(lf_errmsg(mctx), "different k"), "topk of different k: %s %s",
                      lf_status_name(st), lf_errmsg(mctx));
                same_message_everywhere("topk of different k");
                lf_buffer_free(dk);
            }
            lf_graph_free(gk);
        }
        for (int j = 0; j < 3; j++) lf_mpi_buffer_free(mctx, dm[j]);
        lf_graph_free(gm), lf_graph_free(g1);
        lf_buffer_free(whole);
        arr_free(&x);
    }
}

/* lf_sort and lf_argsort along the sharded axis (sharded outputs with the
 * input's blocks): the sample sort gives every rank its block of the
 * one-process sort, ties (equal values, -0.0 and +0.0, NaNs) in global
 * position order, rows of a 2-d array batched, uneven and empty blocks. */
static void sort_sharded(void) {
    rng r = {777};
    static const lf_dtype dts[] = {LF_F32, LF_I32, LF_F64, LF_I64, LF_BOOL};
    for (int c = 0; c < 10; c++) {
        lf_dtype t = dts[c % 5];
        int ndim = 1 + (c / 5), axis = 0;
        int64_t n = c == 4 ? pick(&r, 3) : pick(&r, 4) == 0 ? pick(&r, 6) : 10 + pick(&r, 300);
        int64_t shape[2] = {n, 1 + pick(&r, 3)}, counts[64];
        random_counts(&r, n, 0, counts);
        arr x = {.t = t, .ndim = ndim, .shape = {shape[0], shape[1]}, .axis = axis};
        int64_t ne = numel(ndim, shape);
        x.global = malloc((size_t)(ne ? ne : 1) * 8);
        if (t == LF_BOOL) fill(&r, t, ne, x.global, false);
        else if (c % 3) fill_ties(&r, t, ne, x.global);
        else fill(&r, t, ne, x.global, true);
        x.shard = lf_mpi_buffer_new_sharded(mctx, t, ndim, shape, axis, counts);
        int64_t start, count;
        lf_mpi_buffer_block(mctx, x.shard, NULL, &start, &count, NULL);
        int64_t per = n ? ne / n : 0;
        size_t es = lf_dtype_size(t);
        void *blk = malloc((size_t)(count * per) * es + 1);
        block_of(&x, start, count, blk);
        lf_buffer_write(x.shard, blk, (size_t)(count * per) * es);
        free(blk);
        lf_buffer *whole = lf_buffer_new(cpu1, t, ndim, shape);
        lf_buffer_write(whole, x.global, (size_t)ne * es);
        bool desc = c % 2;
        lf_graph *gm = lf_graph_new(mctx), *g1 = lf_graph_new(cpu1);
        lf_node *xm = lf_input(gm, x.shard), *x1 = lf_input(g1, whole);
        lf_node *om[2] = {t == LF_BOOL ? lf_sort(gm, xm, axis, desc) : lf_sort(gm, lf_neg(gm, xm), axis, desc),
                          lf_argsort(gm, xm, axis, desc)};
        lf_node *o1[2] = {t == LF_BOOL ? lf_sort(g1, x1, axis, desc) : lf_sort(g1, lf_neg(g1, x1), axis, desc),
                          lf_argsort(g1, x1, axis, desc)};
        lf_buffer *dm[2] = {lf_mpi_buffer_new_sharded(mctx, lf_node_dtype(om[0]), ndim, shape, axis, counts),
                            lf_mpi_buffer_new_sharded(mctx, LF_I64, ndim, shape, axis, counts)};
        lf_status st = lf_mpi_eval(gm, 2, om, dm);
        CHECK(st == LF_OK, "sort %d: %s", c, lf_errmsg(mctx));
        for (int j = 0; j < 2 && st == LF_OK; j++) {
            lf_dtype ot = lf_node_dtype(o1[j]);
            size_t oes = lf_dtype_size(ot);
            char *want = eval_one(cpu1, g1, o1[j]), *got = malloc((size_t)(count * per) * oes + 1);
            lf_buffer_read(dm[j], got, (size_t)(count * per) * oes);
            arr w = {.t = ot, .ndim = ndim, .shape = {shape[0], shape[1]}, .axis = axis, .global = want};
            char *exp = malloc((size_t)(count * per) * oes + 1);
            block_of(&w, start, count, exp);
            int64_t at = -1;
            CHECK(same_bits(ot, got, exp, count * per, &at),
                  "sort case %d (%s, shape [%lld,%lld] ndim %d, %s) output %d: element %" PRId64
                  " of the block differs from one process", c, lf_dtype_name(t), (long long)shape[0],
                  (long long)shape[1], ndim, desc ? "descending" : "ascending", j, at);
            free(want), free(got), free(exp);
        }
        for (int j = 0; j < 2; j++) lf_mpi_buffer_free(mctx, dm[j]);
        lf_graph_free(gm), lf_graph_free(g1);
        lf_buffer_free(whole);
        arr_free(&x);
    }
}

/* lf_take along axis 0 of a table sharded along axis 0, by indices that
 * cross blocks (sharded with other blocks, or replicated; i32 and i64;
 * negatives count from the end), and lf_gather of a 1-d sharded array: the
 * rows travel by MPI_Alltoallv and every rank's block equals one process's.
 * A bad index on one rank fails every rank with LF_ERR_INDEX, one message
 * naming the index's global position, and no output changes. */
static void take_sharded_table(void) {
    rng r = {31337};
    for (int c = 0; c < 6; c++) {
        int64_t V = pick(&r, 3) == 0 ? size - 1 + pick(&r, 2) : 5 + pick(&r, 40), D = 1 + pick(&r, 4);
        if (V < 1) V = 1;
        int64_t tc[64], ic[64];
        random_counts(&r, V, 0, tc); /* empty table blocks too */
        int64_t tshape[2] = {V, D};
        arr table = {.t = c % 2 ? LF_F64 : LF_F32, .ndim = c == 5 ? 1 : 2, .shape = {V, D}, .axis = 0};
        table.global = malloc((size_t)(V * D) * 8);
        fill(&r, table.t, V * D, table.global, true);
        table.shard = lf_mpi_buffer_new_sharded(mctx, table.t, table.ndim, tshape, 0, tc);
        int64_t ts, tn;
        lf_mpi_buffer_block(mctx, table.shard, NULL, &ts, &tn, NULL);
        size_t tes = lf_dtype_size(table.t), row = (size_t)(table.ndim == 2 ? D : 1) * tes;
        void *tb = malloc(tn * row + 1);
        block_of(&table, ts, tn, tb);
        lf_buffer_write(table.shard, tb, (size_t)tn * row);
        free(tb);
        /* indices: [N, 2] sharded along 0 (c even) or replicated [N, 2] */
        bool rep = c % 3 == 1;
        lf_dtype it = c % 2 ? LF_I32 : LF_I64;
        int64_t N = pick(&r, 4) == 0 ? pick(&r, 3) : 1 + pick(&r, 20), ishape[2] = {N, 2};
        random_counts(&r, N, 0, ic);
        arr idx = {.t = it, .ndim = 2, .shape = {N, 2}, .axis = rep ? -1 : 0};
        idx.global = malloc((size_t)(N * 2 + 1) * 8);
        for (int64_t i = 0; i < N * 2; i++) {
            int64_t v = (int64_t)pick(&r, (int)(2 * V)) - V;
            if (it == LF_I32) ((int32_t *)idx.global)[i] = (int32_t)v;
            else ((int64_t *)idx.global)[i] = v;
        }
        int64_t is = 0, in = N;
        if (rep) {
            idx.shard = lf_buffer_new(mctx, it, 2, ishape);
            lf_buffer_write(idx.shard, idx.global, (size_t)(N * 2) * lf_dtype_size(it));
        } else {
            idx.shard = lf_mpi_buffer_new_sharded(mctx, it, 2, ishape, 0, ic);
            lf_mpi_buffer_block(mctx, idx.shard, NULL, &is, &in, NULL);
            lf_buffer_write(idx.shard, (char *)idx.global + (size_t)(is * 2) * lf_dtype_size(it), (size_t)(in * 2) * lf_dtype_size(it));
        }
        lf_buffer *tw = lf_buffer_new(cpu1, table.t, table.ndim, tshape), *iw = lf_buffer_new(cpu1, it, 2, ishape);
        lf_buffer_write(tw, table.global, (size_t)(V * (table.ndim == 2 ? D : 1)) * tes);
        lf_buffer_write(iw, idx.global, (size_t)(N * 2) * lf_dtype_size(it));
        lf_graph *gm = lf_graph_new(mctx), *g1 = lf_graph_new(cpu1);
        lf_node *om = table.ndim == 1 ? lf_gather(gm, lf_input(gm, table.shard), 0, lf_input(gm, idx.shard))
                                      : lf_take(gm, lf_input(gm, table.shard), 0, lf_input(gm, idx.shard));
        lf_node *o1 = table.ndim == 1 ? lf_gather(g1, lf_input(g1, tw), 0, lf_input(g1, iw))
                                      : lf_take(g1, lf_input(g1, tw), 0, lf_input(g1, iw));
        int64_t oshape[3] = {N, 2, D}, per = table.ndim == 2 ? 2 * D : 2;
        lf_buffer *dst = rep ? lf_buffer_new(mctx, table.t, table.ndim + 1, oshape)
                             : lf_mpi_buffer_new_sharded(mctx, table.t, table.ndim + 1, oshape, 0, ic);
        lf_status st = lf_mpi_eval(gm, 1, &om, &dst);
        CHECK(st == LF_OK, "take %d: %s", c, lf_errmsg(mctx));
        char *want = eval_one(cpu1, g1, o1), *got = malloc((size_t)(in * per) * tes + 1);
        lf_buffer_read(dst, got, (size_t)(in * per) * tes);
        int64_t at = -1;
        CHECK(same_bits(table.t, got, want + (size_t)(is * per) * tes, in * per, &at),
              "take %d (V %lld, N %lld, %s): element %" PRId64 " differs from one process", c, (long long)V,
              (long long)N, rep ? "replicated indices" : "sharded indices", at);
        /* a bad index on the last rank that holds indices (or, replicated, on
           every rank): LF_ERR_INDEX everywhere, one message, outputs kept */
        int holder = size - 1;
        while (!rep && holder > 0 && ic[holder] == 0) holder--;
        if (N > 0) {
            memset(got, 0x7b, (size_t)(in * per) * tes);
            lf_buffer_write(dst, got, (size_t)(in * per) * tes);
            int64_t hstart = 0; /* the holder's first row */
            for (int q = 0; q < holder; q++) hstart += ic[q];
            int64_t bad_at = rep ? N - 1 : hstart + ic[holder] - 1; /* global row of the bad index */
            if (rep || rank == holder) {
                size_t ies = lf_dtype_size(it);
                char *ib = malloc((size_t)(in * 2) * ies + 1);
                memcpy(ib, (char *)idx.global + (size_t)(is * 2) * ies, (size_t)(in * 2) * ies);
                int64_t j = (bad_at - is) * 2 + 1;
                if (it == LF_I32) ((int32_t *)ib)[j] = (int32_t)(V + 7);
                else ((int64_t *)ib)[j] = V + 7;
                lf_buffer_write(idx.shard, ib, (size_t)(in * 2) * ies);
                free(ib);
            }
            st = lf_mpi_eval(gm, 1, &om, &dst);
            char want_msg[160];
            snprintf(want_msg, sizeof want_msg, "index %lld out of range for axis 0 of size %lld at position [%lld,1]",
                     (long long)(V + 7), (long long)V, (long long)bad_at);
            CHECK(st == LF_ERR_INDEX && strstr(lf_errmsg(mctx), want_msg), "take %d, bad index: %s \"%s\" (want \"%s\")",
                  c, lf_status_name(st), lf_errmsg(mctx), want_msg);
            same_message_everywhere("take, bad index");
            char *now = malloc((size_t)(in * per) * tes + 1);
            lf_buffer_read(dst, now, (size_t)(in * per) * tes);
            CHECK(!memcmp(now, got, (size_t)(in * per) * tes), "take %d, bad index: an output changed", c);
            free(now);
        }
        free(want), free(got);
        rep ? lf_buffer_free(dst) : lf_mpi_buffer_free(mctx, dst);
        lf_graph_free(gm), lf_graph_free(g1);
        lf_buffer_free(tw), lf_buffer_free(iw);
        if (rep) lf_buffer_free(idx.shard), idx.shard = NULL;
        arr_free(&table), arr_free(&idx);
    }
}

/* Scatter-add, bincount (counts and weights), SET, MAX and an i32 MIN (the
 * integer ops: partials allgathered) into a replicated 1-d dst, positions sharded along axis 0 with random blocks (empty ones
 * included), against one-process CPU and reference evals: bit for bit (the
 * relay keeps lazyfuse.h's LF_SCATTER_BLOCK order; n = 70001 puts a block
 * boundary inside some rank's block). Then a bad index on the last rank: the
 * same LF_ERR_INDEX on every rank naming the global position (one process's
 * message), outputs untouched; and each allocation of such an eval failed
 * in turn on the last rank. */
enum { SC_ADD, SC_BINCOUNT, SC_BINCOUNT_W, SC_SET, SC_MAX, SC_ADD_LARGE, SC_ADD_2D, SC_IMIN, SC_KINDS };
static lf_node *mk_scatter(lf_graph *g, int kind, lf_node *ix, lf_node *vv, int64_t nbins) {
    int64_t nb = nbins;
    switch (kind) {
    case SC_BINCOUNT: return lf_bincount(g, ix, NULL, nbins);
    case SC_BINCOUNT_W: return lf_bincount(g, ix, vv, nbins);
    case SC_SET: return lf_scatter(g, LF_SCATTER_SET, lf_fill(g, LF_F32, 0.5, 1, &nb), 0, ix, vv);
    case SC_MAX: return lf_scatter(g, LF_SCATTER_MAX, lf_fill(g, LF_F32, -1, 1, &nb), 0, ix, vv);
    case SC_IMIN: return lf_scatter(g, LF_SCATTER_MIN, lf_fill(g, LF_I32, 5, 1, &nb), 0, ix, vv);
    default: return lf_scatter(g, LF_SCATTER_ADD, lf_fill(g, LF_F32, 0.25, 1, &nb), 0, ix, vv);
    }
}

static int compared_scatters;
static void scatter_sharded(void) {
    rng r = {91};
    { /* replicated operands only: local, as on one process */
        int64_t iv[5] = {3, 0, 3, 1, 3}, cnt[4], four = 4, five = 5;
        lf_buffer *ib = lf_buffer_new(mctx, LF_I64, 1, &five), *cb = lf_buffer_new(mctx, LF_I64, 1, &four);
        lf_buffer_write(ib, iv, sizeof iv);
        lf_graph *g = lf_graph_new(mctx);
        lf_node *bc = lf_bincount(g, lf_input(g, ib), NULL, 4);
        lf_status st = lf_mpi_eval(g, 1, &bc, &cb);
        lf_buffer_read(cb, cnt, sizeof cnt);
        CHECK(st == LF_OK && cnt[0] == 1 && cnt[1] == 1 && cnt[2] == 0 && cnt[3] == 3, "replicated bincount: %s",
              lf_errmsg(mctx));
        lf_graph_free(g);
        lf_buffer_free(ib), lf_buffer_free(cb);
    }
    const int64_t ns[] = {0, 1, 7, 300, 70001};
    for (int ni = 0; ni < 5; ni++)
        for (int kind = 0; kind < SC_KINDS; kind++) {
            if (ns[ni] == 70001 && kind != SC_ADD && kind != SC_BINCOUNT_W) continue; /* the block boundary: floats */
            int64_t n = ns[ni], nbins = kind == SC_ADD_LARGE ? 5000 : 13, counts[64];
            random_counts(&r, n, 0, counts);
            int64_t ishape[2] = {n, 3};
            int ndim = kind == SC_ADD_2D ? 2 : 1;
            arr ix, vv;
            lf_dtype vt = kind == SC_BINCOUNT_W ? LF_F64 : kind == SC_IMIN ? LF_I32 : LF_F32;
            arr_make(&vv, &r, vt, ndim, ishape, 0, counts, false);
            arr_make(&ix, &r, LF_I64, ndim, ishape, 0, counts, false);
            bool nonneg = kind == SC_BINCOUNT || kind == SC_BINCOUNT_W;
            for (int64_t i = 0; i < numel(ndim, ishape); i++)
                ((int64_t *)ix.global)[i] = nonneg ? pick(&r, (int)nbins) : pick(&r, (int)(2 * nbins)) - nbins;
            int64_t start, count;
            lf_mpi_buffer_block(mctx, ix.shard, NULL, &start, &count, NULL);
            int64_t inner = ndim == 2 ? 3 : 1;
            lf_buffer_write(ix.shard, (int64_t *)ix.global + start * inner, (size_t)(count * inner) * 8);
            lf_graph *gm = lf_graph_new(mctx);
            lf_node *om = mk_scatter(gm, kind, lf_input(gm, ix.shard), lf_input(gm, vv.shard), nbins);
            lf_dtype ot = lf_node_dtype(om);
            size_t ob = (size_t)nbins * lf_dtype_size(ot);
            lf_buffer *dst = lf_buffer_new(mctx, ot, 1, &nbins);
            lf_status st = lf_mpi_eval(gm, 1, &om, &dst);
            CHECK(st == LF_OK, "scatter kind %d n %" PRId64 ": %s", kind, n, lf_errmsg(mctx));
            void *got = malloc(ob);
            lf_buffer_read(dst, got, ob);
            for (int c = 0; c < 2; c++) {
                lf_ctx *c1 = c ? ref1 : cpu1;
                lf_buffer *iw = lf_buffer_new(c1, LF_I64, ndim, ishape), *vw = lf_buffer_new(c1, vt, ndim, ishape);
                lf_buffer_write(iw, ix.global, (size_t)numel(ndim, ishape) * 8);
                lf_buffer_write(vw, vv.global, (size_t)numel(ndim, ishape) * lf_dtype_size(vt));
                lf_graph *g1 = lf_graph_new(c1);
                lf_node *o1 = mk_scatter(g1, kind, lf_input(g1, iw), lf_input(g1, vw), nbins);
                void *want = eval_one(c1, g1, o1);
                int64_t at = -1;
                CHECK(same_bits(ot, got, want, nbins, &at), "scatter kind %d n %" PRId64 " (%s): element %" PRId64 " differs",
                      kind, n, c ? "reference" : "cpu", at);
                if (c == 1 && n >= 7 && kind == SC_ADD) {
                    /* a bad index at the last global position (the last rank
                       holding rows): one process's message on every rank */
                    int64_t bad = nbins + 2, keep = ((int64_t *)ix.global)[n - 1];
                    ((int64_t *)ix.global)[n - 1] = bad;
                    lf_buffer_write(iw, ix.global, (size_t)n * 8);
                    lf_buffer *b1 = lf_buffer_new(c1, ot, 1, &nbins);
                    CHECK(lf_eval(g1, 1, &o1, &b1) == LF_ERR_INDEX, "one-process bad index");
                    char msg1[512];
                    snprintf(msg1, sizeof msg1, "%s", lf_errmsg(c1));
                    lf_buffer_free(b1);
                    lf_buffer_write(ix.shard, (int64_t *)ix.global + start, (size_t)count * 8);
                    float sentinel[13], after[13];
                    for (int j = 0; j < 13; j++) sentinel[j] = -7.0f;
                    lf_buffer_write(dst, sentinel, sizeof sentinel);
                    st = lf_mpi_eval(gm, 1, &om, &dst);
                    CHECK(st == LF_ERR_INDEX && strstr(lf_errmsg(mctx), msg1) && strstr(lf_errmsg(mctx), "position [")
                          , "scatter bad index: %s \"%s\", one process \"%s\"", lf_status_name(st),
                          lf_errmsg(mctx), msg1);
                    same_message_everywhere("scatter bad index");
                    lf_buffer_read(dst, after, sizeof after);
                    CHECK(!memcmp(after, sentinel, sizeof after), "scatter bad index: the output changed");
                    /* a negative value in a bincount of the same indices */
                    lf_node *bc = lf_bincount(gm, lf_input(gm, ix.shard), NULL, nbins + 3);
                    for (int64_t i = 0; i < n - 1; i++) /* the indices wrapped: no negative one before */
                        if (((int64_t *)ix.global)[i] < 0) ((int64_t *)ix.global)[i] += nbins;
                    ((int64_t *)ix.global)[n - 1] = -2;
                    lf_buffer_write(ix.shard, (int64_t *)ix.global + start, (size_t)count * 8);
                    lf_buffer *bd = lf_buffer_new(mctx, LF_I64, 1, (int64_t[]){nbins + 3});
                    st = lf_mpi_eval(gm, 1, &bc, &bd);
                    char want_pos[64];
                    snprintf(want_pos, sizeof want_pos, "negative value -2 at position [%" PRId64 "]", n - 1);
                    CHECK(st == LF_ERR_INDEX && strstr(lf_errmsg(mctx), want_pos), "bincount negative: %s %s",
                          lf_status_name(st), lf_errmsg(mctx));
                    same_message_everywhere("bincount negative");
                    lf_buffer_free(bd);
                    ((int64_t *)ix.global)[n - 1] = keep;
                    lf_buffer_write(ix.shard, (int64_t *)ix.global + start, (size_t)count * 8);
                }
                free(want);
                lf_graph_free(g1);
                lf_buffer_free(iw), lf_buffer_free(vw);
            }
            if (n == 300 && (kind == SC_ADD || kind == SC_BINCOUNT)) { /* the relay and the allgather */
                /* each allocation of the eval failed in turn on the last rank */
                int failed = 0, ok_run = 0, k;
                void *sent = malloc(ob), *now = malloc(ob);
                memset(sent, 0x5a, ob);
                for (k = 1; k < 400 && ok_run < 20; k++) {
                    lf_buffer_write(dst, sent, ob);
                    if (rank == size - 1) lf_debug_fail_alloc(k, false);
                    st = lf_mpi_eval(gm, 1, &om, &dst);
                    lf_debug_fail_alloc(0, false);
                    int lo = (int)st, hi = (int)st;
                    MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
                    MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
                    CHECK(lo == hi, "scatter, failing allocation %d: the ranks returned different statuses", k);
                    lf_buffer_read(dst, now, ob);
                    if (st == LF_OK) {
                        ok_run++;
                        CHECK(!memcmp(now, got, ob), "scatter, failing allocation %d: a success differs", k);
                        continue;
                    }
                    ok_run = 0, failed++;
                    same_message_everywhere("scatter, failing allocation");
                    CHECK(!memcmp(now, sent, ob), "scatter, failing allocation %d (%s): the output changed", k,
                          lf_status_name(st));
                }
                CHECK(failed > 0 && ok_run >= 20, "scatter allocation failures: %d failed, %d successes at the end",
                      failed, ok_run);
                if (rank == 0)
                    printf("test_mpi: scatter kind %d, n %" PRId64 ": %d evals failed collectively on allocation "
                           "failures\n", kind, n, failed);
                free(sent), free(now);
            }
            free(got);
            lf_buffer_free(dst);
            lf_graph_free(gm);
            arr_free(&ix), arr_free(&vv);
            compared_scatters++;
        }
    if (rank == 0) printf("test_mpi: %d scatters and bincounts across ranks compared with one process\n", compared_scatters);
}

/* Allocation failures on one rank only (lf_debug_fail_alloc is per
 * process): the nth allocation from the eval's start fails on the last
 * rank, for n = 1, 2, ... until an eval succeeds. Every rank must return
 * the same status and message each time (no rank left waiting in a
 * collective: the suite's timeout would catch a hang), failed evals change
 * no output, and the eval that succeeds gives the right values. */
/* The same global values as src under another shape (the same axis-0
 * blocks: counts), e.g. X [n, d, 1] and X [n, 1, d] for X^T X. */
static void arr_reshaped(arr *a, const arr *src, int ndim, const int64_t *shape, const int64_t *counts) {
    rng unused = {0};
    arr_make(a, &unused, src->t, ndim, shape, 0, counts, false);
    size_t bytes = (size_t)numel(ndim, shape) * lf_dtype_size(src->t);
    memcpy(a->global, src->global, bytes);
    int64_t start, count;
    lf_mpi_buffer_block(mctx, a->shard, NULL, &start, &count, NULL);
    size_t row = bytes / (size_t)(shape[0] ? shape[0] : 1);
    lf_buffer_write(a->shard, (char *)a->global + (size_t)start * row, (size_t)count * row);
}

/* The one-process graph's result of a contraction, on the CPU and the
 * reference backend: lazyfuse.h defines one value for both. */
static void check_both(const char *what, lf_node *(*mk)(lf_graph *, lf_node *const *), int nin, arr *const *in,
                       const float *got, int64_t nout) {
    lf_ctx *ctxs[2] = {cpu1, ref1};
    for (int c = 0; c < 2; c++) {
        lf_graph *g1 = lf_graph_new(ctxs[c]);
        lf_buffer *wb[4];
        lf_node *x1[4];
        for (int k = 0; k < nin; k++) {
            wb[k] = lf_buffer_new(ctxs[c], in[k]->t, in[k]->ndim, in[k]->shape);
            lf_buffer_write(wb[k], in[k]->global, (size_t)numel(in[k]->ndim, in[k]->shape) * lf_dtype_size(in[k]->t));
            x1[k] = lf_input(g1, wb[k]);
        }
        float *want = eval_one(ctxs[c], g1, mk(g1, x1));
        int64_t where;
        CHECK(same_bits(LF_F32, got, want, nout, &where), "%s: element %lld: %.9g, one process (%s) %.9g", what,
              (long long)where, got[where], c ? "reference" : "cpu", want[where]);
        free(want);
        for (int k = 0; k < nin; k++) lf_buffer_free(wb[k]);
        lf_graph_free(g1);
    }
}

static lf_node *mk_xtx(lf_graph *g, lf_node *const *x) { /* X^T X: sum(X[:, :, None] * X[:, None, :], 0) */
    return lf_reduce(g, LF_RED_SUM, lf_mul(g, x[0], x[1]), 1, (int[]){0}, false);
}
static lf_node *mk_xtv(lf_graph *g, lf_node *const *x) { /* X^T v with v [n, 1], through an fn (x + 1) * v */
    return lf_reduce(g, LF_RED_SUM, lf_mul(g, lf_add(g, x[0], lf_const(g, LF_F32, 1)), x[1]), 1, (int[]){0}, false);
}
static lf_node *mk_xc(lf_graph *g, lf_node *const *x) { /* X [n, d, 1] times a replicated w [1, 1, p] and a constant */
    lf_node *c = lf_mul(g, x[1], lf_const(g, LF_F32, 0.5));
    return lf_reduce(g, LF_RED_SUM, lf_mul(g, x[0], c), 1, (int[]){0}, false);
}
static lf_node *mk_xw(lf_graph *g, lf_node *const *x) { /* X W: the kept axis is sharded (local) */
    return lf_reduce(g, LF_RED_SUM, lf_mul(g, x[0], x[1]), 1, (int[]){1}, false);
}

/* Contractions over the sharded axis (a relay of graph_contract_acc: X^T X,
 * X^T v through an fn, X times a replicated operand and a constant; each
 * is a contraction by lazyfuse.h's rule, checked once by a print in
 * cross_contract) at
 * lengths that put LF_CONTRACT_BLOCK boundaries inside blocks and across
 * them, random blocks (empty ones included), against one process on both
 * backends bit for bit; one whose kept axis is sharded (local); and the
 * collective failure of each allocation of such an eval on the last rank.
 * In compiled mode only n = 257 (the others would be ~40 more compiles). */
static void contract_sharded(void) {
    rng r = {4242};
    static const int64_t lens[] = {0, 1, 7, 255, 256, 257, 700};
    int64_t d = 3, p = 4, counts[64];
    /* compiled mode: one length (each shape is a C compile of its own) */
    for (int li = compile_mode == LF_COMPILE_REQUIRE ? 5 : 0; li < (int)(sizeof lens / sizeof *lens); li++) {
        int64_t n = lens[li];
        random_counts(&r, n, 0, counts);
        arr x, xa, xb, v, w;
        arr_make(&x, &r, LF_F32, 2, (int64_t[]){n, d}, 0, counts, false);
        arr_reshaped(&xa, &x, 3, (int64_t[]){n, d, 1}, counts);
        arr_reshaped(&xb, &x, 3, (int64_t[]){n, 1, d}, counts);
        arr_make(&v, &r, LF_F32, 2, (int64_t[]){n, 1}, 0, counts, false);
        arr_make(&w, &r, LF_F32, 2, (int64_t[]){d, p}, -1, NULL, false);
        arr wr; /* replicated, extent 1 on the sharded axis */
        arr_make(&wr, &r, LF_F32, 3, (int64_t[]){1, 1, p}, -1, NULL, false);
        struct {
            const char *what;
            lf_node *(*mk)(lf_graph *, lf_node *const *);
            arr *in[2];
        } cases[4] = {{"X^T X", mk_xtx, {&xa, &xb}},
                      {"X^T v", mk_xtv, {&x, &v}},
                      {"X w/2", mk_xc, {&xa, &wr}},
                      {"X W", mk_xw, {&xa, &w}}};
        for (int c = 0; c < 4; c++) {
            lf_graph *gm = lf_graph_new(mctx);
            lf_node *in[2] = {lf_input(gm, cases[c].in[0]->shard), lf_input(gm, cases[c].in[1]->shard)};
            lf_node *o = cases[c].mk(gm, in);
            bool local = c == 3;
            int64_t gshape[2] = {local ? n : lf_node_dim(o, 0), local ? p : (lf_node_ndim(o) > 1 ? lf_node_dim(o, 1) : 1)};
            lf_buffer *dst = local ? lf_mpi_buffer_new_sharded(mctx, LF_F32, 2, gshape, 0, counts)
                                   : lf_buffer_new(mctx, LF_F32, lf_node_ndim(o), node_shape(o));
            lf_status st = lf_mpi_eval(gm, 1, &o, &dst);
            CHECK(st == LF_OK, "%s n=%lld: %s", cases[c].what, (long long)n, lf_errmsg(mctx));
            int64_t start = 0, count = 0, ne = local ? 0 : lf_node_ndim(o) > 1 ? gshape[0] * gshape[1] : gshape[0];
            if (local) lf_mpi_buffer_block(mctx, dst, NULL, &start, &count, NULL), ne = count * p;
            float *got = malloc((size_t)(ne ? ne : 1) * 4);
            lf_buffer_read(dst, got, (size_t)ne * 4);
            if (st == LF_OK && !local) {
                char what[64];
                snprintf(what, sizeof what, "%s n=%lld", cases[c].what, (long long)n);
                check_both(what, cases[c].mk, 2, cases[c].in, got, ne);
            } else if (st == LF_OK) { /* the block of the local backend's one-process result */
                lf_graph *g1 = lf_graph_new(cpu1);
                lf_buffer *b0 = lf_buffer_new(cpu1, LF_F32, 3, xa.shape), *b1 = lf_buffer_new(cpu1, LF_F32, 2, w.shape);
                lf_buffer_write(b0, xa.global, (size_t)(n * d) * 4), lf_buffer_write(b1, w.global, (size_t)(d * p) * 4);
                lf_node *i1[2] = {lf_input(g1, b0), lf_input(g1, b1)};
                float *want = eval_one(cpu1, g1, mk_xw(g1, i1));
                int64_t where;
                CHECK(same_bits(LF_F32, got, want + start * p, ne, &where), "X W n=%lld: element %lld differs",
                      (long long)n, (long long)where);
                free(want);
                lf_buffer_free(b0), lf_buffer_free(b1);
                lf_graph_free(g1);
            }
            free(got);
            lf_mpi_buffer_free(mctx, dst);
            lf_graph_free(gm);
        }
        /* allocation failures on the last rank: every rank fails alike, the
           output keeps its bytes */
        if (n == 257) {
            lf_graph *gm = lf_graph_new(mctx);
            lf_node *in[2] = {lf_input(gm, xa.shard), lf_input(gm, xb.shard)};
            lf_node *o = mk_xtx(gm, in);
            lf_buffer *dst = lf_buffer_new(mctx, LF_F32, 2, (int64_t[]){d, d});
            float keep[9], now[9];
            for (int i = 0; i < 9; i++) keep[i] = (float)-i;
            int k, failed = 0;
            for (k = 1; k < 200; k++) {
                lf_buffer_write(dst, keep, sizeof keep);
                if (rank == size - 1) lf_debug_fail_alloc(k, false);
                lf_status st = lf_mpi_eval(gm, 1, &o, &dst);
                lf_debug_fail_alloc(0, false);
                int lo = (int)st, hi = (int)st;
                MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
                MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
                CHECK(lo == hi, "contraction, allocation %d failed on the last rank: statuses %d..%d", k, lo, hi);
                if (st == LF_OK) break;
                failed++;
                same_message_everywhere("contraction, failed allocation");
                lf_buffer_read(dst, now, sizeof now);
                CHECK(!memcmp(now, keep, sizeof now), "contraction, allocation %d: output changed", k);
            }
            CHECK(k < 200 && failed >= 3, "contraction: %d allocation failures before success at %d", failed, k);
            lf_buffer_free(dst);
            lf_graph_free(gm);
        }
        arr_free(&x), arr_free(&xa), arr_free(&xb), arr_free(&v), arr_free(&w), arr_free(&wr);
    }
}

static void collective_alloc_failures(void) {
    rng r = {77};
    int64_t n = 3 * size + 2, shape[2] = {n, 3};
    arr x;
    arr_make(&x, &r, LF_F32, 2, shape, 0, NULL, false);
    lf_graph *g = lf_graph_new(mctx);
    lf_node *xi = lf_input(g, x.shard);
    lf_node *y = lf_add(g, lf_mul(g, xi, xi), lf_const(g, LF_F32, 1));
    /* a top-k and a take across ranks too (their Alltoallv and allgather
       paths allocate after the first agreement) */
    int64_t iv[5] = {n - 1, 0, -1, 2, n / 2};
    lf_buffer *ib = lf_buffer_new(mctx, LF_I64, 1, (int64_t[]){5});
    lf_buffer_write(ib, iv, sizeof iv);
    lf_node *outs[6] = {y, lf_reduce(g, LF_RED_SUM, y, 1, (int[]){0}, false),
                        lf_scan(g, LF_RED_MAX, lf_cast(g, xi, LF_I64), 0, false), lf_argtopk(g, y, 2, 0, true),
                        lf_take(g, xi, 0, lf_input(g, ib)), lf_argsort(g, y, 0, true)};
    lf_buffer *dy = lf_mpi_buffer_new_sharded(mctx, LF_F32, 2, shape, 0, NULL);
    lf_buffer *ds = lf_buffer_new(mctx, LF_F32, 1, (int64_t[]){3});
    lf_buffer *dc = lf_mpi_buffer_new_sharded(mctx, LF_I64, 2, shape, 0, NULL);
    lf_buffer *dk = lf_buffer_new(mctx, LF_I64, 2, (int64_t[]){2, 3});
    lf_buffer *dt = lf_buffer_new(mctx, LF_F32, 2, (int64_t[]){5, 3});
    lf_buffer *da = lf_mpi_buffer_new_sharded(mctx, LF_I64, 2, shape, 0, NULL);
    lf_buffer *dsts[6] = {dy, ds, dc, dk, dt, da};
    int64_t sk[6] = {-7, -7, -7, -7, -7, -7}, gk[6];
    float st5[15], gt5[15];
    for (int i = 0; i < 15; i++) st5[i] = -9;
    int64_t start, count;
    lf_mpi_buffer_block(mctx, dy, NULL, &start, &count, NULL);
    size_t by = (size_t)(count * 3) * 4, bc = (size_t)(count * 3) * 8;
    char *sy = malloc(by + 1), *sc = malloc(bc + 1), *gy = malloc(by + 1), *gc = malloc(bc + 1);
    memset(sy, 0x5a, by), memset(sc, 0x5a, bc);
    float ss[3] = {-1, -2, -3}, gs[3];
    int failed = 0, k;
    for (k = 1; k < 400; k++) {
        lf_buffer_write(dy, sy, by), lf_buffer_write(dc, sc, bc), lf_buffer_write(ds, ss, sizeof ss);
        lf_buffer_write(dk, sk, sizeof sk), lf_buffer_write(dt, st5, sizeof st5);
        if (rank == size - 1) lf_debug_fail_alloc(k, false);
        lf_buffer_write(da, sc, bc);
        lf_status st = lf_mpi_eval(g, 6, outs, dsts);
        lf_debug_fail_alloc(0, false);
        int lo = (int)st, hi = (int)st;
        MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD); /* statuses, not values */
        MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        CHECK(lo == hi, "failing allocation %d: the ranks returned different statuses", k);
        if (st == LF_OK) break;
        failed++;
        same_message_everywhere("failing allocation");
        lf_buffer_read(dy, gy, by), lf_buffer_read(dc, gc, bc), lf_buffer_read(ds, gs, sizeof gs);
        lf_buffer_read(dk, gk, sizeof gk), lf_buffer_read(dt, gt5, sizeof gt5);
        bool a_kept = true;
        lf_buffer_read(da, gc, bc), a_kept = !memcmp(gc, sc, bc);
        lf_buffer_read(dc, gc, bc);
        CHECK(!memcmp(gy, sy, by) && !memcmp(gc, sc, bc) && !memcmp(gs, ss, sizeof ss) && !memcmp(gk, sk, sizeof sk) &&
                  !memcmp(gt5, st5, sizeof st5) && a_kept,
              "failing allocation %d (%s): an output changed", k, lf_status_name(st));
    }
    CHECK(k < 400 && failed > 0, "allocation failures: %d failed evals, stopped at %d", failed, k);
    if (rank == 0) printf("test_mpi: %d evals failed collectively on the last rank's allocation failures\n", failed);
    /* the eval that succeeded is right: compare with an eval without failures */
    lf_buffer_read(dy, gy, by), lf_buffer_read(dc, gc, bc), lf_buffer_read(ds, gs, sizeof gs);
    lf_buffer_read(dk, gk, sizeof gk), lf_buffer_read(dt, gt5, sizeof gt5);
    char *ga = malloc(bc + 1), *sa = malloc(bc + 1);
    lf_buffer_read(da, ga, bc);
    CHECK(lf_mpi_eval(g, 6, outs, dsts) == LF_OK, "eval after the failures: %s", lf_errmsg(mctx));
    lf_buffer_read(da, sa, bc);
    CHECK(!memcmp(ga, sa, bc), "the argsort that succeeded under failures differs from a plain one");
    free(ga), free(sa);
    lf_mpi_buffer_free(mctx, da);
    lf_buffer_read(dy, sy, by), lf_buffer_read(dc, sc, bc), lf_buffer_read(ds, ss, sizeof ss);
    lf_buffer_read(dk, sk, sizeof sk), lf_buffer_read(dt, st5, sizeof st5);
    CHECK(!memcmp(gy, sy, by) && !memcmp(gc, sc, bc) && !memcmp(gs, ss, sizeof ss) && !memcmp(gk, sk, sizeof sk) &&
              !memcmp(gt5, st5, sizeof st5),
          "the eval that succeeded under failures differs from a plain one");
    lf_buffer_free(dk), lf_buffer_free(dt), lf_buffer_free(ib);
    free(sy), free(sc), free(gy), free(gc);
    lf_mpi_buffer_free(mctx, dy), lf_mpi_buffer_free(mctx, dc), lf_buffer_free(ds);
    lf_graph_free(g);
    arr_free(&x);
}

/* The same for the exchanges of this part (top-k candidates, a take's
 * Alltoallv, the sample sort), each output alone in its own eval so that
 * its allocations are reached: failing the kth allocation on the last rank,
 * k = 1, 2, ..., past the first success (an allocation whose failure is
 * absorbed, a cache, may come before the last one) until 40 evals in a row
 * succeed; every failure collective with outputs unchanged, every success
 * equal to a plain eval. */
static void collective_alloc_failures_exchanges(void) {
    rng r = {78};
    int64_t n = 3 * size + 2, shape[2] = {n, 3};
    arr x;
    arr_make(&x, &r, LF_F32, 2, shape, 0, NULL, false);
    int64_t iv[5] = {n - 1, 0, -1, 2, n / 2};
    lf_buffer *ib = lf_buffer_new(mctx, LF_I64, 1, (int64_t[]){5});
    lf_buffer_write(ib, iv, sizeof iv);
    lf_graph *g = lf_graph_new(mctx);
    lf_node *xi = lf_input(g, x.shard);
    lf_node *outs[3] = {lf_argtopk(g, xi, 2, 0, true), lf_take(g, xi, 0, lf_input(g, ib)), lf_argsort(g, xi, 0, false)};
    int64_t start, count;
    lf_mpi_buffer_block(mctx, x.shard, NULL, &start, &count, NULL);
    lf_buffer *dsts[3] = {lf_buffer_new(mctx, LF_I64, 2, (int64_t[]){2, 3}), lf_buffer_new(mctx, LF_F32, 2, (int64_t[]){5, 3}),
                          lf_mpi_buffer_new_sharded(mctx, LF_I64, 2, shape, 0, NULL)};
    size_t bytes[3] = {48, 60, (size_t)(count * 3) * 8};
    int total = 0;
    for (int o = 0; o < 3; o++) {
        char *want = malloc(bytes[o] + 1), *sent = malloc(bytes[o] + 1), *got = malloc(bytes[o] + 1);
        CHECK(lf_mpi_eval(g, 1, &outs[o], &dsts[o]) == LF_OK, "exchange %d: %s", o, lf_errmsg(mctx));
        lf_buffer_read(dsts[o], want, bytes[o]);
        memset(sent, 0x6c, bytes[o]);
        int failed = 0, row = 0, k;
        for (k = 1; k < 300 && row < 40; k++) {
            lf_buffer_write(dsts[o], sent, bytes[o]);
            if (rank == size - 1) lf_debug_fail_alloc(k, false);
            lf_status st = lf_mpi_eval(g, 1, &outs[o], &dsts[o]);
            lf_debug_fail_alloc(0, false);
            int lo = (int)st, hi = (int)st;
            MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD); /* statuses, not values */
            MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
            CHECK(lo == hi, "exchange %d, failing allocation %d: the ranks returned different statuses", o, k);
            lf_buffer_read(dsts[o], got, bytes[o]);
            if (st == LF_OK) {
                row++;
                CHECK(!memcmp(got, want, bytes[o]), "exchange %d, failing allocation %d: succeeded with other values", o, k);
                continue;
            }
            row = 0, failed++;
            same_message_everywhere("exchange, failing allocation");
            CHECK(!memcmp(got, sent, bytes[o]), "exchange %d, failing allocation %d (%s): an output changed", o, k,
                  lf_status_name(st));
        }
        CHECK(row >= 40 && failed > 0, "exchange %d: %d failed evals, stopped at %d", o, failed, k);
        total += failed;
        free(want), free(sent), free(got);
    }
    if (rank == 0) printf("test_mpi: %d evals of top-k, take and sort failed collectively on allocation failures\n", total);
    lf_buffer_free(dsts[0]), lf_buffer_free(dsts[1]), lf_mpi_buffer_free(mctx, dsts[2]), lf_buffer_free(ib);
    lf_graph_free(g);
    arr_free(&x);
}

/* Arguments every rank must agree on; a mismatch fails on every rank. */
static void sharded_buffer_errors(void) {
    int64_t n = 10;
    lf_buffer *b = lf_mpi_buffer_new_sharded(mctx, LF_F32, 1, &n, 0, (int64_t[]){3, 3, 3, 3});
    CHECK(!b && lf_errmsg(mctx)[0], "counts that do not sum: made a buffer");
    int64_t mine = rank == 0 ? 10 : 11; /* rank 0 asks for another shape */
    b = lf_mpi_buffer_new_sharded(mctx, LF_F32, 1, &mine, 0, NULL);
    CHECK(size == 1 ? b != NULL : !b, "a shape that differs between ranks: %s", b ? "made" : lf_errmsg(mctx));
    lf_mpi_buffer_free(mctx, b);
    b = lf_mpi_buffer_new_sharded(mctx, LF_F32, 1, &n, 1, NULL);
    CHECK(!b && strstr(lf_errmsg(mctx), "axis"), "bad axis: %s", lf_errmsg(mctx));
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int graphs = argc > 1 ? atoi(argv[1]) : 150;
    size_t live0 = lf_debug_live_bytes();
    /* argv[2]: "cpu" (the interpreter, default), "compiled" (kernels compiled
       by the C compiler) or "reference" (the local backend of every rank and
       the one-process "CPU" side are the reference evaluator) */
    const char *mode = argc > 2 ? argv[2] : "cpu";
    lf_backend local = strcmp(mode, "reference") ? LF_BACKEND_CPU : LF_BACKEND_REFERENCE;
    if (!strcmp(mode, "compiled")) compile_mode = LF_COMPILE_REQUIRE;
    mctx = new_ctx(local, true);
    cpu1 = new_ctx(local, false);
    ref1 = new_ctx(LF_BACKEND_REFERENCE, false);
    if (!mctx || !cpu1 || !ref1) {
        fprintf(stderr, "rank %d: contexts: %s\n", rank, lf_errmsg(NULL));
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    CHECK(lf_mpi_rank(mctx) == rank && lf_mpi_size(mctx) == size, "rank/size");
    for (int i = 0; i < graphs; i++) random_graph((uint64_t)i);
    long_scan();
    long_float_folds();
    take_and_collective_errors();
    /* the exchanges (top-k, sort, take across ranks) run on the host, the
       same whatever the local kernels; their many dtypes and shapes would
       each be a C compile in "compiled" mode (about 50 compiles, a minute
       cold on this machine): there only their allocation-failure test runs */
    if (compile_mode != LF_COMPILE_REQUIRE) {
        topk_sharded();
        sort_sharded();
        take_sharded_table();
    }
    contract_sharded();
    if (compile_mode != LF_COMPILE_REQUIRE) scatter_sharded();
    sharded_buffer_errors();
    collective_alloc_failures();
    collective_alloc_failures_exchanges();
    /* the random graphs must have reached every kind they are meant to */
    for (int k = 0; k < 5 && graphs >= 100; k++) CHECK(compared[k] >= 5, "only %d graphs of final kind %d", compared[k], k);
    CHECK(graphs < 100 || float_folds >= 3, "only %d float folds across ranks", float_folds);
    lf_ctx_destroy_mpi(mctx);
    lf_ctx_destroy(cpu1);
    lf_ctx_destroy(ref1);
    /* lazyfuse and liblazyfuse-mpi hold nothing once the contexts are gone
       (the leak check of the sanitizer runs, where OpenMPI's own leaks keep
       LeakSanitizer off) */
    CHECK(lf_debug_live_bytes() == live0, "%zu bytes still held after the contexts were destroyed",
          lf_debug_live_bytes() - live0);
    int total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD); /* a count of failures */
    if (rank == 0)
        printf("test_mpi (%s): %d ranks, %d random graphs (compared: %d elementwise, %d reductions over the sharded axis "
               "(%d float sum/prod/mean), %d along another, %d scans along the sharded axis, %d along another; %d "
               "refused by a builder): %d failures\n",
               mode, size, graphs, compared[0], compared[1], float_folds, compared[2], compared[3], compared[4],
               refused_by_builder, total);
    MPI_Finalize();
    return total != 0;
}
