//! The guard's git rules: history and work that cannot be recovered (force pushes, `reset --hard`, ...),
//! and the state the session's checkout shares with the user's repository (other branches, the stash, config,
//! remotes), or with `--here` the user's own HEAD and index.

use super::super::shell::Word;
use super::{block, has_short, split_options, Checker, Verdict};

impl Checker<'_> {
    /// `elsewhere`: the command runs in a container or on another machine, whose repositories share nothing
    /// with the user's; only the rules against losing work apply there.
    pub(super) fn git(&mut self, args: &[Word], elsewhere: bool) -> Verdict {
        let elsewhere = elsewhere || self.remote > 0;
        let mut i = 0;
        while i < args.len() {
            let a = args[i].text.as_str();
            match a {
                "-c" => {
                    if let Some(kv) = args.get(i + 1) {
                        git_config_override(&kv.text)?;
                    }
                    i += 2;
                }
                "-C" | "--git-dir" | "--work-tree" | "--namespace" | "--exec-path" => i += 2,
                _ if a.starts_with("--config-env=") => {
                    git_config_override(&a["--config-env=".len()..])?;
                    i += 1;
                }
                _ if a.starts_with('-') => i += 1,
                _ => break,
            }
        }
        let Some(sub) = args.get(i) else {
            return Ok(());
        };
        let rest = &args[i + 1..];
        let (flags, operands) = split_options(rest);
        let flag = |long: &str| {
            flags
                .iter()
                .any(|f| f == long || f.starts_with(&format!("{long}=")))
        };
        let short = |c: char| has_short(&flags, c);
        let texts: Vec<&str> = operands.iter().map(|w| w.text.as_str()).collect();
        let first = texts.first().copied().unwrap_or("");
        let shared = |what: &str| {
            if elsewhere {
                return Ok(());
            }
            block(
                "shared-git-state",
                format!("this would write {what}, which the session's checkout shares with the user's repository"),
            )
        };
        if self.env.checkout == self.env.repo_root && !elsewhere {
            if let Some(what) = here_writes(sub.text.as_str(), &flags) {
                return block(
                    "user-index",
                    format!("`git {}` would write {what}; this session works in the user's own working tree (--here), whose HEAD, index and branches are theirs. The agent commits each step to {} itself", sub.text, self.env.session_branch),
                );
            }
        }
        match sub.text.as_str() {
            "push" => {
                if flag("--force")
                    || short('f')
                    || flag("--force-with-lease")
                    || flag("--force-if-includes")
                {
                    return block(
                        "git-force-push",
                        "`git push --force` rewrites history on the remote",
                    );
                }
                if flag("--mirror") {
                    return block(
                        "git-force-push",
                        "`git push --mirror` overwrites every ref on the remote",
                    );
                }
                if flag("--delete")
                    || short('d')
                    || flag("--prune")
                    || texts.iter().any(|r| r.starts_with(':'))
                {
                    return block("git-push-delete", "this push deletes refs on the remote");
                }
                if texts.iter().any(|r| r.starts_with('+')) {
                    return block("git-force-push", "a `+refspec` force-pushes");
                }
                if flag("--no-verify") {
                    return block(
                        "git-no-verify",
                        "`--no-verify` skips the repository's hooks",
                    );
                }
                self.found.risky.push("`git push` publishes commits".into());
                Ok(())
            }
            "commit" => {
                if flag("--no-verify") || short_in(rest, 'n', "mFCct") {
                    return block(
                        "git-no-verify",
                        "`--no-verify` skips the repository's hooks",
                    );
                }
                Ok(())
            }
            "reset" if flag("--hard") || flag("--keep") || flag("--merge") => block(
                "git-reset-hard",
                "`git reset --hard` discards uncommitted work",
            ),
            "checkout" => {
                if flag("--force") || short('f') {
                    return block(
                        "git-discard",
                        "`git checkout --force` discards uncommitted work",
                    );
                }
                if let Some(b) = new_branch(rest, &["-b", "-B", "--orphan"]) {
                    return self.own_branch(&b, "a branch", elsewhere);
                }
                let after_dd = rest.iter().position(|w| w.text == "--");
                let paths: Vec<&str> = match after_dd {
                    Some(p) => rest[p + 1..].iter().map(|w| w.text.as_str()).collect(),
                    None => texts.clone(),
                };
                if paths.iter().any(|p| whole_tree(p)) {
                    return block(
                        "git-discard",
                        "`git checkout -- .` discards uncommitted work",
                    );
                }
                Ok(())
            }
            "switch" => match new_branch(
                rest,
                &["-c", "-C", "--create", "--force-create", "--orphan"],
            ) {
                Some(b) => self.own_branch(&b, "a branch", elsewhere),
                None if flag("--discard-changes") || short('f') || flag("--force") => block(
                    "git-discard",
                    "`git switch --discard-changes` discards uncommitted work",
                ),
                None => Ok(()),
            },
            "restore" => {
                if texts.iter().any(|p| whole_tree(p)) && !flag("--staged")
                    || (flag("--worktree") && texts.iter().any(|p| whole_tree(p)))
                {
                    return block("git-discard", "`git restore .` discards uncommitted work");
                }
                Ok(())
            }
            "clean" if (short('f') || flag("--force")) && !(short('n') || flag("--dry-run")) => {
                block("git-clean", "`git clean -f` deletes untracked files")
            }
            "stash" => match first {
                "" | "push" | "save" | "pop" | "drop" | "clear" | "store" | "branch" => {
                    if matches!(first, "drop" | "clear") {
                        block(
                            "git-stash-drop",
                            "`git stash drop/clear` destroys stashed work",
                        )
                    } else {
                        shared("the stash")
                    }
                }
                _ => Ok(()),
            },
            "branch" => {
                if short('D') || (short('d') && short('f')) || flag("--delete") || short('d') {
                    return block(
                        "git-branch-delete",
                        "deleting a branch loses the user's work",
                    );
                }
                let writes = short('m')
                    || short('M')
                    || short('c')
                    || short('C')
                    || short('f')
                    || flag("--move")
                    || flag("--copy")
                    || flag("--force")
                    || flag("--set-upstream-to")
                    || short('u')
                    || flag("--unset-upstream")
                    || flag("--edit-description")
                    || flag("--track");
                let lists = short('l')
                    || flag("--list")
                    || short('a')
                    || short('r')
                    || short('v')
                    || flag("--contains")
                    || flag("--merged")
                    || flag("--no-merged")
                    || flag("--show-current")
                    || flag("--points-at")
                    || flag("--format")
                    || flag("--sort");
                if writes || (!lists && !texts.is_empty()) {
                    let name = first.to_string();
                    if !writes && self.is_own_branch(&name) {
                        return Ok(());
                    }
                    return shared("branches");
                }
                Ok(())
            }
            "tag" => {
                let lists = short('l')
                    || flag("--list")
                    || short('v')
                    || flag("--verify")
                    || flag("--contains")
                    || flag("--points-at")
                    || flag("--merged")
                    || flag("--sort")
                    || flag("--format")
                    || short('n');
                if short('d') || flag("--delete") || (!lists && !texts.is_empty()) {
                    return shared("tags");
                }
                Ok(())
            }
            "update-ref" => {
                if short('d') {
                    return block("git-update-ref", "`git update-ref -d` deletes a ref");
                }
                if flag("--stdin") {
                    return shared("refs");
                }
                match texts.first() {
                    Some(r) if self.is_own_branch(r) => Ok(()),
                    Some(_) => shared("refs"),
                    None => Ok(()),
                }
            }
            "symbolic-ref"
                if texts.len() >= 2 && texts[0] != "HEAD" || short('d') || flag("--delete") =>
            {
                shared("refs")
            }
            "reflog" if matches!(first, "expire" | "delete") => block(
                "git-reflog-expire",
                "expiring the reflog throws away the record that makes recovery possible",
            ),
            "gc" if flags
                .iter()
                .any(|f| f == "--prune=now" || f == "--prune=all") =>
            {
                block(
                    "git-prune",
                    "`git gc --prune=now` deletes unreachable objects the user may still need",
                )
            }
            "prune" if !(short('n') || flag("--dry-run")) => block(
                "git-prune",
                "`git prune` deletes unreachable objects the user may still need",
            ),
            "config" => {
                let reads = matches!(first, "get" | "list")
                    || flag("--get")
                    || flag("--get-all")
                    || flag("--get-regexp")
                    || flag("--list")
                    || short('l')
                    || flag("--get-urlmatch")
                    || flag("--show-origin") && texts.len() < 2;
                let writes = matches!(
                    first,
                    "set" | "unset" | "rename-section" | "remove-section" | "edit"
                ) || flag("--unset")
                    || flag("--unset-all")
                    || flag("--add")
                    || flag("--replace-all")
                    || flag("--rename-section")
                    || flag("--remove-section")
                    || flag("--edit")
                    || short('e');
                if writes || (!reads && texts.len() >= 2) {
                    return shared("the repository's config");
                }
                Ok(())
            }
            "remote"
                if matches!(
                    first,
                    "add"
                        | "remove"
                        | "rm"
                        | "rename"
                        | "set-url"
                        | "set-head"
                        | "set-branches"
                        | "prune"
                        | "update"
                ) =>
            {
                shared("the remotes")
            }
            "fetch" | "pull" => shared("remote-tracking refs"),
            "notes" if !matches!(first, "list" | "show" | "") => shared("notes"),
            "worktree" if !matches!(first, "list" | "") => shared("the worktree list"),
            "replace" | "filter-branch" | "filter-repo" => shared("history of the user's branches"),
            "hook" => Ok(()),
            "rebase" if flag("--update-refs") => shared("branches"),
            _ => Ok(()),
        }
    }

    fn is_own_branch(&self, name: &str) -> bool {
        let own = &self.env.session_branch;
        name == own || name.strip_prefix("refs/heads/") == Some(own.as_str())
    }

    fn own_branch(&self, name: &str, what: &str, elsewhere: bool) -> Verdict {
        if elsewhere || self.is_own_branch(name) {
            return Ok(());
        }
        block(
            "shared-git-state",
            format!("creating {what} `{name}` writes refs the session's checkout shares with the user's repository; the session's own branch is {}", self.env.session_branch),
        )
    }
}

