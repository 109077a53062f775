//! What only this repository knows about a session: that it was started here, and whether it works in the
//! user's own work tree (`--here`). Kept under `<common git dir>/agent/local/<id>`, never in a ref.
//!
//! Why not in the session log's `meta.json`: that ref is pushed and pulled, so whatever it says was possibly
//! written by someone else. A collaborator's session whose metadata claims `"here": true` and a date in the
//! future would otherwise become the user's default session and turn their work tree into its checkout, and
//! `git agent undo` would write that session's old steps into the user's files (issue 17, defect 1). So every
//! decision that writes into the user's tree, and every default that picks "the newest session", reads this
//! record; `meta.here` is only what the log shows.
//!
//! The record is also how a new session claims its id. Creating it with `O_EXCL` is atomic, so two sessions
//! that start at the same instant and draw the same id cannot both get it: the loser draws again (defect 15:
//! checking that the branch and checkout were free and creating them later let both pass).
//!
//! The file is a line of JSON per change, the last complete line in force: each move of the branch appends
//! one (a single `write` on a file opened for appending) instead of writing a new file and renaming it over
//! the old, which cost a new inode per step commit (issue 29: a millisecond each on a file system that has
//! just deleted many files). A reader skips a last line still being written (no newline yet). Past
//! [`MAX_RECORD`] bytes, or on a record an earlier version wrote (one line, no newline), the record is
//! rewritten whole, beside and renamed, as before.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::log::log_ref;
use crate::store::repo::{branch_name, Store, StoreError};

/// How often a new session draws another id before giving up (each clash costs one file create).
const CLAIM_ATTEMPTS: u32 = 10_000;
/// A record this long is rewritten whole at its next change rather than appended to: about 80 moves.
const MAX_RECORD: usize = 8 * 1024;

/// The local facts of one session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Local {
    /// The session works in the user's own work tree (`ask --here`).
    pub here: bool,
    /// Where this repository last had the session's branch: the tip before its latest move and the tip
    /// after it (written before the move, so a crash in between leaves both). Empty in records written
    /// before tips were kept. A branch elsewhere was moved from outside git-agent (a forced fetch, a
    /// collaborator's steps): a default pick refuses it ([`Store::check_moved_here()`]).
    pub tips: Vec<gix::ObjectId>,
}

impl Store {
    fn local_dir(&self) -> PathBuf {
        self.common_dir().join("agent").join("local")
    }

    fn local_path(&self, id: &str) -> PathBuf {
        self.local_dir().join(id)
    }

