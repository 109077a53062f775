//! The one error type of the command edge: what kind of failure it is (which decides the exit code), a
//! one-line message, optional detail lines and hints, kept as data until `cli/mod.rs` prints them.
//!
//! Library errors say what went wrong and, where there is one, what to do, in one line (`no session "zz":
//! `git agent log` lists the sessions`); that line stays the message. A separate piece of advice (`hint: check
//! OPENAI_API_KEY, ...`) is a hint: the library's `hints()` where it has one, otherwise any `hint: ` line of its
//! message is moved here, so no hint is printed as if it were detail and a JSON front-end could carry them apart.

use crate::agent::AgentError;
use crate::config::ConfigError;
use crate::safety::rules::RuleError;
use crate::store::StoreError;

/// What kind of failure ended a command; each kind has its exit code (DESIGN section 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// The command line itself is wrong (exit 2).
    Usage,
    /// The user asked for something that cannot be done as asked: an unknown session, a conflict (exit 1).
    User,
    /// A settings file, a key or an endpoint is wrong or missing (exit 1).
    Config,
    /// The task stopped without finishing: a budget, a loop guard, `finish` with `blocked` (exit 3).
    Unfinished,
    /// The user interrupted (exit 130).
    Interrupted,
    /// SIGTERM or SIGHUP ended the session (exit 128 + the signal: 143, 129).
    Terminated(i32),
    /// The host failed: git, the file system, the model server (exit 1).
    Internal,
}

impl ErrorKind {
    pub fn exit_code(self) -> i32 {
        match self {
            ErrorKind::Usage => 2,
            ErrorKind::Unfinished => 3,
            ErrorKind::Interrupted => 130,
            ErrorKind::Terminated(signal) => 128 + signal,
            ErrorKind::User | ErrorKind::Config | ErrorKind::Internal => 1,
        }
    }
}

/// The error every subcommand returns.
#[derive(Debug)]
pub struct CommandError {
    kind: ErrorKind,
    /// The `error:` line; empty when the failure was already shown (see [`CommandError::shown`]).
    message: String,
    /// Lines printed as they are after the message.
    detail: Vec<String>,
    /// Printed as `hint: ` lines after the detail.
    hints: Vec<String>,
}

impl CommandError {
    /// An error of `kind` with `message`. A message of several lines is split: its first line is the message,
    /// `hint: ` lines become hints, the other lines detail.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> CommandError {
        let message = message.into();
        let mut lines = message.lines();
        let first = lines.next().unwrap_or_default().to_owned();
        let mut error = CommandError {
            kind,
            message: first,
            detail: Vec::new(),
            hints: Vec::new(),
        };
        for line in lines {
            match line.strip_prefix("hint: ") {
                Some(hint) => error.hints.push(hint.to_owned()),
                None => error.detail.push(line.to_owned()),
            }
        }
        error
    }

    pub fn user(message: impl Into<String>) -> CommandError {
        CommandError::new(ErrorKind::User, message)
    }

    pub fn config(message: impl Into<String>) -> CommandError {
        CommandError::new(ErrorKind::Config, message)
    }

    pub fn internal(message: impl Into<String>) -> CommandError {
        CommandError::new(ErrorKind::Internal, message)
    }

    /// A failure the user has already seen (the agent's stop reason on the terminal, git's own message on the
    /// inherited stderr) or whose exit code is the whole answer (`config get` of an unset key, as `git config
    /// --get`): nothing more is printed, only the exit code of `kind` is returned.
    pub fn shown(kind: ErrorKind) -> CommandError {
        CommandError {
            kind,
            message: String::new(),
            detail: Vec::new(),
            hints: Vec::new(),
        }
    }

    /// Adds a hint, printed as `hint: <hint>`.
    pub fn hint(mut self, hint: impl Into<String>) -> CommandError {
        self.hints.push(hint.into());
        self
    }

    /// Adds lines of detail, printed as they are between the message and the hints.
    pub fn detail(mut self, lines: impl IntoIterator<Item = String>) -> CommandError {
        self.detail.extend(lines);
        self
    }

    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    pub fn exit_code(&self) -> i32 {
        self.kind.exit_code()
    }

    pub fn message(&self) -> &str {
        &self.message
    }

    pub fn hints(&self) -> &[String] {
        &self.hints
    }

    /// True when nothing is left to print.
    pub fn is_shown(&self) -> bool {
        self.message.is_empty()
    }

    /// The message, its detail and its hints as the lines after `error: `, e.g. the `message` of the JSON
    /// `error` event (which has always carried the hints in its text).
    pub fn text(&self) -> String {
        let mut text = self.message.clone();
        for line in &self.detail {
            text.push('\n');
            text.push_str(line);
        }
        for hint in &self.hints {
            text.push_str("\nhint: ");
            text.push_str(hint);
        }
        text
    }
}

