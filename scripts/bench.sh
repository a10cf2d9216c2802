#!/usr/bin/env bash
# scripts/bench.sh: the fusion benchmark as one command.
#
#   bash scripts/bench.sh            the full CPU run (6 to 8 minutes on 2 cores, more
#                                    when the machine is busy):
#     1. installs what is missing (apt-get: meson, ninja-build, pkg-config, gcc,
#        libcriterion-dev, libdlpack-dev, and the peers python3-numpy, python3-numexpr,
#        python3-numba, libopenblas0-pthread; through sudo when not root),
#     2. builds lazyfuse-bench in a release build (build-rel/, -Dbuildtype=release),
#     3. runs lazyfuse-bench fused and unfused over n = 2^10 .. 2^26 (--sweep),
#        saving each case's output at the largest n,
#     4. runs every installed peer (benches/peers/) on the same cases, sizes and
#        inputs, checking each result against lazyfuse's,
#     5. prints the merged table (rows: cases; columns: systems; each cell the
#        median time and its ratio to lazyfuse fused), writes the same data as
#        JSON (benches/results/cpu.json), draws the charts (benches/charts/) and
#        regenerates benches/RESULTS.md.
#
# Options:
#   --quick               a smoke run: n = 2^10 .. 2^20 in steps of 2^2, 3 reps;
#                         writes under BUILD/bench-quick/ and leaves benches/ alone
#   --sweep LO:HI[:STEP]  the sizes, as exponents of 2 (default 10:26:1); the
#                         merged table and the peers use the largest
#   --cases LIST          comma list of cases (default: all; see lazyfuse-bench --list)
#   --matmul-n M[,M..]    side(s) of the contraction cases (matmul_zip_reduce,
#                         matmul_bias_relu, matmul_scaled, batched_matmul, matvec;
#                         default 256); a list runs them at each side, the peers at
#                         the largest. Past 1 GiB of broadcast product (side 1024)
#                         lazyfuse's unfused mode and NumPy's literal zip-reduce are
#                         left out; a fused eval there may take seconds (3 reps)
#   --samples S           rows of topk_rows and samples of spca (default 64000, the
#                         seed's; --quick: 4000). Both run once, after the sweep; spca's
#                         NumPy peer runs the seed's Python loop once (seconds)
#   --reps R              timed repetitions per case (default: ~0.5 s worth, 5..200)
#   --threads T           threads of lazyfuse and of the peers (default: all CPUs)
#   --backend cpu|cuda    cuda: lazyfuse's CUDA backend and the GPU peers (CuPy,
#                         JAX, PyTorch, Numba CUDA: install them yourself, with pip);
#                         writes benches/results/cuda.json and charts *-cuda.svg
#   --systems LIST        peers to run (default: the backend's; see run_peers.py --help)
#   --no-peers            lazyfuse only
#   --debian-peers LIST   the peers also run with Debian's packages (/usr/bin/python3), each
#                         as a column of its own named SYSTEM@debian (default
#                         numpy,numexpr,numba_njit; none: leave them out)
#   --no-install          install nothing; fail or skip what is missing
#   --build-dir DIR       release build folder (default build-rel)
#   --out DIR             where JSON, charts and RESULTS.md go (default benches/:
#                         DIR/results/, DIR/charts/, DIR/RESULTS.md)
#   --no-results          do not regenerate RESULTS.md
#   --python PY           also run benches/python_bench.py with the interpreter PY
#                         (one with NumPy, numexpr and cffi: quickstart's .venv/bin/python)
#                         against this build's liblazyfuse.so and lazyfuse-bench, at the
#                         sweep's largest n: the per-call overhead rows and the Python
#                         rows of the seed cases (lazyfuse.evaluate, lazy arrays, NumPy,
#                         numexpr, over lf_eval of the same graph in the same process,
#                         and lazyfuse-bench's figure from C); writes
#                         OUT/results/python.jsonl, prints its table, and the report puts
#                         the seed-case rows into the merged table ("python: CASE")
#
# The peers run at their current releases: a virtual environment, .peers-venv/
# (PEER_VENV to put it elsewhere), made with the versions pinned in
# benches/peers/requirements-current.txt from the package registry (NumPy 2,
# numexpr, Numba, SciPy, JAX with its CPU backend, PyTorch for torch.compile on
# the CPU), reinstalled when that file changes. Each system's version goes into
# the results and the column headings. Debian's older packages run as the
# second columns of --debian-peers.
#
# Environment: PEER_PYTHON, a Python to run the peers with instead of the
# virtual environment (nothing is installed for it); PEER_VENV (see above).
#
# The machine this runs on is usually shared: compare ratios inside one run,
# not absolute times across runs (see /work/shared/design.md, "Measuring
# performance"). Exit status: 0, or non-zero when a step failed.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

