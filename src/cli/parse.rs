//! Parsing the command line without building every subcommand.
//!
//! clap's derive builds the whole command tree (twenty subcommands, every flag and its help) before it looks at
//! the first argument; that was most of the memory `git agent ask` touched before it did anything. When the
//! first argument names a subcommand, only that one is built, under a top level with the derive's settings;
//! anything else (`--help`, `help ask`, a typo to suggest a fix for) goes through the whole tree. The tests
//! check that each subcommand alone renders and parses exactly as it does inside the tree.

use clap::{Args, FromArgMatches, Parser, Subcommand};

use super::{
    accept, acp, agents, ask, chat, config, diff, discard, exec, fix, fleet, gc, hook, log, lsp,
    mcp, memory, pr, pull, push, review, show, skill, stats, trust, undo,
};

/// A git-native coding agent: `git agent ask "goal"` works on a scratch branch, one commit per step
#[derive(Debug, Parser)]
#[command(
    name = "git-agent",
    bin_name = "git agent",
    version,
    propagate_version = true
)]
#[command(after_help = "See 'git help agent' (man git-agent) for the full manual.")]
pub struct Cli {
    #[command(subcommand)]
    pub(super) command: Command,
}

#[derive(Debug, Subcommand)]
pub(super) enum Command {
    Ask(ask::AskArgs),
    Acp(acp::AcpArgs),
    Agents(agents::AgentsArgs),
    Chat(chat::ChatArgs),
    Exec(exec::ExecArgs),
    Config(config::ConfigArgs),
    Log(log::LogArgs),
    Show(show::ShowArgs),
    Diff(diff::DiffArgs),
    Undo(undo::UndoArgs),
    Accept(accept::AcceptArgs),
    Review(review::ReviewArgs),
    Pr(pr::PrArgs),
    Discard(discard::DiscardArgs),
    Fix(fix::FixArgs),
    Fleet(fleet::FleetArgs),
    Hook(hook::HookArgs),
    Gc(gc::GcArgs),
    Mcp(mcp::McpArgs),
    Memory(memory::MemoryArgs),
    Push(push::PushArgs),
    Pull(pull::PullArgs),
    Skill(skill::SkillArgs),
    Stats(stats::StatsArgs),
    Trust(trust::TrustArgs),
    Lsp(lsp::LspArgs),
}

impl Command {
    /// True when the command was asked for JSON events on stdout.
    pub(super) fn json(&self) -> bool {
        match self {
            Command::Ask(args) => args.session.json,
            Command::Chat(args) => args.session.json,
            Command::Fix(args) => args.session.json,
            _ => false,
        }
    }
}

/// The command line as [`Cli`], or clap's error (help and version requests included).
pub(super) fn parse() -> Result<Cli, clap::Error> {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    parse_from(args)
}

fn parse_from(args: Vec<std::ffi::OsString>) -> Result<Cli, clap::Error> {
    let alone = args.get(1).and_then(|a| a.to_str()).and_then(subcommand);
    match alone {
        Some(sub) => {
            let mut matches = top().subcommand(sub).try_get_matches_from(args)?;
            Cli::from_arg_matches_mut(&mut matches)
        }
        None => <Cli as clap::Parser>::try_parse_from(args),
    }
}

/// The top level as the derive on [`Cli`] makes it, without its subcommands.
fn top() -> clap::Command {
    clap::Command::new("git-agent")
        .bin_name("git agent")
        .version(env!("CARGO_PKG_VERSION"))
        .propagate_version(true)
        .subcommand_required(true)
        .arg_required_else_help(true)
}

