//! A parser for bash command lines, so the guard judges the commands a line runs rather than its text.
//!
//! Matching text is both too strict (`git commit -m 'rm -rf /'` is harmless) and too weak (`r''m -rf /`,
//! `$'\x72\x6d' -rf /` and `bash -c "rm -rf /"` all run `rm`). This module does what bash does up to the point
//! of expansion: it splits a line at `;` `&&` `||` `|` `&` and newlines, descends into subshells, `$(...)`,
//! backticks and `<(...)`, removes quoting (single, double, `$'...'` with its escapes, backslashes), collects
//! redirections and here-documents, and marks every word that depends on run-time expansion (`$VAR`,
//! `$(...)`, globs), because the guard cannot know what such a word will be.
//!
//! The result is a flat list of simple commands, each with the index of the command that feeds its stdin
//! through a pipe, so `base64 -d | sh` can be recognised. Nested scripts (`bash -c '...'`, `eval`, here-documents
//! fed to a shell) are parsed again by the guard through [`parse`].

use std::fmt;

/// How deep nested scripts may go (`bash -c "bash -c '...'"`); deeper is refused as uninspectable.
pub const MAX_DEPTH: usize = 8;

/// One word after quote removal.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Word {
    /// The text with quotes removed; expansions are kept in their source form (`$HOME`, `$(...)`).
    pub text: String,
    /// Contains a parameter expansion (`$X`, `${X}`, `$1`, `$((...))`).
    pub has_var: bool,
    /// Contains a parameter expansion that may expand to nothing (not `${X:?}` and not `${X:-default}`).
    pub var_may_be_empty: bool,
    /// Contains a command or process substitution.
    pub has_subst: bool,
    /// Contains an unquoted glob character (`*`, `?`, `[`).
    pub glob: bool,
    /// Any part was quoted.
    pub quoted: bool,
}

impl Word {
    /// True when the word's value is only known at run time.
    pub fn is_dynamic(&self) -> bool {
        self.has_var || self.has_subst
    }

    /// A word with static text, for synthesised arguments.
    pub fn literal(text: &str) -> Word {
        Word {
            text: text.to_string(),
            ..Word::default()
        }
    }
}

/// A redirection such as `> out.txt`, `2>&1` or `< in`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Redirect {
    /// The operator: `<`, `>`, `>>`, `>|`, `<>`, `>&`, `<&`, `&>`, `&>>`.
    pub op: &'static str,
    pub target: Word,
}

impl Redirect {
    /// True for redirections that write to their target.
    pub fn writes(&self) -> bool {
        matches!(self.op, ">" | ">>" | ">|" | "<>" | "&>" | "&>>")
            || (self.op == ">&"
                && !self
                    .target
                    .text
                    .chars()
                    .all(|c| c.is_ascii_digit() || c == '-'))
    }
}

/// One simple command: assignments, words, redirections and whatever feeds its stdin.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Command {
    /// `NAME=value` words before the command name.
    pub assignments: Vec<Word>,
    pub words: Vec<Word>,
    pub redirects: Vec<Redirect>,
    /// Here-document bodies (`<<EOF`), in order; `expand` is false when the delimiter was quoted.
    pub heredocs: Vec<Heredoc>,
    /// Here-strings (`<<< word`).
    pub here_strings: Vec<Word>,
    /// Index (in [`Script::commands`]) of the command whose stdout is piped into this one.
    pub piped_from: Option<usize>,
    /// Followed by `&`.
    pub background: bool,
    /// `name() ...`: this entry only records a function definition.
    pub defines: Option<String>,
    /// Here-documents announced on this command, whose bodies follow the end of the line.
    pub(crate) heredoc_requests: Vec<(String, bool, bool)>,
}

impl Command {
    fn is_empty(&self) -> bool {
        self.assignments.is_empty()
            && self.words.is_empty()
            && self.redirects.is_empty()
            && self.heredocs.is_empty()
            && self.here_strings.is_empty()
            && self.defines.is_none()
    }
}

/// A here-document body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Heredoc {
    pub body: String,
    pub expand: bool,
}

/// Every simple command of a line, in the order they appear (substitutions before the command using them).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Script {
    pub commands: Vec<Command>,
}

