//! `search`: ripgrep's engine (`grep-searcher`, `grep-regex`, `ignore`) behind one tool call.
//!
//! It walks the files `rg` would ([`super::walk`]: ignore rules honoured, hidden files only when asked, `.git`
//! never), in parallel, and skips binary files the way `rg` does: quit at the first NUL. A literal pattern
//! goes through the same matcher with `fixed_strings`, which hands the search to a substring finder (memchr's
//! `memmem`) instead of a regex engine. Results are sorted by path and line so that the same search gives
//! the same output, which keeps the model's context (and the tests) stable; the format is `rg -n`'s.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Mutex;

use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{
    BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkContextKind, SinkMatch,
};
use ignore::WalkState;
use serde_json::json;

use super::tool::{
    bool_arg, confine, cut_line, opt_str_arg, short, str_arg, u64_arg, Tool, ToolContext,
    ToolOutput,
};
use super::walk::{self, Filters};
use crate::protocol::ToolKind;
use crate::safety::path::Access;

const DEFAULT_MAX_RESULTS: u64 = 100;
/// Even when the model asks for more, this many lines is already more than it can use well.
const MAX_MAX_RESULTS: u64 = 2000;
/// Context lines asked for above this are capped: beyond it, read_file is the better tool.
const MAX_CONTEXT: u64 = 10;
/// Matched lines are cut here: a hit in minified code would otherwise cost thousands of tokens.
const MAX_LINE_CHARS: usize = 300;

pub struct Search;

impl Tool for Search {
    fn name(&self) -> &str {
        "search"
    }

    fn description(&self) -> &str {
        "Search file contents like `rg -n`: `pattern` is a Rust regex, or plain text with `literal`. Skips \
         .gitignored, binary and (unless `hidden`) hidden files. Output `path:line:text` (context lines \
         `path-line-text`), sorted, up to `max_results` lines (default 100). Narrow with `path`, `glob` and \
         `type` (a ripgrep type: rust, py, ...); `files_with_matches` lists only the files."
    }

    fn parameters(&self) -> serde_json::Value {
        json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string"},
                "literal": {"type": "boolean"},
                "case": {"type": "string", "enum": ["sensitive", "insensitive", "smart"], "description": "Default sensitive; smart: insensitive unless the pattern has an uppercase letter"},
                "path": {"type": "string", "description": "Directory or file (default: the root)"},
                "glob": {"type": "string", "description": "e.g. `*.rs`, `src/**/*.ts`, `!*_test.go` (a list too)"},
                "type": {"type": "string"},
                "hidden": {"type": "boolean"},
                "context": {"type": "integer", "minimum": 0, "maximum": 10, "description": "Lines around each match"},
                "files_with_matches": {"type": "boolean"},
                "max_results": {"type": "integer", "minimum": 1}
            },
            "required": ["pattern"]
        })
    }

    fn is_mutating(&self) -> bool {
        false
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Search
    }

    fn path_arg(&self) -> Option<&str> {
        Some("path")
    }

    fn label(&self, args: &serde_json::Value) -> String {
        format!(
            "search \"{}\"",
            short(
                args.get("pattern").and_then(|v| v.as_str()).unwrap_or("?"),
                60
            )
        )
    }

    fn execute(&self, ctx: &ToolContext, args: &serde_json::Value) -> ToolOutput {
        match search(ctx, args) {
            Ok(out) => out,
            Err(message) => ToolOutput::error(message),
        }
    }
}

/// How letter case is matched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Case {
    Sensitive,
    Insensitive,
    /// Insensitive unless the pattern has an uppercase letter (`rg -S`).
    Smart,
}

/// One search, as the arguments asked for it.
#[derive(Clone, Debug)]
pub struct Query {
    pub pattern: String,
    pub literal: bool,
    pub case: Case,
    pub context: usize,
    pub files_only: bool,
    pub max: usize,
    pub filters: Filters,
}

