//! Calendar dates: today's date for the system prompt, and the times the commands print. UTC throughout: a
//! session log read on another machine shows the same times. The calendar is `jiff`'s (already compiled in
//! for gix's dates), not a hand-written twin.

use jiff::Timestamp;

/// Today's date (UTC) as `YYYY-MM-DD`.
pub fn today() -> String {
    Timestamp::now().strftime("%Y-%m-%d").to_string()
}

/// Unix seconds as `YYYY-MM-DD HH:MM` (UTC).
pub fn datetime(secs: i64) -> String {
    format(secs, "%Y-%m-%d %H:%M")
}

/// The UTC day of Unix seconds, `YYYY-MM-DD`.
pub fn day(secs: i64) -> String {
    format(secs, "%Y-%m-%d")
}

/// Unix seconds as an RFC 3339 UTC time, `YYYY-MM-DDTHH:MM:SSZ`.
pub fn rfc3339(secs: i64) -> String {
    format(secs, "%Y-%m-%dT%H:%M:%SZ")
}

/// `secs` in `pattern`; a time outside the calendar's years -9999 to 9999 (only a corrupt record has one)
/// as `@<secs>`, git's raw form, rather than an error that would hide the rest of a listing.
fn format(secs: i64, pattern: &str) -> String {
    match Timestamp::from_second(secs) {
        Ok(time) => time.strftime(pattern).to_string(),
        Err(_) => format!("@{secs}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days() {
        assert_eq!(day(0), "1970-01-01");
        assert_eq!(day(20_787 * 86_400 + 86_399), "2026-11-30");
        assert_eq!(day(11_016 * 86_400), "2000-02-29");
        assert_eq!(day(-1), "1969-12-31");
        assert_eq!(today().len(), 10);
    }

    #[test]
    fn datetimes() {
        assert_eq!(datetime(0), "1970-01-01 00:00");
        assert_eq!(
            datetime(951_782_400 + 3_600 * 13 + 60 * 7 + 59),
            "2000-02-29 13:07"
        );
        assert_eq!(datetime(-60), "1969-12-31 23:59");
        assert_eq!(rfc3339(951_782_400 + 59), "2000-02-29T00:00:59Z");
        assert_eq!(datetime(i64::MAX), format!("@{}", i64::MAX));
    }
}
