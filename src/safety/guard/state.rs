//! The shell state the guard tracks while it reads a line (see [`super::vars`] for what it knows and when):
//! values, per-subshell frames, and the pre-scan for names whose value depends on what ran. Plain data the
//! checker carries, apart from the checker that fills it.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use super::super::shell::{is_assignment, Command, Script, Word};
use super::words::{basename, split_options, strip_keywords};

/// A variable's value as far as the guard knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Value {
    Text(String),
    /// Set, but to something only known at run time.
    Runtime,
}

#[derive(Clone, Debug)]
pub(super) struct Var {
    pub(super) value: Value,
    pub(super) exported: bool,
}

/// The shell state of one (sub)shell at the current point of the line.
#[derive(Clone, Debug)]
pub(super) struct State {
    pub(super) cwd: PathBuf,
    /// Where `cd -` goes.
    pub(super) oldcwd: Option<PathBuf>,
    /// The `pushd` stack (`popd` returns to its last entry).
    pub(super) dirs: Vec<PathBuf>,
    pub(super) vars: HashMap<String, Var>,
    /// Names assigned after an `&&` of the current list: certain while the list goes on, not after it
    /// (`a && X=1; rm "$X"` runs `rm` even when `a` failed).
    pub(super) pending: Vec<String>,
}

impl State {
    pub(super) fn new(cwd: PathBuf) -> State {
        State {
            cwd,
            oldcwd: None,
            dirs: Vec::new(),
            vars: HashMap::new(),
            pending: Vec::new(),
        }
    }

    /// The state a new shell process starts in: this directory, this shell's exported variables unless
    /// the environment is cleared (`env -i`, `sudo`), and `extra` (`X=1 bash -c ...`, `env X=1 ...`).
    pub(super) fn child(&self, extra: &[(String, Value)], clear_env: bool) -> State {
        let mut child = State::new(self.cwd.clone());
        if !clear_env {
            for (name, var) in self.vars.iter().filter(|(_, v)| v.exported) {
                child.vars.insert(name.clone(), var.clone());
            }
        }
        for (name, value) in extra {
            child.vars.insert(
                name.clone(),
                Var {
                    value: value.clone(),
                    exported: true,
                },
            );
        }
        child
    }

    /// `cd`, `pushd`, `popd`: the shell sets `PWD` and `OLDPWD` itself, so values assigned to them before
    /// no longer hold.
    pub(super) fn move_to(&mut self, how: &str, dir: PathBuf) {
        match how {
            "pushd" => self.dirs.push(self.cwd.clone()),
            "popd" => {
                self.dirs.pop();
            }
            _ => {}
        }
        self.vars.remove("PWD");
        self.vars.remove("OLDPWD");
        self.oldcwd = Some(std::mem::replace(&mut self.cwd, dir));
    }

    pub(super) fn set(&mut self, name: &str, value: Value, exported: bool) {
        let exported = exported || self.vars.get(name).is_some_and(|v| v.exported);
        self.vars.insert(name.to_string(), Var { value, exported });
    }

    /// The pending names of the list that just ended (or met an `||`) become uncertain.
    pub(super) fn settle(&mut self) {
        for name in std::mem::take(&mut self.pending) {
            if let Some(var) = self.vars.get_mut(&name) {
                var.value = Value::Runtime;
            }
        }
    }
}

/// The shell state of one script (the line, or a script nested in it such as `bash -c '...'`).
pub(super) struct Frame {
    /// The state of the subshell the current command runs in.
    current: State,
    /// Its scope (see [`Command::scope`]).
    scope: Vec<u32>,
    /// The states of the other subshells seen so far, by scope.
    others: HashMap<Vec<u32>, State>,
    /// Names whose value at a later command depends on what ran (see [`unstable_names`]): never known.
    pub(super) unstable: HashSet<String>,
    /// `trap` bodies, checked when the script ends (that is when they run, with the values of then).
    pub(super) traps: Vec<String>,
}

