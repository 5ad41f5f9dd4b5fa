//! Export and import of whole sessions as [`Bundle`]s (SPEC §9.3, §15, §19.5–8, 19, 25).
//!
//! - [`export_bundle`] gathers a session's meta, messages, compaction summaries and, on request,
//!   its rollout events and the project's memory entries, then redacts known secret formats
//!   from every string in it ([`freecode_core::redact`]); the bundle lists what was redacted
//!   and where, never the value.
//! - [`import_bundle`] writes a validated bundle as a **new** session (fresh id, new message ids
//!   where an id is missing or repeated, `importedFrom` in the meta) all or nothing, and never
//!   overwrites anything: memory entries are imported only when asked, and an entry whose name
//!   exists locally is skipped, not replaced (§19.6).
//! - Imported data is untrusted: the session goes under the project the importer names
//!   ([`ImportOptions::project_path`]), the sender's path is kept only as provenance
//!   (`importedFrom.projectPath`), and every time in the bundle later than the import is
//!   clamped to the import time ([`Bundle::clamp_times`]).
//! - The local variant of §15 lives under `remote/`: [`save_to_remote`] writes a bundle file
//!   there (0600, atomically); import reads any file.
//! - One size limit on both sides ([`crate::codec::max_bundle_bytes`]): [`bundle_json`] is the
//!   bundle's JSON as import will read it, refused (naming the limit and the ways past it) when
//!   import would refuse it. A file whose name ends in `.zst` is written zstd-compressed.

use std::path::{Path, PathBuf};

use freecode_core::bundle::{Bundle, MemoryEntry, RedactionNote, valid_memory_name};
use freecode_core::memory::CompactionMemory;
use freecode_core::meta::IMPORTED_FROM;
use freecode_core::redact::{self, Redactor};
use freecode_core::{SessionId, SessionMeta, SessionStatus};
use serde_json::Value;

use crate::error::{IoContext, StoreError};
use crate::fsutil::{self, create_dir_private, write_atomic};
use crate::home::Home;
use crate::session::{NewSession, SessionStore};

/// Why an export or import failed.
#[derive(Debug, thiserror::Error)]
pub enum ShareError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The body is not an importable session.
    #[error(transparent)]
    Bundle(#[from] freecode_core::bundle::BundleError),
    /// The bundle could not be redacted; nothing is exported.
    #[error("cannot redact the bundle, nothing exported: {0}")]
    Redaction(String),
    /// The bundle's JSON is larger than import accepts; nothing is written or sent.
    #[error(
        "the bundle of session {id} is {size} bytes of JSON, more than the {limit}-byte limit \
         of a bundle (import would refuse it); nothing was written or sent. Ways past it: \
         {ways}"
    )]
    TooLarge {
        /// The session.
        id: String,
        /// The JSON's size, bytes.
        size: u64,
        /// The limit, bytes.
        limit: u64,
        /// What the user can do.
        ways: String,
    },
    /// Compressing or decompressing failed.
    #[error(transparent)]
    Codec(#[from] crate::codec::CodecError),
    /// A deleted session is not exported.
    #[error("session {0} is deleted; restore it before exporting")]
    Deleted(String),
}

/// What to put in an export.
#[derive(Debug, Clone, Default)]
pub struct ExportOptions {
    /// Include the rollout log's events.
    pub include_rollout: bool,
    /// Include the project's memory entries.
    pub include_memories: bool,
    /// Skip redaction (only for a file that stays on this machine).
    pub no_redact: bool,
    /// When the share will expire, ms.
    pub expires_at: Option<i64>,
}

/// Builds the bundle of session `id`, redacted unless told otherwise.
pub fn export_bundle(
    store: &SessionStore,
    id: &SessionId,
    opts: &ExportOptions,
) -> Result<Bundle, ShareError> {
    let meta = store.meta(id)?;
    if meta.is_deleted() {
        return Err(ShareError::Deleted(id.to_string()));
    }
    let messages = store.messages(id)?.messages;
    let mut bundle = Bundle::new(meta, messages, crate::now_ms());
    gather_rest(store, id, opts, &mut bundle)?;
    if !opts.no_redact {
        let redactor = crate::redaction::for_home(store.home())?;
        bundle.redactions = redact_bundle(redactor.get(), &mut bundle)?;
    }
    bundle.recount();
    Ok(bundle)
}

