//! The base protocol's framing: every message is a header block (`Content-Length: N`, maybe a
//! `Content-Type`), a blank line, then exactly N bytes of JSON. Unlike MCP's one-message-a-line stdio, a
//! body may hold raw newlines, so the length is the only boundary.

use std::io::{self, BufRead, Read, Write};

/// What [`read`] found.
#[derive(Debug, PartialEq)]
pub enum Frame {
    /// One message body.
    Body(Vec<u8>),
    /// A body larger than the limit: read and dropped, never held.
    TooLarge(usize),
    /// The stream ended.
    End,
}

/// Writes one message with its header.
pub fn write(out: &mut impl Write, body: &[u8]) -> io::Result<()> {
    write!(out, "Content-Length: {}\r\n\r\n", body.len())?;
    out.write_all(body)?;
    out.flush()
}

/// Reads one message; a body longer than `limit` bytes is consumed and reported as [`Frame::TooLarge`]. A
/// header block without a `Content-Length` is an error: the stream cannot be resynchronised.
pub fn read(input: &mut impl BufRead, limit: usize) -> io::Result<Frame> {
    let mut length = None;
    let mut line = String::new();
    let mut any = false;
    loop {
        line.clear();
        if input.read_line(&mut line)? == 0 {
            return if any {
                Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the stream ended inside a header",
                ))
            } else {
                Ok(Frame::End)
            };
        }
        let header = line.trim_end_matches(['\r', '\n']);
        if header.is_empty() {
            if any {
                break;
            }
            // Stray blank lines between messages are tolerated.
            continue;
        }
        any = true;
        if let Some((name, value)) = header.split_once(':') {
            if name.trim().eq_ignore_ascii_case("content-length") {
                length = value.trim().parse::<usize>().ok();
            }
        }
    }
    let length = length.ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "a message header without Content-Length",
        )
    })?;
    if length > limit {
        io::copy(
            &mut Read::by_ref(input).take(length as u64),
            &mut io::sink(),
        )?;
        return Ok(Frame::TooLarge(length));
    }
    let mut body = vec![0; length];
    input.read_exact(&mut body)?;
    Ok(Frame::Body(body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_with_newlines_in_bodies() {
        let mut wire = Vec::new();
        write(&mut wire, b"{\"a\":\n1}").unwrap();
        write(&mut wire, b"{}").unwrap();
        let mut input = io::BufReader::with_capacity(3, &wire[..]);
        assert_eq!(
            read(&mut input, 100).unwrap(),
            Frame::Body(b"{\"a\":\n1}".to_vec())
        );
        assert_eq!(read(&mut input, 100).unwrap(), Frame::Body(b"{}".to_vec()));
        assert_eq!(read(&mut input, 100).unwrap(), Frame::End);
    }

    #[test]
    fn big_bodies_are_skipped_and_the_next_one_read() {
        let wire =
            b"Content-Type: x\r\ncontent-length: 10\r\n\r\n0123456789Content-Length: 2\r\n\r\n{}";
        let mut input = &wire[..];
        assert_eq!(read(&mut input, 5).unwrap(), Frame::TooLarge(10));
        assert_eq!(read(&mut input, 5).unwrap(), Frame::Body(b"{}".to_vec()));
        let mut bad = &b"X-Other: 1\r\n\r\n{}"[..];
        assert!(read(&mut bad, 5).is_err());
    }
}
