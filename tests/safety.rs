//! Safety end to end: the guard, rules and approvals in front of tool calls, the Landlock sandbox of `run`,
//! and secrets kept out of git (the canary test of issue 6). Every test ends with the user's state unchanged.

use std::fs;
use std::net::TcpListener;
use std::path::Path;

use serde_json::{json, Value};

use crate::common::{call, fsck, run, session_id, user_state, Reply, Server, TestRepo, ToolCall};

/// Landlock is a Linux feature of kernels since 5.13: the portable configuration ignores the sandbox tests
/// (`cfg_attr`), and on an older kernel they say so and pass.
fn landlock_available(test: &str) -> bool {
    let available = git_agent::platform::landlock_abi() >= 1;
    if !available {
        eprintln!("SKIPPED {test}: this kernel does not support Landlock");
    }
    available
}

fn json_events(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

fn permission(events: &[Value], id: &str) -> Value {
    events
        .iter()
        .find(|e| e["type"] == "permission" && e["id"] == id)
        .unwrap_or_else(|| panic!("no permission event for {id} in {events:?}"))
        .clone()
}

#[test]
fn guard_refuses_and_tells_the_model_to_ask_the_user() {
    let repo = TestRepo::new();
    repo.git(&["branch", "feature"]);
    let before = user_state(&repo);
    let delete = call("run", json!({"command": "git branch -D feature"}));
    let sneaky = call(
        "run",
        json!({"command": "bash -c \"$(echo git stash clear)\""}),
    );
    let fine = call(
        "run",
        json!({"command": "git commit -m 'rm -rf /' --allow-empty --dry-run; echo done"}),
    );
    let server = Server::start(vec![
        Reply::tool_calls(vec![delete.clone(), sneaky.clone(), fine.clone()]),
        Reply::text("I was blocked."),
    ]);
    let out = repo.run_agent(&server, &["ask", "--json", "clean up branches"]);
    out.assert_code(0);
    let events = json_events(out.stdout());
    let refused = permission(&events, &delete.id);
    assert_eq!(refused["decision"], "deny");
    assert_eq!(refused["rule"], "guard:git-branch-delete");
    assert_eq!(
        permission(&events, &sneaky.id)["rule"],
        "guard:uninspectable"
    );
    assert_eq!(permission(&events, &fine.id)["decision"], "allow");
    let last = server.requests().pop().expect("a follow-up request");
    let result = last.tool_result(&delete.id);
    assert!(
        result.contains("blocked by guard:git-branch-delete"),
        "{result}"
    );
    assert!(result.contains("ask the user"), "{result}");
    assert!(last.tool_result(&fine.id).contains("done"));
    assert!(repo
        .git(&["branch", "--list", "feature"])
        .contains("feature"));
    assert_eq!(user_state(&repo), before);
    fsck(&repo);
}

#[test]
fn rules_and_approvals_without_a_terminal() {
    let repo = TestRepo::new();
    let before = user_state(&repo);
    let ls = call("run", json!({"command": "ls -la"}));
    let push = call("run", json!({"command": "git push origin HEAD"}));
    let cat = call("run", json!({"command": "cat file.txt"}));
    let server = Server::start(vec![
        Reply::tool_calls(vec![ls.clone(), push.clone(), cat.clone()]),
        Reply::text("done"),
    ]);
    let out = repo.run_agent(
        &server,
        &[
            "ask",
            "--json",
            "--deny",
            "Run(ls:*)",
            "--allow",
            "Run(cat *)",
            "look",
        ],
    );
    out.assert_code(0);
    let events = json_events(out.stdout());
    assert_eq!(permission(&events, &ls.id)["rule"], "Run(ls:*)");
    let push_decision = permission(&events, &push.id);
    assert_eq!(
        (
            push_decision["decision"].as_str(),
            push_decision["rule"].as_str()
        ),
        (Some("deny"), Some("approval"))
    );
    assert!(push_decision["reason"]
        .as_str()
        .unwrap_or_default()
        .contains("cannot ask"));
    assert_eq!(permission(&events, &cat.id)["rule"], "Run(cat *)");
    let bad = repo.run_agent(&server, &["ask", "--deny", "Frob(x)", "look"]);
    bad.assert_code(1);
    assert!(
        bad.first_stderr_line()
            .starts_with("error: invalid permission rule 'Frob(x)'"),
        "{}",
        bad.stderr()
    );
    assert_eq!(user_state(&repo), before);
}

#[test]
#[cfg_attr(git_agent_portable, ignore = "needs Landlock: Linux only")]
fn sandbox_confines_writes_and_keeps_git_read_only() {
    if !landlock_available("sandbox_confines_writes_and_keeps_git_read_only") {
        return;
    }
    let repo = TestRepo::new();
    let before = user_state(&repo);
    let outside = repo.root().join("escape.txt");
    let hook = repo.path().join(".git/hooks/pre-commit");
    // Scripts hide their commands from the guard: only the sandbox stands in the way.
    let script = format!(
        "echo out > {outside}\necho hook > {hook}\ngit branch evil\necho in > inside.txt\n",
        outside = outside.display(),
        hook = hook.display()
    );
    let write = call("write_file", json!({"path": "w.sh", "content": script}));
    let exec = call(
        "run",
        json!({"command": "sh w.sh; git status --short >/dev/null && echo status-ok"}),
    );
    let server = Server::start(vec![
        Reply::tool_calls(vec![write, exec.clone()]),
        Reply::text("done"),
    ]);
    let out = repo.run_agent(&server, &["ask", "--sandbox", "workspace", "try to escape"]);
    out.assert_code(0);
    let result = server
        .requests()
        .pop()
        .expect("follow-up")
        .tool_result(&exec.id);
    assert!(
        !outside.exists(),
        "a write outside the checkout succeeded: {result}"
    );
    assert!(!hook.exists(), "a hook was planted: {result}");
    assert_eq!(repo.git(&["branch", "--list", "evil"]), "", "{result}");
    assert!(
        result.contains("status-ok"),
        "git status must work in the checkout: {result}"
    );
    assert!(
        result.contains("[sandbox: commands may write only under"),
        "{result}"
    );
    let id = session_id(&repo);
    assert_eq!(
        repo.git(&["show", &format!("agent/{id}:inside.txt")]),
        "in\n"
    );
    assert_eq!(user_state(&repo), before);
    fsck(&repo);
}

#[test]
#[cfg_attr(git_agent_portable, ignore = "needs Landlock: Linux only")]
fn network_off_blocks_tcp_connect() {
    if !landlock_available("network_off_blocks_tcp_connect") {
        return;
    }
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a local port");
    let port = listener.local_addr().expect("local addr").port();
    let connect = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected");
    let repo = TestRepo::new();
    let before = user_state(&repo);
    for (flags, expect_connect) in [
        (&["--sandbox", "workspace"][..], true),
        (&["--no-network"][..], false),
    ] {
        let probe = call("run", json!({"command": connect}));
        let server = Server::start(vec![
            Reply::tool_calls(vec![probe.clone()]),
            Reply::text("done"),
        ]);
        let mut args = vec!["ask"];
        args.extend_from_slice(flags);
        args.push("probe the network");
        repo.run_agent(&server, &args).assert_code(0);
        let result = server
            .requests()
            .pop()
            .expect("follow-up")
            .tool_result(&probe.id);
        assert_eq!(
            result.contains("connected\n"),
            expect_connect,
            "{flags:?}: {result}"
        );
    }
    drop(listener);
    assert_eq!(user_state(&repo), before);
}

#[test]
fn canary_secrets_never_reach_git() {
    const ENV_CANARY: &str = "sk-ant-CANARY-4f1d2e3c5b6a7980";
    const DOTENV_CANARY: &str = "dotenv-CANARY-9e8d7c6b5a";
    let repo = TestRepo::new();
    repo.write(".env", &format!("DB_PASSWORD={DOTENV_CANARY}\n"));
    let before = user_state(&repo);
    let dump = format!(
        "env > dump.txt; printenv >> dump.txt; tr '\\0' '\\n' < /proc/$PPID/environ >> dump.txt; cat {}/.env >> dump.txt; echo ok",
        repo.path().display()
    );
    let read_env = call("read_file", json!({"path": ".env"}));
    let run_dump = call("run", json!({"command": dump}));
    let leak = call(
        "write_file",
        json!({"path": "notes.txt", "content": format!("the key is {ENV_CANARY}\n")}),
    );
    let fine = call(
        "write_file",
        json!({"path": "ok.txt", "content": "nothing secret\n"}),
    );
    let server = Server::start(vec![
        Reply::tool_calls(vec![read_env.clone(), run_dump.clone(), leak, fine]),
        Reply::text(&format!("done, the key was {ENV_CANARY}")),
    ]);
    // Unsandboxed: the start-up wipe alone must keep the key out of /proc/<agent>/environ.
    let mut cmd = repo.agent(
        &server,
        &["ask", "--sandbox", "off", "dump the environment"],
    );
    cmd.env("ANTHROPIC_API_KEY", ENV_CANARY);
    let out = run(&mut cmd);
    out.assert_code(0);
    let last = server.requests().pop().expect("follow-up");
    assert!(last
        .tool_result(&read_env.id)
        .contains("blocked by sensitive-file"));
    assert!(last.tool_result(&run_dump.id).contains("ok"));
    let id = session_id(&repo);
    let checkout = repo.path().join(".git/agent/worktrees").join(&id);
    let dumped =
        fs::read_to_string(checkout.join("dump.txt")).expect("dump.txt stays in the checkout");
    assert!(
        !dumped.contains(ENV_CANARY),
        "the key reached a command's environment"
    );
    assert!(
        dumped.contains(DOTENV_CANARY),
        "the test must put the .env value in a file"
    );
    assert!(
        out.stderr().contains("dump.txt was not committed"),
        "{}",
        out.stderr()
    );
    assert!(
        out.stderr().contains("notes.txt was not committed"),
        "{}",
        out.stderr()
    );
    assert_eq!(
        repo.git(&["show", &format!("agent/{id}:ok.txt")]),
        "nothing secret\n"
    );
    assert!(
        !checkout.join(".env").exists(),
        "the user's .env was captured into the session"
    );
    let objects = all_objects(repo.path());
    for canary in [ENV_CANARY, DOTENV_CANARY] {
        assert!(
            !objects.contains(canary),
            "{canary} is in the object database"
        );
    }
    assert_eq!(user_state(&repo), before);
    fsck(&repo);
}

/// Every object of the repository, as `git cat-file --batch-all-objects --batch` prints them.
fn all_objects(repo: &Path) -> String {
    let out = std::process::Command::new("git")
        .args(["cat-file", "--batch-all-objects", "--batch"])
        .current_dir(repo)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .expect("git cat-file runs");
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Issue 17 defect 6: the common key formats that have no known value (AWS secret keys, Stripe, Google, npm,
/// passwords in URLs) stay out of the session log, the notes and the step commits.
#[test]
fn common_key_formats_never_reach_git() {
    let secrets = [
        "Zt9+k2ab/Qw8XyLmNoPqRsTuVwXyZaBcDeFgHiJk",
        "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
        "AIzaSyDaGmWKa4JsXZ-HjGw7ISLn_3namBGewQe",
        "npm_abcdefghijklmnopqrstuvwxyz0123456789",
        "s3cr3t-Pw-7731",
    ];
    let content = format!(
        "[default]\naws_secret_access_key = {}\nAWS_SECRET_ACCESS_KEY={}\nSTRIPE={}\nGOOGLE={}\n//registry.npmjs.org/:_authToken={}\nDATABASE_URL=postgres://app:{}@db:5432/app\n",
        secrets[0], secrets[0], secrets[1], secrets[2], secrets[3], secrets[4]
    );
    let repo = TestRepo::new();
    let before = user_state(&repo);
    let write = call(
        "write_file",
        json!({"path": "settings.ini", "content": content}),
    );
    let show = call("run", json!({"command": "cat settings.ini; echo shown"}));
    let server = Server::start(vec![
        Reply::tool_calls(vec![write, show.clone()]),
        Reply::text(&format!(
            "connect with postgres://app:{}@db/app",
            secrets[4]
        )),
    ]);
    let out = repo.run_agent(&server, &["ask", "--sandbox", "off", "configure it"]);
    out.assert_code(0);
    assert!(server
        .requests()
        .pop()
        .expect("follow-up")
        .tool_result(&show.id)
        .contains("shown"));
    assert!(
        out.stderr().contains("settings.ini was not committed"),
        "{}",
        out.stderr()
    );
    let objects = all_objects(repo.path());
    let notes = repo.git(&["log", "--notes=agent", "--format=%B%N", "--all"]);
    for secret in secrets {
        assert!(
            !objects.contains(secret),
            "{secret} is in the object database"
        );
        assert!(!notes.contains(secret), "{secret} is in a note or commit");
    }
    session_id(&repo);
    assert_eq!(user_state(&repo), before);
    fsck(&repo);
}

/// Issue 17: a `terraform destroy -auto-approve` the guard missed really ran. Here the scripted model asks
/// for it through `bash -c` and through `env` with `apply -destroy`; both are denied with the infrastructure
/// rule before anything runs, while the precise cases next to them (a variable assigned in the line, a
/// fresh `mktemp -d`, a permission-only `chmod -R`) run. The refused commands are harmless even if they ran
/// (an empty checkout, a missing `-chdir`), so a broken guard fails the test without destroying anything.
#[test]
fn guard_refuses_infrastructure_destruction_and_runs_the_precise_cases() {
    let repo = TestRepo::new();
    let before = user_state(&repo);
    let destroy = call(
        "run",
        json!({"command": "bash -c 'terraform destroy -auto-approve'"}),
    );
    let apply_destroy = call(
        "run",
        json!({"command": "env TF_IN_AUTOMATION=1 terraform -chdir=no-such-dir apply -destroy -auto-approve"}),
    );
    let variable = call(
        "run",
        json!({"command": "X=build; mkdir -p \"$X/out\" && touch \"$X/out/f\" \"$X/keep\" && rm -rf \"$X\"/* && ls -A build | wc -l | tr -d ' ' && echo cleaned"}),
    );
    let temp = call(
        "run",
        json!({"command": "T=$(mktemp -d) && touch \"$T/x\" && rm -rf \"$T\" && test ! -e \"$T\" && echo temp-gone"}),
    );
    let owner = call("run", json!({"command": "chmod -R u+w . && echo perms-ok"}));
    let revoke = call("run", json!({"command": "chmod -R a-r ."}));
    let server = Server::start(vec![
        Reply::tool_calls(vec![
            destroy.clone(),
            apply_destroy.clone(),
            variable.clone(),
            temp.clone(),
            owner.clone(),
            revoke.clone(),
        ]),
        Reply::text("done"),
    ]);
    let out = repo.run_agent(&server, &["ask", "--json", "tear the staging stack down"]);
    out.assert_code(0);
    let events = json_events(out.stdout());
    for refused in [&destroy, &apply_destroy] {
        let decision = permission(&events, &refused.id);
        assert_eq!(decision["decision"], "deny", "{decision}");
        assert_eq!(decision["rule"], "guard:infra-destroy", "{decision}");
        assert!(
            decision["reason"]
                .as_str()
                .unwrap_or_default()
                .contains("deletes every resource the configuration manages"),
            "{decision}"
        );
    }
    let revoked = permission(&events, &revoke.id);
    assert_eq!(
        (revoked["decision"].as_str(), revoked["rule"].as_str()),
        (Some("deny"), Some("guard:repo-root"))
    );
    for allowed in [&variable, &temp, &owner] {
        assert_eq!(permission(&events, &allowed.id)["decision"], "allow");
    }
    let last = server.requests().pop().expect("a follow-up request");
    let result = last.tool_result(&destroy.id);
    assert!(
        result.contains("blocked by guard:infra-destroy"),
        "{result}"
    );
    assert!(result.contains("ask the user"), "{result}");
    assert!(
        last.tool_result(&variable.id).contains("0\ncleaned"),
        "{}",
        last.tool_result(&variable.id)
    );
    assert!(last.tool_result(&temp.id).contains("temp-gone"));
    assert!(last.tool_result(&owner.id).contains("perms-ok"));
    assert_eq!(user_state(&repo), before);
    fsck(&repo);
}

/// What the one session's command wrote to `dump.txt` in its checkout.
fn findings(repo: &TestRepo) -> String {
    let id = session_id(repo);
    let path = repo
        .path()
        .join(".git/agent/worktrees")
        .join(id)
        .join("dump.txt");
    fs::read_to_string(path).expect("the command wrote its findings")
}

/// Issue 17, keys out of reach: started as `timeout 60 git agent ask`, the wrapper and git hold a key in their
/// environments; the agent's own is clean, and its commands run in a PID namespace with a private /proc,
/// so `cat /proc/*/environ`, `ps e` and a walk up `/proc/$PPID` find nothing of it. The same run with the
/// namespace turned off must find the key (the test can see a leak) and must say so on stderr and in --json.
#[test]
fn keys_in_parent_environments_stay_out_of_reach_of_commands() {
    const CANARY: &str = "sk-ant-PARENT-CANARY-77aa11bb22cc";
    let probe = "p=$PPID; while [ \"$p\" -gt 1 ] 2>/dev/null; do tr '\\0' '\\n' < /proc/$p/environ; p=$(cut -d' ' -f4 /proc/$p/stat); done; cat /proc/*/environ | tr '\\0' '\\n'; ps e -A -ww; echo probed";
    for isolated in [true, false] {
        let repo = TestRepo::new();
        let before = user_state(&repo);
        let dump = call(
            "run",
            json!({"command": format!("({probe}) > dump.txt 2>&1; cat dump.txt")}),
        );
        let server = Server::start(vec![
            Reply::tool_calls(vec![dump.clone()]),
            Reply::text("done"),
        ]);
        let mut cmd = repo.via(
            &server,
            "timeout",
            &[
                "60",
                "git",
                "agent",
                "ask",
                "--json",
                "--sandbox",
                "off",
                "look around",
            ],
        );
        cmd.env("ANTHROPIC_API_KEY", CANARY);
        if !isolated {
            cmd.env("GIT_AGENT_ISOLATION", "off");
        }
        let out = run(&mut cmd);
        out.assert_code(0);
        let dumped = findings(&repo);
        assert!(dumped.contains("probed"), "{dumped}");
        let events = json_events(&out.full_stdout);
        let notice = events
            .iter()
            .find(|e| e["type"] == "notice" && e["topic"] == "isolation");
        if isolated {
            if !git_agent::platform::isolation().is_namespace() {
                eprintln!("SKIPPED the isolated half: the kernel refuses namespaces here");
                assert!(
                    notice.is_some(),
                    "the fallback is announced: {}",
                    out.stdout()
                );
                continue;
            }
            assert!(!dumped.contains(CANARY), "a command read the key: {dumped}");
            assert!(notice.is_none(), "{}", out.stdout());
        } else {
            // The control: without the namespace the key in git's and timeout's environment is readable.
            assert!(
                dumped.contains(CANARY),
                "the probe cannot see a leak: {dumped}"
            );
            let notice = notice.expect("the fallback is announced in --json");
            assert!(
                notice["message"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("without a private /proc"),
                "{notice}"
            );
            assert!(
                out.full_stderr()
                    .contains("warning: commands run without a private /proc"),
                "{}",
                out.full_stderr()
            );
        }
        // Whatever the command saw, nothing of the key reaches the model, git objects or notes.
        for request in server.requests() {
            assert!(
                !request.raw_body.contains(CANARY),
                "the key went to the model"
            );
        }
        assert!(
            !all_objects(repo.path()).contains(CANARY),
            "the key is in git"
        );
        let notes = repo.git(&["log", "--notes=agent", "--format=%B%N", "--all"]);
        assert!(!notes.contains(CANARY));
        assert_eq!(user_state(&repo), before);
        fsck(&repo);
    }
}

/// Issue 24: a session says once what its commands are not isolated from. Where neither Landlock nor a
/// private /proc is to be had (the portable configuration, as macOS and the BSDs build it) that is one
/// notice naming both holes, not one per missing feature; with Landlock and the namespace turned off, it is
/// the one about /proc alone.
#[test]
fn a_session_says_once_what_its_commands_are_not_isolated_from() {
    let repo = TestRepo::new();
    let server = Server::start(vec![Reply::text("done")]);
    let mut cmd = repo.agent(&server, &["ask", "--json", "hello"]);
    if !cfg!(git_agent_portable) {
        cmd.env("GIT_AGENT_ISOLATION", "off");
    }
    let out = run(&mut cmd);
    out.assert_code(0);
    let warnings: Vec<&str> = out
        .full_stderr()
        .lines()
        .filter(|line| line.starts_with("warning: "))
        .collect();
    assert_eq!(warnings.len(), 1, "{}", out.full_stderr());
    let events = json_events(&out.full_stdout);
    let notices: Vec<&Value> = events.iter().filter(|e| e["type"] == "notice").collect();
    assert_eq!(notices.len(), 1, "{}", out.full_stdout);
    let message = notices[0]["message"].as_str().unwrap_or_default();
    assert_eq!(warnings[0], format!("warning: {message}"));
    assert!(message.contains("without a private /proc"), "{message}");
    if git_agent::platform::landlock_abi() < 1 {
        assert_eq!(notices[0]["topic"], "sandbox", "{message}");
        assert!(message.contains("commands run unsandboxed"), "{message}");
    } else {
        assert_eq!(notices[0]["topic"], "isolation", "{message}");
        assert!(!message.contains("unsandboxed"), "{message}");
    }
    if cfg!(git_agent_portable) {
        // Says why in this platform's terms, not a kernel's.
        assert!(
            message.contains("Landlock exists only on Linux")
                && message.contains("PID namespaces exist only on Linux"),
            "{message}"
        );
    }
}

/// Issue 29: the supervisor S and the namespace init G, forks of the agent that live as long as the command,
/// give their copy of the agent's heap back after their last fork, so the agent's writes to its heap while a
/// command runs are not copied page by page. The command reads what each holds: without namespaces (so
/// that /proc shows S and the agent), `RssAnon` of G (its parent) and S (G's parent) against the agent's, and
/// the agent's heap. Kept, S and G would each hold about what the agent holds.
#[test]
#[cfg_attr(
    git_agent_portable,
    ignore = "the supervisor exists only with the Linux layer"
)]
fn supervisors_give_back_the_agents_heap() {
    let repo = TestRepo::new();
    let look = "g=$PPID; s=$(cut -d' ' -f4 /proc/$g/stat); a=$(cut -d' ' -f4 /proc/$s/stat); \
        for p in $g $s $a; do echo \"anon $(grep RssAnon /proc/$p/status | tr -dc 0-9)\"; done; \
        echo \"heap $(awk '/\\[heap\\]/ { h = 1; next } h && /^Rss:/ { print $2; exit }' /proc/$a/smaps)\"";
    let dump = call(
        "run",
        json!({"command": format!("({look}) > dump.txt 2>&1; cat dump.txt")}),
    );
    let server = Server::start(vec![Reply::tool_calls(vec![dump]), Reply::text("done")]);
    let mut cmd = repo.agent(&server, &["ask", "--sandbox", "off", "look around"]);
    cmd.env("GIT_AGENT_ISOLATION", "off");
    run(&mut cmd).assert_code(0);
    let dumped = findings(&repo);
    let numbers = |key: &str| -> Vec<u64> {
        dumped
            .lines()
            .filter_map(|line| line.strip_prefix(key)?.trim().parse().ok())
            .collect()
    };
    let (anon, heap) = (numbers("anon "), numbers("heap "));
    let (&[init, supervisor, agent], &[heap]) = (anon.as_slice(), heap.as_slice()) else {
        panic!("expected three RssAnon lines and the heap's Rss: {dumped}");
    };
    // A child that kept the heap holds about what the agent holds (the agent grows by a few KB while it
    // waits for the command); one that gave it back holds less by about the heap.
    assert!(
        heap >= 256,
        "the agent's heap is too small to tell: {dumped}"
    );
    for (who, kb) in [("G", init), ("S", supervisor)] {
        assert!(
            kb + heap / 2 <= agent,
            "{who} holds {kb} KB of anonymous memory, the agent {agent} KB with a heap of {heap} KB: {dumped}"
        );
    }
}

/// Issue 17 defect 5: a configured key (here from `api_key_command`, so in no environment at all) that a
/// tool's result holds — a file the user committed it in, a command printing it — is redacted before the
/// result goes to the provider; the request body never carries it, only `[REDACTED:...]`.
#[test]
fn configured_keys_in_tool_results_never_reach_the_provider() {
    const KEY: &str = "corp-CANARY-key-5d4c3b2a";
    let repo = TestRepo::new();
    repo.write(
        "deploy.sh",
        &format!("curl -H 'Authorization: Bearer {KEY}' https://example.com\n"),
    );
    repo.commit_all("a script with the key in it");
    let before = user_state(&repo);
    let read = call("read_file", json!({"path": "deploy.sh"}));
    let cat = call(
        "run",
        json!({"command": "grep -o 'Bearer [^ ]*' deploy.sh"}),
    );
    let server = Server::start(vec![
        Reply::tool_calls(vec![read.clone(), cat.clone()]),
        Reply::text("done"),
    ]);
    let config = repo.root().join("config.toml");
    fs::write(
        &config,
        format!(
            "[providers.openai]\nbase_url = \"{}\"\napi_key_command = \"echo {KEY}\"\n",
            server.base_url()
        ),
    )
    .unwrap();
    let out = run(repo
        .agent(
            &server,
            &["ask", "--sandbox", "off", "look at the deploy script"],
        )
        .env_remove("OPENAI_API_KEY")
        .env("GIT_AGENT_CONFIG", &config));
    out.assert_code(0);
    let requests = server.requests();
    assert_eq!(
        requests[0].header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    let follow_up = &requests[1];
    assert!(
        !follow_up.raw_body.contains(KEY),
        "the key went to the model"
    );
    for id in [&read.id, &cat.id] {
        let result = follow_up.tool_result(id);
        assert!(result.contains("Bearer [REDACTED:"), "{result}");
    }
    assert!(!out.stderr().contains(KEY), "{out}");
    assert_eq!(user_state(&repo), before);
    fsck(&repo);
}

/// `ask` on a terminal asks about a risky command with `[y]es / [n]o / [a]lways`: no refuses that call,
/// always allows it and every later call like it in the session without asking again.
#[test]
fn ask_on_a_terminal_asks_and_always_holds_for_the_session() {
    use crate::common::tmux::{self, Tmux};
    if !tmux::available() {
        return;
    }
    let repo = TestRepo::new();
    let before = user_state(&repo);
    let push = || call("run", json!({"command": "git push"}));
    let (first, second, third) = (push(), push(), push());
    let server = Server::start(vec![
        Reply::tool_calls(vec![first.clone()]),
        Reply::tool_calls(vec![second.clone()]),
        Reply::tool_calls(vec![third.clone()]),
        Reply::text("Pushed as far as I could."),
    ]);
    let tmux = Tmux::start(&repo, &repo.agent(&server, &["ask", "push it"]), 30, 120);
    tmux.wait_for("the first question", |s| {
        s.matches("[y]es / [n]o / [a]lways").count() == 1
    });
    tmux.type_line("n");
    tmux.wait_for("the second question", |s| {
        s.matches("[y]es / [n]o / [a]lways").count() == 2
    });
    tmux.type_line("a");
    let screen = tmux.wait_for("the answer", |s| s.contains("Pushed as far as I could."));
    assert_eq!(
        tmux.history().matches("[y]es / [n]o / [a]lways").count(),
        2,
        "always covered the third push: {screen}"
    );
    let last = server.requests().pop().expect("the last request");
    assert!(
        last.tool_result(&first.id).contains("the user declined"),
        "{}",
        last.tool_result(&first.id)
    );
    for allowed in [&second, &third] {
        assert!(
            !last.tool_result(&allowed.id).contains("declined"),
            "{}",
            last.tool_result(&allowed.id)
        );
    }
    assert_eq!(user_state(&repo), before);
}

/// What the model was told of the first turn's tool calls (the tool results of the second request).
fn first_tool_results(server: &Server) -> String {
    server.requests()[1]
        .tool_results()
        .into_iter()
        .map(|(_, content)| content)
        .collect()
}

/// One session that runs `echo pid $$` with `GIT_AGENT_TIMINGS`: its `isolation` timing line and what the
/// command printed, as the model was told.
fn session_with_pid(repo: &TestRepo, run_as: &str) -> (Value, String) {
    let server = Server::start(vec![
        Reply::tool_calls(vec![call("run", json!({"command": "echo pid $$"}))]),
        Reply::text("done"),
    ]);
    let file = repo.root().join(format!("timings-{run_as}.jsonl"));
    let out = run(repo
        .agent(&server, &["ask", run_as])
        .env("GIT_AGENT_TIMINGS", &file));
    out.assert_code(0);
    let text = fs::read_to_string(&file).expect("the timings were written");
    let line = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|l| l["phase"] == "isolation")
        .unwrap_or_else(|| panic!("no isolation line in {text}"));
    let told = first_tool_results(&server);
    (line, told)
}

/// Issue 29: the isolation probe's yes is remembered for the user an hour (in their cache directory), so the
/// next session skips the probe's forks, and its commands still run as PID 2 of a namespace of their own. A
/// file of another context (another boot, user or namespace, as a command could forge) is not believed: the
/// session probes again and writes its own.
#[test]
fn the_isolation_probes_yes_is_remembered_and_commands_stay_isolated() {
    if !git_agent::platform::isolation().is_namespace() {
        eprintln!("SKIPPED: the kernel refuses namespaces here, so there is no yes to remember");
        return;
    }
    let repo = TestRepo::new();
    let cache = repo.root().join("home/.cache/git-agent/isolation.json");
    let (first, told) = session_with_pid(&repo, "first");
    assert_eq!(first["namespace"], true, "{first}");
    assert_eq!(first["remembered"], false, "{first}");
    assert!(told.contains("pid 2"), "{told}");
    let kept: Value =
        serde_json::from_str(&fs::read_to_string(&cache).expect("the yes is kept")).unwrap();
    assert!(
        kept["context"].as_str().is_some_and(|c| !c.is_empty()),
        "{kept}"
    );

    let (second, told) = session_with_pid(&repo, "second");
    assert_eq!(second["namespace"], true, "{second}");
    assert_eq!(second["remembered"], true, "{second}");
    assert!(
        told.contains("pid 2"),
        "the command runs isolated all the same: {told}"
    );

    let mut forged = kept.clone();
    forged["context"] = json!("another boot uid 0 user:[1] mnt:[2] pid:[3]");
    fs::write(&cache, forged.to_string()).unwrap();
    let (third, told) = session_with_pid(&repo, "third");
    assert_eq!(third["remembered"], false, "{third}");
    assert!(told.contains("pid 2"), "{told}");
    let rewritten: Value = serde_json::from_str(&fs::read_to_string(&cache).unwrap()).unwrap();
    assert_eq!(rewritten["context"], kept["context"]);
}

/// What a command leaves where the agent later reads or writes outside the checkout is never followed: a
/// FIFO as the context-window cache (the next session would hang on opening it) and a link as the pooled
/// checkout's index record in its registration (the next session's reset would write through it into the
/// file it names). Both places are writable by sandboxed commands: the cache directory, and the checkout's
/// own `.git/worktrees/<id>`.
#[test]
fn files_a_command_leaves_in_the_cache_or_the_registration_are_never_followed() {
    let repo = TestRepo::new();
    fs::create_dir_all(repo.root().join("home/.cache")).unwrap();
    let victim = repo.root().join("victim.txt");
    fs::write(&victim, "keep\n").unwrap();
    let plant = format!(
        "mkdir -p \"$HOME/.cache/git-agent\" && rm -f \"$HOME/.cache/git-agent/windows.json\" && \
         mkfifo \"$HOME/.cache/git-agent/windows.json\" && \
         ln -sf {} \"$(git rev-parse --git-dir)/agent-index-tree\" && echo planted",
        victim.display()
    );
    let server = Server::start(vec![
        Reply::tool_calls(vec![call("run", json!({"command": plant}))]),
        Reply::text("done"),
    ]);
    let out = run(&mut repo.agent(&server, &["ask", "plant"]));
    out.assert_code(0);
    let told = first_tool_results(&server);
    if !told.contains("planted") {
        eprintln!("SKIPPED: the sandbox here does not let commands write the cache: {told}");
        return;
    }
    let id = session_id(&repo);
    let none = Server::start(vec![]);
    repo.run_agent(&none, &["discard", &id]).assert_code(0);
    // The next session opens the cache and takes the pooled checkout (its reset writes the record).
    let server = Server::start(vec![Reply::text("fine")]);
    let out = run(&mut repo.via(&server, "timeout", &["60", "git", "agent", "ask", "again"]));
    out.assert_code(0);
    assert!(out.stdout().contains("fine"), "{out}");
    assert_eq!(fs::read_to_string(&victim).unwrap(), "keep\n");
}

/// The bytes of every file of a linked worktree's registration, by name.
fn registration(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = fs::read_dir(dir)
        .expect("the registration exists")
        .flatten()
        .filter(|e| e.path().is_file())
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            (name, fs::read(e.path()).unwrap())
        })
        .collect();
    files.sort();
    files
}

