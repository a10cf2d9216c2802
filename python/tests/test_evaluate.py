"""lazyfuse.evaluate: numexpr's semantics, program reuse, errors, lifetimes,
threads, and a few hundred random numexpr-style expressions against NumPy
(and against numexpr itself, for the dtype, when it is installed)."""
import gc
import os
import random
import threading
import tracemalloc
import weakref

import numpy as np
import pytest

import lazyfuse
from lazyfuse import _buffer
from lazyfuse._ffi import lib

try:
    import numexpr
    if not hasattr(numexpr, "NumExpr") or getattr(numexpr.NumExpr, "__module__", "").startswith("lazyfuse"):
        numexpr = None  # the lazyfuse shim is not a reference
except ImportError:
    numexpr = None


def stats():
    return lazyfuse.default_context().last_stats()


# ---- semantics ------------------------------------------------------------------

def test_caller_frame_variables():
    a = np.arange(5.0)
    k = 3
    np.testing.assert_array_equal(lazyfuse.evaluate("a * k + 1"), a * 3 + 1)


def test_local_and_global_dicts():
    a = np.arange(4, dtype=np.int64)
    r = lazyfuse.evaluate("a + b", local_dict={"a": a}, global_dict={"b": 10})
    np.testing.assert_array_equal(r, a + 10)


@pytest.mark.parametrize("ex, want", [
    ("i4 * f4", "float32"), ("i8 * f4", "float32"), ("i4 * 2.0", "float64"), ("f4 * 2", "float32"),
    ("f4 * 2.0", "float64"), ("i4 * 2", "int32"), ("i4 + i8", "int64"), ("i4 / i4", "float64"),
    ("sqrt(i4)", "float64"), ("abs(i4)", "float64"), ("sin(f4)", "float32"), ("sum(i4)", "int32"),
    ("i4 > 1", "bool"), ("where(b, i4, f4)", "float32"), ("f4 ** 2", "float32"), ("2**31 * i4", "int64"),
    ("round(i4)", "int32"), ("sign(i8)", "int64"), ("u1 + u1", "int32"), ("u4 + i4", "int64"),
])
def test_numexpr_dtype_rules(ex, want):
    i4 = np.arange(1, 7, dtype=np.int32)
    i8 = i4.astype(np.int64)
    f4 = i4.astype(np.float32)
    b = i4 > 3
    u1 = i4.astype(np.uint8)
    u4 = i4.astype(np.uint32)
    r = lazyfuse.evaluate(ex)
    assert r.dtype == np.dtype(want), ex
    if numexpr is not None:
        assert numexpr.evaluate(ex).dtype == r.dtype, ex


def test_reductions_with_axis():
    x = np.arange(12.0).reshape(3, 4)
    np.testing.assert_allclose(lazyfuse.evaluate("sum(x * 2, axis=0)"), (x * 2).sum(axis=0))
    np.testing.assert_allclose(lazyfuse.evaluate("prod(x + 1, axis=1)"), (x + 1).prod(axis=1))
    np.testing.assert_allclose(lazyfuse.evaluate("sum(x)"), x.sum())
    np.testing.assert_allclose(lazyfuse.evaluate("max(x - 3, axis=1)"), (x - 3).max(axis=1))
    np.testing.assert_allclose(lazyfuse.evaluate("min(x, 0)"), x.min(axis=0))


def test_out_and_casting():
    a = np.arange(6.0)
    out = np.empty(6)
    r = lazyfuse.evaluate("a * 2", out=out)
    assert r is out
    np.testing.assert_array_equal(out, a * 2)
    i = np.arange(6, dtype=np.int32)
    out64 = np.empty(6)
    lazyfuse.evaluate("i + 1", out=out64)  # int32 -> float64 is safe
    np.testing.assert_array_equal(out64, i + 1)
    with pytest.raises(TypeError, match="Cannot cast"):
        lazyfuse.evaluate("a * 2", out=np.empty(6, np.int32))
    lazyfuse.evaluate("a * 2", out=np.empty(6, np.int32), casting="unsafe")
    strided = np.zeros(12)[::2]
    lazyfuse.evaluate("a + 1", out=strided)
    np.testing.assert_array_equal(strided, a + 1)


