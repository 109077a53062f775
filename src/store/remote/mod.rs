//! Sessions through a remote: the refspecs and the secret check of a push (`share`), and a pull that checks
//! what the remote sends before any of it is kept (`quarantine`).

pub mod quarantine;
pub(crate) mod share;
