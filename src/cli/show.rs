//! `git agent show`: a session's transcript from its log: prompts, answers, tool calls and results, steps.
//!
//! The stored events ([`journal::events`]) go through the renderer `ask` uses live ([`HumanSink`]), one by
//! one, so a transcript prints what the live run printed, neutralised exactly as it was: a log may come from
//! someone else's `git agent push`, and what the model and its tools wrote in it must not drive the reader's
//! terminal. Only the heading (from the session's `meta.json`) and the review records are `show`'s own.

use std::io::Write;

use clap::Args;

use super::context::Context;
use super::error::CommandError;
use crate::agent::journal;
use crate::protocol::Sink;
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
    for event in journal::events(&log.events) {
        sink.emit(&event);
    }
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
