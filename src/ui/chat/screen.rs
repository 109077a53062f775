//! The chat's screen: the conversation scrolls in the upper part, a panel at the bottom holds the input
//! rows and one status line.
//!
//! The split is a scroll region (DECSTBM, as `apt` pins its progress bar): output goes only into rows
//! `1..=bottom`, the panel below is drawn with absolute cursor moves. The output position is kept with
//! DECSC/DECRC (`ESC 7` / `ESC 8`): every write restores it, writes, saves it again and puts the cursor back
//! in the input, all in one `write(2)`, so typing while a reply streams never garbles either.
//!
//! DECSC does not keep a terminal's pending-wrap state: text that ends in the last column leaves the cursor
//! there with the next character due on the next row, and after DECRC that character overwrote the last
//! column instead (`r022` showed as `r02`, issue 23, finding 13). So the screen keeps the output column
//! itself ([`Column`]) and, when output ended at the margin, starts the next output with a line break.
//!
//! The output cursor always sits on the region's last row (it starts there, and text only appends), which
//! is what makes the panel easy to resize: growing it scrolls the region up by as many rows first
//! (index, `ESC D`), shrinking it scrolls the region down (SD). Lines scrolled off the region's top go to the
//! terminal's scrollback as usual.

use std::io::{self, Write};

use super::editor::View;

/// Undoes everything the screen set up: scroll region, bracketed paste, hidden cursor, attributes.
pub const RESET: &str = "\x1b[r\x1b[?2004l\x1b[?25h\x1b[0m";

/// The screen; see the module docs.
pub struct Screen {
    out: Box<dyn Write + Send>,
    rows: u16,
    cols: u16,
    color: bool,
    input: View,
    /// Rows given to the input now.
    input_rows: u16,
    status: String,
    /// The last byte of output, to end the line at exit.
    last: u8,
    /// Where the output cursor is in its row.
    column: Column,
    active: bool,
}

impl Screen {
    /// A screen of `rows` x `cols` writing to `out` (stderr); nothing is drawn until [`Screen::start`].
    pub fn new(out: Box<dyn Write + Send>, rows: u16, cols: u16, color: bool) -> Screen {
        Screen {
            out,
            rows,
            cols,
            color,
            input: View::default(),
            input_rows: 1,
            status: String::new(),
            last: b'\n',
            column: Column::default(),
            active: false,
        }
    }

    pub fn cols(&self) -> u16 {
        self.cols
    }

    pub fn color(&self) -> bool {
        self.color
    }

    /// The most rows the input may take: a third of the screen.
    pub fn max_input_rows(&self) -> usize {
        usize::from((self.rows / 3).max(1))
    }

    /// Makes room for the panel at the bottom (the shell's lines move up as far as needed), sets the scroll
    /// region, turns on bracketed paste and draws the panel.
    pub fn start(&mut self) {
        let panel = self.panel();
        let mut buf = format!("\x1b[{};1H", self.rows);
        buf.push_str(&"\n".repeat(usize::from(panel)));
        buf.push_str(&format!("\x1b[{panel}A\x1b7"));
        buf.push_str(&self.region());
        buf.push_str("\x1b[?2004h");
        self.active = true;
        let mut bytes = buf.into_bytes();
        self.draw_panel(&mut bytes);
        self.write(&bytes);
    }

    /// Writes output (already neutralised) into the scrolling part.
    pub fn output(&mut self, text: &[u8]) {
        if text.is_empty() {
            return;
        }
        if let Some(&last) = text.last() {
            self.last = last;
        }
        if !self.active {
            self.write(text);
            return;
        }
        let mut buf = b"\x1b[?25l\x1b8".to_vec();
        if self.column.at_margin(self.cols) && starts_printing(text) {
            // The wrap the terminal would have made, had DECRC kept it.
            buf.extend_from_slice(b"\r\n");
            self.column = Column::default();
        }
        buf.extend_from_slice(text);
        self.column.advance(text, self.cols);
        buf.extend_from_slice(b"\x1b7");
        self.cursor_to_input(&mut buf);
        buf.extend_from_slice(b"\x1b[?25h");
        self.write(&buf);
    }

    /// Writes `text` (neutralised already) as whole lines, starting on a line of its own.
    pub fn lines(&mut self, text: &str) {
        let mut out = String::new();
        if self.last != b'\n' {
            out.push('\n');
        }
        out.push_str(text);
        if !text.ends_with('\n') {
            out.push('\n');
        }
        self.output(out.as_bytes());
    }

