/* graph/dlpack.c: DLPack import and export of buffers (lf_buffer_from_dlpack,
 * lf_buffer_to_dlpack), against the upstream dlpack.h (Debian's
 * libdlpack-dev, DLPack 0.6 and later).
 *
 * Import wraps the tensor's memory (graph_buffer_wrap: no copy) and calls
 * its deleter exactly once, when the buffer dies; export hands out a
 * DLManagedTensor that describes the buffer's own memory and holds one
 * reference to the buffer until its deleter is called.
 *
 * Streams (the protocol's __dlpack__(stream=...)): on an asynchronous
 * backend (CUDA) an import may name the stream its data is ready on (our
 * stream then waits for it) and an export the consumer's stream (which then
 * waits for our queued work); both are an event, never a host wait. The
 * deleter of an export waits for the whole device before it drops its
 * reference, so memory a consumer's queued work still reads is never
 * handed out again; an imported tensor's deleter runs after our stream is
 * done with it (graph_buffer_release).
 *
 * What must stay true: nothing is copied either way; a failed import leaves
 * the tensor the caller's (its deleter is not called); dtypes map one to one
 * through the dtype table's DLPack codes (graph/dtypes.def: kDLInt 32/64,
 * kDLFloat 32/64, bool as code 6, 8 bits: DLPack 0.8's kDLBool, which the
 * 0.6 header does not name), lanes are 1; the device is
 * the context's (kDLCPU device 0 for host memory, else the backend's
 * dlpack_device entry).
 */
#include "graph/graph.h"

#include <dlpack/dlpack.h>
#include <stdio.h>
#include <string.h>


static const char *code_name(int code) {
    switch (code) {
    case kDLInt: return "int";
    case kDLUInt: return "uint";
    case kDLFloat: return "float";
    case kDLOpaqueHandle: return "opaque handle";
    case kDLBfloat: return "bfloat";
    case kDLComplex: return "complex";
    case GRAPH_DL_BOOL: return "bool"; /* kDLBool of DLPack 0.8 and later */
    }
    return "unknown";
}

/* The DLPack device of ctx's buffers. */
static void ctx_device(const lf_ctx *ctx, int *type, int *id) {
    *type = kDLCPU;
    *id = 0;
    if (ctx->be->dlpack_device) ctx->be->dlpack_device(ctx, type, id);
}

static void call_deleter(void *arg) {
    DLManagedTensor *t = arg;
    if (t->deleter) t->deleter(t);
}

/* Checks a stream value of the protocol: 0 is ambiguous (the protocol
 * forbids it), below -1 is nothing. */
static lf_status check_stream(lf_ctx *ctx, intptr_t stream, const char *what) {
    if (stream == 0 || stream < -1)
        return graph_error(ctx, LF_ERR_INVALID,
                           "%s: stream %ld is not a stream value of the DLPack protocol (-1: no ordering, 1: "
                           "the legacy default stream, 2: the per-thread default stream, else a stream "
                           "handle; 0 is ambiguous)",
                           what, (long)stream);
    return LF_OK;
}

intptr_t lf_ctx_dlpack_stream(const lf_ctx *ctx) {
    if (!ctx || !ctx->be || !ctx->be->dlpack_stream) return -1;
    return ctx->be->dlpack_stream(ctx);
}

static lf_buffer *from_dlpack(lf_ctx *ctx, struct DLManagedTensor *t, intptr_t stream, const char *what);

lf_buffer *lf_buffer_from_dlpack(lf_ctx *ctx, struct DLManagedTensor *t) {
    return from_dlpack(ctx, t, -1, "buffer_from_dlpack");
}

lf_buffer *lf_buffer_from_dlpack_stream(lf_ctx *ctx, struct DLManagedTensor *t, intptr_t stream) {
    return from_dlpack(ctx, t, stream, "buffer_from_dlpack_stream");
}

