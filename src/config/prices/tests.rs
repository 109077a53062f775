//! The `prices` section read through the whole file parser, as `Settings::load` reads it.

use super::*;
use crate::config::Settings;

#[test]
fn cost_takes_cached_tokens_out_of_the_input() {
    let price = Price::new(2.0, 0.5, 8.0);
    let usage = Usage {
        input_tokens: 1_000_000,
        output_tokens: 500_000,
        cached_tokens: 400_000,
    };
    let cost = price.cost(&usage);
    assert!((cost - (1.2 + 0.2 + 4.0)).abs() < 1e-9, "{cost}");
}

#[test]
fn dated_snapshots_cost_what_their_model_costs_and_nothing_is_guessed() {
    let sonnet = builtin("anthropic", "claude-sonnet-4-5-20250929");
    assert_eq!(sonnet, builtin("anthropic", "claude-sonnet-4-5"));
    assert!(sonnet.is_some());
    assert_eq!(
        builtin("openai", "gpt-4.1-2025-04-14"),
        builtin("openai", "gpt-4.1")
    );
    assert_eq!(builtin("openai", "gpt-5-pro"), None);
    assert_eq!(builtin("openrouter", "gpt-4.1"), None);
    assert_eq!(
        builtin("ollama", "qwen3:8b"),
        Some(Price::new(0.0, 0.0, 0.0))
    );
}

#[test]
fn prices_come_from_the_users_file_only_and_override_the_table() {
    use std::path::Path;
    let text = "[prices.\"openai/gpt-4.1\"]\ninput = 1\noutput = 4.5\n";
    let user = super::super::file::parse(Path::new("u.toml"), text, Scope::User).unwrap();
    assert_eq!(
        user.prices,
        [("openai/gpt-4.1".to_owned(), Price::new(1.0, 1.0, 4.5))]
    );
    let settings = Settings {
        user,
        ..Settings::default()
    };
    assert_eq!(
        settings.price("openai", "gpt-4.1"),
        Some(Price::new(1.0, 1.0, 4.5))
    );
    assert_eq!(
        settings.price("openai", "gpt-4o"),
        builtin("openai", "gpt-4o")
    );
    assert_eq!(settings.price("openai", "mystery"), None);
    let repo = super::super::file::parse(Path::new(".git-agent.toml"), text, Scope::Repo);
    assert!(repo
        .unwrap_err()
        .to_string()
        .contains("your own config file"));
    let half = "[prices.\"openai/x\"]\ninput = 1\n";
    let err = super::super::file::parse(Path::new("u.toml"), half, Scope::User).unwrap_err();
    assert!(
        err.to_string().contains("expected both input and output"),
        "{err}"
    );
    let negative = "[prices.\"openai/x\"]\ninput = -1\noutput = 1\n";
    assert!(super::super::file::parse(Path::new("u.toml"), negative, Scope::User).is_err());
}
