//! The explore subagent: an `explore` call hands one question about the repository to a child loop that may
//! only read, list and search, in a context of its own, and gets back a summary with `path:line` references.
//!
//! Why a child loop: a broad question ("where is X handled?") costs many reads whose output the parent does
//! not need once it has the answer; the child spends its own context on them and the parent keeps only the
//! summary. The child is cheap to trust because it cannot change anything: its tools are the registry's
//! read-only file tools (not mutating, reading or searching, working on a path), every call still passes the
//! session's safety policy, and any other tool it names (`edit_file`, `run`, ...) is refused with a message
//! it can act on. It may run on a cheaper model (`explore_model`).
//!
//! Several `explore` calls in one reply run at once (at most [`MAX_PARALLEL`]), as futures polled together
//! on the turn's task; their tool calls run on blocking threads like the parent's. Each child has a request
//! budget (`explore_max_steps`, default 15); the last request offers no tools, so a child always ends with a
//! summary. What the children use counts against the parent's budgets: their requests against
//! `--max-steps`, their tokens against `--max-tokens`, and the turn's deadline stops them too.
//!
//! The transcript of a child goes into the session log after its group finishes, as [`LogEvent::Explore`]
//! events naming the parent call (so a resume never mistakes them for the parent's conversation); live, its
//! tool calls and results go over a channel to the parent, which owns the sink and shows them as
//! [`Event::Nested`] in the order they arrive.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::Poll;

use serde_json::json;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};

use crate::config::agent_files::AgentDef;
use crate::config::prices::Price;
use crate::config::{ModelConfig, Settings};
use crate::model::retry::RetryPolicy;
use crate::model::{Client, Request};
use crate::protocol::{Cost, Event, Message, Sink, ToolCall, ToolKind, ToolSchema, Usage};
use crate::safety::Policy;
use crate::tools::{SessionState, Tool, ToolContext, ToolOutput};

use super::control::TurnControl;
use super::error::AgentError;
use super::event_hooks::HookPlace;
use super::guards::Budget;
use super::journal::Event as LogEvent;
use super::stream;
use crate::config::event_hooks::HookEvent;

/// The tool's name.
pub const TOOL: &str = "explore";
/// How many explore calls run at once.
pub const MAX_PARALLEL: usize = 4;
/// The most of one tool result a child sees (it can page with `offset`).
const MAX_RESULT: usize = 12 * 1024;

/// How a session explores: its own client and model when `explore_model` names one (else the session's),
/// and the request budget of one call.
pub(super) struct Explorer {
    pub(super) own: Option<(Client, ModelConfig)>,
    pub max_steps: u32,
}

impl Explorer {
    /// The explorer the settings describe. A model that cannot be reached as configured (an unknown provider,
    /// a missing key) is an error: the user asked for it by name.
    pub(super) fn new(
        settings: &Settings,
        main: &ModelConfig,
        timeouts: (std::time::Duration, std::time::Duration),
    ) -> Result<Explorer, AgentError> {
        let (spec, max_steps) = settings.explore();
        let own = match spec {
            Some(spec) if spec != main.display_name() => {
                let env = |name: &str| crate::safety::secrets::var(name);
                let model = settings
                    .resolve(Some(&spec), &env)
                    .map_err(|err| AgentError::Config(format!("explore_model '{spec}': {err}")))?;
                if let Some(key) = &model.api_key {
                    crate::safety::redact::register(key, &model.api_key_env);
                }
                let client = Client::new_tuned(
                    model.wire,
                    model.base_url.clone(),
                    model.api_key.clone(),
                    timeouts.0,
                    timeouts.1,
                    model.tuning.clone(),
                )?;
                Some((client, model))
            }
            _ => None,
        };
        Ok(Explorer { own, max_steps })
    }
}

/// The tool that hands a task to a subagent defined in a file.
pub const AGENT_TOOL: &str = "agent";
/// The most model requests one subagent task may make (the session's budgets bound it too).
pub(super) const AGENT_MAX_STEPS: u32 = 30;

/// The `agent` tool's schema, naming the subagents the session has.
pub fn agent_schema(agents: &[AgentDef]) -> ToolSchema {
    let list: Vec<String> = agents
        .iter()
        .map(|a| format!("- {}: {}", a.name, a.description))
        .collect();
    let names: Vec<&str> = agents.iter().map(|a| a.name.as_str()).collect();
    ToolSchema {
        name: AGENT_TOOL.into(),
        description: format!(
            "Hand a task to a subagent: it works with its own instructions, context and tools and answers              with a summary; a subagent that may edit commits its changes to this session's branch. It sees              nothing of this conversation, so say everything it needs. The subagents:\n{}",
            list.join("\n")
        ),
        parameters: json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "enum": names, "description": "The subagent"},
                "task": {"type": "string", "description": "What it should do, with the names, paths and hints it needs"}
            },
            "required": ["name", "task"]
        }),
    }
}

