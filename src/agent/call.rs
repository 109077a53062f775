//! The tool-call pipeline: one call of the model's goes through parse (once), the loop guards, the
//! `PreToolUse` event hooks, the safety policy and (for a risky call no rule settles) the front-end's
//! approver, execution, the change scan, the step commit and its note, then the `PostToolUse` hooks. The
//! agent's own tools (`plan_update`, `remember`, `finish`) are handled here too, without policy, sandbox or
//! commit: they act on the session, not on files. The `explore` calls and the `agent` subagent tool go
//! through it as well: an explorer's children share its parse and execute stages ([`super::stages`]), a subagent's
//! calls take the very same path, their steps naming it.
//!
//! [`ToolPipeline`] borrows what a call needs and nothing else of the session: the workspace (repository,
//! branch, checkout, log), the toolbox (registry, policy, sandbox, change tracker), the conversation's plan
//! and instructions, the hooks, the front-end's sink and approver, and the turn's state it updates (guards,
//! budget, the calls already recorded). The turn makes one for each call ([`super::turn::Turn::pipeline`]);
//! nothing here knows the turn or the session (issue 24: no file cycles, no `impl Turn` in other files).
//!
//! The tools say what they are ([`crate::tools::Tool`]: kind, path or command argument, whether a scan finds
//! their changes); nothing here asks a tool's name what it does.

use std::mem;
use std::sync::{Arc, Mutex};

use crate::config::event_hooks::HookEvent;
use serde_json::json;
use tokio::sync::mpsc::unbounded_channel;

use crate::config::agent_files::{self, AgentDef};
use crate::model::Request;
use crate::protocol::{
    Approval, ApprovalRequest, Approver, Cost, Event, Message, Sink, ToolCall, ToolKind,
    ToolSchema, Usage,
};
use crate::safety::{Answer, Decision, Ruling};
use crate::sys::timings::Detail;
use crate::tools::{Registry, Tool, ToolContext, ToolOutput};

use super::control::TurnControl;
use super::error::AgentError;
use super::event_hooks::{self, HookPlace, Permission, SessionHooks, Verdict as HookVerdict};
use super::explore::{
    child_client, join_all, label, plural, relay, Explorer, Run, Shared, AGENT_MAX_STEPS,
    AGENT_TOOL, MAX_PARALLEL, TOOL,
};
use super::guards::{Effect, Guards, Tally, Verdict};
use super::instructions;
use super::journal;
use super::parts::{short_branch, Conversation, ModelLink, Narrowing, Toolbox, Workspace};
use super::plan::{Finish, OwnTool, Plan};
use super::stages::parse_args;
use super::start::Ready;
use super::step;
use super::stream;

/// What one round of tool calls leaves for the loop to do once every call has its result.
#[derive(Default)]
pub(super) struct Round {
    /// Messages to add after the results: `(kind, path, text)` as in [`Event::Context`].
    pub context: Vec<(&'static str, String, String)>,
    /// The loop guard's reason to stop.
    pub stop: Option<String>,
    pub finish: Option<Finish>,
}

/// One tool call's way through the stages (see the module docs), over the parts of the session it borrows.
pub(super) struct ToolPipeline<'p> {
    pub work: &'p mut Workspace,
    pub tools: &'p mut Toolbox,
    /// The plan (`plan_update`, `finish`) and the instructions a file tool's path brings in.
    pub conv: &'p mut Conversation,
    /// The session's model, which explorers and subagents use unless they name their own.
    pub model: &'p ModelLink,
    pub hooks: &'p SessionHooks,
    /// Subagents defined in files, for the `agent` tool.
    pub agents: &'p [AgentDef],
    /// A command's `allowed-tools`, if the turn runs one.
    pub narrowing: Option<&'p Narrowing>,
    pub explorer: &'p Explorer,
    pub sink: &'p mut dyn Sink,
    /// Answers the risky calls no rule settles (terminal, editor, or never).
    pub approver: &'p mut dyn Approver,
    pub control: &'p TurnControl,
    pub guards: &'p mut Guards,
    /// The turn's budget and what it used (subagents charge theirs).
    pub tally: &'p mut Tally,
    /// The model's text before the tool calls being run, for the step notes.
    pub why: &'p mut String,
    /// The subagent whose calls are being run, named in their step commits.
    pub subagent: &'p mut Option<String>,
    /// The calls whose result is already in the log, recorded when the front-end was shown it.
    pub recorded: &'p mut Vec<String>,
}

