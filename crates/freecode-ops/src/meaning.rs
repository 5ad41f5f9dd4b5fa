//! Search by meaning: which embedder (configured, never a default), the vectors it fills in
//! (incrementally, in the background of the servers or within a time budget of a search), and
//! the search that uses them.
//!
//! The embedder comes from `config.json`'s `embed.*` keys, each overridden by its environment
//! variable ([`ENV`]): `embed.provider` `local` with `embed.path` (a model directory), or
//! `openai` with `embed.baseUrl` and `embed.model` (and `embed.apiKey`). Without
//! `embed.provider`, search finds words only, as before. A process keeps one embedder loaded
//! while the configuration stays the same.
//!
//! The vectors live in the index ([`freecode_store::index`]'s chunks): [`fill`] brings the
//! chunks up to date with the indexed messages and embeds those without a vector, a batch at a
//! time (each batch committed, so a search in another process sees it), until none are left or
//! its budget is spent. A search in [`SearchMode::Both`] answers with the vectors there are;
//! when the embedder cannot be used it says why (a warning) and answers by words.
//!
//! A search by meaning does its two slow steps at once: the model loads on a thread of its own
//! while the calling thread brings the index up to date and reads the vectors of the search's
//! scope (at most 100,000 chunks, about 40 MB: [`freecode_store::index::VectorsAhead`]) and, by
//! both, finds the words' hits; they are scored and fused once the query's vector is made,
//! unless embedding what was pending changed the chunks meanwhile.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use freecode_embed::{EmbedConfig, Embedder};
use freecode_store::Home;
use freecode_store::index::{Meaning, SearchHit, SearchMode, SearchQuery, search_scan};

use crate::error::{Error, Result};
use crate::index::{indexed_or_scanned, open_index, warn_problems};
use crate::keys::{MIN_SIMILARITY_DEFAULT, PROVIDERS};
use crate::progress::Progress;
use crate::sessions::open;
use crate::types::{EmbedReport, IndexStatus, MeaningStatus};

/// The environment variables that override the `embed.*` keys, by key.
pub const ENV: &[(&str, &str)] = &[
    ("embed.provider", "FREECODE_EMBED_PROVIDER"),
    ("embed.path", "FREECODE_EMBED_PATH"),
    ("embed.baseUrl", "FREECODE_EMBED_URL"),
    ("embed.model", "FREECODE_EMBED_MODEL"),
    ("embed.apiKey", "FREECODE_EMBED_API_KEY"),
    ("embed.minSimilarity", "FREECODE_EMBED_MIN_SIMILARITY"),
    ("embed.readTokens", "FREECODE_EMBED_READ_TOKENS"),
];

/// Chunks embedded per call of the embedder (and per committed batch).
const BATCH: usize = 64;
/// How long a server's filler embeds before it looks whether it should stop.
const ROUND: Duration = Duration::from_secs(2);

/// The value of an `embed.*` key: its environment variable when set, else `config.json`'s
/// (a number as it is written).
fn setting(config: &serde_json::Value, key: &str) -> Option<String> {
    let env = ENV.iter().find(|(k, _)| *k == key).map(|(_, e)| *e);
    env.and_then(|e| std::env::var(e).ok())
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
        .or_else(|| match crate::keys::lookup(config, key) {
            Some(serde_json::Value::Number(n)) => Some(n.to_string()),
            _ => crate::keys::lookup_str(config, key),
        })
}

/// The floor of a strong hit by meaning (below it, a hit found by meaning alone is weak):
/// `embed.minSimilarity` (or its variable), else
/// [`MIN_SIMILARITY_DEFAULT`]. A value that is not a number from 0 to 1 is a warning and the
/// default.
pub fn min_similarity(home: &Home) -> f32 {
    let default = MIN_SIMILARITY_DEFAULT.parse().unwrap_or(0.3);
    let config = home.read_config().unwrap_or_default();
    match setting(&config, "embed.minSimilarity") {
        None => default,
        Some(raw) => match raw.parse::<f32>() {
            Ok(x) if (0.0..=1.0).contains(&x) => x,
            _ => {
                tracing::warn!(
                    "embed.minSimilarity {raw:?} is not a number from 0 to 1: using \
                     {MIN_SIMILARITY_DEFAULT}"
                );
                default
            }
        },
    }
}

