//! The session log: every event of a session, durable after each one, kept in `refs/agent/sessions/<id>`.
//!
//! Why a journal plus a ref, and not one commit per event: a commit per event costs a tree write, a commit and a
//! locked ref update (~1 ms and several files), and a ref whose tree holds the whole transcript costs O(session)
//! per append. Instead each event is appended as one JSON line to `<common git dir>/agent/journal/<id>.jsonl`
//! with one `write`: O(event), and a crash loses at most the line being written (a torn last line is ignored).
//!
//! **Durability.** A `write` that returned is in the kernel: a killed process (`kill -9`, a panic, an OOM kill)
//! loses nothing it wrote. Only a power loss or a kernel crash can lose what is not on disk yet, so the journal
//! is `fdatasync`ed at the points worth keeping across those: after each step commit ([`SessionLog::sync()`],
//! the step's event names a commit that is on the branch), at the end of every turn and at every fold, when
//! something was appended since the last sync (a new session's first fold has nothing to sync). The
//! guarantee: after a power loss, a session keeps every event up to its last step commit or turn end; events
//! after that (model text, tool results of calls that changed nothing) may be lost, and resuming repeats them.
//! One `fdatasync` per event cost 14 syncs in a 3-step session, each a disk flush (issue 16).
//! The journal is *folded* into the ref at the end of every turn and when a crashed session is opened again:
//! the new lines become one blob `events/<first seq>.jsonl` (chunks, so a fold costs O(new events), never a
//! rewrite of the transcript), `meta.json` is replaced, and the ref moves by compare-and-swap to a commit whose
//! parent is the previous log commit, so the log's own history is auditable with `git log refs/agent/sessions/<id>`.
//!
//! `meta.json` is the small summary (prompt, model, base, status, steps, usage, dates) that `git agent log`
//! reads, so listing 1,000 sessions reads 1,000 small blobs and no transcript.
//!
//! One writer per session: the journal file is `flock`ed by the process that writes it. The kernel drops the
//! lock when that process dies, even by `kill -9`, so a crash never leaves a lock that blocks the next run.
//!
//! Lines are opaque JSON objects to this module (the agent defines the events); each gets a `seq` number.
//! Every line and the meta are redacted as decoded strings ([`crate::safety::redact::redact_value()`],
//! [`crate::store::sanitize_record()`]) before they are serialised, because users push these refs.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::PathBuf;

use gix::bstr::ByteSlice;
use gix::objs::tree::EntryKind;
use gix::refs::transaction::{PreviousValue, RefEdit};
use gix::refs::Target;
use serde::{Deserialize, Serialize};

use crate::protocol::Status;
use crate::safety::redact::redact_value;
use crate::store::objects::snapshot::{edit_ref, full_name, trailer, write_commit};
use crate::store::repo::{branch_name, crash_point, sanitize_record, Store, StoreError};
use gix::ObjectId;

/// The largest log commit and `meta.json` read: a summary holds the prompt, and no model takes a prompt of
/// this size.
const MAX_META_BYTES: u64 = 8 << 20;

/// The summary of a session, stored as `meta.json` next to the events.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Meta {
    pub id: String,
    /// The first prompt of the session.
    pub prompt: String,
    /// `provider/model`.
    pub model: String,
    /// `refs/heads/agent/<id>`.
    pub branch: String,
    pub base: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step0: Option<String>,
    pub status: Status,
    pub steps: u32,
    /// Unix seconds.
    pub created: i64,
    pub updated: i64,
    #[serde(default)]
    pub input_tokens: u64,
    #[serde(default)]
    pub output_tokens: u64,
    /// Input tokens read from the provider's cache (counted in `input_tokens` too).
    #[serde(default, skip_serializing_if = "crate::store::is_zero")]
    pub cached_tokens: u64,
    /// What the session's requests cost in USD; absent when one of them had no price (or the log predates
    /// prices), which reads as "unknown".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// How many events the ref holds.
    #[serde(default)]
    pub events: u64,
    /// The session works in the user's own work tree (`ask --here`), not in a linked checkout: `--resume`,
    /// `undo` and `discard` must never recreate or remove that directory.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub here: bool,
}

