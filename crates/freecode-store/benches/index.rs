//! Session-index benchmarks: what the SQLite index (`state/freecode.db`) buys over scanning the
//! files, each figure beside the scan it replaces, measured in the same run.
//!
//! 1. **List** 10,000 sessions whose `messages.jsonl` are sparse files of 16 GiB each (156 TiB
//!    apparent, one 4 KiB block each on disk): `SessionStore::list` (reads every `meta.json`)
//!    against `SessionIndex::list` (one `stat` per session once fresh), first and repeated calls,
//!    and the first fill of the index by `list()` (metas only). What `refresh()` does with a huge
//!    unterminated tail is measured on one session with a modest hole, in child processes.
//! 2. **Search** over 1,000,000 messages (1,000 sessions × 1,000 messages written through the
//!    store at `Durability::Never`, each with a rollout log): `SessionIndex::search` for a rare
//!    word, a common word and two words, against a raw scan of the same logs (read every
//!    `messages.jsonl`, find the lines holding the words) and `search_scan`; the time to index
//!    everything from scratch; where a search's time goes (the refresh it starts with and the
//!    SQL alone, on a second connection); and what a CLI command pays to open the index
//!    (`open_thread_store` + `SessionIndex::open`, each running `PRAGMA quick_check`).
//! 3. **Incremental update** after one message appended to one session: `refresh()` and a
//!    search right after, against a full `rebuild()`.
//! 4. **Stats** over everything: `stats(&StatsScope::All)` against `stats_scan`.
//!
//! Temp dirs live under the target directory (real disk, never a tmpfs); the page cache is warm
//! for both sides of every comparison. Times are medians. `FREECODE_BENCH_QUICK=1` scales the
//! session counts down ten times. The binary re-executes itself with `--child-refresh` or
//! `--child-writer` to measure peak memory in a fresh process; every other argument (such as
//! `--bench`, which `cargo bench` passes) is ignored.

