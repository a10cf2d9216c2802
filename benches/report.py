#!/usr/bin/env python3
"""benches/report.py: the merged table of a benchmark run, its JSON, its
charts and benches/RESULTS.md. Standard library only. scripts/bench.sh runs it:

    report.py --backend cpu --lazyfuse RUN.jsonl --peers PEERS.jsonl [--python PY.jsonl]
              [--json results/cpu.json] [--charts DIR] [--results RESULTS.md]
              [--command CMD] [--started ISO-TIME]

- prints the merged table: rows are the cases, columns the systems (lazyfuse
  fused and unfused, then every peer that ran); each cell is the median time
  and, in brackets, that time over lazyfuse fused's (above 1: lazyfuse fused
  is faster). A "!" marks a result that failed its check against lazyfuse's
  output. With --python (python_bench.py's JSON lines), the Python package's
  seed-case rows follow as rows "python: CASE" (see PY_COLS);
- writes the run as one JSON document (--json): meta, the lazyfuse-bench
  lines, the peer lines, and the merged table;
- draws the charts (benches/chart.py) into --charts;
- regenerates RESULTS.md (--results) from benches/results/cpu.json and
  cuda.json, whichever exist next to --json: machine, date, command, merged
  table, charts, lazyfuse's own table, the issue-4 targets computed from the
  run, and where lazyfuse loses to a peer, with the reasons in WHY below.

    report.py --render-only --json benches/results/cpu.json --results benches/RESULTS.md

re-renders RESULTS.md (and the charts, with --charts) from saved JSON.
"""
import argparse
import datetime
import json
import math
import os
import platform
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import chart  # noqa: E402

CASES = chart.CASE_ORDER
LF_COLS = ['lazyfuse fused', 'lazyfuse unfused']
HAND = 'c_handfused'   # lazyfuse-bench's hand-written C reference (a column after lazyfuse's)
MATMUL_CASES = ('matmul_zip_reduce', 'matmul_bias_relu', 'matmul_scaled', 'batched_matmul', 'matvec')

# Why lazyfuse fused loses to a peer on a case, as analysed for the recorded
# run. Keyed by (case, system) or by case alone. A loss with no entry is
# reported as "not analysed". Each claim here must hold for the run it
# describes: rerun, check, edit.
WHY = {
    ('matmul_zip_reduce', 'numpy_blas'):
        "NumPy's `A @ B` is OpenBLAS's sgemm, a hand-tuned GEMM: it packs A and B into "
        'cache-sized panels and keeps a tile of C in float32 registers, updated with FMAs, so '
        'each value loaded feeds many multiply-adds. lazyfuse sees the zip-reduce as a '
        'reduction over the middle axis of a broadcast product and fuses it into one kernel '
        'that never stores the 256^3 product (the point of the case: unfused, NumPy and Numba '
        'are several times slower), but the kernel (`LF_DEBUG=source`) is a plain loop nest: per '
        'output row, in blocks of 256 columns, for each j it multiplies a[i,j] by a row of B '
        'and adds the products into 256 double accumulators kept in memory (lazyfuse '
        'accumulates float sums in double), loading and storing each accumulator for every '
        'j; B is re-read from cache for every row. No register tiling, no packing. Closing the '
        'gap needs either recognising contractions as GEMM or tiling reductions over a middle '
        'axis in registers.',
    ('gather_perm', 'numba_njit'):
        "Numba's loop `out[i] = x[p[i]]` checks no bounds (Numba's default) and takes about 5 "
        'instructions an element; lazyfuse checks every index (one unsigned compare and a '
        'branch), wraps negative ones and writes into the staging block an index check needs '
        '(swapped into the buffer afterwards, no copy). The loads of x at random positions of '
        '256 MiB miss every cache, and the core keeps only as many in flight as its reorder '
        'window holds, so the instructions per element set the speed: in a C experiment on '
        "this machine (2^24, one thread, the generated kernel as it was before its range check "
        'became one compare, against a plain loop in one process) the plain loop took about '
        'half the time (118 against 233 ms; 154-171 against 285-365 ms in three more runs). '
        'Closing it needs the checks out of the load loop: a block of indices checked with '
        'vector compares first, then gathered without branches.',
    ('histogram', 'numba_njit'):
        "Numba's loop (a private histogram per chunk, summed after) truncates floor(x*256) and "
        'increments without checks. lazyfuse computes the same bins through the cast node\'s '
        'definition (via double, NaN to 0, saturating), checks the bin against the range, and '
        'adds into the scatter\'s generic 16-byte partials (value and position) of its block, '
        'then combines the blocks: about twice the instructions per element around the '
        'increment, a read-modify-write in L1. Faster binning (several sub-histograms, or '
        'AVX-512 conflict detection) was not attempted.',
    ('check', 'sum_of_squares', 'numexpr'):
        "numexpr's `sum()` of a float32 expression returns float32 and, judging by its "
        'error, accumulates in float32 without pairwise summation: the error grows with n. Against a float64 sum of the same inputs '
        '(measured apart, numexpr 2.8.4): 4e-4 relative at 2^20, 2.9e-3 at 2^22, 2.1e-2 '
        "at 2^24, while NumPy's pairwise float32 sum stays within 5e-7 and lazyfuse "
        'accumulates float reductions in double. The time is shown, but it is the time '
        'of a less accurate answer.',
}

# Said under the near-ties (a peer within 25% of lazyfuse fused).
NEAR_NOTE = ('Numba\'s `@njit(parallel=True)` loop is itself one fused pass over the inputs; '
             'where the case is memory-bound at this n, both approach the same bandwidth limit.')

