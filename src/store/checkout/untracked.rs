//! Step 0's untracked files, remembered between sessions the way git's untracked cache does (issue 29): a
//! directory whose identity (inode, mtime and ctime) has not changed since the last walk holds the same names
//! it held then, so its untracked files are the ones found then and it is not read again.
//!
//! Why: on a 100,000-file repository on disk, finding untracked files reads every directory and classifies
//! every name in it, and a pooled second session spent four fifths of its time in step 0. With the walk
//! remembered, step 0 reads only the directories that changed (none, when the user changed nothing between
//! two sessions) and stats the others.
//!
//! What a remembered directory's answer depends on, and how each is checked:
//! - the names in it: creating, deleting or renaming an entry changes the directory's mtime and ctime (ctime
//!   cannot be set back, so `touch -d` does not hide a change);
//! - the untracked directories below it that were walked: each has its own record, checked the same way, and
//!   a directory is skipped only when every record under it holds;
//! - the ignore rules: any `.gitignore` seen in the last walk, `info/exclude` and the user's excludes file
//!   keep their identity, else everything is walked again (rules apply to whole subtrees);
//! - the index (which paths are tracked): the tree its cache tree records when that covers every entry, else
//!   its checksum, is part of the key;
//! - a change within the timestamps' granularity right after the last walk: a directory changed less than
//!   [`RACY`] before that walk started is never trusted (git's racy rule), and is read again.
//!
//! The records live in `<common git dir>/agent/untracked.json`, versioned, for one work tree at a time, at
//! least [`MIN_DIRS`] and at most [`MAX_DIRS`] directories; a missing, stale, corrupt or foreign file means a
//! full walk, as before.
//! Writing it is best effort: it never fails a session.

use std::collections::{BTreeMap, HashSet};
use std::ops::Bound;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use gix::bstr::{BStr, BString, ByteSlice};
use gix::dir::entry::{Kind, Status};
use gix::dir::walk::{Action, Delegate, EmissionMode, ForDeletionMode};
use gix::dir::EntryRef;
use serde::{Deserialize, Serialize};

use crate::store::repo::StoreError;
use crate::sys::timings::Detail;

/// The format of the file: another version is a full walk.
const VERSION: u32 = 1;
/// The file, under `<common git dir>/agent/`.
const FILE: &str = "untracked.json";
/// Directories remembered at most: past this, the file would cost more to read than it saves.
const MAX_DIRS: usize = 200_000;
/// Directories remembered at least: a smaller walk is read again next time, since writing the file (a new
/// inode each time it changes, about a millisecond right after a mass deletion on ext4 without a journal)
/// and reading it back cost more than reading a dozen directories (issue 29).
const MIN_DIRS: usize = 16;
/// A directory changed this shortly before a walk may change again within its timestamp's granularity
/// without its identity showing it: it is read again next time. A second, as git's racy rule.
const RACY: Duration = Duration::from_secs(1);

/// What identifies a file system entry's state: device, inode, mtime and ctime (seconds, nanoseconds).
type Identity = [i64; 6];

/// The remembered walk.
#[derive(Serialize, Deserialize)]
struct Cache {
    version: u32,
    /// What the walk depended on besides the directories (see [`key()`]).
    key: String,
    /// The directories walked, by repository-relative path (`""` is the root).
    dirs: BTreeMap<String, Dir>,
}

/// One walked directory.
#[derive(Serialize, Deserialize, Clone, PartialEq, Eq)]
struct Dir {
    id: Identity,
    /// Its `.gitignore`, if it had one.
    ignore: Option<Identity>,
    /// Changed within [`RACY`] of the walk: never trusted.
    racy: bool,
    /// The untracked entries directly in it (repository-relative paths).
    untracked: Vec<String>,
}