use std::collections::BTreeSet;
use std::fs::{self, File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use freecode_core::message::{Part, Role, StoredMessage, Usage};
use freecode_core::{SessionId, SessionMeta};
use freecode_store::index::{
    SearchHit, SearchQuery, SessionIndex, StatsScope, search_scan, stats_scan,
};
use freecode_store::lock::LockWait;
use freecode_store::rollout::{ModelRequest, ModelResponse, Recorder, RecorderConfig};
use freecode_store::threads::{BackendChoice, BackendKind, open_thread_store};
use freecode_store::{Durability, Home, ListFilter, NewSession, SessionStore, StoreConfig};
use rusqlite::{Connection, OpenFlags};
use serde_json::json;
use tempfile::TempDir;

#[path = "common/mod.rs"]
mod common;

use common::{
    Res, bench_base as bench_base_in, fmt_dur, fs_type, median, settle, time, vm_hwm_kib,
};

fn bench_base() -> Res<std::path::PathBuf> {
    bench_base_in("freecode-index-bench")
}

const GIB: u64 = 1024 * 1024 * 1024;
const MIB: u64 = 1024 * 1024;

/// One message in this many carries the rare word.
const RARE_EVERY: u64 = 10_000;
const RARE: &str = "xylophone";
const COMMON_WORD: &str = "file";
/// Each in one message in 25, independently: both in about one in 625.
const PAIR: [&str; 2] = ["deadline", "retry"];
/// The search limit of `freecode search`.
const LIMIT: usize = 20;

// ----- counts ----------------------------------------------------------------------------------

struct Scale {
    quick: bool,
    /// Sessions of the listing home (row 1).
    list_sessions: u64,
    /// The hole of each of their logs.
    hole: u64,
    /// The hole of the one session `refresh()` is tried on.
    probe_hole: u64,
    /// Sessions of the search home (rows 2–4), and messages each.
    sessions: u64,
    per_session: u64,
}

impl Scale {
    fn from_env() -> Self {
        let quick = std::env::var("FREECODE_BENCH_QUICK").is_ok_and(|v| !v.is_empty() && v != "0");
        let d = if quick { 10 } else { 1 };
        Self {
            quick,
            list_sessions: 10_000 / d,
            hole: 16 * GIB,
            probe_hole: if quick { 128 * MIB } else { GIB },
            sessions: 1_000 / d,
            per_session: 1_000,
        }
    }
}

// ----- deterministic text ----------------------------------------------------------------------

/// splitmix64: deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Everyday words of a coding conversation (none begins with a query word).
const COMMON: &[&str] = &[
    "the", "to", "a", "of", "and", "in", "is", "it", "that", "for", "this", "we", "on", "with",
    "not", "be", "call", "function", "return", "value", "error", "test", "type", "read", "write",
    "path", "line", "string", "config", "module", "update", "check", "build", "store", "cache",
    "message", "session", "handler", "request", "response", "result", "option", "import", "export",
    "async", "await", "match", "struct", "loop", "thread", "lock", "buffer", "output", "input",
    "parse", "token", "query", "user", "agent", "tool", "time", "offset", "length", "entry", "now",
    "then", "because", "when", "should", "instead",
];

/// Syllables of the identifiers (8,400 of two or three syllables; none makes a query word).
const SYLLABLES: &[&str] = &[
    "ka", "lo", "mi", "ren", "tor", "vu", "sel", "dra", "fin", "gol", "pen", "qua", "bri", "ston",
    "wen", "zu", "har", "mon", "tel", "bas",
];

struct Corpus {
    idents: Vec<String>,
    rng: Rng,
}

impl Corpus {
    fn new(seed: u64) -> Self {
        let mut idents = Vec::new();
        for a in SYLLABLES {
            for b in SYLLABLES {
                idents.push(format!("{a}{b}"));
                for c in SYLLABLES {
                    idents.push(format!("{a}{b}{c}"));
                }
            }
        }
        Self {
            idents,
            rng: Rng(seed),
        }
    }

    /// A word: everyday words and identifiers, both skewed towards a few frequent ones.
    fn word(&mut self) -> &str {
        let u = self.rng.unit();
        if self.rng.below(10) < 6 {
            COMMON[(u * u * COMMON.len() as f64) as usize % COMMON.len()]
        } else {
            let n = self.idents.len();
            &self.idents[(u * u * u * n as f64) as usize % n]
        }
    }

    fn sentence(&mut self, lo: u64, hi: u64, out: &mut String) {
        let n = self.rng.range(lo, hi);
        for i in 0..n {
            if i > 0 {
                out.push(' ');
            }
            let w = self.word().to_owned();
            out.push_str(&w);
            if self.rng.below(12) == 0 {
                out.push(',');
            }
        }
        out.push('.');
    }

    fn path(&mut self) -> String {
        let a = self.word().to_owned();
        let b = self.idents[self.rng.below(self.idents.len() as u64) as usize].clone();
        format!("src/{a}/{b}.rs")
    }

    fn code(&mut self, lo: u64, hi: u64) -> String {
        let mut out = String::new();
        for _ in 0..self.rng.range(lo, hi) {
            let f = self.word().to_owned();
            let g = self.word().to_owned();
            let t = self.word().to_owned();
            out.push_str(&format!(
                "fn {f}_{g}(&self, {t}: &str) -> Result<()> {{ // "
            ));
            self.sentence(3, 8, &mut out);
            out.push_str("\n}\n");
        }
        out
    }

    /// The special words message `g` carries, as a phrase to append.
    fn specials(&mut self, g: u64) -> String {
        let mut s = String::new();
        if g % RARE_EVERY == RARE_EVERY / 2 {
            s.push_str(" The ");
            s.push_str(RARE);
            s.push_str(" case again.");
        }
        for w in PAIR {
            if self.rng.below(25) == 0 {
                s.push(' ');
                s.push_str(w);
            }
        }
        s
    }

    /// Message `g` of the five-message turn cycle: prompt, answer, `read_file`, `grep`, answer
    /// with code. About 95% of them hold the common word.
    fn message(&mut self, g: u64) -> StoredMessage {
        let id = format!("{:08x}-5e55-4a1b-8c0d-{g:012x}", g / 1_000_000);
        let ts = 1_760_000_000_000 + g as i64 * 1_000;
        let extra = self.specials(g);
        match g % 5 {
            0 => {
                let mut t = format!("Can you look at the file {} and ", self.path());
                self.sentence(8, 24, &mut t);
                t.push_str(&extra);
                StoredMessage::new(id, Role::User, vec![Part::text(t)], ts)
            }
            1 => {
                let mut t = String::new();
                if self.rng.below(10) < 8 {
                    t.push_str("Reading the file first. ");
                }
                self.sentence(30, 80, &mut t);
                t.push_str(&extra);
                let mut m = StoredMessage::new(id, Role::Assistant, vec![Part::text(t)], ts);
                let mut u = Usage::new(self.rng.range(8_000, 40_000), self.rng.range(50, 900));
                u.cache_read_input_tokens = Some(self.rng.range(0, 8_000));
                m.usage = Some(Box::new(u));
                m
            }
            2 => {
                let path = self.path();
                let mut r = format!("// {path}\n");
                r.push_str(&self.code(6, 16));
                r.push_str(&extra);
                let part = Part::tool("read_file", json!({ "path": path }), r);
                StoredMessage::new(id, Role::Assistant, vec![part], ts)
            }
            3 => {
                let pattern = self.word().to_owned();
                let mut r = String::new();
                for _ in 0..self.rng.range(2, 4) {
                    r.push_str(&format!("{}:{}: ", self.path(), self.rng.range(1, 900)));
                    self.sentence(5, 10, &mut r);
                    r.push('\n');
                }
                r.push_str(&extra);
                let part = Part::tool("grep", json!({ "pattern": pattern, "path": "src" }), r);
                let mut m = StoredMessage::new(id, Role::Assistant, vec![part], ts);
                m.usage = Some(Box::new(Usage::new(
                    self.rng.range(8_000, 40_000),
                    self.rng.range(20, 200),
                )));
                m
            }
            _ => {
                let mut t = String::from("Change the file like this:");
                self.sentence(8, 20, &mut t);
                t.push_str(&extra);
                let code = self.code(2, 6);
                StoredMessage::new(
                    id,
                    Role::Assistant,
                    vec![Part::text(t), Part::code("rust", code)],
                    ts,
                )
            }
        }
    }
}

fn new_session(i: u64, per_project: u64) -> NewSession {
    NewSession {
        title: format!("Session {i}: why is the index slow?"),
        project_path: format!("/home/dev/work/project-{}", i / per_project),
        provider: "anthropic".to_owned(),
        model: Some("claude-sonnet-4-5".to_owned()),
    }
}

/// A clock for the rollout logs: monotonic, with varied gaps so spans have varied durations.
static CLOCK: AtomicI64 = AtomicI64::new(0);

fn fake_clock() -> i64 {
    let c = CLOCK.fetch_add(1, Ordering::Relaxed);
    1_760_000_000_000 + c * 1_000 + (c.wrapping_mul(2_654_435_761) % 997).abs()
}

// ----- plumbing --------------------------------------------------------------------------------

struct Dirs {
    base: PathBuf,
    /// Removed at the end (or on an error return).
    graveyard: Vec<TempDir>,
}

impl Dirs {
    fn fresh(&mut self) -> Res<PathBuf> {
        let d = tempfile::Builder::new()
            .prefix("run-")
            .tempdir_in(&self.base)?;
        let p = d.path().to_owned();
        self.graveyard.push(d);
        Ok(p)
    }
}

fn store_at(home: &Home) -> Res<SessionStore> {
    Ok(SessionStore::with_config(
        home.clone(),
        StoreConfig {
            durability: Durability::Never,
            ..Default::default()
        },
    )?)
}

/// The median of `runs` timings (3 when one run takes over half a second), after one warm-up
/// run whose result is returned.
fn timed<T>(runs: usize, mut f: impl FnMut() -> Res<T>) -> Res<(Duration, T)> {
    let (first, v) = time(&mut f)?;
    let runs = if first > Duration::from_millis(500) {
        3.min(runs)
    } else {
        runs
    };
    let mut ts = Vec::with_capacity(runs);
    for _ in 0..runs {
        ts.push(time(&mut f)?.0);
    }
    Ok((median(&mut ts), v))
}

fn fmt_size(b: u64) -> String {
    let b = b as f64;
    let k = 1024.0;
    if b >= k * k * k * k {
        format!("{:.1} TiB", b / (k * k * k * k))
    } else if b >= k * k * k {
        format!("{:.2} GiB", b / (k * k * k))
    } else if b >= k * k {
        format!("{:.1} MiB", b / (k * k))
    } else if b >= k {
        format!("{:.1} KiB", b / k)
    } else {
        format!("{b} B")
    }
}

// ----- the table -------------------------------------------------------------------------------

struct Row {
    id: String,
    name: String,
    n: u64,
    ours: Duration,
    /// What it is compared with, and that one's time.
    vs: Option<(String, Duration)>,
    /// At least this many times faster than `vs`.
    goal: Option<f64>,
}

impl Row {
    fn new(id: &str, name: impl Into<String>, n: u64, ours: Duration) -> Self {
        Self {
            id: id.to_owned(),
            name: name.into(),
            n,
            ours,
            vs: None,
            goal: None,
        }
    }
    fn vs(mut self, what: impl Into<String>, t: Duration) -> Self {
        self.vs = Some((what.into(), t));
        self
    }
    fn goal(mut self, g: f64) -> Self {
        self.goal = Some(g);
        self
    }
    fn ratio(&self) -> Option<f64> {
        self.vs
            .as_ref()
            .map(|(_, t)| t.as_secs_f64() / self.ours.as_secs_f64().max(1e-12))
    }
}

fn print_table(rows: &[Row]) {
    println!("| # | benchmark | n | total | per item | compared with | its total | ratio | goal |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for r in rows {
        let per = Duration::from_secs_f64(r.ours.as_secs_f64() / r.n.max(1) as f64);
        let (what, theirs) =
            r.vs.as_ref()
                .map_or(("—".to_owned(), "—".to_owned()), |(w, t)| {
                    (w.clone(), fmt_dur(*t))
                });
        let ratio = r.ratio().map_or("—".to_owned(), |x| {
            if x >= 1.0 {
                format!("{x:.1}× faster")
            } else {
                format!("{:.1}× slower", 1.0 / x.max(1e-12))
            }
        });
        let goal = match r.goal {
            None => "—".to_owned(),
            Some(g) => {
                let ok = r.ratio().is_some_and(|x| x >= g);
                format!("≥{g}×: {}", if ok { "MET" } else { "MISSED" })
            }
        };
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.id,
            r.name,
            r.n,
            fmt_dur(r.ours),
            fmt_dur(per),
            what,
            theirs,
            ratio,
            goal
        );
    }
}

