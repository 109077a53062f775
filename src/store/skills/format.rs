//! The `SKILL.md` file of the Agent Skills format (agentskills.io): YAML front matter between two `---` lines,
//! then a Markdown body.
//!
//! Why a parser of our own rather than a YAML crate: the front matter is a flat mapping of six known fields,
//! and the reference validator (`agentskills validate`, PyPI `skills-ref`) reads it with strictyaml, which
//! refuses much of YAML (flow style, anchors, tags, duplicate keys). A full YAML parser would accept files the
//! reference refuses, so every skill we store or export could still fail there; this parser accepts the
//! subset strictyaml and the format agree on (plain, quoted and block scalars, a `metadata` mapping of text,
//! an `allowed-tools` text or list) and names the rule broken for anything else. It costs no dependency.
//!
//! What the format says of the fields: `name` 1-64 characters of `a-z`, `0-9` and `-`, not starting or ending
//! with `-`, no `--`, equal to the folder's name; `description` non-empty, at most 1024 characters;
//! `compatibility` at most 500; `license`, `metadata` and `allowed-tools` optional; nothing else.

/// The skill file's name in its folder.
pub const SKILL_FILE: &str = "SKILL.md";
/// The longest name the format allows.
pub const MAX_NAME: usize = 64;
/// The longest description the format allows, in characters.
pub const MAX_DESCRIPTION: usize = 1024;
/// The longest `compatibility` the format allows, in characters.
pub const MAX_COMPATIBILITY: usize = 500;
/// The fields of the front matter the format defines.
pub const FIELDS: [&str; 6] = [
    "name",
    "description",
    "license",
    "compatibility",
    "metadata",
    "allowed-tools",
];

/// A parsed `SKILL.md`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillDoc {
    pub name: String,
    pub description: String,
    pub license: Option<String>,
    pub compatibility: Option<String>,
    /// `allowed-tools`: as written, or a list's items joined by spaces.
    pub allowed_tools: Option<String>,
    /// The `metadata` mapping, in file order.
    pub metadata: Vec<(String, String)>,
    /// Fields the format does not define (`version`, Claude Code's `disable-model-invocation`), with their
    /// line. A skill read in place may have them (other agents write them); one stored or exported may not,
    /// since the reference validator refuses them (see [`SkillDoc::check_strict()`]).
    pub extra: Vec<(String, usize)>,
    /// The Markdown after the front matter, without its leading and trailing blank lines.
    pub body: String,
}

/// Why a `SKILL.md` is not a valid skill: the rule broken, and the line (1-based, in the file) where known.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{rule}", .line.map(|l| format!("line {l}: ")).unwrap_or_default())]
pub struct Invalid {
    pub line: Option<usize>,
    pub rule: String,
}

fn invalid(line: usize, rule: impl Into<String>) -> Invalid {
    Invalid {
        line: Some(line),
        rule: rule.into(),
    }
}

impl SkillDoc {
    /// The name must equal the folder the skill lives in (the format's rule, and the complaint users have
    /// about agents that do not check it).
    pub fn check_folder(&self, folder: &str) -> Result<(), Invalid> {
        if self.name == folder {
            return Ok(());
        }
        Err(Invalid {
            line: None,
            rule: format!("name '{}' must equal the folder name '{folder}'", self.name),
        })
    }

    /// No field beyond the format's six: what the reference validator demands of a skill we store or
    /// export.
    pub fn check_strict(&self) -> Result<(), Invalid> {
        let Some((field, line)) = self.extra.first() else {
            return Ok(());
        };
        Err(invalid(
            *line,
            format!(
                "field '{field}' is not part of the Agent Skills format (allowed: {}); remove it or move it \
                 under metadata",
                FIELDS.join(", ")
            ),
        ))
    }
}

/// Parses a `SKILL.md` and checks the format's rules on its fields (all but the folder name, see
/// [`SkillDoc::check_folder()`], and unknown fields, see [`SkillDoc::check_strict()`]).
pub fn parse(text: &str) -> Result<SkillDoc, Invalid> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let text = text.replace("\r\n", "\n");
    let lines: Vec<&str> = text.split('\n').collect();
    if lines.first().map(|l| l.trim_end()) != Some("---") {
        return Err(Invalid {
            line: Some(1),
            rule: "SKILL.md must start with YAML front matter (a line `---`)".into(),
        });
    }
    let close = lines
        .iter()
        .skip(1)
        .position(|l| l.trim_end() == "---")
        .map(|i| i + 1)
        .ok_or_else(|| Invalid {
            line: None,
            rule: "the front matter is not closed with a line `---`".into(),
        })?;
    let fields = mapping(&lines[1..close], 2)?;
    let body = lines[close + 1..].join("\n").trim().to_owned();
    doc_of(fields, body)
}

