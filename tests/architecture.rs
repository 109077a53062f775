//! The module map checks itself: every `crate::<module>` path in `src/` must follow an allowed edge of
//! DESIGN section 6 (cli -> agent -> (model, tools) -> store; protocol and safety are leaves; ui only
//! listens). A new edge is a design decision: make it here, with the reason, not by accident in a `use`.
//! `sys`, the platform layer, is a leaf every module may use, and the only place where `unsafe` and raw
//! `libc::` calls may appear.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

/// Which top-level modules each one may name. Anything may use `protocol`, the shared vocabulary.
const ALLOWED: &[(&str, &[&str])] = &[
    ("protocol", &[]),
    ("safety", &[]),
    // The platform layer: the one door to the OS (any module may use it: see EVERYONE).
    ("sys", &[]),
    // The byte-level SSE decoder: model replies and MCP's Streamable HTTP both arrive as event streams.
    ("sse", &[]),
    ("model", &["protocol", "sse"]),
    // Config builds the model clients' tuning and reads keys through safety's secret store.
    ("config", &["protocol", "safety", "model"]),
    ("store", &["protocol", "safety"]),
    // Tools never talk to the model.
    ("tools", &["protocol", "safety", "store", "config", "sse"]),
    (
        "agent",
        &["protocol", "safety", "config", "model", "tools", "store"],
    ),
    // Front-ends listen to events and answer approvals; they drive nothing.
    ("ui", &["protocol"]),
    (
        "cli",
        &[
            "protocol", "safety", "config", "model", "tools", "store", "agent", "ui",
        ],
    ),
];

/// Leaves that every module may name.
const EVERYONE: &[&str] = &["sys"];

/// At most this many `unsafe` in src/sys (issue 24: fewer than 20), each after a `SAFETY:` comment.
const MAX_UNSAFE: usize = 19;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("src/ is readable") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file belongs to (`src/agent/turn.rs` -> `agent`, `src/config.rs` -> `config`).
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).expect("under src/");
    let first = rel.components().next().expect("a file name");
    let name = first.as_os_str().to_string_lossy();
    name.trim_end_matches(".rs").to_string()
}

/// `crate::<name>` references in code (line comments and doc comments dropped).
fn referenced_modules(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or_default();
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            let after = &rest[at + "crate::".len()..];
            let name: String = after
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                found.insert(name);
            }
            rest = after;
        }
    }
    found
}

#[test]
fn modules_depend_only_along_the_allowed_edges() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let known: BTreeSet<&str> = ALLOWED.iter().map(|(m, _)| *m).collect();
    let mut violations = Vec::new();
    for file in &files {
        let module = module_of(&src, file);
        // The crate roots, and the build script (Cargo.toml's `build`), which is no module of the crate.
        if module == "lib" || module == "main" || module == "build" {
            continue;
        }
        let allowed = ALLOWED
            .iter()
            .find(|(m, _)| *m == module)
            .map(|(_, deps)| *deps)
            .unwrap_or_else(|| {
                panic!("src/{module} is a new top-level module: add it to ALLOWED with its edges")
            });
        let text = fs::read_to_string(file).expect("a source file is UTF-8");
        for target in referenced_modules(&text) {
            if target == module || !known.contains(target.as_str()) {
                continue;
            }
            if !allowed.contains(&target.as_str()) && !EVERYONE.contains(&target.as_str()) {
                violations.push(format!(
                    "{}: {module} -> {target}",
                    file.strip_prefix(&src).unwrap_or(file).display()
                ));
            }
        }
    }
    assert!(
        violations.is_empty(),
        "edges outside DESIGN section 6:\n{}",
        violations.join("\n")
    );
}

/// The lines of `text` (1-based) where the keyword `unsafe` appears in code (not in a comment, not as a part
/// of a longer name like `is_unsafe`).
fn unsafe_lines(text: &str) -> Vec<usize> {
    let is_name = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut lines = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let code = line.split("//").next().unwrap_or_default();
        let mut rest = code;
        while let Some(at) = rest.find("unsafe") {
            let before = rest[..at].chars().next_back();
            let after = rest[at + "unsafe".len()..].chars().next();
            if !before.is_some_and(is_name) && !after.is_some_and(is_name) {
                lines.push(n + 1);
            }
            rest = &rest[at + "unsafe".len()..];
        }
    }
    lines
}

/// Whether the line `line` (1-based) of `text` is preceded by a `SAFETY:` comment: in the comments and
/// attributes right above it, or earlier in the same statement.
fn has_safety_comment(text: &str, line: usize) -> bool {
    let lines: Vec<&str> = text.lines().collect();
    if lines[line - 1].contains("SAFETY:") {
        return true;
    }
    for above in lines[..line - 1].iter().rev() {
        let above = above.trim();
        if above.contains("SAFETY:") {
            return true;
        }
        if !(above.starts_with("//") || above.starts_with("#[")) {
            return false;
        }
    }
    false
}

#[test]
fn unsafe_code_lives_only_in_the_platform_layer() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut outside = Vec::new();
    let mut inside = Vec::new();
    let mut undocumented = Vec::new();
    for file in &files {
        let text = fs::read_to_string(file).expect("a source file is UTF-8");
        let shown = file
            .strip_prefix(&src)
            .unwrap_or(file)
            .display()
            .to_string();
        let in_sys = module_of(&src, file) == "sys";
        for line in unsafe_lines(&text) {
            if !in_sys {
                outside.push(format!("{shown}:{line}: unsafe"));
                continue;
            }
            inside.push(format!("{shown}:{line}"));
            if !has_safety_comment(&text, line) {
                undocumented.push(format!("{shown}:{line}"));
            }
        }
        if !in_sys {
            for (n, code) in text.lines().enumerate() {
                if code
                    .split("//")
                    .next()
                    .unwrap_or_default()
                    .contains("libc::")
                {
                    outside.push(format!("{shown}:{}: libc::", n + 1));
                }
            }
        }
    }
    assert!(
        outside.is_empty(),
        "unsafe code or raw libc calls outside src/sys (add a safe function there instead):\n{}",
        outside.join("\n")
    );
    assert!(
        undocumented.is_empty(),
        "unsafe in src/sys without a SAFETY: comment right above:\n{}",
        undocumented.join("\n")
    );
    assert!(
        inside.len() <= MAX_UNSAFE,
        "{} unsafe in src/sys, at most {MAX_UNSAFE}:\n{}",
        inside.len(),
        inside.join("\n")
    );
}

#[test]
fn the_unsafe_reader_sees_the_keyword_only() {
    let text = "fn is_unsafe() {}\n// unsafe in a comment\nlet x = unsafe { f() };\nunshare_unsafe(); // SAFETY: no\n";
    assert_eq!(unsafe_lines(text), [3]);
    let documented = "// SAFETY: why\n#[allow(x)]\nunsafe { f() }\nlet y = 1;\nunsafe { g() }\n";
    assert!(has_safety_comment(documented, 3));
    assert!(!has_safety_comment(documented, 5));
}

#[test]
fn the_rule_reader_sees_paths_and_ignores_comments() {
    let text = "use crate::store::{Meta, Store};\n// crate::ui is only mentioned\nlet x = crate::protocol::Status::Done; /// crate::cli\n";
    let found = referenced_modules(text);
    let found: Vec<&str> = found.iter().map(String::as_str).collect();
    assert_eq!(found, ["protocol", "store"]);
}
