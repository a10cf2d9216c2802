"""lazyfuse._array: lazy arrays following the Python Array API standard (2023.12).

An Array is a deferred value: either a materialized Buffer (what asarray()
wraps, or a computed result) or a node of an lf_graph together with the recipe
that made it (a builder and its operand Arrays). Operators and functions build
graph nodes and run nothing; a result is computed when it is needed
(np.asarray(a), float(a), a.__dlpack__(), lazyfuse.compute(a, b, ...)), and
compute() of several results of one graph is one lf_eval, so they fuse.

Graphs. One graph per expression DAG: an operation whose operands are all
materialized starts a new graph; otherwise it builds in the graph of its first
lazy operand. A lazy operand of another graph is rebuilt into that graph from
its recipe (its own graph is left as it is), so combining two graphs never
forces a computation. A materialized operand enters a graph as an lf_input of
its buffer (once per graph). A builder failure makes the C graph fail for good
(errors are sticky there); the graph is then retired, and arrays of it are
rebuilt from their recipes into a fresh graph when next used, so one bad
operation does not spoil other arrays. Most bad arguments are caught in Python
before any C call, with the same exception classes as the core's mapping.

Contexts. An operation runs in the context of its first array operand
(asarray and the creation functions use this thread's default context unless
given device=a Context). An operand of another context (another thread's
default one, say) is computed there and wrapped into this one through DLPack
without a copy.

Scalars are weak (NEP 50, as the C library's literals): a Python scalar takes
the array operand's dtype (a float with an integer or bool array gives
float64, an int with a bool array int64), and becomes an lf_const node, a
run-time parameter of the kernels, so a changed scalar does not recompile.

Loops. A Python loop that builds the same expression each time must cost
lookups, not C calls: an elementwise function on operands whose types,
dtypes and shapes it has accepted before replays the recorded result (_FAST:
no checks again, no C node); every build function is made once per op and
parameters (so its cache keys are made once); a deferred op carries the
structure of its expression tree and its leaves, made from its operands'
(_tree_of), so compute() of one array finds its program with no walk of the
DAG (_tree_key; a tree whose part was computed since takes _structure's walk),
and rebinds only inputs that changed since the program's last run.

What must stay true:
 - a lazy Array keeps every Array its recipe reads alive (and through them
   their buffers and graphs); the C graph holds its own reference to every
   buffer it reads (lf_input), so deleting an input array never frees memory a
   lazy result still needs;
 - every C call on a context's objects runs inside ``ctx.calling()``;
 - an lf_graph is freed (through ctx.defer) only when no Array refers to it;
 - a cached program writes a result into its last result's Buffer (spare)
   only when no Python object but the program refers to that Buffer and it
   was never exported (Buffer.exported): every Array, graph and program that
   reads a buffer holds its Buffer, so nothing can still read the old values.
"""
import builtins
import collections
import itertools
import math
import operator
import sys
import threading
import weakref

from ._buffer import Buffer
from ._context import Context, default_context
from ._ffi import (LazyfuseIndexError, LazyfuseTypeError, LazyfuseValueError, check_graph,
                   dtype_name, ffi, lf_dtype_of, lib, LF_FROM_NUMPY)

ffi.cdef(r"""
lf_node *lf_fill(lf_graph *g, lf_dtype t, double value, int ndim, const int64_t *shape);
lf_node *lf_arange(lf_graph *g, lf_dtype t, double start, double stop, double step);
lf_node *lf_random(lf_graph *g, lf_dtype t, int dist, int ndim, const int64_t *shape, uint64_t seed);
lf_node *lf_gather(lf_graph *g, lf_node *x, int axis, lf_node *idx);
lf_node *lf_take(lf_graph *g, lf_node *x, int axis, lf_node *idx);
lf_node *lf_scatter(lf_graph *g, int op, lf_node *dst, int axis, lf_node *idx, lf_node *values);
lf_node *lf_bincount(lf_graph *g, lf_node *idx, lf_node *weights, int64_t nbins);
lf_node *lf_reshape(lf_graph *g, lf_node *x, int ndim, const int64_t *shape);
lf_node *lf_permute(lf_graph *g, lf_node *x, const int *perm);
lf_node *lf_expand_dims(lf_graph *g, lf_node *x, int axis);
lf_node *lf_slice(lf_graph *g, lf_node *x, int axis, int64_t start, int64_t stop, int64_t step);
lf_node *lf_select(lf_graph *g, lf_node *c, lf_node *a, lf_node *b);
lf_node *lf_apply(lf_graph *g, int op, lf_node *a, lf_node *b, lf_node *c);
const char *lf_op_name(int op);
lf_node *lf_scan_dtype(lf_graph *g, int op, lf_node *x, int axis, bool exclusive, lf_dtype t);
lf_node *lf_sort(lf_graph *g, lf_node *x, int axis, bool descending);
lf_node *lf_argsort(lf_graph *g, lf_node *x, int axis, bool descending);
lf_node *lf_topk(lf_graph *g, lf_node *x, int64_t k, int axis, bool largest);
lf_node *lf_argtopk(lf_graph *g, lf_node *x, int64_t k, int axis, bool largest);
lf_status lf_node_materialize(lf_graph *g, lf_node *n);
""")

import numpy as np  # noqa: E402  (the package needs NumPy for scalars and dtypes)

# lf_op, in lazyfuse_ops.def's order; checked against lf_op_name at import.
_OP_NAMES = ["ADD", "SUB", "MUL", "DIV", "MOD", "POW", "LT", "LE", "GT", "GE", "EQ", "NE", "AND",
             "OR", "NEG", "NOT", "MIN", "MAX", "ABS", "SIGN", "FLOOR", "CEIL", "ROUND", "TRUNC",
             "SQRT", "RSQRT", "CBRT", "EXP", "EXP2", "EXPM1", "LOG", "LOG2", "LOG10", "LOG1P", "SIN",
             "COS", "TAN", "ASIN", "ACOS", "ATAN", "ATAN2", "SINH", "COSH", "TANH", "SIGMOID", "ERF",
             "HYPOT", "FMA", "ISNAN", "ISINF", "WHERE", "FLOORDIV", "BITAND", "BITOR", "BITXOR",
             "BITNOT", "LSHIFT", "RSHIFT", "ASINH", "ACOSH", "ATANH", "FMOD", "SIGNBIT"]
_OP_TEXT = {"ADD": "+", "SUB": "-", "MUL": "*", "DIV": "/", "LT": "<", "EQ": "==", "NEG": "-",
            "EXP": "exp", "WHERE": "where", "FLOORDIV": "//", "BITNOT": "~", "FMOD": "fmod",
            "SIGNBIT": "signbit"}
OP = {name: i for i, name in enumerate(_OP_NAMES)}
for _name, _text in _OP_TEXT.items():
    if ffi.string(lib.lf_op_name(OP[_name])).decode() != _text:
        raise ImportError(f"lazyfuse: the library's op table differs from the package's ({_name})")
RED = {"sum": 0, "prod": 1, "min": 2, "max": 3, "mean": 4, "argmin": 5, "argmax": 6}
LF_BOOL, LF_I32, LF_I64, LF_F32, LF_F64, LF_I8, LF_U8, LF_I16, LF_U16, LF_U32, LF_U64, LF_F16, LF_BF16 = range(13)
_FLOATS = (LF_F32, LF_F64, LF_F16, LF_BF16)
_SIGNED = (LF_I32, LF_I64, LF_I8, LF_I16)
_UNSIGNED = (LF_U8, LF_U16, LF_U32, LF_U64)
LF_NONE = -(2 ** 63)
_ITEMSIZE = {LF_BOOL: 1, LF_I32: 4, LF_I64: 8, LF_F32: 4, LF_F64: 8, LF_I8: 1, LF_U8: 1, LF_I16: 2, LF_U16: 2,
             LF_U32: 4, LF_U64: 8, LF_F16: 2, LF_BF16: 2}
_C_SCALAR = {LF_BOOL: "uint8_t[1]", LF_I32: "int32_t[1]", LF_I64: "int64_t[1]", LF_F32: "float[1]",
             LF_F64: "double[1]", LF_I8: "int8_t[1]", LF_U8: "uint8_t[1]", LF_I16: "int16_t[1]",
             LF_U16: "uint16_t[1]", LF_U32: "uint32_t[1]", LF_U64: "uint64_t[1]",
             LF_F16: "uint16_t[1]", LF_BF16: "uint16_t[1]"}  # lf_dtype -> a C cell for one element of it
# (f16 and bf16 cells hold the bits: _cell_value turns them into a float)
MAX_DIMS = 8
# the cells' C types, made once, and cffi's backend call behind ffi.new (one
# Python frame less for float() and int() of an array)
_C_SCALAR_TYPES = {lf: ffi.typeof(t) for lf, t in _C_SCALAR.items()}
_newp = ffi._backend.newp

# dtypes are NumPy's dtype objects
bool = np.dtype("bool")  # noqa: A001 (the standard's name)
int32 = np.dtype("int32")
int64 = np.dtype("int64")
float32 = np.dtype("float32")
float64 = np.dtype("float64")
int8 = np.dtype("int8")
int16 = np.dtype("int16")
uint8 = np.dtype("uint8")
uint16 = np.dtype("uint16")
uint32 = np.dtype("uint32")
uint64 = np.dtype("uint64")
float16 = np.dtype("float16")
_DTYPES = (bool, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float16, float32, float64)
e, pi, inf, nan, newaxis = math.e, math.pi, math.inf, math.nan, None

_counter_lock = threading.Lock()
_evals = [0]


def eval_count():
    """How many lf_eval calls lazy arrays have made in this process (tests use
    it to check laziness and that compute() fuses)."""
    return _evals[0]


def _shape_error(msg):
    return LazyfuseValueError(msg, "LF_ERR_SHAPE")


def _axis_error(msg):
    return LazyfuseValueError(msg, "LF_ERR_AXIS")


def _dtype_error(msg):
    return LazyfuseTypeError(msg, "LF_ERR_DTYPE")


def _lf(dtype):
    return lf_dtype_of(dtype)


def _np(lf):
    return np.dtype(dtype_name(lf))


def _is_float(lf):
    return lf in _FLOATS


def _is_int(lf):
    return lf in _SIGNED or lf in _UNSIGNED


def _cell_value(lf, v):
    """An element read into a _C_SCALAR cell, as a Python number (f16 and
    bf16 cells hold the bits)."""
    if lf == LF_F16:
        return float(np.frombuffer(int(v).to_bytes(2, "little"), dtype=np.float16)[0])
    if lf == LF_BF16:
        return float(np.frombuffer((int(v) << 16).to_bytes(4, "little"), dtype=np.float32)[0])
    return v


def _promote(a, b):
    """The library's promotion (NumPy 2's, graph/dtype.c)."""
    return lib.lf_dtype_promote(a, b)


