/* tests/test_pool.c: the CPU backend's thread pool (backends/cpu/pool.h).
 *
 * - Static chunking is exact: for many (n, threads, grain) every item runs
 *   once, the chunks are the ones pool.h documents, boundaries are multiples
 *   of grain, chunk c runs with worker id c on one fixed thread, chunk 0 on
 *   the caller.
 * - Small runs stay on the caller and start no thread (/proc/self/task).
 * - 10,000 back-to-back runs lose no wake-up (workers spinning, asleep, and
 *   runs spaced across the spin limit, where a worker goes from one to the
 *   other); concurrent callers serialize.
 * - Spins are bounded: idle workers and a waiting caller use almost no CPU
 *   time, workers end up asleep after their spin, a pool is freed at once
 *   while its workers spin, and spinning backs off when a worker cannot run
 *   (caller and worker pinned to one CPU) or wakes slowly after a full spin,
 *   but not for a slow wake-up of a worker that did not spin.
 * - 1000 pools created and freed (used or not) leak no byte and no thread.
 */
#include "backends/cpu/pool.h"
#include "lazyfuse.h"
#include "testutil.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- helpers ---------------------------------------------------------------- */

/* Threads of this process, counted in /proc/self/task. */
static int task_count(void) {
    int n = tu_dir_entries("/proc/self/task", false);
    cr_assert(n >= 0, "cannot open /proc/self/task");
    return n;
}

static double clock_ms(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts)) {}
}

#define MAX_CALLS 64
#define MAX_ITEMS 5000

/* What one run saw: every call of the body, and per-item hit counts. */
typedef struct chunk_rec {
    int64_t begin, end;
    int worker;
    pthread_t self;
} chunk_rec;

typedef struct recorder {
    pthread_mutex_t mu;
    chunk_rec calls[MAX_CALLS];
    int ncalls;
    atomic_int hits[MAX_ITEMS];
    bool count_items; /* false for huge n: record chunks only */
} recorder;

static void rec_reset(recorder *r, bool count_items) {
    r->ncalls = 0;
    r->count_items = count_items;
    for (int i = 0; i < MAX_ITEMS; i++) atomic_store(&r->hits[i], 0);
}

static void rec_body(void *arg, int64_t begin, int64_t end, int worker) {
    recorder *r = arg;
    pthread_mutex_lock(&r->mu);
    if (r->ncalls < MAX_CALLS)
        r->calls[r->ncalls] = (chunk_rec){begin, end, worker, pthread_self()};
    r->ncalls++;
    pthread_mutex_unlock(&r->mu);
    if (r->count_items)
        for (int64_t i = begin; i < end; i++)
            if (i >= 0 && i < MAX_ITEMS) atomic_fetch_add(&r->hits[i], 1);
}

static int cmp_begin(const void *a, const void *b) {
    const chunk_rec *x = a, *y = b;
    return (x->begin > y->begin) - (x->begin < y->begin);
}

/* The chunks pool.h promises, computed independently (128-bit, no care
 * needed for overflow). Returns the number of chunks; chunk c is
 * [c*chunk, min(n, (c+1)*chunk)). */
static int expected_chunks(int64_t n, int threads, int64_t grain, int64_t min_parallel,
                           int64_t *chunk_out) {
    if (n <= 0) return 0;
    if (grain < 1) grain = 1;
    if (threads == 1 || n <= grain || min_parallel > n) {
        *chunk_out = n;
        return 1;
    }
    __int128 per = ((__int128)n + threads - 1) / threads;
    __int128 chunk = (per + grain - 1) / grain * grain;
    *chunk_out = (int64_t)chunk;
    return (int)(((__int128)n + chunk - 1) / chunk);
}

/* Runs one loop on p and checks everything about it. thread_of[w] is the
 * thread seen for worker id w so far (zeroed pthread_t: not seen yet). */
