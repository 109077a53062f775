//! Text from outside the user's hands (model output, tool results, anything pulled from a remote): how it is
//! shown and how it becomes commit-message prose.
//!
//! Showing: [`Untrusted`] is the only neutraliser. Their `Display` replaces control
//! characters (C0 and C1, so ESC and with it every CSI, OSC, OSC 52 and DCS sequence, BEL, CR) and the
//! bidirectional controls with U+FFFD, so pulled or model text cannot drive the terminal (clear it, retitle
//! it, write the clipboard, hide text) or read differently from what it is ("Trojan Source"). Printing such
//! text through one of these types, rather than calling a function, is what keeps a new printer from
//! forgetting it (issue 22, finding 8).
//!
//! Committing: [`commit_prose()`] strips the same characters and makes every line that git would read as a
//! trailer or as the end of the message (`Key: value`, `---`, a scissors line, a comment) plain prose, so
//! the trailers git-agent appends are the only ones a commit has (issue 22, finding 9).

use std::borrow::Cow;
use std::fmt;

/// Borrowed text from outside, neutralised when displayed. Newlines and tabs stay unless it is a
/// [`Untrusted::name()`], which must stay on its line.
#[derive(Clone, Copy, Debug)]
pub struct Untrusted<'a> {
    text: &'a str,
    one_line: bool,
}

impl<'a> Untrusted<'a> {
    /// Text that may span lines (an answer, a description).
    pub fn text(text: &'a str) -> Self {
        Untrusted {
            text,
            one_line: false,
        }
    }

    /// A name or id shown inside a line of ours (a skill folder, a memory id): newlines and tabs are made
    /// visible too, so it cannot forge the next line.
    pub fn name(text: &'a str) -> Self {
        Untrusted {
            text,
            one_line: true,
        }
    }
}

impl fmt::Display for Untrusted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut rest = self.text;
        while let Some((at, c)) = rest.char_indices().find(|&(_, c)| self.is_unsafe(c)) {
            f.write_str(&rest[..at])?;
            f.write_str("\u{fffd}")?;
            rest = &rest[at + c.len_utf8()..];
        }
        f.write_str(rest)
    }
}

impl Untrusted<'_> {
    fn is_unsafe(&self, c: char) -> bool {
        is_unsafe(c) || (self.one_line && (c == '\n' || c == '\t'))
    }
}

/// `text` as [`Untrusted`] displays it, borrowed when nothing needed replacing.
pub fn neutralize(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_unsafe) {
        return Cow::Borrowed(text);
    }
    Cow::Owned(Untrusted::text(text).to_string())
}

