//! Small readings of a command's words that the guard's parts share: options apart from operands, the
//! command after shell keywords, a program's base name.

use super::super::shell::Word;

/// Options and operands of a command (operands after `--` included; option values are not separated).
pub(super) fn split_options(args: &[Word]) -> (Vec<String>, Vec<Word>) {
    let mut flags = Vec::new();
    let mut operands = Vec::new();
    let mut rest = false;
    for a in args {
        if rest {
            operands.push(a.clone());
        } else if a.text == "--" {
            rest = true;
        } else if a.text.starts_with('-') && a.text.len() > 1 && !a.is_dynamic() {
            flags.push(a.text.clone());
        } else {
            operands.push(a.clone());
        }
    }
    (flags, operands)
}

/// Drops shell keywords (`if`, `then`, `{`, `!`, ...) in command position; loop headers are dropped whole.
pub(super) fn strip_keywords(words: &[Word]) -> Vec<Word> {
    let mut start = 0;
    while let Some(w) = words.get(start) {
        if w.quoted {
            break;
        }
        match w.text.as_str() {
            "if" | "then" | "else" | "elif" | "fi" | "do" | "done" | "while" | "until" | "{"
            | "}" | "!" | "esac" | "in" => start += 1,
            "for" | "select" | "case" | "function" => return Vec::new(),
            _ => break,
        }
    }
    words[start..].to_vec()
}

/// The last component of a program path (`/usr/bin/rm` -> `rm`).
pub(super) fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}
