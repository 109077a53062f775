//! The session's private temporary directory, given to its commands as `TMPDIR`.
//!
//! A predictable `/tmp/git-agent-<id>` could be made beforehand by another user of the machine (a symlink to
//! somewhere of ours, or a directory they can read), so the directory is made the way `mkdtemp(3)` makes it:
//! a random name, created exclusively, mode 0700. The session holds an `flock` on it while it lives and
//! removes it when it ends; one killed (kill -9, a crash) leaves it behind, and the next session removes such
//! leftovers: directories in the temp dir named like ours, owned by us, of mode 0700 and not locked by a live
//! session. The kernel drops a dead process's locks, so "not locked" means "its session is gone", without
//! trusting a pid that may have been reused. A directory gets its sweepable name only once it is locked: it
//! is made as `.git-agent-...` (a name no sweep takes), locked, then renamed, so a session starting at the
//! same moment cannot sweep it in the window between `mkdtemp` and `flock`.

use std::fs::File;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The name's fixed part: `git-agent-<session id>-<6 random characters>`.
const PREFIX: &str = "git-agent-";

/// A session's private temp dir, locked while this value lives.
#[derive(Debug)]
pub struct ScratchDir {
    path: PathBuf,
    /// The directory itself, opened and `flock`ed: the mark of a live session.
    _lock: File,
    /// The sweep of killed sessions' leftovers, on a thread of its own: it lists the whole temp dir (thousands
    /// of entries on a busy machine), which no request or command needs to wait for.
    sweeping: Option<std::thread::JoinHandle<usize>>,
}

