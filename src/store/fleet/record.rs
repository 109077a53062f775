//! The records a fleet keeps in a remote's refs (`task.json`, `claim.json`, `result.json`, `fleet.json`), with
//! the checks every one of them passes when it is read back: a remote is written by many workers and by
//! anyone with push rights, so what comes from it is data to validate, never a name, path or command as is.
//!
//! Names that become ref components (fleet, task and worker ids, session ids) are kept to a small safe
//! alphabet; a task's `base` must be a plain ref name; sizes are bounded; JSON with unknown fields is refused.

use serde::{Deserialize, Serialize};

/// The most tasks one `fleet submit` takes (its refs go out in one atomic push).
pub const MAX_TASKS: usize = 5_000;
/// The largest prompt a task may carry.
pub const MAX_PROMPT: usize = 32 * 1024;
/// The largest record blob read back from a remote.
pub const MAX_RECORD: usize = 64 * 1024;
/// The longest fleet, task or worker id.
pub const MAX_ID: usize = 64;
/// The longest check command a task may name.
const MAX_CHECK: usize = 4096;
/// The longest model name or base ref.
const MAX_NAME: usize = 200;

/// The error returned when a record or a name fails its check.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{0}")]
pub struct Invalid(pub String);

/// One task of a fleet: what a worker runs as an ordinary session.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Task {
    /// The task's id, unique in its fleet: a ref component.
    pub id: String,
    /// The goal given to `ask` (or to `fix` as its goal when there is a check).
    pub prompt: String,
    /// The ref on the remote the session starts from (default: the worker's HEAD).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<String>,
    /// A shell command that decides passed or failed (`fix --check`); runs only on workers that allow it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<String>,
    /// `provider/model` for this task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// At most this many model requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_steps: Option<u32>,
    /// At most this many tokens (input plus output).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
}

/// The fleet itself: who submitted it, when, how many tasks, with which defaults.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FleetMeta {
    pub fleet: String,
    pub tasks: usize,
    pub submitted_by: String,
    pub submitted_at: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<String>,
}

/// A worker's claim on a task: held until `expires` (Unix seconds), renewed while the task runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Claim {
    pub task: String,
    pub worker: String,
    pub expires: i64,
    /// 1 for the first claim of a task, one more for each takeover of an expired one.
    pub attempt: u32,
}

/// How a task ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TaskEnd {
    /// The session finished (no check).
    Done,
    /// The check passes on the session's branch.
    Passed,
    /// The check still fails.
    Failed,
    /// The session stopped unfinished (budget, guard).
    Unfinished,
    /// The session could not run.
    Error,
}

impl TaskEnd {
    pub fn as_str(self) -> &'static str {
        match self {
            TaskEnd::Done => "done",
            TaskEnd::Passed => "passed",
            TaskEnd::Failed => "failed",
            TaskEnd::Unfinished => "unfinished",
            TaskEnd::Error => "error",
        }
    }
}

/// A task's result, written once.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskResult {
    pub task: String,
    pub outcome: TaskEnd,
    pub worker: String,
    pub attempt: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    pub exit_code: i32,
    pub files_changed: u32,
    pub input_tokens: u64,
    pub output_tokens: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    pub seconds: f64,
    pub finished: i64,
    /// One line on why it ended so (an error's message), already redacted by the worker.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

/// Checks an id that becomes one ref component (fleet, task, worker): letters, digits, `.`, `_`, `-`, starting
/// with a letter or digit, at most [`MAX_ID`] bytes, no `..`, not ending in `.lock`.
pub fn check_id(what: &str, id: &str) -> Result<(), Invalid> {
    let safe = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    let ok = !id.is_empty()
        && id.len() <= MAX_ID
        && id.chars().all(safe)
        && id.starts_with(|c: char| c.is_ascii_alphanumeric())
        && !id.contains("..")
        && !id.ends_with(".lock")
        && !id.ends_with('.');
    if ok {
        Ok(())
    } else {
        Err(Invalid(format!(
            "invalid {what} {}: use 1-{MAX_ID} letters, digits, '.', '_' or '-', starting with a letter or digit",
            shown(id)
        )))
    }
}

