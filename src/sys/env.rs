//! The process environment at start-up: removing variables, and wiping values out of the strings the process
//! started with (what `/proc/<pid>/environ` shows). Both only before any other thread exists.

/// Removes `name` from the environment. Call only at start-up, before any thread exists.
pub fn remove_at_start(name: &str) {
    // SAFETY: the caller runs before any other thread exists, so nothing reads the environment concurrently.
    #[allow(unused_unsafe)]
    unsafe {
        std::env::remove_var(name)
    };
}

/// Overwrites with zeros the value of every variable `wipe` names in the environment strings the process
/// started with (which `/proc/<pid>/environ` reads on Linux): a wiped string reads as `NAME=` from then on.
/// Call only at start-up, before any thread exists and before the environment is changed.
#[cfg(target_os = "linux")]
pub fn wipe_start_values(wipe: impl Fn(&str) -> bool) {
    use std::ffi::CStr;
    extern "C" {
        /// The C library's environment: a null-terminated array of `NAME=value` strings.
        static environ: *const *mut libc::c_char;
    }
    // SAFETY: called before any thread exists and before the environment is changed, so `environ` is the array
    // the kernel and the C library set up: every entry a valid, NUL-terminated, writable string (on the
    // process's stack), ending with a null pointer. Only bytes inside each string are written, its terminator
    // stays.
    unsafe {
        let mut entry = environ;
        if entry.is_null() {
            return;
        }
        while !(*entry).is_null() {
            let text = *entry;
            let bytes = CStr::from_ptr(text).to_bytes();
            if let Some(eq) = bytes.iter().position(|b| *b == b'=') {
                let name = std::str::from_utf8(&bytes[..eq]).unwrap_or_default();
                if wipe(name) {
                    std::ptr::write_bytes(text.add(eq + 1), 0, bytes.len() - eq - 1);
                }
            }
            entry = entry.add(1);
        }
    }
}

/// Elsewhere the start environment is not readable by other processes through `/proc`: nothing to wipe.
#[cfg(not(target_os = "linux"))]
pub fn wipe_start_values(_wipe: impl Fn(&str) -> bool) {}
