//! Keys from the bytes a terminal sends in raw mode: UTF-8 text, control keys, the escape sequences of
//! arrows and editing keys (CSI and SS3, with xterm's modifier parameters), Alt as an ESC prefix, and
//! bracketed paste (`ESC [200~ … ESC [201~`), which arrives as one [`Key::Paste`] so pasted newlines and tabs
//! are text, not Enter and completion.
//!
//! Bytes may arrive split anywhere (a read can end inside a sequence or a UTF-8 character): the [`Decoder`]
//! keeps the unfinished tail for the next read. A lone ESC cannot be told from the start of a sequence by the
//! bytes alone; the reader waits briefly for more and then calls [`Decoder::flush`] (terminals send a whole
//! sequence in one write, so the wait only happens after a real Esc key).

/// One key press (or a paste).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Key {
    Char(char),
    /// Ctrl with a letter, lowercase: `Ctrl('c')`. Ctrl-J (a line feed) is here too; Enter is [`Key::Enter`].
    Ctrl(char),
    /// Alt (or Esc then the key) with a printable character.
    Alt(char),
    Enter,
    /// Alt-Enter (and Shift-Enter where the terminal reports it): a new line in the input.
    AltEnter,
    Tab,
    BackTab,
    Backspace,
    /// Alt-Backspace: delete the word before the cursor.
    AltBackspace,
    Delete,
    Esc,
    Left,
    Right,
    Up,
    Down,
    Home,
    End,
    WordLeft,
    WordRight,
    Paste(String),
}

const ESC: u8 = 0x1b;
const PASTE_END: &[u8] = b"\x1b[201~";

/// Turns bytes into keys; see the module docs.
#[derive(Debug, Default)]
pub struct Decoder {
    /// Bytes of an unfinished sequence or character.
    pending: Vec<u8>,
    /// Inside a bracketed paste: what was pasted so far.
    paste: Option<Vec<u8>>,
}

/// What one attempt to read a key at the start of the buffer gave.
enum Step {
    /// A key (or nothing, for ignored bytes) and how many bytes it took.
    Key(Option<Key>, usize),
    /// The start of a bracketed paste, and its length.
    PasteStart(usize),
    /// More bytes are needed.
    Incomplete,
}

impl Decoder {
    pub fn new() -> Decoder {
        Decoder::default()
    }

    /// Feeds the bytes of one read and returns the keys they complete.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<Key> {
        let mut buf = std::mem::take(&mut self.pending);
        buf.extend_from_slice(bytes);
        let mut keys = Vec::new();
        let mut at = 0;
        while at < buf.len() {
            if let Some(paste) = &mut self.paste {
                let rest = &buf[at..];
                match find(rest, PASTE_END) {
                    Some(end) => {
                        paste.extend_from_slice(&rest[..end]);
                        keys.push(Key::Paste(paste_text(paste)));
                        self.paste = None;
                        at += end + PASTE_END.len();
                    }
                    None => {
                        // Keep a tail that may be the start of the terminator for the next read.
                        let keep = partial_suffix(rest, PASTE_END);
                        paste.extend_from_slice(&rest[..rest.len() - keep]);
                        self.pending = rest[rest.len() - keep..].to_vec();
                        return keys;
                    }
                }
                continue;
            }
            match step(&buf[at..]) {
                Step::Key(key, used) => {
                    keys.extend(key);
                    at += used;
                }
                Step::PasteStart(used) => {
                    self.paste = Some(Vec::new());
                    at += used;
                }
                Step::Incomplete => {
                    self.pending = buf[at..].to_vec();
                    break;
                }
            }
        }
        keys
    }

    /// True when the last bytes may be the start of an escape sequence (or an unfinished character): the
    /// reader should wait a moment for the rest, then [`Decoder::flush`].
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty() && self.paste.is_none()
    }

    /// No more bytes came: an ESC on its own is the Esc key; the rest of an unfinished sequence is dropped.
    pub fn flush(&mut self) -> Vec<Key> {
        let pending = std::mem::take(&mut self.pending);
        match pending.first() {
            None => Vec::new(),
            Some(&ESC) if pending.len() == 1 => vec![Key::Esc],
            Some(&ESC) => {
                // ESC ESC ... : the first is a key, the rest starts afresh.
                let mut keys = vec![Key::Esc];
                keys.extend(self.feed(&pending[1..]));
                keys.extend(self.flush());
                keys
            }
            Some(_) => vec![Key::Char(char::REPLACEMENT_CHARACTER)],
        }
    }
}