    /// Shows `view` as the input, resizing the panel when it needs more or fewer rows.
    pub fn set_input(&mut self, view: View) {
        let wanted = view.rows.len().clamp(1, self.max_input_rows()) as u16;
        self.input = view;
        if !self.active {
            return;
        }
        let mut buf = b"\x1b[?25l".to_vec();
        if wanted != self.input_rows {
            self.resize_panel(wanted, &mut buf);
        }
        self.draw_panel(&mut buf);
        buf.extend_from_slice(b"\x1b[?25h");
        self.write(&buf);
    }

    /// Shows `text` on the status line.
    pub fn set_status(&mut self, text: String) {
        if text == self.status {
            return;
        }
        self.status = text;
        if !self.active || self.status_rows() == 0 {
            return;
        }
        let mut buf = b"\x1b[?25l".to_vec();
        self.draw_status(&mut buf);
        self.cursor_to_input(&mut buf);
        buf.extend_from_slice(b"\x1b[?25h");
        self.write(&buf);
    }

    /// The terminal changed size: the region is set again and output continues on a fresh line at its
    /// bottom. The caller lays the input out for the new width and calls [`Screen::set_input`].
    pub fn resize(&mut self, rows: u16, cols: u16) {
        let old_top = self.bottom() + 1;
        (self.rows, self.cols) = (rows.max(1), cols.max(1));
        self.input_rows = self.input_rows.min(self.max_input_rows() as u16);
        if !self.active {
            return;
        }
        let mut buf = String::from("\x1b[?25l\x1b[r");
        for row in old_top.min(self.bottom() + 1)..=self.rows {
            buf.push_str(&format!("\x1b[{row};1H\x1b[2K"));
        }
        buf.push_str(&self.region());
        buf.push_str(&format!("\x1b[{};1H\x1bD\x1b7", self.bottom()));
        let mut bytes = buf.into_bytes();
        self.draw_panel(&mut bytes);
        bytes.extend_from_slice(b"\x1b[?25h");
        self.write(&bytes);
        self.last = b'\n';
        self.column = Column::default();
    }

    /// Ctrl-L: a clear screen, output starting again at the region's bottom.
    pub fn clear(&mut self) {
        if !self.active {
            return;
        }
        let mut buf = format!(
            "\x1b[r\x1b[2J{}\x1b[{};1H\x1b7",
            self.region(),
            self.bottom()
        );
        buf.insert_str(0, "\x1b[?25l");
        let mut bytes = buf.into_bytes();
        self.draw_panel(&mut bytes);
        bytes.extend_from_slice(b"\x1b[?25h");
        self.write(&bytes);
        self.last = b'\n';
        self.column = Column::default();
    }

    /// Gives the terminal back: the panel cleared, the region and bracketed paste off, the cursor on a fresh
    /// line after the output, so what is printed next follows it.
    pub fn finish(&mut self) {
        if !self.active {
            return;
        }
        self.active = false;
        let mut buf = String::new();
        for row in self.bottom() + 1..=self.rows {
            buf.push_str(&format!("\x1b[{row};1H\x1b[2K"));
        }
        // The region reset homes the cursor, so the output position is restored after it.
        buf.push_str("\x1b[r\x1b8");
        if self.last != b'\n' {
            buf.push_str("\r\n");
        }
        buf.push_str(&RESET["\x1b[r".len()..]);
        self.write(buf.as_bytes());
        self.last = b'\n';
    }

    fn status_rows(&self) -> u16 {
        u16::from(self.rows >= 4)
    }

    fn panel(&self) -> u16 {
        self.input_rows + self.status_rows()
    }

    /// The last row of the scroll region.
    fn bottom(&self) -> u16 {
        self.rows.saturating_sub(self.panel()).max(1)
    }

    fn region(&self) -> String {
        format!("\x1b[1;{}r", self.bottom())
    }

    /// Moves the region's bottom for an input of `wanted` rows, keeping the output cursor on it.
    fn resize_panel(&mut self, wanted: u16, buf: &mut Vec<u8>) {
        let old = self.input_rows;
        self.input_rows = wanted;
        if wanted > old {
            let d = wanted - old;
            buf.extend_from_slice(b"\x1b8");
            buf.extend(std::iter::repeat_n(b"\x1bD".as_slice(), usize::from(d)).flatten());
            buf.extend_from_slice(format!("\x1b[{d}A\x1b7{}", self.region()).as_bytes());
        } else {
            let d = old - wanted;
            let text = format!("{}\x1b8\x1b[{d}T\x1b[{d}B\x1b7", self.region());
            buf.extend_from_slice(text.as_bytes());
        }
    }

