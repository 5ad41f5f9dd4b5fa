//! The sync key and what it seals.
//!
//! A [`SyncKey`] is 32 random bytes made by `freecode sync init` and carried to other machines
//! as a BIP-39 phrase of 24 English words (the last two bits of the 24th word are a checksum,
//! so a mistyped phrase is refused, not taken for another key). Three keys are derived from it
//! with HMAC-SHA-256 under fixed labels: the key-wrapping key, the id key (log ids and chain
//! links, so the server cannot link a log to a session id), and an 8-byte key id written in the
//! clear so that "another sync key" and "tampered" are told apart.
//!
//! A record is sealed under a fresh random 256-bit record key, and the record key is wrapped
//! by the sync key:
//!
//! ```text
//! "FCSR" · version 1 · kind · key id (8) · wrap nonce (24) · wrapped record key (32 + 16)
//!        · body nonce (24) · body: XChaCha20-Poly1305(zstd(plaintext)) with its tag (16)
//! ```
//!
//! The body's associated data is the magic, version and kind with the host id, the log id and
//! the record's index (big-endian u64); the wrap's adds the key id. A record moved to another
//! index, log or host, or given another kind, does not open; nor does one whose bytes changed.
//! Because only the wrap names the key, rotating the sync key rewraps records without
//! re-encrypting their bodies: [`SyncKey::rotate`] makes a new key of the same group (its
//! ids key is the group's, so every log keeps its id, and it holds the keys before it, so what
//! they sealed still opens), [`SyncKey::rewrap`] moves a record under it (bytes
//! [`WRAP_SPAN`] change, nothing else), and [`SyncKey::seal_ring`] seals what a machine that
//! has only the new phrase needs besides it (the ids key and the older keys), for the server
//! to keep under the new key's id.
//!
//! A claim (who extended a session's chain from one point: see `freecode-ops`'s `home_sync`) is
//! sealed the same way with the log and the chain point as associated data.

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use hmac::{Hmac, Mac};
use sha2::{Digest as _, Sha256};

/// First bytes of a sealed record.
pub const RECORD_MAGIC: &[u8; 4] = b"FCSR";
/// First bytes of a sealed claim.
pub const CLAIM_MAGIC: &[u8; 4] = b"FCSC";
/// First bytes of a sealed key ring.
pub const RING_MAGIC: &[u8; 4] = b"FCSK";
/// The bytes of a sealed record a rewrap changes (key id, wrap nonce, wrapped record key):
/// a server accepts a record again at an index only when every other byte is the same.
pub const WRAP_SPAN: std::ops::Range<usize> = 6..6 + KEY_ID + NONCE + 32 + TAG;
/// The record format this build writes and reads.
pub const VERSION: u8 = 1;
const NONCE: usize = 24;
const TAG: usize = 16;
const KEY_ID: usize = 8;
/// Bytes of a record before its body's ciphertext.
const RECORD_HEADER: usize = 4 + 1 + 1 + KEY_ID + NONCE + 32 + TAG + NONCE;
/// The most a record's plaintext may inflate to (what a batch of one session may hold).
pub const MAX_PLAINTEXT: u64 = 1 << 30;

type HmacSha256 = Hmac<Sha256>;

/// Why a key, a record or a claim was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SealError {
    /// The phrase is not 24 words of the BIP-39 English list with a right checksum.
    #[error("not a sync key phrase ({0}): expected the 24 words `freecode sync key` printed")]
    BadPhrase(String),
    /// A key file or string that is not a key.
    #[error("not a sync key: {0}")]
    BadKey(String),
    /// Sealed with another sync key (the key id differs).
    #[error(
        "{what} was sealed with another sync key: this machine joined another sync group, or the key was rotated"
    )]
    OtherKey {
        /// What was being opened.
        what: String,
    },
    /// Failed authentication or framing: the bytes were changed, truncated, moved or spliced.
    #[error("{what} does not open: the server returned changed, truncated or misplaced data")]
    Tampered {
        /// What was being opened.
        what: String,
    },
    /// The operating system's random source failed.
    #[error("no randomness available: {0}")]
    Random(String),
    /// Compression failed (or the plaintext is past [`MAX_PLAINTEXT`]).
    #[error("{0}")]
    Codec(String),
}