// ----- raw baselines ---------------------------------------------------------------------------

/// `sessions/<p>/<id>` directories, from `read_dir`.
fn session_dirs(home: &Home) -> Res<Vec<PathBuf>> {
    let mut out = Vec::new();
    for pd in fs::read_dir(home.sessions_dir())? {
        let pd = pd?;
        if pd.file_name().as_encoded_bytes().starts_with(b".") {
            continue;
        }
        for sd in fs::read_dir(pd.path())? {
            out.push(sd?.path());
        }
    }
    Ok(out)
}

/// `read_dir` of every project directory and one `stat` of each `meta.json`: the floor of a
/// freshness check.
fn raw_stat_metas(home: &Home) -> Res<u64> {
    let mut n = 0;
    for d in session_dirs(home)? {
        n += u64::from(fs::metadata(d.join("meta.json"))?.len() > 0);
    }
    Ok(n)
}

/// `read_dir` and `fs::read` of every `meta.json`, one thread: the floor of a scan listing.
fn raw_read_metas(home: &Home) -> Res<u64> {
    let mut n = 0;
    for d in session_dirs(home)? {
        n += u64::from(!fs::read(d.join("meta.json"))?.is_empty());
    }
    Ok(n)
}

/// Reads every `messages.jsonl` whole and counts the lines holding every word (a plain
/// substring test, case-sensitive: the words are lower-case in the data). Returns the lines
/// that match and the bytes read.
fn raw_grep(logs: &[PathBuf], words: &[&str]) -> Res<(u64, u64)> {
    let (mut hits, mut bytes) = (0u64, 0u64);
    for p in logs {
        let buf = fs::read(p)?;
        bytes += buf.len() as u64;
        let text = std::str::from_utf8(&buf)?;
        for line in text.split('\n') {
            if words.iter().all(|w| line.contains(w)) {
                hits += 1;
            }
        }
    }
    Ok((hits, bytes))
}

/// Reads `path` from `from` to its end in 256 KiB reads, counting the newlines.
fn raw_read_from(path: &Path, from: u64) -> Res<(u64, u64)> {
    use std::io::{Seek, SeekFrom};
    let mut f = File::open(path)?;
    f.seek(SeekFrom::Start(from))?;
    let mut buf = vec![0u8; 256 * 1024];
    let (mut bytes, mut newlines) = (0u64, 0u64);
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        bytes += n as u64;
        newlines += buf[..n].iter().filter(|&&b| b == b'\n').count() as u64;
    }
    Ok((bytes, newlines))
}

// ----- row 1: listing sessions with huge sparse logs -------------------------------------------

/// Creates `n` sessions (100 per project), each with three real messages followed by a hole of
/// `hole` bytes. Returns the apparent and the allocated size of the logs.
fn build_sparse_home(home: &Home, n: u64, hole: u64) -> Res<(Duration, u64, u64)> {
    let store = store_at(home)?;
    let mut corpus = Corpus::new(7);
    let mut logs = Vec::with_capacity(n as usize);
    let (t, ()) = time(|| {
        for i in 0..n {
            let id = store.create(new_session(i, 100))?;
            let mut w = store.writer(&id)?;
            for k in 0..3 {
                w.append(&corpus.message(i * 5 + k))?;
            }
            let log = w.paths().messages();
            drop(w);
            let f = OpenOptions::new().write(true).open(&log)?;
            let len = f.metadata()?.len();
            // A hole: no block is written, the file just claims `hole` more bytes of zeros.
            f.set_len(len + hole)?;
            logs.push(log);
            if (i + 1) % 1_000 == 0 {
                eprintln!("  {} / {n} sparse sessions", i + 1);
            }
        }
        Ok(())
    })?;
    let (mut apparent, mut allocated) = (0u64, 0u64);
    for l in &logs {
        let m = fs::metadata(l)?;
        apparent += m.len();
        allocated += m.blocks() * 512;
    }
    Ok((t, apparent, allocated))
}

/// Rewrites one session's `meta.json` as another process would (temp + rename), with a new title.
fn touch_meta(dir: &Path, k: usize) -> Res<()> {
    let path = dir.join("meta.json");
    let mut v: serde_json::Value = serde_json::from_slice(&fs::read(&path)?)?;
    if let Some(o) = v.as_object_mut() {
        o.insert("title".to_owned(), json!(format!("renamed {k}")));
    }
    let tmp = dir.join(".meta.json.bench-tmp");
    fs::write(&tmp, serde_json::to_vec_pretty(&v)?)?;
    fs::rename(&tmp, &path)?;
    Ok(())
}

fn ids_of(l: &freecode_store::Listing) -> Vec<&str> {
    l.sessions.iter().map(|m| m.id.as_str()).collect()
}

