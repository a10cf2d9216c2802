/* backends/cpu/sort.c: stable ascending sort of rows of unsigned keys (see
 * sort.h), the runtime behind the CPU backend's sort, argsort and top-k.
 *
 * Six paths, chosen per call and per row:
 *  - tiny rows (n <= CPU_SORT_TINY): insertion sort of (key, pos) pairs;
 *  - rows already in order (non-decreasing, or non-increasing: its runs of
 *    equal keys last first), found by a check that stops at an unordered
 *    row's first rise and fall: copied out (a long row across the pool);
 *  - top-k (k <= CPU_SORT_TOPK_MAX, n >= TOPK_RATIO*k): one pass keeping the
 *    k best (key, pos) candidates sorted; a key enters only when strictly
 *    below the k-th (positions only grow, so a tie never displaces), and
 *    blocks of 16 keys none of which is below it are skipped with one vector
 *    compare. Inputs that keep inserting (descending data) give up after a
 *    budget and take the radix path: the result is the same;
 *  - LSD radix sort of (key, pos) with pos as uint32 (keys alone when no
 *    positions are wanted): one histogram pass counts every digit at once,
 *    passes whose digit is the same for every key are skipped, the last pass
 *    scatters straight into keys_out / idx_out when k == n;
 *  - a long row of few distinct keys (at most 32 in a sample of 1024, 64 in
 *    all; not where the top-k path takes it): counted per chunk against the
 *    sample's keys (16 keys at a time with AVX-512), the keys written out
 *    as runs and the positions scattered in (key, chunk) order: two passes
 *    (one for keys alone); a key the sample missed sends it to the radix path;
 *  - a long row (fewer rows than threads, n >= cpu_sort_long_min): the same
 *    radix sort split into nchunks contiguous chunks of our own (independent
 *    of the pool's chunking): per-chunk histograms, offsets laid out in
 *    (digit, chunk) order so the parallel scatter is exactly stable, then
 *    ping-pong buffers; the top-k path splits the same way and merges the
 *    chunks' candidates in chunk (so position) order.
 * Every path computes the unique stable order, so results do not depend on
 * the thread count or on which path ran. Kernels are written once with the
 * key width and position modes as arguments and inlined (always_inline) into
 * one instance per combination, so their inner loops are branch-free.
 */
#include "backends/cpu/sort.h"
#include "graph/graph.h"

#include <assert.h>
#include <pthread.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

int64_t cpu_sort_pos32_max = UINT32_MAX;
int64_t cpu_sort_long_min = 65536;
int64_t cpu_sort_msd_target = 16384;
bool cpu_sort_check_order = true;
bool cpu_sort_check_few = true;
bool cpu_sort_few_avx512 = true;

#define AI static inline __attribute__((always_inline))
#define HOT __attribute__((optimize("O3")))

enum { TOPK_RATIO = 4 };          /* top-k path needs n >= TOPK_RATIO*k */
enum { RADIX11_MIN = 1 << 16 };   /* rows this long use 11-bit digits, else 8 */
enum { PAR_MIN_KEYS = 1 << 15 };  /* fewer keys in all: one thread */

/* ---- keys and positions of either width ---------------------------------- */

AI uint64_t ldk(const void *p, int64_t i, bool w) {
    return w ? ((const uint64_t *)p)[i] : ((const uint32_t *)p)[i];
}
AI void stk(void *p, int64_t i, uint64_t v, bool w) {
    if (w) ((uint64_t *)p)[i] = v;
    else ((uint32_t *)p)[i] = (uint32_t)v;
}

/* Where a pass reads positions from, or writes them to. */
enum { P_NONE, P_IOTA, P_U32, P_U64 };

/* ---- radix kernels ---------------------------------------------------------- */

/* Counts every digit of keys [b, e) at once: h[p*nb + digit p] (npass
 * digits of `bits` bits); h is zeroed by the caller. */
AI void hist_all_k(const void *keys, int64_t b, int64_t e, uint32_t *h, int bits, int npass, bool w) {
    const uint64_t mask = ((uint64_t)1 << bits) - 1;
    const int nb = 1 << bits;
    for (int64_t i = b; i < e; i++) {
        uint64_t key = ldk(keys, i, w);
#pragma GCC unroll 8
        for (int p = 0; p < npass; p++) h[p * nb + ((key >> (p * bits)) & mask)]++;
    }
}

HOT static void hist_all(const void *keys, int64_t b, int64_t e, uint32_t *h, int bits, bool w) {
    if (w && bits == 8) hist_all_k(keys, b, e, h, 8, 8, true);
    else if (w) hist_all_k(keys, b, e, h, 11, 6, true);
    else if (bits == 8) hist_all_k(keys, b, e, h, 8, 4, false);
    else hist_all_k(keys, b, e, h, 11, 3, false);
}

/* Counts one digit (at `shift`) of keys [b, e). */
AI void hist_one_k(const void *keys, int64_t b, int64_t e, uint32_t *h, int shift, uint64_t mask, bool w) {
    for (int64_t i = b; i < e; i++) h[(ldk(keys, i, w) >> shift) & mask]++;
}

HOT static void hist_one(const void *keys, int64_t b, int64_t e, uint32_t *h, int shift, uint64_t mask, bool w) {
    if (w) hist_one_k(keys, b, e, h, shift, mask, true);
    else hist_one_k(keys, b, e, h, shift, mask, false);
}

/* One stable scatter of [b, e): key i goes to dk[off[digit]++] (when dkeys)
 * and its position, read per spm (P_IOTA: i itself), to dp per dpm. */
AI void scatter_k(const void *sk, const void *sp, void *dk, void *dp, int64_t b, int64_t e, int64_t *off,
                  uint64_t lo, int shift, uint64_t mask, bool w, int spm, int dpm, bool dkeys) {
    for (int64_t i = b; i < e; i++) {
        uint64_t key = ldk(sk, i, w);
        int64_t d = off[((key - lo) >> shift) & mask]++;
        if (dkeys) stk(dk, d, key, w);
        if (dpm != P_NONE) {
            uint64_t pos = spm == P_IOTA  ? (uint64_t)i
                           : spm == P_U32 ? ((const uint32_t *)sp)[i]
                                          : ((const uint64_t *)sp)[i];
            if (dpm == P_U32) ((uint32_t *)dp)[d] = (uint32_t)pos;
            else ((uint64_t *)dp)[d] = pos;
        }
    }
}

/* The modes the scatters are specialized for, as X(wide keys, source
 * positions, destination positions, keys written): keys alone, or keys
 * with positions (from iota or carried) written with or without the keys. */
#define SCATTER_POS_MODES(X, SP, DP) X(false, SP, DP, false) X(true, SP, DP, false) X(false, SP, DP, true) X(true, SP, DP, true)
#define SCATTER_MODES(X)                                                                                        \
    X(false, P_NONE, P_NONE, true) X(true, P_NONE, P_NONE, true) SCATTER_POS_MODES(X, P_IOTA, P_U32)           \
    SCATTER_POS_MODES(X, P_IOTA, P_U64) SCATTER_POS_MODES(X, P_U32, P_U32) SCATTER_POS_MODES(X, P_U32, P_U64)  \
    SCATTER_POS_MODES(X, P_U64, P_U64)

HOT static void scatter(const void *sk, const void *sp, void *dk, void *dp, int64_t b, int64_t e, int64_t *off,
                        uint64_t lo, int shift, uint64_t mask, bool w, int spm, int dpm, bool dkeys) {
#define SC(W, SP, DP, DK)                                                            \
    if (w == W && spm == SP && dpm == DP && dkeys == DK) {                           \
        scatter_k(sk, sp, dk, dp, b, e, off, lo, shift, mask, W, SP, DP, DK);        \
        return;                                                                      \
    }
    SCATTER_MODES(SC)
#undef SC
    assert(!"scatter: no such mode");
}

/* The same scatter through write-combining buffers, for buffers larger
 * than the caches: each digit collects its entries in a cache line of its
 * own (wk, wp: 64 bytes per digit each) at the slot its destination has in
 * its line, and a full line is copied out at once, so stores to memory are
 * whole lines instead of one scattered element each. A digit's first line
 * may start before its range [start, ...) (another digit's, or another
 * chunk's entries): only from the range's start is copied. `start` holds
 * nb entries of scratch. */
/* Copies one full 64-byte line to a 64-byte aligned destination, with
 * non-temporal stores where there are (the line is not read again soon;
 * this skips reading it into the cache first). */
AI void line_out(void *dst, const void *src, bool nt) {
#ifdef __SSE2__
    if (nt) {
        const __m128i *s = src;
        __m128i *d = dst;
        _mm_stream_si128(d, _mm_load_si128(s));
        _mm_stream_si128(d + 1, _mm_load_si128(s + 1));
        _mm_stream_si128(d + 2, _mm_load_si128(s + 2));
        _mm_stream_si128(d + 3, _mm_load_si128(s + 3));
        return;
    }
#endif
    (void)nt;
    memcpy(dst, src, 64);
}

