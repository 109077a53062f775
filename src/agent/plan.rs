//! The plan and the outcome: two tools the agent handles itself instead of the tool registry.
//!
//! Why not [`crate::tools::Tool`]s: both act on the session, not on the checkout. `plan_update` replaces the
//! plan kept in the session log *outside* the conversation (so it survives compaction and resume and `show`
//! can print it), and `finish` ends the turn loop. Neither touches files, so the safety policy has nothing to
//! decide and they never run in the sandbox. [`OwnTool::find()`] is their registry: the loop asks it before the
//! tool registry.

use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::protocol::{Event, PlanItem, PlanStatus, Sink, ToolKind, ToolSchema};

/// The name of the memory tool (see [`super::memory`]).
pub const REMEMBER_TOOL: &str = "remember";

/// The label of a `remember` call.
fn remember_label(args: &serde_json::Value) -> String {
    let text = args["text"].as_str().unwrap_or("?");
    format!("remember: {}", crate::tools::short(text, 70))
}

/// The name of the plan tool.
pub const PLAN_TOOL: &str = "plan_update";
/// The name of the outcome tool.
pub const FINISH_TOOL: &str = "finish";

/// One of the agent's own tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OwnTool {
    Plan,
    Finish,
    /// `remember`: a proposal for project memory (see [`super::memory`]).
    Remember,
}

impl OwnTool {
    /// The own tool a call names, if it names one.
    pub fn find(name: &str) -> Option<OwnTool> {
        match name {
            PLAN_TOOL => Some(OwnTool::Plan),
            FINISH_TOOL => Some(OwnTool::Finish),
            REMEMBER_TOOL => Some(OwnTool::Remember),
            _ => None,
        }
    }

    /// What it is, for front-ends: planning is thinking; ending the task is neither a read nor an edit.
    pub fn kind(self) -> ToolKind {
        match self {
            OwnTool::Plan => ToolKind::Think,
            OwnTool::Finish | OwnTool::Remember => ToolKind::Other,
        }
    }

    /// The label on its tool line.
    pub fn label(self, args: &serde_json::Value) -> String {
        match self {
            OwnTool::Plan => "plan".to_owned(),
            OwnTool::Finish => format!("finish {}", args["status"].as_str().unwrap_or("?")),
            OwnTool::Remember => remember_label(args),
        }
    }
}

/// Where one plan item stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Pending,
    InProgress,
    Done,
    Blocked,
}

impl Status {
    fn mark(self) -> &'static str {
        match self {
            Status::Pending => "[ ]",
            Status::InProgress => "[~]",
            Status::Done => "[x]",
            Status::Blocked => "[!]",
        }
    }
}

/// One item of the plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Item {
    pub step: String,
    pub status: Status,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub note: String,
}

/// The session's plan: the last `plan_update` replaces it whole, as in Codex's `update_plan`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    pub items: Vec<Item>,
}

impl Plan {
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Items still to do (pending or in progress); blocked items are not open: the model said why.
    pub fn open(&self) -> usize {
        self.items
            .iter()
            .filter(|i| matches!(i.status, Status::Pending | Status::InProgress))
            .count()
    }

    pub fn done(&self) -> usize {
        self.items
            .iter()
            .filter(|i| i.status == Status::Done)
            .count()
    }

    /// Tells `sink` what the plan is now.
    pub fn show(&self, sink: &mut dyn Sink) {
        sink.emit(&self.event());
    }

    /// What the plan is now, as an event ([`Event::Plan`]).
    pub fn event(&self) -> Event {
        let items: Vec<PlanItem> = self
            .items
            .iter()
            .map(|item| PlanItem {
                step: item.step.trim().to_owned(),
                status: match item.status {
                    Status::Pending => PlanStatus::Pending,
                    Status::InProgress => PlanStatus::InProgress,
                    Status::Done => PlanStatus::Done,
                    Status::Blocked => PlanStatus::Blocked,
                },
                note: item.note.trim().to_owned(),
            })
            .collect();
        Event::Plan {
            done: self.done(),
            total: self.items.len(),
            text: self.render(),
            items,
        }
    }

