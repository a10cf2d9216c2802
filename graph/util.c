/* graph/util.c: allocation, error messages and shape arithmetic.
 *
 * Every allocation of the library goes through graph_malloc & co. Each block
 * carries a small header with its size, so the live-byte counter
 * (lf_debug_live_bytes) is exact and the failure hook (lf_debug_fail_alloc)
 * can fail the Nth allocation. The counters are process-wide atomics.
 *
 * Large blocks (GRAPH_BIG_BLOCK bytes and more: array buffers, temporaries,
 * staging) are mapped apart from the C library's heap, 2 MiB-aligned, with
 * madvise(MADV_HUGEPAGE), as NumPy does for its arrays: with transparent
 * huge pages in "madvise" mode (Debian's default) a 64 MiB array then needs
 * 32 TLB entries instead of 16384, which is what a gather's random loads
 * spend their time on once the array outgrows the TLB's reach. The data
 * starts BIG_DATA_OFFSET bytes into the mapping (64-byte aligned); the
 * header sits just before it as for small blocks. What must stay true: a
 * block is big exactly when its header's size is >= GRAPH_BIG_BLOCK, so
 * graph_free and graph_realloc know how it was made from the size alone.
 *
 * Error messages: graph_error writes into the context, or into a
 * thread-local buffer when there is no context (lf_errmsg(NULL)).
 */
#include "graph/graph.h"

#include <stdalign.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

/* Header before each block; sized to keep the user pointer max-aligned. */
typedef union alloc_header {
    size_t bytes;
    max_align_t align;
} alloc_header;

static atomic_size_t live_bytes;
static atomic_int_fast64_t fail_countdown; /* 0: off; k > 0: the kth next call fails */
static atomic_bool fail_sticky;

void lf_debug_fail_alloc(int64_t nth, bool sticky) {
    atomic_store(&fail_sticky, sticky);
    atomic_store(&fail_countdown, nth > 0 ? nth : 0);
}

size_t lf_debug_live_bytes(void) { return atomic_load(&live_bytes); }

/* True when the failure hook says this allocation must fail. */
static bool injected_failure(void) {
    int_fast64_t k = atomic_load(&fail_countdown);
    if (k <= 0) return false;
    if (k == 1) {
        if (!atomic_load(&fail_sticky)) atomic_store(&fail_countdown, 0);
        return true;
    }
    atomic_fetch_sub(&fail_countdown, 1);
    return false;
}

#define HUGE_PAGE ((size_t)2 << 20)
#define BIG_DATA_OFFSET ((size_t)64)

_Static_assert(sizeof(alloc_header) <= BIG_DATA_OFFSET, "the header fits before a big block's data");

/* The mapping of a big block of `bytes`: its length (whole pages). */
static size_t big_map_len(size_t bytes) {
    size_t page = 4096;
    return (BIG_DATA_OFFSET + bytes + page - 1) / page * page;
}

/* A big block: fresh anonymous pages (zero), 2 MiB-aligned, huge pages
 * asked for. NULL when the system has no memory for it. */