/// One `key: value` of the front matter: the key's line (1-based), the text after the colon, and the lines
/// belonging to the value (indented lines and blank lines after it), each with its line number.
struct Entry<'a> {
    key: &'a str,
    line: usize,
    first: &'a str,
    more: Vec<(usize, &'a str)>,
}

/// The fields of a mapping whose keys start at column 0 of `lines` (`first_line` is the number of
/// `lines[0]`).
fn mapping<'a>(lines: &[&'a str], first_line: usize) -> Result<Vec<Entry<'a>>, Invalid> {
    entries(lines, first_line, 0)
}

/// The entries of a mapping whose keys are indented by `indent` spaces.
fn entries<'a>(
    lines: &[&'a str],
    first_line: usize,
    indent: usize,
) -> Result<Vec<Entry<'a>>, Invalid> {
    let mut out: Vec<Entry<'a>> = Vec::new();
    for (i, raw) in lines.iter().enumerate() {
        let n = first_line + i;
        let lead = raw.len() - raw.trim_start_matches([' ', '\t']).len();
        if raw[..lead].contains('\t') {
            return Err(invalid(n, "tabs are not allowed for indentation"));
        }
        let content = &raw[lead..];
        let blank = content.is_empty();
        if !blank && lead == indent && content.starts_with('#') {
            continue; // a comment line
        }
        if blank || lead > indent {
            match out.last_mut() {
                Some(entry) => entry.more.push((n, raw)),
                None if blank => {}
                None => return Err(invalid(n, "unexpected indentation")),
            }
            continue;
        }
        if lead < indent {
            return Err(invalid(n, "unexpected indentation"));
        }
        let (key, first) = split_key(content).ok_or_else(|| {
            invalid(
                n,
                format!("expected `key: value`, found {:?}", short(content)),
            )
        })?;
        if let Some(earlier) = out.iter().find(|e| e.key == key) {
            return Err(invalid(
                n,
                format!("duplicate field '{key}' (first on line {})", earlier.line),
            ));
        }
        out.push(Entry {
            key,
            line: n,
            first,
            more: Vec::new(),
        });
    }
    Ok(out)
}

/// `key: rest` split at the first colon followed by a space or the end of the line; the key must be plain.
fn split_key(content: &str) -> Option<(&str, &str)> {
    let bytes = content.as_bytes();
    let at = (0..bytes.len()).find(|&i| {
        bytes[i] == b':' && bytes.get(i + 1).is_none_or(|b| *b == b' ' || *b == b'\t')
    })?;
    let key = &content[..at];
    let plain = !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    plain.then(|| (key, content[at + 1..].trim_start_matches([' ', '\t'])))
}

fn short(text: &str) -> String {
    let cut: String = text.chars().take(40).collect();
    if cut.len() < text.len() {
        format!("{cut}…")
    } else {
        cut
    }
}

/// The document from its fields, with the format's rules checked.
fn doc_of(fields: Vec<Entry<'_>>, body: String) -> Result<SkillDoc, Invalid> {
    let mut doc = SkillDoc {
        name: String::new(),
        description: String::new(),
        license: None,
        compatibility: None,
        allowed_tools: None,
        metadata: Vec::new(),
        extra: Vec::new(),
        body,
    };
    let (mut name_line, mut description_line) = (None, None);
    for entry in &fields {
        match entry.key {
            "name" => {
                doc.name = scalar(entry, 0)?;
                name_line = Some(entry.line);
            }
            "description" => {
                doc.description = scalar(entry, 0)?;
                description_line = Some(entry.line);
            }
            "license" => doc.license = Some(scalar(entry, 0)?),
            "compatibility" => {
                let text = scalar(entry, 0)?;
                if text.chars().count() > MAX_COMPATIBILITY {
                    return Err(invalid(
                        entry.line,
                        format!(
                            "compatibility is {} characters long; the limit is {MAX_COMPATIBILITY}",
                            text.chars().count()
                        ),
                    ));
                }
                doc.compatibility = Some(text);
            }
            "metadata" => doc.metadata = metadata(entry)?,
            "allowed-tools" => doc.allowed_tools = Some(allowed_tools(entry)?),
            other => doc.extra.push((other.to_owned(), entry.line)),
        }
    }
    let name_line = name_line.ok_or_else(|| Invalid {
        line: None,
        rule: "missing required field 'name'".into(),
    })?;
    check_name(&doc.name).map_err(|rule| invalid(name_line, rule))?;
    let description_line = description_line.ok_or_else(|| Invalid {
        line: None,
        rule: "missing required field 'description'".into(),
    })?;
    if doc.description.trim().is_empty() {
        return Err(invalid(description_line, "description must not be empty"));
    }
    let length = doc.description.chars().count();
    if length > MAX_DESCRIPTION {
        return Err(invalid(
            description_line,
            format!("description is {length} characters long; the limit is {MAX_DESCRIPTION}"),
        ));
    }
    Ok(doc)
}

