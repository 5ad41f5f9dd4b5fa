//! Export, import and private sharing end to end: the real `freecode` binary against a real
//! share server on loopback (filesystem blobs), and every kind of bad input.

use crate::common;

use crate::common::{Ctx, fixtures};

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use freecode_sync::blob::StoreSpec;
use freecode_sync::server::{ServerConfig, ServerHandle, spawn};
use serde_json::Value;

const S1: &str = "68d44408-94df-4f2f-ae2e-ffffdb68e297";
const S1_TEXT: &str = "Add a dark mode toggle to the settings page";

impl Ctx {
    /// A second, empty home: the receiving machine.
    fn other_home(&self, name: &str) -> PathBuf {
        self.path(name)
    }

    fn run_in(&self, home: &Path, args: &[&str]) -> Output {
        common::freecode(home).args(args).output().unwrap()
    }

    fn ok_in(&self, home: &Path, args: &[&str]) -> String {
        let out = self.run_in(home, args);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    fn server(&self, api_key: Option<&str>) -> (ServerHandle, PathBuf) {
        self.server_sweeping(api_key, Duration::from_secs(3600))
    }

    fn server_sweeping(&self, api_key: Option<&str>, sweep: Duration) -> (ServerHandle, PathBuf) {
        let dir = self.tmp.path().join("server-blobs");
        let handle = spawn(ServerConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            store: StoreSpec::File(dir.clone()),
            api_key: api_key.map(str::to_owned),
            sweep_interval: sweep,
            ..ServerConfig::default()
        })
        .unwrap();
        (handle, dir)
    }
}

impl Ctx {
    /// Appends `message` (one JSON line) to S1's log in the fixture home.
    fn append_to_s1(&self, message: &Value) {
        let log = self
            .home
            .join("sessions/home__dev__projects__my_h_app")
            .join(S1)
            .join("messages.jsonl");
        let mut text = std::fs::read_to_string(&log).unwrap();
        text.push_str(&serde_json::to_string(message).unwrap());
        text.push('\n');
        std::fs::write(&log, text).unwrap();
    }
}

fn sessions_in(home: &Path) -> Vec<Value> {
    let out = common::freecode(home)
        .args(["session", "list", "--all", "--json"])
        .output()
        .unwrap();
    if !out.status.success() {
        return Vec::new();
    }
    serde_json::from_slice::<Vec<Value>>(&out.stdout).unwrap_or_default()
}

fn messages(home: &Path, id: &str) -> Vec<Value> {
    let out = common::freecode(home)
        .args(["session", "show", id, "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v["messages"].as_array().unwrap().clone()
}

fn all_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(all_files(&p));
            } else {
                out.push(p);
            }
        }
    }
    out
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn export_then_import_gives_the_same_conversation_under_a_new_id() {
    let ctx = Ctx::fixture();
    let (server, blobs) = ctx.server(None);
    let url = ctx
        .ok(&["session", "export", S1, "--to", &server.url])
        .trim()
        .to_owned();
    assert!(url.starts_with(&server.url), "{url}");
    let (_, key) = url
        .split_once('#')
        .expect("the key travels in the fragment");
    assert_eq!(key.len(), 43);

    // The server holds ciphertext only: no message text, no title, no key.
    let stored = all_files(&blobs);
    assert!(!stored.is_empty());
    for f in &stored {
        let bytes = std::fs::read(f).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        for needle in [S1_TEXT, "dark mode", "Add dark mode toggle", S1, key] {
            assert!(!text.contains(needle), "{} holds {needle:?}", f.display());
        }
    }

    let other = ctx.other_home("receiver");
    let new_id = ctx
        .ok_in(&other, &["session", "import", &url])
        .trim()
        .to_owned();
    assert_ne!(new_id, S1);
    let original = messages(&ctx.home, S1);
    let imported = messages(&other, &new_id);
    assert_eq!(imported.len(), original.len());
    for (a, b) in original.iter().zip(&imported) {
        assert_eq!(a["parts"], b["parts"]);
        assert_eq!(a["role"], b["role"]);
    }
    let metas = sessions_in(&other);
    assert_eq!(metas.len(), 1);
    let m = &metas[0];
    assert_eq!(m["id"], new_id.as_str());
    assert_eq!(m["title"], "Add dark mode toggle (imported)");
    assert_eq!(m["model"], "claude-sonnet-4-5");
    assert_eq!(m["status"], "active");
    assert_eq!(m["importedFrom"]["sessionId"], S1);
    assert!(!m["importedFrom"]["source"].as_str().unwrap().contains('#'));

    // Importing twice never overwrites: a second new session.
    let again = ctx
        .ok_in(&other, &["session", "import", &url])
        .trim()
        .to_owned();
    assert_ne!(again, new_id);
    assert_eq!(sessions_in(&other).len(), 2);

    // The share is in the log with its expiry; `share list --json` hides the delete token.
    let list: Vec<Value> = serde_json::from_str(&ctx.ok(&["share", "list", "--json"])).unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0]["sessionId"], S1);
    assert!(list[0]["expiresAt"].as_i64().unwrap() > 0);
    assert!(list[0].get("deleteToken").is_none());
    drop(server);
}

#[test]
fn wrong_key_tampered_blob_and_missing_key_are_clear_errors_and_write_nothing() {
    let ctx = Ctx::fixture();
    let (server, blobs) = ctx.server(None);
    let url = ctx
        .ok(&["session", "export", S1, "--to", &server.url])
        .trim()
        .to_owned();
    let base = url.split('#').next().unwrap();
    let other = ctx.other_home("receiver");

    let wrong = format!("{base}#{}", "A".repeat(43));
    let out = ctx.run_in(&other, &["session", "import", &wrong]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("wrong key"), "{}", stderr(&out));

    let out = ctx.run_in(&other, &["session", "import", base]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("no key"), "{}", stderr(&out));

    let out = ctx.run_in(&other, &["session", "import", &format!("{base}#short")]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("malformed"), "{}", stderr(&out));

    // Flip one byte of the stored ciphertext: authentication fails.
    let code = base.rsplit('/').next().unwrap();
    let blob = all_files(&blobs)
        .into_iter()
        .find(|p| p.file_name().unwrap().to_string_lossy() == code)
        .expect("the blob is stored under its code");
    let mut bytes = std::fs::read(&blob).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&blob, &bytes).unwrap();
    let out = ctx.run_in(&other, &["session", "import", &url]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("tampered"), "{}", stderr(&out));

    assert!(sessions_in(&other).is_empty(), "nothing was written");
    assert!(!other.join("sessions").exists() || all_files(&other.join("sessions")).is_empty());
}

#[test]
fn an_expired_share_answers_410_and_is_swept() {
    let ctx = Ctx::fixture();
    // This replica never sweeps: the expiry is enforced on read.
    let (server, blobs) = ctx.server(None);
    let export = || {
        ctx.ok(&[
            "session",
            "export",
            S1,
            "--to",
            &server.url,
            "--expires",
            "1s",
        ])
        .trim()
        .to_owned()
    };
    let read = export();
    let unread = export();
    let code_of = |url: &str| {
        url.split('#')
            .next()
            .unwrap()
            .rsplit('/')
            .next()
            .unwrap()
            .to_owned()
    };
    let stored = |code: &str| {
        all_files(&blobs)
            .iter()
            .any(|p| p.file_name().unwrap().to_string_lossy().starts_with(code))
    };
    assert!(stored(&code_of(&read)) && stored(&code_of(&unread)));
    std::thread::sleep(Duration::from_millis(1300));
    let other = ctx.other_home("receiver");
    let out = ctx.run_in(&other, &["session", "import", &read]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("expired"), "{}", stderr(&out));
    assert!(
        !stored(&code_of(&read)),
        "an expired share is deleted when read"
    );
    assert!(stored(&code_of(&unread)));
    // A second replica over the same store sweeps what nobody reads.
    let (_sweeper, _) = ctx.server_sweeping(None, Duration::from_millis(100));
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while stored(&code_of(&unread)) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        !stored(&code_of(&unread)),
        "the sweeper removed the expired share"
    );
    assert!(sessions_in(&other).is_empty());
}

