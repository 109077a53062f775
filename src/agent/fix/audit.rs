//! Did the fix weaken the check? A model told to make `cargo test` pass may do it the cheap way: delete the
//! failing test, mark it ignored, silence the lint, or edit the check's own configuration. The prompt tells
//! it not to; this reads the fix's diff and names every sign that it did anyway, so the summary (and the user
//! deciding whether to take the fix) sees it. Heuristics on purpose: they flag, they never block.

use crate::store::{ObjectId, Store, StoreError};

/// One sign that the fix weakened the check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub path: String,
    /// What it did, in words: `deletes a test file`, `removes 2 tests`, `touches the check's configuration`.
    pub what: String,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path, self.what)
    }
}

/// Files larger than this are not read for markers (generated files, data).
const MAX_READ: usize = 1 << 20;

/// Lines that define one test, per language (trimmed line starts).
const TEST_MARKERS: &[&str] = &[
    "#[test]",
    "#[tokio::test",
    "#[rstest",
    "def test_",
    "async def test_",
    "func Test",
    "@Test",
    "it(",
    "test(",
    "it('",
    "it(\"",
];

/// Markers that skip or ignore a test.
const SKIP_MARKERS: &[&str] = &[
    "#[ignore",
    "@pytest.mark.skip",
    "@pytest.mark.xfail",
    "pytest.skip(",
    "@unittest.skip",
    "it.skip(",
    "test.skip(",
    "describe.skip(",
    "xit(",
    "xdescribe(",
    "t.Skip(",
    "@Ignore",
    "@Disabled",
];

/// Markers that silence a linter or the compiler's warnings.
const LINT_MARKERS: &[&str] = &[
    "#[allow(",
    "#![allow(",
    "eslint-disable",
    "# noqa",
    "# type: ignore",
    "@ts-ignore",
    "@ts-nocheck",
    "//nolint",
    "// nolint",
    "pylint: disable",
    "@SuppressWarnings",
];

/// Files that configure checks whatever the command is: linters, formatters, test runners, CI, git-agent.
const CHECK_CONFIG: &[&str] = &[
    ".git-agent.toml",
    ".pre-commit-config.yaml",
    "clippy.toml",
    ".clippy.toml",
    "rustfmt.toml",
    ".rustfmt.toml",
    ".cargo/config.toml",
    ".cargo/config",
    "Makefile",
    "makefile",
    "GNUmakefile",
    "justfile",
    "package.json",
    "tsconfig.json",
    "jest.config.js",
    "jest.config.ts",
    "vitest.config.ts",
    "vitest.config.js",
    "eslint.config.js",
    "eslint.config.mjs",
    ".eslintrc",
    ".eslintrc.js",
    ".eslintrc.json",
    ".eslintrc.yml",
    ".prettierrc",
    "pytest.ini",
    "pyproject.toml",
    "setup.cfg",
    "tox.ini",
    "conftest.py",
    ".flake8",
    "ruff.toml",
    ".ruff.toml",
    "mypy.ini",
    ".golangci.yml",
    ".golangci.yaml",
    ".gitlab-ci.yml",
];

/// The signs of weakening in the change from `from` to `tip`, for the check `command`.
pub fn audit(
    store: &Store,
    from: ObjectId,
    tip: ObjectId,
    command: &str,
) -> Result<Vec<Finding>, StoreError> {
    let mut findings = Vec::new();
    for change in store.changes(from, tip)? {
        let path = change.path;
        if is_check_config(&path, command) {
            findings.push(finding(&path, "touches the check's configuration"));
        }
        if change.status == 'D' {
            if looks_like_test_file(&path) {
                findings.push(finding(&path, "deletes a test file"));
            }
            continue;
        }
        let old = text_at(store, from, &path)?;
        let new = text_at(store, tip, &path)?;
        let (Some(new), old) = (new, old.unwrap_or_default()) else {
            continue;
        };
        let removed = count(&old, TEST_MARKERS).saturating_sub(count(&new, TEST_MARKERS));
        if removed > 0 {
            findings.push(finding(
                &path,
                &format!("removes {removed} test{}", plural(removed)),
            ));
        }
        if count(&new, SKIP_MARKERS) > count(&old, SKIP_MARKERS) {
            findings.push(finding(&path, "marks tests skipped or ignored"));
        }
        if count(&new, LINT_MARKERS) > count(&old, LINT_MARKERS) {
            findings.push(finding(&path, "silences a lint or warning"));
        }
    }
    Ok(findings)
}

fn finding(path: &str, what: &str) -> Finding {
    Finding {
        path: path.to_owned(),
        what: what.to_owned(),
    }
}

