//! The store tests' temp repository: made with the git CLI, hermetic, removed on drop. A leaf of its own (the
//! tests of land, review, skills and memory use it), apart from the tests of tests.rs.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::repo::Store;

/// `git status`, the index file's bytes and every work tree file with its bytes.
pub(super) type UserState = (String, Vec<u8>, Vec<(PathBuf, Vec<u8>)>);

/// A temp dir holding a repository, removed on drop (tempfile's `TempDir`; shared with the tests of the store's
/// other modules).
pub(super) struct TestRepo {
    pub(super) dir: PathBuf,
    _temp: tempfile::TempDir,
}

impl TestRepo {
    pub(super) fn new(name: &str) -> TestRepo {
        let temp = tempfile::Builder::new()
            .prefix(&format!("git-agent-store-{name}-"))
            .tempdir()
            .unwrap();
        let dir = std::fs::canonicalize(temp.path()).unwrap();
        let repo = TestRepo { dir, _temp: temp };
        repo.git(&["init", "-q", "-b", "main"]);
        repo.git(&["config", "user.name", "Test User"]);
        repo.git(&["config", "user.email", "test@example.com"]);
        repo
    }

    /// A repository with a first commit of a few files.
    pub(super) fn with_commit(name: &str) -> TestRepo {
        let repo = TestRepo::new(name);
        repo.write("a.txt", "alpha\n");
        repo.write("dir/b.txt", "beta\n");
        repo.write("run.sh", "#!/bin/sh\necho hi\n");
        repo.chmod("run.sh", 0o755);
        repo.write(".gitignore", "*.log\n");
        repo.git(&["add", "-A"]);
        repo.git(&["commit", "-q", "-m", "initial"]);
        repo
    }

    pub(super) fn path(&self, rel: &str) -> PathBuf {
        self.dir.join(rel)
    }

    pub(super) fn write(&self, rel: &str, content: &str) {
        write(&self.dir, rel, content);
    }

    pub(super) fn chmod(&self, rel: &str, mode: u32) {
        std::fs::set_permissions(self.path(rel), std::fs::Permissions::from_mode(mode)).unwrap();
    }

    pub(super) fn git(&self, args: &[&str]) -> String {
        git_in(&self.dir, args)
    }

    pub(super) fn store(&self) -> Store {
        Store::open(&self.dir).unwrap()
    }

    /// What the user sees: status, index bytes and every work tree file's bytes.
    pub(super) fn user_state(&self) -> UserState {
        let status = self.git(&[
            "--no-optional-locks",
            "status",
            "--porcelain",
            "--untracked-files=all",
        ]);
        let index = std::fs::read(self.path(".git/index")).unwrap_or_default();
        let mut files = Vec::new();
        collect(&self.dir, &self.dir, &mut files);
        files.sort();
        (status, index, files)
    }
}

fn collect(root: &Path, dir: &Path, out: &mut Vec<(PathBuf, Vec<u8>)>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let path = entry.path();
        if entry.file_name() == ".git" {
            continue;
        }
        let ft = entry.file_type().unwrap();
        if ft.is_dir() {
            collect(root, &path, out);
        } else if ft.is_symlink() {
            out.push((
                path.strip_prefix(root).unwrap().to_owned(),
                std::fs::read_link(&path)
                    .unwrap()
                    .into_os_string()
                    .into_encoded_bytes(),
            ));
        } else {
            out.push((
                path.strip_prefix(root).unwrap().to_owned(),
                std::fs::read(&path).unwrap(),
            ));
        }
    }
}

pub(super) fn write(root: &Path, rel: &str, content: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
}

/// Run git hermetically (no global or system config, fixed dates) and return stdout.
pub(super) fn git_in(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_DATE", "1700000000 +0000")
        .env("GIT_COMMITTER_DATE", "1700000000 +0000")
        .env("LC_ALL", "C")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}
