//! Rollout-log benchmarks against the TypeScript original's timings
//! (`/work/shared/reference/BENCH.md`): recording 1,000,000 events, re-opening a recorder on
//! that log, replaying it and folding it into a trace.
//!
//! Every figure stands beside the raw cost of the same bytes in the same run (a plain write of
//! the same lines; a plain read of the file), so the rollout code's own overhead over the
//! hardware is visible. Temp files live under the target directory (real disk, never a tmpfs).
//! Peak memory is the VmHWM of a fresh child process (this binary re-executed with
//! `--child-<what>`), median of three.
//!
//! `FREECODE_BENCH_QUICK=1` scales every count down ten times. The last section runs the
//! original's `run-bench.sh` beside ours on its log (`FREECODE_BENCH_NO_ORIGINAL=1` skips it,
//! `FREECODE_BENCH_ONLY_ORIGINAL=1` runs only it; `FREECODE_BENCH_ONLY_RECORD=1` runs only the
//! record rows and the original's `record` beside them). `--child-trace-halves <log>` runs the
//! two-halves trace fold alone (for `perf`, and as the whole-process fold the `trace --json`
//! row is also put beside: a CLI run pays a process start and a fresh heap that a warm library
//! fold does not, so each `--json` row is shown against the fold in both forms, and the same
//! output written by the library in this process). Every argument that is not a
//! `--child-…` mode (such as `--bench`, which `cargo bench` passes) is ignored.

use std::fs::{self, File, OpenOptions};
use std::io::{BufWriter, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use freecode_core::SessionId;
use freecode_core::rollout::replay::ReplayBuilder;
use freecode_core::rollout::trace::TraceBuilder;
use freecode_core::rollout::{Event, EventKind, EventLine, ModelErrorKind, RawEvent};
use freecode_store::lock::LockWait;
use freecode_store::rollout::{
    ModelRequest, ModelResponse, Recorder, RecorderConfig, events_path, read_events,
};
use freecode_store::{Durability, Home};
use serde_json::json;
use tempfile::TempDir;

#[path = "common/mod.rs"]
mod common;

use common::{
    Res, bench_base as bench_base_in, fmt_dur, median, median3, median3_kept, open_append,
    release_cli, run_original, settle, time, time_cli, time_cli_each, vm_hwm_kib,
};

/// The allocator of the `freecode` binary, so that the library rows are what the CLI runs: the
/// replay fold builds every call's args and output, where glibc's malloc cost about a fifth of
/// the fold on this machine.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn bench_base() -> Res<std::path::PathBuf> {
    bench_base_in("freecode-rollout-bench")
}

// ----- the original's medians (BENCH.md) -------------------------------------------------------

/// Record 1,000,000 events: 7.58 s.
const ORIG_RECORD: (f64, u64) = (7.58, 1_000_000);
/// Re-open a recorder on the 1,000,000-event log (counts its lines): 0.92 s, 593 MiB.
const ORIG_REOPEN: (f64, u64) = (0.92, 1);
/// Replay the 1,000,000-event log: 2.13 s, 806 MiB.
const ORIG_REPLAY: (f64, u64) = (2.13, 1_000_000);
/// Trace: load 1.73 s + fold 0.24 s = 1.97 s, 822 MiB.
const ORIG_TRACE: (f64, u64) = (1.97, 1_000_000);
/// The fold alone: 0.24 s.
const ORIG_FOLD: (f64, u64) = (0.24, 1_000_000);
/// What `freecode trace` computes (load, fold, render): 3.25 s, 1,122 MiB.
const ORIG_TRACE_CMD: (f64, u64) = (3.25, 1_000_000);
/// The original's `events.jsonl` for 1,000,000 events.
const ORIG_LOG_BYTES: u64 = 270_233_351;

/// Events per turn in BENCH.md's mix.
const TURN: u64 = 10;
/// Peak-memory goal for replay and trace.
const PEAK_GOAL_MIB: u64 = 64;

struct Scale {
    quick: bool,
    events: u64,
    reopens: u64,
    /// Sizes of the last line for the long-last-line re-open rows, MiB.
    /// Sizes in MiB of a log's last line; all under `limits::MAX_LINE_BYTES` (16 MiB), past
    /// which the recorder refuses to write a line.
    long_lines: &'static [u64],
}

impl Scale {
    fn from_env() -> Self {
        let quick = std::env::var("FREECODE_BENCH_QUICK").is_ok_and(|v| !v.is_empty() && v != "0");
        Self {
            quick,
            events: if quick { 100_000 } else { 1_000_000 },
            reopens: if quick { 100 } else { 1_000 },
            long_lines: if quick { &[1, 4] } else { &[1, 4, 8, 15] },
        }
    }
}

// ----- the event mix -----------------------------------------------------------------------------

/// A 300-character tool output.
fn tool_output() -> String {
    let src = "export function appendLine(handle: FileHandle, msg: StoredMessage) {\n  const line = JSON.stringify(msg) + '\\n';\n  return handle.write(line);\n}\n";
    src.repeat(300 / src.len() + 1).chars().take(300).collect()
}

fn model_call(r: &mut Recorder, turn: &str, t: u64) -> Res<()> {
    let mut call = r.model_request(
        turn,
        ModelRequest {
            provider: "anthropic".to_owned(),
            model: "claude-sonnet-4-5".to_owned(),
            message_count: 10 + t % 40,
            tool_count: 15,
            prompt_chars: 48_000,
            streamed: true,
        },
    )?;
    call.first_token(r)?;
    call.response(
        r,
        ModelResponse {
            input_tokens: Some(12_000),
            output_tokens: Some(200),
            cache_read_tokens: Some(11_000),
            tool_calls: vec!["read_file".to_owned()],
            text_chars: 40,
            ..Default::default()
        },
    )?;
    Ok(())
}

/// The tenth event of a turn, rotating through the remaining types.
fn other_event(t: u64, turn: &str) -> EventKind {
    let turn_id = turn.to_owned();
    match t % 10 {
        0 => EventKind::HookTriggered {
            hook_name: "format-on-save".to_owned(),
            hook_event: "PostToolUse".to_owned(),
            blocked: false,
        },
        1 => EventKind::SkillInvoked {
            skill_name: "code-review".to_owned(),
            implicit: true,
        },
        2 => EventKind::CompactOccurred {
            before_tokens: 150_000,
            after_tokens: 40_000,
        },
        3 => EventKind::ContextOverflow {
            before_tokens: 201_000,
        },
        4 => EventKind::ParseError {
            turn_id,
            parser: "tool-args".to_owned(),
            error: "Unexpected token } in JSON at position 41".to_owned(),
        },
        5 => EventKind::HookBlocked {
            hook_name: "bash".to_owned(),
            reason: "no reason".to_owned(),
        },
        6 => EventKind::SubagentStart {
            subagent_id: format!("sub-{t}"),
            task: "Find every caller of appendMessage".to_owned(),
        },
        7 => EventKind::SubagentStop {
            subagent_id: format!("sub-{}", t - 1),
            result: "3 callers: loop.ts, fork.ts, import.ts".to_owned(),
        },
        8 => EventKind::ModelError {
            turn_id,
            provider: "anthropic".to_owned(),
            model: "claude-sonnet-4-5".to_owned(),
            duration_ms: 1_200,
            kind: ModelErrorKind::Provider,
            error: "429 Too Many Requests".to_owned(),
        },
        _ => EventKind::TurnAborted {
            turn_id,
            reason: "user interrupted".to_owned(),
        },
    }
}

