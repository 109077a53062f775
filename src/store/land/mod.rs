//! Landing a change in the user's working tree, three-way per file: plan first, then apply.
//!
//! Not `git apply --3way` (it writes the index) nor a merge (it moves HEAD): for each path the change touches,
//! the file in the working tree is *ours*, the change's start commit is the *base*, and its end commit is
//! *theirs*. A file the user left alone simply becomes theirs; a file both changed goes through `git
//! merge-file`; what cannot be merged line by line is left as the user has it. Planning writes nothing, so a
//! caller can refuse on conflicts (`accept --no-conflicts`, `--commit`) with the working tree untouched.
//!
//! [`Plan`] is the seam for everything that brings a session's work home: `accept` lands a whole plan;
//! `review` lands a plan whose theirs holds only the hunks the reviewer took ([`Store::plan_landing_with()`]);
//! `accept --series` lands one plan per step; `fix --apply` is meant to land its branch the same way.
//!
//! What is never done (issue 17): writing through a symbolic link or into a directory that is a link, a file or
//! a repository of its own (a submodule), all read and written with [`place`]; moving a submodule (a
//! gitlink on any side keeps the user's version); landing over a type change (a file that became a link or
//! the other way, on either side, keeps the user's version); and merging into a file that still has the
//! conflict markers of an earlier landing (the markers would nest). Every write is a rename of a synced temp
//! file, and [`Store::land()`] keeps a record of what it is about to do ([`record`]) so a landing
//! killed half way can be finished or undone.

pub(crate) mod commit;
pub(crate) mod hunks;
pub(super) mod place;
pub(crate) mod record;
pub(crate) mod review;
pub mod stage;

use std::collections::HashMap;
use std::fs;
use std::path::PathBuf;

use super::repo::{Store, StoreError};
use gix::ObjectId;
use place::{Found, Mode};

/// One version of a path: in a commit, or in the working tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Side {
    /// The path does not exist there.
    Missing,
    /// A regular file.
    File { data: Vec<u8>, executable: bool },
    /// A symbolic link, with its target as bytes.
    Symlink { target: Vec<u8> },
    /// A submodule: a commit in a tree, a directory holding a repository in the working tree.
    Submodule,
    /// Something else in the working tree (a directory where the change has a file, a socket, ...).
    Other,
}

impl Side {
    /// True when both are the same content of the same kind (the executable bit is not compared: landing
    /// decides it three-way, see `mode_to_land`).
    pub fn same_content(&self, other: &Side) -> bool {
        match (self, other) {
            (Side::Missing, Side::Missing) => true,
            (Side::File { data: a, .. }, Side::File { data: b, .. }) => a == b,
            (Side::Symlink { target: a }, Side::Symlink { target: b }) => a == b,
            _ => false,
        }
    }

    /// The kind of entry, for type-change checks (`None` for a missing path: adding or deleting is not a
    /// change of type).
    fn kind(&self) -> Option<u8> {
        match self {
            Side::Missing => None,
            Side::File { .. } => Some(0),
            Side::Symlink { .. } => Some(1),
            Side::Submodule => Some(2),
            Side::Other => Some(3),
        }
    }

    /// The bytes of a text file, `None` for anything else.
    pub fn text(&self) -> Option<&[u8]> {
        match self {
            Side::File { data, .. } if !data.contains(&0) => Some(data),
            _ => None,
        }
    }
}

/// Why a path is left as the user has it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Skip {
    /// Both changed it, and one side added or deleted it.
    AddedOrDeleted,
    /// Both changed it and it is binary.
    Binary,
    /// Both changed a symbolic link.
    Symlink,
    /// A submodule (a gitlink) on some side: submodules are never moved by landing.
    Submodule,
    /// Under a submodule's path: the files there belong to the submodule's repository.
    InSubmodule,
    /// A file on one side, a link (or submodule) on another.
    TypeChange,
    /// Not a regular file in the working tree (a directory, a socket).
    NotAFile,
    /// A parent directory in the working tree is a symbolic link, a file or a repository (the reason says).
    Blocked(String),
    /// The user's file still has the conflict markers of an earlier landing.
    UnresolvedMarkers,
    /// The path breaks the tree path policy ([`crate::safety::tree_path`]): it is never written, whatever
    /// the working tree has there (issue 22, finding 1).
    Refused(crate::safety::tree_path::Refusal),
}

