//! The files of a session's checkout: made, rewritten path by path, and reset to another tree, all in-process.
//!
//! A checkout is a linked worktree as `git worktree add --detach` makes it: `<common git dir>/worktrees/<name>`
//! holds `gitdir`, `commondir`, `HEAD` (detached) and `index`; the checkout's `.git` file points back there.
//! gix writes those ([`gix::Repository::prepare_add_worktree()`]) and checks the tree out through the same
//! filter pipeline `git checkout` uses (smudge and process filters, `eol`/`text` from `.gitattributes`,
//! `core.autocrlf`), so plain `git status` in the checkout is clean and `git worktree list/remove` work on it.
//! Why not `git worktree add`: on a 100,000-file repository the subprocess plus the reset that followed it
//! took ~39 s, three stats and a write per file; in-process it is one write per file (issue 16).
//!
//! The registration is serialised by the worktree lock (`Store::worktree_lock`): a concurrent registration
//! that has made its admin directory but not written `gitdir` yet breaks every other reader of
//! `<common>/worktrees/*`. The checkout of the files runs outside the lock, so sessions starting together
//! write their files in parallel.
//!
//! Rewriting only some paths ([`Store::write_paths()`]) and resetting to another tree
//! ([`Store::reset_checkout()`], used by the pool) go through the same checkout machinery on an index holding
//! just the entries to write, so filters apply there too.

pub(super) mod changes;
mod from_diff;
pub(super) mod fsmonitor;
pub(super) mod pool;
#[cfg(all(target_os = "linux", not(git_agent_portable)))]
pub(super) mod rules;
pub(super) mod scan;
pub(super) mod scratch;
pub(super) mod status;
mod untracked;
#[cfg(all(target_os = "linux", not(git_agent_portable)))]
pub(super) mod watch;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use std::os::unix::ffi::OsStrExt;

use gix::bstr::{BStr, BString, ByteSlice};
use gix::index::entry::{Flags, Mode, Stat};
use gix::progress::{Count, NestedProgress, Progress as GixProgress, StepShared, Unit};

use super::repo::{as_path, Store, StoreError};
use gix::ObjectId;

/// How far a long checkout is: files written of total. Cheap to clone; shared with whoever shows it.
#[derive(Clone, Debug, Default)]
pub struct Progress {
    done: Arc<AtomicUsize>,
    total: Arc<AtomicUsize>,
}

impl Progress {
    /// Files written so far and the total (0 until known).
    pub fn get(&self) -> (u64, u64) {
        (
            self.done.load(Ordering::Relaxed) as u64,
            self.total.load(Ordering::Relaxed) as u64,
        )
    }

    fn set_total(&self, total: usize) {
        self.total.store(total, Ordering::Relaxed);
    }
}

impl Store {
    /// Makes the linked checkout at `root` (which must not exist), detached at `start`, its files checked out.
    /// On failure nothing of it is left.
    pub fn add_checkout(
        &self,
        root: &Path,
        start: ObjectId,
        progress: &Progress,
    ) -> Result<(), StoreError> {
        {
            let _lock = self.worktree_lock()?;
            self.forget_missing_checkouts();
            self.register_checkout(root, start)?;
        }
        super::repo::crash_point();
        let checked_out = self.open_checkout(root).and_then(|mut checkout| {
            if index_entries(&self.repo.index_path())
                .is_some_and(|n| (n as usize) < PARALLEL_CHECKOUT_FILES)
            {
                one_checkout_worker(&mut checkout).map_err(|err| checkout_error(root, &err))?;
            }
            let worktree = checkout
                .worktree()
                .ok_or_else(|| StoreError::NoWorkTree(root.to_path_buf()))?;
            worktree
                .checkout(Tally::root(progress), &AtomicBool::new(false))
                .map_err(|err| checkout_error(root, &err))?;
            // The index just written is HEAD's tree, `start`'s: recorded (best effort), so the first reset
            // (this checkout going into the pool) applies the changes too.
            let tree = checkout
                .find_commit(start)
                .ok()
                .and_then(|c| c.tree_id().ok());
            if let Some(tree) = tree {
                from_diff::record_file(&checkout.index_path(), tree.detach());
            }
            Ok(())
        });
        if let Err(err) = checked_out {
            let _ = self.remove_checkout(root);
            return Err(err);
        }
        Ok(())
    }

