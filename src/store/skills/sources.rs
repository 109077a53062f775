//! The skills an agent sees: those stored in `refs/agent/skills` and the folders other agents keep on disk,
//! read where they are (never copied unless the user imports them): `.agents/skills/`, `.claude/skills/` and
//! `.codex/skills/` at the top of the repository, and `~/.agents/skills/`.
//!
//! When two sources have a skill of the same name, the first in this order wins and the others are listed as
//! shadowed: the repository's folders (what the project ships, as the user edits it), then the user's home,
//! then the ref (what was added or pulled: a pulled skill must not silently replace the user's own). To
//! prefer a stored skill, remove or rename the folder that shadows it.
//!
//! An invalid skill is left out with a [`Problem`] that names the
//! file and the rule broken, so a skill that "is not found" always says why. Fields beyond the format's six
//! are tolerated in place (other agents write them); `add`, `import` and `export` refuse them.

use std::collections::BTreeMap;
use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};

use super::format::{self, SkillDoc, SKILL_FILE};
use super::shared::{Stats, MAX_BYTES, MAX_FILES, SKILLS_REF};
use crate::protocol::Untrusted;
use crate::store::{Store, StoreError};

/// The skill folders of a repository, relative to its top, in the order they are searched.
pub const REPO_DIRS: [&str; 3] = [".agents/skills", ".claude/skills", ".codex/skills"];
/// The user's skill folder, relative to their home.
pub const HOME_DIR: &str = ".agents/skills";
/// The largest `SKILL.md` read (the format suggests a few hundred lines).
pub const MAX_SKILL_MD: u64 = 1 << 20;

/// Where a skill comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// `refs/agent/skills`.
    Ref,
    /// A folder on disk: the skill's folder (canonical), and how to show it (`.claude/skills/pdf`,
    /// `~/.agents/skills/pdf`).
    Disk { folder: PathBuf, shown: String },
}

impl Source {
    /// Where the skill is, for a person: `refs/agent/skills:pdf`, `.claude/skills/pdf`.
    pub fn shown(&self, name: &str) -> String {
        match self {
            Source::Ref => format!("{}:{name}", SKILLS_REF),
            Source::Disk { shown, .. } => shown.clone(),
        }
    }

    /// `ref`, `repo` or `home`, for `skill list --json`.
    pub fn kind(&self) -> &'static str {
        match self {
            Source::Ref => "ref",
            Source::Disk { shown, .. } if shown.starts_with('~') => "home",
            Source::Disk { .. } => "repo",
        }
    }
}

/// One usable skill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    pub doc: SkillDoc,
    /// The `SKILL.md` as written.
    pub text: String,
    pub source: Source,
    /// The folder's other files, relative to it, sorted.
    pub files: Vec<String>,
    /// Counts from `refs/agent/skills` (kept for every source).
    pub stats: Stats,
}

impl Skill {
    pub fn name(&self) -> &str {
        &self.doc.name
    }
}

/// A skill left out, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The file or folder at fault (`.claude/skills/Bad/SKILL.md`, `refs/agent/skills:x/SKILL.md`).
    pub file: String,
    pub rule: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Both can hold a pulled tree's names: shown through the neutraliser (issue 22, finding 8).
        write!(
            f,
            "skill {} skipped: {}",
            Untrusted::name(&self.file),
            Untrusted::name(&self.rule)
        )
    }
}

/// Where a source stands when two have a skill of the same name: lower wins.
fn precedence(source: &Source) -> u8 {
    match source.kind() {
        "repo" => 0,
        "home" => 1,
        _ => 2,
    }
}

/// Every skill an agent in this repository sees.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    /// The usable skills, one per name, in source order.
    pub skills: Vec<Skill>,
    /// Skills hidden by one of the same name from an earlier source.
    pub shadowed: Vec<Skill>,
    pub problems: Vec<Problem>,
    /// The repository's top, for reading the files of stored skills later.
    workdir: PathBuf,
}