fn random<const N: usize>() -> Result<[u8; N], SealError> {
    let mut b = [0u8; N];
    getrandom::fill(&mut b).map_err(|e| SealError::Random(e.to_string()))?;
    Ok(b)
}

fn hmac(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    // HMAC takes a key of any length: `new_from_slice` cannot fail for it.
    let mut mac = <HmacSha256 as Mac>::new_from_slice(key).unwrap_or_else(|_| unreachable!());
    for p in parts {
        mac.update(p);
    }
    mac.finalize().into_bytes().into()
}

use hex::encode as hex;

/// `N` bytes from `2N` lowercase hex characters (the form this module writes; nothing else).
fn unhex<const N: usize>(s: &str) -> Option<[u8; N]> {
    if !s.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')) {
        return None;
    }
    let mut out = [0u8; N];
    hex::decode_to_slice(s, &mut out).ok()?;
    Some(out)
}

macro_rules! hex_id {
    ($name:ident, $n:expr, $doc:literal) => {
        #[doc = $doc]
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name([u8; $n]);

        impl $name {
            /// Parses lowercase hex of the right length.
            pub fn parse(s: &str) -> Option<Self> {
                unhex::<$n>(s).map(Self)
            }
            /// The raw bytes.
            pub fn bytes(&self) -> &[u8; $n] {
                &self.0
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&hex(&self.0))
            }
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "{}({})", stringify!($name), self)
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&self.to_string())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                Self::parse(&s)
                    .ok_or_else(|| serde::de::Error::custom(concat!("not a ", stringify!($name))))
            }
        }
    };
}

hex_id!(
    HostId,
    16,
    "A machine's id: 128 random bits, 32 lowercase hex characters."
);
hex_id!(
    LogId,
    16,
    "A log's id: the session id keyed by the sync key (the server never sees session ids)."
);
hex_id!(
    Chain,
    32,
    "A point in a session's history: the keyed hash of every content record applied so far."
);

impl HostId {
    /// A fresh random host id.
    pub fn generate() -> Result<Self, SealError> {
        random().map(Self)
    }
}

/// What a record holds (bound to it as associated data).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Changes to one session.
    Session = 1,
    /// A host's control records (purges).
    Control = 2,
}

impl Kind {
    fn from_byte(b: u8) -> Option<Self> {
        match b {
            1 => Some(Self::Session),
            2 => Some(Self::Control),
            _ => None,
        }
    }
}

/// The id of the key a sealed record names (16 hex characters), if it is a record.
pub fn key_id_of(sealed: &[u8]) -> Option<String> {
    (sealed.len() > WRAP_SPAN.end && &sealed[..4] == RECORD_MAGIC)
        .then(|| hex(&sealed[6..6 + KEY_ID]))
}

/// The sync key of a group of machines.
#[derive(Clone, PartialEq, Eq)]
pub struct SyncKey {
    master: [u8; 32],
    wrap: [u8; 32],
    ids: [u8; 32],
    key_id: [u8; KEY_ID],
    /// The keys this one replaced, newest first: what they sealed still opens.
    older: Vec<Older>,
}

#[derive(Clone, PartialEq, Eq)]
struct Older {
    master: [u8; 32],
    wrap: [u8; 32],
    key_id: [u8; KEY_ID],
}

/// The wrap key and key id of a master key.
fn derive(master: &[u8; 32]) -> ([u8; 32], [u8; KEY_ID]) {
    let wrap = hmac(master, &[b"freecode-remote wrap v1"]);
    let id = hmac(master, &[b"freecode-remote key id v1"]);
    let mut key_id = [0u8; KEY_ID];
    key_id.copy_from_slice(&id[..KEY_ID]);
    (wrap, key_id)
}

