//! A fleet's queue on a remote: listing its refs, fetching the few objects a worker reads, writing records
//! as commits, and pushing ref updates that are compare-and-swaps on the remote (`--force-with-lease` with
//! an expected value for every ref, so a creation fails when the ref exists and an update fails when it
//! moved). The transport is the git CLI, like `git agent push`.
//!
//! A rejected lease is a *conflict* (someone else claimed, renewed or finished first): never retried. Any
//! other failure (the remote unreachable, a hook that declined, a lock on the remote) is *transient* and
//! retried with back-off by [`Queue::push_retrying()`].

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::{Duration, Instant};

use gix::objs::tree::EntryKind;
use serde::Serialize;

use super::record::{self, check_id, Invalid, MAX_RECORD};
use crate::store::{ObjectId, Store, StoreError};

/// The error returned by [`Queue`] operations.
#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{0}")]
    Invalid(#[from] Invalid),
    #[error("{what} from the remote is refused: {why}")]
    Refused { what: String, why: String },
    #[error("no fleet {0} on the remote: submit it first with `git agent fleet submit`")]
    NoFleet(String),
    #[error("could not reach the remote {remote}: {detail}")]
    Unreachable { remote: String, detail: String },
}

impl From<gix::Error> for QueueError {
    fn from(err: gix::Error) -> Self {
        QueueError::Store(StoreError::Git(err))
    }
}

/// Where a fleet's refs live on the remote.
pub fn fleet_prefix(fleet: &str) -> String {
    format!("refs/agent/fleet/{fleet}/")
}

/// Where a fleet's per-task notes refs live on the remote.
pub fn notes_prefix(fleet: &str) -> String {
    format!("refs/notes/agent-fleet/{fleet}/")
}

/// The kinds of per-task refs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Tasks,
    Claims,
    Results,
    Notes,
}

impl Kind {
    fn dir(self) -> &'static str {
        match self {
            Kind::Tasks => "tasks",
            Kind::Claims => "claims",
            Kind::Results => "results",
            Kind::Notes => "notes",
        }
    }
}

/// What a ref update on the remote expects to find there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    Absent,
    Is(ObjectId),
}

/// One ref update of a push: `new` None deletes.
#[derive(Clone, Debug)]
pub struct Update {
    pub dst: String,
    pub new: Option<ObjectId>,
    pub expect: Expect,
}

/// How a push went.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pushed {
    Done,
    /// These refs were not as expected: someone else got there first.
    Conflict(Vec<String>),
    /// Anything else; worth another try.
    Transient(String),
}

/// Every ref of a fleet on the remote, by kind and task id. Names that do not parse are listed in `strange`
/// (shown, never used).
#[derive(Clone, Debug, Default)]
pub struct Listing {
    pub meta: Option<ObjectId>,
    pub cancel: Option<ObjectId>,
    pub tasks: BTreeMap<String, ObjectId>,
    pub claims: BTreeMap<String, ObjectId>,
    pub results: BTreeMap<String, ObjectId>,
    pub notes: BTreeMap<String, ObjectId>,
    pub strange: Vec<String>,
}

impl Listing {
    /// How many refs the fleet has on the remote.
    pub fn ref_count(&self) -> usize {
        self.meta.iter().count()
            + self.cancel.iter().count()
            + self.tasks.len()
            + self.claims.len()
            + self.results.len()
            + self.notes.len()
            + self.strange.len()
    }
}

/// Back-off of transient push failures: delays double from `first` up to `max`, with jitter, until
/// `give_up` has passed.
#[derive(Clone, Copy, Debug)]
pub struct Backoff {
    pub first: Duration,
    pub max: Duration,
    pub give_up: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            first: Duration::from_millis(200),
            max: Duration::from_secs(5),
            give_up: Duration::from_secs(300),
        }
    }
}

/// A fleet on one remote, seen from one local repository (where objects are written and fetched).
pub struct Queue<'a> {
    store: &'a Store,
    remote: String,
    fleet: String,
}

