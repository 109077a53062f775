//! Sharing sessions through a remote: the refspecs, the notes ref a pull fetches into (the notes merge is
//! `Store::merge_notes`) and the secret check before a push ([`Store::secrets_in_refs()`]). The transport is
//! the git CLI (it knows the user's remotes, credentials and protocols).
//!
//! A pull fetches the remote's session logs and branches beside ours (`refs/agent-remotes/<remote>/`), then
//! takes them one by one ([`Store::take_pulled_sessions()`]): a session started in this repository is never
//! moved by a pull, even by a fast-forward. Its branch and log decide what `undo` and `--here` write into the
//! user's tree, and a collaborator who can push to the remote could otherwise append steps to it (issue 17,
//! defect 1). Theirs then stays beside ours, and the pull says where.

use std::ffi::OsStr;

use crate::safety::redact::Redactor;

use gix::refs::transaction::{PreviousValue, RefEdit};

use crate::store::objects::snapshot::{edit_ref, full_name};
use crate::store::repo::{Store, StoreError};
use gix::ObjectId;

/// What `git agent push` pushes besides notes: session logs, memory (and later skills), session branches.
/// Nothing is forced: a remote ref that moved elsewhere is reported, never overwritten.
pub const PUSH_REFSPECS: [&str; 2] = [
    "refs/agent/*:refs/agent/*",
    "refs/heads/agent/*:refs/heads/agent/*",
];

/// The notes refs that are shared: the agent's notes on step commits, and review records.
pub const NOTES_REFS: [&str; 2] = [
    crate::store::objects::notes::NOTES_REF,
    crate::store::land::review::REVIEW_REF,
];

/// Where `git agent pull` fetches the remote's notes before merging them into ours.
pub fn remote_notes_ref(remote: &str) -> String {
    format!("refs/notes/remotes/{remote}/agent")
}

/// Where `git agent pull` fetches the remote's review records (the same fetch glob brings both).
pub fn remote_review_ref(remote: &str) -> String {
    format!("refs/notes/remotes/{remote}/agent-review")
}

/// Where `git agent pull` fetches the remote's session logs (`sessions`) and branches (`heads`), before
/// [`Store::take_pulled_sessions()`] takes them.
pub fn remote_sessions_ref(remote: &str, family: &str) -> String {
    format!("refs/agent-remotes/{remote}/{family}")
}

/// The fetch refspecs of a pull's session logs and branches: forced, because only a pull writes there.
pub fn sessions_fetch_refspecs(remote: &str) -> [String; 2] {
    [
        format!(
            "+refs/agent/sessions/*:{}/*",
            remote_sessions_ref(remote, "sessions")
        ),
        format!(
            "+refs/heads/agent/*:{}/*",
            remote_sessions_ref(remote, "heads")
        ),
    ]
}

/// What [`Store::take_pulled_sessions()`] did.
#[derive(Debug, Default)]
pub struct PulledSessions {
    /// Refs created or fast-forwarded.
    pub taken: usize,
    /// Refs left as they were, each with why and where theirs is kept.
    pub kept: Vec<KeptRef>,
    /// Session logs not taken because they cannot be read as one (left in the staging area to inspect).
    pub refused: Vec<RefusedLog>,
}

/// A pulled session log that is not one: its summary is missing, too large, not a summary, or names
/// another session. Taken, it would fail `log` and `stats` for every session, or pass for another one
/// (issue 22, finding 3).
#[derive(Debug)]
pub struct RefusedLog {
    /// The session id its ref names.
    pub id: String,
    /// Where it stays (`refs/agent-remotes/<remote>/sessions/<id>`).
    pub staged: String,
    pub why: String,
}

/// A ref of ours a pull did not move.
#[derive(Debug)]
pub struct KeptRef {
    /// Our ref (`refs/heads/agent/<id>` or `refs/agent/sessions/<id>`).
    pub ours: String,
    /// The remote's version of it, kept beside ours.
    pub theirs: String,
    /// True when the session was started in this repository (otherwise: not a fast-forward).
    pub local: bool,
}

