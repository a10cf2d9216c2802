/* graph/ctx.c: context accessors and buffers.
 *
 * A context owns its buffers and graphs through two intrusive lists, so
 * lf_ctx_destroy (backends/driver.c, which also makes contexts: choosing a
 * backend is the top floor's job) can free whatever the user left alive. A
 * buffer is reference-counted: one reference for the user (dropped by
 * lf_buffer_free), one per graph that reads it (dropped when the graph is
 * freed) and one per live DLPack export, so nothing reads freed memory.
 *
 * A buffer's memory goes through the context's backend (ctx->be,
 * graph/backend.h): a device backend's buffer entries allocate, free and
 * copy it (lf_buffer.dev, data NULL); a host backend has none and this file
 * allocates host memory itself. It knows no backend by name.
 *
 * Wrapped buffers (lf_buffer_wrap, lf_buffer_from_dlpack) hold the user's
 * memory: never allocated or freed here; release is called exactly once when
 * the last reference goes. A strided wrap (strides other than C-contiguous)
 * records its storage span, offset and strides; lf_buffer_read gathers it
 * element by element, lf_buffer_write and lf_eval refuse it as a
 * destination.
 *
 * The two public structs that grow (lf_ctx_options, lf_eval_stats; README,
 * "Versioning and ABI") cross the library boundary only here: the caller's
 * size (options.struct_size, or the size argument of the _sized calls) says
 * how much of the struct its program knows. What must stay true: nothing is
 * read or written past the caller's size, fields past it take their
 * defaults, and new fields are appended to the structs, never inserted.
 */
#include "graph/graph.h"

#include <stdlib.h>
#include <string.h>

/* The defaults of every field this library knows; struct_size is ours. */
static lf_ctx_options options_defaults(void) {
    lf_ctx_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.backend = LF_BACKEND_AUTO;
    o.threads = 0;
    o.fusion = -1;
    o.cache_dir = NULL;
    o.compile = LF_COMPILE_AUTO;
    o.compile_timeout = 0;
    return o;
}

/* Public structs that grow (lf_ctx_options, lf_eval_stats): the caller's
 * struct is `size` bytes, ours sizeof; only the common prefix is copied, the
 * caller's bytes past ours are zeroed, and nothing past `size` is touched. */
static void copy_out(void *dst, size_t size, const void *src, size_t ours) {
    size_t n = size < ours ? size : ours;
    memcpy(dst, src, n);
    if (size > n) memset((char *)dst + n, 0, size - n);
}

/* A caller's lf_ctx_options larger than ours: its program was built against
 * a newer lazyfuse 1.x header than this library. */
#define NEWER_FMT                                                                                        \
    "lf_ctx_options of %zu bytes is newer than this library's (%zu bytes): the program was built against " \
    "a newer lazyfuse than the liblazyfuse it runs with"

lf_status lf_ctx_options_init_sized(lf_ctx_options *opt, size_t size) {
    if (!opt) return graph_error(NULL, LF_ERR_NULL, "ctx_options_init: opt is NULL");
    if (size < LF_CTX_OPTIONS_SIZE_1_0)
        return graph_error(NULL, LF_ERR_INVALID,
                           "ctx_options_init: size %zu is below the smallest lf_ctx_options (%zu bytes): pass "
                           "sizeof(lf_ctx_options), or call lf_ctx_options_init(&opt)",
                           size, (size_t)LF_CTX_OPTIONS_SIZE_1_0);
    lf_ctx_options d = options_defaults();
    copy_out(opt, size, &d, sizeof d);
    opt->struct_size = size;
    if (size > sizeof d)
        return graph_error(NULL, LF_ERR_INVALID, "ctx_options_init: " NEWER_FMT, size, sizeof d);
    return LF_OK;
}

