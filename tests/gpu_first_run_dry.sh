#!/usr/bin/env bash
# tests/gpu_first_run_dry.sh: meson's 'gpu-first-run-dry' (suite nvrtc).
#
#   gpu_first_run_dry.sh SOURCE_ROOT BUILD_ROOT
#
# Runs `scripts/gpu-first-run.sh --dry-run --quick` (the fake driver, the host
# emulation of the CUDA kernels, NumPy as the peer) with OUT in a temporary
# folder and its build in BUILD_ROOT/gpu-first-run-build (a release tree of
# its own: minutes the first time, incremental after), then checks what a
# lease's run would bring back: exit status 0; summary.txt saying DRY RUN with
# one line per step, every step PASS but the sanitizer (SKIP); at most 8
# files, flat, with names the device tool returns; the files named in the
# script's header; a JSON line per bench case; the step logs in logs.tar.gz;
# the summary printed last on stdout. Also runs shellcheck on the script
# where it is installed.
set -uo pipefail

src="$1"
build="$2"
script="$src/scripts/gpu-first-run.sh"
out="$(mktemp -d /tmp/lf-gfr-dry.XXXXXX)" || exit 1
trap 'rm -rf "$out" "$out.stdout" "$out.stderr"' EXIT
fails=0
bad() {
    echo "gpu-first-run-dry: $*" >&2
    fails=$((fails + 1))
}

# scripts/quickstart.sh installs shellcheck; elsewhere it may be missing
if command -v shellcheck > /dev/null; then
    shellcheck "$script" || bad "shellcheck found problems in scripts/gpu-first-run.sh"
    (cd "$src" && shellcheck -x scripts/gpu-carry.sh) || bad "shellcheck found problems in scripts/gpu-carry.sh"
else
    echo "gpu-first-run-dry: shellcheck not installed, not run"
fi

start=$(date +%s)
OUT="$out" GFR_BUILD_DIR="$build/gpu-first-run-build" bash "$script" --dry-run --quick > "$out.stdout" 2> "$out.stderr"
rc=$?
echo "gpu-first-run-dry: the dry run took $(($(date +%s) - start)) s, exit status $rc"
[ "$rc" = 0 ] || bad "exit status $rc"

sum="$out/summary.txt"
if [ ! -s "$sum" ]; then
    bad "no summary.txt"
else
    head -n 1 "$sum" | grep -q 'DRY RUN' || bad "summary.txt's first line does not say DRY RUN"
    for s in probe build device cuda-tests differential bench peers; do
        grep -q "^PASS $s " "$sum" || bad "step $s did not PASS: $(grep " $s " "$sum" | head -n 1)"
    done
    grep -q '^SKIP sanitizer ' "$sum" || bad "the sanitizer is not SKIPped in a dry run"
    grep -q 'FAKE DRIVER' "$sum" || bad "the bench's figures are not marked as the fake driver's"
    grep -q 'LF_TEST_SEED=' "$sum" || bad "the differential's seeds are not in the summary"
    # stdout ends with the summary and the step lines again (only the
    # output's tail comes back)
    grep -q '^---- key figures' "$out.stdout" || bad "stdout has no summary"
    if ! tail -n 12 "$out.stdout" | grep -q '^PASS probe ' || ! tail -n 12 "$out.stdout" | grep -q '^SKIP sanitizer '; then
        bad "stdout does not end with the step lines"
    fi
fi
for f in summary.txt probe.txt bench-cuda.json peers-cuda.json logs.tar.gz; do
    [ -s "$out/$f" ] || bad "$f missing or empty"
done
n=$(find "$out" -mindepth 1 | wc -l)
[ "$n" -le 8 ] || bad "$n entries in OUT (at most 8 files come back)"
if find "$out" -mindepth 1 ! -type f | grep -q .; then bad "OUT holds something other than plain files"; fi
if find "$out" -mindepth 1 -printf '%f\n' | grep -q '[^A-Za-z0-9._-]'; then bad "a file name in OUT has other characters than [A-Za-z0-9._-]"; fi
for c in gaussian_pdf polar_distance hypot triad chain8 chain32 sum_of_squares softmax_rows layer_norm cumsum overhead; do
    grep -q "\"case\":\"$c\"" "$out/bench-cuda.json" 2>/dev/null || bad "bench-cuda.json has no line for $c"
done
grep -q '"kind": "case"' "$out/peers-cuda.json" 2>/dev/null || bad "peers-cuda.json has no case line"
logs="$(tar -tzf "$out/logs.tar.gz" 2>/dev/null)" || bad "logs.tar.gz is not a gzip'd tar"
for l in build cuda-tests differential-1 bench peers; do
    echo "$logs" | grep -q "logs/$l.log" || bad "logs.tar.gz has no logs/$l.log"
done

if [ "$fails" -gt 0 ]; then
    echo "---- summary.txt"
    cat "$sum" 2>/dev/null
    echo "---- stderr (tail)"
    tail -n 40 "$out.stderr" 2>/dev/null
fi
[ "$fails" = 0 ]
