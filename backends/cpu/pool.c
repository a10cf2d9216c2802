/* backends/cpu/pool.c: the CPU backend's thread pool (see pool.h).
 *
 * One mutex `mu` guards the job and the two condition variables; a second
 * mutex `run_lock` lets one run at a time through and guards the lazily
 * started worker set. What must stay true:
 *  - a run publishes its job and bumps `gen` under `mu`, then wakes the
 *    workers with one broadcast; a worker runs a job only when `gen` differs
 *    from the last generation it saw, so it never runs one twice, and the
 *    caller does not return (nor let the next run publish) before every
 *    worker owning a chunk has finished it, so none is missed;
 *  - `pending` counts chunks still running on workers; the worker that takes
 *    it to zero signals `done` once;
 *  - nobody spins: workers wait on `wake`, the caller on `done`;
 *  - the mutex hand-offs make the chunks' writes visible to the caller.
 */
#include "backends/cpu/pool.h"
#include "graph/graph.h"

#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <unistd.h>

typedef struct pool_worker {
    cpu_pool *pool;
    int id;            /* 1.. : the worker id and the chunk it runs */
    pthread_t tid;
} pool_worker;

struct cpu_pool {
    int threads;                /* configured threads, caller included */
    pthread_mutex_t run_lock;   /* one run at a time; guards the two below */
    bool start_tried;           /* workers were started (or tried) */
    int nworkers;               /* workers running: ids 1..nworkers */

    pthread_mutex_t mu;         /* guards everything below */
    pthread_cond_t wake;        /* workers sleep here between runs */
    pthread_cond_t done;        /* the caller sleeps here until pending == 0 */
    uint64_t gen;               /* bumped once per parallel run */
    uint64_t start_gen;         /* gen when the workers were started */
    bool stop;                  /* set by cpu_pool_free */
    cpu_range_fn fn;            /* the current job */
    void *arg;
    int64_t n, chunk;
    int nchunks;
    int pending;                /* chunks on workers not yet finished */

    pool_worker workers[];      /* threads - 1 entries */
};

int cpu_online_cpus(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1) return 1;
    return n > INT_MAX ? INT_MAX : (int)n;
}

cpu_pool *cpu_pool_new(int threads) {
    if (threads <= 0) threads = cpu_online_cpus();
    if (threads > CPU_POOL_MAX_THREADS) threads = CPU_POOL_MAX_THREADS;
    size_t bytes = sizeof(cpu_pool) + (size_t)(threads - 1) * sizeof(pool_worker);
    cpu_pool *p = graph_calloc(1, bytes);
    if (!p) return NULL;
    p->threads = threads;
    if (pthread_mutex_init(&p->run_lock, NULL)) goto fail0;
    if (pthread_mutex_init(&p->mu, NULL)) goto fail1;
    if (pthread_cond_init(&p->wake, NULL)) goto fail2;
    if (pthread_cond_init(&p->done, NULL)) goto fail3;
    for (int i = 0; i < threads - 1; i++) {
        p->workers[i].pool = p;
        p->workers[i].id = i + 1;
    }
    return p;
fail3:
    pthread_cond_destroy(&p->wake);
fail2:
    pthread_mutex_destroy(&p->mu);
fail1:
    pthread_mutex_destroy(&p->run_lock);
fail0:
    graph_free(p);
    return NULL;
}

int cpu_pool_threads(const cpu_pool *p) { return p ? p->threads : 1; }

static void *worker_main(void *varg) {
    pool_worker *w = varg;
    cpu_pool *p = w->pool;
    pthread_mutex_lock(&p->mu);
    uint64_t seen = p->start_gen;
    for (;;) {
        while (!p->stop && p->gen == seen) pthread_cond_wait(&p->wake, &p->mu);
        if (p->stop) break;
        seen = p->gen;
        if (w->id >= p->nchunks) continue; /* no chunk for us this run */
        cpu_range_fn fn = p->fn;
        void *arg = p->arg;
        int64_t begin = (int64_t)w->id * p->chunk;
        int64_t end = p->n - begin > p->chunk ? begin + p->chunk : p->n;
        pthread_mutex_unlock(&p->mu);
        fn(arg, begin, end, w->id);
        pthread_mutex_lock(&p->mu);
        if (--p->pending == 0) pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

/* Starts the workers once (run_lock held). Workers block every signal, so the
 * program's handlers run on its own threads. A failed pthread_create keeps
 * the workers already started. */
static void start_workers(cpu_pool *p) {
    p->start_tried = true;
    pthread_mutex_lock(&p->mu);
    p->start_gen = p->gen;
    pthread_mutex_unlock(&p->mu);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    for (int i = 0; i < p->threads - 1; i++) {
        if (pthread_create(&p->workers[i].tid, NULL, worker_main, &p->workers[i])) break;
        p->nworkers = i + 1;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

void cpu_pool_free(cpu_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->run_lock);
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->nworkers; i++) pthread_join(p->workers[i].tid, NULL);
    pthread_mutex_unlock(&p->run_lock);
    pthread_cond_destroy(&p->done);
    pthread_cond_destroy(&p->wake);
    pthread_mutex_destroy(&p->mu);
    pthread_mutex_destroy(&p->run_lock);
    graph_free(p);
}

void cpu_pool_run(cpu_pool *p, cpu_range_fn fn, void *arg, int64_t n, int64_t grain,
                  int64_t min_parallel) {
    if (!fn || n <= 0) return;
    if (grain < 1) grain = 1;
    if (!p) {
        fn(arg, 0, n, 0);
        return;
    }
    /* Even a run on the caller alone holds run_lock: one run at a time, so
     * worker 0's scratch is never shared either. */
    pthread_mutex_lock(&p->run_lock);
    if (p->threads == 1 || n <= grain || min_parallel > n) {
        fn(arg, 0, n, 0);
        pthread_mutex_unlock(&p->run_lock);
        return;
    }
    if (!p->start_tried) start_workers(p);
    int t = 1 + p->nworkers;
    /* chunk = round_up(ceil(n / t), grain), written so nothing overflows:
     * per <= ceil(n/2) and grain < n keep chunk <= n. */
    int64_t per = n / t + (n % t != 0);
    int64_t chunk = (per / grain + (per % grain != 0)) * grain;
    int64_t nchunks = n / chunk + (n % chunk != 0);
    if (nchunks == 1) { /* also t == 1: no worker could be started */
        fn(arg, 0, n, 0);
        pthread_mutex_unlock(&p->run_lock);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->arg = arg;
    p->n = n;
    p->chunk = chunk;
    p->nchunks = (int)nchunks;
    p->pending = (int)nchunks - 1;
    p->gen++;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);

    fn(arg, 0, chunk, 0);

    pthread_mutex_lock(&p->mu);
    while (p->pending > 0) pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
    pthread_mutex_unlock(&p->run_lock);
}
