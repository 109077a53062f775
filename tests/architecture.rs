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
    // Helpers of the unit tests only (`cfg(test)`): in no build a user runs.
    ("testing", &[]),
    ("model", &["protocol", "sse"]),
    // Config builds the model clients' tuning and reads keys through safety's secret store.
    ("config", &["protocol", "safety", "model"]),
    // The store never calls back into the agent: a step's message arrives as text (agent/step.rs makes it
    // with `protocol::commit_subject`), so what enters git is decided above it and written by it.
    ("store", &["protocol", "safety"]),
    // Language servers: started like commands (safety, store), configured (config); MCP's JSON-RPC message
    // shapes are shared through tools/mcp/jsonrpc.rs, a leaf file, so no file cycle comes of it.
    ("lsp", &["protocol", "safety", "store", "config", "tools"]),
    // Tools never talk to the model.
    (
        "tools",
        &["protocol", "safety", "store", "config", "sse", "lsp"],
    ),
    (
        "agent",
        &[
            "protocol", "safety", "config", "model", "tools", "store", "lsp",
        ],
    ),
    // Front-ends listen to events and answer approvals; they drive nothing.
    ("ui", &["protocol"]),
    (
        "cli",
        &[
            "protocol", "safety", "config", "model", "tools", "store", "agent", "ui", "lsp",
        ],
    ),
];

/// Leaves that every module may name.
const EVERYONE: &[&str] = &["sys", "testing"];

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

/// The top-level module a file belongs to (`src/agent/turn.rs` -> `agent`, `src/lib.rs` -> `lib`).
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

// ---- Cycles between files ----------------------------------------------------------------------------
//
// A file depends on another when it names an item path that resolves into it: `crate::x::y`, `super::y`,
// `self::y`, a `use` tree (grouped ones too), or `child::y` for a module the file declares. A path is
// resolved to the longest module prefix that has a file, so `crate::agent::Turn` is `agent/mod.rs` and
// `crate::agent::turn::Turn` is `agent/turn.rs`. Declaring `mod child;` is no dependency on the child.
// Two files that need each other cannot be read, tested or moved apart: every strongly connected
// component of more than one file is a cycle to break by moving the shared items to the file that owns them.

use std::collections::BTreeMap;

/// A token of Rust source with comments, string and char literals dropped: identifiers (keywords
/// included), `::`, and single punctuation characters.
#[derive(Clone, Debug, PartialEq)]
enum Token {
    Ident(String),
    PathSep,
    Punct(char),
}

/// Roughly lexes Rust: enough to see paths, `use` trees, `mod` blocks and braces.
fn tokens(text: &str) -> Vec<Token> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            i = skip_block_comment(&chars, i);
        } else if c == '"' {
            i = skip_string(&chars, i + 1);
        } else if (c == 'r' || c == 'b') && is_raw_string_start(&chars, i) {
            i = skip_raw_string(&chars, i);
        } else if c == 'b' && next == Some('"') {
            i = skip_string(&chars, i + 2);
        } else if c == '\'' {
            i = skip_char_or_lifetime(&chars, i);
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push(Token::Ident(chars[start..i].iter().collect()));
        } else if c.is_ascii_digit() {
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
        } else if c == ':' && next == Some(':') {
            out.push(Token::PathSep);
            i += 2;
        } else {
            if !c.is_whitespace() {
                out.push(Token::Punct(c));
            }
            i += 1;
        }
    }
    out
}

fn skip_block_comment(chars: &[char], mut i: usize) -> usize {
    let mut depth = 0;
    while i < chars.len() {
        if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
            depth += 1;
            i += 2;
        } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
            depth -= 1;
            i += 2;
            if depth == 0 {
                return i;
            }
        } else {
            i += 1;
        }
    }
    i
}

/// Past the closing quote of a string whose body starts at `i`.
fn skip_string(chars: &[char], mut i: usize) -> usize {
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 2,
            '"' => return i + 1,
            _ => i += 1,
        }
    }
    i
}

