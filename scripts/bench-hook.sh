#!/usr/bin/env bash
# What git-agent's pre-commit hook costs when the check passes: `git commit` of the same change with the hook
# installed against `git commit` with no hook (`-c core.hooksPath=<empty dir>`), alternating in one run, in
# a repository of FILES files; and the check on its own. The hook's own cost is the difference less the
# check's: writing the staged tree, a scratch checkout of it (from the worktree pool after the first), and
# putting that checkout back cleaned.
# With nothing untracked the check runs in the work tree itself (it holds exactly the index); UNTRACKED=1
# leaves an untracked file beside it, so the check runs in a scratch checkout of the index.
# Usage: scripts/bench-hook.sh [N] [CHECK]   (N commits each way, default 30; CHECK default `true`)
#        FILES=1000 UNTRACKED=0 BIN=target/release/git-agent (built with cargo build --release when missing)
set -euo pipefail
# shellcheck source=scripts/bench-lib.sh
. "$(dirname "$0")/bench-lib.sh"
N=${1:-30}
CHECK=${2:-true}
FILES=${FILES:-1000}
crate=$(cd "$(dirname "$0")/.." && pwd)
BIN=${BIN:-$crate/target/release/git-agent}
[ -x "$BIN" ] || (cd "$crate" && cargo build --release --quiet)
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export HOME=$work/home GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
export GIT_AUTHOR_NAME=bench GIT_AUTHOR_EMAIL=bench@example.com
export GIT_COMMITTER_NAME=bench GIT_COMMITTER_EMAIL=bench@example.com
export PATH="$(dirname "$BIN"):$PATH"
mkdir -p "$HOME" "$work/no-hooks"
repo=$work/repo
git init -q -b main "$repo"
cd "$repo"
for i in $(seq 1 "$FILES"); do
    mkdir -p "src/d$((i % 50))"
    printf 'file %s\n' "$i" >"src/d$((i % 50))/f$i.txt"
done
printf 'check = "%s"\n' "$CHECK" >.git-agent.toml
git add -A && git commit -q -m "a repository of $FILES files"
git agent hook install pre-commit 2>/dev/null
[ "${UNTRACKED:-0}" = 1 ] && echo "not staged" >untracked.txt

commit_ms() { # the time of one `git commit` of a fresh one-line change, with git's extra args "$@"
    echo "change $RANDOM $i" >>src/d0/f50.txt
    git add src/d0/f50.txt
    local start end
    start=$(now_ms)
    git "$@" commit -q -m "change $i" 2>/dev/null
    end=$(now_ms)
    awk -v a="$start" -v b="$end" 'BEGIN { printf "%.3f\n", b - a }'
}
with=() without=() alone=()
for i in $(seq 1 "$N"); do
    with+=("$(commit_ms)")
    without+=("$(commit_ms -c core.hooksPath="$work/no-hooks")")
    start=$(now_ms)
    sh -c "$CHECK" >/dev/null 2>&1
    end=$(now_ms)
    alone+=("$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.3f\n", b - a }')")
done
m_with=$(printf '%s\n' "${with[@]}" | median)
m_without=$(printf '%s\n' "${without[@]}" | median)
m_alone=$(printf '%s\n' "${alone[@]}" | median)
where=$([ "${UNTRACKED:-0}" = 1 ] && echo "a scratch checkout (an untracked file)" || echo "the work tree")
echo "repository: $FILES files; check: $CHECK, run in $where; $N commits each way (medians)"
echo "git commit without the hook:  ${m_without} ms"
echo "git commit with the hook:     ${m_with} ms"
echo "the check alone (sh -c):      ${m_alone} ms"
awk -v w="$m_with" -v o="$m_without" -v c="$m_alone" 'BEGIN {
    printf "difference:                   %.1f ms (ratio %.2f)\n", w - o, w / o
    printf "the hook beyond the check:    %.1f ms\n", w - o - c
}'
