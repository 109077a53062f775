//! Reading and writing paths in the user's working tree without ever following a symbolic link.
//!
//! `accept` used to `fs::write(root.join(path))`: a committed link to a file outside the repository, or a
//! directory the user replaced by a link, sent the write (and conflict markers) through the link into a file
//! outside the repository, and a kill in the middle of the truncate-and-write left the user's file empty
//! (issue 17, defects 2 and 4). Here every path is walked one component at a time from the root's descriptor
//! with `O_NOFOLLOW`, a link or a file met on the way is reported (never crossed), and every write goes to a
//! temporary file in the same directory (mode set, `fsync`ed) that is then renamed over the target: the path
//! holds the old bytes or the new, never half, and a link in the last position is replaced, not written
//! through. Links are created as links (`symlinkat` + rename), deletions are `unlinkat`.
//!
//! A directory that holds `.git` is a repository of its own (a submodule, or a nested clone): walking into
//! it is refused like a link, because a write there changes someone else's working tree.

use std::ffi::{CString, OsStr};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::store::repo::crash_point;
use crate::sys::fs::{self as sysfs, cstring, EntryStat, Kind, OpenFlags};

/// What a path of the working tree is, read without following links.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Found {
    /// Nothing there (possibly because a parent directory is missing too).
    Missing,
    /// A regular file: its bytes and its permission bits.
    File { data: Vec<u8>, mode: u32 },
    /// A symbolic link and its target.
    Symlink { target: Vec<u8> },
    /// A directory; `repo` when it holds `.git` (a submodule or another repository).
    Dir { repo: bool },
    /// A socket, device or fifo.
    Special,
    /// A parent of the path is not a plain directory: the reason names it (`docs is a symbolic link`).
    Blocked(String),
}

/// Reads `rel` (slash-separated, relative to `root`) without following any link.
pub fn read(root: &Path, rel: &str) -> io::Result<Found> {
    let (dir, name) = match walk(root, rel, false)? {
        Walk::Dir(dir, name) => (dir, name),
        Walk::Missing => return Ok(Found::Missing),
        Walk::Blocked(why) => return Ok(Found::Blocked(why)),
    };
    let Some(st) = stat_at(&dir, &name)? else {
        return Ok(Found::Missing);
    };
    match st.kind {
        Kind::Symlink => Ok(Found::Symlink {
            target: readlink_at(&dir, &name)?,
        }),
        Kind::File => {
            let fd = open_at(&dir, &name, OpenFlags::RDONLY, 0)?;
            let mut data = Vec::new();
            File::from(fd).read_to_end(&mut data)?;
            Ok(Found::File {
                data,
                mode: st.mode,
            })
        }
        Kind::Dir => {
            let sub = open_at(&dir, &name, OpenFlags::RDONLY | OpenFlags::DIRECTORY, 0)?;
            Ok(Found::Dir {
                repo: stat_at(&sub, &cstring(OsStr::new(".git"))?)?.is_some(),
            })
        }
        Kind::Other => Ok(Found::Special),
    }
}

/// The permission bits a written file gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Exactly these (the bits of the file it replaces, with the executable bits decided by the caller).
    Exact(u32),
    /// A new file: 0666 or 0777 under the umask, as git checks files out.
    New { executable: bool },
}

/// Replaces (or creates) the file `rel` with `bytes`: missing directories are made, a temp file in the same
/// directory gets the bytes and `mode`, is synced, and renamed over the target; then the directory is synced.
pub fn write_file(root: &Path, rel: &str, bytes: &[u8], mode: Mode) -> io::Result<()> {
    let (dir, name) = parent_for_write(root, rel)?;
    let temp = cstring(OsStr::new(&temp_name(&name)))?;
    let result = (|| {
        let flags = OpenFlags::WRONLY | OpenFlags::CREATE | OpenFlags::EXCL;
        let create = match mode {
            Mode::Exact(_) | Mode::New { executable: false } => 0o666,
            Mode::New { executable: true } => 0o777,
        };
        let fd = open_at(&dir, &temp, flags, create)?;
        let mut file = File::from(fd);
        file.write_all(bytes)?;
        if let Mode::Exact(mode) = mode {
            // fchmod: the mode the user's file had, exactly (the umask applied at create would change it).
            sysfs::set_mode(&file, mode)?;
        }
        file.sync_all()?;
        crash_point();
        rename_at(&dir, &temp, &name)
    })();
    if result.is_err() {
        // Best effort: the temp file is ours; the error is what matters.
        let _ = sysfs::unlink_at(&dir, &temp);
        return result;
    }
    sync_dir(&dir)
}

