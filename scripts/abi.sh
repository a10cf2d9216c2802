#!/usr/bin/env bash
# scripts/abi.sh: liblazyfuse's ABI baseline, and the check CI runs against it
# (README, "Versioning and ABI").
#
#   bash scripts/abi.sh baseline [BUILD_DIR]
#       rewrites abi/liblazyfuse.abi from BUILD_DIR's shared library (default
#       build/, configured debugoptimized and built first when needed). Run it
#       on purpose: when a release adds functions, appends a struct field or
#       breaks the ABI (with the soname bump), and commit the result.
#   bash scripts/abi.sh selftest LIBRARY
#       the check still fails on breaks: LIBRARY's ABI altered by hand (a
#       function removed, struct fields swapped, a parameter retyped) must
#       fail the gate, a function added must pass (meson test
#       'abidiff-selftest').
#   bash scripts/abi.sh check LIBRARY
#       compares LIBRARY (a built liblazyfuse.so.MAJOR.MINOR.PATCH) with the
#       baseline; the meson test 'abidiff' runs this. Exit 0: no change
#       (added functions are listed, not failed); 1: the ABI changed against
#       the baseline; 77 (meson's "skipped"): abidiff is not installed, or
#       the library has no debug information to read types from.
#
# The ABI is taken from the library's DWARF (abidw, Debian's abigail-tools),
# limited to the interfaces it exports and the types declared in include/:
# the baseline is the same file whatever the build folder's path
# (translation-unit paths are written relative to the source root, the
# compile folder and the corpus path are left out, type ids are hashes).
#
# What the check fails on (abidiff's report, after abi/lazyfuse.abignore):
# any change to a function the baseline has (removed, parameter or return
# type changed) or to a type such a function reaches (struct fields
# reordered, retyped, removed or added, enumerator values changed), and a
# soname change. What passes: functions added since the baseline (listed,
# so a release regenerates the baseline), enumerators appended to an enum
# (abidiff's harmless changes), and the count sentinels LF_NDTYPES, LF_NOPS,
# LF_NREDS growing with them (the suppression file). A field appended to
# lf_ctx_options or lf_eval_stats is compatible by the README's rule but
# fails here until the baseline is regenerated: libabigail's "inserted at
# end" suppression also hides reordered and retyped fields (checked with
# libabigail 2.2), so the check does not use it.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BASELINE="$ROOT/abi/liblazyfuse.abi"
SUPPRESSIONS="$ROOT/abi/lazyfuse.abignore"

die() { printf 'abi: %s\n' "$*" >&2; exit 1; }
skip() { printf 'abi: skipped: %s\n' "$*" >&2; exit 77; }

usage() {
    echo "usage: bash scripts/abi.sh baseline [BUILD_DIR] | check LIBRARY | selftest LIBRARY" >&2
    exit 2
}

# dump LIBRARY OUT: writes LIBRARY's ABI (abixml) to OUT, made independent
# of where LIBRARY was built.
dump() {
    local lib="$1" out="$2" dir rel
    dir="$(cd "$(dirname "$lib")" && pwd)"
    rel="$(realpath --relative-to="$dir" "$ROOT")"
    abidw --exported-interfaces-only --headers-dir "$ROOT/include" --drop-private-types \
        --no-corpus-path --no-comp-dir-path --no-show-locs --type-id-style hash "$lib" |
        sed -e "s#path='$rel/#path='#" -e "s#path='$ROOT/#path='#" >"$out"
    grep -q "class-decl name='lf_ctx_options'" "$out" ||
        die "abidw found no lf_ctx_options in $lib: not a liblazyfuse with debug information?"
}

# gate OLD NEW: abidiff's verdict on NEW against OLD (abixml files) as the
# check takes it: 0 when the only changes are added functions and the
# suppressed ones, else abidiff's exit status (bit 4: a change, 8: an
# incompatible one, 1 and 2: abidiff failed). Prints abidiff's report.
gate() {
    abidiff --no-added-syms --suppressions "$SUPPRESSIONS" "$1" "$2"
}

