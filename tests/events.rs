//! One event stream (issue 24 item 1): `show` replays what `ask` printed, and logs written before the event
//! stream still read.

use serde_json::json;

use crate::common::{call, session_id, Reply, Server, TestRepo};

/// The events of session `id` as its log ref holds them, one JSON line each, oldest first.
fn stored_lines(repo: &TestRepo, id: &str) -> String {
    let log = format!("refs/agent/sessions/{id}");
    let names = repo.git(&["ls-tree", "--name-only", &format!("{log}:events")]);
    let mut chunks: Vec<(u64, &str)> = names
        .lines()
        .map(|n| (n.trim_end_matches(".jsonl").parse().unwrap_or(0), n))
        .collect();
    chunks.sort();
    chunks
        .iter()
        .map(|(_, n)| repo.git(&["show", &format!("{log}:events/{n}")]))
        .collect()
}

/// The log of a session written by the binary before the typed event stream (see the fixture's README).
const OLD_EVENTS: &str = include_str!("fixtures/old-log/events.jsonl");
/// What that binary's `show` printed for it.
const OLD_SHOW: &str = include_str!("fixtures/old-log/show.txt");

/// Git in the repo with `input` on stdin; its stdout, trimmed.
fn git_with_input(repo: &TestRepo, args: &[&str], input: &str) -> String {
    use std::io::Write;
    let mut child = std::process::Command::new("git")
        .current_dir(repo.path())
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .args([
            "-c",
            "user.name=Test User",
            "-c",
            "user.email=test@example.com",
        ])
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("git runs");
    child
        .stdin
        .take()
        .expect("stdin is piped")
        .write_all(input.as_bytes())
        .expect("git reads its input");
    let out = child.wait_with_output().expect("git runs");
    assert!(out.status.success(), "git {args:?} failed");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Replaces the events in session `id`'s log ref with `lines`, by plain git: one blob `events/0.jsonl`
/// beside the session's own `meta.json`, committed on top of the log's history.
fn replace_events(repo: &TestRepo, id: &str, lines: &str) {
    let log = format!("refs/agent/sessions/{id}");
    let blob = git_with_input(repo, &["hash-object", "-w", "--stdin"], lines);
    let events = git_with_input(repo, &["mktree"], &format!("100644 blob {blob}\t0.jsonl\n"));
    let meta = repo.git(&["rev-parse", &format!("{log}:meta.json")]);
    let root = git_with_input(
        repo,
        &["mktree"],
        &format!(
            "100644 blob {}\tmeta.json\n040000 tree {events}\tevents\n",
            meta.trim()
        ),
    );
    let old = repo.git(&["rev-parse", &log]);
    let commit = git_with_input(
        repo,
        &[
            "commit-tree",
            &root,
            "-p",
            old.trim(),
            "-m",
            "old-format events",
        ],
        "",
    );
    repo.git(&["update-ref", &log, &commit, old.trim()]);
}

/// A session whose log holds the old binary's events: made by a run of this binary (so its branch,
/// checkout and meta are real), then its events swapped for the fixture's.
fn session_with_old_log(repo: &TestRepo) -> String {
    let server = Server::start(vec![Reply::text_and_tool_calls(
        "I will add a.txt.",
        vec![call(
            "write_file",
            json!({"path": "a.txt", "content": "alpha\n"}),
        )],
    )]);
    repo.run_agent(&server, &["ask", "add alpha"]);
    let id = session_id(repo);
    replace_events(repo, &id, OLD_EVENTS);
    id
}

#[test]
fn a_log_written_before_the_event_stream_still_shows() {
    let repo = TestRepo::new();
    let id = session_with_old_log(&repo);
    assert_eq!(stored_lines(&repo, &id), OLD_EVENTS);
    let out = repo.run_agent(&Server::start(vec![]), &["show", &id]);
    out.assert_code(0);
    // The heading comes from this session's meta.json; everything after it from the old events.
    let body = |text: &str| text.lines().skip(2).collect::<Vec<_>>().join("\n");
    assert_eq!(body(out.stdout()), body(OLD_SHOW), "{out}");
}

#[test]
fn a_log_written_before_the_event_stream_still_resumes() {
    let repo = TestRepo::new();
    let id = session_with_old_log(&repo);
    // The old plan has an open item, so the first answer gets a reminder (the plan came back too).
    let server = Server::start(vec![
        Reply::text("first answer"),
        Reply::text("resumed from the old log"),
    ]);
    let out = repo.run_agent(&server, &["ask", "--resume", &id, "one more thing"]);
    out.assert_code(0);
    assert_eq!(out.stdout().trim(), "resumed from the old log");
    // The conversation rebuilt from the old events: both prompts, the replies, each call with its result.
    let sent = server.requests();
    let messages = sent[0].messages();
    let users = sent[0].user_texts();
    assert!(
        users.iter().any(|u| u.starts_with("Your plan so far")),
        "the plan is re-stated: {users:?}"
    );
    for prompt in [
        "add alpha\nand shout two",
        "list missing-file",
        "one more thing",
    ] {
        assert!(
            users.iter().any(|u| u == prompt),
            "{prompt:?} not in {users:?}"
        );
    }
    let results: Vec<&serde_json::Value> =
        messages.iter().filter(|m| m["role"] == "tool").collect();
    assert_eq!(results.len(), 5, "{messages:?}");
    assert_eq!(results[4]["tool_call_id"], "call_5");
    assert!(results[4]["content"]
        .as_str()
        .unwrap_or_default()
        .starts_with("error: ls: cannot access"));
    let replies: Vec<&serde_json::Value> = messages
        .iter()
        .filter(|m| m["role"] == "assistant")
        .collect();
    assert_eq!(replies.len(), 8, "{messages:?}");
    assert_eq!(replies[7]["content"], "Still missing.");
}

/// The stored lines of `id` of one `type`, without the store's own `seq` and `ts`.
fn stored_of_type(repo: &TestRepo, id: &str, kind: &str) -> Vec<serde_json::Value> {
    stored_lines(repo, id)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["type"] == kind)
        .map(|mut e| {
            if let Some(fields) = e.as_object_mut() {
                fields.remove("seq");
                fields.remove("ts");
            }
            e
        })
        .collect()
}