AI void scatter_wc_k(const void *sk, const void *sp, void *dk, void *dp, int64_t b, int64_t e, int64_t *off,
                     int shift, uint64_t mask, bool w, int spm, int dpm, bool dkeys, char *wk, char *wp,
                     int64_t *start, const uint16_t *map, int nmap) {
    const size_t ks = w ? 8 : 4, ps = dpm == P_U64 ? 8 : 4;
    const int64_t B = 64 / (int64_t)ks; /* entries per line of keys */
    const size_t pl = (size_t)B * ps;   /* bytes per line of positions: 32, 64 or 128 */
    const bool ntk = dkeys && ((uintptr_t)dk & 63) == 0;
    const bool ntp = dpm != P_NONE && ((uintptr_t)dp & 63) == 0 && pl >= 64;
    const int nb = map ? nmap : (int)mask + 1;
    for (int d = 0; d < nb; d++) start[d] = off[d];
    for (int64_t i = b; i < e; i++) {
        uint64_t key = ldk(sk, i, w);
        size_t dg = map ? map[key >> shift] : (key >> shift) & mask;
        int64_t d = off[dg]++;
        int64_t slot = d & (B - 1);
        if (dkeys) stk(wk + dg * 64, slot, key, w);
        if (dpm != P_NONE) {
            uint64_t pos = spm == P_IOTA  ? (uint64_t)i
                           : spm == P_U32 ? ((const uint32_t *)sp)[i]
                                          : ((const uint64_t *)sp)[i];
            if (dpm == P_U32) ((uint32_t *)(wp + dg * 128))[slot] = (uint32_t)pos;
            else ((uint64_t *)(wp + dg * 128))[slot] = pos;
        }
        if (slot == B - 1) {
            int64_t line = d - (B - 1);
            if (line >= start[dg]) {
                if (dkeys) line_out((char *)dk + line * ks, wk + dg * 64, ntk);
                if (dpm != P_NONE) {
                    char *q = (char *)dp + line * (int64_t)ps;
                    if (pl == 32) memcpy(q, wp + dg * 128, 32);
                    else line_out(q, wp + dg * 128, ntp);
                    if (pl == 128) line_out(q + 64, wp + dg * 128 + 64, ntp);
                }
            } else {
                int64_t lo = start[dg];
                if (dkeys) memcpy((char *)dk + lo * ks, wk + dg * 64 + (lo - line) * ks, (size_t)(d + 1 - lo) * ks);
                if (dpm != P_NONE)
                    memcpy((char *)dp + lo * ps, wp + dg * 128 + (lo - line) * ps, (size_t)(d + 1 - lo) * ps);
            }
        }
    }
    for (int dg = 0; dg < nb; dg++) { /* partial last lines */
        int64_t end = off[dg];
        if (end == start[dg] || (end & (B - 1)) == 0) continue;
        int64_t line = end & ~(B - 1), lo = line > start[dg] ? line : start[dg];
        if (dkeys) memcpy((char *)dk + lo * ks, wk + dg * 64 + (lo - line) * ks, (size_t)(end - lo) * ks);
        if (dpm != P_NONE) memcpy((char *)dp + lo * ps, wp + dg * 128 + (lo - line) * ps, (size_t)(end - lo) * ps);
    }
#ifdef __SSE2__
    if (ntk || ntp) _mm_sfence();
#endif
}

/* Write-combining scratch: 64-byte lines of keys and of positions per digit,
 * then the digits' start offsets. */
typedef struct wc_buf {
    char *wk, *wp;    /* nb lines each */
    int64_t *start;   /* nb */
} wc_buf;

static size_t wc_bytes(int nb) { return (size_t)nb * (64 + 128 + 8); }

static wc_buf wc_carve(char *p, int nb) {
    wc_buf b = {p, p + (size_t)nb * 64, (int64_t *)(p + (size_t)nb * 192)};
    return b;
}

HOT static void scatter_wc(const void *sk, const void *sp, void *dk, void *dp, int64_t b, int64_t e, int64_t *off,
                           int shift, uint64_t mask, bool w, int spm, int dpm, bool dkeys, const wc_buf *wb) {
#define SC(W, SP, DP, DK)                                                                                        \
    if (w == W && spm == SP && dpm == DP && dkeys == DK) {                                                       \
        scatter_wc_k(sk, sp, dk, dp, b, e, off, shift, mask, W, SP, DP, DK, wb->wk, wb->wp, wb->start, NULL, 0); \
        return;                                                                                                  \
    }
    SCATTER_MODES(SC)
#undef SC
    assert(!"scatter_wc: no such mode");
}

/* The write-combining scatter of the MSD step: key i goes to the bucket
 * map[key >> shift] (nmap buckets), its position (i itself) along when
 * dpm is not P_NONE. */
HOT static void scatter_map(const void *sk, void *dk, void *dp, int64_t b, int64_t e, int64_t *off, int shift,
                            bool w, int dpm, const wc_buf *wb, const uint16_t *map, int nmap) {
#define SC(W, SP, DP)                                                                                           \
    if (w == W && dpm == DP) {                                                                                  \
        scatter_wc_k(sk, NULL, dk, dp, b, e, off, shift, 0, W, SP, DP, true, wb->wk, wb->wp, wb->start, map,    \
                     nmap);                                                                                     \
        return;                                                                                                 \
    }
    SC(false, P_NONE, P_NONE) SC(true, P_NONE, P_NONE) SC(false, P_IOTA, P_U32) SC(true, P_IOTA, P_U32)
    SC(false, P_IOTA, P_U64) SC(true, P_IOTA, P_U64)
#undef SC
    assert(!"scatter_map: no such mode");
}

/* Counts the npass digits (of `bits` bits, the last may be narrower: the
 * mask cuts nothing off, keys - lo have at most npass*bits bits) of
 * keys [0, m) less lo: h[p * (1 << bits) + digit p]; h zeroed by the
 * caller. */
AI void hist_lo_k(const void *keys, int64_t m, uint64_t lo, uint32_t *h, int bits, int npass, bool w) {
    const uint64_t mask = ((uint64_t)1 << bits) - 1;
    const int nb = 1 << bits;
    if (npass == 2) {
        for (int64_t i = 0; i < m; i++) {
            uint64_t v = ldk(keys, i, w) - lo;
            h[v & mask]++;
            h[nb + ((v >> bits) & mask)]++;
        }
        return;
    }
    for (int64_t i = 0; i < m; i++) {
        uint64_t v = ldk(keys, i, w) - lo;
        for (int p = 0; p < npass; p++) h[p * nb + ((v >> (p * bits)) & mask)]++;
    }
}

HOT static void hist_lo(const void *keys, int64_t m, uint64_t lo, uint32_t *h, int bits, int npass, bool w) {
    if (w) hist_lo_k(keys, m, lo, h, bits, npass, true);
    else hist_lo_k(keys, m, lo, h, bits, npass, false);
}

/* Copies entries [b, e) of a sorted buffer into the outputs (positions
 * widened to int64). */
static void copy_out(const void *sk, const void *sp, int spm, bool w, void *kout, int64_t *iout, int64_t b,
                     int64_t e) {
    if (b >= e) return;
    size_t ks = w ? 8 : 4;
    if (kout) memcpy((char *)kout + b * ks, (const char *)sk + b * ks, (size_t)(e - b) * ks);
    if (!iout) return;
    for (int64_t i = b; i < e; i++)
        iout[i] = spm == P_IOTA  ? i
                  : spm == P_U32 ? (int64_t)((const uint32_t *)sp)[i]
                                 : (int64_t)((const uint64_t *)sp)[i];
}

/* ---- rows already in order ---------------------------------------------------
 * A row whose keys are already non-decreasing is its own stable order; one
 * that is non-increasing is its runs of equal keys taken last run first, each
 * run in position order (a strictly decreasing row is the row reversed).
 * Checking costs little: a row in neither order stops at its first rise and
 * first fall, a few keys in on any unordered input. Sorted and reversed inputs
 * (a re-sort after an append, a descending sort of ascending data) then cost
 * one pass instead of the radix passes. */

enum { ORDER_NONE = 0, ORDER_UP = 1, ORDER_DOWN = 2, ORDER_STRICT_DOWN = 4 };

/* Which orders keys [b, e) of a row keep (ORDER_* bits), with the key before
 * b (b > 0) counted: the chunks of a long row are checked apart. */
AI int order_of_k(const void *keys, int64_t b, int64_t e, bool w) {
    int ord = ORDER_UP | ORDER_DOWN | ORDER_STRICT_DOWN;
    uint64_t prev = ldk(keys, b > 0 ? b - 1 : b, w);
    for (int64_t i = b > 0 ? b : b + 1; i < e && ord; i++) {
        uint64_t v = ldk(keys, i, w);
        if (v < prev) ord &= ~ORDER_UP;
        if (v > prev) ord &= ~(ORDER_DOWN | ORDER_STRICT_DOWN);
        if (v == prev) ord &= ~ORDER_STRICT_DOWN;
        prev = v;
    }
    return ord;
}

HOT static int order_of(const void *keys, int64_t b, int64_t e, bool w) {
    return w ? order_of_k(keys, b, e, true) : order_of_k(keys, b, e, false);
}

/* Entries [b, e) of the order of a row of n keys known to be in order ord
 * (ORDER_UP or ORDER_STRICT_DOWN): entry i is position i, or n-1-i. */
static void ordered_out(const void *keys, int64_t n, int ord, bool w, void *kout, int64_t *iout, int64_t b,
                        int64_t e) {
    size_t ks = w ? 8 : 4;
    if (ord & ORDER_UP) {
        if (kout && e > b) memcpy((char *)kout + b * ks, (const char *)keys + b * ks, (size_t)(e - b) * ks);
        if (iout)
            for (int64_t i = b; i < e; i++) iout[i] = i;
        return;
    }
    if (kout)
        for (int64_t i = b; i < e; i++) stk(kout, i, ldk(keys, n - 1 - i, w), w);
    if (iout)
        for (int64_t i = b; i < e; i++) iout[i] = n - 1 - i;
}

/* The first k entries of a non-increasing row with ties: runs of equal keys
 * from the last, each in position order. */
static void down_runs_out(const void *keys, int64_t n, int64_t k, bool w, void *kout, int64_t *iout) {
    int64_t o = 0;
    for (int64_t hi = n - 1; hi >= 0 && o < k;) {
        uint64_t v = ldk(keys, hi, w);
        int64_t lo = hi;
        while (lo > 0 && ldk(keys, lo - 1, w) == v) lo--;
        for (int64_t i = lo; i <= hi && o < k; i++, o++) {
            if (kout) stk(kout, o, v, w);
            if (iout) iout[o] = i;
        }
        hi = lo - 1;
    }
}

/* A row's first k entries when it is already in order; false (nothing
 * written) otherwise. */