/// Everything of a bundle but the meta and the messages: expiry, summaries, and on request
/// the rollout events and the project's memory entries.
fn gather_rest(
    store: &SessionStore,
    id: &SessionId,
    opts: &ExportOptions,
    bundle: &mut Bundle,
) -> Result<(), ShareError> {
    let meta = bundle.meta.clone();
    bundle.expires_at = opts.expires_at;
    if let Some(mem) = store.compaction_memory(id)? {
        bundle.summaries = mem.summaries;
    }
    if opts.include_rollout {
        let path = crate::rollout::events_path(store.home(), id);
        let mut events = Vec::new();
        if let Some(bytes) = fsutil::read_optional(&path)? {
            for line in bytes.split(|&b| b == b'\n') {
                if let Ok(v @ Value::Object(_)) = serde_json::from_slice::<Value>(line) {
                    events.push(v);
                }
            }
        }
        bundle.rollout = Some(events);
    }
    if opts.include_memories {
        bundle.memories = Some(project_memories(store.home(), &meta.project_path)?);
    }
    Ok(())
}

/// Writes the bundle of session `id` into `out` as it reads the session, the same bytes as
/// [`bundle_json`] of [`export_bundle`] (plus the final newline a bundle file ends with) in the
/// memory of a block of messages and the largest message: the meta and everything but the
/// messages are gathered and redacted first ([`redact_bundle`] on a bundle without messages),
/// then each message is read, redacted as a JSON value (every string of every key, known or
/// unknown, as [`redact_bundle`] does) and written, then the rest with the counts and the
/// redactions (in the order [`redact_bundle`] lists them: the meta's, the messages', the
/// rest's). The bundle limit is checked while writing: past it nothing more is written and
/// [`ShareError::TooLarge`] names the size the whole bundle would have had; the caller throws
/// away what was written (a temp, see [`save_to_remote_streamed`]). Returns the bundle
/// without its messages, with its counts and redactions.
pub fn stream_bundle(
    store: &SessionStore,
    id: &SessionId,
    opts: &ExportOptions,
    out: &mut dyn std::io::Write,
) -> Result<Bundle, ShareError> {
    stream_bundle_ended(store, id, opts, out, true)
}

/// [`stream_bundle`], with the final newline or without it (what a compressed file holds).
fn stream_bundle_ended(
    store: &SessionStore,
    id: &SessionId,
    opts: &ExportOptions,
    out: &mut dyn std::io::Write,
    newline: bool,
) -> Result<Bundle, ShareError> {
    let meta = store.meta(id)?;
    if meta.is_deleted() {
        return Err(ShareError::Deleted(id.to_string()));
    }
    let mut head = Bundle::new(meta, Vec::new(), crate::now_ms());
    gather_rest(store, id, opts, &mut head)?;
    let redactor = crate::redaction::for_home(store.home())?;
    let ser = |e: serde_json::Error| ShareError::Redaction(e.to_string());
    let head_notes = if opts.no_redact {
        Vec::new()
    } else {
        // A title cut from a prompt is cut again from it once redacted: the first block of
        // messages holds the prompt (read only for a cut title).
        let first = if head.meta.title.ends_with('…')
            && let Some(block) = store.message_blocks(id)?.next_block()?
        {
            serde_json::to_value(&block.items).map_err(ser)?
        } else {
            Value::Null
        };
        redact_bundle_from(redactor.get(), &mut head, Some(&first))?
    };
    // The meta comes first in the walk; then the messages; then summaries, rollout, memories.
    let split = head_notes
        .iter()
        .position(|n| !is_meta_location(&n.location))
        .unwrap_or(head_notes.len());
    let mut needle = b"\"meta\":".to_vec();
    needle.extend(serde_json::to_vec(&head.meta).map_err(ser)?);
    needle.extend_from_slice(b",\"messages\":[");
    let first = head.to_wire_json().map_err(ser)?;
    let at = memchr::memmem::find(&first, &needle)
        .ok_or_else(|| ShareError::Redaction("the bundle has no messages array".into()))?
        + needle.len();
    let mut sink = LimitedSink::new(out);
    sink.put(&first[..at])?;
    drop(first);

    let mut notes = Vec::new();
    let mut count = 0u64;
    let mut blocks = store.message_blocks(id)?;
    let mut line = Vec::new();
    while let Some(block) = blocks.next_block()? {
        for m in block.items {
            line.clear();
            if count > 0 {
                line.push(b',');
            }
            if opts.no_redact {
                serde_json::to_writer(&mut line, &m).map_err(ser)?;
            } else {
                let mut v = serde_json::to_value(&m).map_err(ser)?;
                let before = notes.len();
                let mut path = vec![Seg::Key("messages"), Seg::Index(count as usize)];
                redact_value(redactor.get(), &mut v, &mut path, &mut notes);
                drop(path);
                if notes.len() == before {
                    serde_json::to_writer(&mut line, &m).map_err(ser)?;
                } else {
                    // As redact_bundle does: back through the typed message.
                    let m: freecode_core::StoredMessage = serde_json::from_value(v).map_err(ser)?;
                    serde_json::to_writer(&mut line, &m).map_err(ser)?;
                }
            }
            sink.put(&line)?;
            count += 1;
        }
    }
    head.recount();
    head.counts.messages = count;
    let rest = head_notes[split..].to_vec();
    head.redactions = head_notes;
    head.redactions.truncate(split);
    head.redactions.extend(notes);
    head.redactions.extend(rest);
    let last = head.to_wire_json().map_err(ser)?;
    let at = memchr::memmem::find(&last, &needle)
        .ok_or_else(|| ShareError::Redaction("the bundle has no messages array".into()))?
        + needle.len();
    sink.put(&last[at..])?;
    if let Some(e) = sink.over() {
        return Err(size_error(&head, e));
    }
    if newline {
        // Not part of the JSON the limit is on: a bundle of exactly the limit keeps it.
        sink.write_uncounted(b"\n")?;
    }
    Ok(head)
}