/// Subcommand `name` on its own, as the derive on [`Command`] builds it inside the tree.
fn subcommand(name: &str) -> Option<clap::Command> {
    fn one<A: Args>(name: &'static str) -> clap::Command {
        A::augment_args(clap::Command::new(name))
    }
    Some(match name {
        "ask" => one::<ask::AskArgs>("ask"),
        "acp" => one::<acp::AcpArgs>("acp"),
        "agents" => one::<agents::AgentsArgs>("agents"),
        "chat" => one::<chat::ChatArgs>("chat"),
        "exec" => one::<exec::ExecArgs>("exec"),
        "config" => one::<config::ConfigArgs>("config"),
        "log" => one::<log::LogArgs>("log"),
        "show" => one::<show::ShowArgs>("show"),
        "diff" => one::<diff::DiffArgs>("diff"),
        "undo" => one::<undo::UndoArgs>("undo"),
        "accept" => one::<accept::AcceptArgs>("accept"),
        "review" => one::<review::ReviewArgs>("review"),
        "pr" => one::<pr::PrArgs>("pr"),
        "discard" => one::<discard::DiscardArgs>("discard"),
        "fix" => one::<fix::FixArgs>("fix"),
        "fleet" => one::<fleet::FleetArgs>("fleet"),
        "hook" => one::<hook::HookArgs>("hook"),
        "gc" => one::<gc::GcArgs>("gc"),
        "mcp" => one::<mcp::McpArgs>("mcp"),
        "memory" => one::<memory::MemoryArgs>("memory"),
        "push" => one::<push::PushArgs>("push"),
        "pull" => one::<pull::PullArgs>("pull"),
        "skill" => one::<skill::SkillArgs>("skill"),
        "stats" => one::<stats::StatsArgs>("stats"),
        "trust" => one::<trust::TrustArgs>("trust"),
        "lsp" => one::<lsp::LspArgs>("lsp"),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn names() -> Vec<String> {
        Cli::command()
            .get_subcommands()
            .map(|s| s.get_name().to_owned())
            .collect()
    }

    /// Subcommand `name`'s help (and its subcommands') as the whole tree renders it, and as it renders alone.
    fn helps(name: &str, path: &[&str]) -> (String, String) {
        let render = |mut cmd: clap::Command| {
            cmd.build();
            let mut sub = cmd.find_subcommand_mut(name).unwrap().clone();
            for p in path {
                sub = sub.find_subcommand_mut(p).unwrap().clone();
            }
            sub.render_long_help().to_string()
        };
        (
            render(Cli::command()),
            render(top().subcommand(subcommand(name).unwrap())),
        )
    }

    #[test]
    fn every_subcommand_alone_renders_as_in_the_tree() {
        let names = names();
        assert!(names.len() >= 20, "{names:?}");
        for name in &names {
            let (tree, alone) = helps(name, &[]);
            assert_eq!(alone, tree, "`{name} --help`");
            let mut full = Cli::command();
            full.build();
            let nested: Vec<String> = full
                .find_subcommand(name)
                .unwrap()
                .get_subcommands()
                .map(|s| s.get_name().to_owned())
                .collect();
            for sub in nested {
                let (tree, alone) = helps(name, &[&sub]);
                assert_eq!(alone, tree, "`{name} {sub} --help`");
            }
        }
    }

    #[test]
    fn lines_parse_and_fail_alike_either_way() {
        let lines: &[&[&str]] = &[
            &["ask", "fix the test"],
            &["ask", "--json", "--max-steps", "3", "goal"],
            &["log"],
            &["show", "abc"],
            &["memory", "list"],
            &["ask"],
            &["ask", "--no-such-flag", "x"],
            &["log", "--version"],
            &["chat", "--help"],
        ];
        for line in lines {
            let args: Vec<std::ffi::OsString> = std::iter::once("git-agent")
                .chain(line.iter().copied())
                .map(Into::into)
                .collect();
            let alone = parse_from(args.clone());
            let tree = <Cli as clap::Parser>::try_parse_from(args);
            match (alone, tree) {
                (Ok(a), Ok(t)) => assert_eq!(format!("{a:?}"), format!("{t:?}"), "{line:?}"),
                (Err(a), Err(t)) => {
                    assert_eq!(a.kind(), t.kind(), "{line:?}");
                    assert_eq!(a.render().to_string(), t.render().to_string(), "{line:?}");
                }
                (a, t) => panic!("{line:?}: alone {:?}, tree {:?}", a.is_ok(), t.is_ok()),
            }
        }
    }
}
