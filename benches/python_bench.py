#!/usr/bin/env python3
"""benches/python_bench.py: the Python package measured against C, NumPy and numexpr (issue 28).

    python_bench.py [--sweep 24[,26]] [--cases LIST] [--reps R] [--threads T]
                    [--bench PATH] [--json OUT] [--markdown OUT] [--no-overhead] [--no-cases]

Run with an interpreter that has lazyfuse (PYTHONPATH=python and
LAZYFUSE_LIBRARY=build/liblazyfuse.so for a build tree), NumPy and numexpr.
Two parts, one process, so the ratios are taken in one run on a shared machine:

1. Per-call overhead on tiny arrays (n = 10; the lazy case 16 elements):
   lazyfuse.evaluate('y*z+1') of a cached program (the same arrays each call,
   and two pairs of arrays in turn, so that each call binds new inputs),
   numexpr.evaluate of the same string (likewise), `float(lazyfuse.sum(a*s + 1))` with a new Python float s at
   each call (a cached lazy-array program: rebound, its constant set), and
   NumPy's `y*z + 1`. The systems take turns: 7 rounds, each a timed batch of
   calls per system; the row is the median of the rounds' per-call times.
2. The seed cases at n = 2^e for each e of --sweep (default 24), on the
   float32 inputs tools/seed_examples.c makes (common.lcg_f32):
   "C lf_eval, same graph" (the reference: lf_eval alone, called through cffi
   on the graph evaluate built and cached, into the same output array, in
   this process and its thread pool, timed in the same rounds as the others),
   lazyfuse.evaluate (numexpr_peer's expression strings, the
   constants as float32 variables, out= a preallocated array), the lazy arrays
   (peers/arrayapi.py's functions with xp = lazyfuse, then lazyfuse.compute;
   a new output buffer per call, as an Array API user gets), NumPy
   (arrayapi.py with out=, the NumPy peer's way) and numexpr (its peer's
   expression with out=). The Python systems take turns, one call each per
   round, after one untimed call each (compilation); each row is the median.
   Every result is checked against NumPy's (max relative difference, the
   peers' measure and tolerance); a "!" marks a miss. numexpr's sum() of
   float32 accumulates in float32 and misses by percents at these sizes
   (NumPy sums pairwise; lazyfuse accumulates float sums in double): shown,
   not an error of this run. Last, unless --no-c-bench, lazyfuse-bench's
   fused median of the case (seed_examples.c's graph, which is not always
   evaluate's: its own process, run after the rounds), for reference.

Output: a table per part on stdout (time, and in brackets the time over the
row's reference: numexpr's for part 1, the in-process C lf_eval's for part 2), the same
rows as JSON lines (--json), and the tables as Markdown (--markdown). The
machine's load average is printed before and after: report it with the
figures. Exit status 0, or 1 when a lazyfuse result failed its check.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, 'peers'))

import numpy as np  # noqa: E402

import arrayapi  # noqa: E402
import common  # noqa: E402
import numexpr_peer  # noqa: E402

VERSIONS = {}  # the peers' versions in this run (put on each row of part 2)

# the cases every Python system here can express (elementwise and a full reduction)
CASES = ['gaussian_pdf', 'polar_distance', 'hypot', 'triad', 'chain8', 'sum_of_squares']


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--sweep', default='24', help='comma list of exponents of 2 (default 24)')
    p.add_argument('--cases', default=','.join(CASES), help='comma list (default: %(default)s)')
    p.add_argument('--reps', type=int, default=7, help='timed rounds per case (default 7)')
    p.add_argument('--threads', type=int, default=0, help='threads of every system (default: all CPUs)')
    p.add_argument('--bench', default=os.path.join(HERE, '..', 'build', 'benches', 'lazyfuse-bench'),
                   help='the lazyfuse-bench binary (default build/benches/lazyfuse-bench)')
    p.add_argument('--json', metavar='OUT', help='write the rows as JSON lines here')
    p.add_argument('--markdown', metavar='OUT', help='write the tables as Markdown here')
    p.add_argument('--no-overhead', action='store_true', help='skip part 1')
    p.add_argument('--no-cases', action='store_true', help='skip part 2')
    p.add_argument('--no-c-bench', action='store_true', help="part 2 without lazyfuse-bench's column")
    a = p.parse_args(argv)
    a.sweep = [int(e) for e in a.sweep.split(',') if e]
    a.cases = [c for c in a.cases.split(',') if c]
    bad = [c for c in a.cases if c not in CASES]
    if bad:
        p.error(f'unknown case(s) {bad}; choose from {CASES}')
    return a


def loadavg():
    try:
        return ' '.join(open('/proc/loadavg').read().split()[:3])
    except OSError:
        return 'n/a'


def fmt(s):
    if s is None:
        return 'n/a'
    if s < 1e-3:
        return f'{s * 1e6:.1f} us'
    if s < 1:
        return f'{s * 1e3:.2f} ms'
    return f'{s:.2f} s'


# ---- part 1: per-call overhead ---------------------------------------------------------------

def overhead(lf, ne, rounds=7, calls=2000):
    rng = np.random.default_rng(0)
    y, z = rng.random(10), rng.random(10)
    a = lf.asarray(rng.random(16))
    state = [0.5]

    def lazy():
        state[0] += 1e-6  # a new Python scalar each call: a run-time constant, no recompile
        return float(lf.sum(a * state[0] + 1))

    local = {'y': y, 'z': z}
    # two pairs of arrays taken in turn: every call binds other arrays than the last
    pairs = [{'y': rng.random(10), 'z': rng.random(10)}, {'y': rng.random(10), 'z': rng.random(10)}]
    turn = [0]

    def alternate(evaluate):
        def call():
            turn[0] ^= 1
            return evaluate('y*z+1', local_dict=pairs[turn[0]])
        return call

    systems = [
        ('lazyfuse evaluate', lambda: lf.evaluate('y*z+1', local_dict=local)),
        ('numexpr evaluate', lambda: ne.evaluate('y*z+1', local_dict=local)),
        ('lazyfuse lazy compute', lazy),
        ('numpy', lambda: y * z + 1),
        ('lazyfuse evaluate, other arrays each call', alternate(lf.evaluate)),
        ('numexpr evaluate, other arrays each call', alternate(ne.evaluate)),
    ]

    def frame_call(y=y, z=z):  # y and z are this frame's locals
        return lf.evaluate('y*z+1')

    # the frame-dict path too (numexpr's usual call: variables from the caller's frame)
    systems.insert(1, ('lazyfuse evaluate (frame)', frame_call))
    for _, f in systems:  # build, compile and warm up
        for _ in range(200):
            f()
    lf_first = lf.evaluate('y*z+1', local_dict=local)
    np.testing.assert_allclose(lf_first, y * z + 1, rtol=1e-15)
    times = {name: [] for name, _ in systems}
    for _ in range(rounds):
        for name, f in systems:
            t0 = time.perf_counter()
            for _ in range(calls):
                f()
            times[name].append((time.perf_counter() - t0) / calls)
    ref = statistics.median(times['numexpr evaluate'])
    rows = []
    for name, _ in systems:
        med = statistics.median(times[name])
        rows.append({'part': 'overhead', 'system': name, 'n': 16 if name == 'lazyfuse lazy compute' else 10,
                     'median_s': med, 'min_s': min(times[name]), 'max_s': max(times[name]),
                     'over_numexpr': med / ref, 'rounds': rounds, 'calls': calls})
    return rows


# ---- part 2: the seed cases ------------------------------------------------------------------

def c_median(bench, case, n, threads, reps):
    """lazyfuse-bench's fused median for case at n (its own repetitions)."""
    cmd = [bench, '--case', case, '--n', str(n), '--mode', 'fused', '--json', '--reps', str(max(reps, 5))]
    if threads:
        cmd += ['--threads', str(threads)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        if line.startswith('{'):
            r = json.loads(line)
            if r.get('case') == case and r.get('mode') == 'fused':
                return r['median_s'], r.get('threads')
    raise RuntimeError(f'lazyfuse-bench printed no fused row for {case}: {out[-500:]}')


def case_inputs(case, n):
    spec = next(c for c in common.CASES if c.name == case)
    return [common.lcg_f32(n, lo, hi, seed) for seed, lo, hi in spec.input_specs]


C_SAME = 'C lf_eval, same graph'  # part 2's reference: evaluate's own graph, lf_eval from this process


def c_graph_call(lf, expr, local, out):
    """A call that runs lf_eval, and nothing else, on the graph that
    lf.evaluate(expr, local_dict=local, out=out) has just built and cached:
    the same graph, inputs and output memory, this process and its thread
    pool; the C side of an evaluate call, timed in the same rounds as it."""
    from lazyfuse._ffi import ffi, lib
    ctx = lf.default_context()
    lf.evaluate(expr, local_dict=local, out=out)
    prog = next(reversed(ctx.programs.values()))  # the one evaluate just ran (most recently used last)
    if out is not None:
        h = lib.lf_buffer_wrap(ctx.handle, prog.lf_dtype, out.ndim, prog.shape_c, ffi.NULL,
                               ffi.from_buffer(out), ffi.NULL, ffi.NULL)
    else:
        h = lib.lf_buffer_new_like(ctx.handle, prog.result)
    if h == ffi.NULL:
        raise RuntimeError(f'c_graph_call: no output buffer: {ctx.errmsg()}')
    dsts = ffi.new('lf_buffer *[]', [h])
    keep = (prog, out)  # the graph and the wrapped memory live as long as the call

    def call():
        with ctx.calling():
            ctx.check(lib.lf_eval(keep[0].graph, 1, keep[0].outs_c, dsts), 'lf_eval')
        if out is not None:
            return out
        res = np.empty(prog.shape, prog.np_dtype)
        with ctx.calling():
            ctx.check(lib.lf_buffer_read(h, ffi.from_buffer(res), res.nbytes), 'read')
        return res
    return call


def case_systems(lf, ne, case, xs):
    """(name, call) for each Python system on case, the in-process C first."""
    expr, names = numexpr_peer.EXPRS[case]
    local = dict(numexpr_peer.K)
    local.update(zip(names, xs))
    fn = getattr(arrayapi, 'chain' if case.startswith('chain') else case)
    pre = (common.CHAIN_ROUNDS[case],) if case.startswith('chain') else ()
    reduction = case == 'sum_of_squares'
    out_np = None if reduction else np.empty_like(xs[0])
    out_ne = None if reduction else np.empty_like(xs[0])
    out_lf = None if reduction else np.empty_like(xs[0])
    lxs = [lf.asarray(x) for x in xs]

    def lf_evaluate():
        return lf.evaluate(expr, local_dict=local, out=out_lf)

    def lf_lazy():
        return lf.compute(fn(lf, *pre, *lxs))

    def numpy_call():
        return fn(np, *pre, *xs, out=out_np)

    def numexpr_call():
        return ne.evaluate(expr, local_dict=local, out=out_ne)

    return [(C_SAME, c_graph_call(lf, expr, local, out_lf)), ('lazyfuse evaluate', lf_evaluate),
            ('lazyfuse lazy', lf_lazy), ('numpy', numpy_call), ('numexpr', numexpr_call)]


def run_case(lf, ne, args, case, e):
    n = 1 << e
    xs = case_inputs(case, n)
    systems = case_systems(lf, ne, case, xs)
    results = {}
    for name, f in systems:  # first calls: compilation, page faults of the outputs
        results[name] = np.asarray(f()).copy()
    ref = results['numpy']
    tol = common.peer_tol(next(c for c in common.CASES if c.name == case))
    checks = {name: float(common.max_rel_diff(np.asarray(r, np.float64), np.asarray(ref, np.float64)))
              for name, r in results.items()}
    del results
    times = {name: [] for name, _ in systems}
    for _ in range(args.reps):
        for name, f in systems:
            t0 = time.perf_counter()
            r = f()
            times[name].append(time.perf_counter() - t0)
            del r
    c_s = statistics.median(times[C_SAME])
    rows = []
    if not args.no_c_bench:
        b_s, b_threads = c_median(args.bench, case, n, args.threads, args.reps)
        rows.append({'part': 'cases', 'case': case, 'n': n, 'system': 'lazyfuse-bench (C)', 'median_s': b_s,
                     'over_c': b_s / c_s, 'threads': b_threads, 'check': 'n/a',
                     'note': "seed_examples.c's graph, another process, timed after the rounds"})
    for name, _ in systems:
        med = statistics.median(times[name])
        rows.append({'part': 'cases', 'case': case, 'n': n, 'system': name, 'median_s': med,
                     'over_c': med / c_s, 'reps': args.reps, 'max_rel_diff': checks[name],
                     'check': 'ok' if checks[name] <= tol else 'MISMATCH', 'versions': VERSIONS})
    return rows


# ---- tables ----------------------------------------------------------------------------------

def overhead_table(rows):
    out = ['| system (per call, cached) | n | median | ratio to numexpr evaluate |', '|---|---|---|---|']
    for r in rows:
        out.append(f"| {r['system']} | {r['n']} | {fmt(r['median_s'])} | {r['over_numexpr']:.2f} |")
    return out


def cases_table(rows):
    systems = [C_SAME, 'lazyfuse evaluate', 'lazyfuse lazy', 'numpy', 'numexpr', 'lazyfuse-bench (C)']
    out = ['| case | n | ' + ' | '.join(systems) + ' |', '|---|---|' + '---|' * len(systems)]
    keys = []
    for r in rows:
        if (r['case'], r['n']) not in keys:
            keys.append((r['case'], r['n']))
    for case, n in keys:
        cells = []
        for s in systems:
            r = next((r for r in rows if r['case'] == case and r['n'] == n and r['system'] == s), None)
            if r is None:
                cells.append('n/a')
            else:
                bang = ' !' if r.get('check') == 'MISMATCH' else ''
                cells.append(f"{fmt(r['median_s'])} ({r['over_c']:.2f}){bang}")
        out.append(f"| python: {case} | 2^{n.bit_length() - 1} | " + ' | '.join(cells) + ' |')
    return out


def main(argv):
    args = parse_args(argv)
    import lazyfuse as lf
    import numexpr as ne
    VERSIONS.update(numpy=np.__version__, numexpr=ne.__version__, python=sys.version.split()[0])
    if args.threads:
        lf.set_num_threads(args.threads)
        ne.set_num_threads(args.threads)
    head = [f'python_bench: {sys.executable}, numpy {np.__version__}, numexpr {ne.__version__}, '
            f'lazyfuse from {os.path.dirname(lf.__file__)}, threads {args.threads or os.cpu_count()}',
            f'command: {" ".join([os.path.basename(sys.argv[0])] + argv)}',
            f'load average at start: {loadavg()}']
    print('\n'.join(head), flush=True)
    rows, md = [], list(head)
    if not args.no_overhead:
        ov = overhead(lf, ne)
        rows += ov
        t = overhead_table(ov)
        print('\n'.join(t), flush=True)
        md += ['', '### Per-call overhead', ''] + t
    if not args.no_cases:
        cr = []
        for e in args.sweep:
            for case in args.cases:
                print(f'  {case} n=2^{e} (load {loadavg()})', file=sys.stderr, flush=True)
                cr += run_case(lf, ne, args, case, e)
        rows += cr
        t = cases_table(cr)
        print('\n'.join(t), flush=True)
        md += ['', f'### Seed cases (time, and in brackets the time over {C_SAME}\'s)', ''] + t
    tail = f'load average at end: {loadavg()}'
    print(tail)
    md += ['', tail]
    if args.json:
        with open(args.json, 'w') as f:
            for r in rows:
                f.write(json.dumps(r) + '\n')
    if args.markdown:
        with open(args.markdown, 'w') as f:
            f.write('\n'.join(md) + '\n')
    bad = [r for r in rows if r.get('check') == 'MISMATCH']
    for r in bad:
        print(f"MISMATCH: {r['system']} on {r['case']} n={r['n']}: max rel diff {r['max_rel_diff']:.3g}",
              file=sys.stderr)
    return 1 if any(r['system'].startswith('lazyfuse') for r in bad) else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