/// Whether a redaction's location is inside the meta.
fn is_meta_location(location: &str) -> bool {
    location
        .strip_prefix("meta")
        .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
}

/// A writer that counts the bundle's bytes and values ([`freecode_core::bundle::check_size`]
/// piece by piece) and stops writing once past the limit.
struct LimitedSink<'a> {
    out: &'a mut dyn std::io::Write,
    size: u64,
    values: usize,
    limit: u64,
}

impl<'a> LimitedSink<'a> {
    fn new(out: &'a mut dyn std::io::Write) -> Self {
        Self {
            out,
            size: 0,
            values: 0,
            limit: crate::codec::max_bundle_bytes(),
        }
    }

    fn put(&mut self, bytes: &[u8]) -> Result<(), ShareError> {
        self.size += bytes.len() as u64;
        self.values += freecode_core::bundle::count_json_values(bytes);
        if self.over().is_none() {
            self.out.write_all(bytes).map_err(|e| StoreError::Io {
                op: "write",
                path: PathBuf::from("the bundle"),
                source: e,
            })?;
        }
        Ok(())
    }

    fn write_uncounted(&mut self, bytes: &[u8]) -> Result<(), ShareError> {
        self.out.write_all(bytes).map_err(|e| StoreError::Io {
            op: "write",
            path: PathBuf::from("the bundle"),
            source: e,
        })?;
        Ok(())
    }

    fn over(&self) -> Option<freecode_core::bundle::BundleError> {
        use freecode_core::bundle::{BundleError, MAX_JSON_VALUES};
        if self.size > self.limit {
            Some(BundleError::TooBig {
                size: self.size,
                max: self.limit,
            })
        } else if self.values > MAX_JSON_VALUES {
            Some(BundleError::TooMany {
                what: "JSON values",
                count: self.values,
                max: MAX_JSON_VALUES,
            })
        } else {
            None
        }
    }
}

/// Writes the bundle of `id` to `remote/<id>.json` (or the user's `path`) as
/// [`save_to_remote`] of [`export_bundle`] would, the same bytes, but streamed
/// ([`stream_bundle`]) into the temp of an atomic replace: the session is never held in memory
/// whole. A bundle past the limit leaves nothing behind. A name ending in `.zst` gets one zstd
/// frame of the same JSON (without the newline), compressed as it is written.
///
/// Standard output (`-`), a FIFO, a terminal or a device cannot take bytes back, so the bundle
/// is streamed into an anonymous temp file first (unlinked at creation, never a path in the
/// home) and copied to the output only once it is whole and within the limit: nothing is
/// written there for a bundle past it. The path returned is `-` for standard output. Returns
/// `None` only when the output cannot be classified as one of these (never today).
pub fn save_to_remote_streamed(
    store: &SessionStore,
    id: &SessionId,
    opts: &ExportOptions,
    path: Option<&Path>,
) -> Result<Option<(PathBuf, Bundle)>, ShareError> {
    let zst = path.is_some_and(|p| p.extension().is_some_and(|x| x == "zst"));
    let (replace, shown) = match path {
        Some(p) => match fsutil::user_target(p)? {
            fsutil::UserTarget::File { replace, shown } => (replace, shown),
            fsutil::UserTarget::Stdout => {
                let head = spool_then_copy(store, id, opts, zst, None)?;
                return Ok(Some((PathBuf::from("-"), head)));
            }
            fsutil::UserTarget::Stream(p) => {
                let head = spool_then_copy(store, id, opts, zst, Some(&p))?;
                return Ok(Some((p, head)));
            }
        },
        None => {
            let home = store.home();
            let p = home.remote_dir().join(format!("{}.json", id.as_str()));
            create_dir_private(&home.remote_dir())?;
            (p.clone(), p)
        }
    };
    let mut head = None;
    fsutil::write_atomic_with(&replace, true, |out| {
        // `.zst`: one zstd frame, compressed as it is written: the JSON without its newline,
        // as `save_to_remote` compresses it.
        head = Some(stream_encoded(store, id, opts, zst, out)?);
        Ok::<(), ShareError>(())
    })?;
    let head = head.ok_or_else(|| ShareError::Redaction("nothing was written".into()))?;
    Ok(Some((shown, head)))
}

