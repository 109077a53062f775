//! What every subcommand is given: the directory it runs in, the environment, the repository (opened once,
//! when first needed) and where its events go; and the small helpers every subcommand shares.

use std::cell::OnceCell;
use std::path::{Path, PathBuf};

use super::error::CommandError;
use crate::protocol::Sink;
use crate::store::Store;
use crate::ui;

/// The command context, built once in `cli::run` and passed to the subcommand.
pub struct Context {
    cwd: PathBuf,
    json: bool,
    store: OnceCell<Store>,
    sink: Option<Box<dyn Sink>>,
    /// Variables a command sets for itself over the environment (`exec` maps Codex's `CODEX_API_KEY` and
    /// `--config openai_base_url=...` onto the provider's variables).
    env_overrides: Vec<(String, String)>,
}

impl Context {
    /// A context for the current directory; `json` is the command's `--json`.
    pub fn new(json: bool) -> Result<Context, CommandError> {
        let cwd = std::env::current_dir().map_err(|e| {
            CommandError::internal(format!("cannot read the current directory: {e}"))
        })?;
        Ok(Context {
            cwd,
            json,
            store: OnceCell::new(),
            sink: None,
            env_overrides: Vec::new(),
        })
    }

    /// A context for `cwd`, without `--json` (ACP: each session works in the directory its editor gave).
    pub fn at(cwd: PathBuf) -> Context {
        Context {
            cwd,
            json: false,
            store: OnceCell::new(),
            sink: None,
            env_overrides: Vec::new(),
        }
    }

    pub fn cwd(&self) -> &Path {
        &self.cwd
    }

    /// A variable of the environment git-agent started with. Secret variables were moved out of the process
    /// environment at start-up (`safety::secrets`), so they are read from memory here, never from `std::env`.
    pub fn env(&self, name: &str) -> Option<String> {
        match self.env_overrides.iter().rev().find(|(n, _)| n == name) {
            Some((_, value)) => Some(value.clone()),
            None => crate::safety::secrets::var(name),
        }
    }

    /// Makes [`Context::env`] answer `value` for `name` from now on (the process environment is not changed).
    pub(super) fn set_env(&mut self, name: &str, value: String) {
        self.env_overrides.push((name.to_owned(), value));
    }

    /// Moves the context to `cwd` (`exec --cd DIR`), before the repository was opened.
    pub(super) fn set_cwd(&mut self, cwd: PathBuf) {
        self.cwd = cwd;
        self.store = OnceCell::new();
    }

    /// Sends the command's events, and its errors, to `sink` instead of the default one (`exec`'s Codex
    /// stream).
    pub(super) fn set_sink(&mut self, sink: Box<dyn Sink>) {
        self.sink = Some(sink);
    }

    /// True when stdout carries JSON events (`--json`) and nothing else.
    pub fn json(&self) -> bool {
        self.json
    }

    /// The repository of the current directory, opened on first use.
    pub fn store(&self) -> Result<&Store, CommandError> {
        if let Some(store) = self.store.get() {
            return Ok(store);
        }
        let store = Store::open(&self.cwd)?;
        Ok(self.store.get_or_init(|| store))
    }

    /// Where the command's events go: JSON lines on stdout with `--json`, else the live terminal renderer.
    /// Built on first use; errors go through it too once it exists (`cli::run`), so an error line starts on
    /// a line of its own after streamed text, and a script reading `--json` gets an `error` event.
    pub fn sink(&mut self) -> &mut dyn Sink {
        let json = self.json;
        self.sink.get_or_insert_with(|| ui::sink(json)).as_mut()
    }

    /// The sink if the command opened one.
    pub(super) fn open_sink(&mut self) -> Option<&mut dyn Sink> {
        match &mut self.sink {
            Some(sink) => Some(sink.as_mut()),
            None => None,
        }
    }
}

/// Where the session's branch points now, or why there is nothing to look at (`discard` removed it).
pub(crate) fn session_tip(
    store: &Store,
    meta: &crate::store::Meta,
) -> Result<crate::store::ObjectId, CommandError> {
    store.branch_tip(&meta.branch)?.ok_or_else(|| {
        CommandError::user(format!(
            "session {} was discarded: its branch {} is gone",
            meta.id, meta.branch
        ))
    })
}

/// Unix seconds as `YYYY-MM-DD HH:MM` (UTC).
pub(crate) fn when(secs: i64) -> String {
    crate::agent::date::datetime(secs)
}

/// A git command run in `dir` with the user's stdout and stderr (so pagers, colour and hooks behave as in git),
/// cleaned of variables that would redirect it (see [`crate::store::git`]).
pub(crate) fn git_inherit(dir: &std::path::Path) -> std::process::Command {
    crate::store::git::command(dir)
}

/// Returns a runtime for the async parts (HTTP streaming). One thread: the agent does one thing at a time and
/// a second thread would only cost memory.
pub(crate) fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
}
