//! A byte-level Server-Sent-Events decoder, free of any HTTP so it can be tested with raw byte chunks. The
//! model clients read their streamed replies with it, and the MCP client its Streamable HTTP answers.
//!
//! Network reads split the stream at arbitrary bytes: inside a UTF-8 character, between the `\r` and `\n` of
//! a line ending, in the middle of a field name. The decoder therefore keeps the bytes of an unfinished line
//! as bytes and decodes UTF-8 only once the whole line is in hand, so valid input never turns into U+FFFD.
//! Each byte is scanned once, which keeps a multi-megabyte event linear rather than quadratic.
//!
//! It follows the WHATWG event-stream rules that matter to model APIs and MCP: `\n`, `\r\n` and lone `\r` end a
//! line; a line starting with `:` is a comment; one space after the colon is dropped; `data` lines are
//! joined with `\n`; a blank line dispatches the event; `id`, `retry` and unknown fields are ignored.

/// One dispatched event.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, if the event had one.
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub data: String,
}

/// Turns a byte stream into [`SseEvent`]s; feed it with [`SseDecoder::push`], end with [`SseDecoder::finish`].
#[derive(Debug, Default)]
pub struct SseDecoder {
    /// Bytes of the line being read, kept raw until its end is seen.
    line: Vec<u8>,
    /// The previous push ended on `\r`, so a leading `\n` in the next one belongs to that line ending.
    skip_lf: bool,
    /// No line has been completed yet, so a UTF-8 byte order mark may still need stripping.
    at_start: bool,
    pending: PendingEvent,
}

/// The fields of the event being assembled.
#[derive(Debug, Default)]
struct PendingEvent {
    event: Option<String>,
    data: String,
    /// A `data` field was seen; `data:` with an empty value still makes an event.
    has_data: bool,
}

const BOM: &[u8] = b"\xEF\xBB\xBF";

impl SseDecoder {
    pub fn new() -> Self {
        SseDecoder {
            at_start: true,
            ..SseDecoder::default()
        }
    }

    /// Feeds the next bytes of the stream and returns the events they complete, in order.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<SseEvent> {
        let mut events = Vec::new();
        let mut rest = bytes;
        if self.skip_lf && !rest.is_empty() {
            self.skip_lf = false;
            if rest[0] == b'\n' {
                rest = &rest[1..];
            }
        }
        while let Some(end) = rest.iter().position(|&b| b == b'\n' || b == b'\r') {
            let completed = if self.line.is_empty() {
                self.take_line(&rest[..end])
            } else {
                self.line.extend_from_slice(&rest[..end]);
                let line = std::mem::take(&mut self.line);
                let event = self.take_line(&line);
                // Reuse the allocation: a stream of large events would otherwise grow a new buffer each time.
                self.line = line;
                self.line.clear();
                event
            };
            events.extend(completed);
            let terminator = rest[end];
            rest = &rest[end + 1..];
            if terminator == b'\r' {
                match rest.first() {
                    Some(b'\n') => rest = &rest[1..],
                    Some(_) => {}
                    None => self.skip_lf = true,
                }
            }
        }
        self.line.extend_from_slice(rest);
        events
    }

    /// Ends the stream and returns the event still being assembled, if any.
    ///
    /// The standard drops an event that is not followed by a blank line, but servers that close the
    /// connection right after their last `data:` line are common, and dropping it would lose the final
    /// chunk (often the one carrying `finish_reason` or `[DONE]`). A stream cut in the middle of a line yields
    /// that partial line, which the consumer will find malformed. The decoder is reset and may be reused.
    pub fn finish(&mut self) -> Option<SseEvent> {
        let line = std::mem::take(&mut self.line);
        let from_line = if line.is_empty() {
            None
        } else {
            self.take_line(&line)
        };
        let rest = self.pending.dispatch();
        *self = SseDecoder::new();
        from_line.or(rest)
    }

    /// Processes one complete line (without its terminator).
    fn take_line(&mut self, line: &[u8]) -> Option<SseEvent> {
        let line = if std::mem::take(&mut self.at_start) {
            line.strip_prefix(BOM).unwrap_or(line)
        } else {
            line
        };
        if line.is_empty() {
            return self.pending.dispatch();
        }
        self.pending.field(line);
        None
    }
}

impl PendingEvent {
    fn field(&mut self, line: &[u8]) {
        let (name, value) = match line.iter().position(|&b| b == b':') {
            Some(0) => return, // a comment, e.g. `: heartbeat` keep-alives
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &line[..0]),
        };
        match name {
            b"data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.has_data = true;
                self.data.push_str(&decode(value));
            }
            b"event" => self.event = Some(decode(value).into_owned()),
            _ => {}
        }
    }

    /// Hands out the assembled event, if it had any data, and starts a new one.
    fn dispatch(&mut self) -> Option<SseEvent> {
        let pending = std::mem::take(self);
        pending.has_data.then_some(SseEvent {
            event: pending.event,
            data: pending.data,
        })
    }
}