fn rec_config() -> RecorderConfig {
    RecorderConfig {
        enabled: true,
        durability: Durability::Never,
        lock_wait: LockWait::Fail,
        clock: freecode_store::now_ms,
        flush_window: freecode_store::rollout::FLUSH_WINDOW,
    }
}

/// Records `n` events of BENCH.md's mix (ten a turn) through the recorder API.
fn record_mix(home: &Home, id: &SessionId, n: u64) -> Res<u64> {
    let output = tool_output();
    let mut r = Recorder::open(home, id, rec_config())?;
    for t in 0..n / TURN {
        // Turn ids restart with every agent loop (SPEC §6.5): twenty iterations a loop.
        let turn = format!("turn-{}", t % 20);
        model_call(&mut r, &turn, t)?;
        r.turn_started(&turn)?;
        let call = r.function_call(&turn, "read_file", json!({"path": "src/store.ts"}))?;
        call.output(&mut r, &output, false)?;
        model_call(&mut r, &turn, t)?;
        r.record(other_event(t, &turn))?;
    }
    Ok(r.seq())
}

// ----- plumbing --------------------------------------------------------------------------------

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

/// The lines of `buf`, each with its newline.
fn lines_of(buf: &[u8]) -> Vec<&[u8]> {
    buf.split_inclusive(|&b| b == b'\n').collect()
}

/// One `write` per line to a fresh `O_APPEND` file: the floor for one write per event.
fn raw_write_per_line(path: &Path, lines: &[&[u8]]) -> Res<Duration> {
    Ok(time(|| {
        let mut f = open_append(path)?;
        for l in lines {
            f.write_all(l)?;
        }
        Ok(())
    })?
    .0)
}

/// The same bytes through a 1 MiB buffer: bulk writing.
fn raw_write_buffered(path: &Path, lines: &[&[u8]]) -> Res<Duration> {
    Ok(time(|| {
        let mut f = BufWriter::with_capacity(1 << 20, open_append(path)?);
        for l in lines {
            f.write_all(l)?;
        }
        f.flush()?;
        Ok(())
    })?
    .0)
}

/// A plain streaming read of the file, 256 KiB at a time (the reader's buffer size).
fn raw_read(path: &Path) -> Res<u64> {
    let mut f = File::open(path)?;
    let mut buf = vec![0u8; 256 * 1024];
    let mut total = 0u64;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            return Ok(total);
        }
        total += n as u64;
    }
}

// ----- the table -------------------------------------------------------------------------------

enum Goal {
    None,
    /// At least this many times faster per item than the original.
    SpeedUp(f64),
}

struct Row {
    name: String,
    n: u64,
    ours: Duration,
    orig: Option<(f64, u64)>,
    raw: Option<Duration>,
    raw_what: &'static str,
    goal: Goal,
}

impl Row {
    fn new(name: impl Into<String>, n: u64, ours: Duration) -> Self {
        Self {
            name: name.into(),
            n,
            ours,
            orig: None,
            raw: None,
            raw_what: "",
            goal: Goal::None,
        }
    }
    fn orig(mut self, o: (f64, u64)) -> Self {
        self.orig = Some(o);
        self
    }
    fn raw(mut self, raw: Duration, what: &'static str) -> Self {
        self.raw = Some(raw);
        self.raw_what = what;
        self
    }
    fn goal(mut self, g: Goal) -> Self {
        self.goal = g;
        self
    }
    fn per_item(&self) -> f64 {
        self.ours.as_secs_f64() / self.n.max(1) as f64
    }
    fn speed_up(&self) -> Option<f64> {
        self.orig
            .map(|(t, n)| (t / n as f64) / self.per_item().max(1e-12))
    }
}

fn print_table(rows: &[Row]) {
    println!(
        "| # | benchmark | n | total | per item | original per item | vs original | raw same bytes | ours/raw | goal |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for (i, r) in rows.iter().enumerate() {
        let orig = r.orig.map_or("—".to_owned(), |(t, n)| {
            fmt_dur(Duration::from_secs_f64(t / n as f64))
        });
        let vs = r
            .speed_up()
            .map_or("—".to_owned(), |s| format!("{s:.1}× faster"));
        let raw = r.raw.map_or("—".to_owned(), fmt_dur);
        let over = r.raw.map_or("—".to_owned(), |raw| {
            format!(
                "{:.2}×",
                r.ours.as_secs_f64() / raw.as_secs_f64().max(1e-12)
            )
        });
        let goal = match r.goal {
            Goal::None => "—".to_owned(),
            Goal::SpeedUp(g) => {
                let ok = r.speed_up().is_some_and(|s| s >= g);
                format!("≥{g}× orig: {}", if ok { "MET" } else { "MISSED" })
            }
        };
        println!(
            "| {} | {} | {} | {} | {} | {orig} | {vs} | {raw} | {over} | {goal} |",
            i + 1,
            r.name,
            r.n,
            fmt_dur(r.ours),
            fmt_dur(Duration::from_secs_f64(r.per_item())),
        );
    }
    println!();
    println!("Raw baselines (plain std::fs, same bytes, same run):");
    for (i, r) in rows.iter().enumerate() {
        if !r.raw_what.is_empty() {
            println!("  {:>2}. {}", i + 1, r.raw_what);
        }
    }
}

// ----- benchmarks ------------------------------------------------------------------------------

/// Record `n` events at `Never`, against the same lines written raw. Returns the log kept for
/// the reading rows.
/// What the record rows measured, for the row beside the original's same-session figure.
struct RecordFigures {
    n: u64,
    ours: Duration,
    /// Each timed run: wall time, and the child's user and system CPU in ms.
    runs: Vec<(Duration, Cpu)>,
    per_line: Duration,
    buffered: Duration,
    serialise: Duration,
    bytes: u64,
}

