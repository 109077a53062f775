//! What a landing is about to do, kept on disk until it is done, so one that was killed half way can be
//! finished or undone (issue 17, defect 2).
//!
//! Before the first file of a plan is written, every path's version before and after is saved in
//! `<git dir>/agent/landing/` (`<n>.before`, `<n>.after`: bytes of a file or a link's target) and then
//! `record.json` lists them; writing `record.json` (temp file, sync, rename) is the moment the landing
//! begins. The files are then written one by one (each a rename of a synced temp file, see
//! [`super::place`]), and the folder is removed when all are. Nothing needs to be rewritten between files:
//! whether a path was done is read from the path itself (it holds the after bytes, the before bytes, or
//! something else: the user has changed it since, and it is left alone either way).
//!
//! The folder is per working tree (the git dir of a linked worktree is its own), so landings in two worktrees
//! of one repository never see each other's record.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::place::{self, Found, Mode};
use super::{FilePlan, Plan, Side};
use crate::store::repo::{crash_point, Store, StoreError};

/// A landing that was interrupted: what it was, and what it was doing to which paths.
#[derive(Debug)]
pub struct Interrupted {
    /// What the landing was, in words (`accept of session 3f9c1a`).
    pub what: String,
    /// Unix seconds.
    pub started: i64,
    entries: Vec<Entry>,
    dir: PathBuf,
}

impl Interrupted {
    /// The paths the landing was writing.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|e| e.path.as_str())
    }
}

/// What finishing or undoing an interrupted landing did to one path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PathRecovery {
    /// Written now.
    Written,
    /// It already was as asked.
    AsIs,
    /// It has been changed since the landing stopped: left alone.
    ChangedSince,
}

#[derive(Debug, Serialize, Deserialize)]
struct Record {
    what: String,
    started: i64,
    entries: Vec<Entry>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct Entry {
    path: String,
    before: Version,
    after: Version,
}

/// A version of a path; the bytes are in `<n>.before` / `<n>.after`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Version {
    Missing,
    File {
        /// Permission bits to restore; `None` for a new file (created as git would).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mode: Option<u32>,
        executable: bool,
    },
    Symlink,
}

const RECORD: &str = "record.json";

impl Store {
    /// The folder of this working tree's landing record.
    fn landing_dir(&self) -> PathBuf {
        self.repo.git_dir().join("agent").join("landing")
    }