/// The label of an explore call's line: `explore "where is X handled?"`.
pub fn label(args: &serde_json::Value) -> String {
    let task = args["task"].as_str().unwrap_or("?");
    format!("explore \"{}\"", crate::tools::short(task, 60))
}

/// The schema offered to the model.
pub fn schema() -> ToolSchema {
    ToolSchema {
        name: TOOL.into(),
        description: "Hand a question about the code to a read-only explorer with its own context: it reads, \
            lists and searches files (no edits, no commands) and answers with a summary citing path:line. Use it \
            for questions that need many reads (where is X handled, how does Y work, what calls Z), so your \
            own context keeps only the answer. Several explore calls in one reply run in parallel. Say \
            exactly what to find out; the explorer sees nothing of this conversation."
            .into(),
        parameters: json!({
            "type": "object",
            "properties": {
                "task": {"type": "string", "description": "The question, with any names, paths or hints that help"}
            },
            "required": ["task"]
        }),
    }
}

/// What the children share: the model, the read-only tools, the policy, the way to the parent's sink, and
/// the parent's budget (made by the tool-call pipeline from the parts it borrows).
pub(super) struct Shared<'a> {
    pub(super) client: &'a Client,
    pub(super) model: &'a str,
    /// The explore model's price (`None`: unknown).
    pub(super) price: Option<Price>,
    pub(super) retry: &'a RetryPolicy,
    pub(super) tools: Vec<Arc<dyn Tool>>,
    pub(super) schemas: Vec<ToolSchema>,
    pub(super) ctx: ToolContext,
    pub(super) policy: &'a Policy,
    /// Where a child's events go: the parent owns the sink and shows them in arrival order ([`relay`]).
    pub(super) events: UnboundedSender<Event>,
    /// Requests and tokens of the turn so far, the children's included.
    pub(super) used: Mutex<(u32, u64)>,
    /// What the session has cost so far, the children's requests included.
    pub(super) session_cost: Mutex<Cost>,
    pub(super) budget: Budget,
    pub(super) max_steps: u32,
    pub(super) control: &'a TurnControl,
    /// Environment variables whose values must stay out of child tool output (the key's).
    pub(super) secret_envs: Vec<String>,
    /// The session's event hooks: an explorer's calls meet the same `PreToolUse` hooks as the session's.
    pub(super) hooks: HookPlace,
}

/// What one child did.
pub(super) struct Run {
    pub(super) output: ToolOutput,
    pub(super) events: Vec<LogEvent>,
    pub(super) usage: Usage,
    pub(super) cost: Cost,
}

/// The client of a subagent that names its own model (`provider/model`), resolved as the session's is.
pub(super) fn child_client(
    spec: &str,
    workdir: &std::path::Path,
    timeouts: (std::time::Duration, std::time::Duration),
) -> Result<(Client, ModelConfig), String> {
    let env = |name: &str| crate::safety::secrets::var(name);
    let settings = Settings::load(workdir, &env).unwrap_or_default();
    let model = settings
        .resolve(Some(spec), &env)
        .map_err(|err| format!("the subagent's model '{spec}' cannot be used: {err}"))?;
    if let Some(key) = &model.api_key {
        crate::safety::redact::register(key, &model.api_key_env);
    }
    let client = Client::new_tuned(
        model.wire,
        model.base_url.clone(),
        model.api_key.clone(),
        timeouts.0,
        timeouts.1,
        model.tuning.clone(),
    )
    .map_err(|err| format!("the subagent's model '{spec}' cannot be used: {err}"))?;
    Ok((client, model))
}

