//! `git agent memory`: project memory, the entries sessions keep in `refs/agent/memory`.
//!
//! Every change is one commit on that ref (`git log refs/agent/memory` audits it): `forget` archives by a
//! commit that `restore` undoes, `--purge` removes the entry's file in a commit of its own. Reads go through
//! the memory index, so `list` over 10,000 entries reads 256 small blobs. Entry text may come from someone
//! else's push, so what reaches the terminal is neutralised.

use std::io::Write;

use clap::{Args, Subcommand};

use super::context::Context;
use super::error::CommandError;
use crate::agent::memory::policy::{self, Proposal, Written};
use crate::protocol::Untrusted;
use crate::store::memory::{
    round_confidence, Entry, EntryStatus, Kind, MemoryEdit, Resolved, Source, Summary, MEMORY_REF,
};
use crate::store::session_log::now;
use crate::store::Store;
use crate::ui::neutralize;

/// Project memory: what sessions learned about this repository (refs/agent/memory)
///
/// Entries are proposed by the model with its remember tool and written when the session completes; each
/// carries its sources, a confidence and use counts. Every change is a commit on refs/agent/memory.
#[derive(Debug, Args)]
pub struct MemoryArgs {
    #[command(subcommand)]
    command: MemoryCommand,
}

#[derive(Debug, Subcommand)]
enum MemoryCommand {
    /// List active entries: id, kind, confidence, uses, text
    List {
        /// Also archived and needs_review entries
        #[arg(long)]
        all: bool,
        /// One JSON object per entry
        #[arg(long)]
        json: bool,
    },
    /// Show one entry: text, tags, sources, confidence and counts
    Show {
        /// The entry (any unique prefix of its id)
        id: String,
        /// The entry's file as JSON
        #[arg(long)]
        json: bool,
    },
    /// Add an entry by hand (a near-duplicate of an entry updates that one instead)
    Add {
        /// The fact to remember
        #[arg(required = true, value_name = "TEXT")]
        text: Vec<String>,
        /// A keyword it is about (repeatable)
        #[arg(long = "tag", value_name = "TAG")]
        tags: Vec<String>,
        /// fact, convention, pitfall or command
        #[arg(long, default_value = "fact", value_parser = ["fact", "convention", "pitfall", "command"])]
        kind: String,
        /// Why it holds
        #[arg(long, value_name = "TEXT")]
        why: Option<String>,
    },
    /// Change an entry's text, tags or kind: in $EDITOR, or with --text/--tag/--kind
    Edit {
        /// The entry (any unique prefix of its id)
        id: String,
        /// The new text (no editor is opened)
        #[arg(long, value_name = "TEXT")]
        text: Option<String>,
        /// Replace the tags with these (repeatable; no editor is opened)
        #[arg(long = "tag", value_name = "TAG")]
        tags: Vec<String>,
        /// fact, convention, pitfall or command (no editor is opened)
        #[arg(long, value_parser = ["fact", "convention", "pitfall", "command"])]
        kind: Option<String>,
    },
    /// Archive an entry so it is no longer used (restore undoes it)
    Forget {
        /// The entry (any unique prefix of its id)
        id: String,
        /// Why, recorded in the entry and the commit
        #[arg(long, value_name = "TEXT")]
        reason: Option<String>,
        /// Remove the entry's file instead (a new commit; the history keeps it)
        #[arg(long)]
        purge: bool,
    },
    /// Bring back a forgotten entry (also one removed with --purge, from the history)
    Restore {
        /// The entry (any unique prefix of its id)
        id: String,
    },
    /// The history of memory, one line per change (of one entry, if given)
    Log {
        /// Only the changes of this entry (any unique prefix of its id)
        id: Option<String>,
        /// Show at most N changes
        #[arg(long, short = 'n', value_name = "N")]
        max_count: Option<usize>,
    },
    /// Write a session's remember proposals into memory (for memory.auto = false, or a blocked session)
    Accept {
        /// The session (any unique prefix of its id)
        session: String,
    },
}