impl Store {
    /// Takes the session logs and branches a pull fetched beside ours: creates the ones we lack and
    /// fast-forwards the others, except that a session started in this repository (a local record) is never
    /// moved, and a ref that is no fast-forward is never overwritten; those stay beside ours, listed in
    /// [`PulledSessions::kept`]. A ref that was taken (or equal) leaves the staging area.
    pub fn take_pulled_sessions(&self, remote: &str) -> Result<PulledSessions, StoreError> {
        let mut report = PulledSessions::default();
        for (family, ours_prefix) in [
            ("sessions", "refs/agent/sessions/"),
            ("heads", "refs/heads/agent/"),
        ] {
            let staged_prefix = format!("{}/", remote_sessions_ref(remote, family));
            let mut staged = Vec::new();
            for r in self.repo.references()?.prefixed(staged_prefix.as_str())? {
                let mut r = r.map_err(|e| StoreError::Git(gix::Error::from_error(e)))?;
                let name = r.name().as_bstr().to_string();
                staged.push((name, r.peel_to_id()?.detach()));
            }
            for (name, theirs) in staged {
                let id = &name[staged_prefix.len()..];
                if family == "sessions" {
                    if let Some(why) = self.log_problem(id, theirs) {
                        report.refused.push(RefusedLog {
                            id: id.to_owned(),
                            staged: name.clone(),
                            why,
                        });
                        continue;
                    }
                }
                let ours_name = format!("{ours_prefix}{id}");
                let ours = self.ref_target(&ours_name)?;
                let local = self.local_session(id).is_some();
                let take = match ours {
                    Some(ours) if ours == theirs => None,
                    _ if local => {
                        report.kept.push(KeptRef {
                            ours: ours_name,
                            theirs: name,
                            local: true,
                        });
                        continue;
                    }
                    None => Some(PreviousValue::MustNotExist),
                    Some(ours) if self.is_ancestor(ours, theirs)? => Some(
                        PreviousValue::MustExistAndMatch(gix::refs::Target::Object(ours)),
                    ),
                    Some(_) => {
                        report.kept.push(KeptRef {
                            ours: ours_name,
                            theirs: name,
                            local: false,
                        });
                        continue;
                    }
                };
                if let Some(expected) = take {
                    let log = format!("git-agent: pull from {remote}");
                    let edit = RefEdit::update(full_name(&ours_name)?, theirs, expected, log);
                    edit_ref(&self.repo, edit)?;
                    report.taken += 1;
                }
                let gone = RefEdit::delete(
                    full_name(&name)?,
                    PreviousValue::MustExistAndMatch(gix::refs::Target::Object(theirs)),
                );
                edit_ref(&self.repo, gone)?;
            }
        }
        Ok(report)
    }

    /// Removes the session logs a pull refused and left in its staging area
    /// (`refs/agent-remotes/<remote>/sessions/<id>`), all of them: nothing reads them, and the remote still
    /// holds what they were fetched from. Each staged log is checked as the pull checked it, so a log the
    /// pull only left beside ours (no fast-forward, or a session started here) stays. The removed ones are
    /// returned, with why the pull refused them.
    pub fn prune_refused_logs(&self) -> Result<Vec<RefusedLog>, StoreError> {
        let mut staged = Vec::new();
        for r in self.repo.references()?.prefixed("refs/agent-remotes/")? {
            let mut r = r.map_err(|e| StoreError::Git(gix::Error::from_error(e)))?;
            let name = r.name().as_bstr().to_string();
            // `<remote>/sessions/<id>`: the remote's name may hold slashes, a session id never does.
            let Some((family, id)) = name.rsplit_once('/') else {
                continue;
            };
            if family.ends_with("/sessions") {
                let id = id.to_owned();
                staged.push((name, id, r.peel_to_id()?.detach()));
            }
        }
        let mut removed = Vec::new();
        for (name, id, commit) in staged {
            let Some(why) = self.log_problem(&id, commit) else {
                continue;
            };
            let gone = RefEdit::delete(
                full_name(&name)?,
                PreviousValue::MustExistAndMatch(gix::refs::Target::Object(commit)),
            );
            edit_ref(&self.repo, gone)?;
            removed.push(RefusedLog {
                id,
                staged: name,
                why,
            });
        }
        Ok(removed)
    }

