"""Numba CUDA (untested here): the elementwise cases with
@vectorize([...], target='cuda') over device arrays (the same scalar
functions as numba_peer.py), the others with @cuda.jit kernels: a grid-stride
sum of squares with a shared-memory block reduction and one float64 atomic
per block, a block per softmax row, and a thread per matmul output. Each
timed call is the host clock around the call with cuda.synchronize() before
and after (base.device_timer), after the compiling first call and a
warm-up."""
import math

from base import Peer, SkipPeer, device_timer
from common import NotApplicable
from numba_peer import SCALAR, signature
import numpy as np

THREADS = 256

# numba.cuda and its types, imported by NumbaCuda.load(): the kernels name them
# as module globals, which Numba resolves when it compiles them
cuda = float32 = float64 = None


def build_kernels():
    @cuda.jit
    def sum_of_squares(x, res):
        sm = cuda.shared.array(THREADS, float64)
        tid = cuda.threadIdx.x
        i = cuda.grid(1)
        stride = cuda.gridsize(1)
        acc = 0.0
        while i < x.shape[0]:
            v = x[i]
            acc += v * v
            i += stride
        sm[tid] = acc
        cuda.syncthreads()
        s = THREADS // 2
        while s > 0:
            if tid < s:
                sm[tid] += sm[tid + s]
            cuda.syncthreads()
            s //= 2
        if tid == 0:
            cuda.atomic.add(res, 0, sm[0])

    @cuda.jit
    def softmax_rows(x, out):
        sm = cuda.shared.array(THREADS, float32)
        sd = cuda.shared.array(THREADS, float64)
        r = cuda.blockIdx.x
        tid = cuda.threadIdx.x
        cols = x.shape[1]
        m = x[r, 0]
        j = tid
        while j < cols:
            m = max(m, x[r, j])
            j += THREADS
        sm[tid] = m
        cuda.syncthreads()
        s = THREADS // 2
        while s > 0:
            if tid < s:
                sm[tid] = max(sm[tid], sm[tid + s])
            cuda.syncthreads()
            s //= 2
        m = sm[0]
        acc = 0.0
        j = tid
        while j < cols:
            e = math.exp(x[r, j] - m)
            out[r, j] = e
            acc += e
            j += THREADS
        sd[tid] = acc
        cuda.syncthreads()
        s = THREADS // 2
        while s > 0:
            if tid < s:
                sd[tid] += sd[tid + s]
            cuda.syncthreads()
            s //= 2
        total = float32(sd[0])
        j = tid
        while j < cols:
            out[r, j] = out[r, j] / total
            j += THREADS

    @cuda.jit
    def matmul_zip_reduce(a, b, out):
        i, k = cuda.grid(2)
        if i < out.shape[0] and k < out.shape[1]:
            acc = float32(0.0)
            for j in range(a.shape[1]):
                acc += a[i, j] * b[j, k]
            out[i, k] = acc

    return {'sum_of_squares': sum_of_squares, 'softmax_rows': softmax_rows,
            'matmul_zip_reduce': matmul_zip_reduce}


class NumbaCuda(Peer):
    name = 'numba_cuda'
    backend = 'cuda'
    how = "@vectorize(target='cuda') for elementwise cases, @cuda.jit kernels for the rest"

    def load(self, threads):
        global cuda, float32, float64
        if not hasattr(np, 'row_stack'):
            # numba-cuda 0.30.4 registers an overload of np.row_stack when it
            # first compiles (numba/cuda/np/arrayobj.py), and NumPy 2.4 removed
            # that alias of np.vstack: on the H200 run of 2026-11-27 (NumPy
            # 2.5.2) every case failed with AttributeError. The alias back, for
            # numba-cuda only; nothing here calls it.
            np.row_stack = np.vstack
        try:
            import numba
            from numba import cuda, float32, float64
        except ImportError as e:
            raise SkipPeer(f'not installed ({e})')
        try:
            if not cuda.is_available():
                raise SkipPeer('no CUDA device (numba.cuda.is_available() is False)')
        except SkipPeer:
            raise
        except Exception as e:  # noqa: BLE001 - no driver, no toolkit
            raise SkipPeer(f'no CUDA device ({e})')
        self.numba, self.cuda = numba, cuda
        self.kernels = build_kernels()
        self.ufuncs = {}
        self.time_one = device_timer(self.sync)

    def sync(self):
        self.cuda.synchronize()

    def version(self):
        return self.numba.__version__

    def to_host(self, out):
        return out.copy_to_host()

    def prepare(self, case, inputs, n, matmul_n):
        cuda = self.cuda
        d = [cuda.to_device(x) for x in inputs]
        if case.name in SCALAR:
            fn, arity = SCALAR[case.name]
            if case.name not in self.ufuncs:
                self.ufuncs[case.name] = self.numba.vectorize([signature(arity)], target='cuda')(fn)
            uf = self.ufuncs[case.name]
            out = cuda.device_array(case.out_shape(n, matmul_n), np.float32)
            return lambda: uf(*d, out=out)
        if case.name not in self.kernels:
            raise NotApplicable('no numba.cuda kernel written for this case')
        k = self.kernels[case.name]
        if case.name == 'sum_of_squares':
            res = cuda.device_array(1, np.float64)
            zero = np.zeros(1, np.float64)
            sms = cuda.get_current_device().MULTIPROCESSOR_COUNT
            blocks = max(1, min(sms * 8, math.ceil(d[0].shape[0] / THREADS)))

            def call():
                res.copy_to_device(zero)
                k[blocks, THREADS](d[0], res)
                return res
            return call
        out = cuda.device_array(case.out_shape(n, matmul_n), np.float32)
        if case.name == 'softmax_rows':
            rows = d[0].shape[0]

            def call():
                k[rows, THREADS](d[0], out)
                return out
            return call
        tiles = (math.ceil(matmul_n / 16), math.ceil(matmul_n / 16))

        def call():
            k[tiles, (16, 16)](d[0], d[1], out)
            return out
        return call


PEERS = [NumbaCuda()]
