//! Skills kept in git: `refs/agent/skills`, one commit per change, shared with `git push` like the sessions.
//!
//! The ref points at a commit whose tree holds one folder per skill, exactly as the Agent Skills format lays
//! a skill out on disk (`<name>/SKILL.md` and the folder's other files, modes kept), so `git archive
//! refs/agent/skills <name>` is a valid skill. The use and success counts live beside the folders, in
//! `.stats/<name>.json`, never inside a skill: an exported skill stays byte for byte what was added (a name
//! cannot start with `.`, so `.stats` is never a skill). Counts are kept for any skill name the agent used,
//! also for skills read in place from disk.
//!
//! Every change is one commit whose message says what and why (`skill add pdf (3 files)`, `skill forget pdf:
//! outdated`, `skill counts after session 3f9c1a (done): pdf uses 1 -> 2, successes 0 -> 1`), and the ref moves
//! by compare-and-swap with retry as the notes do, so concurrent writers lose nothing. Text entering the ref
//! passes [`super::sanitize()`]. A pull merges the remote's skills ([`Store::merge_skills()`]): three-way per
//! skill folder, counts added up, a skill changed on both sides kept as ours and reported.
//!
//! The format's parser is [`format`]; the skills an agent sees (this ref and the folders on disk) are
//! [`sources`].

pub mod format;
mod shared;
pub mod sources;

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;

use gix::objs::tree::EntryKind;

use super::objects::snapshot::{write_commit, write_merge_commit};
use super::objects::transaction::Proposal;
use super::repo::{sanitize, Store, StoreError};
use crate::safety::tree_path;
use gix::ObjectId;

pub use shared::{Stats, MAX_BYTES, MAX_FILES, SKILLS_REF};

/// The folder of the counts, beside the skills.
pub const STATS_DIR: &str = ".stats";

/// The largest counts file read (`.stats/<name>.json`).
const MAX_STATS_BYTES: u64 = 64 << 10;

/// Where `git agent pull` fetches a remote's skills before merging them into ours.
pub fn remote_skills_ref(remote: &str) -> String {
    format!("refs/agent-remotes/{remote}/skills")
}

/// One file of a skill, as it goes into the ref.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillFile {
    /// Relative to the skill's folder, `/`-separated (`SKILL.md`, `scripts/run.sh`).
    pub path: String,
    pub bytes: Vec<u8>,
    pub executable: bool,
}

/// A skill as the ref holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredSkill {
    pub name: String,
    /// `SKILL.md`, or `None` when the folder has none (a broken push from elsewhere).
    pub text: Option<String>,
    /// The folder's other files, sorted.
    pub files: Vec<String>,
}

/// What the ref holds: its commit, the skill folders and the counts.
#[derive(Debug, Clone, Default)]
pub struct SkillsTree {
    pub commit: Option<ObjectId>,
    pub skills: Vec<StoredSkill>,
    pub stats: BTreeMap<String, Stats>,
    /// Folders left out, each with why ([`Store::skill_problem()`]): never read past their headers.
    pub skipped: Vec<(String, String)>,
}

/// How a turn that used skills ended, for their counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkillUse {
    Success,
    Failure,
    /// Interrupted: a use, neither a success nor a failure.
    Neither,
}

/// What [`Store::merge_skills()`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MergeReport {
    /// Skills that came from the remote or changed there.
    pub taken: Vec<String>,
    /// Skills changed on both sides: ours kept.
    pub conflicts: Vec<String>,
    /// Their skills left out, each with why ([`Store::skill_problem()`]): ours kept.
    pub skipped: Vec<(String, String)>,
    /// The ref moved (a fast-forward or a merge commit).
    pub changed: bool,
}

/// A change of the skills tree that a compare-and-swap attempt computes from the current state: the new tree
/// and the commit message, or `None` when nothing changes.
type Change = Option<(ObjectId, String)>;

impl Store {
    /// The skills and counts of `refs/agent/skills` (empty when the ref does not exist).
    pub fn read_skills(&self) -> Result<SkillsTree, StoreError> {
        let Some(commit) = self.ref_target(SKILLS_REF)? else {
            return Ok(SkillsTree::default());
        };
        let tree = self.repo.find_commit(commit)?.tree()?;
        let mut out = SkillsTree {
            commit: Some(commit),
            ..SkillsTree::default()
        };
        for entry in tree.iter() {
            let entry = entry.map_err(|e| StoreError::Git(gix::Error::from_error(e)))?;
            if !entry.mode().is_tree() {
                continue;
            }
            let name = entry.filename().to_string();
            if name == STATS_DIR {
                out.stats = self.read_stats(entry.oid().to_owned())?;
                continue;
            }
            if let Some(why) = self.skill_problem(&name, entry.oid().to_owned())? {
                out.skipped.push((name, why));
                continue;
            }
            let mut files = self.tree_files(entry.oid().to_owned())?;
            let text = match files.iter().position(|(p, _, _)| p == format::SKILL_FILE) {
                Some(at) => {
                    let (_, id, _) = files.remove(at);
                    let blob = self.repo.find_object(id)?;
                    Some(String::from_utf8_lossy(&blob.data).into_owned())
                }
                None => None,
            };
            out.skills.push(StoredSkill {
                name,
                text,
                files: files.into_iter().map(|(p, _, _)| p).collect(),
            });
        }
        Ok(out)
    }

