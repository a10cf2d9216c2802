/* tools/spca_ref.c: see spca_ref.h. The seed's loop over samples, in plain
 * C; a thread owns a contiguous range of samples and a scratch column a[p]
 * (computed by a loop the compiler vectorizes), then selects the top k from
 * it with a running threshold (after the first k entries, an entry that does
 * not beat the current k-th is one compare). Threads merge in range order
 * with the seed's strict >, so the first maximum wins whatever the count. */
#include "spca.h"

#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

typedef struct job {
    const float *Vd, *C;
    int64_t p, S, lo, hi; /* samples lo..hi-1 */
    int d, k;
    float *a;             /* scratch [p] */
    float *tv;            /* scratch [k] values */
    int64_t *ti;          /* scratch [k] indices */
    int64_t best;         /* -1 until a sample beats -inf */
    float val;
    bool ok;
} job;

/* a ranks before b in descending order: NaN first, then larger values. */
static inline bool before(float a, float b) { return (isnan(a) && !isnan(b)) || a > b; }

/* a = Vd @ (C[:, s] / |C[:, s]|), then its top k into tv/ti; returns val. */
static float sample(const job *j, int64_t s) {
    const int d = j->d;
    float cn[16];
    double ss = 0;
    for (int q = 0; q < d; q++) {
        float c = j->C[(int64_t)q * j->S + s];
        ss += (double)(c * c);
    }
    float norm = sqrtf((float)ss);
    for (int q = 0; q < d; q++) cn[q] = j->C[(int64_t)q * j->S + s] / norm;
    float *restrict a = j->a;
    const float *restrict V = j->Vd;
    if (d == 3) { /* the seed's d: one vectorizable pass */
        for (int64_t i = 0; i < j->p; i++)
            a[i] = (float)((double)(V[3 * i] * cn[0]) + (double)(V[3 * i + 1] * cn[1]) +
                           (double)(V[3 * i + 2] * cn[2]));
    } else {
        for (int64_t i = 0; i < j->p; i++) {
            double acc = 0;
            for (int q = 0; q < d; q++) acc += (double)(V[i * d + q] * cn[q]);
            a[i] = (float)acc;
        }
    }
    int n = 0, k = j->k;
    float *tv = j->tv;
    int64_t *ti = j->ti;
    for (int64_t i = 0; i < j->p; i++) {
        float v = a[i];
        if (n == k && !before(v, tv[k - 1])) continue;
        int pos = n < k ? n++ : k - 1;
        while (pos > 0 && before(v, tv[pos - 1])) {
            tv[pos] = tv[pos - 1];
            ti[pos] = ti[pos - 1];
            pos--;
        }
        tv[pos] = v;
        ti[pos] = i;
    }
    double acc = 0;
    for (int q = 0; q < k; q++) acc += (double)(tv[q] * tv[q]);
    return sqrtf((float)acc);
}

static void *run(void *arg) {
    job *j = arg;
    for (int64_t s = j->lo; s < j->hi; s++) {
        float v = sample(j, s);
        if (j->best < 0 || v > j->val) j->best = s, j->val = v;
    }
    return NULL;
}

int spca_ref(const float *Vd, const float *C, int64_t p, int d, int64_t S, int k, int nthreads,
             float *opt_x, spca_ref_result *out) {
    if (p < 1 || d < 1 || d > 16 || S < 1 || k < 1 || k > p) return -1;
    if (nthreads < 1) nthreads = 1;
    if (nthreads > S) nthreads = (int)S;
    job *jobs = calloc((size_t)nthreads, sizeof *jobs);
    pthread_t *tid = calloc((size_t)nthreads, sizeof *tid);
    int rc = jobs && tid ? 0 : -1;
    for (int t = 0; rc == 0 && t < nthreads; t++) {
        job *j = &jobs[t];
        *j = (job){Vd, C, p, S, S * t / nthreads, S * (t + 1) / nthreads, d, k, NULL, NULL, NULL, -1, 0, false};
        j->a = malloc((size_t)p * sizeof *j->a);
        j->tv = malloc((size_t)k * sizeof *j->tv);
        j->ti = malloc((size_t)k * sizeof *j->ti);
        if (!j->a || !j->tv || !j->ti) rc = -1;
    }
    for (int t = 1; rc == 0 && t < nthreads; t++)
        if (pthread_create(&tid[t], NULL, run, &jobs[t]) != 0) rc = -1;
        else jobs[t].ok = true;
    if (rc == 0) run(&jobs[0]);
    for (int t = 1; t < nthreads && jobs; t++)
        if (jobs[t].ok) pthread_join(tid[t], NULL);
    if (rc == 0) {
        job *win = &jobs[0];
        for (int t = 1; t < nthreads; t++)
            if (jobs[t].best >= 0 && (win->best < 0 || jobs[t].val > win->val)) win = &jobs[t];
        out->best = win->best < 0 ? 0 : win->best;
        out->val = sample(win, out->best); /* the winner's column again: its top k */
        memset(opt_x, 0, (size_t)p * sizeof *opt_x);
        for (int q = 0; q < k; q++) opt_x[win->ti[q]] = win->tv[q] / out->val;
    }
    for (int t = 0; t < nthreads && jobs; t++) {
        free(jobs[t].a);
        free(jobs[t].tv);
        free(jobs[t].ti);
    }
    free(jobs);
    free(tid);
    return rc;
}
