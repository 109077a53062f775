//! The guard's rules for programs that destroy data or infrastructure by design: SQL (and the Redis and
//! Mongo equivalents) run by database clients, the dedicated tools that drop or reset databases (`dropdb`,
//! `rails db:drop`, `prisma migrate reset`, ...), infrastructure tools (`terraform destroy`, `kubectl delete
//! namespace`, `aws s3 rb`, ...) and Docker's volume removal. Commands run in a container (`docker exec`,
//! `kubectl exec`) are judged like commands run here.
//!
//! Every such rule names what would be lost, so the model can tell the user exactly what to run themselves.

use super::super::shell::{Command, Script, Word};
use super::checker::{block, Blocked, Checker, Verdict};
use super::words::basename;

/// Clients that run the SQL (or Redis/Mongo commands) given in their arguments or on stdin.
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
    /// Databases, infrastructure and Docker volumes.
    pub(super) fn tools(
        &mut self,
        script: &Script,
        cmd: &Command,
        name: &str,
        args: &[Word],
    ) -> Verdict {
        if DB_CLIENTS.contains(&name) {
            return self.database(script, cmd, name, args);
        }
        let texts: Vec<&str> = args.iter().map(|a| a.text.as_str()).collect();
        if let Some(what) = database_tool(name, &texts) {
            return block(
                "database-drop",
                format!("{what}; its data cannot be brought back from here"),
            );
        }
        if let Some(what) = infrastructure(name, &texts) {
            return block(
                "infra-destroy",
                format!("{what}; that cannot be undone from here"),
            );
        }
        if let Some(what) = docker_data(name, &texts) {
            return block("docker-volumes", what);
        }
        Ok(())
    }

    /// SQL (or the Redis/Mongo equivalents) a database client would run: arguments, here-documents,
    /// here-strings and `echo ... |`.
    fn database(&self, script: &Script, cmd: &Command, name: &str, args: &[Word]) -> Verdict {
        let mut texts: Vec<String> = args.iter().map(|w| w.text.clone()).collect();
        texts.extend(cmd.heredocs.iter().map(|h| h.body.clone()));
        texts.extend(
            cmd.here_strings
                .iter()
                .map(|w| self.expand_one(script, w).text),
        );
        if let Some(from) = cmd.piped_from {
            if let Some(text) = self.piped_script(script, &script.commands[from]) {
                texts.push(text);
            }
        }
        if name == "redis-cli" {
            let all = texts.join(" ").to_ascii_uppercase();
            if all
                .split_whitespace()
                .any(|w| w == "FLUSHALL" || w == "FLUSHDB")
            {
                return block(
                    "destructive-sql",
                    "`FLUSHALL`/`FLUSHDB` deletes every key of the Redis database",
                );
            }
            return Ok(());
        }
        for text in &texts {
            if let Some(what) = destructive_sql(text) {
                return Err(Blocked {
                    rule: "destructive-sql",
                    reason: format!("`{name}` would run {what}, which destroys data"),
                });
            }
        }
        Ok(())
    }
}

/// `docker exec CONTAINER cmd...`, `docker compose exec|run SERVICE cmd...`, `kubectl exec POD -- cmd...`:
/// the command run in the container, if this is such a command.
pub(super) fn container_command(name: &str, args: &[Word]) -> Option<Vec<Word>> {
    const EXEC_VALUED: &[&str] = &[
        "-e",
        "--env",
        "--env-file",
        "-u",
        "--user",
        "-w",
        "--workdir",
        "--detach-keys",
        "-v",
        "--volume",
        "-p",
        "--publish",
        "--name",
        "--entrypoint",
        "-l",
        "--label",
        "--index",
    ];
    let after_target = |rest: &[Word]| {
        let mut i = 0;
        while i < rest.len() {
            let t = rest[i].text.as_str();
            if EXEC_VALUED.contains(&t) {
                i += 2;
            } else if t.starts_with('-') {
                i += 1;
            } else {
                // The container or service; the command follows.
                return Some(rest[i + 1..].to_vec());
            }
        }
        None
    };
    let first = args.first().map(|a| a.text.as_str());
    let second = args.get(1).map(|a| a.text.as_str());
    match name {
        "docker" | "podman" | "nerdctl" => match (first, second) {
            (Some("exec"), _) => after_target(&args[1..]),
            (Some("compose"), Some("exec" | "run")) => after_target(&args[2..]),
            _ => None,
        },
        "docker-compose" | "podman-compose" if matches!(first, Some("exec" | "run")) => {
            after_target(&args[1..])
        }
        "kubectl" | "oc" if args.iter().any(|a| a.text == "exec") => {
            let dd = args.iter().position(|a| a.text == "--")?;
            Some(args[dd + 1..].to_vec())
        }
        _ => None,
    }
}

