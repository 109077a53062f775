//! Images in (issue 28): `ask --image` and `read_file` of a PNG reach the scripted server as each wire
//! format's image block, an image over `max_image_size` is refused with its size, a model whose provider says
//! `vision = false` gets a clear error, and `show` and `--resume` work after the file is deleted (the image
//! is a blob in the session log's tree).

use std::process::Command;

use serde_json::Value;

use crate::common::server::{call, Reply, Server};
use crate::common::{fsck, run, session_id, Output, TestRepo, API_KEY};

/// A PNG's signature and header, then filler: the type is read from the magic bytes only.
fn png(filler: usize) -> Vec<u8> {
    let mut bytes = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0".to_vec();
    bytes.extend((0..filler).map(|i| (i % 251) as u8));
    bytes
}

/// Base64 (standard, padded), written out here so the test does not share the code it checks.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Wire {
    OpenAi,
    Anthropic,
}

/// The agent pointed at `server` on `wire`, with a user config holding `config`.
fn agent(repo: &TestRepo, server: &Server, wire: Wire, config: &str, args: &[&str]) -> Command {
    let path = repo.root().join("config.toml");
    std::fs::write(&path, config).expect("write config");
    let mut cmd = repo.agent(server, args);
    cmd.env("GIT_AGENT_CONFIG", &path);
    if wire == Wire::Anthropic {
        cmd.env("GIT_AGENT_MODEL", "anthropic/test-model")
            .env("ANTHROPIC_BASE_URL", server.root_url())
            .env("ANTHROPIC_API_KEY", API_KEY)
            .env_remove("OPENAI_API_KEY")
            .env_remove("OPENAI_BASE_URL");
    }
    cmd
}

fn ask(repo: &TestRepo, server: &Server, wire: Wire, config: &str, args: &[&str]) -> Output {
    run(&mut agent(repo, server, wire, config, args))
}

/// The images of a request as (media type, base64 data), in order, whichever wire format carried them:
/// Chat Completions' `image_url` parts with a data URL, Messages' `image` blocks with a base64 source.
fn images(body: &Value) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for message in body["messages"].as_array().into_iter().flatten() {
        for part in message["content"].as_array().into_iter().flatten() {
            match part["type"].as_str() {
                Some("image_url") => {
                    assert_eq!(
                        message["role"], "user",
                        "OpenAI takes images from users only"
                    );
                    let url = part["image_url"]["url"].as_str().unwrap_or_default();
                    let (head, data) = url.split_once(";base64,").expect("a base64 data URL");
                    let media = head.strip_prefix("data:").expect("a data URL");
                    found.push((media.to_owned(), data.to_owned()));
                }
                Some("image") => {
                    assert_eq!(message["role"], "user");
                    assert_eq!(part["source"]["type"], "base64");
                    found.push((
                        part["source"]["media_type"]
                            .as_str()
                            .unwrap_or_default()
                            .to_owned(),
                        part["source"]["data"]
                            .as_str()
                            .unwrap_or_default()
                            .to_owned(),
                    ));
                }
                _ => {}
            }
        }
    }
    found
}

fn ask_with_an_image_reaches_the_model(wire: Wire) {
    let repo = TestRepo::new();
    let shot = png(300);
    std::fs::write(repo.path().join("shot.png"), &shot).unwrap();
    let server = Server::start(vec![Reply::text("A red square.")]);
    let out = ask(
        &repo,
        &server,
        wire,
        "",
        &["ask", "--image", "shot.png", "what is this?"],
    );
    out.assert_code(0);
    assert_eq!(out.stdout().trim(), "A red square.");
    let requests = server.requests();
    assert_eq!(
        images(&requests[0].body),
        [("image/png".to_owned(), base64(&shot))]
    );
    // The image comes after the prompt, which stays a user message of its own.
    let texts = requests[0].user_texts();
    assert!(
        texts.iter().any(|t| t.contains("what is this?")),
        "{texts:?}"
    );
    assert!(
        out.stderr()
            .contains("image shot.png (image/png, 329 bytes) sent to the model"),
        "{out}"
    );
    // The image is a blob in the session log's tree, so it travels with the log.
    let id = session_id(&repo);
    let tree = repo.git(&["ls-tree", "-r", &format!("refs/agent/sessions/{id}")]);
    let blob = tree
        .lines()
        .find_map(|l| l.split_once("\timages/").map(|(_, b)| b.to_owned()))
        .unwrap_or_else(|| panic!("no images/ entry in {tree}"));
    let stored = Command::new("git")
        .args(["cat-file", "blob", &blob])
        .current_dir(repo.path())
        .output()
        .unwrap();
    assert_eq!(stored.stdout, shot);
    fsck(&repo);
}

