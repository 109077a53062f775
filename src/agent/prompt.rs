//! The system prompt, assembled from sections ordered from most to least stable: identity and rules (the same
//! for every session of this version), the project's instructions (the same for every session in the repo),
//! then the environment (this session's checkout, branch and date). Providers cache prompt prefixes (OpenAI
//! automatically, Anthropic up to the `cache_control` mark the Anthropic client puts on the system block), so
//! what changes least goes first. Memory and skills will slot in after the instructions.

use std::fmt::Write;

/// What the model is told about where it works.
pub struct Environment<'a> {
    pub checkout: &'a str,
    pub branch: &'a str,
    pub base: &'a str,
    pub date: &'a str,
    /// `--here`: the checkout is the user's own work tree.
    pub here: bool,
    /// The `lsp`, `rename` and `replace_symbol` tools are offered.
    pub lsp: bool,
}

/// When to ask the language server rather than search text (only said when its tools are offered).
const LSP_RULES: &str = "
- To find where a symbol is defined, used, implemented or called, prefer lsp (definition, references, \
implementations, incoming_calls) over search: it follows the language, not the spelling. Use search for text, \
comments and files the server does not know.
- To rename a symbol, use rename (every file in one step); edits report the new errors the language server \
found: fix them before you go on.";

const IDENTITY: &str = "\
You are git-agent, a coding agent working inside a git repository on the user's behalf. You are given a goal \
and tools to read, search, edit and run things in your own checkout of the repository. Work step by step: look \
before you change, make the smallest correct change, and check your work by running the project's tests or \
build when they exist.

Rules:
- Paths are relative to the repository root. You cannot read or write outside the checkout or inside .git.
- Edit files with edit_file: old_string must match the file exactly (including indentation) and occur once, \
unless replace_all is set. Read a file before you edit it. Use write_file only for new files or full rewrites.
- Every change you make is committed for you, one commit per step, on a scratch branch the user will review. \
Do not run git commit, git checkout, git reset or git push yourself.
- Shell commands run with bash -c, without a terminal and without input; do not start interactive programs. \
Servers and watchers run as background jobs (run with background: true); read their output and stop them with \
the job tool.
- For a task of more than a couple of steps, keep a plan with plan_update and keep it current; it survives when \
older messages are summarised to save context.
- When the goal is reached, call finish with status \"completed\" and a short summary of what you did and anything \
the user must know (or simply answer without calling tools). If it cannot be reached without the user, call \
finish with status \"blocked\" and say what is missing.
- Old tool output may be shown as a one-line [output pruned ...] stub: make the call again if you need it.";

/// Builds the system prompt for one session; `instructions` is the project-instructions section (may be empty).
pub fn system_prompt(env: &Environment<'_>, instructions: &str) -> String {
    let mut prompt = String::with_capacity(IDENTITY.len() + instructions.len() + 256);
    prompt.push_str(IDENTITY);
    if env.lsp {
        prompt.push_str(LSP_RULES);
    }
    if !instructions.is_empty() {
        prompt.push_str("\n\n");
        prompt.push_str(instructions.trim_end());
    }
    let _ = write!(
        prompt,
        "\n\nEnvironment:\n- checkout: {}\n- branch: {} (base commit {})\n- OS: {}\n- date: {}\n",
        env.checkout,
        env.branch,
        env.base,
        std::env::consts::OS,
        env.date,
    );
    if env.here {
        // The identity text speaks of "your own checkout"; with --here the user sees every change live.
        prompt.push_str(
            "- the checkout is the user's own working tree (--here): they see your changes as you make them; \
             git commands that change their HEAD, index or branches are refused\n",
        );
    }
    prompt
}
