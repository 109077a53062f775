//! A change cut into hunks, and a file rebuilt from some of them: what `review` takes and leaves.
//!
//! A hunk is what `git diff` shows (three lines of context, `@@ -a,b +c,d @@`), but what it *changes* is kept
//! apart from what it *shows*: a list of blocks (replace old lines `start..start+len` by these new lines),
//! without context. Taking a subset of hunks is then exact: [`apply()`] replaces, in the base version, the
//! blocks of the hunks taken and nothing else, so the "theirs" that `review` lands has the taken hunks and
//! only them; context lines never decide anything, and split hunks (which share context) never overlap.
//! The file so built goes through the same three-way landing as `accept` ([`super`], the landing).
//!
//! Only UTF-8 text is cut into hunks; anything else (binary, links, submodules, a change of mode alone) is
//! one decision for the whole path ([`FileChange::whole`]).

use similar::{DiffOp, TextDiff};

use super::Side;
use crate::store::repo::{Store, StoreError};
use gix::ObjectId;

/// Lines of context around a change, as git shows them.
const CONTEXT: usize = 3;

/// One replacement: old lines `old_start..old_start + old_len` become `new`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Block {
    old_start: usize,
    old_len: usize,
    new: Vec<String>,
}

/// A hunk as shown, with the blocks it changes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hunk {
    /// The shown range, 0-based, in the old and the new version.
    pub old_start: usize,
    pub old_len: usize,
    pub new_start: usize,
    pub new_len: usize,
    /// The shown lines: `' '`, `'-'` or `'+'` and the line with its newline (if it has one).
    pub lines: Vec<(char, String)>,
    blocks: Vec<Block>,
    /// Edited by the reviewer (`e`): it no longer is one of the change's own hunks.
    pub edited: bool,
}

impl Hunk {
    /// `@@ -a,b +c,d @@` exactly as git prints it: 1-based, `,1` left out, an empty side numbered by the line
    /// before it.
    pub fn header(&self) -> String {
        let side = |start: usize, len: usize| match len {
            0 => format!("{start},0"),
            1 => format!("{}", start + 1),
            _ => format!("{},{len}", start + 1),
        };
        format!(
            "@@ -{} +{} @@",
            side(self.old_start, self.old_len),
            side(self.new_start, self.new_len)
        )
    }

    /// The hunk as `git diff` prints it after its header (`\ No newline at end of file` included).
    pub fn text(&self) -> String {
        let mut out = String::new();
        for (tag, line) in &self.lines {
            out.push(*tag);
            out.push_str(line);
            if !line.ends_with('\n') {
                out.push_str("\n\\ No newline at end of file\n");
            }
        }
        out
    }

    /// The hunk cut at its inner context into one hunk per change, as `git add -p`'s `s` does; `None` when
    /// it has a single change.
    pub fn split(&self) -> Option<Vec<Hunk>> {
        if self.blocks.len() < 2 || self.edited {
            return None;
        }
        // Each block's shown lines: the context before it (up to CONTEXT lines since the previous block),
        // its own '-' and '+' lines, the context after it.
        let mut parts = Vec::new();
        let mut old = self.old_start;
        let mut new = self.new_start;
        let mut at = 0; // index into self.lines
        for (n, block) in self.blocks.iter().enumerate() {
            let mut lines = Vec::new();
            // Context lines between the previous block and this one.
            let mut context = Vec::new();
            while old < block.old_start {
                context.push(self.lines[at].clone());
                at += 1;
                old += 1;
                new += 1;
            }
            let lead = context.len().min(CONTEXT);
            let (start_old, start_new) = (old - lead, new - lead);
            lines.extend(context[context.len() - lead..].iter().cloned());
            while at < self.lines.len() && self.lines[at].0 != ' ' {
                let line = self.lines[at].clone();
                if line.0 == '-' {
                    old += 1;
                } else {
                    new += 1;
                }
                lines.push(line);
                at += 1;
            }
            // Context after: up to CONTEXT lines, not past the next block.
            let limit = self
                .blocks
                .get(n + 1)
                .map_or(usize::MAX, |next| next.old_start);
            let mut k = at;
            let mut o = old;
            while k < self.lines.len() && self.lines[k].0 == ' ' && o < limit && k - at < CONTEXT {
                lines.push(self.lines[k].clone());
                k += 1;
                o += 1;
            }
            let old_len = lines.iter().filter(|(t, _)| *t != '+').count();
            let new_len = lines.iter().filter(|(t, _)| *t != '-').count();
            parts.push(Hunk {
                old_start: start_old,
                old_len,
                new_start: start_new,
                new_len,
                lines,
                blocks: vec![block.clone()],
                edited: false,
            });
        }
        Some(parts)
    }

