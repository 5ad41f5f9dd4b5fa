//! `freecode search`, `stats`, `index rebuild` and the index behind `session list`, driven as a
//! user drives them: the same answers with SQLite and with the JSON fallback, and every command
//! still working when the database is corrupt.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{copy_tree, fixtures};

use std::path::PathBuf;
use std::process::Output;

use serde_json::Value;

struct Home {
    _tmp: tempfile::TempDir,
    root: PathBuf,
}

impl Home {
    /// A writable copy of the original's home without its thread-store files.
    fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join(".freecode");
        copy_tree(&fixtures().join("home/.freecode"), &root);
        for f in ["freecode.db", "store.json"] {
            std::fs::remove_file(root.join("state").join(f)).unwrap();
        }
        Self { _tmp: tmp, root }
    }

    fn run(&self, backend: &str, args: &[&str]) -> Output {
        common::freecode(&self.root)
            .args(args)
            .env("FREECODE_THREAD_STORE", backend)
            .output()
            .unwrap()
    }

    fn json(&self, backend: &str, args: &[&str]) -> Value {
        let out = self.run(backend, args);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }
}

fn hit_keys(v: &Value) -> Vec<(String, String)> {
    let mut k: Vec<_> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["sessionId"].as_str().unwrap().to_owned(),
                h["messageId"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    k.sort();
    k
}

#[test]
fn sqlite_and_json_backends_answer_the_same() {
    let home = Home::new();
    for args in [
        vec!["session", "list", "--json"],
        vec!["session", "list", "--all", "--json"],
        vec!["stats", "--json"],
        vec!["stats", "68d44408-94df-4f2f-ae2e-ffffdb68e297", "--json"],
        vec!["stats", "--project", "snake", "--json"],
    ] {
        assert_eq!(
            home.json("sqlite", &args),
            home.json("json", &args),
            "{args:?}"
        );
    }
    assert!(
        home.root.join("state/freecode.db").exists(),
        "the index was built"
    );
    for q in ["dark mode", "invoice", "ダークモード", "zzz-nothing"] {
        let a = home.json("sqlite", &["search", q, "--json", "--limit", "100"]);
        let b = home.json("json", &["search", q, "--json", "--limit", "100"]);
        assert_eq!(hit_keys(&a), hit_keys(&b), "{q}");
    }
    let hits = home.json(
        "sqlite",
        &[
            "search",
            "dark",
            "--json",
            "--since",
            "2026-01-15T09:30:00Z",
        ],
    );
    assert!(
        hits.as_array()
            .unwrap()
            .iter()
            .all(|h| h["timestamp"].as_i64().unwrap() >= 1_768_469_400_000)
    );
    let text = String::from_utf8(home.run("sqlite", &["search", "dark mode"]).stdout).unwrap();
    assert!(text.contains("[dark]"), "{text}");
    assert_eq!(
        home.run("sqlite", &["search", "x", "--since", "yesterday-ish"])
            .status
            .code(),
        Some(1)
    );
}

#[test]
fn a_corrupt_database_never_blocks_a_command() {
    for garbage in [&b""[..], b"this is not a database at all, just some bytes"] {
        let home = Home::new();
        home.json("sqlite", &["session", "list", "--json"]);
        let db = home.root.join("state/freecode.db");
        std::fs::write(&db, garbage).unwrap();
        let _ = std::fs::remove_file(home.root.join("state/freecode.db-wal"));
        let listed = home.json("auto", &["session", "list", "--json"]);
        assert_eq!(listed.as_array().unwrap().len(), 10);
        assert!(!hit_keys(&home.json("auto", &["search", "invoice", "--json"])).is_empty());
        assert_eq!(home.json("auto", &["stats", "--json"])["sessions"], 11);
        let out = home.run("auto", &["index", "rebuild"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(String::from_utf8_lossy(&out.stdout).contains("indexed 11 sessions"));
    }
}

#[test]
fn a_read_only_home_is_read_without_writing_to_it() {
    let home = Home::new();
    let state = home.root.join("state");
    std::process::Command::new("chmod")
        .args(["0555"])
        .arg(&state)
        .status()
        .unwrap();
    let listed = home.json("auto", &["session", "list", "--json"]);
    assert_eq!(listed.as_array().unwrap().len(), 10);
    assert!(
        !state.join("freecode.db").exists(),
        "nothing written into a read-only state dir"
    );
    let out = home.run("auto", &["index", "rebuild"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "no index without SQLite: a clear user error"
    );
    std::process::Command::new("chmod")
        .args(["0700"])
        .arg(&state)
        .status()
        .unwrap();
}
