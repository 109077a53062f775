//! Project instructions: `AGENTS.md` (else `CLAUDE.md`, else `.github/copilot-instructions.md`) in each directory
//! from the repository root down to where the user started, root first.
//!
//! The ones on the path to the working directory go into the system prompt (stable for the whole session, so
//! they stay in the cacheable prefix). A deeper directory's file is loaded the first time a file tool touches
//! that directory and added to the conversation as a message, once: loading them all up front would fill the
//! window with rules for code the task never visits. Each file is capped, and so is the session's total, because
//! an instructions file is repository content the model did not ask for.

use std::collections::HashSet;
use std::path::{Component, Path, PathBuf};

/// The names looked for in each directory, in order of preference: the first one found is used.
const NAMES: &[&str] = &["AGENTS.md", "CLAUDE.md", ".github/copilot-instructions.md"];
/// The most of one file that is used.
pub const FILE_CAP: usize = 32 * 1024;
/// The most of all files together, over the whole session.
pub const TOTAL_CAP: usize = 64 * 1024;

/// One instructions file, as loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loaded {
    /// Repository-relative path of the file, e.g. `sub/AGENTS.md`.
    pub path: String,
    pub content: String,
}

/// Which directories have been looked at, and how much has been loaded.
#[derive(Debug)]
pub struct Instructions {
    root: PathBuf,
    seen: HashSet<PathBuf>,
    total: usize,
}

impl Instructions {
    /// For the checkout at `root`; nothing is loaded yet.
    pub fn new(root: &Path) -> Instructions {
        Instructions {
            root: root.to_path_buf(),
            seen: HashSet::new(),
            total: 0,
        }
    }

    /// Reads later files from the checkout at `root` (a new session's instructions come from the user's work
    /// tree until its checkout exists; what was loaded stays loaded).
    pub fn rebase(&mut self, root: &Path) {
        self.root = root.to_path_buf();
    }

    /// The files from the root down to `cwd` (repository-relative), root first.
    pub fn initial(&mut self, cwd: &Path) -> Vec<Loaded> {
        self.down_to(cwd)
    }

    /// The files a tool call on `path` (repository-relative, as the model gave it) brings in: those of its
    /// directory and of every directory above it not seen yet. A path that is not a directory means its parent.
    pub fn touch(&mut self, path: &str) -> Vec<Loaded> {
        let Some(rel) = normalise(path) else {
            return Vec::new();
        };
        let dir = if self.root.join(&rel).is_dir() {
            rel
        } else {
            rel.parent().map(Path::to_path_buf).unwrap_or_default()
        };
        self.down_to(&dir)
    }

    /// Marks a file loaded by an earlier run of this session (resume), so it is not added twice.
    pub fn already_loaded(&mut self, path: &str) {
        let dir = instructions_dir(Path::new(path));
        self.seen.insert(dir);
    }

    fn down_to(&mut self, dir: &Path) -> Vec<Loaded> {
        let mut found = Vec::new();
        let mut current = PathBuf::new();
        let mut dirs = vec![PathBuf::new()];
        for part in dir.components() {
            if let Component::Normal(name) = part {
                current.push(name);
                dirs.push(current.clone());
            }
        }
        for dir in dirs {
            if !self.seen.insert(dir.clone()) {
                continue;
            }
            if let Some(loaded) = self.load(&dir) {
                found.push(loaded);
            }
        }
        found
    }

    fn load(&mut self, dir: &Path) -> Option<Loaded> {
        let budget = TOTAL_CAP.saturating_sub(self.total).min(FILE_CAP);
        if budget == 0 {
            return None;
        }
        for name in NAMES {
            let rel = dir.join(name);
            // Only regular files: a symlink could point outside the checkout.
            let Ok(meta) = std::fs::symlink_metadata(self.root.join(&rel)) else {
                continue;
            };
            if !meta.is_file() {
                continue;
            }
            let Some(bytes) = crate::safety::bounded::read_or_skip(
                &self.root.join(&rel),
                "an instructions file",
                crate::safety::bounded::INSTRUCTIONS_LIMIT,
            ) else {
                continue;
            };
            let text = String::from_utf8_lossy(&bytes);
            if text.trim().is_empty() {
                continue;
            }
            let content = cap(&text, budget);
            self.total += content.len();
            return Some(Loaded {
                path: rel.display().to_string(),
                content,
            });
        }
        None
    }
}

/// The directory an instructions file applies to (`sub/.github/copilot-instructions.md` applies to `sub`).
fn instructions_dir(path: &Path) -> PathBuf {
    let dir = path.parent().unwrap_or(Path::new(""));
    if dir.file_name().is_some_and(|n| n == ".github") {
        dir.parent().unwrap_or(Path::new("")).to_path_buf()
    } else {
        dir.to_path_buf()
    }
}

