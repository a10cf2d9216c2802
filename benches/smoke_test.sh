#!/bin/sh
# benches/smoke_test.sh BENCH SRCDIR [PYTHON]: the benchmark tool chain on a
# tiny range, fast enough for CI (meson test bench-smoke): lazyfuse-bench
# --sweep --json --save-outputs, and once more for issue 16's modes (the
# c_handfused references, the nt copy, layer_norm, the contractions at two
# --matmul-n sides), then (with a Python) the peer runner (peers that are not
# installed are skipped), the merged report and both SVG charts.
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

# issue 16's modes at a tiny size: the c_handfused references (where built),
# the nt copy on the stream_copy line, layer_norm, and the contraction cases
# at two --matmul-n sides
"$bench" --n 16384 --case gaussian_pdf,layer_norm,matmul_bias_relu,matmul_scaled,batched_matmul,matvec \
    --matmul-n 8,16 --reps 3 --threads 2 --json --save-outputs "$tmp/out2" > "$tmp/run2.jsonl" 2> "$tmp/run2.err" \
    || { cat "$tmp/run2.err" >&2; fail "lazyfuse-bench (issue 16 cases) failed"; }
grep '"case":"stream_copy"' "$tmp/run2.jsonl" | grep -q '"loop_gbps"' || fail "stream_copy has no loop_gbps"
if [ "$(uname -m)" = x86_64 ]; then
    grep '"case":"stream_copy"' "$tmp/run2.jsonl" | grep -q '"nt_gbps"' || fail "stream_copy has no nt_gbps"
    grep -q '"pct_of_nt_copy"' "$tmp/run2.jsonl" || fail "no pct_of_nt_copy on the case lines"
fi
if grep -q 'c_handfused: not built' "$tmp/run2.err"; then
    echo "bench-smoke: c_handfused not built here (no libmvec or -march=native); not checked"
else
    [ "$(grep -c '"mode":"c_handfused"' "$tmp/run2.jsonl")" -eq 2 ] || fail "expected 2 c_handfused lines"
fi
[ "$(grep -c '"mode":"fused"' "$tmp/run2.jsonl")" -eq 10 ] || fail "expected 10 fused lines (gaussian_pdf, layer_norm, 4 contractions x 2 sides)"
grep -q '"case":"batched_matmul".*"matmul_n":16' "$tmp/run2.jsonl" || fail "no batched_matmul line at side 16"
if grep -q '"check":"MISMATCH"' "$tmp/run2.jsonl"; then fail "a check of the issue 16 cases failed"; fi
[ "$(wc -c < "$tmp/out2/matvec.f32")" -eq 64 ] || fail "matvec.f32 is not the side-16 output"
"$bench" --matmul-n 8,x > /dev/null 2>&1 && fail "--matmul-n 8,x was accepted"

if [ -n "$py" ]; then
    "$py" "$src/peers/run_peers.py" --lazyfuse "$tmp/run.jsonl" --systems numpy,numexpr --reps 3 \
        --threads 2 --json "$tmp/peers.jsonl" || fail "run_peers.py failed"
    if grep -q '"check": "MISMATCH"' "$tmp/peers.jsonl"; then fail "a peer's result differs from lazyfuse's"; fi
    # NumPy is the reference peer: a Python without it skips every peer, and
    # then the checks above compare nothing
    grep '"kind": "system"' "$tmp/peers.jsonl" | grep '"system": "numpy"' | grep -q '"status": "ok"' \
        || fail "the numpy peer did not run with $py (is NumPy installed for it?)"
    [ "$(grep '"kind": "case"' "$tmp/peers.jsonl" | grep '"system": "numpy"' | grep -c '"check": "ok"')" -ge 3 ] \
        || fail "the numpy peer checked fewer than 3 cases against lazyfuse"
    "$py" "$src/peers/run_peers.py" --lazyfuse "$tmp/run2.jsonl" --systems numpy,numpy_blas --reps 3 \
        --threads 2 --json "$tmp/peers2.jsonl" || fail "run_peers.py (issue 16 cases) failed"
    if grep -q '"check": "MISMATCH"' "$tmp/peers2.jsonl"; then fail "a peer's result differs from lazyfuse's (issue 16 cases)"; fi
    # the sorts' five key distributions (issue 30): the peer rebuilds each input
    # bit for bit (common.sort_keys), so the sorted values match exactly and the
    # argsorts order the keys; --label makes the second-column names
    sorts=sort_f32,sort_normal,sort_sorted,sort_reversed,sort_few,argsort_f32,argsort_normal,argsort_sorted
    sorts=$sorts,argsort_reversed,argsort_few
    "$bench" --n 4099 --case "$sorts" --reps 3 --threads 2 --mode fused --json --save-outputs "$tmp/out3" \
        > "$tmp/run3.jsonl" 2> /dev/null || fail "lazyfuse-bench (sorts) failed"
    "$py" "$src/peers/run_peers.py" --lazyfuse "$tmp/run3.jsonl" --systems numpy --reps 3 --threads 2 \
        --label debian --json "$tmp/peers3.jsonl" || fail "run_peers.py (sorts) failed"
    [ "$(grep -c '"check": "ok"' "$tmp/peers3.jsonl")" -eq 10 ] || fail "the numpy peer matched fewer than 10 sorts"
    grep -q '"system": "numpy@debian"' "$tmp/peers3.jsonl" || fail "--label did not rename the system"
    cat "$tmp/run.jsonl" "$tmp/run2.jsonl" > "$tmp/all.jsonl"
    cat "$tmp/peers.jsonl" "$tmp/peers2.jsonl" > "$tmp/allpeers.jsonl"
    "$py" "$src/report.py" --lazyfuse "$tmp/all.jsonl" --peers "$tmp/allpeers.jsonl" --json "$tmp/results/cpu.json" \
        --charts "$tmp/charts" --results "$tmp/RESULTS.md" > "$tmp/report.txt" || fail "report.py failed"
    grep -q '^triad ' "$tmp/report.txt" || fail "no triad row in the merged table"
    grep -q '^layer_norm ' "$tmp/report.txt" || fail "no layer_norm row in the merged table"
    grep -q '^matvec ' "$tmp/report.txt" || fail "no matvec row in the merged table"
    grep -q 'side | fused ms' "$tmp/RESULTS.md" || fail "RESULTS.md has no table of the matmul sides"
    grep -q '<polyline' "$tmp/charts/sweep-cpu.svg" || fail "sweep chart has no lines"
    grep -q '<svg' "$tmp/charts/peers-cpu.svg" || fail "no peers chart"
    grep -q 'No CUDA sweep' "$tmp/RESULTS.md" || fail "RESULTS.md has no GPU statement"
    cat "$tmp/report.txt"
fi
echo "bench-smoke: ok"
