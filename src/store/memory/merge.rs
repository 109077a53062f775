//! Merging a remote's memory into ours (`git agent pull`): a union by id that never overwrites.
//!
//! Three-way, against the histories' merge base, one fan-out directory at a time and one entry at a time
//! inside a directory both sides changed, so a pull reads only the entries that differ:
//! - only one side changed an entry (or added it): that side's version;
//! - both changed it, with the same text, tags and kind (typically: both used it): one entry, its counters
//!   adding both sides' increments over the base, confidence likewise, sources joined;
//! - both changed its text, tags or kind differently: ours stays the entry, theirs is kept beside it in
//!   `versions`, and the entry is `needs_review` until someone picks (`git agent memory edit`);
//! - one side purged it and the other changed it: the changed one is kept (a pull never loses an edit).
//!
//! The result is a merge commit with both memory commits as parents, so `git log refs/agent/memory` shows
//! both histories; when one side is an ancestor of the other, the ref fast-forwards instead.

use std::collections::{BTreeMap, BTreeSet};

use gix::objs::tree::EntryKind;

use super::entry::{
    entry_path, parse_entry, round_confidence, Entry, EntryStatus, Kind, Source, Version,
    MEMORY_REF,
};
use super::index::{self, Summary};
use crate::store::objects::transaction::Proposal;
use crate::store::{ObjectId, Store, StoreError};

/// What a merge did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Merged {
    /// The memory ref's new commit, `None` when nothing changed (we had everything already).
    pub commit: Option<ObjectId>,
    /// The ref moved to their commit: we had nothing they lacked.
    pub fast_forward: bool,
    /// Entries we did not have.
    pub added: usize,
    /// Entries we had that took changes of theirs.
    pub updated: usize,
    /// Entries edited on both sides, now `needs_review`.
    pub review: Vec<String>,
}

/// One entry's blob on each side of a three-way merge.
struct Sides {
    base: Option<ObjectId>,
    ours: Option<ObjectId>,
    theirs: Option<ObjectId>,
}

impl Store {
    /// Merges the memory commit `theirs` (fetched from `remote`) into `refs/agent/memory`.
    pub fn merge_memory(&self, theirs: ObjectId, remote: &str) -> Result<Merged, StoreError> {
        self.transact(
            MEMORY_REF,
            || StoreError::Busy(MEMORY_REF.to_owned()),
            |ours| {
                let (new, mut merged) = match ours {
                    Some(ours) if ours == theirs => return Ok(Proposal::Done(Merged::default())),
                    None => (theirs, self.counted_fast_forward(None, theirs)?),
                    Some(ours) => {
                        let base = self.merge_base(ours, theirs)?;
                        if base == Some(theirs) {
                            return Ok(Proposal::Done(Merged::default()));
                        }
                        if base == Some(ours) {
                            (theirs, self.counted_fast_forward(Some(ours), theirs)?)
                        } else {
                            let (tree, merged) = self.merge_memory_trees(base, ours, theirs)?;
                            let message = merge_message(remote, &merged);
                            let commit =
                                self.memory_merge_commit(tree, &[ours, theirs], &message)?;
                            (commit, merged)
                        }
                    }
                };
                merged.commit = Some(new);
                Ok(Proposal::Move {
                    commit: new,
                    reflog: format!("merge memory from {remote}"),
                    then: merged,
                })
            },
        )
    }

    /// A fast-forward from `ours` to `theirs`, counted: entries added and changed.
    fn counted_fast_forward(
        &self,
        ours: Option<ObjectId>,
        theirs: ObjectId,
    ) -> Result<Merged, StoreError> {
        let before: BTreeMap<String, Summary> = match self.memory_tree(ours)? {
            Some(tree) => self.read_summaries(tree)?,
            None => Vec::new(),
        }
        .into_iter()
        .map(|s| (s.id.clone(), s))
        .collect();
        let after = match self.memory_tree(Some(theirs))? {
            Some(tree) => self.read_summaries(tree)?,
            None => Vec::new(),
        };
        let mut merged = Merged {
            fast_forward: true,
            ..Merged::default()
        };
        for line in after {
            match before.get(&line.id) {
                None => merged.added += 1,
                Some(old) if *old != line => merged.updated += 1,
                Some(_) => {}
            }
        }
        Ok(merged)
    }

