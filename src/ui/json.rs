//! The `--json` event stream: one JSON object per event on stdout and nothing else (DESIGN section 5). Each
//! line is the event's serialised form ([`Event::to_json`]); this sink only prints it.

use std::io::{self, Write};

use crate::protocol::{Event, Sink};

/// One JSON object per line on stdout.
pub struct JsonSink {
    pub(super) out: io::Stdout,
}

impl Sink for JsonSink {
    fn emit(&mut self, event: &Event) {
        if let Event::Notice { message, .. } = event {
            // Diagnostics go to stderr as without --json; scripts get the event as well.
            eprintln!("warning: {}", crate::protocol::neutralize(message));
        }
        let Some(value) = event.to_json() else {
            return;
        };
        // Model and tool text may hold C1 and bidi controls, which serde_json writes raw; escaped, the line still
        // decodes to the same text but cannot drive the terminal of whoever watches the stream.
        let line = crate::protocol::json_for_terminal(value.to_string());
        let mut out = self.out.lock();
        // A closed stdout (e.g. `| head`) must not kill the session; the work is in git either way.
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    }
}
