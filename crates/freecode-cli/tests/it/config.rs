//! `freecode config list|get|set|path` through the real binary, and a `config.json` that does
//! not parse stopping every command that reads it.

use crate::common::Ctx;

use std::os::unix::fs::PermissionsExt;
use std::process::Output;

use serde_json::{Value, json};

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn set_get_list_and_path_keep_unknown_keys_in_a_private_file() {
    let ctx = Ctx::missing();
    let home = ctx.home.clone();
    let file = home.join("config.json");
    assert_eq!(ctx.ok(&["config", "path"]).trim(), file.to_str().unwrap());

    // Defaults before anything is set.
    assert_eq!(ctx.ok(&["config", "get", "syncUrlExpiryDays"]), "7\n");
    let out = ctx.run(&["config", "get", "syncEndpoint"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("syncEndpoint is not set"),
        "{}",
        stderr(&out)
    );
    assert!(!file.exists(), "reading wrote the file");

    // A file written by hand (or the original) keeps what freecode does not know.
    std::fs::create_dir_all(&home).unwrap();
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::write(
        &file,
        r#"{"theme": "dark", "current": {"agentMode": "build"}}"#,
    )
    .unwrap();
    ctx.ok(&[
        "config",
        "set",
        "syncEndpoint",
        "https://share.example.test",
    ]);
    ctx.ok(&["config", "set", "syncUrlExpiryDays", "3"]);
    ctx.ok(&["config", "set", "current.model", "gpt-test"]);
    ctx.ok(&["config", "set", "syncApiKey", "team-secret"]);
    let v: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(
        v,
        json!({
            "theme": "dark",
            "current": {"agentMode": "build", "model": "gpt-test"},
            "syncEndpoint": "https://share.example.test",
            "syncUrlExpiryDays": 3,
            "syncApiKey": "team-secret",
        })
    );
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert_eq!(ctx.ok(&["config", "get", "current.model"]), "gpt-test\n");
    assert_eq!(ctx.ok(&["config", "get", "syncUrlExpiryDays"]), "3\n");

    // list: every known key once, the secret hidden.
    let text = ctx.ok(&["config", "list"]);
    assert!(!text.contains("team-secret"), "{text}");
    assert!(text.contains("https://share.example.test"), "{text}");
    let rows: Vec<Value> = serde_json::from_str(&ctx.ok(&["config", "list", "--json"])).unwrap();
    let keys: Vec<&str> = rows.iter().map(|r| r["key"].as_str().unwrap()).collect();
    assert_eq!(
        keys,
        [
            "syncEndpoint",
            "syncApiKey",
            "syncUrlExpiryDays",
            "current.provider",
            "current.model",
            "baseUrl",
            "embed.provider",
            "embed.path",
            "embed.baseUrl",
            "embed.model",
            "embed.apiKey",
            "embed.readTokens",
            "embed.minSimilarity",
            "sync.exclude",
            "sync.auto"
        ]
    );
    let row = |k: &str| rows.iter().find(|r| r["key"] == k).unwrap().clone();
    assert_eq!(row("syncUrlExpiryDays")["value"], 3);
    assert_eq!(row("syncUrlExpiryDays")["default"], "7");
    assert_eq!(row("baseUrl")["source"], "default");
    assert_eq!(row("syncEndpoint")["source"], "config.json");
    assert!(
        !row("syncApiKey")["value"]
            .to_string()
            .contains("team-secret")
    );

    // Bad values and unknown keys are refused, and the file stays as it was.
    let before = std::fs::read(&file).unwrap();
    for (args, want) in [
        (
            vec!["config", "set", "syncEndpoint", "share.example.test"],
            "http:// or https://",
        ),
        (
            vec!["config", "set", "syncUrlExpiryDays", "0"],
            "at least 1",
        ),
        (
            vec!["config", "set", "syncUrlExpiryDays", "soon"],
            "at least 1",
        ),
        (
            vec!["config", "set", "sync.auto", "peut-être"],
            "true or false",
        ),
        (vec!["config", "set", "nope", "1"], "unknown key \"nope\""),
        (vec!["config", "get", "nope"], "the keys are syncEndpoint"),
    ] {
        let out = ctx.run(&args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(stderr(&out).contains(want), "{args:?}: {}", stderr(&out));
    }
    assert_eq!(std::fs::read(&file).unwrap(), before);
}

#[test]
fn sync_auto_takes_the_usual_spellings_of_a_boolean() {
    let ctx = Ctx::empty();
    for (given, stored) in [("yes", true), ("OFF", false), ("1", true), ("false", false)] {
        let out = ctx.run(&["config", "set", "sync.auto", given]);
        assert!(out.status.success(), "{given}: {}", stderr(&out));
        let file = ctx.home.join("config.json");
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap();
        assert_eq!(v["sync"]["auto"], stored, "{given}");
    }
}

#[test]
fn an_invalid_config_json_is_an_error_naming_file_line_and_column() {
    let ctx = Ctx::missing();
    let home = ctx.home.clone();
    std::fs::create_dir_all(&home).unwrap();
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700)).unwrap();
    let file = home.join("config.json");
    let bad = "{\n  \"syncEndpoint\": \"https://private.example.test\",\n}\n";
    std::fs::write(&file, bad).unwrap();
    let want = format!("{}:3:1: invalid config.json", file.display());
    for args in [
        vec!["config", "list"],
        vec!["config", "get", "syncEndpoint"],
        vec![
            "config",
            "set",
            "syncEndpoint",
            "https://other.example.test",
        ],
        vec!["run", "--provider", "scripted", "hi"],
    ] {
        let out = ctx.run(&args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(&want), "{args:?}: {}", stderr(&out));
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    // `set` never replaced the file the user is editing.
    assert_eq!(std::fs::read_to_string(&file).unwrap(), bad);
    // Commands that do not read it still work.
    ctx.ok(&["config", "path"]);
    ctx.ok(&["session", "list"]);
}
