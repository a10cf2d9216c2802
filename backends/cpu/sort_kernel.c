/* backends/cpu/sort_kernel.c: a sort kernel (fusion/plan_sort.c) on the CPU.
 *
 * The kernel's space is the sort input's rows one after the other (the
 * sorted axis innermost), so flat positions [r*n, (r+1)*n) are row r. The
 * generated lf_k_run writes the sort keys of a range of positions into a
 * work array (graph_sort_key's order: unsigned, descending folded in);
 * backends/cpu/sort.c sorts each row of keys stably; this file writes each
 * row's first k entries into the slots: positions (i64) to the indices
 * node's, and values decoded from the keys to the values node's.
 *
 * Two ways, the same results (a stable order is unique, so neither the
 * thread count nor the chunking shows in them):
 *  - chunks: rows in groups of about CHUNK_KEYS keys, a group per pool
 *    task: its keys computed into the task's own memory, sorted or selected
 *    there (top-k with small k is one pass over the keys: backends/cpu/sort.c),
 *    its entries written out; the keys of a batch of rows never exist all
 *    at once (a 64000 x 1000 top-k holds about CHUNK_KEYS keys per thread);
 *  - long rows (fewer rows than the pool has threads, each of LONG_ROW keys
 *    or more): all keys at once, computed on the pool, sorted across it by
 *    cpu_sort_rows, the entries written on the pool.
 * Values that the keys do not carry: a key is -0.0 and +0.0 alike and one
 * key stands for every NaN. The key pass says whether its range holds a
 * -0.0 or a NaN other than the canonical one (0x7fc00000 and its f64 twin);
 * when it does not, a zero key is +0.0 and a NaN key the canonical NaN;
 * when it does, a row with such entries computes its values again
 * (lf_k_raw) and takes them in position order: the sort is stable, so the
 * m-th zero (or NaN) entry of the output is the row's m-th zero (NaN).
 * The values are moved, never recomputed differently, as lazyfuse.h states.
 */
#include "backends/cpu/sort_kernel.h"

#include "backends/cpu/sort.h"

#include <assert.h>
#include <stdatomic.h>
#include <string.h>

enum {
    CHUNK_KEYS = 32768,   /* keys per chunk task (stays in L2) */
    LONG_ROW = 65536      /* rows this long, fewer than the threads: split */
};

typedef struct sort_run {
    const cpu_sort_job *job;
    graph_sort_geom gm;
    lf_dtype t;                    /* the sorted values' dtype */
    bool desc, wide;               /* key order and width */
    size_t kw, vw;                 /* key and value widths in bytes */
    int wbuf, nbufs;               /* the work array's buffer; buffers */
    int64_t rows_per_chunk;
    atomic_int failed;             /* a task ran out of memory */
    atomic_int odd;                /* long rows: a key pass met an odd value */
    void *K, *kout;                /* long rows: all keys, the sorted first k */
    int64_t *iout;                 /* long rows: their positions */
    atomic_uchar *fix;             /* long rows: per row, values to take from lf_k_raw */
    bool direct_idx;               /* the indices slot's rows are contiguous (the
                                      axis is the last): the sort writes them there */
    bool vals_direct;              /* long rows: values_direct (decode_post) */
    char *work;                    /* chunks: per pool worker, work_per bytes */
    size_t work_per;
} sort_run;

/* The value of key `key` at out[at]; false (nothing written) when the key
 * stands for several values (zero, NaN) and `odd` says one of them may be
 * other than +0.0 or the canonical NaN: the value comes from lf_k_raw. */
