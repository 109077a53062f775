//! `read_file`: a file's lines, numbered like `cat -n`, a window at a time.
//!
//! The numbers let the model cite lines and pick the next `offset`; the window and the per-line cut keep one
//! minified file or log from flooding the context.

use std::fs;
use std::hash::Hasher;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;

use serde_json::json;

use super::state::Fingerprinter;
use super::tool::{
    confine, cut_line, looks_binary, str_arg, u64_arg, Tool, ToolContext, ToolOutput, BINARY_SNIFF,
};
use crate::protocol::{Location, ToolKind};
use crate::safety::path::Access;

/// Lines shown when the model gives no `limit`.
const DEFAULT_LIMIT: u64 = 2000;
/// Longer lines are cut: they are almost always minified code or data.
const MAX_LINE_CHARS: usize = 2000;
/// Stop early past this many bytes of output even if `limit` is not reached.
const MAX_OUTPUT_BYTES: usize = 128 * 1024;
/// Entries shown when the path is a directory.
const MAX_DIR_ENTRIES: usize = 500;

pub struct ReadFile;

impl Tool for ReadFile {
    fn name(&self) -> &str {
        "read_file"
    }

    fn description(&self) -> &str {
        "Read a text file, lines numbered like `cat -n` (the numbers are not in the file). Reads up to 2000 \
         lines from `offset`; the output says where to go on. Lines over 2000 characters are cut. A directory \
         gives its entries."
    }

    fn parameters(&self) -> serde_json::Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "offset": {"type": "integer", "minimum": 1, "description": "First line (1-based)"},
                "limit": {"type": "integer", "minimum": 1, "description": "Lines to read"}
            },
            "required": ["path"]
        })
    }

    fn is_mutating(&self) -> bool {
        false
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Read
    }

    fn path_arg(&self) -> Option<&str> {
        Some("path")
    }

    fn location(&self, args: &serde_json::Value) -> Option<Location> {
        let path = args.get("path")?.as_str()?;
        let line = args.get("offset").and_then(|n| n.as_u64());
        Some(Location {
            path: path.to_owned(),
            line: Some(line.map_or(1, |n| u32::try_from(n).unwrap_or(u32::MAX))),
        })
    }

    fn label(&self, args: &serde_json::Value) -> String {
        format!(
            "read {}",
            args.get("path").and_then(|v| v.as_str()).unwrap_or("?")
        )
    }

    fn execute(&self, ctx: &ToolContext, args: &serde_json::Value) -> ToolOutput {
        match read(ctx, args) {
            Ok(out) => out,
            Err(message) => ToolOutput::error(message),
        }
    }
}

fn read(ctx: &ToolContext, args: &serde_json::Value) -> Result<ToolOutput, String> {
    let path = str_arg(args, "path")?;
    let offset = u64_arg(args, "offset")?.unwrap_or(1).max(1);
    let limit = u64_arg(args, "limit")?.unwrap_or(DEFAULT_LIMIT).max(1);
    let target = confine(ctx, path, Access::Read)?;
    let mut file = target
        .open_read()
        .map_err(|e| target.io_error("read", &e))?;
    let meta = file.metadata().map_err(|e| target.io_error("read", &e))?;
    if meta.is_dir() {
        return list_dir(&target.abs, &target.display());
    }
    let mut head = Vec::with_capacity(BINARY_SNIFF);
    (&mut file)
        .take(BINARY_SNIFF as u64)
        .read_to_end(&mut head)
        .map_err(|e| target.io_error("read", &e))?;
    if let Some(media_type) = super::image::sniff(&head) {
        return read_image(ctx, file, head, meta.len(), path, media_type);
    }
    if looks_binary(&head) {
        return Err(format!(
            "'{path}' is a binary file ({}, {} bytes); it cannot be shown as text",
            binary_kind(&head),
            meta.len()
        ));
    }
    let reader = BufReader::new(io::Cursor::new(head).chain(file));
    let window = number_lines(reader, offset, limit).map_err(|e| target.io_error("read", &e))?;
    // What the model now knows the file to be: an edit is refused if it changes before then.
    ctx.session.saw(&target.rel, window.fingerprint);
    window.into_output(path, offset)
}