/// `r"`, `r#"`, `br"`, `br#"` at `i` (and not the end of an identifier such as `bar"`).
fn is_raw_string_start(chars: &[char], i: usize) -> bool {
    if i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_') {
        return false;
    }
    let mut j = i;
    if chars[j] == 'b' {
        j += 1;
    }
    if chars.get(j) != Some(&'r') {
        return false;
    }
    j += 1;
    while chars.get(j) == Some(&'#') {
        j += 1;
    }
    chars.get(j) == Some(&'"')
}

fn skip_raw_string(chars: &[char], mut i: usize) -> usize {
    while chars[i] != '#' && chars[i] != '"' {
        i += 1;
    }
    let mut hashes = 0;
    while chars[i] == '#' {
        hashes += 1;
        i += 1;
    }
    i += 1;
    while i < chars.len() {
        if chars[i] == '"' && (1..=hashes).all(|k| chars.get(i + k) == Some(&'#')) {
            return i + 1 + hashes;
        }
        i += 1;
    }
    i
}

/// A char literal (`'a'`, `'\n'`, `'\u{1F600}'`) is skipped; a lifetime (`'a`) leaves its name behind,
/// which is harmless.
fn skip_char_or_lifetime(chars: &[char], i: usize) -> usize {
    if chars.get(i + 1) == Some(&'\\') {
        let mut j = i + 2;
        while j < chars.len() && chars[j] != '\'' {
            j += 1;
        }
        return j + 1;
    }
    if chars.get(i + 2) == Some(&'\'') {
        return i + 3;
    }
    i + 1
}

/// The module path of a file under `src/` (`agent/mod.rs` and `agent.rs` -> `["agent"]`, `lib.rs` -> `[]`).
fn module_path(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
        parts.pop();
    }
    parts
}

/// `#[path = "file.rs"] mod name;` declarations: the module path they give a file other than its own.
fn path_attributes(text: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut lines = text.lines().map(str::trim);
    while let Some(line) = lines.next() {
        let Some(file) = line
            .strip_prefix("#[path = \"")
            .and_then(|rest| rest.strip_suffix("\"]"))
        else {
            continue;
        };
        for next in lines.by_ref() {
            if next.starts_with("#[") {
                continue;
            }
            let name = next
                .trim_start_matches("pub(crate) ")
                .trim_start_matches("pub ")
                .strip_prefix("mod ")
                .map(|rest| rest.trim_end_matches(';').trim().to_string());
            if let Some(name) = name {
                found.push((file.to_string(), name));
            }
            break;
        }
    }
    found
}

/// Every file of the crate with its module path (the binary's `main.rs` is another crate).
fn crate_files(src: &Path) -> BTreeMap<Vec<String>, PathBuf> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.sort();
    let mut modules = BTreeMap::new();
    let mut renamed = Vec::new();
    for file in &files {
        let rel = file.strip_prefix(src).expect("under src/").to_path_buf();
        if rel == Path::new("main.rs") {
            continue;
        }
        let text = fs::read_to_string(file).expect("a source file is UTF-8");
        let path = module_path(&rel);
        for (target, name) in path_attributes(&text) {
            let dir = rel.parent().unwrap_or(Path::new(""));
            let mut child = path.clone();
            child.push(name);
            renamed.push((dir.join(target), child));
        }
        modules.insert(path, rel);
    }
    for (rel, path) in renamed {
        modules.retain(|_, file| *file != rel);
        modules.insert(path, rel);
    }
    modules
}

/// The paths one `use` tree names, from just after `use` to its `;`, joined to `prefix`.
fn use_tree(
    tokens: &[Token],
    mut i: usize,
    prefix: &[String],
    out: &mut Vec<Vec<String>>,
) -> usize {
    let mut path = prefix.to_vec();
    while i < tokens.len() {
        match &tokens[i] {
            Token::Ident(name) if name == "as" => {
                i += 2;
            }
            Token::Ident(name) => {
                path.push(name.clone());
                i += 1;
            }
            Token::PathSep => i += 1,
            Token::Punct('{') => {
                i += 1;
                while i < tokens.len() && tokens[i] != Token::Punct('}') {
                    i = use_tree(tokens, i, &path, out);
                    if tokens.get(i) == Some(&Token::Punct(',')) {
                        i += 1;
                    }
                }
                return i + 1;
            }
            Token::Punct('*') => i += 1,
            _ => break,
        }
    }
    if path.last().is_some_and(|last| last == "self") {
        path.pop();
    }
    out.push(path);
    i
}