# Why an issue-4 target is missed, by case (printed only when it is missed).
# "Earlier analysis" is the hand-written benches/RESULTS.md of commit b1508a4.
TARGET_WHY = {
    'gaussian_pdf':
        'compute-bound on 2 cores, not memory-bound: the sweep shows the fused kernel at about '
        'the same GB/s in cache (small n) as out of it. Per element it divides by a constant '
        '(`/ (s*2.5066)`; lazyfuse does not turn that into a multiplication by the reciprocal, '
        "which would change results) and calls libmvec's expf; the earlier analysis found the "
        "division alone about half the kernel's time.",
    'softmax_rows':
        'since issue 16 the row kernel computes exp(x - max) once per element: the sum pass '
        'stores it into a 64 KiB row buffer on the stack (a row keep, fusion/plan_keep.c) and '
        'the writing pass reads it back, so x is read twice (the max pass from memory, the sum '
        'pass from cache) and written once. Still behind the hand-written C loop (0.73x at 2^26 '
        'in the 2026-11-26 run) and at 45% of the loop copy (the issue asks 60%): not profiled '
        'yet. Known costs the hand loop does not pay: the max pass folds 16 double lanes with a '
        "NaN-propagating compare (the reference's max), and the sum of the exps is kept in "
        'double.',
    'hypot': 'not analysed in this run. The run recorded before this file was generated '
             '(commit b1508a4, n = 2^24) measured 90.9% of copy; on this shared machine the copy '
             'reference and the kernels are measured moments apart, so one run is not enough to '
             'call a regression.',
    'polar_distance': 'not analysed in this run. The run recorded before this file was '
                      'generated (commit b1508a4, n = 2^24) measured 3.86x; compare the speedup at '
                      'the largest n in the table above; run-to-run noise on this shared machine '
                      'is the first suspect.',
    'chain8': 'memory-bound at the plain copy: in the 2026-11-26 run lazyfuse fused ran at 99.9% '
              'of the loop stream_copy at 2^26 (21.4 GB/s), while the copy with non-temporal '
              'stores ran 1.47x faster (31.3 GB/s: no read-for-ownership of the output). Numba '
              "njit's 20.9 ms is 25.7 GB/s, above the plain copy; its machine code was not "
              'inspected, so whether it streams its stores is not verified. That run had '
              'ordinary stores only; since then an elementwise kernel moving more than the '
              'last-level cache streams its stores, measured 1.25x faster on chain8 and 1.34x on '
              'triad at 2^26 in an A/B of the two ways (benches/measured/61-cpu-kernels.md).',
    ('matvec', 'numpy_blas'):
        "OpenBLAS's sgemv against lazyfuse's generic path: a matrix-vector product has no N axis, "
        'so it is not a GEMM kernel; each output is one fmaf chain of its contraction (the order '
        'lazyfuse.h defines), computed one output after another, so a thread waits on the FMA '
        'latency at every step (1024 x 1024 on 2 threads: 0.63 ms, about 4 cycles per '
        'multiply-add). Interleaving several outputs\' chains (allowed: they are independent) '
        'would hide the latency; not done.',
    'sum_of_squares': 'not understood yet; the earlier analysis found the kernel vectorized '
                      '(checked with `-fopt-info-vec`) and did not investigate further.',
}

TARGET_WHY.setdefault('triad',
    'on the machine of the 2026-11-26 run (L3 260 MiB) n = 2^24 is a cache-sized case: the '
    "copy's two 64 MiB arrays sit in the last-level cache, triad's four (256 MiB) do not; at "
    '2^26, out of cache, triad ran at 127% of the copy.')
TARGET_WHY.setdefault('cold',
    'not analysed: the first evals were taken while the machine ran other jobs; the '
    'contraction kernels (issue 16 asks under 400 ms) took 234-285 ms at side 256.')

# Issue 16's run (2026-11-26): the losses whose reason is the target's.
WHY[('chain8', 'numba_njit')] = TARGET_WHY['chain8']
WHY[('matvec', 'numpy_blas')] = TARGET_WHY.pop(('matvec', 'numpy_blas'))

# What is known of a recorded run's code when its tree had uncommitted
# changes (scripts/bench.sh records the changed files since issue 27; older
# runs did not), keyed by meta['git']. Each claim must hold: check, edit.
CODE_NOTE = {
    '491899a (with uncommitted changes)':
        'which files were changed is not recorded in this run. benches/measured/61-cpu-kernels.md '
        'calls them comment-only; the two commits after 491899a, afb8a72 (comments in '
        'fusion/plan.c and fusion/fusion.h) and b7c381d (this run: benches/report.py, '
        'benches/measured/, the results), change no code that lazyfuse-bench runs, but that the '
        'uncommitted edits were those is not verifiable: the figures cannot be reproduced from a '
        'commit.',
}

# The CPU backend's pool is used from this many elements up (PARALLEL_MIN_ELEMENTS
# in backends/cpu/cpu.c); below it the calling thread runs a kernel alone.
PARALLEL_MIN = 1 << 16


# ---- reading -------------------------------------------------------------------------

def read_jsonl(path):
    """The JSON lines of path ([] when there is no such file)."""
    return chart.read_lines(path) if path and os.path.exists(path) else []


def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ''


