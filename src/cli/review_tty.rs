//! The interactive walk of `git agent review`: one hunk at a time, as `git add -p` asks, answers read as
//! lines from the terminal (git's default: no raw mode, so it works in any terminal and under tmux).
//!
//! What the diff shows comes from the model: it is neutralised ([`crate::ui::neutralize`]) before it reaches
//! the terminal, like everything else git-agent prints from a session.

use std::io::{BufRead, Write};
use std::process::Stdio;

use super::error::CommandError;
use crate::store::hunks::{FileChange, Hunk};
use crate::store::review::Verdict;
use crate::store::Store;
use crate::ui::neutralize;

/// One decision on a unit of the change: a hunk (possibly split or edited) or a whole path.
pub(super) struct Unit {
    /// Index into the change's files.
    pub file: usize,
    /// The hunk, or `None` for the whole path (every hunk, or a path that is not text).
    pub hunk: Option<Hunk>,
    /// The hunk's place among the path's hunks as `--list` numbers them (split parts keep their hunk's).
    pub index: Option<usize>,
    pub verdict: Verdict,
    pub comment: Option<String>,
}

const HELP: &str = "\
y - take this hunk
n - leave this hunk
c - leave this hunk with a comment (the agent gets it on resume)
s - split this hunk into smaller hunks
e - edit this hunk, then take it
a - take this hunk and the rest of the file
d - leave this hunk and the rest of the file
q - quit; hunks not decided stay as they are
? - print help";

/// What is still to decide in a file: a hunk with its `--list` index, or the whole path.
struct Pending {
    hunk: Option<Hunk>,
    index: Option<usize>,
}

/// Walks every file's hunks on the terminal and returns the decisions made (those before `q`).
pub(super) fn walk(store: &Store, changes: &[FileChange]) -> Result<Vec<Unit>, CommandError> {
    let color = crate::ui::use_color(&std::io::stdout());
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let mut out = std::io::stdout().lock();
    let mut units = Vec::new();
    for (file, change) in changes.iter().enumerate() {
        let mut pending: Vec<Pending> = if change.whole.is_some() {
            vec![Pending {
                hunk: None,
                index: None,
            }]
        } else {
            change
                .hunks
                .iter()
                .enumerate()
                .map(|(i, h)| Pending {
                    hunk: Some(h.clone()),
                    index: Some(i),
                })
                .collect()
        };
        let title = format!("diff --git a/{0} b/{0}", neutralize(&change.path));
        say(&mut out, &paint(color, "1", &title))?;
        let mut at = 0;
        // `a` / `d`: the rest of the file gets this verdict.
        let mut rest: Option<Verdict> = None;
        while at < pending.len() {
            let current = &pending[at];
            if let Some(verdict) = rest {
                units.push(unit(file, current, verdict, None));
                at += 1;
                continue;
            }
            show(&mut out, change, current, color)?;
            let splittable = current.hunk.as_ref().and_then(Hunk::split).is_some();
            let options = match (&current.hunk, splittable) {
                (Some(_), true) => "y,n,c,s,e,a,d,q,?",
                (Some(_), false) => "y,n,c,e,a,d,q,?",
                (None, _) => "y,n,c,a,d,q,?",
            };
            let what = if current.hunk.is_some() {
                "this hunk"
            } else {
                "this change"
            };
            let question = format!("({}/{}) Take {what} [{options}]? ", at + 1, pending.len());
            let Some(answer) = ask(&mut input, &mut out, &paint(color, "1;34", &question))? else {
                return Ok(units); // end of input: as `q`
            };
            match answer.as_str() {
                "y" => {
                    units.push(unit(file, current, Verdict::Take, None));
                    at += 1;
                }
                "n" => {
                    units.push(unit(file, current, Verdict::Leave, None));
                    at += 1;
                }
                "c" => {
                    let Some(comment) = ask(&mut input, &mut out, "Comment: ")? else {
                        return Ok(units);
                    };
                    let comment = Some(comment).filter(|c| !c.is_empty());
                    units.push(unit(file, current, Verdict::Leave, comment));
                    at += 1;
                }
                "s" if splittable => {
                    let parts = current
                        .hunk
                        .as_ref()
                        .and_then(Hunk::split)
                        .unwrap_or_default();
                    say(&mut out, &format!("Split into {} hunks.", parts.len()))?;
                    let index = current.index;
                    let parts = parts.into_iter().map(|h| Pending {
                        hunk: Some(h),
                        index,
                    });
                    pending.splice(at..=at, parts);
                }
                "e" if current.hunk.is_some() => {
                    if let Some(edited) = edit(store, &mut out, current)? {
                        let index = current.index;
                        units.push(Unit {
                            file,
                            hunk: Some(edited),
                            index,
                            verdict: Verdict::Take,
                            comment: None,
                        });
                        at += 1;
                    }
                }
                "a" => rest = Some(Verdict::Take),
                "d" => rest = Some(Verdict::Leave),
                "q" => return Ok(units),
                _ => say(&mut out, HELP)?,
            }
        }
    }
    Ok(units)
}

