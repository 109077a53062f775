//! What differs from what git has recorded, found in-process with gix's status (stat data first, content only
//! where the stat data cannot tell, in parallel with nothing else to wait for): the user's uncommitted work
//! for step 0, and what a checkout holds beyond its index before it goes back to the pool.
//!
//! Read-only, like `git --no-optional-locks status`: the index is never refreshed on disk, so the user's index
//! stays byte for byte as it was (a plain `git status` rewrites it). Replaces a `git status` subprocess that
//! cost 1.7 s on a 100,000-file repository before the session could start (issue 16).

use gix::bstr::BString;
use gix::dir::entry::Status as DirStatus;
use gix::status::index_worktree::Item as WorktreeItem;
use gix::status::plumbing::index_as_worktree::EntryStatus;

use crate::store::repo::StoreError;

/// The user's uncommitted work in `repo`'s work tree: paths staged (index differs from HEAD), modified,
/// deleted or with a new mode (work tree differs from index), and untracked files that are not ignored, each
/// untracked file listed on its own. Submodules are left as HEAD records them.
///
/// The untracked files come from [`super::untracked`], which remembers the walk between sessions, on a thread
/// of their own beside the stat of every tracked file (as gix's status runs its own walk), or after it when
/// the index is too small for a second thread to pay ([`PARALLEL_STATUS_ENTRIES`]).
///
/// With git's file-system monitor configured, only the files it names are stat-ed ([`super::fsmonitor`]); a
/// monitor hook the repository's own config names runs only when `repository_monitor_trusted`.
pub(in crate::store) fn user_changes(
    repo: &gix::Repository,
    repository_monitor_trusted: bool,
) -> Result<Vec<BString>, StoreError> {
    let mut index = user_index(repo)?;
    let monitoring = crate::sys::timings::begin();
    let monitor = super::fsmonitor::mark_unchanged(repo, &mut index, repository_monitor_trusted);
    monitor_timings(monitoring, &monitor);
    let index: gix::worktree::Index = std::sync::Arc::new(index.into());
    let staged_nothing = index_is_head(repo, &index);
    let mut paths = if index.entries().len() < PARALLEL_STATUS_ENTRIES {
        let mut paths = tracked_changes(repo, &index, staged_nothing)?;
        paths.extend(super::untracked::files(repo, &index)?);
        paths
    } else {
        both_halves_at_once(repo, &index, staged_nothing)?
    };
    paths.sort();
    paths.dedup();
    Ok(paths)
}

/// The tracked and the untracked half of [`user_changes()`] on two threads.
fn both_halves_at_once(
    repo: &gix::Repository,
    index: &gix::worktree::Index,
    staged_nothing: bool,
) -> Result<Vec<BString>, StoreError> {
    let walker = (repo.clone(), index.clone());
    std::thread::scope(|scope| -> Result<Vec<BString>, StoreError> {
        let untracked = std::thread::Builder::new()
            .name("git-agent-untracked".into())
            .spawn_scoped(scope, move || {
                let (repo, index) = walker;
                super::untracked::files(&repo, &index)
            })
            .map_err(|err| StoreError::Io {
                action: "start a thread for",
                path: "the untracked files".into(),
                source: err,
            })?;
        let mut paths = tracked_changes(repo, index, staged_nothing)?;
        let untracked = untracked
            .join()
            .unwrap_or_else(|_| Err(StoreError::UntrackedThreadFailed))?;
        paths.extend(untracked);
        Ok(paths)
    })
}

/// The phase line for git's file-system monitor: whether step 0 used it, and what it skipped.
fn monitor_timings(begun: Option<std::time::Instant>, monitor: &super::fsmonitor::Monitor) {
    use super::fsmonitor::Monitor;
    use crate::sys::timings::Detail;
    match monitor {
        Monitor::Unused(why) => {
            crate::sys::timings::end("fsmonitor", begun, &[("unused", Detail::Text(why))])
        }
        Monitor::Used { unchanged, named } => crate::sys::timings::end(
            "fsmonitor",
            begun,
            &[
                ("unchanged", Detail::Count(*unchanged as u64)),
                ("named", Detail::Count(*named as u64)),
            ],
        ),
    }
}

