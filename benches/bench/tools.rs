//! The tools against what a developer would use by hand (scripts/bench-tools.sh): `search` against `rg` on a
//! large tree, and `edit_file` on a 10 MB file (time and peak memory). The tools run in-process, as the agent
//! runs them; rg's figure includes its process start (~1-2 ms).

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use git_agent::bench::{EditFile, Sandbox, Search, SessionState, Tool, ToolContext};
use serde_json::json;

use crate::stats::{env_number, median, ms, status_kib};

fn ctx(root: &Path) -> ToolContext {
    ToolContext {
        root: std::fs::canonicalize(root).expect("the bench tree exists"),
        run_timeout: Duration::from_secs(60),
        cancel: Arc::new(AtomicBool::new(false)),
        session: Arc::new(SessionState::new(None, Vec::new())),
        sandbox: Arc::new(Sandbox::off()),
    }
}

/// Five queries on `BENCH_TREE`, each the median of `BENCH_RUNS` runs of the tool and of `rg -n`.
pub fn search() {
    let Ok(tree) = std::env::var("BENCH_TREE") else {
        eprintln!(
            "error: BENCH_TREE is not set (scripts/bench-tools.sh builds the tree and sets it)"
        );
        std::process::exit(2);
    };
    let runs = env_number("BENCH_RUNS", 5);
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
            let out = Search.execute(&ctx, &args);
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

/// One edit, three edits in one call and a miss (the closest region) on a 10 MB file, and the memory the
/// edits took above what the process held before them.
pub fn edit() {
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
    let rss_before = status_kib("VmRSS:");
    let t = Instant::now();
    let out = EditFile.execute(
        &ctx,
        &json!({"path": "big.rs", "old_string": format!("let value_{last} = compute(input, {last});"), "new_string": "let changed = 1;"}),
    );
    let single = ms(t);
    assert!(!out.is_error, "{}", out.content);
    let t = Instant::now();
    let out = EditFile.execute(
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
    let out = EditFile.execute(
        &ctx,
        &json!({"path": "big.rs", "old_string": "let value_77 = compute(input, 78);", "new_string": "x"}),
    );
    let miss = ms(t);
    assert!(
        out.is_error && out.content.contains("most similar"),
        "{}",
        out.content
    );
    let hwm = status_kib("VmHWM:");
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