impl ToolPipeline<'_> {
    /// Records a call's result as the model sees it (logged, then shown) and marks the call answered.
    fn record_result(&mut self, call: &ToolCall, output: &ToolOutput) -> Result<(), AgentError> {
        let event = Event::ToolResult {
            id: call.id.clone(),
            ok: !output.is_error,
            summary: output.summary.clone(),
            output: model_view(output),
        };
        super::journal::record(&mut self.work.log, &mut *self.sink, event)?;
        self.recorded.push(call.id.clone());
        Ok(())
    }

    /// Runs one call: the agent's own tools here, the others through the guards and the registry. What the
    /// round must do afterwards (reminders, instructions, stop, finish) goes into `round`. The tools work in
    /// the checkout, hence the [`Ready`] of a done start.
    pub(super) async fn dispatch(
        &mut self,
        call: &ToolCall,
        truncated: bool,
        round: &mut Round,
        _started: Ready,
    ) -> Result<ToolOutput, AgentError> {
        if let Some(own) = OwnTool::find(&call.name) {
            return self.own_tool(own, call, truncated, round);
        }
        match self.guards.before_call(call) {
            Verdict::Run => {}
            Verdict::Remind(text) => self.remind(round, text),
            Verdict::Stop(reason) => {
                round.stop = Some(reason.clone());
                return Ok(ToolOutput::error(format!("not run: {reason}")));
            }
        }
        let tool = match self.tools.registry.find(&call.name) {
            Some(tool) => Some(Arc::clone(tool)),
            // Not built in: an MCP tool, whose server may still be starting (bounded by its startup timeout).
            None => tokio::select! {
                tool = self.tools.mcp.tool(&call.name) => tool,
                () = self.control.cancelled() => None,
            },
        };
        let output = self.call_tool(tool.as_ref(), call, truncated).await?;
        self.post_tool_use(call, &output, round).await?;
        let effect = match tool.as_deref() {
            Some(tool) if tool.kind() == ToolKind::Edit => Effect::Edit,
            Some(tool) => tool.command_arg().map_or(Effect::Other, Effect::Command),
            None => Effect::Other,
        };
        match self
            .guards
            .after_call(call, effect, output.is_error, &output.content)
        {
            Verdict::Run => {}
            Verdict::Remind(text) => self.remind(round, text),
            Verdict::Stop(reason) => round.stop = Some(reason),
        }
        if let Some(arg) = tool.as_deref().and_then(|t| t.path_arg()) {
            if !output.is_error {
                self.touch_for_instructions(call, arg, round);
            }
        }
        Ok(output)
    }

    fn remind(&mut self, round: &mut Round, text: String) {
        // Shown when it joins the conversation, after the round's results (a `context` event).
        round.context.push(("reminder", String::new(), text));
    }

    /// `plan_update`, `remember` and `finish`: session state, not files, so no policy check, sandbox or step
    /// commit.
    fn own_tool(
        &mut self,
        own: OwnTool,
        call: &ToolCall,
        truncated: bool,
        round: &mut Round,
    ) -> Result<ToolOutput, AgentError> {
        let args = match parse_args(call, truncated) {
            Ok(args) => args,
            Err(message) => {
                // Every result follows the call it answers, as for the registry's tools: a front-end
                // (ACP, --json) must never get a result for a call it never saw.
                let label = format!("{} (rejected)", call.name);
                let call_event = Event::ToolCall {
                    id: call.id.clone(),
                    name: call.name.clone(),
                    kind: own.kind(),
                    label,
                    input: serde_json::Value::Null,
                    location: None,
                };
                super::journal::record(&mut self.work.log, &mut *self.sink, call_event)?;
                return self.reported(call, ToolOutput::error(message));
            }
        };
        let label = own.label(&args);
        let call_event = Event::ToolCall {
            id: call.id.clone(),
            name: call.name.clone(),
            kind: own.kind(),
            label,
            input: args.clone(),
            location: None,
        };
        super::journal::record(&mut self.work.log, &mut *self.sink, call_event)?;
        let output = match own {
            OwnTool::Plan => match Plan::from_args(&args) {
                Ok(plan) => {
                    journal::record(&mut self.work.log, &mut *self.sink, plan.event())?;
                    self.conv.plan = plan;
                    self.guards.plan_updated();
                    let plan = &self.conv.plan;
                    let summary = format!("{} of {} done", plan.done(), plan.items.len());
                    ToolOutput::ok(format!("plan updated: {summary}"), summary)
                }
                Err(message) => ToolOutput::error(message),
            },
            OwnTool::Remember => {
                let work = &mut *self.work;
                self.tools
                    .memory
                    .remember(&mut work.log, &work.session, &args)?
            }
            OwnTool::Finish => match Finish::from_args(&args) {
                Ok(finish) => {
                    let reminder = if finish.completed {
                        self.guards.may_finish(&self.conv.plan).err()
                    } else {
                        None
                    };
                    match reminder {
                        // Refused once: the reminder is the result, and the model goes on.
                        Some(reminder) => ToolOutput::error(reminder),
                        None => {
                            round.finish = Some(finish);
                            ToolOutput::ok("finished", "finished")
                        }
                    }
                }
                Err(message) => ToolOutput::error(message),
            },
        };
        self.reported(call, output)
    }

    /// A file tool reached a directory (its argument `arg`): bring in project instructions found there for
    /// the first time.
    fn touch_for_instructions(&mut self, call: &ToolCall, arg: &str, round: &mut Round) {
        let Ok(args) = serde_json::from_str::<serde_json::Value>(&call.arguments) else {
            return;
        };
        let Some(path) = args.get(arg).and_then(|p| p.as_str()) else {
            return;
        };
        for file in self.conv.instructions.touch(path) {
            let text = instructions::message(&file);
            round.context.push(("instructions", file.path, text));
        }
    }

    /// Runs one registry tool call and commits what it changed. Failures the model can fix come back as error
    /// output.
    pub(super) async fn call_tool(
        &mut self,
        tool: Option<&Arc<dyn Tool>>,
        call: &ToolCall,
        truncated: bool,
    ) -> Result<ToolOutput, AgentError> {
        let (tool, args) = match parse_call(tool, &self.tools.registry, call, truncated) {
            Ok(found) => found,
            Err(message) => {
                let label = format!("{} (rejected)", call.name);
                let call_event = Event::ToolCall {
                    id: call.id.clone(),
                    name: call.name.clone(),
                    kind: ToolKind::Other,
                    label,
                    input: serde_json::Value::Null,
                    location: None,
                };
                super::journal::record(&mut self.work.log, &mut *self.sink, call_event)?;
                return self.reported(call, ToolOutput::error(message));
            }
        };
        let mut args = args;
        let label = tool.label(&args);
        let call_event = Event::ToolCall {
            id: call.id.clone(),
            name: tool.name().to_owned(),
            kind: tool.kind(),
            label: label.clone(),
            input: args.clone(),
            location: tool.location(&args),
        };
        super::journal::record(&mut self.work.log, &mut *self.sink, call_event)?;
        let decision = self.decide(tool.as_ref(), call, &mut args, &label).await?;
        if decision.is_denied() {
            let output = ToolOutput::error(decision.message_for_model());
            return self.reported(call, output);
        }
        let scan = tool.changes_by_scan();
        if let Some(refusal) = self.inside_submodule(tool.as_ref(), &args) {
            return self.reported(call, ToolOutput::error(refusal));
        }
        if scan {
            self.tools.changes.before_run()?;
        }
        let running = crate::sys::timings::begin();
        let mut output = self.execute(tool, args).await?;
        crate::sys::timings::end("tool", running, &[("name", Detail::Text(tool.name()))]);
        if tool.kind() == ToolKind::Edit && !output.is_error && self.sink.wants_diffs() {
            self.show_diffs(call, &output.changed);
        }
        // Only a mutating tool's call makes a step; a command's changes are found by a scan of the checkout.
        let changed = if scan {
            self.tools.changes.after_run()?
        } else if tool.is_mutating() {
            mem::take(&mut output.changed)
        } else {
            Vec::new()
        };
        // The language servers' new problems join the result the model reads, before it is reported.
        let delta = self.diagnostics(&changed).await?;
        if let Some(delta) = &delta {
            output.content.push_str(&delta.render());
        }
        self.report(call, &output)?;
        if let Some(delta) = &delta {
            self.report_diagnostics(call, delta)?;
        }
        super::lsp::warn(&self.tools.state, &mut *self.sink);
        if !changed.is_empty() {
            let why = match &delta {
                Some(d) if !d.answered.is_empty() => format!(
                    "{}\ndiagnostics: {} error{} left in the changed files ({})",
                    self.why.trim_end(),
                    d.errors_left,
                    if d.errors_left == 1 { "" } else { "s" },
                    d.summary()
                ),
                _ => self.why.clone(),
            };
            // A subagent's step names it, in the commit and in the note.
            let (label, why) = match &self.subagent {
                Some(name) => (
                    format!("[subagent {name}] {label}"),
                    format!("subagent {name}: {why}"),
                ),
                None => (label, why),
            };
            let committing = crate::sys::timings::begin();
            step::commit(self.work, &mut *self.sink, call, &label, &why, &changed)?;
            let step = Detail::Count(self.work.session.steps.into());
            crate::sys::timings::end("step commit", committing, &[("step", step)]);
        }
        Ok(output)
    }

    /// The problems `changed` gained, from their language servers (on a blocking thread: it waits, bounded
    /// by the diagnostics wait). Each file's text before the call is the branch tip's.
    async fn diagnostics(
        &self,
        changed: &[std::path::PathBuf],
    ) -> Result<Option<crate::lsp::delta::Delta>, AgentError> {
        if changed.is_empty() || self.tools.state.lsp().is_none() {
            return Ok(None);
        }
        let work = &self.work;
        let old: Vec<Option<String>> = changed
            .iter()
            .map(
                |rel| match work.store.blob_at(work.session.tip, &rel.to_string_lossy()) {
                    Ok(Some((bytes, _))) => String::from_utf8(bytes).ok(),
                    _ => None,
                },
            )
            .collect();
        let state = Arc::clone(&self.tools.state);
        let changed = changed.to_vec();
        tokio::task::spawn_blocking(move || {
            super::lsp::after_change(&state, &changed, |rel| {
                let at = changed.iter().position(|c| c == rel)?;
                old.get(at).cloned().flatten()
            })
        })
        .await
        .map_err(|e| AgentError::Join(e.to_string()))
    }

    /// The dim line under the result, the `diagnostics` event and its record in the session log.
    fn report_diagnostics(
        &mut self,
        call: &ToolCall,
        delta: &crate::lsp::delta::Delta,
    ) -> Result<(), AgentError> {
        let lines: Vec<String> = delta
            .errors
            .iter()
            .chain(&delta.warnings)
            .map(|d| d.line())
            .collect();
        let event = Event::Diagnostics {
            id: call.id.clone(),
            summary: delta.summary(),
            errors: delta.error_count,
            warnings: delta.warning_count,
            errors_left: delta.errors_left,
            lines,
        };
        journal::record(&mut self.work.log, &mut *self.sink, event)?;
        Ok(())
    }

    /// Why a file tool's write must not happen: its path lies inside a submodule of the session's tip, whose
    /// files belong to another repository (committing them would turn the gitlink into a tree; issue 17,
    /// defect 9). Commands are caught at the step commit instead, which withholds such files.
    fn inside_submodule(&self, tool: &dyn Tool, args: &serde_json::Value) -> Option<String> {
        if !tool.is_mutating() || tool.changes_by_scan() {
            return None;
        }
        let path = args.get(tool.path_arg()?)?.as_str()?;
        let work = &self.work;
        let root = work.session.root();
        let rel =
            crate::safety::path::resolve(root, path, crate::safety::path::Access::Write).ok()?;
        let root = std::fs::canonicalize(root).ok()?;
        let rel = rel.strip_prefix(&root).ok()?;
        // A store that cannot answer lets the write go ahead: the step commit screens the path again.
        let sub = work.store.submodule_above(work.session.tip, rel).ok()??;
        Some(format!(
            "{path} is inside the submodule '{}': its files belong to the submodule's own repository, so the \
             agent does not write there; change files outside it",
            sub.display()
        ))
    }

    /// The decision on a call: the `PreToolUse` event hooks first (they may refuse it, change its input, or
    /// ask for or give the approval), then the policy, with the front-end's approver asked when no rule
    /// settles it; shown (audit: refused calls are recorded too). The one place every call's permission is
    /// decided, so a hook sees every call the model makes.
    async fn decide(
        &mut self,
        tool: &dyn Tool,
        call: &ToolCall,
        args: &mut serde_json::Value,
        label: &str,
    ) -> Result<Decision, AgentError> {
        if let Some(narrowing) = self.narrowing {
            if !crate::config::agent_files::tool_allowed(&narrowing.tools, tool.name()) {
                let decision = Decision {
                    outcome: Ruling::Deny,
                    rule: "allowed-tools".into(),
                    reason: format!(
                        "{} allows only {}",
                        narrowing.by,
                        narrowing.tools.join(", ")
                    ),
                };
                self.sink.emit(&Event::Permission {
                    id: call.id.clone(),
                    tool: tool.name().to_owned(),
                    decision: decision.outcome.as_str().to_owned(),
                    rule: decision.rule.clone(),
                    reason: decision.reason.clone(),
                });
                return Ok(decision);
            }
        }
        let hooks = self.pre_tool_use(tool.name(), call, args).await?;
        let mut decision = match &hooks.block {
            Some(reason) => Decision {
                outcome: Ruling::Deny,
                rule: "event-hook".into(),
                reason: reason.clone(),
            },
            None => self.tools.policy.check(&tool.checked(args)),
        };
        match hooks.permission {
            // A hook may ask for the user's word on a call the rules allow, never wave through one they deny.
            Some(Permission::Ask) if decision.outcome == Ruling::Allow => {
                decision.outcome = Ruling::Ask;
                decision.rule = "event-hook".into();
                decision.reason = "an event hook asks for your approval".into();
            }
            Some(Permission::Allow) if decision.needs_approval() => {
                decision.outcome = Ruling::Approved;
                decision.rule = "event-hook".into();
            }
            _ => {}
        }
        if decision.needs_approval() {
            let message = format!("git-agent needs your permission to use {}", tool.name());
            let fields =
                serde_json::json!({"message": message, "notification_type": "permission_prompt"});
            self.fire(HookEvent::Notification, &["permission_prompt"], fields)
                .await?;
            let subject = tool
                .command_arg()
                .and_then(|arg| args.get(arg))
                .and_then(|c| c.as_str())
                .unwrap_or(label);
            let request = ApprovalRequest {
                call_id: call.id.clone(),
                tool: tool.name().to_string(),
                subject: subject.to_string(),
                reason: decision.reason.clone(),
            };
            let answer = self.ask_user(&request).await;
            decision = self.tools.policy.settle(&request.subject, decision, answer);
        }
        self.sink.emit(&Event::Permission {
            id: call.id.clone(),
            tool: tool.name().to_owned(),
            decision: decision.outcome.as_str().to_owned(),
            rule: decision.rule.clone(),
            reason: decision.reason.clone(),
        });
        Ok(decision)
    }

    /// The `PreToolUse` hooks of a call; `args` become the `updatedInput` a hook gave.
    async fn pre_tool_use(
        &mut self,
        tool: &str,
        call: &ToolCall,
        args: &mut serde_json::Value,
    ) -> Result<HookVerdict, AgentError> {
        let fields = event_hooks::tool_fields(tool, &call.id, args);
        let names = event_hooks::tool_names(tool);
        let verdict = self.fire(HookEvent::PreToolUse, &names, fields).await?;
        if let Some(input) = &verdict.updated_input {
            *args = event_hooks::from_claude_input(tool, input.clone());
        }
        Ok(verdict)
    }

    /// The `PostToolUse` (or, for a failed call, `PostToolUseFailure`) hooks of a call: what they say for the
    /// model (`additionalContext`, a block's reason) joins the round's context.
    async fn post_tool_use(
        &mut self,
        call: &ToolCall,
        output: &ToolOutput,
        round: &mut Round,
    ) -> Result<(), AgentError> {
        let event = if output.is_error {
            HookEvent::PostToolUseFailure
        } else {
            HookEvent::PostToolUse
        };
        let names = event_hooks::tool_names(&call.name);
        if self.hooks.matching(event, &names).is_empty() {
            return Ok(());
        }
        let args = serde_json::from_str(&call.arguments).unwrap_or(serde_json::Value::Null);
        let mut fields = event_hooks::tool_fields(&call.name, &call.id, &args);
        fields["tool_response"] = serde_json::json!({
            "content": output.content,
            "summary": output.summary,
            "success": !output.is_error,
        });
        if output.is_error {
            fields["error"] = serde_json::json!(output.content);
        }
        let verdict = self.fire(event, &names, fields).await?;
        let name = event.as_str();
        for text in verdict.context {
            round
                .context
                .push(("hook", String::new(), format!("{name} hook: {text}")));
        }
        if let Some(reason) = verdict.block {
            round
                .context
                .push(("hook", String::new(), format!("{name} hook: {reason}")));
        }
        Ok(())
    }

    /// Runs the hooks of `event` that match `names` with the event's JSON (`fields` added to the common
    /// ones); each run is shown and recorded. Nothing is started when no hook matches.
    pub(super) async fn fire(
        &mut self,
        event: HookEvent,
        names: &[&str],
        fields: serde_json::Value,
    ) -> Result<HookVerdict, AgentError> {
        let hooks = self.hooks.matching(event, names);
        if hooks.is_empty() {
            return Ok(HookVerdict::default());
        }
        let work = &self.work;
        // Before a new session's checkout exists, the hooks run in the user's work tree, which it copies.
        let dir = match work.start.ready() {
            Some(_) => work.session.root().to_path_buf(),
            None => work.store.workdir().to_path_buf(),
        };
        let base = event_hooks::Base {
            session_id: &work.session.id,
            cwd: &dir,
            agent_branch: short_branch(&work.session),
            step_commit: work.session.tip.to_string(),
        };
        let input = base.input(event, fields);
        let sandbox = Arc::clone(&self.tools.sandbox);
        let runs = event_hooks::run_async(hooks, input, dir, sandbox).await;
        let verdict = event_hooks::judge(event, runs, event == HookEvent::PreToolUse);
        for (run, outcome) in &verdict.runs {
            self.record_hook(event, run, outcome)?;
        }
        Ok(verdict)
    }

    fn record_hook(
        &mut self,
        event: HookEvent,
        run: &event_hooks::HookRun,
        outcome: &str,
    ) -> Result<(), AgentError> {
        // One fact once: the session log and the front-end get the same event (`show` replays it).
        let event = Event::Hook {
            event: event.as_str().to_owned(),
            command: run.hook.command.clone(),
            source: run.hook.source.clone(),
            outcome: outcome.to_owned(),
            duration_ms: u64::try_from(run.duration.as_millis()).unwrap_or(u64::MAX),
        };
        super::journal::record(&mut self.work.log, &mut *self.sink, event)?;
        Ok(())
    }

    /// Puts a question to the front-end's approver, in safety's terms; a cancel while it is open answers it.
    async fn ask_user(&mut self, request: &ApprovalRequest) -> Answer {
        let approval = tokio::select! {
            answer = self.approver.approve(request) => answer,
            () = self.control.cancelled() => Approval::Cancelled,
        };
        match approval {
            Approval::Once => Answer::Once,
            Approval::Always => Answer::Always,
            Approval::Reject => Answer::Declined,
            Approval::Cancelled => Answer::Cancelled,
            Approval::CannotAsk => Answer::CannotAsk,
        }
    }

    /// Runs the tool on a blocking thread (file I/O, child processes); a cancel reaches it through
    /// `ctx.cancel`, and so does the end of `--max-time`: a budget is kept while a command runs, not only
    /// between requests (issue 23, finding 11), and the turn then stops before its next request.
    async fn execute(
        &self,
        tool: &Arc<dyn Tool>,
        args: serde_json::Value,
    ) -> Result<ToolOutput, AgentError> {
        let tools = &self.tools;
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let ctx = ToolContext {
            root: self.work.session.root().to_path_buf(),
            run_timeout: tools.run_timeout,
            cancel: Arc::clone(&stop),
            session: Arc::clone(&tools.state),
            sandbox: Arc::clone(&tools.sandbox),
        };
        let run = super::stages::run_blocking(Arc::clone(tool), ctx, args);
        tokio::pin!(run);
        let budget = self.tally.budget;
        let finished = tokio::select! {
            finished = &mut run => Some(finished),
            () = self.control.cancelled() => None,
            () = budget.expired() => None,
        };
        let finished = match finished {
            Some(finished) => finished,
            None => {
                // The tool stops at its next look at the flag (a command's process group is killed); what
                // it returns says so.
                stop.store(true, std::sync::atomic::Ordering::SeqCst);
                run.await
            }
        };
        finished.map_err(|e| AgentError::Join(e.to_string()))
    }

    /// Shows what an editing call did to each file it changed: the file as the branch's tip has it (the
    /// step before) and as the call left it in the checkout. Only text files up to [`DIFF_LIMIT`] bytes; a
    /// front-end gets the plain result for the others.
    fn show_diffs(&mut self, call: &ToolCall, changed: &[std::path::PathBuf]) {
        let work = &self.work;
        for rel in changed {
            let Some(new) = checkout_text(&work.session.root().join(rel)) else {
                continue;
            };
            let old = match work.store.blob_at(work.session.tip, &rel.to_string_lossy()) {
                Ok(Some((bytes, _))) if bytes.len() <= DIFF_LIMIT => match String::from_utf8(bytes)
                {
                    Ok(text) => Some(text),
                    Err(_) => continue,
                },
                Ok(Some(_)) | Err(_) => continue,
                Ok(None) => None,
            };
            self.sink.emit(&Event::Diff {
                id: call.id.clone(),
                path: rel.clone(),
                old,
                new,
            });
        }
    }

    /// Records the result of a call the front-end was shown, in the log and on the screen at once, before the
    /// step it may make: both then tell the result, then the step.
    fn report(&mut self, call: &ToolCall, output: &ToolOutput) -> Result<(), AgentError> {
        let event = Event::ToolResult {
            id: call.id.clone(),
            ok: !output.is_error,
            summary: output.summary.clone(),
            output: model_view(output),
        };
        journal::record(&mut self.work.log, &mut *self.sink, event)?;
        self.recorded.push(call.id.clone());
        Ok(())
    }

    fn reported(&mut self, call: &ToolCall, output: ToolOutput) -> Result<ToolOutput, AgentError> {
        self.report(call, &output)?;
        Ok(output)
    }
}

