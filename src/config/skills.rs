//! The settings of skills and of the explore subagent: `explore_model` and `explore_max_steps` at the top level,
//! and the `[skills]` table (how much of the system prompt the skill catalog may take).
//!
//! Kept apart from the other keys so the parser of each concern stays small: `file.rs` hands these keys here.

use toml_edit::Item;

use super::file::{span_of, Ctx, KeyType, Span};
use super::{ConfigError, Settings};

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

impl Settings {
    /// The caps of the skill catalog: each key from the repository's file, else the user's, else the default.
    pub fn catalog_caps(&self) -> CatalogCaps {
        let (repo, user) = (self.repo.skills, self.user.skills);
        let pick = |r: Option<u64>, u: Option<u64>, d: u64| {
            usize::try_from(r.or(u).unwrap_or(d)).unwrap_or(usize::MAX)
        };
        CatalogCaps {
            max_listed: pick(repo.max_listed, user.max_listed, DEFAULT_MAX_LISTED),
            max_bytes: pick(repo.max_bytes, user.max_bytes, DEFAULT_MAX_BYTES),
        }
    }

    /// The explore subagent's model (`None`: the session's) and its request budget per call.
    pub fn explore(&self) -> (Option<String>, u32) {
        let model = self
            .repo
            .explore
            .model
            .clone()
            .or(self.user.explore.model.clone());
        let steps = self
            .repo
            .explore
            .max_steps
            .or(self.user.explore.max_steps)
            .unwrap_or(DEFAULT_EXPLORE_STEPS);
        (model, steps)
    }
}

#[cfg(test)]
mod tests {
    use super::super::file::{parse, Scope};
    use super::*;
    use std::path::Path;

    #[test]
    fn keys_are_read_checked_and_merged_repo_over_user() {
        let user = parse(
            Path::new("/u/config.toml"),
            "explore_model = \"openai/mini\"\nexplore_max_steps = 8\n[skills]\nmax_listed = 10\n",
            Scope::User,
        )
        .unwrap();
        let repo = parse(
            Path::new("/r/.git-agent.toml"),
            "[skills]\nmax_bytes = 2000\n",
            Scope::Repo,
        )
        .unwrap();
        let settings = Settings { user, repo };
        assert_eq!(settings.explore(), (Some("openai/mini".into()), 8));
        assert_eq!(
            settings.catalog_caps(),
            CatalogCaps {
                max_listed: 10,
                max_bytes: 2000
            }
        );
        assert_eq!(Settings::default().explore(), (None, DEFAULT_EXPLORE_STEPS));
        let err = parse(Path::new("/u/c.toml"), "[skills]\nmax = 1\n", Scope::User)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(
                "/u/c.toml:2: skills.max: unknown key (known keys: max_listed, max_bytes)"
            ),
            "{err}"
        );
        let err = parse(
            Path::new("/u/c.toml"),
            "explore_max_steps = 0\n",
            Scope::User,
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("explore_max_steps: expected a whole number of at least 1"),
            "{err}"
        );
        assert_eq!(key_type(&["skills", "max_bytes"]), Some(KeyType::Count));
        assert_eq!(
            super::super::file::key_type(&["explore_model"]),
            Some(KeyType::String)
        );
    }
}
