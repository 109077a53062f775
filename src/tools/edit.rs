//! `edit_file`: replace an exact piece of a file.
//!
//! Exact byte matching keeps edits predictable: `old_string` must occur exactly once (or `replace_all`), so
//! the model cannot change the wrong copy of a line. When it misses, the error carries what it needs to retry:
//! the closest region of the file (no match) or the line of every match (several).

use std::fs;
use std::io;

use serde_json::json;
use similar::{ChangeTag, TextDiff};

use super::write::write_atomic;
use super::{bool_arg, confine, looks_binary, str_arg, Tool, ToolContext, ToolOutput};
use crate::safety::path::Access;

/// Below this similarity the closest region is noise, and showing it would mislead.
const MIN_SIMILARITY: f64 = 0.4;
/// Lines of context shown around an edit or a near miss.
const CONTEXT_LINES: usize = 2;
/// Line numbers listed when `old_string` matches in many places.
const MAX_LISTED_MATCHES: usize = 20;

pub struct EditFile;

impl Tool for EditFile {
    fn name(&self) -> &'static str {
        "edit_file"
    }

    fn description(&self) -> &'static str {
        "Replace text in an existing file. `old_string` must match the file exactly (whitespace and \
         indentation included, without the line numbers read_file shows) and occur exactly once; include \
         enough surrounding lines to make it unique, or set `replace_all` to change every occurrence. To \
         create a file or rewrite all of it, use write_file."
    }

    fn parameters(&self) -> serde_json::Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File path relative to the repository root"},
                "old_string": {"type": "string", "description": "The exact text to replace"},
                "new_string": {"type": "string", "description": "The text to put in its place"},
                "replace_all": {"type": "boolean", "description": "Replace every occurrence (default false)"}
            },
            "required": ["path", "old_string", "new_string"]
        })
    }

    fn label(&self, args: &serde_json::Value) -> String {
        format!(
            "edit {}",
            args.get("path").and_then(|v| v.as_str()).unwrap_or("?")
        )
    }

    fn execute(&self, ctx: &ToolContext, args: &serde_json::Value) -> ToolOutput {
        match edit(ctx, args) {
            Ok(out) => out,
            Err(message) => ToolOutput::error(message),
        }
    }
}

fn edit(ctx: &ToolContext, args: &serde_json::Value) -> Result<ToolOutput, String> {
    let path = str_arg(args, "path")?;
    let old = str_arg(args, "old_string")?;
    let new = str_arg(args, "new_string")?;
    let replace_all = bool_arg(args, "replace_all")?;
    if old.is_empty() {
        return Err(
            "old_string is empty; to create a file or replace all of it, use write_file"
                .to_string(),
        );
    }
    if old == new {
        return Err("old_string and new_string are the same; nothing would change".to_string());
    }
    let target = confine(ctx, path, Access::Write)?;
    let (bytes, perms) = read_text(&target.abs, path)?;
    let found = find_with_line_endings(&bytes, old, new);
    match found.starts.len() {
        0 => return Err(not_found(path, &bytes, old)),
        n if n > 1 && !replace_all => return Err(ambiguous(path, &bytes, &found.starts)),
        _ => {}
    }
    let updated = splice(&bytes, &found.starts, found.old.len(), found.new.as_bytes());
    write_atomic(&target.abs, &updated, Some(perms))
        .map_err(|e| format!("cannot write '{path}': {e}"))?;
    let (added, removed) = line_delta(old, new);
    let count = found.starts.len();
    let summary = format!("+{} -{} lines", added * count, removed * count);
    let first_line = line_of(&bytes, found.starts[0]);
    let snippet = numbered_window(&updated, first_line, found.new.lines().count().max(1));
    let occurrences = if count == 1 {
        "1 occurrence".to_string()
    } else {
        format!("{count} occurrences")
    };
    let content = format!(
        "edited {}: replaced {occurrences} ({summary})\n{snippet}",
        target.display()
    );
    let mut out = ToolOutput::ok(content, summary);
    out.changed = vec![target.rel];
    Ok(out)
}

