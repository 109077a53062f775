//! Sharing sessions through a remote: the refspecs and the notes ref a pull fetches into (the notes merge is
//! `Store::merge_notes`; the secret check before a push is `safety::redact::secrets_in_refs`). The transport is the git CLI (it knows the user's remotes, credentials and protocols).

use std::ffi::OsStr;

use super::{ObjectId, Store, StoreError};

/// What `git agent push` pushes: session logs (and later memory and skills), session branches, and notes.
/// Nothing is forced: a remote ref that moved elsewhere is reported, never overwritten.
pub const PUSH_REFSPECS: [&str; 3] = [
    "refs/agent/*:refs/agent/*",
    "refs/heads/agent/*:refs/heads/agent/*",
    "refs/notes/agent:refs/notes/agent",
];

/// Where `git agent pull` fetches the remote's notes before merging them into ours.
pub fn remote_notes_ref(remote: &str) -> String {
    format!("refs/notes/remotes/{remote}/agent")
}

impl Store {
    /// Runs git with `args` in the user's work tree and returns stdout.
    pub fn git_output(&self, args: &[&str]) -> Result<Vec<u8>, StoreError> {
        let args: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
        self.git(self.workdir(), &args)
    }

    /// The commit `name` points to, if the ref exists.
    pub fn ref_target(&self, name: &str) -> Result<Option<ObjectId>, StoreError> {
        match self.repo.try_find_reference(name)? {
            Some(mut r) => Ok(Some(r.peel_to_id()?.detach())),
            None => Ok(None),
        }
    }
}