impl Shared<'_> {
    /// One child loop, from the task to its summary.
    pub(super) async fn run(&self, parent: &str, task: &str) -> Run {
        let mut run = Run {
            output: ToolOutput::default(),
            events: vec![LogEvent::User {
                content: task.to_owned(),
            }],
            usage: Usage::default(),
            cost: Cost::default(),
        };
        let mut messages = vec![
            Message::System {
                content: system_prompt(&self.ctx.root.display().to_string(), self.max_steps),
            },
            Message::User {
                content: task.to_owned(),
            },
        ];
        // Reads of the child are its own: the parent's stale-read guard must not take them for the parent's.
        let state = SessionState::new(None, self.secret_envs.clone());
        // The parent's language servers answer the child's `lsp` queries (read-only operations only).
        if let Some(pool) = self.ctx.session.lsp() {
            state.set_lsp(Arc::clone(pool));
        }
        let ctx = ToolContext {
            session: Arc::new(state),
            ..self.ctx.clone()
        };
        let (mut requests, mut calls) = (0u32, 0u32);
        let mut looked_at: Vec<String> = Vec::new();
        let stopped = loop {
            if let Some(reason) = self.reserve_request() {
                break reason;
            }
            requests += 1;
            let last = requests >= self.max_steps;
            if last {
                messages.push(Message::User {
                    content: "This is your last request: answer now with your summary (no more tool calls).".into(),
                });
            }
            let request = Request {
                model: self.model,
                messages: &messages,
                tools: if last { &[] } else { &self.schemas },
                max_tokens: None,
            };
            // The turn's deadline stops a child's request in flight too (issue 23, finding 11).
            let sent = tokio::select! {
                sent = stream::quietly(self.client, self.retry, &request, self.control) => sent,
                () = self.budget.expired() => {
                    break "the session's budget ran out (--max-time)".to_owned();
                }
            };
            let response = match sent {
                None => break "the turn was interrupted".to_owned(),
                Some(Err(err)) => break format!("its model request failed: {err}"),
                Some(Ok(response)) => response,
            };
            let tokens = response
                .usage
                .map_or(0, |u| u.input_tokens + u.output_tokens);
            if let Ok(mut used) = self.used.lock() {
                used.1 += tokens;
            }
            if let Some(usage) = &response.usage {
                let cost = self.price.map(|price| price.cost(usage));
                run.usage.add(usage);
                run.cost.add_request(cost);
                run.events.push(LogEvent::Usage {
                    input_tokens: usage.input_tokens,
                    output_tokens: usage.output_tokens,
                    cached_tokens: usage.cached_tokens,
                    cost_usd: cost,
                });
                let session_cost = self.session_cost.lock().ok().and_then(|mut total| {
                    total.add_request(cost);
                    total.known()
                });
                self.emit(
                    parent,
                    Event::RequestUsage {
                        request: requests,
                        usage: *usage,
                        cost,
                        session_cost,
                    },
                );
            }
            // A model may call tools even when none were offered: on the last request those calls are not
            // run and the child ends there, or it would go on past `explore_max_steps` on the parent's
            // budget (issue 23, finding 12). Text that came with them is its summary.
            let mut response = response;
            let tools_past_the_end = last && !response.tool_calls.is_empty();
            if tools_past_the_end {
                response.tool_calls.clear();
            }
            run.events.push(LogEvent::Assistant {
                content: response.text.clone(),
                tool_calls: response.tool_calls.clone(),
                thinking: Vec::new(),
            });
            messages.push(Message::Assistant {
                content: response.text.clone(),
                tool_calls: response.tool_calls.clone(),
                thinking: response.thinking,
            });
            if response.tool_calls.is_empty() {
                let summary = response.text.trim();
                if summary.is_empty() && tools_past_the_end {
                    break format!(
                        "it still called tools on its last request (explore_max_steps is {})",
                        self.max_steps
                    );
                }
                if summary.is_empty() {
                    break "it answered with nothing".to_owned();
                }
                run.output = ToolOutput::ok(
                    format!(
                        "{summary}\n\n[explorer: {requests} request{}, {calls} tool call{}]",
                        plural(requests),
                        plural(calls)
                    ),
                    format!(
                        "{requests} request{}, {calls} tool call{}",
                        plural(requests),
                        plural(calls)
                    ),
                );
                return run;
            }
            for call in &response.tool_calls {
                calls += 1;
                let output = self.call(parent, call, &ctx, &mut looked_at).await;
                run.events.push(LogEvent::ToolResult {
                    tool_call_id: call.id.clone(),
                    name: call.name.clone(),
                    ok: !output.is_error,
                    summary: output.summary.clone(),
                    content: output.content.clone(),
                });
                messages.push(Message::Tool {
                    tool_call_id: call.id.clone(),
                    content: output.content,
                });
            }
        };
        let seen = if looked_at.is_empty() {
            "nothing".to_owned()
        } else {
            looked_at.join(", ")
        };
        run.output = ToolOutput::error(format!(
            "the explorer stopped before it answered: {stopped}. It had made {calls} tool call{} ({seen}); \
             explore a narrower question, or look yourself",
            plural(calls)
        ));
        run
    }

    /// Takes one request from the parent's budget; the reason to stop when there is none left.
    fn reserve_request(&self) -> Option<String> {
        if self.control.is_cancelled() {
            return Some("the turn was interrupted".into());
        }
        let Ok(mut used) = self.used.lock() else {
            return Some("internal error: the budget is unavailable".into());
        };
        if let Some((_, reason)) = self.budget.exceeded(used.0, used.1) {
            return Some(format!("the session's budget ran out ({reason})"));
        }
        used.0 += 1;
        None
    }

    /// One tool call of a child: a read-only tool through the policy, or a refusal.
    async fn call(
        &self,
        parent: &str,
        call: &ToolCall,
        ctx: &ToolContext,
        looked_at: &mut Vec<String>,
    ) -> ToolOutput {
        let tool = self.tools.iter().find(|t| t.name() == call.name).cloned();
        // Parsed as the parent's calls are, with the same messages for the model.
        let args = super::stages::parse_args(call, false);
        let label = match (&tool, &args) {
            (Some(tool), Ok(args)) => tool.label(args),
            _ => format!("{} (refused)", call.name),
        };
        let input = args.clone().unwrap_or(serde_json::Value::Null);
        self.emit(
            parent,
            Event::ToolCall {
                id: call.id.clone(),
                name: call.name.clone(),
                kind: tool.as_ref().map_or(ToolKind::Other, |t| t.kind()),
                label: label.clone(),
                input,
                location: None,
            },
        );
        let output = match (tool, args) {
            (None, _) => ToolOutput::error(format!(
                "`{}` is not available to the explorer: it may only read, list and search ({}); it cannot \
                 edit files or run commands. Say in your summary what should be changed or run instead.",
                call.name,
                self.tools.iter().map(|t| t.name()).collect::<Vec<_>>().join(", ")
            )),
            (Some(_), Err(message)) => ToolOutput::error(message),
            (Some(tool), Ok(args)) => {
                looked_at.push(label);
                match self.hooked(parent, tool.name(), &call.id, args).await {
                    Ok(args) => self.checked_run(tool, args, ctx).await,
                    Err(refusal) => refusal,
                }
            }
        };
        self.emit(
            parent,
            Event::ToolResult {
                id: call.id.clone(),
                ok: !output.is_error,
                summary: output.summary.clone(),
                output: output.content.clone(),
            },
        );
        output
    }

    /// Runs a read-only tool once the session's policy allows it; a call that would need the user's
    /// approval is refused, since a child cannot ask.
    async fn checked_run(
        &self,
        tool: Arc<dyn Tool>,
        args: serde_json::Value,
        ctx: &ToolContext,
    ) -> ToolOutput {
        let decision = self.policy.check(&tool.checked(&args));
        if decision.is_denied() {
            return ToolOutput::error(decision.message_for_model());
        }
        if decision.needs_approval() {
            return ToolOutput::error(format!(
                "not run: {} needs the user's approval, which the explorer cannot ask for",
                tool.name()
            ));
        }
        // The parent's execute stage, with the same redactor and known secrets (the keys, the `.env`
        // values): a child's result goes to the provider just the same (issue 23, finding 2).
        let mut output = match super::stages::run_blocking(tool, ctx.clone(), args).await {
            Ok(output) => output,
            Err(err) => ToolOutput::error(format!("the tool failed: {err}")),
        };
        if output.content.len() > MAX_RESULT {
            let mut end = MAX_RESULT;
            while !output.content.is_char_boundary(end) {
                end -= 1;
            }
            let total = output.content.len();
            output.content.truncate(end);
            output.content.push_str(&format!(
                "\n[... cut: {total} bytes in all; read on with offset, or narrow the search]"
            ));
        }
        output
    }

    /// The session's `PreToolUse` hooks on a child's call: the arguments to run it with, or the refusal.
    async fn hooked(
        &self,
        parent: &str,
        tool: &str,
        call_id: &str,
        args: serde_json::Value,
    ) -> Result<serde_json::Value, ToolOutput> {
        let Some(verdict) = self.hooks.pre_tool_use(tool, call_id, &args).await else {
            return Ok(args);
        };
        for (run, outcome) in &verdict.runs {
            let event = Event::Hook {
                event: HookEvent::PreToolUse.as_str().to_owned(),
                command: run.hook.command.clone(),
                source: run.hook.source.clone(),
                outcome: outcome.clone(),
                duration_ms: u64::try_from(run.duration.as_millis()).unwrap_or(u64::MAX),
            };
            self.emit(parent, event);
        }
        if let Some(reason) = verdict.block {
            return Err(ToolOutput::error(format!(
                "blocked by event-hook: {reason}"
            )));
        }
        Ok(match verdict.updated_input {
            Some(input) => super::event_hooks::from_claude_input(tool, input),
            None => args,
        })
    }

    /// Sends a child's event to the parent, nested under its call. A send fails only once the parent
    /// stopped listening, when nobody is left to show it to.
    fn emit(&self, parent: &str, event: Event) {
        let _ = self.events.send(Event::Nested {
            parent: parent.to_owned(),
            event: Box::new(event),
        });
    }
}

