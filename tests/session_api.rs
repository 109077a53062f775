//! The session API that the front-ends (chat, ACP, `fix`) build on, driven in-process with real git and the
//! scripted model server: several turns in one session on one branch, text that steers a running turn, a
//! cancel that ends one turn while the session lives on, and undo and compaction between turns. What each
//! turn records is read back through the real binary (`git agent show`).

use std::time::Duration;

use git_agent::agent::{AgentSession, SafetyOptions, SessionOptions, TurnControl};
use git_agent::model::retry::RetryPolicy;
use git_agent::protocol::{Event, Never, Sink, Status};
use git_agent::safety::rules::Rules;
use git_agent::safety::sandbox::{Mode, SandboxConfig};
use serde_json::json;

use crate::common::{agent_commits, call, trailer, Reply, Server, TestRepo, API_KEY};

/// A front-end: it keeps what the session told it, and may act when an event arrives (as one does when the
/// user types or presses Ctrl-C while a turn runs).
struct Front {
    seen: Vec<String>,
    on: Box<dyn FnMut(&Event<'_>) + Send>,
}

impl Front {
    fn new() -> Front {
        Front::acting(|_| {})
    }

    fn acting(on: impl FnMut(&Event<'_>) + Send + 'static) -> Front {
        Front {
            seen: Vec::new(),
            on: Box::new(on),
        }
    }
}

impl Sink for Front {
    fn emit(&mut self, event: &Event<'_>) {
        let line = match event {
            Event::Session { id, .. } => format!("session {id}"),
            Event::ToolCall { name, kind, .. } => format!("call {name} {kind:?}"),
            Event::ToolResult { ok, summary, .. } => format!("result {ok} {summary}"),
            Event::Step { step, .. } => format!("step {step}"),
            Event::Done {
                status, exit_code, ..
            } => format!("done {status} {exit_code}"),
            Event::Warning(text) => format!("warning {text}"),
            Event::Error(text) => format!("error {text}"),
            _ => String::new(),
        };
        if !line.is_empty() {
            self.seen.push(line);
        }
        (self.on)(event);
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}

/// The repo, with an identity of its own: the session commits in this process, not in a hermetic child.
fn repo() -> TestRepo {
    let repo = TestRepo::new();
    repo.git(&["config", "user.name", "Test User"]);
    repo.git(&["config", "user.email", "test@example.com"]);
    repo
}

fn options(server: &Server) -> SessionOptions {
    let url = server.base_url();
    let env = move |name: &str| match name {
        "OPENAI_BASE_URL" => Some(url.clone()),
        "OPENAI_API_KEY" => Some(API_KEY.to_string()),
        _ => None,
    };
    SessionOptions {
        model: git_agent::config::resolve(Some("openai/test-model"), &env).expect("a model"),
        max_steps: 20,
        max_time: None,
        max_tokens: None,
        run_timeout: Duration::from_secs(30),
        connect_timeout: Duration::from_secs(5),
        idle_timeout: Duration::from_secs(30),
        retry: RetryPolicy::default(),
        safety: SafetyOptions {
            rules: Rules::default(),
            sandbox: SandboxConfig {
                mode: Mode::Off,
                network: true,
                writable: Vec::new(),
            },
        },
        resume: None,
        here: false,
        title: None,
    }
}

fn write(path: &str, content: &str) -> Reply {
    Reply::tool_calls(vec![call(
        "write_file",
        json!({"path": path, "content": content}),
    )])
}

/// `git agent show <id>` through the binary: what the session log holds.
fn show(repo: &TestRepo, server: &Server, id: &str) -> String {
    let out = repo.run_agent(server, &["show", id]);
    out.assert_code(0);
    out.stdout().to_string()
}

#[test]
fn turns_continue_one_conversation_on_one_branch() {
    let repo = repo();
    let server = Server::start(vec![
        write("a.txt", "A\n"),
        Reply::text("wrote a"),
        write("b.txt", "B\n"),
        Reply::text("wrote b"),
    ]);
    let rt = runtime();
    let mut front = Front::new();
    let control = TurnControl::new();
    let mut session = rt
        .block_on(AgentSession::open(
            repo.path(),
            options(&server),
            &mut front,
        ))
        .expect("the session opens");
    let id = session.id().to_string();
    assert_eq!(session.branch(), format!("agent/{id}"));
    let first = rt
        .block_on(session.turn("write a", &mut front, &mut Never, &control))
        .expect("turn 1");
    assert_eq!((first.status.clone(), first.exit_code), (Status::Done, 0));
    assert_eq!(first.answer, "wrote a");
    assert_eq!(session.steps(), 1);
    let second = rt
        .block_on(session.turn("now b", &mut front, &mut Never, &control))
        .expect("turn 2");
    assert_eq!(
        (second.status, second.answer.as_str()),
        (Status::Done, "wrote b")
    );
    assert_eq!(session.steps(), 2);
    assert!(session.context_used() > 0 && session.context_used() < session.context_window());
    session.close();

    // The second turn continued the conversation of the first.
    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    assert_eq!(requests[2].user_texts(), ["write a", "now b"]);
    // Both steps on the one branch, the second on top of the first.
    let commits = agent_commits(&repo, &id);
    assert_eq!(commits.len(), 2, "{commits:?}");
    assert_eq!(trailer(&repo, &commits[1], "Agent-Step"), "2");
    assert_eq!(
        repo.git(&["rev-parse", &format!("{}^", commits[1])]).trim(),
        commits[0]
    );
    assert_eq!(
        repo.git(&["show", &format!("agent/{id}:a.txt")]),
        "A\n",
        "turn 1's file is still on the branch"
    );
    // The session line is shown once; each turn ends with its own `done`.
    let sessions = front
        .seen
        .iter()
        .filter(|l| l.starts_with("session"))
        .count();
    assert_eq!(sessions, 1, "{:?}", front.seen);
    let dones: Vec<_> = front
        .seen
        .iter()
        .filter(|l| l.starts_with("done"))
        .collect();
    assert_eq!(dones, ["done done 0", "done done 0"]);
    assert!(front.seen.contains(&"call write_file Edit".to_string()));
    // The log holds both turns, titled by the first prompt.
    let shown = show(&repo, &server, &id);
    assert!(
        shown.contains("> write a") && shown.contains("> now b"),
        "{shown}"
    );
    assert_eq!(shown.matches("-- done").count(), 2, "{shown}");
    let log = repo.run_agent(&server, &["log"]);
    assert!(log.stdout().contains("write a"), "{}", log.stdout());
}

#[test]
fn steered_text_joins_the_running_turn() {
    let repo = repo();
    let server = Server::start(vec![
        Reply::text("here is a first answer"),
        Reply::text("and the steered one"),
    ]);
    let rt = runtime();
    let control = TurnControl::new();
    let steering = control.clone();
    let mut steered = false;
    // The user types while the first answer streams.
    let mut front = Front::acting(move |event| {
        if matches!(event, Event::Text(_)) && !steered {
            steered = true;
            steering.steer("also mention the README");
        }
    });
    let mut session = rt
        .block_on(AgentSession::open(
            repo.path(),
            options(&server),
            &mut front,
        ))
        .expect("the session opens");
    let id = session.id().to_string();
    let end = rt
        .block_on(session.turn("say hello", &mut front, &mut Never, &control))
        .expect("the turn");
    session.close();
    // The model had answered without tool calls, and the turn went on with the steered text.
    assert_eq!(
        (end.status, end.answer.as_str()),
        (Status::Done, "and the steered one")
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        requests[1].user_texts(),
        ["say hello", "also mention the README"]
    );
    assert!(!control.has_steering());
    let shown = show(&repo, &server, &id);
    assert!(shown.contains("> also mention the README"), "{shown}");
}

#[test]
fn a_cancel_ends_one_turn_and_the_session_lives_on() {
    let repo = repo();
    let sleep = call("run", json!({"command": "sleep 600"}));
    let never_run = call("write_file", json!({"path": "x.txt", "content": "x"}));
    let never_run_id = never_run.id.clone();
    let server = Server::start(vec![
        Reply::tool_calls(vec![sleep, never_run]),
        write("c.txt", "C\n"),
        Reply::text("done now"),
    ]);
    let rt = runtime();
    let control = TurnControl::new();
    let canceller = control.clone();
    // Ctrl-C (or ACP's session/cancel) as soon as the command is shown.
    let mut front = Front::acting(move |event| {
        if matches!(event, Event::ToolCall { name: "run", .. }) {
            canceller.cancel();
        }
    });
    let mut session = rt
        .block_on(AgentSession::open(
            repo.path(),
            options(&server),
            &mut front,
        ))
        .expect("the session opens");
    let id = session.id().to_string();
    let end = rt
        .block_on(session.turn("sleep, then write", &mut front, &mut Never, &control))
        .expect("turn 1");
    assert_eq!((end.status, end.exit_code), (Status::Interrupted, 130));
    assert!(
        front.seen.contains(&"result false interrupted".to_string()),
        "the command was killed, not waited for: {:?}",
        front.seen
    );
    assert_eq!(session.steps(), 0);
    // The next turn has a control of its own and runs normally.
    let mut front = Front::new();
    let end = rt
        .block_on(session.turn("go on", &mut front, &mut Never, &TurnControl::new()))
        .expect("turn 2");
    assert_eq!((end.status, end.exit_code), (Status::Done, 0));
    assert_eq!(session.steps(), 1);
    let checkout = session.session().root().to_path_buf();
    session.close();
    assert!(
        !checkout.join("x.txt").exists(),
        "the call after the cancel never ran"
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    let result = requests[1].tool_result(&never_run_id);
    assert!(
        result.contains("interrupted by the user before this call ran"),
        "{result}"
    );
    let shown = show(&repo, &server, &id);
    assert!(
        shown.contains("-- interrupted") && shown.contains("-- done"),
        "{shown}"
    );
}

#[test]
fn undo_and_compaction_between_turns() {
    let repo = repo();
    let server = Server::start(vec![
        write("a.txt", "A\n"),
        Reply::text("wrote a"),
        write("b.txt", "B\n"),
        Reply::text("wrote b"),
    ]);
    server.answer_summaries(Reply::text(
        "## Goal\nwrite files\n## Done so far\na.txt, undone",
    ));
    let rt = runtime();
    let mut front = Front::new();
    let control = TurnControl::new();
    let mut session = rt
        .block_on(AgentSession::open(
            repo.path(),
            options(&server),
            &mut front,
        ))
        .expect("the session opens");
    let id = session.id().to_string();
    let base = session.session().tip;
    rt.block_on(session.turn("write a", &mut front, &mut Never, &control))
        .expect("turn 1");
    assert_eq!(session.steps(), 1);
    let step1 = session.session().tip;

    // `/undo`: the branch and the checkout go back; the log says so.
    let undone = session.undo(1).expect("undo");
    assert_eq!((undone.from, undone.to, undone.steps), (step1, base, 0));
    assert!(!session.session().root().join("a.txt").exists());
    // `/compact the files`: everything but the newest exchange is summarised, with the user's focus.
    let compacted = rt
        .block_on(session.compact(Some("the files"), &mut front, &control))
        .expect("compact");
    assert!(compacted);

    rt.block_on(session.turn("now b", &mut front, &mut Never, &control))
        .expect("turn 2");
    assert_eq!(session.steps(), 1);
    session.close();

    // Turn 2's step sits on the base: the undone step is not its parent.
    let commits = agent_commits(&repo, &id);
    assert_eq!(commits.len(), 1, "{commits:?}");
    assert_eq!(
        repo.git(&["rev-parse", &format!("{}^", commits[0])]).trim(),
        base.to_string()
    );
    assert_eq!(
        repo.git(&["ls-tree", "--name-only", &format!("agent/{id}")]),
        "README.md\nb.txt\nfile.txt\n"
    );
    let requests = server.requests();
    let summary = requests
        .iter()
        .find(|r| !r.has_tools())
        .expect("a summarising request");
    assert!(
        summary.user_texts()[0].contains("focus on: the files"),
        "{:?}",
        summary.user_texts()
    );
    let turn2 = requests.iter().rfind(|r| r.has_tools()).expect("turn 2");
    let texts = turn2.user_texts();
    assert!(texts[0].starts_with("[Context summary]"), "{texts:?}");
    assert!(texts[0].contains("a.txt, undone"), "{texts:?}");
    assert_eq!(texts.last().map(String::as_str), Some("now b"));
    let shown = show(&repo, &server, &id);
    assert!(shown.contains("-- undo 1 step"), "{shown}");
    assert!(
        shown.contains("-- context: 3 older messages summarised"),
        "{shown}"
    );
    assert!(front.seen.contains(&"call write_file Edit".to_string()));
}
