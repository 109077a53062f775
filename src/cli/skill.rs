//! `git agent skill`: the skills the agent sees (stored in `refs/agent/skills`, or read in place from
//! `.agents/skills/`, `.claude/skills/`, `.codex/skills/` and `~/.agents/skills/`), and the changes to the
//! stored ones, each one commit on the ref.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use serde_json::json;

use super::context::Context;
use super::error::CommandError;
use crate::agent::distill;
use crate::config;
use crate::model::Client;
use crate::protocol::{self, Status, Untrusted};
use crate::store::skills::format::SKILL_FILE;
use crate::store::skills::sources::{self, Catalog, Skill, Source};
use crate::store::skills::{SkillFile, MAX_BYTES, MAX_FILES, SKILLS_REF};
use crate::store::Store;

/// List, show, add, import, export, forget and distill skills (Agent Skills format, SKILL.md)
#[derive(Debug, Args)]
pub struct SkillArgs {
    #[command(subcommand)]
    command: SkillCommand,
}

#[derive(Debug, Subcommand)]
enum SkillCommand {
    /// List the skills the agent sees, with their source and use counts
    List {
        /// Also list skills hidden by one of the same name from an earlier source
        #[arg(long)]
        all: bool,
        /// One JSON object per skill (and per skipped skill) on stdout
        #[arg(long)]
        json: bool,
    },
    /// Show a skill: where it is, its counts, its files and its SKILL.md
    Show {
        /// The skill's name
        name: String,
    },
    /// Store the skill folder DIR (its SKILL.md and other files) in refs/agent/skills
    Add {
        /// A folder holding SKILL.md, named like the skill
        dir: PathBuf,
    },
    /// Store every valid skill found in DIR, or in the folders other agents use
    ///
    /// Without DIR: .agents/skills, .claude/skills and .codex/skills of the repository, and ~/.agents/skills.
    /// DIR may be one skill's folder or a folder of skill folders. Invalid skills are skipped with a warning.
    Import {
        /// A skill folder, or a folder of skill folders
        dir: Option<PathBuf>,
    },
    /// Write skill NAME into DIR/NAME, as a folder that passes `agentskills validate`
    Export {
        /// The skill's name
        name: String,
        /// Where to put the skill's folder
        dir: PathBuf,
        /// Write into DIR/NAME even if it exists (its files are replaced, others kept)
        #[arg(long)]
        force: bool,
    },
    /// Remove skill NAME (and its counts) from refs/agent/skills, as a commit
    Forget {
        /// The skill's name
        name: String,
        /// Why, for the commit message
        #[arg(long, value_name = "TEXT")]
        reason: Option<String>,
    },
    /// Ask the model to write a skill from a completed session; the result is a proposal for `skill add`
    Distill {
        /// The session (any unique prefix of its id)
        session: String,
        /// Model as <provider>/<model> [env: GIT_AGENT_MODEL]
        #[arg(long, short = 'm', value_name = "PROVIDER/MODEL")]
        model: Option<String>,
    },
}

pub fn run(ctx: &Context, args: SkillArgs) -> Result<(), CommandError> {
    let store = ctx.store()?;
    match args.command {
        SkillCommand::List { all, json } => list(store, all, json),
        SkillCommand::Show { name } => show(store, &name),
        SkillCommand::Add { dir } => add(store, &ctx.cwd().join(dir)),
        SkillCommand::Import { dir } => import(store, dir.map(|d| ctx.cwd().join(d))),
        SkillCommand::Export { name, dir, force } => {
            export(store, &name, &ctx.cwd().join(dir), force)
        }
        SkillCommand::Forget { name, reason } => forget(store, &name, reason.as_deref()),
        SkillCommand::Distill { session, model } => {
            distill_session(ctx, store, &session, model.as_deref())
        }
    }
}

/// The catalog as the agent would see it, with each skipped skill warned about on stderr.
fn catalog(store: &Store, warn: bool) -> Catalog {
    let catalog = Catalog::load(store, dirs::home_dir().as_deref());
    if warn {
        for problem in &catalog.problems {
            eprintln!("warning: {problem}");
        }
    }
    catalog
}

