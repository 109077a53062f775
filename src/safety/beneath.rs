//! Opening files beneath the checkout root in a way that cannot be raced.
//!
//! [`super::path::resolve()`] checks a path and returns its canonical form, but a process running in the
//! checkout (a `run` command, a server the model started) could swap a directory for a symlink to `/etc`
//! between that check and the open. So every file tool opens the *canonical, root-relative* path from here,
//! with symlinks refused at every component: the path was canonical when checked, so a symlink found now
//! was swapped in afterwards, and the open fails instead of following it.
//!
//! On Linux 5.6+ this is one `openat2` call with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
//! RESOLVE_NO_MAGICLINKS`. Elsewhere (or when the kernel answers `ENOSYS`, e.g. under an old seccomp
//! filter) it walks the path one component at a time with `openat(..., O_NOFOLLOW)` from the root's file
//! descriptor, which is just as race-free, only slower. Writes create a temp file in the opened parent
//! directory and `renameat` it over the target, so they never follow a link either.

use std::ffi::{CString, OsStr};
use std::fs::{File, Permissions};
use std::io::{self, Write};
use std::os::fd::OwnedFd;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::sys::errno::{ELOOP, ENOSYS, ENOTDIR, EXDEV};
use crate::sys::fs::{self as sysfs, cstring, OpenFlags};

/// Set once `openat2` answered `ENOSYS`, so later opens go straight to the component walk.
static NO_OPENAT2: AtomicBool = AtomicBool::new(false);

/// Opens the file `rel` (relative to `root`, without symlinks or `..`) read-only. Directories open too, so
/// the caller can tell them apart with `metadata()`; anything else that is not a regular file (a FIFO, a
/// socket, a device a command left in the checkout) is refused, and the open itself cannot block on it.
pub fn open_read(root: &Path, rel: &Path) -> io::Result<File> {
    let root_fd = open_root(root)?;
    // O_NONBLOCK: opening a FIFO for reading otherwise waits for a writer, for ever. It changes nothing for
    // regular files and directories.
    let file = File::from(open_beneath(
        &root_fd,
        rel,
        OpenFlags::RDONLY | OpenFlags::NONBLOCK,
    )?);
    let kind = file.metadata()?.file_type();
    if !kind.is_file() && !kind.is_dir() {
        return Err(sysfs::not_regular(kind));
    }
    Ok(file)
}

/// The text of the regular file `rel` beneath `root` (opened as [`open_read()`] opens it), at most `limit`
/// bytes: a larger file, a directory or a file that is not UTF-8 is an error.
pub fn read_text(root: &Path, rel: &Path, limit: u64) -> io::Result<String> {
    use std::io::Read;
    let file = open_read(root, rel)?;
    sysfs::small_regular(&file.metadata()?, limit)?;
    let mut text = String::new();
    file.take(limit).read_to_string(&mut text)?;
    Ok(text)
}

/// Opens the directory `rel` beneath `root`; with `create`, missing directories are made on the way down
/// (each one with `mkdirat` in its parent's descriptor, so the chain cannot be redirected either).
pub fn open_dir(root: &Path, rel: &Path, create: bool) -> io::Result<OwnedFd> {
    let root_fd = open_root(root)?;
    if !create {
        return open_beneath(&root_fd, rel, OpenFlags::RDONLY | OpenFlags::DIRECTORY);
    }
    let mut dir = root_fd;
    for name in names(rel)? {
        let c = cstring(name)?;
        match openat_nofollow(&dir, &c, OpenFlags::RDONLY | OpenFlags::DIRECTORY) {
            Ok(next) => dir = next,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                if let Err(err) = sysfs::mkdir_at(&dir, &c, 0o777) {
                    if err.kind() != io::ErrorKind::AlreadyExists {
                        return Err(err);
                    }
                }
                dir = openat_nofollow(&dir, &c, OpenFlags::RDONLY | OpenFlags::DIRECTORY)?;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(dir)
}

/// Replaces (or creates) the file `rel` beneath `root` with `bytes`: a temp file in the same directory, then
/// a rename, so readers see the old content or the new, never half. `mode` is applied before the rename.
pub fn write_atomic(
    root: &Path,
    rel: &Path,
    bytes: &[u8],
    mode: Option<Permissions>,
    create_dirs: bool,
) -> io::Result<()> {
    let name = rel
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "path has no file name"))?;
    let parent = rel.parent().unwrap_or(Path::new(""));
    let dir = open_dir(root, parent, create_dirs)?;
    let temp = cstring(OsStr::new(&temp_name(name)))?;
    let target = cstring(name)?;
    let result =
        write_temp(&dir, &temp, bytes, mode).and_then(|()| sysfs::rename_at(&dir, &temp, &target));
    if result.is_err() {
        // Best effort: the temp file is ours and useless now; the original error is what matters.
        let _ = sysfs::unlink_at(&dir, &temp);
    }
    result
}

/// True for the errors a symlink met during a confined open produces: the caller says "refused", not
/// "cannot read".
pub fn is_link_refusal(err: &io::Error) -> bool {
    matches!(
        err.raw_os_error(),
        Some(ELOOP) | Some(EXDEV) | Some(ENOTDIR)
    )
}

fn write_temp(
    dir: &OwnedFd,
    temp: &CString,
    bytes: &[u8],
    mode: Option<Permissions>,
) -> io::Result<()> {
    let flags = OpenFlags::WRONLY | OpenFlags::CREATE | OpenFlags::EXCL;
    let mut file = File::from(sysfs::open_at(dir, temp, flags, 0o666)?);
    file.write_all(bytes)?;
    if let Some(mode) = mode {
        file.set_permissions(Permissions::from_mode(mode.mode()))?;
    }
    file.sync_all()
}

