//! The session API that the front-ends (chat, ACP, `fix`) build on, driven in-process with real git and the
//! scripted model server: several turns in one session on one branch, text that steers a running turn, a
//! cancel that ends one turn while the session lives on, and undo and compaction between turns. What each
//! turn records is read back through the real binary (`git agent show`).

use std::time::Duration;

use git_agent::session::{
    AgentSession, Event, Mode, Never, RetryPolicy, Rules, SafetyOptions, SandboxConfig,
    SessionOptions, Sink, Status, TurnControl, TurnEnd,
};
use serde_json::json;

use crate::common::{agent_commits, call, trailer, Reply, Server, TestRepo, API_KEY};

/// A front-end: it keeps what the session told it, and may act when an event arrives (as one does when the
/// user types or presses Ctrl-C while a turn runs).
struct Front {
    seen: Vec<String>,
    on: Box<dyn FnMut(&Event) + Send>,
}

impl Front {
    fn new() -> Front {
        Front::acting(|_| {})
    }

    fn acting(on: impl FnMut(&Event) + Send + 'static) -> Front {
        Front {
            seen: Vec::new(),
            on: Box::new(on),
        }
    }
}

impl Sink for Front {
    fn emit(&mut self, event: &Event) {
        let line = match event {
            Event::Session { id, .. } => format!("session {id}"),
            Event::ToolCall { name, kind, .. } => format!("call {name} {kind:?}"),
            Event::ToolResult { ok, summary, .. } => format!("result {ok} {summary}"),
            Event::Step { step, .. } => format!("step {step}"),
            Event::Done {
                status, exit_code, ..
            } => format!("done {status} {exit_code}"),
            Event::Warning { message: text } => format!("warning {text}"),
            Event::Error { message: text } => format!("error {text}"),
            _ => String::new(),
        };
        if !line.is_empty() {
            self.seen.push(line);
        }
        (self.on)(event);
    }
}

/// A repo, the scripted model and a runtime: what a front-end process has.
struct Fixture {
    repo: TestRepo,
    server: Server,
    rt: tokio::runtime::Runtime,
}

impl Fixture {
    fn new(script: Vec<Reply>) -> Fixture {
        let repo = TestRepo::new();
        // The session commits in this process, not in a hermetic child: the repo names its own identity.
        repo.git(&["config", "user.name", "Test User"]);
        repo.git(&["config", "user.email", "test@example.com"]);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        Fixture {
            repo,
            server: Server::start(script),
            rt,
        }
    }

    fn open(&self, front: &mut Front) -> AgentSession {
        let opened = AgentSession::open(self.repo.path(), options(&self.server), front);
        self.rt.block_on(opened).expect("the session opens")
    }

    fn turn(
        &self,
        session: &mut AgentSession,
        prompt: &str,
        front: &mut Front,
        control: &TurnControl,
    ) -> TurnEnd {
        let mut never = Never;
        let turn = session.turn(prompt, front, &mut never, control);
        self.rt.block_on(turn).expect("the turn runs")
    }

    /// `git agent show <id>` through the binary: what the session log holds.
    fn show(&self, id: &str) -> String {
        let out = self.repo.run_agent(&self.server, &["show", id]);
        out.assert_code(0);
        out.stdout().to_string()
    }
}

fn options(server: &Server) -> SessionOptions {
    let url = server.base_url();
    let env = move |name: &str| match name {
        "OPENAI_BASE_URL" => Some(url.clone()),
        "OPENAI_API_KEY" => Some(API_KEY.to_string()),
        _ => None,
    };
    SessionOptions {
        model: git_agent::session::resolve_model(Some("openai/test-model"), &env).expect("a model"),
        max_steps: 20,
        max_time: None,
        max_tokens: None,
        max_cost: None,
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
        memory: Some(git_agent::session::MemorySettings::default()),
        // The test repo has no settings files: nothing to load.
        settings: git_agent::session::Settings::default(),
    }
}

fn write(path: &str, content: &str) -> Reply {
    Reply::tool_calls(vec![call(
        "write_file",
        json!({"path": path, "content": content}),
    )])
}

