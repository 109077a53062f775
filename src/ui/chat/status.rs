//! The status line at the bottom of the chat: model, context used (tokens and share of the window), the
//! session's tokens and cost, steps and branch.

/// What the status line shows.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StatusLine {
    pub model: String,
    pub branch: String,
    pub context_used: u64,
    pub context_window: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// What the session cost so far in USD; `None`: unknown (a model without a price).
    pub cost: Option<f64>,
    pub steps: u32,
    /// A turn (or a command) is running.
    pub busy: bool,
}

impl StatusLine {
    /// `openai/gpt-4.1 · context 1.2k/32.8k (4%) · tokens 5.1k in, 312 out · $0.0123 · 2 steps · agent/3f9c1a`.
    pub fn render(&self) -> String {
        let share = self
            .context_used
            .saturating_mul(100)
            .checked_div(self.context_window)
            .unwrap_or(0);
        let mut line = String::new();
        if self.busy {
            line.push_str("working · ");
        }
        line.push_str(&format!(
            "{} · context {}/{} ({share}%) · tokens {} in, {} out · {} · {} step{} · {}",
            self.model,
            short(self.context_used),
            short(self.context_window),
            short(self.input_tokens),
            short(self.output_tokens),
            match self.cost {
                Some(_) => crate::protocol::format_usd(self.cost),
                None => "cost unknown".to_owned(),
            },
            self.steps,
            if self.steps == 1 { "" } else { "s" },
            self.branch
        ));
        line
    }
}

/// 812, 1.2k, 33k, 1.5M.
pub fn short(n: u64) -> String {
    match n {
        0..=999 => n.to_string(),
        1_000..=9_999 => format!("{:.1}k", n as f64 / 1e3),
        10_000..=999_999 => format!("{}k", (n + 500) / 1_000),
        _ => format!("{:.1}M", n as f64 / 1e6),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_names_model_context_tokens_steps_and_branch() {
        let status = StatusLine {
            model: "openai/gpt-4.1".into(),
            branch: "agent/3f9c1a".into(),
            context_used: 1_234,
            context_window: 32_768,
            input_tokens: 5_120,
            output_tokens: 312,
            cost: Some(0.0129),
            steps: 1,
            busy: true,
        };
        assert_eq!(
            status.render(),
            "working · openai/gpt-4.1 · context 1.2k/33k (3%) · tokens 5.1k in, 312 out · $0.0129 · 1 step · agent/3f9c1a"
        );
        let unpriced = StatusLine {
            cost: None,
            busy: false,
            ..status
        };
        assert!(unpriced
            .render()
            .contains("312 out · cost unknown · 1 step"));
        assert_eq!(short(1_500_000), "1.5M");
        assert_eq!(short(999), "999");
    }
}
