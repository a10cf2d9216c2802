#!/usr/bin/env bash
# scripts/quickstart.sh: the README's two quick-start commands.
#
#   bash scripts/quickstart.sh demo   install what is missing, build, run lazyfuse-demo,
#                                     then pip install the Python package into .venv/
#                                     and run python/examples/gaussian.py
#   bash scripts/quickstart.sh test   install what is missing, build, run the whole suite:
#                                     1. meson test in build/ (normal build), then the
#                                        Python package's pytest suite (python/tests)
#                                        and numexpr's own test suite against it
#                                        (python/numexpr_suite/run.sh), on the
#                                        package pip installed into .venv/
#                                     2. meson test in build-asan/ (AddressSanitizer +
#                                        UndefinedBehaviorSanitizer, leaks fatal)
#                                     3. meson test in build/ under valgrind (not the
#                                        nvrtc, python, install and abidiff suites)
#
# Works from any directory, may be run again and again (existing build folders
# are reconfigured, not recreated), and exits non-zero on any failure.
#
# The test verb ends with one line, "N passed, M failed", which CI reads: N and
# M are the test totals of runs 1 and 2 (from meson's "Ok:" / "Fail:" summary
# lines; expected failures count as passed, unexpected passes and timeouts as
# failed), plus pytest's passed and failed (errors count as failed) for the
# Python tests. So that M is 0 exactly when the script succeeds, a step that fails
# without test counts of its own (a configure or build error, or the valgrind
# pass) adds one to M.
#
# Criterion runs each test in a child process and does not look at a child's
# exit status once the test has reported, so neither valgrind's --error-exitcode
# nor LeakSanitizer's exit code in a child fails a run by itself:
#  - under the sanitizers, abort_on_error=1 turns a report into SIGABRT, which
#    Criterion does see; reports are written to build-asan/sanitizer-logs/;
#  - under valgrind, --trace-children=yes follows the children Criterion
#    starts, each writes its own log to build/valgrind-logs/, and this script
#    fails the pass when any log reports errors (definite or indirect leaks
#    included).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

PACKAGES=(meson ninja-build pkg-config gcc g++ libcriterion-dev libdlpack-dev libfftw3-dev python3-numpy graphviz valgrind
          shellcheck abigail-tools python3-venv python3-cffi libopenmpi-dev openmpi-bin)

# The Python package (pyproject.toml: meson-python) goes into a virtual
# environment, .venv/, with what it needs from the package registry (NumPy 2,
# not Debian's 1.24; pytest and numexpr for its tests). pip builds it in
# build-python/ (kept, so a second run only rebuilds what changed) and without
# build isolation, from the venv's own meson-python.
VENV="$ROOT/.venv"
PY_PACKAGES=(meson-python meson ninja cffi numpy pytest numexpr)

say() { printf '==> %s (%d s in)\n' "$*" "$SECONDS" >&2; }
die() { printf 'quickstart: %s\n' "$*" >&2; exit 1; }

usage() {
    echo "usage: bash scripts/quickstart.sh demo|test" >&2
    exit 2
}

# ---- install ---------------------------------------------------------------

# shellcheck source=scripts/apt.sh
. "$ROOT/scripts/apt.sh"

