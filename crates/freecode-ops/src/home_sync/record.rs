//! What a home-sync record holds: one session's changes, or a host's purges.
//!
//! A session record's plaintext is one JSON header line, then the bytes of its sections one
//! after the other, in the header's order:
//!
//! ```text
//! {"session":"<id>","base":"<chain>"|null,"sections":[{"what":"meta","mode":"set","len":N}, …]}\n
//! <meta.json bytes><messages bytes>…
//! ```
//!
//! `what` is `meta`, `memory`, `messages` or `events`; `mode` is `set` (the file becomes the
//! bytes) or `append` (the bytes go at offset `from`, which must be the file's length). A record
//! with a `messages`, `events` or `memory` section is a *content* record: it names the chain
//! point it extends (`base`) and is claimed before it is stored. A record with only a `meta`
//! section is not chained: metas are merged last-writer-wins by `updatedAt`.

use serde::{Deserialize, Serialize};

/// The file a section changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum What {
    /// `meta.json`.
    Meta,
    /// `memory/<id>/memory.json`.
    Memory,
    /// `messages.jsonl`.
    Messages,
    /// The rollout log, `events.jsonl`.
    Events,
}

/// How a section changes its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// The file becomes the bytes.
    Set,
    /// The bytes are appended at `from`.
    Append,
}

/// One section's header.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SectionHead {
    /// The file.
    pub what: What,
    /// How.
    pub mode: Mode,
    /// Where an append starts (the file's length before it).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub from: u64,
    /// Bytes in the section.
    pub len: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[derive(Serialize, Deserialize)]
struct Header {
    session: String,
    base: Option<String>,
    sections: Vec<SectionHead>,
}

/// A section with its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    /// The header.
    pub head: SectionHead,
    /// The bytes.
    pub bytes: Vec<u8>,
}

impl Section {
    /// A section of `bytes` for `what`, put by `mode` at `from` (its length is theirs).
    pub fn new(what: What, mode: Mode, from: u64, bytes: impl Into<Vec<u8>>) -> Self {
        let bytes = bytes.into();
        Self {
            head: SectionHead {
                what,
                mode,
                from,
                len: bytes.len() as u64,
            },
            bytes,
        }
    }
}

/// A session record, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRecord {
    /// The session id.
    pub session: String,
    /// The chain point a content record extends (hex); `None` for a meta-only record.
    pub base: Option<String>,
    /// The changes.
    pub sections: Vec<Section>,
}

impl SessionRecord {
    /// The plaintext.
    pub fn encode(&self) -> Vec<u8> {
        let header = Header {
            session: self.session.clone(),
            base: self.base.clone(),
            sections: self.sections.iter().map(|s| s.head.clone()).collect(),
        };
        let mut out = serde_json::to_vec(&header).unwrap_or_default();
        out.push(b'\n');
        for s in &self.sections {
            out.extend_from_slice(&s.bytes);
        }
        out
    }

    /// Decodes a plaintext; `None` if it is not one [`SessionRecord::encode`] could write.
    pub fn decode(plain: &[u8]) -> Option<Self> {
        let nl = memchr::memchr(b'\n', plain)?;
        let header: Header = serde_json::from_slice(&plain[..nl]).ok()?;
        let mut at = nl + 1;
        let mut sections = Vec::with_capacity(header.sections.len());
        for head in header.sections {
            let len = usize::try_from(head.len).ok()?;
            let bytes = plain.get(at..at.checked_add(len)?)?.to_vec();
            at += len;
            sections.push(Section { head, bytes });
        }
        if at != plain.len() {
            return None;
        }
        let content = sections.iter().any(|s| s.head.what != What::Meta);
        if content != header.base.is_some() {
            return None;
        }
        Some(Self {
            session: header.session,
            base: header.base,
            sections,
        })
    }

    /// The section changing `what`, if any.
    pub fn section(&self, what: What) -> Option<&Section> {
        self.sections.iter().find(|s| s.head.what == what)
    }
}

/// A control record: sessions purged on the host that wrote it, and record slots it could not
/// open (so that a machine keeping a copy of one mends its key wrap).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControlRecord {
    /// Session ids to purge everywhere.
    pub purged: Vec<String>,
    /// Slots that did not open there, as `"<log>/<host>/<index>"`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unopened: Vec<String>,
    /// A host's records of a log removed from the server by `sync compact` (none of them
    /// opened), as `"<log>/<host>"`: the copies kept of them go too, so no refill sends them back.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub compacted: Vec<String>,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn round_trips_and_refuses_what_it_would_not_write() {
        let r = SessionRecord {
            session: "s".into(),
            base: Some("ab".into()),
            sections: vec![
                Section {
                    head: SectionHead {
                        what: What::Meta,
                        mode: Mode::Set,
                        from: 0,
                        len: 2,
                    },
                    bytes: b"{}".to_vec(),
                },
                Section {
                    head: SectionHead {
                        what: What::Messages,
                        mode: Mode::Append,
                        from: 7,
                        len: 4,
                    },
                    bytes: "é\n\n".as_bytes().to_vec(),
                },
            ],
        };
        let plain = r.encode();
        assert_eq!(SessionRecord::decode(&plain).unwrap(), r);
        assert!(SessionRecord::decode(&plain[..plain.len() - 1]).is_none());
        let mut longer = plain.clone();
        longer.push(b'x');
        assert!(SessionRecord::decode(&longer).is_none());
        // Content without a base, or a base without content: refused.
        let mut no_base = r.clone();
        no_base.base = None;
        assert!(SessionRecord::decode(&no_base.encode()).is_none());
    }
}