    /// The hunk as the reviewer edited it (`e`): `text` in the form [`Hunk::text()`] gives (lines starting
    /// with `#` are ignored). Its `' '` and `'-'` lines must be the hunk's own old lines, unchanged: what may
    /// change is the `'+'` lines, and a `'-'` may become a `' '` (keep the line). Otherwise an error saying so.
    pub fn edited(&self, text: &str) -> Result<Hunk, String> {
        let mut lines: Vec<(char, String)> = Vec::new();
        for raw in text.split_inclusive('\n') {
            if raw.starts_with('#') || raw.starts_with('\\') {
                continue;
            }
            let mut chars = raw.chars();
            let tag = match chars.next() {
                Some(t @ (' ' | '-' | '+')) => t,
                // An empty line is a context line whose leading space an editor dropped.
                Some('\n') => {
                    lines.push((' ', "\n".to_owned()));
                    continue;
                }
                None => continue,
                Some(other) => {
                    return Err(format!(
                        "a line of the edited hunk starts with {other:?}: every line must start with ' ', '-' or '+'"
                    ))
                }
            };
            lines.push((tag, chars.as_str().to_owned()));
        }
        let old_of = |lines: &[(char, String)]| -> String {
            lines
                .iter()
                .filter(|(t, _)| *t != '+')
                .map(|(_, l)| l.trim_end_matches('\n'))
                .collect::<Vec<_>>()
                .join("\n")
        };
        if old_of(&lines) != old_of(&self.lines) {
            return Err("the edited hunk does not match the file: change only '+' lines, or turn a '-' into ' ' to keep a line".into());
        }
        // The last old line may have no newline (end of file): give the same line of the edit the same.
        if let Some((_, last)) = self.lines.iter().rev().find(|(t, _)| *t != '+') {
            if !last.ends_with('\n') {
                if let Some((_, line)) = lines.iter_mut().rev().find(|(t, _)| *t != '+') {
                    *line = line.trim_end_matches('\n').to_owned();
                }
            }
        }
        let new: Vec<String> = lines
            .iter()
            .filter(|(t, _)| *t != '-')
            .map(|(_, l)| l.clone())
            .collect();
        let old: Vec<String> = lines
            .iter()
            .filter(|(t, _)| *t != '+')
            .map(|(_, l)| l.clone())
            .collect();
        // One block over the shown range, trimmed to what really differs, so it cannot overlap a neighbour's
        // context.
        let lead = old.iter().zip(&new).take_while(|(a, b)| a == b).count();
        let tail = old[lead..]
            .iter()
            .rev()
            .zip(new[lead..].iter().rev())
            .take_while(|(a, b)| a == b)
            .count();
        let blocks = if lead == old.len() && lead == new.len() {
            Vec::new()
        } else {
            vec![Block {
                old_start: self.old_start + lead,
                old_len: old.len() - lead - tail,
                new: new[lead..new.len() - tail].to_vec(),
            }]
        };
        Ok(Hunk {
            old_start: self.old_start,
            old_len: old.len(),
            new_start: self.new_start,
            new_len: new.len(),
            lines,
            blocks,
            edited: true,
        })
    }
}

