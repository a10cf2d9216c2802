#!/usr/bin/env python3
"""benches/peers/run_peers.py: the lazyfuse-bench cases in other systems.

    run_peers.py --lazyfuse RUN.jsonl [--systems cpu|cuda|all|LIST] [--case LIST]
                 [--reps R] [--threads T] [--json OUT]
                 [--case-seconds S] [--time-limit S] [--only SYSTEM=CASE,...] [--label L]

With --lazyfuse (JSON lines of `lazyfuse-bench --json --save-outputs DIR`),
every case that run saved is run at the same size, on the same inputs
(common.lcg_f32 and common.index_input make tools/seed_examples.c's data),
and each peer's output is checked against lazyfuse's with lazyfuse-bench's
own measure, at the tolerance common.PEER_TOL (1e-3; see there why not
lazyfuse-bench's 1e-4), exactly for gathers and histograms, and by the mean
and standard deviation for random numbers (a peer has its own stream).
Without it, --n / --matmul-n give the size and the check is n/a.

Each system is skipped with a message when it is not installed (or, for the
GPU ones, when there is no device); a case a system has no way to express is
n/a. Per case and system: the first call (compilation) is timed apart, one
warm-up sizes the repetitions (~0.5 s, 5..200, unless --reps), each
repetition is timed alone, and the median is reported. GPU systems time with
the device synchronized before and after each call (base.device_timer), and
their outputs are checked on the device with CuPy when it is installed
(common.max_rel_diff with xp = cupy), else on the host.

For a run with a time budget (scripts/gpu-first-run.sh): --case-seconds S
bounds each case's timed repetitions to about S seconds (at least 3);
--time-limit S starts no case after S seconds (those left get status
"skipped"); --only SYSTEM=CASE,... (repeatable) runs that system on those
cases only (torch.compile takes ~10 s a case to compile). Progress goes to
stderr; JSON lines to --json (default stdout):
  {"kind":"system","system":..,"backend":..,"status":"ok"|"skipped","why":..,"version":..,"how":..}
  {"kind":"case","case":..,"system":..,"backend":..,"n":..,"median_s":..,"gbps":..,"first_s":..,
   "reps":..,"threads":..,"bytes":..,"check":"ok"|"MISMATCH"|"n/a","max_rel_diff":..}
  or, for n/a, errors and time limits: {"kind":"case","case":..,"system":..,"status":"n/a"|"error"|"skipped","why":..}
Exit status: 0, or 1 when a system raised an error, 2 for bad arguments.
"""
import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

# numpy_blas last: OpenBLAS's threads busy-wait for a while after a call,
# which on a small machine would slow whatever is measured next
CPU_SYSTEMS = ['numpy', 'numpy_batched', 'numexpr', 'numba_vectorize', 'numba_njit', 'jax_jit_cpu',
               'torch_compile_cpu', 'numpy_blas']
CUDA_SYSTEMS = ['cupy', 'cupy_kernel', 'cupy_fuse', 'jax_jit', 'torch_eager', 'torch_compile', 'numba_cuda']
MODULE_OF = {'numpy': 'numpy_peer', 'numpy_blas': 'numpy_peer', 'numpy_batched': 'numpy_peer', 'numexpr': 'numexpr_peer',
             'numba_vectorize': 'numba_peer', 'numba_njit': 'numba_peer', 'cupy': 'cupy_peer',
             'cupy_kernel': 'cupy_peer', 'cupy_fuse': 'cupy_peer', 'jax_jit': 'jax_peer',
             'torch_eager': 'torch_peer', 'torch_compile': 'torch_peer', 'numba_cuda': 'numba_cuda_peer',
             'jax_jit_cpu': 'jax_peer', 'torch_compile_cpu': 'torch_peer'}
# common.CASES's names (common imports numpy, which --help must not need)
CASE_NAMES = ['gaussian_pdf', 'polar_distance', 'hypot', 'triad', 'chain8', 'sum_of_squares',
              'softmax_rows', 'matmul_zip_reduce', 'chain32', 'cumsum', 'cumsum_rows', 'scan_fused',
              'random_fused', 'random_fill', 'gather_perm', 'gather_rows', 'histogram',
              'sort_f32', 'sort_normal', 'sort_sorted', 'sort_reversed', 'sort_few',
              'argsort_f32', 'argsort_normal', 'argsort_sorted', 'argsort_reversed', 'argsort_few',
              'argsort_rows', 'topk_rows', 'spca',
              'layer_norm', 'matmul_bias_relu', 'matmul_scaled', 'batched_matmul', 'matvec',
              'stencil5x5', 'conv1d_31', 'bincount2', 'embedding', 'kmeans_assign']