/// Replaces (or creates) `rel` with a symbolic link to `target`, never touching what an old link pointed to.
pub fn write_link(root: &Path, rel: &str, target: &[u8]) -> io::Result<()> {
    let (dir, name) = parent_for_write(root, rel)?;
    let temp = cstring(OsStr::new(&temp_name(&name)))?;
    let target = CString::new(target)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "link target has a NUL byte"))?;
    sysfs::symlink_at(&target, &dir, &temp)?;
    crash_point();
    if let Err(err) = rename_at(&dir, &temp, &name) {
        // Best effort: the temp link is ours.
        let _ = sysfs::unlink_at(&dir, &temp);
        return Err(err);
    }
    sync_dir(&dir)
}

/// Removes the file or link `rel` (a link itself, never its target) and then the directories it leaves
/// empty, as git does. A path that is already gone is not an error.
pub fn remove(root: &Path, rel: &str) -> io::Result<()> {
    let (dir, name) = match walk(root, rel, false)? {
        Walk::Dir(dir, name) => (dir, name),
        Walk::Missing => return Ok(()),
        Walk::Blocked(why) => return Err(io::Error::other(why)),
    };
    if let Err(err) = sysfs::unlink_at(&dir, &name) {
        if err.kind() != io::ErrorKind::NotFound {
            return Err(err);
        }
    }
    sync_dir(&dir)?;
    drop(dir);
    remove_empty_parents(root, rel);
    Ok(())
}

/// Removes the temp files a write of `rel` killed before its rename left beside it
/// (`.<name>.git-agent-<pid>-<n>.tmp`, made by this module only).
pub fn remove_temps(root: &Path, rel: &str) -> io::Result<()> {
    let Walk::Dir(dir, name) = walk(root, rel, false)? else {
        return Ok(());
    };
    let prefix = format!(".{}.git-agent-", String::from_utf8_lossy(name.as_bytes()));
    for entry in list(&dir)? {
        let text = String::from_utf8_lossy(entry.as_bytes());
        if text.starts_with(&prefix) && text.ends_with(".tmp") {
            let _ = sysfs::unlink_at(&dir, &entry);
        }
    }
    Ok(())
}

/// The names in the open directory `dir`.
fn list(dir: &OwnedFd) -> io::Result<Vec<CString>> {
    sysfs::names(dir)
}

/// Removes the directories above `rel` that are empty now, deepest first, stopping at the first that is not.
fn remove_empty_parents(root: &Path, rel: &str) {
    let mut parts: Vec<&str> = rel.split('/').filter(|p| !p.is_empty()).collect();
    parts.pop();
    while let Some(last) = parts.pop() {
        let parent = parts.join("/");
        let Ok(Walk::Dir(dir, _)) = walk(root, &format!("{parent}/x"), false) else {
            return;
        };
        let Ok(name) = cstring(OsStr::new(last)) else {
            return;
        };
        // Fails (and we stop) when the directory is not empty.
        if sysfs::rmdir_at(&dir, &name).is_err() {
            return;
        }
    }
}

/// Where [`walk`] ended.
enum Walk {
    /// The parent directory of the last name is open.
    Dir(OwnedFd, CString),
    /// A parent directory does not exist (and `create` was false).
    Missing,
    /// A parent is a link, a file, or a repository of its own.
    Blocked(String),
}

/// Opens the parent directory of `rel`, component by component without following links; with `create`,
/// missing directories are made on the way.
fn walk(root: &Path, rel: &str, create: bool) -> io::Result<Walk> {
    let parts: Vec<&str> = rel.split('/').filter(|p| !p.is_empty()).collect();
    let Some((last, parents)) = parts.split_last() else {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "empty path"));
    };
    if parts.iter().any(|p| *p == "." || *p == "..") {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "path has '.' or '..'",
        ));
    }
    let mut dir = sysfs::open_dir(root)?;
    for (n, part) in parents.iter().enumerate() {
        let name = cstring(OsStr::new(part))?;
        let shown = parents[..=n].join("/");
        match stat_at(&dir, &name)? {
            None if create => {
                if let Err(err) = sysfs::mkdir_at(&dir, &name, 0o777) {
                    if err.kind() != io::ErrorKind::AlreadyExists {
                        return Err(err);
                    }
                }
            }
            None => return Ok(Walk::Missing),
            Some(st) => match st.kind {
                Kind::Dir => {}
                Kind::Symlink => return Ok(Walk::Blocked(format!("{shown} is a symbolic link"))),
                _ => return Ok(Walk::Blocked(format!("{shown} is not a directory"))),
            },
        }
        // O_NOFOLLOW: a directory swapped for a link since the stat fails here instead of being followed.
        dir = open_at(&dir, &name, OpenFlags::RDONLY | OpenFlags::DIRECTORY, 0)?;
        if stat_at(&dir, &cstring(OsStr::new(".git"))?)?.is_some() {
            return Ok(Walk::Blocked(format!(
                "{shown} is a submodule (a repository of its own)"
            )));
        }
    }
    Ok(Walk::Dir(dir, cstring(OsStr::new(last))?))
}