#[test]
fn ask_with_an_image_reaches_openai_as_an_image_url() {
    ask_with_an_image_reaches_the_model(Wire::OpenAi);
}

#[test]
fn ask_with_an_image_reaches_anthropic_as_an_image_block() {
    ask_with_an_image_reaches_the_model(Wire::Anthropic);
}

fn read_file_of_a_png_reaches_the_model(wire: Wire) {
    let repo = TestRepo::new();
    let logo = png(40);
    std::fs::write(repo.path().join("logo.png"), &logo).unwrap();
    repo.write("notes.txt", "plain text\n");
    repo.commit_all("assets");
    // Two calls in one reply: the image must follow both results (both APIs want a call's results first).
    let image = call("read_file", serde_json::json!({"path": "logo.png"}));
    let text = call("read_file", serde_json::json!({"path": "notes.txt"}));
    let server = Server::start(vec![
        Reply::tool_calls(vec![image.clone(), text.clone()]),
        Reply::text("It is a logo."),
    ]);
    let out = ask(&repo, &server, wire, "", &["ask", "look at the logo"]);
    out.assert_code(0);
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert!(
        requests[1]
            .tool_result(&image.id)
            .contains("'logo.png' is an image (image/png, 69 bytes)"),
        "{}",
        requests[1].tool_result(&image.id)
    );
    assert!(requests[1].tool_result(&text.id).contains("plain text"));
    assert_eq!(
        images(&requests[1].body),
        [("image/png".to_owned(), base64(&logo))]
    );
    let messages = requests[1].messages();
    match wire {
        Wire::OpenAi => {
            // assistant (calls), tool, tool, then the user message with the image.
            let roles: Vec<&str> = messages.iter().filter_map(|m| m["role"].as_str()).collect();
            let first_tool = roles.iter().position(|r| *r == "tool").unwrap();
            assert_eq!(&roles[first_tool..], ["tool", "tool", "user"], "{roles:?}");
        }
        Wire::Anthropic => {
            let last = messages.last().unwrap();
            let types: Vec<&str> = last["content"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|b| b["type"].as_str())
                .collect();
            assert_eq!(types, ["tool_result", "tool_result", "text", "image"]);
        }
    }
}

#[test]
fn read_file_of_a_png_reaches_openai_as_an_image() {
    read_file_of_a_png_reaches_the_model(Wire::OpenAi);
}

#[test]
fn read_file_of_a_png_reaches_anthropic_as_an_image() {
    read_file_of_a_png_reaches_the_model(Wire::Anthropic);
}

#[test]
fn an_image_over_the_cap_is_refused_with_its_size() {
    let repo = TestRepo::new();
    std::fs::write(repo.path().join("big.png"), png(2000)).unwrap();
    let config = "max_image_size = 1024\n";
    let server = Server::start(vec![]);
    let out = ask(
        &repo,
        &server,
        Wire::OpenAi,
        config,
        &["ask", "--image", "big.png", "what is this?"],
    );
    assert_ne!(out.code(), 0);
    assert_eq!(
        out.first_stderr_line(),
        "error: big.png is 2.0 KiB (2,029 bytes), over the image size cap of 1.0 KiB: use a smaller \
         image or raise max_image_size in the config"
    );
    assert!(server.requests().is_empty(), "nothing was sent");
    // read_file of the same file: the model is told, with the size.
    let read = call("read_file", serde_json::json!({"path": "big.png"}));
    let server = Server::start(vec![
        Reply::tool_calls(vec![read.clone()]),
        Reply::text("ok"),
    ]);
    ask(&repo, &server, Wire::OpenAi, config, &["ask", "look"]).assert_code(0);
    let requests = server.requests();
    let result = requests[1].tool_result(&read.id);
    assert!(
        result.contains("'big.png' is 2.0 KiB (2,029 bytes), over the image size cap of 1.0 KiB"),
        "{result}"
    );
    assert!(images(&requests[1].body).is_empty());
}