lf_status graph_options_read(const lf_ctx_options *opt, lf_ctx_options *out) {
    *out = options_defaults();
    if (!opt) return LF_OK;
    size_t size = opt->struct_size;
    if (size == 0)
        return graph_error(NULL, LF_ERR_INVALID,
                           "ctx_new: options.struct_size is 0: fill the options with lf_ctx_options_init(&opt) "
                           "before setting fields");
    if (size < LF_CTX_OPTIONS_SIZE_1_0)
        return graph_error(NULL, LF_ERR_INVALID,
                           "ctx_new: options.struct_size %zu is below the smallest lf_ctx_options (%zu bytes): "
                           "fill the options with lf_ctx_options_init(&opt)",
                           size, (size_t)LF_CTX_OPTIONS_SIZE_1_0);
    if (size > sizeof *out) return graph_error(NULL, LF_ERR_INVALID, "ctx_new: " NEWER_FMT, size, sizeof *out);
    memcpy(out, opt, size); /* the fields the caller knows; later ones keep their defaults */
    out->struct_size = sizeof *out;
    return LF_OK;
}

lf_backend lf_ctx_backend(const lf_ctx *ctx) { return ctx ? ctx->backend : LF_BACKEND_AUTO; }

lf_status lf_ctx_get_options_sized(const lf_ctx *ctx, lf_ctx_options *out, size_t size) {
    if (!ctx || !out) return graph_error(NULL, LF_ERR_NULL, "ctx_get_options: %s is NULL", ctx ? "out" : "ctx");
    if (size < LF_CTX_OPTIONS_SIZE_1_0)
        return graph_error((lf_ctx *)ctx, LF_ERR_INVALID,
                           "ctx_get_options: size %zu is below the smallest lf_ctx_options (%zu bytes): pass "
                           "sizeof(lf_ctx_options)",
                           size, (size_t)LF_CTX_OPTIONS_SIZE_1_0);
    copy_out(out, size, &ctx->opt, sizeof ctx->opt);
    out->struct_size = size < sizeof ctx->opt ? size : sizeof ctx->opt;
    return LF_OK;
}

lf_status lf_ctx_last_stats_sized(const lf_ctx *ctx, lf_eval_stats *out, size_t size) {
    if (!ctx || !out) return graph_error(NULL, LF_ERR_NULL, "ctx_last_stats: %s is NULL", ctx ? "out" : "ctx");
    if (size < LF_EVAL_STATS_SIZE_1_0)
        return graph_error((lf_ctx *)ctx, LF_ERR_INVALID,
                           "ctx_last_stats: size %zu is below the smallest lf_eval_stats (%zu bytes): pass "
                           "sizeof(lf_eval_stats), as lf_ctx_last_stats(ctx, &stats) does",
                           size, (size_t)LF_EVAL_STATS_SIZE_1_0);
    copy_out(out, size, &ctx->last_stats, sizeof ctx->last_stats);
    return LF_OK;
}

/* ---- buffers --------------------------------------------------------------- */

/* Links a new buffer (refs 1) into its context's list. */
static lf_buffer *link_buffer(lf_ctx *ctx, lf_buffer *b) {
    b->refs = 1;
    b->next = ctx->buffers;
    if (ctx->buffers) ctx->buffers->prev = b;
    ctx->buffers = b;
    return b;
}

/* The checks lf_buffer_new and lf_buffer_wrap share: ctx, dtype, shape and
 * its byte size; *numel on success. */
static bool check_new(lf_ctx *ctx, lf_dtype t, int ndim, const int64_t *shape, const char *what,
                      int64_t *numel) {
    if (!ctx) {
        graph_error(NULL, LF_ERR_NULL, "%s: ctx is NULL", what);
        return false;
    }
    if ((unsigned)t >= LF_NDTYPES) {
        graph_error(ctx, LF_ERR_DTYPE, "%s: unknown dtype %d", what, (int)t);
        return false;
    }
    char sbuf[160];
    lf_status st = graph_shape_problem(what, ndim, shape, sbuf, sizeof sbuf);
    if (st != LF_OK) {
        graph_error(ctx, st, "%s", sbuf);
        return false;
    }
    if (!graph_shape_numel(ndim, shape, lf_dtype_size(t), numel)) {
        graph_error(ctx, LF_ERR_OVERFLOW, "%s: shape %s of %s overflows", what,
                    graph_shape_str(sbuf, sizeof sbuf, ndim, shape), lf_dtype_name(t));
        return false;
    }
    return true;
}

