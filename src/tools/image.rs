//! Images for a vision model: the type sniffed from the bytes, the size cap, base64.
//!
//! One door for every image that reaches the model (`ask --image`, a path in chat, `read_file` of a PNG, an
//! MCP tool's image): the type is read from the magic bytes, never from a file name or a server's word, and
//! an image over `max_image_size` is refused with its size before it is read whole or sent. No image crate:
//! the providers decode and scale; all we must know is what the bytes are and how many there are.

use std::io::Read;
use std::path::Path;

use base64::Engine;

use super::capture::{human_size, thousands};
use crate::protocol::Image;

/// The default of `max_image_size` (see the config).
pub const DEFAULT_MAX_SIZE: u64 = crate::config::DEFAULT_MAX_IMAGE_SIZE;

/// What a session may do with images: whether its model takes them, and how large one may be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImagePolicy {
    /// False when the provider's table says `vision = false`: images are refused before a request.
    pub vision: bool,
    /// Bytes (`max_image_size`).
    pub max_size: u64,
}

impl Default for ImagePolicy {
    fn default() -> Self {
        ImagePolicy {
            vision: true,
            max_size: DEFAULT_MAX_SIZE,
        }
    }
}

/// The error returned by [`load()`] and [`from_bytes()`].
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ImageError {
    #[error(
        "{name} is {} ({} bytes), over the image size cap of {}: use a smaller image or raise max_image_size in the config",
        human_size(*.size), thousands(*.size), human_size(*.cap)
    )]
    TooLarge { name: String, size: u64, cap: u64 },
    #[error("{0} is not a PNG, JPEG, GIF or WebP image")]
    NotImage(String),
    #[error("cannot read {path}: {message}")]
    Io { path: String, message: String },
    #[error(
        "the model {model} does not take images (vision = false in its provider's config): use a model with vision"
    )]
    NoVision { model: String },
}

/// The media type of an image from its first bytes: PNG, JPEG, GIF or WebP (the four types both providers
/// take), else `None`.
pub fn sniff(head: &[u8]) -> Option<&'static str> {
    if head.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if head.starts_with(b"\xff\xd8\xff") {
        Some("image/jpeg")
    } else if head.starts_with(b"GIF87a") || head.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if head.len() >= 12 && head.starts_with(b"RIFF") && &head[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

/// The image in `bytes`, named `source`, if it is one and within `cap`.
pub fn from_bytes(bytes: &[u8], source: &str, cap: u64) -> Result<Image, ImageError> {
    let size = bytes.len() as u64;
    if size > cap {
        return Err(ImageError::TooLarge {
            name: source.to_owned(),
            size,
            cap,
        });
    }
    let media_type = sniff(bytes).ok_or_else(|| ImageError::NotImage(source.to_owned()))?;
    Ok(Image {
        media_type: media_type.to_owned(),
        data: base64::engine::general_purpose::STANDARD.encode(bytes),
        source: source.to_owned(),
        bytes: size,
        blob: String::new(),
    })
}

/// Reads the image at `path` (named `source` in messages); a file over `cap` is refused by its size before
/// it is read.
pub fn load(path: &Path, source: &str, cap: u64) -> Result<Image, ImageError> {
    let io = |e: std::io::Error| ImageError::Io {
        path: source.to_owned(),
        message: e.to_string(),
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let size = file.metadata().map_err(io)?.len();
    if size > cap {
        return Err(ImageError::TooLarge {
            name: source.to_owned(),
            size,
            cap,
        });
    }
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    // One byte past the cap: a file that grew since its size was read is still refused.
    file.take(cap + 1).read_to_end(&mut bytes).map_err(io)?;
    from_bytes(&bytes, source, cap)
}

/// The bytes of an image's base64 data; `None` when it is not valid base64.
pub fn decode(data: &str) -> Option<Vec<u8>> {
    base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .ok()
}

/// Base64 of `bytes`, as [`Image::data`] holds it.
pub fn encode(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// True when `path` names an image by its extension: how a path pasted into chat is told from prose.
pub fn has_image_extension(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    [".png", ".jpg", ".jpeg", ".gif", ".webp"]
        .iter()
        .any(|ext| lower.ends_with(ext))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 1x1 PNG (sniffing reads only its signature).
    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0\x1f\x15\xc4\x89\0\0\0\rIDATx\x9cc\0\x01\0\0\x05\0\x01\r\n-\xb4\0\0\0\0IEND\xaeB`\x82";

    #[test]
    fn types_come_from_the_bytes() {
        assert_eq!(sniff(PNG), Some("image/png"));
        assert_eq!(sniff(b"\xff\xd8\xff\xe0\0\x10JFIF"), Some("image/jpeg"));
        assert_eq!(sniff(b"GIF89a\x01\0"), Some("image/gif"));
        assert_eq!(sniff(b"RIFF\x10\0\0\0WEBPVP8 "), Some("image/webp"));
        assert_eq!(sniff(b"RIFF\x10\0\0\0WAVEfmt "), None);
        assert_eq!(sniff(b"%PDF-1.7"), None);
        assert_eq!(
            from_bytes(b"not an image", "x.png", 100),
            Err(ImageError::NotImage("x.png".into()))
        );
    }

    #[test]
    fn over_the_cap_is_refused_with_its_size() {
        let err = from_bytes(PNG, "a.png", 10).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "a.png is {} bytes ({} bytes), over the image size cap of 10 bytes: use a smaller image or \
                 raise max_image_size in the config",
                PNG.len(),
                PNG.len()
            )
        );
        let image = from_bytes(PNG, "a.png", DEFAULT_MAX_SIZE).unwrap();
        assert_eq!(image.media_type, "image/png");
        assert_eq!(decode(&image.data).unwrap(), PNG);
        assert_eq!(image.bytes, PNG.len() as u64);
    }

    #[test]
    fn pasted_paths_are_told_by_extension() {
        assert!(has_image_extension("shots/Fail.PNG"));
        assert!(!has_image_extension("src/png.rs"));
    }
}
