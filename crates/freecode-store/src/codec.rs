//! The bytes of a bundle: the one size limit both sides apply, and zstd compression.
//!
//! - [`max_bundle_bytes`] is [`MAX_BUNDLE_BYTES`], or less when `FREECODE_MAX_BUNDLE_BYTES`
//!   says so (tests, and hosts with little memory). Export refuses a bundle whose JSON is
//!   larger; import refuses a body that is, or that decompresses to more.
//! - Compressed bodies are one zstd frame (level 3: hundreds of MB/s each way, and JSON
//!   transcripts shrink several times). They are recognised by zstd's magic number, whatever
//!   the file is called, so plain JSON bundles (ours and the original's) stay importable.
//! - Decompression is bounded: a frame that inflates past the limit is refused after reading
//!   at most the limit plus one byte, so a small bomb costs no more memory than a real bundle.

use std::io::Read as _;

use freecode_core::bundle::MAX_BUNDLE_BYTES;

/// The variable that lowers the bundle limit (bytes; it cannot raise it).
pub const LIMIT_ENV: &str = "FREECODE_MAX_BUNDLE_BYTES";
/// The first four bytes of every zstd frame.
pub const ZSTD_MAGIC: [u8; 4] = [0x28, 0xB5, 0x2F, 0xFD];
/// The zstd level bundles are written at.
pub const LEVEL: i32 = 3;

/// Why bundle bytes could not be compressed or read back.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CodecError {
    /// A compressed body inflates past the limit.
    #[error("the compressed bundle decompresses to more than the {limit}-byte bundle limit")]
    Inflates {
        /// The limit, bytes.
        limit: u64,
    },
    /// Not a valid zstd frame (truncated or damaged).
    #[error("cannot decompress the bundle (damaged or truncated zstd data): {0}")]
    Corrupt(String),
    /// The compressor failed.
    #[error("cannot compress the bundle: {0}")]
    Compress(String),
}

/// The largest bundle JSON export writes and import reads, bytes: [`MAX_BUNDLE_BYTES`], or the
/// smaller positive whole number in `FREECODE_MAX_BUNDLE_BYTES`.
pub fn max_bundle_bytes() -> u64 {
    std::env::var(LIMIT_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|&n| n > 0)
        .map_or(MAX_BUNDLE_BYTES, |n| n.min(MAX_BUNDLE_BYTES))
}

/// The largest encoded body (file or download) worth reading for a bundle limit of `limit`:
/// the limit plus zstd's worst-case growth on incompressible data and the envelope's bytes.
pub const fn max_encoded_bytes(limit: u64) -> u64 {
    limit.saturating_add(limit / 128).saturating_add(64 * 1024)
}

/// Whether `bytes` start with a zstd frame.
pub fn is_compressed(bytes: &[u8]) -> bool {
    bytes.starts_with(&ZSTD_MAGIC)
}

/// One zstd frame of `bytes`.
pub fn compress(bytes: &[u8]) -> Result<Vec<u8>, CodecError> {
    zstd::bulk::compress(bytes, LEVEL).map_err(|e| CodecError::Compress(e.to_string()))
}

/// The contents of the zstd data `bytes`, refused past `limit` bytes.
pub fn decompress(bytes: &[u8], limit: u64) -> Result<Vec<u8>, CodecError> {
    let decoder =
        zstd::stream::read::Decoder::new(bytes).map_err(|e| CodecError::Corrupt(e.to_string()))?;
    let mut out = Vec::new();
    decoder
        .take(limit.saturating_add(1))
        .read_to_end(&mut out)
        .map_err(|e| CodecError::Corrupt(e.to_string()))?;
    if out.len() as u64 > limit {
        return Err(CodecError::Inflates { limit });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn round_trip_bound_and_damage() {
        let json = br#"{"messages":["hello","hello","hello","hello","hello"]}"#.repeat(1000);
        let z = compress(&json).unwrap();
        assert!(is_compressed(&z));
        assert!(!is_compressed(&json));
        assert!(z.len() * 10 < json.len(), "{} -> {}", json.len(), z.len());
        assert_eq!(decompress(&z, json.len() as u64).unwrap(), json);
        assert_eq!(
            decompress(&z, json.len() as u64 - 1),
            Err(CodecError::Inflates {
                limit: json.len() as u64 - 1
            })
        );
        // A bomb: 64 MiB of zeros in a few KB is refused after reading the limit.
        let bomb = zstd::bulk::compress(&vec![0u8; 64 << 20], 19).unwrap();
        assert!(bomb.len() < 64 << 10);
        assert!(matches!(
            decompress(&bomb, 1 << 20),
            Err(CodecError::Inflates { .. })
        ));
        assert!(matches!(
            decompress(&z[..z.len() / 2], 1 << 20),
            Err(CodecError::Corrupt(_))
        ));
    }
}
