//! The `memory` section read through the whole file parser, as `Settings::load` reads it.

use std::path::Path;

use super::super::file::{parse as parse_file, Scope};
use super::*;
use crate::config::Settings;

fn settings(user: &str, repo: &str) -> Result<Settings, ConfigError> {
    Ok(Settings {
        user: parse_file(Path::new("user.toml"), user, Scope::User)?,
        repo: parse_file(Path::new(".git-agent.toml"), repo, Scope::Repo)?,
    })
}

#[test]
fn defaults_files_and_the_off_switch() {
    assert_eq!(
        settings("", "").unwrap().memory(),
        Some(MemorySettings::default())
    );
    let s = settings(
        "[memory]\nauto = false\ncontext_share = 0.2\nmax_entries = 5\n",
        "[memory]\narchive_below = 0.3\ncontext_share = 0.05\n",
    )
    .unwrap();
    assert_eq!(
        s.memory(),
        Some(MemorySettings {
            auto: false,
            context_share: 0.05,
            max_entries: 5,
            archive_below: 0.3
        })
    );
    assert_eq!(
        settings("", "[memory]\nenabled = false\n")
            .unwrap()
            .memory(),
        None
    );
}

#[test]
fn bad_values_name_the_key_and_the_line() {
    for (text, needle) in [
        ("[memory]\ncontext_share = 0.9\n", "at most 0.5"),
        ("[memory]\ncontext_share = 0\n", "above 0"),
        ("[memory]\narchive_below = 1\n", "not including"),
        ("[memory]\nmax_entries = 0\n", "from 1 to 1000"),
        ("[memory]\nauto = \"yes\"\n", "true or false"),
        ("[memory]\nautomatic = true\n", "unknown key"),
    ] {
        let err = settings(text, "").unwrap_err().to_string();
        assert!(err.contains(needle), "{text}: {err}");
        assert!(err.contains("memory."), "{err}");
        assert!(err.contains(":2"), "line 2: {err}");
    }
}
