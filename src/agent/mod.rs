//! The turn loop: send the conversation and tool schemas, stream the reply, run the tools the model picked,
//! commit what changed as one step on the session's branch, feed the results back, and repeat until the model
//! answers without tool calls or a guard stops it.

mod prompt;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::watch;

use crate::config::ModelConfig;
use crate::model::retry::RetryPolicy;
use crate::model::{
    Client, FinishReason, Message, ModelError, Request, Response, StreamEvent, ToolCall, Usage,
};
use crate::store::{ChangeTracker, Session, Store, StoreError};
use crate::tools::{self, SessionState, Tool, ToolContext, ToolOutput};
use crate::ui::{Event, Sink};

/// Exit code when the task stopped unfinished (step limit, guard).
pub const EXIT_UNFINISHED: i32 = 3;
/// Exit code when the user interrupted.
pub const EXIT_INTERRUPTED: i32 = 130;

/// Options of one `ask`.
#[derive(Debug)]
pub struct AskOptions {
    pub prompt: String,
    pub model: ModelConfig,
    pub max_steps: u32,
    pub run_timeout: Duration,
    pub connect_timeout: Duration,
    pub idle_timeout: Duration,
}

/// The error returned by [`ask()`]: host failures that end the session. Failures the model can fix are tool
/// results, never errors.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error("{source}\nhint: check {env}, the API key of the '{provider}' provider")]
    Auth {
        source: ModelError,
        env: &'static str,
        provider: &'static str,
    },
    #[error("{source}\nhint: is the model server running? The endpoint comes from {env} (or the provider's default)")]
    Unreachable {
        source: ModelError,
        env: &'static str,
    },
    #[error("a tool task failed: {0}")]
    Join(String),
}

/// Runs one task to completion in a new session and returns the process exit code.
pub async fn ask(
    cwd: &std::path::Path,
    opts: AskOptions,
    sink: &mut dyn Sink,
) -> Result<i32, AgentError> {
    let client = Client::new(
        opts.model.wire,
        opts.model.base_url.clone(),
        opts.model.api_key.clone(),
        opts.connect_timeout,
        opts.idle_timeout,
    )?;
    let store = Store::open(cwd)?;
    let id = store.new_session_id();
    let session = store.start_session(&id, true)?;
    let (cancel, cancelled) = interrupt_flag();
    let changes = ChangeTracker::new(&session.root);
    let tool_state = Arc::new(SessionState::new(
        Some(store.common_dir().join("agent").join("output").join(&id)),
        vec![opts.model.api_key_env.to_string()],
    ));
    let mut turn = Turn {
        tool_state,
        store,
        client,
        session,
        sink,
        retry: RetryPolicy::default(),
        tools: Arc::new(tools::registry()),
        cancel,
        cancelled,
        usage: Usage::default(),
        changes,
        requests: 0,
        announced: false,
        model: opts.model,
        run_timeout: opts.run_timeout,
    };
    let result = turn.run(&opts.prompt, opts.max_steps).await;
    // Background jobs (dev servers) never outlive the session, however it ended.
    turn.tool_state.shutdown();
    if let Err(AgentError::Model(err)) = result {
        if !turn.announced {
            // The model never answered: leave no trace of a session that never started (no partial refs).
            // Best effort: the model error is what the user needs to see.
            let _ = turn.store.rollback_session(&turn.session);
        }
        return Err(match err {
            ModelError::Auth { .. } => AgentError::Auth {
                source: err,
                env: turn.model.api_key_env,
                provider: turn.model.provider,
            },
            ModelError::Connect { refused: true, .. } => AgentError::Unreachable {
                source: err,
                env: turn.model.base_url_env,
            },
            err => AgentError::Model(err),
        });
    }
    let outcome = result?;
    Ok(turn.finish(outcome))
}

/// How a session ended.
enum Outcome {
    Answered(String),
    StepLimit(u32),
    Interrupted(String),
}

