//! The head and tail of a command's output: what `run` shows the model and what `fix` shows of a check.
//!
//! A command may print gigabytes; the model needs the start (what ran, the first error) and the end (the
//! summary, the last error), and to know how much was left out between them.

use std::collections::VecDeque;

/// The first `head_max` and the last `tail_max` bytes of a stream, and its total length.
#[derive(Debug)]
pub struct Capture {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    /// Every byte pushed, kept or not.
    pub total: u64,
    head_max: usize,
    tail_max: usize,
}

impl Capture {
    pub fn new(head_max: usize, tail_max: usize) -> Capture {
        Capture {
            head: Vec::new(),
            tail: VecDeque::new(),
            total: 0,
            head_max,
            tail_max,
        }
    }

    pub fn push(&mut self, data: &[u8]) {
        self.total += data.len() as u64;
        let into_head = (self.head_max - self.head.len()).min(data.len());
        self.head.extend_from_slice(&data[..into_head]);
        let rest = &data[into_head..];
        let keep = &rest[rest.len().saturating_sub(self.tail_max)..];
        let overflow = (self.tail.len() + keep.len()).saturating_sub(self.tail_max);
        self.tail.drain(..overflow);
        self.tail.extend(keep);
    }

    /// True when pushing `more` bytes would leave some of the output out.
    pub fn would_cut(&self, more: usize) -> bool {
        self.total + more as u64 > (self.head_max + self.tail_max) as u64
    }

    /// Every byte pushed so far, while nothing is cut (else the kept head and tail, joined).
    pub fn kept(&self) -> Vec<u8> {
        let mut all = self.head.clone();
        all.extend(self.tail.iter());
        all
    }

    /// True when some of the output is not in [`Capture::render`].
    pub fn is_cut(&self) -> bool {
        (self.head.len() + self.tail.len()) as u64 != self.total
    }

    /// The kept text, with a line saying how much was cut between head and tail.
    pub fn render(&self) -> String {
        let kept = (self.head.len() + self.tail.len()) as u64;
        if kept == self.total {
            return String::from_utf8_lossy(&self.kept()).into_owned();
        }
        let tail: Vec<u8> = self.tail.iter().copied().collect();
        format!(
            "{}\n[... {} cut: {} bytes in total ...]\n{}",
            String::from_utf8_lossy(&self.head),
            human_size(self.total - kept),
            thousands(self.total),
            String::from_utf8_lossy(&tail)
        )
    }
}

/// `26.6 KiB`, or `512 bytes` below a KiB.
pub fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} bytes");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// `1,234,567`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_head_and_tail_and_says_what_it_cut() {
        let mut capture = Capture::new(16 * 1024, 16 * 1024);
        for i in 0..10_000u32 {
            capture.push(format!("{i:05}\n").as_bytes());
        }
        assert!(capture.is_cut());
        let text = capture.render();
        assert!(text.starts_with("00000\n00001\n"));
        assert!(text.ends_with("09998\n09999\n"));
        assert!(
            text.contains("[... 26.6 KiB cut: 60,000 bytes in total ...]"),
            "{text}"
        );
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(thousands(999), "999");
        assert_eq!(human_size(512), "512 bytes");
    }

    #[test]
    fn a_short_stream_is_kept_whole() {
        let mut capture = Capture::new(4, 4);
        capture.push(b"abc");
        capture.push(b"de");
        assert!(!capture.is_cut());
        assert_eq!(capture.render(), "abcde");
    }
}