def test_out_in_place_of_an_input():
    a = np.arange(6.0)
    lazyfuse.evaluate("a * 2 + 1", out=a)
    np.testing.assert_array_equal(a, np.arange(6.0) * 2 + 1)


def test_re_evaluate_rebinds():
    a = np.arange(5.0)
    lazyfuse.evaluate("a * a")
    a = np.arange(5.0) + 1
    r = lazyfuse.re_evaluate()
    np.testing.assert_array_equal(r, a * a)
    assert stats()["program_reused"]


def test_strided_and_broadcast_inputs():
    x = np.arange(24.0).reshape(4, 6)
    y = np.arange(6.0)
    xt = x.T
    np.testing.assert_array_equal(lazyfuse.evaluate("xt * 2 + 1"), xt * 2 + 1)
    np.testing.assert_array_equal(lazyfuse.evaluate("x + y"), x + y)
    xs = x[:, ::2]
    np.testing.assert_array_equal(lazyfuse.evaluate("xs - 1"), xs - 1)


# ---- program reuse ------------------------------------------------------------------

def test_loop_reuses_the_program():
    rng = np.random.default_rng(1)
    for i in range(30):
        a = rng.random(1000)
        b = rng.random(1000).astype(np.float32)
        k = float(i)
        r = lazyfuse.evaluate("a * b + k")
        np.testing.assert_allclose(r, a * b.astype(np.float64) + k, rtol=1e-12)
        st = stats()
        if i > 0:
            assert st["program_reused"], i
            assert st["kernels_compiled"] == 0 and st["plan_seconds"] == 0
    # a new shape is a new program, a new scalar value is not
    a = rng.random(10)
    b = rng.random(10).astype(np.float32)
    lazyfuse.evaluate("a * b + k")
    assert not stats()["program_reused"]


def test_direct_and_dlpack_bindings_of_one_program():
    """A cached program's input slot is bound by lf_buffer_wrap for C-contiguous
    NumPy arrays and through DLPack for anything else; one program takes
    either at each call, and every call reads the values it was given."""
    b = np.linspace(-1.0, 1.0, 6)
    for i, make in enumerate([
            lambda v: v,                                  # wrapped in place
            lambda v: lazyfuse.asarray(v.copy()),         # DLPack (not an ndarray)
            lambda v: v,                                  # wrapped again
            lambda v: np.frombuffer(v.tobytes(), v.dtype),  # read-only, wrapped
            lambda v: v.astype(">f8"),                    # byte-swapped: converted
            lambda v: np.concatenate([v, v])[::2] * 0 + v,  # a new array, wrapped
    ]):
        a = np.arange(6.0) * (i + 1) - 2.5
        r = lazyfuse.evaluate("a * 2 + b", local_dict={"a": make(a), "b": b})
        np.testing.assert_array_equal(r, a * 2 + b)
        if i in (2, 3, 5):
            assert stats()["program_reused"], i
    # 0-d and zero-size arrays, bool and int32 arrays, and out= wrapped in place
    z = np.array(3.0)
    np.testing.assert_array_equal(lazyfuse.evaluate("z * 2", local_dict={"z": z}), 6.0)
    e = np.zeros((0, 3))
    assert lazyfuse.evaluate("e + 1", local_dict={"e": e}).shape == (0, 3)
    m = np.array([True, False, True])
    k = np.array([1, 2, 3], np.int32)
    np.testing.assert_array_equal(lazyfuse.evaluate("where(m, k, -k)"), np.where(m, k, -k))
    out = np.full(6, np.nan)
    a = np.arange(6.0)
    assert lazyfuse.evaluate("a * 2 + b", out=out) is out
    np.testing.assert_array_equal(out, a * 2 + b)


def test_input_bound_in_place_is_kept_alive():
    """The cached program keeps the array it wraps alive until the next call
    binds another one (it holds no copy: lf_buffer_wrap reads the array)."""
    a = np.arange(100.0)
    ref = weakref.ref(a)
    lazyfuse.evaluate("a + 1", local_dict={"a": a})
    del a
    gc.collect()
    assert ref() is not None  # still bound
    a2 = np.arange(100.0) * 3
    np.testing.assert_array_equal(lazyfuse.evaluate("a + 1", local_dict={"a": a2}), a2 + 1)
    assert stats()["program_reused"]
    gc.collect()
    assert ref() is None


