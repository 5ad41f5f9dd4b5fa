//! `trace --json` and `replay --json` written as the log is folded (replay: each turn once
//! [`WINDOW`](freecode_core::rollout::replay::WINDOW) newer ones started, a turn changed after
//! that read back and written again). The trace: each span is serialised (pretty, at its depth in
//! the document) the moment it closes into a [`Spool`], and the document is then written in one
//! pass — the trace's scalars, the spans read back, the totals — so memory holds only what is
//! open, whatever the log's length.
//!
//! The bytes are those of `serde_json::to_writer_pretty(&trace)` on the tree-built [`Trace`]:
//! the scalars come from serialising the trace with empty span lists, into which the spooled
//! arrays are spliced (`"modelSpans": []` and its siblings can only occur as those keys: no
//! string in the document holds a raw newline, and session ids hold no quotes). Model spans are
//! read back by index, the open ones merged in at theirs.
//!
//! `trace --otlp FILE` the same way ([`OtlpSpans`], [`write_otlp_streamed`]): each span's OTLP
//! members after its id are spooled as it closes (its id is a hash of its place in its list,
//! which a split fold's tail does not know yet), and the document is written in order with the
//! ids — the bytes of `otlp::write_otlp` on the tree-built trace. One sink type,
//! [`Spooled`], serves both, with the record each makes of a span ([`SpanRecords`]).
//!
//! The rendered `replay` too: its turns are spooled as compact JSON ([`CompactTurns`]) and read
//! back one at a time, changed where later events changed them ([`StreamedReplay`]), so the
//! renderer holds one turn. One turn sink type, [`SpooledTurns`], serves it and `replay --json`.
//!
//! The trace's document in either JSON form ([`JsonForm`]: pretty for `trace --json`, compact
//! for the JSON-RPC `session.trace` answer) from one writer, [`write_trace_json`]; and a page of
//! each span list read back as values ([`trace_page`], the MCP trace page), the rest skipped.

use std::io::{self, Write};
use std::path::Path;

use freecode_core::jsonw::{self, Emit};
use freecode_core::rollout::otlp::{OtlpDoc, SpanList};
use freecode_core::rollout::replay::{Replay, ReplayBuilder, ReplayTurn, TurnPatch, TurnSink};
use freecode_core::rollout::trace::{
    DeniedSpan, ModelSpan, SpanSink, ToolSpan, Trace, TraceBuilder,
};

use freecode_core::SessionId;
use serde_json::value::RawValue;

use super::ReadReport;
use super::checkpoint::{self, Checkpointed, Saved};
use super::spool::{Order, Spool};
use super::views::fold_event_views;
use crate::error::Result;
use crate::home::Home;

/// How a [`Spooled`] sink writes a closed span into its record.
pub trait SpanRecords: Clone + std::fmt::Debug {
    /// A model span's record.
    fn model(&self, s: &ModelSpan, out: &mut Vec<u8>);
    /// A tool span's record.
    fn tool(&self, s: &ToolSpan, out: &mut Vec<u8>);
    /// A refused call's record.
    fn denied(&self, s: &DeniedSpan, out: &mut Vec<u8>);
}

/// A [`SpanSink`] that writes each closed span into a spool as the record `R` makes of it:
/// [`JsonSpans`] for `trace --json`, [`OtlpSpans`] for `trace --otlp FILE`.
#[derive(Debug)]
pub struct Spooled<R> {
    records: R,
    model: Spool,
    tool: Spool,
    denied: Spool,
    tools: u64,
    denials: u64,
    out: Vec<u8>,
}

impl<R> Spooled<R> {
    /// A sink over spools of its own (a fold checkpoint's: model, tool, denied), which hold
    /// `tools` tool and `denials` denied spans already.
    fn on_spools(records: R, spools: Vec<Spool>, tools: u64, denials: u64) -> Self {
        let mut it = spools.into_iter();
        let mut next = || it.next().unwrap_or_default();
        Self {
            records,
            model: next(),
            tool: next(),
            denied: next(),
            tools,
            denials,
            out: Vec::new(),
        }
    }

