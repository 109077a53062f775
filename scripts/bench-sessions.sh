#!/usr/bin/env bash
# Benchmark the session log: per-event append cost for a session of 10 and of 5,000 events (it must not grow),
# and `git agent log` with 1,000 sessions against `git for-each-ref` reading the same 1,000 log commits.
#
# usage: scripts/bench-sessions.sh   (env: SESSIONS=1000, RUNS=5; release builds of the lib tests and binary)
set -euo pipefail

sessions=${SESSIONS:-1000}
runs=${RUNS:-5}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/git-agent-bench-sessions.XXXXXX")
repo=$work/repo
trap 'rm -rf "$work"' EXIT

export GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1 LC_ALL=C
export GIT_AUTHOR_NAME=bench GIT_AUTHOR_EMAIL=bench@example.com
export GIT_COMMITTER_NAME=bench GIT_COMMITTER_EMAIL=bench@example.com

. "$root/scripts/bench-lib.sh"
time_ms() { # median wall time of running "$@" $runs times, output discarded
    local times=() t0 t1
    for ((i = 0; i < runs; i++)); do
        t0=$(now_ms)
        "$@" >/dev/null
        t1=$(now_ms)
        times+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')")
    done
    printf '%s\n' "${times[@]}" | median
}

mkdir -p "$repo"
git -C "$repo" init -q -b main
echo hello >"$repo/README"
git -C "$repo" add -A && git -C "$repo" commit -q -m init

echo "== session log (release build; $sessions sessions of 12 events) =="
out=$(BENCH_REPO=$repo BENCH_SESSIONS=$sessions run_bench sessions)
grep -o 'BENCH .*' <<<"$out" | sed 's/^BENCH /  /'
short=$(sed -n 's/.*BENCH append_10_events_median_us=//p' <<<"$out")
long=$(sed -n 's/.*BENCH append_5000_events_median_us=//p' <<<"$out")
awk -v s="$short" -v l="$long" 'BEGIN { printf "  append cost ratio 5000/10 events = %.2f (1.0 = does not grow)\n", l / s }'

(cd "$root" && cargo build --release -q)
bin=$root/target/release/git-agent
[[ $(cd "$repo" && "$bin" log | wc -l) -ge $sessions ]] || { echo "log lists too few sessions"; exit 1; }
echo "== git agent log vs git for-each-ref over the same refs (median of $runs) =="
agent_ms=$(cd "$repo" && time_ms "$bin" log)
git_ms=$(cd "$repo" && time_ms git for-each-ref --sort=-committerdate \
    --format='%(refname:lstrip=3) %(committerdate:short) %(contents:subject)' refs/agent/sessions/)
echo "  git_agent_log_ms=$agent_ms"
echo "  git_for_each_ref_ms=$git_ms"
awk -v g="$git_ms" -v a="$agent_ms" 'BEGIN { printf "  ratio git-agent log / git for-each-ref = %.2fx\n", a / g }'
