#!/usr/bin/env bash
# Benchmark the tools against the tools a developer would use by hand (issue 5).
#
# usage: scripts/bench-tools.sh        (env: BENCH_DIR keeps/reuses the trees; COPIES sizes the search tree;
#                                       BENCH_RUNS runs per query, default 5)
#
# Figures, one run, release build:
#   search: the `search` tool vs `rg -n` (output to a file) on a tree of real source: the cargo registry's
#           sources hard-linked COPIES times (default 6, ~100k files), as a git repo. Median of BENCH_RUNS,
#           warm cache. The tool runs in-process; rg's figure includes its process start (~1-2 ms).
#   edit_file on a 10 MB file: one edit, three edits in one call, a miss (closest region), peak memory.
#   changed-file detection after a command that modified 1 file of 100,000 (scripts/bench-commit.sh tree):
#           the inotify ChangeTracker (and its one-off watch set-up) and Scan::rescan + diff vs
#           `git status --porcelain` on the same checkout.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
work=${BENCH_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/git-agent-bench-tools.XXXXXX")}
copies=${COPIES:-6}
registry=${CARGO_HOME:-$HOME/.cargo}/registry/src
tree=$work/search-tree

command -v rg >/dev/null || { echo "error: rg (ripgrep) is needed for the comparison"; exit 1; }

if [[ ! -d $tree/.git ]]; then
    echo "building the search tree: $copies hard-linked copies of $registry ..."
    mkdir -p "$tree"
    for ((i = 0; i < copies; i++)); do cp -al "$registry" "$tree/copy$i"; done
    git -C "$tree" init -q
fi
echo "search tree: $(find "$tree" -type f -not -path '*/.git/*' | wc -l) files, $(du -sh --apparent-size "$tree" | cut -f1)"
# Warm the page cache for both tools.
rg -c --no-config zzzz "$tree" >/dev/null || true

. "$root/scripts/bench-lib.sh"
cd "$root"

echo "== search vs rg =="
BENCH_TREE=$tree run_bench search | grep '^BENCH' | sed 's/^BENCH /  /'

# A process of its own: its peak memory is the edit's.
echo "== edit_file on a 10 MB file =="
run_bench edit | grep '^BENCH' | sed 's/^BENCH /  /'

echo "== changed-file detection (1 of 100,000 files modified) =="
BENCH_DIR=$work "$root/scripts/bench-commit.sh" "${STEPS:-10}" | grep -E 'files=|scan|status|inotify'

[[ -n ${BENCH_DIR:-} ]] || rm -rf "$work"
