//! Path confinement: every path the model names is resolved here before a tool touches it.
//!
//! The model works inside one checkout. It may name paths relative to the checkout root, or absolute paths
//! that lie inside it; nothing else. `.git` is out of bounds at any depth, because a write there could rewrite
//! history or plant a hook, and reading it only wastes context.
//!
//! Writes are also refused for names git itself refuses in a tree ([`git_refuses()`], git's `verify_path` with
//! `core.protectHFS` and `core.protectNTFS` on): names that macOS folds to `.git` (`.g\u{200c}it`, with an
//! ignorable code point) or that Windows reads as `.git` (`.git.`, `.git `, `git~1`, `.git::$INDEX_ALLOCATION`).
//! Committed, they make `git fsck --strict` fail on the session's branch, and on a user's Mac or Windows
//! machine they would be the repository's `.git`.
//!
//! This module decides, on paths: it returns the canonical form of a path the model may use. The open itself
//! goes through [`super::beneath`], which refuses any symlink met on the way, so a directory swapped for a
//! link to `/etc` between this check and the open is refused rather than followed.

use std::ffi::OsStr;
use std::fs;
use std::io;
use std::path::{Component, Path, PathBuf};

/// What the caller means to do with a path. Writes may not name the root itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

/// The error returned by [`resolve()`]. Each message is a sentence the model can act on.
#[derive(Debug, thiserror::Error)]
pub enum PathError {
    #[error("path '{0}' is outside the checkout; use a path relative to the repository root")]
    Outside(String),
    #[error("path '{0}' is inside .git, which is off limits; use git commands through `run` to inspect history")]
    GitDir(String),
    #[error("path '{0}' goes through a symlink that points outside the checkout; use a path inside the repository")]
    SymlinkEscape(String),
    #[error("path '{0}' is a symlink whose target does not exist")]
    DanglingSymlink(String),
    #[error("path '{path}' has a name git refuses ('{name}': {why}); choose another name")]
    GitRefuses {
        path: String,
        name: String,
        why: &'static str,
    },
    #[error("path '{0}' names the checkout root; give the path of a file")]
    RootNotWritable(String),
    #[error("cannot resolve the checkout root {}: {source}", root.display())]
    Root { root: PathBuf, source: io::Error },
    #[error("cannot resolve path '{path}': {source}")]
    Io { path: String, source: io::Error },
}

/// Resolves `user_path` against `root` and returns the path to open, or says why the model may not use it.
///
/// The result is absolute and starts with the canonical form of `root`. Symlinks inside the checkout are
/// followed (so a write lands on the file git tracks, not on the link); any symlink leading out of the
/// checkout, or into `.git`, is refused. An empty path means the root itself.
pub fn resolve(root: &Path, user_path: &str, intent: Access) -> Result<PathBuf, PathError> {
    let canonical_root = fs::canonicalize(root).map_err(|source| PathError::Root {
        root: root.to_path_buf(),
        source,
    })?;
    let relative = lexical_relative(root, &canonical_root, user_path)?;
    if intent == Access::Write {
        if let Some((name, why)) = git_refuses(&relative, false) {
            return Err(PathError::GitRefuses {
                path: user_path.to_string(),
                name,
                why,
            });
        }
    }
    let joined = canonical_root.join(&relative);
    let resolved = resolve_existing_prefix(&joined, user_path)?;
    let inside = resolved
        .strip_prefix(&canonical_root)
        .map_err(|_| PathError::SymlinkEscape(user_path.to_string()))?;
    if has_git_component(inside) {
        return Err(PathError::GitDir(user_path.to_string()));
    }
    // The final component was canonicalised above if it exists, so a write through a link out of the
    // checkout is already refused; what is left for writes is naming the root itself.
    if intent == Access::Write && inside.as_os_str().is_empty() {
        return Err(PathError::RootNotWritable(user_path.to_string()));
    }
    Ok(resolved)
}

