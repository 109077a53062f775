//! What `fleet submit` reads: JSONL (one task object a line) or CSV rows turned into prompts by a template
//! (`'Migrate {path} to the v2 client'`, one column per placeholder, as Codex does with CSV rows).

use super::record::{Invalid, Task, MAX_TASKS};

/// Tasks from JSONL: one object a line (`id`, `prompt`, optional `base`, `check`, `model`, `max_steps`,
/// `max_tokens`); blank lines are skipped. Every task is checked and ids must be unique.
pub fn from_jsonl(text: &str) -> Result<Vec<Task>, Invalid> {
    let mut tasks = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let task: Task = serde_json::from_str(line)
            .map_err(|e| Invalid(format!("line {}: not a task object: {e}", n + 1)))?;
        tasks.push(task);
    }
    finish(tasks)
}

/// Tasks from CSV (RFC 4180: quoted fields, doubled quotes, newlines inside quotes): the first row names the
/// columns; each row's prompt is `template` with `{column}` filled in (`{{` and `}}` are literal braces). The
/// id is the `id` column when there is one, else the row number (`0001`, ...).
pub fn from_csv(text: &str, template: &str) -> Result<Vec<Task>, Invalid> {
    let mut rows = parse_csv(text)?.into_iter();
    let header = rows
        .next()
        .ok_or_else(|| Invalid("the CSV file is empty: its first row names the columns".into()))?;
    let id_column = header.iter().position(|h| h == "id");
    let mut tasks = Vec::new();
    for (n, row) in rows.enumerate() {
        if row.len() == 1 && row[0].is_empty() {
            continue;
        }
        if row.len() != header.len() {
            return Err(Invalid(format!(
                "CSV row {} has {} fields, the header {}",
                n + 2,
                row.len(),
                header.len()
            )));
        }
        let prompt = fill(template, &header, &row)?;
        let id = match id_column {
            Some(i) => row[i].clone(),
            None => format!("{:04}", n + 1),
        };
        tasks.push(Task {
            id,
            prompt,
            ..Task::default()
        });
    }
    finish(tasks)
}

/// Checks the tasks, their count and that no id repeats.
fn finish(tasks: Vec<Task>) -> Result<Vec<Task>, Invalid> {
    if tasks.is_empty() {
        return Err(Invalid("no tasks in the input".into()));
    }
    if tasks.len() > MAX_TASKS {
        return Err(Invalid(format!(
            "{} tasks, more than {MAX_TASKS} in one fleet: split the input",
            tasks.len()
        )));
    }
    let mut seen = std::collections::HashSet::new();
    for task in &tasks {
        task.check()?;
        if !seen.insert(task.id.as_str()) {
            return Err(Invalid(format!("task id {} appears twice", task.id)));
        }
    }
    Ok(tasks)
}

/// `template` with each `{name}` replaced by the row's value of column `name`.
fn fill(template: &str, header: &[String], row: &[String]) -> Result<String, Invalid> {
    let mut out = String::new();
    let mut rest = template;
    while let Some(at) = rest.find(['{', '}']) {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        if let Some(after) = tail.strip_prefix("{{") {
            out.push('{');
            rest = after;
        } else if let Some(after) = tail.strip_prefix("}}") {
            out.push('}');
            rest = after;
        } else if let Some(after) = tail.strip_prefix('{') {
            let end = after
                .find('}')
                .ok_or_else(|| Invalid("the template has a '{' without its '}'".into()))?;
            let name = &after[..end];
            let column = header.iter().position(|h| h == name).ok_or_else(|| {
                Invalid(format!(
                    "the template names {{{name}}}, which is no column of the CSV (columns: {})",
                    header.join(", ")
                ))
            })?;
            out.push_str(&row[column]);
            rest = &after[end + 1..];
        } else {
            return Err(Invalid(
                "the template has a '}' without its '{' (write '}}' for a brace)".into(),
            ));
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// Rows of RFC 4180 CSV.
fn parse_csv(text: &str) -> Result<Vec<Vec<String>>, Invalid> {
    let mut rows = Vec::new();
    let mut row = Vec::new();
    let mut field = String::new();
    let mut chars = text.chars().peekable();
    let mut quoted = false;
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                field.push('"');
                chars.next();
            }
            (true, '"') => quoted = false,
            (true, c) => field.push(c),
            (false, '"') if field.is_empty() => quoted = true,
            (false, ',') => row.push(std::mem::take(&mut field)),
            (false, '\r') if chars.peek() == Some(&'\n') => {}
            (false, '\n') => {
                row.push(std::mem::take(&mut field));
                rows.push(std::mem::take(&mut row));
            }
            (false, c) => field.push(c),
        }
    }
    if quoted {
        return Err(Invalid("the CSV ends inside a quoted field".into()));
    }
    if !field.is_empty() || !row.is_empty() {
        row.push(field);
        rows.push(row);
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jsonl_tasks_are_read_and_checked() {
        let tasks = from_jsonl(
            "{\"id\":\"a\",\"prompt\":\"x\"}\n\n{\"id\":\"b\",\"prompt\":\"y\",\"max_steps\":3}\n",
        )
        .unwrap();
        assert_eq!(tasks.len(), 2);
        assert_eq!(tasks[1].max_steps, Some(3));
        assert!(
            from_jsonl("{\"id\":\"a\",\"prompt\":\"x\"}\n{\"id\":\"a\",\"prompt\":\"y\"}\n")
                .is_err()
        );
        assert!(from_jsonl("{\"id\":\"a/../b\",\"prompt\":\"x\"}\n").is_err());
        assert!(from_jsonl("").is_err());
    }

    #[test]
    fn csv_rows_fill_the_template() {
        let csv = "path,owner\nsrc/a.rs,\"Ann, \"\"the\"\" dev\"\r\n\"multi\nline\",bob\n";
        let tasks = from_csv(csv, "Migrate {path} ({owner}) {{v2}}").unwrap();
        assert_eq!(tasks[0].id, "0001");
        assert_eq!(tasks[0].prompt, "Migrate src/a.rs (Ann, \"the\" dev) {v2}");
        assert_eq!(tasks[1].prompt, "Migrate multi\nline (bob) {v2}");
        assert!(from_csv(csv, "Fix {nope}").is_err());
        assert!(from_csv("id,p\nx y,1\n", "{p}").is_err());
        assert_eq!(from_csv("id,p\nk1,1\n", "{p}").unwrap()[0].id, "k1");
    }
}
