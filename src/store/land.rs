//! Landing a change in the user's working tree, three-way per file: plan first, then apply.
//!
//! Not `git apply --3way` (it writes the index) nor a merge (it moves HEAD): for each path the change touches,
//! the file in the working tree is *ours*, the change's start commit is the *base*, and its end commit is
//! *theirs*. A file the user left alone simply becomes theirs; a file both changed goes through `git
//! merge-file`; what cannot be merged line by line is left as the user has it. Planning writes nothing, so a
//! caller can refuse on conflicts (`accept --no-conflicts`, `--commit`) with the working tree untouched.
//!
//! [`Plan`] is the seam for everything that brings a session's work home: `accept` applies a whole plan;
//! `review` (taking hunks) and `fix --apply` are meant to build theirs from the same [`Side`]s, and
//! `accept --series` one plan per step. Symlinks and submodules are planned as [`Skip`]s for now, never written
//! (a write would follow a symlink out of the repository); writing them, and atomic writes, belong to the
//! hardening of issue 17, which fills in [`Store::apply_file()`] without changing these types.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::{ObjectId, Store, StoreError};

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
    /// True when both are the same content of the same kind (the executable bit is not compared: a change of
    /// mode alone is not applied, as before this module existed).
    fn same_content(&self, other: &Side) -> bool {
        match (self, other) {
            (Side::Missing, Side::Missing) => true,
            (Side::File { data: a, .. }, Side::File { data: b, .. }) => a == b,
            (Side::Symlink { target: a }, Side::Symlink { target: b }) => a == b,
            _ => false,
        }
    }
}

/// Why a path is left as the user has it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Skip {
    /// Both changed it, and one side added or deleted it.
    AddedOrDeleted,
    /// Both changed it and it is binary.
    Binary,
    /// A symlink on some side (not written until issue 17 makes that safe).
    Symlink,
    /// A submodule on some side.
    Submodule,
    /// Not a regular file in the working tree.
    NotAFile,
}

impl std::fmt::Display for Skip {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Skip::AddedOrDeleted => "added or deleted on one side, changed on the other",
            Skip::Binary => "binary file",
            Skip::Symlink => "a symlink",
            Skip::Submodule => "a submodule",
            Skip::NotAFile => "not a regular file in your working tree",
        })
    }
}

