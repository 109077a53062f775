//! The diagnostics a change made: what a server publishes after it, minus what it published before.
//!
//! Positions move when lines are added above a problem, so problems are matched by what they say
//! (severity, code, message) as a multiset: one more `"x" is not defined` than before is one new problem,
//! wherever it is. A project with 500 old warnings thus adds nothing to the context; only the new ones are
//! listed, errors first, warnings capped.

use serde_json::Value;

/// The most new errors listed for the changed files, and for the other files the change broke.
pub const MAX_ERRORS: usize = 20;
pub const MAX_OTHER: usize = 10;
/// The most new warnings listed.
pub const MAX_WARNINGS: usize = 5;

/// One problem, as the model and the terminal see it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// Checkout-relative.
    pub path: String,
    /// 1-based.
    pub line: u64,
    pub column: u64,
    pub error: bool,
    pub message: String,
}

impl Diagnostic {
    /// `path:line:col severity message`.
    pub fn line(&self) -> String {
        let severity = if self.error { "error" } else { "warning" };
        format!(
            "{}:{}:{} {severity} {}",
            self.path, self.line, self.column, self.message
        )
    }
}

/// What one change did, across the servers of its files.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Delta {
    /// New errors in the changed files, then in other files.
    pub errors: Vec<Diagnostic>,
    pub warnings: Vec<Diagnostic>,
    /// How many of each there were before the caps.
    pub error_count: usize,
    pub warning_count: usize,
    /// Errors the changed files have now, old and new.
    pub errors_left: usize,
    /// Servers that did not publish within the wait.
    pub late: Vec<String>,
    /// Servers that did answer.
    pub answered: Vec<String>,
    /// How many of `errors` are in files the change did not touch.
    other: usize,
}

impl Delta {
    /// The line under the tool line: `2 new errors`, `1 new warning`, `no new problems`.
    pub fn summary(&self) -> String {
        let plural =
            |n: usize, what: &str| format!("{n} new {what}{}", if n == 1 { "" } else { "s" });
        match (self.error_count, self.warning_count) {
            (0, 0) if self.answered.is_empty() => "no diagnostics in time".into(),
            (0, 0) => "no new problems".into(),
            (e, 0) => plural(e, "error"),
            (0, w) => plural(w, "warning"),
            (e, w) => format!("{}, {}", plural(e, "error"), plural(w, "warning")),
        }
    }

    /// What the model reads after the tool's own result.
    pub fn render(&self) -> String {
        let mut text = String::new();
        if !self.answered.is_empty() {
            text.push_str(&format!(
                "\n\nDiagnostics ({}): {}; {} error{} left in the changed files.",
                self.answered.join(", "),
                self.summary(),
                self.errors_left,
                if self.errors_left == 1 { "" } else { "s" }
            ));
            for d in self.errors.iter().chain(&self.warnings) {
                text.push('\n');
                text.push_str(&d.line());
            }
            let hidden = (self.error_count + self.warning_count)
                .saturating_sub(self.errors.len() + self.warnings.len());
            if hidden > 0 {
                text.push_str(&format!("\n[... {hidden} more not shown]"));
            }
        }
        if !self.late.is_empty() {
            text.push_str(&format!(
                "\n\n[{} published no diagnostics within the wait; run the project's check to be sure]",
                self.late.join(", ")
            ));
        }
        text
    }

    /// Adds the new problems of one document: `after` minus `before`. `changed` says whether the document is
    /// one the change touched (its errors count as left, and uncapped by [`MAX_OTHER`]).
    pub fn add(&mut self, path: &str, before: &[Value], after: &[Value], changed: bool) {
        let fresh = new_since(before, after);
        if changed {
            self.errors_left += after.iter().filter(|d| is_error(d)).count();
        }
        for item in fresh {
            let diagnostic = parse(item, path);
            if diagnostic.error {
                self.error_count += 1;
                let cap_ok = self.errors.len() < MAX_ERRORS && (changed || self.other < MAX_OTHER);
                if cap_ok {
                    self.other += usize::from(!changed);
                    self.errors.push(diagnostic);
                }
            } else if severity(item) == 2 {
                self.warning_count += 1;
                if self.warnings.len() < MAX_WARNINGS && changed {
                    self.warnings.push(diagnostic);
                }
            }
        }
    }
}