fn list(store: &Store, all: bool, json: bool) -> Result<(), CommandError> {
    let catalog = catalog(store, !json);
    let mut out = std::io::stdout().lock();
    if json {
        let shadowed = catalog.shadowed.iter().map(|s| (s, true));
        for (skill, hidden) in catalog.skills.iter().map(|s| (s, false)).chain(shadowed) {
            let value = json!({
                "type": "skill",
                "name": skill.name(),
                "description": skill.doc.description,
                "source": skill.source.kind(),
                "location": skill.source.shown(skill.name()),
                "files": skill.files,
                "uses": skill.stats.uses,
                "successes": skill.stats.successes,
                "failures": skill.stats.failures,
                "shadowed": hidden,
            });
            let _ = writeln!(out, "{}", protocol::json_for_terminal(value.to_string()));
        }
        for problem in &catalog.problems {
            let _ = writeln!(
                out,
                "{}",
                protocol::json_for_terminal(
                    json!({"type": "problem", "file": problem.file, "rule": problem.rule})
                        .to_string()
                )
            );
        }
        return Ok(());
    }
    if catalog.skills.is_empty() {
        eprintln!(
            "no skills: put skill folders in .agents/skills/ (or .claude/skills/, ~/.agents/skills/), or store \
             one with `git agent skill add <dir>`"
        );
        return Ok(());
    }
    let rows: Vec<&Skill> = if all {
        catalog
            .skills
            .iter()
            .chain(catalog.shadowed.iter())
            .collect()
    } else {
        catalog.skills.iter().collect()
    };
    let width = rows.iter().map(|s| s.name().len()).max().unwrap_or(0);
    let place = rows
        .iter()
        .map(|s| s.source.shown(s.name()).len())
        .max()
        .unwrap_or(0);
    for skill in rows {
        let hidden = catalog.shadowed.iter().any(|s| std::ptr::eq(s, skill));
        let description = first_line(&skill.doc.description, 70);
        let line = format!(
            "{:<width$}  {:<place$}  {:<22}  {}{description}",
            skill.name(),
            skill.source.shown(skill.name()),
            counts(skill),
            if hidden { "(shadowed) " } else { "" },
        );
        if writeln!(out, "{}", crate::ui::neutralize(line.trim_end())).is_err() {
            break; // a closed pipe (`| head`) is not an error
        }
    }
    Ok(())
}

/// `3 uses, 2 done, 1 failed`.
fn counts(skill: &Skill) -> String {
    let s = &skill.stats;
    let mut text = format!("{} use{}", s.uses, if s.uses == 1 { "" } else { "s" });
    if s.uses > 0 {
        text.push_str(&format!(", {} done", s.successes));
        if s.failures > 0 {
            text.push_str(&format!(", {} failed", s.failures));
        }
    }
    text
}

fn first_line(text: &str, max: usize) -> String {
    crate::tools::short(text.trim(), max)
}

fn show(store: &Store, name: &str) -> Result<(), CommandError> {
    let catalog = catalog(store, false);
    let skill = find(&catalog, name)?;
    let mut text = format!(
        "skill {} · {} · {}\n",
        skill.name(),
        skill.source.shown(skill.name()),
        counts(skill)
    );
    if let Some(other) = catalog.shadowed.iter().find(|s| s.name() == name) {
        text.push_str(&format!("(shadows {})\n", other.source.shown(name)));
    }
    if !skill.files.is_empty() {
        text.push_str(&format!("files: {}\n", skill.files.join(", ")));
    }
    text.push('\n');
    text.push_str(&skill.text);
    let out = std::io::stdout();
    // A skill may come from someone else's push: its text must not drive the terminal, also when piped to
    // a pager or a log that a terminal shows later (issue 22, finding 8). The exact bytes are one
    // `git agent skill export` away.
    let shown = crate::ui::neutralize(&text);
    let _ = out.lock().write_all(shown.as_bytes());
    Ok(())
}

/// The usable skill `name`, or why there is none (a skipped one says its rule).
fn find<'c>(catalog: &'c Catalog, name: &str) -> Result<&'c Skill, CommandError> {
    if let Some(skill) = catalog.find(name) {
        return Ok(skill);
    }
    if let Some(problem) = catalog
        .problems
        .iter()
        .find(|p| p.file.contains(&format!("/{name}")))
    {
        return Err(CommandError::user(problem.to_string()));
    }
    Err(CommandError::user(format!(
        "no skill '{name}': `git agent skill list` lists the skills"
    )))
}