    /// The input rows and the status line, then the cursor in the input.
    fn draw_panel(&self, buf: &mut Vec<u8>) {
        let top = self.bottom() + 1;
        for i in 0..self.input_rows {
            let row = self
                .input
                .rows
                .get(usize::from(i))
                .map_or("", String::as_str);
            buf.extend_from_slice(format!("\x1b[{};1H\x1b[2K{row}", top + i).as_bytes());
        }
        if self.status_rows() > 0 {
            self.draw_status(buf);
        }
        self.cursor_to_input(buf);
    }

    fn draw_status(&self, buf: &mut Vec<u8>) {
        let mut text = String::new();
        // One column short: a character in the last column of the last row may scroll some terminals.
        super::editor::push_clipped(&mut text, &self.status, usize::from(self.cols) - 1);
        let text = if self.color {
            format!("\x1b[2m{text}\x1b[0m")
        } else {
            text
        };
        buf.extend_from_slice(format!("\x1b[{};1H\x1b[2K{text}", self.rows).as_bytes());
    }

    fn cursor_to_input(&self, buf: &mut Vec<u8>) {
        let row = self.bottom() + 1 + (self.input.cursor_row as u16).min(self.input_rows - 1);
        let col = self.input.cursor_col.min(usize::from(self.cols) - 1) + 1;
        buf.extend_from_slice(format!("\x1b[{row};{col}H").as_bytes());
    }

    fn write(&mut self, bytes: &[u8]) {
        // A terminal that went away is noticed by the key reader; nothing to do here.
        let _ = self.out.write_all(bytes);
        let _ = self.out.flush();
    }
}

/// The output cursor's column, counted in cells as the terminal counts them: `cols` means the row is full and
/// the terminal's next character goes to the next row (its pending-wrap state).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Column(usize);

impl Column {
    fn at_margin(self, cols: u16) -> bool {
        self.0 >= usize::from(cols)
    }

    /// Moves over `text` as a terminal would print it: escape sequences take no room, a line break or a
    /// carriage return goes back to the start, a tab to the next stop (never past the margin), a character
    /// that does not fit wraps to the next row first.
    fn advance(&mut self, text: &[u8], cols: u16) {
        let cols = usize::from(cols.max(1));
        let text = String::from_utf8_lossy(text);
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\n' | '\r' => self.0 = 0,
                '\t' => self.0 = ((self.0 / 8 + 1) * 8).min(cols - 1).max(self.0),
                '\x1b' => skip_escape(&mut chars),
                c => {
                    let width = unicode_width::UnicodeWidthChar::width(c).unwrap_or(0);
                    if width == 0 {
                        continue;
                    }
                    if self.0 + width > cols {
                        self.0 = 0;
                    }
                    self.0 += width;
                }
            }
        }
    }
}

/// Skips the rest of an escape sequence whose `ESC` was just read: CSI (`ESC [` ... a final byte), OSC
/// (`ESC ]` ... BEL or `ESC \`), or a two-byte one.
fn skip_escape(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    match chars.next() {
        Some('[') => {
            for c in chars.by_ref() {
                if ('\x40'..='\x7e').contains(&c) {
                    return;
                }
            }
        }
        Some(']') => {
            while let Some(c) = chars.next() {
                if c == '\x07' || (c == '\x1b' && chars.next_if_eq(&'\\').is_some()) {
                    return;
                }
            }
        }
        _ => {}
    }
}

/// Whether `text` prints a character before any line break or carriage return (escape sequences aside):
/// only then does a lost pending wrap matter.
fn starts_printing(text: &[u8]) -> bool {
    let text = String::from_utf8_lossy(text);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\n' | '\r' => return false,
            '\x1b' => skip_escape(&mut chars),
            _ => return true,
        }
    }
    false
}

/// Writes output into the screen: buffered until `flush`, which [`crate::ui::HumanSink`] calls after each
/// event, so one event is one screen update.
pub struct OutputWriter {
    screen: std::sync::Arc<std::sync::Mutex<Screen>>,
    buf: Vec<u8>,
}

impl OutputWriter {
    pub fn new(screen: std::sync::Arc<std::sync::Mutex<Screen>>) -> OutputWriter {
        OutputWriter {
            screen,
            buf: Vec::new(),
        }
    }
}

