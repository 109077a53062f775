#!/usr/bin/env bash
# The cost of isolating `run` commands (issue 17): BENCH_RUNS (default 100) `run` calls of `true`, compared
# in the same run with the bare `bash -c true` spawn commands had before the supervisor.
#
# usage: scripts/bench-isolation.sh        (env: BENCH_RUNS)
#
# Lines: the bare spawn; `run` with the supervisor but no namespace (the fallback); with the PID namespace
# and private /proc; and both again under the workspace sandbox (Landlock). Each gives ms per call and the
# ratio to the bare spawn. Run it as yourself to measure the unprivileged path (user namespace) and as root
# for the other.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
echo "== release build =="
cargo test --release --lib --no-run 2>&1 | tail -1
echo "== run \`true\` $((${BENCH_RUNS:-100})) times each way =="
cargo test --release --lib tools::bench::bench_run_isolation -- --ignored --nocapture --exact 2>&1 |
    grep '^BENCH' | sed 's/^BENCH /  /'
