//! `git agent pull` as a quarantine (issue 22, finding 3): what a remote sends is checked, ref by ref,
//! before any of its objects is kept in the user's repository.
//!
//! A plain fetch into the repository keeps every object the remote sends, and `transfer.fsckObjects` would
//! refuse the whole fetch for one hostile ref. So the remote's refs are first fetched into a scratch bare
//! repository under `.git/agent/tmp` (borrowing the user's objects as alternates, so only new objects
//! travel), and each ref is then fetched from there into the user's repository with `fetch.fsckObjects`
//! on: git's own fsck rules (`.git` in any spelling, `..`, bad modes, malformed objects) decide per ref,
//! and a refused ref leaves nothing behind. The refs land where a pull always put them
//! (`refs/agent-remotes/<remote>/...`, `refs/notes/remotes/<remote>/...`); what is merged from there is
//! validated entry by entry by the merges themselves (skills: [`Store::skill_problem()`]).
//!
//! Large blobs are streamed, never held whole (`core.bigFileThreshold`), so a pulled 150 MB file does not
//! cost 150 MB of memory in the fetch.

use std::ffi::OsString;
use std::path::Path;
use std::process::Stdio;

use crate::store::repo::{Store, StoreError};

/// Blobs above this are streamed by git's fetch and index-pack instead of read whole.
const BIG_FILE_THRESHOLD: &str = "1m";

/// The sending side of a fetch from a local repository, streaming large blobs too. git clears `-c`
/// settings for the other end of a local transport, so without this its pack-objects reads a 150 MB blob
/// whole, and as our child it counts against our memory. Only for local remotes: a server may allow no
/// other command than a plain `git-upload-pack`.
const STREAMING_UPLOAD_PACK: &str = "--upload-pack=git -c core.bigFileThreshold=1m upload-pack";

/// True for a remote that is a path or a `file://` URL (its upload-pack runs here, as our child).
fn is_local(url: &std::ffi::OsStr) -> bool {
    let text = url.to_string_lossy();
    text.starts_with("file://") || (Path::new(url).is_absolute() && Path::new(url).exists())
}

/// A remote ref a pull refused, in words, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefusedRef {
    /// The ref as the remote has it (`refs/agent/skills`).
    pub remote_ref: String,
    /// What it holds, in words (`the skills`, `session 3f9c1a's branch`).
    pub what: String,
    /// Why, in words (git's fsck message ids, not its text).
    pub why: String,
}

/// What [`Store::fetch_quarantined()`] did.
#[derive(Debug, Default)]
pub struct Quarantined {
    /// Refs fetched into the repository (new or moved).
    pub taken: usize,
    /// Refs refused: nothing of them was kept.
    pub refused: Vec<RefusedRef>,
}

/// The scratch repository: a fresh `pull-*` folder with a random name under `.git/agent/tmp`, removed (best
/// effort) when dropped, also on an early return.
struct Scratch(tempfile::TempDir);

impl Store {
    /// Fetches `refspecs` (sources on the remote, destinations in this repository) from `remote` through a
    /// scratch repository, keeping each ref only if its new objects pass git's fsck checks. Errors only when
    /// the remote cannot be reached at all (git has then said why on stderr).
    pub fn fetch_quarantined(
        &self,
        remote: &str,
        refspecs: &[String],
    ) -> Result<Quarantined, StoreError> {
        let scratch = self.scratch_repo()?;
        let url = self.remote_url(remote);
        let mut fetch = self.git_command()?;
        fetch
            .arg(git_dir_arg(scratch.0.path()))
            .args([
                "-c",
                "fetch.fsckObjects=false",
                "-c",
                "transfer.fsckObjects=false",
            ])
            .args(["-c", &format!("core.bigFileThreshold={BIG_FILE_THRESHOLD}")])
            .args(["fetch", "--no-tags", "--no-write-fetch-head", "--quiet"]);
        if is_local(&url) {
            fetch.arg(STREAMING_UPLOAD_PACK);
        }
        fetch.arg(&url).args(refspecs);
        let status = fetch
            .stdin(Stdio::null())
            .status()
            .map_err(StoreError::GitMissing)?;
        if !status.success() {
            return Err(StoreError::FetchFailed(remote.to_owned()));
        }
        let mut report = Quarantined::default();
        for (name, oid) in self.scratch_refs(scratch.0.path())? {
            if self.ref_target(&name)?.map(|o| o.to_string()) == Some(oid) {
                continue;
            }
            match self.take_checked(scratch.0.path(), &name)? {
                None => report.taken += 1,
                Some(why) => report.refused.push(RefusedRef {
                    remote_ref: remote_name_of(&name, remote),
                    what: described(&name, remote),
                    why,
                }),
            }
        }
        Ok(report)
    }

