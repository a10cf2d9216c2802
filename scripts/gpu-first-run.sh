#!/usr/bin/env bash
# scripts/gpu-first-run.sh: lazyfuse's first run on a GPU, in ONE command that
# fits a 15-minute device lease (issue 24, point 4). scripts/gpu-check.sh is
# the unhurried full check for a machine you keep; this one has a budget.
#
#   bash scripts/gpu-first-run.sh [--dry-run] [--quick] [--budget S] [--steps LIST]
#
# Budget: BUDGET_S seconds in all (default 450 = 7.5 min, --quick 240; the
# environment or --budget overrides), counted from the start. Every step has
# an estimate and a time limit of its own (`timeout`). Before a step the
# budget left is compared with its estimate: a step that does not fit is not
# started and the summary says "SKIP step (budget: Ns left, needs ~Ms)"; a
# step that starts gets min(its limit, the budget left). A step that needs the
# build is skipped when the build failed.
#
# Steps, with estimate / limit in seconds on the lease's machine (16 cores,
# one H100 or H200; how each estimate was made is in gpu_estimates below):
#   probe         10/30   nvidia-smi -L and the driver, nvcc --version,
#                         compute-sanitizer's path and version, the NVRTC
#                         libraries present; beside the build, each python3
#                         (PATH, /opt/torch/.venv, /usr/bin) with the versions
#                         of numpy, cupy, jax, torch, numba(-cuda) and whether
#                         each sees the GPU (the one with most of them runs
#                         the peers)
#   build         45/150  .gpu-carry/env.sh sourced when present (Criterion,
#                         dlpack.h, pkg-config paths); meson (or python3 -m
#                         mesonbuild.mesonmain) setup build-gpu/ release,
#                         -Dcuda=enabled; ninja -j<cores>
#   device        5/30    lf_ctx_new(LF_BACKEND_CUDA) and lf_ctx_device_name
#                         from a small C program linked to the built library,
#                         and the libcuda / libnvrtc it has mapped
#   cuda-tests    60/150  the CUDA suites only, straight from the binaries,
#                         all at once, Criterion --jobs split over the cores:
#                         eval, views, reduce, errors, sort with
#                         LF_TEST_BACKEND=cuda (meson's '<suite>-cuda') and
#                         test_cuda (meson's 'cuda'), LF_TEST_REQUIRE_CUDA=1
#   differential  60/100  test_fusion --filter='fusion/differential*' with
#                         LF_TEST_BACKEND=cuda, one shard per 1-2 cores, each
#                         its own LF_TEST_SEED (printed), LF_TEST_NGRAPHS from
#                         the time left (at least 300 graphs in all);
#                         LF_TEST_TRACE counts the graphs a shard finished, a
#                         failing graph is printed as a command that replays it
#   bench         50/120  lazyfuse-bench --backend cuda --n 2^26 --json
#                         --save-outputs on the cases below, fused and unfused
#                         when the budget allows (else fused only)
#   peers         90/120  benches/peers/run_peers.py --systems cuda on the
#                         bench's cases and saved outputs (CuPy, cupy.fuse and
#                         ElementwiseKernel, JAX jit, torch eager, torch.compile
#                         on a few cases, Numba CUDA): --reps, a per-case and
#                         an overall time cap; a system that is skipped, an
#                         error or a MISMATCH fails the step
#   sanitizer     60/100  compute-sanitizer memcheck, racecheck, initcheck
#                         (side by side, --target-processes all) on a few eval
#                         tests and the first 20 graphs of the differential's
#                         first shard (kernels cached by then); "Device not
#                         supported", error 999 and the like make a tool SKIP.
#                         Last, so that a sanitizer that hangs (gVisor) costs
#                         no figures
#
# Output in $OUT (default build-gpu-first-run/), flat, at most 8 files:
#   summary.txt      one line per step (PASS / FAIL / SKIP, seconds, detail),
#                    then the key figures; printed last on stdout
#   probe.txt        everything the probe and the device step saw
#   bench-cuda.json  lazyfuse-bench's JSON lines
#   peers-cuda.json  run_peers.py's JSON lines
#   sanitizer.txt    each tool's verdict and its first reports
#   logs.tar.gz      every step's log
# build-gpu/, kernel caches, saved outputs and logs before packing live in
# build-gpu/ and a mktemp folder under /tmp (removed at exit; KEEP_SCRATCH=1
# keeps it); the bench's saved outputs in build-gpu/gfr-outputs/. --steps
# a,b runs only those steps (a second command on the same lease; the files
# of the others stay in $OUT, the build is reused). GFR_BUILD_DIR overrides
# build-gpu/; GFR_SEED fixes the seeds.
#
# Dry run (--dry-run; automatic when there is no nvidia-smi): the same steps
# for a machine without a GPU, to check this script: the probe and the device
# step with the fake driver (tests/fake_libcuda.so through LF_CUDA_LIBRARY;
# it runs no kernels), the build as above, the 'cuda' suite on the fake
# driver plus the '-cuda' suites (they skip without a device, so no
# LF_TEST_REQUIRE_CUDA), the differential replaced by test_cuda_codegen's host
# emulation of the generated CUDA kernels (LF_TEST_NVRTC=1,
# LF_TEST_EMU_NGRAPHS, in shards), the sanitizer skipped, the bench on the
# fake driver at n = 65536 (its timings and outputs are meaningless, and the
# summary says so), the peers with what this machine has (--systems
# numpy,cupy: NumPy's checks against the meaningless outputs mismatch and
# CuPy is skipped, both expected). `--dry-run --quick` takes about 85 s on
# 2 cores from scratch (the build is 45 s of it) and under a minute with the
# build done (tests/gpu_first_run_dry.sh, meson test gpu-first-run-dry).
#
# Exit status: 0 when no step failed, 1 when one did, 2 for bad arguments.
set -uo pipefail

SELF="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")"
ROOT="$(cd "$(dirname "$SELF")/.." && pwd)"
cd "$ROOT" || exit 2

BENCH_CASES=gaussian_pdf,polar_distance,hypot,triad,chain8,chain32,sum_of_squares,softmax_rows,layer_norm,cumsum,overhead
PEER_COMPILE_CASES="${PEER_COMPILE_CASES:-chain32,softmax_rows,layer_norm}" # torch.compile: ~10 s each
STEPS=(probe build device cuda-tests differential bench peers sanitizer)

# Estimates and limits (seconds). GPU: 16 cores, H100. The build is 49 s on
# this project's 2-core machine (181 targets, -j2), so about 10-15 s on 16
# cores plus meson setup; the CUDA suites compile about 1,500 kernels with
# NVRTC (eval alone: 944 CPU kernel files on the CPU backend), ~0.1-0.2 s
# each, spread over 16 Criterion workers; a differential graph compiles about
# 11 kernels (2.3 s a graph with NVRTC on one core here), so 16 shards of ~20
# graphs; the bench at 2^26 is 11 cases x 2 modes x (256 MiB inputs made on
# the host and copied, a cold NVRTC compile, <= 200 reps of < 1 ms, saving
# and checking 256 MiB) ~ 2 s each; the peers are 10 cases x 7 systems, the
# inputs made on the host (0.7-1.4 s per 2^26 input), checks on the device,
# plus the imports and torch.compile (~10 s a case).
gpu_estimates() {
    EST=([probe]=10 [build]=45 [device]=5 [cuda-tests]=60 [differential]=60 [bench]=50 [peers]=90 [sanitizer]=60)
    LIM=([probe]=30 [build]=150 [device]=30 [cuda-tests]=150 [differential]=100 [bench]=120 [peers]=120 [sanitizer]=100)
}
# Dry run, measured on the 2-core machine (build from scratch 60 s, then
# incremental; the 'cuda' suite 16 s; an emulated graph 2-4 s a core).
dry_estimates() {
    EST=([probe]=5 [build]=60 [device]=3 [cuda-tests]=25 [differential]=40 [bench]=20 [peers]=15 [sanitizer]=1)
    LIM=([probe]=30 [build]=400 [device]=30 [cuda-tests]=150 [differential]=200 [bench]=120 [peers]=120 [sanitizer]=30)
}
declare -A EST LIM