/// A fact emitted once is the same event on the screen and in the log: the `--json` lines of a fix's check
/// runs and step are its stored lines (they were written twice by hand before, a check's exit code as `code`
/// in the log and `exit_code` on the screen).
#[test]
fn a_check_and_a_step_are_stored_as_the_json_events_they_print() {
    let repo = TestRepo::new();
    let server = Server::start(vec![
        Reply::tool_calls(vec![call(
            "edit_file",
            json!({"path": "file.txt", "old_string": "two", "new_string": "TWO"}),
        )]),
        Reply::text("file.txt says TWO now."),
    ]);
    let out = repo.run_agent(
        &server,
        &["fix", "--json", "--check", "grep -q TWO file.txt"],
    );
    out.assert_code(0);
    let printed: Vec<serde_json::Value> = out
        .stdout()
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    let id = session_id(&repo);
    for kind in ["check", "step"] {
        let shown: Vec<&serde_json::Value> = printed.iter().filter(|e| e["type"] == kind).collect();
        let stored = stored_of_type(&repo, &id, kind);
        assert!(!shown.is_empty(), "no {kind} event: {out}");
        assert_eq!(
            stored.iter().collect::<Vec<_>>(),
            shown,
            "{kind}: the log and --json differ"
        );
    }
}

/// The log keeps the order the screen showed: a call's result, then the step it made (the log had the step
/// first, and `show` reordered them). The stored result is the screen's event (`id`, `output`) and still
/// rebuilds the conversation on resume.
#[test]
fn a_result_is_stored_before_its_step_as_it_was_shown() {
    let repo = TestRepo::new();
    let server = Server::start(vec![
        Reply::tool_calls(vec![call(
            "write_file",
            json!({"path": "a.txt", "content": "alpha\n"}),
        )]),
        Reply::text("Added a.txt."),
    ]);
    let out = repo.run_agent(&server, &["ask", "--json", "add a.txt"]);
    out.assert_code(0);
    let id = session_id(&repo);
    let kinds: Vec<String> = stored_lines(&repo, &id)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|e| e["type"].as_str().map(str::to_owned))
        .filter(|k| k == "tool_result" || k == "step")
        .collect();
    assert_eq!(kinds, ["tool_result", "step"]);
    let printed: Vec<String> = out
        .stdout()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|e| e["type"].as_str().map(str::to_owned))
        .filter(|k| k == "tool_result" || k == "step")
        .collect();
    assert_eq!(printed, kinds, "--json and the log in one order");
    let stored = stored_of_type(&repo, &id, "tool_result");
    assert_eq!(stored[0]["output"], "created a.txt (6 bytes, 1 lines)");
    let server = Server::start(vec![Reply::text("still there")]);
    repo.run_agent(&server, &["ask", "--resume", &id, "check"])
        .assert_code(0);
    let messages = server.requests()[0].messages().to_vec();
    let result = messages
        .iter()
        .find(|m| m["role"] == "tool")
        .expect("the result is in the rebuilt conversation");
    assert_eq!(result["content"], "created a.txt (6 bytes, 1 lines)");
}
