//! One primitive for every move of a ref the store owns (`refs/agent/*`, `refs/notes/agent*`): read the tip,
//! let the caller build what goes on it (a commit that says what and why, or an existing commit to
//! fast-forward to), compare-and-swap, and start over on the new tip when another writer moved the ref in
//! between. Crash points sit on both sides of the swap, so a `kill -9` test sees every state a writer
//! can leave behind.

use std::time::Duration;

use gix::refs::transaction::{PreviousValue, RefEdit};
use gix::refs::Target;
use gix::ObjectId;

use super::snapshot::{edit_ref, full_name};
use crate::store::repo::{crash_point, Store, StoreError};

/// How often a transaction starts over after losing a compare-and-swap before giving up. Each attempt is a
/// few milliseconds; 4 processes writing at once settle in a handful.
const ATTEMPTS: u32 = 200;

/// How long the same lock file may stand in a transaction's way before it is reported as stale: gix waits
/// for a lock already (`core.filesRefLockTimeout`), and with 250 sessions at once other writers often hold
/// it for longer than that wait (200 rounds took 31 s: issue 17, defect 13).
const STALE_AFTER: Duration = Duration::from_secs(1);

/// What one attempt of [`Store::transact()`] decided, from the tip it was given.
pub(crate) enum Proposal<T> {
    /// Nothing to write: the transaction ends with this value.
    Done(T),
    /// Move the ref to `commit` (written on the tip, or an existing one: a fast-forward), with `reflog`
    /// as the reflog message; the transaction then ends with `then`.
    Move {
        commit: ObjectId,
        reflog: String,
        then: T,
    },
}

impl Store {
    /// Moves the ref `name` by compare-and-swap: `attempt(tip)` sees where the ref points now (`None`: it
    /// does not exist) and proposes; when another writer moved the ref in between, `attempt` runs again
    /// on the new tip, so what it decides is always decided on what it replaces. `busy` is the error when
    /// every attempt lost.
    pub(crate) fn transact<T>(
        &self,
        name: &str,
        busy: impl FnOnce() -> StoreError,
        mut attempt: impl FnMut(Option<ObjectId>) -> Result<Proposal<T>, StoreError>,
    ) -> Result<T, StoreError> {
        let mut last_err = None;
        let mut held = HeldLock::default();
        for round in 0..ATTEMPTS {
            if round > 0 {
                // Spread the retries of writers that collided so they do not collide again in lockstep.
                let jitter = u64::from(round.min(20)) + crate::sys::random::jitter_below(7);
                std::thread::sleep(Duration::from_millis(jitter));
            }
            // Loose refs are read from disk on every lookup, so this sees another writer's update.
            let tip = self.ref_target(name)?;
            let (commit, reflog, then) = match attempt(tip)? {
                Proposal::Done(value) => return Ok(value),
                Proposal::Move {
                    commit,
                    reflog,
                    then,
                } => (commit, reflog, then),
            };
            crash_point();
            let expected = match tip {
                Some(c) => PreviousValue::MustExistAndMatch(Target::Object(c)),
                None => PreviousValue::MustNotExist,
            };
            match edit_ref(
                &self.repo,
                RefEdit::update(full_name(name)?, commit, expected, reflog.as_str()),
            ) {
                Ok(()) => {
                    crash_point();
                    return Ok(then);
                }
                // Another writer's lock, held for milliseconds at a time: retried. The same lock file still
                // there after STALE_AFTER is a stale one, reported then.
                Err(StoreError::Locked { name, lock, .. }) => {
                    if let Some(waited) = held.stale(&lock) {
                        return Err(StoreError::Locked { name, lock, waited });
                    }
                }
                Err(err) => last_err = Some(err),
            }
        }
        Err(last_err.unwrap_or_else(busy))
    }

    /// The tree of `commit`, or the empty tree for a ref that does not exist yet.
    pub(crate) fn tip_tree(&self, commit: Option<ObjectId>) -> Result<ObjectId, StoreError> {
        match commit {
            Some(c) => Ok(self.repo.find_commit(c)?.tree_id()?.detach()),
            None => Ok(ObjectId::empty_tree(self.repo.object_hash())),
        }
    }
}

/// The lock file a transaction last found in its way, and since when.
#[derive(Default)]
struct HeldLock {
    seen: Option<((u64, Option<std::time::SystemTime>), std::time::Instant)>,
}

impl HeldLock {
    /// Notes that `lock` was in the way; `Some(how long)` once the same file has been there [`STALE_AFTER`].
    fn stale(&mut self, lock: &std::path::Path) -> Option<Duration> {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(lock).ok()?;
        let identity = (meta.ino(), meta.modified().ok());
        match self.seen {
            Some((seen, since)) if seen == identity => {
                let waited = since.elapsed();
                (waited >= STALE_AFTER).then_some(waited)
            }
            _ => {
                self.seen = Some((identity, std::time::Instant::now()));
                None
            }
        }
    }
}
