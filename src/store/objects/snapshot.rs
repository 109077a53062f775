//! Snapshots: turning files on disk into trees and commits, and moving branches by compare-and-swap.
//!
//! Files are cleaned exactly as `git add` would (the repository's `.gitattributes`, `core.autocrlf`, filter
//! drivers), but written straight to the object database and into a tree edit of the previous commit: no index
//! is read or written, no hook runs.

use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};

use gix::bstr::{BStr, ByteSlice};
use gix::objs::tree::EntryKind;
use gix::refs::transaction::{PreviousValue, RefEdit};
use gix::refs::{FullName, Target};

use crate::safety::redact;
use crate::safety::withhold::{self, Withheld};

use crate::store::repo::{Session, Store, StoreError};
use gix::ObjectId;

impl Store {
    /// Commit the user's uncommitted work as `HEAD + changes` (staged changes, tracked files modified, deleted
    /// or with a new mode, and untracked files that are not ignored), without touching the user's index or
    /// working tree. Found in-process (`store::status`), never with a `git status` subprocess.
    ///
    /// Files over `max_file_size` bytes are left out (their HEAD version, if any, stays in the capture) and
    /// listed in [`Capture::skipped`] and in the commit message: a 200 MB build artefact must not cost the start
    /// of every session, nor its memory (issue 17, defect 10). What is captured is streamed into the object
    /// database, not held in memory.
    ///
    /// [`Capture::commit`] is `None` if the working tree matches HEAD. The commit carries the trailers of session
    /// `id`, step 0; no ref is moved (see [`Store::start_session()`]).
    ///
    /// In a repository without commits (unborn `HEAD`), the capture is a root commit, made even when there is
    /// nothing to capture, so the session's branch has somewhere to start.
    ///
    /// A file-system monitor hook the repository's own config names ([`Store::repository_fsmonitor()`]) runs
    /// only when `repository_monitor_trusted`; without it every tracked file is stat-ed.
    pub fn capture_user_changes(
        &self,
        id: &str,
        max_file_size: u64,
        repository_monitor_trusted: bool,
    ) -> Result<Capture, StoreError> {
        let head = self.head_commit_if_any()?;
        let mut capture = Capture::default();
        let mut paths = Vec::new();
        let changes =
            crate::store::checkout::status::user_changes(&self.repo, repository_monitor_trusted)?;
        for path in changes {
            let rel = crate::store::repo::as_path(path.as_ref()).to_path_buf();
            match std::fs::symlink_metadata(self.workdir.join(&rel)) {
                Ok(md) if md.is_file() && md.len() > max_file_size => {
                    capture.skipped.push((rel, md.len()));
                }
                _ => paths.push(rel),
            }
        }
        if paths.is_empty() && head.is_some() {
            return Ok(capture);
        }
        let head_tree = match head {
            Some(head) => self.repo.find_commit(head)?.tree_id()?.detach(),
            None => ObjectId::empty_tree(self.repo.object_hash()),
        };
        // The user's secrets (.env, keys, files holding known key values) never go into agent refs; a
        // withheld file is also absent from the checkout. The capture is silent about them, as the user's
        // files are theirs: they stay where they are.
        let (paths, _withheld) = screen(&self.repo, &self.workdir, head_tree, &paths)?;
        let tree = write_tree(&self.repo, &self.workdir, head_tree, &paths)?;
        if tree == head_tree && head.is_some() {
            return Ok(capture);
        }
        let mut message = String::from("Capture uncommitted changes");
        if !capture.skipped.is_empty() {
            message.push_str(&format!(
                "\n\nLeft out of this capture (over max_capture_size, {max_file_size} bytes):\n"
            ));
            for (path, size) in &capture.skipped {
                message.push_str(&format!("- {} ({size} bytes)\n", path.display()));
            }
        }
        let message = with_trailers(&crate::store::repo::sanitize(&message), id, 0);
        capture.commit = Some(write_commit(&self.repo, tree, head, &message)?);
        Ok(capture)
    }

