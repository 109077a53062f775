//! `git agent agents`: the subagents defined in files, each with the file it comes from, so a user can see
//! what the `agent` tool offers the model before a session does (issue 26).

use clap::Args;

use super::context::Context;
use super::error::CommandError;
use crate::config::agent_files;
use crate::protocol::neutralize;

/// List the subagents defined in files and where each comes from
///
/// Subagents live in .claude/agents/*.md and .agents/agents/*.md (front matter name, description, tools,
/// model; the body is the system prompt) and .codex/agents/*.toml, in the repository and in your home
/// directory; the repository's win on a name found twice. A session offers them to the model through the
/// `agent` tool; a subagent's tools can only narrow the session's.
#[derive(Debug, Args)]
pub struct AgentsArgs {
    /// Print one JSON object per subagent (name, description, tools, model, source)
    #[arg(long)]
    json: bool,
}

pub fn run(ctx: &Context, args: AgentsArgs) -> Result<(), CommandError> {
    let store = ctx.store()?;
    let home = dirs::home_dir();
    let (agents, problems) = agent_files::load_agents(store.workdir(), home.as_deref());
    for problem in &problems {
        eprintln!("warning: subagent skipped: {}", neutralize(problem));
    }
    if args.json {
        for a in &agents {
            let line = serde_json::json!({"name": a.name, "description": a.description,
                "tools": a.tools, "model": a.model, "source": a.source});
            // A cloned repository's file: bidi controls escaped like every other `--json` printer's.
            println!("{}", crate::protocol::json_for_terminal(line.to_string()));
        }
        return Ok(());
    }
    if agents.is_empty() {
        println!("no subagents: define one in .claude/agents/<name>.md (front matter name, description, tools; the body is its prompt)");
        return Ok(());
    }
    for a in &agents {
        let tools = a
            .tools
            .as_ref()
            .map_or_else(|| "all tools".to_owned(), |t| t.join(", "));
        let model = a.model.as_deref().unwrap_or("the session's model");
        println!("{}  {}", neutralize(&a.name), neutralize(&a.source));
        println!("  {}", neutralize(&a.description));
        println!(
            "  tools: {}; model: {}",
            neutralize(&tools),
            neutralize(model)
        );
    }
    Ok(())
}
