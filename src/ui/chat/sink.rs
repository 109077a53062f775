//! What the chat's turn talks to: [`ChatSink`] renders events into the screen (through the renderer `ask`
//! uses, so tool lines, results and neutralisation are the same) and keeps the status line current;
//! [`ChatApprover`] asks y/n/always in the panel and waits for the answer that the chat loop reads from the
//! one key reader (the approver never reads the terminal itself).

use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

use super::editor::View;
use super::screen::{OutputWriter, Screen};
use super::{status::StatusLine, sync::lock};
use crate::protocol::{Approval, ApprovalFuture, ApprovalRequest, Approver, Event, Sink};
use crate::ui::{neutralize, HumanSink};

/// What the chat loop, its sink and its approver share: the screen, the status line, the last reasoning and
/// the open approval question.
pub struct Term {
    pub screen: Arc<Mutex<Screen>>,
    pub status: StatusLine,
    /// The last run of reasoning, in full, for the key that expands it.
    pub reasoning: String,
    approval: Option<oneshot::Sender<Approval>>,
}

/// [`Term`] shared.
pub type Shared = Arc<Mutex<Term>>;

impl Term {
    pub fn new(screen: Arc<Mutex<Screen>>) -> Shared {
        Arc::new(Mutex::new(Term {
            screen,
            status: StatusLine::default(),
            reasoning: String::new(),
            approval: None,
        }))
    }

    /// Draws the status line as it stands.
    pub fn show_status(&self) {
        let text = self.status.render();
        lock(&self.screen).set_status(text);
    }

    /// True while an approval question waits for y/n/a.
    pub fn asking(&self) -> bool {
        self.approval.is_some()
    }

    /// Answers the open question; false when none was open.
    pub fn answer(&mut self, approval: Approval) -> bool {
        match self.approval.take() {
            Some(tx) => tx.send(approval).is_ok(),
            None => false,
        }
    }

    /// Drops a question the turn no longer waits for (it was cancelled).
    pub fn forget_question(&mut self) {
        self.approval = None;
    }
}

/// The chat's sink; see the module docs.
pub struct ChatSink {
    human: HumanSink<OutputWriter>,
    term: Shared,
    /// The last event was reasoning (a new run starts a new text to expand).
    in_reasoning: bool,
}

impl ChatSink {
    pub fn new(term: Shared) -> ChatSink {
        let (screen, color) = {
            let t = lock(&term);
            let color = lock(&t.screen).color();
            (Arc::clone(&t.screen), color)
        };
        ChatSink {
            human: HumanSink::live_into(OutputWriter::new(screen), color),
            term,
            in_reasoning: false,
        }
    }
}

impl Sink for ChatSink {
    fn emit(&mut self, event: &Event) {
        {
            let mut t = lock(&self.term);
            match event {
                // The status line says all of these, and the chat's header named the session.
                Event::Session { .. } | Event::Summary { .. } | Event::Usage { .. } => return,
                // The input line showed what the user typed.
                Event::Prompt { .. } => return,
                Event::RequestUsage {
                    usage,
                    session_cost,
                    ..
                } => {
                    t.status.cost = *session_cost;
                    t.status.input_tokens += usage.input_tokens;
                    t.status.output_tokens += usage.output_tokens;
                    // The next request carries at least what this one did and its answer.
                    t.status.context_used = usage.input_tokens + usage.output_tokens;
                    t.show_status();
                    return;
                }
                Event::Step { step, .. } => {
                    t.status.steps = *step;
                    t.show_status();
                }
                Event::Reasoning { delta: text } => {
                    if !self.in_reasoning {
                        t.reasoning.clear();
                    }
                    t.reasoning.push_str(text);
                }
                _ => {}
            }
        }
        self.in_reasoning = matches!(event, Event::Reasoning { .. });
        self.human.emit(event);
    }
}

/// The chat's approver; see the module docs.
pub struct ChatApprover {
    term: Shared,
}

impl ChatApprover {
    pub fn new(term: Shared) -> ChatApprover {
        ChatApprover { term }
    }
}

/// The panel's row while a question is open.
pub const QUESTION: &str = "run it? [y]es / [n]o / [a]lways: ";

impl Approver for ChatApprover {
    fn approve<'a>(&'a mut self, request: &'a ApprovalRequest) -> ApprovalFuture<'a> {
        let (tx, rx) = oneshot::channel();
        {
            let mut t = lock(&self.term);
            let mut screen = lock(&t.screen);
            let question = format!(
                "{}\n  {}\n",
                neutralize(&request.reason),
                neutralize(&request.subject)
            );
            let question = if screen.color() {
                format!("\x1b[33m{question}\x1b[0m")
            } else {
                question
            };
            screen.output(question.as_bytes());
            screen.set_input(View {
                rows: vec![QUESTION.to_owned()],
                cursor_row: 0,
                cursor_col: QUESTION.len(),
            });
            drop(screen);
            t.approval = Some(tx);
        }
        // A question nobody answers (the turn was cancelled) is a no; the turn has moved on by then anyway.
        Box::pin(async move { rx.await.unwrap_or(Approval::Reject) })
    }
}
