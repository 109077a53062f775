//! Memory's write policy: how a proposal becomes an entry, and how a session's outcome moves the confidence
//! of the entries it was given.
//!
//! - A proposal (the model's `remember`, `git agent memory add`, `memory accept`) becomes a new entry unless a
//!   near-duplicate exists ([`super::rank::near_duplicate`]); then that entry takes the new source (both are
//!   kept) and a little confidence, and no second entry appears. A near-duplicate of a forgotten entry is not
//!   brought back: the user said no. A session's proposal already recorded as a source is skipped, so
//!   `memory accept` may be run twice.
//! - A session that completed raises the confidence of the entries it was given by 0.10, one that was blocked
//!   or stopped unfinished lowers it by 0.15 (a wrong entry costs more than a right one earns); below the
//!   threshold (`memory.archive_below`) an entry is archived, so it is no longer injected. Either way `uses`
//!   counts the session.
//!
//! Every decision is made inside [`Store::update_memory`]'s compare-and-swap, on the memory it replaces.

use crate::store::memory::{Entry, EntryStatus, Kind, MemoryEdit, Source};
use crate::store::session_log::now;
use crate::store::{Store, StoreError};

use super::rank::{near_duplicate, term_set};

/// The confidence of an entry a session proposed.
pub const PROPOSED_CONFIDENCE: f64 = 0.5;
/// The confidence of an entry a person added: they know.
pub const ADDED_CONFIDENCE: f64 = 0.7;
/// What a completed session adds to the confidence of each entry it was given.
const SUCCESS_STEP: f64 = 0.10;
/// What a blocked or unfinished session takes away.
const FAILURE_STEP: f64 = 0.15;
/// What a near-duplicate proposal adds to the entry it repeats.
const REPEAT_STEP: f64 = 0.05;
/// Longest entry text: an entry is a fact, not a document (it is injected into prompts).
pub const MAX_TEXT: usize = 600;

/// Something to remember, checked and normalised.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proposal {
    pub text: String,
    pub tags: Vec<String>,
    pub kind: Kind,
    pub why: String,
}

impl Proposal {
    /// A proposal from its parts, or what is wrong with it in words the model (or the user) can act on.
    pub fn new(text: &str, tags: &[String], kind: Kind, why: &str) -> Result<Proposal, String> {
        let text = text.trim();
        if text.is_empty() {
            return Err(
                "the text to remember is empty: one or two sentences that stand on their own"
                    .into(),
            );
        }
        if text.chars().count() > MAX_TEXT {
            return Err(format!(
                "the text is {} characters; keep an entry under {MAX_TEXT}: one fact, in a sentence or two",
                text.chars().count()
            ));
        }
        let mut clean: Vec<String> = Vec::new();
        for tag in tags {
            let tag = tag.trim().trim_start_matches('#').to_lowercase();
            if tag.is_empty() || clean.contains(&tag) {
                continue;
            }
            if tag.chars().count() > 40 || tag.contains(char::is_whitespace) {
                return Err(format!("tag {tag:?} is not a keyword: use one word (or-hyphenated), at most 40 characters"));
            }
            clean.push(tag);
        }
        if clean.len() > 8 {
            return Err("at most 8 tags: a few keywords the entry is about".into());
        }
        Ok(Proposal {
            text: text.to_owned(),
            tags: clean,
            kind,
            why: why.trim().to_owned(),
        })
    }

    /// The `remember` tool's arguments (`text`, `why`, optional `tags` and `kind`).
    pub fn from_args(args: &serde_json::Value) -> Result<Proposal, String> {
        let text = args
            .get("text")
            .and_then(|t| t.as_str())
            .ok_or("missing required argument `text`: the fact to remember")?;
        let why = args
            .get("why")
            .and_then(|w| w.as_str())
            .filter(|w| !w.trim().is_empty())
            .ok_or("missing required argument `why`: how you know it (what you saw or ran)")?;
        let kind = match args.get("kind").and_then(|k| k.as_str()) {
            None => Kind::Fact,
            Some(k) => Kind::parse(k)
                .ok_or("`kind` must be \"fact\", \"convention\", \"pitfall\" or \"command\"")?,
        };
        let tags: Vec<String> = match args.get("tags") {
            None | Some(serde_json::Value::Null) => Vec::new(),
            Some(serde_json::Value::Array(items)) => items
                .iter()
                .map(|t| t.as_str().map(str::to_owned))
                .collect::<Option<_>>()
                .ok_or("`tags` must be an array of strings")?,
            Some(_) => return Err("`tags` must be an array of strings".into()),
        };
        Proposal::new(text, &tags, kind, why)
    }
}

