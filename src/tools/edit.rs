//! `edit_file`: replace exact pieces of one file, all or nothing.
//!
//! Exact byte matching keeps edits predictable: each `old_string` must occur exactly once (or `replace_all`),
//! so the model cannot change the wrong copy of a line. When it misses, the error carries what it needs to
//! retry: the closest region of the file (no match) or the line of every match (several). Several edits in
//! one call apply in order to the result of the previous one, in memory; the file is written once, so a
//! failing edit leaves it untouched.
//!
//! Everything outside the replaced spans is kept byte for byte (BOM, missing final newline, CRLF); the
//! replacement text of a CRLF file gets CRLF line ends, since the model sees lines without `\r`. The file
//! is replaced atomically, keeping its mode, and refused when it changed since the model last read it.

use std::io::Read;

use serde_json::json;
use similar::{ChangeTag, TextDiff};

use super::read::binary_kind;
use super::state::fingerprint;
use super::tool::{
    bool_arg, confine, looks_binary, str_arg, Confined, Tool, ToolContext, ToolOutput,
};
use crate::protocol::ToolKind;
use crate::safety::path::Access;

/// Below this similarity the closest region is noise, and showing it would mislead.
const MIN_SIMILARITY: f64 = 0.4;
/// Lines of context shown around an edit or a near miss.
const CONTEXT_LINES: usize = 2;
/// Line numbers listed when `old_string` matches in many places.
const MAX_LISTED_MATCHES: usize = 20;
/// Candidate regions (by the cheap score) that `similar` ranks precisely.
const CANDIDATES: usize = 8;
/// Edited regions shown back to the model after a multi-edit.
const MAX_SNIPPETS: usize = 5;

pub struct EditFile;

impl Tool for EditFile {
    fn name(&self) -> &str {
        "edit_file"
    }

    fn description(&self) -> &str {
        "Replace text in a file. `old_string` must match exactly (indentation included, without read_file's \
         line numbers) and occur once: add surrounding lines to make it unique, or set `replace_all`. Several \
         changes to one file: `edits`, applied in order, all or none. Read the file first: an edit to a file \
         changed since is refused. To create or rewrite a file, use write_file."
    }

    fn parameters(&self) -> serde_json::Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "old_string": {"type": "string"},
                "new_string": {"type": "string"},
                "replace_all": {"type": "boolean"},
                "edits": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "old_string": {"type": "string"},
                            "new_string": {"type": "string"},
                            "replace_all": {"type": "boolean"}
                        },
                        "required": ["old_string", "new_string"]
                    }
                }
            },
            "required": ["path"]
        })
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Edit
    }

    fn path_arg(&self) -> Option<&str> {
        Some("path")
    }

    fn label(&self, args: &serde_json::Value) -> String {
        let path = args.get("path").and_then(|v| v.as_str()).unwrap_or("?");
        match args.get("edits").and_then(|v| v.as_array()) {
            Some(edits) if edits.len() > 1 => format!("edit {path} ({} edits)", edits.len()),
            _ => format!("edit {path}"),
        }
    }

    fn execute(&self, ctx: &ToolContext, args: &serde_json::Value) -> ToolOutput {
        match edit(ctx, args) {
            Ok(out) => out,
            Err(message) => ToolOutput::error(message),
        }
    }
}

/// One replacement the model asked for.
#[derive(Debug)]
struct Spec {
    old: String,
    new: String,
    replace_all: bool,
}

/// The edits of one call: the single form, `edits`, or both (the single one first).
fn specs(args: &serde_json::Value) -> Result<Vec<Spec>, String> {
    let mut specs = Vec::new();
    if args.get("old_string").is_some() || args.get("edits").is_none() {
        specs.push(spec(args)?);
    }
    match args.get("edits") {
        None | Some(serde_json::Value::Null) => {}
        Some(serde_json::Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                specs.push(spec(item).map_err(|e| format!("edits[{i}]: {e}"))?);
            }
        }
        Some(_) => {
            return Err("argument `edits` must be a list of {old_string, new_string}".into())
        }
    }
    if specs.is_empty() {
        return Err("`edits` is empty; give at least one {old_string, new_string}".into());
    }
    Ok(specs)
}

