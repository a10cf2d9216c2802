/* tools/spca_mpi.c: lazyfuse-spca-mpi, lazyfuse-spca's sparse PCA (tools/spca.c,
 * spca.h) with the S samples sharded across MPI ranks (liblazyfuse-mpi).
 *
 * Every rank draws the same samples C [d, S] as the one-process program (the
 * lf_random node of spca_graph, evaluated alone: its bits do not depend on
 * how it is evaluated; random values meeting a sharded axis are not
 * supported by lf_mpi_eval, so each rank draws the whole d x S and keeps its
 * block of samples) and holds its block as Ct [S_r, 1, d] (samples along
 * axis 0, the balanced split). Then three lf_mpi_evals (a node that uses a
 * result computed across ranks needs a second graph, lazyfuse_mpi.h):
 *
 *   1. Cn = Ct / sqrt(sum(Ct*Ct, axis 2, keepdims))             [S_r, 1, d]
 *      A  = sum(Cn * Vd, axis 2)  (a contraction whose kept axis, the
 *           samples, is sharded: local)                          [S_r, p]
 *      vals, idx = lf_topk, lf_argtopk(A, k, axis 1)  (local)    [S_r, k]
 *      val = sqrt(sum(vals^2, axis 1))                           [S_r]
 *      best = argmax(val), vbest = max(val): over the sharded axis
 *           (an allgather of the ranks' partials, folded in rank order);
 *   2. top_v, top_i = lf_take(vals | idx, axis 0, [best]): a take of a table
 *      sharded along axis 0 (the row travels from the rank that holds it);
 *   3. opt_x = scatter SET of top_v / vbest at top_i into zeros(p), on
 *      replicated data (every rank computes it).
 *
 * Checks, on every rank: (a) the outputs of evals 1 and 2 bit for bit
 * against the same graphs evaluated by this process alone over all S samples
 * (lazyfuse_mpi.h's promise), and (b) best, val[best] and every element of
 * opt_x bit for bit against the one-process program's own graph (spca_graph,
 * as lazyfuse-spca evaluates it) on a plain context. (b) holds because the
 * contraction's value and the topk's order do not depend on the layout; the
 * two float sums (of d and of k squares) accumulate in double and round
 * once, so a different lane order could only change them when a double
 * rounding lands on a float tie: not seen; the check would say so.
 * Rank 0 prints the answer in lazyfuse-spca's words ("best sample ..., val
 * ..." and opt_x's nonzero entries), so the two programs' lines can be
 * compared, and the check.
 *
 * Usage: mpirun -np R lazyfuse-spca-mpi [--samples S] [--p P] [--d D] [--k K]
 *        [--seed N]   (defaults as lazyfuse-spca: 64000, 1000, 3, 10, 2014;
 *        S must be at least R: argmax and max need a sample on every rank).
 * The local backend of each rank is the CPU one, one thread.
 * Exit status: 0 when every rank's checks pass, 1 otherwise, 2 for a bad
 * command line.
 */
#include "lazyfuse_mpi.h"
#include "seed_examples.h"
#include "spca.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROG "lazyfuse-spca-mpi"

static int rank, size;

