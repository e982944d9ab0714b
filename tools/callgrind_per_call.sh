#!/bin/bash
# Instructions per call of one statement, by function, under callgrind.
#
#   tools/callgrind_per_call.sh 'SETUP' 'STATEMENT' [ROWS]
#   tools/callgrind_per_call.sh 't = ember.zeros(4, 6)' 't[1:3]'
#   tools/callgrind_per_call.sh 'a = np.zeros((4, 6))' 'a[1:3]'     # the peer
#
# Runs the statement in a loop 20000 and 70000 times and prints, per
# function, the difference of the two exclusive instruction counts divided
# by 50000: interpreter start-up and imports cancel, and what is left is the
# cost of one call (the first row, PROGRAM, is the total).  Instruction
# counts do not depend on the machine's load, unlike timings; they do not
# see cache misses or atomics either, so confirm with bench/bench_core.py.
set -euo pipefail
cd "$(dirname "$0")/.."
setup=$1 statement=$2 rows=${3:-30}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/loop.py" <<PY
import sys, ember, numpy as np
$setup
def run(n):
    for _ in range(n):
        $statement
run(int(sys.argv[1]))
PY
for n in 20000 70000; do
    OPENBLAS_NUM_THREADS=1 PYTHONPATH=python valgrind --tool=callgrind \
        --callgrind-out-file="$work/out.$n" .venv/bin/python "$work/loop.py" $n \
        > /dev/null 2>&1
    callgrind_annotate --auto=no --threshold=100 "$work/out.$n" \
        | grep -E '^ *[0-9,]+ \(' | sed 's/([^)]*%)//' \
        | awk '{gsub(",", "", $1); print $1, $2}' > "$work/counts.$n"
done
python3 - "$work/counts.20000" "$work/counts.70000" "$rows" <<'PY'
import sys
short = dict(line.split(None, 1)[::-1] for line in open(sys.argv[1]))
short = {name.strip(): int(count) for name, count in short.items()}
rows = []
for line in open(sys.argv[2]):
    count, name = line.split(None, 1)
    name = name.strip()
    rows.append(((int(count) - short.get(name, 0)) / 50000, name))
for per_call, name in sorted(rows, reverse=True)[:int(sys.argv[3])]:
    if per_call >= 5:
        print(f"{per_call:8.1f} {name.split('/')[-1][:100]}")
PY