/// A skill folder read for storing: its name (the folder's), its files, and what was left out. Strict:
/// the stored skill must pass the reference validator.
fn read_dir_skill(dir: &Path) -> Result<(String, Vec<SkillFile>, Vec<String>), String> {
    let dir = std::fs::canonicalize(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let text = match read_nofollow(&dir.join(SKILL_FILE)) {
        Ok(text) => text,
        Err(e) if e.raw_os_error() == Some(crate::sys::errno::ELOOP) => {
            return Err(format!(
                "its {SKILL_FILE} is a symbolic link; a stored skill holds regular files only (copy the \
                 file in its place to store it)"
            ))
        }
        Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
            return Err(format!("{SKILL_FILE}: {e}"))
        }
        Err(_) => return Err(format!("{} has no {SKILL_FILE}", dir.display())),
    };
    let text = String::from_utf8(text).map_err(|_| format!("{SKILL_FILE} is not UTF-8 text"))?;
    let doc = sources::checked(&text, &name).map_err(|rule| format!("{SKILL_FILE}: {rule}"))?;
    doc.check_strict()
        .map_err(|e| format!("{SKILL_FILE}: {e}"))?;
    let mut files = vec![SkillFile {
        path: SKILL_FILE.into(),
        bytes: text.into_bytes(),
        executable: false,
    }];
    let mut skipped = Vec::new();
    let mut stack = vec![(dir.clone(), String::new())];
    while let Some((at, prefix)) = stack.pop() {
        let entries = std::fs::read_dir(&at).map_err(|e| format!("{}: {e}", at.display()))?;
        for entry in entries.filter_map(Result::ok) {
            let file = entry.file_name().to_string_lossy().into_owned();
            let rel = format!("{prefix}{file}");
            let Ok(meta) = std::fs::symlink_metadata(entry.path()) else {
                continue;
            };
            if meta.file_type().is_symlink() {
                skipped.push(format!("{rel} (a symbolic link)"));
            } else if meta.is_dir() {
                if file == ".git" {
                    continue;
                }
                stack.push((entry.path(), format!("{rel}/")));
            } else if rel == SKILL_FILE {
                continue;
            } else if let Some(why) = crate::safety::withhold::sensitive_path(Path::new(&rel)) {
                skipped.push(format!("{rel} ({why})"));
            } else {
                use std::os::unix::fs::PermissionsExt;
                let bytes = match read_nofollow(&entry.path()) {
                    Ok(bytes) => bytes,
                    // Swapped for a link since it was listed: left out, and said so.
                    Err(e) if e.raw_os_error() == Some(crate::sys::errno::ELOOP) => {
                        skipped.push(format!("{rel} (a symbolic link)"));
                        continue;
                    }
                    Err(e) => return Err(format!("{rel}: {e}")),
                };
                files.push(SkillFile {
                    path: rel,
                    bytes,
                    executable: meta.permissions().mode() & 0o111 != 0,
                });
            }
        }
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    let bytes: u64 = files.iter().map(|f| f.bytes.len() as u64).sum();
    if files.len() > MAX_FILES || bytes > MAX_BYTES {
        return Err(format!(
            "{} files, {bytes} bytes: a stored skill may have at most {MAX_FILES} files and {MAX_BYTES} bytes",
            files.len()
        ));
    }
    Ok((name, files, skipped))
}

/// The bytes of a regular file, never through a symbolic link (`O_NOFOLLOW`: a link fails with `ELOOP`,
/// even one swapped in after the folder was listed), at most [`MAX_BYTES`] (checked before reading).
/// Content read here is stored and then published by `push` (issue 22, finding 5).
fn read_nofollow(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(crate::sys::fs::STD_O_NOFOLLOW | crate::sys::fs::STD_O_NONBLOCK)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "not a regular file",
        ));
    }
    if meta.len() > MAX_BYTES {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "{} bytes; a stored skill may have at most {MAX_BYTES}",
                meta.len()
            ),
        ));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_BYTES + 1).read_to_end(&mut bytes)?;
    Ok(bytes)
}

fn add(store: &Store, dir: &Path) -> Result<(), CommandError> {
    let (name, files, skipped) = read_dir_skill(dir)
        .map_err(|e| CommandError::user(format!("cannot add {}: {e}", dir.display())))?;
    for file in &skipped {
        eprintln!("warning: left out {}", Untrusted::name(file));
    }
    let existed = store.read_skills()?.skills.iter().any(|s| s.name == name);
    let (verb, done) = if existed {
        ("update", "updated")
    } else {
        ("add", "added")
    };
    let n = files.len();
    let message = format!("skill {verb} {name} ({n} file{})", plural(n));
    match store.put_skills(&[(name.clone(), files)], &message)? {
        Some(_) => eprintln!(
            "{done} skill {name} ({n} file{}) in {SKILLS_REF}",
            plural(n)
        ),
        None => eprintln!("skill {name} is stored already, unchanged"),
    }
    Ok(())
}

