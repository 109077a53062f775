//! A `session/prompt`'s content blocks as the one text the turn takes.
//!
//! Text blocks are the prompt. Embedded context (`resource` with text, which the agent advertises) is
//! appended as a fenced block naming its file; a `resource_link` is named so the model can read it with its
//! tools. Paths of `file://` URIs inside the repository are made repository-relative, because the model
//! works in its own checkout of the repository, where the editor's absolute path does not exist. Images are
//! taken apart ([`images()`]) and go to the model as images; audio is not advertised, and one that arrives
//! anyway is named, not silently dropped.

use std::path::Path;

use serde_json::Value;

/// The prompt's text, or why the blocks cannot be one.
pub(super) fn text(blocks: &[Value], workdir: &Path) -> Result<String, String> {
    let mut prompt = String::new();
    let mut context = String::new();
    for block in blocks {
        match block["type"].as_str() {
            Some("text") => {
                let text = block["text"].as_str().ok_or("a text block without text")?;
                prompt.push_str(text);
            }
            Some("resource_link") => {
                let uri = block["uri"].as_str().ok_or("a resource_link without uri")?;
                let name = block["name"].as_str().unwrap_or_default();
                let shown = shown_path(uri, workdir);
                let line = if name.is_empty() || shown.ends_with(name) {
                    format!("\n(attached: {shown})")
                } else {
                    format!("\n(attached: {name}: {shown})")
                };
                prompt.push_str(&line);
            }
            Some("resource") => {
                let resource = &block["resource"];
                let uri = resource["uri"].as_str().ok_or("a resource without uri")?;
                let shown = shown_path(uri, workdir);
                match resource["text"].as_str() {
                    Some(text) => {
                        let fence = fence_for(text);
                        context.push_str(&format!("\n\n{shown}:\n{fence}\n{text}"));
                        if !text.ends_with('\n') {
                            context.push('\n');
                        }
                        context.push_str(&fence);
                    }
                    None => context.push_str(&format!("\n\n({shown}: binary content not shown)")),
                }
            }
            // Sent as images (see `images()`); a steering prompt names them, as it cannot send them.
            Some("image") => {}
            Some("audio") => prompt.push_str("\n(audio attached: this agent cannot take audio)"),
            Some(other) => return Err(format!("unknown content block type {other:?}")),
            None => return Err("a content block without \"type\"".into()),
        }
    }
    if !context.is_empty() {
        prompt.push_str("\n\nContext the user attached:");
        prompt.push_str(&context);
    }
    if prompt.trim().is_empty() {
        return Err("the prompt is empty: send at least one text block".into());
    }
    Ok(prompt)
}

/// The prompt's image blocks (`data` in base64, `mimeType`), each checked like every image: its bytes are a
/// PNG, JPEG, GIF or WebP within `cap` bytes; or why one is not.
pub(super) fn images(blocks: &[Value], cap: u64) -> Result<Vec<crate::protocol::Image>, String> {
    let blocks = blocks.iter().filter(|b| b["type"] == "image");
    blocks
        .enumerate()
        .map(|(n, block)| {
            let name = format!("image {}", n + 1);
            let data = block["data"]
                .as_str()
                .ok_or("an image block without data")?;
            let bytes = crate::tools::image::decode(data)
                .ok_or_else(|| format!("the data of {name} is not base64"))?;
            crate::tools::image::from_bytes(&bytes, &name, cap).map_err(|e| e.to_string())
        })
        .collect()
}

/// How many image blocks the prompt has.
pub(super) fn image_count(blocks: &[Value]) -> usize {
    blocks.iter().filter(|b| b["type"] == "image").count()
}

/// A `file://` URI as a path the model can use: repository-relative inside the repository, absolute
/// outside it; other URIs as they are.
fn shown_path(uri: &str, workdir: &Path) -> String {
    let Some(path) = uri.strip_prefix("file://") else {
        return uri.to_owned();
    };
    let path = percent_decoded(path);
    let path = Path::new(&path);
    let root = std::fs::canonicalize(workdir).unwrap_or_else(|_| workdir.to_path_buf());
    let inside = path
        .strip_prefix(&root)
        .or_else(|_| path.strip_prefix(workdir));
    match inside {
        Ok(rel) if !rel.as_os_str().is_empty() => rel.display().to_string(),
        _ => path.display().to_string(),
    }
}

/// `%20` and the like decoded (editors encode spaces and non-ASCII in file URIs); bad escapes stay as they
/// are.
fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(hi), Some(lo)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push((hi * 16 + lo) as u8);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A Markdown fence longer than any run of backticks in `text`.
fn fence_for(text: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    "`".repeat((longest + 1).max(3))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn blocks_become_one_prompt_with_repository_paths() {
        let root = std::env::temp_dir();
        let root = std::fs::canonicalize(&root).unwrap();
        let file = format!("file://{}/src/my%20lib.rs", root.display());
        let blocks = [
            json!({"type": "text", "text": "fix the bug in "}),
            json!({"type": "resource_link", "uri": file, "name": "my lib.rs"}),
            json!({"type": "resource", "resource": {"uri": file, "text": "fn main() {}\n```x```"}}),
            json!({"type": "image", "data": "AAAA", "mimeType": "image/png"}),
        ];
        let text = text(&blocks, &root).unwrap();
        assert!(
            text.starts_with("fix the bug in \n(attached: src/my lib.rs)"),
            "{text}"
        );
        assert!(
            text.contains("src/my lib.rs:\n````\nfn main() {}\n```x```\n````"),
            "{text}"
        );
        assert!(!text.contains("image"), "images are sent apart: {text}");
        let png = json!({"type": "image", "data": "iVBORw0KGgoAAAAA", "mimeType": "image/png"});
        let taken = images(&[blocks[0].clone(), png], 1024).unwrap();
        assert_eq!(taken.len(), 1);
        assert_eq!(taken[0].media_type, "image/png");
        assert_eq!(
            images(&blocks, 1024).unwrap_err(),
            "image 1 is not a PNG, JPEG, GIF or WebP image"
        );
        assert!(super::text(&[json!({"type": "text", "text": "  "})], &root).is_err());
        assert!(super::text(&[json!({"type": "video"})], &root).is_err());
        assert_eq!(shown_path("https://x/y", &root), "https://x/y");
        assert_eq!(shown_path("file:///elsewhere/a%2", &root), "/elsewhere/a%2");
    }
}
