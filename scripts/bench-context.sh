#!/bin/sh
# Context benchmark (issue 7): the fixed 60-request scripted session (a plan, 57 reads of 6 KB files, the plan
# marked done, finish) against a 14k-token window, once with pruning and compaction on and once with both off
# (GIT_AGENT_PRUNE=0 GIT_AGENT_COMPACT=0). The scripted server reports each request's size as body bytes / 4.
# Prints total input tokens over all requests (summarising requests included), the largest request, and the
# on/off ratios.
set -eu
cd "$(dirname "$0")/.."
# Token counts do not depend on the build, so the debug build will do (cargo test runs the bench target's
# main like cargo bench does).
out=$(cargo test --quiet --bench bench -- context 2>&1) || { echo "$out" >&2; exit 1; }
echo "$out" | grep '^BENCH'
