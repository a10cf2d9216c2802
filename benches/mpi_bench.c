/* benches/mpi_bench.c: lazyfuse-mpi-bench, strong and weak scaling of
 * liblazyfuse-mpi's primitives (issue 32, item 4).
 *
 * Run under mpirun at R ranks; for each workload, an lf_mpi_eval on the CPU
 * backend (one thread per rank, compiled kernels) timed --reps times after
 * one warm-up (which compiles), and rank 0 prints one row per workload:
 *   n          the global problem size (elements of the sharded axis)
 *   ms         median over reps of the slowest rank's lf_mpi_eval time
 *   comm_ms    median over reps of the slowest rank's time inside MPI calls
 *              (waiting for a slower rank included: on a loaded machine
 *              most of it is waiting)
 *   comm_B     bytes communicated per eval, all ranks together: what each
 *              rank addresses to OTHER ranks in the calls lf_mpi_eval makes
 *              (the payload named by the call: an allgather's part once per
 *              other rank, an alltoallv's parts for other ranks, a send's
 *              message, an allreduce's or bcast's buffer once per other
 *              rank), not the bytes of MPI's own algorithms on the wire
 *   comp_B     bytes computed per eval, all ranks together: the bytes of
 *              the local inputs read and outputs written
 * Counting is by the MPI profiling interface: this file defines the MPI
 * calls liblazyfuse-mpi makes and forwards them to PMPI_*, so the library
 * is measured unchanged.
 *
 * Workloads (f32 unless said): map (the gaussian pdf, elementwise), isum
 * (an i32 sum over the sharded axis: allgather of partials), fsum (an f32
 * sum over it: the ordered relay), take (rows of a sharded [V, 16] table by
 * random sharded indices that cross blocks), topk (k = 16 along the
 * sharded axis), sort (argsort along it: the sample sort).
 *   --mode strong: n fixed (--n); --mode weak: n = --n times the ranks.
 *
 * Usage: mpirun -np R lazyfuse-mpi-bench [--mode strong|weak] [--n N] [--reps K]
 * Not a test; its figures are measured by hand into benches/RESULTS.md.
 */
#include "lazyfuse_mpi.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ---- counting through the profiling interface ----------------------------- */

static int counting; /* only inside lf_mpi_eval */
static double comm_s, comm_bytes;

static int tsize(MPI_Datatype t) {
    int s = 0;
    PMPI_Type_size(t, &s);
    return s;
}
static int others(MPI_Comm c) {
    int p = 1;
    PMPI_Comm_size(c, &p);
    return p - 1;
}
#define TIMED(call, bytes)                         \
    do {                                           \
        double t0_ = now();                        \
        int rc_ = call;                            \
        if (counting) {                            \
            comm_s += now() - t0_;                 \
            comm_bytes += (bytes);                 \
        }                                          \
        return rc_;                                \
    } while (0)

