//! Which language servers a session may start: the built-in defaults (only when their binary is already on
//! PATH: a server is never downloaded), the user's `[lsp.<name>]` tables over them, and a repository's
//! tables when the user trusted them.

use std::path::{Path, PathBuf};

use crate::config::lsp::{LspConfig, LspTable};

/// One server the session knows how to start.
#[derive(Clone, Debug, PartialEq)]
pub struct ServerSpec {
    /// `pyright`, `typescript`, or the name of a `[lsp.<name>]` table.
    pub name: String,
    pub command: String,
    pub args: Vec<String>,
    /// File extensions it serves, without the dot.
    pub extensions: Vec<String>,
    /// Files whose folder is a workspace root (`Cargo.toml`, `package.json`); the checkout when none is found.
    pub root_markers: Vec<String>,
    pub initialization_options: Option<serde_json::Value>,
    pub enabled: bool,
    /// Where it was defined: `built-in`, `user config`, `.git-agent.toml`.
    pub origin: &'static str,
}

impl ServerSpec {
    /// Whether this server handles `path` (by its extension).
    pub fn serves(&self, path: &Path) -> bool {
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .unwrap_or_default();
        self.extensions.iter().any(|e| e.eq_ignore_ascii_case(ext))
    }

    /// The command found on PATH (or the path itself when it names one), if it exists.
    pub fn found(&self) -> Option<PathBuf> {
        which(&self.command)
    }

    /// The workspace root of `file` (checkout-relative): the nearest folder at or above it holding a root
    /// marker, never above the checkout; the checkout itself when none does.
    pub fn root_of(&self, checkout: &Path, file: &Path) -> PathBuf {
        let mut dir = file.parent();
        while let Some(rel) = dir {
            if rel.as_os_str().is_empty() {
                break;
            }
            let abs = checkout.join(rel);
            if self.root_markers.iter().any(|m| abs.join(m).exists()) {
                return abs;
            }
            dir = rel.parent();
        }
        checkout.to_path_buf()
    }
}

/// A built-in default: name, command alternatives (the first found on PATH wins), extensions, root markers.
struct Default {
    name: &'static str,
    commands: &'static [(&'static str, &'static [&'static str])],
    extensions: &'static [&'static str],
    root_markers: &'static [&'static str],
}

const DEFAULTS: &[Default] = &[
    Default {
        name: "rust-analyzer",
        commands: &[("rust-analyzer", &[])],
        extensions: &["rs"],
        root_markers: &["Cargo.toml"],
    },
    Default {
        name: "pyright",
        commands: &[
            ("pyright-langserver", &["--stdio"]),
            ("basedpyright-langserver", &["--stdio"]),
            ("ty", &["server"]),
        ],
        extensions: &["py", "pyi"],
        root_markers: &[
            "pyproject.toml",
            "pyrightconfig.json",
            "setup.py",
            "setup.cfg",
            "requirements.txt",
        ],
    },
    Default {
        name: "typescript",
        commands: &[("typescript-language-server", &["--stdio"])],
        extensions: &["ts", "tsx", "js", "jsx", "mjs", "cjs", "mts", "cts"],
        root_markers: &["tsconfig.json", "jsconfig.json", "package.json"],
    },
    Default {
        name: "gopls",
        commands: &[("gopls", &[])],
        extensions: &["go"],
        root_markers: &["go.mod", "go.work"],
    },
    Default {
        name: "clangd",
        commands: &[("clangd", &[])],
        extensions: &["c", "h", "cc", "cpp", "cxx", "hpp", "hh", "hxx"],
        root_markers: &["compile_commands.json", "compile_flags.txt", ".clangd"],
    },
    Default {
        name: "bash-language-server",
        commands: &[("bash-language-server", &["start"])],
        extensions: &["sh", "bash"],
        root_markers: &[],
    },
];