/// The format's rule for names, as the sentence that says what is wrong.
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("name must not be empty".into());
    }
    let length = name.chars().count();
    if length > MAX_NAME {
        return Err(format!(
            "name '{}…' is {length} characters long; the limit is {MAX_NAME}",
            name.chars().take(20).collect::<String>()
        ));
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
    {
        let what = if bad.is_uppercase() {
            "must be lowercase".to_owned()
        } else {
            format!("has {bad:?}; only a-z, 0-9 and '-' are allowed")
        };
        return Err(format!("name '{name}' {what}"));
    }
    if name.starts_with('-') || name.ends_with('-') {
        return Err(format!("name '{name}' must not start or end with '-'"));
    }
    if name.contains("--") {
        return Err(format!("name '{name}' must not contain '--'"));
    }
    Ok(())
}

/// The value of a scalar entry whose key is indented by `indent`.
fn scalar(entry: &Entry<'_>, indent: usize) -> Result<String, Invalid> {
    let first = entry.first;
    let n = entry.line;
    match first.chars().next() {
        None => plain_lines(entry, None),
        Some('|' | '>') => block(entry, indent),
        Some('"') => quoted(entry, '"'),
        Some('\'') => quoted(entry, '\''),
        Some('[' | '{') => Err(invalid(
            n,
            format!(
                "'{}' uses YAML flow style ({}...), which the format's validator refuses: quote the value",
                entry.key,
                &first[..1]
            ),
        )),
        Some('&' | '*' | '!') => Err(invalid(
            n,
            format!(
                "'{}': YAML anchors, aliases and tags are not supported: quote the value",
                entry.key
            ),
        )),
        Some('#') => plain_lines(entry, None),
        Some(_) => plain_lines(entry, Some(first)),
    }
}

/// Checks one line of a plain (unquoted) value and cuts its comment.
fn plain_part(text: &str, n: usize, key: &str) -> Result<String, Invalid> {
    let text = match text.find(" #") {
        Some(at) => &text[..at],
        None => text,
    };
    let text = text.trim_end_matches([' ', '\t']);
    let quote = |what: &str| {
        invalid(
            n,
            format!("'{key}': {what} in a plain value: put the value in quotes"),
        )
    };
    if text.contains(": ") || text.ends_with(':') {
        return Err(quote("': ' is YAML's key separator and is not allowed"));
    }
    if text.contains('\t') {
        return Err(quote("a tab is not allowed"));
    }
    if let Some(c) = text.chars().next() {
        if matches!(c, '%' | '@' | '`' | ',' | ']' | '}')
            || ((c == '-' || c == '?') && (text.len() == 1 || text[1..].starts_with(' ')))
        {
            return Err(quote(&format!("'{c}' at the start is reserved")));
        }
    }
    Ok(text.to_owned())
}

/// A plain value: `first` (when on the key's line) and its continuation lines, folded as YAML does.
fn plain_lines(entry: &Entry<'_>, first: Option<&str>) -> Result<String, Invalid> {
    let mut parts = Vec::new();
    if let Some(first) = first {
        parts.push(plain_part(first, entry.line, entry.key)?);
    }
    for (n, raw) in &entry.more {
        let text = raw.trim_start_matches([' ', '\t']);
        if text.starts_with('#') {
            return Err(invalid(
                *n,
                format!(
                    "'{}': a comment inside a value of several lines is not supported",
                    entry.key
                ),
            ));
        }
        if first.is_none() && parts.is_empty() && text.starts_with("- ") {
            return Err(invalid(
                *n,
                format!("'{}' must be text, not a list", entry.key),
            ));
        }
        parts.push(plain_part(text, *n, entry.key)?);
    }
    Ok(fold(&parts))
}

