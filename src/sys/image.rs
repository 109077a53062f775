//! The executable's own image in memory: giving back the pages of its relocation table once the loader is
//! done with them.
//!
//! A position-independent executable (what `cargo build --release` makes) carries a relocation for every
//! pointer in its read-only data: 32,000 of them, 777 KB of `.rela.dyn` in git-agent's plain build. The loader
//! reads the whole table once, before `main` (the relative relocations and the data symbols' are applied at
//! load, whatever the binding mode), and nothing reads it again, yet its pages stay mapped and count in the
//! process's resident set for the rest of the session: 6% of a small session's peak (issue 29). The tuned
//! release binary is linked at a fixed address and has almost no such table.
//!
//! Where the table is comes from the executable's file (its ELF program headers and dynamic section, read
//! through `/proc/self/exe`) and where that part of the file is mapped from `/proc/self/maps`: plain reads,
//! so the one `unsafe` here is the `madvise` itself.

/// Unmaps the resident pages of the executable's relocation table (`DT_RELA`): the whole pages inside it
/// that lie in a read-only, private mapping of the executable's file, so that a later read, if there were one,
/// would fault the same bytes back in from the file. Returns the bytes given back. Call at the start of
/// `main`, once the loader has run; a no-op where the executable is not a little-endian ELF64 file with such
/// a table, and on a platform layer without Linux's.
pub fn release_relocations() -> usize {
    #[cfg(all(target_os = "linux", not(git_agent_portable)))]
    return linux::releasable().map_or(0, |pages| {
        if linux::dont_need(&pages) {
            pages.len()
        } else {
            0
        }
    });
    #[cfg(not(all(target_os = "linux", not(git_agent_portable))))]
    0
}

#[cfg(all(target_os = "linux", not(git_agent_portable)))]
mod linux {
    use std::fs::File;
    use std::ops::Range;
    use std::os::unix::fs::FileExt;

    const PT_LOAD: u32 = 1;
    const PT_DYNAMIC: u32 = 2;
    const DT_NULL: u64 = 0;
    const DT_RELA: u64 = 7;
    const DT_RELASZ: u64 = 8;
    /// The most program headers and dynamic entries read (a linker writes a dozen and a few dozen).
    const MAX_HEADERS: usize = 64;
    const MAX_DYNAMIC: usize = 512;

    /// A loadable segment or the dynamic section: where it is in the file and at which virtual address.
    struct Segment {
        kind: u32,
        offset: u64,
        vaddr: u64,
        size: u64,
    }

    fn u16_at(bytes: &[u8], at: usize) -> Option<u16> {
        Some(u16::from_le_bytes(bytes.get(at..at + 2)?.try_into().ok()?))
    }

    fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
        Some(u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
    }