/// For `skip_serializing_if`: a zero count is left out of the JSON.
pub fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The ref that holds session `id`'s log.
pub fn log_ref(id: &str) -> String {
    format!("refs/agent/sessions/{id}")
}

/// The writer of one session's log; holds the session's lock while it lives.
pub struct SessionLog {
    pub meta: Meta,
    journal: File,
    path: PathBuf,
    /// The seq of the next event.
    next: u64,
    /// Whether the journal holds writes not yet made durable: a sync with nothing to make durable is a
    /// disk flush that guards nothing (a new session's first fold, issue 29).
    unsynced: bool,
}

impl SessionLog {
    /// Appends one event (a JSON object) to the journal and makes it durable. O(event).
    pub fn append(&mut self, event: serde_json::Value) -> Result<(), StoreError> {
        let mut event = match event {
            serde_json::Value::Object(map) => map,
            other => {
                let mut map = serde_json::Map::new();
                map.insert("value".into(), other);
                map
            }
        };
        event.insert("seq".into(), self.next.into());
        event.insert("ts".into(), now().into());
        // Redacted as decoded strings, then serialised (issue 22, finding 10).
        let mut event = serde_json::Value::Object(event);
        redact_value(&mut event);
        let mut line = fit_event(&mut event, MAX_EVENT_BYTES);
        line.push('\n');
        crash_point();
        // One write of the whole line: a crash leaves either the line or a torn tail that readers skip. Not
        // synced: see the module docs for when it is.
        self.journal
            .write_all(line.as_bytes())
            .map_err(StoreError::io("append to", &self.path))?;
        crash_point();
        self.next += 1;
        self.unsynced = true;
        Ok(())
    }

    /// Makes every event appended so far durable across a power loss (`fdatasync`): called after a step
    /// commit, and by [`SessionLog::fold()`].
    pub fn sync(&mut self) -> Result<(), StoreError> {
        if !self.unsynced {
            return Ok(());
        }
        self.journal
            .sync_data()
            .map_err(StoreError::io("sync", &self.path))?;
        self.unsynced = false;
        crash_point();
        Ok(())
    }

    /// The number of events written so far (folded or not).
    pub fn len(&self) -> u64 {
        self.next
    }

    pub fn is_empty(&self) -> bool {
        self.next == 0
    }

    /// Moves the journal's events and the current [`Meta`] into the ref, then empties the journal.
    pub fn fold(&mut self, store: &Store) -> Result<(), StoreError> {
        let folding = crate::sys::timings::begin();
        self.sync()?;
        self.meta.updated = now();
        store.fold_journal(&mut self.meta, &self.path)?;
        self.journal
            .set_len(0)
            .map_err(StoreError::io("truncate", &self.path))?;
        crash_point();
        crate::sys::timings::end("fold", folding, &[]);
        Ok(())
    }
}

/// One session's log as read back: the summary and every complete event, oldest first.
pub struct LogContents {
    pub meta: Meta,
    pub events: Vec<serde_json::Value>,
    /// Commit of the log ref.
    pub commit: ObjectId,
}

impl Store {
    fn journal_path(&self, id: &str) -> PathBuf {
        self.common_dir()
            .join("agent")
            .join("journal")
            .join(format!("{id}.jsonl"))
    }

    /// Starts the log of a new session: an empty journal, locked, and a first fold so `log` lists the session
    /// at once (with status `running`).
    pub fn create_log(&self, mut meta: Meta) -> Result<SessionLog, StoreError> {
        let path = self.journal_path(&meta.id);
        let journal = open_locked(&path, &meta.id)?;
        // A journal the id's claim found (a deleted session's) is emptied, and that is made durable; a new
        // one is empty already, and the first fold has nothing to sync.
        let leftover = journal.metadata().map_or(true, |m| m.len() > 0);
        journal
            .set_len(0)
            .map_err(StoreError::io("truncate", &path))?;
        meta.created = now();
        meta.updated = meta.created;
        meta.events = 0;
        let mut log = SessionLog {
            meta,
            journal,
            path,
            next: 0,
            unsynced: leftover,
        };
        log.fold(self)?;
        Ok(log)
    }

