"""lazyfuse._ffi: the handle on the C library, and errors as Python exceptions.

The package loads the liblazyfuse.so it was built with (installed beside this
file by ``pip install .``; $LAZYFUSE_LIBRARY, a path, overrides it, which the
tests of a build tree use) through cffi's ABI mode: ``ffi.dlopen`` over a cdef
of the part of include/lazyfuse.h the package calls. ABI mode compiles
nothing, at install or at import, so the package needs no C compiler and no
Python headers; the cost (a slower call than API mode's, a cdef to keep in
step with the header) is small against an lf_eval, and the header's ABI rule
(functions only added, structs only grown, sizes passed explicitly with the
``*_sized`` calls) keeps the cdef valid within one soname.

cffi releases the GIL around every call of an ABI-mode function, so lf_eval
(and every other call) lets other Python threads run; tests/test_threads.py
checks it. Callbacks made with ``ffi.callback`` take the GIL back themselves.

What must stay true:
 - the cdef matches include/lazyfuse.h for every declaration in it (struct
   layouts field by field; lf_ctx_options and lf_eval_stats are passed with
   their size to the *_sized calls, so only a prefix must match);
 - ``check(ctx, status, what)`` is the only place a status becomes an
   exception: a subclass of LazyfuseError that is also the built-in class a
   Python user expects, its message lf_errmsg's text.
"""
import os

from cffi import FFI

