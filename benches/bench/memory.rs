//! Project memory (scripts/bench-memory.sh): retrieval at 100, 1,000 and 10,000 entries against reading every
//! entry blob (what the index saves) and against the time from `git agent ask` starting to its first model
//! request; the share of the context window the injected entries use; the cost of a write against a notes write
//! (the same commit + compare-and-swap machinery); and `git agent memory list` against `git ls-tree`.
//!
//! Entries are synthetic: 12 to 24 words drawn from a vocabulary of code words and 2,000 identifiers, with a
//! skewed distribution (a few words are common, most are rare), which is what BM25 sees in real memories.

use std::process::Command;
use std::time::Instant;

use git_agent::bench::{policy, rank, Entry, Kind, MemoryEdit, Source, Store};

use crate::common::{run, Reply, Server, TestRepo};
use crate::stats::{env_number, median, ms};

const WORDS: &[&str] = &[
    "parser",
    "test",
    "fixture",
    "build",
    "cargo",
    "make",
    "lint",
    "format",
    "config",
    "module",
    "error",
    "handler",
    "request",
    "response",
    "cache",
    "database",
    "migration",
    "schema",
    "query",
    "index",
    "deploy",
    "release",
    "docker",
    "image",
    "script",
    "shell",
    "command",
    "flag",
    "option",
    "default",
    "timeout",
    "retry",
    "network",
    "socket",
    "thread",
    "async",
    "runtime",
    "tokio",
    "serde",
    "json",
    "toml",
    "yaml",
    "file",
    "path",
    "directory",
    "symlink",
    "permission",
    "sandbox",
    "secret",
    "token",
    "key",
    "env",
    "variable",
    "log",
    "trace",
    "metric",
    "benchmark",
    "profile",
    "release",
    "debug",
    "feature",
    "crate",
    "dependency",
    "version",
    "api",
    "client",
    "server",
    "route",
    "endpoint",
    "auth",
    "session",
    "branch",
    "commit",
    "merge",
    "rebase",
    "hook",
    "ci",
    "pipeline",
    "job",
    "worker",
    "queue",
];

/// A small deterministic generator (the figures must not depend on a seed from the clock).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }

    /// A word: half the time a common code word, else one of 2,000 identifiers, skewed to the low ones.
    fn word(&mut self) -> String {
        if self.next().is_multiple_of(2) {
            WORDS[(self.next() as usize) % WORDS.len()].to_owned()
        } else {
            let a = self.next() % 2000;
            let b = self.next() % 2000;
            format!("ident{}", a.min(b))
        }
    }

    fn text(&mut self) -> String {
        let n = 12 + (self.next() % 13) as usize;
        (0..n).map(|_| self.word()).collect::<Vec<_>>().join(" ")
    }
}

fn entries(n: usize, rng: &mut Lcg) -> Vec<Entry> {
    (0..n)
        .map(|i| Entry {
            id: format!("{:08x}", (i as u64).wrapping_mul(2654435761) & 0xffff_ffff),
            text: rng.text(),
            tags: vec![rng.word(), rng.word()],
            kind: Kind::Fact,
            sources: vec![Source {
                session: Some("abcdef".into()),
                step: Some(1),
                why: "bench".into(),
                ..Source::default()
            }],
            created: 1_700_000_000,
            updated: 1_700_000_000 + (i as i64) * 60,
            confidence: 0.3 + (i % 7) as f64 / 10.0,
            ..Entry::default()
        })
        .collect()
}

/// Median ms of `runs` calls of `f`.
fn time(runs: usize, mut f: impl FnMut()) -> f64 {
    let samples = (0..runs)
        .map(|_| {
            let t = Instant::now();
            f();
            ms(t)
        })
        .collect();
    median(samples)
}

/// Milliseconds from starting `git agent ask` to its first model request, median of `runs`.
fn first_request_ms(repo: &TestRepo, runs: usize) -> f64 {
    let samples = (0..runs)
        .map(|_| {
            let server = Server::start(vec![Reply::text("ok")]);
            let mut cmd = repo.agent(&server, &["ask", PROMPT]);
            let t = Instant::now();
            let out = run(&mut cmd);
            assert_eq!(out.status.code(), Some(0), "{out}");
            let at = server.requests()[0].at;
            at.duration_since(t).as_secs_f64() * 1e3
        })
        .collect();
    median(samples)
}

/// A prompt of the kind sessions start with, in the entries' vocabulary.
const PROMPT: &str =
    "the parser test fails after the migration: fix the fixture for ident7 and ident42, \
                      then run cargo test and make lint";

