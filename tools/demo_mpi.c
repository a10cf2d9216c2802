/* tools/demo_mpi.c: lazyfuse-demo-mpi, lazyfuse-demo's graph over MPI.
 *
 * The gaussian_pdf of the Numba lecture notes over n float32 samples drawn
 * from [-3, 3) by a fixed-seed generator, sharded along axis 0 over the
 * ranks (the balanced split), with three outputs in one lf_mpi_eval:
 *   pdf   the density, elementwise (sharded, no communication);
 *   mean  the mean of the density over all samples (a float reduction over
 *         the sharded axis: the ordered relay);
 *   maxx  the largest sample (min/max: allgather of partials);
 *   csum  the running sum of x*x (a scan along the sharded axis: relay).
 * Every rank then checks its block of pdf and csum and the replicated mean
 * and maxx bit for bit against the same graph evaluated by this process
 * alone over all n samples (the reference backend for the mean, whose
 * float order lazyfuse_mpi.h defines as the reference's; the same local
 * backend for the rest), and rank 0 prints the answer, the check, and the
 * median time of lf_mpi_eval over --reps runs (the slowest rank's time,
 * after one warm-up run that compiles), for the pdf alone and for all four
 * outputs.
 *
 * Usage: mpirun -np R lazyfuse-demo-mpi [--n N] [--reps K]
 *        (defaults n = 1000000, reps = 5). Exit status 0 when every rank's
 * check passes, 1 otherwise, 2 for a bad command line.
 */
#include "lazyfuse_mpi.h"

#include <inttypes.h>
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

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct outs {
    lf_node *pdf, *mean, *maxx, *csum;
} outs;

