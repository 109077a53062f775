//! Safety checks that sit in front of every tool call: path confinement ([`path`] checks what the model
//! named, [`beneath`] opens it without following anything swapped in since), permission rules, the shell
//! guard, the sandbox of `run` commands, secret names and the scrubbing of child environments ([`secrets`]),
//! secret redaction ([`redact`]) and which files stay out of commits ([`withhold`]).
//!
//! [`Policy::check()`] decides every call before it runs and says which rule decided, so the session log can
//! audit refused calls as well as permitted ones. A risky call that no rule settles comes back as
//! [`Ruling::Ask`]: the caller puts the question to the front-end's [`crate::protocol::Approver`] and hands
//! the answer to [`Policy::settle()`]. This module decides; it never reads or writes the terminal.

pub(crate) mod beneath;
pub(crate) mod bounded;
mod call;
pub(crate) mod guard;
pub mod isolate;
pub(crate) mod mcp;
pub(crate) mod path;
pub mod quote;
pub(crate) mod redact;
pub mod rules;
pub mod sandbox;
pub(crate) mod scratch;
pub mod secrets;
pub(crate) mod shell;
pub mod tree_path;
pub(crate) mod withhold;

use std::path::{Path, PathBuf};

pub use call::{Action, Call, Kind};
use guard::GuardEnv;
use rules::Rules;

/// What happened to a tool call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ruling {
    Allow,
    Deny,
    /// Allowed once the user said yes.
    Approved,
    /// Risky and not settled by a rule: the user must be asked (see [`Policy::settle()`]).
    Ask,
}

impl Ruling {
    pub fn as_str(self) -> &'static str {
        match self {
            Ruling::Allow => "allow",
            Ruling::Deny => "deny",
            Ruling::Approved => "approved",
            Ruling::Ask => "ask",
        }
    }
}

/// The decision on one call, for the model, the terminal and the audit record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    pub outcome: Ruling,
    /// The rule that decided: a permission rule as written (`Run(cargo test*)`), `guard:<name>`,
    /// `sensitive-file`, `approval`, or `default`.
    pub rule: String,
    /// Why, in a sentence (empty for a plain default allow).
    pub reason: String,
}

impl Decision {
    fn allow(rule: impl Into<String>) -> Decision {
        Decision {
            outcome: Ruling::Allow,
            rule: rule.into(),
            reason: String::new(),
        }
    }

    fn deny(rule: impl Into<String>, reason: impl Into<String>) -> Decision {
        Decision {
            outcome: Ruling::Deny,
            rule: rule.into(),
            reason: reason.into(),
        }
    }

    pub fn is_denied(&self) -> bool {
        self.outcome == Ruling::Deny
    }

    /// True when the user must be asked before the call runs.
    pub fn needs_approval(&self) -> bool {
        self.outcome == Ruling::Ask
    }

    /// The tool result the model gets for a refused call: what and why, and not to work around it.
    pub fn message_for_model(&self) -> String {
        format!(
            "blocked by {}: {}. Do not try to achieve the same effect another way (other commands, scripts, \
             encodings); if it is really needed, stop and ask the user to do it or to allow it.",
            self.rule, self.reason
        )
    }
}

/// The user's answer to a question about a risky call, as far as the decision goes. (The front-ends' own
/// vocabulary is `protocol::Approval`; safety stays a leaf, so the agent translates.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    Once,
    /// This call and the same command again this session.
    Always,
    Declined,
    /// The turn was cancelled while the question was open.
    Cancelled,
    /// Nobody can be asked (`--yes`, `--json`, no terminal, a hook).
    CannotAsk,
}

/// Everything that decides a call: rules, the guard's view of the session, and the user's earlier answers.
pub struct Policy {
    pub rules: Rules,
    pub guard: GuardEnv,
    /// Commands the user answered "always" for, this session.
    always: Vec<String>,
}

impl Policy {
    pub fn new(rules: Rules, guard: GuardEnv) -> Policy {
        Policy {
            rules,
            guard,
            always: Vec::new(),
        }
    }

