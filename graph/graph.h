/* graph/graph.h: internal interface of the graph stage.
 *
 * The graph stage builds and checks the deferred graph: contexts, buffers,
 * nodes with dtypes and shapes, views, scalar functions (builder, parser,
 * printer, typing), scalar semantics, and the reference evaluator. Later
 * stages (fusion, codegen, backends) see only this header and lazyfuse.h.
 * Dtypes are rows of one table, graph/dtypes.def (read as graph_dtypes[] for
 * sizes, names, kinds, promotion, DLPack codes and sort keys; codegen's
 * dialects take their type names from it); what differs between dtypes as
 * arithmetic stays code (scalar.c, fn.c's literal typing, codegen/emit.c).
 *
 * Invariants every stage may rely on:
 *  - a node's inputs were created before it in the same graph, so node ids
 *    (creation order) are a topological order;
 *  - a node that exists is valid: shapes broadcast, axes are in range, and its
 *    numel and byte size fit in int64_t / size_t (checked at construction);
 *  - an fn's expressions are in topological order (operands have lower ids)
 *    and identical expressions are stored once (hash-consing);
 *  - all memory comes from graph_malloc & co., so the failure hook and the
 *    live-byte counter see every allocation.
 */
#ifndef LF_GRAPH_H
#define LF_GRAPH_H

#include "graph/backend.h"
#include "lazyfuse.h"

#include <stdarg.h>

#define LF_ERRMSG_CAP 2048

/* Two limits on an fn's parameters. LF_MAX_ARGS (lazyfuse.h, 8) is the
 * user's: inputs of a map or zipwith, parameters of lf_fn_new and of a parsed
 * fn, a node's inputs. GRAPH_MAX_PARAMS is the internal one, for the fns that
 * fusion composes (fusion/plan_build.c): one parameter per distinct load
 * (source and index map), so a stencil reading one buffer at many shifted
 * positions stays one fn. Arrays indexed by an fn's parameters (the
 * interpreter's, the planner's load lists, codegen's accesses) are sized by
 * it; fusion keeps the distinct buffers of a fn within LF_MAX_ARGS
 * (fusion/fusion.h). */
enum { GRAPH_MAX_PARAMS = 64 };

/* ==== util.c: allocation (with the failure hook), messages, shapes ======== */

/* Blocks of this size and more are mapped apart, 2 MiB-aligned, with huge
 * pages asked for (graph/util.c); their data is 64-byte aligned. */