impl ToolPipeline<'_> {
    /// Runs a group of explore calls from one reply, at most [`MAX_PARALLEL`] at once, and returns their
    /// outputs in order. The children's transcripts are logged and their use charged to this turn.
    pub(super) async fn explore(
        &mut self,
        calls: &[&ToolCall],
        _started: Ready,
    ) -> Result<Vec<ToolOutput>, AgentError> {
        let mut tasks: Vec<Result<String, String>> = Vec::new();
        for call in calls {
            let task = serde_json::from_str::<serde_json::Value>(&call.arguments)
                .ok()
                .and_then(|args| args.get("task").and_then(|t| t.as_str()).map(str::to_owned))
                .filter(|t| !t.trim().is_empty())
                .ok_or_else(|| {
                    "missing required string argument `task`: the question to explore".to_owned()
                });
            let input = serde_json::from_str(&call.arguments).unwrap_or(serde_json::Value::Null);
            let label = match &task {
                Ok(_) => label(&input),
                Err(_) => "explore (rejected)".to_owned(),
            };
            let call_event = Event::ToolCall {
                id: call.id.clone(),
                name: TOOL.to_owned(),
                kind: ToolKind::Search,
                label,
                input,
                location: None,
            };
            super::journal::record(&mut self.work.log, &mut *self.sink, call_event)?;
            tasks.push(task);
        }
        let (requests, spent) = self.tally.used();
        let budget = self.tally.budget;
        let mut session_cost = Cost::of(self.work.log.meta.cost_usd);
        session_cost.add(&self.tally.cost);
        // The references themselves, so what the children borrow of them outlives no borrow of `self`.
        let (link, explorer, work, toolbox) =
            (self.model, self.explorer, &*self.work, &*self.tools);
        let (client, model, price) = match &explorer.own {
            Some((client, model)) => (client, model.model.as_str(), model.price),
            None => (&link.client, link.config.model.as_str(), link.config.price),
        };
        let tools: Vec<Arc<dyn Tool>> = toolbox
            .registry
            .iter()
            .filter(|t| {
                !t.is_mutating()
                    && matches!(t.kind(), ToolKind::Read | ToolKind::Search)
                    && t.path_arg().is_some()
            })
            .cloned()
            .collect();
        let (events, mut arrivals) = unbounded_channel();
        let shared = Shared {
            client,
            model,
            price,
            retry: &link.retry,
            schemas: tools.iter().map(|t| t.schema()).collect(),
            tools,
            ctx: ToolContext {
                root: work.session.root().to_path_buf(),
                run_timeout: toolbox.run_timeout,
                cancel: self.control.flag(),
                session: Arc::clone(&toolbox.state),
                sandbox: Arc::clone(&toolbox.sandbox),
            },
            secret_envs: vec![link.config.api_key_env.clone()],
            hooks: HookPlace {
                hooks: self.hooks.clone(),
                session_id: work.session.id.clone(),
                dir: work.session.root().to_path_buf(),
                agent_branch: short_branch(&work.session).to_owned(),
                step_commit: work.session.tip.to_string(),
                sandbox: Arc::clone(&toolbox.sandbox),
            },
            policy: &toolbox.policy,
            events,
            used: Mutex::new((requests, spent)),
            session_cost: Mutex::new(session_cost),
            budget,
            max_steps: explorer.max_steps,
            control: self.control,
        };
        let mut runs: Vec<Option<Run>> = Vec::new();
        let work: Vec<(usize, &str)> = tasks
            .iter()
            .enumerate()
            .filter_map(|(i, t)| t.as_ref().ok().map(|t| (i, t.as_str())))
            .collect();
        runs.resize_with(calls.len(), || None);
        for chunk in work.chunks(MAX_PARALLEL) {
            let futures: Vec<_> = chunk
                .iter()
                .map(|(i, task)| Box::pin(shared.run(&calls[*i].id, task)))
                .collect();
            let children = join_all(futures);
            for ((i, _), run) in chunk
                .iter()
                .zip(relay(children, &mut arrivals, &mut *self.sink).await)
            {
                runs[*i] = Some(run);
            }
        }
        let (requests, spent) = shared.used.lock().map(|u| *u).unwrap_or((requests, spent));
        drop(shared);
        let mut usage = Usage::default();
        let mut cost = Cost::default();
        let mut outputs = Vec::new();
        for ((call, task), run) in calls.iter().zip(tasks).zip(runs) {
            let output = match (task, run) {
                (Err(message), _) => ToolOutput::error(message),
                (Ok(_), None) => ToolOutput::error("the explorer did not run"),
                (Ok(_), Some(run)) => {
                    // Kept, not shown: the sink saw its events as they happened.
                    for event in run.events {
                        let nested = Event::Nested {
                            parent: call.id.clone(),
                            event: Box::new(event),
                        };
                        super::journal::keep(&mut self.work.log, &nested)?;
                    }
                    usage.add(&run.usage);
                    cost.add(&run.cost);
                    run.output
                }
            };
            self.record_result(call, &output)?;
            outputs.push(output);
        }
        self.tally.charge(requests, spent, &usage, &cost);
        Ok(outputs)
    }
}

