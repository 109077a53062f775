#!/usr/bin/env bash
# Benchmark `git agent accept` of a big file that both sides changed (issue 17, defect 2: the accept that a
# kill -9 used to leave half written) against the same three-way merge with plain git (`git merge-file` and a
# copy into place), in one run; prints both, the ratio and the peak memory (of the largest process of each tree).
#
# usage: scripts/bench-accept.sh [MiB]   (default 100; env BENCH_RUNS=3; release build)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/bench-lib.sh"

echo "== git agent accept vs git merge-file (release build, ${1:-100} MiB file) =="
out=$(BENCH_MIB=${1:-100} run_bench accept)
grep -o 'BENCH .*' <<<"$out" | sed 's/^BENCH /  /'
