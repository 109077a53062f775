//! The benchmarks, one target (`harness = false`) that the `scripts/bench-*.sh` scripts run by name; each
//! prints its figures, and the reference it is compared with where the reference runs in-process (std's line
//! splitting, a raw HTTP exchange, `rg`, `git status`). The scripts add the references that run as commands
//! of their own (`git add && git commit`, `git for-each-ref`) in the same run and print the ratios.
//!
//! ```text
//! cargo bench --bench bench -- commit      # BENCH_REPO=<repo> [BENCH_STEPS=20]  scripts/bench-commit.sh
//! cargo bench --bench bench -- sessions    # BENCH_REPO=<repo> [BENCH_SESSIONS]  scripts/bench-sessions.sh
//! cargo bench --bench bench -- search      # BENCH_TREE=<tree> [BENCH_RUNS=5]    scripts/bench-tools.sh
//! cargo bench --bench bench -- edit        #                                     scripts/bench-tools.sh
//! cargo bench --bench bench -- accept      # [BENCH_MIB=100] [BENCH_RUNS=3]      scripts/bench-accept.sh
//! cargo bench --bench bench -- sse client  #                                     scripts/bench-models.sh
//! cargo test --bench bench -- context      # token counts: a debug build will do scripts/bench-context.sh
//! cargo bench --bench bench -- memory      # [BENCH_RUNS=11] [BENCH_WRITES=20]   scripts/bench-memory.sh
//! ```
//!
//! Peak-memory figures are per process, so the scripts run the benchmarks that report one on their own.

// A benchmark that cannot set itself up should stop at once and loudly, like a failing test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

// The scripted model server and fixtures of the integration tests, for the benchmarks that drive the binary;
// most of it only the tests use.
#[allow(dead_code, unused_imports)]
#[path = "../../tests/common/mod.rs"]
mod common;
mod context;
mod land;
mod memory;
mod model;
mod stats;
mod store;
mod tools;

/// Every benchmark by name, with what it measures.
const BENCHES: &[(&str, fn(), &str)] = &[
    (
        "commit",
        store::commit,
        "step commits, scans and change detection on BENCH_REPO",
    ),
    (
        "sessions",
        store::sessions,
        "session-log appends and folds, BENCH_SESSIONS sessions in BENCH_REPO",
    ),
    (
        "search",
        tools::search,
        "the search tool against rg on BENCH_TREE",
    ),
    (
        "edit",
        tools::edit,
        "edit_file on a 10 MB file: time and peak memory",
    ),
    (
        "accept",
        land::accept,
        "accept of a BENCH_MIB file both sides changed against git merge-file",
    ),
    (
        "sse",
        model::sse_decode,
        "SSE decoding of a 50 MB stream against std's line splitting",
    ),
    (
        "client",
        model::client_latency,
        "the HTTP client's added latency over a raw exchange",
    ),
    (
        "memory",
        memory::memory,
        "memory retrieval, writes and list at 100/1,000/10,000 entries",
    ),
    (
        "context",
        context::sixty_steps,
        "input tokens of the 60-request session, pruning and compaction on and off",
    ),
];

fn main() {
    // `cargo bench` passes `--bench`; other flags of the test harness mean nothing here.
    let names: Vec<String> = std::env::args()
        .skip(1)
        .filter(|arg| !arg.starts_with("--"))
        .collect();
    if names.is_empty() {
        // `cargo bench` or `cargo test --all-targets` with no names: most benchmarks need the data the
        // scripts build, so list them rather than fail.
        usage();
        return;
    }
    for name in &names {
        let Some((_, run, _)) = BENCHES.iter().find(|(known, _, _)| known == name) else {
            eprintln!("error: no benchmark named {name:?}");
            usage();
            std::process::exit(2);
        };
        run();
    }
}

fn usage() {
    eprintln!("usage: cargo bench --bench bench -- <name>...   (or run scripts/bench-*.sh, which set them up)");
    for (name, _, what) in BENCHES {
        eprintln!("  {name:<9} {what}");
    }
}
