/* graph/fft.c: lf_fft and lf_ifft, discrete Fourier transforms along one
 * axis as extern nodes (graph/extern.c) whose callback runs FFTW.
 *
 * An FFT node is an extern node the library makes itself: its input (cast
 * to the transform's complex dtype, a cast that fuses with the input's
 * producers) is evaluated up to the boundary, the callback transforms the
 * host array with FFTW, and consumers read the result like an input. So it
 * is a barrier with a step of its own, on every evaluator alike: the
 * reference evaluator runs FFTW too (tests/test_fft.c checks it against a
 * naive O(n^2) DFT), and a device backend copies through the host.
 *
 * FFTW: one guru64 plan per node (a rank-1 transform of n = shape[axis]
 * points with stride inner = the product of the later extents, batched over
 * the outer and inner extents), made with FFTW_ESTIMATE (no timing runs, no
 * wisdom to keep) on the first eval and again only when the arrays'
 * alignment changes; multi-threaded with the context's thread count (0:
 * one per online CPU), fixed when the node is built. FFTW's planner is not
 * thread-safe, so making and destroying plans holds one process-wide mutex;
 * executing a plan (fftw_execute_dft on new arrays) does not. ifft divides
 * by n afterwards (NumPy's "backward" normalization), multiplying each
 * component by 1/n rounded to the component float.
 *
 * Built without FFTW (meson found no fftw3 / fftw3f and their _threads
 * libraries), lf_fft and lf_ifft fail with LF_ERR_BACKEND when called.
 */
#include "graph/graph.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#ifdef LF_HAVE_FFTW
#include <fftw3.h>

typedef struct fft_node {
    int axis;        /* transformed axis */
    bool inverse;    /* ifft: sign +1 and the 1/n scale */
    lf_dtype t;      /* LF_C64 (fftwf) or LF_C128 (fftw) */
    int threads;     /* FFTW threads */
    void *plan;      /* fftwf_plan or fftw_plan, NULL before the first eval */
    int align_in;    /* fftw_alignment_of the arrays it was made for */
    int align_out;
} fft_node;

static pthread_mutex_t planner = PTHREAD_MUTEX_INITIALIZER;
static bool threads_ready; /* fftw(f)_init_threads ran (under planner) */

static void destroy_plan(fft_node *f) {
    if (!f->plan) return;
    if (f->t == LF_C64) fftwf_destroy_plan((fftwf_plan)f->plan);
    else fftw_destroy_plan((fftw_plan)f->plan);
    f->plan = NULL;
}

static void fft_free(void *user) {
    fft_node *f = user;
    pthread_mutex_lock(&planner);
    destroy_plan(f);
    pthread_mutex_unlock(&planner);
    graph_free(f);
}

