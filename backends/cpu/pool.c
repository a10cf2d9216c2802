/* backends/cpu/pool.c: the CPU backend's thread pool (see pool.h).
 *
 * A run publishes its job by storing one atomic word, `word` = generation
 * << 16 | chunks; workers wait for the generation to change, first spinning
 * on the word for a bounded time, then asleep on `wake`. The caller waits for
 * `pending` (chunks still on workers) the same way: a bounded spin, then
 * asleep on `done`. A mutex `run_lock` lets one run at a time through and
 * guards the lazily started worker set; a mutex `mu` is taken only to sleep
 * on or signal the two condition variables. What must stay true:
 *  - a worker runs a job only when the generation differs from the last one
 *    it saw, so it never runs one twice; the caller does not return (nor let
 *    the next run publish) before every worker owning a chunk has finished
 *    it, so none is missed. The chunk count travels in the same word as the
 *    generation: a worker without a chunk reads nothing else, so the next run
 *    may rewrite the job (fn, arg, n, chunk) while it is still around; a
 *    worker with a chunk reads the job before its decrement of `pending`,
 *    which the caller waits for;
 *  - spins are bounded in time: a worker spins at most WORKER_SPIN_NS after
 *    its last run, the caller at most CALLER_SPIN_NS for pending chunks
 *    (looking at the clock every SPIN_CHECK pauses); then they sleep on the
 *    condition variable. A pool with more threads than the CPUs this process
 *    may run on does not spin at all (a spinning thread would hold the core
 *    of one with work to do). So an idle pool costs no CPU time once the
 *    spins of its last run are over;
 *  - spinning backs off when it does not pay. While the caller spins it
 *    judges the run: a worker that was not asleep at publish and has not
 *    taken its chunk START_GRACE_NS later, or one asleep after a full spin
 *    (often a spin that ran out while the worker was descheduled) that has
 *    not taken its chunk by the end of the caller's spin, is not getting a
 *    CPU (another process holds it, or our own caller does). That is a
 *    miss: for `backoff_ns` from then, neither workers nor caller spin
 *    (BACKOFF_MIN_NS, doubled up to BACKOFF_MAX_NS while misses come within
 *    BACKOFF_WINDOW_NS of spinning resuming). On a loaded machine a woken
 *    sleeper is scheduled ahead of the CPU hogs; a spinner is one of them
 *    and waits its turn, often a whole time slice, so without the back-off
 *    spinning would be far slower there than sleeping. Workers just started,
 *    and workers asleep because of a back-off, are not judged (or every
 *    back-off would end in a slow wake-up judged a miss, and another);
 *  - no lost wake-up: a worker going to sleep takes `mu`, counts itself in
 *    `sleepers`, then looks at the word again before cond_wait; the caller
 *    stores the word, then reads `sleepers` and, when non-zero, broadcasts
 *    under `mu`. Both sides are sequentially consistent, so either the worker
 *    sees the new generation or the caller sees the sleeper (and its
 *    broadcast, under `mu`, comes after the worker's wait began). The
 *    caller's sleep on `done` is the mirror image: `caller_waits` stored,
 *    `pending` read under `mu`; the worker taking `pending` to zero reads
 *    `caller_waits` after its decrement and signals under `mu` when set;
 *  - the word's store and the workers' acquire loads of it publish the job;
 *    the workers' decrements of `pending` and the caller's acquire loads of
 *    it make the chunks' writes visible to the caller.
 */
#include "backends/cpu/pool.h"
#include "graph/graph.h"

#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>
#include <unistd.h>

#define WORKER_SPIN_NS 100000      /* a worker's spin after a run, before it sleeps */
#define CALLER_SPIN_NS 50000       /* the caller's spin for pending chunks */
#define START_GRACE_NS 20000       /* spinning workers take their chunks within this */
#define BACKOFF_MIN_NS 250000      /* no-spin period after a miss ... */
#define BACKOFF_MAX_NS 256000000   /* ... doubled up to this ... */
#define BACKOFF_WINDOW_NS 50000000 /* ... while misses come this soon after it ends */
#define SPIN_CHECK 16              /* pauses between looks at the clock */
#define WORD_CHUNK_BITS 16         /* low bits of `word`: the run's chunks */