/// The child's system prompt.
fn system_prompt(checkout: &str, max_steps: u32) -> String {
    format!(
        "You are an explorer: a read-only helper of git-agent, a coding agent. The agent gave you one question \
         about the repository checked out at {checkout}. Find the answer with read_file, list_files and \
         search; you cannot edit files or run commands. You have at most {max_steps} model requests, so \
         search before you read, and read only the parts you need.\n\
         When you know enough, answer without calling tools: a short summary of what you found, citing each \
         relevant place as path:line (for example src/main.rs:42), and what you could not find. The agent \
         sees only this summary, not your tool calls. Paths are relative to the repository root."
    )
}

pub(super) fn plural(n: u32) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// Runs `children` to their end while showing on `sink` the events they send, in the order they arrive: the
/// parent owns the sink, the children hold only a sender, so no lock is shared between them.
pub(super) async fn relay<T>(
    children: impl Future<Output = T>,
    arrivals: &mut UnboundedReceiver<Event>,
    sink: &mut dyn Sink,
) -> T {
    let mut children = std::pin::pin!(children);
    loop {
        tokio::select! {
            // Events first, so each is shown before whatever the children finished with.
            biased;
            Some(event) = arrivals.recv() => sink.emit(&event),
            output = &mut children => {
                while let Ok(event) = arrivals.try_recv() {
                    sink.emit(&event);
                }
                return output;
            }
        }
    }
}

