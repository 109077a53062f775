//! git's file-system monitor, read-only (issue 29): when `core.fsmonitor` names a hook (Watchman's from git's
//! templates, or any other that speaks protocol 2) and the user's index carries git's `FSMN` extension, step 0
//! stats only the files the monitor says may have changed since git last wrote the index, as `git status`
//! does, instead of every tracked file. On a 1,000,000-file repository that stat is most of a second.
//!
//! What the index says: `FSMN` holds the monitor's token from when git wrote the index, and a bitmap of the
//! entries git had not verified then (dirty); every other entry matched its file at that token. The hook,
//! run as `<hook> 2 <token>` in the work tree, prints a new token and the paths changed since, each ended by a
//! NUL; a `/` among them means it cannot tell. Entries neither dirty nor named (nor below a named directory)
//! are marked `FSMONITOR_VALID` in memory, and gix's status skips those. The index file is never written, so
//! the token stays git's and every session asks for everything since git's last write.
//!
//! Anything unusual means a full stat, as without a monitor:
//! - no `core.fsmonitor`, or a boolean (git's built-in daemon, which Linux lacks; not spoken here);
//! - a value from a config file the user does not own (gix's trust: the same rule as `core.hooksPath`), or
//!   one the repository's own config sets that the user has not trusted ([`repository_hook()`]);
//! - an index without `FSMN`, with a version-1 (timestamp) one, split or sparse, or whose extensions cannot
//!   be walked exactly to its checksum;
//! - a hook that fails, answers `/`, takes over [`TIMEOUT`] or prints more than [`MAX_ANSWER`];
//! - `core.ignorecase` (a monitor's names need not match the index's case).

use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use gix::bstr::{BStr, BString, ByteSlice};
use gix::index::entry::Flags;

/// How long the hook may take. Longer than a full stat of a million files on a quiet disk, so a monitor that
/// is still crawling (Watchman's first query after `watch`) costs no more than doing without it.
const TIMEOUT: Duration = Duration::from_secs(10);

/// The most the hook may print: a million paths of 60 bytes. More means a full stat.
const MAX_ANSWER: u64 = 64 << 20;

/// The most a `FSMN` extension is read: its bitmap of a million entries, all dirty, is about 128 KB.
const MAX_EXTENSION: u64 = 16 << 20;

/// What the monitor did for one status, for the phase timings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Monitor {
    /// Not used; the reason, one of a few fixed words.
    Unused(&'static str),
    /// Used: how many entries are taken as unchanged without a stat, and how many paths the hook named.
    Used { unchanged: usize, named: usize },
}

/// Marks in memory the entries of `index` (the user's, as read from disk) that git's file-system monitor
/// vouches for as `FSMONITOR_VALID`, so the status that follows does not stat them. A hook the repository's
/// own config names ([`repository_hook()`]) runs only when `repository_hook_trusted`.
pub(super) fn mark_unchanged(
    repo: &gix::Repository,
    index: &mut gix::index::File,
    repository_hook_trusted: bool,
) -> Monitor {
    let Some(hook) = hook(repo) else {
        return Monitor::Unused("no hook");
    };
    if !repository_hook_trusted && repository_hook(repo).is_some() {
        return Monitor::Unused("untrusted");
    }
    let Some(workdir) = repo.workdir() else {
        return Monitor::Unused("bare");
    };
    if repo.config_snapshot().boolean("core.ignorecase") == Some(true) {
        return Monitor::Unused("ignorecase");
    }
    let Some(recorded) = extension(index) else {
        return Monitor::Unused("no extension");
    };
    let Some(named) = query(&hook, workdir, recorded.token.as_bstr()) else {
        return Monitor::Unused("hook");
    };
    let unchanged = mark(index, &recorded.dirty, &named);
    Monitor::Used {
        unchanged,
        named: named.len(),
    }
}

/// The hook `core.fsmonitor` names, from a trusted config file only; not a boolean.
fn hook(repo: &gix::Repository) -> Option<OsString> {
    let value = repo
        .config_snapshot()
        .trusted_program("core.fsmonitor")
        .ok()
        .flatten()?;
    let is_boolean = gix::config::Boolean::try_from(value.as_bytes().as_bstr()).is_ok();
    (!value.is_empty() && !is_boolean).then(|| expand_home(value, dirs::home_dir().as_deref()))
}

/// `~/` at the start of the value as the home directory, as git reads `core.fsmonitor` (a path name).
fn expand_home(value: OsString, home: Option<&Path>) -> OsString {
    match (value.as_bytes().strip_prefix(b"~/"), home) {
        (Some(rest), Some(home)) => home.join(OsStr::from_bytes(rest)).into_os_string(),
        _ => value,
    }
}

