"""PyTorch: the NumPy code run on torch tensors through a small namespace shim
(torch names differ: amax, dim=, keepdim=), eager (one kernel per op) and
under torch.compile (Inductor fuses it: Triton kernels on a CUDA device, C++
with OpenMP on the CPU). On a CUDA device each timed call is the host clock
around the call with torch.cuda.synchronize() before and after
(base.device_timer); on the CPU the host clock around the call, with
torch.set_num_threads(threads). Both after the compiling first call and a
warm-up."""
import arrayapi
from base import Peer, SkipPeer, device_timer


class TorchNS:
    """The few numpy names arrayapi uses, on torch."""

    def __init__(self, torch):
        t = torch
        self.exp, self.cos, self.sin, self.sqrt, self.abs = t.exp, t.cos, t.sin, t.sqrt, t.abs
        self.minimum, self.floor, self.int32 = t.minimum, t.floor, t.int32
        self.add, self.subtract, self.multiply, self.divide = t.add, t.sub, t.mul, t.div
        self._t = t

    def astype(self, x, dtype):
        return x.to(dtype)

    def bincount(self, x, weights=None, minlength=0):
        return self._t.bincount(x, weights=weights, minlength=minlength)

    def take(self, x, idx, axis):
        return self._t.index_select(x, axis, idx.long())

    def argmin(self, x, axis):
        return self._t.argmin(x, dim=axis)

    def max(self, x, axis, keepdims=False):
        return self._t.amax(x, dim=axis, keepdim=keepdims)

    def mean(self, x, axis, keepdims=False):
        return self._t.mean(x, dim=axis, keepdim=keepdims)

    def maximum(self, a, b):
        # torch.maximum takes tensors only (matmul_bias_relu's relu is maximum(c, 0.0))
        return self._t.clamp_min(a, b) if isinstance(b, float) else self._t.maximum(a, b)

    def cumsum(self, x, axis=None, dtype=None, out=None):
        # numpy's cumsum without an axis runs over the flattened array
        return self._t.cumsum(x.reshape(-1) if axis is None else x, dim=0 if axis is None else axis)

    def sum(self, x, axis=None, keepdims=False):
        if axis is None:
            return self._t.sum(x)
        return self._t.sum(x, dim=axis, keepdim=keepdims)


class TorchBase(Peer):
    """backend: 'cuda' (tensors on the GPU) or 'cpu'."""

    def __init__(self, name, backend):
        self.name, self.backend = name, backend

    def load(self, threads):
        try:
            import torch
        except ImportError as e:
            raise SkipPeer(f'not installed ({e})')
        if self.backend == 'cuda':
            if not torch.cuda.is_available():
                raise SkipPeer('no CUDA device (torch.cuda.is_available() is False)')
            self.time_one = device_timer(self.sync)
        else:
            torch.set_num_threads(threads)
        self.torch, self.ns = torch, TorchNS(torch)

    def sync(self):
        if self.backend == 'cuda':
            self.torch.cuda.synchronize()

    def version(self):
        return self.torch.__version__

    def to_host(self, out):
        return out.detach().cpu().numpy()

    def device_inputs(self, inputs):
        return [self.torch.from_numpy(x).to(self.backend) for x in inputs]


class TorchEager(TorchBase):
    how = 'torch ops, eager: one kernel per op'

    def prepare(self, case, inputs, n, matmul_n):
        fn, ns = arrayapi.for_case(case.name), self.ns
        d = self.device_inputs(inputs)
        return lambda: fn(ns, *d)


class TorchCompile(TorchBase):
    how = 'torch.compile of the same function (Inductor)'

    def prepare(self, case, inputs, n, matmul_n):
        fn, ns = arrayapi.for_case(case.name), self.ns
        d = self.device_inputs(inputs)
        compiled = self.torch.compile(lambda *args: fn(ns, *args), dynamic=False)
        return lambda: compiled(*d)


PEERS = [TorchEager('torch_eager', 'cuda'), TorchCompile('torch_compile', 'cuda'),
         TorchCompile('torch_compile_cpu', 'cpu')]
