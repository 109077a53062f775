#!/bin/sh
# Start-up cost of keeping secrets out of /proc/<pid>/environ (safety::secrets re-exec): `git-agent --version`
# N times with a secret variable, with and without the re-exec, and with no secret at all (the reference).
# Usage: scripts/bench-reexec.sh [N]   (build first: cargo build --release)
set -eu
N=${1:-300}
BIN=${BIN:-target/release/git-agent}
time_runs() {
    start=$(date +%s%N)
    i=0
    while [ $i -lt "$N" ]; do "$@" >/dev/null; i=$((i + 1)); done
    end=$(date +%s%N)
    echo $(((end - start) / N / 1000))
}
plain=$(time_runs env -u OPENAI_API_KEY "$BIN" --version)
noexec=$(time_runs env GIT_AGENT_REEXEC=0 OPENAI_API_KEY=sk-bench-0123456789 "$BIN" --version)
reexec=$(time_runs env OPENAI_API_KEY=sk-bench-0123456789 "$BIN" --version)
echo "no secret in env:      ${plain} us/start"
echo "secret, no re-exec:    ${noexec} us/start"
echo "secret, re-exec:       ${reexec} us/start (ratio to no secret: $(echo "scale=2; $reexec / $plain" | bc))"