impl Query {
    fn from_args(args: &serde_json::Value) -> Result<Query, String> {
        let case = match opt_str_arg(args, "case")? {
            None if bool_arg(args, "case_insensitive")? => Case::Insensitive,
            None | Some("sensitive") => Case::Sensitive,
            Some("insensitive") => Case::Insensitive,
            Some("smart") => Case::Smart,
            Some(other) => {
                return Err(format!(
                    "argument `case` must be sensitive, insensitive or smart, not '{other}'"
                ))
            }
        };
        Ok(Query {
            pattern: str_arg(args, "pattern")?.to_string(),
            literal: bool_arg(args, "literal")?,
            case,
            context: u64_arg(args, "context")?.unwrap_or(0).min(MAX_CONTEXT) as usize,
            files_only: bool_arg(args, "files_with_matches")?,
            max: u64_arg(args, "max_results")?
                .unwrap_or(DEFAULT_MAX_RESULTS)
                .clamp(1, MAX_MAX_RESULTS) as usize,
            filters: Filters::from_args(args, false)?,
        })
    }
}

/// What one line of output is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Match,
    Before,
    After,
    /// `--` between two groups of context that do not touch.
    Break,
}

/// The lines found in one file (matches and their context, in order) and how many lines matched in all.
#[derive(Debug)]
struct FileHits {
    path: PathBuf,
    lines: Vec<(Kind, u64, String)>,
    count: usize,
}

fn search(ctx: &ToolContext, args: &serde_json::Value) -> Result<ToolOutput, String> {
    let query = Query::from_args(args)?;
    let path = opt_str_arg(args, "path")?.unwrap_or(".");
    let target = confine(ctx, path, Access::Read)?;
    if !target.abs.exists() {
        return Err(format!("'{path}' does not exist"));
    }
    let hits = run(ctx, &target.root, &target.abs, &query)?;
    Ok(render(&hits, &query))
}

/// Searches `dir` (inside the checkout `root`) and returns the hits sorted by path.
fn run(ctx: &ToolContext, root: &Path, dir: &Path, query: &Query) -> Result<Vec<FileHits>, String> {
    let matcher = build_matcher(query)?;
    let (builder, guard) = walk::builder(root, dir, &query.filters)?;
    // In files-only mode one match per file is enough, as with `rg -l`.
    let keep = if query.files_only { 1 } else { query.max };
    let mut hits = walk_and_search(ctx, &builder, root, &matcher, query, keep);
    walk::finish(&guard, root)?;
    hits.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(hits)
}

fn build_matcher(query: &Query) -> Result<RegexMatcher, String> {
    let pattern = &query.pattern;
    RegexMatcherBuilder::new()
        .fixed_strings(query.literal)
        .case_insensitive(query.case == Case::Insensitive)
        .case_smart(query.case == Case::Smart)
        // As rg does without --multiline: a match never spans lines, and NUL can never match because
        // binary detection stops at it.
        .line_terminator(Some(b'\n'))
        .ban_byte(Some(0))
        .build(pattern)
        .map_err(|e| {
            let hint = if query.literal {
                ""
            } else {
                "\n(escape special characters such as ( [ { . * + ? | \\ with a backslash, or set literal=true \
                 to search for the text as written)"
            };
            format!("invalid regex '{pattern}': {e}{hint}")
        })
}

/// Walks in parallel, searching each file with a per-thread searcher; stops early when the user interrupts.
fn walk_and_search(
    ctx: &ToolContext,
    builder: &ignore::WalkBuilder,
    root: &Path,
    matcher: &RegexMatcher,
    query: &Query,
    keep: usize,
) -> Vec<FileHits> {
    let found: Mutex<Vec<FileHits>> = Mutex::new(Vec::new());
    builder.build_parallel().run(|| {
        let found = &found;
        let mut searcher = SearcherBuilder::new()
            .binary_detection(BinaryDetection::quit(0))
            .line_number(true)
            .before_context(query.context)
            .after_context(query.context)
            .stop_on_nonmatch(false)
            .build();
        Box::new(move |entry| {
            if ctx.cancel.load(Ordering::Relaxed) {
                return WalkState::Quit;
            }
            let Ok(entry) = entry else {
                return WalkState::Continue;
            };
            // Symlinks are not followed (as in rg): a link could lead out of the checkout.
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                return WalkState::Continue;
            }
            if let Some(hits) = search_file(&mut searcher, matcher, entry.path(), keep) {
                let path = entry
                    .path()
                    .strip_prefix(root)
                    .unwrap_or(entry.path())
                    .to_path_buf();
                let hits = FileHits { path, ..hits };
                found
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .push(hits);
            }
            WalkState::Continue
        })
    });
    found
        .into_inner()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Searches one file; `None` when nothing matched, the file is binary, or it cannot be read.
