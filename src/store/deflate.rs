//! A small zlib encoder for the objects a session packs: LZ77 over deflate's 32 KiB window with one hash probe
//! a position, fixed Huffman codes, one final block (RFC 1950 and 1951); stored blocks instead when that is
//! smaller (random bytes, object ids).
//!
//! Why not zlib's (zlib-rs, through gix) for these: its state is about 260 KB, which its init zeroes (a
//! 128 KB hash table, a 64 KB window, a 64 KB chain). That is past glibc's mmap threshold, so every pack a
//! session wrote mapped, faulted in and unmapped some 65 pages: a quarter of a small session's own page
//! faults (issue 29). This encoder's state is a 16 KB table from the heap.
//!
//! What it costs: fixed codes give up what zlib's codes fitted to the data win on text, about a third more
//! bytes (this repository's files up to 16 KB: 1.30x to 1.34x zlib's default level). Bounded by
//! [`SMALL_MAX`]: the objects a session makes are mostly commits, trees, its log's records and small files,
//! a few hundred bytes each; larger ones still go to zlib. Git makes the same trade for the objects it writes
//! loose (`core.looseCompression` is level 1).
//!
//! Any inflater reads the result: it is plain zlib, and git reads it like its own.

/// The largest object this encoder takes; a larger one is deflated by zlib.
pub(super) const SMALL_MAX: usize = 16 * 1024;

/// Deflate's window: the farthest back a match may point.
const WINDOW: usize = 32 * 1024;
/// The shortest match worth coding: positions are hashed on four bytes (deflate allows three).
const MIN_MATCH: usize = 4;
const MAX_MATCH: usize = 258;
const HASH_BITS: u32 = 12;

/// The smallest length of each length code 257..=285, and how many extra bits follow it.
const LENGTH_BASE: [u16; 29] = [
    3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131,
    163, 195, 227, 258,
];
const LENGTH_EXTRA: [u8; 29] = [
    0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0,
];
/// The smallest distance of each distance code 0..=29, and how many extra bits follow it.
const DISTANCE_BASE: [u16; 30] = [
    1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537,
    2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577,
];
const DISTANCE_EXTRA: [u8; 30] = [
    0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13,
    13,
];

/// The encoder; its table is reused from one object to the next.
pub(super) struct SmallDeflate {
    /// For each hash of four bytes, the last position that had it, plus one (0: none yet).
    last: Vec<u32>,
}

impl SmallDeflate {
    pub(super) fn new() -> Self {
        SmallDeflate {
            last: vec![0; 1 << HASH_BITS],
        }
    }

    /// Appends `data` to `out` as one zlib stream. `data` is at most [`SMALL_MAX`] bytes (positions are
    /// kept as `u32`; larger input works, it is only not what this is for).
    pub(super) fn compress_into(&mut self, data: &[u8], out: &mut Vec<u8>) {
        let start = out.len();
        // CMF: deflate with a 32 KiB window; FLG: "fastest" level, and a check making the pair a multiple of 31.
        out.extend_from_slice(&[0x78, 0x01]);
        self.fixed_block(data, out);
        if out.len() - start > stored_len(data.len()) {
            out.truncate(start + 2);
            stored_blocks(data, out);
        }
        out.extend_from_slice(&adler32(data).to_be_bytes());
    }

    fn fixed_block(&mut self, data: &[u8], out: &mut Vec<u8>) {
        self.last.fill(0);
        let mut bits = Bits::new(out);
        // BFINAL, then BTYPE 01 (fixed codes).
        bits.put(0b011, 3);
        let mut at = 0;
        while at < data.len() {
            let (length, distance) = self.longest_match(data, at);
            if length >= MIN_MATCH {
                bits.length(length);
                bits.distance(distance);
                // The positions inside the match are remembered too, so later text can point into it.
                for inside in at + 1..(at + length).min(data.len().saturating_sub(MIN_MATCH - 1)) {
                    self.last[hash(data, inside)] = inside as u32 + 1;
                }
                at += length;
            } else {
                bits.symbol(u16::from(data[at]));
                at += 1;
            }
        }
        bits.symbol(256);
        bits.finish();
    }