impl Frame {
    pub(super) fn new(start: State, script: &Script) -> Frame {
        Frame {
            current: start,
            scope: Vec::new(),
            others: HashMap::new(),
            unstable: unstable_names(script),
            traps: Vec::new(),
        }
    }

    /// Moves to `scope`; a subshell seen for the first time starts as a copy of its parent as it is now.
    pub(super) fn enter(&mut self, scope: &[u32]) {
        if self.scope == scope {
            return;
        }
        let next = self.others.remove(scope).unwrap_or_else(|| {
            let parent = (0..scope.len()).rev().map(|n| &scope[..n]).find_map(|p| {
                if p == self.scope.as_slice() {
                    Some(&self.current)
                } else {
                    self.others.get(p)
                }
            });
            // The top level (`[]`) is always either current or among the others, so a parent is found.
            let mut state = parent.unwrap_or(&self.current).clone();
            // The subshell exists only when its parent's list got this far: what is pending there holds.
            state.pending.clear();
            state
        });
        let previous = std::mem::replace(&mut self.current, next);
        let left = std::mem::replace(&mut self.scope, scope.to_vec());
        self.others.insert(left, previous);
    }

    pub(super) fn scope(&self) -> &[u32] {
        &self.scope
    }

    pub(super) fn is_unstable(&self, name: &str) -> bool {
        self.unstable.contains(name) || self.unstable.contains(ANY)
    }

    pub(super) fn state(&self) -> &State {
        &self.current
    }

    pub(super) fn state_mut(&mut self) -> &mut State {
        &mut self.current
    }

    /// The state of the script's own shell when it ends.
    pub(super) fn into_top(mut self) -> State {
        self.enter(&[]);
        self.current
    }
}

/// In [`Frame::unstable`]: a body runs `eval` or `source`, which may assign any name.
const ANY: &str = "*";

/// Whether a command's assignments and `cd` last, and how sure they are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Mode {
    /// A pipeline member or background job: it runs in a subshell, nothing reaches the commands after it.
    Lost,
    /// It runs whenever the commands after it do.
    Certain,
    /// After an `&&`: certain until its list ends.
    Pending,
    /// After an `||`: it may not have run.
    Uncertain,
}

pub(super) fn mode(cmd: &Command) -> Mode {
    if cmd.background || cmd.pipes_out || cmd.piped_from.is_some() {
        return Mode::Lost;
    }
    match cmd.op {
        None => Mode::Certain,
        Some("&&") => Mode::Pending,
        Some(_) => Mode::Uncertain,
    }
}

