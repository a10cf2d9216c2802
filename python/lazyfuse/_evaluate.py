"""lazyfuse._evaluate: numexpr's evaluate() over lazyfuse's expression parser.

evaluate(ex, local_dict=None, global_dict=None, out=None, order='K',
casting='safe', sanitize=None, ...) follows numexpr 2.x:
 - variables come from local_dict / global_dict, else the caller's frame;
 - dtypes follow numexpr's kinds, bool < int (int32) < long (int64) < float
   (float32) < double (float64), the result of an operation being the
   largest kind of its operands (so int32 * float32 is float32, unlike
   NumPy); Python int literals are int (long beyond int32), float literals
   double; int8/int16/uint8/uint16 arrays count as int, uint32/uint64 as long,
   float16 as float; functions of floats (sqrt, sin, abs, floor, ...) take
   int arguments as double; / is true division; x**c with a constant c is
   numexpr's multiplication chain (its 'aggressive' optimization);
 - sum/prod/min/max(expr, axis=None) as the outermost call reduce;
 - re_evaluate() runs this thread's last expression again on new variables.
The Python side types the expression (ast) and prints it as one lazyfuse fn
with explicit casts, "(p0, p1) -> f64(p0) * p1", so that lazyfuse's own
promotion computes numexpr's kinds; lf_fn_parse parses it, lf_zipwith
applies it to the variables (arrays as DLPack-wrapped inputs, no copy;
Python scalars as lf_const nodes, run-time values), and an optional
lf_reduce reduces it.

Program reuse: a compiled program is cached on the context, keyed by the
expression, each variable's dtype, shape and layout (and whether it is a
scalar), and the reduction: the next call with new arrays rebinds the graph's
inputs (lf_input_rebind) and sets its scalars (lf_scalar_set), so nothing is
planned or compiled again. A C-contiguous NumPy input is read through a
wrapped lf_buffer the program keeps per slot, and the result written through
one it keeps for its output: a new array costs one lf_buffer_set_data. A cached graph holds its last inputs until the next
call rebinds them or the cache drops it (PROGRAM_CACHE_SIZE entries a
context, least recently used first).

What must stay true: the fn text and the kinds computed here agree with the
dtype lf_node_dtype reports (checked at build, a cast added otherwise); no
call into C happens outside ctx.calling().
"""
import ast
import os
import re
import weakref
import sys
import threading

import numpy as np

from ._buffer import Buffer
from ._context import default_context
from ._ffi import (LazyfuseTypeError, LazyfuseValueError, check_graph, dtype_name, ffi, lf_dtype_of,
                   lib)

PROGRAM_CACHE_SIZE = 256

KINDS = ("bool", "int", "long", "float", "double")
KIND_LF = {"bool": "bool", "int": "i32", "long": "i64", "float": "f32", "double": "f64"}
KIND_NP = {"bool": "bool", "int": "int32", "long": "int64", "float": "float32", "double": "float64"}
NP_KIND = {v: k for k, v in KIND_NP.items()}

# numexpr's sanitizer (numexpr.necompiler._blacklist_re, numexpr 2.14): no ; : [
# no dunder names, no attribute access but .real / .imag and number syntax
_SANITIZE = re.compile(r"[\;\[\:]" r"|(^|[^\w])__[\w]+__($|[^\w])"
                       r"|\.\b(?!(real|imag|(\d*[eE]?[+-]?\d+)|(\d*[eE]?[+-]?\d+j)|(\d*j))\b)")

# numexpr.expressions.functions: name -> (minkind, maxkind, arguments). The
# kind of a call is the largest of its arguments' kinds; an int or long one
# becomes double (but for copy, ones_like, round and sign, which keep it);
# any other is raised to minkind and lowered to maxkind. Arguments are cast
# to that kind.
FUNC_KINDS = {
    "copy": (None, None, 1), "ones_like": (None, None, 1),
    **{f: ("float", None, 1) for f in ("sqrt", "sin", "cos", "tan", "arcsin", "arccos", "arctan", "sinh",
                                       "cosh", "tanh", "arcsinh", "arccosh", "arctanh", "log", "log1p",
                                       "log10", "log2", "exp", "expm1", "abs")},
    "fmod": ("float", None, 2), "arctan2": ("float", None, 2), "hypot": ("double", None, 2),
    "maximum": ("double", None, 2), "minimum": ("double", None, 2),
    "ceil": ("float", "double", 1), "floor": ("float", "double", 1), "round": ("double", None, 1),
    "trunc": ("double", None, 1), "sign": ("double", None, 1),
    "real": ("double", "double", 1), "imag": ("double", "double", 1),
}
LF_NAMES = {}  # numexpr name -> lazyfuse's, where they differ (none: the parser takes NumPy's names)
_KEEP_INT = ("copy", "ones_like", "round", "sign")


def _func_kind(name, minkind, maxkind, kinds):
    k = _common(*kinds)
    if k in ("int", "long"):
        return k if name in _KEEP_INT else "double"
    if minkind and KINDS.index(minkind) > KINDS.index(k):
        k = minkind
    if maxkind and KINDS.index(maxkind) < KINDS.index(k):
        k = maxkind
    return k
