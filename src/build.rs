//! Build script: how the `git-agent` binary is linked on Linux (issue 16). Three things, each with an opt-out:
//!
//! **Position-dependent.** A position-independent executable carries a relocation for every pointer in its
//! read-only data (20,000 of them here: vtables, string tables, panic locations), which the dynamic loader
//! applies at every start, reading 480 KB of relocations and copying 370 KB of pages that then stay private to
//! the process. Linked at a fixed address there are none: `--version` starts in three quarters of the time and
//! four fifths of the memory, and each of a fleet's sessions keeps those pages shared. What is given up is the
//! random placement of the executable's own image (libraries, heap, stack and `mmap` stay randomised; the GOT
//! stays read-only, full RELRO). `GIT_AGENT_PIE=1 cargo build` keeps the default for packagers whose policy
//! requires PIE.
//!
//! **Hot code first.** The kernel maps a program's code 64 KB around each page it faults on, and a session
//! calls about 2,800 of the binary's 12,000 functions, spread over all of its 6.6 MB: a session that runs
//! 2.1 MB of code had 6 MB of it resident. `src/hot-text.order` lists the functions a session calls, in the
//! order they are first called (written by `scripts/gen-text-order.py`, which traces them), and the linker
//! lays those out first: 2.4 MB resident, the peak of a small session down by a third. A name the file lists
//! that a build does not have (another toolchain, a renamed function) is skipped, so a stale file costs memory,
//! never correctness. Only release builds with rustc's own LLD (the default linker for x86-64 Linux since
//! Rust 1.90) are ordered; `GIT_AGENT_TEXT_ORDER=0` turns it off.
//!
//! **The unwinder linked in.** std asks for `libgcc_s.so` for its ten `_Unwind_*` functions (backtraces; a
//! release build aborts on panic), and loading a shared library costs every start about 0.1 ms, a tenth of
//! `--version`. For release builds with rustc's LLD (as above), `-lgcc_s` is pointed at a linker script in
//! `OUT_DIR` that names the compiler's static unwinder, `libgcc_eh.a` (what `gcc -static-libgcc` links), found
//! with `cc -print-file-name`; without one, nothing changes. `GIT_AGENT_STATIC_UNWIND=0` turns it off.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=GIT_AGENT_PIE");
    println!("cargo:rerun-if-env-changed=GIT_AGENT_TEXT_ORDER");
    println!("cargo:rerun-if-env-changed=GIT_AGENT_STATIC_UNWIND");
    println!("cargo:rerun-if-changed=src/hot-text.order");
    let linux = env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux");
    if linux && !switched_on("GIT_AGENT_PIE", false) {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
    let lld = links_with_rust_lld();
    if lld && switched_on("GIT_AGENT_STATIC_UNWIND", true) {
        link_unwinder_statically();
    }
    if switched_on("GIT_AGENT_TEXT_ORDER", true) && lld {
        let manifest = env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
        let order = Path::new(&manifest).join("src/hot-text.order");
        if order.is_file() {
            println!(
                "cargo:rustc-link-arg-bins=-Wl,--symbol-ordering-file={}",
                order.display()
            );
            println!("cargo:rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
        }
    }
}

/// Puts `OUT_DIR/static-unwind/libgcc_s.so`, a linker script naming `libgcc_eh.a`, first in the binary's
/// library path, so that std's `-lgcc_s` links the unwinder in instead of loading it at every start.
fn link_unwinder_statically() {
    let Some(archive) = compiler_file("libgcc_eh.a") else {
        return;
    };
    let Some(out) = env::var_os("OUT_DIR") else {
        return;
    };
    let dir = Path::new(&out).join("static-unwind");
    let script = format!("INPUT({})\n", archive.display());
    if std::fs::create_dir_all(&dir).is_ok()
        && std::fs::write(dir.join("libgcc_s.so"), script).is_ok()
    {
        println!("cargo:rustc-link-arg-bins=-L{}", dir.display());
    }
}

/// The absolute path of a file of the C compiler's runtime (`cc -print-file-name=NAME`), if it has one.
fn compiler_file(name: &str) -> Option<PathBuf> {
    let cc = env::var_os("CC").unwrap_or_else(|| "cc".into());
    let out = Command::new(cc)
        .arg(format!("-print-file-name={name}"))
        .output()
        .ok()?;
    let path = PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
    (out.status.success() && path.is_absolute() && path.is_file()).then_some(path)
}

/// An opt-in/opt-out variable: unset gives `default`; empty or "0" is off, anything else on.
fn switched_on(var: &str, default: bool) -> bool {
    match env::var_os(var) {
        None => default,
        Some(v) => !v.is_empty() && v != "0",
    }
}

/// True for a release build for x86-64 Linux (GNU) by rustc 1.90 or later with no linker chosen by the user:
/// rustc then links with its own LLD, which takes `--symbol-ordering-file` (GNU ld does not).
fn links_with_rust_lld() -> bool {
    let var = |k: &str| env::var(k).unwrap_or_default();
    let target = var("CARGO_CFG_TARGET_ARCH") == "x86_64"
        && var("CARGO_CFG_TARGET_OS") == "linux"
        && var("CARGO_CFG_TARGET_ENV") == "gnu";
    let chosen_linker =
        env::var_os("RUSTC_LINKER").is_some() || var("CARGO_ENCODED_RUSTFLAGS").contains("link");
    target
        && var("PROFILE") == "release"
        && !chosen_linker
        && rustc_minor().is_some_and(|m| m >= 90)
}

/// The minor version of the rustc that cargo runs (`rustc 1.95.0 (...)` gives 95).
fn rustc_minor() -> Option<u32> {
    let rustc = env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let out = Command::new(rustc).arg("--version").output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let version = text.split_whitespace().nth(1)?;
    let mut parts = version.split('.');
    (parts.next()? == "1").then_some(())?;
    parts.next()?.parse().ok()
}