/// Checks a ref name a task may start from: `main`, `release/2.0`, `refs/heads/x`; never an option, a
/// range, a revision expression or a path out of the namespace.
pub fn check_base(base: &str) -> Result<(), Invalid> {
    let safe = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/');
    let ok = !base.is_empty()
        && base.len() <= MAX_NAME
        && base.chars().all(safe)
        && base.split('/').all(|part| {
            !part.is_empty() && !part.starts_with(['.', '-']) && !part.ends_with(".lock")
        })
        && !base.contains("..");
    if ok {
        Ok(())
    } else {
        Err(Invalid(format!(
            "invalid base {}: name a branch or ref (letters, digits, '.', '_', '-', '/')",
            shown(base)
        )))
    }
}

/// Checks a `provider/model` name: what `--model` takes, never an option.
pub fn check_model(model: &str) -> Result<(), Invalid> {
    let safe =
        |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/' | ':' | '@' | '+');
    let ok = !model.is_empty()
        && model.len() <= MAX_NAME
        && model.chars().all(safe)
        && !model.starts_with('-');
    if ok {
        Ok(())
    } else {
        Err(Invalid(format!("invalid model {}", shown(model))))
    }
}

/// Checks a session id read back from a result: what `git agent` makes (lowercase hex and `-`).
fn check_session(id: &str) -> Result<(), Invalid> {
    let ok = !id.is_empty()
        && id.len() <= MAX_ID
        && id
            .chars()
            .all(|c| c.is_ascii_digit() || c.is_ascii_lowercase() || c == '-')
        && !id.starts_with('-');
    if ok {
        Ok(())
    } else {
        Err(Invalid(format!("invalid session id {}", shown(id))))
    }
}

/// Text free of NUL, within `max` bytes.
fn check_text(what: &str, text: &str, max: usize) -> Result<(), Invalid> {
    if text.contains('\0') {
        return Err(Invalid(format!("{what} holds a NUL byte")));
    }
    if text.len() > max {
        return Err(Invalid(format!(
            "{what} is {} bytes, more than {max}",
            text.len()
        )));
    }
    Ok(())
}

impl Task {
    /// Checks every field (what `submit` does before writing, and a worker after reading).
    pub fn check(&self) -> Result<(), Invalid> {
        check_id("task id", &self.id)?;
        if self.prompt.trim().is_empty() {
            return Err(Invalid(format!("task {} has an empty prompt", self.id)));
        }
        check_text("the prompt", &self.prompt, MAX_PROMPT)?;
        if let Some(base) = &self.base {
            check_base(base)?;
        }
        if let Some(check) = &self.check {
            check_text("the check", check, MAX_CHECK)?;
            if check.trim().is_empty() {
                return Err(Invalid(format!("task {} has an empty check", self.id)));
            }
        }
        if let Some(model) = &self.model {
            check_model(model)?;
        }
        if self.max_steps == Some(0) || self.max_tokens == Some(0) {
            return Err(Invalid(format!(
                "task {}: max_steps and max_tokens must be at least 1",
                self.id
            )));
        }
        Ok(())
    }
}

impl Claim {
    pub fn check(&self) -> Result<(), Invalid> {
        check_id("task id", &self.task)?;
        check_worker(&self.worker)
    }
}

impl TaskResult {
    pub fn check(&self) -> Result<(), Invalid> {
        check_id("task id", &self.task)?;
        check_worker(&self.worker)?;
        if let Some(session) = &self.session {
            check_session(session)?;
        }
        if let Some(branch) = &self.branch {
            check_base(branch)?;
        }
        check_text("the detail", &self.detail, 4096)
    }
}

/// A worker id: `<host>-<pid>-<n>`, the same alphabet as other ids but a little longer.
pub fn check_worker(worker: &str) -> Result<(), Invalid> {
    let safe = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if !worker.is_empty() && worker.len() <= 2 * MAX_ID && worker.chars().all(safe) {
        Ok(())
    } else {
        Err(Invalid(format!("invalid worker id {}", shown(worker))))
    }
}