def machine_meta():
    m = {}
    model = ''
    try:
        with open('/proc/cpuinfo') as f:
            for line in f:
                if line.startswith('model name'):
                    model = line.split(':', 1)[1].strip()
                    break
    except OSError:
        pass
    m['cpu'] = model or platform.processor() or 'unknown'
    m['online_cpus'] = os.cpu_count()
    lscpu = sh('lscpu')
    for line in lscpu.splitlines():
        k, _, v = line.partition(':')
        if k.strip() in ('L3 cache', 'L2 cache', 'Flags'):
            if k.strip() == 'Flags':
                v = ' '.join(f for f in v.split() if f in ('avx2', 'avx512f', 'fma'))
            m[k.strip().lower().replace(' ', '_')] = v.strip()
    try:
        with open('/proc/meminfo') as f:
            m['memory'] = f'{int(f.readline().split()[1]) / 1048576:.0f} GiB'
    except (OSError, ValueError, IndexError):
        pass
    m['kernel'] = platform.release()
    m['compiler'] = sh('${CC:-cc} --version | head -n1')
    m['git'] = sh(f'git -C "{HERE}" rev-parse --short HEAD')
    dirty = sh(f'git -C "{HERE}" status --porcelain --untracked-files=no')
    if dirty:
        m['git'] += ' (with uncommitted changes)'
        m['git_dirty'] = ' '.join(line.strip().split(None, 1)[-1] for line in dirty.splitlines())
    m['python'] = f'{sys.executable} {platform.python_version()}'
    try:
        m['loadavg_end'] = ' '.join(f'{x:.2f}' for x in os.getloadavg())
    except OSError:
        pass
    return m


# ---- the merged table -------------------------------------------------------------------

def largest_n(lf):
    best = {}
    for r in lf:
        c = r.get('case')
        if c in CASES and r.get('mode') in ('fused', 'unfused') and r.get('median_s'):
            best[c] = max(best.get(c, 0), r['n'])
    return best


# python_bench.py's systems -> the merged table's columns, for the rows of the
# Python package ("python: CASE"): the in-process lf_eval of evaluate's graph
# is that row's "lazyfuse fused" (what the ratios divide by); NumPy and
# numexpr ran the peers' own calls (arrayapi.py with out=, numexpr_peer's
# expressions), in python_bench's interpreter
PY_COLS = {'C lf_eval, same graph': 'lazyfuse fused', 'lazyfuse evaluate': 'python evaluate',
           'lazyfuse lazy': 'python lazy', 'numpy': 'numpy', 'numexpr': 'numexpr'}
PY_PREFIX = 'python: '


def merge_python(m, py):
    """Adds python_bench.py's part-2 rows (its JSON lines) to the merged table m
    as rows "python: CASE" at each case's largest n, in the columns PY_COLS
    names; each cell's ratio is its time over that row's in-process lf_eval."""
    best = {}
    for r in py:
        if r.get('part') == 'cases' and r.get('system') in PY_COLS and r.get('median_s'):
            best[r['case']] = max(best.get(r['case'], 0), r['n'])
    for case in sorted(best, key=lambda c: CASES.index(c) if c in CASES else len(CASES)):
        row = m['cells'].setdefault(PY_PREFIX + case, {})
        m['n'][PY_PREFIX + case] = best[case]
        for r in py:
            if r.get('part') == 'cases' and r.get('case') == case and r.get('n') == best[case] \
                    and r.get('system') in PY_COLS and r.get('median_s'):
                col = PY_COLS[r['system']]
                row[col] = {'median_s': r['median_s'], 'ratio': r.get('over_c'),
                            'check': r.get('check', 'n/a')}
                if col not in m['systems']:
                    m['systems'].append(col)
    if best:
        m['python_versions'] = next((r.get('versions') for r in py if r.get('versions')), {})
    return m


def row_keys(m):
    """The merged table's rows in order: the cases, then the Python package's."""
    return [c for c in CASES if c in m['cells']] + [k for k in m['cells'] if k.startswith(PY_PREFIX)]


def merge(lf, peers):
    """{'n': {case: n}, 'systems': [...], 'cells': {case: {system: cell}}}; a cell is
    {'median_s', 'ratio', 'check'} or {'status': 'n/a'|'error', 'why'}."""
    best = largest_n(lf)
    cells = {c: {} for c in CASES if c in best}
    for r in lf:
        c = r.get('case')
        if c in best and r['n'] == best[c] and r.get('mode') in ('fused', 'unfused') and r.get('median_s'):
            cells[c]['lazyfuse ' + r['mode']] = {'median_s': r['median_s'], 'check': r.get('check', 'n/a'),
                                                 'gbps': r.get('gbps')}
    systems = list(LF_COLS)
    for r in lf:  # the c_handfused reference: its ratio is the one measured interleaved with lazyfuse fused
        c = r.get('case')
        if c in best and r['n'] == best[c] and r.get('mode') == HAND and r.get('median_s'):
            cells[c][HAND] = {'median_s': r['median_s'], 'check': r.get('check', 'n/a'), 'gbps': r.get('gbps'),
                              'interleaved_ratio': r.get('lazyfuse_speedup')}
            if HAND not in systems:
                systems.append(HAND)
    versions = {}
    for r in peers:
        if r.get('kind') == 'system' and r.get('status') == 'ok' and r['system'] not in systems:
            systems.append(r['system'])
            versions[r['system']] = str(r.get('version', '')).split(',')[0].strip()
    for r in peers:
        c = r.get('case')
        if r.get('kind') != 'case' or c not in cells or r.get('n') != best[c]:
            continue
        if r.get('status') == 'ok':
            cells[c][r['system']] = {'median_s': r['median_s'], 'check': r.get('check', 'n/a'),
                                     'gbps': r.get('gbps')}
        else:
            cells[c][r['system']] = {'status': r.get('status'), 'why': r.get('why', '')}
    for c, row in cells.items():
        f = row.get('lazyfuse fused', {}).get('median_s')
        for cell in row.values():
            if cell.get('interleaved_ratio'):
                cell['ratio'] = cell['interleaved_ratio']
            elif f and cell.get('median_s'):
                cell['ratio'] = cell['median_s'] / f
    return {'n': best, 'systems': systems, 'cells': cells, 'versions': versions}