/// Writes the bundle (zstd-compressed when `zst`) into `out`, as [`save_to_remote_streamed`]
/// writes it into a file.
fn stream_encoded(
    store: &SessionStore,
    id: &SessionId,
    opts: &ExportOptions,
    zst: bool,
    out: &mut dyn std::io::Write,
) -> Result<Bundle, ShareError> {
    if !zst {
        return stream_bundle(store, id, opts, out);
    }
    let io =
        |e: std::io::Error| ShareError::Codec(crate::codec::CodecError::Compress(e.to_string()));
    let mut enc = zstd::stream::write::Encoder::new(out, crate::codec::LEVEL).map_err(io)?;
    let head = stream_bundle_ended(store, id, opts, &mut enc, false)?;
    enc.finish().map_err(io)?;
    Ok(head)
}

/// The bundle streamed into an anonymous temp file, then — whole and within the limit —
/// copied to standard output (`to` is `None`) or into the stream `to` (a FIFO, terminal or
/// device: opened for writing without creating or truncating, as [`fsutil::write_user_file`]
/// opens it).
fn spool_then_copy(
    store: &SessionStore,
    id: &SessionId,
    opts: &ExportOptions,
    zst: bool,
    to: Option<&Path>,
) -> Result<Bundle, ShareError> {
    use std::io::{Seek, Write};
    let shown = to.map_or_else(|| PathBuf::from("standard output"), Path::to_path_buf);
    let temp_err = |op: &'static str| {
        move |e: std::io::Error| StoreError::Io {
            op,
            path: PathBuf::from("the export's temp file"),
            source: e,
        }
    };
    let mut temp = tempfile::tempfile().map_err(temp_err("create"))?;
    let head = {
        let mut w = std::io::BufWriter::with_capacity(1 << 20, &mut temp);
        let head = stream_encoded(store, id, opts, zst, &mut w)?;
        w.flush().map_err(temp_err("write"))?;
        head
    };
    temp.rewind().map_err(temp_err("seek"))?;
    fn copy(from: &mut std::fs::File, out: &mut dyn Write) -> std::io::Result<()> {
        std::io::copy(from, out).and_then(|_| out.flush())
    }
    match to {
        None => copy(&mut temp, &mut std::io::stdout().lock()),
        Some(p) => std::fs::OpenOptions::new()
            .write(true)
            .open(p)
            .and_then(|mut f| copy(&mut temp, &mut f)),
    }
    .map_err(|e| StoreError::Io {
        op: "write",
        path: shown,
        source: e,
    })?;
    Ok(head)
}

/// Replaces every known-format secret in every string of the bundle — known fields and the
/// unknown keys kept from newer writers alike (reasoning parts, extra meta keys) — by a
/// placeholder, and returns what was replaced, where.
/// Fails closed: a bundle that cannot be walked is not exported.
pub fn redact_bundle(r: &Redactor, b: &mut Bundle) -> Result<Vec<RedactionNote>, ShareError> {
    redact_bundle_from(r, b, None)
}

/// Session `meta` as a page a person may save or attach shows it: redacted as an export
/// redacts its meta (a title cut from the prompt cut again from it once redacted: `first` is
/// the session's first block of messages, where the prompt is). How many secrets it held.
pub fn redact_meta(
    r: &Redactor,
    meta: &SessionMeta,
    first: &[freecode_core::StoredMessage],
) -> Result<(SessionMeta, usize), ShareError> {
    let ser = |e: serde_json::Error| ShareError::Redaction(e.to_string());
    let mut b = Bundle::new(meta.clone(), Vec::new(), 0);
    let first = serde_json::to_value(first).map_err(ser)?;
    let notes = redact_bundle_from(r, &mut b, Some(&first))?;
    Ok((b.meta, notes.len()))
}

/// Message `m` as a page a person may save or attach shows it: every string of every key,
/// known or unknown, redacted as an export redacts it. How many secrets it held.
pub fn redact_message(
    r: &Redactor,
    m: freecode_core::StoredMessage,
) -> Result<(freecode_core::StoredMessage, usize), ShareError> {
    let ser = |e: serde_json::Error| ShareError::Redaction(e.to_string());
    let mut v = serde_json::to_value(&m).map_err(ser)?;
    let mut notes = Vec::new();
    redact_value(r, &mut v, &mut vec![Seg::Key("message")], &mut notes);
    if notes.is_empty() {
        return Ok((m, 0));
    }
    Ok((serde_json::from_value(v).map_err(ser)?, notes.len()))
}