    /// Claims a fresh session id, atomically: no branch, session log or local record of another session has
    /// it, and the record written for it here says whether the session works in the user's tree.
    ///
    /// Ids are 6 lowercase hex characters (24 bits): short enough to type, and a clash costs only a redraw.
    /// `GIT_AGENT_TEST_ID_SPACE=N` draws from the first N ids only, so a test can make clashes certain.
    pub fn claim_session_id(&self, here: bool) -> Result<String, StoreError> {
        let dir = self.local_dir();
        std::fs::create_dir_all(&dir).map_err(StoreError::io("create", &dir))?;
        let space = std::env::var("GIT_AGENT_TEST_ID_SPACE")
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
            .filter(|n| (1..=0x100_0000).contains(n))
            .unwrap_or(0x100_0000);
        for _ in 0..CLAIM_ATTEMPTS {
            let draw = crate::sys::random::random_u64().map_err(StoreError::NoRandomness)?;
            let id = format!("{:06x}", draw % space);
            let taken = !matches!(
                self.repo.try_find_reference(branch_name(&id).as_str()),
                Ok(None)
            ) || !matches!(
                self.repo.try_find_reference(log_ref(&id).as_str()),
                Ok(None)
            );
            if taken {
                continue;
            }
            let path = self.local_path(&id);
            let created = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path);
            match created {
                Ok(mut file) => {
                    let record = serde_json::json!({ "here": here }).to_string() + "\n";
                    file.write_all(record.as_bytes())
                        .map_err(StoreError::io("write", &path))?;
                    return Ok(id);
                }
                Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(err) => return Err(StoreError::io("create", path)(err)),
            }
        }
        Err(StoreError::NoFreeSessionId {
            draws: CLAIM_ATTEMPTS,
        })
    }

    /// The local record of session `id`: `None` for a session not started in this repository (pulled, or
    /// made before records existed), which is then never `--here` and never a default.
    pub fn local_session(&self, id: &str) -> Option<Local> {
        let text = std::fs::read(self.local_path(id)).ok()?;
        Some(parse_record(&text))
    }

    /// Records that this repository is about to move session `id`'s branch from `from` to `to` (`from` is
    /// `None` for its creation). Only a session with a local record has its tips kept. The new line is
    /// appended in one write, or the whole record replaced atomically (written beside, then renamed): a crash
    /// never leaves a half record in force.
    pub(in crate::store) fn record_tips(
        &self,
        id: &str,
        from: Option<gix::ObjectId>,
        to: gix::ObjectId,
    ) -> Result<(), StoreError> {
        let path = self.local_path(id);
        let Ok(text) = std::fs::read(&path) else {
            return Ok(());
        };
        let local = parse_record(&text);
        let tips: Vec<String> = from
            .into_iter()
            .chain([to])
            .map(|t| t.to_string())
            .collect();
        let line = serde_json::json!({ "here": local.here, "tips": tips }).to_string() + "\n";
        if text.ends_with(b"\n") && text.len() + line.len() <= MAX_RECORD {
            append(&path, &line)
        } else {
            let temp = path.with_extension("new");
            std::fs::write(&temp, line).map_err(StoreError::io("write", &temp))?;
            std::fs::rename(&temp, &path).map_err(StoreError::io("rename", &path))
        }
    }

    /// Fails unless session `id`'s branch is where this repository left it (see [`Local::tips`]): a
    /// default pick must never act on steps this repository did not make. A record without tips passes.
    pub(in crate::store) fn check_moved_here(&self, id: &str) -> Result<(), StoreError> {
        let Some(local) = self.local_session(id) else {
            return Ok(());
        };
        let tip = self.branch_tip(&branch_name(id))?;
        if local.tips.is_empty() || tip.is_some_and(|t| local.tips.contains(&t)) {
            return Ok(());
        }
        Err(StoreError::MovedOutside { id: id.to_owned() })
    }

    /// True if session `id` works in the user's own work tree, by the local record only.
    pub fn is_here(&self, id: &str) -> bool {
        self.local_session(id).is_some_and(|l| l.here)
    }

    /// Removes session `id`'s local record (the session is gone: rolled back, or purged).
    pub fn forget_local(&self, id: &str) -> Result<(), StoreError> {
        let path = self.local_path(id);
        match std::fs::remove_file(&path) {
            Err(err) if err.kind() != std::io::ErrorKind::NotFound => {
                Err(StoreError::io("remove", path)(err))
            }
            _ => Ok(()),
        }
    }
}

/// Appends `line` to the record at `path` in one `write` (`O_APPEND`: never interleaved with another
/// writer's line).
fn append(path: &Path, line: &str) -> Result<(), StoreError> {
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .map_err(StoreError::io("open", path))?;
    file.write_all(line.as_bytes())
        .map_err(StoreError::io("write", path))
}