/// The item paths a file names, each as written (`crate::a::b`, `super::c`, `child::d`), with the
/// inline module (`mod tests { ... }`) it was written in.
fn named_paths(text: &str) -> Vec<(Vec<String>, Vec<String>)> {
    let tokens = tokens(text);
    let mut out = Vec::new();
    // Inline modules open at a brace depth: paths inside them resolve from there.
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut pending_mod: Option<String> = None;
    let mut depth = 0;
    let mut i = 0;
    while i < tokens.len() {
        let here: Vec<String> = inline.iter().map(|(name, _)| name.clone()).collect();
        match &tokens[i] {
            Token::Punct('{') => {
                depth += 1;
                if let Some(name) = pending_mod.take() {
                    inline.push((name, depth));
                }
                i += 1;
            }
            Token::Punct('}') => {
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
                depth -= 1;
                i += 1;
            }
            Token::Punct(';') => {
                pending_mod = None;
                i += 1;
            }
            Token::Ident(word) if word == "mod" => {
                if let Some(Token::Ident(name)) = tokens.get(i + 1) {
                    pending_mod = Some(name.clone());
                }
                i += 2;
            }
            // `pub(in crate::store)` says who may see an item: the path is no dependency.
            Token::Ident(word)
                if word == "in"
                    && i >= 2
                    && tokens[i - 1] == Token::Punct('(')
                    && tokens[i - 2] == Token::Ident("pub".into()) =>
            {
                i += 1;
                while matches!(tokens.get(i), Some(Token::Ident(_) | Token::PathSep)) {
                    i += 1;
                }
            }
            Token::Ident(word) if word == "use" => {
                let mut paths = Vec::new();
                i = use_tree(&tokens, i + 1, &[], &mut paths);
                out.extend(paths.into_iter().map(|p| (here.clone(), p)));
            }
            Token::Ident(first)
                if tokens.get(i + 1) == Some(&Token::PathSep)
                    && (i == 0 || tokens[i - 1] != Token::PathSep) =>
            {
                let mut path = vec![first.clone()];
                i += 1;
                while tokens.get(i) == Some(&Token::PathSep) {
                    match tokens.get(i + 1) {
                        Some(Token::Ident(name)) => {
                            path.push(name.clone());
                            i += 2;
                        }
                        _ => break,
                    }
                }
                out.push((here.clone(), path));
            }
            _ => i += 1,
        }
    }
    out
}

/// `mod name;` and `mod name {` declared at the top of a file: names a path may start with.
fn declared_modules(text: &str) -> BTreeSet<String> {
    let tokens = tokens(text);
    tokens
        .windows(2)
        .filter_map(|pair| match pair {
            [Token::Ident(m), Token::Ident(name)] if m == "mod" => Some(name.clone()),
            _ => None,
        })
        .collect()
}

/// The absolute module path a written path points into, or None when it leaves the crate.
fn absolute(
    module: &[String],
    inline: &[String],
    written: &[String],
    children: &BTreeSet<String>,
) -> Option<Vec<String>> {
    let mut base: Vec<String> = module.iter().chain(inline).cloned().collect();
    let mut rest = written;
    match rest.first().map(String::as_str) {
        Some("crate") => {
            base.clear();
            rest = &rest[1..];
        }
        Some("self") => rest = &rest[1..],
        Some("super") => {
            while rest.first().is_some_and(|s| s == "super") {
                base.pop()?;
                rest = &rest[1..];
            }
        }
        Some(first) if inline.is_empty() && children.contains(first) => {}
        _ => return None,
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

/// The file a module path lands in: the longest prefix of it that is a file of the crate.
fn file_of<'a>(
    modules: &'a BTreeMap<Vec<String>, PathBuf>,
    path: &[String],
) -> Option<&'a PathBuf> {
    (0..=path.len()).rev().find_map(|n| modules.get(&path[..n]))
}