/* A new buffer's description: context, dtype, shape, sizes. */
static void set_header(lf_buffer *b, lf_ctx *ctx, lf_dtype t, int ndim, const int64_t *shape, int64_t numel,
                       size_t bytes, size_t storage) {
    b->ctx = ctx;
    b->dtype = t;
    b->ndim = ndim;
    if (ndim) memcpy(b->shape, shape, (size_t)ndim * sizeof *shape);
    b->numel = numel;
    b->bytes = bytes;
    b->storage = storage;
}

lf_buffer *lf_buffer_new(lf_ctx *ctx, lf_dtype t, int ndim, const int64_t *shape) {
    int64_t numel;
    if (!check_new(ctx, t, ndim, shape, "buffer_new", &numel)) return NULL;
    lf_buffer *b = graph_calloc(1, sizeof *b);
    size_t bytes = (size_t)numel * lf_dtype_size(t);
    bool host = !graph_ctx_on_device(ctx); /* else through the backend's buffer entries */
    void *data = bytes && host ? graph_calloc(1, bytes) : NULL;
    if (!b || (bytes && host && !data)) {
        graph_free(b);
        graph_free(data);
        graph_error(ctx, LF_ERR_NOMEM, "buffer_new: out of memory for %zu bytes", bytes);
        return NULL;
    }
    set_header(b, ctx, t, ndim, shape, numel, bytes, bytes);
    b->data = data;
    if (bytes && !host && ctx->be->buffer_alloc(b, "buffer_new") != LF_OK) {
        graph_free(b);
        return NULL;
    }
    return link_buffer(ctx, b);
}

lf_buffer *graph_buffer_wrap(lf_ctx *ctx, const char *what, lf_dtype t, int ndim, const int64_t *shape,
                             const int64_t *strides, void *data, void (*release)(void *), void *release_arg) {
    int64_t numel;
    if (!check_new(ctx, t, ndim, shape, what, &numel)) return NULL;
    size_t esize = lf_dtype_size(t);
    char sbuf[160], shbuf[160];
    /* the span the strides reach: element offsets lo..hi from element [0,..] */
    int64_t lo = 0, hi = 0;
    bool dense = true;
    if (strides && numel > 0) {
        int64_t expect = 1;
        for (int d = ndim - 1; d >= 0; d--) {
            int64_t e = shape[d], st = strides[d], reach;
            if (e > 1 && st != expect) dense = false;
            expect *= e; /* fits: numel does */
            if (e <= 1) continue;
            if (__builtin_mul_overflow(st, e - 1, &reach) ||
                __builtin_add_overflow(reach < 0 ? lo : hi, reach, reach < 0 ? &lo : &hi)) {
                graph_error(ctx, LF_ERR_OVERFLOW, "%s: strides %s of shape %s overflow", what,
                            graph_shape_str(sbuf, sizeof sbuf, ndim, strides),
                            graph_shape_str(shbuf, sizeof shbuf, ndim, shape));
                return NULL;
            }
        }
    }
    int64_t span = dense ? numel : 0;
    if (!dense && (__builtin_sub_overflow(hi, lo, &span) || __builtin_add_overflow(span, 1, &span) ||
                   (uint64_t)span > SIZE_MAX / esize || (uint64_t)span * esize > (uint64_t)INT64_MAX)) {
        graph_error(ctx, LF_ERR_OVERFLOW, "%s: strides %s of shape %s reach more than %lld bytes", what,
                    graph_shape_str(sbuf, sizeof sbuf, ndim, strides), graph_shape_str(shbuf, sizeof shbuf, ndim, shape),
                    (long long)INT64_MAX);
        return NULL;
    }
    size_t bytes = (size_t)numel * esize, storage = (size_t)span * esize;
    if (!data && bytes) {
        graph_error(ctx, LF_ERR_NULL, "%s: data is NULL for %zu bytes", what, bytes);
        return NULL;
    }
    if (bytes && (uintptr_t)data % esize) {
        graph_error(ctx, LF_ERR_INVALID, "%s: data %p is not aligned to %zu bytes (the size of %s)",
                    what, data, esize, lf_dtype_name(t));
        return NULL;
    }
    lf_buffer *b = graph_calloc(1, sizeof *b);
    if (!b) {
        graph_error(ctx, LF_ERR_NOMEM, "%s: out of memory", what);
        return NULL;
    }
    set_header(b, ctx, t, ndim, shape, numel, bytes, storage);
    b->wrapped = true;
    b->release = release;
    b->release_arg = release_arg;
    if (!dense) {
        b->strided = true;
        b->offset = -lo;
        memcpy(b->strides, strides, (size_t)ndim * sizeof *strides);
    }
    if (storage) {
        char *base = (char *)data + lo * (int64_t)esize; /* the lowest address the strides reach */
        if (graph_ctx_on_device(ctx)) {
            b->dev = (uint64_t)(uintptr_t)base;
            if (ctx->be->buffer_wrap && ctx->be->buffer_wrap(b, what) != LF_OK) {
                graph_free(b);
                return NULL;
            }
        } else {
            b->data = base;
        }
    }
    return link_buffer(ctx, b);
}