static outs build(lf_graph *g, lf_buffer *xb) {
    lf_fn *gauss = lf_fn_parse(g, "(x, m, s) -> exp(-0.5*((x-m)/s)**2) / (s*2.5066282746)");
    lf_node *x = lf_input(g, xb);
    outs o;
    o.pdf = lf_zipwith(g, gauss, 3, (lf_node *[]){x, lf_const(g, LF_F32, 0.0), lf_const(g, LF_F32, 1.0)});
    o.mean = lf_reduce(g, LF_RED_MEAN, o.pdf, 0, NULL, false);
    o.maxx = lf_reduce(g, LF_RED_MAX, x, 0, NULL, false);
    o.csum = lf_scan(g, LF_RED_SUM, lf_mul(g, x, x), 0, false);
    return o;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int64_t n = 1000000;
    int reps = 5;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--n") && i + 1 < argc) n = strtoll(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else {
            if (rank == 0) fprintf(stderr, "usage: mpirun -np R lazyfuse-demo-mpi [--n N] [--reps K]\n");
            MPI_Finalize();
            return 2;
        }
    }
    if (n < 1 || reps < 1) {
        if (rank == 0) fprintf(stderr, "lazyfuse-demo-mpi: --n and --reps must be positive\n");
        MPI_Finalize();
        return 2;
    }
    lf_ctx_options opt;
    lf_ctx_options_init(&opt);
    opt.backend = LF_BACKEND_CPU;
    opt.threads = 1; /* one rank per core: ranks, not threads, share the machine */
    lf_ctx *ctx = lf_ctx_new_mpi(MPI_COMM_WORLD, &opt);
    lf_ctx *one = lf_ctx_new(&opt);
    lf_ctx_options ropt = opt;
    ropt.backend = LF_BACKEND_REFERENCE;
    lf_ctx *ref = lf_ctx_new(&ropt);
    if (!ctx || !one || !ref) {
        fprintf(stderr, "lazyfuse-demo-mpi: %s\n", lf_errmsg(NULL));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    /* the same samples on every rank; each writes its block */
    float *x = malloc((size_t)n * sizeof *x);
    uint64_t s = 42;
    for (int64_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)((double)(s >> 11) / 9007199254740992.0 * 6.0 - 3.0);
    }
    lf_buffer *xb = lf_mpi_buffer_new_sharded(ctx, LF_F32, 1, &n, 0, NULL);
    lf_buffer *pdf = lf_mpi_buffer_new_sharded(ctx, LF_F32, 1, &n, 0, NULL);
    lf_buffer *csum = lf_mpi_buffer_new_sharded(ctx, LF_F32, 1, &n, 0, NULL);
    lf_buffer *mean = lf_buffer_new(ctx, LF_F32, 0, NULL), *maxx = lf_buffer_new(ctx, LF_F32, 0, NULL);
    int64_t start, count;
    lf_mpi_buffer_block(ctx, xb, NULL, &start, &count, NULL);
    lf_buffer_write(xb, x + start, (size_t)count * sizeof *x);
    lf_graph *g = lf_graph_new(ctx);
    outs o = build(g, xb);
    lf_node *on[4] = {o.pdf, o.mean, o.maxx, o.csum};
    lf_buffer *ob[4] = {pdf, mean, maxx, csum};
    double *times = malloc((size_t)reps * sizeof *times), *times_pdf = malloc((size_t)reps * sizeof *times);
    int bad = 0;
    /* timed twice: the pdf alone (elementwise: no communication but the
       status agreement), then all four outputs (the mean's and the
       cumsum's relays, the max's allgather) */
    for (int which = 0; which < 2 && !bad; which++)
        for (int r = -1; r < reps; r++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = now();
            if (lf_mpi_eval(g, which ? 4 : 1, on, ob) != LF_OK) {
                if (rank == 0) fprintf(stderr, "lazyfuse-demo-mpi: %s\n", lf_errmsg(ctx));
                bad = 1;
                break;
            }
            double t = now() - t0, slowest;
            MPI_Allreduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD); /* a time, not a result */
            if (r >= 0) (which ? times : times_pdf)[r] = slowest;
        }
    /* the same graph by this process alone, over all n samples */
    lf_buffer *xw = lf_buffer_new(one, LF_F32, 1, &n), *xr = lf_buffer_new(ref, LF_F32, 1, &n);
    lf_buffer_write(xw, x, (size_t)n * sizeof *x);
    lf_buffer_write(xr, x, (size_t)n * sizeof *x);
    lf_graph *g1 = lf_graph_new(one), *gr = lf_graph_new(ref);
    outs o1 = build(g1, xw), orf = build(gr, xr);
    lf_buffer *pdf1 = lf_buffer_new(one, LF_F32, 1, &n), *csum1 = lf_buffer_new(one, LF_F32, 1, &n);
    lf_buffer *max1 = lf_buffer_new(one, LF_F32, 0, NULL), *mean_r = lf_buffer_new(ref, LF_F32, 0, NULL);
    if (!bad && (lf_eval(g1, 3, (lf_node *[]){o1.pdf, o1.maxx, o1.csum}, (lf_buffer *[]){pdf1, max1, csum1}) != LF_OK ||
                 lf_eval(gr, 1, &orf.mean, &mean_r) != LF_OK)) {
        fprintf(stderr, "lazyfuse-demo-mpi: one-process eval: %s %s\n", lf_errmsg(one), lf_errmsg(ref));
        bad = 1;
    }
    float got_mean = 0, got_max = 0, want_mean = 0, want_max = 0;
    if (!bad) {
        size_t bytes = (size_t)count * sizeof(float);
        float *a = malloc(bytes ? bytes : 1), *w = malloc((size_t)n * sizeof(float));
        lf_buffer_read(pdf, a, bytes);
        lf_buffer_read(pdf1, w, (size_t)n * sizeof(float));
        bad |= memcmp(a, w + start, bytes) != 0;
        lf_buffer_read(csum, a, bytes);
        lf_buffer_read(csum1, w, (size_t)n * sizeof(float));
        bad |= memcmp(a, w + start, bytes) != 0;
        lf_buffer_read(mean, &got_mean, 4);
        lf_buffer_read(mean_r, &want_mean, 4);
        lf_buffer_read(maxx, &got_max, 4);
        lf_buffer_read(max1, &want_max, 4);
        bad |= memcmp(&got_mean, &want_mean, 4) != 0 || memcmp(&got_max, &want_max, 4) != 0;
        free(a), free(w);
    }
    int any_bad = 0;
    MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD); /* a flag */
    if (rank == 0) {
        qsort(times, (size_t)reps, sizeof *times, cmp_double);
        qsort(times_pdf, (size_t)reps, sizeof *times, cmp_double);
        printf("lazyfuse-demo-mpi: %d ranks, n = %" PRId64 ": mean pdf %.9g, max x %.9g\n", size, n, (double)got_mean,
               (double)got_max);
        printf("  one process: mean pdf %.9g, max x %.9g; every rank's blocks and results %s\n", (double)want_mean,
               (double)want_max, any_bad ? "DIFFER" : "are bit-identical");
        if (!any_bad)
            printf("  lf_mpi_eval, median of %d runs (slowest rank): pdf alone %.3f ms, all four outputs %.3f ms\n", reps,
                   1e3 * times_pdf[reps / 2], 1e3 * times[reps / 2]);
    }
    free(times), free(times_pdf), free(x);
    lf_ctx_destroy(one);
    lf_ctx_destroy(ref);
    lf_ctx_destroy_mpi(ctx);
    MPI_Finalize();
    return any_bad;
}
