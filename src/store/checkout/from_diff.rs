//! A reset's new index built from the old one and the changes between the two trees, instead of from the
//! whole new tree (issue 29).
//!
//! A pooled checkout usually moves between two commits that differ in a handful of files, yet building the
//! new index from the target tree reads every tree object and makes every entry: on a 100,000-file
//! repository 80-90 ms on a quiet host and 200-300 ms on a loaded one. Here only the subtrees that differ are
//! read (gix's tree diff skips a subtree whose id is the same on both sides) and the old entries are copied
//! with the few changed ones put in. The result is what [`gix::Repository::index_from_tree()`] would make
//! (same entries, ids, modes, flags, order, no extensions), so the rest of the reset, which decides what
//! keeps its stat data and what is written, is the same on both paths.
//!
//! Which tree the old index was made from: the record this module writes beside the index after each reset,
//! `<tree> <fingerprint of the index file>` (its trailing checksum, or its inode, size and mtime when written
//! without one), trusted only while the index file is the one recorded, so any rewrite of the index (git run
//! in the checkout, another tool) makes it stale. Neither of
//! the obvious sources is reliable: HEAD is written before the index in a reset, and a session's HEAD stays
//! at its base while `git add` run in the checkout changes the index, so HEAD's tree need not be the
//! index's; and the indexes written here carry no cache tree (gix neither makes one from a tree nor keeps
//! one up to date), while a root-only one would break git's rule that a valid cache-tree node has valid
//! children for every subdirectory.

use std::path::{Path, PathBuf};

use gix::bstr::{BStr, BString, ByteSlice};
use gix::diff::tree::recorder::Change;
use gix::index::entry::{Flags, Mode, Stat};
use gix::objs::tree::EntryKind;
use gix::ObjectId;

use crate::safety::tree_path;

/// Beside a checkout's index in its registration: the tree that index was made from and what identifies the
/// index file ([`fingerprint()`]), written by [`record()`] after a reset wrote the index.
const RECORD: &str = "agent-index-tree";

fn record_path(index_path: &Path) -> PathBuf {
    index_path.with_file_name(RECORD)
}

/// What tells one index file from another: its trailing checksum, or for one written without
/// (`index.skipHash`, all zeros) the file's device, inode, size and modification time. Every writer (git, gix,
/// this crate) writes a new file and renames it into place, so a rewrite is another inode; a rename (the
/// index set aside for the pool) keeps all four.
fn fingerprint(index_path: &Path, checksum: Option<ObjectId>) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    if let Some(checksum) = checksum.filter(|c| !c.is_null()) {
        return Some(checksum.to_string());
    }
    let meta = std::fs::metadata(index_path).ok()?;
    Some(format!(
        "file:{}:{}:{}:{}.{:09}",
        meta.dev(),
        meta.ino(),
        meta.len(),
        meta.mtime(),
        meta.mtime_nsec()
    ))
}