/// The record in force in a local record's text: its last complete line. A text without any newline is a
/// record an earlier version wrote (always whole) or one being claimed (then unreadable: the defaults).
fn parse_record(text: &[u8]) -> Local {
    let complete = match text.iter().rposition(|&b| b == b'\n') {
        Some(end) => &text[..end],
        None => text,
    };
    let last = complete.rsplit(|&b| b == b'\n').next().unwrap_or(complete);
    let value: serde_json::Value = serde_json::from_slice(last).unwrap_or_default();
    let tips = value.get("tips").and_then(|v| v.as_array());
    Local {
        here: value.get("here").and_then(|v| v.as_bool()).unwrap_or(false),
        tips: tips
            .into_iter()
            .flatten()
            .filter_map(|t| gix::ObjectId::from_hex(t.as_str()?.as_bytes()).ok())
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::test_repo::TestRepo;
    use std::os::unix::fs::MetadataExt;

    fn oid(byte: u8) -> gix::ObjectId {
        gix::ObjectId::from_bytes_or_panic(&[byte; 20])
    }

    fn inode(path: &Path) -> u64 {
        std::fs::metadata(path).unwrap().ino()
    }

    #[test]
    fn the_last_complete_line_is_in_force() {
        let a = format!("{{\"here\":true,\"tips\":[\"{}\"]}}", oid(1));
        let b = format!("{{\"here\":true,\"tips\":[\"{}\",\"{}\"]}}", oid(1), oid(2));
        let both = format!("{{\"here\":true}}\n{a}\n{b}\n");
        assert_eq!(parse_record(both.as_bytes()).tips, vec![oid(1), oid(2)]);
        // A line still being written is not read: the one before it is in force.
        let unfinished = format!("{{\"here\":true}}\n{a}\n{}", &b[..b.len() / 2]);
        let local = parse_record(unfinished.as_bytes());
        assert_eq!((local.here, local.tips), (true, vec![oid(1)]));
        // An earlier version's record: one whole line, no newline.
        let old = parse_record(b.as_bytes());
        assert_eq!((old.here, old.tips), (true, vec![oid(1), oid(2)]));
        // A record being claimed reads as the defaults.
        let claiming = parse_record(b"{\"he");
        assert_eq!((claiming.here, claiming.tips), (false, vec![]));
    }

    #[test]
    fn a_move_appends_to_the_record_and_a_long_record_is_rewritten_whole() {
        let repo = TestRepo::with_commit("local-append");
        let store = repo.store();
        let id = store.claim_session_id(true).unwrap();
        let path = store.local_path(&id);
        let claimed = inode(&path);
        store.record_tips(&id, None, oid(1)).unwrap();
        store.record_tips(&id, Some(oid(1)), oid(2)).unwrap();
        // Same file: no new inode for either move.
        assert_eq!(inode(&path), claimed);
        let local = store.local_session(&id).unwrap();
        assert_eq!((local.here, local.tips), (true, vec![oid(1), oid(2)]));
        assert_eq!(std::fs::read_to_string(&path).unwrap().lines().count(), 3);
        // Until the limit every move appends; the move that would pass it writes one line into a new file.
        let mut step = 2u8;
        while inode(&path) == claimed {
            let before = std::fs::metadata(&path).unwrap().len();
            store
                .record_tips(&id, Some(oid(step)), oid(step + 1))
                .unwrap();
            assert!(before > MAX_RECORD as u64 / 2 || inode(&path) == claimed);
            step += 1;
        }
        assert!(step > 40, "rewritten after {step} moves");
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 1);
        let local = store.local_session(&id).unwrap();
        assert_eq!(
            (local.here, local.tips),
            (true, vec![oid(step - 1), oid(step)])
        );
    }

    #[test]
    fn a_record_an_earlier_version_wrote_is_rewritten_not_appended_to() {
        let repo = TestRepo::with_commit("local-old");
        let store = repo.store();
        let id = store.claim_session_id(false).unwrap();
        let path = store.local_path(&id);
        let old = format!("{{\"here\":true,\"tips\":[\"{}\"]}}", oid(1));
        std::fs::write(&path, old).unwrap();
        store.record_tips(&id, Some(oid(1)), oid(2)).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 1, "{text}");
        let local = store.local_session(&id).unwrap();
        assert_eq!((local.here, local.tips), (true, vec![oid(1), oid(2)]));
    }
}