/// What became of a proposal.
#[derive(Debug, Clone, PartialEq)]
pub enum Written {
    Added(Entry),
    /// A near-duplicate took the proposal's source.
    Updated(Entry),
    /// Not written: `reason` says why (it repeats a forgotten entry, or this session's source is already on it).
    Skipped {
        entry: Entry,
        reason: &'static str,
    },
}

impl Written {
    /// `added`, `updated` or `skipped`, as the log and the events say it.
    pub fn action(&self) -> &'static str {
        match self {
            Written::Added(_) => "added",
            Written::Updated(_) => "updated",
            Written::Skipped { .. } => "skipped",
        }
    }

    pub fn entry(&self) -> &Entry {
        match self {
            Written::Added(e) | Written::Updated(e) | Written::Skipped { entry: e, .. } => e,
        }
    }
}

/// Writes `proposal` into memory (a new entry, or its near-duplicate updated): one commit.
pub fn remember(
    store: &Store,
    proposal: &Proposal,
    source: Source,
    confidence: f64,
) -> Result<Written, StoreError> {
    let terms = term_set(&proposal.text);
    let mut outcome = None;
    store.update_memory(|view| {
        let now = now();
        let similar = view
            .summaries()?
            .iter()
            .find(|s| near_duplicate(&terms, &term_set(&s.text)))
            .map(|s| s.id.clone());
        let existing = match similar {
            Some(id) => view.entry(&id)?,
            None => None,
        };
        let Some(mut entry) = existing else {
            let id = view.new_id()?;
            let entry = Entry {
                id: id.clone(),
                text: proposal.text.clone(),
                tags: proposal.tags.clone(),
                kind: proposal.kind,
                sources: vec![source.clone()],
                created: now,
                updated: now,
                confidence,
                ..Entry::default()
            };
            let message = format!(
                "remember {id}: {}\n\n{}{}",
                subject(&proposal.text),
                why_line(&proposal.why),
                source_line(&source)
            );
            outcome = Some(Written::Added(entry.clone()));
            return Ok(Some(MemoryEdit {
                message,
                put: vec![entry],
                remove: vec![],
            }));
        };
        if entry.status == EntryStatus::Archived {
            outcome = Some(Written::Skipped {
                entry,
                reason: "it repeats a forgotten entry",
            });
            return Ok(None);
        }
        if source.session.is_some() && entry.sources.iter().any(|s| s.session == source.session) {
            outcome = Some(Written::Skipped {
                entry,
                reason: "this session's source is already on it",
            });
            return Ok(None);
        }
        let old = entry.confidence;
        entry.sources.push(source.clone());
        for tag in &proposal.tags {
            if !entry.tags.contains(tag) {
                entry.tags.push(tag.clone());
            }
        }
        entry.updated = now;
        entry.confidence = crate::store::memory::round_confidence(old + REPEAT_STEP);
        let message = format!(
            "remember {}: seen again ({} sources), confidence {old:.2} -> {:.2}\n\nnear-duplicate: {}\n{}{}",
            entry.id,
            entry.sources.len(),
            entry.confidence,
            subject(&proposal.text),
            why_line(&proposal.why),
            source_line(&source)
        );
        outcome = Some(Written::Updated(entry.clone()));
        Ok(Some(MemoryEdit {
            message,
            put: vec![entry],
            remove: vec![],
        }))
    })?;
    outcome.ok_or(StoreError::MemoryWriteUndecided)
}

/// How a session that used memory ended, as far as its entries are concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionEnd {
    Completed,
    /// Blocked, or stopped unfinished by a budget or a loop guard.
    Failed,
    /// The user stopped it: says nothing about the entries, but they were used.
    Interrupted,
}

impl SessionEnd {
    fn word(self) -> &'static str {
        match self {
            SessionEnd::Completed => "completed",
            SessionEnd::Failed => "failed",
            SessionEnd::Interrupted => "interrupted",
        }
    }
}

