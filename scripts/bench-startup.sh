#!/bin/sh
# Start-up cost of keeping secrets out of /proc/<pid>/environ (safety::secrets wipes them in place):
# `git-agent --version` N times with a secret variable in the environment and with none (the reference),
# interleaved in blocks of 10, and the ratio. Usage: scripts/bench-startup.sh [N]   (cargo build --release first)
set -eu
N=${1:-300}
BIN=${BIN:-target/release/git-agent}
block() {
    i=0
    while [ $i -lt 10 ]; do "$@" >/dev/null; i=$((i + 1)); done
}
plain=0
secret=0
rounds=$((N / 10))
r=0
while [ $r -lt $rounds ]; do
    t0=$(date +%s%N)
    block env -u OPENAI_API_KEY "$BIN" --version
    t1=$(date +%s%N)
    block env OPENAI_API_KEY=sk-bench-0123456789 "$BIN" --version
    t2=$(date +%s%N)
    plain=$((plain + t1 - t0))
    secret=$((secret + t2 - t1))
    r=$((r + 1))
done
n=$((rounds * 10))
echo "no secret in env:  $((plain / n / 1000)) us/start"
echo "secret in env:     $((secret / n / 1000)) us/start (ratio to no secret: $(echo "scale=2; $secret / $plain" | bc))"
