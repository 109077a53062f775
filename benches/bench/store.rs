//! The store: step commits against `git add -A && git commit` (scripts/bench-commit.sh) and the session log's
//! append cost (scripts/bench-sessions.sh), through the library's own API on a repository the script built.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use git_agent::bench::{ChangeTracker, Detection, Meta, Scan, Status, Store};

use crate::stats::{env_number, median, ms, us};

/// The repository the script built, from `BENCH_REPO`.
fn bench_repo() -> String {
    std::env::var("BENCH_REPO").unwrap_or_else(|_| {
        eprintln!("error: BENCH_REPO is not set (the scripts build the repository and set it)");
        std::process::exit(2)
    })
}

/// One session of `BENCH_STEPS` steps, each changing one file of the 100,000: scan, rescan + diff, the
/// inotify tracker, `git status --porcelain`, and the step commit, each timed.
pub fn commit() {
    let repo = bench_repo();
    let steps = env_number("BENCH_STEPS", 20);

    let t = Instant::now();
    let store = Store::open(Path::new(&repo)).unwrap();
    let open = ms(t);
    let id = store.new_session_id().unwrap();
    let t = Instant::now();
    let mut s = store.start_session(&id, false).unwrap();
    let start = ms(t);

    let mut scans = Vec::new();
    let mut rescans = Vec::new();
    let mut statuses = Vec::new();
    let mut commits = Vec::new();
    let mut full = Vec::new();
    let mut files = 0;
    // A fresh checkout's directories are too new for the rescan's fast path (racy timestamps); in a session
    // the model's thinking time passes before the first command. Let the same time pass here.
    std::thread::sleep(Duration::from_millis(2100));
    // The inotify tracker watches the same checkout throughout; its set-up is paid once per session.
    let t = Instant::now();
    let mut tracker = ChangeTracker::new(s.root());
    tracker.before_run().unwrap();
    let watch_setup = ms(t);
    let mut drains = Vec::new();
    for i in 0..steps {
        let t0 = Instant::now();
        let before = store.scan(&s).unwrap();
        scans.push(ms(t0));
        files = before.len();
        let rel = format!("d{:03}/f{:03}.txt", (i * 37) % 1000, (i * 11) % 100);
        // A command that modifies one existing file (appends to it).
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(s.root().join(&rel))
            .unwrap();
        std::io::Write::write_all(&mut f, format!("step {i}\n").as_bytes()).unwrap();
        drop(f);
        let t = Instant::now();
        let after = before.rescan().unwrap();
        let changed = Scan::diff(&before, &after);
        rescans.push(ms(t));
        assert_eq!(changed, [PathBuf::from(&rel)]);
        let t = Instant::now();
        tracker.before_run().unwrap();
        let events = tracker.after_run().unwrap();
        drains.push(ms(t));
        assert_eq!(events, [PathBuf::from(&rel)]);
        assert_eq!(tracker.detection(), &Detection::Events);
        let t = Instant::now();
        let status = Command::new("git")
            .args(["status", "--porcelain"])
            .current_dir(s.root())
            .output()
            .unwrap();
        statuses.push(ms(t));
        assert!(String::from_utf8_lossy(&status.stdout).contains(&rel));
        let t = Instant::now();
        store
            .commit_step(&mut s, &changed, &format!("step {i}"))
            .unwrap()
            .commit
            .expect("a change");
        commits.push(ms(t));
        full.push(ms(t0));
    }
    println!("BENCH files={files}");
    println!("BENCH open_ms={open:.2}");
    println!("BENCH start_session_ms={start:.1}");
    println!("BENCH scan_median_ms={:.1}", median(scans));
    println!(
        "BENCH rescan_diff_1_changed_median_ms={:.1}",
        median(rescans)
    );
    println!("BENCH inotify_watch_setup_ms={watch_setup:.1}");
    println!("BENCH inotify_watched_dirs={}", tracker.watched_dirs());
    let drain = median(drains);
    println!("BENCH inotify_after_run_1_changed_median_ms={drain:.3}");
    let status = median(statuses);
    println!("BENCH git_status_porcelain_median_ms={status:.1}");
    println!(
        "BENCH ratio git_status/inotify_after_run = {:.0}x",
        status / drain
    );
    println!("BENCH commit_step_median_ms={:.2}", median(commits));
    println!("BENCH scan_diff_commit_median_ms={:.1}", median(full));
    let t = Instant::now();
    store
        .rollback_session(&s)
        .unwrap_or_else(|e| eprintln!("rollback: {e}"));
    println!("BENCH rollback_ms={:.1}", ms(t));
}

/// Per-event append cost for sessions of 10 and 5,000 events, the cost of folding 10 new events into a
/// short and a long log, and `BENCH_SESSIONS` sessions for the script to time `git agent log` on.
pub fn sessions() {
    let repo = bench_repo();
    let sessions = env_number("BENCH_SESSIONS", 1000);
    let store = Store::open(Path::new(&repo)).unwrap();
    let event = |i: u64| {
        serde_json::json!({"type": "tool_result", "tool_call_id": format!("call_{i}"), "name": "read_file",
                           "ok": true, "summary": "40 lines", "content": "x".repeat(400)})
    };
    let meta = |id: &str| Meta {
        id: id.into(),
        prompt: format!("benchmark session {id}\nsecond line"),
        model: "openai/bench".into(),
        branch: format!("refs/heads/agent/{id}"),
        base: "0".repeat(40),
        status: Status::Running,
        ..Meta::default()
    };
    for (len, name) in [(10u64, "short"), (5000, "long")] {
        let mut log = store.create_log(meta(&format!("bench-{name}"))).unwrap();
        let mut appends = Vec::new();
        let mut folds = Vec::new();
        for i in 0..len {
            let t = Instant::now();
            log.append(event(i)).unwrap();
            appends.push(us(t));
            // A turn ends every 10 events: fold, as the agent does.
            if i % 10 == 9 {
                let t = Instant::now();
                log.fold(&store).unwrap();
                folds.push(us(t));
            }
        }
        println!("BENCH append_{len}_events_median_us={:.1}", median(appends));
        println!(
            "BENCH fold_10_events_into_{len}_median_us={:.1} last_us={:.1}",
            median(folds.clone()),
            folds.last().copied().unwrap_or_default()
        );
    }
    let t = Instant::now();
    for i in 0..sessions {
        let mut log = store.create_log(meta(&format!("s{i:05}"))).unwrap();
        for e in 0..12 {
            log.append(event(e)).unwrap();
        }
        log.meta.status = Status::Done;
        log.meta.steps = 3;
        log.fold(&store).unwrap();
    }
    println!(
        "BENCH created_sessions={sessions} in_ms={:.0}",
        us(t) / 1000.0
    );
}
