//! One JSON vocabulary: the committed `docs/schemas` are the ones the types generate, every
//! command's real `--json` output validates against its schema, and no key anywhere is
//! snake_case.

use crate::common;

use crate::common::Ctx;

use std::path::{Path, PathBuf};
use std::time::Duration;

use freecode_remote::blob::StoreSpec;
use freecode_remote::server::{ServerConfig, spawn};
use serde_json::Value;

const S1: &str = "68d44408-94df-4f2f-ae2e-ffffdb68e297";
const S7: &str = "16aa3e15-f2e4-4fc5-bf70-a0962a62c733";

fn docs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs")
}

/// The reference home, commands run beside it with no scripted delay.
fn ctx() -> Ctx {
    let ctx = Ctx::fixture();
    let dir = ctx.tmp.path().to_path_buf();
    ctx.with_env("FREECODE_SCRIPTED_DELAY_MS", "0").in_dir(dir)
}

/// Validates `v` against `docs/schemas/<name>`, and checks that no key is snake_case (tool
/// arguments are the tools' own and are skipped).
pub(crate) fn check(name: &str, v: &Value) {
    let text = std::fs::read_to_string(docs().join("schemas").join(name)).unwrap();
    let schema: Value = serde_json::from_str(&text).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(v)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{name}: {errors:?}\n{v:#}");
    no_snake_case(name, v, "");
}

fn no_snake_case(name: &str, v: &Value, at: &str) {
    match v {
        Value::Object(m) => {
            for (k, child) in m {
                assert!(!k.contains('_'), "{name}: snake_case key {at}/{k}");
                if k != "args" {
                    no_snake_case(name, child, &format!("{at}/{k}"));
                }
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                no_snake_case(name, child, &format!("{at}/{i}"));
            }
        }
        _ => {}
    }
}

#[test]
fn the_committed_schemas_are_the_generated_ones() {
    let tmp = tempfile::tempdir().unwrap();
    let out = common::freecode(tmp.path())
        .args(["schema", "--out"])
        .arg(tmp.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut generated: Vec<String> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    generated.sort();
    let mut committed: Vec<String> = std::fs::read_dir(docs().join("schemas"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    committed.sort();
    assert_eq!(
        generated, committed,
        "regenerate with `cargo run -p freecode-cli -- schema --out docs/schemas`"
    );
    let index = std::fs::read_to_string(docs().join("json.md")).unwrap();
    for name in &generated {
        let want = std::fs::read_to_string(tmp.path().join(name)).unwrap();
        let have = std::fs::read_to_string(docs().join("schemas").join(name)).unwrap();
        assert_eq!(
            have, want,
            "docs/schemas/{name} is stale: regenerate with `cargo run -p freecode-cli -- schema --out docs/schemas`"
        );
        assert!(
            index.contains(&format!("schemas/{name}")),
            "docs/json.md does not list {name}"
        );
        // Each is a JSON Schema a validator accepts.
        jsonschema::validator_for(&serde_json::from_str(&want).unwrap()).unwrap();
    }
}

#[test]
fn every_session_command_prints_its_schema() {
    let ctx = ctx();
    let list = ctx.json(&["session", "list", "--all", "--json"]);
    assert!(list.as_array().unwrap().len() > 3);
    check("session-list.json", &list);
    for item in list.as_array().unwrap() {
        check("session.json", item);
    }

    let shown = ctx.json(&["session", "show", S1, "--json"]);
    check("session-detail.json", &shown);
    assert_eq!(shown["id"], S1);
    assert!(!shown["messages"].as_array().unwrap().is_empty());

    // A page: the meta, the messages [1, 3), and where the next page starts.
    let all = shown["messages"].as_array().unwrap();
    assert!(
        all.len() >= 3,
        "the fixture session has a page after its first message"
    );
    let paged = ctx.json(&[
        "session", "show", S1, "--json", "--offset", "1", "--limit", "2",
    ]);
    check("session-page.json", &paged);
    assert_eq!(paged["id"], S1);
    assert_eq!(paged["messages"].as_array().unwrap()[..], all[1..3]);
    assert_eq!(paged["page"]["offset"], 1);
    assert_eq!(paged["page"]["count"], 2);
    assert_eq!(paged["page"]["hasMore"], all.len() > 3);
    let past = ctx.json(&["session", "show", S1, "--json", "--offset", "100000"]);
    assert_eq!(past["messages"], serde_json::json!([]));
    assert_eq!(past["page"]["hasMore"], false);

    let fork = ctx.json(&["session", "fork", S1, "--json"]);
    check("session-ref.json", &fork);
    let fork_id = fork["sessionId"].as_str().unwrap().to_owned();

    // compact: the session it names, as every reference to one does.
    let summary = ctx.tmp.path().join("summary.txt");
    std::fs::write(&summary, "what came before").unwrap();
    let compacted = ctx.json(&[
        "session",
        "compact",
        &fork_id,
        "--keep",
        "1",
        "--summary-file",
        summary.to_str().unwrap(),
        "--json",
    ]);
    check("compaction.json", &compacted);
    assert_eq!(compacted["sessionId"], fork_id.as_str());
    assert_eq!(compacted["compacted"], true);

    // delete: soft, then restore, then purge — each with --json.
    let deleted = ctx.json(&["session", "delete", &fork_id, "--json"]);
    check("session-deleted.json", &deleted);
    assert_eq!(deleted["sessionId"], fork_id.as_str());
    assert_eq!(deleted["purged"], false);
    assert_eq!(deleted["status"], "deleted");
    let restored = ctx.json(&["session", "restore", &fork_id, "--json"]);
    check("session.json", &restored);
    assert_eq!(restored["id"], fork_id.as_str());
    assert_eq!(restored["status"], "active");
    let purged = ctx.json(&["session", "delete", &fork_id, "--purge", "--yes", "--json"]);
    check("session-deleted.json", &purged);
    assert_eq!(purged["purged"], true);
    assert!(purged["removedPaths"].as_u64().unwrap() >= 1);
    assert!(purged.get("status").is_none());
    let out = ctx.run(&["session", "show", &fork_id, "--json"]);
    assert_eq!(out.status.code(), Some(1), "the purged session is gone");
}

#[test]
fn trace_replay_and_run_print_their_schemas() {
    let ctx = ctx();
    let trace = ctx.json(&["trace", S7, "--json"]);
    check("trace.json", &trace);
    assert_eq!(trace["sessionId"], S7);
    assert!(trace["wallMs"].is_i64() && trace.get("wall_ms").is_none());
    assert!(trace["modelSpans"][0]["durationMs"].is_i64());
    let replay = ctx.json(&["replay", S7, "--json"]);
    check("replay.json", &replay);
    assert_eq!(replay["sessionId"], S7);
    let trace = ctx.json(&["trace", S1, "--json"]);
    check("trace.json", &trace);

    let project = ctx.tmp.path().join("proj");
    std::fs::create_dir(&project).unwrap();
    let out = common::freecode(&ctx.home)
        .args(["run", "--json", "list the files"])
        .env("FREECODE_SCRIPTED_DELAY_MS", "0")
        .env_remove("FREECODE_ROLLOUT")
        .current_dir(&project)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let turn: Value = serde_json::from_slice(&out.stdout).unwrap();
    check("turn.json", &turn);
    let id = turn["sessionId"].as_str().unwrap().to_owned();
    // The run's own trace and replay, with tool spans.
    let trace = ctx.json(&["trace", &id, "--json"]);
    check("trace.json", &trace);
    assert!(
        !trace["toolSpans"].as_array().unwrap().is_empty(),
        "{trace}"
    );
    check("replay.json", &ctx.json(&["replay", &id, "--json"]));
}

#[test]
fn export_and_revoke_print_their_schemas() {
    let ctx = ctx();
    let server = spawn(ServerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        store: StoreSpec::File(ctx.tmp.path().join("blobs")),
        sweep_interval: Duration::from_secs(3600),
        ..ServerConfig::default()
    })
    .unwrap();
    let exported = ctx.json(&["session", "export", S1, "--to", &server.url, "--json"]);
    check("share-exported.json", &exported);
    assert_eq!(exported["encrypted"], true);
    let url = exported["url"].as_str().unwrap();
    let public = url.split('#').next().unwrap();

    let revoked = ctx.json(&["share", "revoke", url, "--json"]);
    check("share-revoked.json", &revoked);
    assert_eq!(revoked["url"], public);
    assert_eq!(revoked["sessionId"], S1);
    assert_eq!(revoked["alreadyGone"], false);
    // Again: the server no longer has it.
    let again = ctx.json(&["share", "revoke", public, "--json"]);
    check("share-revoked.json", &again);
    assert_eq!(again["alreadyGone"], true);
}

#[test]
fn the_index_doctor_and_listing_commands_print_their_schemas() {
    let ctx = ctx();
    let rebuilt = ctx.json(&["index", "rebuild", "--json"]);
    check("index-rebuild.json", &rebuilt);
    assert!(rebuilt["sessions"].as_u64().unwrap() > 3);
    let hits = ctx.json(&["search", "settings", "--json"]);
    check("search.json", &hits);
    assert!(!hits.as_array().unwrap().is_empty());
    let stats = ctx.json(&["stats", "--json"]);
    check("stats.json", &stats);
    assert!(stats["modelMs"].is_i64() && stats["problems"].is_array());
    check("stats.json", &ctx.json(&["stats", S1, "--json"]));
    let listed = ctx.json(&["trace", "--list", "--json"]);
    check("trace-list.json", &listed);
    assert!(
        listed
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["sessionId"] == S1)
    );
    // The copied fixtures have loose modes: the doctor reports them (exit 1) and still prints
    // its report; with --fix nothing is left.
    let out = ctx.run(&["doctor", "--json"]);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    check("doctor.json", &report);
    let fixed = ctx.json(&["doctor", "--fix", "--json"]);
    check("doctor.json", &fixed);
    assert_eq!(fixed["unresolved"], 0);
}

#[test]
fn config_commands_print_their_schemas() {
    let ctx = ctx();
    let set = ctx.json(&["config", "set", "current.model", "gpt-5", "--json"]);
    check("config-entry.json", &set);
    assert_eq!(set["value"], "gpt-5");
    assert_eq!(set["source"], "config.json");
    let got = ctx.json(&["config", "get", "current.model", "--json"]);
    check("config-entry.json", &got);
    assert_eq!(got, set);
    let listed = ctx.json(&["config", "list", "--json"]);
    check("config-list.json", &listed);
    assert!(listed.as_array().unwrap().iter().any(|e| e == &set));
    let path = ctx.json(&["config", "path", "--json"]);
    check("config-path.json", &path);
    assert!(path["path"].as_str().unwrap().ends_with("config.json"));
}

#[test]
fn file_exports_dry_runs_imports_and_share_lists_print_their_schemas() {
    let ctx = ctx();
    let file = ctx.tmp.path().join("s1.bundle.json");
    let dry = ctx.json(&[
        "session",
        "export",
        S1,
        "--file",
        file.to_str().unwrap(),
        "--dry-run",
        "--json",
    ]);
    check("share-dry-run.json", &dry);
    assert_eq!(dry["destination"], "file");
    assert!(!file.exists(), "a dry run writes nothing");
    let written = ctx.json(&[
        "session",
        "export",
        S1,
        "--file",
        file.to_str().unwrap(),
        "--json",
    ]);
    check("share-file.json", &written);
    assert!(file.exists());
    let project = ctx.tmp.path().join("proj");
    std::fs::create_dir(&project).unwrap();
    let imported = ctx.json(&[
        "session",
        "import",
        file.to_str().unwrap(),
        "--project",
        project.to_str().unwrap(),
        "--json",
    ]);
    check("session-imported.json", &imported);
    assert_ne!(imported["sessionId"], S1);
    assert_eq!(imported["messages"], written["messages"]);

    let server = spawn(ServerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        store: StoreSpec::File(ctx.tmp.path().join("blobs")),
        sweep_interval: Duration::from_secs(3600),
        ..ServerConfig::default()
    })
    .unwrap();
    ctx.json(&["session", "export", S1, "--to", &server.url, "--json"]);
    let shares = ctx.json(&["share", "list", "--json"]);
    check("share-list.json", &shares);
    assert_eq!(shares[0]["sessionId"], S1);
    assert!(shares[0].get("deleteToken").is_none(), "{shares}");
}