static bool ordered_row(const void *keys, int64_t n, int64_t k, bool w, void *kout, int64_t *iout) {
    if (!cpu_sort_check_order) return false;
    int ord = order_of(keys, 0, n, w);
    if (ord & (ORDER_UP | ORDER_STRICT_DOWN)) ordered_out(keys, n, ord, w, kout, iout, 0, k);
    else if (ord & ORDER_DOWN) down_runs_out(keys, n, k, w, kout, iout);
    else return false;
    return true;
}

/* ---- digits ------------------------------------------------------------------ */

typedef struct digits {
    int bits, nb, npass;  /* digit width, 1 << bits, digits per key */
    uint64_t mask;        /* nb - 1 */
} digits;

static digits digits_for(int64_t n, bool w) {
    digits d;
    d.bits = n >= RADIX11_MIN ? 11 : 8;
    d.nb = 1 << d.bits;
    d.npass = ((w ? 64 : 32) + d.bits - 1) / d.bits;
    d.mask = (uint64_t)d.nb - 1;
    return d;
}

/* Exclusive prefix sum of h[0..nb) into off. */
static void prefix(const uint32_t *h, int64_t *off, int nb) {
    int64_t s = 0;
    for (int b = 0; b < nb; b++) {
        off[b] = s;
        s += h[b];
    }
}

/* ---- one row on one thread --------------------------------------------------- */

/* Scratch of one thread for rows of n keys, carved from the big block. */
typedef struct row_scratch {
    void *kb;        /* n keys: the other half of the ping-pong with the row */
    uint32_t *pa;    /* n positions (when wanted) */
    uint32_t *pb;    /* n positions (when wanted) */
    uint32_t *hist;  /* npass * nb counters */
    int64_t *off;    /* nb offsets */
    char *wc;        /* write-combining buffers (rows of RADIX11_MIN keys and more), else NULL */
} row_scratch;

/* LSD radix sort of one row of n (<= UINT32_MAX) keys into the first k
 * entries of kout / iout (either may be NULL, not both). */
static void radix_row(void *keys, int64_t n, int64_t k, bool w, void *kout, int64_t *iout, const row_scratch *s) {
    digits dg = digits_for(n, w);
    memset(s->hist, 0, sizeof(uint32_t) * (size_t)(dg.npass * dg.nb));
    hist_all(keys, 0, n, s->hist, dg.bits, w);
    int act[8], nact = 0;
    uint64_t k0 = ldk(keys, 0, w);
    for (int p = 0; p < dg.npass; p++)
        if (s->hist[p * dg.nb + ((k0 >> (p * dg.bits)) & dg.mask)] != (uint32_t)n) act[nact++] = p;

    const void *sk = keys, *sp = NULL;
    int spm = iout ? P_IOTA : P_NONE;
    for (int j = 0; j < nact; j++) {
        int p = act[j];
        prefix(s->hist + p * dg.nb, s->off, dg.nb);
        void *dk, *dp = NULL;
        int dpm = P_NONE;
        bool dkeys = true;
        if (j == nact - 1 && k == n) { /* last pass: straight into the outputs */
            dk = kout;
            dkeys = kout != NULL;
            if (iout) dp = iout, dpm = P_U64;
        } else {
            dk = sk == keys ? s->kb : keys;
            if (iout) dp = sp == s->pa ? s->pb : s->pa, dpm = P_U32;
        }
        if (s->wc) {
            wc_buf wb = wc_carve(s->wc, dg.nb);
            scatter_wc(sk, sp, dk, dp, 0, n, s->off, p * dg.bits, dg.mask, w, spm, dpm, dkeys, &wb);
        } else {
            scatter(sk, sp, dk, dp, 0, n, s->off, 0, p * dg.bits, dg.mask, w, spm, dpm, dkeys);
        }
        sk = dk, sp = dp, spm = dpm;
    }
    if (nact == 0 || k < n) copy_out(sk, sp, spm, w, kout, iout, 0, k);
}

/* Stable insertion sort of a row of n <= CPU_SORT_TINY keys. */
static void tiny_row(const void *keys, int64_t n, int64_t k, bool w, void *kout, int64_t *iout) {
    uint64_t ck[CPU_SORT_TINY];
    int32_t cp[CPU_SORT_TINY];
    for (int64_t i = 0; i < n; i++) {
        uint64_t x = ldk(keys, i, w);
        int64_t j = i;
        for (; j > 0 && ck[j - 1] > x; j--) ck[j] = ck[j - 1], cp[j] = cp[j - 1];
        ck[j] = x, cp[j] = (int32_t)i;
    }
    for (int64_t j = 0; j < k; j++) {
        if (kout) stk(kout, j, ck[j], w);
        if (iout) iout[j] = cp[j];
    }
}

/* ---- top-k: one pass keeping the k best ------------------------------------- */

/* Inserts (x, pos) into the sorted candidates ck/cp[0..m) with m < cap... */
AI void cand_insert(uint64_t *ck, int64_t *cp, int64_t m, uint64_t x, int64_t pos) {
    int64_t j = m;
    for (; j > 0 && ck[j - 1] > x; j--) ck[j] = ck[j - 1], cp[j] = cp[j - 1];
    ck[j] = x, cp[j] = pos;
}

/* Whether any of the 16 keys at p is below t. */
AI bool any_below16(const void *p, uint64_t t, bool w) {
#ifdef __SSE2__
    if (!w) { /* unsigned x < t as signed (x ^ 2^31) < (t ^ 2^31) */
        const __m128i sb = _mm_set1_epi32(INT32_MIN), tv = _mm_set1_epi32((int32_t)((uint32_t)t ^ 0x80000000u));
        const __m128i *q = p;
        __m128i m = _mm_cmplt_epi32(_mm_xor_si128(_mm_loadu_si128(q), sb), tv);
        m = _mm_or_si128(m, _mm_cmplt_epi32(_mm_xor_si128(_mm_loadu_si128(q + 1), sb), tv));
        m = _mm_or_si128(m, _mm_cmplt_epi32(_mm_xor_si128(_mm_loadu_si128(q + 2), sb), tv));
        m = _mm_or_si128(m, _mm_cmplt_epi32(_mm_xor_si128(_mm_loadu_si128(q + 3), sb), tv));
        return _mm_movemask_epi8(m) != 0;
    }
#endif
    unsigned any = 0;
    if (w) {
        const uint64_t *q = p;
        for (int j = 0; j < 16; j++) any |= q[j] < t;
    } else {
        const uint32_t *q = p;
        uint32_t t32 = (uint32_t)t;
        for (int j = 0; j < 16; j++) any |= q[j] < t32;
    }
    return any != 0;
}

/* The k best of keys [b, e) (positions b..e-1) into ck/cp, sorted by
 * (key, pos); returns how many (min(k, e-b)), or -1 when it gave up after
 * too many insertions (the caller sorts instead). */
AI int64_t topk_k(const void *keys, int64_t b, int64_t e, int64_t k, bool w, uint64_t *ck, int64_t *cp) {
    int64_t m = 0, i = b;
    for (; i < e && m < k; i++, m++) cand_insert(ck, cp, m, ldk(keys, i, w), i);
    if (m < k) return m;
    uint64_t thr = ck[k - 1];
    int64_t ins = 0, budget = (e - b) / 16 + 4 * k + 64;
    const size_t ks = w ? 8 : 4;
    for (; i + 16 <= e && thr > 0; i += 16) {
        if (!any_below16((const char *)keys + (size_t)i * ks, thr, w)) continue;
        for (int64_t j = i; j < i + 16; j++) {
            uint64_t x = ldk(keys, j, w);
            if (x < thr) {
                cand_insert(ck, cp, k - 1, x, j);
                thr = ck[k - 1];
                ins++;
            }
        }
        if (ins > budget) return -1;
    }
    for (; i < e && thr > 0; i++) {
        uint64_t x = ldk(keys, i, w);
        if (x < thr) cand_insert(ck, cp, k - 1, x, i), thr = ck[k - 1];
    }
    return k;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define TOPK_AVX512 1
/* The top-k pass for uint32 keys and k <= 16 with AVX-512 (the library is
 * built for generic x86-64: chosen at run time). The k best live in one
 * vector of keys and one of positions (less b), lanes k.. unused; blocks of
 * 16 keys are compared with the k-th at once, and only the lanes below it
 * are looked at; an insertion is branch-free: the lanes above the new key
 * move up one (its place: how many kept keys are <= it, so ties keep
 * position order). Inserting costs a few instructions, so it never gives
 * up. e - b > k and e - b <= UINT32_MAX. */
__attribute__((target("avx512f,popcnt,bmi"))) static int64_t topk_u32_avx512(const uint32_t *keys, int64_t b, int64_t e,
                                                                          int64_t k, uint64_t *ck, int64_t *cp) {
    uint32_t k0[16], p0[16];
    for (int j = 0; j < 16; j++) k0[j] = UINT32_MAX, p0[j] = 0;
    for (int64_t m = 0; m < k; m++) { /* the first k: insertion sort */
        uint32_t x = keys[b + m];
        int64_t j = m;
        for (; j > 0 && k0[j - 1] > x; j--) k0[j] = k0[j - 1], p0[j] = p0[j - 1];
        k0[j] = x, p0[j] = (uint32_t)m;
    }
    __m512i vk = _mm512_loadu_si512(k0), vp = _mm512_loadu_si512(p0);
    const __m512i up = _mm512_set_epi32(14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 0);
    const __m512i lastk = _mm512_set1_epi32((int)(k - 1));
    uint32_t thr = k0[k - 1];
    int64_t i = b + k;
    while (i < e && thr > 0) {
        int64_t left = e - i;
        __mmask16 lanes = left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1);
        __m512i v = _mm512_maskz_loadu_epi32(lanes, keys + i);
        unsigned hit = _mm512_mask_cmplt_epu32_mask(lanes, v, _mm512_set1_epi32((int)thr));
        while (hit) {
            int j = __builtin_ctz(hit);
            hit &= hit - 1;
            uint32_t x = keys[i + j];
            if (x >= thr) continue;
            __m512i vx = _mm512_set1_epi32((int)x);
            __mmask16 gt = _mm512_cmpgt_epu32_mask(vk, vx); /* lanes from x's place on */
            __mmask16 at = gt & (__mmask16)-gt;
            vk = _mm512_mask_permutexvar_epi32(vk, gt, up, vk);
            vp = _mm512_mask_permutexvar_epi32(vp, gt, up, vp);
            vk = _mm512_mask_mov_epi32(vk, at, vx);
            vp = _mm512_mask_mov_epi32(vp, at, _mm512_set1_epi32((int)(i + j - b)));
            thr = (uint32_t)_mm_cvtsi128_si32(_mm512_castsi512_si128(_mm512_permutexvar_epi32(lastk, vk)));
        }
        i += 16;
    }
    _mm512_storeu_si512(k0, vk);
    _mm512_storeu_si512(p0, vp);
    for (int64_t j = 0; j < k; j++) ck[j] = k0[j], cp[j] = (int64_t)p0[j] + b;
    return k;
}