    /// A fresh bare repository under `.git/agent/tmp` that sees this repository's objects.
    fn scratch_repo(&self) -> Result<Scratch, StoreError> {
        let tmp = self.common_dir().join("agent").join("tmp");
        std::fs::create_dir_all(&tmp).map_err(StoreError::io("create", &tmp))?;
        let dir = tempfile::Builder::new()
            .prefix("pull-")
            .tempdir_in(&tmp)
            .map_err(StoreError::io("create a folder in", &tmp))?;
        let scratch = Scratch(dir);
        let format = format!("--object-format={}", self.repo.object_hash());
        let mut init: Vec<OsString> = ["init", "--bare", "--quiet", format.as_str()]
            .map(OsString::from)
            .to_vec();
        init.push(scratch.0.path().as_os_str().to_owned());
        let init: Vec<&std::ffi::OsStr> = init.iter().map(|a| a.as_os_str()).collect();
        self.git(self.workdir(), &init)?;
        // The repository's own settings (credential helpers, ssh command, proxies, `insteadOf`) apply to
        // the scratch fetch too: included first, so the scratch repository's own core settings win.
        let config = scratch.0.path().join("config");
        let own = std::fs::read(&config).map_err(StoreError::io("read", &config))?;
        let user_config = self.common_dir().join("config");
        let user_config = user_config.canonicalize().unwrap_or(user_config);
        let mut text = b"[include]\n\tpath = ".to_vec();
        text.extend_from_slice(user_config.as_os_str().as_encoded_bytes());
        text.push(b'\n');
        text.extend_from_slice(&own);
        std::fs::write(&config, text).map_err(StoreError::io("write", &config))?;
        let objects = self.common_dir().join("objects");
        let objects = objects.canonicalize().unwrap_or(objects);
        let alternates = scratch
            .0
            .path()
            .join("objects")
            .join("info")
            .join("alternates");
        let mut line = objects.into_os_string().into_encoded_bytes();
        line.push(b'\n');
        std::fs::write(&alternates, line).map_err(StoreError::io("write", &alternates))?;
        Ok(scratch)
    }

    /// Where `remote` is: its configured URL (a relative path made absolute, since the scratch repository
    /// fetches from elsewhere), or the argument itself (a URL or a path).
    fn remote_url(&self, remote: &str) -> OsString {
        let configured = self
            .git_output(&["remote", "get-url", "--", remote])
            .ok()
            .map(|out| String::from_utf8_lossy(&out).trim().to_owned())
            .filter(|url| !url.is_empty());
        let url = configured.unwrap_or_else(|| remote.to_owned());
        let local = self.workdir().join(&url);
        if !url.contains("://") && Path::new(&url).is_relative() && local.exists() {
            return local.into_os_string();
        }
        OsString::from(url)
    }

    /// Every ref of the scratch repository with its object id.
    fn scratch_refs(&self, scratch: &Path) -> Result<Vec<(String, String)>, StoreError> {
        let out = self
            .git_command()?
            .arg(git_dir_arg(scratch))
            .args(["for-each-ref", "--format=%(objectname) %(refname)"])
            .stdin(Stdio::null())
            .output()
            .map_err(StoreError::GitMissing)?;
        Ok(String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split_once(' '))
            .map(|(oid, name)| (name.to_owned(), oid.to_owned()))
            .collect())
    }

    /// Fetches one ref of the scratch repository into this one with git's fsck checks on; `Some(why)` when
    /// git refused it (then none of its objects were kept).
    fn take_checked(&self, scratch: &Path, name: &str) -> Result<Option<String>, StoreError> {
        let out = self
            .git_command()?
            .args([
                "-c",
                "fetch.fsckObjects=true",
                "-c",
                "transfer.fsckObjects=true",
            ])
            .args(["-c", &format!("core.bigFileThreshold={BIG_FILE_THRESHOLD}")])
            .args(["fetch", "--no-tags", "--no-write-fetch-head", "--quiet"])
            .arg(STREAMING_UPLOAD_PACK)
            .arg(scratch)
            .arg(format!("+{name}:{name}"))
            .stdin(Stdio::null())
            .output()
            .map_err(StoreError::GitMissing)?;
        if out.status.success() {
            return Ok(None);
        }
        Ok(Some(fsck_reasons(&String::from_utf8_lossy(&out.stderr))))
    }
}

