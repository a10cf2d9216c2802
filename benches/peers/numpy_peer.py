"""NumPy, unfused: every op a separate pass that allocates its result (the
temporaries a NumPy user pays for); the last op writes into a preallocated
output with out=. numpy_blas: matmul only, A @ B through the BLAS NumPy is
linked with (a different algorithm from the zip-reduce, shown for scale)."""
import os

import arrayapi
from base import Peer, SkipPeer
from common import NotApplicable

# lazyfuse-bench's seeds (tools/seed_examples.c)
RANDOM_SEED = {'random_fused': 20140101, 'random_fill': 42}


class NumPy(Peer):
    name = 'numpy'
    how = 'array expressions, one op at a time (temporaries), out= on the last op'

    def load(self, threads):
        try:
            import numpy
        except ImportError as e:
            raise SkipPeer(f'not installed ({e})')
        self.np = numpy

    def version(self):
        return self.np.__version__

    def prepare(self, case, inputs, n, matmul_n):
        np = self.np
        if case.name in RANDOM_SEED:
            return self.prepare_random(case, inputs, n, matmul_n)
        fn = arrayapi.for_case(case.name)
        if case.name in ('sum_of_squares', 'matmul_zip_reduce', 'gather_rows', 'histogram'):
            return lambda: fn(np, *inputs)
        out = np.empty(case.out_shape(n, matmul_n), case.out_dtype)
        return lambda: fn(np, *inputs, out=out)

    def prepare_random(self, case, inputs, n, matmul_n):
        """numpy.random.Generator(Philox), the bit generator family of
        lf_random (its own stream: the check compares moments), made once
        and drawing on, as a NumPy user writes it."""
        np = self.np
        rng = np.random.Generator(np.random.Philox(RANDOM_SEED[case.name]))
        out = np.empty(case.out_shape(n, matmul_n), np.float32)
        if case.name == 'random_fill':
            return lambda: rng.random(out=out, dtype=np.float32)
        (x,) = inputs
        z = np.empty_like(out)

        def random_fused():
            rng.standard_normal(out=z, dtype=np.float32)
            np.multiply(z, np.float32(0.1), out=z)
            return np.add(x, z, out=out)
        return random_fused


def blas_name(np):
    """Which BLAS library this NumPy loads, as far as /proc/self/maps says."""
    try:
        with open('/proc/self/maps') as f:
            paths = {line.split()[-1] for line in f if 'blas' in line.lower() and '/' in line}
        libs = {'/'.join(os.path.realpath(p).split('/')[-2:]) for p in paths
                if os.path.basename(os.path.realpath(p)).startswith('lib')}
        return ', '.join(sorted(libs)) or 'unknown BLAS'
    except OSError:
        return 'unknown BLAS'


class NumPyBlas(NumPy):
    name = 'numpy_blas'
    how = 'matmul only: numpy.matmul (A @ B) through BLAS sgemm'

    def version(self):
        return f'{self.np.__version__}, {blas_name(self.np)}'

    def prepare(self, case, inputs, n, matmul_n):
        np = self.np
        if case.name != 'matmul_zip_reduce':
            raise NotApplicable('matmul only')
        a, b = inputs
        out = np.empty((matmul_n, matmul_n), np.float32)
        return lambda: np.matmul(a, b, out=out)


PEERS = [NumPy(), NumPyBlas()]