/// The untracked, not ignored files of `repo`'s work tree (each listed on its own, as `git status
/// --untracked-files=all` lists them), `index` telling what is tracked: from the remembered walk where it
/// still holds, from a walk of the rest, and remembered again for the next session.
pub(in crate::store) fn files(
    repo: &gix::Repository,
    index: &gix::index::File,
) -> Result<Vec<BString>, StoreError> {
    let Some(workdir) = repo.workdir() else {
        return Ok(Vec::new());
    };
    let walking = crate::sys::timings::begin();
    let started = SystemTime::now();
    let options = repo
        .dirwalk_options()?
        .emit_untracked(EmissionMode::Matching);
    let key = key(repo, index, &format!("{options:?}"));
    let file = repo.common_dir().join("agent").join(FILE);
    let old = key.as_ref().and_then(|key| load(&file, key));
    let reuse = old.as_ref().and_then(|cache| Reuse::check(cache, workdir));
    // Every record holds, the root's too: its names, and so everything below it, are what the last walk
    // found. Nothing is read; gix's walk would classify every entry of the root against the index (on a
    // 1,000,000-file repository two thirds of step 0's untracked half) only to skip each one.
    if let (Some(old), Some(reuse)) = (&old, &reuse) {
        if reuse.skippable.contains("") {
            let untracked = old
                .dirs
                .values()
                .flat_map(|dir| dir.untracked.iter().map(|p| BString::from(p.as_str())))
                .collect();
            let kept = Detail::Count(old.dirs.len() as u64);
            crate::sys::timings::end(
                "untracked",
                walking,
                &[("read", Detail::Count(0)), ("kept", kept)],
            );
            return Ok(untracked);
        }
    }
    let mut walker = Walker {
        workdir,
        skippable: reuse.as_ref().map(|r| &r.skippable),
        started,
        walked: BTreeMap::new(),
        skipped: Vec::new(),
        untracked: Vec::new(),
        rememberable: true,
    };
    let interrupt = AtomicBool::new(false);
    let outcome = repo.dirwalk(index, None::<&str>, &interrupt, options, &mut walker)?;
    let read = u64::from(outcome.dirwalk.read_dir_calls);
    let (untracked, remember, kept) = walker.finish(old.as_ref());
    // How much of the walk was remembered: what explains a step 0's time on a large repository.
    let counts = [("read", Detail::Count(read)), ("kept", Detail::Count(kept))];
    crate::sys::timings::end("untracked", walking, &counts);
    match (remember, key) {
        (Remember::Walk(dirs), Some(key)) if dirs.len() >= MIN_DIRS => store(&file, key, dirs),
        // Too small to be worth keeping, or not rememberable: no file, so nothing stale stays.
        (Remember::Walk(_), Some(_)) | (Remember::Nothing, _) => {
            let _ = std::fs::remove_file(&file);
        }
        (Remember::Walk(_), None) | (Remember::Unchanged, _) => {}
    }
    Ok(untracked)
}

/// What of a finished walk goes to the file.
enum Remember {
    /// These records (read now, or taken over from the last walk).
    Walk(BTreeMap<String, Dir>),
    /// What was read is what the file holds (the root, read every time: gix never calls it tracked).
    Unchanged,
    /// A path cannot be remembered (it is not UTF-8): no file, so nothing stale stays.
    Nothing,
}

/// The records of `top` and of every directory below it.
fn subtree<'a>(dirs: &'a BTreeMap<String, Dir>, top: &str) -> Vec<(&'a String, &'a Dir)> {
    if top.is_empty() {
        return dirs.iter().collect();
    }
    // From `top/` to `top0`: '0' follows '/', so these are exactly the paths inside `top`.
    let (from, to) = (format!("{top}/"), format!("{top}0"));
    let inside =
        dirs.range::<str, _>((Bound::Included(from.as_str()), Bound::Excluded(to.as_str())));
    dirs.get_key_value(top).into_iter().chain(inside).collect()
}