/* A faster exact top-k for the same case, two passes over a row in cache:
 * the 16 lane-wise minima of the blocks are 16 different keys, so the k-th
 * smallest of them, t, has at least k keys <= t and every key of the
 * stable top k is <= t; the second pass collects the keys <= t with their
 * positions (in position order), an insertion sort by key alone (stable)
 * gives the first k. Returns -1 (nothing written) when more than
 * TOPK_CANDS keys are <= t (many ties, sorted inputs): the caller takes
 * topk_u32_avx512. e - b >= 16. */
enum { TOPK_CANDS = 128 };
__attribute__((target("avx512f,popcnt,bmi"))) static int64_t topk_u32_2pass(const uint32_t *keys, int64_t b, int64_t e,
                                                                         int64_t k, uint64_t *ck, int64_t *cp) {
    const __m512i ones = _mm512_set1_epi32(-1);
    __m512i m0 = ones, m1 = ones;
    int64_t i = b;
    for (; i + 32 <= e; i += 32) {
        m0 = _mm512_min_epu32(m0, _mm512_loadu_si512(keys + i));
        m1 = _mm512_min_epu32(m1, _mm512_loadu_si512(keys + i + 16));
    }
    for (; i < e; i += 16) {
        __mmask16 lanes = e - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (e - i)) - 1);
        m0 = _mm512_min_epu32(m0, _mm512_mask_loadu_epi32(ones, lanes, keys + i));
    }
    /* lane l of m0 and m1 together: the minimum of the keys at positions
     * b + l (mod 16), a key of the row (e - b >= 16) */
    uint32_t mins[16];
    _mm512_storeu_si512(mins, _mm512_min_epu32(m0, m1));
    for (int a = 1; a < 16; a++) {
        uint32_t x = mins[a];
        int j = a;
        for (; j > 0 && mins[j - 1] > x; j--) mins[j] = mins[j - 1];
        mins[j] = x;
    }
    const __m512i vt = _mm512_set1_epi32((int)mins[k - 1]);
    uint32_t cks[TOPK_CANDS + 16], cps[TOPK_CANDS + 16];
    int m = 0;
    const __m512i iota = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    for (i = b; i < e; i += 16) {
        __mmask16 lanes = e - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (e - i)) - 1);
        __m512i v = _mm512_maskz_loadu_epi32(lanes, keys + i);
        __mmask16 le = _mm512_mask_cmple_epu32_mask(lanes, v, vt);
        if (!le) continue;
        if (m > TOPK_CANDS - 16) return -1;
        _mm512_storeu_si512(cks + m, _mm512_maskz_compress_epi32(le, v));
        _mm512_storeu_si512(cps + m, _mm512_maskz_compress_epi32(le, _mm512_add_epi32(iota, _mm512_set1_epi32((int)(i - b)))));
        m += __builtin_popcount(le);
    }
    for (int a = 1; a < m; a++) { /* stable: candidates are in position order */
        uint32_t x = cks[a], y = cps[a];
        int j = a;
        for (; j > 0 && cks[j - 1] > x; j--) cks[j] = cks[j - 1], cps[j] = cps[j - 1];
        cks[j] = x, cps[j] = y;
    }
    for (int64_t j = 0; j < k; j++) ck[j] = cks[j], cp[j] = (int64_t)cps[j] + b;
    return k;
}
#endif

HOT static int64_t topk(const void *keys, int64_t b, int64_t e, int64_t k, bool w, uint64_t *ck, int64_t *cp) {
#ifdef TOPK_AVX512
    if (!w && k <= 16 && e - b > k && e - b <= (int64_t)UINT32_MAX && __builtin_cpu_supports("avx512f")) {
        if (e - b >= 16 && e - b <= 8192 && topk_u32_2pass(keys, b, e, k, ck, cp) >= 0) return k;
        return topk_u32_avx512(keys, b, e, k, ck, cp);
    }
#endif
    return w ? topk_k(keys, b, e, k, true, ck, cp) : topk_k(keys, b, e, k, false, ck, cp);
}

static void write_cands(const uint64_t *ck, const int64_t *cp, int64_t k, bool w, void *kout, int64_t *iout) {
    for (int64_t j = 0; j < k; j++) {
        if (kout) stk(kout, j, ck[j], w);
        if (iout) iout[j] = cp[j];
    }
}

static bool topk_fits(int64_t n, int64_t k) {
    return n > CPU_SORT_TINY && k <= CPU_SORT_TOPK_MAX && n >= TOPK_RATIO * k;
}

/* ---- rows in parallel ---------------------------------------------------------- */

typedef struct rows_job {
    const cpu_sort_rows_args *a;
    char *scratch;        /* per worker: `per` bytes, 64-byte aligned */
    char *block;          /* what graph_malloc gave (to free) */
    size_t per;
    digits dg;
} rows_job;

static size_t align64(size_t b) { return (b + 63) & ~(size_t)63; }

/* Carves one worker's row scratch out of p (sizes in row_scratch_bytes). */
static row_scratch carve_row(char *p, int64_t n, bool w, bool pos, digits dg) {
    row_scratch s;
    s.kb = p, p += align64((size_t)n * (w ? 8 : 4));
    s.pa = pos ? (uint32_t *)p : NULL, p += pos ? align64((size_t)n * 4) : 0;
    s.pb = pos ? (uint32_t *)p : NULL, p += pos ? align64((size_t)n * 4) : 0;
    s.hist = (uint32_t *)p, p += align64(sizeof(uint32_t) * (size_t)(dg.npass * dg.nb));
    s.off = (int64_t *)p, p += align64(sizeof(int64_t) * (size_t)dg.nb);
    s.wc = n >= RADIX11_MIN ? p : NULL;
    return s;
}

static size_t row_scratch_bytes(int64_t n, bool w, bool pos, digits dg) {
    return align64((size_t)n * (w ? 8 : 4)) + (pos ? 2 * align64((size_t)n * 4) : 0) +
           align64(sizeof(uint32_t) * (size_t)(dg.npass * dg.nb)) + align64(sizeof(int64_t) * (size_t)dg.nb) +
           (n >= RADIX11_MIN ? align64(wc_bytes(dg.nb)) : 0);
}

static void sort_one_row(const cpu_sort_rows_args *a, int64_t r, const row_scratch *s) {
    int64_t n = a->n, k = a->k;
    bool w = a->wide;
    size_t ks = w ? 8 : 4;
    void *keys = (char *)a->keys + (size_t)(r * n) * ks;
    void *kout = a->keys_out ? (char *)a->keys_out + (size_t)(r * k) * ks : NULL;
    int64_t *iout = a->idx_out ? a->idx_out + r * k : NULL;
    if (n <= CPU_SORT_TINY) {
        tiny_row(keys, n, k, w, kout, iout);
        return;
    }
    if (ordered_row(keys, n, k, w, kout, iout)) return;
    if (topk_fits(n, k)) {
        uint64_t ck[CPU_SORT_TOPK_MAX];
        int64_t cp[CPU_SORT_TOPK_MAX];
        if (topk(keys, 0, n, k, w, ck, cp) >= 0) {
            write_cands(ck, cp, k, w, kout, iout);
            return;
        }
    }
    radix_row(keys, n, k, w, kout, iout, s);
}

static void rows_body(void *arg, int64_t begin, int64_t end, int worker) {
    rows_job *j = arg;
    row_scratch s = {0};
    if (j->scratch)
        s = carve_row(j->scratch + (size_t)worker * j->per, j->a->n, j->a->wide, j->a->idx_out != NULL, j->dg);
    for (int64_t r = begin; r < end; r++) {
        sort_one_row(j->a, r, &s);
        if (j->a->post && j->a->keys_out) j->a->post(j->a->post_arg, r, 0, j->a->k);
    }
}

/* ---- one long row split across the pool ------------------------------------- */

typedef struct long_job {
    int64_t n, k;             /* the row's keys, entries wanted */
    bool w;                   /* 64-bit keys */
    int64_t nchunks, chunk;   /* chunk c is [c*chunk, min(n, (c+1)*chunk)) */
    digits dg;
    uint32_t *hall;           /* nchunks * npass * nb: every digit, original order */
    uint32_t *hone;           /* nchunks * nb: one digit of the current buffer */
    int64_t *off;             /* nchunks * nb: scatter offsets */
    uint64_t *ck;             /* nchunks * k top-k candidates ... */
    int64_t *cp;              /* ... and their positions */
    int64_t *cm;              /* nchunks: candidates found, -1 when given up */
    char *wc;                 /* nchunks * wc_bytes(nb): write-combining buffers */
    /* the MSD step (msd_row) */
    int pshift;               /* key >> pshift: the 16-bit prefix */
    int64_t target, lim;      /* bucket size aimed at; larger buckets: LSD instead */
    int nbmax, nbk;           /* buckets at most, buckets */
    uint32_t *h16;            /* nchunks * 65536: prefix counts per chunk */
    uint16_t *map;            /* 65536: prefix -> bucket */
    uint32_t *bpf, *bpl;      /* nbmax: each bucket's first and last non-empty prefix */
    int64_t *bstart;          /* nbmax + 1: where each bucket starts */
    int64_t *moff;            /* nchunks * nbmax: MSD scatter offsets */
    char *mwc;                /* nchunks * wc_bytes(nbmax) */
    int64_t *gb;              /* groups + 1: first bucket of each group of the bucket step */
    char *bscr;               /* per worker: bper bytes of bucket scratch */
    size_t bper;
    bool pos64;
    void *kb, *pa;            /* the MSD step's destination */
    /* the current step */
    const void *sk, *sp;      /* source keys and positions */
    void *dk, *dp;            /* destinations */
    int spm, dpm;             /* position modes (P_*) */
    bool dkeys;               /* write keys */
    int shift;                /* digit position */
    void *kout;               /* copy-out step: outputs */
    void (*post)(void *, int64_t, int64_t, int64_t); /* cpu_sort_rows_args.post */
    void *post_arg;
    int64_t row;              /* the row being sorted (for post) */
    int64_t *iout;
} long_job;

