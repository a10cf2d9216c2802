"""python/tests/gpu_check.py: the Python package against CuPy and PyTorch on
a GPU, for a device lease (CI has no GPU; pytest does not collect this file).

    LAZYFUSE_LIBRARY=build-gpu/liblazyfuse.so PYTHONPATH=python python3 python/tests/gpu_check.py

Each check prints PASS / FAIL / SKIP and a detail; the exit status is 1 when
one failed. What it checks, on a CUDA context:
  - a CuPy array and a torch CUDA tensor wrapped through DLPack without a
    copy (the buffer exported back is the same device pointer);
  - a graph over wrapped device arrays evaluated into a wrapped CuPy / torch
    output (no copy in or out), against CuPy's / torch's own result;
  - a lazyfuse result exported to CuPy and torch (cupy.from_dlpack,
    torch.from_dlpack) shares memory, and outlives the Buffer object;
  - producer stream ordering: values written on a CuPy non-default stream
    just before the import are the ones lazyfuse reads.
"""
import sys
import traceback

import numpy as np

import lazyfuse as lz
from lazyfuse._ffi import ffi, lib

RESULTS = []


def check(name):
    def wrap(fn):
        try:
            detail = fn() or ""
            RESULTS.append(("PASS", name, detail))
        except ImportError as e:
            RESULTS.append(("SKIP", name, str(e)))
        except Exception as e:  # noqa: BLE001 - the report lists every failure
            RESULTS.append(("FAIL", name, f"{type(e).__name__}: {e} | "
                            + traceback.format_exc().strip().splitlines()[-2].strip()))
        return fn
    return wrap


ctx = lz.Context(backend="cuda")
N = 1 << 22


def eval_into(ctx, expr, ins, out):
    """(x, y, ...) -> expr over the wrapped inputs ins, into out (wrapped)."""
    g = lib.lf_graph_new(ctx.handle)
    try:
        names = ", ".join(f"p{k}" for k in range(len(ins)))
        fn = lib.lf_fn_parse(g, f"({names}) -> {expr}".encode())
        nodes = [lib.lf_input(g, b.handle) for b in ins]
        y = lib.lf_zipwith(g, fn, len(nodes), ffi.new("lf_node *[]", nodes))
        ctx.check(lib.lf_graph_status(g), "build")
        ctx.check(lib.lf_eval(g, 1, ffi.new("lf_node *[]", [y]), ffi.new("lf_buffer *[]", [out.handle])), "eval")
        ctx.synchronize()
        st = ffi.new("lf_eval_stats *")
        ctx.check(lib.lf_ctx_last_stats_sized(ctx.handle, st, ffi.sizeof("lf_eval_stats")))
        return st.kernels
    finally:
        lib.lf_graph_free(g)


@check("cupy: wrap and export back, same pointer")
def _():
    import cupy as cp
    x = cp.arange(N, dtype=cp.float32)
    b = lz.Buffer.from_dlpack(ctx, x)
    y = cp.from_dlpack(b)
    assert y.data.ptr == x.data.ptr, (hex(y.data.ptr), hex(x.data.ptr))
    assert bool((y == x).all())
    return f"{N} f32 at {hex(x.data.ptr)}"


@check("cupy: fused eval of wrapped inputs into a wrapped output")
def _():
    import cupy as cp
    x = cp.random.standard_normal(N, dtype=cp.float32)
    m = cp.random.standard_normal(N, dtype=cp.float32)
    out = cp.empty_like(x)
    ptr = out.data.ptr
    k = eval_into(ctx, "exp(-0.5*((p0-p1)/1.5)**2) / (1.5*2.5066282746)",
                  [lz.Buffer.from_dlpack(ctx, x), lz.Buffer.from_dlpack(ctx, m)],
                  lz.Buffer.from_dlpack(ctx, out, writable=True))
    ref = cp.exp(-0.5 * ((x - m) / 1.5) ** 2) / (1.5 * 2.5066282746)
    err = float(cp.max(cp.abs(out - ref) / cp.maximum(cp.abs(ref), 1e-30)))
    assert out.data.ptr == ptr
    assert err < 4e-6, err
    return f"{k} kernel(s), max rel err {err:.2e} vs CuPy"


@check("torch: fused eval of wrapped CUDA tensors into a wrapped output")
def _():
    import torch
    x = torch.randn(N, device="cuda", dtype=torch.float32)
    out = torch.empty_like(x)
    k = eval_into(ctx, "p0 * 2 + sqrt(abs(p0))", [lz.Buffer.from_dlpack(ctx, x)],
                  lz.Buffer.from_dlpack(ctx, out, writable=True))
    ref = x * 2 + torch.sqrt(torch.abs(x))
    err = float(((out - ref).abs() / ref.abs().clamp_min(1e-30)).max())
    assert err < 1e-6, err
    return f"{k} kernel(s), max rel err {err:.2e} vs torch"


@check("result exported to cupy and torch shares memory and outlives the Buffer")
def _():
    import cupy as cp
    import torch
    x = cp.arange(1000, dtype=cp.float64)
    res = lz.Buffer.new(ctx, "float64", (1000,))
    eval_into(ctx, "p0 * p0", [lz.Buffer.from_dlpack(ctx, x)], res)
    c = cp.from_dlpack(res)
    t = torch.from_dlpack(res)
    assert c.data.ptr == t.data_ptr()
    del res
    import gc
    gc.collect()
    assert bool((c == x * x).all()) and bool((t == torch.from_dlpack(x * x)).all())
    return f"pointer {hex(c.data.ptr)}"


@check("producer stream: writes queued on a CuPy stream are seen")
def _():
    import cupy as cp
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        x = cp.zeros(N, dtype=cp.float32)
        x += 3
    out = cp.empty(N, dtype=cp.float32)
    with s:
        b = lz.Buffer.from_dlpack(ctx, x)  # stream=s passed by the protocol
    eval_into(ctx, "p0 + 1", [b], lz.Buffer.from_dlpack(ctx, out, writable=True))
    bad = int(cp.count_nonzero(out != 4))
    assert bad == 0, f"{bad} elements not 4"


if __name__ == "__main__":
    print(f"lazyfuse {lz.library_path()} on {ctx!r}")
    for status, name, detail in RESULTS:
        print(f"{status} {name}: {detail}")
    sys.exit(1 if any(r[0] == "FAIL" for r in RESULTS) else 0)
