//! The one path policy for writing a tree's entries into a folder (issue 22, findings 1 and 2).
//!
//! A tree that came from outside (a pulled session branch, a stored skill, a review) names paths; before any
//! of them becomes a file in the user's working tree or in a folder they chose, it passes [`check()`]. The
//! rules are git's own `verify_path()` (read-cache.c) with `core.protectHFS` and `core.protectNTFS` both on,
//! which is also what `git fsck` checks on every platform (fsck.c, `fsck_tree`): a tree is pushed on Linux
//! and checked out on a Mac or on Windows, so every platform's spellings count everywhere.
//!
//! Refused, each with its [`Rule`]:
//! - an empty path, an empty component (`a//b`, a leading or trailing `/`), `.` and `..`;
//! - an absolute path (`/etc/x`, a Windows drive `C:`), and a backslash anywhere (a separator on Windows,
//!   so `a\..\..\x` climbs there);
//! - `.git` in any case as a component, and the names that file systems read as `.git`: HFS+ drops the
//!   ignorable code points U+200C-U+200F, U+202A-U+202E, U+206A-U+206F and U+FEFF (`is_hfs_dotgit`); NTFS
//!   drops trailing dots and spaces, reads the 8.3 short name `git~1` and stops at `:` (an alternate data
//!   stream, `.git::$INDEX_ALLOCATION`) (`is_ntfs_dotgit`);
//! - a symbolic link named `.gitmodules` in any of those spellings (git follows it when reading submodules);
//!
//! A path below a gitlink (mode 160000) of the same tree needs no rule here: the gitlink's name would be an
//! entry of its tree twice (a commit and a tree), which git's fsck refuses (`duplicateEntries`) on every
//! pull; below a submodule of the user's work tree, landing refuses to write (`store/land/place.rs`).
//!
//! This module decides; it depends on nothing else in the crate and never touches the file system.

use std::fmt;

/// Which of the policy's rules refused a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// The path, or one of its components, is empty.
    Empty,
    /// A component is `.` or `..`.
    DotComponent,
    /// The path starts at a root or a drive.
    Absolute,
    /// A backslash, which Windows reads as a separator.
    Backslash,
    /// `.git` in some spelling (any case, HFS+ ignorable code points, NTFS short name, trailing dots or
    /// spaces, an alternate data stream).
    DotGit,
    /// A symbolic link named `.gitmodules` in some spelling.
    SymlinkedGitmodules,
}

impl Rule {
    /// The rule in words, for a message.
    pub fn describe(self) -> &'static str {
        match self {
            Rule::Empty => "an empty path or path component",
            Rule::DotComponent => "a `.` or `..` component",
            Rule::Absolute => "an absolute path",
            Rule::Backslash => "a backslash, a directory separator on Windows",
            Rule::DotGit => {
                "a `.git` component in some spelling (case, macOS or Windows look-alike)"
            }
            Rule::SymlinkedGitmodules => "a symbolic link named .gitmodules",
        }
    }
}

/// A refused path: which path, and which rule refused it. Its `Display` shows the path with control
/// characters and other invisible code points escaped, so it can be printed as it is.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct Refusal {
    /// The path as the tree names it (lossy UTF-8).
    pub path: String,
    pub rule: Rule,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", shown(&self.path), self.rule.describe())
    }
}

/// What kind of entry the path names: only a symbolic link can be a refused `.gitmodules`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryKind {
    File,
    Symlink,
    Other,
}

/// Checks one path of a tree against the policy.
pub fn check(path: &[u8], kind: EntryKind) -> Result<(), Refusal> {
    rule_for(path, kind).map_or(Ok(()), |rule| {
        Err(Refusal {
            path: String::from_utf8_lossy(path).into_owned(),
            rule,
        })
    })
}

/// [`check()`] of a path already held as text.
pub fn check_str(path: &str, kind: EntryKind) -> Result<(), Refusal> {
    check(path.as_bytes(), kind)
}