static void chunk_range(const long_job *j, int64_t c, int64_t *b, int64_t *e, int64_t n) {
    *b = c * j->chunk;
    *e = *b + j->chunk < n ? *b + j->chunk : n;
}

static void long_hist_all(void *arg, int64_t begin, int64_t end, int worker) {
    (void)worker;
    long_job *j = arg;
    size_t per = (size_t)(j->dg.npass * j->dg.nb);
    for (int64_t c = begin; c < end; c++) {
        int64_t b, e;
        chunk_range(j, c, &b, &e, j->n);
        memset(j->hall + c * per, 0, per * sizeof(uint32_t));
        hist_all(j->sk, b, e, j->hall + c * per, j->dg.bits, j->w);
    }
}

static void long_hist_one(void *arg, int64_t begin, int64_t end, int worker) {
    (void)worker;
    long_job *j = arg;
    for (int64_t c = begin; c < end; c++) {
        int64_t b, e;
        chunk_range(j, c, &b, &e, j->n);
        memset(j->hone + c * j->dg.nb, 0, (size_t)j->dg.nb * sizeof(uint32_t));
        hist_one(j->sk, b, e, j->hone + c * j->dg.nb, j->shift, j->dg.mask, j->w);
    }
}

static void long_scatter(void *arg, int64_t begin, int64_t end, int worker) {
    (void)worker;
    long_job *j = arg;
    for (int64_t c = begin; c < end; c++) {
        int64_t b, e;
        chunk_range(j, c, &b, &e, j->n);
        wc_buf wb = wc_carve(j->wc + (size_t)c * wc_bytes(j->dg.nb), j->dg.nb);
        scatter_wc(j->sk, j->sp, j->dk, j->dp, b, e, j->off + c * j->dg.nb, j->shift, j->dg.mask, j->w, j->spm,
                   j->dpm, j->dkeys, &wb);
    }
}

static void long_copy(void *arg, int64_t begin, int64_t end, int worker) {
    (void)worker;
    long_job *j = arg;
    for (int64_t c = begin; c < end; c++) {
        int64_t b, e;
        int64_t ch = (j->k + j->nchunks - 1) / j->nchunks;
        b = c * ch;
        e = b + ch < j->k ? b + ch : j->k;
        copy_out(j->sk, j->sp, j->spm, j->w, j->kout, j->iout, b, e);
    }
}

static void long_topk(void *arg, int64_t begin, int64_t end, int worker) {
    (void)worker;
    long_job *j = arg;
    for (int64_t c = begin; c < end; c++) {
        int64_t b, e;
        chunk_range(j, c, &b, &e, j->n);
        j->cm[c] = topk(j->sk, b, e, j->k, j->w, j->ck + c * j->k, j->cp + c * j->k);
    }
}

/* Merges the chunks' candidate lists (each sorted by (key, pos), chunk c's
 * positions all below chunk c+1's) into the first k; false if a chunk gave
 * up. */
static bool long_topk_merge(const long_job *j, void *kout, int64_t *iout) {
    uint64_t mk[2][CPU_SORT_TOPK_MAX];
    int64_t mp[2][CPU_SORT_TOPK_MAX];
    int64_t m = 0;
    int cur = 0;
    for (int64_t c = 0; c < j->nchunks; c++) {
        int64_t cm = j->cm[c];
        if (cm < 0) return false;
        const uint64_t *bk = j->ck + c * j->k;
        const int64_t *bp = j->cp + c * j->k;
        int64_t x = 0, y = 0, t = 0;
        while (t < j->k && (x < m || y < cm)) { /* ties: the earlier chunk first */
            if (y >= cm || (x < m && mk[cur][x] <= bk[y])) mk[!cur][t] = mk[cur][x], mp[!cur][t++] = mp[cur][x++];
            else mk[!cur][t] = bk[y], mp[!cur][t++] = bp[y++];
        }
        m = t, cur = !cur;
    }
    write_cands(mk[cur], mp[cur], j->k, j->w, kout, iout);
    return true;
}

/* ---- MSD: one scatter on the top 16 bits, then buckets in cache ------------ */

enum { PREFIXES = 1 << 16 };

/* Digits of a bucket's sort: keys - lo below 2^bits_total in npass digits
 * of at most 12 bits. */
static size_t bucket_scratch_bytes(int64_t lim, bool w, bool pos, bool pos64) {
    return align64((size_t)lim * (w ? 8 : 4)) + (pos ? align64((size_t)lim * (pos64 ? 8 : 4)) : 0) +
           align64(6 * 4096 * sizeof(uint32_t)) + align64(4096 * sizeof(int64_t));
}

static void long_h16(void *arg, int64_t begin, int64_t end, int worker) {
    (void)worker;
    long_job *j = arg;
    for (int64_t c = begin; c < end; c++) {
        int64_t b, e;
        chunk_range(j, c, &b, &e, j->n);
        uint32_t *h = j->h16 + (size_t)c * PREFIXES;
        memset(h, 0, PREFIXES * sizeof(uint32_t));
        hist_one(j->sk, b, e, h, j->pshift, PREFIXES - 1, j->w);
    }
}

static void long_msd_scatter(void *arg, int64_t begin, int64_t end, int worker) {
    (void)worker;
    long_job *j = arg;
    for (int64_t c = begin; c < end; c++) {
        int64_t b, e;
        chunk_range(j, c, &b, &e, j->n);
        wc_buf wb = wc_carve(j->mwc + (size_t)c * wc_bytes(j->nbmax), j->nbmax);
        scatter_map(j->sk, j->kb, j->pa, b, e, j->moff + (size_t)c * j->nbmax, j->pshift, j->w,
                    j->pa ? (j->pos64 ? P_U64 : P_U32) : P_NONE, &wb, j->map, j->nbk);
    }
}

/* Sorts bucket bi (in kb / pa) into the outputs: an LSD radix of the keys
 * less the bucket's lowest prefix, in the worker's scratch. */
static void msd_bucket(const long_job *j, int64_t bi, char *scr) {
    int64_t s = j->bstart[bi], m = j->bstart[bi + 1] - s, k = j->k;
    if (m == 0 || s >= k) return;
    bool w = j->w, pos = j->pa != NULL;
    size_t ks = w ? 8 : 4, ps = j->pos64 ? 8 : 4;
    int pm = pos ? (j->pos64 ? P_U64 : P_U32) : P_NONE;
    void *bk = (char *)j->kb + (size_t)s * ks, *bp = pos ? (char *)j->pa + (size_t)s * ps : NULL;
    void *tk = scr, *tp = NULL;
    scr += align64((size_t)j->lim * ks);
    if (pos) tp = scr, scr += align64((size_t)j->lim * ps);
    uint32_t *h = (uint32_t *)scr;
    int64_t *off = (int64_t *)(scr + align64(6 * 4096 * sizeof(uint32_t)));
    uint64_t lo = (uint64_t)j->bpf[bi] << j->pshift;
    uint64_t span = ((uint64_t)(j->bpl[bi] - j->bpf[bi] + 1) << j->pshift) - 1;
    int tb = 64 - __builtin_clzll(span), npass = (tb + 11) / 12, bits = (tb + npass - 1) / npass, nb = 1 << bits;
    memset(h, 0, sizeof(uint32_t) * (size_t)(npass * nb));
    hist_lo(bk, m, lo, h, bits, npass, w);
    int act[6], nact = 0;
    uint64_t v0 = ldk(bk, 0, w) - lo;
    for (int p = 0; p < npass; p++)
        if (h[p * nb + ((v0 >> (p * bits)) & (uint64_t)(nb - 1))] != (uint32_t)m) act[nact++] = p;
    bool direct = s + m <= k; /* the last pass may write the outputs */
    void *kout = j->kout ? (char *)j->kout + (size_t)s * ks : NULL;
    int64_t *iout = j->iout ? j->iout + s : NULL;
    const void *sk = bk, *sp = bp;
    int spm = pm;
    for (int a = 0; a < nact; a++) {
        int p = act[a];
        prefix(h + p * nb, off, nb);
        void *dk, *dp = NULL;
        int dpm = P_NONE;
        bool dkeys = true;
        if (a == nact - 1 && direct) {
            dk = kout;
            dkeys = kout != NULL;
            if (iout) dp = iout, dpm = P_U64;
        } else {
            dk = sk == bk ? tk : bk;
            if (pos) dp = sk == bk ? tp : bp, dpm = pm;
        }
        scatter(sk, sp, dk, dp, 0, m, off, lo, p * bits, (uint64_t)(nb - 1), w, spm, dpm, dkeys);
        sk = dk, sp = dp, spm = dpm;
    }
    if (nact == 0 || !direct) copy_out(sk, sp, spm, w, kout, iout, 0, direct ? m : k - s);
    if (j->post && kout) j->post(j->post_arg, j->row, s, s + (direct ? m : k - s)); /* in this thread's cache */
}

