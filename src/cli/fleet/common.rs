//! What the `fleet` subcommands share: the remote and fleet arguments, error conversion, the fleet a
//! command means when `--fleet` is not given, and durations.

use std::time::Duration;

use clap::Args;

use crate::cli::error::CommandError;
use crate::store::fleet::queue::{Queue, QueueError};
use crate::store::fleet::record::{check_id, Invalid};
use crate::store::Store;

/// The remote and the fleet on it.
#[derive(Debug, Clone, Args)]
pub struct Target {
    /// The remote holding the queue (a remote's name, a URL or a path)
    #[arg(value_name = "REMOTE")]
    pub remote: String,

    /// The fleet (default: the only fleet on the remote)
    #[arg(long, value_name = "FLEET")]
    pub fleet: Option<String>,
}

impl From<QueueError> for CommandError {
    fn from(err: QueueError) -> Self {
        match err {
            QueueError::Store(e) => e.into(),
            QueueError::Unreachable { .. } => CommandError::user(err.to_string())
                .hint("check the remote's name or URL and that you may push to it"),
            other => CommandError::user(other.to_string()),
        }
    }
}

impl From<Invalid> for CommandError {
    fn from(err: Invalid) -> Self {
        CommandError::user(err.0)
    }
}

impl Target {
    /// The queue this names: `--fleet`, or else the one fleet the remote has.
    pub fn queue<'a>(&self, store: &'a Store) -> Result<Queue<'a>, CommandError> {
        let fleet = match &self.fleet {
            Some(fleet) => fleet.clone(),
            None => only_fleet(store, &self.remote)?,
        };
        Ok(Queue::new(store, &self.remote, &fleet)?)
    }
}

/// The one fleet on `remote`, or an error that lists them.
fn only_fleet(store: &Store, remote: &str) -> Result<String, CommandError> {
    // Any valid id does to list: the listing of one fleet is what `Queue` offers, so list the namespace here.
    let out = crate::store::git::command(store.workdir())
        .args(["ls-remote", "--refs", remote, "refs/agent/fleet/*"])
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| CommandError::internal(format!("could not run git ({e})")))?;
    if !out.status.success() || remote.starts_with('-') {
        return Err(CommandError::user(format!(
            "could not list the fleets on {}",
            crate::store::fleet::record::shown(remote)
        ))
        .hint("check the remote's name or URL"));
    }
    let mut fleets: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .filter_map(|(_, name)| name.strip_prefix("refs/agent/fleet/"))
        .filter_map(|rest| rest.split_once('/'))
        .map(|(fleet, _)| fleet.to_owned())
        .filter(|fleet| check_id("fleet id", fleet).is_ok())
        .collect();
    fleets.dedup();
    match fleets.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err(CommandError::user(format!(
            "no fleet on {}: submit one with `git agent fleet submit {remote} TASKS`",
            crate::store::fleet::record::shown(remote)
        ))),
        many => Err(CommandError::user(format!(
            "{} fleets on {}: name one with --fleet ({})",
            many.len(),
            crate::store::fleet::record::shown(remote),
            many.join(", ")
        ))),
    }
}

/// Seconds since the Unix epoch.
pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// A duration: seconds, or with a unit (`500ms`, `90s`, `20m`, `2h`).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let at = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(at);
    let n: u64 = number
        .parse()
        .map_err(|_| format!("'{text}' is not a duration: use seconds, or 500ms, 90s, 20m, 2h"))?;
    let d = match unit {
        "" | "s" => Duration::from_secs(n),
        "ms" => Duration::from_millis(n),
        "m" => Duration::from_secs(n * 60),
        "h" => Duration::from_secs(n * 3600),
        _ => return Err(format!("unknown unit in '{text}': use ms, s, m or h")),
    };
    if d.is_zero() {
        return Err("the duration must be more than 0".into());
    }
    Ok(d)
}

/// This machine's name as a worker id part (letters, digits, `.`, `_`, `-` only).
pub fn host_name() -> String {
    let raw = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .unwrap_or_default();
    let clean: String = raw
        .trim()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .take(40)
        .collect();
    if clean.is_empty() || !clean.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        "worker".into()
    } else {
        clean
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_units() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("3"), Ok(Duration::from_secs(3)));
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("5d").is_err());
    }
}