lf_buffer *lf_buffer_wrap(lf_ctx *ctx, lf_dtype t, int ndim, const int64_t *shape, const int64_t *strides,
                          void *data, void (*release)(void *), void *release_arg) {
    return graph_buffer_wrap(ctx, "buffer_wrap", t, ndim, shape, strides, data, release, release_arg);
}

lf_status lf_buffer_set_data(lf_buffer *b, void *data) {
    if (!b) return graph_error(NULL, LF_ERR_NULL, "buffer_set_data: buffer is NULL");
    lf_ctx *ctx = b->ctx;
    if (b->user_freed)
        return graph_error(ctx, LF_ERR_STATE, "buffer_set_data: the buffer was freed (lf_buffer_free)");
    if (!b->wrapped || b->strided || b->release)
        return graph_error(ctx, LF_ERR_INVALID,
                           "buffer_set_data: only a C-contiguous lf_buffer_wrap buffer without a release "
                           "callback can be pointed at other memory (this one is %s)",
                           !b->wrapped ? "lazyfuse's own memory" : b->strided ? "a strided wrap"
                                                                             : "a wrap with a release callback");
    if (graph_ctx_on_device(ctx))
        return graph_error(ctx, LF_ERR_INVALID, "buffer_set_data: the buffer is device memory (host only)");
    if (b->pinned)
        return graph_error(ctx, LF_ERR_STATE,
                           "buffer_set_data: the buffer's address was exported (DLPack); it cannot move");
    size_t esize = lf_dtype_size(b->dtype);
    if (!data && b->bytes) return graph_error(ctx, LF_ERR_NULL, "buffer_set_data: data is NULL for %zu bytes", b->bytes);
    if (b->bytes && (uintptr_t)data % esize)
        return graph_error(ctx, LF_ERR_INVALID, "buffer_set_data: data %p is not aligned to %zu bytes (the size of %s)",
                           data, esize, lf_dtype_name(b->dtype));
    if (b->storage) b->data = data; /* a zero-size buffer keeps data NULL, as lf_buffer_wrap makes it */
    return LF_OK;
}