static void long_buckets(void *arg, int64_t begin, int64_t end, int worker) {
    long_job *j = arg;
    char *scr = j->bscr + (size_t)worker * j->bper;
    for (int64_t g = begin; g < end; g++)
        for (int64_t bi = j->gb[g]; bi < j->gb[g + 1]; bi++) msd_bucket(j, bi, scr);
}

/* The MSD sort of one long row: false (nothing written) when a bucket is
 * larger than j->lim, then the caller sorts by LSD. */
static bool msd_row(cpu_pool *pool, long_job *j, void *keys, void *kout, int64_t *iout, int groups) {
    int64_t n = j->n, nch = j->nchunks;
    j->sk = keys;
    cpu_pool_run(pool, long_h16, j, nch, 1, 2);
    /* totals per prefix into chunk 0's row of a copy: h16 row nch is spare */
    uint32_t *tot = j->h16 + (size_t)nch * PREFIXES;
    for (int p = 0; p < PREFIXES; p++) {
        uint64_t t = 0;
        for (int64_t c = 0; c < nch; c++) t += j->h16[(size_t)c * PREFIXES + p];
        if (t > (uint64_t)j->lim) return false;
        tot[p] = (uint32_t)t;
    }
    /* buckets: runs of prefixes, closed before one would pass target */
    int nbk = 0;
    int64_t cur = 0, big = 0;
    for (int p = 0; p < PREFIXES; p++) {
        if (!tot[p]) {
            j->map[p] = (uint16_t)(nbk ? nbk - 1 : 0);
            continue;
        }
        if (nbk == 0 || (cur > 0 && cur + tot[p] > j->target)) {
            if (nbk && cur > big) big = cur;
            j->bpf[nbk++] = (uint32_t)p, cur = 0;
        }
        cur += tot[p];
        j->bpl[nbk - 1] = (uint32_t)p;
        j->map[p] = (uint16_t)(nbk - 1);
    }
    if (cur > big) big = cur;
    if (big > j->lim) return false;
    assert(nbk <= j->nbmax);
    j->nbk = nbk;
    /* offsets in (bucket, chunk) order: stable */
    for (int64_t c = 0; c < nch; c++) {
        int64_t *o = j->moff + (size_t)c * j->nbmax;
        memset(o, 0, sizeof(int64_t) * (size_t)nbk);
        const uint32_t *h = j->h16 + (size_t)c * PREFIXES;
        for (int p = 0; p < PREFIXES; p++) o[j->map[p]] += h[p];
    }
    int64_t sum = 0;
    for (int b = 0; b < nbk; b++) {
        j->bstart[b] = sum;
        for (int64_t c = 0; c < nch; c++) {
            int64_t *o = j->moff + (size_t)c * j->nbmax + b, t = *o;
            *o = sum;
            sum += t;
        }
    }
    j->bstart[nbk] = sum;
    assert(sum == n);
    cpu_pool_run(pool, long_msd_scatter, j, nch, 1, 2);
    /* groups of buckets with about n / groups keys each */
    int64_t b = 0;
    for (int g = 0; g <= groups; g++) {
        int64_t at = g == groups ? n + 1 : (n * g + groups - 1) / groups;
        while (b < nbk && j->bstart[b] < at) b++;
        j->gb[g] = b;
    }
    j->gb[groups] = nbk;
    j->kout = kout, j->iout = iout;
    cpu_pool_run(pool, long_buckets, j, groups, 1, 2);
    return true;
}

/* Sorts one long row on the pool (j's buffers were carved by the caller);
 * returns whether its keys_out entries were handed to j->post already (the
 * MSD path does it bucket by bucket). */
static bool long_row(cpu_pool *pool, long_job *j, void *keys, void *kout, int64_t *iout, void *kb, void *pa,
                     void *pb, bool pos64) {
    int64_t n = j->n, k = j->k;
    bool w = j->w;
    digits dg = j->dg;
    j->sk = keys;
    if (topk_fits(n, k)) {
        cpu_pool_run(pool, long_topk, j, j->nchunks, 1, 2);
        if (long_topk_merge(j, kout, iout)) return false;
    }
    if (j->bscr && msd_row(pool, j, keys, kout, iout, cpu_pool_threads(pool))) return true;
    cpu_pool_run(pool, long_hist_all, j, j->nchunks, 1, 2);
    size_t per = (size_t)(dg.npass * dg.nb);
    int act[8], nact = 0;
    uint64_t k0 = ldk(keys, 0, w);
    for (int p = 0; p < dg.npass; p++) {
        int64_t bin = (int64_t)((k0 >> (p * dg.bits)) & dg.mask), tot = 0;
        for (int64_t c = 0; c < j->nchunks; c++) tot += j->hall[c * per + p * dg.nb + bin];
        if (tot != n) act[nact++] = p;
    }
    const void *sk = keys, *sp = NULL;
    int spm = iout ? P_IOTA : P_NONE;
    for (int a = 0; a < nact; a++) {
        int p = act[a];
        j->sk = sk, j->shift = p * dg.bits;
        const uint32_t *h = j->hall + p * dg.nb;
        size_t hstride = per;
        if (a > 0) {
            cpu_pool_run(pool, long_hist_one, j, j->nchunks, 1, 2);
            h = j->hone, hstride = (size_t)dg.nb;
        }
        int64_t s = 0; /* offsets in (digit, chunk) order: stable */
        for (int b = 0; b < dg.nb; b++)
            for (int64_t c = 0; c < j->nchunks; c++) {
                j->off[c * dg.nb + b] = s;
                s += h[c * hstride + b];
            }
        void *dk, *dp = NULL;
        int dpm = P_NONE;
        bool dkeys = true;
        if (a == nact - 1 && k == n) {
            dk = kout;
            dkeys = kout != NULL;
            if (iout) dp = iout, dpm = P_U64;
        } else {
            dk = sk == keys ? kb : keys;
            if (iout) dp = sp == pa ? pb : pa, dpm = pos64 ? P_U64 : P_U32;
        }
        j->sp = sp, j->dk = dk, j->dp = dp, j->spm = spm, j->dpm = dpm, j->dkeys = dkeys;
        cpu_pool_run(pool, long_scatter, j, j->nchunks, 1, 2);
        sk = dk, sp = dp, spm = dpm;
    }
    if (nact == 0 || k < n) {
        j->sk = sk, j->sp = sp, j->spm = spm, j->kout = kout, j->iout = iout;
        cpu_pool_run(pool, long_copy, j, j->nchunks, 1, 2);
    }
    return false;
}

/* ---- kept work memory ---------------------------------------------------------- */

struct cpu_sort_cache {
    pthread_mutex_t mu;
    void *p[CPU_SORT_CACHED];        /* kept blocks (NULL: none) */
    size_t bytes[CPU_SORT_CACHED];   /* their sizes */
};

cpu_sort_cache *cpu_sort_cache_new(void) {
    cpu_sort_cache *c = graph_calloc(1, sizeof *c);
    if (c && pthread_mutex_init(&c->mu, NULL) != 0) {
        graph_free(c);
        return NULL;
    }
    return c;
}

void cpu_sort_cache_free(cpu_sort_cache *c) {
    if (!c) return;
    for (int i = 0; i < CPU_SORT_CACHED; i++) graph_free(c->p[i]);
    pthread_mutex_destroy(&c->mu);
    graph_free(c);
}

void *cpu_sort_cache_take(cpu_sort_cache *c, size_t bytes) {
    if (!c) return graph_malloc(bytes);
    void *p = NULL;
    pthread_mutex_lock(&c->mu);
    int best = -1; /* the smallest kept block that fits */
    for (int i = 0; i < CPU_SORT_CACHED; i++)
        if (c->p[i] && c->bytes[i] >= bytes && (best < 0 || c->bytes[i] < c->bytes[best])) best = i;
    if (best >= 0) {
        p = c->p[best];
        c->p[best] = NULL;
    }
    pthread_mutex_unlock(&c->mu);
    if (p) return p;
    /* nothing fits: the kept blocks are too small to be worth keeping */
    pthread_mutex_lock(&c->mu);
    for (int i = 0; i < CPU_SORT_CACHED; i++) {
        graph_free(c->p[i]);
        c->p[i] = NULL;
    }
    pthread_mutex_unlock(&c->mu);
    return graph_malloc(bytes);
}

void cpu_sort_cache_give(cpu_sort_cache *c, void *p, size_t bytes) {
    if (!c || !p) {
        graph_free(p);
        return;
    }
    pthread_mutex_lock(&c->mu);
    int slot = -1; /* an empty entry, else the smallest smaller one */
    for (int i = 0; i < CPU_SORT_CACHED && slot < 0; i++)
        if (!c->p[i]) slot = i;
    for (int i = 0; i < CPU_SORT_CACHED && slot < 0; i++)
        if (c->bytes[i] < bytes && (slot < 0 || c->bytes[i] < c->bytes[slot])) slot = i;
    void *drop = p;
    if (slot >= 0) {
        drop = c->p[slot];
        c->p[slot] = p;
        c->bytes[slot] = bytes;
    }
    pthread_mutex_unlock(&c->mu);
    graph_free(drop);
}

/* ---- entry ---------------------------------------------------------------------- */

/* Adds b to *total, false on overflow. */
/* A long row already in order, across the pool: each chunk checks its keys
 * (and the key before it), then each copies its share of the first k
 * entries and posts it; a non-increasing row with ties is walked by the
 * calling thread. False (nothing written) when the row is in no order. */
enum { ORDERED_CHUNKS_MAX = 256 };
typedef struct ordered_job {
    const cpu_sort_rows_args *a;
    const void *keys;
    void *kout;
    int64_t *iout;
    int64_t row, chunk;
    int ord[ORDERED_CHUNKS_MAX]; /* per chunk, then [0]: the row's */
} ordered_job;

static void ordered_check(void *arg, int64_t begin, int64_t end, int worker) {
    (void)worker;
    ordered_job *j = arg;
    for (int64_t c = begin; c < end; c++) {
        int64_t b = c * j->chunk, e = b + j->chunk < j->a->n ? b + j->chunk : j->a->n;
        j->ord[c] = order_of(j->keys, b, e, j->a->wide);
    }
}

