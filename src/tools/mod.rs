//! The tools the model can call. One definition per tool feeds both the schema sent to the model
//! ([`Tool::schema`]) and the executor ([`Tool::execute`]).
//!
//! A failure the model can fix (bad arguments, a missing file, a non-unique match) is returned to it as an
//! error [`ToolOutput`]; only host failures would abort a turn, and tools have none of those.

pub(crate) mod capture;
pub mod edit;
pub(crate) mod image;
pub(crate) mod jobs;
pub(crate) mod list;
pub(crate) mod lsp;
pub(crate) mod mcp;
pub(crate) mod process;
pub(crate) mod read;
pub mod search;
pub(crate) mod shell;
pub(crate) mod skill;
pub(crate) mod state;
#[cfg(test)]
pub(crate) mod testutil;
mod tool;
pub(crate) mod walk;
pub(crate) mod web_fetch;
pub(crate) mod web_search;
pub(crate) mod write;

pub use state::SessionState;
pub use tool::{confine, opt_str_arg, short, str_arg, u64_arg, Tool, ToolContext, ToolOutput};

use std::sync::Arc;

/// The tools of one session, in the order they are offered to the model. Clones share the tools.
#[derive(Clone)]
pub struct Registry {
    tools: Vec<Arc<dyn Tool>>,
}

impl Registry {
    /// All built-in tools.
    pub fn builtin() -> Registry {
        Registry {
            tools: vec![
                Arc::new(read::ReadFile),
                Arc::new(list::ListFiles),
                Arc::new(search::Search),
                Arc::new(edit::EditFile),
                Arc::new(write::WriteFile),
                Arc::new(shell::Run),
                Arc::new(jobs::Job),
            ],
        }
    }

    /// Adds a tool the session makes for itself (after the built-in ones, so the stable part of the
    /// request stays first).
    pub fn add(&mut self, tool: Arc<dyn Tool>) {
        self.tools.push(tool);
    }

    /// The tool called `name`: the one place a call's name is matched to a tool.
    pub fn find(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.iter().find(|t| t.name() == name)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<dyn Tool>> {
        self.tools.iter()
    }

    /// The names, in order (for the model's "unknown tool" message).
    pub fn names(&self) -> Vec<&str> {
        self.tools.iter().map(|t| t.name()).collect()
    }
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

/// The built-in tool called `name`, for readers of stored sessions (`show` labels its calls with it).
pub fn find(name: &str) -> Option<&'static dyn Tool> {
    static BUILTIN: std::sync::OnceLock<Registry> = std::sync::OnceLock::new();
    BUILTIN
        .get_or_init(Registry::builtin)
        .find(name)
        .map(|t| t.as_ref())
}