/// Every file of the crate and the files each one depends on.
fn file_graph(src: &Path) -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
    let modules = crate_files(src);
    let mut graph = BTreeMap::new();
    for (module, rel) in &modules {
        let text = fs::read_to_string(src.join(rel)).expect("a source file is UTF-8");
        let children = declared_modules(&text);
        let mut deps = BTreeSet::new();
        for (inline, written) in named_paths(&text) {
            let Some(target) = absolute(module, &inline, &written, &children) else {
                continue;
            };
            if let Some(file) = file_of(&modules, &target) {
                if file != rel {
                    deps.insert(file.clone());
                }
            }
        }
        graph.insert(rel.clone(), deps);
    }
    graph
}

/// Tarjan's strongly connected components of more than one file: the cycles.
fn cycles(graph: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Vec<Vec<PathBuf>> {
    struct State<'a> {
        graph: &'a BTreeMap<PathBuf, BTreeSet<PathBuf>>,
        index: BTreeMap<&'a PathBuf, usize>,
        low: BTreeMap<&'a PathBuf, usize>,
        stack: Vec<&'a PathBuf>,
        on_stack: BTreeSet<&'a PathBuf>,
        found: Vec<Vec<PathBuf>>,
    }
    fn visit<'a>(s: &mut State<'a>, node: &'a PathBuf) {
        let n = s.index.len();
        s.index.insert(node, n);
        s.low.insert(node, n);
        s.stack.push(node);
        s.on_stack.insert(node);
        for next in s.graph.get(node).into_iter().flatten() {
            if !s.index.contains_key(next) {
                visit(s, next);
                let low = s.low[node].min(s.low[next]);
                s.low.insert(node, low);
            } else if s.on_stack.contains(next) {
                let low = s.low[node].min(s.index[next]);
                s.low.insert(node, low);
            }
        }
        if s.low[node] == s.index[node] {
            let mut component = Vec::new();
            while let Some(top) = s.stack.pop() {
                s.on_stack.remove(top);
                component.push(top.clone());
                if top == node {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.found.push(component);
            }
        }
    }
    let mut s = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for node in graph.keys() {
        if !s.index.contains_key(node) {
            visit(&mut s, node);
        }
    }
    s.found.sort();
    s.found
}

/// The edges inside one cycle, so the failure says which `use` to move.
fn edges_within(
    graph: &BTreeMap<PathBuf, BTreeSet<PathBuf>>,
    component: &[PathBuf],
) -> Vec<String> {
    let mut edges = Vec::new();
    for from in component {
        for to in graph.get(from).into_iter().flatten() {
            if component.contains(to) {
                edges.push(format!("    {} -> {}", from.display(), to.display()));
            }
        }
    }
    edges
}

#[test]
fn no_file_depends_on_itself_through_others() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = file_graph(&src);
    let edges: usize = graph.values().map(BTreeSet::len).sum();
    let found = cycles(&graph);
    eprintln!(
        "{} files, {edges} edges, {} cycles between files",
        graph.len(),
        found.len()
    );
    for component in &found {
        let names: Vec<String> = component.iter().map(|f| f.display().to_string()).collect();
        eprintln!("  {}", names.join(", "));
    }
    let report: Vec<String> = found
        .iter()
        .map(|component| {
            let names: Vec<String> = component.iter().map(|f| f.display().to_string()).collect();
            format!(
                "{}\n{}",
                names.join(", "),
                edges_within(&graph, component).join("\n")
            )
        })
        .collect();
    assert!(
        report.is_empty(),
        "{} cycles between files ({} files, {edges} edges): move the shared items to the file that owns them\n{}",
        report.len(),
        graph.len(),
        report.join("\n")
    );
}