/// The embedder `home` is configured with, if any; an incomplete or unknown configuration is
/// an error naming the key to set.
pub fn configured(home: &Home) -> Result<Option<EmbedConfig>> {
    let config = home.read_config()?;
    let Some(provider) = setting(&config, "embed.provider") else {
        return Ok(None);
    };
    let need = |key: &str, what: &str| {
        setting(&config, key).ok_or_else(|| {
            Error::Invalid(format!(
                "embed.provider is {provider}, which needs {key} ({what}): freecode config set {key} …"
            ))
        })
    };
    match provider.as_str() {
        "local" => {
            let path = need("embed.path", "the model directory")?;
            // Checked as `config set` checks it; a bad value written by hand is a warning.
            let read_tokens = setting(&config, "embed.readTokens").and_then(|raw| {
                match crate::keys::parse("embed.readTokens", &raw) {
                    Ok(v) => v.as_u64().and_then(|n| usize::try_from(n).ok()),
                    Err(e) => {
                        tracing::warn!("{e}: using {}", freecode_embed::local::DEFAULT_READ_TOKENS);
                        None
                    }
                }
            });
            Ok(Some(EmbedConfig::Local {
                path: std::path::PathBuf::from(path),
                read_tokens,
            }))
        }
        "openai" => Ok(Some(EmbedConfig::Endpoint {
            url: need("embed.baseUrl", "the endpoint's …/v1 URL")?,
            model: need("embed.model", "the model to ask for")?,
            api_key: setting(&config, "embed.apiKey"),
        })),
        other => Err(Error::Invalid(format!(
            "embed.provider {other:?} is not an embedder freecode has (one of: {}): \
             freecode config set embed.provider …",
            PROVIDERS.join(", ")
        ))),
    }
}

/// The one embedder this process has loaded, with the configuration it was loaded from.
type Loaded = Option<(EmbedConfig, Arc<dyn Embedder>)>;
static LOADED: Mutex<Loaded> = Mutex::new(None);

/// The configured embedder, loaded (once per configuration and process); `None` when none is
/// configured.
pub fn embedder(home: &Home) -> Result<Option<Arc<dyn Embedder>>> {
    let Some(config) = configured(home)? else {
        return Ok(None);
    };
    let mut loaded = LOADED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((c, e)) = loaded.as_ref()
        && *c == config
    {
        return Ok(Some(e.clone()));
    }
    let e: Arc<dyn Embedder> = Arc::from(config.open().map_err(|e| Error::Failed(e.to_string()))?);
    *loaded = Some((config, e.clone()));
    Ok(Some(e))
}

/// The configured embedder, loaded; an error saying what to set when none is configured.
pub fn required(home: &Home) -> Result<Arc<dyn Embedder>> {
    embedder(home)?.ok_or_else(|| {
        Error::Invalid(
            "no embedder is configured: set embed.provider (local or openai) and its keys \
             (freecode config list)"
                .into(),
        )
    })
}

/// Brings the chunks up to date and embeds those without a vector until none are left or
/// `budget` is spent (`None`: no limit), telling `progress` how far it is. Needs the SQLite
/// index.
pub fn fill(
    home: &Home,
    embedder: &dyn Embedder,
    budget: Option<Duration>,
    progress: &mut dyn Progress,
) -> Result<EmbedReport> {
    fill_telling(home, None, embedder, budget, progress).map(|(report, _)| report)
}

