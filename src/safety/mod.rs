//! Safety checks that sit in front of every tool call: path confinement for now.

pub mod path;
