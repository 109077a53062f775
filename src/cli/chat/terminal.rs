//! The interactive chat on a terminal: the session opened first (its errors print as for any command), then
//! the terminal taken over (raw mode, the screen of [`crate::ui::chat`]) until the user leaves.
//!
//! One loop owns the keys. At the prompt they go to the line editor. While a turn (or a command) runs, the
//! turn's future is `select!`ed against the keys: Ctrl-C or Esc Esc cancels it through its
//! [`TurnControl`], Enter sends the typed text as steering, an open approval question takes y/n/a, and
//! everything else edits the input as usual. Nothing polls: between keys the loop waits on the channel, a
//! signal or the turn.

use std::future::Future;
use std::io;
use std::sync::{Arc, Mutex};

use tokio::signal::unix::{signal, Signal, SignalKind};
use tokio::sync::mpsc::UnboundedReceiver;

use super::super::ask::SessionFlags;
use super::super::context::Context;
use super::super::error::{CommandError, ErrorKind};
use super::commands::{self, Action as Command, Env, Reply};
use super::history::History;
use crate::agent::{AgentSession, Resume, TurnControl, TurnEnd};
use crate::protocol::{Approval, Status};
use crate::ui::chat::{
    lock, tty, Action, ChatApprover, ChatSink, Editor, Input, Key, RawMode, Reader, Screen, Shared,
    Term,
};
use crate::ui::{neutralize, use_color, HumanSink};

const STDIN: i32 = 0;
const STDERR: i32 = 2;

const IDLE: &str = "ask anything · /help lists the commands · Ctrl-D exits";
const ARMED: &str = "press Ctrl-C again to exit (or Ctrl-D)";
const RUNNING: &str = "working… type and Enter to steer · Ctrl-C or Esc Esc cancels";

pub async fn run(ctx: &mut Context, flags: &SessionFlags) -> Result<(), CommandError> {
    // Warnings while opening (a sandbox that fell back, MCP servers) print as they would for `ask`.
    let mut opening = HumanSink::live();
    let session = super::session::open(ctx, flags, flags.resume(), &mut opening).await?;
    let resumed = flags.resume().is_some();
    let history = History::new(session.store().common_dir());
    let raw = RawMode::enter(STDIN)
        .map_err(|e| CommandError::internal(format!("cannot set up the terminal: {e}")))?;
    let mut ui = Ui::new(history, commands::names_for(&session))?;
    ui.start(&session, resumed);
    let session = chat(&mut ui, ctx, flags, session).await;
    lock(&ui.screen).finish();
    drop(raw);
    if let Some(session) = session {
        if let Some(hint) = super::session::close(ctx, session).await {
            eprintln!("hint: {hint}");
        }
    }
    match ui.signal {
        Some(signal) => Err(CommandError::shown(ErrorKind::Terminated(signal))),
        None => Ok(()),
    }
}

/// Prompts and turns until the user leaves; returns the session it ends in (none when one could not be
/// opened again after a review: that error has been shown).
async fn chat(
    ui: &mut Ui,
    ctx: &Context,
    flags: &SessionFlags,
    mut session: AgentSession,
) -> Option<AgentSession> {
    let mut pending: Option<String> = None;
    loop {
        ui.refresh(&session);
        let line = match pending.take() {
            Some(line) => line,
            None => match ui.prompt().await {
                Some(line) => line,
                None => return Some(session),
            },
        };
        if let Some(parsed) = commands::parse_for(&line, &session) {
            ui.echo(&line, false);
            let control = TurnControl::new();
            let mut sink = ChatSink::new(Arc::clone(&ui.term));
            let env = Env {
                session: &mut session,
                sink: &mut sink,
                control: &control,
                ctx,
            };
            let reply = ui.drive(commands::run(&parsed, env), &control, false).await;
            let action = match reply {
                Ok(reply) => {
                    ui.reply(&reply);
                    reply.action
                }
                Err(err) => {
                    ui.error(&err);
                    Command::Continue
                }
            };
            let action = match action {
                Command::Review => ui.review(ctx, &session),
                other => other,
            };
            match action {
                Command::Continue => {}
                Command::Review => {}
                Command::Reload => {
                    let mut sink = ChatSink::new(Arc::clone(&ui.term));
                    session = super::session::reload(ctx, flags, session, &mut sink).await?;
                    ui.say(
                        "-- session opened again: review comments join the next turn",
                        "2",
                    );
                }
                Command::Exit => return Some(session),
                Command::New => session = ui.switch(ctx, flags, session, None).await,
                Command::Resume(id) => {
                    session = ui.switch(ctx, flags, session, Some(Resume::Id(id))).await
                }
            }
        } else {
            ui.echo(&line, false);
            for warning in super::session::attach_pasted_images(ctx.cwd(), &mut session, &line) {
                ui.say(&format!("warning: {warning}"), "33");
            }
            pending = ui.turn(&mut session, &line).await;
        }
        if ui.closed {
            return Some(session);
        }
    }
}

