//! What the guard reports (a refusal, or what a permitted line runs) and the checker that walks a line: its
//! fields here, its rules in `mod.rs`, [`super::vars`] and [`super::tools`].

use std::path::PathBuf;

use super::state::Frame;

/// Where the command runs and what it must not touch.
#[derive(Clone, Debug)]
pub struct GuardEnv {
    /// The session's checkout: the working directory of `run`.
    pub checkout: PathBuf,
    /// The user's work tree root.
    pub repo_root: PathBuf,
    /// The git dir shared by all worktrees.
    pub common_dir: PathBuf,
    pub home: Option<PathBuf>,
    /// The session's own branch, short form (`agent/<id>`).
    pub session_branch: String,
}

/// A refused command: the rule that refused it and a sentence saying why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Blocked {
    pub rule: &'static str,
    pub reason: String,
}

/// What a permitted line runs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Inspection {
    /// Every command the line runs (after seeing through wrappers and nested shells), as its words joined by
    /// spaces, for permission rules.
    pub commands: Vec<String>,
    /// Reasons to ask the user first (e.g. `git push`, `sudo`).
    pub risky: Vec<String>,
}

pub(super) type Verdict = Result<(), Blocked>;

pub(super) fn block(rule: &'static str, reason: impl Into<String>) -> Verdict {
    Err(Blocked {
        rule,
        reason: reason.into(),
    })
}

/// The walk over one line: the session it judges for, the shell state, and what it found so far.
pub(super) struct Checker<'e> {
    pub(super) env: &'e GuardEnv,
    /// The shell state of the script being read (the line, or a script nested in it; see [`vars`]).
    /// Relative paths are judged from its working directory.
    pub(super) frame: Frame,
    /// How many `ssh` scripts the current one is nested in: git there is not the user's repository.
    pub(super) remote: u32,
    pub(super) found: Inspection,
}