/// The hunks of the change from `old` to `new`, as `git diff` cuts them.
pub fn hunks(old: &str, new: &str) -> Vec<Hunk> {
    let diff = TextDiff::from_lines(old, new);
    let (olds, news) = (diff.old_slices(), diff.new_slices());
    let mut out = Vec::new();
    for group in diff.grouped_ops(CONTEXT) {
        let (Some(first), Some(last)) = (group.first(), group.last()) else {
            continue;
        };
        let old_start = first.old_range().start;
        let new_start = first.new_range().start;
        let mut lines = Vec::new();
        let mut blocks: Vec<Block> = Vec::new();
        let mut previous_changed = false;
        for op in &group {
            let (o, n) = (op.old_range(), op.new_range());
            if let DiffOp::Equal { .. } = op {
                lines.extend(olds[o].iter().map(|l| (' ', (*l).to_owned())));
                previous_changed = false;
                continue;
            }
            lines.extend(olds[o.clone()].iter().map(|l| ('-', (*l).to_owned())));
            lines.extend(news[n.clone()].iter().map(|l| ('+', (*l).to_owned())));
            let new_lines: Vec<String> = news[n].iter().map(|l| (*l).to_owned()).collect();
            match blocks.last_mut() {
                Some(block) if previous_changed => {
                    block.old_len += o.len();
                    block.new.extend(new_lines);
                }
                _ => blocks.push(Block {
                    old_start: o.start,
                    old_len: o.len(),
                    new: new_lines,
                }),
            }
            previous_changed = true;
        }
        out.push(Hunk {
            old_start,
            old_len: last.old_range().end - old_start,
            new_start,
            new_len: last.new_range().end - new_start,
            lines,
            blocks,
            edited: false,
        });
    }
    out
}

/// `old` with the blocks of `taken` applied and nothing else; an error when two of them overlap (edited
/// hunks that were widened into each other).
pub fn apply(old: &str, taken: &[&Hunk]) -> Result<String, String> {
    let lines: Vec<&str> = old.split_inclusive('\n').collect();
    let mut blocks: Vec<&Block> = taken.iter().flat_map(|h| &h.blocks).collect();
    blocks.sort_by_key(|b| (b.old_start, b.old_len));
    let mut out = String::with_capacity(old.len());
    let mut at = 0;
    for block in blocks {
        if block.old_start < at || block.old_start + block.old_len > lines.len() {
            return Err("two of the hunks taken overlap: take one, or edit them into one".into());
        }
        lines[at..block.old_start]
            .iter()
            .for_each(|l| out.push_str(l));
        block.new.iter().for_each(|l| out.push_str(l));
        at = block.old_start + block.old_len;
    }
    lines[at..].iter().for_each(|l| out.push_str(l));
    Ok(out)
}

/// One path of a change, ready to be reviewed.
#[derive(Clone, Debug)]
pub struct FileChange {
    pub path: String,
    pub base: Side,
    pub theirs: Side,
    /// The change as hunks, when it is a change of UTF-8 text.
    pub hunks: Vec<Hunk>,
    /// Why the path is one decision (`binary file`, `symbolic link`, ...), when it is not cut into hunks.
    pub whole: Option<&'static str>,
}

impl FileChange {
    /// Theirs with only `taken` applied to the base: theirs itself when every hunk of the change is taken
    /// unedited (so deletions, modes and whole-path changes land exactly), the base when none is.
    pub fn theirs_with(&self, taken: &[&Hunk]) -> Result<Side, String> {
        let all = self.whole.is_some()
            || (!taken.is_empty()
                && taken.iter().all(|h| !h.edited)
                && self.hunks.iter().all(|h| taken.contains(&h)));
        if all {
            return Ok(self.theirs.clone());
        }
        let base = match &self.base {
            Side::File { data, .. } => String::from_utf8_lossy(data).into_owned(),
            _ => String::new(),
        };
        let executable = match (&self.theirs, &self.base) {
            (Side::File { executable, .. }, _) | (_, Side::File { executable, .. }) => *executable,
            _ => false,
        };
        Ok(Side::File {
            data: apply(&base, taken)?.into_bytes(),
            executable,
        })
    }
}

impl Store {
    /// The change `from..to` path by path, cut into hunks where it is text.
    pub fn file_changes(
        &self,
        from: ObjectId,
        to: ObjectId,
    ) -> Result<Vec<FileChange>, StoreError> {
        let mut out = Vec::new();
        for change in self.changes(from, to)? {
            let base = self.side_at(from, &change.path)?;
            let theirs = self.side_at(to, &change.path)?;
            let text = |side: &Side| -> Option<String> {
                match side {
                    Side::Missing => Some(String::new()),
                    Side::File { .. } => {
                        side.text().and_then(|t| String::from_utf8(t.to_vec()).ok())
                    }
                    _ => None,
                }
            };
            let (hunks, whole) = match (text(&base), text(&theirs)) {
                (Some(old), Some(new)) => {
                    let hunks = hunks(&old, &new);
                    if hunks.is_empty() {
                        (hunks, Some("a change of mode"))
                    } else {
                        (hunks, None)
                    }
                }
                _ => (Vec::new(), Some(whole_reason(&base, &theirs))),
            };
            out.push(FileChange {
                path: change.path,
                base,
                theirs,
                hunks,
                whole,
            });
        }
        Ok(out)
    }
}