/// The terminal side of the loop: screen, editor, keys and signals.
struct Ui {
    term: Shared,
    screen: Arc<Mutex<Screen>>,
    editor: Editor,
    history: History,
    keys: UnboundedReceiver<Input>,
    reader: Reader,
    winch: Signal,
    hangup: Signal,
    terminate: Signal,
    placeholder: &'static str,
    /// Ctrl-C was pressed at an empty prompt: another one exits.
    armed: bool,
    /// The last key was Esc (Esc Esc cancels a turn, clears the input at the prompt).
    esc: bool,
    /// The terminal is gone or the process was told to stop: leave after the turn.
    closed: bool,
    /// SIGTERM or SIGHUP ended the chat: its exit code is 128 + this.
    signal: Option<i32>,
    color: bool,
}

impl Ui {
    fn new(history: History, names: Vec<String>) -> Result<Ui, CommandError> {
        let setup =
            |e: io::Error| CommandError::internal(format!("cannot set up the terminal: {e}"));
        let (reader, keys) = Reader::spawn(STDIN).map_err(setup)?;
        let (rows, cols) = tty::size(STDERR);
        let color = use_color(&io::stderr());
        let screen = Arc::new(Mutex::new(Screen::new(
            Box::new(io::stderr()),
            rows,
            cols,
            color,
        )));
        Ok(Ui {
            term: Term::new(Arc::clone(&screen)),
            screen,
            editor: Editor::new(history.load(), names),
            history,
            keys,
            reader,
            winch: signal(SignalKind::window_change()).map_err(setup)?,
            hangup: signal(SignalKind::hangup()).map_err(setup)?,
            terminate: signal(SignalKind::terminate()).map_err(setup)?,
            placeholder: IDLE,
            armed: false,
            esc: false,
            closed: false,
            signal: None,
            color,
        })
    }

    /// Draws the screen and the header.
    fn start(&mut self, session: &AgentSession, resumed: bool) {
        self.refresh(session);
        self.redraw();
        lock(&self.screen).start();
        self.header(session, resumed);
    }

    fn header(&self, session: &AgentSession, resumed: bool) {
        let what = if resumed {
            "resumed session"
        } else {
            "session"
        };
        let mut text = format!(
            "git agent chat · {what} {} on {} ({})",
            session.id(),
            session.branch(),
            session.model_name()
        );
        if resumed {
            text.push_str(&format!(
                "\n`git agent show {}` has the conversation so far",
                session.id()
            ));
        }
        text.push_str("\n/help lists the commands · Ctrl-C cancels a turn · Ctrl-D exits");
        self.say(&neutralize(&text), "2");
    }

    /// The status line from the session (between turns, when it can be asked).
    fn refresh(&self, session: &AgentSession) {
        let mut t = lock(&self.term);
        let usage = session.usage();
        t.status.model = session.model_name();
        t.status.branch = session.branch().to_owned();
        t.status.context_used = session.context_used();
        t.status.context_window = session.context_window();
        t.status.input_tokens = usage.input_tokens;
        t.status.output_tokens = usage.output_tokens;
        t.status.cost = session.cost();
        t.status.steps = session.steps();
        t.status.busy = false;
        t.show_status();
    }

