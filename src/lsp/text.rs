//! Small text helpers of what servers send, shown to the model and the terminal.

use std::hash::Hasher;

/// Cuts `line` to at most `max` characters, saying how long it was.
pub fn cut_line(line: &str, max: usize) -> String {
    match line.char_indices().nth(max) {
        None => line.to_string(),
        Some((end, _)) => format!(
            "{} [... line cut: {} chars in total]",
            &line[..end],
            line.chars().count()
        ),
    }
}

/// A content fingerprint, to tell whether a server already has a text.
pub fn fingerprint(bytes: &[u8]) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    hasher.write(bytes);
    hasher.finish()
}
