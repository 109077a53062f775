//! `git agent chat` as people use it: in a real terminal (a tmux pane, driven with keys and read from the
//! screen) against the scripted model server, and piped, one prompt a line. Timings are never asserted:
//! every wait polls the screen with a generous limit, and what "at once" means is measured by
//! `scripts/bench-chat.py`.

use std::fs;
use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::common::tmux::{self, last_line, Tmux};
use crate::common::{agent_branches, call, run, session_id, Gate, Reply, Server, TestRepo};

const ROWS: u16 = 30;
const COLS: u16 = 110;

fn chat(repo: &TestRepo, server: &Server, args: &[&str]) -> Tmux {
    let mut all = vec!["chat"];
    all.extend_from_slice(args);
    let tmux = Tmux::start(repo, &repo.agent(server, &all), ROWS, COLS);
    tmux.wait_for("the chat to start", |s| {
        s.contains("/help lists the commands")
    });
    tmux
}

/// Waits until the chat is back at an empty prompt (its placeholder shows).
fn at_prompt(tmux: &Tmux, what: &str) -> String {
    tmux.wait_for(what, |s| s.contains("ask anything"))
}

fn write(path: &str, content: &str) -> Reply {
    Reply::text_and_tool_calls(
        "Writing it.",
        vec![call(
            "write_file",
            json!({"path": path, "content": content}),
        )],
    )
}

#[test]
fn a_terminal_chat_streams_commits_diffs_undoes_and_resumes() {
    if !tmux::available() {
        return;
    }
    let repo = TestRepo::new();
    let server = Server::start(vec![
        write("notes.txt", "hello\n"),
        Reply::text("I wrote notes.txt for you."),
        Reply::text("Still here, on the same branch."),
    ]);
    let tmux = chat(&repo, &server, &[]);
    tmux.type_line("write the notes");
    let screen = tmux.wait_for("the answer", |s| s.contains("I wrote notes.txt for you."));
    assert!(screen.contains("> write the notes"), "{screen}");
    assert!(screen.contains("● write notes.txt"), "{screen}");
    assert!(screen.contains("⎿ step 1:"), "{screen}");
    let screen = at_prompt(&tmux, "the prompt after the turn");
    // Two requests of 11 prompt and 7 completion tokens each.
    let status = last_line(&screen);
    assert!(
        status.contains("openai/test-model") && status.contains("tokens 22 in, 14 out"),
        "{screen}"
    );
    let id = session_id(&repo);
    assert!(
        status.contains("1 step") && status.contains(&format!("agent/{id}")),
        "{status}"
    );

    tmux.type_line("/diff");
    let screen = tmux.wait_for("the diff", |s| s.contains("+hello"));
    assert!(screen.contains("notes.txt"), "{screen}");

    let base = repo.git(&["rev-parse", "HEAD"]);
    assert_ne!(repo.git(&["rev-parse", &format!("agent/{id}")]), base);
    tmux.type_line("/undo");
    let screen = tmux.wait_for("the undo", |s| s.contains("undid 1 step"));
    assert!(last_line(&screen).contains("0 steps"), "{screen}");
    assert_eq!(repo.git(&["rev-parse", &format!("agent/{id}")]), base);

    tmux.type_line("/exit");
    let screen = tmux.wait_for("the exit", |s| {
        s.contains(&format!("git agent chat --resume {id}"))
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    while !tmux.exited() {
        assert!(Instant::now() < deadline, "chat did not exit:\n{screen}");
        thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(tmux.exit_status(), Some(0));

    // `--continue`: the same session and branch, and the conversation goes on.
    let tmux = chat(&repo, &server, &["--continue"]);
    let screen = tmux.screen();
    assert!(
        screen.contains(&format!("resumed session {id}")),
        "{screen}"
    );
    tmux.type_line("still there?");
    let screen = tmux.wait_for("the resumed answer", |s| {
        s.contains("Still here, on the same branch.")
    });
    assert!(screen.contains(&format!("agent/{id}")), "{screen}");
    assert_eq!(agent_branches(&repo), vec![id.clone()]);
    let requests = server.requests();
    let texts = requests.last().expect("a request").user_texts();
    assert_eq!(
        texts.first().map(String::as_str),
        Some("write the notes"),
        "{texts:?}"
    );
    assert_eq!(
        texts.last().map(String::as_str),
        Some("still there?"),
        "{texts:?}"
    );
    at_prompt(&tmux, "the prompt");
    tmux.keys(&["C-d"]);
    tmux.wait_for("the exit", |s| s.contains("--resume"));
}

/// The session's `sleep` processes: their working directory is in the test's temp dir.
fn sleeps_under(root: &Path) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let comm = fs::read_to_string(entry.path().join("comm")).unwrap_or_default();
        let cwd = fs::read_link(entry.path().join("cwd")).unwrap_or_default();
        if comm.trim() == "sleep" && cwd.starts_with(root) {
            found.push(pid);
        }
    }
    found
}

#[test]
fn ctrl_c_cancels_a_running_command_and_the_next_prompt_works() {
    if !tmux::available() {
        return;
    }
    let repo = TestRepo::new();
    let server = Server::start(vec![
        Reply::tool_calls(vec![call("run", json!({"command": "sleep 30"}))]),
        Reply::text("Ready for the next one."),
    ]);
    let tmux = chat(&repo, &server, &[]);
    tmux.type_line("wait for half a minute");
    tmux.wait_for("the command line", |s| s.contains("● run sleep 30"));
    let deadline = Instant::now() + Duration::from_secs(30);
    while sleeps_under(repo.root()).is_empty() {
        assert!(Instant::now() < deadline, "sleep never started");
        thread::sleep(Duration::from_millis(20));
    }
    let pressed = Instant::now();
    tmux.keys(&["C-c"]);
    let screen = tmux.wait_for("the prompt after Ctrl-C", |s| {
        s.contains("-- interrupted") && s.contains("ask anything")
    });
    // Measured, not asserted (see scripts/bench-chat.py for the figure on a quiet machine).
    eprintln!("prompt back {:?} after Ctrl-C", pressed.elapsed());
    assert!(screen.contains("interrupted"), "{screen}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !sleeps_under(repo.root()).is_empty() {
        assert!(
            Instant::now() < deadline,
            "sleep still running: {:?}",
            sleeps_under(repo.root())
        );
        thread::sleep(Duration::from_millis(20));
    }
    let id = session_id(&repo);
    let shown = repo.run_agent(&server, &["show", &id]);
    assert!(
        shown.stdout().contains("-- interrupted"),
        "{}",
        shown.stdout()
    );

    tmux.type_line("and now?");
    tmux.wait_for("the next answer", |s| s.contains("Ready for the next one."));
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        requests[1].user_texts().last().map(String::as_str),
        Some("and now?")
    );
}