static void ordered_copy(void *arg, int64_t begin, int64_t end, int worker) {
    (void)worker;
    ordered_job *j = arg;
    const cpu_sort_rows_args *a = j->a;
    for (int64_t c = begin; c < end; c++) {
        int64_t b = c * j->chunk, e = b + j->chunk < a->k ? b + j->chunk : a->k;
        if (b >= e) continue;
        ordered_out(j->keys, a->n, j->ord[0], a->wide, j->kout, j->iout, b, e);
        if (a->post && j->kout) a->post(a->post_arg, j->row, b, e);
    }
}

static bool ordered_long_row(cpu_pool *pool, const cpu_sort_rows_args *a, int64_t r, int threads) {
    if (!cpu_sort_check_order) return false;
    int64_t n = a->n, k = a->k;
    size_t ks = a->wide ? 8 : 4;
    ordered_job j = {.a = a, .row = r, .keys = (const char *)a->keys + (size_t)(r * n) * ks,
                     .kout = a->keys_out ? (char *)a->keys_out + (size_t)(r * k) * ks : NULL,
                     .iout = a->idx_out ? a->idx_out + r * k : NULL};
    int64_t nch = 4 * (int64_t)threads < ORDERED_CHUNKS_MAX ? 4 * (int64_t)threads : ORDERED_CHUNKS_MAX;
    j.chunk = (n + nch - 1) / nch;
    nch = (n + j.chunk - 1) / j.chunk;
    cpu_pool_run(pool, ordered_check, &j, nch, 1, 2);
    int ord = ORDER_UP | ORDER_DOWN | ORDER_STRICT_DOWN;
    for (int64_t c = 0; c < nch; c++) ord &= j.ord[c];
    if (!(ord & (ORDER_UP | ORDER_DOWN))) return false;
    if (!(ord & (ORDER_UP | ORDER_STRICT_DOWN))) { /* non-increasing with ties */
        down_runs_out(j.keys, n, k, a->wide, j.kout, j.iout);
        if (a->post && j.kout) a->post(a->post_arg, r, 0, k);
        return true;
    }
    j.ord[0] = ord;
    cpu_pool_run(pool, ordered_copy, &j, (k + j.chunk - 1) / j.chunk, 1, 2);
    return true;
}

/* ---- long rows of few distinct keys ------------------------------------------
 * A row that holds at most FEW_MAX distinct keys (a category, a rounded or
 * quantized column) is counted rather than sorted: a sample of FEW_SAMPLE
 * evenly spaced keys gives the candidates (more than FEW_MAX / 2 distinct
 * among them: not this path), kept in ascending order and found through a
 * small open-addressing table; each chunk counts its keys per candidate
 * (one read of the row), the counts laid out in (candidate, chunk) order
 * give each chunk's first slot per candidate, so that the keys are the
 * candidates' runs written out and the positions one more read of the row,
 * each position stored at its candidate's next slot: the stable order, as
 * the radix sort gives it. A key the sample missed stops its chunk's count;
 * the row then takes the radix path, nothing written. Two passes over the
 * row (one for keys alone) instead of the radix sort's histogram and three
 * scatters: NumPy 2's np.sort (x86-simd-sort) is fast on such rows. */
enum { FEW_MAX = 64, FEW_SLOTS = 256, FEW_SAMPLE = 1024, FEW_CHUNKS = 64 };

typedef struct few_job {
    const cpu_sort_rows_args *a;
    const void *keys;
    void *kout;
    int64_t *iout;
    int64_t row, chunk, nchunks, k;
    int nd;                              /* candidates */
    uint64_t cand[FEW_MAX];              /* ascending */
    uint64_t tkey[FEW_SLOTS];            /* table: key, */
    int16_t tidx[FEW_SLOTS];             /* its candidate, -1 empty */
    int64_t cnt[FEW_CHUNKS][FEW_MAX];    /* per chunk: counts, then first slots */
    int64_t start[FEW_MAX + 1];          /* each candidate's first slot in the order */
    bool missed[FEW_CHUNKS];             /* a chunk met a key not among the candidates */
} few_job;

static unsigned few_hash(uint64_t key) {
    return (unsigned)(((key ^ (key >> 32)) * 0x9E3779B97F4A7C15ull) >> 56); /* FEW_SLOTS = 256 */
}

/* The candidate of key, or -1 when it is none. */
AI int few_find(const few_job *j, uint64_t key) {
    for (unsigned s = few_hash(key);; s = (s + 1) & (FEW_SLOTS - 1)) {
        int d = j->tidx[s];
        if (d < 0 || j->tkey[s] == key) return d;
    }
}

AI bool few_count_k(few_job *j, int64_t b, int64_t e, int64_t *cnt, bool w) {
    for (int64_t i = b; i < e; i++) {
        int d = few_find(j, ldk(j->keys, i, w));
        if (d < 0) return false;
        cnt[d]++;
    }
    return true;
}

AI void few_pos_k(const few_job *j, int64_t b, int64_t e, int64_t *slot, int64_t *iout, int64_t k, bool w) {
    for (int64_t i = b; i < e; i++) {
        int64_t o = slot[few_find(j, ldk(j->keys, i, w))]++;
        if (o < k) iout[o] = i;
    }
}

#ifdef TOPK_AVX512
/* few_count_k for uint32 keys with AVX-512: 16 keys compared with every
 * candidate at once, each candidate's count the popcount of its mask, a
 * block whose masks do not cover all 16 lanes holds a key that is none (no
 * table look-up: about 5 instructions a key for 16 candidates, against a
 * dependent hash probe and a counter in memory per key). */
__attribute__((target("avx512f,popcnt"))) static bool few_count_u32_avx512(const few_job *j, int64_t b, int64_t e,
                                                                          int64_t *cnt) {
    const uint32_t *keys = (const uint32_t *)j->keys;
    __m512i cv[FEW_MAX / 2];
    int nd = j->nd;
    for (int d = 0; d < nd; d++) cv[d] = _mm512_set1_epi32((int)(uint32_t)j->cand[d]);
    int64_t i = b;
    for (; i + 16 <= e; i += 16) {
        __m512i x = _mm512_loadu_si512((const void *)(keys + i));
        unsigned any = 0;
        for (int d = 0; d < nd; d++) {
            unsigned m = _mm512_cmpeq_epi32_mask(x, cv[d]);
            cnt[d] += _mm_popcnt_u32(m);
            any |= m;
        }
        if (any != 0xFFFF) return false;
    }
    for (; i < e; i++) {
        int d = few_find(j, keys[i]);
        if (d < 0) return false;
        cnt[d]++;
    }
    return true;
}
#endif

static void few_count(void *arg, int64_t begin, int64_t end, int worker) {
    (void)worker;
    few_job *j = arg;
    for (int64_t c = begin; c < end; c++) {
        int64_t b = c * j->chunk, e = b + j->chunk < j->a->n ? b + j->chunk : j->a->n;
        memset(j->cnt[c], 0, sizeof j->cnt[c]);
#ifdef TOPK_AVX512
        if (!j->a->wide && cpu_sort_few_avx512 && __builtin_cpu_supports("avx512f")) {
            j->missed[c] = !few_count_u32_avx512(j, b, e, j->cnt[c]);
            continue;
        }
#endif
        j->missed[c] = !(j->a->wide ? few_count_k(j, b, e, j->cnt[c], true) : few_count_k(j, b, e, j->cnt[c], false));
    }
}

static void few_out(void *arg, int64_t begin, int64_t end, int worker) {
    (void)worker;
    few_job *j = arg;
    bool w = j->a->wide;
    for (int64_t c = begin; c < end; c++) {
        if (j->iout) { /* positions: chunk c of the row */
            int64_t b = c * j->chunk, e = b + j->chunk < j->a->n ? b + j->chunk : j->a->n;
            if (w) few_pos_k(j, b, e, j->cnt[c], j->iout, j->k, true);
            else few_pos_k(j, b, e, j->cnt[c], j->iout, j->k, false);
        }
        if (j->kout) { /* keys: slots [b, e) of the order, the candidates' runs */
            int64_t b = c * j->chunk, e = b + j->chunk < j->k ? b + j->chunk : j->k;
            if (b >= e) continue;
            int d = 0;
            while (j->start[d + 1] <= b) d++;
            for (int64_t i = b; i < e; d++) {
                int64_t stop = j->start[d + 1] < e ? j->start[d + 1] : e;
                if (w)
                    for (; i < stop; i++) ((uint64_t *)j->kout)[i] = j->cand[d];
                else
                    for (uint32_t v = (uint32_t)j->cand[d]; i < stop; i++) ((uint32_t *)j->kout)[i] = v;
            }
            if (j->a->post) j->a->post(j->a->post_arg, j->row, b, e);
        }
    }
}

/* Row r's first k entries when it holds few distinct keys (see above);
 * false (nothing written) otherwise. */