#[test]
fn a_model_without_vision_gets_a_clear_error() {
    let repo = TestRepo::new();
    std::fs::write(repo.path().join("shot.png"), png(10)).unwrap();
    let server = Server::start(vec![]);
    let out = ask(
        &repo,
        &server,
        Wire::OpenAi,
        "[providers.openai]\nvision = false\n",
        &["ask", "--image", "shot.png", "what is this?"],
    );
    assert_ne!(out.code(), 0);
    assert_eq!(
        out.first_stderr_line(),
        "error: the model openai/test-model does not take images (vision = false in its provider's \
         config): use a model with vision"
    );
    assert!(server.requests().is_empty());
    // read_file of an image tells such a model why it sees none.
    let read = call("read_file", serde_json::json!({"path": "shot.png"}));
    let reading = Server::start(vec![
        Reply::tool_calls(vec![read.clone()]),
        Reply::text("ok"),
    ]);
    ask(
        &repo,
        &reading,
        Wire::OpenAi,
        "[providers.openai]\nvision = false\n",
        &["ask", "look"],
    )
    .assert_code(0);
    let requests = reading.requests();
    assert!(
        requests[1]
            .tool_result(&read.id)
            .contains("'shot.png' is an image (image/png, 39 bytes); this model does not take images (vision = false"),
        "{}",
        requests[1].tool_result(&read.id)
    );
    assert!(images(&requests[1].body).is_empty());
    let out = ask(
        &repo,
        &server,
        Wire::OpenAi,
        "",
        &["ask", "--image", "missing.png", "what is this?"],
    );
    assert!(
        out.first_stderr_line()
            .starts_with("error: cannot read missing.png:"),
        "{out}"
    );
    std::fs::write(repo.path().join("fake.png"), "not an image").unwrap();
    let out = ask(
        &repo,
        &server,
        Wire::OpenAi,
        "",
        &["ask", "--image", "fake.png", "x"],
    );
    assert_eq!(
        out.first_stderr_line(),
        "error: fake.png is not a PNG, JPEG, GIF or WebP image"
    );
}

#[test]
fn show_and_resume_work_after_the_file_is_deleted() {
    let repo = TestRepo::new();
    let shot = png(100);
    let path = repo.path().join("shot.png");
    std::fs::write(&path, &shot).unwrap();
    let server = Server::start(vec![
        Reply::text("A square."),
        Reply::text("Still a square."),
    ]);
    ask(
        &repo,
        &server,
        Wire::Anthropic,
        "",
        &["ask", "--image", "shot.png", "what is it?"],
    )
    .assert_code(0);
    std::fs::remove_file(&path).unwrap();
    let id = session_id(&repo);
    let out = ask(&repo, &server, Wire::Anthropic, "", &["show", &id]);
    out.assert_code(0);
    assert!(
        out.stdout()
            .contains("image shot.png (image/png, 129 bytes) sent to the model"),
        "{out}"
    );
    let out = ask(
        &repo,
        &server,
        Wire::Anthropic,
        "",
        &["ask", "--resume", &id, "and now?"],
    );
    out.assert_code(0);
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        images(&requests[1].body),
        [("image/png".to_owned(), base64(&shot))],
        "the resumed conversation carries the image from the log"
    );
    fsck(&repo);
}

