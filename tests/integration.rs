//! The one integration-test binary (`autotests = false`): each module is one area, all share `common`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic in a test is a failed test

// Fixture: temp repos, the hermetic binary runner, user-state snapshots and the scripted model server.
mod common;
// The module map checks itself: no `use crate::X` outside the edges of DESIGN section 6.
mod architecture;
// The scripted model server, tested with a raw TCP client.
mod sse_server;
// TestRepo and user_state themselves: the snapshot notices every change, repos are hermetic.
mod repo_fixture;
// `git agent ask` end to end against scripted models.
mod ask;
// Providers (OpenAI, Anthropic), settings files, `git agent config`, and network faults.
mod models;
// Opt-in: a real llama.cpp server (GIT_AGENT_REAL_SERVER=1; see scripts/try-local.sh --test).
mod real_server;
// The tools through the binary: confinement, stale reads, secrets, background jobs, escapes.
mod tools;
// The search tool, called through the binary, against rg itself over a tree of ignore-rule cases.
mod rg_parity;
// Guard, rules, approvals, sandbox and the secret canary.
mod safety;
// The command line itself: help, version, usage errors, man pages.
mod cli;
// Sessions in the repo: log, show, diff, undo, resume, accept, discard, push/pull, concurrency, kill -9, gc.
mod sessions;
// A session's objects as packs, not loose files (issue 29): readable by plain git, fsck clean.
mod packs;
// `accept` hardened (atomic writes, links, submodules, markers, hooks) and `accept --commit --series`.
mod accept;
// `review`: hunks taken or left, records in refs/notes/agent-review, feedback on resume, tmux, two clones.
mod review;
// `pr`: push branch, log and notes to a bare remote; the body; a `gh` test double; --stdout; another clone.
mod pr;
// Context engineering: project instructions, pruning and compaction in a small window, loop guards, plan, finish.
mod context;
// The session API the front-ends build on, in-process: turns, steering, per-turn cancel, undo, compaction.
mod session_api;
// `ask --here`: the user's own working tree, HEAD/index/branches untouched, rollback, discard and undo there.
mod here;
// Project memory: remember, injection, confidence, `git agent memory`, push/pull merges, concurrent writers.
mod memory;
// The MCP client against real servers (server-everything, mcp-server-git) and the conformance suite.
mod mcp;
// MCP servers written to misbehave: secrets on stderr, crashes, lies, huge results, escapes.
mod mcp_hostile;
// `git agent acp` against acpx and the Python ACP client, checked against ACP's JSON Schema; a raw client too.
mod acp;
// A session's checkout and id: in-process checkout, the pool, atomic ids, local facts, step 0 limits, locks.
mod lifecycle;
// Step 0 across sessions: untracked files remembered between walks, and every change still captured.
mod step0_cache;
// `git agent chat`: in a real terminal (tmux): streaming, status line, slash commands, cancel, steering,
// approvals; and piped, one turn a line.
mod chat;
// `git agent fix`: the check on the working tree, the index or a commit, the attempt loop, its log and JSON.
mod fix;
// `git agent hook`: real git hooks (pre-commit, pre-push) running the check and the agent; chaining,
// core.hooksPath, husky and lefthook, the pre-commit framework.
mod hooks;
// Language servers: diagnostics after edits (pyright), lsp queries and rename (TypeScript, clangd), trust, crashes.
mod lsp;
// `git agent trust`: a fresh clone's check and .mcp.json run nothing until trusted; changes need trust again.
mod trust;
// One event stream: `show` replays what `ask` printed; logs written before it still show and resume.
mod events;
// Skills: on disk and in refs/agent/skills, the catalog, load_skill, counts, export against the reference
// validator, push/pull, distill.
mod skills;
// The explore subagent: concurrent read-only children, refusals, budgets, the log.
mod explore;
// Cost: tokens times prices in --json, log, show and the session log; --max-cost; stats over pulled sessions.
mod cost;
// Images in: --image and read_file of a PNG as image blocks on both wire formats, the size cap, vision = false,
// show and --resume from the image's blob in the session log.
mod images;
// web_fetch against pages served on 127.0.0.1: Markdown, private addresses and redirects, big pages, --no-network.
mod web;
// A hostile collaborator's refs: pull as a quarantine, the tree path policy on every landing, size limits.
mod hostile;
// Text from outside (issue 22, 8-10): printers neutralise, commit prose has only our trailers, decoded
// redaction; edited hooks kept, long PR bodies to glab/tea, `review --send=-x`, every prompt in a PR body.
mod untrusted_text;
// Data from outside, second audit of issue 22: pulled review comments quoted with their remote, a clone's
// huge files skipped by one bounded reader, a piped prompt that is not UTF-8.
mod pulled_data;
// `git agent exec`: Codex's exec arguments and JSONL events, and the real @openai/codex-sdk driving it.
mod exec;
// `git agent fleet`: a queue in a bare remote's refs, claims, leases, faults, status, gc and emitted files.
mod fleet;
// Event hooks (issue 26): Claude Code's and Codex's hook files around a session's calls, under trust.
mod event_hooks;
// Subagents (`agent` tool, `git agent agents`) and commands from files in ask and piped chat.
mod subagents;
// Phase timings (GIT_AGENT_TIMINGS): one JSON line per phase with the switch, none without.
mod timings;