    /// Commit the checkout's current content of `changed` (checkout-relative paths; missing files are removed) on
    /// top of `s.tip`, and move `s.branch` to it by compare-and-swap.
    ///
    /// Every file first passes the withholding policy ([`withhold::decide()`]): environment and key files,
    /// files holding a known secret value and files with a secret format their committed version lacked stay
    /// in the checkout and out of the commit. The commit message is `subject` (what the step did, one line)
    /// and, when files were withheld, their list: the store says what it left out, and the message is
    /// redacted before it is written.
    ///
    /// [`StepCommit::commit`] is `None`, and nothing is committed, if the resulting tree equals the tip's tree, so
    /// callers may pass paths that merely *might* have changed. Fails with [`StoreError::BranchMoved`] if the
    /// branch no longer points at `s.tip`. The checkout itself is not touched.
    pub fn commit_step(
        &self,
        s: &mut Session,
        changed: &[PathBuf],
        subject: &str,
    ) -> Result<StepCommit, StoreError> {
        Ok(self
            .commit_step_then(s, changed, subject, |_, _| None::<()>)?
            .0)
    }

    /// [`Store::commit_step()`], calling `with_commit(handle, commit)` once the new commit is written and
    /// before its objects go to disk: objects it writes through `handle` join the step's pack (the step's
    /// note, [`Store::commit_step_noted()`]). Returns what it returned.
    pub(in crate::store) fn commit_step_then<T>(
        &self,
        s: &mut Session,
        changed: &[PathBuf],
        subject: &str,
        with_commit: impl FnOnce(&gix::Repository, ObjectId) -> Option<T>,
    ) -> Result<(StepCommit, Option<T>), StoreError> {
        let mut step = StepCommit::default();
        if changed.is_empty() {
            return Ok((step, None));
        }
        // Attributes must be read from the checkout, so we need a repository whose work tree is the checkout.
        check_attributes_files(s.root(), changed)?;
        let mut checkout = self.open_checkout(s.root())?;
        // The step's objects go to disk as one pack, at the latest when the branch moves (`cas_branch`).
        crate::store::pack::enable(&mut checkout);
        let tip_tree = checkout.find_commit(s.tip)?.tree_id()?.detach();
        (step.committed, step.withheld) = screen(&checkout, s.root(), tip_tree, changed)?;
        if step.committed.is_empty() {
            return Ok((step, None));
        }
        let tree = write_tree(&checkout, s.root(), tip_tree, &step.committed)?;
        if tree == tip_tree {
            return Ok((step, None));
        }
        let number = s.steps + 1;
        let message = crate::store::repo::sanitize(&step_message(subject, &step.withheld));
        let commit = write_commit(
            &checkout,
            tree,
            Some(s.tip),
            &with_trailers(&message, &s.id, number),
        )?;
        let extra = with_commit(&checkout, commit);
        // On disk before the record names it: after a crash the record is how the commit is found.
        crate::store::pack::persist(&checkout)?;
        crate::store::repo::crash_point();
        self.record_tips(&s.id, Some(s.tip), commit)?;
        let moved = cas_branch(
            &checkout,
            &s.branch,
            s.tip,
            commit,
            &format!("git-agent: step {number}"),
        );
        if let Err(err) = moved {
            // The checkout must never run ahead of its branch (issue 17, defect 13): the files of this step go
            // back to what the branch says, so the checkout matches it whatever happens next.
            let paths: Vec<gix::bstr::BString> = step
                .committed
                .iter()
                .map(|p| p.as_os_str().as_bytes().into())
                .collect();
            if let Err(undo) = self.write_paths(s.root(), tip_tree, &paths) {
                return Err(StoreError::CheckoutNotRestored {
                    cause: Box::new(err),
                    tip: s.tip,
                    undo: Box::new(undo),
                });
            }
            return Err(err);
        }
        crate::store::repo::crash_point();
        s.tip = commit;
        s.steps = number;
        step.commit = Some(commit);
        Ok((step, extra))
    }