pub fn run(ctx: &Context, args: MemoryArgs) -> Result<(), CommandError> {
    let store = ctx.store()?;
    match args.command {
        MemoryCommand::List { all, json } => list(store, all, json),
        MemoryCommand::Show { id, json } => show(store, &id, json),
        MemoryCommand::Add {
            text,
            tags,
            kind,
            why,
        } => add(store, &text.join(" "), &tags, &kind, why.as_deref()),
        MemoryCommand::Edit {
            id,
            text,
            tags,
            kind,
        } => edit(ctx, store, &id, text, tags, kind),
        MemoryCommand::Forget { id, reason, purge } => forget(store, &id, reason, purge),
        MemoryCommand::Restore { id } => restore(store, &id),
        MemoryCommand::Log { id, max_count } => log(store, id.as_deref(), max_count),
        MemoryCommand::Accept { session } => accept(store, &session),
    }
}

fn list(store: &Store, all: bool, json: bool) -> Result<(), CommandError> {
    let everything = store.memory_summaries()?;
    let total = everything.len();
    let mut entries: Vec<Summary> = everything
        .into_iter()
        .filter(|e| all || e.status == EntryStatus::Active)
        .collect();
    entries.sort_by(|a, b| {
        b.confidence
            .total_cmp(&a.confidence)
            .then_with(|| b.updated.cmp(&a.updated))
            .then_with(|| a.id.cmp(&b.id))
    });
    let mut out = std::io::stdout().lock();
    for entry in &entries {
        let line = if json {
            crate::protocol::json_for_terminal(serde_json::to_string(entry).unwrap_or_default())
        } else {
            let status = match entry.status {
                EntryStatus::Active => String::new(),
                other => format!("[{}] ", other.as_str()),
            };
            let text = entry.text.lines().next().unwrap_or_default();
            format!(
                "{}  {:<10}  {:.2}  {:>3} use{}  {status}{}",
                Untrusted::name(&entry.id),
                entry.kind.as_str(),
                entry.confidence,
                entry.uses,
                if entry.uses == 1 { " " } else { "s" },
                neutralize(&crate::tools::short(text, 100))
            )
        };
        if writeln!(out, "{line}").is_err() {
            break; // a closed pipe (`| head`) is not an error
        }
    }
    if entries.is_empty() && !json {
        if total == 0 {
            eprintln!("no memory entries yet: sessions propose them with remember; add one with `git agent memory add`");
        } else {
            eprintln!("no active entries: {total} forgotten or needing review (`git agent memory list --all`)");
        }
    }
    Ok(())
}

fn show(store: &Store, prefix: &str, json: bool) -> Result<(), CommandError> {
    let entry = find(store, prefix)?;
    let text = if json {
        crate::protocol::json_for_terminal(serde_json::to_string_pretty(&entry).unwrap_or_default())
    } else {
        describe(&entry)
    };
    let _ = writeln!(std::io::stdout().lock(), "{text}");
    Ok(())
}

/// An entry for a person: heading, counts, sources, the text, other versions.
fn describe(entry: &Entry) -> String {
    let mut out = format!(
        "memory {} · {} · {} · confidence {:.2}\n",
        Untrusted::name(&entry.id),
        entry.kind.as_str(),
        entry.status.as_str(),
        entry.confidence
    );
    if !entry.tags.is_empty() {
        out.push_str(&format!("tags: {}\n", neutralize(&entry.tags.join(", "))));
    }
    out.push_str(&format!(
        "used in {} session{} ({} completed, {} failed) · created {} · updated {}\n",
        entry.uses,
        if entry.uses == 1 { "" } else { "s" },
        entry.successes,
        entry.failures,
        super::context::when(entry.created),
        super::context::when(entry.updated)
    ));
    if !entry.reason.is_empty() {
        out.push_str(&format!("reason: {}\n", neutralize(&entry.reason)));
    }
    out.push_str("sources:\n");
    for source in &entry.sources {
        out.push_str(&format!("  {}\n", neutralize(&source_text(source))));
    }
    out.push('\n');
    out.push_str(&neutralize(entry.text.trim_end()));
    out.push('\n');
    if !entry.versions.is_empty() {
        out.push_str(&format!(
            "\nother versions (keep one with `git agent memory edit {}`):\n",
            Untrusted::name(&entry.id)
        ));
        for (i, version) in entry.versions.iter().enumerate() {
            out.push_str(&format!(
                "  [{}] {}\n",
                i + 1,
                neutralize(version.text.trim())
            ));
        }
    }
    out.trim_end().to_owned()
}

