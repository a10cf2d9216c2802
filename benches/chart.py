#!/usr/bin/env python3
"""benches/chart.py: SVG charts of lazyfuse-bench runs, with the Python
standard library only (no matplotlib, no gnuplot needed).

    chart.py RUN.jsonl [PEERS.jsonl] [--out DIR] [--backend cpu|cuda]
    chart.py benches/results/cpu.json [--out DIR]

RUN.jsonl is `lazyfuse-bench --json` output (a --sweep run for the first
chart); PEERS.jsonl is benches/peers/run_peers.py output; cpu.json is the
merged file scripts/bench.sh writes. Two charts are written:

- DIR/sweep-BACKEND.svg: GB/s (graph inputs + outputs over the median time,
  log scale) against n (log 2), one panel per case: lazyfuse fused, unfused,
  the c_handfused reference where the case has one (dotted), and
  stream_copy measured at the same n in the same run. Small n shows the
  latency floor, large n the bandwidth regime.
- DIR/peers-BACKEND.svg: at the largest n, per case, each system's speed
  relative to lazyfuse fused (lazyfuse fused median / system median, log
  scale: above 1 is faster than lazyfuse fused). A result that failed its
  check against lazyfuse's output is drawn hatched.
"""
import argparse
import json
import math
import os
import sys
from xml.sax.saxutils import escape

CASE_ORDER = ['gaussian_pdf', 'polar_distance', 'hypot', 'triad', 'chain8', 'sum_of_squares',
              'softmax_rows', 'matmul_zip_reduce', 'chain32', 'cumsum', 'cumsum_rows', 'scan_fused',
              'random_fused', 'random_fill', 'gather_perm', 'gather_rows', 'histogram',
              'sort_f32', 'sort_normal', 'sort_sorted', 'sort_reversed', 'sort_few',
              'argsort_f32', 'argsort_normal', 'argsort_sorted', 'argsort_reversed', 'argsort_few',
              'argsort_rows', 'topk_rows', 'spca',
              'layer_norm', 'matmul_bias_relu', 'matmul_scaled', 'batched_matmul', 'matvec',
              'stencil5x5', 'conv1d_31', 'bincount2', 'embedding', 'kmeans_assign']
# cases whose n is not the sweep's (a contraction's side, --samples)
NOT_SWEPT = ('matmul_zip_reduce', 'matmul_bias_relu', 'matmul_scaled', 'batched_matmul', 'matvec',
             'topk_rows', 'spca')
SYSTEM_ORDER = ['lazyfuse fused', 'lazyfuse unfused', 'c_handfused', 'numpy', 'numpy_batched', 'numexpr',
                'numba_vectorize', 'numba_njit', 'numpy_blas', 'cupy', 'cupy_kernel', 'cupy_fuse', 'jax_jit',
                'torch_eager', 'torch_compile', 'numba_cuda']
COLORS = {
    'lazyfuse fused': '#1f77b4', 'lazyfuse unfused': '#ff7f0e', 'stream_copy': '#555555',
    'c_handfused': '#393b79',
    'numpy': '#2ca02c', 'numpy_blas': '#98df8a', 'numpy_batched': '#bcbd22', 'numexpr': '#d62728',
    'numba_vectorize': '#9467bd', 'numba_njit': '#8c564b', 'cupy': '#e377c2',
    'cupy_kernel': '#f7b6d2', 'cupy_fuse': '#bcbd22', 'jax_jit': '#17becf',
    'torch_eager': '#aec7e8', 'torch_compile': '#ffbb78', 'numba_cuda': '#c5b0d5',
}
FONT = 'font-family="DejaVu Sans, Helvetica, Arial, sans-serif"'


def read_lines(path):
    out = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith('{'):
                out.append(json.loads(line))
    return out


def load(paths):
    """(lazyfuse lines, peer lines, backend) from JSONL files or a merged JSON."""
    lf, peers, backend = [], [], None
    for p in paths:
        if p.endswith('.json'):
            with open(p) as f:
                doc = json.load(f)
            lf += doc.get('lazyfuse', [])
            peers += doc.get('peers', [])
            backend = doc.get('meta', {}).get('backend', backend)
        else:
            for r in read_lines(p):
                (peers if 'kind' in r else lf).append(r)
    if backend is None:
        backend = next((r['backend'] for r in lf if 'backend' in r), 'cpu')
    return lf, peers, backend


def log_ticks(lo, hi):
    """Decade ticks covering [lo, hi] and the rounded-out range."""
    a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    if a == b:
        b += 1
    return [10.0 ** e for e in range(a, b + 1)], 10.0 ** a, 10.0 ** b


