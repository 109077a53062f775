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
//! What a line destroys depends on what its words hold when they run, so the guard follows the shell's
//! state as it reads (see [`vars`]): the working directory after `cd`, variables assigned earlier in the
//! line, fresh `mktemp` paths, per subshell. Rules for data and infrastructure that dedicated programs
//! destroy (database clients and tools, `terraform destroy`, `kubectl delete namespace`, Docker volumes)
//! live in [`tools`], git's in [`git`].
//!
//! With `ask --here` the checkout *is* the user's work tree (`checkout == repo_root`): its files are the
//! session's to change, as in a linked checkout, but its HEAD and index are the user's, so git commands that
//! write them (`add`, `commit`, `checkout`, `reset`, `stash`, ...) are refused as well.

use std::path::{Component, Path, PathBuf};

use super::shell::{self, is_assignment, Command, Script, Word};
use checker::{block, Checker, Verdict};
pub use checker::{Blocked, GuardEnv, Inspection};
use state::{mode, Frame, Mode, State, Value};
use words::{basename, split_options, strip_keywords};

mod checker;
mod git;
mod state;
mod tools;
mod vars;
mod words;

/// Parses `line` and checks every command it would run.
pub fn inspect(line: &str, env: &GuardEnv) -> Result<Inspection, Blocked> {
    let mut checker = Checker {
        env,
        frame: Frame::new(State::new(env.checkout.clone()), &Script::default()),
        remote: 0,
        found: Inspection::default(),
    };
    checker.script(line, 0, State::new(env.checkout.clone()))?;
    Ok(checker.found)
}

/// How a nested script relates to the shell that runs it.
enum Shell {
    /// The same shell (`eval`, `trap`): it sees and changes its variables and directory.
    Same(Mode),
    /// A new process (`bash -c`, `sh <<EOF`, `su -c`) starting in this state.
    New(State),
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

impl Checker<'_> {
    /// Checks a script and returns the state its shell ends in.
    fn script(&mut self, source: &str, depth: usize, start: State) -> Result<State, Blocked> {
        let script = shell::parse(source, depth).map_err(|e| Blocked {
            rule: "unparsable",
            reason: format!("the command line cannot be parsed ({e}), so it cannot be checked"),
        })?;
        fork_bomb(&script)?;
        let outer = std::mem::replace(&mut self.frame, Frame::new(start, &script));
        let checked = self.commands(&script, depth);
        let frame = std::mem::replace(&mut self.frame, outer);
        checked?;
        Ok(frame.into_top())
    }

    fn commands(&mut self, script: &Script, depth: usize) -> Verdict {
        for cmd in &script.commands {
            self.command(script, cmd, depth)?;
        }
        // An EXIT trap runs when the script ends, with the values of then.
        self.frame_mut().enter(&[]);
        for body in std::mem::take(&mut self.frame_mut().traps) {
            self.nested(&body, depth, "trap", Shell::Same(Mode::Certain))?;
        }
        Ok(())
    }