/// [`redact_bundle`], a cut title looked for in `messages` (the first of a session streamed
/// apart from its bundle) rather than in the bundle's own.
fn redact_bundle_from(
    r: &Redactor,
    b: &mut Bundle,
    messages: Option<&Value>,
) -> Result<Vec<RedactionNote>, ShareError> {
    let mut tree = serde_json::to_value(&*b).map_err(|e| ShareError::Redaction(e.to_string()))?;
    let mut notes = Vec::new();
    redact_cut_title(r, &mut tree, messages, &mut notes);
    if let Value::Object(map) = &mut tree {
        let mut path = Vec::new();
        for (key, v) in map.iter_mut() {
            if !matches!(key.as_str(), "format" | "counts" | "redactions") {
                path.push(Seg::Key(key));
                redact_value(r, v, &mut path, &mut notes);
                path.pop();
            }
        }
    }
    *b =
        serde_json::from_value::<Bundle>(tree).map_err(|e| ShareError::Redaction(e.to_string()))?;
    Ok(notes)
}

/// A title cut from a longer text (`…` at its end: the first line of a prompt, cut to a length
/// by us or the agent it was imported from) is cut again from that text once the text is
/// redacted: a secret the cut went through would otherwise leave its first characters in the
/// title, which no rule matches any more. The text is the first line of a message string
/// holding the title's characters; a secret starting inside the title's length becomes its
/// placeholder whole, and is noted at `meta.title` (so `--dry-run` lists it). A title found in
/// no message (renamed by hand) is redacted as it stands, by the walk after this.
fn redact_cut_title(
    r: &Redactor,
    tree: &mut Value,
    messages: Option<&Value>,
    notes: &mut Vec<RedactionNote>,
) {
    let Some(title) = tree.pointer("/meta/title").and_then(Value::as_str) else {
        return;
    };
    let Some(body) = title.strip_suffix('…').filter(|b| !b.trim().is_empty()) else {
        return;
    };
    let Some(line) = messages
        .or_else(|| tree.get("messages"))
        .and_then(|m| first_line_with(m, body))
    else {
        return;
    };
    let findings = r.scan(&line);
    let within: Vec<_> = findings
        .into_iter()
        .filter(|f| f.start < body.len())
        .collect();
    if within.is_empty() {
        return;
    }
    let cut = within
        .iter()
        .map(|f| f.end)
        .fold(body.len(), usize::max)
        .min(line.len());
    let mut new = redact::apply(&line[..cut], &within).into_owned();
    if cut < line.trim_end().len() {
        new.push('…');
    }
    notes.extend(within.iter().map(|f| RedactionNote {
        kind: f.kind.name().to_owned(),
        location: "meta.title".to_owned(),
        preview: redact::preview(&line[f.range()]),
    }));
    if let Some(t) = tree.pointer_mut("/meta/title") {
        *t = Value::String(new);
    }
}

/// The rest of the line of the first string below `v` that holds `body`, from where it starts.
fn first_line_with(v: &Value, body: &str) -> Option<String> {
    match v {
        Value::String(s) => {
            let at = s.find(body)?;
            let rest = &s[at..];
            Some(rest.lines().next().unwrap_or(rest).to_owned())
        }
        Value::Array(items) => items.iter().find_map(|x| first_line_with(x, body)),
        Value::Object(map) => map.values().find_map(|x| first_line_with(x, body)),
        _ => None,
    }
}

/// One step of the path to a string: its location is only spelled out when it holds a secret.
enum Seg<'a> {
    Key(&'a str),
    Index(usize),
}

fn location(path: &[Seg<'_>]) -> String {
    let mut s = String::new();
    for seg in path {
        match seg {
            Seg::Key(k) if s.is_empty() => s.push_str(k),
            Seg::Key(k) => {
                s.push('.');
                s.push_str(k);
            }
            Seg::Index(i) => s.push_str(&format!("[{i}]")),
        }
    }
    s
}

fn redact_value<'a>(
    r: &Redactor,
    v: &'a mut Value,
    path: &mut Vec<Seg<'a>>,
    notes: &mut Vec<RedactionNote>,
) {
    match v {
        Value::String(s) => {
            let (out, findings) = r.redact(s);
            if findings.is_empty() {
                return;
            }
            let here = location(path);
            notes.extend(findings.iter().map(|f| RedactionNote {
                kind: f.kind.name().to_owned(),
                location: here.clone(),
                preview: redact::preview(&s[f.range()]),
            }));
            *s = out.into_owned();
        }
        Value::Array(items) => {
            for (i, x) in items.iter_mut().enumerate() {
                path.push(Seg::Index(i));
                redact_value(r, x, path, notes);
                path.pop();
            }
        }
        Value::Object(map) => {
            for (k, x) in map.iter_mut() {
                path.push(Seg::Key(k));
                redact_value(r, x, path, notes);
                path.pop();
            }
        }
        _ => {}
    }
}