usage() {
    sed -n '2,/^set -uo/p' "$SELF" | sed -e '/^set -uo/d' -e 's/^# \{0,1\}//'
}

# ---- helpers shared by the main run and the steps ------------------------------------

now() { date +%s; }
left() { echo $((GFR_BUDGET - ($(now) - GFR_T0))); }
say() { printf '==> %s\n' "$*" >&2; }
# note: a key figure of the current step (summary.txt, after the step lines)
note() { printf '%s\n' "$*" >> "$GFR_SCRATCH/notes/$STEP.txt"; }
# detail: the text after the step's status in its summary line
detail() { printf '%s\n' "$*" > "$GFR_SCRATCH/notes/$STEP.detail"; }
skip_step() {
    detail "$*"
    exit 77
}
built() { [ -f "$GFR_SCRATCH/built" ]; }
need_build() { built || skip_step "(no build)"; }

# A command's first output line, or "absent".
first_line() { "$@" 2>&1 | head -n 1 || true; }

find_sanitizer() {
    local c
    for c in "$(command -v compute-sanitizer 2>/dev/null)" \
        "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer" \
        "${CUDA_HOME:-/usr/local/cuda}/compute-sanitizer/compute-sanitizer" \
        /usr/local/cuda/compute-sanitizer/compute-sanitizer /usr/local/cuda/bin/compute-sanitizer; do
        if [ -n "$c" ] && [ -x "$c" ]; then
            echo "$c"
            return 0
        fi
    done
    return 1
}

find_nvcc() {
    local c
    for c in "$(command -v nvcc 2>/dev/null)" "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" /usr/local/cuda/bin/nvcc; do
        if [ -n "$c" ] && [ -x "$c" ]; then
            echo "$c"
            return 0
        fi
    done
    return 1
}

# The python3 candidates, once each: PATH's, the torch venv's, the system's.
python_candidates() {
    local seen=" " p
    for p in "$(command -v python3 2>/dev/null)" /opt/torch/.venv/bin/python3 /usr/bin/python3; do
        if [ -z "$p" ] || [ ! -x "$p" ]; then continue; fi
        case "$seen" in *" $p "*) continue ;; esac
        seen="$seen$p "
        echo "$p"
    done
}

# Runs "$@" with a limit of $1 seconds (kills its process group after).
limited() {
    local s="$1"
    shift
    timeout -k 5 "$s" "$@"
}

# ---- probe ---------------------------------------------------------------------------

step_probe() {
    local f="$GFR_SCRATCH/probe-system.txt" cs nvcc
    {
        echo "== host"
        uname -srm
        echo "cores: $(nproc), memory: $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo)"
        echo "date: $(date -u +%FT%TZ)  mode: $([ "$GFR_DRY" = 1 ] && echo dry-run || echo gpu)$([ "$GFR_QUICK" = 1 ] && echo ' quick')"
        echo "git: $(git -C "$ROOT" log -1 --format='%h %s' 2>/dev/null | cut -c1-100)"
        echo "== nvidia-smi -L"
        if command -v nvidia-smi > /dev/null; then
            limited 15 nvidia-smi -L 2>&1
            echo "== nvidia-smi (driver)"
            limited 15 nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap,compute_mode,clocks.max.sm,clocks.max.mem \
                --format=csv 2>&1
            limited 15 nvidia-smi 2>&1 | sed -n '1,12p'
        else
            echo "absent (no GPU here: dry run)"
        fi
        echo "== nvcc"
        if nvcc="$(find_nvcc)"; then
            echo "$nvcc"
            "$nvcc" --version 2>&1 | tail -n 2
        else
            echo "absent"
        fi
        echo "== NVRTC and libcuda present (lazyfuse's search: the loader's, then \$CUDA_HOME, /usr/local/cuda, pip wheels)"
        ldconfig -p 2>/dev/null | grep -E 'libnvrtc\.so|libcuda\.so' | sed 's/^\t*//'
        # shellcheck disable=SC2012 # names only, for people
        ls -1 "${CUDA_HOME:-/usr/local/cuda}"/lib64/libnvrtc.so* /usr/local/cuda/lib64/libnvrtc.so* \
            /opt/torch/.venv/lib/python3*/site-packages/nvidia/cu13/lib/libnvrtc.so* \
            /opt/torch/.venv/lib/python3*/site-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so* 2>/dev/null | sort -u
        echo "LF_NVRTC_LIBRARY=${LF_NVRTC_LIBRARY:-} LF_CUDA_LIBRARY=${LF_CUDA_LIBRARY:-} CUDA_HOME=${CUDA_HOME:-}"
        echo "== compute-sanitizer"
        if cs="$(find_sanitizer)"; then
            echo "$cs"
            limited 20 "$cs" --version 2>&1 | tail -n 2
        else
            echo "absent"
        fi
        echo "== .gpu-carry"
        if [ -f "$ROOT/.gpu-carry/env.sh" ]; then
            echo "sourced .gpu-carry/env.sh"
            echo "CPATH=${CPATH:-}"
            echo "LIBRARY_PATH=${LIBRARY_PATH:-}"
            echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
            echo "PKG_CONFIG_PATH=${PKG_CONFIG_PATH:-}"
        else
            echo "absent"
        fi
        echo "== tools"
        echo "cc: $(first_line cc --version)"
        echo "meson: $(command -v meson || echo 'not on PATH')  ninja: $(command -v ninja || echo 'not on PATH')"
        echo "pkg-config: $(command -v pkg-config || echo absent)  shellcheck: $(command -v shellcheck || echo absent)"
    } > "$f" 2>&1
    local gpu sm drv
    gpu="$(command -v nvidia-smi > /dev/null && limited 15 nvidia-smi -L 2>/dev/null | head -n 1 | sed 's/ (UUID.*//')"
    drv="$(command -v nvidia-smi > /dev/null && limited 15 nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n 1)"
    nvcc="$(find_nvcc > /dev/null && "$(find_nvcc)" --version 2>/dev/null | grep -o 'release [0-9.]*' | head -n 1)"
    sm="$(find_sanitizer > /dev/null && echo yes || echo no)"
    local mode
    mode="$(command -v nvidia-smi > /dev/null && limited 15 nvidia-smi --query-gpu=compute_mode --format=csv,noheader 2>/dev/null | head -n 1)"
    case "$mode" in *[Ee]xclusive*) note "WARNING: compute mode $mode: the steps that run several CUDA processes at once (tests, differential, sanitizer) will fail" ;; esac
    detail "${gpu:-no GPU (dry run)}${drv:+, driver $drv}, nvcc ${nvcc:-absent}, compute-sanitizer $sm"
    [ "$GFR_DRY" = 1 ] || command -v nvidia-smi > /dev/null
}

