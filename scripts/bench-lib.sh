# Shared by the scripts/bench-*.sh scripts (sourced, not run): timing of the reference commands and the one
# way every benchmark is run.

# Milliseconds since the epoch, with microseconds.
now_ms() { date +%s%N | awk '{ printf "%.3f", $1 / 1e6 }'; }

# The median of the numbers on stdin, one a line (the upper one of an even count, as the benchmarks' own).
median() { sort -g | awk '{ a[NR] = $1 } END { print a[int(NR / 2) + 1] }'; }

# Runs the named benchmarks of the bench target (benches/bench/main.rs) in a release build, in the crate at
# $BENCH_CRATE (default: this one); prints everything, and the build's output too if it fails.
run_bench() {
    local crate=${BENCH_CRATE:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)} out
    out=$(cd "$crate" && cargo bench --quiet --bench bench -- "$@" 2>&1) || {
        echo "$out" >&2
        return 1
    }
    printf '%s\n' "$out"
}
