//! The model layer (scripts/bench-models.sh), each figure with its reference from the same run:
//!
//! - SSE decoding: throughput and peak RSS for a 50 MB recorded Chat Completions stream (text deltas with
//!   CJK and emoji, tool-call argument fragments), through the byte-level decoder alone and through decoder
//!   plus chunk parser, against std's `BufRead::split` over the same bytes.
//! - Client latency: the time `Client::send` (OpenAI wire) adds per request over a raw keep-alive HTTP exchange
//!   of the same bytes with the same scripted server, interleaved.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use git_agent::bench::{
    ChunkParser, Client, Message, OpenAiClient, Request, RetryPolicy, SseDecoder,
};
use serde_json::json;

use crate::common::server::openai_chunk;
use crate::common::{Reply, Server};
use crate::stats::{median, peak_rss_mib, quantile, reset_peak_rss, us};

/// A recorded-style stream of about `target` bytes.
fn recorded_stream(target: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(target + 4096);
    let mut n = 0usize;
    while out.len() < target {
        let chunk = if n % 10 == 9 {
            let args = format!("{{\"path\": \"src/日本/{n}.rs\", \"content\": \"fn main() {{ println!(\\\"🎉 {n}\\\"); }}\"");
            openai_chunk(
                json!({"tool_calls": [{"index": 0, "function": {"arguments": args}}]}),
                None,
            )
        } else {
            openai_chunk(
                json!({"content": format!("token {n} — 漢字 and emoji 🎉 ")}),
                None,
            )
        };
        out.extend_from_slice(format!("data: {chunk}\n\n").as_bytes());
        n += 1;
    }
    out.extend_from_slice(
        format!(
            "data: {}\n\ndata: [DONE]\n\n",
            openai_chunk(json!({}), Some("stop"))
        )
        .as_bytes(),
    );
    out
}

/// Feeds `path` in 16 KiB reads (a typical socket read) to `feed`; returns MB/s and peak RSS.
fn measure(path: &std::path::Path, mut feed: impl FnMut(&[u8])) -> (f64, f64) {
    let mut file = std::fs::File::open(path).expect("open the recording");
    let size = file.metadata().expect("stat").len() as f64;
    reset_peak_rss();
    let start = Instant::now();
    let mut buf = vec![0; 16 * 1024];
    loop {
        let n = file.read(&mut buf).expect("read");
        if n == 0 {
            break;
        }
        feed(&buf[..n]);
    }
    let secs = start.elapsed().as_secs_f64();
    (size / 1e6 / secs, peak_rss_mib())
}

pub fn sse_decode() {
    let path = std::env::temp_dir().join(format!("git-agent-bench-{}.sse", std::process::id()));
    std::fs::write(&path, recorded_stream(50_000_000)).expect("write the recording");
    let size = std::fs::metadata(&path).expect("stat").len();
    reset_peak_rss();
    let baseline_rss = peak_rss_mib();

    let mut lines = 0usize;
    let std_rate = {
        let start = Instant::now();
        let reader = BufReader::with_capacity(16 * 1024, std::fs::File::open(&path).expect("open"));
        for line in reader.split(b'\n') {
            lines += line.expect("read").len().min(1);
        }
        size as f64 / 1e6 / start.elapsed().as_secs_f64()
    };

    let mut decoder = SseDecoder::new();
    let mut events = 0usize;
    let (decode_rate, decode_rss) = measure(&path, |bytes| events += decoder.push(bytes).len());

    let mut decoder = SseDecoder::new();
    let mut parser = ChunkParser::new();
    let mut deltas = 0usize;
    let (parse_rate, parse_rss) = measure(&path, |bytes| {
        for event in decoder.push(bytes) {
            deltas += parser.push(&event.data).expect("valid chunk").len();
        }
    });
    let response = parser.finish().expect("complete stream");
    std::fs::remove_file(&path).ok();

    println!(
        "recorded stream: {:.1} MB, {events} events, {deltas} deltas, {} B of answer text",
        size as f64 / 1e6,
        response.text.len()
    );
    println!(
        "std BufRead::split(b'\\n') (reference): {std_rate:.0} MB/s ({lines} non-empty lines)"
    );
    println!("SseDecoder:                {decode_rate:.0} MB/s ({:.2}x reference), peak RSS {decode_rss:.1} MiB (baseline {baseline_rss:.1} MiB)", decode_rate / std_rate);
    println!("SseDecoder + ChunkParser:  {parse_rate:.0} MB/s ({:.2}x reference), peak RSS {parse_rss:.1} MiB (holds the assembled answer)", parse_rate / std_rate);
}