fn bench_list(
    dirs: &mut Dirs,
    scale: &Scale,
    rows: &mut Vec<Row>,
    notes: &mut Vec<String>,
) -> Res<()> {
    let n = scale.list_sessions;
    let home = Home::new(dirs.fresh()?.join("home"));
    eprintln!(
        "[1] creating {n} sessions with {} sparse logs",
        fmt_size(scale.hole)
    );
    let (t_build, apparent, allocated) = build_sparse_home(&home, n, scale.hole)?;
    notes.push(format!(
        "row 1 home: {n} sessions, each messages.jsonl = 3 real lines + a {} hole; apparent size of the logs {} ({apparent} B), allocated on disk {}; built in {}",
        fmt_size(scale.hole),
        fmt_size(apparent),
        fmt_size(allocated),
        fmt_dur(t_build)
    ));
    settle();
    let store = store_at(&home)?;
    let filter = ListFilter::default();
    let repeats = 10;

    let (scan_first, scan_listing) = time(|| Ok(store.list(&filter)?))?;
    if scan_listing.sessions.len() as u64 != n || !scan_listing.problems.is_empty() {
        return Err(format!(
            "scan listed {} sessions, {} problems; expected {n}",
            scan_listing.sessions.len(),
            scan_listing.problems.len()
        )
        .into());
    }
    let (scan_rep, _) = timed(repeats, || Ok(store.list(&filter)?.sessions.len()))?;
    let (raw_read, k) = timed(repeats, || raw_read_metas(&home))?;
    let (raw_stat, k2) = timed(repeats, || raw_stat_metas(&home))?;
    if k != n || k2 != n {
        return Err(format!("raw listing saw {k} / {k2} metas, expected {n}").into());
    }

    // The index: a fresh database filled by list() (metas only — no log is opened).
    let (ix_first, (mut ix, ix_listing)) = time(|| {
        let mut ix = SessionIndex::open(&home)?;
        let l = ix.list(&filter)?;
        Ok((ix, l))
    })?;
    if ids_of(&ix_listing) != ids_of(&scan_listing) {
        notes.push("BUG: SessionIndex::list and SessionStore::list disagree on the sessions or their order".to_owned());
    }
    let (ix_rep, _) = timed(repeats, || Ok(ix.list(&filter)?.sessions.len()))?;
    let db = ix.path().to_owned();
    drop(ix);
    // Where a fresh list() goes beyond the stats: its two queries and the meta parses.
    let conn = Connection::open_with_flags(&db, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    let (q_stamps, _) = timed(repeats, || {
        let mut stmt = conn.prepare_cached(
            "SELECT id, metaMtimeNs, metaSize, metaIno, projectDir FROM idx_sessions",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                (
                    r.get::<_, i64>(1)?,
                    r.get::<_, i64>(2)?,
                    r.get::<_, i64>(3)?,
                    r.get::<_, String>(4)?,
                ),
            ))
        })?;
        Ok(rows
            .collect::<Result<std::collections::HashMap<_, _>, _>>()?
            .len())
    })?;
    let (q_json, metas) = timed(repeats, || {
        let mut stmt = conn.prepare_cached(
            "SELECT id, metaJson FROM idx_sessions ORDER BY lastTurnAt DESC, createdAt DESC, id",
        )?;
        let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    })?;
    let (parse, _) = timed(repeats, || {
        let mut k = 0usize;
        for (_, j) in &metas {
            let m: SessionMeta = serde_json::from_str(j)?;
            k += m.title.len();
        }
        Ok(k)
    })?;
    drop(conn);
    notes.push(format!(
        "1d attribution ({n} sessions): read_dir + stat of every meta.json {} (1h); SELECT of the stamps into a HashMap {}; SELECT of every metaJson in list order {}; parsing those metaJson into SessionMeta {}; freecode.db {}",
        fmt_dur(raw_stat),
        fmt_dur(q_stamps),
        fmt_dur(q_json),
        fmt_dur(parse),
        fmt_size(fs::metadata(&db)?.len())
    ));
    let (ix_open, _) = timed(repeats, || Ok(SessionIndex::open(&home)?))?;
    let (ix_reopen, l) = timed(repeats, || {
        let mut ix = SessionIndex::open(&home)?;
        Ok(ix.list(&filter)?.sessions.len())
    })?;
    if l as u64 != n {
        return Err(format!("index listed {l} sessions after a re-open, expected {n}").into());
    }
    // One meta rewritten by another process before each call: one meta.json read.
    let sdirs = session_dirs(&home)?;
    let mut ix = SessionIndex::open(&home)?;
    let mut stale = Vec::new();
    for (k, d) in sdirs.iter().take(repeats).enumerate() {
        touch_meta(d, k)?;
        stale.push(time(|| Ok(ix.list(&filter)?.sessions.len()))?.0);
    }
    let stale = median(&mut stale);
    let check = ix.list(&filter)?;
    let scan_check = store.list(&filter)?;
    if ids_of(&check) != ids_of(&scan_check)
        || check
            .sessions
            .iter()
            .zip(&scan_check.sessions)
            .any(|(a, b)| a.title != b.title)
    {
        notes.push(
            "BUG: after metas were rewritten, SessionIndex::list differs from the scan".to_owned(),
        );
    }
    drop(ix);

    let label = format!("{n} sessions ({} of sparse logs)", fmt_size(apparent));
    rows.push(
        Row::new(
            "1a",
            format!("scan: SessionStore::list, {label}, first call"),
            n,
            scan_first,
        )
        .vs("raw: read_dir + fs::read of each meta.json", raw_read),
    );
    rows.push(
        Row::new(
            "1b",
            format!("scan: SessionStore::list, median of {repeats}"),
            n,
            scan_rep,
        )
        .vs("raw: read_dir + fs::read of each meta.json", raw_read),
    );
    rows.push(
        Row::new(
            "1c",
            "index: open + first list() on an empty db (reads + inserts every meta)",
            n,
            ix_first,
        )
        .vs("1a scan, first call", scan_first),
    );
    rows.push(
        Row::new(
            "1d",
            format!("index: list() when fresh, same connection, median of {repeats}"),
            n,
            ix_rep,
        )
        .vs("1b scan, repeated", scan_rep),
    );
    rows.push(
        Row::new(
            "1e",
            format!("index: open + list() when fresh (a new CLI process), median of {repeats}"),
            n,
            ix_reopen,
        )
        .vs("1b scan, repeated", scan_rep),
    );
    rows.push(Row::new(
        "1f",
        "  └ of which SessionIndex::open alone",
        1,
        ix_open,
    ));
    rows.push(
        Row::new(
            "1g",
            "index: list() after one meta.json was rewritten (1 meta read)",
            n,
            stale,
        )
        .vs("1b scan, repeated", scan_rep),
    );
    rows.push(
        Row::new(
            "1h",
            "  └ raw floor of a freshness check: read_dir + stat of each meta.json",
            n,
            raw_stat,
        )
        .vs("1d index list, fresh", ix_rep),
    );
    Ok(())
}

// ----- row 1, the refresh probe: one session with a hole ----------------------------------------