def _broadcast_shapes(*shapes):
    nd = builtins.max((len(s) for s in shapes), default=0)
    out = []
    for i in range(nd):
        ext = 1
        for s in shapes:
            j = i - (nd - len(s))
            if j < 0:
                continue
            d = s[j]
            if d != 1:
                if ext != 1 and ext != d:
                    raise _shape_error(f"shapes {', '.join(str(list(s)) for s in shapes)} do not broadcast")
                ext = d
        out.append(ext)
    return tuple(out)


def _norm_axis(axis, ndim, what):
    a = operator.index(axis)
    if not -ndim <= a < ndim:
        raise _axis_error(f"{what}: axis {a} out of range for {ndim} dimensions")
    return a % ndim


def _norm_axes(axis, ndim, what):
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if not isinstance(axis, (tuple, list)) else tuple(axis)
    out = tuple(_norm_axis(a, ndim, what) for a in axes)
    if len(set(out)) != len(out):
        raise _axis_error(f"{what}: repeated axis in {axis}")
    return out


# ---- graphs -------------------------------------------------------------------------


class _Graph:
    """One lf_graph, freed when no Array refers to it."""

    __slots__ = ("ctx", "handle", "failed", "inputs", "rebuilt", "__weakref__")

    def __init__(self, ctx):
        self.ctx = ctx
        with ctx.calling():
            h = lib.lf_graph_new(ctx.handle)
        if h == ffi.NULL:
            ctx.check(lib.LF_ERR_NOMEM, "graph")
        self.handle = h
        self.failed = False
        self.inputs = {}   # id(Buffer) -> (Buffer, node)
        self.rebuilt = {}  # id(Array) -> (Array, node), arrays of other graphs rebuilt here

    def input_of(self, buf):
        got = self.inputs.get(id(buf))
        if got is not None:
            return got[1]
        node = lib.lf_input(self.handle, buf.handle)
        self.checked(node, "input")
        self.inputs[id(buf)] = (buf, node)
        return node

    def checked(self, node, what):
        if node == ffi.NULL:
            self.failed = True
            check_graph(self.handle, what)
            raise LazyfuseValueError(f"{what}: failed")
        return node

    def __del__(self):
        h, self.handle = getattr(self, "handle", None), None
        if h is not None and h != ffi.NULL:
            self.inputs = None
            self.ctx.defer(lambda: lib.lf_graph_free(h))


class _Recipe:
    """How a lazy array was built: build(g, *operand_nodes) -> node, on the
    operands' nodes in graph g (constants and sources have no operands)."""

    __slots__ = ("build", "args", "what", "scalar", "cells", "tree", "leaves")

    def __init__(self, build, args, what, scalar=None):
        self.build, self.args, self.what, self.scalar = build, args, what, scalar
        self.tree = None    # the structure of the expression tree under it (see _tree_of), or None
        self.leaves = None  # its leaves (materialized and scalar Arrays) in depth-first order
        self.cells = None  # build's closure frozen for the program cache's key (made by _structure)


class Array:
    """A lazy lazyfuse array (Python Array API standard). Immutable."""

    __slots__ = ("_ctx", "_buf", "_graph", "_node", "_recipe", "_dtype", "_shape", "_contig", "__weakref__")
    __array_priority__ = 100

    def __init__(self):
        raise TypeError("lazyfuse.Array is made by lazyfuse.asarray and the other functions")

    @classmethod
    def _from_buffer(cls, buf, contiguous=True):
        a = object.__new__(cls)
        a._contig = contiguous  # C-contiguous (compute() may then rebind a cached graph to it)
        a._ctx, a._buf, a._graph, a._node, a._recipe = buf.ctx, buf, None, None, None
        a._dtype, a._shape = buf.lf_dtype, tuple(buf.shape)
        return a

    # ---- properties ---------------------------------------------------------
    @property
    def dtype(self):
        return _np(self._dtype)

    @property
    def shape(self):
        return self._shape

    @property
    def ndim(self):
        return len(self._shape)

    @property
    def size(self):
        return math.prod(self._shape)

    @property
    def device(self):
        return self._ctx

    @property
    def T(self):
        if self.ndim != 2:
            raise _shape_error(f"T needs a 2-d array, got {self.ndim}-d (use permute_dims or mT)")
        return permute_dims(self, (1, 0))

    @property
    def mT(self):
        return matrix_transpose(self)

    @property
    def is_lazy(self):
        """True while the value has not been computed."""
        return self._buf is None

    def to_device(self, device, /, *, stream=None):
        if device is not self._ctx:
            raise NotImplementedError("to_device: moving arrays between lazyfuse contexts")
        return self

    def __array_namespace__(self, *, api_version=None):
        if api_version not in (None, "2023.12", "2022.12", "2021.12"):
            raise ValueError(f"lazyfuse follows the Array API 2023.12, not {api_version}")
        import lazyfuse
        return lazyfuse

    def __repr__(self):
        state = "lazy" if self._buf is None else "computed"
        return f"<lazyfuse.Array {self.dtype}{list(self._shape)} {state}>"

    def __len__(self):
        if not self._shape:
            raise TypeError("len() of a 0-d array")
        return self._shape[0]

    # ---- node in a graph ----------------------------------------------------
    def _node_in(self, g):
        if self._buf is not None:
            return g.input_of(self._buf)
        if self._graph is g and not g.failed:
            return self._node
        got = g.rebuilt.get(id(self))
        if got is not None:
            return got[1]
        r = self._recipe
        nodes = [a._node_in(g) for a in r.args]
        node = g.checked(r.build(g, *nodes), r.what)
        g.rebuilt[id(self)] = (self, node)
        return node

    def _live_graph(self):
        """This lazy array's graph: built into a fresh one if it was deferred
        (made without a graph, see _lazy) or its graph failed."""
        if self._graph is None or self._graph.failed:
            g = _Graph(self._ctx)
            with self._ctx.calling():
                node = self._node_in(g)
            self._graph, self._node = g, node
        return self._graph

    # ---- results -------------------------------------------------------------
    def _buffer(self):
        if self._buf is None:
            compute(self)
        return self._buf

    def __array__(self, dtype=None, copy=None):
        buf = self._buffer()
        if buf.__dlpack_device__()[0] != 1:  # device memory: NumPy gets a host copy
            if copy is False:
                raise ValueError("__array__: the array is in device memory; NumPy needs a copy")
            arr = buf.to_numpy_copy()
        elif copy:
            arr = buf.to_numpy().copy()
        else:
            arr = buf.to_numpy()
            arr.flags.writeable = False
        if dtype is not None and np.dtype(dtype) != arr.dtype:
            if copy is False:
                raise ValueError("__array__: a dtype change needs a copy")
            arr = arr.astype(dtype)
        return arr

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        return self._buffer().__dlpack__(stream=stream, max_version=max_version,
                                         dl_device=dl_device, copy=copy)

    def __dlpack_device__(self):
        return self._buffer().__dlpack_device__() if self._buf is not None else \
            ((2, 0) if self._ctx.backend == "cuda" else (1, 0))

    def _scalar(self, kind):
        if self._shape != ():
            if self.size != 1:
                raise TypeError(f"{kind.__name__}() needs a 0-d array, got shape {self._shape}")
        # one element: lf_buffer_read into a C scalar (no DLPack export, no NumPy array)
        cell = _newp(_C_SCALAR_TYPES[self._dtype], None)
        if self._buf is None and _run_cached(self._ctx, [self], cell):
            return kind(_cell_value(self._dtype, cell[0]))  # computed and read under one hold of the context
        buf = self._buffer()
        with self._ctx.calling():
            self._ctx.check(lib.lf_buffer_read(buf.handle, cell, _ITEMSIZE[self._dtype]), "read")
        return kind(_cell_value(self._dtype, cell[0]))

    def __float__(self):
        return self._scalar(float)

    def __int__(self):
        if _is_float(self._dtype):
            v = self._scalar(float)
            if math.isnan(v) or math.isinf(v):
                raise ValueError(f"cannot convert {v} to int")
            return int(v)
        return self._scalar(int)

    def __index__(self):
        if not _is_int(self._dtype):
            raise TypeError(f"only integer arrays are indices, not {self.dtype}")
        return self._scalar(int)

    def __bool__(self):
        return builtins.bool(self._scalar(float) if _is_float(self._dtype) else self._scalar(int))

    def __complex__(self):
        return complex(self._scalar(float))

    def tolist(self):
        return np.asarray(self).tolist()

    # ---- operators -------------------------------------------------------------
    def __add__(self, o): return add(self, o)
    def __radd__(self, o): return add(o, self)
    def __sub__(self, o): return subtract(self, o)
    def __rsub__(self, o): return subtract(o, self)
    def __mul__(self, o): return multiply(self, o)
    def __rmul__(self, o): return multiply(o, self)
    def __truediv__(self, o): return divide(self, o)
    def __rtruediv__(self, o): return divide(o, self)
    def __floordiv__(self, o): return floor_divide(self, o)
    def __rfloordiv__(self, o): return floor_divide(o, self)
    def __mod__(self, o): return remainder(self, o)
    def __rmod__(self, o): return remainder(o, self)
    def __pow__(self, o): return pow(self, o)
    def __rpow__(self, o): return pow(o, self)
    def __matmul__(self, o): return matmul(self, o)
    def __rmatmul__(self, o): return matmul(o, self)
    def __and__(self, o): return bitwise_and(self, o)
    def __rand__(self, o): return bitwise_and(o, self)
    def __or__(self, o): return bitwise_or(self, o)
    def __ror__(self, o): return bitwise_or(o, self)
    def __xor__(self, o): return bitwise_xor(self, o)
    def __rxor__(self, o): return bitwise_xor(o, self)
    def __lshift__(self, o): return bitwise_left_shift(self, o)
    def __rlshift__(self, o): return bitwise_left_shift(o, self)
    def __rshift__(self, o): return bitwise_right_shift(self, o)
    def __rrshift__(self, o): return bitwise_right_shift(o, self)
    def __lt__(self, o): return less(self, o)
    def __le__(self, o): return less_equal(self, o)
    def __gt__(self, o): return greater(self, o)
    def __ge__(self, o): return greater_equal(self, o)
    def __eq__(self, o): return equal(self, o)  # noqa: D105
    def __ne__(self, o): return not_equal(self, o)
    def __neg__(self): return negative(self)
    def __pos__(self): return positive(self)
    def __abs__(self): return abs(self)
    def __invert__(self): return bitwise_invert(self)
    __hash__ = None

    def __setitem__(self, key, value):
        raise NotImplementedError("__setitem__: lazyfuse arrays are immutable (no in-place update)")

    def __getitem__(self, key):
        return _getitem(self, key)

    def __iter__(self):
        if not self._shape:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(self._shape[0]))

    def astype(self, dtype, copy=True):
        return astype(self, dtype, copy=copy)


