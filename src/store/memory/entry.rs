//! The records of project memory: an entry, what it is about, where it came from, its versions, and where it
//! lives in the tree. Plain data the reading, checking and merging code all share.

use serde::{Deserialize, Serialize};

use crate::store::{sanitize, sanitize_record, StoreError};

/// The ref that holds project memory.
pub const MEMORY_REF: &str = "refs/agent/memory";

/// What an entry is about.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// What the project is or has (`the CLI lives in src/cli`).
    #[default]
    Fact,
    /// How things are done here (`errors are thiserror enums`).
    Convention,
    /// What goes wrong (`tests fail unless fixtures are built first`).
    Pitfall,
    /// A command that works (`make check` runs lint and tests).
    Command,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Fact => "fact",
            Kind::Convention => "convention",
            Kind::Pitfall => "pitfall",
            Kind::Command => "command",
        }
    }

    pub fn parse(text: &str) -> Option<Kind> {
        match text.trim() {
            "fact" => Some(Kind::Fact),
            "convention" => Some(Kind::Convention),
            "pitfall" => Some(Kind::Pitfall),
            "command" => Some(Kind::Command),
            _ => None,
        }
    }
}

/// Where an entry stands.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryStatus {
    /// Injected when relevant.
    #[default]
    Active,
    /// Forgotten (by hand, or because its confidence fell below the threshold): kept for the audit trail and
    /// `restore`, never injected.
    Archived,
    /// Edited on two sides of a pull: both versions are kept until someone picks (`memory edit`); not injected.
    NeedsReview,
}

impl EntryStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            EntryStatus::Active => "active",
            EntryStatus::Archived => "archived",
            EntryStatus::NeedsReview => "needs_review",
        }
    }
}

/// Where an entry came from: a session's `remember` (its id, the step and commit it was at) or a person
/// (`git agent memory add`: no session, the user's HEAD as the commit).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Source {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// Why it is worth remembering, as the model or the person said.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub why: String,
    /// Unix seconds.
    #[serde(default)]
    pub at: i64,
}

/// The other side's version of an entry both sides of a pull edited.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Version {
    pub text: String,
    #[serde(default)]
    pub tags: Vec<String>,
    #[serde(default)]
    pub kind: Kind,
    #[serde(default)]
    pub updated: i64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<Source>,
}

/// One memory entry: the file `entries/<aa>/<id>.json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub id: String,
    pub text: String,
    #[serde(default)]
    pub tags: Vec<String>,
    #[serde(default)]
    pub kind: Kind,
    /// Every session (or person) that contributed it; a near-duplicate adds its source here.
    #[serde(default)]
    pub sources: Vec<Source>,
    /// Unix seconds.
    #[serde(default)]
    pub created: i64,
    #[serde(default)]
    pub updated: i64,
    /// 0..1; below the archive threshold an entry is archived.
    pub confidence: f64,
    /// Sessions it was injected into.
    #[serde(default)]
    pub uses: u32,
    /// Of those, sessions that completed.
    #[serde(default)]
    pub successes: u32,
    /// ... and sessions that were blocked or stopped unfinished.
    #[serde(default)]
    pub failures: u32,
    #[serde(default)]
    pub status: EntryStatus,
    /// Why it was archived (`forget --reason`, or the confidence that fell below the threshold).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// For `needs_review`: the other side's versions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub versions: Vec<Version>,
}

impl Entry {
    /// The entry with every text field redacted: the one way text enters the memory ref. Every string,
    /// decoded ([`super::sanitize_record()`]); the named fields alone when the entry does not round-trip
    /// through JSON (a NaN confidence).
    pub(super) fn sanitized(&self) -> Entry {
        if let Ok(entry) = sanitize_record(self) {
            return entry;
        }
        let mut entry = self.clone();
        entry.text = sanitize(&entry.text);
        entry.reason = sanitize(&entry.reason);
        entry.tags = entry.tags.iter().map(|t| sanitize(t)).collect();
        for source in &mut entry.sources {
            source.why = sanitize(&source.why);
        }
        for version in &mut entry.versions {
            version.text = sanitize(&version.text);
            version.tags = version.tags.iter().map(|t| sanitize(t)).collect();
            for source in &mut version.sources {
                source.why = sanitize(&source.why);
            }
        }
        entry
    }

    /// The file's bytes: pretty JSON and a final newline.
    pub(super) fn to_bytes(&self) -> Vec<u8> {
        // Serialising plain data with string keys cannot fail.
        let mut bytes = serde_json::to_vec_pretty(self).unwrap_or_default();
        bytes.push(b'\n');
        bytes
    }
}

/// A confidence rounded to two decimals, clamped to 0..1, so files and commit messages agree on its value.
pub fn round_confidence(value: f64) -> f64 {
    if value.is_nan() {
        return 0.0;
    }
    (value.clamp(0.0, 1.0) * 100.0).round() / 100.0
}

/// The path of entry `id` in the memory tree.
pub fn entry_path(id: &str) -> String {
    format!("entries/{}/{id}.json", shard_of(id))
}

/// The fan-out directory of `id`: its first two characters.
pub(super) fn shard_of(id: &str) -> &str {
    id.get(..2).unwrap_or(id)
}

/// An id as entries are named: 4 to 40 lowercase hex characters.
pub fn is_entry_id(id: &str) -> bool {
    (4..=40).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Parses an entry file; its id is the file's name, whatever the file says.
pub(super) fn parse_entry(bytes: &[u8], id: &str) -> Result<Entry, StoreError> {
    let mut entry: Entry =
        serde_json::from_slice(bytes).map_err(|source| StoreError::InvalidMemoryEntry {
            path: entry_path(id),
            id: id.to_owned(),
            source,
        })?;
    entry.id = id.to_owned();
    Ok(entry)
}
