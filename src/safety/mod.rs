//! Safety checks that sit in front of every tool call: path confinement, permission rules, the shell guard,
//! the sandbox of `run` commands and secret redaction.

pub mod guard;
pub mod path;
pub mod redact;
pub mod rules;
pub mod secrets;
pub mod shell;