static void check_run(cpu_pool *p, recorder *r, pthread_t *thread_of, bool *seen_of,
                      int64_t n, int64_t grain, int64_t min_parallel) {
    int threads = cpu_pool_threads(p);
    bool count_items = n <= MAX_ITEMS;
    rec_reset(r, count_items);
    cpu_pool_run(p, rec_body, r, n, grain, min_parallel);

    int64_t chunk = 0;
    int want = expected_chunks(n, threads, grain, min_parallel, &chunk);
    cr_assert_eq(r->ncalls, want, "n=%lld threads=%d grain=%lld: %d calls, want %d",
                 (long long)n, threads, (long long)grain, r->ncalls, want);
    qsort(r->calls, (size_t)r->ncalls, sizeof r->calls[0], cmp_begin);
    int64_t g = grain < 1 ? 1 : grain;
    for (int c = 0; c < r->ncalls; c++) {
        chunk_rec *k = &r->calls[c];
        int64_t b = (int64_t)c * chunk;
        int64_t e = n - b > chunk ? b + chunk : n;
        cr_assert(k->begin == b && k->end == e,
                  "n=%lld threads=%d grain=%lld: chunk %d is [%lld,%lld), want [%lld,%lld)",
                  (long long)n, threads, (long long)grain, c, (long long)k->begin,
                  (long long)k->end, (long long)b, (long long)e);
        cr_assert(k->begin % g == 0 && (k->end % g == 0 || k->end == n),
                  "chunk boundary not a multiple of grain %lld", (long long)g);
        cr_assert_eq(k->worker, c, "chunk %d ran with worker id %d", c, k->worker);
        cr_assert(k->worker >= 0 && k->worker < threads, "worker id %d out of range", k->worker);
        if (c == 0)
            cr_assert(pthread_equal(k->self, pthread_self()), "chunk 0 not on the caller");
        else
            cr_assert(!pthread_equal(k->self, pthread_self()), "chunk %d ran on the caller", c);
        for (int d = 0; d < c; d++)
            cr_assert(!pthread_equal(k->self, r->calls[d].self),
                      "chunks %d and %d ran on one thread", d, c);
        if (seen_of[k->worker])
            cr_assert(pthread_equal(thread_of[k->worker], k->self),
                      "worker id %d moved to another thread", k->worker);
        thread_of[k->worker] = k->self;
        seen_of[k->worker] = true;
    }
    if (count_items)
        for (int64_t i = 0; i < n; i++)
            cr_assert_eq(atomic_load(&r->hits[i]), 1,
                         "n=%lld threads=%d grain=%lld: item %lld ran %d times",
                         (long long)n, threads, (long long)grain, (long long)i,
                         atomic_load(&r->hits[i]));
}

static recorder *rec_new(void) {
    recorder *r = calloc(1, sizeof *r);
    cr_assert_not_null(r);
    pthread_mutex_init(&r->mu, NULL);
    return r;
}

static void rec_free(recorder *r) {
    pthread_mutex_destroy(&r->mu);
    free(r);
}

/* ---- tests ------------------------------------------------------------------ */