    fn with(records: R) -> Self {
        Self {
            records,
            model: Spool::default(),
            tool: Spool::default(),
            denied: Spool::default(),
            tools: 0,
            denials: 0,
            out: Vec::new(),
        }
    }
}

/// Pretty JSON at depth 2, a record as an element of the document's arrays (`trace --json`'s
/// spans, `replay --json`'s turns).
#[derive(Debug, Clone, Copy, Default)]
pub struct PrettyJson;

/// Writes `value` pretty as an element of an array one level down in the document (depth 2:
/// `jsonw`, the bytes `serde_json::to_writer_pretty` writes there).
fn element_json(value: &impl Emit, out: &mut Vec<u8>) {
    // A span is plain data: writing it into memory cannot fail.
    let _ = jsonw::to_pretty_at(value, 2, out);
}

impl SpanRecords for PrettyJson {
    fn model(&self, s: &ModelSpan, out: &mut Vec<u8>) {
        element_json(s, out);
    }
    fn tool(&self, s: &ToolSpan, out: &mut Vec<u8>) {
        element_json(s, out);
    }
    fn denied(&self, s: &DeniedSpan, out: &mut Vec<u8>) {
        element_json(s, out);
    }
}

/// A span's OTLP members after its id (its id depends on its place in its list, which a split
/// fold's tail does not know yet): [`write_otlp_streamed`] writes the rest.
impl SpanRecords for OtlpDoc {
    fn model(&self, s: &ModelSpan, out: &mut Vec<u8>) {
        self.model_rest(s, out);
    }
    fn tool(&self, s: &ToolSpan, out: &mut Vec<u8>) {
        self.tool_rest(s, out);
    }
    fn denied(&self, s: &DeniedSpan, out: &mut Vec<u8>) {
        self.denied_rest(s, out);
    }
}

/// `trace --json`'s sink: each span's pretty JSON, for [`write_trace_json`].
pub type JsonSpans = Spooled<PrettyJson>;

/// `trace --otlp FILE`'s sink: each span's OTLP JSON, for [`write_otlp_streamed`].
pub type OtlpSpans = Spooled<OtlpDoc>;

/// The JSON-RPC `session.trace` answer's and the MCP trace page's sink: each span's compact
/// JSON, for [`write_trace_json`] and [`trace_page`].
pub type CompactSpans = Spooled<CompactJson>;

impl JsonSpans {
    /// An empty sink.
    pub fn new() -> Self {
        Self::with(PrettyJson)
    }
}

impl Default for JsonSpans {
    fn default() -> Self {
        Self::new()
    }
}

impl CompactSpans {
    /// An empty sink.
    pub fn new() -> Self {
        Self::with(CompactJson)
    }
}

impl Default for CompactSpans {
    fn default() -> Self {
        Self::new()
    }
}

impl OtlpSpans {
    /// An empty sink for session `session_id`'s trace.
    pub fn new(session_id: &str) -> Self {
        Self::with(OtlpDoc::new(session_id))
    }
}

impl<R: SpanRecords> SpanSink for Spooled<R> {
    type Pos = (u64, u64, u64);

    fn model(&mut self, index: u64, span: ModelSpan) {
        self.out.clear();
        self.records.model(&span, &mut self.out);
        self.model
            .push(i64::try_from(index).unwrap_or(i64::MAX), index, &self.out);
    }

    fn tool(&mut self, span: ToolSpan) {
        self.out.clear();
        self.records.tool(&span, &mut self.out);
        self.tool.push(span.started_at, self.tools, &self.out);
        self.tools += 1;
    }

    fn denied(&mut self, span: DeniedSpan) {
        self.out.clear();
        self.records.denied(&span, &mut self.out);
        self.denied.push(span.at, self.denials, &self.out);
        self.denials += 1;
    }

    fn pos(&self) -> Self::Pos {
        (self.model.pos(), self.tool.pos(), self.denied.pos())
    }

    fn tail(&self) -> Self {
        Self::with(self.records.clone())
    }

    fn splice(&mut self, tail: Self, from: Self::Pos, first: u64, base: u64) {
        self.model
            .splice(tail.model, from.0, base.wrapping_sub(first));
        // Tool and denial spans are read back as written.
        self.tool.splice(tail.tool, from.1, 0);
        self.denied.splice(tail.denied, from.2, 0);
    }
}