    /// Create `branch` at `target`; it must not exist yet.
    pub(in crate::store) fn create_branch(
        &self,
        branch: &str,
        target: ObjectId,
        log: &str,
    ) -> Result<(), StoreError> {
        if self.repo.try_find_reference(branch)?.is_some() {
            return Err(StoreError::BranchExists(branch.to_owned()));
        }
        let edit = RefEdit::update(full_name(branch)?, target, PreviousValue::MustNotExist, log);
        edit_ref(&self.repo, edit)?;
        Ok(())
    }

    /// Delete `branch` if it still points at `expected`.
    pub(in crate::store) fn delete_branch(
        &self,
        branch: &str,
        expected: ObjectId,
    ) -> Result<(), StoreError> {
        check_branch(&self.repo, branch, expected)?;
        let edit = RefEdit::delete(
            full_name(branch)?,
            PreviousValue::MustExistAndMatch(Target::Object(expected)),
        );
        edit_ref(&self.repo, edit).map_err(|err| moved_or(&self.repo, branch, expected, err))
    }
}

/// What [`Store::capture_user_changes()`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Capture {
    /// The step-0 commit, or `None` when the work tree matches HEAD.
    pub commit: Option<ObjectId>,
    /// Files left out for their size, with their size in bytes (work-tree relative).
    pub skipped: Vec<(PathBuf, u64)>,
}

/// A step's commit message: `subject`, then the files the withholding policy kept out of the commit and
/// why, so `git log` tells a reader where a file the agent wrote went.
fn step_message(subject: &str, withheld: &[Withheld]) -> String {
    let mut message = subject.to_owned();
    if !withheld.is_empty() {
        message.push_str("\n\nWithheld from this commit (they stay in the checkout):\n");
        for w in withheld {
            message.push_str(&format!("- {}: {}\n", w.path.display(), w.reason));
        }
    }
    message
}

/// What [`Store::commit_step()`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StepCommit {
    /// The new step commit, or `None` when nothing changed (no commit was made, the branch did not move).
    pub commit: Option<ObjectId>,
    /// The paths given to the commit: those passed in, less the withheld ones.
    pub committed: Vec<PathBuf>,
    /// The files kept out of git, and why; they stay in the checkout.
    pub withheld: Vec<Withheld>,
}

/// Splits `paths` (relative to `root`) into those that may enter git and those the withholding policy keeps
/// out. `base` is the tree the commit is built on; its blobs are what a file's content replaces. A path
/// that is no regular file (deleted, a directory now, a fifo) passes: it commits no content of its own.
fn screen(
    repo: &gix::Repository,
    root: &Path,
    base: ObjectId,
    paths: &[PathBuf],
) -> Result<(Vec<PathBuf>, Vec<Withheld>), StoreError> {
    let base = repo.find_tree(base)?;
    let mut keep = Vec::with_capacity(paths.len());
    let mut withheld = Vec::new();
    redact::with_global(|redactor| {
        for rel in paths {
            // Refused before anything is read: `../x` must not be judged, let alone committed.
            check_path(rel)?;
            let full = root.join(rel);
            // A name git refuses (`.git.`, `git~1`, `.g\u{200c}it`) would fail the tree write or `git fsck`;
            // the file stays in the checkout and the session goes on.
            let symlink = std::fs::symlink_metadata(&full).is_ok_and(|m| m.is_symlink());
            if let Some((name, why)) = crate::safety::path::git_refuses(rel, symlink) {
                withheld.push(Withheld {
                    path: rel.clone(),
                    reason: withhold::Reason::NameGitRefuses(name, why),
                });
                continue;
            }
            // Below a submodule's gitlink the file belongs to another repository: committing it would turn the
            // gitlink into a tree on the branch, which plain git never does (issue 17, defect 9).
            if let Some(sub) = gitlink_above(&base, rel) {
                withheld.push(Withheld {
                    path: rel.clone(),
                    reason: withhold::Reason::InSubmodule(sub.display().to_string()),
                });
                continue;
            }
            // Through a symlink, as git would not: a link to a key file is withheld like the key file.
            let bytes = match std::fs::metadata(&full) {
                Ok(md) if md.is_file() => std::fs::read(&full).ok(),
                _ => None,
            };
            let previous = || committed_blob(&base, rel);
            match bytes.and_then(|b| withhold::decide(redactor, rel, &b, previous)) {
                Some(reason) => withheld.push(Withheld {
                    path: rel.clone(),
                    reason,
                }),
                None => keep.push(rel.clone()),
            }
        }
        Ok::<_, StoreError>(())
    })?;
    Ok((keep, withheld))
}