def test_results_do_not_share_memory():
    a = np.arange(4.0)
    r1 = lazyfuse.evaluate("a + 1")
    r2 = lazyfuse.evaluate("a + 1")
    assert not np.shares_memory(r1, r2)
    r1[0] = 100
    assert r2[0] == 1


# ---- errors ------------------------------------------------------------------------

def test_missing_variable():
    with pytest.raises(KeyError):
        lazyfuse.evaluate("no_such_variable_here + 1")


def test_syntax_error():
    with pytest.raises(SyntaxError):
        lazyfuse.evaluate("a +* 2", local_dict={"a": np.ones(2)})


def test_shapes_that_do_not_broadcast():
    a, b = np.ones((3, 4)), np.ones(5)
    with pytest.raises(ValueError) as ei:
        lazyfuse.evaluate("a + b")
    assert isinstance(ei.value, lazyfuse.LazyfuseError)
    assert "[3,4]" in str(ei.value) and "[5]" in str(ei.value)


def test_unsupported_values():
    with pytest.raises(NotImplementedError, match="complex"):
        lazyfuse.evaluate("z + 1", local_dict={"z": np.ones(2, complex)})
    with pytest.raises(NotImplementedError, match="strings"):
        lazyfuse.evaluate("s == s", local_dict={"s": np.array([b"a"])})
    with pytest.raises(TypeError, match="datetime64"):
        lazyfuse.evaluate("t + 1", local_dict={"t": np.zeros(2, "datetime64[s]")})
    with pytest.raises(NotImplementedError, match="copysign"):
        lazyfuse.evaluate("copysign(a, a)", local_dict={"a": np.ones(2)})


def test_bad_reductions():
    x = np.ones((2, 3))
    with pytest.raises(ValueError, match="outermost"):
        lazyfuse.evaluate("sum(x) + 1")
    with pytest.raises(ValueError, match="axis"):
        lazyfuse.evaluate("sum(x, axis=2)")
    with pytest.raises(ValueError, match="negative axes"):
        lazyfuse.evaluate("sum(x, axis=-1)")


def test_bad_arguments():
    a = np.ones(3)
    with pytest.raises(ValueError):
        lazyfuse.evaluate("a", out=np.empty(4))
    with pytest.raises(ValueError):
        lazyfuse.evaluate("a", casting="sometimes")
    with pytest.raises(ValueError, match="forbidden"):
        lazyfuse.evaluate("a.__class__")
    with pytest.raises(TypeError):
        lazyfuse.evaluate("(a > 1) and (a < 2)")
    with pytest.raises(ValueError, match="negative integer powers"):
        lazyfuse.evaluate("i ** -1", local_dict={"i": np.arange(3)})
    with pytest.raises(ValueError, match="read-only"):
        ro = np.ones(3)
        ro.flags.writeable = False
        lazyfuse.evaluate("a + 1", out=ro)


def test_index_error_class():
    assert issubclass(lazyfuse.LazyfuseIndexError, IndexError)


# ---- lifetimes ----------------------------------------------------------------------

def test_input_freed_while_result_lives():
    # local_dict, not the frame: Python 3.11's frame.f_locals snapshot would
    # keep `a` alive after `del a` until the frame's next snapshot
    a = np.arange(1000.0)
    r = lazyfuse.evaluate("a * 2", local_dict={"a": a})
    ref = weakref.ref(a)
    del a
    gc.collect()
    np.testing.assert_array_equal(r, np.arange(1000.0) * 2)
    # the cached graph holds the last input until the next call rebinds it
    a2 = np.arange(1000.0) + 1
    lazyfuse.evaluate("a * 2", local_dict={"a": a2})
    gc.collect()
    assert ref() is None


def test_result_outlives_everything():
    a = np.arange(10.0)
    r = lazyfuse.evaluate("a + 0.5")
    del a
    gc.collect()
    r2 = r.copy()
    assert np.array_equal(r, r2)
    # on a host context the result is a NumPy array of its own that lf_eval
    # wrote in place (lf_buffer_wrap), not an export of lazyfuse memory: no
    # DLPack tensor stays behind for it
    assert r.base is None and r.flags.owndata
    base = _buffer.live_tensors()
    del r
    gc.collect()
    assert _buffer.live_tensors() == base