#define GRAPH_BIG_BLOCK ((size_t)4 << 20)
void *graph_malloc(size_t bytes);              /* NULL on failure or injected failure */
void *graph_calloc(size_t count, size_t size); /* NULL on overflow or failure */
void *graph_realloc(void *p, size_t bytes);    /* p untouched on failure */
void graph_free(void *p);
char *graph_strdup(const char *s);
/* A graph_malloc'd printf; NULL when out of memory. */
char *graph_strdupf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Seconds on the monotonic clock (for the statistics' timings). */
double graph_now_seconds(void);
/* Whether $LF_DEBUG (a comma-separated list) names `what`. */
bool graph_debug_on(const char *what);
/* Output aliasing for a backend's run: unsafe[i] is set when dsts[i] is one
 * of ins[0..nin) (buffers the program reads), shares memory with one of them
 * (wrapped buffers: storage ranges compared), or is named by another output,
 * else cleared. own_input (may be NULL) narrows that: own_input[i] is set
 * when dsts[i] is one of ins itself and nothing else (no other output names
 * it, it overlaps no other input): the case an output may be written in
 * place (fusion/plan_inplace.c). Expected O(n + nin) (a hash set) unless a
 * buffer is wrapped. false when out of memory, with nothing left allocated. */
bool graph_dst_aliases(int n, lf_buffer *const *dsts, int nin, const lf_buffer *const *ins, bool *unsafe,
                       bool *own_input);

/* Records an error message for ctx (or the calling thread when ctx is NULL)
 * and returns st, so that `return graph_error(ctx, LF_ERR_..., ...)` reads. */
lf_status graph_error(lf_ctx *ctx, lf_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Formats a shape as "[3,4]" into buf (cap >= 2). */
const char *graph_shape_str(char *buf, size_t cap, int ndim, const int64_t *shape);
/* Checks a caller's shape: ndim in 0..LF_MAX_DIMS, shape non-NULL when
 * ndim > 0, extents >= 0. On a problem writes "what: ..." into msg and
 * returns its status (LF_ERR_SHAPE or LF_ERR_NULL); LF_OK otherwise. */
lf_status graph_shape_problem(const char *what, int ndim, const int64_t *shape, char *msg,
                              size_t cap);
/* numel of a shape, with overflow checks: false when the product, or the
 * product times elem_size, overflows. */
bool graph_shape_numel(int ndim, const int64_t *shape, size_t elem_size, int64_t *numel);
/* Row-major strides (in elements) of a dense array of this shape. */
void graph_contiguous_strides(int ndim, const int64_t *shape, int64_t *strides);
/* NumPy broadcast of two shapes; false when they do not broadcast. */
bool graph_broadcast_shapes(int na, const int64_t *a, int nb, const int64_t *b, int *nout,
                            int64_t *out);
/* Strides (in elements) that read a dense array of shape `in` as if it had
 * been broadcast to `out` (0 on broadcast axes). `in` must broadcast to `out`. */
void graph_broadcast_strides(int nin, const int64_t *in, int nout, const int64_t *out,
                             int64_t *strides);

/* ==== ctx.c: contexts and buffers ========================================= */

typedef struct graph_host_cc graph_host_cc; /* the host compiler (fn.c section) */

struct lf_ctx {
    lf_ctx_options opt;          /* options as given, resolved (cache_dir owned) */
    lf_backend backend;          /* resolved backend, never AUTO: the table entry
                                    lf_eval runs (a test may switch it between
                                    CPU and REFERENCE) */
    const graph_backend *be;     /* the backend lf_ctx_new opened: its buffer
                                    entries hold every buffer's memory
                                    (graph/backend.h) */
    char errmsg[LF_ERRMSG_CAP];  /* last error message */
    struct lf_buffer *buffers;   /* live buffers (doubly linked) */
    struct lf_graph *graphs;     /* live graphs (doubly linked) */
    lf_eval_stats last_stats;    /* of the last lf_eval (backends/driver.c) */
    const graph_host_cc *hostcc; /* compiles user functions for the host
                                    (set by lf_ctx_new; NULL: none) */
    void *hostfns;               /* hostcc's compiled functions (its own) */
    void *state[GRAPH_BACKENDS]; /* per backend id: its state in this
                                    context (pool and kernel cache, device and
                                    stream...), or NULL; freed by its close
                                    after the graphs and buffers */
};

struct lf_buffer {
    lf_ctx *ctx;                   /* owning context */
    lf_dtype dtype;                /* element type */
    int ndim;                      /* 0..LF_MAX_DIMS */
    int64_t shape[LF_MAX_DIMS];    /* extents, >= 0 */
    int64_t numel;                 /* product of extents */
    size_t bytes;                  /* numel * dtype size (what read/write copy) */
    size_t storage;                /* bytes of memory behind data / dev: bytes,
                                      or the span a strided wrap reaches */
    void *data;                    /* host storage, its lowest address (NULL when
                                      storage is 0, and in a device context) */
    uint64_t dev;                  /* device context: device address of the
                                      storage (0 when storage is 0); 0 otherwise */
    bool wrapped;                  /* the memory is the user's (lf_buffer_wrap,
                                      DLPack): release is called, never free */
    void (*release)(void *);       /* wrapped: called once with release_arg when
                                      the buffer dies (may be NULL) */
    void *release_arg;
    bool strided;                  /* wrapped with strides other than C-contiguous:
                                      element [i0,..] is element offset +
                                      sum ik*strides[k] of the storage; read by
                                      evaluators only through an input view
                                      (lf_input), never an eval output */
    int64_t offset;                /* strided: element [0,..]'s element offset
                                      from the storage's lowest address */
    int64_t strides[LF_MAX_DIMS];  /* strided: per axis, in elements (any sign) */
    bool pinned;                   /* its address was handed out (a DLPack
                                      export): data never moves. Otherwise an
                                      evaluator may give an unwrapped,
                                      unstrided buffer other storage of the
                                      same size (cpu.c: a staged output's
                                      block, swapped in instead of copied) */
    int refs;                      /* 1 for the user + 1 per graph reading it
                                      + 1 per live DLPack export */
    int graphs;                    /* graphs whose bound list holds it (so a
                                      buffer in none, as every new one, is
                                      bound without a scan of the list) */
    bool user_freed;               /* lf_buffer_free was called */
    struct lf_buffer *prev, *next; /* ctx->buffers list */
};

/* lf_ctx_new's options, read as the caller's struct_size allows: *out gets
 * the fields inside it and the defaults of the rest (all defaults for a NULL
 * opt). LF_ERR_INVALID, recorded for lf_errmsg(NULL), for a struct_size of
 * 0, below LF_CTX_OPTIONS_SIZE_1_0 or above sizeof(lf_ctx_options). */
lf_status graph_options_read(const lf_ctx_options *opt, lf_ctx_options *out);
/* Drops one reference; frees the buffer when none is left (a wrapped
 * buffer's release is called then). */
void graph_buffer_release(lf_buffer *b);
/* lf_buffer_wrap, with `what` naming the public call in messages
 * (lf_buffer_from_dlpack uses it too). */
lf_buffer *graph_buffer_wrap(lf_ctx *ctx, const char *what, lf_dtype t, int ndim, const int64_t *shape,
                             const int64_t *strides, void *data, void (*release)(void *), void *release_arg);
/* Checks lf_eval's output buffers' memory: no output is a strided wrap
 * (LF_ERR_INVALID), and no two outputs' memory overlaps unless they are the
 * same buffer (LF_ERR_INVALID). */
lf_status graph_check_dst_memory(lf_ctx *ctx, int n, lf_buffer *const *dsts);
/* Whether two buffers' memory (storage ranges) overlap. */
bool graph_buffers_overlap(const lf_buffer *a, const lf_buffer *b);

/* ==== scalar.c: scalar values and operator semantics ======================= */

/* One element value. Floating dtypes use f (an f32, f16 or bf16 value is a
 * double holding it exactly); bool and integers use i (bool is 0 or 1; an
 * unsigned integer holds its value, a u64 its bits: values from 2^63 on
 * read as negative int64_t, so unsigned code compares them as uint64_t).
 * Complex dtypes use f (real part) and im (imaginary part; a c64's parts
 * are f32 values); im is 0 for every other dtype's value. */
typedef struct lf_scalar {
    union {
        double f;
        int64_t i;
    };
    double im; /* complex: the imaginary part */
} lf_scalar;

typedef enum op_syntax { OPSYN_INFIX, OPSYN_PREFIX, OPSYN_CALL } op_syntax;
typedef enum op_typing {
    OPTY_ARITH, OPTY_DIV, OPTY_FLOAT, OPTY_SAME, OPTY_CMP, OPTY_LOGIC, OPTY_PRED, OPTY_SELECT,
    OPTY_BITS, OPTY_SHIFT, OPTY_PART
} op_typing;

typedef struct op_info {
    const char *text;   /* spelling in expression strings */
    int arity;          /* 1..3 */
    op_syntax syntax;   /* how the parser and printer write it */
    op_typing typing;   /* result dtype rule */
    const char *cname;  /* C math base name for codegen, "" if open-coded */
} op_info;

extern const op_info graph_ops[LF_NOPS];

typedef struct red_info {
    const char *text;   /* "sum", ... */
    double identity;    /* starting value for floating accumulation */
} red_info;

extern const red_info graph_reds[LF_NREDS];

/* ==== dtype.c: the dtype table (graph/dtypes.def) ========================== */

/* Whether reduction op takes dtype t (u64 min, max, argmin, argmax do not
 * yet); fails g with LF_ERR_DTYPE if not. In graph/graph.c. */
struct lf_graph;
bool graph_red_dtype_ok(struct lf_graph *g, const char *what, lf_reduce_op op, lf_dtype t);

typedef enum dtype_kind { DTYPE_BOOL, DTYPE_SINT, DTYPE_UINT, DTYPE_FLOAT, DTYPE_COMPLEX } dtype_kind;

/* How a value becomes an unsigned sort key (graph_sort_key). */
typedef enum sort_key_kind {
    SORT_KEY_BOOL,   /* 0 or 1 */
    SORT_KEY_SIGNED, /* two's complement, the key's sign bit flipped */
    SORT_KEY_UNSIGNED, /* the bits */
    SORT_KEY_FLOAT,  /* IEEE bits, sign folded, -0.0 and NaNs canonical */
    SORT_KEY_NONE    /* no order (complex): never sorted */
} sort_key_kind;

/* DLPack's DLDataTypeCode values (stable across DLPack versions; kDLBool is
 * 6 from 0.8 on, which the 0.6 header does not name). */
enum { GRAPH_DL_INT = 0, GRAPH_DL_UINT = 1, GRAPH_DL_FLOAT = 2, GRAPH_DL_BFLOAT = 4, GRAPH_DL_COMPLEX = 5,
       GRAPH_DL_BOOL = 6 };

/* One row of graph/dtypes.def as data (the C and CUDA type names stay in
 * the .def: only codegen reads them, its dialects and codegen/emit.c). */
typedef struct graph_dtype_info {
    const char *name;        /* "f32": lf_dtype_name, cast name, helper suffix */
    size_t size;             /* bytes per element */
    dtype_kind kind;         /* bool, signed, unsigned, float, complex */
    int rank;                /* promotion order: lowest safe common rank wins */
    int digits;              /* magnitude bits (integers), significand digits (floats) */
    int maxexp;              /* floats: largest binary exponent + 1; else 0 */
    int dl_code;             /* DLPack type code (GRAPH_DL_*); bits are 8 * size */
    sort_key_kind sort_key;  /* value -> sort key */
} graph_dtype_info;

extern const graph_dtype_info graph_dtypes[LF_NDTYPES];

/* t's kind (false for an unknown dtype). */
static inline bool graph_dtype_is_float(lf_dtype t) {
    return (unsigned)t < LF_NDTYPES && graph_dtypes[t].kind == DTYPE_FLOAT;
}
static inline bool graph_dtype_is_complex(lf_dtype t) {
    return (unsigned)t < LF_NDTYPES && graph_dtypes[t].kind == DTYPE_COMPLEX;
}
/* The component float of complex t (c64: f32, c128: f64); t otherwise. */
static inline lf_dtype graph_dtype_part(lf_dtype t) {
    return t == LF_C64 ? LF_F32 : t == LF_C128 ? LF_F64 : t;
}
/* Whether op accepts complex operands (lazyfuse.h, "Complex"). */
bool graph_op_complex_ok(lf_op op);
static inline bool graph_dtype_is_int(lf_dtype t) {
    return (unsigned)t < LF_NDTYPES && (graph_dtypes[t].kind == DTYPE_SINT || graph_dtypes[t].kind == DTYPE_UINT);
}
/* The smallest and largest value of bool or integer dtype t (bool: 0, 1),
 * from its kind and digits. */
int64_t graph_dtype_int_min(lf_dtype t);
int64_t graph_dtype_int_max(lf_dtype t);
/* The dtype of DLPack code `code` with `bits` bits (one lane), or LF_NDTYPES. */
lf_dtype graph_dtype_from_dlpack(int code, int bits);

/* Converts v from dtype `from` to dtype `to` with the cast rules of
 * lazyfuse.h (float->int truncates and saturates, NaN -> 0; int->int wraps;
 * f64->f32 rounds; anything->bool is != 0). */
lf_scalar graph_scalar_convert(lf_scalar v, lf_dtype from, lf_dtype to);
/* The cost class of an exponent value v (of dtype t) of a float **: the
 * exponents whose power codegen computes without pow, exactly as pow would
 * (lf_pow_* of codegen/dialect_c.c: 0.5 is the square root with pow's
 * special values, 2 is x*x, 1 is x, 0 (and -0) is 1, -1 is 1/x), 1 to 5;
 * 0 for every other value. A kernel that reads a constant as an exponent
 * prints such a value as a literal (so the C compiler drops the pow call)
 * and reads any other value at run time: kernels differ by class, never by
 * value (codegen.h). */
int graph_pow_exponent_class(lf_scalar v, lf_dtype t);
/* Applies op. Operands are already converted to the compute dtype ct (for
 * LOGIC ops ct is LF_BOOL; for WHERE the first operand is a bool and the
 * others are in ct). Returns the value in the op's result dtype. */
lf_scalar graph_scalar_apply(lf_op op, lf_dtype ct, lf_scalar a, lf_scalar b, lf_scalar c);
/* Loads element i of a dense array of dtype t, and stores into one. */
lf_scalar graph_scalar_load(const void *base, lf_dtype t, int64_t i);
void graph_scalar_store(void *base, lf_dtype t, int64_t i, lf_scalar v);
/* Element i (flat row-major index) of random node n, in n's dtype: the
 * helpers of graph/random.h, which the kernels' prelude prints verbatim. */
lf_scalar graph_random_value(const lf_node *n, int64_t i);

/* Reductions, element by element: the one definition every evaluator uses.
 * Elements are folded in row-major order of their position in the reduced
 * set; x is the element converted to the accumulator dtype. */
typedef struct graph_red_acc {
    lf_scalar v;    /* running sum / product / extreme, in the accumulator dtype */
    int64_t arg;    /* argmin/argmax: position of the extreme in the reduced set */
    bool started;   /* min/max/arg: an element has been seen */
} graph_red_acc;

/* LF_F64 for float input and for mean, LF_I64 (wrapping) otherwise. */
lf_dtype graph_red_acc_dtype(lf_reduce_op op, lf_dtype in);
void graph_red_init(graph_red_acc *a, lf_reduce_op op, lf_dtype acc_t);
void graph_red_fold(graph_red_acc *a, lf_reduce_op op, lf_dtype acc_t, lf_scalar x, int64_t pos);
/* The result in dtype out (LF_I64 for argmin/argmax); count is the size of
 * the reduced set (mean divides by it). */
lf_scalar graph_red_finish(const graph_red_acc *a, lf_reduce_op op, lf_dtype acc_t, int64_t count,
                           lf_dtype out);

/* Scans (lf_scan), element by element in the blocked order lazyfuse.h
 * states: the one definition every evaluator follows. A state walks one row;
 * x is the element converted to the accumulator dtype
 * (graph_red_acc_dtype); the result is in dtype out. */
typedef struct graph_scan_state {
    lf_reduce_op op;    /* the scan's op */
    lf_dtype in;        /* the scanned node's dtype */
    lf_dtype acc_t;     /* accumulator dtype */
    bool exclusive;     /* result before the element's fold */
    graph_red_acc acc;  /* running value (starts each block at off) */
    graph_red_acc tot;  /* the current block folded from the identity */
    graph_red_acc off;  /* the current block's offset O[b] */
    int64_t pos;        /* elements of the row seen */
} graph_scan_state;

/* The identity of a scan op in accumulator dtype, for input dtype in. */
lf_scalar graph_scan_identity(lf_reduce_op op, lf_dtype in);
void graph_scan_start(graph_scan_state *s, lf_reduce_op op, lf_dtype in, bool exclusive);
lf_scalar graph_scan_step(graph_scan_state *s, lf_scalar x, lf_dtype out);

/* ==== fn.c: scalar functions: builder, hash-consing, typing, evaluation ====
 *
 * An fn has no depth limit (the builder nests as deep as memory allows and
 * the parser reads back whatever lf_fn_print writes), so code that walks an
 * fn's expressions goes through exprs in id order (it is topological), or
 * keeps an explicit stack on the heap, and never recurses from the result:
 * a walk must use the same thread stack at any depth. */

/* EXPR_SCALAR appears only in the fns fusion builds (fusion/plan_build.c):
 * the value of a constant node (lf_const, lf_fill) read when the fn runs, so
 * that a new value (lf_scalar_set) needs no new fn and no new kernel. It is
 * strong, of the node's dtype (as the cast of a literal to it would be). */
/* EXPR_CALL: a call of a user function (graph_ufn, lf_fn_c) on arg[0..
 * call->nparams), each converted to the parameter's dtype; its value has
 * dtype call->ret. */
typedef enum expr_kind { EXPR_PARAM, EXPR_CONST, EXPR_OP, EXPR_CAST, EXPR_SCALAR, EXPR_CALL } expr_kind;

/* The most parameters of a user function: an EXPR_CALL's operands are an
 * expression's arg[3]. */
enum { GRAPH_UFN_MAX_PARAMS = 3 };

/* The host form of a user function: entry(fp, args, ret) converts args[k]
 * (one lf_scalar per parameter, in the parameter's dtype) to the C types,
 * calls the function and stores its result in *ret (in the result dtype).
 * fp is the function's address for a library function, unused otherwise. */
typedef void (*graph_ufn_entry)(void *fp, const void *args, void *ret);

/* A user function (ufn.c): owned by its graph (g->ufns), never changed
 * after lf_fn_c returned it. */
typedef struct graph_ufn {
    char name[64];                        /* C identifier, the name kernels call */
    int nparams;                          /* 0..GRAPH_UFN_MAX_PARAMS */
    lf_dtype ret;                         /* result dtype */
    lf_dtype params[GRAPH_UFN_MAX_PARAMS]; /* parameter dtypes */
    char pnames[GRAPH_UFN_MAX_PARAMS][64]; /* parameter names in the bodies */
    char *c_body;                         /* the C body (graph_malloc'd) */
    char *cuda_body;                      /* the CUDA body (graph_malloc'd;
                                             c_body's copy when none given) */
    graph_ufn_entry entry;                /* the host function (hostfn: compiled
                                             by ctx->hostcc, lives as long as
                                             the context) */
    void *fp;                             /* a library function's address
                                             (lf_fn_from_library), else NULL;
                                             entry's first argument */
    void *lib;                            /* its dlopen handle (closed with the ufn) */
    struct graph_ufn *next;               /* g->ufns list */
} graph_ufn;

/* Declares a user function (ufn.c): checks name and signature, compiles
 * the host function (ctx->hostcc) unless the same one exists, and returns
 * the fn name(params). c_body may be NULL when fp is set (a library
 * function: no body); cuda_body NULL: c_body. NULL with the error recorded
 * on the graph. */
lf_fn *graph_ufn_declare(lf_graph *g, const char *what, const char *name, const char *signature,
                         const char *c_body, const char *cuda_body, void *fp, void *lib);
/* Frees g's user functions (graph_destroy, after its fns). */
void graph_ufns_destroy(lf_graph *g);

/* The host compiler as graph/ sees it (graph/ includes no backend):
 * backends/driver.c points every new context's ctx->hostcc at the CPU
 * backend's (backends/cpu/hostfn.c). */
struct graph_host_cc {
    /* Sets u->entry: compiles u's host function (its C body, or for a
     * library function (u->fp set) a trampoline calling u->fp) once per
     * context and distinct text. Records "<what>: ..." on the context and
     * returns LF_ERR_COMPILE (the compiler rejects the body; its message
     * follows), LF_ERR_BACKEND (no compiler can run) or LF_ERR_NOMEM. */
    lf_status (*compile)(lf_ctx *ctx, const char *what, graph_ufn *u);
    /* Frees what compile kept for ctx (called by lf_ctx_destroy after the
     * graphs). */
    void (*close)(lf_ctx *ctx);
};

typedef struct fn_expr {
    expr_kind kind;    /* what this expression is */
    lf_op op;          /* EXPR_OP: the operator */
    int arg[3];        /* EXPR_OP / EXPR_CAST operands (ids < own id), else -1 */
    int param;         /* EXPR_PARAM: parameter index; EXPR_SCALAR: index into
                          the kernel's scalars (fuse_kernel.scalars) */
    lf_dtype cast_to;  /* EXPR_CAST: target dtype; EXPR_SCALAR: node's dtype */
    bool is_int;       /* EXPR_CONST: integer literal (value.i), else float (value.f) */
    bool beyond;       /* EXPR_CONST: an integer literal beyond int64 (parsed
                          from a string, at most GRAPH_BEYOND_DIGITS digits):
                          is_int false, value.f its nearest double, big_hi and
                          big_lo its exact magnitude; typed as a weak integer
                          (graph_fn_types: float operators read the double,
                          integer ones refuse it, comparisons with integers
                          compare exactly) */
    uint64_t big_hi, big_lo; /* beyond: |literal| = big_hi * 10^19 + big_lo */
    lf_scalar value;   /* EXPR_CONST: the literal */
    const lf_node *node; /* EXPR_SCALAR: the constant node (its u.value is read
                            at evaluation; hash-consing compares this only) */
    const graph_ufn *call; /* EXPR_CALL: the function called */
} fn_expr;

/* Bytes of a parsed fn's source kept for messages (graph_node_str). */
#define GRAPH_FN_SOURCE_KEEP 40

struct lf_fn {
    lf_graph *graph;                 /* owner (memory and errors) */
    uint64_t serial;                 /* the owner's serial (graph_owns) */
    int nparams;                     /* 0..LF_MAX_ARGS (user fns), fused fns
                                        up to GRAPH_MAX_PARAMS */
    char **param_names;              /* nparams names for printing (the array
                                        and each name graph_malloc'd) */
    fn_expr *exprs;                  /* expressions in topological order */
    int nexprs, cap;                 /* used and allocated entries */
    int result;                      /* result expression id, -1 until set */
    struct lf_fn *next;              /* graph->fns list */
    char source[GRAPH_FN_SOURCE_KEEP + 4]; /* lf_fn_parse's text for messages:
                                        printable, blanks collapsed, its first
                                        GRAPH_FN_SOURCE_KEEP bytes + "..."
                                        when longer; "" for other fns */
};

/* Creates an fn with nparams parameters named by names (NULL: p0, p1, ...).
 * Records the error on the graph and returns NULL on failure. */
lf_fn *graph_fn_create(lf_graph *g, int nparams, const char *const *names);
/* An expression of kind k with every field zero and no operands (-1). */
fn_expr graph_fn_blank_expr(expr_kind k);
/* Adds an expression (hash-consed: an identical one returns its id). Returns
 * its id, or -1 after recording an error on the graph. */
int graph_fn_add(lf_fn *f, const fn_expr *e);

/* Expression typing for given parameter dtypes. etype[i] is the dtype of
 * expression i's value; ctype[i] the dtype its operands are converted to
 * before the operator applies (equal to etype except for comparisons,
 * logic, predicates and casts). Weak literals follow lazyfuse.h. Returns the
 * result dtype, or LF_NDTYPES when out of memory. Arrays have f->nexprs
 * entries; f must have a result. */
lf_dtype graph_fn_types(const lf_fn *f, const lf_dtype *params, lf_dtype *etype, lf_dtype *ctype);
/* An integer literal (or constant expression of literals) that the dtype it
 * meets cannot hold: lazyfuse.h's NEP 50 rule. A comparison with it is
 * typed to compare exactly (ctype i64; a literal beyond int64 meeting an
 * integer: ctype f64, and graph_fn_exact_compares gives the fn to build);
 * any other operator is an error the builder reports. */
typedef struct graph_fn_literal {
    int expr;           /* the operator's expression, -1 if none */
    int64_t value;      /* the literal's value (lit < 0) */
    int lit;            /* a literal beyond int64 (fn_expr.beyond): its
                           expression, else -1 */
    lf_dtype dtype;     /* the dtype that cannot hold it (i32; i64 for beyond) */
} graph_fn_literal;
/* Digits an integer literal beyond int64 may have (the parser refuses more). */
enum { GRAPH_BEYOND_DIGITS = 38 };
/* A literal beyond int64 (fn_expr.beyond) in decimal, exactly as written
 * (without leading zeros), into buf; returns its length (snprintf's). */
int graph_fn_beyond_str(const fn_expr *e, char *buf, size_t cap);
/* graph_fn_types, also reporting in *bad (when not NULL) the first operator
 * that would have to wrap an integer literal into a narrower dtype. */
lf_dtype graph_fn_types_checked(const lf_fn *f, const lf_dtype *params, lf_dtype *etype, lf_dtype *ctype,
                                graph_fn_literal *bad);
/* f, or when an operand of a comparison is a literal beyond int64
 * (fn_expr.beyond) and the other an integer or bool (typed by etype from
 * graph_fn_types), a copy of f in its graph with that operand replaced by
 * +inf or -inf (the literal's sign): the comparison (ctype f64) then gives
 * for every integer the result of comparing with the literal exactly,
 * which no double near 2^63 would (an i64 near 2^63 rounds to it). NULL
 * after recording an error (out of memory). */
lf_fn *graph_fn_exact_compares(lf_fn *f, const lf_dtype *etype);
/* The first expression of f typed by etype (from graph_fn_types) whose
 * operator refuses one of its operands' dtypes (a float operand of a BITS or
 * SHIFT operator: & | ^ ~ << >>), with that operand's index in *operand, or
 * the operator's arity in *operand when no operand is a float but their
 * common dtype is (u64 with a signed integer promotes to f64); -1 when
 * every operand is accepted. Checked where a map node is built, so
 * nothing after the graph (fusion, evaluators, codegen) meets such an
 * expression. */
int graph_fn_bad_operand(const lf_fn *f, const lf_dtype *etype, int *operand);
/* Evaluates f on one set of arguments (args[i] in dtype params[i]); vals is
 * scratch of f->nexprs entries; returns the value in etype[f->result]. */
lf_scalar graph_fn_eval(const lf_fn *f, const lf_dtype *params, const lf_dtype *etype,
                        const lf_dtype *ctype, const lf_scalar *args, lf_scalar *vals);
/* Frees an fn (graph_destroy does this for every fn of a graph). */
void graph_fn_destroy(lf_fn *f);
/* An fn that applies one builtin op to its arity parameters. */
lf_fn *graph_fn_for_op(lf_graph *g, lf_op op);
/* An fn that casts its one parameter to t. */
lf_fn *graph_fn_for_cast(lf_graph *g, lf_dtype t);

/* ==== parse.c: expression strings <-> fns ================================= */

/* Prints f as "(a, b) -> expr" (lf_fn_print is this); iterative, any depth. */
int graph_fn_print(const lf_fn *f, char *buf, size_t cap);

/* ==== graph.c: graphs and nodes =========================================== */

typedef enum node_kind {
    NODE_INPUT,   /* reads a buffer */
    NODE_CONST,   /* every element is one value (0-d constant or fill) */
    NODE_IOTA,    /* start + i*step, 1-d */
    NODE_RANDOM,  /* Philox4x32-10 of (seed, flat index), any shape */
    NODE_VIEW,    /* strided read of its input's dense layout */
    NODE_MAP,     /* fn applied elementwise to broadcast inputs */
    NODE_REDUCE,  /* reduction over a set of axes */
    NODE_SCAN,    /* prefix combine along one axis (lf_scan) */
    NODE_GATHER,  /* inputs[0] (x) read at inputs[1] (idx) along an axis */
    NODE_SCATTER, /* inputs[0] (dst) with inputs[2] (values) combined in at
                     inputs[1] (idx) along an axis */
    NODE_SORT     /* the first k entries of the stable sort of inputs[0]
                     along an axis: values or positions (lf_sort, lf_argsort,
                     lf_topk; graph/sort.c) */
} node_kind;

/* One cached program of a graph: a backend's plan, kernels and temporaries
 * for one output set. A program holds no pointer to an output buffer (they
 * are bound at each eval), only to g's nodes, input buffers and its own
 * memory, so it stays valid until g changes its plan (lf_node_materialize
 * clears the cache) or is freed. */
enum { GRAPH_PROGRAMS = 4 };       /* output sets cached per graph (LRU) */
typedef struct graph_program {
    void *p;                       /* the program, NULL: empty entry */
    void (*free)(void *);          /* frees it; also tells whose it is */
} graph_program;

typedef enum view_kind {
    VIEW_RESHAPE, VIEW_PERMUTE, VIEW_BROADCAST, VIEW_EXPAND, VIEW_SLICE,
    VIEW_PAD,     /* lf_pad's clamped or reflected read of its input */
    VIEW_CONCAT   /* a piece of lf_concat, clamped read at its offset; both
                     are remapped views (u.view.remapped) */
} view_kind;

/* How a remapped view axis (lf_pad, lf_concat) takes its coordinate c to
 * its input's: u = c - shift, then GRAPH_REMAP_CLAMP clamps u into
 * 0..ext-1 (edge; a constant border is a select over the clamped read) and
 * GRAPH_REMAP_REFLECT reflects it with period 2(ext-1), NumPy's 'reflect'
 * at any width (ext 1: always 0). ext >= 1 on a remapped axis. The
 * reference evaluator, fuse_map_apply and the kernels' lf_steps
 * (codegen/dialect_c.c) compute exactly this. */
enum { GRAPH_REMAP_NONE = 0, GRAPH_REMAP_CLAMP = 1, GRAPH_REMAP_REFLECT = 2 };
static inline int64_t graph_remap_coord(int mode, int64_t c, int64_t shift, int64_t ext) {
    if (mode == GRAPH_REMAP_NONE) return c;
    int64_t u = c - shift;
    if (mode == GRAPH_REMAP_CLAMP) return u < 0 ? 0 : u >= ext ? ext - 1 : u;
    if (ext <= 1) return 0;
    int64_t period = 2 * (ext - 1);
    u %= period;
    if (u < 0) u += period;
    return u >= ext ? period - u : u;
}

struct lf_node {
    lf_graph *graph;                /* owner */
    uint64_t serial;                /* the owner's serial (graph_owns); 0 once freed */
    int id;                         /* creation order: a topological order */
    node_kind kind;                 /* what the node computes */
    lf_dtype dtype;                 /* element type */
    int ndim;                       /* 0..LF_MAX_DIMS */
    int64_t shape[LF_MAX_DIMS];     /* extents */
    int64_t numel;                  /* product of extents (fits, checked) */
    int ninputs;                    /* 0..LF_MAX_ARGS */
    lf_node *inputs[LF_MAX_ARGS];   /* operand nodes (lower ids) */
    bool materialize;               /* lf_node_materialize: a fusion barrier */
    const struct graph_extern *ext; /* lf_extern: a NODE_INPUT whose buffer
                                       (the graph's own) holds the callback's
                                       result, written by lf_eval's extern
                                       steps before the rest runs (extern.c);
                                       NULL for every other node */
    bool pow_exponent;              /* NODE_CONST that some map reads directly as
                                       a float ** exponent: compiled kernels may
                                       specialise on its value class
                                       (graph_pow_exponent_class), so lf_scalar_set
                                       replans when that class changes */
    union {
        lf_buffer *buffer;          /* NODE_INPUT */
        lf_scalar value;            /* NODE_CONST, in dtype */
        struct {
            double start, step;     /* NODE_IOTA: element i is start + i*step */
        } iota;
        struct {
            uint64_t seed;              /* NODE_RANDOM: the Philox key */
            lf_random_dist dist;        /* its distribution (dtype checked) */
        } random;
        struct {
            view_kind op;               /* which builder made it (labels) */
            int64_t offset;             /* element offset into the input */
            int64_t strides[LF_MAX_DIMS]; /* per output axis, into the input's
                                             dense row-major layout; may be 0
                                             or negative */
            bool remapped;              /* VIEW_PAD: output axis d's coordinate
                                           is graph_remap_coord(remap[d], c,
                                           shift[d], ext[d]) before the stride */
            uint8_t remap[LF_MAX_DIMS]; /* GRAPH_REMAP_* per output axis */
            int64_t shift[LF_MAX_DIMS]; /* the border before the input's data */
            int64_t ext[LF_MAX_DIMS];   /* the input's extent on the axis */
        } view;
        struct {
            lf_fn *fn;                  /* arity == ninputs */
            lf_dtype *etype, *ctype;    /* graph_fn_types for these inputs */
        } map;
        struct {
            lf_reduce_op op;            /* which reduction */
            uint32_t axes;              /* bit d set: input axis d is reduced */
            bool keepdims;              /* reduced axes kept as extent 1 */
        } reduce;
        struct {
            lf_reduce_op op;            /* NODE_SCAN: sum, prod, min or max */
            int axis;                   /* the scanned axis (0..ndim-1) */
            bool exclusive;             /* element i combines 0..i-1 */
        } scan;
        struct {
            int axis;                   /* NODE_GATHER: x's axis idx replaces */
            bool take;                  /* lf_take: idx's axes replace it (the
                                           output is x[:axis] + idx.shape +
                                           x[axis+1:]), else take_along_axis */
        } gather;
        struct {
            int axis;                   /* NODE_SCATTER: dst's axis idx names */
            lf_scatter_op op;           /* how values combine */
            bool nonneg;                /* lf_bincount: a negative index is an error, not
                                           one counted from the end (np.bincount) */
        } scatter;
        struct {
            int axis;                   /* NODE_SORT: the sorted axis (0..ndim-1) */
            int64_t k;                  /* entries kept per row (0..extent):
                                           the node's extent on the axis */
            bool descending;            /* the reverse order (topk largest) */
            bool indices;               /* i64 positions along the axis,
                                           else x's values */
        } sort;
    } u;
};

struct lf_graph {
    lf_ctx *ctx;                  /* owner */
    uint64_t serial;              /* unique in the process, never 0: a node or fn
                                     is g's only if it carries g's serial too, so
                                     one of a freed graph whose address a new
                                     graph reuses is still told apart */
    lf_status status;             /* first error, sticky */
    char errmsg[LF_ERRMSG_CAP];   /* its message */
    lf_node **nodes;              /* all nodes by id */
    int nnodes, capnodes;         /* used and allocated */
    lf_buffer **bound;            /* buffers this graph holds a reference to */
    int nbound, capbound;         /* used and allocated */
    lf_fn *fns;                   /* fns of this graph (list) */
    lf_fn *op_fns[LF_NOPS];       /* cached one-op fns for lf_apply (lazy) */
    lf_fn *cast_fns[LF_NDTYPES];  /* cached cast fns for lf_cast (lazy) */
    graph_ufn *ufns;              /* user functions (lf_fn_c), freed with the graph */
    struct graph_extern *externs; /* lf_extern records, freed with the graph */
    struct lf_graph *prev, *next; /* ctx->graphs list */
    int version;                  /* bumped when a planning input changes
                                     (lf_node_materialize) */
    graph_program programs[GRAPH_PROGRAMS]; /* backends' cached executables
                                     (backends/cpu, backends/cuda), one per output
                                     set evaluated, most recently used first;
                                     empty entries (p NULL) at the end */
};

/* The program cache of a graph (lf_graph.programs): a backend looks for its
 * own program among g->programs[i] (free == its free function, then its own
 * match on the outputs), and on a hit calls graph_program_use(g, i), which
 * moves it to the front and returns it; a new program goes in with
 * graph_program_put, which frees the least recently used one when the cache
 * is full. graph_programs_clear frees them all (graph_destroy does). */
void *graph_program_use(lf_graph *g, int i);
void graph_program_put(lf_graph *g, void *p, void (*free_fn)(void *));
void graph_programs_clear(lf_graph *g);

/* Records the graph's first error (later ones are dropped) and the context's
 * last message. Returns st. */
lf_status graph_fail(lf_graph *g, lf_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* True when node n (or fn: the same two fields) was made by graph g: the
 * owner pointer and the graph's serial both match. */
#define graph_owns(g, x) ((x)->graph == (g) && (x)->serial == (g)->serial)
/* Checks that a builder may proceed: g non-NULL and not failed, every node
 * non-NULL and of graph g (graph_owns). Records an error naming `what`
 * otherwise. */
bool graph_check_args(lf_graph *g, const char *what, int n, lf_node *const *nodes);
/* Checks lf_eval's arguments: the graph has no sticky error (else its
 * message is copied to the context and its status returned), and every
 * output node has a buffer of its graph's context with its dtype and shape,
 * and no buffer is given for two outputs. */
lf_status graph_check_outputs(lf_graph *g, int n, lf_node *const *outs, lf_buffer *const *dsts);
/* Frees every graph resource (used by lf_graph_free and lf_ctx_destroy). */
void graph_destroy(lf_graph *g);

/* ---- gather: shared by every evaluator (graph.c) ----
 * Gather node n's geometry, for a position of n's output (row-major over
 * n's shape): idx's element is sum pos[d] * idx_strides[d], x's element is
 * sum pos[d] * x_strides[d] (0 on the axis and on broadcast axes; for a
 * take, 0 on idx's axes) plus the index (wrapped) times x_axis_stride;
 * x_extent is x's extent on the axis. */
typedef struct graph_gather_geom {
    int64_t idx_strides[LF_MAX_DIMS];
    int64_t x_strides[LF_MAX_DIMS];
    int64_t x_axis_stride;
    int64_t x_extent;
} graph_gather_geom;
/* Makes gather node (graph.c; lf_gather or lf_take checked the arguments;
 * take: lf_take's geometry). */
lf_node *graph_new_gather(lf_graph *g, lf_node *x, int axis, lf_node *idx, int ndim, const int64_t *shape,
                          bool take);
void graph_gather_geom_of(const lf_node *n, graph_gather_geom *gm);
/* The index v wrapped as NumPy does (v < 0 counts from the end) into
 * 0..extent-1, or -1 when it is out of range. */
static inline int64_t graph_gather_wrap(int64_t v, int64_t extent) {
    if (v < 0) v += extent;
    return v >= 0 && v < extent ? v : -1;
}
/* The first (lowest row-major position) out-of-range index of gather n
 * given idx's dense values: records "gather n<ID>: index V out of range for
 * axis A of size N at position [..]" on g with LF_ERR_INDEX (graph_error on
 * g's context) and returns LF_ERR_INDEX, or LF_OK when all are in range. */
lf_status graph_gather_check(const lf_node *n, const void *idx);
/* The reference evaluation of gather n from dense x and idx into out
 * (graph_gather_check first: on an error nothing is written). */
lf_status graph_eval_gather(const lf_node *n, const void *x, const void *idx, void *out);

/* ---- scatter: shared by every evaluator (scatter.c) ----
 * The positions S of scatter node n (shape in ndim/shape), and for a
 * position pos: idx's element sum pos[d] * idx_strides[d], values' sum
 * pos[d] * val_strides[d], the target sum pos[d] * dst_strides[d] (0 on the
 * axis) plus the wrapped index times dst_axis_stride. */
typedef struct graph_scatter_geom {
    int ndim;
    int64_t shape[LF_MAX_DIMS];
    int64_t numel;
    int64_t idx_strides[LF_MAX_DIMS], val_strides[LF_MAX_DIMS], dst_strides[LF_MAX_DIMS];
    int64_t dst_axis_stride, dst_extent;
    int64_t block;                 /* positions per block (the order of lazyfuse.h) */
    int64_t nblocks;               /* ceil(numel / block), 0 when numel is 0 */
} graph_scatter_geom;
void graph_scatter_geom_of(const lf_node *n, graph_scatter_geom *gm);
/* Makes scatter node (graph.c; lf_scatter checked the arguments). */
lf_node *graph_new_scatter(lf_graph *g, lf_scatter_op op, lf_node *dst, int axis, lf_node *idx, lf_node *values);
/* The identity of op in dtype t, and a (+) b in dtype t (lazyfuse.h's order). */
lf_scalar graph_scatter_identity(lf_scatter_op op, lf_dtype t);
lf_scalar graph_scatter_combine(lf_scatter_op op, lf_dtype t, lf_scalar a, lf_scalar b);
/* The reference evaluation from dense dst, idx and values: the index check
 * (LF_ERR_INDEX naming the lowest bad position), then the blocked order.
 * LF_ERR_NOMEM for the partial. */
lf_status graph_eval_scatter(const lf_node *n, const void *dst, const void *idx, const void *values, void *out);

/* ---- sort: shared by every evaluator (sort.c) ----
 * A sort node's rows: x's positions with the axis coordinate 0, in
 * row-major order of the other axes (nrows of them, n = x's extent on the
 * axis); row r's element j is x's dense element row_base(r) + j * x_stride.
 * Its output row r's entry j (j < k) is the node's dense element
 * out_base(r) + j * out_stride, where out_base is row_base computed with
 * the node's own shape. */
typedef struct graph_sort_geom {
    int64_t nrows;                 /* product of the other axes' extents */
    int64_t n;                     /* x's extent on the axis */
    int64_t k;                     /* entries kept per row */
    int64_t x_stride;              /* x's dense stride on the axis */
    int64_t out_stride;            /* the node's dense stride on the axis */
    int64_t inner;                 /* product of the extents after the axis
                                      (x's and the node's: equal) */
} graph_sort_geom;
/* Makes sort node (graph.c; lf_sort, lf_argsort and lf_topk checked the
 * arguments, `what` names the call in an overflow or out-of-memory
 * message): x's shape with extent k on the axis, dtype i64 when indices,
 * else x's. */
lf_node *graph_new_sort(lf_graph *g, const char *what, lf_node *x, int axis, int64_t k, bool descending,
                        bool indices);
void graph_sort_geom_of(const lf_node *n, graph_sort_geom *gm);
/* Dense element of row r's first entry in x (in_row_base) or in the node's
 * output (out_row_base). */
int64_t graph_sort_row_base(const graph_sort_geom *gm, int64_t r, bool out);
/* The sort key of value v of dtype t: an unsigned integer whose numeric
 * order is the order of lazyfuse.h (ascending; descending is ~key): floats
 * by their bits with the sign folded (sign clear: bits | sign bit; sign
 * set: ~bits), -0.0 as +0.0, every NaN as GRAPH_SORT_NAN_KEY32/64 (the
 * canonical quiet NaN's own key, above +inf's and every other key, so a key
 * decodes to a value by bit operations: +0.0 or that NaN where several
 * values share it); integers with the sign bit flipped; bool 0 or 1.
 * 32-bit dtypes and bool give keys below 2^32 (graph_sort_key_wide is
 * false). The generated kernels' key helpers (codegen/emit.c) print the
 * same mapping. */
#define GRAPH_SORT_NAN_KEY32 0xffc00000u
#define GRAPH_SORT_NAN_KEY64 0xfff8000000000000ull
uint64_t graph_sort_key(lf_dtype t, lf_scalar v, bool descending);
static inline bool graph_sort_key_wide(lf_dtype t) { return graph_dtypes[t].size == 8; }
/* The reference evaluation of sort node n from dense x into out (n's dtype,
 * dense): per row a stable sort by graph_sort_key, first k entries. */
lf_status graph_eval_sort(const lf_node *n, const void *x, void *out);

/* ==== extern.c: lf_extern nodes =============================================
 *
 * An extern node is, to every planner and evaluator, an input node (kind
 * NODE_INPUT, no inputs) reading a buffer its graph owns. lf_eval (backends/
 * driver.c, graph_extern_steps) first runs the extern nodes the outputs need,
 * in id order: evaluates each one's inputs (ext->ins: producers fuse up to
 * this boundary) into temporary buffers through eval (the driver's
 * backend_eval on backend be), calls
 * the callback on host copies, and writes its result into the node's
 * buffer; then the outputs are evaluated as usual. */
typedef struct graph_extern {
    char name[64];                  /* the user's name (messages) */
    lf_extern_fn fn;                /* the callback */
    void *user;                     /* its first argument */
    int nin;                        /* 0..LF_MAX_ARGS */
    lf_node *ins[LF_MAX_ARGS];      /* its inputs (lower ids) */
    void (*free_user)(void *user);  /* frees user with the graph (the library's
                                       own extern nodes: lf_fft), or NULL */
    bool direct;                    /* the library's own callback writes every
                                       element and fails only before writing:
                                       on a host backend it writes the node's
                                       buffer itself (no zero-filled copy) */
    struct graph_extern *next;      /* g->externs list */
} graph_extern;

/* Runs the extern nodes outs[0..n) need, in id order, with `eval` (the
 * backend's) for their inputs; sums their statistics into *acc (zeroed
 * first). LF_OK, or the first failure with its message on the context
 * (LF_ERR_EXTERN: a callback failed); no user buffer is written. */
typedef lf_status graph_eval_fn(const graph_backend *be, lf_graph *g, int n, lf_node *const *outs,
                                lf_buffer *const *dsts, lf_eval_stats *stats);
lf_status graph_extern_steps(lf_graph *g, int n, lf_node *const *outs, const graph_backend *be, graph_eval_fn *eval,
                             lf_eval_stats *acc);
/* Frees g's extern records (graph_destroy). */
void graph_externs_destroy(lf_graph *g);

/* ==== dot.c: Graphviz DOT of the graph ===================================== */

/* One node's label: "#id what\ndtype [shape]" (DOT-escaped, "\n" breaks). */
/* How every message names a node: "node 4 (add f32[1000,3])": its id, what
 * made it as the user wrote it (the builder, or the operator of lf_add and
 * the like: "add", "cast", "select", "map", "zipwith", "reduce sum",
 * "slice", "topk", ...), its dtype and shape, and for a map or zipwith of a
 * parsed fn its source in quotes (fn->source: 40 bytes at most, then
 * "..."). Never fails and allocates nothing: at most cap - 1 bytes and a
 * NUL (cap > 0), cut with "..." when longer; GRAPH_NODE_STR_CAP always
 * holds it whole. Returns buf. */
#define GRAPH_NODE_STR_CAP 320
const char *graph_node_str(const lf_node *n, char *buf, size_t cap);
/* Keeps src, made printable and cut, as f's source (graph_node_str). */
void graph_fn_keep_source(lf_fn *f, const char *src);
const char *graph_dot_node_label(const lf_node *n, char *buf, size_t cap);
/* Writes the graph view: nodes the outputs depend on (all when n is 0),
 * edges from inputs, inputs and outputs filled, views dashed. */
lf_status graph_dot_write_graph(lf_graph *g, int n, lf_node *const *outs, FILE *out);

/* ==== contract.c: contractions (lazyfuse.h, "Contractions") ================ */

/* What graph_contraction found: the map whose product is summed and the
 * operands of its fn's result (x * y). */
typedef struct graph_contract {
    const lf_node *map;     /* the reduce's input, a map node */
    int x, y;               /* expression ids of the product's operands in map's fn */
    int axis;               /* the contracted axis (of the map's space) */
    uint32_t x_axes, y_axes; /* axes of the map's space x (y) varies along */
} graph_contract;

/* Whether reduce node r is a contraction (the predicate of lazyfuse.h: a
 * float32 sum over one axis of a float32 product x * y, x or y independent
 * of a kept axis); fills *c when c is not NULL. Every evaluator, the
 * planner and the emitters ask this and nothing else. */
bool graph_contraction(const lf_node *r, graph_contract *c);

/* The fold of a contraction: blocks of LF_CONTRACT_BLOCK fmaf steps in
 * float, each block's partial added into a double, rounded once. */
typedef struct graph_contract_acc {
    double acc;     /* completed blocks, from 0.0 */
    float part;     /* the current block, from +0.0f */
    int n;          /* elements in the current block */
} graph_contract_acc;

void graph_contract_init(graph_contract_acc *a);
void graph_contract_fold(graph_contract_acc *a, float x, float y);
float graph_contract_finish(const graph_contract_acc *a);

/* ==== eval_ref.c: the reference evaluator ================================= */

/* Evaluates outs[0..n) node by node, unfused, into dense host arrays.
 * On success results[i] is a graph_malloc'd array of outs[i]->numel elements
 * (NULL for zero bytes) that the caller frees. On failure nothing is
 * allocated and the graph's context holds the message. */
lf_status graph_eval_reference(lf_graph *g, int n, lf_node *const *outs, void **results);

#endif /* LF_GRAPH_H */
