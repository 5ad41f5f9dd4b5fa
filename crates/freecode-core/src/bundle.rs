//! The one versioned export format of a session (SPEC §9.3, §15, §19.25), and the readers of
//! the shapes the original wrote.
//!
//! A [`Bundle`] is `{format, version, exportedAt, expiresAt?, meta, messages, summaries?,
//! rollout?, memories?, counts, redactions?}`: the session's meta and messages in their on-disk
//! shapes (parts in full, usage, interrupted), the compaction summaries, optionally the rollout
//! events and the project's memory entries, and the counts a reader checks. Written ([`Wire`]),
//! it also carries `metadata`, a copy of `meta`, so that the original's importers accept it.
//!
//! [`parse_bundle`] reads, all or nothing, with every message validated:
//! - our bundle (any `version` above [`BUNDLE_VERSION`] is refused by name);
//! - the seed's plain `{meta, messages}` body (what the original's `export` POSTed);
//! - `{metadata, messages}` (what the original's `import` expected), and the original's local
//!   `ExportedSession` v1 (`store/remote.ts`), whose flat `{id, role, content}` messages become
//!   one text part each.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::memory::Summary;
use crate::message::{Part, Role, StoredMessage};
use crate::meta::SessionMeta;

/// The `format` tag of a bundle.
pub const BUNDLE_FORMAT: &str = "freecode.session-bundle";
/// The bundle version this build writes and reads.
pub const BUNDLE_VERSION: u64 = 1;
/// Most messages a bundle may carry.
pub const MAX_MESSAGES: usize = 1_000_000;
/// Most rollout events a bundle may carry.
pub const MAX_EVENTS: usize = 5_000_000;
/// Most memory entries a bundle may carry.
pub const MAX_MEMORIES: usize = 10_000;
/// Most JSON values (roughly: commas and brackets) a body may hold. Checked by a byte scan
/// before parsing, so a wide bomb (`[0,0,0,…]` of 64 MiB would take gigabytes as a tree) is
/// refused for the price of one pass; a real 64 MiB export holds a few million.
pub const MAX_JSON_VALUES: usize = 8_000_000;
/// The largest bundle, counted as the JSON a reader parses (after decompression), that export
/// writes and import reads: one limit on both sides, so export refuses, naming it, what import
/// would refuse. 128 MiB holds a 200,000-message session (85–94 MB of JSON; importing one takes
/// about 0.7 GB); zstd makes the file or upload 4–5 times smaller, but not the parse.
pub const MAX_BUNDLE_BYTES: u64 = 128 * 1024 * 1024;

/// A project memory entry (`projects/<slug>/memory/<type>/<name>.md`), as `store/remote.ts`
/// exports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryEntry {
    /// File stem; `[A-Za-z0-9._-]`, checked on import.
    pub name: String,
    /// One-line description (front matter).
    #[serde(default)]
    pub description: String,
    /// `user`, `feedback`, `project` or `reference`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The body after the front matter.
    #[serde(default)]
    pub content: String,
    /// Milliseconds (the original wrote fractional values).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<f64>,
    /// Milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<f64>,
    /// Tags (front matter).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// Name of an entry this one replaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supersedes: Option<String>,
}

/// How many of each item a bundle holds; checked on import.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Counts {
    /// Messages.
    pub messages: u64,
    /// Rollout events.
    #[serde(default)]
    pub events: u64,
    /// Memory entries.
    #[serde(default)]
    pub memories: u64,
}

/// One redaction made before export: which rule, where, and a masked preview (never the
/// value).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RedactionNote {
    /// The rule that found the secret: gitleaks' id (`github-pat`) or one of the redactor's own
    /// (`secret-assignment`, `random-token`, …).
    pub kind: String,
    /// Where: `messages[3].parts[1].result`, `rollout[10].output`, …
    pub location: String,
    /// The secret's first and last few characters around an ellipsis, at most a quarter of it
    /// (`ghp_…k2Q`; [`crate::redact::preview`]); empty in bundles of older versions.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub preview: String,
}