fn whole_reason(base: &Side, theirs: &Side) -> &'static str {
    match (base, theirs) {
        (Side::Symlink { .. }, _) | (_, Side::Symlink { .. }) => "a symbolic link",
        (Side::Submodule, _) | (_, Side::Submodule) => "a submodule",
        _ => "a binary file",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OLD: &str = "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\nl\nm\nn\n";

    #[test]
    fn hunks_are_cut_as_git_cuts_them() {
        let new = "A\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\nl\nm\nN\n";
        let hunks = hunks(OLD, new);
        assert_eq!(hunks.len(), 2);
        assert_eq!(hunks[0].header(), "@@ -1,4 +1,4 @@");
        assert_eq!(hunks[0].text(), "-a\n+A\n b\n c\n d\n");
        assert_eq!(hunks[1].header(), "@@ -11,4 +11,4 @@");
        // Any subset lands exactly that subset.
        assert_eq!(apply(OLD, &[]).unwrap(), OLD);
        assert_eq!(apply(OLD, &[&hunks[0], &hunks[1]]).unwrap(), new);
        assert_eq!(
            apply(OLD, &[&hunks[1]]).unwrap(),
            "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\nl\nm\nN\n"
        );
        assert_eq!(apply(OLD, &[&hunks[0]]).unwrap(), OLD.replacen('a', "A", 1));
    }

    #[test]
    fn a_hunk_splits_at_its_inner_context() {
        let new = "a\nB\nc\nd\nE\nf\ng\nh\ni\nj\nk\nl\nm\nn\n";
        let hunks = hunks(OLD, new);
        assert_eq!(hunks.len(), 1);
        let parts = hunks[0].split().unwrap();
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0].text(), " a\n-b\n+B\n c\n d\n");
        assert_eq!(parts[1].text(), " c\n d\n-e\n+E\n f\n g\n h\n");
        assert_eq!(parts[1].header(), "@@ -3,6 +3,6 @@");
        assert_eq!(
            apply(OLD, &[&parts[1]]).unwrap(),
            OLD.replacen("e\n", "E\n", 1)
        );
        assert_eq!(apply(OLD, &[&parts[0], &parts[1]]).unwrap(), new);
        assert!(parts[0].split().is_none());
    }

    #[test]
    fn an_edited_hunk_lands_as_edited_and_a_wrong_edit_is_refused() {
        let new = "a\nb\nC\nd\ne\nf\ng\nh\ni\nj\nk\nl\nm\nn\n";
        let hunk = &hunks(OLD, new)[0];
        assert_eq!(hunk.text(), " a\n b\n-c\n+C\n d\n e\n f\n");
        let edited = hunk
            .edited("# edit me\n a\n b\n-c\n+see\n+also\n d\n e\n f\n")
            .unwrap();
        assert_eq!(
            apply(OLD, &[&edited]).unwrap(),
            OLD.replacen("c\n", "see\nalso\n", 1)
        );
        // Keeping the old line by turning '-' into ' ' and dropping the '+': no change at all.
        let kept = hunk.edited(" a\n b\n c\n d\n e\n f\n").unwrap();
        assert_eq!(apply(OLD, &[&kept]).unwrap(), OLD);
        assert!(hunk.edited(" a\n b\n-x\n+C\n d\n e\n f\n").is_err());
    }

    #[test]
    fn missing_newlines_at_the_end_are_kept() {
        let old = "one\ntwo";
        let new = "one\nTWO";
        let hunks = hunks(old, new);
        assert!(hunks[0].text().contains("\\ No newline at end of file"));
        assert_eq!(apply(old, &[&hunks[0]]).unwrap(), new);
        let edited = hunks[0].edited(" one\n-two\n+2\n").unwrap();
        assert_eq!(apply(old, &[&edited]).unwrap(), "one\n2\n");
        let added = super::hunks("", "x\n");
        assert_eq!(added[0].header(), "@@ -0,0 +1 @@");
        assert_eq!(apply("", &[&added[0]]).unwrap(), "x\n");
    }
}