/* One pause of a spin loop: tells the core we are waiting (frees issue slots
 * for a hyper-thread sibling, saves power, no memory-order flush on exit). */
static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
    __asm__ __volatile__("yield");
#else
    atomic_signal_fence(memory_order_seq_cst);
#endif
}

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

typedef struct pool_worker {
    cpu_pool *pool;
    int id;            /* 1.. : the worker id and the chunk it runs */
    pthread_t tid;
} pool_worker;

struct cpu_pool {
    int threads;                   /* configured threads, caller included */
    pthread_mutex_t run_lock;      /* one run at a time; guards the fields up to pad0 */
    bool start_tried;              /* workers were started (or tried) */
    int nworkers;                  /* workers running: ids 1..nworkers */
    uint64_t start_gen;            /* generation when the workers were started */
    int64_t backoff_ns;            /* the last no-spin period; 0: none yet */
    bool backs_off;                /* false only by cpu_pool_set_spin */
    char pad0[64];

    /* Spinning workers read this line: the word, the spin settings, and the
     * job, written by the caller before it stores the word and read by
     * workers with a chunk after they load it. */
    _Atomic uint64_t word;         /* generation << WORD_CHUNK_BITS | chunks */
    _Atomic int64_t nospin_until;  /* now_ns() before which workers do not spin */
    _Atomic int64_t worker_spin_ns; /* 0: sleep at once */
    _Atomic int64_t caller_spin_ns;
    cpu_range_fn fn;               /* the current job */
    void *arg;
    int64_t n, chunk;
    char pad1[64];

    atomic_int pending;            /* chunks on workers not yet finished */
    atomic_int started;            /* chunks of this run workers have taken */
    atomic_bool caller_waits;      /* the caller is (about to be) asleep on done */
    char pad2[64];

    atomic_int sleepers;           /* workers (about to be) asleep on wake */
    atomic_int spun_out;           /* those of them that spun in full first */
    atomic_bool stop;              /* set by cpu_pool_free */
    pthread_mutex_t mu;            /* taken to sleep on or signal wake and done */
    pthread_cond_t wake;           /* workers sleep here after their spin */
    pthread_cond_t done;           /* the caller sleeps here until pending == 0 */

    pool_worker workers[];         /* threads - 1 entries */
};

int cpu_online_cpus(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1) return 1;
    return n > INT_MAX ? INT_MAX : (int)n;
}

/* CPUs this process may run on (its affinity mask), else the online ones. */
static int usable_cpus(void) {
#ifdef CPU_COUNT
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
#endif
    return cpu_online_cpus();
}

