//! What the guard knows of the shell's state while it reads a line: the working directory and the variables
//! assigned so far, per subshell. So `X=build; rm -rf "$X"/*` is judged as `rm -rf build/*`, a temporary
//! directory from `$(mktemp -d)` is a fresh temporary path, and a `cd` inside `( ... )` does not move the
//! commands after the subshell.
//!
//! A value is known only where bash would certainly have assigned it: not in a pipeline or a background job
//! (both run in subshells), not after an `||`, not in a branch, loop or function body (pre-scanned: such a
//! name is never known in the line), and after an `&&` only until its list ends. A variable read from input
//! (`read`, `mapfile`), assigned from a command's output the guard cannot see (`X=$(cat f)`) or possibly
//! changed by `source` is known to be set but not to what: "only known at run time". A variable never
//! assigned in the line stays what it was before, possibly unset or empty, and positional parameters always do.

use super::super::shell::{is_assignment, Command, Expansion, ExpansionKind, Script, Word};
use super::checker::Checker;
use super::state::{input_names, mode, Frame, Mode, State, Value};
use super::words::{basename, strip_keywords};

/// What an expansion turned into.
enum Resolved {
    Value(String),
    /// Set, but only known at run time.
    Runtime,
    /// Not assigned in the line: left as written, judged as the parser flagged it.
    Unknown,
}

