#!/usr/bin/env bash
# Benchmarks of the model layer (release build): SSE decode throughput and peak RSS on a 50 MB recorded
# stream, and the latency the HTTP client adds per request over a raw HTTP exchange with the same scripted
# server. Figures are printed with their reference (std line splitting; the raw exchange) in the same run.
#
# usage: scripts/bench-models.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --release --quiet --test integration bench_ -- --ignored --nocapture --test-threads 1 2>&1 \
  | grep -v -E '^(running|test |$)|test result'