int MPI_Allreduce(const void *s, void *r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c) {
    TIMED(PMPI_Allreduce(s, r, n, t, op, c), (double)n * tsize(t) * others(c));
}
int MPI_Bcast(void *b, int n, MPI_Datatype t, int root, MPI_Comm c) {
    int me;
    PMPI_Comm_rank(c, &me);
    TIMED(PMPI_Bcast(b, n, t, root, c), me == root ? (double)n * tsize(t) * others(c) : 0);
}
int MPI_Allgather(const void *s, int sn, MPI_Datatype st, void *r, int rn, MPI_Datatype rt, MPI_Comm c) {
    TIMED(PMPI_Allgather(s, sn, st, r, rn, rt, c), (double)sn * tsize(st) * others(c));
}
int MPI_Alltoall(const void *s, int sn, MPI_Datatype st, void *r, int rn, MPI_Datatype rt, MPI_Comm c) {
    TIMED(PMPI_Alltoall(s, sn, st, r, rn, rt, c), (double)sn * tsize(st) * others(c));
}
static double to_others(const int *sc, MPI_Datatype t, MPI_Comm c) {
    int me, p;
    PMPI_Comm_rank(c, &me);
    PMPI_Comm_size(c, &p);
    double b = 0;
    for (int q = 0; q < p; q++)
        if (q != me) b += (double)sc[q] * tsize(t);
    return b;
}
int MPI_Alltoallv(const void *s, const int *sc, const int *sd, MPI_Datatype st, void *r, const int *rc, const int *rd,
                  MPI_Datatype rt, MPI_Comm c) {
    TIMED(PMPI_Alltoallv(s, sc, sd, st, r, rc, rd, rt, c), to_others(sc, st, c));
}
int MPI_Send(const void *b, int n, MPI_Datatype t, int to, int tag, MPI_Comm c) {
    TIMED(PMPI_Send(b, n, t, to, tag, c), (double)n * tsize(t));
}
int MPI_Recv(void *b, int n, MPI_Datatype t, int from, int tag, MPI_Comm c, MPI_Status *st) {
    TIMED(PMPI_Recv(b, n, t, from, tag, c, st), 0);
}

/* ---- workloads -------------------------------------------------------------- */