    /// The bytes of `path` in the stored skill `name` (`None` if there is no such file).
    pub fn stored_skill_file(&self, name: &str, path: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let Some(commit) = self.ref_target(SKILLS_REF)? else {
            return Ok(None);
        };
        let tree = self.repo.find_commit(commit)?.tree()?;
        let full = format!("{name}/{path}");
        if let Err(refusal) = tree_path::check_str(&full, tree_path::EntryKind::File) {
            return Err(StoreError::SkillFileRefused(refusal));
        }
        let Some(folder) = tree.lookup_entry_by_path(name)? else {
            return Ok(None);
        };
        if let Some(why) = self.skill_problem(name, folder.object_id())? {
            return Err(StoreError::SkillUnusable {
                name: name.to_owned(),
                verb: "used",
                why,
            });
        }
        match tree.lookup_entry_by_path(full)? {
            Some(entry) if entry.mode().is_blob() => {
                Ok(Some(self.repo.find_object(entry.object_id())?.data.clone()))
            }
            _ => Ok(None),
        }
    }

    /// Every file of a stored skill with its bytes (for `skill export`).
    pub fn stored_skill_files(&self, name: &str) -> Result<Vec<SkillFile>, StoreError> {
        let Some(commit) = self.ref_target(SKILLS_REF)? else {
            return Ok(Vec::new());
        };
        let tree = self.repo.find_commit(commit)?.tree()?;
        let Some(dir) = tree.lookup_entry_by_path(name)? else {
            return Ok(Vec::new());
        };
        // Checked before anything is read or written: a pulled folder with `..` or `.git` paths must not
        // steer `skill export` outside its target (issue 22, finding 2).
        if let Some(why) = self.skill_problem(name, dir.object_id())? {
            return Err(StoreError::SkillUnusable {
                name: name.to_owned(),
                verb: "exported",
                why,
            });
        }
        let mut out = Vec::new();
        for (path, id, executable) in self.tree_files(dir.object_id())? {
            let bytes = self.repo.find_object(id)?.data.clone();
            out.push(SkillFile {
                path,
                bytes,
                executable,
            });
        }
        Ok(out)
    }

    /// Stores skills, each replacing the folder of its name whole (its counts are kept), as one commit with
    /// `message`. Returns the commit, or `None` when the ref already held exactly these files.
    pub fn put_skills(
        &self,
        skills: &[(String, Vec<SkillFile>)],
        message: &str,
    ) -> Result<Option<ObjectId>, StoreError> {
        for (name, files) in skills {
            format::check_name(name).map_err(StoreError::InvalidSkillName)?;
            check_files(name, files)?;
        }
        let blobs: Vec<(String, ObjectId, bool)> = skills
            .iter()
            .flat_map(|(name, files)| files.iter().map(move |f| (name, f)))
            .map(|(name, f)| {
                let bytes = match std::str::from_utf8(&f.bytes) {
                    Ok(text) => sanitize(text).into_bytes(),
                    // Not text: nothing for redaction to read (push still checks for known key values).
                    Err(_) => f.bytes.clone(),
                };
                let id = self.repo.write_blob(&bytes)?.detach();
                Ok((format!("{name}/{}", f.path), id, f.executable))
            })
            .collect::<Result<_, StoreError>>()?;
        self.cas_skills(None, |store, tree, _| {
            let mut editor = store.repo.find_tree(tree)?.edit()?;
            for (name, _) in skills {
                editor.remove(name.as_str())?;
            }
            for (path, id, executable) in &blobs {
                let kind = if *executable {
                    EntryKind::BlobExecutable
                } else {
                    EntryKind::Blob
                };
                editor.upsert(path.as_str(), kind, *id)?;
            }
            let new = editor.write()?.detach();
            Ok((new != tree).then(|| (new, message.to_owned())))
        })
    }

