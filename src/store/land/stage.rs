//! `--index`: a landed change into the user's index without their unstaged edits.
//!
//! `git add` of a landed file would stage all of it: the change, and the user's own hunks they had not
//! staged (issue 12: the pre-commit hook's `accept <id> --index` then committed them). So the index entry is
//! merged by itself instead, three-way: the user's staged version, the change's base and its tip (blob
//! objects only, never the working tree), and written with `git update-index --index-info`. The working
//! tree keeps its unstaged edits, and `git diff` still shows them.

use std::collections::HashMap;
use std::io::Write;
use std::process::Stdio;

use super::{Plan, Side};
use crate::store::repo::{Store, StoreError};
use gix::ObjectId;

/// A path whose change could not be staged, and why; the working tree has it, the index is as it was.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unstaged {
    pub path: String,
    pub why: &'static str,
}

/// One entry of a tree or of the index: its mode and object, as git prints them.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Entry {
    mode: String,
    oid: String,
}

impl Entry {
    /// A regular file (not a link or a submodule).
    fn is_file(&self) -> bool {
        self.mode == "100644" || self.mode == "100755"
    }
}

/// What the index entry of a path becomes.
enum IndexUpdate {
    Keep,
    Set(Entry),
    Remove,
    Leave(&'static str),
}

impl Store {
    /// Stages `plan`'s change (its base and theirs: with `review`, only the hunks taken) of each of
    /// `paths` in the user's index, merged with what they staged; returns the paths it could not (nothing of
    /// those is written).
    pub fn stage_change(&self, plan: &Plan, paths: &[&str]) -> Result<Vec<Unstaged>, StoreError> {
        if paths.is_empty() {
            return Ok(Vec::new());
        }
        let (index, conflicted) = self.index_entries(paths)?;
        let mut lines = Vec::new();
        let mut left = Vec::new();
        for file in plan
            .files
            .iter()
            .filter(|f| paths.contains(&f.path.as_str()))
        {
            let path = file.path.as_str();
            let outcome = match (self.entry_of(&file.base)?, self.entry_of(&file.theirs)?) {
                _ if conflicted.contains(path) => {
                    IndexUpdate::Leave("it has unmerged entries in your index")
                }
                (Some(base), Some(theirs)) => {
                    self.staged_outcome(path, [index.get(path), base.as_ref(), theirs.as_ref()])?
                }
                _ => IndexUpdate::Leave("a submodule or not a file in the change"),
            };
            let line = match outcome {
                IndexUpdate::Keep => continue,
                IndexUpdate::Set(entry) => format!("{} {}\t{path}\0", entry.mode, entry.oid),
                // Mode 0 removes the path from the index (git-update-index(1), --index-info).
                IndexUpdate::Remove => {
                    format!("0 {}\t{path}\0", ObjectId::null(self.repo.object_hash()))
                }
                IndexUpdate::Leave(why) => {
                    left.push(Unstaged {
                        path: path.to_owned(),
                        why,
                    });
                    continue;
                }
            };
            lines.push(line);
        }
        if !lines.is_empty() {
            self.update_index(lines.concat().as_bytes())?;
        }
        Ok(left)
    }

    /// The index entry a version of the change would have (its blob written, as `git add` would):
    /// `Some(None)` for a missing path, `None` for what an index entry cannot be here (a submodule).
    #[allow(clippy::option_option)]
    fn entry_of(&self, side: &Side) -> Result<Option<Option<Entry>>, StoreError> {
        let (mode, data) = match side {
            Side::Missing => return Ok(Some(None)),
            Side::File { data, executable } => {
                (if *executable { "100755" } else { "100644" }, data)
            }
            Side::Symlink { target } => ("120000", target),
            Side::Submodule | Side::Other => return Ok(None),
        };
        let oid = self.repo.write_blob(data)?.detach().to_string();
        Ok(Some(Some(entry(mode, &oid))))
    }