#[test]
fn text_typed_during_a_stalled_request_joins_the_next_one() {
    if !tmux::available() {
        return;
    }
    let repo = TestRepo::new();
    let gate = Gate::new();
    let server = Server::start(vec![
        Reply::text("A first answer.").held(&gate),
        Reply::text("An answer that took the steering."),
    ]);
    let tmux = chat(&repo, &server, &[]);
    tmux.type_line("start the work");
    let deadline = Instant::now() + Duration::from_secs(60);
    while server.requests().is_empty() {
        assert!(Instant::now() < deadline, "no request arrived");
        thread::sleep(Duration::from_millis(20));
    }
    // The model is still thinking: the user adds something.
    tmux.type_line("also mention the README");
    tmux.wait_for("the steering echo", |s| {
        s.contains("joins the running turn")
    });
    gate.open();
    tmux.wait_for("the second answer", |s| {
        s.contains("An answer that took the steering.")
    });
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        requests[1].user_texts(),
        ["start the work", "also mention the README"]
    );
}

#[test]
fn an_approval_is_answered_in_the_terminal_and_always_holds_for_the_session() {
    if !tmux::available() {
        return;
    }
    let repo = TestRepo::new();
    let push = || call("run", json!({"command": "git push"}));
    let server = Server::start(vec![
        Reply::tool_calls(vec![push()]),
        Reply::tool_calls(vec![push()]),
        Reply::text("Tried to push twice."),
    ]);
    let tmux = chat(&repo, &server, &[]);
    tmux.type_line("push it");
    tmux.wait_for("the question", |s| s.contains("[y]es / [n]o / [a]lways"));
    tmux.type_text("a");
    let screen = tmux.wait_for("the answer", |s| s.contains("Tried to push twice."));
    // Asked once: "always" covered the second push.
    let asked = tmux.history().matches("publishes commits").count();
    assert_eq!(asked, 1, "{screen}");
    assert!(screen.contains("approved"), "{screen}");
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
}

