#!/usr/bin/env bash
# Benchmarks of the model layer (release build): SSE decode throughput and peak RSS on a 50 MB recorded
# stream, and the latency the HTTP client adds per request over a raw HTTP exchange with the same scripted
# server. Figures are printed with their reference (std line splitting; the raw exchange) in the same run.
#
# usage: scripts/bench-models.sh
set -euo pipefail
. "$(dirname "$0")/bench-lib.sh"
# Two processes: each peak-RSS figure is of its own run.
run_bench sse
run_bench client