fn credential_of(master: &[u8; 32]) -> String {
    hex(hmac(master, &[b"freecode-remote credential v1"]))
}

impl std::fmt::Debug for SyncKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SyncKey({})", hex(self.key_id))
    }
}

/// An opened record: its kind and plaintext.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opened {
    /// What it holds.
    pub kind: Kind,
    /// The plaintext, decompressed.
    pub plaintext: Vec<u8>,
}

impl SyncKey {
    /// A fresh random key.
    pub fn generate() -> Result<Self, SealError> {
        random().map(Self::from_bytes)
    }

    /// The key of 32 raw bytes (a group's first key: its ids key derived from it).
    pub fn from_bytes(master: [u8; 32]) -> Self {
        let (wrap, key_id) = derive(&master);
        let ids = hmac(&master, &[b"freecode-remote ids v1"]);
        Self {
            master,
            wrap,
            ids,
            key_id,
            older: Vec::new(),
        }
    }

    /// Whether this key replaced others (a rotation): its phrase alone is not the whole key,
    /// the server's key ring ([`SyncKey::seal_ring`]) completes it.
    pub fn is_rotated(&self) -> bool {
        !self.older.is_empty()
    }

    /// A new key for the same group: the same ids key (every log keeps its id), this one and
    /// the ones before it kept to open what they sealed.
    pub fn rotate(&self) -> Result<Self, SealError> {
        let master: [u8; 32] = random()?;
        let (wrap, key_id) = derive(&master);
        let mut older = vec![Older {
            master: self.master,
            wrap: self.wrap,
            key_id: self.key_id,
        }];
        older.extend(self.older.iter().cloned());
        Ok(Self {
            master,
            wrap,
            ids: self.ids,
            key_id,
            older,
        })
    }

    /// The key ids this key opens: its own first, then the older ones.
    pub fn key_ids(&self) -> Vec<String> {
        std::iter::once(hex(self.key_id))
            .chain(self.older.iter().map(|o| hex(o.key_id)))
            .collect()
    }

    /// The wrap key of key id `id`, this key's or an older one's.
    fn wrap_of(&self, id: &[u8]) -> Option<&[u8; 32]> {
        if id == self.key_id {
            return Some(&self.wrap);
        }
        self.older.iter().find(|o| o.key_id == id).map(|o| &o.wrap)
    }

    fn ring_aad(&self) -> Vec<u8> {
        let mut aad = Vec::with_capacity(5 + KEY_ID);
        aad.extend_from_slice(RING_MAGIC);
        aad.push(VERSION);
        aad.extend_from_slice(&self.key_id);
        aad
    }

    /// The key ring: the ids key and the older keys, sealed under this key (for the server
    /// to keep at this key's id).
    pub fn seal_ring(&self) -> Result<Vec<u8>, SealError> {
        let mut msg = Vec::with_capacity(32 * (1 + self.older.len()));
        msg.extend_from_slice(&self.ids);
        for o in &self.older {
            msg.extend_from_slice(&o.master);
        }
        self.seal_small(RING_MAGIC, &msg, &self.ring_aad())
    }