def _rss_kib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * (os.sysconf("SC_PAGE_SIZE") // 1024)


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc (Linux) for the RSS")
def test_no_leak_over_100000_calls():
    """10^5 evaluate calls on new arrays: Python's traced memory, lazyfuse's
    own live bytes and the process's RSS stay flat (measured, not assumed)."""
    a = np.arange(16.0)
    b = np.arange(16.0)
    for _ in range(2000):
        lazyfuse.evaluate("a * b + 1")
    gc.collect()
    tracemalloc.start()
    t0, _ = tracemalloc.get_traced_memory()
    live0 = lib.lf_debug_live_bytes()
    rss0 = _rss_kib()
    tensors0 = _buffer.live_tensors()  # cached graphs of earlier tests hold their last inputs
    for i in range(100_000):
        a = np.full(16, float(i))
        r = lazyfuse.evaluate("a * b + 1")
    del r
    gc.collect()
    t1, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    live1 = lib.lf_debug_live_bytes()
    rss1 = _rss_kib()
    print(f"traced {t1 - t0} B, lazyfuse live {live1 - live0} B, RSS {rss1 - rss0} KiB over 10^5 calls")
    assert t1 - t0 < 256 * 1024, f"Python memory grew by {t1 - t0} B"
    assert live1 - live0 < 64 * 1024, f"lazyfuse memory grew by {live1 - live0} B"
    assert rss1 - rss0 < 8 * 1024, f"RSS grew by {rss1 - rss0} KiB"
    assert _buffer.live_tensors() <= tensors0 + 1, f"{_buffer.live_tensors() - tensors0} DLPack tensors more"


# ---- threads ---------------------------------------------------------------------------

def test_threads_evaluate_at_once():
    errors = []
    exprs = ["a * 2 + b", "sqrt(a) - b", "where(a > b, a, b)", "sum(a * b)"]

    def work(t):
        try:
            rng = np.random.default_rng(t)
            for i in range(40):
                a = rng.random(5000)
                b = rng.random(5000)
                ex = exprs[(t + i) % len(exprs)]
                got = lazyfuse.evaluate(ex, local_dict={"a": a, "b": b})
                want = eval(ex, {"sqrt": np.sqrt, "where": np.where, "sum": np.sum}, {"a": a, "b": b})
                np.testing.assert_allclose(got, want, rtol=1e-12)
        except Exception as e:
            errors.append(e)
    ts = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors[0]


def test_shared_context_from_threads():
    ctx = lazyfuse.Context(threads=2)
    errors = []

    def work(t):
        try:
            for i in range(30):
                a = np.full(100, float(t * 100 + i))
                r = lazyfuse.evaluate("a + 1", local_dict={"a": a}, ctx=ctx)
                assert r[0] == t * 100 + i + 1
        except Exception as e:
            errors.append(e)
    ts = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors[0]


# ---- random expressions against NumPy ------------------------------------------------

NP_FUNCS = {"sqrt": np.sqrt, "sin": np.sin, "cos": np.cos, "exp": np.exp, "log": np.log, "abs": np.abs,
            "where": np.where, "arctan2": np.arctan2, "tanh": np.tanh, "floor": np.floor,
            "maximum": np.maximum, "minimum": np.minimum, "log1p": np.log1p, "expm1": np.expm1}


def random_expression(rng, names, depth=0):
    if depth > 3 or rng.random() < 0.25:
        r = rng.random()
        if r < 0.7:
            return rng.choice(names)
        if r < 0.85:
            return str(rng.randint(1, 5))
        return repr(round(rng.uniform(-2, 2), 3))
    k = rng.random()
    sub = lambda: random_expression(rng, names, depth + 1)  # noqa: E731
    if k < 0.45:
        return f"({sub()} {rng.choice(['+', '-', '*'])} {sub()})"
    if k < 0.55:
        return f"({sub()} / (abs({sub()}) + 1))"
    if k < 0.75:
        f = rng.choice(["sqrt", "sin", "cos", "exp", "tanh", "floor", "abs", "log1p", "expm1"])
        arg = sub()
        if f in ("sqrt", "log1p"):
            arg = f"abs({arg})"
        if f in ("exp", "expm1"):
            arg = f"sin({arg})"
        return f"{f}({arg})"
    if k < 0.85:
        return f"where({sub()} > {sub()}, {sub()}, {sub()})"
    if k < 0.93:
        return f"{rng.choice(['maximum', 'minimum', 'arctan2'])}({sub()}, {sub()})"
    return f"({sub()} ** 2)"


@pytest.mark.parametrize("seed", range(6))
def test_random_expressions_vs_numpy(seed):
    rng = random.Random(seed)
    nrng = np.random.default_rng(seed)
    dtypes = [np.float64, np.float32, np.int32, np.int64]
    n = 50
    for case in range(40):
        shape_a = rng.choice([(n,), (4, n), (0,), (1,)])
        a = (nrng.standard_normal(shape_a) * 3).astype(rng.choice(dtypes))
        b = (nrng.standard_normal(shape_a[-1:] if shape_a else ()) * 3).astype(rng.choice(dtypes))
        c = rng.choice([2.5, -1, 7, 0.125])
        if a.dtype.kind == "f" and a.size > 3:
            a.flat[0], a.flat[1], a.flat[2] = np.nan, np.inf, -0.0
        ex = random_expression(rng, ["a", "b", "c"])
        got = lazyfuse.evaluate(ex, local_dict={"a": a, "b": b, "c": c})
        with np.errstate(all="ignore"):
            want = eval(ex, dict(NP_FUNCS), {"a": a.astype(np.float64), "b": b.astype(np.float64), "c": float(c)})
        want = np.broadcast_to(np.asarray(want, dtype=np.float64), got.shape)
        if numexpr is not None:
            with np.errstate(all="ignore"):
                ref = numexpr.evaluate(ex, local_dict={"a": a, "b": b, "c": c})
            assert ref.dtype == got.dtype, f"{ex}: numexpr {ref.dtype}, lazyfuse {got.dtype}"
            if got.dtype.kind == "f":  # numexpr computes in the same kinds
                tol = 1e-4 if np.float32 in (a.dtype, b.dtype) else 1e-9
                close = np.isclose(got, ref, rtol=tol, atol=tol, equal_nan=True)
                assert close.mean() >= (0.95 if tol > 1e-9 else 1.0) if close.size else True, \
                    f"{ex}: {np.count_nonzero(~close)} of {close.size} elements differ from numexpr"
        f32 = np.float32 in (a.dtype, b.dtype)
        if got.dtype.kind in "iub":
            # integer arithmetic wraps where float64 does not: compare where the float value fits
            fits = np.abs(want) < 2**31 - 1
            np.testing.assert_array_equal(got[fits], want[fits].astype(got.dtype), err_msg=ex)
        elif not f32:
            np.testing.assert_allclose(got.astype(np.float64), want, rtol=1e-9, atol=1e-9, equal_nan=True,
                                       err_msg=f"{ex} with a {a.dtype}{a.shape}, b {b.dtype}{b.shape}, c {c}")
        else:
            # numexpr's kinds compute in float32 where an input is float32 (int32 * float32
            # too): against float64 NumPy, rounding grows through cancellations and can flip
            # a comparison at a boundary, so most elements must agree to 1e-3 and the rest
            # (at most 5%) are counted
            g64 = got.astype(np.float64)
            close = np.isclose(g64, want, rtol=1e-3, atol=1e-3, equal_nan=True)
            assert close.mean() >= 0.95 if close.size else True, \
                f"{ex}: {np.count_nonzero(~close)} of {close.size} elements differ (a {a.dtype}, b {b.dtype})"


def test_lf_eval_releases_the_gil():
    """While lf_eval runs a long kernel in one thread, another thread runs
    Python code (cffi's ABI mode releases the GIL around the call)."""
    import time
    ctx = lazyfuse.Context(threads=1)  # one worker: lf_eval itself is long
    a = np.random.default_rng(0).random(1 << 22)
    lazyfuse.evaluate("sin(a) * cos(a) + sqrt(a) * exp(-a)", ctx=ctx)  # compile outside the timing
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
        for _ in range(3):
            lazyfuse.evaluate("sin(a) * cos(a) + sqrt(a) * exp(-a)", ctx=ctx)
        t1 = time.perf_counter()
    finally:
        stop.set()
        t.join()
    during = [x for x in ticks if t0 < x < t1]
    assert ctx.last_stats()["program_reused"]
    assert len(during) > 10, f"{len(during)} ticks of the other thread in {t1 - t0:.3f} s of lf_eval"