fn bench_record(
    dir: &Path,
    n: u64,
    rows: &mut Vec<Row>,
    notes: &mut Vec<String>,
) -> Res<(Home, SessionId, RecordFigures)> {
    let home = Home::new(dir.join("home"));
    let home_s = home.root().to_string_lossy().into_owned();
    let n_s = n.to_string();
    // Each run in a fresh process, as BENCH.md's were.
    let record = |id: &str| -> Res<(Duration, Cpu)> {
        settle();
        let ([_, _, seq, ns], cpu) = child_with_cpu(&["--child-record", &home_s, id, &n_s])?;
        if seq != n {
            return Err(format!("recorded {seq} events, expected {n}").into());
        }
        Ok((Duration::from_nanos(ns), cpu))
    };
    let keep = SessionId::new("bench-rollout-0")?;
    let (first, _) = record(keep.as_str())?;
    let src = events_path(&home, &keep);
    let src_s = src.to_string_lossy().into_owned();
    let buf = fs::read(&src)?;
    if lines_of(&buf).len() as u64 != n {
        return Err(format!("{} lines for {n} events", lines_of(&buf).len()).into());
    }
    notes.push(format!(
        "log: {n} events, {} bytes ({}), {:.1} bytes a line (original: {ORIG_LOG_BYTES} bytes, \
         {:.1} a line; our ids are 26-character ULIDs, the original's 20); the first recording \
         (kept as the later rows' log; not in the median, whose runs are each removed after \
         they end, as the original's are) took {}",
        buf.len(),
        mib(buf.len() as u64),
        buf.len() as f64 / n as f64,
        ORIG_LOG_BYTES as f64 / 1e6,
        fmt_dur(first)
    ));
    let bytes = buf.len() as u64;
    drop(buf);
    let mut runs = Vec::new();
    let (mut ours, mut per_line, mut buffered, mut serialise, mut into_buf) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let raw_dir = dir.join("raw");
    fs::create_dir_all(&raw_dir)?;
    // Each timed run writes a fresh log that is removed after it, as the original's bench
    // removes each run's home: kept logs would leave every later run writing into memory the
    // page cache has never held (on this VM, a host fault on top of the zeroing of each page).
    for k in 1..=3 {
        let id = format!("bench-rollout-{k}");
        runs.push(record(&id)?);
        ours.push(runs[runs.len() - 1].0);
        fs::remove_dir_all(home.rollout_dir(&SessionId::new(id.as_str())?))?;
    }
    for k in 1..=3 {
        for (mode, out) in [("per-line", &mut per_line), ("buffered", &mut buffered)] {
            settle();
            let dst = raw_dir.join(format!("{mode}-{k}"));
            let [_, _, bytes, ns] =
                child(&["--child-raw-write", &src_s, &dst.to_string_lossy(), mode])?;
            if bytes != fs::metadata(&src)?.len() {
                return Err(format!("raw {mode} wrote {bytes} bytes").into());
            }
            fs::remove_file(&dst)?;
            out.push(Duration::from_nanos(ns));
        }
    }
    // Where the time goes: building and serialising the events without writing them.
    let events: Vec<Event> = {
        let mut v = Vec::with_capacity(n as usize);
        read_events(&events_path(&home, &keep), |e| v.push(e))?;
        v
    };
    for _ in 0..3 {
        serialise.push(
            time(|| {
                let mut bytes = 0usize;
                for e in &events {
                    bytes += e.to_line().len();
                }
                Ok(bytes)
            })?
            .0,
        );
    }
    // What the recorder does: each line written straight into one reused buffer.
    let no_extra = freecode_core::Extra::new();
    for _ in 0..3 {
        into_buf.push(
            time(|| {
                let (mut out, mut bytes) = (Vec::with_capacity(1 << 20), 0usize);
                for e in &events {
                    EventLine {
                        id: &e.id,
                        seq: e.seq,
                        aggregate_id: &e.aggregate_id,
                        timestamp: e.timestamp,
                        kind: &e.kind,
                        extra: &no_extra,
                    }
                    .write_to(&mut out)?;
                    if out.len() >= 256 * 1024 {
                        bytes += out.len();
                        out.clear();
                    }
                }
                Ok(bytes + out.len())
            })?
            .0,
        );
    }
    drop(events);
    let per_line = median(&mut per_line);
    let figures = RecordFigures {
        n,
        ours: median(&mut ours.clone()),
        runs,
        per_line,
        buffered: median(&mut buffered.clone()),
        serialise: median(&mut into_buf.clone()),
        bytes,
    };
    rows.push(
        Row::new(
            format!("record {n} events (BENCH.md mix) at Durability::Never"),
            n,
            median(&mut ours),
        )
        .orig(ORIG_RECORD)
        .raw(
            per_line,
            "one write() per line of the same bytes to a fresh O_APPEND file (the floor for one write per event)",
        )
        .goal(Goal::SpeedUp(10.0)),
    );
    rows.push(
        Row::new(
            "  └ the same lines written through a 1 MiB BufWriter (not what a recorder may do)",
            n,
            median(&mut buffered),
        )
        .orig(ORIG_RECORD)
        .raw(per_line, "one write() per line (row above's raw)"),
    );
    rows.push(
        Row::new(
            "  └ Event::to_line() of the same events, no I/O (a Vec per line)",
            n,
            median(&mut serialise),
        )
        .raw(per_line, "one write() per line (row above's raw)"),
    );
    rows.push(
        Row::new(
            "  └ EventLine::write_to one reused buffer, no I/O (the recorder's serialisation)",
            n,
            figures.serialise,
        )
        .raw(per_line, "one write() per line (row above's raw)"),
    );
    Ok((home, keep, figures))
}

/// Re-open a recorder on the log: median of many opens, against reading the whole file (what
/// the original does to count lines).
fn bench_reopen(
    home: &Home,
    id: &SessionId,
    scale: &Scale,
    rows: &mut Vec<Row>,
    notes: &mut Vec<String>,
) -> Res<()> {
    let path = events_path(home, id);
    let len = fs::metadata(&path)?.len();
    let mut ours = Vec::new();
    for _ in 0..scale.reopens {
        let (t, r) = time(|| Ok(Recorder::open(home, id, rec_config())?))?;
        if r.seq() != scale.events {
            return Err(format!("reopened at seq {}, expected {}", r.seq(), scale.events).into());
        }
        drop(r);
        ours.push(t);
    }
    let mut raw = Vec::new();
    for _ in 0..3 {
        raw.push(time(|| Ok(fs::read(&path)?.len()))?.0);
    }
    // The O(1) floor: open, lock, read the last 64 KiB.
    let mut floor = Vec::new();
    for _ in 0..scale.reopens {
        floor.push(
            time(|| {
                let f = OpenOptions::new().read(true).append(true).open(&path)?;
                f.try_lock()?;
                let mut tail = vec![0u8; 64 * 1024];
                f.read_exact_at(&mut tail, len.saturating_sub(64 * 1024))?;
                Ok(tail.len())
            })?
            .0,
        );
    }
    let floor = median(&mut floor);
    rows.push(
        Row::new(
            format!("re-open a recorder on the {}-event log", scale.events),
            1,
            median(&mut ours),
        )
        .orig(ORIG_REOPEN)
        .raw(
            median(&mut raw),
            "fs::read of the whole events.jsonl (what counting lines needs)",
        )
        .goal(Goal::SpeedUp(1000.0)),
    );
    notes.push(format!(
        "re-open floor (open O_APPEND + flock + pread of the last 64 KiB): {}; a recorder open \
         also creates the directory (mkdir -p) and parses the last line",
        fmt_dur(floor)
    ));
    Ok(())
}

