//! The names MCP tools have for the model: `mcp__<server>__<tool>`, within the rule every provider
//! enforces on function names, `^[a-zA-Z0-9_-]{1,64}$`.
//!
//! Other characters become `_`; a name that would be longer than 64 is cut and ends in a hash of the full
//! server/tool pair, so two long names that share a beginning stay apart. The mapping back to (server, tool)
//! is kept by whoever assigned the name, never parsed out of it (a server may well be called `a__b`).

use std::collections::HashSet;

/// The longest name providers accept.
pub const MAX_LEN: usize = 64;

/// `mcp__<server>__<tool>`, sanitised and at most [`MAX_LEN`] long.
pub fn tool_name(server: &str, tool: &str) -> String {
    let name = format!("mcp__{}__{}", clean(server), clean(tool));
    if name.len() <= MAX_LEN {
        return name;
    }
    with_hash(&name[..MAX_LEN - 9], server, tool)
}

/// Whether a name satisfies the providers' rule.
#[cfg(test)]
pub fn is_valid(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Assigns names that are unique within one session.
#[derive(Debug, Default)]
pub struct Names {
    taken: HashSet<String>,
}

impl Names {
    /// Marks a name as used (the built-in tools' names).
    pub fn reserve(&mut self, name: &str) {
        self.taken.insert(name.to_string());
    }

    /// The name of `tool` of `server`; a clash (two tools that sanitise alike) gets the hash suffix.
    pub fn assign(&mut self, server: &str, tool: &str) -> String {
        let mut name = tool_name(server, tool);
        if self.taken.contains(&name) {
            let keep = name.len().min(MAX_LEN - 9);
            name = with_hash(&name[..keep], server, tool);
        }
        self.taken.insert(name.clone());
        name
    }
}

fn clean(part: &str) -> String {
    let cleaned: String = part
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if cleaned.is_empty() {
        "_".to_string()
    } else {
        cleaned
    }
}

/// `prefix` + `_` + 8 hex digits of FNV-1a over `server/tool` (stable across runs and versions, unlike
/// std's hasher, so a session resumed later sees the same names).
fn with_hash(prefix: &str, server: &str, tool: &str) -> String {
    let mut hash: u32 = 0x811c_9dc5;
    for b in server.bytes().chain([b'/']).chain(tool.bytes()) {
        hash ^= u32::from(b);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    format!("{prefix}_{hash:08x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_pass_through() {
        assert_eq!(tool_name("everything", "echo"), "mcp__everything__echo");
        assert_eq!(tool_name("git", "git_status"), "mcp__git__git_status");
        assert_eq!(tool_name("e", "get-sum"), "mcp__e__get-sum");
    }

    #[test]
    fn other_characters_become_underscores() {
        assert_eq!(
            tool_name("my server", "files.read"),
            "mcp__my_server__files_read"
        );
        assert_eq!(tool_name("ü", "a/b"), "mcp_____a_b");
        assert_eq!(tool_name("", ""), "mcp______");
        assert!(is_valid(&tool_name("weird ☃ name", "tool:with:colons")));
    }

    #[test]
    fn long_names_are_cut_with_a_hash_and_stay_distinct() {
        let long = "x".repeat(80);
        let a = tool_name("server", &format!("{long}a"));
        let b = tool_name("server", &format!("{long}b"));
        assert_eq!(a.len(), MAX_LEN);
        assert_eq!(b.len(), MAX_LEN);
        assert!(is_valid(&a) && is_valid(&b));
        assert_ne!(a, b);
        assert_eq!(a, tool_name("server", &format!("{long}a")), "stable");
    }

    #[test]
    fn clashes_get_distinct_names() {
        let mut names = Names::default();
        let first = names.assign("s", "a.b");
        let second = names.assign("s", "a_b");
        assert_eq!(first, "mcp__s__a_b");
        assert_ne!(first, second);
        assert!(is_valid(&second));
        assert!(second.starts_with("mcp__s__a_b_"));
    }
}
