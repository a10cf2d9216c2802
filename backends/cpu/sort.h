/* backends/cpu/sort.h: the CPU backend's sort runtime.
 *
 * Sorts rows of unsigned integer keys, ascending and stable, and writes the
 * first k entries of each row (keys, positions, or both). The keys were
 * written by a generated kernel and are already order-preserving (floats and
 * signed integers mapped to unsigned integers, descending folded in:
 * graph_sort_key), so this file knows nothing of dtypes. What must stay true:
 *  - the result is the unique stable ascending order (ties keep position
 *    order), whatever the path taken and whatever the pool's thread count:
 *    every path is an exact stable sort, and parallel paths only split work,
 *    never the order (offsets are laid out in (digit, chunk) order);
 *  - scratch is one block (from the caller's cpu_sort_cache when it gives
 *    one, else graph_malloc) taken before anything is written; out of
 *    memory returns false with keys_out, idx_out and keys untouched;
 *    nothing aborts.
 * Paths, per row: n <= CPU_SORT_TINY an insertion sort; a row already in
 * order (non-decreasing, or non-increasing: its runs of equal keys taken
 * last first) copied out after a check that stops at an unordered row's
 * first rise and first fall (a long row checked and copied across the
 * pool); k <= CPU_SORT_TOPK_MAX
 * and k much smaller than n a top-k selection (with AVX-512, for k <= 16: the
 * k best kept in vector registers, 16 keys compared at once, rows of up to
 * 8192 keys bounded first by their 16 lane minima and then collected in a
 * second pass over the row in cache; else one pass keeping the k best,
 * falling back to the radix sort on inputs where it would do too many
 * insertions); a long row (split across the pool) of few distinct keys
 * counted, not sorted (its keys written as runs, its positions scattered
 * in (key, chunk) order); otherwise an LSD radix sort (8- or 11-bit digits, constant
 * digits skipped, positions as uint32). Rows run in parallel on the pool,
 * each on one thread. Fewer rows than threads with long rows are split
 * across the pool: an MSD scatter on the top 16 bits into cache-sized
 * buckets, each bucket sorted by LSD in cache on a thread of its own (a
 * bucket too large for that falls back to an LSD sort of the whole row
 * across the pool).
 */
#ifndef LF_CPU_SORT_H
#define LF_CPU_SORT_H

#include "backends/cpu/pool.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CPU_SORT_TINY 32      /* rows of at most this many keys: insertion sort */
#define CPU_SORT_TOPK_MAX 64  /* the single-pass top-k path is for k up to this */

/* Work memory kept between sorts (a context's, freed with it): a sort of
 * 2^24 keys needs some 200 MB of scratch, and fresh pages cost more to
 * fault in and clear than the sort itself. cpu_sort_cache_take gives a kept
 * block of at least `bytes` (or a fresh one, NULL when out of memory);
 * cpu_sort_cache_give hands a block back (it keeps the CPU_SORT_CACHED
 * largest, frees the rest). Thread-safe. */
#define CPU_SORT_CACHED 2
typedef struct cpu_sort_cache cpu_sort_cache;
cpu_sort_cache *cpu_sort_cache_new(void);      /* NULL when out of memory */
void cpu_sort_cache_free(cpu_sort_cache *c);   /* NULL is a no-op */
void *cpu_sort_cache_take(cpu_sort_cache *c, size_t bytes); /* c NULL: graph_malloc */
void cpu_sort_cache_give(cpu_sort_cache *c, void *p, size_t bytes); /* c NULL: graph_free */

typedef struct cpu_sort_rows_args {
    int64_t nrows;      /* rows (>= 0) */
    int64_t n;          /* keys per row (>= 0) */
    int64_t k;          /* entries wanted per row, 0..n: the first k of the
                           stable ascending order */
    bool wide;          /* keys are uint64_t, else uint32_t */
    void *keys;         /* nrows*n keys, row r at keys + r*n (in elements);
                           used as scratch: its contents are unspecified
                           after a successful call */
    void *keys_out;     /* nrows*k: row r's first k keys in order (same width
                           as keys), or NULL (not wanted) */
    int64_t *idx_out;   /* nrows*k: their positions within the row
                           (0..n-1), or NULL (not wanted) */
    cpu_sort_cache *cache; /* where scratch comes from and goes back to, or
                           NULL (graph_malloc, freed on return) */
    /* When not NULL (and keys_out is): called once for every entry of
     * keys_out, as post(post_arg, row, b, e) for entries [b, e) of row
     * `row` once they are final, by the thread that wrote them and right
     * after (mostly still in its cache; not after the streaming stores of
     * a long row's LSD fallback, whose whole row is handed over at the
     * end on the caller's thread): a caller may rewrite them in place (the
     * CPU backend decodes keys into values there). */
    void (*post)(void *post_arg, int64_t row, int64_t b, int64_t e);
    void *post_arg;
} cpu_sort_rows_args;
/* keys_out and idx_out must not overlap keys or each other. */

/* Sorts every row of a and writes the outputs it asks for: rows in parallel
 * on the pool (NULL: the caller alone), or a long row split across the
 * pool's threads. The outputs are identical for any thread count. Returns
 * false only when out of memory (scratch from graph_malloc); then keys,
 * keys_out and idx_out are untouched. k == 0, nrows == 0 or both outputs
 * NULL write nothing and return true without allocating. */
bool cpu_sort_rows(cpu_pool *pool, const cpu_sort_rows_args *a);

/* Test hooks (process-wide; tests only, never set while a sort runs):
 * rows longer than cpu_sort_pos32_max keys carry their positions as
 * uint64_t (default UINT32_MAX: lowering it tests that path on small rows);
 * cpu_sort_long_min is the row length from which fewer rows than threads
 * are split across the pool (default 65536). */
extern int64_t cpu_sort_pos32_max;
extern int64_t cpu_sort_long_min;
/* Long rows (split across the pool) of at least 2 * cpu_sort_msd_target
 * keys take the MSD path: buckets of about this many keys (default 16384;
 * lowering it tests that path on small rows; 0 turns it off). */
extern int64_t cpu_sort_msd_target;
/* Rows already in order are copied out (default true; false sends them down
 * the other paths, so that tests cover those paths on ordered inputs too). */
extern bool cpu_sort_check_order;
/* Long rows of few distinct keys (at most 32 in a sample of 1024, 64 in
 * all) are counted, not sorted (default true; false sends them down the
 * radix paths). */
extern bool cpu_sort_check_few;
/* Their counting pass compares 16 uint32 keys with every candidate at once
 * where the CPU has AVX-512 (default true; false: the table look-up per key,
 * so that tests cover both). */
extern bool cpu_sort_few_avx512;

#endif
