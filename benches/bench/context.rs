//! Context engineering (scripts/bench-context.sh): the fixed 60-request session through the real binary and
//! the scripted server at a 14k-token window, once with pruning and compaction on and once with both off.
//! The server reports each request's size as body bytes / 4; the figures are token counts, so a debug
//! build gives the same ones.

use crate::common::long_session::{long_session, SUMMARY, WINDOW};
use crate::common::server::prompt_tokens;
use crate::common::{run, Reply, Server, TestRepo};

/// Total input tokens over all requests (summarising requests included) and the largest request, on and
/// off, and their ratios.
pub fn sixty_steps() {
    let mut figures = Vec::new();
    for (name, switches) in [
        ("on", vec![]),
        (
            "off",
            vec![("GIT_AGENT_PRUNE", "0"), ("GIT_AGENT_COMPACT", "0")],
        ),
    ] {
        let repo = TestRepo::new();
        let server = Server::start(long_session(&repo));
        server.count_prompt_tokens();
        server.answer_summaries(Reply::text(SUMMARY));
        let mut cmd = repo.agent(
            &server,
            &["ask", "--max-steps", "100", "read every data file"],
        );
        cmd.env("GIT_AGENT_CONTEXT_WINDOW", WINDOW.to_string())
            .envs(switches);
        run(&mut cmd).assert_code(0);
        let sent = server.requests();
        let total: u64 = sent.iter().map(prompt_tokens).sum();
        let largest = sent.iter().map(prompt_tokens).max().unwrap_or(0);
        let summaries = sent.iter().filter(|r| !r.has_tools()).count();
        println!(
            "BENCH context_{name} requests={} summaries={summaries} total_input_tokens={total} largest_request_tokens={largest}",
            sent.len()
        );
        figures.push((total, largest));
    }
    println!(
        "BENCH ratio_total_input_on_vs_off={:.3} ratio_largest_on_vs_off={:.3}",
        figures[0].0 as f64 / figures[1].0 as f64,
        figures[0].1 as f64 / figures[1].1 as f64
    );
}
