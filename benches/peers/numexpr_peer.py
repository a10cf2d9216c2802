"""numexpr: each case as one numexpr.evaluate string (numexpr compiles it to
its virtual machine and runs it fused, in cache-sized blocks, on its thread
pool), writing into a preallocated output with out=, as its documentation
shows. numexpr has no min/max functions (hypot uses where) and no row
reductions that keep dims (softmax and layer_norm take max, sum and mean
from NumPy, the elementwise parts from numexpr, as numexpr users write it).
Its sum() reduction runs on one thread; the contractions are one sum() over
broadcast views (matmul_bias_relu's epilogue a second evaluate)."""
from base import Peer, SkipPeer
from common import NotApplicable, CHAIN_MUL, CHAIN_ROUNDS, CHAIN_SUB, F32, chain_adds


# numexpr 2.8 reads a float literal as float64 and then computes the whole
# expression in float64 (and refuses a float32 out=: "cannot cast from
# float64 to float32"). To keep the work float32, as lazyfuse's is, the
# constants are passed as float32 variables: K holds them, the expressions
# name them.
K = {'neg_half': F32(-0.5), 'sqrt_2pi': F32(2.5066282746), 'm': F32(0.0), 's': F32(1.0),
     'one': F32(1.0), 'cmul': CHAIN_MUL, 'csub': CHAIN_SUB, 'eps': F32(1e-5), 'zero': F32(0.0)}


def chain_expr(rounds):
    y = 'x'
    for i, a in enumerate(chain_adds(rounds)):
        K[f'add{i}'] = a
        y = f'abs(({y}) * cmul + add{i}) - csub'
    return y


HYPOT_M = 'where(abs(x) > abs(y), abs(x), abs(y))'
HYPOT_T = 'where(abs(x) > abs(y), abs(y), abs(x))'

EXPRS = {
    'gaussian_pdf': ('exp(neg_half*((x-m)/s)**2) / (s*sqrt_2pi)', ['x']),
    'polar_distance': ('sqrt((r1*cos(t1) - r2*cos(t2))**2 + (r1*sin(t1) - r2*sin(t2))**2)',
                       ['r1', 't1', 'r2', 't2']),
    'hypot': (f'{HYPOT_M} * sqrt(one + ({HYPOT_T} / {HYPOT_M})**2)', ['x', 'y']),
    'triad': ('a*b + c', ['a', 'b', 'c']),
    'sum_of_squares': ('sum(x*x)', ['x']),
    'matmul_zip_reduce': ('sum(a*b, axis=1)', ['a', 'b']),
    # issue 16's contractions: the zip-reduce as one sum(); the row scale
    # inside it; the bias + relu epilogue is a second evaluate (a reduction
    # ends a numexpr expression)
    'matmul_scaled': ('sum(a*s*b, axis=1)', ['a', 'b', 's']),
    'batched_matmul': ('sum(a*b, axis=2)', ['a', 'b']),
    'matvec': ('sum(a*x, axis=1)', ['a', 'x']),
}
# the broadcast views each contraction's expression reads
VIEWS = {
    'matmul_zip_reduce': lambda a, b: dict(a=a[:, :, None], b=b[None, :, :]),
    'matmul_scaled': lambda a, b, s: dict(a=a[:, :, None], b=b[None, :, :], s=s[:, None, None]),
    'batched_matmul': lambda a, b: dict(a=a[:, :, :, None], b=b[:, None, :, :]),
    'matvec': lambda a, x: dict(a=a, x=x[None, :]),
}
for _name, _rounds in CHAIN_ROUNDS.items():
    EXPRS[_name] = (chain_expr(_rounds), ['x'])


class Numexpr(Peer):
    name = 'numexpr'
    how = 'numexpr.evaluate(expression, out=...), float32 constants as variables; fused, blocked, threaded'

    def load(self, threads):
        try:
            import numexpr
            import numpy
        except ImportError as e:
            raise SkipPeer(f'not installed ({e})')
        self.ne, self.np = numexpr, numpy
        numexpr.set_num_threads(threads)

    def version(self):
        return self.ne.__version__

    def prepare(self, case, inputs, n, matmul_n):
        ne, np = self.ne, self.np
        if case.name == 'softmax_rows':
            (x,) = inputs
            out = np.empty_like(x)

            def softmax():
                m = np.max(x, axis=1, keepdims=True)
                e = ne.evaluate('exp(x - m)')
                s = np.sum(e, axis=1, keepdims=True)
                return ne.evaluate('e / s', out=out)
            return softmax
        if case.name == 'layer_norm':
            x, gamma, beta = inputs
            out = np.empty_like(x)
            local = dict(K, x=x, gamma=gamma, beta=beta)

            def layer_norm():
                local['mean'] = np.mean(x, axis=1, keepdims=True)
                xc = local['xc'] = ne.evaluate('x - mean', local_dict=local)
                local['var'] = np.mean(ne.evaluate('xc * xc', local_dict=local), axis=1, keepdims=True)
                return ne.evaluate('xc / sqrt(var + eps) * gamma + beta', local_dict=local, out=out)
            return layer_norm
        if case.name == 'matmul_bias_relu':
            a, b, bias = inputs
            local = dict(K, a=a[:, :, None], b=b[None, :, :], bias=bias)
            out = np.empty((matmul_n, matmul_n), np.float32)

            def bias_relu():
                local['c'] = ne.evaluate('sum(a*b, axis=1)', local_dict=local)
                return ne.evaluate('where(c + bias > zero, c + bias, zero)', local_dict=local, out=out)
            return bias_relu
        if case.name not in EXPRS:
            raise NotApplicable('numexpr has no scan, gather, scatter or random numbers (only elementwise '
                                'expressions; a reduction ends one)')
        expr, names = EXPRS[case.name]
        local = dict(K)
        local.update(zip(names, inputs))
        if case.name in VIEWS:
            local.update(VIEWS[case.name](*inputs))
        if case.reduction:
            return lambda: ne.evaluate(expr, local_dict=local)
        out = np.empty(case.out_shape(n, matmul_n), np.float32)
        return lambda: ne.evaluate(expr, local_dict=local, out=out)


PEERS = [Numexpr()]