impl Catalog {
    /// Reads every source; never fails (a source that cannot be read is a [`Problem`]). `home` is the user's
    /// home directory, if there is one.
    pub fn load(store: &Store, home: Option<&Path>) -> Catalog {
        let mut found = Vec::new();
        let mut problems = Vec::new();
        for dir in REPO_DIRS {
            scan(&store.workdir().join(dir), dir, &mut found, &mut problems);
        }
        let stats = match store.read_skills() {
            Ok(tree) => {
                for (name, rule) in tree.skipped {
                    problems.push(Problem {
                        file: format!("{}:{}", SKILLS_REF, crate::safety::tree_path::shown(&name)),
                        rule,
                    });
                }
                for stored in tree.skills {
                    let file = format!("{}:{}/{SKILL_FILE}", SKILLS_REF, stored.name);
                    let Some(text) = stored.text else {
                        problems.push(Problem {
                            file,
                            rule: format!("the folder has no {SKILL_FILE}"),
                        });
                        continue;
                    };
                    match checked(&text, &stored.name) {
                        Ok(doc) => found.push(Skill {
                            doc,
                            text,
                            source: Source::Ref,
                            files: stored.files,
                            stats: Stats::default(),
                        }),
                        Err(rule) => problems.push(Problem { file, rule }),
                    }
                }
                tree.stats
            }
            Err(err) => {
                problems.push(Problem {
                    file: SKILLS_REF.to_owned(),
                    rule: format!("cannot be read: {err}"),
                });
                BTreeMap::new()
            }
        };
        if let Some(home) = home {
            scan(
                &home.join(HOME_DIR),
                &format!("~/{HOME_DIR}"),
                &mut found,
                &mut problems,
            );
        }
        let mut catalog = Catalog {
            workdir: store.workdir().to_path_buf(),
            problems,
            ..Catalog::default()
        };
        // The user's own skills (the repository's folders, then their home) win over stored ones, which may
        // have been pulled from someone else (issue 22, finding 11); the sort is stable, so each source keeps
        // its order.
        found.sort_by_key(|skill| precedence(&skill.source));
        for mut skill in found {
            skill.stats = stats.get(skill.name()).cloned().unwrap_or_default();
            if catalog.find(skill.name()).is_some() {
                catalog.shadowed.push(skill);
            } else {
                catalog.skills.push(skill);
            }
        }
        catalog
    }

    pub fn is_empty(&self) -> bool {
        self.skills.is_empty()
    }

    /// The usable skill called `name`.
    pub fn find(&self, name: &str) -> Option<&Skill> {
        self.skills.iter().find(|s| s.name() == name)
    }

    /// The bytes of `path` in `skill`'s folder, or why not (for the model). Paths are relative to the folder;
    /// nothing outside it is read, and symbolic links are not followed.
    pub fn read_file(&self, skill: &Skill, path: &str) -> Result<Vec<u8>, String> {
        let clean = !path.is_empty()
            && !path.starts_with('/')
            && path
                .split('/')
                .all(|c| !c.is_empty() && c != "." && c != "..");
        if !clean {
            return Err(format!(
                "invalid path {path:?}: give a path relative to the skill's folder, as listed by load_skill"
            ));
        }
        let missing = || {
            format!(
                "skill '{}' has no file {path:?}; its files are: {}",
                skill.name(),
                if skill.files.is_empty() {
                    "none besides SKILL.md".to_owned()
                } else {
                    skill.files.join(", ")
                }
            )
        };
        match &skill.source {
            Source::Ref => {
                let store = Store::open(&self.workdir).map_err(|e| e.to_string())?;
                store
                    .stored_skill_file(skill.name(), path)
                    .map_err(|e: StoreError| e.to_string())?
                    .ok_or_else(missing)
            }
            Source::Disk { folder, .. } => {
                let mut at = folder.clone();
                let mut size = 0;
                for part in path.split('/') {
                    at.push(part);
                    let meta = std::fs::symlink_metadata(&at).map_err(|_| missing())?;
                    if meta.file_type().is_symlink() {
                        return Err(format!(
                            "{path} is a symbolic link; skill files are read only as regular files"
                        ));
                    }
                    size = meta.len();
                }
                // A cloned repository's folder may hold a file of any size: judged before it is read, with
                // the limit of a stored skill (issue 22, finding 4).
                if size > MAX_BYTES {
                    return Err(format!(
                        "{path} has {size} bytes; a skill file is read up to {MAX_BYTES}"
                    ));
                }
                // And read no further than the limit, should it have grown since.
                let mut bytes = Vec::new();
                std::fs::File::open(&at)
                    .and_then(|file| file.take(MAX_BYTES).read_to_end(&mut bytes))
                    .map_err(|e| format!("cannot read {path}: {e}"))?;
                Ok(bytes)
            }
        }
    }
}

/// Parses a `SKILL.md` and checks its name against its folder; the error is the rule broken.
pub fn checked(text: &str, folder: &str) -> Result<SkillDoc, String> {
    let doc = format::parse(text).map_err(|e| e.to_string())?;
    doc.check_folder(folder).map_err(|e| e.to_string())?;
    Ok(doc)
}