struct Turn<'s> {
    /// Shared by the session's tool calls: read fingerprints, saved output, background jobs.
    tool_state: Arc<SessionState>,
    store: Store,
    client: Client,
    retry: RetryPolicy,
    session: Session,
    sink: &'s mut dyn Sink,
    tools: Arc<Vec<Box<dyn Tool>>>,
    cancel: Arc<AtomicBool>,
    cancelled: watch::Receiver<bool>,
    usage: Usage,
    /// What `run` commands changed in the checkout (inotify, or a stat scan).
    changes: ChangeTracker,
    requests: u32,
    /// The session line is shown once the model first answers, so a session that fails to reach the model
    /// leaves one clean error line and no refs.
    announced: bool,
    model: ModelConfig,
    run_timeout: Duration,
}

impl Turn<'_> {
    async fn run(&mut self, goal: &str, max_steps: u32) -> Result<Outcome, AgentError> {
        let checkout = self.session.root.display().to_string();
        let branch = self.short_branch();
        let base = self.session.base.to_string();
        let env = prompt::Environment {
            checkout: &checkout,
            branch: &branch,
            base: &base,
            date: &today(),
        };
        let mut messages = vec![
            Message::System {
                content: prompt::system_prompt(&env),
            },
            Message::User {
                content: goal.into(),
            },
        ];
        let schemas: Vec<_> = self.tools.iter().map(|t| t.schema()).collect();
        let model = self.model.model.clone();
        loop {
            if self.requests >= max_steps {
                return Ok(Outcome::StepLimit(max_steps));
            }
            let request = Request {
                model: &model,
                messages: &messages,
                tools: &schemas,
                max_tokens: None,
            };
            let response = match self.request(&request).await? {
                Some(response) => response,
                None => return Ok(Outcome::Interrupted(String::new())),
            };
            let calls = response.tool_calls.clone();
            let cut_off = response.finish_reason == Some(FinishReason::Length);
            messages.push(Message::Assistant {
                content: response.text.clone(),
                tool_calls: calls.clone(),
                thinking: response.thinking.clone(),
            });
            if calls.is_empty() {
                return Ok(Outcome::Answered(response.text));
            }
            for (i, call) in calls.iter().enumerate() {
                // With finish_reason `length`, the last call's arguments may have been cut off mid-way: never run
                // something that merely looks complete.
                let truncated = cut_off && i + 1 == calls.len();
                let output = if self.is_cancelled() {
                    ToolOutput::error("interrupted by the user before this call ran")
                } else {
                    self.call_tool(call, truncated).await?
                };
                messages.push(Message::Tool {
                    tool_call_id: call.id.clone(),
                    content: model_view(output),
                });
            }
            if self.is_cancelled() {
                return Ok(Outcome::Interrupted(response.text));
            }
        }
    }

    /// Sends one request, streaming text to the sink. `None` when the user interrupted (the connection is
    /// dropped at once so the provider stops generating).
    async fn request(&mut self, request: &Request<'_>) -> Result<Option<Response>, AgentError> {
        self.requests += 1;
        let announcement = (!self.announced).then(|| self.session_event_fields());
        // Both callbacks write to the sink; the future must stay `Send`, hence a mutex rather than a RefCell.
        let sink = std::sync::Mutex::new(&mut *self.sink);
        let mut pending = announcement.clone();
        let mut on_event = |event: &StreamEvent| {
            let Ok(mut sink) = sink.lock() else { return };
            if let Some(fields) = pending.take() {
                fields.emit(*sink);
            }
            match event {
                StreamEvent::TextDelta(text) => sink.emit(&Event::Text(text)),
                StreamEvent::ReasoningDelta(text) => sink.emit(&Event::Reasoning(text)),
                StreamEvent::ToolCallStart { .. } | StreamEvent::Usage(_) => {}
            }
        };
        let mut on_retry = |err: &ModelError, wait: Duration, attempt: u32| {
            let Ok(mut sink) = sink.lock() else { return };
            let message = format!(
                "model request failed ({err}); retrying in {:.1} s (attempt {} of {})",
                wait.as_secs_f64(),
                attempt + 1,
                self.retry.max_attempts,
            );
            sink.emit(&Event::Warning(&message));
        };
        let mut cancelled = self.cancelled.clone();
        let response = tokio::select! {
            response = self.client.stream_with_retries(request, &mut on_event, &self.retry, &mut on_retry) => response?,
            _ = cancelled.wait_for(|c| *c) => return Ok(None),
        };
        if let Some(fields) = pending {
            if let Ok(mut sink) = sink.lock() {
                fields.emit(*sink);
            }
        }
        self.announced = true;
        if let Some(usage) = &response.usage {
            self.usage.add(usage);
        }
        Ok(Some(response))
    }

    /// Runs one tool call and commits what it changed. Failures the model can fix come back as error output.
    async fn call_tool(
        &mut self,
        call: &ToolCall,
        truncated: bool,
    ) -> Result<ToolOutput, AgentError> {
        let parsed = parse_call(&self.tools, call, truncated);
        let (index, args) = match parsed {
            Ok(found) => found,
            Err(message) => {
                let label = format!("{} (rejected)", call.name);
                self.sink.emit(&Event::ToolCall {
                    id: &call.id,
                    name: &call.name,
                    label: &label,
                    input: &serde_json::Value::Null,
                });
                let output = ToolOutput::error(message);
                self.report(call, &output);
                return Ok(output);
            }
        };
        let tool = &self.tools[index];
        let label = tool.label(&args);
        self.sink.emit(&Event::ToolCall {
            id: &call.id,
            name: tool.name(),
            label: &label,
            input: &args,
        });
        let is_run = tool.name() == "run";
        if is_run {
            self.changes.before_run()?;
        }
        let mut output = self.execute(index, args).await?;
        self.report(call, &output);
        let changed = if is_run {
            self.changes.after_run()?
        } else {
            std::mem::take(&mut output.changed)
        };
        if !changed.is_empty() {
            self.commit(&label, &changed)?;
        }
        Ok(output)
    }

    async fn execute(
        &self,
        index: usize,
        args: serde_json::Value,
    ) -> Result<ToolOutput, AgentError> {
        let tools = Arc::clone(&self.tools);
        let ctx = ToolContext {
            root: self.session.root.clone(),
            run_timeout: self.run_timeout,
            cancel: Arc::clone(&self.cancel),
            session: Arc::clone(&self.tool_state),
        };
        // Tools block (file I/O, child processes); Ctrl-C reaches them through `ctx.cancel`.
        tokio::task::spawn_blocking(move || tools[index].execute(&ctx, &args))
            .await
            .map_err(|e| AgentError::Join(e.to_string()))
    }

    fn report(&mut self, call: &ToolCall, output: &ToolOutput) {
        self.sink.emit(&Event::ToolResult {
            id: &call.id,
            ok: !output.is_error,
            summary: &output.summary,
        });
    }

    fn commit(&mut self, label: &str, changed: &[PathBuf]) -> Result<(), AgentError> {
        if let Some(commit) = self.store.commit_step(&mut self.session, changed, label)? {
            let hex = commit.to_string();
            let step = self.session.steps;
            self.sink.emit(&Event::Step {
                commit: &hex,
                step,
                files: changed,
            });
        }
        Ok(())
    }

    fn session_event_fields(&self) -> SessionLine {
        SessionLine {
            id: self.session.id.clone(),
            branch: self.short_branch(),
            base: self.session.base.to_string(),
            model: self.model.display_name(),
        }
    }

    fn is_cancelled(&self) -> bool {
        self.cancel.load(Ordering::SeqCst)
    }

    fn short_branch(&self) -> String {
        self.session
            .branch
            .trim_start_matches("refs/heads/")
            .to_string()
    }

    /// Reports the end of the session and returns the exit code.
    fn finish(&mut self, outcome: Outcome) -> i32 {
        let (status, answer, code) = match outcome {
            Outcome::Answered(answer) => ("done", answer, 0),
            Outcome::StepLimit(n) => {
                let message = format!(
                    "stopped after {n} model requests (--max-steps {n}); the work so far is on {}",
                    self.short_branch()
                );
                self.sink.emit(&Event::Error(&message));
                ("max_steps", String::new(), EXIT_UNFINISHED)
            }
            Outcome::Interrupted(partial) => ("interrupted", partial, EXIT_INTERRUPTED),
        };
        self.sink.emit(&Event::Usage(&self.usage));
        let branch = self.short_branch();
        let steps = self.session.steps;
        let base = self
            .session
            .step0
            .unwrap_or(self.session.base)
            .to_hex_with_len(7)
            .to_string();
        crate::ui::note(
            self.sink.is_json(),
            &format!(
                "\n{branch}: {steps} step{} · tokens {} in, {} out\nreview: git log -p {base}..{branch}",
                if steps == 1 { "" } else { "s" },
                self.usage.input_tokens,
                self.usage.output_tokens,
            ),
        );
        self.sink.emit(&Event::Done {
            status,
            answer: &answer,
            exit_code: code,
        });
        code
    }
}