    /// Decides one tool call. [`Ruling::Ask`] means the user must be asked.
    pub fn check(&self, call: &Call<'_>) -> Decision {
        if let Some(rule) = self.rules.deny_tool(call) {
            return Decision::deny(
                rule.text.clone(),
                format!("the `{}` tool is denied by the user's rules", call.tool),
            );
        }
        match call.action {
            Action::Command(command) => self.check_run(call, command),
            Action::Path(path) => self.check_path(call, path),
            Action::Other => Decision::allow("default"),
            Action::Mcp {
                server,
                tool,
                read_only,
            } => self.check_mcp(call, server, tool, read_only),
        }
    }

    fn check_run(&self, call: &Call<'_>, command: &str) -> Decision {
        let inspection = match guard::inspect(command, &self.guard) {
            Ok(found) => found,
            Err(blocked) => {
                return Decision::deny(format!("guard:{}", blocked.rule), blocked.reason)
            }
        };
        if let Some((rule, cmd)) = self.rules.deny_commands(call, &inspection.commands) {
            return Decision::deny(
                rule.text.clone(),
                format!("`{cmd}` is denied by the user's rules"),
            );
        }
        if let Some(rules) = self.rules.allow_commands(call, &inspection.commands) {
            let mut names: Vec<&str> = rules.iter().map(|r| r.text.as_str()).collect();
            names.dedup();
            return Decision::allow(names.join(", "));
        }
        if inspection.risky.is_empty() || self.always.iter().any(|c| c == command) {
            return Decision::allow("default");
        }
        Decision {
            outcome: Ruling::Ask,
            rule: "approval".into(),
            reason: inspection.risky.join("; "),
        }
    }

    /// Turns an [`Ruling::Ask`] decision on `command` into the final one, given the user's answer.
    pub fn settle(&mut self, command: &str, asked: Decision, answer: Answer) -> Decision {
        let why = asked.reason;
        let approved = |rule: &str, why: String| Decision {
            outcome: Ruling::Approved,
            rule: rule.into(),
            reason: why,
        };
        match answer {
            Answer::Once => approved("approval", why),
            Answer::Always => {
                self.always.push(command.to_string());
                approved("approval:always", why)
            }
            Answer::Declined => Decision::deny("approval", format!("{why}; the user declined")),
            Answer::Cancelled => {
                Decision::deny("approval", format!("{why}; the user cancelled the turn"))
            }
            Answer::CannotAsk => Decision::deny(
                "approval",
                format!("{why}; this needs the user's approval and this run cannot ask (--yes or no terminal); \
                         the user can allow it with --allow 'Run(...)' or [permissions] allow"),
            ),
        }
    }

    fn check_path(&self, call: &Call<'_>, path: &str) -> Decision {
        let root = &self.guard.checkout;
        let rel = Path::new(path);
        let rel = rel.strip_prefix(root).unwrap_or(rel);
        let abs: PathBuf = root.join(rel);
        let home = self.guard.home.as_deref();
        if let Some(rule) = self.rules.deny_path(call, rel, &abs, home) {
            return Decision::deny(
                rule.text.clone(),
                format!("`{path}` is denied by the user's rules"),
            );
        }
        let allowed = self.rules.allow_path(call, rel, &abs, home);
        let sensitive = withhold::sensitive_path(rel)
            .map(|what| format!("is {what}"))
            .or_else(|| sensitive_target(root, &abs).map(|what| format!("is a link to {what}")));
        if let Some(what) = sensitive {
            return match allowed {
                Some(rule) => Decision::allow(rule.text.clone()),
                None => Decision::deny(
                    "sensitive-file",
                    format!("`{path}` {what}, which the file tools do not open unless the user allows it (e.g. --allow 'Read({path})')"),
                ),
            };
        }
        Decision::allow(allowed.map_or("default".to_string(), |r| r.text.clone()))
    }
}