/// Parses a record blob read from a remote: bounded in size, exact in shape, then checked.
pub fn parse<T: serde::de::DeserializeOwned>(
    bytes: &[u8],
    check: impl Fn(&T) -> Result<(), Invalid>,
) -> Result<T, Invalid> {
    if bytes.len() > MAX_RECORD {
        return Err(Invalid(format!(
            "record of {} bytes, more than {MAX_RECORD}",
            bytes.len()
        )));
    }
    let value: T =
        serde_json::from_slice(bytes).map_err(|e| Invalid(format!("not a valid record: {e}")))?;
    check(&value)?;
    Ok(value)
}

/// Text from outside as a person may safely see it: quoted, controls escaped, cut at 80 characters.
pub fn shown(text: &str) -> String {
    let cut: String = text.chars().take(80).collect();
    let more = if cut.len() < text.len() { "..." } else { "" };
    format!("\"{}{more}\"", crate::safety::quote::visible(&cut))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(id: &str) -> Task {
        Task {
            id: id.into(),
            prompt: "do it".into(),
            ..Task::default()
        }
    }

    #[test]
    fn ids_are_safe_ref_components() {
        for good in ["t1", "pkg.core", "A_b-3", "0001"] {
            assert!(check_id("task id", good).is_ok(), "{good}");
        }
        for bad in [
            "", "..", "a..b", "-x", ".hidden", "a/b", "x.lock", "a b", "a\nb", "é", "a:b", "a~1",
            "a^", "@{u}", "x.",
        ] {
            assert!(check_id("task id", bad).is_err(), "{bad:?}");
        }
        assert!(check_id("task id", &"a".repeat(MAX_ID + 1)).is_err());
    }

    #[test]
    fn a_base_is_a_plain_ref_name() {
        for good in ["main", "release/2.0", "refs/heads/x"] {
            assert!(check_base(good).is_ok(), "{good}");
        }
        for bad in [
            "--upload-pack=x",
            "main..x",
            "a//b",
            "/abs",
            "x/",
            "HEAD~1",
            "a@{1}",
            "x/.git",
            "y.lock",
        ] {
            assert!(check_base(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn tasks_are_checked_field_by_field() {
        assert!(task("t1").check().is_ok());
        let mut t = task("t1");
        t.prompt = " ".into();
        assert!(t.check().is_err());
        let mut t = task("t1");
        t.model = Some("--exec=sh".into());
        assert!(t.check().is_err());
        let mut t = task("t1");
        t.prompt = "x".repeat(MAX_PROMPT + 1);
        assert!(t.check().is_err());
        let mut t = task("t1");
        t.max_steps = Some(0);
        assert!(t.check().is_err());
    }

    #[test]
    fn records_from_a_remote_are_bounded_and_exact() {
        let ok = br#"{"id":"t1","prompt":"p"}"#;
        assert!(parse::<Task>(ok, Task::check).is_ok());
        let unknown = br#"{"id":"t1","prompt":"p","run":"rm -rf /"}"#;
        assert!(parse::<Task>(unknown, Task::check).is_err());
        let hostile = br#"{"id":"../../x","prompt":"p"}"#;
        assert!(parse::<Task>(hostile, Task::check).is_err());
        let big = vec![b' '; MAX_RECORD + 1];
        assert!(parse::<Task>(&big, Task::check).is_err());
        let session = br#"{"task":"t","outcome":"done","worker":"w","attempt":1,"session":"../x","exit_code":0,
            "files_changed":0,"input_tokens":0,"output_tokens":0,"seconds":0,"finished":0}"#;
        assert!(parse::<TaskResult>(session, TaskResult::check).is_err());
    }

    #[test]
    fn shown_text_cannot_drive_the_terminal() {
        assert_eq!(shown("a\x1b[2Jb"), "\"a\\x1b[2Jb\"");
    }
}