impl std::fmt::Display for Skip {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Skip::AddedOrDeleted => "added or deleted on one side, changed on the other",
            Skip::Binary => "binary file",
            Skip::Symlink => "a symlink changed on both sides",
            Skip::Submodule => "a submodule",
            Skip::InSubmodule => "inside a submodule",
            Skip::TypeChange => "a file on one side, a symlink or submodule on the other",
            Skip::NotAFile => "not a regular file in your working tree",
            Skip::Blocked(why) => why,
            Skip::UnresolvedMarkers => "it still has conflict markers from an earlier accept",
            Skip::Refused(refusal) => return write!(f, "refused: {}", refusal.rule.describe()),
        })
    }
}

/// What landing does to one path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// The working tree already has theirs.
    AlreadyApplied,
    /// The user had not changed it: theirs (a file or a symlink) is written.
    Write,
    /// The user had not changed it and the change deletes it.
    Delete,
    /// Both changed it, without overlap: the merge is written.
    Merged(Vec<u8>),
    /// Both changed the same lines: written with conflict markers (`<<<<<<< yours` / `>>>>>>> <label>`).
    Conflict(Vec<u8>),
    /// Left as the user has it.
    Skip(Skip),
}

/// The plan for one path: its three versions and what landing does.
#[derive(Clone, Debug)]
pub struct FilePlan {
    /// Repository-relative, as git spells it.
    pub path: String,
    pub base: Side,
    pub ours: Side,
    pub theirs: Side,
    /// The permission bits of the user's file, when ours is a file (kept when it is rewritten).
    pub ours_mode: Option<u32>,
    pub action: Action,
}

impl FilePlan {
    /// True when landing needs the user: conflict markers, or a path left as it is.
    pub fn needs_attention(&self) -> bool {
        matches!(self.action, Action::Conflict(_) | Action::Skip(_))
    }

    /// True when applying it changes the working tree.
    pub fn writes(&self) -> bool {
        !matches!(self.action, Action::AlreadyApplied | Action::Skip(_))
    }

    /// The executable bit a written file gets, three-way: theirs if the change flipped it, else the user's.
    fn executable(&self) -> bool {
        let exec = |side: &Side| {
            matches!(
                side,
                Side::File {
                    executable: true,
                    ..
                }
            )
        };
        match (&self.ours, exec(&self.theirs) != exec(&self.base)) {
            (Side::File { executable, .. }, false) => *executable,
            _ => exec(&self.theirs),
        }
    }

    /// What the path holds once this plan is applied.
    pub fn result(&self) -> Side {
        match &self.action {
            Action::AlreadyApplied | Action::Skip(_) => self.ours.clone(),
            Action::Write => self.theirs.clone(),
            Action::Delete => Side::Missing,
            Action::Merged(data) | Action::Conflict(data) => Side::File {
                data: data.clone(),
                executable: self.executable(),
            },
        }
    }

    /// The permission bits to write a file with: the user's file's, with the executable bits decided.
    pub(super) fn mode(&self) -> Mode {
        let executable = self.executable();
        match self.ours_mode {
            Some(mode) if executable => Mode::Exact(mode | ((mode & 0o444) >> 2)),
            Some(mode) => Mode::Exact(mode & !0o111),
            None => Mode::New { executable },
        }
    }
}

/// Landing the change `from..to` in the working tree at `root`.
#[derive(Clone, Debug)]
pub struct Plan {
    pub from: ObjectId,
    pub to: ObjectId,
    pub root: PathBuf,
    /// One entry per path that differs between `from` and `to`, in git's order.
    pub files: Vec<FilePlan>,
}