/// A session ready to leave the machine, or just arrived.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Bundle {
    /// Always [`BUNDLE_FORMAT`].
    pub format: String,
    /// [`BUNDLE_VERSION`].
    pub version: u64,
    /// When it was made, ms.
    pub exported_at: i64,
    /// When the share expires, ms, if it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<i64>,
    /// The session's `meta.json`.
    pub meta: SessionMeta,
    /// The session's `messages.jsonl`, in order.
    pub messages: Vec<StoredMessage>,
    /// Compaction summaries (`memory/<id>/memory.json`), oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub summaries: Vec<Summary>,
    /// The rollout log's events, if included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<Vec<Value>>,
    /// The project's memory entries, if included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memories: Option<Vec<MemoryEntry>>,
    /// What the bundle holds.
    pub counts: Counts,
    /// The redactions made, if any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub redactions: Vec<RedactionNote>,
}

impl Bundle {
    /// A bundle of `meta` and `messages` with the counts filled in.
    pub fn new(meta: SessionMeta, messages: Vec<StoredMessage>, exported_at: i64) -> Self {
        let mut b = Self {
            format: BUNDLE_FORMAT.to_owned(),
            version: BUNDLE_VERSION,
            exported_at,
            expires_at: None,
            meta,
            messages,
            summaries: Vec::new(),
            rollout: None,
            memories: None,
            counts: Counts::default(),
            redactions: Vec::new(),
        };
        b.recount();
        b
    }

    /// Sets [`Bundle::counts`] from the contents.
    pub fn recount(&mut self) {
        self.counts = Counts {
            messages: self.messages.len() as u64,
            events: self.rollout.as_ref().map_or(0, |r| r.len() as u64),
            memories: self.memories.as_ref().map_or(0, |m| m.len() as u64),
        };
    }

    /// Clamps every timestamp the sender wrote to at most `now` (ms): the meta's, the
    /// messages', the summaries', the rollout events' `timestamp`, the memory entries' and
    /// `exportedAt`. An imported session then cannot sort as newer than the import (a
    /// `lastTurnAt` in 2100 would top every listing and `run --continue` for ever). The order of
    /// the sender's times is kept (`min` is monotonic); `expiresAt` is a deadline, not a
    /// record, and is left alone.
    pub fn clamp_times(&mut self, now: i64) {
        let m = &mut self.meta;
        for t in [&mut m.created_at, &mut m.updated_at, &mut m.last_turn_at] {
            *t = (*t).min(now);
        }
        self.exported_at = self.exported_at.min(now);
        for msg in &mut self.messages {
            msg.timestamp = msg.timestamp.min(now);
        }
        for s in &mut self.summaries {
            s.created_at = s.created_at.min(now);
        }
        for e in self.rollout.iter_mut().flatten() {
            if let Some(t) = e.get_mut("timestamp")
                && t.as_f64().is_some_and(|v| v > now as f64)
            {
                *t = Value::from(now);
            }
        }
        let now_f = now as f64;
        for e in self.memories.iter_mut().flatten() {
            for t in [&mut e.created_at, &mut e.updated_at].into_iter().flatten() {
                if *t > now_f {
                    *t = now_f;
                }
            }
        }
    }

    /// The bundle as compact JSON, as written to a file or a share ([`Wire`]).
    pub fn to_json(&self) -> Vec<u8> {
        // A struct of plain data always serialises.
        self.to_wire_json().unwrap_or_default()
    }

    /// The bundle as written: every field, plus `metadata`, a copy of `meta` for the
    /// original's importers ([`Wire`]).
    pub fn to_wire_json(&self) -> serde_json::Result<Vec<u8>> {
        serde_json::to_vec(&Wire {
            bundle: self,
            metadata: &self.meta,
        })
    }
}

/// What a bundle file or share body holds: the [`Bundle`] and `metadata`, a copy of its `meta`.
/// The original's `SessionManager.import` and `RemoteSessionSync.importFromFile` read
/// `metadata` (SPEC §9.3, §15) and take `messages` in the parts form ours already have, so both
/// accept our bundles; our reader takes `meta` and ignores the copy.
#[derive(Serialize)]
pub struct Wire<'a> {
    /// The bundle.
    #[serde(flatten)]
    pub bundle: &'a Bundle,
    /// A copy of `bundle.meta`.
    pub metadata: &'a SessionMeta,
}

/// Which shape an imported body had.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceShape {
    /// Our versioned bundle.
    Bundle,
    /// The seed's `{meta, messages}`.
    SeedPlain,
    /// `{metadata, messages}` with messages in parts form.
    Metadata,
    /// The original's `ExportedSession` v1 with flat `content` messages.
    LegacyFlat,
}

