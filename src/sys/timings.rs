//! Phase timings (issue 29): so that a figure taken on any machine can be explained, `GIT_AGENT_TIMINGS=1`
//! writes one JSON line per phase of the process to stderr, and `GIT_AGENT_TIMINGS=<file>` appends them to
//! that file instead (a benchmark's runs then stay apart from what the agent prints). Each line names the
//! phase, its end in milliseconds since the process started (monotonic), how long the phase took where it
//! has a beginning, the process id (one file can collect several processes) and what tells the phase apart
//! (the tool's name, the request's number and size, a pooled checkout):
//!
//! ```text
//! {"phase":"tool","ms":41.07,"took_ms":3.91,"pid":4711,"name":"run","n":2}
//! ```
//!
//! Phases: `start`, `config`, `runtime`, `store open`, `step 0` (and within it `untracked`, the walk for
//! untracked files: directories `read` and `kept` from the last walk), `checkout` (and within a pooled one
//! `reset index`: the new index built `from` the `changes` between two trees or from the whole `tree`; a
//! discard that pools its checkout has one too), `isolation`, `request` (each model request as it is sent),
//! `reply` (each reply read), `tool`, `step commit`, `fold`, `exit`; with MCP servers, `mcp wait` (the first
//! request's wait for them to start) and `mcp shutdown`. Off, a phase costs one read of an initialised
//! `OnceLock`: nothing is formatted and the clock is not read.
//! Like `GIT_AGENT_FOOTPRINT`, the variable is for benchmarks and for explaining figures, not for users.

use std::io::Write;
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

/// The switch, read once.
const VARIABLE: &str = "GIT_AGENT_TIMINGS";

/// Where the lines go and the instant they count from.
struct Recorder {
    start: Instant,
    pid: u32,
    out: Mutex<Out>,
}

enum Out {
    Stderr,
    File(std::fs::File),
}

static RECORDER: OnceLock<Option<Recorder>> = OnceLock::new();

/// A value that tells a phase apart (the detail fields of a line).
#[derive(Debug, Clone, Copy)]
pub enum Detail<'a> {
    Text(&'a str),
    Count(u64),
    Flag(bool),
}

/// Reads the switch and fixes the instant phases count from: called first thing in `main`, so that `ms`
/// is time since the process started running its own code. Later calls change nothing.
pub fn init() {
    recorder();
}

/// The beginning of a phase that [`end()`] closes: `None` (and no clock read) when timings are off.
pub fn begin() -> Option<Instant> {
    recorder().map(|_| Instant::now())
}

/// Records that `phase` happened now.
pub fn mark(phase: &str, details: &[(&str, Detail<'_>)]) {
    if let Some(recorder) = recorder() {
        recorder.write(phase, None, details);
    }
}

/// Records that `phase`, begun at `begun` (from [`begin()`]), ended now.
pub fn end(phase: &str, begun: Option<Instant>, details: &[(&str, Detail<'_>)]) {
    if let (Some(recorder), Some(begun)) = (recorder(), begun) {
        recorder.write(phase, Some(begun), details);
    }
}

fn recorder() -> Option<&'static Recorder> {
    RECORDER.get_or_init(open).as_ref()
}

/// The recorder the environment asks for: `1` is stderr, any other non-empty value other than `0` a file.
/// A file that cannot be opened turns timings off with one warning: they must never fail a session.
fn open() -> Option<Recorder> {
    let value = std::env::var_os(VARIABLE)?;
    let out = if value == "1" {
        Out::Stderr
    } else if value.is_empty() || value == "0" {
        return None;
    } else {
        let opened = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&value);
        match opened {
            Ok(file) => Out::File(file),
            Err(err) => {
                let path = std::path::Path::new(&value).display();
                eprintln!("warning: {VARIABLE}: cannot open {path} ({err}): no timings recorded");
                return None;
            }
        }
    };
    Some(Recorder {
        start: Instant::now(),
        pid: std::process::id(),
        out: Mutex::new(out),
    })
}

impl Recorder {
    fn write(&self, phase: &str, begun: Option<Instant>, details: &[(&str, Detail<'_>)]) {
        let now = Instant::now();
        let line = self.line(phase, now, begun, details);
        let Ok(mut out) = self.out.lock() else {
            return;
        };
        // One write per line: an appended file keeps lines of concurrent processes whole.
        let _ = match &mut *out {
            Out::Stderr => std::io::stderr().lock().write_all(line.as_bytes()),
            Out::File(file) => file.write_all(line.as_bytes()),
        };
    }

    fn line(
        &self,
        phase: &str,
        now: Instant,
        begun: Option<Instant>,
        details: &[(&str, Detail<'_>)],
    ) -> String {
        // Written by hand rather than through a map, so that every line reads phase first.
        let millis = |from: Instant, to: Instant| {
            let ms = to.saturating_duration_since(from).as_secs_f64() * 1000.0;
            serde_json::Value::from((ms * 1000.0).round() / 1000.0)
        };
        let mut line = format!("{{\"phase\":{}", serde_json::Value::from(phase));
        line.push_str(&format!(",\"ms\":{}", millis(self.start, now)));
        if let Some(begun) = begun {
            line.push_str(&format!(",\"took_ms\":{}", millis(begun, now)));
        }
        line.push_str(&format!(",\"pid\":{}", self.pid));
        for (key, detail) in details {
            let value = match *detail {
                Detail::Text(text) => serde_json::Value::from(text),
                Detail::Count(n) => n.into(),
                Detail::Flag(flag) => flag.into(),
            };
            line.push_str(&format!(",{}:{value}", serde_json::Value::from(*key)));
        }
        line.push_str("}\n");
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_is_one_json_object_with_its_details() {
        let start = Instant::now();
        let recorder = Recorder {
            start,
            pid: 7,
            out: Mutex::new(Out::Stderr),
        };
        let later = start + std::time::Duration::from_micros(2500);
        let line = recorder.line(
            "tool",
            later,
            Some(start),
            &[("name", Detail::Text("run")), ("n", Detail::Count(2))],
        );
        assert!(line.ends_with('\n') && line.matches('\n').count() == 1);
        assert!(
            line.starts_with("{\"phase\":\"tool\",\"ms\":2.5,"),
            "{line}"
        );
        let value: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(value["phase"], "tool");
        assert_eq!(value["ms"], 2.5);
        assert_eq!(value["took_ms"], 2.5);
        assert_eq!(value["pid"], 7);
        assert_eq!(value["name"], "run");
        assert_eq!(value["n"], 2);
    }
}