/// A model span as the document takes it: a closed one's spooled record, or one still open.
enum ModelRecord<'a> {
    Closed(&'a [u8]),
    Open(&'a ModelSpan),
}

/// Hands `put` every model span in index order: the spooled records of the closed ones, with
/// the open ones (`open`, in index order) merged in at their indices.
fn model_spans_in_order(
    closed: &Spool,
    open: &[(u64, ModelSpan)],
    mut put: impl FnMut(ModelRecord<'_>) -> io::Result<()>,
) -> io::Result<()> {
    let mut closed = closed.records(Order::Index)?;
    let mut open = open.iter().peekable();
    let mut have = closed.advance()?;
    loop {
        match open.peek() {
            Some((i, s)) if !have || *i < closed.index => {
                put(ModelRecord::Open(s))?;
                open.next();
            }
            _ if have => {
                put(ModelRecord::Closed(&closed.bytes))?;
                have = closed.advance()?;
            }
            _ => return Ok(()),
        }
    }
}

/// The form of a streamed JSON document: pretty (`trace --json`, `replay --json`) or compact
/// (an RPC answer), what its arrays and span lists look like in it.
pub trait JsonForm: SpanRecords {
    /// The form's name in a fold checkpoint's file names (`trace-pretty`).
    const NAME: &'static str;
    /// Before an array's first element, between elements, after the last.
    const ARRAY: [&'static [u8]; 3];
    /// The trace's span lists, empty, as the trace with no spans serialises them.
    const SPAN_LISTS: [&'static [u8]; 3];
    /// What follows the document: a newline after pretty output, as `--json` prints it.
    const END: &'static [u8];
    /// The document of `value` (its lists empty, to be spliced).
    fn head(value: &impl serde::Serialize) -> serde_json::Result<Vec<u8>>;
}

impl JsonForm for PrettyJson {
    const NAME: &'static str = "pretty";
    const ARRAY: [&'static [u8]; 3] = [b"[\n    ", b",\n    ", b"\n  ]"];
    const SPAN_LISTS: [&'static [u8]; 3] = [
        b"\n  \"modelSpans\": []",
        b"\n  \"toolSpans\": []",
        b"\n  \"deniedSpans\": []",
    ];
    const END: &'static [u8] = b"\n";
    fn head(value: &impl serde::Serialize) -> serde_json::Result<Vec<u8>> {
        serde_json::to_vec_pretty(value)
    }
}

impl JsonForm for CompactJson {
    const NAME: &'static str = "compact";
    const ARRAY: [&'static [u8]; 3] = [b"[", b",", b"]"];
    const SPAN_LISTS: [&'static [u8]; 3] = [
        b"\"modelSpans\":[]",
        b"\"toolSpans\":[]",
        b"\"deniedSpans\":[]",
    ];
    const END: &'static [u8] = b"";
    fn head(value: &impl serde::Serialize) -> serde_json::Result<Vec<u8>> {
        serde_json::to_vec(value)
    }
}

/// Writes an array's elements in form `F`: `[]` when empty (pretty: each element on its own
/// line at depth 2).
fn write_array<F: JsonForm>(
    out: &mut (impl Write + ?Sized),
    next: impl FnOnce(&mut dyn FnMut(&[u8]) -> io::Result<()>) -> io::Result<()>,
) -> io::Result<()> {
    let [open, sep, close] = F::ARRAY;
    let mut first = true;
    let mut put = |bytes: &[u8]| -> io::Result<()> {
        out.write_all(if first { open } else { sep })?;
        first = false;
        out.write_all(bytes)
    };
    next(&mut put)?;
    out.write_all(if first { b"[]" } else { close })
}

/// Writes the trace a [`TraceBuilder`] with [`JsonSpans`] or [`CompactSpans`] folded, as of
/// `now` (see [`TraceBuilder::snapshot`]), as serde_json writes the [`Trace`] it would build:
/// pretty plus a newline (`serde_json::to_writer_pretty`, what `trace --json` prints), or
/// compact (`serde_json::to_writer`, an RPC answer's result).
///
/// [`Trace`]: freecode_core::rollout::trace::Trace
pub fn write_trace_json<F: JsonForm>(
    out: &mut (impl Write + ?Sized),
    builder: TraceBuilder<Spooled<F>>,
    now: Option<i64>,
) -> io::Result<()> {
    let (parts, spans) = builder.finish_parts(now);
    let head = F::head(&parts.trace)?;
    let mut rest = &head[..];
    let mut scratch = Vec::new();
    for (n, marker) in F::SPAN_LISTS.iter().enumerate() {
        let Some(at) = memchr::memmem::find(rest, marker) else {
            return Err(io::Error::other("trace JSON without its span lists"));
        };
        let key_end = at + marker.len() - 2;
        out.write_all(&rest[..key_end])?;
        rest = &rest[key_end + 2..];
        match n {
            0 => {
                write_array::<F>(out, |put| {
                    model_spans_in_order(&spans.model, &parts.open, |span| match span {
                        ModelRecord::Closed(bytes) => put(bytes),
                        ModelRecord::Open(s) => {
                            scratch.clear();
                            spans.records.model(s, &mut scratch);
                            put(&scratch)
                        }
                    })
                })?;
            }
            _ => {
                let spool = if n == 1 { &spans.tool } else { &spans.denied };
                let mut r = spool.records(Order::Written)?;
                write_array::<F>(out, |put| {
                    while r.advance()? {
                        put(&r.bytes)?;
                    }
                    Ok(())
                })?;
            }
        }
    }
    out.write_all(rest)?;
    out.write_all(F::END)
}

/// One page of a span list: the spans at `offset..offset + limit`, as JSON values, and how
/// many the list holds.
#[derive(Debug, Clone, PartialEq)]
pub struct SpanPage {
    /// The page's spans, in list order.
    pub spans: Vec<serde_json::Value>,
    /// The list's length.
    pub total: u64,
}

/// A page of a trace ([`trace_page`]): its scalars, and a page of each span list.
#[derive(Debug, Clone, PartialEq)]
pub struct TracePage {
    /// Every scalar of the trace; its span lists are empty.
    pub trace: Trace,
    /// Model spans, in index order.
    pub model: SpanPage,
    /// Tool spans.
    pub tool: SpanPage,
    /// Refused calls.
    pub denied: SpanPage,
}

/// The trace a [`TraceBuilder`] with [`CompactSpans`] folded, as of `now`, with only the spans
/// at `offset..offset + limit` of each list read back into values (those of
/// `serde_json::to_value` on the [`Trace`] it would build): a page costs its spans, however
/// long the log.
pub fn trace_page(
    builder: TraceBuilder<CompactSpans>,
    now: Option<i64>,
    offset: u64,
    limit: u64,
) -> io::Result<TracePage> {
    let (parts, spans) = builder.finish_parts(now);
    let end = offset.saturating_add(limit);
    let mut model = Vec::new();
    let mut n = 0u64;
    model_spans_in_order(&spans.model, &parts.open, |span| {
        if (offset..end).contains(&n) {
            model.push(match span {
                ModelRecord::Closed(bytes) => serde_json::from_slice(bytes)?,
                ModelRecord::Open(s) => serde_json::to_value(s)?,
            });
        }
        n += 1;
        Ok(())
    })?;
    let page = |spool: &Spool| -> io::Result<SpanPage> {
        let mut r = spool.records(Order::Written)?;
        let (mut spans, mut total) = (Vec::new(), 0u64);
        while r.advance()? {
            if (offset..end).contains(&total) {
                spans.push(serde_json::from_slice(&r.bytes)?);
            }
            total += 1;
        }
        Ok(SpanPage { spans, total })
    };
    Ok(TracePage {
        model: SpanPage {
            spans: model,
            total: n,
        },
        tool: page(&spans.tool)?,
        denied: page(&spans.denied)?,
        trace: parts.trace,
    })
}

/// Folds the log at `path` (both cores past 8 MiB) with spans written out as they close, in
/// form `F`; `None` when there is no log. Pass the result to [`write_trace_json`] (or, compact,
/// to [`trace_page`]).
pub fn fold_trace_streamed<F: JsonForm + Default + Send + 'static>(
    path: &Path,
    session_id: &str,
) -> Result<Option<(TraceBuilder<Spooled<F>>, ReadReport)>> {
    fold_event_views(
        path,
        TraceBuilder::with_sink(session_id, Spooled::with(F::default())),
    )
}

/// [`fold_trace_streamed`] of session `id`'s log, from its fold checkpoint
/// ([`super::checkpoint`]): a log read before costs the bytes appended since, the answer
/// that of a read from the start.
pub fn fold_trace_checkpointed<F: JsonForm + Default + Send + 'static>(
    home: &Home,
    id: &SessionId,
) -> Result<Option<(TraceBuilder<Spooled<F>>, ReadReport)>> {
    checkpoint::fold_checkpointed(home, id)
}

impl<F: JsonForm + Default + Send + 'static> Checkpointed for TraceBuilder<Spooled<F>> {
    fn kind() -> String {
        format!("trace-{}", F::NAME)
    }

    const SPOOLS: &'static [&'static str] = checkpoint::TRACE_SPOOLS;

    fn fresh(session_id: &str, spools: Vec<Spool>) -> Self {
        TraceBuilder::with_sink(session_id, Spooled::on_spools(F::default(), spools, 0, 0))
    }

    fn resume(
        session_id: &str,
        state: &RawValue,
        counts: &[u64],
        spools: Vec<Spool>,
    ) -> Option<Self> {
        let [tools, denials] = counts else {
            return None;
        };
        if spools.len() != 3 {
            return None;
        }
        let sink = Spooled::on_spools(F::default(), spools, *tools, *denials);
        TraceBuilder::resume(session_id, state.get().as_bytes(), sink)
    }

    fn save(&mut self) -> io::Result<Saved> {
        let state = self
            .state()
            .ok_or_else(|| io::Error::other("a tail fold has no state"))?;
        let sink = self.sink_mut();
        let spools = vec![
            sink.model.persist()?,
            sink.tool.persist()?,
            sink.denied.persist()?,
        ];
        Ok(Saved {
            state,
            counts: vec![sink.tools, sink.denials],
            spools,
        })
    }
}

/// Writes the OTLP document (`trace --otlp FILE`: compact, no newline) of the trace a
/// [`TraceBuilder`] with [`OtlpSpans`] folded, as of `now`: the bytes of
/// [`freecode_core::rollout::otlp::write_otlp`] on the [`Trace`] it would build, in the memory
/// of a few spans. Model spans are read back by index, the open ones merged in at theirs.
///
/// [`Trace`]: freecode_core::rollout::trace::Trace
pub fn write_otlp_streamed(
    out: &mut (impl Write + ?Sized),
    builder: TraceBuilder<OtlpSpans>,
    now: Option<i64>,
) -> io::Result<()> {
    let (parts, spans) = builder.finish_parts(now);
    let doc = &spans.records;
    let mut w = doc.writer(&parts.trace, out);
    let mut rest = Vec::new();
    model_spans_in_order(&spans.model, &parts.open, |span| match span {
        ModelRecord::Closed(bytes) => w.span(SpanList::Model, bytes),
        ModelRecord::Open(s) => {
            rest.clear();
            doc.model_rest(s, &mut rest);
            w.span(SpanList::Model, &rest)
        }
    })?;
    for (list, spool) in [
        (SpanList::Tool, &spans.tool),
        (SpanList::Denied, &spans.denied),
    ] {
        let mut r = spool.records(Order::Written)?;
        while r.advance()? {
            w.span(list, &r.bytes)?;
        }
    }
    w.finish()
}

/// Folds the log at `path` (both cores past 8 MiB) with spans written out as they close, as
/// OTLP; `None` when there is no log. Pass the result to [`write_otlp_streamed`].
pub fn fold_otlp_streamed(
    path: &Path,
    session_id: &str,
) -> Result<Option<(TraceBuilder<OtlpSpans>, ReadReport)>> {
    fold_event_views(
        path,
        TraceBuilder::with_sink(session_id, OtlpSpans::new(session_id)),
    )
}

/// How a [`SpooledTurns`] sink writes a turn it no longer holds into its record.
pub trait TurnRecords: Clone + Default + Send + std::fmt::Debug + 'static {
    /// The form's name in a fold checkpoint's file names (`replay-pretty`).
    const NAME: &'static str;
    /// The turn's record: JSON that reads back as the turn.
    fn turn(&self, t: &ReplayTurn, out: &mut Vec<u8>);
}

impl TurnRecords for PrettyJson {
    const NAME: &'static str = "pretty";
    fn turn(&self, t: &ReplayTurn, out: &mut Vec<u8>) {
        element_json(t, out);
    }
}

/// Compact JSON: the smallest record, for turns that are read back as values
/// ([`StreamedReplay`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct CompactJson;

impl TurnRecords for CompactJson {
    const NAME: &'static str = "compact";
    fn turn(&self, t: &ReplayTurn, out: &mut Vec<u8>) {
        compact_json(t, out);
    }
}

impl SpanRecords for CompactJson {
    fn model(&self, s: &ModelSpan, out: &mut Vec<u8>) {
        compact_json(s, out);
    }
    fn tool(&self, s: &ToolSpan, out: &mut Vec<u8>) {
        compact_json(s, out);
    }
    fn denied(&self, s: &DeniedSpan, out: &mut Vec<u8>) {
        compact_json(s, out);
    }
}

/// Writes `value` as compact JSON (`jsonw`: the bytes of `serde_json::to_writer`).
fn compact_json(value: &impl Emit, out: &mut Vec<u8>) {
    // A span or a turn is plain data: writing it into memory cannot fail.
    let _ = jsonw::to_compact(value, out);
}

/// A [`TurnSink`] that writes each turn it is handed into a spool, as the record `R` makes of
/// it: [`JsonTurns`] for `replay --json`, [`CompactTurns`] for the rendered replay.
#[derive(Debug, Default)]
pub struct SpooledTurns<R> {
    records: R,
    spool: Spool,
    /// A checkpoint's turn ids (`TurnSink::keep_ids`): one record a turn, its index and id.
    ids: Option<Spool>,
    /// Whether reading the ids back failed: the fold may have missed a turn, so it is not
    /// saved (and the read is done again from the start: [`super::checkpoint`]).
    ids_lost: bool,
    out: Vec<u8>,
}

/// `replay --json`'s sink: each turn's pretty JSON, for [`write_replay_json`].
pub type JsonTurns = SpooledTurns<PrettyJson>;

/// The rendered replay's sink: each turn's compact JSON, read back by [`StreamedReplay`].
pub type CompactTurns = SpooledTurns<CompactJson>;

impl<R: TurnRecords> SpooledTurns<R> {
    /// An empty sink.
    pub fn new() -> Self {
        Self::default()
    }

    /// A sink over spools of its own (a fold checkpoint's): its turns, and their ids.
    fn on_spools(spool: Spool, ids: Spool) -> Self {
        Self {
            records: R::default(),
            spool,
            ids: Some(ids),
            ids_lost: false,
            out: Vec::new(),
        }
    }
}

impl<R: TurnRecords> Checkpointed for ReplayBuilder<SpooledTurns<R>> {
    fn kind() -> String {
        format!("replay-{}", R::NAME)
    }

    const SPOOLS: &'static [&'static str] = checkpoint::REPLAY_SPOOLS;

    fn fresh(session_id: &str, spools: Vec<Spool>) -> Self {
        let mut spools = spools.into_iter();
        let turns = spools.next().unwrap_or_default();
        let ids = spools.next().unwrap_or_default();
        ReplayBuilder::with_sink(session_id, SpooledTurns::on_spools(turns, ids))
    }

    fn resume(
        session_id: &str,
        state: &RawValue,
        counts: &[u64],
        spools: Vec<Spool>,
    ) -> Option<Self> {
        let ([], [turns, ids]) = (counts, <[Spool; 2]>::try_from(spools).ok()?) else {
            return None;
        };
        ReplayBuilder::resume(
            session_id,
            state.get().as_bytes(),
            SpooledTurns::on_spools(turns, ids),
        )
    }

    fn save(&mut self) -> io::Result<Saved> {
        let state = self
            .state()
            .ok_or_else(|| io::Error::other("a tail fold has no state"))?;
        let sink = self.sink_mut();
        if sink.ids_lost {
            return Err(io::Error::other(
                "a replay checkpoint's turn ids did not read back",
            ));
        }
        let ids = sink
            .ids
            .as_mut()
            .ok_or_else(|| io::Error::other("a replay sink without its ids"))?
            .persist()?;
        let spools = vec![sink.spool.persist()?, ids];
        Ok(Saved {
            state,
            counts: Vec::new(),
            spools,
        })
    }
}