void graph_buffer_release(lf_buffer *b) {
    if (--b->refs > 0) return;
    lf_ctx *ctx = b->ctx;
    if (b->prev) b->prev->next = b->next;
    else ctx->buffers = b->next;
    if (b->next) b->next->prev = b->prev;
    if (b->wrapped) {
        /* an asynchronous backend's queued kernels may still use the memory:
           the owner gets it back only after they are done (a fault they
           report stays in lf_errmsg; the memory is released all the same) */
        if (b->release && ctx->be && ctx->be->synchronize) ctx->be->synchronize(ctx, false, "buffer release");
        if (b->release) b->release(b->release_arg);
    } else {
        if (b->dev) ctx->be->buffer_free(b);
        graph_free(b->data);
    }
    graph_free(b);
}

lf_status lf_ctx_synchronize(lf_ctx *ctx) {
    if (!ctx) return graph_error(NULL, LF_ERR_NULL, "ctx_synchronize: ctx is NULL");
    if (!ctx->be || !ctx->be->synchronize) return LF_OK; /* work is done when lf_eval returns */
    return ctx->be->synchronize(ctx, false, "ctx_synchronize");
}

void lf_buffer_free(lf_buffer *b) {
    if (!b || b->user_freed) return;
    b->user_freed = true;
    graph_buffer_release(b);
}

lf_buffer *lf_buffer_new_like(lf_ctx *ctx, const lf_node *n) {
    if (!ctx || !n) {
        graph_error(ctx, LF_ERR_NULL, "buffer_new_like: %s is NULL", ctx ? "node" : "ctx");
        return NULL;
    }
    return lf_buffer_new(ctx, n->dtype, n->ndim, n->shape);
}

/* The first address of a buffer's storage and one past its last, host or
 * device (equal when it has none). */
static void storage_range(const lf_buffer *b, uintptr_t *lo, uintptr_t *hi) {
    *lo = b->data ? (uintptr_t)b->data : (uintptr_t)b->dev;
    *hi = *lo + (b->storage && *lo ? b->storage : 0);
}

bool graph_buffers_overlap(const lf_buffer *a, const lf_buffer *b) {
    if (a == b) return a->storage != 0;
    uintptr_t alo, ahi, blo, bhi;
    storage_range(a, &alo, &ahi);
    storage_range(b, &blo, &bhi);
    return alo < ahi && blo < bhi && alo < bhi && blo < ahi;
}

lf_status graph_check_dst_memory(lf_ctx *ctx, int n, lf_buffer *const *dsts) {
    bool any_wrapped = false;
    for (int i = 0; i < n; i++) {
        const lf_buffer *d = dsts[i];
        if (d->strided) {
            char sbuf[160];
            return graph_error(ctx, LF_ERR_INVALID,
                               "eval: output %d's buffer wraps strided memory (strides %s); an output "
                               "buffer must be C-contiguous",
                               i, graph_shape_str(sbuf, sizeof sbuf, d->ndim, d->strides));
        }
        any_wrapped |= d->wrapped;
    }
    if (any_wrapped) /* distinct buffers can share memory only when wrapped */
        for (int i = 0; i < n; i++)
            for (int j = i + 1; j < n; j++)
                if (dsts[i] != dsts[j] && (dsts[i]->wrapped || dsts[j]->wrapped) &&
                    graph_buffers_overlap(dsts[i], dsts[j]))
                    return graph_error(ctx, LF_ERR_INVALID,
                                       "eval: outputs %d and %d are different buffers over overlapping memory",
                                       i, j);
    return LF_OK;
}

/* Checks a host copy's arguments; names the calling function in messages. */
static lf_status check_copy(const lf_buffer *b, const void *host, size_t bytes, const char *what) {
    if (!b) return graph_error(NULL, LF_ERR_NULL, "%s: buffer is NULL", what);
    if (bytes != b->bytes)
        return graph_error(b->ctx, LF_ERR_INVALID, "%s: %zu bytes given, buffer holds %zu", what,
                           bytes, b->bytes);
    if (!host && bytes) return graph_error(b->ctx, LF_ERR_NULL, "%s: host pointer is NULL", what);
    return LF_OK;
}