#[test]
fn chat_sends_the_images_a_prompt_names() {
    let repo = TestRepo::new();
    let shot = png(50);
    std::fs::create_dir(repo.path().join("shots")).unwrap();
    std::fs::write(repo.path().join("shots/fail.png"), &shot).unwrap();
    let server = Server::start(vec![Reply::text("A button."), Reply::text("Fine.")]);
    let input = "what is in @shots/fail.png?\nand shots/fail.png, @gone.png or a.png in prose\n";
    let stdin = repo.root().join("stdin.txt");
    std::fs::write(&stdin, input).unwrap();
    let mut cmd = agent(&repo, &server, Wire::OpenAi, "", &["chat"]);
    cmd.stdin(std::fs::File::open(&stdin).unwrap());
    let out = run(&mut cmd);
    out.assert_code(0);
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let sent = (String::from("image/png"), base64(&shot));
    assert_eq!(images(&requests[0].body), std::slice::from_ref(&sent));
    // The second turn: the pasted path is sent too (the first turn's image stays in the conversation); a
    // missing `@` file is a warning, a word that only looks like a file name is prose.
    assert_eq!(images(&requests[1].body), [sent.clone(), sent]);
    assert!(
        out.stderr().contains("warning: cannot read gone.png:"),
        "{out}"
    );
    // (The prompt itself is shown, as every prompt is.)
    assert!(
        !out.stderr()
            .lines()
            .any(|l| l.starts_with("warning") && l.contains("a.png")),
        "{out}"
    );
}

/// A stdio MCP server whose one tool, `shot`, answers a text block and the PNG in its first argument
/// (base64) as an image block.
const MCP_SERVER: &str = r#"
import json, sys
png = sys.argv[1]
def send(m):
    sys.stdout.write(json.dumps(m) + "\n")
    sys.stdout.flush()
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    mid, method = msg["id"], msg.get("method")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": mid, "result": {"protocolVersion": "2025-06-18",
              "capabilities": {"tools": {}}, "serverInfo": {"name": "img", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": mid, "result": {"tools": [{"name": "shot",
              "description": "A screenshot", "inputSchema": {"type": "object", "properties": {}},
              "annotations": {"readOnlyHint": True}}]}})
    elif method == "tools/call":
        send({"jsonrpc": "2.0", "id": mid, "result": {"content": [
              {"type": "text", "text": "the screen"},
              {"type": "image", "data": png, "mimeType": "image/png"}]}})
    else:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "unknown"}})
"#;

#[test]
fn an_mcp_image_result_is_passed_through() {
    let repo = TestRepo::new();
    let shot = png(20);
    let script = repo.root().join("img_mcp.py");
    std::fs::write(&script, MCP_SERVER).unwrap();
    let args = serde_json::json!([script.display().to_string(), base64(&shot)]);
    let config = format!("[mcp_servers.img]\ncommand = \"python3\"\nargs = {args}\n");
    let shot_call = call("mcp__img__shot", serde_json::json!({}));
    let server = Server::start(vec![
        Reply::tool_calls(vec![shot_call.clone()]),
        Reply::text("I see the screen."),
    ]);
    let out = ask(
        &repo,
        &server,
        Wire::Anthropic,
        &config,
        &["ask", "--yes", "look"],
    );
    out.assert_code(0);
    let requests = server.requests();
    let result = requests[1].tool_result(&shot_call.id);
    assert!(
        result.contains("the screen\n[image: image/png, about 49 bytes]"),
        "{result}"
    );
    assert!(
        result.contains("[shot image 1 is attached as an image]"),
        "{result}"
    );
    assert_eq!(
        images(&requests[1].body),
        [("image/png".to_owned(), base64(&shot))]
    );
}

#[test]
fn a_provider_refusing_an_image_gets_a_hint_about_vision() {
    let repo = TestRepo::new();
    std::fs::write(repo.path().join("shot.png"), png(10)).unwrap();
    let server = Server::start(vec![Reply::status(
        400,
        "image input is not supported by this model",
    )]);
    let out = ask(
        &repo,
        &server,
        Wire::OpenAi,
        "",
        &["ask", "--image", "shot.png", "what is it?"],
    );
    assert_eq!(out.code(), 1, "{out}");
    assert!(
        out.stderr().lines().any(|l| {
            l
            == "error: model request failed (HTTP 400): image input is not supported by this model"
        }),
        "{out}"
    );
    assert!(
        out.stderr().contains(
            "hint: the request carried an image: if openai/test-model takes none, set vision = false in \
             [providers.openai]"
        ),
        "{out}"
    );
}