/// [`fold_replay_streamed`] of session `id`'s log, from its fold checkpoint
/// ([`super::checkpoint`]): a log read before costs the bytes appended since, the answer
/// that of a read from the start. Add the report's unknown events and skipped lines to the
/// returned fold as after a read from the start.
pub fn fold_replay_checkpointed<R: TurnRecords>(
    home: &Home,
    id: &SessionId,
) -> Result<Option<(ReplayBuilder<SpooledTurns<R>>, ReadReport)>> {
    checkpoint::fold_checkpointed(home, id)
}

impl<R: TurnRecords> TurnSink for SpooledTurns<R> {
    type Pos = u64;

    fn turn(&mut self, index: u64, turn: ReplayTurn) {
        self.out.clear();
        self.records.turn(&turn, &mut self.out);
        self.spool
            .push(i64::try_from(index).unwrap_or(i64::MAX), index, &self.out);
    }

    fn pos(&self) -> u64 {
        self.spool.pos()
    }

    fn tail(&self) -> Self {
        Self::default()
    }

    fn splice(&mut self, tail: Self, from: u64, shift: u64) {
        self.spool.splice(tail.spool, from, shift);
    }

    fn keep_ids(&mut self, ids: &[(&str, u64)]) -> bool {
        let Some(spool) = &mut self.ids else {
            return false;
        };
        for (id, index) in ids {
            spool.push(0, *index, id.as_bytes());
        }
        true
    }

