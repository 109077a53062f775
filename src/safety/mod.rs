//! Safety checks that sit in front of every tool call: path confinement ([`path`] checks what the model
//! named, [`beneath`] opens it without following anything swapped in since).

pub mod beneath;
pub mod path;