# ---- building nodes ------------------------------------------------------------------


# (build's code, its closure frozen, each operand's dtype and shape) -> the
# (dtype, shape) that build gave in C: an operation seen before with operands
# of those dtypes and shapes is made without a C call (see _lazy)
_TYPES = {}
_TYPES_MAX = 4096


def _op_cells(build):
    """build's closure frozen (the values it captured: op code, axes, ...), made
    once per build function and kept on it; raises _NotCacheable or ValueError
    for a closure that cannot be a key."""
    try:
        return build._lf_cells
    except AttributeError:
        pass
    cells = tuple(_freeze(c.cell_contents) for c in (build.__closure__ or ()))
    build._lf_cells = cells
    # the program cache's key names the build by a small int (hashing code
    # objects at every lookup costs more than the rest of the key). Tokens are
    # never reused: after the table is emptied an equal build gets a new one
    # (a cache miss, never a wrong hit).
    key = (build.__code__, cells)
    token = _BUILD_TOKENS.get(key)
    if token is None:
        if len(_BUILD_TOKENS) >= 65536:
            _BUILD_TOKENS.clear()
        token = _BUILD_TOKENS[key] = next(_next_token)
    build._lf_token = token
    return cells


_BUILD_TOKENS = {}  # (build's code, its frozen closure) -> the int the program cache's keys use
_next_token = itertools.count()


def _type_key(build, args):
    try:
        cells = _op_cells(build)
    except (_NotCacheable, ValueError):
        return None, None
    return (build.__code__, cells, tuple([(a._dtype, a._shape) for a in args])), cells


def _lazy(ctx, build, args, what, graph=None, scalar=None, typed=None):
    """A new lazy Array: build(g, *nodes of args) in graph, else the graph of
    the first lazy operand (a new graph when every operand is materialized).

    Deferred: without graph, when the result's (dtype, shape) is known (typed,
    or _TYPES has the same build on operands of the same dtypes and shapes,
    where it succeeded), the Array is made with no graph and no C call; its
    node is built from its recipe when a graph needs it (_node_in,
    _live_graph; compute's program cache builds a DAG once per structure)."""
    tkey = cells = None
    same_ctx = True
    for a in args:
        if a._ctx is not ctx:
            same_ctx = False
    if graph is None and same_ctx:
        if typed is None and scalar is None:
            tkey, cells = _type_key(build, args)
            typed = _TYPES.get(tkey) if tkey is not None else None
        if typed is not None:
            out = object.__new__(Array)
            out._ctx, out._buf, out._graph, out._node = ctx, None, None, None
            out._recipe = r = _Recipe(build, tuple(args), what, scalar)
            r.cells = cells
            out._contig = True
            out._dtype, out._shape = typed
            if cells is not None:
                r.tree, r.leaves = _tree_of(build, args, typed)
            return out
    g = graph
    for a in args if g is None else ():
        if a._buf is None:
            if a._ctx is not ctx:
                raise LazyfuseValueError(f"{what}: arrays of different contexts")
            g = a._live_graph()
            break
    if g is None:
        g = _Graph(ctx)
    with ctx.calling():
        nodes = [a._node_in(g) for a in args]
        node = g.checked(build(g, *nodes), what)
        out = object.__new__(Array)
        out._ctx, out._buf, out._graph, out._node = ctx, None, g, node
        out._recipe = _Recipe(build, tuple(args), what, scalar)
        out._contig = True
        out._dtype = int(lib.lf_node_dtype(node))
        out._shape = tuple(int(lib.lf_node_dim(node, i)) for i in range(lib.lf_node_ndim(node)))
    if tkey is not None:
        if len(_TYPES) >= _TYPES_MAX:
            _TYPES.clear()
        _TYPES[tkey] = (out._dtype, out._shape)
        out._recipe.cells = cells
    return out


def _ctx_of(*xs):
    """The context an operation on xs runs in: the first array's."""
    for x in xs:
        if isinstance(x, Array):
            return x._ctx
    return default_context()


def _in_ctx(a, ctx):
    """a as an array of ctx: itself, or (an array of another context, such as
    another thread's default one) computed there and wrapped here through
    DLPack without a copy."""
    if a._ctx is ctx:
        return a
    return Array._from_buffer(Buffer.from_dlpack(ctx, a._buffer()))


def _const_build(lf, value):
    return lambda g: lib.lf_const(g.handle, lf, value)


def _const(ctx, lf, value, graph=None):
    value = float(value)
    return _lazy(ctx, _const_build(lf, value), (), "const", graph, value, typed=(lf, ()))


def _is_scalar(x):
    return isinstance(x, (builtins.bool, int, float, np.bool_, np.integer, np.floating)) \
        and not isinstance(x, Array)


def _scalar_dtype(x, other_lf):
    """The dtype a weak Python scalar takes next to an array of other_lf."""
    if isinstance(x, (builtins.bool, np.bool_)):
        return other_lf
    if isinstance(x, (int, np.integer)):
        if other_lf == LF_BOOL:
            return LF_I64
        if other_lf == LF_I32 and not -2 ** 31 <= int(x) < 2 ** 31:
            return LF_I64  # checked by the caller for ops that must not widen
        if other_lf == LF_I64 and not -2 ** 63 <= int(x) < 2 ** 63:
            raise OverflowError(f"Python integer {x} out of bounds for int64")
        return other_lf
    if isinstance(x, (float, np.floating)):
        return other_lf if _is_float(other_lf) else LF_F64
    raise TypeError(f"unsupported operand type {type(x).__name__}")


def _operands(xs, what, exact_int=True):
    """Arrays for the operands xs (Arrays, Python scalars, array-likes)."""
    ctx = _ctx_of(*xs)
    arrays = [_in_ctx(x, ctx) if isinstance(x, Array) else None for x in xs]
    for i, x in enumerate(xs):
        if arrays[i] is None and not _is_scalar(x):
            arrays[i] = asarray(x)
    ref = next((a for a in arrays if a is not None), None)
    if ref is None:  # scalars only: the standard needs an array operand
        raise TypeError(f"{what}: at least one operand must be an array")
    for i, x in enumerate(xs):
        if arrays[i] is None:  # a deferred lf_const: built where the operation is
            lf = _scalar_dtype(x, ref._dtype)
            if exact_int and lf == LF_I64 and ref._dtype == LF_I32 and isinstance(x, (int, np.integer)) \
                    and not isinstance(x, (builtins.bool, np.bool_)):
                raise OverflowError(f"{what}: Python integer {x} out of bounds for int32")
            arrays[i] = _const(ctx, lf, x)
    return ctx, arrays


_APPLY_BUILDS = {}  # (lf_op, arity) -> its build function, made once (so its cache keys are made once)


def _apply_build(code, arity):
    build = _APPLY_BUILDS.get((code, arity))
    if build is None:
        if arity == 1:
            def build(g, a):
                return lib.lf_apply(g.handle, code, a, ffi.NULL, ffi.NULL)
        elif arity == 2:
            def build(g, a, b):
                return lib.lf_apply(g.handle, code, a, b, ffi.NULL)
        else:
            def build(g, a, b, c):
                return lib.lf_apply(g.handle, code, a, b, c)
        _APPLY_BUILDS[(code, arity)] = build
    return build


def _apply(op, what, *xs, exact_int=True, check=None):
    ctx, arrays = _operands(xs, what, exact_int)
    _broadcast_shapes(*(a._shape for a in arrays))
    if check is not None:
        check(*(a._dtype for a in arrays))
    return _lazy(ctx, _apply_build(OP[op], len(arrays)), arrays, what)


# The per-call fast path of the elementwise functions, for loops that build
# the same expression again and again: (function name, the operands' types,
# dtypes and shapes) -> (build, result dtype, result shape, dtype of a scalar
# operand), recorded after the full path accepted those operands (their
# checks, broadcasting and promotion depend on nothing else). Only operands
# whose outcome cannot depend on a value are recorded: arrays of one context,
# and Python floats, or ints next to a float array (an int next to an int
# array has a range to check).
_FAST = {}
_FAST_MAX = 4096


def _fast_sig(name, xs):
    """The _FAST key of operands xs, or None when the fast path does not apply."""
    sig = [name]
    ctx = None
    for x in xs:
        t = type(x)
        if t is Array:
            if ctx is None:
                ctx = x._ctx
            elif x._ctx is not ctx:
                return None, None
            sig.append((x._dtype, x._shape))
        elif t is float:
            sig.append(float)
        elif t is int:
            sig.append(int)
        else:
            return None, None
    if ctx is None:
        return None, None
    if int in sig:
        for x in xs:
            if type(x) is Array and not _is_float(x._dtype):
                return None, None
    return tuple(sig), ctx


def _fast_apply(sig, ctx, xs, hit):
    """The lazy result of a _FAST hit: the same Arrays _apply would make."""
    build, dtype, shape, scalar_lf = hit
    args = []
    for x in xs:
        if type(x) is Array:
            args.append(x)
        else:  # _const's deferred lf_const, made here without its checks
            value = float(x)
            c = object.__new__(Array)
            c._ctx, c._buf, c._graph, c._node = ctx, None, None, None
            c._recipe = _Recipe(_const_build(scalar_lf, value), (), "const", value)
            c._contig = True
            c._dtype, c._shape = scalar_lf, ()
            args.append(c)
    out = object.__new__(Array)
    out._ctx, out._buf, out._graph, out._node = ctx, None, None, None
    out._recipe = r = _Recipe(build, tuple(args), sig[0])
    r.cells = build._lf_cells
    out._contig = True
    out._dtype, out._shape = dtype, shape
    r.tree, r.leaves = _tree_of(build, args, (dtype, shape))
    return out


TREE_LEAVES_MAX = 64  # larger trees (or DAGs that share much) take _structure's walk


def _tree_of(build, args, typed):
    """(tree, leaves) of a deferred op of build on args, made from its
    operands' as the op is made, so that compute() of a tree seen before
    needs no walk of the DAG: tree is a hashable structure (build's token,
    the result's dtype and shape, the operands' trees; a materialized operand
    is ("in", dtype, shape), a scalar ("s", what, dtype)), leaves the
    materialized and scalar Arrays in depth-first order. (None, None) when an
    operand has none (a strided input, a node built in a graph) or the tree
    has more than TREE_LEAVES_MAX leaves."""
    parts = [build._lf_token, typed]
    leaves = ()
    for a in args:
        if a._buf is not None:
            if not a._contig:
                return None, None
            parts.append(("in", a._dtype, a._shape))
            leaves += (a,)
        else:
            r = a._recipe
            if r.scalar is not None:
                parts.append(("s", r.what, a._dtype))
                leaves += (a,)
            elif r.tree is None:
                return None, None
            else:
                parts.append(r.tree)
                leaves += r.leaves
    if len(leaves) > TREE_LEAVES_MAX:
        return None, None
    return tuple(parts), leaves