    /// Removes the stored skill `name` and its counts, as one commit whose message gives `reason`. False
    /// when the ref holds no such skill.
    pub fn forget_skill(&self, name: &str, reason: Option<&str>) -> Result<bool, StoreError> {
        let message = match reason {
            Some(reason) => format!("skill forget {name}: {reason}"),
            None => format!("skill forget {name}"),
        };
        let done = self.cas_skills(None, |store, tree, _| {
            let current = store.repo.find_tree(tree)?;
            if current.lookup_entry_by_path(name)?.is_none() {
                return Ok(None);
            }
            let mut editor = current.edit()?;
            editor.remove(name)?;
            editor.remove(format!("{STATS_DIR}/{name}.json").as_str())?;
            Ok(Some((editor.write()?.detach(), message.clone())))
        })?;
        Ok(done.is_some())
    }

    /// Counts one use of each skill in `names` by session `session`, whose turn ended with `status`
    /// (`outcome`), as one commit saying what changed. Returns the counts after the change.
    pub fn count_skill_uses(
        &self,
        names: &[String],
        outcome: SkillUse,
        session: &str,
        status: &str,
    ) -> Result<BTreeMap<String, Stats>, StoreError> {
        let names: BTreeSet<&String> = names.iter().collect();
        let mut after = BTreeMap::new();
        if names.is_empty() {
            return Ok(after);
        }
        let now = super::session::log::now();
        self.cas_skills(None, |store, tree, _| {
            let current = store.repo.find_tree(tree)?;
            let mut editor = current.edit()?;
            let mut changes = Vec::new();
            after.clear();
            for name in &names {
                let path = format!("{STATS_DIR}/{name}.json");
                let old = match current.lookup_entry_by_path(&path)? {
                    Some(e) => stats_of(&store.repo.find_object(e.object_id())?.data),
                    None => Stats::default(),
                };
                let mut new = old.clone();
                new.uses += 1;
                match outcome {
                    SkillUse::Success => new.successes += 1,
                    SkillUse::Failure => new.failures += 1,
                    SkillUse::Neither => {}
                }
                new.last_used = Some(now);
                new.last_session = session.to_owned();
                let json = serde_json::to_string_pretty(&new).unwrap_or_default() + "\n";
                editor.upsert(
                    path.as_str(),
                    EntryKind::Blob,
                    store.repo.write_blob(json.as_bytes())?.detach(),
                )?;
                let mut change = format!("{name} uses {} -> {}", old.uses, new.uses);
                match outcome {
                    SkillUse::Success => {
                        change += &format!(", successes {} -> {}", old.successes, new.successes)
                    }
                    SkillUse::Failure => {
                        change += &format!(", failures {} -> {}", old.failures, new.failures)
                    }
                    SkillUse::Neither => {}
                }
                changes.push(change);
                after.insert((*name).clone(), new);
            }
            let message = format!(
                "skill counts after session {session} ({status}): {}",
                changes.join("; ")
            );
            Ok(Some((editor.write()?.detach(), message)))
        })?;
        Ok(after)
    }

    /// Merges the skills commit `theirs` (fetched from `remote`) into ours: a fast-forward when one side
    /// contains the other; otherwise per skill folder three-way against the merge base (a skill only they
    /// added or changed is taken; one changed on both sides keeps ours and is reported), counts added up, in
    /// a merge commit with both parents, so the next push is a fast-forward for the remote.
    pub fn merge_skills(&self, theirs: ObjectId, remote: &str) -> Result<MergeReport, StoreError> {
        let their_tree = self.repo.find_commit(theirs)?.tree_id()?.detach();
        let skipped = self.skill_problems(their_tree)?;
        let mut report = MergeReport::default();
        let done = self.cas_skills(Some(theirs), |store, tree, ours| {
            report = MergeReport {
                skipped: skipped.clone(),
                ..MergeReport::default()
            };
            if !skipped.is_empty() {
                // Never taken whole: the folders that failed the checks stay as ours has them.
                return store.merge_skipping(tree, ours, theirs, remote, &mut report);
            }
            let Some(ours) = ours else {
                // Nothing here yet: the remote's commit as it is.
                report.taken =
                    store.skill_names(store.repo.find_commit(theirs)?.tree_id()?.detach())?;
                return Ok(Some((ObjectId::null(theirs.kind()), String::new())));
            };
            if ours == theirs || store.is_ancestor(theirs, ours)? {
                return Ok(None);
            }
            let their_tree = store.repo.find_commit(theirs)?.tree_id()?.detach();
            if store.is_ancestor(ours, theirs)? {
                report.taken = changed_names(store, tree, their_tree)?;
                return Ok(Some((ObjectId::null(theirs.kind()), String::new())));
            }
            let base = match store.merge_base(ours, theirs)? {
                Some(base) => store.repo.find_commit(base)?.tree_id()?.detach(),
                None => ObjectId::empty_tree(store.repo.object_hash()),
            };
            let merged = store.merge_skill_trees(base, tree, their_tree, &mut report)?;
            let mut message = format!("skill merge from {remote}");
            if !report.taken.is_empty() {
                message += &format!(": took {}", report.taken.join(", "));
            }
            if !report.conflicts.is_empty() {
                message += &format!(
                    "; kept ours of {} (changed on both sides)",
                    report.conflicts.join(", ")
                );
            }
            Ok(Some((merged, message)))
        })?;
        report.changed = done.is_some();
        Ok(report)
    }