/// Why a body is not an importable session.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BundleError {
    /// Not JSON, or nested too deep, or truncated.
    #[error("not a session bundle: invalid JSON ({0})")]
    Json(String),
    /// A newer or unknown version.
    #[error("bundle version {0} is not supported (this freecode reads version {BUNDLE_VERSION})")]
    Version(u64),
    /// A required part is missing or has the wrong type.
    #[error("not a session bundle: {0}")]
    Shape(String),
    /// A message failed validation.
    #[error("invalid message {index}: {reason}")]
    Message {
        /// Position in `messages`.
        index: usize,
        /// What is wrong.
        reason: String,
    },
    /// More items than allowed.
    #[error("bundle too large: {what} {count} > {max}")]
    TooMany {
        /// What was counted.
        what: &'static str,
        /// How many there were.
        count: usize,
        /// The bound.
        max: usize,
    },
    /// The JSON of a bundle is larger than the bundle limit.
    #[error("bundle is {size} bytes of JSON, more than the {max}-byte bundle limit")]
    TooBig {
        /// Its size, bytes.
        size: u64,
        /// The limit, bytes.
        max: u64,
    },
    /// The declared counts disagree with the contents (truncated or tampered plain bundle).
    #[error("bundle counts disagree with its contents: {0}")]
    Counts(String),
}

/// Parses and validates an imported body; see the module docs for the accepted shapes.
pub fn parse_bundle(bytes: &[u8]) -> Result<(Bundle, SourceShape), BundleError> {
    let values = count_json_values(bytes);
    if values > MAX_JSON_VALUES {
        return Err(BundleError::TooMany {
            what: "JSON values",
            count: values,
            max: MAX_JSON_VALUES,
        });
    }
    // serde_json refuses nesting deeper than 128, which stops depth bombs; width is bounded by
    // the caller's byte limit.
    // The original's `JSON.stringify` may have written lone surrogates (a string cut inside
    // an emoji): read as U+FFFD, as from its logs.
    let v: Value = crate::json::from_slice_lossy(bytes)
        .map(|l| l.value)
        .map_err(|e| BundleError::Json(e.to_string()))?;
    let Value::Object(mut obj) = v else {
        return Err(BundleError::Shape("the body is not a JSON object".into()));
    };
    let shape = if obj.get("format").and_then(Value::as_str) == Some(BUNDLE_FORMAT) {
        SourceShape::Bundle
    } else if obj.contains_key("format") {
        return Err(BundleError::Shape(format!(
            "unknown format {}",
            obj.get("format").map(Value::to_string).unwrap_or_default()
        )));
    } else if obj.contains_key("meta") {
        SourceShape::SeedPlain
    } else if obj.contains_key("metadata") {
        let flat = obj
            .get("messages")
            .and_then(Value::as_array)
            .is_some_and(|ms| ms.iter().any(|m| m.get("parts").is_none()));
        if flat {
            SourceShape::LegacyFlat
        } else {
            SourceShape::Metadata
        }
    } else {
        return Err(BundleError::Shape(
            "expected a bundle, {meta, messages} or {metadata, messages}".into(),
        ));
    };
    if shape == SourceShape::Bundle {
        let version = obj.get("version").and_then(Value::as_u64).unwrap_or(0);
        if version != BUNDLE_VERSION {
            return Err(BundleError::Version(version));
        }
    } else if shape == SourceShape::LegacyFlat
        && let Some(v) = obj.get("version").and_then(Value::as_u64)
        && v != 1
    {
        return Err(BundleError::Version(v));
    }

    let meta_value = obj
        .remove(if obj.contains_key("meta") {
            "meta"
        } else {
            "metadata"
        })
        .ok_or_else(|| BundleError::Shape("missing meta".into()))?;
    let meta = parse_meta(meta_value)?;
    let Some(Value::Array(raw_messages)) = obj.remove("messages") else {
        return Err(BundleError::Shape("messages must be an array".into()));
    };
    bound("messages", raw_messages.len(), MAX_MESSAGES)?;
    let mut messages = Vec::with_capacity(raw_messages.len());
    for (index, m) in raw_messages.into_iter().enumerate() {
        let msg = if shape == SourceShape::LegacyFlat {
            flat_message(m)
        } else {
            serde_json::from_value::<StoredMessage>(m).map_err(|e| e.to_string())
        }
        .map_err(|reason| BundleError::Message { index, reason })?;
        validate_message(&msg).map_err(|reason| BundleError::Message { index, reason })?;
        messages.push(msg);
    }

    let exported_at = obj.get("exportedAt").and_then(Value::as_i64).unwrap_or(0);
    let mut bundle = Bundle::new(meta, messages, exported_at);
    bundle.expires_at = obj.get("expiresAt").and_then(Value::as_i64);
    if let Some(s) = obj.remove("summaries") {
        bundle.summaries =
            serde_json::from_value(s).map_err(|e| BundleError::Shape(format!("summaries: {e}")))?;
    }
    if let Some(r) = obj.remove("rollout").filter(|r| !r.is_null()) {
        let Value::Array(events) = r else {
            return Err(BundleError::Shape("rollout must be an array".into()));
        };
        bound("rollout events", events.len(), MAX_EVENTS)?;
        if let Some(i) = events.iter().position(|e| !e.is_object()) {
            return Err(BundleError::Shape(format!(
                "rollout event {i} is not an object"
            )));
        }
        bundle.rollout = Some(events);
    }
    if let Some(m) = obj.remove("memories").filter(|m| !m.is_null()) {
        let memories: Vec<MemoryEntry> =
            serde_json::from_value(m).map_err(|e| BundleError::Shape(format!("memories: {e}")))?;
        bound("memories", memories.len(), MAX_MEMORIES)?;
        for m in &memories {
            if !valid_memory_name(&m.name) {
                return Err(BundleError::Shape(format!(
                    "memory name {:?} is not [A-Za-z0-9._-]{{1,128}}",
                    m.name
                )));
            }
            if !matches!(
                m.kind.as_str(),
                "user" | "feedback" | "project" | "reference"
            ) {
                return Err(BundleError::Shape(format!(
                    "memory {:?} has unknown type {:?}",
                    m.name, m.kind
                )));
            }
        }
        bundle.memories = Some(memories);
    }
    if let Some(r) = obj.remove("redactions") {
        bundle.redactions = serde_json::from_value(r).unwrap_or_default();
    }
    bundle.recount();
    if shape == SourceShape::Bundle {
        let declared: Counts = obj
            .remove("counts")
            .map(serde_json::from_value)
            .transpose()
            .map_err(|e| BundleError::Shape(format!("counts: {e}")))?
            .ok_or_else(|| BundleError::Shape("missing counts".into()))?;
        if declared != bundle.counts {
            return Err(BundleError::Counts(format!(
                "declares {} messages, {} events, {} memories; holds {}, {}, {}",
                declared.messages,
                declared.events,
                declared.memories,
                bundle.counts.messages,
                bundle.counts.events,
                bundle.counts.memories
            )));
        }
    }
    Ok((bundle, shape))
}

