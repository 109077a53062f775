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
//!
//! The stages in files: this one parses, runs and records a call; [`approval`] decides whether it runs (event
//! hooks, policy, approver) and fires the hooks; [`explorers`] runs a reply's `explore` calls side by side;
//! [`subagent`] runs an `agent` call's loop.

mod approval;
mod explorers;
mod subagent;

use std::mem;
use std::sync::Arc;

use crate::config::agent_files::AgentDef;
use crate::protocol::{Approver, Event, Sink, ToolCall, ToolKind};
use crate::sys::timings::Detail;
use crate::tools::{Registry, Tool, ToolContext, ToolOutput};

use super::control::TurnControl;
use super::error::AgentError;
use super::event_hooks::SessionHooks;
use super::explore::Explorer;
use super::guards::{Effect, Guards, Tally, Verdict};
use super::instructions;
use super::journal;
use super::parts::{Conversation, ModelLink, Narrowing, Toolbox, Workspace};
use super::plan::{Finish, OwnTool, Plan};
use super::stages::parse_args;
use super::start::Ready;
use super::step;

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
    /// Records a call's result as the model sees it (logged, then shown: both tell the result before the step
    /// it may make) and marks the call answered.
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
        self.record_result(call, &output)?;
        if let Some(delta) = &delta {
            self.report_diagnostics(call, delta)?;
        }
        for message in super::lsp::warnings(&self.tools.state) {
            journal::record(
                &mut self.work.log,
                &mut *self.sink,
                Event::Warning { message },
            )?;
        }
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

    /// Records `output` as the call's result ([`Self::record_result`]) and hands it on.
    fn reported(&mut self, call: &ToolCall, output: ToolOutput) -> Result<ToolOutput, AgentError> {
        self.record_result(call, &output)?;
        Ok(output)
    }
}

/// The largest file [`ToolPipeline::show_diffs`] shows: an editor's diff view of a bigger file would not help, and
/// reading it twice per edit would cost.
const DIFF_LIMIT: usize = 1 << 20;

/// A regular file's text as an editing call left it, if it is UTF-8 and at most [`DIFF_LIMIT`] bytes. The
/// tool wrote it through the checkout's confinement; a symlink there is not followed, a FIFO not opened.
fn checkout_text(path: &std::path::Path) -> Option<String> {
    String::from_utf8(crate::sys::fs::read_regular(path, DIFF_LIMIT as u64).ok()?).ok()
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