    /// The merge of a skills commit some of whose folders failed the checks ([`MergeReport::skipped`]):
    /// always a merge commit, three-way from the merge base, the failed folders left as ours has them.
    fn merge_skipping(
        &self,
        tree: ObjectId,
        ours: Option<ObjectId>,
        theirs: ObjectId,
        remote: &str,
        report: &mut MergeReport,
    ) -> Result<Change, StoreError> {
        if let Some(ours) = ours {
            if ours == theirs || self.is_ancestor(theirs, ours)? {
                return Ok(None);
            }
        }
        let their_tree = self.repo.find_commit(theirs)?.tree_id()?.detach();
        let base = match ours {
            Some(ours) => self.merge_base(ours, theirs)?,
            None => None,
        };
        let base = match base {
            Some(base) => self.repo.find_commit(base)?.tree_id()?.detach(),
            None => ObjectId::empty_tree(self.repo.object_hash()),
        };
        let merged = self.merge_skill_trees(base, tree, their_tree, report)?;
        let names: Vec<&str> = report.skipped.iter().map(|(n, _)| n.as_str()).collect();
        let mut message = format!("skill merge from {remote}");
        if !report.taken.is_empty() {
            message += &format!(": took {}", report.taken.join(", "));
        }
        message += &format!("; left out {} (failed the checks)", names.join(", "));
        Ok(Some((merged, message)))
    }

    /// Every skill folder of a skills tree that fails [`Store::skill_problem()`], with why.
    fn skill_problems(&self, tree: ObjectId) -> Result<Vec<(String, String)>, StoreError> {
        let mut out = Vec::new();
        for (name, (id, is_tree)) in self.top_entries(tree)? {
            if name == STATS_DIR {
                continue;
            }
            let why = if is_tree {
                self.skill_problem(&name, id)?
            } else {
                Some("not a folder".to_owned())
            };
            if let Some(why) = why {
                out.push((name, why));
            }
        }
        Ok(out)
    }

    /// Why the stored skill folder `name` (tree `folder`) cannot be used, or `None` when it can: its name
    /// and every path pass the tree path policy ([`crate::safety::tree_path`]), it holds only regular
    /// files and folders, within [`MAX_FILES`] and [`MAX_BYTES`], and a `SKILL.md` of at most
    /// [`sources::MAX_SKILL_MD`] bytes. Sizes come from the object headers: no blob is read here, so a
    /// pulled 150 MB file costs nothing (issue 22, finding 4).
    pub fn skill_problem(
        &self,
        name: &str,
        folder: ObjectId,
    ) -> Result<Option<String>, StoreError> {
        if let Err(rule) = format::check_name(name) {
            return Ok(Some(format!("invalid name: {rule}")));
        }
        let (mut files, mut bytes, mut skill_md) = (0usize, 0u64, None);
        let mut stack = vec![(String::new(), folder)];
        while let Some((prefix, tree)) = stack.pop() {
            for entry in self.repo.find_tree(tree)?.iter() {
                let entry = entry.map_err(|e| StoreError::Git(gix::Error::from_error(e)))?;
                let path = format!("{prefix}{}", entry.filename());
                let full = format!("{name}/{path}");
                let kind = if entry.mode().is_link() {
                    tree_path::EntryKind::Symlink
                } else {
                    tree_path::EntryKind::File
                };
                if let Err(refusal) = tree_path::check_str(&full, kind) {
                    return Ok(Some(format!("refused path {refusal}")));
                }
                if entry.mode().is_tree() {
                    stack.push((format!("{path}/"), entry.oid().to_owned()));
                    continue;
                }
                if !entry.mode().is_blob() {
                    return Ok(Some(format!(
                        "{} is not a regular file",
                        tree_path::shown(&path)
                    )));
                }
                let size = self.repo.find_header(entry.oid())?.size();
                files += 1;
                bytes += size;
                if path == format::SKILL_FILE {
                    skill_md = Some(size);
                }
            }
            if files > MAX_FILES {
                return Ok(Some(format!("more than {MAX_FILES} files")));
            }
        }
        Ok(match skill_md {
            None => Some(format!("the folder has no {}", format::SKILL_FILE)),
            Some(size) if size > sources::MAX_SKILL_MD => Some(format!(
                "its {} has {size} bytes; the largest read is {}",
                format::SKILL_FILE,
                sources::MAX_SKILL_MD
            )),
            _ if bytes > MAX_BYTES => Some(format!(
                "{bytes} bytes; a stored skill may have at most {MAX_BYTES}"
            )),
            _ => None,
        })
    }