impl ToolPipeline<'_> {
    /// Runs one `agent` call: the named subagent works on the task in a loop of its own (its system prompt,
    /// its tools, its model if it names one) until it answers. Its calls go through the same path as the
    /// session's (policy, approvals, event hooks, step commits naming it); its requests count against the
    /// turn's budgets; its transcript is logged under the call, as an explorer's is.
    pub(super) async fn delegate(
        &mut self,
        call: &ToolCall,
        _started: Ready,
    ) -> Result<ToolOutput, AgentError> {
        let args: serde_json::Value =
            serde_json::from_str(&call.arguments).unwrap_or(serde_json::Value::Null);
        let name = args["name"].as_str().unwrap_or_default().to_owned();
        let task = args["task"].as_str().unwrap_or_default().to_owned();
        let label = format!("agent {name} \"{}\"", crate::tools::short(&task, 60));
        let call_event = Event::ToolCall {
            id: call.id.clone(),
            name: AGENT_TOOL.to_owned(),
            kind: ToolKind::Other,
            label,
            input: args,
            location: None,
        };
        super::journal::record(&mut self.work.log, &mut *self.sink, call_event)?;
        let output = match self.agents.iter().find(|a| a.name == name).cloned() {
            _ if task.trim().is_empty() => ToolOutput::error(
                "missing required string argument `task`: what the subagent should do",
            ),
            None => ToolOutput::error(format!(
                "there is no subagent '{name}'; the subagents are: {}",
                self.agents
                    .iter()
                    .map(|a| a.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
            Some(agent) => {
                let previous = self.subagent.replace(agent.name.clone());
                // The subagent's text becomes the reason in its steps' notes; the parent's is kept for its own.
                let why = self.why.clone();
                let output = self.subagent_loop(call, &agent, &task).await;
                *self.subagent = previous;
                *self.why = why;
                let output = output?;
                let fields = json!({"agent_name": agent.name, "stop_hook_active": false});
                self.fire(HookEvent::SubagentStop, &[&agent.name], fields)
                    .await?;
                output
            }
        };
        self.record_result(call, &output)?;
        Ok(output)
    }

    /// The subagent's loop, from the task to its answer.
    async fn subagent_loop(
        &mut self,
        call: &ToolCall,
        agent: &AgentDef,
        task: &str,
    ) -> Result<ToolOutput, AgentError> {
        let own = match &agent.model {
            Some(spec) => {
                match child_client(spec, self.work.store.workdir(), self.model.timeouts()) {
                    Ok(own) => Some(own),
                    Err(message) => return Ok(ToolOutput::error(message)),
                }
            }
            None => None,
        };
        let tools: Vec<Arc<dyn Tool>> = self
            .tools
            .registry
            .iter()
            .filter(|t| {
                agent
                    .tools
                    .as_ref()
                    .is_none_or(|list| agent_files::tool_allowed(list, t.name()))
            })
            .cloned()
            .collect();
        let schemas: Vec<ToolSchema> = tools.iter().map(|t| t.schema()).collect();
        let root = self.work.session.root().display().to_string();
        let mut messages = vec![
            Message::System {
                content: format!(
                    "{}\n\nYou are the subagent '{}' of git-agent, a coding agent, working in the repository                      checked out at {root}. Paths are relative to it. When you are done, answer without                      calling tools: what you did or found, citing path:line. The agent sees only that answer.",
                    agent.prompt, agent.name
                ),
            },
            Message::User {
                content: task.to_owned(),
            },
        ];
        self.log_child(
            call,
            Event::Prompt {
                content: task.to_owned(),
            },
        )?;
        let mut requests = 0u32;
        loop {
            let (used, spent) = self.tally.used();
            if let Some((_, reason)) = self.tally.budget.exceeded(used, spent) {
                return Ok(ToolOutput::error(format!(
                    "the subagent {} stopped before it answered: the session's budget ran out ({reason})",
                    agent.name
                )));
            }
            requests += 1;
            let last = requests >= AGENT_MAX_STEPS;
            let offered: &[ToolSchema] = if last { &[] } else { &schemas };
            let sent = match &own {
                Some((client, model)) => {
                    let request = Request {
                        model: &model.model,
                        messages: &messages,
                        tools: offered,
                        max_tokens: None,
                    };
                    stream::quietly(client, &self.model.retry, &request, self.control).await
                }
                None => {
                    let link = self.model;
                    let request = Request {
                        model: &link.config.model,
                        messages: &messages,
                        tools: offered,
                        max_tokens: None,
                    };
                    stream::quietly(&link.client, &link.retry, &request, self.control).await
                }
            };
            let response = match sent {
                None => return Ok(ToolOutput::error("interrupted by the user")),
                Some(Err(err)) => {
                    return Ok(ToolOutput::error(format!(
                        "the subagent {}'s model request failed: {err}",
                        agent.name
                    )))
                }
                Some(Ok(response)) => response,
            };
            let mut usage = Usage::default();
            let mut cost = Cost::default();
            if let Some(u) = &response.usage {
                usage.add(u);
                let price = own
                    .as_ref()
                    .map_or(self.model.config.price, |(_, m)| m.price);
                cost.add_request(price.map(|p| p.cost(u)));
            }
            let tokens = usage.input_tokens + usage.output_tokens;
            self.tally.charge(used + 1, spent + tokens, &usage, &cost);
            self.log_child(
                call,
                Event::Reply {
                    content: response.text.clone(),
                    tool_calls: response.tool_calls.clone(),
                    thinking: Vec::new(),
                },
            )?;
            messages.push(Message::Assistant {
                content: response.text.clone(),
                tool_calls: response.tool_calls.clone(),
                thinking: response.thinking,
            });
            if response.tool_calls.is_empty() || last {
                let answer = response.text.trim();
                if answer.is_empty() {
                    return Ok(ToolOutput::error(format!(
                        "the subagent {} answered with nothing",
                        agent.name
                    )));
                }
                let summary = format!("{}: {requests} request{}", agent.name, plural(requests));
                return Ok(ToolOutput::ok(answer.to_owned(), summary));
            }
            self.why.clone_from(&response.text);
            for child in &response.tool_calls {
                let tool = tools.iter().find(|t| t.name() == child.name).cloned();
                let output = match tool {
                    Some(tool) => {
                        // The session's path records the result as it is shown: at the top of the log, where
                        // a resume skips it (its call is the subagent's, not the session's).
                        let output = self.call_tool(Some(&tool), child, false).await?;
                        self.recorded.retain(|id| *id != child.id);
                        output
                    }
                    None => {
                        let refusal = ToolOutput::error(format!(
                            "`{}` is not among the tools of the subagent {} ({}); say in your answer what \
                             should be done instead",
                            child.name,
                            agent.name,
                            tools.iter().map(|t| t.name()).collect::<Vec<_>>().join(", ")
                        ));
                        self.sink.emit(&Event::ToolCall {
                            id: child.id.clone(),
                            name: child.name.clone(),
                            kind: ToolKind::Other,
                            label: format!("{} (refused)", child.name),
                            input: serde_json::Value::Null,
                            location: None,
                        });
                        self.sink.emit(&Event::ToolResult {
                            id: child.id.clone(),
                            ok: false,
                            summary: refusal.summary.clone(),
                            output: refusal.content.clone(),
                        });
                        self.log_child(
                            call,
                            Event::ToolResult {
                                id: child.id.clone(),
                                ok: false,
                                summary: refusal.summary.clone(),
                                output: refusal.content.clone(),
                            },
                        )?;
                        refusal
                    }
                };
                messages.push(Message::Tool {
                    tool_call_id: child.id.clone(),
                    content: output.content,
                });
            }
        }
    }

    /// Logs an event of a subagent under the call that started it (never part of the session's own
    /// conversation on resume).
    fn log_child(&mut self, call: &ToolCall, event: Event) -> Result<(), AgentError> {
        let nested = Event::Nested {
            parent: call.id.clone(),
            event: Box::new(event),
        };
        journal::keep(&mut self.work.log, &nested)?;
        Ok(())
    }
}

/// The largest file [`ToolPipeline::show_diffs`] shows: an editor's diff view of a bigger file would not help, and
/// reading it twice per edit would cost.
const DIFF_LIMIT: usize = 1 << 20;

/// A regular file's text as an editing call left it, if it is UTF-8 and at most [`DIFF_LIMIT`] bytes. The
/// tool wrote it through the checkout's confinement; a symlink there is not followed.
fn checkout_text(path: &std::path::Path) -> Option<String> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    if !meta.is_file() || meta.len() > DIFF_LIMIT as u64 {
        return None;
    }
    String::from_utf8(std::fs::read(path).ok()?).ok()
}

/// Checks that the call names a tool and parses its arguments, or says what is wrong in words the model can
/// act on; `tool` is what the registry found for the call's name.
fn parse_call<'t>(
    tool: Option<&'t Arc<dyn Tool>>,
    registry: &Registry,
    call: &ToolCall,
    truncated: bool,
) -> Result<(&'t Arc<dyn Tool>, serde_json::Value), String> {
    let tool = tool.ok_or_else(|| {
        format!(
            "unknown tool '{}'; available tools: {}",
            call.name,
            registry.names().join(", ")
        )
    })?;
    Ok((tool, parse_args(call, truncated)?))
}