/// Polls every future until all are done, on the current task (no spawn, so they may borrow), and returns
/// their outputs in order.
pub(super) async fn join_all<F: Future + ?Sized>(futures: Vec<Pin<Box<F>>>) -> Vec<F::Output> {
    let mut futures = futures;
    let mut outputs: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (future, output) in futures.iter_mut().zip(outputs.iter_mut()) {
            if output.is_none() {
                match future.as_mut().poll(cx) {
                    Poll::Ready(value) => *output = Some(value),
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    outputs.into_iter().flatten().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::sync::mpsc::unbounded_channel;

    /// The children's events reach the parent's sink in the order they were sent, the last ones (sent as
    /// the children finish) before their outputs come back.
    #[test]
    fn relay_shows_events_in_arrival_order_before_the_outputs() {
        struct Record(Vec<String>);
        impl Sink for Record {
            fn emit(&mut self, event: &Event) {
                if let Event::Warning { message } = event {
                    self.0.push(message.clone());
                }
            }
        }
        let say = |events: &UnboundedSender<Event>, message: &str| {
            events
                .send(Event::Warning {
                    message: message.into(),
                })
                .unwrap();
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let (events, mut arrivals) = unbounded_channel();
        let (go, wait) = tokio::sync::oneshot::channel::<()>();
        let first = async {
            say(&events, "a1");
            wait.await.unwrap();
            say(&events, "a2");
            1
        };
        let second = async {
            say(&events, "b1");
            go.send(()).unwrap();
            tokio::task::yield_now().await;
            say(&events, "b2");
            2
        };
        let futures: Vec<Pin<Box<dyn Future<Output = u32>>>> =
            vec![Box::pin(first), Box::pin(second)];
        let mut sink = Record(Vec::new());
        let outputs = runtime.block_on(relay(join_all(futures), &mut arrivals, &mut sink));
        assert_eq!(outputs, [1, 2]);
        assert_eq!(sink.0, ["a1", "b1", "a2", "b2"]);
    }

    #[test]
    fn join_all_runs_futures_together_and_keeps_their_order() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel::<u32>();
        // The first future waits for the second: sequential polling would never finish.
        let first = async move { rx.await.unwrap() + 1 };
        let second = async move {
            tx.send(41).unwrap();
            0
        };
        let futures: Vec<Pin<Box<dyn Future<Output = u32>>>> =
            vec![Box::pin(first), Box::pin(second)];
        let out = runtime.block_on(join_all(futures));
        assert_eq!(out, [42, 0]);
    }
}