    fn busy(&mut self, busy: bool) {
        let mut t = lock(&self.term);
        t.status.busy = busy;
        t.show_status();
        drop(t);
        self.placeholder = if busy { RUNNING } else { IDLE };
        self.redraw();
    }

    /// The input as the editor has it (or the open approval question).
    fn redraw(&self) {
        if lock(&self.term).asking() {
            return;
        }
        let mut screen = lock(&self.screen);
        let width = usize::from(screen.cols());
        let view = self
            .editor
            .view("> ", self.placeholder, width, screen.max_input_rows());
        screen.set_input(view);
    }

    /// Reads keys until a prompt is entered; `None` when the user leaves.
    async fn prompt(&mut self) -> Option<String> {
        self.placeholder = IDLE;
        self.redraw();
        loop {
            let input = tokio::select! {
                input = self.keys.recv() => input,
                _ = self.winch.recv() => {
                    self.resized();
                    continue;
                }
                _ = self.hangup.recv() => {
                    self.signal = Some(crate::sys::signal::SIGHUP);
                    None
                }
                _ = self.terminate.recv() => {
                    self.signal = Some(crate::sys::signal::SIGTERM);
                    None
                }
            };
            let Some(Input::Key(key)) = input else {
                self.closed = true;
                return None;
            };
            let esc = std::mem::take(&mut self.esc);
            let armed = std::mem::take(&mut self.armed);
            match self.editor.handle(key) {
                Action::Submit(text) if text.trim().is_empty() => {}
                Action::Submit(text) => {
                    self.history.add(&text);
                    return Some(text);
                }
                Action::Interrupt if self.editor.is_empty() => {
                    if armed {
                        return None;
                    }
                    self.armed = true;
                }
                Action::Interrupt => self.editor.clear(),
                Action::Eof => return None,
                Action::Esc if esc => self.editor.clear(),
                Action::Esc => self.esc = true,
                other => self.common(other),
            }
            self.placeholder = if self.armed { ARMED } else { IDLE };
            self.redraw();
        }
    }

    /// Runs one turn of `prompt`, with the keys live; returns text to send as the next turn (steering that
    /// came too late to join this one).
    async fn turn(&mut self, session: &mut AgentSession, prompt: &str) -> Option<String> {
        let control = TurnControl::new();
        let term = Arc::clone(&self.term);
        let mut sink = ChatSink::new(Arc::clone(&term));
        let mut approver = ChatApprover::new(term);
        let turn = session.turn(prompt, &mut sink, &mut approver, &control);
        let end = self.drive(turn, &control, true).await;
        lock(&self.term).forget_question();
        let left = control.take_steering().join("\n");
        match end {
            Ok(TurnEnd {
                status: Status::Interrupted,
                ..
            }) => {
                self.say(
                    &format!(
                        "-- interrupted; the steps so far stay on {}",
                        session.branch()
                    ),
                    "2",
                );
            }
            // It came after the model's last request: it is the next prompt.
            Ok(_) if !left.is_empty() => return Some(left),
            Ok(_) => {}
            Err(err) => self.error(&CommandError::from(err)),
        }
        if !left.is_empty() {
            // Nothing typed is lost: it comes back to the prompt, to send or change.
            self.editor.set_text(&left);
            self.redraw();
        }
        None
    }

    /// Awaits `work` with the keys live: Ctrl-C / Esc Esc cancel it through `control`, Enter steers (when
    /// `steer`), y/n/a answer an open approval question.
    async fn drive<F: Future>(&mut self, work: F, control: &TurnControl, steer: bool) -> F::Output {
        tokio::pin!(work);
        self.busy(true);
        let out = loop {
            tokio::select! {
                out = &mut work => break out,
                input = self.keys.recv(), if !self.closed => match input {
                    Some(Input::Key(key)) => self.while_running(key, control, steer),
                    _ => self.stop(control),
                },
                _ = self.winch.recv() => self.resized(),
                _ = self.hangup.recv(), if !self.closed => self.stop_for(control, crate::sys::signal::SIGHUP),
                _ = self.terminate.recv(), if !self.closed => self.stop_for(control, crate::sys::signal::SIGTERM),
            }
        };
        self.busy(false);
        out
    }