/// Counts the use of entries `ids` by session `session` and moves their confidence by its outcome; archives
/// those that fall below `archive_below`. One commit; returns its message lines (nothing when none of the
/// entries exists any more).
pub fn settle(
    store: &Store,
    ids: &[String],
    outcome: SessionEnd,
    session: &str,
    archive_below: f64,
) -> Result<Vec<String>, StoreError> {
    let mut lines = Vec::new();
    store.update_memory(|view| {
        lines.clear();
        let mut put = Vec::new();
        for id in ids {
            let Some(mut entry) = view.entry(id)? else {
                continue;
            };
            let old = entry.confidence;
            entry.uses += 1;
            let delta = match outcome {
                SessionEnd::Completed => {
                    entry.successes += 1;
                    SUCCESS_STEP
                }
                SessionEnd::Failed => {
                    entry.failures += 1;
                    -FAILURE_STEP
                }
                SessionEnd::Interrupted => 0.0,
            };
            entry.confidence = crate::store::memory::round_confidence(old + delta);
            let word = outcome.word();
            lines.push(match outcome {
                SessionEnd::Interrupted => format!("use {id} in {session} ({word})"),
                _ => format!(
                    "confidence {id} {old:.2} -> {:.2} after {session} ({word})",
                    entry.confidence
                ),
            });
            if entry.confidence < archive_below && entry.status == EntryStatus::Active {
                entry.status = EntryStatus::Archived;
                entry.reason = format!(
                    "confidence {:.2} fell below {archive_below:.2} after {session} ({word})",
                    entry.confidence
                );
                lines.push(format!("archive {id}: {}", entry.reason));
            }
            put.push(entry);
        }
        if put.is_empty() {
            return Ok(None);
        }
        let message = if lines.len() == 1 {
            format!("{}\n", lines[0])
        } else {
            format!(
                "confidence of {} entr{} after {session} ({})\n\n{}\n",
                put.len(),
                if put.len() == 1 { "y" } else { "ies" },
                outcome.word(),
                lines.join("\n")
            )
        };
        Ok(Some(MemoryEdit {
            message,
            put,
            remove: vec![],
        }))
    })?;
    Ok(lines)
}

/// The proposals recorded in session `id`'s log, written as [`remember`] writes them (whatever the session's
/// status: accepting is the user's decision). Safe to run twice.
pub fn accept(store: &Store, id: &str) -> Result<Vec<Written>, StoreError> {
    let log = store.read_log(id)?;
    let mut out = Vec::new();
    for (value, event) in log.events.iter().flat_map(|value| {
        super::super::journal::decode(value)
            .into_iter()
            .map(move |e| (value, e))
    }) {
        let crate::protocol::Event::MemoryProposal {
            text,
            tags,
            kind,
            why,
            step,
            commit,
        } = event
        else {
            continue;
        };
        let kind = Kind::parse(&kind).unwrap_or_default();
        // Checked when it was proposed; a log edited since is checked again.
        let Ok(proposal) = Proposal::new(&text, &tags, kind, &why) else {
            continue;
        };
        let source = Source {
            session: Some(id.to_owned()),
            step: Some(step),
            commit: Some(commit).filter(|c| !c.is_empty()),
            why: proposal.why.clone(),
            at: value.get("ts").and_then(|t| t.as_i64()).unwrap_or_else(now),
        };
        out.push(remember(store, &proposal, source, PROPOSED_CONFIDENCE)?);
    }
    Ok(out)
}

/// The first line of `text`, cut to 72 characters, for a commit subject.
fn subject(text: &str) -> String {
    let first = text.lines().next().unwrap_or_default().trim();
    if first.chars().count() > 72 {
        format!("{}…", first.chars().take(71).collect::<String>())
    } else {
        first.to_owned()
    }
}

fn why_line(why: &str) -> String {
    if why.is_empty() {
        String::new()
    } else {
        format!("why: {why}\n")
    }
}

fn source_line(source: &Source) -> String {
    match (&source.session, source.step) {
        (Some(session), Some(step)) => format!("source: session {session}, step {step}\n"),
        (Some(session), None) => format!("source: session {session}\n"),
        _ => match &source.commit {
            Some(commit) => format!(
                "source: added by hand at {}\n",
                commit.get(..7).unwrap_or(commit)
            ),
            None => "source: added by hand\n".into(),
        },
    }
}