cpu_pool *cpu_pool_new(int threads) {
    if (threads <= 0) threads = cpu_online_cpus();
    if (threads > CPU_POOL_MAX_THREADS) threads = CPU_POOL_MAX_THREADS;
    size_t bytes = sizeof(cpu_pool) + (size_t)(threads - 1) * sizeof(pool_worker);
    cpu_pool *p = graph_calloc(1, bytes);
    if (!p) return NULL;
    p->threads = threads;
    p->backs_off = true;
    bool spin = threads <= usable_cpus();
    atomic_init(&p->worker_spin_ns, spin ? WORKER_SPIN_NS : 0);
    atomic_init(&p->caller_spin_ns, spin ? CALLER_SPIN_NS : 0);
    atomic_init(&p->nospin_until, 0);
    atomic_init(&p->word, 0);
    atomic_init(&p->pending, 0);
    atomic_init(&p->started, 0);
    atomic_init(&p->caller_waits, false);
    atomic_init(&p->sleepers, 0);
    atomic_init(&p->spun_out, 0);
    atomic_init(&p->stop, false);
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

void cpu_pool_set_spin(cpu_pool *p, int64_t worker_ns, int64_t caller_ns, bool backs_off) {
    if (!p) return;
    atomic_store_explicit(&p->worker_spin_ns, worker_ns < 0 ? 0 : worker_ns, memory_order_relaxed);
    atomic_store_explicit(&p->caller_spin_ns, caller_ns < 0 ? 0 : caller_ns, memory_order_relaxed);
    atomic_store_explicit(&p->nospin_until, 0, memory_order_relaxed);
    p->backoff_ns = 0;
    p->backs_off = backs_off;
}

int cpu_pool_sleeping(cpu_pool *p) { return p ? atomic_load(&p->sleepers) : 0; }

int64_t cpu_pool_backoff_ns(cpu_pool *p) {
    if (!p) return 0;
    int64_t left = atomic_load_explicit(&p->nospin_until, memory_order_relaxed) - now_ns();
    return left > 0 ? left : 0;
}

static uint64_t word_gen(uint64_t word) { return word >> WORD_CHUNK_BITS; }

/* Waits until the generation in p->word differs from `seen` and returns the
 * word: spins up to worker_spin_ns unless backing off, then sleeps on wake. */
static uint64_t await_gen(cpu_pool *p, uint64_t seen) {
    uint64_t word = atomic_load_explicit(&p->word, memory_order_acquire);
    if (word_gen(word) != seen) return word;
    int64_t spin = atomic_load_explicit(&p->worker_spin_ns, memory_order_relaxed);
    bool spun = false; /* a full spin, not cut short by a back-off */
    if (spin > 0) {
        int64_t now = now_ns(), until = now + spin;
        for (unsigned i = 1; now >= atomic_load_explicit(&p->nospin_until, memory_order_relaxed); i++) {
            cpu_relax();
            word = atomic_load_explicit(&p->word, memory_order_acquire);
            if (word_gen(word) != seen) return word;
            if (i % SPIN_CHECK == 0 && (now = now_ns()) >= until) {
                spun = true;
                break;
            }
        }
    }
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add(&p->sleepers, 1);
    if (spun) atomic_fetch_add_explicit(&p->spun_out, 1, memory_order_relaxed);
    while (word_gen(word = atomic_load(&p->word)) == seen) pthread_cond_wait(&p->wake, &p->mu);
    if (spun) atomic_fetch_sub_explicit(&p->spun_out, 1, memory_order_relaxed);
    atomic_fetch_sub(&p->sleepers, 1);
    pthread_mutex_unlock(&p->mu);
    return word;
}

/* A miss (run_lock held): nobody spins for a while (see the top). */
static void back_off(cpu_pool *p, int64_t now) {
    int64_t resumed = atomic_load_explicit(&p->nospin_until, memory_order_relaxed);
    if (p->backoff_ns && now - resumed < BACKOFF_WINDOW_NS)
        p->backoff_ns = p->backoff_ns >= BACKOFF_MAX_NS / 2 ? BACKOFF_MAX_NS : 2 * p->backoff_ns;
    else
        p->backoff_ns = BACKOFF_MIN_NS;
    atomic_store_explicit(&p->nospin_until, now + p->backoff_ns, memory_order_relaxed);
}

/* Waits until no chunk is pending (run_lock held): spins up to `spin` ns,
 * then sleeps on done. `t_pub` is when the run was published, `chunks` the
 * chunks on workers, `asleep` the workers asleep then and `spun` those of
 * them that had spun in full. When `check`, fewer chunks taken than those of
 * the workers not asleep START_GRACE_NS after publish, or than those of the
 * workers not asleep or asleep after a full spin by the end of the spin,
 * means the pool should back off (see the top). */
static void await_pending(cpu_pool *p, int64_t spin, int64_t t_pub, bool check, int chunks,
                          int asleep, int spun) {
    if (atomic_load_explicit(&p->pending, memory_order_acquire) == 0) return;
    if (spin > 0) {
        int64_t now = now_ns(), until = now + spin;
        bool graced = false;
        for (unsigned i = 1;; i++) {
            cpu_relax();
            if (atomic_load_explicit(&p->pending, memory_order_acquire) == 0) return;
            if (i % SPIN_CHECK) continue;
            now = now_ns();
            bool end = now >= until;
            if (check && (end || (!graced && now - t_pub >= START_GRACE_NS))) {
                graced = true;
                int want = chunks - asleep + (end ? spun : 0);
                if (atomic_load_explicit(&p->started, memory_order_relaxed) < want) {
                    back_off(p, now);
                    break;
                }
            }
            if (end) break;
        }
    }
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->caller_waits, true);
    while (atomic_load(&p->pending) > 0) pthread_cond_wait(&p->done, &p->mu);
    atomic_store_explicit(&p->caller_waits, false, memory_order_relaxed);
    pthread_mutex_unlock(&p->mu);
}