static alloc_header *big_alloc(size_t bytes) {
    if (bytes > SIZE_MAX - BIG_DATA_OFFSET - 2 * HUGE_PAGE) return NULL;
    size_t len = big_map_len(bytes), over = len + HUGE_PAGE;
    char *raw = mmap(NULL, over, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return NULL;
    char *base = (char *)(((uintptr_t)raw + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
    if (base > raw) munmap(raw, (size_t)(base - raw));
    if (raw + over > base + len) munmap(base + len, (size_t)(raw + over - (base + len)));
    (void)madvise(base, len, MADV_HUGEPAGE); /* advice: without THP the block still works */
    alloc_header *h = (alloc_header *)(base + BIG_DATA_OFFSET) - 1;
    h->bytes = bytes;
    return h;
}

static void big_free(alloc_header *h) {
    char *base = (char *)(h + 1) - BIG_DATA_OFFSET;
    munmap(base, big_map_len(h->bytes));
}

/* A block of `bytes` with its header set, zeroed when `zero`. */
static alloc_header *block_alloc(size_t bytes, bool zero) {
    if (bytes > SIZE_MAX - sizeof(alloc_header) || injected_failure()) return NULL;
    alloc_header *h = bytes >= GRAPH_BIG_BLOCK ? big_alloc(bytes)
                      : zero                 ? calloc(1, sizeof *h + bytes)
                                             : malloc(sizeof *h + bytes);
    if (!h) return NULL;
    h->bytes = bytes;
    atomic_fetch_add(&live_bytes, bytes);
    return h;
}

void *graph_malloc(size_t bytes) {
    alloc_header *h = block_alloc(bytes, false);
    return h ? h + 1 : NULL;
}

/* The C library's calloc (not malloc + memset), or fresh mapped pages for a
 * big block: both are zero already, so a 1 GiB buffer costs neither the time
 * to fill it nor resident memory until it is written. */
void *graph_calloc(size_t count, size_t size) {
    if (size && count > SIZE_MAX / size) return NULL;
    alloc_header *h = block_alloc(count * size, true);
    return h ? h + 1 : NULL;
}

void *graph_realloc(void *p, size_t bytes) {
    if (!p) return graph_malloc(bytes);
    if (bytes > SIZE_MAX - sizeof(alloc_header)) return NULL;
    alloc_header *h = (alloc_header *)p - 1;
    size_t old = h->bytes;
    if (old >= GRAPH_BIG_BLOCK || bytes >= GRAPH_BIG_BLOCK) { /* a move between kinds, or of a big block */
        void *q = graph_malloc(bytes);
        if (!q) return NULL;
        memcpy(q, p, old < bytes ? old : bytes);
        graph_free(p);
        return q;
    }
    if (injected_failure()) return NULL;
    alloc_header *nh = realloc(h, sizeof *nh + bytes);
    if (!nh) return NULL;
    nh->bytes = bytes;
    atomic_fetch_sub(&live_bytes, old);
    atomic_fetch_add(&live_bytes, bytes);
    return nh + 1;
}

void graph_free(void *p) {
    if (!p) return;
    alloc_header *h = (alloc_header *)p - 1;
    atomic_fetch_sub(&live_bytes, h->bytes);
    if (h->bytes >= GRAPH_BIG_BLOCK) big_free(h);
    else free(h);
}

char *graph_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = graph_malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

char *graph_strdupf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return NULL;
    char *s = graph_malloc((size_t)n + 1);
    if (!s) return NULL;
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

double graph_now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

bool graph_debug_on(const char *what) {
    const char *s = getenv("LF_DEBUG");
    size_t n = strlen(what);
    while (s && *s) {
        const char *end = strchr(s, ',');
        size_t len = end ? (size_t)(end - s) : strlen(s);
        if (len == n && !strncmp(s, what, n)) return true;
        s = end ? end + 1 : NULL;
    }
    return false;
}

/* ---- messages ------------------------------------------------------------ */

static _Thread_local char thread_errmsg[LF_ERRMSG_CAP];

static lf_status graph_verror(lf_ctx *ctx, lf_status st, const char *fmt, va_list ap) {
    char *dst = ctx ? ctx->errmsg : thread_errmsg;
    vsnprintf(dst, LF_ERRMSG_CAP, fmt, ap);
    return st;
}

lf_status graph_error(lf_ctx *ctx, lf_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    graph_verror(ctx, st, fmt, ap);
    va_end(ap);
    return st;
}

const char *lf_errmsg(const lf_ctx *ctx) { return ctx ? ctx->errmsg : thread_errmsg; }

const char *lf_status_name(lf_status s) {
    static const char *const names[] = {
        "LF_OK", "LF_ERR_NULL", "LF_ERR_INVALID", "LF_ERR_SHAPE", "LF_ERR_AXIS",
        "LF_ERR_RANGE", "LF_ERR_DTYPE", "LF_ERR_OVERFLOW", "LF_ERR_ARITY", "LF_ERR_PARSE",
        "LF_ERR_NOMEM", "LF_ERR_BACKEND", "LF_ERR_STATE", "LF_ERR_INDEX", "LF_ERR_COMPILE", "LF_ERR_EXTERN",
    };
    if ((unsigned)s < sizeof names / sizeof names[0]) return names[s];
    return "LF_ERR_UNKNOWN";
}

/* ---- shapes -------------------------------------------------------------- */

const char *graph_shape_str(char *buf, size_t cap, int ndim, const int64_t *shape) {
    size_t len = 0;
    len += (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < ndim && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, i ? ",%lld" : "%lld", (long long)shape[i]);
    if (len < cap) snprintf(buf + len, cap - len, "]");
    return buf;
}

lf_status graph_shape_problem(const char *what, int ndim, const int64_t *shape, char *msg,
                              size_t cap) {
    if (ndim < 0 || ndim > LF_MAX_DIMS) {
        snprintf(msg, cap, "%s: %d dimensions (at most %d)", what, ndim, LF_MAX_DIMS);
        return LF_ERR_SHAPE;
    }
    if (ndim > 0 && !shape) {
        snprintf(msg, cap, "%s: shape is NULL for %d dimensions", what, ndim);
        return LF_ERR_NULL;
    }
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0) {
            snprintf(msg, cap, "%s: extent %lld of axis %d is negative", what,
                     (long long)shape[i], i);
            return LF_ERR_SHAPE;
        }
    return LF_OK;
}

bool graph_shape_numel(int ndim, const int64_t *shape, size_t elem_size, int64_t *numel) {
    int64_t n = 1;
    bool zero = false;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] == 0) zero = true;
        /* keep checking every extent for overflow even past a zero */
        if (shape[i] != 0 && __builtin_mul_overflow(n, shape[i], &n)) return false;
    }
    if (zero) n = 0;
    size_t bytes;
    if (__builtin_mul_overflow((uint64_t)n, (uint64_t)elem_size, &bytes)) return false;
    if (bytes > (size_t)INT64_MAX) return false;
    *numel = n;
    return true;
}