impl Checker<'_> {
    pub(super) fn frame(&self) -> &Frame {
        &self.frame
    }

    pub(super) fn frame_mut(&mut self) -> &mut Frame {
        &mut self.frame
    }

    pub(super) fn cwd(&self) -> &std::path::Path {
        &self.frame().state().cwd
    }

    /// Moves to the command's subshell and keeps its and-or list's bookkeeping.
    pub(super) fn begin(&mut self, cmd: &Command) {
        let frame = self.frame_mut();
        frame.enter(&cmd.scope);
        if cmd.piped_from.is_none() && cmd.op != Some("&&") {
            frame.state_mut().settle();
        }
    }

    /// Takes over the state an `eval`ed script ended in, as its command's mode allows.
    pub(super) fn merge(&mut self, mut end: State, mode: Mode) {
        end.settle();
        let state = self.frame_mut().state_mut();
        match mode {
            Mode::Lost => {}
            Mode::Certain => {
                let pending = std::mem::take(&mut state.pending);
                *state = end;
                state.pending = pending;
            }
            Mode::Pending | Mode::Uncertain => {
                state.cwd = end.cwd;
                for (name, var) in end.vars {
                    if state.vars.get(&name).map(|v| &v.value) == Some(&var.value) {
                        continue;
                    }
                    if mode == Mode::Pending {
                        state.pending.push(name.clone());
                        state.vars.insert(name, var);
                    } else {
                        state.set(&name, Value::Runtime, var.exported);
                    }
                }
            }
        }
    }

    /// Records an assignment as `mode` allows.
    pub(super) fn assign(&mut self, mode: Mode, name: &str, value: Value, exported: bool) {
        let frame = self.frame_mut();
        let value = if frame.is_unstable(name) {
            Value::Runtime
        } else {
            value
        };
        let state = frame.state_mut();
        match mode {
            Mode::Lost => {}
            Mode::Certain => state.set(name, value, exported),
            Mode::Pending => {
                state.set(name, value, exported);
                state.pending.push(name.to_string());
            }
            Mode::Uncertain => state.set(name, Value::Runtime, exported),
        }
    }

    /// `NAME=value` words: the name and what the guard knows of the value.
    pub(super) fn assignment(&self, script: &Script, word: &Word) -> Option<(String, Value)> {
        let eq = word.text.find('=')?;
        let name = word.text[..eq].trim_end_matches('+');
        let raw = &word.text[eq + 1..];
        if let Some((array, _)) = name.split_once('[') {
            // `X[0]=/` sets what `$X` expands to; elements are not tracked.
            return Some((array.to_string(), Value::Runtime));
        }
        let value = if raw.starts_with('(') && !word.quoted {
            // An array: its elements are not tracked.
            Value::Runtime
        } else {
            let expanded = self.expand(script, word, false);
            match expanded.first() {
                Some(w) if !w.is_dynamic() => {
                    let v = w.text[eq + 1..].to_string();
                    if word.text[..eq].ends_with('+') {
                        match self.lookup(name) {
                            Some(Value::Text(old)) => Value::Text(old + &v),
                            _ => Value::Runtime,
                        }
                    } else {
                        Value::Text(v)
                    }
                }
                _ => Value::Runtime,
            }
        };
        Some((name.to_string(), value))
    }

    /// Assignments on their own (`X=1; ...`), or after a keyword (`{ X=1; }`).
    pub(super) fn assign_words(&mut self, script: &Script, cmd: &Command, words: &[Word]) {
        let mode = mode(cmd);
        for w in words {
            if let Some((name, value)) = self.assignment(script, w) {
                self.assign(mode, &name, value, false);
            }
        }
    }

    /// Builtins that set or clear variables: `export`, `declare`, `read`, `unset`, `source`, ...
    pub(super) fn builtin_effects(&mut self, script: &Script, cmd: &Command, words: &[Word]) {
        let mode = mode(cmd);
        let name = basename(&words[0].text);
        let args = &words[1..];
        match name {
            "declare" | "typeset" | "local"
                if args
                    .iter()
                    .any(|a| a.text.starts_with('-') && a.text.contains('n')) =>
            {
                // `declare -n X=Y`: X names another variable from now on, whatever is assigned to either.
                for a in args.iter().filter(|a| !a.text.starts_with('-')) {
                    let n = a.text.split('=').next().unwrap_or("").to_string();
                    self.frame_mut().unstable.insert(n);
                }
            }
            "export" | "declare" | "typeset" | "local" | "readonly" => {
                let exported = name == "export"
                    || args
                        .iter()
                        .any(|a| a.text.starts_with('-') && a.text.contains('x'));
                for a in args.iter().filter(|a| !a.text.starts_with('-')) {
                    if is_assignment(a) {
                        if let Some((n, v)) = self.assignment(script, a) {
                            self.assign(mode, &n, v, exported);
                        }
                    } else if exported {
                        if let Some(Value::Text(v)) = self.lookup(&a.text) {
                            self.assign(mode, &a.text, Value::Text(v), true);
                        }
                    }
                }
            }
            "unset" if !args.iter().any(|a| a.text == "-f") => {
                for a in args.iter().filter(|a| !a.text.starts_with('-')) {
                    self.assign(mode, &a.text, Value::Text(String::new()), false);
                }
            }
            "source" | "." => {
                // The sourced file may set anything.
                let state = self.frame_mut().state_mut();
                for var in state.vars.values_mut() {
                    var.value = Value::Runtime;
                }
            }
            _ => {
                for n in input_names(name, args) {
                    self.assign(mode, &n, Value::Runtime, false);
                }
            }
        }
    }

    /// True when the line assigned `name` before this point.
    pub(super) fn assigned(&self, name: &str) -> bool {
        self.frame().is_unstable(name) || self.frame().state().vars.contains_key(name)
    }

    /// The value of `name` here, if the line assigned it (or it is `HOME` or `PWD`).
    fn lookup(&self, name: &str) -> Option<Value> {
        let frame = self.frame();
        if frame.is_unstable(name) {
            return Some(Value::Runtime);
        }
        if let Some(var) = frame.state().vars.get(name) {
            return Some(var.value.clone());
        }
        match name {
            "HOME" => self
                .env
                .home
                .as_ref()
                .map(|h| Value::Text(h.display().to_string())),
            "PWD" => Some(Value::Text(self.cwd().display().to_string())),
            _ => None,
        }
    }

    /// Expands what the guard knows in one word. With `split`, braces are expanded and an unquoted
    /// expansion is split into words as bash would (one that expands to nothing disappears); a value with
    /// spaces inside a larger word is only known at run time.
    pub(super) fn expand(&self, script: &Script, word: &Word, split: bool) -> Vec<Word> {
        if word.brace && split {
            if let Some(texts) = brace_expand(&word.text) {
                if !word.expansions.is_empty() || texts.is_empty() {
                    // `{$A,/}`: the alternatives hold values the guard would have to place; refuse to guess.
                    return vec![Word {
                        has_subst: true,
                        var_may_be_empty: false,
                        ..word.clone()
                    }];
                }
                return texts
                    .into_iter()
                    .map(|text| Word {
                        text,
                        brace: false,
                        ..word.clone()
                    })
                    .collect();
            }
        }
        if word.expansions.is_empty() {
            return vec![word.clone()];
        }
        let mut out = Word {
            quoted: word.quoted,
            glob: word.glob,
            ..Word::default()
        };
        let mut at = 0;
        let mut whole_value = None;
        for e in &word.expansions {
            out.text.push_str(&word.text[at..e.start]);
            at = e.end;
            let placeholder = &word.text[e.start..e.end];
            let resolved = match self.resolve_expansion(script, e) {
                // With `IFS` changed, an unquoted value splits where the guard does not know.
                Resolved::Value(_) if !e.quoted && self.frame().is_unstable("IFS") => {
                    Resolved::Runtime
                }
                r => r,
            };
            match resolved {
                Resolved::Value(v) => {
                    let whole = e.start == 0 && e.end == word.text.len() && !word.quoted;
                    if !e.quoted && v.contains(['*', '?', '[']) {
                        out.glob = true;
                    }
                    // Only split words see the spaces: assignments and redirections take the value whole.
                    if split && !e.quoted && v.contains(char::is_whitespace) && !whole {
                        out.has_subst = true;
                        out.text.push_str(placeholder);
                        continue;
                    }
                    if whole && split {
                        whole_value = Some(v.clone());
                    }
                    out.text.push_str(&v);
                }
                Resolved::Runtime => {
                    out.has_subst = true;
                    out.text.push_str(placeholder);
                }
                Resolved::Unknown => {
                    let start = out.text.len();
                    out.text.push_str(placeholder);
                    match &e.kind {
                        ExpansionKind::Command { .. } => out.has_subst = true,
                        // `${X:-/}`, `${X:+/}`: the value is the environment's or the operator's word,
                        // and which one is only known at run time. (`${X:?}` is trusted to be set.)
                        ExpansionKind::Param { op, .. }
                            if !op.is_empty() && !op.starts_with([':', '?'])
                                || op.starts_with(":-")
                                || op.starts_with(":=")
                                || op.starts_with(":+")
                                || op.contains(['$', '`']) =>
                        {
                            out.has_var = true;
                            out.has_subst = true;
                        }
                        _ => out.has_var = true,
                    }
                    out.var_may_be_empty |= e.may_be_empty;
                    out.expansions.push(Expansion {
                        start,
                        end: out.text.len(),
                        ..e.clone()
                    });
                }
            }
        }
        out.text.push_str(&word.text[at..]);
        if let Some(v) = whole_value {
            return v
                .split_whitespace()
                .map(|part| Word {
                    glob: part.contains(['*', '?', '[']),
                    ..Word::literal(part)
                })
                .collect();
        }
        vec![out]
    }

    /// Expands every word (splitting unquoted expansions).
    pub(super) fn expand_all(&self, script: &Script, words: &[Word]) -> Vec<Word> {
        words
            .iter()
            .flat_map(|w| self.expand(script, w, true))
            .collect()
    }

    /// Expands a word that is not split (a redirection target, a here-string).
    pub(super) fn expand_one(&self, script: &Script, word: &Word) -> Word {
        self.expand(script, word, false)
            .pop()
            .unwrap_or_else(|| Word::literal(""))
    }

    fn resolve_expansion(&self, script: &Script, e: &Expansion) -> Resolved {
        match &e.kind {
            ExpansionKind::Param { name, op } => match self.lookup(name) {
                Some(Value::Text(v)) => apply_op(v, op),
                Some(Value::Runtime) => Resolved::Runtime,
                None => Resolved::Unknown,
            },
            ExpansionKind::Command { first, end } => match script.commands.get(*first..*end) {
                Some([only]) => self.known_output(script, only),
                _ => Resolved::Unknown,
            },
            ExpansionKind::Other => Resolved::Unknown,
        }
    }

    /// The output of the few commands whose output the guard knows: `mktemp` (a fresh temporary path),
    /// `pwd`, `git rev-parse --show-toplevel`.
    fn known_output(&self, script: &Script, cmd: &Command) -> Resolved {
        let words = strip_keywords(&self.expand_all(script, &cmd.words));
        if cmd.piped_from.is_some() || cmd.pipes_out || words.iter().any(Word::is_dynamic) {
            return Resolved::Unknown;
        }
        let Some(first) = words.first() else {
            return Resolved::Unknown;
        };
        let args: Vec<&str> = words[1..].iter().map(|w| w.text.as_str()).collect();
        match (basename(&first.text), args.as_slice()) {
            ("mktemp", _) => Resolved::Value(self.mktemp_path(&args)),
            ("pwd", [] | ["-P"] | ["-L"]) => Resolved::Value(self.cwd().display().to_string()),
            ("git", ["rev-parse", "--show-toplevel"]) => {
                let cwd = self.cwd();
                let top = if cwd.starts_with(&self.env.checkout) {
                    &self.env.checkout
                } else if cwd.starts_with(&self.env.repo_root) {
                    &self.env.repo_root
                } else {
                    return Resolved::Unknown;
                };
                Resolved::Value(top.display().to_string())
            }
            _ => Resolved::Unknown,
        }
    }

    /// Where `mktemp` creates its file or directory, for judging paths below and above it: in the directory
    /// of `-p`/`--tmpdir`, else the template's own (relative to the working directory unless `-t`), else a
    /// temporary directory. The template's `X`s stay as they are: the name is new, whatever it will be.
    fn mktemp_path(&self, args: &[&str]) -> String {
        let mut dir: Option<String> = None;
        let mut in_tmp = false;
        let mut template = None;
        let mut i = 0;
        while i < args.len() {
            let a = args[i];
            match a {
                "-p" => {
                    dir = args.get(i + 1).map(|d| d.to_string());
                    i += 1;
                }
                "-t" | "--tmpdir" => in_tmp = true,
                _ if a.starts_with("--tmpdir=") => dir = Some(a["--tmpdir=".len()..].to_string()),
                _ if a.starts_with("--suffix=") => {}
                _ if a.starts_with("-p") && a.len() > 2 => dir = Some(a[2..].to_string()),
                _ if a.starts_with('-') => in_tmp |= a.contains('t'),
                _ => template = Some(a.to_string()),
            }
            i += 1;
        }
        let name = template.clone().unwrap_or_else(|| "tmp.XXXXXXXXXX".into());
        let path = match (dir, template.is_some() && !in_tmp) {
            (Some(d), _) => format!("{d}/{}", basename(&name)),
            (None, true) => name,
            (None, false) => format!("/tmp/{}", basename(&name)),
        };
        self.resolve(&path).display().to_string()
    }
}