/// Turns the model's path into a normalised path relative to the root, without touching the file system.
fn lexical_relative(
    root: &Path,
    canonical_root: &Path,
    user_path: &str,
) -> Result<PathBuf, PathError> {
    let given = Path::new(user_path);
    let rest = if given.is_absolute() {
        let normal =
            normalize_absolute(given).ok_or_else(|| PathError::Outside(user_path.to_string()))?;
        let stripped = normal
            .strip_prefix(canonical_root)
            .or_else(|_| normal.strip_prefix(root));
        stripped
            .map_err(|_| PathError::Outside(user_path.to_string()))?
            .to_path_buf()
    } else {
        given.to_path_buf()
    };
    let mut out = PathBuf::new();
    for component in rest.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return Err(PathError::Outside(user_path.to_string()));
                }
            }
            Component::Normal(name) => {
                if is_git_name(name) {
                    return Err(PathError::GitDir(user_path.to_string()));
                }
                out.push(name);
            }
            Component::RootDir | Component::Prefix(_) => {
                return Err(PathError::Outside(user_path.to_string()))
            }
        }
    }
    Ok(out)
}

/// Removes `.` and `..` from an absolute path; `None` if `..` climbs above `/`.
fn normalize_absolute(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                if !out.pop() || out.as_os_str().is_empty() {
                    return None;
                }
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    Some(out)
}

/// Canonicalises the deepest part of `path` that exists and appends the rest, which cannot contain symlinks
/// because it does not exist yet.
fn resolve_existing_prefix(path: &Path, user_path: &str) -> Result<PathBuf, PathError> {
    let mut existing = path;
    let mut missing: Vec<&OsStr> = Vec::new();
    loop {
        match fs::symlink_metadata(existing) {
            Ok(meta) => {
                let canonical = fs::canonicalize(existing).map_err(|source| {
                    if meta.file_type().is_symlink() && source.kind() == io::ErrorKind::NotFound {
                        PathError::DanglingSymlink(user_path.to_string())
                    } else {
                        PathError::Io {
                            path: user_path.to_string(),
                            source,
                        }
                    }
                })?;
                return Ok(missing
                    .iter()
                    .rev()
                    .fold(canonical, |acc, name| acc.join(name)));
            }
            Err(source) if source.kind() == io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(PathError::Io {
                    path: user_path.to_string(),
                    source,
                })
            }
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                missing.push(name);
                existing = parent;
            }
            // Unreachable in practice: the canonical root exists, so the loop stops there at the latest.
            _ => return Err(PathError::Outside(user_path.to_string())),
        }
    }
}

/// The first component of `rel` that git refuses to record in a tree, and why; `symlink` says whether the
/// last component is a symlink (a `.gitmodules` link is refused, as git does).
///
/// The rules are the one tree-path policy's ([`super::tree_path::component_rule()`], git's `verify_path`
/// with both `core.protectHFS` and `core.protectNTFS` on, which is git's default on macOS and Windows and
/// what `git fsck` checks everywhere), because a branch is pushed and checked out on other systems. Unlike
/// a tree that lands, a file the session writes here may have a backslash in its name (git on Linux records
/// it), so the backslash is judged as Windows reads it: each part between backslashes is a name too (`.git\x`
/// and `x\git~1` are `.git` there).
pub fn git_refuses(rel: &Path, symlink: bool) -> Option<(String, &'static str)> {
    use super::tree_path::{component_rule, EntryKind, Rule};
    let parts: Vec<_> = rel.components().collect();
    for (i, part) in parts.iter().enumerate() {
        let name = match part {
            Component::Normal(name) => name,
            Component::CurDir | Component::ParentDir => {
                return Some((
                    part.as_os_str().to_string_lossy().into_owned(),
                    "not a file name",
                ))
            }
            Component::RootDir | Component::Prefix(_) => continue,
        };
        let lossy = name.to_string_lossy();
        let kind = if symlink && i + 1 == parts.len() {
            EntryKind::Symlink
        } else {
            EntryKind::File
        };
        for piece in std::iter::once(name.as_encoded_bytes())
            .chain(name.as_encoded_bytes().split(|b| *b == b'\\'))
        {
            let why = match component_rule(piece, kind) {
                Some(Rule::DotGit) => "it would be read as .git on macOS or Windows",
                Some(Rule::SymlinkedGitmodules) => "a .gitmodules symlink",
                Some(Rule::Empty | Rule::DotComponent) if piece.len() == name.len() => {
                    "not a file name"
                }
                _ => continue,
            };
            return Some((lossy.into_owned(), why));
        }
    }
    None
}

fn has_git_component(path: &Path) -> bool {
    path.components()
        .any(|c| matches!(c, Component::Normal(name) if is_git_name(name)))
}

