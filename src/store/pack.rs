//! A session's new git objects written as one pack (and its index) per ref update, not one loose file each.
//!
//! Every loose object is a new inode, and its fan-out directory often another: a session made about 45 of
//! its 80 new inodes that way. On an ext4 without a journal, creating an inode right after many files were
//! deleted (a test suite, a big checkout) walks over every recently deleted one, which tripled a session's
//! kernel time (issue 29, docs/performance.md "Kernel time after heavy file-system work"). So the store's
//! repository keeps new objects in memory (gix's object memory) and this module writes them out as
//! `pack-<checksum>.pack` and `.idx`: two inodes, whatever the number of objects.
//!
//! When objects must reach the disk: before a ref can point at them, before a git process or another
//! repository handle may read them, and when the handle is dropped; the store calls [`persist()`] at those
//! doors (`edit_ref`, its git commands, `open_checkout`, `Store`'s `Drop` and `Clone`). The pack is written
//! under a temporary name and renamed, the pack before its index (git and gix find a pack by its index), so
//! a crash leaves either a complete pack or a temporary file, never a ref to a missing object. Packs are
//! named by their content, so concurrent sessions never write the same file name with different content.
//!
//! Once the repository holds half of `gc.autoPackLimit` packs, sessions write loose objects instead, so
//! they never bring git's whole-repository repack closer ([`too_many_packs`]).
//!
//! `GIT_AGENT_LOOSE_OBJECTS=1` writes loose objects as before (an A/B switch for `scripts/bench-inodes.py`).

use std::io::Write;
use std::path::Path;

use gix::hash::Kind as HashKind;
use gix::objs::Kind;
use gix::zlib::stream::deflate::{Compress, FlushCompress};
use gix::zlib::{Compression, Status};
use gix::ObjectId;

use super::deflate::{SmallDeflate, SMALL_MAX};

/// The error returned by [`persist()`]: the pack could not be written in `dir`.
#[derive(Debug, thiserror::Error)]
#[error("could not write a pack in {}: {source}", .dir.display())]
pub struct PersistError {
    pub dir: std::path::PathBuf,
    #[source]
    pub source: std::io::Error,
}

/// The largest file streamed into memory for a pack; a larger one is written loose as it is read, so a
/// session's peak memory does not grow with the size of the files it commits.
pub(super) const IN_MEMORY_MAX: u64 = 1 << 20;

/// The switch back to one loose file per object.
pub const LOOSE_ENV: &str = "GIT_AGENT_LOOSE_OBJECTS";

/// How many pack indexes a repository handle can hold at once: gix fixes it when the handle opens (by
/// default 1.1 times the packs then on disk, at least 32) and fails every lookup once more packs exist, which
/// eight concurrent sessions writing a few packs each reached. A slot is a few dozen bytes.
const SLOTS: gix::odb::store::init::Slots = gix::odb::store::init::Slots::AsNeededByDiskState {
    multiplier: 2.0,
    minimum: 1024,
};

/// gix's open options (for both trust levels, as `gix::discover` has them) with room for the packs
/// sessions add while the handle is open.
pub(super) fn discover_options() -> gix::sec::trust::Mapping<gix::open::Options> {
    let defaults = gix::sec::trust::Mapping::<gix::open::Options>::default();
    gix::sec::trust::Mapping {
        full: defaults.full.object_store_slots(SLOTS),
        reduced: defaults.reduced.object_store_slots(SLOTS),
    }
}

/// [`discover_options()`] for a repository opened by its path.
pub(super) fn open_options() -> gix::open::Options {
    gix::open::Options::default().object_store_slots(SLOTS)
}

/// Makes `repo` keep the objects written through it in memory until [`persist()`], unless
/// [`LOOSE_ENV`] asks for loose objects. Only SHA-1 repositories: the pack writer below hashes with SHA-1.
pub(super) fn enable(repo: &mut gix::Repository) {
    let loose = std::env::var_os(LOOSE_ENV).is_some_and(|v| !v.is_empty() && v != "0");
    if !loose && repo.object_hash() == HashKind::Sha1 && !too_many_packs(repo) {
        repo.objects.enable_object_memory();
    }
}

/// Whether the repository already holds half of `gc.autoPackLimit` packs (git's default: 50). Past that
/// limit the user's next `git commit` repacks the whole repository (`git maintenance run --auto`), and a
/// session adds several small packs: so once half the limit is reached, sessions write loose objects as git
/// does, and the pack count they leave never brings that repack closer. Counting is one directory read.
fn too_many_packs(repo: &gix::Repository) -> bool {
    let limit = repo
        .config_snapshot()
        .integer("gc.autoPackLimit")
        .filter(|limit| *limit > 0)
        .unwrap_or(50);
    let dir = repo.objects.store_ref().path().join("pack");
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    let packs = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().ends_with(".pack"))
        .count();
    packs as i64 >= limit / 2
}