static bool decode(const sort_run *c, uint64_t key, void *out, int64_t at, bool odd) {
    switch (graph_dtypes[c->t].sort_key) {
    case SORT_KEY_FLOAT:
        if (c->wide) {
            uint64_t u = key ^ (c->desc ? ~(uint64_t)0 : 0u);
            if ((u == GRAPH_SORT_NAN_KEY64 || u == (uint64_t)1 << 63) && odd) return false;
            u = (u >> 63) ? (u & ~((uint64_t)1 << 63)) : ~u;
            memcpy((char *)out + at * 8, &u, 8);
        } else {
            uint32_t u = (uint32_t)key ^ (c->desc ? 0xffffffffu : 0u);
            if ((u == GRAPH_SORT_NAN_KEY32 || u == 0x80000000u) && odd) return false;
            u = (u & 0x80000000u) ? (u & 0x7fffffffu) : ~u; /* +0.0, the canonical NaN */
            memcpy((char *)out + at * 4, &u, 4);
        }
        return true;
    case SORT_KEY_SIGNED:
        if (c->wide) {
            uint64_t u = (key ^ (c->desc ? ~(uint64_t)0 : 0u)) ^ ((uint64_t)1 << 63);
            memcpy((char *)out + at * 8, &u, 8);
        } else {
            uint32_t u = ((uint32_t)key ^ (c->desc ? 0xffffffffu : 0u)) ^ 0x80000000u;
            memcpy((char *)out + at * 4, &u, 4);
        }
        return true;
    case SORT_KEY_BOOL:
    default: ((uint8_t *)out)[at] = (uint8_t)(((uint32_t)key ^ (c->desc ? 0xffffffffu : 0u)) & 1u); return true;
    }
}

static uint64_t key_at(const sort_run *c, const void *keys, int64_t i) {
    return c->wide ? ((const uint64_t *)keys)[i] : ((const uint32_t *)keys)[i];
}

/* Whether raw value i of a row (dtype t) is a zero (cls 0) or a NaN (cls 1). */
static bool raw_is(const sort_run *c, const void *raw, int64_t i, int cls) {
    double v = c->wide ? ((const double *)raw)[i] : (double)((const float *)raw)[i];
    return cls ? v != v : v == 0.0;
}

/* Runs lf_k_run (keys; returns the odd-value flag) or lf_k_raw (values)
 * over flat positions [b, e) with the work array w (written at position -
 * b). */
static int run_into(const sort_run *c, bool raw, void *w, int64_t b, int64_t e) {
    void *B[CG_MAX_BUFS];
    memcpy(B, c->job->B, (size_t)c->nbufs * sizeof *B);
    B[c->wbuf] = w;
    if (raw) {
        c->job->raw(B, c->job->P, b, e);
        return 0;
    }
    return c->job->keys(B, c->job->P, b, e);
}

/* Row r's values whose keys stand for several values (row keys sorted in
 * rk, k of them), taken from lf_k_raw in position order. false when out of
 * memory. */
static bool fix_row(sort_run *c, int64_t r, const void *rk) {
    const graph_sort_geom *gm = &c->gm;
    void *raw = graph_malloc((size_t)gm->n * c->vw + 1);
    if (!raw) return false;
    run_into(c, true, raw, r * gm->n, (r + 1) * gm->n);
    int64_t base = graph_sort_row_base(gm, r, true), next[2] = {0, 0};
    for (int64_t j = 0; j < gm->k; j++) {
        int64_t at = base + j * gm->out_stride;
        uint64_t key = key_at(c, rk, j);
        char probe[8];
        if (decode(c, key, probe, 0, true)) continue;
        uint64_t u = key ^ (c->desc ? (c->wide ? ~(uint64_t)0 : 0xffffffffu) : 0u);
        int cls = c->wide ? u == GRAPH_SORT_NAN_KEY64 : u == GRAPH_SORT_NAN_KEY32; /* 1: NaN, 0: zero */
        int64_t *p = &next[cls];
        while (*p < gm->n && !raw_is(c, raw, *p, cls)) (*p)++;
        assert(*p < gm->n); /* stable: the row holds as many such values as the output entries */
        memcpy((char *)c->job->values + at * (int64_t)c->vw, (char *)raw + *p * (int64_t)c->vw, c->vw);
        (*p)++;
    }
    graph_free(raw);
    return true;
}

/* Writes entries [j0, j1) of row r (sorted keys rk, positions ri, each k
 * long) to the slots (the values only when vals: else the sort wrote them
 * there, decode_post); returns whether some value needs fix_row (only when
 * the row's key pass met an odd value). */