static int rank, size;

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* One workload: fills its inputs, builds its graph, times it. */
static void run(lf_ctx *ctx, const char *name, int64_t n, int reps) {
    const int64_t D = 16, K = 16;
    uint64_t s = 7;
    lf_buffer *in[2] = {NULL, NULL}, *out = NULL;
    lf_graph *g = lf_graph_new(ctx);
    lf_node *o = NULL;
    int64_t start, count;
    bool take = !strcmp(name, "take");
    lf_dtype t = !strcmp(name, "isum") ? LF_I32 : LF_F32;
    int64_t tshape[2] = {n, D};
    in[0] = take ? lf_mpi_buffer_new_sharded(ctx, LF_F32, 2, tshape, 0, NULL)
                 : lf_mpi_buffer_new_sharded(ctx, t, 1, &n, 0, NULL);
    lf_mpi_buffer_block(ctx, in[0], NULL, &start, &count, NULL);
    {
        int64_t m = count * (take ? D : 1);
        float *v = malloc((size_t)(m ? m : 1) * 4);
        for (int64_t i = 0; i < m; i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull + (uint64_t)(start + i);
            double u = (double)(s >> 11) / 9007199254740992.0;
            if (t == LF_I32) ((int32_t *)v)[i] = (int32_t)(u * 1000);
            else v[i] = (float)(u * 6 - 3);
        }
        lf_buffer_write(in[0], v, (size_t)m * 4);
        free(v);
    }
    lf_node *x = lf_input(g, in[0]);
    if (!strcmp(name, "map")) {
        lf_fn *gauss = lf_fn_parse(g, "(x, m, s) -> exp(-0.5*((x-m)/s)**2) / (s*2.5066282746)");
        o = lf_zipwith(g, gauss, 3, (lf_node *[]){x, lf_const(g, LF_F32, 0.0), lf_const(g, LF_F32, 1.0)});
        out = lf_mpi_buffer_new_sharded(ctx, LF_F32, 1, &n, 0, NULL);
    } else if (!strcmp(name, "isum") || !strcmp(name, "fsum")) {
        o = lf_reduce(g, LF_RED_SUM, x, 0, NULL, false);
        out = lf_buffer_new(ctx, lf_node_dtype(o), 0, NULL);
    } else if (take) {
        in[1] = lf_mpi_buffer_new_sharded(ctx, LF_I64, 1, &n, 0, NULL); /* n random rows of the n-row table */
        int64_t *iv = malloc((size_t)(count ? count : 1) * 8);
        for (int64_t i = 0; i < count; i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull + (uint64_t)(start + i);
            iv[i] = (int64_t)((s >> 11) % (uint64_t)n);
        }
        lf_buffer_write(in[1], iv, (size_t)count * 8);
        free(iv);
        o = lf_take(g, x, 0, lf_input(g, in[1]));
        out = lf_mpi_buffer_new_sharded(ctx, LF_F32, 2, tshape, 0, NULL);
    } else if (!strcmp(name, "topk")) {
        o = lf_topk(g, x, K, 0, true);
        out = lf_buffer_new(ctx, LF_F32, 1, &K);
    } else {
        o = lf_argsort(g, x, 0, false);
        out = lf_mpi_buffer_new_sharded(ctx, LF_I64, 1, &n, 0, NULL);
    }
    double *ms = malloc((size_t)reps * sizeof *ms), *cm = malloc((size_t)reps * sizeof *cm);
    double bytes = 0;
    for (int r = -1; r < reps; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        comm_s = comm_bytes = 0;
        counting = 1;
        double t0 = now();
        lf_status st = lf_mpi_eval(g, 1, &o, &out);
        double dt = now() - t0;
        counting = 0;
        if (st != LF_OK) {
            if (rank == 0) fprintf(stderr, "lazyfuse-mpi-bench %s: %s\n", name, lf_errmsg(ctx));
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        double mine[2] = {dt, comm_s}, worst[2];
        PMPI_Allreduce(mine, worst, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        PMPI_Allreduce(&comm_bytes, &bytes, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        if (r >= 0) ms[r] = worst[0] * 1e3, cm[r] = worst[1] * 1e3;
    }
    /* bytes computed: the local inputs read and the output written */
    double comp = (double)lf_buffer_bytes(in[0]) + (in[1] ? (double)lf_buffer_bytes(in[1]) : 0) +
                  (double)lf_buffer_bytes(out), all_comp = 0;
    PMPI_Allreduce(&comp, &all_comp, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("%-5s %2d %9lld %9.2f %9.2f %12.0f %12.0f\n", name, size, (long long)n, median(ms, reps), median(cm, reps),
               bytes, all_comp);
    free(ms), free(cm);
    lf_graph_free(g);
    for (int k = 0; k < 2; k++) lf_mpi_buffer_free(ctx, in[k]);
    lf_mpi_buffer_free(ctx, out);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int64_t n = 1 << 20;
    int reps = 5;
    bool weak = false;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--n") && i + 1 < argc) n = strtoll(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--mode") && i + 1 < argc) weak = !strcmp(argv[++i], "weak");
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
        else {
            if (rank == 0) fprintf(stderr, "usage: mpirun -np R lazyfuse-mpi-bench [--mode strong|weak] [--n N] [--reps K] [--only NAME]\n");
            MPI_Finalize();
            return 2;
        }
    }
    if (n < 16 * size || reps < 1) {
        if (rank == 0) fprintf(stderr, "lazyfuse-mpi-bench: --n must be at least 16 per rank, --reps positive\n");
        MPI_Finalize();
        return 2;
    }
    if (weak) n *= size;
    lf_ctx_options opt;
    lf_ctx_options_init(&opt);
    opt.backend = LF_BACKEND_CPU;
    opt.threads = 1; /* ranks, not threads, share the machine */
    lf_ctx *ctx = lf_ctx_new_mpi(MPI_COMM_WORLD, &opt);
    if (!ctx) {
        fprintf(stderr, "lazyfuse-mpi-bench: %s\n", lf_errmsg(NULL));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (rank == 0)
        printf("# %s scaling, reps %d (median of the slowest rank)\n# name ranks n ms comm_ms comm_B comp_B\n",
               weak ? "weak" : "strong", reps);
    static const char *names[] = {"map", "isum", "fsum", "take", "topk", "sort"};
    for (int w = 0; w < 6; w++)
        if (!only || !strcmp(only, names[w])) run(ctx, names[w], n, reps);
    lf_ctx_destroy_mpi(ctx);
    MPI_Finalize();
    return 0;
}