/// An image file as an image for the model (it reads the pixels, not the bytes), when the model takes
/// images and the file is within the cap; the text result only names it.
fn read_image(
    ctx: &ToolContext,
    mut file: std::fs::File,
    mut bytes: Vec<u8>,
    size: u64,
    path: &str,
    media_type: &str,
) -> Result<ToolOutput, String> {
    let policy = ctx.session.images;
    if !policy.vision {
        return Err(format!(
            "'{path}' is an image ({media_type}, {size} bytes); this model does not take images \
             (vision = false in its provider's config)"
        ));
    }
    let cap = policy.max_size;
    if size <= cap {
        (&mut file)
            .take(cap + 1 - bytes.len() as u64)
            .read_to_end(&mut bytes)
            .map_err(|e| format!("cannot read '{path}': {e}"))?;
    }
    let read_size = size.max(bytes.len() as u64);
    let image = super::image::from_bytes(&bytes, path, cap).map_err(|_| {
        super::image::ImageError::TooLarge {
            name: format!("'{path}'"),
            size: read_size,
            cap,
        }
        .to_string()
    })?;
    let summary = format!("image, {}", super::capture::human_size(image.bytes));
    let content = format!(
        "'{path}' is an image ({media_type}, {} bytes); it is attached after this result",
        image.bytes
    );
    Ok(ToolOutput {
        images: vec![image],
        ..ToolOutput::ok(content, summary)
    })
}

/// A name for common binary formats, from their magic numbers; what `file(1)` would say, in short.
pub fn binary_kind(head: &[u8]) -> &'static str {
    const MAGIC: &[(&[u8], &str)] = &[
        (b"\x89PNG", "PNG image"),
        (b"\xff\xd8\xff", "JPEG image"),
        (b"GIF8", "GIF image"),
        (b"%PDF", "PDF document"),
        (b"PK\x03\x04", "zip archive"),
        (b"\x1f\x8b", "gzip data"),
        (b"\x7fELF", "ELF executable"),
        (b"\0asm", "WebAssembly module"),
        (b"SQLite format 3", "SQLite database"),
        (b"\xca\xfe\xba\xbe", "Java class or Mach-O"),
        (b"\xcf\xfa\xed\xfe", "Mach-O executable"),
        (b"MZ", "Windows executable"),
        (b"\x28\xb5\x2f\xfd", "zstd data"),
        (b"BZh", "bzip2 data"),
        (b"\xfd7zXZ", "xz data"),
        (b"RIFF", "RIFF media"),
        (b"OggS", "Ogg media"),
        (b"ID3", "MP3 audio"),
        (b"wOFF", "WOFF font"),
        (b"wOF2", "WOFF2 font"),
    ];
    MAGIC
        .iter()
        .find(|(magic, _)| head.starts_with(magic))
        .map(|(_, kind)| *kind)
        .unwrap_or("data with NUL bytes")
}

/// The numbered lines of one window, and how many lines the file has in all.
struct Window {
    text: String,
    shown: u64,
    total: u64,
    /// Of the whole file, for the stale-read guard.
    fingerprint: u64,
}

/// Reads every line (to count them) but keeps only the requested window, so memory stays bounded.
fn number_lines(mut reader: impl BufRead, offset: u64, limit: u64) -> io::Result<Window> {
    let mut window = Window {
        text: String::new(),
        shown: 0,
        total: 0,
        fingerprint: 0,
    };
    let mut hasher = Fingerprinter::new();
    let mut buf = Vec::new();
    loop {
        buf.clear();
        if reader.read_until(b'\n', &mut buf)? == 0 {
            window.fingerprint = hasher.finish();
            return Ok(window);
        }
        hasher.write(&buf);
        window.total += 1;
        let full = window.text.len() >= MAX_OUTPUT_BYTES;
        if window.total < offset || window.shown >= limit || full {
            continue;
        }
        let line = String::from_utf8_lossy(&buf);
        // CRLF files show without the `\r`; edit_file matches either way.
        let line = line.trim_end_matches('\n').trim_end_matches('\r');
        window.text.push_str(&format!(
            "{:>6}\t{}\n",
            window.total,
            cut_line(line, MAX_LINE_CHARS)
        ));
        window.shown += 1;
    }
}

impl Window {
    fn into_output(mut self, path: &str, offset: u64) -> Result<ToolOutput, String> {
        if self.total == 0 {
            return Ok(ToolOutput::ok(format!("('{path}' is empty)"), "empty file"));
        }
        if offset > self.total {
            return Err(format!(
                "offset {offset} is past the end of '{path}', which has {} lines",
                self.total
            ));
        }
        let last = offset + self.shown - 1;
        let remaining = self.total - last;
        if remaining > 0 {
            let next = last + 1;
            self.text.push_str(&format!(
                "... {remaining} more lines; use offset={next} to read on\n"
            ));
        }
        let summary = if offset == 1 && remaining == 0 {
            format!("{} lines", self.total)
        } else {
            format!("lines {offset}-{last} of {}", self.total)
        };
        Ok(ToolOutput::ok(self.text, summary))
    }
}