impl Plan {
    /// The paths that need the user (see [`FilePlan::needs_attention()`]).
    pub fn conflicts(&self) -> impl Iterator<Item = &FilePlan> {
        self.files.iter().filter(|f| f.needs_attention())
    }

    /// The paths that still have the conflict markers of an earlier landing: callers refuse to land then
    /// (issue 17, defect 11), the plan itself leaves them alone.
    pub fn unresolved(&self) -> impl Iterator<Item = &FilePlan> {
        self.files
            .iter()
            .filter(|f| f.action == Action::Skip(Skip::UnresolvedMarkers))
    }

    /// The paths applying the plan writes.
    pub fn writes(&self) -> impl Iterator<Item = &FilePlan> {
        self.files.iter().filter(|f| f.writes())
    }
}

impl Store {
    /// Plans landing the change `from..to` in the user's working tree; nothing is written. `label` names
    /// theirs in conflict markers (`agent/<id>`).
    pub fn plan_landing(
        &self,
        from: ObjectId,
        to: ObjectId,
        label: &str,
    ) -> Result<Plan, StoreError> {
        let mut files = Vec::new();
        for change in self.changes(from, to)? {
            let theirs = self.side_at(to, &change.path)?;
            files.push(self.plan_path(from, to, change.path, None, theirs, label)?);
        }
        Ok(self.plan(from, to, files))
    }

    /// Plans landing the change `from..to` on commit `on` instead of the working tree: ours is each path as
    /// `on` has it (missing everywhere for `None`, an unborn branch). `accept --commit` builds its commit
    /// from this plan's results, so the commit holds the change applied to HEAD and none of the user's
    /// uncommitted work. Nothing is read from or written to the working tree.
    pub fn plan_landing_on(
        &self,
        from: ObjectId,
        to: ObjectId,
        label: &str,
        on: Option<ObjectId>,
    ) -> Result<Plan, StoreError> {
        let mut files = Vec::new();
        for change in self.changes(from, to)? {
            let theirs = self.side_at(to, &change.path)?;
            let ours = match on {
                Some(commit) => self.side_at(commit, &change.path)?,
                None => Side::Missing,
            };
            let file = self.plan_path(from, to, change.path, Some((ours, None)), theirs, label)?;
            files.push(file);
        }
        Ok(self.plan(from, to, files))
    }

    /// Plans landing chosen versions of some paths: `theirs` gives each path's version to land (for `review`,
    /// the base with only the taken hunks applied); `from` is the base, `to` the commit they come from
    /// (submodule paths are looked up in both).
    pub fn plan_landing_with(
        &self,
        from: ObjectId,
        to: ObjectId,
        label: &str,
        theirs: Vec<(String, Side)>,
    ) -> Result<Plan, StoreError> {
        let files = theirs
            .into_iter()
            .map(|(path, side)| self.plan_path(from, to, path, None, side, label))
            .collect::<Result<_, _>>()?;
        Ok(self.plan(from, to, files))
    }

    /// Plans landing `steps` one after the other, each from its parent (`from` for the first), as if each
    /// earlier plan had been applied (for `accept --series`: a conflict in any step refuses the series
    /// before anything is written). Nothing is written.
    pub fn plan_series(
        &self,
        from: ObjectId,
        steps: &[ObjectId],
        label: &str,
    ) -> Result<Vec<Plan>, StoreError> {
        let mut landed: HashMap<String, (Side, Option<u32>)> = HashMap::new();
        let mut parent = from;
        let mut plans = Vec::new();
        for &step in steps {
            let mut files = Vec::new();
            for change in self.changes(parent, step)? {
                let theirs = self.side_at(step, &change.path)?;
                let ours = landed.get(&change.path).cloned();
                let file = self.plan_path(parent, step, change.path, ours, theirs, label)?;
                let mode = match (&file.action, file.mode()) {
                    (Action::AlreadyApplied | Action::Skip(_), _) => file.ours_mode,
                    (_, Mode::Exact(mode)) => Some(mode),
                    (_, Mode::New { .. }) => None,
                };
                landed.insert(file.path.clone(), (file.result(), mode));
                files.push(file);
            }
            plans.push(self.plan(parent, step, files));
            parent = step;
        }
        Ok(plans)
    }

