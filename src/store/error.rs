//! The store's error: one variant per thing that went wrong, carrying its data, so callers match on what was
//! refused rather than on words (issue 24, item 5: a catch-all `Refused(String)` had 41 uses). Each message is
//! one line that says what went wrong and what to do.

use std::path::{Path, PathBuf};

use gix::ObjectId;

use crate::safety::tree_path;

/// The error returned by every [`Store`] operation.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("not a git repository (or any parent): run git agent inside a repo")]
    NotARepo(#[source] gix::Error),
    #[error("{0} is a bare repository: run git agent inside a repository with a work tree")]
    Bare(PathBuf),
    #[error("the repository has no commits yet: commit something first")]
    NoCommits,
    #[error("invalid session id {0:?}: use lowercase letters, digits and '-'")]
    InvalidSessionId(String),
    #[error("{0} already exists: pick another session id or delete the branch")]
    BranchExists(String),
    #[error(
        "{branch} was moved by someone else (expected {expected}, found {found}): \
         inspect it with `git log {branch}` and start a new session"
    )]
    BranchMoved {
        branch: String,
        expected: ObjectId,
        found: String,
    },
    #[error("path {0:?} is not inside the checkout: use a relative path without '..' or '.git'")]
    InvalidPath(PathBuf),
    #[error("could not {action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The OS gave no random bytes for a new id ([`crate::sys::random::random_u64()`]).
    #[error("the operating system gave no random bytes ({0}): check that getrandom(2) or /dev/urandom works")]
    NoRandomness(#[source] std::io::Error),
    /// A file git reads (a `.gitignore`, a `.gitattributes`, a checkout's `HEAD`) in a place commands can
    /// write, which the readers (gix, the `ignore` crate) could not open without blocking for ever (a FIFO)
    /// or reading without end ([`crate::sys::fs::check_plain_read()`]).
    #[error("{} cannot be read as {role} ({source}): remove it, or make it a regular file", .path.display())]
    UnreadableGitFile {
        path: PathBuf,
        role: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("could not run git ({0}): make sure git is installed and on PATH")]
    GitMissing(#[source] std::io::Error),
    #[error("`git {args}` failed: {stderr}")]
    GitCommand { args: String, stderr: String },
    #[error("no session {0:?}: `git agent log` lists the sessions")]
    NoSession(String),
    #[error("there are no sessions yet: start one with `git agent ask`")]
    NoSessions,
    #[error(
        "no session was started in this repository: name a pulled one by its id (`git agent log` lists them)"
    )]
    NoLocalSessions,
    #[error("session prefix {prefix:?} is ambiguous: it matches {}", .candidates.join(", "))]
    AmbiguousSession {
        prefix: String,
        candidates: Vec<String>,
    },
    #[error("session {0} is in use by another git-agent process: wait for it to finish")]
    SessionBusy(String),
    #[error("the session log at {0} is damaged ({1}): inspect it with `git log -p` on its ref")]
    CorruptLog(ObjectId, &'static str),
    /// Every attempt of a transaction on the ref lost to another writer ([`Store::transact()`](super::Store::transact)).
    #[error("{0} stayed busy: another process holds it; if none runs, remove {0}.lock")]
    Busy(String),
    #[error(
        "git storage error: could not prepare reference edit of {name}: {lock} exists (another git process is \
         writing there, or one was killed while it did; waited {:.1} s)\n\
         hint: if no git or git-agent process is running in this repository, remove {lock} and try again",
        .waited.as_secs_f64(), lock = .lock.display()
    )]
    Locked {
        name: String,
        lock: PathBuf,
        waited: std::time::Duration,
    },
    #[error("could not write the checkout {}: {message}", .path.display())]
    Checkout { path: PathBuf, message: String },
    /// A session whose branch is gone (discarded, or deleted by hand).
    #[error("session {id} was discarded ({branch} is gone): start a new session")]
    Discarded { id: String, branch: String },
    /// `--here` asked of a session that works in its own checkout.
    #[error(
        "session {0} works in its own checkout, not in your working tree: resume it without --here"
    )]
    NotHere(String),
    /// `--here` with a start other than the working tree.
    #[error(
        "a session in your working tree (--here) starts from it, not from the index or a commit"
    )]
    HereStartsFromWorkTree,
    /// The default session's branch holds steps this repository did not make.
    #[error(
        "the newest session started here, {id}, has steps this repository did not make (agent/{id} was \
         moved outside git-agent, e.g. by a fetch): check `git log agent/{id}`, then name the session to \
         act on it"
    )]
    MovedOutside { id: String },
    /// Every drawn session id was taken.
    #[error(
        "found no free session id in {draws} draws: remove old sessions with `git agent discard --purge`"
    )]
    NoFreeSessionId { draws: u32 },
    /// `undo N` with N not in 1..=steps.
    #[error(
        "cannot undo {asked} step{} of session {id}: {} (step 0, your own captured changes, stays)",
        plural(u64::from(*.asked)),
        steps_to_undo(*.steps)
    )]
    UndoOutOfRange { id: String, asked: u32, steps: u32 },
    /// A step commit without a parent, met while walking back.
    #[error("{0} has no parent to undo to")]
    NoParent(ObjectId),
    /// An undo in the user's work tree that would overwrite files the user edited since the step.
    #[error(
        "cannot undo: {} changed in your working tree since the agent's step (undo would overwrite your edit); \
         commit or restore {} first, or undo by hand with `git diff {} {}`",
        .edited.join(", "),
        if .edited.len() == 1 { "it" } else { "them" },
        .tip.to_hex_with_len(7),
        .target.to_hex_with_len(7)
    )]
    UndoWouldOverwrite {
        edited: Vec<String>,
        tip: ObjectId,
        target: ObjectId,
    },
    /// An object id in a record the store wrote that does not parse (`what` in `record`).
    #[error("bad {what} {id:?} in {record}")]
    BadId {
        what: &'static str,
        id: String,
        record: &'static str,
    },
    /// Removing a directory that is not one of the session checkouts.
    #[error("refusing to remove {}: it is not a session checkout under {}", .root.display(), .under.display())]
    NotACheckout { root: PathBuf, under: PathBuf },
    /// A checkout opened without a work tree.
    #[error("{} has no work tree", .0.display())]
    NoWorkTree(PathBuf),
    /// Every name for a checkout's registration was taken.
    #[error("no free name for {} under {}", .root.display(), .dir.display())]
    NoFreeCheckoutName { root: PathBuf, dir: PathBuf },
    /// A reference name gix does not accept.
    #[error("{0} is not a valid reference name")]
    InvalidRefName(&'static str),
    /// Paths the tree path policy never writes into a working tree, each with its rule.
    #[error(
        "the session's tree names paths that are never written into a working tree: {}; nothing was written",
        .0.join(", ")
    )]
    UnwritablePaths(Vec<String>),
    /// A step's branch move failed, and so did putting the checkout's files back to the branch's tip.
    #[error(
        "{cause}; putting the checkout back to {tip} failed too ({undo}): discard the session"
    )]
    CheckoutNotRestored {
        cause: Box<StoreError>,
        tip: ObjectId,
        undo: Box<StoreError>,
    },
    /// The thread making a session's checkout panicked.
    #[error("the checkout could not be made (its thread failed)")]
    CheckoutThreadFailed,
    /// The thread listing the user's untracked files for step 0 panicked.
    #[error(
        "step 0 could not list the untracked files (its thread failed); start the session again"
    )]
    UntrackedThreadFailed,
    /// `git write-tree` on an index with unmerged entries.
    #[error(
        "the index has unmerged entries (a merge or rebase is under way): resolve them \
         and `git add` the files first"
    )]
    UnmergedIndex,
    /// A revision the user gave that names no commit.
    #[error("{0:?} does not name a commit: give a branch, a tag or a commit id")]
    NotACommit(String),
    /// A planned write or commit of something other than a file or a symbolic link (`verb`: `written`,
    /// `committed`); the planners never make one.
    #[error("{path}: only files and symbolic links are {verb}")]
    NotFileOrLink { path: String, verb: &'static str },
    /// A landing record asked to save a submodule or a directory.
    #[error("{}: a landing never writes submodules or directories", .0.display())]
    NotLandable(PathBuf),
    /// A landing started while an earlier one (`accept`, ...) is unfinished.
    #[error(
        "an earlier {0} was interrupted: finish it with `git agent accept --continue` or undo it with \
         `git agent accept --abort` first"
    )]
    LandingInterrupted(String),
    /// The landing record does not parse.
    #[error(
        "the landing record {} is damaged ({source}): compare your files with `git diff`, then remove it",
        .path.display()
    )]
    DamagedLandingRecord {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    /// A record (`what`) that could not be serialised.
    #[error("cannot write {what}: {source}")]
    Encode {
        what: &'static str,
        #[source]
        source: serde_json::Error,
    },
    /// `git commit` (or one of the user's hooks) refused a commit.
    #[error("`git commit` failed (a hook refused it, or git did: see above)")]
    CommitRefused,
    /// A commit was made, but the user's index could not follow it.
    #[error(
        "committed {commit}, but your index could not be updated for the committed files ({source}): \
         run `git reset -- <files>`"
    )]
    IndexNotUpdated {
        commit: ObjectId,
        #[source]
        source: Box<StoreError>,
    },
    /// `git fetch` from a remote failed (git printed why).
    #[error("could not fetch from {0} (git said why above); nothing was changed")]
    FetchFailed(String),
    /// A skill file path the tree path policy refuses.
    #[error("skill file refused: {0}")]
    SkillFileRefused(crate::safety::tree_path::Refusal),
    /// A stored skill that fails the checks every stored skill must pass (`verb`: `used`, `exported`).
    #[error("stored skill {} cannot be {verb}: {why}", tree_path::shown(.name))]
    SkillUnusable {
        name: String,
        verb: &'static str,
        why: String,
    },
    /// A skill name against the naming rule (the rule's words).
    #[error("{0}")]
    InvalidSkillName(String),
    /// A skill to store without its main file.
    #[error("skill {name} has no {file}")]
    SkillWithoutFile { name: String, file: &'static str },
    /// A skill to store over a limit (`unit`: `files`, `bytes`).
    #[error("skill {name} has {size} {unit}; a stored skill may have at most {limit}")]
    SkillTooLarge {
        name: String,
        size: u64,
        unit: &'static str,
        limit: u64,
    },
    /// A skill file path that is empty, absolute or climbs out of its folder.
    #[error("skill {name}: invalid file path {path:?}")]
    InvalidSkillFilePath { name: String, path: String },
    /// Every drawn memory id was taken.
    #[error("could not find a free memory id after {tries} tries")]
    NoFreeMemoryId { tries: u32 },
    /// A memory id that is not 4 to 40 lowercase hex characters.
    #[error("invalid memory id {0:?}: expected 4 to 40 lowercase hex characters")]
    InvalidMemoryId(String),
    /// A memory entry file that does not parse.
    #[error(
        "memory entry {path} is not valid ({source}): fix it with `git agent memory edit {id}` or remove it with \
         `git agent memory forget --purge {id}`"
    )]
    InvalidMemoryEntry {
        path: String,
        id: String,
        #[source]
        source: serde_json::Error,
    },
    /// A memory blob over its size limit, refused from its header before it is read.
    #[error(
        "{reference}:{path} has {size} bytes, more than the {limit} a memory file may have: \
         remove it with `git agent memory forget --purge <id>`, or inspect it with \
         `git cat-file -s {reference}:{path}`"
    )]
    MemoryFileTooLarge {
        reference: &'static str,
        path: String,
        size: u64,
        limit: u64,
    },
    /// A memory write whose decision function returned without deciding.
    #[error("the memory write decided nothing")]
    MemoryWriteUndecided,
    #[error("{}", describe_gix(.0))]
    Git(#[from] gix::Error),
}

