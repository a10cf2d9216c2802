"""benches/peers/arrayapi.py: the cases written as NumPy users write them,
once, against an array module xp (numpy, cupy or jax.numpy).

Every op makes a new array (the temporaries are the point: this is the
unfused baseline). Python float literals stay float32 against float32 arrays
(NumPy 1.x value-based casting, CuPy likewise, JAX weak types). `out`, when
given, receives the last op (NumPy and CuPy take out=; jax.numpy does not).
"""
from common import CHAIN_MUL, CHAIN_ROUNDS, CHAIN_SUB, chain_adds


def _last(xp, op, args, out):
    return op(*args) if out is None else op(*args, out=out)


def gaussian_pdf(xp, x, out=None):
    m, s = 0.0, 1.0
    return _last(xp, xp.divide, (xp.exp(-0.5 * ((x - m) / s) ** 2), s * 2.5066282746), out)


def polar_distance(xp, r1, t1, r2, t2, out=None):
    x1, y1 = r1 * xp.cos(t1), r1 * xp.sin(t1)
    x2, y2 = r2 * xp.cos(t2), r2 * xp.sin(t2)
    dx, dy = x1 - x2, y1 - y2
    return _last(xp, xp.sqrt, (dx * dx + dy * dy,), out)


def hypot(xp, x, y, out=None):
    x, y = xp.abs(x), xp.abs(y)
    t = xp.minimum(x, y)
    m = xp.maximum(x, y)
    t = t / m
    return _last(xp, xp.multiply, (m, xp.sqrt(1.0 + t * t)), out)


def triad(xp, a, b, c, out=None):
    return _last(xp, xp.add, (a * b, c), out)


def chain(xp, rounds, x, out=None):
    # the constants are the float32 values lazyfuse uses, as Python floats
    # (exact in float32, so every system rounds them back to the same value)
    mul, sub = float(CHAIN_MUL), float(CHAIN_SUB)
    adds = [float(a) for a in chain_adds(rounds)]
    y = x
    for i in range(rounds):
        y = y * mul
        y = y + adds[i]
        y = xp.abs(y)
        y = (y - sub) if i < rounds - 1 or out is None else xp.subtract(y, sub, out=out)
    return y


def sum_of_squares(xp, x, out=None):
    return xp.sum(x * x)


def softmax_rows(xp, x, out=None):
    e = xp.exp(x - xp.max(x, axis=1, keepdims=True))
    return _last(xp, xp.divide, (e, xp.sum(e, axis=1, keepdims=True)), out)


def matmul_zip_reduce(xp, a, b, out=None):
    # the lecture's A.view(I, J, 1) * B.view(1, J, K) summed over J: the
    # I x J x K product is a real array here
    return xp.sum(a[:, :, None] * b[None, :, :], axis=1)


def layer_norm(xp, x, gamma, beta, out=None):
    mean = xp.mean(x, axis=1, keepdims=True)
    xc = x - mean
    var = xp.mean(xc * xc, axis=1, keepdims=True)
    return _last(xp, xp.add, (xc / xp.sqrt(var + 1e-5) * gamma, beta), out)


# issue 16's contractions, written as the zip-reduce (the broadcast product
# is a real array here; numpy_blas writes them with A @ B)

def matmul_bias_relu(xp, a, b, bias, out=None):
    c = xp.sum(a[:, :, None] * b[None, :, :], axis=1)
    return _last(xp, xp.maximum, (c + bias, 0.0), out)


def matmul_scaled(xp, a, b, s, out=None):
    return xp.sum((a * s[:, None])[:, :, None] * b[None, :, :], axis=1)


def batched_matmul(xp, a, b, out=None):
    return xp.sum(a[:, :, :, None] * b[:, None, :, :], axis=2)


def matvec(xp, a, x, out=None):
    return xp.sum(a * x[None, :], axis=1)


def cumsum(xp, x, out=None):
    # accumulated in float64 and rounded to float32, as lazyfuse defines its
    # scans (NumPy's float32 accumulator drifts past the checking tolerance
    # at n = 2^18); jax.numpy without x64 accumulates in float32
    return _last(xp, xp.cumsum, (x,), out) if out is None else xp.cumsum(x, dtype=xp.float64, out=out)


def cumsum_rows(xp, x, out=None):
    return xp.cumsum(x, axis=1) if out is None else xp.cumsum(x, axis=1, dtype=xp.float64, out=out)


def scan_fused(xp, x, out=None):
    s = xp.cumsum(x * x, dtype=xp.float64).astype(xp.float32)
    return _last(xp, xp.divide, (s, xp.float32(x.size)), out)


def gather_perm(xp, x, p, out=None):
    return xp.take(x, p) if out is None else xp.take(x, p, out=out)


def gather_rows(xp, x, idx, out=None):
    # take_along_axis has no out=; the copy into out would be a second pass
    return xp.take_along_axis(x, idx, axis=1)


def _bins(xp, x):
    """i32(floor(x * 256)) and bincount's keywords for 256 bins (under
    jax.jit the output's length must be static)."""
    i = xp.floor(x * 256)
    i = xp.astype(i, xp.int32) if hasattr(xp, 'astype') else i.astype(xp.int32)
    kw = {'length': 256} if getattr(xp, '__name__', '').startswith('jax') else {}
    return i, dict(kw, minlength=256)


def histogram(xp, x, out=None):
    i, kw = _bins(xp, x)
    return xp.bincount(i, **kw)


def _stencil(xp, x, taps, shifts, out):
    from common import stencil_weights
    w = stencil_weights(taps)
    acc = None
    for t in range(taps):
        v = x[shifts(t)] * w[t]
        acc = v if acc is None else acc + v
    return acc


def stencil5x5(xp, x, out=None):
    s = x.shape[0] - 4
    return _stencil(xp, x, 25, lambda t: (slice(t // 5, t // 5 + s), slice(t % 5, t % 5 + s)), out)


def conv1d_31(xp, x, out=None):
    n = x.shape[0] - 30
    return _stencil(xp, x, 31, lambda t: slice(t, t + n), out)


def bincount2(xp, x, out=None):
    i, kw = _bins(xp, x)
    return xp.bincount(i, **kw), xp.bincount(i, weights=x, **kw)


def embedding(xp, table, idx, out=None):
    return xp.take(table, idx, axis=0)


def kmeans_assign(xp, x, c, out=None):
    d = x[:, None, :] - c[None, :, :]
    return xp.argmin(xp.sum(d * d, axis=2), axis=1)


def for_case(name):
    """fn(xp, *inputs, out=None) for the case called name."""
    if name in CHAIN_ROUNDS:
        rounds = CHAIN_ROUNDS[name]
        return lambda xp, x, out=None: chain(xp, rounds, x, out)
    if name in ('random_fused', 'random_fill'):
        # each array module has its own random API (numpy_peer writes NumPy's)
        from common import NotApplicable
        raise NotApplicable('random numbers: no array-API form (NumPy peer: Generator(Philox))')
    if name.startswith(('sort_', 'argsort_')) or name in ('topk_rows', 'spca'):
        from common import NotApplicable
        raise NotApplicable('sorts, top-k and spca: only the NumPy peers write them')
    return globals()[name]