    fn plan(&self, from: ObjectId, to: ObjectId, files: Vec<FilePlan>) -> Plan {
        Plan {
            from,
            to,
            root: self.workdir().to_path_buf(),
            files,
        }
    }

    /// The plan of one path; `ours` replaces what the working tree has (a series' earlier steps).
    fn plan_path(
        &self,
        from: ObjectId,
        to: ObjectId,
        path: String,
        ours: Option<(Side, Option<u32>)>,
        theirs: Side,
        label: &str,
    ) -> Result<FilePlan, StoreError> {
        let base = self.side_at(from, &path)?;
        // The policy first: a refused path is not even read from the working tree (`../x`, `.git/...`).
        if let Some(refusal) = refused(&path, [&base, &theirs]) {
            return Ok(FilePlan {
                path,
                base,
                ours: Side::Other,
                theirs,
                ours_mode: None,
                action: Action::Skip(Skip::Refused(refusal)),
            });
        }
        let found = match ours {
            Some((Side::File { data, executable }, mode)) => Found::File {
                data,
                mode: mode.unwrap_or(if executable { 0o755 } else { 0o644 }),
            },
            Some((Side::Symlink { target }, _)) => Found::Symlink { target },
            Some((Side::Missing, _)) => Found::Missing,
            Some((Side::Submodule, _)) => Found::Dir { repo: true },
            Some((Side::Other, _)) => Found::Special,
            None => place::read(self.workdir(), &path)
                .map_err(StoreError::io("read", self.workdir().join(&path)))?,
        };
        let (ours, ours_mode, blocked) = match found {
            Found::Missing => (Side::Missing, None, None),
            Found::File { data, mode } => (
                Side::File {
                    data,
                    executable: mode & 0o111 != 0,
                },
                Some(mode),
                None,
            ),
            Found::Symlink { target } => (Side::Symlink { target }, None, None),
            Found::Dir { repo: true } => (Side::Submodule, None, None),
            Found::Dir { repo: false } | Found::Special => (Side::Other, None, None),
            Found::Blocked(why) => (Side::Other, None, Some(why)),
        };
        let action = if self.under_gitlink(from, &path)? || self.under_gitlink(to, &path)? {
            Action::Skip(Skip::InSubmodule)
        } else if let Some(why) = blocked {
            Action::Skip(Skip::Blocked(why))
        } else {
            self.decide(&path, [&base, &ours, &theirs], label)?
        };
        Ok(FilePlan {
            path,
            base,
            ours,
            theirs,
            ours_mode,
            action,
        })
    }

    /// Does what `file` of `plan` says in the working tree, never following a link (see [`place`]).
    /// The one place that writes landed changes into the user's tree; [`Store::land()`] calls it with a
    /// record kept, which is what every caller should use.
    pub fn apply_file(&self, plan: &Plan, file: &FilePlan) -> Result<(), StoreError> {
        let root = &plan.root;
        let full = root.join(&file.path);
        let result = match (&file.action, &file.theirs) {
            (Action::AlreadyApplied | Action::Skip(_), _) => Ok(()),
            (Action::Write, Side::File { data, .. }) => {
                place::write_file(root, &file.path, data, file.mode())
            }
            (Action::Write, Side::Symlink { target }) => {
                place::write_link(root, &file.path, target)
            }
            // The planner writes files and links only; anything else would be a planner bug, refused.
            (Action::Write, _) => {
                return Err(StoreError::NotFileOrLink {
                    path: file.path.clone(),
                    verb: "written",
                })
            }
            (Action::Delete, _) => place::remove(root, &file.path),
            (Action::Merged(data) | Action::Conflict(data), _) => {
                place::write_file(root, &file.path, data, file.mode())
            }
        };
        result.map_err(StoreError::io("write", full))
    }

