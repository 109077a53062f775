#!/usr/bin/env bash
# Benchmark git-agent's snapshot commits against plain `git add -A && git commit` on a 100,000-file repo.
#
# usage: scripts/bench-commit.sh [steps]   (env: BENCH_DIR keeps/reuses the synthetic repo; DIRS, FILES size it)
#
# Figures: (a) median commit_step time for one changed file (gix tree edit + commit + CAS ref update),
# (b) median `git add -A && git commit -q` for one changed file on the same repo, (c) start_session
# (branch + `git worktree add` of 100k files), (d) median scan of the checkout (parallel stat walk),
# (e) changed-file detection after a command that modified 1 file: the stat rescan + diff, the inotify
# ChangeTracker (after_run; its watch set-up, once per session, reported separately) and
# `git status --porcelain` on the same checkout.
set -euo pipefail

steps=${1:-20}
dirs=${DIRS:-1000}
files=${FILES:-100}
root=$(cd "$(dirname "$0")/.." && pwd)
work=${BENCH_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/git-agent-bench.XXXXXX")}
repo=$work/repo

export GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1 LC_ALL=C

. "$root/scripts/bench-lib.sh"

DIRS=$dirs FILES=$files "$root/scripts/benchlib/gen100k.sh" "$repo"

echo "== git-agent (release build) =="
out=$(BENCH_REPO=$repo BENCH_STEPS=$steps run_bench commit)
grep '^BENCH' <<<"$out" | sed 's/^BENCH /  /'
agent_ms=$(sed -n 's/^BENCH commit_step_median_ms=//p' <<<"$out")

echo "== git add -A && git commit -q =="
times=()
for ((i = 0; i < steps; i++)); do
    f=$(printf '%s/d%03d/f%03d.txt' "$repo" $(((i * 53) % dirs)) $(((i * 7) % files)))
    echo "git step $i" >>"$f"
    t0=$(now_ms)
    git -C "$repo" add -A
    git -C "$repo" commit -q -m "git step $i"
    t1=$(now_ms)
    times+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')")
done
git_ms=$(printf '%s\n' "${times[@]}" | median)
echo "  git_add_commit_median_ms=$git_ms"
awk -v g="$git_ms" -v a="$agent_ms" 'BEGIN { printf "ratio git/commit_step = %.1fx\n", g / a }'

[[ -n ${BENCH_DIR:-} ]] || rm -rf "$work"