/// Writes the objects `repo` holds in memory as one pack in its object store; nothing when it holds none.
/// On failure the objects stay in memory, so nothing written through `repo` is lost.
pub(super) fn persist(repo: &gix::Repository) -> Result<(), PersistError> {
    let Some(objects) = repo.objects.reset_object_memory() else {
        return Ok(());
    };
    if objects.is_empty() {
        return Ok(());
    }
    let dir = repo.objects.store_ref().path().join("pack");
    let mut sorted: Vec<(&ObjectId, &(Kind, Vec<u8>))> = objects.iter().collect();
    sorted.sort_unstable_by_key(|(id, _)| **id);
    write_pack(&dir, &sorted, shared_perm(repo)).map_err(|source| {
        // Back into memory (the proxy's writes take `&self`), so a later door can try again.
        for (_, (kind, data)) in &sorted {
            let _ = gix::objs::Write::write_buf(&repo.objects, *kind, data);
        }
        PersistError {
            dir: dir.clone(),
            source,
        }
    })
}

/// The pack's type number of an object kind (git's `OBJ_COMMIT` ... `OBJ_TAG`).
fn type_number(kind: Kind) -> u8 {
    match kind {
        Kind::Commit => 1,
        Kind::Tree => 2,
        Kind::Blob => 3,
        Kind::Tag => 4,
    }
}

/// An entry's header: the type and the inflated size, 4 bits then 7 bits a byte, low bits first.
fn entry_header(kind: Kind, size: usize, out: &mut Vec<u8>) {
    let mut rest = size as u64;
    let mut byte = (type_number(kind) << 4) | (rest & 0x0f) as u8;
    rest >>= 4;
    while rest != 0 {
        out.push(byte | 0x80);
        byte = (rest & 0x7f) as u8;
        rest >>= 7;
    }
    out.push(byte);
}

/// Deflates `data` onto the end of `out` as one zlib stream, with a compressor the caller reuses: zlib's
/// state is about 300 KB, and making one per object zeroed (and, past the allocator's mmap threshold, mapped
/// and faulted in) that much for every object written: a third of a small session's instructions.
fn deflate_into(compressor: &mut Compress, data: &[u8], out: &mut Vec<u8>) -> std::io::Result<()> {
    compressor.reset();
    let mut input = data;
    let mut chunk = [0u8; 16 * 1024];
    loop {
        let (read_before, written_before) = (compressor.total_in(), compressor.total_out());
        let status = compressor
            .compress(input, &mut chunk, FlushCompress::Finish)
            .map_err(std::io::Error::other)?;
        let read = (compressor.total_in() - read_before) as usize;
        let written = (compressor.total_out() - written_before) as usize;
        out.extend_from_slice(&chunk[..written]);
        input = &input[read..];
        match status {
            Status::StreamEnd => return Ok(()),
            Status::Ok | Status::BufError if read > 0 || written > 0 => {}
            Status::Ok | Status::BufError => {
                return Err(std::io::Error::other(
                    "zlib made no progress deflating an object",
                ))
            }
        }
    }
}

fn sha1(parts: &[&[u8]]) -> std::io::Result<ObjectId> {
    let mut hasher = gix::hash::hasher(HashKind::Sha1);
    for part in parts {
        hasher.update(part);
    }
    hasher
        .try_finalize()
        .map_err(|e| std::io::Error::other(e.to_string()))
}