/// Lines joined as YAML folds them: a space between two lines, a newline for each empty line between.
fn fold<S: AsRef<str>>(lines: &[S]) -> String {
    let mut out = String::new();
    let mut breaks = 0;
    let mut started = false;
    for line in lines {
        let line = line.as_ref();
        if line.is_empty() {
            breaks += 1;
            continue;
        }
        if started {
            if breaks == 0 {
                out.push(' ');
            }
            for _ in 0..breaks {
                out.push('\n');
            }
        }
        out.push_str(line);
        started = true;
        breaks = 0;
    }
    out
}

/// A quoted value (`"..."` with escapes, or `'...'` with `''` for a quote), possibly over several lines.
fn quoted(entry: &Entry<'_>, quote: char) -> Result<String, Invalid> {
    let mut lines: Vec<(usize, &str)> = vec![(entry.line, &entry.first[1..])];
    lines.extend(entry.more.iter().map(|(n, raw)| (*n, *raw)));
    let mut out = String::new();
    let mut row = 0;
    let mut text = lines[0].1;
    loop {
        let mut chars = text.char_indices().peekable();
        let mut escaped_break = false;
        while let Some((i, c)) = chars.next() {
            match c {
                '\'' if quote == '\'' => {
                    if matches!(chars.peek(), Some((_, '\''))) {
                        chars.next();
                        out.push('\'');
                    } else {
                        return after_quote(
                            &out,
                            &text[i + 1..],
                            &lines[row + 1..],
                            lines[row].0,
                            entry.key,
                        );
                    }
                }
                '"' if quote == '"' => {
                    return after_quote(
                        &out,
                        &text[i + 1..],
                        &lines[row + 1..],
                        lines[row].0,
                        entry.key,
                    );
                }
                '\\' if quote == '"' => match chars.next() {
                    None => escaped_break = true,
                    Some((_, e)) => out.push(unescape(e, &mut chars).ok_or_else(|| {
                        invalid(
                            lines[row].0,
                            format!("'{}': unknown escape '\\{e}'", entry.key),
                        )
                    })?),
                },
                c => out.push(c),
            }
        }
        // The line ended inside the quotes: fold the break.
        row += 1;
        let Some(&(_, next)) = lines.get(row) else {
            return Err(invalid(
                entry.line,
                format!("'{}': the quoted value is not closed", entry.key),
            ));
        };
        if !escaped_break {
            while out.ends_with([' ', '\t']) {
                out.pop();
            }
        }
        let mut empties = 0;
        let mut next = next;
        while next.trim().is_empty() {
            empties += 1;
            row += 1;
            match lines.get(row) {
                Some(&(_, line)) => next = line,
                None => {
                    return Err(invalid(
                        entry.line,
                        format!("'{}': the quoted value is not closed", entry.key),
                    ))
                }
            }
        }
        if escaped_break {
            // `\` at the end of a line joins the lines without a space.
        } else if empties == 0 {
            out.push(' ');
        } else {
            for _ in 0..empties {
                out.push('\n');
            }
        }
        text = next.trim_start_matches([' ', '\t']);
    }
}

/// What may follow a closing quote: a comment, then only blank lines.
fn after_quote(
    value: &str,
    rest: &str,
    lines: &[(usize, &str)],
    n: usize,
    key: &str,
) -> Result<String, Invalid> {
    let rest = rest.trim_start_matches([' ', '\t']);
    if !rest.is_empty() && !rest.starts_with('#') {
        return Err(invalid(
            n,
            format!("'{key}': unexpected text after the closing quote"),
        ));
    }
    if let Some((n, _)) = lines.iter().find(|(_, l)| !l.trim().is_empty()) {
        return Err(invalid(
            *n,
            format!("'{key}': unexpected text after the closing quote"),
        ));
    }
    Ok(value.to_owned())
}

