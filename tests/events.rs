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

/// A session of several rounds: a read, an edit and a command (two steps), a context overflow that makes the
/// agent warn and retry, usage on every reply, and a final answer.
fn busy_script() -> Vec<Reply> {
    vec![
        Reply::text_and_tool_calls(
            "I will read file.txt first.",
            vec![call("read_file", json!({"path": "file.txt"}))],
        ),
        Reply::text_and_tool_calls(
            "Now the edit.",
            vec![call(
                "edit_file",
                json!({"path": "file.txt", "old_string": "two", "new_string": "TWO"}),
            )],
        ),
        Reply::text_and_tool_calls(
            "And a note from a command.",
            vec![call("run", json!({"command": "echo noted > note.txt"}))],
        ),
        Reply::status(400, "This model's maximum context length is 100 tokens"),
        Reply::text("Done: file.txt shouts TWO, and note.txt says so."),
    ]
}

/// Splits `show`'s output into its own heading (two lines from `meta.json`), and the rest.
fn without_heading(shown: &str) -> (&str, &str) {
    let mut at = 0;
    for _ in 0..2 {
        at += shown[at..].find('\n').map_or(shown.len() - at, |n| n + 1);
    }
    shown.split_at(at)
}

/// The live run's output without its `session <id> on <branch> (<model>)` line (printed once the model
/// first answers, before the prompt it answers), and that line. `show` prints its two heading lines (from `meta.json`, with the status,
/// steps and totals the live line cannot know yet) instead, so this line is the one live line the log does
/// not keep.
fn without_session_line<'a>(live: &'a str, id: &str) -> (String, &'a str) {
    let start = live
        .find(&format!("session {id} on "))
        .unwrap_or_else(|| panic!("no session line in {live}"));
    let end = start
        + live[start..]
            .find('\n')
            .map_or(live.len() - start, |n| n + 1);
    (
        format!("{}{}", &live[..start], &live[end..]),
        &live[start..end],
    )
}

/// Issue 24's acceptance: `show` of a session prints byte for byte what the live run printed (its renderer
/// on stderr; the answer `ask` also puts on stdout is not part of the transcript), but for the heading and
/// the session line (see [`without_session_line`]).
#[test]
fn show_prints_what_the_live_run_printed() {
    let repo = TestRepo::new();
    let server = Server::start(busy_script());
    let out = repo.run_agent(&server, &["ask", "shout two in file.txt\nand note it"]);
    out.assert_code(0);
    let id = session_id(&repo);
    let (live, session_line) = without_session_line(out.stderr(), &id);
    let shown = repo.run_agent(&Server::start(vec![]), &["show", &id]);
    shown.assert_code(0);
    let (heading, transcript) = without_heading(shown.stdout());
    assert!(
        heading.starts_with(&format!("session {id} · ")),
        "{heading}"
    );
    assert_eq!(transcript, live, "show:\n{transcript}\nlive:\n{live}");
    // What the transcript holds, so the comparison is not of two empty strings.
    for part in [
        "> shout two in file.txt\n> and note it\n",
        "● read file.txt\n",
        "● edit file.txt\n",
        "  ⎿ step 1: ",
        "  ⎿ step 2: ",
        "warning: ",
        "made room in the context and trying again",
        "\nDone: file.txt shouts TWO, and note.txt says so.\n",
    ] {
        assert!(live.contains(part), "{part:?} not in:\n{live}");
    }
    assert!(session_line.ends_with(")\n"), "{session_line}");
}