    /// A small sealed object (a claim, a key ring): `magic` · version · key id · nonce ·
    /// XChaCha20-Poly1305(`msg`) under the wrap key, with `aad`.
    fn seal_small(&self, magic: &[u8; 4], msg: &[u8], aad: &[u8]) -> Result<Vec<u8>, SealError> {
        let nonce: [u8; NONCE] = random()?;
        let ct = XChaCha20Poly1305::new((&self.wrap).into())
            .encrypt(XNonce::from_slice(&nonce), Payload { msg, aad })
            .map_err(|_| SealError::Codec("sealing failed".to_owned()))?;
        let mut out = Vec::with_capacity(5 + KEY_ID + NONCE + ct.len());
        out.extend_from_slice(magic);
        out.push(VERSION);
        out.extend_from_slice(&self.key_id);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&ct);
        Ok(out)
    }

    /// This key (made from its phrase alone) completed by its key ring.
    pub fn with_ring(&self, sealed: &[u8]) -> Result<Self, SealError> {
        let tampered = || SealError::Tampered {
            what: format!("the key ring of key {}", hex(self.key_id)),
        };
        let head = 5 + KEY_ID + NONCE;
        if sealed.len() < head + 32 + TAG
            || &sealed[..4] != RING_MAGIC
            || sealed[4] != VERSION
            || sealed[5..5 + KEY_ID] != self.key_id
        {
            return Err(tampered());
        }
        let msg = XChaCha20Poly1305::new((&self.wrap).into())
            .decrypt(
                XNonce::from_slice(&sealed[5 + KEY_ID..head]),
                Payload {
                    msg: &sealed[head..],
                    aad: &self.ring_aad(),
                },
            )
            .map_err(|_| tampered())?;
        if msg.len() % 32 != 0 || msg.is_empty() {
            return Err(tampered());
        }
        let mut chunks = msg.chunks_exact(32).map(|c| {
            let mut b = [0u8; 32];
            b.copy_from_slice(c);
            b
        });
        let ids = chunks.next().ok_or_else(tampered)?;
        let older = chunks
            .map(|master| {
                let (wrap, key_id) = derive(&master);
                Older {
                    master,
                    wrap,
                    key_id,
                }
            })
            .collect();
        Ok(Self {
            master: self.master,
            wrap: self.wrap,
            ids,
            key_id: self.key_id,
            older,
        })
    }

    /// Record `index` of `host`'s log `log` moved under this key: the record key unwrapped
    /// with the older key that wrapped it and wrapped again with this one; the body's bytes
    /// stay. `None` when it is under this key already.
    pub fn rewrap(
        &self,
        host: &HostId,
        log: &LogId,
        index: u64,
        sealed: &[u8],
    ) -> Result<Option<Vec<u8>>, SealError> {
        if sealed.get(6..6 + KEY_ID) == Some(&self.key_id[..]) {
            return Ok(None);
        }
        let (kind, record_key) = self.record_key(host, log, index, sealed)?;
        let body_aad = Self::body_aad(kind, host, log, index);
        let at = 6 + KEY_ID;
        let mut new_aad = body_aad;
        new_aad.extend_from_slice(&self.key_id);
        let nonce: [u8; NONCE] = random()?;
        let wrapped = XChaCha20Poly1305::new((&self.wrap).into())
            .encrypt(
                XNonce::from_slice(&nonce),
                Payload {
                    msg: &record_key,
                    aad: &new_aad,
                },
            )
            .map_err(|_| SealError::Codec("sealing failed".to_owned()))?;
        let mut out = sealed.to_vec();
        out[6..6 + KEY_ID].copy_from_slice(&self.key_id);
        out[at..at + NONCE].copy_from_slice(&nonce);
        out[at + NONCE..WRAP_SPAN.end].copy_from_slice(&wrapped);
        Ok(Some(out))
    }

    /// The key as its file holds it: the master key's 64 hex characters, then, for a rotated
    /// key, `ids <hex>` and one `older <hex>` line per key it replaced.
    pub fn to_file(&self) -> String {
        let mut out = hex(self.master);
        out.push('\n');
        if self.is_rotated() {
            out.push_str(&format!("ids {}\n", hex(self.ids)));
            for o in &self.older {
                out.push_str(&format!("older {}\n", hex(o.master)));
            }
        }
        out
    }

    /// The key as 24 words.
    pub fn to_phrase(&self) -> String {
        // 32 bytes is a valid BIP-39 entropy length: this cannot fail.
        bip39::Mnemonic::from_entropy_in(bip39::Language::English, &self.master)
            .map(|m| m.to_string())
            .unwrap_or_default()
    }

    /// Parses 24 words (any case, any whitespace between them).
    pub fn from_phrase(phrase: &str) -> Result<Self, SealError> {
        let words = phrase
            .split_whitespace()
            .map(str::to_lowercase)
            .collect::<Vec<_>>()
            .join(" ");
        let m = bip39::Mnemonic::parse_in(bip39::Language::English, &words)
            .map_err(|e| SealError::BadPhrase(e.to_string()))?;
        let entropy = m.to_entropy();
        let master: [u8; 32] = entropy.try_into().map_err(|e: Vec<u8>| {
            SealError::BadPhrase(format!("{} words, expected 24", e.len() * 3 / 4))
        })?;
        Ok(Self::from_bytes(master))
    }

    /// The key as a file holds it: 64 hex characters.
    pub fn to_hex(&self) -> String {
        hex(self.master)
    }

    /// Parses what [`SyncKey::to_hex`] or [`SyncKey::to_file`] wrote, or a phrase.
    pub fn parse(text: &str) -> Result<Self, SealError> {
        let t = text.trim();
        if let Some(master) = unhex::<32>(t) {
            return Ok(Self::from_bytes(master));
        }
        let mut lines = t.lines().map(str::trim);
        if let Some(master) = lines.next().and_then(unhex::<32>) {
            let bad = || {
                SealError::BadKey("a key file line is not `ids <hex>` or `older <hex>`".to_owned())
            };
            let mut key = Self::from_bytes(master);
            for line in lines.filter(|l| !l.is_empty()) {
                match line.split_once(' ') {
                    Some(("ids", h)) => key.ids = unhex::<32>(h.trim()).ok_or_else(bad)?,
                    Some(("older", h)) => {
                        let master = unhex::<32>(h.trim()).ok_or_else(bad)?;
                        let (wrap, key_id) = derive(&master);
                        key.older.push(Older {
                            master,
                            wrap,
                            key_id,
                        });
                    }
                    _ => return Err(bad()),
                }
            }
            return Ok(key);
        }
        if t.split_whitespace().count() > 1 {
            return Self::from_phrase(t);
        }
        Err(SealError::BadKey(
            "expected 64 hex characters or a 24-word phrase".to_owned(),
        ))
    }

    /// The group credential of this key, as 64 hex characters: what the sync server checks on
    /// every request (its `group` module) and stores only as a SHA-256. It is derived from the
    /// master key under its own label, so it reveals nothing of the key, and a rotated key has
    /// another one: the server revokes the old at the rotation.
    pub fn credential(&self) -> String {
        credential_of(&self.master)
    }

    /// The SHA-256 of [`SyncKey::credential`] (64 hex characters), as the server keeps it.
    pub fn credential_hash(&self) -> String {
        hex(Sha256::digest(self.credential().as_bytes()))
    }

    /// The credentials of the keys this one replaced, newest first.
    pub fn older_credentials(&self) -> Vec<String> {
        self.older
            .iter()
            .map(|o| credential_of(&o.master))
            .collect()
    }

    /// The key id in the clear (16 hex characters), to tell keys apart.
    pub fn id(&self) -> String {
        hex(self.key_id)
    }

    /// A session's log id.
    pub fn log_id(&self, session: &str) -> LogId {
        let h = hmac(&self.ids, &[b"log\0", session.as_bytes()]);
        let mut id = [0u8; 16];
        id.copy_from_slice(&h[..16]);
        LogId(id)
    }

    /// The log holding purges and other control records.
    pub fn control_log(&self) -> LogId {
        let h = hmac(&self.ids, &[b"control\0"]);
        let mut id = [0u8; 16];
        id.copy_from_slice(&h[..16]);
        LogId(id)
    }

    /// Where a session's history starts.
    pub fn genesis(&self, session: &str) -> Chain {
        Chain(hmac(&self.ids, &[b"genesis\0", session.as_bytes()]))
    }

    /// The chain point after a content record whose plaintext is `plaintext`.
    pub fn next(&self, chain: &Chain, plaintext: &[u8]) -> Chain {
        let digest: [u8; 32] = Sha256::digest(plaintext).into();
        Chain(hmac(&self.ids, &[b"next\0", &chain.0, &digest]))
    }

    /// Where claim `slot` of chain point `base` is stored: slot 0 is `base` itself, each
    /// later one a point derived from it under a label no record's chain link uses. A slot
    /// whose claim does not open (a member's garbage) is passed over for the next one, so no
    /// such write stops a session for good.
    pub fn claim_slot(&self, base: &Chain, slot: u32) -> Chain {
        if slot == 0 {
            return *base;
        }
        Chain(hmac(
            &self.ids,
            &[b"claim slot\0", &base.0, &slot.to_be_bytes()],
        ))
    }

    fn body_aad(kind: Kind, host: &HostId, log: &LogId, index: u64) -> Vec<u8> {
        let mut aad = Vec::with_capacity(6 + 16 + 16 + 8);
        aad.extend_from_slice(RECORD_MAGIC);
        aad.push(VERSION);
        aad.push(kind as u8);
        aad.extend_from_slice(&host.0);
        aad.extend_from_slice(&log.0);
        aad.extend_from_slice(&index.to_be_bytes());
        aad
    }

    /// Seals `plaintext` as record `index` of `host`'s log `log`.
    pub fn seal(
        &self,
        kind: Kind,
        host: &HostId,
        log: &LogId,
        index: u64,
        plaintext: &[u8],
    ) -> Result<Vec<u8>, SealError> {
        let compressed = freecode_store::codec::compress(plaintext)
            .map_err(|e| SealError::Codec(e.to_string()))?;
        let record_key: [u8; 32] = random()?;
        let wrap_nonce: [u8; NONCE] = random()?;
        let body_nonce: [u8; NONCE] = random()?;
        let body_aad = Self::body_aad(kind, host, log, index);
        let mut wrap_aad = body_aad.clone();
        wrap_aad.extend_from_slice(&self.key_id);
        let wrapped = XChaCha20Poly1305::new((&self.wrap).into())
            .encrypt(
                XNonce::from_slice(&wrap_nonce),
                Payload {
                    msg: &record_key,
                    aad: &wrap_aad,
                },
            )
            .map_err(|_| SealError::Codec("sealing failed".to_owned()))?;
        let body = XChaCha20Poly1305::new((&record_key).into())
            .encrypt(
                XNonce::from_slice(&body_nonce),
                Payload {
                    msg: &compressed,
                    aad: &body_aad,
                },
            )
            .map_err(|_| SealError::Codec("sealing failed".to_owned()))?;
        let mut out = Vec::with_capacity(RECORD_HEADER + body.len());
        out.extend_from_slice(RECORD_MAGIC);
        out.push(VERSION);
        out.push(kind as u8);
        out.extend_from_slice(&self.key_id);
        out.extend_from_slice(&wrap_nonce);
        out.extend_from_slice(&wrapped);
        out.extend_from_slice(&body_nonce);
        out.extend_from_slice(&body);
        Ok(out)
    }

    /// The kind of record `index` of `host`'s log `log` and its record key, unwrapped with
    /// the key (this one or an older one) that wrapped it: refused unless the framing is
    /// whole and the wrap opens for exactly that place.
    fn record_key(
        &self,
        host: &HostId,
        log: &LogId,
        index: u64,
        sealed: &[u8],
    ) -> Result<(Kind, [u8; 32]), SealError> {
        let what = || format!("record {index} of host {host}'s log {log}");
        let tampered = || SealError::Tampered { what: what() };
        if sealed.len() < RECORD_HEADER + TAG
            || &sealed[..4] != RECORD_MAGIC
            || sealed[4] != VERSION
        {
            return Err(tampered());
        }
        let kind = Kind::from_byte(sealed[5]).ok_or_else(tampered)?;
        let key_id = &sealed[6..6 + KEY_ID];
        let Some(wrap_key) = self.wrap_of(key_id) else {
            return Err(SealError::OtherKey { what: what() });
        };
        let mut wrap_aad = Self::body_aad(kind, host, log, index);
        wrap_aad.extend_from_slice(key_id);
        let at = 6 + KEY_ID;
        let record_key = XChaCha20Poly1305::new(wrap_key.into())
            .decrypt(
                XNonce::from_slice(&sealed[at..at + NONCE]),
                Payload {
                    msg: &sealed[at + NONCE..WRAP_SPAN.end],
                    aad: &wrap_aad,
                },
            )
            .map_err(|_| tampered())?;
        let record_key: [u8; 32] = record_key.try_into().map_err(|_| tampered())?;
        Ok((kind, record_key))
    }

    /// Opens record `index` of `host`'s log `log`: refused unless it was sealed by this key for
    /// exactly that place.
    pub fn open(
        &self,
        host: &HostId,
        log: &LogId,
        index: u64,
        sealed: &[u8],
    ) -> Result<Opened, SealError> {
        let tampered = || SealError::Tampered {
            what: format!("record {index} of host {host}'s log {log}"),
        };
        let (kind, record_key) = self.record_key(host, log, index, sealed)?;
        let body_aad = Self::body_aad(kind, host, log, index);
        let at = WRAP_SPAN.end + NONCE;
        let body_nonce = &sealed[WRAP_SPAN.end..at];
        let compressed = XChaCha20Poly1305::new((&record_key).into())
            .decrypt(
                XNonce::from_slice(body_nonce),
                Payload {
                    msg: &sealed[at..],
                    aad: &body_aad,
                },
            )
            .map_err(|_| tampered())?;
        let plaintext = freecode_store::codec::decompress(&compressed, MAX_PLAINTEXT)
            .map_err(|_| tampered())?;
        Ok(Opened { kind, plaintext })
    }

    fn claim_aad(key_id: &[u8], log: &LogId, base: &Chain) -> Vec<u8> {
        let mut aad = Vec::with_capacity(5 + KEY_ID + 16 + 32);
        aad.extend_from_slice(CLAIM_MAGIC);
        aad.push(VERSION);
        aad.extend_from_slice(key_id);
        aad.extend_from_slice(&log.0);
        aad.extend_from_slice(&base.0);
        aad
    }

    /// Seals the claim "`host` extends `log` from `base` with its record `index`".
    pub fn seal_claim(
        &self,
        log: &LogId,
        base: &Chain,
        host: &HostId,
        index: u64,
    ) -> Result<Vec<u8>, SealError> {
        let mut msg = Vec::with_capacity(24);
        msg.extend_from_slice(&host.0);
        msg.extend_from_slice(&index.to_be_bytes());
        self.seal_small(CLAIM_MAGIC, &msg, &Self::claim_aad(&self.key_id, log, base))
    }

    /// Opens a claim on `log` at `base`: who holds it, with which of its records.
    pub fn open_claim(
        &self,
        log: &LogId,
        base: &Chain,
        sealed: &[u8],
    ) -> Result<(HostId, u64), SealError> {
        let what = || format!("the claim on log {log} at {base}");
        let tampered = || SealError::Tampered { what: what() };
        let head = 5 + KEY_ID + NONCE;
        if sealed.len() != head + 24 + TAG || &sealed[..4] != CLAIM_MAGIC || sealed[4] != VERSION {
            return Err(tampered());
        }
        let key_id = &sealed[5..5 + KEY_ID];
        let Some(wrap_key) = self.wrap_of(key_id) else {
            return Err(SealError::OtherKey { what: what() });
        };
        let msg = XChaCha20Poly1305::new(wrap_key.into())
            .decrypt(
                XNonce::from_slice(&sealed[5 + KEY_ID..head]),
                Payload {
                    msg: &sealed[head..],
                    aad: &Self::claim_aad(key_id, log, base),
                },
            )
            .map_err(|_| tampered())?;
        let mut host = [0u8; 16];
        host.copy_from_slice(&msg[..16]);
        let mut index = [0u8; 8];
        index.copy_from_slice(&msg[16..24]);
        Ok((HostId(host), u64::from_be_bytes(index)))
    }
}

#[cfg(test)]
mod tests;