/// What git subcommand `sub` writes of the user's HEAD or index, if it does (see the `--here` module docs).
fn here_writes(sub: &str, flags: &[String]) -> Option<&'static str> {
    let flag = |f: &str| flags.iter().any(|x| x == f);
    match sub {
        "add" | "rm" | "mv" | "update-index" | "read-tree" | "restore" => Some("the user's index"),
        "apply" if flag("--index") || flag("--cached") || flag("-3") || flag("--3way") => {
            Some("the user's index")
        }
        "commit" | "reset" | "checkout" | "switch" | "merge" | "rebase" | "cherry-pick"
        | "revert" | "am" | "pull" | "stash" | "bisect" => Some("the user's HEAD or index"),
        _ => None,
    }
}

/// Like [`has_short`], but stops at options in `valued` whose value follows (`-m -n` is a message).
fn short_in(args: &[Word], c: char, valued: &str) -> bool {
    let mut skip = false;
    for a in args {
        if skip {
            skip = false;
            continue;
        }
        let t = &a.text;
        if t == "--" {
            return false;
        }
        if t.starts_with('-') && !t.starts_with("--") && t.len() > 1 {
            for (i, x) in t[1..].chars().enumerate() {
                if x == c {
                    return true;
                }
                if valued.contains(x) {
                    skip = i + 2 == t.len();
                    break;
                }
            }
        }
    }
    false
}

fn new_branch(args: &[Word], options: &[&str]) -> Option<String> {
    let pos = args
        .iter()
        .position(|w| options.contains(&w.text.as_str()))?;
    args.get(pos + 1).map(|w| w.text.clone())
}

fn whole_tree(pathspec: &str) -> bool {
    matches!(pathspec, "." | "./" | ":/" | "*" | ":" | ":/*" | "-A")
}

/// `git -c key=value`: refuse overrides that run code.
fn git_config_override(kv: &str) -> Verdict {
    let (key, value) = kv.split_once('=').unwrap_or((kv, ""));
    let key = key.to_ascii_lowercase();
    if key.starts_with("alias.") && value.trim_start().starts_with('!') {
        return block(
            "git-alias-exec",
            "`git -c alias.x='!...'` runs a shell command the guard cannot check",
        );
    }
    if matches!(
        key.as_str(),
        "core.hookspath"
            | "core.fsmonitor"
            | "core.sshcommand"
            | "core.pager"
            | "core.editor"
            | "sequence.editor"
            | "diff.external"
            | "core.gitproxy"
    ) {
        return block(
            "git-config-exec",
            format!("`git -c {key}=...` makes git run another program"),
        );
    }
    Ok(())
}