fn source_text(source: &Source) -> String {
    let commit = source
        .commit
        .as_deref()
        .map(|c| format!(" at {}", c.get(..7).unwrap_or(c)))
        .unwrap_or_default();
    let who = match (&source.session, source.step) {
        (Some(session), Some(step)) => format!("session {session}, step {step}{commit}"),
        (Some(session), None) => format!("session {session}{commit}"),
        _ => format!("added by hand{commit}"),
    };
    if source.why.is_empty() {
        who
    } else {
        format!("{who}: {}", source.why)
    }
}

fn add(
    store: &Store,
    text: &str,
    tags: &[String],
    kind: &str,
    why: Option<&str>,
) -> Result<(), CommandError> {
    let kind = Kind::parse(kind).unwrap_or_default();
    let proposal =
        Proposal::new(text, tags, kind, why.unwrap_or_default()).map_err(CommandError::user)?;
    let source = Source {
        commit: store.head_commit_if_any()?.map(|c| c.to_string()),
        why: proposal.why.clone(),
        at: now(),
        ..Source::default()
    };
    match policy::remember(store, &proposal, source, policy::ADDED_CONFIDENCE)? {
        Written::Added(entry) => {
            println!("{}", entry.id);
            eprintln!("remembered {}", entry.id);
        }
        Written::Updated(entry) => {
            println!("{}", entry.id);
            eprintln!(
                "{} says nearly the same: added this as its source (it has {} now)",
                entry.id,
                entry.sources.len()
            );
        }
        Written::Skipped { entry, reason } => {
            return Err(CommandError::user(format!(
                "not added: {reason} ({}: {})",
                entry.id,
                neutralize(&crate::tools::short(&entry.text, 60))
            ))
            .hint(format!(
                "bring it back with `git agent memory restore {}`",
                entry.id
            )));
        }
    }
    Ok(())
}

fn edit(
    ctx: &Context,
    store: &Store,
    prefix: &str,
    text: Option<String>,
    tags: Vec<String>,
    kind: Option<String>,
) -> Result<(), CommandError> {
    let entry = find(store, prefix)?;
    let flags = text.is_some() || !tags.is_empty() || kind.is_some();
    let (text, tags, kind) = if flags {
        (
            text.unwrap_or_else(|| entry.text.clone()),
            if tags.is_empty() {
                entry.tags.clone()
            } else {
                tags
            },
            kind.as_deref().and_then(Kind::parse).unwrap_or(entry.kind),
        )
    } else {
        edit_in_editor(ctx, store, &entry)?
    };
    let proposal = Proposal::new(&text, &tags, kind, "").map_err(CommandError::user)?;
    let id = entry.id.clone();
    let mut changed = false;
    store.update_memory(|view| {
        let Some(mut current) = view.entry(&id)? else {
            return Ok(None);
        };
        let resolves = current.status == EntryStatus::NeedsReview;
        let same = current.text == proposal.text
            && current.tags == proposal.tags
            && current.kind == proposal.kind;
        if same && !resolves {
            changed = false;
            return Ok(None);
        }
        current.text = proposal.text.clone();
        current.tags = proposal.tags.clone();
        current.kind = proposal.kind;
        current.updated = now();
        let mut message = format!("edit {id}: {}\n", crate::tools::short(&proposal.text, 60));
        if resolves {
            current.status = EntryStatus::Active;
            current.reason.clear();
            current.versions.clear();
            message.push_str(
                "\nreviewed: one version kept, the others dropped (they stay in the history)\n",
            );
        }
        changed = true;
        Ok(Some(MemoryEdit {
            message,
            put: vec![current],
            remove: vec![],
        }))
    })?;
    if changed {
        eprintln!("edited {id}");
    } else {
        eprintln!("{id} unchanged");
    }
    Ok(())
}

