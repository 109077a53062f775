//! `git agent stats`: sessions, steps, tokens, cost and burn rate over `refs/agent/sessions`, from the sessions'
//! `meta.json` summaries alone (no transcript is read). Pulled sessions are sessions like any other, so a team
//! that shares its logs sees its spend.

use std::collections::BTreeMap;
use std::io::Write;

use clap::{Args, ValueEnum};

use super::context::Context;
use super::error::CommandError;
use crate::protocol::format_usd;
use crate::store::Meta;

/// Show sessions, steps, tokens, cost and burn rate over the session logs
///
/// Every session in refs/agent/sessions counts, pulled ones included. A session whose model had no price has
/// an unknown cost: it is counted apart, never priced by guess.
#[derive(Debug, Args)]
pub struct StatsArgs {
    /// Only sessions started in this period before now: days, or with a unit (12h, 30d, 4w)
    #[arg(long, value_name = "PERIOD", value_parser = parse_period)]
    since: Option<i64>,

    /// One line per model, per day (UTC) or per author, besides the total
    #[arg(long, value_enum, value_name = "WHAT")]
    by: Option<By>,
}

/// What `--by` groups by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum By {
    Model,
    Day,
    Author,
}

/// What a group of sessions used.
#[derive(Debug, Default, Clone, PartialEq)]
struct Totals {
    sessions: u64,
    steps: u64,
    input_tokens: u64,
    output_tokens: u64,
    /// USD over the sessions whose cost is known.
    cost: f64,
    /// Sessions whose cost is unknown (a model without a price, or a log older than prices).
    unpriced: u64,
}

impl Totals {
    fn add(&mut self, meta: &Meta) {
        self.sessions += 1;
        self.steps += u64::from(meta.steps);
        self.input_tokens += meta.input_tokens;
        self.output_tokens += meta.output_tokens;
        match meta.cost_usd {
            Some(usd) => self.cost += usd,
            None => self.unpriced += 1,
        }
    }

    /// `$1.23`, `$1.23 + 2 sessions unknown`, or `unknown` when no session had a price.
    fn cost_text(&self) -> String {
        let known = self.sessions - self.unpriced;
        match (known, self.unpriced) {
            (0, _) => format_usd(None),
            (_, 0) => format_usd(Some(self.cost)),
            (_, n) => format!(
                "{} + {n} session{} unknown",
                format_usd(Some(self.cost)),
                if n == 1 { "" } else { "s" }
            ),
        }
    }
}

const DAY: i64 = 86_400;

pub fn run(ctx: &Context, args: StatsArgs) -> Result<(), CommandError> {
    let store = ctx.store()?;
    let now = crate::store::session_log::now();
    let from = args.since.map(|period| now - period);
    let sessions: Vec<(Meta, String)> = store
        .list_sessions_with_authors()?
        .into_iter()
        .filter(|(meta, _)| from.is_none_or(|from| meta.created >= from))
        .collect();
    let mut total = Totals::default();
    let mut groups: BTreeMap<String, Totals> = BTreeMap::new();
    for (meta, author) in &sessions {
        total.add(meta);
        if let Some(by) = args.by {
            let key = match by {
                By::Model => meta.model.clone(),
                By::Day => day(meta.created),
                By::Author if author.is_empty() => "(unknown)".to_owned(),
                By::Author => author.clone(),
            };
            groups.entry(key).or_default().add(meta);
        }
    }
    // The period a burn rate is over: the one asked for, else from the first session to now (a day at least).
    let first = sessions.iter().map(|(meta, _)| meta.created).min();
    let days = match (args.since, first) {
        (Some(period), _) => period as f64 / DAY as f64,
        (None, Some(first)) => ((now - first) as f64 / DAY as f64).max(1.0),
        (None, None) => 1.0,
    };
    let mut out = std::io::stdout().lock();
    let mut lines = vec![summary_line("total", &total, Some(days))];
    for (key, totals) in &groups {
        lines.push(summary_line(key, totals, None));
    }
    for line in lines {
        if writeln!(out, "{line}").is_err() {
            break; // a closed pipe (`| head`) is not an error
        }
    }
    Ok(())
}

/// `total  12 sessions  40 steps  tokens 1.2M in, 40k out  cost $3.21  burn $0.45/day over 7 days`.
fn summary_line(key: &str, totals: &Totals, days: Option<f64>) -> String {
    // A model or author name may come from a pulled session: shown neutralised.
    let key = crate::protocol::Untrusted::name(key);
    let mut line = format!(
        "{key}  {} session{}  {} step{}  tokens {} in, {} out  cost {}",
        totals.sessions,
        if totals.sessions == 1 { "" } else { "s" },
        totals.steps,
        if totals.steps == 1 { "" } else { "s" },
        totals.input_tokens,
        totals.output_tokens,
        totals.cost_text(),
    );
    if let Some(days) = days {
        let burn = if totals.sessions > 0 && totals.unpriced == totals.sessions {
            format_usd(None)
        } else {
            format!("{}/day", format_usd(Some(totals.cost / days)))
        };
        line.push_str(&format!("  burn {burn} over {}", period_text(days)));
    }
    line
}

fn period_text(days: f64) -> String {
    if days < 1.0 {
        format!("{:.0} hours", days * 24.0)
    } else if (days - 1.0).abs() < f64::EPSILON {
        "1 day".to_owned()
    } else {
        format!("{days:.0} days")
    }
}

/// A `--since` period in seconds: `30` and `30d` are days, `12h` hours, `4w` weeks.
fn parse_period(text: &str) -> Result<i64, String> {
    let text = text.trim();
    let (number, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(at) => text.split_at(at),
        None => (text, "d"),
    };
    let scale = match unit {
        "h" => 3_600,
        "d" => DAY,
        "w" => 7 * DAY,
        _ => {
            return Err(format!(
                "expected a period like 30d, 12h or 4w, not '{text}'"
            ))
        }
    };
    match number.parse::<i64>() {
        Ok(n) if n > 0 => n
            .checked_mul(scale)
            .ok_or_else(|| format!("'{text}' is too long a period")),
        _ => Err(format!(
            "expected a period like 30d, 12h or 4w, not '{text}'"
        )),
    }
}

/// The UTC day of a Unix time, `2026-12-01`.
fn day(unix: i64) -> String {
    crate::agent::date::day(unix)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn periods_and_days() {
        assert_eq!(parse_period("30d"), Ok(30 * DAY));
        assert_eq!(parse_period("7"), Ok(7 * DAY));
        assert_eq!(parse_period("12h"), Ok(12 * 3_600));
        assert_eq!(parse_period("2w"), Ok(14 * DAY));
        assert!(parse_period("0d").is_err());
        assert!(parse_period("3y").is_err());
        assert_eq!(day(0), "1970-01-01");
        assert_eq!(day(1_796_083_200), "2026-12-01");
        assert_eq!(day(951_782_400), "2000-02-29");
    }

    #[test]
    fn unknown_costs_are_counted_apart() {
        let mut totals = Totals::default();
        let priced = Meta {
            cost_usd: Some(0.5),
            steps: 2,
            ..Meta::default()
        };
        totals.add(&priced);
        assert_eq!(totals.cost_text(), "$0.5000");
        totals.add(&Meta::default());
        assert_eq!(totals.cost_text(), "$0.5000 + 1 session unknown");
        let mut none = Totals::default();
        none.add(&Meta::default());
        assert_eq!(none.cost_text(), "unknown");
    }
}