fn rule_for(path: &[u8], kind: EntryKind) -> Option<Rule> {
    if path.is_empty() {
        return Some(Rule::Empty);
    }
    if path[0] == b'/' || (path.len() >= 2 && path[0].is_ascii_alphabetic() && path[1] == b':') {
        return Some(Rule::Absolute);
    }
    if path.contains(&b'\\') {
        return Some(Rule::Backslash);
    }
    let parts: Vec<&[u8]> = path.split(|b| *b == b'/').collect();
    let last = parts.len() - 1;
    parts.iter().enumerate().find_map(|(i, part)| {
        let kind = if i == last { kind } else { EntryKind::Other };
        component_rule(part, kind)
    })
}

/// The rule that refuses one path component (a name between slashes), if any: empty, `.` or `..`, `.git`
/// in some spelling, or (when `kind` is a symlink) `.gitmodules` in some spelling. The whole-path rules
/// (absolute, backslash, below a gitlink) are not checked here.
pub fn component_rule(part: &[u8], kind: EntryKind) -> Option<Rule> {
    if part.is_empty() {
        Some(Rule::Empty)
    } else if part == b"." || part == b".." {
        Some(Rule::DotComponent)
    } else if is_dotgit(part) {
        Some(Rule::DotGit)
    } else if kind == EntryKind::Symlink && is_dotgitmodules(part) {
        Some(Rule::SymlinkedGitmodules)
    } else {
        None
    }
}

/// `.git` as git's `verify_dotfile`, `is_hfs_dotgit` and `is_ntfs_dotgit` read a component.
fn is_dotgit(part: &[u8]) -> bool {
    part.eq_ignore_ascii_case(b".git") || is_hfs_dot(part, "git") || is_ntfs_dotgit(part)
}

fn is_dotgitmodules(part: &[u8]) -> bool {
    part.eq_ignore_ascii_case(b".gitmodules")
        || is_hfs_dot(part, "gitmodules")
        || is_ntfs_dot_generic(part, b"gitmodules", b"gi7eba")
}

/// The code points HFS+ ignores when it compares names (git's `next_hfs_char`).
fn hfs_ignorable(c: char) -> bool {
    matches!(c as u32, 0x200c..=0x200f | 0x202a..=0x202e | 0x206a..=0x206f | 0xfeff)
}

/// True when `part`, with HFS+'s ignorable code points dropped and ASCII case folded, is `.<name>`
/// (git's `is_hfs_dot_generic`). A name that is not UTF-8 cannot fold to ASCII.
fn is_hfs_dot(part: &[u8], name: &str) -> bool {
    let Ok(text) = std::str::from_utf8(part) else {
        return false;
    };
    let mut folded = text.chars().filter(|c| !hfs_ignorable(*c));
    let wanted = std::iter::once('.').chain(name.chars());
    let mut wanted = wanted.peekable();
    while let Some(want) = wanted.next() {
        match folded.next() {
            Some(c) if c.to_ascii_lowercase() == want => {}
            _ => return false,
        }
        if wanted.peek().is_none() {
            return folded.next().is_none();
        }
    }
    false
}

/// git's `is_ntfs_dotgit`: `.git` or `git~1` (any case), followed by nothing but dots and spaces up to the
/// end or a `:` (an alternate data stream).
fn is_ntfs_dotgit(part: &[u8]) -> bool {
    let rest = if part.len() >= 4 && part[0] == b'.' && part[1..4].eq_ignore_ascii_case(b"git") {
        &part[4..]
    } else if part.len() >= 5 && part[..3].eq_ignore_ascii_case(b"git") && &part[3..5] == b"~1" {
        &part[5..]
    } else {
        return false;
    };
    only_dots_and_spaces_to_stream(rest)
}

/// Nothing but dots and spaces up to the end or a `:`.
fn only_dots_and_spaces_to_stream(rest: &[u8]) -> bool {
    for &c in rest {
        if c == b':' {
            return true;
        }
        if c != b'.' && c != b' ' {
            return false;
        }
    }
    true
}

