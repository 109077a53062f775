//! Temp checkouts for the tools' unit tests.

use super::state::SessionState;
use super::tool::ToolContext;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// This test process's parent of the tools' temp directories, removed when the process exits (the
/// tests' directories were left behind, some 150 a run).
fn parent() -> &'static std::path::Path {
    static PARENT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    extern "C" fn remove() {
        if let Some(dir) = PARENT.get() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
    PARENT.get_or_init(|| {
        crate::sys::process::at_exit(remove);
        std::env::temp_dir().join(format!("git-agent-tools-{}", std::process::id()))
    })
}

/// A fresh, canonical temp directory with an empty `.git` directory, and a context rooted there.
pub fn temp_ctx(tag: &str) -> ToolContext {
    static N: AtomicUsize = AtomicUsize::new(0);
    let n = N.fetch_add(1, Ordering::SeqCst);
    let dir = parent().join(format!("{tag}-{n}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join(".git")).unwrap();
    let root: PathBuf = std::fs::canonicalize(dir).unwrap();
    ToolContext {
        session: Arc::new(SessionState::new(
            Some(root.join(".git/agent/output/test")),
            Vec::new(),
        )),
        root,
        run_timeout: Duration::from_secs(30),
        cancel: Arc::new(AtomicBool::new(false)),
        sandbox: Arc::new(crate::safety::sandbox::Sandbox::off()),
    }
}

pub fn put(ctx: &ToolContext, rel: &str, content: impl AsRef<[u8]>) {
    let path = ctx.root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
}