/// Checks the JSON of a bundle against what [`parse_bundle`] and its callers accept: at most
/// `max_bytes` bytes (the caller's limit, at most [`MAX_BUNDLE_BYTES`]) and [`MAX_JSON_VALUES`]
/// values. Export runs it on what it writes, so that import never refuses what export made.
pub fn check_size(json: &[u8], max_bytes: u64) -> Result<(), BundleError> {
    let size = json.len() as u64;
    if size > max_bytes {
        return Err(BundleError::TooBig {
            size,
            max: max_bytes,
        });
    }
    let values = count_json_values(json);
    if values > MAX_JSON_VALUES {
        return Err(BundleError::TooMany {
            what: "JSON values",
            count: values,
            max: MAX_JSON_VALUES,
        });
    }
    Ok(())
}

/// Commas and opening brackets outside strings: about the number of values in the document.
/// Additive over pieces cut outside strings (a streamed export counts piece by piece).
pub fn count_json_values(bytes: &[u8]) -> usize {
    let mut n = 0;
    let mut in_string = false;
    let mut escaped = false;
    for &b in bytes {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
        } else {
            match b {
                b'"' => in_string = true,
                b',' | b'[' | b'{' => n += 1,
                _ => {}
            }
        }
    }
    n
}

fn bound(what: &'static str, count: usize, max: usize) -> Result<(), BundleError> {
    if count > max {
        return Err(BundleError::TooMany { what, count, max });
    }
    Ok(())
}

/// Whether `name` may become a memory file stem.
pub fn valid_memory_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