say() { printf '==> %s\n' "$*" >&2; }
die() { printf 'bench: %s\n' "$*" >&2; exit 1; }
usage() {
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2
    exit 2
}

QUICK=0 SWEEP="" CASES="" MATMUL_N="" SAMPLES="" REPS="" THREADS="" BACKEND=cpu SYSTEMS="" PEERS=1 INSTALL=1
DEBIAN_PEERS=numpy,numexpr,numba_njit
BUILD=build-rel OUT="" RESULTS=1 PYBENCH=""
CMDLINE="bash scripts/bench.sh${*:+ $*}"
while [ $# -gt 0 ]; do
    case "$1" in
    --quick) QUICK=1 ;;
    --sweep) SWEEP="${2:?--sweep needs LO:HI[:STEP]}"; shift ;;
    --cases) CASES="${2:?--cases needs a list}"; shift ;;
    --reps) REPS="${2:?--reps needs a number}"; shift ;;
    --samples) SAMPLES="${2:?--samples needs a number}"; shift ;;
    --matmul-n) MATMUL_N="${2:?--matmul-n needs a side or a comma list}"; shift ;;
    --threads) THREADS="${2:?--threads needs a number}"; shift ;;
    --backend) BACKEND="${2:?--backend needs cpu or cuda}"; shift ;;
    --systems) SYSTEMS="${2:?--systems needs a list}"; shift ;;
    --no-peers) PEERS=0 ;;
    --debian-peers) DEBIAN_PEERS="${2:?--debian-peers needs a list or none}"; shift ;;
    --no-install) INSTALL=0 ;;
    --build-dir) BUILD="${2:?--build-dir needs a folder}"; shift ;;
    --out) OUT="${2:?--out needs a folder}"; shift ;;
    --no-results) RESULTS=0 ;;
    --python) PYBENCH="${2:?--python needs an interpreter}"; shift ;;
    -h|--help) usage ;;
    *) echo "bench: unknown option '$1'" >&2; usage ;;
    esac
    shift
done
case "$BACKEND" in cpu|cuda) ;; *) die "--backend: expected cpu or cuda, got '$BACKEND'" ;; esac
if [ "$QUICK" -eq 1 ]; then
    : "${SWEEP:=10:20:2}"
    : "${REPS:=3}"
    : "${SAMPLES:=4000}"
    : "${OUT:=$BUILD/bench-quick}"
fi
: "${SWEEP:=10:26:1}"
: "${OUT:=benches}"

# ---- install ---------------------------------------------------------------------

PACKAGES=(meson ninja-build pkg-config gcc libcriterion-dev libdlpack-dev)
# libopenblas0-pthread: NumPy's A @ B (numpy_blas) on an optimized BLAS, as pip's NumPy
# wheels have it, rather than Debian's default reference BLAS
[ "$PEERS" -eq 1 ] && [ "$BACKEND" = cpu ] && PACKAGES+=(python3-venv python3-numpy python3-numexpr python3-numba
                                                        libopenblas0-pthread)

# shellcheck source=scripts/apt.sh
. "$ROOT/scripts/apt.sh"