/// What the last walk depended on besides the directories: the work tree, which paths are tracked
/// ([`tracked_paths()`]), the walk's options (case, unicode) and the identities of the excludes outside the
/// work tree. `None` (no cache) when the index says nothing about its paths that can be compared.
fn key(repo: &gix::Repository, index: &gix::index::File, options: &str) -> Option<String> {
    let tracked = tracked_paths(index)?;
    let workdir = repo.workdir()?.to_str()?;
    let mut excludes = vec![
        repo.git_dir().join("info").join("exclude"),
        repo.common_dir().join("info").join("exclude"),
    ];
    if let Ok(Some(path)) = repo.config_snapshot().trusted_path("core.excludesFile") {
        excludes.push(path);
    }
    let config_home = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| dirs::home_dir().map(|home| home.join(".config")));
    excludes.extend(config_home.map(|dir| dir.join("git").join("ignore")));
    let excludes: Vec<(String, Option<Identity>)> = excludes
        .iter()
        .map(|path| (path.display().to_string(), identity(path)))
        .collect();
    Some(format!("{workdir}\n{tracked}\n{options}\n{excludes:?}"))
}

/// What names the set of paths `index` tracks. The tree its cache tree (git's `TREE` extension) records when
/// that covers every entry: git invalidates the cache tree up to the root whenever a path is added or
/// removed, and keeps it when it only refreshes stat data, so `git status` (which rewrites the index with a
/// file-system monitor's new token every time) does not throw the walk away. Else the index's checksum:
/// any rewrite is a new key. Neither for an index written without a checksum (`index.skipHash`) whose cache
/// tree does not cover it.
fn tracked_paths(index: &gix::index::File) -> Option<String> {
    if let Some(tree) = whole_tree(index) {
        return Some(format!("tree {tree} {}", index.entries().len()));
    }
    let checksum = index.checksum().filter(|id| !id.is_null())?;
    Some(format!("index {checksum}"))
}

/// The tree `index` holds exactly, by its cache tree: valid at the root and counting every entry.
pub(super) fn whole_tree(index: &gix::index::File) -> Option<gix::ObjectId> {
    let root = index.tree()?;
    let covers_all = root
        .num_entries
        .is_some_and(|n| n as usize == index.entries().len());
    (covers_all && root.name.is_empty()).then_some(root.id)
}

/// The cache in `file`, if it is there, readable, of this version and made under `key`.
fn load(file: &Path, key: &str) -> Option<Cache> {
    let bytes = std::fs::read(file).ok()?;
    let cache: Cache = serde_json::from_slice(&bytes).ok()?;
    (cache.version == VERSION && cache.key == key).then_some(cache)
}

/// Writes the cache atomically (a temporary file renamed over it); failures are ignored: without the file
/// the next session walks everything, as it did before there was one.
fn store(file: &Path, key: String, dirs: BTreeMap<String, Dir>) {
    if dirs.len() > MAX_DIRS {
        let _ = std::fs::remove_file(file);
        return;
    }
    let cache = Cache {
        version: VERSION,
        key,
        dirs,
    };
    let Ok(bytes) = serde_json::to_vec(&cache) else {
        return;
    };
    let temp = file.with_extension(format!("json.{}", std::process::id()));
    let written = file
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| std::fs::write(&temp, bytes))
        .and_then(|()| std::fs::rename(&temp, file));
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
}

/// What of the last walk can be taken as it is.
struct Reuse {
    /// Directories whose record, and every record below them, still holds: not read again.
    skippable: HashSet<String>,
}

