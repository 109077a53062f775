//! Helpers for the crate's own unit tests, compiled only under `cfg(test)`: the seeded random inputs of the
//! property tests of the parsers that read outside input (the shell guard's parser, SKILL.md, the SSE
//! decoder, the terminal's key decoder). A leaf every module may use, like `sys`.

/// A seeded xorshift: random enough to explore, and a failure reproduces.
pub fn next(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// Up to `count` random picks of `pieces`, joined.
pub fn random_input(state: &mut u64, pieces: &[&[u8]], count: u64) -> Vec<u8> {
    let len = next(state) % count;
    let mut bytes = Vec::new();
    for _ in 0..len {
        bytes.extend_from_slice(pieces[(next(state) % pieces.len() as u64) as usize]);
    }
    bytes
}
