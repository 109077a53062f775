#!/bin/sh
# Context benchmark (issue 7): the fixed 60-request scripted session (a plan, 57 reads of 6 KB files, the plan
# marked done, finish) against a 14k-token window, once with pruning and compaction on and once with both off
# (GIT_AGENT_PRUNE=0 GIT_AGENT_COMPACT=0). The scripted server reports each request's size as body bytes / 4.
# Prints total input tokens over all requests (summarising requests included), the largest request, and the
# on/off ratios.
set -eu
cd "$(dirname "$0")/.."
cargo test --test integration context::bench_context_60_steps -- --ignored --nocapture 2>/dev/null | grep '^BENCH'