# has_debug_info LIBRARY
has_debug_info() {
    local sections
    sections="$(LC_ALL=C readelf -S "$1" 2>/dev/null)" || return 1
    [[ "$sections" == *.debug_info* ]]
}

TMP_DIR=""
check() {
    local lib="$1" st
    if ! command -v abidiff >/dev/null 2>&1 || ! command -v abidw >/dev/null 2>&1; then
        skip "abidiff and abidw not found: install abigail-tools (apt-get install abigail-tools; scripts/quickstart.sh does)"
    fi
    [ -f "$lib" ] || die "no library $lib"
    [ -f "$BASELINE" ] || die "no baseline $BASELINE: make it with bash scripts/abi.sh baseline, and commit it"
    has_debug_info "$lib" ||
        skip "$lib has no debug information (configure with -Dbuildtype=debugoptimized or -Ddebug=true for the ABI check)"
    TMP_DIR="$(mktemp -d "${TMPDIR:-/tmp}/lazyfuse-abi.XXXXXX")"
    local tmp="$TMP_DIR"
    trap 'rm -rf "$TMP_DIR"' EXIT
    dump "$lib" "$tmp/current.abi"

    # the gate: everything but added functions and the suppressed changes
    st=0
    gate "$BASELINE" "$tmp/current.abi" >"$tmp/gate.txt" 2>&1 || st=$?
    if [ "$st" -ne 0 ]; then
        cat "$tmp/gate.txt"
        echo
        if [ $((st & 3)) -ne 0 ]; then
            die "abidiff failed (exit status $st): see above"
        fi
        if [ $((st & 8)) -ne 0 ]; then
            echo "abi: INCOMPATIBLE change against abi/liblazyfuse.abi (abidiff exit status $st: a function or the soname is gone)."
        else
            echo "abi: the ABI changed against abi/liblazyfuse.abi (abidiff exit status $st)."
        fi
        echo "abi: if the change breaks programs built against the baseline (README, \"Versioning and ABI\"),"
        echo "abi: undo it, or make it a new major version: bump MAJOR in meson.build's project version"
        echo "abi: (the soname follows). If it is deliberate (a release that appends a struct field,"
        echo "abi: or the major version bump itself), regenerate the baseline and commit it:"
        echo "abi:     bash scripts/abi.sh baseline"
        exit 1
    fi

    # added functions: compatible; listed so a release regenerates the baseline
    abidiff --suppressions "$SUPPRESSIONS" "$BASELINE" "$tmp/current.abi" >"$tmp/all.txt" 2>&1 || st=$?
    if [ "$st" -ne 0 ]; then
        cat "$tmp/all.txt"
        echo "abi: compatible: functions added since abi/liblazyfuse.abi (above). When they are released,"
        echo "abi: regenerate the baseline (bash scripts/abi.sh baseline) so that removing them later fails."
    fi
    echo "abi: $(basename "$lib") matches abi/liblazyfuse.abi (no incompatible change)"
}