/// Below this many index entries the tracked files are compared on the calling thread. gix would start a
/// thread per core for three files (its chunks are sized from the entry count, down to one entry); git
/// starts its preload threads only from 500 entries a thread, two at least, and so does this.
const PARALLEL_STATUS_ENTRIES: usize = 1_000;

/// The thread limit for comparing `entries` index entries with the work tree: one below
/// [`PARALLEL_STATUS_ENTRIES`], else gix's choice (a thread per core).
fn status_threads(entries: usize) -> Option<usize> {
    (entries < PARALLEL_STATUS_ENTRIES).then_some(1)
}

/// The user's index as git reads it: without hashing the whole file to check its trailing checksum first
/// (git checks it only in `fsck`; gix by default, which on 100,000 files is 8 MB of SHA-1 before step 0 can
/// start, and ten times that on a million). A missing index is an empty one.
fn user_index(repo: &gix::Repository) -> Result<gix::index::File, StoreError> {
    let skip_hash = true;
    let options = gix::index::decode::Options::default();
    Ok(gix::index::File::at_or_default(
        repo.index_path(),
        repo.object_hash(),
        skip_hash,
        options,
    )?)
}

/// The tracked half of [`user_changes()`]: staged paths (unless `staged_nothing`) and tracked files whose
/// work tree state differs from `index`.
///
/// Through gix's lower-level calls rather than its status platform: the platform looks for submodules even
/// when told to leave them alone, and without a `.gitmodules` in the work tree it decodes the whole index
/// file again to look for a staged one (on a million files, a second 70 MB read, hashed unless
/// `index.skipHash`). Here submodules are taken as HEAD records them ([`SubmodulesAsRecorded`]).
fn tracked_changes(
    repo: &gix::Repository,
    index: &gix::index::State,
    staged_nothing: bool,
) -> Result<Vec<BString>, StoreError> {
    use gix::status::plumbing::index_as_worktree_with_renames::{Entry, Recorder};
    let mut paths = Vec::new();
    if !staged_nothing {
        let head_tree = repo.head_tree_id_or_empty()?;
        let renames = gix::status::tree_index::TrackRenames::Disabled;
        // The whole repository, wherever the session started: without one of its own, gix limits the
        // comparison to the current directory.
        let mut everything = repo.pathspec(
            false,
            None::<&str>,
            false,
            index,
            gix::worktree::stack::state::attributes::Source::IdMapping,
        )?;
        let pathspec = Some(&mut everything);
        repo.tree_index_status(&head_tree, index, pathspec, renames, |change, _, _| {
            paths.push(change.location().to_owned());
            Ok(std::ops::ControlFlow::Continue(()))
        })?;
    }
    let mut recorder = Recorder::default();
    let options = gix::status::index_worktree::Options {
        dirwalk_options: None,
        rewrites: None,
        sorting: None,
        thread_limit: status_threads(index.entries().len()),
    };
    repo.index_worktree_status(
        index,
        Vec::<&gix::bstr::BStr>::new(),
        &mut recorder,
        gix::status::plumbing::index_as_worktree::traits::FastEq,
        SubmodulesAsRecorded,
        &mut gix::progress::Discard,
        &std::sync::atomic::AtomicBool::new(false),
        options,
    )?;
    for entry in recorder.records {
        if let Entry::Modification {
            rela_path, status, ..
        } = entry
        {
            if is_content_change(&status) {
                paths.push(rela_path.to_owned());
            }
        }
    }
    Ok(paths)
}

/// Submodules as HEAD records them: never opened or looked for.
#[derive(Clone, Copy)]
struct SubmodulesAsRecorded;

impl gix::status::plumbing::index_as_worktree::traits::SubmoduleStatus for SubmodulesAsRecorded {
    type Output = ();

