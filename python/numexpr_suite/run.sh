#!/usr/bin/env bash
# python/numexpr_suite/run.sh PYTHON [PYTEST ARGS...]: numexpr's own test suite
# against lazyfuse. PYTHON is an interpreter with lazyfuse, numexpr (from the
# registry: its tests ship inside it) and pytest installed (quickstart's
# .venv/bin/python). The test file is copied out of the installed numexpr
# into build-pytest/numexpr-suite/ ($LAZYFUSE_NUMEXPR_WORK) and run there with
# shim/ first on PYTHONPATH, so that ``import numexpr`` is lazyfuse.numexpr (in
# the subprocesses some tests start too); lazyfuse_numexpr_plugin.py skips
# what lazyfuse lacks, each skip with its reason, and prints the counts.
# Kernels run on the schedule interpreter unless $LF_COMPILE says otherwise
# (below).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
[ $# -ge 1 ] || { echo "usage: $0 PYTHON [PYTEST ARGS...]" >&2; exit 2; }
PY="$1"
shift
SRC="$("$PY" -c 'import os, numexpr.tests as t; print(os.path.dirname(t.__file__))')"
WORK="${LAZYFUSE_NUMEXPR_WORK:-$ROOT/build-pytest/numexpr-suite}"
mkdir -p "$WORK"
cp "$SRC/test_numexpr.py" "$WORK/test_numexpr.py"
cd "$WORK"
# numexpr's suite evaluates some 2,000 distinct expressions once each: compiled,
# that is a C compiler run for nearly every test (seconds each on a loaded
# 2-core machine); the schedule interpreter runs the same fused plans without
# compiling (python/tests runs the compiled path). LF_COMPILE=auto overrides.
export LF_COMPILE="${LF_COMPILE:-never}"
PYTHONPATH="$HERE/shim:$HERE${PYTHONPATH:+:$PYTHONPATH}" \
    exec "$PY" -m pytest -p lazyfuse_numexpr_plugin -p no:cacheprovider -q test_numexpr.py "$@"