def _tree_key(a):
    """compute()'s key for a single deferred Array a from its tree (None when
    it has none): the tree and which leaves are the same buffer or scalar and
    of which kind now; with the unique input buffers and scalar values in the
    order _structure gives them (first occurrence depth-first)."""
    r = a._recipe
    if r.tree is None:
        return None, None, None
    seen = {}
    pattern, inputs, scalars = [], [], []
    for leaf in r.leaves:
        b = leaf._buf
        if b is not None:
            q = seen.get(id(b))
            if q is None:
                q = seen[id(b)] = len(seen)
                inputs.append(b)
            pattern.append(q)
        else:
            q = seen.get(id(leaf))
            if q is None:
                q = seen[id(leaf)] = len(seen)
                scalars.append(leaf._recipe.scalar)
            pattern.append(-1 - q)
    return ("tree", r.tree, tuple(pattern)), inputs, scalars


def _record_fast(sig, xs, out):
    """Remembers out's recipe for sig (see _FAST) when it can be replayed."""
    r = out._recipe
    if r is None or out._buf is not None or out._graph is not None or r.cells is None \
            or getattr(r.build, "_lf_cells", None) is None:
        return  # built in a graph (not deferred) or not keyed: nothing to replay
    scalar_lf = None
    for x, a in zip(xs, r.args):
        if type(x) is not Array:
            scalar_lf = a._dtype
        elif a is not x:
            return  # an operand was converted: not a plain replay
    if len(_FAST) >= _FAST_MAX:
        _FAST.clear()
    _FAST[sig] = (r.build, out._dtype, out._shape, scalar_lf)


def _ints_or_bool(what):
    def check(*lfs):
        for lf in lfs:
            if _is_float(lf):
                raise _dtype_error(f"{what}: operands must be integers or bool, got {dtype_name(lf)}")
    return check


def _ints(what):
    def check(*lfs):
        for lf in lfs:
            if not _is_int(lf):
                raise _dtype_error(f"{what}: operands must be integers, got {dtype_name(lf)}")
    return check


def _numeric(what):
    def check(*lfs):
        for lf in lfs:
            if lf == LF_BOOL:
                raise _dtype_error(f"{what}: operands must be numeric, got bool")
    return check


def _unary(op, name, check=None):
    def f(x, /):
        if type(x) is Array:
            sig = (name, x._dtype, x._shape)
            hit = _FAST.get(sig)
            if hit is not None:
                return _fast_apply(sig, x._ctx, (x,), hit)
            out = _apply(op, name, x, check=check)
            _record_fast(sig, (x,), out)
            return out
        return _apply(op, name, x, check=check)
    f.__name__ = name
    f.__doc__ = f"Elementwise {name} (Array API), lazily."
    return f


def _binary(op, name, check=None, exact_int=True):
    def f(x1, x2, /):
        xs = (x1, x2)
        sig, ctx = _fast_sig(name, xs)
        if sig is None:
            return _apply(op, name, x1, x2, check=check, exact_int=exact_int)
        hit = _FAST.get(sig)
        if hit is not None:
            return _fast_apply(sig, ctx, xs, hit)
        out = _apply(op, name, x1, x2, check=check, exact_int=exact_int)
        _record_fast(sig, xs, out)
        return out
    f.__name__ = name
    f.__doc__ = f"Elementwise {name} (Array API), lazily, with broadcasting."
    return f


add = _binary("ADD", "add")
subtract = _binary("SUB", "subtract", _numeric("subtract"))
multiply = _binary("MUL", "multiply")
divide = _binary("DIV", "divide")
floor_divide = _binary("FLOORDIV", "floor_divide", _numeric("floor_divide"))
remainder = _binary("MOD", "remainder", _numeric("remainder"))
pow = _binary("POW", "pow", _numeric("pow"))  # noqa: A001
less = _binary("LT", "less", exact_int=False)
less_equal = _binary("LE", "less_equal", exact_int=False)
greater = _binary("GT", "greater", exact_int=False)
greater_equal = _binary("GE", "greater_equal", exact_int=False)
equal = _binary("EQ", "equal", exact_int=False)
not_equal = _binary("NE", "not_equal", exact_int=False)
minimum = _binary("MIN", "minimum")
maximum = _binary("MAX", "maximum")
atan2 = _binary("ATAN2", "atan2")
hypot = _binary("HYPOT", "hypot")
bitwise_and = _binary("BITAND", "bitwise_and", _ints_or_bool("bitwise_and"))
bitwise_or = _binary("BITOR", "bitwise_or", _ints_or_bool("bitwise_or"))
bitwise_xor = _binary("BITXOR", "bitwise_xor", _ints_or_bool("bitwise_xor"))
bitwise_left_shift = _binary("LSHIFT", "bitwise_left_shift", _ints("bitwise_left_shift"))
bitwise_right_shift = _binary("RSHIFT", "bitwise_right_shift", _ints("bitwise_right_shift"))
bitwise_invert = _unary("BITNOT", "bitwise_invert", _ints_or_bool("bitwise_invert"))
negative = _unary("NEG", "negative", _numeric("negative"))
abs = _unary("ABS", "abs", _numeric("abs"))  # noqa: A001
sign = _unary("SIGN", "sign", _numeric("sign"))
floor = _unary("FLOOR", "floor", _numeric("floor"))
ceil = _unary("CEIL", "ceil", _numeric("ceil"))
round = _unary("ROUND", "round", _numeric("round"))  # noqa: A001
trunc = _unary("TRUNC", "trunc", _numeric("trunc"))
isnan = _unary("ISNAN", "isnan")
isinf = _unary("ISINF", "isinf")
for _n, _op in [("sqrt", "SQRT"), ("exp", "EXP"), ("expm1", "EXPM1"), ("log", "LOG"),
                ("log2", "LOG2"), ("log10", "LOG10"), ("log1p", "LOG1P"), ("sin", "SIN"),
                ("cos", "COS"), ("tan", "TAN"), ("asin", "ASIN"), ("acos", "ACOS"), ("atan", "ATAN"),
                ("sinh", "SINH"), ("cosh", "COSH"), ("tanh", "TANH"), ("asinh", "ASINH"),
                ("acosh", "ACOSH"), ("atanh", "ATANH"),
                # lazyfuse's own, beyond the standard
                ("rsqrt", "RSQRT"), ("cbrt", "CBRT"), ("exp2", "EXP2"), ("sigmoid", "SIGMOID"),
                ("erf", "ERF")]:
    globals()[_n] = _unary(_op, _n)
fmod = _binary("FMOD", "fmod")


def _logical(op, name):
    def f(x1, x2, /):
        ctx, (a, b) = _operands((x1, x2), name)
        return _apply(op, name, astype(a, bool), astype(b, bool))
    f.__name__ = name
    return f


logical_and = _logical("AND", "logical_and")
logical_or = _logical("OR", "logical_or")


def logical_xor(x1, x2, /):
    ctx, (a, b) = _operands((x1, x2), "logical_xor")
    return not_equal(astype(a, bool), astype(b, bool))


def logical_not(x, /):
    return _apply("NOT", "logical_not", x)


def positive(x, /):
    _numeric("positive")(x._dtype)
    return x


def square(x, /):
    return multiply(x, x)


def isfinite(x, /):
    return logical_not(logical_or(isnan(x), isinf(x)))


signbit = _unary("SIGNBIT", "signbit")  # the sign bit itself: -0.0 and -NaN too (lf_signbit)


def logaddexp(x1, x2, /):
    ctx, (a, b) = _operands((x1, x2), "logaddexp")
    m = maximum(a, b)
    d = abs(subtract(a, b))
    # equal infinities: d is NaN, the answer is m
    return where(isnan(d), m, add(m, log1p(exp(negative(d)))))  # noqa: F821


def clip(x, /, min=None, max=None):
    out = x
    if min is not None:
        out = maximum(out, min)
    if max is not None:
        out = minimum(out, max)
    if out is x:
        return x
    return astype(out, x.dtype) if out._dtype != x._dtype else out


def where(condition, x1, x2, /):
    ctx, (c, a, b) = _operands((condition, x1, x2), "where")
    _broadcast_shapes(c._shape, a._shape, b._shape)
    c = astype(c, bool) if c._dtype != LF_BOOL else c
    return _lazy(ctx, lambda g, c, a, b: lib.lf_select(g.handle, c, a, b), (c, a, b), "where")


def astype(x, dtype, /, *, copy=True, device=None):
    lf = _lf(dtype)
    if lf == x._dtype:
        return x  # arrays are immutable: a copy would be the same value
    return _lazy(x._ctx, lambda g, a: lib.lf_cast(g.handle, a, lf), (x,), "astype")


# ---- creation ---------------------------------------------------------------------------


def asarray(obj, /, *, dtype=None, device=None, copy=None):
    """obj as a lazyfuse Array: an Array as it is, anything with __dlpack__
    wrapped in place (no copy), Python scalars and sequences through NumPy."""
    ctx = device if isinstance(device, Context) else default_context()
    if isinstance(obj, Array):
        return astype(obj, dtype) if dtype is not None else obj
    if isinstance(obj, Buffer):
        a = Array._from_buffer(obj)
        return astype(a, dtype) if dtype is not None else a
    if getattr(getattr(obj, "dtype", None), "name", None) == "bfloat16":
        # NumPy does not export ml_dtypes' bfloat16 through DLPack: through
        # float32, which holds every bfloat16 value exactly (a copy)
        a = asarray(np.asarray(obj).astype(np.float32), device=ctx)
        return astype(a, obj.dtype if dtype is None else dtype)
    if copy or not hasattr(obj, "__dlpack__"):
        if isinstance(obj, (builtins.bool, np.bool_)) or (hasattr(obj, "dtype") and np.asarray(obj).dtype == np.bool_):
            arr = np.array(obj, dtype=dtype or "bool", copy=True)
        elif dtype is None:
            arr = np.array(obj, copy=True)
            if arr.dtype.kind == "f" and arr.dtype.name not in LF_FROM_NUMPY:
                arr = arr.astype(np.float64)
            elif arr.dtype.kind in "iu" and arr.dtype.name not in LF_FROM_NUMPY:
                arr = arr.astype(np.int64)
        else:
            arr = np.array(obj, dtype=np.dtype(dtype), copy=True)
        if not arr.flags.c_contiguous:
            arr = np.ascontiguousarray(arr)
        obj = arr
    elif copy is False and dtype is not None:
        if np.dtype(dtype) != np.from_dlpack(obj).dtype:
            raise ValueError("asarray: copy=False with a dtype change")
    buf = Buffer.from_dlpack(ctx, obj)
    flags = getattr(obj, "flags", None)
    a = Array._from_buffer(buf, contiguous=isinstance(obj, np.ndarray) and builtins.bool(flags.c_contiguous))
    if dtype is not None and _lf(dtype) != a._dtype:
        a = astype(a, dtype)
    return a


