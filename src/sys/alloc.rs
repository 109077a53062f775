//! The C library's allocator (glibc): tuning at start-up and its counters for the footprint log. Elsewhere
//! (musl, macOS, the BSDs) both are no-ops.

/// Allocator counters, in bytes.
#[derive(Clone, Copy, Debug, Default)]
pub struct HeapInfo {
    /// In use by the program (small blocks and mmapped ones).
    pub in_use: usize,
    /// Held from the system (arena and mmapped blocks).
    pub held: usize,
}

/// One arena, mmap above 64 KiB, trim above 32 KiB: a small agent's heap is a few MB, and glibc's defaults
/// (an arena per thread, 128 KiB thresholds) hold several times that. Call before any other thread exists.
pub fn tune_for_small_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets allocator parameters; the caller runs before any other thread exists.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
        libc::mallopt(libc::M_MMAP_THRESHOLD, 64 * 1024);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 32 * 1024);
    }
}

/// The allocator's counters, where the C library has them.
pub fn heap_info() -> Option<HeapInfo> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallinfo2 only reads the allocator's counters into the struct it returns.
        let info = unsafe { libc::mallinfo2() };
        Some(HeapInfo {
            in_use: info.uordblks + info.hblkhd,
            held: info.arena + info.hblkhd,
        })
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    None
}