Test(pool, api_basics) {
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    cr_assert_eq(cpu_online_cpus(), online < 1 ? 1 : online);
    int want_default = cpu_online_cpus() > 256 ? 256 : cpu_online_cpus();
    cpu_pool *p = cpu_pool_new(0);
    cr_assert_not_null(p);
    cr_assert_eq(cpu_pool_threads(p), want_default);
    cpu_pool_free(p);
    p = cpu_pool_new(-3);
    cr_assert_eq(cpu_pool_threads(p), want_default);
    cpu_pool_free(p);
    p = cpu_pool_new(1000);
    cr_assert_eq(cpu_pool_threads(p), 256);
    cpu_pool_free(p);
    p = cpu_pool_new(5);
    cr_assert_eq(cpu_pool_threads(p), 5);
    cpu_pool_free(p);
    cr_assert_eq(cpu_pool_threads(NULL), 1);
    cpu_pool_free(NULL);

    /* n <= 0 and a NULL body call nothing; a NULL pool runs on the caller. */
    recorder *r = rec_new();
    p = cpu_pool_new(3);
    rec_reset(r, true);
    cpu_pool_run(p, rec_body, r, 0, 1, 0);
    cpu_pool_run(p, rec_body, r, -5, 1, 0);
    cpu_pool_run(p, NULL, r, 100, 1, 0);
    cr_assert_eq(r->ncalls, 0);
    cpu_pool_run(NULL, rec_body, r, 100, 1, 0);
    cr_assert_eq(r->ncalls, 1);
    cr_assert(r->calls[0].begin == 0 && r->calls[0].end == 100 && r->calls[0].worker == 0);
    cr_assert(pthread_equal(r->calls[0].self, pthread_self()));
    cpu_pool_free(p);
    rec_free(r);
}

Test(pool, every_item_once_and_exact_chunks) {
    static const int threads[] = {1, 2, 3, 7};
    static const int64_t ns[] = {0, 1, 2, 3, 5, 6, 7, 8, 13, 63, 64, 65, 100, 127, 1000, 4097};
    static const int64_t grains[] = {0, 1, 2, 3, 4, 8, 64, 1000};
    recorder *r = rec_new();
    for (size_t t = 0; t < sizeof threads / sizeof threads[0]; t++) {
        cpu_pool *p = cpu_pool_new(threads[t]);
        cr_assert_not_null(p);
        pthread_t thread_of[8];
        bool seen_of[8] = {0};
        for (int rep = 0; rep < 2; rep++)
            for (size_t g = 0; g < sizeof grains / sizeof grains[0]; g++)
                for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
                    check_run(p, r, thread_of, seen_of, ns[i], grains[g], 0);
        /* More chunks than cores, and a run that really used every thread. */
        int used = 0;
        for (int w = 0; w < 8; w++) used += seen_of[w];
        cr_assert_eq(used, threads[t], "threads=%d: %d distinct worker ids seen", threads[t],
                     used);
        cpu_pool_free(p);
    }
    rec_free(r);
}

Test(pool, huge_n_does_not_overflow) {
    recorder *r = rec_new();
    cpu_pool *p = cpu_pool_new(7);
    pthread_t thread_of[8];
    bool seen_of[8] = {0};
    check_run(p, r, thread_of, seen_of, INT64_MAX, 1, 0);
    cr_assert_eq(r->ncalls, 7);
    check_run(p, r, thread_of, seen_of, INT64_MAX, INT64_MAX / 2, 0);
    cr_assert_eq(r->ncalls, 3); /* the last chunk is the single item INT64_MAX-1 */
    check_run(p, r, thread_of, seen_of, INT64_MAX, 4096, 0);
    check_run(p, r, thread_of, seen_of, INT64_MAX - 1, INT64_MAX - 2, 0);
    cpu_pool_free(p);
    rec_free(r);
}

