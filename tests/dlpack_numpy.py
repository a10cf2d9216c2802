"""tests/dlpack_numpy.py: DLPack round trip between NumPy and lazyfuse, no copy.

Run by meson test (suite 'python') as: python3 dlpack_numpy.py LIBLAZYFUSE.so,
with /usr/bin/python3 and PYTHONNOUSERSITE=1, so Debian's python3-numpy (1.24,
which has __dlpack__ and np.from_dlpack) is the NumPy used. It drives the
shared library through ctypes:

 1. imports NumPy arrays (x, a transposed view, and an output array y) with
    lf_buffer_from_dlpack, renaming each capsule "used_dltensor" as the
    protocol asks; evaluates the Gaussian density of x into y: y, NumPy's own
    memory, holds the result (no copy in or out);
 2. exports a lazyfuse-owned result with lf_buffer_to_dlpack and takes it
    into NumPy with np.from_dlpack: the array's address is the buffer's, the
    values are right, and the buffer outlives lf_buffer_free until NumPy lets
    the array go.

Any failure (NumPy missing included: it must not skip silently) exits
non-zero. The library is loaded with ctypes.PyDLL, which keeps the GIL
during calls, because NumPy's deleter, called from inside lazyfuse, touches
Python objects.
"""
import ctypes
import gc
import sys

from ctypes import (CFUNCTYPE, POINTER, Structure, byref, c_char_p, c_int, c_int64, c_uint8,
                    c_uint16, c_uint64, c_void_p, py_object)

try:
    import numpy as np
except ImportError as e:  # a failure, not a skip: the CI machine has python3-numpy
    sys.exit(f"dlpack_numpy: NumPy is missing ({e}); install python3-numpy")


class DLDevice(Structure):
    _fields_ = [("device_type", c_int), ("device_id", c_int)]


class DLDataType(Structure):
    _fields_ = [("code", c_uint8), ("bits", c_uint8), ("lanes", c_uint16)]


class DLTensor(Structure):
    _fields_ = [("data", c_void_p), ("device", DLDevice), ("ndim", c_int), ("dtype", DLDataType),
                ("shape", POINTER(c_int64)), ("strides", POINTER(c_int64)), ("byte_offset", c_uint64)]


class DLManagedTensor(Structure):
    pass


DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", c_void_p),
                            ("deleter", CFUNCTYPE(None, POINTER(DLManagedTensor)))]

lib = ctypes.PyDLL(sys.argv[1])
P = c_void_p
for name, res, args in [
    ("lf_ctx_new", P, [P]), ("lf_ctx_destroy", None, [P]), ("lf_errmsg", c_char_p, [P]),
    ("lf_ctx_backend", c_int, [P]), ("lf_backend_name", c_char_p, [c_int]),
    ("lf_buffer_from_dlpack", P, [P, P]), ("lf_buffer_to_dlpack", c_int, [P, POINTER(P)]),
    ("lf_buffer_free", None, [P]), ("lf_buffer_new_like", P, [P, P]),
    ("lf_graph_new", P, [P]), ("lf_graph_free", None, [P]), ("lf_input", P, [P, P]),
    ("lf_fn_parse", P, [P, c_char_p]), ("lf_map", P, [P, P, P]), ("lf_eval", c_int, [P, c_int, P, P]),
]:
    f = getattr(lib, name)
    f.restype = res
    f.argtypes = args

api = ctypes.pythonapi
api.PyCapsule_GetPointer.restype = c_void_p
api.PyCapsule_GetPointer.argtypes = [py_object, c_char_p]
api.PyCapsule_SetName.restype = c_int
api.PyCapsule_SetName.argtypes = [py_object, c_char_p]
api.PyCapsule_New.restype = py_object
api.PyCapsule_New.argtypes = [c_void_p, c_char_p, c_void_p]

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)


def import_array(ctx, arr):
    """lf_buffer_from_dlpack of a NumPy array's capsule (consumed on success)."""
    cap = arr.__dlpack__()
    ptr = api.PyCapsule_GetPointer(cap, b"dltensor")
    buf = lib.lf_buffer_from_dlpack(ctx, ptr)
    if not buf:
        sys.exit(f"dlpack_numpy: lf_buffer_from_dlpack: {lib.lf_errmsg(ctx).decode()}")
    api.PyCapsule_SetName(cap, b"used_dltensor")  # lazyfuse calls the deleter now
    return buf


def evaluate(ctx, g, node, dst):
    st = lib.lf_eval(g, 1, byref(c_void_p(node)), byref(c_void_p(dst)))
    if st != 0:
        sys.exit(f"dlpack_numpy: lf_eval: {lib.lf_errmsg(ctx).decode()}")