impl Reuse {
    /// Checks every record of `cache` against the disk under `workdir`. `None` when the ignore rules may have
    /// changed (a `.gitignore` seen in the last walk changed, or one appeared in a changed directory): then
    /// everything is walked.
    fn check(cache: &Cache, workdir: &Path) -> Option<Reuse> {
        let mut valid = Vec::with_capacity(cache.dirs.len());
        let mut tainted: HashSet<&str> = HashSet::new();
        for (path, dir) in &cache.dirs {
            let at = workdir.join(path);
            let now = identity(&at);
            let holds = !dir.racy && now == Some(dir.id);
            // A `.gitignore` changed in place leaves its directory as it was; one that appeared did not.
            let may_differ = dir.ignore.is_some() || (!holds && now.is_some());
            if may_differ && identity(&at.join(".gitignore")) != dir.ignore {
                return None;
            }
            if holds {
                valid.push(path.as_str());
            } else {
                // Its ancestors must be read to reach it.
                let mut up = path.as_str();
                while let Some(at) = up.rfind('/') {
                    up = &up[..at];
                    tainted.insert(up);
                }
                tainted.insert("");
            }
        }
        let skippable = valid
            .into_iter()
            .filter(|path| !tainted.contains(path))
            .map(str::to_owned)
            .collect();
        Some(Reuse { skippable })
    }
}

/// The identity of the entry at `path` itself (not what a symlink points to), if it exists.
fn identity(path: &Path) -> Option<Identity> {
    let md = std::fs::symlink_metadata(path).ok()?;
    Some([
        md.dev() as i64,
        md.ino() as i64,
        md.mtime(),
        md.mtime_nsec(),
        md.ctime(),
        md.ctime_nsec(),
    ])
}

/// Whether an entry of identity `id` changed less than [`RACY`] before `started` (or after it).
fn is_racy(id: &Identity, started: SystemTime) -> bool {
    let Ok(since_epoch) = started.duration_since(UNIX_EPOCH) else {
        return true;
    };
    let limit = since_epoch.saturating_sub(RACY);
    let at = |secs: i64, nanos: i64| {
        u64::try_from(secs)
            .ok()
            .map(|s| Duration::new(s, u32::try_from(nanos).unwrap_or(0)))
    };
    let mtime = at(id[2], id[3]);
    let ctime = at(id[4], id[5]);
    [mtime, ctime].iter().any(|t| t.is_none_or(|t| t >= limit))
}

/// The walk's delegate: records each directory it enters (its identity taken before gix reads it, so a change
/// during the read shows next time), refuses to enter the directories that need no reading, and collects the
/// untracked entries as `git status` shows them.
struct Walker<'a> {
    workdir: &'a Path,
    skippable: Option<&'a HashSet<String>>,
    started: SystemTime,
    walked: BTreeMap<String, Dir>,
    /// The tops of the subtrees not entered.
    skipped: Vec<String>,
    untracked: Vec<BString>,
    /// False when a path cannot be remembered (not UTF-8): the cache is not written.
    rememberable: bool,
}

impl Walker<'_> {
    /// The untracked files, found now or under the skipped directories in `old`, what to remember, and how
    /// many directories were taken from `old` unread.
    fn finish(self, old: Option<&Cache>) -> (Vec<BString>, Remember, u64) {
        let Walker {
            mut walked,
            skipped,
            mut untracked,
            mut rememberable,
            ..
        } = self;
        for path in &untracked {
            let parent = path.rfind_byte(b'/').map_or(&path[..0], |at| &path[..at]);
            let dir = parent
                .to_str()
                .ok()
                .and_then(|parent| walked.get_mut(parent));
            match (dir, path.to_str()) {
                (Some(dir), Ok(path)) => dir.untracked.push(path.to_owned()),
                _ => rememberable = false,
            }
        }
        for dir in walked.values_mut() {
            dir.untracked.sort();
        }
        let mut dirs = walked;
        let mut kept = 0;
        for (path, dir) in old
            .into_iter()
            .flat_map(|old| skipped.iter().flat_map(|top| subtree(&old.dirs, top)))
        {
            untracked.extend(dir.untracked.iter().map(|p| BString::from(p.as_str())));
            dirs.insert(path.clone(), dir.clone());
            kept += 1;
        }
        let remember = if !rememberable {
            Remember::Nothing
        } else if old.is_some_and(|old| old.dirs == dirs) {
            Remember::Unchanged
        } else {
            Remember::Walk(dirs)
        };
        (untracked, remember, kept)
    }

    fn record(&mut self, path: &BStr) {
        let Ok(path) = path.to_str() else {
            self.rememberable = false;
            return;
        };
        let at = self.workdir.join(path);
        let Some(id) = identity(&at) else {
            self.rememberable = false;
            return;
        };
        let ignore = identity(&at.join(".gitignore"));
        let racy = is_racy(&id, self.started) || ignore.is_some_and(|i| is_racy(&i, self.started));
        let dir = Dir {
            id,
            ignore,
            racy,
            untracked: Vec::new(),
        };
        self.walked.insert(path.to_owned(), dir);
    }
}

