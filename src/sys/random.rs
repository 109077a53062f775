//! Random numbers from the operating system (`getrandom(2)`, or its equivalent on other Unixes, through the
//! `getrandom` crate that `tempfile` already brings). The one source of randomness for ids and jitter: the
//! hand-made seeds it replaced (std's `RandomState`, the clock's nanoseconds, the pid) were guessable and
//! could repeat between processes started together.

/// A uniformly random `u64` from the OS. Fails only where the OS has no randomness to give (no
/// `getrandom(2)` and no readable `/dev/urandom`).
pub fn random_u64() -> std::io::Result<u64> {
    getrandom::u64().map_err(|err| match err.raw_os_error() {
        Some(code) => std::io::Error::from_raw_os_error(code),
        None => std::io::Error::other(err.to_string()),
    })
}

/// A random value in `0..bound` (0 when `bound` is 0), for jitter: should the OS give no randomness, no
/// jitter at all is the harmless answer.
pub fn jitter_below(bound: u64) -> u64 {
    match (bound, random_u64()) {
        (0, _) | (_, Err(_)) => 0,
        (_, Ok(x)) => x % bound,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_differ() {
        let draws: std::collections::HashSet<u64> =
            (0..64).map(|_| random_u64().unwrap()).collect();
        assert_eq!(draws.len(), 64, "64 draws of 64 bits should never repeat");
    }

    #[test]
    fn jitter_stays_below_its_bound() {
        assert_eq!(jitter_below(0), 0);
        for _ in 0..100 {
            assert!(jitter_below(7) < 7);
        }
    }
}