class Exported:
    """What np.from_dlpack asks for: __dlpack__ and __dlpack_device__."""

    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, stream=None):
        return self.capsule

    def __dlpack_device__(self):
        return (1, 0)  # kDLCPU


def main():
    ctx = lib.lf_ctx_new(None)
    if not ctx:
        sys.exit(f"dlpack_numpy: lf_ctx_new: {lib.lf_errmsg(None).decode()}")
    backend = lib.lf_backend_name(lib.lf_ctx_backend(ctx)).decode()
    print(f"numpy {np.__version__}, lazyfuse backend {backend}")
    g = lib.lf_graph_new(ctx)

    # 1. import: NumPy memory in, NumPy memory out
    n = 100_000
    x = np.linspace(-5, 5, n, dtype=np.float32)
    y = np.full(n, -1.0, dtype=np.float32)
    y_addr = y.ctypes.data
    xb, yb = import_array(ctx, x), import_array(ctx, y)
    gauss = lib.lf_fn_parse(g, b"(x) -> exp(-0.5*x*x) / 2.5066282746")
    node = lib.lf_map(g, gauss, lib.lf_input(g, xb))
    evaluate(ctx, g, node, yb)
    want = (np.exp(-0.5 * x.astype(np.float64) ** 2) / 2.5066282746).astype(np.float32)
    check(y.ctypes.data == y_addr, "y's address is unchanged")
    check(np.allclose(y, want, rtol=1e-5, atol=0), f"gaussian into NumPy's y: max error {np.abs(y - want).max()}")

    # a transposed (strided) view in, read in place
    m = np.arange(12, dtype=np.float64).reshape(3, 4)
    mt = m.T  # strides (1, 4) elements
    out = np.zeros((4, 3), dtype=np.float64)
    mb, ob = import_array(ctx, mt), import_array(ctx, out)
    node2 = lib.lf_map(g, lib.lf_fn_parse(g, b"(x) -> x*2"), lib.lf_input(g, mb))
    evaluate(ctx, g, node2, ob)
    check(np.array_equal(out, mt * 2), f"transposed view times 2: {out.tolist()}")

    # 2. export: a lazyfuse result into NumPy, same address
    zb = lib.lf_buffer_new_like(ctx, node)
    evaluate(ctx, g, node, zb)
    mt_ptr = c_void_p()
    if lib.lf_buffer_to_dlpack(zb, byref(mt_ptr)) != 0:
        sys.exit(f"dlpack_numpy: lf_buffer_to_dlpack: {lib.lf_errmsg(ctx).decode()}")
    managed = ctypes.cast(mt_ptr, POINTER(DLManagedTensor)).contents
    data_addr = managed.dl_tensor.data
    z = np.from_dlpack(Exported(api.PyCapsule_New(mt_ptr, b"dltensor", None)))
    check(z.ctypes.data == data_addr, f"exported array at {z.ctypes.data:#x}, tensor data at {data_addr:#x}")
    check(z.dtype == np.float32 and z.shape == (n,), f"exported dtype/shape {z.dtype} {z.shape}")
    check(np.array_equal(z, y), "exported values equal the in-place result")
    # No copy: lazyfuse writes into its buffer after the export and NumPy's
    # array sees the new values (a copy made by either side would keep the
    # old ones). The address comparison above only shows that NumPy kept the
    # tensor's pointer, not that the pointer is the buffer's memory.
    triple = lib.lf_map(g, lib.lf_fn_parse(g, b"(x) -> x*3"), lib.lf_input(g, xb))
    evaluate(ctx, g, triple, zb)
    check(np.array_equal(z, x * np.float32(3)), "NumPy's exported array sees lazyfuse's next write into the buffer")
    lib.lf_buffer_free(zb)  # the export keeps the buffer alive
    check(np.array_equal(z, x * np.float32(3)), "values after lf_buffer_free")
    del z
    gc.collect()  # NumPy calls the deleter: the buffer dies now

    lib.lf_buffer_free(xb)
    lib.lf_buffer_free(yb)
    lib.lf_buffer_free(mb)
    lib.lf_buffer_free(ob)
    lib.lf_graph_free(g)  # the last references: NumPy's deleters run
    lib.lf_ctx_destroy(ctx)
    check(np.array_equal(y, want) or np.allclose(y, want, rtol=1e-5), "y still NumPy's after lazyfuse let go")
    if failures:
        sys.exit(f"dlpack_numpy: {len(failures)} check(s) failed")
    print("dlpack_numpy: ok (import and export with no copy)")


main()
