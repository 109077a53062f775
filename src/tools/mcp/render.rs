//! A `tools/call` result as the text the model reads: text blocks as they are, images by a line that names
//! them (their data goes to the model as image blocks, see [`Rendered::images`]), audio as a placeholder, resource links and embedded resources by their URI, and
//! `structuredContent` as JSON unless a text block already carries it. The whole is cut to its head and tail,
//! as `run` output is, saying how much was cut.

use serde_json::Value;

/// Bytes kept from the start and from the end of a long result.
const HEAD_BYTES: usize = 16 * 1024;
const TAIL_BYTES: usize = 16 * 1024;

/// What the model gets from one call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rendered {
    pub content: String,
    /// `isError`: the tool failed and says why in `content`.
    pub is_error: bool,
    /// One line for the terminal.
    pub summary: String,
    /// The image blocks' `mimeType` and base64 `data`, in order: the tool checks and attaches them.
    pub images: Vec<(String, String)>,
}

/// Renders a result object.
pub fn render(result: &Value) -> Rendered {
    let is_error = result
        .get("isError")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let blocks = result
        .get("content")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut parts: Vec<String> = blocks.iter().map(block).collect();
    if let Some(structured) = result.get("structuredContent").filter(|v| !v.is_null()) {
        // Servers are asked to repeat structured content as JSON text; showing it twice wastes context.
        let repeated = blocks.iter().any(|b| {
            b.get("text")
                .and_then(Value::as_str)
                .and_then(|t| serde_json::from_str::<Value>(t).ok())
                .is_some_and(|v| &v == structured)
        });
        if !repeated {
            parts.push(format!("structured content:\n{}", pretty(structured)));
        }
    }
    let text = parts.join("\n");
    let summary = summary(&text, blocks.len(), is_error);
    let content = if text.trim().is_empty() {
        "(the tool returned no content)".to_string()
    } else {
        head_tail(&text)
    };
    let images = blocks
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("image"))
        .filter_map(|b| {
            let field = |name: &str| b.get(name).and_then(Value::as_str).map(str::to_owned);
            Some((field("mimeType").unwrap_or_default(), field("data")?))
        })
        .collect();
    Rendered {
        content,
        is_error,
        summary,
        images,
    }
}

fn block(block: &Value) -> String {
    let field = |name: &str| block.get(name).and_then(Value::as_str).unwrap_or_default();
    match field("type") {
        "text" => field("text").to_string(),
        "image" => {
            let data = field("data").trim_end();
            let padding = data.len() - data.trim_end_matches('=').len();
            format!(
                "[image: {}, about {} bytes]",
                or(field("mimeType"), "unknown type"),
                (data.len() / 4 * 3).saturating_sub(padding)
            )
        }
        kind @ "audio" => {
            let size = field("data").len() / 4 * 3;
            format!(
                "[{kind}: {}, about {} bytes; not shown]",
                or(field("mimeType"), "unknown type"),
                size
            )
        }
        "resource_link" => {
            let mut line = format!("[resource link: {}", field("uri"));
            for key in ["name", "mimeType", "description"] {
                if !field(key).is_empty() {
                    line.push_str(&format!("; {key}: {}", field(key)));
                }
            }
            line.push(']');
            line
        }
        "resource" => {
            let resource = block.get("resource").cloned().unwrap_or_default();
            let get = |name: &str| {
                resource
                    .get(name)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
            };
            match resource.get("text").and_then(Value::as_str) {
                Some(text) => format!("[resource {}]\n{text}", get("uri")),
                None => format!(
                    "[resource {}: {}, binary; not shown]",
                    get("uri"),
                    or(get("mimeType"), "unknown type")
                ),
            }
        }
        other => format!("[{} content block; not shown]", or(other, "untyped")),
    }
}

fn or<'a>(text: &'a str, fallback: &'a str) -> &'a str {
    if text.is_empty() {
        fallback
    } else {
        text
    }
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}

fn summary(text: &str, blocks: usize, is_error: bool) -> String {
    let first = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or_default();
    let first = crate::tools::short(first, 80);
    match (is_error, first.is_empty()) {
        (true, true) => "error".to_string(),
        (true, false) => format!("error: {first}"),
        (false, true) => format!("{blocks} content blocks"),
        (false, false) => first,
    }
}

/// The first and last 16 KiB of a long text (cut at character boundaries) with the amount cut between.
pub fn head_tail(text: &str) -> String {
    if text.len() <= HEAD_BYTES + TAIL_BYTES {
        return text.to_string();
    }
    let mut head = HEAD_BYTES;
    while !text.is_char_boundary(head) {
        head -= 1;
    }
    let mut tail = text.len() - TAIL_BYTES;
    while !text.is_char_boundary(tail) {
        tail += 1;
    }
    format!(
        "{}\n[... {} bytes cut: {} bytes in total ...]\n{}",
        &text[..head],
        tail - head,
        text.len(),
        &text[tail..]
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn text_images_links_and_errors() {
        let got = render(&json!({"content": [
            {"type": "text", "text": "Echo: hi"},
            {"type": "image", "data": "AAAA", "mimeType": "image/png"},
            {"type": "resource_link", "uri": "file:///a.txt", "name": "a.txt", "mimeType": "text/plain"},
            {"type": "resource", "resource": {"uri": "mem://x", "text": "inside"}},
        ]}));
        assert!(!got.is_error);
        assert_eq!(got.summary, "Echo: hi");
        assert_eq!(got.images, [("image/png".to_owned(), "AAAA".to_owned())]);
        assert_eq!(
            got.content,
            "Echo: hi\n[image: image/png, about 3 bytes]\n\
             [resource link: file:///a.txt; name: a.txt; mimeType: text/plain]\n[resource mem://x]\ninside"
        );
        let err = render(
            &json!({"content": [{"type": "text", "text": "Tool nope not found"}], "isError": true}),
        );
        assert!(err.is_error);
        assert_eq!(err.summary, "error: Tool nope not found");
        assert_eq!(
            render(&json!({"content": []})).content,
            "(the tool returned no content)"
        );
    }

    #[test]
    fn structured_content_is_shown_once() {
        let data = json!({"temperature": 22.5});
        let repeated = render(&json!({
            "content": [{"type": "text", "text": data.to_string()}],
            "structuredContent": data
        }));
        assert_eq!(repeated.content, data.to_string());
        let alone = render(&json!({"content": [], "structuredContent": {"sum": 3}}));
        assert_eq!(alone.content, "structured content:\n{\n  \"sum\": 3\n}");
    }

    #[test]
    fn long_results_keep_head_and_tail() {
        let text = format!("{}é{}", "a".repeat(20_000), "z".repeat(20_000));
        let cut = head_tail(&text);
        assert!(cut.starts_with(&"a".repeat(16_384)));
        assert!(cut.ends_with(&"z".repeat(16_384)));
        assert!(
            cut.contains("bytes cut: 40002 bytes in total"),
            "{}",
            &cut[16_380..16_460]
        );
        assert!(cut.len() < 33_000);
        assert_eq!(head_tail("short"), "short");
    }
}
