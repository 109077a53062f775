//! Splits `<think>...</think>` reasoning out of streamed answer text.
//!
//! Reasoning models served by llama.cpp, vLLM or Ollama without a reasoning parser (DeepSeek-R1 distills,
//! Qwen3, QwQ) put their chain of thought in `content`, wrapped in `<think>` tags. Left there, it would be
//! printed as the answer, written to stdout and sent back as the assistant's words. The tags arrive split
//! across chunks at any byte (`<thi` + `nk>`), so the splitter holds back only what could still become a tag.
//!
//! Only a `<think>` that opens the content (after whitespace) is taken as reasoning: an answer that talks
//! about the tag later on (in code, say) is left alone.

const OPEN: &str = "<think>";
const CLOSE: &str = "</think>";

/// A piece of content, classified.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Piece {
    Text(String),
    Reasoning(String),
}

#[derive(Debug, Default, PartialEq, Eq)]
enum State {
    /// Nothing but whitespace yet: a `<think>` may still open.
    #[default]
    Start,
    Thinking,
    /// Reasoning just ended: whitespace before the answer is dropped.
    AfterThinking,
    Answer,
}

/// Feed it content deltas with [`ThinkSplitter::push`]; call [`ThinkSplitter::finish`] at the end.
#[derive(Debug, Default)]
pub struct ThinkSplitter {
    state: State,
    /// Text held back: leading whitespace or a partial `<think>` at the start, a partial `</think>` inside.
    pending: String,
}

impl ThinkSplitter {
    /// Classifies the next delta; returns what can be released now, in order.
    pub fn push(&mut self, delta: &str) -> Vec<Piece> {
        let mut out = Vec::new();
        self.pending.push_str(delta);
        loop {
            match self.state {
                State::Start => {
                    let trimmed = self.pending.trim_start();
                    if let Some(rest) = trimmed.strip_prefix(OPEN) {
                        self.pending = rest.to_string();
                        self.state = State::Thinking;
                        continue;
                    }
                    if trimmed.is_empty() || OPEN.starts_with(trimmed) {
                        return out;
                    }
                    self.state = State::Answer;
                }
                State::Thinking => {
                    if let Some(end) = self.pending.find(CLOSE) {
                        push_piece(&mut out, Piece::Reasoning(self.pending[..end].to_string()));
                        self.pending.drain(..end + CLOSE.len());
                        self.state = State::AfterThinking;
                        continue;
                    }
                    let keep = partial_suffix(&self.pending, CLOSE);
                    let release = self.pending.len() - keep;
                    push_piece(
                        &mut out,
                        Piece::Reasoning(self.pending[..release].to_string()),
                    );
                    self.pending.drain(..release);
                    return out;
                }
                State::AfterThinking => {
                    let trimmed = self.pending.trim_start();
                    if trimmed.is_empty() {
                        self.pending.clear();
                        return out;
                    }
                    self.pending = trimmed.to_string();
                    self.state = State::Answer;
                }
                State::Answer => {
                    push_piece(&mut out, Piece::Text(std::mem::take(&mut self.pending)));
                    return out;
                }
            }
        }
    }

    /// Releases whatever was held back: unclosed reasoning stays reasoning, anything else is text.
    pub fn finish(&mut self) -> Vec<Piece> {
        let pending = std::mem::take(&mut self.pending);
        let mut out = Vec::new();
        match self.state {
            State::Thinking => push_piece(&mut out, Piece::Reasoning(pending)),
            State::AfterThinking => {}
            State::Start | State::Answer => push_piece(&mut out, Piece::Text(pending)),
        }
        self.state = State::Answer;
        out
    }
}

fn push_piece(out: &mut Vec<Piece>, piece: Piece) {
    let empty = match &piece {
        Piece::Text(text) | Piece::Reasoning(text) => text.is_empty(),
    };
    if !empty {
        out.push(piece);
    }
}

/// The length of the longest suffix of `text` that is a proper prefix of `tag` (so may complete into it).
/// Tags are ASCII, so the cut is always at a character boundary.
fn partial_suffix(text: &str, tag: &str) -> usize {
    (1..tag.len())
        .rev()
        .find(|&n| text.ends_with(&tag[..n]))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `chunks` and returns (reasoning, text), merging adjacent pieces.
    fn split(chunks: &[&str]) -> (String, String) {
        let mut splitter = ThinkSplitter::default();
        let mut pieces = Vec::new();
        for chunk in chunks {
            pieces.extend(splitter.push(chunk));
        }
        pieces.extend(splitter.finish());
        let (mut reasoning, mut text) = (String::new(), String::new());
        for piece in pieces {
            match piece {
                Piece::Reasoning(r) => reasoning.push_str(&r),
                Piece::Text(t) => text.push_str(&t),
            }
        }
        (reasoning, text)
    }

    #[test]
    fn think_block_at_every_split() {
        let stream = "\n<think>\nLet me see: 2+2 is 4 — 好.\n</think>\n\nThe answer is 4.";
        let expected = (
            "\nLet me see: 2+2 is 4 — 好.\n".to_string(),
            "The answer is 4.".to_string(),
        );
        assert_eq!(split(&[stream]), expected);
        let bounds: Vec<usize> = (0..=stream.len())
            .filter(|&i| stream.is_char_boundary(i))
            .collect();
        for &a in &bounds {
            for &b in bounds.iter().filter(|&&b| b >= a) {
                let chunks = [&stream[..a], &stream[a..b], &stream[b..]];
                assert_eq!(split(&chunks), expected, "split at {a}, {b}");
            }
        }
    }

    #[test]
    fn plain_answers_and_later_tags_are_text() {
        assert_eq!(
            split(&["Hello", " world"]),
            (String::new(), "Hello world".into())
        );
        assert_eq!(
            split(&["<", "b>bold</b>"]),
            (String::new(), "<b>bold</b>".into())
        );
        let later = "Use <think> tags like <think>x</think>.";
        assert_eq!(split(&[later]), (String::new(), later.into()));
        assert_eq!(split(&["<thi"]), (String::new(), "<thi".into()));
    }

    #[test]
    fn unclosed_reasoning_stays_reasoning() {
        assert_eq!(
            split(&["<think>still going</thi"]),
            ("still going</thi".into(), String::new())
        );
    }
}