    fn command(&mut self, script: &Script, cmd: &Command, depth: usize) -> Verdict {
        self.begin(cmd);
        for redirect in &cmd.redirects {
            if redirect.writes() {
                let target = self.expand_one(script, &redirect.target);
                self.written_path(&target)?;
            }
        }
        let stripped = strip_keywords(&cmd.words);
        // After a keyword (`{ X=1; }`, `then X=1`), leading assignments are still assignments.
        let lead = if stripped.len() < cmd.words.len() {
            stripped.iter().take_while(|w| is_assignment(w)).count()
        } else {
            0
        };
        let assignments: Vec<Word> = cmd
            .assignments
            .iter()
            .chain(&stripped[..lead])
            .cloned()
            .collect();
        let mut words = self.expand_all(script, &stripped[lead..]);
        if words.is_empty() {
            self.assign_words(script, cmd, &assignments);
            return Ok(());
        }
        // What a shell started by this command inherits besides exported variables.
        let mut extra: Vec<(String, Value)> = assignments
            .iter()
            .filter_map(|w| self.assignment(script, w))
            .collect();
        let mut clear_env = false;
        let mut from_stdin = false;
        let mut in_container = false;
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
            if let Some(inner) = tools::container_command(&name, &words[1..]) {
                // `docker exec db psql ...`: the command runs in the container, with its own environment.
                words = inner;
                clear_env = true;
                in_container = true;
                continue;
            }
            let Some((_, with_value)) = WRAPPERS.iter().find(|(w, _)| *w == name) else {
                break;
            };
            match name.as_str() {
                "sudo" | "doas" => {
                    clear_env = true;
                    self.found
                        .risky
                        .push(format!("`{name}` runs a command as root"));
                }
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
                    let start = self.frame().state().child(&extra, clear_env);
                    if let Some(split) = env_split_string(&words) {
                        // `env -S 'cmd args'` splits its argument into a command line.
                        return self.nested(&split, depth, "env -S", Shell::New(start));
                    }
                    let (cleared, set) = env_settings(&words[1..]);
                    clear_env |= cleared;
                    extra.extend(set);
                }
                _ => {}
            }
            words = unwrap(&name, &words[1..], with_value);
        }
        let name = basename(&words[0].text).to_string();
        let args = &words[1..];
        self.found.commands.push(join(&words));
        if SHELLS.contains(&name.as_str()) {
            let start = self.frame().state().child(&extra, clear_env);
            return self.shell(script, cmd, args, depth, start);
        }
        if from_stdin && destructive_with_stdin_targets(&name, args) {
            return block(
                "dynamic-path",
                format!("`xargs {name}` deletes or changes paths read from stdin recursively; list the paths"),
            );
        }
        self.tools(script, cmd, &name, args)?;
        match name.as_str() {
            "eval" => {
                if args.iter().any(Word::is_dynamic) {
                    return block(
                        "uninspectable",
                        "`eval` of text built at run time cannot be checked",
                    );
                }
                self.nested(&join(args), depth, "eval", Shell::Same(mode(cmd)))
            }
            "cd" | "pushd" | "popd" => {
                if mode(cmd) != Mode::Lost {
                    self.cd(&name, args);
                }
                Ok(())
            }
            "export" | "declare" | "typeset" | "local" | "readonly" | "unset" | "source" | "."
            | "read" | "mapfile" | "readarray" | "getopts" | "printf" => {
                self.builtin_effects(script, cmd, &words);
                Ok(())
            }
            "trap" => self.trap(args),
            "ssh" => self.ssh(script, cmd, args, depth),
            "su" | "runuser" => match args
                .iter()
                .position(|a| a.text == "-c" || a.text == "--command")
            {
                Some(p) => match args.get(p + 1) {
                    Some(code) if !code.is_dynamic() => {
                        let start = self.frame().state().child(&[], true);
                        self.nested(&code.text, depth, "su -c", Shell::New(start))
                    }
                    _ => block(
                        "uninspectable",
                        format!("`{name} -c` of a script built at run time cannot be checked"),
                    ),
                },
                None => Ok(()),
            },
            "find" => self.find(args, depth),
            "rm" => self.rm(args),
            "chmod" | "chown" | "chgrp" => self.chmod(&name, args),
            "dd" => dd(args),
            "kill" | "pkill" | "killall" => kill(&name, args),
            "git" => self.git(args, in_container),
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

    fn nested(&mut self, source: &str, depth: usize, what: &str, shell: Shell) -> Verdict {
        if depth + 1 > shell::MAX_DEPTH {
            return block(
                "uninspectable",
                format!("`{what}` nests scripts too deeply to check"),
            );
        }
        match shell {
            Shell::Same(mode) => {
                let start = self.frame().state().clone();
                let end = self.script(source, depth + 1, start)?;
                self.merge(end, mode);
            }
            Shell::New(start) => {
                self.script(source, depth + 1, start)?;
            }
        }
        Ok(())
    }

    /// `trap 'body' SIGNAL...`: the body runs later, in this shell; it is checked when the script ends.
    fn trap(&mut self, args: &[Word]) -> Verdict {
        let (_, operands) = split_options(args);
        let [body, _, ..] = operands.as_slice() else {
            return Ok(());
        };
        if body.text == "-" || body.text.is_empty() {
            return Ok(());
        }
        if body.is_dynamic() {
            return block(
                "uninspectable",
                "a `trap` running a script built at run time cannot be checked",
            );
        }
        self.frame_mut().traps.push(body.text.clone());
        Ok(())
    }

    /// `ssh HOST cmd...`: the remote shell runs the words joined by spaces (or, without them, its stdin), in
    /// a home directory; judged like a line run here, from the user's home.
    fn ssh(&mut self, script: &Script, cmd: &Command, args: &[Word], depth: usize) -> Verdict {
        const VALUED: &str = "BbcDEeFIiJLlmOoPpQRSWw";
        let mut i = 0;
        while let Some(a) = args.get(i) {
            let t = a.text.as_str();
            if t.len() == 2 && t.starts_with('-') && VALUED.contains(&t[1..]) {
                i += 2;
            } else if t.starts_with('-') {
                i += 1;
            } else {
                break;
            }
        }
        let remote = args.get(i + 1..).unwrap_or(&[]);
        let start = State::new(self.env.home.clone().unwrap_or_else(|| PathBuf::from("/")));
        if remote.is_empty() {
            self.remote += 1;
            let checked = self.shell(script, cmd, &[], depth, start);
            self.remote -= 1;
            return checked;
        }
        if remote.iter().any(Word::is_dynamic) {
            return block(
                "uninspectable",
                "an `ssh` command line built at run time cannot be checked",
            );
        }
        self.remote += 1;
        let checked = self.nested(&join(remote), depth, "ssh", Shell::New(start));
        self.remote -= 1;
        checked
    }

    /// `bash -c '...'`, `sh <<EOF`, `echo ... | sh`: parse the script the shell would run, in a new shell
    /// that starts in `start`.
    fn shell(
        &mut self,
        script: &Script,
        cmd: &Command,
        args: &[Word],
        depth: usize,
        start: State,
    ) -> Verdict {
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
                return self.nested(&code.text, depth, "-c", Shell::New(start));
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
            self.nested(&doc.body, depth, "here-document", Shell::New(start.clone()))?;
        }
        for s in &cmd.here_strings {
            let s = self.expand_one(script, s);
            if s.is_dynamic() {
                return block(
                    "uninspectable",
                    "a shell reading a here-string built at run time cannot be checked",
                );
            }
            self.nested(&s.text, depth, "here-string", Shell::New(start.clone()))?;
        }
        if let Some(from) = cmd.piped_from {
            let upstream = &script.commands[from];
            return match self.piped_script(script, upstream) {
                Some(text) => self.nested(&text, depth, "pipe", Shell::New(start)),
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

    /// `cd`, `pushd`, `popd`: where relative paths point from now on.
    fn cd(&mut self, name: &str, args: &[Word]) {
        let target = args
            .iter()
            .find(|a| !a.text.starts_with('-') || a.text == "-");
        let state = self.frame().state();
        let to = match (name, target) {
            ("popd", _) => state.dirs.last().cloned(),
            (_, None) if name == "pushd" => state.dirs.last().cloned(),
            (_, None) => self.env.home.clone(),
            (_, Some(w)) if w.text == "-" => state.oldcwd.clone(),
            (_, Some(w)) if w.is_dynamic() => None,
            // `CDPATH` set in the line: a relative `cd` may land anywhere. Judged as from `/`, where every
            // relative recursive delete is refused.
            (_, Some(w)) if self.assigned("CDPATH") && !w.text.starts_with(['.', '/', '~']) => {
                Some(PathBuf::from("/"))
            }
            (_, Some(w)) => Some(self.resolve(&w.text)),
        };
        if let Some(to) = to {
            self.frame_mut().state_mut().move_to(name, to);
        }
    }

    fn resolve(&self, text: &str) -> PathBuf {
        let expanded = match (text.strip_prefix('~'), &self.env.home) {
            (Some(""), Some(home)) => home.clone(),
            (Some(rest), Some(home)) if rest.starts_with('/') => home.join(&rest[1..]),
            (Some(_), _) => PathBuf::from("/home"),
            _ => PathBuf::from(text),
        };
        normalize(&self.cwd().join(expanded))
    }

    /// The text `echo`/`printf`/`cat <<EOF` pipe into the next command, if it is known.
    fn piped_script(&self, script: &Script, upstream: &Command) -> Option<String> {
        let words = strip_keywords(&self.expand_all(script, &upstream.words));
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
                    "the path `{}` is only known at run time (a command's output, input, or a variable set in a branch or loop); use a literal path, or a variable assigned a literal path earlier in the line",
                    word.text
                ),
            });
        }
        let (path, everything) = match self.target(word) {
            Target::Path(p) => (p, false),
            Target::Everything(p) => (p, true),
        };
        let what = if everything {
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

    /// The path a word names for a recursive change. A glob names entries of a directory: all of them
    /// (`*`, `.*`, `[a-z]*`), the git dir (`.g*`), or one kind of entry (`*.egg-info`, `build-*`), which is
    /// judged like one entry.
    fn target(&self, word: &Word) -> Target {
        if !word.glob {
            return Target::Path(self.resolve(&word.text));
        }
        let text = match word.text.trim_end_matches('/') {
            "" => "/",
            t => t,
        };
        let cut = text.find(['*', '?', '[']).unwrap_or(0);
        let (dir, pattern) = match text[..cut].rfind('/') {
            Some(0) => ("/", &text[1..]),
            Some(slash) => (&text[..slash], &text[slash + 1..]),
            None => (".", text),
        };
        let dir = self.resolve(dir);
        let parts: Vec<&str> = pattern.split('/').filter(|p| !p.is_empty()).collect();
        if parts.iter().any(|p| glob_match(p, ".git")) {
            return Target::Path(dir.join(".git"));
        }
        if parts.first().is_some_and(|p| broad_pattern(p)) {
            return Target::Everything(dir);
        }
        // `/home/*u*`, `/w*/repo`: a narrow glob can still name the home directory or the repository.
        let protected = [
            self.env.home.as_deref(),
            Some(self.env.checkout.as_path()),
            Some(self.env.repo_root.as_path()),
            Some(self.env.common_dir.as_path()),
        ];
        for p in protected.into_iter().flatten() {
            let Ok(rel) = p.strip_prefix(&dir) else {
                continue;
            };
            let names: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if parts.len() <= names.len() && parts.iter().zip(&names).all(|(g, n)| glob_match(g, n))
            {
                return Target::Path(names[..parts.len()].iter().fold(dir, |d, n| d.join(n)));
            }
        }
        Target::Path(parts.iter().fold(dir, |d, p| d.join(p)))
    }

    fn chmod(&mut self, name: &str, args: &[Word]) -> Verdict {
        // `chmod -w f`: a mode that looks like an option. chmod's own options are `-R -c -f -v` and long ones.
        let is_option = |a: &Word| {
            a.text.starts_with("--")
                || (name != "chmod" && a.text.starts_with('-') && a.text.len() > 1)
                || (a.text.len() > 1
                    && a.text.starts_with('-')
                    && a.text[1..].chars().all(|c| "Rcfv".contains(c)))
        };
        let options: Vec<String> = args
            .iter()
            .filter(|a| is_option(a))
            .map(|a| a.text.clone())
            .collect();
        let operands: Vec<&Word> = args.iter().filter(|a| !is_option(a)).collect();
        let recursive = has_short(&options, 'R') || options.iter().any(|f| f == "--recursive");
        if !recursive {
            return Ok(());
        }
        // The first operand is the mode or owner, unless `--reference` gives it.
        let reference = options.iter().any(|o| o.starts_with("--reference"));
        let (mode, targets) = match operands.split_first() {
            Some((m, rest)) if !reference => (Some(*m), rest),
            _ => (None, &operands[..]),
        };
        let owner_adds = name == "chmod" && mode.is_some_and(|m| owner_adds_only(&m.text));
        for w in targets {
            let Some(b) = self.dangerous_target(w) else {
                continue;
            };
            let is_checkout = match self.target(w) {
                Target::Path(p) | Target::Everything(p) => p == self.env.checkout,
            };
            if is_checkout && b.rule == "repo-root" {
                if owner_adds {
                    // Only adds permissions for the owner: nothing is lost.
                    continue;
                }
                return Err(Blocked {
                    rule: b.rule,
                    reason: format!("recursive {name}: {}; only adding permissions for the owner (`chmod -R u+w .`, `u+rwX`) is allowed across the checkout", b.reason),
                });
            }
            return Err(Blocked {
                rule: b.rule,
                reason: format!("recursive {name}: {}", b.reason),
            });
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
                    // Run by find as its own process, in find's directory: nothing it does lasts, and
                    // (`&&`) it does not end find's and-or list.
                    let cmd = Command {
                        words: inner,
                        scope: self.frame().scope().to_vec(),
                        background: true,
                        op: Some("&&"),
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
}

/// What a word names for a recursive change (see [`Checker::target`]).
enum Target {
    Path(PathBuf),
    /// Every entry of the directory.
    Everything(PathBuf),
}

/// A glob that may match any name of a directory: no literal character but `.` outside brackets.
fn broad_pattern(pattern: &str) -> bool {
    let mut in_brackets = false;
    for c in pattern.chars() {
        match c {
            ']' if in_brackets => in_brackets = false,
            _ if in_brackets => {}
            '[' => in_brackets = true,
            '*' | '?' | '.' => {}
            _ => return false,
        }
    }
    true
}

/// Whether a glob matches `name` as bash matches it (a leading `.` only by a literal `.`).
///
/// The glob comes from the model's command line, so matching must not blow up on `*a*a*a*a*b`: every token but
/// `*` consumes exactly one character, so the classic two-pointer walk (retry from the last `*` one character
/// further on a mismatch) is exact and takes at most pattern x name steps.
fn glob_match(pattern: &str, name: &str) -> bool {
    if name.starts_with('.') && !pattern.starts_with('.') {
        return false;
    }
    let tokens = glob_tokens(pattern);
    let name: Vec<char> = name.chars().collect();
    let (mut t, mut n) = (0, 0);
    // The token after the last `*` seen, and the name position that `*` is currently taken to end at.
    let mut backtrack: Option<(usize, usize)> = None;
    while n < name.len() {
        match tokens.get(t) {
            Some(GlobToken::Star) => {
                t += 1;
                backtrack = Some((t, n));
            }
            Some(token) if token.matches(name[n]) => {
                t += 1;
                n += 1;
            }
            _ => match backtrack {
                Some((star_next, star_end)) => {
                    backtrack = Some((star_next, star_end + 1));
                    t = star_next;
                    n = star_end + 1;
                }
                None => return false,
            },
        }
    }
    tokens[t..]
        .iter()
        .all(|token| matches!(token, GlobToken::Star))
}

/// One element of a glob: `*` matches any run of characters, every other token exactly one.
enum GlobToken {
    Star,
    Any,
    Literal(char),
    /// `[...]`: single characters and `a-z` ranges; `negate` for `[!...]` and `[^...]`.
    Set {
        negate: bool,
        chars: Vec<char>,
        ranges: Vec<(char, char)>,
    },
}

impl GlobToken {
    /// Whether this one-character token matches `c` (`*` is handled by the caller).
    fn matches(&self, c: char) -> bool {
        match self {
            GlobToken::Star | GlobToken::Any => true,
            GlobToken::Literal(l) => *l == c,
            GlobToken::Set {
                negate,
                chars,
                ranges,
            } => {
                let hit =
                    chars.contains(&c) || ranges.iter().any(|(lo, hi)| (*lo..=*hi).contains(&c));
                hit != *negate
            }
        }
    }
}

/// A glob's tokens. A `]` right after `[` (or `[!`) belongs to the set; a `[` with no closing `]` is a literal.
fn glob_tokens(pattern: &str) -> Vec<GlobToken> {
    let p: Vec<char> = pattern.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < p.len() {
        let token = match p[i] {
            '*' => GlobToken::Star,
            '?' => GlobToken::Any,
            '[' => match p[i + 1..].iter().skip(1).position(|c| *c == ']') {
                Some(offset) => {
                    let body = &p[i + 1..i + 2 + offset];
                    i += offset + 3;
                    tokens.push(glob_set(body));
                    continue;
                }
                None => GlobToken::Literal('['),
            },
            c => GlobToken::Literal(c),
        };
        tokens.push(token);
        i += 1;
    }
    tokens
}

/// The set token for the text between `[` and its `]`.
fn glob_set(body: &[char]) -> GlobToken {
    let (negate, set) = match body.split_first() {
        Some(('!' | '^', set)) => (true, set),
        _ => (false, body),
    };
    let (mut chars, mut ranges) = (Vec::new(), Vec::new());
    let mut i = 0;
    while i < set.len() {
        if i + 2 < set.len() && set[i + 1] == '-' {
            ranges.push((set[i], set[i + 2]));
            i += 3;
        } else {
            chars.push(set[i]);
            i += 1;
        }
    }
    GlobToken::Set {
        negate,
        chars,
        ranges,
    }
}

/// A `chmod` mode that only adds permissions for the file's owner (`u+w`, `u+rwX`, `u+x,u+r`).
fn owner_adds_only(mode: &str) -> bool {
    mode.split(',').all(|clause| {
        let Some(perms) = clause.strip_prefix('u') else {
            return false;
        };
        let perms = perms.trim_start_matches('u');
        perms.starts_with('+')
            && perms
                .split('+')
                .skip(1)
                .all(|p| !p.is_empty() && p.chars().all(|c| "rwxX".contains(c)))
    })
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

/// `env`'s own settings: whether it starts from an empty environment (`-i`, `-`) and what it sets.
fn env_settings(args: &[Word]) -> (bool, Vec<(String, Value)>) {
    let mut cleared = false;
    let mut set = Vec::new();
    for a in args {
        let t = a.text.as_str();
        if matches!(t, "-i" | "--ignore-environment" | "-") {
            cleared = true;
        } else if t.starts_with('-') {
            continue;
        } else if let (true, Some((name, value))) = (is_assignment(a), t.split_once('=')) {
            let value = match a.is_dynamic() {
                true => Value::Runtime,
                false => Value::Text(value.to_string()),
            };
            set.push((name.to_string(), value));
        } else {
            break;
        }
    }
    (cleared, set)
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
mod table;

#[cfg(test)]
mod glob_tests {
    use super::glob_match;
    use std::time::{Duration, Instant};

    /// The former recursive matcher (exponential on several `*`): the semantics the linear one must keep.
    fn reference(pattern: &str, name: &str) -> bool {
        fn matches(p: &[char], n: &[char]) -> bool {
            match p.split_first() {
                None => n.is_empty(),
                Some(('*', rest)) => (0..=n.len()).any(|i| matches(rest, &n[i..])),
                Some(('?', rest)) => !n.is_empty() && matches(rest, &n[1..]),
                Some(('[', rest)) => {
                    let Some(close) = rest.iter().skip(1).position(|c| *c == ']').map(|i| i + 1)
                    else {
                        return n.first() == Some(&'[') && matches(rest, &n[1..]);
                    };
                    let Some(c) = n.first() else {
                        return false;
                    };
                    let (negate, set) = match rest[..close].split_first() {
                        Some(('!' | '^', set)) => (true, set),
                        _ => (false, &rest[..close]),
                    };
                    let mut hit = false;
                    let mut i = 0;
                    while i < set.len() {
                        if i + 2 < set.len() && set[i + 1] == '-' {
                            hit |= (set[i]..=set[i + 2]).contains(c);
                            i += 3;
                        } else {
                            hit |= set[i] == *c;
                            i += 1;
                        }
                    }
                    hit != negate && matches(&rest[close + 1..], &n[1..])
                }
                Some((c, rest)) => n.first() == Some(c) && matches(rest, &n[1..]),
            }
        }
        if name.starts_with('.') && !pattern.starts_with('.') {
            return false;
        }
        let p: Vec<char> = pattern.chars().collect();
        let n: Vec<char> = name.chars().collect();
        matches(&p, &n)
    }

    #[test]
    fn glob_match_is_linear_on_many_stars() {
        let name = "a".repeat(200);
        let start = Instant::now();
        assert!(!glob_match("*a*a*a*a*a*b", &name));
        assert!(!glob_match("*[a]*?*a*a*a*[!a]", &name));
        assert!(glob_match("*a*a*a*a*a*", &name));
        assert!(
            start.elapsed() < Duration::from_millis(100),
            "took {:?}",
            start.elapsed()
        );
    }

    #[test]
    fn glob_match_semantics() {
        let cases: &[(&str, &str, bool)] = &[
            ("*", "abc", true),
            ("*", "", true),
            ("", "", true),
            ("", "a", false),
            ("a*c", "abbbc", true),
            ("a*c", "abbbd", false),
            ("*.rs", ".hidden.rs", false),
            (".*", ".git", true),
            ("?", "a", true),
            ("?", "", false),
            ("??", "a", false),
            ("a?c", "abc", true),
            ("[abc]", "b", true),
            ("[abc]", "d", false),
            ("[a-c]x", "bx", true),
            ("[a-c]x", "dx", false),
            ("[!a-c]", "d", true),
            ("[!a-c]", "b", false),
            ("[^a]", "b", true),
            ("[^a]", "a", false),
            ("[]a]", "]", true),
            ("[!]a]", "]", false),
            ("[!]", "x", true),
            ("[a-]", "-", true),
            ("[", "[", true),
            ("[ab", "[ab", true),
            ("[ab", "a", false),
            ("x[*", "x[yz", true),
            ("*[", "ab[", true),
            ("[.]git", ".git", false),
            ("h[o]me", "home", true),
            ("*u*", "user", true),
            ("*é*", "café", true),
            ("**", "x", true),
            ("a**b", "ab", true),
            ("*a*b", "aab", true),
            ("*ab", "aaab", true),
            ("*ab", "abab", true),
            ("*ab", "aba", false),
        ];
        for (pattern, name, want) in cases {
            assert_eq!(glob_match(pattern, name), *want, "{pattern:?} vs {name:?}");
            assert_eq!(
                reference(pattern, name),
                *want,
                "reference: {pattern:?} vs {name:?}"
            );
        }
    }

    #[test]
    fn glob_match_agrees_with_the_recursive_matcher() {
        // Every pattern of up to 3 tokens from a small alphabet against every name of up to 4 characters.
        let atoms = ["a", "b", "*", "?", "[a]", "[!a]", "[", "]", "."];
        let letters = ['a', 'b', '[', ']', '.'];
        let mut patterns = vec![String::new()];
        for _ in 0..3 {
            let longer: Vec<String> = patterns
                .iter()
                .flat_map(|p| atoms.iter().map(move |a| format!("{p}{a}")))
                .collect();
            patterns.extend(longer);
            patterns.sort();
            patterns.dedup();
        }
        let mut names = vec![String::new()];
        for _ in 0..4 {
            let longer: Vec<String> = names
                .iter()
                .flat_map(|n| letters.iter().map(move |c| format!("{n}{c}")))
                .collect();
            names.extend(longer);
            names.sort();
            names.dedup();
        }
        for pattern in &patterns {
            for name in &names {
                assert_eq!(
                    glob_match(pattern, name),
                    reference(pattern, name),
                    "{pattern:?} vs {name:?}"
                );
            }
        }
    }
}