/// [`fill`], in `looked` when given (an index just brought up to date), and whether it changed
/// any chunk or vector.
fn fill_telling(
    home: &Home,
    looked: Option<&mut freecode_store::index::SessionIndex>,
    embedder: &dyn Embedder,
    budget: Option<Duration>,
    progress: &mut dyn Progress,
) -> Result<(EmbedReport, bool)> {
    let started = Instant::now();
    let mut opened = None;
    let ix = match looked {
        Some(ix) => ix,
        None => {
            let Some(ix) = open_index(home)? else {
                return Err(Error::Failed(
                    "search by meaning needs the SQLite session index, which is not available \
                     here (see FREECODE_LOG=info)"
                        .into(),
                ));
            };
            let ix = opened.insert(ix);
            ix.refresh(|done, total| progress.sessions(done, total))?;
            ix
        }
    };
    warn_problems(ix.problems());
    let sync = ix.sync_chunks(embedder.id(), embedder.window_chars())?;
    let before = ix.chunk_status()?;
    let mut embedded_now = 0u64;
    let total = before.chunks;
    let mut done = before.embedded;
    progress.chunks(
        usize::try_from(done).unwrap_or(usize::MAX),
        usize::try_from(total).unwrap_or(usize::MAX),
    );
    loop {
        if budget.is_some_and(|b| started.elapsed() >= b) {
            break;
        }
        let pending = ix.pending_chunks(BATCH)?;
        if pending.is_empty() {
            break;
        }
        let texts: Vec<&str> = pending.iter().map(|p| p.text.as_str()).collect();
        let vectors = embedder
            .embed(&texts)
            .map_err(|e| Error::Failed(e.to_string()))?;
        let rows: Vec<(i64, i64, Vec<f32>)> = pending
            .iter()
            .zip(vectors)
            .map(|(p, v)| (p.id, p.hash, v))
            .collect();
        let stored = ix.put_vectors(&rows)?;
        if stored == 0 {
            // Every chunk of the batch changed meanwhile: the next sync makes them again.
            ix.sync_chunks(embedder.id(), embedder.window_chars())?;
        }
        embedded_now += stored as u64;
        done += stored as u64;
        progress.chunks(
            usize::try_from(done).unwrap_or(usize::MAX),
            usize::try_from(total).unwrap_or(usize::MAX),
        );
    }
    let after = ix.chunk_status()?;
    let seconds = started.elapsed().as_secs_f64();
    let changed = sync.sessions > 0 || sync.chunks > 0 || embedded_now > 0;
    Ok((
        EmbedReport {
            model: embedder.id().to_owned(),
            chunks: after.chunks,
            embedded: after.embedded,
            embedded_now,
            pending: after.chunks.saturating_sub(after.embedded),
            seconds,
            database: ix.path().to_path_buf(),
        },
        changed,
    ))
}

/// How a search was asked for: a mode, or the best there is ([`None`]: both when an embedder
/// is configured, else words).
pub fn resolve_mode(home: &Home, mode: Option<SearchMode>) -> Result<SearchMode> {
    match mode {
        Some(m) => Ok(m),
        // Something set, even wrongly: both, so that a broken embedder is one warning and the
        // words' answer (see [`search`]), never a search that fails.
        None => Ok(match configured(home) {
            Ok(None) => SearchMode::Words,
            Ok(Some(_)) | Err(_) => SearchMode::Both,
        }),
    }
}

/// The hits of `q` by `mode` (see [`resolve_mode`]), one per session: each session's best
/// message, in the order of the bests, with its other matching messages as a count and their
/// ids; `q.limit` sessions. By meaning or both, the pending chunks are embedded first for up
/// to `budget`; what is still missing is only missing hits (a warning says how many). In
/// [`SearchMode::Both`], an embedder that fails is a warning and the words answer; in
/// [`SearchMode::Meaning`] it is the error.
pub fn search_by_session(
    home: &Home,
    q: &SearchQuery,
    mode: Option<SearchMode>,
    budget: Duration,
    progress: &mut dyn Progress,
) -> Result<Vec<SearchHit>> {
    let deeper = SearchQuery {
        limit: q
            .limit
            .saturating_mul(HITS_PER_SESSION)
            .min(q.limit.saturating_add(MAX_EXTRA_HITS)),
        ..q.clone()
    };
    let hits = search(home, &deeper, mode, budget, progress)?;
    Ok(SearchHit::by_session(hits, q.limit))
}

/// Messages a search by session looks at per session it answers (so a session's other
/// matching messages can be counted, and a session whose hits are all below another's
/// best still comes).
pub const HITS_PER_SESSION: usize = 5;
/// The most messages beyond `limit` a search by session looks at.
pub const MAX_EXTRA_HITS: usize = 500;

/// [`search_by_session`] message by message: the `limit` best messages, several of one
/// session as they come (`search --per-message`).
///
/// A query that is a session's id (freecode's or the one its source agent gave it, whole or a
/// unique prefix: [`crate::sessions::resolve_id`]) finds that session first ([`id_shaped`]).
pub fn search(
    home: &Home,
    q: &SearchQuery,
    mode: Option<SearchMode>,
    budget: Duration,
    progress: &mut dyn Progress,
) -> Result<Vec<SearchHit>> {
    let hits = search_text(home, q, mode, budget, progress)?;
    let Some(id) = id_shaped(&q.text) else {
        return Ok(hits);
    };
    let store = open(home)?;
    let Ok(session) = crate::sessions::resolve_id(&store, id) else {
        return Ok(hits);
    };
    let Some(hit) = freecode_store::index::session_hit(&store, &session, q)? else {
        return Ok(hits);
    };
    let mut out = Vec::with_capacity(hits.len() + 1);
    out.push(hit);
    out.extend(hits);
    out.truncate(q.limit);
    Ok(out)
}

