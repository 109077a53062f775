//! Benchmarks behind `scripts/bench-tools.sh` (ignored tests, run in release): `search` against `rg` on a
//! large tree, and `edit_file` on a 10 MB file (time and peak memory). Figures are printed as `BENCH` lines.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use super::{SessionState, Tool, ToolContext};

fn ctx(root: &Path) -> ToolContext {
    ToolContext {
        root: std::fs::canonicalize(root).expect("the bench tree exists"),
        run_timeout: Duration::from_secs(60),
        cancel: Arc::new(AtomicBool::new(false)),
        session: Arc::new(SessionState::new(None, Vec::new())),
        sandbox: Arc::new(crate::safety::sandbox::Sandbox::off()),
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1000.0
}

#[test]
#[ignore]
fn bench_search() {
    let Ok(tree) = std::env::var("BENCH_TREE") else {
        eprintln!("BENCH_TREE not set");
        return;
    };
    let runs: usize = std::env::var("BENCH_RUNS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(5);
    let ctx = ctx(Path::new(&tree));
    let sink = std::env::temp_dir().join(format!("git-agent-bench-rg-{}.out", std::process::id()));
    let queries: Vec<(&str, Vec<&str>, serde_json::Value)> = vec![
        (
            "literal",
            vec!["-F", "fn main"],
            json!({"pattern": "fn main", "literal": true}),
        ),
        (
            "literal_rare",
            vec!["-F", "ZZZ_not_there_ZZZ"],
            json!({"pattern": "ZZZ_not_there_ZZZ", "literal": true}),
        ),
        (
            "regex",
            vec![r"fn \w+_test\("],
            json!({"pattern": r"fn \w+_test\("}),
        ),
        (
            "regex_class",
            vec![r"[A-Z][a-z]+Error\b"],
            json!({"pattern": r"[A-Z][a-z]+Error\b"}),
        ),
        (
            "case_insensitive",
            vec!["-i", "todo"],
            json!({"pattern": "todo", "case": "insensitive"}),
        ),
    ];
    for (name, rg_args, mut args) in queries {
        // The tool's most (2000 lines shown); every match is still found and counted.
        args["max_results"] = json!(2000);
        let mut ours = Vec::new();
        let mut summary = String::new();
        for _ in 0..runs {
            let t = Instant::now();
            let out = super::search::Search.execute(&ctx, &args);
            ours.push(ms(t));
            assert!(!out.is_error, "{}", out.content);
            summary = out.summary;
        }
        let mut theirs = Vec::new();
        for _ in 0..runs {
            let out = std::fs::File::create(&sink).expect("create the rg output file");
            let t = Instant::now();
            let status = Command::new("rg")
                .args(["-n", "--no-config"])
                .args(&rg_args)
                .current_dir(&ctx.root)
                .stdout(Stdio::from(out))
                .status()
                .expect("rg runs");
            theirs.push(ms(t));
            assert!(status.code().is_some_and(|c| c <= 1));
        }
        let rg_lines = std::fs::read_to_string(&sink).map_or(0, |s| s.lines().count());
        let (a, b) = (median(ours), median(theirs));
        println!(
            "BENCH search_{name}: ours {a:.1} ms, rg {b:.1} ms, ratio {:.2}x ({summary}; rg printed {rg_lines} lines)",
            a / b
        );
    }
    let _ = std::fs::remove_file(&sink);
}

/// VmHWM and VmRSS of this process, in KiB.
fn memory() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    (field("VmHWM:"), field("VmRSS:"))
}

#[test]
#[ignore]
fn bench_edit_10mb() {
    let dir = std::env::temp_dir().join(format!("git-agent-bench-edit-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("make the bench dir");
    let mut text = String::with_capacity(10 << 20);
    let mut i = 0;
    while text.len() < 10 << 20 {
        text.push_str(&format!(
            "    let value_{i} = compute(input, {i}); // line {i}\n"
        ));
        i += 1;
    }
    std::fs::write(dir.join("big.rs"), &text).expect("write the 10 MB file");
    let ctx = ctx(&dir);
    let last = i - 10;
    let (_, rss_before) = memory();
    let t = Instant::now();
    let out = super::edit::EditFile.execute(
        &ctx,
        &json!({"path": "big.rs", "old_string": format!("let value_{last} = compute(input, {last});"), "new_string": "let changed = 1;"}),
    );
    let single = ms(t);
    assert!(!out.is_error, "{}", out.content);
    let t = Instant::now();
    let out = super::edit::EditFile.execute(
        &ctx,
        &json!({"path": "big.rs", "edits": [
            {"old_string": "let value_10 = ", "new_string": "let v10 = "},
            {"old_string": format!("let value_{} = ", i / 2), "new_string": "let middle = "},
            {"old_string": format!("// line {}\n", i - 1), "new_string": "// last line\n"}
        ]}),
    );
    let multi = ms(t);
    assert!(!out.is_error, "{}", out.content);
    let t = Instant::now();
    let out = super::edit::EditFile.execute(
        &ctx,
        &json!({"path": "big.rs", "old_string": "let value_77 = compute(input, 78);", "new_string": "x"}),
    );
    let miss = ms(t);
    assert!(
        out.is_error && out.content.contains("most similar"),
        "{}",
        out.content
    );
    let (hwm, _) = memory();
    println!("BENCH edit_10mb_single_ms={single:.1}");
    println!("BENCH edit_10mb_three_edits_ms={multi:.1}");
    println!("BENCH edit_10mb_no_match_closest_region_ms={miss:.1}");
    println!(
        "BENCH edit_10mb_peak_rss_mib={:.1} (process peak {:.1} MiB, {:.1} MiB before the edits)",
        (hwm.saturating_sub(rss_before)) as f64 / 1024.0,
        hwm as f64 / 1024.0,
        rss_before as f64 / 1024.0
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `true` spawned and waited for, each way in turn, 10 rounds of BENCH_RUNS/10 spawns (default 100 in all),
/// so a busy machine slows every variant alike: the bare `bash -c` spawn commands had before the supervisor,
/// then through `process::bash` with the supervisor and no namespace, with the PID namespace and private
/// `/proc`, and both under Landlock. The median per-call time of the rounds, and its ratio to the bare spawn.
#[test]
#[ignore]
fn bench_run_isolation() {
    use crate::safety::isolate::{self, Isolation};
    use crate::safety::sandbox::{Mode, Sandbox, SandboxConfig};
    let runs: usize = std::env::var("BENCH_RUNS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(100);
    let rounds = 10;
    let per_round = (runs / rounds).max(1);
    let dir = std::env::temp_dir().join(format!("git-agent-bench-run-{}", std::process::id()));
    std::fs::create_dir_all(dir.join(".git")).expect("bench dir");
    let root = std::fs::canonicalize(&dir).expect("bench dir");
    let namespace = isolate::probe().clone();
    let workspace = Sandbox::new(
        &SandboxConfig {
            mode: Mode::Workspace,
            ..SandboxConfig::default()
        },
        &root.join(".git/agent/worktrees/x"),
        &root.join(".git"),
        None,
    );
    let shared = Isolation::Shared {
        why: "benchmark".into(),
    };
    let mut variants: Vec<(&str, Option<Sandbox>)> = vec![
        ("bare_bash", None),
        (
            "supervisor_no_namespace",
            Some(Sandbox {
                isolation: shared.clone(),
                ..Sandbox::off()
            }),
        ),
    ];
    if namespace.is_namespace() {
        variants.push((
            "pid_namespace",
            Some(Sandbox {
                isolation: namespace.clone(),
                ..Sandbox::off()
            }),
        ));
    }
    if crate::safety::sandbox::landlock_abi() >= 1 {
        variants.push((
            "landlock_no_namespace",
            Some(Sandbox {
                isolation: shared,
                ..workspace.clone()
            }),
        ));
        if namespace.is_namespace() {
            variants.push(("landlock_pid_namespace", Some(workspace)));
        }
    }
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); variants.len()];
    let mut base = ctx(&dir);
    for _ in 0..rounds {
        for (i, (name, sandbox)) in variants.iter().enumerate() {
            let start = Instant::now();
            for _ in 0..per_round {
                let status = match sandbox {
                    None => std::os::unix::process::CommandExt::process_group(
                        Command::new("bash")
                            .args(["-c", "true"])
                            .stdin(Stdio::null()),
                        0,
                    )
                    .status(),
                    Some(sandbox) => {
                        base.sandbox = Arc::new(sandbox.clone());
                        let mut cmd =
                            super::process::bash(&base, "true").expect("the sandbox applies");
                        cmd.stdout(Stdio::null()).status()
                    }
                }
                .expect("bash runs");
                assert!(status.success(), "{name}: {status}");
            }
            times[i].push(ms(start) / per_round as f64);
        }
    }
    let bare = median(times[0].clone());
    for ((name, _), t) in variants.iter().zip(times) {
        let t = median(t);
        println!(
            "BENCH spawn_true_{name}_ms={t:.2} ratio_to_bare={:.2}x",
            t / bare
        );
    }
    // The whole `run` tool for scale: its wait loop polls every 20 ms, which dominates a command this short.
    let start = Instant::now();
    for _ in 0..20 {
        let out = super::shell::Run.execute(&base, &json!({"command": "true"}));
        assert!(!out.is_error, "{}", out.content);
    }
    println!("BENCH run_tool_true_ms={:.2} (20 calls)", ms(start) / 20.0);
    println!(
        "BENCH isolation_here={namespace:?} spawns_per_variant={}",
        rounds * per_round
    );
    let _ = std::fs::remove_dir_all(&dir);
}