    /// The index entry a path gets: theirs where the user staged nothing of their own, a merge of both where
    /// they did.
    fn staged_outcome(
        &self,
        path: &str,
        [index, base, theirs]: [Option<&Entry>; 3],
    ) -> Result<IndexUpdate, StoreError> {
        if index == theirs {
            return Ok(IndexUpdate::Keep);
        }
        if index == base {
            return Ok(theirs.map_or(IndexUpdate::Remove, |t| IndexUpdate::Set(t.clone())));
        }
        let (Some(index), Some(base), Some(theirs)) = (index, base, theirs) else {
            return Ok(IndexUpdate::Leave(
                "you staged its addition or deletion, the change edits it",
            ));
        };
        if ![index, base, theirs].iter().all(|e| e.is_file()) {
            return Ok(IndexUpdate::Leave(
                "not a regular file on every side (a link or submodule)",
            ));
        }
        // The executable bit three-way as landing does it: theirs if the change flipped it, else the user's.
        let mode = if theirs.mode != base.mode {
            &theirs.mode
        } else {
            &index.mode
        };
        let oid = if index.oid == base.oid {
            theirs.oid.clone()
        } else if theirs.oid == base.oid || index.oid == theirs.oid {
            index.oid.clone()
        } else {
            let (ours, old, new) = (
                self.blob(&index.oid)?,
                self.blob(&base.oid)?,
                self.blob(&theirs.oid)?,
            );
            if [&ours, &old, &new].iter().any(|d| d.contains(&0)) {
                return Ok(IndexUpdate::Leave(
                    "binary, and you staged changes of your own",
                ));
            }
            let (merged, conflicts) = self.merge_file(path, [&ours, &old, &new], "change")?;
            if conflicts {
                return Ok(IndexUpdate::Leave(
                    "what you staged conflicts with the change",
                ));
            }
            self.repo.write_blob(&merged)?.detach().to_string()
        };
        Ok(IndexUpdate::Set(Entry {
            mode: mode.clone(),
            oid,
        }))
    }

    /// The bytes of the blob `oid` (hex).
    fn blob(&self, oid: &str) -> Result<Vec<u8>, StoreError> {
        let id = ObjectId::from_hex(oid.as_bytes()).map_err(|e| StoreError::GitCommand {
            args: "ls-files -s".into(),
            stderr: format!("bad object id {oid}: {e}"),
        })?;
        Ok(self.repo.find_object(id)?.data.clone())
    }

    /// `paths` in the user's index (`git ls-files -s`: mode, object, stage, path), and those with unmerged
    /// entries (stages 1 to 3).
    #[allow(clippy::type_complexity)]
    fn index_entries(
        &self,
        paths: &[&str],
    ) -> Result<(HashMap<String, Entry>, std::collections::HashSet<String>), StoreError> {
        let mut args = vec!["--literal-pathspecs", "ls-files", "-s", "-z", "--"];
        args.extend_from_slice(paths);
        let out = self.git_output(&args)?;
        let mut entries = HashMap::new();
        let mut conflicted = std::collections::HashSet::new();
        for record in records(&out) {
            if let Some((meta, path)) = record.split_once('\t') {
                if let [mode, oid, stage] = meta.split(' ').collect::<Vec<_>>()[..] {
                    if stage == "0" {
                        entries.insert(path.to_owned(), entry(mode, oid));
                    } else {
                        conflicted.insert(path.to_owned());
                    }
                }
            }
        }
        Ok((entries, conflicted))
    }

    /// `git update-index -z --index-info` with `input` (entries only: the working tree is not read).
    fn update_index(&self, input: &[u8]) -> Result<(), StoreError> {
        let args = ["update-index", "-z", "--index-info"];
        let mut cmd = crate::store::objects::git::command(self.workdir());
        cmd.args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if let Some(git_dir) = &self.detached_git_dir {
            cmd.env("GIT_DIR", git_dir)
                .env("GIT_WORK_TREE", self.workdir());
        }
        let mut child = cmd.spawn().map_err(StoreError::GitMissing)?;
        if let Some(mut stdin) = child.stdin.take() {
            // A write error shows as git's failure below (it read less than it was given).
            let _ = stdin.write_all(input);
        }
        let out = child.wait_with_output().map_err(StoreError::GitMissing)?;
        if out.status.success() {
            return Ok(());
        }
        Err(StoreError::GitCommand {
            args: args.join(" "),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        })
    }
}

fn entry(mode: &str, oid: &str) -> Entry {
    Entry {
        mode: mode.to_owned(),
        oid: oid.to_owned(),
    }
}

/// The NUL-terminated records of a `-z` listing (paths are UTF-8 here: the plan's paths are strings).
fn records(out: &[u8]) -> impl Iterator<Item = std::borrow::Cow<'_, str>> {
    out.split(|b| *b == 0)
        .filter(|r| !r.is_empty())
        .map(String::from_utf8_lossy)
}