    fn status(
        &mut self,
        _entry: &gix::index::Entry,
        _rela_path: &gix::bstr::BStr,
    ) -> gix::Result<Option<()>> {
        Ok(None)
    }
}

/// The status every caller here starts from: untracked files as `untracked` says, no rename tracking,
/// submodules taken as HEAD records them (never opened).
fn platform(
    repo: &gix::Repository,
    untracked: gix::status::UntrackedFiles,
) -> Result<gix::status::Platform<'_, gix::progress::Discard>, StoreError> {
    Ok(repo
        .status(gix::progress::Discard)?
        .untracked_files(untracked)
        .index_worktree_rewrites(None)
        .index_worktree_submodules(gix::status::Submodule::Given {
            ignore: gix::submodule::config::Ignore::All,
            check_dirty: false,
        }))
}

/// Whether the index records exactly HEAD's tree, known without reading a tree: its cache tree (the `TREE`
/// extension git keeps, and invalidates up to the root on any change) is valid at the root, covers every entry
/// and names HEAD's tree. Then nothing is staged and the HEAD-to-index half of a status (1,000 trees read on a
/// 100,000-file repository) is skipped, as git's own diff-index does.
fn index_is_head(repo: &gix::Repository, index: &gix::index::File) -> bool {
    let head_tree = repo.head_tree_id_or_empty().map(|id| id.detach());
    super::untracked::whole_tree(index).is_some_and(|tree| head_tree.is_ok_and(|head| head == tree))
}

/// True when `repo`'s work tree holds exactly its index: no tracked file modified, deleted or with a new
/// mode, and no untracked file that is not ignored (ignored files, such as build output, do not count).
/// Stops at the first difference.
pub(in crate::store) fn worktree_matches_index(repo: &gix::Repository) -> Result<bool, StoreError> {
    let status = platform(repo, gix::status::UntrackedFiles::Collapsed)?;
    for item in status.into_index_worktree_iter(None)? {
        if worktree_change(&item?) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// What the checkout `repo` holds beyond its index: tracked paths whose file differs from the index (or is
/// gone), and untracked or ignored leftovers (a wholly untracked or ignored directory as one path).
pub(in crate::store) struct Beyond {
    pub changed: Vec<BString>,
    pub leftovers: Vec<BString>,
}

pub(in crate::store) fn checkout_changes(repo: &gix::Repository) -> Result<Beyond, StoreError> {
    use gix::dir::walk::EmissionMode;
    let status = platform(repo, gix::status::UntrackedFiles::Collapsed)?
        .dirwalk_options(|o| o.emit_ignored(Some(EmissionMode::CollapseDirectory)));
    let mut out = Beyond {
        changed: Vec::new(),
        leftovers: Vec::new(),
    };
    for item in status.into_index_worktree_iter(None)? {
        match item? {
            WorktreeItem::DirectoryContents { entry, .. } => {
                if matches!(entry.status, DirStatus::Untracked | DirStatus::Ignored(_)) {
                    out.leftovers.push(entry.rela_path);
                }
            }
            item @ WorktreeItem::Modification { .. } => {
                if worktree_change(&item) {
                    out.changed.push(item.rela_path().to_owned());
                }
            }
            WorktreeItem::Rewrite { .. } => {}
        }
    }
    Ok(out)
}

/// True for an index-to-work-tree item that is a change of content, mode or presence, or an untracked file.
fn worktree_change(item: &WorktreeItem) -> bool {
    match item {
        WorktreeItem::Modification { status, .. } => is_content_change(status),
        WorktreeItem::DirectoryContents { entry, .. } => {
            matches!(entry.status, DirStatus::Untracked)
        }
        WorktreeItem::Rewrite { .. } => true,
    }
}

/// A tracked file's status that is a change of content, mode or presence: not merely stat data to refresh,
/// nor an entry added with intent.
fn is_content_change<T, U>(status: &EntryStatus<T, U>) -> bool {
    !matches!(
        status,
        EntryStatus::NeedsUpdate(_) | EntryStatus::IntentToAdd
    )
}