# Each python3 candidate: its packages and whether they see the GPU; one JSON
# object per line. Runs beside the build (imports of torch and jax take
# seconds), the main run waits for it before the peers.
py_probe() {
    "$1" - "$2" "$1" <<'EOF'
import importlib, json, os, sys, time
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
gpu = sys.argv[1] == "1"
r = {"python": sys.argv[2], "executable": sys.executable, "version": sys.version.split()[0], "mods": {}}
def cupy_dev(cp):
    n = cp.cuda.runtime.getDeviceCount()
    return "%d device(s), %s" % (n, cp.cuda.runtime.getDeviceProperties(0)["name"].decode())
def jax_dev(jax):
    return ", ".join(str(d) for d in jax.devices("gpu"))
def torch_dev(t):
    if not t.cuda.is_available():
        raise RuntimeError("torch.cuda.is_available() is False")
    return t.cuda.get_device_name(0) + ", CUDA " + str(t.version.cuda)
def numba_dev(numba):
    from numba import cuda
    if not cuda.is_available():
        raise RuntimeError("numba.cuda.is_available() is False")
    return str(cuda.get_current_device().name)
for name, dev in [("numpy", None), ("cupy", cupy_dev), ("jax", jax_dev), ("torch", torch_dev),
                  ("numba", numba_dev), ("numba_cuda", None), ("numexpr", None), ("mesonbuild", None)]:
    t = time.time()
    try:
        m = importlib.import_module(name)
        info = {"version": str(getattr(m, "__version__", "?"))}
        if name == "mesonbuild":
            try:
                import mesonbuild.coredata as cd
                info["version"] = cd.version
            except Exception:
                pass
        if gpu and dev:
            try:
                info["device"] = dev(m)
            except Exception as e:
                info["device_error"] = ("%s: %s" % (type(e).__name__, e))[:300]
    except Exception as e:
        info = {"error": ("%s: %s" % (type(e).__name__, e))[:300]}
    info["s"] = round(time.time() - t, 1)
    r["mods"][name] = info
print(json.dumps(r), flush=True)
EOF
}

step_pyprobe() {
    local p i=0
    : > "$GFR_SCRATCH/pyprobe.jsonl"
    while read -r p; do
        i=$((i + 1))
        (limited 75 bash "$SELF" --py-probe "$p" "$([ "$GFR_DRY" = 1 ] && echo 0 || echo 1)" \
            > "$GFR_SCRATCH/pyprobe.$i.json" 2> "$GFR_SCRATCH/pyprobe.$i.err" ||
            printf '{"python": "%s", "error": "probe failed or timed out (rc %s)"}\n' "$p" "$?" \
                > "$GFR_SCRATCH/pyprobe.$i.json") &
    done < <(python_candidates)
    wait
    cat "$GFR_SCRATCH"/pyprobe.*.json >> "$GFR_SCRATCH/pyprobe.jsonl" 2>/dev/null
    for p in "$GFR_SCRATCH"/pyprobe.*.err; do
        [ -s "$p" ] && { echo "== $p"; tail -n 20 "$p"; }
    done
    # the python for the peers: numpy and (GPU) the most systems that see the device
    "$GFR_PY" - "$GFR_SCRATCH/pyprobe.jsonl" "$GFR_DRY" > "$GFR_SCRATCH/pyprobe.txt" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip().startswith('{')]
dry = sys.argv[2] == '1'
best, best_score = None, -1
for r in rows:
    mods = r.get('mods', {})
    print('== %s (%s, python %s)' % (r['python'], r.get('executable', '?'), r.get('version', '?')))
    if 'error' in r:
        print('   ' + r['error'])
        continue
    for name, i in mods.items():
        s = i.get('version') if 'error' not in i else 'absent (%s)' % i['error'][:120]
        if 'device' in i:
            s += '; device: ' + i['device']
        if 'device_error' in i:
            s += '; no device: ' + i['device_error'][:160]
        print('   %-11s %s  (%.1f s)' % (name, s, i.get('s', 0)))
    if 'error' in mods.get('numpy', {'error': 1}):
        continue
    score = 1 + sum(1 for m in ('cupy', 'jax', 'torch', 'numba') if 'device' in mods.get(m, {}))
    if dry:
        score = 1
    if score > best_score:
        best, best_score = r['python'], score
for r in rows:
    mods = r.get('mods', {})
    have = ['%s %s%s' % (m, i['version'], ' (GPU)' if 'device' in i else '') for m, i in mods.items()
            if 'error' not in i and m != 'mesonbuild']
    print('short: %s: %s' % (r['python'], ', '.join(have) if have else r.get('error', 'nothing')))
print('short: peers python: %s' % best)
if best:
    open(sys.argv[1] + '.best', 'w').write(best + '\n')
EOF
}

# ---- build ---------------------------------------------------------------------------