pub fn memory() {
    let runs = env_number("BENCH_RUNS", 11);
    let window = 32_768u64;
    let settings = git_agent::bench::MemorySettings::default();
    let budget = rank::Budget {
        tokens: (window as f64 * settings.context_share) as u64,
        max_entries: settings.max_entries,
    };
    let mut rng = Lcg(42);
    for n in [100usize, 1_000, 10_000] {
        let repo = TestRepo::new();
        let store = Store::open(repo.path()).unwrap();
        let all = entries(n, &mut rng);
        let ids: Vec<String> = all.iter().map(|e| e.id.clone()).collect();
        store
            .update_memory(|_| {
                Ok(Some(MemoryEdit {
                    message: format!("bench: {n} entries"),
                    put: all.clone(),
                    remove: vec![],
                }))
            })
            .unwrap();
        let empty = TestRepo::new();
        for packed in [false, true] {
            if packed {
                repo.git(&["gc", "-q"]);
            }
            let state = if packed { "packed" } else { "loose" };
            let mut injected = 0u64;
            let mut chosen = 0usize;
            let retrieval = time(runs, || {
                let summaries = store.memory_summaries().unwrap();
                let hits = rank::retrieve(&summaries, PROMPT, 1_700_000_000, budget);
                injected = hits.iter().map(|h| h.tokens).sum();
                chosen = hits.len();
            });
            let summaries = store.memory_summaries().unwrap();
            let rank_only = time(runs, || {
                rank::retrieve(&summaries, PROMPT, 1_700_000_000, budget);
            });
            let blob_runs = if n >= 10_000 { 3 } else { runs };
            let blobs = time(blob_runs, || {
                let view = store.memory().unwrap();
                for id in &ids {
                    view.entry(id).unwrap().unwrap();
                }
            });
            println!(
                "BENCH memory_{n}_{state}_retrieval_median_ms={retrieval:.2} rank_only_ms={rank_only:.2} \
                 read_every_entry_blob_ms={blobs:.2} ratio_retrieval/blobs={:.3} injected={chosen} \
                 injected_tokens={injected} share_of_{window}_window={:.4}",
                retrieval / blobs,
                injected as f64 / window as f64
            );
        }
        let first = first_request_ms(&repo, 5.min(runs));
        let first_empty = first_request_ms(&empty, 5.min(runs));
        println!(
            "BENCH memory_{n}_ask_to_first_request_ms={first:.1} without_memory_ms={first_empty:.1} \
             added_ms={:.1}",
            first - first_empty
        );
        write_costs(&store, n, &mut rng);
        list_cost(&repo, n, runs);
    }
}

/// A proposal written the way a completed session writes it (near-duplicate scan, commit, compare-and-swap),
/// against a note written by the same machinery without the scan or the index.
fn write_costs(store: &Store, n: usize, rng: &mut Lcg) {
    let writes = env_number("BENCH_WRITES", 20);
    let head = store.head_commit().unwrap();
    let mut remember = Vec::new();
    let mut notes = Vec::new();
    for _ in 0..writes {
        let proposal = policy::Proposal::new(&rng.text(), &[], Kind::Fact, "bench").unwrap();
        let t = Instant::now();
        let written = policy::remember(store, &proposal, Source::default(), 0.5).unwrap();
        remember.push(ms(t));
        assert_eq!(written.action(), "added");
        let t = Instant::now();
        store
            .add_note(head, "a note of about the same size as an entry")
            .unwrap();
        notes.push(ms(t));
    }
    let (remember, notes) = (median(remember), median(notes));
    println!(
        "BENCH memory_{n}_write_median_ms={remember:.2} note_write_median_ms={notes:.2} \
         ratio_write/note={:.2}",
        remember / notes
    );
}

/// `git agent memory list` over all entries against `git ls-tree -r` of the same ref (names only).
fn list_cost(repo: &TestRepo, n: usize, runs: usize) {
    let server = Server::start(vec![]);
    let list = time(runs.min(5), || {
        let out = run(&mut repo.agent(&server, &["memory", "list", "--all"]));
        assert_eq!(out.status.code(), Some(0));
        assert!(out.stdout.lines().count() >= n);
    });
    let ls_tree = time(runs.min(5), || {
        let out = Command::new("git")
            .args(["ls-tree", "-r", "refs/agent/memory"])
            .current_dir(repo.path())
            .output()
            .unwrap();
        assert!(out.status.success());
    });
    println!(
        "BENCH memory_{n}_list_ms={list:.1} git_ls_tree_ms={ls_tree:.1} ratio_list/ls_tree={:.2}",
        list / ls_tree
    );
}