fn search_file(
    searcher: &mut Searcher,
    matcher: &RegexMatcher,
    path: &Path,
    keep: usize,
) -> Option<FileHits> {
    let mut sink = Collector {
        lines: Vec::new(),
        count: 0,
        keep,
        binary: false,
    };
    searcher.search_path(matcher, path, &mut sink).ok()?;
    if sink.binary || sink.count == 0 {
        return None;
    }
    Some(FileHits {
        path: PathBuf::new(),
        lines: sink.lines,
        count: sink.count,
    })
}

struct Collector {
    lines: Vec<(Kind, u64, String)>,
    count: usize,
    keep: usize,
    binary: bool,
}

impl Collector {
    fn push(&mut self, kind: Kind, line: Option<u64>, bytes: &[u8]) {
        let text = String::from_utf8_lossy(bytes);
        let text = text.trim_end_matches('\n').trim_end_matches('\r');
        self.lines.push((
            kind,
            line.unwrap_or(0),
            cut_line(text, MAX_LINE_CHARS).into_owned(),
        ));
    }
}

impl Sink for Collector {
    type Error = io::Error;

    fn matched(&mut self, _searcher: &Searcher, mat: &SinkMatch<'_>) -> Result<bool, io::Error> {
        self.count += 1;
        if self.count <= self.keep {
            self.push(Kind::Match, mat.line_number(), mat.bytes());
        }
        Ok(true)
    }

    fn context(&mut self, _searcher: &Searcher, ctx: &SinkContext<'_>) -> Result<bool, io::Error> {
        // Context of the matches that will be shown: before-context up to the last kept match, and the
        // after-context that follows it.
        let kind = match ctx.kind() {
            SinkContextKind::Before => Kind::Before,
            _ => Kind::After,
        };
        if self.count < self.keep || (self.count == self.keep && kind == Kind::After) {
            self.push(kind, ctx.line_number(), ctx.bytes());
        }
        Ok(true)
    }

    fn context_break(&mut self, _searcher: &Searcher) -> Result<bool, io::Error> {
        if self.count < self.keep {
            self.lines.push((Kind::Break, 0, String::new()));
        }
        Ok(true)
    }

    fn binary_data(&mut self, _searcher: &Searcher, _offset: u64) -> Result<bool, io::Error> {
        // Like rg: a NUL means binary; stop and report nothing from this file.
        self.binary = true;
        Ok(false)
    }
}

fn render(hits: &[FileHits], query: &Query) -> ToolOutput {
    let total: usize = hits.iter().map(|h| h.count).sum();
    let files = hits.len();
    let summary = if query.files_only {
        format!("{files} {}", plural(files, "file", "files"))
    } else {
        format!(
            "{total} {} in {files} {}",
            plural(total, "match", "matches"),
            plural(files, "file", "files")
        )
    };
    if total == 0 {
        return ToolOutput::ok("no matches", summary);
    }
    let text = if query.files_only {
        render_files(hits, query.max)
    } else {
        render_lines(hits, query.max, query.context > 0)
    };
    ToolOutput::ok(text, summary)
}

fn render_files(hits: &[FileHits], max: usize) -> String {
    let mut text = String::new();
    for file in hits.iter().take(max) {
        text.push_str(&format!("{}\n", file.path.display()));
    }
    if hits.len() > max {
        let more = hits.len() - max;
        text.push_str(&format!(
            "... {more} more {} not shown; narrow with `path`, `glob` or `type`, or raise `max_results`\n",
            plural(more, "file", "files")
        ));
    }
    text
}