fn parse_meta(v: Value) -> Result<SessionMeta, BundleError> {
    let Value::Object(mut o) = v else {
        return Err(BundleError::Shape("meta must be an object".into()));
    };
    for key in ["title", "projectPath", "provider"] {
        match o.get(key) {
            Some(Value::String(_)) => {}
            Some(Value::Null) | None if key == "title" => {
                o.insert(key.into(), Value::String(String::new()));
            }
            _ => {
                return Err(BundleError::Shape(format!("meta.{key} must be a string")));
            }
        }
    }
    // What the importer replaces anyway may be missing or odd in a foreign body.
    o.entry("id")
        .or_insert_with(|| Value::String(String::new()));
    o.entry("status")
        .or_insert_with(|| Value::String("active".into()));
    for key in ["createdAt", "updatedAt", "lastTurnAt", "turnCount"] {
        let ok = o.get(key).is_some_and(|v| v.as_f64().is_some());
        if !ok {
            o.insert(key.into(), Value::from(0));
        }
    }
    serde_json::from_value(Value::Object(o)).map_err(|e| BundleError::Shape(format!("meta: {e}")))
}

fn flat_message(v: Value) -> Result<StoredMessage, String> {
    let id = v.get("id").and_then(Value::as_str).unwrap_or("").to_owned();
    let role = match v.get("role").and_then(Value::as_str) {
        Some("user") => Role::User,
        Some("assistant") => Role::Assistant,
        other => return Err(format!("role {other:?} is not user or assistant")),
    };
    let content = v
        .get("content")
        .and_then(Value::as_str)
        .ok_or("content must be a string")?;
    let timestamp = v.get("timestamp").and_then(Value::as_i64).unwrap_or(0);
    Ok(StoredMessage::new(
        id,
        role,
        vec![Part::text(content)],
        timestamp,
    ))
}

