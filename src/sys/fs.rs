//! Directory-relative file system calls (`openat`, `mkdirat`, `renameat`, ...), locks and times: what the
//! race-free writers of `safety::beneath` and `store::place` are built from. Every open here adds
//! `O_CLOEXEC`, and the `*_at` opens `O_NOFOLLOW`, so a descriptor never leaks into a command and a name
//! is never followed through a symlink.

use std::ffi::{CStr, CString, OsStr};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, RawMode};

pub use rustix::fs::OFlags as OpenFlags;

/// `O_NOFOLLOW` and `O_NONBLOCK` as std's `OpenOptionsExt::custom_flags` takes them.
pub const STD_O_NOFOLLOW: i32 = libc::O_NOFOLLOW;
pub const STD_O_NONBLOCK: i32 = libc::O_NONBLOCK;

/// What a name in a directory is, without following it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Dir,
    Symlink,
    File,
    Other,
}

/// The kind and permission bits (`& 0o7777`) of a directory entry.
#[derive(Clone, Copy, Debug)]
pub struct EntryStat {
    pub kind: Kind,
    pub mode: u32,
}

/// Opens the directory `path` (following links, as a root path may be one).
pub fn open_dir(path: &Path) -> io::Result<OwnedFd> {
    Ok(rustix::fs::open(
        path,
        OpenFlags::RDONLY | OpenFlags::DIRECTORY | OpenFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

/// Opens the directory `path`, refusing a symlink as its last component.
pub fn open_dir_nofollow(path: &Path) -> io::Result<OwnedFd> {
    Ok(rustix::fs::open(
        path,
        OpenFlags::RDONLY | OpenFlags::DIRECTORY | OpenFlags::NOFOLLOW | OpenFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

/// Opens `name` in `dir` with `flags` (plus `O_NOFOLLOW | O_CLOEXEC`); `create_mode` applies with `O_CREAT`.
pub fn open_at(
    dir: impl AsFd,
    name: &CStr,
    flags: OpenFlags,
    create_mode: u32,
) -> io::Result<OwnedFd> {
    Ok(rustix::fs::openat(
        dir,
        name,
        flags | OpenFlags::NOFOLLOW | OpenFlags::CLOEXEC,
        mode(create_mode),
    )?)
}

/// Opens the relative path `rel` beneath `dir` in one call that refuses `..`, every symlink and magic link
/// (`openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS`, Linux 5.6+). Where
/// there is no such call the answer is `ENOSYS`, and the caller walks the path one name at a time.
#[cfg(all(target_os = "linux", not(git_agent_portable)))]
pub fn open_beneath(dir: impl AsFd, rel: &CStr, flags: OpenFlags) -> io::Result<OwnedFd> {
    use rustix::fs::ResolveFlags;
    Ok(rustix::fs::openat2(
        dir,
        rel,
        flags | OpenFlags::NOFOLLOW | OpenFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
    )?)
}

/// No single-call confined open on this platform: the caller walks the path.
#[cfg(not(all(target_os = "linux", not(git_agent_portable))))]
pub fn open_beneath(_dir: impl AsFd, _rel: &CStr, _flags: OpenFlags) -> io::Result<OwnedFd> {
    Err(io::Error::from_raw_os_error(super::errno::ENOSYS))
}

pub fn mkdir_at(dir: impl AsFd, name: &CStr, create_mode: u32) -> io::Result<()> {
    Ok(rustix::fs::mkdirat(dir, name, mode(create_mode))?)
}

/// Removes the non-directory entry `name` (a link itself, never its target).
pub fn unlink_at(dir: impl AsFd, name: &CStr) -> io::Result<()> {
    Ok(rustix::fs::unlinkat(dir, name, AtFlags::empty())?)
}

/// Removes the empty directory `name`; fails when it is not empty.
pub fn rmdir_at(dir: impl AsFd, name: &CStr) -> io::Result<()> {
    Ok(rustix::fs::unlinkat(dir, name, AtFlags::REMOVEDIR)?)
}

/// Renames `from` to `to`, both in `dir`.
pub fn rename_at(dir: impl AsFd, from: &CStr, to: &CStr) -> io::Result<()> {
    let dir = dir.as_fd();
    Ok(rustix::fs::renameat(dir, from, dir, to)?)
}

/// Makes `name` in `dir` a symbolic link to `target`.
pub fn symlink_at(target: &CStr, dir: impl AsFd, name: &CStr) -> io::Result<()> {
    Ok(rustix::fs::symlinkat(target, dir, name)?)
}

/// Replaces the file `path` with `bytes` without ever writing through a link, for files in directories that
/// sandboxed commands may write (the user's cache directory, a checkout's registration in `.git/worktrees`),
/// where a command could plant a symlink to make the agent overwrite a file of its choosing. The directory
/// is opened refusing a link as its last component; a temp file beside the target is made new (`O_EXCL`
/// and `O_NOFOLLOW`: a link planted under that name fails the create instead of being followed; a leftover
/// of an earlier writer is unlinked first, which removes a link itself, never its target), written, and
/// renamed over the target (which replaces a link there, not what it points to). Returns an error where
/// any step fails, the temp file removed.
pub fn replace_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    let invalid = || io::Error::new(io::ErrorKind::InvalidInput, "not a file name");
    let dir = path.parent().ok_or_else(invalid)?;
    let name = path.file_name().ok_or_else(invalid)?;
    let dir = open_dir_nofollow(if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    })?;
    // Unique per process and call: two threads replacing the same file never share a temp file.
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut temp = name.to_os_string();
    temp.push(format!(".{}-{call}.tmp", std::process::id()));
    let (name, temp) = (cstring(name)?, cstring(&temp)?);
    match unlink_at(&dir, &temp) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let flags = OpenFlags::WRONLY | OpenFlags::CREATE | OpenFlags::EXCL;
    let written = open_at(&dir, &temp, flags, 0o666).and_then(|fd| {
        std::fs::File::from(fd).write_all(bytes)?;
        rename_at(&dir, &temp, &name)
    });
    if written.is_err() {
        let _ = unlink_at(&dir, &temp);
    }
    written
}

/// The bytes of the regular file `path`, at most `limit` of them, for files in directories that sandboxed
/// commands may write: a link there is not followed (`O_NOFOLLOW`), a FIFO does not block the open
/// (`O_NONBLOCK`) and is refused with anything else that is not a regular file, and a longer file is an
/// error rather than read whole.
pub fn read_regular(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    read_nonblocking(path, OpenFlags::NOFOLLOW, limit, limit)
}

/// The first `max` bytes of `path` (or fewer), read where a plain reader would follow a link: a FIFO does not
/// block the open (`O_NONBLOCK`) and is refused with anything else that is not a regular file. For the
/// one-line files git reads beside a work tree (a `.git` file, a `commondir`).
pub fn read_head(path: &Path, max: u64) -> io::Result<Vec<u8>> {
    read_nonblocking(path, OpenFlags::empty(), u64::MAX, max)
}

/// Opens `path` with `O_NONBLOCK` (and `extra`), refuses anything but a regular file of at most `size_limit`
/// bytes, and reads at most `max` bytes of it.
fn read_nonblocking(
    path: &Path,
    extra: OpenFlags,
    size_limit: u64,
    max: u64,
) -> io::Result<Vec<u8>> {
    use std::io::Read;
    let flags = OpenFlags::RDONLY | OpenFlags::NONBLOCK | OpenFlags::CLOEXEC | extra;
    let file = std::fs::File::from(rustix::fs::open(path, flags, Mode::empty())?);
    small_regular(&file.metadata()?, size_limit)?;
    let mut bytes = Vec::new();
    file.take(max).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Checks that a reader that opens `path` the plain way (following a link, blocking) cannot hang or read
/// without end: it is missing (a dangling link, or a parent that is a file, included), or a regular file of
/// at most `limit` bytes, or a link to one. For files other programs read (gix, the `ignore` crate) in places
/// commands can write.
pub fn check_plain_read(path: &Path, limit: u64) -> io::Result<()> {
    let meta = match std::fs::symlink_metadata(path) {
        Err(err) if is_absent(&err) => return Ok(()),
        other => other?,
    };
    let meta = if meta.file_type().is_symlink() {
        match std::fs::metadata(path) {
            Err(err) if is_absent(&err) => return Ok(()),
            other => other?,
        }
    } else {
        meta
    };
    small_regular(&meta, limit)
}

/// Whether `err` says there is no such file: it is missing, or a directory on its path is a file.
pub fn is_absent(err: &io::Error) -> bool {
    matches!(
        err.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
    )
}

/// Ok for a regular file of at most `limit` bytes; the error says what else it is.
pub fn small_regular(meta: &std::fs::Metadata, limit: u64) -> io::Result<()> {
    if !meta.is_file() {
        return Err(not_regular(meta.file_type()));
    }
    if meta.len() > limit {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("larger than {limit} bytes"),
        ));
    }
    Ok(())
}

/// The error for a file that had to be a regular one: says what it is instead (`a FIFO`).
pub fn not_regular(kind: std::fs::FileType) -> io::Error {
    use std::os::unix::fs::FileTypeExt;
    let what = if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_char_device() || kind.is_block_device() {
        "a device"
    } else if kind.is_dir() {
        "a directory"
    } else if kind.is_symlink() {
        "a symbolic link"
    } else {
        "not a file"
    };
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{what}, not a regular file"),
    )
}

/// `s` as the kernel takes a name or path; a NUL byte in it is an error.
pub fn cstring(s: &OsStr) -> io::Result<CString> {
    CString::new(s.as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))
}

/// Sets the permission bits of an open file exactly (no umask).
pub fn set_mode(file: impl AsFd, bits: u32) -> io::Result<()> {
    Ok(rustix::fs::fchmod(file, mode(bits))?)
}

/// Flushes a file or directory (a directory's entries: what makes a rename in it durable).
pub fn sync(fd: impl AsFd) -> io::Result<()> {
    Ok(rustix::fs::fsync(fd)?)
}

/// The kind and mode of `name` in `dir`, not following a link; `None` when there is no such entry.
pub fn stat_at(dir: impl AsFd, name: &CStr) -> io::Result<Option<EntryStat>> {
    match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => {
            let kind = match FileType::from_raw_mode(st.st_mode as RawMode) {
                FileType::Directory => Kind::Dir,
                FileType::Symlink => Kind::Symlink,
                FileType::RegularFile => Kind::File,
                _ => Kind::Other,
            };
            // `st_mode` is a u32 on Linux and a u16 on macOS: the cast is needed there only.
            #[allow(clippy::unnecessary_cast)]
            let mode = st.st_mode as u32 & 0o7777;
            Ok(Some(EntryStat { kind, mode }))
        }
        Err(rustix::io::Errno::NOENT) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// The target of the symbolic link `name` in `dir`, as bytes.
pub fn read_link_at(dir: impl AsFd, name: &CStr) -> io::Result<Vec<u8>> {
    Ok(rustix::fs::readlinkat(dir, name, Vec::new())?.into_bytes())
}

/// The names in the open directory `dir`, `.` and `..` included.
pub fn names(dir: impl AsFd) -> io::Result<Vec<CString>> {
    let mut names = Vec::new();
    for entry in rustix::fs::Dir::read_from(dir)? {
        names.push(entry?.file_name().to_owned());
    }
    Ok(names)
}

/// How [`lock`] locks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lock {
    /// Exclusive, waiting for other holders.
    Exclusive,
    /// Exclusive, or `WouldBlock` at once.
    TryExclusive,
    /// Shared, or `WouldBlock` at once.
    TryShared,
}

/// `flock(2)` on an open file: held until every descriptor of that open file is closed.
pub fn lock(file: impl AsFd, how: Lock) -> io::Result<()> {
    use rustix::fs::FlockOperation as Op;
    let op = match how {
        Lock::Exclusive => Op::LockExclusive,
        Lock::TryExclusive => Op::NonBlockingLockExclusive,
        Lock::TryShared => Op::NonBlockingLockShared,
    };
    Ok(rustix::fs::flock(file, op)?)
}

/// Sets the access and modification times of `path` (following links) to `seconds` since the epoch (the
/// change scan's tests age a folder so).
#[cfg(test)]
pub fn set_times(path: &Path, seconds: i64) -> io::Result<()> {
    let at = rustix::fs::Timespec {
        tv_sec: seconds,
        tv_nsec: 0,
    };
    let times = rustix::fs::Timestamps {
        last_access: at,
        last_modification: at,
    };
    Ok(rustix::fs::utimensat(
        rustix::fs::CWD,
        path,
        &times,
        AtFlags::empty(),
    )?)
}

/// Makes a new directory, mode 0700, named `template` with its trailing `XXXXXX` replaced by six random
/// letters and digits that no entry there has: what `mkdtemp(3)` does (`mkdir` never follows a link left
/// under the name, it fails with `EEXIST` and the next name is tried).
pub fn make_temp_dir(template: &Path) -> io::Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    const LETTERS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let stem = template
        .as_os_str()
        .as_bytes()
        .strip_suffix(b"XXXXXX")
        .ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
    for _ in 0..100 {
        let mut draw = super::random::random_u64()?;
        let mut name = stem.to_vec();
        for _ in 0..6 {
            name.push(LETTERS[(draw % LETTERS.len() as u64) as usize]);
            draw /= LETTERS.len() as u64;
        }
        let path = PathBuf::from(OsStr::from_bytes(&name));
        match std::fs::DirBuilder::new().mode(0o700).create(&path) {
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => continue,
            made => return made.map(|()| path),
        }
    }
    Err(io::Error::from(io::ErrorKind::AlreadyExists))
}

