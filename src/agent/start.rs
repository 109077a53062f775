//! Starting a new session without making the user wait for its checkout.
//!
//! What the first model request needs is known at once: the id (claimed atomically), the branch name, the
//! checkout's path, the base commit, the project instructions (read from the user's work tree, which step 0
//! captures) and the system prompt. What takes time is the rest: step 0 (a status of the user's work tree),
//! the branch, and the checkout's files (100,000 writes on a large repository). So the session starts with
//! those on a thread of their own ([`Pending`]) while the first request goes out, and the first tool call,
//! which needs the checkout, waits for them (issue 16: the first request left after 45 s on a 100,000-file
//! repository). A checkout that is still being written after a second shows its progress.
//!
//! The session log exists from the start (it lists the session at once and takes the session's lock); step 0's
//! commit joins its metadata at the end of the first turn, and until then its readers find it on the branch
//! (`Store::read_meta()`). A process killed meanwhile leaves a log whose branch is missing, at the base or at
//! step 0, which `log` shows and `--resume` treats like any other (issue 16's kill -9 tests run through it).

use std::time::{Duration, Instant};

use crate::config::trust::{Item, Ledger, Standing};
use crate::protocol::{Event, Sink};
use crate::store::{Progress, StartOptions, Started, Store, StoreError, StoreForThread};

/// After this long a checkout that is still being written shows its progress.
const QUIET: Duration = Duration::from_secs(1);
/// How often progress is shown after that.
const TICK: Duration = Duration::from_millis(250);

/// A session's start: under way on its own thread ([`Pending`]), done, or failed. What works in the checkout
/// takes the [`Ready`] that only a done start hands out, so using the checkout before it exists does not
/// compile (the `ready().await` convention it replaces was kept by hand at each site).
pub(super) enum Starting {
    Underway(Pending),
    /// Done, or nothing to do (a resumed session's checkout exists already).
    Done,
    /// Taken out to be waited for, and not (yet) known to have worked: the checkout may not exist.
    Failed,
}

/// Proof that the session's checkout exists and is the session's: step 0, the branch and the checkout are
/// made and taken into it. Only [`Starting`] makes one.
#[derive(Clone, Copy, Debug)]
pub(super) struct Ready(());

impl Starting {
    /// The proof, if the start is done.
    pub(super) fn ready(&self) -> Option<Ready> {
        matches!(self, Starting::Done).then_some(Ready(()))
    }

    /// Whether the start is still under way (nothing to wait for otherwise).
    pub(super) fn is_underway(&self) -> bool {
        matches!(self, Starting::Underway(_))
    }

    /// The start under way, taken out to be waited for; the state is `Failed` until [`Starting::made()`]
    /// says that what it made was taken into the session.
    pub(super) fn take_underway(&mut self) -> Option<Pending> {
        if !self.is_underway() {
            return None;
        }
        match std::mem::replace(self, Starting::Failed) {
            Starting::Underway(pending) => Some(pending),
            _ => None,
        }
    }

    /// Records that the start's result is the session's: from now on the checkout may be used.
    pub(super) fn made(&mut self) -> Ready {
        *self = Starting::Done;
        Ready(())
    }
}

/// Step 0, the branch and the checkout of a new session, being made on a thread of their own.
pub(super) struct Pending {
    thread: std::thread::JoinHandle<Result<Started, StoreError>>,
    done: tokio::sync::oneshot::Receiver<()>,
    progress: Progress,
    since: Instant,
}

impl Pending {
    /// Starts session `id` of `store`'s repository with `options`.
    pub(super) fn spawn(
        store: StoreForThread,
        id: String,
        options: StartOptions,
    ) -> Result<Pending, StoreError> {
        let progress = Progress::default();
        let counter = progress.clone();
        let (tx, done) = tokio::sync::oneshot::channel();
        let thread = std::thread::Builder::new()
            .name("git-agent-start".into())
            .spawn(move || {
                let started = store.open().start(&id, &options, &counter);
                // The receiver may be gone (the session closed): the result is then taken by `join`.
                let _ = tx.send(());
                started
            })
            .map_err(|err| StoreError::Io {
                action: "start a thread for",
                path: "the checkout".into(),
                source: err,
            })?;
        Ok(Pending {
            thread,
            done,
            progress,
            since: Instant::now(),
        })
    }