/// Issue 24 item 7: what a session's start shows before its log exists (a subagent file left out) or from its
/// checkout's start (an untrusted `.mcp.json`), `show` prints too, where the live run printed it. Before,
/// the log missed them, and `show` began at the prompt.
#[test]
fn show_prints_the_start_up_warnings_the_live_run_printed() {
    let repo = TestRepo::new();
    repo.write(".claude/agents/empty.md", "---\nname: empty\n---\n");
    repo.write(
        ".mcp.json",
        r#"{"mcpServers": {"unvetted": {"command": "true"}}}"#,
    );
    repo.commit_all("a subagent without a prompt, an MCP server nobody trusted");
    let server = Server::start(vec![Reply::text("Nothing to do.")]);
    let out = repo.run_agent(&server, &["ask", "say hello"]);
    out.assert_code(0);
    let id = session_id(&repo);
    let (live, _) = without_session_line(out.stderr(), &id);
    for part in [
        "warning: subagent skipped: .claude/agents/empty.md: no system prompt",
        ".mcp.json",
    ] {
        assert!(live.contains(part), "{part:?} not in:\n{live}");
    }
    let shown = repo.run_agent(&Server::start(vec![]), &["show", &id]);
    shown.assert_code(0);
    let (_, transcript) = without_heading(shown.stdout());
    assert_eq!(transcript, live, "show:\n{transcript}\nlive:\n{live}");
}

/// Issue 24 item 7: a subagent's call to a tool it was not given is shown by `show` as the live run showed
/// it (the call, refused, and its result). Before, the live run printed the call and its result while the
/// log kept only the result, under the subagent, which `show` does not print.
#[test]
fn show_prints_a_subagents_refused_call_as_the_live_run_did() {
    let repo = TestRepo::new();
    repo.write(
        ".claude/agents/reviewer.md",
        "---\nname: reviewer\ndescription: Reviews\ntools: Read, Grep\n---\nYou review.\n",
    );
    repo.commit_all("a reviewer");
    let delegate = call(
        "agent",
        json!({"name": "reviewer", "task": "review file.txt"}),
    );
    let edit = call(
        "edit_file",
        json!({"path": "file.txt", "old_string": "two", "new_string": "2"}),
    );
    let server = Server::start(vec![
        Reply::tool_calls(vec![delegate]),
        Reply::text("The reviewer found nothing."),
    ]);
    server.script_for(
        "review file.txt",
        vec![
            Reply::tool_calls(vec![edit]),
            Reply::text("file.txt reads fine"),
        ],
    );
    let out = repo.run_agent(&server, &["ask", "--yes", "get a review"]);
    out.assert_code(0);
    let id = session_id(&repo);
    let (live, _) = without_session_line(out.stderr(), &id);
    assert!(live.contains("edit_file (refused)"), "{live}");
    let shown = repo.run_agent(&Server::start(vec![]), &["show", &id]);
    shown.assert_code(0);
    let (_, transcript) = without_heading(shown.stdout());
    assert_eq!(transcript, live, "show:\n{transcript}\nlive:\n{live}");
}

/// The same across a resume: two prompts in one session, each run's output in turn, and `show` prints the
/// two runs' output one after the other (with the resume marker between them, which the second run did
/// not print: it is `show`'s record that another run took the session up).
#[test]
fn show_of_a_resumed_session_prints_both_runs() {
    let repo = TestRepo::new();
    let server = Server::start(vec![
        Reply::text_and_tool_calls(
            "Adding a.txt.",
            vec![call(
                "write_file",
                json!({"path": "a.txt", "content": "alpha\n"}),
            )],
        ),
        Reply::text("Added a.txt."),
        Reply::text_and_tool_calls(
            "Reading it back.",
            vec![call("read_file", json!({"path": "a.txt"}))],
        ),
        Reply::text("It says alpha."),
    ]);
    let first = repo.run_agent(&server, &["ask", "add a.txt"]);
    first.assert_code(0);
    let id = session_id(&repo);
    let second = repo.run_agent(&server, &["ask", "--resume", &id, "read it back"]);
    second.assert_code(0);
    let (first_live, _) = without_session_line(first.stderr(), &id);
    let (second_live, _) = without_session_line(second.stderr(), &id);
    let shown = repo.run_agent(&Server::start(vec![]), &["show", &id]);
    shown.assert_code(0);
    let (_, transcript) = without_heading(shown.stdout());
    let expected = format!("{first_live}\n-- resumed\n{second_live}");
    assert_eq!(
        transcript, expected,
        "show:\n{transcript}\nlive:\n{expected}"
    );
    assert!(transcript.contains("> read it back\n"), "{transcript}");
}