/// Records that the index at `index_path`, whose checksum is `checksum`, describes `tree`. Best effort: a
/// missing or stale record only means the next reset builds its index from the whole tree.
pub(super) fn record(index_path: &Path, tree: ObjectId, checksum: Option<ObjectId>) {
    let path = record_path(index_path);
    match fingerprint(index_path, checksum) {
        Some(fingerprint) => {
            // The registration was writable by the checkout's commands: never write through a link there.
            let text = format!("{tree} {fingerprint}\n");
            let _ = crate::sys::fs::replace_file(&path, text.as_bytes());
        }
        None => {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// Records that the index file at `index_path`, written whole by someone else (gix's initial checkout),
/// describes `tree`: its checksum is read from the file's trailer, where [`recorded_tree()`] finds it.
pub(super) fn record_file(index_path: &Path, tree: ObjectId) {
    use std::io::{Read, Seek, SeekFrom};
    let len = tree.kind().len_in_bytes();
    let mut trailer = vec![0; len];
    let read = std::fs::File::open(index_path).and_then(|mut file| {
        file.seek(SeekFrom::End(-(len as i64)))?;
        file.read_exact(&mut trailer)
    });
    let checksum = read
        .ok()
        .and_then(|()| gix::hash::oid::try_from_bytes(&trailer).ok())
        .map(ToOwned::to_owned);
    record(index_path, tree, checksum);
}

/// The tree `index` was made from, if the record beside the file it was read from says so for exactly this
/// index file (a pooled checkout's index set aside is the same file renamed).
pub(super) fn recorded_tree(index: &gix::index::File) -> Option<ObjectId> {
    // The checkout's commands could write here: a link or a FIFO left under the name is not read.
    let text = crate::sys::fs::read_regular(&record_path(index.path()), 1024).ok()?;
    let text = String::from_utf8(text).ok()?;
    let (tree, recorded) = text.trim_end().split_once(' ')?;
    let current = fingerprint(index.path(), index.checksum())?;
    (recorded == current)
        .then(|| ObjectId::from_hex(tree.as_bytes()).ok())
        .flatten()
}

/// The index `checkout` would make from `new_tree`, built from `old`, which holds exactly `old_tree`, and
/// the changes between the two trees. `None` (build it from the whole tree instead) when `old` is anything
/// but a plain index of a tree (conflicts, flags, a sparse index), when the diff fails, or when a changed path
/// is one the tree path policy refuses (the whole-tree path then decides as it always did).
pub(super) fn index_from_diff(
    checkout: &gix::Repository,
    old: &gix::index::State,
    old_tree: ObjectId,
    new_tree: ObjectId,
) -> Option<gix::index::File> {
    if old.is_sparse() || old.entries().iter().any(|e| !e.flags.is_empty()) {
        return None;
    }
    let changes = tree_changes(checkout, old_tree, new_tree)?;
    let mut new = gix::index::State::new(checkout.object_hash());
    let mut olds = old.entries().iter().peekable();
    for (path, entry) in &changes {
        let path = path.as_bstr();
        while let Some(o) = olds.next_if(|o| o.path(old) < path) {
            new.dangerously_push_entry(Stat::default(), o.id, Flags::empty(), o.mode, o.path(old));
        }
        // The old entry at this path is replaced or gone.
        olds.next_if(|o| o.path(old) == path);
        if let Some((id, mode)) = entry {
            new.dangerously_push_entry(Stat::default(), *id, Flags::empty(), *mode, path);
        }
    }
    for o in olds {
        new.dangerously_push_entry(Stat::default(), o.id, Flags::empty(), o.mode, o.path(old));
    }
    // Already in order; sorting a sorted list is one pass, and an order mistake here would be a corrupt index.
    new.sort_entries();
    Some(gix::index::File::from_state(new, checkout.index_path()))
}

/// What changes between the two trees, file by file, sorted by path: each path with its new id and mode, or
/// `None` where the path goes.
type FileChanges = Vec<(BString, Option<(ObjectId, Mode)>)>;

fn tree_changes(
    checkout: &gix::Repository,
    old_tree: ObjectId,
    new_tree: ObjectId,
) -> Option<FileChanges> {
    let mut changes = FileChanges::new();
    if old_tree == new_tree {
        return Some(changes);
    }
    let old = checkout.find_tree(old_tree).ok()?;
    let new = checkout.find_tree(new_tree).ok()?;
    let mut recorder = gix::diff::tree::Recorder::default();
    gix::diff::tree(
        gix::objs::TreeRefIter::from_bytes(&old.data, old_tree.kind()),
        gix::objs::TreeRefIter::from_bytes(&new.data, new_tree.kind()),
        &mut gix::diff::tree::State::default(),
        &checkout.objects,
        &mut recorder,
    )
    .ok()?;
    for change in recorder.records {
        // A tree's own change says nothing an index records: the files below it come as changes of their
        // own. A tree that replaces a file (or the reverse) leaves the file's path gone (or added).
        match change {
            Change::Addition {
                entry_mode,
                oid,
                path,
                ..
            } => {
                if let Some(mode) = file_mode(entry_mode.kind()) {
                    allowed(path.as_bstr(), entry_mode.kind())?;
                    changes.push((path, Some((oid, mode))));
                }
            }
            Change::Deletion {
                entry_mode, path, ..
            } => {
                if !entry_mode.is_tree() {
                    changes.push((path, None));
                }
            }
            Change::Modification {
                previous_entry_mode,
                entry_mode,
                oid,
                path,
                ..
            } => match file_mode(entry_mode.kind()) {
                Some(mode) => {
                    allowed(path.as_bstr(), entry_mode.kind())?;
                    changes.push((path, Some((oid, mode))));
                }
                None if !previous_entry_mode.is_tree() => changes.push((path, None)),
                None => {}
            },
        }
    }
    // In index order. Were one path reported both gone and added, the removal sorts first and the addition
    // then puts it back, as the new tree has it.
    changes.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.is_some().cmp(&b.1.is_some())));
    Some(changes)
}

/// The index mode of a tree entry of `kind`, as [`gix::index::State::from_tree()`] maps it; `None` for a
/// tree.
fn file_mode(kind: EntryKind) -> Option<Mode> {
    match kind {
        EntryKind::Tree => None,
        EntryKind::Blob => Some(Mode::FILE),
        EntryKind::BlobExecutable => Some(Mode::FILE_EXECUTABLE),
        EntryKind::Link => Some(Mode::SYMLINK),
        EntryKind::Commit => Some(Mode::COMMIT),
    }
}

/// Whether the tree path policy takes `path`. It is git's `verify_path()` with the rules of every platform
/// on, so it refuses at least what the whole-tree path's gix validation refuses on this platform; a refused
/// path sends the reset down that path, which fails or succeeds as it did before.
fn allowed(path: &BStr, kind: EntryKind) -> Option<()> {
    let kind = match kind {
        EntryKind::Link => tree_path::EntryKind::Symlink,
        EntryKind::Commit => tree_path::EntryKind::Other,
        _ => tree_path::EntryKind::File,
    };
    tree_path::check(path, kind).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::test_repo::TestRepo;

    /// The bytes of `index` as written to disk.
    fn bytes(index: &gix::index::File) -> Vec<u8> {
        let mut out = Vec::new();
        index.write_to(&mut out, Default::default()).unwrap();
        out
    }

    fn tree(repo: &TestRepo, rev: &str) -> ObjectId {
        let hex = repo.git(&["rev-parse", &format!("{rev}^{{tree}}")]);
        ObjectId::from_hex(hex.trim().as_bytes()).unwrap()
    }

    /// Two trees that differ in every way an index entry can: added, deleted, modified, exec bit, file to
    /// directory and back, renamed, file to symbolic link, a gitlink, deep changes beside untouched subtrees.
    fn two_trees() -> (TestRepo, ObjectId, ObjectId) {
        let repo = TestRepo::new("from-diff");
        repo.write("same.txt", "same\n");
        repo.write("mod.txt", "one\n");
        repo.write("del.txt", "deleted\n");
        repo.write("mode.sh", "#!/bin/sh\n");
        repo.write("f2d", "file\n");
        repo.write("d2f/inner.txt", "inner\n");
        repo.write("a-b.txt", "sorts between a and a/\n");
        repo.write("a/old.txt", "renamed\n");
        repo.write("typechange", "file\n");
        repo.write("deep/a/b/c.txt", "untouched\n");
        repo.write("deep/a/x.txt", "changed\n");
        repo.git(&["add", "-A"]);
        repo.git(&["commit", "-q", "-m", "A"]);
        let a = tree(&repo, "HEAD");
        repo.write("mod.txt", "two\n");
        std::fs::remove_file(repo.path("del.txt")).unwrap();
        repo.chmod("mode.sh", 0o755);
        std::fs::remove_file(repo.path("f2d")).unwrap();
        repo.write("f2d/inside.txt", "below\n");
        std::fs::remove_dir_all(repo.path("d2f")).unwrap();
        repo.write("d2f", "now a file\n");
        std::fs::rename(repo.path("a/old.txt"), repo.path("a/new.txt")).unwrap();
        std::fs::remove_file(repo.path("typechange")).unwrap();
        std::os::unix::fs::symlink("same.txt", repo.path("typechange")).unwrap();
        repo.write("deep/a/x.txt", "changed, yes\n");
        repo.write("added/sub/new.txt", "new\n");
        repo.git(&["add", "-A"]);
        let head = repo.git(&["rev-parse", "HEAD"]);
        repo.git(&[
            "update-index",
            "--add",
            "--cacheinfo",
            &format!("160000,{},gitlink", head.trim()),
        ]);
        repo.git(&["commit", "-q", "-m", "B"]);
        let b = tree(&repo, "HEAD");
        (repo, a, b)
    }

    /// Issue 29: whichever way a reset goes, the index it builds from the changes is byte for byte the one it
    /// would build from the whole tree.
    #[test]
    fn the_index_from_the_changes_is_the_index_from_the_tree() {
        let (repo, a, b) = two_trees();
        let checkout = gix::open(&repo.dir).unwrap();
        for (from, to) in [(a, b), (b, a), (a, a), (b, b)] {
            let old = checkout.index_from_tree(&from).unwrap();
            let built = index_from_diff(&checkout, &old, from, to).expect("a plain index");
            let whole = checkout.index_from_tree(&to).unwrap();
            assert_eq!(bytes(&built), bytes(&whole), "{from} to {to}");
        }
    }

    /// Anything but a plain index of a tree goes the whole-tree way.
    #[test]
    fn an_index_with_flags_or_stages_is_not_diffed() {
        let (repo, a, b) = two_trees();
        let checkout = gix::open(&repo.dir).unwrap();
        let mut old = checkout.index_from_tree(&a).unwrap();
        old.entries_mut()[0].flags.insert(Flags::SKIP_WORKTREE);
        assert!(index_from_diff(&checkout, &old, a, b).is_none());
        let mut old = checkout.index_from_tree(&a).unwrap();
        old.entries_mut()[0].flags = Flags::from_stage(gix::index::entry::Stage::Ours);
        assert!(index_from_diff(&checkout, &old, a, b).is_none());
    }
}
