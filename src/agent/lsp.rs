//! The session's language servers: which may start (the user's config, a repository's only when trusted),
//! whether the `lsp` tools are offered, and the diagnostics delta after a file-changing call.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::config::trust::{Item, Ledger, Standing};
use crate::config::Settings;
use crate::lsp::delta::Delta;
use crate::lsp::pool::{Pool, PoolOptions};
use crate::lsp::spec::{self, ServerSpec};
use crate::protocol::{Event, Sink};
use crate::safety::sandbox::Sandbox;
use crate::tools::{Registry, SessionState};

/// What a session's servers will be, decided at its start.
#[derive(Clone, Debug)]
pub(super) struct LspPlan {
    specs: Vec<ServerSpec>,
    options: PoolOptions,
}

/// The plan the settings make. A repository's `[lsp]` tables count only when the user trusted them; when
/// not, the user is told once how to.
pub(super) fn plan(settings: &Settings, common_dir: &Path, sink: &mut dyn Sink) -> LspPlan {
    let (user, repo) = (&settings.user.lsp, &settings.repo.lsp);
    let mut trusted = false;
    if !repo.servers.is_empty() {
        let item = Item::lsp_servers(&repo.text);
        trusted = Ledger::for_repo(common_dir).standing(&item) == Standing::Trusted;
        if !trusted {
            sink.emit(&Event::Warning {
                message: "the language servers in .git-agent.toml are not trusted, so they do not start: \
                          read and trust them with `git agent trust`"
                    .to_owned(),
            });
        }
    }
    let mut options = PoolOptions::default();
    if let Some(on) = repo.diagnostics.or(user.diagnostics) {
        options.diagnostics = on;
    }
    if let Some(wait) = repo.diagnostics_wait.or(user.diagnostics_wait) {
        options.diagnostics_wait = wait;
    }
    if let Some(timeout) = repo.startup_timeout.or(user.startup_timeout) {
        options.start_timeout = timeout;
    }
    LspPlan {
        specs: spec::resolve(user, repo, trusted),
        options,
    }
}

impl LspPlan {
    /// Offers the `lsp`, `rename` and `replace_symbol` tools when a server could serve a file of `tree`.
    pub(super) fn offer(&self, tree: &Path, registry: &mut Registry) {
        let probe = Pool::new(
            self.specs.clone(),
            tree,
            Arc::new(Sandbox::off()),
            self.options.clone(),
        );
        if probe.available() {
            registry.add(Arc::new(crate::tools::lsp::Lsp));
            registry.add(Arc::new(crate::tools::lsp::Rename));
            registry.add(Arc::new(crate::tools::lsp::ReplaceSymbol));
        }
    }

    /// Gives the session's tools their pool, for the checkout at `root` (nothing starts yet).
    pub(super) fn attach(&self, root: &Path, sandbox: &Arc<Sandbox>, state: &SessionState) {
        let pool = Pool::new(
            self.specs.clone(),
            root,
            Arc::clone(sandbox),
            self.options.clone(),
        );
        state.set_lsp(Arc::new(pool));
    }
}

/// Syncs a call's changed files to their servers and returns what they found new (on this thread: it waits,
/// bounded by the diagnostics wait). `old` gives a file's text before the call, when the branch had it.
pub(super) fn after_change(
    state: &SessionState,
    changed: &[PathBuf],
    old: impl Fn(&Path) -> Option<String>,
) -> Option<Delta> {
    let pool = state.lsp()?;
    let files: Vec<(PathBuf, Option<String>)> =
        changed.iter().map(|rel| (rel.clone(), old(rel))).collect();
    pool.after_change(&files)
}

/// The failures of servers not told yet (each is told once).
pub(super) fn warnings(state: &SessionState) -> Vec<String> {
    state
        .lsp()
        .map(|pool| pool.take_warnings())
        .unwrap_or_default()
}
