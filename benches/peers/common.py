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


class Case:
    """One lazyfuse-bench case: its inputs (seed, range; shape from the size)
    and the tolerance of lazyfuse-bench's own fused/unfused check."""

    def __init__(self, name, inputs, shape, tol, reduction=False):
        self.name = name
        self.input_specs = inputs      # [(seed, lo, hi)]
        self.shape = shape             # 'elem', 'rows' or 'matmul'
        self.tol = tol
        self.reduction = reduction     # output is not elementwise

    def dims(self, n, matmul_n):
        """Shape of each input for lazyfuse-bench's --n N (matmul: --matmul-n)."""
        if self.shape == 'rows':
            return (SOFTMAX_ROWS, max(1, n // SOFTMAX_ROWS))
        if self.shape == 'matmul':
            return (matmul_n, matmul_n)
        return (n,)

    def reported_n(self, n, matmul_n):
        """The "n" lazyfuse-bench reports for this case."""
        if self.shape == 'matmul':
            return matmul_n
        return int(np.prod(self.dims(n, matmul_n)))

    def make_inputs(self, n, matmul_n):
        d = self.dims(n, matmul_n)
        count = int(np.prod(d))
        return [lcg_f32(count, lo, hi, seed).reshape(d) for (seed, lo, hi) in self.input_specs]

    def out_shape(self, n, matmul_n):
        if self.name == 'sum_of_squares':
            return ()
        return self.dims(n, matmul_n)


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
]
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

def max_rel_diff(a, b):
    """lazyfuse-bench's comparison of a against the baseline b: the largest
    |a - b| / max(|a|, |b|, 1e-3 * max finite |b|); NaN matches only NaN, an
    infinity only itself (else inf)."""
    a = np.asarray(a, dtype=np.float64).ravel()
    b = np.asarray(b, dtype=np.float64).ravel()
    if a.shape != b.shape:
        return math.inf
    na, nb = np.isnan(a), np.isnan(b)
    if np.any(na != nb):
        return math.inf
    keep = ~na
    a, b = a[keep], b[keep]
    if a.size == 0:
        return 0.0
    fin = np.isfinite(b)
    scale = float(np.max(np.abs(b[fin]))) if np.any(fin) else 0.0
    floor = max(scale * 1e-3, np.finfo(np.float64).tiny)
    eq = a == b
    if np.any(~eq & (np.isinf(a) | np.isinf(b))):
        return math.inf
    m = np.maximum(np.maximum(np.abs(a), np.abs(b)), floor)
    d = np.where(eq, 0.0, np.abs(a - b) / m)
    return float(np.max(d))


# ---- timing ----------------------------------------------------------------------

def pick_reps(fixed, one_s):
    if fixed:
        return fixed
    r = math.ceil(AUTO_REPS_SECONDS / one_s) if one_s > 0 else AUTO_REPS_MAX
    return max(AUTO_REPS_MIN, min(AUTO_REPS_MAX, r))


def measure(call, time_one, fixed_reps):
    """call() runs the case once; time_one(call) runs and times it once,
    waiting for the device when there is one. Returns (first_s, median_s,
    reps): first_s is the first call (compilation included), excluded from
    the median, as is the warm-up that sizes the repetitions."""
    first_s = time_one(call)
    warm = time_one(call)
    reps = pick_reps(fixed_reps, warm)
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
    return max(case.tol, PEER_TOL)


class NotApplicable(Exception):
    """The system has no sensible way to write this case (the reason says why)."""