/// Where an import came from, recorded in the new meta as `importedFrom`, and where it goes.
#[derive(Debug, Clone, Default)]
pub struct ImportOptions {
    /// The URL (without its key fragment) or file it came from.
    pub source: String,
    /// The local project the session belongs to (its `projectPath`, the agent's tools' root, and
    /// where memory entries go). Never taken from the bundle: the sender's path is provenance.
    pub project_path: String,
    /// Also write the bundle's memory entries into the project (never overwriting).
    pub with_memories: bool,
}

/// What an import wrote.
#[derive(Debug, Clone)]
pub struct Imported {
    /// The new session.
    pub id: SessionId,
    /// Its meta.
    pub meta: SessionMeta,
    /// Messages written.
    pub messages: usize,
    /// Message ids replaced because they were missing or repeated.
    pub renumbered: usize,
    /// Rollout events written.
    pub events: usize,
    /// Memory entries written, as paths.
    pub memories_written: Vec<PathBuf>,
    /// Memory entries not written: their name exists locally, or memories were not asked for.
    pub memories_skipped: Vec<String>,
}

/// Writes `bundle` as a new session; see the module docs.
pub fn import_bundle(
    store: &SessionStore,
    mut bundle: Bundle,
    opts: &ImportOptions,
) -> Result<Imported, ShareError> {
    let home = store.home().clone();
    let now = crate::now_ms();
    bundle.clamp_times(now);
    let mut seen = std::collections::HashSet::new();
    let mut renumbered = 0;
    for m in &mut bundle.messages {
        if m.id.is_empty() || !seen.insert(m.id.clone()) {
            m.id = uuid::Uuid::new_v4().to_string();
            seen.insert(m.id.clone());
            renumbered += 1;
        }
    }
    let src = bundle.meta.clone();
    let title = if src.title.ends_with(" (imported)") {
        src.title.clone()
    } else {
        format!("{} (imported)", src.title)
    };
    let new = NewSession {
        title,
        project_path: opts.project_path.clone(),
        provider: src.provider.clone(),
        model: src.model.clone(),
    };
    let summaries = std::mem::take(&mut bundle.summaries);
    let rollout = bundle.rollout.take().unwrap_or_default();
    let event_count = rollout.len();
    let extra = |id: &SessionId| {
        let mut files = Vec::new();
        if !summaries.is_empty() {
            let mut mem = CompactionMemory::new(id.as_str());
            mem.total_compactions = summaries.len() as u64;
            mem.last_compaction_at = summaries.last().map(|s| s.created_at);
            mem.summaries = summaries.clone();
            files.push((
                home.memory_file(id),
                serde_json::to_vec_pretty(&mem).unwrap_or_default(),
            ));
        }
        if !rollout.is_empty() {
            let mut log = Vec::new();
            for (i, e) in rollout.iter().enumerate() {
                let mut e = e.clone();
                if let Some(o) = e.as_object_mut() {
                    o.insert("aggregateID".into(), Value::String(id.to_string()));
                    // The new log's own sequence: unique and increasing whatever was sent.
                    o.insert("seq".into(), Value::from(i as u64 + 1));
                }
                if let Ok(line) = serde_json::to_vec(&e) {
                    log.extend_from_slice(&line);
                    log.push(b'\n');
                }
            }
            files.push((crate::rollout::events_path(&home, id), log));
        }
        files
    };
    let message_count = bundle.messages.len();
    let id = store.create_populated(new, &bundle.messages, &extra, |m| {
        m.status = SessionStatus::Active;
        m.turn_count = src.turn_count;
        // Clamped above: never after the import.
        if src.last_turn_at > 0 {
            m.last_turn_at = src.last_turn_at;
        }
        m.aggregated_token_count = src.aggregated_token_count;
        let mut from = serde_json::Map::new();
        if !src.id.is_empty() {
            from.insert("sessionId".into(), Value::String(src.id.clone()));
        }
        if !opts.source.is_empty() {
            from.insert("source".into(), Value::String(opts.source.clone()));
        }
        // The sender's project, as provenance only; its presence also marks an import whose
        // `projectPath` is the importer's (see `SessionMeta::project_path_from_bundle`).
        from.insert(
            "projectPath".into(),
            Value::String(src.project_path.clone()),
        );
        if bundle.exported_at > 0 {
            from.insert("exportedAt".into(), Value::from(bundle.exported_at));
        }
        from.insert("importedAt".into(), Value::from(now));
        m.extra
            .insert(IMPORTED_FROM.to_owned(), Value::Object(from));
    })?;
    let meta = store.meta(&id)?;
    let mut written = Vec::new();
    let mut skipped = Vec::new();
    for entry in bundle.memories.unwrap_or_default() {
        if !opts.with_memories {
            skipped.push(entry.name);
            continue;
        }
        // The session is written: a memory entry that cannot be saved is reported, not fatal.
        match save_memory(&home, &opts.project_path, &entry) {
            Ok(Some(p)) => written.push(p),
            Ok(None) => skipped.push(entry.name),
            Err(e) => {
                tracing::warn!("memory entry {} not imported: {e}", entry.name);
                skipped.push(entry.name);
            }
        }
    }
    Ok(Imported {
        id,
        meta,
        messages: message_count,
        renumbered,
        events: event_count,
        memories_written: written,
        memories_skipped: skipped,
    })
}

