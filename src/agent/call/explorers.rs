//! A group of `explore` calls from one reply, run side by side ([`crate::agent::explore`] runs each): their
//! transcripts logged under their calls, their use charged to the turn.

use std::sync::{Arc, Mutex};

use tokio::sync::mpsc::unbounded_channel;

use crate::protocol::{Cost, Event, ToolCall, ToolKind, Usage};
use crate::tools::{Tool, ToolContext, ToolOutput};

use crate::agent::error::AgentError;
use crate::agent::event_hooks::HookPlace;
use crate::agent::explore::{join_all, label, relay, Run, Shared, MAX_PARALLEL, TOOL};
use crate::agent::parts::short_branch;
use crate::agent::start::Ready;

use super::ToolPipeline;

impl ToolPipeline<'_> {
    /// Runs a group of explore calls from one reply, at most [`MAX_PARALLEL`] at once, and returns their
    /// outputs in order. The children's transcripts are logged and their use charged to this turn.
    pub(in crate::agent) async fn explore(
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
            crate::agent::journal::record(&mut self.work.log, &mut *self.sink, call_event)?;
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
                        crate::agent::journal::keep(&mut self.work.log, &nested)?;
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
