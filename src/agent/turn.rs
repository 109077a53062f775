//! One turn: the loop proper. Send the conversation and the tool schemas, stream the reply, run the calls
//! (see [`super::call`]), feed the results back, and repeat until the model answers without tool calls or
//! something stops it; then record how the turn ended and tell the front-end.
//!
//! What lives for one turn only is here: the front-end's sink, approver and [`TurnControl`], the budget and
//! what the turn used of it, and the loop guards. The session's parts ([`SessionParts`]) are borrowed, not
//! the session: a turn knows nothing of [`super::session`], and runs each tool call through the pipeline
//! ([`ToolPipeline`]).

use std::time::Instant;

use crate::model::{FinishReason, ModelError, Request, Response};
use crate::protocol::{Approver, Cost, Event, Message, Sink, Status, ToolCall, Usage};
use crate::store::StoreError;
use crate::tools::ToolOutput;

use crate::config::event_hooks::HookEvent;

use super::call::{model_view, Round, ToolPipeline};
use super::context::Facts;
use super::control::TurnControl;
use super::error::{AgentError, EXIT_INTERRUPTED, EXIT_UNFINISHED};
use super::event_hooks::MAX_STOP_CONTINUES;
use super::explore::{self, Explorer};
use super::guards::{Budget, Guards, Tally};
use super::memory::Place;
use super::parts::{add_spend, short_branch, SessionParts};
use super::plan::Finish;
use super::start::Ready;
use super::stream::{self, Streamed};
use super::trim;

/// How a turn ended, for the front-end.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnEnd {
    /// `done`, `blocked`, `max_steps`, ..., `interrupted`.
    pub status: Status,
    /// The final answer: the model's text, `finish`'s summary, a stop report, or what streamed before a
    /// cancel.
    pub answer: String,
    /// 0 done, 3 unfinished (budget, loop guard, blocked), 130 interrupted.
    pub exit_code: i32,
    /// Tokens of this turn's requests (summaries included).
    pub usage: Usage,
    /// What this turn's requests cost.
    pub cost: Cost,
    /// The model refused: its last reply was ended for content reasons (see
    /// [`FinishReason::is_refusal`]); the status is `done`, the answer whatever it said.
    pub refused: bool,
}

/// How the loop ended.
pub(super) enum LoopEnd {
    /// Plain text without tool calls.
    Answered(String),
    /// A reply without tool calls that the provider ended for content reasons.
    Refused(String),
    /// The `finish` tool.
    Finished(Finish),
    /// A budget or a loop guard; `status` is what the log records (`max_steps`, `loop`, ...).
    Stopped {
        status: Status,
        reason: String,
    },
    Interrupted(String),
}

/// One turn in progress.
pub(super) struct Turn<'t> {
    pub(super) s: &'t mut SessionParts,
    /// How `explore` calls run.
    explorer: &'t Explorer,
    pub(super) sink: &'t mut dyn Sink,
    /// Answers the risky calls no rule settles (terminal, editor, or never).
    approver: &'t mut dyn Approver,
    control: &'t TurnControl,
    tally: Tally,
    guards: Guards,
    /// The model's text before the tool calls being run, for the step notes.
    why: String,
    /// The subagent whose calls are being run, named in their step commits.
    subagent: Option<String>,
    /// The calls whose result is already in the log, recorded when the front-end was shown it.
    pub(super) recorded: Vec<String>,
}