/// The bundle's compact JSON, as import will parse it, checked against the bundle limit
/// ([`crate::codec::max_bundle_bytes`]) so that export never makes what import refuses. The
/// error names the limit and the ways past it that apply to this bundle.
pub fn bundle_json(bundle: &Bundle) -> Result<Vec<u8>, ShareError> {
    let json = bundle
        .to_wire_json()
        .map_err(|e| ShareError::Redaction(e.to_string()))?;
    check_json(bundle, &json)?;
    Ok(json)
}

/// Checks `json`, a body made of `bundle` (the bundle itself, or the seed's `{meta, messages}`
/// of it), against the bundle limit, as [`bundle_json`] does.
pub fn check_json(bundle: &Bundle, json: &[u8]) -> Result<(), ShareError> {
    let limit = crate::codec::max_bundle_bytes();
    match freecode_core::bundle::check_size(json, limit) {
        Ok(()) => Ok(()),
        Err(e) => Err(size_error(bundle, e)),
    }
}

/// The error of a bundle refused by [`freecode_core::bundle::check_size`]: past the size limit,
/// with the ways past it that apply to this bundle.
fn size_error(bundle: &Bundle, e: freecode_core::bundle::BundleError) -> ShareError {
    match e {
        freecode_core::bundle::BundleError::TooBig { size, max } => {
            let mut ways = Vec::new();
            if bundle.rollout.is_some() {
                ways.push("leave out --include-rollout".to_owned());
            }
            if bundle.memories.is_some() {
                ways.push("leave out --include-memories".to_owned());
            }
            ways.push(format!(
                "compact the session first (freecode session compact {} --keep N --summary-file F), \
                 or fork and trim a copy",
                bundle.meta.id
            ));
            ShareError::TooLarge {
                id: bundle.meta.id.clone(),
                size,
                limit: max,
                ways: ways.join("; "),
            }
        }
        e => e.into(),
    }
}

/// Writes a bundle to `remote/<id>.json` (or the user's `path`, see
/// [`fsutil::write_user_file`]), compact JSON, 0600, atomically; zstd-compressed when `path`
/// ends in `.zst`. Returns the path (`-` for stdout). Refused, writing nothing, past the
/// bundle limit ([`bundle_json`]).
pub fn save_to_remote(
    home: &Home,
    bundle: &Bundle,
    path: Option<&Path>,
) -> Result<PathBuf, ShareError> {
    let mut bytes = bundle_json(bundle)?;
    if path.is_some_and(|p| p.extension().is_some_and(|x| x == "zst")) {
        bytes = crate::codec::compress(&bytes)?;
    } else {
        bytes.push(b'\n');
    }
    if let Some(p) = path {
        // A file the user named: `-` is stdout, a FIFO or device is streamed into, a missing
        // directory is an error.
        return Ok(match fsutil::write_user_file(p, &bytes)? {
            fsutil::Written::Stdout => PathBuf::from("-"),
            fsutil::Written::Stream(p) | fsutil::Written::File(p) => p,
        });
    }
    let id = SessionId::new(bundle.meta.id.clone()).map_err(StoreError::from)?;
    let path = home.remote_dir().join(format!("{}.json", id.as_str()));
    create_dir_private(&home.remote_dir())?;
    write_atomic(&path, &bytes, true)?;
    Ok(path)
}

/// The project-memory directory name the original used: the path's last segment with every
/// character outside `[A-Za-z0-9_-]` replaced by `_` (SPEC §1).
pub fn memory_slug(project_path: &str) -> String {
    let base = project_path
        .trim_end_matches(['/', '\\'])
        .rsplit(['/', '\\'])
        .next()
        .unwrap_or("");
    let slug: String = base
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if slug.is_empty() {
        "_root".to_owned()
    } else {
        slug
    }
}