/// What the model sees of a tool result: errors are marked as such, so it cannot mistake them for output.
pub(super) fn model_view(output: &ToolOutput) -> String {
    if output.is_error && !output.content.starts_with("error") {
        format!("error: {}", output.content)
    } else {
        output.content.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_calls_become_messages_for_the_model() {
        let tools = Registry::builtin();
        let call = |name: &str, args: &str| ToolCall {
            id: "1".into(),
            name: name.into(),
            arguments: args.into(),
        };
        let parse = |c: &ToolCall, truncated| {
            parse_call(tools.find(&c.name), &tools, c, truncated).map(|(_, args)| args)
        };
        let err = parse(&call("nope", "{}"), false).unwrap_err();
        assert!(err.contains("unknown tool 'nope'"), "{err}");
        assert!(err.contains("read_file, list_files"), "{err}");
        let err = parse(&call("read_file", "{\"path\": "), false).unwrap_err();
        assert!(err.contains("not valid JSON"), "{err}");
        let err = parse(&call("read_file", "[1]"), false).unwrap_err();
        assert!(err.contains("JSON object"), "{err}");
        let err = parse(&call("read_file", "{\"path\":\"a\"}"), true).unwrap_err();
        assert!(err.contains("cut off"), "{err}");
        let args = parse(&call("read_file", ""), false).unwrap();
        assert!(args.as_object().is_some_and(|o| o.is_empty()));
    }
}