/// The submodule (gitlink entry) of `tree` that `rel` lies strictly below, if any. Walks one component at a
/// time, so it stops at the first entry that is no tree.
pub(in crate::store) fn gitlink_above(tree: &gix::Tree<'_>, rel: &Path) -> Option<PathBuf> {
    let mut components = rel.components().peekable();
    let mut prefix = PathBuf::new();
    let repo = tree.repo;
    let mut id = tree.id;
    while let Some(Component::Normal(name)) = components.next() {
        components.peek()?;
        prefix.push(name);
        let current = repo.find_tree(id).ok()?;
        let entry = current.find_entry(name.as_bytes())?;
        match entry.mode().kind() {
            EntryKind::Commit => return Some(prefix),
            EntryKind::Tree => id = entry.id().detach(),
            _ => return None,
        }
    }
    None
}

/// The content of the blob at `rel` in `tree`, if there is one.
fn committed_blob(tree: &gix::Tree<'_>, rel: &Path) -> Option<Vec<u8>> {
    let entry = tree.lookup_entry_by_path(rel).ok()??;
    if !entry.mode().is_blob_or_symlink() {
        return None;
    }
    Some(entry.object().ok()?.detach().data)
}

/// Write `base` with the on-disk state of `paths` (relative to `root`) applied, returning the new tree.
fn write_tree(
    repo: &gix::Repository,
    root: &Path,
    base: ObjectId,
    paths: &[PathBuf],
) -> Result<ObjectId, StoreError> {
    let base_tree = repo.find_tree(base)?;
    let mut editor = base_tree.edit()?;
    let mut paths: Vec<&PathBuf> = paths.iter().collect();
    paths.sort();
    paths.dedup();

    // Removals first: a file replaced by a directory shows up as "file gone" plus "new files below it".
    let mut files = Vec::new();
    for rel in paths {
        check_path(rel)?;
        let full = root.join(rel);
        let key = tree_key(rel);
        match std::fs::symlink_metadata(&full) {
            Ok(md) if md.is_file() || md.is_symlink() => files.push((rel, md)),
            Ok(md) if md.is_dir() => {
                // A directory now; only a leaf recorded at this path is stale. Files below it are listed
                // separately by the caller.
                let is_leaf = base_tree
                    .lookup_entry_by_path(rel)?
                    .is_some_and(|e| !e.mode().is_tree());
                if is_leaf {
                    editor.remove(key)?;
                }
            }
            // Gone, or something git cannot store (socket, fifo): the path leaves the tree.
            Ok(_) => {
                editor.remove(key)?;
            }
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                editor.remove(key)?;
            }
            Err(err) => return Err(StoreError::io("read", full)(err)),
        }
    }
    if !files.is_empty() {
        let mut cleaner = Cleaner::new(repo, &base_tree)?;
        for (rel, md) in files {
            let (id, kind) = cleaner.blob(root, rel, &md)?;
            editor.upsert(tree_key(rel), kind, id)?;
        }
    }
    Ok(editor.write()?.detach())
}

/// A checkout-relative path as the tree editor spells it (unix: the bytes as they are).
fn tree_key(rel: &Path) -> &BStr {
    rel.as_os_str().as_bytes().as_bstr()
}