lf_status lf_buffer_write(lf_buffer *b, const void *src, size_t bytes) {
    lf_status st = check_copy(b, src, bytes, "buffer_write");
    if (st != LF_OK) return st;
    if (!bytes) return LF_OK;
    if (b->strided) {
        char sbuf[160];
        return graph_error(b->ctx, LF_ERR_INVALID,
                           "buffer_write: the buffer wraps strided memory (strides %s); only C-contiguous "
                           "buffers can be written",
                           graph_shape_str(sbuf, sizeof sbuf, b->ndim, b->strides));
    }
    const graph_backend *be = b->ctx->be;
    if (graph_ctx_on_device(b->ctx)) {
        if (b->dtype != LF_BOOL) return be->buffer_write(b, src, "buffer_write");
        unsigned char *tmp = graph_malloc(bytes); /* normalized on the host first */
        if (!tmp) return graph_error(b->ctx, LF_ERR_NOMEM, "buffer_write: out of memory");
        const unsigned char *s = src;
        for (size_t i = 0; i < bytes; i++) tmp[i] = s[i] != 0;
        st = be->buffer_write(b, tmp, "buffer_write");
        graph_free(tmp);
        return st;
    }
    if (b->dtype == LF_BOOL) {
        const unsigned char *s = src;
        unsigned char *d = b->data;
        for (size_t i = 0; i < bytes; i++) d[i] = s[i] != 0;
    } else if (src != b->data) {
        memmove(b->data, src, bytes);
    }
    return LF_OK;
}

/* Copies a strided buffer's elements, row-major, from its storage (a host
 * image of it) into dst. */
static void gather_strided(const lf_buffer *b, const char *storage, char *dst) {
    size_t esize = lf_dtype_size(b->dtype);
    int64_t pos[LF_MAX_DIMS] = {0}, off = b->offset;
    for (int64_t i = 0; i < b->numel; i++) {
        memcpy(dst + (size_t)i * esize, storage + off * (int64_t)esize, esize);
        for (int d = b->ndim - 1; d >= 0; d--) { /* odometer */
            off += b->strides[d];
            if (++pos[d] < b->shape[d]) break;
            off -= b->strides[d] * b->shape[d];
            pos[d] = 0;
        }
    }
}

lf_status lf_buffer_read(const lf_buffer *b, void *dst, size_t bytes) {
    lf_status st = check_copy(b, dst, bytes, "buffer_read");
    if (st != LF_OK) return st;
    if (!bytes) return LF_OK;
    bool device = graph_ctx_on_device(b->ctx);
    if (!b->strided) {
        if (device) return b->ctx->be->buffer_read(b, dst, "buffer_read");
        if (dst != b->data) memmove(dst, b->data, bytes);
        return LF_OK;
    }
    const char *storage = b->data;
    char *tmp = NULL;
    if (device) { /* the span to the host first */
        if (!(tmp = graph_malloc(b->storage))) return graph_error(b->ctx, LF_ERR_NOMEM, "buffer_read: out of memory");
        if ((st = b->ctx->be->buffer_read(b, tmp, "buffer_read")) != LF_OK) {
            graph_free(tmp);
            return st;
        }
        storage = tmp;
    }
    gather_strided(b, storage, dst);
    graph_free(tmp);
    return LF_OK;
}

lf_dtype lf_buffer_dtype(const lf_buffer *b) { return b ? b->dtype : LF_NDTYPES; }
int lf_buffer_ndim(const lf_buffer *b) { return b ? b->ndim : -1; }
int64_t lf_buffer_numel(const lf_buffer *b) { return b ? b->numel : -1; }
size_t lf_buffer_bytes(const lf_buffer *b) { return b ? b->bytes : 0; }

int64_t lf_buffer_dim(const lf_buffer *b, int axis) {
    if (!b) return -1;
    if (axis < 0) axis += b->ndim;
    return (axis >= 0 && axis < b->ndim) ? b->shape[axis] : -1;
}
