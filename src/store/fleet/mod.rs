//! Fleets (issue 27): tasks queued in a remote's refs, claimed by atomic ref updates, run by any engine.
//!
//! Everything lives under `refs/agent/fleet/<fleet>/` on the remote (notes under `refs/notes/agent-fleet/<fleet>/`), one ref per task and state, so workers
//! never contend on one shared ref and plain git reads it all:
//!
//! | ref | a commit whose tree holds |
//! |---|---|
//! | `meta` | `fleet.json`: id, task count, defaults, who submitted it and when |
//! | `tasks/<id>` | `task.json`: the prompt, optional base, check, model and budgets |
//! | `claims/<id>` | `claim.json`: the worker and its lease's expiry; renewed by compare-and-swap, deleted when done |
//! | `results/<id>` | `result.json`: outcome, session, branch, files changed, tokens; written once |
//! | `refs/notes/agent-fleet/<fleet>/<id>` | the session's notes on its step commits (a notes ref of the task's own, under `refs/notes/` so `git notes` reads it), folded into `refs/notes/agent` by gc |
//! | `cancel` | present once the fleet was cancelled: no more tasks are handed out |
//!
//! `record` holds the shapes and their checks, `input` the JSONL and CSV readers, `queue` the remote itself.

pub mod input;
pub mod queue;
pub mod record;