fn unit(file: usize, pending: &Pending, verdict: Verdict, comment: Option<String>) -> Unit {
    Unit {
        file,
        hunk: pending.hunk.clone(),
        index: pending.index,
        verdict,
        comment,
    }
}

/// Prints the hunk (or what the whole-path change is), coloured as `git diff` colours it.
fn show(
    out: &mut impl Write,
    change: &FileChange,
    pending: &Pending,
    color: bool,
) -> Result<(), CommandError> {
    let Some(hunk) = &pending.hunk else {
        let why = change.whole.unwrap_or("a change");
        return say(out, &format!("({why}: taken or left as a whole)"));
    };
    let mut text = paint(color, "36", &hunk.header());
    for line in neutralize(&hunk.text()).lines() {
        text.push('\n');
        text.push_str(&match line.chars().next() {
            Some('-') => paint(color, "31", line),
            Some('+') => paint(color, "32", line),
            _ => line.to_owned(),
        });
    }
    say(out, &text)
}

/// `e`: the hunk in the user's editor (git's `GIT_EDITOR` choice); `None` when the edit was abandoned or
/// does not fit the file (said on the terminal; the hunk is asked about again).
fn edit(
    store: &Store,
    out: &mut impl Write,
    pending: &Pending,
) -> Result<Option<Hunk>, CommandError> {
    let Some(hunk) = &pending.hunk else {
        return Ok(None);
    };
    let dir = store.common_dir().join("agent").join("tmp");
    std::fs::create_dir_all(&dir)
        .map_err(|e| CommandError::internal(format!("cannot create {}: {e}", dir.display())))?;
    // A fresh name for each edit, created exclusively and removed when dropped, whatever the editor did.
    let file = tempfile::Builder::new()
        .prefix("REVIEW_HUNK-")
        .suffix(".diff")
        .tempfile_in(&dir)
        .map_err(|e| {
            CommandError::internal(format!("cannot create a file in {}: {e}", dir.display()))
        })?;
    let path = file.path().to_path_buf();
    let text = format!(
        "# Manual hunk edit mode -- the hunk below is taken as you leave it.\n\
         # To keep a '-' line, make it a ' ' line; to drop a '+' line, delete it.\n\
         # Lines starting with # are ignored.\n{}\n{}",
        hunk.header(),
        hunk.text()
    );
    std::fs::write(&path, text)
        .map_err(|e| CommandError::internal(format!("cannot write {}: {e}", path.display())))?;
    let editor = store
        .git_output(&["var", "GIT_EDITOR"])
        .map(|o| String::from_utf8_lossy(&o).trim().to_owned())
        .unwrap_or_else(|_| "vi".to_owned());
    // As git runs it: through the shell, so `GIT_EDITOR="code --wait"` works.
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("{editor} \"$@\""))
        .arg(&editor)
        .arg(&path)
        .stdin(Stdio::inherit())
        .status();
    let result = std::fs::read_to_string(&path);
    drop(file);
    if !matches!(status, Ok(s) if s.success()) {
        say(out, "The editor failed; the hunk is unchanged.")?;
        return Ok(None);
    }
    let edited =
        result.map_err(|e| CommandError::internal(format!("cannot read the edit: {e}")))?;
    // The header line is ours, not part of the hunk.
    let body: String = edited
        .split_inclusive('\n')
        .filter(|l| !l.starts_with("@@"))
        .collect();
    match hunk.edited(&body) {
        Ok(hunk) => Ok(Some(hunk)),
        Err(why) => {
            say(out, &format!("{why}; the hunk is unchanged."))?;
            Ok(None)
        }
    }
}

/// Prints `question` and reads one line (trimmed); `None` at the end of input.
fn ask(
    input: &mut impl BufRead,
    out: &mut impl Write,
    question: &str,
) -> Result<Option<String>, CommandError> {
    write!(out, "{question}")
        .and_then(|()| out.flush())
        .map_err(terminal)?;
    let mut line = String::new();
    let n = input.read_line(&mut line).map_err(terminal)?;
    Ok((n > 0).then(|| line.trim().to_owned()))
}

fn say(out: &mut impl Write, text: &str) -> Result<(), CommandError> {
    writeln!(out, "{text}").map_err(terminal)
}

fn terminal(e: std::io::Error) -> CommandError {
    CommandError::internal(format!("the terminal failed: {e}"))
}

fn paint(color: bool, code: &str, text: &str) -> String {
    if color {
        format!("\x1b[{code}m{text}\x1b[0m")
    } else {
        text.to_owned()
    }
}