/// The hook `core.fsmonitor` names when the repository's own config sets it (`.git/config`, a worktree's
/// `config.worktree`, or a file either includes) and nothing the user runs with (`-c`, the environment)
/// overrides it. An unpacked archive with a `.git` directory brings that file along, so such a hook runs only
/// once the user trusted it (`git agent trust`); one in the user's own config files is theirs.
pub(in crate::store) fn repository_hook(repo: &gix::Repository) -> Option<OsString> {
    use gix::config::Source;
    let hook = hook(repo)?;
    let snapshot = repo.config_snapshot();
    let config = snapshot.plumbing();
    let set_by = |which: fn(Source) -> bool| {
        config
            .string_filter("core.fsmonitor", |meta| which(meta.source))
            .is_some()
    };
    let by_repository = set_by(|source| matches!(source, Source::Local | Source::Worktree));
    let by_user_after = set_by(|source| source > Source::Worktree);
    (by_repository && !by_user_after).then_some(hook)
}

/// What git recorded in the index's `FSMN` extension (version 2).
struct Recorded {
    token: BString,
    dirty: gix_bitmap::ewah::Vec,
}

/// The `FSMN` extension of the index file `index` was read from. gix parses it but keeps it private, so the
/// extensions are found where the entries end, computed from the entries as git lays them out, and walked to
/// the file's checksum: a mistake there, or a file rewritten since it was read, finds no extension.
fn extension(index: &gix::index::File) -> Option<Recorded> {
    if index.link().is_some() || index.is_sparse() {
        return None;
    }
    let file = std::fs::File::open(index.path()).ok()?;
    let hash_len = index.object_hash().len_in_bytes();
    let end = file.metadata().ok()?.len().checked_sub(hash_len as u64)?;
    let mut trailer = vec![0; hash_len];
    file.read_exact_at(&mut trailer, end).ok()?;
    if index
        .checksum()
        .is_some_and(|sum| !sum.is_null() && sum.as_slice() != trailer.as_slice())
    {
        return None;
    }
    let mut at = entries_end(index)?;
    let mut found = None;
    while at < end {
        let mut header = [0; 8];
        file.read_exact_at(&mut header, at).ok()?;
        let size = u64::from(u32::from_be_bytes(header[4..].try_into().ok()?));
        let data = at + 8;
        let next = data.checked_add(size).filter(|&next| next <= end)?;
        if &header[..4] == b"FSMN" {
            found = Some((data, size));
        }
        at = next;
    }
    let (data, size) = found.filter(|&(_, size)| size <= MAX_EXTENSION)?;
    let mut bytes = vec![0; usize::try_from(size).ok()?];
    file.read_exact_at(&mut bytes, data).ok()?;
    decode(&bytes, index.entries().len())
}

/// Decodes a version-2 `FSMN` extension's data; its bitmap may name no entry beyond `entries`.
fn decode(data: &[u8], entries: usize) -> Option<Recorded> {
    let (version, rest) = data.split_first_chunk::<4>()?;
    if u32::from_be_bytes(*version) != 2 {
        return None;
    }
    let (token, rest) = rest.split_at(rest.find_byte(0)?);
    let (size, rest) = rest[1..].split_first_chunk::<4>()?;
    let bitmap = rest.get(..u32::from_be_bytes(*size) as usize)?;
    let (dirty, _) = gix_bitmap::ewah::decode(bitmap).ok()?;
    (dirty.num_bits() <= entries).then(|| Recorded {
        token: token.into(),
        dirty,
    })
}

/// Where the index file's entries end and its extensions begin, from the entries as read: git's layout of
/// each (`ondisk_ce_size` for versions 2 and 3, padded to 8 bytes; version 4's path compressed against the
/// previous one, as git's writer does it).
fn entries_end(index: &gix::index::File) -> Option<u64> {
    use gix::index::Version;
    let fixed = 40 + index.object_hash().len_in_bytes() + 2;
    let mut at: u64 = 12;
    let mut previous: &BStr = BStr::new("");
    for entry in index.entries() {
        let path = entry.path(index);
        let head = fixed
            + if entry.flags.contains(Flags::EXTENDED) {
                2
            } else {
                0
            };
        let size = match index.version() {
            Version::V2 | Version::V3 => (head + path.len() + 8) & !7,
            Version::V4 => {
                let common = previous
                    .iter()
                    .zip(path.iter())
                    .take_while(|(a, b)| a == b)
                    .count();
                head + varint_len(previous.len() - common) + (path.len() - common) + 1
            }
        };
        at += size as u64;
        previous = path;
    }
    Some(at)
}

/// The length of git's offset varint (`encode_varint`) for `value`.
fn varint_len(value: usize) -> usize {
    let mut value = value >> 7;
    let mut len = 1;
    while value != 0 {
        value -= 1;
        value >>= 7;
        len += 1;
    }
    len
}

/// Asks the hook at `hook` (run as git runs it: in `workdir`, through the shell when the value needs one)
/// what changed since `token`: the paths it names, or `None` when it failed or cannot tell.
fn query(hook: &OsStr, workdir: &Path, token: &BStr) -> Option<Vec<BString>> {
    let mut cmd = shell_command(hook);
    cmd.arg("2")
        .arg(OsStr::from_bytes(token))
        .current_dir(workdir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0);
    crate::safety::redact::scrub_child_env(&mut cmd, &[]);
    crate::store::objects::git::without_redirects(&mut cmd);
    let mut child = cmd.spawn().ok()?;
    let stdout = child.stdout.take()?;
    let (send, answer) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let read = stdout.take(MAX_ANSWER + 1).read_to_end(&mut bytes);
        let _ = send.send(read.map(|_| bytes));
    });
    let answer = answer.recv_timeout(TIMEOUT);
    if answer.is_err() {
        crate::sys::process::signal_group(child.id(), crate::sys::signal::SIGKILL);
    }
    let exited = child.wait().ok()?;
    let bytes = answer.ok()?.ok()?;
    if !exited.success() || bytes.len() as u64 > MAX_ANSWER {
        return None;
    }
    parse_answer(&bytes)
}

