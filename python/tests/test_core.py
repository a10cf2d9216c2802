"""The package core: errors as Python exceptions, buffers and DLPack both ways
without copies, lifetimes and deleters, contexts from several threads."""
import gc
import sys
import threading
import time
import weakref

import numpy as np
import pytest

import lazyfuse
from lazyfuse import _buffer
from lazyfuse._ffi import ffi, lib


def address(a):
    return a.__array_interface__["data"][0]


# ---- errors ------------------------------------------------------------------

def test_error_classes_are_builtin_subclasses():
    from lazyfuse._ffi import STATUS_CLASSES, error_for
    for name, cls in STATUS_CLASSES.items():
        assert issubclass(cls, lazyfuse.LazyfuseError)
    assert isinstance(error_for(lib.LF_ERR_SHAPE, "m"), ValueError)
    assert isinstance(error_for(lib.LF_ERR_AXIS, "m"), ValueError)
    assert isinstance(error_for(lib.LF_ERR_DTYPE, "m"), ValueError)
    assert isinstance(error_for(lib.LF_ERR_INDEX, "m"), IndexError)
    assert isinstance(error_for(lib.LF_ERR_NOMEM, "m"), MemoryError)
    assert isinstance(error_for(lib.LF_ERR_NULL, "m"), TypeError)
    e = error_for(lib.LF_ERR_PARSE, "parse error at 1:3: x")
    assert isinstance(e, SyntaxError) and e.status == "LF_ERR_PARSE" and "1:3" in str(e)


def test_every_status_has_a_class():
    from lazyfuse._ffi import STATUS_CLASSES, status_name
    for st in range(1, lib.LF_ERR_EXTERN + 1):
        assert status_name(st) in STATUS_CLASSES


def test_graph_error_carries_errmsg(ctx):
    # zipwith of shapes that do not broadcast: the C message reaches Python
    a = lazyfuse.Buffer.from_dlpack(ctx, np.zeros((3, 4), np.float32))
    b = lazyfuse.Buffer.from_dlpack(ctx, np.zeros(5, np.float32))
    from lazyfuse._ffi import check_graph
    with ctx.calling():
        g = lib.lf_graph_new(ctx.handle)
        try:
            f = lib.lf_fn_parse(g, b"(x, y) -> x + y")
            xs = ffi.new("lf_node *[]", [lib.lf_input(g, a.handle), lib.lf_input(g, b.handle)])
            lib.lf_zipwith(g, f, 2, xs)
            with pytest.raises(ValueError) as ei:
                check_graph(g)
        finally:
            lib.lf_graph_free(g)
    assert isinstance(ei.value, lazyfuse.LazyfuseError)
    assert "[3,4]" in str(ei.value) and "[5]" in str(ei.value)
    assert ei.value.status == "LF_ERR_SHAPE"


def test_parse_error_is_syntax_error(ctx):
    from lazyfuse._ffi import check_graph
    with ctx.calling():
        g = lib.lf_graph_new(ctx.handle)
        try:
            assert lib.lf_fn_parse(g, b"(x) -> x +* 2") == ffi.NULL
            with pytest.raises(SyntaxError, match="parse error at 1:"):
                check_graph(g)
        finally:
            lib.lf_graph_free(g)


def test_bad_context_arguments():
    with pytest.raises(ValueError, match="unknown backend"):
        lazyfuse.Context(backend="tpu")
    with pytest.raises(ValueError):
        lazyfuse.Context(threads=-1)


# ---- DLPack in ---------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["bool", "int32", "int64", "float32", "float64"])
def test_import_is_in_place(ctx, dtype):
    x = (np.arange(12) % 3).astype(dtype).reshape(3, 4)
    b = lazyfuse.Buffer.from_dlpack(ctx, x)
    assert b.dtype == dtype and b.shape == (3, 4)
    # the buffer reads NumPy's memory: a change in x is seen by lazyfuse
    x[1, 2] = 1
    assert b.to_numpy_copy()[1, 2] == 1


def test_import_strided_view(ctx):
    x = np.arange(12.0).reshape(3, 4)
    b = lazyfuse.Buffer.from_dlpack(ctx, x.T)
    np.testing.assert_array_equal(b.to_numpy_copy(), x.T)
    b = lazyfuse.Buffer.from_dlpack(ctx, x[:, ::2])
    np.testing.assert_array_equal(b.to_numpy_copy(), x[:, ::2])


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_unsupported_dtype_names_it(ctx, dtype):
    with pytest.raises(TypeError, match=np.dtype(dtype).name):
        lazyfuse.Buffer.from_dlpack(ctx, np.zeros(3, dtype))


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "uint16", "uint32", "uint64", "float16"])
def test_later_dtypes_import_by_dlpack(ctx, dtype):
    """The dtypes appended after the first five come in through DLPack by
    their codes, values and dtype kept."""
    a = np.arange(3).astype(dtype)
    b = lazyfuse.Buffer.from_dlpack(ctx, a)
    np.testing.assert_array_equal(np.from_dlpack(b), a)
    assert np.from_dlpack(b).dtype == a.dtype