/// Runners in front of a project's tools (`npx prisma`, `bundle exec rails`, `python manage.py`,
/// `php artisan`): the words from the tool on.
fn peel_runners<'a>(mut words: &'a [&'a str]) -> &'a [&'a str] {
    loop {
        let Some(first) = words.first() else {
            return words;
        };
        let name = basename(first);
        let rest = &words[1..];
        let skip_options = |from: &'a [&'a str]| {
            let n = from.iter().take_while(|a| a.starts_with('-')).count();
            &from[n..]
        };
        let next = match name {
            "npx" | "bunx" | "pnpx" => skip_options(rest),
            "npm" | "pnpm" | "yarn" | "bun" => match rest.first() {
                Some(&("exec" | "dlx" | "x")) => skip_options(&rest[1..]),
                // `yarn prisma ...` runs the package's binary.
                Some(tool) if database_tool(tool, &[]).is_some() || is_db_tool(tool) => rest,
                _ => return words,
            },
            "bundle" | "poetry" | "uv" | "pipenv" | "pdm" | "hatch" | "rye"
                if matches!(rest.first(), Some(&("exec" | "run"))) =>
            {
                skip_options(&rest[1..])
            }
            "php" => skip_options(rest),
            n if n == "python" || n.starts_with("python3") || n == "py" => {
                let rest = skip_options(rest);
                if rest.first() == Some(&"-m") {
                    &rest[1..]
                } else {
                    rest
                }
            }
            _ => return words,
        };
        if next.len() == words.len() || next.is_empty() {
            return words;
        }
        words = next;
    }
}

fn is_db_tool(name: &str) -> bool {
    matches!(
        name,
        "prisma"
            | "rails"
            | "rake"
            | "sequelize"
            | "sequelize-cli"
            | "typeorm"
            | "flyway"
            | "liquibase"
            | "diesel"
            | "sqlx"
            | "supabase"
    )
}