#[test]
fn a_revoked_share_is_gone_even_after_the_session_was_purged() {
    let ctx = Ctx::fixture();
    let (server, _) = ctx.server(None);
    let url = ctx
        .ok(&["session", "export", S1, "--to", &server.url])
        .trim()
        .to_owned();
    ctx.ok(&["session", "delete", S1, "--purge", "--yes"]);
    let public = url.split('#').next().unwrap();
    let out = ctx.run(&["share", "revoke", public]);
    assert!(out.status.success(), "{}", stderr(&out));
    let other = ctx.other_home("receiver");
    let out = ctx.run_in(&other, &["session", "import", &url]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("not found"), "{}", stderr(&out));
    let list: Vec<Value> = serde_json::from_str(&ctx.ok(&["share", "list", "--json"])).unwrap();
    assert!(list[0]["revokedAt"].as_i64().is_some());
    // Revoking a URL this home never shared is a clear error.
    let out = ctx.run(&[
        "share",
        "revoke",
        &format!("{}/0123456789abcdef0123456789abcdef", server.url),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("share log"), "{}", stderr(&out));
}

#[test]
fn secrets_are_redacted_before_they_leave_and_dry_run_shows_where() {
    let ctx = Ctx::fixture();
    let (server, _) = ctx.server(None);
    // Append a tool output full of secrets to S1's log.
    let aws = "AKIAQWERTYUIOPASDFGH";
    let gh = "ghp_Zq8rT1vXw0yB3nC5mD7fG9hJ2kL4pQ6sU8wA";
    let gl = "glpat-Xy7Kq2Lm9Np4Rs6Tu8Vw";
    let line = serde_json::json!({
        "id": "secret-msg", "role": "assistant", "timestamp": 1768468300000i64,
        "parts": [{"type": "tool", "tool": {"name": "bash", "args": {"command": format!("export GITHUB_TOKEN={gh}")}},
                   "result": format!("aws_access_key_id = {aws}\nDB_PASSWORD=hunter2hunter2\n")},
                  // A part type this version does not know: its keys are kept, and redacted.
                  {"type": "reasoning", "text": format!("the key {gl} came from the CI settings")}]
    });
    ctx.append_to_s1(&line);

    let dry = ctx.ok(&[
        "session",
        "export",
        S1,
        "--to",
        &server.url,
        "--dry-run",
        "--json",
    ]);
    let v: Value = serde_json::from_str(&dry).unwrap();
    let kinds: Vec<&str> = v["redactions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["kind"].as_str().unwrap())
        .collect();
    assert!(kinds.contains(&"aws-access-token"), "{kinds:?}");
    assert!(kinds.contains(&"github-pat"), "{kinds:?}");
    assert!(!dry.contains(aws) && !dry.contains(gh) && !dry.contains("hunter2hunter2"));
    let locs: Vec<&str> = v["redactions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["location"].as_str().unwrap())
        .collect();
    assert!(locs.iter().any(|l| l.ends_with(".result")), "{locs:?}");
    assert!(locs.iter().any(|l| l.contains(".tool.args")), "{locs:?}");
    // A dry run sends nothing.
    assert_eq!(
        serde_json::from_str::<Vec<Value>>(&ctx.ok(&["share", "list", "--json"]))
            .unwrap()
            .len(),
        0
    );

    let url = ctx
        .ok(&["session", "export", S1, "--to", &server.url])
        .trim()
        .to_owned();
    let other = ctx.other_home("receiver");
    let id = ctx
        .ok_in(&other, &["session", "import", &url])
        .trim()
        .to_owned();
    let all = serde_json::to_string(&messages(&other, &id)).unwrap();
    assert!(!all.contains(aws) && !all.contains(gh) && !all.contains("hunter2hunter2"));
    assert!(
        !all.contains(gl),
        "unknown part types are redacted too: {all}"
    );
    assert!(all.contains("[REDACTED:aws-access-token]"), "{all}");
    assert!(all.contains("came from the CI settings"), "{all}");
    assert!(all.contains("DB_PASSWORD="), "key names stay visible");
}

#[test]
fn a_users_redact_toml_names_its_rule_in_the_dry_run_and_a_bad_one_stops_the_export() {
    let ctx = Ctx::fixture();
    let (server, blobs) = ctx.server(None);
    let secret = "acme_live_7Hq2LmX9pQ4rT8vW";
    let line = serde_json::json!({
        "id": "acme-msg", "role": "user", "timestamp": 1768468300000i64,
        "parts": [{"type": "text", "content": format!("déployé avec {secret} — ne pas partager")}]
    });
    ctx.append_to_s1(&line);
    let rules = ctx.home.join("redact.toml");
    std::fs::write(
        &rules,
        "# nos clés de déploiement\n[[rules]]\nid = \"acme-deploy-key\"\n\
         regex = '''\\bacme_live_[A-Za-z0-9]{16}\\b'''\nkeywords = [\"acme_live_\"]\n",
    )
    .unwrap();

    let dry = ctx.ok(&[
        "session",
        "export",
        S1,
        "--to",
        &server.url,
        "--dry-run",
        "--json",
    ]);
    assert!(!dry.contains(secret), "{dry}");
    let v: Value = serde_json::from_str(&dry).unwrap();
    let found: Vec<&Value> = v["redactions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["kind"] == "acme-deploy-key")
        .collect();
    assert_eq!(found.len(), 1, "{dry}");
    let preview = found[0]["preview"].as_str().unwrap();
    assert!(
        preview.starts_with("acm") && preview.contains('…'),
        "{preview}"
    );
    assert_eq!(v["redactionsByRule"]["acme-deploy-key"], 1, "{dry}");
    // The human dry run says the same: the rule, a masked preview, the count per rule.
    let human = ctx.ok(&["session", "export", S1, "--to", &server.url, "--dry-run"]);
    assert!(!human.contains(secret), "{human}");
    assert!(human.contains("acme-deploy-key"), "{human}");
    assert!(human.contains(preview), "{human}");
    assert!(
        human.contains("by rule:") && human.contains("acme-deploy-key 1"),
        "{human}"
    );

    // A rule file that does not parse stops the export, naming its line; nothing is sent.
    std::fs::write(
        &rules,
        "[[rules]]\nid = \"acme\"\nregex = '''(unclosed'''\n",
    )
    .unwrap();
    let out = ctx.run(&["session", "export", S1, "--to", &server.url]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("redact.toml:3"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(all_files(&blobs).is_empty(), "{:?}", all_files(&blobs));
    assert_eq!(
        serde_json::from_str::<Vec<Value>>(&ctx.ok(&["share", "list", "--json"]))
            .unwrap()
            .len(),
        0
    );
    // A dry run and an export to a file are refused alike.
    let out = ctx.run(&["session", "export", S1, "--to", &server.url, "--dry-run"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let file = ctx.path("out.fcbundle");
    let out = ctx.run(&["session", "export", S1, "--file", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(!file.exists());
}

#[test]
fn plain_http_is_refused_except_to_loopback() {
    let ctx = Ctx::fixture();
    let out = ctx.run(&["session", "export", S1, "--to", "http://example.com"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("plain HTTP"), "{}", stderr(&out));
    let out = ctx.run(&["session", "import", "http://example.com/abc#x"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(ctx.run(&["share", "list"]).status.success());
}

#[test]
fn config_json_sets_the_endpoint_the_api_key_and_the_expiry() {
    let ctx = Ctx::fixture();
    let (server, _) = ctx.server(Some("team-key"));
    std::fs::write(
        ctx.home.join("config.json"),
        serde_json::json!({"syncEndpoint": server.url, "syncApiKey": "team-key", "syncUrlExpiryDays": 2})
            .to_string(),
    )
    .unwrap();
    let before = freecode_store::now_ms();
    let out = ctx.ok(&["session", "export", S1, "--json"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    let expires = v["expiresAt"].as_i64().unwrap();
    let two_days = 2 * 86_400_000;
    assert!((expires - before - two_days).abs() < 60_000, "{expires}");
    // Without the key the server refuses the upload.
    std::fs::write(
        ctx.home.join("config.json"),
        serde_json::json!({"syncEndpoint": server.url}).to_string(),
    )
    .unwrap();
    let out = ctx.run(&["session", "export", S1]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("401"), "{}", stderr(&out));
}

#[test]
fn a_bad_config_json_stops_the_export_naming_file_line_and_column() {
    let ctx = Ctx::fixture();
    let (server, dir) = ctx.server(None);
    // A trailing comma on line 3: the original warned and sent the session to its public
    // default endpoint instead of this private one.
    std::fs::write(
        ctx.home.join("config.json"),
        format!("{{\n  \"syncEndpoint\": \"{}\",\n}}\n", server.url),
    )
    .unwrap();
    let out = ctx.run(&["session", "export", S1]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let want = format!(
        "{}:3:1: invalid config.json",
        ctx.home.join("config.json").display()
    );
    assert!(stderr(&out).contains(&want), "{}", stderr(&out));
    assert!(out.stdout.is_empty());
    // Every command that reads it says the same: the share list's revoke, the import of a URL.
    let out = ctx.run(&["session", "import", "https://127.0.0.1:9/abc"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains(&want), "{}", stderr(&out));
    let out = ctx.run(&["run", "hi"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains(&want), "{}", stderr(&out));
    // Not an object at all.
    std::fs::write(ctx.home.join("config.json"), "[1]").unwrap();
    let out = ctx.run(&["session", "export", S1]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("1:1: invalid config.json: expected a JSON object"),
        "{}",
        stderr(&out)
    );
    // Nothing reached the server: no file in its blob store.
    fn files(dir: &Path) -> usize {
        std::fs::read_dir(dir).map_or(0, |d| {
            d.map(|e| e.unwrap().path())
                .map(|p| if p.is_dir() { files(&p) } else { 1 })
                .sum()
        })
    }
    assert_eq!(files(&dir), 0, "the server received something");
}

#[test]
fn an_export_with_no_endpoint_explains_to_file_and_sync_endpoint() {
    let ctx = Ctx::fixture();
    let _ = std::fs::remove_file(ctx.home.join("config.json"));
    let out = ctx.run(&["session", "export", S1]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    for word in ["--to", "--file", "syncEndpoint", "nothing was sent"] {
        assert!(err.contains(word), "lacks {word}: {err}");
    }
    assert!(out.stdout.is_empty());
    // A dry run sends nothing, so it needs no server: it shows what would go, and says how
    // to name one.
    let dry = ctx.ok(&["session", "export", S1, "--dry-run"]);
    assert!(
        dry.contains("would export") && dry.contains("none is configured yet"),
        "{dry}"
    );
    let v: serde_json::Value =
        serde_json::from_str(&ctx.ok(&["session", "export", S1, "--dry-run", "--json"])).unwrap();
    assert_eq!(v["destination"], "none configured", "{v}");
    // Every combination that makes sense is taken: a file bundle is plain JSON anyway.
    let file = ctx.tmp.path().join("plain.json");
    let f = file.to_str().unwrap();
    ctx.ok(&["session", "export", S1, "--file", f, "--plain"]);
    let bundle: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(bundle["meta"]["id"], S1);
    let dry = ctx.ok(&["session", "export", S1, "--file", f, "--plain", "--dry-run"]);
    assert!(dry.contains("to a file"), "{dry}");
    assert!(
        !ctx.home.join("shares.jsonl").exists()
            || std::fs::read_to_string(ctx.home.join("shares.jsonl"))
                .unwrap()
                .lines()
                .all(|l| !l.contains(S1)),
        "no share was recorded"
    );
    // --to alone is enough.
    let (server, _) = ctx.server(None);
    let out = ctx.ok(&["session", "export", S1, "--to", &server.url]);
    assert!(out.trim().starts_with(&server.url), "{out}");
}

#[test]
fn file_bundles_and_the_originals_formats_import_and_bad_files_do_not() {
    let ctx = Ctx::fixture();
    // Local variant: remote/<id>.json, 0600.
    let path = ctx
        .ok(&["session", "export", S1, "--file"])
        .trim()
        .to_owned();
    assert_eq!(
        PathBuf::from(&path),
        ctx.home.join("remote").join(format!("{S1}.json"))
    );
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let other = ctx.other_home("receiver");
    let id = ctx
        .ok_in(&other, &["session", "import", &path])
        .trim()
        .to_owned();
    assert_eq!(messages(&other, &id).len(), messages(&ctx.home, S1).len());

    // The original's local export (flat messages, `metadata`) — SPEC §15, §19.19.
    let legacy = fixtures().join("home/.freecode/remote/2b0084fa-74c0-4e03-a6d9-7e1128df064c.json");
    let out = ctx.ok_in(
        &other,
        &["session", "import", legacy.to_str().unwrap(), "--json"],
    );
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["shape"], "legacy-flat");
    let msgs = messages(&other, v["sessionId"].as_str().unwrap());
    assert_eq!(
        msgs[0]["parts"][0]["content"],
        "Refactor the auth middleware to use async/await"
    );
    // Memories are not imported unless asked.
    assert_eq!(v["memoriesSkipped"][0], "prefers-css-vars");
    // Memories go to the project named at import (its last segment is the slug), never to
    // the bundle's.
    let my_app = ctx.tmp.path().join("work").join("receiver-app");
    std::fs::create_dir_all(&my_app).unwrap();
    let out = ctx.ok_in(
        &other,
        &[
            "session",
            "import",
            legacy.to_str().unwrap(),
            "--with-memories",
            "--project",
            my_app.to_str().unwrap(),
            "--json",
        ],
    );
    let v: Value = serde_json::from_str(&out).unwrap();
    let written = v["memoriesWritten"][0].as_str().unwrap();
    assert!(
        written.ends_with("projects/receiver-app/memory/feedback/prefers-css-vars.md"),
        "{written}"
    );
    assert!(
        !other.join("projects/my-app").exists(),
        "the bundle's project got nothing"
    );
    // …and never overwrite: a second import skips the existing entry.
    let out = ctx.ok_in(
        &other,
        &[
            "session",
            "import",
            legacy.to_str().unwrap(),
            "--with-memories",
            "--project",
            my_app.to_str().unwrap(),
            "--json",
        ],
    );
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["memoriesSkipped"][0], "prefers-css-vars");

    // The seed's `{meta, messages}` body, as the original's export POSTed it.
    let req: Value = serde_json::from_slice(
        &std::fs::read(
            fixtures().join("expected/remote/sessionManager-export/S1_full.request.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let seed = ctx.tmp.path().join("seed.json");
    std::fs::write(&seed, serde_json::to_vec(&req["body"]).unwrap()).unwrap();
    let out = ctx.ok_in(
        &other,
        &["session", "import", seed.to_str().unwrap(), "--json"],
    );
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap()["shape"],
        "meta+messages"
    );

    let count = sessions_in(&other).len();
    let bad = |name: &str, bytes: Vec<u8>, expect: &str| {
        let p = ctx.tmp.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        let out = ctx.run_in(&other, &["session", "import", p.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(1), "{name}: {}", stderr(&out));
        assert!(stderr(&out).contains(expect), "{name}: {}", stderr(&out));
    };
    let good = std::fs::read(&path).unwrap();
    bad(
        "truncated.json",
        good[..good.len() / 2].to_vec(),
        "invalid JSON",
    );
    let mut v: Value = serde_json::from_slice(&good).unwrap();
    v["version"] = 99.into();
    bad("v99.json", serde_json::to_vec(&v).unwrap(), "version 99");
    let mut v: Value = serde_json::from_slice(&good).unwrap();
    v["messages"].as_array_mut().unwrap().pop();
    bad(
        "short.json",
        serde_json::to_vec(&v).unwrap(),
        "counts disagree",
    );
    bad(
        "bomb.json",
        "[".repeat(100_000).into_bytes(),
        "invalid JSON",
    );
    // A wide bomb: 9M tiny values in 18 MB would take gigabytes as a tree; refused by count.
    let mut wide =
        br#"{"meta":{"title":"t","projectPath":"/p","provider":"x"},"messages":["#.to_vec();
    wide.extend(std::iter::repeat_n(b"0,".as_slice(), 9_000_000).flatten());
    wide.extend_from_slice(b"0]}");
    bad("wide.json", wide, "JSON values");
    let mut v: Value = serde_json::from_slice(&good).unwrap();
    v["messages"][0]["role"] = "system".into();
    bad(
        "role.json",
        serde_json::to_vec(&v).unwrap(),
        "invalid message 0",
    );
    assert_eq!(
        sessions_in(&other).len(),
        count,
        "nothing written by a bad import"
    );
}

#[test]
fn oversized_downloads_are_refused() {
    let ctx = Ctx::fixture();
    let (server, _) = ctx.server(None);
    let url = ctx
        .ok(&["session", "export", S1, "--to", &server.url])
        .trim()
        .to_owned();
    let client = freecode_sync::client::Client::new(None).max_download(100);
    let err = client.fetch(&url).unwrap_err();
    assert!(err.to_string().contains("larger than 100 bytes"), "{err}");
}

#[test]
fn plain_exports_send_the_seeds_body_and_import_back() {
    let ctx = Ctx::fixture();
    let (server, blobs) = ctx.server(None);
    let url = ctx
        .ok(&["session", "export", S1, "--to", &server.url, "--plain"])
        .trim()
        .to_owned();
    assert!(!url.contains('#'), "a plain share has no key");
    // What the server stored is the seed's {meta, messages} body…
    let code = url.rsplit('/').next().unwrap();
    let blob = all_files(&blobs)
        .into_iter()
        .find(|p| p.file_name().unwrap().to_string_lossy() == code)
        .unwrap();
    let body: Value = serde_json::from_slice(&std::fs::read(blob).unwrap()).unwrap();
    // …with `metadata`, the copy the original's `import(url)` reads (issue 12).
    assert_eq!(
        body.as_object().unwrap().keys().collect::<Vec<_>>(),
        ["meta", "metadata", "messages"]
    );
    assert_eq!(body["meta"]["id"], S1);
    assert_eq!(body["metadata"], body["meta"]);
    let other = ctx.other_home("receiver");
    let out = ctx.ok_in(&other, &["session", "import", &url, "--json"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["shape"], "meta+messages");
    assert_eq!(
        messages(&other, v["sessionId"].as_str().unwrap()).len(),
        messages(&ctx.home, S1).len()
    );
}

#[test]
fn sync_serve_runs_the_server_and_stops_gracefully_on_sigterm() {
    let ctx = Ctx::fixture();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let server_home = ctx.other_home("server-home");
    let mut child = common::freecode(&server_home)
        .args(["sync", "serve", "--listen", &format!("127.0.0.1:{port}")])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let base = format!("http://127.0.0.1:{port}");
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(r) = agent.get(&format!("{base}/healthz")).call()
            && r.status() == 200
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "server did not come up"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let url = ctx
        .ok(&["session", "export", S1, "--to", &base])
        .trim()
        .to_owned();
    let other = ctx.other_home("receiver");
    ctx.ok_in(&other, &["session", "import", &url]);
    // The embedded default store: a directory in the server's home, private.
    use std::os::unix::fs::PermissionsExt;
    let store = server_home.join("share-server");
    assert!(!all_files(&store).is_empty());
    for f in all_files(&store) {
        assert_eq!(
            std::fs::metadata(&f).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    let mut log = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut log).unwrap();
    assert!(log.contains("share server listening"), "{log}");
    assert!(
        log.contains("status=201") || log.contains("201"),
        "request log: {log}"
    );
    assert!(
        !log.contains(url.split('#').nth(1).unwrap()),
        "the key never reaches the server"
    );
}

#[test]
fn the_rollout_log_travels_on_request_renumbered_for_the_new_session() {
    let ctx = Ctx::fixture();
    let (server, _) = ctx.server(None);
    let events_of = |home: &Path, id: &str| -> Vec<Value> {
        std::fs::read_to_string(home.join("rollout/sessions").join(id).join("events.jsonl"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    };
    let original = events_of(&ctx.home, S1);
    assert!(!original.is_empty(), "S1 has a rollout log in the fixtures");
    let url = ctx
        .ok(&[
            "session",
            "export",
            S1,
            "--to",
            &server.url,
            "--include-rollout",
        ])
        .trim()
        .to_owned();
    let other = ctx.other_home("receiver");
    let out = ctx.ok_in(&other, &["session", "import", &url, "--json"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    let id = v["sessionId"].as_str().unwrap();
    assert_eq!(v["events"], original.len());
    let imported = events_of(&other, id);
    assert_eq!(imported.len(), original.len());
    for (i, (a, b)) in original.iter().zip(&imported).enumerate() {
        assert_eq!(b["seq"], i as u64 + 1);
        assert_eq!(b["aggregateID"], id);
        assert_eq!(a["type"], b["type"]);
    }
    // The imported log folds: the trace of the new session works.
    let t: Value = serde_json::from_str(&ctx.ok_in(&other, &["trace", id, "--json"])).unwrap();
    assert!(t.is_object());
    // Without --include-rollout nothing of the log leaves.
    let url = ctx
        .ok(&["session", "export", S1, "--to", &server.url])
        .trim()
        .to_owned();
    let out = ctx.ok_in(&other, &["session", "import", &url, "--json"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["events"], 0);
}

/// A `freecode sync serve` child on a free loopback port, killed if a test fails before it
/// stops it.
struct ServeChild {
    child: std::process::Child,
    addr: std::net::SocketAddr,
}

impl ServeChild {
    fn start(home: &Path, extra: &[&str]) -> Self {
        let addr = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let child = common::freecode(home)
            .args(["sync", "serve", "--listen", &addr.to_string()])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let server = Self { child, addr };
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while !agent
            .get(format!("http://{addr}/healthz"))
            .call()
            .is_ok_and(|r| r.status() == 200)
        {
            assert!(
                std::time::Instant::now() < deadline,
                "server did not come up"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        server
    }

    /// SIGTERM, then its log.
    fn stop(mut self) -> String {
        Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        let status = self.child.wait().unwrap();
        assert!(status.success(), "{status:?}");
        let mut log = String::new();
        std::io::Read::read_to_string(self.child.stderr.as_mut().unwrap(), &mut log).unwrap();
        log
    }
}

impl Drop for ServeChild {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Reads until the peer closes (true) or `bound` passes without a byte (false).
fn closed_within(stream: &mut std::net::TcpStream, bound: Duration) -> (String, bool) {
    use std::io::Read as _;
    stream.set_read_timeout(Some(bound)).unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    let closed = loop {
        match stream.read(&mut buf) {
            Ok(0) => break true,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                break false;
            }
            Err(_) => break true,
        }
    };
    (String::from_utf8_lossy(&out).into_owned(), closed)
}

#[test]
fn sync_serve_flags_set_the_connection_timeouts_and_caps() {
    use std::io::Write as _;
    use std::net::TcpStream;
    use std::time::Instant;

    let ctx = Ctx::fixture();
    let home = ctx.other_home("server-home");
    let server = ServeChild::start(
        &home,
        &[
            "--header-timeout",
            "1s",
            "--idle-timeout",
            "2",
            "--body-timeout",
            "1000ms",
        ],
    );
    // Header timeout: a silent socket is closed after about a second (the default is 10 s).
    let started = Instant::now();
    let mut silent = TcpStream::connect(server.addr).unwrap();
    let (bytes, closed) = closed_within(&mut silent, Duration::from_secs(8));
    let took = started.elapsed();
    assert!(closed && bytes.is_empty(), "{took:?} {bytes:?}");
    assert!(took >= Duration::from_millis(900), "{took:?}");

    // Idle timeout: a keep-alive connection is closed two seconds after its response.
    let mut kept = TcpStream::connect(server.addr).unwrap();
    kept.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .unwrap();
    let started = Instant::now();
    let (reply, closed) = closed_within(&mut kept, Duration::from_secs(8));
    let took = started.elapsed();
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply:?}");
    assert!(closed, "{took:?}");
    assert!(took >= Duration::from_millis(1800), "{took:?}");

    // Body timeout: a body still coming after a second gets 408 (the default is 30 s).
    let mut slow = TcpStream::connect(server.addr).unwrap();
    slow.write_all(b"POST /upload HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\npart")
        .unwrap();
    let (reply, closed) = closed_within(&mut slow, Duration::from_secs(8));
    assert!(reply.starts_with("HTTP/1.1 408"), "{reply:?}");
    assert!(reply.contains("request body timed out"), "{reply:?}");
    assert!(closed);
    let log = server.stop();
    assert!(log.contains("header_timeout_s=1"), "{log}");
    assert!(log.contains("request head not received in time"), "{log}");

    // Per-address cap: with one connection allowed, a second evicts the idle first.
    let server = ServeChild::start(&home, &["--max-connections-per-ip", "1"]);
    let mut first = TcpStream::connect(server.addr).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let mut second = TcpStream::connect(server.addr).unwrap();
    let (bytes, closed) = closed_within(&mut first, Duration::from_secs(8));
    assert!(closed && bytes.is_empty(), "{bytes:?}");
    second
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .unwrap();
    let (reply, _) = closed_within(&mut second, Duration::from_secs(8));
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply:?}");
    let log = server.stop();
    assert!(log.contains("max_connections_per_ip=1"), "{log}");

    // Unusable values are refused before anything starts.
    for (flag, value) in [
        ("--idle-timeout", "0"),
        ("--header-timeout", "10d"),
        ("--max-connections", "0"),
    ] {
        let out = common::freecode(&home)
            .args(["sync", "serve", "--listen", "127.0.0.1:0", flag, value])
            .output()
            .unwrap();
        assert!(!out.status.success(), "{flag} {value}");
        assert!(stderr(&out).contains(flag), "{flag}: {}", stderr(&out));
    }
}

/// A bundle file as an attacker would craft it: `project_path` and `lastTurnAt` as given.
fn planted_bundle(dir: &Path, project_path: &str, last_turn_at: i64) -> PathBuf {
    let bundle = serde_json::json!({
        "format": "freecode.session-bundle",
        "version": 1,
        "exportedAt": last_turn_at,
        "meta": {
            "id": "attacker-1", "title": "Planted", "projectPath": project_path,
            "provider": "scripted", "status": "active", "createdAt": last_turn_at,
            "updatedAt": last_turn_at, "lastTurnAt": last_turn_at, "turnCount": 7
        },
        "messages": [
            {"id": "m1", "role": "user", "parts": [{"type": "text", "content": "planted prompt"}],
             "timestamp": last_turn_at},
            {"id": "m2", "role": "assistant", "parts": [{"type": "text", "content": "planted answer"}],
             "timestamp": last_turn_at}
        ],
        "counts": {"messages": 2, "events": 0, "memories": 0}
    });
    let path = dir.join("planted.json");
    std::fs::write(&path, serde_json::to_vec(&bundle).unwrap()).unwrap();
    path
}

fn freecode_in(home: &Path, cwd: &Path, args: &[&str]) -> Output {
    common::freecode(home)
        .current_dir(cwd)
        .env("FREECODE_SCRIPTED_DELAY_MS", "0")
        .args(args)
        .output()
        .unwrap()
}

fn ok_json(out: Output) -> Value {
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

const YEAR_2100_MS: i64 = 4_102_444_800_000;

#[test]
fn an_import_with_the_victims_path_and_a_future_time_cannot_take_over_continue() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("h");
    let project = tmp.path().join("victim-project").canonicalize_new();
    let p = project.to_str().unwrap();

    // The victim's own session in P.
    let victim = ok_json(freecode_in(&home, &project, &["run", "--json", "my work"]));
    let victim = victim["sessionId"].as_str().unwrap().to_owned();

    // The attacker's bundle names P and claims its last turn was in 2100; imported in P.
    let bundle = planted_bundle(tmp.path(), p, YEAR_2100_MS);
    let before = freecode_core_now();
    let imported = ok_json(freecode_in(
        &home,
        &project,
        &["session", "import", bundle.to_str().unwrap(), "--json"],
    ));
    let after = freecode_core_now();
    let planted = imported["sessionId"].as_str().unwrap().to_owned();
    assert_eq!(imported["projectPath"], p);
    let meta = sessions_in(&home)
        .into_iter()
        .find(|m| m["id"] == planted.as_str())
        .unwrap();
    for key in ["lastTurnAt", "createdAt", "updatedAt"] {
        let t = meta[key].as_i64().unwrap();
        assert!(
            (before..=after).contains(&t),
            "{key} {t} clamped to the import time"
        );
    }
    assert_eq!(meta["importedFrom"]["projectPath"], p);
    assert!(meta["importedFrom"]["exportedAt"].as_i64().unwrap() <= after);

    // --continue in P resumes the victim's session, not the planted one.
    let next = ok_json(freecode_in(
        &home,
        &project,
        &["run", "--json", "--continue", "more work"],
    ));
    assert_eq!(next["sessionId"], victim.as_str());
    assert_eq!(
        messages(&home, &planted).len(),
        2,
        "the import was not resumed"
    );

    // Resumed by id, the import becomes the user's; then it competes like any other session.
    let by_id = ok_json(freecode_in(
        &home,
        &project,
        &["run", "--json", "--session", &planted, "now mine"],
    ));
    assert_eq!(by_id["sessionId"], planted.as_str());
    let next = ok_json(freecode_in(
        &home,
        &project,
        &["run", "--json", "--continue", "again"],
    ));
    assert_eq!(next["sessionId"], planted.as_str());
}

#[test]
fn the_tools_work_in_the_project_named_at_import_never_in_the_bundles_path() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("h");
    // The path the bundle names exists here too, with a file the tools must not see.
    let theirs = tmp.path().join("named-in-bundle").canonicalize_new();
    std::fs::write(theirs.join("private-notes.txt"), "do not read\n").unwrap();
    let mine = tmp.path().join("mine").canonicalize_new();
    std::fs::write(mine.join("mine.txt"), "my file\n").unwrap();
    let bundle = planted_bundle(tmp.path(), theirs.to_str().unwrap(), 1_700_000_000_000);

    let imported = ok_json(freecode_in(
        &home,
        tmp.path(),
        &[
            "session",
            "import",
            bundle.to_str().unwrap(),
            "--project",
            mine.to_str().unwrap(),
            "--json",
        ],
    ));
    let id = imported["sessionId"].as_str().unwrap().to_owned();
    assert_eq!(imported["projectPath"], mine.to_str().unwrap());
    let meta = sessions_in(&home).remove(0);
    assert_eq!(meta["projectPath"], mine.to_str().unwrap());
    assert_eq!(
        meta["importedFrom"]["projectPath"],
        theirs.to_str().unwrap()
    );
    // Past times are kept as the sender wrote them.
    assert_eq!(meta["lastTurnAt"], 1_700_000_000_000_i64);

    let out = ok_json(freecode_in(
        &home,
        tmp.path(),
        &["run", "--json", "--session", &id, "look around"],
    ));
    assert_eq!(out["sessionId"], id.as_str());
    let log = serde_json::to_string(&messages(&home, &id)).unwrap();
    assert!(log.contains("mine.txt"), "{log}");
    assert!(!log.contains("private-notes"), "{log}");

    // A directory that does not exist is refused before anything is written.
    let out = freecode_in(
        &home,
        tmp.path(),
        &[
            "session",
            "import",
            bundle.to_str().unwrap(),
            "--project",
            "/nonexistent/x",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("/nonexistent/x"), "{}", stderr(&out));
    assert_eq!(sessions_in(&home).len(), 1);
}

#[test]
fn an_older_versions_import_never_lends_its_bundle_path_to_the_tools() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("h");
    let project = tmp.path().join("p").canonicalize_new();
    let bundle = planted_bundle(tmp.path(), project.to_str().unwrap(), 1_700_000_000_000);
    let imported = ok_json(freecode_in(
        &home,
        &project,
        &["session", "import", bundle.to_str().unwrap(), "--json"],
    ));
    let id = imported["sessionId"].as_str().unwrap().to_owned();
    // What an older version wrote: `importedFrom` without the sender's projectPath (the
    // meta's projectPath was the bundle's).
    let meta_path = all_files(&home.join("sessions"))
        .into_iter()
        .find(|p| p.ends_with(format!("{id}/meta.json")))
        .unwrap();
    let mut meta: Value = serde_json::from_slice(&std::fs::read(&meta_path).unwrap()).unwrap();
    meta["importedFrom"]
        .as_object_mut()
        .unwrap()
        .remove("projectPath");
    meta["lastTurnAt"] = Value::from(YEAR_2100_MS);
    std::fs::write(&meta_path, serde_json::to_vec_pretty(&meta).unwrap()).unwrap();
    let log_before = messages(&home, &id);

    let out = freecode_in(&home, &project, &["run", "--session", &id, "go"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("imported by an older freecode"),
        "{}",
        stderr(&out)
    );
    assert_eq!(messages(&home, &id), log_before, "no turn ran");
    // --continue passes it over and starts a session of its own.
    let next = ok_json(freecode_in(
        &home,
        &project,
        &["run", "--json", "--continue", "go"],
    ));
    assert_ne!(next["sessionId"], id.as_str());
}

/// Milliseconds since the epoch, as the binary's clock reads them.
fn freecode_core_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

trait CanonicalNew {
    /// Creates the directory and returns its canonical path.
    fn canonicalize_new(self) -> PathBuf;
}

impl CanonicalNew for PathBuf {
    fn canonicalize_new(self) -> PathBuf {
        std::fs::create_dir_all(&self).unwrap();
        self.canonicalize().unwrap()
    }
}

/// The zstd frame magic: what a compressed bundle starts with.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xB5, 0x2F, 0xFD];

/// `freecode` in `home` with the bundle limit lowered to `limit` bytes.
fn limited(home: &Path, limit: u64, args: &[&str]) -> Output {
    common::freecode(home)
        .env("FREECODE_MAX_BUNDLE_BYTES", limit.to_string())
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn export_and_import_refuse_a_bundle_over_the_one_limit_alike_and_name_it() {
    let ctx = Ctx::fixture();
    let plain = ctx.tmp.path().join("s1.json");
    ctx.ok(&["session", "export", S1, "--file", plain.to_str().unwrap()]);
    // The file is the compact JSON import parses, plus a newline.
    let size = std::fs::metadata(&plain).unwrap().len() - 1;
    let zst = ctx.tmp.path().join("s1.json.zst");
    ctx.ok(&["session", "export", S1, "--file", zst.to_str().unwrap()]);

    // Export, below the bundle's size: refused, naming the size, the limit and the ways past,
    // and nothing is written.
    let limit = size - 1;
    let out_file = ctx.tmp.path().join("refused.json");
    let out = limited(
        &ctx.home,
        limit,
        &[
            "session",
            "export",
            S1,
            "--file",
            out_file.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    for needle in [
        format!("{size} bytes of JSON"),
        format!("more than the {limit}-byte limit"),
        "nothing was written or sent".to_owned(),
        "freecode session compact".to_owned(),
    ] {
        assert!(err.contains(&needle), "{needle:?} in {err}");
    }
    assert!(!err.contains("--include-rollout"), "{err}");
    assert!(!out_file.exists());
    // With the rollout log in, leaving it out is one of the ways.
    let remote_before = all_files(&ctx.home.join("remote"));
    let out = limited(
        &ctx.home,
        limit,
        &["session", "export", S1, "--file", "--include-rollout"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("leave out --include-rollout"),
        "{}",
        stderr(&out)
    );
    assert_eq!(all_files(&ctx.home.join("remote")), remote_before);
    // The same limit on a share: nothing reaches the server.
    let (server, blobs) = ctx.server(None);
    let out = limited(
        &ctx.home,
        limit,
        &["session", "export", S1, "--to", &server.url],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("{limit}-byte limit")),
        "{}",
        stderr(&out)
    );
    assert!(all_files(&blobs.join("blobs")).is_empty());

    // Import applies the same limit, to plain JSON and to what a .zst file decompresses to.
    let other = ctx.other_home("receiver");
    let out = limited(
        &other,
        limit,
        &["session", "import", plain.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("more than the {limit}-byte bundle limit")),
        "{}",
        stderr(&out)
    );
    let out = limited(&other, limit, &["session", "import", zst.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("decompresses to more than the {limit}-byte")),
        "{}",
        stderr(&out)
    );
    assert!(sessions_in(&other).is_empty(), "nothing written");
    // At exactly the bundle's size both sides agree: it exports, and it imports.
    let at = ctx.tmp.path().join("at-limit.json");
    let out = limited(
        &ctx.home,
        size,
        &["session", "export", S1, "--file", at.to_str().unwrap()],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    for f in [&at, &zst] {
        let out = limited(&other, size, &["session", "import", f.to_str().unwrap()]);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    assert_eq!(sessions_in(&other).len(), 2);
    // The variable only lowers the limit: a huge value is the built-in 128 MiB.
    let out = limited(
        &other,
        u64::MAX,
        &["session", "import", plain.to_str().unwrap()],
    );
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn compressed_files_and_v2_envelopes_are_smaller_and_plain_and_v1_ones_still_import() {
    let ctx = Ctx::fixture();
    let plain = ctx.tmp.path().join("s1.json");
    ctx.ok(&[
        "session",
        "export",
        S1,
        "--file",
        plain.to_str().unwrap(),
        "--include-rollout",
    ]);
    let zst = ctx.tmp.path().join("s1.json.zst");
    ctx.ok(&[
        "session",
        "export",
        S1,
        "--file",
        zst.to_str().unwrap(),
        "--include-rollout",
    ]);
    let plain_bytes = std::fs::read(&plain).unwrap();
    let zst_bytes = std::fs::read(&zst).unwrap();
    assert_eq!(plain_bytes[0], b'{', "a .json file is JSON");
    assert!(
        zst_bytes.starts_with(&ZSTD_MAGIC),
        "a .zst file is one zstd frame"
    );
    assert!(
        zst_bytes.len() * 3 < plain_bytes.len(),
        "{} -> {}",
        plain_bytes.len(),
        zst_bytes.len()
    );
    // Import recognises compression by the magic number, not by the name.
    let renamed = ctx.tmp.path().join("bundle.json");
    std::fs::copy(&zst, &renamed).unwrap();
    let other = ctx.other_home("receiver");
    for f in [&plain, &zst, &renamed] {
        let v: Value = serde_json::from_str(&ctx.ok_in(
            &other,
            &["session", "import", f.to_str().unwrap(), "--json"],
        ))
        .unwrap();
        assert_eq!(v["shape"], "bundle");
        assert_eq!(
            messages(&other, v["sessionId"].as_str().unwrap()).len(),
            messages(&ctx.home, S1).len()
        );
        assert!(v["events"].as_u64().unwrap() > 0);
    }
    // A damaged .zst is a clear error that writes nothing.
    let broken = ctx.tmp.path().join("broken.zst");
    std::fs::write(&broken, &zst_bytes[..zst_bytes.len() / 2]).unwrap();
    let before = sessions_in(&other).len();
    let out = ctx.run_in(&other, &["session", "import", broken.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("cannot decompress"),
        "{}",
        stderr(&out)
    );
    assert_eq!(sessions_in(&other).len(), before);

    // A share is an envelope of version 2 around compressed JSON: smaller than the JSON.
    let (server, blobs) = ctx.server(None);
    let url = ctx
        .ok(&[
            "session",
            "export",
            S1,
            "--to",
            &server.url,
            "--include-rollout",
        ])
        .trim()
        .to_owned();
    let code = url.split('#').next().unwrap().rsplit('/').next().unwrap();
    let blob = blobs.join("blobs").join(code);
    let sealed = std::fs::read(&blob).unwrap();
    assert_eq!(&sealed[..5], b"FCSB\x02");
    assert!(sealed.len() * 3 < plain_bytes.len(), "{}", sealed.len());
    let id = ctx
        .ok_in(&other, &["session", "import", &url])
        .trim()
        .to_owned();
    assert_eq!(messages(&other, &id).len(), messages(&ctx.home, S1).len());

    // A version-1 envelope (uncompressed JSON, what earlier builds uploaded) still imports.
    let key =
        freecode_sync::crypto::ShareKey::from_fragment(url.split('#').nth(1).unwrap()).unwrap();
    let v1 = freecode_sync::crypto::seal_version(
        &key,
        &plain_bytes,
        freecode_sync::crypto::VERSION_UNCOMPRESSED,
    )
    .unwrap();
    std::fs::write(&blob, &v1).unwrap();
    let id = ctx
        .ok_in(&other, &["session", "import", &url])
        .trim()
        .to_owned();
    assert_eq!(messages(&other, &id).len(), messages(&ctx.home, S1).len());
    // A v2 envelope whose plaintext is not zstd is refused, not parsed.
    let not_zstd = freecode_sync::crypto::seal(&key, &plain_bytes).unwrap();
    std::fs::write(&blob, &not_zstd).unwrap();
    let before = sessions_in(&other).len();
    let out = ctx.run_in(&other, &["session", "import", &url]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("cannot decompress"),
        "{}",
        stderr(&out)
    );
    assert_eq!(sessions_in(&other).len(), before);
}

/// A share server that says nothing about its limits (404 on `/limits`, like an older one)
/// and answers every upload 413, counting the uploads it refused.
fn server_without_limits() -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let refused = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = std::sync::Arc::clone(&refused);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut head = String::new();
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                head.push_str(&line);
            }
            let answer = if head.starts_with("POST /upload") {
                count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let body = r#"{"error":"body larger than 100 bytes"}"#;
                format!(
                    "HTTP/1.1 413 Payload Too Large\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                )
            } else {
                "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                    .to_owned()
            };
            let _ = stream.write_all(answer.as_bytes());
        }
    });
    (url, refused)
}

#[test]
fn export_learns_the_servers_limit_first_and_names_the_ways_past_it() {
    let ctx = Ctx::fixture();
    let dir = ctx.tmp.path().join("server-blobs");
    let server = spawn(ServerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        store: StoreSpec::File(dir.clone()),
        max_body: 300,
        ..ServerConfig::default()
    })
    .unwrap();
    // The server tells its limit.
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let mut resp = agent.get(&format!("{}/limits", server.url)).call().unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let limits: Value = serde_json::from_slice(&resp.body_mut().read_to_vec().unwrap()).unwrap();
    assert_eq!(limits, serde_json::json!({"maxBodyBytes": 300}));

    // The client refuses, before sending, a share larger than that, and says how to get past.
    let out = ctx.run(&[
        "session",
        "export",
        S1,
        "--to",
        &server.url,
        "--include-rollout",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    for needle in [
        "more than the 300 bytes",
        "maxBodyBytes",
        "nothing was sent",
        "--file",
        "session import",
        "leave out --include-rollout",
        "freecode sync serve --max-body",
    ] {
        assert!(err.contains(needle), "{needle:?} in {err}");
    }
    assert!(all_files(&dir.join("blobs")).is_empty(), "nothing uploaded");
    assert!(ctx.ok(&["share", "list", "--json"]).trim() == "[]");

    // An unreachable server costs no export: the limit is asked for first.
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let out = ctx.run(&["session", "export", S1, "--to", &dead]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("cannot reach {dead}/limits")),
        "{}",
        stderr(&out)
    );

    // A server that does not tell (404 on /limits) and answers 413: the same advice.
    let (old, refused) = server_without_limits();
    let out = ctx.run(&["session", "export", S1, "--to", &old]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("refused it as too large (413)"), "{err}");
    assert!(
        err.contains("--file") && err.contains("--max-body"),
        "{err}"
    );
    assert_eq!(refused.load(std::sync::atomic::Ordering::SeqCst), 1);
    drop(server);
}

/// Writes a session of `n` messages (text and tool calls, about 450 bytes each, varied enough
/// to compress like a transcript rather than like repeated bytes) into `home`; returns its id.
fn big_session(home: &Path, n: usize) -> String {
    use std::io::Write as _;
    let id = "0b16b16b-0000-4000-8000-000000200000";
    let dir = home.join("sessions/home__dev__big").join(id);
    std::fs::create_dir_all(&dir).unwrap();
    let words: Vec<&str> = "the settings component theme provider toggle dark light mode context \
        hook state render props test fixture async await request response handler error retry \
        timeout config file path module import export function return value string number array \
        object key map filter reduce promise resolve reject build lint format commit branch"
        .split_whitespace()
        .collect();
    let mut seed: u64 = 11;
    let mut next = move |m: usize| {
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        (seed >> 33) as usize % m
    };
    let mut out =
        std::io::BufWriter::new(std::fs::File::create(dir.join("messages.jsonl")).unwrap());
    for i in 0..n {
        let t = 1_768_000_000_000_i64 + i as i64 * 1000;
        let text: Vec<&str> = (0..16 + next(64))
            .map(|_| words[next(words.len())])
            .collect();
        let m = if i % 4 < 2 {
            serde_json::json!({"id": format!("m{i}"), "role": if i % 4 == 0 {"user"} else {"assistant"},
                "parts": [{"type": "text", "content": text.join(" ")}], "timestamp": t})
        } else {
            let code: Vec<String> = (0..3 + next(10))
                .map(|k| {
                    format!(
                        "const {}_{k} = {}({});",
                        words[next(words.len())],
                        words[next(words.len())],
                        next(1000)
                    )
                })
                .collect();
            serde_json::json!({"id": format!("m{i}"), "role": "assistant",
                "parts": [{"type": "tool", "tool": {"name": "read_file", "args": {"path": format!("src/{}.ts", text[0])}},
                           "result": code.join("\n")}], "timestamp": t})
        };
        serde_json::to_writer(&mut out, &m).unwrap();
        out.write_all(b"\n").unwrap();
    }
    out.flush().unwrap();
    let meta = serde_json::json!({"id": id, "title": "big", "projectPath": "/home/dev/big",
        "provider": "openai", "model": "gpt-4o", "status": "active", "createdAt": 1_768_000_000_000_i64,
        "updatedAt": 1_768_000_000_000_i64, "lastTurnAt": 1_768_000_000_000_i64, "turnCount": n / 4});
    std::fs::write(
        dir.join("meta.json"),
        serde_json::to_vec_pretty(&meta).unwrap(),
    )
    .unwrap();
    id.to_owned()
}

/// `common::freecode`, but with the binary `FREECODE_TEST_BIN` names when set (a copy kept
/// aside, for a run that lasts while other builds replace the target's binary).
fn freecode_bin(home: &Path) -> Command {
    let mut c = common::freecode(home);
    if let Some(bin) = std::env::var_os("FREECODE_TEST_BIN") {
        let mut other = Command::new(bin);
        for (k, v) in c.get_envs() {
            match v {
                Some(v) => other.env(k, v),
                None => other.env_remove(k),
            };
        }
        other.stdin(Stdio::null());
        c = other;
    }
    c
}

/// The real size (issue 11: a 94 MB bundle that export wrote and import refused): a
/// 200,000-message session, past the old 64 MiB import bound, exports and imports under the
/// default limit, plain and compressed. Slow in a debug build: run with `--ignored`.
#[test]
#[ignore = "real size: 200,000 messages, about a minute in a debug build"]
fn a_200000_message_session_exports_and_imports_at_its_real_size() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let id = big_session(&home, 200_000);
    let plain = tmp.path().join("big.json");
    let zst = tmp.path().join("big.json.zst");
    for f in [&plain, &zst] {
        let out = freecode_bin(&home)
            .args(["session", "export", &id, "--file", f.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let (p, z) = (
        std::fs::metadata(&plain).unwrap().len(),
        std::fs::metadata(&zst).unwrap().len(),
    );
    assert!(p > 64 << 20, "past the old import bound: {p}");
    assert!(z * 3 < p, "{p} -> {z}");
    let other = tmp.path().join("receiver");
    for f in [&plain, &zst] {
        let out = freecode_bin(&other)
            .args(["session", "import", f.to_str().unwrap(), "--json"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["messages"], 200_000);
    }
}

/// `--to` a server whose limit the session's files already pass: refused at once, from the
/// files (read in blocks, compressed as the bundle would be), before any bundle is built — the
/// error names the limit and `--file`; nothing reaches the server.
#[test]
fn a_session_past_the_servers_limit_is_refused_before_its_bundle_is_built() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let id = big_session(&home, 20_000);
    let dir = tmp.path().join("server-blobs");
    let server = spawn(ServerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        store: StoreSpec::File(dir.clone()),
        max_body: 256 << 10,
        ..ServerConfig::default()
    })
    .unwrap();
    let out = common::freecode(&home)
        .args(["session", "export", &id, "--to", &server.url])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    for needle in [
        "the share would be at least",
        "more than the 262144 bytes",
        "maxBodyBytes",
        "nothing was sent or even built",
        "--file",
        "session import",
    ] {
        assert!(err.contains(needle), "{needle:?} in {err}");
    }
    assert!(all_files(&dir.join("blobs")).is_empty(), "nothing uploaded");
    // Under the limit by far, the same session's export is built and sent.
    let small = spawn(ServerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        store: StoreSpec::File(tmp.path().join("roomy")),
        max_body: 64 << 20,
        ..ServerConfig::default()
    })
    .unwrap();
    let out = common::freecode(&home)
        .args(["session", "export", &id, "--to", &small.url, "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    drop((server, small));
}

/// `bytes` with the value of `exportedAt` (the one thing two exports of a session differ in)
/// replaced by 0.
fn without_exported_at(bytes: &[u8]) -> String {
    let s = String::from_utf8(bytes.to_vec()).unwrap();
    let i = s.find("\"exportedAt\":").unwrap() + 13;
    let j = i + s[i..].find(|c: char| !c.is_ascii_digit()).unwrap();
    format!("{}0{}", &s[..i], &s[j..])
}

#[test]
fn an_export_to_stdout_is_the_file_bundle_byte_for_byte_and_refused_whole_past_the_limit() {
    let ctx = Ctx::fixture();
    let file = ctx.tmp.path().join("s1.json");
    ctx.ok(&["session", "export", S1, "--file", file.to_str().unwrap()]);
    let want = std::fs::read(&file).unwrap();
    for extra in [&[][..], &["--include-rollout"][..]] {
        let mut args = vec!["session", "export", S1, "--file", "-"];
        args.extend_from_slice(extra);
        let out = ctx.run(&args);
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(out.stdout.ends_with(b"}\n"));
        if extra.is_empty() {
            assert_eq!(without_exported_at(&out.stdout), without_exported_at(&want));
        } else {
            let v: Value = serde_json::from_slice(&out.stdout).unwrap();
            assert!(v["rollout"].is_object() || v["rollout"].is_array(), "{v}");
        }
    }
    // Past the limit nothing reaches stdout: the bundle is checked whole before it is copied.
    let size = want.len() as u64 - 1;
    let out = limited(
        &ctx.home,
        size - 1,
        &["session", "export", S1, "--file", "-"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        stderr(&out).contains(&format!("more than the {}-byte limit", size - 1)),
        "{}",
        stderr(&out)
    );
    let out = limited(&ctx.home, size, &["session", "export", S1, "--file", "-"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(without_exported_at(&out.stdout), without_exported_at(&want));
}