/// Refuse paths that would escape the work tree or reach into a git dir.
fn check_path(rel: &Path) -> Result<(), StoreError> {
    let ok = rel
        .components()
        .all(|c| matches!(c, Component::Normal(n) if n != ".git"))
        && rel.components().next().is_some();
    if ok {
        Ok(())
    } else {
        Err(StoreError::InvalidPath(rel.to_owned()))
    }
}

/// Turns work tree files into blobs the way `git add` does.
struct Cleaner<'a> {
    repo: &'a gix::Repository,
    base: &'a gix::Tree<'a>,
    pipeline: gix::filter::plumbing::Pipeline,
    attributes: gix::AttributeStack<'a>,
    file_mode: bool,
}

impl<'a> Cleaner<'a> {
    fn new(repo: &'a gix::Repository, base: &'a gix::Tree<'a>) -> Result<Self, StoreError> {
        // Attributes come from the work tree's .gitattributes files, which is what `git add` sees for files it
        // adds; an empty index avoids loading a possibly huge one just for the rare fallback to indexed attributes.
        let index = gix::index::State::new(repo.object_hash());
        let stack = repo.attributes_only(
            &index,
            gix::worktree::stack::state::attributes::Source::WorktreeThenIdMapping,
        )?;
        let (pipeline, stack) = gix::filter::Pipeline::new(repo, stack.detach())?.into_parts();
        let file_mode = repo
            .config_snapshot()
            .boolean("core.fileMode")
            .unwrap_or(true);
        Ok(Cleaner {
            repo,
            base,
            pipeline,
            attributes: gix::AttributeStack::new(stack, repo),
            file_mode,
        })
    }

    fn blob(
        &mut self,
        root: &Path,
        rel: &Path,
        md: &std::fs::Metadata,
    ) -> Result<(ObjectId, EntryKind), StoreError> {
        let full = root.join(rel);
        if md.is_symlink() {
            let target = std::fs::read_link(&full).map_err(StoreError::io("read link", &full))?;
            let id = self
                .repo
                .write_blob(target.as_os_str().as_bytes())?
                .detach();
            return Ok((id, EntryKind::Link));
        }
        let file = std::fs::File::open(&full).map_err(StoreError::io("read", &full))?;
        let (repo, base) = (self.repo, self.base);
        let platform = self.attributes.at_path(rel, None)?;
        // The auto-crlf check asks for the file's previous content: git uses the index, we use the tree we edit.
        let mut previous = |buf: &mut Vec<u8>| -> gix::Result<Option<()>> {
            let Some(entry) = base.lookup_entry_by_path(rel)? else {
                return Ok(None);
            };
            if !entry.mode().is_blob() {
                return Ok(None);
            }
            let object = repo.find_object(entry.object_id())?;
            buf.clear();
            buf.extend_from_slice(&object.data);
            Ok(Some(()))
        };
        use gix::filter::plumbing::pipeline::convert::ToGitOutcome;
        let cleaned = self.pipeline.convert_to_git(
            file,
            rel,
            &mut |_, attrs| {
                platform.matching_attributes(attrs);
            },
            &mut previous,
        )?;
        let id = match cleaned {
            // The common case, no filter: streamed from the file into the object database, never whole in
            // memory (a 200 MB file cost 556 MB of peak memory before).
            ToGitOutcome::Unchanged(file) => match stream_blob(repo, file, md.len()) {
                Ok(id) => id,
                // The file changed size while it was read: take it as it is now.
                Err(_) => repo
                    .write_blob_stream(
                        std::fs::File::open(&full).map_err(StoreError::io("read", &full))?,
                    )?
                    .detach(),
            },
            ToGitOutcome::Buffer(buf) => repo.write_blob(buf)?.detach(),
            ToGitOutcome::Process(mut read) => repo.write_blob_stream(&mut read)?.detach(),
        };
        let executable = if self.file_mode {
            md.permissions().mode() & 0o111 != 0
        } else {
            // core.fileMode=false: the file system's exec bit means nothing; keep what was recorded.
            base.lookup_entry_by_path(rel)?
                .is_some_and(|e| e.mode().is_executable())
        };
        Ok((
            id,
            if executable {
                EntryKind::BlobExecutable
            } else {
                EntryKind::Blob
            },
        ))
    }
}