    /// The merged tree of three memory commits (see the module docs).
    fn merge_memory_trees(
        &self,
        base: Option<ObjectId>,
        ours: ObjectId,
        theirs: ObjectId,
    ) -> Result<(ObjectId, Merged), StoreError> {
        let trees = [
            self.memory_tree(base)?,
            self.memory_tree(Some(ours))?,
            self.memory_tree(Some(theirs))?,
        ];
        let dirs = |tree: Option<ObjectId>| -> Result<BTreeMap<String, ObjectId>, StoreError> {
            match tree {
                Some(tree) => Ok(self.shard_dirs(tree, "entries")?.into_iter().collect()),
                None => Ok(BTreeMap::new()),
            }
        };
        let (base_dirs, our_dirs, their_dirs) = (dirs(trees[0])?, dirs(trees[1])?, dirs(trees[2])?);
        let our_tree = trees[1].unwrap_or_else(|| ObjectId::empty_tree(self.repo.object_hash()));
        let mut editor = self.repo.find_tree(our_tree)?.edit()?;
        let mut merged = Merged::default();
        let shards: BTreeSet<&String> = our_dirs.keys().chain(their_dirs.keys()).collect();
        for shard in shards {
            let (b, o, t) = (
                base_dirs.get(shard),
                our_dirs.get(shard),
                their_dirs.get(shard),
            );
            if o == t || t == b {
                continue;
            }
            let mut patches = Vec::new();
            let sides = self.entry_sides(b.copied(), o.copied(), t.copied())?;
            for (id, side) in sides {
                if let Some(patch) = self.merge_one(&id, side, &mut editor, &mut merged)? {
                    patches.push(patch);
                }
            }
            if patches.is_empty() {
                continue;
            }
            let old = self.shard_summaries(our_tree, shard)?;
            let lines = index::patched(old, patches);
            let path = index::shard_path(shard);
            if lines.is_empty() {
                editor.remove(path)?;
            } else {
                let blob = self.repo.write_blob(index::to_bytes(&lines))?.detach();
                editor.upsert(path, EntryKind::Blob, blob)?;
            }
        }
        Ok((editor.write()?.detach(), merged))
    }

    /// The blob of every entry of one fan-out directory, on each side.
    fn entry_sides(
        &self,
        base: Option<ObjectId>,
        ours: Option<ObjectId>,
        theirs: Option<ObjectId>,
    ) -> Result<BTreeMap<String, Sides>, StoreError> {
        let mut out: BTreeMap<String, Sides> = BTreeMap::new();
        for (which, dir) in [base, ours, theirs].into_iter().enumerate() {
            let Some(dir) = dir else { continue };
            for (name, blob) in self.blobs_in(dir)? {
                let Some(id) = name.strip_suffix(".json") else {
                    continue;
                };
                let side = out.entry(id.to_owned()).or_insert(Sides {
                    base: None,
                    ours: None,
                    theirs: None,
                });
                match which {
                    0 => side.base = Some(blob),
                    1 => side.ours = Some(blob),
                    _ => side.theirs = Some(blob),
                }
            }
        }
        Ok(out)
    }

    /// Merges one entry into `editor`; the index patch for it when ours changed.
    fn merge_one(
        &self,
        id: &str,
        side: Sides,
        editor: &mut gix::object::tree::Editor<'_>,
        merged: &mut Merged,
    ) -> Result<Option<index::Patch>, StoreError> {
        let Sides { base, ours, theirs } = side;
        if ours == theirs || theirs == base {
            return Ok(None);
        }
        if theirs.is_none() {
            // Purged there: gone here too unless we changed it since (a pull never loses an edit).
            if ours.is_some() && ours == base {
                editor.remove(entry_path(id))?;
                merged.updated += 1;
                return Ok(Some(index::Patch::Remove(id.to_owned())));
            }
            return Ok(None);
        }
        let read = |blob: Option<ObjectId>| -> Result<Option<Entry>, StoreError> {
            match blob {
                Some(blob) => Ok(Some(parse_entry(&self.repo.find_object(blob)?.data, id)?)),
                None => Ok(None),
            }
        };
        let their_entry = read(theirs)?.unwrap_or_default();
        let entry = match read(ours)? {
            // New to us, or purged here while they changed it: theirs comes back.
            None => {
                merged.added += 1;
                their_entry
            }
            // Only they changed it.
            Some(_) if ours == base => {
                merged.updated += 1;
                their_entry
            }
            Some(our_entry) => {
                merged.updated += 1;
                let entry = merge_entry(read(base)?.as_ref(), our_entry, their_entry);
                if entry.status == EntryStatus::NeedsReview {
                    merged.review.push(id.to_owned());
                }
                entry
            }
        };
        let entry = entry.sanitized();
        let blob = self.repo.write_blob(entry.to_bytes())?.detach();
        editor.upsert(entry_path(id), EntryKind::Blob, blob)?;
        Ok(Some(index::Patch::Put(Summary::of(&entry))))
    }
}