    /// Opens the log of session `id` for writing: takes its lock (failing if another process holds it) and
    /// folds what a crashed writer left in the journal.
    pub fn open_log(&self, id: &str) -> Result<SessionLog, StoreError> {
        let path = self.journal_path(id);
        let journal = open_locked(&path, id)?;
        let mut meta = self
            .read_meta(id)?
            .ok_or_else(|| StoreError::NoSession(id.to_owned()))?;
        self.fold_journal(&mut meta, &path)?;
        journal
            .set_len(0)
            .map_err(StoreError::io("truncate", &path))?;
        Ok(SessionLog {
            next: meta.events,
            meta,
            journal,
            path,
            unsynced: false,
        })
    }

    /// True while some process holds session `id`'s lock (it is running).
    pub fn log_is_locked(&self, id: &str) -> bool {
        let Ok(file) = File::open(self.journal_path(id)) else {
            return false;
        };
        crate::sys::fs::lock(&file, crate::sys::fs::Lock::TryShared).is_err()
    }

    /// The summary of session `id`, reading only `meta.json`.
    pub fn read_meta(&self, id: &str) -> Result<Option<Meta>, StoreError> {
        let Some(commit) = self.log_commit(id)? else {
            return Ok(None);
        };
        let mut meta = self.meta_of(commit)?;
        self.complete_step0(&mut meta);
        Ok(Some(meta))
    }

    /// Step 0 of a running session whose log does not name it yet, from its branch. A session records
    /// step 0 in its log at the end of its first turn, not as soon as it is made (a fold then would cost a
    /// pack, a ref update and a sync before the first tool can run, issue 29), so until then, or if the
    /// process died before, the branch says it: the commit right above the base, when it is step 0 of this
    /// session (`Agent-Step: 0`, `Agent-Session: <id>`). Without it a reader would take the user's own
    /// captured work for the agent's (`diff`, `accept`) and a resumed session would start from the base.
    fn complete_step0(&self, meta: &mut Meta) {
        if meta.step0.is_some() || meta.status != Status::Running {
            return;
        }
        meta.step0 = self.step0_on_branch(meta).map(|c| c.to_string());
    }

    /// See [`Store::complete_step0()`]: the first-parent chain of `agent/<id>` walked down to the base.
    fn step0_on_branch(&self, meta: &Meta) -> Option<ObjectId> {
        /// A branch with more steps than this above its base is not searched further.
        const MAX_WALK: usize = 100_000;
        let base = ObjectId::from_hex(meta.base.as_bytes()).ok()?;
        let mut at = self.branch_tip(&branch_name(&meta.id)).ok()??;
        for _ in 0..MAX_WALK {
            let commit = self.repo.find_commit(at).ok()?;
            let parent = commit.parent_ids().next()?.detach();
            if parent != base {
                at = parent;
                continue;
            }
            let message = commit.message_raw_sloppy().to_string();
            let ours = trailer(&message, "Agent-Step") == Some("0")
                && trailer(&message, "Agent-Session") == Some(meta.id.as_str());
            return ours.then_some(at);
        }
        None
    }

    /// The summary from the log commit's message (one object read, which is what keeps `log` fast), falling back
    /// to `meta.json` in its tree.
    pub(crate) fn meta_of(&self, commit: ObjectId) -> Result<Meta, StoreError> {
        // A log may be someone else's push: its objects are judged by their size before they are read, so a
        // 150 MB summary costs nothing (issue 22, finding 4).
        if self.repo.find_header(commit)?.size() > MAX_META_BYTES {
            return Err(StoreError::CorruptLog(commit, "a log commit over 8 MiB"));
        }
        let object = self.repo.find_commit(commit)?;
        let message = object.message_raw_sloppy();
        if let Some(pos) = message.find("\n\n{") {
            if let Ok(meta) = serde_json::from_slice(message[pos + 2..].trim_ascii_end()) {
                return Ok(meta);
            }
        }
        let tree = object.tree()?;
        let entry = tree
            .lookup_entry_by_path("meta.json")?
            .ok_or(StoreError::CorruptLog(commit, "no meta.json"))?;
        if self.repo.find_header(entry.object_id())?.size() > MAX_META_BYTES {
            return Err(StoreError::CorruptLog(commit, "a meta.json over 8 MiB"));
        }
        let blob = self.repo.find_object(entry.object_id())?;
        serde_json::from_slice(&blob.data).map_err(|_| StoreError::CorruptLog(commit, "meta.json"))
    }