Test(pool, small_runs_stay_on_the_caller_and_start_no_thread) {
    /* Criterion keeps a thread of its own in the test process, so count
     * from what is there before the pool exists. */
    int base = task_count();
    recorder *r = rec_new();
    cpu_pool *p = cpu_pool_new(4);
    cr_assert_eq(task_count(), base, "cpu_pool_new started threads");
    struct { int64_t n, grain, min_parallel; } cases[] = {
        {1, 1, 0},       /* n <= grain */
        {100, 100, 0},   /* n <= grain */
        {100, 1000, 0},  /* n <= grain */
        {100, 1, 101},   /* min_parallel > n */
        {5000, 8, 1 << 20},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rec_reset(r, true);
        cpu_pool_run(p, rec_body, r, cases[i].n, cases[i].grain, cases[i].min_parallel);
        cr_assert_eq(r->ncalls, 1, "case %zu: %d calls", i, r->ncalls);
        cr_assert(r->calls[0].begin == 0 && r->calls[0].end == cases[i].n &&
                      r->calls[0].worker == 0,
                  "case %zu: ran [%lld,%lld) on worker %d", i, (long long)r->calls[0].begin,
                  (long long)r->calls[0].end, r->calls[0].worker);
        cr_assert(pthread_equal(r->calls[0].self, pthread_self()), "case %zu: not on the caller",
                  i);
        for (int64_t k = 0; k < cases[i].n; k++) cr_assert_eq(atomic_load(&r->hits[k]), 1);
        cr_assert_eq(task_count(), base, "case %zu started a thread", i);
    }
    /* min_parallel == n is parallel: now the workers exist and all run. */
    rec_reset(r, true);
    cpu_pool_run(p, rec_body, r, 100, 1, 100);
    cr_assert_eq(r->ncalls, 4);
    cr_assert_eq(task_count(), base + 3, "a parallel run should start 3 workers");
    pthread_t seen[4];
    int nseen = 0;
    for (int c = 0; c < r->ncalls; c++) {
        bool dup = false;
        for (int d = 0; d < nseen; d++) dup |= pthread_equal(seen[d], r->calls[c].self);
        if (!dup) seen[nseen++] = r->calls[c].self;
    }
    cr_assert_eq(nseen, 4, "%d distinct threads ran the 4 chunks", nseen);
    /* A small run after that still wakes nobody: only the caller is seen. */
    rec_reset(r, true);
    cpu_pool_run(p, rec_body, r, 10, 16, 0);
    cr_assert(r->ncalls == 1 && pthread_equal(r->calls[0].self, pthread_self()));
    cpu_pool_free(p);
    cr_assert_eq(task_count(), base, "cpu_pool_free left threads behind");
    rec_free(r);
}

/* Per-worker partial sums of (item + offset), each on its own cache line. */
typedef struct sum_job {
    struct { int64_t sum, calls; char pad[48]; } part[8];
    int64_t offset;
} sum_job;

static void sum_body(void *arg, int64_t begin, int64_t end, int worker) {
    sum_job *j = arg;
    int64_t s = 0;
    for (int64_t i = begin; i < end; i++) s += i + j->offset;
    j->part[worker].sum += s; /* plain writes: the run's barrier publishes them */
    j->part[worker].calls++;
}

/* Runs `runs` loops of varying n on p and checks every sum. */
static void sum_runs(cpu_pool *p, int runs, uint64_t salt) {
    sum_job *j = calloc(1, sizeof *j);
    cr_assert_not_null(j);
    for (int r = 0; r < runs; r++) {
        memset(j->part, 0, sizeof j->part);
        j->offset = r;
        /* n from 1 to 4000: the number of chunks varies, so some workers
         * skip some runs; grain 1 or 16. */
        int64_t n = 1 + (int64_t)(((uint64_t)r * 7919u + salt) % 4000u);
        int64_t grain = (r & 1) ? 16 : 1;
        cpu_pool_run(p, sum_body, j, n, grain, 0);
        int64_t sum = 0, calls = 0;
        for (int w = 0; w < 8; w++) {
            sum += j->part[w].sum;
            calls += j->part[w].calls;
        }
        int64_t want = n * (n - 1) / 2 + n * (int64_t)r;
        cr_assert_eq(sum, want, "run %d (n=%lld): sum %lld, want %lld", r, (long long)n,
                     (long long)sum, (long long)want);
        int64_t chunk;
        int want_calls = expected_chunks(n, cpu_pool_threads(p), grain, 0, &chunk);
        cr_assert_eq(calls, want_calls, "run %d: %lld calls, want %d", r, (long long)calls,
                     want_calls);
    }
    free(j);
}