/// Writes the `size` bytes of `file` as a blob, streaming (the object's header needs the size up front). Fails,
/// writing nothing, if the file does not hold exactly `size` bytes by the time it is read.
fn stream_blob(
    repo: &gix::Repository,
    file: std::fs::File,
    size: u64,
) -> std::io::Result<ObjectId> {
    use gix::objs::Write as _;
    let mut exact = Exact {
        inner: std::io::BufReader::with_capacity(64 * 1024, file),
        left: size,
    };
    // A large file goes to disk as it is read, never whole in memory (a handle keeping objects for a pack
    // would hold it until the next ref edit).
    let id = if size > crate::store::pack::IN_MEMORY_MAX {
        (*repo.objects).write_stream(gix::objs::Kind::Blob, size, &mut exact)
    } else {
        repo.objects
            .write_stream(gix::objs::Kind::Blob, size, &mut exact)
    }
    .map_err(std::io::Error::other)?;
    Ok(id)
}

/// A reader of exactly `left` bytes: an early end or more data than announced is an error, so a file that
/// changes while it is streamed never becomes an object whose header lies about its size.
struct Exact<R> {
    inner: R,
    left: u64,
}

impl<R: std::io::Read> std::io::Read for Exact<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.left == 0 {
            let mut probe = [0u8; 1];
            return match self.inner.read(&mut probe)? {
                0 => Ok(0),
                _ => Err(std::io::Error::other("the file grew while it was read")),
            };
        }
        let want = buf
            .len()
            .min(usize::try_from(self.left).unwrap_or(usize::MAX));
        let n = self.inner.read(&mut buf[..want])?;
        if n == 0 {
            return Err(std::io::Error::other("the file shrank while it was read"));
        }
        self.left -= n as u64;
        Ok(n)
    }
}

/// Checks each `.gitattributes` gix reads for the attributes of `changed` (the root's and those of the
/// directories above each path) before it opens them the plain way: a FIFO a command left there would
/// block the step commit for ever.
fn check_attributes_files(root: &Path, changed: &[PathBuf]) -> Result<(), StoreError> {
    // A path with `..` or a root is refused by the path policy later; its directories are not looked at.
    let plain = |p: &&PathBuf| p.components().all(|c| matches!(c, Component::Normal(_)));
    let dirs: std::collections::BTreeSet<&Path> = changed
        .iter()
        .filter(plain)
        .filter_map(|p| p.parent())
        .flat_map(Path::ancestors)
        .chain([Path::new("")])
        .collect();
    for dir in dirs {
        StoreError::check_git_file(&root.join(dir).join(".gitattributes"), "git's attributes")?;
    }
    Ok(())
}

/// A step commit's message: `message`, then the trailers that say whose step it is ([`trailer()`] reads them).
pub(in crate::store) fn with_trailers(message: &str, id: &str, step: u32) -> String {
    format!(
        "{}\n\nAgent-Session: {id}\nAgent-Step: {step}\n",
        message.trim_end()
    )
}

/// The value of trailer `key` (`"Agent-Step"`, `"Agent-Session"`) in a commit message [`with_trailers()`]
/// wrote: the last line that starts with `key: `, trimmed. A step's own message comes first and cannot end
/// the trailers, so the last such line is the one the agent wrote.
pub(in crate::store) fn trailer<'a>(message: &'a str, key: &str) -> Option<&'a str> {
    message.lines().rev().find_map(|line| {
        line.strip_prefix(key)
            .and_then(|rest| rest.strip_prefix(": "))
            .map(str::trim)
    })
}

