//! What a pull takes of a remote's memory: every entry and index line checked before the merge (issue 22,
//! finding 3).
//!
//! A remote's memory commit is data from someone else. Each entry file must be named by a valid id in its
//! own fan-out directory, be a regular file within [`MAX_ENTRY_BYTES`] (read from the object header before
//! the blob is read) and parse as an entry; each index shard must be within [`MAX_INDEX_BYTES`] and name
//! exactly the valid entries of its directory. What fails is left out: the merge takes a commit on top of
//! theirs with the bad entries removed and the affected index shards rewritten from the entries, so one
//! malformed entry never fails the pull or keeps the valid ones out.

use std::collections::{BTreeMap, BTreeSet};

use gix::objs::tree::EntryKind;

use super::entry::{is_entry_id, parse_entry, Entry};
use super::index::{self, Summary};
use crate::store::{ObjectId, Store, StoreError};

/// The largest entry file read (an entry is a note of a few lines).
pub const MAX_ENTRY_BYTES: u64 = 64 << 10;
/// The largest index shard read.
pub const MAX_INDEX_BYTES: u64 = 16 << 20;

/// A part of a remote's memory left out, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeftOut {
    /// The path in the memory tree (`entries/ab/abcd.json`, `index/ab.jsonl`).
    pub path: String,
    pub why: String,
}

impl Store {
    /// Checks the memory commit `theirs`; returns the commit to merge (theirs itself when everything is
    /// valid, otherwise a commit on top of it without what failed) and what was left out.
    pub fn checked_memory(&self, theirs: ObjectId) -> Result<(ObjectId, Vec<LeftOut>), StoreError> {
        // Already merged (an earlier pull checked it): nothing new to check, and no new commit.
        if let Some(ours) = self.memory_tip()? {
            if ours == theirs || self.is_ancestor(theirs, ours)? {
                return Ok((theirs, Vec::new()));
            }
        }
        let Some(tree) = self.memory_tree(Some(theirs))? else {
            return Ok((theirs, Vec::new()));
        };
        let mut left = Vec::new();
        let mut valid: BTreeMap<String, Vec<Summary>> = BTreeMap::new();
        let mut remove = Vec::new();
        for (shard, dir) in self.shard_dirs(tree, "entries")? {
            let summaries = valid.entry(shard.clone()).or_default();
            for entry in self.repo.find_tree(dir)?.iter() {
                let entry = entry.map_err(|e| StoreError::Git(gix::Error::from_error(e)))?;
                let name = entry.filename().to_string();
                let path = format!("entries/{shard}/{name}");
                match self.entry_problem(&shard, &name, entry.mode(), entry.oid().to_owned())? {
                    Ok(parsed) => summaries.push(Summary::of(&parsed)),
                    Err(why) => {
                        remove.push(path.clone());
                        left.push(LeftOut { path, why });
                    }
                }
            }
        }
        let mut rewrite = BTreeSet::new();
        for (name, blob) in self.shard_blobs(tree, "index")? {
            let shard = name.trim_end_matches(".jsonl").to_owned();
            let path = format!("index/{name}");
            if self.repo.find_header(blob)?.size() > MAX_INDEX_BYTES {
                left.push(LeftOut {
                    path,
                    why: format!("larger than {MAX_INDEX_BYTES} bytes; rebuilt from the entries"),
                });
                rewrite.insert(shard);
                continue;
            }
            let lines = index::parse(&self.repo.find_object(blob)?.data);
            let entries: BTreeSet<&str> = valid
                .get(&shard)
                .map(|s| s.iter().map(|s| s.id.as_str()).collect())
                .unwrap_or_default();
            let named: BTreeSet<&str> = lines.iter().map(|l| l.id.as_str()).collect();
            for id in named.difference(&entries) {
                left.push(LeftOut {
                    path: path.clone(),
                    why: format!("its line for {id} names no valid entry; the shard is rebuilt from the entries"),
                });
            }
            if named != entries {
                rewrite.insert(shard);
            }
        }
        // A shard whose entries lost one needs its index rebuilt too.
        for item in &left {
            if let Some(rest) = item.path.strip_prefix("entries/") {
                if let Some((shard, _)) = rest.split_once('/') {
                    rewrite.insert(shard.to_owned());
                }
            }
        }
        if left.is_empty() {
            return Ok((theirs, left));
        }
        let mut editor = self.repo.find_tree(tree)?.edit()?;
        for path in &remove {
            editor.remove(path.as_str())?;
        }
        for shard in &rewrite {
            let mut lines = valid.get(shard).cloned().unwrap_or_default();
            lines.sort_by(|a, b| a.id.cmp(&b.id));
            let path = index::shard_path(shard);
            if lines.is_empty() {
                editor.remove(path.as_str())?;
            } else {
                let blob = self.repo.write_blob(index::to_bytes(&lines))?.detach();
                editor.upsert(path.as_str(), EntryKind::Blob, blob)?;
            }
        }
        let cleaned = editor.write()?.detach();
        let message = format!(
            "memory as pulled, without {} part{} that failed the checks",
            left.len(),
            if left.len() == 1 { "" } else { "s" }
        );
        let commit = self.memory_merge_commit(cleaned, &[theirs], &message)?;
        Ok((commit, left))
    }

    /// The entry file `name` of fan-out directory `shard`, parsed, or why it cannot be taken. Its size is
    /// read from the object header first: an oversized blob is never read.
    fn entry_problem(
        &self,
        shard: &str,
        name: &str,
        mode: gix::object::tree::EntryMode,
        blob: ObjectId,
    ) -> Result<Result<Entry, String>, StoreError> {
        let Some(id) = name.strip_suffix(".json").filter(|id| is_entry_id(id)) else {
            return Ok(Err("not named <id>.json with a hex id".into()));
        };
        if !id.starts_with(shard) || shard.len() != 2 {
            return Ok(Err(format!("not in its fan-out directory ({})", &id[..2])));
        }
        if !mode.is_blob() {
            return Ok(Err("not a regular file".into()));
        }
        let size = self.repo.find_header(blob)?.size();
        if size > MAX_ENTRY_BYTES {
            return Ok(Err(format!(
                "{size} bytes; an entry may have at most {MAX_ENTRY_BYTES}"
            )));
        }
        let data = self.repo.find_object(blob)?;
        Ok(parse_entry(&data.data, id)
            .map_err(|_| "not a valid entry (its JSON does not parse as one)".to_owned()))
    }
}