    /// The plan as a checklist, one item a line.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for item in &self.items {
            out.push_str(item.status.mark());
            out.push(' ');
            out.push_str(item.step.trim());
            if !item.note.trim().is_empty() {
                out.push_str(" — ");
                out.push_str(item.note.trim());
            }
            out.push('\n');
        }
        out
    }

    /// Parses `plan_update` arguments, or says what is wrong in words the model can act on.
    pub fn from_args(args: &serde_json::Value) -> Result<Plan, String> {
        let items = args
            .get("items")
            .ok_or("missing required argument `items` (an array of {step, status, note})")?;
        let items: Vec<Item> = serde_json::from_value(items.clone()).map_err(|e| {
            format!(
                "invalid `items` ({e}); each item is {{\"step\": text, \"status\": \
                 \"pending\"|\"in_progress\"|\"done\"|\"blocked\", \"note\": optional text}}"
            )
        })?;
        if items.iter().any(|i| i.step.trim().is_empty()) {
            return Err("every plan item needs a non-empty `step`".into());
        }
        Ok(Plan { items })
    }
}

/// How the model said it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finish {
    pub completed: bool,
    pub summary: String,
}

impl Finish {
    pub fn from_args(args: &serde_json::Value) -> Result<Finish, String> {
        let completed = match args.get("status").and_then(|s| s.as_str()) {
            Some("completed") => true,
            Some("blocked") => false,
            _ => return Err("`status` must be \"completed\" or \"blocked\"".into()),
        };
        let summary = args
            .get("summary")
            .and_then(|s| s.as_str())
            .filter(|s| !s.trim().is_empty())
            .ok_or("missing required argument `summary`: what you did, or why you are blocked")?;
        Ok(Finish {
            completed,
            summary: summary.to_owned(),
        })
    }
}

/// The schemas of the two tools, offered after the registry's.
pub fn schemas() -> Vec<ToolSchema> {
    vec![
        ToolSchema {
            name: PLAN_TOOL.into(),
            description: "Record your plan: the whole list each time, each item with a status and an optional \
                note; keep one item in_progress while you work. The plan survives when older messages are \
                summarised."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "items": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "step": {"type": "string", "description": "In a few words"},
                                "status": {"type": "string", "enum": ["pending", "in_progress", "done", "blocked"]},
                                "note": {"type": "string", "description": "A finding, a commit, why blocked"}
                            },
                            "required": ["step", "status"]
                        }
                    }
                },
                "required": ["items"]
            }),
        },
        ToolSchema {
            name: FINISH_TOOL.into(),
            description: "End the task: \"completed\" when the goal is reached, \"blocked\" when it needs the \
                user (say what is missing). The summary is the answer the user reads: what you changed and what \
                they must know."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "status": {"type": "string", "enum": ["completed", "blocked"]},
                    "summary": {"type": "string"}
                },
                "required": ["status", "summary"]
            }),
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_round_trip_and_counts() {
        let plan = Plan::from_args(&json!({"items": [
            {"step": "read the parser", "status": "done"},
            {"step": "fix the bug", "status": "in_progress", "note": "off by one"},
            {"step": "ask about the API", "status": "blocked"},
            {"step": "run tests", "status": "pending"}
        ]}))
        .unwrap();
        assert_eq!((plan.open(), plan.done()), (2, 1));
        assert_eq!(
            plan.render(),
            "[x] read the parser\n[~] fix the bug — off by one\n[!] ask about the API\n[ ] run tests\n"
        );
        let err =
            Plan::from_args(&json!({"items": [{"step": "x", "status": "later"}]})).unwrap_err();
        assert!(err.contains("in_progress"), "{err}");
        assert!(Plan::from_args(&json!({})).is_err());
    }

    #[test]
    fn finish_needs_a_status_and_a_summary() {
        let f = Finish::from_args(&json!({"status": "blocked", "summary": "no key"})).unwrap();
        assert!(!f.completed);
        assert!(Finish::from_args(&json!({"status": "done", "summary": "x"})).is_err());
        assert!(Finish::from_args(&json!({"status": "completed"})).is_err());
    }
}