    /// The action for `path` from its three versions.
    fn decide(
        &self,
        path: &str,
        [base, ours, theirs]: [&Side; 3],
        label: &str,
    ) -> Result<Action, StoreError> {
        if ours.same_content(theirs) {
            // Same bytes, but the change may have flipped the executable bit the user left alone.
            return Ok(if mode_to_land([base, ours, theirs]) {
                Action::Write
            } else {
                Action::AlreadyApplied
            });
        }
        if let Side::File { data, .. } = ours {
            if has_markers(data) && !base.same_content(ours) {
                return Ok(Action::Skip(Skip::UnresolvedMarkers));
            }
        }
        if [base, ours, theirs].contains(&&Side::Submodule) {
            return Ok(Action::Skip(Skip::Submodule));
        }
        if *ours == Side::Other {
            return Ok(Action::Skip(Skip::NotAFile));
        }
        // A type change on either side keeps the user's version: a link the agent turned into a file must
        // not replace (or be written through) the user's link, nor a link of the agent the user's file.
        let changed_type =
            |side: &Side| matches!((base.kind(), side.kind()), (Some(a), Some(b)) if a != b);
        if changed_type(ours) || changed_type(theirs) {
            return Ok(Action::Skip(Skip::TypeChange));
        }
        if ours.same_content(base) {
            return Ok(match theirs {
                Side::Missing => Action::Delete,
                _ => Action::Write,
            });
        }
        if [base, ours, theirs]
            .iter()
            .any(|s| matches!(s, Side::Symlink { .. }))
        {
            return Ok(Action::Skip(Skip::Symlink));
        }
        let (base_side, ours_side, theirs_side) = (base, ours, theirs);
        let (
            Side::File { data: ours, .. },
            Side::File { data: base, .. },
            Side::File { data: theirs, .. },
        ) = (ours, base, theirs)
        else {
            return Ok(Action::Skip(Skip::AddedOrDeleted));
        };
        if [ours, base, theirs].iter().any(|d| d.contains(&0)) {
            return Ok(Action::Skip(Skip::Binary));
        }
        let (merged, conflicts) = self.merge_file(path, [ours, base, theirs], label)?;
        Ok(if conflicts {
            Action::Conflict(merged)
        } else if merged == *ours && !mode_to_land([base_side, ours_side, theirs_side]) {
            // The user's file already holds the change (an earlier accept merged it): nothing to write.
            Action::AlreadyApplied
        } else {
            Action::Merged(merged)
        })
    }

    /// True when a proper prefix of `path` is a gitlink in `commit`: the path belongs to a submodule.
    fn under_gitlink(&self, commit: ObjectId, path: &str) -> Result<bool, StoreError> {
        Ok(self.walk_tree(commit, path)?.1)
    }

    /// The mode and object of `path` in `commit`, if it is there.
    fn entry_at(
        &self,
        commit: ObjectId,
        path: &str,
    ) -> Result<Option<(gix::object::tree::EntryMode, ObjectId)>, StoreError> {
        Ok(self.walk_tree(commit, path)?.0)
    }

    /// Looks `path` up in `commit`'s tree one component at a time, stopping at a gitlink (its commit is in
    /// another repository: gix's own lookup would try to read it as a tree and fail). Returns the entry, and
    /// whether a proper prefix is a gitlink.
    #[allow(clippy::type_complexity)]
    fn walk_tree(
        &self,
        commit: ObjectId,
        path: &str,
    ) -> Result<(Option<(gix::object::tree::EntryMode, ObjectId)>, bool), StoreError> {
        let mut tree = self.repo.find_commit(commit)?.tree()?;
        let parts: Vec<&str> = path.split('/').collect();
        for (n, part) in parts.iter().enumerate() {
            let Some(entry) = tree.find_entry(*part) else {
                return Ok((None, false));
            };
            let (mode, id) = (entry.mode(), entry.object_id());
            if n + 1 == parts.len() {
                return Ok((Some((mode, id)), false));
            }
            if mode.is_commit() {
                return Ok((None, true));
            }
            if !mode.is_tree() {
                return Ok((None, false));
            }
            tree = self.repo.find_tree(id)?;
        }
        Ok((None, false))
    }