/// Re-open a recorder on a log whose last line is `mib_len` MiB: `tail_state` reads backwards
/// 64 KiB at a time, re-copying and re-scanning everything gathered so far at every step.
fn bench_reopen_long_last_line(
    dir: &Path,
    scale: &Scale,
    rows: &mut Vec<Row>,
    notes: &mut Vec<String>,
) -> Res<()> {
    let mut per_mib = Vec::new();
    for &size in scale.long_lines {
        let home = Home::new(dir.join(format!("long-{size}")));
        let id = SessionId::new("long-last-line")?;
        {
            let mut r = Recorder::open(&home, &id, rec_config())?;
            r.turn_started("turn-0")?;
            let call = r.function_call("turn-0", "bash", json!({"command": "cat big.log"}))?;
            call.output(&mut r, &"x".repeat((size as usize) << 20), false)?;
        }
        let path = events_path(&home, &id);
        let mut ours = Vec::new();
        for _ in 0..3 {
            let (t, r) = time(|| Ok(Recorder::open(&home, &id, rec_config())?))?;
            if r.seq() != 3 {
                return Err(format!("long-line log reopened at seq {}", r.seq()).into());
            }
            drop(r);
            ours.push(t);
        }
        let mut raw = Vec::new();
        for _ in 0..3 {
            raw.push(time(|| Ok(fs::read(&path)?.len()))?.0);
        }
        let t = median(&mut ours);
        per_mib.push((size, t));
        rows.push(
            Row::new(
                format!("re-open a recorder on a log whose last line is {size} MiB"),
                1,
                t,
            )
            .orig(ORIG_REOPEN)
            .raw(median(&mut raw), "fs::read of the whole events.jsonl"),
        );
    }
    if let (Some(a), Some(b)) = (per_mib.first(), per_mib.last())
        && b.0 > a.0
    {
        let growth = b.1.as_secs_f64() / a.1.as_secs_f64().max(1e-12);
        notes.push(format!(
            "re-open with a long last line: {} MiB → {} MiB is {:.0}× the size and {growth:.0}× \
             the time ({} → {}): the recorder finds the last line's start scanning back 64 KiB at \
             a time, then reads and parses that one line",
            a.0,
            b.0,
            b.0 as f64 / a.0 as f64,
            fmt_dur(a.1),
            fmt_dur(b.1)
        ));
    }
    Ok(())
}

/// Replay and trace over the log, timed in this process, against a plain read of the file.
fn bench_read(home: &Home, id: &SessionId, n: u64, rows: &mut Vec<Row>) -> Res<()> {
    let path = events_path(home, id);
    settle();
    let (mut replay_t, mut trace_t, mut raw_t, mut json_t) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..5 {
        raw_t.push(time(|| raw_read(&path))?.0);
        let (t, (turns, calls)) = time(|| replay_once(&path))?;
        if (turns, calls) != (n / TURN, n / TURN) {
            return Err(format!("replay: {turns} turns, {calls} calls").into());
        }
        replay_t.push(t);
        let (t, (model, tools)) = time(|| trace_once(&path))?;
        if (model, tools) != (2 * n / TURN, n / TURN) {
            return Err(format!("trace: {model} model spans, {tools} tool spans").into());
        }
        trace_t.push(t);
        json_t.push(
            time(|| {
                let mut b = TraceBuilder::new(id.as_str());
                read_events(&path, |e| b.apply(&e))?;
                Ok(serde_json::to_vec(&b.finish(None))?.len())
            })?
            .0,
        );
    }
    let raw = median(&mut raw_t);
    let raw_what = "plain read of events.jsonl, 256 KiB at a time (no parsing)";
    rows.push(
        Row::new(
            format!("replay {n} events: read_events + ReplayBuilder"),
            n,
            median(&mut replay_t),
        )
        .orig(ORIG_REPLAY)
        .raw(raw, raw_what)
        .goal(Goal::SpeedUp(10.0)),
    );
    rows.push(
        Row::new(
            format!("trace {n} events: read_events + TraceBuilder (load + fold)"),
            n,
            median(&mut trace_t),
        )
        .orig(ORIG_TRACE)
        .raw(raw, raw_what)
        .goal(Goal::SpeedUp(10.0)),
    );

    // Where load time goes: line splitting, typed parse, a pure JSON syntax scan; one thread.
    let (mut split_t, mut typed_t, mut scan_t) = (Vec::new(), Vec::new(), Vec::new());
    let buf = fs::read(&path)?;
    let lines: Vec<&[u8]> = buf
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .collect();
    for _ in 0..3 {
        split_t.push(
            time(|| {
                let f = std::io::BufReader::with_capacity(256 * 1024, File::open(&path)?);
                let mut lr = freecode_store::jsonl::LineReader::new(f, 0);
                let mut k = 0u64;
                while let Some(l) = lr.next_line()? {
                    k += l.len;
                }
                Ok(k)
            })?
            .0,
        );
        typed_t.push(
            time(|| {
                for l in &lines {
                    let raw: RawEvent = serde_json::from_slice(l)?;
                    std::hint::black_box(Event::from_raw(raw).ok());
                }
                Ok(())
            })?
            .0,
        );
        scan_t.push(
            time(|| {
                for l in &lines {
                    let v: serde::de::IgnoredAny = serde_json::from_slice(l)?;
                    std::hint::black_box(v);
                }
                Ok(())
            })?
            .0,
        );
    }
    drop(lines);
    drop(buf);
    rows.push(
        Row::new(
            "  └ jsonl::LineReader alone over the file (line splitting + per-line copy)",
            n,
            median(&mut split_t),
        )
        .raw(raw, raw_what),
    );
    rows.push(
        Row::new(
            "  └ parse only, 1 thread, no I/O: from_slice::<RawEvent> + Event::from_raw per line",
            n,
            median(&mut typed_t),
        )
        .raw(
            median(&mut scan_t),
            "same lines through serde_json::from_slice::<IgnoredAny> (syntax scan only, 1 thread)",
        ),
    );

    // The fold alone, over events already in memory.
    let mut events = Vec::with_capacity(n as usize);
    read_events(&path, |e| events.push(e))?;
    let (mut fold_t, mut apply_t) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        let mut finish_t = Duration::ZERO;
        let (t, spans) = time(|| {
            let mut b = TraceBuilder::new(id.as_str());
            for e in &events {
                b.apply(e);
            }
            let t0 = Instant::now();
            let spans = b.finish(None).model_spans.len();
            finish_t = t0.elapsed();
            Ok(spans)
        })?;
        std::hint::black_box(spans);
        fold_t.push(t);
        apply_t.push(t.saturating_sub(finish_t));
    }
    drop(events);
    rows.push(
        Row::new(
            "  └ TraceBuilder fold alone: apply() × n + finish() (events in memory)",
            n,
            median(&mut fold_t),
        )
        .orig(ORIG_FOLD)
        .goal(Goal::SpeedUp(10.0)),
    );
    rows.push(Row::new(
        "    └ of which apply() × n (finish() clones every span)",
        n,
        median(&mut apply_t),
    ));
    rows.push(
        Row::new(
            "`freecode trace` minus render: load + fold + the trace as JSON (what --json prints)",
            n,
            median(&mut json_t),
        )
        .orig(ORIG_TRACE_CMD)
        .raw(raw, raw_what),
    );
    Ok(())
}

