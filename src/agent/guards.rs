//! Loop guards and budgets: what stops a session that goes round in circles or runs out of allowance.
//!
//! A model stuck in a loop rarely notices by itself; the cheap signals are exact repetition of a tool call
//! (same name and arguments) and a test command that keeps failing the same way while files are edited in
//! between. Both get one reminder in the conversation first, because models often recover once told; if the
//! pattern continues the session stops with exit 3 rather than burn the budget.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use super::plan::Plan;
use crate::protocol::{Cost, Status, ToolCall, Usage};

/// How many recent calls the repetition check looks at.
const WINDOW: usize = 20;
/// Repeats of one call within [`WINDOW`] that trigger the reminder (and, after it, the stop).
const REPEATS: usize = 3;
/// How many edit-and-retest rounds may end in the same failure before the session stops.
pub const SAME_FAILURE_ROUNDS: u32 = 3;
/// Tool calls without a plan update before the model is reminded of its plan.
const PLAN_STALE_CALLS: u32 = 12;

/// What the guard says about one tool call, before it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Run,
    /// Run it, and add this reminder to the conversation after the results.
    Remind(String),
    /// Do not run it: stop the session for this reason.
    Stop(String),
}

/// The state of the loop guards over one session.
#[derive(Debug, Default)]
pub struct Guards {
    recent: VecDeque<String>,
    /// Fingerprints the model has already been reminded about.
    reminded: Vec<String>,
    /// Per `run` command: the last failing output's fingerprint, how many edit rounds ended in it, whether
    /// something was edited since, and whether the reminder was given.
    failures: HashMap<String, Failure>,
    calls_since_plan: u32,
    plan_reminded_at_finish: bool,
}

/// What a call was, as far as the guards care (the tool says it; see `tools::Tool`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect<'a> {
    /// It edited files: the next failure of a command counts as one more round.
    Edit,
    /// It ran the command line held in its argument of this name.
    Command(&'a str),
    Other,
}

#[derive(Debug, Default)]
struct Failure {
    output: u64,
    rounds: u32,
    edited: bool,
}

impl Guards {
    /// Checks one call before it runs and records it.
    pub fn before_call(&mut self, call: &ToolCall) -> Verdict {
        let fp = fingerprint(call);
        self.recent.push_back(fp.clone());
        if self.recent.len() > WINDOW {
            self.recent.pop_front();
        }
        let count = self.recent.iter().filter(|f| **f == fp).count();
        if count < REPEATS {
            return Verdict::Run;
        }
        let shown = crate::tools::short(&fp, 200);
        if self.reminded.contains(&fp) {
            return Verdict::Stop(format!(
                "the same tool call was repeated {count} times in the last {WINDOW} calls, after a reminder: \
                 {shown}"
            ));
        }
        self.reminded.push(fp);
        Verdict::Remind(format!(
            "Loop guard: you have made this exact call {count} times in your last {WINDOW} tool calls: {shown}\n\
             Repeating it will give the same result. Change your approach (read a different part, try a different \
             fix, or ask yourself what assumption is wrong). If you make this call again the session stops."
        ))
    }

    /// Records what a call did: edits arm the same-failure check; a failing command whose output matches the
    /// previous failure of the same command after an edit counts one round. Returns a reminder or a stop.
    pub fn after_call(
        &mut self,
        call: &ToolCall,
        effect: Effect<'_>,
        failed: bool,
        output: &str,
    ) -> Verdict {
        self.calls_since_plan += 1;
        match effect {
            Effect::Edit => {
                for failure in self.failures.values_mut() {
                    failure.edited = true;
                }
                Verdict::Run
            }
            Effect::Command(arg) => self.after_run(call, arg, failed, output),
            Effect::Other => Verdict::Run,
        }
    }

    fn after_run(&mut self, call: &ToolCall, arg: &str, failed: bool, output: &str) -> Verdict {
        let command = serde_json::from_str::<serde_json::Value>(&call.arguments)
            .ok()
            .and_then(|a| a.get(arg).and_then(|c| c.as_str()).map(str::to_owned))
            .unwrap_or_else(|| call.arguments.clone());
        if !failed {
            self.failures.remove(&command);
            return Verdict::Run;
        }
        let output = crate::tools::state::fingerprint(normalise_output(output).as_bytes());
        let failure = self.failures.entry(command.clone()).or_default();
        if failure.output == output && failure.edited {
            failure.rounds += 1;
        } else if failure.output != output {
            *failure = Failure {
                output,
                rounds: 1,
                edited: false,
            };
        }
        failure.edited = false;
        if failure.rounds >= SAME_FAILURE_ROUNDS {
            return Verdict::Stop(format!(
                "`{}` failed with the same output after {} rounds of edits",
                crate::tools::short(&command, 120),
                failure.rounds - 1
            ));
        }
        if failure.rounds == SAME_FAILURE_ROUNDS - 1 {
            return Verdict::Remind(format!(
                "Loop guard: `{}` failed with exactly the same output as before your last edit, so the edit did \
                 not change the failure. Re-read the error and the code it points at before editing again; if it \
                 fails the same way once more the session stops.",
                crate::tools::short(&command, 120)
            ));
        }
        Verdict::Run
    }

