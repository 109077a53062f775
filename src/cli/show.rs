//! `git agent show`: a session's transcript from its log: prompts, answers, tool calls and results, steps.

use std::fmt::Write as _;
use std::io::Write;

use clap::Args;

use super::{CommandError, Context};
use crate::agent::journal::Event;
use crate::store::LogContents;

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
    let text = render(&log);
    // A closed pipe (`| head`) is not an error.
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
    Ok(())
}

/// The transcript as text.
fn render(log: &LogContents) -> String {
    let m = &log.meta;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "session {} · {} · {} · {} step{}",
        m.id,
        m.model,
        m.status,
        m.steps,
        if m.steps == 1 { "" } else { "s" }
    );
    let base = m.base.get(..7).unwrap_or(&m.base);
    let _ = writeln!(
        out,
        "branch {}{} · base {base} · started {} · tokens {} in, {} out",
        m.branch.trim_start_matches("refs/heads/"),
        if m.here {
            " (--here: your working tree)"
        } else {
            ""
        },
        super::when(m.created),
        m.input_tokens,
        m.output_tokens
    );
    let tools = crate::tools::registry();
    // A step is recorded as soon as its commit exists, just before the result of the call that made it;
    // it reads better after that result.
    let mut step_line: Option<String> = None;
    for event in log.events.iter().filter_map(Event::from_json) {
        match event {
            Event::User { content } => {
                out.push('\n');
                for line in content.lines() {
                    let _ = writeln!(out, "> {line}");
                }
            }
            Event::Assistant {
                content,
                tool_calls,
                ..
            } => {
                if !content.trim().is_empty() {
                    let _ = writeln!(out, "\n{}", content.trim_end());
                }
                for call in tool_calls {
                    let label = serde_json::from_str(&call.arguments)
                        .ok()
                        .and_then(|args| {
                            let tool = tools.iter().find(|t| t.name() == call.name)?;
                            Some(tool.label(&args))
                        })
                        .unwrap_or_else(|| {
                            format!("{} {}", call.name, crate::tools::short(&call.arguments, 80))
                        });
                    let _ = writeln!(out, "● {label}");
                }
            }
            Event::ToolResult { ok, summary, .. } => {
                let mark = if ok { "" } else { "error: " };
                let _ = writeln!(out, "  ⎿ {mark}{}", crate::tools::short(&summary, 120));
                out.extend(step_line.take());
            }
            Event::Step {
                step,
                commit,
                files,
            } => {
                out.extend(step_line.take());
                step_line = Some(format!(
                    "  ⎿ step {step}: {} ({})\n",
                    commit.get(..7).unwrap_or(&commit),
                    files.join(", ")
                ));
            }
            Event::End { status, .. } => {
                out.extend(step_line.take());
                let _ = writeln!(out, "-- {status}");
            }
            Event::Resume {} => {
                let _ = writeln!(out, "\n-- resumed");
            }
            Event::Undo { to, steps, .. } => {
                let _ = writeln!(
                    out,
                    "-- undo {steps} step{} (now at {})",
                    if steps == 1 { "" } else { "s" },
                    to.get(..7).unwrap_or(&to)
                );
            }
            Event::Discard { .. } => {
                let _ = writeln!(out, "-- discarded (checkout and branch removed)");
            }
            Event::Usage { .. } => {}
            Event::Context {
                kind,
                path,
                content,
            } => {
                out.extend(step_line.take());
                let what = if kind == "instructions" {
                    format!("instructions from {path}")
                } else {
                    format!("{kind}: {}", crate::tools::short(&content, 100))
                };
                let _ = writeln!(out, "-- {what}");
            }
            Event::Plan { items } => {
                out.extend(step_line.take());
                let plan = crate::agent::plan::Plan { items };
                let _ = writeln!(
                    out,
                    "-- plan ({} of {} done)",
                    plan.done(),
                    plan.items.len()
                );
                for line in plan.render().lines() {
                    let _ = writeln!(out, "   {line}");
                }
            }
            Event::Compaction {
                replaced,
                fallback,
                tokens_before,
                tokens_after,
                ..
            } => {
                out.extend(step_line.take());
                let how = if fallback { "dropped" } else { "summarised" };
                let _ = writeln!(
                    out,
                    "-- context: {replaced} older messages {how} ({tokens_before} → {tokens_after} tokens)"
                );
            }
        }
    }
    out.extend(step_line.take());
    out
}