fn replay_once(path: &Path) -> Res<(u64, u64)> {
    let mut b = ReplayBuilder::new("bench");
    let report = read_events(path, |e| b.apply(&e))?.ok_or("no log")?;
    for _ in 0..report.unknown {
        b.unknown_event();
    }
    for i in &report.issues {
        b.skipped_line(i.line, i.offset, i.to_string());
    }
    let r = b.finish();
    Ok((r.total_turns, r.total_calls))
}

fn trace_once(path: &Path) -> Res<(u64, u64)> {
    let mut b = TraceBuilder::new("bench");
    read_events(path, |e| b.apply(&e))?.ok_or("no log")?;
    let t = b.finish(None);
    Ok((t.model_spans.len() as u64, t.tool_spans.len() as u64))
}

// ----- child processes (peak memory) -------------------------------------------------------------

fn run_child(mode: &str, rest: &[String]) -> Res<()> {
    let arg = |i: usize| rest.get(i).ok_or("missing child argument");
    let before = vm_hwm_kib()?;
    let t = Instant::now();
    let count = match mode {
        "--child-read" => raw_read(Path::new(arg(0)?))?,
        "--child-replay" => replay_once(Path::new(arg(0)?))?.0,
        "--child-trace" => trace_once(Path::new(arg(0)?))?.0,
        "--child-trace-halves" => {
            // What the CLI and the two-halves row run, alone (for `perf`).
            let log = Path::new(arg(0)?);
            let (b, _) =
                freecode_store::rollout::fold_event_views(log, TraceBuilder::new("bench"))?
                    .ok_or("no log")?;
            b.finish(None).model_spans.len() as u64
        }
        "--child-trace-unfinished" => {
            // The fold's state before finish(), which copies every span into the Trace.
            let mut b = TraceBuilder::new("bench");
            let mut k = 0u64;
            read_events(Path::new(arg(0)?), |e| {
                k += 1;
                b.apply(&e);
            })?;
            let after = vm_hwm_kib()?;
            let ns = t.elapsed().as_nanos();
            println!("CHILD {before} {after} {k} {ns}");
            drop(b);
            return Ok(());
        }
        "--child-record" => {
            // Also a way to leave a log behind for profiling the readers.
            let home = Home::new(arg(0)?);
            let id = SessionId::new(arg(1)?.as_str())?;
            let seq = record_mix(&home, &id, arg(2)?.parse()?)?;
            // Where the time went: on this VM the system time moves with the cost of the new
            // page cache (see `print_record_row`).
            if let Some((user, sys)) = cpu_ms() {
                println!("CPU {user} {sys}");
            }
            seq
        }
        "--child-raw-write" => {
            // The lines of an existing log, written again: read first, outside the timing.
            let buf = fs::read(arg(0)?)?;
            let lines = lines_of(&buf);
            let dst = Path::new(arg(1)?);
            let t = match arg(2)?.as_str() {
                "per-line" => raw_write_per_line(dst, &lines)?,
                _ => raw_write_buffered(dst, &lines)?,
            };
            let after = vm_hwm_kib()?;
            println!("CHILD {before} {after} {} {}", buf.len(), t.as_nanos());
            return Ok(());
        }
        "--child-reopen" => {
            let home = Home::new(arg(0)?);
            let id = SessionId::new(arg(1)?.as_str())?;
            Recorder::open(&home, &id, rec_config())?.seq()
        }
        _ => return Err(format!("unknown child mode {mode}").into()),
    };
    let ns = t.elapsed().as_nanos();
    let after = vm_hwm_kib()?;
    println!("CHILD {before} {after} {count} {ns}");
    Ok(())
}

/// Runs this binary as a child; returns its report: start KiB, peak KiB, count, ns.
fn child(args: &[&str]) -> Res<[u64; 4]> {
    Ok(child_with_cpu(args)?.0)
}

/// A child's user and system CPU in ms, when it reported them.
type Cpu = Option<(u64, u64)>;

/// This process's user and system CPU so far, in ms (`/proc/self/stat`, at the clock tick's
/// resolution).
fn cpu_ms() -> Option<(u64, u64)> {
    let stat = fs::read_to_string("/proc/self/stat").ok()?;
    // After the command name's closing parenthesis: state is field 3, utime 14, stime 15.
    let rest = &stat[stat.rfind(')')? + 2..];
    let mut f = rest.split_whitespace().skip(11);
    let (utime, stime): (u64, u64) = (f.next()?.parse().ok()?, f.next()?.parse().ok()?);
    let tick = 10; // ms: USER_HZ is 100 on Linux
    Some((utime * tick, stime * tick))
}

/// [`child`], with the user and system CPU in ms the child reported, if it did (`CPU` line).
fn child_with_cpu(args: &[&str]) -> Res<([u64; 4], Cpu)> {
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
    let v = line
        .split_whitespace()
        .map(str::parse)
        .collect::<Result<Vec<u64>, _>>()?;
    let cpu = text.lines().find_map(|l| {
        let mut f = l.strip_prefix("CPU ")?.split_whitespace().map(str::parse);
        Some((f.next()?.ok()?, f.next()?.ok()?))
    });
    match v[..] {
        [a, b, c, d] => Ok(([a, b, c, d], cpu)),
        _ => Err(format!("bad child report {line:?}").into()),
    }
}