/// A checkout's `.git` file is the checkout's commands' to write: pointed at the registration of the user's
/// own linked worktree, it must not make the agent move, reset or remove that registration when the session
/// is discarded and its checkout pooled and taken again.
#[test]
fn a_checkouts_git_file_pointed_at_the_users_worktree_moves_nothing_of_it() {
    let repo = TestRepo::new();
    let user_tree = repo.root().join("user-tree");
    repo.git(&[
        "worktree",
        "add",
        "-q",
        "--detach",
        user_tree.to_str().unwrap(),
    ]);
    let admin = repo.path().join(".git/worktrees/user-tree");
    let before = registration(&admin);
    // Through a name the guard does not see: a hostile command need not spell `.git` out either.
    let point = format!(
        "printf 'gitdir: %s\\n' {} > \"$(printf '%sgit' .)\" && echo pointed",
        admin.display()
    );
    let server = Server::start(vec![
        Reply::tool_calls(vec![call("run", json!({"command": point}))]),
        Reply::text("done"),
    ]);
    run(&mut repo.agent(&server, &["ask", "point"])).assert_code(0);
    let told = first_tool_results(&server);
    assert!(
        told.contains("pointed"),
        "the command could not write .git: {told}"
    );
    let id = session_id(&repo);
    let none = Server::start(vec![]);
    repo.run_agent(&none, &["discard", &id]);
    let server = Server::start(vec![Reply::text("fine")]);
    run(&mut repo.agent(&server, &["ask", "again"])).assert_code(0);
    assert_eq!(
        registration(&admin),
        before,
        "the user's worktree registration changed"
    );
    let listed = repo.git(&["worktree", "list", "--porcelain"]);
    assert!(listed.contains(user_tree.to_str().unwrap()), "{listed}");
    fsck(&repo);
}

