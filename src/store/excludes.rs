//! Git's global excludes file (`core.excludesFile`, else `$XDG_CONFIG_HOME/git/ignore`) for the `ignore`
//! walks of a checkout: the change scan, its watcher's rules, the language servers' look at the checkout and
//! the `list_files`/`search` tools.
//!
//! The `ignore` crate finds that file itself when a walk keeps `git_global(true)`, but it reads the setting
//! from each git config file with a regular expression it compiles at first use: 1.6 M instructions, 8% of
//! the agent process's in a small session (`valgrind --tool=callgrind`, issue 29), and about 200 KB of the
//! regex compiler's code made resident, in a session that matches no other regular expression. gix's config
//! parser, whose code every repository open already runs, reads the same files here, and the walks take the
//! file as an explicit ignore file instead: the `ignore` crate ranks that right below the global excludes,
//! which are then off. Its patterns are anchored at the walked work tree's root, as git anchors them.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

#[cfg(all(target_os = "linux", not(git_agent_portable)))]
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use ignore::WalkBuilder;

/// Makes `walk` apply git's global excludes file, found here (see the module's comment), to the work tree
/// at `root`: its patterns are anchored there, as git anchors them (the `ignore` crate's own lookup anchored
/// them at the process's working directory, which for a session's checkout is the user's work tree).
pub fn apply<'w>(walk: &'w mut WalkBuilder, root: &Path) -> &'w mut WalkBuilder {
    apply_file(walk, root, file())
}

/// The rules of git's global excludes file, matched relative to `root`; empty when there is none.
// Only the watcher's rules (inotify, Linux) ask for these.
#[cfg(all(target_os = "linux", not(git_agent_portable)))]
pub fn gitignore(root: &Path) -> Gitignore {
    gitignore_of(root, file())
}

fn apply_file<'w>(
    walk: &'w mut WalkBuilder,
    root: &Path,
    file: Option<PathBuf>,
) -> &'w mut WalkBuilder {
    walk.git_global(false).current_dir(root);
    if let Some(path) = file {
        // A file that cannot be read adds no rules, as with the `ignore` crate's own lookup.
        let _ = walk.add_ignore(path);
    }
    walk
}

#[cfg(all(target_os = "linux", not(git_agent_portable)))]
fn gitignore_of(root: &Path, file: Option<PathBuf>) -> Gitignore {
    let Some(path) = file else {
        return Gitignore::empty();
    };
    let mut builder = GitignoreBuilder::new(root);
    let _ = builder.add(path);
    builder.build().unwrap_or_else(|_| Gitignore::empty())
}

/// Git's global excludes file if it exists: `core.excludesFile` of the user's global config (the file
/// `GIT_CONFIG_GLOBAL` names, else `~/.gitconfig` over `$XDG_CONFIG_HOME/git/config`), then of the system's
/// (`GIT_CONFIG_SYSTEM` or `/etc/gitconfig`, unless `GIT_CONFIG_NOSYSTEM`), else `$XDG_CONFIG_HOME/git/ignore`
/// (`~/.config/git/ignore`). The last value in a file wins, and `GIT_CONFIG_GLOBAL` replaces both user
/// files even when it names none, as in git (the `ignore` crate's own lookup then still reads them).
pub fn file() -> Option<PathBuf> {
    file_with(&|name| std::env::var_os(name), dirs::home_dir())
}

