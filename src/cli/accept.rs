//! `git agent accept`: bring a session's change into the user's working tree, three-way per file.
//!
//! Not `git apply --3way` (it writes the index) nor a merge (it moves HEAD): for each path the session changed,
//! the user's current file is *ours*, the session's start (step 0 or base) is the *base*, and the tip is
//! *theirs*. A file the user left alone is simply replaced; a file both changed goes through `git merge-file`.
//! Conflicts are written with markers and listed, or, with `--no-conflicts` / `--commit`, nothing at all is
//! written. The index is only touched by `--commit`, which stages and commits exactly the accepted paths with
//! `git commit` so the user's hooks run.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use clap::Args;

use super::{CommandError, Context};
use crate::agent::journal::Event;
use crate::store::{ObjectId, Store};

/// Apply the session's change to your working tree (three-way per file; conflicts are reported)
///
/// Only the agent's change is applied: from step 0 (your own captured changes) or the base, to the tip.
/// Edits you made since the session started are never overwritten.
#[derive(Debug, Args)]
pub struct AcceptArgs {
    /// The session (any unique prefix of its id; default: the newest)
    id: Option<String>,

    /// Also commit the accepted files on the current branch (your git hooks run); refuses on conflicts
    #[arg(long)]
    commit: bool,

    /// Refuse, changing nothing, if any file would get conflict markers
    #[arg(long)]
    no_conflicts: bool,
}