/// Serialised JSON made safe to print: serde_json writes C1 controls (U+0080-U+009F, of which U+009B is a
/// CSI to some terminals) and the bidirectional controls raw; each becomes its `\uXXXX` escape, which
/// decodes to the same string. Outside strings JSON is ASCII, so only string contents change.
pub fn json_for_terminal(json: String) -> String {
    if !json.chars().any(|c| is_unsafe(c) && !c.is_ascii()) {
        return json;
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if is_unsafe(c) && !c.is_ascii() {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// Control characters other than newline and tab, and the bidirectional controls: embeddings and
/// overrides (U+202A-U+202E), isolates (U+2066-U+2069), the marks (U+200E, U+200F, U+061C).
fn is_unsafe(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t') || is_bidi_control(c)
}

fn is_bidi_control(c: char) -> bool {
    matches!(
        c,
        '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}' | '\u{061c}'
    )
}

/// Model text made fit for a commit message's subject or body: control and bidirectional characters
/// removed (a tab becomes a space), trailing blanks cut, and each line that git would read as something else
/// indented by two spaces: a trailer (`Signed-off-by: x`), the `---` that starts a patch, a scissors line, a
/// `#` comment. An indented line is a continuation to `git interpret-trailers`, never a trailer of its own,
/// and the divider and comment rules only look at a line's first column.
pub fn commit_prose(text: &str) -> String {
    let clean: String = text
        .chars()
        .filter_map(|c| match c {
            '\t' => Some(' '),
            '\n' => Some('\n'),
            c if is_unsafe(c) => None,
            c => Some(c),
        })
        .collect();
    let lines: Vec<String> = clean
        .lines()
        .map(|line| {
            let line = line.trim_end();
            if reads_as_git_syntax(line) {
                format!("  {line}")
            } else {
                line.to_owned()
            }
        })
        .collect();
    lines.join("\n").trim_matches('\n').to_owned()
}

/// A subject line from model text: the first line, control and bidirectional characters removed. Git
/// never reads the subject as a trailer, so a `fix: x` subject stays as written.
pub fn commit_subject(text: &str) -> String {
    let first = text.lines().next().unwrap_or_default();
    first
        .chars()
        .filter(|&c| !is_unsafe(c))
        .collect::<String>()
        .replace('\t', " ")
        .trim()
        .trim_start_matches('#')
        .trim_start()
        .to_owned()
}

/// True for a line git gives a meaning in a commit message: a trailer (`token: value`, the token made of
/// letters, digits and `-`, as `git interpret-trailers --parse` accepts it, spaces before the colon included),
/// the patch divider (`---`), a scissors line (`>8`/`8<`) or a comment.
fn reads_as_git_syntax(line: &str) -> bool {
    if line.starts_with("---") || line.starts_with('#') {
        return true;
    }
    if line.contains(">8") || line.contains("8<") {
        return true;
    }
    let Some((token, _)) = line.split_once(':') else {
        return false;
    };
    let token = token.trim_end();
    !token.is_empty() && token.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_makes_escapes_and_bidi_visible() {
        let hostile =
            "a\x1b]52;c;aGk=\x07b\x1b[2J\r\x1b[Kc\u{202e}d\u{2066}\u{200f}\u{061c}\u{9b}e\tf\n";
        let shown = Untrusted::text(hostile).to_string();
        assert_eq!(
            shown,
            "a\u{fffd}]52;c;aGk=\u{fffd}b\u{fffd}[2J\u{fffd}\u{fffd}[Kc\u{fffd}d\u{fffd}\u{fffd}\u{fffd}\u{fffd}e\tf\n"
        );
        assert_eq!(
            Untrusted::name("x\ny\tz").to_string(),
            "x\u{fffd}y\u{fffd}z"
        );
        assert_eq!(Untrusted::text("naïve — ok").to_string(), "naïve — ok");
        assert!(matches!(neutralize("plain"), Cow::Borrowed(_)));
        assert_eq!(neutralize("x\u{202e}y\r"), "x\u{fffd}y\u{fffd}");
    }

    #[test]
    fn json_keeps_its_value_and_loses_raw_controls() {
        let value = serde_json::json!({"path": "a\u{202e}b\u{9b}2J\u{1b}c"});
        let line = json_for_terminal(value.to_string());
        assert_eq!(line, r#"{"path":"a\u202eb\u009b2J\u001bc"}"#);
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&line).unwrap(),
            value
        );
    }

    #[test]
    fn commit_prose_strips_controls_and_defuses_trailers() {
        let prose = commit_prose(
            "Fix it\x1b[31m now\u{202e}\n\nBody\tline\r\n---\nSigned-off-by: Mallory <m@x>\nAgent-Session : 1\n# note\n",
        );
        assert_eq!(
            prose,
            "Fix it[31m now\n\nBody line\n  ---\n  Signed-off-by: Mallory <m@x>\n  Agent-Session : 1\n  # note"
        );
        assert_eq!(
            commit_prose("Note: a colon in prose"),
            "  Note: a colon in prose"
        );
        assert_eq!(
            commit_prose("a sentence: with a colon"),
            "a sentence: with a colon"
        );
        assert_eq!(commit_subject("fix: it\x1b[2J\nmore"), "fix: it[2J");
        assert_eq!(commit_subject("# heading\t"), "heading");
    }
}