/// Writes `objects` (sorted by id) as a version-2 pack of whole objects and its version-2 index into `dir`.
fn write_pack(
    dir: &Path,
    objects: &[(&ObjectId, &(Kind, Vec<u8>))],
    shared: i32,
) -> std::io::Result<()> {
    let count = u32::try_from(objects.len()).map_err(std::io::Error::other)?;
    let mut pack = Vec::new();
    pack.extend_from_slice(b"PACK");
    pack.extend_from_slice(&2u32.to_be_bytes());
    pack.extend_from_slice(&count.to_be_bytes());
    let mut offsets = Vec::with_capacity(objects.len());
    let mut crcs = Vec::with_capacity(objects.len());
    let mut small = SmallDeflate::new();
    // zlib's state (about 260 KB, zeroed) only for a pack that has an object too big for the small encoder.
    let mut zlib = None;
    for (_, (kind, data)) in objects {
        let start = pack.len();
        offsets.push(start as u64);
        entry_header(*kind, data.len(), &mut pack);
        if data.len() <= SMALL_MAX {
            small.compress_into(data, &mut pack);
        } else {
            let compressor = zlib.get_or_insert_with(|| Compress::new(Compression::default()));
            deflate_into(compressor, data, &mut pack)?;
        }
        crcs.push(crc32fast::hash(&pack[start..]));
    }
    let checksum = sha1(&[&pack])?;
    pack.extend_from_slice(checksum.as_bytes());
    let index = index_bytes(objects, &offsets, &crcs, checksum)?;

    let name = format!("pack-{checksum}");
    let pack_path = dir.join(format!("{name}.pack"));
    let index_path = dir.join(format!("{name}.idx"));
    if index_path.exists() {
        // The same objects were written as a pack already (a clone of the handle, a retry).
        return Ok(());
    }
    std::fs::create_dir_all(dir)?;
    install(dir, &pack, &pack_path, shared)?;
    install(dir, &index, &index_path, shared)
}

/// The version-2 index of a pack: fan-out, ids, CRCs, offsets (large ones in a second table), checksums.
fn index_bytes(
    objects: &[(&ObjectId, &(Kind, Vec<u8>))],
    offsets: &[u64],
    crcs: &[u32],
    pack_checksum: ObjectId,
) -> std::io::Result<Vec<u8>> {
    let mut index = Vec::with_capacity(8 + 1024 + objects.len() * 28 + 40);
    index.extend_from_slice(&[0xff, b't', b'O', b'c']);
    index.extend_from_slice(&2u32.to_be_bytes());
    let mut fanout = [0u32; 256];
    for (id, _) in objects {
        fanout[usize::from(id.as_bytes()[0])] += 1;
    }
    let mut total = 0u32;
    for slot in fanout {
        total += slot;
        index.extend_from_slice(&total.to_be_bytes());
    }
    for (id, _) in objects {
        index.extend_from_slice(id.as_bytes());
    }
    for crc in crcs {
        index.extend_from_slice(&crc.to_be_bytes());
    }
    let mut large = Vec::new();
    for offset in offsets {
        match u32::try_from(*offset) {
            Ok(small) if small < 0x8000_0000 => index.extend_from_slice(&small.to_be_bytes()),
            _ => {
                let slot = u32::try_from(large.len() / 8).map_err(std::io::Error::other)?;
                index.extend_from_slice(&(slot | 0x8000_0000).to_be_bytes());
                large.extend_from_slice(&offset.to_be_bytes());
            }
        }
    }
    index.extend_from_slice(&large);
    index.extend_from_slice(pack_checksum.as_bytes());
    let own = sha1(&[&index])?;
    index.extend_from_slice(own.as_bytes());
    Ok(index)
}

