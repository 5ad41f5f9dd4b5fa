//! What a look at a big home costs, whole process: `session list --limit 20` and `search`
//! (words; then both and meaning, with the tests' model and a random vector for every chunk) on homes of 10,000 and 50,000 sessions, warm, each beside the same command with
//! `--fresh` (a full check: a `stat` of every session, what every look cost before the change
//! journal), with the `statx` calls each makes (`strace -f -c`, when strace is installed), and the
//! original's own `list` on as many sessions (`run-bench.sh`, `BENCHES=list`, when node is on
//! PATH; `FREECODE_BENCH_NO_ORIGINAL=1` skips it).
//!
//! `cargo bench -p freecode-cli --bench look` (`FREECODE_BENCH_SESSIONS=10000,50000` by
//! default; `FREECODE_BENCH_RUNS`, default 21). The homes are written as the original writes
//! them (a project directory per project, `meta.json`, an 8-message `messages.jsonl` of
//! Zipf-distributed words over a 5,000-word vocabulary, and a
//! rollout log per session; 20 projects; each file's mtime its session's last activity, months
//! ago) under the target directory, then indexed once by `index rebuild` (not timed). The timed
//! runs follow a first warm-up run of each command.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::fs;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, UNIX_EPOCH};

use freecode_core::message::{Part, Role, StoredMessage};
use freecode_core::{SessionId, SessionMeta};

const BIN: &str = env!("CARGO_BIN_EXE_freecode");

fn env_list(name: &str, default: &[usize]) -> Vec<usize> {
    std::env::var(name)
        .ok()
        .map(|v| v.split(',').filter_map(|s| s.trim().parse().ok()).collect())
        .filter(|v: &Vec<usize>| !v.is_empty())
        .unwrap_or_else(|| default.to_vec())
}

const WORDS: &[&str] = &[
    "parser",
    "tokenizer",
    "borrow",
    "checker",
    "lifetime",
    "trait",
    "async",
    "runtime",
    "deadlock",
    "mutex",
    "migration",
    "schema",
    "index",
    "cache",
    "eviction",
    "retry",
    "timeout",
    "socket",
    "handshake",
    "certificate",
    "linker",
    "symbol",
    "allocator",
    "arena",
    "benchmark",
    "flamegraph",
    "regression",
    "bisect",
    "fixture",
    "snapshot",
];

/// Function words, the most frequent ranks of the text.
const COMMON: &[&str] = &[
    "the", "and", "to", "of", "a", "in", "is", "it", "that", "for", "this", "with", "on", "be",
    "as", "at", "by", "we", "not", "or",
];

/// How many distinct words the text draws from: the common ones, the coding ones, then
/// identifiers (`ident123`), with Zipf's law over the ranks as in natural text (so a query's
/// words match a realistic share of the messages, not nearly all of them).
const VOCABULARY: usize = 5_000;

/// A deterministic word stream (xorshift) over [`VOCABULARY`] ranks, Zipf-distributed.
struct Rng {
    state: u64,
    /// Cumulative weights of the ranks (1/r).
    cumulative: Vec<f64>,
}

impl Rng {
    fn new(seed: u64) -> Self {
        let mut total = 0.0;
        let cumulative = (1..=VOCABULARY)
            .map(|r| {
                total += 1.0 / r as f64;
                total
            })
            .collect();
        Self {
            state: seed,
            cumulative,
        }
    }

    fn next(&mut self) -> u64 {
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        self.state
    }

    fn word(&mut self) -> String {
        let total = *self.cumulative.last().unwrap();
        let x = (self.next() >> 11) as f64 / (1u64 << 53) as f64 * total;
        let rank = self.cumulative.partition_point(|&c| c < x);
        match rank {
            r if r < COMMON.len() => COMMON[r].to_owned(),
            r if r < COMMON.len() + WORDS.len() => WORDS[r - COMMON.len()].to_owned(),
            r => format!("ident{r}"),
        }
    }

    fn words(&mut self, n: usize) -> String {
        (0..n).map(|_| self.word()).collect::<Vec<_>>().join(" ")
    }
}

fn private_dir(p: &Path) {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(p)
        .unwrap();
}