    /// The match at `at` with the last position that hashed the same, if it is one and in the window
    /// (length and distance; length 0 when there is none), and `at` remembered for the next.
    fn longest_match(&mut self, data: &[u8], at: usize) -> (usize, usize) {
        if at + MIN_MATCH > data.len() {
            return (0, 0);
        }
        let slot = hash(data, at);
        let candidate = self.last[slot] as usize;
        self.last[slot] = at as u32 + 1;
        let Some(earlier) = candidate.checked_sub(1) else {
            return (0, 0);
        };
        let distance = at - earlier;
        if distance > WINDOW {
            return (0, 0);
        }
        let limit = MAX_MATCH.min(data.len() - at);
        let length = data[earlier..]
            .iter()
            .zip(&data[at..at + limit])
            .take_while(|(a, b)| a == b)
            .count();
        (length, distance)
    }
}

fn hash(data: &[u8], at: usize) -> usize {
    let word = u32::from_le_bytes([data[at], data[at + 1], data[at + 2], data[at + 3]]);
    (word.wrapping_mul(0x9E37_79B1) >> (32 - HASH_BITS)) as usize
}

/// The bytes [`stored_blocks()`] writes for `len` bytes of input.
fn stored_len(len: usize) -> usize {
    2 + len + 5 * len.div_ceil(0xffff).max(1)
}

/// `data` as stored (uncompressed) blocks of at most 65,535 bytes, the last one final.
fn stored_blocks(data: &[u8], out: &mut Vec<u8>) {
    let mut chunks = data.chunks(0xffff).peekable();
    if chunks.peek().is_none() {
        out.extend_from_slice(&[1, 0, 0, 0xff, 0xff]);
    }
    while let Some(chunk) = chunks.next() {
        // Each header is byte-aligned here: BFINAL and BTYPE 00 fill the rest of a byte of their own.
        out.push(u8::from(chunks.peek().is_none()));
        let len = chunk.len() as u16;
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&(!len).to_le_bytes());
        out.extend_from_slice(chunk);
    }
}

/// zlib's checksum of the uncompressed data.
fn adler32(data: &[u8]) -> u32 {
    const MOD: u32 = 65_521;
    // The most bytes that can be summed before `b` could overflow a u32.
    const RUN: usize = 5552;
    let (mut a, mut b) = (1u32, 0u32);
    for run in data.chunks(RUN) {
        for &byte in run {
            a += u32::from(byte);
            b += a;
        }
        a %= MOD;
        b %= MOD;
    }
    (b << 16) | a
}

/// Deflate's bit order: values low bit first, Huffman codes high bit first.
struct Bits<'a> {
    out: &'a mut Vec<u8>,
    pending: u64,
    count: u32,
}

impl<'a> Bits<'a> {
    fn new(out: &'a mut Vec<u8>) -> Self {
        Bits {
            out,
            pending: 0,
            count: 0,
        }
    }

    /// The low `len` bits of `value` (at most 32), low bit first.
    fn put(&mut self, value: u32, len: u32) {
        self.pending |= u64::from(value) << self.count;
        self.count += len;
        while self.count >= 8 {
            self.out.push(self.pending as u8);
            self.pending >>= 8;
            self.count -= 8;
        }
    }

    /// A Huffman code of `len` bits, its high bit first.
    fn code(&mut self, code: u32, len: u32) {
        self.put(code.reverse_bits() >> (32 - len), len);
    }

    /// A literal byte (0..=255), the end of the block (256) or a length code (257..=285), in the fixed codes.
    fn symbol(&mut self, symbol: u16) {
        let symbol = u32::from(symbol);
        match symbol {
            0..=143 => self.code(0x30 + symbol, 8),
            144..=255 => self.code(0x190 + symbol - 144, 9),
            256..=279 => self.code(symbol - 256, 7),
            _ => self.code(0xc0 + symbol - 280, 8),
        }
    }

    fn length(&mut self, length: usize) {
        let index = LENGTH_BASE.partition_point(|&base| usize::from(base) <= length) - 1;
        self.symbol(257 + index as u16);
        let extra = length - usize::from(LENGTH_BASE[index]);
        self.put(extra as u32, u32::from(LENGTH_EXTRA[index]));
    }

    fn distance(&mut self, distance: usize) {
        let index = DISTANCE_BASE.partition_point(|&base| usize::from(base) <= distance) - 1;
        self.code(index as u32, 5);
        let extra = distance - usize::from(DISTANCE_BASE[index]);
        self.put(extra as u32, u32::from(DISTANCE_EXTRA[index]));
    }