def col_name(m, system):
    """A column's heading: the system and the version it ran (numpy 2.4.6, numpy@debian 1.24.2), so
    that a table says which release each peer column is."""
    v = m.get('versions', {}).get(system)
    return f'{system} {v}' if v else system


def fmt_time(s):
    if s is None:
        return '-'
    if s < 1e-3:
        return f'{s * 1e6:.3g} us'
    if s < 1:
        return f'{s * 1e3:.3g} ms'
    return f'{s:.3g} s'


def cell_text(cell):
    if not cell:
        return '-'
    if 'median_s' not in cell:
        st = cell.get('status')
        # 'skipped': run_peers --time-limit ran out before the case started
        return st if st in ('n/a', 'skipped') else 'error'
    t = fmt_time(cell['median_s'])
    r = cell.get('ratio')
    mark = ' !' if cell.get('check') == 'MISMATCH' else ''
    return f'{t} ({r:.2f}x){mark}' if r is not None else t + mark


def size_text(case, n):
    if case == 'batched_matmul':
        return f'8x{max(1, n // 2)}^2'
    if case in MATMUL_CASES:
        return f'{n}^2'
    return chart.fmt_n(n)


def text_table(m):
    cols = m['systems']
    head = ['case', 'n'] + [col_name(m, c).replace('lazyfuse ', 'lf ') for c in cols]
    rows = [head]
    for c in row_keys(m):
        if c in m['cells']:
            rows.append([c, size_text(c, m['n'][c])] + [cell_text(m['cells'][c].get(s)) for s in cols])
    w = [max(len(r[i]) for r in rows) for i in range(len(head))]
    return '\n'.join('  '.join(x.ljust(w[i]) if i < 2 else x.rjust(w[i]) for i, x in enumerate(r)).rstrip()
                     for r in rows)


def md_table(m):
    cols = m['systems']
    out = ['| case | n | ' + ' | '.join(col_name(m, c) for c in cols) + ' |', '|' + '---|' * (len(cols) + 2)]
    for c in row_keys(m):
        if c in m['cells']:
            out.append(f'| {c} | {size_text(c, m["n"][c])} | '
                       + ' | '.join(cell_text(m['cells'][c].get(s)) for s in cols) + ' |')
    return '\n'.join(out)


TABLE_LEGEND = ('Each cell: median time (time / lazyfuse fused time); above 1x lazyfuse fused is '
                'faster, below 1x the system is. `!`: the result failed its check against '
                "lazyfuse's output (largest difference relative to the larger magnitude, floored at "
                "1e-3 of the array's largest, as lazyfuse-bench measures; tolerance 1e-3: other "
                "math libraries and FMA contraction move results by about 1e-4). `n/a`: the system has no way to write the case. "
                'n: elements of the main input (contractions: the side of the square matrices; batched_matmul: '
                '8 products of half that side).')
PY_LEGEND = ('Rows `python: CASE`: the Python package (benches/python_bench.py, one process): its '
             '`lazyfuse fused` cell is lf_eval alone on the graph `lazyfuse.evaluate` built, called '
             'in the same process and timed in the same rounds, and every ratio on the row is over '
             'it; `python evaluate` is `lazyfuse.evaluate(expr, out=...)` on numexpr_peer\'s '
             'expression, `python lazy` the lazy arrays (arrayapi.py with xp = lazyfuse, then '
             '`compute`, a new result each call), numpy and numexpr the peers\' calls in the '
             'same interpreter.')
HAND_LEGEND = ('`c_handfused`: lazyfuse-bench\'s hand-written one-pass C loop (benches/handfused.c, -O3 '
               '-march=native, libmvec) on the same threads; its ratio is the one measured with the two timed '
               'interleaved in the same repetitions.')


# ---- lazyfuse's own table, targets, losses ------------------------------------------------------

def lf_rows(lf, best):
    rows = []
    copy = {r['n']: r for r in lf if r.get('case') == 'stream_copy'}
    for c in CASES:
        for mode in ('fused', HAND, 'unfused'):
            r = next((r for r in lf if r.get('case') == c and r.get('mode') == mode
                      and r['n'] == best.get(c)), None)
            if r:
                rows.append(r)
    return rows, copy


def lf_table(lf, best):
    rows, _ = lf_rows(lf, best)
    nt = any('pct_of_nt_copy' in r for r in rows)
    out = ['| case | mode | kernels | temp MB | first ms | median ms | GB/s | % copy | '
           + ('% nt copy | ' if nt else '') + 'speedup | GFLOP/s | check |',
           '|---|---|---:|---:|---:|---:|---:|---:|' + ('---:|' if nt else '') + '---:|---:|---|']
    for r in rows:
        def f(k, fmt):
            v = r.get(k)
            return fmt.format(v) if isinstance(v, (int, float)) else '-'
        hand = r['mode'] == HAND
        # a c_handfused row: its time over lazyfuse fused's, measured interleaved
        sp = f('lazyfuse_speedup', '{:.2f}x') if hand else f('speedup', '{:.2f}x')
        out.append(f"| {r['case']} | {r['mode']} | {'-' if hand else r['kernels']} | "
                   f"{'-' if hand else format(r['temp_bytes'] / 1e6, '.1f')} | "
                   f"{format(r['first_s'] * 1e3, '.2f') if r.get('first_s') is not None else '-'} | "
                   f"{r['median_s'] * 1e3:.3f} | {f('gbps', '{:.2f}')} | {f('pct_of_stream_copy', '{:.1f}%')} | "
                   + (f"{f('pct_of_nt_copy', '{:.1f}%')} | " if nt else '')
                   + f"{sp} | {f('gflops', '{:.2f}')} | {r.get('check', '-')} |")
    return '\n'.join(out)