/// The command for a hook value, as git's `run_command` with `use_shell` makes it: the program itself when
/// the value is a plain name or path, else `sh -c '<value> "$@"'` so that arguments in the value work.
fn shell_command(hook: &OsStr) -> Command {
    const SPECIAL: &[u8] = b"|&;<>()$`\\\"' \t\n*?[#~=%";
    if !hook.as_bytes().iter().any(|b| SPECIAL.contains(b)) {
        return Command::new(hook);
    }
    let mut script = hook.to_owned();
    script.push(" \"$@\"");
    let mut cmd = Command::new("sh");
    cmd.arg("-c").arg(script).arg(hook);
    cmd
}

/// A protocol-2 answer: the new token, then the paths, each ended by a NUL. `None` for an answer without a
/// token or one that names `/` (everything may have changed).
fn parse_answer(bytes: &[u8]) -> Option<Vec<BString>> {
    let mut fields = bytes.split(|&b| b == 0);
    let _token = fields.next().filter(|_| bytes.contains(&0))?;
    let mut paths = Vec::new();
    for field in fields.filter(|f| !f.is_empty()) {
        if field == b"/" {
            return None;
        }
        paths.push(BString::from(field));
    }
    Some(paths)
}

/// Marks the entries of `index` unchanged (`FSMONITOR_VALID`) except those set in `dirty`, those at or below
/// a path in `named` (a name is also taken as a directory, and as a prefix: `d1` covers `d10/`, which only
/// costs a stat), conflicted ones and those added with intent; returns how many were marked.
fn mark(index: &mut gix::index::File, dirty: &gix_bitmap::ewah::Vec, named: &[BString]) -> usize {
    let mut valid: Vec<bool> = index
        .entries()
        .iter()
        .map(|e| {
            e.stage() == gix::index::entry::Stage::Unconflicted
                && !e.flags.contains(Flags::INTENT_TO_ADD)
        })
        .collect();
    dirty.for_each_set_bit(|bit| {
        if let Some(v) = valid.get_mut(bit) {
            *v = false;
        }
        Some(())
    });
    for path in named {
        let path = path.strip_suffix(b"/").unwrap_or(path);
        if let Some(range) = index.prefixed_entries_range(path.as_bstr()) {
            valid[range].fill(false);
        }
    }
    let mut marked = 0;
    for (entry, valid) in index.entries_mut().iter_mut().zip(valid) {
        if valid {
            entry.flags.insert(Flags::FSMONITOR_VALID);
            marked += 1;
        }
    }
    marked
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_varint_lengths() {
        // git's encode_varint: 0..=127 in one byte, 128..=16511 in two, 16512.. in three.
        assert_eq!(varint_len(0), 1);
        assert_eq!(varint_len(127), 1);
        assert_eq!(varint_len(128), 2);
        assert_eq!(varint_len(16511), 2);
        assert_eq!(varint_len(16512), 3);
    }

    #[test]
    fn an_answer_is_a_token_then_paths_and_slash_means_everything() {
        assert_eq!(
            parse_answer(b"c:1:2\0a/b\0dir/\0"),
            Some(vec![BString::from("a/b"), BString::from("dir/")])
        );
        assert_eq!(parse_answer(b"c:1:2\0"), Some(vec![]));
        assert_eq!(parse_answer(b"c:1:2\0a\0/\0"), None);
        assert_eq!(parse_answer(b"no terminator"), None);
        assert_eq!(parse_answer(b""), None);
    }

    #[test]
    fn a_leading_tilde_is_the_home_directory() {
        let home = Path::new("/home/me");
        let expanded = expand_home(OsString::from("~/bin/monitor"), Some(home));
        assert_eq!(expanded, "/home/me/bin/monitor");
        let relative = expand_home(OsString::from(".git/hooks/monitor"), Some(home));
        assert_eq!(relative, ".git/hooks/monitor");
        assert_eq!(expand_home(OsString::from("~/x"), None), "~/x");
    }

    #[test]
    fn a_value_with_shell_syntax_runs_through_the_shell() {
        let plain = shell_command(OsStr::new(".git/hooks/fsmonitor-watchman"));
        assert_eq!(plain.get_program(), ".git/hooks/fsmonitor-watchman");
        let shell = shell_command(OsStr::new("my-monitor --fast"));
        assert_eq!(shell.get_program(), "sh");
        let args: Vec<_> = shell.get_args().collect();
        assert_eq!(
            args,
            ["-c", "my-monitor --fast \"$@\"", "my-monitor --fast"]
        );
    }
}