    fn log_commit(&self, id: &str) -> Result<Option<ObjectId>, StoreError> {
        match self.repo.try_find_reference(log_ref(id).as_str())? {
            Some(mut r) => Ok(Some(r.peel_to_id()?.detach())),
            None => Ok(None),
        }
    }

    /// Every session's summary (the ids of `refs/agent/sessions/*`), newest first.
    pub fn list_sessions(&self) -> Result<Vec<Meta>, StoreError> {
        let refs = self.repo.references()?;
        let mut metas = Vec::new();
        for r in refs.prefixed("refs/agent/sessions/")? {
            let mut r = r.map_err(|e| StoreError::Git(gix::Error::from_error(e)))?;
            let id = r.peel_to_id()?.detach();
            metas.push(self.meta_of(id)?);
        }
        metas.sort_by(|a, b| b.created.cmp(&a.created).then(b.id.cmp(&a.id)));
        Ok(metas)
    }

    /// Every session's summary with who ran it: the author of its log's newest commit, which a pull keeps,
    /// so a team's sessions are told apart (`git agent stats --by author`).
    pub fn list_sessions_with_authors(&self) -> Result<Vec<(Meta, String)>, StoreError> {
        let refs = self.repo.references()?;
        let mut sessions = Vec::new();
        for r in refs.prefixed("refs/agent/sessions/")? {
            let mut r = r.map_err(|e| StoreError::Git(gix::Error::from_error(e)))?;
            let id = r.peel_to_id()?.detach();
            let commit = self.repo.find_commit(id)?;
            let author = commit
                .author()
                .map(|a| a.name.to_str_lossy().into_owned())
                .unwrap_or_default();
            sessions.push((self.meta_of(id)?, author));
        }
        Ok(sessions)
    }

    /// The id of the session `prefix` names (any unique prefix), or of the newest session started in this
    /// repository when `None`. A pulled session is only ever used when named: its creation date is whatever
    /// its author wrote, and a default must not be someone else's choice (see `store::local`).
    pub fn resolve_session(&self, prefix: Option<&str>) -> Result<String, StoreError> {
        let mut ids: Vec<String> = Vec::new();
        let refs = self.repo.references()?;
        for r in refs.prefixed("refs/agent/sessions/")? {
            let r = r.map_err(|e| StoreError::Git(gix::Error::from_error(e)))?;
            let name = r.name().as_bstr().to_string();
            ids.push(name.trim_start_matches("refs/agent/sessions/").to_owned());
        }
        let Some(prefix) = prefix else {
            let sessions = self.list_sessions()?;
            if sessions.is_empty() {
                return Err(StoreError::NoSessions);
            }
            let id = sessions
                .into_iter()
                .find(|m| self.local_session(&m.id).is_some())
                .map(|m| m.id)
                .ok_or(StoreError::NoLocalSessions)?;
            self.check_moved_here(&id)?;
            return Ok(id);
        };
        if ids.iter().any(|id| id == prefix) {
            return Ok(prefix.to_owned());
        }
        let mut found: Vec<String> = ids
            .into_iter()
            .filter(|id| id.starts_with(prefix))
            .collect();
        match found.len() {
            0 => Err(StoreError::NoSession(prefix.to_owned())),
            1 => Ok(found.remove(0)),
            _ => {
                found.sort();
                Err(StoreError::AmbiguousSession {
                    prefix: prefix.to_owned(),
                    candidates: found,
                })
            }
        }
    }