def sides_table(lf):
    """The contraction cases at every side the run measured (--matmul-n with
    a list), or [] when each ran at one side only."""
    rows = [r for r in lf if r.get('case') in MATMUL_CASES and r.get('mode') in ('fused', 'unfused')
            and r.get('median_s')]
    if len({r['n'] for r in rows}) < 2:
        return []
    out = ['| case | side | fused ms | fused GFLOP/s | unfused ms | unfused GFLOP/s | speedup | check |',
           '|---|---:|---:|---:|---:|---:|---:|---|']
    for c in MATMUL_CASES:
        for n in sorted({r['n'] for r in rows if r['case'] == c}):
            fu = next((r for r in rows if r['case'] == c and r['n'] == n and r['mode'] == 'fused'), {})
            un = next((r for r in rows if r['case'] == c and r['n'] == n and r['mode'] == 'unfused'), {})

            def g(r, k, fmt, scale=1, unit=''):
                v = r.get(k)
                return format(v * scale, fmt) + unit if isinstance(v, (int, float)) else '-'
            out.append(f"| {c} | {size_text(c, n)} | {g(fu, 'median_s', '.3f', 1e3)} | {g(fu, 'gflops', '.2f')} | "
                       f"{g(un, 'median_s', '.3f', 1e3)} | {g(un, 'gflops', '.2f')} | {g(fu, 'speedup', '.2f', 1, 'x')} | "
                       f"{fu.get('check', un.get('check', '-'))} |")
    return out


def targets(lf):
    """The issue-4 targets, computed: [(target, measured text, met?)], and the n used."""
    sizes = sorted({r['n'] for r in lf if r.get('case') == 'stream_copy'})
    n = 1 << 24 if (1 << 24) in sizes else (sizes[-1] if sizes else None)

    def line(case, mode='fused', at=None):
        at = n if at is None else at
        cands = [r for r in lf if r.get('case') == case and r.get('mode') == mode and (at is None or r['n'] == at)]
        return cands[-1] if cands else None

    out = []

    def pct(case, limit):
        r = line(case)
        v = r and r.get('pct_of_stream_copy')
        out.append((f'{case} fused >= {limit}% of copy', f'{v:.1f}%' if v is not None else 'not run',
                    v is not None and v >= limit))

    def speedup(case, limit):
        r = line(case)
        v = r and r.get('speedup')
        out.append((f'{case} fused/unfused >= {limit}x', f'{v:.2f}x' if v is not None else 'not run',
                    v is not None and v >= limit))

    pct('gaussian_pdf', 80)
    pct('triad', 80)
    pct('chain8', 80)
    pct('hypot', 80)
    pct('sum_of_squares', 80)
    speedup('chain8', 3)
    speedup('chain32', 8)
    pct('softmax_rows', 50)
    mm = [r for r in lf if r.get('case') == 'matmul_zip_reduce' and r.get('mode') == 'fused']
    mm = [r for r in mm if r['n'] == 256] or mm  # the target's side when the run has several
    g = mm[-1].get('gflops') if mm else None
    side = mm[-1]['n'] if mm else 256
    out.append((f'matmul_zip_reduce {side} >= 20 GFLOP/s', f'{g:.1f}' if g is not None else 'not run',
                g is not None and g >= 20))
    speedup('polar_distance', 3)
    ov = [r for r in lf if r.get('case') == 'overhead' and r.get('mode') == 'cached_reeval']
    us = ov[-1].get('median_us') if ov else None
    out.append(('cached re-eval host overhead < 20 us', f'{us:.2f} us' if us is not None else 'not run',
                us is not None and us < 20))
    cold = [r['first_s'] / max(1, r['kernels']) for r in lf if r.get('cache') == 'fresh'
            and r.get('mode') in ('fused', 'unfused') and r.get('first_s')]
    if cold:
        out.append(('cold compile < 300 ms per kernel',
                    f'{min(cold) * 1e3:.0f}-{max(cold) * 1e3:.0f} ms (first eval over kernels, fresh cache)',
                    max(cold) < 0.3))
    return out, n


def losses(m):
    """[(case, system, ratio, check)] where a peer's median beats lazyfuse fused."""
    out = []
    for c in CASES:
        row = m['cells'].get(c, {})
        for s in m['systems']:
            if s in LF_COLS or s == HAND:
                continue
            cell = row.get(s, {})
            if cell.get('ratio') is not None and cell['ratio'] < 1:
                out.append((c, s, cell['ratio'], cell.get('check')))
    return out


