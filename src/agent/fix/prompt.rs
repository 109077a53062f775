//! What the model is told in a fix session: the goal with the check's output, then after each attempt that
//! did not make it pass, the new output.

use crate::agent::check::CheckRun;

/// The first prompt: the goal, the rules that keep the check honest, and what the check printed.
pub fn first(command: &str, tree: &str, run: &CheckRun) -> String {
    format!(
        "The project's check fails. Make `{command}` pass without weakening it.\n\n\
         The check is the command `{command}`, run from the repository root. It was run on {tree} and ended \
         with {end} after {secs:.1} s. What it printed (stdout and stderr, head and tail):\n\n\
         ```\n{output}\n```\n\n\
         Rules for this task:\n\
         - Fix the code so that the check passes. Do not edit the check or its configuration (.git-agent.toml, \
         the build, test runner, linter or CI settings), do not delete, skip or ignore tests, and do not silence \
         lints or warnings (no #[allow], eslint-disable, noqa, skip or ignore markers) to make it pass.\n\
         - Run `{command}` yourself before you finish, to see that it passes.\n\
         - If it cannot pass without weakening it, or without the user, call finish with status \"blocked\" \
         and say why.\n\
         - When you finish, git-agent runs `{command}` again in your checkout; if it still fails, you get its \
         output and another attempt.",
        end = run.end,
        secs = run.duration.as_secs_f64(),
        output = run.output.trim_end(),
    )
}

/// The prompt after attempt `attempt` (of `max`) left the check failing.
pub fn again(command: &str, attempt: u32, max: u32, run: &CheckRun) -> String {
    format!(
        "git-agent ran `{command}` in your checkout after your changes: it still fails ({end} after \
         {secs:.1} s). What it printed (head and tail):\n\n```\n{output}\n```\n\n\
         Fix it, under the same rules (do not weaken the check). This is attempt {next} of {max}.",
        end = run.end,
        secs = run.duration.as_secs_f64(),
        output = run.output.trim_end(),
        next = attempt + 1,
    )
}