    /// The landing that was interrupted in this working tree, if any. A folder without its record is a
    /// landing killed before it began (nothing was written): it is removed.
    pub fn interrupted_landing(&self) -> Result<Option<Interrupted>, StoreError> {
        let dir = self.landing_dir();
        let path = dir.join(RECORD);
        let text = match fs::read(&path) {
            Ok(text) => text,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                if dir.exists() {
                    fs::remove_dir_all(&dir).map_err(StoreError::io("remove", &dir))?;
                }
                return Ok(None);
            }
            Err(err) => return Err(StoreError::io("read", &path)(err)),
        };
        let record: Record =
            serde_json::from_slice(&text).map_err(|source| StoreError::DamagedLandingRecord {
                path: path.clone(),
                source,
            })?;
        Ok(Some(Interrupted {
            what: record.what,
            started: record.started,
            entries: record.entries,
            dir,
        }))
    }

    /// Applies every path of `plan` that writes, with a record kept until all are written (see the module
    /// docs); `each` hears every path of the plan as it is done. Refuses when an earlier landing in this
    /// working tree was interrupted: it must be finished or undone first, or its record would be lost.
    pub fn land(
        &self,
        plan: &Plan,
        what: &str,
        mut each: impl FnMut(&FilePlan),
    ) -> Result<(), StoreError> {
        if let Some(old) = self.interrupted_landing()? {
            return Err(StoreError::LandingInterrupted(old.what));
        }
        let writes: Vec<&FilePlan> = plan.writes().collect();
        if !writes.is_empty() {
            self.write_record(what, &writes)?;
        }
        for file in &plan.files {
            self.apply_file(plan, file)?;
            each(file);
        }
        if !writes.is_empty() {
            self.remove_record()?;
        }
        Ok(())
    }

    /// Finishes an interrupted landing: every path that still holds its version from before gets the new one.
    pub fn finish_landing(
        &self,
        landing: Interrupted,
    ) -> Result<Vec<(String, PathRecovery)>, StoreError> {
        self.resume_landing(landing, true)
    }

    /// Undoes an interrupted landing: every path that holds the new version gets its version from before back.
    pub fn undo_landing(
        &self,
        landing: Interrupted,
    ) -> Result<Vec<(String, PathRecovery)>, StoreError> {
        self.resume_landing(landing, false)
    }

    fn resume_landing(
        &self,
        landing: Interrupted,
        forward: bool,
    ) -> Result<Vec<(String, PathRecovery)>, StoreError> {
        let root = self.workdir();
        let mut outcomes = Vec::new();
        for (n, entry) in landing.entries.iter().enumerate() {
            let before = (&entry.before, landing.dir.join(format!("{n}.before")));
            let after = (&entry.after, landing.dir.join(format!("{n}.after")));
            let (from, to) = if forward {
                (before, after)
            } else {
                (after, before)
            };
            let full = root.join(&entry.path);
            place::remove_temps(root, &entry.path)
                .map_err(StoreError::io("clean", full.clone()))?;
            let found =
                place::read(root, &entry.path).map_err(StoreError::io("read", full.clone()))?;
            let outcome = if holds(&found, to.0, &to.1)? {
                if matches!(to.0, Version::Missing) {
                    // Directories made for a new file before the kill go as the file would have.
                    place::remove(root, &entry.path).map_err(StoreError::io("remove", full))?;
                }
                PathRecovery::AsIs
            } else if holds(&found, from.0, &from.1)? {
                put(root, &entry.path, to.0, &to.1).map_err(StoreError::io("write", full))?;
                PathRecovery::Written
            } else {
                PathRecovery::ChangedSince
            };
            outcomes.push((entry.path.clone(), outcome));
        }
        fs::remove_file(landing.dir.join(RECORD))
            .map_err(StoreError::io("remove", landing.dir.join(RECORD)))?;
        fs::remove_dir_all(&landing.dir).map_err(StoreError::io("remove", &landing.dir))?;
        Ok(outcomes)
    }

    /// Saves the versions before and after of `writes`, then the record that names them (synced, renamed
    /// into place: from then on the landing counts as begun).
    fn write_record(&self, what: &str, writes: &[&FilePlan]) -> Result<(), StoreError> {
        let dir = self.landing_dir();
        fs::create_dir_all(&dir).map_err(StoreError::io("create", &dir))?;
        let mut entries = Vec::new();
        for (n, file) in writes.iter().enumerate() {
            let before = save(&dir.join(format!("{n}.before")), &file.ours, file.ours_mode)?;
            let mode = match file.mode() {
                Mode::Exact(mode) => Some(mode),
                Mode::New { .. } => None,
            };
            let after = save(&dir.join(format!("{n}.after")), &file.result(), mode)?;
            entries.push(Entry {
                path: file.path.clone(),
                before,
                after,
            });
            crash_point();
        }
        let record = Record {
            what: what.to_owned(),
            started: crate::store::session::log::now(),
            entries,
        };
        let json = serde_json::to_vec(&record).map_err(|source| StoreError::Encode {
            what: "the landing record",
            source,
        })?;
        let temp = dir.join("record.json.tmp");
        write_synced(&temp, &json)?;
        let path = dir.join(RECORD);
        fs::rename(&temp, &path).map_err(StoreError::io("rename", &path))?;
        sync_dir(&dir)?;
        crash_point();
        Ok(())
    }

    /// The landing is done: its record goes first (so a kill now leaves a folder without record, which
    /// means "nothing to do"), then the saved versions.
    fn remove_record(&self) -> Result<(), StoreError> {
        let dir = self.landing_dir();
        let path = dir.join(RECORD);
        fs::remove_file(&path).map_err(StoreError::io("remove", &path))?;
        crash_point();
        fs::remove_dir_all(&dir).map_err(StoreError::io("remove", &dir))
    }
}

/// Saves `side` to `path` (its bytes, or a link's target) and says what it was.
fn save(path: &Path, side: &Side, mode: Option<u32>) -> Result<Version, StoreError> {
    Ok(match side {
        Side::Missing => Version::Missing,
        Side::File { data, executable } => {
            write_synced(path, data)?;
            Version::File {
                mode,
                executable: *executable,
            }
        }
        Side::Symlink { target } => {
            write_synced(path, target)?;
            Version::Symlink
        }
        // Never planned as a write (land.rs skips them); refused rather than recorded wrongly.
        Side::Submodule | Side::Other => return Err(StoreError::NotLandable(path.to_path_buf())),
    })
}

/// True when `found` is `version` (whose bytes are in `saved`).
fn holds(found: &Found, version: &Version, saved: &Path) -> Result<bool, StoreError> {
    let bytes = || fs::read(saved).map_err(StoreError::io("read", saved));
    Ok(match (found, version) {
        (Found::Missing, Version::Missing) => true,
        (Found::File { data, .. }, Version::File { .. }) => *data == bytes()?,
        (Found::Symlink { target }, Version::Symlink) => *target == bytes()?,
        _ => false,
    })
}

/// Makes `rel` be `version` (bytes from `saved`), without following links.
fn put(root: &Path, rel: &str, version: &Version, saved: &Path) -> std::io::Result<()> {
    match version {
        Version::Missing => place::remove(root, rel),
        Version::File { mode, executable } => {
            let mode = match mode {
                Some(mode) => Mode::Exact(*mode),
                None => Mode::New {
                    executable: *executable,
                },
            };
            place::write_file(root, rel, &fs::read(saved)?, mode)
        }
        Version::Symlink => place::write_link(root, rel, &fs::read(saved)?),
    }
}

fn write_synced(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let mut file = fs::File::create(path).map_err(StoreError::io("create", path))?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(StoreError::io("write", path))
}

fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(StoreError::io("sync", dir))
}
