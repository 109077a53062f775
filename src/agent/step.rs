//! The step commit: what one tool call changed becomes the next commit on the session's branch, with a note
//! saying which call made it and why, a line in the log, and an event for the front-end.

use std::path::{Path, PathBuf};

use crate::protocol::{Event, Sink, ToolCall};
use crate::safety::redact;

use super::journal::{self, Event as LogEvent};
use super::session::Workspace;
use super::AgentError;

/// Commits `changed` (checkout-relative) as the session's next step; `label` and `why` (the model's text
/// before the call) go into the message and the note. Files that must not enter git stay in the checkout,
/// with a warning.
pub(super) fn commit(
    work: &mut Workspace,
    sink: &mut dyn Sink,
    call: &ToolCall,
    label: &str,
    why: &str,
    changed: &[PathBuf],
) -> Result<(), AgentError> {
    let (changed, withheld) = withhold_secrets(work, changed);
    let mut message = redact::redact(label);
    if !withheld.is_empty() {
        message.push_str("\n\nWithheld from this commit (they stay in the checkout):\n");
        for (path, why) in &withheld {
            message.push_str(&format!("- {}: {why}\n", path.display()));
            let warning = format!(
                "{} was not committed: {why}; it stays in the checkout ({})",
                path.display(),
                work.session.root().display()
            );
            sink.emit(&Event::Warning(&warning));
        }
    }
    let changed = &changed[..];
    let Some(commit) = work
        .store
        .commit_step(&mut work.session, changed, &message)?
    else {
        return Ok(());
    };
    let hex = commit.to_string();
    let step = work.session.steps;
    let files: Vec<String> = changed.iter().map(|p| p.display().to_string()).collect();
    work.step_lines.push(journal::step_line(step, &hex, &files));
    work.log.append(
        LogEvent::Step {
            step,
            commit: hex.clone(),
            files,
        }
        .to_json(),
    )?;
    let note = journal::step_note(step, call, label, why);
    work.store.add_note(commit, &note)?;
    sink.emit(&Event::Step {
        commit: &hex,
        step,
        files: changed,
    });
    Ok(())
}

/// Splits `changed` into what may be committed and what is withheld: environment and key files, files
/// holding a known secret value, and files with a secret-format string their committed version lacked.
fn withhold_secrets(
    work: &Workspace,
    changed: &[PathBuf],
) -> (Vec<PathBuf>, Vec<(PathBuf, String)>) {
    let mut keep = Vec::new();
    let mut withheld = Vec::new();
    let redactor = redact::global()
        .read()
        .map(|r| r.clone())
        .unwrap_or_default();
    for rel in changed {
        let abs = work.session.root().join(rel);
        let Ok(bytes) = std::fs::read(&abs) else {
            keep.push(rel.clone());
            continue;
        };
        if let Some(what) = redact::sensitive_path(rel) {
            withheld.push((rel.clone(), format!("it is {what}")));
            continue;
        }
        let text = String::from_utf8_lossy(&bytes);
        let found = redactor.find(&text);
        if let Some(f) = found.iter().find(|f| f.known) {
            withheld.push((rel.clone(), format!("it contains the value of {}", f.kind)));
            continue;
        }
        let before = committed(work, rel).unwrap_or_default();
        let before = String::from_utf8_lossy(&before);
        if let Some(f) = found
            .iter()
            .find(|f| !before.contains(&text[f.start..f.end]))
        {
            withheld.push((
                rel.clone(),
                format!("it contains a new secret ({})", f.kind),
            ));
            continue;
        }
        keep.push(rel.clone());
    }
    (keep, withheld)
}

/// The content of `rel` at the session's tip, if it is a blob there.
fn committed(work: &Workspace, rel: &Path) -> Option<Vec<u8>> {
    let repo = work.store.repo();
    let tree = repo.find_commit(work.session.tip).ok()?.tree().ok()?;
    let entry = tree.lookup_entry_by_path(rel).ok()??;
    Some(entry.object().ok()?.data.clone())
}
