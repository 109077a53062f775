//! Project memory in `refs/agent/memory`: one file per entry, every change one commit, moved by
//! compare-and-swap so that concurrent writers never lose an entry.
//!
//! The ref points at a commit whose tree holds
//!
//! ```text
//! entries/<aa>/<id>.json    one entry (id: 8 hex chars; <aa> its first two)
//! index/<aa>.jsonl          one line per entry of entries/<aa>/: what retrieval and `memory list` read
//! ```
//!
//! **JSON, not Markdown with front matter.** Most of an entry is numbers the agent rewrites after every session
//! (confidence, uses, successes, failures) and lists (tags, sources); serde round-trips them exactly with the
//! JSON we already depend on, where front matter would need a YAML parser and a second, looser format for the
//! same fields. Entries are written pretty-printed, so `git show refs/agent/memory:entries/3f/3f9a1c2e.json` and
//! `git log -p` read well.
//!
//! **Fanned out by the id's first two characters**, as git fans out objects and notes: a flat `entries/` tree
//! of 10,000 entries is a ~500 KB tree object rewritten by every write; fanned out, a write rewrites a root
//! tree, a 256-entry tree and a ~40-entry tree.
//!
//! **The index** exists because retrieval runs before the first model request of every session: reading 10,000
//! entry blobs costs far more than reading 256 index blobs (see `scripts/bench-memory.sh`). It is derived
//! data: every write here updates the shard of each entry it writes, a merge rebuilds the shards it touched,
//! and a tree without `index/` (written by hand with plain git) is read from its entries instead.
//!
//! What the entries mean (ranking, near-duplicates, confidence) is the agent's business (`agent::memory`);
//! this module stores, reads, and swaps. Every text field passes [`super::sanitize()`] on its way in.

pub mod check;
mod entry;
mod index;
mod merge;

use std::collections::{BTreeMap, BTreeSet};

use gix::objs::tree::EntryKind;

use super::objects::snapshot::{write_commit, write_merge_commit};
use super::objects::transaction::Proposal;
use super::repo::{sanitize, Store, StoreError};
use gix::ObjectId;

/// How many ids [`MemoryView::new_id()`] draws before it gives up (each collision is one chance in 2^32).
const ID_DRAWS: u32 = 1000;

pub use entry::{entry_path, is_entry_id, round_confidence, Entry, EntryStatus, Kind, Source};
use entry::{parse_entry, shard_of};
pub use index::Summary;

pub use entry::MEMORY_REF;

/// Where `git agent pull` fetches a remote's memory before merging it into ours. Outside `refs/agent/`, so
/// `git agent push` (which pushes `refs/agent/*`) never sends it back.
pub fn remote_memory_ref(remote: &str) -> String {
    format!("refs/agent-remotes/{remote}/memory")
}

/// The refspec that fetches a remote's memory there: forced (only `pull` writes there), and a glob, so a
/// remote without memory is not an error.
pub fn memory_fetch_refspec(remote: &str) -> String {
    format!("+{MEMORY_REF}*:{}*", remote_memory_ref(remote))
}

/// What one write does: entries to write (whole) and entries to remove, and the commit message saying what and
/// why.
#[derive(Debug, Clone, Default)]
pub struct MemoryEdit {
    pub message: String,
    pub put: Vec<Entry>,
    pub remove: Vec<String>,
}

/// A prefix matched against the entry ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolved {
    One(String),
    None,
    Many(Vec<String>),
}

/// The memory tree as one write (or one read) sees it.
pub struct MemoryView<'s> {
    store: &'s Store,
    /// The tree of the memory commit, `None` before the first write.
    tree: Option<ObjectId>,
    summaries: std::cell::OnceCell<Vec<Summary>>,
}

impl MemoryView<'_> {
    /// Entry `id`, if the tree has it.
    pub fn entry(&self, id: &str) -> Result<Option<Entry>, StoreError> {
        match self.tree {
            Some(tree) => self.store.read_entry(tree, id),
            None => Ok(None),
        }
    }

    /// One line per entry (every status), from the index.
    pub fn summaries(&self) -> Result<&[Summary], StoreError> {
        if let Some(found) = self.summaries.get() {
            return Ok(found);
        }
        let read = match self.tree {
            Some(tree) => self.store.read_summaries(tree)?,
            None => Vec::new(),
        };
        Ok(self.summaries.get_or_init(|| read))
    }

    /// A fresh id no entry has: 8 random hex characters.
    pub fn new_id(&self) -> Result<String, StoreError> {
        for _ in 0..ID_DRAWS {
            let draw = crate::sys::random::random_u64().map_err(StoreError::NoRandomness)?;
            let id = format!("{:08x}", draw & 0xffff_ffff);
            if self.entry(&id)?.is_none() {
                return Ok(id);
            }
        }
        Err(StoreError::NoFreeMemoryId { tries: ID_DRAWS })
    }
}