/// The error returned by [`parse()`]: the line is not valid bash, so nobody can say what it runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError(pub String);

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Parses a bash command line. `depth` counts the scripts this one is nested in.
pub fn parse(source: &str, depth: usize) -> Result<Script, ParseError> {
    if depth > MAX_DEPTH {
        return Err(ParseError(format!(
            "scripts nested more than {MAX_DEPTH} deep"
        )));
    }
    let mut parser = Parser {
        chars: source.chars().collect(),
        pos: 0,
        out: Vec::new(),
        pending: Vec::new(),
        depth,
    };
    parser.sequence(false)?;
    Ok(Script {
        commands: parser.out,
    })
}

/// A here-document whose body is still to be read: (command index, delimiter, strip tabs, expand).
type PendingHeredoc = (usize, String, bool, bool);

struct Parser {
    chars: Vec<char>,
    pos: usize,
    out: Vec<Command>,
    pending: Vec<PendingHeredoc>,
    depth: usize,
}

/// Characters that end an unquoted word.
fn is_meta(c: char) -> bool {
    matches!(
        c,
        ' ' | '\t' | '\n' | ';' | '&' | '|' | '<' | '>' | '(' | ')'
    )
}

/// Where the current simple command ends and how the next one relates to it.
enum Sep {
    Plain,
    Pipe,
    Background,
}

impl Parser {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn peek_at(&self, n: usize) -> Option<char> {
        self.chars.get(self.pos + n).copied()
    }

    fn eat(&mut self, s: &str) -> bool {
        let matches = s
            .chars()
            .enumerate()
            .all(|(i, c)| self.peek_at(i) == Some(c));
        if matches {
            self.pos += s.chars().count();
        }
        matches
    }

    /// Parses commands until end of input, or until the `)` that closes a subshell or substitution.
    fn sequence(&mut self, in_parens: bool) -> Result<(), ParseError> {
        let mut current = Command::default();
        let mut piped_from: Option<usize> = None;
        loop {
            self.skip_blanks();
            let Some(c) = self.peek() else {
                if in_parens {
                    return Err(ParseError("a '(' is never closed".into()));
                }
                self.finish(&mut current, &mut piped_from, Sep::Plain);
                return Ok(());
            };
            match c {
                ')' => {
                    self.pos += 1;
                    self.finish(&mut current, &mut piped_from, Sep::Plain);
                    if in_parens {
                        return Ok(());
                    }
                    // A stray `)` (a `case` pattern); it only separates.
                }
                '#' => self.skip_comment(),
                '\n' => {
                    self.pos += 1;
                    self.finish(&mut current, &mut piped_from, Sep::Plain);
                    self.read_heredocs()?;
                }
                ';' => {
                    self.pos += 1;
                    self.eat(";");
                    self.eat("&");
                    self.finish(&mut current, &mut piped_from, Sep::Plain);
                }
                '&' if self.eat("&&") => self.finish(&mut current, &mut piped_from, Sep::Plain),
                '&' if self.peek_at(1) == Some('>') => self.redirect(&mut current, None)?,
                '&' => {
                    self.pos += 1;
                    self.finish(&mut current, &mut piped_from, Sep::Background);
                }
                '|' if self.eat("||") => self.finish(&mut current, &mut piped_from, Sep::Plain),
                '|' => {
                    self.pos += 1;
                    self.eat("&");
                    self.finish(&mut current, &mut piped_from, Sep::Pipe);
                }
                '(' => self.open_paren(&mut current, &mut piped_from)?,
                '<' | '>' if self.peek_at(1) == Some('(') => {
                    self.pos += 2;
                    self.sequence(true)?;
                    current.words.push(Word {
                        text: "/dev/fd/63".into(),
                        has_subst: true,
                        ..Word::default()
                    });
                }
                '<' | '>' => self.redirect(&mut current, None)?,
                _ => self.word_or_fd_redirect(&mut current)?,
            }
        }
    }

    /// `name()` defines a function; any other `(` opens a subshell.
    fn open_paren(
        &mut self,
        current: &mut Command,
        piped_from: &mut Option<usize>,
    ) -> Result<(), ParseError> {
        let mut look = self.pos + 1;
        while matches!(self.chars.get(look), Some(' ' | '\t')) {
            look += 1;
        }
        let is_def = current.words.len() == 1
            && current.assignments.is_empty()
            && self.chars.get(look) == Some(&')');
        if is_def {
            self.pos = look + 1;
            let name = current.words.remove(0).text;
            current.defines = Some(name);
            self.finish(current, piped_from, Sep::Plain);
            return Ok(());
        }
        self.pos += 1;
        self.finish(current, piped_from, Sep::Plain);
        self.sequence(true)
    }