/// The servers a session may start, in order: built-in defaults whose binary is on PATH (or which a table
/// names), each overridden by the user's table of the same name; the user's other tables; then the
/// repository's tables when `repo_trusted`. `enabled = false` keeps a server listed but never started.
pub fn resolve(user: &LspConfig, repo: &LspConfig, repo_trusted: bool) -> Vec<ServerSpec> {
    let mut specs: Vec<ServerSpec> = DEFAULTS.iter().map(default_spec).collect();
    let mut tables: Vec<(&LspTable, &'static str)> =
        user.servers.iter().map(|t| (t, "user config")).collect();
    if repo_trusted {
        tables.extend(repo.servers.iter().map(|t| (t, ".git-agent.toml")));
    }
    for (table, origin) in tables {
        match specs.iter_mut().find(|s| s.name == table.name) {
            Some(spec) => apply(spec, table, origin),
            None => {
                let mut spec = ServerSpec {
                    name: table.name.clone(),
                    command: String::new(),
                    args: Vec::new(),
                    extensions: Vec::new(),
                    root_markers: Vec::new(),
                    initialization_options: None,
                    enabled: true,
                    origin,
                };
                apply(&mut spec, table, origin);
                // A new server without a command or extensions could never start; it is not listed.
                if !spec.command.is_empty() && !spec.extensions.is_empty() {
                    specs.push(spec);
                }
            }
        }
    }
    specs
}

fn default_spec(default: &Default) -> ServerSpec {
    // The first alternative on PATH, else the first (listed as not found).
    let (command, args) = default
        .commands
        .iter()
        .find(|(command, _)| which(command).is_some())
        .or_else(|| default.commands.first())
        .map_or(("", &[][..]), |(c, a)| (*c, *a));
    ServerSpec {
        name: default.name.to_string(),
        command: command.to_string(),
        args: args.iter().map(|a| a.to_string()).collect(),
        extensions: default.extensions.iter().map(|e| e.to_string()).collect(),
        root_markers: default.root_markers.iter().map(|m| m.to_string()).collect(),
        initialization_options: None,
        enabled: true,
        origin: "built-in",
    }
}

fn apply(spec: &mut ServerSpec, table: &LspTable, origin: &'static str) {
    if let Some(command) = &table.command {
        spec.command = command.clone();
        // A new command does not take the default's arguments.
        spec.args = table.args.clone().unwrap_or_default();
    } else if let Some(args) = &table.args {
        spec.args = args.clone();
    }
    if let Some(extensions) = &table.extensions {
        spec.extensions = extensions.clone();
    }
    if let Some(markers) = &table.root_markers {
        spec.root_markers = markers.clone();
    }
    if let Some(options) = &table.initialization_options {
        spec.initialization_options = Some(options.clone());
    }
    if let Some(enabled) = table.enabled {
        spec.enabled = enabled;
    }
    spec.origin = origin;
}

/// `command` on PATH, or as given when it contains a slash and exists.
pub fn which(command: &str) -> Option<PathBuf> {
    if command.is_empty() {
        return None;
    }
    if command.contains('/') {
        let path = PathBuf::from(command);
        return path.is_file().then_some(path);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(command))
        .find(|candidate| is_executable(candidate) && !is_idle_rustup_proxy(candidate, command))
}

/// A rustup proxy (`~/.cargo/bin/rust-analyzer -> rustup`) for a component no toolchain has: on PATH, but
/// it only prints "Unknown binary". Installed components live in `$RUSTUP_HOME/toolchains/*/bin`.
fn is_idle_rustup_proxy(path: &Path, command: &str) -> bool {
    let target = std::fs::read_link(path).unwrap_or_default();
    if target.file_name().and_then(|n| n.to_str()) != Some("rustup") {
        return false;
    }
    let home = std::env::var_os("RUSTUP_HOME")
        .map(PathBuf::from)
        .or_else(|| dirs::home_dir().map(|h| h.join(".rustup")));
    let Some(toolchains) = home.map(|h| h.join("toolchains")) else {
        return true;
    };
    let installed = std::fs::read_dir(toolchains).map(|dirs| {
        dirs.filter_map(Result::ok)
            .any(|d| d.path().join("bin").join(command).is_file())
    });
    !installed.unwrap_or(false)
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The LSP `languageId` of a file, by extension.
pub fn language_id(path: &Path) -> &'static str {
    match path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or_default()
    {
        "py" | "pyi" => "python",
        "ts" | "mts" | "cts" => "typescript",
        "tsx" => "typescriptreact",
        "js" | "mjs" | "cjs" => "javascript",
        "jsx" => "javascriptreact",
        "rs" => "rust",
        "go" => "go",
        "c" | "h" => "c",
        "cc" | "cpp" | "cxx" | "hpp" | "hh" | "hxx" => "cpp",
        "sh" | "bash" => "shellscript",
        _ => "plaintext",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_tables_override_defaults_and_repo_tables_need_trust() {
        let user = LspConfig {
            servers: vec![
                LspTable {
                    name: "pyright".into(),
                    command: Some("/opt/bp".into()),
                    ..LspTable::default()
                },
                LspTable {
                    name: "zig".into(),
                    command: Some("zls".into()),
                    extensions: Some(vec!["zig".into()]),
                    ..LspTable::default()
                },
            ],
            ..LspConfig::default()
        };
        let repo = LspConfig {
            servers: vec![LspTable {
                name: "evil".into(),
                command: Some("./pwn".into()),
                extensions: Some(vec!["py".into()]),
                ..LspTable::default()
            }],
            from_repo: true,
            ..LspConfig::default()
        };
        let specs = resolve(&user, &repo, false);
        let py = specs.iter().find(|s| s.name == "pyright").unwrap();
        assert_eq!((py.command.as_str(), py.args.len()), ("/opt/bp", 0));
        assert_eq!(py.origin, "user config");
        assert!(specs.iter().any(|s| s.name == "zig"));
        assert!(!specs.iter().any(|s| s.name == "evil"));
        assert!(resolve(&user, &repo, true).iter().any(|s| s.name == "evil"));
    }

    #[test]
    fn roots_are_the_nearest_marker_below_the_checkout() {
        let dir = std::env::temp_dir().join(format!("git-agent-lsp-root-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("web/src")).unwrap();
        std::fs::write(dir.join("web/package.json"), "{}").unwrap();
        let ts = resolve(&LspConfig::default(), &LspConfig::default(), false)
            .into_iter()
            .find(|s| s.name == "typescript")
            .unwrap();
        assert_eq!(ts.root_of(&dir, Path::new("web/src/a.ts")), dir.join("web"));
        assert_eq!(ts.root_of(&dir, Path::new("b.ts")), dir);
        assert!(ts.serves(Path::new("x/y.TSX")));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