static bool few_long_row(cpu_pool *pool, const cpu_sort_rows_args *a, int64_t r, int threads) {
    int64_t n = a->n, k = a->k;
    if (!cpu_sort_check_few || n < 4 * FEW_SAMPLE || topk_fits(n, k)) return false; /* top-k: one pass */
    size_t ks = a->wide ? 8 : 4;
    few_job *j = graph_malloc(sizeof *j);
    if (!j) return false; /* the other paths say whether memory is short */
    *j = (few_job){.a = a, .row = r, .k = k, .keys = (const char *)a->keys + (size_t)(r * n) * ks,
                   .kout = a->keys_out ? (char *)a->keys_out + (size_t)(r * k) * ks : NULL,
                   .iout = a->idx_out ? a->idx_out + r * k : NULL};
    bool ok = false;
    /* the candidates: the sample's distinct keys, ascending */
    for (int64_t s = 0; s < FEW_SAMPLE; s++) {
        uint64_t v = ldk(j->keys, s * (n / FEW_SAMPLE), a->wide);
        int at = 0;
        while (at < j->nd && j->cand[at] < v) at++;
        if (at < j->nd && j->cand[at] == v) continue;
        if (j->nd == FEW_MAX / 2) goto done;
        memmove(&j->cand[at + 1], &j->cand[at], (size_t)(j->nd - at) * sizeof j->cand[0]);
        j->cand[at] = v;
        j->nd++;
    }
    memset(j->tidx, -1, sizeof j->tidx);
    for (int d = 0; d < j->nd; d++) {
        unsigned s = few_hash(j->cand[d]);
        while (j->tidx[s] >= 0) s = (s + 1) & (FEW_SLOTS - 1);
        j->tkey[s] = j->cand[d];
        j->tidx[s] = (int16_t)d;
    }
    int64_t nch = 4 * (int64_t)threads < FEW_CHUNKS ? 4 * (int64_t)threads : FEW_CHUNKS;
    j->chunk = (n + nch - 1) / nch;
    j->nchunks = (n + j->chunk - 1) / j->chunk;
    cpu_pool_run(pool, few_count, j, j->nchunks, 1, 2);
    for (int64_t c = 0; c < j->nchunks; c++)
        if (j->missed[c]) goto done;
    int64_t at = 0; /* (candidate, chunk) order: each chunk's first slot */
    for (int d = 0; d < j->nd; d++) {
        j->start[d] = at;
        for (int64_t c = 0; c < j->nchunks; c++) {
            int64_t m = j->cnt[c][d];
            j->cnt[c][d] = at;
            at += m;
        }
    }
    j->start[j->nd] = at; /* n */
    /* keys: slots in chunks of the same size (k of them) */
    cpu_pool_run(pool, few_out, j, j->nchunks, 1, 2);
    ok = true;
done:
    graph_free(j);
    return ok;
}

static bool add_size(size_t *total, size_t b) {
    if (*total > SIZE_MAX - b) return false;
    *total += b;
    return true;
}

static bool sort_long(cpu_pool *pool, const cpu_sort_rows_args *a, int threads) {
    int64_t first = 0; /* rows already in order need no scratch */
    while (first < a->nrows && (ordered_long_row(pool, a, first, threads) || few_long_row(pool, a, first, threads)))
        first++;
    if (first == a->nrows) return true;
    int64_t n = a->n, k = a->k;
    bool w = a->wide, pos = a->idx_out != NULL, pos64 = n > cpu_sort_pos32_max;
    size_t ks = w ? 8 : 4, ps = pos64 ? 8 : 4;
    long_job j = {.n = n, .k = k, .w = w, .dg = digits_for(n, w), .post = a->post, .post_arg = a->post_arg};
    int64_t minch = cpu_sort_long_min / 2 > 16 ? cpu_sort_long_min / 2 : 16;
    int64_t nch = (n + minch - 1) / minch; /* chunks of at least long_min/2 keys, */
    if (nch > threads) nch = threads;
    int64_t big = (n + ((int64_t)1 << 30) - 1) >> 30; /* of at most 2^30 keys (uint32 counters) */
    if (nch < big) nch = big;
    j.nchunks = nch;
    j.chunk = ((n + nch - 1) / nch + 15) & ~(int64_t)15;
    j.nchunks = (n + j.chunk - 1) / j.chunk;
    nch = j.nchunks;

    size_t nb = (size_t)j.dg.nb, per = (size_t)(j.dg.npass * j.dg.nb), total = 0;
    size_t kbytes = (size_t)n * ks, pbytes = pos ? (size_t)n * ps : 0;
    if ((uint64_t)n > SIZE_MAX / 8) return false;
    bool ok = add_size(&total, align64(kbytes)) && add_size(&total, 2 * align64(pbytes)) &&
              add_size(&total, align64((size_t)nch * per * 4)) && add_size(&total, align64((size_t)nch * nb * 4)) &&
              add_size(&total, align64((size_t)nch * nb * 8)) && add_size(&total, align64((size_t)nch * wc_bytes((int)nb))) &&
              add_size(&total, align64((size_t)nch * (size_t)(k <= CPU_SORT_TOPK_MAX ? k : 0) * 16 + (size_t)nch * 8));
    /* the MSD step's buffers (rows of at least 2 * cpu_sort_msd_target) */
    bool msd = n >= 2 * cpu_sort_msd_target && cpu_sort_msd_target > 0;
    if (msd) {
        j.target = cpu_sort_msd_target;
        if (j.target < 2 * n / 4000 + 1) j.target = 2 * n / 4000 + 1; /* at most ~4000 buckets */
        j.nbmax = (int)((2 * n / j.target + 2 + 7) & ~(int64_t)7); /* wc_bytes: whole lines */
        j.lim = n / (4 * threads) > 4 * j.target ? n / (4 * threads) : 4 * j.target;
        if (j.lim > n) j.lim = n;
        if (j.lim > (int64_t)1 << 31) j.lim = (int64_t)1 << 31;
        j.pshift = (w ? 64 : 32) - 16;
        j.bper = bucket_scratch_bytes(j.lim, w, pos, pos64);
        size_t mb = (size_t)j.nbmax;
        ok = ok && add_size(&total, align64((size_t)(nch + 1) * PREFIXES * 4)) && add_size(&total, align64(PREFIXES * 2)) &&
             add_size(&total, 2 * align64(mb * 4)) && add_size(&total, align64((mb + 1) * 8)) &&
             add_size(&total, align64((size_t)nch * mb * 8)) && add_size(&total, align64((size_t)nch * wc_bytes((int)mb))) &&
             add_size(&total, align64((size_t)(threads + 1) * 8)) && (size_t)threads <= SIZE_MAX / j.bper &&
             add_size(&total, (size_t)threads * j.bper);
    }
    char *blk = ok && add_size(&total, 64) ? cpu_sort_cache_take(a->cache, total) : NULL;
    if (!blk) return false;
    char *p = blk + (-(uintptr_t)blk & 63); /* 64-byte aligned */
    void *kb = p;
    p += align64(kbytes);
    void *pa = pos ? p : NULL;
    p += align64(pbytes);
    void *pb = pos ? p : NULL;
    p += align64(pbytes);
    j.hall = (uint32_t *)p, p += align64((size_t)nch * per * 4);
    j.hone = (uint32_t *)p, p += align64((size_t)nch * nb * 4);
    j.off = (int64_t *)p, p += align64((size_t)nch * nb * 8);
    j.wc = p, p += align64((size_t)nch * wc_bytes((int)nb));
    j.cm = (int64_t *)p, p += (size_t)nch * 8;
    j.ck = (uint64_t *)p, p += (size_t)nch * (size_t)(k <= CPU_SORT_TOPK_MAX ? k : 0) * 8;
    j.cp = (int64_t *)p;
    p += (size_t)nch * (size_t)(k <= CPU_SORT_TOPK_MAX ? k : 0) * 8;
    p = blk + (-(uintptr_t)blk & 63) + align64((size_t)(p - (blk + (-(uintptr_t)blk & 63))));
    if (msd) {
        size_t mb = (size_t)j.nbmax;
        j.h16 = (uint32_t *)p, p += align64((size_t)(nch + 1) * PREFIXES * 4);
        j.map = (uint16_t *)p, p += align64(PREFIXES * 2);
        j.bpf = (uint32_t *)p, p += align64(mb * 4);
        j.bpl = (uint32_t *)p, p += align64(mb * 4);
        j.bstart = (int64_t *)p, p += align64((mb + 1) * 8);
        j.moff = (int64_t *)p, p += align64((size_t)nch * mb * 8);
        j.mwc = p, p += align64((size_t)nch * wc_bytes((int)mb));
        j.gb = (int64_t *)p, p += align64((size_t)(threads + 1) * 8);
        j.bscr = p;
        j.kb = kb, j.pa = pa, j.pos64 = pos64;
    }

    for (int64_t r = first; r < a->nrows; r++) {
        if (r > first && (ordered_long_row(pool, a, r, threads) || few_long_row(pool, a, r, threads))) continue;
        void *keys = (char *)a->keys + (size_t)(r * n) * ks;
        void *kout = a->keys_out ? (char *)a->keys_out + (size_t)(r * k) * ks : NULL;
        int64_t *iout = a->idx_out ? a->idx_out + r * k : NULL;
        j.row = r;
        if (!long_row(pool, &j, keys, kout, iout, kb, pa, pb, pos64) && a->post && kout) a->post(a->post_arg, r, 0, k);
    }
    cpu_sort_cache_give(a->cache, blk, total);
    return true;
}

bool cpu_sort_rows(cpu_pool *pool, const cpu_sort_rows_args *a) {
    int64_t nrows = a->nrows, n = a->n, k = a->k;
    if (nrows <= 0 || k <= 0 || n <= 0 || (!a->keys_out && !a->idx_out)) return true;
    int threads = cpu_pool_threads(pool);
    /* Fewer long rows than threads: each row split across the pool. So are
     * rows too long for uint32 positions. */
    if ((threads > 1 && nrows < threads && n >= cpu_sort_long_min) || n > cpu_sort_pos32_max)
        return sort_long(pool, a, threads);

    rows_job j = {.a = a, .dg = digits_for(n, a->wide)};
    int64_t min_par = PAR_MIN_KEYS / n + 1; /* rows in a parallel run */
    if (min_par < 2) min_par = 2;
    if (n > CPU_SORT_TINY) { /* radix scratch, also for top-k rows that give up */
        j.per = row_scratch_bytes(n, a->wide, a->idx_out != NULL, j.dg);
        size_t users = nrows >= min_par ? (size_t)threads : 1; /* worker ids the run may use */
        if (users > (SIZE_MAX - 64) / j.per) return false;
        j.block = cpu_sort_cache_take(a->cache, j.per * users + 64);
        if (!j.block) return false;
        j.scratch = j.block + (-(uintptr_t)j.block & 63);
    }
    cpu_pool_run(pool, rows_body, &j, nrows, 1, min_par);
    cpu_sort_cache_give(a->cache, j.block, j.per * (nrows >= min_par ? (size_t)threads : 1) + 64);
    return true;
}