def fmt_tick(v):
    if v >= 1:
        return f'{v:g}'
    return f'{v:.{max(0, -int(math.floor(math.log10(v))))}f}'


def fmt_n(n):
    e = int(round(math.log2(n))) if n > 0 else 0
    return f'2^{e}' if n > 0 and 2 ** e == n else str(n)


class Svg:
    def __init__(self, w, h):
        self.w, self.h, self.parts = w, h, []

    def add(self, s):
        self.parts.append(s)

    def text(self, x, y, s, size=12, anchor='start', weight='normal', color='#222', rotate=None, extra=''):
        tr = f' transform="rotate({rotate} {x:.1f} {y:.1f})"' if rotate is not None else ''
        self.add(f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" '
                 f'font-weight="{weight}" fill="{color}"{tr} {extra}>{escape(s)}</text>')

    def line(self, x1, y1, x2, y2, color='#ccc', width=1, dash=None):
        d = f' stroke-dasharray="{dash}"' if dash else ''
        self.add(f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="{color}" '
                 f'stroke-width="{width}"{d}/>')

    def save(self, path):
        with open(path, 'w') as f:
            f.write(f'<svg xmlns="http://www.w3.org/2000/svg" width="{self.w}" height="{self.h}" '
                    f'viewBox="0 0 {self.w} {self.h}" {FONT}>\n')
            f.write('<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" '
                    'patternTransform="rotate(45)"><rect width="6" height="6" fill="#fff"/>'
                    '<line x1="0" y1="0" x2="0" y2="6" stroke="#000" stroke-width="2"/></pattern></defs>\n')
            f.write(f'<rect width="{self.w}" height="{self.h}" fill="#ffffff"/>\n')
            f.write('\n'.join(self.parts))
            f.write('\n</svg>\n')


def sweep_series(lf):
    """{case: {series: [(n, gbps)]}}, stream_copy matched to each case's n."""
    copy = {}
    for r in lf:
        if r.get('case') == 'stream_copy' and r.get('gbps'):
            copy[r['n']] = r['gbps']
    out = {}
    for r in lf:
        c, mode = r.get('case'), r.get('mode')
        if c not in CASE_ORDER or c in NOT_SWEPT or mode not in ('fused', 'unfused', 'c_handfused'):
            continue
        if not r.get('gbps'):
            continue
        s = out.setdefault(c, {})
        s.setdefault(mode if mode == 'c_handfused' else 'lazyfuse ' + mode, []).append((r['n'], r['gbps']))
        if r['n'] in copy and mode == 'fused':
            s.setdefault('stream_copy', []).append((r['n'], copy[r['n']]))
    for s in out.values():
        for k in s:
            s[k] = sorted(set(s[k]))
    return out


