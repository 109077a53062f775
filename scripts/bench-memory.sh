#!/usr/bin/env bash
# Benchmark project memory at 100, 1,000 and 10,000 entries (release build): retrieval (index read + BM25
# ranking) against reading every entry blob, loose and after `git gc`; the time from starting `git agent ask`
# to its first model request with and without those entries (the scripted server answers at once, so this is
# what memory adds before a real model's first byte); the share of a 32k window the injected entries use; the
# cost of one memory write against a notes write; `git agent memory list` against `git ls-tree -r`.
#
# usage: scripts/bench-memory.sh   (env: BENCH_RUNS=11, BENCH_WRITES=20)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/bench-lib.sh"

echo "== project memory (release build) =="
out=$(run_bench memory)
grep -o 'BENCH .*' <<<"$out" | sed 's/^BENCH /  /'
