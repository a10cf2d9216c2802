"""NumPy, unfused: every op a separate pass that allocates its result (the
temporaries a NumPy user pays for); the last op writes into a preallocated
output with out=. numpy_blas: the contraction cases only, A @ B through the
BLAS NumPy is linked with (a different algorithm from the zip-reduce, shown
for scale), with the other cases' elementwise prologue or epilogue as NumPy
passes of their own."""
import os

import arrayapi
from base import Peer, SkipPeer
from common import MATMUL_CASES, SPCA_K, NotApplicable

# The literal zip-reduce materializes the I x J x K product: above this many
# bytes (a side of 512 is 512 MiB; 1024 would be 4 GiB) the numpy peer says
# n/a rather than exhaust a shared machine's memory.
PRODUCT_MAX_BYTES = 1 << 30

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
        if case.name in SORTS:
            return SORTS[case.name](np, *inputs)
        fn = arrayapi.for_case(case.name)
        if case.product_bytes(matmul_n) > PRODUCT_MAX_BYTES:
            raise NotApplicable(f'the zip-reduce product would be {case.product_bytes(matmul_n) / 2**30:.0f} GiB '
                                f'(over {PRODUCT_MAX_BYTES >> 30} GiB)')
        if case.name in ('sum_of_squares', 'gather_rows', 'histogram') or case.name in MATMUL_CASES:
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
    how = ('contractions only: numpy.matmul (A @ B) through BLAS sgemm/sgemv, the prologue or epilogue '
           'as separate NumPy passes')

    def version(self):
        return f'{self.np.__version__}, {blas_name(self.np)}'

    def prepare(self, case, inputs, n, matmul_n):
        np = self.np
        if case.name not in MATMUL_CASES:
            raise NotApplicable('contractions only')
        out = np.empty(case.out_shape(n, matmul_n), np.float32)
        if case.name in ('matmul_zip_reduce', 'batched_matmul', 'matvec'):
            a, b = inputs
            return lambda: np.matmul(a, b, out=out)
        if case.name == 'matmul_bias_relu':
            a, b, bias = inputs

            def bias_relu():
                np.matmul(a, b, out=out)
                np.add(out, bias, out=out)
                return np.maximum(out, np.float32(0), out=out)
            return bias_relu
        a, b, s = inputs  # matmul_scaled: the scaled A is a temporary, as a user writes it
        return lambda: np.matmul(a * s[:, None], b, out=out)


# ---- issue 15: sorts, top-k and the seed's sparse PCA -------------------------
# lazyfuse's order is NumPy's stable one (NaN last, ties lower index first).
# sort_f32 times NumPy's default kind (its fastest: SIMD quicksort, about 10x
# its stable sort on float32 here): sorted values do not depend on
# stability (the inputs hold no -0.0 or NaN), so the check stays exact.
# argsort_rows needs the stable kind to give the same positions on ties
# (the keys are 24-bit values, so ties are many); on these rows it is as
# fast as the default quicksort (1.10 s against 1.18 s, measured apart).

def sort_f32(np, x):
    return lambda: np.sort(x)


def argsort_rows(np, x):
    return lambda: np.argsort(x, axis=1, kind='stable')


def topk_rows(np, x, k=SPCA_K):
    """np.argpartition for the k largest of each row, then those k sorted
    (largest first, ties to the lower index): values and indices."""
    def call():
        part = np.argpartition(-x, k - 1, axis=1)[:, :k]
        v = np.take_along_axis(x, part, 1)
        order = np.lexsort((part, -v))          # by -v, then by index
        return np.take_along_axis(v, order, 1), np.take_along_axis(part, order, 1)
    return call


def spca_seed_loop(np, vd, c_all, k=SPCA_K):
    """The seed talk's spca_unopt as written (a Python loop over samples,
    np.argsort per sample, the seed's strict >), on lazyfuse's samples
    instead of np.random.randn, in float32. Seconds at 64000 samples, so it
    runs once (first_s = median_s, reps 1)."""
    p = vd.shape[0]

    def call():
        opt_x = np.zeros((p, 1), np.float32)
        opt_v = -np.inf
        for i in range(1, c_all.shape[1] + 1):
            c = c_all[:, i - 1:i]
            c = c / np.linalg.norm(c)
            a = vd.dot(c)
            idx = np.argsort(a, axis=0)
            val = np.linalg.norm(a[idx[-k:]])
            if val > opt_v:
                opt_v = val
                opt_x = np.zeros((p, 1), np.float32)
                opt_x[idx[-k:]] = a[idx[-k:], :] / val
        return opt_x.ravel()
    call.once = True
    return call


SPCA_BLOCK = 4096  # samples per batch of the vectorised variant ([p, 4096] f32: 16 MB)


def spca_batched(np, vd, c_all, k=SPCA_K):
    """The same algorithm vectorised over blocks of samples: normalise,
    A = Vd @ Cn (BLAS), np.argpartition for the top k of each column, their
    norms, the first best sample (np.argmax; a later block wins only when
    strictly larger), then the scatter into opt_x."""
    p, s_all = vd.shape[0], c_all.shape[1]

    def call():
        best_v, best_x = -np.inf, None
        for lo in range(0, s_all, SPCA_BLOCK):
            c = c_all[:, lo:lo + SPCA_BLOCK]
            cn = c / np.sqrt(np.sum(c * c, axis=0, keepdims=True))
            a = vd @ cn                                   # [p, B]
            idx = np.argpartition(a, p - k, axis=0)[p - k:]   # [k, B]
            top = np.take_along_axis(a, idx, 0)
            val = np.sqrt(np.sum(top * top, axis=0))
            b = int(np.argmax(val))
            if val[b] > best_v:
                best_v = val[b]
                best_x = np.zeros(p, np.float32)
                best_x[idx[:, b]] = top[:, b] / val[b]
        return best_x
    return call


def argsort_1d(np, x):
    """np.argsort's default kind (its fastest, not stable): checked as a
    permutation that orders the keys (common.argsort_compare)."""
    return lambda: np.argsort(x)


SORTS = {'sort_f32': sort_f32, 'argsort_rows': argsort_rows, 'topk_rows': topk_rows,
         'spca': spca_seed_loop}
SORTS.update({f'sort_{d}': sort_f32 for d in ('normal', 'sorted', 'reversed', 'few')})
SORTS.update({f'argsort_{d}': argsort_1d for d in ('f32', 'normal', 'sorted', 'reversed', 'few')})


class NumPyBatched(NumPy):
    name = 'numpy_batched'
    how = "spca only: the seed's algorithm vectorised over blocks of 4096 samples (BLAS, argpartition)"

    def prepare(self, case, inputs, n, matmul_n):
        if case.name != 'spca':
            raise NotApplicable('spca only')
        return spca_batched(self.np, *inputs)


PEERS = [NumPy(), NumPyBatched(), NumPyBlas()]