Test(pool, ten_thousand_back_to_back_runs, .timeout = 120) { /* a lost wake-up hangs */
    cpu_pool *p = cpu_pool_new(3);
    sum_runs(p, 10000, 0);
    cpu_pool_free(p);
    p = cpu_pool_new(7); /* more threads than cores */
    sum_runs(p, 2000, 12345);
    cpu_pool_free(p);
}

/* Several threads run loops on one pool at once: runs must not overlap. */
typedef struct overlap_check {
    pthread_mutex_t mu;
    void *current; /* the job whose chunks are in flight */
    int inflight;
    int overlaps;
} overlap_check;

static overlap_check ovl = {.mu = PTHREAD_MUTEX_INITIALIZER};

typedef struct caller_job {
    int64_t part[8];
    int64_t calls;
} caller_job;

static void caller_body(void *arg, int64_t begin, int64_t end, int worker) {
    pthread_mutex_lock(&ovl.mu);
    if (ovl.inflight > 0 && ovl.current != arg) ovl.overlaps++;
    ovl.current = arg;
    ovl.inflight++;
    pthread_mutex_unlock(&ovl.mu);
    caller_job *j = arg;
    int64_t s = 0;
    for (int64_t i = begin; i < end; i++) s += i;
    j->part[worker] += s;
    sched_yield(); /* widen the window an overlap would show in */
    pthread_mutex_lock(&ovl.mu);
    ovl.inflight--;
    pthread_mutex_unlock(&ovl.mu);
}

typedef struct caller_arg {
    cpu_pool *pool;
    int bad;
} caller_arg;

static void *caller_thread(void *varg) {
    caller_arg *a = varg;
    caller_job j;
    for (int r = 0; r < 1000; r++) {
        memset(&j, 0, sizeof j);
        int64_t n = 1 + (r * 37) % 600;
        cpu_pool_run(a->pool, caller_body, &j, n, 1, (r % 5 == 0) ? 1000 : 0);
        int64_t sum = 0;
        for (int w = 0; w < 8; w++) sum += j.part[w];
        if (sum != n * (n - 1) / 2) a->bad++;
    }
    return NULL;
}

Test(pool, concurrent_callers_are_serialized, .timeout = 120) { /* a lost run hangs */
    for (int spin = 0; spin < 2; spin++) {
        cpu_pool *p = cpu_pool_new(4);
        if (spin) cpu_pool_set_spin(p, 100000, 50000, true); /* also when oversubscribed */
        pthread_t t[3];
        caller_arg a[3];
        for (int i = 0; i < 3; i++) {
            a[i] = (caller_arg){p, 0};
            cr_assert_eq(pthread_create(&t[i], NULL, caller_thread, &a[i]), 0);
        }
        for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);
        for (int i = 0; i < 3; i++)
            cr_assert_eq(a[i].bad, 0, "spin %d: caller %d saw %d wrong sums", spin, i, a[i].bad);
        cr_assert_eq(ovl.overlaps, 0, "spin %d: runs overlapped %d times", spin, ovl.overlaps);
        cpu_pool_free(p);
    }
}

static void busy_body(void *arg, int64_t begin, int64_t end, int worker) {
    (void)worker;
    volatile double *acc = arg;
    double s = 0;
    for (int64_t i = begin; i < end; i++) s += (double)i * 1e-9;
    acc[0] += s * 0; /* keep the loop; the value does not matter */
}