/// A session whose command `plant` runs first, then the tool call `then`: what the model was told of `then`,
/// and the user's state before and after. Every run is killed after 60 s, so a hang fails instead of waiting.
fn after_a_plant(plant: &str, then: ToolCall) -> (String, String, String) {
    let repo = TestRepo::new();
    let before = user_state(&repo);
    let server = Server::start(vec![
        Reply::tool_calls(vec![call("run", json!({"command": plant}))]),
        Reply::tool_calls(vec![then]),
        Reply::text("done"),
    ]);
    let go = ["-s", "KILL", "60", "git", "agent", "ask", "go"];
    run(&mut repo.via(&server, "timeout", &go)).assert_code(0);
    let told: String = server.requests()[2]
        .tool_results()
        .into_iter()
        .map(|(_, content)| content)
        .collect();
    (told, before, user_state(&repo))
}

/// A FIFO (or a device behind a link) that a command leaves in the checkout or its registration must never
/// make the agent wait for ever: git-agent's own tools refuse it, and where gix or the `ignore` crate would
/// open it (a `.gitignore`, a `.gitattributes`, the checkout's `HEAD`) the session stops with a message that
/// names the file. Before, each of these cases hung the agent (and SIGTERM could not end it).
#[test]
fn a_fifo_a_command_leaves_never_hangs_the_agent() {
    let tools = [
        call("read_file", json!({"path": "fifo.txt"})),
        call(
            "edit_file",
            json!({"path": "fifo.txt", "old_string": "a", "new_string": "b"}),
        ),
        call("write_file", json!({"path": "fifo.txt", "content": "b"})),
    ];
    for tool in tools {
        let (told, before, after) = after_a_plant("mkfifo fifo.txt", tool);
        assert!(
            told.contains("'fifo.txt': a FIFO, not a regular file"),
            "{told}"
        );
        assert_eq!(after, before);
    }
    // `.ignore` is ripgrep's, not git's: the scan does not read it and the session goes on, but `search`
    // and `list_files` would, so they say what they cannot read instead of waiting on it.
    for (tool, dir) in [("search", "."), ("list_files", "."), ("search", "s")] {
        let args = match tool {
            "search" => json!({"pattern": "zzz", "path": dir}),
            _ => json!({"path": dir}),
        };
        let (told, _, _) = after_a_plant("mkdir -p s && mkfifo s/.ignore", call(tool, args));
        assert!(
            told.contains(
                "'s/.ignore' is an ignore file that cannot be read (a FIFO, not a regular file)"
            ),
            "{tool} {dir}: {told}"
        );
    }
    let plants = [
        (
            "mkfifo .gitignore",
            ".gitignore",
            "git's ignore rules (a FIFO",
        ),
        (
            "mkdir -p s/t && mkfifo s/t/.gitignore",
            "s/t/.gitignore",
            "git's ignore rules (a FIFO",
        ),
        (
            "ln -s /dev/zero .gitignore",
            ".gitignore",
            "git's ignore rules (a device",
        ),
        // The checkout's `.git` file pointed at a git dir of the command's own, and a nested repository (the
        // command rules turn down a plain `.git` in a command, so the plants spell it another way).
        (
            "x=$(mktemp -d) && mkfifo $x/commondir && printf 'gitdir: %s\\n' $x > \"$(printf '%sgit' .)\"",
            "/commondir",
            "a work tree's link to its git dir (a FIFO",
        ),
        (
            "g=$(printf '%sgit' .) && mkdir -p n/$g/info && mkfifo n/$g/info/exclude",
            "n/.git/info/exclude",
            "git's exclude rules (a FIFO",
        ),
        (
            "mkfifo .gitattributes",
            ".gitattributes",
            "git's attributes (a FIFO",
        ),
        (
            "d=$(git rev-parse --git-dir) && rm \"$d/HEAD\" && mkfifo \"$d/HEAD\"",
            "/HEAD",
            "the checkout's HEAD (a FIFO",
        ),
    ];
    for (plant, file, what) in plants {
        let repo = TestRepo::new();
        let before = user_state(&repo);
        let command = format!("{plant} && echo changed > file.txt");
        let server = Server::start(vec![
            Reply::tool_calls(vec![call("run", json!({"command": command}))]),
            Reply::text("done"),
        ]);
        let out = run(&mut repo.via(
            &server,
            "timeout",
            &["-s", "KILL", "60", "git", "agent", "ask", "go"],
        ));
        out.assert_code(1);
        let message = out.stderr().lines().last().unwrap_or_default().to_string();
        assert!(
            message.contains(&format!("{file} cannot be read as {what}")),
            "{plant}: {out}"
        );
        assert!(
            message.ends_with("remove it, or make it a regular file"),
            "{message}"
        );
        assert_eq!(user_state(&repo), before, "{plant}");
        // The session can be thrown away, and the next one (which takes the pooled checkout) works.
        let id = session_id(&repo);
        let none = Server::start(vec![]);
        let discard = ["-s", "KILL", "60", "git", "agent", "discard", &id];
        run(&mut repo.via(&none, "timeout", &discard)).assert_code(0);
        let server = Server::start(vec![Reply::text("fine")]);
        let again = ["-s", "KILL", "60", "git", "agent", "ask", "again"];
        let out = run(&mut repo.via(&server, "timeout", &again));
        out.assert_code(0);
        assert_eq!(user_state(&repo), before, "{plant}");
    }
}