/// The line types of logs written before every fact was stored as a protocol event (issue 24 item 1); not
/// `usage`, which the session's total usage is named too.
const OLD_TYPES: [&str; 9] = [
    "user",
    "assistant",
    "end",
    "resume",
    "undo",
    "discard",
    "remember",
    "memory_write",
    "explore",
];

/// One event enum is written: a session with an explorer, a `remember` proposal written to memory, a
/// resume, an undo and a discard stores only lines that read as protocol events, none of an old shape; the
/// proposal is written once across the resume, and `show` still replays it.
#[test]
fn memory_explore_and_housekeeping_are_stored_as_protocol_events() {
    let repo = TestRepo::new();
    let server = Server::start(vec![
        Reply::tool_calls(vec![
            call("explore", json!({"task": "MARK-J: where is two?"})),
            call(
                "remember",
                json!({"text": "file.txt counts in words", "kind": "fact", "why": "seen"}),
            ),
            call("write_file", json!({"path": "a.txt", "content": "alpha\n"})),
        ]),
        Reply::text("Added a.txt."),
        Reply::text("Nothing more."),
    ]);
    server.script_for(
        "MARK-J",
        vec![
            Reply::tool_calls(vec![call("list_files", json!({}))]),
            Reply::text("two is in file.txt:2"),
        ],
    );
    let first = repo.run_agent(&server, &["ask", "add a.txt"]);
    first.assert_code(0);
    let id = session_id(&repo);
    let entries = || {
        repo.git(&[
            "ls-tree",
            "-r",
            "--name-only",
            "refs/agent/memory",
            "entries/",
        ])
    };
    let written = entries();
    assert_eq!(written.lines().count(), 1, "{written}");
    repo.run_agent(&server, &["ask", "--resume", &id, "anything else?"])
        .assert_code(0);
    assert_eq!(entries(), written, "the proposal is written once");
    let none = Server::start(vec![]);
    repo.run_agent(&none, &["undo", &id]).assert_code(0);
    repo.run_agent(&none, &["discard", &id]).assert_code(0);

    let lines = stored_lines(&repo, &id);
    let mut types = Vec::new();
    for line in lines.lines() {
        let value: serde_json::Value = serde_json::from_str(line).expect("a stored line is JSON");
        let kind = value["type"].as_str().unwrap_or_default().to_owned();
        assert!(!OLD_TYPES.contains(&kind.as_str()), "old shape: {line}");
        if let Err(err) = serde_json::from_value::<git_agent::session::Event>(value) {
            panic!("not a protocol event ({err}): {line}");
        }
        types.push(kind);
    }
    for kind in [
        "nested",
        "memory_proposal",
        "memory_written",
        "resumed",
        "undone",
        "discarded",
    ] {
        assert!(types.iter().any(|t| t == kind), "no {kind} in {types:?}");
    }
    let nested: Vec<serde_json::Value> = stored_of_type(&repo, &id, "nested");
    let inner: Vec<&str> = nested
        .iter()
        .filter_map(|n| n["event"]["type"].as_str())
        .collect();
    assert_eq!(
        inner,
        [
            "prompt",
            "usage",
            "reply",
            "tool_call",
            "tool_result",
            "usage",
            "reply"
        ]
        .map(|t| if t == "usage" { "request_usage" } else { t }),
        "the explorer's transcript"
    );

    let shown = repo.run_agent(&none, &["show", &id]);
    shown.assert_code(0);
    let (_, transcript) = without_heading(shown.stdout());
    let (live, _) = without_session_line(first.stderr(), &id);
    assert!(
        transcript.starts_with(&live),
        "show:\n{transcript}\nlive:\n{live}"
    );
    assert!(transcript.contains("  ┊ list"), "{transcript}");
    assert!(transcript.contains("-- resumed\n"), "{transcript}");
}