/// The character a double-quoted escape stands for (`e` after the backslash).
fn unescape(e: char, chars: &mut std::iter::Peekable<std::str::CharIndices<'_>>) -> Option<char> {
    let hex = |chars: &mut std::iter::Peekable<std::str::CharIndices<'_>>, n: usize| {
        let digits: String = (0..n)
            .filter_map(|_| chars.next().map(|(_, c)| c))
            .collect();
        u32::from_str_radix(&digits, 16)
            .ok()
            .filter(|_| digits.len() == n)
            .and_then(char::from_u32)
    };
    Some(match e {
        '0' => '\0',
        'a' => '\u{7}',
        'b' => '\u{8}',
        't' | '\t' => '\t',
        'n' => '\n',
        'v' => '\u{b}',
        'f' => '\u{c}',
        'r' => '\r',
        'e' => '\u{1b}',
        ' ' => ' ',
        '"' => '"',
        '/' => '/',
        '\\' => '\\',
        'N' => '\u{85}',
        '_' => '\u{a0}',
        'L' => '\u{2028}',
        'P' => '\u{2029}',
        'x' => return hex(chars, 2),
        'u' => return hex(chars, 4),
        'U' => return hex(chars, 8),
        _ => return None,
    })
}

/// A block value: `|` keeps line breaks, `>` folds them; `-` strips the final break, `+` keeps every
/// trailing one.
fn block(entry: &Entry<'_>, indent: usize) -> Result<String, Invalid> {
    let header = match entry.first.find(" #") {
        Some(at) => &entry.first[..at],
        None => entry.first,
    }
    .trim_end();
    let literal = header.starts_with('|');
    let chomp = match &header[1..] {
        "" => Chomp::Clip,
        "-" => Chomp::Strip,
        "+" => Chomp::Keep,
        _ => {
            return Err(invalid(
                entry.line,
                format!(
                    "'{}': block header {header:?} is not supported (use |, |-, |+, >, >- or >+)",
                    entry.key
                ),
            ))
        }
    };
    let Some(width) = entry
        .more
        .iter()
        .find(|(_, l)| !l.trim().is_empty())
        .map(|(_, l)| l.len() - l.trim_start_matches(' ').len())
    else {
        return Ok(String::new());
    };
    if width <= indent {
        return Err(invalid(
            entry.line,
            format!("'{}': the block value must be indented", entry.key),
        ));
    }
    let mut lines = Vec::new();
    for (n, raw) in &entry.more {
        if raw.trim().is_empty() {
            lines.push("");
        } else if raw.len() - raw.trim_start_matches(' ').len() < width {
            return Err(invalid(
                *n,
                format!(
                    "'{}': a line of the block value is indented less than its first",
                    entry.key
                ),
            ));
        } else {
            lines.push(&raw[width..]);
        }
    }
    let trailing = lines.iter().rev().take_while(|l| l.is_empty()).count();
    let content = &lines[..lines.len() - trailing];
    let mut text = if literal {
        content.join("\n")
    } else {
        fold_block(content)
    };
    if !content.is_empty() {
        match chomp {
            Chomp::Strip => {}
            Chomp::Clip => text.push('\n'),
            Chomp::Keep => {
                for _ in 0..=trailing {
                    text.push('\n');
                }
            }
        }
    }
    Ok(text)
}

#[derive(Clone, Copy)]
enum Chomp {
    Clip,
    Strip,
    Keep,
}

/// A folded block's lines: folded as plain lines, except that more-indented lines keep their breaks.
fn fold_block(lines: &[&str]) -> String {
    let mut out = String::new();
    let mut run: Vec<&str> = Vec::new();
    for line in lines {
        if line.starts_with([' ', '\t']) {
            if !run.is_empty() {
                out.push_str(&fold(&run));
                run.clear();
            }
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(line);
            out.push('\n');
        } else {
            run.push(line);
        }
    }
    out.push_str(&fold(&run));
    out
}

/// The `metadata` mapping: text values only (the format says string to string).
fn metadata(entry: &Entry<'_>) -> Result<Vec<(String, String)>, Invalid> {
    if !entry.first.is_empty() && !entry.first.starts_with('#') {
        return Err(invalid(
            entry.line,
            "metadata must be a mapping on the following lines (`  key: value`)",
        ));
    }
    let Some(indent) = entry
        .more
        .iter()
        .find(|(_, l)| !l.trim().is_empty())
        .map(|(_, l)| l.len() - l.trim_start_matches(' ').len())
    else {
        return Ok(Vec::new());
    };
    let first_line = entry.more.first().map_or(entry.line + 1, |(n, _)| *n);
    let lines: Vec<&str> = entry.more.iter().map(|(_, l)| *l).collect();
    let mut out = Vec::new();
    for item in entries(&lines, first_line, indent)? {
        let nested = item.first.is_empty()
            && item
                .more
                .iter()
                .find(|(_, l)| !l.trim().is_empty())
                .is_some_and(|(_, l)| {
                    split_key(l.trim_start()).is_some() || l.trim_start().starts_with("- ")
                });
        if nested {
            return Err(invalid(
                item.line,
                format!(
                    "metadata '{}' must be text (`key: value`), not a mapping or list",
                    item.key
                ),
            ));
        }
        out.push((item.key.to_owned(), scalar(&item, indent)?));
    }
    Ok(out)
}