static lf_buffer *from_dlpack(lf_ctx *ctx, struct DLManagedTensor *t, intptr_t stream, const char *what) {
    if (ctx && check_stream(ctx, stream, what) != LF_OK) return NULL;
    if (!ctx || !t) {
        graph_error(ctx, LF_ERR_NULL, "%s: %s is NULL", what, ctx ? "tensor" : "ctx");
        return NULL;
    }
    const DLTensor *dl = &t->dl_tensor;
    DLDataType dt = dl->dtype;
    lf_dtype type = dt.lanes == 1 ? graph_dtype_from_dlpack(dt.code, dt.bits) : LF_NDTYPES;
    if (type == LF_NDTYPES) {
        char known[160]; /* "bool, i32, ...": the dtype table's names */
        size_t len = 0;
        known[0] = '\0';
        for (int d = 0; d < LF_NDTYPES && len < sizeof known; d++)
            len += (size_t)snprintf(known + len, sizeof known - len, "%s%s", d ? ", " : "", lf_dtype_name((lf_dtype)d));
        graph_error(ctx, LF_ERR_DTYPE, "%s: dtype code %d (%s), %d bits, %d lane%s is none of lazyfuse's (%s)", what,
                    dt.code, code_name(dt.code), dt.bits, dt.lanes, dt.lanes == 1 ? "" : "s", known);
        return NULL;
    }
    int want_type, want_id;
    ctx_device(ctx, &want_type, &want_id);
    if ((int)dl->device.device_type != want_type || dl->device.device_id != want_id) {
        graph_error(ctx, LF_ERR_INVALID,
                    "%s: the tensor is on device type %d, device %d; this %s context takes device type %d "
                    "(%s), device %d",
                    what, (int)dl->device.device_type, dl->device.device_id, lf_backend_name(ctx->be->id),
                    want_type, want_type == kDLCUDA ? "kDLCUDA" : "kDLCPU", want_id);
        return NULL;
    }
    if (dl->ndim < 0 || dl->ndim > LF_MAX_DIMS) {
        graph_error(ctx, LF_ERR_SHAPE, "%s: %d dimensions (at most %d)", what, dl->ndim, LF_MAX_DIMS);
        return NULL;
    }
    if (dl->byte_offset > (uint64_t)INTPTR_MAX - (uintptr_t)dl->data) {
        graph_error(ctx, LF_ERR_OVERFLOW, "%s: byte_offset %llu overflows the data address", what,
                    (unsigned long long)dl->byte_offset);
        return NULL;
    }
    void *data = dl->data ? (char *)dl->data + dl->byte_offset : NULL;
    /* order first: a failure then leaves nothing to undo (the tensor stays
       the caller's); an extra wait on our stream changes no data */
    if (stream != -1 && ctx->be->stream_order && ctx->be->stream_order(ctx, stream, false, what) != LF_OK)
        return NULL;
    return graph_buffer_wrap(ctx, what, type, dl->ndim, dl->shape, dl->strides, data, call_deleter, t);
}

/* An exported tensor: the DLManagedTensor first, so the deleter's pointer
 * is the holder's. */
typedef struct export_holder {
    DLManagedTensor mt;
    int64_t shape[LF_MAX_DIMS];
    int64_t strides[LF_MAX_DIMS];
    lf_buffer *b;               /* the reference this export holds */
} export_holder;

static void export_deleter(DLManagedTensor *mt) {
    export_holder *h = (export_holder *)mt;
    lf_ctx *ctx = h->b->ctx;
    /* the consumer's queued work may still read the memory, on streams we
       do not know: wait for the device before the reference goes */
    if (ctx->be->synchronize) ctx->be->synchronize(ctx, true, "dlpack deleter");
    graph_buffer_release(h->b);
    graph_free(h);
}

static lf_status to_dlpack(lf_buffer *b, intptr_t stream, struct DLManagedTensor **out, const char *what);

lf_status lf_buffer_to_dlpack(lf_buffer *b, struct DLManagedTensor **out) {
    return to_dlpack(b, -1, out, "buffer_to_dlpack");
}

lf_status lf_buffer_to_dlpack_stream(lf_buffer *b, intptr_t stream, struct DLManagedTensor **out) {
    return to_dlpack(b, stream, out, "buffer_to_dlpack_stream");
}

static lf_status to_dlpack(lf_buffer *b, intptr_t stream, struct DLManagedTensor **out, const char *what) {
    if (out) *out = NULL;
    if (!b || !out) return graph_error(b ? b->ctx : NULL, LF_ERR_NULL, "%s: %s is NULL", what, b ? "out" : "buffer");
    if (b->user_freed) return graph_error(b->ctx, LF_ERR_STATE, "%s: the buffer was freed", what);
    lf_status st = check_stream(b->ctx, stream, what);
    if (st != LF_OK) return st;
    if (stream != -1 && b->ctx->be->stream_order && (st = b->ctx->be->stream_order(b->ctx, stream, true, what)) != LF_OK)
        return st;
    export_holder *h = graph_calloc(1, sizeof *h);
    if (!h) return graph_error(b->ctx, LF_ERR_NOMEM, "%s: out of memory", what);
    size_t esize = lf_dtype_size(b->dtype);
    DLTensor *dl = &h->mt.dl_tensor;
    /* data is the storage's lowest address; byte_offset reaches element [0,..] */
    dl->data = b->data ? b->data : (void *)(uintptr_t)b->dev;
    dl->byte_offset = b->strided ? (uint64_t)b->offset * esize : 0;
    int type, id;
    ctx_device(b->ctx, &type, &id);
    dl->device.device_type = (DLDeviceType)type;
    dl->device.device_id = id;
    dl->ndim = b->ndim;
    dl->dtype.code = (uint8_t)graph_dtypes[b->dtype].dl_code;
    dl->dtype.bits = (uint8_t)(esize * 8);
    dl->dtype.lanes = 1;
    if (b->ndim) memcpy(h->shape, b->shape, (size_t)b->ndim * sizeof *h->shape);
    if (b->strided) memcpy(h->strides, b->strides, (size_t)b->ndim * sizeof *h->strides);
    else graph_contiguous_strides(b->ndim, b->shape, h->strides);
    dl->shape = h->shape;
    dl->strides = h->strides; /* always given (NumPy and others accept both) */
    h->mt.manager_ctx = b;
    h->mt.deleter = export_deleter;
    h->b = b;
    b->refs++;
    b->pinned = true; /* the tensor holds this address from now on */
    *out = &h->mt;
    return LF_OK;
}