fn import(store: &Store, dir: Option<PathBuf>) -> Result<(), CommandError> {
    let roots: Vec<PathBuf> = match &dir {
        Some(dir) if dir.join(SKILL_FILE).exists() => {
            return add(store, dir);
        }
        Some(dir) => vec![dir.clone()],
        None => {
            let mut roots: Vec<PathBuf> = sources::REPO_DIRS
                .iter()
                .map(|d| store.workdir().join(d))
                .collect();
            if let Some(home) = dirs::home_dir() {
                roots.push(home.join(sources::HOME_DIR));
            }
            roots
        }
    };
    let mut found: Vec<(String, Vec<SkillFile>)> = Vec::new();
    let mut skipped = 0;
    for root in &roots {
        let Ok(entries) = std::fs::read_dir(root) else {
            continue;
        };
        let mut folders: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| {
                !p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with('.'))
            })
            .filter(|p| match std::fs::symlink_metadata(p) {
                // A linked folder would store whatever it points at (a cloned repository's link to the
                // user's files): left out, and said so.
                Ok(meta) if meta.file_type().is_symlink() => {
                    eprintln!(
                        "warning: left out {} (a symbolic link)",
                        Untrusted::name(&p.display().to_string())
                    );
                    false
                }
                Ok(meta) => meta.is_dir(),
                Err(_) => false,
            })
            .collect();
        folders.sort();
        for folder in folders {
            match read_dir_skill(&folder) {
                Ok((name, _, _)) if found.iter().any(|(n, _)| *n == name) => {
                    eprintln!(
                        "warning: skipped {}: a skill '{}' was found earlier",
                        Untrusted::name(&folder.display().to_string()),
                        Untrusted::name(&name)
                    );
                }
                Ok((name, files, left_out)) => {
                    for file in left_out {
                        eprintln!(
                            "warning: {}: left out {}",
                            Untrusted::name(&name),
                            Untrusted::name(&file)
                        );
                    }
                    found.push((name, files));
                }
                Err(rule) => {
                    eprintln!(
                        "warning: skill {} skipped: {}",
                        Untrusted::name(&folder.display().to_string()),
                        Untrusted::name(&rule)
                    );
                    skipped += 1;
                }
            }
        }
    }
    if found.is_empty() {
        let place = match &dir {
            Some(dir) => dir.display().to_string(),
            None => "the skill folders (.agents/skills, .claude/skills, .codex/skills, ~/.agents/skills)".into(),
        };
        return Err(CommandError::user(format!(
            "no valid skill found in {place}"
        )));
    }
    let names: Vec<&str> = found.iter().map(|(n, _)| n.as_str()).collect();
    let from = match &dir {
        Some(dir) => dir.display().to_string(),
        None => "the skill folders".to_owned(),
    };
    let message = format!(
        "skill import {} from {from}: {}",
        found.len(),
        names.join(", ")
    );
    let changed = store.put_skills(&found, &message)?;
    let what = if changed.is_some() {
        "imported"
    } else {
        "already stored, unchanged:"
    };
    eprintln!(
        "{what} {} skill{} ({}){}",
        found.len(),
        plural(found.len()),
        names.join(", "),
        if skipped > 0 {
            format!("; {skipped} skipped")
        } else {
            String::new()
        }
    );
    Ok(())
}

fn export(store: &Store, name: &str, dir: &Path, force: bool) -> Result<(), CommandError> {
    let catalog = catalog(store, false);
    let skill = find(&catalog, name)?;
    skill
        .doc
        .check_strict()
        .map_err(|e| CommandError::user(format!("cannot export {name}: {SKILL_FILE}: {e}")))?;
    let files: Vec<SkillFile> = match &skill.source {
        Source::Ref => store.stored_skill_files(name)?,
        Source::Disk { folder, .. } => {
            use std::os::unix::fs::PermissionsExt;
            let mut files = vec![SkillFile {
                path: SKILL_FILE.into(),
                bytes: skill.text.clone().into_bytes(),
                executable: false,
            }];
            for path in &skill.files {
                let bytes = catalog.read_file(skill, path).map_err(CommandError::user)?;
                let executable = std::fs::metadata(folder.join(path))
                    .is_ok_and(|m| m.permissions().mode() & 0o111 != 0);
                files.push(SkillFile {
                    path: path.clone(),
                    bytes,
                    executable,
                });
            }
            files
        }
    };
    let target = dir.join(name);
    let occupied = std::fs::read_dir(&target).is_ok_and(|mut e| e.next().is_some());
    if occupied && !force {
        return Err(CommandError::user(format!(
            "{} exists and is not empty: pick another folder, or pass --force to write over its files",
            target.display()
        )));
    }
    for file in &files {
        let path = target.join(&file.path);
        let write = || -> std::io::Result<()> {
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(&path, &file.bytes)?;
            if file.executable {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
            }
            Ok(())
        };
        write()
            .map_err(|e| CommandError::internal(format!("cannot write {}: {e}", path.display())))?;
    }
    eprintln!(
        "exported skill {name} to {} ({} file{})",
        target.display(),
        files.len(),
        plural(files.len())
    );
    Ok(())
}