    /// Waits for the preparation, showing progress while a checkout takes more than a second.
    pub(super) async fn wait(mut self, sink: &mut dyn Sink) -> Result<Started, StoreError> {
        let mut shown = false;
        loop {
            tokio::select! {
                _ = &mut self.done => break,
                () = tokio::time::sleep(TICK) => {
                    if self.since.elapsed() >= QUIET {
                        let (done, total) = self.progress.get();
                        if total > 0 {
                            shown = true;
                            sink.emit(&Event::Progress { what: "checkout".to_owned(), done, total });
                        }
                    }
                }
            }
        }
        if shown {
            let (_, total) = self.progress.get();
            sink.emit(&Event::Progress {
                what: "checkout".to_owned(),
                done: total,
                total,
            });
        }
        self.join()
    }

    /// Waits for the preparation, blocking the thread (when the session closes).
    pub(super) fn join(self) -> Result<Started, StoreError> {
        self.thread
            .join()
            .unwrap_or_else(|_| Err(StoreError::CheckoutThreadFailed))
    }
}

/// Whether step 0 may run the file-system monitor hook that the repository's own git config names
/// (`core.fsmonitor` in `.git/config`): only once the user trusted it, since an unpacked archive brings that
/// file along. When not, the session says so, with how to; step 0 then checks every file, as git does
/// without a monitor.
pub(super) fn fsmonitor_trusted(store: &Store, sink: &mut dyn Sink) -> bool {
    let Some(hook) = store.repository_fsmonitor() else {
        return false;
    };
    let ledger = Ledger::for_repo(store.common_dir());
    let trusted = ledger.standing(&Item::fsmonitor(&hook)) == Standing::Trusted;
    if !trusted {
        sink.emit(&Event::Warning {
            message: "core.fsmonitor in .git/config is not trusted, so step 0 checks every file instead of \
                      asking it what changed: read and trust it with `git agent trust`"
                .to_owned(),
        });
    }
    trusted
}

/// The warnings of a finished start: files left out of step 0 for their size.
pub(super) fn announce(started: &Started, max: u64, sink: &mut dyn Sink) {
    for (path, size) in &started.skipped {
        let warning = format!(
            "{} was not captured in step 0: {size} bytes is over max_capture_size ({max} bytes); \
             the agent's checkout has its committed version, if any",
            path.display()
        );
        sink.emit(&Event::Warning { message: warning });
    }
}

/// A sink that drops everything: for a start finished while no one listens (a session closing).
pub(super) struct Quiet;

impl Sink for Quiet {
    fn emit(&mut self, _event: &Event) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A start taken out to be waited for gives no proof until what it made is the session's: a failed
    /// adoption leaves the checkout unusable instead of passing as done.
    #[test]
    fn only_a_made_start_is_ready() {
        let mut start = Starting::Done;
        assert!(start.ready().is_some());
        assert!(start.take_underway().is_none(), "nothing to wait for");
        assert!(start.ready().is_some(), "taking nothing changes nothing");
        let mut failed = Starting::Failed;
        assert!(failed.ready().is_none());
        assert!(failed.take_underway().is_none());
        assert!(!failed.is_underway());
        let _ = failed.made();
        assert!(failed.ready().is_some());
    }

    /// The start under way is taken once; until it is made the session's, there is no proof, and a start
    /// that failed (no repository here) stays without one.
    #[test]
    fn an_underway_start_is_ready_only_once_made() {
        let dir = tempfile::tempdir().expect("temp dir");
        let git = |args: &[&str]| crate::agent::test_git::git(dir.path(), args);
        git(&["init", "-q"]);
        git(&["commit", "-q", "--allow-empty", "-m", "base"]);
        let store = crate::store::Store::open(dir.path()).expect("a repository");
        // A base commit the repository does not have: the start fails on its thread.
        let missing = crate::store::ObjectId::from_hex(b"1234567890123456789012345678901234567890")
            .expect("an id");
        let options = StartOptions {
            capture: false,
            here: false,
            max_capture_size: 0,
            from: crate::store::StartFrom::Commit(missing),
            repository_fsmonitor_trusted: false,
        };
        let handle = store.for_thread().expect("the store crosses threads");
        let pending = Pending::spawn(handle, "s1".into(), options).expect("thread");
        let mut start = Starting::Underway(pending);
        assert!(start.is_underway());
        assert!(start.ready().is_none(), "under way is not ready");
        let pending = start.take_underway().expect("the start under way");
        assert!(start.ready().is_none(), "taken but not made");
        assert!(start.take_underway().is_none(), "taken once");
        assert!(
            pending.join().is_err(),
            "no such base commit: the start fails"
        );
        assert!(
            start.ready().is_none(),
            "a failed start stays without proof"
        );
    }
}