static void *worker_main(void *varg) {
    pool_worker *w = varg;
    cpu_pool *p = w->pool;
    uint64_t seen = p->start_gen; /* written before pthread_create */
    for (;;) {
        uint64_t word = await_gen(p, seen);
        if (atomic_load_explicit(&p->stop, memory_order_relaxed)) break;
        seen = word_gen(word);
        int nchunks = (int)(word & ((1u << WORD_CHUNK_BITS) - 1));
        if (w->id >= nchunks) continue; /* no chunk for us this run: read nothing else */
        atomic_fetch_add_explicit(&p->started, 1, memory_order_relaxed);
        cpu_range_fn fn = p->fn;
        void *arg = p->arg;
        int64_t begin = (int64_t)w->id * p->chunk;
        int64_t end = p->n - begin > p->chunk ? begin + p->chunk : p->n;
        fn(arg, begin, end, w->id);
        /* The last one out wakes a sleeping caller. Nothing of the job may
         * be read after this decrement: the next run may be publishing. */
        if (atomic_fetch_sub(&p->pending, 1) == 1 && atomic_load(&p->caller_waits)) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->mu);
        }
    }
    return NULL;
}

/* Starts the workers once (run_lock held). Workers block every signal, so the
 * program's handlers run on its own threads. A failed pthread_create keeps
 * the workers already started. */
static void start_workers(cpu_pool *p) {
    p->start_tried = true;
    p->start_gen = word_gen(atomic_load_explicit(&p->word, memory_order_relaxed));
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    for (int i = 0; i < p->threads - 1; i++) {
        if (pthread_create(&p->workers[i].tid, NULL, worker_main, &p->workers[i])) break;
        p->nworkers = i + 1;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* Publishes a new generation with `nchunks` chunks (run_lock held) and wakes
 * the workers asleep, if any. Returns how many were asleep, and in *spun
 * how many of them had spun in full. */
static int publish(cpu_pool *p, int nchunks, int *spun) {
    uint64_t gen = word_gen(atomic_load_explicit(&p->word, memory_order_relaxed)) + 1;
    atomic_store(&p->word, gen << WORD_CHUNK_BITS | (uint64_t)nchunks);
    int asleep = atomic_load(&p->sleepers);
    *spun = 0;
    if (asleep == 0) return 0;
    *spun = atomic_load_explicit(&p->spun_out, memory_order_relaxed);
    if (*spun > asleep) *spun = asleep; /* read apart: keep them consistent */
    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    return asleep;
}

void cpu_pool_free(cpu_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->run_lock);
    atomic_store(&p->stop, true);
    int spun;
    publish(p, 0, &spun);
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
    bool fresh = !p->start_tried; /* workers not spinning yet */
    if (fresh) start_workers(p);
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
    /* No worker reads the job now: those with a chunk of the last run are
     * done (pending reached 0), the others read only the word. */
    p->fn = fn;
    p->arg = arg;
    p->n = n;
    p->chunk = chunk;
    atomic_store_explicit(&p->pending, (int)nchunks - 1, memory_order_relaxed);
    atomic_store_explicit(&p->started, 0, memory_order_relaxed);
    /* While the pool backs off, the caller does not spin either. Workers
     * just started are not judged. */
    int64_t spin = atomic_load_explicit(&p->caller_spin_ns, memory_order_relaxed);
    int64_t t_pub = spin > 0 ? now_ns() : 0;
    if (t_pub < atomic_load_explicit(&p->nospin_until, memory_order_relaxed)) spin = 0;
    int spun, asleep = publish(p, (int)nchunks, &spun);

    fn(arg, 0, chunk, 0);

    await_pending(p, spin, t_pub, !fresh && p->backs_off, (int)nchunks - 1, asleep, spun);
    pthread_mutex_unlock(&p->run_lock);
}