void graph_contiguous_strides(int ndim, const int64_t *shape, int64_t *strides) {
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        strides[i] = s;
        s *= shape[i] ? shape[i] : 1;
    }
}

bool graph_broadcast_shapes(int na, const int64_t *a, int nb, const int64_t *b, int *nout,
                            int64_t *out) {
    int n = na > nb ? na : nb;
    int64_t tmp[LF_MAX_DIMS];
    for (int i = 0; i < n; i++) {
        int ia = na - n + i, ib = nb - n + i;
        int64_t ea = ia >= 0 ? a[ia] : 1, eb = ib >= 0 ? b[ib] : 1;
        if (ea == eb || eb == 1) tmp[i] = ea;
        else if (ea == 1) tmp[i] = eb;
        else return false;
    }
    memcpy(out, tmp, (size_t)n * sizeof *out);
    *nout = n;
    return true;
}

void graph_broadcast_strides(int nin, const int64_t *in, int nout, const int64_t *out,
                             int64_t *strides) {
    int64_t dense[LF_MAX_DIMS];
    graph_contiguous_strides(nin, in, dense);
    for (int i = 0; i < nout; i++) {
        int j = nin - nout + i;
        strides[i] = (j >= 0 && in[j] == out[i] && in[j] != 1) ? dense[j] : 0;
    }
}

/* ---- output aliasing ---------------------------------------------------------- */

typedef struct alias_entry {
    const lf_buffer *buf;  /* NULL: empty */
    int count;             /* outputs naming it */
    bool input;            /* the program reads it */
} alias_entry;

static alias_entry *alias_find(alias_entry *t, size_t mask, const lf_buffer *b) {
    uint64_t h = (uint64_t)(uintptr_t)b * 0x9e3779b97f4a7c15u;
    size_t j = (size_t)(h >> 17) & mask;
    while (t[j].buf && t[j].buf != b) j = (j + 1) & mask;
    t[j].buf = b;
    return &t[j];
}

bool graph_dst_aliases(int n, lf_buffer *const *dsts, int nin, const lf_buffer *const *ins, bool *unsafe,
                       bool *own_input) {
    size_t cap = 16;
    while (cap < 2 * ((size_t)n + (size_t)nin)) cap *= 2;
    alias_entry *t = graph_calloc(cap, sizeof *t);
    if (!t) return false;
    for (int j = 0; j < nin; j++) alias_find(t, cap - 1, ins[j])->input = true;
    for (int i = 0; i < n; i++) alias_find(t, cap - 1, dsts[i])->count++;
    bool wrapped = false;
    for (int i = 0; i < n; i++) {
        const alias_entry *e = alias_find(t, cap - 1, dsts[i]);
        unsafe[i] = e->input || e->count > 1;
        if (own_input) own_input[i] = e->input && e->count == 1;
        wrapped |= dsts[i]->wrapped;
    }
    for (int j = 0; j < nin && !wrapped; j++) wrapped = ins[j]->wrapped;
    if (wrapped) /* distinct buffers share memory only when wrapped: compare ranges */
        for (int i = 0; i < n; i++)
            for (int j = 0; j < nin; j++)
                if (ins[j] != dsts[i] && (dsts[i]->wrapped || ins[j]->wrapped) &&
                    graph_buffers_overlap(dsts[i], ins[j])) {
                    unsafe[i] = true;
                    if (own_input) own_input[i] = false;
                }
    graph_free(t);
    return true;
}