CDEF = r"""
typedef enum lf_status {
    LF_OK = 0, LF_ERR_NULL, LF_ERR_INVALID, LF_ERR_SHAPE, LF_ERR_AXIS, LF_ERR_RANGE,
    LF_ERR_DTYPE, LF_ERR_OVERFLOW, LF_ERR_ARITY, LF_ERR_PARSE, LF_ERR_NOMEM,
    LF_ERR_BACKEND, LF_ERR_STATE, LF_ERR_INDEX, LF_ERR_COMPILE, LF_ERR_EXTERN
} lf_status;
typedef enum lf_dtype { LF_BOOL = 0, LF_I32, LF_I64, LF_F32, LF_F64, LF_I8, LF_U8, LF_I16, LF_U16, LF_U32,
                        LF_U64, LF_F16, LF_BF16 } lf_dtype;
typedef enum lf_backend {
    LF_BACKEND_AUTO = 0, LF_BACKEND_CPU, LF_BACKEND_CUDA, LF_BACKEND_REFERENCE
} lf_backend;
typedef struct lf_ctx lf_ctx;
typedef struct lf_buffer lf_buffer;
typedef struct lf_graph lf_graph;
typedef struct lf_node lf_node;
typedef struct lf_fn lf_fn;

typedef struct lf_ctx_options {
    size_t struct_size;
    lf_backend backend;
    int threads;
    int fusion;
    const char *cache_dir;
    int compile;
    double compile_timeout;
} lf_ctx_options;

typedef struct lf_eval_stats {
    int kernels;
    size_t bytes_read;
    size_t bytes_written;
    size_t temp_bytes_avoided;
    size_t bytes_materialized;
    double plan_seconds;
    int kernels_compiled;
    int kernels_disk_hits;
    int kernels_memory_hits;
    int compiler_runs;
    bool program_reused;
    double compile_seconds;
    int outputs_in_place;
    size_t bytes_staged;
} lf_eval_stats;

/* DLPack 1.0 (dlpack/dlpack.h) */
typedef struct { int32_t device_type; int32_t device_id; } DLDevice;
typedef struct { uint8_t code; uint8_t bits; uint16_t lanes; } DLDataType;
typedef struct {
    void *data; DLDevice device; int32_t ndim; DLDataType dtype;
    int64_t *shape; int64_t *strides; uint64_t byte_offset;
} DLTensor;
typedef struct DLManagedTensor {
    DLTensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;
typedef struct { uint32_t major; uint32_t minor; } DLPackVersion;
typedef struct DLManagedTensorVersioned {
    DLPackVersion version;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensorVersioned *self);
    uint64_t flags;
    DLTensor dl_tensor;
} DLManagedTensorVersioned;

const char *lf_errmsg(const lf_ctx *ctx);
const char *lf_status_name(lf_status s);
size_t lf_dtype_size(lf_dtype t);
const char *lf_dtype_name(lf_dtype t);
lf_dtype lf_dtype_promote(lf_dtype a, lf_dtype b);

lf_status lf_ctx_options_init_sized(lf_ctx_options *opt, size_t size);
lf_ctx *lf_ctx_new(const lf_ctx_options *opt);
void lf_ctx_destroy(lf_ctx *ctx);
lf_backend lf_ctx_backend(const lf_ctx *ctx);
const char *lf_backend_name(lf_backend b);
lf_status lf_ctx_get_options_sized(const lf_ctx *ctx, lf_ctx_options *out, size_t size);
lf_status lf_ctx_synchronize(lf_ctx *ctx);
lf_status lf_ctx_last_stats_sized(const lf_ctx *ctx, lf_eval_stats *out, size_t size);

lf_buffer *lf_buffer_new(lf_ctx *ctx, lf_dtype t, int ndim, const int64_t *shape);
void lf_buffer_free(lf_buffer *b);
lf_status lf_buffer_write(lf_buffer *b, const void *src, size_t bytes);
lf_status lf_buffer_read(const lf_buffer *b, void *dst, size_t bytes);
lf_buffer *lf_buffer_from_dlpack(lf_ctx *ctx, DLManagedTensor *t);
lf_status lf_buffer_to_dlpack(lf_buffer *b, DLManagedTensor **out);
intptr_t lf_ctx_dlpack_stream(const lf_ctx *ctx);
lf_buffer *lf_buffer_from_dlpack_stream(lf_ctx *ctx, DLManagedTensor *t, intptr_t stream);
lf_status lf_buffer_to_dlpack_stream(lf_buffer *b, intptr_t stream, DLManagedTensor **out);
lf_dtype lf_buffer_dtype(const lf_buffer *b);
int lf_buffer_ndim(const lf_buffer *b);
int64_t lf_buffer_dim(const lf_buffer *b, int axis);
int64_t lf_buffer_numel(const lf_buffer *b);
size_t lf_buffer_bytes(const lf_buffer *b);

lf_graph *lf_graph_new(lf_ctx *ctx);
void lf_graph_free(lf_graph *g);
lf_status lf_graph_status(const lf_graph *g);
const char *lf_graph_errmsg(const lf_graph *g);
lf_dtype lf_node_dtype(const lf_node *n);
int lf_node_ndim(const lf_node *n);
int64_t lf_node_dim(const lf_node *n, int axis);

lf_node *lf_input(lf_graph *g, lf_buffer *b);
lf_node *lf_const(lf_graph *g, lf_dtype t, double value);
lf_status lf_scalar_set(lf_graph *g, lf_node *c, double value);
lf_fn *lf_fn_parse(lf_graph *g, const char *src);
lf_node *lf_zipwith(lf_graph *g, lf_fn *f, int n, lf_node *const *xs);
lf_node *lf_cast(lf_graph *g, lf_node *x, lf_dtype t);
lf_node *lf_reduce(lf_graph *g, int op, lf_node *x, int naxes, const int *axes, bool keepdims);
lf_node *lf_broadcast_to(lf_graph *g, lf_node *x, int ndim, const int64_t *shape);
lf_status lf_eval(lf_graph *g, int n, lf_node *const *outs, lf_buffer *const *dsts);
lf_buffer *lf_buffer_new_like(lf_ctx *ctx, const lf_node *n);
lf_buffer *lf_buffer_wrap(lf_ctx *ctx, lf_dtype t, int ndim, const int64_t *shape,
                          const int64_t *strides, void *data, void (*release)(void *),
                          void *release_arg);
size_t lf_debug_live_bytes(void);
"""