/// The fields of the `session` event, kept until it is shown.
#[derive(Clone)]
struct SessionLine {
    id: String,
    branch: String,
    base: String,
    model: String,
}

impl SessionLine {
    fn emit(&self, sink: &mut dyn Sink) {
        sink.emit(&Event::Session {
            id: &self.id,
            branch: &self.branch,
            base: &self.base,
            model: &self.model,
        });
    }
}

/// Finds the tool and parses the arguments, or says what is wrong in words the model can act on.
fn parse_call(
    tools: &[Box<dyn Tool>],
    call: &ToolCall,
    truncated: bool,
) -> Result<(usize, serde_json::Value), String> {
    if truncated {
        return Err(format!(
            "the arguments of this {} call were cut off by the output token limit, so it was not run; \
             make the call again with shorter arguments (e.g. split a large write into several edits)",
            call.name
        ));
    }
    let index = tools
        .iter()
        .position(|t| t.name() == call.name)
        .ok_or_else(|| {
            let names: Vec<_> = tools.iter().map(|t| t.name()).collect();
            format!(
                "unknown tool '{}'; available tools: {}",
                call.name,
                names.join(", ")
            )
        })?;
    let text = call.arguments.trim();
    let args = if text.is_empty() {
        serde_json::Value::Object(Default::default())
    } else {
        serde_json::from_str(text)
            .map_err(|e| format!("the arguments are not valid JSON ({e}); send a JSON object"))?
    };
    if !args.is_object() {
        return Err("the arguments must be a JSON object".to_string());
    }
    Ok((index, args))
}

