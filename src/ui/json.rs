//! The `--json` event stream: one JSON object per event on stdout and nothing else (DESIGN section 5). Each
//! line is the event's serialised form ([`Event::to_json`]); this sink only prints it.

use std::io;

use crate::protocol::{Event, Sink};

/// One JSON object per line on stdout.
pub struct JsonSink {
    pub(super) out: io::Stdout,
}

impl Sink for JsonSink {
    fn emit(&mut self, event: &Event) {
        match event {
            // Diagnostics go to stderr as without --json; scripts get a notice as an event as well.
            Event::Notice { message, .. } | Event::Warning { message } => {
                eprintln!("warning: {}", crate::protocol::neutralize(message));
            }
            _ => {}
        }
        let Some(value) = event.to_json() else {
            return;
        };
        super::jsonl::write_line(&mut self.out.lock(), &value);
    }
}
