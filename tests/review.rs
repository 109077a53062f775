//! `git agent review` (issue 13): hunks taken into the working tree three-way, decisions and comments in
//! `refs/notes/agent-review` (read back with plain git), the comments sent to the model on resume, the walk in
//! a real terminal (tmux), and review records travelling between clones with push and pull.

use std::fs;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::landing::{agent, assert_only, craft, session};
use crate::common::{call, fsck, run, user_state, Reply, Server, TestRepo};

const LINES: &str = "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n13\n14\n";

/// A session that edits a.txt in two places (two hunks), b.txt and c.txt.
fn three_files(repo: &TestRepo) -> String {
    repo.write("a.txt", LINES);
    repo.write("b.txt", "old_name = 1\n");
    repo.write("c.txt", "c\n");
    repo.commit_all("three files");
    let edit = |path: &str, old: &str, new: &str| {
        call(
            "edit_file",
            json!({"path": path, "old_string": old, "new_string": new}),
        )
    };
    session(
        repo,
        "rename and shout",
        vec![
            Reply::tool_calls(vec![edit("a.txt", "1\n2\n", "ONE\n2\n")]),
            Reply::tool_calls(vec![edit("a.txt", "13\n14\n", "13\nFOURTEEN\n")]),
            Reply::text_and_tool_calls(
                "Rename old_name to new_name.",
                vec![edit("b.txt", "old_name", "new_name")],
            ),
            Reply::tool_calls(vec![edit("c.txt", "c\n", "C\n")]),
            Reply::text("Done: renamed and shouted."),
        ],
    )
}

/// The review records on the session's tip, read with plain git.
fn records(repo: &TestRepo, id: &str) -> Vec<Value> {
    repo.git(&[
        "notes",
        "--ref=agent-review",
        "show",
        &format!("agent/{id}"),
    ])
    .lines()
    .map(|l| serde_json::from_str(l).expect("a JSON line"))
    .collect()
}