    fn finish(&mut self, current: &mut Command, piped_from: &mut Option<usize>, sep: Sep) {
        let mut cmd = std::mem::take(current);
        if cmd.is_empty() {
            return;
        }
        cmd.piped_from = piped_from.take();
        cmd.background = matches!(sep, Sep::Background);
        let index = self.out.len();
        for (delim, strip, expand) in std::mem::take(&mut cmd.heredoc_requests) {
            self.pending.push((index, delim, strip, expand));
        }
        self.out.push(cmd);
        if matches!(sep, Sep::Pipe) {
            *piped_from = Some(index);
        }
    }

    fn skip_blanks(&mut self) {
        loop {
            match self.peek() {
                Some(' ' | '\t' | '\r') => self.pos += 1,
                Some('\\') if self.peek_at(1) == Some('\n') => self.pos += 2,
                _ => return,
            }
        }
    }

    fn skip_comment(&mut self) {
        while let Some(c) = self.peek() {
            if c == '\n' {
                return;
            }
            self.pos += 1;
        }
    }

    /// A word; if it is a bare number directly followed by `<` or `>`, it is the fd of a redirection.
    fn word_or_fd_redirect(&mut self, current: &mut Command) -> Result<(), ParseError> {
        let word = self.word()?;
        let is_fd = !word.quoted
            && !word.text.is_empty()
            && word.text.chars().all(|c| c.is_ascii_digit())
            && matches!(self.peek(), Some('<' | '>'));
        if is_fd {
            return self.redirect(current, Some(word.text));
        }
        if current.words.is_empty() && is_assignment(&word) {
            current.assignments.push(word);
        } else {
            current.words.push(word);
        }
        Ok(())
    }

    fn redirect(&mut self, current: &mut Command, _fd: Option<String>) -> Result<(), ParseError> {
        const OPS: [&str; 12] = [
            "<<<", "<<-", "&>>", "<<", ">>", ">|", "<>", ">&", "<&", "&>", "<", ">",
        ];
        let op = OPS
            .iter()
            .find(|op| self.eat(op))
            .copied()
            .ok_or_else(|| ParseError("unexpected redirection".into()))?;
        self.skip_blanks();
        if matches!(
            self.peek(),
            None | Some('\n' | ';' | '|' | '&' | '<' | '>' | ')')
        ) {
            return Err(ParseError(format!("'{op}' has no target")));
        }
        let target = self.word()?;
        match op {
            "<<" | "<<-" => {
                current
                    .heredoc_requests
                    .push((target.text.clone(), op == "<<-", !target.quoted));
            }
            "<<<" => current.here_strings.push(target),
            _ => current.redirects.push(Redirect { op, target }),
        }
        Ok(())
    }

    /// Reads the bodies of the here-documents announced on the line that just ended.
    fn read_heredocs(&mut self) -> Result<(), ParseError> {
        for (index, delim, strip, expand) in std::mem::take(&mut self.pending) {
            let mut body = String::new();
            loop {
                if self.peek().is_none() {
                    // bash accepts a here-document closed by end of input (with a warning).
                    break;
                }
                let start = self.pos;
                while self.peek().is_some_and(|c| c != '\n') {
                    self.pos += 1;
                }
                let line: String = self.chars[start..self.pos].iter().collect();
                self.eat("\n");
                let compare = if strip {
                    line.trim_start_matches('\t')
                } else {
                    &line
                };
                if compare == delim {
                    break;
                }
                body.push_str(compare);
                body.push('\n');
            }
            if expand {
                // Substitutions in an unquoted here-document run; parse them so the guard sees them.
                let mut sub = Parser {
                    chars: body.chars().collect(),
                    pos: 0,
                    out: Vec::new(),
                    pending: Vec::new(),
                    depth: self.depth,
                };
                sub.heredoc_expansions()?;
                self.out.extend(sub.out);
            }
            if let Some(cmd) = self.out.get_mut(index) {
                cmd.heredocs.push(Heredoc { body, expand });
            }
        }
        Ok(())
    }

    /// Scans here-document text for `$(...)` and backticks.
    fn heredoc_expansions(&mut self) -> Result<(), ParseError> {
        let mut scratch = Word::default();
        while let Some(c) = self.peek() {
            match c {
                '\\' => self.pos += 2,
                '$' => {
                    self.pos += 1;
                    self.dollar(&mut scratch, true)?;
                }
                '`' => {
                    self.pos += 1;
                    self.backtick(&mut scratch)?;
                }
                _ => self.pos += 1,
            }
        }
        Ok(())
    }

