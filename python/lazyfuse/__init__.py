"""lazyfuse: deferred array graphs, fused and compiled at run time, from Python.

The package binds the C library (include/lazyfuse.h) it was built with:
  - Context (lazyfuse._context): an lf_ctx; default_context() is this thread's.
  - Buffer (lazyfuse._buffer): an lf_buffer; DLPack in and out without copies.
  - evaluate (lazyfuse._evaluate): numexpr's evaluate() over the C parser.
  - lazyfuse.numexpr: a drop-in for the numexpr module.
  - Array and the Array API namespace (lazyfuse._array): lazy arrays, computed
    when needed, several results in one fused eval (lazyfuse.compute).
  - explain / to_dot / plan (lazyfuse._explain): the fused kernels, from Python.
Errors are LazyfuseError subclasses that are also the built-in class a Python
user expects (ValueError, TypeError, IndexError, MemoryError, ...).
"""
from ._ffi import (LazyfuseError, LazyfuseIndexError, LazyfuseMemoryError, LazyfuseOverflowError,
                   LazyfuseRuntimeError, LazyfuseSyntaxError, LazyfuseTypeError, LazyfuseValueError,
                   library_path)
from ._context import Context, default_context, get_num_threads, set_num_threads
from ._buffer import Buffer
from ._evaluate import evaluate, re_evaluate, validate
from . import _array
from ._array import *  # noqa: F401,F403 (the Array API names; some shadow builtins, as the standard says)
from ._explain import Dot, explain, plan, to_dot

__all__ = [
    "Buffer", "Context", "LazyfuseError", "LazyfuseIndexError", "LazyfuseMemoryError",
    "LazyfuseOverflowError", "LazyfuseRuntimeError", "LazyfuseSyntaxError", "LazyfuseTypeError",
    "LazyfuseValueError", "asbuffer", "default_context", "evaluate", "get_num_threads",
    "library_path", "re_evaluate", "set_num_threads", "validate",
    "Dot", "explain", "plan", "to_dot",
] + _array.__all__


def asbuffer(obj, ctx=None, writable=False):
    """obj as a Buffer of ctx (default: this thread's context): a Buffer of that
    context as it is, anything with __dlpack__ wrapped in place (no copy),
    anything else through numpy.asarray (a copy only where NumPy makes one)."""
    ctx = ctx or default_context()
    if isinstance(obj, Buffer) and obj.ctx is ctx:
        return obj
    if not hasattr(obj, "__dlpack__"):
        import numpy as np
        obj = np.asarray(obj)
    return Buffer.from_dlpack(ctx, obj, writable=writable)
