#!/usr/bin/env bash
# scripts/gpu-check.sh: the checks that need an NVIDIA GPU, in one run.
#
# For a short device lease (15 minutes, one command) use
# scripts/gpu-first-run.sh instead: it does the same kinds of checks within a
# time budget (7.5 min by default; each step has a time limit and is skipped
# when the budget left cannot hold it) and leaves at most 8 files. This
# script has no budget: all suites, 2000 differential graphs and two builds
# take far longer than such a lease; use it on a machine you keep.
#
#   bash scripts/gpu-check.sh            run everything below
#   bash scripts/gpu-check.sh STEP...    only these steps: info build test fusion
#                                        memcheck racecheck bench
#
# Steps:
#   info       nvidia-smi, the driver and NVRTC lazyfuse sees (lf_ctx_device_name)
#   build      build-gpu/ (debugoptimized, -Dcuda=enabled) and build-rel/ (release)
#   test       meson test in build-gpu/: every suite, the '<suite>-cuda' ones run on the
#              GPU; LF_TEST_REQUIRE_CUDA=1 turns a CUDA test that would skip for want of
#              a device into a failure
#   fusion     the fusion suite's random differential graphs with LF_TEST_BACKEND=cuda
#              (LF_TEST_NGRAPHS graphs, default 2000)
#   memcheck   compute-sanitizer --tool memcheck on the eval, reduce and views suites on
#              CUDA and on a fusion differential run (LF_TEST_NGRAPHS=200)
#   racecheck  compute-sanitizer --tool racecheck on the same differential run
#   bench      build-rel/benches/lazyfuse-bench --backend cuda --n 67108864 --json, and
#              the CPU backend at the same n for the ratio
#
# Output: everything goes to $OUT (default build-gpu-check/): one log per step,
# bench-cuda.json, bench-cpu.json, device.txt, and summary.txt with one line per
# step ("PASS step", "FAIL step (see step.log)", "SKIP step (why)"). The script exits
# non-zero when a step failed. Kernel caches go to $OUT/kernel-cache.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
OUT="${OUT:-$ROOT/build-gpu-check}"
mkdir -p "$OUT"
export LF_CACHE_DIR="$OUT/kernel-cache"
NGRAPHS="${LF_TEST_NGRAPHS:-2000}"
STATUS=0
: > "$OUT/summary.txt"

say() { printf '==> %s\n' "$*" >&2; }
record() { echo "$*" | tee -a "$OUT/summary.txt" >&2; }

# Runs step NAME's command, logging to $OUT/NAME.log; records PASS or FAIL.
run_step() {
    local name="$1"
    shift
    say "$name: $*"
    if "$@" > "$OUT/$name.log" 2>&1; then
        record "PASS $name"
    else
        record "FAIL $name (see $OUT/$name.log)"
        STATUS=1
    fi
}

find_sanitizer() {
    local c
    for c in "$(command -v compute-sanitizer 2>/dev/null)" \
             "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer" \
             "${CUDA_HOME:-/usr/local/cuda}/compute-sanitizer/compute-sanitizer" \
             /usr/local/cuda/compute-sanitizer/compute-sanitizer; do
        if [ -n "$c" ] && [ -x "$c" ]; then
            echo "$c"
            return 0
        fi
    done
    return 1
}

step_info() {
    { nvidia-smi || echo "nvidia-smi: not available"; } > "$OUT/nvidia-smi.txt" 2>&1
    cat > "$OUT/device.c" <<'EOF'
#include "lazyfuse.h"
#include <stdio.h>
int main(void) {
    lf_ctx_options o;
    lf_ctx_options_init(&o);
    o.backend = LF_BACKEND_CUDA;
    lf_ctx *ctx = lf_ctx_new(&o);
    if (!ctx) {
        printf("no CUDA context: %s\n", lf_errmsg(NULL));
        return 1;
    }
    char name[512];
    lf_ctx_device_name(ctx, name, sizeof name);
    printf("%s\n", name);
    lf_ctx_destroy(ctx);
    return 0;
}
EOF
    cc -std=c11 -I include "$OUT/device.c" build-gpu/liblazyfuse.a -lm -ldl -lpthread -o "$OUT/device" &&
        "$OUT/device" | tee "$OUT/device.txt"
}

step_build() {
    { [ -d build-gpu ] && meson setup --reconfigure build-gpu -Dcuda=enabled ||
        meson setup build-gpu -Dcuda=enabled; } && ninja -C build-gpu &&
    { [ -d build-rel ] && meson setup --reconfigure build-rel --buildtype=release -Dcuda=enabled ||
        meson setup build-rel --buildtype=release -Dcuda=enabled; } && ninja -C build-rel
}

step_test() {
    LF_TEST_REQUIRE_CUDA=1 meson test -C build-gpu --no-rebuild --print-errorlogs --num-processes 4
}

step_fusion() {
    LF_TEST_REQUIRE_CUDA=1 LF_TEST_BACKEND=cuda LF_TEST_NGRAPHS="$NGRAPHS" \
        build-gpu/tests/test_fusion --jobs=1 --filter='fusion/differential*'
}

# compute-sanitizer follows Criterion's test processes (--target-processes all).
sanitize() {
    local tool="$1" cs
    cs="$(find_sanitizer)" || return 2
    local args=(--tool "$tool" --error-exitcode 1 --target-processes all --print-limit 20)
    local ok=0
    if [ "$tool" = memcheck ]; then
        args+=(--leak-check full)
        for s in eval reduce views; do
            LF_TEST_REQUIRE_CUDA=1 LF_TEST_BACKEND=cuda "$cs" "${args[@]}" \
                "build-gpu/tests/test_${s}" --jobs=1 || ok=1
        done
    fi
    LF_TEST_REQUIRE_CUDA=1 LF_TEST_BACKEND=cuda LF_TEST_NGRAPHS=200 "$cs" "${args[@]}" \
        build-gpu/tests/test_fusion --jobs=1 --filter='fusion/differential*' || ok=1
    return $ok
}

step_sanitizer() {
    local tool="$1"
    if ! find_sanitizer > /dev/null; then
        record "SKIP $tool (compute-sanitizer not found in PATH or under \$CUDA_HOME)"
        return
    fi
    run_step "$tool" sanitize "$tool"
}

step_bench() {
    local bench=build-rel/benches/lazyfuse-bench
    "$bench" --backend cuda --n 67108864 --json > "$OUT/bench-cuda.json" &&
        "$bench" --backend cpu --n 67108864 --json > "$OUT/bench-cpu.json"
}

steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(build info test fusion memcheck racecheck bench)
for s in "${steps[@]}"; do
    case "$s" in
    build) run_step build step_build ;;
    info) run_step info step_info ;;
    test) run_step test step_test ;;
    fusion) run_step fusion step_fusion ;;
    memcheck) step_sanitizer memcheck ;;
    racecheck) step_sanitizer racecheck ;;
    bench) run_step bench step_bench ;;
    *) echo "gpu-check: unknown step '$s'" >&2; exit 2 ;;
    esac
done
say "summary ($OUT/summary.txt):"
cat "$OUT/summary.txt" >&2
exit "$STATUS"
