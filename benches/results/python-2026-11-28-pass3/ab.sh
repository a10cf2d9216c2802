#!/bin/bash
# part 1 of python_bench: main's package (7964fd9) and this branch's, in turns, same library
# "before" is main's package: git archive 7964fd9 python | tar -x -C /tmp/pyw2/before
cd /work/wt-py
export LAZYFUSE_LIBRARY=/work/wt-py/build/liblazyfuse.so LF_CACHE_DIR=/tmp/pyw-cache
PY=/work/main/.peers-venv/bin/python
tag=$1
for round in 1 2; do
  for which in before after; do
    if [ $which = before ]; then P=/tmp/pyw2/before/python; else P=/work/wt-py/python; fi
    echo "=== $which (round $round) load $(cut -d' ' -f1-3 /proc/loadavg)"
    PYTHONPATH=$P:/tmp/pyextra nice $PY benches/python_bench.py --no-cases --json /tmp/pyw2/ov-$tag-$which-$round.jsonl 2>&1 | grep -v '^command\|^python_bench'
  done
done
echo "=== end load $(cut -d' ' -f1-3 /proc/loadavg)"