/// Dedicated tools that drop, reset or empty a database: what they would destroy, in words.
fn database_tool(name: &str, args: &[&str]) -> Option<String> {
    let words: Vec<&str> = std::iter::once(name).chain(args.iter().copied()).collect();
    let words = peel_runners(&words);
    let tool = basename(words.first()?);
    let args = &words[1..];
    let has = |w: &str| args.contains(&w);
    let pair = |a: &str, b: &str| args.windows(2).any(|p| p[0] == a && p[1] == b);
    let task = |tasks: &[&str]| args.iter().find(|a| tasks.contains(a)).copied();
    let what = match tool {
        "dropdb" => "`dropdb` deletes a PostgreSQL database".to_string(),
        "dropuser" => "`dropuser` deletes a PostgreSQL role".to_string(),
        "mysqladmin" if has("drop") => "`mysqladmin drop` deletes a MySQL database".to_string(),
        "rails" | "rake" => {
            let t = task(&[
                "db:drop",
                "db:drop:all",
                "db:reset",
                "db:purge",
                "db:purge:all",
                "db:migrate:reset",
                "db:truncate_all",
            ])?;
            format!("`{tool} {t}` drops or empties the application's database")
        }
        "manage.py" | "django-admin" | "django" => {
            let t = task(&["flush", "reset_db"])?;
            format!("`manage.py {t}` deletes every row of the Django database")
        }
        "prisma" if pair("migrate", "reset") => {
            "`prisma migrate reset` drops the database and recreates it".to_string()
        }
        "prisma" if has("--force-reset") || has("--accept-data-loss") => {
            "`prisma db push --force-reset` (or `--accept-data-loss`) deletes data".to_string()
        }
        "sequelize" | "sequelize-cli" if has("db:drop") => {
            "`sequelize db:drop` drops the database".to_string()
        }
        "typeorm" | "typeorm-ts-node-commonjs" | "typeorm-ts-node-esm" if has("schema:drop") => {
            "`typeorm schema:drop` drops every table".to_string()
        }
        "flyway" if has("clean") => "`flyway clean` drops every object of the schemas".to_string(),
        "liquibase" if has("dropAll") || has("drop-all") => {
            "`liquibase dropAll` drops every database object".to_string()
        }
        "artisan" => {
            let t = task(&["db:wipe", "migrate:fresh", "migrate:reset"])?;
            format!("`artisan {t}` drops the database's tables")
        }
        "console" => {
            let t = task(&["doctrine:database:drop", "doctrine:schema:drop"])?;
            format!("`console {t}` drops the database or its schema")
        }
        "mix" => {
            let t = task(&["ecto.drop", "ecto.reset"])?;
            format!("`mix {t}` drops the database")
        }
        "diesel" | "sqlx" if pair("database", "reset") || pair("database", "drop") => {
            format!("`{tool} database reset/drop` drops the database")
        }
        "supabase" if pair("db", "reset") => {
            "`supabase db reset` recreates the database without its data".to_string()
        }
        "dotnet" if pair("ef", "database") && has("drop") => {
            "`dotnet ef database drop` drops the database".to_string()
        }
        _ => return None,
    };
    Some(what)
}

/// The subcommand words of a CLI: operands, skipping the values of the options in `valued`.
fn positionals<'a>(args: &[&'a str], valued: &[&str]) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = args[i];
        if valued.contains(&a) {
            i += 2;
            continue;
        }
        if !a.starts_with('-') {
            out.push(a);
        }
        i += 1;
    }
    out
}