/// Reads one key at the start of `b` (not empty).
fn step(b: &[u8]) -> Step {
    match b[0] {
        ESC => escape(b),
        b'\r' => Step::Key(Some(Key::Enter), 1),
        b'\n' => Step::Key(Some(Key::Ctrl('j')), 1),
        b'\t' => Step::Key(Some(Key::Tab), 1),
        0x7f | 0x08 => Step::Key(Some(Key::Backspace), 1),
        c @ 0x01..=0x1a => Step::Key(Some(Key::Ctrl(char::from(b'a' + c - 1))), 1),
        0x00 | 0x1c..=0x1f => Step::Key(None, 1),
        _ => match utf8(b) {
            Some((c, used)) => Step::Key(Some(Key::Char(c)), used),
            None => Step::Incomplete,
        },
    }
}

/// ESC and what follows it.
fn escape(b: &[u8]) -> Step {
    let Some(&next) = b.get(1) else {
        return Step::Incomplete;
    };
    match next {
        b'[' => csi(b),
        b'O' => match b.get(2) {
            None => Step::Incomplete,
            Some(&f) => Step::Key(ss3(f), 3),
        },
        b'\r' | b'\n' => Step::Key(Some(Key::AltEnter), 2),
        0x7f | 0x08 => Step::Key(Some(Key::AltBackspace), 2),
        // Esc pressed twice: the first is a key, the second starts over.
        ESC => Step::Key(Some(Key::Esc), 1),
        c if c < 0x20 => Step::Key(Some(Key::Esc), 1),
        _ => match utf8(&b[1..]) {
            Some((c, used)) => Step::Key(Some(Key::Alt(c)), 1 + used),
            None => Step::Incomplete,
        },
    }
}

/// `ESC [ params final`.
fn csi(b: &[u8]) -> Step {
    let body = &b[2..];
    let Some(end) = body.iter().position(|c| (0x40..=0x7e).contains(c)) else {
        // A sequence longer than any real key is garbage, not an unfinished key.
        return if body.len() > 16 {
            Step::Key(None, b.len())
        } else {
            Step::Incomplete
        };
    };
    let params = std::str::from_utf8(&body[..end]).unwrap_or_default();
    let used = 2 + end + 1;
    let mut fields = params.split(';');
    let first = fields.next().unwrap_or_default();
    let modifier: u32 = fields.next().and_then(|m| m.parse().ok()).unwrap_or(1);
    // xterm: 1 + (shift 1, alt 2, ctrl 4).
    let word = modifier > 1 && (modifier - 1) & 6 != 0;
    let key = match body[end] {
        b'A' => Some(Key::Up),
        b'B' => Some(Key::Down),
        b'C' if word => Some(Key::WordRight),
        b'D' if word => Some(Key::WordLeft),
        b'C' => Some(Key::Right),
        b'D' => Some(Key::Left),
        b'H' => Some(Key::Home),
        b'F' => Some(Key::End),
        b'Z' => Some(Key::BackTab),
        // CSI-u terminals report Shift/Alt-Enter as 13 with a modifier.
        b'u' if first == "13" && modifier > 1 => Some(Key::AltEnter),
        b'~' => match first {
            "200" => return Step::PasteStart(used),
            "1" | "7" => Some(Key::Home),
            "4" | "8" => Some(Key::End),
            "3" => Some(Key::Delete),
            _ => None,
        },
        _ => None,
    };
    Step::Key(key, used)
}

fn ss3(f: u8) -> Option<Key> {
    match f {
        b'A' => Some(Key::Up),
        b'B' => Some(Key::Down),
        b'C' => Some(Key::Right),
        b'D' => Some(Key::Left),
        b'H' => Some(Key::Home),
        b'F' => Some(Key::End),
        _ => None,
    }
}

/// The UTF-8 character at the start of `b` and its length; `None` when it is unfinished. An invalid byte
/// is U+FFFD.
fn utf8(b: &[u8]) -> Option<(char, usize)> {
    let len = match b[0] {
        0x00..=0x7f => 1,
        0xc2..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf4 => 4,
        _ => return Some((char::REPLACEMENT_CHARACTER, 1)),
    };
    if b.len() < len {
        // Unfinished, unless a byte that cannot continue it already came.
        if b[1..].iter().any(|c| c & 0xc0 != 0x80) {
            return Some((char::REPLACEMENT_CHARACTER, 1));
        }
        return None;
    }
    match std::str::from_utf8(&b[..len]) {
        Ok(s) => s.chars().next().map(|c| (c, len)),
        Err(_) => Some((char::REPLACEMENT_CHARACTER, 1)),
    }
}