/// `rg -n` lines: `path:line:text` for matches, `path-line-text` for context, `--` between groups.
fn render_lines(hits: &[FileHits], max: usize, context: bool) -> String {
    let total: usize = hits.iter().map(|h| h.count).sum();
    let mut text = String::new();
    let mut shown = 0;
    let mut files_cut = 0;
    for file in hits {
        let path = file.path.display();
        let mut in_file = 0;
        if context && !text.is_empty() && shown < max {
            text.push_str("--\n");
        }
        for (kind, line, content) in &file.lines {
            if *kind == Kind::Match {
                if shown == max {
                    break;
                }
                shown += 1;
                in_file += 1;
            } else if shown == max && (*kind != Kind::After || in_file == 0) {
                // Past the cap only the after-context of this file's last shown match is printed.
                break;
            }
            match kind {
                Kind::Match => text.push_str(&format!("{path}:{line}:{content}\n")),
                Kind::Before | Kind::After => text.push_str(&format!("{path}-{line}-{content}\n")),
                Kind::Break => text.push_str("--\n"),
            }
        }
        if in_file < file.count {
            files_cut += 1;
        }
    }
    if shown < total {
        text.push_str(&format!(
            "... {} more {} in {files_cut} {} not shown; narrow with `path`, `glob` or `type`, or raise \
             `max_results`\n",
            total - shown,
            plural(total - shown, "match", "matches"),
            plural(files_cut, "file", "files"),
        ));
    }
    text
}