/// Infrastructure tools asked to delete what they manage: what would go, in words.
fn infrastructure(name: &str, args: &[&str]) -> Option<String> {
    let flag = |f: &str| {
        args.iter()
            .any(|a| *a == f || a.starts_with(&format!("{f}=")))
    };
    let what = match name {
        "terraform" | "tofu" | "terragrunt" => {
            let pos = positionals(args, &[]);
            let sub = pos.first().copied().unwrap_or("");
            if sub == "destroy" || (name == "terragrunt" && pos.contains(&"destroy")) {
                format!("`{name} destroy` deletes every resource the configuration manages")
            } else if sub == "apply" && (flag("-destroy") || flag("--destroy")) {
                format!("`{name} apply -destroy` deletes every resource the configuration manages")
            } else {
                return None;
            }
        }
        "pulumi" => {
            let pos = positionals(args, &["-s", "--stack", "-C", "--cwd"]);
            match pos.as_slice() {
                ["destroy" | "down" | "dn", ..] => {
                    "`pulumi destroy` deletes every resource of the stack".to_string()
                }
                ["stack", "rm", ..] => "`pulumi stack rm` deletes the stack and its state".into(),
                _ => return None,
            }
        }
        "kubectl" | "oc" => {
            let valued = [
                "-n",
                "--namespace",
                "--context",
                "--kubeconfig",
                "--cluster",
                "--user",
                "-s",
                "--server",
                "-l",
                "--selector",
                "-f",
                "--filename",
                "-o",
                "--output",
            ];
            let pos = positionals(args, &valued);
            if pos.first() != Some(&"delete") {
                return None;
            }
            let namespace = pos.iter().skip(1).any(|p| {
                matches!(*p, "ns" | "namespace" | "namespaces")
                    || p.starts_with("ns/")
                    || p.starts_with("namespace/")
                    || p.starts_with("namespaces/")
                    || p.split(',')
                        .any(|k| matches!(k, "ns" | "namespace" | "namespaces"))
            });
            if namespace {
                format!("`{name} delete namespace` deletes the namespace and everything in it")
            } else if flag("--all") || flag("-A") || flag("--all-namespaces") {
                format!("`{name} delete --all` deletes every resource of that kind")
            } else {
                return None;
            }
        }
        "helm" => {
            let valued = ["-n", "--namespace", "--kube-context", "--kubeconfig"];
            match positionals(args, &valued).first() {
                Some(&("uninstall" | "delete" | "del" | "un")) => {
                    "`helm uninstall` removes the release and every resource it created".to_string()
                }
                _ => return None,
            }
        }
        "aws" => {
            let valued = [
                "--profile",
                "--region",
                "--output",
                "--endpoint-url",
                "--query",
            ];
            let pos = positionals(args, &valued);
            match pos.as_slice() {
                ["s3", "rb", ..] => "`aws s3 rb` deletes the bucket".to_string(),
                ["s3", "rm", ..] if flag("--recursive") => {
                    "`aws s3 rm --recursive` deletes every object under the prefix".to_string()
                }
                [service, op, ..]
                    if op.starts_with("delete-")
                        || op.starts_with("batch-delete-")
                        || op.starts_with("terminate-") =>
                {
                    format!("`aws {service} {op}` deletes cloud resources")
                }
                _ => return None,
            }
        }
        "gcloud" => {
            let pos = positionals(args, &["--project", "--zone", "--region", "--format"]);
            if pos.contains(&"delete") {
                "`gcloud ... delete` deletes cloud resources".to_string()
            } else if pos.starts_with(&["storage", "rm"])
                && (flag("--recursive") || flag("-r") || flag("-R"))
            {
                "`gcloud storage rm --recursive` deletes every object under the path".to_string()
            } else {
                return None;
            }
        }
        "gsutil" => {
            let pos = positionals(args, &[]);
            let recursive = flag("--recursive")
                || args.iter().any(|a| {
                    a.starts_with('-')
                        && !a.starts_with("--")
                        && (a.contains('r') || a.contains('R'))
                });
            match pos.first() {
                Some(&"rb") => "`gsutil rb` deletes the bucket".to_string(),
                Some(&"rm") if recursive => {
                    "`gsutil rm -r` deletes every object under the path".to_string()
                }
                _ => return None,
            }
        }
        "az" => {
            let pos = positionals(
                args,
                &["-g", "--resource-group", "-n", "--name", "--subscription"],
            );
            if pos.contains(&"delete") {
                format!("`az {} delete` deletes Azure resources", pos[0])
            } else {
                return None;
            }
        }
        _ => return None,
    };
    Some(what)
}

/// Docker commands that delete volumes (and so the data in them), or every unused image.
fn docker_data(name: &str, args: &[&str]) -> Option<String> {
    let short = |c: char| {
        args.iter()
            .any(|a| a.starts_with('-') && !a.starts_with("--") && a[1..].chars().any(|x| x == c))
    };
    let long = |f: &str| args.contains(&f);
    let volumes = long("--volumes") || short('v');
    let compose_down = |pos: &[&str]| {
        (pos.first() == Some(&"down") && volumes).then(|| {
            "`compose down -v` deletes the project's volumes and the data in them".to_string()
        })
    };
    match name {
        "docker" | "podman" | "nerdctl" => {
            let pos = positionals(args, &["-H", "--host", "--context", "-c", "--config", "-l"]);
            match pos.as_slice() {
                ["system", "prune", ..] if long("--volumes") || long("--all") || short('a') => Some(
                    format!("`{name} system prune -a/--volumes` deletes every unused image and volume (and the data in the volumes)"),
                ),
                ["volume", "rm" | "remove" | "prune", ..] => Some(format!(
                    "`{name} volume {}` deletes volumes and the data in them",
                    pos[1]
                )),
                ["compose", rest @ ..] => compose_down(rest),
                _ => None,
            }
        }
        "docker-compose" | "podman-compose" => compose_down(&positionals(
            args,
            &["-f", "--file", "-p", "--project-name"],
        )),
        _ => None,
    }
}

