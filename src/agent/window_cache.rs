//! The context windows model servers reported, remembered a day for the user (in
//! `$XDG_CACHE_HOME/git-agent/windows.json`, else `~/.cache/git-agent/windows.json`): a server is asked once a
//! day, not before every session, and not again in each repository the user works in (a server's window does
//! not depend on the repository). Nothing here is pushed or read from a repository; without a cache directory
//! every session asks.

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value};

/// How long a context window a server reported is believed (a local server may be restarted with another).
const TTL_SECS: i64 = 24 * 3600;

/// The largest cache file read: an entry is about 100 bytes, and entries older than a day are dropped at
/// every write.
const MAX_BYTES: u64 = 1024 * 1024;

fn cache_file() -> Option<PathBuf> {
    dirs::cache_dir().map(|dir| dir.join("git-agent").join("windows.json"))
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// The entries of the cache file that are under a day old.
fn fresh_entries() -> Map<String, Value> {
    let now = now();
    let Some(path) = cache_file() else {
        return Map::new();
    };
    // Commands may write the cache directory: a link or a FIFO left there is not read.
    let read = crate::sys::fs::read_regular(&path, MAX_BYTES).ok();
    let mut all: Map<String, Value> = read
        .and_then(|text| serde_json::from_slice(&text).ok())
        .unwrap_or_default();
    all.retain(|_, entry| {
        let at = entry.get("at").and_then(Value::as_i64);
        at.is_some_and(|at| (0..TTL_SECS).contains(&(now - at)))
    });
    all
}

/// The context window cached for `key` (an endpoint and a model), if it was asked in the last day:
/// `Some(None)` when the server reported none.
pub fn cached(key: &str) -> Option<Option<u64>> {
    let entry = fresh_entries().remove(key)?;
    Some(entry.get("window").and_then(Value::as_u64))
}

/// Records the window the server reported for `key` (or that it reported none). Best effort: a cache that
/// cannot be written only means asking again next time. Written whole and renamed into place, so a reader
/// never sees half a file; of two sessions writing at once the last one wins.
pub fn remember(key: &str, window: Option<u64>) {
    let Some(path) = cache_file() else {
        return;
    };
    let mut all = fresh_entries();
    all.insert(
        key.to_owned(),
        serde_json::json!({ "window": window, "at": now() }),
    );
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    // Commands may write the cache directory: never through a link planted there.
    let _ = crate::sys::fs::replace_file(&path, Value::Object(all).to_string().as_bytes());
}