impl<'a> Queue<'a> {
    /// The fleet `fleet` on `remote` (a remote's name, a URL or a path).
    pub fn new(store: &'a Store, remote: &str, fleet: &str) -> Result<Queue<'a>, QueueError> {
        if remote.is_empty() || remote.starts_with('-') {
            return Err(Invalid(format!("invalid remote {}", record::shown(remote))).into());
        }
        check_id("fleet id", fleet)?;
        Ok(Queue {
            store,
            remote: remote.to_owned(),
            fleet: fleet.to_owned(),
        })
    }

    pub fn fleet(&self) -> &str {
        &self.fleet
    }

    pub fn remote(&self) -> &str {
        &self.remote
    }

    pub fn store(&self) -> &Store {
        self.store
    }

    /// The remote ref of a task's `kind`. Notes live under `refs/notes/` (`git notes --ref` and `git log
    /// --notes` read nothing elsewhere): `refs/notes/agent-fleet/<fleet>/<task>`.
    pub fn task_ref(&self, kind: Kind, id: &str) -> String {
        match kind {
            Kind::Notes => format!("{}{id}", notes_prefix(&self.fleet)),
            _ => format!("{}{}/{id}", fleet_prefix(&self.fleet), kind.dir()),
        }
    }

    pub fn meta_ref(&self) -> String {
        format!("{}meta", fleet_prefix(&self.fleet))
    }

    pub fn cancel_ref(&self) -> String {
        format!("{}cancel", fleet_prefix(&self.fleet))
    }

    fn git(&self) -> std::process::Command {
        // A push sends objects `write` made: they go to disk first. A failure here shows as git's own
        // "bad object" error on the push.
        let _ = self.store.persist_objects();
        let mut cmd = crate::store::objects::git::command(self.store.workdir());
        cmd.stdin(Stdio::null());
        cmd
    }

    /// The fleet's refs on the remote (`git ls-remote`: no objects travel).
    pub fn list(&self) -> Result<Listing, QueueError> {
        let pattern = format!("{}*", fleet_prefix(&self.fleet));
        let notes = format!("{}*", notes_prefix(&self.fleet));
        let out = self
            .git()
            .args(["ls-remote", "--refs", &self.remote, &pattern, &notes])
            .output()
            .map_err(StoreError::GitMissing)?;
        if !out.status.success() {
            return Err(self.unreachable(&out.stderr));
        }
        Ok(self.parse_listing(&String::from_utf8_lossy(&out.stdout)))
    }

    fn unreachable(&self, stderr: &[u8]) -> QueueError {
        let text = String::from_utf8_lossy(stderr);
        let last = text
            .lines()
            .rfind(|l| !l.trim().is_empty())
            .unwrap_or("git failed");
        QueueError::Unreachable {
            remote: record::shown(&self.remote),
            detail: crate::safety::quote::visible(last.trim()),
        }
    }

    fn parse_listing(&self, text: &str) -> Listing {
        let prefix = fleet_prefix(&self.fleet);
        let notes = notes_prefix(&self.fleet);
        let mut listing = Listing::default();
        for line in text.lines() {
            let Some((oid, name)) = line.split_once('\t') else {
                continue;
            };
            let Ok(oid) = ObjectId::from_hex(oid.as_bytes()) else {
                listing.strange.push(record::shown(name));
                continue;
            };
            if let Some(id) = name.strip_prefix(&notes) {
                match check_id("task id", id) {
                    Ok(()) => {
                        listing.notes.insert(id.to_owned(), oid);
                    }
                    Err(_) => listing.strange.push(record::shown(name)),
                }
                continue;
            }
            let Some(rest) = name.strip_prefix(&prefix) else {
                continue;
            };
            let slot = match rest.split_once('/') {
                None if rest == "meta" => {
                    listing.meta = Some(oid);
                    continue;
                }
                None if rest == "cancel" => {
                    listing.cancel = Some(oid);
                    continue;
                }
                Some(("tasks", id)) => Some((&mut listing.tasks, id)),
                Some(("claims", id)) => Some((&mut listing.claims, id)),
                Some(("results", id)) => Some((&mut listing.results, id)),
                _ => None,
            };
            match slot {
                Some((map, id)) if check_id("task id", id).is_ok() => {
                    map.insert(id.to_owned(), oid);
                }
                _ => listing.strange.push(record::shown(name)),
            }
        }
        listing
    }

    /// True when `name` exists on the remote now.
    pub fn remote_has(&self, name: &str) -> Result<bool, QueueError> {
        let out = self
            .git()
            .args(["ls-remote", "--refs", &self.remote, name])
            .output()
            .map_err(StoreError::GitMissing)?;
        if !out.status.success() {
            return Err(self.unreachable(&out.stderr));
        }
        Ok(String::from_utf8_lossy(&out.stdout)
            .lines()
            .any(|l| l.split_once('\t').is_some_and(|(_, n)| n == name)))
    }

    /// Fetches the objects of `refs` (remote ref names) into the local object store, without creating any
    /// local ref; git's fsck checks run on what arrives.
    pub fn fetch(&self, refs: &[String]) -> Result<(), QueueError> {
        if refs.is_empty() {
            return Ok(());
        }
        let out = self
            .git()
            .args([
                "-c",
                "fetch.fsckObjects=true",
                "fetch",
                "--quiet",
                "--no-tags",
            ])
            .args([
                "--no-write-fetch-head",
                "--no-auto-gc",
                "--no-recurse-submodules",
            ])
            .arg(&self.remote)
            .args(refs)
            .output()
            .map_err(StoreError::GitMissing)?;
        if !out.status.success() {
            return Err(self.unreachable(&out.stderr));
        }
        Ok(())
    }

    /// Reads the record `file` of commit `commit` (fetched from the remote): the commit's tree must hold that
    /// one blob and nothing else, within [`MAX_RECORD`] bytes, and the record must pass `check`.
    pub fn read<T: serde::de::DeserializeOwned>(
        &self,
        commit: ObjectId,
        file: &str,
        check: impl Fn(&T) -> Result<(), Invalid>,
    ) -> Result<T, QueueError> {
        let refused = |why: String| QueueError::Refused {
            what: format!("{file} of {}", commit.to_hex_with_len(12)),
            why,
        };
        let repo = self.store.repo();
        let object = repo
            .find_object(commit)
            .map_err(|e| refused(format!("object missing ({e})")))?;
        let commit_obj = object
            .try_into_commit()
            .map_err(|_| refused("not a commit".into()))?;
        let tree = commit_obj
            .tree()
            .map_err(|e| refused(format!("no tree ({e})")))?;
        let entries: Vec<_> = tree
            .iter()
            .collect::<Result<_, _>>()
            .map_err(|e| refused(e.to_string()))?;
        let [entry] = entries.as_slice() else {
            return Err(refused(format!(
                "{} tree entries, expected 1",
                entries.len()
            )));
        };
        if entry.filename() != file || !entry.mode().is_blob() {
            return Err(refused(format!(
                "unexpected entry {}",
                record::shown(&entry.filename().to_string())
            )));
        }
        let header = repo
            .find_header(entry.object_id())
            .map_err(|e| refused(e.to_string()))?;
        if header.size() > MAX_RECORD as u64 {
            return Err(refused(format!(
                "{} bytes, more than {MAX_RECORD}",
                header.size()
            )));
        }
        let blob = repo
            .find_object(entry.object_id())
            .map_err(|e| refused(e.to_string()))?;
        record::parse(&blob.data, check).map_err(|e| refused(e.0))
    }

    /// Writes `value` as the one file `file` of a new commit (parent `parent`) in the local object store.
    pub fn write<T: Serialize>(
        &self,
        file: &str,
        value: &T,
        parent: Option<ObjectId>,
        message: &str,
    ) -> Result<ObjectId, QueueError> {
        let repo = self.store.repo();
        let json = serde_json::to_vec_pretty(value)
            .map_err(|e| Invalid(format!("cannot encode {file}: {e}")))?;
        let blob = repo.write_blob(&json)?.detach();
        let mut editor = repo
            .find_tree(ObjectId::empty_tree(repo.object_hash()))?
            .edit()?;
        editor.upsert(file, EntryKind::Blob, blob)?;
        let tree = editor.write()?.detach();
        Ok(crate::store::objects::snapshot::write_commit(
            repo, tree, parent, message,
        )?)
    }

    /// Writes a notes commit holding `notes` (commit, text): a flat notes tree, one blob per annotated
    /// commit, as `git notes` reads it.
    pub fn write_notes(
        &self,
        notes: &[(ObjectId, String)],
        message: &str,
    ) -> Result<ObjectId, QueueError> {
        let repo = self.store.repo();
        let mut editor = repo
            .find_tree(ObjectId::empty_tree(repo.object_hash()))?
            .edit()?;
        for (commit, text) in notes {
            let blob = repo.write_blob(text.as_bytes())?.detach();
            editor.upsert(commit.to_string(), EntryKind::Blob, blob)?;
        }
        let tree = editor.write()?.detach();
        Ok(crate::store::objects::snapshot::write_commit(
            repo, tree, None, message,
        )?)
    }

    /// One atomic push of `updates`, each a compare-and-swap on the remote.
    pub fn push(&self, updates: &[Update]) -> Result<Pushed, QueueError> {
        let mut cmd = self.git();
        cmd.args(["push", "--atomic", "--porcelain", "--no-verify", "--quiet"])
            .arg(&self.remote);
        for update in updates {
            let expect = match update.expect {
                Expect::Absent => String::new(),
                Expect::Is(oid) => oid.to_string(),
            };
            cmd.arg(format!("--force-with-lease={}:{expect}", update.dst));
        }
        for update in updates {
            let src = update.new.map(|o| o.to_string()).unwrap_or_default();
            cmd.arg(format!("{src}:{}", update.dst));
        }
        let out = cmd.output().map_err(StoreError::GitMissing)?;
        if out.status.success() {
            return Ok(Pushed::Done);
        }
        Ok(classify(&out.stdout, &out.stderr))
    }

    /// [`Queue::push()`], retrying transient failures with `backoff`; `on_retry` hears each failure.
    pub fn push_retrying(
        &self,
        updates: &[Update],
        backoff: Backoff,
        mut on_retry: impl FnMut(&str, Duration),
    ) -> Result<Pushed, QueueError> {
        let start = Instant::now();
        let mut delay = backoff.first;
        loop {
            match self.push(updates)? {
                Pushed::Transient(why) if start.elapsed() < backoff.give_up => {
                    let wait = jittered(delay);
                    on_retry(&why, wait);
                    std::thread::sleep(wait);
                    delay = (delay * 2).min(backoff.max);
                }
                other => return Ok(other),
            }
        }
    }
}

/// Reads `git push --porcelain`'s verdicts: a ref rejected for its lease (or because it exists or moved)
/// is a conflict; anything else is transient.
fn classify(stdout: &[u8], stderr: &[u8]) -> Pushed {
    let text = String::from_utf8_lossy(stdout);
    let mut conflicts = Vec::new();
    for line in text.lines().filter(|l| l.starts_with('!')) {
        let lost = [
            "(stale info)",
            "(already exists)",
            "(fetch first)",
            "(non-fast-forward)",
        ]
        .iter()
        .any(|why| line.contains(why));
        if lost {
            let dst = line
                .split('\t')
                .nth(1)
                .and_then(|refspec| refspec.split_once(':'))
                .map_or("", |(_, dst)| dst);
            conflicts.push(dst.to_owned());
        }
    }
    if !conflicts.is_empty() {
        return Pushed::Conflict(conflicts);
    }
    let err = String::from_utf8_lossy(stderr);
    let why = text
        .lines()
        .find(|l| l.starts_with('!'))
        .or_else(|| err.lines().rfind(|l| !l.trim().is_empty()))
        .unwrap_or("git push failed");
    Pushed::Transient(crate::safety::quote::visible(why.trim()))
}

/// `delay` plus up to half of it again, so workers that failed together do not retry together.
pub fn jittered(delay: Duration) -> Duration {
    let half = delay.as_millis() as u64 / 2;
    delay + Duration::from_millis(crate::sys::random::jitter_below(half))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_verdicts_are_classified() {
        let stale = b"To r\n!\tabc:refs/agent/fleet/f/claims/t\t[rejected] (stale info)\nDone\n";
        assert_eq!(
            classify(stale, b""),
            Pushed::Conflict(vec!["refs/agent/fleet/f/claims/t".into()])
        );
        let hook = b"To r\n!\tabc:refs/x\t[remote rejected] (pre-receive hook declined)\nDone\n";
        assert!(matches!(classify(hook, b""), Pushed::Transient(_)));
        assert!(matches!(
            classify(b"", b"fatal: unable to access"),
            Pushed::Transient(_)
        ));
    }

    #[test]
    fn jitter_stays_within_half_again() {
        let d = Duration::from_millis(100);
        let j = jittered(d);
        assert!(j >= d && j < d + Duration::from_millis(50));
    }
}