ffi = FFI()
ffi.cdef(CDEF)

# Optional declarations: functions newer than the oldest library this package
# accepts are declared apart, so a library without them still loads.
CDEF_REBIND = "lf_status lf_input_rebind(lf_graph *g, lf_node *input, lf_buffer *b);"
ffi.cdef(CDEF_REBIND)
CDEF_SET_DATA = "lf_status lf_buffer_set_data(lf_buffer *b, void *data);"  # since 1.2.0
ffi.cdef(CDEF_SET_DATA)

LIBRARY_ENV = "LAZYFUSE_LIBRARY"


def library_path():
    """The liblazyfuse.so to load: $LAZYFUSE_LIBRARY, else the one installed
    beside this file."""
    env = os.environ.get(LIBRARY_ENV)
    if env:
        return env
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "liblazyfuse.so")


def _load():
    path = library_path()
    try:
        return ffi.dlopen(path)
    except OSError as e:
        raise ImportError(
            f"lazyfuse: cannot load the C library {path!r} ({e}); install the package with "
            f"'pip install .' from the repository root, or set ${LIBRARY_ENV} to a built "
            f"liblazyfuse.so") from None


lib = _load()

# Releases run from finalizers (Context.defer), that is at any allocation,
# including while cffi itself holds its non-reentrant parser lock (ffi.new or
# ffi.cast of a type string seen for the first time). The first access of a
# lib attribute and the first parse of a type take that lock, so everything a
# release or a DLPack deleter touches is resolved here, once, at import: a
# finalizer then never waits on the lock its own thread holds (it did:
# lib.lf_graph_free resolved inside a collection in the middle of ffi.new
# hung the interpreter).
for _name in ("lf_graph_free", "lf_buffer_free"):
    getattr(lib, _name)
for _type in ("uintptr_t", "DLManagedTensor *", "DLManagedTensorVersioned *"):
    ffi.typeof(_type)

# ---- errors -------------------------------------------------------------------


class LazyfuseError(Exception):
    """Base of every error lazyfuse raises. ``status`` is the C status name
    ("LF_ERR_SHAPE"), or None for errors the Python layer finds itself."""

    def __init__(self, message, status=None):
        super().__init__(message)
        self.status = status


class LazyfuseValueError(LazyfuseError, ValueError):
    """Shapes that do not broadcast, bad axes, dtypes not allowed, bad values."""


class LazyfuseTypeError(LazyfuseError, TypeError):
    """An argument of the wrong type: a dtype lazyfuse does not have, a wrong
    number of arguments, None where a handle is needed."""


class LazyfuseIndexError(LazyfuseError, IndexError):
    """An index out of range (gather, scatter, bincount; slice bounds)."""


class LazyfuseMemoryError(LazyfuseError, MemoryError):
    """An allocation failed."""


class LazyfuseOverflowError(LazyfuseError, OverflowError):
    """A shape product or byte count does not fit."""


class LazyfuseSyntaxError(LazyfuseError, SyntaxError):
    """An expression string that does not parse (the message gives line:column)."""

    def __init__(self, message, status=None):
        LazyfuseError.__init__(self, message, status)
        self.msg = message


class LazyfuseRuntimeError(LazyfuseError, RuntimeError):
    """The backend failed (compiler, driver), or a handle was used with the wrong
    context or graph."""


# status name -> exception class; every lf_status but LF_OK is here.
STATUS_CLASSES = {
    "LF_ERR_NULL": LazyfuseTypeError,
    "LF_ERR_INVALID": LazyfuseValueError,
    "LF_ERR_SHAPE": LazyfuseValueError,
    "LF_ERR_AXIS": LazyfuseValueError,
    "LF_ERR_RANGE": LazyfuseIndexError,
    "LF_ERR_DTYPE": LazyfuseValueError,
    "LF_ERR_OVERFLOW": LazyfuseOverflowError,
    "LF_ERR_ARITY": LazyfuseTypeError,
    "LF_ERR_PARSE": LazyfuseSyntaxError,
    "LF_ERR_NOMEM": LazyfuseMemoryError,
    "LF_ERR_BACKEND": LazyfuseRuntimeError,
    "LF_ERR_STATE": LazyfuseRuntimeError,
    "LF_ERR_INDEX": LazyfuseIndexError,
    "LF_ERR_COMPILE": LazyfuseRuntimeError,
    "LF_ERR_EXTERN": LazyfuseRuntimeError,
}