    /// The version of `path` in `commit` (missing when a submodule holds it).
    pub fn side_at(&self, commit: ObjectId, path: &str) -> Result<Side, StoreError> {
        let Some((mode, id)) = self.entry_at(commit, path)? else {
            return Ok(Side::Missing);
        };
        if mode.is_commit() {
            return Ok(Side::Submodule);
        }
        if !mode.is_blob_or_symlink() {
            return Ok(Side::Other);
        }
        let data = self.repo.find_object(id)?.data.clone();
        Ok(if mode.is_link() {
            Side::Symlink { target: data }
        } else {
            Side::File {
                data,
                executable: mode.is_executable(),
            }
        })
    }

    /// `git merge-file` on the three versions (ours, base, theirs) of `path`; returns the result and whether
    /// it has conflict markers.
    pub(super) fn merge_file(
        &self,
        path: &str,
        versions: [&[u8]; 3],
        label: &str,
    ) -> Result<(Vec<u8>, bool), StoreError> {
        let dir = self.common_dir().join("agent").join("tmp");
        fs::create_dir_all(&dir).map_err(StoreError::io("create", &dir))?;
        // A folder of its own (random name, removed when dropped): merges of two threads never share files.
        let scratch = tempfile::Builder::new()
            .prefix("merge-")
            .tempdir_in(&dir)
            .map_err(StoreError::io("create a folder in", &dir))?;
        let files: Vec<PathBuf> = ["ours", "base", "theirs"]
            .iter()
            .map(|n| scratch.path().join(n))
            .collect();
        for (file, data) in files.iter().zip(versions) {
            fs::write(file, data).map_err(StoreError::io("write", file))?;
        }
        let args = ["merge-file", "-p", "-L", "yours", "-L", "base", "-L", label];
        let out = self
            .git_command()?
            .args(args)
            .args(&files)
            .stdin(std::process::Stdio::null())
            .output();
        drop(scratch);
        let out = out.map_err(StoreError::GitMissing)?;
        // merge-file exits with the number of conflicts (capped at 127), negative or above on failure.
        match out.status.code() {
            Some(n) if (0..=127).contains(&n) => Ok((out.stdout, n > 0)),
            _ => Err(StoreError::GitCommand {
                args: format!("{} (of {path})", args.join(" ")),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            }),
        }
    }
}

/// True when the change flipped the executable bit of a file (base and theirs differ) and the user's file
/// still has the base's: landing must write the mode even where the bytes are already theirs. A mode
/// change alone used to be reported as "unchanged" and dropped (issue 22, reliability defects).
fn mode_to_land([base, ours, theirs]: [&Side; 3]) -> bool {
    let exec = |side: &Side| match side {
        Side::File { executable, .. } => Some(*executable),
        _ => None,
    };
    match (exec(base), exec(ours), exec(theirs)) {
        (Some(b), Some(o), Some(t)) => t != b && o == b,
        _ => false,
    }
}

/// The tree path policy's refusal of `path`, as a link when any side has a link there.
fn refused(path: &str, sides: [&Side; 2]) -> Option<crate::safety::tree_path::Refusal> {
    use crate::safety::tree_path::{check_str, EntryKind};
    let kind = if sides.iter().any(|s| matches!(s, Side::Symlink { .. })) {
        EntryKind::Symlink
    } else {
        EntryKind::File
    };
    check_str(path, kind).err()
}

