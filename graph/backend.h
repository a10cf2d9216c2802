/* graph/backend.h: the backend interface.
 *
 * Defined on the ground floor (graph/) and implemented above it
 * (backends/cpu, backends/cuda, backends/host.c for the reference
 * evaluator), the way ggml-backend-impl.h and SQLite's sqlite3_io_methods do
 * it: a backend is one constant struct of function pointers. A context holds
 * a pointer to the backend that lf_ctx_new opened (ctx->be); graph/ctx.c
 * reaches a buffer's memory only through it and knows no backend by name.
 * backends/driver.c holds the table of the backends built in, opens one in
 * lf_ctx_new and runs lf_eval through the table entry of ctx->backend: the
 * pipeline with the backend's parts, or its own eval.
 *
 * What must stay true:
 *  - the buffer entries are either all set (a device backend: a buffer's
 *    memory is b->dev, b->data stays NULL) or all NULL (host memory:
 *    graph/ctx.c allocates b->data itself and copies with memcpy);
 *  - every entry that can fail records its message on the context, naming
 *    `what` (the public call, e.g. "buffer_write"), and returns its status;
 *  - an eval (parts' run, or eval) changes no buffer unless it returns
 *    LF_OK (an output buffer may also be an input, or share memory with one
 *    when wrapped);
 *  - exactly one of parts (with ready) and eval is set;
 *  - a context may hold state of several backends (the CPU backend makes
 *    its state on first use; a test may switch ctx->backend), one slot per
 *    backend id (ctx->state[id]); close frees its own slot only.
 * Adding a backend is a new folder plus one entry in driver.c's table.
 */
#ifndef LF_GRAPH_BACKEND_H
#define LF_GRAPH_BACKEND_H

#include "lazyfuse.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The number of backend ids (lazyfuse.h's lf_backend: AUTO = 0, then CPU,
 * CUDA, REFERENCE, the last): the size of every table indexed by a backend
 * id (driver.c's builtin and names, ctx->state). The one place that knows
 * which id is the last. */
enum { GRAPH_BACKENDS = LF_BACKEND_REFERENCE + 1 };

struct program_parts; /* backends/program.h: the parts of a compiled backend */

typedef struct graph_backend {
    lf_backend id;     /* LF_BACKEND_CPU, _CUDA or _REFERENCE: its table slot and ctx->state index */
    const char *name;  /* "cpu", "cuda", "reference" (lf_backend_name) */
    const char *label; /* in messages: "CPU", "CUDA", "reference" */

    /* Opens the backend for a new context (ctx->opt resolved, ctx->be not yet
     * set): makes its state in ctx->state[id] when it needs one now.
     * LF_ERR_BACKEND with the reason in why (not on the context: lf_ctx_new
     * decides whether it is an error or a fallback), or LF_ERR_NOMEM; the
     * context is unchanged on failure. Required. */
    lf_status (*open)(lf_ctx *ctx, char *why, size_t cap);
    /* Frees the backend's state of ctx (ctx->state[id], may be NULL), after
     * every graph and buffer of the context. Optional (NULL: no state). */
    void (*close)(lf_ctx *ctx);

    /* ---- device memory: all set or all NULL (host memory) ---- */
    /* Zero-filled storage of b->storage (> 0) bytes into b->dev. */
    lf_status (*buffer_alloc)(lf_buffer *b, const char *what);
    /* Frees b->dev (never called for a wrapped buffer: its release is). */
    void (*buffer_free)(lf_buffer *b);
    /* Host -> device and device -> host copies of a buffer's whole storage
     * (b->storage bytes, > 0); write returns when src may be reused, read
     * after the device's earlier work on the buffer. */
    lf_status (*buffer_write)(lf_buffer *b, const void *src, const char *what);
    lf_status (*buffer_read)(const lf_buffer *b, void *dst, const char *what);
    /* Checks that the user's memory of a wrapped buffer (b->dev, b->storage
     * bytes from its lowest address) may be used by this backend. Optional
     * (NULL: taken as given; device backends only). */
    lf_status (*buffer_wrap)(lf_buffer *b, const char *what);

    /* ---- evaluation: either parts (with ready, and fall_back optional),
     * which backends/driver.c's lf_eval runs through the pipeline written
     * once (backends/program.h, program_eval: program cache -> plan ->
     * in-place -> layouts -> codegen -> kernel cache -> compile -> run), or
     * eval, a backend that evaluates by itself (the reference oracle) ---- */
    /* What the pipeline builds and runs this backend's programs with: its
     * program struct, kernel cache, dialect, compile of a batch of missed
     * kernels, binding and run (backends/program.h, program_parts). */
    const struct program_parts *parts;
    /* Before each eval with parts: makes the backend ready on ctx (its
     * state, its compiler found, its device current) and says where the eval
     * runs: the pipeline with parts and *state, or, *on_host, the host's
     * schedule interpreter (backends/host.c) because the backend cannot run
     * kernels here and the context allows that (a warning printed once).
     * Else an error status with its message on the context. */
    lf_status (*ready)(lf_ctx *ctx, void **state, bool *on_host);
    /* After an eval with parts failed (its message on the context): whether
     * the host's interpreter runs it instead, because nothing ran and the
     * failure was the backend's, not the graph's (the CPU: no room left to
     * compile), and the context allows that; then the failure's message is
     * dropped. Optional (NULL: a failure is the eval's). */
    bool (*fall_back)(lf_ctx *ctx, void *state);
    /* Evaluates outs[0..n) of g into dsts (checked by graph_check_outputs
     * and graph_check_dst_memory); fills *stats (zeroed by the caller) on
     * success. Only for a backend without parts. */
    lf_status (*eval)(lf_graph *g, int n, lf_node *const *outs, lf_buffer *const *dsts,
                      lf_eval_stats *stats);

    /* The DLPack device of the context's buffers: *type a DLDeviceType code
     * (dlpack.h: 1 kDLCPU, 2 kDLCUDA), *id the device number. Optional
     * (NULL: host memory, kDLCPU device 0). */
    void (*dlpack_device)(const lf_ctx *ctx, int *type, int *id);

    /* The device's description into buf (snprintf-like: the full length).
     * Required. */
    int (*device_name)(const lf_ctx *ctx, char *buf, size_t cap);

    /* ---- asynchronous backends: all set or all NULL (work is done when
     * eval returns) ---- */
    /* Waits until the work queued by ctx is done (whole_device: every
     * stream's work on ctx's device, other libraries' too); reports a fault
     * of an earlier kernel (LF_ERR_BACKEND). */
    lf_status (*synchronize)(lf_ctx *ctx, bool whole_device, const char *what);
    /* The stream value that the DLPack exchange protocol passes for ctx's
     * work (a CUstream as intptr_t). */
    intptr_t (*dlpack_stream)(const lf_ctx *ctx);
    /* Orders ctx's work against another stream of the protocol (1 legacy
     * default, 2 per-thread default, else a stream handle): when
     * other_waits, work queued on `other` after this call waits for what
     * ctx queued before it (an export); else ctx's later work waits for
     * what `other` queued before (an import). Returns at once. */
    lf_status (*stream_order)(lf_ctx *ctx, intptr_t other, bool other_waits, const char *what);
} graph_backend;

/* Whether ctx's buffers live in device memory (its backend has buffer entries). */
#define graph_ctx_on_device(ctx) ((ctx)->be && (ctx)->be->buffer_alloc != NULL)

#endif /* LF_GRAPH_BACKEND_H */
