"""Numba on the CPU, the two ways its documentation recommends for this work:
- numba_vectorize: @vectorize with float32 signatures and target='parallel'
  (a multithreaded NumPy ufunc), for the elementwise cases;
- numba_njit: @njit(parallel=True) loops with prange, for every case.
Constants are float32 globals (Numba freezes globals as typed constants), so
the arithmetic stays float32 as in lazyfuse; accumulators are float64 as a
Numba user's `acc = 0.0` is. No fastmath: like lazyfuse, IEEE semantics.
The scalar functions are shared with numba_cuda_peer.py."""
import math

from base import Peer, SkipPeer
from common import CHAIN_MUL, CHAIN_ROUNDS, CHAIN_SUB, F32, NotApplicable, chain_adds
import numpy as np

NEG_HALF = F32(-0.5)
SQRT_2PI = F32(2.5066282746)
ONE = F32(1.0)
MEAN = F32(0.0)
SIGMA = F32(1.0)
CMUL, CSUB = CHAIN_MUL, CHAIN_SUB
ADDS8 = np.array(chain_adds(CHAIN_ROUNDS['chain8']), dtype=np.float32)
ADDS32 = np.array(chain_adds(CHAIN_ROUNDS['chain32']), dtype=np.float32)


# ---- scalar kernels (pure Python; compiled by vectorize, njit or cuda) -------------

def gaussian_pdf_s(x):
    return math.exp(NEG_HALF * ((x - MEAN) / SIGMA) ** 2) / (SIGMA * SQRT_2PI)


def polar_distance_s(r1, t1, r2, t2):
    dx = r1 * math.cos(t1) - r2 * math.cos(t2)
    dy = r1 * math.sin(t1) - r2 * math.sin(t2)
    return math.sqrt(dx * dx + dy * dy)


def hypot_s(x, y):
    x, y = abs(x), abs(y)
    t = min(x, y)
    m = max(x, y)
    t = t / m
    return m * math.sqrt(ONE + t * t)


def triad_s(a, b, c):
    return a * b + c


def chain8_s(x):
    y = x
    for k in range(ADDS8.shape[0]):
        y = abs(y * CMUL + ADDS8[k]) - CSUB
    return y


def chain32_s(x):
    y = x
    for k in range(ADDS32.shape[0]):
        y = abs(y * CMUL + ADDS32[k]) - CSUB
    return y


SCALAR = {
    'gaussian_pdf': (gaussian_pdf_s, 1),
    'polar_distance': (polar_distance_s, 4),
    'hypot': (hypot_s, 2),
    'triad': (triad_s, 3),
    'chain8': (chain8_s, 1),
    'chain32': (chain32_s, 1),
}


def signature(arity):
    return 'float32(' + ', '.join(['float32'] * arity) + ')'


_LAYER = []


def load_numba(threads):
    try:
        import numba
    except ImportError as e:
        raise SkipPeer(f'not installed ({e})')
    try:
        numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
        if not _LAYER:  # run one parallel loop so that the threading layer is chosen
            @numba.njit(parallel=True)
            def probe(x):
                s = 0.0
                for i in numba.prange(x.shape[0]):
                    s += x[i]
                return s
            probe(np.ones(64))
            _LAYER.append(numba.threading_layer())
    except Exception as e:  # noqa: BLE001 - any failure means: cannot run
        raise SkipPeer(f'cannot run a parallel loop: {e}')
    return numba


def numba_version(numba):
    return f'{numba.__version__}, threading layer {_LAYER[0] if _LAYER else "?"}, {numba.get_num_threads()} threads'


class NumbaVectorize(Peer):
    name = 'numba_vectorize'
    how = "@vectorize(['float32(float32, ...)'], target='parallel'), out= preallocated"

    def load(self, threads):
        self.numba = load_numba(threads)
        self.cache = {}

    def version(self):
        return numba_version(self.numba)

    def prepare(self, case, inputs, n, matmul_n):
        if case.name not in SCALAR:
            raise NotApplicable('not elementwise: @vectorize makes ufuncs')
        fn, arity = SCALAR[case.name]
        if case.name not in self.cache:
            self.cache[case.name] = self.numba.vectorize([signature(arity)], target='parallel')(fn)
        uf = self.cache[case.name]
        out = np.empty(case.out_shape(n, matmul_n), np.float32)
        return lambda: uf(*inputs, out=out)