/// `.git`, compared without case: on case-insensitive file systems (macOS, Windows) `.GIT` is the same
/// directory.
fn is_git_name(name: &OsStr) -> bool {
    name.to_str()
        .is_some_and(|s| s.eq_ignore_ascii_case(".git"))
}

/// A checkout-relative path for output, `.` for the checkout itself.
pub fn display_rel(rel: &Path) -> String {
    if rel.as_os_str().is_empty() {
        ".".to_string()
    } else {
        rel.display().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn temp_root(tag: &str) -> PathBuf {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::SeqCst);
        let dir =
            std::env::temp_dir().join(format!("git-agent-path-{tag}-{}-{n}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("src")).unwrap();
        fs::create_dir_all(dir.join(".git")).unwrap();
        fs::write(dir.join("src/a.rs"), "fn a() {}\n").unwrap();
        fs::write(dir.join(".git/config"), "[core]\n").unwrap();
        fs::canonicalize(dir).unwrap()
    }

    #[test]
    fn relative_paths_resolve_inside() {
        let root = temp_root("rel");
        assert_eq!(
            resolve(&root, "src/a.rs", Access::Read).unwrap(),
            root.join("src/a.rs")
        );
        assert_eq!(
            resolve(&root, "./src/../src/a.rs", Access::Read).unwrap(),
            root.join("src/a.rs")
        );
        assert_eq!(
            resolve(&root, "new/dir/file.txt", Access::Write).unwrap(),
            root.join("new/dir/file.txt")
        );
        assert_eq!(resolve(&root, "", Access::Read).unwrap(), root);
        assert_eq!(resolve(&root, ".", Access::Read).unwrap(), root);
    }

    #[test]
    fn parent_escape_refused() {
        let root = temp_root("dotdot");
        let err = resolve(&root, "../x", Access::Read).unwrap_err();
        assert!(matches!(err, PathError::Outside(_)), "{err}");
        assert!(err.to_string().contains("outside the checkout"));
        assert!(resolve(&root, "src/../../x", Access::Write).is_err());
    }

    #[test]
    fn absolute_paths_only_inside_root() {
        let root = temp_root("abs");
        assert!(matches!(
            resolve(&root, "/etc/passwd", Access::Read),
            Err(PathError::Outside(_))
        ));
        let inside = root.join("src/a.rs");
        assert_eq!(
            resolve(&root, inside.to_str().unwrap(), Access::Read).unwrap(),
            inside
        );
        let sneaky = format!("{}/../x", root.display());
        assert!(matches!(
            resolve(&root, &sneaky, Access::Read),
            Err(PathError::Outside(_))
        ));
    }

    #[test]
    fn symlinks_out_of_root_refused() {
        let root = temp_root("link");
        symlink("/etc", root.join("etc")).unwrap();
        symlink("/etc/passwd", root.join("passwd")).unwrap();
        symlink("src/a.rs", root.join("inside")).unwrap();
        symlink("/nonexistent/target", root.join("dangling")).unwrap();
        assert!(matches!(
            resolve(&root, "etc/passwd", Access::Read),
            Err(PathError::SymlinkEscape(_))
        ));
        assert!(matches!(
            resolve(&root, "etc/newfile", Access::Write),
            Err(PathError::SymlinkEscape(_))
        ));
        assert!(matches!(
            resolve(&root, "passwd", Access::Write),
            Err(PathError::SymlinkEscape(_))
        ));
        assert!(matches!(
            resolve(&root, "dangling", Access::Write),
            Err(PathError::DanglingSymlink(_))
        ));
        // A link that stays inside resolves to its target, so writes land on the tracked file.
        assert_eq!(
            resolve(&root, "inside", Access::Write).unwrap(),
            root.join("src/a.rs")
        );
    }

    #[test]
    fn git_dir_refused_at_any_depth() {
        let root = temp_root("git");
        assert!(matches!(
            resolve(&root, ".git/config", Access::Read),
            Err(PathError::GitDir(_))
        ));
        assert!(matches!(
            resolve(&root, ".git", Access::Read),
            Err(PathError::GitDir(_))
        ));
        assert!(matches!(
            resolve(&root, "vendor/lib/.git/HEAD", Access::Write),
            Err(PathError::GitDir(_))
        ));
        assert!(matches!(
            resolve(&root, ".GIT/config", Access::Write),
            Err(PathError::GitDir(_))
        ));
        symlink(".git", root.join("sneaky")).unwrap();
        assert!(matches!(
            resolve(&root, "sneaky/config", Access::Write),
            Err(PathError::GitDir(_))
        ));
        // Names that merely start with .git are fine.
        assert!(resolve(&root, ".gitignore", Access::Write).is_ok());
    }

    /// Names around `.git` and `.gitmodules` that git refuses or takes, HFS+ and NTFS spellings included.
    const NAMES: &[&str] = &[
        ".git",
        ".GIT",
        ".Git",
        ".g\u{200c}it",
        "\u{feff}.git",
        ".gi\u{200d}t",
        ".git\u{200e}",
        "\u{202e}.git",
        ".g\u{206a}it",
        ".git.",
        ".git ",
        ".git. .",
        ".git...",
        "git~1",
        "GIT~1",
        "git~1.",
        "git~1 ",
        ".git::$INDEX_ALLOCATION",
        ".git:",
        ".git:stream",
        ".git\\x",
        "x\\.git",
        "a\\git~1\\b",
        ".gitmodules",
        ".gitignore",
        ".gitattributes",
        ".git~1",
        "git~2",
        "git~10",
        "a.git",
        ".gitx",
        "x.git.",
        "git",
        "GIT",
        ".g it",
        ".g\u{200b}it",
        "con",
        "aux.c",
        "a:b",
        "x\\y",
        "trailing.",
        "sp ace ",
        "\u{e9}t\u{e9}",
        ".",
        "..",
    ];

    /// What git itself (`update-index` with core.protectHFS and core.protectNTFS) says of each name, as a
    /// regular file and as a symlink.
    #[test]
    fn git_refuses_what_git_refuses() {
        let dir =
            std::env::temp_dir().join(format!("git-agent-path-verify-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let git = |args: &[&str]| {
            std::process::Command::new("git")
                .args(["-c", "core.protectHFS=true", "-c", "core.protectNTFS=true"])
                .args(args)
                .current_dir(&dir)
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .output()
                .unwrap()
        };
        fs::create_dir_all(&dir).unwrap();
        assert!(git(&["init", "-q"]).status.success());
        let blob = String::from_utf8(git(&["hash-object", "-w", "/dev/null"]).stdout).unwrap();
        for symlink in [false, true] {
            let mode = if symlink { "120000" } else { "100644" };
            let mut names: Vec<String> = NAMES.iter().map(|n| n.to_string()).collect();
            names.extend(NAMES.iter().map(|n| format!("dir/{n}")));
            for name in names {
                if name.ends_with("/.") || name.ends_with("/..") {
                    continue;
                }
                let info = format!("{mode},{},{name}", blob.trim());
                let git_says_ok = git(&["update-index", "--add", "--cacheinfo", &info])
                    .status
                    .success();
                let ours = git_refuses(Path::new(&name), symlink);
                assert_eq!(
                    ours.is_none(),
                    git_says_ok,
                    "{name:?} (symlink: {symlink}): git {} it, we say {ours:?}",
                    if git_says_ok { "takes" } else { "refuses" }
                );
            }
        }
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn writes_to_names_git_refuses_are_refused() {
        let root = temp_root("verify");
        for name in [
            ".git.",
            "git~1/x",
            "src/.g\u{200c}it/config",
            ".git::$INDEX_ALLOCATION/x",
        ] {
            let err = resolve(&root, name, Access::Write).unwrap_err();
            assert!(
                matches!(err, PathError::GitRefuses { .. } | PathError::GitDir(_)),
                "{name}: {err}"
            );
            assert!(
                err.to_string().contains("choose another name") || err.to_string().contains(".git"),
                "{err}"
            );
        }
        let err = resolve(&root, "a/git~1", Access::Write).unwrap_err();
        assert_eq!(
            err.to_string(),
            "path 'a/git~1' has a name git refuses ('git~1': it would be read as .git on macOS or Windows); choose another name"
        );
        // Reading such a name is harmless on this system (it is no git dir here).
        assert!(resolve(&root, "git~1", Access::Read).is_ok());
        assert!(resolve(&root, "src/git~2", Access::Write).is_ok());
    }
}
