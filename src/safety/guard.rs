//! The shell guard: built-in refusals for commands that destroy work, the machine or the user's shared git
//! state, judged on the parsed command line (see [`super::shell`]), never on its text.
//!
//! Guards catch mistakes, not adversaries: a program can always do what a refused command would have done.
//! The sandbox ([`super::sandbox`]) is the boundary. What the guard adds is a clear, early answer the model
//! reads: what was refused, why, and that it must ask the user rather than find another way.
//!
//! The agent's checkout is a linked worktree: refs, the stash, config, hooks and remotes live in the common git
//! dir it shares with the user's repository. Commands that write any of those (other than the session's own
//! branch) are refused here, and by the file system under the sandbox.
//!
//! With `ask --here` the checkout *is* the user's work tree (`checkout == repo_root`): its files are the
//! session's to change, as in a linked checkout, but its HEAD and index are the user's, so git commands that
//! write them (`add`, `commit`, `checkout`, `reset`, `stash`, ...) are refused as well.

use std::path::{Component, Path, PathBuf};

use super::shell::{self, Command, Script, Word};

/// Where the command runs and what it must not touch.
#[derive(Clone, Debug)]
pub struct GuardEnv {
    /// The session's checkout: the working directory of `run`.
    pub checkout: PathBuf,
    /// The user's work tree root.
    pub repo_root: PathBuf,
    /// The git dir shared by all worktrees.
    pub common_dir: PathBuf,
    pub home: Option<PathBuf>,
    /// The session's own branch, short form (`agent/<id>`).
    pub session_branch: String,
}

/// A refused command: the rule that refused it and a sentence saying why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Blocked {
    pub rule: &'static str,
    pub reason: String,
}

/// What a permitted line runs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Inspection {
    /// Every command the line runs (after seeing through wrappers and nested shells), as its words joined by
    /// spaces, for permission rules.
    pub commands: Vec<String>,
    /// Reasons to ask the user first (e.g. `git push`, `sudo`).
    pub risky: Vec<String>,
}

type Verdict = Result<(), Blocked>;

fn block(rule: &'static str, reason: impl Into<String>) -> Verdict {
    Err(Blocked {
        rule,
        reason: reason.into(),
    })
}

/// Parses `line` and checks every command it would run.
pub fn inspect(line: &str, env: &GuardEnv) -> Result<Inspection, Blocked> {
    let mut checker = Checker {
        env,
        cwd: env.checkout.clone(),
        found: Inspection::default(),
    };
    checker.script(line, 0)?;
    Ok(checker.found)
}

struct Checker<'e> {
    env: &'e GuardEnv,
    /// Follows literal `cd` commands, so relative paths are judged where they point.
    cwd: PathBuf,
    found: Inspection,
}

/// Wrappers that run their arguments as a command, with the options that take a value.
const WRAPPERS: &[(&str, &[&str])] = &[
    (
        "sudo",
        &[
            "-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "-T", "-R",
        ],
    ),
    ("doas", &["-u", "-C"]),
    (
        "env",
        &["-u", "-C", "--unset", "--chdir", "-S", "--split-string"],
    ),
    ("timeout", &["-s", "-k", "--signal", "--kill-after"]),
    ("nice", &["-n", "--adjustment"]),
    ("nohup", &[]),
    ("setsid", &[]),
    ("exec", &["-a"]),
    ("builtin", &[]),
    ("command", &[]),
    ("time", &["-f", "-o", "--format", "--output"]),
    ("stdbuf", &["-i", "-o", "-e"]),
    ("ionice", &["-c", "-n", "-p", "-P", "-u"]),
    ("chrt", &[]),
    ("taskset", &[]),
    ("unbuffer", &[]),
    ("busybox", &[]),
    (
        "xargs",
        &[
            "-I",
            "-n",
            "-P",
            "-d",
            "-E",
            "-e",
            "-L",
            "-l",
            "-s",
            "-a",
            "--max-args",
            "--max-procs",
            "--delimiter",
            "--arg-file",
            "--replace",
        ],
    ),
    ("watch", &["-n", "-d", "--interval"]),
    ("flock", &["-w", "-E", "-c"]),
    ("strace", &["-o", "-e", "-p", "-s", "-u"]),
];