/// The binary with `input` on stdin.
fn piped(repo: &TestRepo, server: &Server, args: &[&str], input: &str) -> crate::common::Output {
    let file = repo.root().join("stdin.txt");
    fs::write(&file, input).expect("write stdin");
    let mut cmd = repo.agent(server, args);
    cmd.stdin(fs::File::open(&file).expect("open stdin"));
    run(&mut cmd)
}

#[test]
fn piped_lines_are_turns_of_one_session() {
    let repo = TestRepo::new();
    let server = Server::start(vec![
        Reply::text("one done"),
        Reply::text("two done"),
        Reply::text("three done"),
    ]);
    let out = piped(&repo, &server, &["chat"], "one\ntwo\nthree\n");
    out.assert_code(0);
    assert_eq!(out.stdout(), "one done\ntwo done\nthree done\n", "{out}");
    let id = session_id(&repo);
    assert!(
        out.stderr()
            .contains(&format!("git agent chat --resume {id}")),
        "{out}"
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[2].user_texts(), ["one", "two", "three"]);
    let shown = repo.run_agent(&server, &["show", &id]);
    assert_eq!(
        shown.stdout().matches("-- done").count(),
        3,
        "{}",
        shown.stdout()
    );
}

#[test]
fn piped_slash_commands_diff_undo_and_name_close_ones() {
    let repo = TestRepo::new();
    let server = Server::start(vec![write("notes.txt", "hello\n"), Reply::text("wrote it")]);
    let input = "/dif\nwrite the notes\n/diff --stat\n/undo\n/sessions\nline one \\\nline two\n";
    let out = piped(&repo, &server, &["chat"], input);
    let id = session_id(&repo);
    assert!(
        out.stderr().contains("error: unknown command /dif"),
        "{out}"
    );
    assert!(out.stderr().contains("hint: did you mean /diff?"), "{out}");
    assert!(out.stdout().contains("notes.txt | 1 +"), "{out}");
    assert!(
        out.stdout().contains("undid 1 step, now at step 0"),
        "{out}"
    );
    assert!(out.stdout().contains(&format!("* {id}")), "{out}");
    assert_eq!(
        repo.git(&["rev-parse", &format!("agent/{id}")]),
        repo.git(&["rev-parse", "HEAD"])
    );
    // A trailing backslash continued the last prompt on the next line.
    let requests = server.requests();
    assert_eq!(
        requests
            .last()
            .expect("a request")
            .user_texts()
            .last()
            .map(String::as_str),
        Some("line one \nline two")
    );
    out.assert_code(0);
}

#[test]
fn reasoning_is_one_collapsed_line_that_ctrl_o_expands() {
    if !tmux::available() {
        return;
    }
    use crate::common::server::{openai_chunk, openai_events};
    let repo = TestRepo::new();
    let chunks = [
        openai_chunk(
            json!({"reasoning_content": "Weighing the two ways to do it."}),
            None,
        ),
        openai_chunk(json!({"content": "The short answer."}), None),
        openai_chunk(json!({}), Some("stop")),
    ];
    let server = Server::start(vec![Reply::sse_raw(openai_events(&chunks))]);
    let tmux = chat(&repo, &server, &[]);
    tmux.type_line("think first");
    let screen = tmux.wait_for("the answer", |s| s.contains("The short answer."));
    assert!(screen.contains("thinking… (31 chars)"), "{screen}");
    assert!(!screen.contains("Weighing"), "{screen}");
    at_prompt(&tmux, "the prompt");
    tmux.keys(&["C-o"]);
    tmux.wait_for("the expanded reasoning", |s| {
        s.contains("Weighing the two ways to do it.")
    });
}