    /// One word, with quotes removed and expansions marked.
    fn word(&mut self) -> Result<Word, ParseError> {
        let mut w = Word::default();
        while let Some(c) = self.peek() {
            if is_meta(c) {
                // `arr=(a b)`: an array assignment, kept as one word.
                if c == '(' && w.text.ends_with('=') && !w.quoted && is_name_eq(&w.text) {
                    self.array_literal(&mut w)?;
                    continue;
                }
                break;
            }
            self.pos += 1;
            match c {
                '\\' => match self.peek() {
                    Some('\n') => self.pos += 1,
                    Some(next) => {
                        self.pos += 1;
                        w.text.push(next);
                        w.quoted = true;
                    }
                    None => {}
                },
                '\'' => {
                    w.quoted = true;
                    self.single_quoted(&mut w)?;
                }
                '"' => {
                    w.quoted = true;
                    self.double_quoted(&mut w)?;
                }
                '$' => self.dollar(&mut w, false)?,
                '`' => self.backtick(&mut w)?,
                '*' | '?' | '[' => {
                    w.glob = true;
                    w.text.push(c);
                }
                _ => w.text.push(c),
            }
        }
        Ok(w)
    }

    fn array_literal(&mut self, w: &mut Word) -> Result<(), ParseError> {
        let mut depth = 0;
        while let Some(c) = self.peek() {
            self.pos += 1;
            w.text.push(c);
            match c {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        return Ok(());
                    }
                }
                _ => {}
            }
        }
        Err(ParseError("an array assignment is never closed".into()))
    }

    fn single_quoted(&mut self, w: &mut Word) -> Result<(), ParseError> {
        while let Some(c) = self.peek() {
            self.pos += 1;
            if c == '\'' {
                return Ok(());
            }
            w.text.push(c);
        }
        Err(ParseError("unterminated single quote".into()))
    }

    fn double_quoted(&mut self, w: &mut Word) -> Result<(), ParseError> {
        while let Some(c) = self.peek() {
            self.pos += 1;
            match c {
                '"' => return Ok(()),
                '\\' => match self.peek() {
                    Some('\n') => self.pos += 1,
                    Some(next @ ('$' | '`' | '"' | '\\')) => {
                        self.pos += 1;
                        w.text.push(next);
                    }
                    _ => w.text.push('\\'),
                },
                '$' => self.dollar(w, true)?,
                '`' => self.backtick(w)?,
                _ => w.text.push(c),
            }
        }
        Err(ParseError("unterminated double quote".into()))
    }

    /// After a `$`: ANSI-C quoting, substitutions, arithmetic, or a parameter.
    fn dollar(&mut self, w: &mut Word, in_quotes: bool) -> Result<(), ParseError> {
        match self.peek() {
            Some('\'') if !in_quotes => {
                self.pos += 1;
                w.quoted = true;
                self.ansi_c(w)
            }
            Some('"') if !in_quotes => {
                self.pos += 1;
                w.quoted = true;
                self.double_quoted(w)
            }
            Some('(') if self.peek_at(1) == Some('(') => {
                self.pos += 2;
                self.skip_balanced('(', ')', 2)?;
                w.text.push_str("$((...))");
                w.has_var = true;
                Ok(())
            }
            Some('(') => {
                self.pos += 1;
                self.sequence(true)?;
                w.text.push_str("$(...)");
                w.has_subst = true;
                Ok(())
            }
            Some('{') => {
                self.pos += 1;
                let start = self.pos;
                self.skip_balanced('{', '}', 1)?;
                let inner: String = self.chars[start..self.pos - 1].iter().collect();
                w.text.push_str(&format!("${{{inner}}}"));
                w.has_var = true;
                if !expansion_is_never_empty(&inner) {
                    w.var_may_be_empty = true;
                }
                Ok(())
            }
            Some(c) if c.is_ascii_alphabetic() || c == '_' => {
                let start = self.pos;
                while self
                    .peek()
                    .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
                {
                    self.pos += 1;
                }
                let name: String = self.chars[start..self.pos].iter().collect();
                w.text.push('$');
                w.text.push_str(&name);
                w.has_var = true;
                w.var_may_be_empty = true;
                Ok(())
            }
            Some(c) if c.is_ascii_digit() || "@*#?$!-".contains(c) => {
                self.pos += 1;
                w.text.push('$');
                w.text.push(c);
                w.has_var = true;
                w.var_may_be_empty = true;
                Ok(())
            }
            _ => {
                w.text.push('$');
                Ok(())
            }
        }
    }

    /// Skips to the `close` that balances `open`, with `depth` opens already consumed.
    fn skip_balanced(
        &mut self,
        open: char,
        close: char,
        mut depth: usize,
    ) -> Result<(), ParseError> {
        while let Some(c) = self.peek() {
            self.pos += 1;
            if c == '\\' {
                self.pos += 1;
            } else if c == open {
                depth += 1;
            } else if c == close {
                depth -= 1;
                if depth == 0 {
                    return Ok(());
                }
            }
        }
        Err(ParseError(format!("a '{open}' is never closed")))
    }

    /// `` `...` ``: the old form of `$(...)`. Backslash-escaped backticks nest.
    fn backtick(&mut self, w: &mut Word) -> Result<(), ParseError> {
        let mut inner = String::new();
        loop {
            let Some(c) = self.peek() else {
                return Err(ParseError("unterminated backtick".into()));
            };
            self.pos += 1;
            match c {
                '`' => break,
                '\\' => match self.peek() {
                    Some(next @ ('`' | '\\' | '$')) => {
                        self.pos += 1;
                        inner.push(next);
                    }
                    _ => inner.push('\\'),
                },
                _ => inner.push(c),
            }
        }
        let script = parse(&inner, self.depth + 1)?;
        self.out.extend(script.commands);
        w.text.push_str("$(...)");
        w.has_subst = true;
        Ok(())
    }

    /// `$'...'`: the escapes of ANSI-C quoting, so `$'\x72\x6d'` reads as `rm`.
    fn ansi_c(&mut self, w: &mut Word) -> Result<(), ParseError> {
        loop {
            let Some(c) = self.peek() else {
                return Err(ParseError("unterminated $'...' quote".into()));
            };
            self.pos += 1;
            match c {
                '\'' => return Ok(()),
                '\\' => {
                    let decoded = self.ansi_escape();
                    w.text.push_str(&decoded);
                }
                _ => w.text.push(c),
            }
        }
    }

    fn ansi_escape(&mut self) -> String {
        let Some(c) = self.peek() else {
            return "\\".into();
        };
        self.pos += 1;
        let simple = match c {
            'n' => Some('\n'),
            't' => Some('\t'),
            'r' => Some('\r'),
            'a' => Some('\x07'),
            'b' => Some('\x08'),
            'e' | 'E' => Some('\x1b'),
            'f' => Some('\x0c'),
            'v' => Some('\x0b'),
            '\\' | '\'' | '"' | '?' => Some(c),
            _ => None,
        };
        if let Some(ch) = simple {
            return ch.to_string();
        }
        let (radix, max) = match c {
            'x' => (16, 2),
            'u' => (16, 4),
            'U' => (16, 8),
            '0'..='7' => {
                self.pos -= 1;
                (8, 3)
            }
            'c' => {
                // Control character: \cX.
                let ch = self.peek().map(|x| ((x as u8) & 0x1f) as char);
                self.pos += 1;
                return ch.map(String::from).unwrap_or_default();
            }
            _ => return format!("\\{c}"),
        };
        let start = self.pos;
        while self.pos - start < max && self.peek().is_some_and(|d| d.is_digit(radix)) {
            self.pos += 1;
        }
        let digits: String = self.chars[start..self.pos].iter().collect();
        u32::from_str_radix(&digits, radix)
            .ok()
            .and_then(char::from_u32)
            .map(String::from)
            .unwrap_or_default()
    }
}

/// `NAME=...` or `NAME+=...` with a valid name.
fn is_assignment(w: &Word) -> bool {
    let Some(eq) = w.text.find('=') else {
        return false;
    };
    let name = w.text[..eq].trim_end_matches('+');
    is_name(name)
}

fn is_name_eq(text: &str) -> bool {
    text.strip_suffix('=')
        .map(|n| n.trim_end_matches('+'))
        .is_some_and(is_name)
}

fn is_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `${X:?msg}` aborts when X is unset or empty, and `${X:-default}` with a non-empty default never expands to
/// nothing; every other form may.
fn expansion_is_never_empty(inner: &str) -> bool {
    if inner.contains(":?") {
        return true;
    }
    match inner.split_once(":-").or_else(|| inner.split_once(":=")) {
        Some((_, default)) => !default.is_empty() && !default.starts_with('$'),
        None => false,
    }
}