# MESON: how to run meson (an array); ninja: on PATH afterwards (meson needs it).
find_meson_ninja() {
    local p d
    MESON=()
    if command -v meson > /dev/null; then
        MESON=(meson)
    else
        while read -r p; do
            d="$(dirname "$p")"
            if [ -x "$d/meson" ]; then
                MESON=("$d/meson")
                break
            fi
            if "$p" -c 'import mesonbuild' 2> /dev/null; then
                MESON=("$p" -m mesonbuild.mesonmain)
                break
            fi
        done < <(python_candidates)
    fi
    if ! command -v ninja > /dev/null; then
        while read -r p; do
            d="$(dirname "$p")"
            if [ -x "$d/ninja" ]; then
                export PATH="$PATH:$d"
                break
            fi
            if "$p" -c 'import ninja' 2> /dev/null; then
                mkdir -p "$GFR_SCRATCH/bin"
                printf '#!/bin/sh\nexec "%s" -m ninja "$@"\n' "$p" > "$GFR_SCRATCH/bin/ninja"
                chmod +x "$GFR_SCRATCH/bin/ninja"
                export PATH="$GFR_SCRATCH/bin:$PATH"
                break
            fi
        done < <(python_candidates)
    fi
    [ ${#MESON[@]} -gt 0 ] && command -v ninja > /dev/null
}

step_build() {
    local b="$GFR_BUILD" opts="-Dbuildtype=release -Dcuda=enabled" t0 rc
    if ! find_meson_ninja; then
        detail "(no meson or no ninja: not on PATH, not in a python3's site-packages)"
        return 1
    fi
    say "meson: ${MESON[*]} ($("${MESON[@]}" --version 2>&1)), ninja: $(command -v ninja) ($(ninja --version 2>&1))"
    t0=$(now)
    # shellcheck disable=SC2086 # opts is two words on purpose
    if [ -f "$b/meson-private/coredata.dat" ] && [ "$(cat "$b/.gfr-options" 2>/dev/null)" = "$opts" ]; then
        say "$b is configured with $opts: ninja regenerates it when a meson.build changed"
    elif [ -f "$b/meson-private/coredata.dat" ]; then
        "${MESON[@]}" setup --reconfigure "$b" $opts || "${MESON[@]}" setup --wipe "$b" $opts || return 1
    else
        rm -rf "$b"
        "${MESON[@]}" setup "$b" $opts || {
            detail "(meson setup failed: see logs/build.log; Criterion and pkg-config come from .gpu-carry/env.sh)"
            return 1
        }
    fi
    echo "$opts" > "$b/.gfr-options"
    local setup_s=$(($(now) - t0))
    t0=$(now)
    ninja -C "$b" -j "$GFR_JOBS" 2>&1 | tail -n 40
    rc=${PIPESTATUS[0]}
    [ "$rc" = 0 ] || {
        detail "(ninja failed: see logs/build.log)"
        return 1
    }
    touch "$GFR_SCRATCH/built"
    detail "meson $("${MESON[@]}" --version 2>&1), setup ${setup_s}s, ninja -j$GFR_JOBS $(($(now) - t0))s"
    grep -E 'CUDA|cuda' "$b/meson-logs/meson-log.txt" 2>/dev/null | grep -iE 'header|found|backend' | tail -n 3 |
        while read -r l; do note "build: $l"; done
}

# ---- device --------------------------------------------------------------------------

step_device() {
    need_build
    local d="$GFR_SCRATCH/device"
    cat > "$d.c" <<'EOF'
/* lf_ctx_new(LF_BACKEND_CUDA), lf_ctx_device_name, and the CUDA libraries
 * this process has mapped (which libcuda, which libnvrtc). */
#include "lazyfuse.h"
#include <stdio.h>
#include <string.h>
int main(void) {
    lf_ctx_options o;
    lf_ctx_options_init(&o);
    o.backend = LF_BACKEND_CUDA;
    lf_ctx *ctx = lf_ctx_new(&o);
    if (!ctx) {
        printf("no CUDA context: %s\n", lf_errmsg(NULL));
        return 1;
    }
    char name[1024];
    lf_ctx_device_name(ctx, name, sizeof name);
    printf("device: %s\n", name);
    FILE *f = fopen("/proc/self/maps", "r");
    char line[4096], last[4096] = "";
    while (f && fgets(line, sizeof line, f)) {
        char *p = strchr(line, '/');
        if (!p || (!strstr(p, "libcuda") && !strstr(p, "nvrtc") && !strstr(p, "fake_libcuda"))) continue;
        if (strcmp(p, last)) printf("mapped: %s", p);
        snprintf(last, sizeof last, "%s", p);
    }
    if (f) fclose(f);
    lf_ctx_destroy(ctx);
    return 0;
}
EOF
    cc -std=c11 -O1 -I "$ROOT/include" "$d.c" "$GFR_BUILD/liblazyfuse.a" -ldl -lpthread -lm -o "$d" || {
        detail "(cannot build the probe program against $GFR_BUILD/liblazyfuse.a)"
        return 1
    }
    if [ "$GFR_DRY" = 1 ]; then
        LF_CUDA_LIBRARY="$GFR_BUILD/tests/fake_libcuda.so" limited 20 "$d" > "$d.txt" 2>&1
    else
        limited 20 "$d" > "$d.txt" 2>&1
    fi
    local rc=$?
    cat "$d.txt"
    detail "$(head -n 1 "$d.txt" | cut -c1-300)$([ "$GFR_DRY" = 1 ] && echo ' (fake driver)')"
    grep '^mapped:' "$d.txt" | while read -r l; do note "device: $l"; done
    return $rc
}

# ---- cuda-tests ----------------------------------------------------------------------

# The first MAX failing tests of a Criterion log, each with its first
# assertion message: "  FAIL suite::test: message".
failing_tests() {
    awk -v max="$2" '
        /^\[----\] [^ ].*(Assertion Failed|signal)/ { next }
        /^\[----\]   +[^ ]/ { if (msg == "") { m = $0; sub(/^\[----\] +/, "", m); msg = m } next }
        /^\[FAIL\]/ {
            n++
            if (n <= max) { t = $2; sub(/:$/, "", t); r = $0; sub(/^\[FAIL\] [^ ]* /, "", r)
                            printf "  FAIL %s: %s\n", t, substr(msg != "" ? msg : r, 1, 200) }
            msg = ""
            next
        }
        END { if (n > max) printf "  ... and %d more failing tests\n", n - max }' "$1"
}

# Runs the suites NAME:JOBS... in parallel (Criterion's own --jobs inside each),
# logs in logs/tests-NAME.log; notes each one's synthesis line.
step_cuda_tests() {
    need_build
    local t="$GFR_BUILD/tests" lim=$((GFR_LIMIT - 10)) s name jobs rc=0 pids=() names=()
    local suites
    if [ "$GFR_DRY" = 1 ]; then
        suites="cuda:1 eval:1 views:1 reduce:1 errors:1 sort:1"
    elif [ "$GFR_JOBS" -ge 16 ]; then
        # workers by kernels to compile (on the CPU backend eval makes 944
        # kernel files, views 355, sort 280, reduce 178, errors 22)
        suites="eval:6 views:3 sort:2 reduce:2 errors:1 cuda:2"
    else
        suites="eval:2 errors:1 reduce:1 views:1 sort:1 cuda:1"
    fi
    [ "$GFR_DRY" = 1 ] || export LF_TEST_REQUIRE_CUDA=1
    for s in $suites; do
        name="${s%%:*}"
        jobs="${s##*:}"
        if [ "$name" = cuda ]; then
            LF_TEST_FAKE_CUDA="$t/fake_libcuda.so" limited "$lim" "$t/test_cuda" --jobs="$jobs" \
                > "$GFR_SCRATCH/logs/tests-cuda.log" 2>&1 &
        else
            LF_TEST_BACKEND=cuda limited "$lim" "$t/test_$name" --jobs="$jobs" \
                > "$GFR_SCRATCH/logs/tests-$name-cuda.log" 2>&1 &
        fi
        pids+=($!)
        names+=("$name")
    done
    local i log syn label failed=() tested=0
    for i in "${!pids[@]}"; do
        wait "${pids[$i]}"
        local r=$?
        name="${names[$i]}"
        label="$([ "$name" = cuda ] && echo cuda || echo "$name-cuda")"
        log="$GFR_SCRATCH/logs/tests-$label.log"
        syn="$(grep -a 'Synthesis:' "$log" | tail -n 1 | sed 's/.*Synthesis: //')"
        [ -n "$syn" ] || syn="no synthesis line (rc $r$([ "$r" = 124 ] && echo ': timed out'))"
        note "$(printf '%-12s %s' "$label" "$syn")"
        local nt
        nt=$(echo "$syn" | sed -n 's/.*Tested: \([0-9]*\).*/\1/p' | head -n 1)
        tested=$((tested + ${nt:-0}))
        if [ "$r" != 0 ]; then
            rc=1
            failed+=("$label")
            failing_tests "$log" 4 | while IFS= read -r l; do note "$l"; done
        fi
        # the first eval test's seed, for a replay
        [ "$name" = eval ] && [ "${nt:-0}" -gt 0 ] && note "  eval-cuda $(grep -a -o 'LF_TEST_SEED=[0-9]*' "$log" | head -n 1)"
    done
    if [ "$rc" = 0 ]; then
        detail "$tested tests in 6 suites$([ "$GFR_DRY" = 1 ] && echo ' (the -cuda suites skip without a device; cuda: fake driver)')"
    else
        detail "failed: ${failed[*]} (see logs/tests-*.log)"
    fi
    return $rc
}

# ---- differential --------------------------------------------------------------------

step_differential() {
    need_build
    local shards per base lim spg total i pids=() seeds=()
    base="${GFR_SEED:-$(now)}"
    lim=$((GFR_LIMIT - 12))
    if [ "$GFR_DRY" = 1 ]; then
        shards=2
        per=$([ "$GFR_QUICK" = 1 ] && echo 6 || echo 16)
    else
        # one shard per core (NVRTC is one thread), at most 16; graphs from the
        # time: ~2.5 s a graph on one core, 70% of the limit; >= 300 in all
        shards=$((GFR_JOBS < 16 ? GFR_JOBS : 16))
        [ "$shards" -ge 1 ] || shards=1
        spg="${GFR_SEC_PER_GRAPH:-2.5}"
        per=$(awk -v l="$lim" -v s="$spg" 'BEGIN { printf "%d", l * 0.7 / s }')
        local min=$(((300 + shards - 1) / shards))
        [ "$GFR_QUICK" = 1 ] && min=$(((100 + shards - 1) / shards))
        [ "$per" -ge "$min" ] || per=$min
        [ "$per" -le 400 ] || per=400
    fi
    total=$((shards * per))
    echo $((base * 100 + 1)) > "$GFR_SCRATCH/differential-seed" # the sanitizer reruns its first graphs
    for i in $(seq 1 "$shards"); do
        local seed=$((base * 100 + i))
        seeds+=("$seed")
        if [ "$GFR_DRY" = 1 ]; then
            LF_TEST_NVRTC=1 LF_TEST_SEED=$seed LF_TEST_EMU_NGRAPHS=$per \
                limited "$lim" "$GFR_BUILD/tests/test_cuda_codegen" --jobs=1 \
                --filter='cuda_codegen/emulated_kernels_match_the_reference' \
                > "$GFR_SCRATCH/logs/differential-$i.log" 2>&1 &
        else
            LF_TEST_BACKEND=cuda LF_TEST_REQUIRE_CUDA=1 LF_TEST_TRACE=1 LF_TEST_SEED=$seed LF_TEST_NGRAPHS=$per \
                limited "$lim" "$GFR_BUILD/tests/test_fusion" --jobs=1 --filter='fusion/differential*' \
                > "$GFR_SCRATCH/logs/differential-$i.log" 2>&1 &
        fi
        pids+=($!)
    done
    local rc=0 done_all=0 fails=0 timeouts=0 log r done_i msg
    for i in "${!pids[@]}"; do
        wait "${pids[$i]}"
        r=$?
        log="$GFR_SCRATCH/logs/differential-$((i + 1)).log"
        if [ "$GFR_DRY" = 1 ]; then
            done_i=$(grep -a -o 'emulated [0-9]* graphs' "$log" | grep -o '[0-9]*' | head -n 1)
            done_i=${done_i:-0}
        else
            done_i=$(grep -a -c '^graph [0-9]*$' "$log")
            # a shard that did not finish has not finished its last graph
            [ "$r" = 0 ] || done_i=$((done_i > 0 ? done_i - 1 : 0))
        fi
        done_all=$((done_all + done_i))
        msg="shard $((i + 1)): LF_TEST_SEED=${seeds[$i]} $done_i/$per graphs"
        if [ "$r" = 0 ]; then
            msg="$msg ok"
        elif [ "$r" = 124 ] || [ "$r" = 137 ]; then
            timeouts=$((timeouts + 1))
            msg="$msg, stopped at the time limit (${lim}s)"
            # a timeout is a failure only when an assertion or a crash came first
            if grep -a -q -E 'Assertion Failed|CRASH' "$log"; then
                fails=$((fails + 1))
                msg="$msg after a FAILURE"
            fi
        elif [ "$GFR_DRY" = 1 ] && [ "$(grep -a -c 'Assertion Failed' "$log")" = 1 ] &&
            grep -a -q 'no sort output of the random graphs was checked bit for bit' "$log"; then
            msg="$msg ok (no sort among this shard's graphs: the test's coverage check, not a kernel)"
        else
            fails=$((fails + 1))
            msg="$msg FAILED (rc $r)"
        fi
        note "$msg"
        # a shard's first failing graph, as a command that replays it (the
        # first 4 failing shards: the summary's tail is what comes back)
        [ "$fails" -le 4 ] || continue
        grep -a -o 'graph [0-9]* (LF_TEST_SEED=[0-9]* LF_TEST_GRAPH=[0-9]*)[^|]*' "$log" | head -n 1 |
            while read -r l; do
                local sd gr
                sd=$(echo "$l" | sed -n 's/.*LF_TEST_SEED=\([0-9]*\).*/\1/p')
                gr=$(echo "$l" | sed -n 's/.*LF_TEST_GRAPH=\([0-9]*\).*/\1/p')
                note "  $(echo "$l" | cut -c1-200)"
                if [ "$GFR_DRY" = 1 ]; then
                    note "  replay: LF_TEST_NVRTC=1 LF_TEST_SEED=$sd LF_TEST_GRAPH=$gr $GFR_BUILD_REL/tests/test_cuda_codegen --filter='cuda_codegen/emulated_kernels_match_the_reference'"
                else
                    note "  replay: LF_TEST_BACKEND=cuda LF_TEST_REQUIRE_CUDA=1 LF_TEST_SEED=$sd LF_TEST_GRAPH=$gr $GFR_BUILD_REL/tests/test_fusion --filter='fusion/differential*'"
                fi
            done
        if [ "$r" != 0 ] && [ "$GFR_DRY" != 1 ] && grep -a -q 'CRASH' "$log"; then
            note "  crashed in graph $((done_i)): LF_TEST_BACKEND=cuda LF_TEST_REQUIRE_CUDA=1 LF_TEST_SEED=${seeds[$i]} LF_TEST_GRAPH=$done_i $GFR_BUILD_REL/tests/test_fusion --filter='fusion/differential*'"
        fi
    done
    local what="graphs"
    [ "$GFR_DRY" = 1 ] && what="graphs on the host emulation of the CUDA kernels (dry run)"
    local min_total=300
    [ "$GFR_QUICK" = 1 ] && min_total=100
    [ "$GFR_DRY" = 1 ] && min_total=1
    if [ "$fails" -gt 0 ]; then
        rc=1
        detail "$fails of $shards shards failed; $done_all $what done (see notes for replays)"
    elif [ "$done_all" -lt "$min_total" ]; then
        rc=1
        detail "only $done_all $what finished in ${lim}s ($timeouts shards stopped at the limit; wanted >= $min_total)"
    else
        detail "$done_all/$total $what, $shards shards, seeds ${seeds[0]}..${seeds[$((shards - 1))]}"
    fi
    return $rc
}

# ---- bench ---------------------------------------------------------------------------

step_bench() {
    need_build
    local n mode args=() outdir="$GFR_BUILD/gfr-outputs"
    rm -rf "$outdir"
    if [ "$GFR_DRY" = 1 ]; then
        n=65536
        args=(--reps 3)
        export LF_CUDA_LIBRARY="$GFR_BUILD/tests/fake_libcuda.so"
    else
        n=$((1 << 26))
    fi
    # both modes when what is left after this step still holds the later ones
    mode=both
    if [ "$GFR_QUICK" = 1 ] && [ "$GFR_DRY" != 1 ]; then
        mode=fused
    elif [ $(($(left) - GFR_LATER_EST)) -lt "${EST[bench]}" ]; then
        mode=fused
    fi
    say "lazyfuse-bench --backend cuda --n $n --mode $mode"
    limited $((GFR_LIMIT - 5)) "$GFR_BUILD/benches/lazyfuse-bench" --backend cuda --n "$n" --json \
        --save-outputs "$outdir" --case "$BENCH_CASES" --mode "$mode" "${args[@]}" \
        > "$GFR_OUT/bench-cuda.json"
    local rc=$?
    local lines
    lines=$(grep -c '^{' "$GFR_OUT/bench-cuda.json")
    py_bench_summary "$GFR_OUT/bench-cuda.json" "$BENCH_CASES" "$GFR_DRY" \
        > "$GFR_SCRATCH/bench-figures.txt" 2>&1
    local src=$?
    while IFS= read -r l; do note "$l"; done < "$GFR_SCRATCH/bench-figures.txt"
    if [ "$GFR_DRY" = 1 ]; then
        # the fake driver runs no kernel: the overhead case's own check fails,
        # so the exit status says nothing; every case must have its lines
        [ "$src" = 0 ] || {
            detail "(fake driver) $lines JSON lines, a case is missing (rc $rc)"
            return 1
        }
        detail "n $n, mode $mode, $lines JSON lines (fake driver: timings and outputs meaningless)"
        return 0
    fi
    if [ "$rc" != 0 ] || [ "$src" != 0 ]; then
        detail "lazyfuse-bench rc $rc, $lines JSON lines (see logs/bench.log)"
        return 1
    fi
    detail "n $n, mode $mode, $lines JSON lines"
}

# Bench JSON -> key figures; exit 1 when a case has no line or a check failed (GPU).
py_bench_summary() {
    "$GFR_PY" - "$@" <<'EOF'
import json, sys
path, cases, dry = sys.argv[1], sys.argv[2].split(","), sys.argv[3] == "1"
rows = []
for l in open(path):
    l = l.strip()
    if l.startswith("{"):
        try:
            rows.append(json.loads(l))
        except ValueError:
            pass
def f(v, fmt):
    return "-" if v is None else fmt % v
bad = 0
copy = [r for r in rows if r.get("case") == "stream_copy"]
if copy:
    c = copy[-1]
    print("bench stream_copy (%s): %s GB/s" % (c.get("copy", "?"), f(c.get("gbps"), "%.1f")))
if dry:
    print("bench: FAKE DRIVER, no kernel ran: the timings and outputs below are meaningless")
extra = sorted({k for r in rows for k in r if k.startswith("pct_of_") and k != "pct_of_stream_copy"})
print("bench %-15s %-8s %10s %9s %8s %8s %s %s" % ("case", "mode", "median ms", "GB/s", "% copy", "speedup",
      " ".join("%8s" % k[7:15] for k in extra), "check"))
for r in rows:
    c, m = r.get("case"), r.get("mode")
    if c == "overhead":
        print("bench %-15s %-8s %9s us per eval, check %s" % (c, m[:14], f(r.get("median_us"), "%.2f"), r.get("check")))
    elif m in ("fused", "unfused"):
        print("bench %-15s %-8s %10s %9s %8s %8s %s %s" % (c, m, f(r.get("median_s") and r["median_s"] * 1e3, "%.3f"),
              f(r.get("gbps"), "%.1f"), f(r.get("pct_of_stream_copy"), "%.1f"), f(r.get("speedup"), "%.2fx"),
              " ".join("%8s" % f(r.get(k), "%.1f") for k in extra), r.get("check", "")))
        if r.get("check") == "MISMATCH" and not dry:
            bad = 1
    if r.get("check") == "MISMATCH" and c == "overhead" and not dry:
        bad = 1
missing = [c for c in cases if not any(r.get("case") == c for r in rows)]
if missing:
    print("bench: no line for " + ", ".join(missing))
    bad = 1
sys.exit(bad)
EOF
}

# ---- peers ---------------------------------------------------------------------------

step_peers() {
    need_build
    local py json="$GFR_OUT/bench-cuda.json" systems cases args=()
    [ -s "$json" ] || skip_step "(no bench JSON)"
    py="$(cat "$GFR_SCRATCH/pyprobe.jsonl.best" 2>/dev/null)"
    [ -n "$py" ] || {
        detail "(no python3 with numpy found: see probe.txt)"
        return 1
    }
    cases="${BENCH_CASES%,overhead}"
    local cap=$((GFR_LIMIT - 20))
    if [ "$GFR_DRY" = 1 ]; then
        systems=numpy,cupy
        args=(--reps 3)
    else
        systems=cuda
        args=(--reps 20 --case-seconds 1 --only "torch_compile=$PEER_COMPILE_CASES")
        [ "$GFR_QUICK" = 1 ] && cases=gaussian_pdf,chain32,sum_of_squares,softmax_rows
    fi
    say "$py benches/peers/run_peers.py --systems $systems --case $cases (time limit ${cap}s)"
    export CUPY_CACHE_DIR="$GFR_SCRATCH/cupy-cache" TORCHINDUCTOR_CACHE_DIR="$GFR_SCRATCH/inductor-cache"
    export TRITON_CACHE_DIR="$GFR_SCRATCH/triton-cache" XLA_PYTHON_CLIENT_PREALLOCATE=false
    limited $((GFR_LIMIT - 5)) "$py" "$ROOT/benches/peers/run_peers.py" --lazyfuse "$json" \
        --systems "$systems" --case "$cases" --time-limit "$cap" "${args[@]}" --json "$GFR_OUT/peers-cuda.json"
    local rc=$?
    py_peers_summary "$json" "$GFR_OUT/peers-cuda.json" "$GFR_DRY" \
        > "$GFR_SCRATCH/peers-figures.txt" 2>&1
    local src=$?
    while IFS= read -r l; do note "$l"; done < "$GFR_SCRATCH/peers-figures.txt"
    detail "$(grep '^peers verdict:' "$GFR_SCRATCH/peers-figures.txt" | sed 's/^peers verdict: //')$([ "$rc" != 0 ] && echo " (run_peers rc $rc)")"
    [ "$src" = 0 ] && { [ "$rc" = 0 ] || [ "$GFR_DRY" = 1 ]; }
}

# Peers JSON (+ the bench's) -> key figures and a verdict line; exit 1 on a
# skipped system, an error or a MISMATCH (dry run: NumPy's mismatches against
# the fake outputs and CuPy's skip are expected; it needs one checked case).
py_peers_summary() {
    "$GFR_PY" - "$@" <<'EOF'
import json, sys
def load(p):
    out = []
    try:
        for l in open(p):
            l = l.strip()
            if l.startswith("{"):
                try:
                    out.append(json.loads(l))
                except ValueError:
                    pass
    except OSError:
        pass
    return out
bench, peers, dry = load(sys.argv[1]), load(sys.argv[2]), sys.argv[3] == "1"
lf = {r["case"]: r["median_s"] for r in bench if r.get("mode") == "fused" and r.get("median_s")}
systems = [r for r in peers if r.get("kind") == "system"]
cases = [r for r in peers if r.get("kind") == "case"]
skipped = [s for s in systems if s.get("status") != "ok"]
errors = [c for c in cases if c.get("status") == "error"]
mism = [c for c in cases if c.get("check") == "MISMATCH"]
ok = [c for c in cases if c.get("status") == "ok"]
checked = [c for c in ok if c.get("check") in ("ok", "MISMATCH")]
capped = [c for c in cases if c.get("status") == "skipped"]
for s in systems:
    if s.get("status") == "ok":
        print("peers system %-14s %s: %s" % (s["system"], s.get("version", ""), s.get("how", "")[:90]))
    else:
        print("peers system %-14s SKIPPED: %s" % (s["system"], s.get("why", "")[:160]))
names = [s["system"] for s in systems if s.get("status") == "ok"]
if dry:
    print("peers: dry run: lazyfuse's outputs come from the fake driver, so checks against them mismatch")
print("peers median ms (x = peer / lazyfuse fused, above 1 lazyfuse is faster; ! = check failed)")
print("peers %-15s %10s  %s" % ("case", "lazyfuse", "  ".join("%-20s" % n[:20] for n in names)))
for case in dict.fromkeys(c["case"] for c in cases):
    cells = []
    for n in names:
        r = next((c for c in cases if c["case"] == case and c["system"] == n), None)
        if r is None:
            cells.append("-")
        elif r.get("status") != "ok":
            cells.append(r.get("status", "?"))
        else:
            x = r["median_s"] / lf[case] if lf.get(case) else None
            cells.append("%.3f%s%s" % (r["median_s"] * 1e3, " (%.2fx)" % x if x else "",
                                       "!" if r.get("check") == "MISMATCH" else ""))
    lm = lf.get(case)
    print("peers %-15s %10s  %s" % (case, "%.3f" % (lm * 1e3) if lm else "-", "  ".join("%-20s" % c for c in cells)))
for c in errors[:8]:
    print("peers error: %s %s: %s" % (c["case"], c["system"], c.get("why", "")[:200]))
for c in mism[:2 if dry else 12]:
    print("peers MISMATCH: %s %s: max_rel_diff %s > %s (%s)" % (c["case"], c["system"], c.get("max_rel_diff"),
          c.get("tol"), c.get("check_how", "")))
if capped:
    print("peers: %d case runs left out by the time limit" % len(capped))
if dry:
    exp_skip = [s for s in skipped if s["system"] != "numpy"]
    good = len(checked) > 0 and not errors and not [s for s in skipped if s["system"] == "numpy"]
    verdict = "%d case runs checked (%d mismatches: expected, fake outputs), %d systems skipped as expected (%s)" % (
        len(checked), len(mism), len(exp_skip), ", ".join(s["system"] for s in exp_skip))
else:
    good = len(ok) > 0 and not skipped and not errors and not mism
    verdict = "%d case runs in %d systems, %d checked ok, %d MISMATCH, %d errors, %d systems skipped%s" % (
        len(ok), len(names), len([c for c in ok if c.get("check") == "ok"]), len(mism), len(errors), len(skipped),
        (" (" + ", ".join(s["system"] for s in skipped) + ")") if skipped else "")
print("peers verdict: " + verdict)
sys.exit(0 if good else 1)
EOF
}

# ---- sanitizer -----------------------------------------------------------------------

SAN_EVAL_FILTER='eval/@(gaussian_pdf_f32|broadcast_column_row|zero_size_arrays|several_outputs_in_one_eval|scan_in_expressions|gather_take|bincount)'
# a sanitizer that cannot work here (gVisor): its own "=========" lines, or
# the driver failing with error 999 under it (the same tests ran without it)
SAN_UNSUPPORTED='^=========.*(Device not supported|Target application not supported|not supported on this (platform|device)|injection library)|[Ee]rror 999|CUDA_ERROR_UNKNOWN'

# "2x ERROR SUMMARY: 0 errors; 1x ERROR SUMMARY: 3 errors" of a log
error_summaries() {
    grep -a -o 'ERROR SUMMARY: [0-9]* errors*' "$1" | sort | uniq -c |
        awk '{ c = $1; $1 = ""; printf "%s%dx%s", sep, c, $0; sep = "; " } END { if (!NR) printf "no ERROR SUMMARY line" }'
}

step_sanitizer() {
    need_build
    local cs
    [ "$GFR_DRY" = 1 ] && skip_step "(dry run: no GPU, compute-sanitizer not run)"
    cs="$(find_sanitizer)" || skip_step "(compute-sanitizer absent: not on PATH, not under \$CUDA_HOME or /usr/local/cuda)"
    local lim=$((GFR_LIMIT - 8)) tool pids=() tools=(memcheck racecheck initcheck) seed
    # the differential's first shard: its kernels are in the disk cache already
    seed="$(cat "$GFR_SCRATCH/differential-seed" 2>/dev/null || echo $((${GFR_SEED:-$(now)} * 100 + 1)))"
    for tool in "${tools[@]}"; do
        (
            args=(--tool "$tool" --error-exitcode 1 --target-processes all --print-limit 20)
            [ "$tool" = memcheck ] && args+=(--leak-check full)
            r=0
            LF_TEST_BACKEND=cuda LF_TEST_REQUIRE_CUDA=1 limited $((lim / 2)) "$cs" "${args[@]}" \
                "$GFR_BUILD/tests/test_eval" --jobs=1 --filter="$SAN_EVAL_FILTER" || r=1
            LF_TEST_BACKEND=cuda LF_TEST_REQUIRE_CUDA=1 LF_TEST_NGRAPHS=20 LF_TEST_SEED=$seed \
                limited $((lim / 2)) "$cs" "${args[@]}" \
                "$GFR_BUILD/tests/test_fusion" --jobs=1 --filter='fusion/differential*' || r=1
            exit $r
        ) > "$GFR_SCRATCH/logs/sanitizer-$tool.log" 2>&1 &
        pids+=($!)
    done
    local i r log pass=0 fail=0 skip=0 verdicts=()
    {
        echo "compute-sanitizer: $cs ($("$cs" --version 2>&1 | tail -n 1))"
        echo "on: $GFR_BUILD_REL/tests/test_eval --filter='$SAN_EVAL_FILTER'"
        echo "and: LF_TEST_NGRAPHS=20 LF_TEST_SEED=$seed $GFR_BUILD_REL/tests/test_fusion --filter='fusion/differential*'"
        echo "(LF_TEST_BACKEND=cuda LF_TEST_REQUIRE_CUDA=1, --target-processes all, --error-exitcode 1)"
    } > "$GFR_OUT/sanitizer.txt"
    for i in "${!pids[@]}"; do
        wait "${pids[$i]}"
        r=$?
        tool="${tools[$i]}"
        log="$GFR_SCRATCH/logs/sanitizer-$tool.log"
        local v
        if grep -a -q -E "$SAN_UNSUPPORTED" "$log"; then
            v="SKIP $tool (not supported here: $(grep -a -E "$SAN_UNSUPPORTED" "$log" | head -n 1 | cut -c1-160))"
            skip=$((skip + 1))
        elif [ "$r" = 0 ]; then
            v="PASS $tool ($(error_summaries "$log"))"
            pass=$((pass + 1))
        else
            v="FAIL $tool (rc $r: $(error_summaries "$log"))"
            fail=$((fail + 1))
        fi
        verdicts+=("$v")
        note "$v"
        {
            echo
            echo "==== $v"
            grep -a -E '^========= ' "$log" | head -n 60
            grep -a -E '^\[FAIL\]|Assertion Failed' "$log" | head -n 10
        } >> "$GFR_OUT/sanitizer.txt"
    done
    detail "$pass passed, $fail failed, $skip not supported (see sanitizer.txt)"
    [ "$fail" = 0 ] || return 1
    [ "$pass" -gt 0 ] || exit 77
}

# ---- the run -------------------------------------------------------------------------

selected() { case "$SELECTED" in *" $1 "*) return 0 ;; esac; return 1; }

# One step, in its own process under `timeout`, after the budget check.
# Records "STATUS name seconds detail" in summary.txt.
run_step() {
    local name="$1" est="${EST[$1]}" lim="${LIM[$1]}" l t0 rc dt status det later=0 s after=0
    l=$(left)
    for s in "${STEPS[@]}"; do
        [ "$after" = 1 ] && later=$((later + ${EST[$s]}))
        [ "$s" = "$name" ] && after=1
    done
    if [ "$l" -lt "$est" ]; then
        record SKIP "$name" 0 "(budget: ${l}s left, needs ~${est}s)"
        return
    fi
    [ "$lim" -le $((l - 2)) ] || lim=$((l - 2))
    say "$name (estimate ${est}s, limit ${lim}s, ${l}s of the budget left)"
    t0=$(now)
    GFR_LIMIT=$lim GFR_LATER_EST=$later STEP=$name timeout -k 10 "$lim" bash "$SELF" --step "$name" \
        > "$GFR_SCRATCH/logs/$name.log" 2>&1
    rc=$?
    dt=$(($(now) - t0))
    det="$(cat "$GFR_SCRATCH/notes/$name.detail" 2>/dev/null)"
    case "$rc" in
    0) status=PASS ;;
    77) status=SKIP ;;
    124 | 137) status=FAIL det="(timed out after ${lim}s) $det" ;;
    *) status=FAIL det="${det:-(rc $rc: see logs/$name.log)}" ;;
    esac
    record "$status" "$name" "$dt" "$det"
}

