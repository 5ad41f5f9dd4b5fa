//! Export, import and private sharing end to end: the real `freecode` binary against a real
//! share server on loopback (filesystem blobs), and every kind of bad input.

use crate::common;

use crate::common::{Ctx, fixtures};

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use freecode_remote::blob::StoreSpec;
use freecode_remote::server::{ServerConfig, ServerHandle, spawn};
use serde_json::Value;

mod hostile_bundles;
mod limits;

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
    let client = freecode_remote::share::Client::new(None).max_download(100);
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
