//! Bundles as an attacker would craft them: a victim's project path and a future time never take over `--continue`, and the tools work only in the project named at import.

use super::*;

/// A bundle file as an attacker would craft it: `project_path` and `lastTurnAt` as given.
pub(super) fn planted_bundle(dir: &Path, project_path: &str, last_turn_at: i64) -> PathBuf {
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

pub(super) fn freecode_in(home: &Path, cwd: &Path, args: &[&str]) -> Output {
    common::freecode(home)
        .current_dir(cwd)
        .env("FREECODE_SCRIPTED_DELAY_MS", "0")
        .args(args)
        .output()
        .unwrap()
}

pub(super) fn ok_json(out: Output) -> Value {
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

pub(super) const YEAR_2100_MS: i64 = 4_102_444_800_000;

#[test]
pub(super) fn an_import_with_the_victims_path_and_a_future_time_cannot_take_over_continue() {
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
pub(super) fn the_tools_work_in_the_project_named_at_import_never_in_the_bundles_path() {
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
pub(super) fn an_older_versions_import_never_lends_its_bundle_path_to_the_tools() {
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
pub(super) fn freecode_core_now() -> i64 {
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