/// `.name.git-agent-<pid>-<n>.tmp`: hidden, unique per process and call.
fn temp_name(name: &OsStr) -> String {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!(
        ".{}.git-agent-{}-{n}.tmp",
        name.to_string_lossy(),
        std::process::id()
    )
}

fn open_root(root: &Path) -> io::Result<OwnedFd> {
    sysfs::open_dir(root)
}

/// Opens `rel` beneath `dir` with `flags`, refusing every symlink and `..`.
fn open_beneath(dir: &OwnedFd, rel: &Path, flags: OpenFlags) -> io::Result<OwnedFd> {
    let parts = names(rel)?;
    if parts.is_empty() {
        let dot = cstring(OsStr::new("."))?;
        return openat_nofollow(dir, &dot, flags);
    }
    if !NO_OPENAT2.load(Ordering::Relaxed) {
        match sysfs::open_beneath(dir, &cstring(rel.as_os_str())?, flags) {
            Err(e) if e.raw_os_error() == Some(ENOSYS) => NO_OPENAT2.store(true, Ordering::Relaxed),
            other => return other,
        }
    }
    let Some((last, dirs)) = parts.split_last() else {
        // Checked non-empty above; refuse rather than panic should that ever change.
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    };
    let mut current: Option<OwnedFd> = None;
    for name in dirs {
        let parent = current.as_ref().unwrap_or(dir);
        current = Some(openat_nofollow(
            parent,
            &cstring(name)?,
            OpenFlags::RDONLY | OpenFlags::DIRECTORY,
        )?);
    }
    openat_nofollow(current.as_ref().unwrap_or(dir), &cstring(last)?, flags)
}

fn openat_nofollow(dir: &OwnedFd, name: &CString, flags: OpenFlags) -> io::Result<OwnedFd> {
    sysfs::open_at(dir, name, flags, 0)
}

/// The names of a relative path without `.`; `..`, absolute paths and prefixes are refused.
fn names(rel: &Path) -> io::Result<Vec<&OsStr>> {
    rel.components()
        .filter(|c| !matches!(c, Component::CurDir))
        .map(|c| match c {
            Component::Normal(name) => Ok(name),
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "confined paths are relative and without '..'",
            )),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::unix::fs::symlink;
    use std::path::PathBuf;

    fn temp_tree(tag: &str) -> (PathBuf, PathBuf) {
        let base =
            std::env::temp_dir().join(format!("git-agent-beneath-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(base.join("root/sub")).unwrap();
        std::fs::create_dir_all(base.join("outside")).unwrap();
        std::fs::write(base.join("root/sub/f.txt"), "inside\n").unwrap();
        std::fs::write(base.join("outside/f.txt"), "SECRET\n").unwrap();
        let base = std::fs::canonicalize(base).unwrap();
        (base.join("root"), base.join("outside"))
    }

    fn read(root: &Path, rel: &str) -> io::Result<String> {
        let mut s = String::new();
        open_read(root, Path::new(rel))?.read_to_string(&mut s)?;
        Ok(s)
    }

    #[test]
    fn opens_inside_and_refuses_links_and_dotdot() {
        let (root, outside) = temp_tree("basic");
        assert_eq!(read(&root, "sub/f.txt").unwrap(), "inside\n");
        assert!(read(&root, "../outside/f.txt").is_err());
        symlink(&outside, root.join("link")).unwrap();
        let err = read(&root, "link/f.txt").unwrap_err();
        assert!(is_link_refusal(&err), "{err:?}");
        symlink(outside.join("f.txt"), root.join("file-link")).unwrap();
        assert!(is_link_refusal(&read(&root, "file-link").unwrap_err()));
    }

    #[test]
    fn the_component_walk_refuses_links_too() {
        let (root, outside) = temp_tree("walk");
        symlink(&outside, root.join("link")).unwrap();
        let root_fd = open_root(&root).unwrap();
        let dir = openat_nofollow(
            &root_fd,
            &cstring(OsStr::new("link")).unwrap(),
            OpenFlags::RDONLY | OpenFlags::DIRECTORY,
        );
        assert!(is_link_refusal(&dir.unwrap_err()));
    }

    #[test]
    fn writes_never_follow_links() {
        let (root, outside) = temp_tree("write");
        write_atomic(&root, Path::new("a/b/new.txt"), b"hi", None, true).unwrap();
        assert_eq!(std::fs::read(root.join("a/b/new.txt")).unwrap(), b"hi");
        symlink(&outside, root.join("out")).unwrap();
        let err = write_atomic(&root, Path::new("out/f.txt"), b"x", None, true).unwrap_err();
        assert!(is_link_refusal(&err), "{err:?}");
        // A link in the final position is replaced by the file, never written through.
        symlink(outside.join("f.txt"), root.join("sub/g.txt")).unwrap();
        write_atomic(&root, Path::new("sub/g.txt"), b"y", None, false).unwrap();
        assert_eq!(std::fs::read(outside.join("f.txt")).unwrap(), b"SECRET\n");
        assert!(!std::fs::symlink_metadata(root.join("sub/g.txt"))
            .unwrap()
            .is_symlink());
        assert_eq!(std::fs::read_dir(root.join("sub")).unwrap().count(), 2);
    }
}