FOLDABLE = {name: getattr(np, name) for name in [
    "sqrt", "sin", "cos", "tan", "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh",
    "arccosh", "arctanh", "log", "log1p", "log10", "log2", "exp", "expm1", "abs", "ceil", "floor",
    "trunc", "round", "sign", "arctan2", "fmod", "hypot", "maximum", "minimum", "isnan", "isinf",
    "isfinite", "signbit", "where"]}
REDUCTIONS = {"sum": 0, "prod": 1, "min": 2, "max": 3}  # -> lf_reduce_op (lazyfuse_ops.def order)
NOT_IMPLEMENTED = {
    "complex": "lazyfuse has no complex numbers",
    "conj": "lazyfuse has no complex numbers (numexpr's conj gives complex)",
    "contains": "lazyfuse has no strings", "nextafter": "lazyfuse has no nextafter",
    "copysign": "lazyfuse has no copysign",
}


def _reduce_op_ids():
    """lf_reduce_op values by name, from the library (lf_reduce_op_name)."""
    ids = {}
    for i in range(16):
        try:
            name = ffi.string(_reduce_op_name(i)).decode()
        except Exception:
            break
        ids[name] = i
    return ids


ffi.cdef("const char *lf_reduce_op_name(int op);")
_reduce_op_name = lib.lf_reduce_op_name


def _common(*kinds):
    return max(kinds, key=KINDS.index)


def array_kind(a):
    """numexpr's kind of an array (numexpr.necompiler.getType), or TypeError."""
    dt = a.dtype
    if dt.kind == "b":
        return "bool"
    if dt.kind in "iu":
        if dt.itemsize > 4 or (dt.kind == "u" and dt.itemsize == 4):
            return "long"
        return "int"
    if dt.kind == "f":
        return "double" if dt.itemsize > 4 else "float"
    if dt.kind == "c":
        raise NotImplementedError(f"lazyfuse has no complex numbers (variable of dtype {dt})")
    if dt.kind in "SU":
        raise NotImplementedError(f"lazyfuse has no strings (variable of dtype {dt})")
    raise LazyfuseTypeError(f"lazyfuse has no dtype for {dt}")


def constant_kind(v):
    """numexpr's kind of a Python constant (numexpr.expressions.bestConstantType)."""
    if isinstance(v, (bool, np.bool_)):
        return "bool"
    if isinstance(v, (int, np.integer)):
        if isinstance(v, np.int64) or not (-2**31 <= v <= 2**31 - 1):
            return "long"
        return "int"
    if isinstance(v, np.float32):
        return "float"
    if isinstance(v, (float, np.floating)):
        return "double"
    if isinstance(v, complex):
        raise NotImplementedError("lazyfuse has no complex numbers")
    if isinstance(v, (str, bytes)):
        raise NotImplementedError("lazyfuse has no strings")
    raise LazyfuseTypeError(f"unsupported constant {v!r}")


def _literal(v, kind):
    if kind == "bool":
        return f"bool({1 if v else 0})"
    if kind in ("int", "long"):
        return f"{KIND_LF[kind]}({int(v)})"
    r = repr(float(v))
    return f"{KIND_LF[kind]}({r})"


class _E:
    """A typed piece of fn text; const is the Python value of a constant."""
    __slots__ = ("text", "kind", "const")

    def __init__(self, text, kind, const=None):
        self.text, self.kind, self.const = text, kind, const

    def as_kind(self, kind):
        if self.kind == kind:
            return self.text
        if self.const is not None:
            return _literal(self.const, kind)
        return f"{KIND_LF[kind]}({self.text})"


def _const(v):
    if isinstance(v, np.ndarray) and v.ndim == 0:
        v = v[()]  # NumPy functions of scalars may give 0-d arrays (np.where)
    k = constant_kind(v)
    return _E(_literal(v, k), k, v)


_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
           ast.Pow: "**", ast.LShift: "<<", ast.RShift: ">>", ast.BitAnd: "&", ast.BitOr: "|",
           ast.BitXor: "^"}
_CMPOPS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}
_PYOPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
          "/": lambda a, b: a / b, "//": lambda a, b: a // b, "%": lambda a, b: a % b,
          "**": lambda a, b: a ** b, "<<": lambda a, b: a << b, ">>": lambda a, b: a >> b,
          "&": lambda a, b: a & b, "|": lambda a, b: a | b, "^": lambda a, b: a ^ b,
          "<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
          ">=": lambda a, b: a >= b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b}