/// What happens to one path.
enum Action {
    /// Your file already has the session's content.
    Same,
    /// You had not changed it: the session's version (bytes, executable) is written.
    Take(Vec<u8>, bool),
    /// You had not changed it and the session deleted it.
    Delete,
    /// Both changed it, without overlap.
    Merged(Vec<u8>, bool),
    /// Both changed the same lines: written with conflict markers.
    Conflict(Vec<u8>, bool),
    /// Both changed it and it cannot be merged line by line (binary, or deleted on one side): yours stays.
    Kept(&'static str),
}

pub fn run(ctx: &Context, args: AcceptArgs) -> Result<(), CommandError> {
    let store = ctx.store()?;
    let id = store.resolve_session(args.id.as_deref())?;
    let log = store.read_log(&id)?;
    let meta = &log.meta;
    if meta.here {
        // Its changes are already in the user's working tree: a three-way merge would only report conflicts.
        return Err(CommandError::user(format!(
            "session {id} worked in your working tree (--here): its changes are already there"
        ))
        .hint(format!(
            "review them with `git diff`, commit them with `git commit`; `git log agent/{id}` lists the steps"
        )));
    }
    let tip = super::session_tip(store, meta)?;
    let from = meta.step0.as_deref().unwrap_or(&meta.base);
    let from = ObjectId::from_hex(from.as_bytes())
        .map_err(|e| CommandError::internal(format!("bad base in the session log: {e}")))?;
    let changes = store.changes(from, tip)?;
    if changes.is_empty() {
        eprintln!("session {id} changed nothing: nothing to accept");
        return Ok(());
    }
    let label = format!("agent/{id}");
    let mut plan = Vec::new();
    for change in &changes {
        let action = plan_path(store, from, tip, &change.path, &label)
            .map_err(|e| CommandError::internal(format!("{}: {e}", change.path)))?;
        plan.push((change.path.clone(), action));
    }
    let conflicts: Vec<&str> = plan
        .iter()
        .filter(|(_, a)| matches!(a, Action::Conflict(..) | Action::Kept(_)))
        .map(|(p, _)| p.as_str())
        .collect();
    if !conflicts.is_empty() && (args.no_conflicts || args.commit) {
        for (path, action) in &plan {
            if let Action::Conflict(..) | Action::Kept(_) = action {
                eprintln!("  conflict  {path}");
            }
        }
        return Err(CommandError::user(format!(
            "{} file{} changed by you and by session {id} conflict; nothing was changed",
            conflicts.len(),
            if conflicts.len() == 1 { "" } else { "s" }
        ))
        .hint(format!(
            "run `git agent accept {id}` to get conflict markers, or `git agent diff {id}` to look first"
        )));
    }
    let root = store.workdir().to_path_buf();
    let mut applied: Vec<&str> = Vec::new();
    for (path, action) in &plan {
        let full = root.join(path);
        let what = match action {
            Action::Same => "unchanged",
            Action::Take(bytes, exec) => {
                write_file(&full, bytes, *exec)?;
                "updated"
            }
            Action::Delete => {
                fs::remove_file(&full)
                    .or_else(ignore_missing)
                    .map_err(|e| CommandError::internal(format!("cannot remove {path}: {e}")))?;
                "deleted"
            }
            Action::Merged(bytes, exec) => {
                write_file(&full, bytes, *exec)?;
                "merged"
            }
            Action::Conflict(bytes, exec) => {
                write_file(&full, bytes, *exec)?;
                "CONFLICT"
            }
            Action::Kept(why) => {
                eprintln!("  kept      {path} (yours; {why}; theirs: git show {label}:{path})");
                continue;
            }
        };
        if !matches!(action, Action::Same) {
            applied.push(path);
        }
        eprintln!("  {what:<9} {path}");
    }
    if !conflicts.is_empty() {
        return Err(CommandError::user(format!(
            "{} conflict{} with your changes: resolve the markers (<<<<<<< yours / >>>>>>> {label})",
            conflicts.len(),
            if conflicts.len() == 1 { "" } else { "s" }
        )));
    }
    if args.commit {
        return commit(&root, &id, &log, &applied);
    }
    eprintln!("accepted session {id} into your working tree (not committed)");
    Ok(())
}

fn plan_path(
    store: &Store,
    from: ObjectId,
    tip: ObjectId,
    path: &str,
    label: &str,
) -> Result<Action, String> {
    let base = store.blob_at(from, path).map_err(|e| e.to_string())?;
    let theirs = store.blob_at(tip, path).map_err(|e| e.to_string())?;
    let ours = read_user(&store.workdir().join(path))?;
    let bytes = |b: &Option<(Vec<u8>, bool)>| b.as_ref().map(|(d, _)| d.clone());
    if ours == bytes(&theirs) {
        return Ok(Action::Same);
    }
    if ours == bytes(&base) {
        return Ok(match theirs {
            Some((data, exec)) => Action::Take(data, exec),
            None => Action::Delete,
        });
    }
    let (Some(ours), Some((base_data, _)), Some((their_data, exec))) = (ours, &base, &theirs)
    else {
        return Ok(Action::Kept(
            "added or deleted on one side, changed on the other",
        ));
    };
    if [&ours, base_data, their_data]
        .iter()
        .any(|d| d.contains(&0))
    {
        return Ok(Action::Kept("binary file"));
    }
    let (merged, conflicts) = merge_file(store, &ours, base_data, their_data, label)?;
    Ok(if conflicts {
        Action::Conflict(merged, *exec)
    } else {
        Action::Merged(merged, *exec)
    })
}

/// The user's file as bytes; `None` if it does not exist.
fn read_user(path: &Path) -> Result<Option<Vec<u8>>, String> {
    match fs::symlink_metadata(path) {
        Ok(md) if md.is_symlink() => fs::read_link(path)
            .map(|t| Some(t.into_os_string().into_encoded_bytes()))
            .map_err(|e| format!("cannot read {}: {e}", path.display())),
        Ok(md) if md.is_file() => fs::read(path)
            .map(Some)
            .map_err(|e| format!("cannot read {}: {e}", path.display())),
        Ok(_) => Ok(Some(Vec::new())),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(format!("cannot read {}: {err}", path.display())),
    }
}

/// `git merge-file` on three versions; returns the result and whether it has conflict markers.
fn merge_file(
    store: &Store,
    ours: &[u8],
    base: &[u8],
    theirs: &[u8],
    label: &str,
) -> Result<(Vec<u8>, bool), String> {
    let dir = store.common_dir().join("agent").join("tmp");
    fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let stem = format!("merge-{}", std::process::id());
    let files: Vec<PathBuf> = ["ours", "base", "theirs"]
        .iter()
        .map(|n| dir.join(format!("{stem}.{n}")))
        .collect();
    for (file, data) in files.iter().zip([ours, base, theirs]) {
        fs::write(file, data).map_err(|e| format!("cannot write {}: {e}", file.display()))?;
    }
    let out = super::git_inherit(store.workdir())
        .args(["merge-file", "-p", "-L", "yours", "-L", "base", "-L", label])
        .args(&files)
        .output();
    for file in &files {
        let _ = fs::remove_file(file);
    }
    let out = out.map_err(|e| format!("could not run git merge-file: {e}"))?;
    match out.status.code() {
        Some(n) if (0..=127).contains(&n) => Ok((out.stdout, n > 0)),
        _ => Err(format!(
            "git merge-file failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )),
    }
}

fn write_file(path: &Path, bytes: &[u8], exec: bool) -> Result<(), CommandError> {
    write_file_inner(path, bytes, exec).map_err(CommandError::internal)
}

fn write_file_inner(path: &Path, bytes: &[u8], exec: bool) -> Result<(), String> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    fs::write(path, bytes).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    let md = fs::metadata(path).map_err(|e| format!("cannot stat {}: {e}", path.display()))?;
    let mode = md.permissions().mode();
    let wanted = if exec {
        mode | ((mode & 0o444) >> 2)
    } else {
        mode & !0o111
    };
    if wanted != mode {
        fs::set_permissions(path, fs::Permissions::from_mode(wanted))
            .map_err(|e| format!("cannot chmod {}: {e}", path.display()))?;
    }
    Ok(())
}

fn ignore_missing(err: std::io::Error) -> std::io::Result<()> {
    if err.kind() == std::io::ErrorKind::NotFound {
        Ok(())
    } else {
        Err(err)
    }
}

/// Stages and commits exactly `paths` with `git commit`, so the user's hooks run; other staged work stays staged.
fn commit(
    root: &Path,
    id: &str,
    log: &crate::store::LogContents,
    paths: &[&str],
) -> Result<(), CommandError> {
    if paths.is_empty() {
        eprintln!("your working tree already has session {id}'s change: nothing to commit");
        return Ok(());
    }
    let run = |args: &[&str]| -> Result<(), CommandError> {
        let status = super::git_inherit(root)
            .arg("--literal-pathspecs")
            .args(args)
            .args(paths)
            .status()
            .map_err(|e| CommandError::internal(format!("could not run git: {e}")))?;
        if status.success() {
            Ok(())
        } else {
            Err(CommandError::user(format!(
                "`git {}` failed: the accepted files are in your working tree, uncommitted",
                args.first().copied().unwrap_or_default()
            )))
        }
    };
    let message = commit_message(id, log);
    run(&["add", "-A", "--"])?;
    run(&["commit", "-q", "-m", &message, "--"])?;
    eprintln!("committed session {id} on your current branch");
    Ok(())
}

/// The prompt's first line as subject, the agent's last answer as body, and the session trailer.
fn commit_message(id: &str, log: &crate::store::LogContents) -> String {
    let subject = log
        .meta
        .prompt
        .lines()
        .next()
        .unwrap_or("git-agent session")
        .trim();
    let answer = log
        .events
        .iter()
        .rev()
        .filter_map(Event::from_json)
        .find_map(|e| match e {
            Event::End { answer, .. } if !answer.trim().is_empty() => Some(answer),
            _ => None,
        })
        .unwrap_or_default();
    let body = answer.split("\n\n").next().unwrap_or_default().trim();
    let mut message = subject.to_owned();
    if !body.is_empty() {
        message.push_str("\n\n");
        message.push_str(body);
    }
    message.push_str(&format!("\n\nAgent-Session: {id}\n"));
    message
}