record() {
    local line
    line="$(printf '%-4s %-13s %4ss  %s' "$1" "$2" "$3" "$4")"
    echo "$line" >> "$GFR_SCRATCH/steps.txt"
    say "$line"
    [ "$1" = FAIL ] && FAILED=1
    write_summary
}

# summary.txt: the step lines, then the key figures of each step.
write_summary() {
    {
        echo "lazyfuse gpu-first-run: $([ "$GFR_DRY" = 1 ] && echo "DRY RUN ($GFR_DRY_WHY)" || echo GPU run)$([ "$GFR_QUICK" = 1 ] && echo ', quick'), budget ${GFR_BUDGET}s, $(($(now) - GFR_T0))s so far, $(date -u +%FT%TZ)"
        cat "$GFR_SCRATCH/steps.txt" 2>/dev/null
        echo
        echo "---- key figures"
        local s
        for s in "${STEPS[@]}"; do
            [ -s "$GFR_SCRATCH/notes/$s.txt" ] || continue
            echo "[$s]"
            cat "$GFR_SCRATCH/notes/$s.txt"
        done
    } > "$GFR_OUT/summary.txt"
}

# probe.txt from the parts, logs.tar.gz, the summary on stdout.
finish() {
    trap - EXIT INT TERM
    [ -n "${PYPROBE_PID:-}" ] && wait "$PYPROBE_PID" 2>/dev/null
    [ -n "${GFR_SCRATCH:-}" ] && [ -d "$GFR_SCRATCH" ] || exit "${FAILED:-1}"
    {
        cat "$GFR_SCRATCH/probe-system.txt" 2>/dev/null
        echo "== lazyfuse (device step)"
        cat "$GFR_SCRATCH/device.txt" 2>/dev/null || echo "(not run)"
        echo "== python3 candidates"
        cat "$GFR_SCRATCH/pyprobe.txt" 2>/dev/null || echo "(not run)"
    } > "$GFR_OUT/probe.txt"
    write_summary
    local f
    for f in "$GFR_SCRATCH"/logs/*; do # keep each log's head and tail past 4 MiB
        [ -f "$f" ] && [ "$(stat -c %s "$f")" -gt 4194304 ] &&
            { head -c 2097152 "$f" && printf '\n[... cut ...]\n' && tail -c 2097152 "$f"; } > "$f.cut" && mv "$f.cut" "$f"
    done
    cp "$GFR_SCRATCH/pyprobe.jsonl" "$GFR_SCRATCH/logs/" 2>/dev/null
    tar -czf "$GFR_OUT/logs.tar.gz" -C "$GFR_SCRATCH" logs 2>/dev/null
    echo
    cat "$GFR_OUT/summary.txt"
    # the step lines once more, last: only the output's tail comes back
    echo
    echo "---- steps ($(($(now) - GFR_T0))s of ${GFR_BUDGET}s)"
    cat "$GFR_SCRATCH/steps.txt"
    echo "(files in $GFR_OUT: $(find "$GFR_OUT" -maxdepth 1 -type f -printf '%f ' | sort))"
    [ "${KEEP_SCRATCH:-0}" = 1 ] || rm -rf "$GFR_SCRATCH"
    exit $FAILED
}

main() {
    local dry=0 quick=0 budget="${BUDGET_S:-}" only=""
    while [ $# -gt 0 ]; do
        case "$1" in
        --dry-run) dry=1 ;;
        --quick) quick=1 ;;
        --budget) budget="${2:-}" && shift ;;
        --budget=*) budget="${1#--budget=}" ;;
        --steps) only="${2:-}" && shift ;;
        --steps=*) only="${1#--steps=}" ;;
        -h | --help) usage && exit 0 ;;
        *) echo "gpu-first-run: unknown argument '$1' (see --help)" >&2 && exit 2 ;;
        esac
        shift
    done
    export GFR_DRY_WHY="--dry-run"
    if [ "$dry" = 0 ] && ! command -v nvidia-smi > /dev/null; then
        dry=1
        GFR_DRY_WHY="no nvidia-smi"
    fi
    [ -n "$budget" ] || budget=$([ "$quick" = 1 ] && echo 240 || echo 450)
    case "$budget" in '' | *[!0-9]*) echo "gpu-first-run: --budget / BUDGET_S: seconds, got '$budget'" >&2 && exit 2 ;; esac
    export GFR_DRY=$dry GFR_QUICK=$quick GFR_BUDGET=$budget GFR_T0
    GFR_T0=$(now)
    export GFR_OUT="${OUT:-$ROOT/build-gpu-first-run}"
    mkdir -p "$GFR_OUT" || exit 2
    GFR_OUT="$(cd "$GFR_OUT" && pwd)"
    # --steps: the others are not run (a second command on the same lease
    # reruns a few; the files of the steps not run stay)
    local s
    SELECTED=" ${only//,/ } "
    [ -n "$only" ] || SELECTED=" ${STEPS[*]} "
    for s in ${only//,/ }; do
        case " ${STEPS[*]} " in *" $s "*) ;; *) echo "gpu-first-run: --steps: unknown step '$s' (${STEPS[*]})" >&2 && exit 2 ;; esac
    done
    rm -f "$GFR_OUT"/{summary.txt,probe.txt,logs.tar.gz}
    selected bench && rm -f "$GFR_OUT/bench-cuda.json"
    selected peers && rm -f "$GFR_OUT/peers-cuda.json"
    selected sanitizer && rm -f "$GFR_OUT/sanitizer.txt"
    export GFR_SCRATCH
    GFR_SCRATCH="$(mktemp -d /tmp/lf-gfr.XXXXXX)" || exit 2
    mkdir -p "$GFR_SCRATCH/logs" "$GFR_SCRATCH/notes"
    mkdir -m 700 "$GFR_SCRATCH/kernel-cache"
    export LF_CACHE_DIR="$GFR_SCRATCH/kernel-cache"
    export GFR_BUILD="${GFR_BUILD_DIR:-$ROOT/build-gpu}"
    case "$GFR_BUILD" in /*) ;; *) GFR_BUILD="$ROOT/$GFR_BUILD" ;; esac
    export GFR_BUILD_REL="${GFR_BUILD#"$ROOT"/}"
    if ! selected build && [ -f "$GFR_BUILD/build.ninja" ]; then touch "$GFR_SCRATCH/built"; fi
    export GFR_JOBS
    GFR_JOBS=$(nproc)
    export GFR_PY
    GFR_PY="$(command -v python3 || echo /usr/bin/python3)"
    if [ -f "$ROOT/.gpu-carry/env.sh" ]; then
        # shellcheck disable=SC1091 # made by scripts/gpu-carry.sh, not in git
        . "$ROOT/.gpu-carry/env.sh"
    fi
    FAILED=0
    trap finish EXIT
    trap 'say "interrupted"; exit 1' INT TERM
    if [ "$dry" = 1 ]; then dry_estimates; else gpu_estimates; fi
    say "gpu-first-run: $([ "$dry" = 1 ] && echo "dry run ($GFR_DRY_WHY)" || echo 'GPU run'), budget ${budget}s, out $GFR_OUT, scratch $GFR_SCRATCH"
    : > "$GFR_SCRATCH/steps.txt"
    write_summary
    # the python probe runs beside the probe and the build
    STEP=pyprobe timeout -k 5 90 bash "$SELF" --step pyprobe > "$GFR_SCRATCH/logs/pyprobe.log" 2>&1 &
    PYPROBE_PID=$!
    for s in "${STEPS[@]}"; do
        if ! selected "$s"; then
            record SKIP "$s" 0 "(not in --steps)"
            continue
        fi
        if [ -n "$PYPROBE_PID" ] && { [ "$s" = device ] || [ "$s" = peers ]; }; then
            wait "$PYPROBE_PID" 2>/dev/null
            PYPROBE_PID=
            grep '^short: ' "$GFR_SCRATCH/pyprobe.txt" 2>/dev/null | sed 's/^short: //' >> "$GFR_SCRATCH/notes/probe.txt"
        fi
        run_step "$s"
    done
}

# ---- entry ---------------------------------------------------------------------------

if [ "${1:-}" = --py-probe ]; then # python, gpu (0/1): one python's packages
    py_probe "$2" "$3"
    exit $?
fi
if [ "${1:-}" = --step ]; then
    STEP="$2"
    if [ "$GFR_DRY" = 1 ]; then dry_estimates; else gpu_estimates; fi
    case "$STEP" in
    probe) step_probe ;;
    pyprobe) step_pyprobe ;;
    build) step_build ;;
    device) step_device ;;
    cuda-tests) step_cuda_tests ;;
    differential) step_differential ;;
    bench) step_bench ;;
    peers) step_peers ;;
    sanitizer) step_sanitizer ;;
    *) echo "gpu-first-run: unknown step '$STEP'" >&2 && exit 2 ;;
    esac
    exit $?
fi
main "$@"