#[test]
fn take_and_leave_by_path_then_the_comment_reaches_the_model_on_resume() {
    let repo = TestRepo::new();
    let id = three_files(&repo);
    repo.write("mine.txt", "my own work\n");
    let before = user_state(&repo);

    let out = agent(
        &repo,
        &[
            "review",
            &id,
            "--take",
            "a.txt",
            "--leave",
            "b.txt",
            "--comment",
            "keep the old name",
        ],
    );
    out.assert_code(0);
    assert!(out.stderr().contains("updated   a.txt"), "{out}");
    assert!(
        out.stderr().contains("took 1, left 1 (1 with a comment)"),
        "{out}"
    );
    assert_eq!(
        fs::read_to_string(repo.path().join("a.txt")).unwrap(),
        LINES
            .replacen("1\n", "ONE\n", 1)
            .replace("14\n", "FOURTEEN\n")
    );
    assert_eq!(
        fs::read_to_string(repo.path().join("b.txt")).unwrap(),
        "old_name = 1\n"
    );
    assert_eq!(
        fs::read_to_string(repo.path().join("c.txt")).unwrap(),
        "c\n"
    );
    assert_only(&repo, &before, &["a.txt"], &[]);

    let recs = records(&repo, &id);
    assert_eq!(recs.len(), 2, "{recs:?}");
    assert_eq!(recs[0]["type"], "decision");
    assert_eq!(
        (recs[0]["path"].as_str(), recs[0]["decision"].as_str()),
        (Some("a.txt"), Some("take"))
    );
    assert_eq!(
        (recs[1]["path"].as_str(), recs[1]["decision"].as_str()),
        (Some("b.txt"), Some("leave"))
    );
    assert_eq!(recs[1]["comment"], "keep the old name");
    assert_eq!(recs[1]["reviewer"], "Test User <test@example.com>");
    assert!(recs[1]["text"]
        .as_str()
        .unwrap()
        .contains("-old_name = 1\n+new_name = 1"));

    // `show` has the review round.
    let show = agent(&repo, &["show", &id]);
    assert!(show.stdout().contains("review:"), "{show}");
    assert!(
        show.stdout()
            .contains("left b.txt (Test User <test@example.com>,")
            && show.stdout().contains("keep the old name"),
        "{show}"
    );

    // Resumed: the first request carries the comment and b's hunk, as one structured message.
    let server = Server::start(vec![Reply::text("Understood.")]);
    repo.run_agent(&server, &["ask", "--resume", &id, "go on"])
        .assert_code(0);
    let body = &server.requests()[0].raw_body;
    for needle in [
        r#"file=\"b.txt\""#,
        r#"hunk=\"(the whole file)\""#,
        "keep the old name",
        "-old_name = 1",
        "+new_name = 1",
    ] {
        assert!(body.contains(needle), "{needle} missing from the request");
    }
    assert!(
        !body.contains(r#"file=\"a.txt\""#),
        "taken hunks are not feedback"
    );
    // Sent once: a second resume does not repeat it, and the records say it was sent.
    let server = Server::start(vec![Reply::text("ok")]);
    repo.run_agent(&server, &["ask", "--resume", &id, "again"])
        .assert_code(0);
    let body = &server.requests()[0].raw_body;
    assert_eq!(
        body.matches("keep the old name").count(),
        1,
        "once, in the history"
    );
    let recs = records(&repo, &id);
    assert_eq!(recs.last().unwrap()["type"], "sent");
    assert_only(&repo, &before, &["a.txt"], &[]);
    fsck(&repo);
}

#[test]
fn decisions_file_takes_single_hunks_and_bad_lines_change_nothing() {
    let repo = TestRepo::new();
    let id = three_files(&repo);
    let list = agent(&repo, &["review", &id, "--list"]);
    list.assert_code(0);
    let hunks: Vec<Value> = list
        .stdout()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let a: Vec<&Value> = hunks.iter().filter(|h| h["path"] == "a.txt").collect();
    assert_eq!(a.len(), 2, "{list}");
    assert_eq!(a[0]["hunk"], "@@ -1,4 +1,4 @@");
    assert_eq!(a[1]["hunk"], "@@ -11,4 +11,4 @@");
    let before = user_state(&repo);

    let file = repo.root().join("decisions.jsonl");
    fs::write(
        &file,
        "{\"path\": \"a.txt\", \"index\": 0, \"decision\": \"take\"}\n\
         {\"path\": \"a.txt\", \"hunk\": \"@@ -99,1 +99,1 @@\", \"decision\": \"take\"}\n",
    )
    .unwrap();
    let bad = agent(
        &repo,
        &["review", &id, "--decisions", file.to_str().unwrap()],
    );
    bad.assert_code(2);
    assert!(
        bad.first_stderr_line()
            .ends_with("decisions.jsonl:2: a.txt: no hunk @@ -99,1 +99,1 @@"),
        "{bad}"
    );
    assert_eq!(user_state(&repo), before);
    assert!(repo
        .git(&["for-each-ref", "refs/notes/agent-review"])
        .is_empty());

    fs::write(
        &file,
        "{\"path\": \"a.txt\", \"index\": 0, \"decision\": \"take\"}\n\
         {\"path\": \"a.txt\", \"hunk\": \"@@ -11,4 +11,4 @@\", \"decision\": \"leave\", \"comment\": \"not fourteen\"}\n\
         {\"path\": \"c.txt\", \"decision\": \"take\"}\n",
    )
    .unwrap();
    // The user edited a.txt in the middle meanwhile: the taken hunk merges three-way.
    repo.write("a.txt", &LINES.replace("7\n", "seven\n"));
    let before = user_state(&repo);
    let out = agent(
        &repo,
        &["review", &id, "--decisions", file.to_str().unwrap()],
    );
    out.assert_code(0);
    assert!(out.stderr().contains("merged    a.txt"), "{out}");
    assert_eq!(
        fs::read_to_string(repo.path().join("a.txt")).unwrap(),
        LINES.replacen("1\n", "ONE\n", 1).replace("7\n", "seven\n")
    );
    assert_eq!(
        fs::read_to_string(repo.path().join("c.txt")).unwrap(),
        "C\n"
    );
    assert_only(&repo, &before, &["a.txt", "c.txt"], &[]);
    let recs = records(&repo, &id);
    assert_eq!(recs.len(), 3);
    assert_eq!(recs[1]["hunk"], "@@ -11,4 +11,4 @@");
    assert_eq!(recs[1]["index"], 1);
    assert_eq!(recs[1]["comment"], "not fourteen");
    assert!(recs[1]["text"].as_str().unwrap().contains("+FOURTEEN"));
    // Without a terminal and without decisions: a usage error, nothing changed.
    let none = agent(&repo, &["review", &id]);
    none.assert_code(2);
    assert!(
        none.first_stderr_line().starts_with("error: no decisions"),
        "{none}"
    );
    fsck(&repo);
}

/// A tmux session running `git agent review` in a real pseudo-terminal.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn start(repo: &TestRepo, args: &[&str], env: &[(&str, &str)]) -> Option<Tmux> {
        if !crate::common::tmux::available() {
            return None;
        }
        let server = Server::start(vec![]);
        let cmd = repo.agent(&server, args);
        let mut line = String::from("env -i");
        for (key, value) in cmd.get_envs() {
            if let (Some(k), Some(v)) = (key.to_str(), value.and_then(|v| v.to_str())) {
                line.push_str(&format!(" {k}={}", quote(v)));
            }
        }
        line.push_str(" TERM=xterm-256color");
        for (k, v) in env {
            line.push_str(&format!(" {k}={}", quote(v)));
        }
        line.push_str(&format!(" {}", quote(cmd.get_program().to_str().unwrap())));
        for arg in cmd.get_args() {
            line.push_str(&format!(" {}", quote(arg.to_str().unwrap())));
        }
        line.push_str("; echo EXIT:$?; sleep 60");
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let socket = format!("git-agent-test-{}-{n}", std::process::id());
        let status = Command::new("tmux")
            .args([
                "-L",
                &socket,
                "new-session",
                "-d",
                "-s",
                "t",
                "-x",
                "120",
                "-y",
                "40",
                "-c",
            ])
            .arg(repo.path())
            .arg(line)
            .status()
            .unwrap();
        assert!(status.success());
        Some(Tmux { socket })
    }

    fn screen(&self) -> String {
        let out = Command::new("tmux")
            .args([
                "-L",
                &self.socket,
                "capture-pane",
                "-p",
                "-S",
                "-200",
                "-t",
                "t",
            ])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Waits until `needle` shows `count` times on the screen.
    fn wait_for(&self, needle: &str, count: usize) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let screen = self.screen();
            if screen.matches(needle).count() >= count {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "no {needle:?} ({count}) on:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn send(&self, keys: &str) {
        let status = Command::new("tmux")
            .args(["-L", &self.socket, "send-keys", "-t", "t", "-l", keys])
            .status()
            .unwrap();
        assert!(status.success());
        let status = Command::new("tmux")
            .args(["-L", &self.socket, "send-keys", "-t", "t", "Enter"])
            .status()
            .unwrap();
        assert!(status.success());
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .status();
    }
}

fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

#[test]
fn interactive_review_in_a_terminal_takes_leaves_comments_and_quits() {
    let repo = TestRepo::new();
    let id = three_files(&repo);
    let before = user_state(&repo);
    let Some(tmux) = Tmux::start(&repo, &["review", &id], &[]) else {
        return;
    };
    let screen = tmux.wait_for("Take this hunk", 1);
    assert!(screen.contains("diff --git a/a.txt b/a.txt"), "{screen}");
    assert!(
        screen.contains("(1/2) Take this hunk [y,n,c,e,a,d,q,?]?"),
        "{screen}"
    );
    assert!(screen.contains("+ONE"), "{screen}");
    tmux.send("y");
    tmux.wait_for("(2/2) Take this hunk", 1);
    tmux.send("n");
    let screen = tmux.wait_for("diff --git a/b.txt", 1);
    assert!(screen.contains("+new_name = 1"), "{screen}");
    tmux.send("?");
    tmux.wait_for("c - leave this hunk with a comment", 1);
    tmux.send("c");
    tmux.wait_for("Comment:", 1);
    tmux.send("keep the old name");
    tmux.wait_for("diff --git a/c.txt", 1);
    tmux.send("q");
    let screen = tmux.wait_for("EXIT:", 1);
    assert!(screen.contains("EXIT:0"), "{screen}");
    assert!(
        screen.contains("took 1, left 2 (1 with a comment)"),
        "{screen}"
    );

    assert_eq!(
        fs::read_to_string(repo.path().join("a.txt")).unwrap(),
        LINES.replacen("1\n", "ONE\n", 1),
        "y took the first hunk, n left the second"
    );
    assert_eq!(
        fs::read_to_string(repo.path().join("b.txt")).unwrap(),
        "old_name = 1\n"
    );
    assert_eq!(
        fs::read_to_string(repo.path().join("c.txt")).unwrap(),
        "c\n",
        "q"
    );
    let recs = records(&repo, &id);
    let summary: Vec<(String, String, String)> = recs
        .iter()
        .map(|r| {
            (
                r["path"].as_str().unwrap().to_owned(),
                r["decision"].as_str().unwrap().to_owned(),
                r["comment"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("a.txt".into(), "take".into(), String::new()),
            ("a.txt".into(), "leave".into(), String::new()),
            ("b.txt".into(), "leave".into(), "keep the old name".into()),
        ]
    );
    assert_eq!(recs[1]["hunk"], "@@ -11,4 +11,4 @@");
    assert_only(&repo, &before, &["a.txt"], &[]);
    fsck(&repo);
}

#[test]
fn interactive_split_and_edit() {
    let repo = TestRepo::new();
    repo.write("a.txt", LINES);
    repo.commit_all("lines");
    let edit = |old: &str, new: &str| {
        call(
            "edit_file",
            json!({"path": "a.txt", "old_string": old, "new_string": new}),
        )
    };
    let id = session(
        &repo,
        "spell out",
        vec![
            Reply::tool_calls(vec![edit("1\n2\n", "ONE\n2\n")]),
            Reply::tool_calls(vec![edit("5\n6\n", "FIVE\n6\n")]),
            Reply::text("done"),
        ],
    );
    // The editor the `e` key opens: turns the hunk's FIVE into 5ive.
    let editor = repo.root().join("editor.sh");
    fs::write(&editor, "#!/bin/sh\nsed -i 's/^+FIVE$/+5ive/' \"$1\"\n").unwrap();
    fs::set_permissions(&editor, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let before = user_state(&repo);
    let Some(tmux) = Tmux::start(
        &repo,
        &["review", &id],
        &[("GIT_EDITOR", editor.to_str().unwrap())],
    ) else {
        return;
    };
    let screen = tmux.wait_for("(1/1) Take this hunk [y,n,c,s,e,a,d,q,?]?", 1);
    assert!(
        screen.contains("+ONE") && screen.contains("+FIVE"),
        "one hunk, two changes:\n{screen}"
    );
    tmux.send("s");
    tmux.wait_for("Split into 2 hunks.", 1);
    tmux.wait_for("(1/2) Take this hunk", 1);
    tmux.send("y");
    tmux.wait_for("(2/2) Take this hunk", 1);
    tmux.send("e");
    let screen = tmux.wait_for("EXIT:", 1);
    assert!(
        screen.contains("EXIT:0") && screen.contains("took 2, left 0"),
        "{screen}"
    );
    assert_eq!(
        fs::read_to_string(repo.path().join("a.txt")).unwrap(),
        LINES
            .replacen("1\n", "ONE\n", 1)
            .replacen("5\n", "5ive\n", 1)
    );
    let recs = records(&repo, &id);
    assert_eq!(recs.len(), 2);
    assert!(
        recs[1]["text"].as_str().unwrap().contains("+5ive"),
        "{recs:?}"
    );
    assert_only(&repo, &before, &["a.txt"], &[]);
    // The file the editor got is gone with the edit.
    let tmp = repo.path().join(".git/agent/tmp");
    let left: Vec<_> = fs::read_dir(&tmp)
        .map(|dir| dir.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(
        !left
            .iter()
            .any(|n| n.to_string_lossy().starts_with("REVIEW_HUNK")),
        "{left:?}"
    );
    fsck(&repo);
}

#[test]
fn review_records_made_in_one_clone_are_seen_in_another_after_pull() {
    let a = TestRepo::new();
    let bare = a.root().join("remote.git");
    let bare_s = bare.to_str().unwrap();
    a.git(&["init", "-q", "--bare", bare_s]);
    a.git(&["remote", "add", "origin", bare_s]);
    a.git(&["push", "-q", "origin", "main"]);
    let id = three_files(&a);
    a.git(&["push", "-q", "origin", "main"]);
    agent(
        &a,
        &["review", &id, "--leave", "b.txt", "--comment", "from A"],
    )
    .assert_code(0);
    agent(&a, &["push"]).assert_code(0);

    // Clone B: the same history (hermetic commits are identical), the session made elsewhere.
    let b = TestRepo::new();
    b.git(&["remote", "add", "origin", bare_s]);
    b.git(&["fetch", "-q", "origin"]);
    b.git(&["reset", "-q", "--hard", "origin/main"]);
    agent(&b, &["pull"]).assert_code(0);
    let recs = records(&b, &id);
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0]["comment"], "from A");
    assert!(agent(&b, &["show", &id]).stdout().contains("from A"));
    assert!(agent(&b, &["diff", &id]).stdout().contains("+new_name = 1"));
    // B reviews the session it did not make (no checkout of it here) and pushes; A pulls both records.
    let before_b = user_state(&b);
    agent(&b, &["review", &id, "--take", "c.txt"]).assert_code(0);
    assert_eq!(fs::read_to_string(b.path().join("c.txt")).unwrap(), "C\n");
    assert_only(&b, &before_b, &["c.txt"], &[]);
    // A adds another record before pulling: both sides' records survive (line union).
    agent(
        &a,
        &["review", &id, "--leave", "a.txt", "--comment", "A again"],
    )
    .assert_code(0);
    agent(&b, &["push"]).assert_code(0);
    let pull = agent(&a, &["pull"]);
    pull.assert_code(0);
    assert!(
        pull.stderr().contains("merged the review records"),
        "{pull}"
    );
    let comments: Vec<String> = records(&a, &id)
        .iter()
        .map(|r| {
            format!(
                "{} {}",
                r["path"].as_str().unwrap(),
                r["decision"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(comments, ["b.txt leave", "a.txt leave", "c.txt take"]);
    agent(&a, &["push"]).assert_code(0);
    fsck(&a);
    fsck(&b);
    let remote = run(Command::new("git")
        .args(["--git-dir", bare_s, "notes", "--ref=agent-review", "list"])
        .env("GIT_CONFIG_GLOBAL", "/dev/null"));
    assert_eq!(remote.stdout.lines().count(), 1, "{remote}");
}

#[test]
fn review_send_resumes_the_session_with_the_comments() {
    let repo = TestRepo::new();
    let id = three_files(&repo);
    let before = user_state(&repo);
    let server = Server::start(vec![Reply::text("Kept the old name.")]);
    let out = repo.run_agent(
        &server,
        &[
            "review",
            &id,
            "--leave",
            "b.txt",
            "--comment",
            "keep the old name",
            "--send",
        ],
    );
    out.assert_code(0);
    assert_eq!(out.stdout().trim(), "Kept the old name.", "{out}");
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let body = &requests[0].raw_body;
    assert!(body.contains("keep the old name") && body.contains(r#"file=\"b.txt\""#));
    assert!(body.contains("Revise your change as the review comments ask."));
    assert_eq!(user_state(&repo), before, "nothing taken, nothing changed");
    // Nothing left with a comment: --send refuses to resume for nothing.
    let out = agent(&repo, &["review", &id, "--take", "c.txt", "--send"]);
    out.assert_code(1);
    assert!(
        out.first_stderr_line().contains("no comment to send"),
        "{out}"
    );
    assert_eq!(user_state(&repo), before);
    fsck(&repo);
}

#[test]
fn review_index_stages_the_files_taken_hunks_went_into() {
    let repo = TestRepo::new();
    let id = three_files(&repo);
    let before = user_state(&repo);
    let out = agent(
        &repo,
        &[
            "review", &id, "--take", "c.txt", "--leave", "a.txt", "--index",
        ],
    );
    out.assert_code(0);
    assert_eq!(repo.git(&["diff", "--cached", "--name-only"]), "c.txt\n");
    assert_eq!(repo.git(&["status", "--porcelain"]), "M  c.txt\n");
    assert_only(&repo, &before, &["c.txt"], &["index"]);
    fsck(&repo);
}

#[test]
fn send_after_a_walk_with_no_comment_keeps_the_decisions_and_sends_nothing() {
    let repo = TestRepo::new();
    let id = three_files(&repo);
    let before = user_state(&repo);
    let Some(tmux) = Tmux::start(&repo, &["review", &id, "--send"], &[]) else {
        return;
    };
    tmux.wait_for("(1/2) Take this hunk", 1);
    tmux.send("y");
    tmux.wait_for("(2/2) Take this hunk", 1);
    tmux.send("q");
    let screen = tmux.wait_for("EXIT:", 1);
    assert!(screen.contains("EXIT:1"), "{screen}");
    // The terminal is 120 columns wide: the error wraps.
    let unwrapped = screen.replace('\n', "");
    assert!(
        unwrapped.contains("error: no comment to send")
            && unwrapped.contains("your decisions are kept in refs/notes/agent-review"),
        "{screen}"
    );
    assert_eq!(
        fs::read_to_string(repo.path().join("a.txt")).unwrap(),
        LINES.replacen("1\n", "ONE\n", 1),
        "the hunk taken in the walk landed"
    );
    let recs = records(&repo, &id);
    assert_eq!(recs.len(), 1, "{recs:?}");
    assert_eq!(recs[0]["decision"], "take");
    assert_only(&repo, &before, &["a.txt"], &[]);
    fsck(&repo);
}

/// A `--here` session's change is already in the user's files: review refuses (as accept does) rather than
/// "leave" a hunk that stays in the working tree; `--list` still lists the hunks.
#[test]
fn review_of_a_here_session_refuses_and_changes_nothing() {
    let repo = TestRepo::new();
    repo.write("a.txt", LINES);
    repo.commit_all("a");
    let server = Server::start(vec![
        Reply::tool_calls(vec![call(
            "edit_file",
            json!({"path": "a.txt", "old_string": "1\n2\n", "new_string": "ONE\n2\n"}),
        )]),
        Reply::text("Shouted."),
    ]);
    repo.run_agent(&server, &["ask", "--here", "shout one"])
        .assert_code(0);
    let id = crate::common::session_id(&repo);
    let before = user_state(&repo);
    for args in [
        &["review", &id, "--leave", "a.txt", "--comment", "no"][..],
        &["review", &id, "--take", "a.txt"],
    ] {
        let out = agent(&repo, args);
        out.assert_code(1);
        assert!(
            out.first_stderr_line()
                .contains("worked in your working tree (--here)")
                && out.first_stderr_line().contains("nothing was changed"),
            "{out}"
        );
        assert_eq!(user_state(&repo), before);
    }
    let refs = repo.git(&["for-each-ref", "refs/notes/agent-review"]);
    assert_eq!(refs, "", "no review record was written");
    let list = agent(&repo, &["review", &id, "--list"]);
    list.assert_code(0);
    assert!(list.stdout().contains("\"path\":\"a.txt\""), "{list}");
    fsck(&repo);
}

/// The hunks review cuts are the hunks `git agent diff` shows: every `@@` header of its output, copied into
/// `--decisions`, names a hunk, and `--list` gives the same headers in the same order. The edits are the
/// ambiguous kinds where diff algorithms can differ: functions inserted among similar ones, a block inserted
/// between blank-line separated blocks, lines duplicated in place, a block moved, blank lines added and
/// removed, a line changed among repeated ones.
#[test]
fn decisions_copied_from_git_agent_diff_name_the_hunks_review_walks() {
    let repo = TestRepo::new();
    let rs = |with: bool| -> String {
        let b = if with {
            "fn b() {\n    two();\n}\n\n"
        } else {
            ""
        };
        format!("fn a() {{\n    one();\n}}\n\n{b}fn c() {{\n    three();\n}}\n")
    };
    let py = |with: bool| -> String {
        (0..10)
            .map(|i| {
                let extra = if with && i == 4 {
                    "def new():\n    return 0\n\n"
                } else {
                    ""
                };
                format!("def f{i}():\n    return {i}\n\n{extra}")
            })
            .collect()
    };
    let c = |with: bool| -> String {
        let body: String = (0..8)
            .map(|i| {
                let extra = if with && i == 3 {
                    "    if (y) {\n        g();\n    }\n\n"
                } else {
                    ""
                };
                format!("    if (c{i}) {{\n        f{i}();\n    }}\n\n{extra}")
            })
            .collect();
        format!("int main() {{\n{body}}}\n")
    };
    let filler: String = (0..10).map(|i| format!("filler {i}\n")).collect();
    let dup_old = format!("{filler}x\ny\n{filler}");
    let dup_new = format!("{filler}x\ny\nx\ny\n{filler}");
    let repeated: String = (0..30).map(|i| format!("x\n{}\n", i % 3)).collect();
    let repeated_new = repeated
        .replacen("x\n1\n", "x\nONE\n", 4)
        .replacen("x\n2\n", "y\n2\n", 1);
    let moved: String = (0..20).map(|i| format!("line {i}\n")).collect();
    let moved_new = {
        let mut l: Vec<String> = moved.lines().map(|l| format!("{l}\n")).collect();
        let block: Vec<String> = l.drain(2..5).collect();
        l.splice(11..11, block);
        l.concat()
    };
    let blanks_new = "a\n\nb\n\nc\n\n\nd\n";
    let files = |new: bool| -> Vec<(&str, String)> {
        vec![
            ("f.rs", rs(new)),
            ("p.py", py(new)),
            ("q.c", c(new)),
            (
                "dup.txt",
                if new {
                    dup_new.clone()
                } else {
                    dup_old.clone()
                },
            ),
            (
                "r.txt",
                if new {
                    repeated_new.clone()
                } else {
                    repeated.clone()
                },
            ),
            (
                "m.txt",
                if new {
                    moved_new.clone()
                } else {
                    moved.clone()
                },
            ),
            (
                "b.txt",
                if new {
                    blanks_new.into()
                } else {
                    "a\n\n\nb\nc\n\nd\n".into()
                },
            ),
        ]
    };
    for (path, text) in files(false) {
        repo.write(path, &text);
    }
    repo.commit_all("files");
    let id = session(&repo, "look", vec![Reply::text("nothing")]);
    craft(&repo, &id, 1, "ambiguous edits", |dir| {
        for (path, text) in files(true) {
            fs::write(dir.join(path), text).unwrap();
        }
    });
    let diff = agent(&repo, &["diff", &id]);
    diff.assert_code(0);
    let mut path = String::new();
    let mut from_git: Vec<(String, String)> = Vec::new();
    for line in diff.stdout().lines() {
        if let Some(p) = line.strip_prefix("+++ b/") {
            path = p.to_owned();
        } else if let Some(rest) = line.strip_prefix("@@ ") {
            let end = rest.find(" @@").expect("a hunk header") + 3;
            from_git.push((path.clone(), format!("@@ {}", &rest[..end])));
        }
    }
    assert!(from_git.len() >= 8, "{diff}");
    let list = agent(&repo, &["review", &id, "--list"]);
    let listed: Vec<(String, String)> = list
        .stdout()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .map(|v| {
            let s = |k: &str| v[k].as_str().unwrap_or_default().to_owned();
            (s("path"), s("hunk"))
        })
        .collect();
    assert_eq!(
        listed, from_git,
        "review --list against git agent diff:\n{diff}"
    );
    let decisions: String = from_git
        .iter()
        .map(|(path, hunk)| {
            format!(
                "{}\n",
                json!({"path": path, "hunk": hunk, "decision": "take"})
            )
        })
        .collect();
    let file = repo.root().join("all.jsonl");
    fs::write(&file, decisions).unwrap();
    let out = agent(
        &repo,
        &["review", &id, "--decisions", file.to_str().unwrap()],
    );
    out.assert_code(0);
    for (path, text) in files(true) {
        assert_eq!(
            fs::read_to_string(repo.path().join(path)).unwrap(),
            text,
            "{path}"
        );
    }
    fsck(&repo);
}

/// Run in a subdirectory, paths mean what they mean to git there (`s.txt` is `sub/s.txt`, `../top.txt` is
/// `top.txt`), and `--decisions -` reads the decisions from stdin; records name repository paths.
#[test]
fn decisions_from_stdin_in_a_subdirectory() {
    let repo = TestRepo::new();
    repo.write("sub/s.txt", "s\n");
    repo.write("top.txt", "top\n");
    repo.commit_all("two files");
    let edit = |path: &str, old: &str, new: &str| {
        call(
            "edit_file",
            json!({"path": path, "old_string": old, "new_string": new}),
        )
    };
    let id = session(
        &repo,
        "shout",
        vec![
            Reply::tool_calls(vec![edit("sub/s.txt", "s\n", "S\n")]),
            Reply::tool_calls(vec![edit("top.txt", "top\n", "TOP\n")]),
            Reply::text("done"),
        ],
    );
    let before = user_state(&repo);
    let input = repo.root().join("decisions.jsonl");
    fs::write(
        &input,
        format!(
            "{}\n{}\n",
            json!({"path": "s.txt", "index": 0, "decision": "take"}),
            json!({"path": "../top.txt", "decision": "leave", "comment": "keep it lower"}),
        ),
    )
    .unwrap();
    let server = Server::start(vec![]);
    let mut cmd = repo.agent(&server, &["review", &id, "--decisions", "-"]);
    cmd.current_dir(repo.path().join("sub"))
        .stdin(fs::File::open(&input).unwrap());
    let out = run(&mut cmd);
    out.assert_code(0);
    assert!(
        out.stderr().contains("took 1, left 1 (1 with a comment)"),
        "{out}"
    );
    assert_eq!(
        fs::read_to_string(repo.path().join("sub/s.txt")).unwrap(),
        "S\n"
    );
    assert_eq!(
        fs::read_to_string(repo.path().join("top.txt")).unwrap(),
        "top\n"
    );
    let recs = records(&repo, &id);
    let paths: Vec<(&str, &str)> = recs
        .iter()
        .map(|r| (r["path"].as_str().unwrap(), r["decision"].as_str().unwrap()))
        .collect();
    assert_eq!(paths, [("sub/s.txt", "take"), ("top.txt", "leave")]);
    assert_eq!(recs[1]["comment"], "keep it lower");
    assert_only(&repo, &before, &["sub/s.txt"], &[]);
    fsck(&repo);
}