def sweep_chart(lf, path, backend, subtitle=''):
    series = sweep_series(lf)
    cases = [c for c in CASE_ORDER if c in series and len(series[c].get('lazyfuse fused', [])) > 1]
    if not cases:
        return False
    ncol = 4
    nrow = (len(cases) + ncol - 1) // ncol
    pw, ph = 270, 200            # plot area of one panel
    ml, mr, mt, mb = 52, 14, 28, 40
    top = 64
    W = ncol * (pw + ml + mr) + 10
    H = top + nrow * (ph + mt + mb) + 10
    svg = Svg(W, H)
    svg.text(10, 22, f'lazyfuse-bench sweep ({backend}): GB/s against n', size=16, weight='bold')
    svg.text(10, 40, 'GB/s = (graph input + output bytes) / median time, log scale; stream_copy measured '
             'at the same n in the same run. ' + subtitle, size=11, color='#444')
    svg.text(W - 10, 59, 'small n: dispatch and call overhead; large n: memory bandwidth', size=11,
             anchor='end', color='#444')
    # legend
    lx = 10
    hand = any('c_handfused' in series[c] for c in cases)
    legend = (('lazyfuse fused', None), ('lazyfuse unfused', None), ('stream_copy', '5,3'))
    for name, dash in legend + ((('c_handfused', '2,2'),) if hand else ()):
        svg.line(lx, 55, lx + 24, 55, COLORS[name], 2.5, dash)
        svg.text(lx + 30, 59, name.replace('lazyfuse ', ''), size=12)
        lx += 130
    vals = [v for c in cases for s in series[c].values() for (_, v) in s if v > 0]
    ticks, ylo, yhi = log_ticks(min(vals), max(vals))
    ns = [n for c in cases for s in series[c].values() for (n, _) in s]
    xlo, xhi = math.log2(min(ns)), math.log2(max(ns))
    if xhi == xlo:
        xhi = xlo + 1
    for i, c in enumerate(cases):
        ox = 10 + (i % ncol) * (pw + ml + mr) + ml
        oy = top + (i // ncol) * (ph + mt + mb) + mt

        def X(n):
            return ox + (math.log2(n) - xlo) / (xhi - xlo) * pw

        def Y(v):
            return oy + ph - (math.log10(v) - math.log10(ylo)) / (math.log10(yhi) - math.log10(ylo)) * ph

        svg.add(f'<rect x="{ox}" y="{oy}" width="{pw}" height="{ph}" fill="#fafafa" stroke="#bbb"/>')
        svg.text(ox + pw / 2, oy - 8, c, size=13, anchor='middle', weight='bold')
        for t in ticks:
            svg.line(ox, Y(t), ox + pw, Y(t), '#e2e2e2')
            svg.text(ox - 5, Y(t) + 4, fmt_tick(t), size=10, anchor='end', color='#555')
        e = int(math.ceil(xlo))
        while e <= xhi:
            x = X(2 ** e)
            svg.line(x, oy + ph, x, oy + ph + 4, '#888')
            if (e - int(math.ceil(xlo))) % 4 == 0:
                svg.line(x, oy, x, oy + ph, '#eeeeee')
                svg.text(x, oy + ph + 16, f'2^{e}', size=10, anchor='middle', color='#555')
            e += 1
        svg.text(ox + pw / 2, oy + ph + 32, 'n (elements of the main input)', size=10, anchor='middle', color='#555')
        if i % ncol == 0:
            svg.text(ox - 38, oy + ph / 2, 'GB/s', size=11, anchor='middle', rotate=-90, color='#333')
        for name in ('stream_copy', 'c_handfused', 'lazyfuse unfused', 'lazyfuse fused'):
            pts = [(n, v) for (n, v) in series[c].get(name, []) if v > 0]
            if not pts:
                continue
            d = ' '.join(f'{X(n):.1f},{Y(v):.1f}' for n, v in pts)
            dash = (' stroke-dasharray="5,3"' if name == 'stream_copy'
                    else ' stroke-dasharray="2,2"' if name == 'c_handfused' else '')
            svg.add(f'<polyline points="{d}" fill="none" stroke="{COLORS[name]}" stroke-width="2"{dash}/>')
            if name != 'stream_copy':
                for n, v in pts:
                    svg.add(f'<circle cx="{X(n):.1f}" cy="{Y(v):.1f}" r="2.2" fill="{COLORS[name]}"/>')
    svg.save(path)
    return True


def table_points(lf, peers):
    """{case: {system: (median_s, check)}} at each case's largest n."""
    best = {}
    for r in lf:
        c, mode = r.get('case'), r.get('mode')
        if c in CASE_ORDER and mode in ('fused', 'unfused') and r.get('median_s'):
            if c not in best or r['n'] > best[c]:
                best[c] = r['n']
    pts = {}
    for r in lf:
        c, mode = r.get('case'), r.get('mode')
        if c in best and mode in ('fused', 'unfused') and r['n'] == best[c] and r.get('median_s'):
            pts.setdefault(c, {})['lazyfuse ' + mode] = (r['median_s'], r.get('check', 'n/a'))
    for r in lf:  # the hand-written C reference, at lazyfuse fused's time x its interleaved ratio
        c = r.get('case')
        if r.get('mode') == 'c_handfused' and c in pts and r['n'] == best[c] and r.get('median_s'):
            f = pts[c].get('lazyfuse fused')
            t = f[0] * r['lazyfuse_speedup'] if f and r.get('lazyfuse_speedup') else r['median_s']
            pts[c]['c_handfused'] = (t, r.get('check', 'n/a'))
    for r in peers:  # only at the n lazyfuse ran (matmul: the same side)
        c = r.get('case')
        if r.get('kind') == 'case' and r.get('status') == 'ok' and c in pts and r.get('n') == best[c]:
            pts[c][r['system']] = (r['median_s'], r.get('check', 'n/a'))
    return pts, best


def peers_chart(lf, peers, path, backend, subtitle=''):
    pts, best = table_points(lf, peers)
    cases = [c for c in CASE_ORDER if c in pts and 'lazyfuse fused' in pts[c]]
    if not cases:
        return False
    systems = [s for s in SYSTEM_ORDER if any(s in pts[c] for c in cases)]
    ratio = {(c, s): pts[c]['lazyfuse fused'][0] / pts[c][s][0] for c in cases for s in systems if s in pts[c]}
    lo = min(min(ratio.values()), 0.5)
    hi = max(max(ratio.values()), 2.0)
    ticks, ylo, yhi = log_ticks(lo, hi)
    bw = 11
    gw = len(systems) * bw + 18
    ml, mt, mb = 64, 100, 96
    pw = len(cases) * gw
    ph = 330
    W, H = max(ml + pw + 20, 980), mt + ph + mb
    svg = Svg(W, H)
    sizes = sorted(set(best[c] for c in cases))
    svg.text(10, 22, f'Systems against lazyfuse fused ({backend}), at the largest n of the run', size=16, weight='bold')
    svg.text(10, 40, 'speed relative to lazyfuse fused = lazyfuse fused median / system median (log scale; '
             'above 1: faster than lazyfuse fused); n = ' + ', '.join(fmt_n(n) for n in sizes)
             + ' (matmul: its side).', size=11, color='#444')
    svg.text(10, 56, 'Hatched: the result failed its check against lazyfuse\'s output. No bar: the system '
             'is not installed or has no way to write the case. ' + subtitle, size=11, color='#444')
    lx, ly = 10, 76
    for s in systems:
        svg.add(f'<rect x="{lx}" y="{ly - 10}" width="12" height="12" fill="{COLORS.get(s, "#999")}"/>')
        svg.text(lx + 16, ly, s, size=11)
        lx += 22 + 7 * len(s)
        if lx > W - 120:
            lx, ly = 10, ly + 16

    def Y(v):
        return mt + ph - (math.log10(v) - math.log10(ylo)) / (math.log10(yhi) - math.log10(ylo)) * ph

    svg.add(f'<rect x="{ml}" y="{mt}" width="{pw}" height="{ph}" fill="#fafafa" stroke="#bbb"/>')
    for t in ticks:
        svg.line(ml, Y(t), ml + pw, Y(t), '#e2e2e2')
        svg.text(ml - 6, Y(t) + 4, fmt_tick(t), size=10, anchor='end', color='#555')
    svg.line(ml, Y(1), ml + pw, Y(1), '#1f77b4', 1.2, '4,3')
    svg.text(22, mt + ph / 2, 'relative speed', size=11, anchor='middle', rotate=-90)
    for i, c in enumerate(cases):
        gx = ml + i * gw + 9
        for j, s in enumerate(systems):
            if (c, s) not in ratio:
                continue
            v = ratio[(c, s)]
            y1, y0 = Y(v), Y(1)
            top, h = min(y0, y1), max(abs(y1 - y0), 1)
            x = gx + j * bw
            svg.add(f'<rect x="{x:.1f}" y="{top:.1f}" width="{bw - 2}" height="{h:.1f}" '
                    f'fill="{COLORS.get(s, "#999")}"><title>{escape(c)} {escape(s)}: {v:.3g}x</title></rect>')
            label = f'{v:.2g}' if v < 10 else f'{v:.0f}'
            ly = top - 3 if v >= 1 else top + h + 3
            svg.text(x + (bw - 2) / 2 + 3, ly, label, size=8, anchor='start' if v >= 1 else 'end',
                     rotate=-90, color='#333')
            if pts[c][s][1] == 'MISMATCH':
                svg.add(f'<rect x="{x:.1f}" y="{top:.1f}" width="{bw - 2}" height="{h:.1f}" '
                        f'fill="url(#hatch)" fill-opacity="0.6"/>')
        if i:
            svg.line(ml + i * gw, mt, ml + i * gw, mt + ph, '#e6e6e6')
        svg.text(gx + len(systems) * bw / 2, mt + ph + 14, c, size=11, anchor='end', rotate=-30)
    svg.save(path)
    return True


def main(argv):
    p = argparse.ArgumentParser(description='SVG charts of lazyfuse-bench runs')
    p.add_argument('inputs', nargs='+', help='lazyfuse-bench JSONL, run_peers JSONL, or a merged JSON')
    p.add_argument('--out', default='.', help='folder for the SVG files (default .)')
    p.add_argument('--backend', help='name in the file names (default: from the data)')
    p.add_argument('--subtitle', default='', help='extra text under the titles (machine, date)')
    a = p.parse_args(argv)
    lf, peers, backend = load(a.inputs)
    backend = a.backend or backend
    os.makedirs(a.out, exist_ok=True)
    wrote = []
    for kind, fn in (('sweep', sweep_chart), ('peers', peers_chart)):
        path = os.path.join(a.out, f'{kind}-{backend}.svg')
        if (fn(lf, peers, path, backend, a.subtitle) if kind == 'peers' else fn(lf, path, backend, a.subtitle)):
            wrote.append(path)
        else:
            print(f'chart: no data for the {kind} chart', file=sys.stderr)
    for w in wrote:
        print(w)
    return 0 if wrote else 1


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