/// One level of a directory, sorted, directories marked with a trailing `/`.
fn list_dir(dir: &Path, shown: &str) -> Result<ToolOutput, String> {
    let entries = fs::read_dir(dir).map_err(|e| open_error(shown, &e))?;
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .filter(|e| !e.file_name().to_string_lossy().eq_ignore_ascii_case(".git"))
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                format!("{name}/")
            } else {
                name
            }
        })
        .collect();
    names.sort();
    let count = names.len();
    let mut text = format!("'{shown}' is a directory with {count} entries:\n");
    for name in names.iter().take(MAX_DIR_ENTRIES) {
        text.push_str(name);
        text.push('\n');
    }
    if count > MAX_DIR_ENTRIES {
        text.push_str(&format!(
            "... {} more not shown; use list_files\n",
            count - MAX_DIR_ENTRIES
        ));
    }
    Ok(ToolOutput::ok(text, format!("directory, {count} entries")))
}

fn open_error(path: &str, err: &io::Error) -> String {
    format!("cannot read '{path}': {err}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::testutil::{put, temp_ctx};

    fn run(ctx: &ToolContext, args: serde_json::Value) -> ToolOutput {
        ReadFile.execute(ctx, &args)
    }

    #[test]
    fn numbers_lines_like_cat_n() {
        let ctx = temp_ctx("read-basic");
        put(&ctx, "a.txt", "one\ntwo\r\nthree");
        let out = run(&ctx, json!({"path": "a.txt"}));
        assert!(!out.is_error, "{}", out.content);
        assert_eq!(out.content, "     1\tone\n     2\ttwo\n     3\tthree\n");
        assert_eq!(out.summary, "3 lines");
    }

    #[test]
    fn offset_and_limit() {
        let ctx = temp_ctx("read-window");
        let text: String = (1..=10).map(|i| format!("line {i}\n")).collect();
        put(&ctx, "a.txt", text);
        let out = run(&ctx, json!({"path": "a.txt", "offset": 3, "limit": 2}));
        assert_eq!(
            out.content,
            "     3\tline 3\n     4\tline 4\n... 6 more lines; use offset=5 to read on\n"
        );
        assert_eq!(out.summary, "lines 3-4 of 10");
        let out = run(&ctx, json!({"path": "a.txt", "offset": 9}));
        assert_eq!(out.content, "     9\tline 9\n    10\tline 10\n");
        let out = run(&ctx, json!({"path": "a.txt", "offset": 11}));
        assert!(
            out.is_error && out.content.contains("past the end"),
            "{}",
            out.content
        );
    }

    #[test]
    fn long_lines_cut() {
        let ctx = temp_ctx("read-long");
        put(&ctx, "min.js", "x".repeat(5000));
        let out = run(&ctx, json!({"path": "min.js"}));
        assert!(out.content.contains("[... line cut: 5000 chars in total]"));
        assert!(out.content.len() < 2100);
    }

    #[test]
    fn binary_refused_and_directory_listed() {
        let ctx = temp_ctx("read-bin");
        put(&ctx, "b.bin", b"abc\0def");
        put(&ctx, "d/x.txt", "x");
        put(&ctx, "d/sub/y.txt", "y");
        let out = run(&ctx, json!({"path": "b.bin"}));
        assert!(
            out.is_error
                && out
                    .content
                    .contains("binary file (data with NUL bytes, 7 bytes)"),
            "{}",
            out.content
        );
        let out = run(&ctx, json!({"path": "d"}));
        assert!(!out.is_error);
        assert!(out.content.contains("sub/\nx.txt\n"), "{}", out.content);
    }

    #[test]
    fn missing_and_confined() {
        let ctx = temp_ctx("read-missing");
        assert!(run(&ctx, json!({"path": "nope.txt"}))
            .content
            .contains("does not exist"));
        assert!(run(&ctx, json!({"path": "../x"}))
            .content
            .contains("outside the checkout"));
        assert!(run(&ctx, json!({"path": ".git/config"})).is_error);
        assert!(run(&ctx, json!({}))
            .content
            .contains("missing required string argument `path`"));
    }
}
