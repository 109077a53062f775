//! The `[memory]` table: project memory's write policy and retrieval budget.
//!
//! ```toml
//! [memory]
//! enabled = true          # false: no memory read or written (as --no-memory on every run)
//! auto = true             # false: proposals wait for `git agent memory accept <session>`
//! context_share = 0.10    # share of the context window injected entries may fill
//! max_entries = 20        # at most this many entries injected
//! archive_below = 0.2     # an entry whose confidence falls below this is archived
//! ```
//!
//! Allowed in both files: a repository may tune how its memory is used, and none of these can send anything
//! anywhere.

use toml_edit::{Item, Value};

use super::error::ConfigError;
use super::syntax::{span_of, Ctx, KeyType, Span};

/// What one file's `[memory]` table says; `None` means "not set here".
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct MemoryConfig {
    pub enabled: Option<bool>,
    pub auto: Option<bool>,
    pub context_share: Option<f64>,
    pub max_entries: Option<u64>,
    pub archive_below: Option<f64>,
}

/// The settings a session's memory runs with (`None` where memory is off).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MemorySettings {
    /// Proposals become entries when a session completes; otherwise they wait for `memory accept`.
    pub auto: bool,
    /// The share of the context window that injected entries may use.
    pub context_share: f64,
    pub max_entries: usize,
    /// Confidence below which an entry is archived.
    pub archive_below: f64,
}

impl Default for MemorySettings {
    fn default() -> MemorySettings {
        MemorySettings {
            auto: true,
            context_share: 0.10,
            max_entries: 20,
            archive_below: 0.2,
        }
    }
}

const KEYS: &str = "enabled, auto, context_share, max_entries, archive_below";

/// The type of `memory.<key>`, for `config set`.
pub fn key_type(key: &str) -> Option<KeyType> {
    match key {
        "enabled" | "auto" => Some(KeyType::Bool),
        "context_share" | "archive_below" => Some(KeyType::Share),
        "max_entries" => Some(KeyType::Count),
        _ => None,
    }
}

/// Reads and validates a `[memory]` table.
pub(super) fn parse(ctx: &Ctx<'_>, item: &Item, span: Span) -> Result<MemoryConfig, ConfigError> {
    let table = ctx.table(item, "memory", span)?;
    let mut config = MemoryConfig::default();
    for (key, item) in table.iter() {
        let span = span_of(table, key, item);
        let full = format!("memory.{key}");
        match key {
            "enabled" => config.enabled = Some(ctx.boolean(item, &full, span)?),
            "auto" => config.auto = Some(ctx.boolean(item, &full, span)?),
            "context_share" => {
                let share = fraction(ctx, item, &full, span.clone())?;
                if share <= 0.0 || share > 0.5 {
                    return Err(ctx.error(
                        span,
                        &full,
                        "expected a share of the context window above 0 and at most 0.5 (e.g. 0.1)",
                    ));
                }
                config.context_share = Some(share);
            }
            "archive_below" => {
                let floor = fraction(ctx, item, &full, span.clone())?;
                if !(0.0..1.0).contains(&floor) {
                    return Err(ctx.error(
                        span,
                        &full,
                        "expected a confidence from 0 up to (not including) 1 (e.g. 0.2)",
                    ));
                }
                config.archive_below = Some(floor);
            }
            "max_entries" => match ctx.value(item, &full, span.clone())?.as_integer() {
                Some(n) if (1..=1000).contains(&n) => config.max_entries = Some(n as u64),
                _ => {
                    return Err(ctx.error(span, &full, "expected a whole number from 1 to 1000"));
                }
            },
            _ => return Err(ctx.unknown(&full, span, KEYS)),
        }
    }
    Ok(config)
}

/// A number (integer or float; NaN is refused by the range checks of the callers, which it never passes).
fn fraction(ctx: &Ctx<'_>, item: &Item, key: &str, span: Span) -> Result<f64, ConfigError> {
    match ctx.value(item, key, span.clone())? {
        Value::Integer(n) => Ok(*n.value() as f64),
        Value::Float(f) if !f.value().is_nan() => Ok(*f.value()),
        _ => Err(ctx.error(span, key, "expected a number")),
    }
}

impl MemoryConfig {
    /// Memory's settings: this table (the repo file's) over `user` over the defaults; `None` when
    /// `enabled = false`.
    pub fn over(&self, user: &MemoryConfig) -> Option<MemorySettings> {
        let repo = self;
        if repo.enabled.or(user.enabled) == Some(false) {
            return None;
        }
        let default = MemorySettings::default();
        Some(MemorySettings {
            auto: repo.auto.or(user.auto).unwrap_or(default.auto),
            context_share: repo
                .context_share
                .or(user.context_share)
                .unwrap_or(default.context_share),
            max_entries: repo
                .max_entries
                .or(user.max_entries)
                .map_or(default.max_entries, |n| n as usize),
            archive_below: repo
                .archive_below
                .or(user.archive_below)
                .unwrap_or(default.archive_below),
        })
    }
}

#[cfg(test)]
mod tests;
