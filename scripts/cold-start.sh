#!/bin/bash
# scripts/cold-start.sh: the cold-start table of benches/measured/41-cold-start.md.
# Runs lazyfuse-bench (build-rel) on the seed cases, each case and mode with a
# fresh empty kernel cache, RUNS times for each of --mode fused, unfused and
# both, and prints a Markdown table of the median first_s (ms) per case and
# mode, with the kernels per program. Usage: scripts/cold-start.sh [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cases=gaussian_pdf,polar_distance,hypot,triad,chain8,sum_of_squares,softmax_rows,matmul_zip_reduce,chain32
for r in $(seq "$runs"); do
    for m in fused unfused both; do
        echo "run $r, --mode $m: $(uptime)" >&2
        build-rel/benches/lazyfuse-bench --n 65536 --reps 5 --mode "$m" --json --threads 2 --matmul-n 512 \
            --case "$cases" >"$out/$m-$r.json" 2>/dev/null
    done
done
python3 - "$out" <<'PY'
import collections, glob, json, statistics, sys
first = collections.defaultdict(list)
kernels, order = {}, []
for path in sorted(glob.glob(sys.argv[1] + "/*.json")):
    run_mode = path.rsplit("/", 1)[1].split("-")[0]
    for line in open(path):
        o = json.loads(line)
        if "first_s" not in o:
            continue
        first[(o["case"], run_mode, o["mode"])].append(o["first_s"])
        kernels[(o["case"], o["mode"])] = o["kernels"]
        if o["case"] not in order:
            order.append(o["case"])
def med(c, m, mm):
    v = first.get((c, m, mm))
    return "%.1f" % (1e3 * statistics.median(v)) if v else "-"
print("| case | kernels fused / unfused | fused | unfused | both: fused | both: unfused |")
print("|---|---|---|---|---|---|")
for c in order:
    print(f"| {c} | {kernels.get((c, 'fused'), '-')} / {kernels.get((c, 'unfused'), '-')} | {med(c, 'fused', 'fused')} "
          f"| {med(c, 'unfused', 'unfused')} | {med(c, 'both', 'fused')} | {med(c, 'both', 'unfused')} |")
PY