fn spec(args: &serde_json::Value) -> Result<Spec, String> {
    let old = str_arg(args, "old_string")?;
    let new = str_arg(args, "new_string")?;
    if old.is_empty() {
        return Err(
            "old_string is empty; to create a file or replace all of it, use write_file"
                .to_string(),
        );
    }
    if old == new {
        return Err("old_string and new_string are the same; nothing would change".to_string());
    }
    Ok(Spec {
        old: old.to_string(),
        new: new.to_string(),
        replace_all: bool_arg(args, "replace_all")?,
    })
}

/// Where an applied edit's new text sits in the final buffer.
struct Placed {
    start: usize,
    new_lines: usize,
    count: usize,
}

fn edit(ctx: &ToolContext, args: &serde_json::Value) -> Result<ToolOutput, String> {
    let path = str_arg(args, "path")?;
    let specs = specs(args)?;
    let target = confine(ctx, path, Access::Write)?;
    let (bytes, perms) = read_text(&target, path)?;
    ctx.session.check_fresh(&target.rel, fingerprint(&bytes))?;
    let crlf = is_crlf(&bytes);
    let mut buf = bytes;
    let mut placed: Vec<Placed> = Vec::new();
    let (mut added, mut removed) = (0, 0);
    for (i, spec) in specs.iter().enumerate() {
        let found = find_with_line_endings(&buf, &spec.old, &spec.new, crlf);
        let fail = match found.starts.len() {
            0 => Some(not_found(path, &buf, &spec.old)),
            n if n > 1 && !spec.replace_all => Some(ambiguous(path, &buf, &found.starts)),
            _ => None,
        };
        if let Some(message) = fail {
            return Err(if specs.len() > 1 {
                format!(
                    "edit {} of {} failed, so none was applied (the file is unchanged): {message}",
                    i + 1,
                    specs.len()
                )
            } else {
                message
            });
        }
        let (old_len, new_len) = (found.old.len(), found.new.len());
        for p in &mut placed {
            let before = found.starts.iter().filter(|&&s| s < p.start).count();
            p.start = (p.start + before * new_len) - before * old_len;
        }
        buf = splice(&buf, &found.starts, old_len, found.new.as_bytes());
        placed.push(Placed {
            start: found.starts[0],
            new_lines: found.new.lines().count().max(1),
            count: found.starts.len(),
        });
        let (a, r) = line_delta(&spec.old, &spec.new);
        added += a * found.starts.len();
        removed += r * found.starts.len();
    }
    target
        .write_atomic(&buf, Some(perms), false)
        .map_err(|e| target.io_error("write", &e))?;
    ctx.session.saw(&target.rel, fingerprint(&buf));
    let summary = format!("+{added} -{removed} lines");
    let content = describe(&target, &buf, &placed, &summary);
    let mut out = ToolOutput::ok(content, summary);
    out.changed = vec![target.rel];
    Ok(out)
}

/// What the model sees after a successful edit: what was replaced and the new text, numbered.
fn describe(target: &Confined, buf: &[u8], placed: &[Placed], summary: &str) -> String {
    let total: usize = placed.iter().map(|p| p.count).sum();
    let what = match (placed.len(), total) {
        (1, 1) => "replaced 1 occurrence".to_string(),
        (1, n) => format!("replaced {n} occurrences"),
        (e, n) => format!("applied {e} edits ({n} replacements)"),
    };
    let mut content = format!(
        "edited {}: {what} ({summary})
",
        target.display()
    );
    for (i, p) in placed.iter().enumerate().take(MAX_SNIPPETS) {
        if i > 0 {
            content.push_str(
                "...
",
            );
        }
        content.push_str(&numbered_window(
            buf,
            line_of(buf, p.start.min(buf.len())),
            p.new_lines,
        ));
    }
    content
}