impl<'t> Turn<'t> {
    pub(super) fn new(
        s: &'t mut SessionParts,
        explorer: &'t Explorer,
        sink: &'t mut dyn Sink,
        approver: &'t mut dyn Approver,
        control: &'t TurnControl,
    ) -> Turn<'t> {
        let limits = s.limits;
        Turn {
            tally: Tally::new(Budget {
                max_steps: limits.max_steps,
                deadline: limits.max_time.map(|t| Instant::now() + t),
                max_time: limits.max_time,
                max_tokens: limits.max_tokens,
                max_cost: limits.max_cost,
            }),
            s,
            explorer,
            sink,
            approver,
            control,
            guards: Guards::default(),
            why: String::new(),
            subagent: None,
            recorded: Vec::new(),
        }
    }

    /// Tokens of this turn's requests so far.
    pub(super) fn usage(&self) -> Usage {
        self.tally.usage
    }

    /// What this turn's requests cost so far.
    pub(super) fn cost(&self) -> Cost {
        self.tally.cost
    }

    /// The tool-call pipeline over this turn's parts: what one call needs (the workspace, tools, policy,
    /// hooks, the front-end) and the turn's state it updates (guards, budget, the calls already recorded).
    pub(super) fn pipeline(&mut self) -> ToolPipeline<'_> {
        let s = &mut *self.s;
        ToolPipeline {
            work: &mut s.work,
            tools: &mut s.tools,
            conv: &mut s.conv,
            model: &s.model,
            hooks: &s.hooks,
            agents: &s.agents,
            narrowing: s.turn_tools.as_ref(),
            explorer: self.explorer,
            sink: &mut *self.sink,
            approver: &mut *self.approver,
            control: self.control,
            guards: &mut self.guards,
            tally: &mut self.tally,
            why: &mut self.why,
            subagent: &mut self.subagent,
            recorded: &mut self.recorded,
        }
    }

    /// At the first turn of a new session: the memory entries relevant to `prompt` join the conversation
    /// before it.
    fn inject_memory(&mut self, prompt: &str) -> Result<(), AgentError> {
        let s = &mut *self.s;
        let place = Place {
            store: &s.work.store,
            log: &mut s.work.log,
            session: &s.work.session,
        };
        let window = s.context.settings.window;
        let text = s
            .tools
            .memory
            .inject(place, window, prompt, &mut *self.sink)?;
        if let Some(text) = text {
            self.add_context("memory", "", text)?;
        }
        Ok(())
    }

    pub(super) async fn run(&mut self, prompt: &str) -> Result<LoopEnd, AgentError> {
        if self.s.resumed && self.s.turns == 1 && !self.s.conv.plan.is_empty() {
            let text = format!(
                "Your plan so far (from plan_update):\n{}",
                self.s.conv.plan.render()
            );
            self.add_context("plan", "", text)?;
        }
        if !self.s.resumed && self.s.turns == 1 {
            self.inject_memory(prompt)?;
        }
        if self.s.turns == 1 {
            let source = if self.s.resumed { "resume" } else { "startup" };
            let fields = serde_json::json!({"source": source});
            let verdict = self
                .pipeline()
                .fire(HookEvent::SessionStart, &[source], fields)
                .await?;
            for text in verdict.context {
                self.add_context("hook", "", format!("SessionStart hook: {text}"))?;
            }
        }
        let fields = serde_json::json!({"prompt": prompt});
        let verdict = self
            .pipeline()
            .fire(HookEvent::UserPromptSubmit, &[], fields)
            .await?;
        if let Some(reason) = verdict.block {
            // Claude Code's way: a blocked prompt never reaches the model.
            return Ok(LoopEnd::Stopped {
                status: Status::Blocked,
                reason: format!("a UserPromptSubmit event hook blocked the prompt: {reason}"),
            });
        }
        self.add_user(prompt)?;
        for image in std::mem::take(&mut self.s.images) {
            self.add_image(image, None)?;
        }
        for text in verdict.context {
            self.add_context("hook", "", format!("UserPromptSubmit hook: {text}"))?;
        }
        self.rounds().await
    }

    /// The `Stop` hooks, when the turn would end with an answer: one that blocks sends the model back to
    /// work with its reason (at most [`MAX_STOP_CONTINUES`] times a turn; the budgets bound it too). True
    /// when the turn goes on.
    async fn stop_hooks(
        &mut self,
        outcome: &LoopEnd,
        continued: &mut u32,
    ) -> Result<bool, AgentError> {
        let message = match outcome {
            LoopEnd::Answered(text) => text.as_str(),
            LoopEnd::Finished(finish) => finish.summary.as_str(),
            _ => return Ok(false),
        };
        if !self.s.hooks.has(HookEvent::Stop) {
            return Ok(false);
        }
        let fields = serde_json::json!({
            "stop_hook_active": *continued > 0,
            "last_assistant_message": message,
        });
        let verdict = self.pipeline().fire(HookEvent::Stop, &[], fields).await?;
        let Some(reason) = verdict.block else {
            return Ok(false);
        };
        if *continued >= MAX_STOP_CONTINUES {
            let warning = format!(
                "a Stop event hook blocked the end of the turn {MAX_STOP_CONTINUES} times; the turn ends: {reason}"
            );
            self.warn(warning)?;
            return Ok(false);
        }
        *continued += 1;
        self.add_context("hook", "", format!("Stop hook: {reason}"))?;
        Ok(true)
    }

    /// The loop proper: one model request and its tool calls per round.
    async fn rounds(&mut self) -> Result<LoopEnd, AgentError> {
        let mut trimmed = false;
        let mut stop_continues = 0;
        loop {
            if let Some((status, reason)) = self
                .tally
                .budget
                .exceeded(self.tally.requests, self.tally.spent)
            {
                return Ok(LoopEnd::Stopped { status, reason });
            }
            if let Some((status, reason)) = self.tally.budget.cost_exceeded(&self.tally.cost) {
                return Ok(LoopEnd::Stopped { status, reason });
            }
            // What the user typed while the turn ran goes in before the next request.
            for text in self.control.take_steering() {
                self.add_user(&text)?;
            }
            // The window the endpoint reports, asked once the first reply is in: waited for only when it could
            // matter (issue 16: a fake server's delayed ACK made every session's second request wait 40 ms).
            let fresh = self.tally.requests == 0 && self.s.conv.messages.len() <= 2;
            let matters = self.s.context.window_matters(&self.s.conv.messages);
            self.s.settle_window(!fresh && matters).await;
            if !trimmed {
                // Not on the retry after an overflow: room was just made for it.
                self.compact(false, None).await?;
            }
            // MCP servers that joined since the last request bring their tools now; before the first request
            // they get their startup time.
            self.s.await_mcp(&mut *self.sink).await?;
            self.s.refresh_mcp(&mut *self.sink);
            let budget = self.tally.budget;
            let sent = tokio::select! {
                sent = self.request() => sent,
                () = budget.expired() => {
                    if let Some((status, reason)) = budget.out_of_time() {
                        return Ok(LoopEnd::Stopped { status, reason });
                    }
                    continue;
                }
            };
            let response = match sent {
                // The conversation outgrew the model: make room and try again, once.
                Err(err) if err.is_context_overflow() && !trimmed => {
                    trimmed = true;
                    self.make_room_after(err).await?;
                    continue;
                }
                Err(err) => return Err(err.into()),
                Ok(Streamed::Cancelled { partial }) => return Ok(LoopEnd::Interrupted(partial)),
                Ok(Streamed::Reply(response)) => response,
            };
            if self.tally.requests == 1 {
                super::footprint::mark("first reply");
            }
            // The connection is free again: the endpoint is asked for its window now, beside the tool calls.
            self.s.start_window_probe();
            trimmed = false;
            if let Some(outcome) = self.answered(response).await? {
                if self.stop_hooks(&outcome, &mut stop_continues).await? {
                    continue;
                }
                return Ok(outcome);
            }
        }
    }

    /// Sends the conversation, streaming the reply to the front-end.
    async fn request(&mut self) -> Result<Streamed, ModelError> {
        let conv = &self.s.conv;
        // A command's `allowed-tools` narrows what this turn offers (the agent's own tools stay).
        let narrowed: Vec<_>;
        let tools = match &self.s.turn_tools {
            Some(narrowing) => {
                narrowed = conv
                    .schemas
                    .iter()
                    .filter(|t| {
                        super::plan::OwnTool::find(&t.name).is_some()
                            || crate::config::agent_files::tool_allowed(&narrowing.tools, &t.name)
                    })
                    .cloned()
                    .collect();
                &narrowed[..]
            }
            None => &conv.schemas[..],
        };
        let request = Request {
            model: &self.s.model.config.model,
            messages: &conv.messages,
            tools,
            max_tokens: None,
        };
        self.tally.requests += 1;
        self.s.context.count_request();
        let announce = (!self.s.announced).then_some(&self.s.line);
        let link = &self.s.model;
        let sending = stream::send(
            &link.client,
            &link.retry,
            &request,
            &mut self.s.work.log,
            &mut *self.sink,
            announce,
            self.control,
        );
        let sent = probing_beside(sending).await?;
        if let Streamed::Reply(response) = &sent {
            self.s.announced = true;
            if let Some(usage) = &response.usage {
                let cost = link.config.price.map(|price| price.cost(usage));
                self.tally.usage.add(usage);
                self.tally.cost.add_request(cost);
            }
        }
        Ok(sent)
    }

    /// The provider refused the conversation as too long, so the window is smaller than the settings say:
    /// learn it for the rest of the session and make room at once (trim old tool output; compact if there is
    /// none). `err` comes back when there is no room to make.
    async fn make_room_after(&mut self, err: ModelError) -> Result<(), AgentError> {
        self.s.context.learn_window(&self.s.conv.messages);
        if !trim::old_tool_results(&mut self.s.conv.messages) && !self.make_room().await? {
            return Err(err.into());
        }
        self.warn(format!("{err}; made room in the context and trying again"))?;
        Ok(())
    }

    /// Takes in one reply: recorded, added to the conversation, and its tool calls run. `Some` when the turn
    /// ends with it.
    async fn answered(&mut self, response: Response) -> Result<Option<LoopEnd>, AgentError> {
        self.count_tokens(&response);
        self.record_reply(&response)?;
        let cut_off = response.finish_reason == Some(FinishReason::Length);
        let refused = response
            .finish_reason
            .as_ref()
            .is_some_and(FinishReason::is_refusal);
        let Response {
            text,
            tool_calls: calls,
            thinking,
            ..
        } = response;
        self.why.clone_from(&text);
        self.s.conv.messages.push(Message::Assistant {
            content: text.clone(),
            tool_calls: calls.clone(),
            thinking,
        });
        if calls.is_empty() && refused {
            // Neither steering nor a plan reminder talks a provider out of a refusal.
            return Ok(Some(LoopEnd::Refused(text)));
        }
        if calls.is_empty() {
            if self.control.has_steering() {
                // The user said more while the model answered: the turn goes on with it.
                return Ok(None);
            }
            // Plain text ends the task, unless the plan still has open items (one reminder).
            return match self.guards.may_finish(&self.s.conv.plan) {
                Ok(()) => Ok(Some(LoopEnd::Answered(text))),
                Err(reminder) => {
                    self.add_context("reminder", "", reminder)?;
                    Ok(None)
                }
            };
        }
        let round = self.run_calls(&calls, cut_off).await?;
        if let Some(reason) = round.stop {
            return Ok(Some(LoopEnd::Stopped {
                status: Status::Loop,
                reason,
            }));
        }
        if self.control.is_cancelled() {
            return Ok(Some(LoopEnd::Interrupted(text)));
        }
        if let Some(finish) = round.finish {
            if !self.control.has_steering() {
                return Ok(Some(LoopEnd::Finished(finish)));
            }
        }
        if let Some(reminder) = self.guards.stale_plan(&self.s.conv.plan) {
            self.add_context("reminder", "", reminder)?;
        }
        Ok(None)
    }

    /// Runs one reply's calls in order, each result recorded; then what the round brought in (reminders,
    /// instructions). With finish_reason `length` (`cut_off`), the last call's arguments may have been cut off
    /// mid-way: it is never run, since it merely looks complete.
    async fn run_calls(&mut self, calls: &[ToolCall], cut_off: bool) -> Result<Round, AgentError> {
        // The tools work in the checkout: a new session's start, still under way, is waited for here.
        let ready = self.s.ready(&mut *self.sink).await?;
        let mut round = Round::default();
        // Outputs of explore calls, run together when the first of a run of them comes up.
        let mut explored: Vec<Option<ToolOutput>> = vec![None; calls.len()];
        for (i, call) in calls.iter().enumerate() {
            let truncated = cut_off && i + 1 == calls.len();
            let exploring = call.name == explore::TOOL && !truncated;
            let output = if self.control.is_cancelled() {
                ToolOutput::error("interrupted by the user before this call ran")
            } else if round.stop.is_some() {
                ToolOutput::error("not run: the loop guard stopped the session")
            } else if exploring {
                if explored[i].is_none() {
                    let group: Vec<&ToolCall> = calls[i..]
                        .iter()
                        .enumerate()
                        .take_while(|(j, c)| {
                            c.name == explore::TOOL && !(cut_off && i + j + 1 == calls.len())
                        })
                        .map(|(_, c)| c)
                        .collect();
                    for (j, output) in self
                        .pipeline()
                        .explore(&group, ready)
                        .await?
                        .into_iter()
                        .enumerate()
                    {
                        explored[i + j] = Some(output);
                    }
                }
                explored[i]
                    .take()
                    .unwrap_or_else(|| ToolOutput::error("the explorer did not run"))
            } else if call.name == explore::AGENT_TOOL && !truncated && !self.s.agents.is_empty() {
                self.pipeline().delegate(call, ready).await?
            } else {
                self.pipeline()
                    .dispatch(call, truncated, &mut round, ready)
                    .await?
            };
            self.push_result(call, output)?;
        }
        for (kind, path, text) in std::mem::take(&mut round.context) {
            self.add_context(kind, &path, text)?;
        }
        Ok(round)
    }

    /// Prunes, and compacts or drops when the next request would pass the threshold (or whenever, if
    /// `force`); true when something was replaced. Never fails the task: a failed summary falls back to
    /// dropping.
    pub(super) async fn compact(
        &mut self,
        force: bool,
        focus: Option<&str>,
    ) -> Result<bool, AgentError> {
        let Some(pending) = self.s.context.prepare(&mut self.s.conv.messages, force) else {
            return Ok(false);
        };
        let trigger = if force { "manual" } else { "auto" };
        let fields = serde_json::json!({"trigger": trigger, "custom_instructions": focus.unwrap_or_default()});
        self.pipeline()
            .fire(HookEvent::PreCompact, &[trigger], fields)
            .await?;
        let ask = self.s.context.summary_request(
            &pending,
            &self.s.conv.messages,
            &self.s.work.step_lines,
            focus,
        );
        let summary = match ask {
            Some(messages) => self.summarise(&messages).await?,
            None => None,
        };
        let s = &mut *self.s;
        let facts = Facts {
            goal: &s.conv.goal,
            plan: &s.conv.plan,
            steps: &s.work.step_lines,
        };
        let done = s
            .context
            .apply(&mut s.conv.messages, pending, summary, &facts);
        let event = Event::Compaction {
            summary: done.summary,
            kept: done.kept,
            replaced: done.replaced,
            dropped: done.fallback,
            tokens_before: done.tokens_before,
            tokens_after: done.tokens_after,
        };
        super::journal::record(&mut s.work.log, &mut *self.sink, event)?;
        Ok(true)
    }

    /// Prunes and compacts against the (learned) window now; true when the conversation got smaller.
    async fn make_room(&mut self) -> Result<bool, AgentError> {
        let before = self.s.context.tokens(&self.s.conv.messages);
        self.compact(false, None).await?;
        Ok(self.s.context.tokens(&self.s.conv.messages) < before)
    }

    /// Asks the model for a summary; `None` when it fails (the caller drops instead) or the turn is cancelled
    /// (the next model request then ends the turn as interrupted).
    async fn summarise(&mut self, messages: &[Message]) -> Result<Option<String>, AgentError> {
        let link = &self.s.model;
        let request = Request {
            model: &link.config.model,
            messages,
            tools: &[],
            max_tokens: Some(2000),
        };
        match stream::quietly(&link.client, &link.retry, &request, self.control).await {
            None => Ok(None),
            Some(Ok(response)) if !response.text.trim().is_empty() => {
                if let Some(usage) = &response.usage {
                    self.tally.usage.add(usage);
                    self.tally.spent += usage.input_tokens + usage.output_tokens;
                    let cost = link.config.price.map(|price| price.cost(usage));
                    self.tally.cost.add_request(cost);
                    self.record_usage(usage, cost)?;
                }
                Ok(Some(response.text))
            }
            Some(Ok(_)) => Ok(None),
            Some(Err(err)) => {
                self.warn(format!(
                    "could not summarise older messages ({err}); dropping them"
                ))?;
                Ok(None)
            }
        }
    }

    /// Calibrates the estimate with the provider's figures and counts the request against `--max-tokens`.
    fn count_tokens(&mut self, response: &Response) {
        let messages = &self.s.conv.messages;
        let accounting = &mut self.s.context.accounting;
        match &response.usage {
            Some(usage) => {
                accounting.calibrate(messages, usage);
                self.tally.spent += usage.input_tokens + usage.output_tokens;
            }
            None => {
                let output = (response.text.len()
                    + response
                        .tool_calls
                        .iter()
                        .map(|c| c.arguments.len())
                        .sum::<usize>())
                    / 4;
                self.tally.spent += accounting.tokens(messages) + output as u64;
            }
        }
    }

    /// Records a model reply (its text was shown as it streamed) and its usage.
    fn record_reply(&mut self, response: &Response) -> Result<(), AgentError> {
        // Shown as they streamed; stored as that same event.
        for (query, results) in &response.web_searches {
            let event = Event::WebResults {
                query: query.clone(),
                results: results.clone(),
            };
            super::journal::keep(&mut self.s.work.log, &event)?;
        }
        let reply = Event::Reply {
            content: response.text.clone(),
            tool_calls: response.tool_calls.clone(),
            thinking: response.thinking.clone(),
        };
        super::journal::record(&mut self.s.work.log, &mut *self.sink, reply)?;
        if let Some(usage) = &response.usage {
            let cost = self.s.model.config.price.map(|price| price.cost(usage));
            self.record_usage(usage, cost)?;
        }
        Ok(())
    }

    /// Records one request's token usage, with what the session has cost so far (the request is already
    /// in the tally).
    fn record_usage(&mut self, usage: &Usage, cost: Option<f64>) -> Result<(), AgentError> {
        let mut session_cost = Cost::of(self.s.work.log.meta.cost_usd);
        session_cost.add(&self.tally.cost);
        let event = Event::RequestUsage {
            request: self.tally.requests,
            usage: *usage,
            cost,
            session_cost: session_cost.known(),
        };
        super::journal::record(&mut self.s.work.log, &mut *self.sink, event)?;
        Ok(())
    }

    /// Records an event and shows it, when the turn is ending anyway: a log that cannot be written is said
    /// by the end of the turn ([`Turn::finish`]).
    fn say(&mut self, event: Event) {
        if super::journal::record(&mut self.s.work.log, &mut *self.sink, event.clone()).is_err() {
            self.sink.emit(&event);
        }
    }

    /// Records a warning and shows it.
    fn warn(&mut self, message: String) -> Result<(), AgentError> {
        let event = Event::Warning { message };
        super::journal::record(&mut self.s.work.log, &mut *self.sink, event)?;
        Ok(())
    }

    /// Adds a user message (the prompt, or text that steered the turn) to the conversation, the log and the
    /// screen.
    fn add_user(&mut self, content: &str) -> Result<(), AgentError> {
        self.s.conv.messages.push(Message::User {
            content: content.into(),
        });
        let event = Event::Prompt {
            content: content.into(),
        };
        super::journal::record(&mut self.s.work.log, &mut *self.sink, event)?;
        Ok(())
    }

    /// Appends a tool result to the conversation, and to the log unless it was recorded when shown (a call
    /// that never ran, being cancelled or stopped by a guard before it was shown, is only logged); then the
    /// images it returned.
    fn push_result(&mut self, call: &ToolCall, mut output: ToolOutput) -> Result<(), AgentError> {
        let images = std::mem::take(&mut output.images);
        let content = model_view(&output);
        match self.recorded.iter().position(|id| *id == call.id) {
            Some(at) => {
                self.recorded.swap_remove(at);
            }
            None => super::journal::keep(
                &mut self.s.work.log,
                &Event::ToolResult {
                    id: call.id.clone(),
                    ok: !output.is_error,
                    summary: output.summary,
                    output: content.clone(),
                },
            )?,
        }
        self.s.conv.messages.push(Message::Tool {
            tool_call_id: call.id.clone(),
            content,
        });
        for image in images {
            self.add_image(image, Some(&call.id))?;
        }
        Ok(())
    }

    /// Adds an image for the model after the last message: stored as a blob of the session log (so `show`
    /// and `--resume` need no copy of the file), recorded, shown, and added to the conversation. `call` is
    /// the tool call that returned it; `None` for the user's (`--image`).
    pub(super) fn add_image(
        &mut self,
        mut image: crate::protocol::Image,
        call: Option<&str>,
    ) -> Result<(), AgentError> {
        if let Some(bytes) = crate::tools::image::decode(&image.data) {
            image.blob = self.s.work.store.write_image(&bytes)?;
        }
        let event = Event::Image {
            source: image.source.clone(),
            media_type: image.media_type.clone(),
            bytes: image.bytes,
            call: call.map(str::to_owned),
            blob: image.blob.clone(),
        };
        super::journal::record(&mut self.s.work.log, &mut *self.sink, event)?;
        self.s.conv.messages.push(Message::Image { image });
        Ok(())
    }

    /// Adds a message of the agent's own (instructions, a reminder, the plan) to the conversation and the log.
    pub(super) fn add_context(
        &mut self,
        kind: &str,
        path: &str,
        content: String,
    ) -> Result<(), AgentError> {
        let event = Event::Context {
            kind: kind.into(),
            path: path.into(),
            content: content.clone(),
        };
        super::journal::record(&mut self.s.work.log, &mut *self.sink, event)?;
        self.s.conv.messages.push(Message::User { content });
        Ok(())
    }

    /// Records the end of the turn in the session log and tells the front-end: the usage, the summary lines
    /// and `done`. The log's end carries step 0, hence the [`Ready`] of a done start.
    pub(super) fn finish(&mut self, outcome: LoopEnd, _started: Ready) -> TurnEnd {
        let refused = matches!(outcome, LoopEnd::Refused(_));
        let (status, answer, code) = match outcome {
            LoopEnd::Answered(answer) | LoopEnd::Refused(answer) => (Status::Done, answer, 0),
            LoopEnd::Finished(Finish {
                completed: true,
                summary,
            }) => (Status::Done, summary, 0),
            LoopEnd::Finished(Finish {
                completed: false,
                summary,
            }) => (Status::Blocked, summary, EXIT_UNFINISHED),
            LoopEnd::Stopped { status, reason } => {
                let message = format!(
                    "{reason}; the work so far is on {}",
                    short_branch(&self.s.work.session)
                );
                self.say(Event::Error { message });
                (status, self.stop_report(&reason), EXIT_UNFINISHED)
            }
            LoopEnd::Interrupted(partial) => match self.control.signal() {
                Some(sig) if sig != crate::sys::signal::SIGINT => {
                    let name = if sig == crate::sys::signal::SIGHUP {
                        "SIGHUP"
                    } else {
                        "SIGTERM"
                    };
                    let message = format!(
                        "terminated by {name}; running commands were killed; the work so far is on {}",
                        short_branch(&self.s.work.session)
                    );
                    self.say(Event::Error {
                        message: message.clone(),
                    });
                    let answer = if partial.is_empty() { message } else { partial };
                    (
                        Status::Terminated,
                        answer,
                        super::error::exit_terminated(sig),
                    )
                }
                _ => (Status::Interrupted, partial, EXIT_INTERRUPTED),
            },
        };
        let work = &mut self.s.work;
        let place = Place {
            store: &work.store,
            log: &mut work.log,
            session: &work.session,
        };
        self.s.tools.memory.settle(place, &status, &mut *self.sink);
        let usage = self.tally.usage;
        let cost = self.tally.cost.known();
        let session = &self.s.work.session;
        let base = session
            .step0
            .unwrap_or(session.base)
            .to_hex_with_len(7)
            .to_string();
        let ending = [
            Event::Usage { usage, cost },
            Event::TurnEnd {
                status: status.clone(),
                answer: answer.clone(),
            },
            Event::Summary {
                branch: short_branch(session).to_owned(),
                steps: session.steps,
                base,
                usage,
                requests: self.tally.requests,
                cost,
            },
            Event::Done {
                status: status.clone(),
                answer: answer.clone(),
                exit_code: code,
            },
        ];
        if let Err(err) = self.close_log(&status, &ending) {
            // The work is on the branch and the events are in the journal; the next start folds them.
            let message = format!("could not save the session log: {err}");
            self.sink.emit(&Event::Warning { message });
        }
        for event in &ending {
            self.sink.emit(event);
        }
        TurnEnd {
            status,
            answer,
            exit_code: code,
            usage,
            cost: self.tally.cost,
            refused,
        }
    }

    /// Records the end of the turn in the session log (`ending`, which the caller shows next, as
    /// [`super::journal::record`] would) and folds it into the ref.
    fn close_log(&mut self, status: &Status, ending: &[Event]) -> Result<(), StoreError> {
        let work = &mut self.s.work;
        for event in ending {
            super::journal::keep(&mut work.log, event)?;
        }
        let meta = &mut work.log.meta;
        meta.status = status.clone();
        meta.steps = work.session.steps;
        meta.input_tokens += self.tally.usage.input_tokens;
        meta.output_tokens += self.tally.usage.output_tokens;
        add_spend(meta, &self.tally.usage, &self.tally.cost);
        work.log.fold(&work.store)
    }

    /// The answer of a stopped turn: why, what was committed, and the plan.
    fn stop_report(&self, reason: &str) -> String {
        let work = &self.s.work;
        let mut out = format!("Stopped unfinished: {reason}.\n");
        if work.step_lines.is_empty() {
            out.push_str("\nNo step was committed.\n");
        } else {
            out.push_str(&format!(
                "\nCommitted on {}:\n",
                short_branch(&work.session)
            ));
            for line in &work.step_lines {
                out.push_str(&format!("- {line}\n"));
            }
        }
        let plan = &self.s.conv.plan;
        if !plan.is_empty() {
            out.push_str(&format!("\nPlan:\n{}", plan.render()));
        }
        out
    }
}

/// `sending`, with the isolation probe started once the request is out (the send's first poll builds and
/// writes it before anything is waited for): the probe, a fork of the agent into new namespaces that only
/// commands need, then overlaps the wait for the reply instead of delaying the first request (issue 29).
/// It starts once per process; later requests only send.
async fn probing_beside<T>(sending: impl std::future::Future<Output = T>) -> T {
    let probe = async {
        tokio::task::yield_now().await;
        crate::safety::isolate::probe_in_background();
    };
    tokio::join!(sending, probe).0
}