/// A gix error in words: what failed and its cause on the first line, and, when a lock file is in the way,
/// which one and what to do about it. (Its alternate form prints gix's internal structures: issue 17.)
fn describe_gix(err: &gix::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    for e in err.iter_errors() {
        let text = e.to_string();
        // A cause is often repeated by the frame that wraps it.
        if parts.iter().any(|p| p.contains(&text)) {
            continue;
        }
        parts.push(text);
    }
    let lock = err
        .iter_errors()
        .any(|e| {
            e.downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::AlreadyExists)
        })
        .then(|| parts.iter().find_map(|p| quoted_lock_path(p)))
        .flatten();
    let what = parts.first().map_or("unknown failure", String::as_str);
    let what = lower_first(what);
    match lock {
        Some(lock) => format!(
            "git storage error: {what}: {lock} exists (another git process is writing there, or one was killed while it did)\n\
             hint: if no git or git-agent process is running in this repository, remove {lock} and try again"
        ),
        None if parts.len() > 1 => {
            let cause = lower_first(&parts[parts.len() - 1]);
            format!("git storage error: {what}: {cause}")
        }
        None => format!("git storage error: {what}"),
    }
}

/// The first `"...lock"` path quoted in a gix message.
fn quoted_lock_path(text: &str) -> Option<String> {
    text.split('"')
        .skip(1)
        .step_by(2)
        .find(|s| s.ends_with(".lock"))
        .map(str::to_owned)
}