#[test]
fn a_paste_is_one_prompt_with_its_lines_and_tabs() {
    if !tmux::available() {
        return;
    }
    let repo = TestRepo::new();
    let server = Server::start(vec![Reply::text("Got all three lines.")]);
    let tmux = chat(&repo, &server, &[]);
    let pasted = "first line\n\tsecond, indented\nthird line";
    tmux.paste(pasted);
    tmux.wait_for("the pasted text", |s| s.contains("third line"));
    assert!(
        server.requests().is_empty(),
        "a pasted newline is not Enter"
    );
    tmux.keys(&["Enter"]);
    tmux.wait_for("the answer", |s| s.contains("Got all three lines."));
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].user_texts(), [pasted]);
}

#[test]
fn piped_new_resume_and_the_informational_commands() {
    let repo = TestRepo::new();
    let server = Server::start(vec![
        Reply::text("first answer"),
        Reply::text("second answer"),
        Reply::text("third answer"),
    ]);
    repo.write(
        ".agents/skills/words-to-digits/SKILL.md",
        "---\nname: words-to-digits\ndescription: Turn number words into digits.\n---\nReplace each word.\n",
    );
    let first = piped(&repo, &server, &["chat"], "first\n");
    first.assert_code(0);
    let first_id = session_id(&repo);
    let input = format!(
        "/context\n/model\n/plan\n/memory\n/skills\n/review\n/new\nsecond\n/resume {first_id}\nthird\n/sessions\n"
    );
    let out = piped(&repo, &server, &["chat", "--continue"], &input);
    let stdout = out.stdout();
    assert!(stdout.contains("context: about "), "{out}");
    assert!(stdout.contains("model: openai/test-model"), "{out}");
    assert!(stdout.contains("no plan yet"), "{out}");
    assert!(
        stdout.contains("memory: no entries given to this session"),
        "{out}"
    );
    assert!(
        stdout.contains(
            "words-to-digits (.agents/skills/words-to-digits, 0 uses, 0 done): Turn number words"
        ),
        "{out}"
    );
    // No terminal to hand over: review's scripted form (here with nothing to review).
    assert!(
        stdout.contains("changed nothing: nothing to review"),
        "{out}"
    );
    let mut ids = agent_branches(&repo);
    ids.sort();
    assert_eq!(ids.len(), 2, "/new started a second session: {ids:?}");
    let second_id = ids
        .iter()
        .find(|i| **i != first_id)
        .expect("a second session");
    // `/resume` went back to the first session: the third prompt continued its conversation.
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[1].user_texts(), ["second"]);
    assert_eq!(requests[2].user_texts(), ["first", "third"]);
    assert!(stdout.contains(&format!("* {first_id}")), "{out}");
    assert!(stdout.contains(&format!("  {second_id}")), "{out}");
    out.assert_code(0);
}

#[test]
fn ctrl_z_stops_the_job_and_fg_continues_it_where_it_was() {
    if !tmux::available() {
        return;
    }
    let repo = TestRepo::new();
    let server = Server::start(vec![Reply::text("Back again.")]);
    let cmd = repo.agent(&server, &["chat"]);
    let tmux = Tmux::start_in_shell(&repo, &cmd, ROWS, COLS);
    tmux.wait_for("the chat to start", |s| {
        s.contains("/help lists the commands")
    });
    tmux.type_text("half a prompt");
    tmux.keys(&["C-z"]);
    // The shell has the terminal back.
    tmux.wait_for("the shell", |s| s.contains("Stopped"));
    tmux.type_line("fg");
    tmux.wait_for("the redrawn input", |s| s.contains("> half a prompt"));
    tmux.type_line(", finished");
    tmux.wait_for("the answer", |s| s.contains("Back again."));
    assert_eq!(
        server.requests()[0].user_texts(),
        ["half a prompt, finished"]
    );
}

