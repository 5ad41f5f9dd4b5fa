//! The end-to-end envelope of a shared bundle.
//!
//! A share is encrypted on the sharer's machine with a fresh random 256-bit key, and the key
//! travels only in the URL's fragment (`https://host/<code>#<key>`), which HTTP clients never
//! send: the server stores bytes it cannot read.
//!
//! Envelope: `"FCSB"` · version byte · 24-byte random nonce · XChaCha20-Poly1305
//! ciphertext with its 16-byte tag. Version 2 (written) carries a zstd frame of the bundle's
//! JSON ([`freecode_store::codec`]); version 1 (still read) carries the JSON itself. The 5 header bytes are the associated data, so a changed
//! version or magic fails authentication like any other tampering. XChaCha's 192-bit nonce
//! makes random nonces safe without a counter.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};

/// First bytes of every envelope.
pub const MAGIC: &[u8; 4] = b"FCSB";
/// The envelope version this build writes: its plaintext is zstd-compressed.
pub const VERSION: u8 = 2;
/// The oldest envelope version this build reads (uncompressed plaintext).
pub const VERSION_UNCOMPRESSED: u8 = 1;
const HEADER: usize = 5;
const NONCE: usize = 24;
const TAG: usize = 16;

/// Why an envelope or a key was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CryptoError {
    /// The bytes do not start with the envelope header, or are too short to hold one.
    #[error("not an encrypted freecode share ({0})")]
    NotAnEnvelope(&'static str),
    /// A newer envelope version.
    #[error(
        "encrypted share version {0} is not supported (this freecode reads versions {VERSION_UNCOMPRESSED} to {VERSION})"
    )]
    Version(u8),
    /// Authentication failed: wrong key, or the bytes were changed.
    #[error("cannot decrypt the share: wrong key in the URL, or the data was tampered with")]
    Auth,
    /// The key in the URL fragment is not 32 bytes of base64url.
    #[error("the share key in the URL is malformed (expected 43 base64url characters after '#')")]
    BadKey,
    /// The operating system's random source failed.
    #[error("no randomness available: {0}")]
    Random(String),
}

/// A 256-bit share key.
#[derive(Clone, PartialEq, Eq)]
pub struct ShareKey([u8; 32]);

impl std::fmt::Debug for ShareKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ShareKey(…)")
    }
}

impl ShareKey {
    /// A fresh random key.
    pub fn generate() -> Result<Self, CryptoError> {
        let mut k = [0u8; 32];
        getrandom::fill(&mut k).map_err(|e| CryptoError::Random(e.to_string()))?;
        Ok(Self(k))
    }

    /// The key as it appears in a URL fragment: 43 base64url characters, no padding.
    pub fn to_fragment(&self) -> String {
        URL_SAFE_NO_PAD.encode(self.0)
    }

    /// Parses a URL fragment (with or without the leading `#`, optionally `k=`-prefixed).
    pub fn from_fragment(fragment: &str) -> Result<Self, CryptoError> {
        let f = fragment.trim_start_matches('#');
        let f = f.strip_prefix("k=").unwrap_or(f);
        let bytes = URL_SAFE_NO_PAD.decode(f).map_err(|_| CryptoError::BadKey)?;
        let k: [u8; 32] = bytes.try_into().map_err(|_| CryptoError::BadKey)?;
        Ok(Self(k))
    }
}

/// Whether `bytes` look like an envelope (the magic), whatever their version.
pub fn is_envelope(bytes: &[u8]) -> bool {
    bytes.starts_with(MAGIC)
}

/// Encrypts `plaintext` under `key` into a new envelope of [`VERSION`] (the caller compresses).
pub fn seal(key: &ShareKey, plaintext: &[u8]) -> Result<Vec<u8>, CryptoError> {
    seal_version(key, plaintext, VERSION)
}

