//! A share's record (`meta/<code>.json`) and the secrets around it: delete tokens, hashes and
//! constant-time comparison.

use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

/// The record format's version, written into every record.
pub(crate) const RECORD_VERSION: u32 = 1;

/// What the store keeps beside each blob. Immutable once written; unknown fields are ignored
/// on read, so a newer replica's records stay readable by an older one.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ShareRecord {
    /// Format version ([`RECORD_VERSION`]).
    pub version: u32,
    /// The Content-Type the uploader sent, returned on download.
    pub content_type: String,
    /// Blob size in bytes.
    pub size: u64,
    /// Upload time, milliseconds since the Unix epoch.
    pub created_at: u64,
    /// Expiry, milliseconds since the Unix epoch; the share is gone from this instant on.
    pub expires_at: u64,
    /// SHA-256 of the delete token, lowercase hex; the token itself is never stored.
    pub delete_token_sha256: String,
}

impl ShareRecord {
    /// Whether the share has expired at `now_ms`.
    pub fn expired(&self, now_ms: u64) -> bool {
        now_ms >= self.expires_at
    }

    /// Whether `token` is this share's delete token (constant time in the token's content).
    pub fn token_matches(&self, token: &str) -> bool {
        let Some(stored) = unhex32(&self.delete_token_sha256) else {
            return false;
        };
        ct_eq(&sha256(token.as_bytes()), &stored)
    }
}

/// Milliseconds since the Unix epoch, now.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// SHA-256 of `data`.
pub(crate) fn sha256(data: &[u8]) -> [u8; 32] {
    Sha256::digest(data).into()
}

/// Compares two digests without an early exit.
pub(crate) fn ct_eq(a: &[u8; 32], b: &[u8; 32]) -> bool {
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

/// Whether two secrets are equal, in time independent of where they differ and of their
/// lengths (both are hashed first).
pub(crate) fn secrets_equal(a: &str, b: &str) -> bool {
    ct_eq(&sha256(a.as_bytes()), &sha256(b.as_bytes()))
}

/// Parses 64 hex characters into 32 bytes.
fn unhex32(s: &str) -> Option<[u8; 32]> {
    let mut out = [0u8; 32];
    hex::decode_to_slice(s, &mut out).ok()?;
    Some(out)
}

/// Whether `s` is `len` lowercase hex characters (the ids of a path: nothing else is named).
pub(crate) fn is_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn token_hash_round_trip() {
        let token = "ab".repeat(32);
        let record = ShareRecord {
            version: RECORD_VERSION,
            content_type: "application/octet-stream".into(),
            size: 3,
            created_at: 1,
            expires_at: 10,
            delete_token_sha256: hex::encode(sha256(token.as_bytes())),
        };
        assert!(record.token_matches(&token));
        assert!(!record.token_matches("ab"));
        assert!(!record.token_matches(""));
        assert!(record.expired(10) && !record.expired(9));
        let json = serde_json::to_string(&record).unwrap();
        assert!(json.contains("\"expiresAt\":10"), "{json}");
        assert_eq!(serde_json::from_str::<ShareRecord>(&json).unwrap(), record);
    }

    #[test]
    fn secrets() {
        assert!(secrets_equal("k", "k"));
        assert!(!secrets_equal("k", "k2"));
        assert!(!secrets_equal("", "k"));
    }
}