/// The file's bytes and permissions, or a message: missing files, directories and binary files are refused.
/// Read through the confined descriptor, so what is checked is what is edited.
fn read_text(target: &Confined, path: &str) -> Result<(Vec<u8>, std::fs::Permissions), String> {
    let mut file = target.open_read().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => {
            format!("'{path}' does not exist; use write_file to create it")
        }
        _ => target.io_error("read", &e),
    })?;
    let meta = file.metadata().map_err(|e| target.io_error("read", &e))?;
    if meta.is_dir() {
        return Err(format!("'{path}' is a directory; give the path of a file"));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.read_to_end(&mut bytes)
        .map_err(|e| target.io_error("read", &e))?;
    if looks_binary(&bytes) {
        return Err(format!(
            "'{path}' is a binary file ({}, {} bytes); edit_file only changes text",
            binary_kind(&bytes),
            bytes.len()
        ));
    }
    Ok((bytes, meta.permissions()))
}

/// Whether the file's lines end in CRLF (judged by its first line end).
fn is_crlf(bytes: &[u8]) -> bool {
    memchr::memchr(b'\n', bytes).is_some_and(|i| i > 0 && bytes[i - 1] == b'\r')
}

/// Where `old` occurs, and the exact strings to swap.
struct Found {
    starts: Vec<usize>,
    old: String,
    new: String,
}

/// Finds `old` as given; failing that, in a CRLF file, with its `\n` turned into `\r\n`. The model sees
/// lines without `\r` (read_file strips it), so without this retry every multi-line edit of a Windows-style
/// file would miss. In a CRLF file the new text gets CRLF line ends too.
fn find_with_line_endings(bytes: &[u8], old: &str, new: &str, crlf: bool) -> Found {
    let to_crlf = |s: &str| s.replace("\r\n", "\n").replace('\n', "\r\n");
    let new = if crlf { to_crlf(new) } else { new.to_string() };
    let starts = find_all(bytes, old.as_bytes());
    if !starts.is_empty() || !crlf || !old.contains('\n') {
        return Found {
            starts,
            old: old.to_string(),
            new,
        };
    }
    let old = to_crlf(old);
    Found {
        starts: find_all(bytes, old.as_bytes()),
        old,
        new,
    }
}

