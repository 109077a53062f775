//! Sessions living in the repo: log, show, diff, undo, resume, accept, discard, push and pull, each checked with
//! plain git; concurrent writers, kill -9 at every durable write, and `git gc --prune=now`.
//!
//! Contract: DESIGN.md sections 2 and 4, issue 3.

use std::fs;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;

use serde_json::json;

use crate::common::{
    agent_commits, call, fsck, run, session_id, trailer, user_state, Output, Reply, Server,
    TestRepo,
};

/// Runs a command that needs no model (log, show, ...) in `repo`.
fn agent(repo: &TestRepo, args: &[&str]) -> Output {
    let server = Server::start(vec![]);
    repo.run_agent(&server, args)
}

/// The note on `rev` in refs/notes/agent.
fn note(repo: &TestRepo, rev: &str) -> String {
    repo.git(&["log", "-1", "--notes=agent", "--format=%N", rev])
}

fn checkout_file(repo: &TestRepo, id: &str, path: &str) -> Option<String> {
    fs::read_to_string(repo.path().join(".git/agent/worktrees").join(id).join(path)).ok()
}

#[test]
fn round_trip_through_every_session_command() {
    let repo = TestRepo::new();
    repo.write("wip.md", "my own work in progress\n");
    let before = user_state(&repo);
    let add = call("write_file", json!({"path": "a.txt", "content": "alpha\n"}));
    let edit = call(
        "edit_file",
        json!({"path": "file.txt", "old_string": "two", "new_string": "TWO"}),
    );
    let server = Server::start(vec![
        Reply::text_and_tool_calls("I will add a.txt first.", vec![add]),
        Reply::text_and_tool_calls("Now shout two.", vec![edit]),
        Reply::text("Added a.txt and shouted two."),
    ]);
    repo.run_agent(&server, &["ask", "add alpha\nsecond line"])
        .assert_code(0);
    let id = session_id(&repo);
    assert_eq!(user_state(&repo), before, "ask");
    let commits = agent_commits(&repo, &id);
    assert_eq!(commits.len(), 3, "step 0 plus two steps: {commits:?}");

    // The log ref and the notes, read with plain git.
    let refs = repo.git(&["for-each-ref", "--format=%(refname)", "refs/agent/"]);
    assert_eq!(refs, format!("refs/agent/sessions/{id}\n"));
    let meta = repo.git(&["show", &format!("refs/agent/sessions/{id}:meta.json")]);
    let meta: serde_json::Value = serde_json::from_str(&meta).expect("meta.json is JSON");
    assert_eq!(meta["status"], "done");
    assert_eq!(meta["steps"], 2);
    assert_eq!(meta["prompt"], "add alpha\nsecond line");
    let first_note = note(&repo, &commits[1]);
    assert!(first_note.contains("write_file"), "{first_note}");
    assert!(
        first_note.contains("I will add a.txt first."),
        "{first_note}"
    );
    assert!(note(&repo, &commits[2]).contains("Now shout two."));
    assert_eq!(
        note(&repo, &commits[0]).trim(),
        "",
        "step 0 is the user's, no note"
    );

    // log: one line, summary only.
    let log = agent(&repo, &["log"]);
    log.assert_code(0);
    let line = log.stdout().trim();
    assert!(line.starts_with(&id), "{line}");
    assert!(line.contains("done") && line.contains("2 steps"), "{line}");
    assert!(
        line.ends_with("add alpha"),
        "first prompt line only: {line}"
    );

    // show by prefix.
    let show = agent(&repo, &["show", &id[..3]]);
    show.assert_code(0);
    for needle in [
        "> add alpha",
        "> second line",
        "● write a.txt",
        "step 1:",
        "step 2:",
        "Added a.txt",
    ] {
        assert!(show.stdout().contains(needle), "{needle} missing:\n{show}");
    }

    // diff: the agent's change only; --all includes the captured work in progress.
    let diff = agent(&repo, &["diff"]);
    diff.assert_code(0);
    assert!(
        diff.stdout().contains("+alpha") && diff.stdout().contains("+TWO"),
        "{diff}"
    );
    assert!(!diff.stdout().contains("work in progress"), "{diff}");
    assert!(!diff.stdout().contains("\x1b["), "no colour off a TTY");
    assert!(agent(&repo, &["diff", "--all", &id])
        .stdout()
        .contains("+my own work in progress"));
    assert_eq!(user_state(&repo), before, "log, show, diff");

    // undo: the branch moves back, the checkout follows, the undo is logged, step 0 is protected.
    let undo = agent(&repo, &["undo"]);
    undo.assert_code(0);
    assert!(
        undo.stderr().contains("git update-ref"),
        "redo hint: {undo}"
    );
    assert_eq!(
        repo.git(&["rev-parse", &format!("agent/{id}")]).trim(),
        commits[1]
    );
    assert_eq!(
        checkout_file(&repo, &id, "file.txt").as_deref(),
        Some("one\ntwo\nthree\n")
    );
    assert_eq!(
        checkout_file(&repo, &id, "a.txt").as_deref(),
        Some("alpha\n")
    );
    let refused = agent(&repo, &["undo", "-n", "2", &id]);
    refused.assert_code(1);
    assert!(
        refused
            .first_stderr_line()
            .starts_with("error: cannot undo 2 steps"),
        "{refused}"
    );
    assert!(agent(&repo, &["show"]).stdout().contains("undo 1 step"));
    assert_eq!(user_state(&repo), before, "undo");

    // resume: the conversation comes back, the branch continues from the undone tip.
    let add_b = call("write_file", json!({"path": "b.txt", "content": "beta\n"}));
    let server = Server::start(vec![
        Reply::tool_calls(vec![add_b]),
        Reply::text("Added b.txt too."),
    ]);
    repo.run_agent(&server, &["ask", "--resume", &id[..4], "also add beta"])
        .assert_code(0);
    let sent = &server.requests()[0];
    assert!(sent.raw_body.contains("add alpha"), "history is sent again");
    assert!(sent.raw_body.contains("also add beta"));
    assert!(sent.raw_body.contains("I will add a.txt first."));
    let tip = repo.git(&["rev-parse", &format!("agent/{id}")]);
    assert_eq!(trailer(&repo, tip.trim(), "Agent-Step"), "2");
    assert_eq!(
        repo.git(&["rev-parse", &format!("agent/{id}~1")]).trim(),
        commits[1]
    );
    assert_eq!(session_id(&repo), id, "no new session");
    assert!(agent(&repo, &["log"]).stdout().contains("2 steps"));
    assert_eq!(user_state(&repo), before, "resume");

    // accept: the change lands in the work tree, index and HEAD untouched; captured work stays.
    let index = repo.git(&["ls-files", "-s"]);
    let head = repo.git(&["rev-parse", "HEAD"]);
    agent(&repo, &["accept"]).assert_code(0);
    assert_eq!(
        fs::read_to_string(repo.path().join("a.txt")).unwrap(),
        "alpha\n"
    );
    assert_eq!(
        fs::read_to_string(repo.path().join("b.txt")).unwrap(),
        "beta\n"
    );
    assert_eq!(
        fs::read_to_string(repo.path().join("file.txt")).unwrap(),
        "one\ntwo\nthree\n"
    );
    assert_eq!(
        fs::read_to_string(repo.path().join("wip.md")).unwrap(),
        "my own work in progress\n"
    );
    assert_eq!(repo.git(&["ls-files", "-s"]), index);
    assert_eq!(repo.git(&["rev-parse", "HEAD"]), head);

    // accept --commit: a commit on main, through the user's hooks, with the session trailer.
    fs::remove_file(repo.path().join("a.txt")).unwrap();
    fs::remove_file(repo.path().join("b.txt")).unwrap();
    let hook = repo.path().join(".git/hooks/commit-msg");
    fs::write(
        &hook,
        "#!/bin/sh\necho ran > \"$(git rev-parse --git-dir)/hook-ran\"\n",
    )
    .unwrap();
    fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    agent(&repo, &["accept", "--commit", &id]).assert_code(0);
    assert!(
        repo.path().join(".git/hook-ran").exists(),
        "the user's hook ran"
    );
    assert_eq!(trailer(&repo, "HEAD", "Agent-Session"), id);
    assert_eq!(repo.git(&["log", "-1", "--format=%s"]).trim(), "add alpha");
    assert_eq!(
        repo.git(&["show", "--name-only", "--format=", "HEAD"]),
        "a.txt\nb.txt\n"
    );
    assert_eq!(
        repo.git(&["status", "--porcelain"]),
        "?? wip.md\n",
        "the user's work in progress is neither committed nor lost"
    );

    // discard: checkout and branch go, the log stays; --purge removes the log too.
    let state = user_state(&repo);
    agent(&repo, &["discard", &id]).assert_code(0);
    assert_eq!(repo.git(&["for-each-ref", "refs/heads/agent/"]), "");
    assert!(!repo.path().join(".git/agent/worktrees").join(&id).exists());
    assert!(agent(&repo, &["log"]).stdout().contains("discarded"));
    agent(&repo, &["show", &id]).assert_code(0);
    assert_eq!(user_state(&repo), state, "discard");
    agent(&repo, &["discard", "--purge", &id]).assert_code(0);
    assert_eq!(repo.git(&["for-each-ref", "refs/agent/"]), "");
    fsck(&repo);
}