def small_n_notes(lf):
    """The step in the sweep where the CPU backend starts using its pool."""
    if not lf or lf[0].get('backend') != 'cpu':
        return []
    med = {(r['case'], r['n']): r['median_s'] for r in lf
           if r.get('mode') == 'fused' and r.get('median_s') and r.get('case') in CASES}
    lo, hi = PARALLEL_MIN // 2, PARALLEL_MIN
    rows = [(c, med[(c, lo)], med[(c, hi)]) for c in CASES if (c, lo) in med and (c, hi) in med]
    if not rows:
        return []
    parts = ', '.join(f'{c} {a * 1e6:.1f} -> {b * 1e6:.1f} us ({b / a:.2f}x)' for c, a, b in rows)
    over = [c for c, a, b in rows if b > 2.3 * a]
    return ['Small n: from n = 2^16 the CPU backend runs a kernel on its thread pool (below, '
            'the calling thread alone). After a run the workers spin for at most 100 us before '
            'sleeping, and the caller at most 50 us for their chunks (backends/cpu/pool.c), so '
            'back-to-back evals wake no thread; the pool backs off (nobody spins for 0.25 ms, '
            'doubling while misses recur) when a spinning worker is late, as it is when the '
            'machine is busy, and then runs pay a wake-up again. Fused medians at 2^15 and 2^16 '
            f'in this run (twice the elements; issue 16 asks for at most 2.3x): {parts}. '
            + (f'Over 2.3x: {", ".join(over)}.' if over else 'None is over 2.3x.'), '']


def code_note(meta):
    """What RESULTS.md says after the commit of a run from a modified tree."""
    git = meta.get('git', '')
    if 'uncommitted' not in git:
        return ''
    if meta.get('git_dirty'):
        return f": the files changed were {meta['git_dirty']} (the changes themselves are not recorded)"
    return ': ' + CODE_NOTE.get(git, 'which files were changed is not recorded: the figures cannot be '
                                     'reproduced from a commit').rstrip('.')


def why_text(case, system, ratio=None):
    w = WHY.get((case, system)) or WHY.get(case)
    if w:
        return w
    if ratio is not None and ratio >= 0.9:
        return 'A tie within this machine\'s run-to-run noise (about 10%). ' + (
            NEAR_NOTE if system.split('@')[0] == 'numba_njit' else '')
    return 'not analysed yet.'


# ---- RESULTS.md -----------------------------------------------------------------------------