/// The skills in the folders of `dir` (shown as `shown`), in name order.
fn scan(dir: &Path, shown: &str, found: &mut Vec<Skill>, problems: &mut Vec<Problem>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut folders: Vec<(String, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter(|e| std::fs::metadata(e.path()).is_ok_and(|m| m.is_dir()))
        .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
        .filter(|(name, _)| !name.starts_with('.'))
        .collect();
    folders.sort();
    for (name, path) in folders {
        let shown = format!("{shown}/{name}");
        match read_folder(&path, &name) {
            Ok((doc, text, files)) => {
                let folder = std::fs::canonicalize(&path).unwrap_or(path);
                found.push(Skill {
                    doc,
                    text,
                    source: Source::Disk { folder, shown },
                    files,
                    stats: Stats::default(),
                });
            }
            Err((file, rule)) => problems.push(Problem {
                file: format!("{shown}{file}"),
                rule,
            }),
        }
    }
}

/// A skill folder on disk: its parsed `SKILL.md`, the text, and its other files. The error names the file
/// (relative to the folder, with a leading `/`) and the rule.
fn read_folder(
    path: &Path,
    name: &str,
) -> Result<(SkillDoc, String, Vec<String>), (String, String)> {
    let file = format!("/{SKILL_FILE}");
    let skill_md = path.join(SKILL_FILE);
    let meta = match std::fs::metadata(&skill_md) {
        Ok(meta) => meta,
        Err(_) if path.join("skill.md").exists() => {
            return Err((
                "/skill.md".into(),
                format!("the file must be called {SKILL_FILE}"),
            ))
        }
        Err(_) => return Err((String::new(), format!("the folder has no {SKILL_FILE}"))),
    };
    if meta.len() > MAX_SKILL_MD {
        return Err((
            file,
            format!(
                "{} bytes; the largest SKILL.md read is {MAX_SKILL_MD}",
                meta.len()
            ),
        ));
    }
    let bytes =
        std::fs::read(&skill_md).map_err(|e| (file.clone(), format!("cannot be read: {e}")))?;
    let text =
        String::from_utf8(bytes).map_err(|_| (file.clone(), "is not UTF-8 text".to_owned()))?;
    let doc = checked(&text, name).map_err(|rule| (file, rule))?;
    Ok((doc, text, list_files(path)))
}

/// The regular files under a skill folder besides `SKILL.md`, relative and sorted; `.git` and symbolic links
/// are left out, and the list stops at [`MAX_FILES`].
pub fn list_files(folder: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![(folder.to_path_buf(), String::new())];
    while let Some((dir, prefix)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.filter_map(Result::ok) {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let rel = format!("{prefix}{name}");
            if kind.is_dir() && name != ".git" && prefix.matches('/').count() < 8 {
                stack.push((entry.path(), format!("{rel}/")));
            } else if kind.is_file() && rel != SKILL_FILE && out.len() < MAX_FILES {
                out.push(rel);
            }
        }
    }
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(dir: &Path, rel: &str, text: &str) {
        let path = dir.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn folders_on_disk_are_read_checked_and_listed() {
        let dir = std::env::temp_dir().join(format!("git-agent-skill-scan-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        put(
            &dir,
            "good/SKILL.md",
            "---\nname: good\ndescription: does it\n---\nSteps.\n",
        );
        put(&dir, "good/scripts/run.sh", "echo\n");
        put(&dir, "good/ref.md", "more\n");
        put(
            &dir,
            "other/SKILL.md",
            "---\nname: wrong\ndescription: x\n---\n",
        );
        put(
            &dir,
            "lower/skill.md",
            "---\nname: lower\ndescription: x\n---\n",
        );
        put(&dir, "empty/notes.txt", "");
        put(&dir, "README.md", "not a skill folder");
        let (mut found, mut problems) = (Vec::new(), Vec::new());
        scan(&dir, ".claude/skills", &mut found, &mut problems);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].name(), "good");
        assert_eq!(found[0].files, ["ref.md", "scripts/run.sh"]);
        assert_eq!(found[0].doc.body, "Steps.");
        let problems: Vec<String> = problems.iter().map(Problem::to_string).collect();
        assert_eq!(
            problems,
            [
                "skill .claude/skills/empty skipped: the folder has no SKILL.md",
                "skill .claude/skills/lower/skill.md skipped: the file must be called SKILL.md",
                "skill .claude/skills/other/SKILL.md skipped: name 'wrong' must equal the folder name 'other'",
            ]
        );
        let catalog = Catalog {
            skills: found,
            ..Catalog::default()
        };
        let skill = &catalog.skills[0];
        assert_eq!(
            catalog.read_file(skill, "scripts/run.sh").unwrap(),
            b"echo\n"
        );
        assert!(catalog
            .read_file(skill, "../other/SKILL.md")
            .unwrap_err()
            .contains("invalid path"));
        assert!(catalog
            .read_file(skill, "nope")
            .unwrap_err()
            .contains("ref.md, scripts/run.sh"));
        std::os::unix::fs::symlink("/etc/passwd", dir.join("good/link")).unwrap();
        assert!(catalog
            .read_file(skill, "link")
            .unwrap_err()
            .contains("symbolic link"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