impl Write for OutputWriter {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if !self.buf.is_empty() {
            let bytes = std::mem::take(&mut self.buf);
            super::sync::lock(&self.screen).output(&bytes);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// What the screen wrote, shared with the test.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl Captured {
        fn take(&self) -> String {
            String::from_utf8(std::mem::take(&mut *self.0.lock().unwrap())).unwrap()
        }
    }

    fn view(rows: &[&str], cursor: (usize, usize)) -> View {
        View {
            rows: rows.iter().map(|r| r.to_string()).collect(),
            cursor_row: cursor.0,
            cursor_col: cursor.1,
        }
    }

    #[test]
    fn output_goes_into_the_region_and_the_cursor_back_to_the_input() {
        let out = Captured::default();
        let mut s = Screen::new(Box::new(out.clone()), 10, 40, false);
        s.set_status("model · tokens".into());
        s.set_input(view(&["> hi"], (0, 4)));
        s.start();
        let start = out.take();
        // Room made at the bottom, the output cursor saved on row 8, region 1..8, the panel drawn.
        assert!(
            start.starts_with("\x1b[10;1H\n\n\x1b[2A\x1b7\x1b[1;8r\x1b[?2004h"),
            "{start:?}"
        );
        assert!(start.contains("\x1b[9;1H\x1b[2K> hi"), "{start:?}");
        assert!(
            start.contains("\x1b[10;1H\x1b[2Kmodel · tokens"),
            "{start:?}"
        );
        assert!(start.ends_with("\x1b[9;5H"), "{start:?}");
        s.output(b"streamed");
        assert_eq!(out.take(), "\x1b[?25l\x1b8streamed\x1b7\x1b[9;5H\x1b[?25h");
        // A second input row: the region scrolls up one row first and ends a row higher.
        s.set_input(view(&["> a", "  b"], (1, 3)));
        let grown = out.take();
        assert!(
            grown.starts_with("\x1b[?25l\x1b8\x1bD\x1b[1A\x1b7\x1b[1;7r"),
            "{grown:?}"
        );
        assert!(grown.contains("\x1b[8;1H\x1b[2K> a\x1b[9;1H\x1b[2K  b"));
        assert!(grown.contains("\x1b[9;4H"), "{grown:?}");
        s.set_input(view(&["> "], (0, 2)));
        let shrunk = out.take();
        assert!(
            shrunk.starts_with("\x1b[?25l\x1b[1;8r\x1b8\x1b[1T\x1b[1B\x1b7"),
            "{shrunk:?}"
        );
        s.finish();
        let end = out.take();
        assert!(
            end.contains("\x1b[r\x1b8\r\n"),
            "mid-line output ends its line: {end:?}"
        );
        assert!(end.ends_with("\x1b[?2004l\x1b[?25h\x1b[0m"), "{end:?}");
    }

    /// Issue 23, finding 13: output that ends in the last column is followed by a line break before the
    /// next character, since DECRC loses the terminal's pending wrap; not before a line break of its own.
    #[test]
    fn output_that_ends_at_the_margin_continues_on_the_next_row() {
        let out = Captured::default();
        let mut s = Screen::new(Box::new(out.clone()), 10, 10, false);
        s.start();
        out.take();
        s.output(b"0123456789");
        assert!(out.take().starts_with("\x1b[?25l\x1b80123456789\x1b7"));
        s.output(b"ab");
        assert!(out.take().starts_with("\x1b[?25l\x1b8\r\nab\x1b7"));
        // Colour codes take no room; a row filled across two outputs, then a line break of its own.
        s.output(b"\x1b[1mcdefg\x1b[0m");
        out.take();
        s.output(b"hij");
        assert!(out.take().starts_with("\x1b[?25l\x1b8hij\x1b7"));
        s.output(b"\x1b[0m\nnext");
        assert!(out.take().starts_with("\x1b[?25l\x1b8\x1b[0m\nnext\x1b7"));
        // Wide characters take two cells: five fill a row of ten; after `a`, the fifth starts the next row.
        s.output(b"\n");
        s.output("日本語日本".as_bytes());
        out.take();
        s.output(b"x");
        assert!(out.take().starts_with("\x1b[?25l\x1b8\r\nx\x1b7"));
        s.output("\na日本語日本".as_bytes());
        out.take();
        s.output(b"y");
        assert!(out.take().starts_with("\x1b[?25l\x1b8y\x1b7"));
    }
}
