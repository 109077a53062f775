//! The step commit: what one tool call changed becomes the next commit on the session's branch, with a note
//! saying which call made it and why, a line in the log, and an event for the front-end. The store decides
//! which files stay out of git (one withholding policy for step 0 and every step); this module only says so.

use std::path::PathBuf;

use crate::protocol::{Event, Sink, ToolCall};

use super::error::AgentError;
use super::journal;
use super::parts::Workspace;

/// Commits `changed` (checkout-relative) as the session's next step; `label` and `why` (the model's text
/// before the call) go into the message and the note. Withheld files stay in the checkout, with a warning.
pub(super) fn commit(
    work: &mut Workspace,
    sink: &mut dyn Sink,
    call: &ToolCall,
    label: &str,
    why: &str,
    changed: &[PathBuf],
) -> Result<(), AgentError> {
    // Written with the step's objects, so both reach the disk as one pack (issue 29).
    let note = journal::step_note(work.session.steps + 1, call, label, why);
    let (step, prepared) = work
        .store
        // The label names what the model asked for (a path of its choosing): one line of plain prose.
        .commit_step_noted(
            &mut work.session,
            changed,
            &crate::protocol::commit_subject(label),
            &note,
        )?;
    for w in &step.withheld {
        let warning = format!(
            "{} was not committed: {}; it stays in the checkout ({})",
            w.path.display(),
            w.reason,
            work.session.root().display()
        );
        journal::record(&mut work.log, sink, Event::Warning { message: warning })?;
    }
    let Some(commit) = step.commit else {
        return Ok(());
    };
    let changed = &step.committed[..];
    let hex = commit.to_string();
    let step = work.session.steps;
    let files: Vec<String> = changed.iter().map(|p| p.display().to_string()).collect();
    work.step_lines.push(journal::step_line(step, &hex, &files));
    let event = Event::Step {
        commit: hex,
        step,
        files: changed.to_vec(),
    };
    journal::record(&mut work.log, sink, event)?;
    // A step is a point worth keeping across a power loss too (see `store::session_log`).
    work.log.sync()?;
    match &prepared {
        Some(prepared) => work.store.add_prepared_note(prepared)?,
        None => work.store.add_note(commit, &note)?,
    }
    Ok(())
}
