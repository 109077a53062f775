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
    /// Contains an unquoted `{`: it may be brace-expanded (`{a,b}`, `{1..3}`) into several words.
    pub brace: bool,
    /// Any part was quoted.
    pub quoted: bool,
    /// Where each expansion sits in `text`, so a guard that knows a variable's value can put it in.
    pub expansions: Vec<Expansion>,
}

/// One expansion inside a [`Word`]: its placeholder's byte range in the word's text and what it expands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expansion {
    pub start: usize,
    pub end: usize,
    pub kind: ExpansionKind,
    /// Inside double quotes: the value is neither split into words nor globbed.
    pub quoted: bool,
    /// The expansion may produce nothing (`$X`, but not `${X:?}` or `$((1+1))`).
    pub may_be_empty: bool,
}

/// What an [`Expansion`] expands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExpansionKind {
    /// `$NAME`, `$1` or `${NAME<op>}`, with the operator and its word (`:-default`, `:?`, `%/`), empty for plain.
    Param { name: String, op: String },
    /// `$(...)` or backticks: the commands `first..end` of [`Script::commands`].
    Command { first: usize, end: usize },
    /// Anything else (`$((...))`, `$@`, `$#`, `${#X}`, `${!X}`): only known at run time.
    Other,
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
    /// The subshells this command runs in, outermost first (`(...)`, `$(...)`, backticks, `<(...)`), each
    /// with an id unique in the line; empty at the top level. A `cd` or assignment in a subshell does not reach
    /// commands outside it.
    pub scope: Vec<u32>,
    /// The and-or operator before this command in its list: `None` when it starts a list, `Some("&&")` when
    /// every operator before it in the list is `&&` (so the commands before it all ran when it runs), and
    /// `Some("||")` otherwise.
    pub op: Option<&'static str>,
    /// Its stdout is piped into the next command (so it runs in a subshell).
    pub pipes_out: bool,
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
        scopes: Vec::new(),
        next_scope: 1,
        op: None,
        list_or: false,
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
    /// The subshells being parsed, outermost first.
    scopes: Vec<u32>,
    /// The next subshell id (shared with sub-parsers, so ids stay unique in the line).
    next_scope: u32,
    /// The and-or operator waiting for the next command of the list.
    op: Option<&'static str>,
    /// The current list has had a `||`: from there on, earlier commands may not have run.
    list_or: bool,
}