def test_unsupported_dtype_from_dlpack_code(ctx):
    # no .dtype attribute: the DLPack code names it
    class Bare:
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, **kw):
            return self.a.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()
    with pytest.raises(TypeError, match="complex"):
        lazyfuse.Buffer.from_dlpack(ctx, Bare(np.zeros(3, np.complex64)))


def test_buffer_new_errors(ctx):
    with pytest.raises(ValueError):
        lazyfuse.Buffer.new(ctx, "float32", (-1, 2))
    with pytest.raises(TypeError, match="complex64"):
        lazyfuse.Buffer.new(ctx, "complex64", (3,))
    with pytest.raises((ValueError, OverflowError)):
        lazyfuse.Buffer.new(ctx, "float64", (1 << 40, 1 << 40))


def test_not_an_array(ctx):
    with pytest.raises(TypeError, match="__dlpack__"):
        lazyfuse.Buffer.from_dlpack(ctx, [1, 2, 3])


def test_legacy_producer_without_keywords(ctx):
    """NumPy 1.2x's __dlpack__ takes no max_version: the unversioned capsule."""
    calls = []

    class Legacy:
        def __init__(self, a):
            self.a = a

        def __dlpack__(self):
            calls.append("legacy")
            return self.a.__dlpack__()

        def __dlpack_device__(self):
            return (1, 0)
    x = np.arange(5, dtype=np.int64)
    b = lazyfuse.Buffer.from_dlpack(ctx, Legacy(x))
    assert calls == ["legacy"]
    np.testing.assert_array_equal(b.to_numpy_copy(), x)


def test_readonly_source_is_read_not_written(ctx):
    x = np.arange(4.0)
    x.flags.writeable = False
    b = lazyfuse.Buffer.from_dlpack(ctx, x)
    assert b.readonly
    with pytest.raises(ValueError, match="read-only"):
        lazyfuse.Buffer.from_dlpack(ctx, x, writable=True)


def test_failed_import_leaves_the_capsule_to_its_producer(ctx):
    # 9 dimensions: lf_buffer_from_dlpack refuses (LF_ERR_SHAPE); the producer's
    # capsule frees the tensor, so the array's refcount comes back.
    x = np.zeros((1,) * 9)
    before = sys.getrefcount(x)
    with pytest.raises(ValueError, match="dimensions"):
        lazyfuse.Buffer.from_dlpack(ctx, x)
    gc.collect()
    assert sys.getrefcount(x) == before
    assert _buffer.live_tensors() == 0


# ---- lifetimes ----------------------------------------------------------------------

def test_buffer_keeps_source_alive(ctx):
    x = np.arange(1000.0)
    ref = weakref.ref(x)
    b = lazyfuse.Buffer.from_dlpack(ctx, x)
    del x
    gc.collect()
    assert ref() is not None  # the DLPack deleter has not run: the array lives
    np.testing.assert_array_equal(b.to_numpy_copy(), np.arange(1000.0))
    b.free()
    gc.collect()
    assert ref() is None  # deleter ran once the buffer died


def test_deleter_called_exactly_once(ctx):
    calls = []

    class Counting:
        """A producer whose capsule's deleter we observe through the array's refcount."""

        def __init__(self, a):
            self.a = a

        def __dlpack__(self, **kw):
            calls.append(kw)
            return self.a.__dlpack__(**kw)

        def __dlpack_device__(self):
            return (1, 0)
    x = np.arange(7, dtype=np.int32)
    base = sys.getrefcount(x)
    bufs = [lazyfuse.Buffer.from_dlpack(ctx, Counting(x)) for _ in range(3)]
    assert sys.getrefcount(x) == base + 3
    for b in bufs:
        b.free()
        b.free()  # a second free is a no-op
    gc.collect()
    assert sys.getrefcount(x) == base
    assert _buffer.live_tensors() == 0


# ---- DLPack out ---------------------------------------------------------------------

def test_export_shares_memory(ctx):
    b = lazyfuse.Buffer.new(ctx, "float32", (2, 3))
    a = np.from_dlpack(b)
    a2 = np.from_dlpack(b)
    assert address(a) == address(a2)
    a[0, 1] = 7
    assert b.to_numpy_copy()[0, 1] == 7
    assert a.dtype == np.float32 and a.shape == (2, 3)


def test_export_outlives_buffer_and_context():
    c = lazyfuse.Context(threads=1)
    b = lazyfuse.Buffer.new(c, "int64", (5,))
    a = np.from_dlpack(b)
    a[:] = np.arange(5)
    cref = weakref.ref(c)
    del b, c
    gc.collect()
    assert cref() is not None  # the export keeps its context alive
    np.testing.assert_array_equal(a, np.arange(5))
    del a
    gc.collect()
    assert cref() is None
    assert _buffer.live_tensors() == 0