    /// The whole log of session `id`: the ref's events, then complete events still in the journal (a session
    /// that is running, or crashed before folding).
    pub fn read_log(&self, id: &str) -> Result<LogContents, StoreError> {
        let commit = self
            .log_commit(id)?
            .ok_or_else(|| StoreError::NoSession(id.to_owned()))?;
        let mut meta = self.meta_of(commit)?;
        self.complete_step0(&mut meta);
        let tree = self.repo.find_commit(commit)?.tree()?;
        let mut events = Vec::new();
        if let Some(dir) = tree.lookup_entry_by_path("events")? {
            let dir = self.repo.find_tree(dir.object_id())?;
            // Chunk names are zero-padded seq numbers, and git sorts tree entries by name: already in order.
            let mut kept = 0u64;
            for entry in dir.iter() {
                let entry = entry.map_err(|e| StoreError::Git(gix::Error::from_error(e)))?;
                let size = self.repo.find_header(entry.oid())?.size();
                // A pulled log is anyone's: its size is checked before it is read (issue 22, second
                // audit, finding 3), so a crafted 150 MB chunk cannot take `show` or a resume past 400 MB.
                if size > MAX_CHUNK_BYTES || kept + size > MAX_LOG_BYTES {
                    // A pulled log's entry names are anyone's: shown escaped, never as terminal input.
                    let name = crate::safety::quote::visible(&entry.filename().to_string());
                    eprintln!(
                        "warning: session {id}: the events in {name} ({size} bytes) are left out: a session log is read up to {MAX_CHUNK_BYTES} bytes a chunk and {MAX_LOG_BYTES} in all"
                    );
                    continue;
                }
                kept += size;
                let blob = self.repo.find_object(entry.oid())?;
                let name = entry.filename().to_string();
                let start = name.trim_end_matches(".jsonl").parse().ok();
                events.extend(lines_within_limit(id, start, &blob.data));
            }
        }
        if let Ok(bytes) = std::fs::read(self.journal_path(id)) {
            events.extend(complete_lines(&bytes, events.len() as u64).0);
        }
        Ok(LogContents {
            meta,
            events,
            commit,
        })
    }

    /// Writes an image of a session as a git blob and returns its id (hex). The log's next fold puts it in
    /// the log's tree as `images/<id>` (see [`image_entries()`]), so it is pushed, pulled and kept by `gc`
    /// with the log, and `show` and `--resume` need no copy of the original file.
    pub fn write_image(&self, bytes: &[u8]) -> Result<String, StoreError> {
        Ok(self.repo.write_blob(bytes)?.detach().to_string())
    }

    /// The bytes of an image a session's log recorded by blob id; `None` when the id is not a blob here.
    pub fn read_image(&self, blob: &str) -> Option<Vec<u8>> {
        let id = ObjectId::from_hex(blob.as_bytes()).ok()?;
        let object = self.repo.find_object(id).ok()?;
        (object.kind == gix::object::Kind::Blob).then(|| object.data.clone())
    }

    /// Deletes session `id`'s log ref and journal.
    pub fn delete_log(&self, id: &str) -> Result<(), StoreError> {
        if let Some(commit) = self.log_commit(id)? {
            let edit = RefEdit::delete(
                full_name(&log_ref(id))?,
                PreviousValue::MustExistAndMatch(Target::Object(commit)),
            );
            edit_ref(&self.repo, edit)?;
        }
        let path = self.journal_path(id);
        match std::fs::remove_file(&path) {
            Err(err) if err.kind() != std::io::ErrorKind::NotFound => {
                Err(StoreError::io("remove", path)(err))
            }
            _ => Ok(()),
        }
    }