fn parent_for_write(root: &Path, rel: &str) -> io::Result<(OwnedFd, CString)> {
    match walk(root, rel, true)? {
        Walk::Dir(dir, name) => Ok((dir, name)),
        Walk::Missing => Err(io::Error::from(io::ErrorKind::NotFound)),
        Walk::Blocked(why) => Err(io::Error::other(format!("not written: {why}"))),
    }
}

fn stat_at(dir: &OwnedFd, name: &CString) -> io::Result<Option<EntryStat>> {
    sysfs::stat_at(dir, name)
}

fn readlink_at(dir: &OwnedFd, name: &CString) -> io::Result<Vec<u8>> {
    sysfs::read_link_at(dir, name)
}

fn open_at(
    dir: &OwnedFd,
    name: &CString,
    flags: OpenFlags,
    create_mode: u32,
) -> io::Result<OwnedFd> {
    sysfs::open_at(dir, name, flags, create_mode)
}

fn rename_at(dir: &OwnedFd, from: &CString, to: &CString) -> io::Result<()> {
    sysfs::rename_at(dir, from, to)?;
    crash_point();
    Ok(())
}

/// Makes a rename in `dir` durable (it is the directory's data that changed).
fn sync_dir(dir: &OwnedFd) -> io::Result<()> {
    sysfs::sync(dir)
}

/// `.name.git-agent-<pid>-<n>.tmp`: hidden, unique per process and call.
fn temp_name(name: &CString) -> String {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!(
        ".{}.git-agent-{}-{n}.tmp",
        String::from_utf8_lossy(name.as_bytes()),
        std::process::id()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{symlink, PermissionsExt};
    use std::path::PathBuf;

    fn tree(tag: &str) -> (PathBuf, PathBuf) {
        let base =
            std::env::temp_dir().join(format!("git-agent-place-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(base.join("root/sub")).unwrap();
        std::fs::create_dir_all(base.join("outside")).unwrap();
        std::fs::write(base.join("outside/f.txt"), "SECRET\n").unwrap();
        let base = std::fs::canonicalize(base).unwrap();
        (base.join("root"), base.join("outside"))
    }

    #[test]
    fn links_are_never_followed_reading_or_writing() {
        let (root, outside) = tree("links");
        symlink(&outside, root.join("out")).unwrap();
        symlink(outside.join("f.txt"), root.join("sub/f.txt")).unwrap();
        assert_eq!(
            read(&root, "out/f.txt").unwrap(),
            Found::Blocked("out is a symbolic link".into())
        );
        assert_eq!(
            read(&root, "sub/f.txt").unwrap(),
            Found::Symlink {
                target: outside.join("f.txt").into_os_string().into_encoded_bytes()
            }
        );
        assert!(write_file(&root, "out/f.txt", b"x", Mode::Exact(0o644)).is_err());
        write_file(&root, "sub/f.txt", b"mine\n", Mode::Exact(0o640)).unwrap();
        assert_eq!(std::fs::read(outside.join("f.txt")).unwrap(), b"SECRET\n");
        let md = std::fs::symlink_metadata(root.join("sub/f.txt")).unwrap();
        assert!(md.is_file() && md.permissions().mode() & 0o777 == 0o640);
        write_link(&root, "sub/f.txt", b"../elsewhere").unwrap();
        assert_eq!(
            std::fs::read_link(root.join("sub/f.txt")).unwrap(),
            Path::new("../elsewhere")
        );
        remove(&root, "sub/f.txt").unwrap();
        assert!(!root.join("sub").exists(), "emptied directories go too");
        remove(&root, "out").unwrap();
        assert!(
            outside.join("f.txt").exists(),
            "removing a link keeps its target"
        );
        // Nothing but the files asked for: no temp file is left behind.
        write_file(&root, "a/b/c.txt", b"c", Mode::New { executable: false }).unwrap();
        assert_eq!(std::fs::read_dir(root.join("a/b")).unwrap().count(), 1);
    }

    #[test]
    fn a_directory_holding_git_is_not_entered() {
        let (root, _) = tree("repo");
        std::fs::create_dir_all(root.join("sub/mod/.git")).unwrap();
        assert_eq!(read(&root, "sub/mod").unwrap(), Found::Dir { repo: true });
        assert!(
            matches!(read(&root, "sub/mod/x").unwrap(), Found::Blocked(why) if why.contains("submodule"))
        );
        assert!(write_file(&root, "sub/mod/x", b"x", Mode::New { executable: true }).is_err());
        assert!(!root.join("sub/mod/x").exists());
        assert_eq!(read(&root, "no/such/file").unwrap(), Found::Missing);
    }
}
