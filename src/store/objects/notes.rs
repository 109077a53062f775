//! Notes on step commits in `refs/notes/agent`, written so that concurrent writers never lose a note.
//!
//! gix has no notes API in our feature set, and `git notes append` is a read-modify-write that loses 14-33% of
//! appends under two concurrent writers. So the notes commit is written here: read the notes tree, upsert the
//! note (appending to an existing note for the same commit), write a commit whose parent is the notes commit
//! we read, and move the ref by compare-and-swap. If another writer moved it in between, the swap fails and we
//! start over from the new notes commit: every writer's note ends up in the tree.
//!
//! The tree uses git's layout: one blob per annotated commit, named by its full hex id. Notes added flat by us
//! and notes fanned out (`ab/cdef...`) by git on big notes trees are both found.

use gix::objs::tree::EntryKind;

use std::path::PathBuf;

use super::snapshot::{write_commit, StepCommit};
use super::transaction::Proposal;
use crate::store::repo::{sanitize, Session, Store, StoreError};
use gix::ObjectId;

/// The notes ref of git-agent.
pub const NOTES_REF: &str = "refs/notes/agent";

/// A step's note whose objects were written with the step commit ([`Store::commit_step_noted()`]): the
/// notes commit adding it on the tip the notes ref had then.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PreparedNote {
    /// The annotated commit.
    commit: ObjectId,
    /// The note, redacted.
    text: String,
    /// The notes commit it was built on (`None`: the ref did not exist).
    on: Option<ObjectId>,
    /// The notes commit that adds it.
    notes_commit: ObjectId,
}

/// The message (and reflog message) of a notes commit adding the note of `hex`.
fn note_message(hex: &str) -> String {
    format!("Notes added by git-agent for {hex}")
}

impl Store {
    /// Adds `text` as the note of `commit` (appended after a blank line if it has one already).
    pub fn add_note(&self, commit: ObjectId, text: &str) -> Result<(), StoreError> {
        let text = sanitize(text);
        let hex = commit.to_string();
        self.cas_notes(
            NOTES_REF,
            &format!("Notes added by git-agent for {hex}"),
            |store, tree, _| Ok(Some(store.noted_tree(&store.repo, tree, &hex, &text)?)),
        )
        .map(|_| ())
    }

    /// [`Store::commit_step()`], with the objects of `note` (the new commit's note) written beside the
    /// commit's, so both reach the disk as one pack: two inodes fewer per step (issue 29). The notes ref is
    /// not moved here: [`Store::add_prepared_note()`] does it with the note returned (`None` when no commit
    /// was made, or the note could not be prepared: `add_note()` then writes it, or reports why).
    pub fn commit_step_noted(
        &self,
        s: &mut Session,
        changed: &[PathBuf],
        subject: &str,
        note: &str,
    ) -> Result<(StepCommit, Option<PreparedNote>), StoreError> {
        self.commit_step_then(s, changed, subject, |repo, commit| {
            self.prepare_note(repo, commit, note).ok()
        })
    }

    /// Writes through `repo` (the step's handle, whose objects go to disk as one pack when its branch
    /// moves) the notes commit that adds `text` as the note of `commit` on the notes ref's current tip.
    pub(in crate::store) fn prepare_note(
        &self,
        repo: &gix::Repository,
        commit: ObjectId,
        text: &str,
    ) -> Result<PreparedNote, StoreError> {
        let text = sanitize(text);
        let hex = commit.to_string();
        let on = self.ref_id(NOTES_REF)?;
        let tree = self.noted_tree(repo, self.tip_tree(on)?, &hex, &text)?;
        let notes_commit = write_commit(repo, tree, on, &note_message(&hex))?;
        Ok(PreparedNote {
            commit,
            text,
            on,
            notes_commit,
        })
    }

    /// Moves the notes ref to the prepared notes commit; when another writer moved the ref since it was
    /// prepared, the note is added on the new tip instead, as [`Store::add_note()`] does.
    pub fn add_prepared_note(&self, note: &PreparedNote) -> Result<(), StoreError> {
        let hex = note.commit.to_string();
        let message = note_message(&hex);
        self.transact(
            NOTES_REF,
            || StoreError::Busy(NOTES_REF.to_owned()),
            |current| {
                let commit = if current == note.on {
                    note.notes_commit
                } else {
                    let tree =
                        self.noted_tree(&self.repo, self.tip_tree(current)?, &hex, &note.text)?;
                    write_commit(&self.repo, tree, current, &message)?
                };
                Ok(Proposal::Move {
                    commit,
                    reflog: message.clone(),
                    then: (),
                })
            },
        )
    }

    /// `tree` (a notes tree) with `text` added to the note of `hex`, written through `repo`.
    fn noted_tree(
        &self,
        repo: &gix::Repository,
        tree: ObjectId,
        hex: &str,
        text: &str,
    ) -> Result<ObjectId, StoreError> {
        let mut editor = repo.find_tree(tree)?.edit()?;
        let (path, old) = self.find_note(tree, hex)?;
        let body = join_notes(old.as_deref(), text);
        let blob = repo.write_blob(body.as_bytes())?.detach();
        editor.upsert(path, EntryKind::Blob, blob)?;
        Ok(editor.write()?.detach())
    }

