//! Writing JSON lines, for the front-ends that print one JSON object per line (`--json`, Codex's exec
//! JSONL, Claude Code's stream-json): the same escaping and the same answer to a closed stdout in one place.

use std::io::Write;

/// Where a JSON-lines front-end writes: stdout, or a buffer in tests.
pub type Out = Box<dyn Write + Send>;

/// Writes `value` as one line and flushes it. Model and tool text may hold C1 and bidi controls, which
/// serde_json writes raw: escaped, the line still decodes to the same text but cannot drive the terminal of
/// whoever watches the stream. A closed stdout (`| head`, a client that gave up) must not kill the session
/// (the work is in git either way), so write errors are dropped.
pub fn write_line(out: &mut dyn Write, value: &serde_json::Value) {
    let line = crate::protocol::json_for_terminal(value.to_string());
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// A writer the tests keep a handle on, and the JSON lines written to it.
#[cfg(test)]
pub mod testing {
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    pub struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl Write for Buffer {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// Each line written so far, parsed.
    pub fn lines(buffer: &Buffer) -> Vec<serde_json::Value> {
        let text = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}