/// git's `is_ntfs_dot_generic`: `.<name>`, its 6-character short name `~1`..`~4`, or the fall-back short
/// name from `shortname_prefix` (`gi7eba~N` for `.gitmodules`), each with trailing dots, spaces or a
/// stream.
fn is_ntfs_dot_generic(part: &[u8], name: &[u8], shortname_prefix: &[u8]) -> bool {
    if part.len() > name.len() && part[0] == b'.' && part[1..=name.len()].eq_ignore_ascii_case(name)
    {
        return only_dots_and_spaces_to_stream(&part[name.len() + 1..]);
    }
    if part.len() >= 8
        && part[..6].eq_ignore_ascii_case(&name[..6])
        && part[6] == b'~'
        && (b'1'..=b'4').contains(&part[7])
    {
        return only_dots_and_spaces_to_stream(&part[8..]);
    }
    // The fall-back short name: up to six characters of the prefix, `~`, then digits, eight in all.
    if part.len() < 8 {
        return false;
    }
    let mut saw_tilde = false;
    let mut i = 0;
    while i < 8 {
        let c = part[i];
        if saw_tilde {
            if !c.is_ascii_digit() {
                return false;
            }
        } else if c == b'~' {
            i += 1;
            if i >= part.len() || !(b'1'..=b'9').contains(&part[i]) {
                return false;
            }
            saw_tilde = true;
        } else if i >= 6 || c & 0x80 != 0 || c.to_ascii_lowercase() != shortname_prefix[i] {
            return false;
        }
        i += 1;
    }
    only_dots_and_spaces_to_stream(&part[8..])
}

