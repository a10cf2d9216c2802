"""benches/peers/common.py: what every peer shares.

- CASES: the lazyfuse-bench cases, their inputs and tolerances. The inputs are
  exactly the ones tools/seed_examples.c makes (same linear congruential
  sequence, same float32 rounding), so a peer computes the same case on the
  same data; its output is then checked against the output lazyfuse-bench
  saved with --save-outputs.
- max_rel_diff: lazyfuse-bench's comparison, in NumPy.
- measure: first call (compile, timed apart), one warm-up that sizes the
  repetitions (as lazyfuse-bench: ~0.5 s worth, 5..200), then each repetition
  timed alone; the median is reported.

Only the standard library and NumPy are used here; the peers import their
own system lazily, so a missing one is skipped with a message.
"""
import math
import statistics
import time

import numpy as np

F32 = np.float32

AUTO_REPS_SECONDS = 0.5
AUTO_REPS_MIN = 5
AUTO_REPS_MAX = 200
SOFTMAX_ROWS = 4096
BATCH = 8            # batched_matmul: BATCH products of side matmul_n // 2 (seed_examples.h)


# ---- inputs: tools/seed_examples.c's input_f32 --------------------------------

def lcg_f32(count, lo, hi, seed):
    """The float32 values input_f32(..., lo, hi, seed) fills a buffer with:
        s = seed * 2654435761 + 1;  per element: s = s * 1664525 + 1013904223;
        x = lo + (hi - lo) * (float)(s >> 8) * (1.0f / 16777216.0f)
    all in uint32 / float32. The sequence is computed by doubling (the affine
    map for k steps applied to the first k values gives the next k), so it
    costs O(count) NumPy work, not a Python loop."""
    mask = 0xFFFFFFFF
    a, c = 1664525, 1013904223
    s = np.empty(count, dtype=np.uint32)
    if count == 0:
        return s.astype(F32)
    s0 = (seed * 2654435761 + 1) & mask
    s[0] = (a * s0 + c) & mask
    k, ak, ck = 1, a, c  # (ak, ck): the map for k steps
    while k < count:
        m = min(k, count - k)
        np.multiply(s[:m], np.uint32(ak), out=s[k:k + m])
        s[k:k + m] += np.uint32(ck)
        ak, ck = (ak * ak) & mask, (ak * ck + ck) & mask
        k += m
    u = (s >> np.uint32(8)).astype(F32)
    lo32, hi32 = F32(lo), F32(hi)
    u *= F32(hi32 - lo32)           # (hi - lo) * (float)(s >> 8), rounded to float
    u *= F32(1.0 / 16777216.0)      # exact: a power of two
    u += lo32
    return u


# ---- index inputs: tools/seed_examples.c's input_index --------------------------

U64 = np.uint64
_M64 = 0xFFFFFFFFFFFFFFFF


def mix64(z):
    """splitmix64's finalizer on a uint64 array (wrapping arithmetic)."""
    z = np.asarray(z, dtype=U64)
    with np.errstate(over='ignore'):
        z = (z ^ (z >> U64(30))) * U64(0xbf58476d1ce4e5b9)
        z = (z ^ (z >> U64(27))) * U64(0x94d049bb133111eb)
    return z ^ (z >> U64(31))


def _mix64_int(z):
    return int(mix64(np.array([z & _M64], dtype=U64))[0])