# the contraction cases: their n is lazyfuse-bench's --matmul-n (each its own)
MATMUL_NAMES = ['matmul_zip_reduce', 'matmul_bias_relu', 'matmul_scaled', 'batched_matmul', 'matvec']


def parse_args(argv):
    p = argparse.ArgumentParser(description='lazyfuse-bench cases in peer systems')
    p.add_argument('--lazyfuse', metavar='RUN.jsonl',
                   help='lazyfuse-bench --json --save-outputs run: sizes and reference outputs')
    p.add_argument('--n', type=int, default=1 << 24, help='size without --lazyfuse (default 2^24)')
    p.add_argument('--matmul-n', type=int, default=256, help='side of the contraction cases without --lazyfuse')
    p.add_argument('--case', default='all', help='comma list of cases (default all)')
    p.add_argument('--systems', default='cpu',
                   help="cpu (default), cuda, all, none, or a comma list of: "
                        + ', '.join(CPU_SYSTEMS + CUDA_SYSTEMS))
    p.add_argument('--reps', type=int, default=0, help='timed calls per case (default ~0.5 s, 5..200)')
    p.add_argument('--threads', type=int, default=0, help='threads (default 0: every online CPU)')
    p.add_argument('--json', metavar='OUT', help='write JSON lines here (default stdout)')
    p.add_argument('--case-seconds', type=float, default=0.0, metavar='S',
                   help="about S seconds of timed calls per case and system (at least 3 calls; default no cap)")
    p.add_argument('--time-limit', type=float, default=0.0, metavar='S',
                   help='start no case after S seconds; the rest are reported as skipped (default none)')
    p.add_argument('--label', default='', metavar='L',
                   help="append '@L' to every system's name in the output (a second column of one system: "
                        "scripts/bench.sh runs Debian's packages as numpy@debian, ...)")
    p.add_argument('--only', action='append', default=[], metavar='SYSTEM=CASE,...',
                   help='run SYSTEM on these cases only (repeatable)')
    a = p.parse_args(argv)
    only = {}
    for spec in a.only:
        sysname, eq, cases = spec.partition('=')
        if not eq or sysname not in MODULE_OF:
            p.error(f"--only: expected SYSTEM=CASE,... with a known system, got '{spec}'")
        only[sysname] = {c for c in cases.split(',') if c}
        bad = [c for c in only[sysname] if c not in CASE_NAMES]
        if bad:
            p.error(f"--only: unknown case(s): {', '.join(bad)}")
    a.only = only
    if a.systems == 'cpu':
        a.systems = CPU_SYSTEMS
    elif a.systems == 'cuda':
        a.systems = CUDA_SYSTEMS
    elif a.systems == 'all':
        a.systems = CPU_SYSTEMS + CUDA_SYSTEMS
    elif a.systems == 'none':
        a.systems = []
    else:
        a.systems = [s for s in a.systems.split(',') if s]
        bad = [s for s in a.systems if s not in MODULE_OF]
        if bad:
            p.error(f"unknown system(s): {', '.join(bad)}")
    a.case = CASE_NAMES if a.case == 'all' else [c for c in a.case.split(',') if c]
    bad = [c for c in a.case if c not in CASE_NAMES]
    if bad:
        p.error(f"unknown case(s): {', '.join(bad)}")
    if a.threads < 0 or a.reps < 0 or a.n < 1 or a.matmul_n < 1 or a.case_seconds < 0 or a.time_limit < 0:
        p.error('--threads, --reps, --n, --matmul-n, --case-seconds and --time-limit must not be negative')
    if a.threads == 0:
        a.threads = len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count()
    return a


def say(msg):
    print(f'peers: {msg}', file=sys.stderr, flush=True)


def lazyfuse_refs(path):
    """{case: (n, matmul_n or None, output path or None, line)} from a lazyfuse-bench run:
    per case the fused line (else the unfused one) at its largest n."""
    best = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line.startswith('{'):
                continue
            r = json.loads(line)
            if r.get('case') not in CASE_NAMES or r.get('mode') not in ('fused', 'unfused'):
                continue
            key = (r['n'], r['mode'] == 'fused')
            if r['case'] not in best or key > best[r['case']][0]:
                best[r['case']] = (key, r)
    return {c: r for c, (_, r) in best.items()}


_DEVICE_XP = []


def device_xp():
    """CuPy for checking GPU outputs on the device, or None (not installed,
    no device): then they are copied to the host and checked there."""
    if not _DEVICE_XP:
        try:
            import cupy
            _DEVICE_XP.append(cupy if cupy.cuda.runtime.getDeviceCount() > 0 else None)
        except Exception:  # noqa: BLE001 - no CuPy, no driver: check on the host
            _DEVICE_XP.append(None)
    return _DEVICE_XP[0]


