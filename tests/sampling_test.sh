#!/usr/bin/env bash
# tests/sampling_test.sh: LF_TEST_SAMPLE (tests/testutil.c) samples a test
# binary's tests the way the valgrind pass of scripts/quickstart.sh uses it:
# about P% run and the rest skip, at least 3 always run, the sample follows
# the seed (fixed seed, same tests; another seed, others), and --filter or a
# value that is not a percentage runs everything.
#   bash tests/sampling_test.sh BUILD/tests/test_parse
set -uo pipefail
exe=$1
fail() { echo "sampling: $*" >&2; exit 1; }

# ran SEED PCT [ARGS...]: prints "K N" (tests run, tests in the binary) and
# the names of the tests that ran, from the TAP output
ran() {
    local seed=$1 pct=$2
    shift 2
    LF_TEST_SEED=$seed LF_TEST_SAMPLE=$pct "$exe" --tap --jobs=1 "$@" 2>&1
}
count_run() { grep -E '^ok ' <<<"$1" | grep -vc '# SKIP'; }
count_all() { grep -cE '^(not )?ok ' <<<"$1"; }
names_run() { grep -E '^ok ' <<<"$1" | grep -v '# SKIP' | sed 's/ - .*//;s/^ok [0-9]* //'; }

full=$(ran 1 100)
n=$(count_all "$full")
[ "$n" -ge 10 ] || fail "expected a binary of at least 10 tests, $exe has $n"
[ "$(count_run "$full")" -eq "$n" ] || fail "LF_TEST_SAMPLE=100 skipped tests"

a=$(ran 11 40)
k=$(count_run "$a")
[ "$(count_all "$a")" -eq "$n" ] || fail "sampled run lists $(count_all "$a") of $n tests"
[ "$k" -ge 3 ] && [ "$k" -lt "$n" ] || fail "LF_TEST_SAMPLE=40 ran $k of $n"
grep -q "LF_TEST_SAMPLE=40: $k of $n tests run" <<<"$a" || fail "the runner's note does not say $k of $n"
grep -q '^not ok' <<<"$a" && fail "a sampled run failed"

[ "$(names_run "$(ran 11 40)")" = "$(names_run "$a")" ] || fail "one seed sampled two different sets"
others=0
for seed in 12 13 14 15; do
    [ "$(names_run "$(ran $seed 40)")" != "$(names_run "$a")" ] && others=1
done
[ "$others" -eq 1 ] || fail "seeds 12..15 all sampled seed 11's tests"

[ "$(count_run "$(ran 11 0)")" -eq 3 ] || fail "LF_TEST_SAMPLE=0 does not keep exactly 3 tests"
[ "$(count_run "$(ran 11 40 --filter='*/*')")" -eq "$n" ] || fail "--filter was sampled"
[ "$(count_run "$(ran 11 abc)")" -eq "$n" ] || fail "a bad LF_TEST_SAMPLE did not run every test"
echo "sampling: LF_TEST_SAMPLE=40 ran $k of $n; seeds, 0, --filter and a bad value behave"