    /// Registers `root` as a linked worktree detached at `start`, as `git worktree add --detach --no-checkout`
    /// would: `<common>/worktrees/<name>/{gitdir,commondir,HEAD}` and `root/.git`. The registration is written
    /// aside and renamed into place, so whatever moment a process dies at, no `worktrees/<name>` ever holds a
    /// HEAD that points nowhere (`git fsck` reports that as an error; `git worktree add` itself writes a
    /// null HEAD first). Call with the worktree lock held.
    fn register_checkout(&self, root: &Path, start: ObjectId) -> Result<(), StoreError> {
        let worktrees = self.common_dir().join("worktrees");
        let name = root
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| StoreError::InvalidPath(root.to_path_buf()))?;
        let staging = self
            .common_dir()
            .join("agent")
            .join("tmp")
            .join(format!("{name}.{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&staging);
        std::fs::create_dir_all(&staging).map_err(StoreError::io("create", &staging))?;
        std::fs::create_dir_all(&worktrees).map_err(StoreError::io("create", &worktrees))?;
        let write = |file: &str, text: String| {
            let path = staging.join(file);
            std::fs::write(&path, text).map_err(StoreError::io("write", path))
        };
        write("gitdir", format!("{}\n", root.join(".git").display()))?;
        write("commondir", "../..\n".into())?;
        write("HEAD", format!("{start}\n"))?;
        if let Some(parent) = root.parent() {
            std::fs::create_dir_all(parent).map_err(StoreError::io("create", parent))?;
        }
        std::fs::create_dir(root).map_err(StoreError::io("create", root))?;
        // Like git: the registration is named after the checkout, with a number added when that is taken.
        for n in 0..100u32 {
            let admin = if n == 0 {
                worktrees.join(name)
            } else {
                worktrees.join(format!("{name}{n}"))
            };
            if admin.exists() {
                continue;
            }
            let dot_git = root.join(".git");
            std::fs::write(&dot_git, format!("gitdir: {}\n", admin.display()))
                .map_err(StoreError::io("write", &dot_git))?;
            match std::fs::rename(&staging, &admin) {
                Ok(()) => return Ok(()),
                Err(_) if admin.exists() => continue,
                Err(err) => {
                    let _ = std::fs::remove_dir_all(root);
                    return Err(StoreError::io("register", admin)(err));
                }
            }
        }
        let _ = std::fs::remove_dir_all(root);
        let _ = std::fs::remove_dir_all(&staging);
        Err(StoreError::NoFreeCheckoutName {
            root: root.to_path_buf(),
            dir: worktrees,
        })
    }

    /// True if the checkout at `root` was made to the end: registered, and its index written (the last thing
    /// a checkout or a reset writes), its index and HEAD plain files.
    pub(super) fn checkout_complete(&self, root: &Path) -> bool {
        // Regular files, not links or FIFOs the checkout's commands could have left in its registration: a
        // checkout that has them is made again rather than pooled and reset through them.
        let regular = |path: &Path| std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file());
        self.admin_dir_of(root)
            .is_some_and(|admin| regular(&admin.join("index")) && regular(&admin.join("HEAD")))
    }

    /// Removes the registrations of session checkouts whose directory is gone (deleted by hand, or a crash
    /// between the two removals), so their paths can be registered again. Other worktrees are not touched.
    /// Call with the worktree lock held.
    pub(super) fn forget_missing_checkouts(&self) {
        let owned = self.common_dir().join("agent");
        let Ok(entries) = std::fs::read_dir(self.common_dir().join("worktrees")) else {
            return;
        };
        for entry in entries.flatten() {
            let admin = entry.path();
            // A session's commands could write its registration: bounded, no link, no FIFO.
            let read = crate::sys::fs::read_regular(&admin.join("gitdir"), 4096);
            let Some(gitdir) = read.ok().and_then(|b| String::from_utf8(b).ok()) else {
                continue;
            };
            let dot_git = PathBuf::from(gitdir.trim_end_matches(['\n', '\r']));
            if dot_git.starts_with(&owned) && !dot_git.exists() {
                // Best effort: a leftover registration only costs a suffixed name for the next one.
                let _ = std::fs::remove_dir_all(&admin);
            }
        }
    }