#[test]
fn review_gets_the_terminal_and_its_comments_reach_the_next_turn() {
    if !tmux::available() {
        return;
    }
    let repo = TestRepo::new();
    let server = Server::start(vec![
        write("notes.txt", "hello\n"),
        Reply::text("Wrote the notes."),
        Reply::text("Revised as you asked."),
    ]);
    let tmux = chat(&repo, &server, &[]);
    tmux.type_line("write the notes");
    tmux.wait_for("the answer", |s| s.contains("Wrote the notes."));
    at_prompt(&tmux, "the prompt");
    tmux.type_line("/review");
    tmux.wait_for("review's question", |s| s.contains("Take this"));
    tmux.type_line("c");
    tmux.wait_for("the comment question", |s| s.contains("Comment:"));
    tmux.type_line("say hello to the world instead");
    tmux.wait_for("the chat again", |s| s.contains("session opened again"));
    at_prompt(&tmux, "the prompt after the review");
    tmux.type_line("revise it");
    tmux.wait_for("the revision", |s| s.contains("Revised as you asked."));
    let requests = server.requests();
    let texts = requests.last().expect("a request").user_texts();
    assert!(
        texts
            .iter()
            .any(|t| t.contains("say hello to the world instead")),
        "{texts:?}"
    );
    assert_eq!(texts.last().map(String::as_str), Some("revise it"));
    // Left, not taken: the user's tree has no notes.txt.
    assert!(!repo.path().join("notes.txt").exists());
}

/// The session's meta.json as the log ref has it now, if there is one.
fn meta_of(repo: &TestRepo) -> Option<serde_json::Value> {
    let refs = repo.git(&[
        "for-each-ref",
        "--format=%(refname)",
        "refs/agent/sessions/",
    ]);
    let name = refs.lines().next()?.to_owned();
    serde_json::from_str(&repo.git(&["show", &format!("{name}:meta.json")])).ok()
}

/// What is left in the session's journal (folded into the log ref when the session ends properly).
fn unfolded(repo: &TestRepo, id: &str) -> String {
    let journal = repo
        .path()
        .join(".git/agent/journal")
        .join(format!("{id}.jsonl"));
    fs::read_to_string(journal).unwrap_or_default()
}

fn wait_until(what: &str, ready: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ready() {
        assert!(Instant::now() < deadline, "waited 30 s for {what}");
        thread::sleep(Duration::from_millis(20));
    }
}