/// A home of `n` sessions, written as the original writes them.
fn make_home(root: &Path, n: usize) {
    let t0 = 1_780_000_000_000_i64;
    let mut rng = Rng::new(0x9e37_79b9_7f4a_7c15);
    for d in ["sessions", "rollout/sessions", "state"] {
        private_dir(&root.join(d));
    }
    for i in 0..n {
        let id = SessionId::new(format!("0b16b16b-0000-4000-8000-{i:012}")).unwrap();
        let project = format!("/home/dev/src/project_{:02}", i % 20);
        let dir = root
            .join("sessions")
            .join(freecode_core::project_key::format_original(&project))
            .join(id.as_str());
        private_dir(&dir);
        let at = t0 + i as i64 * 60_000;
        let mut meta = SessionMeta::new(
            &id,
            format!("Session {i}: {}", rng.words(4)),
            project,
            "anthropic".into(),
            Some("claude-sonnet-4-5".into()),
            at,
        );
        meta.last_turn_at = at + 30_000;
        meta.turn_count = 4;
        let mut log = Vec::new();
        for m in 0..8 {
            let role = if m % 2 == 0 {
                Role::User
            } else {
                Role::Assistant
            };
            let text = rng.words(24);
            log.extend(
                StoredMessage::new(format!("m{m}"), role, vec![Part::text(text)], at + m).to_line(),
            );
        }
        fs::write(dir.join("messages.jsonl"), &log).unwrap();
        fs::write(dir.join("meta.json"), meta.to_pretty_json()).unwrap();
        // Written when it was active, as in a home of some years: not "recently changed".
        let then = UNIX_EPOCH + Duration::from_millis(u64::try_from(at + 30_000).unwrap());
        for f in ["messages.jsonl", "meta.json"] {
            let file = fs::File::options().write(true).open(dir.join(f)).unwrap();
            file.set_modified(then).unwrap();
        }
        let r = root.join("rollout/sessions").join(id.as_str());
        private_dir(&r);
        fs::write(
            r.join("events.jsonl"),
            format!(
                "{{\"type\":\"turn.started\",\"id\":\"01KF0FSJZ2{i:010}\",\"seq\":1,\"aggregateID\":\"{id}\",\"timestamp\":{at},\"turnId\":\"turn-0\"}}\n"
            ),
        )
        .unwrap();
        let file = fs::File::options()
            .write(true)
            .open(r.join("events.jsonl"))
            .unwrap();
        file.set_modified(then).unwrap();
    }
}

