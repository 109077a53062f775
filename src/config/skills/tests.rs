//! The `skills` section read through the whole file parser, as `Settings::load` reads it.

use super::super::file::{parse, Scope};
use super::*;
use crate::config::Settings;
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
        err.contains("/u/c.toml:2: skills.max: unknown key (known keys: max_listed, max_bytes)"),
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