    /// Makes `paths` (checkout-relative) of the checkout at `root` what `tree` says, through the smudge
    /// filters; paths `tree` lacks are removed (and directories left empty by that). The checkout's index
    /// and HEAD are not touched.
    pub fn write_paths(
        &self,
        root: &Path,
        tree: ObjectId,
        paths: &[BString],
    ) -> Result<(), StoreError> {
        // Neither written nor removed: a path the tree path policy refuses (`../x`, `.git/hooks/...`) would
        // land outside the checkout or in its repository (issue 22, finding 1).
        refuse_tree_paths(paths.iter().map(|p| p.as_slice()))?;
        let checkout = self.open_checkout(root)?;
        let tree = checkout.find_tree(tree)?;
        let mut index = gix::index::State::new(checkout.object_hash());
        for path in paths {
            match tree.lookup_entry_by_path(as_path(path.as_bstr()))? {
                Some(entry) if !entry.mode().is_tree() => {
                    index.dangerously_push_entry(
                        Stat::default(),
                        entry.object_id(),
                        Flags::empty(),
                        Mode::from(entry.mode()),
                        path.as_bstr(),
                    );
                }
                _ => remove_path(root, path.as_bstr())?,
            }
        }
        index.sort_entries();
        if index.entries().is_empty() {
            return Ok(());
        }
        checkout_entries(&checkout, root, &mut index, &Progress::default())
    }

    /// The repository as seen from the checkout at `root` (its attributes, its index and HEAD).
    ///
    /// Opened through its registration, so `GIT_INDEX_FILE` or `GIT_WORK_TREE` set for the user's repository
    /// (git-agent started from a hook, or as `git --work-tree=... agent`) cannot point the checkout at the
    /// user's index or files. The user's own work tree (`--here`) is opened as the store opened it.
    pub fn open_checkout(&self, root: &Path) -> Result<gix::Repository, StoreError> {
        // The checkout's handle reads objects from disk only.
        self.persist_objects()?;
        if let Some(admin) = self.admin_dir_of(root) {
            // gix reads these with a plain open, and the checkout's commands can write the registration.
            StoreError::check_git_file(&admin.join("HEAD"), "the checkout's HEAD")?;
            StoreError::check_git_file(&admin.join("commondir"), "the checkout's commondir")?;
            let name = admin.file_name().map_or(&[][..], |n| n.as_bytes());
            if let Some(proxy) = self.repo.worktree_proxy_by_id(name.as_bstr())? {
                return Ok(proxy.into_repo()?);
            }
        }
        Ok(gix::open_opts(root, self.repo.open_options().clone())?)
    }

    /// Moves the checkout at `root` to `commit`: HEAD detached there, the index describing its tree, and the
    /// files equal to it. Only what differs from the checkout's current index is written: entries whose path,
    /// id and mode are unchanged keep their file and their stat data, unless listed in `dirty` (known to
    /// differ on disk). Paths in `leftovers` (untracked or ignored files) are removed first. The new index
    /// is the old one with the changes between the two trees applied when the old one records its tree
    /// ([`from_diff`]), else built from the whole new tree. The cost is proportional to what changed plus
    /// one pass over the index in memory.
    pub(super) fn reset_checkout(
        &self,
        root: &Path,
        commit: ObjectId,
        dirty: &[BString],
        leftovers: &[BString],
        progress: &Progress,
    ) -> Result<usize, StoreError> {
        let checkout = self.open_checkout(root)?;
        let tree = checkout.find_commit(commit)?.tree_id()?.detach();
        let index_path = checkout.index_path();
        let aside_path = index_path.with_file_name(INDEX_ASIDE);
        let reading = crate::sys::timings::begin();
        let shared = checkout.open_index().ok();
        // A pooled checkout comes with its index set aside ([`Store::set_index_aside()`]).
        let aside = match shared {
            Some(_) => None,
            // Written by us, whole (a lock file renamed into place): its checksum is not hashed again, as
            // git does not on a read either. Its entries are taken over only while the record beside it names
            // exactly this file ([`from_diff::recorded_tree()`]).
            None => gix::index::File::at(
                &aside_path,
                checkout.object_hash(),
                true,
                Default::default(),
            )
            .ok(),
        };
        let old_file: Option<&gix::index::File> = shared.as_ref().or(aside.as_ref());
        crate::sys::timings::end("read index", reading, &[]);
        let old: Option<&gix::index::State> = old_file.map(|f| &**f);
        // The changes between the old index's tree and the new one applied to the old index, when it records
        // its tree (issue 29); else, or when anything about it is unusual, the whole new tree.
        let building = crate::sys::timings::begin();
        let from_diff = old_file.and_then(|file| {
            let old_tree = from_diff::recorded_tree(file)?;
            from_diff::index_from_diff(&checkout, file, old_tree, tree)
        });
        let from = if from_diff.is_some() {
            "changes"
        } else {
            "tree"
        };
        let mut new = match from_diff {
            Some(new) => new,
            None => checkout.index_from_tree(&tree)?,
        };
        crate::sys::timings::end(
            "reset index",
            building,
            &[("from", crate::sys::timings::Detail::Text(from))],
        );
        // Until the new index is written the checkout is neither the old tree nor the new one: without an
        // index it counts as unfinished, and a resume makes it afresh instead of trusting it.
        match std::fs::remove_file(&index_path) {
            Err(err) if err.kind() != std::io::ErrorKind::NotFound => {
                return Err(StoreError::io("remove", index_path)(err))
            }
            _ => {}
        }
        super::repo::crash_point();
        for path in leftovers {
            remove_path(root, path.as_bstr())?;
        }
        let mut dirty: Vec<&BStr> = dirty.iter().map(|p| p.as_bstr()).collect();
        dirty.sort();
        let (to_write, gone) = keep_unchanged(old, &mut new, &dirty);
        // Paths the old index had and the new one lacks: their files go (before the new files are written: a
        // file may become a directory).
        for path in &gone {
            remove_path(root, path.as_bstr())?;
        }
        progress.set_total(to_write);
        if to_write > 0 {
            checkout_entries(&checkout, root, &mut new, progress)?;
        }
        for entry in new.entries_mut() {
            entry.flags.remove(Flags::SKIP_WORKTREE);
        }
        // HEAD before the index: the index is what marks the checkout complete, so a kill between the two must
        // leave it without one (made afresh on resume), not with the new index under the old HEAD.
        set_detached_head(&checkout, commit)?;
        let writing = crate::sys::timings::begin();
        let options = gix::index::write::Options {
            skip_hash: skips_index_hash(&checkout),
            ..Default::default()
        };
        new.write(options)
            .map_err(|err| checkout_error(root, &err))?;
        crate::sys::timings::end("write index", writing, &[]);
        from_diff::record(&index_path, tree, new.checksum());
        // The old index served its purpose; a leftover would only be read by a later reset, never trusted.
        let _ = std::fs::remove_file(&aside_path);
        Ok(to_write)
    }