install_deps() {
    if ! have_apt; then
        say "no apt-get here: install meson, ninja, a C compiler, Criterion and (for the peers)"
        say "NumPy, numexpr and Numba yourself; missing peers are skipped"
        return 0
    fi
    apt_install "${PACKAGES[@]}"
}

[ "$INSTALL" -eq 1 ] && install_deps

SYS_PY=""
if [ -x /usr/bin/python3 ]; then
    SYS_PY=/usr/bin/python3
else
    SYS_PY="$(command -v python3 || true)"
fi
[ -n "$SYS_PY" ] || die "no python3: the peers, the merged table and the charts need one"

# peer_venv: makes (or reuses) PEER_VENV with the pinned current releases; the
# requirements file is copied into it, so a changed pin reinstalls
PEER_VENV="${PEER_VENV:-$ROOT/.peers-venv}"
PEER_REQ="$ROOT/benches/peers/requirements-current.txt"
peer_venv() {
    if [ -x "$PEER_VENV/bin/python" ] && cmp -s "$PEER_REQ" "$PEER_VENV/lazyfuse-requirements.txt"; then
        return 0
    fi
    [ "$INSTALL" -eq 1 ] || return 1
    say "making the peers' virtual environment $PEER_VENV (current releases: $PEER_REQ)"
    [ -x "$PEER_VENV/bin/python" ] || "$SYS_PY" -m venv "$PEER_VENV" || return 1
    "$PEER_VENV/bin/python" -m pip install -q --disable-pip-version-check -r "$PEER_REQ" || return 1
    cp "$PEER_REQ" "$PEER_VENV/lazyfuse-requirements.txt"
}

if [ -n "${PEER_PYTHON:-}" ]; then
    PY="$PEER_PYTHON"
elif [ "$PEERS" -eq 1 ] && [ "$BACKEND" = cpu ] && peer_venv; then
    PY="$PEER_VENV/bin/python"
else
    [ "$PEERS" -eq 1 ] && [ "$BACKEND" = cpu ] && say "no peers' virtual environment: the peers run with $SYS_PY"
    PY="$SYS_PY"
fi

# ---- build -------------------------------------------------------------------------

say "release build in $BUILD"
if [ -f "$BUILD/meson-private/coredata.dat" ]; then
    meson configure "$BUILD" -Dbuildtype=release >/dev/null
else
    meson setup "$BUILD" -Dbuildtype=release
fi
ninja -C "$BUILD" benches/lazyfuse-bench
BENCH="$BUILD/benches/lazyfuse-bench"
if [ -n "$PYBENCH" ]; then
    # the shared library the Python package loads ($LAZYFUSE_LIBRARY)
    SO_TARGET="$(ninja -C "$BUILD" -t targets all | grep -o '^liblazyfuse\.so\.[0-9.]*[0-9]:' | head -1 | tr -d :)"
    [ -n "$SO_TARGET" ] || die "--python: no liblazyfuse.so target in $BUILD"
    ninja -C "$BUILD" "$SO_TARGET"
fi

# ---- run -----------------------------------------------------------------------------

mkdir -p "$OUT/results" "$OUT/charts"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/lazyfuse-bench-run-XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
STATUS=0
STARTED="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
LOAD_START="$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || true)"
CODE="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
# A run from a tree with uncommitted changes says so, and names the changed
# files (report.py puts them in RESULTS.md), so that the figures can be
# traced; the changes themselves are not recorded.
DIRTY="$(git status --porcelain --untracked-files=no 2>/dev/null | cut -c4- | tr '\n' ' ')"
if [ -n "$DIRTY" ]; then
    CODE="$CODE (with uncommitted changes)"
fi