/// Brace expansion (`a{b,c}` is `ab ac`, `{1..3}` is judged by its ends), `None` when there is none, and
/// an empty list when there would be too many words to judge.
fn brace_expand(text: &str) -> Option<Vec<String>> {
    const MAX: usize = 64;
    let chars: Vec<char> = text.chars().collect();
    for (i, _) in chars.iter().enumerate().filter(|(_, c)| **c == '{') {
        let mut depth = 0;
        let Some(j) = (i..chars.len()).find(|&k| {
            match chars[k] {
                '{' => depth += 1,
                '}' => depth -= 1,
                _ => {}
            }
            depth == 0
        }) else {
            continue;
        };
        let inner: String = chars[i + 1..j].iter().collect();
        let mut parts = Vec::new();
        let (mut d, mut start) = (0, 0);
        for (k, c) in inner.char_indices() {
            match c {
                '{' => d += 1,
                '}' => d -= 1,
                ',' if d == 0 => {
                    parts.push(inner[start..k].to_string());
                    start = k + 1;
                }
                _ => {}
            }
        }
        parts.push(inner[start..].to_string());
        if parts.len() == 1 {
            match inner.split_once("..") {
                Some((a, b)) if !a.is_empty() && !b.is_empty() => {
                    parts = vec![a.to_string(), b.split("..").next().unwrap_or(b).to_string()]
                }
                _ => continue,
            }
        }
        let prefix: String = chars[..i].iter().collect();
        let suffix: String = chars[j + 1..].iter().collect();
        let mut out = Vec::new();
        for part in parts {
            let joined = format!("{prefix}{part}{suffix}");
            out.extend(brace_expand(&joined).unwrap_or_else(|| vec![joined]));
            if out.len() > MAX {
                // Too many to judge one by one (the caller refuses to guess).
                return Some(Vec::new());
            }
        }
        return Some(out);
    }
    None
}

