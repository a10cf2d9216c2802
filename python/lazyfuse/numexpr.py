"""lazyfuse.numexpr: numexpr's module interface, computed by lazyfuse.

``import lazyfuse.numexpr as ne`` gives evaluate, re_evaluate, validate and
numexpr's thread settings; python/numexpr_suite/ installs it as ``numexpr``
to run numexpr's own test suite against it. The thread settings map to the
context's pool: set_num_threads(n) makes this thread's default context again
with n workers (and every thread's, at its next use), returning the previous
count; detect_number_of_cores is the online CPU count; NUMEXPR_MAX_THREADS
bounds the pool as in numexpr.

What numexpr has and lazyfuse does not (its virtual machine: NumExpr objects,
disassemble; Intel VML; complex numbers and strings) raises
NotImplementedError naming it.
"""
import os

from ._context import get_num_threads as _get_threads
from ._context import set_num_threads as _set_threads
from ._evaluate import evaluate, re_evaluate, validate  # noqa: F401 (the module interface)

__all__ = ["E", "MAX_THREADS", "NumExpr", "ConstantNode", "detect_number_of_cores", "disassemble", "evaluate",
           "get_num_threads", "get_vml_num_threads", "get_vml_version", "ncores", "nthreads", "re_evaluate",
           "set_num_threads", "set_vml_accuracy_mode", "set_vml_num_threads", "use_vml", "validate",
           "version"]

__version__ = "2.14.2"  # the numexpr interface this follows
version = __version__
use_vml = False
E = None  # numexpr.expressions' variable factory: not provided (no expression objects)


def detect_number_of_cores():
    """Online CPUs (os.sched_getaffinity where it exists)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def _max_threads():
    """$NUMEXPR_MAX_THREADS, else 64 (numexpr's default bound)."""
    try:
        return max(1, int(os.environ.get("NUMEXPR_MAX_THREADS", "")))
    except ValueError:
        return 64


MAX_THREADS = _max_threads()


def set_num_threads(nthreads):
    """Sets the threads of lazyfuse's CPU pool (default contexts made from
    now on); returns the previous number."""
    n = int(nthreads)
    if n < 1:
        raise ValueError(f"nthreads must be at least 1, got {n}")
    n = min(n, MAX_THREADS)
    old = _set_threads(n)
    return old


def get_num_threads():
    return _get_threads()


def _init_num_threads():
    """numexpr.utils._init_num_threads: $NUMEXPR_NUM_THREADS, else the first
    of $OMP_NUM_THREADS, else the cores (at most 16 unless NUMEXPR_MAX_THREADS
    or OMP_NUM_THREADS is set); sets the pool to it and returns it."""
    cores = detect_number_of_cores()
    if not (os.environ.get("NUMEXPR_MAX_THREADS") or os.environ.get("OMP_NUM_THREADS")):
        cores = min(cores, 16)
    if os.environ.get("NUMEXPR_NUM_THREADS"):
        requested = int(os.environ["NUMEXPR_NUM_THREADS"])
    elif os.environ.get("OMP_NUM_THREADS"):
        requested = int(os.environ["OMP_NUM_THREADS"].split(",")[0].strip())
    else:
        requested = cores
    set_num_threads(requested)
    return requested


def get_vml_num_threads():
    """numexpr's VML thread count: None, as numexpr without VML."""
    return None


ncores = detect_number_of_cores()
nthreads = _init_num_threads()


def set_vml_num_threads(n):
    """numexpr's VML thread count: None, as numexpr without VML (lazyfuse
    does not use VML)."""
    return None


def get_vml_version():
    return None


def set_vml_accuracy_mode(mode):
    raise NotImplementedError("set_vml_accuracy_mode: lazyfuse does not use Intel VML")


def NumExpr(*args, **kwargs):
    raise NotImplementedError("NumExpr: lazyfuse compiles through its own graph, not numexpr's virtual machine")


def disassemble(*args, **kwargs):
    raise NotImplementedError("disassemble: lazyfuse has no numexpr virtual machine program to show")


class ConstantNode:
    """numexpr.expressions.ConstantNode: lazyfuse has no expression objects."""

    def __init__(self, *args, **kwargs):
        raise NotImplementedError("ConstantNode: lazyfuse has no numexpr expression objects")
