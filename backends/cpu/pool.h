/* backends/cpu/pool.h: the CPU backend's thread pool.
 *
 * One pool per context runs one parallel loop at a time over [0, n) with
 * static chunking. What must stay true:
 *  - workers start lazily, on the first run that needs them, and never fail
 *    a run: if pthread_create fails the run uses the threads it has (the
 *    caller alone at worst);
 *  - waits spin briefly, then sleep: after a run a worker spins (pause
 *    instructions on an atomic word) for at most 100 us waiting for the
 *    next run, then sleeps on a condition variable; the caller spins at most
 *    50 us for the workers' chunks, then sleeps on one. So back-to-back runs
 *    wake no sleeping thread, and a pool left idle uses no CPU time once its
 *    last run's spins are over. Nobody spins in a pool with more threads
 *    than the CPUs the process may run on, nor for a while (0.25 ms, doubling
 *    up to 256 ms) after a run where a worker did not get a CPU in time (a
 *    loaded machine: there a woken sleeper is scheduled sooner than a
 *    spinner gets its turn);
 *  - chunking is deterministic: with T the threads the pool runs on (the
 *    configured count unless pthread_create failed) and
 *        chunk = round_up(ceil(n / T), grain),
 *    chunk c is [c*chunk, min(n, (c+1)*chunk)), there are ceil(n / chunk) <= T
 *    chunks, chunk c runs on thread c with worker id c, chunk 0 on the caller.
 *    Each worker id gets at most one chunk per run, so per-worker scratch
 *    indexed by it is never shared. Reductions must not depend on where the
 *    boundaries fall (the backend's are written that way); tests check the
 *    exact chunks.
 */
#ifndef LF_CPU_POOL_H
#define LF_CPU_POOL_H

#include <stdbool.h>
#include <stdint.h>

#define CPU_POOL_MAX_THREADS 256

typedef struct cpu_pool cpu_pool;

/* Number of online CPUs (sysconf(_SC_NPROCESSORS_ONLN)), at least 1. */
int cpu_online_cpus(void);

/* Creates a pool that runs loops on `threads` threads in all: the calling
 * thread plus threads-1 workers (threads <= 0 means cpu_online_cpus(); capped
 * at CPU_POOL_MAX_THREADS). Workers start on the first parallel run, not here.
 * Returns NULL on out of memory. Everything a run needs is allocated here, so
 * runs never allocate. */
cpu_pool *cpu_pool_new(int threads);

/* Stops and joins the workers and frees the pool. NULL is a no-op. Must not
 * race with a run on the same pool. */
void cpu_pool_free(cpu_pool *p);

/* The configured number of threads (caller included); 1 for NULL. Worker ids
 * passed to a loop body are always below it. */
int cpu_pool_threads(const cpu_pool *p);

/* The loop body: processes items [begin, end) of a run; `worker` is 0 for the
 * calling thread, 1.. for workers, always < cpu_pool_threads (a chunk index
 * usable for per-thread scratch). */
typedef void (*cpu_range_fn)(void *arg, int64_t begin, int64_t end, int worker);

/* Runs fn over [0, n) in the chunks described at the top of this header
 * (grain < 1 counts as 1). When n <= grain, min_parallel > n or the pool has
 * one thread, fn(arg, 0, n, 0) runs on the caller and no worker is woken (or
 * started). Returns after every chunk is done: a full barrier, so what the
 * chunks wrote is visible to the caller. n <= 0 or a NULL fn calls nothing; a
 * NULL pool runs everything on the caller. Concurrent runs on one pool from
 * different threads are serialized (so fn must not run the same pool: that
 * would deadlock). */
void cpu_pool_run(cpu_pool *p, cpu_range_fn fn, void *arg, int64_t n, int64_t grain,
                  int64_t min_parallel);

/* Test hooks. cpu_pool_set_spin sets how long a worker spins after a run and
 * the caller spins for the workers' chunks before sleeping (nanoseconds;
 * 0: sleep at once), replacing the defaults above (also the no-spin default
 * of an oversubscribed pool), and whether the pool backs off from spinning
 * when it does not pay (pool.c; the default is true); call it between runs.
 * cpu_pool_sleeping is the number of workers asleep (or going to sleep) on
 * the condition variable. */
void cpu_pool_set_spin(cpu_pool *p, int64_t worker_ns, int64_t caller_ns, bool backs_off);
int cpu_pool_sleeping(cpu_pool *p);
/* Test hook: nanoseconds left of the current back-off (workers sleep instead
 * of spinning; pool.c says when), 0 when none. */
int64_t cpu_pool_backoff_ns(cpu_pool *p);

#endif
