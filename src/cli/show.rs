//! `git agent show`: a session's transcript from its log: prompts, answers, tool calls and results, steps.
//!
//! The stored events are replayed through the renderer `ask` uses live ([`HumanSink`]), so a transcript is
//! neutralised exactly as the live session was: a log may come from someone else's `git agent push`, and
//! what the model and its tools wrote in it must not drive the reader's terminal.
//!
//! The conversion from the log's events ([`journal::Event`]) to the shared [`Event`]s lives here, at the edge
//! that may see both: the log's meaning belongs to the agent, which writes it and rebuilds conversations from
//! it, and the renderer in `ui` must not depend on the agent (DESIGN section 6).

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use super::context::Context;
use super::error::CommandError;
use crate::agent::journal;
use crate::agent::plan::OwnTool;
use crate::protocol::{Event, Sink, Status, ToolKind};
use crate::store::{LogContents, Meta};
use crate::ui::{self, HumanSink};

/// Show a session's transcript: prompts, answers, each tool call and its result, each step commit
#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The session (any unique prefix of its id; default: the newest)
    id: Option<String>,
}

pub fn run(ctx: &Context, args: ShowArgs) -> Result<(), CommandError> {
    let store = ctx.store()?;
    let id = store.resolve_session(args.id.as_deref())?;
    let log = store.read_log(&id)?;
    let stdout = std::io::stdout();
    let color = ui::use_color(&stdout);
    let review = review_lines(store, &log.meta)?;
    // Rendered whole, then written at once: a closed pipe (`| head`) is not an error.
    let text = render(&log, &review, color);
    let _ = stdout.lock().write_all(&text);
    Ok(())
}

/// The transcript as the terminal gets it, then the review round.
fn render(log: &LogContents, review: &[String], color: bool) -> Vec<u8> {
    let mut sink = HumanSink::replay(Vec::new(), color);
    for line in heading(&log.meta) {
        sink.write_line(&line);
    }
    replay(&log.events, &mut sink);
    for line in review {
        sink.write_line(line);
    }
    sink.finish()
}

/// The review records of the session (`git agent review`), one line per decision, oldest first; none when
/// the session's branch is gone.
fn review_lines(store: &crate::store::Store, meta: &Meta) -> Result<Vec<String>, CommandError> {
    use crate::store::review::{Record, Verdict};
    let Some(tip) = store.branch_tip(&meta.branch)? else {
        return Ok(Vec::new());
    };
    let Ok(from) =
        crate::store::ObjectId::from_hex(meta.step0.as_deref().unwrap_or(&meta.base).as_bytes())
    else {
        return Ok(Vec::new());
    };
    let records = store.session_review(&meta.id, from, tip)?;
    let mut lines = Vec::new();
    for record in &records {
        match record {
            Record::Decision(d) => {
                let verdict = match d.decision {
                    Verdict::Take => "took",
                    Verdict::Leave => "left",
                };
                let hunk = d
                    .hunk
                    .as_deref()
                    .map(|h| format!(" {h}"))
                    .unwrap_or_default();
                let comment = d
                    .comment
                    .as_deref()
                    .map(|c| format!(": {c}"))
                    .unwrap_or_default();
                lines.push(format!(
                    "  {verdict} {}{hunk} ({}, {}){comment}",
                    d.path,
                    d.reviewer,
                    super::context::when(d.at)
                ));
            }
            Record::Sent { ids, at, .. } => lines.push(format!(
                "  {} comment{} sent to the model ({})",
                ids.len(),
                if ids.len() == 1 { "" } else { "s" },
                super::context::when(*at)
            )),
        }
    }
    if !lines.is_empty() {
        lines.insert(0, "review:".to_owned());
    }
    Ok(lines)
}

/// The two heading lines: id, model, status, steps; branch, base, start and tokens.
fn heading(m: &Meta) -> [String; 2] {
    let base = m.base.get(..7).unwrap_or(&m.base);
    [
        format!(
            "session {} · {} · {} · {} step{}",
            m.id,
            m.model,
            m.status,
            m.steps,
            if m.steps == 1 { "" } else { "s" }
        ),
        format!(
            "branch {}{} · base {base} · started {} · tokens {} in, {} out · cost {}",
            m.branch.trim_start_matches("refs/heads/"),
            if m.here {
                " (--here: your working tree)"
            } else {
                ""
            },
            super::context::when(m.created),
            m.input_tokens,
            m.output_tokens,
            crate::protocol::format_usd(m.cost_usd)
        ),
    ]
}

/// A step commit, kept until the result of the call that made it.
struct HeldStep {
    step: u32,
    commit: String,
    files: Vec<PathBuf>,
}

impl HeldStep {
    fn emit(self, sink: &mut dyn Sink) {
        sink.emit(&Event::Step {
            commit: self.commit,
            step: self.step,
            files: self.files,
        });
    }
}

/// The `tool_call` event of a stored call, labelled as the tool labels it live, handed to `emit`.
fn tool_call(call: &crate::protocol::ToolCall, emit: &mut dyn FnMut(Event)) {
    let input = serde_json::from_str::<serde_json::Value>(&call.arguments).ok();
    let tool = crate::tools::find(&call.name);
    let own = OwnTool::find(&call.name);
    // The tools a session makes for itself are not built in: their labels are asked for by name.
    let own_label = |args: &serde_json::Value| match call.name.as_str() {
        crate::agent::explore::TOOL => Some(crate::agent::explore::label(args)),
        crate::tools::skill::NAME => Some(crate::tools::skill::label(args)),
        _ => own.map(|own| own.label(args)),
    };
    let label = input
        .as_ref()
        .and_then(|args| {
            tool.map(|tool| tool.label(args))
                .or_else(|| own_label(args))
        })
        .unwrap_or_else(|| format!("{} {}", call.name, crate::tools::short(&call.arguments, 80)));
    let input = input.unwrap_or(serde_json::Value::Null);
    emit(Event::ToolCall {
        id: call.id.clone(),
        name: call.name.clone(),
        kind: tool
            .map(|t| t.kind())
            .or_else(|| own.map(OwnTool::kind))
            .unwrap_or(ToolKind::Other),
        label,
        location: tool.and_then(|t| t.location(&input)),
        input,
    });
}