/// Runs the CLI on `home` once, to completion; its wall time.
fn run(home: &Path, args: &[&str]) -> Duration {
    let t = Instant::now();
    let out = Command::new(BIN)
        .arg("--home")
        .arg(home)
        .args(args)
        .env("HOME", home.parent().unwrap())
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let took = t.elapsed();
    // Exit 1 is "no match" for search; anything else is a failure.
    assert!(
        out.status.success() || out.status.code() == Some(1),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    took
}

/// The `statx` (and `newfstatat`) calls one run makes, from `strace -f -c`; `None` without strace.
fn stat_calls(home: &Path, args: &[&str]) -> Option<u64> {
    let summary = home.parent().unwrap().join("strace.txt");
    let ok = Command::new("strace")
        .args(["-f", "-c", "-e", "trace=statx,newfstatat,stat,lstat", "-o"])
        .arg(&summary)
        .arg(BIN)
        .arg("--home")
        .arg(home)
        .args(args)
        .env("HOME", home.parent().unwrap())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .ok()?;
    ok.code()?;
    let text = fs::read_to_string(&summary).ok()?;
    // The "total" row: `100.00  secs  usecs/call  calls  [errors]  total`.
    text.lines()
        .find(|l| l.trim_end().ends_with("total"))
        .and_then(|l| l.split_whitespace().nth(3)?.parse().ok())
}

fn percentile(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i.min(v.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

/// The original's `list` on `n` sessions (its own data, prepared once by its own code), as its
/// bench reports it: the first call and the median of 25 more, in process.
fn original_list(n: usize) -> Option<(f64, f64)> {
    if std::env::var_os("FREECODE_BENCH_NO_ORIGINAL").is_some()
        || !Command::new("node")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    {
        return None;
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/reference/original/run-bench.sh");
    let size = format!("{}", n as f64 / 1000.0);
    let out_json =
        std::env::temp_dir().join(format!("fc-orig-list-{}-{n}.json", std::process::id()));
    let status = Command::new(&script)
        .env("SIZE", &size)
        .env("RUNS", "3")
        .env("BENCHES", "list")
        .env("BENCH_OUT", &out_json)
        .stdout(Stdio::null())
        .status()
        .ok()?;
    if !status.success() {
        eprintln!("  original's list failed: {status}");
        return None;
    }
    let v: serde_json::Value = serde_json::from_slice(&fs::read(&out_json).ok()?).ok()?;
    let _ = fs::remove_file(&out_json);
    let row = v["results"]
        .as_array()?
        .iter()
        .find(|r| r["bench"] == "list")?;
    let note = row["note"].as_str().unwrap_or_default();
    let repeat: f64 = note
        .split("median ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or(f64::NAN);
    Some((row["medianMs"].as_f64()?, repeat))
}

/// A table row per case: a warm-up run, then p50 and p95 of `runs` runs, and the `statx` calls
/// of one more.
fn rows(home: &Path, cases: &[(&str, Vec<&str>)], runs: usize) {
    for (name, args) in cases {
        run(home, args);
        let mut times: Vec<Duration> = (0..runs).map(|_| run(home, args)).collect();
        let stats = stat_calls(home, args).map_or_else(|| "-".to_owned(), |c| c.to_string());
        println!(
            "| {name} | {} | {} | {stats} |",
            ms(percentile(&mut times, 0.5)),
            ms(percentile(&mut times, 0.95))
        );
    }
}

fn main() {
    let sizes = env_list("FREECODE_BENCH_SESSIONS", &[10_000, 50_000]);
    let runs = env_list("FREECODE_BENCH_RUNS", &[21])[0].max(1);
    let base: PathBuf = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(
            || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"),
            PathBuf::from,
        )
        .join("freecode-look-bench");
    for n in sizes {
        let scratch = base.join(format!("{n}"));
        let _ = fs::remove_dir_all(&scratch);
        let home = scratch.join(".freecode");
        let t = Instant::now();
        make_home(&home, n);
        let made = t.elapsed();
        let t = Instant::now();
        run(&home, &["index", "rebuild"]);
        println!(
            "\n{n} sessions (20 projects, 8 messages and a rollout log each): written in {:.1} s, indexed in {:.1} s",
            made.as_secs_f64(),
            t.elapsed().as_secs_f64()
        );
        println!("| command | p50 | p95 | statx calls |");
        println!("|---|---:|---:|---:|");
        let cases: [(&str, Vec<&str>); 5] = [
            (
                "session list --limit 20",
                vec!["session", "list", "--limit", "20"],
            ),
            (
                "session list --limit 20 --fresh (full check)",
                vec!["session", "list", "--limit", "20", "--fresh"],
            ),
            (
                "search (words)",
                vec![
                    "search",
                    "tokenizer deadlock",
                    "--mode",
                    "words",
                    "--limit",
                    "20",
                ],
            ),
            (
                "search (words) --fresh (full check)",
                vec![
                    "search",
                    "tokenizer deadlock",
                    "--mode",
                    "words",
                    "--limit",
                    "20",
                    "--fresh",
                ],
            ),
            (
                "search (words, a question: most of its words)",
                vec![
                    "search",
                    "why does the tokenizer deadlock in the parser",
                    "--mode",
                    "words",
                    "--limit",
                    "20",
                ],
            ),
        ];
        rows(&home, &cases, runs);
        // By meaning and both: the tests' model configured, the chunks made (`index status`
        // makes them), and every chunk given a vector of random bytes: what a query costs is
        // the model loaded, the query embedded and every vector scanned, whatever their values
        // (embedding 4 chunks a session for real would take most of an hour here). Random
        // vectors are far from any query, so the hits are the words'.
        let model = freecode_testkit::sentence_model();
        let dims = serde_json::from_slice::<serde_json::Value>(
            &fs::read(model.join("config.json")).unwrap(),
        )
        .unwrap()["hidden_size"]
            .as_u64()
            .unwrap();
        run(&home, &["config", "set", "embed.provider", "local"]);
        run(
            &home,
            &["config", "set", "embed.path", model.to_str().unwrap()],
        );
        run(&home, &["index", "status"]);
        let db = rusqlite::Connection::open(home.join("state/freecode.db")).unwrap();
        let chunks = db
            .execute(
                "UPDATE idx_chunks SET vec = randomblob(?1) WHERE vec IS NULL",
                [i64::try_from(dims).unwrap()],
            )
            .unwrap();
        drop(db);
        println!(
            "| ({chunks} chunks, each with a random vector; the tests' model loaded each run) | | | |"
        );
        let cases: [(&str, Vec<&str>); 3] = [
            (
                "search (both)",
                vec!["search", "tokenizer deadlock", "--limit", "20"],
            ),
            (
                "search (both, a question)",
                vec![
                    "search",
                    "why does the tokenizer deadlock in the parser",
                    "--limit",
                    "20",
                ],
            ),
            (
                "search (meaning)",
                vec![
                    "search",
                    "tokenizer deadlock",
                    "--mode",
                    "meaning",
                    "--limit",
                    "20",
                ],
            ),
        ];
        rows(&home, &cases, runs);
        match original_list(n) {
            Some((first, repeat)) => println!(
                "| the original's list (in process, its own {n} sessions × 50 messages): first call, then the median of 25 | {first:.1} ms | {repeat:.1} ms | |"
            ),
            None => println!(
                "| the original's list | skipped (no node, or FREECODE_BENCH_NO_ORIGINAL) | | |"
            ),
        }
        let _ = fs::remove_dir_all(&scratch);
    }
}
