"""CuPy on a CUDA device (untested on this project's CPU-only machine):
- cupy: the NumPy code with xp = cupy, one kernel per op (unfused);
- cupy_kernel: hand-written cupy.ElementwiseKernel / ReductionKernel per
  case (CUDA C bodies; the elementwise cases and sum_of_squares);
- cupy_fuse: @cupy.fuse over the NumPy code (elementwise cases and the
  sum, which fuse allows as a final reduction).
Inputs live on the device before timing; each timed call is the host clock
around the call with cp.cuda.Device().synchronize() before and after
(base.device_timer)."""
import arrayapi
from base import Peer, SkipPeer, device_timer
from common import CHAIN_MUL, CHAIN_ROUNDS, CHAIN_SUB, F32, NotApplicable, chain_adds


def load_cupy():
    try:
        import cupy
    except ImportError as e:
        raise SkipPeer(f'not installed ({e})')
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            raise SkipPeer('no CUDA device')
    except Exception as e:  # noqa: BLE001 - no driver, no device
        raise SkipPeer(f'no CUDA device ({e})')
    return cupy


class CupyBase(Peer):
    backend = 'cuda'

    def load(self, threads):
        self.cp = load_cupy()
        self.time_one = device_timer(self.sync)

    def sync(self):
        self.cp.cuda.Device().synchronize()

    def version(self):
        return self.cp.__version__

    def to_host(self, out):
        return self.cp.asnumpy(out)

    def device_inputs(self, inputs):
        return [self.cp.asarray(x) for x in inputs]


class Cupy(CupyBase):
    name = 'cupy'
    how = 'NumPy code with xp = cupy: one kernel per op'

    def prepare(self, case, inputs, n, matmul_n):
        cp, fn = self.cp, arrayapi.for_case(case.name)
        d = self.device_inputs(inputs)
        return lambda: fn(cp, *d)


def _c(v):
    return repr(float(F32(v))) + 'f'


def _chain_body(rounds):
    lines = ['float t = x;']
    for a in chain_adds(rounds):
        lines.append(f't = fabsf(t * {_c(CHAIN_MUL)} + {_c(a)}) - {_c(CHAIN_SUB)};')
    return ' '.join(lines) + ' y = t;'


EW = {  # name: (in_params, body)
    'gaussian_pdf': ('float32 x', 'float t = x / 1.0f; y = expf(-0.5f * t * t) / 2.5066282746f;'),
    'polar_distance': ('float32 r1, float32 t1, float32 r2, float32 t2',
                       'float dx = r1 * cosf(t1) - r2 * cosf(t2); float dy = r1 * sinf(t1) - r2 * sinf(t2);'
                       ' y = sqrtf(dx * dx + dy * dy);'),
    'hypot': ('float32 x, float32 y_',
              'float ax = fabsf(x), ay = fabsf(y_); float t = fminf(ax, ay), m = fmaxf(ax, ay);'
              ' t = t / m; y = m * sqrtf(1.0f + t * t);'),
    'triad': ('float32 a, float32 b, float32 c', 'y = a * b + c;'),
}
for _name, _rounds in CHAIN_ROUNDS.items():
    EW[_name] = ('float32 x', _chain_body(_rounds))


class CupyKernel(CupyBase):
    name = 'cupy_kernel'
    how = 'cupy.ElementwiseKernel / ReductionKernel with CUDA C bodies'

    def prepare(self, case, inputs, n, matmul_n):
        cp = self.cp
        d = self.device_inputs(inputs)
        if case.name == 'sum_of_squares':
            k = cp.ReductionKernel('float32 x', 'float64 y', 'double(x * x)', 'a + b', 'y = a', '0',
                                   'lf_sum_of_squares')
            return lambda: k(d[0])
        if case.name not in EW:
            raise NotApplicable('no elementwise or single-reduction form')
        params, body = EW[case.name]
        k = cp.ElementwiseKernel(params, 'float32 y', body, 'lf_' + case.name)
        out = cp.empty(case.out_shape(n, matmul_n), cp.float32)
        return lambda: k(*d, out)


class CupyFuse(CupyBase):
    name = 'cupy_fuse'
    how = '@cupy.fuse() over the NumPy code'

    def prepare(self, case, inputs, n, matmul_n):
        cp = self.cp
        if case.name not in EW and case.name != 'sum_of_squares':
            # row cases and contractions reduce in the middle, scans and the
            # others are no elementwise body
            raise NotApplicable('cupy.fuse takes elementwise code and one final reduction without keepdims')
        fn = arrayapi.for_case(case.name)
        d = self.device_inputs(inputs)
        wrappers = {
            1: lambda a: fn(cp, a),
            2: lambda a, b: fn(cp, a, b),
            3: lambda a, b, c: fn(cp, a, b, c),
            4: lambda a, b, c, e: fn(cp, a, b, c, e),
        }
        fused = cp.fuse(kernel_name='lf_' + case.name)(wrappers[len(d)])
        return lambda: fused(*d)


PEERS = [Cupy(), CupyKernel(), CupyFuse()]