impl ScratchDir {
    /// Makes a fresh directory for session `id` in `parent` (the system temp dir in use), and starts removing
    /// the leftovers of killed sessions there, on a thread joined when this value is dropped.
    pub fn create(parent: &Path, id: &str) -> io::Result<ScratchDir> {
        let (path, lock) = make_locked(parent, id)?;
        let owned = parent.to_path_buf();
        let sweeping = std::thread::Builder::new()
            .name("git-agent-sweep".into())
            .spawn(move || sweep(&owned))
            .ok();
        Ok(ScratchDir {
            path,
            _lock: lock,
            sweeping,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Removes the directory and everything in it (best effort: it is scratch space). Symlinks inside are
    /// removed, never followed.
    pub fn remove(self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

impl Drop for ScratchDir {
    /// The sweep ends with the session, so nothing of it outlives the session's directory.
    fn drop(&mut self) {
        if let Some(sweeping) = self.sweeping.take() {
            let _ = sweeping.join();
        }
    }
}

/// Makes the directory under a name no sweep takes, locks it, then gives it its final name. The final name
/// keeps mkdtemp's random suffix; one already taken (vanishingly rare) means another try.
fn make_locked(parent: &Path, id: &str) -> io::Result<(PathBuf, File)> {
    let template = parent.join(format!(".{PREFIX}{id}-XXXXXX"));
    let mut tries = 0;
    loop {
        let unnamed = crate::sys::fs::make_temp_dir(&template)?;
        let lock = open_dir(&unnamed)?;
        crate::sys::fs::lock(&lock, crate::sys::fs::Lock::TryExclusive)?;
        let hidden = unnamed
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        let path = parent.join(hidden.trim_start_matches('.'));
        if std::fs::symlink_metadata(&path).is_err() && std::fs::rename(&unnamed, &path).is_ok() {
            return Ok((path, lock));
        }
        let _ = std::fs::remove_dir(&unnamed);
        tries += 1;
        if tries == 8 {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("no free name for a temp dir in {}", parent.display()),
            ));
        }
    }
}

/// Opens a directory without following a symlink, close-on-exec.
fn open_dir(path: &Path) -> io::Result<File> {
    Ok(File::from(crate::sys::fs::open_dir_nofollow(path)?))
}

/// `git-agent-<id>-<6 characters>`: the id lowercase hex and `-`, the suffix what mkdtemp picks.
fn is_our_name(name: &str) -> bool {
    let Some(rest) = name.strip_prefix(PREFIX) else {
        return false;
    };
    let Some((id, suffix)) = rest.rsplit_once('-') else {
        return false;
    };
    !id.is_empty()
        && id
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b) || b == b'-')
        && suffix.len() == 6
        && suffix.bytes().all(|b| b.is_ascii_alphanumeric())
}

/// Removes the leftovers of dead sessions in `parent`; returns how many. Only what is certainly ours: our
/// name pattern, a real directory (not a link), owned by our user, mode 0700, and not locked by a session.
pub fn sweep(parent: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return 0;
    };
    let me = crate::sys::process::effective_uid();
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !name.to_str().is_some_and(is_our_name) {
            continue;
        }
        let path = entry.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if !meta.is_dir() || meta.uid() != me || meta.mode() & 0o7777 != 0o700 {
            continue;
        }
        let Ok(dir) = open_dir(&path) else { continue };
        // The directory we opened must be the one we judged (not swapped meanwhile).
        let same = dir
            .metadata()
            .is_ok_and(|m| m.dev() == meta.dev() && m.ino() == meta.ino());
        // The lock goes with `dir`.
        let free = same && crate::sys::fs::lock(&dir, crate::sys::fs::Lock::TryExclusive).is_ok();
        if free && std::fs::remove_dir_all(&path).is_ok() {
            removed += 1;
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn parent(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "git-agent-scratch-test-{tag}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// Sessions starting at the same moment each keep their directory: one's sweep never takes another's
    /// made-but-not-yet-locked directory (the race that once failed `private_unique_and_removed` under load).
    #[test]
    fn sessions_starting_together_keep_their_directories() {
        let parent = parent("together");
        let workers: Vec<_> = (0..4)
            .map(|_| {
                let parent = parent.clone();
                std::thread::spawn(move || {
                    for _ in 0..25 {
                        let dir = ScratchDir::create(&parent, "abc123").unwrap();
                        std::fs::write(dir.path().join("x"), "x").unwrap();
                        assert!(dir.path().join("x").is_file());
                        drop(dir);
                    }
                })
            })
            .collect();
        for worker in workers {
            worker.join().unwrap();
        }
        let _ = std::fs::remove_dir_all(&parent);
    }

    #[test]
    fn private_unique_and_removed() {
        let parent = parent("create");
        let a = ScratchDir::create(&parent, "abc123").unwrap();
        let b = ScratchDir::create(&parent, "abc123").unwrap();
        assert_ne!(a.path(), b.path());
        let name = a.path().file_name().unwrap().to_str().unwrap().to_owned();
        assert!(is_our_name(&name), "{name}");
        assert!(name.starts_with("git-agent-abc123-"), "{name}");
        let meta = std::fs::metadata(a.path()).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o700);
        std::fs::write(a.path().join("x"), "x").unwrap();
        // A live session's directory is never swept, even by another session.
        assert_eq!(sweep(&parent), 0);
        let path = a.path().to_path_buf();
        a.remove();
        assert!(!path.exists());
        drop(b);
        // b's session is gone (its lock with it): a sweep takes its directory. Not always the very next one
        // while other tests run: a child another thread forks holds a copy of the lock's descriptor until its
        // exec closes it (`O_CLOEXEC`), and a sweep in that window rightly sees the lock held.
        let swept = (0..50)
            .map(|_| {
                let swept = sweep(&parent);
                if swept == 0 {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                swept
            })
            .find(|&swept| swept > 0);
        assert_eq!(swept, Some(1));
        assert_eq!(std::fs::read_dir(&parent).unwrap().count(), 0);
        let _ = std::fs::remove_dir_all(&parent);
    }

    #[test]
    fn sweep_takes_only_what_is_certainly_ours() {
        let parent = parent("sweep");
        let outside = parent.join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("keep"), "keep").unwrap();
        let mk = |name: &str, mode: u32| {
            let p = parent.join(name);
            std::fs::create_dir_all(&p).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
            p
        };
        let dead = mk("git-agent-abc123-Q1w2E3", 0o700);
        std::fs::write(dead.join("f"), "").unwrap();
        std::os::unix::fs::symlink(&outside, dead.join("link")).unwrap();
        let open_mode = mk("git-agent-abc123-aaaaaa", 0o755);
        let other_name = mk("git-agent-abc123", 0o700);
        let not_hex = mk("git-agent-XYZ-bbbbbb", 0o700);
        let unrelated = mk("something-else", 0o700);
        std::os::unix::fs::symlink(&outside, parent.join("git-agent-abc123-cccccc")).unwrap();
        assert_eq!(sweep(&parent), 1);
        assert!(!dead.exists());
        // A link inside a leftover is removed, not followed.
        assert_eq!(
            std::fs::read_to_string(outside.join("keep")).unwrap(),
            "keep"
        );
        for kept in [&open_mode, &other_name, &not_hex, &unrelated] {
            assert!(kept.exists(), "{}", kept.display());
        }
        assert!(parent.join("git-agent-abc123-cccccc").is_symlink());
        let _ = std::fs::remove_dir_all(&parent);
    }
}
