// On glibc the binary defines the C `main` itself and skips std's runtime set-up, a tenth of what
// `--version` costs (src/sys/entry.rs); elsewhere, and in the portable build, std's `main` starts it.
#![cfg_attr(
    all(
        target_os = "linux",
        target_env = "gnu",
        not(git_agent_portable),
        not(test)
    ),
    no_main
)]

#[cfg(all(
    target_os = "linux",
    target_env = "gnu",
    not(git_agent_portable),
    not(test)
))]
git_agent::c_main!(git_agent::startup::before_main, start);

#[cfg(not(all(
    target_os = "linux",
    target_env = "gnu",
    not(git_agent_portable),
    not(test)
)))]
fn main() {
    start()
}

fn start() -> ! {
    git_agent::answer_version();
    // After --version (which must stay as quick as it is): the instant phase timings count from.
    git_agent::startup::init_timings();
    git_agent::startup::mark("start", &[]);
    tune_allocator();
    // The loader is done with the executable's relocation table: its pages leave the resident set.
    git_agent::startup::release_relocations();
    // Before anything else: secret variables leave the environment (see safety::secrets).
    git_agent::startup::scrub_environment();
    let code = git_agent::run();
    git_agent::startup::mark(
        "exit",
        &[(
            "code",
            git_agent::startup::Detail::Count(code.unsigned_abs().into()),
        )],
    );
    std::process::exit(code);
}

/// glibc's malloc, set for a process that is one of many (issue 16: a fleet of sessions on one machine). By
/// default every thread that allocates gets an arena of its own (the start thread, gix's status threads) and
/// freed memory stays in them; buffers up to 32 MB come from the heap and keep it grown. With one arena,
/// buffers of 64 KB and more mapped and unmapped on their own, and the heap trimmed past 32 KB of free space at
/// its top, a small session's peak fell from 12.2 to 10.9 MB (its anonymous part from 2.4 to 1.0 MB).
/// Nothing is changed when the user tunes malloc themselves (`GLIBC_TUNABLES`, `MALLOC_*`).
fn tune_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let tuned = std::env::vars_os().any(|(name, _)| {
            let name = name.to_string_lossy();
            name == "GLIBC_TUNABLES" || name.starts_with("MALLOC_")
        });
        if tuned {
            return;
        }
        git_agent::startup::tune_for_small_heap();
    }
}