/// Finds `DROP TABLE`, `TRUNCATE`, `DELETE`/`UPDATE` without `WHERE` or with a `WHERE` that is always true
/// (`WHERE 1=1`, `WHERE true`, `WHERE id = 3 OR 'a'='a'`), `ALTER TABLE ... DROP`, and Mongo drops.
pub fn destructive_sql(text: &str) -> Option<&'static str> {
    if text.contains("dropDatabase") || text.contains(".drop(") || text.contains("deleteMany({})") {
        return Some("a collection or database drop");
    }
    for statement in split_statements(text) {
        let tokens = tokenize(&statement);
        let words: Vec<&str> = tokens
            .iter()
            .filter_map(|t| match t {
                Tok::Word(w) => Some(w.as_str()),
                _ => None,
            })
            .collect();
        let has = |w: &str| words.contains(&w);
        let first = words.first().copied().unwrap_or("");
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
        let filter = where_clause(&tokens);
        match first {
            "DROP" if words.get(1).is_some_and(|w| objects.contains(w)) => return Some("DROP"),
            "TRUNCATE" => return Some("TRUNCATE"),
            "DELETE" | "UPDATE" if first == "DELETE" || has("SET") => match filter {
                None if first == "DELETE" => return Some("DELETE without WHERE"),
                None => return Some("UPDATE without WHERE"),
                Some(clause) if always_true(clause) => {
                    return Some(if first == "DELETE" {
                        "DELETE with a WHERE that is always true (every row)"
                    } else {
                        "UPDATE with a WHERE that is always true (every row)"
                    })
                }
                Some(_) => {}
            },
            "ALTER" if has("DROP") => return Some("ALTER ... DROP"),
            _ => {}
        }
    }
    None
}

/// One SQL token; words are upper-cased, string literals keep their text.
#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Word(String),
    Num(f64),
    Str(String),
    Op(String),
    Open,
    Close,
}

fn split_statements(text: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut quote: Option<char> = None;
    for c in text.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '\'' || c == '"' || c == '`' => quote = Some(c),
            None if c == ';' => {
                out.push(String::new());
                continue;
            }
            None => {}
        }
        if let Some(last) = out.last_mut() {
            last.push(c);
        }
    }
    out
}

fn tokenize(text: &str) -> Vec<Tok> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c == '-' && chars.get(i + 1) == Some(&'-') {
            // A comment to the end of the line.
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '\'' {
            let mut s = String::new();
            i += 1;
            while i < chars.len() {
                if chars[i] == '\'' {
                    if chars.get(i + 1) == Some(&'\'') {
                        s.push('\'');
                        i += 2;
                        continue;
                    }
                    break;
                }
                s.push(chars[i]);
                i += 1;
            }
            i += 1;
            out.push(Tok::Str(s));
        } else if c == '"' || c == '`' || c == '[' {
            // A quoted identifier.
            let close = if c == '[' { ']' } else { c };
            let mut s = String::new();
            i += 1;
            while i < chars.len() && chars[i] != close {
                s.push(chars[i]);
                i += 1;
            }
            i += 1;
            out.push(Tok::Word(format!("\"{s}\"")));
        } else if c.is_ascii_alphanumeric() || c == '_' || c == '.' {
            let start = i;
            while i < chars.len()
                && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == '.')
            {
                i += 1;
            }
            let w: String = chars[start..i].iter().collect();
            match w.parse::<f64>() {
                Ok(n) => out.push(Tok::Num(n)),
                Err(_) => out.push(Tok::Word(w.to_ascii_uppercase())),
            }
        } else if c == '(' {
            out.push(Tok::Open);
            i += 1;
        } else if c == ')' {
            out.push(Tok::Close);
            i += 1;
        } else if "=<>!".contains(c) {
            let start = i;
            while i < chars.len() && "=<>!".contains(chars[i]) {
                i += 1;
            }
            out.push(Tok::Op(chars[start..i].iter().collect()));
        } else {
            out.push(Tok::Op(c.to_string()));
            i += 1;
        }
    }
    out
}