/// Pasted bytes as text: invalid UTF-8 replaced, CR LF and CR as LF (terminals paste lines with CR).
fn paste_text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .replace("\r\n", "\n")
        .replace('\r', "\n")
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// How many bytes at the end of `hay` are a proper prefix of `needle`.
fn partial_suffix(hay: &[u8], needle: &[u8]) -> usize {
    (1..needle.len())
        .rev()
        .find(|&n| hay.len() >= n && hay[hay.len() - n..] == needle[..n])
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::random_input;

    fn keys(bytes: &[u8]) -> Vec<Key> {
        let mut d = Decoder::new();
        let mut keys = d.feed(bytes);
        keys.extend(d.flush());
        keys
    }

    /// The same keys whichever byte the input is cut at.
    fn same_at_every_split(bytes: &[u8]) -> Vec<Key> {
        let whole = keys(bytes);
        for cut in 1..bytes.len() {
            let mut d = Decoder::new();
            let mut got = d.feed(&bytes[..cut]);
            got.extend(d.feed(&bytes[cut..]));
            got.extend(d.flush());
            assert_eq!(got, whole, "cut at {cut} of {bytes:?}");
        }
        whole
    }

    #[test]
    fn text_controls_and_sequences() {
        let got = same_at_every_split(
            "aé中🙂\r\x01\x03\x7f\t\x1b[A\x1b[1;5C\x1bOD\x1b[3~\x1b[Z".as_bytes(),
        );
        assert_eq!(
            got,
            [
                Key::Char('a'),
                Key::Char('é'),
                Key::Char('中'),
                Key::Char('🙂'),
                Key::Enter,
                Key::Ctrl('a'),
                Key::Ctrl('c'),
                Key::Backspace,
                Key::Tab,
                Key::Up,
                Key::WordRight,
                Key::Left,
                Key::Delete,
                Key::BackTab,
            ]
        );
    }

    #[test]
    fn alt_keys_and_lone_escapes() {
        assert_eq!(
            same_at_every_split(b"\x1bb\x1b\r\x1b\x7f"),
            [Key::Alt('b'), Key::AltEnter, Key::AltBackspace]
        );
        // Esc Esc (the cancel chord), and an Esc at the very end that only the flush can tell.
        assert_eq!(keys(b"\x1b\x1b"), [Key::Esc, Key::Esc]);
        let mut d = Decoder::new();
        assert!(d.feed(b"\x1b").is_empty());
        assert!(d.has_pending());
        assert_eq!(d.flush(), [Key::Esc]);
        assert!(!d.has_pending());
    }

    #[test]
    fn a_paste_is_one_key_with_its_newlines_and_tabs() {
        let got = same_at_every_split(b"x\x1b[200~line 1\r\n\tline 2\rend\x1b[201~y");
        assert_eq!(
            got,
            [
                Key::Char('x'),
                Key::Paste("line 1\n\tline 2\nend".into()),
                Key::Char('y')
            ]
        );
        // A big paste across many reads stays whole.
        let text = "0123456789".repeat(5000);
        let mut d = Decoder::new();
        let mut got = d.feed(b"\x1b[200~");
        for chunk in text.as_bytes().chunks(4096) {
            got.extend(d.feed(chunk));
        }
        got.extend(d.feed(b"\x1b[201~"));
        assert_eq!(got, [Key::Paste(text)]);
    }

    #[test]
    fn invalid_bytes_become_replacement_characters() {
        assert_eq!(
            keys(b"\xff\xc3("),
            [
                Key::Char(char::REPLACEMENT_CHARACTER),
                Key::Char(char::REPLACEMENT_CHARACTER),
                Key::Char('(')
            ]
        );
    }

    /// Property (issue 24, item 7): any mix of what terminals send (escape sequences cut anywhere, pastes
    /// left open, bytes that are not UTF-8) decodes without a panic to the same keys at every split.
    #[test]
    fn random_input_decodes_the_same_at_every_split() {
        const PIECES: &[&[u8]] = &[
            b"\x1b",
            b"[",
            b"O",
            b"A",
            b"1",
            b";",
            b"5",
            b"~",
            b"\x1b[200~",
            b"\x1b[201~",
            b"a",
            "\u{e9}".as_bytes(),
            b"\r",
            b"\n",
            b"\x7f",
            b"\x03",
            b"\x04",
            b"\xff",
            b"\xe2\x82",
        ];
        let mut state = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..500 {
            same_at_every_split(&random_input(&mut state, PIECES, 12));
        }
    }
}