/// The text, tags and kind: what a person edits, as opposed to the counters sessions move.
fn content(entry: &Entry) -> (&str, BTreeSet<&str>, Kind) {
    (
        entry.text.trim(),
        entry.tags.iter().map(String::as_str).collect(),
        entry.kind,
    )
}

/// One entry both sides changed (see the module docs).
fn merge_entry(base: Option<&Entry>, ours: Entry, theirs: Entry) -> Entry {
    let mut out = ours.clone();
    let count = |pick: fn(&Entry) -> u32| -> u32 {
        match base {
            Some(b) => (pick(&ours) + pick(&theirs)).saturating_sub(pick(b)),
            None => pick(&ours).max(pick(&theirs)),
        }
    };
    out.uses = count(|e| e.uses);
    out.successes = count(|e| e.successes);
    out.failures = count(|e| e.failures);
    out.confidence = round_confidence(match base {
        Some(b) => ours.confidence + theirs.confidence - b.confidence,
        None => (ours.confidence + theirs.confidence) / 2.0,
    });
    out.created = ours.created.min(theirs.created);
    out.updated = ours.updated.max(theirs.updated);
    out.sources = join_sources(&ours.sources, &theirs.sources);
    // The status a side moved to, when only one moved it; ours when both did.
    let base_status = base.map(|b| b.status);
    if ours.status != theirs.status && Some(ours.status) == base_status {
        out.status = theirs.status;
        out.reason = theirs.reason.clone();
    }
    let base_content = base.map(content);
    if content(&ours) == content(&theirs) {
        out.versions = join_versions(&ours.versions, &theirs.versions);
    } else if Some(content(&ours)) == base_content {
        // Only they edited it: their content, with our counters (already merged above).
        out.text = theirs.text.clone();
        out.tags = theirs.tags.clone();
        out.kind = theirs.kind;
        out.versions = join_versions(&ours.versions, &theirs.versions);
    } else if Some(content(&theirs)) == base_content {
        out.versions = join_versions(&ours.versions, &theirs.versions);
    } else {
        let mut versions = vec![Version {
            text: theirs.text.clone(),
            tags: theirs.tags.clone(),
            kind: theirs.kind,
            updated: theirs.updated,
            sources: theirs.sources.clone(),
        }];
        versions.extend(theirs.versions.iter().cloned());
        out.versions = join_versions(&ours.versions, &versions);
        out.versions.retain(|v| v.text.trim() != out.text.trim());
        out.status = EntryStatus::NeedsReview;
        out.reason =
            "edited on both sides of a pull: keep one version with `git agent memory edit`".into();
    }
    out
}

fn join_sources(a: &[Source], b: &[Source]) -> Vec<Source> {
    let mut out = a.to_vec();
    for source in b {
        if !out.contains(source) {
            out.push(source.clone());
        }
    }
    out
}

fn join_versions(a: &[Version], b: &[Version]) -> Vec<Version> {
    let mut out = a.to_vec();
    for version in b {
        if !out.iter().any(|v| v.text.trim() == version.text.trim()) {
            out.push(version.clone());
        }
    }
    out
}

/// `merge memory from origin: 2 added, 1 updated, 1 needs review (3f9a1c2e)`.
fn merge_message(remote: &str, merged: &Merged) -> String {
    let mut message = format!(
        "merge memory from {remote}: {} added, {} updated",
        merged.added, merged.updated
    );
    if !merged.review.is_empty() {
        message.push_str(&format!(
            ", {} need{} review ({})",
            merged.review.len(),
            if merged.review.len() == 1 { "s" } else { "" },
            merged.review.join(", ")
        ));
    }
    message.push('\n');
    message
}
