//! The fixed 60-request session of issue 7 (a plan, 57 reads of 6 KB files, the plan marked done, finish),
//! which the context test runs against a small window and `scripts/bench-context.sh` measures.

use serde_json::json;

use super::{call, Reply, TestRepo};

/// The window the long session runs against, in tokens.
pub const WINDOW: u64 = 14_000;
/// What the scripted model answers when the agent asks for a summary.
pub const SUMMARY: &str = "## Goal\nread every file\n## Done so far\nread files 1 to many (SUMMARY-MARK-5521)\n\
## Confirmed facts\nfiles hold lines\n## Guesses\nnone\n## Open questions\nnone\n## Next step\nread on";

/// A file of about 6 KB whose lines name it, so a test can tell which reads are still in a request.
pub fn big_file(n: usize) -> String {
    (0..90)
        .map(|l| format!("FILE-{n:02}-LINE-{l:03} the quick brown fox jumps over the lazy dog\n"))
        .collect()
}

/// The fixed 60-request session: a plan, 57 reads of 6 KB files, the plan marked done, finish.
pub fn long_session(repo: &TestRepo) -> Vec<Reply> {
    for n in 0..57 {
        repo.write(&format!("data/f{n:02}.txt"), &big_file(n));
    }
    repo.commit_all("data");
    let plan = |status: &str| {
        call(
            "plan_update",
            json!({"items": [
                {"step": "PLAN-ITEM-READ-ALL the data files", "status": status},
                {"step": "PLAN-ITEM-REPORT what they hold", "status": status}
            ]}),
        )
    };
    let mut script = vec![Reply::tool_calls(vec![plan("in_progress")])];
    for n in 0..57 {
        script.push(Reply::text_and_tool_calls(
            &format!("Reading file {n}."),
            vec![call(
                "read_file",
                json!({"path": format!("data/f{n:02}.txt")}),
            )],
        ));
    }
    script.push(Reply::tool_calls(vec![plan("done")]));
    script.push(Reply::tool_calls(vec![call(
        "finish",
        json!({"status": "completed", "summary": "Read all 57 files."}),
    )]));
    script
}