class _Translator:
    """Walks numexpr's expression (a Python ast) into one lazyfuse fn text."""

    def __init__(self, kinds):
        self.kinds = kinds      # variable name -> kind
        self.params = {}        # variable name -> parameter name, in order of use

    def param(self, name):
        if name not in self.params:
            self.params[name] = f"p{len(self.params)}"
        return self.params[name]

    def visit(self, node):
        m = getattr(self, "v_" + type(node).__name__, None)
        if m is None:
            raise NotImplementedError(f"lazyfuse's evaluate has no {type(node).__name__} expressions")
        return m(node)

    def v_Expression(self, node):
        return self.visit(node.body)

    def v_Constant(self, node):
        if node.value is None:
            raise LazyfuseTypeError("None is not a value")
        return _const(node.value)

    def v_Name(self, node):
        if node.id not in self.kinds:
            raise KeyError(node.id)
        return _E(self.param(node.id), self.kinds[node.id])

    def v_BinOp(self, node):
        op = _BINOPS.get(type(node.op))
        if op is None:
            raise NotImplementedError(f"operator {type(node.op).__name__}")
        a, b = self.visit(node.left), self.visit(node.right)
        if op == "**":
            return self.power(a, b)
        if a.const is not None and b.const is not None:
            return _const(_PYOPS[op](a.const, b.const))
        return self.binop(op, a, b)

    def binop(self, op, a, b):
        k = _common(a.kind, b.kind)
        if op == "/":
            if k in ("bool", "int", "long"):
                k = "double"
            return _E(f"({a.as_kind(k)} / {b.as_kind(k)})", k)
        if k == "bool":
            if op in ("+", "|"):
                return _E(f"({a.text} or {b.text})", "bool")
            if op in ("*", "&"):
                return _E(f"({a.text} and {b.text})", "bool")
            if op == "^":
                return _E(f"({a.text} ^ {b.text})", "bool")
            raise NotImplementedError(f"couldn't find matching opcode for '{op}' on bool")
        if op in ("<<", ">>", "&", "|", "^") and k in ("float", "double"):
            raise TypeError(f"unsupported operand type(s) for {op}: floating point")
        return _E(f"({a.as_kind(k)} {op} {b.as_kind(k)})", k)

    def power(self, a, b):
        """numexpr's pow_op with its default 'aggressive' optimization."""
        if b.const is not None:
            x = b.const
            if a.kind in ("int", "long") and b.kind in ("int", "long") and x < 0:
                raise ValueError("Integers to negative integer powers are not allowed.")
            if a.const is not None:
                return _const(a.const ** x)
            if not isinstance(x, (bool, complex)) and int(2 * x) == 2 * x and abs(x) <= 50:
                n = int(abs(x))
                half = int(abs(2 * x)) % 2
                r, p, mask = None, a, 1
                while True:
                    if n & mask:
                        r = p if r is None else self.binop("*", r, p)
                    mask <<= 1
                    if mask > n:
                        break
                    p = self.binop("*", p, p)
                if half:
                    k = "double" if a.kind in ("bool", "int", "long") else a.kind
                    s = _E(f"sqrt({a.as_kind(k)})", k)
                    r = s if r is None else self.binop("*", r, s)
                if r is None:  # x ** 0: numexpr's ones_like(a)
                    r = _E(_literal(1, a.kind), a.kind)
                if x < 0:
                    r = self.binop("/", _const(1), r)
                return r
        if a.const is not None and b.const is not None:
            return _const(a.const ** b.const)
        k = _common(a.kind, b.kind)
        return _E(f"({a.as_kind(k)} ** {b.as_kind(k)})", k)

    def v_Attribute(self, node):
        # numexpr's ExpressionNode.real: the value itself, for every real kind
        if node.attr == "real":
            return self.visit(node.value)
        raise NotImplementedError(f"attribute .{node.attr}: lazyfuse has no complex numbers")

    def v_BoolOp(self, node):
        raise TypeError("'and' / 'or' do not apply to arrays: use & and |")

    def v_UnaryOp(self, node):
        if isinstance(node.op, ast.Not):
            raise TypeError("'not' does not apply to arrays: use ~")
        a = self.visit(node.operand)
        if isinstance(node.op, ast.UAdd):
            return a
        if isinstance(node.op, ast.USub):
            if a.const is not None:
                return _const(-a.const)
            if a.kind == "bool":
                raise NotImplementedError("couldn't find matching opcode for 'neg_bb'")
            return _E(f"(-{a.text})", a.kind)
        if isinstance(node.op, ast.Invert):
            if a.const is not None:
                return _const(~a.const if a.kind != "bool" else not a.const)
            if a.kind == "bool":
                return _E(f"(not {a.text})", "bool")
            if a.kind in ("float", "double"):
                raise TypeError("unsupported operand type for ~: floating point")
            return _E(f"(~{a.text})", a.kind)
        raise NotImplementedError(f"operator {type(node.op).__name__}")

    def v_Compare(self, node):
        if len(node.ops) != 1:
            raise NotImplementedError("chained comparisons")
        op = _CMPOPS[type(node.ops[0])]
        a, b = self.visit(node.left), self.visit(node.comparators[0])
        if a.const is not None and b.const is not None:
            return _const(bool(_PYOPS[op](a.const, b.const)))
        k = _common(a.kind, b.kind)
        return _E(f"({a.as_kind(k)} {op} {b.as_kind(k)})", "bool")

    def v_Call(self, node):
        if not isinstance(node.func, ast.Name):
            raise NotImplementedError("calls of anything but a function name")
        name = node.func.id
        if node.keywords:
            raise TypeError(f"{name}() takes no keyword arguments here")
        if name in REDUCTIONS:
            raise ValueError("reductions (sum, prod, min, max) must be the outermost operation")
        if name in NOT_IMPLEMENTED:
            raise NotImplementedError(f"{name}: {NOT_IMPLEMENTED[name]}")
        args = [self.visit(a) for a in node.args]
        if args and all(a.const is not None for a in args) and name in FOLDABLE:
            # numexpr folds a function of constants with NumPy's function; the
            # value's NumPy type gives the kind (abs(1) is an int64: long)
            with np.errstate(all="ignore"):
                return _const(FOLDABLE[name](*[a.const for a in args]))

        def arity(n):
            if len(args) != n:
                raise TypeError(f"{name}() takes {n} argument{'s' if n != 1 else ''} ({len(args)} given)")
        if name in FUNC_KINDS:
            minkind, maxkind, nargs = FUNC_KINDS[name]
            arity(nargs)
            k = _func_kind(name, minkind, maxkind, [a.kind for a in args])
            if name in ("copy", "real"):
                return _E(args[0].as_kind(k), k)
            if name in ("ones_like", "imag"):
                return _E(_literal(1 if name == "ones_like" else 0, k), k)
            if name == "round" and k in ("int", "long"):
                return _E(args[0].as_kind(k), k)  # round of an integer is itself
            return _E(f"{LF_NAMES.get(name, name)}({', '.join(a.as_kind(k) for a in args)})", k)
        if name in ("isnan", "isinf", "isfinite"):
            arity(1)
            a = args[0]
            if a.kind in ("bool", "int", "long"):
                return _E("bool(0)" if name != "isfinite" else "bool(1)", "bool")
            if name == "isfinite":
                return _E(f"(not (isnan({a.text}) or isinf({a.text})))", "bool")
            return _E(f"{name}({a.text})", "bool")
        if name == "signbit":  # lf_signbit reads the bit: -0.0 and -NaN too, as NumPy
            arity(1)
            return _E(f"signbit({args[0].text})", "bool")
        if name == "where":
            arity(3)
            c, a, b = args
            if c.const is not None:  # numexpr's where_func picks a branch
                return a if c.const else b
            k = _common(a.kind, b.kind)
            return _E(f"where({c.as_kind('bool')}, {a.as_kind(k)}, {b.as_kind(k)})", k)
        raise NotImplementedError(f"lazyfuse's evaluate has no function {name!r}")


