//! What a front-end holds while a turn runs: a cancel for that one turn, and a queue of text that steers it.
//!
//! Cancelling is per turn, not per process: chat's Ctrl-C and ACP's `session/cancel` end the turn and the session
//! lives on for the next prompt. `ask` wires the process's Ctrl-C, SIGTERM and SIGHUP to its one turn
//! ([`TurnControl::cancel_on_signals()`]): a cancelled CI job or `timeout` must not leave the command's
//! dev servers and test runs behind. A cancel drops the model stream at once (so the provider stops
//! generating), kills a running command's process group (tools watch [`crate::tools::ToolContext::cancel`]),
//! answers an open approval question with [`crate::protocol::Approval::Cancelled`], and records the calls not
//! yet run as not run; steps already committed stay.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

/// The cancel and the steering queue of one turn. Clones share them, so a front-end keeps one clone and
/// passes another to [`super::AgentSession::turn()`].
#[derive(Clone, Debug)]
pub struct TurnControl {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// Read by the tools on their blocking threads.
    cancelled: Arc<AtomicBool>,
    /// Wakes the awaits that race a cancel (the model stream, an approval question).
    wake: watch::Sender<bool>,
    steering: Mutex<Vec<String>>,
    /// The signal that cancelled the turn (0: none, or a cancel that was no signal).
    signal: AtomicI32,
}

impl Default for TurnControl {
    fn default() -> Self {
        TurnControl::new()
    }
}

impl TurnControl {
    pub fn new() -> TurnControl {
        TurnControl {
            inner: Arc::new(Inner {
                cancelled: Arc::new(AtomicBool::new(false)),
                wake: watch::channel(false).0,
                steering: Mutex::new(Vec::new()),
                signal: AtomicI32::new(0),
            }),
        }
    }

    /// Cancels the turn (see the module docs). Safe from any thread or task, and more than once.
    pub fn cancel(&self) {
        self.inner.cancelled.store(true, Ordering::SeqCst);
        self.inner.wake.send_replace(true);
    }

    pub fn is_cancelled(&self) -> bool {
        self.inner.cancelled.load(Ordering::SeqCst)
    }

    /// Adds text the user typed while the turn runs: it joins the conversation as a user message before the
    /// next model request, and a turn whose model has just answered goes on with it instead of ending.
    pub fn steer(&self, text: impl Into<String>) {
        lock(&self.inner.steering).push(text.into());
    }

    /// Takes the steered text not yet sent (all of it, oldest first). The turn takes it before each request;
    /// a front-end takes what is left after a turn that ended anyway (stopped, cancelled) to send it next.
    pub fn take_steering(&self) -> Vec<String> {
        std::mem::take(&mut *lock(&self.inner.steering))
    }

    /// True when steered text waits.
    pub fn has_steering(&self) -> bool {
        !lock(&self.inner.steering).is_empty()
    }

    /// Cancels on the process's Ctrl-C (SIGINT), SIGTERM or SIGHUP, from the first time the runtime polls
    /// the returned task on. Installing the handlers means these signals no longer kill the process: the turn
    /// ends as interrupted (SIGINT, exit 130) or terminated (exit 128 + the signal: 143, 129), running
    /// commands killed with their process groups, the work so far recorded. Abort the task when the turn is
    /// over. Once installed, tokio's handlers stay for the life of the process, so this is for a front-end
    /// whose process ends with the turn (`ask`). Where a handler cannot be installed, that signal keeps its
    /// default (the process dies; its commands die with it, see `safety::isolate`).
    pub fn cancel_on_signals(&self) -> tokio::task::JoinHandle<()> {
        use tokio::signal::unix::{signal, SignalKind};
        let control = self.clone();
        tokio::spawn(async move {
            let mut term = signal(SignalKind::terminate()).ok();
            let mut hup = signal(SignalKind::hangup()).ok();
            let sig = tokio::select! {
                r = tokio::signal::ctrl_c() => match r {
                    Ok(()) => crate::sys::signal::SIGINT,
                    Err(_) => return,
                },
                Some(()) = next(&mut term) => crate::sys::signal::SIGTERM,
                Some(()) = next(&mut hup) => crate::sys::signal::SIGHUP,
            };
            control.cancel_for_signal(sig);
        })
    }

    /// Cancels the turn because the process got `signal`: a SIGTERM or SIGHUP turn ends as terminated (exit
    /// 128 + the signal) rather than interrupted. For front-ends that watch signals themselves.
    pub fn cancel_for_signal(&self, signal: i32) {
        self.inner.signal.store(signal, Ordering::SeqCst);
        self.cancel();
    }

    /// Cancels on the process's Ctrl-C (SIGINT) only, for a front-end that outlives the turn and handles
    /// SIGTERM and SIGHUP itself (chat), or leaves them their default (the process dies, and its commands
    /// with it: `safety::isolate`).
    pub fn cancel_on_ctrl_c(&self) -> tokio::task::JoinHandle<()> {
        let control = self.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                control.cancel_for_signal(crate::sys::signal::SIGINT);
            }
        })
    }

    /// The signal that cancelled the turn, if a signal did.
    pub fn signal(&self) -> Option<i32> {
        Some(self.inner.signal.load(Ordering::SeqCst)).filter(|s| *s != 0)
    }

    /// The flag the tools watch.
    pub(super) fn flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.inner.cancelled)
    }

    /// Resolves once the turn is cancelled (at once if it already is).
    pub(super) async fn cancelled(&self) {
        let mut wake = self.inner.wake.subscribe();
        // The sender lives as long as `self`, so this only returns once the value is true.
        let _ = wake.wait_for(|c| *c).await;
    }
}

/// The next delivery of `signal`, or never when its handler could not be installed.
async fn next(signal: &mut Option<tokio::signal::unix::Signal>) -> Option<()> {
    match signal {
        Some(s) => s.recv().await,
        None => std::future::pending().await,
    }
}

/// A poisoned lock only means a front-end panicked mid-push; the queue stays usable.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steering_is_taken_in_order_once() {
        let control = TurnControl::new();
        let front_end = control.clone();
        assert!(!control.has_steering());
        front_end.steer("first");
        front_end.steer(String::from("second"));
        assert!(control.has_steering());
        assert_eq!(control.take_steering(), ["first", "second"]);
        assert!(control.take_steering().is_empty());
    }

    #[test]
    fn a_cancel_wakes_a_waiting_turn_and_sets_the_tools_flag() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let control = TurnControl::new();
        let flag = control.flag();
        let front_end = control.clone();
        runtime.block_on(async {
            let waiting = control.cancelled();
            let canceller = async {
                tokio::task::yield_now().await;
                front_end.cancel();
            };
            tokio::join!(waiting, canceller);
        });
        assert!(control.is_cancelled());
        assert!(flag.load(Ordering::Relaxed));
        // Already cancelled: resolves at once.
        runtime.block_on(control.cancelled());
    }
}
