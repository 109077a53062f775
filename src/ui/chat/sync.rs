//! The chat's one lock helper, in a file of its own so the screen and the sink need nothing of the module
//! that re-exports them.

/// A poisoned lock only means a panic elsewhere mid-draw; the screen state stays usable.
pub fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