    /// Writes the journal's complete events past `meta.events` as a new chunk plus `meta`, as one commit on
    /// the log ref (compare-and-swap). Does not touch the journal file.
    fn fold_journal(&self, meta: &mut Meta, journal: &PathBuf) -> Result<(), StoreError> {
        let mut bytes = Vec::new();
        if let Ok(mut file) = File::open(journal) {
            file.read_to_end(&mut bytes)
                .map_err(StoreError::io("read", journal))?;
        }
        let (lines, first) = complete_lines(&bytes, meta.events);
        let previous = self.log_commit(&meta.id)?;
        let base_tree = match previous {
            Some(c) => self.repo.find_commit(c)?.tree_id()?.detach(),
            None => ObjectId::empty_tree(self.repo.object_hash()),
        };
        let mut editor = self.repo.find_tree(base_tree)?.edit()?;
        if !lines.is_empty() {
            let mut chunk = Vec::new();
            for line in &lines {
                chunk.extend_from_slice(line.to_string().as_bytes());
                chunk.push(b'\n');
            }
            let blob = self.repo.write_blob(&chunk)?.detach();
            editor.upsert(format!("events/{first:010}.jsonl"), EntryKind::Blob, blob)?;
            for image in image_entries(&lines) {
                if self.repo.has_object(image) {
                    editor.upsert(format!("images/{image}"), EntryKind::Blob, image)?;
                }
            }
            meta.events = first + lines.len() as u64;
        }
        let clean =
            sanitize_record(&*meta).map_err(|_| StoreError::CorruptLog(base_tree, "meta"))?;
        let meta_json = serde_json::to_vec_pretty(&clean)
            .map_err(|_| StoreError::CorruptLog(base_tree, "meta"))?;
        let meta_blob = self.repo.write_blob(&meta_json)?;
        editor.upsert("meta.json", EntryKind::Blob, meta_blob.detach())?;
        let tree = editor.write()?.detach();
        if previous.is_some() && tree == base_tree {
            return Ok(());
        }
        // The summary goes into the message too, so `log` reads one object per session instead of three.
        let compact =
            serde_json::to_string(&clean).map_err(|_| StoreError::CorruptLog(base_tree, "meta"))?;
        let message = format!(
            "session {}: {} event{} ({})\n\n{}\n",
            meta.id,
            lines.len(),
            if lines.len() == 1 { "" } else { "s" },
            meta.status,
            compact
        );
        let commit = write_commit(&self.repo, tree, previous, &message)?;
        crash_point();
        let expected = match previous {
            Some(c) => PreviousValue::MustExistAndMatch(Target::Object(c)),
            None => PreviousValue::MustNotExist,
        };
        let reflog = format!("git-agent: session {} ({})", meta.id, meta.status);
        let edit = RefEdit::update(full_name(&log_ref(&meta.id))?, commit, expected, reflog);
        edit_ref(&self.repo, edit)?;
        crash_point();
        Ok(())
    }
}

/// The image blobs that events name (`{"type": "image", "blob": "<hex>"}`, also inside a subagent's
/// `explore` event): the log's tree must hold each, or `gc` would drop it and a push would leave it behind.
fn image_entries(lines: &[serde_json::Value]) -> Vec<ObjectId> {
    fn visit(value: &serde_json::Value, out: &mut Vec<ObjectId>) {
        if value.get("type").and_then(serde_json::Value::as_str) == Some("image") {
            if let Some(id) = value
                .get("blob")
                .and_then(serde_json::Value::as_str)
                .and_then(|hex| ObjectId::from_hex(hex.as_bytes()).ok())
            {
                out.push(id);
            }
        }
        if let Some(inner) = value.get("event") {
            visit(inner, out);
        }
    }
    let mut out = Vec::new();
    for line in lines {
        visit(line, &mut out);
    }
    out
}

/// The most bytes one chunk of a session log may have to be read: a fold writes the events since the
/// last one, whose tool results are cut long before this.
const MAX_CHUNK_BYTES: u64 = 32 << 20;
/// The most bytes of a session log's chunks kept in memory at once.
const MAX_LOG_BYTES: u64 = 256 << 20;
/// The most bytes one event line may have; a longer one is left out with a warning.
const MAX_EVENT_BYTES: usize = 4 << 20;

/// The longest string a record cut keeps whole.
const CUT_FLOOR: usize = 1024;

/// What a string cut to fit its record ends with.
fn cut_note() -> String {
    format!(
        "\n[the rest was left out: this record was longer than the {} MB a record may hold]",
        MAX_EVENT_BYTES >> 20
    )
}

/// `event` as one journal line of at most `limit` bytes. A longer one would be written and then left out
/// whole by every reader ([`lines_within_limit`]): a model's reply that ran to megabytes, a tool call's
/// arguments. So its long strings are cut in proportion, each keeping its start and saying what happened
/// ([`cut_note()`]); an event that still does not fit (a huge list of short items) keeps only its kind.
fn fit_event(event: &mut serde_json::Value, limit: usize) -> String {
    let mut line = event.to_string();
    for _ in 0..8 {
        if line.len() <= limit {
            return line;
        }
        // Aim under the limit, so that escapes and the notes rarely need a second pass.
        let keep = limit as f64 / line.len() as f64 * 0.9;
        shorten_strings(event, keep);
        line = event.to_string();
    }
    if line.len() <= limit {
        return line;
    }
    let mut stub = serde_json::Map::new();
    for key in ["type", "seq", "ts"] {
        if let Some(value) = event.get(key) {
            stub.insert(key.into(), value.clone());
        }
    }
    stub.insert("left_out_bytes".into(), line.len().into());
    serde_json::Value::Object(stub).to_string()
}

