//! The line editor of the chat prompt: a text buffer with a cursor, the usual Emacs keys, history, multi-line
//! input (Alt-Enter, Ctrl-J, or a trailing `\` before Enter), pastes inserted whole, and Tab completion of
//! slash commands. It knows nothing of the terminal: [`Editor::handle`] takes a [`Key`] and says what the
//! front-end should do, [`Editor::view`] lays the text out in rows of a given width (wide characters take
//! two columns, combining marks none) with the cursor's row and column.

use unicode_width::UnicodeWidthChar;

use super::keys::Key;

/// Columns a tab takes in the input (it stays a tab in the text).
const TAB_WIDTH: usize = 4;

/// What a key asks of the front-end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// The text changed or the cursor moved: redraw.
    Redraw,
    /// Enter: the text (taken out of the editor, added to its history).
    Submit(String),
    /// Ctrl-C.
    Interrupt,
    /// Ctrl-D on an empty line.
    Eof,
    /// Esc.
    Esc,
    /// Ctrl-L: clear the screen.
    Clear,
    /// Ctrl-O: show the last reasoning in full.
    Expand,
    /// Ctrl-Z: stop the job (the shell's `fg` continues it).
    Suspend,
    /// Tab found several commands and nothing more to complete: list them.
    Candidates(Vec<String>),
}

/// The input being edited; see the module docs.
#[derive(Debug, Default)]
pub struct Editor {
    text: String,
    /// A byte offset into `text`, always on a character boundary.
    cursor: usize,
    history: Vec<String>,
    /// The history entry shown, while browsing it with Up and Down.
    browsing: Option<usize>,
    /// What was being typed before browsing began.
    stash: String,
    /// The last text cut with Ctrl-K, Ctrl-U or Ctrl-W, for Ctrl-Y.
    killed: String,
    /// Names Tab completes after a leading `/`.
    commands: Vec<String>,
}

/// The input laid out for the screen.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct View {
    /// Display rows, each at most the width given to [`Editor::view`].
    pub rows: Vec<String>,
    pub cursor_row: usize,
    pub cursor_col: usize,
}

impl Editor {
    /// An editor with earlier `history` (oldest first) that completes `commands` (without the `/`).
    pub fn new(history: Vec<String>, commands: Vec<String>) -> Editor {
        Editor {
            history,
            commands,
            ..Editor::default()
        }
    }