fn validate_message(m: &StoredMessage) -> Result<(), String> {
    if let Role::Other(r) = &m.role {
        return Err(format!("role {r:?} is not user or assistant"));
    }
    if m.id.len() > 256 {
        return Err("id longer than 256 bytes".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn meta() -> SessionMeta {
        SessionMeta::new(
            &crate::SessionId::new("abc").unwrap(),
            "t".into(),
            "/p".into(),
            "openai".into(),
            Some("gpt".into()),
            1,
        )
    }

    #[test]
    fn bundle_round_trips_and_checks_counts() {
        let b = Bundle::new(
            meta(),
            vec![StoredMessage::new(
                "m1",
                Role::User,
                vec![Part::text("hi")],
                5,
            )],
            9,
        );
        let bytes = b.to_json();
        let (back, shape) = parse_bundle(&bytes).unwrap();
        assert_eq!(shape, SourceShape::Bundle);
        assert_eq!(back, b);
        // The original's importers read `metadata` (and parts-form messages): a copy of `meta`.
        let v: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(v["metadata"], v["meta"]);
        assert_eq!(v["metadata"]["title"], b.meta.title.as_str());
        assert_eq!(v["messages"][0]["parts"][0]["content"], "hi");
        let tampered = String::from_utf8(bytes)
            .unwrap()
            .replace("\"messages\":1", "\"messages\":2");
        assert!(matches!(
            parse_bundle(tampered.as_bytes()),
            Err(BundleError::Counts(_))
        ));
    }

    #[test]
    fn an_originals_bundle_with_a_lone_surrogate_imports() {
        let body = br#"{"metadata":{"id":"s1","title":"cut \ud83d","projectPath":"/p","provider":"openai","status":"active","createdAt":1,"updatedAt":1,"lastTurnAt":1,"turnCount":1},"messages":[{"id":"m1","role":"user","parts":[{"type":"text","content":"x\ud83d"}],"timestamp":1}]}"#;
        let (b, shape) = parse_bundle(body).unwrap();
        assert_eq!(shape, SourceShape::Metadata);
        assert_eq!(b.meta.title, "cut \u{FFFD}");
        assert_eq!(b.messages[0].parts[0].text_content(), Some("x\u{FFFD}"));
    }

    #[test]
    fn versions_and_shapes() {
        let mut v: Value =
            serde_json::from_slice(&Bundle::new(meta(), vec![], 0).to_json()).unwrap();
        v["version"] = 2.into();
        assert_eq!(
            parse_bundle(&serde_json::to_vec(&v).unwrap()),
            Err(BundleError::Version(2))
        );
        assert!(matches!(parse_bundle(b"[1]"), Err(BundleError::Shape(_))));
        assert!(matches!(
            parse_bundle(b"{\"meta\":{"),
            Err(BundleError::Json(_))
        ));
        let wide = format!("[{}0]", "0,".repeat(MAX_JSON_VALUES));
        assert!(matches!(
            parse_bundle(wide.as_bytes()),
            Err(BundleError::TooMany {
                what: "JSON values",
                ..
            })
        ));
        assert_eq!(count_json_values(br#"{"a":"x,[{\"","b":[1,2]}"#), 4);
        let deep = "[".repeat(10_000);
        assert!(matches!(
            parse_bundle(deep.as_bytes()),
            Err(BundleError::Json(_))
        ));
        let bad_role = br#"{"meta":{"title":"t","projectPath":"/p","provider":"x"},"messages":[{"id":"1","role":"system","parts":[],"timestamp":1}]}"#;
        assert!(matches!(
            parse_bundle(bad_role),
            Err(BundleError::Message { index: 0, .. })
        ));
    }

    #[test]
    fn check_size_refuses_what_import_would() {
        let json = Bundle::new(meta(), vec![], 0).to_json();
        let n = json.len() as u64;
        assert_eq!(check_size(&json, n), Ok(()));
        assert_eq!(
            check_size(&json, n - 1),
            Err(BundleError::TooBig {
                size: n,
                max: n - 1
            })
        );
        let wide = format!("[{}0]", "0,".repeat(MAX_JSON_VALUES));
        assert!(matches!(
            check_size(wide.as_bytes(), MAX_BUNDLE_BYTES),
            Err(BundleError::TooMany { .. })
        ));
    }

    #[test]
    fn legacy_flat_messages_become_text_parts() {
        let body = br#"{"version":1,"metadata":{"id":"x","title":"T","projectPath":"/p","provider":"openai","status":"active","createdAt":1,"updatedAt":2,"lastTurnAt":1,"turnCount":0},"messages":[{"id":"a","role":"user","content":"hello","timestamp":3}],"memories":[],"exportedAt":4}"#;
        let (b, shape) = parse_bundle(body).unwrap();
        assert_eq!(shape, SourceShape::LegacyFlat);
        assert_eq!(b.messages[0].text(), "hello");
        assert_eq!(b.meta.title, "T");
    }

    #[test]
    fn clamp_times_brings_every_future_time_back_to_now() {
        let body = br#"{"format":"freecode.session-bundle","version":1,"exportedAt":4102444800000,
            "meta":{"id":"x","title":"T","projectPath":"/victim","provider":"openai","status":"active",
              "createdAt":1,"updatedAt":4102444800000,"lastTurnAt":4102444800000,"turnCount":1},
            "messages":[{"id":"a","role":"user","parts":[],"timestamp":5},
                        {"id":"b","role":"assistant","parts":[],"timestamp":4102444800000}],
            "summaries":[{"id":"s","createdAt":4102444800000,"originalMessageCount":1,
              "originalTokenCount":1,"summaryTokenCount":1,"content":"c"}],
            "rollout":[{"type":"turn.started","timestamp":7},{"type":"turn.started","timestamp":4102444800000},
                       {"type":"turn.started","timestamp":1e300},{"type":"x"}],
            "memories":[{"name":"n","type":"user","createdAt":3.5,"updatedAt":4102444800000.5}],
            "counts":{"messages":2,"events":4,"memories":1}}"#;
        let (mut b, _) = parse_bundle(body).unwrap();
        let now = 1_768_000_000_000;
        b.clamp_times(now);
        let m = &b.meta;
        assert_eq!((m.created_at, m.updated_at, m.last_turn_at), (1, now, now));
        assert_eq!(b.exported_at, now);
        let ts: Vec<i64> = b.messages.iter().map(|m| m.timestamp).collect();
        assert_eq!(ts, [5, now]);
        assert_eq!(b.summaries[0].created_at, now);
        let ev: Vec<Option<i64>> = b
            .rollout
            .as_ref()
            .unwrap()
            .iter()
            .map(|e| e.get("timestamp").and_then(Value::as_i64))
            .collect();
        assert_eq!(ev, [Some(7), Some(now), Some(now), None]);
        let mem = &b.memories.as_ref().unwrap()[0];
        assert_eq!(
            (mem.created_at, mem.updated_at),
            (Some(3.5), Some(now as f64))
        );
    }
}
