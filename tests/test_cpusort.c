/* tests/test_cpusort.c: the CPU sort runtime (backends/cpu/sort.h).
 *
 * Every path (tiny rows, top-k, radix rows, one long row split across the
 * pool, 64-bit positions) against an oracle: qsort of (key, pos) pairs with
 * the position as tiebreak, which is the unique stable order. Both key
 * widths, keys_out only, idx_out only and both, on pools of 1, 2 and 3
 * threads (so results are identical across thread counts), on key sets that
 * stress the paths: random, three values (ties everywhere), all equal (every
 * digit constant), only the high bits differing, descending (the top-k path
 * gives up), and ordered inputs (ascending and descending with ties, one
 * key out of order at the end), each also with the check for ordered rows
 * off (cpu_sort_check_order), so the other paths still see them. Long rows go through the MSD path (a scatter on the top 16
 * bits, then buckets) or, when skewed, the LSD path. Edge shapes write nothing: nrows = 0, n = 0, k = 0. Out of
 * memory returns false with outputs untouched and nothing leaked. Sizes
 * shrink under valgrind.
 */
#include "backends/cpu/sort.h"
#include "lazyfuse.h"
#include "testutil.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers ---------------------------------------------------------------- */

enum dist { D_RANDOM, D_THREE, D_EQUAL, D_HIGH, D_DESC, D_SMALL, D_ASC_TIES, D_DESC_TIES, D_ALMOST, D_FEW,
            D_FEW_MISS };
static const char *dist_name[] = {"random", "three", "equal", "high", "desc", "small", "ascending with ties",
                                  "descending with ties", "ascending but the last", "few (30 values)",
                                  "few and a rare one"};

/* Output modes: which of keys_out / idx_out are asked for. */
enum { M_KEYS = 1, M_IDX = 2, M_BOTH = 3 };

static uint64_t key_of(enum dist d, bool wide, int64_t i, int64_t n) {
    uint64_t r = tu_rand(), top = wide ? 62 : 30;
    uint64_t v;
    switch (d) {
    case D_RANDOM: v = r; break;
    case D_THREE: v = (uint64_t[]){7, 1000, 0xfffffff0u}[r % 3]; break;
    case D_EQUAL: v = 0x12345678u; break;
    case D_HIGH: v = ((r % 4) << top) | 0x55; break;
    case D_DESC: v = (uint64_t)(n - i) * 3; break;
    case D_ASC_TIES: v = (uint64_t)(i / 3) << (wide ? 40 : 8); break;
    case D_DESC_TIES: v = (uint64_t)((n - i) / 3) << (wide ? 40 : 8); break;
    case D_ALMOST: v = i + 1 < n ? (uint64_t)i + 10 : 0; break; /* in order up to its last key */
    case D_FEW: v = (r % 30) * 0x9E3779B97F4A7C15ull >> (wide ? 0 : 32); break; /* 30 keys over the range */
    case D_FEW_MISS: /* 20 keys, and every 1021st key one of 4 others (the sample of 1024 sees at most one) */
        v = i % 1021 == 5 ? 0xC0FFEE00u + r % 4 : (r % 20) * 0x9E3779B97F4A7C15ull >> (wide ? 8 : 36);
        break;
    default: v = r % 1000; break;
    }
    return wide ? v : (uint32_t)v;
}

typedef struct pair {
    uint64_t key;
    int64_t pos;
} pair;