fn plural<'a>(n: usize, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 {
        one
    } else {
        many
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::testutil::{put, temp_ctx};

    fn run(ctx: &ToolContext, args: serde_json::Value) -> ToolOutput {
        Search.execute(ctx, &args)
    }

    #[test]
    fn regex_and_literal() {
        let ctx = temp_ctx("search-regex");
        put(&ctx, "b.rs", "fn parse_args() {}\nlet x = a.b;\n");
        put(&ctx, "a.rs", "// parse_args(x)\nno\nfn parse_argsy\n");
        let out = run(&ctx, json!({"pattern": r"parse_args\("}));
        assert_eq!(
            out.content,
            "a.rs:1:// parse_args(x)\nb.rs:1:fn parse_args() {}\n"
        );
        assert_eq!(out.summary, "2 matches in 2 files");
        let out = run(&ctx, json!({"pattern": "a.b", "literal": true}));
        assert_eq!(out.content, "b.rs:2:let x = a.b;\n");
        let out = run(
            &ctx,
            json!({"pattern": "PARSE_ARGSY", "case_insensitive": true}),
        );
        assert_eq!(out.content, "a.rs:3:fn parse_argsy\n");
    }

    #[test]
    fn invalid_regex_is_an_error() {
        let ctx = temp_ctx("search-invalid");
        let out = run(&ctx, json!({"pattern": "foo("}));
        assert!(out.is_error);
        assert!(
            out.content.starts_with("invalid regex 'foo('"),
            "{}",
            out.content
        );
        assert!(!run(&ctx, json!({"pattern": "foo(", "literal": true})).is_error);
    }

    #[test]
    fn gitignore_hidden_and_binary() {
        let ctx = temp_ctx("search-ignore");
        put(&ctx, ".gitignore", "target/\n");
        put(&ctx, "target/gen.rs", "needle\n");
        put(&ctx, ".hidden/x.txt", "needle\n");
        put(&ctx, ".git/config", "needle\n");
        put(&ctx, "bin.dat", b"needle\0\n");
        put(&ctx, "src/ok.rs", "needle\n");
        let out = run(&ctx, json!({"pattern": "needle"}));
        assert_eq!(out.content, "src/ok.rs:1:needle\n");
        // Hidden files only when asked, as `rg --hidden`; `.git` never.
        let out = run(&ctx, json!({"pattern": "needle", "hidden": true}));
        assert_eq!(out.content, ".hidden/x.txt:1:needle\nsrc/ok.rs:1:needle\n");
    }

    #[test]
    fn path_and_glob() {
        let ctx = temp_ctx("search-glob");
        put(&ctx, "src/a.rs", "hit\n");
        put(&ctx, "src/a.md", "hit\n");
        put(&ctx, "docs/b.rs", "hit\n");
        put(&ctx, ".gitignore", "*.log\n");
        put(&ctx, "build.log", "hit\n");
        assert_eq!(
            run(&ctx, json!({"pattern": "hit", "glob": "*.rs"})).content,
            "docs/b.rs:1:hit\nsrc/a.rs:1:hit\n"
        );
        assert_eq!(
            run(
                &ctx,
                json!({"pattern": "hit", "path": "src", "glob": "*.rs"})
            )
            .content,
            "src/a.rs:1:hit\n"
        );
        assert_eq!(
            run(&ctx, json!({"pattern": "hit", "path": "src/a.md"})).content,
            "src/a.md:1:hit\n"
        );
        assert_eq!(
            run(&ctx, json!({"pattern": "nothing"})).summary,
            "0 matches in 0 files"
        );
        // A file named explicitly is searched even when ignored, as with `rg hit build.log`.
        let out = run(&ctx, json!({"pattern": "hit", "path": "build.log"}));
        assert_eq!(out.content, "build.log:1:hit\n");
    }

    #[test]
    fn capped_and_long_lines_cut() {
        let ctx = temp_ctx("search-cap");
        put(&ctx, "a.txt", "x\n".repeat(5));
        put(&ctx, "b.txt", "x\n".repeat(5));
        put(&ctx, "c.txt", format!("{}\n", "x".repeat(1000)));
        let out = run(&ctx, json!({"pattern": "x", "max_results": 7}));
        let lines: Vec<&str> = out.content.lines().collect();
        assert_eq!(lines.len(), 8);
        assert_eq!(lines[5], "b.txt:1:x");
        assert_eq!(
            lines[7],
            "... 4 more matches in 2 files not shown; narrow with `path`, `glob` or `type`, or raise \
             `max_results`"
        );
        assert_eq!(out.summary, "11 matches in 3 files");
        let out = run(&ctx, json!({"pattern": "x", "path": "c.txt"}));
        assert!(out.content.contains("[... line cut: 1000 chars in total]"));
        assert!(out.content.len() < 400);
    }

    #[test]
    fn case_modes_types_and_globs() {
        let ctx = temp_ctx("search-case");
        put(&ctx, "a.rs", "Needle\nneedle\n");
        put(&ctx, "b.py", "NEEDLE\n");
        put(&ctx, "c_test.rs", "needle\n");
        let lines = |args| run(&ctx, args).content;
        assert_eq!(
            lines(json!({"pattern": "needle", "case": "smart", "type": "py"})),
            "b.py:1:NEEDLE\n"
        );
        assert_eq!(
            lines(json!({"pattern": "Needle", "case": "smart"})),
            "a.rs:1:Needle\n"
        );
        assert_eq!(
            lines(
                json!({"pattern": "NEEDLE", "case": "insensitive", "type": "rust", "glob": "!*_test.rs"})
            ),
            "a.rs:1:Needle\na.rs:2:needle\n"
        );
        assert_eq!(
            lines(json!({"pattern": "needle", "glob": ["*.py", "c_*"], "case_insensitive": true})),
            "b.py:1:NEEDLE\nc_test.rs:1:needle\n"
        );
        let out = run(&ctx, json!({"pattern": "x", "type": "nosuchtype"}));
        assert!(
            out.is_error && out.content.contains("ripgrep type name"),
            "{}",
            out.content
        );
        let out = run(&ctx, json!({"pattern": "x", "case": "loud"}));
        assert!(out.is_error && out.content.contains("sensitive, insensitive or smart"));
    }

    #[test]
    fn context_and_files_only() {
        let ctx = temp_ctx("search-context");
        put(&ctx, "a.txt", "1\nhit\n3\n4\n5\n6\nhit\n8\n");
        put(&ctx, "b.txt", "hit\n");
        let out = run(&ctx, json!({"pattern": "hit", "context": 1}));
        assert_eq!(
            out.content,
            "a.txt-1-1\na.txt:2:hit\na.txt-3-3\n--\na.txt-6-6\na.txt:7:hit\na.txt-8-8\n--\nb.txt:1:hit\n"
        );
        let out = run(&ctx, json!({"pattern": "hit", "files_with_matches": true}));
        assert_eq!(out.content, "a.txt\nb.txt\n");
        assert_eq!(out.summary, "2 files");
        let out = run(
            &ctx,
            json!({"pattern": "hit", "files_with_matches": true, "max_results": 1}),
        );
        assert!(
            out.content.starts_with("a.txt\n... 1 more file not shown"),
            "{}",
            out.content
        );
    }
}