    #[cfg(test)]
    pub fn text(&self) -> &str {
        &self.text
    }

    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
    }

    /// Replaces the text, cursor at the end (text that steered a cancelled turn comes back to be sent).
    pub fn set_text(&mut self, text: &str) {
        self.text = text.to_owned();
        self.cursor = self.text.len();
        self.browsing = None;
    }

    pub fn clear(&mut self) {
        self.set_text("");
    }

    /// Adds an entry to the history (not twice in a row, never a blank one).
    pub fn remember(&mut self, entry: &str) {
        if !entry.trim().is_empty() && self.history.last().map(String::as_str) != Some(entry) {
            self.history.push(entry.to_owned());
        }
    }

    pub fn handle(&mut self, key: Key) -> Action {
        match key {
            Key::Char(c) => self.insert(&c.to_string()),
            Key::Paste(text) => self.insert(&text),
            Key::Enter => return self.enter(),
            Key::AltEnter | Key::Ctrl('j') => self.insert("\n"),
            Key::Tab => return self.complete(),
            Key::Ctrl('c') => return Action::Interrupt,
            Key::Ctrl('d') if self.text.is_empty() => return Action::Eof,
            Key::Ctrl('d') | Key::Delete => self.delete_forward(),
            Key::Esc => return Action::Esc,
            Key::Ctrl('l') => return Action::Clear,
            Key::Ctrl('o') => return Action::Expand,
            Key::Ctrl('z') => return Action::Suspend,
            Key::Backspace => self.delete_back(),
            Key::Left | Key::Ctrl('b') => self.cursor = self.prev_boundary(self.cursor),
            Key::Right | Key::Ctrl('f') => self.cursor = self.next_boundary(self.cursor),
            Key::WordLeft | Key::Alt('b') => self.cursor = self.word_start(),
            Key::WordRight | Key::Alt('f') => self.cursor = self.word_end(),
            Key::Home | Key::Ctrl('a') => self.cursor = self.line_start(),
            Key::End | Key::Ctrl('e') => self.cursor = self.line_end(),
            Key::Up | Key::Ctrl('p') => self.up(),
            Key::Down | Key::Ctrl('n') => self.down(),
            Key::Ctrl('k') => self.kill(self.cursor, self.line_end_or_newline()),
            Key::Ctrl('u') => self.kill(self.line_start(), self.cursor),
            Key::Ctrl('w') | Key::AltBackspace => self.kill(self.word_start(), self.cursor),
            Key::Alt('d') => self.kill(self.cursor, self.word_end()),
            Key::Ctrl('y') => {
                let killed = self.killed.clone();
                self.insert(&killed);
            }
            Key::BackTab | Key::Ctrl(_) | Key::Alt(_) => {}
        }
        Action::Redraw
    }

    /// Lays the text out after `prompt` in rows of `width` columns; continuation rows (after a newline or a
    /// wrap) are indented as wide as the prompt. An empty text shows `placeholder` instead (the cursor stays
    /// after the prompt). At most `max_rows` rows are shown, those around the cursor.
    pub fn view(&self, prompt: &str, placeholder: &str, width: usize, max_rows: usize) -> View {
        let width = width.max(prompt_width(prompt) + 2);
        let indent = prompt_width(prompt);
        if self.text.is_empty() {
            let mut row = prompt.to_owned();
            push_clipped(&mut row, placeholder, width - indent);
            return View {
                rows: vec![row],
                cursor_row: 0,
                cursor_col: indent,
            };
        }
        let mut rows = vec![prompt.to_owned()];
        let (mut col, mut cursor) = (indent, None);
        for (at, c) in self.text.char_indices() {
            if at == self.cursor {
                cursor = Some((rows.len() - 1, col));
            }
            if c == '\n' {
                rows.push(" ".repeat(indent));
                col = indent;
                continue;
            }
            let (shown, w) = display(c);
            if col + w > width {
                rows.push(" ".repeat(indent));
                col = indent;
                if at == self.cursor {
                    cursor = Some((rows.len() - 1, col));
                }
            }
            if let Some(row) = rows.last_mut() {
                row.push_str(&shown);
            }
            col += w;
        }
        let (mut cursor_row, mut cursor_col) = cursor.unwrap_or((rows.len() - 1, col));
        if cursor_col >= width {
            // The cursor after a full row sits at the start of the next.
            rows.push(" ".repeat(indent));
            (cursor_row, cursor_col) = (rows.len() - 1, indent);
        }
        let max_rows = max_rows.max(1);
        if rows.len() > max_rows {
            let first = (cursor_row + 1).saturating_sub(max_rows);
            rows = rows.split_off(first);
            rows.truncate(max_rows);
            cursor_row -= first;
        }
        View {
            rows,
            cursor_row,
            cursor_col,
        }
    }

    fn insert(&mut self, s: &str) {
        self.text.insert_str(self.cursor, s);
        self.cursor += s.len();
        self.browsing = None;
    }

    /// Enter submits, except after a trailing `\`, which becomes a line break.
    fn enter(&mut self) -> Action {
        if self.cursor == self.text.len() && self.text.ends_with('\\') {
            self.text.pop();
            self.cursor = self.text.len();
            self.insert("\n");
            return Action::Redraw;
        }
        let text = std::mem::take(&mut self.text);
        self.cursor = 0;
        self.browsing = None;
        self.remember(&text);
        Action::Submit(text)
    }

    /// Completes the slash command being typed: one match is completed (with a space), several extend to
    /// their common prefix or are listed.
    fn complete(&mut self) -> Action {
        let Some(word) = self.text.strip_prefix('/') else {
            self.insert("\t");
            return Action::Redraw;
        };
        if self.cursor != self.text.len() || word.contains(char::is_whitespace) {
            return Action::Redraw;
        }
        let found: Vec<&String> = self
            .commands
            .iter()
            .filter(|c| c.starts_with(word))
            .collect();
        match found.as_slice() {
            [] => Action::Redraw,
            [one] => {
                self.set_text(&format!("/{one} "));
                Action::Redraw
            }
            several => {
                let common = common_prefix(several);
                if common.len() > word.len() {
                    self.set_text(&format!("/{common}"));
                    Action::Redraw
                } else {
                    Action::Candidates(several.iter().map(|c| format!("/{c}")).collect())
                }
            }
        }
    }

    fn delete_back(&mut self) {
        let start = self.prev_boundary(self.cursor);
        self.text.replace_range(start..self.cursor, "");
        self.cursor = start;
    }

    fn delete_forward(&mut self) {
        let end = self.next_boundary(self.cursor);
        self.text.replace_range(self.cursor..end, "");
    }

    fn kill(&mut self, from: usize, to: usize) {
        if from < to {
            self.killed = self.text[from..to].to_owned();
            self.text.replace_range(from..to, "");
            self.cursor = from;
        }
    }

    /// Up moves a line up in multi-line text; from the first line it goes back in the history.
    fn up(&mut self) {
        let start = self.line_start();
        if start > 0 {
            let col = self.text[start..self.cursor].chars().count();
            let prev_start = self.text[..start - 1].rfind('\n').map_or(0, |i| i + 1);
            self.cursor = advance(&self.text, prev_start, col, start - 1);
            return;
        }
        let at = match self.browsing {
            Some(0) => return,
            Some(i) => i - 1,
            None if self.history.is_empty() => return,
            None => {
                self.stash = self.text.clone();
                self.history.len() - 1
            }
        };
        self.show_entry(at);
    }

    /// Down moves a line down in multi-line text; from the last line it goes forward in the history.
    fn down(&mut self) {
        let end = self.line_end();
        if end < self.text.len() {
            let col = self.text[self.line_start()..self.cursor].chars().count();
            let next_start = end + 1;
            let next_end = self.text[next_start..]
                .find('\n')
                .map_or(self.text.len(), |i| next_start + i);
            self.cursor = advance(&self.text, next_start, col, next_end);
            return;
        }
        match self.browsing {
            Some(i) if i + 1 < self.history.len() => self.show_entry(i + 1),
            Some(_) => {
                let stash = std::mem::take(&mut self.stash);
                self.set_text(&stash);
            }
            None => {}
        }
    }

    fn show_entry(&mut self, at: usize) {
        if let Some(entry) = self.history.get(at) {
            self.text = entry.clone();
            self.cursor = self.text.len();
            self.browsing = Some(at);
        }
    }

    fn prev_boundary(&self, at: usize) -> usize {
        self.text[..at]
            .char_indices()
            .next_back()
            .map_or(0, |(i, _)| i)
    }

    fn next_boundary(&self, at: usize) -> usize {
        self.text[at..]
            .chars()
            .next()
            .map_or(at, |c| at + c.len_utf8())
    }

    fn line_start(&self) -> usize {
        self.text[..self.cursor].rfind('\n').map_or(0, |i| i + 1)
    }

    fn line_end(&self) -> usize {
        self.text[self.cursor..]
            .find('\n')
            .map_or(self.text.len(), |i| self.cursor + i)
    }

    /// Ctrl-K at the end of a line joins the next one (as in Emacs).
    fn line_end_or_newline(&self) -> usize {
        let end = self.line_end();
        if end == self.cursor && end < self.text.len() {
            end + 1
        } else {
            end
        }
    }

    fn word_start(&self) -> usize {
        let before = &self.text[..self.cursor];
        let trimmed = before.trim_end_matches(|c: char| !c.is_alphanumeric());
        trimmed
            .char_indices()
            .rev()
            .find(|(_, c)| !c.is_alphanumeric())
            .map_or(0, |(i, c)| i + c.len_utf8())
    }

    fn word_end(&self) -> usize {
        let after = &self.text[self.cursor..];
        let skip = after.len()
            - after
                .trim_start_matches(|c: char| !c.is_alphanumeric())
                .len();
        let rest = &after[skip..];
        let word = rest
            .find(|c: char| !c.is_alphanumeric())
            .unwrap_or(rest.len());
        self.cursor + skip + word
    }
}