/// Start offsets of the non-overlapping occurrences of `needle` (memchr's SIMD substring search).
fn find_all(haystack: &[u8], needle: &[u8]) -> Vec<usize> {
    let finder = memchr::memmem::Finder::new(needle);
    let mut starts = Vec::new();
    let mut at = 0;
    while let Some(i) = finder.find(&haystack[at..]) {
        starts.push(at + i);
        at += i + needle.len();
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
    memchr::memchr_iter(b'\n', &bytes[..offset]).count() + 1
}

/// Lines `first..first+count` (1-based) with a little context, numbered like read_file. Only the window is
/// decoded, so this stays cheap on a 10 MB file.
fn numbered_window(bytes: &[u8], first: usize, count: usize) -> String {
    let from = first.saturating_sub(CONTEXT_LINES).max(1);
    let to = first + count - 1 + CONTEXT_LINES;
    // Byte offset where line `from` starts.
    let start = if from == 1 {
        0
    } else {
        memchr::memchr_iter(b'\n', bytes)
            .nth(from - 2)
            .map_or(bytes.len(), |i| i + 1)
    };
    let text = String::from_utf8_lossy(&bytes[start..]);
    text.lines()
        .zip(from..=to)
        .map(|(line, n)| format!("{n:>6}\t{}\n", line.trim_end_matches('\r')))
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
/// Every window is first scored line by line with a bigram Dice coefficient on trimmed lines, which is cheap
/// (linear in the line lengths) and forgives indentation, the most common reason an edit misses; the best
/// few are then ranked by `similar`'s character diff ratio on the trimmed text, which is precise but too
/// slow to run over a whole large file.
///
/// One pass over the file, holding the scores of the windows still open and the best few: memory in the size
/// of `needle`, not of the file. (Keeping every line's bigrams cost 9 bytes of memory per byte of a file.)
fn closest_region(text: &str, needle: &str) -> Option<(usize, usize, f64)> {
    let wanted: Vec<Vec<(char, char)>> = needle.lines().map(bigrams).collect();
    let count = text.lines().count();
    if count == 0 || wanted.is_empty() {
        return None;
    }
    let width = wanted.len().min(count);
    let last_start = count - width;
    // open[s % width]: the partial score of the window starting at line s, for the `width` newest starts.
    let mut open = vec![0.0f64; width];
    let mut best: Vec<(usize, f64)> = Vec::with_capacity(CANDIDATES + 1);
    for (i, line) in text.lines().enumerate() {
        let pairs = bigrams(line);
        // Line i is line k of the window starting at i - k.
        for (k, want) in wanted.iter().enumerate().take(width) {
            let Some(start) = i.checked_sub(k) else {
                break;
            };
            if start > last_start {
                continue;
            }
            if k == 0 {
                open[start % width] = 0.0;
            }
            open[start % width] += dice(&pairs, want);
            if k == width - 1 {
                keep_best(&mut best, start, open[start % width] / wanted.len() as f64);
            }
        }
    }
    let trimmed =
        |ls: &mut dyn Iterator<Item = &str>| ls.map(str::trim).collect::<Vec<_>>().join("\n");
    let wanted_text = trimmed(&mut needle.lines());
    best.iter()
        .map(|&(start, _)| {
            let window = trimmed(&mut text.lines().skip(start).take(width));
            let ratio = f64::from(TextDiff::from_chars(&window, &wanted_text).ratio());
            (start, ratio)
        })
        .fold(
            None,
            |best: Option<(usize, f64)>, (start, ratio)| match best {
                Some((_, b)) if b >= ratio => best,
                _ => Some((start, ratio)),
            },
        )
        .map(|(start, score)| (start + 1, width, score))
}

/// Keeps the [`CANDIDATES`] best (start, score) in `best`, highest score first, the earlier start first on
/// a tie.
fn keep_best(best: &mut Vec<(usize, f64)>, start: usize, score: f64) {
    let at = best
        .iter()
        .position(|&(s, b)| score > b || (score == b && start < s))
        .unwrap_or(best.len());
    if at < CANDIDATES {
        best.insert(at, (start, score));
        best.truncate(CANDIDATES);
    }
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
    use std::fs;
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

    #[test]
    fn bom_crlf_new_lines_and_no_final_newline() {
        let ctx = temp_ctx("edit-bom");
        put(&ctx, "bom.txt", "\u{feff}first\r\nsecond\r\nlast");
        let out = edit(&ctx, "bom.txt", "second", "2nd\nextra");
        assert!(!out.is_error, "{}", out.content);
        // The BOM stays, the inserted line gets the file's CRLF, the missing final newline stays missing.
        assert_eq!(
            read(&ctx, "bom.txt"),
            "\u{feff}first\r\n2nd\r\nextra\r\nlast"
        );
        let out = edit(&ctx, "bom.txt", "first", "1st");
        assert!(!out.is_error, "{}", out.content);
        assert!(read(&ctx, "bom.txt").starts_with("\u{feff}1st\r\n"));
    }

    #[test]
    fn multi_edit_applies_in_order_all_or_none() {
        let ctx = temp_ctx("edit-multi");
        put(&ctx, "m.rs", "fn a() {}\nfn b() {}\nfn c() {}\n");
        let out = EditFile.execute(
            &ctx,
            &json!({"path": "m.rs", "edits": [
                {"old_string": "fn a() {}", "new_string": "fn a() {\n    1\n}"},
                {"old_string": "fn c", "new_string": "fn see"},
                {"old_string": "fn see() {}", "new_string": "fn see() { 3 }"}
            ]}),
        );
        assert!(!out.is_error, "{}", out.content);
        assert_eq!(
            read(&ctx, "m.rs"),
            "fn a() {\n    1\n}\nfn b() {}\nfn see() { 3 }\n"
        );
        assert!(out.content.contains("applied 3 edits"), "{}", out.content);
        assert!(
            out.content.contains("     5\tfn see() { 3 }"),
            "{}",
            out.content
        );
        // The second edit misses: nothing is written, and the message says which one failed.
        let before = read(&ctx, "m.rs");
        let out = EditFile.execute(
            &ctx,
            &json!({"path": "m.rs", "edits": [
                {"old_string": "fn b() {}", "new_string": "fn bee() {}"},
                {"old_string": "fn missing() {}", "new_string": "x"}
            ]}),
        );
        assert!(out.is_error);
        assert!(
            out.content
                .starts_with("edit 2 of 2 failed, so none was applied"),
            "{}",
            out.content
        );
        assert_eq!(read(&ctx, "m.rs"), before);
        let out = EditFile.execute(
            &ctx,
            &json!({"path": "m.rs", "edits": [{"old_string": "x"}]}),
        );
        assert!(out
            .content
            .contains("edits[0]: missing required string argument `new_string`"));
    }

    #[test]
    fn stale_read_refused_until_read_again() {
        let ctx = temp_ctx("edit-stale");
        put(&ctx, "s.txt", "alpha\nbeta\n");
        let read_file = |ctx: &ToolContext| {
            crate::tools::read::ReadFile.execute(ctx, &json!({"path": "s.txt", "limit": 1}))
        };
        assert!(!read_file(&ctx).is_error);
        assert!(!edit(&ctx, "s.txt", "alpha", "ALPHA").is_error);
        // Our own edit keeps the guard current; a change behind the model's back trips it.
        assert!(!edit(&ctx, "s.txt", "beta", "BETA").is_error);
        put(&ctx, "s.txt", "ALPHA\nBETA\ngamma\n");
        let out = edit(&ctx, "s.txt", "ALPHA", "a");
        assert!(out.is_error);
        assert!(
            out.content.contains("changed since you last read it"),
            "{}",
            out.content
        );
        assert!(out.content.contains("read it again with read_file"));
        assert_eq!(read(&ctx, "s.txt"), "ALPHA\nBETA\ngamma\n");
        assert!(!read_file(&ctx).is_error);
        assert!(!edit(&ctx, "s.txt", "ALPHA", "a").is_error);
    }

    #[test]
    fn symlink_swapped_in_after_the_check_is_refused() {
        let ctx = temp_ctx("edit-race");
        let outside = ctx.root.parent().unwrap().join(format!(
            "{}-outside",
            ctx.root.file_name().unwrap().to_string_lossy()
        ));
        fs::create_dir_all(&outside).unwrap();
        fs::write(outside.join("f.txt"), "secret\n").unwrap();
        put(&ctx, "dir/f.txt", "secret\n");
        let target = crate::tools::tool::confine(&ctx, "dir/f.txt", Access::Write).unwrap();
        // Between the check and the use, `dir` becomes a link out of the checkout.
        fs::remove_dir_all(ctx.root.join("dir")).unwrap();
        std::os::unix::fs::symlink(&outside, ctx.root.join("dir")).unwrap();
        let err = target.open_read().unwrap_err();
        assert!(
            target.io_error("read", &err).contains("symlink appeared"),
            "{err}"
        );
        let err = target.write_atomic(b"pwned\n", None, false).unwrap_err();
        assert!(crate::safety::beneath::is_link_refusal(&err), "{err}");
        assert_eq!(
            fs::read_to_string(outside.join("f.txt")).unwrap(),
            "secret\n"
        );
        assert_eq!(fs::read_dir(&outside).unwrap().count(), 1);
    }
}