/// The file at `path` in `commit` as text, if it is there, small and not binary.
fn text_at(store: &Store, commit: ObjectId, path: &str) -> Result<Option<String>, StoreError> {
    Ok(store
        .blob_at(commit, path)?
        .filter(|(data, _)| data.len() <= MAX_READ && !data.contains(&0))
        .map(|(data, _)| String::from_utf8_lossy(&data).into_owned()))
}

/// Lines of `text` that start (after indentation) with one of `markers`, or hold a comment marker.
fn count(text: &str, markers: &[&str]) -> usize {
    text.lines()
        .filter(|line| {
            let line = line.trim_start();
            markers
                .iter()
                .any(|m| line.starts_with(m) || (is_comment_marker(m) && line.contains(m)))
        })
        .count()
}

/// Markers that live in comments or at the end of a line rather than at its start.
fn is_comment_marker(marker: &str) -> bool {
    marker.contains("noqa")
        || marker.contains("ignore")
        || marker.contains("disable")
        || marker.contains("nolint")
        || marker.contains("ts-")
}

/// Extensions of the scripts and settings a command may name (`sh ci/check.sh`, `make -f ci.mk`, `--config
/// lint.toml`); a data file it names (`grep -q x file.txt`) is what is checked, not how.
const SCRIPT_EXTENSIONS: &[&str] = &[
    "sh", "bash", "mk", "toml", "yaml", "yml", "json", "ini", "cfg", "conf", "py", "js",
];

/// True for the check's own configuration: a script or settings file the command names, a known
/// configuration file of linters, test runners and CI, or a CI workflow.
fn is_check_config(path: &str, command: &str) -> bool {
    let script = path
        .rsplit_once('.')
        .is_some_and(|(_, ext)| SCRIPT_EXTENSIONS.contains(&ext));
    let named = script
        && command
            .split(|c: char| c.is_whitespace() || c == ';' || c == '&' || c == '|')
            .map(|word| word.trim_matches(|c| c == '\'' || c == '"'))
            .map(|word| word.trim_start_matches("./"))
            .any(|word| !word.is_empty() && word == path);
    let name = path.rsplit('/').next().unwrap_or(path);
    named
        || CHECK_CONFIG.contains(&path)
        || (CHECK_CONFIG.contains(&name) && name != "package.json" && name != "Makefile")
        || path.starts_with(".github/workflows/")
}

/// A file that holds tests by where it is or what it is called.
fn looks_like_test_file(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    let in_test_dir = path
        .split('/')
        .rev()
        .skip(1)
        .any(|dir| matches!(dir, "test" | "tests" | "__tests__" | "spec" | "testdata"));
    let stem = name.split('.').next().unwrap_or(name);
    in_test_dir
        || stem.starts_with("test_")
        || stem.ends_with("_test")
        || stem.ends_with("_spec")
        || stem.ends_with("Test")
        || name.contains(".test.")
        || name.contains(".spec.")
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_are_counted_where_they_live() {
        let old = "#[test]\nfn a() {}\n    #[test]\n    fn b() {}\n";
        let new = "#[test]\nfn a() {}\n";
        assert_eq!(count(old, TEST_MARKERS) - count(new, TEST_MARKERS), 1);
        assert_eq!(count("x = 1  # noqa: E501\n", LINT_MARKERS), 1);
        assert_eq!(count("    #[allow(dead_code)]\n", LINT_MARKERS), 1);
        assert_eq!(count("#[ignore]\n#[test]\n", SKIP_MARKERS), 1);
        assert_eq!(count("let allow = 1;\n", LINT_MARKERS), 0);
    }

    #[test]
    fn check_configuration_and_test_files() {
        assert!(is_check_config("ci/check.sh", "sh ./ci/check.sh --all"));
        assert!(is_check_config(".git-agent.toml", "cargo test"));
        assert!(is_check_config("web/.eslintrc.json", "npm run lint"));
        assert!(is_check_config(".github/workflows/ci.yml", "cargo test"));
        assert!(!is_check_config("src/lib.rs", "cargo test"));
        assert!(!is_check_config("file.txt", "grep -q fixed file.txt"));
        assert!(!is_check_config("sub/package.json", "cargo test"));
        assert!(looks_like_test_file("tests/cli.rs"));
        assert!(looks_like_test_file("pkg/parse_test.go"));
        assert!(looks_like_test_file("src/app.test.ts"));
        assert!(looks_like_test_file("test_math.py"));
        assert!(!looks_like_test_file("src/latest.rs"));
    }
}