    /// The terminal went away or the process must stop: cancel, and leave once the turn has ended.
    fn stop(&mut self, control: &TurnControl) {
        self.closed = true;
        control.cancel();
    }

    /// SIGTERM or SIGHUP: as `ask` takes them (issue 23, finding 15), the turn ends as terminated (so its log
    /// says so) and the chat exits with 128 + the signal once the session is closed.
    fn stop_for(&mut self, control: &TurnControl, signal: i32) {
        self.closed = true;
        self.signal = Some(signal);
        control.cancel_for_signal(signal);
    }

    fn while_running(&mut self, key: Key, control: &TurnControl, steer: bool) {
        if lock(&self.term).asking() {
            self.answer(key, control);
            return;
        }
        let esc = std::mem::take(&mut self.esc);
        match self.editor.handle(key) {
            Action::Interrupt => self.cancel(control),
            Action::Esc if esc => self.cancel(control),
            Action::Esc => self.esc = true,
            Action::Submit(text) if text.trim().is_empty() => {}
            Action::Submit(text) if steer => {
                self.history.add(&text);
                self.echo(&text, true);
                control.steer(text);
            }
            // A command cannot be steered: the text waits at the prompt.
            Action::Submit(text) => self.editor.set_text(&text),
            Action::Eof => {}
            other => self.common(other),
        }
        self.redraw();
    }

    fn cancel(&mut self, control: &TurnControl) {
        if !control.is_cancelled() {
            control.cancel();
            self.say("-- cancelling…", "2");
        }
    }

    /// y, n or a for the open approval question; Ctrl-C cancels the turn instead.
    fn answer(&mut self, key: Key, control: &TurnControl) {
        let approval = match key {
            Key::Char('y' | 'Y') => Approval::Once,
            Key::Char('a' | 'A') => Approval::Always,
            Key::Char('n' | 'N') | Key::Esc => Approval::Reject,
            Key::Ctrl('c') => {
                lock(&self.term).forget_question();
                self.cancel(control);
                self.redraw();
                return;
            }
            _ => return,
        };
        lock(&self.term).answer(approval);
        self.redraw();
    }

    /// What the prompt and a running turn handle alike.
    fn common(&mut self, action: Action) {
        match action {
            Action::Clear => lock(&self.screen).clear(),
            Action::Expand => self.expand(),
            Action::Candidates(names) => self.say(&names.join("  "), "2"),
            Action::Suspend => self.suspend(),
            _ => {}
        }
    }

    /// `/review` on the terminal: `git agent review <id>` has it (its questions read the keys) until it
    /// exits; then the session is opened again so the comments reach the agent.
    fn review(&mut self, ctx: &Context, session: &AgentSession) -> Command {
        let cmd = commands::own_command(ctx.cwd(), "review", session.id(), "");
        let status = cmd.and_then(|mut cmd| {
            self.hand_over(&mut cmd)
                .map_err(|e| CommandError::internal(format!("cannot run `git agent review`: {e}")))
        });
        match status {
            Ok(status) if status.success() => Command::Reload,
            // It said why on the terminal.
            Ok(_) => Command::Continue,
            Err(err) => {
                self.error(&err);
                Command::Continue
            }
        }
    }

    /// Runs `cmd` with the terminal as it was before the chat (cooked mode, no scroll region, the key
    /// reader paused), then takes the terminal back and draws the screen afresh.
    fn hand_over(
        &mut self,
        cmd: &mut std::process::Command,
    ) -> io::Result<std::process::ExitStatus> {
        self.reader.pause();
        lock(&self.screen).finish();
        tty::restore();
        let status = cmd.status();
        let again = tty::reenter(STDIN);
        let (rows, cols) = tty::size(STDERR);
        let mut screen = lock(&self.screen);
        screen.resize(rows, cols);
        screen.start();
        drop(screen);
        self.reader.resume();
        self.redraw();
        again?;
        status
    }