def on_device(cp, x):
    """x (a CuPy, torch, JAX or Numba device array) as a CuPy array, no copy."""
    if isinstance(x, cp.ndarray):
        return x
    if hasattr(x, '__cuda_array_interface__'):
        return cp.asarray(x)
    return cp.from_dlpack(x)


def main(argv):
    a = parse_args(argv)
    # JAX takes 75% of the GPU's memory at start unless told not to
    os.environ.setdefault('XLA_PYTHON_CLIENT_PREALLOCATE', 'false')
    os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
    # thread counts of the libraries that read them at import time
    for var in ('OMP_NUM_THREADS', 'OPENBLAS_NUM_THREADS', 'MKL_NUM_THREADS', 'NUMEXPR_MAX_THREADS',
                'NUMBA_NUM_THREADS'):
        os.environ.setdefault(var, str(a.threads))
    out = open(a.json, 'w') if a.json else sys.stdout

    def emit(rec):
        if a.label and 'system' in rec:
            rec = dict(rec, system=f"{rec['system']}@{a.label}")
        out.write(json.dumps(rec) + '\n')
        out.flush()

    backend_of = {s: ('cpu' if s in CPU_SYSTEMS else 'cuda') for s in MODULE_OF}
    try:
        import numpy as np
        import common
        from base import SkipPeer
    except ImportError as e:
        for s in a.systems:
            say(f'{s}: skipped: NumPy is not installed for {sys.executable} ({e})')
            emit({'kind': 'system', 'system': s, 'backend': backend_of[s], 'status': 'skipped',
                  'why': f'NumPy not installed for {sys.executable}'})
        return 0

    # the sizes and reference outputs of the lazyfuse run
    refs = lazyfuse_refs(a.lazyfuse) if a.lazyfuse else {}
    if a.lazyfuse and not refs:
        say(f'{a.lazyfuse}: no case lines; nothing to compare against')
    matmul_n = refs['matmul_zip_reduce']['n'] if 'matmul_zip_reduce' in refs else a.matmul_n
    cases = [c for c in a.case if not a.lazyfuse or c in refs]
    for c in a.case:
        if a.lazyfuse and c not in refs:
            say(f'{c}: not in the lazyfuse run; left out')

    # load the systems
    peers = []
    for s in a.systems:
        mod = MODULE_OF[s]
        try:
            m = __import__(mod)
            peer = next(p for p in m.PEERS if p.name == s)
            peer.load(a.threads)
        except SkipPeer as e:
            say(f'{s}: skipped: {e}')
            emit({'kind': 'system', 'system': s, 'backend': backend_of[s], 'status': 'skipped', 'why': str(e)})
            continue
        except Exception as e:  # noqa: BLE001 - a broken install: skip, say why
            say(f'{s}: skipped: cannot load ({type(e).__name__}: {e})')
            emit({'kind': 'system', 'system': s, 'backend': backend_of[s], 'status': 'skipped',
                  'why': f'cannot load: {type(e).__name__}: {e}'})
            continue
        emit({'kind': 'system', 'system': s, 'backend': peer.backend, 'status': 'ok',
              'version': peer.version(), 'how': peer.how, 'threads': a.threads,
              'python': sys.executable})
        say(f'{s} {peer.version()}: {peer.how}')
        peers.append(peer)

    failed = 0
    total, done, t0 = len(cases) * len(peers), 0, time.time()

    def out_of_time():
        return a.time_limit > 0 and time.time() - t0 > a.time_limit

    for cname in cases:
        case = common.CASE_BY_NAME[cname]
        if out_of_time():
            for peer in peers:
                done += 1
                emit({'kind': 'case', 'case': cname, 'system': peer.name, 'backend': peer.backend,
                      'status': 'skipped', 'why': f'--time-limit {a.time_limit:g} s reached'})
            say(f'{cname}: left out: --time-limit {a.time_limit:g} s reached')
            continue
        ref_line = refs.get(cname)
        n = a.n
        mn = matmul_n
        if ref_line:
            # a contraction's n is its side (each may have run at its own sides;
            # the largest is compared); the others' n is theirs
            if cname in MATMUL_NAMES:
                mn = ref_line['n']
            else:
                n = ref_line['n']
        if not peers:
            break
        ref_path = ref_line.get('output') if ref_line else None
        try:
            inputs = case.make_inputs(n, mn, ref_path)
        except (OSError, ValueError) as e:
            say(f"{cname}: cannot make the inputs from lazyfuse's outputs: {e}; left out")
            continue
        ref = None
        if case.compare is not None:
            pass  # case.compare reads lazyfuse's outputs itself
        elif ref_line and ref_line.get('output'):
            try:
                ref = np.fromfile(ref_line['output'], dtype=case.out_dtype).reshape(case.out_shape(n, mn))
            except (OSError, ValueError) as e:
                say(f"{cname}: cannot read lazyfuse's output {ref_line['output']}: {e}; check n/a")
        rn = case.reported_n(n, mn)
        in_bytes = sum(x.nbytes for x in inputs)
        ref_dev = None  # ref on the device, made for the first GPU peer that checks there
        for peer in peers:
            done += 1
            base = {'kind': 'case', 'case': cname, 'system': peer.name, 'backend': peer.backend, 'n': rn}
            if peer.name in a.only and cname not in a.only[peer.name]:
                emit(dict(base, status='n/a', why='left out by --only'))
                continue
            if out_of_time():
                emit(dict(base, status='skipped', why=f'--time-limit {a.time_limit:g} s reached'))
                continue
            say(f'[{done}/{total}] {cname} {peer.name} (n {rn}, {time.time() - t0:.0f} s so far)')
            dev_result, check_on = None, 'host'
            try:
                call = peer.prepare(case, inputs, n, mn)
                first_s, median_s, reps = common.measure(call, peer.time_one, a.reps, a.case_seconds)
                result = call()
                peer.wait(result)
                cp = device_xp() if peer.backend == 'cuda' else None
                if (cp is not None and ref is not None and case.check == 'values' and case.compare is None
                        and not isinstance(result, tuple)):
                    try:
                        dev_result = cp.asarray(on_device(cp, result), dtype=case.out_dtype).reshape(ref.shape)
                        if ref_dev is None:
                            ref_dev = cp.asarray(ref)
                        check_on = 'device'
                    except Exception as e:  # noqa: BLE001 - no zero-copy view: check on the host
                        say(f'{cname} {peer.name}: checking on the host ({type(e).__name__}: {e})')
                        dev_result = None
                if dev_result is None:
                    result = (tuple(peer.to_host(x) for x in result) if isinstance(result, tuple)
                              else peer.to_host(result))
            except common.NotApplicable as e:
                emit(dict(base, status='n/a', why=str(e)))
                continue
            except Exception as e:  # noqa: BLE001 - report, go on with the others
                say(f'{cname} {peer.name}: error: {type(e).__name__}: {e}')
                emit(dict(base, status='error', why=f'{type(e).__name__}: {e}'))
                failed = 1
                continue
            out_bytes = 0 if cname == 'topk_rows' else case.out_bytes(n, mn)  # input only
            rec = dict(base, status='ok', median_s=median_s, first_s=first_s, reps=reps,
                       threads=a.threads, bytes=in_bytes + out_bytes,
                       gbps=(in_bytes + out_bytes) / median_s / 1e9)
            if case.flops(mn):
                rec['gflops'] = case.flops(mn) / median_s / 1e9
            if case.compare is not None and ref_path:
                d, tol, how = case.compare(result, ref_path, n, inputs)
                rec.update(max_rel_diff=d if d != float('inf') else None, tol=tol, check_how=how,
                           check='ok' if d <= tol else 'MISMATCH')
                if rec['check'] != 'ok':
                    say(f'{cname} {peer.name}: MISMATCH against lazyfuse ({how})')
            elif ref is not None:
                if case.check == 'moments':
                    # the random part only: output minus the input it is added to
                    base_in = inputs[0].astype(np.float64) if inputs else 0.0
                    got = np.asarray(result, dtype=np.float64).reshape(ref.shape) - base_in
                    d = common.moments_diff(got, ref.astype(np.float64) - base_in)
                else:
                    d = None
                    if dev_result is not None:
                        try:
                            d = common.max_rel_diff(dev_result, ref_dev, xp=device_xp())
                        except Exception as e:  # noqa: BLE001 - out of device memory, say: on the host
                            say(f'{cname} {peer.name}: checking on the host ({type(e).__name__}: {e})')
                            result, check_on = peer.to_host(result), 'host'
                    if d is None:
                        d = common.max_rel_diff(np.asarray(result, dtype=case.out_dtype).reshape(ref.shape), ref)
                rec['check_on'] = check_on
                rec['max_rel_diff'] = d if d != float('inf') else None
                tol = common.peer_tol(case)
                rec['tol'] = tol
                rec['check'] = 'ok' if d <= tol else 'MISMATCH'
                rec['check_how'] = ('mean and sd of the random numbers' if case.check == 'moments'
                                    else 'values')
                if rec['check'] != 'ok':
                    say(f'{cname} {peer.name}: MISMATCH against lazyfuse: max relative difference '
                        f'{d:.3g} > {tol:g} ({rec["check_how"]})')
            else:
                rec['check'] = 'n/a'
            emit(rec)
            del call, result, dev_result  # this system's device memory, before the next one's
        del inputs, ref_dev
    say(f'done in {time.time() - t0:.0f} s')
    if out is not sys.stdout:
        out.close()
    return failed


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
