//! A call's permission: the `PreToolUse` event hooks, the safety policy and the front-end's approver
//! ([`ToolPipeline::decide`]), and the other event hooks a call or a turn fires.

use std::sync::Arc;

use crate::config::event_hooks::HookEvent;
use crate::protocol::{Approval, ApprovalRequest, Event, ToolCall};
use crate::safety::{Answer, Decision, Ruling};
use crate::tools::{Tool, ToolOutput};

use crate::agent::error::AgentError;
use crate::agent::event_hooks::{self, Permission, Verdict as HookVerdict};
use crate::agent::parts::short_branch;

use super::{Round, ToolPipeline};

impl ToolPipeline<'_> {
    /// The decision on a call: the `PreToolUse` event hooks first (they may refuse it, change its input, or
    /// ask for or give the approval), then the policy, with the front-end's approver asked when no rule
    /// settles it; shown (audit: refused calls are recorded too). The one place every call's permission is
    /// decided, so a hook sees every call the model makes.
    pub(super) async fn decide(
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
    pub(super) async fn pre_tool_use(
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
    pub(super) async fn post_tool_use(
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
    pub(in crate::agent) async fn fire(
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

    pub(super) fn record_hook(
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
        crate::agent::journal::record(&mut self.work.log, &mut *self.sink, event)?;
        Ok(())
    }

    /// Puts a question to the front-end's approver, in safety's terms; a cancel while it is open answers it.
    pub(super) async fn ask_user(&mut self, request: &ApprovalRequest) -> Answer {
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
}