/// Encrypts `plaintext` into an envelope of `version` ([`VERSION_UNCOMPRESSED`] for readers
/// older than compression); any other version is refused.
pub fn seal_version(key: &ShareKey, plaintext: &[u8], version: u8) -> Result<Vec<u8>, CryptoError> {
    if !(VERSION_UNCOMPRESSED..=VERSION).contains(&version) {
        return Err(CryptoError::Version(version));
    }
    let mut nonce = [0u8; NONCE];
    getrandom::fill(&mut nonce).map_err(|e| CryptoError::Random(e.to_string()))?;
    let mut header = [0u8; HEADER];
    header[..4].copy_from_slice(MAGIC);
    header[4] = version;
    let cipher = XChaCha20Poly1305::new((&key.0).into());
    let ct = cipher
        .encrypt(
            XNonce::from_slice(&nonce),
            Payload {
                msg: plaintext,
                aad: &header,
            },
        )
        .map_err(|_| CryptoError::Auth)?;
    let mut out = Vec::with_capacity(HEADER + NONCE + ct.len());
    out.extend_from_slice(&header);
    out.extend_from_slice(&nonce);
    out.extend_from_slice(&ct);
    Ok(out)
}

/// Decrypts an envelope; any change to any byte, or the wrong key, is [`CryptoError::Auth`].
pub fn open(key: &ShareKey, envelope: &[u8]) -> Result<Vec<u8>, CryptoError> {
    open_versioned(key, envelope).map(|(_, plain)| plain)
}

/// Decrypts an envelope of any version this build reads; returns the version and plaintext.
pub fn open_versioned(key: &ShareKey, envelope: &[u8]) -> Result<(u8, Vec<u8>), CryptoError> {
    if !is_envelope(envelope) {
        return Err(CryptoError::NotAnEnvelope("no FCSB header"));
    }
    if envelope.len() < HEADER + NONCE + TAG {
        return Err(CryptoError::NotAnEnvelope("truncated"));
    }
    let version = envelope[4];
    if !(VERSION_UNCOMPRESSED..=VERSION).contains(&version) {
        return Err(CryptoError::Version(version));
    }
    let (header, rest) = envelope.split_at(HEADER);
    let (nonce, ct) = rest.split_at(NONCE);
    XChaCha20Poly1305::new((&key.0).into())
        .decrypt(
            XNonce::from_slice(nonce),
            Payload {
                msg: ct,
                aad: header,
            },
        )
        .map(|plain| (version, plain))
        .map_err(|_| CryptoError::Auth)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn round_trip_and_fresh_nonces() {
        let key = ShareKey::generate().unwrap();
        let a = seal(&key, b"hello").unwrap();
        let b = seal(&key, b"hello").unwrap();
        assert_ne!(a, b, "two seals of one text differ (random nonce)");
        assert_eq!(open(&key, &a).unwrap(), b"hello");
        assert!(!a.windows(5).any(|w| w == b"hello"));
    }

    #[test]
    fn every_flipped_byte_fails() {
        let key = ShareKey::generate().unwrap();
        let env = seal(&key, b"some secret transcript").unwrap();
        for i in 0..env.len() {
            let mut t = env.clone();
            t[i] ^= 0x01;
            assert!(open(&key, &t).is_err(), "byte {i} flipped must not decrypt");
        }
        for n in 0..env.len() {
            assert!(open(&key, &env[..n]).is_err(), "truncated to {n}");
        }
    }

    #[test]
    fn wrong_key_and_bad_fragments() {
        let key = ShareKey::generate().unwrap();
        let other = ShareKey::generate().unwrap();
        let env = seal(&key, b"x").unwrap();
        assert_eq!(open(&other, &env), Err(CryptoError::Auth));
        let frag = key.to_fragment();
        assert_eq!(frag.len(), 43);
        assert_eq!(ShareKey::from_fragment(&format!("#{frag}")).unwrap(), key);
        assert_eq!(ShareKey::from_fragment(&format!("k={frag}")).unwrap(), key);
        assert_eq!(ShareKey::from_fragment("#abc"), Err(CryptoError::BadKey));
        assert_eq!(ShareKey::from_fragment("#!!!"), Err(CryptoError::BadKey));
        let mut v3 = env.clone();
        v3[4] = 3;
        assert_eq!(open(&key, &v3), Err(CryptoError::Version(3)));
        // A v1 envelope still opens; changing its version byte to 2 fails authentication.
        let v1 = seal_version(&key, b"old", VERSION_UNCOMPRESSED).unwrap();
        assert_eq!(open_versioned(&key, &v1).unwrap(), (1, b"old".to_vec()));
        let mut as_v2 = v1.clone();
        as_v2[4] = VERSION;
        assert_eq!(open(&key, &as_v2), Err(CryptoError::Auth));
        assert_eq!(seal_version(&key, b"x", 0), Err(CryptoError::Version(0)));
    }
}
