//! Sharing sessions through a remote: the refspecs, the secret check before a push, and the notes merge after
//! a fetch. The transport is the git CLI (it knows the user's remotes, credentials and protocols).

use std::ffi::OsStr;

use super::{ObjectId, Store, StoreError, NOTES_REF};

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

    /// The first blob reachable from the refs `push` shares (and not from the user's own branches, tags or
    /// remote-tracking refs) that contains one of `secrets` (name, value): (its name, the blob).
    pub fn find_secret<'a>(
        &self,
        secrets: &'a [(String, String)],
    ) -> Result<Option<(&'a str, ObjectId)>, StoreError> {
        if secrets.is_empty() {
            return Ok(None);
        }
        let mut args = vec![
            "rev-list",
            "--objects",
            "--no-object-names",
            "--glob=refs/agent/*",
            "--glob=refs/heads/agent/*",
        ];
        if self.repo.try_find_reference(NOTES_REF)?.is_some() {
            args.push(NOTES_REF);
        }
        args.extend([
            "--not",
            "--exclude=agent/*",
            "--branches",
            "--tags",
            "--remotes",
        ]);
        let out = self.git_output(&args)?;
        for line in out.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            let Ok(id) = ObjectId::from_hex(line) else {
                continue;
            };
            let object = self.repo.find_object(id)?;
            if object.kind != gix::object::Kind::Blob {
                continue;
            }
            for (name, value) in secrets {
                if contains(&object.data, value.as_bytes()) {
                    return Ok(Some((name.as_str(), id)));
                }
            }
        }
        Ok(None)
    }

    /// The commit `name` points to, if the ref exists.
    pub fn ref_target(&self, name: &str) -> Result<Option<ObjectId>, StoreError> {
        match self.repo.try_find_reference(name)? {
            Some(mut r) => Ok(Some(r.peel_to_id()?.detach())),
            None => Ok(None),
        }
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}

/// Key values from the environment (`*_API_KEY`, `*_TOKEN`, `*_SECRET`, 8 characters or more), by name.
pub fn env_secrets() -> Vec<(String, String)> {
    std::env::vars()
        .filter(|(name, value)| {
            let name = name.to_ascii_uppercase();
            (name.ends_with("_API_KEY") || name.ends_with("_TOKEN") || name.ends_with("_SECRET"))
                && value.trim().len() >= 8
        })
        .map(|(name, value)| (name, value.trim().to_owned()))
        .collect()
}
