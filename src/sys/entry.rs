//! The process's entry point on glibc: the C `main`, without std's runtime set-up before it.
//!
//! Before a Rust `main`, std's runtime asks glibc where the main thread's stack is (which reads and parses
//! `/proc/self/maps`), maps an alternate signal stack, installs the SIGSEGV and SIGBUS handlers that print
//! "has overflowed its stack", fills closed standard descriptors and ignores SIGPIPE. Measured with a
//! program that prints one line, spawned 2,000 times (issue 29): 0.94 ms with std's `main`, 0.87 ms with its
//! own C `main`, of which reading `/proc/self/maps` alone is 0.04 ms; `git agent --version` (the tuned build)
//! went from 0.83 to 0.76 ms (docs/performance.md, "Starting without std's runtime set-up").
//!
//! So the binary defines the C `main` ([`c_main!`]) and keeps the two parts that matter ([`before_main()`]):
//! the standard descriptors, and SIGPIPE ignored, so that a write to a pipe whose reader has gone fails
//! with `EPIPE` instead of killing the agent (std's `Command` still gives commands the default action). A
//! stack overflow then ends the process with a plain SIGSEGV instead of the message and SIGABRT.
//!
//! Only glibc hands the arguments to std before `main` (std registers for it in `.init_array`); elsewhere
//! std learns them in its runtime, so the other systems, and the portable build, keep std's `main`.

/// The parts of std's runtime set-up that `main` must not go without: closed standard descriptors filled
/// with `/dev/null`, SIGPIPE ignored. Call first, before any other thread exists.
pub fn before_main() {
    super::stdio::fill_standard_fds();
    super::signal::set_disposition(libc::SIGPIPE, super::signal::Disposition::Ignore);
}

/// Defines the process's C `main` as calling `$before` ([`before_main()`], as `git_agent::startup` names it)
/// and then `$start` (a `fn() -> !`), for a binary that is `#![no_main]` on glibc (see the module docs).
#[macro_export]
macro_rules! c_main {
    ($before:path, $start:path) => {
        // SAFETY: `#![no_main]` leaves the C runtime's `main` to the binary and this is its one definition,
        // with the signature the C runtime calls it with; neither argument is read (glibc gave them to std).
        #[unsafe(no_mangle)]
        extern "C" fn main(
            _argc: ::std::ffi::c_int,
            _argv: *const *const ::std::ffi::c_char,
        ) -> ::std::ffi::c_int {
            $before();
            // A panic must not unwind out of an `extern "C"` function: caught, it exits 101 as std's runtime
            // makes a panicking `main` do (release builds abort at the panic itself).
            let _ = ::std::panic::catch_unwind(|| $start());
            ::std::process::exit(101)
        }
    };
}
