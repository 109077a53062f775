//! The settings of skills and of the explore subagent: `explore_model` and `explore_max_steps` at the top level,
//! and the `[skills]` table (how much of the system prompt the skill catalog may take).
//!
//! Kept apart from the other keys so the parser of each concern stays small: `file.rs` hands these keys here.

use toml_edit::Item;

use super::error::ConfigError;
use super::syntax::{span_of, Ctx, KeyType, Span};

/// How many skills the system prompt lists by default.
pub const DEFAULT_MAX_LISTED: u64 = 50;
/// How many bytes the skill catalog in the system prompt may take by default.
pub const DEFAULT_MAX_BYTES: u64 = 8 * 1024;
/// Model requests one explore call may make by default.
pub const DEFAULT_EXPLORE_STEPS: u32 = 15;

const SKILLS_KEYS: &str = "max_listed, max_bytes";

/// The `[skills]` table.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SkillsConfig {
    pub max_listed: Option<u64>,
    pub max_bytes: Option<u64>,
}

/// `explore_model` and `explore_max_steps`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExploreConfig {
    /// `provider/model` for the explore subagent (a cheaper one, typically); the session's model if unset.
    pub model: Option<String>,
    pub max_steps: Option<u32>,
}

/// The caps of the skill catalog in the system prompt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CatalogCaps {
    pub max_listed: usize,
    pub max_bytes: usize,
}

/// The type of a key of this module at a dotted path, for `config get|set`.
pub fn key_type(path: &[&str]) -> Option<KeyType> {
    match path {
        ["explore_model"] => Some(KeyType::String),
        ["explore_max_steps"] => Some(KeyType::Count),
        ["skills", "max_listed" | "max_bytes"] => Some(KeyType::Count),
        _ => None,
    }
}

impl Ctx<'_> {
    /// Reads a top-level key of this module into `explore` / `skills`; `false` when it is not one of ours.
    pub(super) fn skills_key(
        &self,
        explore: &mut ExploreConfig,
        skills: &mut SkillsConfig,
        key: &str,
        item: &Item,
        span: Span,
    ) -> Result<bool, ConfigError> {
        match key {
            "explore_model" => explore.model = Some(self.string(item, key, span)?),
            "explore_max_steps" => explore.max_steps = Some(self.small_count(item, key, span)?),
            "skills" => {
                let table = self.table(item, key, span)?;
                for (name, item) in table.iter() {
                    let span = span_of(table, name, item);
                    let full = format!("skills.{name}");
                    match name {
                        "max_listed" => skills.max_listed = Some(self.count(item, &full, span)?),
                        "max_bytes" => skills.max_bytes = Some(self.count(item, &full, span)?),
                        _ => return Err(self.unknown(&full, span, SKILLS_KEYS)),
                    }
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    }
}

impl SkillsConfig {
    /// The caps of the skill catalog: each key from this table (the repository's file), else `user`'s, else
    /// the default.
    pub fn caps_over(self, user: SkillsConfig) -> CatalogCaps {
        let repo = self;
        let pick = |r: Option<u64>, u: Option<u64>, d: u64| {
            usize::try_from(r.or(u).unwrap_or(d)).unwrap_or(usize::MAX)
        };
        CatalogCaps {
            max_listed: pick(repo.max_listed, user.max_listed, DEFAULT_MAX_LISTED),
            max_bytes: pick(repo.max_bytes, user.max_bytes, DEFAULT_MAX_BYTES),
        }
    }
}

impl ExploreConfig {
    /// The explore subagent's model (`None`: the session's) and its request budget per call: this table (the
    /// repository's file) over `user`'s.
    pub fn over(&self, user: &ExploreConfig) -> (Option<String>, u32) {
        let model = self.model.clone().or(user.model.clone());
        let steps = self
            .max_steps
            .or(user.max_steps)
            .unwrap_or(DEFAULT_EXPLORE_STEPS);
        (model, steps)
    }
}

#[cfg(test)]
mod tests;