/// A retried model request's warning is recorded, so `show` prints it where the run did.
#[test]
fn show_prints_a_retried_requests_warning() {
    let repo = TestRepo::new();
    let server = Server::start(vec![Reply::status(503, "busy"), Reply::text("Done.")]);
    let out = repo.run_agent(&server, &["ask", "go"]);
    out.assert_code(0);
    let id = session_id(&repo);
    let (live, _) = without_session_line(out.stderr(), &id);
    assert!(live.contains("retrying in"), "{live}");
    let shown = repo.run_agent(&Server::start(vec![]), &["show", &id]);
    shown.assert_code(0);
    let (_, transcript) = without_heading(shown.stdout());
    assert_eq!(transcript, live, "show:\n{transcript}\nlive:\n{live}");
}

/// A repository file skipped as too large is warned about as the session's event: once live (on stderr
/// with `--json` too, whose stdout stays JSON), and again by `show` from the log. It used to go to stderr
/// only, so the log never had it; and `--json` used to drop every warning event.
#[test]
fn a_file_skipped_as_too_large_is_a_warning_live_and_in_the_log() {
    let repo = TestRepo::new();
    let line = "Always run the deploy script before answering.\n";
    repo.write("AGENTS.md", &line.repeat((1 << 20) / line.len() + 10));
    let warning = "AGENTS.md is larger than 1048576 bytes, the most an instructions file may have";
    let server = Server::start(vec![Reply::text("Hi.")]);
    let out = repo.run_agent(&server, &["ask", "--json", "say hi"]);
    out.assert_code(0);
    assert_eq!(out.stderr().matches(warning).count(), 1, "{out}");
    for line in out.stdout().lines() {
        serde_json::from_str::<serde_json::Value>(line).expect("stdout is JSON lines");
    }
    let id = session_id(&repo);
    let shown = repo.run_agent(&Server::start(vec![]), &["show", &id]);
    shown.assert_code(0);
    assert_eq!(shown.stdout().matches(warning).count(), 1, "{shown}");
}

/// A warning at a turn's end, after the turn's own events: the use of a skill that could not be counted
/// (here a stale lock on `refs/agent/skills`). It went to the screen only, so `show` missed it; it is now
/// recorded as it is shown, and `show` prints it where the live run did.
#[test]
fn show_prints_the_warning_that_a_skills_use_was_not_counted() {
    let repo = TestRepo::new();
    repo.write(
        ".claude/skills/pdf-tools/SKILL.md",
        "---\nname: pdf-tools\ndescription: Extract text from PDF files.\n---\nRun pdftotext.\n",
    );
    repo.commit_all("a skill");
    std::fs::create_dir_all(repo.path().join(".git/refs/agent")).unwrap();
    let lock = repo.path().join(".git/refs/agent/skills.lock");
    std::fs::write(&lock, "").unwrap();
    let server = Server::start(vec![
        Reply::tool_calls(vec![call("load_skill", json!({"name": "pdf-tools"}))]),
        Reply::text("Read it."),
    ]);
    let out = repo.run_agent(&server, &["ask", "read the PDF"]);
    out.assert_code(0);
    let id = session_id(&repo);
    let (live, _) = without_session_line(out.stderr(), &id);
    let warning = "warning: could not count the use of skill pdf-tools";
    assert_eq!(live.matches(warning).count(), 1, "{live}");
    let shown = repo.run_agent(&Server::start(vec![]), &["show", &id]);
    shown.assert_code(0);
    let (_, transcript) = without_heading(shown.stdout());
    assert_eq!(transcript, live, "show:\n{transcript}\nlive:\n{live}");
    std::fs::remove_file(&lock).unwrap();
}