def _split_reduction(tree):
    """(body ast, reduction name or None, axis or None) of a parsed expression."""
    body = tree.body
    if isinstance(body, ast.Call) and isinstance(body.func, ast.Name) and body.func.id in REDUCTIONS:
        name = body.func.id
        args = list(body.args)
        axis = None
        if len(args) == 2:
            axis = args.pop()
        for kw in body.keywords:
            if kw.arg != "axis":
                raise TypeError(f"{name}() got an unexpected keyword argument {kw.arg!r}")
            axis = kw.value
        if len(args) != 1:
            raise TypeError(f"{name}() takes an expression and an optional axis")
        if axis is not None:
            try:
                axis = ast.literal_eval(axis)
            except ValueError:
                axis = None
            if not isinstance(axis, int) or isinstance(axis, bool):
                raise ValueError(f"{name}(): axis must be an integer constant")
            if axis < 0:
                raise ValueError(f"{name}(): negative axes are not supported (numexpr's rule), got {axis}")
        return args[0], name, axis
    return body, None, None


_parsed = {}


def _parse(ex):
    """(body ast, reduction, axis, variable names in order of appearance) of
    ex, cached by its text."""
    p = _parsed.get(ex)
    if p is None:
        try:
            tree = ast.parse(ex.strip(), mode="eval")
        except SyntaxError as e:
            raise SyntaxError(f"invalid expression {ex!r}: {e.msg}") from None
        body, red, axis = _split_reduction(tree)
        called = {id(n.func) for n in ast.walk(body) if isinstance(n, ast.Call)}
        names = []
        for n in ast.walk(body):
            if isinstance(n, ast.Name) and id(n) not in called and n.id not in names:
                names.append(n.id)
        p = (body, red, axis, tuple(names))
        if len(_parsed) > 4096:
            _parsed.clear()
        _parsed[ex] = p
    return p


