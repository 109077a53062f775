//! The skills store's ref, limits and counts: what both the store ([`super`]) and the skill sources
//! ([`super::sources`]) read, in a file of its own so neither needs the other for them.

use serde::{Deserialize, Serialize};

/// The ref holding the skills.
pub const SKILLS_REF: &str = "refs/agent/skills";
/// The most files one stored skill may have (a skill is instructions, scripts and a few assets).
pub const MAX_FILES: usize = 500;
/// The most bytes one stored skill may have, all files together.
pub const MAX_BYTES: u64 = 8 << 20;

/// How often a skill was used, and how the sessions that used it ended.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stats {
    #[serde(default)]
    pub uses: u64,
    /// Uses in turns that ended `done`.
    #[serde(default)]
    pub successes: u64,
    /// Uses in turns that stopped unfinished or failed.
    #[serde(default)]
    pub failures: u64,
    /// Unix seconds of the last use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_used: Option<i64>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub last_session: String,
}
