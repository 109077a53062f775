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

use crate::store::ignore_files::Guard;

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
            // Files that cannot be read safely (the walk leaves such a directory out and says so), unreadable
            // or malformed ones count as empty.
            let Ok(exclude) = Guard::new(&[".gitignore"]).check_with_exclude(&abs) else {
                return DirRules {
                    gitignore: Gitignore::empty(),
                    exclude: None,
                };
            };
            let gitignore = Gitignore::new(abs.join(".gitignore")).0;
            let exclude = exclude.map(|file| {
                let mut builder = GitignoreBuilder::new(&abs);
                let _ = builder.add(file);
                builder.build().unwrap_or_else(|_| Gitignore::empty())
            });
            DirRules { gitignore, exclude }
        })
    }
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