static bool parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out) {
    char *end;
    long long v = s ? strtoll(s, &end, 10) : 0;
    if (!s || !*s || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

typedef struct stage1 {
    lf_node *vals, *idx, *best, *vbest;
} stage1;

/* Eval 1 over Ct [S, 1, d] (a block or the whole) and Vd [p, d]. */
static stage1 build1(lf_graph *g, lf_node *Ct, lf_node *Vd, int64_t k) {
    lf_node *norm = lf_sqrt(g, lf_reduce(g, LF_RED_SUM, lf_mul(g, Ct, Ct), 1, (int[]){2}, true));
    lf_node *Cn = lf_div(g, Ct, norm);
    lf_node *A = lf_reduce(g, LF_RED_SUM, lf_mul(g, Cn, Vd), 1, (int[]){2}, false); /* [S, p] */
    stage1 s;
    s.vals = lf_topk(g, A, k, 1, true);
    s.idx = lf_argtopk(g, A, k, 1, true);
    lf_node *val = lf_sqrt(g, lf_reduce(g, LF_RED_SUM, lf_mul(g, s.vals, s.vals), 1, (int[]){1}, false));
    s.best = lf_reduce(g, LF_RED_ARGMAX, val, 0, NULL, false);
    s.vbest = lf_reduce(g, LF_RED_MAX, val, 0, NULL, false);
    return s;
}

/* Eval 3 on replicated data: top_v, top_i [1, k], vbest 0-d. */
static lf_node *build3(lf_graph *g, lf_node *top_v, lf_node *top_i, lf_node *vbest, int64_t k, int64_t p) {
    lf_node *tv = lf_reshape(g, top_v, 2, (int64_t[]){k, 1}), *ti = lf_reshape(g, top_i, 2, (int64_t[]){k, 1});
    lf_node *zeros = lf_fill(g, LF_F32, 0.0, 1, &p);
    return lf_scatter(g, LF_SCATTER_SET, zeros, 0, ti, lf_div(g, tv, vbest));
}

static int fails;
static void fail_if(bool bad, const char *fmt, const char *what, const char *err) {
    if (!bad) return;
    fails++;
    fprintf(stderr, PROG ": rank %d: ", rank);
    fprintf(stderr, fmt, what, err ? err : "");
    fputc('\n', stderr);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int64_t S = 64000, p = 1000, d = 3, k = 10, seed = 2014;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool ok = v && ((!strcmp(a, "--samples") && parse_i64(v, 1, INT64_C(1) << 32, &S)) ||
                        (!strcmp(a, "--p") && parse_i64(v, 1, INT64_C(1) << 24, &p)) ||
                        (!strcmp(a, "--d") && parse_i64(v, 1, 16, &d)) ||
                        (!strcmp(a, "--k") && parse_i64(v, 1, 1 << 20, &k)) ||
                        (!strcmp(a, "--seed") && parse_i64(v, 0, INT64_MAX, &seed)));
        if (!ok) {
            if (rank == 0)
                fprintf(stderr, "usage: " PROG " [--samples S] [--p P] [--d D] [--k K] [--seed N]\n");
            MPI_Finalize();
            return 2;
        }
        i++;
    }
    if (k > p || S < size) {
        if (rank == 0) fprintf(stderr, PROG ": needs k <= p and at least one sample per rank (S >= %d)\n", size);
        MPI_Finalize();
        return 2;
    }
    lf_ctx_options co;
    lf_ctx_options_init(&co);
    co.backend = LF_BACKEND_CPU;
    co.threads = 1;
    lf_ctx *m = lf_ctx_new_mpi(MPI_COMM_WORLD, &co), *one = lf_ctx_new(&co);
    if (!m || !one) {
        fprintf(stderr, PROG ": rank %d: contexts: %s\n", rank, lf_errmsg(NULL));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    float *Vd = malloc((size_t)(p * d) * 4), *C = malloc((size_t)(d * S) * 4), *Ct = malloc((size_t)(d * S) * 4);
    float *x1 = malloc((size_t)p * 4), *xm = malloc((size_t)p * 4);
    float *vals1 = malloc((size_t)(S * k) * 4), *valsm = malloc((size_t)(S * k) * 4);
    int64_t *idx1 = malloc((size_t)(S * k) * 8), *idxm = malloc((size_t)(S * k) * 8);
    if (!Vd || !C || !Ct || !x1 || !xm || !vals1 || !valsm || !idx1 || !idxm) {
        fprintf(stderr, PROG ": rank %d: out of memory\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    seed_fill_f32(Vd, p * d, -1, 1, SPCA_VD_SEED);

    /* the one-process program: spca_graph on a plain context, and its samples */
    lf_buffer *vb1 = lf_buffer_new(one, LF_F32, 2, (int64_t[]){p, d});
    lf_buffer *xb1 = lf_buffer_new(one, LF_F32, 1, &p), *cb1 = lf_buffer_new(one, LF_F32, 2, (int64_t[]){d, S});
    lf_buffer *bb1 = lf_buffer_new(one, LF_I64, 0, NULL), *valb1 = lf_buffer_new(one, LF_F32, 0, NULL);
    lf_graph *g1 = lf_graph_new(one);
    spca_nodes n1 = {0};
    lf_buffer_write(vb1, Vd, (size_t)(p * d) * 4);
    int64_t best1 = -1, bestm = -2;
    float val1 = 0, valm = 0;
    lf_status st = spca_graph(g1, lf_input(g1, vb1), S, k, (uint64_t)seed, &n1);
    if (st == LF_OK) st = lf_eval(g1, 3, (lf_node *[]){n1.opt_x, n1.best, n1.val}, (lf_buffer *[]){xb1, bb1, valb1});
    if (st == LF_OK) st = lf_eval(g1, 1, &n1.C, &cb1);
    fail_if(st != LF_OK, "the one-process program: %s%s", "", lf_errmsg(one));
    lf_buffer_read(xb1, x1, (size_t)p * 4), lf_buffer_read(bb1, &best1, 8), lf_buffer_read(valb1, &val1, 4);
    lf_buffer_read(cb1, C, (size_t)(d * S) * 4);
    for (int64_t s = 0; s < S; s++) /* C [d, S] -> Ct [S, 1, d] */
        for (int64_t j = 0; j < d; j++) Ct[s * d + j] = C[j * S + s];

    /* eval 1 over the rank's block of samples */
    int64_t ct_shape[3] = {S, 1, d}, vk_shape[2] = {S, k}, start = 0, count = 0;
    lf_buffer *ctb = lf_mpi_buffer_new_sharded(m, LF_F32, 3, ct_shape, 0, NULL);
    lf_buffer *vdb = lf_buffer_new(m, LF_F32, 2, (int64_t[]){p, d});
    lf_buffer *valsb = lf_mpi_buffer_new_sharded(m, LF_F32, 2, vk_shape, 0, NULL);
    lf_buffer *idxb = lf_mpi_buffer_new_sharded(m, LF_I64, 2, vk_shape, 0, NULL);
    lf_buffer *bestb = lf_buffer_new(m, LF_I64, 0, NULL), *vbestb = lf_buffer_new(m, LF_F32, 0, NULL);
    lf_buffer *bestb1 = lf_buffer_new(m, LF_I64, 1, (int64_t[]){1});
    lf_buffer *topvb = lf_buffer_new(m, LF_F32, 2, (int64_t[]){1, k}), *topib = lf_buffer_new(m, LF_I64, 2, (int64_t[]){1, k});
    lf_buffer *xbm = lf_buffer_new(m, LF_F32, 1, &p);
    if (!ctb || !vdb || !valsb || !idxb || !bestb || !vbestb || !bestb1 || !topvb || !topib || !xbm) {
        fprintf(stderr, PROG ": rank %d: buffers: %s\n", rank, lf_errmsg(m));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    lf_mpi_buffer_block(m, ctb, NULL, &start, &count, NULL);
    lf_buffer_write(ctb, Ct + start * d, (size_t)(count * d) * 4);
    lf_buffer_write(vdb, Vd, (size_t)(p * d) * 4);
    lf_graph *gm = lf_graph_new(m);
    stage1 s1 = build1(gm, lf_input(gm, ctb), lf_input(gm, vdb), k);
    st = lf_mpi_eval(gm, 4, (lf_node *[]){s1.vals, s1.idx, s1.best, s1.vbest},
                     (lf_buffer *[]){valsb, idxb, bestb, vbestb});
    fail_if(st != LF_OK, "eval 1: %s%s", "", lf_errmsg(m));
    /* eval 2: the best sample's row of vals and idx, from whichever rank holds it */
    lf_buffer_read(bestb, &bestm, 8);
    lf_buffer_write(bestb1, &bestm, 8);
    lf_graph *gm2 = lf_graph_new(m);
    lf_node *bi = lf_input(gm2, bestb1);
    lf_node *tv = lf_take(gm2, lf_input(gm2, valsb), 0, bi), *ti = lf_take(gm2, lf_input(gm2, idxb), 0, bi);
    if (st == LF_OK) st = lf_mpi_eval(gm2, 2, (lf_node *[]){tv, ti}, (lf_buffer *[]){topvb, topib});
    fail_if(st != LF_OK, "eval 2: %s%s", "", lf_errmsg(m));
    /* eval 3: opt_x, replicated */
    lf_graph *gm3 = lf_graph_new(m);
    lf_node *ox = build3(gm3, lf_input(gm3, topvb), lf_input(gm3, topib), lf_input(gm3, vbestb), k, p);
    if (st == LF_OK) st = lf_mpi_eval(gm3, 1, &ox, &xbm);
    fail_if(st != LF_OK, "eval 3: %s%s", "", lf_errmsg(m));
    lf_buffer_read(xbm, xm, (size_t)p * 4), lf_buffer_read(vbestb, &valm, 4);

    /* (a) evals 1 and 2 against the same graphs over all samples, one process */
    lf_buffer *ct1 = lf_buffer_new(one, LF_F32, 3, ct_shape), *vd1 = lf_buffer_new(one, LF_F32, 2, (int64_t[]){p, d});
    lf_buffer *va1 = lf_buffer_new(one, LF_F32, 2, vk_shape), *ix1 = lf_buffer_new(one, LF_I64, 2, vk_shape);
    lf_buffer *bs1 = lf_buffer_new(one, LF_I64, 0, NULL), *vbs1 = lf_buffer_new(one, LF_F32, 0, NULL);
    lf_buffer_write(ct1, Ct, (size_t)(S * d) * 4), lf_buffer_write(vd1, Vd, (size_t)(p * d) * 4);
    lf_graph *go = lf_graph_new(one);
    stage1 so = build1(go, lf_input(go, ct1), lf_input(go, vd1), k);
    lf_status so_st = lf_eval(go, 4, (lf_node *[]){so.vals, so.idx, so.best, so.vbest}, (lf_buffer *[]){va1, ix1, bs1, vbs1});
    fail_if(so_st != LF_OK, "one-process eval of the sharded graph: %s%s", "", lf_errmsg(one));
    int64_t bo = -3;
    float vo = 0;
    lf_buffer_read(va1, vals1, (size_t)(S * k) * 4), lf_buffer_read(ix1, idx1, (size_t)(S * k) * 8);
    lf_buffer_read(bs1, &bo, 8), lf_buffer_read(vbs1, &vo, 4);
    lf_buffer_read(valsb, valsm, (size_t)(count * k) * 4), lf_buffer_read(idxb, idxm, (size_t)(count * k) * 8);
    bool same_a = st == LF_OK && so_st == LF_OK && bo == bestm && !memcmp(&vo, &valm, 4) &&
                  !memcmp(valsm, vals1 + start * k, (size_t)(count * k) * 4) &&
                  !memcmp(idxm, idx1 + start * k, (size_t)(count * k) * 8);
    fail_if(!same_a, "%sthe sharded graph differs from its one-process eval%s", "", "");
    /* (b) the answer against the one-process program's */
    bool same_b = st == LF_OK && best1 == bestm && !memcmp(&val1, &valm, 4) && !memcmp(x1, xm, (size_t)p * 4);
    fail_if(!same_b, "%sthe answer differs from the one-process program's%s", "", "");

    int bad = fails, anybad = 0;
    MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD); /* a count of failures, not a value */
    if (rank == 0) {
        printf(PROG ": %d ranks (backend cpu, 1 thread each), p = %" PRId64 ", d = %" PRId64 ", S = %" PRId64
                    " samples, k = %" PRId64 ", seed %" PRId64 "\n",
               size, p, d, S, k, seed);
        printf("lazyfuse: best sample %" PRId64 ", val %.7g\n", bestm, (double)valm);
        printf("opt_x, its nonzero entries (index: value):");
        int shown = 0;
        for (int64_t i = 0; i < p && shown < 12; i++)
            if (xm[i] != 0) printf("%s %" PRId64 ": %.6f", shown++ ? "," : "", i, (double)xm[i]);
        printf("\n");
        printf("check on every rank, bit for bit: against the same graphs evaluated by one process, and against "
               "lazyfuse-spca's graph (best %" PRId64 ", val %.7g): %s\n",
               best1, (double)val1, anybad ? "MISMATCH" : "ok");
    }
    lf_graph_free(gm), lf_graph_free(gm2), lf_graph_free(gm3), lf_graph_free(go), lf_graph_free(g1);
    lf_ctx_destroy_mpi(m);
    lf_ctx_destroy(one);
    free(Vd), free(C), free(Ct), free(x1), free(xm), free(vals1), free(valsm), free(idx1), free(idxm);
    MPI_Finalize();
    return anybad ? 1 : 0;
}
