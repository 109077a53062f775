//! `load_skill`: the body of a skill and the list of its files, or one of its files, for the model.
//!
//! The system prompt lists only names and descriptions (see the agent's skill section); a skill's
//! instructions come in when the model decides the task needs them, as Agent Skills intends
//! ("progressive disclosure"). A file of a skill is read through the same tool with `path`, whatever the
//! source: a skill stored in `refs/agent/skills` or in `~/.agents/skills` is not in the checkout, where
//! `read_file` looks.
//!
//! Which skills were loaded in a turn is kept in [`Loaded`], so the agent can count their use when the turn
//! ends.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use serde_json::json;

use super::tool::{opt_str_arg, str_arg, Tool, ToolContext, ToolOutput};
use crate::protocol::ToolKind;
use crate::store::skills::sources::{Catalog, Skill};

/// The tool's name.
pub const NAME: &str = "load_skill";
/// The most of a skill file the model gets at once.
const MAX_FILE: usize = 64 * 1024;

/// The skills loaded since the set was last taken.
pub type Loaded = Arc<Mutex<BTreeSet<String>>>;

/// The `load_skill` tool over one session's catalog.
pub struct LoadSkill {
    catalog: Arc<Catalog>,
    loaded: Loaded,
}

impl LoadSkill {
    pub fn new(catalog: Arc<Catalog>, loaded: Loaded) -> LoadSkill {
        LoadSkill { catalog, loaded }
    }

    fn unknown(&self, name: &str) -> ToolOutput {
        let names: Vec<&str> = self
            .catalog
            .skills
            .iter()
            .map(Skill::name)
            .take(50)
            .collect();
        ToolOutput::error(format!(
            "no skill '{name}'; the skills are: {}",
            if names.is_empty() {
                "none".to_owned()
            } else {
                names.join(", ")
            }
        ))
    }

    /// The body and the file list of `skill`.
    fn body(&self, skill: &Skill) -> ToolOutput {
        let stats = &skill.stats;
        let mut out = format!(
            "Skill '{}' (from {}; used {} time{}, {} ended done)\n\n{}\n",
            skill.name(),
            skill.source.shown(skill.name()),
            stats.uses,
            if stats.uses == 1 { "" } else { "s" },
            stats.successes,
            skill.doc.body,
        );
        if skill.files.is_empty() {
            out.push_str("\nThe skill has no other files.\n");
        } else {
            out.push_str(&format!(
                "\nFiles of this skill (read one with {NAME} {{\"name\": \"{}\", \"path\": \"<file>\"}}):\n",
                skill.name()
            ));
            for file in &skill.files {
                out.push_str(&format!("- {file}\n"));
            }
        }
        if let Ok(mut loaded) = self.loaded.lock() {
            loaded.insert(skill.name().to_owned());
        }
        let summary = format!(
            "skill {} ({} line{}, {} file{})",
            skill.name(),
            skill.doc.body.lines().count(),
            plural(skill.doc.body.lines().count()),
            skill.files.len(),
            plural(skill.files.len())
        );
        ToolOutput::ok(out, summary)
    }

    /// One file of `skill`: text, cut at [`MAX_FILE`] with a note; binary files are described, not sent.
    fn file(&self, skill: &Skill, path: &str) -> ToolOutput {
        let bytes = if path == crate::store::skills::format::SKILL_FILE {
            skill.text.clone().into_bytes()
        } else {
            match self.catalog.read_file(skill, path) {
                Ok(bytes) => bytes,
                Err(message) => return ToolOutput::error(message),
            }
        };
        if super::tool::looks_binary(&bytes) {
            return ToolOutput::error(format!(
                "{path} is a binary file ({} bytes); it cannot be shown as text",
                bytes.len()
            ));
        }
        let text = String::from_utf8_lossy(&bytes);
        let summary = format!("{}/{path} ({} lines)", skill.name(), text.lines().count());
        if text.len() <= MAX_FILE {
            return ToolOutput::ok(text.into_owned(), summary);
        }
        let mut end = MAX_FILE;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        ToolOutput::ok(
            format!(
                "{}\n[... cut: the file has {} bytes and only the first {end} are shown]",
                &text[..end],
                text.len()
            ),
            summary,
        )
    }
}

impl Tool for LoadSkill {
    fn name(&self) -> &str {
        NAME
    }

    fn description(&self) -> &str {
        "Load a skill listed under Skills in the system prompt: its instructions and the list of its files. \
         Call it when the task matches a skill's description, before you start, and follow what it says. \
         With `path`, returns one file of the skill (a script, a reference document) instead."
    }

    fn parameters(&self) -> serde_json::Value {
        json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "The skill's name, as listed"},
                "path": {"type": "string", "description": "Optional: a file of the skill, relative to its folder, as listed by a first load_skill call"}
            },
            "required": ["name"]
        })
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Read
    }

    fn is_mutating(&self) -> bool {
        false
    }

    fn label(&self, args: &serde_json::Value) -> String {
        label(args)
    }

    fn execute(&self, _ctx: &ToolContext, args: &serde_json::Value) -> ToolOutput {
        let name = match str_arg(args, "name") {
            Ok(name) => name,
            Err(message) => return ToolOutput::error(message),
        };
        let Some(skill) = self.catalog.find(name) else {
            return self.unknown(name);
        };
        match opt_str_arg(args, "path") {
            Ok(Some(path)) => self.file(skill, path),
            Ok(None) => self.body(skill),
            Err(message) => ToolOutput::error(message),
        }
    }
}

/// The label of a `load_skill` call's line: `skill pdf`, `skill pdf/scripts/run.sh`.
pub fn label(args: &serde_json::Value) -> String {
    let name = args["name"].as_str().unwrap_or("?");
    match args["path"].as_str() {
        Some(path) => format!("skill {name}/{path}"),
        None => format!("skill {name}"),
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}
