//! The `agent` tool: a subagent defined in a file works on its task in a loop of its own, its calls taking the
//! session's own path (policy, approvals, hooks, step commits naming it).

use std::sync::Arc;

use serde_json::json;

use crate::config::agent_files::{self, AgentDef};
use crate::config::event_hooks::HookEvent;
use crate::model::Request;
use crate::protocol::{Cost, Event, Message, ToolCall, ToolKind, ToolSchema, Usage};
use crate::tools::{Tool, ToolOutput};

use crate::agent::error::AgentError;
use crate::agent::explore::{child_client, plural, AGENT_MAX_STEPS, AGENT_TOOL};
use crate::agent::journal;
use crate::agent::start::Ready;
use crate::agent::stream;

use super::ToolPipeline;

impl ToolPipeline<'_> {
    /// Runs one `agent` call: the named subagent works on the task in a loop of its own (its system prompt,
    /// its tools, its model if it names one) until it answers. Its calls go through the same path as the
    /// session's (policy, approvals, event hooks, step commits naming it); its requests count against the
    /// turn's budgets; its transcript is logged under the call, as an explorer's is.
    pub(in crate::agent) async fn delegate(
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
        crate::agent::journal::record(&mut self.work.log, &mut *self.sink, call_event)?;
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
                        // Logged and shown as one, at the top of the log like an allowed call's (and skipped
                        // on resume the same way): `show` prints what the live run printed.
                        let call_event = Event::ToolCall {
                            id: child.id.clone(),
                            name: child.name.clone(),
                            kind: ToolKind::Other,
                            label: format!("{} (refused)", child.name),
                            input: serde_json::Value::Null,
                            location: None,
                        };
                        journal::record(&mut self.work.log, &mut *self.sink, call_event)?;
                        self.record_result(child, &refusal)?;
                        self.recorded.retain(|id| *id != child.id);
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