    /// Writes the last, partial byte.
    fn finish(self) {
        if self.count > 0 {
            self.out.push(self.pending as u8);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inflate(stream: &[u8], len: usize) -> Vec<u8> {
        let mut inflated = vec![0u8; len + 64];
        let (status, read, written) = gix::zlib::Inflate::default()
            .once(stream, &mut inflated)
            .expect("a valid zlib stream");
        assert_eq!(status, gix::zlib::Status::StreamEnd);
        assert_eq!(read, stream.len(), "the stream ends where its bytes do");
        inflated.truncate(written);
        inflated
    }

    fn round_trip(encoder: &mut SmallDeflate, data: &[u8]) -> usize {
        let mut out = vec![0xaa];
        encoder.compress_into(data, &mut out);
        assert_eq!(out[0], 0xaa, "appended, not overwritten");
        assert_eq!(inflate(&out[1..], data.len()), data);
        out.len() - 1
    }

    /// A generator with no dependencies (xorshift), so the inputs are the same on every run.
    fn noise(len: usize, mut state: u64) -> Vec<u8> {
        (0..len)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect()
    }

    #[test]
    fn every_kind_of_input_inflates_back_to_itself() {
        let mut encoder = SmallDeflate::new();
        let text = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/src/store/pack.rs"))
            .expect("reads a source file");
        let every_byte: Vec<u8> = (0..=255u8).cycle().take(5000).collect();
        // Matches at the window's edge: a block repeated exactly 32 KiB later, and one a byte farther.
        let mut far = noise(40_000, 7);
        far.copy_within(0..300, WINDOW + 1000);
        far.copy_within(2000..2300, 2001 + WINDOW);
        let inputs: Vec<(&str, Vec<u8>)> = vec![
            ("empty", Vec::new()),
            ("one byte", vec![b'x']),
            ("three bytes", b"abc".to_vec()),
            ("a run (distance 1, overlapping)", vec![b'a'; 1000]),
            ("a run longer than one match", vec![0; 70_000]),
            ("every byte value", every_byte),
            ("source text", text.clone()),
            ("noise", noise(3000, 1)),
            ("noise past a stored block", noise(70_000, 2)),
            ("window edges", far),
        ];
        for (what, data) in &inputs {
            let mut again = SmallDeflate::new();
            assert_eq!(
                round_trip(&mut encoder, data),
                round_trip(&mut again, data),
                "{what}: a reused encoder writes what a new one does"
            );
        }
        // Text and runs compress; noise costs at most the stored blocks' few bytes.
        assert!(round_trip(&mut encoder, &text) < text.len() / 2);
        assert!(round_trip(&mut encoder, &[0; 70_000]) < 1000);
        assert!(round_trip(&mut encoder, &noise(70_000, 2)) <= 70_000 + 2 + 10 + 4);
    }

    #[test]
    fn inputs_made_of_copies_at_every_distance_inflate_back() {
        // Text built the way LZ77 sees it: runs of fresh bytes from a small alphabet and copies of earlier
        // stretches at random distances (past the window too) and lengths (past the longest match too).
        let mut encoder = SmallDeflate::new();
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = |bound: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % bound as u64) as usize
        };
        for round in 0..200 {
            let len = next(20_000 + round * 300);
            let mut data = Vec::with_capacity(len);
            while data.len() < len {
                if data.is_empty() || next(3) == 0 {
                    let fresh = next(40) + 1;
                    data.extend((0..fresh).map(|_| b'a' + next(6) as u8));
                } else {
                    let from = data.len() - 1 - next(data.len().min(40_000));
                    for i in 0..next(400) + 1 {
                        data.push(data[from + i % (data.len() - from)]);
                    }
                }
            }
            data.truncate(len);
            round_trip(&mut encoder, &data);
        }
    }

    #[test]
    fn the_checksum_is_zlibs() {
        // RFC 1950's definition, computed the slow way.
        let data = noise(20_000, 3);
        let (mut a, mut b) = (1u32, 0u32);
        for &byte in &data {
            a = (a + u32::from(byte)) % 65_521;
            b = (b + a) % 65_521;
        }
        assert_eq!(adler32(&data), (b << 16) | a);
        assert_eq!(adler32(b""), 1);
    }
}