impl Store {
    /// The commit `refs/agent/memory` points at, `None` before the first entry.
    pub fn memory_tip(&self) -> Result<Option<ObjectId>, StoreError> {
        self.ref_target(MEMORY_REF)
    }

    /// The memory as it stands, for reads.
    pub fn memory(&self) -> Result<MemoryView<'_>, StoreError> {
        let tree = self.memory_tree(self.memory_tip()?)?;
        Ok(MemoryView {
            store: self,
            tree,
            summaries: std::cell::OnceCell::new(),
        })
    }

    /// One line per entry (every status), read from the index: what retrieval and `memory list` need.
    pub fn memory_summaries(&self) -> Result<Vec<Summary>, StoreError> {
        match self.memory_tree(self.memory_tip()?)? {
            Some(tree) => self.read_summaries(tree),
            None => Ok(Vec::new()),
        }
    }

    /// Entry `id` as it stands.
    pub fn memory_entry(&self, id: &str) -> Result<Option<Entry>, StoreError> {
        self.memory()?.entry(id)
    }

    /// The remotes whose fetched memory (`refs/agent-remotes/<remote>/memory`) holds entry `id`: where a
    /// pulled entry came from, as the model is told when it is injected.
    pub fn memory_remotes_holding(&self, id: &str) -> Result<Vec<String>, StoreError> {
        let mut remotes = Vec::new();
        let refs = self.repo.references()?;
        for r in refs.prefixed("refs/agent-remotes/")? {
            let mut r = r.map_err(|e| StoreError::Git(gix::Error::from_error(e)))?;
            let name = r.name().as_bstr().to_string();
            let Some(remote) = name
                .strip_prefix("refs/agent-remotes/")
                .and_then(|rest| rest.strip_suffix("/memory"))
                .map(str::to_owned)
            else {
                continue;
            };
            let commit = r.peel_to_id()?.detach();
            if let Some(tree) = self.memory_tree(Some(commit))? {
                if self.read_entry(tree, id).ok().flatten().is_some() {
                    remotes.push(remote);
                }
            }
        }
        Ok(remotes)
    }

    /// The entries whose id starts with `prefix` (as sessions are named by prefix).
    pub fn resolve_memory(&self, prefix: &str) -> Result<Resolved, StoreError> {
        let prefix = prefix.trim().to_ascii_lowercase();
        let Some(tree) = self.memory_tree(self.memory_tip()?)? else {
            return Ok(Resolved::None);
        };
        if prefix.is_empty() || !prefix.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Ok(Resolved::None);
        }
        let mut found = Vec::new();
        for (shard, dir) in self.shard_dirs(tree, "entries")? {
            if !(shard.starts_with(&prefix) || prefix.starts_with(&shard)) {
                continue;
            }
            for (name, _) in self.blobs_in(dir)? {
                let id = name.trim_end_matches(".json");
                if id.starts_with(&prefix) {
                    found.push(id.to_owned());
                }
            }
        }
        Ok(match found.len() {
            0 => Resolved::None,
            1 => Resolved::One(found.remove(0)),
            _ => {
                // An exact id is never ambiguous, even when it is the prefix of a longer one.
                match found.iter().position(|id| *id == prefix) {
                    Some(at) => Resolved::One(found.remove(at)),
                    None => Resolved::Many(found),
                }
            }
        })
    }

    /// Applies one change by compare-and-swap: `edit` sees the memory as it stands and returns what to write
    /// (or `None`: nothing to do); when another writer moved the ref in between, it runs again on the new
    /// state, so its decisions (a fresh id, a near-duplicate) are always made on what it replaces. Returns the
    /// new memory commit, `None` when there was nothing to do.
    pub fn update_memory(
        &self,
        mut edit: impl FnMut(&MemoryView<'_>) -> Result<Option<MemoryEdit>, StoreError>,
    ) -> Result<Option<ObjectId>, StoreError> {
        self.transact(
            MEMORY_REF,
            || StoreError::Busy(MEMORY_REF.to_owned()),
            |current| {
                let view = MemoryView {
                    store: self,
                    tree: self.memory_tree(current)?,
                    summaries: std::cell::OnceCell::new(),
                };
                let Some(change) = edit(&view)? else {
                    return Ok(Proposal::Done(None));
                };
                let tree = self.apply_edit(view.tree, &change)?;
                if Some(tree) == view.tree {
                    return Ok(Proposal::Done(None));
                }
                let message = sanitize(&change.message);
                let commit = write_commit(&self.repo, tree, current, &message)?;
                Ok(Proposal::Move {
                    commit,
                    reflog: first_line(&message),
                    then: Some(commit),
                })
            },
        )
    }

    /// The tree of memory commit `commit`.
    fn memory_tree(&self, commit: Option<ObjectId>) -> Result<Option<ObjectId>, StoreError> {
        match commit {
            Some(c) => Ok(Some(self.repo.find_commit(c)?.tree_id()?.detach())),
            None => Ok(None),
        }
    }

    /// Writes `change` onto `tree`: the entry blobs, and the index shards of the entries it touched.
    fn apply_edit(
        &self,
        tree: Option<ObjectId>,
        change: &MemoryEdit,
    ) -> Result<ObjectId, StoreError> {
        let base = tree.unwrap_or_else(|| ObjectId::empty_tree(self.repo.object_hash()));
        let mut editor = self.repo.find_tree(base)?.edit()?;
        let mut shards: BTreeMap<String, Vec<index::Patch>> = BTreeMap::new();
        for entry in &change.put {
            if !is_entry_id(&entry.id) {
                return Err(StoreError::InvalidMemoryId(entry.id.clone()));
            }
            let entry = entry.sanitized();
            let blob = self.repo.write_blob(entry.to_bytes())?.detach();
            editor.upsert(entry_path(&entry.id), EntryKind::Blob, blob)?;
            shards
                .entry(shard_of(&entry.id).to_owned())
                .or_default()
                .push(index::Patch::Put(Summary::of(&entry)));
        }
        for id in &change.remove {
            editor.remove(entry_path(id))?;
            shards
                .entry(shard_of(id).to_owned())
                .or_default()
                .push(index::Patch::Remove(id.clone()));
        }
        for (shard, patches) in shards {
            let old = match tree {
                Some(tree) => self.shard_summaries(tree, &shard)?,
                None => Vec::new(),
            };
            let lines = index::patched(old, patches);
            let path = index::shard_path(&shard);
            if lines.is_empty() {
                editor.remove(path)?;
            } else {
                let blob = self.repo.write_blob(index::to_bytes(&lines))?.detach();
                editor.upsert(path, EntryKind::Blob, blob)?;
            }
        }
        Ok(editor.write()?.detach())
    }

    /// Entry `id` in `tree`. An entry that does not parse is an error naming it: silently skipping it would
    /// let the next write of that id replace what someone wrote by hand.
    fn read_entry(&self, tree: ObjectId, id: &str) -> Result<Option<Entry>, StoreError> {
        if !is_entry_id(id) {
            return Ok(None);
        }
        let tree = self.repo.find_tree(tree)?;
        let Some(found) = tree.lookup_entry_by_path(entry_path(id))? else {
            return Ok(None);
        };
        self.refuse_oversized(found.object_id(), check::MAX_ENTRY_BYTES, &entry_path(id))?;
        let blob = self.repo.find_object(found.object_id())?;
        parse_entry(&blob.data, id).map(Some)
    }

    /// Every summary in `tree`: the index shards, or, for a tree without an index, the entries themselves.
    fn read_summaries(&self, tree: ObjectId) -> Result<Vec<Summary>, StoreError> {
        let shards = self.shard_blobs(tree, "index")?;
        if shards.is_empty() {
            return Ok(self.all_entries(tree)?.iter().map(Summary::of).collect());
        }
        let mut out = Vec::new();
        for (name, blob) in shards {
            self.refuse_oversized(blob, check::MAX_INDEX_BYTES, &format!("index/{name}"))?;
            let data = self.repo.find_object(blob)?;
            out.extend(index::parse(&data.data));
        }
        Ok(out)
    }

    /// The summaries of shard `shard` in `tree`: its index blob, or its entries when the blob is missing.
    fn shard_summaries(&self, tree: ObjectId, shard: &str) -> Result<Vec<Summary>, StoreError> {
        let root = self.repo.find_tree(tree)?;
        if let Some(found) = root.lookup_entry_by_path(index::shard_path(shard))? {
            self.refuse_oversized(
                found.object_id(),
                check::MAX_INDEX_BYTES,
                &index::shard_path(shard),
            )?;
            let data = self.repo.find_object(found.object_id())?;
            return Ok(index::parse(&data.data));
        }
        Ok(self
            .shard_entries(tree, shard)?
            .iter()
            .map(Summary::of)
            .collect())
    }

    /// The entries of fan-out directory `shard` in `tree`.
    fn shard_entries(&self, tree: ObjectId, shard: &str) -> Result<Vec<Entry>, StoreError> {
        let root = self.repo.find_tree(tree)?;
        let Some(dir) = root.lookup_entry_by_path(format!("entries/{shard}"))? else {
            return Ok(Vec::new());
        };
        if !dir.mode().is_tree() {
            return Ok(Vec::new());
        }
        let mut out = Vec::new();
        for (name, blob) in self.blobs_in(dir.object_id())? {
            let id = name.trim_end_matches(".json");
            self.refuse_oversized(
                blob,
                check::MAX_ENTRY_BYTES,
                &format!("entries/{shard}/{name}"),
            )?;
            let data = self.repo.find_object(blob)?;
            out.push(parse_entry(&data.data, id)?);
        }
        Ok(out)
    }

    /// Every entry of `tree` (slow with many entries: the index is what reads use).
    fn all_entries(&self, tree: ObjectId) -> Result<Vec<Entry>, StoreError> {
        let mut out = Vec::new();
        for (shard, _) in self.shard_dirs(tree, "entries")? {
            out.extend(self.shard_entries(tree, &shard)?);
        }
        Ok(out)
    }

    /// The subdirectories of `dir` in `tree` (the fan-out directories of `entries/`), by name.
    fn shard_dirs(&self, tree: ObjectId, dir: &str) -> Result<Vec<(String, ObjectId)>, StoreError> {
        let root = self.repo.find_tree(tree)?;
        let Some(found) = root.lookup_entry_by_path(dir)? else {
            return Ok(Vec::new());
        };
        if !found.mode().is_tree() {
            return Ok(Vec::new());
        }
        let mut out = Vec::new();
        for entry in self.repo.find_tree(found.object_id())?.iter() {
            let entry = entry.map_err(|e| StoreError::Git(gix::Error::from_error(e)))?;
            if entry.mode().is_tree() {
                out.push((entry.filename().to_string(), entry.oid().to_owned()));
            }
        }
        Ok(out)
    }

    /// The blobs directly in directory `dir` of `tree` (the index shards), by name.
    fn shard_blobs(
        &self,
        tree: ObjectId,
        dir: &str,
    ) -> Result<Vec<(String, ObjectId)>, StoreError> {
        let root = self.repo.find_tree(tree)?;
        match root.lookup_entry_by_path(dir)? {
            Some(found) if found.mode().is_tree() => self.blobs_in(found.object_id()),
            _ => Ok(Vec::new()),
        }
    }

    /// The blobs of tree `tree`, by name.
    fn blobs_in(&self, tree: ObjectId) -> Result<Vec<(String, ObjectId)>, StoreError> {
        let mut out = Vec::new();
        for entry in self.repo.find_tree(tree)?.iter() {
            let entry = entry.map_err(|e| StoreError::Git(gix::Error::from_error(e)))?;
            if entry.mode().is_blob() {
                out.push((entry.filename().to_string(), entry.oid().to_owned()));
            }
        }
        Ok(out)
    }

    /// The last version of entry `id` (full id) in the memory ref's history, for `restore` after a purge:
    /// the newest commit whose tree still has it.
    pub fn memory_entry_in_history(&self, prefix: &str) -> Result<Option<Entry>, StoreError> {
        let Some(tip) = self.memory_tip()? else {
            return Ok(None);
        };
        let prefix = prefix.trim().to_ascii_lowercase();
        if prefix.len() < 2 {
            return Ok(None);
        }
        let mut seen = BTreeSet::new();
        let mut queue = std::collections::VecDeque::from([tip]);
        while let Some(commit) = queue.pop_front() {
            if !seen.insert(commit) {
                continue;
            }
            let object = self.repo.find_commit(commit)?;
            let tree = object.tree_id()?.detach();
            let shard = &prefix[..2];
            for entry in self.shard_entries(tree, shard)? {
                if entry.id.starts_with(&prefix) {
                    return Ok(Some(entry));
                }
            }
            queue.extend(object.parent_ids().map(|p| p.detach()));
        }
        Ok(None)
    }
}

impl Store {
    /// Refuses a memory blob larger than `limit`, read from its header before anything else (issue 22,
    /// finding 4: a 150 MB blob must not be read by every `ask`).
    fn refuse_oversized(&self, blob: ObjectId, limit: u64, path: &str) -> Result<(), StoreError> {
        let size = self.repo.find_header(blob)?.size();
        if size > limit {
            return Err(StoreError::MemoryFileTooLarge {
                reference: MEMORY_REF,
                path: path.to_owned(),
                size,
                limit,
            });
        }
        Ok(())
    }

    /// A commit of `tree` with parents `parents` (a merge of memory histories).
    fn memory_merge_commit(
        &self,
        tree: ObjectId,
        parents: &[ObjectId],
        message: &str,
    ) -> Result<ObjectId, StoreError> {
        write_merge_commit(&self.repo, tree, parents, message)
    }
}

#[cfg(test)]
mod tests;

/// The first line of a commit message: what a reflog entry says.
fn first_line(message: &str) -> String {
    message.lines().next().unwrap_or_default().to_owned()
}