/// True when `data` has the markers landing writes for a session (`<<<<<<< yours` ... `>>>>>>> agent/<id>`),
/// each at the start of a line.
fn has_markers(data: &[u8]) -> bool {
    let mut open = false;
    for line in data.split(|b| *b == b'\n') {
        if line.starts_with(b"<<<<<<< yours") {
            open = true;
        } else if open && line.starts_with(b">>>>>>> agent/") {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::test_repo::TestRepo;

    /// `main` with `a.txt`, `dir/b.txt`, `run.sh`; a branch `change` that edits, adds and deletes files; the
    /// working tree back on `main`, where the user then edits. Returns (from, to).
    fn change(repo: &TestRepo) -> (ObjectId, ObjectId) {
        repo.write("lines.txt", "1\n2\n3\n4\n5\n6\n7\n8\n9\n");
        repo.write("bin.dat", "a\0b");
        std::os::unix::fs::symlink("a.txt", repo.path("link")).unwrap();
        repo.git(&["add", "-A"]);
        repo.git(&["commit", "-q", "-m", "more"]);
        let from = repo.git(&["rev-parse", "HEAD"]);
        repo.git(&["checkout", "-q", "-b", "change"]);
        repo.write("a.txt", "ALPHA\n");
        repo.write("new.txt", "new\n");
        repo.write("lines.txt", "1\ntwo\n3\n4\n5\n6\n7\n8\n9\n");
        repo.write("bin.dat", "a\0B");
        repo.write("dir/b.txt", "beta, theirs\n");
        repo.git(&["rm", "-q", "run.sh", "link"]);
        std::os::unix::fs::symlink("new.txt", repo.path("link")).unwrap();
        repo.git(&["add", "-A"]);
        repo.git(&["commit", "-q", "-m", "change"]);
        let to = repo.git(&["rev-parse", "HEAD"]);
        repo.git(&["checkout", "-q", "main"]);
        let id = |hex: String| ObjectId::from_hex(hex.trim().as_bytes()).unwrap();
        (id(from), id(to))
    }

    #[test]
    fn each_path_gets_its_action_and_planning_writes_nothing() {
        let repo = TestRepo::with_commit("land-plan");
        let (from, to) = change(&repo);
        // The user: already has theirs in dir/b.txt, edits another line of lines.txt, both edit bin.dat.
        repo.write("dir/b.txt", "beta, theirs\n");
        repo.write("lines.txt", "1\n2\n3\n4\n5\n6\n7\n8\nnine\n");
        repo.write("bin.dat", "a\0c");
        let before = repo.user_state();
        let store = repo.store();
        let plan = store.plan_landing(from, to, "agent/x").unwrap();
        assert_eq!(repo.user_state(), before, "planning wrote something");
        let actions: Vec<(&str, &Action)> = plan
            .files
            .iter()
            .map(|f| (f.path.as_str(), &f.action))
            .collect();
        let merged = b"1\ntwo\n3\n4\n5\n6\n7\n8\nnine\n".to_vec();
        assert_eq!(
            actions,
            [
                ("a.txt", &Action::Write),
                ("bin.dat", &Action::Skip(Skip::Binary)),
                ("dir/b.txt", &Action::AlreadyApplied),
                ("lines.txt", &Action::Merged(merged.clone())),
                ("link", &Action::Write),
                ("new.txt", &Action::Write),
                ("run.sh", &Action::Delete),
            ]
        );
        assert_eq!(
            plan.conflicts()
                .map(|f| f.path.as_str())
                .collect::<Vec<_>>(),
            ["bin.dat"]
        );

        for file in &plan.files {
            store.apply_file(&plan, file).unwrap();
        }
        assert_eq!(std::fs::read(repo.path("a.txt")).unwrap(), b"ALPHA\n");
        assert_eq!(std::fs::read(repo.path("lines.txt")).unwrap(), merged);
        assert_eq!(std::fs::read(repo.path("bin.dat")).unwrap(), b"a\0c");
        assert_eq!(std::fs::read(repo.path("new.txt")).unwrap(), b"new\n");
        assert!(!repo.path("run.sh").exists());
        // The link the user left alone is retargeted as a link: a.txt (its old target) is untouched.
        assert_eq!(
            std::fs::read_link(repo.path("link")).unwrap(),
            std::path::Path::new("new.txt")
        );
    }

    #[test]
    fn links_and_type_changes_keep_the_users_version() {
        let repo = TestRepo::with_commit("land-links");
        let (from, to) = change(&repo);
        // The user turned the link into a file, and dir/ into a link to a directory outside.
        std::fs::remove_file(repo.path("link")).unwrap();
        repo.write("link", "a file now\n");
        let outside = repo.path("../land-links-outside");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("b.txt"), "beta\n").unwrap();
        std::fs::remove_dir_all(repo.path("dir")).unwrap();
        std::os::unix::fs::symlink(&outside, repo.path("dir")).unwrap();
        let store = repo.store();
        let plan = store.plan_landing(from, to, "agent/x").unwrap();
        let action = |p: &str| &plan.files.iter().find(|f| f.path == p).unwrap().action;
        assert_eq!(action("link"), &Action::Skip(Skip::TypeChange));
        assert_eq!(
            action("dir/b.txt"),
            &Action::Skip(Skip::Blocked("dir is a symbolic link".into()))
        );
        for file in &plan.files {
            store.apply_file(&plan, file).unwrap();
        }
        assert_eq!(std::fs::read(outside.join("b.txt")).unwrap(), b"beta\n");
        assert_eq!(std::fs::read(repo.path("link")).unwrap(), b"a file now\n");
        let _ = std::fs::remove_dir_all(outside);
    }

    #[test]
    fn a_second_landing_finds_the_merge_or_refuses_over_markers() {
        let repo = TestRepo::with_commit("land-twice");
        let (from, to) = change(&repo);
        repo.write("lines.txt", "1\n2\n3\n4\n5\n6\n7\n8\nnine\n");
        let store = repo.store();
        let plan = store.plan_landing(from, to, "agent/x").unwrap();
        store.land(&plan, "test", |_| {}).unwrap();
        let again = store.plan_landing(from, to, "agent/x").unwrap();
        assert!(again.writes().next().is_none(), "{:?}", again.files);
        // Conflict markers from a landing: the next one leaves the file alone and says why.
        repo.write("lines.txt", "1\nTWO\n3\n4\n5\n6\n7\n8\n9\n");
        let plan = store.plan_landing(from, to, "agent/x").unwrap();
        store.land(&plan, "test", |_| {}).unwrap();
        let marked = std::fs::read(repo.path("lines.txt")).unwrap();
        let again = store.plan_landing(from, to, "agent/x").unwrap();
        let file = again.files.iter().find(|f| f.path == "lines.txt").unwrap();
        assert_eq!(file.action, Action::Skip(Skip::UnresolvedMarkers));
        assert_eq!(again.unresolved().count(), 1);
        store.land(&again, "test", |_| {}).unwrap();
        assert_eq!(std::fs::read(repo.path("lines.txt")).unwrap(), marked);
    }

    #[test]
    fn overlapping_edits_conflict_with_markers_naming_both_sides() {
        let repo = TestRepo::with_commit("land-conflict");
        let (from, to) = change(&repo);
        repo.write("lines.txt", "1\nTWO\n3\n4\n5\n6\n7\n8\n9\n");
        let store = repo.store();
        let plan = store.plan_landing(from, to, "agent/x").unwrap();
        let file = plan.files.iter().find(|f| f.path == "lines.txt").unwrap();
        let Action::Conflict(marked) = &file.action else {
            panic!("{:?}", file.action);
        };
        let marked = String::from_utf8_lossy(marked);
        assert!(
            marked.contains("<<<<<<< yours\nTWO\n=======\ntwo\n>>>>>>> agent/x\n"),
            "{marked}"
        );
        assert!(file.needs_attention() && file.writes());
        assert_eq!(
            file.ours,
            Side::File {
                data: b"1\nTWO\n3\n4\n5\n6\n7\n8\n9\n".to_vec(),
                executable: false
            }
        );
    }
}
