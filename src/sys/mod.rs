//! The one door to the OS: every system call the agent makes that std does not wrap goes through here, as a
//! narrow safe API on `rustix` (and `libc` only where rustix has no wrapper). Nothing outside this module
//! writes `unsafe` (tests/architecture.rs checks it), so the few places where memory safety rests on a
//! comment are all in these files, each with its `SAFETY:` reason.
//!
//! Portability: the crate builds for any Unix. What only Linux has (namespaces, mounts, Landlock, seccomp,
//! inotify, pidfd, prctl) is behind `cfg(all(target_os = "linux", not(git_agent_portable)))`, each with a
//! fallback that says what it does not do (so `--sandbox auto` runs commands unsandboxed with a warning,
//! `run` commands share the agent's view of processes, change detection scans the checkout). Building with
//! `RUSTFLAGS="--cfg git_agent_portable"` switches the Linux layer off on Linux too, which is how CI tests
//! the paths macOS and the BSDs take.

pub mod alloc;
pub mod entry;
pub mod env;
pub mod errno;
pub mod fs;
pub mod image;
#[cfg(all(target_os = "linux", not(git_agent_portable)))]
pub mod inotify;
pub mod isolate;
pub mod libm;
pub mod process;
pub mod random;
pub mod sandbox;
pub mod signal;
pub mod stdio;
pub mod term;
pub mod time;
pub mod timings;

/// True where the Linux layer is built: namespaces, Landlock, seccomp, inotify, pidfd.
pub const LINUX_LAYER: bool = cfg!(all(target_os = "linux", not(git_agent_portable)));
