//! The memory index: `index/<aa>.jsonl`, one JSON line per entry of `entries/<aa>/`, holding what retrieval
//! ranks on and what `memory list` prints. Lines are sorted by id so a shard's blob depends only on its
//! entries (two writers that reach the same state write the same blob).

use serde::{Deserialize, Serialize};

use super::entry::{Entry, EntryStatus, Kind};

/// One entry as the index holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub id: String,
    pub status: EntryStatus,
    pub kind: Kind,
    pub confidence: f64,
    #[serde(default)]
    pub uses: u32,
    /// Unix seconds.
    #[serde(default)]
    pub updated: i64,
    #[serde(default)]
    pub tags: Vec<String>,
    pub text: String,
}

impl Summary {
    pub fn of(entry: &Entry) -> Summary {
        Summary {
            id: entry.id.clone(),
            status: entry.status,
            kind: entry.kind,
            confidence: entry.confidence,
            uses: entry.uses,
            updated: entry.updated,
            tags: entry.tags.clone(),
            text: entry.text.clone(),
        }
    }
}

/// A change to one shard.
pub(super) enum Patch {
    Put(Summary),
    Remove(String),
}

/// The path of a shard's blob.
pub(super) fn shard_path(shard: &str) -> String {
    format!("index/{shard}.jsonl")
}

/// `lines` with `patches` applied, sorted by id.
pub(super) fn patched(mut lines: Vec<Summary>, patches: Vec<Patch>) -> Vec<Summary> {
    for patch in patches {
        match patch {
            Patch::Put(line) => match lines.iter_mut().find(|l| l.id == line.id) {
                Some(old) => *old = line,
                None => lines.push(line),
            },
            Patch::Remove(id) => lines.retain(|l| l.id != id),
        }
    }
    lines.sort_by(|a, b| a.id.cmp(&b.id));
    lines
}

/// A shard's lines; a line that does not parse is skipped (the entry file is the truth, and the next write
/// of that shard rewrites the line from it).
pub(super) fn parse(bytes: &[u8]) -> Vec<Summary> {
    bytes
        .split(|b| *b == b'\n')
        .filter(|line| !line.is_empty())
        .filter_map(|line| serde_json::from_slice(line).ok())
        .collect()
}

pub(super) fn to_bytes(lines: &[Summary]) -> Vec<u8> {
    let mut out = Vec::new();
    for line in lines {
        // Plain data with string keys: serialising cannot fail.
        if let Ok(json) = serde_json::to_vec(line) {
            out.extend_from_slice(&json);
            out.push(b'\n');
        }
    }
    out
}