    fn u64_at(bytes: &[u8], at: usize) -> Option<u64> {
        Some(u64::from_le_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
    }

    fn read(file: &File, offset: u64, len: usize) -> Option<Vec<u8>> {
        let mut bytes = vec![0; len];
        file.read_exact_at(&mut bytes, offset).ok()?;
        Some(bytes)
    }

    /// The program headers of an ELF64 little-endian file (the executable's own).
    fn segments(file: &File) -> Option<Vec<Segment>> {
        let header = read(file, 0, 64)?;
        if header.get(..6)? != b"\x7fELF\x02\x01" {
            return None;
        }
        let (at, size) = (u64_at(&header, 0x20)?, usize::from(u16_at(&header, 0x36)?));
        let count = usize::from(u16_at(&header, 0x38)?).min(MAX_HEADERS);
        if size < 56 {
            return None;
        }
        let table = read(file, at, size * count)?;
        (0..count)
            .map(|i| {
                let h = &table[i * size..];
                Some(Segment {
                    kind: u32_at(h, 0)?,
                    offset: u64_at(h, 8)?,
                    vaddr: u64_at(h, 16)?,
                    size: u64_at(h, 32)?,
                })
            })
            .collect()
    }

    /// The relocation table's place in the file: `DT_RELA` (a virtual address) turned into a file offset
    /// through the loadable segment that holds it, and `DT_RELASZ` bytes long.
    fn table_in_file(file: &File, segments: &[Segment]) -> Option<Range<u64>> {
        let dynamic = segments.iter().find(|s| s.kind == PT_DYNAMIC)?;
        let len = usize::try_from(dynamic.size).ok()?.min(16 * MAX_DYNAMIC);
        let entries = read(file, dynamic.offset, len - len % 16)?;
        let (mut rela, mut size) = (None, None);
        for entry in entries.chunks_exact(16) {
            match u64_at(entry, 0)? {
                DT_NULL => break,
                DT_RELA => rela = u64_at(entry, 8),
                DT_RELASZ => size = u64_at(entry, 8),
                _ => {}
            }
        }
        let rela = rela?;
        let end = rela.checked_add(size?)?;
        let segment = segments.iter().find(|s| {
            s.kind == PT_LOAD
                && s.vaddr <= rela
                && s.vaddr.checked_add(s.size).is_some_and(|e| end <= e)
        })?;
        let start = rela - segment.vaddr + segment.offset;
        Some(start..start + (end - rela))
    }

    /// The whole pages of `table` (offsets in `exe`) inside one read-only private mapping of `exe` in
    /// `maps` (the text of `/proc/self/maps`), as addresses.
    pub(super) fn pages_in(
        maps: &str,
        exe: &str,
        table: &Range<u64>,
        page: u64,
    ) -> Option<Range<usize>> {
        maps.lines().find_map(|line| {
            let mut fields = line.split_whitespace();
            let (range, perms, offset) = (fields.next()?, fields.next()?, fields.next()?);
            let path = fields.nth(2)?;
            if path != exe || perms != "r--p" {
                return None;
            }
            let (start, end) = range.split_once('-')?;
            let start = u64::from_str_radix(start, 16).ok()?;
            let end = u64::from_str_radix(end, 16).ok()?;
            let offset = u64::from_str_radix(offset, 16).ok()?;
            if table.start < offset || table.end > offset + (end - start) {
                return None;
            }
            let first = (start + table.start - offset).next_multiple_of(page);
            let last = start + table.end - offset;
            let last = last - last % page;
            if first >= last {
                return None;
            }
            Some(usize::try_from(first).ok()?..usize::try_from(last).ok()?)
        })
    }

    /// The whole pages of the executable's relocation table, as mapped in this process.
    pub(super) fn releasable() -> Option<Range<usize>> {
        let exe = std::fs::read_link("/proc/self/exe").ok()?;
        let file = File::open("/proc/self/exe").ok()?;
        let table = table_in_file(&file, &segments(&file)?)?;
        let page = u64::try_from(rustix::param::page_size()).ok()?;
        // A table under a page holds no whole page (a binary linked at a fixed address): no need for the maps.
        if table.end - table.start < page {
            return None;
        }
        let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
        pages_in(&maps, exe.to_str()?, &table, page)
    }

    /// `madvise(MADV_DONTNEED)` of `pages`; true if done.
    pub(super) fn dont_need(pages: &Range<usize>) -> bool {
        // SAFETY: `releasable()` found these whole pages in a read-only, private, file-backed mapping of the
        // executable that nothing writes: dropping this process's mappings of them loses nothing, and a later
        // read faults the same bytes back in from the file.
        unsafe {
            libc::madvise(
                pages.start as *mut libc::c_void,
                pages.len(),
                libc::MADV_DONTNEED,
            ) == 0
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;
        use std::io::{Read, Seek, SeekFrom};

        /// Whether the page at `address` is mapped in this process (bit 63 of its `/proc/self/pagemap` entry).
        fn present(address: usize, page: usize) -> bool {
            let mut map = File::open("/proc/self/pagemap").unwrap();
            map.seek(SeekFrom::Start((address / page * 8) as u64))
                .unwrap();
            let mut entry = [0u8; 8];
            map.read_exact(&mut entry).unwrap();
            u64::from_le_bytes(entry) >> 63 == 1
        }

        /// The bytes at `range` of this process's memory, read through `/proc/self/mem` (which faults them in).
        fn memory(range: &Range<usize>) -> Vec<u8> {
            let mut bytes = vec![0; range.len()];
            File::open("/proc/self/mem")
                .unwrap()
                .read_exact_at(&mut bytes, range.start as u64)
                .unwrap();
            bytes
        }

        #[test]
        fn the_relocation_table_leaves_the_resident_set_and_reads_back_the_same() {
            let pages = releasable().expect("the test binary is position-independent");
            let page = rustix::param::page_size();
            assert!(pages.len() >= page && pages.start.is_multiple_of(page));
            let before = memory(&pages);
            assert!(pages.clone().step_by(page).all(|p| present(p, page)));
            assert_eq!(super::super::release_relocations(), pages.len());
            assert!(pages.clone().step_by(page).all(|p| !present(p, page)));
            assert_eq!(
                memory(&pages),
                before,
                "faulted back in from the file, unchanged"
            );
        }

        #[test]
        fn only_a_read_only_mapping_of_the_executable_counts() {
            let maps = "00400000-00500000 r--p 00000000 08:01 12 /bin/agent\n\
                        00500000-00600000 rw-p 00100000 08:01 12 /bin/agent\n\
                        00600000-00700000 r--p 00000000 08:01 13 /bin/other\n";
            // Offsets 0x1800..0x5800 of the file: pages 0x402000..0x405000 are wholly inside.
            let table = 0x1800..0x5800;
            assert_eq!(
                pages_in(maps, "/bin/agent", &table, 0x1000),
                Some(0x402000..0x405000)
            );
            // The same offsets in a writable mapping, or another file's, are never given back.
            assert_eq!(
                pages_in(maps, "/bin/agent", &(0x101800..0x105800), 0x1000),
                None
            );
            assert_eq!(pages_in(maps, "/bin/none", &table, 0x1000), None);
            // Less than a whole page: nothing.
            assert_eq!(
                pages_in(maps, "/bin/agent", &(0x1800..0x2800), 0x1000),
                None
            );
        }
    }
}
