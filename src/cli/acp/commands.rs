//! Slash commands over ACP: chat's table and dispatcher ([`chat::commands`]), offered to the editor in
//! `available_commands_update` and run when a prompt is `/name args`, so a command the editor lists does
//! what it says.
//!
//! Only the commands that work on the session alone are offered. Starting, switching and leaving sessions
//! is the editor's business (`session/new`, `session/load`, `session/close`); `/help` describes the terminal
//! chat's keys; `/review`, `/memory` and `/skills` are not in this version, and offering them would be
//! offering commands that do nothing.

use std::path::Path;

use serde_json::{json, Value};

use super::super::chat::commands::{self as chat, Env, Parsed, COMMANDS};
use super::super::context::Context;
use crate::agent::{AgentSession, TurnControl};
use crate::protocol::Sink;

/// The commands an editor gets.
const OFFERED: &[&str] = &[
    "diff", "undo", "accept", "compact", "context", "model", "plan", "sessions",
];

/// `availableCommands`: name, description, and the argument hint when the command takes arguments; then
/// the commands defined in files, which run as prompts.
pub(super) fn available(session: &AgentSession) -> Value {
    let mut commands: Vec<Value> = COMMANDS
        .iter()
        .filter(|c| OFFERED.contains(&c.name))
        .map(|c| {
            let mut command = json!({"name": c.name, "description": c.description});
            if !c.args.is_empty() {
                command["input"] = json!({"hint": c.args});
            }
            command
        })
        .collect();
    for c in session.file_commands() {
        if COMMANDS.iter().any(|b| b.name == c.name) {
            continue;
        }
        let mut command = json!({"name": c.name, "description": c.description});
        if !c.argument_hint.is_empty() {
            command["input"] = json!({"hint": c.argument_hint});
        }
        commands.push(command);
    }
    json!(commands)
}

/// True when `text` is a slash command (known or not), not a prompt for the model.
pub(super) fn is_command(text: &str) -> bool {
    chat::parse(text).is_some()
}

/// Runs `text` when it is a slash command and returns its answer for the user; `None` for a prompt.
/// `cwd` is the session's directory (where `/accept` works and `/model` reads the settings).
pub(super) async fn run(
    text: &str,
    session: &mut AgentSession,
    sink: &mut dyn Sink,
    control: &TurnControl,
    cwd: &Path,
) -> Option<String> {
    let parsed = chat::parse_for(text, session)?;
    if let Parsed::Known(command, _) = &parsed {
        if !OFFERED.contains(&command.name) {
            return Some(format!(
                "/{} is not available here: the editor starts, switches and closes sessions",
                command.name
            ));
        }
    }
    let ctx = Context::at(cwd.to_path_buf());
    let env = Env {
        session,
        sink,
        control,
        ctx: &ctx,
    };
    Some(match chat::run(&parsed, env).await {
        Ok(reply) if reply.diff || text.trim_start().starts_with("/diff") => {
            format!("```diff\n{}\n```", reply.text)
        }
        Ok(reply) => reply.text,
        Err(err) => format!("error: {}", err.text()),
    })
}
