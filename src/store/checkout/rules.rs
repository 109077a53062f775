//! The scan's ignore rules, asked about one path at a time.
//!
//! [`Scan::of_dir()`](super::Scan::of_dir) learns what git ignores by walking: the `ignore` walker stacks each
//! directory's `.gitignore` on its parent's. The inotify watcher (see `watch.rs`) learns of single paths from
//! events instead, and must drop the same ones the walk would have dropped, or build output would become
//! step commits. [`Rules`] answers "would the walk skip this?" with the walker's own precedence: the deepest
//! `.gitignore` with an opinion wins, then `info/exclude` of the repository the directory belongs to, then the
//! global excludes file; `.git` is always skipped.
//!
//! Only the final component is judged: the watcher watches only directories the walk entered, so every
//! ancestor of a path it reports is already known not to be ignored.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use ignore::gitignore::{Gitignore, GitignoreBuilder};
use ignore::Match;

/// Ignore rules of one checkout, loaded lazily per directory.
pub(in crate::store) struct Rules {
    root: PathBuf,
    global: Gitignore,
    /// Checkout-relative directory -> its rules.
    dirs: HashMap<PathBuf, DirRules>,
}

struct DirRules {
    gitignore: Gitignore,
    /// `info/exclude` of the repository whose work tree starts here (the checkout root, nested repositories).
    exclude: Option<Gitignore>,
}

impl Rules {
    pub(in crate::store) fn new(root: &Path) -> Rules {
        Rules {
            root: root.to_owned(),
            global: crate::store::excludes::gitignore(root),
            dirs: HashMap::new(),
        }
    }

    /// Whether the scan's walk would skip the checkout-relative path `rel`.
    pub(in crate::store) fn is_ignored(&mut self, rel: &Path, is_dir: bool) -> bool {
        if rel.file_name().is_none_or(|n| n == ".git") {
            return true;
        }
        let abs = self.root.join(rel);
        let (mut gitignore, mut exclude) = (Match::None, Match::None);
        for dir in rel.ancestors().skip(1) {
            let rules = self.dir(dir);
            if gitignore.is_none() {
                gitignore = rules.gitignore.matched(&abs, is_dir).map(|_| ());
            }
            if exclude.is_none() {
                if let Some(ex) = &rules.exclude {
                    exclude = ex.matched(&abs, is_dir).map(|_| ());
                }
            }
        }
        [
            gitignore,
            exclude,
            self.global.matched(&abs, is_dir).map(|_| ()),
        ]
        .into_iter()
        .find(|m| !m.is_none())
        .is_some_and(|m| m.is_ignore())
    }

    /// Drops what was loaded for `rel_dir` and below: the directory is gone, and one that replaces it may
    /// bring other rules.
    pub(in crate::store) fn forget(&mut self, rel_dir: &Path) {
        self.dirs.retain(|dir, _| !dir.starts_with(rel_dir));
    }

    fn dir(&mut self, rel: &Path) -> &DirRules {
        let root = &self.root;
        self.dirs.entry(rel.to_owned()).or_insert_with(|| {
            let abs = root.join(rel);
            // Unreadable or malformed files count as empty, as in the walk.
            let gitignore = Gitignore::new(abs.join(".gitignore")).0;
            let exclude = common_dir(&abs).map(|git| {
                let mut builder = GitignoreBuilder::new(&abs);
                let _ = builder.add(git.join("info").join("exclude"));
                builder.build().unwrap_or_else(|_| Gitignore::empty())
            });
            DirRules { gitignore, exclude }
        })
    }
}

/// The git dir holding `info/exclude` for a work tree at `dir`, found the way the `ignore` walker finds it:
/// `.git` itself, or for a linked worktree (a `.git` file) the `commondir` of the dir it points to.
fn common_dir(dir: &Path) -> Option<PathBuf> {
    let dot_git = dir.join(".git");
    let md = std::fs::metadata(&dot_git).ok()?;
    if !md.is_file() {
        return Some(dot_git);
    }
    // Both files may have been written by a checkout's commands: bounded, no link, no FIFO.
    let read = |path: &Path| {
        let bytes = crate::sys::fs::read_regular(path, 4096).ok()?;
        String::from_utf8(bytes).ok()
    };
    let text = read(&dot_git)?;
    let git_dir = PathBuf::from(text.lines().next()?.strip_prefix("gitdir: ")?);
    let common = read(&git_dir.join("commondir"))?;
    let common = common.lines().next()?;
    Some(if common.starts_with('.') {
        git_dir.join(common)
    } else {
        PathBuf::from(common)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deepest_rule_wins_and_git_is_always_skipped() {
        let root = std::env::temp_dir().join(format!("git-agent-rules-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::fs::create_dir_all(root.join(".git/info")).unwrap();
        std::fs::write(root.join(".gitignore"), "*.log\nbuild/\n").unwrap();
        std::fs::write(root.join("a/.gitignore"), "!keep.log\n").unwrap();
        std::fs::write(root.join(".git/info/exclude"), "secret.txt\n").unwrap();
        let mut rules = Rules::new(&root);
        let p = Path::new;
        assert!(rules.is_ignored(p("x.log"), false));
        assert!(rules.is_ignored(p("a/b/x.log"), false));
        assert!(!rules.is_ignored(p("a/keep.log"), false));
        assert!(!rules.is_ignored(p("a/b/keep.log"), false));
        assert!(rules.is_ignored(p("a/build"), true));
        assert!(
            !rules.is_ignored(p("a/build"), false),
            "build/ names directories only"
        );
        assert!(rules.is_ignored(p("a/secret.txt"), false));
        assert!(rules.is_ignored(p("sub/.git"), true));
        assert!(!rules.is_ignored(p("a/b/c.rs"), false));
        std::fs::remove_dir_all(&root).unwrap();
    }
}