    /// The plan was updated: the staleness count starts again.
    pub fn plan_updated(&mut self) {
        self.calls_since_plan = 0;
    }

    /// A reminder when many calls passed without a plan update (only once a plan exists, or when the task is
    /// clearly not small).
    pub fn stale_plan(&mut self, plan: &Plan) -> Option<String> {
        if self.calls_since_plan < PLAN_STALE_CALLS {
            return None;
        }
        self.calls_since_plan = 0;
        if plan.is_empty() {
            return Some(format!(
                "Reminder: {PLAN_STALE_CALLS} tool calls and no plan yet. Record your plan with plan_update so \
                 it survives if older messages are summarised."
            ));
        }
        Some(format!(
            "Reminder: {PLAN_STALE_CALLS} tool calls since your last plan_update. Update the plan (mark what \
             is done, what is in progress). Current plan:\n{}",
            plan.render()
        ))
    }

    /// Whether the model may finish now: with open plan items it is reminded once first.
    pub fn may_finish(&mut self, plan: &Plan) -> Result<(), String> {
        if plan.open() == 0 || self.plan_reminded_at_finish {
            return Ok(());
        }
        self.plan_reminded_at_finish = true;
        Err(format!(
            "Your plan still has {} open item{}:\n{}\nFinish them, or update the plan (mark items done, or \
             blocked with a note saying why) before you finish.",
            plan.open(),
            if plan.open() == 1 { "" } else { "s" },
            plan.render()
        ))
    }
}

/// The identity of a call: its name and arguments, with the arguments re-serialised so key order and
/// whitespace do not make two identical calls look different.
fn fingerprint(call: &ToolCall) -> String {
    let args = serde_json::from_str::<serde_json::Value>(&call.arguments)
        .map(|v| v.to_string())
        .unwrap_or_else(|_| call.arguments.trim().to_owned());
    format!("{} {args}", call.name)
}

/// Command output with timings taken out (`exit 1 after 0.4 s`, `finished in 0.12s`), so two runs that fail
/// the same way compare equal.
fn normalise_output(output: &str) -> String {
    let words: Vec<&str> = output.split_inclusive(char::is_whitespace).collect();
    let unit = |w: Option<&&str>| {
        w.is_some_and(|w| matches!(w.trim().trim_end_matches([',', ')', ']', ';']), "s" | "ms"))
    };
    let number = |w: &str| !w.is_empty() && w.chars().all(|c| c.is_ascii_digit() || c == '.');
    words
        .iter()
        .enumerate()
        .filter(|(i, w)| {
            let timing = is_duration(w.trim()) || (number(w.trim()) && unit(words.get(i + 1)));
            !timing
        })
        .map(|(_, w)| *w)
        .collect()
}

fn is_duration(word: &str) -> bool {
    let word = word.trim_end_matches([',', ')', ']', ';']);
    let Some(number) = word.strip_suffix("ms").or_else(|| word.strip_suffix('s')) else {
        return false;
    };
    !number.is_empty()
        && number.chars().any(|c| c.is_ascii_digit())
        && number.chars().all(|c| c.is_ascii_digit() || c == '.')
}

/// A turn's budget and what it used: the loop's own requests and its subagents' (the tool-call pipeline
/// charges what an `explore` or `agent` call used).
pub(super) struct Tally {
    pub budget: Budget,
    pub requests: u32,
    /// Tokens used by the turn's requests: the provider's figures, or estimates where it gave none.
    pub spent: u64,
    pub usage: Usage,
    /// What the turn's requests cost (the subagents' included).
    pub cost: Cost,
}

impl Tally {
    pub(super) fn new(budget: Budget) -> Tally {
        Tally {
            budget,
            requests: 0,
            spent: 0,
            usage: Usage::default(),
            cost: Cost::default(),
        }
    }

    /// What the turn used of its budget so far: model requests, and tokens as `--max-tokens` counts them.
    pub(super) fn used(&self) -> (u32, u64) {
        (self.requests, self.spent)
    }

    /// Takes over what subagents used: the turn now stands at `requests` and `spent`, and their `usage` is
    /// the turn's too (so the session's totals count it).
    pub(super) fn charge(&mut self, requests: u32, spent: u64, usage: &Usage, cost: &Cost) {
        self.requests = self.requests.max(requests);
        self.spent = self.spent.max(spent);
        self.usage.add(usage);
        self.cost.add(cost);
    }
}

/// What a stopped session's budgets are.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    pub max_steps: u32,
    pub deadline: Option<Instant>,
    pub max_time: Option<Duration>,
    /// Input plus output tokens over the session's requests (summaries included).
    pub max_tokens: Option<u64>,
    /// USD over the turn's requests (`--max-cost`); the session refuses to start without a price.
    pub max_cost: Option<f64>,
}