/// Author or committer: name and email from the environment and config as git resolves them, else git-agent's
/// own; the date from `GIT_<ROLE>_DATE` if set, else now. (gix's own `committer()` would stamp every step of
/// a long session with the time the repository was opened, and asks jiff for the local zone, see
/// [`now_local()`].)
fn signature(repo: &gix::Repository, committer: bool) -> Result<gix::actor::Signature, StoreError> {
    let role = if committer { "COMMITTER" } else { "AUTHOR" };
    let section = if committer { "committer" } else { "author" };
    let config = repo.config_snapshot();
    // git's order: GIT_<ROLE>_NAME, <role>.name, user.name; for the email also $EMAIL last.
    let pick = |var: &str, keys: &[&str]| -> Option<gix::bstr::BString> {
        std::env::var_os(var)
            .filter(|v| !v.is_empty())
            .map(|v| gix::bstr::BString::from(v.as_encoded_bytes()))
            .or_else(|| {
                keys.iter()
                    .find_map(|key| config.string(*key).filter(|v| !v.is_empty()))
            })
    };
    let name = pick(
        &format!("GIT_{role}_NAME"),
        &[&format!("{section}.name"), "user.name"],
    );
    let email = pick(
        &format!("GIT_{role}_EMAIL"),
        &[&format!("{section}.email"), "user.email"],
    )
    .or_else(|| {
        std::env::var_os("EMAIL")
            .filter(|v| !v.is_empty())
            .map(|v| v.as_encoded_bytes().into())
    });
    let (name, email) = match (name, email) {
        (Some(name), Some(email)) => (name, email),
        _ => ("git-agent".into(), "git-agent@localhost".into()),
    };
    let time = match std::env::var(format!("GIT_{role}_DATE")) {
        Ok(date) if !date.is_empty() => gix::date::parse(&date, None).map_err(StoreError::Git)?,
        _ => now_local(),
    };
    Ok(gix::actor::Signature { name, email, time })
}

/// Now, with the local UTC offset as git itself finds it: the C library's `localtime_r` (which honours `TZ`
/// and reads `/etc/localtime` once). gix's `now_local` asks jiff, whose first lookup of the system zone
/// walks all of `/usr/share/zoneinfo` (600 files, a few milliseconds of every session's start).
fn now_local() -> gix::date::Time {
    let seconds = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let offset = crate::sys::time::utc_offset(seconds);
    gix::date::Time::new(seconds, offset)
}

pub(in crate::store) fn write_commit(
    repo: &gix::Repository,
    tree: ObjectId,
    parent: Option<ObjectId>,
    message: &str,
) -> Result<ObjectId, StoreError> {
    let commit = gix::objs::Commit {
        tree,
        parents: parent.into_iter().collect(),
        author: signature(repo, false)?,
        committer: signature(repo, true)?,
        encoding: None,
        message: message.into(),
        extra_headers: Vec::new(),
    };
    Ok(repo.write_object(&commit)?.detach())
}

/// A commit with several parents (a notes merge).
pub(in crate::store) fn write_merge_commit(
    repo: &gix::Repository,
    tree: ObjectId,
    parents: &[ObjectId],
    message: &str,
) -> Result<ObjectId, StoreError> {
    let commit = gix::objs::Commit {
        tree,
        parents: parents.iter().copied().collect(),
        author: signature(repo, false)?,
        committer: signature(repo, true)?,
        encoding: None,
        message: message.into(),
        extra_headers: Vec::new(),
    };
    Ok(repo.write_object(&commit)?.detach())
}

pub(in crate::store) fn full_name(branch: &str) -> Result<FullName, StoreError> {
    FullName::try_from(branch).map_err(|_| StoreError::InvalidSessionId(branch.to_owned()))
}