/// The byte offset `chars` characters after `from`, but not past `limit`.
fn advance(text: &str, from: usize, chars: usize, limit: usize) -> usize {
    text[from..limit]
        .char_indices()
        .nth(chars)
        .map_or(limit, |(i, _)| from + i)
}

/// How a character of the input is shown, and its width: a tab as spaces, other control characters as
/// U+FFFD (the input is shown as typed, but must not drive the terminal).
fn display(c: char) -> (String, usize) {
    if c == '\t' {
        return (" ".repeat(TAB_WIDTH), TAB_WIDTH);
    }
    match c.width() {
        Some(w) if !c.is_control() => (c.to_string(), w),
        _ => (char::REPLACEMENT_CHARACTER.to_string(), 1),
    }
}

/// Columns `s` takes on the terminal.
pub fn text_width(s: &str) -> usize {
    s.chars().map(|c| display(c).1).sum()
}

fn prompt_width(prompt: &str) -> usize {
    text_width(prompt)
}

/// Appends as much of `s` as fits in `width` columns.
pub fn push_clipped(out: &mut String, s: &str, width: usize) {
    let mut used = 0;
    for c in s.chars() {
        let (shown, w) = display(c);
        if used + w > width {
            break;
        }
        out.push_str(&shown);
        used += w;
    }
}