impl std::fmt::Display for CommandError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text())
    }
}

impl From<StoreError> for CommandError {
    fn from(err: StoreError) -> CommandError {
        // The user can act on these differently; the rest are failures of git or the file system.
        let kind = match err {
            StoreError::NotARepo(_)
            | StoreError::Bare(_)
            | StoreError::NoCommits
            | StoreError::InvalidSessionId(_)
            | StoreError::BranchExists(_)
            | StoreError::BranchMoved { .. }
            | StoreError::InvalidPath(_)
            | StoreError::NoSession(_)
            | StoreError::NoSessions
            | StoreError::AmbiguousSession { .. }
            | StoreError::SessionBusy(_) => ErrorKind::User,
            ref refused if refused.is_refusal() => ErrorKind::User,
            _ => ErrorKind::Internal,
        };
        CommandError::new(kind, err.to_string())
    }
}

impl From<AgentError> for CommandError {
    fn from(err: AgentError) -> CommandError {
        if let AgentError::Store(err) = err {
            return err.into();
        }
        let kind = match err {
            AgentError::Auth { .. } | AgentError::Unreachable { .. } | AgentError::Config(_) => {
                ErrorKind::Config
            }
            AgentError::Check(_) => ErrorKind::User,
            _ => ErrorKind::Internal,
        };
        let hints = err.hints();
        hints
            .into_iter()
            .fold(CommandError::new(kind, err.to_string()), CommandError::hint)
    }
}

impl From<ConfigError> for CommandError {
    fn from(err: ConfigError) -> CommandError {
        CommandError::config(err.to_string())
    }
}

impl From<RuleError> for CommandError {
    fn from(err: RuleError) -> CommandError {
        CommandError::user(err.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hint_lines_become_hints_and_the_rest_detail() {
        let err = CommandError::config("bad file\nline 3: here\nhint: fix it");
        assert_eq!(err.message(), "bad file");
        assert_eq!(err.detail, ["line 3: here"]);
        assert_eq!(err.hints(), ["fix it"]);
        assert_eq!(err.text(), "bad file\nline 3: here\nhint: fix it");
        assert_eq!(err.exit_code(), 1);
    }

    #[test]
    fn every_kind_has_its_exit_code() {
        let codes: Vec<i32> = [
            ErrorKind::Usage,
            ErrorKind::User,
            ErrorKind::Config,
            ErrorKind::Unfinished,
            ErrorKind::Interrupted,
            ErrorKind::Internal,
        ]
        .iter()
        .map(|k| CommandError::shown(*k).exit_code())
        .collect();
        assert_eq!(codes, [2, 1, 1, 3, 130, 1]);
        assert!(CommandError::shown(ErrorKind::Unfinished).is_shown());
        assert!(!CommandError::user("x").hint("y").is_shown());
    }

    /// A check `fix` cannot run is the user's command or setup: a user error with the check's words, as when
    /// it went through the store's catch-all string.
    #[test]
    fn a_check_that_cannot_run_is_the_users_to_fix() {
        let check = crate::agent::check::CheckError::Sandbox {
            command: "make test".into(),
            message: "no namespaces".into(),
        };
        let err = CommandError::from(AgentError::from(check));
        assert_eq!(err.kind(), ErrorKind::User);
        assert_eq!(
            err.message(),
            "cannot sandbox the check `make test`: no namespaces"
        );
    }

    #[test]
    fn store_errors_keep_their_line_and_kind() {
        let err = CommandError::from(StoreError::NoSession("zz".into()));
        assert_eq!(err.kind(), ErrorKind::User);
        assert_eq!(
            err.message(),
            "no session \"zz\": `git agent log` lists the sessions"
        );
        assert!(err.hints().is_empty());
        // A refusal is the user's to act on (exit 1 with its one line), as the catch-all string was.
        let err = CommandError::from(StoreError::NotACommit("nope".into()));
        assert_eq!(err.kind(), ErrorKind::User);
        assert_eq!(
            err.message(),
            "\"nope\" does not name a commit: give a branch, a tag or a commit id"
        );
        let err = CommandError::from(StoreError::Busy("refs/notes/agent".into()));
        assert_eq!(err.kind(), ErrorKind::Internal);
        assert!(
            err.message().starts_with("refs/notes/agent"),
            "{}",
            err.message()
        );
    }
}