args=(--sweep "$SWEEP" --backend "$BACKEND" --json --save-outputs "$WORK/outputs")
[ -n "$CASES" ] && args+=(--case "$CASES")
[ -n "$SAMPLES" ] && args+=(--samples "$SAMPLES")
[ -n "$MATMUL_N" ] && args+=(--matmul-n "$MATMUL_N")
[ -n "$REPS" ] && args+=(--reps "$REPS")
[ -n "$THREADS" ] && args+=(--threads "$THREADS")
say "lazyfuse-bench ${args[*]}"
"$BENCH" "${args[@]}" > "$WORK/lazyfuse.jsonl" || { STATUS=1; say "lazyfuse-bench reported a failure (see above)"; }
grep -q '"mode":"fused"\|"mode":"unfused"' "$WORK/lazyfuse.jsonl" || die "lazyfuse-bench measured no case; nothing to report"

peer_args=(--lazyfuse "$WORK/lazyfuse.jsonl" --json "$WORK/peers.jsonl")
if [ "$PEERS" -eq 1 ]; then
    peer_args+=(--systems "${SYSTEMS:-$BACKEND}")
else
    peer_args+=(--systems none)
fi
[ -n "$REPS" ] && peer_args+=(--reps "$REPS")
[ -n "$THREADS" ] && peer_args+=(--threads "$THREADS")
say "peers with $PY: run_peers.py ${peer_args[*]}"
"$PY" benches/peers/run_peers.py "${peer_args[@]}" || { STATUS=1; say "a peer failed (see above)"; }
# Debian's packages as second columns (SYSTEM@debian), when the peers ran elsewhere
if [ "$PEERS" -eq 1 ] && [ "$BACKEND" = cpu ] && [ "$DEBIAN_PEERS" != none ] && [ "$PY" != "$SYS_PY" ] \
   && "$SYS_PY" -c 'import numpy' 2>/dev/null; then
    deb_args=(--lazyfuse "$WORK/lazyfuse.jsonl" --json "$WORK/peers-debian.jsonl" --label debian
              --systems "$DEBIAN_PEERS")
    [ -n "$REPS" ] && deb_args+=(--reps "$REPS")
    [ -n "$THREADS" ] && deb_args+=(--threads "$THREADS")
    say "Debian's peers with $SYS_PY: run_peers.py ${deb_args[*]}"
    "$SYS_PY" benches/peers/run_peers.py "${deb_args[@]}" || { STATUS=1; say "a Debian peer failed (see above)"; }
    cat "$WORK/peers-debian.jsonl" >> "$WORK/peers.jsonl"
fi

# the Python package's rows, before the report, which puts them in the merged table
if [ -n "$PYBENCH" ]; then
    top="${SWEEP#*:}"; top="${top%%:*}"
    py_args=(--sweep "$top" --bench "$BENCH" --json "$OUT/results/python.jsonl")
    [ -n "$THREADS" ] && py_args+=(--threads "$THREADS")
    rm -f "$OUT/results/python.jsonl"  # no rows of an earlier run in this report
    say "Python package: python_bench.py ${py_args[*]}"
    case "$BUILD" in /*) LIBSO="$BUILD/liblazyfuse.so" ;; *) LIBSO="$ROOT/$BUILD/liblazyfuse.so" ;; esac
    PYTHONPATH="$ROOT/python${PYTHONPATH:+:$PYTHONPATH}" LAZYFUSE_LIBRARY="$LIBSO" \
        "$PYBENCH" benches/python_bench.py "${py_args[@]}" || { STATUS=1; say "python_bench.py failed"; }
fi

report_args=(--backend "$BACKEND" --lazyfuse "$WORK/lazyfuse.jsonl" --peers "$WORK/peers.jsonl"
             --command "$CMDLINE" --started "$STARTED" --load-start "$LOAD_START" --code "$CODE"
             --code-dirty "$DIRTY"
             --json "$OUT/results/$BACKEND.json"
             --charts "$OUT/charts")
if [ "$RESULTS" -eq 1 ] && [ "$QUICK" -eq 0 ]; then
    report_args+=(--results "$OUT/RESULTS.md")
fi
[ -n "$PYBENCH" ] && [ -s "$OUT/results/python.jsonl" ] && report_args+=(--python "$OUT/results/python.jsonl")
"$SYS_PY" benches/report.py "${report_args[@]}" || { STATUS=1; say "the report failed"; }

exit "$STATUS"