/// The tokens of the statement's own `WHERE` (not a subquery's), up to `RETURNING`, `ORDER`, `LIMIT`.
fn where_clause(tokens: &[Tok]) -> Option<&[Tok]> {
    let mut depth = 0i32;
    let mut start = None;
    for (i, t) in tokens.iter().enumerate() {
        match t {
            Tok::Open => depth += 1,
            Tok::Close => depth -= 1,
            Tok::Word(w) if depth == 0 => match (w.as_str(), start) {
                ("WHERE", None) => start = Some(i + 1),
                ("RETURNING" | "ORDER" | "LIMIT", Some(s)) => return Some(&tokens[s..i]),
                _ => {}
            },
            _ => {}
        }
    }
    start.map(|s| &tokens[s..])
}

/// Splits at a top-level keyword (`OR`, `AND`).
fn split_top<'a>(tokens: &'a [Tok], keyword: &str) -> Vec<&'a [Tok]> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, t) in tokens.iter().enumerate() {
        match t {
            Tok::Open => depth += 1,
            Tok::Close => depth -= 1,
            Tok::Word(w) if depth == 0 && w == keyword => {
                parts.push(&tokens[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&tokens[start..]);
    parts
}

/// True for a condition that holds for every row: a literal truth (`1`, `TRUE`, `NOT FALSE`), a comparison of
/// two equal literals (`1=1`, `'a'='a'`, `2>1`) or of a column with itself, or any `OR` with such a part.
fn always_true(tokens: &[Tok]) -> bool {
    let tokens = unwrap_parens(tokens);
    let disjuncts = split_top(tokens, "OR");
    if disjuncts.len() > 1 {
        return disjuncts.into_iter().any(always_true);
    }
    let conjuncts = split_top(tokens, "AND");
    if conjuncts.len() > 1 {
        return conjuncts.into_iter().all(always_true);
    }
    let word = |t: &Tok, w: &str| matches!(t, Tok::Word(x) if x == w);
    match tokens {
        [Tok::Num(n)] => *n != 0.0,
        [t] => word(t, "TRUE"),
        [n, t] if word(n, "NOT") => word(t, "FALSE") || matches!(t, Tok::Num(x) if *x == 0.0),
        [a, Tok::Op(op), b] => compare(a, op, b),
        _ => false,
    }
}

fn compare(a: &Tok, op: &str, b: &Tok) -> bool {
    use std::cmp::Ordering::*;
    let order = match (a, b) {
        (Tok::Num(x), Tok::Num(y)) => x.partial_cmp(y),
        (Tok::Str(x), Tok::Str(y)) => Some(x.cmp(y)),
        (Tok::Word(x), Tok::Word(y)) if x == y && !matches!(x.as_str(), "NULL" | "FALSE") => {
            // A column compared with itself: equal on every row that has a value.
            Some(Equal)
        }
        _ => None,
    };
    let Some(order) = order else {
        return false;
    };
    match op {
        "=" | "==" => order == Equal,
        "!=" | "<>" => order != Equal,
        "<" => order == Less,
        ">" => order == Greater,
        "<=" => order != Greater,
        ">=" => order != Less,
        _ => false,
    }
}

fn unwrap_parens(mut tokens: &[Tok]) -> &[Tok] {
    while let [Tok::Open, inner @ .., Tok::Close] = tokens {
        // Only when the outer pair encloses everything: `(a) OR (b)` is not `a) OR (b`.
        let mut depth = 0;
        let encloses = inner.iter().all(|t| {
            match t {
                Tok::Open => depth += 1,
                Tok::Close => depth -= 1,
                _ => {}
            }
            depth >= 0
        });
        if !encloses {
            break;
        }
        tokens = inner;
    }
    tokens
}
