//! `write_file`: create or replace a whole file, atomically.
//!
//! A reader (an editor, a running test, the snapshot scan) sees the old content or the new, never half a
//! file; the write goes through [`crate::safety::beneath`], so it never follows a link out of the checkout.

use std::io;

use serde_json::json;

use super::state::fingerprint;
use super::tool::{confine, str_arg, Tool, ToolContext, ToolOutput};
use crate::protocol::ToolKind;
use crate::safety::path::Access;

pub struct WriteFile;

impl Tool for WriteFile {
    fn name(&self) -> &str {
        "write_file"
    }

    fn description(&self) -> &str {
        "Create a file or replace its whole content (parent directories are created). To change part of a \
         file, use edit_file."
    }

    fn parameters(&self) -> serde_json::Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "content": {"type": "string"}
            },
            "required": ["path", "content"]
        })
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Edit
    }

    fn path_arg(&self) -> Option<&str> {
        Some("path")
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
    let existing = match target.open_read().and_then(|f| f.metadata()) {
        Ok(meta) if meta.is_dir() => {
            return Err(format!("'{path}' is a directory; give the path of a file"))
        }
        Ok(meta) => Some(meta.permissions()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        // A symlink in the final position is replaced by the file, never written through.
        Err(e) if e.raw_os_error() == Some(crate::sys::errno::ELOOP) => None,
        Err(e) => return Err(target.io_error("write", &e)),
    };
    target
        .write_atomic(content.as_bytes(), existing.clone(), true)
        .map_err(|e| target.io_error("write", &e))?;
    ctx.session
        .saw(&target.rel, fingerprint(content.as_bytes()));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::testutil::{put, temp_ctx};
    use std::fs::{self, Permissions};
    use std::os::unix::fs::PermissionsExt;
    use std::path::PathBuf;

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