    /// Renames the index of the checkout at `root` to [`INDEX_ASIDE`], in its registration: from then on the
    /// checkout counts as unfinished ([`Store::checkout_complete()`]) while [`Store::reset_checkout()`] can
    /// still compare with it. A pooled checkout is set aside so before it moves to a new session's path: a
    /// kill between the move and the reset must not leave the new session a complete-looking checkout that
    /// holds the previous session's tree.
    pub(super) fn set_index_aside(&self, root: &Path) -> Result<(), StoreError> {
        let Some(admin) = self.admin_dir_of(root) else {
            return Ok(());
        };
        let index = admin.join("index");
        match std::fs::rename(&index, admin.join(INDEX_ASIDE)) {
            Err(err) if err.kind() != std::io::ErrorKind::NotFound => {
                Err(StoreError::io("move", index)(err))
            }
            _ => Ok(()),
        }
    }
}

/// Whether a checkout's index is written without its trailing checksum, as git 2.40 and later write every
/// index when the repository says `index.skipHash` (or `feature.manyFiles`, which implies it): hashing the
/// whole file is most of the write, 230 of 375 ms for a million entries (issue 29).
fn skips_index_hash(checkout: &gix::Repository) -> bool {
    let config = checkout.config_snapshot();
    config
        .boolean("index.skipHash")
        .or_else(|| config.boolean("feature.manyFiles"))
        .unwrap_or(false)
}

/// Where [`Store::set_index_aside()`] puts a checkout's index, beside it in its registration.
const INDEX_ASIDE: &str = "index.pooled";

/// Below this many index entries a checkout writes its files on the calling thread: gix would start a thread
/// per core to write three files. Git's own threshold for a parallel checkout
/// (`checkout.thresholdForParallelism`) is 100 files.
const PARALLEL_CHECKOUT_FILES: usize = 100;

/// Makes gix write a checkout's files on the calling thread (`checkout.workers = 1`, in memory only).
fn one_checkout_worker(checkout: &mut gix::Repository) -> Result<(), gix::Error> {
    let mut config = checkout.config_snapshot_mut();
    config.set_value(&gix::config::tree::Checkout::WORKERS, "1")?;
    config.commit().map(|_| ())
}

