//! `search`: ripgrep's engine (`grep-searcher`, `grep-regex`, `ignore`) behind one tool call.
//!
//! It walks the same files as `list_files` (ignore rules honoured, hidden files in, `.git` out), in parallel,
//! and skips binary files the way `rg` does: quit at the first NUL. Results are sorted so that the same
//! search gives the same output, which keeps the model's context (and the tests) stable.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkMatch};
use ignore::WalkState;
use serde_json::json;

use super::{
    bool_arg, confine, cut_line, glob_matcher, glob_matches, opt_str_arg, short, str_arg, u64_arg,
    walker, Tool, ToolContext, ToolOutput,
};
use crate::safety::path::Access;

const DEFAULT_MAX_RESULTS: u64 = 100;
/// Even when the model asks for more, this many lines is already more than it can use well.
const MAX_MAX_RESULTS: u64 = 2000;
/// Matched lines are cut here: a hit in minified code would otherwise cost thousands of tokens.
const MAX_LINE_CHARS: usize = 300;

pub struct Search;

impl Tool for Search {
    fn name(&self) -> &'static str {
        "search"
    }

    fn description(&self) -> &'static str {
        "Search file contents in the repository, like ripgrep. `pattern` is a regular expression (Rust regex \
         syntax) unless `literal` is true. Files ignored by .gitignore and binary files are skipped. Output is \
         `path:line:text`, sorted by path and line, up to `max_results` matches (default 100). Narrow with \
         `path` (a directory or file) and `glob` (e.g. `*.rs`)."
    }

    fn parameters(&self) -> serde_json::Value {
        json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "Regular expression, or plain text when `literal` is true"},
                "literal": {"type": "boolean", "description": "Treat `pattern` as plain text (default false)"},
                "path": {"type": "string", "description": "Directory or file to search, relative to the repository root (default: the root)"},
                "glob": {"type": "string", "description": "Only search files matching this glob, e.g. `*.rs` or `src/**/*.ts`"},
                "case_insensitive": {"type": "boolean", "description": "Ignore case (default false)"},
                "max_results": {"type": "integer", "minimum": 1, "description": "Maximum matches to show (default 100)"}
            },
            "required": ["pattern"]
        })
    }

    fn is_mutating(&self) -> bool {
        false
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

/// The matches found in one file: the first `keep` lines, and how many there were in all.
#[derive(Debug)]
struct FileHits {
    path: PathBuf,
    lines: Vec<(u64, String)>,
    count: usize,
}

fn search(ctx: &ToolContext, args: &serde_json::Value) -> Result<ToolOutput, String> {
    let pattern = str_arg(args, "pattern")?;
    let path = opt_str_arg(args, "path")?.unwrap_or(".");
    let glob = opt_str_arg(args, "glob")?.filter(|g| !g.is_empty());
    let max = u64_arg(args, "max_results")?
        .unwrap_or(DEFAULT_MAX_RESULTS)
        .clamp(1, MAX_MAX_RESULTS) as usize;
    let matcher = build_matcher(
        pattern,
        bool_arg(args, "literal")?,
        bool_arg(args, "case_insensitive")?,
    )?;
    let target = confine(ctx, path, Access::Read)?;
    if !target.abs.exists() {
        return Err(format!("'{path}' does not exist"));
    }
    let filter = glob.map(|g| glob_matcher(&target.abs, g)).transpose()?;
    let mut hits = walk_and_search(
        ctx,
        &target.abs,
        &target.root,
        &matcher,
        filter.as_ref(),
        max,
    );
    hits.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(render(&hits, max))
}

fn build_matcher(
    pattern: &str,
    literal: bool,
    case_insensitive: bool,
) -> Result<RegexMatcher, String> {
    RegexMatcherBuilder::new()
        .fixed_strings(literal)
        .case_insensitive(case_insensitive)
        // As rg does without --multiline: a match never spans lines, and NUL can never match because
        // binary detection stops at it.
        .line_terminator(Some(b'\n'))
        .ban_byte(Some(0))
        .build(pattern)
        .map_err(|e| {
            let hint = if literal {
                ""
            } else {
                "\n(set literal=true to search for the text as written)"
            };
            format!("invalid regex '{pattern}': {e}{hint}")
        })
}

/// Walks `dir` in parallel, searching each file; stops early when the user interrupts.
fn walk_and_search(
    ctx: &ToolContext,
    dir: &Path,
    root: &Path,
    matcher: &RegexMatcher,
    filter: Option<&ignore::gitignore::Gitignore>,
    keep: usize,
) -> Vec<FileHits> {
    let found: Arc<Mutex<Vec<FileHits>>> = Arc::new(Mutex::new(Vec::new()));
    walker(dir).build_parallel().run(|| {
        let found = Arc::clone(&found);
        let mut searcher = SearcherBuilder::new()
            .binary_detection(BinaryDetection::quit(0))
            .line_number(true)
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
            // A file named explicitly (depth 0) is searched even if the glob would not pick it.
            let under_dir = entry.path().strip_prefix(dir).unwrap_or(entry.path());
            if entry.depth() > 0 && filter.is_some_and(|f| !glob_matches(f, under_dir)) {
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
    let mut guard = found
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    std::mem::take(&mut *guard)
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
    lines: Vec<(u64, String)>,
    count: usize,
    keep: usize,
    binary: bool,
}

impl Sink for Collector {
    type Error = io::Error;

    fn matched(&mut self, _searcher: &Searcher, mat: &SinkMatch<'_>) -> Result<bool, io::Error> {
        self.count += 1;
        if self.lines.len() < self.keep {
            let text = String::from_utf8_lossy(mat.bytes());
            let text = text.trim_end_matches('\n').trim_end_matches('\r');
            self.lines.push((
                mat.line_number().unwrap_or(0),
                cut_line(text, MAX_LINE_CHARS).into_owned(),
            ));
        }
        Ok(true)
    }

    fn binary_data(&mut self, _searcher: &Searcher, _offset: u64) -> Result<bool, io::Error> {
        // Like rg: a NUL means binary; stop and report nothing from this file.
        self.binary = true;
        Ok(false)
    }
}

fn render(hits: &[FileHits], max: usize) -> ToolOutput {
    let total: usize = hits.iter().map(|h| h.count).sum();
    let files = hits.len();
    let summary = format!(
        "{total} {} in {files} {}",
        plural(total, "match", "matches"),
        plural(files, "file", "files")
    );
    if total == 0 {
        return ToolOutput::ok("no matches", summary);
    }
    let mut text = String::new();
    let mut shown = 0;
    let mut files_cut = 0;
    for file in hits {
        let path = file.path.display();
        let take = file.lines.len().min(max - shown);
        for (line, content) in &file.lines[..take] {
            text.push_str(&format!("{path}:{line}:{content}\n"));
        }
        shown += take;
        if take < file.count {
            files_cut += 1;
        }
    }
    if shown < total {
        text.push_str(&format!(
            "... {} more {} in {files_cut} {} not shown; narrow with `path` or `glob`, or raise `max_results`\n",
            total - shown,
            plural(total - shown, "match", "matches"),
            plural(files_cut, "file", "files"),
        ));
    }
    ToolOutput::ok(text, summary)
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
            "... 4 more matches in 2 files not shown; narrow with `path` or `glob`, or raise `max_results`"
        );
        assert_eq!(out.summary, "11 matches in 3 files");
        let out = run(&ctx, json!({"pattern": "x", "path": "c.txt"}));
        assert!(out.content.contains("[... line cut: 1000 chars in total]"));
        assert!(out.content.len() < 400);
    }
}