def permute_bits(v, bits, key):
    """seed_examples.c's permute_bits: a bijection of [0, 2^bits)."""
    mask = U64(_M64 if bits >= 64 else (1 << bits) - 1)
    sh = U64(max(bits // 2, 1))
    with np.errstate(over='ignore'):
        for r in range(3):
            v = (v * U64(0x9e3779b97f4a7c15 | 1) + U64(key >> (r * 16))) & mask
            v = v ^ (v >> sh)
            v = (v * U64(_mix64_int(key + r) | 1)) & mask
    return v


def index_input(count, perm, rng, seed, dtype):
    """The values input_index(..., perm, range, seed) fills a buffer with: a
    permutation of 0..count-1 (cycle walking over a bijection of the next
    power of two), or mix64(seed * 2^32 + i) >> 11 modulo rng."""
    i = np.arange(count, dtype=U64)
    if perm:
        bits = 1
        while bits < 63 and (1 << bits) < count:
            bits += 1
        key = _mix64_int(seed)
        w = permute_bits(i, bits, key)
        out = w >= U64(count)
        while np.any(out):
            w[out] = permute_bits(w[out], bits, key)
            out = w >= U64(count)
        v = w
    else:
        with np.errstate(over='ignore'):
            v = (mix64(i + U64(seed << 32)) >> U64(11)) % U64(rng)
    return v.astype(dtype)


class Case:
    """One lazyfuse-bench case: its inputs (shape from the size) and the
    tolerance of lazyfuse-bench's own fused/unfused check. An input spec is
    (seed, lo, hi) for tools/seed_examples.c's input_f32, (seed, lo, hi,
    'vec') for one of the last extent's length (layer_norm's gamma and beta,
    a matmul's bias, row scale or vector), or ('perm', seed,
    dtype) / ('index', seed, dtype) for its input_index (a permutation of the
    whole input, or uniform in 0..last extent-1). check: 'values' compares
    with lazyfuse's output (common.max_rel_diff; exact for integers), 'moments'
    (random numbers from another generator) only the mean and the standard
    deviation (see moments_diff)."""

    def __init__(self, name, inputs, shape, tol, reduction=False, out_dtype=np.float32, out_shape=None,
                 check='values', reports_n=False, make=None, compare=None):
        self.name = name
        self.reports_n = reports_n     # lazyfuse-bench reports --n, not the element count
        self.input_specs = inputs      # [(seed, lo, hi)] or [('perm' | 'index', seed, dtype)]
        self.shape = shape             # 'elem', 'rows', 'matmul', 'batched' or 'samples'
        self.tol = tol
        self.reduction = reduction     # output is not elementwise
        self.out_dtype = np.dtype(out_dtype)
        self.fixed_out_shape = out_shape
        self.check = check
        # issue 15's cases: make(n, ref_path) -> inputs, when they are not all
        # seed_examples.c's (spca reads lazyfuse's samples from its saved
        # output 1); compare(result, ref_path, n, inputs) -> (diff, tol, how),
        # for several outputs or exact checks with ties
        self.make = make
        self.compare = compare

    def dims(self, n, matmul_n):
        """Shape of each input for lazyfuse-bench's --n N (matmul: --matmul-n)."""
        if self.shape == 'rows':
            return (SOFTMAX_ROWS, max(1, n // SOFTMAX_ROWS))
        if self.shape == 'matmul':
            return (matmul_n, matmul_n)
        if self.shape == 'batched':
            m = max(1, matmul_n // 2)
            return (BATCH, m, m)
        if self.shape == 'samples':
            return (n, SPCA_P)
        return (n,)

    def reported_n(self, n, matmul_n):
        """The "n" lazyfuse-bench reports for this case."""
        if self.shape in ('matmul', 'batched'):
            return matmul_n
        if self.reports_n:
            return n
        return int(np.prod(self.dims(n, matmul_n)))

    def make_inputs(self, n, matmul_n, ref_path=None):
        if self.make is not None:
            return self.make(n, ref_path)
        d = self.dims(n, matmul_n)
        count = int(np.prod(d))
        made = []
        for spec in self.input_specs:
            if spec[0] in ('perm', 'index'):
                kind, seed, dtype = spec
                made.append(index_input(count, kind == 'perm', d[-1], seed, dtype).reshape(d))
            elif len(spec) == 4 and spec[3] == 'vec':
                seed, lo, hi, _ = spec
                made.append(lcg_f32(d[-1], lo, hi, seed))
            else:
                seed, lo, hi = spec
                made.append(lcg_f32(count, lo, hi, seed).reshape(d))
        return made

    def out_shape(self, n, matmul_n):
        if self.name == 'sum_of_squares':
            return ()
        if self.name == 'spca':
            return (SPCA_P,)
        if self.name == 'topk_rows':
            return (n, SPCA_K)
        if self.fixed_out_shape is not None:
            return self.fixed_out_shape
        if self.name == 'matvec':
            return (matmul_n,)
        if self.name == 'stencil5x5':
            s = int(math.isqrt(n))
            return (s, s)
        if self.name == 'embedding':
            return (max(1, n // EMBED_DIM), EMBED_DIM)
        if self.name == 'kmeans_assign':
            return (max(1, n // KMEANS_D),)
        return self.dims(n, matmul_n)

    def flops(self, matmul_n):
        """2 x the multiply-adds of a contraction case (GFLOP/s), else None."""
        m = matmul_n
        if self.name == 'matvec':
            return 2.0 * m * m
        if self.shape == 'batched':
            b = max(1, m // 2)
            return 2.0 * BATCH * b ** 3
        if self.shape == 'matmul':
            return 2.0 * m ** 3
        return None

    def product_bytes(self, matmul_n):
        """Bytes of the broadcast product a literal zip-reduce materializes
        (NumPy's A[:, :, None] * B[None]), else 0."""
        if self.shape == 'batched':
            b = max(1, matmul_n // 2)
            return BATCH * b ** 3 * 4
        if self.shape == 'matmul' and self.name != 'matvec':
            return matmul_n ** 3 * 4
        return 0

    def out_bytes(self, n, matmul_n):
        return int(np.prod(self.out_shape(n, matmul_n), dtype=np.int64)) * self.out_dtype.itemsize


# ---- issue 15: sorts, top-k and the seed's sparse PCA --------------------------
# lazyfuse-bench's constants (benches/lazyfuse_bench.c, tools/spca.h)
SPCA_P, SPCA_D, SPCA_K = 1000, 3, 10    # features (also topk_rows' row length), d, k
SPCA_VD_SEED = 61                        # Vd [p, d] = lcg_f32(p * d, -1, 1, 61)


def ref_output(ref_path, k):
    """lazyfuse-bench's saved output k of a case (k > 0: CASE.k.f32)."""
    return ref_path if k == 0 else ref_path[:-len('.f32')] + f'.{k}.f32'


def spca_inputs(n, ref_path):
    """Vd [p, d] (seed_examples.c's LCG) and the samples C [d, n]: lazyfuse's
    own (its lf_random normal numbers, saved as spca.1.f32), or without a
    lazyfuse run NumPy's standard normal (the check is then n/a)."""
    vd = lcg_f32(SPCA_P * SPCA_D, -1, 1, SPCA_VD_SEED).reshape(SPCA_P, SPCA_D)
    if ref_path:
        c = np.fromfile(ref_output(ref_path, 1), dtype=F32).reshape(SPCA_D, n)
    else:
        c = np.random.default_rng(2014).standard_normal((SPCA_D, n), dtype=F32)
    return [vd, c]


def spca_compare(result, ref_path, n, inputs):
    """opt_x against lazyfuse's (a peer does its own float32 arithmetic and
    BLAS, so within PEER_TOL; another best sample is far off)."""
    ref = np.fromfile(ref_path, dtype=F32)
    return max_rel_diff(np.asarray(result, dtype=F32).ravel(), ref), PEER_TOL, 'opt_x values'


def topk_compare(result, ref_path, n, inputs):
    """Values exactly; indices exactly where the value is not tied in its
    row (with ties the order is defined, but argpartition may pick another
    of the tied positions at the boundary)."""
    values, indices = result
    rv = np.fromfile(ref_output(ref_path, 0), dtype=F32).reshape(n, SPCA_K)
    ri = np.fromfile(ref_output(ref_path, 1), dtype=np.int64).reshape(n, SPCA_K)
    if values.shape != rv.shape or not np.array_equal(values, rv):
        return math.inf, 0.0, 'values, and indices of untied values'
    s = -np.sort(-inputs[0], axis=1)[:, :SPCA_K + 1]   # each row's k + 1 largest, descending
    tied = np.zeros(rv.shape, bool)
    tied[:, 1:] |= s[:, 1:SPCA_K] == s[:, :SPCA_K - 1]
    tied |= s[:, :SPCA_K] == s[:, 1:SPCA_K + 1]
    bad = (indices != ri) & ~tied
    return (math.inf if np.any(bad) else 0.0), 0.0, 'values, and indices of untied values'


# issue 30: one row of n f32 keys in five distributions (lazyfuse_bench.c's
# sort_keys_fill, rebuilt bit for bit), sorted and argsorted
SORT_X_SEED = 43
SORT_DISTS = {'f32': 'uniform', 'normal': 'normal', 'sorted': 'sorted', 'reversed': 'reversed', 'few': 'few'}


def sort_keys(n, dist, seed=SORT_X_SEED):
    """uniform: lcg_f32 in [-1, 1); normal: the sum of 4 uniform streams
    (seeds seed..seed+3) in float64, rounded once to f32; sorted / reversed:
    the ramp 2i/n - 1 in float64 rounded to f32, up and down; few:
    floor(8u)/8 (16 distinct values)."""
    if dist in ('sorted', 'reversed'):
        i = np.arange(n, dtype=np.float64)
        if dist == 'reversed':
            i = (n - 1) - i
        return (i / n * 2.0 - 1.0).astype(F32)
    u = lcg_f32(n, -1, 1, seed)
    if dist == 'few':
        return (np.floor(u * F32(8)) / F32(8)).astype(F32)
    if dist == 'normal':
        acc = u.astype(np.float64)
        for k in range(1, 4):
            acc += lcg_f32(n, -1, 1, seed + k)
        return acc.astype(F32)
    return u


def sort_case_inputs(dist):
    return lambda n, ref_path: [sort_keys(n, dist)]


def argsort_compare(result, ref_path, n, inputs):
    """A peer's argsort (NumPy's default kind is not stable) is right when it
    is a permutation that orders the keys: x[idx] equals x[lazyfuse's idx]
    (lazyfuse's positions are the stable ones)."""
    x = inputs[0]
    idx = np.asarray(result).ravel()
    ref = np.fromfile(ref_path, dtype=np.int64)
    if idx.shape != ref.shape or idx.min(initial=0) < 0 or idx.max(initial=-1) >= n:
        return math.inf, 0.0, 'keys in the order of the positions'
    ok = np.array_equal(x[idx], x[ref]) and np.bincount(idx, minlength=n).max(initial=1) == 1
    return (0.0 if ok else math.inf), 0.0, 'keys in the order of the positions (a permutation)'


# issue 30's cases (tools/seed_examples.c: seeds, the stencils' weights, the
# embedding table's shape, k-means' sizes)
EMBED_ROWS, EMBED_DIM, KMEANS_D, KMEANS_K = 4096, 64, 16, 16


def stencil_weights(taps):
    """seed_stencil_weight: (t + 1) / (taps (taps + 1) / 2), each rounded to float32."""
    return [float(F32(t + 1) / F32(taps * (taps + 1) // 2)) for t in range(taps)]


def stencil5x5_inputs(n, ref_path):
    s = int(math.isqrt(n))  # lazyfuse-bench reports s * s
    return [lcg_f32((s + 4) * (s + 4), -1, 1, 79).reshape(s + 4, s + 4)]


def conv1d_inputs(n, ref_path):
    return [lcg_f32(n + 30, -1, 1, 83)]


def embedding_inputs(n, ref_path):
    m = max(1, n // EMBED_DIM)
    return [lcg_f32(EMBED_ROWS * EMBED_DIM, -1, 1, 97).reshape(EMBED_ROWS, EMBED_DIM),
            index_input(m, False, EMBED_ROWS, 11, np.int32)]


def kmeans_inputs(n, ref_path):
    m = max(1, n // KMEANS_D)
    return [lcg_f32(m * KMEANS_D, -1, 1, 101).reshape(m, KMEANS_D),
            lcg_f32(KMEANS_K * KMEANS_D, -1, 1, 103).reshape(KMEANS_K, KMEANS_D)]


def kmeans_compare(result, ref_path, n, inputs):
    """The centre a peer picks must be as near as lazyfuse's (distances in
    float64): a float32 sum in another order may pick another of two centres
    within rounding of each other."""
    x, c = (a.astype(np.float64) for a in inputs)
    got = np.asarray(result).ravel().astype(np.int64)
    ref = np.fromfile(ref_path, dtype=np.int64)
    if got.shape != ref.shape or got.min(initial=0) < 0 or got.max(initial=0) >= c.shape[0]:
        return math.inf, 0.0, 'distance to the chosen centre'
    dg = ((x - c[got]) ** 2).sum(axis=1)
    dr = ((x - c[ref]) ** 2).sum(axis=1)
    d = float(np.max(np.abs(dg - dr) / np.maximum(np.maximum(dg, dr), 1e-30), initial=0.0))
    return d, 1e-5, 'distance to the chosen centre (float64)'


def bincount2_compare(result, ref_path, n, inputs):
    """Counts exactly; the per-bin sums of x at PEER_TOL (lazyfuse's are
    float32, the weights' dtype; NumPy's float64)."""
    counts, sums = result
    rc = np.fromfile(ref_output(ref_path, 0), dtype=np.int64)
    rs = np.fromfile(ref_output(ref_path, 1), dtype=np.float32).astype(np.float64)
    if not np.array_equal(np.asarray(counts).astype(np.int64).ravel(), rc):
        return math.inf, 0.0, 'counts exactly, sums'
    return max_rel_diff(np.asarray(sums, dtype=np.float64).ravel(), rs), PEER_TOL, 'counts exactly, sums'


PI_F = 3.14159
CASES = [
    Case('gaussian_pdf', [(1, -3, 3)], 'elem', 1e-4),
    Case('polar_distance', [(2, 0.5, 1.5), (3, -PI_F, PI_F), (4, 0.5, 1.5), (5, -PI_F, PI_F)], 'elem', 1e-4),
    Case('hypot', [(6, -10, 10), (7, -10, 10)], 'elem', 1e-4),
    Case('triad', [(13, -1, 1), (14, -1, 1), (15, -1, 1)], 'elem', 1e-4),
    Case('chain8', [(16, -1, 1)], 'elem', 1e-4),
    Case('sum_of_squares', [(8, -1, 1)], 'elem', 1e-3, reduction=True),
    Case('softmax_rows', [(9, -4, 4)], 'rows', 1e-4, reduction=True),
    Case('matmul_zip_reduce', [(10, -1, 1), (11, -1, 1)], 'matmul', 1e-3, reduction=True),
    Case('chain32', [(12, -1, 1)], 'elem', 1e-4),
    Case('cumsum', [(23, -1, 1)], 'elem', 1e-4),
    Case('cumsum_rows', [(29, -1, 1)], 'rows', 1e-4),
    Case('scan_fused', [(31, -1, 1)], 'elem', 1e-4),
    # a peer draws its own random numbers (NumPy's Philox is another stream
    # from the same generator family), so only their distribution is checked
    Case('random_fused', [(17, -1, 1)], 'elem', 1e-4, check='moments'),
    Case('random_fill', [], 'elem', 1e-4, check='moments'),
    Case('gather_perm', [(23, -1, 1), ('perm', 5, np.int64)], 'elem', 0.0),
    Case('gather_rows', [(29, -1, 1), ('index', 7, np.int32)], 'rows', 0.0, reports_n=True),
    Case('histogram', [(31, 0, 1)], 'elem', 0.0, reduction=True, out_dtype=np.int64, out_shape=(256,)),
    # issue 15: the order is defined (stable, NaN last), so exactly
    Case('sort_f32', [(43, -1, 1)], 'elem', 0.0),
    Case('argsort_rows', [(47, -1, 1)], 'rows', 0.0, out_dtype=np.int64),
] + [Case(f'sort_{d}', [], 'elem', 0.0, make=sort_case_inputs(dist)) for d, dist in SORT_DISTS.items() if d != 'f32'] + [
    Case(f'argsort_{d}', [], 'elem', 0.0, out_dtype=np.int64, make=sort_case_inputs(dist), compare=argsort_compare)
    for d, dist in SORT_DISTS.items()] + [
    Case('topk_rows', [(53, -1, 1)], 'samples', 0.0, reduction=True, out_shape=None, reports_n=True,
         compare=topk_compare),
    Case('spca', [], 'samples', 1e-3, reduction=True, reports_n=True, make=spca_inputs,
         compare=spca_compare),
    # issue 16 (seed_examples.h's seeds): a row case and the contractions,
    # whose side is lazyfuse-bench's --matmul-n
    Case('layer_norm', [(67, -4, 4), (71, 0.5, 1.5, 'vec'), (73, -1, 1, 'vec')], 'rows', 1e-4, reduction=True),
    # issue 30 (lazyfuse-bench reports stencil5x5's n as s * s, embedding's and
    # kmeans_assign's as the elements of x or of the output)
    Case('stencil5x5', [], 'elem', 1e-4, reduction=True, make=stencil5x5_inputs,
         out_shape=None),
    Case('conv1d_31', [], 'elem', 1e-4, make=conv1d_inputs),
    Case('bincount2', [], 'elem', 0.0, reduction=True, make=lambda n, r: [lcg_f32(n, 0, 1, 89)],
         compare=bincount2_compare),
    Case('embedding', [], 'elem', 0.0, make=embedding_inputs),
    Case('kmeans_assign', [], 'elem', 0.0, reduction=True, out_dtype=np.int64, make=kmeans_inputs,
         compare=kmeans_compare),
    Case('matmul_bias_relu', [(10, -1, 1), (11, -1, 1), (79, -1, 1, 'vec')], 'matmul', 1e-3, reduction=True),
    Case('matmul_scaled', [(10, -1, 1), (11, -1, 1), (83, 0.5, 1.5, 'vec')], 'matmul', 1e-3, reduction=True),
    Case('batched_matmul', [(10, -1, 1), (11, -1, 1)], 'batched', 1e-3, reduction=True),
    Case('matvec', [(10, -1, 1), (89, -1, 1, 'vec')], 'matmul', 1e-3, reduction=True),
]
MATMUL_CASES = [c.name for c in CASES if c.shape in ('matmul', 'batched')]
CASE_BY_NAME = {c.name: c for c in CASES}

# chain8 / chain32 (seed_examples.c chain_ops): per round, in float32,
#   y = y * 0.99;  y = y + 0.01 * (round + 1);  y = abs(y);  y = y - 0.25
CHAIN_ROUNDS = {'chain8': 2, 'chain32': 8}
CHAIN_MUL = F32(0.99)
CHAIN_SUB = F32(0.25)


def chain_adds(rounds):
    """The float32 constants the rounds add (c32(g, 0.01 * (i + 1)))."""
    return [F32(0.01 * (i + 1)) for i in range(rounds)]


# ---- checking ------------------------------------------------------------------

# Elements per slice of max_rel_diff on the host (float64 temporaries of 8
# MiB, in cache) and on a device (128 MiB). The whole-array form made a dozen
# 512 MiB temporaries at 2^26 elements and took 4-8 s a check.
CHECK_CHUNK = 1 << 20
CHECK_CHUNK_DEVICE = 1 << 24


def max_rel_diff(a, b, xp=np):
    """lazyfuse-bench's comparison of a against the baseline b: the largest
    |a - b| / max(|a|, |b|, 1e-3 * max finite |b|); NaN matches only NaN, an
    infinity only itself (else inf). Computed in float64, slice by slice (two
    passes: the NaN positions and the scale, then the differences); with xp =
    cupy on the device, where a GPU peer's output already is."""
    a = xp.asarray(a).ravel()
    b = xp.asarray(b).ravel()
    if a.shape != b.shape:
        return math.inf
    n = a.size
    step = CHECK_CHUNK if xp is np else CHECK_CHUNK_DEVICE
    f64 = xp.float64
    scale = 0.0
    for i in range(0, n, step):
        ac, bc = a[i:i + step].astype(f64), b[i:i + step].astype(f64)
        if bool(xp.any(xp.isnan(ac) != xp.isnan(bc))):
            return math.inf
        bc = xp.abs(bc)
        scale = max(scale, float(xp.max(xp.where(xp.isfinite(bc), bc, 0.0))) if bc.size else 0.0)
    floor = max(scale * 1e-3, np.finfo(np.float64).tiny)
    worst = 0.0
    with np.errstate(invalid='ignore', over='ignore'):
        for i in range(0, n, step):
            ac, bc = a[i:i + step].astype(f64), b[i:i + step].astype(f64)
            if ac.size == 0:
                continue
            eq = ac == bc
            if bool(xp.any(~eq & (xp.isinf(ac) | xp.isinf(bc)))):
                return math.inf
            m = xp.maximum(xp.maximum(xp.abs(ac), xp.abs(bc)), floor)
            # NaN against NaN (the first pass made sure they pair up) counts 0
            d = xp.where(eq | xp.isnan(ac), 0.0, xp.abs(ac - bc) / m)
            worst = max(worst, float(xp.max(d)))
    return worst


# ---- timing ----------------------------------------------------------------------

def pick_reps(fixed, one_s):
    if fixed:
        return fixed
    r = math.ceil(AUTO_REPS_SECONDS / one_s) if one_s > 0 else AUTO_REPS_MAX
    return max(AUTO_REPS_MIN, min(AUTO_REPS_MAX, r))


def measure(call, time_one, fixed_reps, cap_s=0.0):
    """call() runs the case once; time_one(call) runs and times it once,
    waiting for the device when there is one. Returns (first_s, median_s,
    reps): first_s is the first call (compilation included), excluded from
    the median, as is the warm-up that sizes the repetitions. cap_s > 0
    bounds the timed repetitions to about cap_s seconds (at least 3), for a
    run with a time budget."""
    first_s = time_one(call)
    if getattr(call, 'once', False):  # too slow to repeat (the seed's spca loop)
        return first_s, first_s, 1
    warm = time_one(call)
    reps = pick_reps(fixed_reps, warm)
    if cap_s > 0 and warm > 0:
        reps = min(reps, max(3, int(cap_s / warm)))
    times = [time_one(call) for _ in range(reps)]
    return first_s, statistics.median(times), reps


def wall_timer(sync=None):
    """A time_one for the host clock; sync() (if any) waits for the device."""
    def time_one(call):
        t0 = time.perf_counter()
        call()
        if sync is not None:
            sync()
        return time.perf_counter() - t0
    return time_one


# A peer's output is checked against lazyfuse's with this tolerance (or the
# case's own, when looser): lazyfuse-bench's fused/unfused check allows 1e-4
# because both run the same arithmetic, but a peer has its own math library
# and may contract a*b+c into an FMA (XLA, NVRTC and Triton do by default),
# which moves the long chains by about 1e-4 in this measure. A wrong
# implementation is off by far more.
PEER_TOL = 1e-3


def peer_tol(case):
    if case.check == 'moments':
        return MOMENTS_TOL
    if case.tol == 0.0:  # gathers and histograms move values, or count them
        return 0.0
    return max(case.tol, PEER_TOL)


# random cases: the mean and the standard deviation of a peer's output may
# differ from lazyfuse's by this much, relative to lazyfuse's standard
# deviation. At n = 2^16 the sampling error of either is below 1.5% (5
# standard errors); a wrong distribution (say normal instead of uniform, or
# a missing 0.1 factor) is off by 30% or more.
MOMENTS_TOL = 0.02


def moments_diff(a, b):
    """The larger of |mean(a) - mean(b)| and |std(a) - std(b)|, over std(b)."""
    a = np.asarray(a, dtype=np.float64).ravel()
    b = np.asarray(b, dtype=np.float64).ravel()
    if a.shape != b.shape or not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        return math.inf
    if a.size == 0:
        return 0.0
    sd = float(np.std(b)) or 1.0
    return max(abs(float(np.mean(a)) - float(np.mean(b))), abs(float(np.std(a)) - float(np.std(b)))) / sd


class NotApplicable(Exception):
    """The system has no sensible way to write this case (the reason says why)."""
