//! The module map checks itself: every `crate::<module>` path in `src/` must follow an allowed edge of
//! DESIGN section 6 (cli -> agent -> (model, tools) -> store; protocol and safety are leaves; ui only
//! listens). A new edge is a design decision: make it here, with the reason, not by accident in a `use`.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

/// Which top-level modules each one may name. Anything may use `protocol`, the shared vocabulary.
const ALLOWED: &[(&str, &[&str])] = &[
    ("protocol", &[]),
    ("safety", &[]),
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
            if !allowed.contains(&target.as_str()) {
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

#[test]
fn the_rule_reader_sees_paths_and_ignores_comments() {
    let text = "use crate::store::{Meta, Store};\n// crate::ui is only mentioned\nlet x = crate::protocol::Status::Done; /// crate::cli\n";
    let found = referenced_modules(text);
    let found: Vec<&str> = found.iter().map(String::as_str).collect();
    assert_eq!(found, ["protocol", "store"]);
}