/// The query as a session id to look up: one word of at least 8 characters holding a digit
/// (a uuid, an opencode `ses_…`, a prefix of one), never a word of prose or a code name.
pub fn id_shaped(text: &str) -> Option<&str> {
    let t = text.trim();
    (t.chars().count() >= 8
        && !t.contains(char::is_whitespace)
        && t.contains(|c: char| c.is_ascii_digit()))
    .then_some(t)
}

/// [`search`] of the words and meaning alone.
fn search_text(
    home: &Home,
    q: &SearchQuery,
    mode: Option<SearchMode>,
    budget: Duration,
    progress: &mut dyn Progress,
) -> Result<Vec<SearchHit>> {
    let mode = resolve_mode(home, mode)?;
    if mode == SearchMode::Words {
        return crate::search::search(home, q, progress);
    }
    let strict = mode == SearchMode::Meaning;
    // The model loads on a thread of its own while this one brings the index up to date (one
    // look for the whole search), reads the scope's vectors and, by both, finds the words' hits:
    // the slow steps of a search by meaning, none of which waits for another (on two cores, a
    // warm search of 10,000 sessions spends about half its time loading the model). A thread
    // that cannot be started only costs the overlap: the model loads below.
    let (vector, prepared) = std::thread::scope(|s| {
        let loading = std::thread::Builder::new()
            .name("freecode-model".into())
            .spawn_scoped(s, || {
                let _ = embedder(home);
            });
        let mut prepared = prepare(home, q, mode, progress);
        if let Ok(loading) = loading {
            let _ = loading.join();
        }
        let ix = prepared.as_mut().map(|p| &mut p.ix);
        (query_vector(home, ix, &q.text, budget, progress), prepared)
    });
    let vector = match vector {
        Ok(v) => v,
        Err(e) if !strict => {
            tracing::warn!("search by meaning unavailable ({e}); searching by words");
            return crate::search::search(home, q, progress);
        }
        Err(e) => return Err(e),
    };
    let (model, vector, changed) = vector;
    let meaning = Meaning {
        model: &model,
        vector: &vector,
        strong_similarity: min_similarity(home),
        vectors_ahead: None,
        words_ahead: None,
    };
    if let Some(mut p) = prepared {
        // What was found ahead is good unless bringing the chunks up to date changed them.
        let ahead = Meaning {
            vectors_ahead: p.vectors.as_ref().filter(|_| !changed),
            words_ahead: p.words.as_ref().filter(|_| !changed),
            ..meaning
        };
        // The damaged files of this index were reported when the pending chunks were filled.
        match p.ix.search_mode_looked(q, mode, ahead) {
            Ok(hits) => return Ok(hits),
            Err(e) => tracing::warn!("session index failed ({e}); scanning the files"),
        }
    }
    let (hits, problems) = indexed_or_scanned(
        home,
        |ix| {
            let hits = ix.search_mode(q, mode, Some(meaning))?;
            Ok((hits, ix.problems().to_vec()))
        },
        || Ok(search_scan(&open(home)?, q)?),
    )?;
    warn_problems(&problems);
    Ok(hits)
}

/// Chunks a search reads ahead at most ([`prepare`]): about 40 MB of 384-dimension vectors. A
/// larger scope is read as it is scored, in bounded memory.
const AHEAD_CHUNKS: usize = 100_000;

/// The index a search by meaning works in, brought up to date, with what it found before the
/// query's vector is known.
struct Prepared {
    ix: freecode_store::index::SessionIndex,
    /// The vectors of the search's scope (see
    /// [`freecode_store::index::SessionIndex::vectors_ahead`]); `None` past [`AHEAD_CHUNKS`].
    vectors: Option<freecode_store::index::VectorsAhead>,
    /// By both, the words' hits.
    words: Option<freecode_store::index::WordsAhead>,
}

/// The index brought up to date, and what a search by `mode` of `q` can find in it before the
/// query's vector is known; `None` when the index cannot be used (the search then says why).
fn prepare(
    home: &Home,
    q: &SearchQuery,
    mode: SearchMode,
    progress: &mut dyn Progress,
) -> Option<Prepared> {
    let mut ix = open_index(home).ok().flatten()?;
    ix.refresh(|done, total| progress.sessions(done, total))
        .ok()?;
    let vectors = ix.vectors_ahead(q, AHEAD_CHUNKS).ok().flatten();
    let words = (mode == SearchMode::Both)
        .then(|| ix.words_ahead(q).ok())
        .flatten();
    Some(Prepared { ix, vectors, words })
}