def build_njit(numba):
    """The @njit(parallel=True) functions, one per case; each writes out."""
    njit, prange = numba.njit, numba.prange
    k = {name: njit(fn) for name, (fn, _) in SCALAR.items()}  # inlined by LLVM
    g, p, h, t, c8, c32 = (k['gaussian_pdf'], k['polar_distance'], k['hypot'], k['triad'],
                           k['chain8'], k['chain32'])

    @njit(parallel=True)
    def gaussian_pdf(x, out):
        for i in prange(x.shape[0]):
            out[i] = g(x[i])

    @njit(parallel=True)
    def polar_distance(r1, t1, r2, t2, out):
        for i in prange(r1.shape[0]):
            out[i] = p(r1[i], t1[i], r2[i], t2[i])

    @njit(parallel=True)
    def hypot(x, y, out):
        for i in prange(x.shape[0]):
            out[i] = h(x[i], y[i])

    @njit(parallel=True)
    def triad(a, b, c, out):
        for i in prange(a.shape[0]):
            out[i] = t(a[i], b[i], c[i])

    @njit(parallel=True)
    def chain8(x, out):
        for i in prange(x.shape[0]):
            out[i] = c8(x[i])

    @njit(parallel=True)
    def chain32(x, out):
        for i in prange(x.shape[0]):
            out[i] = c32(x[i])

    @njit(parallel=True)
    def sum_of_squares(x):
        acc = 0.0
        for i in prange(x.shape[0]):
            acc += x[i] * x[i]
        return acc

    @njit(parallel=True)
    def softmax_rows(x, out):
        rows, cols = x.shape
        for r in prange(rows):
            m = x[r, 0]
            for j in range(1, cols):
                m = max(m, x[r, j])
            s = 0.0
            for j in range(cols):
                e = math.exp(x[r, j] - m)
                out[r, j] = e
                s += e
            s32 = np.float32(s)
            for j in range(cols):
                out[r, j] = out[r, j] / s32

    @njit(parallel=True)
    def matmul_zip_reduce(a, b, out):
        ni, nj = a.shape
        nk = b.shape[1]
        for i in prange(ni):
            for kk in range(nk):
                out[i, kk] = 0
            for j in range(nj):
                aij = a[i, j]
                for kk in range(nk):
                    out[i, kk] += aij * b[j, kk]

    @njit(parallel=True)
    def layer_norm(x, gamma, beta, out):
        rows, cols = x.shape
        for r in prange(rows):
            s = 0.0
            for j in range(cols):
                s += x[r, j]
            mean = np.float32(s / cols)
            q = 0.0
            for j in range(cols):
                c = x[r, j] - mean
                q += c * c
            d = np.float32(math.sqrt(np.float32(q / cols) + np.float32(1e-5)))
            for j in range(cols):
                out[r, j] = (x[r, j] - mean) / d * gamma[j] + beta[j]

    @njit(parallel=True)
    def matmul_bias_relu(a, b, bias, out):
        ni, nj = a.shape
        nk = b.shape[1]
        for i in prange(ni):
            for kk in range(nk):
                out[i, kk] = 0
            for j in range(nj):
                aij = a[i, j]
                for kk in range(nk):
                    out[i, kk] += aij * b[j, kk]
            for kk in range(nk):
                out[i, kk] = max(out[i, kk] + bias[kk], np.float32(0))

    @njit(parallel=True)
    def matmul_scaled(a, b, s, out):
        ni, nj = a.shape
        nk = b.shape[1]
        for i in prange(ni):
            for kk in range(nk):
                out[i, kk] = 0
            for j in range(nj):
                aij = a[i, j] * s[i]
                for kk in range(nk):
                    out[i, kk] += aij * b[j, kk]

    @njit(parallel=True)
    def batched_matmul(a, b, out):
        nb, ni, nj = a.shape
        nk = b.shape[2]
        for q in prange(nb * ni):
            p, i = q // ni, q % ni
            for kk in range(nk):
                out[p, i, kk] = 0
            for j in range(nj):
                aij = a[p, i, j]
                for kk in range(nk):
                    out[p, i, kk] += aij * b[p, j, kk]

    @njit(parallel=True)
    def matvec(a, x, out):
        ni, nj = a.shape
        for i in prange(ni):
            acc = 0.0
            for j in range(nj):
                acc += a[i, j] * x[j]
            out[i] = acc

    @njit
    def cumsum(x, out):
        # a scan is sequential; a double accumulator gives lazyfuse's results
        acc = 0.0
        for i in range(x.shape[0]):
            acc += x[i]
            out[i] = acc

    @njit(parallel=True)
    def cumsum_rows(x, out):
        rows, cols = x.shape
        for r in prange(rows):
            acc = 0.0
            for j in range(cols):
                acc += x[r, j]
                out[r, j] = acc

    @njit
    def scan_fused(x, out):
        acc = 0.0
        n = np.float32(x.shape[0])
        for i in range(x.shape[0]):
            acc += x[i] * x[i]
            out[i] = np.float32(acc) / n

    @njit(parallel=True)
    def gather_perm(x, p, out):
        for i in prange(p.shape[0]):
            out[i] = x[p[i]]

    @njit(parallel=True)
    def gather_rows(x, idx, out):
        rows, cols = idx.shape
        for r in prange(rows):
            for j in range(cols):
                out[r, j] = x[r, idx[r, j]]

    @njit
    def histogram_chunk(x, lo, hi, row):
        for i in range(lo, hi):
            row[np.int32(np.floor(x[i] * np.float32(256)))] += 1

    @njit(parallel=True)
    def histogram(x, out):
        # a private histogram per chunk, then their sum: what a Numba user
        # writes, since prange has no atomic scatter-add (the chunk loop is
        # its own function: indexing parts[c, ...] inside the prange body
        # ran 7x slower)
        n = x.shape[0]
        chunks = max(1, min(64, n // 65536))
        parts = np.zeros((chunks, 256), np.int64)
        for c in prange(chunks):
            histogram_chunk(x, c * n // chunks, (c + 1) * n // chunks, parts[c])
        for b in range(256):
            out[b] = parts[:, b].sum()

    @njit(parallel=True)
    def random_fill(out):
        # Numba's np.random in prange: a Mersenne Twister state per thread
        for i in prange(out.shape[0]):
            out[i] = np.float32(np.random.random())

    @njit(parallel=True)
    def random_fused(x, out):
        for i in prange(x.shape[0]):
            out[i] = x[i] + np.float32(0.1) * np.float32(np.random.standard_normal())

    return {'cumsum': cumsum, 'cumsum_rows': cumsum_rows, 'scan_fused': scan_fused,
            'gather_perm': gather_perm, 'gather_rows': gather_rows, 'histogram': histogram,
            'random_fill': random_fill, 'random_fused': random_fused,
            'gaussian_pdf': gaussian_pdf, 'polar_distance': polar_distance, 'hypot': hypot,
            'triad': triad, 'chain8': chain8, 'chain32': chain32, 'sum_of_squares': sum_of_squares,
            'softmax_rows': softmax_rows, 'matmul_zip_reduce': matmul_zip_reduce,
            'layer_norm': layer_norm, 'matmul_bias_relu': matmul_bias_relu, 'matmul_scaled': matmul_scaled,
            'batched_matmul': batched_matmul, 'matvec': matvec}


class NumbaNjit(Peer):
    name = 'numba_njit'
    how = '@njit(parallel=True) loops with prange, out= preallocated'

    def load(self, threads):
        self.numba = load_numba(threads)
        self.fns = build_njit(self.numba)

    def version(self):
        return numba_version(self.numba)

    def prepare(self, case, inputs, n, matmul_n):
        if case.name not in self.fns:
            raise NotApplicable('no @njit version of this case')
        fn = self.fns[case.name]
        if case.name == 'sum_of_squares':
            return lambda: fn(*inputs)
        out = np.empty(case.out_shape(n, matmul_n), case.out_dtype)

        def call():
            fn(*inputs, out)
            return out
        return call


PEERS = [NumbaVectorize(), NumbaNjit()]