/// The entry in `$EDITOR`: `kind:` and `tags:` lines, a blank line, the text; `#` lines are comments (the
/// other versions of an entry that needs review are listed there to copy from).
fn edit_in_editor(
    ctx: &Context,
    store: &Store,
    entry: &Entry,
) -> Result<(String, Vec<String>, Kind), CommandError> {
    let dir = store.common_dir().join("agent");
    std::fs::create_dir_all(&dir)
        .map_err(|e| CommandError::internal(format!("cannot create {}: {e}", dir.display())))?;
    let path = dir.join(format!("MEMORY_EDIT_{}.txt", entry.id));
    let mut file = format!(
        "kind: {}\ntags: {}\n\n{}\n\n# Editing memory entry {}. First the kind (fact, convention, pitfall, command) and\n\
         # the tags (comma-separated), then a blank line and the text. Lines starting with '#' are ignored;\n\
         # an empty text leaves the entry as it was.\n",
        entry.kind.as_str(),
        entry.tags.join(", "),
        entry.text.trim_end(),
        entry.id
    );
    for (i, version) in entry.versions.iter().enumerate() {
        file.push_str(&format!("#\n# Other version [{}] (from a pull):\n", i + 1));
        for line in version.text.lines() {
            file.push_str(&format!("#   {line}\n"));
        }
    }
    std::fs::write(&path, file)
        .map_err(|e| CommandError::internal(format!("cannot write {}: {e}", path.display())))?;
    let edited = super::config::open_in_editor(ctx, &path).and_then(|()| {
        std::fs::read_to_string(&path)
            .map_err(|e| CommandError::internal(format!("cannot read {}: {e}", path.display())))
    });
    let _ = std::fs::remove_file(&path);
    let parsed = parse_edited(&edited?)?;
    match parsed {
        Some(parsed) => Ok(parsed),
        None => Err(CommandError::user(format!(
            "the text is empty: {} was left as it was",
            entry.id
        ))),
    }
}

/// The edited file: `(text, tags, kind)`, or `None` for an empty text.
fn parse_edited(file: &str) -> Result<Option<(String, Vec<String>, Kind)>, CommandError> {
    let lines: Vec<&str> = file.lines().filter(|l| !l.starts_with('#')).collect();
    let (mut kind, mut tags) = (Kind::Fact, Vec::new());
    let mut body = 0;
    for (i, line) in lines.iter().enumerate() {
        if let Some(value) = line.strip_prefix("kind:") {
            kind = Kind::parse(value).ok_or_else(|| {
                CommandError::user(format!(
                    "unknown kind {:?}: use fact, convention, pitfall or command",
                    value.trim()
                ))
            })?;
        } else if let Some(value) = line.strip_prefix("tags:") {
            tags = value
                .split(',')
                .map(|t| t.trim().to_owned())
                .filter(|t| !t.is_empty())
                .collect();
        } else {
            body = i;
            break;
        }
        body = i + 1;
    }
    let text = lines[body.min(lines.len())..].join("\n").trim().to_owned();
    Ok((!text.is_empty()).then_some((text, tags, kind)))
}

fn forget(
    store: &Store,
    prefix: &str,
    reason: Option<String>,
    purge: bool,
) -> Result<(), CommandError> {
    let entry = find(store, prefix)?;
    let id = entry.id.clone();
    let reason = reason
        .filter(|r| !r.trim().is_empty())
        .unwrap_or_else(|| "forgotten by hand".into());
    if !purge && entry.status == EntryStatus::Archived {
        eprintln!("{id} is forgotten already ({})", neutralize(&entry.reason));
        return Ok(());
    }
    store.update_memory(|view| {
        let Some(mut current) = view.entry(&id)? else {
            return Ok(None);
        };
        if purge {
            return Ok(Some(MemoryEdit {
                message: format!("forget {id}: {reason} (purged)\n"),
                put: vec![],
                remove: vec![id.clone()],
            }));
        }
        current.status = EntryStatus::Archived;
        current.reason = reason.clone();
        current.updated = now();
        Ok(Some(MemoryEdit {
            message: format!("forget {id}: {reason}\n"),
            put: vec![current],
            remove: vec![],
        }))
    })?;
    if purge {
        eprintln!("purged {id} (`git log -p {MEMORY_REF}` still has it; `git agent memory restore {id}` brings it back)");
    } else {
        eprintln!("forgot {id} (`git agent memory restore {id}` brings it back)");
    }
    Ok(())
}

fn restore(store: &Store, prefix: &str) -> Result<(), CommandError> {
    let entry = match resolve(store, prefix)? {
        Some(id) => store
            .memory_entry(&id)?
            .ok_or_else(|| CommandError::user(format!("no memory entry {id}")))?,
        None => store
            .memory_entry_in_history(prefix)?
            .ok_or_else(|| not_found(prefix))?,
    };
    let id = entry.id.clone();
    match entry.status {
        EntryStatus::Active if store.memory_entry(&id)?.is_some() => {
            eprintln!("{id} is not forgotten");
            return Ok(());
        }
        EntryStatus::NeedsReview => {
            return Err(
                CommandError::user(format!("{id} is not forgotten: it needs review")).hint(
                    format!("keep one of its versions with `git agent memory edit {id}`"),
                ),
            );
        }
        _ => {}
    }
    store.update_memory(|_| {
        let mut back = entry.clone();
        back.status = EntryStatus::Active;
        back.reason.clear();
        // Archived for low confidence, it would be archived again at its next failure: it starts over.
        back.confidence = round_confidence(back.confidence.max(policy::PROPOSED_CONFIDENCE));
        back.updated = now();
        Ok(Some(MemoryEdit {
            message: format!("restore {id}: {}\n", crate::tools::short(&back.text, 60)),
            put: vec![back],
            remove: vec![],
        }))
    })?;
    eprintln!("restored {id}");
    Ok(())
}

