//! `write_file`: create or replace a whole file, atomically.
//!
//! Also home of [`write_atomic`], which `edit_file` shares: a reader (an editor, a running test, the snapshot
//! scan) sees the old content or the new, never half a file.

use std::fs::{self, File, OpenOptions, Permissions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;

use super::{confine, str_arg, Tool, ToolContext, ToolOutput};
use crate::safety::path::Access;

pub struct WriteFile;

impl Tool for WriteFile {
    fn name(&self) -> &'static str {
        "write_file"
    }

    fn description(&self) -> &'static str {
        "Create a file, or replace a file's whole content, in the repository. Parent directories are created. \
         To change part of an existing file, prefer edit_file."
    }

    fn parameters(&self) -> serde_json::Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File path relative to the repository root"},
                "content": {"type": "string", "description": "The complete new content of the file"}
            },
            "required": ["path", "content"]
        })
    }

    fn label(&self, args: &serde_json::Value) -> String {
        format!(
            "write {}",
            args.get("path").and_then(|v| v.as_str()).unwrap_or("?")
        )
    }

    fn execute(&self, ctx: &ToolContext, args: &serde_json::Value) -> ToolOutput {
        match write(ctx, args) {
            Ok(out) => out,
            Err(message) => ToolOutput::error(message),
        }
    }
}

fn write(ctx: &ToolContext, args: &serde_json::Value) -> Result<ToolOutput, String> {
    let path = str_arg(args, "path")?;
    let content = str_arg(args, "content")?;
    let target = confine(ctx, path, Access::Write)?;
    let existing = match fs::metadata(&target.abs) {
        Ok(meta) if meta.is_dir() => {
            return Err(format!("'{path}' is a directory; give the path of a file"))
        }
        Ok(meta) => Some(meta.permissions()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(format!("cannot write '{path}': {e}")),
    };
    if let Some(parent) = target.abs.parent() {
        fs::create_dir_all(parent)
            .map_err(|e| format!("cannot create the directories for '{path}': {e}"))?;
    }
    write_atomic(&target.abs, content.as_bytes(), existing.clone())
        .map_err(|e| format!("cannot write '{path}': {e}"))?;
    let lines = content.lines().count();
    let verb = if existing.is_some() {
        "replaced"
    } else {
        "created"
    };
    let shown = target.display();
    let mut out = ToolOutput::ok(
        format!("{verb} {shown} ({} bytes, {lines} lines)", content.len()),
        format!("{verb}, {lines} lines"),
    );
    out.changed = vec![target.rel];
    Ok(out)
}

/// Writes `bytes` to `path` through a temp file in the same directory and a rename, so the file is never
/// seen half-written. `mode` (the replaced file's permissions) is set on the temp file before the rename, so
/// an executable script stays executable throughout.
pub fn write_atomic(path: &Path, bytes: &[u8], mode: Option<Permissions>) -> io::Result<()> {
    let temp = temp_path(path)?;
    let result = write_temp(&temp, bytes, mode).and_then(|()| fs::rename(&temp, path));
    if result.is_err() {
        // Best effort: the temp file is ours and useless now; the original error is what matters.
        let _ = fs::remove_file(&temp);
    }
    result
}

fn write_temp(temp: &Path, bytes: &[u8], mode: Option<Permissions>) -> io::Result<()> {
    let mut file: File = OpenOptions::new().write(true).create_new(true).open(temp)?;
    file.write_all(bytes)?;
    if let Some(mode) = mode {
        file.set_permissions(mode)?;
    }
    file.sync_all()
}

/// `.name.git-agent-<pid>-<n>.tmp` next to `path`: same directory so the rename stays on one file system.
fn temp_path(path: &Path) -> io::Result<PathBuf> {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "path has no file name"))?;
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let temp = format!(
        ".{}.git-agent-{}-{n}.tmp",
        name.to_string_lossy(),
        std::process::id()
    );
    Ok(path.with_file_name(temp))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::testutil::{put, temp_ctx};
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn creates_with_parents_and_replaces() {
        let ctx = temp_ctx("write-basic");
        let out = WriteFile.execute(
            &ctx,
            &json!({"path": "a/b/c.txt", "content": "hi\nthere\n"}),
        );
        assert!(!out.is_error, "{}", out.content);
        assert_eq!(out.summary, "created, 2 lines");
        assert_eq!(out.changed, vec![PathBuf::from("a/b/c.txt")]);
        assert_eq!(
            fs::read_to_string(ctx.root.join("a/b/c.txt")).unwrap(),
            "hi\nthere\n"
        );
        let out = WriteFile.execute(&ctx, &json!({"path": "a/b/c.txt", "content": "bye"}));
        assert_eq!(out.summary, "replaced, 1 lines");
        assert_eq!(
            fs::read_to_string(ctx.root.join("a/b/c.txt")).unwrap(),
            "bye"
        );
        let leftovers: Vec<_> = fs::read_dir(ctx.root.join("a/b")).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "temp file left behind");
    }

    #[test]
    fn keeps_mode() {
        let ctx = temp_ctx("write-mode");
        put(&ctx, "run.sh", "#!/bin/sh\n");
        fs::set_permissions(ctx.root.join("run.sh"), Permissions::from_mode(0o755)).unwrap();
        WriteFile.execute(
            &ctx,
            &json!({"path": "run.sh", "content": "#!/bin/sh\necho hi\n"}),
        );
        let mode = fs::metadata(ctx.root.join("run.sh"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o755);
    }

    #[test]
    fn refuses_git_outside_and_directories() {
        let ctx = temp_ctx("write-refuse");
        put(&ctx, "dir/x", "");
        assert!(
            WriteFile
                .execute(
                    &ctx,
                    &json!({"path": ".git/hooks/pre-commit", "content": "x"})
                )
                .is_error
        );
        assert!(
            WriteFile
                .execute(&ctx, &json!({"path": "../escape.txt", "content": "x"}))
                .is_error
        );
        assert!(WriteFile
            .execute(&ctx, &json!({"path": "dir", "content": "x"}))
            .content
            .contains("is a directory"));
        assert!(!ctx.root.parent().unwrap().join("escape.txt").exists());
    }
}