@pytest.mark.parametrize("max_version", [None, (0, 8), (1, 0), (1, 3)])
def test_export_capsule_kinds(ctx, max_version):
    b = lazyfuse.Buffer.new(ctx, "bool", (4,))
    cap = b.__dlpack__(max_version=max_version) if max_version else b.__dlpack__()
    versioned = max_version is not None and max_version[0] >= 1
    assert ("dltensor_versioned" in repr(cap)) == versioned
    del cap  # never consumed: its destructor runs the deleter
    gc.collect()
    assert _buffer.live_tensors() == 0


def test_export_protocol_keywords(ctx):
    b = lazyfuse.Buffer.new(ctx, "float64", (3,))
    assert b.__dlpack_device__() == (1, 0)
    with pytest.raises(BufferError):
        b.__dlpack__(dl_device=(2, 0))
    with pytest.raises(BufferError):
        b.__dlpack__(stream=5)
    c = np.from_dlpack(b, copy=True) if np.lib.NumpyVersion(np.__version__) >= "2.1.0" else None
    if c is not None:
        c[0] = 1
        assert b.to_numpy_copy()[0] == 0  # a copy


def test_roundtrip_result_back_in(ctx):
    # an array made from a lazyfuse export, wrapped again: the release of the
    # inner export is deferred, never run inside a C call on the context
    b = lazyfuse.Buffer.new(ctx, "float32", (10,))
    a = np.from_dlpack(b)
    a[:] = 3
    del b
    b2 = lazyfuse.Buffer.from_dlpack(ctx, a)
    del a
    gc.collect()
    np.testing.assert_array_equal(b2.to_numpy_copy(), np.full(10, 3, np.float32))
    b2.free()
    gc.collect()
    assert _buffer.live_tensors() == 0


# ---- threads and the GIL ------------------------------------------------------------

def test_calls_release_the_gil(ctx):
    """While one thread is inside a long C call, another runs Python code."""
    n = 1 << 24
    big = lazyfuse.Buffer.new(ctx, "float64", (n,))
    host = np.empty(n)
    ticks = []
    stop = threading.Event()

    def ticker():
        while not stop.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0)
    t = threading.Thread(target=ticker)
    t.start()
    try:
        t0 = time.perf_counter()
        for _ in range(5):
            with ctx.calling():
                lib.lf_buffer_read(big.handle, ffi.cast("void *", host.ctypes.data), host.nbytes)
        t1 = time.perf_counter()
    finally:
        stop.set()
        t.join()
    during = [x for x in ticks if t0 < x < t1]
    assert len(during) > 10, f"{len(during)} ticks while C ran ({t1 - t0:.3f} s)"


def test_contexts_from_many_threads():
    errors = []

    def work(i):
        try:
            c = lazyfuse.default_context()
            x = np.full(1000, i, np.int64)
            for _ in range(20):
                b = lazyfuse.Buffer.from_dlpack(c, x)
                assert b.to_numpy_copy()[0] == i
                b.free()
        except Exception as e:  # reported below
            errors.append(e)
    ts = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors


def test_one_context_shared_by_threads(ctx):
    x = np.arange(100.0)
    errors = []

    def work():
        try:
            for _ in range(50):
                b = lazyfuse.Buffer.from_dlpack(ctx, x)
                a = np.from_dlpack(lazyfuse.Buffer.new(ctx, "float64", (100,)))
                assert a.sum() == 0
                assert b.to_numpy_copy()[99] == 99
        except Exception as e:
            errors.append(e)
    ts = [threading.Thread(target=work) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors
    gc.collect()
    assert _buffer.live_tensors() == 0


def test_release_after_its_context_is_dropped():
    """The garbage collector may finalize a cycle's Context before a Buffer or
    graph of it; lf_ctx_destroy has freed those already, so a release
    deferred after that is dropped, not run (it freed them twice: glibc
    aborted the interpreter in test_array's teardown)."""
    import lazyfuse
    c = lazyfuse.Context(backend="cpu", threads=1)
    bufs = [lazyfuse.Buffer.new(c, "float32", (1000,)) for _ in range(4)]
    ran = []
    c.defer(lambda: ran.append("before"))
    c.__del__()  # what the collector may do first in such a cycle
    assert c.handle is None
    c.defer(lambda: ran.append("after"))
    for b in bufs:
        b.free()  # dropped, as the release above
    assert ran == ["before"]


def test_installed_package_has_every_module():
    """Each module of python/lazyfuse/ is in the package that runs the tests
    (python/meson.build lists them by hand: a module left out broke every
    import of an installed package)."""
    import pathlib
    import lazyfuse
    src = pathlib.Path(__file__).resolve().parents[1] / "lazyfuse"
    pkg = pathlib.Path(lazyfuse.__file__).resolve().parent
    want = {p.name for p in src.glob("*.py")}
    have = {p.name for p in pkg.glob("*.py")}
    assert want <= have, f"not in the package at {pkg}: {sorted(want - have)}"