/// Writes `bytes` to a temporary file in `dir` and renames it to `path`: the one new inode, complete
/// before it has its name. Read-only, as git leaves its packs, and readable by the group or everybody when
/// `core.sharedRepository` says so (`shared`, from [`shared_perm()`]).
fn install(dir: &Path, bytes: &[u8], path: &Path, shared: i32) -> std::io::Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let temp = dir.join(format!(
        "tmp_pack_agent_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o444)
        .open(&temp)
        .and_then(|mut file| {
            if shared != PERM_UMASK {
                // The umask applied to 0444 at creation; git then widens (or, for 0xxx, sets) the bits.
                let created = file.metadata()?.permissions().mode();
                let mode = calc_shared_perm(created, shared);
                file.set_permissions(std::fs::Permissions::from_mode(mode))?;
            }
            file.write_all(bytes)
        })
        .and_then(|()| std::fs::rename(&temp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written
}

/// `core.sharedRepository` unset, `umask` or false: files keep the mode the umask gave them.
const PERM_UMASK: i32 = 0;
/// `group`, true or 1.
const PERM_GROUP: i32 = 0o660;
/// `all`, `world`, `everybody` or 2.
const PERM_EVERYBODY: i32 = 0o664;

/// The repository's `core.sharedRepository` as git's `git_config_perm` reads it: [`PERM_UMASK`],
/// [`PERM_GROUP`], [`PERM_EVERYBODY`], or minus an exact mode (`0640`). A value git would refuse (the owner
/// cannot read and write) counts as unset: git itself stops on it before it would read these packs' mode.
fn shared_perm(repo: &gix::Repository) -> i32 {
    let config = repo.config_snapshot();
    match config.string("core.sharedRepository") {
        Some(value) => parse_shared_perm(&value.to_string()),
        // A key without a value (`sharedRepository` alone) is true.
        None if config.boolean("core.sharedRepository") == Some(true) => PERM_GROUP,
        None => PERM_UMASK,
    }
}

fn parse_shared_perm(value: &str) -> i32 {
    match value.to_ascii_lowercase().as_str() {
        "" | "group" | "true" | "yes" | "on" => return PERM_GROUP,
        "umask" | "false" | "no" | "off" => return PERM_UMASK,
        "all" | "world" | "everybody" => return PERM_EVERYBODY,
        _ => {}
    }
    match i32::from_str_radix(value, 8) {
        Ok(0) => PERM_UMASK,
        Ok(1) => PERM_GROUP,
        Ok(2) => PERM_EVERYBODY,
        Ok(mode) if mode & 0o600 == 0o600 => -(mode & 0o666),
        Ok(_) => PERM_UMASK,
        // Not octal: git reads it as a boolean (an integer other than 0 is true).
        _ => match value.parse::<i64>() {
            Ok(0) => PERM_UMASK,
            Ok(_) => PERM_GROUP,
            Err(_) => PERM_UMASK,
        },
    }
}

/// git's `calc_shared_perm`: the mode of a file created with `mode` in a shared repository. A read-only file
/// (a pack) gets no write bits; an exact mode (`shared < 0`) replaces the permission bits, a named one adds.
fn calc_shared_perm(mode: u32, shared: i32) -> u32 {
    let mut tweak = shared.unsigned_abs();
    if mode & 0o200 == 0 {
        tweak &= !0o222;
    }
    if mode & 0o100 != 0 {
        tweak |= (tweak & 0o444) >> 2;
    }
    if shared < 0 {
        (mode & !0o777) | tweak
    } else {
        mode | tweak
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_headers_carry_type_and_size_low_bits_first() {
        let mut out = Vec::new();
        entry_header(Kind::Blob, 10, &mut out);
        assert_eq!(out, [0x3a]);
        out.clear();
        entry_header(Kind::Commit, 300, &mut out);
        // 300 = 0b1_0010_1100: low 4 bits 1100 with the type, then 0b10010.
        assert_eq!(out, [0x80 | 0x10 | 0x0c, 0x12]);
    }

    #[test]
    fn shared_repository_values_read_as_git_reads_them() {
        assert_eq!(parse_shared_perm("group"), PERM_GROUP);
        assert_eq!(parse_shared_perm("1"), PERM_GROUP);
        assert_eq!(parse_shared_perm("true"), PERM_GROUP);
        assert_eq!(parse_shared_perm("2"), PERM_EVERYBODY);
        assert_eq!(parse_shared_perm("all"), PERM_EVERYBODY);
        assert_eq!(parse_shared_perm("umask"), PERM_UMASK);
        assert_eq!(parse_shared_perm("0"), PERM_UMASK);
        assert_eq!(parse_shared_perm("0640"), -0o640);
        assert_eq!(parse_shared_perm("0755"), -0o644);
        // The owner must read and write: git refuses it, and this leaves the mode alone.
        assert_eq!(parse_shared_perm("0440"), PERM_UMASK);
    }

    #[test]
    fn shared_packs_stay_read_only_with_the_group_or_everybody_reading() {
        // A 0444 pack created under umask 077 is 0400.
        assert_eq!(calc_shared_perm(0o100400, PERM_GROUP), 0o100440);
        assert_eq!(calc_shared_perm(0o100400, PERM_EVERYBODY), 0o100444);
        assert_eq!(calc_shared_perm(0o100444, -0o640), 0o100440);
        assert_eq!(calc_shared_perm(0o100444, -0o600), 0o100400);
        assert_eq!(calc_shared_perm(0o100400, PERM_UMASK), 0o100400);
    }

    #[test]
    fn one_reused_compressor_deflates_each_object_as_its_own_stream() {
        // Objects of several sizes, one incompressible and larger than the 16 KB output chunk, deflated one
        // after another by the same compressor: each must inflate back on its own.
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let noise: Vec<u8> = (0..70_000)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect();
        let objects: [&[u8]; 4] = [b"", b"hello\n", &noise, &[b'a'; 100_000]];
        let mut compressor = Compress::new(Compression::default());
        for data in objects {
            let mut out = Vec::new();
            deflate_into(&mut compressor, data, &mut out).expect("deflates");
            let mut inflated = vec![0u8; data.len() + 16];
            let (status, read, written) = gix::zlib::Inflate::default()
                .once(&out, &mut inflated)
                .expect("inflates");
            assert_eq!(status, Status::StreamEnd);
            assert_eq!(read, out.len());
            assert_eq!(&inflated[..written], data);
        }
    }
}