/// Issue 23, finding 14: a piped line that is not UTF-8 is taken with its bad bytes replaced and named on
/// stderr, and the lines after it still run (it once ended the chat silently with exit 0).
#[test]
fn piped_lines_that_are_not_utf8_are_decoded_lossily_and_the_rest_runs() {
    let repo = TestRepo::new();
    let server = Server::start(vec![
        Reply::text("one done"),
        Reply::text("two done"),
        Reply::text("three done"),
    ]);
    let file = repo.root().join("stdin.bin");
    fs::write(&file, b"one\nbad \xff\xfe bytes\r\nthree\n").expect("write stdin");
    let mut cmd = repo.agent(&server, &["chat"]);
    cmd.stdin(fs::File::open(&file).expect("open stdin"));
    let out = run(&mut cmd);
    out.assert_code(0);
    assert_eq!(out.stdout(), "one done\ntwo done\nthree done\n", "{out}");
    assert!(
        out.stderr().contains("line 2 of stdin is not UTF-8"),
        "{out}"
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(
        requests[2].user_texts(),
        ["one", "bad \u{fffd}\u{fffd} bytes", "three"]
    );
}

/// Issue 23, finding 15: piped chat takes SIGTERM and SIGHUP as `ask` does: mid-turn the turn ends as
/// terminated, the journal is folded and the exit code is 128 + the signal; at the prompt it closes the
/// session the same way (it once died with the log saying `crashed` and the journal unfolded).
#[test]
fn piped_chat_ends_on_sigterm_and_sighup_with_the_journal_folded() {
    for (signal, code, mid_turn) in [(libc::SIGTERM, 143, true), (libc::SIGHUP, 129, false)] {
        let repo = TestRepo::new();
        let gate = Gate::new();
        let first = if mid_turn {
            Reply::text("late").held(&gate)
        } else {
            Reply::text("first done")
        };
        let server = Server::start(vec![first]);
        let mut child = repo
            .agent(&server, &["chat"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("start the chat");
        let mut stdin = child.stdin.take().expect("piped");
        std::io::Write::write_all(&mut stdin, b"take your time\n").expect("write a prompt");
        if mid_turn {
            wait_until("the request", || server.requests().len() == 1);
        } else {
            wait_until("the turn's end in the log", || {
                meta_of(&repo).is_some_and(|m| m["status"] == "done")
            });
        }
        // SAFETY: signalling the child we started.
        unsafe { libc::kill(child.id() as i32, signal) };
        let out = child.wait_with_output().expect("wait for the chat");
        gate.open();
        drop(stdin);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{stderr}");
        let meta = meta_of(&repo).expect("the session's log");
        let status = if mid_turn { "terminated" } else { "done" };
        assert_eq!(meta["status"], status, "{meta}");
        let id = session_id(&repo);
        assert_eq!(unfolded(&repo, &id), "", "the journal was folded");
    }
}

/// Issue 23, finding 15: the terminal chat takes SIGTERM mid-turn as `ask` does: the turn ends as
/// terminated (not `interrupted`) and the chat exits 143 (not 0).
#[test]
fn a_terminal_chat_ends_on_sigterm_as_terminated_with_143() {
    if !tmux::available() {
        return;
    }
    let repo = TestRepo::new();
    let gate = Gate::new();
    let server = Server::start(vec![Reply::text("late").held(&gate)]);
    let tmux = chat(&repo, &server, &[]);
    tmux.type_line("take your time");
    wait_until("the request", || server.requests().len() == 1);
    let pid = tmux.pid().expect("the chat's pid");
    // SAFETY: signalling the process the test started in its pane.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    wait_until("the chat to exit", || tmux.exited());
    gate.open();
    assert_eq!(tmux.exit_status(), Some(143), "{}", tmux.screen());
    let meta = meta_of(&repo).expect("the session's log");
    assert_eq!(meta["status"], "terminated", "{meta}");
    let id = session_id(&repo);
    assert_eq!(unfolded(&repo, &id), "", "the journal was folded");
}

/// Issue 23, finding 13: streamed text whose chunks end in the last column loses nothing (the terminal's
/// pending wrap does not survive the cursor save/restore around each chunk; `r022` showed as `r02`). One
/// character per chunk puts a chunk's end at the margin on every row, whatever the row starts with.
#[test]
fn every_streamed_character_reaches_the_screen_where_lines_wrap() {
    if !tmux::available() {
        return;
    }
    use crate::common::server::{openai_chunk, openai_events};
    let repo = TestRepo::new();
    let line: String = (0..300).map(|i| format!("r{i:03}")).collect();
    let mut chunks: Vec<serde_json::Value> = line
        .chars()
        .map(|c| openai_chunk(json!({"content": c.to_string()}), None))
        .collect();
    // And chunks of exactly a row's width.
    let rows: String = (300..600).map(|i| format!("r{i:03}")).collect();
    let wide: Vec<char> = rows.chars().collect();
    chunks.push(openai_chunk(json!({"content": "\n"}), None));
    for piece in wide.chunks(usize::from(COLS)) {
        let piece: String = piece.iter().collect();
        chunks.push(openai_chunk(json!({"content": piece}), None));
    }
    chunks.push(openai_chunk(json!({"content": "\nEND-OF-ANSWER"}), None));
    chunks.push(openai_chunk(json!({}), Some("stop")));
    let server = Server::start(vec![Reply::sse_raw(openai_events(&chunks))]);
    let tmux = chat(&repo, &server, &[]);
    tmux.type_line("stream a long line");
    tmux.wait_for("the whole answer", |s| s.contains("END-OF-ANSWER"));
    at_prompt(&tmux, "the prompt");
    let joined: String = tmux.history().lines().collect();
    for (what, text) in [("one character a chunk", &line), ("a row a chunk", &rows)] {
        assert!(
            joined.contains(text.as_str()),
            "{what}: characters went missing:\n{}",
            tmux.history()
        );
    }
}