static bool write_entries(const sort_run *c, int64_t r, int64_t j0, int64_t j1, const void *rk, const int64_t *ri,
                          bool odd, bool vals) {
    const graph_sort_geom *gm = &c->gm;
    int64_t base = graph_sort_row_base(gm, r, true);
    bool fix = false;
    if (c->job->indices && !c->direct_idx)
        for (int64_t j = j0; j < j1; j++) ((int64_t *)c->job->indices)[base + j * gm->out_stride] = ri[j];
    if (c->job->values && vals)
        for (int64_t j = j0; j < j1; j++) fix |= !decode(c, key_at(c, rk, j), c->job->values, base + j * gm->out_stride, odd);
    return fix;
}

/* Values decoded where the sort writes them: when the axis is the last
 * (a row's entries are contiguous in the slot), the dtype's values are as
 * wide as its keys (not bool) and the key pass met no odd value (every key
 * gives its value back), the sort writes its keys straight into the values
 * slot and decode_post turns each finished range into values while it is
 * still in the writing thread's cache: no pass of its own over the output. */
typedef struct post_ctx {
    const sort_run *c;
    int64_t r0;                    /* the first row of the sort call */
} post_ctx;

static bool values_direct(const sort_run *c, bool odd) {
    return c->job->values && c->gm.inner == 1 && graph_dtypes[c->t].sort_key != SORT_KEY_BOOL && !odd;
}

/* decode's float keys in place, a loop per width with nothing but the
 * decoding in it (it vectorizes): the per-key switches of decode cost more
 * than the few-distinct sort's counting pass (perf of sort_few at 2^24). */
static void decode_float32(uint32_t *p, int64_t b, int64_t e, uint32_t flip) {
    for (int64_t j = b; j < e; j++) {
        uint32_t u = p[j] ^ flip;
        p[j] = (u & 0x80000000u) ? (u & 0x7fffffffu) : ~u;
    }
}

static void decode_float64(uint64_t *p, int64_t b, int64_t e, uint64_t flip) {
    for (int64_t j = b; j < e; j++) {
        uint64_t u = p[j] ^ flip;
        p[j] = (u >> 63) ? (u & ~((uint64_t)1 << 63)) : ~u;
    }
}

static void decode_post(void *arg, int64_t row, int64_t b, int64_t e) {
    const post_ctx *pc = arg;
    const sort_run *c = pc->c;
    int64_t base = (pc->r0 + row) * c->gm.k;
    if (graph_dtypes[c->t].sort_key == SORT_KEY_FLOAT && c->kw == (c->wide ? 8u : 4u) && c->vw == c->kw) { /* odd is false here */
        if (c->wide) decode_float64(c->job->values, base + b, base + e, c->desc ? ~(uint64_t)0 : 0u);
        else decode_float32(c->job->values, base + b, base + e, c->desc ? 0xffffffffu : 0u);
        return;
    }
    for (int64_t j = base + b; j < base + e; j++) decode(c, key_at(c, c->job->values, j), c->job->values, j, false);
}

/* ---- chunks of rows ---- */

/* A chunk's work memory: keys, sorted keys, positions (when not written
 * straight into the slot), for rows rows, 64-byte aligned parts. */
static size_t chunk_bytes(const sort_run *c, int64_t rows, size_t *kb, size_t *ob) {
    const graph_sort_geom *gm = &c->gm;
    *kb = ((size_t)(rows * gm->n) * c->kw + 63) & ~(size_t)63;
    *ob = ((size_t)(rows * gm->k) * c->kw + 63) & ~(size_t)63;
    return *kb + *ob + (c->direct_idx ? 0 : (size_t)(rows * gm->k) * sizeof(int64_t)) + 64;
}