/// The number of entries in the index file at `path`, from its header alone; `None` when it cannot be read.
pub(super) fn index_entries(path: &Path) -> Option<u32> {
    use std::io::Read;
    // The header: "DIRC", a version, the entry count (all big-endian).
    let mut header = [0u8; 12];
    std::fs::File::open(path)
        .ok()?
        .read_exact(&mut header)
        .ok()?;
    (&header[..4] == b"DIRC")
        .then(|| u32::from_be_bytes([header[8], header[9], header[10], header[11]]))
}

/// Checks out the entries of `index` not flagged `SKIP_WORKTREE` into `root`, overwriting what is there,
/// and records their new stat data in `index`.
fn checkout_entries(
    checkout: &gix::Repository,
    root: &Path,
    index: &mut gix::index::State,
    progress: &Progress,
) -> Result<(), StoreError> {
    use gix::worktree::stack::state::attributes::Source;
    let mut options = checkout
        .checkout_options(Source::WorktreeThenIdMapping)
        .map_err(|err| checkout_error(root, &err))?;
    options.overwrite_existing = true;
    options.destination_is_initially_empty = false;
    if index.entries().len() < PARALLEL_CHECKOUT_FILES {
        options.thread_limit = Some(1);
    }
    let objects = checkout
        .objects
        .clone()
        .into_arc()
        .map_err(StoreError::io("open the object database of", root))?;
    let files = Tally::counting(progress);
    let bytes = Tally::discard();
    let interrupt = AtomicBool::new(false);
    let outcome =
        gix::worktree::state::checkout(index, root, objects, &files, &bytes, &interrupt, options)
            .map_err(|err| checkout_error(root, &err))?;
    if let Some(failed) = outcome.errors.first() {
        return Err(StoreError::Checkout {
            path: root.join(as_path(failed.path.as_bstr())),
            message: describe(&failed.error),
        });
    }
    if let Some(collision) = outcome.collisions.first() {
        return Err(StoreError::Checkout {
            path: root.join(as_path(collision.path.as_bstr())),
            message: format!("something else is in the way ({:?})", collision.error_kind),
        });
    }
    Ok(())
}

/// Marks the entries of `new` whose file the checkout already holds as the old index `old` recorded it (same
/// path, id and mode, stat data known, not in the sorted `dirty`): they keep that stat data and are skipped by
/// the checkout. Returns how many entries are left to write and the paths only `old` has. Both indexes are
/// sorted by path, so one merged pass does it (binary searches of a 100,000-entry index were a third of a
/// pooled session's start).
fn keep_unchanged(
    old: Option<&gix::index::State>,
    new: &mut gix::index::State,
    dirty: &[&BStr],
) -> (usize, Vec<BString>) {
    let mut to_write = 0;
    let mut gone = Vec::new();
    let mut olds = old
        .map(|o| o.entries())
        .unwrap_or_default()
        .iter()
        .peekable();
    let old_path = |e: &gix::index::Entry| old.map_or(BStr::new(""), |o| e.path(o));
    let (entries, paths) = new.entries_mut_and_pathbacking();
    for entry in entries.iter_mut() {
        let path = entry.path_in(paths);
        while let Some(o) = olds.next_if(|o| old_path(o) < path) {
            push_once(&mut gone, old_path(o));
        }
        let mut same = None;
        while let Some(o) = olds.next_if(|o| old_path(o) == path) {
            if o.stage() == gix::index::entry::Stage::Unconflicted {
                same = Some(o);
            }
        }
        let same = same.filter(|o| {
            o.id == entry.id
                && o.mode == entry.mode
                && dirty.binary_search(&path).is_err()
                && o.stat != Stat::default()
        });
        match same {
            Some(o) => {
                entry.stat = o.stat;
                entry.flags.insert(Flags::SKIP_WORKTREE);
            }
            None => to_write += 1,
        }
    }
    for o in olds {
        push_once(&mut gone, old_path(o));
    }
    (to_write, gone)
}

/// Appends `path` unless it is the last one there (an index lists a conflicted path once per stage).
fn push_once(paths: &mut Vec<BString>, path: &BStr) {
    if paths.last().map(|p| p.as_bstr()) != Some(path) {
        paths.push(path.to_owned());
    }
}

