#!/usr/bin/env bash
# scripts/kernel-dump.sh: records every kernel text the eval pipeline emits
# (LF_DEBUG=source) for the seed examples, the bench's seed cases and N
# random graphs, fused and unfused, in C with libmvec, plain C (no libmvec:
# LF_CPU_MARCH=x86-64-v2) and CUDA (the fake driver of tests/fake_libcuda.c
# with the real NVRTC), one file per configuration in OUTDIR. Run it on the
# code before a change and after, then `diff -r before after`: a refactor
# that must not change the emitted kernels leaves no difference.
#
#     scripts/kernel-dump.sh BUILD OUTDIR [NGRAPHS=300] [SEED=0x5eed]
#
# A private disk cache folder (OUTDIR/.cache, or $LF_DUMP_CACHE: the before
# run's, so that the after run finds its kernels compiled) makes a second
# run over the same kernels cheap; it is not part of the dump.
# LF_DUMP_FUSION="0" (or "1") records only the unfused (fused) plans.
set -euo pipefail
build=${1:?build folder}
out=${2:?output folder}
ngraphs=${3:-300}
seed=${4:-0x5eed}
dump="$build/tests/kernel_dump"
fake="$build/tests/fake_libcuda.so"
cache=${LF_DUMP_CACHE:-$out/.cache}
mkdir -p "$out" "$cache"
chmod 700 "$cache"
run() { # name backend fusion [env...]
    local name=$1 backend=$2 fusion=$3
    shift 3
    env LF_DEBUG=source LF_QUIET=1 LF_CACHE_DIR="$cache" "$@" \
        "$dump" "$backend" "$fusion" "$ngraphs" "$seed" > "$out/$name.log" 2> "$out/$name.src"
    echo "$name: $(grep -c '^/\* ---- lazyfuse' "$out/$name.src") kernels, $(wc -l < "$out/$name.log") failed evals"
}
for fusion in ${LF_DUMP_FUSION:-1 0}; do
    run "c-mvec-fusion$fusion" cpu $fusion
    run "c-scalar-fusion$fusion" cpu $fusion LF_CPU_MARCH=x86-64-v2
    if [ -f "$fake" ]; then
        run "cuda-fusion$fusion" cuda $fusion LF_CUDA_LIBRARY="$fake"
    fi
done