def backend_section(doc, title, charts_rel):
    meta, lf, peers = doc['meta'], doc['lazyfuse'], doc['peers']
    m = doc['table']
    be = meta['backend']
    out = [f'## {title}, {meta["date"]}', '']
    mach = f"`{meta.get('cpu', '?')}`, {meta.get('online_cpus', '?')} online CPUs"
    if meta.get('l3_cache'):
        mach += f", L3 {meta['l3_cache']}"
    if meta.get('flags'):
        mach += f" ({meta['flags']})"
    if meta.get('memory'):
        mach += f", {meta['memory']} memory"
    out += [f'- Machine: {mach}; Linux {meta.get("kernel", "?")}. Shared with other jobs and noisy: '
            'compare the ratios inside this run, not absolute times across runs. Load average '
            f'(1, 5, 15 min) at the start: {meta.get("loadavg_start") or "?"}, at the end: '
            f'{meta.get("loadavg_end", "?")}.',
            f'- Compiler: {meta.get("compiler", "?")}; lazyfuse-bench built with `-Dbuildtype=release`.',
            f'- Code: commit {meta.get("git", "?")}{code_note(meta)}.',
            f'- Command: `{meta.get("command", "?")}` (started {meta.get("started", "?")}, '
            f'{meta.get("threads", "?")} threads). It ran `lazyfuse-bench --sweep ... --json '
            '--save-outputs DIR`, then `benches/peers/run_peers.py` on the same cases, sizes and '
            'inputs (each peer checked against the outputs lazyfuse saved), then `benches/report.py`.']
    sysl = [r for r in peers if r.get('kind') == 'system']
    okl = [r for r in sysl if r.get('status') == 'ok']
    if okl:
        out.append('- Peers: ' + '; '.join(f"{r['system']} {r.get('version', '')} ({r.get('how', '')})"
                                           for r in okl)
                   + '. Python: ' + ', '.join(dict.fromkeys(r.get('python', '?') for r in okl)) + '.')
    sk = [r for r in sysl if r.get('status') != 'ok']
    if sk:
        out.append('- Skipped: ' + '; '.join(f"{r['system']}: {r.get('why', '')}" for r in sk) + '.')
    legend = TABLE_LEGEND + (' ' + HAND_LEGEND if HAND in m['systems'] else '') \
        + (' ' + PY_LEGEND if any(k.startswith(PY_PREFIX) for k in m['cells']) else '')
    out += ['', f'### Merged table at the largest n', '', legend, '', md_table(m), '']
    na = [(r['case'], r['system'], r.get('why', '')) for r in peers
          if r.get('kind') == 'case' and r.get('status') in ('n/a', 'error')]
    if na:
        by = {}
        for c, s, w in na:
            by.setdefault((s, w), []).append(c)
        out.append('Not run: ' + '; '.join(f"{s} on {', '.join(cs)} ({w})" for (s, w), cs in by.items()) + '.')
        out.append('')
    bad = [(c, s) for c in m['cells'] for s, cell in m['cells'][c].items() if cell.get('check') == 'MISMATCH']
    if bad:
        out.append('Failed checks: ' + ', '.join(f'{s} on {c}' for c, s in bad)
                   + ' (see "Where the results differ" below).')
        out.append('')
    out += ['### Charts', '',
            f'![GB/s against n, fused, unfused and stream_copy]({charts_rel}/sweep-{be}.svg)', '',
            f'![speed relative to lazyfuse fused at the largest n]({charts_rel}/peers-{be}.svg)', '']
    best = m['n']
    out += ['### lazyfuse fused and unfused at the largest n', '',
            '`first ms` is the first eval (planning and compiling every kernel, with a fresh kernel '
            'cache at the sweep\'s first size, a reused one after); `% copy` is GB/s over the '
            'stream_copy measured at the same n (`% nt copy`, when the run has it: over the copy with '
            'non-temporal stores); `speedup` is unfused over fused, and on a `c_handfused` row (the '
            'hand-written C reference) its time over lazyfuse fused\'s, the two timed interleaved.', '',
            lf_table(lf, best), '']
    copy = [r for r in lf if r.get('case') == 'stream_copy']
    if copy:
        top = max(copy, key=lambda r: r['n'])
        nt = (f"; with non-temporal stores {top['nt_gbps']:.1f} GB/s (`% nt copy`)"
              if top.get('nt_gbps') and top.get('copy') != 'nt' else '')
        out.append(f"stream_copy at n = {chart.fmt_n(top['n'])}: {top['gbps']:.1f} GB/s "
                   f"({top.get('copy', '')}, {top.get('threads', '?')} threads, median of {top.get('reps', '?')}){nt}.")
    ov = {r['mode']: r for r in lf if r.get('case') == 'overhead'}
    if ov:
        out.append('Overhead (triad, n = 1024, median of 2000): cached re-eval '
                   f"{ov.get('cached_reeval', {}).get('median_us', float('nan')):.2f} us, rebuild + eval "
                   f"{ov.get('rebuild_reeval', {}).get('median_us', float('nan')):.2f} us.")
    out.append('')
    st = sides_table(lf)
    if st:
        out += ['The contraction cases at each side of the run (`--matmul-n` with a list; the tables above '
                'show the largest):', ''] + st + ['']
    hand = [(c, cell) for c in CASES for s, cell in m['cells'].get(c, {}).items() if s == HAND]
    if hand:
        out += ['lazyfuse fused against the hand-written C (`c_handfused`, the same threads, timed interleaved '
                'in the same repetitions): ' + ', '.join(
                    f"{c} {cell['ratio']:.2f}x" + (' (check failed)' if cell.get('check') == 'MISMATCH' else '')
                    for c, cell in hand if cell.get('ratio'))
                + ' (its time over lazyfuse fused\'s: above 1x lazyfuse is faster).', '']
    out += small_n_notes(lf)
    t, tn = targets(lf)
    out += [f'### Targets (issue 4) against this run', '',
            f'Percentages of copy and speedups at n = {chart.fmt_n(tn) if tn else "?"} '
            '(issue 4\'s size when the sweep has it).', '',
            '| target | measured | |', '|---|---|---|']
    out += [f'| {a} | {b} | {"met" if ok else "**missed**"} |' for a, b, ok in t]
    missed = [a for a, _, ok in t if not ok]
    out += ['', f'Missed: {", ".join(missed)}.' if missed else 'All met.', '']
    for a in missed:
        case = a.split()[0]
        out.append(f'- {a}: {TARGET_WHY.get(case, "not analysed yet.")}')
    if missed:
        out.append('')
    ls = losses(m)
    out += ['### Where lazyfuse loses', '']
    if not ls:
        out.append('In this run every peer that ran was slower than lazyfuse fused on every case.')
    else:
        out.append('Cases where a peer\'s median beat lazyfuse fused in this run (ratio = peer time '
                   '/ lazyfuse fused time; within about 10% is inside this machine\'s noise):')
        out.append('')
        for c, s, r, chk in ls:
            note = ' (its result failed the check)' if chk == 'MISMATCH' else ''
            out.append(f'- **{c}**, {s}: {r:.2f}x{note}. {why_text(c, s, r)}')
    near = [(c, s, cell['ratio']) for c in CASES for s, cell in m['cells'].get(c, {}).items()
             if s not in LF_COLS and s != HAND and cell.get('ratio') is not None and 1 <= cell['ratio'] < 1.25]
    if near:
        out += ['', 'Closest behind lazyfuse fused (within 25%): '
                + ', '.join(f'{s} on {c} ({r:.2f}x)' for c, s, r in near)
                + '. ' + NEAR_NOTE]
    out.append('')
    diffs = [(c, s, m['cells'][c][s]) for c in m['cells'] for s in m['cells'][c]
             if m['cells'][c][s].get('check') == 'MISMATCH']
    if diffs:
        out += ['### Where the results differ', '']
        for c, s, _ in diffs:
            out.append(f'- **{c}**, {s}: {WHY.get(("check", c, s), "not analysed yet.")}')
        out.append('')
    return out


def measured_sections(folder):
    """The sections measured by other programs than the sweep (the scale
    benchmark, compile-flag comparisons), one Markdown file each in
    benches/measured/, appended in name order as they are written: each
    file states its own command, machine and date."""
    if not os.path.isdir(folder):
        return []
    out = []
    for name in sorted(os.listdir(folder)):
        if name.endswith('.md'):
            with open(os.path.join(folder, name)) as f:
                out += [f.read().rstrip(), '']
    return out