    /// The note of `commit`, if any.
    pub fn note(&self, commit: ObjectId) -> Result<Option<String>, StoreError> {
        self.note_in(NOTES_REF, commit)
    }

    /// The note of `commit` in the notes ref `notes_ref`, if any.
    pub(in crate::store) fn note_in(
        &self,
        notes_ref: &str,
        commit: ObjectId,
    ) -> Result<Option<String>, StoreError> {
        let Some(notes) = self.ref_id(notes_ref)? else {
            return Ok(None);
        };
        let tree = self.repo.find_commit(notes)?.tree_id()?.detach();
        Ok(self.find_note(tree, &commit.to_string())?.1)
    }

    /// Appends `lines` (each one line, already sanitized) to the note of `commit` in `notes_ref`, skipping
    /// lines the note has: notes kept as sets of lines (review records), merged by line union.
    pub(in crate::store) fn append_note_lines(
        &self,
        notes_ref: &str,
        commit: ObjectId,
        lines: &[String],
    ) -> Result<(), StoreError> {
        let hex = commit.to_string();
        self.cas_notes(
            notes_ref,
            &format!("Notes added by git-agent for {hex}"),
            |store, tree, _| {
                let mut editor = store.repo.find_tree(tree)?.edit()?;
                let (path, old) = store.find_note(tree, &hex)?;
                let Some(body) = union_lines(old.as_deref().unwrap_or_default(), lines) else {
                    return Ok(None);
                };
                let blob = store.repo.write_blob(body.as_bytes())?.detach();
                editor.upsert(path, EntryKind::Blob, blob)?;
                Ok(Some(editor.write()?.detach()))
            },
        )
        .map(|_| ())
    }

    /// Merges the notes commit `theirs` into `notes_ref` by line union per note (each side's lines, ours
    /// first, each line once). Returns whether anything changed.
    pub(in crate::store) fn merge_note_lines(
        &self,
        notes_ref: &str,
        theirs: ObjectId,
    ) -> Result<bool, StoreError> {
        self.merge_notes_by(notes_ref, theirs, |old, text| {
            let lines: Vec<String> = text.lines().map(str::to_owned).collect();
            union_lines(old.unwrap_or_default(), &lines)
        })
    }

    /// Merges the notes commit `theirs` (e.g. fetched from a remote) into `refs/notes/agent`: notes only they
    /// have are added, notes both have are concatenated unless one already contains the other. Returns whether
    /// anything changed.
    pub fn merge_notes(&self, theirs: ObjectId) -> Result<bool, StoreError> {
        self.merge_notes_by(NOTES_REF, theirs, |old, text| match old {
            Some(old) if old.contains(text.trim_end()) => None,
            Some(old) if text.contains(old.trim_end()) => Some(text.to_owned()),
            old => Some(join_notes(old, text)),
        })
    }

    /// Merges the notes commit `theirs` into `notes_ref`, note by note: `merge(ours, theirs)` gives a note's
    /// new text, or `None` to keep ours. Returns whether anything changed.
    fn merge_notes_by(
        &self,
        notes_ref: &str,
        theirs: ObjectId,
        merge: impl Fn(Option<&str>, &str) -> Option<String>,
    ) -> Result<bool, StoreError> {
        let their_tree = self.repo.find_commit(theirs)?.tree_id()?.detach();
        let their_notes = self.all_notes(their_tree)?;
        self.cas_notes_with_parent(
            notes_ref,
            "Notes merged by git-agent",
            Some(theirs),
            |store, tree, ours| {
                if ours == Some(theirs) {
                    return Ok(None);
                }
                let mut editor = store.repo.find_tree(tree)?.edit()?;
                let mut changed = false;
                for (hex, text) in &their_notes {
                    let (path, old) = store.find_note(tree, hex)?;
                    let Some(merged) = merge(old.as_deref(), text) else {
                        continue;
                    };
                    let blob = store.repo.write_blob(merged.as_bytes())?.detach();
                    editor.upsert(path, EntryKind::Blob, blob)?;
                    changed = true;
                }
                // Nothing new in theirs: still record the merge unless ours already contains theirs, or
                // our ref stays behind the remote's and the next push is refused as a non-fast-forward.
                if !changed && ours.is_some_and(|ours| store.contains_commit(ours, theirs)) {
                    return Ok(None);
                }
                Ok(Some(editor.write()?.detach()))
            },
        )
    }