/// What landing does to one path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// The working tree already has theirs.
    AlreadyApplied,
    /// The user had not changed it: theirs (a file) is written.
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

    /// The executable bit a written file gets: theirs.
    fn executable(&self) -> bool {
        matches!(
            self.theirs,
            Side::File {
                executable: true,
                ..
            }
        )
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
        let root = self.workdir().to_path_buf();
        let mut files = Vec::new();
        for change in self.changes(from, to)? {
            let base = self.side_at(from, &change.path)?;
            let theirs = self.side_at(to, &change.path)?;
            let ours = side_in_worktree(&root.join(&change.path))?;
            let action = self.decide(&change.path, [&base, &ours, &theirs], label)?;
            files.push(FilePlan {
                path: change.path,
                base,
                ours,
                theirs,
                action,
            });
        }
        Ok(Plan {
            from,
            to,
            root,
            files,
        })
    }

    /// Does what `file` of `plan` says in the working tree.
    pub fn apply_file(&self, plan: &Plan, file: &FilePlan) -> Result<(), StoreError> {
        let full = plan.root.join(&file.path);
        match (&file.action, &file.theirs) {
            (Action::AlreadyApplied | Action::Skip(_), _) => Ok(()),
            (Action::Write, Side::File { data, executable }) => {
                write_file(&full, data, *executable)
            }
            // The planner only writes regular files; anything else would be a planner bug, refused.
            (Action::Write, _) => Err(StoreError::Refused(format!(
                "{}: only regular files are written",
                file.path
            ))),
            (Action::Delete, _) => match fs::remove_file(&full) {
                Err(err) if err.kind() != std::io::ErrorKind::NotFound => {
                    Err(StoreError::io("remove", &full)(err))
                }
                _ => Ok(()),
            },
            (Action::Merged(data) | Action::Conflict(data), _) => {
                write_file(&full, data, file.executable())
            }
        }
    }

    /// The action for `path` from its three versions.
    fn decide(
        &self,
        path: &str,
        [base, ours, theirs]: [&Side; 3],
        label: &str,
    ) -> Result<Action, StoreError> {
        if ours.same_content(theirs) {
            return Ok(Action::AlreadyApplied);
        }
        for side in [base, ours, theirs] {
            match side {
                Side::Symlink { .. } => return Ok(Action::Skip(Skip::Symlink)),
                Side::Submodule => return Ok(Action::Skip(Skip::Submodule)),
                Side::Other => return Ok(Action::Skip(Skip::NotAFile)),
                Side::File { .. } | Side::Missing => {}
            }
        }
        if ours.same_content(base) {
            return Ok(match theirs {
                Side::Missing => Action::Delete,
                _ => Action::Write,
            });
        }
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
        } else {
            Action::Merged(merged)
        })
    }

    /// The version of `path` in `commit`.
    fn side_at(&self, commit: ObjectId, path: &str) -> Result<Side, StoreError> {
        let tree = self.repo.find_commit(commit)?.tree()?;
        let Some(entry) = tree.lookup_entry_by_path(path)? else {
            return Ok(Side::Missing);
        };
        let mode = entry.mode();
        if mode.is_commit() {
            return Ok(Side::Submodule);
        }
        if !mode.is_blob_or_symlink() {
            return Ok(Side::Other);
        }
        let data = self.repo.find_object(entry.object_id())?.data.clone();
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
    fn merge_file(
        &self,
        path: &str,
        versions: [&[u8]; 3],
        label: &str,
    ) -> Result<(Vec<u8>, bool), StoreError> {
        let dir = self.common_dir().join("agent").join("tmp");
        fs::create_dir_all(&dir).map_err(StoreError::io("create", &dir))?;
        let stem = format!("merge-{}", std::process::id());
        let files: Vec<PathBuf> = ["ours", "base", "theirs"]
            .iter()
            .map(|n| dir.join(format!("{stem}.{n}")))
            .collect();
        for (file, data) in files.iter().zip(versions) {
            fs::write(file, data).map_err(StoreError::io("write", file))?;
        }
        let args = ["merge-file", "-p", "-L", "yours", "-L", "base", "-L", label];
        let out = super::git::command(self.workdir())
            .args(args)
            .args(&files)
            .stdin(std::process::Stdio::null())
            .output();
        for file in &files {
            // Best effort: scratch files under .git/agent/tmp, named by our pid.
            let _ = fs::remove_file(file);
        }
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

/// The user's version of a path.
fn side_in_worktree(path: &Path) -> Result<Side, StoreError> {
    let md = match fs::symlink_metadata(path) {
        Ok(md) => md,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Side::Missing),
        Err(err) => return Err(StoreError::io("read", path)(err)),
    };
    if md.is_symlink() {
        let target = fs::read_link(path).map_err(StoreError::io("read", path))?;
        return Ok(Side::Symlink {
            target: target.into_os_string().into_encoded_bytes(),
        });
    }
    if md.is_file() {
        let data = fs::read(path).map_err(StoreError::io("read", path))?;
        return Ok(Side::File {
            data,
            executable: md.permissions().mode() & 0o111 != 0,
        });
    }
    if md.is_dir() && path.join(".git").exists() {
        return Ok(Side::Submodule);
    }
    Ok(Side::Other)
}

/// Writes `bytes` to `path` (creating its directories) with the executable bit as asked, keeping the other
/// permission bits the file has.
fn write_file(path: &Path, bytes: &[u8], executable: bool) -> Result<(), StoreError> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).map_err(StoreError::io("create", dir))?;
    }
    fs::write(path, bytes).map_err(StoreError::io("write", path))?;
    let md = fs::metadata(path).map_err(StoreError::io("stat", path))?;
    let mode = md.permissions().mode();
    let wanted = if executable {
        mode | ((mode & 0o444) >> 2)
    } else {
        mode & !0o111
    };
    if wanted != mode {
        fs::set_permissions(path, fs::Permissions::from_mode(wanted))
            .map_err(StoreError::io("chmod", path))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::tests::TestRepo;

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
                ("link", &Action::Skip(Skip::Symlink)),
                ("new.txt", &Action::Write),
                ("run.sh", &Action::Delete),
            ]
        );
        assert_eq!(
            plan.conflicts()
                .map(|f| f.path.as_str())
                .collect::<Vec<_>>(),
            ["bin.dat", "link"]
        );

        for file in &plan.files {
            store.apply_file(&plan, file).unwrap();
        }
        assert_eq!(std::fs::read(repo.path("a.txt")).unwrap(), b"ALPHA\n");
        assert_eq!(std::fs::read(repo.path("lines.txt")).unwrap(), merged);
        assert_eq!(std::fs::read(repo.path("bin.dat")).unwrap(), b"a\0c");
        assert_eq!(std::fs::read(repo.path("new.txt")).unwrap(), b"new\n");
        assert!(!repo.path("run.sh").exists());
        // The symlink stays the user's, and nothing was written through it.
        assert_eq!(
            std::fs::read_link(repo.path("link")).unwrap(),
            Path::new("a.txt")
        );
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