def render_results(path, docs):
    out = ['# lazyfuse-bench results', '',
           'Generated by `scripts/bench.sh` (through `benches/report.py`) from the run it describes; '
           'do not edit by hand: rerun, or change the explanations in `benches/report.py` (`WHY`) '
           'and re-render with `report.py --render-only`. The JSON of each run is in '
           '`benches/results/`; the sections after the sweep\'s are copied from '
           '`benches/measured/*.md`, each written by hand from the run it names.', '']
    rel = os.path.relpath(os.path.join(os.path.dirname(path) or '.', 'charts'), os.path.dirname(path) or '.')
    if 'cpu' in docs:
        out += backend_section(docs['cpu'], 'CPU backend', rel)
    else:
        out += ['## CPU backend', '', 'No CPU run is recorded (`benches/results/cpu.json` is missing).', '']
    if 'cuda' in docs:
        out += backend_section(docs['cuda'], 'CUDA backend (GPU)', rel)
    else:
        out += ['## GPU', '',
                'No CUDA sweep (`benches/results/cuda.json`) is recorded: `bash scripts/bench.sh '
                '--backend cuda` on a machine with a GPU makes one. The CUDA backend\'s first GPU '
                'figures, from one lease of an NVIDIA H200 (`bash scripts/gpu-first-run.sh`: the '
                'CUDA suites, the random differential, lazyfuse-bench at 2^26 against '
                '`cuMemcpyDtoD` and the GPU peers on the same device), are in the section "CUDA '
                'backend on an NVIDIA H200" below (`benches/measured/70-gpu-h200.md`).', '']
    out += measured_sections(os.path.join(os.path.dirname(path) or '.', 'measured'))
    with open(path, 'w') as f:
        f.write('\n'.join(out).rstrip() + '\n')


# ---- main ------------------------------------------------------------------------------------

def main(argv):
    p = argparse.ArgumentParser(description='merged table, JSON, charts and RESULTS.md of a bench run')
    p.add_argument('--backend', default='cpu', choices=['cpu', 'cuda'])
    p.add_argument('--lazyfuse', help='lazyfuse-bench --json output')
    p.add_argument('--peers', help='run_peers.py output')
    p.add_argument('--json', help='write the merged run here (e.g. benches/results/cpu.json)')
    p.add_argument('--charts', help='write the charts into this folder')
    p.add_argument('--results', help='regenerate this RESULTS.md')
    p.add_argument('--command', default='', help='the command that made the run')
    p.add_argument('--started', default='', help='when the run started')
    p.add_argument('--load-start', default='', help='/proc/loadavg when the run started')
    p.add_argument('--code', default='', help='git commit measured (default: HEAD now)')
    p.add_argument('--code-dirty', default='', help='the files with uncommitted changes when the run started')
    p.add_argument('--render-only', action='store_true', help='re-render from --json, run nothing')
    p.add_argument('--python', help="python_bench.py --json output: the Python package's rows")
    a = p.parse_args(argv)

    if a.render_only:
        if not a.json:
            p.error('--render-only needs --json')
        with open(a.json) as f:
            doc = json.load(f)
    else:
        if not a.lazyfuse:
            p.error('--lazyfuse is needed (or --render-only)')
        lf = read_jsonl(a.lazyfuse)
        for r in lf:
            r.pop('output', None)  # a temporary file of the run
        peers = read_jsonl(a.peers)
        meta = machine_meta()
        threads = next((r.get('threads') for r in lf if r.get('case') == 'stream_copy'), None)
        meta.update(backend=a.backend, command=a.command, started=a.started, threads=threads,
                    loadavg_start=a.load_start,
                    date=datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d'))
        if a.code:
            meta['git'] = a.code
        if a.code_dirty.strip():
            meta['git_dirty'] = ' '.join(a.code_dirty.split())
        doc = {'meta': meta, 'lazyfuse': lf, 'peers': peers}
        doc['table'] = merge(lf, peers)
        if a.python:
            doc['python'] = read_jsonl(a.python)
            merge_python(doc['table'], doc['python'])
        if a.json:
            os.makedirs(os.path.dirname(os.path.abspath(a.json)), exist_ok=True)
            with open(a.json, 'w') as f:
                json.dump(doc, f, indent=1)
                f.write('\n')
    m = doc['table']
    print()
    print(f"Merged table ({doc['meta']['backend']}, {doc['meta'].get('date', '')}): "
          'median time (time / lazyfuse fused time; above 1x lazyfuse fused is faster); ! = check failed')
    print(text_table(m))
    skipped = [r for r in doc['peers'] if r.get('kind') == 'system' and r.get('status') != 'ok']
    for r in skipped:
        print(f"  skipped {r['system']}: {r.get('why', '')}")
    if a.charts:
        os.makedirs(a.charts, exist_ok=True)
        be = doc['meta']['backend']
        sub = f"{doc['meta'].get('cpu', '')}, {doc['meta'].get('date', '')}"
        for kind in ('sweep', 'peers'):
            path = os.path.join(a.charts, f'{kind}-{be}.svg')
            ok = (chart.sweep_chart(doc['lazyfuse'], path, be, sub) if kind == 'sweep'
                  else chart.peers_chart(doc['lazyfuse'], doc['peers'], path, be, sub))
            print(f'chart: {path}' if ok else f'chart: no data for {path}')
    if a.results:
        docs = {}
        jdir = os.path.dirname(os.path.abspath(a.json)) if a.json else None
        for be in ('cpu', 'cuda'):
            if be == doc['meta']['backend']:
                docs[be] = doc
            elif jdir and os.path.exists(os.path.join(jdir, f'{be}.json')):
                with open(os.path.join(jdir, f'{be}.json')) as f:
                    docs[be] = json.load(f)
        render_results(a.results, docs)
        print(f'wrote {a.results}')
    if a.json and not a.render_only:
        print(f'wrote {a.json}')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