/// Runs this binary as a child; returns its report line's numbers.
fn child(args: &[&str]) -> Res<Vec<u64>> {
    let out = Command::new(std::env::current_exe()?).args(args).output()?;
    if !out.status.success() {
        return Err(format!(
            "child {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    let text = String::from_utf8(out.stdout)?;
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("CHILD "))
        .ok_or("child printed no report")?;
    Ok(line
        .split_whitespace()
        .map(str::parse)
        .collect::<Result<Vec<u64>, _>>()?)
}

/// Child report: [peak RSS before KiB, peak RSS after KiB, count, ns].
fn child_report(args: &[&str]) -> Res<(u64, u64, u64, Duration)> {
    let v = child(args)?;
    let [before, after, count, ns] = v[..] else {
        return Err("bad child report".into());
    };
    Ok((before, after, count, Duration::from_nanos(ns)))
}

fn bench_sparse_refresh(
    dirs: &mut Dirs,
    scale: &Scale,
    rows: &mut Vec<Row>,
    notes: &mut Vec<String>,
) -> Res<()> {
    let hole = scale.probe_hole;
    let home = Home::new(dirs.fresh()?.join("home"));
    let store = store_at(&home)?;
    let mut corpus = Corpus::new(11);
    let id = store.create(new_session(0, 100))?;
    let log = {
        let mut w = store.writer(&id)?;
        for k in 0..3 {
            w.append(&corpus.message(k))?;
        }
        w.paths().messages()
    };
    let real = fs::metadata(&log)?.len();
    OpenOptions::new()
        .write(true)
        .open(&log)?
        .set_len(real + hole)?;
    settle();
    eprintln!(
        "[1] refresh() on one session with a {} hole",
        fmt_size(hole)
    );
    let home_s = home.root().to_string_lossy().into_owned();
    let (b1, a1, m1, t1) = child_report(&["--child-refresh", &home_s])?;
    let (b2, a2, m2, t2) = child_report(&["--child-refresh", &home_s])?;
    let (raw, (bytes, newlines)) = time(|| raw_read_from(&log, real))?;
    if bytes != hole || newlines != 0 {
        return Err(format!("the hole read back as {bytes} B with {newlines} newlines").into());
    }
    let mut ix = SessionIndex::open(&home)?;
    let (t_search, hits) = time(|| {
        Ok(ix.search(&SearchQuery {
            text: COMMON_WORD.to_owned(),
            limit: LIMIT,
            ..Default::default()
        })?)
    })?;
    let (t_list, _) = time(|| Ok(ix.list(&ListFilter::default())?))?;
    drop(ix);
    rows.push(
        Row::new(
            "1i",
            format!(
                "index: first refresh(), 1 session = 3 lines + {} hole (fresh process)",
                fmt_size(hole)
            ),
            1,
            t1,
        )
        .vs("raw: read the hole in 256 KiB reads", raw),
    );
    rows.push(
        Row::new(
            "1j",
            "index: second refresh(), nothing changed (fresh process)",
            1,
            t2,
        )
        .vs("raw: read the hole in 256 KiB reads", raw),
    );
    rows.push(Row::new(
        "1k",
        "index: search() on that home (refreshes first)",
        1,
        t_search,
    ));
    rows.push(Row::new(
        "1l",
        "index: list() on that home (metas only)",
        1,
        t_list,
    ));
    let per_gib = t2.as_secs_f64() / (hole as f64 / GIB as f64);
    let projected = per_gib * (scale.hole as f64 / GIB as f64) * scale.list_sessions as f64;
    notes.push(format!(
        "FINDING (refresh over a huge unterminated tail): derive::read_from reads lines until an unterminated one, and a hole of NULs has no newline, so refresh() reads the whole {} hole looking for one — {} the first time ({} messages indexed, peak RSS {} → {} KiB), and again every time ({} on the second refresh, {} messages, peak RSS {} → {} KiB), because the watermark stays at the last newline while the size stays above it: every search() and stats() pays it. LineReader keeps at most MAX_LINE_BYTES (16 MiB) of the unterminated line in memory. At the measured {:.2} s/GiB, a refresh of the row-1 home ({} sessions × {}) would take ~{:.0} h — which is why row 1 fills the index with list() (metas only) and never calls refresh() there. {hits} hits for {COMMON_WORD:?} in the search right after ({}).",
        fmt_size(hole),
        fmt_dur(t1),
        m1,
        b1,
        a1,
        fmt_dur(t2),
        m2,
        b2,
        a2,
        per_gib,
        scale.list_sessions,
        fmt_size(scale.hole),
        projected / 3600.0,
        fmt_dur(t_search),
        hits = hits.len(),
    ));

    // What a writer does with the same tail: it cuts it, copying it to messages.jsonl.torn.
    let (wb, wa, cut, tw) = child_report(&["--child-writer", &home_s, id.as_str()])?;
    let torn = fs::metadata(log.with_file_name("messages.jsonl.torn"))
        .map(|m| m.len())
        .unwrap_or(0);
    rows.push(Row::new(
        "1m",
        format!(
            "store.writer() on that session: cuts the {} NUL tail (fresh process)",
            fmt_size(hole)
        ),
        1,
        tw,
    ));
    notes.push(format!(
        "FINDING (a writer over a huge unterminated tail): SessionWriter::open → repair_torn_tail scans back from the end 64 KiB at a time for a newline, then allocates the whole tail in one Vec (`vec![0u8; len - cut]`) and writes it to messages.jsonl.torn with an fsync: {} for a {} tail, {cut} B cut, peak RSS {} → {} KiB, messages.jsonl.torn = {} B (allocated on disk, no longer sparse). A tail of many GB (row 1's logs) would need that much RAM and disk; not run there.",
        fmt_dur(tw),
        fmt_size(hole),
        wb,
        wa,
        torn
    ));
    Ok(())
}

// ----- rows 2–4: one million messages ----------------------------------------------------------

fn recorder_config() -> RecorderConfig {
    RecorderConfig {
        enabled: true,
        durability: Durability::Never,
        lock_wait: LockWait::Fail,
        clock: fake_clock,
        flush_window: freecode_store::rollout::FLUSH_WINDOW,
    }
}

const TOOLS: [&str; 4] = ["read_file", "grep", "bash", "edit"];

/// Writes `sessions × per_session` messages through the store (one writer per session), and per
/// five-message turn five rollout events: turn.started, model.request, model.response,
/// function.call, function.output.
fn build_corpus(home: &Home, scale: &Scale) -> Res<(Vec<SessionId>, Duration)> {
    let store = store_at(home)?;
    let mut corpus = Corpus::new(42);
    let mut ids = Vec::new();
    let (t, ()) = time(|| {
        let mut g = 0u64;
        for s in 0..scale.sessions {
            let id = store.create(new_session(s, 10))?;
            let mut w = store.writer(&id)?;
            let mut rec = Recorder::open(home, &id, recorder_config())?;
            for k in 0..scale.per_session {
                let m = corpus.message(g);
                w.append(&m)?;
                if k % 5 == 0 {
                    let turn = format!("turn-{}", k / 5);
                    let tool = TOOLS[(k / 5 % 4) as usize];
                    rec.turn_started(&turn)?;
                    let call = rec.model_request(
                        &turn,
                        ModelRequest {
                            provider: "anthropic".to_owned(),
                            model: "claude-sonnet-4-5".to_owned(),
                            message_count: k + 1,
                            tool_count: 12,
                            prompt_chars: 4_000 + k * 500,
                            streamed: true,
                        },
                    )?;
                    call.response(
                        &mut rec,
                        ModelResponse {
                            input_tokens: Some(10_000 + k * 30),
                            output_tokens: Some(200 + k % 700),
                            cache_read_tokens: Some(8_000),
                            cache_write_tokens: Some(k % 3 * 100),
                            tool_calls: vec![tool.to_owned()],
                            text_chars: 600,
                            ..Default::default()
                        },
                    )?;
                    let tc = rec.function_call(&turn, tool, json!({ "path": "src/lib.rs" }))?;
                    tc.output(&mut rec, "ok: 42 lines", (k / 5) % 37 == 0)?;
                }
                g += 1;
            }
            drop(w);
            ids.push(id);
            if (s + 1) % 100 == 0 {
                eprintln!(
                    "  {} / {} sessions × {} messages",
                    s + 1,
                    scale.sessions,
                    scale.per_session
                );
            }
        }
        Ok(())
    })?;
    Ok((ids, t))
}

fn hit_keys(hits: &[SearchHit]) -> BTreeSet<(String, String)> {
    hits.iter()
        .map(|h| (h.session_id.clone(), h.message_id.clone()))
        .collect()
}

fn query(text: &str, limit: usize) -> SearchQuery {
    SearchQuery {
        text: text.to_owned(),
        limit,
        ..Default::default()
    }
}

/// The search statement of `SessionIndex::search`, and reductions of it, for attributing time.
const SQL_SEARCH: &str =
    "SELECT m.sessionId, s.metaJson, s.projectPath, m.msgId, m.role, m.timestamp,
        snippet(idx_messages_fts, 0, '[', ']', '…', 16), bm25(idx_messages_fts)
 FROM idx_messages_fts
 JOIN idx_messages m ON m.rowid = idx_messages_fts.rowid
 JOIN idx_sessions s ON s.id = m.sessionId
 WHERE idx_messages_fts MATCH ?1 AND s.status != 'deleted'
 ORDER BY bm25(idx_messages_fts), m.timestamp DESC
 LIMIT 20";
const SQL_NO_SNIPPET: &str = "SELECT m.sessionId, s.metaJson, m.msgId, bm25(idx_messages_fts)
 FROM idx_messages_fts
 JOIN idx_messages m ON m.rowid = idx_messages_fts.rowid
 JOIN idx_sessions s ON s.id = m.sessionId
 WHERE idx_messages_fts MATCH ?1 AND s.status != 'deleted'
 ORDER BY bm25(idx_messages_fts), m.timestamp DESC
 LIMIT 20";
const SQL_RANK_ONLY: &str = "SELECT rowid FROM idx_messages_fts WHERE idx_messages_fts MATCH ?1
 ORDER BY rank LIMIT 20";
const SQL_RECENT: &str = "SELECT rowid FROM idx_messages_fts WHERE idx_messages_fts MATCH ?1
 ORDER BY rowid DESC LIMIT 20";
const SQL_COUNT: &str = "SELECT count(*) FROM idx_messages_fts WHERE idx_messages_fts MATCH ?1";

fn fts_query(words: &[&str]) -> String {
    words
        .iter()
        .map(|w| format!("\"{w}\"*"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn sql_rows(conn: &Connection, sql: &str, q: &str) -> Res<u64> {
    let mut stmt = conn.prepare_cached(sql)?;
    let mut rows = stmt.query([q])?;
    let mut n = 0u64;
    while let Some(r) = rows.next()? {
        // Touch the first column so every row is produced.
        let v: rusqlite::types::Value = r.get(0)?;
        std::hint::black_box(v);
        n += 1;
    }
    Ok(n)
}

fn sql_count(conn: &Connection, q: &str) -> Res<u64> {
    let n: i64 = conn.query_row(SQL_COUNT, [q], |r| r.get(0))?;
    Ok(u64::try_from(n)?)
}

struct Corpus1M {
    home: Home,
    store: SessionStore,
    ids: Vec<SessionId>,
    logs: Vec<PathBuf>,
    messages: u64,
    /// Time to index everything into a fresh database (row 2a).
    index_time: Duration,
}

fn bench_search(
    dirs: &mut Dirs,
    scale: &Scale,
    rows: &mut Vec<Row>,
    notes: &mut Vec<String>,
) -> Res<Corpus1M> {
    let total = scale.sessions * scale.per_session;
    let home = Home::new(dirs.fresh()?.join("home"));
    eprintln!(
        "[2] writing {} sessions × {} messages through the store (Never) + rollout logs",
        scale.sessions, scale.per_session
    );
    let (ids, t_build) = build_corpus(&home, scale)?;
    let store = store_at(&home)?;
    let logs: Vec<PathBuf> = session_dirs(&home)?
        .into_iter()
        .map(|d| d.join("messages.jsonl"))
        .collect();
    let log_bytes: u64 = logs
        .iter()
        .map(|p| fs::metadata(p).map(|m| m.len()))
        .sum::<Result<u64, _>>()?;
    let ev_bytes: u64 = ids
        .iter()
        .map(|id| fs::metadata(freecode_store::rollout::events_path(&home, id)).map(|m| m.len()))
        .sum::<Result<u64, _>>()?;
    notes.push(format!(
        "rows 2–4 home: {} sessions × {} messages = {total} messages, messages.jsonl total {} ({:.0} B/line), rollout logs {} ({} events); written in {} ({} per message incl. events)",
        scale.sessions,
        scale.per_session,
        fmt_size(log_bytes),
        log_bytes as f64 / total as f64,
        fmt_size(ev_bytes),
        total,
        fmt_dur(t_build),
        fmt_dur(Duration::from_secs_f64(t_build.as_secs_f64() / total as f64)),
    ));
    settle();

    // Index from scratch: a fresh database, one refresh.
    eprintln!("[2] indexing from scratch");
    let (raw_read_all, _) = time(|| {
        let mut n = 0u64;
        for p in &logs {
            n += fs::read(p)?.len() as u64;
        }
        Ok(n)
    })?;
    let (t_index, report) = time(|| {
        let mut ix = SessionIndex::open(&home)?;
        Ok(ix.refresh(|_, _| {})?)
    })?;
    if report.messages != total {
        notes.push(format!(
            "BUG: the first refresh indexed {} messages, expected {total}",
            report.messages
        ));
    }
    let mut ix = SessionIndex::open(&home)?;
    let db = ix.path().to_owned();
    let db_size = fs::metadata(&db)?.len();
    let wal = fs::metadata(db.with_extension("db-wal"))
        .map(|m| m.len())
        .unwrap_or(0);
    notes.push(format!(
        "index from scratch: {} messages + {} rollout events in {}; freecode.db {} (+ WAL {}), {:.2}× the messages.jsonl bytes",
        report.messages,
        report.events,
        fmt_dur(t_index),
        fmt_size(db_size),
        fmt_size(wal),
        db_size as f64 / log_bytes as f64
    ));
    rows.push(
        Row::new(
            "2a",
            format!(
                "index from scratch: open + refresh() of {total} msgs (+{} events)",
                report.events
            ),
            total,
            t_index,
        )
        .vs("raw: fs::read of every messages.jsonl", raw_read_all),
    );
    settle();

    // What every CLI command pays first: opening the index (which runs PRAGMA quick_check).
    let (t_open, _) = timed(5, || Ok(SessionIndex::open(&home)?))?;
    // `freecode search`'s path (commands/index.rs open_index): choose the backend (opens the
    // SQLite thread store), then open the index, then search.
    let (t_open_search, cli_hits) = timed(5, || {
        let (backend, selected) = open_thread_store(&home, BackendChoice::Auto);
        drop(backend);
        if selected.kind != BackendKind::Sqlite {
            return Err(format!("SQLite backend not selected: {}", selected.reason).into());
        }
        let mut ix = SessionIndex::open(&home)?;
        Ok(ix.search(&query(RARE, LIMIT))?.len())
    })?;
    let (t_raw_rare, _) = timed(3, || raw_grep(&logs, &[RARE]))?;
    // `freecode session list`'s path (commands/session.rs): the same opens, then list().
    let (t_open_list, listed) = timed(5, || {
        let (backend, _) = open_thread_store(&home, BackendChoice::Auto);
        drop(backend);
        let mut ix = SessionIndex::open(&home)?;
        Ok(ix.list(&ListFilter::default())?.sessions.len())
    })?;
    let (t_scan_list, _) = timed(5, || Ok(store.list(&ListFilter::default())?.sessions.len()))?;
    let (t_check, check) = timed(3, || {
        let c = Connection::open_with_flags(&db, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
        let v: String = c.query_row("PRAGMA quick_check", [], |r| r.get(0))?;
        Ok(v)
    })?;
    notes.push(format!(
        "2f attribution: SessionIndex::open {} on a {} freecode.db; `PRAGMA quick_check` alone (which SqliteThreadStore::open_or_recover runs on every open) {} → {check:?}. It reads every page, so it grows with the index: every `freecode search`, `stats` and indexed `session list` pays it before its query",
        fmt_dur(t_open),
        fmt_size(db_size),
        fmt_dur(t_check)
    ));
    let mut late = Vec::new();
    late.push(
        Row::new(
            "2f",
            format!(
                "index: SessionIndex::open on the {} database",
                fmt_size(db_size)
            ),
            1,
            t_open,
        )
        .vs("raw scan for the rare word", t_raw_rare),
    );
    late.push(
        Row::new(
            "2g",
            format!(
                "index: open_thread_store + SessionIndex::open + list(), as `freecode session list` does ({listed} sessions)"
            ),
            scale.sessions,
            t_open_list,
        )
        .vs("scan: SessionStore::list of the same home", t_scan_list),
    );
    late.push(
        Row::new(
            "2h",
            format!(
                "index: open_thread_store + SessionIndex::open + search({RARE:?}), as `freecode search` does ({cli_hits} hits)"
            ),
            total,
            t_open_search,
        )
        .vs("raw scan: read all logs + substring", t_raw_rare)
        .goal(10.0),
    );

    // Searches: index, raw scan, search_scan; then the checks and the attribution.
    let conn = Connection::open_with_flags(&db, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    let (noop_refresh, _) = timed(11, || Ok(ix.refresh(|_, _| {})?))?;
    let cases: [(&str, &str, Vec<&str>); 3] = [
        ("2b", "rare word", vec![RARE]),
        ("2c", "common word", vec![COMMON_WORD]),
        ("2d", "two words", PAIR.to_vec()),
    ];
    for (row_id, label, words) in &cases {
        let text = words.join(" ");
        eprintln!("[2] search {label} {text:?}");
        let (t_ix, hits) = timed(11, || Ok(ix.search(&query(&text, LIMIT))?))?;
        let (t_raw, (raw_hits, _)) = timed(3, || raw_grep(&logs, words))?;
        let (t_scan, scan_hits) = timed(3, || Ok(search_scan(&store, &query(&text, LIMIT))?.0))?;
        let fq = fts_query(words);
        let matches = sql_count(&conn, &fq)?;
        rows.push(
            Row::new(
                row_id,
                format!(
                    "index: search({text:?}) {label}, limit {LIMIT}: {} of {matches} matching msgs",
                    hits.len()
                ),
                total,
                t_ix,
            )
            .vs(
                format!("raw scan: read all logs + substring ({raw_hits} lines)"),
                t_raw,
            )
            .goal(10.0),
        );
        rows.push(
            Row::new(
                &format!("{row_id}′"),
                format!(
                    "  └ search_scan({text:?}) (no index): {} hits",
                    scan_hits.len()
                ),
                total,
                t_scan,
            )
            .vs(format!("{row_id} index search"), t_ix),
        );
        // Where the index search's time goes.
        let (p_count, _) = timed(5, || sql_count(&conn, &fq))?;
        let (p_rank, _) = timed(5, || sql_rows(&conn, SQL_RANK_ONLY, &fq))?;
        let (p_nosnip, _) = timed(5, || sql_rows(&conn, SQL_NO_SNIPPET, &fq))?;
        let (p_full, _) = timed(5, || sql_rows(&conn, SQL_SEARCH, &fq))?;
        let (p_recent, _) = timed(5, || sql_rows(&conn, SQL_RECENT, &fq))?;
        let exact = fq.replace("\"*", "\"");
        let (p_exact, _) = timed(5, || sql_rows(&conn, SQL_RANK_ONLY, &exact))?;
        notes.push(format!(
            "{row_id} {label} {text:?} ({matches} matching messages; FTS query {fq}): search() {} = refresh (nothing to do) {} + SQL; the search SQL alone {}, without snippet() {}; FTS5 alone (no join): ORDER BY rank LIMIT 20 {}, the same for the exact words ({exact}, no prefix) {}, ORDER BY rowid DESC LIMIT 20 (newest first, no BM25) {}, count(*) of the matches {}",
            fmt_dur(t_ix),
            fmt_dur(noop_refresh),
            fmt_dur(p_full),
            fmt_dur(p_nosnip),
            fmt_dur(p_rank),
            fmt_dur(p_exact),
            fmt_dur(p_recent),
            fmt_dur(p_count)
        ));
        // Same matches on both paths (where the hit set is small enough to compare whole).
        if words[0] != COMMON_WORD {
            let all_ix = ix.search(&query(&text, 10_000_000))?;
            let all_scan = search_scan(&store, &query(&text, 10_000_000))?.0;
            let (a, b) = (hit_keys(&all_ix), hit_keys(&all_scan));
            if a == b {
                notes.push(format!(
                    "{row_id} check: index and search_scan return the same {} messages for {text:?} (raw substring lines: {raw_hits})",
                    a.len()
                ));
            } else {
                notes.push(format!(
                    "BUG: {row_id} {text:?}: index returns {} messages, search_scan {}; {} only in the index, {} only in the scan",
                    a.len(),
                    b.len(),
                    a.difference(&b).count(),
                    b.difference(&a).count()
                ));
            }
        } else if matches as usize != scan_count(&store, &text)? {
            notes.push(format!(
                "BUG: {row_id} {text:?}: FTS matches {matches} messages, search_scan a different number"
            ));
        }
    }
    rows.push(Row::new(
        "2e",
        "  └ the refresh() every search/stats starts with, nothing changed",
        scale.sessions,
        noop_refresh,
    ));
    rows.extend(late);
    drop(ix);
    Ok(Corpus1M {
        home,
        store,
        ids,
        logs,
        messages: total,
        index_time: t_index,
    })
}

/// How many messages search_scan matches (every hit kept).
fn scan_count(store: &SessionStore, text: &str) -> Res<usize> {
    Ok(search_scan(store, &query(text, usize::MAX))?.0.len())
}

fn bench_incremental(c: &Corpus1M, rows: &mut Vec<Row>, notes: &mut Vec<String>) -> Res<()> {
    eprintln!("[3] incremental update");
    let mut ix = SessionIndex::open(&c.home)?;
    ix.refresh(|_, _| {})?;
    let target = c.ids.get(c.ids.len() / 2).ok_or("no sessions")?.clone();
    let runs = 7;
    let (mut t_refresh, mut t_search, mut t_both) = (Vec::new(), Vec::new(), Vec::new());
    let mut bad = Vec::new();
    for k in 0..runs {
        let word = format!("quetzal{k}");
        let msg = StoredMessage::new(
            format!("appended-{k}"),
            Role::User,
            vec![Part::text(format!(
                "One more question about the {word} file before we stop."
            ))],
            1_800_000_000_000 + k as i64,
        );
        c.store.append(&target, &msg)?;
        let (t, rep) = time(|| Ok(ix.refresh(|_, _| {})?))?;
        t_refresh.push(t);
        if rep.messages != 1 || rep.metas_read != 0 {
            bad.push(format!(
                "refresh after 1 append indexed {} messages, read {} metas",
                rep.messages, rep.metas_read
            ));
        }
        let (t, hits) = time(|| Ok(ix.search(&query(&word, LIMIT))?))?;
        t_search.push(t);
        if hits.len() != 1 {
            bad.push(format!("search for {word} found {} hits", hits.len()));
        }
        // And the search that finds it without an explicit refresh first.
        let word2 = format!("ocelot{k}");
        let msg2 = StoredMessage::new(
            format!("appended-b-{k}"),
            Role::User,
            vec![Part::text(format!("And the {word2} case?"))],
            1_800_000_000_100 + k as i64,
        );
        c.store.append(&target, &msg2)?;
        let (t, hits) = time(|| Ok(ix.search(&query(&word2, LIMIT))?))?;
        t_both.push(t);
        if hits.len() != 1 {
            bad.push(format!("search for {word2} found {} hits", hits.len()));
        }
    }
    for b in bad {
        notes.push(format!("BUG (incremental): {b}"));
    }
    settle();
    eprintln!("[3] full rebuild");
    let (t_rebuild, rep) = time(|| Ok(ix.rebuild(|_, _| {})?))?;
    let expect = c.messages + 2 * runs as u64;
    if rep.messages != expect {
        notes.push(format!(
            "BUG: rebuild indexed {} messages, expected {expect}",
            rep.messages
        ));
    }
    notes.push(format!(
        "3c rebuild() {} vs indexing into a fresh database {} (2a): clear() (row-by-row DELETE of {} FTS rows, turns, tool calls…) and re-filling a database with free pages cost {} more",
        fmt_dur(t_rebuild),
        fmt_dur(c.index_time),
        rep.messages,
        fmt_dur(t_rebuild.saturating_sub(c.index_time))
    ));
    let t_refresh = median(&mut t_refresh);
    rows.push(
        Row::new(
            "3a",
            format!(
                "index: refresh() after 1 message appended to 1 of {} sessions, median of {runs}",
                c.ids.len()
            ),
            1,
            t_refresh,
        )
        .vs("3c full rebuild()", t_rebuild),
    );
    rows.push(
        Row::new(
            "3b",
            "index: search(new word) right after that refresh",
            1,
            median(&mut t_search),
        )
        .vs("3c full rebuild()", t_rebuild),
    );
    rows.push(
        Row::new(
            "3b′",
            "index: append 1 msg, then search(new word) (its refresh picks it up)",
            1,
            median(&mut t_both),
        )
        .vs("3c full rebuild()", t_rebuild),
    );
    rows.push(Row::new(
        "3c",
        format!(
            "index: rebuild() (clear {} msgs, then refresh from scratch)",
            rep.messages
        ),
        rep.messages,
        t_rebuild,
    ));
    Ok(())
}

fn bench_stats(c: &Corpus1M, rows: &mut Vec<Row>, notes: &mut Vec<String>) -> Res<()> {
    eprintln!("[4] stats");
    settle();
    let mut ix = SessionIndex::open(&c.home)?;
    ix.refresh(|_, _| {})?;
    let (t_ix, s_ix) = timed(7, || Ok(ix.stats(&StatsScope::All)?))?;
    let (t_scan, s_scan) = timed(3, || Ok(stats_scan(&c.store, &StatsScope::All)?.0))?;
    let (raw, _) = time(|| {
        let mut n = 0u64;
        for p in &c.logs {
            n += fs::read(p)?.len() as u64;
        }
        for id in &c.ids {
            n += fs::read(freecode_store::rollout::events_path(&c.home, id))?.len() as u64;
        }
        Ok(n)
    })?;
    rows.push(
        Row::new(
            "4a",
            format!(
                "index: stats(All) over {} sessions, {} msgs, {} model calls",
                s_ix.sessions, s_ix.messages, s_ix.model_calls
            ),
            s_ix.messages,
            t_ix,
        )
        .vs("stats_scan(All) (no index)", t_scan),
    );
    rows.push(
        Row::new(
            "4b",
            "  └ stats_scan(All): every messages.jsonl and events.jsonl parsed",
            s_scan.messages,
            t_scan,
        )
        .vs("raw: fs::read of every log (no parsing)", raw),
    );
    if s_ix == s_scan {
        notes.push(format!(
            "4 check: stats(All) and stats_scan(All) agree (sessions {}, turns {}, messages {}, tools {}, model calls {}, input tokens {})",
            s_ix.sessions,
            s_ix.turns,
            s_ix.messages,
            s_ix.tools.len(),
            s_ix.model_calls,
            s_ix.input_tokens
        ));
    } else {
        notes.push(format!(
            "BUG: stats(All) and stats_scan(All) differ:\n  index: {s_ix:?}\n  scan:  {s_scan:?}"
        ));
    }
    Ok(())
}

// ----- child processes -------------------------------------------------------------------------

fn run_child(mode: &str, rest: &[String]) -> Res<()> {
    let arg = |i: usize| rest.get(i).ok_or("missing child argument");
    let home = Home::new(arg(0)?);
    let before = vm_hwm_kib()?;
    let t = Instant::now();
    let count = match mode {
        "--child-refresh" => SessionIndex::open(&home)?.refresh(|_, _| {})?.messages,
        "--child-writer" => {
            let store = store_at(&home)?;
            let w = store.writer(&SessionId::new(arg(1)?.as_str())?)?;
            w.repaired_tail.map_or(0, |(_, len)| len)
        }
        _ => return Err(format!("unknown child mode {mode}").into()),
    };
    let ns = t.elapsed().as_nanos();
    let after = vm_hwm_kib()?;
    println!("CHILD {before} {after} {count} {ns}");
    Ok(())
}

// ----- main ------------------------------------------------------------------------------------

fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().collect();
    if let Some(pos) = args.iter().position(|a| a.starts_with("--child-")) {
        return run_child(&args[pos], &args[pos + 1..]);
    }
    let scale = Scale::from_env();
    let base = bench_base()?;
    eprintln!(
        "freecode-store index bench{}: temp dirs under {} on {}",
        if scale.quick {
            " (QUICK: counts / 10)"
        } else {
            ""
        },
        base.display(),
        fs_type(&base)
    );
    let mut dirs = Dirs {
        base,
        graveyard: Vec::new(),
    };
    let mut rows = Vec::new();
    let mut notes = Vec::new();

    bench_list(&mut dirs, &scale, &mut rows, &mut notes)?;
    bench_sparse_refresh(&mut dirs, &scale, &mut rows, &mut notes)?;
    let corpus = bench_search(&mut dirs, &scale, &mut rows, &mut notes)?;
    bench_incremental(&corpus, &mut rows, &mut notes)?;
    bench_stats(&corpus, &mut rows, &mut notes)?;

    println!();
    println!(
        "freecode-store session index vs scanning the files{}",
        if scale.quick {
            " — QUICK run, counts / 10"
        } else {
            ""
        }
    );
    println!(
        "Medians (10–11 runs for list and search calls, 3 when a run takes over 0.5 s; 7 for the incremental rows; rebuild and first fills once); page cache warm on both sides. \"ratio\" = the compared time / ours."
    );
    println!();
    print_table(&rows);
    println!();
    for n in &notes {
        println!("note: {n}");
    }
    eprintln!("cleaning up {} temp dirs", dirs.graveyard.len());
    Ok(())
}
