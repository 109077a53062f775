//! A session's life after it starts: its log (`refs/agent/sessions/<id>`), what only this repository knows
//! about it (`local`), and resuming, undoing and discarding it (`lifecycle`).

pub(crate) mod lifecycle;
pub(super) mod local;
pub(crate) mod log;