fn mode(bits: u32) -> Mode {
    Mode::from_raw_mode(bits as RawMode)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> tempfile::TempDir {
        tempfile::tempdir().unwrap()
    }

    #[test]
    fn temp_dirs_are_new_and_private() {
        use std::os::unix::fs::PermissionsExt;
        let base = dir();
        let template = base.path().join(".scratch-XXXXXX");
        let made: Vec<PathBuf> = (0..20).map(|_| make_temp_dir(&template).unwrap()).collect();
        let names: std::collections::HashSet<_> = made.iter().collect();
        assert_eq!(names.len(), 20, "each call makes a directory of its own");
        for path in &made {
            let name = path.file_name().unwrap().to_str().unwrap();
            let suffix = name.strip_prefix(".scratch-").unwrap();
            assert_eq!(suffix.len(), 6, "{name}");
            assert!(suffix.bytes().all(|b| b.is_ascii_alphanumeric()), "{name}");
            let meta = std::fs::symlink_metadata(path).unwrap();
            assert!(meta.is_dir());
            assert_eq!(meta.permissions().mode() & 0o077, 0, "{name} is private");
        }
        assert_eq!(
            make_temp_dir(&base.path().join("no-placeholder"))
                .unwrap_err()
                .kind(),
            io::ErrorKind::InvalidInput
        );
    }

    /// A file outside the directory written, which no write there may reach.
    fn outside(base: &Path) -> PathBuf {
        let outside = base.join("outside.txt");
        std::fs::write(&outside, "keep\n").unwrap();
        outside
    }

    #[test]
    fn a_replaced_file_is_never_written_through_a_link() {
        let base = dir();
        let cache = base.path().join("cache");
        std::fs::create_dir(&cache).unwrap();
        let outside = outside(base.path());
        let target = cache.join("state.json");
        // Links planted under every temp name the writer may use next, and one as the target itself.
        let temps: Vec<PathBuf> = (0..1000)
            .map(|n| cache.join(format!("state.json.{}-{n}.tmp", std::process::id())))
            .collect();
        for temp in &temps {
            std::os::unix::fs::symlink(&outside, temp).unwrap();
        }
        std::os::unix::fs::symlink(&outside, &target).unwrap();
        replace_file(&target, b"{\"new\":1}").unwrap();
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep\n");
        assert!(std::fs::symlink_metadata(&target).unwrap().is_file());
        assert_eq!(std::fs::read(&target).unwrap(), b"{\"new\":1}");
        let left = temps
            .iter()
            .filter(|t| std::fs::symlink_metadata(t).is_ok())
            .count();
        assert_eq!(left, temps.len() - 1, "only the temp name used is gone");
        // The directory itself a link: refused, nothing written where it points.
        let elsewhere = base.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        let linked = base.path().join("linked");
        std::os::unix::fs::symlink(&elsewhere, &linked).unwrap();
        assert!(replace_file(&linked.join("state.json"), b"x").is_err());
        assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
    }

    #[test]
    fn only_a_small_regular_file_is_read() {
        let base = dir();
        let outside = outside(base.path());
        let file = base.path().join("small.json");
        std::fs::write(&file, "{}").unwrap();
        assert_eq!(read_regular(&file, 16).unwrap(), b"{}");
        assert!(read_regular(&file, 1).is_err(), "over the limit");
        let link = base.path().join("link.json");
        std::os::unix::fs::symlink(&outside, &link).unwrap();
        assert!(read_regular(&link, 16).is_err(), "a link is not followed");
        // A FIFO with no writer: refused at once instead of blocking the open.
        let fifo = base.path().join("fifo.json");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        assert!(read_regular(&fifo, 16).is_err());
    }

    #[test]
    fn a_plain_read_is_allowed_only_where_it_cannot_block_or_run_on() {
        let base = dir();
        let at = |name: &str| base.path().join(name);
        let link =
            |target: &Path, name: &str| std::os::unix::fs::symlink(target, at(name)).unwrap();
        std::fs::write(at("rules"), "*.o\n").unwrap();
        let made = std::process::Command::new("mkfifo")
            .arg(at("fifo"))
            .status()
            .unwrap();
        assert!(made.success());
        link(&at("rules"), "to-rules");
        link(&at("fifo"), "to-fifo");
        link(Path::new("/dev/zero"), "to-zero");
        link(&at("nowhere"), "dangling");
        for fine in ["missing", "rules", "to-rules", "dangling"] {
            assert!(check_plain_read(&at(fine), 16).is_ok(), "{fine}");
        }
        for refused in ["fifo", "to-fifo", "to-zero"] {
            let err = check_plain_read(&at(refused), 16).unwrap_err();
            assert!(
                err.to_string().ends_with(", not a regular file"),
                "{refused}: {err}"
            );
        }
        assert!(check_plain_read(&at("rules"), 3).is_err(), "over the limit");
        assert!(check_plain_read(base.path(), 16).is_err(), "a directory");
    }
}