#[test]
fn accept_never_overwrites_the_users_edits() {
    let repo = TestRepo::new();
    repo.write("file.txt", "1\n2\n3\n4\n5\n6\n7\n8\n9\n");
    repo.commit_all("nine lines");
    let edit = |old: &str, new: &str| {
        call(
            "edit_file",
            json!({"path": "file.txt", "old_string": old, "new_string": new}),
        )
    };
    let server = Server::start(vec![
        Reply::tool_calls(vec![edit("2\n", "two\n")]),
        Reply::text("done"),
    ]);
    repo.run_agent(&server, &["ask", "spell out two"])
        .assert_code(0);

    // The user changes another line since: merged cleanly.
    repo.write("file.txt", "1\n2\n3\n4\n5\n6\n7\n8\nnine\n");
    agent(&repo, &["accept"]).assert_code(0);
    assert_eq!(
        fs::read_to_string(repo.path().join("file.txt")).unwrap(),
        "1\ntwo\n3\n4\n5\n6\n7\n8\nnine\n"
    );

    // The user changes the same line: refused with --no-conflicts (nothing written), markers without.
    repo.write("file.txt", "1\nTWO\n3\n4\n5\n6\n7\n8\n9\n");
    let before = user_state(&repo);
    let out = agent(&repo, &["accept", "--no-conflicts"]);
    out.assert_code(1);
    assert!(out.stderr().contains("conflict  file.txt"), "{out}");
    let lines: Vec<&str> = out.stderr().lines().collect();
    assert!(
        lines[lines.len() - 2].starts_with("error: 1 file changed by you and by session")
            && lines[lines.len() - 1].starts_with("hint: run `git agent accept "),
        "{out}"
    );
    assert_eq!(user_state(&repo), before);
    let out = agent(&repo, &["accept", "--commit"]);
    out.assert_code(1);
    assert_eq!(user_state(&repo), before);
    let out = agent(&repo, &["accept"]);
    out.assert_code(1);
    assert!(out.stderr().contains("CONFLICT  file.txt"), "{out}");
    let merged = fs::read_to_string(repo.path().join("file.txt")).unwrap();
    assert!(
        merged.contains("<<<<<<< yours\nTWO\n") && merged.contains("two\n>>>>>>> agent/"),
        "{merged}"
    );
}