/// The file's bytes and permissions, or a message: missing files, directories and binary files are refused.
fn read_text(abs: &std::path::Path, path: &str) -> Result<(Vec<u8>, fs::Permissions), String> {
    let meta = fs::metadata(abs).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => format!("'{path}' does not exist; use write_file to create it"),
        _ => format!("cannot read '{path}': {e}"),
    })?;
    if meta.is_dir() {
        return Err(format!("'{path}' is a directory; give the path of a file"));
    }
    let bytes = fs::read(abs).map_err(|e| format!("cannot read '{path}': {e}"))?;
    if looks_binary(&bytes) {
        return Err(format!(
            "'{path}' is a binary file ({} bytes); edit_file only changes text",
            bytes.len()
        ));
    }
    Ok((bytes, meta.permissions()))
}

/// Where `old` occurs, and the exact strings to swap.
struct Found {
    starts: Vec<usize>,
    old: String,
    new: String,
}

/// Finds `old` as given; failing that, in a CRLF file, with its `\n` turned into `\r\n`. The model sees
/// lines without `\r` (read_file strips it), so without this retry every multi-line edit of a Windows-style
/// file would miss.
fn find_with_line_endings(bytes: &[u8], old: &str, new: &str) -> Found {
    let starts = find_all(bytes, old.as_bytes());
    let crlf_file = bytes.windows(2).any(|w| w == b"\r\n");
    if !starts.is_empty() || !crlf_file || !old.contains('\n') || old.contains("\r\n") {
        return Found {
            starts,
            old: old.to_string(),
            new: new.to_string(),
        };
    }
    let to_crlf = |s: &str| s.replace("\r\n", "\n").replace('\n', "\r\n");
    let (old, new) = (to_crlf(old), to_crlf(new));
    Found {
        starts: find_all(bytes, old.as_bytes()),
        old,
        new,
    }
}

/// Start offsets of the non-overlapping occurrences of `needle`.
fn find_all(haystack: &[u8], needle: &[u8]) -> Vec<usize> {
    let mut starts = Vec::new();
    let mut at = 0;
    while at + needle.len() <= haystack.len() {
        match haystack[at..]
            .windows(needle.len())
            .position(|w| w == needle)
        {
            Some(i) => {
                starts.push(at + i);
                at += i + needle.len();
            }
            None => break,
        }
    }
    starts
}

/// `bytes` with each `old_len`-byte span at `starts` replaced by `new`; everything else untouched.
fn splice(bytes: &[u8], starts: &[usize], old_len: usize, new: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len() + starts.len() * new.len());
    let mut copied = 0;
    for &start in starts {
        out.extend_from_slice(&bytes[copied..start]);
        out.extend_from_slice(new);
        copied = start + old_len;
    }
    out.extend_from_slice(&bytes[copied..]);
    out
}

/// Lines added and removed by replacing `old` with `new` once.
fn line_delta(old: &str, new: &str) -> (usize, usize) {
    let diff = TextDiff::from_lines(old, new);
    diff.iter_all_changes()
        .fold((0, 0), |(added, removed), change| match change.tag() {
            ChangeTag::Insert => (added + 1, removed),
            ChangeTag::Delete => (added, removed + 1),
            ChangeTag::Equal => (added, removed),
        })
}

/// 1-based line number of a byte offset.
fn line_of(bytes: &[u8], offset: usize) -> usize {
    bytes[..offset].iter().filter(|&&b| b == b'\n').count() + 1
}

/// Lines `first..first+count` (1-based) with a little context, numbered like read_file.
fn numbered_window(bytes: &[u8], first: usize, count: usize) -> String {
    let text = String::from_utf8_lossy(bytes);
    let from = first.saturating_sub(CONTEXT_LINES).max(1);
    let to = first + count - 1 + CONTEXT_LINES;
    text.lines()
        .enumerate()
        .map(|(i, line)| (i + 1, line))
        .filter(|(n, _)| (from..=to).contains(n))
        .map(|(n, line)| format!("{n:>6}\t{}\n", line.trim_end_matches('\r')))
        .collect()
}