/// Decodes a complete field value; only bytes that are invalid UTF-8 on their own become U+FFFD.
fn decode(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::random_input;

    fn decode_all(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut decoder = SseDecoder::new();
        let mut events = Vec::new();
        for chunk in chunks {
            events.extend(decoder.push(chunk));
        }
        events.extend(decoder.finish());
        events
    }

    fn data(text: &str) -> SseEvent {
        SseEvent {
            event: None,
            data: text.to_string(),
        }
    }

    /// A recorded-style stream mixing every feature the decoder must handle.
    const STREAM: &str = "\u{FEFF}: heartbeat\r\n\
        data: {\"a\":\"héllo 世界 🦀\"}\r\n\r\n\
        event: message\ndata:no-space\ndata:  two spaces\nid: 7\nretry: 100\nfoo: bar\n\n\
        data: cr only\r\rdata\n\n\
        data: [DONE]\n\n";

    fn expected() -> Vec<SseEvent> {
        vec![
            data("{\"a\":\"héllo 世界 🦀\"}"),
            SseEvent {
                event: Some("message".into()),
                data: "no-space\n two spaces".into(),
            },
            data("cr only"),
            data(""),
            data("[DONE]"),
        ]
    }

    #[test]
    fn whole_stream() {
        assert_eq!(decode_all(&[STREAM.as_bytes()]), expected());
    }

    #[test]
    fn split_at_every_byte_boundary() {
        let bytes = STREAM.as_bytes();
        for split in 0..=bytes.len() {
            let (a, b) = bytes.split_at(split);
            assert_eq!(decode_all(&[a, b]), expected(), "split at {split}");
        }
    }

    #[test]
    fn one_byte_at_a_time() {
        let chunks: Vec<&[u8]> = STREAM.as_bytes().chunks(1).collect();
        assert_eq!(decode_all(&chunks), expected());
    }

    #[test]
    fn crlf_split_between_cr_and_lf_is_one_line_ending() {
        let events = decode_all(&[b"data: a\r", b"\n", b"data: b\r", b"\n\r", b"\n"]);
        assert_eq!(events, vec![data("a\nb")]);
    }

    #[test]
    fn cjk_and_emoji_split_inside_a_character() {
        let text = "data: 漢字🦀\n\n".as_bytes();
        let crab = text.len() - 4 - 2; // the four bytes of the emoji precede "\n\n"
        for cut in [7, 8, crab + 1, crab + 2, crab + 3] {
            let events = decode_all(&[&text[..cut], &text[cut..]]);
            assert_eq!(events, vec![data("漢字🦀")], "cut at {cut}");
        }
    }

    #[test]
    fn several_events_in_one_read_and_comments_ignored() {
        let events = decode_all(&[b": ping\n\ndata: 1\n\n:x\ndata: 2\n\ndata: 3\n\n"]);
        assert_eq!(events, vec![data("1"), data("2"), data("3")]);
    }

    #[test]
    fn event_without_data_is_not_dispatched() {
        assert_eq!(decode_all(&[b"event: ping\n\n"]), vec![]);
    }

    #[test]
    fn finish_returns_unterminated_last_event() {
        assert_eq!(decode_all(&[b"data: [DONE]"]), vec![data("[DONE]")]);
        assert_eq!(decode_all(&[b"data: x\n"]), vec![data("x")]);
    }

    #[test]
    fn invalid_utf8_is_replaced_not_dropped() {
        assert_eq!(decode_all(&[b"data: a\xFFb\n\n"]), vec![data("a\u{FFFD}b")]);
    }

    #[test]
    fn huge_event_in_small_reads_stays_linear() {
        let body = "x".repeat(4 << 20);
        let stream = format!("data: {body}\n\n");
        let chunks: Vec<&[u8]> = stream.as_bytes().chunks(1024).collect();
        let events = decode_all(&chunks);
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].data.len(), body.len());
    }

    /// Property (issue 24, item 7): any stream made of SSE's pieces (fields, comments, every line ending,
    /// multi-byte characters) decodes to the same events however the network cuts it.
    #[test]
    fn random_streams_decode_the_same_however_cut() {
        const PIECES: &[&[u8]] = &[
            b"data: ",
            b"data:",
            b"event: ",
            b"id: 7",
            b"retry: 1",
            b": comment",
            b"x",
            b"{\"a\":1}",
            b"\n",
            b"\r\n",
            b"\r",
            b"\n\n",
            b" ",
            b":",
            "\u{e9}\u{2603}".as_bytes(),
            b"\xff",
        ];
        let mut state = 0x2545_F491_4F6C_DD1D;
        for _ in 0..500 {
            let bytes = random_input(&mut state, PIECES, 16);
            let whole = decode_all(&[&bytes]);
            for cut in 1..bytes.len() {
                assert_eq!(
                    decode_all(&[&bytes[..cut], &bytes[cut..]]),
                    whole,
                    "cut at {cut} of {bytes:?}"
                );
            }
            let singles: Vec<&[u8]> = bytes.chunks(1).collect();
            assert_eq!(decode_all(&singles), whole, "byte by byte: {bytes:?}");
        }
    }
}