impl Delegate for Walker<'_> {
    fn emit(&mut self, entry: EntryRef<'_>, _collapsed: Option<Status>) -> Action {
        // As gix's status: entries of a kind git cannot track (sockets, fifos) are not shown.
        if entry.status == Status::Untracked && entry.disk_kind != Some(Kind::Untrackable) {
            self.untracked.push(entry.rela_path.into_owned());
        }
        std::ops::ControlFlow::Continue(())
    }

    fn can_recurse(
        &mut self,
        entry: EntryRef<'_>,
        for_deletion: Option<ForDeletionMode>,
        worktree_root_is_repository: bool,
    ) -> bool {
        let recurse = entry.status.can_recurse(
            entry.disk_kind,
            entry.pathspec_match,
            for_deletion,
            worktree_root_is_repository,
        );
        if !recurse {
            // A nested repository is shown whole, but the walk must notice when it stops being one.
            if entry.disk_kind == Some(Kind::Repository) {
                self.record(entry.rela_path.as_ref());
            }
            return false;
        }
        let path = entry.rela_path.as_ref();
        // Only a tracked directory is skipped: gix would show an untracked one as a whole.
        if entry.status == Status::Tracked {
            if let (Some(skippable), Ok(text)) = (self.skippable, path.to_str()) {
                if skippable.contains(text) {
                    self.skipped.push(text.to_owned());
                    return false;
                }
            }
        }
        self.record(path);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> Dir {
        Dir {
            id: [0; 6],
            ignore: None,
            racy: false,
            untracked: Vec::new(),
        }
    }

    /// A skipped directory takes over its own record and those below it, never a sibling that shares its
    /// name's start (`a-b`, `a0` and `ab` sort around `a/`).
    #[test]
    fn a_subtree_is_the_directory_and_what_is_inside_it() {
        let dirs: BTreeMap<String, Dir> = ["", "a", "a-b", "a/b", "a/b/c", "a0", "ab"]
            .iter()
            .map(|p| (p.to_string(), dir()))
            .collect();
        let paths = |top: &str| -> Vec<String> {
            subtree(&dirs, top)
                .into_iter()
                .map(|(p, _)| p.clone())
                .collect()
        };
        assert_eq!(paths("a"), ["a", "a/b", "a/b/c"]);
        assert_eq!(paths("a/b"), ["a/b", "a/b/c"]);
        assert_eq!(paths("ab"), ["ab"]);
        assert_eq!(paths("").len(), dirs.len());
    }

    /// What changed within a second before the walk (or after it started) is read again next time; older is
    /// trusted.
    #[test]
    fn a_change_close_to_the_walk_is_racy() {
        let started = UNIX_EPOCH + Duration::from_secs(1_000_000);
        let at = |secs: i64, nanos: i64| [0, 0, secs, nanos, secs, nanos];
        assert!(!is_racy(&at(999_998, 999_999_999), started));
        assert!(is_racy(&at(999_999, 0), started));
        assert!(is_racy(&at(999_999, 500_000_000), started));
        assert!(is_racy(&at(1_000_001, 0), started));
        assert!(
            is_racy(&at(-5, 0), started),
            "before the epoch: not trusted"
        );
        let mut ctime_only = at(999_990, 0);
        ctime_only[4] = 999_999;
        ctime_only[5] = 900_000_000;
        assert!(is_racy(&ctime_only, started), "ctime counts as well");
    }
}