/// A repository-relative path without `.` and `..`; `None` when it leaves the root or names `.git`.
fn normalise(path: &str) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for part in Path::new(path.trim()).components() {
        match part {
            Component::Normal(name) if name == ".git" => return None,
            Component::Normal(name) => out.push(name),
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

/// `text` cut to at most `max` bytes at a char boundary, saying so when it was cut.
fn cap(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}\n[… cut: the file has {} bytes, {max} are used]",
        &text[..end],
        text.len()
    )
}

/// The system prompt section for the files found at start.
pub fn section(files: &[Loaded]) -> String {
    let mut out = String::from(
        "Project instructions (from the repository, root first; a deeper file takes precedence for its \
         directory; the user's goal takes precedence over all of them):\n",
    );
    for file in files {
        out.push_str(&format!(
            "\n<instructions path=\"{}\">\n{}\n</instructions>\n",
            file.path,
            file.content.trim_end()
        ));
    }
    out
}

/// The message that brings in a file found later, when a tool first touched its directory.
pub fn message(file: &Loaded) -> String {
    let dir = instructions_dir(Path::new(&file.path));
    let dir = if dir.as_os_str().is_empty() {
        ".".to_owned()
    } else {
        format!("{}/", dir.display())
    };
    format!(
        "Project instructions for {dir} (they apply to files under it and take precedence over the ones above \
         it):\n<instructions path=\"{}\">\n{}\n</instructions>",
        file.path,
        file.content.trim_end()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> tempdir::Dir {
        let dir = tempdir::Dir::new("instructions");
        dir.write("AGENTS.md", "root rules");
        dir.write("CLAUDE.md", "ignored: AGENTS.md wins");
        dir.write("a/CLAUDE.md", "a rules");
        dir.write("a/b/.github/copilot-instructions.md", "b rules");
        dir.write("c/AGENTS.md", &"x".repeat(FILE_CAP + 10));
        dir
    }

    #[test]
    fn root_first_preference_order_and_once() {
        let dir = tree();
        let mut ins = Instructions::new(dir.path());
        let first = ins.initial(Path::new("a"));
        let paths: Vec<_> = first.iter().map(|l| l.path.as_str()).collect();
        assert_eq!(paths, ["AGENTS.md", "a/CLAUDE.md"]);
        assert_eq!(first[0].content, "root rules");
        let deeper = ins.touch("a/b/main.rs");
        assert_eq!(deeper.len(), 1);
        assert_eq!(deeper[0].path, "a/b/.github/copilot-instructions.md");
        assert!(message(&deeper[0]).contains("for a/b/"));
        assert!(ins.touch("a/b/other.rs").is_empty(), "once");
        assert!(ins.touch("./a/../a/b").is_empty());
        assert!(ins.touch("../outside").is_empty());
    }

    #[test]
    fn caps_per_file_and_in_total() {
        let dir = tree();
        dir.write("d/AGENTS.md", &"y".repeat(FILE_CAP + 10));
        dir.write("e/AGENTS.md", "never reached");
        let mut ins = Instructions::new(dir.path());
        ins.initial(Path::new(""));
        let c = ins.touch("c/x");
        assert!(c[0].content.len() < FILE_CAP + 100 && c[0].content.contains("[… cut"));
        let d = ins.touch("d/x");
        assert!(d[0].content.len() < FILE_CAP, "the total cap leaves less");
        assert!(ins.touch("e/x").is_empty(), "the total cap is reached");
    }

    #[test]
    fn resumed_files_are_not_loaded_again() {
        let dir = tree();
        let mut ins = Instructions::new(dir.path());
        ins.already_loaded("a/b/.github/copilot-instructions.md");
        ins.initial(Path::new(""));
        let again = ins.touch("a/b/x.rs");
        assert_eq!(
            again.iter().map(|l| l.path.as_str()).collect::<Vec<_>>(),
            ["a/CLAUDE.md"]
        );
    }

    /// A throwaway directory for these tests (no tempfile crate in the tree).
    mod tempdir {
        use std::path::{Path, PathBuf};

        pub struct Dir(PathBuf);

        impl Dir {
            pub fn new(name: &str) -> Dir {
                use std::sync::atomic::{AtomicUsize, Ordering};
                static N: AtomicUsize = AtomicUsize::new(0);
                let path = std::env::temp_dir().join(format!(
                    "git-agent-{name}-{}-{}",
                    std::process::id(),
                    N.fetch_add(1, Ordering::SeqCst)
                ));
                let _ = std::fs::remove_dir_all(&path);
                std::fs::create_dir_all(&path).unwrap();
                Dir(path)
            }

            pub fn path(&self) -> &Path {
                &self.0
            }

            pub fn write(&self, rel: &str, text: &str) {
                let path = self.0.join(rel);
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(path, text).unwrap();
            }
        }

        impl Drop for Dir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }
}