/// `${X<op>}` for a known value of X.
fn apply_op(v: String, op: &str) -> Resolved {
    let literal = |w: &str| {
        if w.contains(['$', '`', '\'', '"', '\\', '*', '?', '[', '~']) {
            Resolved::Runtime
        } else {
            Resolved::Value(w.to_string())
        }
    };
    let set_or_empty = |colon: bool| !v.is_empty() || !colon;
    let (colon, rest) = match op.strip_prefix(':') {
        Some(r) if r.starts_with(['-', '=', '?', '+']) => (true, r),
        _ => (false, op),
    };
    match rest.chars().next() {
        None => Resolved::Value(v),
        Some('-' | '=') if set_or_empty(colon) => Resolved::Value(v),
        Some('-' | '=') => literal(&rest[1..]),
        Some('?') if set_or_empty(colon) => Resolved::Value(v),
        Some('?') => Resolved::Runtime,
        Some('+') if set_or_empty(colon) => literal(&rest[1..]),
        Some('+') => Resolved::Value(String::new()),
        Some('%') => {
            let pat = rest.trim_start_matches('%');
            match literal(pat) {
                Resolved::Value(p) => Resolved::Value(v.strip_suffix(&p).unwrap_or(&v).to_string()),
                _ => Resolved::Runtime,
            }
        }
        Some('#') => {
            let pat = rest.trim_start_matches('#');
            match literal(pat) {
                Resolved::Value(p) => Resolved::Value(v.strip_prefix(&p).unwrap_or(&v).to_string()),
                _ => Resolved::Runtime,
            }
        }
        Some(_) => Resolved::Runtime,
    }
}