def from_dlpack(x, /, *, device=None, copy=None):
    if not hasattr(x, "__dlpack__"):
        raise TypeError(f"from_dlpack: {type(x).__name__} has no __dlpack__")
    return asarray(x, device=device, copy=copy)


def _shape_tuple(shape):
    if isinstance(shape, (int, np.integer)):
        shape = (int(shape),)
    shape = tuple(operator.index(s) for s in shape)
    if len(shape) > MAX_DIMS:
        raise _shape_error(f"at most {MAX_DIMS} dimensions, got {len(shape)}")
    if builtins.any(s < 0 for s in shape):
        raise _shape_error(f"negative extent in shape {shape}")
    return shape


def _default_dtype(value):
    if isinstance(value, (builtins.bool, np.bool_)):
        return LF_BOOL
    if isinstance(value, (int, np.integer)):
        return LF_I64
    return LF_F64


def full(shape, fill_value, *, dtype=None, device=None):
    shape = _shape_tuple(shape)
    lf = _lf(dtype) if dtype is not None else _default_dtype(fill_value)
    value = float(fill_value)
    ctx = device if isinstance(device, Context) else default_context()
    dims = list(shape)

    def build(g):
        return lib.lf_fill(g.handle, lf, value, len(dims), ffi.new("int64_t[]", dims or [0]))
    return _lazy(ctx, build, (), "full", scalar=value)


def zeros(shape, *, dtype=None, device=None):
    return full(shape, 0.0, dtype=dtype or float64, device=device)


def ones(shape, *, dtype=None, device=None):
    return full(shape, 1.0, dtype=dtype or float64, device=device)


def empty(shape, *, dtype=None, device=None):
    return zeros(shape, dtype=dtype, device=device)


def full_like(x, /, fill_value, *, dtype=None, device=None):
    return full(x.shape, fill_value, dtype=dtype or x.dtype, device=device or x._ctx)


def zeros_like(x, /, *, dtype=None, device=None):
    return full_like(x, 0, dtype=dtype, device=device)


def ones_like(x, /, *, dtype=None, device=None):
    return full_like(x, 1, dtype=dtype, device=device)


def empty_like(x, /, *, dtype=None, device=None):
    return zeros_like(x, dtype=dtype, device=device)


def arange(start, /, stop=None, step=1, *, dtype=None, device=None):
    if stop is None:
        start, stop = 0, start
    if step == 0:
        raise LazyfuseValueError("arange: step must not be 0", "LF_ERR_INVALID")
    if dtype is None:
        lf = LF_F64 if builtins.any(isinstance(v, (float, np.floating)) for v in (start, stop, step)) else LF_I64
    else:
        lf = _lf(dtype)
    ctx = device if isinstance(device, Context) else default_context()
    s0, s1, st = float(start), float(stop), float(step)
    return _lazy(ctx, lambda g: lib.lf_arange(g.handle, lf, s0, s1, st), (), "arange")


def linspace(start, stop, /, num, *, dtype=None, device=None, endpoint=True):
    num = operator.index(num)
    if num < 0:
        raise LazyfuseValueError("linspace: num must be >= 0")
    lf = _lf(dtype) if dtype is not None else LF_F64
    div = (num - 1) if endpoint else num
    step = (stop - start) / div if div > 0 else 0.0
    i = arange(num, dtype=float64, device=device)
    out = add(multiply(i, step), float(start))
    if endpoint and num > 1:
        out = where(equal(i, num - 1), float(stop), out)
    return astype(out, _np(lf))


def eye(n_rows, n_cols=None, /, *, k=0, dtype=None, device=None):
    n_cols = n_rows if n_cols is None else n_cols
    r = reshape(arange(n_rows, device=device), (n_rows, 1))
    c = reshape(arange(n_cols, device=device), (1, n_cols))
    return astype(equal(subtract(c, r), k), dtype or float64)


def _tri(x, k, upper):
    if x.ndim < 2:
        raise _shape_error("tril/triu need at least 2 dimensions")
    n, m = x.shape[-2:]
    r = reshape(arange(n, dtype=int64, device=x._ctx), (n, 1))
    c = reshape(arange(m, dtype=int64, device=x._ctx), (1, m))
    keep = greater_equal(subtract(c, r), k) if upper else less_equal(subtract(c, r), k)
    return where(keep, x, zeros((), dtype=x.dtype, device=x._ctx))


def tril(x, /, *, k=0):
    return _tri(x, k, False)


def triu(x, /, *, k=0):
    return _tri(x, k, True)


# ---- manipulation ---------------------------------------------------------------------------