fn bench_memory(home: &Home, id: &SessionId, mem: &mut Vec<String>) -> Res<()> {
    let path = events_path(home, id);
    let file_bytes = fs::metadata(&path)?.len();
    let path_s = path.to_string_lossy().into_owned();
    let home_s = home.root().to_string_lossy().into_owned();
    let rows: [(&str, Vec<&str>, Option<u64>); 5] = [
        (
            "replay: read_events + ReplayBuilder",
            vec!["--child-replay", &path_s],
            Some(806),
        ),
        (
            "trace: read_events + TraceBuilder + finish()",
            vec!["--child-trace", &path_s],
            Some(822),
        ),
        (
            "  └ trace fold state before finish()",
            vec!["--child-trace-unfinished", &path_s],
            None,
        ),
        (
            "re-open a recorder",
            vec!["--child-reopen", &home_s, id.as_str()],
            Some(593),
        ),
        (
            "raw: plain read, 256 KiB buffer",
            vec!["--child-read", &path_s],
            None,
        ),
    ];
    for (label, args, orig) in rows {
        let mut runs = Vec::new();
        for _ in 0..3 {
            runs.push(child(&args)?);
        }
        runs.sort_by_key(|r| r[1]);
        let [before, after, _count, ns] = runs[1];
        let goal = match orig {
            Some(_) if label.starts_with("re-open") => "—".to_owned(),
            Some(_) => format!(
                "≤{PEAK_GOAL_MIB} MiB: {}",
                if after <= PEAK_GOAL_MIB * 1024 {
                    "MET"
                } else {
                    "MISSED"
                }
            ),
            None => "—".to_owned(),
        };
        mem.push(format!(
            "| {label} | {} | {} | {} | {} | {} | {goal} |",
            fmt_dur(Duration::from_nanos(ns)),
            mib(after * 1024),
            mib(after.saturating_sub(before) * 1024),
            orig.map_or("—".to_owned(), |m| format!("{m} MiB")),
            mib(file_bytes),
        ));
    }
    Ok(())
}

// ----- main ------------------------------------------------------------------------------------

fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().collect();
    if let Some(pos) = args.iter().position(|a| a.starts_with("--child-")) {
        return run_child(&args[pos], &args[pos + 1..]);
    }
    let scale = Scale::from_env();
    if std::env::var_os("FREECODE_BENCH_ONLY_ORIGINAL").is_some() {
        // Only the rows beside the original (no recording of our own log).
        return bench_beside_original(scale.quick, None);
    }
    if std::env::var_os("FREECODE_BENCH_ONLY_RECORD").is_some() {
        // Only recording, ours and the original's.
        let base = bench_base()?;
        let tmp: TempDir = tempfile::Builder::new().prefix("run-").tempdir_in(&base)?;
        let (mut rows, mut notes) = (Vec::new(), Vec::new());
        let (_, _, rec) = bench_record(tmp.path(), scale.events, &mut rows, &mut notes)?;
        print_table(&rows);
        for n in &notes {
            println!("note: {n}");
        }
        return print_record_beside_original(scale.quick, &rec);
    }
    let base = bench_base()?;
    let tmp: TempDir = tempfile::Builder::new().prefix("run-").tempdir_in(&base)?;
    eprintln!(
        "freecode-store rollout bench{}: temp dir {}",
        if scale.quick {
            " (QUICK: counts / 10)"
        } else {
            ""
        },
        tmp.path().display()
    );
    let (mut rows, mut notes, mut mem) = (Vec::new(), Vec::new(), Vec::new());

    eprintln!("[1/5] record");
    let (home, id, rec) = bench_record(tmp.path(), scale.events, &mut rows, &mut notes)?;
    eprintln!("[2/5] re-open");
    bench_reopen(&home, &id, &scale, &mut rows, &mut notes)?;
    bench_reopen_long_last_line(tmp.path(), &scale, &mut rows, &mut notes)?;
    eprintln!("[3/5] replay and trace");
    bench_read(&home, &id, scale.events, &mut rows)?;
    eprintln!("[4/5] peak memory");
    bench_memory(&home, &id, &mut mem)?;

    println!();
    println!(
        "freecode-store rollout log vs the TypeScript original (BENCH.md medians){}",
        if scale.quick {
            " — QUICK run, counts / 10; per-item figures compared"
        } else {
            ""
        }
    );
    println!(
        "Times are medians: 3 runs for record and its raw writes (each in a fresh process), {} re-opens (3 for long last lines), 5 for replay/trace.",
        scale.reopens
    );
    println!();
    print_table(&rows);
    println!();
    println!("Peak memory in a fresh child process (VmHWM; median of 3 children):");
    println!("| what | time | peak RSS | peak minus start | original peak | file | goal |");
    println!("|---|---|---|---|---|---|---|");
    for m in &mem {
        println!("{m}");
    }
    println!(
        "The original's peaks include ~75 MiB of Node baseline. `freecode trace`'s render lives in \
         freecode-cli (not a dependency of this crate) and is not measured here."
    );
    println!();
    for n in &notes {
        println!("note: {n}");
    }
    eprintln!("[5/5] beside the original, in the same run");
    bench_beside_original(scale.quick, Some(&rec))?;
    eprintln!("cleaning up");
    drop(tmp);
    Ok(())
}

// ----- beside the original, in the same run -------------------------------------------------------

/// Runs the original's own replay and trace (`run-bench.sh`, when `node` is on PATH and
/// `FREECODE_BENCH_NO_ORIGINAL` is unset) on its 1M-event log, then ours on the same file: the
/// library folds through `read_event_views` (one thread) and `fold_event_views` (two halves,
/// what the CLI runs), a raw read of the same bytes, and the release CLI
/// as a whole process under `/usr/bin/time` (built beforehand: `cargo build --release -p
/// freecode-cli`). Prints ours, the original's and the ratio. The `--json` rows also stand
/// beside the same output written by the library in this process, and `trace --json` beside
/// the two-halves fold run as a whole process (`--child-trace-halves`).
/// The record row beside the original's `record`, run now: ours (median of 3 fresh
/// processes), the original's median of 3, the ratio, and the raw cost of the same bytes.
fn print_record_beside_original(quick: bool, rec: &RecordFigures) -> Res<()> {
    let Some(original) = run_original(quick, "record")? else {
        return Ok(());
    };
    print_record_row(&original.result("record"), rec);
    Ok(())
}