static void chunk_task(void *arg, int64_t begin, int64_t end, int worker) {
    sort_run *c = arg;
    const graph_sort_geom *gm = &c->gm;
    char *mem = c->work + (size_t)worker * c->work_per; /* the worker's own, reused by each chunk */
    for (int64_t ch = begin; ch < end && !atomic_load_explicit(&c->failed, memory_order_relaxed); ch++) {
        int64_t r0 = ch * c->rows_per_chunk, r1 = r0 + c->rows_per_chunk < gm->nrows ? r0 + c->rows_per_chunk : gm->nrows;
        int64_t rows = r1 - r0;
        size_t kb, ob;
        chunk_bytes(c, rows, &kb, &ob);
        void *K = mem, *kout = c->job->values ? mem + kb : NULL;
        int64_t *iout = !c->job->indices ? NULL
                        : c->direct_idx ? (int64_t *)c->job->indices + r0 * gm->k
                                        : (int64_t *)(void *)(mem + kb + ob);
        bool odd = run_into(c, false, K, r0 * gm->n, r1 * gm->n) != 0, dv = values_direct(c, odd);
        post_ctx pc = {c, r0};
        if (dv) kout = (char *)c->job->values + (size_t)(r0 * gm->k) * c->kw;
        cpu_sort_rows_args a = {rows, gm->n, gm->k, c->wide, K, kout, iout, c->job->cache, dv ? decode_post : NULL, &pc};
        bool ok = cpu_sort_rows(NULL, &a);
        for (int64_t r = 0; ok && !dv && r < rows; r++) { /* dv: values and positions are in place */
            const void *rk = kout ? (const char *)kout + (size_t)(r * gm->k) * c->kw : NULL;
            if (write_entries(c, r0 + r, 0, gm->k, rk, iout ? iout + r * gm->k : NULL, odd, !dv))
                ok = fix_row(c, r0 + r, rk);
        }
        if (!ok) {
            atomic_store(&c->failed, 1);
            return;
        }
    }
}

/* ---- long rows ---- */

static void keys_task(void *arg, int64_t begin, int64_t end, int worker) {
    (void)worker;
    sort_run *c = arg;
    if (run_into(c, false, (char *)c->K + (size_t)begin * c->kw, begin, end))
        atomic_store_explicit(&c->odd, 1, memory_order_relaxed);
}

static void write_task(void *arg, int64_t begin, int64_t end, int worker) {
    (void)worker;
    sort_run *c = arg;
    int64_t k = c->gm.k;
    while (begin < end) { /* flat entries: row r, entries j0 .. j1 */
        int64_t r = begin / k, j0 = begin - r * k, j1 = end - r * k < k ? end - r * k : k;
        const void *rk = c->kout ? (const char *)c->kout + (size_t)(r * k) * c->kw : NULL;
        if (write_entries(c, r, j0, j1, rk, c->iout ? c->iout + r * k : NULL,
                          atomic_load_explicit(&c->odd, memory_order_relaxed), !c->vals_direct))
            atomic_store_explicit(&c->fix[r], 1, memory_order_relaxed);
        begin += j1 - j0;
    }
}