fn lower_first(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(c) if !text.starts_with("HEAD") => c.to_lowercase().chain(chars).collect(),
        _ => text.to_owned(),
    }
}

impl StoreError {
    /// Checks `path` ([`crate::sys::fs::check_plain_read()`]) before gix or the `ignore` crate reads it as
    /// `role` (`"git's ignore rules"`): a command could have left a FIFO there, and their plain open would
    /// wait for a writer for ever.
    pub(super) fn check_git_file(path: &Path, role: &'static str) -> Result<(), StoreError> {
        crate::sys::fs::check_plain_read(path, crate::store::ignore_files::GIT_FILE_LIMIT).map_err(
            |source| StoreError::UnreadableGitFile {
                path: path.to_owned(),
                role,
                source,
            },
        )
    }

    pub(super) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> StoreError {
        let path = path.into();
        move |source| StoreError::Io {
            action,
            path,
            source,
        }
    }
}

impl StoreError {
    /// True for the refusals: the store declined what it was asked, for a reason its message gives the user
    /// (as opposed to a failure of git, gix or the file system).
    pub fn is_refusal(&self) -> bool {
        use StoreError::*;
        matches!(
            self,
            Discarded { .. }
                | NotHere(_)
                | HereStartsFromWorkTree
                | MovedOutside { .. }
                | NoFreeSessionId { .. }
                | UndoOutOfRange { .. }
                | NoParent(_)
                | UndoWouldOverwrite { .. }
                | BadId { .. }
                | NotACheckout { .. }
                | NoWorkTree(_)
                | NoFreeCheckoutName { .. }
                | InvalidRefName(_)
                | UnwritablePaths(_)
                | CheckoutNotRestored { .. }
                | CheckoutThreadFailed
                | UnmergedIndex
                | NotACommit(_)
                | NotFileOrLink { .. }
                | UnreadableGitFile { .. }
                | NotLandable(_)
                | LandingInterrupted(_)
                | DamagedLandingRecord { .. }
                | Encode { .. }
                | CommitRefused
                | IndexNotUpdated { .. }
                | FetchFailed(_)
                | SkillFileRefused(_)
                | SkillUnusable { .. }
                | InvalidSkillName(_)
                | SkillWithoutFile { .. }
                | SkillTooLarge { .. }
                | InvalidSkillFilePath { .. }
                | NoFreeMemoryId { .. }
                | InvalidMemoryId(_)
                | InvalidMemoryEntry { .. }
                | MemoryFileTooLarge { .. }
                | MemoryWriteUndecided
        )
    }
}