impl Budget {
    /// Why the session must stop before the next request, if it must.
    pub fn exceeded(&self, requests: u32, tokens: u64) -> Option<(Status, String)> {
        if requests >= self.max_steps {
            let n = self.max_steps;
            return Some((
                Status::MaxSteps,
                format!("stopped after {n} model requests (--max-steps {n})"),
            ));
        }
        if let Some(stop) = self.out_of_time() {
            return Some(stop);
        }
        if let Some(limit) = self.max_tokens {
            if tokens >= limit {
                return Some((
                    Status::MaxTokens,
                    format!("stopped after {tokens} tokens (--max-tokens {limit})"),
                ));
            }
        }
        None
    }

    /// Why the session must stop before the next request because of what it cost, if it must. An unknown
    /// cost never stops it: `--max-cost` is refused up front for a model without a price.
    pub fn cost_exceeded(&self, spent: &Cost) -> Option<(Status, String)> {
        let (limit, usd) = (self.max_cost?, spent.known()?);
        (usd >= limit).then(|| {
            (
                Status::MaxCost,
                format!("stopped after spending ${usd:.4} (--max-cost {limit})"),
            )
        })
    }

    /// Why the session must stop when `--max-time` has run out.
    pub fn out_of_time(&self) -> Option<(Status, String)> {
        let (deadline, limit) = (self.deadline?, self.max_time?);
        (Instant::now() >= deadline).then(|| {
            (
                Status::MaxTime,
                format!(
                    "stopped after {} s (--max-time {})",
                    limit.as_secs(),
                    limit.as_secs()
                ),
            )
        })
    }

    /// Resolves once `--max-time` has run out (never without one): raced against a model request or stream,
    /// so a budget is kept while a request runs, not only between requests (issue 23, finding 11).
    pub async fn expired(&self) {
        match self.deadline {
            Some(deadline) => tokio::time::sleep_until(deadline.into()).await,
            None => std::future::pending().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUN: Effect<'static> = Effect::Command("command");

    fn call(name: &str, args: &str) -> ToolCall {
        ToolCall {
            id: "x".into(),
            name: name.into(),
            arguments: args.into(),
        }
    }

    #[test]
    fn repeated_call_is_reminded_then_stopped() {
        let mut g = Guards::default();
        let a = call("read_file", r#"{"path":"a","limit":5}"#);
        let same = call("read_file", r#"{ "limit": 5, "path": "a" }"#);
        assert_eq!(g.before_call(&a), Verdict::Run);
        assert_eq!(
            g.before_call(&call("read_file", r#"{"path":"b"}"#)),
            Verdict::Run
        );
        assert_eq!(g.before_call(&same), Verdict::Run);
        assert!(matches!(g.before_call(&a), Verdict::Remind(_)));
        assert!(matches!(g.before_call(&a), Verdict::Stop(_)));
    }

    #[test]
    fn repeats_far_apart_are_fine() {
        let mut g = Guards::default();
        for i in 0..60 {
            let v = g.before_call(&call("read_file", &format!(r#"{{"path":"{}"}}"#, i % 25)));
            assert_eq!(v, Verdict::Run, "call {i}");
        }
    }

    #[test]
    fn same_failure_after_edits_stops() {
        let mut g = Guards::default();
        let test = call("run", r#"{"command":"cargo test"}"#);
        let edit = call("edit_file", "{}");
        let out = |t: &str| format!("test foo ... FAILED\n[exit 101 after {t} s]");
        assert_eq!(g.after_call(&test, RUN, true, &out("1.2")), Verdict::Run);
        // The same failure without an edit in between is not a round (the model may just look again).
        assert_eq!(g.after_call(&test, RUN, true, &out("1.3")), Verdict::Run);
        g.after_call(&edit, Effect::Edit, false, "");
        assert!(matches!(
            g.after_call(&test, RUN, true, &out("0.9")),
            Verdict::Remind(_)
        ));
        g.after_call(&edit, Effect::Edit, false, "");
        assert!(matches!(
            g.after_call(&test, RUN, true, &out("2.0")),
            Verdict::Stop(_)
        ));
        // A different failure starts over; a pass clears it.
        let mut g = Guards::default();
        g.after_call(&test, RUN, true, "a");
        g.after_call(&edit, Effect::Edit, false, "");
        g.after_call(&test, RUN, true, "b");
        g.after_call(&edit, Effect::Edit, false, "");
        assert_eq!(g.after_call(&test, RUN, true, "c"), Verdict::Run);
        assert_eq!(g.after_call(&test, RUN, false, "ok"), Verdict::Run);
    }

    #[test]
    fn open_plan_items_get_one_reminder() {
        let mut g = Guards::default();
        assert!(g.may_finish(&Plan::default()).is_ok());
        let plan =
            Plan::from_args(&serde_json::json!({"items": [{"step": "a", "status": "pending"}]}))
                .unwrap();
        assert!(g.may_finish(&plan).unwrap_err().contains("[ ] a"));
        assert!(g.may_finish(&plan).is_ok());
    }

    #[test]
    fn durations_are_not_output() {
        assert_eq!(normalise_output("ok in 0.12s\n"), "ok in ");
        assert_eq!(normalise_output("3 passed"), "3 passed");
        assert!(is_duration("12ms,"));
    }
}