install_deps() {
    if ! have_apt; then
        # Not a Debian-like system: check the tools and leave installing to the user.
        local missing=()
        for tool in meson ninja pkg-config cc valgrind dot mpicc mpirun; do
            command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
        done
        pkg-config --exists criterion 2>/dev/null || missing+=("criterion (pkg-config)")
        [ -f /usr/include/dlpack/dlpack.h ] || missing+=("dlpack.h (DLPack headers)")
        /usr/bin/python3 -c 'import numpy' 2>/dev/null || missing+=("NumPy for /usr/bin/python3")
        [ ${#missing[@]} -eq 0 ] || die "no apt-get here; please install: ${missing[*]}"
        return 0
    fi
    apt_install "${PACKAGES[@]}"
}

# python_install: makes .venv/ when missing, installs the registry packages it
# lacks, and (re)installs lazyfuse from this tree into it.
python_install() {
    if [ ! -x "$VENV/bin/python" ]; then
        say "making the virtual environment $VENV"
        /usr/bin/python3 -m venv "$VENV"
    fi
    if ! "$VENV/bin/python" -c 'import mesonpy, mesonbuild, cffi, numpy, pytest, numexpr' 2>/dev/null; then
        say "installing ${PY_PACKAGES[*]} into $VENV"
        "$VENV/bin/python" -m pip install -q --upgrade "${PY_PACKAGES[@]}"
    fi
    say "pip install . (the lazyfuse package, built in build-python/)"
    PATH="$VENV/bin:$PATH" "$VENV/bin/python" -m pip install -q --no-build-isolation \
        --config-settings=build-dir="$ROOT/build-python" "$ROOT"
}

# ---- build -------------------------------------------------------------------

# setup_dir DIR [MESON OPTIONS...]: configures DIR, or reconfigures it when it
# was configured before.
setup_dir() {
    local dir="$1"
    shift
    if [ -f "$dir/meson-private/coredata.dat" ]; then
        meson setup --reconfigure "$dir" "$@"
    else
        meson setup "$dir" "$@"
    fi
}

# ---- test runs ----------------------------------------------------------------

PASSED=0          # tests passed, normal and asan runs
FAILED=0          # tests failed, normal and asan runs, + 1 per failed step
STATUS=0          # the test verb's exit status
SUMMARY_DONE=0    # the summary line has been printed

summary() {
    echo "$PASSED passed, $FAILED failed"
    SUMMARY_DONE=1
}

# If the test verb dies early (set -e: an install or setup error), it still
# ends with a summary line, with that failure counted.
on_exit() {
    local st=$?
    if [ "$SUMMARY_DONE" -eq 0 ] && [ "$st" -ne 0 ]; then
        FAILED=$((FAILED + 1))
        summary
    fi
}

# count_summary LOG: adds meson's summary counts in LOG to PASSED and FAILED
# and sets LAST_FAILED to the failures it found.
LAST_FAILED=0
summary_value() { awk -v k="$1" 'index($0, k ":") == 1 { v = $NF } END { print v + 0 }' "$2"; }
count_summary() {
    local log="$1" ok xfail fail xpass timeout
    ok=$(summary_value 'Ok' "$log")
    xfail=$(summary_value 'Expected Fail' "$log")
    fail=$(summary_value 'Fail' "$log")
    xpass=$(summary_value 'Unexpected Pass' "$log")
    timeout=$(summary_value 'Timeout' "$log")
    LAST_FAILED=$((fail + xpass + timeout))
    PASSED=$((PASSED + ok + xfail))
    FAILED=$((FAILED + LAST_FAILED))
}

# run_pytest NAME COMMAND...: runs a pytest COMMAND and counts its results
# from pytest's closing line ("== 3 failed, 40 passed, 2 skipped in 1.2s ==";
# errors count as failed); a failed run with no failed test counted adds one.
run_pytest() {
    local name="$1" log="$ROOT/build-pytest/quickstart-$1.log" st passed failed errors
    shift
    mkdir -p "$ROOT/build-pytest"
    say "pytest ($name)"
    if "$@" 2>&1 | tee "$log"; then
        st=0
    else
        st=$?
    fi
    passed=$(tail -n 1 "$log" | grep -oE '[0-9]+ passed' | grep -oE '[0-9]+' || true)
    failed=$(tail -n 1 "$log" | grep -oE '[0-9]+ failed' | grep -oE '[0-9]+' || true)
    errors=$(tail -n 1 "$log" | grep -oE '[0-9]+ errors?' | grep -oE '[0-9]+' || true)
    LAST_FAILED=$(( ${failed:-0} + ${errors:-0} ))
    PASSED=$((PASSED + ${passed:-0}))
    FAILED=$((FAILED + LAST_FAILED))
    if [ "$st" -ne 0 ]; then
        STATUS=1
        if [ "$LAST_FAILED" -eq 0 ]; then FAILED=$((FAILED + 1)); fi
        say "$name failed (pytest exit status $st)"
    fi
}

# The package's own tests, from python/tests (the installed package is the
# one imported: python/ is not on the path).
python_tests() {
    cd "$ROOT/python/tests" && "$VENV/bin/python" -m pytest -p no:cacheprovider -q -rs
}

# run_suite NAME DIR [MESON TEST OPTIONS...]: runs meson test in DIR and
# counts its results; a failed run with no failed test counted adds one.
run_suite() {
    local name="$1" dir="$2" log st
    shift 2
    log="$dir/quickstart-$name.log"
    say "meson test ($name)"
    if meson test -C "$dir" --print-errorlogs "$@" 2>&1 | tee "$log"; then st=0; else st=$?; fi
    count_summary "$log"
    if [ "$st" -ne 0 ]; then
        STATUS=1
        if [ "$LAST_FAILED" -eq 0 ]; then FAILED=$((FAILED + 1)); fi
        say "$name run failed (meson test exit status $st)"
    fi
}

# build_dir NAME DIR [MESON OPTIONS...]: configures and builds DIR; a failure
# adds one to FAILED and returns non-zero.
build_dir() {
    local name="$1" dir="$2"
    shift 2
    say "configure and build $dir ($name)"
    if setup_dir "$dir" "$@" && ninja -C "$dir"; then
        return 0
    fi
    say "$name build failed"
    STATUS=1
    FAILED=$((FAILED + 1))
    return 1
}

# Prints each file named on stdin, framed, to stderr.
print_files() {
    local f
    while IFS= read -r f; do
        printf '\n----- %s -----\n' "$f" >&2
        cat "$f" >&2
    done
}

run_tests() {
    # Compiled kernels are cached here, shared by the three passes (the
    # valgrind pass compiles its own: see LF_CPU_MARCH below).
    export LF_CACHE_DIR="$ROOT/build-kernel-cache"

    # 1. normal build
    local normal_built=0
    # -Dmpi=enabled: liblazyfuse-mpi and its suite 'mpi' (mpirun at 1..4
    # ranks) must build and run here, never be skipped for want of MPI
    if build_dir normal build -Dmpi=enabled; then
        normal_built=1
        run_suite normal build
    fi

    # 1b. the Python package, installed from this tree into .venv/
    if python_install; then
        run_pytest python python_tests
        run_pytest numexpr bash "$ROOT/python/numexpr_suite/run.sh" "$VENV/bin/python"
    else
        say "pip install of the Python package failed"
        STATUS=1
        FAILED=$((FAILED + 1))
    fi

    # 2. AddressSanitizer + UndefinedBehaviorSanitizer; reports go to files
    # because Criterion does not pass its children's stderr on.
    local sanlogs="$ROOT/build-asan/sanitizer-logs"
    if build_dir asan build-asan -Db_sanitize=address,undefined -Db_lundef=false -Dmpi=enabled; then
        rm -rf "$sanlogs"
        mkdir -p "$sanlogs"
        ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:log_path=$sanlogs/asan" \
        UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:log_path=$sanlogs/ubsan" \
            run_suite asan build-asan
        if [ -n "$(ls -A "$sanlogs")" ]; then
            say "sanitizer reports (in $sanlogs):"
            find "$sanlogs" -type f | sort | print_files
            if [ "$STATUS" -eq 0 ]; then
                STATUS=1
                FAILED=$((FAILED + 1))
            fi
        fi
    fi

    # 3. valgrind on the normal build. Criterion's children are followed
    # (each writes its own log); compilers a backend may start are not; the
    # 'python' suite (the Python interpreter driving the library) is left
    # out, as are 'nvrtc', 'install', 'abidiff' (abidw reading the
    # library, no lazyfuse code running) and 'device' (the '-cuda' runs of
    # the suites: a GPU driver under valgrind, or, without one, skips).
    # Each test binary runs a sample of its tests there (LF_TEST_SAMPLE,
    # tests/testutil.c: about 40%, at least 3, chosen by the run's seed, so
    # successive runs cover the whole suite; the whole pass took 34 of CI's
    # minutes, half of it 17, and CI's clean run must stay under 60);
    # 'harness' (the check of that sampling) is left out too, and so is 'mpi'
    # (mpirun and OpenMPI's own start-up under valgrind: minutes of MPI
    # internals, not lazyfuse; the sanitizer pass runs it).
    if [ "$normal_built" -eq 1 ]; then
        local vglogs="$ROOT/build/valgrind-logs" vg_status=0 bad
        rm -rf "$vglogs"
        mkdir -p "$vglogs"
        local wrap="valgrind --trace-children=yes"
        wrap+=" --trace-children-skip=*/cc,*/gcc,*/clang,*/cc1,*/as,*/ld,*/collect2,*/sh,*/dash,*/bash"
        wrap+=" --log-file='$vglogs/%p.log'"
        wrap+=" --leak-check=full --error-exitcode=1 --errors-for-leak-kinds=definite,indirect"
        wrap+=" --track-origins=no"
        say "meson test (valgrind)"
        # valgrind decodes AVX2 but not AVX-512: kernels for it are compiled
        # for x86-64-v3 instead of -march=native
        if ! LF_CPU_MARCH=x86-64-v3 LF_TEST_SAMPLE=40 meson test -C build --print-errorlogs --timeout-multiplier=4 --no-suite nvrtc --no-suite python --no-suite install --no-suite abidiff --no-suite device --no-suite harness --no-suite mpi --wrap="$wrap" \
                2>&1 | tee build/quickstart-valgrind.log; then
            vg_status=1
        fi
        bad=$(grep -l 'ERROR SUMMARY: [1-9]' "$vglogs"/*.log 2>/dev/null || true)
        if [ -n "$bad" ]; then
            say "valgrind found errors (logs in $vglogs):"
            printf '%s\n' "$bad" | print_files
            vg_status=1
        fi
        if [ "$vg_status" -ne 0 ]; then
            say "valgrind pass failed"
            STATUS=1
            FAILED=$((FAILED + 1))
        else
            say "valgrind pass clean: $(find "$vglogs" -name '*.log' | wc -l) processes checked"
        fi
    fi

    summary
    return "$STATUS"
}

# ---- main ----------------------------------------------------------------------

[ $# -eq 1 ] || usage
case "$1" in
demo)
    install_deps
    setup_dir build
    ninja -C build
    ./build/tools/lazyfuse-demo
    # the same example from Python: pip install . into .venv/, then evaluate()
    python_install
    "$VENV/bin/python" "$ROOT/python/examples/gaussian.py"
    ;;
test)
    trap on_exit EXIT
    install_deps
    run_tests
    ;;
*)
    usage
    ;;
esac