    /// Why the pulled log commit `commit` of session `id` cannot be taken, or `None` when its summary reads
    /// (within the size limit, checked before reading) and names that session.
    fn log_problem(&self, id: &str, commit: ObjectId) -> Option<String> {
        match self.meta_of(commit) {
            Ok(meta) if meta.id == id => None,
            Ok(meta) => Some(format!(
                "its summary names another session ({})",
                crate::protocol::Untrusted::name(&meta.id)
            )),
            Err(StoreError::CorruptLog(_, what)) => Some(format!("it is damaged ({what})")),
            Err(err) => Some(err.to_string()),
        }
    }

    /// The shared notes refs that exist here (a push of a missing one would fail the whole push).
    pub fn notes_refs(&self) -> Result<Vec<&'static str>, StoreError> {
        let mut out = Vec::new();
        for name in NOTES_REFS {
            if self.ref_target(name)?.is_some() {
                out.push(name);
            }
        }
        Ok(out)
    }

    /// Runs git with `args` in the user's work tree and returns stdout.
    pub fn git_output(&self, args: &[&str]) -> Result<Vec<u8>, StoreError> {
        let args: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
        self.git(self.workdir(), &args)
    }

    /// The commit `name` points to, if the ref exists.
    pub fn ref_target(&self, name: &str) -> Result<Option<ObjectId>, StoreError> {
        match self.repo.try_find_reference(name)? {
            Some(mut r) => Ok(Some(r.peel_to_id()?.detach())),
            None => Ok(None),
        }
    }
}

/// A known secret found in an object that `git agent push` would send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RefLeak {
    /// The object id (blob, tree, commit or tag).
    pub object: String,
    /// The path of a blob in the pushed history, when known.
    pub path: String,
    /// The kind of secret (the variable it came from).
    pub kind: String,
}

impl Store {
    /// The known secrets in objects reachable from `refs` (ref names or `rev-list` options such as
    /// `--glob=refs/agent/*`) but not from the user's own branches, tags and remote branches: what a push of
    /// those refs would publish. `git agent push` refuses when this is not empty. Only known values count: a
    /// format match in pushed history might be a test fixture, a known key never is.
    pub fn secrets_in_refs(
        &self,
        refs: &[&str],
        redactor: &Redactor,
    ) -> Result<Vec<RefLeak>, StoreError> {
        if refs.is_empty() {
            return Ok(Vec::new());
        }
        let mut args = vec!["rev-list", "--objects"];
        args.extend_from_slice(refs);
        // `agent/*` branches are what is pushed, so they do not count as already published.
        args.extend([
            "--not",
            "--exclude=agent/*",
            "--branches",
            "--tags",
            "--remotes",
        ]);
        let listing = self.git_output(&args)?;
        let mut leaks = Vec::new();
        for line in String::from_utf8_lossy(&listing).lines() {
            // `<id>` for commits, `<id> <path>` for trees and blobs (the path is empty for a root tree).
            let (id, path) = line.split_once(' ').unwrap_or((line, ""));
            // Skipping an object would skip its check: a line we cannot read fails the check instead.
            let oid = ObjectId::from_hex(id.as_bytes()).map_err(|_| StoreError::GitCommand {
                args: "rev-list --objects".into(),
                stderr: format!("unexpected output line {line:?}"),
            })?;
            let object = self.repo.find_object(oid)?;
            let text = String::from_utf8_lossy(&object.data);
            if let Some(f) = redactor.find_known(&text).first() {
                leaks.push(RefLeak {
                    object: id.to_owned(),
                    path: path.to_owned(),
                    kind: f.kind.clone(),
                });
            }
        }
        Ok(leaks)
    }
}