#[test]
fn turns_continue_one_conversation_on_one_branch() {
    let f = Fixture::new(vec![
        write("a.txt", "A\n"),
        Reply::text("wrote a"),
        write("b.txt", "B\n"),
        Reply::text("wrote b"),
    ]);
    let mut front = Front::new();
    let control = TurnControl::new();
    let mut session = f.open(&mut front);
    let id = session.id().to_string();
    assert_eq!(session.branch(), format!("agent/{id}"));
    let first = f.turn(&mut session, "write a", &mut front, &control);
    assert_eq!((first.status, first.exit_code), (Status::Done, 0));
    assert_eq!(first.answer, "wrote a");
    assert_eq!(session.steps(), 1);
    let second = f.turn(&mut session, "now b", &mut front, &control);
    assert_eq!(
        (second.status, second.answer.as_str()),
        (Status::Done, "wrote b")
    );
    assert_eq!(session.steps(), 2);
    assert!(session.context_used() > 0 && session.context_used() < session.context_window());
    session.close();

    // The second turn continued the conversation of the first.
    let requests = f.server.requests();
    assert_eq!(requests.len(), 4);
    assert_eq!(requests[2].user_texts(), ["write a", "now b"]);
    // Both steps on the one branch, the second on top of the first.
    let repo = &f.repo;
    let commits = agent_commits(repo, &id);
    assert_eq!(commits.len(), 2, "{commits:?}");
    assert_eq!(trailer(repo, &commits[1], "Agent-Step"), "2");
    let parent = repo.git(&["rev-parse", &format!("{}^", commits[1])]);
    assert_eq!(parent.trim(), commits[0]);
    let a = repo.git(&["show", &format!("agent/{id}:a.txt")]);
    assert_eq!(a, "A\n", "turn 1's file is still on the branch");
    // The session line is shown once; each turn ends with its own `done`.
    let lines = |prefix: &str| -> Vec<&String> {
        front
            .seen
            .iter()
            .filter(|l| l.starts_with(prefix))
            .collect()
    };
    assert_eq!(lines("session").len(), 1, "{:?}", front.seen);
    assert_eq!(lines("done"), ["done done 0", "done done 0"]);
    assert!(lines("call").contains(&&"call write_file Edit".to_string()));
    // The log holds both turns, titled by the first prompt.
    let shown = f.show(&id);
    assert!(
        shown.contains("> write a") && shown.contains("> now b"),
        "{shown}"
    );
    assert_eq!(shown.matches("-- done").count(), 2, "{shown}");
    let log = repo.run_agent(&f.server, &["log"]);
    assert!(log.stdout().contains("write a"), "{}", log.stdout());
}

#[test]
fn steered_text_joins_the_running_turn() {
    let f = Fixture::new(vec![
        Reply::text("here is a first answer"),
        Reply::text("and the steered one"),
    ]);
    let control = TurnControl::new();
    let steering = control.clone();
    let mut steered = false;
    // The user types while the first answer streams.
    let mut front = Front::acting(move |event| {
        if matches!(event, Event::Text { .. }) && !steered {
            steered = true;
            steering.steer("also mention the README");
        }
    });
    let mut session = f.open(&mut front);
    let id = session.id().to_string();
    let end = f.turn(&mut session, "say hello", &mut front, &control);
    session.close();
    // The model had answered without tool calls, and the turn went on with the steered text.
    assert_eq!(
        (end.status, end.answer.as_str()),
        (Status::Done, "and the steered one")
    );
    let requests = f.server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        requests[1].user_texts(),
        ["say hello", "also mention the README"]
    );
    assert!(!control.has_steering());
    let shown = f.show(&id);
    assert!(shown.contains("> also mention the README"), "{shown}");
}

#[test]
fn a_cancel_ends_one_turn_and_the_session_lives_on() {
    let sleep = call("run", json!({"command": "sleep 600"}));
    let never_run = call("write_file", json!({"path": "x.txt", "content": "x"}));
    let never_run_id = never_run.id.clone();
    let f = Fixture::new(vec![
        Reply::tool_calls(vec![sleep, never_run]),
        write("c.txt", "C\n"),
        Reply::text("done now"),
    ]);
    let control = TurnControl::new();
    let canceller = control.clone();
    // Ctrl-C (or ACP's session/cancel) as soon as the command is shown.
    let mut front = Front::acting(move |event| {
        if matches!(event, Event::ToolCall { name, .. } if name == "run") {
            canceller.cancel();
        }
    });
    let mut session = f.open(&mut front);
    let id = session.id().to_string();
    let end = f.turn(&mut session, "sleep, then write", &mut front, &control);
    assert_eq!((end.status, end.exit_code), (Status::Interrupted, 130));
    assert!(
        front.seen.contains(&"result false interrupted".to_string()),
        "the command was killed, not waited for: {:?}",
        front.seen
    );
    assert_eq!(session.steps(), 0);
    // The next turn has a control of its own and runs normally.
    let mut front = Front::new();
    let end = f.turn(&mut session, "go on", &mut front, &TurnControl::new());
    assert_eq!((end.status, end.exit_code), (Status::Done, 0));
    assert_eq!(session.steps(), 1);
    let checkout = session.session().root().to_path_buf();
    session.close();
    assert!(
        !checkout.join("x.txt").exists(),
        "the call after the cancel never ran"
    );
    let requests = f.server.requests();
    assert_eq!(requests.len(), 3);
    let result = requests[1].tool_result(&never_run_id);
    assert!(
        result.contains("interrupted by the user before this call ran"),
        "{result}"
    );
    let shown = f.show(&id);
    assert!(
        shown.contains("-- interrupted") && shown.contains("-- done"),
        "{shown}"
    );
}

