//! The policy for tools of MCP servers: what the user's rules say first (`Mcp(<server>/<tool>)`, deny
//! winning), then the server's own word: a tool annotated `readOnlyHint` runs like `read_file`, any other is
//! treated like a risky `run` command and needs the user's approval (refused under `--yes` unless a rule
//! allows it). The hint is the server's claim; it is trusted as far as the user trusted the server by
//! configuring it.

use super::{Call, Decision, Policy, Ruling};

impl Policy {
    pub(super) fn check_mcp(
        &self,
        call: &Call<'_>,
        server: &str,
        tool: &str,
        read_only: bool,
    ) -> Decision {
        if let Some(rule) = self.rules.deny_mcp(call) {
            return Decision::deny(
                rule.text.clone(),
                format!("`{server}/{tool}` is denied by the user's rules"),
            );
        }
        if let Some(rule) = self.rules.allow_mcp(call) {
            return Decision::allow(rule.text.clone());
        }
        let subject = subject(server, tool);
        if read_only || self.always.contains(&subject) {
            return Decision::allow("default");
        }
        Decision {
            outcome: Ruling::Ask,
            rule: "approval".into(),
            reason: format!(
                "`{tool}` of MCP server `{server}` is not marked read-only, so it may change things; \
                 allow it with --allow 'Mcp({server}/{tool})'"
            ),
        }
    }
}

/// What an approval of an MCP call is about (and what "always" remembers): `<server>/<tool>`.
pub fn subject(server: &str, tool: &str) -> String {
    format!("{server}/{tool}")
}

#[cfg(test)]
mod tests {
    use super::super::rules::Rules;
    use super::super::{Action, Answer, Kind};
    use super::*;
    use crate::safety::guard::GuardEnv;
    use std::path::PathBuf;

    fn policy(allow: &[&str], deny: &[&str]) -> Policy {
        let guard = GuardEnv {
            checkout: PathBuf::from("/r"),
            repo_root: PathBuf::from("/r"),
            common_dir: PathBuf::from("/r/.git"),
            home: None,
            session_branch: "agent/a1".into(),
        };
        Policy::new(Rules::from_lists(allow, deny).expect("valid rules"), guard)
    }

    fn call<'a>(server: &'a str, tool: &'a str, read_only: bool) -> Call<'a> {
        Call {
            tool: "mcp__x__y",
            kind: if read_only { Kind::Read } else { Kind::Other },
            action: Action::Mcp {
                server,
                tool,
                read_only,
            },
        }
    }

    #[test]
    fn read_only_tools_run_others_ask() {
        let mut p = policy(&[], &[]);
        assert_eq!(
            p.check(&call("git", "git_status", true)).outcome,
            Ruling::Allow
        );
        let asked = p.check(&call("git", "git_commit", false));
        assert_eq!(asked.outcome, Ruling::Ask);
        assert!(
            asked.reason.contains("Mcp(git/git_commit)"),
            "{}",
            asked.reason
        );
        let refused = p.settle(&subject("git", "git_commit"), asked, Answer::CannotAsk);
        assert!(refused.is_denied());
        let asked = p.check(&call("git", "git_commit", false));
        let always = p.settle(&subject("git", "git_commit"), asked, Answer::Always);
        assert_eq!(always.outcome, Ruling::Approved);
        assert_eq!(
            p.check(&call("git", "git_commit", false)).outcome,
            Ruling::Allow
        );
    }

    #[test]
    fn mcp_rules_match_server_and_tool() {
        let p = policy(
            &["Mcp(git/*)", "Mcp(*/search_*)"],
            &["Mcp(git/git_reset)", "Mcp(web)"],
        );
        let d = p.check(&call("git", "git_commit", false));
        assert_eq!((d.outcome, d.rule.as_str()), (Ruling::Allow, "Mcp(git/*)"));
        let d = p.check(&call("git", "git_reset", false));
        assert_eq!(
            (d.outcome, d.rule.as_str()),
            (Ruling::Deny, "Mcp(git/git_reset)")
        );
        let d = p.check(&call("docs", "search_pages", false));
        assert_eq!(d.rule, "Mcp(*/search_*)");
        // A server name alone covers all its tools, read-only ones too.
        assert!(p.check(&call("web", "fetch", true)).is_denied());
        let bare = policy(&[], &["Mcp"]);
        assert!(bare.check(&call("git", "git_status", true)).is_denied());
        assert!(Rules::from_lists(&["Mcp(a/b)"], &[] as &[&str]).is_ok());
    }
}