/// Embeds what is pending (within `budget`; in `ix` when given, an index just brought up to
/// date) and the query: the embedder's id, the query's vector, and whether embedding what was
/// pending changed any chunk or vector.
fn query_vector(
    home: &Home,
    ix: Option<&mut freecode_store::index::SessionIndex>,
    text: &str,
    budget: Duration,
    progress: &mut dyn Progress,
) -> Result<(String, Vec<f32>, bool)> {
    let embedder = required(home)?;
    let (report, changed) = fill_telling(home, ix, embedder.as_ref(), Some(budget), progress)?;
    if report.pending > 0 {
        tracing::warn!(
            "{} of {} {} no vector yet: hits by meaning come from the rest \
             (freecode index embed fills them)",
            report.pending,
            crate::human::plural(report.chunks, "chunk", "chunks"),
            if report.pending == 1 { "has" } else { "have" }
        );
    }
    let mut v = embedder
        .embed(&[text])
        .map_err(|e| Error::Failed(e.to_string()))?;
    let vector = v.pop().unwrap_or_default();
    Ok((embedder.id().to_owned(), vector, changed))
}

/// What the index holds and how much of it search by meaning covers, embedding nothing: the
/// index brought up to date, and the chunks too when the configured embedder loads (so that the
/// counts are those of now). Needs the SQLite index.
pub fn index_status(home: &Home, progress: &mut dyn Progress) -> Result<IndexStatus> {
    let Some(mut ix) = open_index(home)? else {
        return Err(Error::Failed(
            "the SQLite session index is not available here (see FREECODE_LOG=info)".into(),
        ));
    };
    ix.refresh(|done, total| progress.sessions(done, total))?;
    let (sessions, messages) = ix.counts()?;
    // Words only when nothing is configured; else the embedder, or why it cannot be used.
    let meaning = if matches!(configured(home), Ok(None)) {
        None
    } else {
        let problem = match required(home) {
            Ok(e) => {
                ix.sync_chunks(e.id(), e.window_chars())?;
                None
            }
            Err(e) => Some(e.to_string()),
        };
        let s = ix.chunk_status()?;
        Some(MeaningStatus {
            model: s.model,
            chunks: s.chunks,
            embedded: s.embedded,
            pending: s.chunks.saturating_sub(s.embedded),
            coverage: if s.chunks == 0 {
                1.0
            } else {
                s.embedded as f64 / s.chunks as f64
            },
            problem,
        })
    };
    let database = ix.path().to_path_buf();
    let size = |p: &std::path::Path| std::fs::metadata(p).map_or(0, |m| m.len());
    let mut wal = database.clone().into_os_string();
    wal.push("-wal");
    Ok(IndexStatus {
        database_bytes: size(&database) + size(std::path::Path::new(&wal)),
        database,
        sessions,
        messages,
        problems: crate::types::Problem::all(ix.problems()),
        meaning,
    })
}

/// Keeps the vectors of `home` filled while a server runs: a thread that, when an embedder is
/// configured, embeds what is pending every `every` (a failure is logged once until it
/// changes, and retried). Stops when `stop` is set.
pub fn spawn_filler(
    home: Home,
    every: Duration,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("embed".into())
        .spawn(move || {
            let mut last_error = String::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                // A round at a time, so that a stop is seen between rounds.
                let result = embedder(&home).and_then(|e| match e {
                    Some(e) => fill(&home, e.as_ref(), Some(ROUND), &mut crate::Silent).map(Some),
                    None => Ok(None),
                });
                let more = matches!(&result, Ok(Some(r)) if r.pending > 0);
                match result {
                    Ok(Some(r)) if r.embedded_now > 0 => {
                        tracing::info!(
                            "embedded {} ({} of {} {})",
                            crate::human::plural(r.embedded_now, "chunk", "chunks"),
                            r.embedded,
                            r.chunks,
                            if r.embedded == 1 {
                                "has a vector"
                            } else {
                                "have vectors"
                            }
                        );
                        last_error.clear();
                    }
                    Ok(_) => last_error.clear(),
                    Err(e) => {
                        let msg = e.to_string();
                        if msg != last_error {
                            tracing::warn!("search by meaning: {msg}");
                            last_error = msg;
                        }
                    }
                }
                if more {
                    continue;
                }
                // Sleep in small steps, so that a stop is seen soon.
                let until = Instant::now() + every;
                while Instant::now() < until && !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        })
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_default_config_list_shows_is_the_embedders() {
        assert_eq!(
            crate::keys::READ_TOKENS_DEFAULT.parse::<usize>().ok(),
            Some(freecode_embed::local::DEFAULT_READ_TOKENS)
        );
    }
}