    /// The three-way merge of the skills trees: folders by their tree id, counts by adding up both sides'
    /// increments over the base.
    fn merge_skill_trees(
        &self,
        base: ObjectId,
        ours: ObjectId,
        theirs: ObjectId,
        report: &mut MergeReport,
    ) -> Result<ObjectId, StoreError> {
        let (b, o, t) = (
            self.top_entries(base)?,
            self.top_entries(ours)?,
            self.top_entries(theirs)?,
        );
        let mut editor = self.repo.find_tree(ours)?.edit()?;
        let names: BTreeSet<&String> = b.keys().chain(o.keys()).chain(t.keys()).collect();
        for name in names.into_iter().filter(|n| *n != STATS_DIR) {
            let (bb, oo, tt) = (b.get(name), o.get(name), t.get(name));
            if report.skipped.iter().any(|(n, _)| n == name) {
                continue;
            }
            if oo == tt || tt == bb {
                continue;
            }
            if oo == bb {
                match tt {
                    Some((id, _)) => editor.upsert(name.as_str(), EntryKind::Tree, *id)?,
                    None => editor.remove(name.as_str())?,
                };
                report.taken.push(name.clone());
            } else {
                report.conflicts.push(name.clone());
            }
        }
        let stats = |tree: ObjectId| -> Result<BTreeMap<String, Stats>, StoreError> {
            match self.repo.find_tree(tree)?.lookup_entry_by_path(STATS_DIR)? {
                Some(e) => self.read_stats(e.object_id()),
                None => Ok(BTreeMap::new()),
            }
        };
        let (sb, so, st) = (stats(base)?, stats(ours)?, stats(theirs)?);
        for (name, their) in &st {
            let zero = Stats::default();
            let old = sb.get(name).unwrap_or(&zero);
            let our = so.get(name).unwrap_or(&zero);
            if their == old || their == our {
                continue;
            }
            let add = |o: u64, t: u64, b: u64| (o + t).saturating_sub(b);
            let merged = Stats {
                uses: add(our.uses, their.uses, old.uses),
                successes: add(our.successes, their.successes, old.successes),
                failures: add(our.failures, their.failures, old.failures),
                last_used: our.last_used.max(their.last_used),
                last_session: if their.last_used > our.last_used {
                    their.last_session.clone()
                } else {
                    our.last_session.clone()
                },
            };
            let json = serde_json::to_string_pretty(&merged).unwrap_or_default() + "\n";
            let id = self.repo.write_blob(json.as_bytes())?.detach();
            editor.upsert(
                format!("{STATS_DIR}/{name}.json").as_str(),
                EntryKind::Blob,
                id,
            )?;
        }
        Ok(editor.write()?.detach())
    }

    /// The top-level entries of a tree: name to (id, is a tree).
    fn top_entries(
        &self,
        tree: ObjectId,
    ) -> Result<BTreeMap<String, (ObjectId, bool)>, StoreError> {
        let mut out = BTreeMap::new();
        for entry in self.repo.find_tree(tree)?.iter() {
            let entry = entry.map_err(|e| StoreError::Git(gix::Error::from_error(e)))?;
            out.insert(
                entry.filename().to_string(),
                (entry.oid().to_owned(), entry.mode().is_tree()),
            );
        }
        Ok(out)
    }

    /// The skill folders of a tree.
    fn skill_names(&self, tree: ObjectId) -> Result<Vec<String>, StoreError> {
        Ok(self
            .top_entries(tree)?
            .into_iter()
            .filter(|(name, (_, is_tree))| *is_tree && name != STATS_DIR)
            .map(|(name, _)| name)
            .collect())
    }

    /// The counts in a `.stats` tree; an unreadable file counts as none (it is ours to rewrite).
    fn read_stats(&self, tree: ObjectId) -> Result<BTreeMap<String, Stats>, StoreError> {
        let mut out = BTreeMap::new();
        for entry in self.repo.find_tree(tree)?.iter() {
            let entry = entry.map_err(|e| StoreError::Git(gix::Error::from_error(e)))?;
            let file = entry.filename().to_string();
            // Counts are a few dozen bytes: a larger file is not read (it counts as none).
            let small = entry.mode().is_blob()
                && self.repo.find_header(entry.oid())?.size() <= MAX_STATS_BYTES;
            if let (Some(name), true) = (file.strip_suffix(".json"), small) {
                let blob = self.repo.find_object(entry.oid())?;
                out.insert(name.to_owned(), stats_of(&blob.data));
            }
        }
        Ok(out)
    }