    /// Where the note of `hex` is in `tree` (flat or fanned out) and its text; the flat path if there is none.
    fn find_note(&self, tree: ObjectId, hex: &str) -> Result<(String, Option<String>), StoreError> {
        let tree = self.repo.find_tree(tree)?;
        let fanned = format!("{}/{}", &hex[..2], &hex[2..]);
        for path in [hex, fanned.as_str()] {
            if let Some(entry) = tree.lookup_entry_by_path(path)? {
                if entry.mode().is_blob() {
                    let blob = self.repo.find_object(entry.object_id())?;
                    let text = String::from_utf8_lossy(&blob.data).into_owned();
                    return Ok((path.to_owned(), Some(text)));
                }
            }
        }
        Ok((hex.to_owned(), None))
    }

    /// Every note in `tree` as (annotated commit hex, text), flat and fanned out alike.
    fn all_notes(&self, tree: ObjectId) -> Result<Vec<(String, String)>, StoreError> {
        let mut out = Vec::new();
        let mut stack = vec![(String::new(), tree)];
        while let Some((prefix, tree)) = stack.pop() {
            let tree = self.repo.find_tree(tree)?;
            for entry in tree.iter() {
                let entry = entry.map_err(|e| StoreError::Git(gix::Error::from_error(e)))?;
                let name = format!("{prefix}{}", entry.filename());
                if entry.mode().is_tree() {
                    stack.push((name, entry.oid().to_owned()));
                } else if entry.mode().is_blob() {
                    let blob = self.repo.find_object(entry.oid())?;
                    out.push((name, String::from_utf8_lossy(&blob.data).into_owned()));
                }
            }
        }
        Ok(out)
    }

    /// True when `commit` is `ancestor` or descends from it.
    fn contains_commit(&self, commit: ObjectId, ancestor: ObjectId) -> bool {
        let (commit, ancestor) = (commit.to_string(), ancestor.to_string());
        commit == ancestor
            || self
                .git_output(&["merge-base", "--is-ancestor", &ancestor, &commit])
                .is_ok()
    }

    fn ref_id(&self, name: &str) -> Result<Option<ObjectId>, StoreError> {
        match self.repo.try_find_reference(name)? {
            Some(mut r) => Ok(Some(r.peel_to_id()?.detach())),
            None => Ok(None),
        }
    }

    fn cas_notes(
        &self,
        notes_ref: &str,
        message: &str,
        edit: impl FnMut(&Store, ObjectId, Option<ObjectId>) -> Result<Option<ObjectId>, StoreError>,
    ) -> Result<bool, StoreError> {
        self.cas_notes_with_parent(notes_ref, message, None, edit)
    }

    /// The compare-and-swap of a notes ref ([`Store::transact()`]): `edit(store, current tree, current commit)`
    /// returns the new tree (or `None` for no change); the commit gets the current notes commit (and
    /// `extra_parent`) as parents.
    fn cas_notes_with_parent(
        &self,
        notes_ref: &str,
        message: &str,
        extra_parent: Option<ObjectId>,
        mut edit: impl FnMut(&Store, ObjectId, Option<ObjectId>) -> Result<Option<ObjectId>, StoreError>,
    ) -> Result<bool, StoreError> {
        self.transact(
            notes_ref,
            || StoreError::Busy(notes_ref.to_owned()),
            |current| {
                let tree = self.tip_tree(current)?;
                let Some(new_tree) = edit(self, tree, current)? else {
                    return Ok(Proposal::Done(false));
                };
                let parents: Vec<ObjectId> = current.into_iter().chain(extra_parent).collect();
                let commit = write_commit_with_parents(self, new_tree, &parents, message)?;
                Ok(Proposal::Move {
                    commit,
                    reflog: message.to_owned(),
                    then: true,
                })
            },
        )
    }
}

fn write_commit_with_parents(
    store: &Store,
    tree: ObjectId,
    parents: &[ObjectId],
    message: &str,
) -> Result<ObjectId, StoreError> {
    match parents {
        [] => write_commit(&store.repo, tree, None, message),
        [one] => write_commit(&store.repo, tree, Some(*one), message),
        many => super::snapshot::write_merge_commit(&store.repo, tree, many, message),
    }
}

/// `old` with the `lines` it does not have appended, one a line; `None` when it has them all.
fn union_lines(old: &str, lines: &[String]) -> Option<String> {
    let have: std::collections::HashSet<&str> = old.lines().collect();
    let mut seen = std::collections::HashSet::new();
    let new: Vec<&String> = lines
        .iter()
        .filter(|l| !l.trim().is_empty() && !have.contains(l.as_str()) && seen.insert(l.as_str()))
        .collect();
    if new.is_empty() {
        return None;
    }
    let mut out = String::new();
    for line in old.lines().filter(|l| !l.trim().is_empty()) {
        out.push_str(line);
        out.push('\n');
    }
    for line in new {
        out.push_str(line);
        out.push('\n');
    }
    Some(out)
}

/// `old` and `new` as git notes append joins them: a blank line between.
fn join_notes(old: Option<&str>, new: &str) -> String {
    match old {
        Some(old) if !old.trim().is_empty() => {
            format!("{}\n\n{}\n", old.trim_end(), new.trim_end())
        }
        _ => format!("{}\n", new.trim_end()),
    }
}