/// One keep-alive exchange by hand: the request bytes out, the chunked body read to its terminating chunk
/// (the client reads that far too, so its connection can be reused); returns the time taken.
fn raw_exchange(stream: &mut BufReader<TcpStream>, request: &[u8]) -> Duration {
    let start = Instant::now();
    stream.get_mut().write_all(request).expect("send");
    let mut line = String::new();
    loop {
        line.clear();
        stream.read_line(&mut line).expect("read");
        if line == "\r\n" {
            break;
        }
    }
    loop {
        line.clear();
        stream.read_line(&mut line).expect("read size");
        let size = usize::from_str_radix(line.trim(), 16).expect("chunk size");
        let mut body = vec![0; size + 2];
        stream.read_exact(&mut body).expect("read chunk");
        if size == 0 {
            return start.elapsed();
        }
    }
}

pub fn client_latency() {
    const N: usize = 300;
    let chunks = [
        openai_chunk(json!({"role": "assistant", "content": "Hello"}), None),
        openai_chunk(json!({"content": " world"}), None),
        openai_chunk(json!({}), Some("stop")),
    ];
    let body: String = chunks
        .iter()
        .map(|c| format!("data: {c}\n\n"))
        .chain(["data: [DONE]\n\n".to_string()])
        .collect();
    // One write per reply, so the server's pacing is the same for both clients.
    let script: Vec<Reply> = (0..2 * N + 2)
        .map(|_| Reply::sse_raw(vec![body.clone()]))
        .collect();
    let server = Server::start(script);

    let client = OpenAiClient::new(
        server.base_url(),
        Some("k".into()),
        Duration::from_secs(5),
        Duration::from_secs(30),
    )
    .expect("client");
    let messages = vec![Message::User {
        content: "hi".into(),
    }];
    let req = Request {
        model: "m",
        messages: &messages,
        tools: &[],
        max_tokens: None,
    };
    let json_body = client.body(&req).to_string();
    let client = Client::OpenAi(client);
    let retry = RetryPolicy::default();
    let raw_request = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: {}\r\nauthorization: Bearer k\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n{json_body}",
        server.addr(),
        json_body.len()
    );
    let mut raw = BufReader::new(TcpStream::connect(server.addr()).expect("connect"));
    raw.get_ref().set_nodelay(true).expect("nodelay");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");

    // Warm both paths (connection set-up, allocations).
    raw_exchange(&mut raw, raw_request.as_bytes());
    runtime
        .block_on(client.send(&req, &retry).response())
        .expect("warm-up");

    let (mut raw_times, mut client_times) = (Vec::with_capacity(N), Vec::with_capacity(N));
    for _ in 0..N {
        raw_times.push(raw_exchange(&mut raw, raw_request.as_bytes()).as_secs_f64() * 1e6);
        let start = Instant::now();
        let response = runtime
            .block_on(client.send(&req, &retry).response())
            .expect("stream");
        client_times.push(us(start));
        assert_eq!(response.text, "Hello world");
    }
    let (raw_med, client_med) = (median(raw_times.clone()), median(client_times.clone()));
    println!(
        "{N} requests each, interleaved, same scripted server; {} connections for {} requests",
        server.connections(),
        server.requests().len()
    );
    println!(
        "raw HTTP exchange (reference): median {raw_med:.0} us, p90 {:.0} us",
        quantile(raw_times, 900)
    );
    println!(
        "Client::send (OpenAI):         median {client_med:.0} us, p90 {:.0} us",
        quantile(client_times, 900)
    );
    println!(
        "client adds {:.0} us per request (median), {:.2}x the raw exchange",
        client_med - raw_med,
        client_med / raw_med
    );
}