    /// Every blob under `tree` as (path, id, executable), sorted by path.
    fn tree_files(&self, tree: ObjectId) -> Result<Vec<(String, ObjectId, bool)>, StoreError> {
        let mut out = Vec::new();
        let mut stack = vec![(String::new(), tree)];
        while let Some((prefix, tree)) = stack.pop() {
            for entry in self.repo.find_tree(tree)?.iter() {
                let entry = entry.map_err(|e| StoreError::Git(gix::Error::from_error(e)))?;
                let path = format!("{prefix}{}", entry.filename());
                if entry.mode().is_tree() {
                    stack.push((format!("{path}/"), entry.oid().to_owned()));
                } else if entry.mode().is_blob() {
                    out.push((path, entry.oid().to_owned(), entry.mode().is_executable()));
                }
            }
        }
        out.sort();
        Ok(out)
    }

    /// True when `ancestor` is reachable from `of` (`git merge-base --is-ancestor`).
    pub(super) fn is_ancestor(&self, ancestor: ObjectId, of: ObjectId) -> Result<bool, StoreError> {
        let (a, b) = (ancestor.to_string(), of.to_string());
        let args = ["merge-base", "--is-ancestor", a.as_str(), b.as_str()].map(OsStr::new);
        match self.git(self.workdir(), &args) {
            Ok(_) => Ok(true),
            Err(StoreError::GitCommand { stderr, .. }) if stderr.trim().is_empty() => Ok(false),
            Err(err) => Err(err),
        }
    }

    /// The compare-and-swap of the skills ref ([`Store::transact()`]). `change(store, current tree, current
    /// commit)` computes the new tree and message from what the ref holds now; a null tree id means "move
    /// the ref to `extra_parent` as it is" (a fast-forward). The commit gets the current commit (and
    /// `extra_parent`) as parents. Returns the new commit, or `None` when nothing changed.
    fn cas_skills(
        &self,
        extra_parent: Option<ObjectId>,
        mut change: impl FnMut(&Store, ObjectId, Option<ObjectId>) -> Result<Change, StoreError>,
    ) -> Result<Option<ObjectId>, StoreError> {
        self.transact(
            SKILLS_REF,
            || StoreError::Busy(SKILLS_REF.to_owned()),
            |current| {
                let tree = self.tip_tree(current)?;
                let Some((new_tree, message)) = change(self, tree, current)? else {
                    return Ok(Proposal::Done(None));
                };
                let commit = match extra_parent {
                    Some(theirs) if new_tree.is_null() => theirs,
                    _ => {
                        let message = sanitize(&message);
                        let parents: Vec<ObjectId> =
                            current.into_iter().chain(extra_parent).collect();
                        match parents.as_slice() {
                            [] => write_commit(&self.repo, new_tree, None, &message)?,
                            [one] => write_commit(&self.repo, new_tree, Some(*one), &message)?,
                            many => write_merge_commit(&self.repo, new_tree, many, &message)?,
                        }
                    }
                };
                Ok(Proposal::Move {
                    commit,
                    reflog: "git-agent: skills".to_owned(),
                    then: Some(commit),
                })
            },
        )
    }
}

/// The skills whose folders differ between two trees (what a fast-forward brings).
fn changed_names(
    store: &Store,
    ours: ObjectId,
    theirs: ObjectId,
) -> Result<Vec<String>, StoreError> {
    let (o, t) = (store.top_entries(ours)?, store.top_entries(theirs)?);
    let names: BTreeSet<&String> = o.keys().chain(t.keys()).collect();
    Ok(names
        .into_iter()
        .filter(|n| *n != STATS_DIR && o.get(*n) != t.get(*n))
        .cloned()
        .collect())
}

fn stats_of(bytes: &[u8]) -> Stats {
    serde_json::from_slice(bytes).unwrap_or_default()
}