fn memory_root(home: &Home, project_path: &str) -> PathBuf {
    home.root()
        .join("projects")
        .join(memory_slug(project_path))
        .join("memory")
}

/// The most one project memory entry (`<name>.md`) may hold.
const MEMORY_ENTRY_MAX_BYTES: u64 = 1 << 20;

/// Reads the project's memory entries (`projects/<slug>/memory/<type>/<name>.md`).
pub fn project_memories(home: &Home, project_path: &str) -> Result<Vec<MemoryEntry>, StoreError> {
    let root = memory_root(home, project_path);
    let mut out = Vec::new();
    for kind in ["user", "feedback", "project", "reference"] {
        let dir = root.join(kind);
        let rd = match std::fs::read_dir(&dir) {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e).ctx("read directory", &dir),
        };
        let mut files: Vec<PathBuf> = rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "md"))
            .collect();
        files.sort();
        for path in files {
            let Some(bytes) =
                fsutil::read_bounded(&path, MEMORY_ENTRY_MAX_BYTES, "a memory entry")?
            else {
                continue;
            };
            let text = String::from_utf8_lossy(&bytes);
            let modified = std::fs::metadata(&path)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map(|d| d.as_millis() as f64);
            if let Some(mut e) = parse_memory_file(&text, kind) {
                e.created_at = e.created_at.or(modified);
                e.updated_at = e.updated_at.or(modified);
                out.push(e);
            }
        }
    }
    Ok(out)
}

/// Parses a memory file: `---` front matter (`name`, `description`, `type`, `tags`,
/// `supersedes`) then the body.
pub fn parse_memory_file(text: &str, default_kind: &str) -> Option<MemoryEntry> {
    let rest = text.strip_prefix("---\n")?;
    let end = rest.find("\n---")?;
    let (front, body) = rest.split_at(end);
    let body = body.strip_prefix("\n---")?.strip_prefix('\n').unwrap_or("");
    let mut e = MemoryEntry {
        name: String::new(),
        description: String::new(),
        kind: default_kind.to_owned(),
        content: body.to_owned(),
        created_at: None,
        updated_at: None,
        tags: Vec::new(),
        supersedes: None,
    };
    for line in front.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let v = v.trim().to_owned();
        match k.trim() {
            "name" => e.name = v,
            "description" => e.description = v,
            "type" => e.kind = v,
            "tags" => {
                e.tags = v
                    .split(',')
                    .map(|t| t.trim().to_owned())
                    .filter(|t| !t.is_empty())
                    .collect();
            }
            "supersedes" => e.supersedes = Some(v),
            _ => {}
        }
    }
    valid_memory_name(&e.name).then_some(e)
}

/// Writes one memory entry unless a file of that name exists; `Ok(None)` when skipped.
fn save_memory(
    home: &Home,
    project_path: &str,
    e: &MemoryEntry,
) -> Result<Option<PathBuf>, StoreError> {
    if !valid_memory_name(&e.name)
        || !matches!(
            e.kind.as_str(),
            "user" | "feedback" | "project" | "reference"
        )
    {
        return Ok(None);
    }
    let one_line = |s: &str| s.replace(['\n', '\r'], " ");
    let dir = memory_root(home, project_path).join(&e.kind);
    let path = dir.join(format!("{}.md", e.name));
    if path.exists() {
        return Ok(None);
    }
    create_dir_private(&dir)?;
    let mut text = format!(
        "---\nname: {}\ndescription: {}\ntype: {}\n",
        e.name,
        one_line(&e.description),
        e.kind
    );
    if !e.tags.is_empty() {
        let tags: Vec<String> = e.tags.iter().map(|t| one_line(t)).collect();
        text.push_str(&format!("tags: {}\n", tags.join(", ")));
    }
    if let Some(s) = e.supersedes.as_deref().filter(|s| valid_memory_name(s)) {
        text.push_str(&format!("supersedes: {s}\n"));
    }
    text.push_str("---\n");
    text.push_str(&e.content);
    // Exclusive create: a file that appeared since the check is not replaced either.
    match fsutil::create_new(&path) {
        Ok(mut f) => {
            fsutil::append_bytes(&mut f, &path, text.as_bytes()).ctx("write", &path)?;
            fsutil::sync_file(&f, &path, true).ctx("fsync", &path)?;
            Ok(Some(path))
        }
        Err(StoreError::Io { source, .. })
            if source.kind() == std::io::ErrorKind::AlreadyExists =>
        {
            Ok(None)
        }
        Err(e) => Err(e),
    }
}
