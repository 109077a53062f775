//! A tool call as the policy sees it: plain data, so safety knows no tool, and the rules read it without
//! reaching back into the policy that holds them.

/// A tool call as the policy sees it. Plain data, so safety knows no tool: the tool says what kind it is and
/// which of its arguments is a command line or a path (`tools::Tool::checked`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Call<'a> {
    /// The tool's name, for rules that name one tool (`read_file`, `run`) and for messages.
    pub tool: &'a str,
    pub kind: Kind,
    pub action: Action<'a>,
}

/// What kind of tool makes a call, as the rule families see it: `Read(...)` covers reading and searching tools,
/// `Edit(...)` editing ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Read,
    Edit,
    Other,
}

/// What a call acts on, as far as the rules and the guard care.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action<'a> {
    /// A shell command line: the guard inspects it and the `Run(...)` rules match its commands.
    Command(&'a str),
    /// The file or directory the call works on: path rules and the sensitive-file check.
    Path(&'a str),
    /// Nothing but the tool itself.
    Other,
    /// A tool of an MCP server (see [`super::mcp`]): `Mcp(<server>/<tool>)` rules, and approval unless the server
    /// marks it read-only.
    Mcp {
        server: &'a str,
        tool: &'a str,
        read_only: bool,
    },
}