/// `allowed-tools`: text, or a block list whose items are joined by spaces.
fn allowed_tools(entry: &Entry<'_>) -> Result<String, Invalid> {
    let is_list = entry.first.is_empty()
        && entry
            .more
            .iter()
            .find(|(_, l)| !l.trim().is_empty())
            .is_some_and(|(_, l)| l.trim_start().starts_with("- "));
    if !is_list {
        return scalar(entry, 0);
    }
    let mut items = Vec::new();
    for (n, raw) in &entry.more {
        let text = raw.trim();
        if text.is_empty() {
            continue;
        }
        let Some(item) = text.strip_prefix("- ") else {
            return Err(invalid(
                *n,
                "allowed-tools: every line of the list must be `- item`",
            ));
        };
        let item = Entry {
            key: entry.key,
            line: *n,
            first: item.trim_start(),
            more: Vec::new(),
        };
        items.push(scalar(&item, 0)?);
    }
    Ok(items.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::random_input;

    fn doc(front: &str) -> Result<SkillDoc, Invalid> {
        parse(&format!("---\n{front}---\nThe body.\n"))
    }

    fn description(front: &str) -> String {
        doc(front).unwrap().description
    }

    /// What the reference (skills-ref 0.1.1, strictyaml) made of the same front matter.
    #[test]
    fn values_read_as_the_reference_reads_them() {
        assert_eq!(
            description("name: a\ndescription: plain # comment\n"),
            "plain"
        );
        assert_eq!(
            description("name: a\ndescription: multi\n  line plain\n"),
            "multi line plain"
        );
        assert_eq!(
            description("name: a\ndescription: >-\n  folded\n  text\n\n  para\n"),
            "folded text\npara"
        );
        assert_eq!(
            description("name: a\ndescription: |\n  lit\n  text\n"),
            "lit\ntext\n"
        );
        assert_eq!(
            description("name: a\ndescription: 'single '' quote'\n"),
            "single ' quote"
        );
        assert_eq!(
            description("name: a\ndescription: 'multi\n  line single'\n"),
            "multi line single"
        );
        assert_eq!(
            description("name: a\ndescription: \"dq \\u00e9 esc\"\n"),
            "dq é esc"
        );
        assert_eq!(
            description("name: a\ndescription: trailing   \n"),
            "trailing"
        );
        let d = doc("name: p\ndescription: x\nmetadata:\n  author: me\n  a: 'q: r'\nallowed-tools:\n  - Read\n  - Grep\nlicense: MIT\ncompatibility: needs git\n").unwrap();
        assert_eq!(
            d.metadata,
            [("author".into(), "me".into()), ("a".into(), "q: r".into())]
        );
        assert_eq!(d.allowed_tools.as_deref(), Some("Read Grep"));
        assert_eq!(
            (d.license.as_deref(), d.compatibility.as_deref()),
            (Some("MIT"), Some("needs git"))
        );
        assert_eq!(d.body, "The body.");
        assert!(d.extra.is_empty());
        let crlf = parse("---\r\nname: i\r\ndescription: crlf\r\n---\r\nbody\r\n").unwrap();
        assert_eq!(
            (crlf.description.as_str(), crlf.body.as_str()),
            ("crlf", "body")
        );
    }

    /// Front matter the reference refuses is refused here too, naming the rule.
    #[test]
    fn what_the_reference_refuses_is_refused() {
        let rule = |front: &str| doc(front).unwrap_err().to_string();
        assert!(rule("name: a\ndescription: Use when: x\n").contains("line 3: 'description': ': '"));
        assert!(rule("name: a\ndescription: [x, y]\n").contains("flow style"));
        assert!(
            rule("name: a\ndescription: x\nmetadata: {}\n").contains("metadata must be a mapping")
        );
        assert!(rule("name: e\ndescription: x\nname: e\n")
            .contains("duplicate field 'name' (first on line 2)"));
        assert!(rule("name: a\ndescription:\n").contains("description must not be empty"));
        assert!(rule("name: a\ndescription: tab\there\n").contains("tab"));
        assert!(rule("name: a\n").contains("missing required field 'description'"));
        assert!(rule("description: x\n").contains("missing required field 'name'"));
        assert!(
            rule("name: a\ndescription: x\nmetadata:\n  b:\n    c: d\n").contains("must be text")
        );
        assert!(rule("name: a\ndescription: 'open\n").contains("not closed"));
        assert!(rule("name: a\ndescription: &x y\n").contains("anchors"));
        assert_eq!(
            parse("no front matter\n").unwrap_err().to_string(),
            "line 1: SKILL.md must start with YAML front matter (a line `---`)"
        );
        assert!(parse("---\nname: a\n")
            .unwrap_err()
            .to_string()
            .contains("not closed"));
        let long = format!("name: a\ndescription: {}\n", "x".repeat(1025));
        assert!(rule(&long).contains("1025 characters long; the limit is 1024"));
        let long = format!(
            "name: a\ndescription: x\ncompatibility: {}\n",
            "x".repeat(501)
        );
        assert!(rule(&long).contains("limit is 500"));
    }

    #[test]
    fn names_follow_the_format() {
        assert!(check_name("pdf-tools2").is_ok());
        assert!(check_name(&"a".repeat(64)).is_ok());
        for (name, rule) in [
            ("", "empty"),
            ("Bad", "lowercase"),
            ("a_b", "'_'"),
            ("-a", "start or end"),
            ("a-", "start or end"),
            ("a--b", "'--'"),
            ("é", "only a-z"),
        ] {
            let err = check_name(name).unwrap_err();
            assert!(err.contains(rule), "{name:?}: {err}");
        }
        assert!(check_name(&"a".repeat(65))
            .unwrap_err()
            .contains("limit is 64"));
        let d = doc("name: tools\ndescription: x\n").unwrap();
        assert!(d.check_folder("tools").is_ok());
        assert_eq!(
            d.check_folder("other").unwrap_err().to_string(),
            "name 'tools' must equal the folder name 'other'"
        );
    }

    #[test]
    fn unknown_fields_are_kept_for_the_strict_check() {
        let d = doc("name: a\ndescription: x\nversion: 1\n").unwrap();
        assert_eq!(d.extra, [("version".to_owned(), 4)]);
        let err = d.check_strict().unwrap_err().to_string();
        assert!(
            err.starts_with("line 4: field 'version' is not part of the Agent Skills format"),
            "{err}"
        );
    }

    #[test]
    fn block_chomping_and_comments() {
        assert_eq!(description("name: a\ndescription: |-\n  x\n\n"), "x");
        assert_eq!(description("name: a\ndescription: |+\n  x\n\n"), "x\n\n");
        assert_eq!(
            description("name: a\ndescription: > # why\n  a\n    indented\n  b\n"),
            "a\n  indented\nb\n"
        );
        assert_eq!(
            description("# top comment\nname: a\n\ndescription: \"two\\\n  joined\"\n"),
            "twojoined"
        );
        assert_eq!(description("name: a\ndescription: \"a\n\n  b\"\n"), "a\nb");
        assert!(doc("name: a\ndescription: |2\n  x\n").is_err());
    }

    /// Property (issue 24, item 7): a SKILL.md from anywhere (a pulled ref, a cloned repository) is read
    /// or refused, never a panic, whatever its front matter holds.
    #[test]
    fn random_documents_parse_without_a_panic() {
        const PIECES: &[&[u8]] = &[
            b"---\n",
            b"name: ",
            b"description: ",
            b"metadata:\n",
            b"  ",
            b"- ",
            b"a-skill",
            b"\"",
            b"'",
            b"|\n",
            b">\n",
            b":",
            b"#",
            b"\n",
            b"\r\n",
            b"\t",
            b"[",
            b"]",
            b"{",
            b"}",
            b"x",
            b"0",
            "\u{e9}".as_bytes(),
        ];
        let mut state = 0xA076_1D64_78BD_642F;
        for _ in 0..2_000 {
            let bytes = random_input(&mut state, PIECES, 20);
            let text = String::from_utf8_lossy(&bytes);
            let _ = parse(&text);
            let _ = parse(&format!("---\n{text}\n---\nbody\n"));
        }
    }
}