/// What the model sees of a tool result: errors are marked as such, so it cannot mistake them for output.
fn model_view(output: ToolOutput) -> String {
    if output.is_error && !output.content.starts_with("error") {
        format!("error: {}", output.content)
    } else {
        output.content
    }
}

/// A flag set on Ctrl-C, and a receiver that resolves when it is set.
fn interrupt_flag() -> (Arc<AtomicBool>, watch::Receiver<bool>) {
    let flag = Arc::new(AtomicBool::new(false));
    let (tx, rx) = watch::channel(false);
    let task_flag = Arc::clone(&flag);
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            task_flag.store(true, Ordering::SeqCst);
            let _ = tx.send(true);
        }
    });
    (flag, rx)
}

/// Today's date (UTC) as YYYY-MM-DD, without a calendar crate.
fn today() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (y, m, d) = civil_from_days((secs / 86_400) as i64);
    format!("{y:04}-{m:02}-{d:02}")
}

/// Days since 1970-01-01 to a (year, month, day) date (H. Hinnant's algorithm).
pub(crate) fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_787), (2026, 11, 30));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }

    #[test]
    fn bad_calls_become_messages_for_the_model() {
        let tools = tools::registry();
        let call = |name: &str, args: &str| ToolCall {
            id: "1".into(),
            name: name.into(),
            arguments: args.into(),
        };
        let err = parse_call(&tools, &call("nope", "{}"), false).unwrap_err();
        assert!(err.contains("unknown tool 'nope'"), "{err}");
        let err = parse_call(&tools, &call("read_file", "{\"path\": "), false).unwrap_err();
        assert!(err.contains("not valid JSON"), "{err}");
        let err = parse_call(&tools, &call("read_file", "[1]"), false).unwrap_err();
        assert!(err.contains("JSON object"), "{err}");
        let err = parse_call(&tools, &call("read_file", "{\"path\":\"a\"}"), true).unwrap_err();
        assert!(err.contains("cut off"), "{err}");
        let (_, args) = parse_call(&tools, &call("read_file", ""), false).unwrap();
        assert!(args.as_object().is_some_and(|o| o.is_empty()));
    }
}