#[test]
fn the_file_reader_resolves_paths_and_use_trees() {
    let text = "//! crate::ui in a doc\nuse super::{shell::{self, Word}, vars::*};\nuse turn::Turn as T;\nmod turn;\nfn f() { let s = \"crate::cli\"; crate::store::Meta::new(); std::fs::read(x); }\n#[cfg(test)]\nmod tests { use super::*; }\n";
    let children = declared_modules(text);
    let module = ["agent".to_string(), "run".to_string()];
    let resolved: Vec<Vec<String>> = named_paths(text)
        .iter()
        .filter_map(|(inline, written)| absolute(&module, inline, written, &children))
        .collect();
    let joined: Vec<String> = resolved.iter().map(|p| p.join("::")).collect();
    assert_eq!(
        joined,
        [
            "agent::shell",
            "agent::shell::Word",
            "agent::vars",
            "agent::run::turn::Turn",
            "store::Meta::new",
            "agent::run"
        ]
    );
}

#[test]
fn a_visibility_restriction_is_no_dependency() {
    let text = "pub(in crate::store) fn f() { crate::sys::g(); }\npub(crate) struct S;\n";
    let written: Vec<Vec<String>> = named_paths(text).into_iter().map(|(_, p)| p).collect();
    assert_eq!(written, [["crate", "sys", "g"]]);
}

#[test]
fn tarjan_finds_each_cycle_once_and_skips_chains() {
    let edge = |a: &str, b: &[&str]| {
        (
            PathBuf::from(a),
            b.iter().map(PathBuf::from).collect::<BTreeSet<_>>(),
        )
    };
    let graph: BTreeMap<PathBuf, BTreeSet<PathBuf>> = [
        edge("a.rs", &["b.rs"]),
        edge("b.rs", &["c.rs", "d.rs"]),
        edge("c.rs", &["a.rs"]),
        edge("d.rs", &["e.rs"]),
        edge("e.rs", &["d.rs"]),
        edge("f.rs", &["a.rs"]),
    ]
    .into_iter()
    .collect();
    let found: Vec<Vec<String>> = cycles(&graph)
        .iter()
        .map(|c| c.iter().map(|f| f.display().to_string()).collect())
        .collect();
    assert_eq!(found, [vec!["a.rs", "b.rs", "c.rs"], vec!["d.rs", "e.rs"]]);
}

/// One module-file style (issue 24): a module with files of its own is `name/mod.rs`, never `name.rs` beside a
/// `name/` folder, so a reader finds every module's root the same way.
#[test]
fn modules_with_folders_have_their_root_in_mod_rs() {
    fn walk(dir: &Path, mixed: &mut Vec<String>) {
        for entry in fs::read_dir(dir).expect("src/ is readable") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                if path.with_extension("rs").is_file() {
                    mixed.push(path.with_extension("rs").display().to_string());
                }
                walk(&path, mixed);
            }
        }
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut mixed = Vec::new();
    walk(&src, &mut mixed);
    assert!(
        mixed.is_empty(),
        "move each of these into its folder as mod.rs: {mixed:?}"
    );
}

/// A type is named for what it is: a bare `Outcome` says nothing a reader can use (issue 24, item 7; the last
/// one, the fleet's, is `TaskEnd`).
#[test]
fn no_type_is_named_outcome() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let vague: Vec<String> = files
        .iter()
        .flat_map(|file| {
            let text = fs::read_to_string(file).expect("a source file is readable");
            let found: Vec<String> = text
                .lines()
                .enumerate()
                .filter(|(_, line)| {
                    let words: Vec<&str> = line
                        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                        .filter(|w| !w.is_empty())
                        .collect();
                    words
                        .windows(2)
                        .any(|w| matches!(w[0], "enum" | "struct" | "type") && w[1] == "Outcome")
                })
                .map(|(n, _)| format!("{}:{}", file.display(), n + 1))
                .collect();
            found
        })
        .collect();
    assert!(
        vague.is_empty(),
        "name these types for what they are: {vague:?}"
    );
}