def status_name(status):
    return ffi.string(lib.lf_status_name(status)).decode()


def error_for(status, message):
    """The exception for a failed status with the given message."""
    name = status_name(status)
    cls = STATUS_CLASSES.get(name, LazyfuseRuntimeError)
    return cls(message or name, name)


def errmsg(ctx_handle):
    """lf_errmsg(ctx) as a str (ctx_handle may be ffi.NULL: the thread's)."""
    return ffi.string(lib.lf_errmsg(ctx_handle)).decode("utf-8", "replace")


def check(ctx_handle, status, what=None):
    """Raises the exception for status (a C lf_status) unless it is LF_OK."""
    if status != lib.LF_OK:
        msg = errmsg(ctx_handle)
        if what:
            msg = f"{what}: {msg}" if msg else what
        raise error_for(status, msg)


def check_graph(graph_handle, what=None):
    """Raises the graph's sticky error, if it has one."""
    st = lib.lf_graph_status(graph_handle)
    if st != lib.LF_OK:
        msg = ffi.string(lib.lf_graph_errmsg(graph_handle)).decode("utf-8", "replace")
        if what:
            msg = f"{what}: {msg}"
        raise error_for(st, msg)


# ---- dtypes -----------------------------------------------------------------------

# lazyfuse dtype <-> NumPy dtype name <-> DLPack (code, bits)
DTYPES = [
    # (lf enum, numpy name, dlpack code, bits)
    (0, "bool", 6, 8),
    (1, "int32", 0, 32),
    (2, "int64", 0, 64),
    (3, "float32", 2, 32),
    (4, "float64", 2, 64),
    (5, "int8", 0, 8),
    (6, "uint8", 1, 8),
    (7, "int16", 0, 16),
    (8, "uint16", 1, 16),
    (9, "uint32", 1, 32),
    (10, "uint64", 1, 64),
    (11, "float16", 2, 16),
    (12, "bfloat16", 4, 16),  # NumPy's name for it once ml_dtypes is imported
]
LF_FROM_NUMPY = {name: lf for lf, name, _, _ in DTYPES}
NUMPY_FROM_LF = {lf: name for lf, name, _, _ in DTYPES}
LF_FROM_DLPACK = {(code, bits): lf for lf, _, code, bits in DTYPES}
DLPACK_CODE_NAMES = {0: "int", 1: "uint", 2: "float", 3: "opaque handle", 4: "bfloat",
                     5: "complex", 6: "bool", 7: "float8_e3m4", 8: "float8_e4m3"}


_lf_dtype_memo = {}


def lf_dtype_of(np_dtype):
    """The lazyfuse dtype of a NumPy dtype, or LazyfuseTypeError naming it."""
    try:
        return _lf_dtype_memo[np_dtype]
    except (KeyError, TypeError):
        pass
    import numpy as np
    dt = np.dtype(np_dtype)
    lf = LF_FROM_NUMPY.get(dt.name)
    if lf is None or not dt.isnative:
        raise LazyfuseTypeError(
            f"lazyfuse has no dtype for {dt} (it has bool, int8, int16, int32, int64, uint8, uint16, uint32, "
            "uint64, float16, bfloat16 (with ml_dtypes), float32, float64)")
    try:
        _lf_dtype_memo[np_dtype] = lf
    except TypeError:
        pass
    return lf


def dtype_name(lf):
    """NumPy's name of a lazyfuse dtype."""
    return NUMPY_FROM_LF[int(lf)]