/// Apply one ref edit, writing the reflog as git-agent's committer.
///
/// A ref whose lock file another process holds (or a crash left behind) fails with [`StoreError::Locked`],
/// naming the lock and how long gix waited for it (`core.filesRefLockTimeout`, 100 ms by default), so the
/// user can tell a busy ref from a stale lock and knows what to remove.
pub(in crate::store) fn edit_ref(repo: &gix::Repository, edit: RefEdit) -> Result<(), StoreError> {
    // The objects the ref will name are on disk before it names them (a crash between leaves a pack
    // nothing uses, never a ref to a missing object).
    crate::store::pack::persist(repo)?;
    let committer = signature(repo, true)?;
    let mut buf = gix::date::parse::TimeBuf::default();
    let name = edit.name.as_bstr().to_string();
    match repo.edit_references_as(Some(edit), Some(committer.to_ref(&mut buf))) {
        Ok(_) => Ok(()),
        Err(err) => {
            let common = std::fs::canonicalize(repo.common_dir())
                .unwrap_or_else(|_| repo.common_dir().to_path_buf());
            let lock = common.join(format!("{name}.lock"));
            if lock.exists() {
                let waited = repo
                    .config_snapshot()
                    .integer("core.filesRefLockTimeout")
                    .and_then(|ms| u64::try_from(ms).ok())
                    .unwrap_or(100);
                return Err(StoreError::Locked {
                    name,
                    lock,
                    waited: std::time::Duration::from_millis(waited),
                });
            }
            Err(err.into())
        }
    }
}

/// Fail with [`StoreError::BranchMoved`] unless `branch` points at `expected`.
fn check_branch(
    repo: &gix::Repository,
    branch: &str,
    expected: ObjectId,
) -> Result<(), StoreError> {
    let found = match repo.try_find_reference(branch) {
        Ok(Some(r)) => match r.target() {
            gix::refs::TargetRef::Object(id) if id == expected => return Ok(()),
            gix::refs::TargetRef::Object(id) => id.to_string(),
            gix::refs::TargetRef::Symbolic(name) => name.as_bstr().to_str_lossy().into_owned(),
        },
        Ok(None) => "nothing (deleted)".into(),
        Err(err) => format!("unreadable ({err})"),
    };
    Err(StoreError::BranchMoved {
        branch: branch.to_owned(),
        expected,
        found,
    })
}

/// After a failed edit: report a moved branch as such, anything else as it was.
fn moved_or(
    repo: &gix::Repository,
    branch: &str,
    expected: ObjectId,
    err: StoreError,
) -> StoreError {
    check_branch(repo, branch, expected).err().unwrap_or(err)
}

/// Move `branch` from `old` to `new`, failing with [`StoreError::BranchMoved`] if it is not at `old`.
pub(in crate::store) fn cas_branch(
    repo: &gix::Repository,
    branch: &str,
    old: ObjectId,
    new: ObjectId,
    log: &str,
) -> Result<(), StoreError> {
    // The pre-check gives a clear error in the common case; the locked compare in the edit closes the race.
    check_branch(repo, branch, old)?;
    let edit = RefEdit::update(
        full_name(branch)?,
        new,
        PreviousValue::MustExistAndMatch(Target::Object(old)),
        log,
    );
    edit_ref(repo, edit).map_err(|err| moved_or(repo, branch, old, err))
}

#[cfg(test)]
mod tests {
    use super::{trailer, with_trailers};

    #[test]
    fn trailers_are_read_back_from_the_end_whatever_the_message_says() {
        // A message the model wrote may quote trailers of its own: the agent's come last and win.
        let message = with_trailers(
            "Fix it\n\nAgent-Step: 9\nAgent-Session: other\n",
            "abc123",
            2,
        );
        assert_eq!(trailer(&message, "Agent-Step"), Some("2"));
        assert_eq!(trailer(&message, "Agent-Session"), Some("abc123"));
        assert_eq!(trailer("Fix it\n\nAgent-Stepper: 4\n", "Agent-Step"), None);
        assert_eq!(trailer("initial\n", "Agent-Step"), None);
    }
}