fn print_record_row(o: &serde_json::Value, rec: &RecordFigures) {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let o_ms = o["medianMs"].as_f64().unwrap_or(f64::NAN);
    let o_n = o["items"].as_f64().unwrap_or(f64::NAN);
    // Per event, so a quick run (a tenth of the events) compares like for like.
    let ratio = (o_ms / o_n) / (ms(rec.ours) / rec.n as f64);
    println!();
    println!(
        "Recording beside the original, same session ({} events each; medians of 3 fresh processes):",
        rec.n
    );
    println!("| operation | original | ours | ratio | raw cost of the same bytes |");
    println!("|---|---|---|---|---|");
    println!(
        "| record {} events (Durability::Never) | {o_ms:.0} ms ({} events, {} MiB) | {:.0} ms ({} MiB) | {ratio:.1}× | one write() per line {:.0} ms; through a 1 MiB BufWriter {:.0} ms; serialising into one buffer {:.0} ms |",
        rec.n,
        o["items"],
        o["bytes"]
            .as_f64()
            .map_or("?".to_owned(), |b| format!("{:.0}", b / 1048576.0)),
        ms(rec.ours),
        rec.bytes / 1048576,
        ms(rec.per_line),
        ms(rec.buffered),
        ms(rec.serialise),
    );
    // Each run's CPU: the serialisation and the syscalls' own work are about the same from run
    // to run; what moves is the system time of first touching the new page cache, which on a
    // VM that hands freed memory back to its host at once is a host fault a page.
    let runs: Vec<String> = rec
        .runs
        .iter()
        .map(|(wall, cpu)| match cpu {
            Some((user, sys)) => format!("{:.0} ms (user {user}, sys {sys})", ms(*wall)),
            None => format!("{:.0} ms", ms(*wall)),
        })
        .collect();
    let best = rec.runs.iter().map(|r| r.0).min().unwrap_or_default();
    println!(
        "Our runs: {}; the fastest {:.0} ms is {:.1}× the original's median.",
        runs.join(", "),
        ms(best),
        (o_ms / o_n) / (ms(best) / rec.n as f64)
    );
}

/// Removes the fold checkpoints of the home at `home` (a first read has none).
fn remove_checkpoints(home: &Path) -> Res<()> {
    match fs::remove_dir_all(home.join("state/folds")) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
        _ => Ok(()),
    }
}

/// 1,000 complete lines from the middle of the log at `path`.
fn thousand_lines(path: &Path) -> Res<Vec<u8>> {
    let bytes = fs::read(path)?;
    let mid = bytes.len() / 2;
    let start = memchr_after(&bytes, mid);
    let mut end = start;
    for _ in 0..1000 {
        end = memchr_after(&bytes, end);
    }
    Ok(bytes[start..end].to_vec())
}

/// The offset just past the first newline at or after `from` (the length when none).
fn memchr_after(bytes: &[u8], from: usize) -> usize {
    bytes[from..]
        .iter()
        .position(|b| *b == b'\n')
        .map_or(bytes.len(), |i| from + i + 1)
}

/// Appends `lines` to the log at `path`.
fn append_events(path: &Path, lines: &[u8]) -> Res<()> {
    OpenOptions::new()
        .append(true)
        .open(path)?
        .write_all(lines)?;
    Ok(())
}