static int fft_run(void *user, int nin, const lf_extern_array *ins, const lf_extern_array *out, char *msg,
                   size_t cap) {
    fft_node *f = user;
    (void)nin;
    const lf_extern_array *x = &ins[0];
    if (out->numel == 0) return 0;
    int64_t n = x->shape[f->axis], inner = 1, outer = 1;
    for (int d = f->axis + 1; d < x->ndim; d++) inner *= x->shape[d];
    for (int d = 0; d < f->axis; d++) outer *= x->shape[d];
    int sign = f->inverse ? FFTW_BACKWARD : FFTW_FORWARD;
    bool single = f->t == LF_C64;
    int ai = single ? fftwf_alignment_of((float *)x->data) : fftw_alignment_of((double *)x->data);
    int ao = single ? fftwf_alignment_of((float *)out->data) : fftw_alignment_of((double *)out->data);
    pthread_mutex_lock(&planner);
    if (f->plan && (f->align_in != ai || f->align_out != ao)) destroy_plan(f);
    if (!f->plan) {
        if (!threads_ready) {
            fftw_init_threads();
            fftwf_init_threads();
            threads_ready = true;
        }
        fftw_iodim64 dim = {.n = n, .is = inner, .os = inner};
        fftw_iodim64 many[2] = {{.n = outer, .is = n * inner, .os = n * inner}, {.n = inner, .is = 1, .os = 1}};
        if (single) {
            fftwf_plan_with_nthreads(f->threads);
            f->plan = fftwf_plan_guru64_dft(1, &dim, 2, many, (fftwf_complex *)x->data, (fftwf_complex *)out->data,
                                            sign, FFTW_ESTIMATE);
        } else {
            fftw_plan_with_nthreads(f->threads);
            f->plan = fftw_plan_guru64_dft(1, &dim, 2, many, (fftw_complex *)x->data, (fftw_complex *)out->data, sign,
                                           FFTW_ESTIMATE);
        }
        f->align_in = ai;
        f->align_out = ao;
    }
    pthread_mutex_unlock(&planner);
    if (!f->plan) {
        snprintf(msg, cap, "FFTW could not plan a %lld-point transform", (long long)n);
        return 1;
    }
    /* out-of-place complex transforms leave the input as it is (FFTW's default) */
    if (single) fftwf_execute_dft((fftwf_plan)f->plan, (fftwf_complex *)x->data, (fftwf_complex *)out->data);
    else fftw_execute_dft((fftw_plan)f->plan, (fftw_complex *)x->data, (fftw_complex *)out->data);
    if (f->inverse) {
        int64_t m = 2 * out->numel;
        if (single) {
            float s = (float)(1.0 / (double)n), *o = out->data;
            for (int64_t i = 0; i < m; i++) o[i] *= s;
        } else {
            double s = 1.0 / (double)n, *o = out->data;
            for (int64_t i = 0; i < m; i++) o[i] *= s;
        }
    }
    return 0;
}
#endif

static lf_node *make_fft(lf_graph *g, const char *what, lf_node *x, int axis, bool inverse) {
    if (!graph_check_args(g, what, 1, &x)) return NULL;
    if (x->ndim == 0 || axis < -x->ndim || axis >= x->ndim) {
        graph_fail(g, LF_ERR_AXIS, "%s: axis %d out of range for %d dimensions", what, axis, x->ndim);
        return NULL;
    }
    if (axis < 0) axis += x->ndim;
    if (x->shape[axis] == 0) { /* NumPy: "Invalid number of FFT data points (0)" */
        graph_fail(g, LF_ERR_SHAPE, "%s: axis %d has no points to transform", what, axis);
        return NULL;
    }
    lf_dtype t = x->dtype;
    lf_dtype ct = t == LF_C64 || t == LF_F32 || t == LF_F16 || t == LF_BF16 ? LF_C64 : LF_C128;
#ifndef LF_HAVE_FFTW
    (void)inverse, (void)ct;
    graph_fail(g, LF_ERR_BACKEND, "%s: this lazyfuse was built without FFTW (install libfftw3-dev and rebuild)", what);
    return NULL;
#else
    lf_node *in = t == ct ? x : lf_cast(g, x, ct);
    if (!in) return NULL;
    fft_node *f = graph_calloc(1, sizeof *f);
    if (!f) {
        graph_fail(g, LF_ERR_NOMEM, "%s: out of memory", what);
        return NULL;
    }
    f->axis = axis;
    f->inverse = inverse;
    f->t = ct;
    f->threads = g->ctx->opt.threads > 0 ? g->ctx->opt.threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (f->threads < 1) f->threads = 1;
    lf_node *n = lf_extern(g, what, fft_run, f, 1, &in, ct, x->ndim, x->shape);
    if (!n) {
        graph_free(f);
        return NULL;
    }
    ((graph_extern *)n->ext)->free_user = fft_free;
    ((graph_extern *)n->ext)->direct = true; /* fft_run fails only before it writes */
    return n;
#endif
}

lf_node *lf_fft(lf_graph *g, lf_node *x, int axis) { return make_fft(g, "fft", x, axis, false); }

lf_node *lf_ifft(lf_graph *g, lf_node *x, int axis) { return make_fft(g, "ifft", x, axis, true); }