def reshape(x, /, shape, *, copy=None):
    shape = tuple(operator.index(s) for s in shape)
    if shape.count(-1) > 1 or builtins.any(s < -1 for s in shape):
        raise _shape_error(f"reshape: bad shape {shape}")
    if len(shape) > MAX_DIMS:
        raise _shape_error(f"reshape: at most {MAX_DIMS} dimensions")
    known = math.prod(s for s in shape if s != -1)
    if -1 in shape:
        if known == 0 or x.size % known:
            raise _shape_error(f"reshape: cannot reshape {list(x.shape)} into {list(shape)}")
        shape = tuple(x.size // known if s == -1 else s for s in shape)
    elif known != x.size:
        raise _shape_error(f"reshape: cannot reshape {list(x.shape)} into {list(shape)}")
    if shape == x.shape:
        return x
    dims = list(shape)
    return _lazy(x._ctx, lambda g, a: lib.lf_reshape(g.handle, a, len(dims), ffi.new("int64_t[]", dims or [0])),
                 (x,), "reshape")


def permute_dims(x, /, axes):
    axes = tuple(_norm_axis(a, x.ndim, "permute_dims") for a in axes)
    if sorted(axes) != list(range(x.ndim)):
        raise _axis_error(f"permute_dims: {axes} is not a permutation of {x.ndim} axes")
    if axes == tuple(range(x.ndim)):
        return x
    perm = list(axes)
    return _lazy(x._ctx, lambda g, a: lib.lf_permute(g.handle, a, ffi.new("int[]", perm)), (x,), "permute_dims")


def matrix_transpose(x, /):
    if x.ndim < 2:
        raise _shape_error("matrix_transpose needs at least 2 dimensions")
    p = list(range(x.ndim))
    p[-1], p[-2] = p[-2], p[-1]
    return permute_dims(x, p)


def expand_dims(x, /, axis=0):
    a = operator.index(axis)
    if not -x.ndim - 1 <= a <= x.ndim:
        raise _axis_error(f"expand_dims: axis {a} out of range for {x.ndim} dimensions")
    if x.ndim >= MAX_DIMS:
        raise _shape_error(f"expand_dims: at most {MAX_DIMS} dimensions")
    return _lazy(x._ctx, lambda g, n: lib.lf_expand_dims(g.handle, n, a), (x,), "expand_dims")


def squeeze(x, /, axis):
    axes = _norm_axes(axis, x.ndim, "squeeze")
    for a in axes:
        if x.shape[a] != 1:
            raise _shape_error(f"squeeze: axis {a} has extent {x.shape[a]}, not 1")
    return reshape(x, tuple(s for i, s in enumerate(x.shape) if i not in axes))


def broadcast_to(x, /, shape):
    shape = _shape_tuple(shape)
    if _broadcast_shapes(x.shape, shape) != shape:
        raise _shape_error(f"broadcast_to: {list(x.shape)} does not broadcast to {list(shape)}")
    if shape == x.shape:
        return x
    dims = list(shape)
    return _lazy(x._ctx, lambda g, a: lib.lf_broadcast_to(g.handle, a, len(dims), ffi.new("int64_t[]", dims or [0])),
                 (x,), "broadcast_to")


def broadcast_arrays(*arrays):
    shape = _broadcast_shapes(*(a.shape for a in arrays))
    return [broadcast_to(a, shape) for a in arrays]


def flip(x, /, *, axis=None):
    key = [slice(None)] * x.ndim
    for a in _norm_axes(axis, x.ndim, "flip"):
        key[a] = slice(None, None, -1)
    return x[tuple(key)]


def _slice(x, axis, start, stop, step):
    return _lazy(x._ctx, lambda g, a: lib.lf_slice(g.handle, a, axis, start, stop, step), (x,), "slice")


def _getitem(x, key):
    if not isinstance(key, tuple):
        key = (key,)
    if builtins.any(isinstance(k, (Array, np.ndarray, list)) or (hasattr(k, "__dlpack__")) for k in key):
        raise NotImplementedError("__getitem__: integer-array and boolean-mask indexing "
                                  "(use lazyfuse.take for an integer index along one axis)")
    n_ell = builtins.sum(1 for k in key if k is Ellipsis)
    if n_ell > 1:
        raise IndexError("an index can only have one ellipsis")
    n_real = builtins.sum(1 for k in key if k is not None and k is not Ellipsis)
    if n_real > x.ndim:
        raise LazyfuseIndexError(f"too many indices: {n_real} for {x.ndim} dimensions", "LF_ERR_RANGE")
    if n_ell:
        i = key.index(Ellipsis)
        key = key[:i] + (slice(None),) * (x.ndim - n_real) + key[i + 1:]
    else:
        key = key + (slice(None),) * (x.ndim - n_real)
    out = x
    axis = 0
    final_shape = []
    for k in key:
        if k is None:
            final_shape.append(1)
            continue
        n = x.shape[axis]
        if isinstance(k, slice):
            start, stop, step = k.indices(n)
            r = range(start, stop, step)
            if len(r) == 0:
                out = _slice(out, axis, 0, 0, 1)
            elif r != range(n):
                last = r[-1]
                end = last + 1 if step > 0 else (last - 1 if last - 1 >= 0 else LF_NONE)
                out = _slice(out, axis, r[0], end, step)
            final_shape.append(len(r))
        else:
            try:
                i = operator.index(k)
            except TypeError:
                raise IndexError(f"only integers, slices, ..., None are valid indices, not {type(k).__name__}") \
                    from None
            if not -n <= i < n:
                raise LazyfuseIndexError(f"index {i} out of range for axis {axis} of size {n}", "LF_ERR_RANGE")
            i %= n
            out = _slice(out, axis, i, i + 1, 1)
        axis += 1
    final_shape = tuple(final_shape)
    if out.shape != final_shape:
        out = reshape(out, final_shape)
    return out


# ---- reductions ------------------------------------------------------------------------


# The per-call fast path of the reductions (as _FAST for the elementwise
# functions): (name, dtype, shape, axis, keepdims) -> (build, result dtype and
# shape), recorded when the full path made a deferred reduction of them (its
# checks depend on nothing else)
_RFAST = {}


def _reduce(name, x, axis, keepdims):
    if type(x) is Array:
        try:
            sig = (name, x._dtype, x._shape, axis, keepdims)
            hit = _RFAST.get(sig)
        except TypeError:  # an axis list: not a key
            sig = hit = None
        if hit is not None:
            build, typed = hit
            out = object.__new__(Array)
            out._ctx, out._buf, out._graph, out._node = x._ctx, None, None, None
            out._recipe = r = _Recipe(build, (x,), name)
            r.cells = build._lf_cells
            out._contig = True
            out._dtype, out._shape = typed
            r.tree, r.leaves = _tree_of(build, (x,), typed)
            return out
        out = _reduce_full(name, x, axis, keepdims)
        r = out._recipe
        if sig is not None and out is not x and out._graph is None and out._buf is None and r is not None \
                and r.args == (x,) and r.cells is not None and r.tree is not None and r.what == name:
            if len(_RFAST) >= _FAST_MAX:
                _RFAST.clear()
            _RFAST[sig] = (r.build, (out._dtype, out._shape))
        return out
    return _reduce_full(name, x, axis, keepdims)


def _reduce_full(name, x, axis, keepdims):
    if not isinstance(x, Array):
        x = asarray(x)
    axes = _norm_axes(axis, x.ndim, name)
    op = RED[name]
    if name in ("min", "max", "argmin", "argmax"):
        if builtins.any(x.shape[a] == 0 for a in axes) or (not axes and x.size == 0):
            raise _shape_error(f"{name}: reduction over a zero-size axis (no identity)")
    if not axes and x.ndim > 0:
        return x if name not in ("argmin", "argmax") else zeros(x.shape, dtype=int64, device=x._ctx)
    if x.ndim == 0:
        if name in ("argmin", "argmax"):
            return zeros((), dtype=int64, device=x._ctx)
        if name in ("sum", "prod") and x._dtype in (LF_BOOL, LF_I32):
            return astype(x, int64)
        if name == "mean" and not _is_float(x._dtype):
            return astype(x, float64)
        return x
    build = _REDUCE_BUILDS.get((op, axes, keepdims))
    if build is None:
        build = _reduce_build(op, list(axes), keepdims)
        if len(_REDUCE_BUILDS) < 4096:
            _REDUCE_BUILDS[(op, axes, keepdims)] = build
    return _lazy(x._ctx, build, (x,), name)


_REDUCE_BUILDS = {}  # (lf_reduce_op, axes, keepdims) -> its build function, made once


def _reduce_build(op, ax, keepdims):
    return lambda g, a: lib.lf_reduce(g.handle, op, a, len(ax), ffi.new("int[]", ax), keepdims)


def _in_dtype(name, x, axis, dtype, keepdims):
    """sum / prod: without dtype, integers in the default integer dtype
    (int64) and floats in their own (what lf_reduce gives, as the standard
    says); with dtype, the operand cast to it and the result in it (an
    integer sum accumulates in int64 and is cast back: the same value
    modulo 2^32 as an int32 accumulation)."""
    if dtype is None:
        return _reduce(name, x, axis, keepdims)
    if not isinstance(x, Array):
        x = asarray(x)
    lf = _lf(dtype)
    r = _reduce(name, astype(x, _np(lf)) if x._dtype != lf else x, axis, keepdims)
    return r if r._dtype == lf else astype(r, _np(lf))


def sum(x, /, *, axis=None, dtype=None, keepdims=False):  # noqa: A001
    return _in_dtype("sum", x, axis, dtype, keepdims)


def prod(x, /, *, axis=None, dtype=None, keepdims=False):
    return _in_dtype("prod", x, axis, dtype, keepdims)


def min(x, /, *, axis=None, keepdims=False):  # noqa: A001
    return _reduce("min", x, axis, keepdims)


def max(x, /, *, axis=None, keepdims=False):  # noqa: A001
    return _reduce("max", x, axis, keepdims)


def mean(x, /, *, axis=None, keepdims=False):
    return _reduce("mean", x, axis, keepdims)


def var(x, /, *, axis=None, correction=0.0, keepdims=False):
    axes = _norm_axes(axis, x.ndim, "var")
    n = math.prod(x.shape[a] for a in axes)
    m = mean(x, axis=axes, keepdims=True) if axes else x
    d = subtract(x, m)
    s = sum(multiply(d, d), axis=axes, keepdims=keepdims) if axes else multiply(d, d)
    if not _is_float(s._dtype):
        s = astype(s, float64)
    denom = n - correction
    return divide(s, float(denom)) if denom > 0 else multiply(s, math.nan)


def std(x, /, *, axis=None, correction=0.0, keepdims=False):
    return sqrt(var(x, axis=axis, correction=correction, keepdims=keepdims))  # noqa: F821


def _argreduce(name, x, axis, keepdims):
    if axis is not None and x.ndim > 0:
        axis = _norm_axis(axis, x.ndim, name)
    r = _reduce(name, x, axis, keepdims)
    if keepdims and axis is None and x.ndim > 0:
        return reshape(r, (1,) * x.ndim)
    return r


def argmin(x, /, *, axis=None, keepdims=False):
    return _argreduce("argmin", x, axis, keepdims)


def argmax(x, /, *, axis=None, keepdims=False):
    return _argreduce("argmax", x, axis, keepdims)


def any(x, /, *, axis=None, keepdims=False):  # noqa: A001
    b = astype(x, bool) if x._dtype != LF_BOOL else x
    return greater(sum(b, axis=axis, keepdims=keepdims), 0)


def all(x, /, *, axis=None, keepdims=False):  # noqa: A001
    b = astype(x, bool) if x._dtype != LF_BOOL else x
    return equal(sum(logical_not(b), axis=axis, keepdims=keepdims), 0)


def cumulative_sum(x, /, *, axis=None, dtype=None, include_initial=False):
    if axis is None:
        if x.ndim > 1:
            raise _axis_error("cumulative_sum: axis is required for arrays of more than one dimension")
        axis = 0
    if x.ndim == 0:
        raise _axis_error("cumulative_sum: a 0-d array has no axis")
    axis = _norm_axis(axis, x.ndim, "cumulative_sum")
    if dtype is not None:
        lf = _lf(dtype)
    else:
        lf = LF_I64 if not _is_float(x._dtype) else x._dtype
    r = _lazy(x._ctx, lambda g, a: lib.lf_scan_dtype(g.handle, RED["sum"], a, axis, False, lf), (x,),
              "cumulative_sum")
    if include_initial:
        shape = list(x.shape)
        shape[axis] += 1
        dst = zeros(tuple(shape), dtype=_np(lf), device=x._ctx)
        ishape = [1] * x.ndim
        ishape[axis] = x.shape[axis]
        idx = reshape(arange(1, x.shape[axis] + 1, dtype=int64, device=x._ctx), tuple(ishape))
        r = _lazy(x._ctx, lambda g, d, i, v: lib.lf_scatter(g.handle, 0, d, axis, i, v), (dst, idx, r),
                  "cumulative_sum")
    return r


# ---- indexing, sorting, linear algebra -------------------------------------------------------


def _index_array(indices, ctx, what):
    if ctx is None:
        ctx = indices._ctx if isinstance(indices, Array) else default_context()
    idx = _in_ctx(indices, ctx) if isinstance(indices, Array) else asarray(indices, device=ctx)
    if idx._dtype not in (LF_I32, LF_I64):
        raise _dtype_error(f"{what}: indices must be int32 or int64, got {idx.dtype}")
    return idx


def take(x, indices, /, *, axis=None):
    if axis is None:
        if x.ndim != 1:
            raise _axis_error("take: axis is required for arrays of more than one dimension")
        axis = 0
    axis = _norm_axis(axis, x.ndim, "take")
    idx = _index_array(indices, x._ctx, "take")
    return _lazy(x._ctx, lambda g, a, i: lib.lf_take(g.handle, a, axis, i), (x, idx), "take")


def take_along_axis(x, indices, /, *, axis=-1):
    axis = _norm_axis(axis, x.ndim, "take_along_axis")
    idx = _index_array(indices, x._ctx, "take_along_axis")
    if idx.ndim != x.ndim:
        raise _shape_error("take_along_axis: indices need the array's number of dimensions")
    return _lazy(x._ctx, lambda g, a, i: lib.lf_gather(g.handle, a, axis, i), (x, idx), "take_along_axis")


def sort(x, /, *, axis=-1, descending=False, stable=True):
    axis = _norm_axis(axis, x.ndim, "sort")
    d = builtins.bool(descending)
    return _lazy(x._ctx, lambda g, a: lib.lf_sort(g.handle, a, axis, d), (x,), "sort")


def argsort(x, /, *, axis=-1, descending=False, stable=True):
    axis = _norm_axis(axis, x.ndim, "argsort")
    d = builtins.bool(descending)
    return _lazy(x._ctx, lambda g, a: lib.lf_argsort(g.handle, a, axis, d), (x,), "argsort")


def topk(x, k, /, *, axis=-1, largest=True):
    """lazyfuse's own: (values, indices) of the k largest (or smallest)
    elements along axis, in order; ties keep the lower index first."""
    axis = _norm_axis(axis, x.ndim, "topk")
    k = operator.index(k)
    if not 0 <= k <= x.shape[axis]:
        raise _shape_error(f"topk: k = {k} out of range 0..{x.shape[axis]} for axis {axis} of x {list(x.shape)}")
    lg = builtins.bool(largest)
    v = _lazy(x._ctx, lambda g, a: lib.lf_topk(g.handle, a, k, axis, lg), (x,), "topk")
    i = _lazy(x._ctx, lambda g, a: lib.lf_argtopk(g.handle, a, k, axis, lg), (x,), "argtopk")
    return v, i


def bincount(x, /, weights=None, *, minlength=None):
    """lazyfuse's own: counts (int64) or sums of weights per value 0..nbins-1.
    nbins is minlength, or max(x)+1 (which computes max(x) first)."""
    idx = _index_array(x, None, "bincount")
    if minlength is None:
        nbins = 0 if idx.size == 0 else builtins.max(int(max(idx)) + 1, 0)
    else:
        nbins = operator.index(minlength)
        if nbins < 0:
            raise _shape_error("bincount: minlength must be >= 0")
    if weights is None:
        return _lazy(idx._ctx, lambda g, i: lib.lf_bincount(g.handle, i, ffi.NULL, nbins), (idx,), "bincount")
    ctx, (_, w) = _operands((idx, weights), "bincount")
    return _lazy(idx._ctx, lambda g, i, wn: lib.lf_bincount(g.handle, i, wn, nbins), (idx, w), "bincount")


_SCATTER = {"set": 0, "add": 1, "min": 2, "max": 3, "prod": 4}


def scatter(dst, indices, values, /, *, axis=0, op="set"):
    """lazyfuse's own: a new array, dst with values combined in at positions
    indices along axis (put_along_axis for "set", np.add.at for "add", and
    "min", "max", "prod")."""
    if op not in _SCATTER:
        raise LazyfuseValueError(f"scatter: op {op!r} is not one of {', '.join(_SCATTER)}")
    code = _SCATTER[op]
    axis = _norm_axis(axis, dst.ndim, "scatter")
    idx = _index_array(indices, dst._ctx, "scatter")
    v = _operands((dst, values), "scatter")[1][1]
    return _lazy(dst._ctx, lambda g, d, i, vn: lib.lf_scatter(g.handle, code, d, axis, i, vn), (dst, idx, v),
                 "scatter")


_RANDOM = {"uniform": 0, "normal": 1, "bits": 2}


def random(shape, *, seed=0, dist="uniform", dtype=None, device=None):
    """lazyfuse's own: counter-based random numbers (Philox4x32-10), element i
    a pure function of (seed, i): "uniform" in [0, 1), "normal", or "bits"."""
    if dist not in _RANDOM:
        raise LazyfuseValueError(f"random: dist {dist!r} is not one of {', '.join(_RANDOM)}")
    shape = _shape_tuple(shape)
    lf = _lf(dtype) if dtype is not None else (LF_I64 if dist == "bits" else LF_F64)
    if (dist == "bits") != _is_int(lf):
        raise _dtype_error(f"random: {dist} takes {'int32 or int64' if dist == 'bits' else 'float32 or float64'}")
    ctx = device if isinstance(device, Context) else default_context()
    code, dims, s = _RANDOM[dist], list(shape), int(seed) & (2 ** 64 - 1)
    return _lazy(ctx, lambda g: lib.lf_random(g.handle, lf, code, len(dims), ffi.new("int64_t[]", dims or [0]), s),
                 (), "random")


def matmul(x1, x2, /):
    ctx, (a, b) = _operands((x1, x2), "matmul")
    if a.ndim == 0 or b.ndim == 0:
        raise _shape_error("matmul: 0-d operands are not allowed (use *)")
    squeeze_a, squeeze_b = a.ndim == 1, b.ndim == 1
    if squeeze_a:
        a = reshape(a, (1, a.shape[0]))
    if squeeze_b:
        b = reshape(b, (b.shape[0], 1))
    if a.shape[-1] != b.shape[-2]:
        raise _shape_error(f"matmul: contracted extents differ ({a.shape[-1]} and {b.shape[-2]})")
    batch = _broadcast_shapes(a.shape[:-2], b.shape[:-2])
    if len(batch) + 3 > MAX_DIMS:
        raise _shape_error(f"matmul: at most {MAX_DIMS - 3} batch dimensions")
    out_lf = _promote(a._dtype, b._dtype)
    # sum over k of A[..., m, k, None] * B[..., None, k, n]
    prod_ = multiply(expand_dims(a, axis=-1), expand_dims(b, axis=-3))
    r = sum(prod_, axis=-2)
    if r._dtype != out_lf:
        r = astype(r, _np(out_lf))
    if squeeze_a and squeeze_b:
        r = reshape(r, r.shape[:-2])
    elif squeeze_a:
        r = reshape(r, r.shape[:-2] + r.shape[-1:])
    elif squeeze_b:
        r = reshape(r, r.shape[:-1])
    return r


def vecdot(x1, x2, /, *, axis=-1):
    ctx, (a, b) = _operands((x1, x2), "vecdot")
    shape = _broadcast_shapes(a.shape, b.shape)
    ax = _norm_axis(axis, len(shape), "vecdot")
    out_lf = _promote(a._dtype, b._dtype)
    r = sum(multiply(a, b), axis=ax)
    return astype(r, _np(out_lf)) if r._dtype != out_lf else r


# ---- evaluation --------------------------------------------------------------------------


class _NotCacheable(Exception):
    pass


def _freeze(v):
    if isinstance(v, (list, tuple)):
        return tuple(_freeze(x) for x in v)
    if v is None or isinstance(v, (builtins.bool, int, float, str)):
        return v
    raise _NotCacheable


def _structure(roots):
    """The structure of the DAG under roots, for the program cache: a key (ops,
    their parameters, dtypes and shapes, which operand is which, which inputs
    are the same buffer; not the buffers or the scalars' values), the input
    buffers in order, the scalars' values in order, and the arrays in order."""
    pos, key, items, inputs, buf_pos, scalars = {}, [], [], [], {}, []

    def visit(a):
        p = pos.get(id(a))
        if p is not None:
            return p
        if a._buf is not None:
            if not a._contig:
                raise _NotCacheable
            q = buf_pos.get(id(a._buf))
            if q is None:
                q = buf_pos[id(a._buf)] = len(inputs)
                inputs.append(a._buf)
            k = ("in", a._dtype, a._shape, q)
        else:
            r = a._recipe
            if r.scalar is not None:
                k = ("scalar", r.what, a._dtype, a._shape)
                scalars.append(r.scalar)
            else:
                args = tuple([visit(x) for x in r.args])
                cells = r.cells
                if cells is None:
                    cells = r.cells = _op_cells(r.build)
                k = ("op", r.build._lf_token, args, a._dtype, a._shape)
        p = len(key)
        key.append(k)
        items.append(a)
        pos[id(a)] = p
        return p

    try:
        outs = tuple([visit(a) for a in roots])
    finally:
        # visit refers to itself through its closure: without this the cycle
        # keeps items (the DAG's arrays and their buffers) alive until the
        # garbage collector runs
        visit = None
    return (tuple(key), outs), inputs, scalars, items, outs


class _Program:
    """A graph built for one structure, run again on new inputs and scalars."""

    __slots__ = ("graph", "inputs", "bound", "scalars", "values", "outs", "outs_c", "dsts_c", "out_types",
                 "spare")


# A program keeps its last results' Buffers (spare) when they are at most this
# many bytes together: the next compute writes into one again when nothing
# else refers to it (see _reusable), instead of a new lf_buffer and a free
SPARE_BYTES_MAX = 1 << 20


def _unshared(spare, i):
    """spare[i], a program's spare result Buffer, when it can be written again:
    alive, never exported (DLPack, NumPy views) and referred to by no Python
    object but the spare list (every Array, graph or program that reads a
    buffer holds its Buffer); else None."""
    b = spare[i]
    if b is not None and sys.getrefcount(b) <= _ALONE and b.handle is not None and not b.exported:
        return b
    return None


def _refs_alone(spare, i):
    b = spare[i]
    return sys.getrefcount(b)


# what getrefcount says in _unshared of an object only a list holds (the
# count of the frame's own references depends on the interpreter's version)
_ALONE = _refs_alone([object()], 0)


_programs = {}  # id(ctx) -> (weakref to ctx, OrderedDict key -> _Program), for clear_programs
PROGRAM_CACHE_SIZE = 128


def _cache_of(ctx):
    try:
        return ctx._array_programs  # the context's own attribute: no lookup by id on the per-call path
    except AttributeError:
        pass
    got = _programs.get(id(ctx))
    if got is None or got[0]() is not ctx:
        got = (weakref.ref(ctx, lambda _r, i=id(ctx): _programs.pop(i, None)), collections.OrderedDict())
        _programs[id(ctx)] = got
    ctx._array_programs = got[1]
    return got[1]


def clear_programs():
    """Drops every context's cached array programs, and with them the input
    arrays the cached graphs still read (each holds its last call's inputs
    until the next call rebinds them)."""
    for _ref, cache in list(_programs.values()):
        cache.clear()


def _build_program(ctx, items, outs):
    prog = _Program()
    g = _Graph(ctx)
    nodes, prog.inputs, prog.scalars, prog.values = [], [], [], []
    seen, pos_of = {}, {}
    for a in items:
        if a._buf is not None:
            node = seen.get(id(a._buf))
            if node is None:
                node = seen[id(a._buf)] = g.checked(lib.lf_input(g.handle, a._buf.handle), "input")
                prog.inputs.append(node)
        else:
            r = a._recipe
            if r.scalar is not None:
                node = g.checked(r.build(g), r.what)
                prog.scalars.append(node)
                prog.values.append(r.scalar)  # the value the node holds now
            else:
                node = g.checked(r.build(g, *[nodes[p] for p in
                                              (pos_of[id(x)] for x in r.args)]), r.what)
        nodes.append(node)
        pos_of[id(a)] = len(nodes) - 1
    prog.graph = g
    prog.bound = [a._buf for a in items if a._buf is not None]
    prog.bound = list({id(b): b for b in prog.bound}.values())  # each buffer once, in input order
    prog.outs = [nodes[p] for p in outs]
    prog.outs_c = ffi.new("lf_node *[]", prog.outs)
    prog.dsts_c = ffi.new("lf_buffer *[]", len(prog.outs))
    prog.out_types = [(items[p]._dtype, items[p]._shape) for p in outs]
    nbytes = builtins.sum(_ITEMSIZE[t] * math.prod(shape) for t, shape in prog.out_types)
    prog.spare = [None] * len(prog.outs) if nbytes <= SPARE_BYTES_MAX else None
    return prog



def _run_cached(ctx, lst, cell=None):
    """compute() through the context's program cache: True when it ran, False
    when the DAG cannot be cached (then nothing was done). cell: a C scalar
    that gets the first result's single element (float() of a lazy array),
    read under the same hold of the context."""
    try:
        cache = ctx._array_programs
    except AttributeError:
        cache = _cache_of(ctx)
    prog = tkey = None
    if len(lst) == 1:  # a single tree seen before: no walk of the DAG
        tkey, inputs, scalars = _tree_key(lst[0])
        if tkey is not None:
            prog = cache.get(tkey)
    hit = prog is not None
    if not hit:
        try:
            key, inputs_s, scalars_s, items, outs = _structure(lst)
        except (_NotCacheable, RecursionError):
            return False
        if tkey is not None and not (len(inputs_s) == len(inputs) and scalars_s == scalars and builtins.all(
                [b is c for b, c in zip(inputs_s, inputs)])):
            tkey = None  # the DAG's inputs are not its tree's leaves (a part was computed since)
        inputs, scalars = inputs_s, scalars_s
    with ctx.calling():
        if hit:  # found by its tree: one lookup (another thread may have evicted it since: put back)
            if tkey in cache:
                cache.move_to_end(tkey)
            else:
                cache[tkey] = prog
        else:
            prog = cache.get(key)
            if prog is None:
                prog = _build_program(ctx, items, outs)
                cache[key] = prog
                if tkey is not None:
                    cache[tkey] = prog
                while len(cache) > PROGRAM_CACHE_SIZE:
                    cache.popitem(last=False)
                hit = None  # just built: bound to these inputs and scalars
            else:
                if tkey is not None and tkey not in cache:
                    cache[tkey] = prog
                cache.move_to_end(key)
        if hit is not None:
            g = prog.graph
            bound = prog.bound
            for i, buf in enumerate(inputs):
                if bound[i] is not buf:  # a buffer held here cannot have changed under the graph
                    ctx.check(lib.lf_input_rebind(g.handle, prog.inputs[i], buf.handle), "compute")
                    bound[i] = buf
            values = prog.values
            for i, value in enumerate(scalars):
                old = values[i]
                # set only a value that changed (bit for bit: -0.0 is not 0.0; NaN is always set)
                if value != old or (value == 0 and math.copysign(1.0, value) != math.copysign(1.0, old)):
                    st = lib.lf_scalar_set(g.handle, prog.scalars[i], value)
                    if st:
                        values[i] = math.nan  # unknown now: set again next time
                        ctx.check(st, "compute")
                    values[i] = value
        g = prog.graph
        bufs = []
        dsts = prog.dsts_c
        spare = prog.spare
        for i, node in enumerate(prog.outs):
            b = _unshared(spare, i) if spare is not None else None
            if b is None:
                h = lib.lf_buffer_new_like(ctx.handle, node)
                if h == ffi.NULL:
                    ctx.check(lib.LF_ERR_NOMEM, "compute")
                b = Buffer(ctx, h, known=prog.out_types[i])
            bufs.append(b)
            dsts[i] = b.handle
        try:
            st = lib.lf_eval(g.handle, len(bufs), prog.outs_c, dsts)
        finally:
            for i in range(len(bufs)):
                dsts[i] = ffi.NULL
        if spare is not None:
            prog.spare = bufs if st == lib.LF_OK else [None] * len(bufs)
        with _counter_lock:
            _evals[0] += 1
        ctx.check(st, "compute")
        if cell is not None:
            st = lib.lf_buffer_read(bufs[0].handle, cell, _ITEMSIZE[prog.out_types[0][0]])
            if st:
                ctx.check(st, "read")
    for i, (a, b) in enumerate(zip(lst, bufs)):
        a._buf = b
        r = a._recipe
        r.args, r.tree, r.leaves = (), None, None  # operands no longer needed
        if a._graph is None:  # deferred: the cached graph is where it was computed (explain, to_dot)
            a._graph, a._node = prog.graph, prog.outs[i]
    return True


def compute(*arrays):
    """Computes the given arrays in one fused lf_eval (per context) and returns
    them (a tuple for several, the array for one). Each context caches a
    program per DAG structure (ops, parameters, dtypes, shapes; not the input
    buffers or the Python scalars' values): computing the same expression on
    new arrays of the same shapes, or with other scalars, rebinds the cached
    graph's inputs (lf_input_rebind) and sets its constants (lf_scalar_set)
    instead of planning again. DAGs that cannot be cached (a strided input)
    are evaluated in their own graph; lazy arrays of other graphs are rebuilt
    from their recipes into the first one's graph for it, so compute(a, b) is
    one eval whichever graphs a and b were built in."""
    if len(arrays) == 1 and type(arrays[0]) is Array:  # the common call: one array
        a = arrays[0]
        if a._buf is None and not _run_cached(a._ctx, [a]):
            _compute_uncached(a._ctx, [a])
        return a
    by_ctx = {}
    for a in arrays:
        if not isinstance(a, Array):
            raise TypeError(f"compute: {type(a).__name__} is not a lazyfuse Array")
        if a._buf is None:
            lst = by_ctx.setdefault(id(a._ctx), (a._ctx, []))[1]
            if builtins.all(b is not a for b in lst):
                lst.append(a)
    for ctx, lst in by_ctx.values():
        if not _run_cached(ctx, lst):
            _compute_uncached(ctx, lst)
    return arrays[0] if len(arrays) == 1 else arrays


def _compute_uncached(ctx, lst):
    """compute() of lst (lazy arrays of ctx) in the first one's own graph."""
    g = lst[0]._live_graph()
    n = len(lst)
    with ctx.calling():
        nodes = [a._node_in(g) for a in lst]
        outs = ffi.new("lf_node *[]", nodes)
        bufs = []
        for node in nodes:
            h = lib.lf_buffer_new_like(ctx.handle, node)
            if h == ffi.NULL:
                ctx.check(lib.LF_ERR_NOMEM, "compute")
            bufs.append(Buffer(ctx, h))
        dsts = ffi.new("lf_buffer *[]", [b.handle for b in bufs])
        st = lib.lf_eval(g.handle, n, outs, dsts)
        with _counter_lock:
            _evals[0] += 1
        ctx.check(st, "compute")
    for a, b, node in zip(lst, bufs, nodes):
        a._buf = b
        a._recipe = _Recipe(a._recipe.build, (), a._recipe.what)  # operands no longer needed
        if a._graph is None:
            a._graph, a._node = g, node


# ---- what lazyfuse does not have ----------------------------------------------------------

_MISSING = ["concat", "stack", "unstack", "tile", "repeat", "roll", "moveaxis", "meshgrid", "nonzero",
            "searchsorted", "unique_all", "unique_counts", "unique_inverse", "unique_values",
            "tensordot", "copysign", "nextafter", "cumulative_prod",
            "count_nonzero", "diff"]


def _missing(name):
    def f(*args, **kwargs):
        raise NotImplementedError(f"lazyfuse does not implement the Array API function {name!r}")
    f.__name__ = name
    return f


for _n in _MISSING:
    globals()[_n] = _missing(_n)


# ---- complex parts of real arrays (lazyfuse has no complex dtype) -----------------------------

def conj(x, /):
    """The complex conjugate: of a real array (every lazyfuse dtype), x itself
    (as NumPy's conj; arrays are immutable, so no copy is needed)."""
    return x if isinstance(x, Array) else asarray(x)


def real(x, /):
    """The real part: of a real array, x itself (as NumPy's real)."""
    return x if isinstance(x, Array) else asarray(x)


def imag(x, /):
    """The imaginary part: of a real array, zeros of its dtype and shape (as
    NumPy's imag)."""
    return zeros_like(x if isinstance(x, Array) else asarray(x))


# ---- dtype functions (NumPy's, for lazyfuse's five dtypes) ------------------------------------


def result_type(*arrays_and_dtypes):
    lf = None
    for x in arrays_and_dtypes:
        t = x._dtype if isinstance(x, Array) else _lf(x)
        lf = t if lf is None else _promote(lf, t)
    return _np(lf)


def can_cast(from_, to, /):
    f = from_._dtype if isinstance(from_, Array) else _lf(from_)
    return _promote(f, _lf(to)) == _lf(to)


def isdtype(dtype, kind):
    if isinstance(kind, tuple):
        return builtins.any(isdtype(dtype, k) for k in kind)
    lf = _lf(dtype)
    if isinstance(kind, str):
        return {"bool": lf == LF_BOOL, "signed integer": lf in _SIGNED, "unsigned integer": lf in _UNSIGNED,
                "integral": _is_int(lf), "real floating": _is_float(lf), "complex floating": False,
                "numeric": lf != LF_BOOL}[kind]
    return lf == _lf(kind)


finfo_object = collections.namedtuple("finfo_object", "bits eps max min smallest_normal dtype")
iinfo_object = collections.namedtuple("iinfo_object", "bits max min dtype")


def finfo(type, /):
    """The Array API's finfo: bits an int, eps, max, min and smallest_normal
    Python floats (NumPy's finfo gives float32 scalars for float32), of a
    floating dtype or array."""
    lf = type._dtype if isinstance(type, Array) else _lf(type)  # LazyfuseTypeError for a dtype lazyfuse lacks
    dt = _np(lf)
    if not _is_float(lf):
        raise _dtype_error(f"finfo: {dt} is not a floating dtype")
    fi = np.finfo(dt)
    return finfo_object(int(fi.bits), float(fi.eps), float(fi.max), float(fi.min), float(fi.smallest_normal), dt)


def iinfo(type, /):
    """The Array API's iinfo (bits, max, min as Python ints) of an integer
    dtype or array."""
    lf = type._dtype if isinstance(type, Array) else _lf(type)  # LazyfuseTypeError for a dtype lazyfuse lacks
    dt = _np(lf)
    if not _is_int(lf):
        raise _dtype_error(f"iinfo: {dt} is not an integer dtype")
    ii = np.iinfo(dt)
    return iinfo_object(int(ii.bits), int(ii.max), int(ii.min), dt)


class _Info:
    def capabilities(self):
        return {"boolean indexing": False, "data-dependent shapes": False}

    def default_device(self):
        return default_context()

    def devices(self):
        return [default_context()]

    def default_dtypes(self, *, device=None):
        return {"real floating": float64, "integral": int64, "indexing": int64}

    def dtypes(self, *, device=None, kind=None):
        return {d.name: d for d in _DTYPES if kind is None or isdtype(d, kind)}


def __array_namespace_info__():
    return _Info()


__array_api_version__ = "2023.12"

# the namespace lazyfuse exports (the Array API names it has or refuses by name)
__all__ = sorted(
    ["Array", "asarray", "from_dlpack", "full", "zeros", "ones", "empty", "full_like", "zeros_like",
     "ones_like", "empty_like", "arange", "linspace", "eye", "tril", "triu", "reshape", "permute_dims",
     "matrix_transpose", "expand_dims", "squeeze", "broadcast_to", "broadcast_arrays", "flip", "where",
     "astype", "sum", "prod", "min", "max", "mean", "var", "std", "argmin", "argmax", "any", "all",
     "cumulative_sum", "take", "take_along_axis", "sort", "argsort", "topk", "bincount", "scatter",
     "random", "matmul", "vecdot", "compute", "clear_programs", "result_type", "can_cast", "isdtype", "finfo", "iinfo",
     "__array_namespace_info__", "__array_api_version__", "bool", "int8", "int16", "int32", "int64", "uint8",
     "uint16", "uint32", "uint64", "float16", "float32",
     "float64", "e", "pi", "inf", "nan", "newaxis", "add", "subtract", "multiply", "divide",
     "floor_divide", "remainder", "pow", "less", "less_equal", "greater", "greater_equal", "equal",
     "not_equal", "minimum", "maximum", "atan2", "hypot", "bitwise_and", "bitwise_or", "bitwise_xor",
     "bitwise_left_shift", "bitwise_right_shift", "bitwise_invert", "negative", "positive", "abs",
     "sign", "floor", "ceil", "round", "trunc", "isnan", "isinf", "isfinite", "signbit", "square",
     "logical_and", "logical_or", "logical_xor", "logical_not", "logaddexp", "clip", "fmod", "sqrt",
     "exp", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan", "asin", "acos", "atan",
     "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "rsqrt", "cbrt", "exp2", "sigmoid", "erf"]
    + _MISSING + ["conj", "real", "imag"])