fn ambiguous(path: &str, bytes: &[u8], starts: &[usize]) -> String {
    let lines: Vec<String> = starts
        .iter()
        .take(MAX_LISTED_MATCHES)
        .map(|&s| line_of(bytes, s).to_string())
        .collect();
    let more = if starts.len() > MAX_LISTED_MATCHES {
        ", ..."
    } else {
        ""
    };
    format!(
        "old_string occurs {} times in '{path}' (lines {}{more}); include more surrounding lines to make it \
         unique, or set replace_all to change every occurrence",
        starts.len(),
        lines.join(", ")
    )
}

fn not_found(path: &str, bytes: &[u8], old: &str) -> String {
    let mut message = format!("old_string was not found in '{path}'.");
    if old.lines().all(looks_numbered) {
        message.push_str(" It seems to include the line numbers read_file shows; leave them out.");
    }
    let text = String::from_utf8_lossy(bytes);
    match closest_region(&text, old) {
        Some((first, count, score)) if score >= MIN_SIMILARITY => {
            let last = first + count - 1;
            message.push_str(&format!(
                "\nThe most similar text is at lines {first}-{last}:\n{}\
                 Copy the text exactly (whitespace, indentation and line endings included) and retry.",
                numbered_window(bytes, first, count)
            ));
        }
        _ => message.push_str(
            " Nothing in the file is close to it; read the file to see its current content.",
        ),
    }
    message
}

/// A line as read_file prints it: spaces, a number, a tab.
fn looks_numbered(line: &str) -> bool {
    let rest = line.trim_start();
    let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    digits > 0 && rest[digits..].starts_with('\t')
}

/// The window of lines most like `needle`: (first line, 1-based; number of lines; similarity 0..=1).
/// Each window is scored line by line with a bigram Dice coefficient on trimmed lines, which is cheap
/// (linear in the line lengths) and forgives indentation, the most common reason an edit misses.
fn closest_region(text: &str, needle: &str) -> Option<(usize, usize, f64)> {
    let lines: Vec<Vec<(char, char)>> = text.lines().map(bigrams).collect();
    let wanted: Vec<Vec<(char, char)>> = needle.lines().map(bigrams).collect();
    if lines.is_empty() || wanted.is_empty() {
        return None;
    }
    let width = wanted.len().min(lines.len());
    let mut best: Option<(usize, f64)> = None;
    for start in 0..=lines.len() - width {
        let total: f64 = (0..width)
            .map(|k| dice(&lines[start + k], &wanted[k]))
            .sum();
        let score = total / wanted.len() as f64;
        if best.is_none_or(|(_, b)| score > b) {
            best = Some((start, score));
        }
    }
    best.map(|(start, score)| (start + 1, width, score))
}

/// Sorted character bigrams of a trimmed line.
fn bigrams(line: &str) -> Vec<(char, char)> {
    let chars: Vec<char> = line.trim().chars().collect();
    let mut pairs: Vec<(char, char)> = chars.windows(2).map(|w| (w[0], w[1])).collect();
    pairs.sort_unstable();
    pairs
}