/// `"s"` unless `n` is 1.
fn plural(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// How many steps a session has to undo, in words.
fn steps_to_undo(steps: u32) -> String {
    match steps {
        0 => "it has no steps to undo".to_owned(),
        n => format!("it has {n} step{} to undo", plural(u64::from(n))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(hex: &str) -> ObjectId {
        ObjectId::from_hex(hex.as_bytes()).unwrap()
    }

    fn json_error() -> serde_json::Error {
        serde_json::from_str::<u8>("{").unwrap_err()
    }

    /// The words of each refusal, pinned: they were the `Refused(String)` texts before the variants carried
    /// their data, and tests of the binary and users' scripts read them.
    #[test]
    fn refusals_keep_their_words() {
        let tip = id("1234567890abcdef1234567890abcdef12345678");
        let target = id("abcdef1234567890abcdef1234567890abcdef12");
        let json = json_error().to_string();
        let cases: Vec<(StoreError, String)> = vec![
            (
                StoreError::Discarded { id: "abc123".into(), branch: "agent/abc123".into() },
                "session abc123 was discarded (agent/abc123 is gone): start a new session".into(),
            ),
            (
                StoreError::NotHere("abc123".into()),
                "session abc123 works in its own checkout, not in your working tree: resume it without --here"
                    .into(),
            ),
            (
                StoreError::MovedOutside { id: "abc123".into() },
                "the newest session started here, abc123, has steps this repository did not make (agent/abc123 \
                 was moved outside git-agent, e.g. by a fetch): check `git log agent/abc123`, then name the \
                 session to act on it"
                    .into(),
            ),
            (
                StoreError::NoFreeSessionId { draws: 10_000 },
                "found no free session id in 10000 draws: remove old sessions with `git agent discard --purge`"
                    .into(),
            ),
            (
                StoreError::UndoOutOfRange { id: "abc123".into(), asked: 1, steps: 0 },
                "cannot undo 1 step of session abc123: it has no steps to undo (step 0, your own captured \
                 changes, stays)"
                    .into(),
            ),
            (
                StoreError::UndoOutOfRange { id: "abc123".into(), asked: 3, steps: 1 },
                "cannot undo 3 steps of session abc123: it has 1 step to undo (step 0, your own captured \
                 changes, stays)"
                    .into(),
            ),
            (
                StoreError::UndoWouldOverwrite { edited: vec!["a.txt".into(), "b.txt".into()], tip, target },
                "cannot undo: a.txt, b.txt changed in your working tree since the agent's step (undo would \
                 overwrite your edit); commit or restore them first, or undo by hand with `git diff 1234567 \
                 abcdef1`"
                    .into(),
            ),
            (
                StoreError::BadId { what: "commit", id: "xyz".into(), record: "a review record" },
                "bad commit \"xyz\" in a review record".into(),
            ),
            (
                StoreError::NotACheckout { root: "/tmp/x".into(), under: "/repo/.git/agent".into() },
                "refusing to remove /tmp/x: it is not a session checkout under /repo/.git/agent".into(),
            ),
            (StoreError::InvalidRefName("HEAD"), "HEAD is not a valid reference name".into()),
            (
                StoreError::UnwritablePaths(vec!["a".into(), "b".into()]),
                "the session's tree names paths that are never written into a working tree: a, b; nothing \
                 was written"
                    .into(),
            ),
            (
                StoreError::CheckoutNotRestored {
                    cause: Box::new(StoreError::Busy("refs/heads/agent/x".into())),
                    tip,
                    undo: Box::new(StoreError::NoWorkTree("/w".into())),
                },
                format!(
                    "refs/heads/agent/x stayed busy: another process holds it; if none runs, remove \
                     refs/heads/agent/x.lock; putting the checkout back to {tip} failed too (/w has no work \
                     tree): discard the session"
                ),
            ),
            (
                StoreError::NotACommit("nope".into()),
                "\"nope\" does not name a commit: give a branch, a tag or a commit id".into(),
            ),
            (
                StoreError::NotFileOrLink { path: "sub".into(), verb: "committed" },
                "sub: only files and symbolic links are committed".into(),
            ),
            (
                StoreError::NotLandable("sub".into()),
                "sub: a landing never writes submodules or directories".into(),
            ),
            (
                StoreError::LandingInterrupted("accept".into()),
                "an earlier accept was interrupted: finish it with `git agent accept --continue` or undo it \
                 with `git agent accept --abort` first"
                    .into(),
            ),
            (
                StoreError::DamagedLandingRecord { path: "/r.json".into(), source: json_error() },
                format!(
                    "the landing record /r.json is damaged ({json}): compare your files with `git diff`, then \
                     remove it"
                ),
            ),
            (
                StoreError::Encode { what: "the landing record", source: json_error() },
                format!("cannot write the landing record: {json}"),
            ),
            (
                StoreError::IndexNotUpdated { commit: tip, source: Box::new(StoreError::UnmergedIndex) },
                format!(
                    "committed {tip}, but your index could not be updated for the committed files (the index \
                     has unmerged entries (a merge or rebase is under way): resolve them and `git add` the \
                     files first): run `git reset -- <files>`"
                ),
            ),
            (
                StoreError::FetchFailed("origin".into()),
                "could not fetch from origin (git said why above); nothing was changed".into(),
            ),
            (
                StoreError::SkillUnusable { name: "a\u{1b}b".into(), verb: "exported", why: "no SKILL.md".into() },
                format!("stored skill {} cannot be exported: no SKILL.md", tree_path::shown("a\u{1b}b")),
            ),
            (
                StoreError::SkillTooLarge { name: "big".into(), size: 9, unit: "bytes", limit: 8 },
                "skill big has 9 bytes; a stored skill may have at most 8".into(),
            ),
            (
                StoreError::InvalidSkillFilePath { name: "s".into(), path: "../x".into() },
                "skill s: invalid file path \"../x\"".into(),
            ),
            (
                StoreError::NoFreeMemoryId { tries: 1000 },
                "could not find a free memory id after 1000 tries".into(),
            ),
            (
                StoreError::InvalidMemoryEntry { path: "entries/ab/abcd.json".into(), id: "abcd".into(), source: json_error() },
                format!(
                    "memory entry entries/ab/abcd.json is not valid ({json}): fix it with `git agent memory \
                     edit abcd` or remove it with `git agent memory forget --purge abcd`"
                ),
            ),
            (
                StoreError::MemoryFileTooLarge { reference: "refs/agent/memory", path: "m".into(), size: 9, limit: 8 },
                "refs/agent/memory:m has 9 bytes, more than the 8 a memory file may have: remove it with `git \
                 agent memory forget --purge <id>`, or inspect it with `git cat-file -s refs/agent/memory:m`"
                    .into(),
            ),
        ];
        for (err, words) in cases {
            assert_eq!(err.to_string(), words, "{err:?}");
            assert!(err.is_refusal(), "{err:?}");
        }
    }

    #[test]
    fn failures_of_git_and_the_file_system_are_not_refusals() {
        for err in [
            StoreError::Busy("refs/agent/memory".into()),
            StoreError::GitCommand {
                args: "status".into(),
                stderr: "boom".into(),
            },
            StoreError::io("read", "/x")(std::io::Error::from(std::io::ErrorKind::NotFound)),
        ] {
            assert!(!err.is_refusal(), "{err:?}");
        }
    }
}
