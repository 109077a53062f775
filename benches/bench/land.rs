//! `git agent accept` of a big file both sides changed (the case of issue 17, defect 2), against the same
//! three-way merge done with plain git: `git merge-file` of the three versions and a copy into place.
//!
//! The accept does more than the reference on purpose: it saves the versions before and after (its record
//! for `--continue` / `--abort`), writes through a synced temp file and renames; the ratio says what that
//! safety costs. Peak memory is from `wait4`: the largest resident set of any one process of the tree (the
//! accept or a `git` it ran), not their sum.

use std::fs;
use std::process::Command;
use std::time::Instant;

use crate::common::landing::craft;
use crate::common::{Reply, Server, TestRepo};
use crate::stats::{env_number, median, ms};

pub fn accept() {
    let mib = env_number("BENCH_MIB", 100);
    let runs = env_number("BENCH_RUNS", 3);
    let repo = TestRepo::new();
    let line = "a line of a big text file, long enough to be typical\n";
    let count = mib * 1024 * 1024 / line.len();
    let body: String = line.repeat(count);
    repo.write("big.txt", &body);
    repo.commit_all("big file");
    let server = Server::start(vec![Reply::text("nothing")]);
    repo.run_agent(&server, &["ask", "look"]).assert_code(0);
    let id = crate::common::session_id(&repo);
    let theirs = format!("AGENT\n{body}");
    craft(&repo, &id, 1, "edit big.txt", |dir| {
        fs::write(dir.join("big.txt"), &theirs).unwrap();
    });
    let ours = format!("{body}USER\n");
    let big = repo.path().join("big.txt");

    let mut agent_ms = Vec::new();
    let mut agent_peak = 0.0f64;
    for _ in 0..runs {
        fs::write(&big, &ours).unwrap();
        let mut cmd = repo.agent(&server, &["accept", &id]);
        let t = Instant::now();
        let (ok, peak) = run_measured(&mut cmd);
        agent_ms.push(ms(t));
        assert!(ok, "accept failed");
        agent_peak = agent_peak.max(peak);
    }
    assert_eq!(fs::metadata(&big).unwrap().len() as usize, body.len() + 11);

    let dir = repo.root().join("ref");
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("base"), &body).unwrap();
    fs::write(dir.join("theirs"), &theirs).unwrap();
    let mut git_ms = Vec::new();
    let mut git_peak = 0.0f64;
    for _ in 0..runs {
        fs::write(&big, &ours).unwrap();
        let t = Instant::now();
        let (ok, peak) = run_measured(
            Command::new("sh")
                .arg("-c")
                .arg("git merge-file -p \"$1\" ref/base ref/theirs > ref/out && cp ref/out \"$1\"")
                .arg("sh")
                .arg(&big)
                .current_dir(repo.root()),
        );
        git_ms.push(ms(t));
        assert!(ok, "git merge-file failed");
        git_peak = git_peak.max(peak);
    }
    let (a, g) = (median(agent_ms), median(git_ms));
    println!("BENCH accept_mib={mib}");
    println!("BENCH accept_median_ms={a:.1}");
    println!("BENCH git_merge_file_median_ms={g:.1}");
    println!("BENCH accept_vs_git_ratio={:.2}", a / g);
    println!("BENCH accept_peak_rss_mib={agent_peak:.1}");
    println!("BENCH git_merge_file_peak_rss_mib={git_peak:.1}");
}

/// Runs `cmd` with its output discarded; whether it succeeded and the peak resident set in MiB of the
/// largest process of its tree.
// The child is reaped by `wait4` below (for its rusage), which clippy cannot see.
#[allow(clippy::zombie_processes)]
fn run_measured(cmd: &mut Command) -> (bool, f64) {
    let child = cmd
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut status = 0;
    // SAFETY: an all-zero rusage is valid for the kernel to fill; the pid is our child's.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = child.id() as libc::pid_t;
    // SAFETY: waits for our own child once (std's handle is never waited on).
    let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(rc, pid, "wait4");
    let ok = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
    (ok, usage.ru_maxrss as f64 / 1024.0)
}