#[test]
fn undo_and_compaction_between_turns() {
    let f = Fixture::new(vec![
        write("a.txt", "A\n"),
        Reply::text("wrote a"),
        write("b.txt", "B\n"),
        Reply::text("wrote b"),
    ]);
    f.server.answer_summaries(Reply::text(
        "## Goal\nwrite files\n## Done so far\na.txt, undone",
    ));
    let mut front = Front::new();
    let control = TurnControl::new();
    let mut session = f.open(&mut front);
    let id = session.id().to_string();
    let base = session.session().tip;
    f.turn(&mut session, "write a", &mut front, &control);
    assert_eq!(session.steps(), 1);
    let step1 = session.session().tip;

    // `/undo`: the branch and the checkout go back; the log says so.
    let undone = session.undo(1).expect("undo");
    assert_eq!((undone.from, undone.to, undone.steps), (step1, base, 0));
    assert!(!session.session().root().join("a.txt").exists());
    // `/compact the files`: everything but the newest exchange is summarised, with the user's focus.
    let compacted =
        f.rt.block_on(session.compact(Some("the files"), &mut front, &control))
            .expect("compact");
    assert!(compacted);

    f.turn(&mut session, "now b", &mut front, &control);
    assert_eq!(session.steps(), 1);
    session.close();

    // Turn 2's step sits on the base: the undone step is not its parent.
    let repo = &f.repo;
    let commits = agent_commits(repo, &id);
    assert_eq!(commits.len(), 1, "{commits:?}");
    let parent = repo.git(&["rev-parse", &format!("{}^", commits[0])]);
    assert_eq!(parent.trim(), base.to_string());
    assert_eq!(
        repo.git(&["ls-tree", "--name-only", &format!("agent/{id}")]),
        "README.md\nb.txt\nfile.txt\n"
    );
    let requests = f.server.requests();
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
    let shown = f.show(&id);
    assert!(shown.contains("-- undo 1 step"), "{shown}");
    assert!(
        shown.contains("-- context: 3 older messages summarised"),
        "{shown}"
    );
    assert!(front.seen.contains(&"call write_file Edit".to_string()));
}

#[test]
fn memory_across_turns_is_given_once_and_written_when_a_turn_completes() {
    let proposal = call(
        "remember",
        json!({"text": "Widgets are registered in src/widgets/mod.rs", "why": "read it"}),
    );
    let f = Fixture::new(vec![
        Reply::tool_calls(vec![proposal]),
        Reply::tool_calls(vec![call(
            "finish",
            json!({"status": "blocked", "summary": "which widget?"}),
        )]),
        Reply::text("added the blue widget"),
    ]);
    let added = f.repo.run_agent(
        &f.server,
        &["memory", "add", "Widgets need a snapshot test"],
    );
    added.assert_code(0);
    let entry = added.stdout().trim().to_string();
    let mut front = Front::new();
    let control = TurnControl::new();
    let mut session = f.open(&mut front);
    let first = f.turn(&mut session, "add a widget", &mut front, &control);
    assert_eq!(first.status, Status::Blocked);
    assert_eq!(session.memory().injected(), std::slice::from_ref(&entry));
    assert_eq!(
        session.memory().pending().len(),
        1,
        "blocked: still a proposal"
    );
    let second = f.turn(&mut session, "the blue one", &mut front, &control);
    assert_eq!(second.status, Status::Done);
    assert!(session.memory().pending().is_empty(), "completed: written");
    session.close();

    let requests = f.server.requests();
    let memory_messages = |i: usize| {
        requests[i]
            .user_texts()
            .iter()
            .filter(|t| t.starts_with("Project memory:"))
            .count()
    };
    assert_eq!(memory_messages(0), 1, "given at the first request");
    assert_eq!(memory_messages(2), 1, "and not again at the next turn");
    let listed = f.repo.run_agent(&f.server, &["memory", "list", "--json"]);
    let lines: Vec<serde_json::Value> = listed
        .stdout()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{}", listed.stdout());
    let old = lines.iter().find(|l| l["id"] == entry.as_str()).unwrap();
    // Settled once, by the first turn's outcome (blocked): 0.70 - 0.15.
    assert_eq!(
        (old["uses"].clone(), old["confidence"].clone()),
        (json!(1), json!(0.55))
    );
    assert!(lines
        .iter()
        .any(|l| l["text"] == "Widgets are registered in src/widgets/mod.rs"));
}
