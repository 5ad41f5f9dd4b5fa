//! What a page shows of a session, redacted as `session export` redacts a bundle: the same
//! rules (built in, with the home's `redact.toml` merged over them), every string of every
//! message, the meta (a title cut from the prompt cut again from it once redacted), and the
//! trace's and replay's free text (tool arguments and outputs, errors, denial reasons). The
//! offline pages (`session show --html`, `trace --html`) and the viewer's pages and API
//! redact by default; `--no-redact` shows everything.

use std::sync::atomic::{AtomicUsize, Ordering};

use freecode_core::rollout::replay::Replay;
use freecode_core::rollout::trace::Trace;
use freecode_core::{SessionMeta, StoredMessage};
use freecode_ops::{Error, Home, Result};
use freecode_store::SessionStore;
use freecode_store::redaction::HomeRedactor;
use freecode_store::share::ShareError;

/// Session `id`'s first message, read from its log's first line (at most [`FIRST_LINE_MAX`]
/// bytes of it); `None` when it cannot be read.
fn first_message(store: &SessionStore, id: &str) -> Option<StoredMessage> {
    use std::io::{BufRead, Read};
    let id = freecode_core::SessionId::new(id).ok()?;
    let file = std::fs::File::open(store.locate(&id).ok()?.messages()).ok()?;
    let mut line = Vec::new();
    std::io::BufReader::new(file.take(FIRST_LINE_MAX))
        .read_until(b'\n', &mut line)
        .ok()?;
    freecode_core::json::from_slice_lossy(&line)
        .ok()
        .map(|l| l.value)
}

/// What [`first_message`] reads at most.
const FIRST_LINE_MAX: u64 = 256 << 10;

/// A page's redaction: the home's rules, or none (`--no-redact`), and how many secrets it
/// replaced.
pub struct PageRedactor {
    rules: Option<HomeRedactor>,
    replaced: AtomicUsize,
}

fn share_err(e: ShareError) -> Error {
    Error::Failed(format!("cannot redact the page, nothing written: {e}"))
}

impl PageRedactor {
    /// `home`'s rules when `redact`, else none. A `redact.toml` that does not load is an error:
    /// no page is shown unredacted for it.
    pub fn for_home(home: &Home, redact: bool) -> Result<Self> {
        let rules = if redact {
            Some(freecode_store::redaction::for_home(home)?)
        } else {
            None
        };
        Ok(Self {
            rules,
            replaced: AtomicUsize::new(0),
        })
    }

    /// No redaction at all.
    pub fn none() -> Self {
        Self {
            rules: None,
            replaced: AtomicUsize::new(0),
        }
    }

    /// Whether it redacts.
    pub fn redacts(&self) -> bool {
        self.rules.is_some()
    }

    /// How many secrets it replaced so far.
    pub fn replaced(&self) -> usize {
        self.replaced.load(Ordering::Relaxed)
    }

    fn count(&self, n: usize) {
        self.replaced.fetch_add(n, Ordering::Relaxed);
    }

    /// `meta` as the page shows it; `first` is the session's first block of messages (where
    /// a cut title's prompt is).
    pub fn meta(&self, meta: SessionMeta, first: &[StoredMessage]) -> Result<SessionMeta> {
        let Some(r) = &self.rules else {
            return Ok(meta);
        };
        let (meta, n) =
            freecode_store::share::redact_meta(r.get(), &meta, first).map_err(share_err)?;
        self.count(n);
        Ok(meta)
    }

    /// A listed session's `meta` as a page shows it: as [`PageRedactor::meta`], with a cut
    /// title's prompt read from the session's first line only (at most 256 KiB of it).
    pub fn listed_meta(&self, store: &SessionStore, meta: SessionMeta) -> Result<SessionMeta> {
        if self.rules.is_none() {
            return Ok(meta);
        }
        let first = if meta.title.ends_with('…') {
            first_message(store, &meta.id)
        } else {
            None
        };
        self.meta(meta, first.as_slice())
    }

    /// `messages` as the page shows them.
    pub fn messages(&self, messages: Vec<StoredMessage>) -> Result<Vec<StoredMessage>> {
        let Some(r) = &self.rules else {
            return Ok(messages);
        };
        messages
            .into_iter()
            .map(|m| {
                let (m, n) =
                    freecode_store::share::redact_message(r.get(), m).map_err(share_err)?;
                self.count(n);
                Ok(m)
            })
            .collect()
    }

    /// A line of text (a title, a snippet) as a page shows it; whether it changed.
    pub fn text(&self, text: &mut String) -> bool {
        let Some(r) = &self.rules else {
            return false;
        };
        let n = r.get().redact_in_place(text);
        self.count(n);
        n > 0
    }

    /// `trace`'s free text redacted: tool arguments, errors, denial reasons.
    pub fn trace(&self, trace: &mut Trace) {
        let Some(r) = &self.rules else {
            return;
        };
        let r = r.get();
        let mut n = 0;
        for s in &mut trace.model_spans {
            for t in [&mut s.error, &mut s.error_kind].into_iter().flatten() {
                n += r.redact_in_place(t);
            }
        }
        for s in &mut trace.tool_spans {
            if let Some(a) = &mut s.args {
                n += r.redact_json(a);
            }
        }
        for s in &mut trace.denied_spans {
            if let Some(a) = &mut s.args {
                n += r.redact_json(a);
            }
            n += r.redact_in_place(&mut s.reason);
        }
        self.count(n);
    }

    /// `replay` with every string in it redacted (tool arguments and outputs, errors).
    pub fn replay(&self, replay: Replay) -> Result<Replay> {
        let Some(r) = &self.rules else {
            return Ok(replay);
        };
        let ser = |e: serde_json::Error| Error::Failed(format!("cannot redact the page: {e}"));
        let mut v = serde_json::to_value(&replay).map_err(ser)?;
        let n = r.get().redact_json(&mut v);
        if n == 0 {
            return Ok(replay);
        }
        self.count(n);
        serde_json::from_value(v).map_err(ser)
    }
}