const SHELLS: &[&str] = &[
    "sh",
    "bash",
    "zsh",
    "dash",
    "ksh",
    "ash",
    "mksh",
    "yash",
    "fish",
    "busybox-sh",
];

const DB_CLIENTS: &[&str] = &[
    "psql",
    "mysql",
    "mariadb",
    "sqlite3",
    "sqlite",
    "duckdb",
    "sqlcmd",
    "clickhouse-client",
    "clickhouse",
    "cockroach",
    "mongo",
    "mongosh",
    "redis-cli",
    "cqlsh",
    "snowsql",
    "usql",
    "pgcli",
    "mycli",
    "litecli",
];

impl Checker<'_> {
    fn script(&mut self, source: &str, depth: usize) -> Verdict {
        let script = shell::parse(source, depth).map_err(|e| Blocked {
            rule: "unparsable",
            reason: format!("the command line cannot be parsed ({e}), so it cannot be checked"),
        })?;
        fork_bomb(&script)?;
        for cmd in &script.commands {
            self.command(&script, cmd, depth)?;
        }
        Ok(())
    }

    fn command(&mut self, script: &Script, cmd: &Command, depth: usize) -> Verdict {
        for redirect in &cmd.redirects {
            if redirect.writes() {
                self.written_path(&redirect.target)?;
            }
        }
        let mut words: Vec<Word> = strip_keywords(&cmd.words);
        let mut from_stdin = false;
        loop {
            let Some(first) = words.first() else {
                return Ok(());
            };
            if first.is_dynamic() {
                return block(
                    "dynamic-command",
                    format!(
                        "the command name `{}` is only known at run time, so it cannot be checked",
                        first.text
                    ),
                );
            }
            let name = basename(&first.text).to_string();
            let Some((_, with_value)) = WRAPPERS.iter().find(|(w, _)| *w == name) else {
                break;
            };
            match name.as_str() {
                "sudo" | "doas" => self
                    .found
                    .risky
                    .push(format!("`{name}` runs a command as root")),
                "command"
                    if words
                        .iter()
                        .skip(1)
                        .any(|w| w.text == "-v" || w.text == "-V") =>
                {
                    return Ok(())
                }
                "xargs" => from_stdin = true,
                "env" => {
                    if let Some(split) = env_split_string(&words) {
                        // `env -S 'cmd args'` splits its argument into a command line.
                        return self.nested(&split, depth, "env -S");
                    }
                }
                _ => {}
            }
            words = unwrap(&name, &words[1..], with_value);
        }
        let name = basename(&words[0].text).to_string();
        let args = &words[1..];
        self.found.commands.push(join(&words));
        if SHELLS.contains(&name.as_str()) {
            return self.shell(script, cmd, args, depth);
        }
        if from_stdin && destructive_with_stdin_targets(&name, args) {
            return block(
                "dynamic-path",
                format!("`xargs {name}` deletes or changes paths read from stdin recursively; list the paths"),
            );
        }
        match name.as_str() {
            "eval" => {
                if args.iter().any(Word::is_dynamic) {
                    return block(
                        "uninspectable",
                        "`eval` of text built at run time cannot be checked",
                    );
                }
                self.nested(&join(args), depth, "eval")
            }
            "cd" | "pushd" => {
                self.cd(args);
                Ok(())
            }
            "find" => self.find(args, depth),
            "rm" => self.rm(args),
            "chmod" | "chown" | "chgrp" => self.chmod(&name, args),
            "dd" => dd(args),
            "kill" | "pkill" | "killall" => kill(&name, args),
            "git" => self.git(args),
            n if n.starts_with("mkfs")
                || matches!(
                    n,
                    "mke2fs"
                        | "mkswap"
                        | "wipefs"
                        | "fdisk"
                        | "sfdisk"
                        | "parted"
                        | "sgdisk"
                        | "blkdiscard"
                ) =>
            {
                block("disk", format!("`{n}` formats or repartitions a disk"))
            }
            "shutdown" | "reboot" | "halt" | "poweroff" | "telinit" => block(
                "shutdown",
                format!("`{name}` stops or restarts the machine"),
            ),
            "init"
                if args
                    .first()
                    .is_some_and(|a| matches!(a.text.as_str(), "0" | "6")) =>
            {
                block(
                    "shutdown",
                    "`init 0`/`init 6` stops or restarts the machine",
                )
            }
            "systemctl"
                if args.iter().any(|a| {
                    matches!(
                        a.text.as_str(),
                        "poweroff" | "reboot" | "halt" | "kexec" | "suspend" | "hibernate"
                    )
                }) =>
            {
                block("shutdown", "`systemctl` would stop or restart the machine")
            }
            "shred" => self.paths_written(args),
            n if DB_CLIENTS.contains(&n) => database(script, cmd, n, args),
            "cp" | "mv" | "ln" | "install" | "rsync" => {
                let (_, operands) = split_options(args);
                let target = args
                    .iter()
                    .position(|a| a.text == "-t")
                    .and_then(|p| args.get(p + 1))
                    .or(operands.last());
                target.map_or(Ok(()), |t| self.written_path(t))
            }
            "tee" | "touch" | "mkdir" | "truncate" | "rmdir" | "unlink" => self.paths_written(args),
            "sed" | "perl"
                if args
                    .iter()
                    .any(|a| a.text.starts_with("-i") || a.text == "--in-place") =>
            {
                self.paths_written(args)
            }
            "npm" | "cargo" | "yarn" | "pnpm" | "twine" | "gem"
                if args.first().is_some_and(|a| {
                    a.text == "publish" || a.text == "push" || a.text == "upload"
                }) =>
            {
                self.found
                    .risky
                    .push(format!("`{name} {}` publishes a package", args[0].text));
                Ok(())
            }
            _ => Ok(()),
        }
    }

    fn nested(&mut self, source: &str, depth: usize, what: &str) -> Verdict {
        if depth + 1 > shell::MAX_DEPTH {
            return block(
                "uninspectable",
                format!("`{what}` nests scripts too deeply to check"),
            );
        }
        self.script(source, depth + 1)
    }

    /// `bash -c '...'`, `sh <<EOF`, `echo ... | sh`: parse the script the shell would run.
    fn shell(&mut self, script: &Script, cmd: &Command, args: &[Word], depth: usize) -> Verdict {
        let mut i = 0;
        while i < args.len() {
            let a = &args[i];
            if a.text == "-c"
                || (a.text.starts_with('-')
                    && !a.text.starts_with("--")
                    && a.text.contains('c')
                    && a.text.len() > 1
                    && a.text[1..].chars().all(|c| c.is_ascii_alphabetic()))
            {
                let Some(code) = args.get(i + 1) else {
                    return block("unparsable", "`-c` without a script");
                };
                if code.is_dynamic() {
                    return block(
                        "uninspectable",
                        format!(
                            "`{} -c` of a script built at run time (`{}`) cannot be checked",
                            basename(&cmd_name(cmd)),
                            code.text
                        ),
                    );
                }
                return self.nested(&code.text, depth, "-c");
            }
            if a.text == "-o" || a.text == "+o" {
                i += 2;
                continue;
            }
            if a.text.starts_with('-') || a.text.starts_with('+') {
                i += 1;
                continue;
            }
            // A script file: it is part of the checkout (or the system); running it is like running a program.
            return if a.is_dynamic() {
                block(
                    "uninspectable",
                    format!(
                        "a shell running a script named at run time (`{}`) cannot be checked",
                        a.text
                    ),
                )
            } else {
                Ok(())
            };
        }
        // No `-c` and no file: the shell reads its script from stdin.
        for doc in &cmd.heredocs {
            self.nested(&doc.body, depth, "here-document")?;
        }
        for s in &cmd.here_strings {
            if s.is_dynamic() {
                return block(
                    "uninspectable",
                    "a shell reading a here-string built at run time cannot be checked",
                );
            }
            self.nested(&s.text, depth, "here-string")?;
        }
        if let Some(from) = cmd.piped_from {
            let upstream = &script.commands[from];
            return match piped_script(upstream) {
                Some(text) => self.nested(&text, depth, "pipe"),
                None => block(
                    "uninspectable",
                    format!(
                        "a shell reading its script from `{}` through a pipe cannot be checked; write the script to a file and show it first",
                        join(&upstream.words)
                    ),
                ),
            };
        }
        Ok(())
    }

    fn cd(&mut self, args: &[Word]) {
        let target = args
            .iter()
            .find(|a| !a.text.starts_with('-') || a.text == "-");
        match target {
            None => {
                if let Some(home) = &self.env.home {
                    self.cwd = home.clone();
                }
            }
            Some(w) if w.is_dynamic() || w.text == "-" => {}
            Some(w) => self.cwd = self.resolve(&w.text),
        }
    }

    fn resolve(&self, text: &str) -> PathBuf {
        let expanded = match (text.strip_prefix('~'), &self.env.home) {
            (Some(""), Some(home)) => home.clone(),
            (Some(rest), Some(home)) if rest.starts_with('/') => home.join(&rest[1..]),
            (Some(_), _) => PathBuf::from("/home"),
            _ => PathBuf::from(text),
        };
        normalize(&self.cwd.join(expanded))
    }

    /// Why recursively deleting or changing `word` would be a disaster, if it would.
    fn dangerous_target(&self, word: &Word) -> Option<Blocked> {
        if word.var_may_be_empty {
            return Some(Blocked {
                rule: "unset-variable",
                reason: format!(
                    "the path `{}` comes from a variable that may be unset or empty (then it names a parent or /); use a literal path or ${{VAR:?}}",
                    word.text
                ),
            });
        }
        if word.has_subst {
            return Some(Blocked {
                rule: "dynamic-path",
                reason: format!(
                    "the path `{}` is computed at run time; use a literal path",
                    word.text
                ),
            });
        }
        let (path, is_glob) = if word.glob {
            // `*`, `./*`, `/*`, `~/*`: judge the directory whose contents the glob names.
            let cut = word.text.find(['*', '?', '[']).unwrap_or(0);
            let dir_part = &word.text[..cut];
            let rest = &word.text[cut..];
            if rest.contains('/') {
                return None;
            }
            let dir = dir_part
                .rsplit_once('/')
                .map(|(d, _)| if d.is_empty() { "/" } else { d })
                .unwrap_or(".");
            (self.resolve(dir), true)
        } else {
            (self.resolve(&word.text), false)
        };
        let what = if is_glob {
            format!("everything in {}", path.display())
        } else {
            path.display().to_string()
        };
        let hit = |rule: &'static str, why: &str| {
            Some(Blocked {
                rule,
                reason: format!("`{}` is {what}: {why}", word.text),
            })
        };
        if path == Path::new("/") {
            return hit("root", "the root of the file system");
        }
        // Inside the checkout everything is the session's own, except the checkout itself and git dirs.
        if let Ok(rel) = path.strip_prefix(&self.env.checkout) {
            if rel.as_os_str().is_empty() {
                return hit("repo-root", "the whole checkout");
            }
            if has_git_component(rel) {
                return hit("git-dir", "a git directory");
            }
            return None;
        }
        if self
            .env
            .home
            .as_deref()
            .is_some_and(|h| h.starts_with(&path))
        {
            return hit("home", "the home directory or a parent of it");
        }
        if self.env.checkout.starts_with(&path) || self.env.repo_root.starts_with(&path) {
            return hit("repo-root", "the repository or a parent of it");
        }
        if path.starts_with(&self.env.common_dir) || has_git_component(&path) {
            return hit("git-dir", "inside a git directory");
        }
        if path.starts_with(&self.env.repo_root) {
            return hit(
                "user-worktree",
                "in the user's working tree, outside the session's checkout",
            );
        }
        if is_system_path(&path) {
            return hit("system-dir", "a top-level or system directory");
        }
        None
    }

    fn rm(&mut self, args: &[Word]) -> Verdict {
        let (flags, operands) = split_options(args);
        if flags.iter().any(|f| f == "--no-preserve-root") {
            return block("root", "`rm --no-preserve-root` is never needed here");
        }
        let recursive = has_short(&flags, 'r')
            || has_short(&flags, 'R')
            || flags.iter().any(|f| f == "--recursive");
        for w in &operands {
            if recursive {
                if let Some(b) = self.dangerous_target(w) {
                    return Err(Blocked {
                        rule: b.rule,
                        reason: format!("recursive rm: {}", b.reason),
                    });
                }
            }
            self.written_path(w)?;
        }
        Ok(())
    }

    fn chmod(&mut self, name: &str, args: &[Word]) -> Verdict {
        let (flags, operands) = split_options(args);
        let recursive = has_short(&flags, 'R') || flags.iter().any(|f| f == "--recursive");
        if !recursive {
            return Ok(());
        }
        // The first operand is the mode or owner.
        for w in operands.iter().skip(1) {
            if let Some(b) = self.dangerous_target(w) {
                return Err(Blocked {
                    rule: b.rule,
                    reason: format!("recursive {name}: {}", b.reason),
                });
            }
        }
        Ok(())
    }

    fn find(&mut self, args: &[Word], depth: usize) -> Verdict {
        let starts: Vec<&Word> = args
            .iter()
            .take_while(|a| !a.text.starts_with('-') && a.text != "(" && a.text != "!")
            .collect();
        let rest = &args[starts.len()..];
        let filtered = rest.iter().any(|a| {
            matches!(
                a.text.as_str(),
                "-name"
                    | "-iname"
                    | "-path"
                    | "-ipath"
                    | "-regex"
                    | "-iregex"
                    | "-newer"
                    | "-mtime"
                    | "-mmin"
                    | "-size"
                    | "-empty"
            )
        });
        let mut i = 0;
        while i < rest.len() {
            let a = rest[i].text.as_str();
            if a == "-delete" {
                for s in starts
                    .iter()
                    .copied()
                    .chain(std::iter::once(&Word::literal(".")).filter(|_| starts.is_empty()))
                {
                    let inside_checkout =
                        self.resolve(&s.text).starts_with(&self.env.checkout) && !s.is_dynamic();
                    if inside_checkout && filtered {
                        continue;
                    }
                    if let Some(b) = self.dangerous_target(s) {
                        return Err(Blocked {
                            rule: b.rule,
                            reason: format!("find -delete: {}", b.reason),
                        });
                    }
                }
            }
            if matches!(a, "-exec" | "-execdir" | "-ok" | "-okdir") {
                let end = rest[i + 1..]
                    .iter()
                    .position(|w| w.text == ";" || w.text == "+")
                    .map_or(rest.len(), |p| i + 1 + p);
                // `{}` is each file found: judge it as a path below the start directory.
                let start = starts.first().map_or(".".to_string(), |s| {
                    s.text.trim_end_matches('/').to_string()
                });
                let inner: Vec<Word> = rest[i + 1..end]
                    .iter()
                    .map(|w| match w.text.contains("{}") {
                        true if starts.iter().any(|s| s.is_dynamic()) => Word {
                            has_subst: true,
                            ..w.clone()
                        },
                        true => Word {
                            text: w.text.replace("{}", &format!("{start}/found")),
                            ..w.clone()
                        },
                        false => w.clone(),
                    })
                    .collect();
                if !inner.is_empty() {
                    let cmd = Command {
                        words: inner,
                        ..Command::default()
                    };
                    let script = Script {
                        commands: vec![cmd.clone()],
                    };
                    self.command(&script, &cmd, depth + 1)?;
                }
                i = end + 1;
                continue;
            }
            i += 1;
        }
        Ok(())
    }

    /// A path a command writes: refused inside the shared git dir (outside this session's checkout).
    fn written_path(&self, word: &Word) -> Verdict {
        if word.is_dynamic() {
            return Ok(());
        }
        if word.text.starts_with("/dev/") {
            let ok = matches!(word.text.as_str(), "/dev/null" | "/dev/zero" | "/dev/stdout" | "/dev/stderr" | "/dev/tty")
                || word.text.starts_with("/dev/fd/")
                // bash's pseudo-devices for sockets, not files.
                || word.text.starts_with("/dev/tcp/")
                || word.text.starts_with("/dev/udp/")
                || word.text.starts_with("/dev/pts/")
                || word.text.starts_with("/dev/shm/");
            return if ok {
                Ok(())
            } else {
                block(
                    "device",
                    format!("writing to `{}` would overwrite a device", word.text),
                )
            };
        }
        let path = self.resolve(&word.text);
        let in_checkout = path.starts_with(&self.env.checkout)
            && !has_git_component(path.strip_prefix(&self.env.checkout).unwrap_or(&path));
        if !in_checkout
            && (path.starts_with(&self.env.common_dir)
                || path.starts_with(self.env.repo_root.join(".git")))
        {
            return block(
                "shared-git-state",
                format!("`{}` is in the repository's git dir, which the session shares with the user; it may not be written", word.text),
            );
        }
        if in_checkout && has_git_component(path.strip_prefix(&self.env.checkout).unwrap_or(&path))
        {
            return block(
                "shared-git-state",
                format!("`{}` is inside .git; it may not be written", word.text),
            );
        }
        Ok(())
    }

    fn paths_written(&self, args: &[Word]) -> Verdict {
        let (_, operands) = split_options(args);
        for w in &operands {
            self.written_path(w)?;
        }
        Ok(())
    }

    fn git(&mut self, args: &[Word]) -> Verdict {
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
            block(
                "shared-git-state",
                format!("this would write {what}, which the session's checkout shares with the user's repository"),
            )
        };
        if self.env.checkout == self.env.repo_root {
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
                    return self.own_branch(&b, "a branch");
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
                Some(b) => self.own_branch(&b, "a branch"),
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

    fn own_branch(&self, name: &str, what: &str) -> Verdict {
        if self.is_own_branch(name) {
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

/// Options and operands of a command (operands after `--` included; option values are not separated).
fn split_options(args: &[Word]) -> (Vec<String>, Vec<Word>) {
    let mut flags = Vec::new();
    let mut operands = Vec::new();
    let mut rest = false;
    for a in args {
        if rest {
            operands.push(a.clone());
        } else if a.text == "--" {
            rest = true;
        } else if a.text.starts_with('-') && a.text.len() > 1 && !a.is_dynamic() {
            flags.push(a.text.clone());
        } else {
            operands.push(a.clone());
        }
    }
    (flags, operands)
}

/// True when a short option `c` appears alone or in a cluster (`-rf`).
fn has_short(flags: &[String], c: char) -> bool {
    flags.iter().any(|f| {
        !f.starts_with("--")
            && f.len() > 1
            && f[1..]
                .chars()
                .take_while(|x| x.is_ascii_alphabetic())
                .any(|x| x == c)
    })
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

fn dd(args: &[Word]) -> Verdict {
    for a in args {
        if let Some(target) = a.text.strip_prefix("of=") {
            if target.starts_with("/dev/")
                && !matches!(
                    target,
                    "/dev/null" | "/dev/zero" | "/dev/stdout" | "/dev/stderr"
                )
            {
                return block("device", format!("`dd of={target}` overwrites a device"));
            }
        }
    }
    Ok(())
}

fn kill(name: &str, args: &[Word]) -> Verdict {
    // `kill -9 -1` (or `kill -- -1`) signals every process the user owns; `kill -1 PID` is SIGHUP.
    if name == "kill" && args.len() >= 2 && args.last().is_some_and(|a| a.text == "-1") {
        return block("kill-all", "`kill -1` signals every process of the user");
    }
    Ok(())
}

fn destructive_with_stdin_targets(name: &str, args: &[Word]) -> bool {
    let (flags, _) = split_options(args);
    match name {
        "rm" => {
            has_short(&flags, 'r')
                || has_short(&flags, 'R')
                || flags.iter().any(|f| f == "--recursive")
        }
        "chmod" | "chown" | "chgrp" => {
            has_short(&flags, 'R') || flags.iter().any(|f| f == "--recursive")
        }
        "shred" => true,
        _ => false,
    }
}

/// SQL (or the Redis/Mongo equivalents) a database client would run: arguments, here-documents, here-strings
/// and `echo ... |`.
fn database(script: &Script, cmd: &Command, name: &str, args: &[Word]) -> Verdict {
    let mut texts: Vec<String> = args.iter().map(|w| w.text.clone()).collect();
    texts.extend(cmd.heredocs.iter().map(|h| h.body.clone()));
    texts.extend(cmd.here_strings.iter().map(|w| w.text.clone()));
    if let Some(from) = cmd.piped_from {
        if let Some(text) = piped_script(&script.commands[from]) {
            texts.push(text);
        }
    }
    if name == "redis-cli" {
        let all = texts.join(" ").to_ascii_uppercase();
        if all
            .split_whitespace()
            .any(|w| w == "FLUSHALL" || w == "FLUSHDB")
        {
            return block("destructive-sql", "`FLUSHALL`/`FLUSHDB` deletes every key");
        }
        return Ok(());
    }
    for text in &texts {
        if let Some(what) = destructive_sql(text) {
            return block(
                "destructive-sql",
                format!("`{name}` would run {what}, which destroys data"),
            );
        }
    }
    Ok(())
}

/// Finds `DROP TABLE`, `TRUNCATE`, `DELETE`/`UPDATE` without `WHERE`, `ALTER TABLE ... DROP`, and Mongo drops.
pub fn destructive_sql(text: &str) -> Option<&'static str> {
    if text.contains("dropDatabase") || text.contains(".drop(") || text.contains("deleteMany({})") {
        return Some("a collection or database drop");
    }
    for statement in text.split(';') {
        let words: Vec<String> = statement
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|w| !w.is_empty())
            .map(|w| w.to_ascii_uppercase())
            .collect();
        let has = |w: &str| words.iter().any(|x| x == w);
        let first = words.first().map(String::as_str).unwrap_or("");
        let objects = [
            "TABLE",
            "DATABASE",
            "SCHEMA",
            "INDEX",
            "VIEW",
            "COLLECTION",
            "USER",
            "ROLE",
            "KEYSPACE",
        ];
        match first {
            "DROP" if words.get(1).is_some_and(|w| objects.contains(&w.as_str())) => {
                return Some("DROP")
            }
            "TRUNCATE" => return Some("TRUNCATE"),
            "DELETE" if !has("WHERE") => return Some("DELETE without WHERE"),
            "UPDATE" if has("SET") && !has("WHERE") => return Some("UPDATE without WHERE"),
            "ALTER" if has("DROP") => return Some("ALTER ... DROP"),
            _ => {}
        }
    }
    None
}

/// The text `echo`/`printf` pipe into the next command, if it is static.
fn piped_script(upstream: &Command) -> Option<String> {
    let words = strip_keywords(&upstream.words);
    let name = basename(&words.first()?.text).to_string();
    let args = &words[1..];
    if args.iter().any(Word::is_dynamic) {
        return None;
    }
    match name.as_str() {
        "echo" => Some(join(
            &args
                .iter()
                .filter(|a| !matches!(a.text.as_str(), "-n" | "-e" | "-E"))
                .cloned()
                .collect::<Vec<_>>(),
        )),
        "printf" => Some(
            args.iter()
                .map(|a| a.text.replace("\\n", "\n"))
                .collect::<Vec<_>>()
                .join(" "),
        ),
        "cat" if args.is_empty() => upstream.heredocs.first().map(|h| h.body.clone()),
        _ => None,
    }
}

/// A fork bomb: a function piped into or backgrounding itself (`:(){ :|:& };:`).
fn fork_bomb(script: &Script) -> Verdict {
    let defined: Vec<&str> = script
        .commands
        .iter()
        .filter_map(|c| c.defines.as_deref())
        .collect();
    if defined.is_empty() {
        return Ok(());
    }
    let name_of = |c: &Command| strip_keywords(&c.words).first().map(|w| w.text.clone());
    for cmd in &script.commands {
        let Some(name) = name_of(cmd) else { continue };
        if !defined.contains(&name.as_str()) {
            continue;
        }
        let piped_into_itself = cmd
            .piped_from
            .and_then(|i| name_of(&script.commands[i]))
            .is_some_and(|n| n == name);
        if piped_into_itself || cmd.background {
            return block(
                "fork-bomb",
                "a function that starts copies of itself is a fork bomb",
            );
        }
    }
    Ok(())
}

/// Drops shell keywords (`if`, `then`, `{`, `!`, ...) in command position; loop headers are dropped whole.
fn strip_keywords(words: &[Word]) -> Vec<Word> {
    let mut start = 0;
    while let Some(w) = words.get(start) {
        if w.quoted {
            break;
        }
        match w.text.as_str() {
            "if" | "then" | "else" | "elif" | "fi" | "do" | "done" | "while" | "until" | "{"
            | "}" | "!" | "esac" | "in" => start += 1,
            "for" | "select" | "case" | "function" => return Vec::new(),
            _ => break,
        }
    }
    words[start..].to_vec()
}

/// The arguments of a wrapper after its own options (and, for `env`, assignments; for `timeout`, the duration).
fn unwrap(name: &str, args: &[Word], with_value: &[&str]) -> Vec<Word> {
    let mut i = 0;
    while i < args.len() {
        let t = args[i].text.as_str();
        if t == "--" {
            i += 1;
            break;
        }
        if with_value.contains(&t) {
            i += 2;
            continue;
        }
        if t.starts_with('-') && t.len() > 1 {
            i += 1;
            continue;
        }
        if name == "env" && t.contains('=') {
            i += 1;
            continue;
        }
        if matches!(name, "chrt" | "taskset")
            && t.chars()
                .all(|c| c.is_ascii_hexdigit() || c == 'x' || c == ',' || c == '-')
        {
            i += 1;
            continue;
        }
        break;
    }
    let mut rest = args[i.min(args.len())..].to_vec();
    if name == "timeout" && !rest.is_empty() {
        rest.remove(0);
    }
    if name == "watch" && rest.len() == 1 {
        // `watch 'cmd args'` runs its single argument through `sh -c`.
        return vec![Word::literal("sh"), Word::literal("-c"), rest.remove(0)];
    }
    rest
}

fn env_split_string(words: &[Word]) -> Option<String> {
    let pos = words
        .iter()
        .position(|w| w.text == "-S" || w.text == "--split-string")?;
    let mut text = words.get(pos + 1)?.text.clone();
    for w in &words[pos + 2..] {
        text.push(' ');
        text.push_str(&w.text);
    }
    Some(text)
}

fn cmd_name(cmd: &Command) -> String {
    cmd.words
        .first()
        .map(|w| w.text.clone())
        .unwrap_or_default()
}

fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

fn join(words: &[Word]) -> String {
    words
        .iter()
        .map(|w| w.text.as_str())
        .collect::<Vec<_>>()
        .join(" ")
}

fn has_git_component(path: &Path) -> bool {
    path.components()
        .any(|c| matches!(c, Component::Normal(n) if n.eq_ignore_ascii_case(".git")))
}

/// Removes `.` and `..` without touching the file system.
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(n) => out.push(n),
            _ => {}
        }
    }
    out
}

/// Top-level directories and the system's own trees (temp dirs excepted).
fn is_system_path(path: &Path) -> bool {
    const SYSTEM: &[&str] = &[
        "/bin",
        "/boot",
        "/dev",
        "/etc",
        "/lib",
        "/lib32",
        "/lib64",
        "/libx32",
        "/opt",
        "/proc",
        "/root",
        "/sbin",
        "/srv",
        "/sys",
        "/usr",
        "/var",
        "/snap",
        "/nix",
        "/System",
        "/Library",
        "/Applications",
        "/private",
        "/Volumes",
    ];
    const TEMP: &[&str] = &[
        "/var/tmp",
        "/var/folders",
        "/private/tmp",
        "/private/var/folders",
    ];
    if path.components().count() <= 2 {
        return true;
    }
    if TEMP
        .iter()
        .any(|t| path.starts_with(t) && path != Path::new(t))
    {
        return false;
    }
    SYSTEM.iter().any(|s| path.starts_with(s))
}

#[cfg(test)]
#[path = "guard_table.rs"]
mod table;
