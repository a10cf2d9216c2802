"""NumPy, unfused: every op a separate pass that allocates its result (the
temporaries a NumPy user pays for); the last op writes into a preallocated
output with out=. numpy_blas: matmul only, A @ B through the BLAS NumPy is
linked with (a different algorithm from the zip-reduce, shown for scale)."""
import os

import arrayapi
from base import Peer, SkipPeer
from common import NotApplicable


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
        fn = arrayapi.for_case(case.name)
        if case.name in ('sum_of_squares', 'matmul_zip_reduce'):
            return lambda: fn(np, *inputs)
        out = np.empty(case.out_shape(n, matmul_n), np.float32)
        return lambda: fn(np, *inputs, out=out)


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