/// [`file()`] with the environment read through `var` and the home directory given.
fn file_with(var: &dyn Fn(&str) -> Option<OsString>, home: Option<PathBuf>) -> Option<PathBuf> {
    let set = |name: &str| var(name).filter(|v| !v.is_empty());
    let xdg = set("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| home.as_ref().map(|h| h.join(".config")));
    let global: Vec<PathBuf> = match set("GIT_CONFIG_GLOBAL") {
        Some(path) => vec![PathBuf::from(path)],
        None => [
            home.as_ref().map(|h| h.join(".gitconfig")),
            xdg.as_ref().map(|x| x.join("git/config")),
        ]
        .into_iter()
        .flatten()
        .collect(),
    };
    // A boolean as git reads one: anything but a false value turns the system's config off.
    let no_system = set("GIT_CONFIG_NOSYSTEM").is_some_and(|v| {
        !["0", "false", "no", "off"]
            .iter()
            .any(|f| v.eq_ignore_ascii_case(f))
    });
    let system = (!no_system)
        .then(|| set("GIT_CONFIG_SYSTEM").map_or_else(|| "/etc/gitconfig".into(), PathBuf::from));
    let path = global
        .iter()
        .chain(system.as_ref())
        .find_map(|config| setting(config, home.as_deref()))
        .or_else(|| xdg.map(|x| x.join("git/ignore")))?;
    path.is_file().then_some(path)
}

/// `core.excludesFile` of the git config file at `config`, with a leading `~/` expanded to `home`.
fn setting(config: &Path, home: Option<&Path>) -> Option<PathBuf> {
    let bytes = std::fs::read(config).ok()?;
    let meta = gix::config::file::Metadata::from(gix::config::Source::Api);
    let file = gix::config::File::from_bytes_no_includes(&bytes, meta, Default::default()).ok()?;
    let value = file.path("core.excludesFile")?;
    let context = gix::config::path::interpolate::Context {
        home_dir: home,
        ..Default::default()
    };
    let path = value.interpolate(context).ok()?;
    (!path.as_os_str().is_empty()).then_some(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) -> PathBuf {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
        path.to_owned()
    }

    fn excludes(path: &Path) -> String {
        format!("[core]\n\texcludesFile = {}\n", path.display())
    }

    #[test]
    fn reads_the_setting_as_git_does() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let config = dir.path().join("config");
        write(
            &config,
            "[user]\n\texcludesFile = /not/core\n[core]\n\tExcludesFile = \"~/first\" ; a comment\n\
             [CORE]\n\texcludesfile = ~/ignore-file\n",
        );
        assert_eq!(
            setting(&config, Some(&home)),
            Some(home.join("ignore-file"))
        );
        write(&config, "[core]\n\tautocrlf = false\n");
        assert_eq!(setting(&config, Some(&home)), None);
        write(&config, "[core]\n\texcludesFile = /abs/file\n");
        assert_eq!(setting(&config, None), Some(PathBuf::from("/abs/file")));
        assert_eq!(setting(&dir.path().join("missing"), None), None);
    }

    #[test]
    fn finds_the_file_where_git_looks() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let [named, by_home, by_xdg, by_system, default] =
            ["named", "home", "xdg", "system", "default"]
                .map(|name| write(&dir.path().join("ignores").join(name), "*.log\n"));
        write(&home.join(".config/git/ignore"), "*.log\n");
        let default_in_home = home.join(".config/git/ignore");
        let env = |vars: &[(&str, &Path)]| {
            let vars: Vec<(String, OsString)> = vars
                .iter()
                .map(|(k, v)| (k.to_string(), v.as_os_str().to_owned()))
                .collect();
            move |name: &str| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
        };
        let find = |vars: &[(&str, &Path)]| file_with(&env(vars), Some(home.clone()));
        let system = write(&dir.path().join("etc/gitconfig"), &excludes(&by_system));
        let sys = ("GIT_CONFIG_SYSTEM", system.as_path());
        // Nothing configured: the default under the home's .config (or XDG_CONFIG_HOME).
        let nosys = ("GIT_CONFIG_NOSYSTEM", Path::new("1"));
        assert_eq!(find(&[nosys]), Some(default_in_home.clone()));
        let xdg_home = dir.path().join("xdg");
        write(&xdg_home.join("git/ignore"), "x\n");
        assert_eq!(
            find(&[nosys, ("XDG_CONFIG_HOME", &xdg_home)]),
            Some(xdg_home.join("git/ignore"))
        );
        // The system's setting is the lowest, and off with GIT_CONFIG_NOSYSTEM.
        assert_eq!(find(&[sys]), Some(by_system.clone()));
        let sys_on = ("GIT_CONFIG_NOSYSTEM", Path::new("Off"));
        assert_eq!(find(&[sys, sys_on]), Some(by_system.clone()));
        assert_eq!(
            find(&[sys, ("GIT_CONFIG_NOSYSTEM", Path::new("yes"))]),
            Some(default_in_home.clone())
        );
        // The XDG config, then ~/.gitconfig over it.
        write(&home.join(".config/git/config"), &excludes(&by_xdg));
        assert_eq!(find(&[sys]), Some(by_xdg.clone()));
        write(&home.join(".gitconfig"), &excludes(&by_home));
        assert_eq!(find(&[sys]), Some(by_home.clone()));
        // GIT_CONFIG_GLOBAL replaces both user files, even when it sets nothing.
        let global = write(&dir.path().join("global"), &excludes(&named));
        assert_eq!(find(&[sys, ("GIT_CONFIG_GLOBAL", &global)]), Some(named));
        let empty = Path::new("/dev/null");
        assert_eq!(find(&[sys, ("GIT_CONFIG_GLOBAL", empty)]), Some(by_system));
        assert_eq!(
            find(&[nosys, ("GIT_CONFIG_GLOBAL", empty)]),
            Some(default_in_home)
        );
        // A configured file that does not exist is no file, as in git.
        std::fs::remove_file(&default).unwrap();
        write(&home.join(".gitconfig"), &excludes(&default));
        assert_eq!(find(&[nosys]), None);
    }

    #[test]
    fn walks_and_rules_skip_what_the_global_file_ignores() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("tree");
        for name in [
            "keep.txt",
            "drop.log",
            "sub/drop.log",
            "sub/keep.rs",
            "out/x.txt",
        ] {
            write(&root.join(name), "x");
        }
        let global = write(&dir.path().join("global-ignore"), "*.log\n/out/\n");
        let mut walk = WalkBuilder::new(&root);
        walk.require_git(false);
        // The tree's root anchors `/out/`, as git anchors it at the work tree's root.
        let mut names: Vec<String> = apply_file(&mut walk, &root, Some(global.clone()))
            .build()
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_some_and(|t| t.is_file()))
            .map(|e| e.path().strip_prefix(&root).unwrap().display().to_string())
            .collect();
        names.sort();
        assert_eq!(names, ["keep.txt", "sub/keep.rs"]);
        #[cfg(all(target_os = "linux", not(git_agent_portable)))]
        {
            let rules = gitignore_of(&root, Some(global));
            assert!(rules.matched(root.join("sub/drop.log"), false).is_ignore());
            assert!(rules.matched(root.join("out"), true).is_ignore());
            assert!(rules.matched(root.join("keep.txt"), false).is_none());
            assert!(gitignore_of(&root, None).is_empty());
        }
    }
}