/// The sensitive-file rule applied to where `abs` leads when a link is on the way: `notes.txt` -> `.env` or
/// `key.txt` -> `id_ed25519` (a link a cloned repository can commit) must not open what the rule refuses by
/// name, to `read_file`, `search` or `list_files` alike (issue 23, finding 3). `None` when nothing there
/// resolves differently or the path does not exist.
fn sensitive_target(root: &Path, abs: &Path) -> Option<&'static str> {
    let target = std::fs::canonicalize(abs).ok()?;
    let root = std::fs::canonicalize(root).ok()?;
    let rel = target.strip_prefix(&root).unwrap_or(&target);
    withhold::sensitive_path(rel)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(command: &str) -> Call<'_> {
        Call {
            tool: "run",
            kind: Kind::Other,
            action: Action::Command(command),
        }
    }

    fn file<'a>(tool: &'a str, path: &'a str) -> Call<'a> {
        let kind = match tool {
            "read_file" => Kind::Read,
            _ => Kind::Edit,
        };
        Call {
            tool,
            kind,
            action: Action::Path(path),
        }
    }

    fn policy(allow: &[&str], deny: &[&str]) -> Policy {
        let guard = GuardEnv {
            checkout: PathBuf::from("/r/.git/agent/worktrees/a1"),
            repo_root: PathBuf::from("/r"),
            common_dir: PathBuf::from("/r/.git"),
            home: Some(PathBuf::from("/home/u")),
            session_branch: "agent/a1".into(),
        };
        Policy::new(Rules::from_lists(allow, deny).unwrap(), guard)
    }

    #[test]
    fn decisions_name_their_rule() {
        let mut p = policy(
            &["Run(cargo test*)", "Read(.env)"],
            &["Run(curl:*)", "Edit(**/secrets/**)"],
        );
        let run = |p: &mut Policy, c: &str| p.check(&run(c));
        assert_eq!(run(&mut p, "cargo test").rule, "Run(cargo test*)");
        assert_eq!(run(&mut p, "ls").rule, "default");
        let d = run(&mut p, "cargo test && curl x | sh");
        assert!(d.is_denied());
        assert_eq!(d.rule, "guard:uninspectable");
        let d = run(&mut p, "cargo test; curl -o x https://e.x");
        assert_eq!((d.outcome, d.rule.as_str()), (Ruling::Deny, "Run(curl:*)"));
        let d = run(&mut p, "git push origin agent/a1");
        assert_eq!((d.outcome, d.rule.as_str()), (Ruling::Ask, "approval"));
        let d = p.settle("git push origin agent/a1", d, Answer::CannotAsk);
        assert_eq!((d.outcome, d.rule.as_str()), (Ruling::Deny, "approval"));
        assert!(d.message_for_model().contains("ask the user"));
        assert!(!p.check(&file("read_file", ".env")).is_denied());
        let d = p.check(&file("edit_file", ".env"));
        assert_eq!(d.rule, "sensitive-file");
        assert_eq!(
            p.check(&file("write_file", "a/secrets/x")).rule,
            "Edit(**/secrets/**)"
        );
        assert_eq!(
            p.check(&file("read_file", "certs/k.pem")).rule,
            "sensitive-file"
        );
        assert!(!p.check(&file("read_file", "src/main.rs")).is_denied());
    }

    #[test]
    fn answers_settle_what_needs_asking() {
        let mut p = policy(&[], &[]);
        let push = "git push origin agent/a1";
        let ask = |p: &mut Policy| p.check(&run(push));
        let d = ask(&mut p);
        assert!(d.needs_approval());
        assert_eq!(p.settle(push, d, Answer::Once).outcome, Ruling::Approved);
        let d = ask(&mut p);
        assert!(p.settle(push, d, Answer::Declined).is_denied());
        let d = ask(&mut p);
        assert!(p.settle(push, d, Answer::Cancelled).is_denied());
        let d = ask(&mut p);
        assert_eq!(p.settle(push, d, Answer::Always).rule, "approval:always");
        // "always" holds for the rest of the session: no second question.
        assert_eq!(ask(&mut p).outcome, Ruling::Allow);
    }

    #[test]
    fn allowed_risky_commands_do_not_ask() {
        let p = policy(&["Run(git push:*)"], &[]);
        let d = p.check(&run("git push origin agent/a1"));
        assert_eq!(
            (d.outcome, d.rule.as_str()),
            (Ruling::Allow, "Run(git push:*)")
        );
        let p = policy(&[], &["run"]);
        assert_eq!(p.check(&run("ls")).rule, "run");
    }
}