    fn kept_ids(&mut self) -> Vec<(String, u64)> {
        let mut out = Vec::new();
        let Some(spool) = &self.ids else {
            return out;
        };
        let read = (|| {
            let mut r = spool.records(Order::Written)?;
            while r.advance()? {
                out.push((String::from_utf8_lossy(&r.bytes).into_owned(), r.index));
            }
            io::Result::Ok(())
        })();
        if read.is_err() {
            self.ids_lost = true;
        }
        out
    }
}

/// A spooled turn read back: its record as written, or, when later events changed the turn
/// after it was written out, the turn parsed and changed.
enum TurnBack<'a> {
    Written(&'a [u8]),
    Changed(ReplayTurn),
}

/// Reads the turns of `spool` back in index order, applying `patches` (sorted by index, as
/// [`ReplayBuilder::finish_parts`] returns them) to the turns they change.
fn turns_back(
    spool: &Spool,
    patches: Vec<(u64, TurnPatch)>,
    mut each: impl FnMut(TurnBack<'_>) -> io::Result<()>,
) -> io::Result<()> {
    let mut r = spool.records(Order::Index)?;
    let mut patches = patches.into_iter().peekable();
    while r.advance()? {
        if patches.peek().is_none_or(|(i, _)| *i != r.index) {
            each(TurnBack::Written(&r.bytes))?;
            continue;
        }
        let mut turn: ReplayTurn = serde_json::from_slice(&r.bytes)?;
        while let Some((_, p)) = patches.next_if(|(i, _)| *i == r.index) {
            p.apply(&mut turn);
        }
        each(TurnBack::Changed(turn))?;
    }
    Ok(())
}

/// Writes the replay a [`ReplayBuilder`] with [`JsonTurns`] folded (after its
/// `unknown_event` and `skipped_line` calls) as `serde_json::to_writer_pretty` writes the
/// [`Replay`](freecode_core::rollout::replay::Replay) it would build, plus a newline. A turn
/// that later events changed after it was written out is read back, changed and written again.
pub fn write_replay_json(
    out: &mut impl Write,
    builder: ReplayBuilder<JsonTurns>,
) -> io::Result<()> {
    let (replay, patches, sink) = builder.finish_parts();
    let head = serde_json::to_vec_pretty(&replay)?;
    let marker: &[u8] = b"\n  \"turns\": []";
    let Some(at) = memchr::memmem::find(&head, marker) else {
        return Err(io::Error::other("replay JSON without its turns"));
    };
    let key_end = at + marker.len() - 2;
    out.write_all(&head[..key_end])?;
    let mut again = Vec::new();
    write_array::<PrettyJson>(out, |put| {
        turns_back(&sink.spool, patches, |turn| match turn {
            TurnBack::Written(bytes) => put(bytes),
            TurnBack::Changed(turn) => {
                again.clear();
                element_json(&turn, &mut again);
                put(&again)
            }
        })
    })?;
    out.write_all(&head[key_end + 2..])?;
    out.write_all(b"\n")
}

/// Folds the log at `path` (both cores past 8 MiB) with turns written out as newer ones
/// start, as the records `R` makes; `None` when there is no log. Pass the result to
/// [`write_replay_json`] ([`JsonTurns`]) or [`StreamedReplay::new`] ([`CompactTurns`]).
pub fn fold_replay_streamed<R: TurnRecords>(
    path: &Path,
    session_id: &str,
) -> Result<Option<(ReplayBuilder<SpooledTurns<R>>, ReadReport)>> {
    fold_event_views(
        path,
        ReplayBuilder::with_sink(session_id, SpooledTurns::new()),
    )
}

/// A finished replay fold whose turns are in a spool: what [`ReplayBuilder::finish`] returns,
/// read a turn at a time ([`StreamedReplay::each_turn`]), so a renderer holds one turn.
#[derive(Debug)]
pub struct StreamedReplay {
    replay: Replay,
    patches: Vec<(u64, TurnPatch)>,
    sink: CompactTurns,
}

impl StreamedReplay {
    /// Ends the fold (after its `unknown_event` and `skipped_line` calls).
    pub fn new(builder: ReplayBuilder<CompactTurns>) -> Self {
        let (replay, patches, sink) = builder.finish_parts();
        Self {
            replay,
            patches,
            sink,
        }
    }

    /// The replay without its turns (`turns` is empty): the totals, errors and skipped lines.
    pub fn replay(&self) -> &Replay {
        &self.replay
    }

    /// Hands each turn to `each`, in order, with every later change applied: the turns of
    /// [`ReplayBuilder::finish`]. Returns the replay without its turns.
    pub fn each_turn(
        self,
        mut each: impl FnMut(ReplayTurn) -> io::Result<()>,
    ) -> io::Result<Replay> {
        turns_back(&self.sink.spool, self.patches, |turn| match turn {
            TurnBack::Written(bytes) => each(serde_json::from_slice(bytes)?),
            TurnBack::Changed(turn) => each(turn),
        })?;
        Ok(self.replay)
    }
}

/// Folds session `id`'s log again into a checkpoint of `kind` (what `doctor --fix` does after
/// removing a bad one), whatever the log's size; a kind this version does not make is left. (Here, beside the
/// spooled forms it folds into, so the checkpoint module names none of them.)
pub fn rebuild_checkpoint(home: &Home, id: &SessionId, kind: &str) -> Result<()> {
    match kind {
        "trace-pretty" => {
            checkpoint::fold_checkpointed_from::<TraceBuilder<Spooled<PrettyJson>>>(home, id, 0)?;
        }
        "trace-compact" => {
            checkpoint::fold_checkpointed_from::<TraceBuilder<Spooled<CompactJson>>>(home, id, 0)?;
        }
        "replay-pretty" => {
            checkpoint::fold_checkpointed_from::<ReplayBuilder<SpooledTurns<PrettyJson>>>(
                home, id, 0,
            )?;
        }
        "replay-compact" => {
            checkpoint::fold_checkpointed_from::<ReplayBuilder<SpooledTurns<CompactJson>>>(
                home, id, 0,
            )?;
        }
        _ => {}
    }
    Ok(())
}