# selftest LIBRARY: the check must still be able to fail. From LIBRARY's
# ABI it makes altered copies (a function removed, two struct fields
# swapped, a parameter retyped, a function added) and requires the gate to
# fail on the first three and pass the last: so a libabigail update, or a
# change to the flags above, that blinds the check fails CI.
selftest() {
    local lib="$1" st name want
    if ! command -v abidiff >/dev/null 2>&1 || ! command -v abidw >/dev/null 2>&1; then
        skip "abidiff and abidw not found: install abigail-tools (apt-get install abigail-tools; scripts/quickstart.sh does)"
    fi
    has_debug_info "$lib" ||
        skip "$lib has no debug information (configure with -Dbuildtype=debugoptimized or -Ddebug=true for the ABI check)"
    TMP_DIR="$(mktemp -d "${TMPDIR:-/tmp}/lazyfuse-abi.XXXXXX")"
    local tmp="$TMP_DIR"
    trap 'rm -rf "$TMP_DIR"' EXIT
    dump "$lib" "$tmp/current.abi"
    python3 - "$tmp" <<'PY'
import re, sys
d = sys.argv[1]
cur = open(d + "/current.abi").read()
def write(name, text):
    if text == cur:
        sys.exit("abi selftest: the %s alteration matched nothing: update scripts/abi.sh" % name)
    open("%s/%s.abi" % (d, name), "w").write(text)
# lf_buffer_numel gone: its symbol and its declaration
t = re.sub(r"\n *<elf-symbol name='lf_buffer_numel' [^\n]*", "", cur)
t = re.sub(r"\n *<function-decl name='lf_buffer_numel' .*?</function-decl>", "", t, flags=re.S)
write("removed", t)
# lf_ctx_options.threads and .fusion swapped (names exchanged, offsets kept)
m = re.search(r"<class-decl name='lf_ctx_options' .*?</class-decl>", cur, re.S)
body = m.group(0).replace("name='threads'", "name='@T'").replace("name='fusion'", "name='threads'").replace("name='@T'", "name='fusion'")
write("reordered", cur[:m.start()] + body + cur[m.end():])
# lf_iota's length parameter retyped from int64_t to int
i64 = re.search(r"<typedef-decl name='int64_t' type-id='[^']*' id='([^']*)'", cur).group(1)
int_ = re.search(r"<type-decl name='int' size-in-bits='32' id='([^']*)'", cur).group(1)
m = re.search(r"<function-decl name='lf_iota' .*?</function-decl>", cur, re.S)
body = re.sub(r"(<parameter type-id=')%s(' name='len'/>)" % re.escape(i64), r"\g<1>%s\g<2>" % int_, m.group(0))
write("retyped", cur[:m.start()] + body + cur[m.end():])
PY
    for name in removed reordered retyped added; do
        st=0
        if [ "$name" = added ]; then # the library has a function the baseline lacks
            gate "$tmp/removed.abi" "$tmp/current.abi" >"$tmp/$name.txt" 2>&1 || st=$?
            want="pass"
        else
            gate "$tmp/current.abi" "$tmp/$name.abi" >"$tmp/$name.txt" 2>&1 || st=$?
            want="fail"
        fi
        if [ $((st & 3)) -ne 0 ]; then cat "$tmp/$name.txt"; die "selftest: abidiff failed on the '$name' case (exit status $st)"; fi
        if { [ "$want" = fail ] && [ "$st" -eq 0 ]; } || { [ "$want" = pass ] && [ "$st" -ne 0 ]; }; then
            cat "$tmp/$name.txt"
            die "selftest: the check should $want on the '$name' case, abidiff exit status $st"
        fi
        echo "abi selftest: $name: the gate should $want and does (abidiff exit status $st)"
    done
}

baseline() {
    local build="${1:-$ROOT/build}" lib
    command -v abidw >/dev/null 2>&1 || die "abidw not found: install abigail-tools"
    if [ ! -f "$build/meson-private/coredata.dat" ]; then
        meson setup "$build" "$ROOT" -Dbuildtype=debugoptimized
    fi
    lib="$(ninja -C "$build" -t targets all | sed -n 's/^\(liblazyfuse\.so[.0-9]*\): c_LINKER$/\1/p')"
    [ -n "$lib" ] || die "no shared library target in $build"
    ninja -C "$build" "$lib" >/dev/null
    lib="$build/$lib"
    has_debug_info "$lib" || die "$lib has no debug information: use a build folder configured with -Dbuildtype=debugoptimized"
    mkdir -p "$(dirname "$BASELINE")"
    dump "$lib" "$BASELINE.tmp"
    mv "$BASELINE.tmp" "$BASELINE"
    echo "abi: wrote $BASELINE from $lib ($(grep -c '<elf-symbol ' "$BASELINE") exported functions);" \
         "commit it with the change it records"
}

[ $# -ge 1 ] || usage
case "$1" in
baseline) [ $# -le 2 ] || usage; baseline "${2:-}" ;;
check) [ $# -eq 2 ] || usage; check "$2" ;;
selftest) [ $# -eq 2 ] || usage; selftest "$2" ;;
*) usage ;;
esac