static lf_status run_long(lf_ctx *ctx, cpu_pool *pool, sort_run *c) {
    const graph_sort_geom *gm = &c->gm;
    size_t kb = (size_t)(gm->nrows * gm->n) * c->kw, ob = c->job->values ? (size_t)(gm->nrows * gm->k) * c->kw : 0,
           ib = c->job->indices && !c->direct_idx ? (size_t)(gm->nrows * gm->k) * sizeof(int64_t) : 0;
    size_t total = kb + ob + ib + (size_t)gm->nrows + 16;
    char *mem = cpu_sort_cache_take(c->job->cache, total);
    if (!mem) return graph_error(ctx, LF_ERR_NOMEM, "eval: out of memory for a sort's keys (%zu bytes)", kb + ob + ib);
    c->K = mem;
    c->kout = ob ? mem + kb : NULL;
    c->iout = ib ? (int64_t *)(void *)(mem + kb + ob) : c->direct_idx ? (int64_t *)c->job->indices : NULL;
    c->fix = (atomic_uchar *)(mem + kb + ob + ib);
    for (int64_t r = 0; r < gm->nrows; r++) atomic_init(&c->fix[r], 0);
    cpu_pool_run(pool, keys_task, c, gm->nrows * gm->n, 16384, 0);
    c->vals_direct = values_direct(c, atomic_load(&c->odd));
    post_ctx pc = {c, 0};
    cpu_sort_rows_args a = {gm->nrows, gm->n,          gm->k, c->wide, c->K, c->vals_direct ? c->job->values : c->kout,
                            c->iout,   c->job->cache, c->vals_direct ? decode_post : NULL, &pc};
    bool ok = cpu_sort_rows(pool, &a);
    if (ok && !c->vals_direct) /* values_direct: the axis is the last, so the positions are in place too */
        cpu_pool_run(pool, write_task, c, gm->nrows * gm->k, 16384, 0);
    for (int64_t r = 0; ok && r < gm->nrows; r++)
        if (atomic_load(&c->fix[r])) ok = fix_row(c, r, (const char *)c->kout + (size_t)(r * gm->k) * c->kw);
    cpu_sort_cache_give(c->job->cache, mem, total);
    return ok ? LF_OK : graph_error(ctx, LF_ERR_NOMEM, "eval: out of memory sorting");
}

lf_status cpu_run_sort(lf_ctx *ctx, cpu_pool *pool, int64_t parallel_min, const cpu_sort_job *job) {
    const cg_layout *lay = job->lay;
    const fuse_kernel *kn = lay->kernel;
    sort_run c;
    memset(&c, 0, sizeof c);
    c.job = job;
    graph_sort_geom_of(kn->sort, &c.gm);
    if (c.gm.k == 0 || c.gm.nrows == 0) return LF_OK;
    c.t = kn->sort->inputs[0]->dtype;
    c.desc = kn->sort->u.sort.descending;
    c.wide = graph_sort_key_wide(c.t);
    c.kw = c.wide ? 8 : 4;
    c.vw = lf_dtype_size(c.t);
    c.nbufs = lay->nbufs;
    c.wbuf = -1;
    for (int i = 0; i < lay->naccess; i++)
        if (lay->access[i].fn < 0 && lay->access[i].index == 0) c.wbuf = lay->access[i].buf;
    atomic_init(&c.failed, 0);
    atomic_init(&c.odd, 0);
    c.direct_idx = job->indices && c.gm.inner == 1;
    int threads = cpu_pool_threads(pool);
    int64_t total = c.gm.nrows * c.gm.n;
    if (c.gm.n >= LONG_ROW && c.gm.nrows < threads && total >= parallel_min) return run_long(ctx, pool, &c);
    c.rows_per_chunk = c.gm.n ? CHUNK_KEYS / c.gm.n : c.gm.nrows;
    if (c.rows_per_chunk < 1) c.rows_per_chunk = 1;
    int64_t want = (int64_t)threads * 8; /* enough tasks to balance */
    if (c.gm.nrows / c.rows_per_chunk < want) c.rows_per_chunk = (c.gm.nrows + want - 1) / want;
    if (c.rows_per_chunk < 1) c.rows_per_chunk = 1;
    int64_t chunks = (c.gm.nrows + c.rows_per_chunk - 1) / c.rows_per_chunk;
    size_t kb, ob;
    c.work_per = (chunk_bytes(&c, c.rows_per_chunk, &kb, &ob) + 63) & ~(size_t)63;
    size_t bytes = c.work_per * (size_t)threads + 64;
    char *block = cpu_sort_cache_take(job->cache, bytes);
    if (!block) return graph_error(ctx, LF_ERR_NOMEM, "eval: out of memory for a sort's work (%zu bytes)", bytes);
    c.work = block + (-(uintptr_t)block & 63);
    cpu_pool_run(pool, chunk_task, &c, chunks, 1, total < parallel_min ? INT64_MAX : 0);
    cpu_sort_cache_give(job->cache, block, bytes);
    if (atomic_load(&c.failed)) return graph_error(ctx, LF_ERR_NOMEM, "eval: out of memory sorting");
    return LF_OK;
}