fn forget(store: &Store, name: &str, reason: Option<&str>) -> Result<(), CommandError> {
    if store.forget_skill(name, reason)? {
        eprintln!("forgot skill {name}: removed from {SKILLS_REF} (`git log {SKILLS_REF}` keeps its history)");
        return Ok(());
    }
    let catalog = catalog(store, false);
    match catalog.find(name) {
        Some(skill) => Err(CommandError::user(format!(
            "skill '{name}' is not stored in {SKILLS_REF}; it is read from {}: remove that folder to drop it",
            skill.source.shown(name)
        ))),
        None => Err(CommandError::user(format!("no skill '{name}' in {SKILLS_REF}"))),
    }
}

fn distill_session(
    ctx: &Context,
    store: &Store,
    prefix: &str,
    flag: Option<&str>,
) -> Result<(), CommandError> {
    let id = store.resolve_session(Some(prefix))?;
    let log = store.read_log(&id)?;
    if log.meta.status != Status::Done {
        return Err(CommandError::user(format!(
            "session {id} ended {}: only a completed session (done) can be distilled into a skill",
            log.meta.status
        )));
    }
    let env = |name: &str| ctx.env(name);
    let settings = config::Settings::load(ctx.cwd(), &env)?;
    let model = settings.resolve(flag, &env)?;
    if let Some(key) = &model.api_key {
        crate::safety::redact::register(key, &model.api_key_env);
    }
    let (connect, idle) = settings.timeouts(&env)?;
    let client = Client::new_tuned(
        model.wire,
        model.base_url.clone(),
        model.api_key.clone(),
        connect,
        idle,
        model.tuning.clone(),
    )
    .map_err(|e| CommandError::internal(e.to_string()))?;
    eprintln!("distilling session {id} with {} ...", model.display_name());
    let runtime = super::context::runtime()
        .map_err(|e| CommandError::internal(format!("cannot start the async runtime: {e}")))?;
    let retry = settings.retry_policy();
    let distilled = runtime
        .block_on(distill::distill(
            &client,
            &model.model,
            &retry,
            &id,
            &log.events,
        ))
        .map_err(|e| CommandError::from(crate::agent::AgentError::Model(e)))?;
    let proposals = store.common_dir().join("agent").join("skill-proposals");
    let doc = match distilled.doc {
        Ok(doc) => doc,
        Err(rule) => {
            let path = proposals.join(format!("{id}.rejected.md"));
            let _ = std::fs::create_dir_all(&proposals);
            let saved = std::fs::write(&path, crate::store::sanitize(&distilled.text)).is_ok();
            return Err(CommandError::user(format!(
                "the model's SKILL.md is not a valid skill: {rule}"
            ))
            .hint(if saved {
                format!("its text is in {}: fix it into a folder of its name, then `git agent skill add` it", path.display())
            } else {
                "run distill again, perhaps with another --model".to_owned()
            }));
        }
    };
    let folder = proposals.join(&doc.name);
    let path = folder.join(SKILL_FILE);
    let write = || -> std::io::Result<()> {
        std::fs::create_dir_all(&folder)?;
        std::fs::write(&path, crate::store::sanitize(&distilled.text))
    };
    write().map_err(|e| CommandError::internal(format!("cannot write {}: {e}", path.display())))?;
    // Relative to where the user stands, so the hint can be pasted.
    let shown = pathdiff(&folder, ctx.cwd());
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{}", Untrusted::name(&folder.display().to_string()));
    let used = &distilled.usage;
    eprintln!(
        "proposed skill {} ({} tokens in, {} out): {}\nreview {}/{SKILL_FILE}, then accept it:\nhint: git agent skill add {}",
        Untrusted::name(&doc.name),
        used.input_tokens,
        used.output_tokens,
        // The model wrote it (issue 22, finding 8).
        Untrusted::name(&first_line(&doc.description, 100)),
        Untrusted::name(&shown),
        Untrusted::name(&shown)
    );
    Ok(())
}

/// `path` relative to `base` when it is under it, else as it is.
fn pathdiff(path: &Path, base: &Path) -> String {
    let base = std::fs::canonicalize(base).unwrap_or_else(|_| base.to_path_buf());
    match path.strip_prefix(&base) {
        Ok(rel) => rel.display().to_string(),
        Err(_) => path.display().to_string(),
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}