/// 2|A∩B| / (|A|+|B|) over multisets of bigrams; two blank lines are identical.
fn dice(a: &[(char, char)], b: &[(char, char)]) -> f64 {
    if a.is_empty() && b.is_empty() {
        return 1.0;
    }
    let (mut i, mut j, mut common) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                common += 1;
                i += 1;
                j += 1;
            }
        }
    }
    2.0 * common as f64 / (a.len() + b.len()) as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::testutil::{put, temp_ctx};
    use std::os::unix::fs::PermissionsExt;
    use std::path::PathBuf;

    fn edit(ctx: &ToolContext, path: &str, old: &str, new: &str) -> ToolOutput {
        EditFile.execute(
            ctx,
            &json!({"path": path, "old_string": old, "new_string": new}),
        )
    }

    fn read(ctx: &ToolContext, path: &str) -> String {
        fs::read_to_string(ctx.root.join(path)).unwrap()
    }

    #[test]
    fn unique_match_replaced() {
        let ctx = temp_ctx("edit-unique");
        put(&ctx, "a.rs", "fn a() {\n    1\n}\nfn b() {}\n");
        let out = edit(&ctx, "a.rs", "    1\n", "    2\n    3\n    4\n");
        assert!(!out.is_error, "{}", out.content);
        assert_eq!(
            read(&ctx, "a.rs"),
            "fn a() {\n    2\n    3\n    4\n}\nfn b() {}\n"
        );
        assert_eq!(out.summary, "+3 -1 lines");
        assert_eq!(out.changed, vec![PathBuf::from("a.rs")]);
        assert!(out.content.contains("     2\t    2\n"), "{}", out.content);
    }

    #[test]
    fn non_unique_names_lines() {
        let ctx = temp_ctx("edit-ambiguous");
        put(&ctx, "a.txt", "x = 1\ny\nx = 1\nz\nx = 1\n");
        let out = edit(&ctx, "a.txt", "x = 1", "x = 2");
        assert!(out.is_error);
        assert!(
            out.content
                .contains("occurs 3 times in 'a.txt' (lines 1, 3, 5)"),
            "{}",
            out.content
        );
        assert_eq!(read(&ctx, "a.txt"), "x = 1\ny\nx = 1\nz\nx = 1\n");
        let out = EditFile.execute(
            &ctx,
            &json!({"path": "a.txt", "old_string": "x = 1", "new_string": "x = 2", "replace_all": true}),
        );
        assert!(!out.is_error, "{}", out.content);
        assert_eq!(read(&ctx, "a.txt"), "x = 2\ny\nx = 2\nz\nx = 2\n");
        assert_eq!(out.summary, "+3 -3 lines");
    }

    #[test]
    fn missing_shows_closest_region() {
        let ctx = temp_ctx("edit-missing");
        put(&ctx, "a.rs", "use std::io;\n\nfn main() {\n    let total = compute(1, 2);\n    println!(\"{total}\");\n}\n");
        let out = edit(
            &ctx,
            "a.rs",
            "  let total = compute(1,2);\n  println!(\"{total}\");",
            "x",
        );
        assert!(out.is_error);
        assert!(
            out.content.contains("most similar text is at lines 4-5"),
            "{}",
            out.content
        );
        assert!(
            out.content
                .contains("     4\t    let total = compute(1, 2);"),
            "{}",
            out.content
        );
        let out = edit(&ctx, "a.rs", "completely unrelated words here", "x");
        assert!(
            out.content.contains("Nothing in the file is close"),
            "{}",
            out.content
        );
        let out = edit(&ctx, "a.rs", "     1\tuse std::io;", "x");
        assert!(out.content.contains("line numbers"), "{}", out.content);
    }

    #[test]
    fn crlf_and_missing_final_newline_preserved() {
        let ctx = temp_ctx("edit-crlf");
        put(&ctx, "w.txt", "one\r\ntwo\r\nthree");
        let out = edit(&ctx, "w.txt", "one\ntwo", "uno\ndos");
        assert!(!out.is_error, "{}", out.content);
        assert_eq!(read(&ctx, "w.txt"), "uno\r\ndos\r\nthree");
        let out = edit(&ctx, "w.txt", "three", "tres");
        assert!(!out.is_error, "{}", out.content);
        assert_eq!(read(&ctx, "w.txt"), "uno\r\ndos\r\ntres");
    }

    #[test]
    fn exec_bit_preserved() {
        let ctx = temp_ctx("edit-mode");
        put(&ctx, "run.sh", "#!/bin/sh\necho a\n");
        fs::set_permissions(ctx.root.join("run.sh"), fs::Permissions::from_mode(0o755)).unwrap();
        assert!(!edit(&ctx, "run.sh", "echo a", "echo b").is_error);
        assert_eq!(
            fs::metadata(ctx.root.join("run.sh"))
                .unwrap()
                .permissions()
                .mode()
                & 0o777,
            0o755
        );
    }

    #[test]
    fn refusals() {
        let ctx = temp_ctx("edit-refuse");
        put(&ctx, "a.txt", "abc");
        put(&ctx, "b.bin", b"a\0b");
        assert!(edit(&ctx, "a.txt", "", "x")
            .content
            .contains("use write_file"));
        assert!(edit(&ctx, "a.txt", "abc", "abc")
            .content
            .contains("the same"));
        assert!(edit(&ctx, "nope.txt", "a", "b")
            .content
            .contains("does not exist"));
        assert!(edit(&ctx, "b.bin", "a", "b").content.contains("binary"));
        assert!(edit(&ctx, ".git/config", "a", "b").content.contains(".git"));
    }
}