fn log(store: &Store, prefix: Option<&str>, max_count: Option<usize>) -> Result<(), CommandError> {
    if store.memory_tip()?.is_none() {
        eprintln!("no memory yet: nothing to show");
        return Ok(());
    }
    let mut cmd = super::context::git_inherit(store.workdir());
    cmd.args(["log", "--date=short", "--format=%h %ad %s"]);
    if let Some(n) = max_count {
        cmd.arg(format!("--max-count={n}"));
    }
    cmd.arg(MEMORY_REF);
    if let Some(prefix) = prefix {
        let id = match resolve(store, prefix)? {
            Some(id) => id,
            None => store
                .memory_entry_in_history(prefix)?
                .map(|e| e.id)
                .ok_or_else(|| not_found(prefix))?,
        };
        cmd.args(["--", &crate::store::memory::entry_path(&id)]);
    }
    let status = cmd.status().map_err(|e| {
        CommandError::internal(format!(
            "could not run git ({e}): make sure git is installed"
        ))
    })?;
    if status.success() {
        Ok(())
    } else {
        Err(CommandError::internal("git log failed (see above)"))
    }
}

fn accept(store: &Store, prefix: &str) -> Result<(), CommandError> {
    let session = store.resolve_session(Some(prefix))?;
    let written = policy::accept(store, &session)?;
    if written.is_empty() {
        eprintln!("session {session} made no proposals");
    }
    for w in &written {
        let entry = w.entry();
        let text = neutralize(&crate::tools::short(&entry.text, 70)).into_owned();
        match w {
            Written::Skipped { reason, .. } => println!(
                "skipped {}: {text} ({})",
                Untrusted::name(&entry.id),
                Untrusted::name(reason)
            ),
            other => println!("{} {}: {text}", other.action(), Untrusted::name(&entry.id)),
        }
    }
    Ok(())
}

/// The entry `prefix` names, or an error that says what to do.
fn find(store: &Store, prefix: &str) -> Result<Entry, CommandError> {
    let id = resolve(store, prefix)?.ok_or_else(|| not_found(prefix))?;
    store.memory_entry(&id)?.ok_or_else(|| not_found(prefix))
}

/// The one id `prefix` names; `None` when it names none; an error when it names several.
fn resolve(store: &Store, prefix: &str) -> Result<Option<String>, CommandError> {
    match store.resolve_memory(prefix)? {
        Resolved::One(id) => Ok(Some(id)),
        Resolved::None => Ok(None),
        Resolved::Many(ids) => Err(CommandError::user(format!(
            "memory id prefix {prefix:?} is ambiguous: it matches {}",
            ids.join(", ")
        ))
        .hint("give more of the id")),
    }
}

fn not_found(prefix: &str) -> CommandError {
    CommandError::user(format!("no memory entry {prefix:?}"))
        .hint("`git agent memory list --all` lists the entries")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_edited_file_is_kind_tags_and_text() {
        let file = "kind: pitfall\ntags: build, ci\n\nThe CI cache\nneeds a key.\n\n# a comment\n";
        let (text, tags, kind) = parse_edited(file).unwrap().unwrap();
        assert_eq!(text, "The CI cache\nneeds a key.");
        assert_eq!(tags, ["build", "ci"]);
        assert_eq!(kind, Kind::Pitfall);
        let (text, tags, kind) = parse_edited("just text\n").unwrap().unwrap();
        assert_eq!(
            (text.as_str(), tags.len(), kind),
            ("just text", 0, Kind::Fact)
        );
        assert!(parse_edited("kind: fact\ntags:\n\n# nothing\n")
            .unwrap()
            .is_none());
        assert!(parse_edited("kind: rumour\n\ntext\n").is_err());
    }
}