#[test]
fn ambiguous_and_unknown_prefixes_are_explained() {
    let repo = TestRepo::new();
    for _ in 0..2 {
        let server = Server::start(vec![Reply::text("hi")]);
        repo.run_agent(&server, &["ask", "say hi"]).assert_code(0);
    }
    let out = agent(&repo, &["show", "zz"]);
    out.assert_code(1);
    assert!(
        out.first_stderr_line()
            .starts_with("error: no session \"zz\""),
        "{out}"
    );
    let ids: Vec<String> = agent(&repo, &["log"])
        .stdout()
        .lines()
        .map(|l| l[..6].to_string())
        .collect();
    assert_eq!(ids.len(), 2);
    if ids[0][..1] == ids[1][..1] {
        let out = agent(&repo, &["show", &ids[0][..1]]);
        out.assert_code(1);
        assert!(out.stderr().contains("ambiguous"), "{out}");
    }
    // The newest is the default.
    assert!(agent(&repo, &["show"])
        .stdout()
        .starts_with(&format!("session {}", ids[0])));
}

#[test]
fn eight_concurrent_sessions_keep_every_note() {
    let repo = TestRepo::new();
    let servers: Vec<Server> = (0..8)
        .map(|i| {
            let path = format!("f{i}.txt");
            Server::start(vec![
                Reply::text_and_tool_calls(
                    &format!("writing {path}"),
                    vec![call("write_file", json!({"path": path, "content": "x\n"}))],
                ),
                Reply::text_and_tool_calls(
                    &format!("editing {path}"),
                    vec![call(
                        "edit_file",
                        json!({"path": path, "old_string": "x", "new_string": "y"}),
                    )],
                ),
                Reply::text("done"),
            ])
        })
        .collect();
    let children: Vec<_> = servers
        .iter()
        .enumerate()
        .map(|(i, server)| {
            let mut cmd = repo.agent(server, &["ask", &format!("session {i}")]);
            cmd.stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped());
            cmd.spawn().expect("spawn git-agent")
        })
        .collect();
    for child in children {
        let out = child.wait_with_output().expect("wait");
        assert!(
            out.status.success(),
            "{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let branches = crate::common::agent_branches(&repo);
    assert_eq!(branches.len(), 8);
    let sessions = repo.git(&[
        "for-each-ref",
        "--format=%(refname)",
        "refs/agent/sessions/",
    ]);
    assert_eq!(sessions.lines().count(), 8);
    let notes = repo.git(&["notes", "--ref=agent", "list"]);
    assert_eq!(notes.lines().count(), 16, "two notes per session:\n{notes}");
    for id in &branches {
        let commits = agent_commits(&repo, id);
        assert_eq!(commits.len(), 2);
        for commit in &commits {
            assert!(note(&repo, commit).contains("why: "), "{id} {commit}");
        }
    }
    let log = agent(&repo, &["log"]);
    assert_eq!(log.stdout().matches("done").count(), 8, "{log}");
    fsck(&repo);
}

/// Every `kill -9` point of a scripted session: the repo stays consistent and `--resume` finishes the job.
#[test]
fn kill_minus_9_at_every_durable_write_then_resume() {
    let repo = TestRepo::new();
    let script = || {
        vec![
            Reply::text_and_tool_calls(
                "first a",
                vec![call(
                    "write_file",
                    json!({"path": "a.txt", "content": "a\n"}),
                )],
            ),
            Reply::tool_calls(vec![call(
                "write_file",
                json!({"path": "b.txt", "content": "b\n"}),
            )]),
            Reply::tool_calls(vec![call(
                "edit_file",
                json!({"path": "a.txt", "old_string": "a", "new_string": "A"}),
            )]),
            Reply::text("all done"),
        ]
    };
    let before = user_state(&repo);
    let mut points = 0;
    for at in 1.. {
        let server = Server::start(script());
        let mut cmd = repo.agent(&server, &["ask", &format!("crash at {at}")]);
        cmd.env("GIT_AGENT_CRASH_AT", at.to_string());
        let out = run(&mut cmd);
        if out.status.signal().is_none() {
            out.assert_code(0);
            break;
        }
        assert_eq!(out.status.signal(), Some(9), "{out}");
        points += 1;
        fsck(&repo);
        assert_eq!(user_state(&repo), before, "crash point {at}");
        let locks = repo.git(&["for-each-ref", "--format=%(refname)"]);
        assert!(!locks.contains(".lock"));
        agent(&repo, &["log"]).assert_code(0);
        // The session the crash left: resume it unless it died before its log existed.
        let logged = repo.git(&[
            "for-each-ref",
            "--format=%(refname)",
            "refs/agent/sessions/",
        ]);
        let newest: Vec<String> = crate::common::agent_branches(&repo)
            .into_iter()
            .filter(|id| logged.contains(&format!("/{id}\n")))
            .filter(|id| {
                agent(&repo, &["show", id])
                    .stdout()
                    .contains(&format!("> crash at {at}\n"))
            })
            .collect();
        if newest.is_empty() {
            continue;
        }
        let id = &newest[0];
        let resume = Server::start(vec![Reply::text("resumed and finished")]);
        let out = repo.run_agent(&resume, &["ask", "--resume", id, "finish"]);
        out.assert_code(0);
        assert!(out.stdout().contains("resumed and finished"));
        // Every call in the history has a result, synthetic or real, or the provider would refuse it.
        let sent = &resume.requests()[0];
        let calls: usize = sent
            .messages()
            .iter()
            .filter_map(|m| m["tool_calls"].as_array())
            .map(Vec::len)
            .sum();
        assert_eq!(sent.tool_results().len(), calls, "crash point {at}");
        let show = agent(&repo, &["show", id]);
        assert!(show.stdout().contains("-- done"), "{show}");
    }
    assert!(points >= 50, "only {points} crash points");
    fsck(&repo);
}

/// Step 0 goes into the session's log at the end of its first turn; until then, and after a crash before
/// it, the log's readers find it on the branch: `diff` shows only the agent's change while the first turn
/// runs and after a `kill -9` in it, and a resumed session keeps the user's work out of its own.
#[test]
fn step_0_is_known_during_the_first_turn_and_after_a_crash_in_it() {
    let repo = TestRepo::new();
    repo.write("wip.md", "my own work in progress\n");
    let before = user_state(&repo);
    let gate = crate::common::Gate::new();
    let server = Server::start(vec![
        Reply::tool_calls(vec![call(
            "write_file",
            json!({"path": "a.txt", "content": "alpha\n"}),
        )]),
        Reply::text("never sent").held(&gate),
    ]);
    let mut session = repo
        .agent(&server, &["ask", "add a.txt"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start the agent");
    assert!(
        wait_until(60, || server.requests().len() == 2),
        "the second request never came"
    );
    let id = session_id(&repo);
    let agents_change_only = |when: &str| {
        let diff = agent(&repo, &["diff", &id]);
        diff.assert_code(0);
        assert!(diff.stdout().contains("+alpha"), "{when}: {diff}");
        assert!(
            !diff.stdout().contains("work in progress"),
            "{when}: {diff}"
        );
    };
    agents_change_only("while the first turn runs");
    session.kill().expect("kill -9 the session");
    let _ = session.wait();
    gate.open();
    agents_change_only("after a kill -9 in the first turn");

    let resume = Server::start(vec![Reply::text("resumed and finished")]);
    repo.run_agent(&resume, &["ask", "--resume", &id, "finish"])
        .assert_code(0);
    agents_change_only("resumed");
    assert!(agent(&repo, &["diff", "--all", &id])
        .stdout()
        .contains("+my own work in progress"));
    assert_eq!(user_state(&repo), before);
    fsck(&repo);
}

/// Issue 16: `kill -9` at every crash point of a session that takes a pooled checkout (set aside, moved, reset
/// to the new base), then `--resume`: the resumed session's checkout holds exactly its own base, never the
/// discarded session's files, and the repository stays consistent.
#[test]
fn kill_minus_9_while_taking_a_pooled_checkout_then_resume() {
    let mut points = 0;
    for at in 1.. {
        let repo = TestRepo::new();
        let server = Server::start(vec![
            Reply::tool_calls(vec![call(
                "write_file",
                json!({"path": "left.txt", "content": "from the discarded session\n"}),
            )]),
            Reply::text("done"),
        ]);
        repo.run_agent(&server, &["ask", "first"]).assert_code(0);
        let first = session_id(&repo);
        agent(&repo, &["discard", &first]).assert_code(0);
        let pool = repo.path().join(".git/agent/pool");
        assert_eq!(fs::read_dir(&pool).map(|d| d.count()).ok(), Some(1));
        let before = user_state(&repo);

        let server = Server::start(vec![
            Reply::tool_calls(vec![call("read_file", json!({"path": "file.txt"}))]),
            Reply::text("done"),
        ]);
        let mut cmd = repo.agent(&server, &["ask", "second"]);
        cmd.env("GIT_AGENT_CRASH_AT", at.to_string());
        let out = run(&mut cmd);
        let finished = out.status.signal().is_none();
        if finished {
            out.assert_code(0);
        } else {
            assert_eq!(out.status.signal(), Some(9), "{out}");
            points += 1;
            fsck(&repo);
            assert_eq!(user_state(&repo), before, "crash point {at}");
        }
        let logged = repo.git(&[
            "for-each-ref",
            "--format=%(refname)",
            "refs/agent/sessions/",
        ]);
        let Some(id) = crate::common::agent_branches(&repo)
            .into_iter()
            .find(|id| logged.contains(&format!("/{id}\n")))
        else {
            continue;
        };
        if !finished {
            let resume = Server::start(vec![Reply::text("resumed")]);
            repo.run_agent(&resume, &["ask", "--resume", &id, "finish"])
                .assert_code(0);
        }
        let checkout = repo.path().join(".git/agent/worktrees").join(&id);
        assert!(
            !checkout.join("left.txt").exists(),
            "crash point {at}: the checkout holds the discarded session's file"
        );
        let git = |args: &[&str]| {
            let out = std::process::Command::new("git")
                .arg("-C")
                .arg(&checkout)
                .args(args)
                .output()
                .unwrap();
            assert!(out.status.success(), "git {args:?}: {out:?}");
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        assert_eq!(
            git(&["status", "--porcelain", "--ignored"]),
            "",
            "crash point {at}"
        );
        assert_eq!(git(&["diff", "main", "--stat"]), "", "crash point {at}");
        fsck(&repo);
        if finished {
            break;
        }
    }
    assert!(points >= 10, "only {points} crash points");
}

#[test]
fn gc_prune_now_keeps_sessions_branches_and_notes() {
    let repo = TestRepo::new();
    repo.write("wip.txt", "captured\n");
    let server = Server::start(vec![
        Reply::text_and_tool_calls(
            "adding",
            vec![call(
                "write_file",
                json!({"path": "n.txt", "content": "n\n"}),
            )],
        ),
        Reply::text("done"),
    ]);
    repo.run_agent(&server, &["ask", "add n"]).assert_code(0);
    let id = session_id(&repo);
    let show = agent(&repo, &["show", &id]).stdout;
    let commits = agent_commits(&repo, &id);
    repo.git(&["gc", "--prune=now", "--quiet"]);
    for commit in &commits {
        repo.git(&["cat-file", "-e", commit]);
    }
    assert!(note(&repo, &commits[1]).contains("adding"));
    assert_eq!(agent(&repo, &["show", &id]).stdout, show);
    fsck(&repo);
}

#[test]
fn push_to_a_bare_repo_and_pull_into_a_fresh_clone() {
    let repo = TestRepo::new();
    let bare = repo.root().join("remote.git");
    repo.git(&["init", "-q", "--bare", bare.to_str().unwrap()]);
    repo.git(&["remote", "add", "origin", bare.to_str().unwrap()]);
    repo.git(&["push", "-q", "origin", "main"]);
    let server = Server::start(vec![
        Reply::text_and_tool_calls(
            "adding",
            vec![call(
                "write_file",
                json!({"path": "p.txt", "content": "p\n"}),
            )],
        ),
        Reply::text("done"),
    ]);
    repo.run_agent(&server, &["ask", "add p"]).assert_code(0);
    let id = session_id(&repo);
    agent(&repo, &["push"]).assert_code(0);

    let clone = repo.root().join("clone");
    repo.git(&[
        "clone",
        "-q",
        bare.to_str().unwrap(),
        clone.to_str().unwrap(),
    ]);
    let in_clone = |args: &[&str]| {
        let server = Server::start(vec![]);
        let mut cmd = repo.agent(&server, args);
        cmd.current_dir(&clone);
        run(&mut cmd)
    };
    in_clone(&["pull"]).assert_code(0);
    assert_eq!(in_clone(&["log"]).stdout, agent(&repo, &["log"]).stdout);
    assert_eq!(
        in_clone(&["show", &id]).stdout,
        agent(&repo, &["show", &id]).stdout
    );
    assert!(in_clone(&["diff", &id]).stdout.contains("+p"));
    let step = agent_commits(&repo, &id)[0].clone();
    let notes = |dir: &Path| {
        let out = std::process::Command::new("git")
            .args(["log", "-1", "--notes=agent", "--format=%N", &step])
            .current_dir(dir)
            .output()
            .expect("git log");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert!(notes(&clone).contains("adding"));
    assert_eq!(notes(&clone), notes(repo.path()));

    // A note written on each side for the same commit: pull merges them, push then succeeds.
    std::process::Command::new("git")
        .args([
            "notes",
            "--ref=agent",
            "append",
            "-m",
            "from the clone",
            &step,
        ])
        .current_dir(&clone)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .status()
        .expect("git notes");
    in_clone(&["push"]).assert_code(0);
    agent(&repo, &["pull"]).assert_code(0);
    let merged = note(&repo, &step);
    assert!(
        merged.contains("adding") && merged.contains("from the clone"),
        "{merged}"
    );
}

#[test]
fn push_refuses_a_key_value_in_a_session() {
    let repo = TestRepo::new();
    let bare = repo.root().join("remote.git");
    repo.git(&["init", "-q", "--bare", bare.to_str().unwrap()]);
    repo.git(&["remote", "add", "origin", bare.to_str().unwrap()]);
    let server = Server::start(vec![
        Reply::tool_calls(vec![call(
            "write_file",
            json!({"path": "x.txt", "content": "x\n"}),
        )]),
        Reply::text("done"),
    ]);
    repo.run_agent(&server, &["ask", "write x"]).assert_code(0);
    let id = session_id(&repo);
    // git-agent redacts what it writes; plain git does not: a note with the key, added by hand.
    let step = agent_commits(&repo, &id)[0].clone();
    let leak = format!("key={}", crate::common::API_KEY);
    repo.git(&["notes", "--ref=agent", "append", "-m", &leak, &step]);
    let out = agent(&repo, &["push"]);
    out.assert_code(1);
    assert!(
        out.first_stderr_line()
            .starts_with("error: refusing to push"),
        "{out}"
    );
    assert!(
        out.stderr()
            .lines()
            .nth(1)
            .unwrap_or_default()
            .starts_with("hint: find it with `git log --all --find-object="),
        "{out}"
    );
    assert!(!out.stderr().contains(crate::common::API_KEY));
    assert_eq!(repo.git(&["ls-remote", bare.to_str().unwrap()]), "");
}

/// A transcript is read later, maybe from someone else's push: `show` neutralises what the model and its
/// tools wrote exactly as the live `ask` output does (OSC 52 clipboard writes, screen clears, bidi overrides).
#[test]
fn show_neutralises_escape_sequences_in_a_transcript() {
    const OSC52: &str = "\u{1b}]52;c;cm0gLXJmIH4=\u{7}";
    const CLEAR: &str = "\u{1b}[2J";
    const BIDI: &str = "\u{202e}";
    let repo = TestRepo::new();
    let evil = format!("evil{OSC52}{BIDI}.txt");
    let server = Server::start(vec![
        Reply::text_and_tool_calls(
            &format!("Writing{CLEAR} a file{OSC52}."),
            vec![
                // The path (a tool-call argument) shows in the call line and in the step's file list.
                call("write_file", json!({"path": evil, "content": "x\n"})),
                // The command shows in the call line; the tool's error names the missing path.
                call("run", json!({"command": format!("echo '{CLEAR}'")})),
                call(
                    "read_file",
                    json!({"path": format!("gone{CLEAR}{BIDI}.txt")}),
                ),
            ],
        ),
        Reply::text(&format!("Done{BIDI}, all{CLEAR} clear{OSC52}.")),
    ]);
    let live = repo.run_agent(&server, &["ask", &format!("write{BIDI} it")]);
    live.assert_code(0);
    let id = session_id(&repo);
    // The step really holds the file whose name carries the sequences (so the step line has them to show).
    assert!(repo
        .git(&["ls-tree", "-r", "-z", "--name-only", &format!("agent/{id}")])
        .contains(&evil));

    let show = agent(&repo, &["show", &id]);
    show.assert_code(0);
    let text = show.stdout();
    for raw in ['\u{1b}', '\u{7}', '\u{202e}'] {
        assert!(
            !text.contains(raw),
            "{raw:?} reached the terminal:\n{text:?}"
        );
        assert!(
            !live.stderr().contains(raw),
            "{raw:?} live:\n{:?}",
            live.stderr()
        );
    }
    let neutral = |s: &str| s.replace(['\u{1b}', '\u{7}', '\u{202e}'], "\u{fffd}");
    for needle in [
        format!("> write{BIDI} it"),
        format!("Writing{CLEAR} a file{OSC52}."),
        format!("● write {evil}"),
        format!("● run echo '{CLEAR}'"),
        format!("  ⎿ error: 'gone{CLEAR}{BIDI}.txt' does not exist"),
        "  ⎿ step 1: ".to_string(),
        format!("({evil})"),
        format!("Done{BIDI}, all{CLEAR} clear{OSC52}."),
    ] {
        let needle = neutral(&needle);
        assert!(text.contains(&needle), "{needle:?} missing:\n{text}");
    }
    // One renderer: the tool lines read the same live and in the transcript.
    for line in text.lines().filter(|l| l.starts_with('●')) {
        assert!(
            live.stderr().contains(line),
            "{line:?} not in\n{}",
            live.stderr()
        );
    }
}

/// Issue 17 defect 12: a storage failure says in words what failed, names the lock file in the way and what
/// to do, instead of printing gix's structures; nothing of the user's changes.
#[test]
fn a_stale_lock_is_reported_in_words() {
    let repo = TestRepo::new();
    let write = call("write_file", json!({"path": "new.txt", "content": "new\n"}));
    let server = Server::start(vec![Reply::tool_calls(vec![write]), Reply::text("done")]);
    repo.run_agent(&server, &["ask", "add a file"])
        .assert_code(0);
    let id = session_id(&repo);
    let before = user_state(&repo);
    let lock = repo.path().join(".git/packed-refs.lock");
    fs::write(&lock, "").unwrap();
    let out = agent(&repo, &["discard", &id]);
    out.assert_code(1);
    let first = out.first_stderr_line();
    assert!(first.starts_with("error: git storage error: "), "{out}");
    assert!(
        first.contains(&format!("{} exists", lock.display())),
        "{out}"
    );
    assert!(
        out.stderr().contains(&format!(
            "hint: if no git or git-agent process is running in this repository, remove {}",
            lock.display()
        )),
        "{out}"
    );
    for debug in ["Message {", "values:", "Bytes("] {
        assert!(!out.stderr().contains(debug), "{out}");
    }
    assert_eq!(user_state(&repo), before);
    // After removing the lock as told, the same command works.
    fs::remove_file(&lock).unwrap();
    agent(&repo, &["discard", &id]).assert_code(0);
    assert_eq!(user_state(&repo), before);
    fsck(&repo);
}

/// Processes whose command line is exactly `argv` (e.g. `sleep 3071`), found in /proc.
fn processes(argv: &[&str]) -> Vec<i32> {
    let want: Vec<u8> = argv.iter().flat_map(|a| a.bytes().chain([0])).collect();
    fs::read_dir("/proc")
        .expect("/proc is readable")
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == want))
        .collect()
}

/// Waits up to `secs` for `done`.
fn wait_until(secs: u64, mut done: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while std::time::Instant::now() < deadline {
        if done() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
    done()
}

/// Starts `ask` with `server` (see [`nap()`]); returns the running agent, the session id and the checkout
/// once the command has recorded its TMPDIR.
fn agent_asleep(
    repo: &TestRepo,
    server: &Server,
) -> (std::process::Child, String, std::path::PathBuf) {
    let mut cmd = repo.agent(server, &["ask", "take a nap"]);
    let child = cmd
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn git-agent");
    let mut id = String::new();
    assert!(
        wait_until(20, || {
            id = crate::common::agent_branches(repo)
                .pop()
                .unwrap_or_default();
            !id.is_empty()
                && repo
                    .path()
                    .join(".git/agent/worktrees")
                    .join(&id)
                    .join("tmp.txt")
                    .exists()
        }),
        "the command never started"
    );
    let checkout = repo.path().join(".git/agent/worktrees").join(&id);
    (child, id, checkout)
}

/// A model whose one tool call records the command's TMPDIR and its mode in the checkout, then sleeps `secs`.
fn nap(secs: &str) -> Server {
    let sleep = call(
        "run",
        json!({"command": format!("echo \"$TMPDIR\" > tmp.txt; stat -c %a \"$TMPDIR\" >> tmp.txt; sleep {secs}; echo woke")}),
    );
    Server::start(vec![Reply::tool_calls(vec![sleep]), Reply::text("done")])
}

/// Issue 17 defect 7: SIGTERM and SIGHUP end the session as SIGINT does: the running command and everything
/// it started are killed, the log says the session was terminated, the exit code is 128 + the signal, and
/// the session's private temp dir (mode 0700, a random name) is gone.
#[test]
fn sigterm_and_sighup_kill_the_running_command_and_say_terminated() {
    for (signal, name, code) in [
        (libc::SIGTERM, "SIGTERM", 143),
        (libc::SIGHUP, "SIGHUP", 129),
    ] {
        let repo = TestRepo::new();
        let before = user_state(&repo);
        let secs = if signal == libc::SIGTERM {
            "3071"
        } else {
            "3072"
        };
        let server = nap(secs);
        let (mut child, id, checkout) = agent_asleep(&repo, &server);
        assert!(
            wait_until(10, || !processes(&["sleep", secs]).is_empty()),
            "sleep {secs} never ran"
        );
        let tmp = fs::read_to_string(checkout.join("tmp.txt")).unwrap();
        let mut lines = tmp.lines();
        let tmpdir = std::path::PathBuf::from(lines.next().unwrap());
        assert_eq!(lines.next(), Some("700"), "{tmp}");
        let dir_name = tmpdir.file_name().unwrap().to_str().unwrap().to_owned();
        assert!(
            dir_name.starts_with(&format!("git-agent-{id}-"))
                && dir_name.len() == format!("git-agent-{id}-").len() + 6,
            "{dir_name}"
        );
        // SAFETY: signalling the child we started.
        unsafe { libc::kill(child.id() as i32, signal) };
        let status = child.wait().unwrap();
        let mut stderr = String::new();
        std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
        assert_eq!(status.code(), Some(code), "{name}: {status}\n{stderr}");
        assert!(
            stderr.contains(&format!("terminated by {name}")),
            "{stderr}"
        );
        assert!(
            processes(&["sleep", secs]).is_empty(),
            "{name} left the command running"
        );
        let meta = repo.git(&["show", &format!("refs/agent/sessions/{id}:meta.json")]);
        let meta: serde_json::Value = serde_json::from_str(&meta).unwrap();
        assert_eq!(meta["status"], "terminated", "{meta}");
        assert!(!tmpdir.exists(), "the temp dir outlived the session");
        assert_eq!(user_state(&repo), before);
        fsck(&repo);
    }
}

/// Issue 17 defect 7: killed with SIGKILL, the agent cannot clean up, but its command dies with it (the
/// supervisor's lifeline); the temp dir it leaves is removed by the next session.
#[test]
#[cfg_attr(
    git_agent_portable,
    ignore = "needs the Linux supervisor: without it a killed agent's commands live on"
)]
fn kill_9_takes_the_command_with_it_and_the_next_session_sweeps_the_temp_dir() {
    let repo = TestRepo::new();
    let before = user_state(&repo);
    let server = nap("3073");
    let (mut child, _id, checkout) = agent_asleep(&repo, &server);
    assert!(
        wait_until(10, || !processes(&["sleep", "3073"]).is_empty()),
        "sleep never ran"
    );
    let tmpdir = std::path::PathBuf::from(
        fs::read_to_string(checkout.join("tmp.txt"))
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    );
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        wait_until(5, || processes(&["sleep", "3073"]).is_empty()),
        "the command outlived the agent"
    );
    assert!(tmpdir.is_dir(), "a killed session leaves its temp dir");
    let next = Server::start(vec![Reply::text("hello")]);
    repo.run_agent(&next, &["ask", "hi"]).assert_code(0);
    assert!(
        !tmpdir.exists(),
        "the next session did not sweep the leftover"
    );
    assert_eq!(user_state(&repo), before);
    fsck(&repo);
}

/// A command's sandbox helpers are forks of the agent and share its journal lock until they close what they
/// inherited: after a `kill -9` right as a command starts, the lock outlives the agent for a moment. Resuming
/// waits that moment out; a lock held for good is still refused as busy, with the message saying so.
#[test]
fn a_journal_lock_held_for_a_moment_is_waited_for_and_one_held_for_good_is_refused() {
    let repo = TestRepo::new();
    let server = Server::start(vec![Reply::text("first"), Reply::text("second")]);
    repo.run_agent(&server, &["ask", "one"]).assert_code(0);
    let id = session_id(&repo);
    let journal = repo.path().join(format!(".git/agent/journal/{id}.jsonl"));
    let hold = |seconds: &str| {
        let holder = std::process::Command::new("flock")
            .arg(&journal)
            .args(["sleep", seconds])
            .spawn()
            .expect("flock runs");
        std::thread::sleep(std::time::Duration::from_millis(200));
        holder
    };

    let mut moment = hold("0.6");
    let out = repo.run_agent(&server, &["ask", "--resume", &id, "two"]);
    out.assert_code(0);
    assert_eq!(out.stdout().trim(), "second", "{out}");
    moment.wait().expect("the holder ends");

    let mut for_good = hold("30");
    let out = repo.run_agent(&server, &["ask", "--resume", &id, "three"]);
    let _ = for_good.kill();
    let _ = for_good.wait();
    assert_ne!(out.code(), 0, "{out}");
    assert!(
        out.stderr()
            .contains("is in use by another git-agent process"),
        "{out}"
    );
}
