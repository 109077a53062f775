#!/bin/sh
# Issue 27: a fleet of TASKS tasks (default 1000) run by WORKERS workers (default 16, `fleet work --jobs`) on
# this machine against a bare remote on local disk, every task played by the scripted fake model
# (benchlib/fakesrv.py: one write_file step, then "done").
#
# usage: scripts/bench-fleet.sh [--short] [BINARY] [TASKS] [WORKERS]
#   BINARY defaults to target/release/git-agent, else target/debug/git-agent. --short: 20 tasks, 4 workers
#   (unless TASKS and WORKERS say), a minute or two on a busy 2-core machine.
#
# Prints: submit time; fleet wall time and tasks per second; claim latency (listing the queue to a won claim,
# from each worker's "claimed task" line) median and p99; the remote's ref count and size after the fleet, after
# `fleet gc` and after `git gc` of the remote; and the checks: every task has exactly one result, one session
# branch each, no claim left, no task lost to another worker, `git fsck --strict` of the remote clean.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
short=
if [ "${1:-}" = --short ]; then
	short=1
	shift
fi
bin=${1:-}
if [ -z "$bin" ]; then
	if [ -x "$root/target/release/git-agent" ]; then bin=$root/target/release/git-agent; else bin=$root/target/debug/git-agent; fi
fi
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
tasks=${2:-${short:+20}}
tasks=${tasks:-1000}
workers=${3:-${short:+4}}
workers=${workers:-16}
load_start=$(cut -d' ' -f1 /proc/loadavg)

tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-fleet.XXXXXX")
trap 'kill "$srv" 2>/dev/null || true; rm -rf "$tmp"' EXIT
export HOME="$tmp/home" GIT_CONFIG_NOSYSTEM=1 LANG=C.UTF-8 TERM=dumb
mkdir -p "$HOME"
git config --global user.name bench
git config --global user.email bench@example.invalid
git config --global init.defaultBranch main

git init -q --bare "$tmp/remote.git"
git init -q "$tmp/repo"
cd "$tmp/repo"
printf 'print("hello")\n' > greet.py
git add greet.py
git commit -q -m fixture
git remote add origin "$tmp/remote.git"
git push -q origin main

calls='[{"tool": "write_file", "args": {"path": "fleet-out.txt", "content": "done\n"}, "shell": "echo done > fleet-out.txt"}]'
python3 "$here/benchlib/fakesrv.py" --log "$tmp/srv.log" --port-file "$tmp/srv.port" --calls "$calls" 2>/dev/null &
srv=$!
i=0
while [ ! -s "$tmp/srv.port" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
export OPENAI_BASE_URL="http://127.0.0.1:$(cat "$tmp/srv.port")/v1" OPENAI_API_KEY=dummy GIT_AGENT_MODEL=openai/fake-model

python3 -c "
import json, sys
for i in range(int(sys.argv[1])):
    print(json.dumps({'id': 't%04d' % i, 'prompt': 'task %d: write fleet-out.txt' % i}))
" "$tasks" > "$tmp/tasks.jsonl"

now() { python3 -c 'import time; print(time.time())'; }
t0=$(now)
"$bin" fleet submit origin "$tmp/tasks.jsonl" --fleet bench > /dev/null 2>&1
t1=$(now)
"$bin" fleet work origin --fleet bench --jobs "$workers" --lease 60s 2> "$tmp/work.err" || {
	tail -20 "$tmp/work.err" >&2
	exit 1
}
t2=$(now)

refcount() { git --git-dir="$tmp/remote.git" for-each-ref | wc -l; }
size() { du -sk "$tmp/remote.git" | cut -f1; }
refs_after_fleet=$(refcount)
size_after_fleet=$(size)
results=$(git --git-dir="$tmp/remote.git" for-each-ref refs/agent/fleet/bench/results/ | wc -l)
branches=$(git --git-dir="$tmp/remote.git" for-each-ref refs/heads/agent/ | wc -l)
claims=$(git --git-dir="$tmp/remote.git" for-each-ref refs/agent/fleet/bench/claims/ | wc -l)
fsck=clean
git --git-dir="$tmp/remote.git" fsck --strict --no-dangling --no-progress > "$tmp/fsck.out" 2>&1 || fsck=FAILED
[ -s "$tmp/fsck.out" ] && fsck=FAILED
"$bin" fleet gc origin --fleet bench 2> /dev/null
refs_after_gc=$(refcount)
size_after_gc=$(size)
git --git-dir="$tmp/remote.git" gc -q --prune=now
size_after_git_gc=$(size)

python3 - "$tmp/work.err" "$tasks" "$workers" "$t0" "$t1" "$t2" "$results" "$branches" "$claims" "$fsck" \
	"$refs_after_fleet" "$size_after_fleet" "$refs_after_gc" "$size_after_gc" "$size_after_git_gc" "$bin" \
	"$load_start" "$(cut -d' ' -f1 /proc/loadavg)" <<'EOF'
import re, sys
(err, tasks, workers, t0, t1, t2, results, branches, claims, fsck,
 refs_fleet, size_fleet, refs_gc, size_gc, size_git_gc, binary, load_start, load_end) = sys.argv[1:]
tasks, workers, results, branches, claims = int(tasks), int(workers), int(results), int(branches), int(claims)
t0, t1, t2 = float(t0), float(t1), float(t2)
text = open(err).read()
lat = sorted(int(m) for m in re.findall(r"claimed task \S+ \(attempt \d+, (\d+) ms\)", text))
claimed = re.findall(r"claimed task (\S+) ", text)
finished = re.findall(r": task (\S+) (?:done|passed|failed|unfinished|error) ", text)
def pct(xs, p):
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))] if xs else float("nan")
wall = t2 - t1
print("binary: %s; load average %s at the start, %s at the end" % (binary, load_start, load_end))
print("tasks: %d, workers: %d (one process, --jobs %d)" % (tasks, workers, workers))
print("submit: %.2f s" % (t1 - t0))
print("fleet wall: %.1f s, %.2f tasks/s" % (wall, tasks / wall))
print("claim latency (list to won claim): median %d ms, p99 %d ms (%d claims)" % (pct(lat, 50), pct(lat, 99), len(lat)))
print("remote after the fleet: %s refs, %s KiB" % (refs_fleet.strip(), size_fleet))
print("remote after fleet gc: %s refs, %s KiB; after git gc: %s KiB" % (refs_gc.strip(), size_gc, size_git_gc))
dup = len(finished) - len(set(finished))
ok = results == tasks and branches == tasks and claims == 0 and dup == 0 and len(set(finished)) == tasks and fsck == "clean"
print("results %d, session branches %d, claims left %d, tasks finished twice %d, lost claims %d, fsck %s: %s" % (
    results, branches, claims, dup, len(claimed) - len(set(claimed)), fsck, "intact" if ok else "NOT INTACT"))
sys.exit(0 if ok else 1)
EOF
