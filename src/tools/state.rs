//! What the tool calls of one session share.
//!
//! Tools are stateless functions of their arguments except for three things that span calls: the
//! fingerprint of every file the model has seen (so an edit based on an outdated read is refused), the
//! directory where full command output is saved, and the background jobs `run` started (killed when the
//! session ends, so a dev server never outlives it).

use std::collections::HashMap;
use std::hash::Hasher;
use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard};

/// Per-session tool state; one per session, shared by every [`super::ToolContext`] through an `Arc`.
#[derive(Debug)]
pub struct SessionState {
    /// Where `run` saves full output and background logs (`<common git dir>/agent/output/<session>`);
    /// `None` keeps nothing.
    pub output_dir: Option<PathBuf>,
    /// Environment variables removed from commands on top of the built-in list (the configured key's
    /// variable, for example).
    pub secret_env: Vec<String>,
    /// Whether the model takes images and how large one may be (`read_file` of an image, MCP images).
    pub images: super::image::ImagePolicy,
    reads: Mutex<HashMap<PathBuf, u64>>,
    runs: AtomicU32,
    jobs: Mutex<Jobs>,
    /// The session's language servers, once the session has set them up (the `lsp` tools use them).
    lsp: std::sync::OnceLock<std::sync::Arc<crate::lsp::pool::Pool>>,
}

/// A content fingerprint: cheap to compute and to compare, and collisions only matter for a model racing
/// itself. SipHash with fixed keys (std's `DefaultHasher::new()`), so it is stable within the process.
pub fn fingerprint(bytes: &[u8]) -> u64 {
    let mut hasher = Fingerprinter::new();
    hasher.write(bytes);
    hasher.finish()
}

/// Incremental [`fingerprint()`], for readers that stream a file.
pub type Fingerprinter = std::collections::hash_map::DefaultHasher;

impl SessionState {
    pub fn new(output_dir: Option<PathBuf>, secret_env: Vec<String>) -> SessionState {
        SessionState {
            output_dir,
            secret_env,
            images: super::image::ImagePolicy::default(),
            reads: Mutex::new(HashMap::new()),
            runs: AtomicU32::new(0),
            jobs: Mutex::new(Jobs::default()),
            lsp: std::sync::OnceLock::new(),
        }
    }

    /// The state with `images` as its image policy.
    pub fn with_images(mut self, images: super::image::ImagePolicy) -> SessionState {
        self.images = images;
        self
    }

    /// Gives the tools the session's language servers (once; later calls are ignored).
    pub fn set_lsp(&self, pool: std::sync::Arc<crate::lsp::pool::Pool>) {
        let _ = self.lsp.set(pool);
    }

    /// The session's language servers, if it has any.
    pub fn lsp(&self) -> Option<&std::sync::Arc<crate::lsp::pool::Pool>> {
        self.lsp.get()
    }

    /// Remembers what the model now knows `rel` to contain (after a read, an edit or a write).
    pub fn saw(&self, rel: &Path, fingerprint: u64) {
        lock(&self.reads).insert(rel.to_path_buf(), fingerprint);
    }

    /// Refuses an edit when `rel` changed since the model last saw it. A file the model never read through
    /// `read_file` may still be edited: it may know the text from `search`, and the exact match protects it.
    pub fn check_fresh(&self, rel: &Path, current: u64) -> Result<(), String> {
        match lock(&self.reads).get(rel) {
            Some(&seen) if seen != current => Err(format!(
                "'{}' changed since you last read it (by a command or on disk); read it again with read_file \
                 before editing, so the edit is based on its current content",
                rel.display()
            )),
            _ => Ok(()),
        }
    }

    /// A fresh number for a saved output file.
    pub fn next_run(&self) -> u32 {
        self.runs.fetch_add(1, Ordering::Relaxed) + 1
    }

    pub fn jobs(&self) -> MutexGuard<'_, Jobs> {
        lock(&self.jobs)
    }

    /// Stops every background job; called when the session ends (and on drop, as a backstop).
    pub fn shutdown(&self) {
        self.jobs().stop_all();
    }
}

impl Drop for SessionState {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// A poisoned lock only means a tool panicked mid-update; the maps stay usable.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The session's background jobs.
#[derive(Debug, Default)]
pub struct Jobs {
    pub(super) next: u32,
    pub(super) list: Vec<Entry>,
}

#[derive(Debug)]
pub(super) struct Entry {
    pub(super) id: u32,
    pub(super) command: String,
    pub(super) child: Child,
    pub(super) log: PathBuf,
    /// How much of the log the model has seen.
    pub(super) seen: u64,
    pub(super) status: Option<ExitStatus>,
}
