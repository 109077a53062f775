//! Where the agent's own memory goes, for `scripts/bench-fleet.py`: with `GIT_AGENT_FOOTPRINT=<file>` set,
//! each [`mark()`] appends one JSON line with the process's resident memory (anonymous and file-backed), its
//! peak, the allocator's view (bytes in use, bytes it holds from the kernel) and the thread count. The marks
//! sit after each part a session sets up (the async runtime, the HTTP client and its TLS roots, the
//! repository, the checkout, the first reply), so the differences between them attribute the memory. Without
//! the variable a mark costs one cached lookup. Like `GIT_AGENT_CRASH_AT`, the variable is for benchmarks and
//! tests, not users.

use std::io::Write;
use std::sync::OnceLock;

static REPORT: OnceLock<Option<std::path::PathBuf>> = OnceLock::new();

/// Records the memory as it is at `at` (see the module docs).
pub fn mark(at: &str) {
    let Some(path) = REPORT
        .get_or_init(|| std::env::var_os("GIT_AGENT_FOOTPRINT").map(Into::into))
        .as_ref()
    else {
        return;
    };
    let mut line = serde_json::json!({ "at": at });
    if let Ok(status) = std::fs::read_to_string("/proc/self/status") {
        for field in status.lines() {
            let (key, value) = field.split_once(':').unwrap_or_default();
            let name = match key {
                "VmRSS" => "rss_kb",
                "VmHWM" => "hwm_kb",
                "RssAnon" => "anon_kb",
                "RssFile" => "file_kb",
                "Threads" => "threads",
                _ => continue,
            };
            let number = value.split_whitespace().next().unwrap_or("0");
            line[name] = number.parse::<u64>().unwrap_or(0).into();
        }
    }
    if let Some(heap) = crate::sys::alloc::heap_info() {
        line["heap_in_use_kb"] = (heap.in_use / 1024).into();
        line["heap_held_kb"] = (heap.held / 1024).into();
    }
    let text = format!("{line}\n");
    if let Ok(mut file) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = file.write_all(text.as_bytes());
    }
}
