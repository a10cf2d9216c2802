#!/bin/bash
# scripts/cold-start.sh: the cold-start table of benches/measured/41-cold-start.md.
# Runs lazyfuse-bench on the seed cases, each case and mode with a fresh empty
# kernel cache, RUNS times for each of --mode fused, unfused and both, and
# prints a Markdown table per binary of the median first_s (ms) per case and
# mode, with the kernels per program and, where the binary reports them, the
# unfused program's kernels compiled and compiler runs. Several binaries (an
# old build beside the new one) are run in turn within each run, so that they
# share the machine's load. Usage: scripts/cold-start.sh [RUNS [BENCH...]]
# (default: 3 runs of build-rel/benches/lazyfuse-bench).
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
shift || true
benches=("$@")
[ ${#benches[@]} -gt 0 ] || benches=(build-rel/benches/lazyfuse-bench)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cases=gaussian_pdf,polar_distance,hypot,triad,chain8,sum_of_squares,softmax_rows,matmul_zip_reduce,chain32
for r in $(seq "$runs"); do
    for i in "${!benches[@]}"; do
        for m in fused unfused both; do
            echo "run $r, ${benches[$i]}, --mode $m: $(uptime)" >&2
            "${benches[$i]}" --n 65536 --reps 5 --mode "$m" --json --threads 2 --matmul-n 512 \
                --case "$cases" >"$out/$i-$m-$r.json" 2>/dev/null
        done
    done
done
for i in "${!benches[@]}"; do
    echo
    echo "${benches[$i]}:"
    echo
    python3 - "$out" "$i" <<'PY'
import collections, glob, json, statistics, sys
first = collections.defaultdict(list)
kernels, compiled, order = {}, {}, []
for path in sorted(glob.glob(f"{sys.argv[1]}/{sys.argv[2]}-*.json")):
    run_mode = path.rsplit("/", 1)[1].split("-")[1]
    for line in open(path):
        o = json.loads(line)
        if "first_s" not in o:
            continue
        first[(o["case"], run_mode, o["mode"])].append(o["first_s"])
        kernels[(o["case"], o["mode"])] = o["kernels"]
        if "first_compiler_runs" in o:
            compiled[(o["case"], o["mode"])] = f"{o['first_compiled']} in {o['first_compiler_runs']}"
        if o["case"] not in order:
            order.append(o["case"])
def med(c, m, mm):
    v = first.get((c, m, mm))
    return "%.1f" % (1e3 * statistics.median(v)) if v else "-"
print("| case | kernels fused / unfused | unfused: compiled in runs | fused | unfused | both: fused | both: unfused |")
print("|---|---|---|---|---|---|---|")
for c in order:
    print(f"| {c} | {kernels.get((c, 'fused'), '-')} / {kernels.get((c, 'unfused'), '-')} "
          f"| {compiled.get((c, 'unfused'), '-')} | {med(c, 'fused', 'fused')} "
          f"| {med(c, 'unfused', 'unfused')} | {med(c, 'both', 'fused')} | {med(c, 'both', 'unfused')} |")
PY
done