/// A skill's files within the limits, with safe relative paths and a `SKILL.md`.
fn check_files(name: &str, files: &[SkillFile]) -> Result<(), StoreError> {
    if !files.iter().any(|f| f.path == format::SKILL_FILE) {
        return Err(StoreError::SkillWithoutFile {
            name: name.to_owned(),
            file: format::SKILL_FILE,
        });
    }
    if files.len() > MAX_FILES {
        return Err(StoreError::SkillTooLarge {
            name: name.to_owned(),
            size: files.len() as u64,
            unit: "files",
            limit: MAX_FILES as u64,
        });
    }
    let bytes: u64 = files.iter().map(|f| f.bytes.len() as u64).sum();
    if bytes > MAX_BYTES {
        return Err(StoreError::SkillTooLarge {
            name: name.to_owned(),
            size: bytes,
            unit: "bytes",
            limit: MAX_BYTES,
        });
    }
    for f in files {
        let bad = f.path.is_empty()
            || f.path.starts_with('/')
            || f.path
                .split('/')
                .any(|c| c.is_empty() || c == "." || c == ".." || c == ".git");
        if bad {
            return Err(StoreError::InvalidSkillFilePath {
                name: name.to_owned(),
                path: f.path.clone(),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::test_repo::TestRepo;

    fn skill(name: &str, description: &str) -> (String, Vec<SkillFile>) {
        let text = format!("---\nname: {name}\ndescription: {description}\n---\nDo it.\n");
        let files = vec![
            SkillFile {
                path: format::SKILL_FILE.into(),
                bytes: text.into_bytes(),
                executable: false,
            },
            SkillFile {
                path: "scripts/run.sh".into(),
                bytes: b"#!/bin/sh\necho ok\n".to_vec(),
                executable: true,
            },
        ];
        (name.to_owned(), files)
    }

    #[test]
    fn skills_are_stored_read_counted_and_forgotten_one_commit_each() {
        let repo = TestRepo::with_commit("skills-ref");
        let store = repo.store();
        assert!(store.read_skills().unwrap().skills.is_empty());
        let first = store
            .put_skills(&[skill("pdf", "read PDFs")], "skill add pdf (2 files)")
            .unwrap();
        assert!(first.is_some());
        assert_eq!(
            store
                .put_skills(&[skill("pdf", "read PDFs")], "again")
                .unwrap(),
            None,
            "the same files again change nothing"
        );
        let tree = store.read_skills().unwrap();
        assert_eq!(tree.skills.len(), 1);
        assert_eq!(tree.skills[0].files, ["scripts/run.sh"]);
        assert!(tree.skills[0]
            .text
            .as_deref()
            .unwrap()
            .contains("read PDFs"));
        // Plain git sees the skill as a folder, modes kept.
        let listing = repo.git(&["ls-tree", "-r", SKILLS_REF]);
        assert!(
            listing.contains("100755 blob") && listing.contains("pdf/scripts/run.sh"),
            "{listing}"
        );
        assert_eq!(
            store
                .stored_skill_file("pdf", "scripts/run.sh")
                .unwrap()
                .unwrap(),
            b"#!/bin/sh\necho ok\n"
        );
        assert_eq!(store.stored_skill_file("pdf", "nope").unwrap(), None);
        let files = store.stored_skill_files("pdf").unwrap();
        assert_eq!(
            files
                .iter()
                .map(|f| (f.path.as_str(), f.executable))
                .collect::<Vec<_>>(),
            [("SKILL.md", false), ("scripts/run.sh", true)]
        );

        let after = store
            .count_skill_uses(&["pdf".into()], SkillUse::Success, "abc123", "done")
            .unwrap();
        assert_eq!((after["pdf"].uses, after["pdf"].successes), (1, 1));
        store
            .count_skill_uses(
                &["pdf".into(), "disk-only".into()],
                SkillUse::Failure,
                "def456",
                "blocked",
            )
            .unwrap();
        let tree = store.read_skills().unwrap();
        assert_eq!(
            (
                tree.stats["pdf"].uses,
                tree.stats["pdf"].successes,
                tree.stats["pdf"].failures
            ),
            (2, 1, 1)
        );
        assert_eq!(tree.stats["disk-only"].uses, 1);
        assert_eq!(tree.skills.len(), 1, "counts are not a skill");
        let log = repo.git(&["log", "--format=%s", SKILLS_REF]);
        assert_eq!(
            log.lines().collect::<Vec<_>>(),
            [
                "skill counts after session def456 (blocked): disk-only uses 0 -> 1, failures 0 -> 1; pdf uses 1 -> 2, failures 0 -> 1",
                "skill counts after session abc123 (done): pdf uses 0 -> 1, successes 0 -> 1",
                "skill add pdf (2 files)",
            ]
        );
        assert!(store.forget_skill("pdf", Some("outdated")).unwrap());
        assert!(!store.forget_skill("pdf", None).unwrap());
        let tree = store.read_skills().unwrap();
        assert!(tree.skills.is_empty() && !tree.stats.contains_key("pdf"));
        assert!(repo
            .git(&["log", "-1", "--format=%s", SKILLS_REF])
            .starts_with("skill forget pdf: outdated"));
        repo.git(&["fsck", "--strict", "--no-progress"]);
    }

    #[test]
    fn bad_names_and_paths_are_refused() {
        let repo = TestRepo::with_commit("skills-bad");
        let store = repo.store();
        let (_, files) = skill("ok", "x");
        assert!(store
            .put_skills(&[("Bad".into(), files.clone())], "m")
            .is_err());
        let mut escaping = files.clone();
        escaping[1].path = "../x".into();
        let err = store
            .put_skills(&[("ok".into(), escaping)], "m")
            .unwrap_err()
            .to_string();
        assert!(err.contains("invalid file path"), "{err}");
        let err = store
            .put_skills(&[("ok".into(), files[1..].to_vec())], "m")
            .unwrap_err()
            .to_string();
        assert!(err.contains("has no SKILL.md"), "{err}");
    }

    #[test]
    fn concurrent_counters_lose_nothing() {
        let repo = TestRepo::with_commit("skills-cas");
        repo.store()
            .put_skills(&[skill("a", "x")], "skill add a")
            .unwrap();
        let dir = repo.path("");
        let writers: Vec<_> = (0..4)
            .map(|i| {
                let dir = dir.clone();
                std::thread::spawn(move || {
                    let store = Store::open(&dir).unwrap();
                    for n in 0..10 {
                        let session = format!("s{i}{n}");
                        store
                            .count_skill_uses(&["a".into()], SkillUse::Success, &session, "done")
                            .unwrap();
                    }
                })
            })
            .collect();
        for w in writers {
            w.join().unwrap();
        }
        let stats = &repo.store().read_skills().unwrap().stats["a"];
        assert_eq!((stats.uses, stats.successes), (40, 40));
    }

    #[test]
    fn a_merge_takes_their_changes_keeps_ours_on_conflict_and_adds_up_counts() {
        let repo = TestRepo::with_commit("skills-merge");
        let store = repo.store();
        store
            .put_skills(&[skill("shared", "v1"), skill("both", "v1")], "base")
            .unwrap();
        store
            .count_skill_uses(&["shared".into()], SkillUse::Success, "s0", "done")
            .unwrap();
        let base = store.ref_target(SKILLS_REF).unwrap().unwrap();
        // Theirs: a new skill, a change to `both`, one more use of `shared`.
        store
            .put_skills(
                &[skill("theirs", "t"), skill("both", "their change")],
                "theirs",
            )
            .unwrap();
        store
            .count_skill_uses(&["shared".into()], SkillUse::Success, "s1", "done")
            .unwrap();
        let theirs = store.ref_target(SKILLS_REF).unwrap().unwrap();
        repo.git(&["update-ref", SKILLS_REF, &base.to_string()]);
        // Ours: our own change to `both`, a failed use of `shared`.
        store
            .put_skills(&[skill("both", "our change")], "ours")
            .unwrap();
        store
            .count_skill_uses(&["shared".into()], SkillUse::Failure, "s2", "blocked")
            .unwrap();
        let report = store.merge_skills(theirs, "origin").unwrap();
        assert_eq!(report.taken, ["theirs"]);
        assert_eq!(report.conflicts, ["both"]);
        assert!(report.changed);
        let tree = store.read_skills().unwrap();
        let names: Vec<&str> = tree.skills.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["both", "shared", "theirs"]);
        let both = tree.skills.iter().find(|s| s.name == "both").unwrap();
        assert!(both.text.as_deref().unwrap().contains("our change"));
        let shared = &tree.stats["shared"];
        assert_eq!((shared.uses, shared.successes, shared.failures), (3, 2, 1));
        let parents = repo.git(&["log", "-1", "--format=%P", SKILLS_REF]);
        assert_eq!(parents.split_whitespace().count(), 2, "a merge commit");
        // Pulling the same again is nothing; a remote behind us is nothing; one ahead is a fast-forward.
        assert!(!store.merge_skills(theirs, "origin").unwrap().changed);
        let merged = store.ref_target(SKILLS_REF).unwrap().unwrap();
        store.put_skills(&[skill("later", "x")], "later").unwrap();
        let ahead = store.ref_target(SKILLS_REF).unwrap().unwrap();
        repo.git(&["update-ref", SKILLS_REF, &merged.to_string()]);
        let report = store.merge_skills(ahead, "origin").unwrap();
        assert_eq!(
            (report.changed, report.taken.as_slice()),
            (true, ["later".to_owned()].as_slice())
        );
        assert_eq!(store.ref_target(SKILLS_REF).unwrap(), Some(ahead));
        repo.git(&["fsck", "--strict", "--no-progress"]);
    }
}