class _Program:
    """A cached graph: inputs to rebind, constants to set, the result node."""
    __slots__ = ("ctx", "host", "graph", "slots", "held", "bufs", "shapes", "result", "lf_dtype", "dtype",
                 "np_dtype", "shape", "shape_c", "outs_c", "dsts_c", "out_buf", "__weakref__")

    def __init__(self, ctx):
        self.ctx = ctx
        self.host = _host(ctx)  # NumPy arrays are wrapped in place (see _bind)
        self.graph = None
        self.slots = []     # (index in evaluate's variables, node, 'array' | 'array0' | 'const',
        #                     index in held or None)
        self.held = []      # per array slot: the NumPy array wrapped in place now (kept alive), or None
        self.bufs = []      # per array slot: the lf_buffer (lf_buffer_wrap, ours) the slot reads, which
        #                     lf_buffer_set_data points at the next array; None when bound through DLPack
        self.shapes = []    # per array slot: its shape as int64_t[] (made at the first direct bind)
        self.result = None
        self.lf_dtype = None
        self.dtype = None   # the result's NumPy dtype name, np.dtype, shape (and as int64_t[])
        self.np_dtype = None
        self.shape = None
        self.shape_c = None
        self.outs_c = None  # lf_node *[1] of the result, lf_buffer *[1] for lf_eval's output
        self.dsts_c = None
        self.out_buf = None  # the wrapped lf_buffer results are written through (lf_buffer_set_data), or None

    def free(self):
        g, self.graph = self.graph, None
        if g is not None:
            # the graph reads the arrays in held: they go with it (it is
            # never evaluated again, so freeing it later reads nothing)
            bufs = [b for b in self.bufs if b is not None]
            if self.out_buf is not None:
                bufs.append(self.out_buf)
            self.bufs, self.out_buf = [], None

            def release():
                for b in bufs:
                    lib.lf_buffer_free(b)
                lib.lf_graph_free(g)
            self.ctx.defer(release)
            self.held = []

    def __del__(self):
        try:
            self.free()
        except Exception:
            pass


def _prepare(value):
    """A variable as (kind, array or scalar, is_scalar)."""
    if isinstance(value, (bool, int, float, np.bool_, np.integer, np.floating)) and not isinstance(value, np.ndarray):
        arr = np.asarray(value)
        kind = array_kind(arr)
        if isinstance(value, bool):
            kind = "bool"
        return kind, arr, True
    if isinstance(value, (complex, np.complexfloating)):
        raise NotImplementedError("lazyfuse has no complex numbers")
    if isinstance(value, (str, bytes)):
        raise NotImplementedError("lazyfuse has no strings")
    if not isinstance(value, np.ndarray):
        if hasattr(value, "__dlpack__") and hasattr(value, "dtype"):
            arr = value  # wrapped in place below (a NumPy-dtype array of another library)
            try:
                kind = NP_KIND[np.dtype(value.dtype).name]
                return kind, arr, False
            except (TypeError, KeyError):
                value = np.asarray(value)
        else:
            value = np.asarray(value)
    arr = value
    kind = array_kind(arr)
    want = np.dtype(KIND_NP[kind])
    if arr.dtype != want or not arr.dtype.isnative or not arr.flags.aligned:
        arr = arr.astype(want)  # numexpr's upcast (int8 -> int32, ...); a copy
    return kind, arr, False


