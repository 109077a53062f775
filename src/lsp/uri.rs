//! `file://` URIs and the paths they name. Servers percent-encode differently (`%3A` or `:`, upper or
//! lower case hex), so URIs are compared in one normal form: decoded, then encoded our way.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};

/// The URI of an absolute path.
pub fn from_path(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    // Percent-encoded outside of unreserved characters and `/`; MCP's roots are the same URIs.
    let mut uri = String::from("file://");
    for &b in path.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~".contains(&b) {
            uri.push(b as char);
        } else {
            uri.push_str(&format!("%{b:02X}"));
        }
    }
    uri
}

/// The path a `file://` URI names; `None` for another scheme.
pub fn to_path(uri: &str) -> Option<PathBuf> {
    let rest = uri.strip_prefix("file://")?;
    // `file://localhost/x` and `file:///x` are the same file.
    let rest = rest.strip_prefix("localhost").unwrap_or(rest);
    let bytes = rest.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&h), Some(&l)) if hex(h).is_some() && hex(l).is_some() => {
                let value = hex(h).unwrap_or(0) * 16 + hex(l).unwrap_or(0);
                out.push(value as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    Some(PathBuf::from(OsString::from_vec(out)))
}

/// A URI in the form [`from_path`] makes, so two spellings of one file compare equal.
pub fn normalise(uri: &str) -> String {
    to_path(uri).map_or_else(|| uri.to_string(), |p| from_path(&p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_round_trip_and_spellings_meet() {
        let path = Path::new("/tmp/a b/c:d.py");
        let uri = from_path(path);
        assert_eq!(to_path(&uri).unwrap(), path);
        assert_eq!(normalise("file:///tmp/a%20b/c:d.py"), uri);
        assert_eq!(normalise("file:///tmp/a%20b/c%3ad.py"), uri);
        assert_eq!(to_path("untitled:x"), None);
        // MCP's roots are these URIs too (tools/mcp/client.rs).
        assert_eq!(
            from_path(Path::new("/tmp/my repo/ü")),
            "file:///tmp/my%20repo/%C3%BC"
        );
    }
}