fn common_prefix(words: &[&String]) -> String {
    let Some(first) = words.first() else {
        return String::new();
    };
    let mut len = first.len();
    for w in &words[1..] {
        len = len.min(
            first
                .bytes()
                .zip(w.bytes())
                .take_while(|(a, b)| a == b)
                .count(),
        );
    }
    first[..len].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn editor() -> Editor {
        Editor::new(
            vec!["older".into(), "old".into()],
            ["diff", "undo", "accept", "compact", "context", "exit"]
                .map(String::from)
                .to_vec(),
        )
    }

    fn typed(e: &mut Editor, s: &str) {
        for c in s.chars() {
            e.handle(Key::Char(c));
        }
    }

    #[test]
    fn editing_keys_move_and_cut_by_character_and_word() {
        let mut e = editor();
        typed(&mut e, "héllo wörld");
        e.handle(Key::Ctrl('w'));
        assert_eq!(e.text(), "héllo ");
        e.handle(Key::Ctrl('y'));
        e.handle(Key::Home);
        e.handle(Key::Right);
        e.handle(Key::Delete);
        assert_eq!(e.text(), "hllo wörld");
        e.handle(Key::Alt('f'));
        typed(&mut e, "!");
        assert_eq!(e.text(), "hllo! wörld");
        e.handle(Key::End);
        e.handle(Key::Backspace);
        e.handle(Key::WordLeft);
        e.handle(Key::Ctrl('k'));
        assert_eq!(e.text(), "hllo! ");
        assert_eq!(e.handle(Key::Enter), Action::Submit("hllo! ".into()));
        assert!(e.is_empty());
    }

    #[test]
    fn continuation_paste_and_history() {
        let mut e = editor();
        typed(&mut e, "first \\");
        assert_eq!(e.handle(Key::Enter), Action::Redraw);
        e.handle(Key::AltEnter);
        e.handle(Key::Paste("pasted\n\tblock".into()));
        assert_eq!(e.text(), "first \n\npasted\n\tblock");
        // Up in multi-line text moves between lines, keeping the column where the line is long enough.
        e.handle(Key::Up);
        e.handle(Key::Up);
        typed(&mut e, "X");
        e.handle(Key::Up);
        typed(&mut e, "Y");
        assert_eq!(e.text(), "fYirst \nX\npasted\n\tblock");
        let entry = "fYirst \nX\npasted\n\tblock".to_string();
        assert_eq!(e.handle(Key::Enter), Action::Submit(entry.clone()));
        // From the first line Up walks the history, newest first, and Down comes back to the draft.
        typed(&mut e, "draft");
        e.handle(Key::Up);
        assert_eq!(e.text(), entry);
        for _ in 0..3 {
            e.handle(Key::Up);
        }
        assert_eq!(e.text(), entry, "moved up within the entry");
        e.handle(Key::Up);
        assert_eq!(e.text(), "old");
        e.handle(Key::Up);
        e.handle(Key::Up);
        assert_eq!(e.text(), "older");
        e.handle(Key::Down);
        assert_eq!(e.text(), "old");
        e.handle(Key::Down);
        assert_eq!(e.text(), entry);
        e.handle(Key::Down);
        assert_eq!(e.text(), "draft");
        assert_eq!(e.handle(Key::Ctrl('d')), Action::Redraw);
        e.clear();
        assert_eq!(e.handle(Key::Ctrl('d')), Action::Eof);
    }

    #[test]
    fn tab_completes_slash_commands() {
        let mut e = editor();
        typed(&mut e, "/d");
        e.handle(Key::Tab);
        assert_eq!(e.text(), "/diff ");
        e.set_text("/co");
        assert_eq!(
            e.handle(Key::Tab),
            Action::Candidates(vec!["/compact".into(), "/context".into()])
        );
        e.set_text("/c");
        e.handle(Key::Tab);
        assert_eq!(e.text(), "/co");
        e.set_text("/zz");
        e.handle(Key::Tab);
        assert_eq!(e.text(), "/zz");
        e.set_text("plain");
        e.handle(Key::Tab);
        assert_eq!(e.text(), "plain\t");
    }

    #[test]
    fn the_view_wraps_by_display_width() {
        let mut e = editor();
        assert_eq!(
            e.view("> ", "type here", 8, 5),
            View {
                rows: vec!["> type h".into()],
                cursor_row: 0,
                cursor_col: 2
            }
        );
        // Wide characters take two columns and never straddle the edge; combining marks take none.
        e.set_text("中文字e\u{301}x\nab");
        let v = e.view("> ", "", 8, 5);
        assert_eq!(v.rows, ["> 中文字", "  e\u{301}x", "  ab"]);
        assert_eq!((v.cursor_row, v.cursor_col), (2, 4));
        e.handle(Key::Up);
        let v = e.view("> ", "", 8, 5);
        assert_eq!(
            (v.cursor_row, v.cursor_col),
            (0, 6),
            "on 字, two characters in"
        );
        // A full row puts the cursor at the start of the next; control characters show as U+FFFD.
        e.set_text("abcdef");
        let v = e.view("> ", "", 8, 5);
        assert_eq!(v.rows, ["> abcdef", "  "]);
        assert_eq!((v.cursor_row, v.cursor_col), (1, 2));
        e.set_text("a\u{1b}[2Jb");
        assert_eq!(e.view("> ", "", 20, 5).rows, ["> a\u{fffd}[2Jb"]);
        // Only the rows around the cursor when the text is taller than allowed.
        e.set_text("1\n2\n3\n4");
        let v = e.view("> ", "", 8, 2);
        assert_eq!(v.rows, ["  3", "  4"]);
        assert_eq!(v.cursor_row, 1);
    }
}