fn bench_beside_original(quick: bool, rec: Option<&RecordFigures>) -> Res<()> {
    use freecode_store::rollout::{fold_event_views, read_event_views};
    let benches = if rec.is_some() {
        "record,replay,trace"
    } else {
        "replay,trace"
    };
    let Some(original) = run_original(quick, benches)? else {
        return Ok(());
    };
    if let Some(rec) = rec {
        print_record_row(&original.result("record"), rec);
    }
    let (o_replay, o_trace) = (original.result("replay"), original.result("trace"));
    let ms = |v: &serde_json::Value| v.as_f64().unwrap_or(f64::NAN);
    let home = original
        .bench_dir
        .join(format!("data-size-{}/events/.freecode", original.size));
    let log = home.join("rollout/sessions/bench-events/events.jsonl");
    let bytes = fs::metadata(&log)?.len();

    let raw = median3(&|| raw_read(&log).map(drop))?;
    // Each fold is timed until its answer is returned; freeing the answer is not timed (the
    // original's timer stops with its answer too, which its GC frees later).
    let replay = median3_kept(&|| {
        let mut b = ReplayBuilder::new("bench-events");
        read_event_views(&log, |v| b.apply_view(v))?.ok_or("no log")?;
        Ok(b.finish())
    })?;
    let fold = median3_kept(&|| {
        let mut b = TraceBuilder::new("bench-events");
        read_event_views(&log, |v| b.apply_view(v))?.ok_or("no log")?;
        Ok(b.finish(None))
    })?;
    // What the CLI runs: from SPLIT_BYTES on, two halves on two threads, spliced.
    let replay2 = median3_kept(&|| {
        let (b, _) = fold_event_views(&log, ReplayBuilder::new("bench-events"))?.ok_or("no log")?;
        Ok(b.finish())
    })?;
    let fold2 = median3_kept(&|| {
        let (b, _) = fold_event_views(&log, TraceBuilder::new("bench-events"))?.ok_or("no log")?;
        Ok(b.finish(None))
    })?;
    // The same outputs as the CLI writes them, in this process (warm, no process start):
    // the folds above with each span or turn written into a spool as it closes, then the
    // document written to a sink.
    let json_lib = median3(&|| {
        use freecode_store::rollout::{PrettyJson, fold_trace_streamed, write_trace_json};
        let (b, _) = fold_trace_streamed::<PrettyJson>(&log, "bench-events")?.ok_or("no log")?;
        write_trace_json(&mut std::io::sink(), b, None)?;
        Ok(())
    })?;
    let replay_json_lib = median3(&|| {
        use freecode_store::rollout::{PrettyJson, fold_replay_streamed, write_replay_json};
        let (b, _) = fold_replay_streamed::<PrettyJson>(&log, "bench-events")?.ok_or("no log")?;
        write_replay_json(&mut std::io::sink(), b)?;
        Ok(())
    })?;
    // The same, a fold checkpoint made on the way (each run a first read: none before it).
    let bench_home = Home::new(&home);
    let bench_id = SessionId::new("bench-events")?;
    let first_with_checkpoint = |replay: bool| -> Res<Duration> {
        use freecode_store::rollout::{
            PrettyJson, fold_replay_checkpointed, fold_trace_checkpointed, write_replay_json,
            write_trace_json,
        };
        let mut v = Vec::new();
        for _ in 0..3 {
            remove_checkpoints(&home)?;
            let t = Instant::now();
            if replay {
                let (b, _) = fold_replay_checkpointed::<PrettyJson>(&bench_home, &bench_id)?
                    .ok_or("no log")?;
                write_replay_json(&mut std::io::sink(), b)?;
            } else {
                let (b, _) = fold_trace_checkpointed::<PrettyJson>(&bench_home, &bench_id)?
                    .ok_or("no log")?;
                write_trace_json(&mut std::io::sink(), b, None)?;
            }
            v.push(t.elapsed());
        }
        remove_checkpoints(&home)?;
        Ok(median(&mut v))
    };
    let json_lib_ckpt = first_with_checkpoint(false)?;
    let replay_json_lib_ckpt = first_with_checkpoint(true)?;
    // The two-halves trace fold as a whole process, as the CLI is timed (`/usr/bin/time`).
    let log_s = log.to_string_lossy().into_owned();
    let fold_process = time_cli(
        &std::env::current_exe()?,
        None,
        &["--child-trace-halves", &log_s],
    )?;
    let cli = release_cli();
    let run_cli = |args: &[&str]| time_cli(&cli, Some(&home), args);
    // 1,000 events to append, taken from the log itself (the lines of its middle).
    let more = thousand_lines(&log)?;
    let otlp_to = std::env::temp_dir().join(format!("fc-otlp-{}.json", std::process::id()));
    let otlp_s = otlp_to.to_string_lossy().into_owned();
    let cli_rows: Vec<(&str, Res<(Duration, u64)>)> = if cli.is_file() {
        let rows = vec![
            (
                "`freecode trace` (rendered)",
                run_cli(&["trace", "bench-events", "--no-pager"]),
            ),
            (
                "`freecode trace --json`, first read (no fold checkpoint)",
                time_cli_each(
                    &cli,
                    Some(&home),
                    &["trace", "bench-events", "--json"],
                    &mut || remove_checkpoints(&home),
                ),
            ),
            (
                "`freecode trace --json` again, log unchanged (from its checkpoint)",
                run_cli(&["trace", "bench-events", "--json"]),
            ),
            (
                "`freecode trace --json` after 1,000 more events (each run)",
                time_cli_each(
                    &cli,
                    Some(&home),
                    &["trace", "bench-events", "--json"],
                    &mut || append_events(&log, &more),
                ),
            ),
            (
                "`freecode replay --json`, first read (no fold checkpoint)",
                time_cli_each(
                    &cli,
                    Some(&home),
                    &["replay", "bench-events", "--json"],
                    &mut || {
                        // The log as the original wrote it (the trace rows appended to it).
                        OpenOptions::new().write(true).open(&log)?.set_len(bytes)?;
                        remove_checkpoints(&home)
                    },
                ),
            ),
            (
                "`freecode replay --json` again, log unchanged (from its checkpoint)",
                run_cli(&["replay", "bench-events", "--json"]),
            ),
            (
                "`freecode replay --json` after 1,000 more events (each run)",
                time_cli_each(
                    &cli,
                    Some(&home),
                    &["replay", "bench-events", "--json"],
                    &mut || append_events(&log, &more),
                ),
            ),
            (
                "`freecode trace --otlp FILE` (the document written and synced)",
                run_cli(&["trace", "bench-events", "--otlp", &otlp_s]),
            ),
        ];
        let _ = fs::remove_file(&otlp_to);
        // The log as the original wrote it, for what follows; no checkpoint left behind.
        OpenOptions::new().write(true).open(&log)?.set_len(bytes)?;
        remove_checkpoints(&home)?;
        rows
    } else {
        eprintln!("  no release CLI at {}: CLI rows skipped", cli.display());
        Vec::new()
    };

    let secs = |d: Duration| d.as_secs_f64() * 1e3;
    println!();
    println!(
        "Beside the original, same run, same file ({} events.jsonl, {}; medians of 3):",
        o_replay["items"],
        mib(bytes)
    );
    println!("| operation | original | ours | ratio | raw read of the bytes |");
    println!("|---|---|---|---|---|");
    let row = |name: &str, o: f64, o_peak: &str, ours: f64, ours_peak: &str| {
        let (o, ratio) = if o.is_nan() {
            ("—".to_owned(), "—".to_owned())
        } else {
            (format!("{o:.0} ms{o_peak}"), format!("{:.1}×", o / ours))
        };
        println!(
            "| {name} | {o} | {ours:.0} ms{ours_peak} | {ratio} | {:.0} ms |",
            secs(raw)
        );
    };
    let peak = |v: &serde_json::Value| format!(", {:.0} MiB", ms(&v["peakRssMiB"]));
    row(
        "replay (library fold, one thread)",
        ms(&o_replay["medianMs"]),
        &peak(&o_replay),
        secs(replay),
        "",
    );
    row(
        "replay (library fold, two halves: `fold_event_views`)",
        ms(&o_replay["medianMs"]),
        &peak(&o_replay),
        secs(replay2),
        "",
    );
    row(
        "trace load + fold (library, one thread)",
        ms(&o_trace["medianMs"]),
        &peak(&o_trace),
        secs(fold),
        "",
    );
    row(
        "trace load + fold (library, two halves: `fold_event_views`)",
        ms(&o_trace["medianMs"]),
        &peak(&o_trace),
        secs(fold2),
        "",
    );
    let o_render = ms(&o_trace["medianMs"]) + ms(&o_trace["parts"]["renderMs"]);
    let o_otlp = ms(&o_trace["medianMs"]) + ms(&o_trace["parts"]["otlpMs"]);
    for (name, r) in cli_rows {
        let (t, kib) = r?;
        let o = if name.contains("rendered") {
            o_render
        } else if name.contains("--otlp") {
            o_otlp
        } else {
            f64::NAN
        };
        row(name, o, "", secs(t), &format!(", {} MiB", kib / 1024));
        if name.contains("--json") && !name.contains("again") && !name.contains("more events") {
            let (what, base, lib, lib_ckpt) = if name.contains("replay") {
                ("replay", replay2, replay_json_lib, replay_json_lib_ckpt)
            } else {
                ("trace", fold2, json_lib, json_lib_ckpt)
            };
            println!(
                "|  └ vs our {what} fold alone (library, warm) | | | {:.2}× the fold | |",
                secs(t) / secs(base)
            );
            println!(
                "|  └ the same output from the library, warm: fold + spool + document to a sink | | {:.0} ms | {:.2}× the fold | |",
                secs(lib),
                secs(lib) / secs(base)
            );
            println!(
                "|  └ the same, making its fold checkpoint (`fold_{what}_checkpointed`, no checkpoint before) | | {:.0} ms | {:.2}× the fold | |",
                secs(lib_ckpt),
                secs(lib_ckpt) / secs(base)
            );
            if what == "trace" {
                println!(
                    "|  └ vs the two-halves fold as a whole process (`--child-trace-halves`, {:.0} ms, {} MiB) | | | {:.2}× the fold | |",
                    secs(fold_process.0),
                    fold_process.1 / 1024,
                    secs(t) / secs(fold_process.0)
                );
            }
        }
    }
    println!(
        "The original's trace is load + fold (its render, {:.0} ms in this run, is added for the rendered row; its OTLP mapping, {:.0} ms, built in memory and not written, for the `--otlp` row); each library fold (ours and the original's) is timed until its answer is returned, not while the answer is freed; its peaks include Node's baseline. CLI peaks are `/usr/bin/time` %M.",
        ms(&o_trace["parts"]["renderMs"]),
        ms(&o_trace["parts"]["otlpMs"])
    );
    Ok(())
}