/// A path for a message: control characters, bidi controls and other invisible code points escaped.
pub fn shown(path: &str) -> String {
    // The one rendering for exact text a person must judge: every control, bidi and zero-width
    // character (the HFS+ ignorables among them) shown as an escape.
    super::quote::visible(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(path: &str) -> Option<Rule> {
        check_str(path, EntryKind::File).err().map(|r| r.rule)
    }

    #[test]
    fn ordinary_paths_pass() {
        for path in [
            "a.txt",
            "src/lib.rs",
            ".github/workflows/ci.yml",
            ".gitignore",
            "git",
            "dir/.gitx",
            "x/git~2",
            "foo:bar",
            "..a",
            "a..",
            ".gitmodules",
        ] {
            assert_eq!(rule(path), None, "{path}");
        }
    }

    #[test]
    fn empty_and_dot_components_are_refused() {
        assert_eq!(rule(""), Some(Rule::Empty));
        assert_eq!(rule("a//b"), Some(Rule::Empty));
        assert_eq!(rule("a/"), Some(Rule::Empty));
        assert_eq!(rule("."), Some(Rule::DotComponent));
        assert_eq!(rule(".."), Some(Rule::DotComponent));
        assert_eq!(rule("../x"), Some(Rule::DotComponent));
        assert_eq!(
            rule("a/../../.git/hooks/pre-commit"),
            Some(Rule::DotComponent)
        );
        assert_eq!(rule("a/./b"), Some(Rule::DotComponent));
    }

    #[test]
    fn absolute_paths_and_backslashes_are_refused() {
        assert_eq!(rule("/etc/passwd"), Some(Rule::Absolute));
        assert_eq!(rule("C:/x"), Some(Rule::Absolute));
        assert_eq!(rule("c:x"), Some(Rule::Absolute));
        assert_eq!(rule("a\\..\\..\\x"), Some(Rule::Backslash));
        assert_eq!(rule(".git\\hooks"), Some(Rule::Backslash));
    }

    #[test]
    fn dotgit_in_any_case_is_refused() {
        for path in [
            ".git",
            ".git/hooks/pre-commit",
            ".GIT/config",
            "a/.Git/x",
            "a/b/.gIT",
        ] {
            assert_eq!(rule(path), Some(Rule::DotGit), "{path}");
        }
    }

    #[test]
    fn hfs_lookalikes_are_refused() {
        for ignorable in [
            '\u{200c}', '\u{200f}', '\u{202a}', '\u{202e}', '\u{206a}', '\u{206f}', '\u{feff}',
        ] {
            let path = format!(".g{ignorable}it/hooks/pre-commit");
            assert_eq!(rule(&path), Some(Rule::DotGit), "{path:?}");
            let path = format!("{ignorable}.GIT{ignorable}");
            assert_eq!(rule(&path), Some(Rule::DotGit), "{path:?}");
        }
        // Not ignorable: a different name on every file system.
        assert_eq!(rule(".g\u{2010}it"), None);
        assert_eq!(rule(".g\u{200c}itx"), None);
    }

    #[test]
    fn ntfs_lookalikes_are_refused() {
        for path in [
            ".git.",
            ".git. ",
            ".git  ..",
            "git~1",
            "GIT~1/hooks/x",
            "git~1. ",
            ".git::$INDEX_ALLOCATION/hooks/pre-commit",
            ".git:stream",
            "a/.GIT .",
        ] {
            assert_eq!(rule(path), Some(Rule::DotGit), "{path:?}");
        }
        for path in [".git.x", "git~10", "git~1x", ".gitx:y"] {
            assert_eq!(rule(path), None, "{path:?}");
        }
    }

    #[test]
    fn only_a_symlinked_gitmodules_is_refused() {
        let link = |p: &str| check_str(p, EntryKind::Symlink).err().map(|r| r.rule);
        for path in [
            ".gitmodules",
            "sub/.GITMODULES",
            ".gitmodules .",
            "gitmod~1",
            "GI7EBA~1",
            ".g\u{200c}itmodules",
        ] {
            assert_eq!(link(path), Some(Rule::SymlinkedGitmodules), "{path:?}");
            assert_eq!(rule(path), None, "{path:?} as a file");
        }
        assert_eq!(link(".gitmodules/x"), None);
        assert_eq!(link("gitmodules"), None);
        assert_eq!(link("gi7eba~a"), None);
    }

    #[test]
    fn a_refusal_names_the_path_shown_safely_and_the_rule() {
        let refusal = check_str("\u{1b}]52;c;x\u{7}/.git/hooks", EntryKind::File).unwrap_err();
        let text = refusal.to_string();
        assert!(
            !text.contains('\u{1b}') && !text.contains('\u{7}'),
            "{text}"
        );
        assert!(text.contains("\\x1b]52;c;x\\x07/.git/hooks"), "{text}");
        assert!(text.contains(".git"), "{text}");
        let hfs = check_str(".g\u{200c}it/x", EntryKind::File)
            .unwrap_err()
            .to_string();
        assert!(hfs.starts_with(".g\\u{200c}it/x"), "{hfs}");
    }

    /// What git itself says (`update-index` with core.protectHFS and core.protectNTFS on) agrees with the
    /// policy on every spelling above, as a file and as a link.
    #[test]
    fn the_policy_agrees_with_git() {
        let dir = std::env::temp_dir().join(format!("git-agent-tree-path-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
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
        assert!(git(&["init", "-q"]).status.success());
        let blob = String::from_utf8(git(&["hash-object", "-w", "/dev/null"]).stdout).unwrap();
        let names = [
            "a.txt",
            ".git",
            ".GIT",
            ".git.",
            ".git ",
            "git~1",
            ".git::$INDEX_ALLOCATION",
            ".g\u{200c}it",
            "\u{feff}.git",
            ".gitmodules",
            "gitmod~1",
            "gi7eba~1",
            ".gitmodules.",
            "x/.git/y",
            "foo:bar",
            ".gitx",
            "git~2",
        ];
        for (kind, mode) in [(EntryKind::File, "100644"), (EntryKind::Symlink, "120000")] {
            for name in names {
                let info = format!("{mode},{},{name}", blob.trim());
                let git_takes = git(&["update-index", "--add", "--cacheinfo", &info])
                    .status
                    .success();
                let ours = check_str(name, kind);
                assert_eq!(
                    ours.is_ok(),
                    git_takes,
                    "{name:?} {kind:?}: we say {ours:?}"
                );
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
