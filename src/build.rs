//! Build script: links the `git-agent` binary as a position-dependent executable on Linux.
//!
//! A position-independent executable carries a relocation for every pointer in its read-only data (20,000 of
//! them here: vtables, string tables, panic locations), which the dynamic loader applies at every start,
//! reading 480 KB of relocations and copying 370 KB of pages that then stay private to the process. Linked at
//! a fixed address there are none: `--version` starts in three quarters of the time and four fifths of the
//! memory (issue 16), and each of a fleet's sessions keeps those pages shared. What is given up is the random placement of the
//! executable's own image (libraries, heap, stack and `mmap` stay randomised; the GOT stays read-only, full
//! RELRO). `GIT_AGENT_PIE=1 cargo build` keeps the default for packagers whose policy requires PIE.

fn main() {
    println!("cargo:rerun-if-env-changed=GIT_AGENT_PIE");
    let linux = std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux");
    let pie = std::env::var_os("GIT_AGENT_PIE").is_some_and(|v| !v.is_empty() && v != "0");
    if linux && !pie {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
}