static int cmp_pair(const void *a, const void *b) {
    const pair *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* A data set: nrows x n keys of one width and the oracle's order. */
typedef struct dataset {
    int64_t nrows, n;
    bool wide;
    void *keys;   /* original keys */
    pair *order;  /* nrows x n: sorted (key, pos) per row */
} dataset;

static dataset make(int64_t nrows, int64_t n, bool wide, enum dist d) {
    dataset s = {nrows, n, wide, NULL, NULL};
    size_t ks = wide ? 8 : 4, tot = (size_t)(nrows * n);
    s.keys = malloc(tot * ks + 1);
    s.order = malloc(tot * sizeof(pair) + 1);
    cr_assert(s.keys && s.order);
    for (int64_t r = 0; r < nrows; r++) {
        pair *o = s.order + r * n;
        for (int64_t i = 0; i < n; i++) {
            uint64_t v = key_of(d, wide, i, n);
            if (wide) ((uint64_t *)s.keys)[r * n + i] = v;
            else ((uint32_t *)s.keys)[r * n + i] = (uint32_t)v;
            o[i] = (pair){v, i};
        }
        qsort(o, (size_t)n, sizeof *o, cmp_pair);
    }
    return s;
}

static void drop(dataset *s) {
    free(s->keys);
    free(s->order);
}

static cpu_pool *pools[4];

/* Kept work memory (cpu_sort_cache): the 2-thread runs take their scratch
 * from it and give it back, so later sorts reuse blocks earlier ones left. */
static cpu_sort_cache *cache;

static void pools_init(void) {
    for (int t = 1; t <= 3; t++) {
        pools[t] = cpu_pool_new(t);
        cr_assert(pools[t]);
    }
    cache = cpu_sort_cache_new();
    cr_assert(cache);
}

static void pools_fini(void) {
    for (int t = 1; t <= 3; t++) cpu_pool_free(pools[t]);
    cpu_sort_cache_free(cache);
    lf_debug_fail_alloc(0, false);
}

TestSuite(cpusort, .init = pools_init, .fini = pools_fini);

#define SENTINEL 0xA5

/* Sorts s on `threads` threads with k and output mode and compares every
 * output entry with the oracle. */
static void check_one_path(const dataset *s, int64_t k, int mode, int threads, const char *what) {
    size_t ks = s->wide ? 8 : 4, tot = (size_t)(s->nrows * s->n), outn = (size_t)(s->nrows * k);
    void *keys = malloc(tot * ks + 1);
    void *kout = mode & M_KEYS ? malloc(outn * ks + 1) : NULL;
    int64_t *iout = mode & M_IDX ? malloc(outn * 8 + 1) : NULL;
    cr_assert(keys);
    memcpy(keys, s->keys, tot * ks);
    if (kout) memset(kout, SENTINEL, outn * ks);
    if (iout) memset(iout, SENTINEL, outn * 8);
    cpu_sort_rows_args a = {.nrows = s->nrows, .n = s->n, .k = k, .wide = s->wide,
                            .keys = keys, .keys_out = kout, .idx_out = iout,
                            .cache = threads == 2 ? cache : NULL};
    cr_assert(cpu_sort_rows(pools[threads], &a), "%s: returned false", what);
    for (int64_t r = 0; r < s->nrows; r++) {
        const pair *o = s->order + r * s->n;
        for (int64_t j = 0; j < k; j++) {
            int64_t e = r * k + j;
            if (kout) {
                uint64_t got = s->wide ? ((uint64_t *)kout)[e] : ((uint32_t *)kout)[e];
                if (got != o[j].key)
                    cr_assert_fail("%s (n=%lld k=%lld wide=%d mode=%d threads=%d): row %lld entry %lld key %llx, want %llx",
                             what, (long long)s->n, (long long)k, s->wide, mode, threads, (long long)r,
                             (long long)j, (unsigned long long)got, (unsigned long long)o[j].key);
            }
            if (iout && iout[e] != o[j].pos)
                cr_assert_fail("%s (n=%lld k=%lld wide=%d mode=%d threads=%d): row %lld entry %lld pos %lld, want %lld", what,
                         (long long)s->n, (long long)k, s->wide, mode, threads, (long long)r, (long long)j,
                         (long long)iout[e], (long long)o[j].pos);
        }
    }
    free(keys);
    free(kout);
    free(iout);
}

/* check_one_path with the checks for ordered rows and for few distinct
 * keys on, and again off. */
static void check_one(const dataset *s, int64_t k, int mode, int threads, const char *what) {
    check_one_path(s, k, mode, threads, what);
    cpu_sort_check_order = false;
    cpu_sort_check_few = false;
    check_one_path(s, k, mode, threads, what);
    cpu_sort_check_order = true;
    cpu_sort_check_few = true;
}

/* Every mode on 1, 2 and 3 threads. */
static void check_all(const dataset *s, int64_t k, const char *what) {
    for (int mode = 1; mode <= 3; mode++)
        for (int t = 1; t <= 3; t++) check_one(s, k, mode, t, what);
}

/* For each width and distribution, rows of n with each k in ks[0..nk). */
static void sweep(int64_t nrows, int64_t n, const int64_t *kk, int nk, const enum dist *ds, int nd) {
    for (int wi = 0; wi < 2; wi++)
        for (int di = 0; di < nd; di++) {
            dataset s = make(nrows, n, wi == 1, ds[di]);
            for (int i = 0; i < nk; i++)
                if (kk[i] >= 0 && kk[i] <= n) check_all(&s, kk[i], dist_name[ds[di]]);
            drop(&s);
        }
}

static const enum dist ALL[] = {D_RANDOM, D_THREE, D_EQUAL, D_HIGH, D_DESC, D_SMALL, D_ASC_TIES, D_DESC_TIES, D_ALMOST};
#define NALL 9

/* ---- paths ------------------------------------------------------------------ */

Test(cpusort, tiny_rows) {
    for (int64_t n = 1; n <= CPU_SORT_TINY; n += (n < 6 ? 1 : 7)) {
        int64_t kk[] = {0, 1, n / 2, n - 1, n};
        sweep(40, n, kk, 5, ALL, NALL);
    }
    int64_t kk[] = {0, 1, 32};
    sweep(40, 32, kk, 3, ALL, NALL);
}

Test(cpusort, topk_rows) {
    int64_t kk[] = {0, 1, 5, 10, 64};
    sweep(tu_on_valgrind() ? 20 : 150, 1000, kk, 5, ALL, NALL);
    int64_t k2[] = {1, 10, 33};
    sweep(30, 133, k2, 3, ALL, NALL); /* n not a multiple of the 16-key blocks */
}

Test(cpusort, radix_rows) {
    int64_t kk[] = {1, 40, 65, 99, 100};
    sweep(30, 100, kk, 5, ALL, NALL); /* 65, 99: k < n on the radix path */
    int64_t k2[] = {33};
    sweep(30, 33, k2, 1, ALL, NALL);
    int64_t n = tu_on_valgrind() ? 1000 : 4096;
    int64_t k3[] = {n, n / 2, 200};
    sweep(8, n, k3, 3, ALL, NALL);
}

/* Each width and distribution of ds with each k of kk in output mode M_BOTH
 * on 1-3 threads, and in the other two modes on 2 threads. */
static void sweep_light(int64_t nrows, int64_t n, const int64_t *kk, int nk, const enum dist *ds, int nd) {
    for (int wi = 0; wi < 2; wi++)
        for (int di = 0; di < nd; di++) {
            dataset s = make(nrows, n, wi == 1, ds[di]);
            for (int i = 0; i < nk; i++) {
                for (int t = 1; t <= 3; t++) check_one(&s, kk[i], M_BOTH, t, dist_name[ds[di]]);
                check_one(&s, kk[i], M_KEYS, 2, dist_name[ds[di]]);
                check_one(&s, kk[i], M_IDX, 2, dist_name[ds[di]]);
            }
            drop(&s);
        }
}

/* 11-bit digits (rows of at least 2^16 keys), rows in parallel. */
Test(cpusort, radix_rows_11bit) {
    int64_t n = 70000, kk[] = {n, 1000};
    enum dist ds[] = {D_RANDOM, D_THREE, D_HIGH};
    sweep_light(3, n, kk, 2, ds, 3);
}

/* One long row split across the pool (threads 2 and 3; 1 sorts it alone). */
Test(cpusort, long_row) {
    int64_t n = tu_on_valgrind() ? (1 << 17) : (1 << 20);
    int64_t kk[] = {n, 10};
    enum dist dr[] = {D_RANDOM};
    sweep_light(1, n, kk, 2, dr, 1);
    n = 1 << 17; /* still several chunks */
    int64_t k2[] = {n, n - 5, 64};
    enum dist ds[] = {D_RANDOM, D_THREE, D_HIGH, D_DESC, D_EQUAL, D_ASC_TIES, D_DESC_TIES, D_ALMOST};
    sweep_light(1, n, k2, 3, ds, 8);
    enum dist de[] = {D_EQUAL};
    int64_t ke[] = {n, 3};
    sweep_light(2, n, ke, 2, de, 1);
}

/* Long rows of few distinct keys (the counting path): 3 and 30 keys, k = n
 * and k < n (above the top-k path's k), keys the sample misses (then the
 * radix path), every output mode, 1-3 threads, rows of different lengths. */
Test(cpusort, long_row_few_distinct) {
    int64_t n = 1 << 17, kk[] = {n, n - 7, 1000};
    enum dist ds[] = {D_THREE, D_FEW, D_FEW_MISS};
    for (int v = 0; v < 2; v++) { /* with and without the AVX-512 count */
        cpu_sort_few_avx512 = v == 0;
        sweep_light(1, n, kk, 3, ds, 3);
        int64_t n2 = 70001, k2[] = {n2};
        sweep_light(2, n2, k2, 1, ds, 3);
    }
    cpu_sort_few_avx512 = true;
}

Test(cpusort, long_row_odd_size) {
    int64_t n = tu_on_valgrind() ? (1 << 17) + 3 : (1 << 22) + 3;
    dataset s = make(1, n, false, D_RANDOM);
    for (int t = 1; t <= 3; t++) check_one(&s, n, M_BOTH, t, "random");
    check_one(&s, n, M_KEYS, 2, "random");
    drop(&s);
}

/* The long-row path on small rows (cpu_sort_long_min lowered): many chunks,
 * chunks shorter than k, every distribution. */
Test(cpusort, long_row_small_chunks) {
    cpu_sort_long_min = 40;
    int64_t kk[] = {0, 1, 10, 64, 300, 999, 1000};
    sweep(2, 1000, kk, 7, ALL, NALL);
    int64_t k2[] = {1, 50, 77};
    sweep(1, 77, k2, 3, ALL, NALL);
    cpu_sort_long_min = 65536;
}

/* The MSD path of long rows (cpu_sort_msd_target lowered): many buckets,
 * buckets straddling k, skewed inputs that fall back to the LSD path. */
Test(cpusort, long_row_msd) {
    cpu_sort_long_min = 40;
    cpu_sort_msd_target = 64;
    int64_t kk[] = {1, 10, 100, 2001, 3999, 4000};
    sweep(2, 4000, kk, 6, ALL, NALL);
    cpu_sort_pos32_max = 100; /* 64-bit positions through both steps */
    int64_t k2[] = {70, 4000};
    sweep(1, 4000, k2, 2, ALL, NALL);
    cpu_sort_pos32_max = UINT32_MAX;
    cpu_sort_msd_target = 16384;
    cpu_sort_long_min = 65536;
}

/* Positions carried as uint64_t (cpu_sort_pos32_max lowered). */
Test(cpusort, pos64) {
    cpu_sort_pos32_max = 100;
    int64_t kk[] = {1, 10, 500, 1000};
    sweep(3, 1000, kk, 4, ALL, NALL);
    cpu_sort_long_min = 40;
    sweep(2, 1000, kk, 4, ALL, NALL);
    cpu_sort_long_min = 65536;
    cpu_sort_pos32_max = UINT32_MAX;
}

/* ---- edges ------------------------------------------------------------------ */

/* Nothing is written (outputs keep their sentinel) and true comes back. */
static void expect_no_write(int64_t nrows, int64_t n, int64_t k) {
    uint32_t keys[8] = {5, 4, 3, 2, 1, 0, 9, 8}, kout[8];
    int64_t iout[8];
    memset(kout, SENTINEL, sizeof kout);
    memset(iout, SENTINEL, sizeof iout);
    for (int t = 1; t <= 3; t++) {
        cpu_sort_rows_args a = {.nrows = nrows, .n = n, .k = k, .keys = keys, .keys_out = kout, .idx_out = iout};
        cr_assert(cpu_sort_rows(pools[t], &a));
        for (int i = 0; i < 8; i++) {
            cr_assert_eq(kout[i], 0xA5A5A5A5u);
            cr_assert_eq((uint64_t)iout[i], 0xA5A5A5A5A5A5A5A5u);
        }
    }
}

Test(cpusort, empty_shapes) {
    expect_no_write(0, 5, 2);  /* nrows = 0 */
    expect_no_write(3, 0, 0);  /* n = 0 */
    expect_no_write(2, 4, 0);  /* k = 0 */
    expect_no_write(2, 4000, 0);
    /* both outputs NULL */
    uint32_t keys[4] = {3, 2, 1, 0};
    cpu_sort_rows_args a = {.nrows = 1, .n = 4, .k = 4, .keys = keys};
    cr_assert(cpu_sort_rows(pools[2], &a));
    /* a NULL pool runs on the caller */
    uint32_t ko[4];
    int64_t io[4];
    a.keys_out = ko, a.idx_out = io;
    cr_assert(cpu_sort_rows(NULL, &a));
    for (int i = 0; i < 4; i++) cr_assert(ko[i] == (uint32_t)i && io[i] == 3 - i);
}

Test(cpusort, n_one) {
    int64_t kk[] = {0, 1};
    sweep(100, 1, kk, 2, ALL, NALL);
}

/* ---- out of memory ---------------------------------------------------------- */

/* Fails the first allocation of each shape: false, outputs and keys
 * untouched, no leak. */
static void oom(int64_t nrows, int64_t n, int64_t k, int threads) {
    dataset s = make(nrows, n, false, D_RANDOM);
    size_t tot = (size_t)(nrows * n), outn = (size_t)(nrows * k);
    uint32_t *keys = malloc(tot * 4), *kout = malloc(outn * 4);
    int64_t *iout = malloc(outn * 8);
    memcpy(keys, s.keys, tot * 4);
    memset(kout, SENTINEL, outn * 4);
    memset(iout, SENTINEL, outn * 8);
    size_t base = lf_debug_live_bytes();
    lf_debug_fail_alloc(1, true);
    cpu_sort_rows_args a = {.nrows = nrows, .n = n, .k = k, .keys = keys, .keys_out = kout, .idx_out = iout};
    bool ok = cpu_sort_rows(pools[threads], &a);
    lf_debug_fail_alloc(0, false);
    cr_assert(!ok, "n=%lld: sort succeeded with every allocation failing", (long long)n);
    cr_assert_eq(lf_debug_live_bytes(), base);
    cr_assert(memcmp(keys, s.keys, tot * 4) == 0, "keys changed");
    for (size_t i = 0; i < outn; i++) cr_assert(kout[i] == 0xA5A5A5A5u && (uint64_t)iout[i] == 0xA5A5A5A5A5A5A5A5u);
    /* and then it works */
    cr_assert(cpu_sort_rows(pools[threads], &a));
    cr_assert_eq(lf_debug_live_bytes(), base);
    for (int64_t r = 0; r < nrows; r++)
        for (int64_t j = 0; j < k; j++) cr_assert_eq(iout[r * k + j], s.order[r * n + j].pos);
    free(keys);
    free(kout);
    free(iout);
    drop(&s);
}

Test(cpusort, out_of_memory) {
    oom(10, 1000, 1000, 1);  /* radix rows */
    oom(10, 1000, 1000, 3);
    oom(10, 1000, 5, 2);     /* top-k rows keep scratch for a fallback */
    oom(1, 100000, 100000, 2); /* long row */
    oom(1, 100000, 10, 3);
}

/* Tiny rows need no scratch: they succeed even with allocation failing. */
Test(cpusort, tiny_needs_no_memory) {
    dataset s = make(5, 20, false, D_RANDOM);
    lf_debug_fail_alloc(1, true);
    check_one(&s, 20, M_BOTH, 2, "tiny under failure");
    lf_debug_fail_alloc(0, false);
    drop(&s);
}

/* The cache gives back what it keeps: the smallest kept block that fits,
 * a fresh one when none does; a block given back is kept, up to
 * CPU_SORT_CACHED of them, the largest. */
Test(cpusort, cache_reuses_blocks) {
    cpu_sort_cache *c = cpu_sort_cache_new();
    cr_assert(c);
    void *a = cpu_sort_cache_take(c, 1000), *b = cpu_sort_cache_take(c, 5000);
    cr_assert(a && b);
    cpu_sort_cache_give(c, a, 1000);
    cpu_sort_cache_give(c, b, 5000);
    cr_expect_eq(cpu_sort_cache_take(c, 900), a);  /* the smallest that fits */
    cr_expect_eq(cpu_sort_cache_take(c, 4000), b);
    cpu_sort_cache_give(c, a, 1000);
    cpu_sort_cache_give(c, b, 5000);
    void *d = cpu_sort_cache_take(c, 9000);        /* none fits: fresh, the kept ones freed */
    cr_assert(d);
    cpu_sort_cache_give(c, d, 9000);
    cr_expect_eq(cpu_sort_cache_take(c, 9000), d);
    cpu_sort_cache_give(c, d, 9000);
    cpu_sort_cache_give(c, NULL, 10);
    cpu_sort_cache_free(c);
    cpu_sort_cache_free(NULL);
}

/* The post hook (cpu_sort_rows_args.post) sees every entry of keys_out
 * exactly once, and only once the entry is final: at each call the range's
 * keys already equal the oracle's. Rows in parallel, one long row by LSD,
 * one by MSD buckets, and the top-k paths. */
typedef struct post_seen {
    const dataset *s;
    int64_t k;
    const uint32_t *kout;
    int *count;            /* per entry of keys_out, calls covering it */
    _Atomic int bad;       /* an entry was not final when seen */
} post_seen;

static void post_check(void *arg, int64_t row, int64_t b, int64_t e) {
    post_seen *ps = arg;
    for (int64_t j = b; j < e; j++) {
        __atomic_fetch_add(&ps->count[row * ps->k + j], 1, __ATOMIC_RELAXED);
        if (ps->kout[row * ps->k + j] != (uint32_t)ps->s->order[row * ps->s->n + j].key) ps->bad = 1;
    }
}

Test(cpusort, post_sees_every_final_entry_once) {
    struct { int64_t nrows, n, k, msd_target; } cases[] = {
        {40, 1000, 1000, 0}, {40, 1000, 10, 0}, {1, 300000, 300000, 0}, {1, 300000, 7, 0}, {2, 200000, 150000, 2048},
    };
    int64_t old_long = cpu_sort_long_min, old_msd = cpu_sort_msd_target;
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        dataset s = make(cases[c].nrows, cases[c].n, false, D_RANDOM);
        int64_t k = cases[c].k, outn = s.nrows * k;
        if (cases[c].msd_target) cpu_sort_msd_target = cases[c].msd_target;
        uint32_t *keys = malloc((size_t)(s.nrows * s.n) * 4), *kout = malloc((size_t)outn * 4);
        int *count = calloc((size_t)outn, sizeof *count);
        cr_assert(keys && kout && count);
        memcpy(keys, s.keys, (size_t)(s.nrows * s.n) * 4);
        post_seen ps = {&s, k, kout, count, 0};
        cpu_sort_rows_args a = {.nrows = s.nrows, .n = s.n, .k = k, .keys = keys, .keys_out = kout,
                                .post = post_check, .post_arg = &ps};
        cr_assert(cpu_sort_rows(pools[2], &a));
        cr_expect_eq(ps.bad, 0, "case %zu: an entry handed to post was not final", c);
        for (int64_t j = 0; j < outn; j++)
            cr_assert_eq(count[j], 1, "case %zu: entry %lld seen %d times", c, (long long)j, count[j]);
        cpu_sort_msd_target = old_msd;
        free(keys);
        free(kout);
        free(count);
        drop(&s);
    }
    cpu_sort_long_min = old_long;
}
