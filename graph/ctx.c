/* graph/ctx.c: context accessors and buffers.
 *
 * A context owns its buffers and graphs through two intrusive lists, so
 * lf_ctx_destroy (backends/driver.c, which also makes contexts: choosing a
 * backend is the top floor's job) can free whatever the user left alive. A
 * buffer is reference-counted: one reference for the user (dropped by
 * lf_buffer_free), one per graph that reads it (dropped when the graph is
 * freed), so a graph never reads freed memory.
 *
 * A buffer's memory goes through the context's backend (ctx->be,
 * graph/backend.h): a device backend's buffer entries allocate, free and
 * copy it (lf_buffer.dev, data NULL); a host backend has none and this file
 * allocates host memory itself. It knows no backend by name.
 */
#include "graph/graph.h"

#include <stdlib.h>
#include <string.h>

void lf_ctx_options_init(lf_ctx_options *opt) {
    if (!opt) return;
    opt->backend = LF_BACKEND_AUTO;
    opt->threads = 0;
    opt->fusion = -1;
    opt->cache_dir = NULL;
    opt->compile = LF_COMPILE_AUTO;
    opt->compile_timeout = 0;
}

const char *lf_backend_name(lf_backend b) {
    switch (b) {
    case LF_BACKEND_AUTO: return "auto";
    case LF_BACKEND_CPU: return "cpu";
    case LF_BACKEND_CUDA: return "cuda";
    case LF_BACKEND_REFERENCE: return "reference";
    }
    return "?";
}

lf_backend lf_ctx_backend(const lf_ctx *ctx) { return ctx ? ctx->backend : LF_BACKEND_AUTO; }

lf_ctx_options lf_ctx_get_options(const lf_ctx *ctx) {
    lf_ctx_options o;
    lf_ctx_options_init(&o);
    return ctx ? ctx->opt : o;
}

/* ---- dtypes ---------------------------------------------------------------- */

size_t lf_dtype_size(lf_dtype t) {
    switch (t) {
    case LF_BOOL: return 1;
    case LF_I32: return 4;
    case LF_I64: return 8;
    case LF_F32: return 4;
    case LF_F64: return 8;
    default: return 0;
    }
}

const char *lf_dtype_name(lf_dtype t) {
    static const char *const names[LF_NDTYPES] = {"bool", "i32", "i64", "f32", "f64"};
    return (unsigned)t < LF_NDTYPES ? names[t] : "?";
}

lf_dtype lf_dtype_promote(lf_dtype a, lf_dtype b) {
    if ((unsigned)a >= LF_NDTYPES || (unsigned)b >= LF_NDTYPES) return LF_F64;
    if (a == b) return a;
    if (a > b) { lf_dtype t = a; a = b; b = t; } /* now a < b in the order */
    if (a == LF_BOOL) return b;
    if (graph_dtype_is_int(a) && b == LF_F32) return LF_F64;
    return b;
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
    b->ctx = ctx;
    b->dtype = t;
    b->ndim = ndim;
    if (ndim) memcpy(b->shape, shape, (size_t)ndim * sizeof *shape);
    b->numel = numel;
    b->bytes = bytes;
    b->storage = bytes;
    b->data = data;
    if (bytes && !host && ctx->be->buffer_alloc(b, "buffer_new") != LF_OK) {
        graph_free(b);
        return NULL;
    }
    return link_buffer(ctx, b);
}

void graph_buffer_release(lf_buffer *b) {
    if (--b->refs > 0) return;
    lf_ctx *ctx = b->ctx;
    if (b->prev) b->prev->next = b->next;
    else ctx->buffers = b->next;
    if (b->next) b->next->prev = b->prev;
    if (b->dev) ctx->be->buffer_free(b);
    graph_free(b->data);
    graph_free(b);
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
    } else {
        memcpy(b->data, src, bytes);
    }
    return LF_OK;
}

lf_status lf_buffer_read(const lf_buffer *b, void *dst, size_t bytes) {
    lf_status st = check_copy(b, dst, bytes, "buffer_read");
    if (st != LF_OK) return st;
    if (!bytes) return LF_OK;
    if (graph_ctx_on_device(b->ctx)) return b->ctx->be->buffer_read(b, dst, "buffer_read");
    memcpy(dst, b->data, bytes);
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