/// Cuts every string of `value` longer than [`CUT_FLOOR`] to `keep` of its length (at least the floor), where
/// that makes it shorter with the note added.
fn shorten_strings(value: &mut serde_json::Value, keep: f64) {
    use serde_json::Value;
    match value {
        Value::String(text) if text.len() > CUT_FLOOR => {
            let note = cut_note();
            let mut end = ((text.len() as f64 * keep) as usize).max(CUT_FLOOR);
            if end + note.len() >= text.len() {
                return;
            }
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            text.truncate(end);
            text.push_str(&note);
        }
        Value::Array(items) => items.iter_mut().for_each(|v| shorten_strings(v, keep)),
        Value::Object(map) => map.values_mut().for_each(|v| shorten_strings(v, keep)),
        _ => {}
    }
}

/// The events of one folded chunk of session `id` (whose first event is `start`, from its name), as
/// [`complete_lines`] reads them, but an event line over [`MAX_EVENT_BYTES`] is left out, with a warning
/// naming the session and the event's index, rather than parsed: one crafted line cannot take the reader
/// to several times its size.
fn lines_within_limit(id: &str, start: Option<u64>, bytes: &[u8]) -> Vec<serde_json::Value> {
    let warn = |index: Option<u64>, len: usize| {
        let index = index
            .or(start)
            .map_or_else(|| "?".to_owned(), |i| i.to_string());
        eprintln!(
            "warning: session {id}: event {index} has {len} bytes, more than the {MAX_EVENT_BYTES} an event may have: left out"
        );
    };
    complete_lines_within(bytes, 0, MAX_EVENT_BYTES, &warn).0
}

/// Complete, parseable JSON lines of a journal or chunk whose `seq` is at least `from`, stopping at the first
/// torn or garbled line; also the seq of the first line returned (or `from`).
fn complete_lines(bytes: &[u8], from: u64) -> (Vec<serde_json::Value>, u64) {
    complete_lines_within(bytes, from, usize::MAX, &|_, _| {})
}

/// [`complete_lines`] with lines over `limit` bytes left out unparsed: `too_long(seq it should have, its
/// length)` is told of each, and the next line's seq is taken as it comes.
fn complete_lines_within(
    bytes: &[u8],
    from: u64,
    limit: usize,
    too_long: &dyn Fn(Option<u64>, usize),
) -> (Vec<serde_json::Value>, u64) {
    let mut out = Vec::new();
    let mut first = None;
    let mut expected = None;
    for line in bytes.split_inclusive(|b| *b == b'\n') {
        let Some(line) = line.strip_suffix(b"\n") else {
            break; // torn tail: the event being written when the writer died
        };
        if line.len() > limit {
            too_long(expected, line.len());
            expected = None;
            continue;
        }
        let Ok(value) = serde_json::from_slice::<serde_json::Value>(line) else {
            break;
        };
        let seq = value
            .get("seq")
            .and_then(serde_json::Value::as_u64)
            .unwrap_or(0);
        if seq < from {
            continue; // folded already; the crash came between the ref update and the truncation
        }
        if expected.is_some_and(|e| e != seq) {
            break;
        }
        first.get_or_insert(seq);
        expected = Some(seq + 1);
        out.push(value);
    }
    (out, first.unwrap_or(from))
}