/// What a nested sequence saves of its parent's and-or list.
type ListState = (Option<&'static str>, bool);

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
                    let finished = self.finish(&mut current, &mut piped_from, Sep::Plain);
                    // `a &&` at the end of a line continues the list on the next one.
                    if finished || self.op.is_none() {
                        self.end_list();
                    }
                    self.read_heredocs()?;
                }
                ';' => {
                    self.pos += 1;
                    self.eat(";");
                    self.eat("&");
                    self.finish(&mut current, &mut piped_from, Sep::Plain);
                    self.end_list();
                }
                '&' if self.eat("&&") => {
                    self.finish(&mut current, &mut piped_from, Sep::Plain);
                    self.op = Some(if self.list_or { "||" } else { "&&" });
                }
                '&' if self.peek_at(1) == Some('>') => self.redirect(&mut current, None)?,
                '&' => {
                    self.pos += 1;
                    self.finish(&mut current, &mut piped_from, Sep::Background);
                    self.end_list();
                }
                '|' if self.eat("||") => {
                    self.finish(&mut current, &mut piped_from, Sep::Plain);
                    self.list_or = true;
                    self.op = Some("||");
                }
                '|' => {
                    self.pos += 1;
                    self.eat("&");
                    self.finish(&mut current, &mut piped_from, Sep::Pipe);
                }
                '(' => self.open_paren(&mut current, &mut piped_from)?,
                '<' | '>' if self.peek_at(1) == Some('(') => {
                    self.pos += 2;
                    self.subshell()?;
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

    fn end_list(&mut self) {
        self.op = None;
        self.list_or = false;
    }

    /// Parses a subshell or substitution up to its `)`, in a scope of its own, with its own and-or lists.
    /// Returns the range of commands it produced.
    fn subshell(&mut self) -> Result<(usize, usize), ParseError> {
        let first = self.out.len();
        let saved: ListState = (self.op.take(), std::mem::take(&mut self.list_or));
        let id = self.next_scope;
        self.next_scope += 1;
        self.scopes.push(id);
        let result = self.sequence(true);
        self.scopes.pop();
        (self.op, self.list_or) = saved;
        result?;
        Ok((first, self.out.len()))
    }

    /// A parser for text inside this line (a backtick substitution, a here-document), whose commands join
    /// this parser's output through [`Parser::absorb`].
    fn sub(&mut self, text: &str, scopes: Vec<u32>) -> Parser {
        Parser {
            chars: text.chars().collect(),
            pos: 0,
            out: Vec::new(),
            pending: Vec::new(),
            depth: self.depth,
            scopes,
            next_scope: self.next_scope,
            op: None,
            list_or: false,
        }
    }

    /// Appends a sub-parser's commands, keeping their pipe links pointing at the right commands.
    fn absorb(&mut self, sub: Parser) -> (usize, usize) {
        let base = self.out.len();
        self.next_scope = sub.next_scope;
        self.out.extend(sub.out.into_iter().map(|mut c| {
            c.piped_from = c.piped_from.map(|i| i + base);
            c
        }));
        (base, self.out.len())
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
        self.subshell()?;
        // The group is one element of its list: the operator before it is used up.
        self.op = None;
        Ok(())
    }

    /// Ends the current simple command; false when there was none.
    fn finish(&mut self, current: &mut Command, piped_from: &mut Option<usize>, sep: Sep) -> bool {
        let mut cmd = std::mem::take(current);
        if cmd.is_empty() {
            return false;
        }
        cmd.piped_from = piped_from.take();
        cmd.background = matches!(sep, Sep::Background);
        cmd.pipes_out = matches!(sep, Sep::Pipe);
        cmd.scope = self.scopes.clone();
        cmd.op = self.op.take();
        let index = self.out.len();
        for (delim, strip, expand) in std::mem::take(&mut cmd.heredoc_requests) {
            self.pending.push((index, delim, strip, expand));
        }
        self.out.push(cmd);
        if matches!(sep, Sep::Pipe) {
            *piped_from = Some(index);
        }
        true
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
                let scopes = self
                    .out
                    .get(index)
                    .map(|c| c.scope.clone())
                    .unwrap_or_default();
                let mut sub = self.sub(&body, scopes);
                sub.heredoc_expansions()?;
                self.absorb(sub);
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
                    self.backtick(&mut scratch, true)?;
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
                '`' => self.backtick(&mut w, false)?,
                '*' | '?' | '[' => {
                    w.glob = true;
                    w.text.push(c);
                }
                '{' => {
                    w.brace = true;
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
                '`' => self.backtick(w, true)?,
                _ => w.text.push(c),
            }
        }
        Err(ParseError("unterminated double quote".into()))
    }

    /// After a `$`: ANSI-C quoting, substitutions, arithmetic, or a parameter.
    fn dollar(&mut self, w: &mut Word, in_quotes: bool) -> Result<(), ParseError> {
        let start = w.text.len();
        let (kind, may_be_empty) = match self.peek() {
            Some('\'') if !in_quotes => {
                self.pos += 1;
                w.quoted = true;
                return self.ansi_c(w);
            }
            Some('"') if !in_quotes => {
                self.pos += 1;
                w.quoted = true;
                return self.double_quoted(w);
            }
            Some('(') if self.peek_at(1) == Some('(') => {
                self.pos += 2;
                self.skip_balanced('(', ')', 2)?;
                w.text.push_str("$((...))");
                w.has_var = true;
                (ExpansionKind::Other, false)
            }
            Some('(') => {
                self.pos += 1;
                let (first, end) = self.subshell()?;
                w.text.push_str("$(...)");
                w.has_subst = true;
                (ExpansionKind::Command { first, end }, true)
            }
            Some('{') => {
                self.pos += 1;
                let open = self.pos;
                self.skip_balanced('{', '}', 1)?;
                let inner: String = self.chars[open..self.pos - 1].iter().collect();
                if inner.contains("$(") || inner.contains('`') {
                    // `${X:-$(cmd)}` runs `cmd`: the guard must see it.
                    let mut sub = self.sub(&inner, self.scopes.clone());
                    sub.heredoc_expansions()?;
                    self.absorb(sub);
                    w.has_subst = true;
                }
                w.text.push_str(&format!("${{{inner}}}"));
                w.has_var = true;
                let may_be_empty = !expansion_is_never_empty(&inner);
                if may_be_empty {
                    w.var_may_be_empty = true;
                }
                (braced(&inner), may_be_empty)
            }
            Some(c) if c.is_ascii_alphabetic() || c == '_' => {
                let from = self.pos;
                while self
                    .peek()
                    .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
                {
                    self.pos += 1;
                }
                let name: String = self.chars[from..self.pos].iter().collect();
                w.text.push('$');
                w.text.push_str(&name);
                w.has_var = true;
                w.var_may_be_empty = true;
                let op = String::new();
                (ExpansionKind::Param { name, op }, true)
            }
            Some(c) if c.is_ascii_digit() || "@*#?$!-".contains(c) => {
                self.pos += 1;
                w.text.push('$');
                w.text.push(c);
                w.has_var = true;
                w.var_may_be_empty = true;
                let kind = if c.is_ascii_digit() {
                    ExpansionKind::Param {
                        name: c.to_string(),
                        op: String::new(),
                    }
                } else {
                    ExpansionKind::Other
                };
                (kind, true)
            }
            _ => {
                w.text.push('$');
                return Ok(());
            }
        };
        w.expansions.push(Expansion {
            start,
            end: w.text.len(),
            kind,
            quoted: in_quotes,
            may_be_empty,
        });
        Ok(())
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
    fn backtick(&mut self, w: &mut Word, in_quotes: bool) -> Result<(), ParseError> {
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
        if self.depth + 1 > MAX_DEPTH {
            return Err(ParseError(format!(
                "scripts nested more than {MAX_DEPTH} deep"
            )));
        }
        let mut scopes = self.scopes.clone();
        scopes.push(self.next_scope);
        self.next_scope += 1;
        let mut sub = self.sub(&inner, scopes);
        sub.depth += 1;
        sub.sequence(false)?;
        let (first, end) = self.absorb(sub);
        let start = w.text.len();
        w.text.push_str("$(...)");
        w.has_subst = true;
        w.expansions.push(Expansion {
            start,
            end: w.text.len(),
            kind: ExpansionKind::Command { first, end },
            quoted: in_quotes,
            may_be_empty: true,
        });
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

/// `NAME=...`, `NAME+=...` or `NAME[subscript]=...` with a valid name.
pub(crate) fn is_assignment(w: &Word) -> bool {
    let Some(eq) = w.text.find('=') else {
        return false;
    };
    let name = w.text[..eq].trim_end_matches('+');
    match name.split_once('[') {
        Some((array, subscript)) => is_name(array) && subscript.ends_with(']'),
        None => is_name(name),
    }
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

/// What `${inner}` expands: a named or positional parameter with its operator, or something only known at
/// run time (`${#X}`, `${!X}`, `${@}`).
fn braced(inner: &str) -> ExpansionKind {
    let name_len = if inner.starts_with(|c: char| c.is_ascii_digit()) {
        inner.chars().take_while(char::is_ascii_digit).count()
    } else {
        inner
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .count()
    };
    let name = &inner[..name_len];
    if name.is_empty() || !(is_name(name) || name.chars().all(|c| c.is_ascii_digit())) {
        return ExpansionKind::Other;
    }
    ExpansionKind::Param {
        name: name.to_string(),
        op: inner[name_len..].to_string(),
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::random_input;

    fn commands(line: &str) -> Vec<Command> {
        parse(line, 0).expect("the test line parses").commands
    }

    fn names(cmds: &[Command]) -> Vec<String> {
        cmds.iter()
            .map(|c| c.words.first().map(|w| w.text.clone()).unwrap_or_default())
            .collect()
    }

    #[test]
    fn and_or_operators_say_whether_the_commands_before_ran() {
        let cmds = commands("a && b || c && d; e\nf &&\ng & h");
        assert_eq!(names(&cmds), ["a", "b", "c", "d", "e", "f", "g", "h"]);
        let ops: Vec<Option<&str>> = cmds.iter().map(|c| c.op).collect();
        // After the `||`, every later operator of the list reads `||`: `b` may not have run.
        assert_eq!(
            ops,
            [
                None,
                Some("&&"),
                Some("||"),
                Some("||"),
                None,
                None,
                Some("&&"),
                None
            ]
        );
        assert!(cmds[6].background);
    }

    #[test]
    fn subshells_and_substitutions_get_their_own_scopes() {
        let cmds = commands("(cd x; a) && echo $(b; c) `d` && e");
        let scopes: Vec<(String, Vec<u32>)> = cmds
            .iter()
            .map(|c| (c.words[0].text.clone(), c.scope.clone()))
            .collect();
        assert_eq!(scopes[0], ("cd".into(), vec![1]));
        assert_eq!(scopes[1], ("a".into(), vec![1]));
        assert_eq!(scopes[2].1, vec![2]);
        assert_eq!(scopes[3].1, vec![2]);
        assert_eq!(scopes[4], ("d".into(), vec![3]));
        assert_eq!(scopes[5], ("echo".into(), vec![]));
        assert_eq!(scopes[6], ("e".into(), vec![]));
        // The group used up the `&&` before it; `echo` follows the `&&` after it.
        assert_eq!(cmds[5].op, Some("&&"));
    }

    #[test]
    fn expansions_record_where_they_are_and_what_they_run() {
        let cmds = commands("X=$(mktemp -d) && rm -rf \"$X\"/* ${Y:-a} $1");
        let assign = &cmds[1].assignments[0];
        assert_eq!(assign.text, "X=$(...)");
        assert_eq!(
            assign.expansions[0].kind,
            ExpansionKind::Command { first: 0, end: 1 }
        );
        assert_eq!(names(&cmds[..1]), ["mktemp"]);
        let rm = &cmds[2];
        let target = &rm.words[2];
        assert_eq!(target.text, "$X/*");
        let e = &target.expansions[0];
        assert_eq!((e.start, e.end, e.quoted), (0, 2, true));
        assert_eq!(
            e.kind,
            ExpansionKind::Param {
                name: "X".into(),
                op: String::new()
            }
        );
        assert!(target.glob);
        let default = &rm.words[3].expansions[0];
        assert_eq!(
            (default.kind.clone(), default.may_be_empty),
            (
                ExpansionKind::Param {
                    name: "Y".into(),
                    op: ":-a".into()
                },
                false
            )
        );
        assert!(
            matches!(&rm.words[4].expansions[0].kind, ExpansionKind::Param { name, .. } if name == "1")
        );
    }

    #[test]
    fn pipes_inside_backticks_point_at_their_own_commands() {
        let cmds = commands("ls; echo `printf x | sh`");
        let sh = cmds
            .iter()
            .find(|c| c.words[0].text == "sh")
            .expect("sh is parsed");
        let upstream = &cmds[sh.piped_from.expect("sh reads a pipe")];
        assert_eq!(upstream.words[0].text, "printf");
        assert!(upstream.pipes_out);
    }

    #[test]
    fn braces_and_array_elements_are_marked() {
        let cmds = commands("X[0]=/ rm -rf {a,b}");
        assert!(is_assignment(&cmds[0].assignments[0]));
        assert!(cmds[0].words[2].brace);
        assert!(!cmds[0].words[0].brace);
    }

    /// Property (issue 24, item 7): the guard's parser takes any line the model could write (quotes and
    /// substitutions left open, heredocs, nesting) without a panic, and reads it the same way twice.
    #[test]
    fn random_lines_parse_without_a_panic() {
        const PIECES: &[&[u8]] = &[
            b"rm",
            b" -rf",
            b" ",
            b"\"",
            b"'",
            b"\\",
            b"$",
            b"$(",
            b")",
            b"`",
            b"${X",
            b"}",
            b"|",
            b"&&",
            b"||",
            b";",
            b"&",
            b"<<EOF\n",
            b"EOF",
            b"\n",
            b"(",
            b"{",
            b"#",
            b"=",
            b"*",
            b"~",
            b"bash -c ",
            "\u{e9}".as_bytes(),
        ];
        let mut state = 0xD1B5_4A32_D192_ED03;
        for _ in 0..2_000 {
            let bytes = random_input(&mut state, PIECES, 16);
            let line = String::from_utf8_lossy(&bytes);
            let first = parse(&line, 0).map(|s| s.commands.len());
            let again = parse(&line, 0).map(|s| s.commands.len());
            assert_eq!(first.is_ok(), again.is_ok(), "{line:?}");
            assert_eq!(first.ok(), again.ok(), "{line:?}");
        }
    }
}
