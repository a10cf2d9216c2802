#!/bin/sh
# benches/smoke_test.sh BENCH SRCDIR [PYTHON]: the benchmark tool chain on a
# tiny range, fast enough for CI (meson test bench-smoke): lazyfuse-bench
# --sweep --json --save-outputs, then (with a Python) the peer runner (peers
# that are not installed are skipped), the merged report and both SVG charts.
# Checks that each step ran and wrote what it should; measures nothing.
# Skipped (77) under valgrind: it would trace Python and the kernel compiler.
set -eu
case "${LD_PRELOAD:-}" in *vgpreload*) echo "bench-smoke: skipped under valgrind"; exit 77 ;; esac
bench=$1 src=$2 py=${3:-}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/lazyfuse-bench-smoke-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "bench-smoke: $*" >&2; exit 1; }

"$bench" --sweep 12:14:2 --case triad,sum_of_squares,softmax_rows,overhead --reps 3 --threads 2 \
    --json --save-outputs "$tmp/out" > "$tmp/run.jsonl" || fail "lazyfuse-bench failed"
[ "$(grep -c '"case":"stream_copy"' "$tmp/run.jsonl")" -eq 2 ] || fail "expected stream_copy at 2 sizes"
[ "$(grep -c '"mode":"fused"' "$tmp/run.jsonl")" -eq 6 ] || fail "expected 6 fused lines (3 cases x 2 sizes)"
grep -q '"case":"overhead"' "$tmp/run.jsonl" || fail "no overhead line"
if grep -q '"check":"MISMATCH"' "$tmp/run.jsonl"; then fail "a fused/unfused check failed"; fi
for c in triad sum_of_squares softmax_rows; do
    [ -s "$tmp/out/$c.f32" ] || fail "--save-outputs wrote no $c.f32"
done
[ "$(wc -c < "$tmp/out/triad.f32")" -eq 65536 ] || fail "triad.f32 is not 2^14 floats"
"$bench" --sweep 9:8 > /dev/null 2>&1 && fail "--sweep 9:8 was accepted"

if [ -n "$py" ]; then
    "$py" "$src/peers/run_peers.py" --lazyfuse "$tmp/run.jsonl" --systems numpy,numexpr --reps 3 \
        --threads 2 --json "$tmp/peers.jsonl" || fail "run_peers.py failed"
    if grep -q '"check": "MISMATCH"' "$tmp/peers.jsonl"; then fail "a peer's result differs from lazyfuse's"; fi
    "$py" "$src/report.py" --lazyfuse "$tmp/run.jsonl" --peers "$tmp/peers.jsonl" --json "$tmp/results/cpu.json" \
        --charts "$tmp/charts" --results "$tmp/RESULTS.md" > "$tmp/report.txt" || fail "report.py failed"
    grep -q '^triad ' "$tmp/report.txt" || fail "no triad row in the merged table"
    grep -q '<polyline' "$tmp/charts/sweep-cpu.svg" || fail "sweep chart has no lines"
    grep -q '<svg' "$tmp/charts/peers-cpu.svg" || fail "no peers chart"
    grep -q 'No GPU figures were measured' "$tmp/RESULTS.md" || fail "RESULTS.md has no GPU statement"
    cat "$tmp/report.txt"
fi
echo "bench-smoke: ok"