/// Names a builtin sets from input: `read`, `mapfile`/`readarray`, `printf -v`, `getopts`.
pub(super) fn input_names(name: &str, args: &[Word]) -> Vec<String> {
    let texts: Vec<&str> = args.iter().map(|a| a.text.as_str()).collect();
    match name {
        "read" => {
            let mut names = Vec::new();
            let mut i = 0;
            while i < texts.len() {
                let t = texts[i];
                if t == "-a" {
                    names.extend(texts.get(i + 1).map(|s| s.to_string()));
                    i += 2;
                } else if matches!(t, "-p" | "-d" | "-n" | "-N" | "-t" | "-u" | "-i") {
                    i += 2;
                } else if t.starts_with('-') {
                    i += 1;
                } else {
                    names.push(t.to_string());
                    i += 1;
                }
            }
            if names.is_empty() {
                names.push("REPLY".into());
            }
            names
        }
        "mapfile" | "readarray" => {
            let (_, operands) = split_options(args);
            vec![operands
                .last()
                .map_or("MAPFILE".to_string(), |w| w.text.clone())]
        }
        "printf" => texts
            .iter()
            .position(|t| *t == "-v")
            .and_then(|p| texts.get(p + 1))
            .map(|n| vec![n.to_string()])
            .unwrap_or_default(),
        "getopts" => texts
            .get(1)
            .map(|n| vec![n.to_string()])
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// Every name a command may assign, for the pre-scan of bodies.
fn assigned_names(cmd: &Command) -> Vec<String> {
    let words = strip_keywords(&cmd.words);
    let lead = words.iter().take_while(|w| is_assignment(w)).count();
    let mut names: Vec<String> = cmd
        .assignments
        .iter()
        .chain(&words[..lead])
        .filter(|_| words.len() == lead)
        .filter_map(|w| {
            w.text.split_once('=').map(|(n, _)| {
                let n = n.trim_end_matches('+');
                n.split('[').next().unwrap_or(n).to_string()
            })
        })
        .collect();
    let rest = &words[lead..];
    if let Some(first) = rest.first() {
        let name = basename(&first.text);
        let args = &rest[1..];
        match name {
            "export" | "declare" | "typeset" | "local" | "readonly" | "unset" => names.extend(
                args.iter()
                    .filter(|a| !a.text.starts_with('-'))
                    .map(|a| a.text.split('=').next().unwrap_or("").to_string()),
            ),
            "eval" | "source" | "." => names.push(ANY.to_string()),
            _ => names.extend(input_names(name, args)),
        }
    }
    names
}

/// Names assigned in a branch, loop or function body (or named by `for`/`select`), in a `{ ...; }` group that
/// is part of a pipeline or runs in the background, or in the last command of a pipeline under `shopt -s
/// lastpipe`: which value they have at a later command depends on what ran, so the guard never takes them as
/// known. `IFS` is in the set when the line assigns it (word splitting is then not what the guard assumes).
fn unstable_names(script: &Script) -> HashSet<String> {
    let functions = script.commands.iter().any(|c| {
        c.defines.is_some()
            || c.words
                .first()
                .is_some_and(|w| w.text == "function" && !w.quoted)
    });
    let lastpipe = script.commands.iter().any(|c| {
        c.words.first().is_some_and(|w| w.text == "shopt")
            && c.words.iter().any(|w| w.text == "lastpipe")
    });
    let mut depth: HashMap<&[u32], usize> = HashMap::new();
    // Open `{` groups per scope: whether the group is piped into, and the names assigned in it so far.
    let mut groups: HashMap<&[u32], Vec<(bool, Vec<String>)>> = HashMap::new();
    let mut names = HashSet::new();
    for cmd in &script.commands {
        let d = depth.entry(cmd.scope.as_slice()).or_default();
        let open = groups.entry(cmd.scope.as_slice()).or_default();
        let mut inside = *d > 0;
        let mut closes = 0;
        for (i, w) in cmd.words.iter().enumerate() {
            if w.quoted {
                break;
            }
            match w.text.as_str() {
                "if" | "while" | "until" | "case" => {
                    *d += 1;
                    inside = true;
                }
                "for" | "select" => {
                    *d += 1;
                    inside = true;
                    names.extend(cmd.words.get(i + 1).map(|n| n.text.clone()));
                    break;
                }
                "fi" | "done" | "esac" => *d = d.saturating_sub(1),
                "{" => open.push((cmd.piped_from.is_some(), Vec::new())),
                "}" => closes += 1,
                "then" | "else" | "elif" | "do" | "!" | "in" => {}
                _ => break,
            }
        }
        let assigned = assigned_names(cmd);
        for (_, inner) in open.iter_mut() {
            inner.extend(assigned.iter().cloned());
        }
        for _ in 0..closes {
            if let Some((piped_in, inner)) = open.pop() {
                if piped_in || cmd.pipes_out || cmd.background {
                    names.extend(inner);
                }
            }
        }
        let last_of_pipe = cmd.piped_from.is_some() && !cmd.pipes_out;
        if inside || functions || (lastpipe && last_of_pipe) {
            names.extend(assigned.iter().cloned());
        }
        if assigned.iter().any(|n| n == "IFS") {
            names.insert("IFS".to_string());
        }
    }
    names
}