    /// Ctrl-Z: the terminal given back while the job is stopped, the screen drawn afresh when it continues.
    fn suspend(&mut self) {
        lock(&self.screen).finish();
        if let Err(err) = tty::suspend(STDIN) {
            self.error(&CommandError::internal(format!(
                "cannot set up the terminal again: {err}"
            )));
        }
        let (rows, cols) = tty::size(STDERR);
        let mut screen = lock(&self.screen);
        screen.resize(rows, cols);
        screen.start();
        drop(screen);
        self.redraw();
    }

    /// Ctrl-O: the last reasoning in full.
    fn expand(&self) {
        let text = lock(&self.term).reasoning.clone();
        if text.trim().is_empty() {
            self.say("-- no reasoning to show yet", "2");
        } else {
            self.say(&neutralize(text.trim()), "2");
        }
    }

    fn resized(&mut self) {
        let (rows, cols) = tty::size(STDERR);
        lock(&self.screen).resize(rows, cols);
        self.redraw();
    }

    /// Closes `session` and opens the next one (`/new`, `/resume`); on failure the chat stays where it is.
    async fn switch(
        &mut self,
        ctx: &Context,
        flags: &SessionFlags,
        session: AgentSession,
        resume: Option<Resume>,
    ) -> AgentSession {
        let resumed = resume.is_some();
        let mut sink = ChatSink::new(Arc::clone(&self.term));
        match super::session::open(ctx, flags, resume, &mut sink).await {
            Ok(next) => {
                if let Some(hint) = super::session::close(ctx, session).await {
                    self.say(&format!("-- left the last session; {hint}"), "2");
                }
                self.header(&next, resumed);
                next
            }
            Err(err) => {
                self.error(&err);
                session
            }
        }
    }

    /// The user's own text, as a transcript shows it.
    fn echo(&self, text: &str, steering: bool) {
        let mut lines: String = neutralize(text)
            .lines()
            .map(|l| format!("> {l}\n"))
            .collect();
        if steering {
            lines.push_str("  ⎿ joins the running turn\n");
        }
        self.say(lines.trim_end(), "1");
    }

    fn reply(&self, reply: &Reply) {
        if reply.text.is_empty() {
            return;
        }
        let text = neutralize(&reply.text);
        if reply.diff && self.color {
            lock(&self.screen).lines(&paint_diff(&text));
        } else {
            lock(&self.screen).lines(&text);
        }
    }

    fn error(&self, err: &CommandError) {
        let text = neutralize(&err.text()).into_owned();
        let mut lines = text.lines();
        let mut out = format!("error: {}", lines.next().unwrap_or_default());
        for line in lines {
            out.push('\n');
            out.push_str(line);
        }
        self.say(&out, "31");
    }

    /// Whole lines into the output, in SGR `code` on a colour terminal.
    fn say(&self, text: &str, code: &str) {
        let text = if self.color {
            text.lines()
                .map(|l| format!("\x1b[{code}m{l}\x1b[0m"))
                .collect::<Vec<_>>()
                .join("\n")
        } else {
            text.to_owned()
        };
        lock(&self.screen).lines(&text);
    }
}

/// A unified diff with git's colours: headers bold, hunks cyan, removals red, additions green.
fn paint_diff(text: &str) -> String {
    text.lines()
        .map(|line| {
            let code = if line.starts_with("diff ")
                || line.starts_with("index ")
                || line.starts_with("--- ")
                || line.starts_with("+++ ")
            {
                "1"
            } else if line.starts_with("@@") {
                "36"
            } else if line.starts_with('+') {
                "32"
            } else if line.starts_with('-') {
                "31"
            } else {
                return line.to_owned();
            };
            format!("\x1b[{code}m{line}\x1b[0m")
        })
        .collect::<Vec<_>>()
        .join("\n")
}