/// Points the checkout's HEAD at `commit`, detached, as `git checkout --detach` would (with a reflog entry).
fn set_detached_head(checkout: &gix::Repository, commit: ObjectId) -> Result<(), StoreError> {
    use gix::refs::transaction::{Change, LogChange, PreviousValue, RefEdit, RefLog};
    let edit = RefEdit {
        change: Change::Update {
            log: LogChange {
                mode: RefLog::AndReference,
                force_create_reflog: false,
                message: "git-agent: reuse checkout".into(),
            },
            expected: PreviousValue::Any,
            new: gix::refs::Target::Object(commit),
        },
        name: "HEAD"
            .try_into()
            .map_err(|_| StoreError::InvalidRefName("HEAD"))?,
        deref: false,
    };
    super::objects::snapshot::edit_ref(checkout, edit)
}

/// Removes `rel` under `root` (a file, link or whole directory) if it is there, and the directories left
/// empty above it, as git does when a checkout drops a path.
pub(super) fn remove_path(root: &Path, rel: &BStr) -> Result<(), StoreError> {
    let full = root.join(as_path(rel));
    let removed = match std::fs::symlink_metadata(&full) {
        Ok(md) if md.is_dir() => std::fs::remove_dir_all(&full),
        Ok(_) => std::fs::remove_file(&full),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(err) => Err(err),
    };
    removed.map_err(StoreError::io("remove", &full))?;
    let mut dir = full.parent();
    while let Some(d) = dir {
        if d == root || !d.starts_with(root) || std::fs::remove_dir(d).is_err() {
            break;
        }
        dir = d.parent();
    }
    Ok(())
}

/// A failed checkout in words: what, where, and the causes gix gives, without debug structures.
fn checkout_error(root: &Path, err: &dyn std::error::Error) -> StoreError {
    StoreError::Checkout {
        path: root.to_path_buf(),
        message: describe(err),
    }
}

/// `err` and its causes, joined with ": ", each said once.
pub(super) fn describe(err: &dyn std::error::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut next: Option<&dyn std::error::Error> = Some(err);
    while let Some(e) = next {
        let text = e.to_string();
        if !text.is_empty() && !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        next = e.source();
    }
    parts.join(": ")
}

/// Progress as gix reports it, reduced to one counter: the files of the `checkout` child (or of itself when
/// counting); byte counts and messages are dropped.
struct Tally {
    shared: Progress,
    counting: bool,
    step: StepShared,
}

impl Tally {
    fn root(progress: &Progress) -> Tally {
        Tally {
            shared: progress.clone(),
            counting: false,
            step: Arc::new(AtomicUsize::new(0)),
        }
    }

    fn counting(progress: &Progress) -> Tally {
        Tally {
            shared: progress.clone(),
            counting: true,
            step: Arc::clone(&progress.done),
        }
    }

    fn discard() -> Tally {
        Tally::root(&Progress::default())
    }
}

impl Count for Tally {
    fn set(&self, step: usize) {
        self.step.store(step, Ordering::Relaxed);
    }

    fn step(&self) -> usize {
        self.step.load(Ordering::Relaxed)
    }

    fn inc_by(&self, step: usize) {
        self.step.fetch_add(step, Ordering::Relaxed);
    }

    fn counter(&self) -> StepShared {
        Arc::clone(&self.step)
    }
}

impl GixProgress for Tally {
    fn init(&mut self, max: Option<usize>, _unit: Option<Unit>) {
        if self.counting {
            if let Some(max) = max {
                self.shared.set_total(max);
            }
        }
    }

    fn set_name(&mut self, _name: String) {}

    fn name(&self) -> Option<String> {
        None
    }

    fn id(&self) -> gix::progress::Id {
        *b"GACO"
    }

    fn message(&self, _level: gix::progress::MessageLevel, _message: String) {}
}

impl NestedProgress for Tally {
    type SubProgress = Tally;

    fn add_child(&mut self, name: impl Into<String>) -> Tally {
        if name.into() == "checkout" {
            Tally::counting(&self.shared)
        } else {
            Tally::discard()
        }
    }

    fn add_child_with_id(&mut self, name: impl Into<String>, _id: gix::progress::Id) -> Tally {
        self.add_child(name)
    }
}

/// Refuses (nothing written) when any of `paths` breaks the tree path policy
/// ([`crate::safety::tree_path`]); the error names each refused path and its rule.
pub(crate) fn refuse_tree_paths<'a>(
    paths: impl IntoIterator<Item = &'a [u8]>,
) -> Result<(), StoreError> {
    use crate::safety::tree_path::{check, EntryKind};
    let refused: Vec<String> = paths
        .into_iter()
        .filter_map(|p| check(p, EntryKind::File).err())
        .map(|r| r.to_string())
        .collect();
    if refused.is_empty() {
        return Ok(());
    }
    Err(StoreError::UnwritablePaths(refused))
}