Test(pool, idle_workers_sleep) {
    int base = task_count();
    cpu_pool *p = cpu_pool_new(4); /* more threads than this machine's cores */
    volatile double acc[1] = {0};
    for (int r = 0; r < 20; r++) cpu_pool_run(p, busy_body, (void *)acc, 1 << 16, 64, 0);
    cr_assert_eq(task_count(), base + 3, "the workers did not start");
    sleep_ms(20); /* let the workers reach their wait */
    /* The caller sleeps too, so the process's CPU time is the workers'. */
    double cpu0 = clock_ms(CLOCK_PROCESS_CPUTIME_ID);
    sleep_ms(200);
    double idle = clock_ms(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
    cr_assert_lt(idle, 20.0, "idle workers used %.1f ms of CPU time in 200 ms", idle);
    /* Still working after the nap. */
    sum_runs(p, 50, 7);
    cpu_pool_free(p);
}

static void slow_worker_body(void *arg, int64_t begin, int64_t end, int worker) {
    (void)arg;
    (void)begin;
    (void)end;
    if (worker == 1) sleep_ms(200);
}

Test(pool, waiting_caller_sleeps) {
    cpu_pool *p = cpu_pool_new(2);
    cpu_pool_run(p, slow_worker_body, NULL, 2, 1, 0); /* starts the worker */
    double wall0 = clock_ms(CLOCK_MONOTONIC);
    double cpu0 = clock_ms(CLOCK_THREAD_CPUTIME_ID);
    cpu_pool_run(p, slow_worker_body, NULL, 2, 1, 0);
    double cpu = clock_ms(CLOCK_THREAD_CPUTIME_ID) - cpu0;
    double wall = clock_ms(CLOCK_MONOTONIC) - wall0;
    cr_assert_geq(wall, 190.0, "the run returned before its slow chunk finished (%.1f ms)",
                  wall);
    cr_assert_lt(cpu, 20.0, "the caller used %.1f ms of CPU time waiting 200 ms", cpu);
    cpu_pool_free(p);
}

/* ---- bounded spins ------------------------------------------------------------ */

/* Waits (up to 10 s) until `want` workers of p are asleep; false if never. */
static bool wait_sleeping(cpu_pool *p, int want) {
    for (int i = 0; i < 10000; i++) {
        if (cpu_pool_sleeping(p) == want) return true;
        sleep_ms(1);
    }
    return false;
}

static void busy_wait_us(double us) {
    double t0 = clock_ms(CLOCK_MONOTONIC);
    while (clock_ms(CLOCK_MONOTONIC) - t0 < us * 1e-3) {}
}

Test(pool, spinning_back_to_back_runs, .timeout = 300) { /* a lost or doubled run fails */
    /* Workers spinning (the defaults, forced also where the machine has fewer
     * CPUs), spinning on more threads than cores (the pool backs off), and
     * never spinning (every run wakes sleeping workers). */
    static const struct { int threads, runs; int64_t worker_ns, caller_ns; bool backs_off; } cfg[] = {
        {2, 10000, 100000, 50000, true}, {2, 5000, 100000, 50000, false},
        {3, 3000, 100000, 50000, true}, {7, 1000, 100000, 50000, true},
        {3, 3000, 0, 0, true}, {3, 3000, 0, 50000, true}, {3, 3000, 100000, 0, true},
    };
    for (size_t i = 0; i < sizeof cfg / sizeof cfg[0]; i++) {
        cpu_pool *p = cpu_pool_new(cfg[i].threads);
        cpu_pool_set_spin(p, cfg[i].worker_ns, cfg[i].caller_ns, cfg[i].backs_off);
        sum_runs(p, cfg[i].runs, i);
        cpu_pool_free(p);
    }
}

Test(pool, runs_across_the_spin_limit, .timeout = 300) { /* a lost wake-up hangs */
    /* Short spins, and gaps between runs on both sides of them: workers go
     * from spinning to sleeping around the time the next run is published,
     * the window a lost wake-up would fall in. Every 200 runs the caller
     * naps until both workers sleep. */
    cpu_pool *p = cpu_pool_new(3);
    cpu_pool_set_spin(p, 20000, 10000, false); /* no back-off: workers keep spinning */
    sum_job *j = calloc(1, sizeof *j);
    cr_assert_not_null(j);
    uint64_t rng = 0x9e3779b97f4a7c15u;
    for (int r = 0; r < 4000; r++) {
        memset(j->part, 0, sizeof j->part);
        j->offset = r;
        int64_t n = 2 + r % 3000;
        cpu_pool_run(p, sum_body, j, n, 1, 0);
        int64_t sum = 0;
        for (int w = 0; w < 8; w++) sum += j->part[w].sum;
        cr_assert_eq(sum, n * (n - 1) / 2 + n * (int64_t)r, "run %d: wrong sum", r);
        rng = rng * 6364136223846793005u + 1442695040888963407u;
        busy_wait_us((double)((rng >> 33) % 60)); /* 0..60 us, the spin is 20 */
        if (r % 200 == 199)
            cr_assert(wait_sleeping(p, 2), "run %d: the workers never went to sleep (%d asleep)", r,
                      cpu_pool_sleeping(p));
    }
    free(j);
    cpu_pool_free(p);
}

Test(pool, idle_spinning_pool_sleeps) {
    /* The default spins, on a pool no larger than this machine (forced, in
     * case it has one CPU; no back-off, which would put the worker to sleep
     * early): once the spins of the last run are over, the workers sleep
     * and the process uses no CPU time. */
    cpu_pool *p = cpu_pool_new(2);
    cpu_pool_set_spin(p, 100000, 50000, false);
    volatile double acc[1] = {0};
    for (int r = 0; r < 200; r++) cpu_pool_run(p, busy_body, (void *)acc, 1 << 12, 64, 0);
    double cpu0 = clock_ms(CLOCK_PROCESS_CPUTIME_ID);
    sleep_ms(300);
    double idle = clock_ms(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
    /* A spin is 0.1 ms; the slack is for a loaded machine or valgrind. */
    cr_assert_lt(idle, 30.0, "an idle pool used %.1f ms of CPU time in 300 ms", idle);
    cr_assert(wait_sleeping(p, 1), "the worker is not asleep");
    sum_runs(p, 50, 9); /* a run after the workers went to sleep */
    cpu_pool_free(p);
}

Test(pool, free_while_workers_spin, .timeout = 120) {
    /* Workers told to spin for 10 s are stopped by free at once: 30 pools
     * take well under the 10 s a single full spin would. */
    size_t base = lf_debug_live_bytes();
    int tasks = task_count();
    sum_job *j = calloc(1, sizeof *j);
    cr_assert_not_null(j);
    double t0 = clock_ms(CLOCK_MONOTONIC);
    for (int i = 0; i < 30; i++) {
        cpu_pool *p = cpu_pool_new(2 + i % 3);
        cpu_pool_set_spin(p, 10000000000, 0, false);
        memset(j->part, 0, sizeof j->part);
        cpu_pool_run(p, sum_body, j, 100, 1, 0);
        int64_t sum = 0;
        for (int w = 0; w < 8; w++) sum += j->part[w].sum;
        cr_assert_eq(sum, 100 * 99 / 2, "pool %d: wrong sum", i);
        cpu_pool_free(p);
    }
    double wall = clock_ms(CLOCK_MONOTONIC) - t0;
    free(j);
    cr_assert_lt(wall, 9000.0, "freeing 30 pools of spinning workers took %.0f ms", wall);
    cr_assert_eq(lf_debug_live_bytes(), base);
    cr_assert_eq(task_count(), tasks, "freed pools left threads behind");
}

Test(pool, spinning_backs_off_when_a_worker_cannot_run, .timeout = 120) {
    /* Caller and worker pinned to one CPU: a spinning caller holds the CPU
     * its worker needs, so a run soon finds the worker has not taken its
     * chunk; the pool then backs off (workers sleep instead of spinning for
     * a while) and stays correct. */
    cpu_set_t old, one;
    cr_assert_eq(pthread_getaffinity_np(pthread_self(), sizeof old, &old), 0);
    int cpu = 0;
    while (cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &old)) cpu++;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    if (pthread_setaffinity_np(pthread_self(), sizeof one, &one)) cr_skip_test("cannot pin threads");
    cpu_pool *p = cpu_pool_new(2); /* its worker starts below and inherits the mask */
    cpu_pool_set_spin(p, 100000, 50000, true);
    sum_job *j = calloc(1, sizeof *j);
    cr_assert_not_null(j);
    bool backed_off = false;
    for (int r = 0; r < 5000 && !backed_off; r++) {
        cpu_pool_run(p, sum_body, j, 64, 1, 0);
        backed_off = cpu_pool_backoff_ns(p) > 0;
    }
    sum_runs(p, 500, 11);
    cpu_pool_free(p);
    free(j);
    pthread_setaffinity_np(pthread_self(), sizeof old, &old);
    cr_assert(backed_off, "5000 runs on one CPU never backed off");
}

Test(pool, slow_wake_ups_judged_only_after_a_full_spin, .timeout = 120) {
    /* The caller spins about a microsecond, less than any wake-up takes. A
     * worker that sleeps without spinning (as during a back-off) is not
     * judged by its wake-up: no run backs off. One that slept after a full
     * (here 1 ns) spin is: a run soon backs off. */
    for (int spun = 0; spun < 2; spun++) {
        cpu_pool *p = cpu_pool_new(2);
        cpu_pool_set_spin(p, spun, 1, true);
        sum_runs(p, 1, 5); /* starts the worker */
        bool backed_off = false;
        for (int r = 0; r < 200 && !backed_off; r++) {
            cr_assert(wait_sleeping(p, 1), "the worker is not asleep");
            sum_runs(p, 1, (uint64_t)r);
            backed_off = cpu_pool_backoff_ns(p) > 0;
        }
        cpu_pool_free(p);
        cr_assert_eq(backed_off, spun == 1, "worker spin %d ns: %s", spun,
                     spun ? "a slow wake-up after a full spin never backed off"
                          : "a worker that never spins was judged by its wake-up");
    }
}

Test(pool, thousand_pools_leak_nothing) {
    size_t base = lf_debug_live_bytes();
    int tasks = task_count();
    sum_job *j = calloc(1, sizeof *j);
    for (int i = 0; i < 1000; i++) {
        cpu_pool *p = cpu_pool_new(i % 5); /* 0: one per online CPU */
        cr_assert_not_null(p);
        cr_assert_gt(lf_debug_live_bytes(), base);
        memset(j->part, 0, sizeof j->part);
        switch (i % 3) {
        case 0: break; /* never used */
        case 1: cpu_pool_run(p, sum_body, j, 50, 64, 0); break; /* caller only */
        case 2: cpu_pool_run(p, sum_body, j, 50, 1, 0); break; /* parallel */
        }
        int64_t sum = 0;
        for (int w = 0; w < 8; w++) sum += j->part[w].sum;
        cr_assert_eq(sum, i % 3 ? 50 * 49 / 2 : 0, "pool %d: wrong sum", i);
        cpu_pool_free(p);
        cr_assert_eq(lf_debug_live_bytes(), base, "pool %d leaked %zu bytes", i,
                     lf_debug_live_bytes() - base);
    }
    free(j);
    cr_assert_eq(task_count(), tasks, "freed pools left threads behind");
}

Test(pool, out_of_memory_returns_null) {
    size_t base = lf_debug_live_bytes();
    lf_debug_fail_alloc(1, false);
    cpu_pool *p = cpu_pool_new(4);
    lf_debug_fail_alloc(0, false);
    cr_assert_null(p, "cpu_pool_new succeeded under an injected allocation failure");
    cr_assert_eq(lf_debug_live_bytes(), base);
    /* A pool made before failures start never allocates in a run. */
    p = cpu_pool_new(3);
    cr_assert_not_null(p);
    lf_debug_fail_alloc(1, true);
    sum_runs(p, 20, 3);
    lf_debug_fail_alloc(0, false);
    cpu_pool_free(p);
    cr_assert_eq(lf_debug_live_bytes(), base);
}