fn git_dir_arg(dir: &Path) -> OsString {
    let mut arg = OsString::from("--git-dir=");
    arg.push(dir);
    arg
}

/// git's fsck message ids in its refusal (`hasDotgit`, `hasDotdot`, `badFilemode`), in words.
fn fsck_reasons(stderr: &str) -> String {
    let mut ids: Vec<&str> = Vec::new();
    for line in stderr.lines() {
        // `error: object <oid>: <msgId>: <text>`
        let mut parts = line.splitn(4, ": ");
        let (Some(_), Some(object), Some(id)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        let is_id = !id.is_empty() && id.chars().all(|c| c.is_ascii_alphanumeric());
        if object.starts_with("object ") && is_id && !ids.contains(&id) {
            ids.push(id);
        }
    }
    if ids.is_empty() {
        return "its objects failed git's checks (fetch.fsckObjects)".to_owned();
    }
    let words: Vec<String> = ids.iter().map(|id| fsck_words(id)).collect();
    format!("its objects failed git's checks: {}", words.join("; "))
}

fn fsck_words(id: &str) -> String {
    let words = match id {
        "hasDotgit" => "a tree entry named .git in some spelling",
        "hasDotdot" => "a tree entry named ..",
        "hasDot" => "a tree entry named .",
        "fullPathname" | "emptyName" => "a tree entry with an empty or slashed name",
        "badFilemode" | "zeroPaddedFilemode" => "a tree entry with a bad mode",
        "duplicateEntries" | "treeNotSorted" => "a malformed tree",
        "gitmodulesSymlink" => "a symbolic link named .gitmodules",
        _ => return format!("git fsck check {id}"),
    };
    format!("{words} ({id})")
}

/// The ref's name on the remote, from where a pull puts it.
fn remote_name_of(local: &str, remote: &str) -> String {
    let quarantine = format!("refs/agent-remotes/{remote}/");
    let notes = format!("refs/notes/remotes/{remote}/");
    if let Some(rest) = local.strip_prefix(&quarantine) {
        if let Some(id) = rest.strip_prefix("sessions/") {
            return format!("refs/agent/sessions/{id}");
        }
        if let Some(id) = rest.strip_prefix("heads/") {
            return format!("refs/heads/agent/{id}");
        }
        return format!("refs/agent/{rest}");
    }
    if let Some(rest) = local.strip_prefix(&notes) {
        return format!("refs/notes/{rest}");
    }
    local.to_owned()
}

/// What a pulled ref holds, in words.
fn described(local: &str, remote: &str) -> String {
    let theirs = remote_name_of(local, remote);
    if let Some(id) = theirs.strip_prefix("refs/agent/sessions/") {
        return format!("the log of session {id}");
    }
    if let Some(id) = theirs.strip_prefix("refs/heads/agent/") {
        return format!("the branch of session {id}");
    }
    match theirs.as_str() {
        "refs/agent/skills" => "the skills".to_owned(),
        "refs/agent/memory" => "the memory".to_owned(),
        "refs/notes/agent" => "the step notes".to_owned(),
        "refs/notes/agent-review" => "the review records".to_owned(),
        other => format!("the ref {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refs_are_named_in_words() {
        let local = "refs/agent-remotes/origin/heads/3f9c1a";
        assert_eq!(remote_name_of(local, "origin"), "refs/heads/agent/3f9c1a");
        assert_eq!(described(local, "origin"), "the branch of session 3f9c1a");
        assert_eq!(
            described("refs/agent-remotes/origin/skills", "origin"),
            "the skills"
        );
        assert_eq!(
            described("refs/notes/remotes/origin/agent-review", "origin"),
            "the review records"
        );
    }

    #[test]
    fn fsck_ids_are_read_from_gits_refusal() {
        let stderr = "error: object 1234: hasDotgit: contains '.git'\n\
                      error: object 5678: hasDotdot: contains '..'\n\
                      fatal: fsck error in packed object\n";
        let why = fsck_reasons(stderr);
        assert!(
            why.contains("named .git in some spelling (hasDotgit)"),
            "{why}"
        );
        assert!(why.contains("named .. (hasDotdot)"), "{why}");
        assert!(!why.contains("fatal"), "{why}");
    }
}