/// The LSP severity; a diagnostic without one is taken as an error (the spec leaves it to the client).
fn severity(d: &Value) -> u64 {
    d["severity"].as_u64().unwrap_or(1)
}

fn is_error(d: &Value) -> bool {
    severity(d) == 1
}

/// What two publishes of one problem have in common.
fn key(d: &Value) -> (u64, String, String) {
    (
        severity(d),
        d["code"].to_string(),
        d["message"].as_str().unwrap_or_default().to_string(),
    )
}

/// The items of `after` that `before` does not have (counting repeats).
pub fn new_since<'a>(before: &[Value], after: &'a [Value]) -> Vec<&'a Value> {
    let mut seen: std::collections::HashMap<(u64, String, String), usize> = Default::default();
    for d in before {
        *seen.entry(key(d)).or_default() += 1;
    }
    after
        .iter()
        .filter(|d| match seen.get_mut(&key(d)) {
            Some(n) if *n > 0 => {
                *n -= 1;
                false
            }
            _ => true,
        })
        .collect()
}

fn parse(d: &Value, path: &str) -> Diagnostic {
    let start = &d["range"]["start"];
    let message = d["message"].as_str().unwrap_or_default();
    let first = message.lines().next().unwrap_or_default();
    let message = super::text::cut_line(first, 200);
    Diagnostic {
        path: path.to_string(),
        line: start["line"].as_u64().unwrap_or(0) + 1,
        column: start["character"].as_u64().unwrap_or(0) + 1,
        error: is_error(d),
        message: crate::protocol::Untrusted::name(&message).to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn diag(line: u64, severity: u64, message: &str) -> Value {
        json!({"range": {"start": {"line": line, "character": 4}, "end": {"line": line, "character": 5}},
               "severity": severity, "message": message})
    }

    #[test]
    fn only_new_problems_count_wherever_they_moved() {
        let before = vec![diag(1, 2, "unused x"), diag(7, 1, "old error")];
        let after = vec![
            diag(3, 2, "unused x"),
            diag(9, 1, "old error"),
            diag(4, 1, "\"int\" is not assignable to \"str\""),
        ];
        let mut delta = Delta {
            answered: vec!["pyright".into()],
            ..Delta::default()
        };
        delta.add("a.py", &before, &after, true);
        assert_eq!(delta.error_count, 1);
        assert_eq!(delta.errors_left, 2);
        assert_eq!(
            delta.errors[0].line(),
            "a.py:5:5 error \"int\" is not assignable to \"str\""
        );
        assert_eq!(delta.summary(), "1 new error");
        assert!(
            delta.render().contains("2 errors left"),
            "{}",
            delta.render()
        );
        let mut fixed = Delta {
            answered: vec!["pyright".into()],
            ..Delta::default()
        };
        fixed.add("a.py", &after, &before, true);
        assert_eq!(fixed.summary(), "no new problems");
    }

    #[test]
    fn warnings_and_other_files_are_capped() {
        let many: Vec<Value> = (0..500).map(|i| diag(i, 2, &format!("w{i}"))).collect();
        let mut delta = Delta::default();
        delta.add("b.py", &[], &many, true);
        assert_eq!(delta.warnings.len(), MAX_WARNINGS);
        assert_eq!(delta.warning_count, 500);
        let errors: Vec<Value> = (0..50).map(|i| diag(i, 1, &format!("e{i}"))).collect();
        delta.add("c.py", &[], &errors, false);
        assert_eq!(delta.errors.len(), MAX_OTHER);
        assert!(delta.render().is_empty() || delta.render().contains("more not shown"));
    }
}