/// Emits the stored events as the shared events the renderer knows (ACP's `session/load` replays a session
/// through it too).
pub(super) fn replay(events: &[serde_json::Value], sink: &mut dyn Sink) {
    // A step is recorded as soon as its commit exists, just before the result of the call that made it;
    // it reads better after that result.
    let mut held: Option<HeldStep> = None;
    for event in events.iter().filter_map(journal::Event::from_json) {
        if let journal::Event::ToolResult {
            tool_call_id,
            ok,
            summary,
            content,
            ..
        } = &event
        {
            let summary = crate::tools::short(summary, 120);
            sink.emit(&Event::ToolResult {
                id: tool_call_id.to_owned(),
                ok: *ok,
                summary,
                output: content.to_owned(),
            });
            if let Some(step) = held.take() {
                step.emit(sink);
            }
            continue;
        }
        if let Some(step) = held.take() {
            step.emit(sink);
        }
        match event {
            journal::Event::User { content } => sink.emit(&Event::Prompt { content }),
            journal::Event::Assistant {
                content,
                tool_calls,
                ..
            } => {
                if !content.trim().is_empty() {
                    sink.emit(&Event::Text {
                        delta: content.trim_end().to_owned(),
                    });
                }
                for call in &tool_calls {
                    tool_call(call, &mut |event| sink.emit(&event));
                }
            }
            journal::Event::Explore { parent, event } => match *event {
                journal::Event::Assistant { tool_calls, .. } => {
                    for call in &tool_calls {
                        tool_call(call, &mut |event| {
                            sink.emit(&Event::Nested {
                                parent: parent.clone(),
                                event: Box::new(event),
                            })
                        });
                    }
                }
                journal::Event::ToolResult {
                    tool_call_id,
                    ok,
                    summary,
                    content,
                    ..
                } => sink.emit(&Event::Nested {
                    parent,
                    event: Box::new(Event::ToolResult {
                        id: tool_call_id,
                        ok,
                        summary,
                        output: content,
                    }),
                }),
                _ => {}
            },
            journal::Event::Step {
                step,
                commit,
                files,
            } => {
                held = Some(HeldStep {
                    step,
                    commit,
                    files: files.into_iter().map(PathBuf::from).collect(),
                });
            }
            journal::Event::End { status, .. } => {
                sink.emit(&Event::TurnEnd {
                    status: Status::parse(&status),
                });
            }
            journal::Event::Resume {} => sink.emit(&Event::Resumed),
            journal::Event::Undo { to, steps, .. } => {
                sink.emit(&Event::Undone { steps, to });
            }
            journal::Event::Discard { .. } => sink.emit(&Event::Discarded),
            // The memory message is listed entry by entry by its `memory` event.
            journal::Event::Context { kind, .. } if kind == "memory" => {}
            journal::Event::Memory { entries, .. } => sink.emit(&Event::Memory {
                action: "injected".to_owned(),
                entries,
            }),
            journal::Event::MemoryWrite {
                id, action, text, ..
            } => sink.emit(&Event::Memory {
                action,
                entries: vec![crate::protocol::MemoryItem {
                    id,
                    kind: String::new(),
                    text,
                    confidence: 0.0,
                }],
            }),
            journal::Event::Context {
                kind,
                path,
                content,
            } => sink.emit(&Event::Context {
                content: crate::tools::short(&content, 100),
                kind,
                path,
            }),
            journal::Event::Plan { items } => crate::agent::plan::Plan { items }.show(sink),
            journal::Event::WebResults { query, results } => {
                sink.emit(&Event::WebResults { query, results })
            }
            journal::Event::Image {
                blob,
                media_type,
                source,
                bytes,
                call,
            } => sink.emit(&Event::Image {
                source,
                media_type,
                bytes,
                call,
                blob,
            }),
            journal::Event::Compaction {
                replaced,
                fallback,
                tokens_before,
                tokens_after,
                ..
            } => sink.emit(&Event::Compaction {
                replaced,
                dropped: fallback,
                tokens_before,
                tokens_after,
            }),
            journal::Event::Check {
                attempt,
                command,
                tree,
                passed,
                end,
                code,
                duration_ms,
                output,
            } => sink.emit(&Event::Check {
                attempt,
                command,
                tree,
                passed,
                end,
                code,
                duration_ms,
                output,
            }),
            journal::Event::Hook {
                event,
                command,
                source,
                outcome,
                duration_ms,
                ..
            } => sink.emit(&Event::Hook {
                event,
                command,
                source,
                outcome,
                duration_ms,
            }),
            // A proposal is the `remember` call shown above it.
            // Recorded right after the result it belongs to, so shown where it stands.
            journal::Event::Diagnostics {
                id,
                summary,
                errors,
                warnings,
                errors_left,
                lines,
            } => sink.emit(&Event::Diagnostics {
                id,
                summary,
                errors,
                warnings,
                errors_left,
                lines,
            }),
            journal::Event::Usage { .. }
            | journal::Event::ToolResult { .. }
            | journal::Event::Remember { .. } => {}
        }
    }
    if let Some(step) = held.take() {
        step.emit(sink);
    }
}