/// Opens (creating) the journal at `path` for appending and takes its exclusive lock without waiting.
fn open_locked(path: &PathBuf, id: &str) -> Result<File, StoreError> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(StoreError::io("create", dir))?;
    }
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .read(true)
        .open(path)
        .map_err(StoreError::io("open", path))?;
    let since = std::time::Instant::now();
    while crate::sys::fs::lock(&file, crate::sys::fs::Lock::TryExclusive).is_err() {
        if since.elapsed() >= BUSY_WAIT {
            return Err(StoreError::SessionBusy(id.to_owned()));
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    Ok(file)
}

/// How long a session's journal lock is waited for before the session is taken as busy. The helpers that
/// start a command in its namespaces are forks of the agent, and until they close what they inherited they
/// share the journal's lock: an agent killed in that window (`kill -9` right after a command started) leaves
/// the lock held until they notice and exit, which takes milliseconds, and longer on a loaded host.
const BUSY_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Unix seconds now.
pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn torn_and_folded_lines_are_skipped() {
        let text = b"{\"seq\":0}\n{\"seq\":1}\n{\"seq\":2}\n{\"seq\":3";
        let (lines, first) = complete_lines(text, 1);
        assert_eq!(first, 1);
        assert_eq!(lines.len(), 2);
        let (lines, _) = complete_lines(b"{\"seq\":0}\n{garbage\n{\"seq\":2}\n", 0);
        assert_eq!(lines.len(), 1);
    }

    /// A test repository and a new, empty log of session `id` in it.
    fn new_log(repo: &str, id: &str) -> (crate::store::test_repo::TestRepo, SessionLog) {
        let repo = crate::store::test_repo::TestRepo::with_commit(repo);
        let meta = Meta {
            id: id.into(),
            ..Meta::default()
        };
        let log = repo.store().create_log(meta).unwrap();
        (repo, log)
    }

    #[test]
    fn an_event_longer_than_a_record_is_cut_to_fit_and_read_back() {
        let (repo, mut log) = new_log("log-fit", "fit123");
        let store = repo.store();
        // A reply of 10 MB (with characters of two and three bytes, so cuts must land on their
        // boundaries), beside a short field that must stay whole.
        let long = "é€x".repeat(10 << 20 >> 3);
        let calls: Vec<String> = (0..3)
            .map(|i| format!("call {i}: {}", "y".repeat(2 << 20)))
            .collect();
        log.append(
            serde_json::json!({"type": "reply", "content": long, "name": "run", "calls": calls}),
        )
        .unwrap();
        // Many short items cannot be cut: the event keeps only its kind.
        let many: Vec<u32> = (0..2_000_000).collect();
        log.append(serde_json::json!({"type": "list", "items": many}))
            .unwrap();
        log.fold(&store).unwrap();
        let events = store.read_log("fit123").unwrap().events;
        assert_eq!(events.len(), 2, "both events were read back");
        let reply = &events[0];
        assert_eq!(reply["type"], "reply");
        assert_eq!(reply["name"], "run");
        let content = reply["content"].as_str().unwrap();
        assert!(content.starts_with("é€xé€x") && content.ends_with(&cut_note()));
        assert!(content.len() < long.len() / 2);
        for (i, call) in reply["calls"].as_array().unwrap().iter().enumerate() {
            let call = call.as_str().unwrap();
            assert!(call.starts_with(&format!("call {i}: yyy")) && call.ends_with(&cut_note()));
        }
        assert!(reply.to_string().len() <= MAX_EVENT_BYTES);
        assert_eq!(events[1]["type"], "list");
        assert!(events[1].get("items").is_none());
        assert!(events[1]["left_out_bytes"].as_u64().unwrap() > MAX_EVENT_BYTES as u64);
        // Many strings a little over the floor are not made longer by notes: the event keeps its kind.
        let mut near: serde_json::Value =
            serde_json::json!({"type": "list", "items": vec!["z".repeat(CUT_FLOOR + 10); 5000]});
        let line = fit_event(&mut near, MAX_EVENT_BYTES);
        assert!(
            line.len() < 200 && line.contains("left_out_bytes"),
            "{line}"
        );
        // What fits is written as it is.
        let mut small = serde_json::json!({"type": "text", "content": "x".repeat(5000)});
        let line = fit_event(&mut small, MAX_EVENT_BYTES);
        assert_eq!(line, small.to_string());
        assert_eq!(small["content"].as_str().unwrap().len(), 5000);
    }

    #[test]
    fn only_a_journal_with_new_writes_is_synced() {
        let (repo, mut log) = new_log("log-sync", "abc123");
        let store = repo.store();
        // A new session's journal is empty: its first fold had nothing to make durable.
        assert!(!log.unsynced);
        log.append(serde_json::json!({"type": "text"})).unwrap();
        assert!(log.unsynced);
        log.fold(&store).unwrap();
        assert!(!log.unsynced);
        assert_eq!(store.read_log("abc123").unwrap().events.len(), 1);
    }
}