def _layout(arr):
    """What a graph's input depends on besides dtype and shape."""
    if isinstance(arr, np.ndarray):
        if arr.flags.c_contiguous:
            return None
        return tuple(s // arr.itemsize for s in arr.strides)
    return None


_tls = threading.local()


def _frame_dicts(depth, local_dict, global_dict):
    """numexpr's defaults: each dict not given is the caller's frame's."""
    if local_dict is None or global_dict is None:
        frame = sys._getframe(depth)
        if local_dict is None:
            local_dict = frame.f_locals
        if global_dict is None:
            global_dict = frame.f_globals
    return local_dict, global_dict


def _lookup(name, local_dict, global_dict):
    if local_dict is not None and name in local_dict:
        return local_dict[name]
    if global_dict is not None and name in global_dict:
        return global_dict[name]
    raise KeyError(name)


def validate(ex, local_dict=None, global_dict=None, out=None, order="K", casting="safe",
             _frame_depth=2, sanitize=None, **kwargs):
    """numexpr's validate(): checks ex and its variables and remembers them for
    re_evaluate(); returns None, or the exception (it does not raise)."""
    try:
        local_dict, global_dict = _frame_dicts(_frame_depth, local_dict, global_dict)
        _check_expression(ex, sanitize)
        body, red, axis, names = _parse(ex)
        values = {n: _lookup(n, local_dict, global_dict) for n in names}
        kinds = {n: _prepare(v)[0] for n, v in values.items()}
        _Translator(kinds).visit(body)
        _check_out(out, casting, order)
        _tls.last = (ex, None if out is None else weakref.ref(out), order, casting, kwargs)
    except Exception as e:
        return e
    return None


_sanitized = set()  # expressions the sanitizer passed


def _check_expression(ex, sanitize):
    if not isinstance(ex, str):
        raise ValueError(f"must specify expression as a string, not {type(ex).__name__}")
    if ex in _sanitized:
        return  # passed the sanitizer before (its verdict does not depend on the setting)
    if sanitize is None:
        env = os.environ.get("NUMEXPR_SANITIZE")
        sanitize = bool(int(env)) if env else True
    if sanitize:
        no_ws = re.sub(r"\s+", "", ex)
        outside_quotes = re.sub(r"('[^']*')", "", no_ws)
        if _SANITIZE.search(outside_quotes):
            raise ValueError(f"Expression {ex} has forbidden control characters.")
        if len(_sanitized) > 4096:
            _sanitized.clear()
        _sanitized.add(ex)


def _check_out(out, casting, order):
    if casting not in ("no", "equiv", "safe", "same_kind", "unsafe"):
        raise ValueError("casting must be one of 'no', 'equiv', 'safe', 'same_kind', or 'unsafe'")
    if order not in ("C", "F", "A", "K"):
        raise ValueError(f"order must be one of 'C', 'F', 'A', or 'K' (got {order!r})")
    if out is not None and not isinstance(out, np.ndarray) and not hasattr(out, "__dlpack__"):
        raise TypeError(f"out must be an array, not {type(out).__name__}")


def evaluate(ex, local_dict=None, global_dict=None, out=None, order="K", casting="safe",
             sanitize=None, _frame_depth=2, **kwargs):
    """Evaluates the numexpr expression ex on arrays and scalars (see the module
    docstring for the rules); returns a NumPy array over lazyfuse's memory, or
    out. kwargs: numexpr's optimization= and truediv= are accepted (lazyfuse
    fuses regardless; / is true division)."""
    for k in kwargs:
        if k not in ("optimization", "truediv", "ctx"):
            raise ValueError(f"unknown keyword argument {k!r}")
    local_dict, global_dict = _frame_dicts(_frame_depth, local_dict, global_dict)
    _check_expression(ex, sanitize)
    _check_out(out, casting, order)
    # out by weak reference, as numexpr: re_evaluate writes into it while it lives
    _tls.last = (ex, None if out is None else weakref.ref(out), order, casting, kwargs)
    return _run(ex, local_dict, global_dict, out, casting, kwargs.get("ctx"))


def re_evaluate(local_dict=None, global_dict=None, _frame_depth=2):
    """Runs this thread's last evaluate() (or validate()) expression again, with
    the variables of local_dict, else the caller's frame (a cache hit: the
    program is rebound, never replanned)."""
    last = getattr(_tls, "last", None)
    if last is None:
        raise RuntimeError("re_evaluate: no previous evaluate() or validate() in this thread")
    ex, out_ref, order, casting, kwargs = last
    out = None if out_ref is None else out_ref()
    local_dict, global_dict = _frame_dicts(_frame_depth, local_dict, global_dict)
    return _run(ex, local_dict, global_dict, out, casting, kwargs.get("ctx"))


def _run(ex, local_dict, global_dict, out, casting, ctx):
    ctx = ctx or default_context()
    body, red, axis, names = _parse(ex)
    prepared = []
    key = [ex]
    for n in names:
        if local_dict is not None and n in local_dict:
            value = local_dict[n]
        elif global_dict is not None and n in global_dict:
            value = global_dict[n]
        else:
            raise KeyError(n)
        # the common case first: a C-contiguous, aligned NumPy array of a
        # dtype lazyfuse has (bound by lf_buffer_wrap, see _bind)
        direct = _DIRECT.get(value.dtype) if type(value) is np.ndarray else None
        if direct is not None:
            flags = value.flags
            if flags.c_contiguous and flags.aligned:
                prepared.append((n, direct[0], value, False))
                key.append((n, direct[0], (value.shape, None)))
                continue
        kind, arr, scalar = _prepare(value)
        prepared.append((n, kind, arr, scalar))
        key.append((n, kind, ("const" if _exact_double(arr) else "array0") if scalar
                    else (tuple(arr.shape), _layout(arr))))
    if len(prepared) > 8:
        raise NotImplementedError(f"lazyfuse's evaluate takes at most 8 variables ({len(prepared)} given)")
    key = tuple(key)
    cache = ctx.programs
    prog = cache.get(key)
    with ctx.calling():
        if prog is None:
            prog = _build(ctx, body, red, axis, prepared)
            cache[key] = prog
            if len(cache) > PROGRAM_CACHE_SIZE:
                old = next(iter(cache))
                cache.pop(old).free()
        else:
            cache.pop(key)
            cache[key] = prog  # most recently used last
            _rebind(ctx, prog, prepared)
        return _eval(ctx, prog, out, casting)


def _input_buffer(ctx, arr):
    return Buffer.from_dlpack(ctx, arr)


# NumPy dtype -> (numexpr kind, lf_dtype) of the arrays evaluate binds by
# lf_buffer_wrap (native byte order: a '>f8' array is not a key)
_DIRECT = {np.dtype(KIND_NP[k]): (k, lf_dtype_of(KIND_NP[k])) for k in KINDS}


def _host(ctx):
    """Whether the context's buffers are host memory (then NumPy arrays are
    wrapped directly, and results are NumPy's own arrays)."""
    return ctx.backend != "cuda"


# ffi.from_buffer(arr) without cffi's Python-level wrapper (one frame less
# per bound array): the backend's call with the type ffi.from_buffer uses
_from_buffer = ffi._backend.from_buffer
_CHAR_ARRAY = ffi.typeof("char[]")


def _wrap(ctx, arr, lf, shape_c):
    """An lf_buffer over the memory of arr, a C-contiguous, aligned NumPy
    array of lf's dtype (lf_buffer_wrap, no release callback: whoever binds it
    keeps arr alive while lazyfuse may read or write it)."""
    h = lib.lf_buffer_wrap(ctx.handle, lf, arr.ndim, shape_c, ffi.NULL,
                           _from_buffer(_CHAR_ARRAY, arr, False), ffi.NULL, ffi.NULL)
    if h == ffi.NULL:
        from ._buffer import _error_from_message
        raise _error_from_message(ctx.errmsg(), "evaluate")
    return h


def _shape_c(shape):
    return ffi.new("int64_t[]", list(shape)) if shape else ffi.NULL


def _bind(ctx, prog, i, g, node, arr):
    """Points input node (slot i of prog) at arr: a C-contiguous aligned NumPy
    array of a direct dtype on a host context is wrapped in place
    (lf_buffer_wrap; prog.held[i] keeps it alive until the slot is bound
    again or the program is dropped), anything else goes through DLPack (its
    deleter keeps the source alive). node None: make the lf_input node."""
    if node is not None and prog.held[i] is arr:
        # bound to this very array already (only a directly wrapped array is
        # held): its memory cannot have moved while held here (NumPy's resize
        # refuses an array with other references), and its dtype and shape
        # are in the program's key
        return node
    direct = _DIRECT.get(arr.dtype) if type(arr) is np.ndarray and prog.host else None
    if direct is not None and arr.flags.c_contiguous and arr.flags.aligned:
        own = prog.bufs[i]
        if own is not None:
            # the slot reads our own wrap already (dtype and shape are in
            # the program's key): one C call moves it to arr's memory
            ctx.check(lib.lf_buffer_set_data(own, _from_buffer(_CHAR_ARRAY, arr, False)), "evaluate")
            prog.held[i] = arr
            return node
        shape_c = prog.shapes[i]
        if shape_c is None:
            shape_c = prog.shapes[i] = _shape_c(arr.shape)
        h = _wrap(ctx, arr, direct[1], shape_c)
        held = arr
    else:
        buf = _input_buffer(ctx, arr)
        h = buf.handle
        buf.handle = None  # freed here, below, not by the Buffer
        held = None
    try:
        if node is None:
            node = lib.lf_input(g, h)
            st = lib.LF_OK
        else:
            st = lib.lf_input_rebind(g, node, h)
    except BaseException:
        lib.lf_buffer_free(h)
        raise
    if st != lib.LF_OK or held is None:
        lib.lf_buffer_free(h)  # the graph holds its own reference (or none: failed)
        ctx.check(st, "evaluate")
        h = None
    old, prog.bufs[i] = prog.bufs[i], h  # a direct wrap is kept for lf_buffer_set_data
    if old is not None:
        lib.lf_buffer_free(old)  # the rebind dropped the graph's reference
    prog.held[i] = held
    return node


def _build(ctx, body, red, axis, prepared):
    kinds = {n: kind for n, kind, _, _ in prepared}
    tr = _Translator(kinds)
    e = tr.visit(body)
    prog = _Program(ctx)
    g = lib.lf_graph_new(ctx.handle)
    if g == ffi.NULL:
        ctx.check(lib.LF_ERR_NOMEM, "graph")
    prog.graph = g
    try:
        by_name = {n: (i, kind, arr, scalar) for i, (n, kind, arr, scalar) in enumerate(prepared)}
        inputs = []
        for name, pname in tr.params.items():
            index, kind, arr, scalar = by_name[name]
            if scalar:
                node = lib.lf_const(g, lf_dtype_of(KIND_NP[kind]), float(arr))
                if not _exact_double(arr):
                    node = _scalar_input(ctx, g, arr)
                    prog.slots.append((index, node, "array0", None))
                else:
                    prog.slots.append((index, node, "const", None))
            else:
                prog.held.append(None)
                prog.bufs.append(None)
                prog.shapes.append(None)
                node = _bind(ctx, prog, len(prog.held) - 1, g, None, arr)
                prog.slots.append((index, node, "array", len(prog.held) - 1))
            inputs.append(node)
        text = f"({', '.join(tr.params.values())}) -> {e.text}"
        fn = lib.lf_fn_parse(g, text.encode())
        xs = ffi.new("lf_node *[]", inputs or [ffi.NULL])
        node = lib.lf_zipwith(g, fn, len(inputs), xs)
        check_graph(g)
        want = KIND_NP[e.kind]
        if dtype_name(lib.lf_node_dtype(node)) != want:
            node = lib.lf_cast(g, node, lf_dtype_of(want))
        if red is not None:
            op = _reduce_ops()[red]
            nd = lib.lf_node_ndim(node)
            if axis is None:
                node = lib.lf_reduce(g, op, node, 0, ffi.NULL, False)
            else:
                if not -nd <= axis < nd:
                    raise LazyfuseValueError(f"axis {axis} is out of bounds for array of dimension {nd}")
                node = lib.lf_reduce(g, op, node, 1, ffi.new("int[]", [axis]), False)
            check_graph(g)
            if red in ("sum", "prod") and e.kind == "bool":
                raise NotImplementedError(f"couldn't find matching opcode for '{red}' of bool")
            if dtype_name(lib.lf_node_dtype(node)) != want:
                node = lib.lf_cast(g, node, lf_dtype_of(want))
        check_graph(g)
        prog.result = node
        prog.lf_dtype = int(lib.lf_node_dtype(node))
        prog.dtype = dtype_name(prog.lf_dtype)
        prog.np_dtype = np.dtype(prog.dtype)
        prog.shape = tuple(int(lib.lf_node_dim(node, i)) for i in range(lib.lf_node_ndim(node)))
        prog.shape_c = _shape_c(prog.shape)
        prog.outs_c = ffi.new("lf_node *[]", [node])
        prog.dsts_c = ffi.new("lf_buffer *[]", 1)
    except BaseException:
        prog.graph = None
        lib.lf_graph_free(g)
        raise
    return prog


_reduce_cache = {}


def _reduce_ops():
    if not _reduce_cache:
        for name, i in _reduce_op_ids().items():
            _reduce_cache[name] = i
    return _reduce_cache


def _exact_double(arr):
    v = arr.item()
    if isinstance(v, bool):
        return True
    if isinstance(v, int):
        return -2**53 <= v <= 2**53
    return True


def _scalar_input(ctx, g, arr):
    buf = _input_buffer(ctx, np.ascontiguousarray(arr))
    node = lib.lf_input(g, buf.handle)
    buf.free()
    return node


def _rebind(ctx, prog, prepared):
    """Points prog at this call's variables (prepared, in the order of the
    expression's names, which the program's key fixes)."""
    g = prog.graph
    for index, node, how, i in prog.slots:
        arr = prepared[index][2]
        if how == "array":
            _bind(ctx, prog, i, g, node, arr)
        elif how == "const":  # the key says the value is exact as a double
            ctx.check(lib.lf_scalar_set(g, node, float(arr)), "evaluate")
        else:
            buf = _input_buffer(ctx, np.ascontiguousarray(arr))
            st = lib.lf_input_rebind(g, node, buf.handle)
            buf.free()
            ctx.check(st, "evaluate")


def _eval(ctx, prog, out, casting):
    g = prog.graph
    if out is not None:
        out_arr = out
        if tuple(out_arr.shape) != prog.shape:
            # numexpr broadcasts the result to out's shape
            try:
                ok = np.broadcast_shapes(prog.shape, tuple(out_arr.shape)) == tuple(out_arr.shape)
            except ValueError:
                ok = False
            if not ok:
                raise ValueError(f"output array has shape {tuple(out_arr.shape)}, the result {prog.shape}")
        if not np.can_cast(prog.dtype, out_arr.dtype, casting=casting):
            raise TypeError(f"Cannot cast the result from {prog.dtype} to {out_arr.dtype} "
                            f"according to the rule {casting!r}")
        direct = (isinstance(out_arr, np.ndarray) and tuple(out_arr.shape) == prog.shape
                  and out_arr.dtype == prog.np_dtype
                  and out_arr.flags.c_contiguous and out_arr.flags.writeable and out_arr.flags.aligned)
        if direct:
            if prog.host:
                _eval_into(ctx, prog, out_arr)
                return out
            dst = Buffer.from_dlpack(ctx, out_arr, writable=True)
            try:
                st = lib.lf_eval(g, 1, prog.outs_c, ffi.new("lf_buffer *[]", [dst.handle]))
                ctx.check(st, "evaluate")
            finally:
                dst.free()
            return out
        res = _eval_new(ctx, prog)
        np.copyto(out_arr, res, casting="unsafe")
        return out
    return _eval_new(ctx, prog)


def _eval_into(ctx, prog, arr):
    """lf_eval of prog's result into arr, a C-contiguous, aligned, writable
    NumPy array of the result's dtype and shape, wrapped in place."""
    h = prog.out_buf
    if h is None:
        h = prog.out_buf = _wrap(ctx, arr, prog.lf_dtype, prog.shape_c)
        prog.dsts_c[0] = h
    else:
        ctx.check(lib.lf_buffer_set_data(h, _from_buffer(_CHAR_ARRAY, arr, False)), "evaluate")
    ctx.check(lib.lf_eval(prog.graph, 1, prog.outs_c, prog.dsts_c), "evaluate")


def _eval_new(ctx, prog):
    """The result in a new array: on a host context a NumPy array of its own
    that lazyfuse writes in place; else a lazyfuse buffer exported through
    DLPack."""
    if prog.host:
        res = np.empty(prog.shape, prog.np_dtype)
        _eval_into(ctx, prog, res)
        return res
    dst = Buffer.new(ctx, prog.dtype, prog.shape)
    st = lib.lf_eval(prog.graph, 1, prog.outs_c, ffi.new("lf_buffer *[]", [dst.handle]))
    ctx.check(st, "evaluate")
    return np.from_dlpack(dst)
