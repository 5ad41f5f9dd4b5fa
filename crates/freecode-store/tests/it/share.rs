//! Imports treat the bundle as untrusted: the session goes where the importer says, the
//! sender's project path is provenance only, and no time in it is later than the import.

use freecode_core::bundle::parse_bundle;
use freecode_store::share::{ImportOptions, import_bundle};
use freecode_store::{ListFilter, StoreError};

use crate::support::{TestHome, snapshot};

const YEAR_2100_MS: i64 = 4_102_444_800_000;

fn planted(project_path: &str) -> freecode_core::bundle::Bundle {
    let body = serde_json::json!({
        "format": "freecode.session-bundle", "version": 1, "exportedAt": YEAR_2100_MS,
        "meta": {"id": "a-1", "title": "Planted", "projectPath": project_path, "provider": "x",
                 "status": "active", "createdAt": 1, "updatedAt": YEAR_2100_MS,
                 "lastTurnAt": YEAR_2100_MS, "turnCount": 3},
        "messages": [{"id": "m1", "role": "user", "parts": [], "timestamp": YEAR_2100_MS}],
        "rollout": [{"type": "turn.started", "id": "e", "seq": 9, "aggregateID": "a-1",
                     "timestamp": YEAR_2100_MS, "turnId": "turn-1"}],
        "memories": [{"name": "note", "type": "project", "content": "c"}],
        "counts": {"messages": 1, "events": 1, "memories": 1}
    });
    parse_bundle(&serde_json::to_vec(&body).unwrap()).unwrap().0
}

#[test]
fn an_import_lives_in_the_named_project_with_the_senders_path_as_provenance_only() {
    let h = TestHome::new();
    let before = freecode_store::now_ms();
    let imported = import_bundle(
        &h.store,
        planted("/victim/project"),
        &ImportOptions {
            source: "file".into(),
            project_path: "/home/me/mine".into(),
            with_memories: true,
        },
    )
    .unwrap();
    let after = freecode_store::now_ms();
    let m = h.store.meta(&imported.id).unwrap();
    assert_eq!(m.project_path, "/home/me/mine");
    assert_eq!(m.imported_from().unwrap()["projectPath"], "/victim/project");
    assert!(!m.project_path_from_bundle());
    assert!(m.is_untouched_import());
    assert!(
        (before..=after).contains(&m.last_turn_at),
        "{}",
        m.last_turn_at
    );
    assert!(m.updated_at <= after && m.created_at <= after);
    assert!(m.imported_from().unwrap()["exportedAt"].as_i64().unwrap() <= after);
    let msgs = h.store.messages(&imported.id).unwrap().messages;
    assert!(msgs[0].timestamp <= after);
    let log = std::fs::read_to_string(freecode_store::rollout::events_path(
        h.store.home(),
        &imported.id,
    ))
    .unwrap();
    let ev: serde_json::Value = serde_json::from_str(log.trim()).unwrap();
    assert!(ev["timestamp"].as_i64().unwrap() <= after);

    // Listed under the importer's project, not the sender's.
    let in_project = |p: &str| {
        h.store
            .list(&ListFilter {
                project_path: Some(p.into()),
                ..ListFilter::default()
            })
            .unwrap()
            .sessions
            .len()
    };
    assert_eq!(in_project("/home/me/mine"), 1);
    assert_eq!(in_project("/victim/project"), 0);
    // Memory entries went to the importer's project (slug `mine`).
    assert_eq!(imported.memories_written.len(), 1);
    assert!(
        imported.memories_written[0].ends_with("projects/mine/memory/project/note.md"),
        "{:?}",
        imported.memories_written
    );
    assert!(!h.root().join("projects/project").exists());

    // A turn ending after the import makes it the user's session.
    let mut w = h.store.writer(&imported.id).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(2));
    let m = w.end_turn(1).unwrap();
    assert!(!m.is_untouched_import());
}

#[test]
fn an_import_without_a_project_is_refused_and_writes_nothing() {
    let h = TestHome::new();
    let before = snapshot(h.root());
    let err = import_bundle(
        &h.store,
        planted("/victim/project"),
        &ImportOptions::default(),
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            freecode_store::share::ShareError::Store(StoreError::InvalidProjectPath { .. })
        ),
        "{err:?}"
    );
    assert_eq!(snapshot(h.root()), before);
}

#[test]
fn a_fork_of_an_older_import_keeps_the_mark_unless_it_moves_to_a_project() {
    let h = TestHome::new();
    let imported = import_bundle(
        &h.store,
        planted("/victim/project"),
        &ImportOptions {
            source: "file".into(),
            project_path: "/victim/project".into(),
            with_memories: false,
        },
    )
    .unwrap();
    // What an older version wrote: no `importedFrom.projectPath`.
    h.store
        .update_meta(&imported.id, |m| {
            let mut from = m.imported_from().unwrap().clone();
            from.as_object_mut().unwrap().remove("projectPath");
            m.extra.insert("importedFrom".into(), from);
        })
        .unwrap();
    assert!(
        h.store
            .meta(&imported.id)
            .unwrap()
            .project_path_from_bundle()
    );
    let fork = h.store.fork(&imported.id, None).unwrap();
    let m = h.store.meta(&fork).unwrap();
    assert_eq!(m.project_path, "/victim/project");
    assert!(
        m.project_path_from_bundle(),
        "the fork still has the bundle's path"
    );
    let moved = h.store.fork(&imported.id, Some("/home/me/mine")).unwrap();
    let m = h.store.meta(&moved).unwrap();
    assert!(m.imported_from().is_none() && !m.project_path_from_bundle());
    // A fork of a current import (its project is the importer's) is an ordinary session.
    let current = import_bundle(
        &h.store,
        planted("/victim/project"),
        &ImportOptions {
            source: "file".into(),
            project_path: "/home/me/mine".into(),
            with_memories: false,
        },
    )
    .unwrap();
    let fork = h.store.fork(&current.id, None).unwrap();
    let m = h.store.meta(&fork).unwrap();
    assert_eq!(m.project_path, "/home/me/mine");
    assert!(!m.project_path_from_bundle() && !m.is_untouched_import());
}

/// `exportedAt` is the clock's: set to 0 in both before comparing.
fn without_export_time(json: &[u8]) -> Vec<u8> {
    let mut v: serde_json::Value = serde_json::from_slice(json).unwrap();
    v["exportedAt"] = 0.into();
    let mut out = serde_json::to_vec(&v).unwrap();
    out.push(b'\n');
    out
}

/// The streamed export writes the bytes of the tree-built one: secrets redacted in the meta
/// (known and unknown keys), in messages (text, tool args, results, unknown keys, unknown part
/// types) and in the rollout events, with the redactions listed in the same order and the
/// counts right, over a log with bad lines and lone surrogates, several blocks long.
#[test]
fn a_streamed_export_is_the_tree_built_bundle_byte_for_byte() {
    use freecode_store::share::{ExportOptions, bundle_json, export_bundle, stream_bundle};
    use std::io::Write as _;
    let h = TestHome::new();
    let id = h.create("/p");
    let token = format!("ghp_{}", "a1B2c3D4".repeat(5));
    let aws = "AKIAIOSFODNN7EXAMPLF";
    h.store
        .update_meta(&id, |m| {
            m.title = format!("fix {token}");
            m.extra
                .insert("futureKey".into(), serde_json::json!({"k": [aws, 1.5]}));
        })
        .unwrap();
    let mut log = std::fs::OpenOptions::new()
        .append(true)
        .open(h.log_path(&id))
        .unwrap();
    let mut buf = Vec::new();
    for i in 0..12_000u32 {
        let line = match i % 101 {
            3 => "not json".to_owned(),
            4 => format!(
                r#"{{"id":"s{i}","role":"user","parts":[{{"type":"text","content":"cut \ud83d {token}"}}],"timestamp":{i}}}"#
            ),
            5 => format!(
                r#"{{"id":"t{i}","role":"assistant","parts":[{{"type":"tool","tool":{{"name":"sh","args":{{"env":"{aws}","n":0.1}}}},"result":"{token}"}},{{"type":"reasoning","text":"{token}"}}],"timestamp":{i},"later":["{aws}"]}}"#
            ),
            _ => format!(
                r#"{{"id":"g{i}","role":"assistant","parts":[{{"type":"text","content":"{}"}}],"timestamp":{i},"usage":{{"inputTokens":{i},"outputTokens":2}}}}"#,
                "plain text ".repeat(60)
            ),
        };
        buf.extend_from_slice(line.as_bytes());
        buf.push(b'\n');
    }
    log.write_all(&buf).unwrap();
    drop(log);
    let events = freecode_store::rollout::events_path(h.store.home(), &id);
    std::fs::create_dir_all(events.parent().unwrap()).unwrap();
    std::fs::write(
        &events,
        format!("{{\"type\":\"x\",\"seq\":1,\"secret\":\"{token}\"}}\nbad\n"),
    )
    .unwrap();

    for (include_rollout, no_redact) in [(true, false), (false, false), (false, true)] {
        let opts = ExportOptions {
            include_rollout,
            no_redact,
            ..Default::default()
        };
        let tree = export_bundle(&h.store, &id, &opts).unwrap();
        let mut want = bundle_json(&tree).unwrap();
        want.push(b'\n');
        let mut got = Vec::new();
        let head = stream_bundle(&h.store, &id, &opts, &mut got).unwrap();
        assert!(got.ends_with(b"}\n"));
        assert_eq!(head.redactions, tree.redactions);
        assert_eq!(head.counts, tree.counts);
        assert!(head.messages.is_empty());
        if !no_redact {
            assert!(tree.redactions.len() > 300, "{}", tree.redactions.len());
            assert!(!String::from_utf8_lossy(&got).contains(&token));
        }
        assert!(
            without_export_time(&got) == without_export_time(&want),
            "rollout {include_rollout} no_redact {no_redact}: {} vs {} bytes",
            got.len(),
            want.len()
        );
        // Byte for byte, not only as values: only exportedAt may differ.
        let t = |b: &[u8]| {
            let s = String::from_utf8(b.to_vec()).unwrap();
            let i = s.find("\"exportedAt\":").unwrap() + 13;
            let j = i + s[i..].find(|c: char| !c.is_ascii_digit()).unwrap();
            format!("{}0{}", &s[..i], &s[j..])
        };
        assert!(t(&got) == t(&want), "bytes differ");

        // To a `.zst` file: one zstd frame of the same JSON (no newline), compressed as it is
        // written, never the bundle in memory; import's reader takes it.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.json.zst");
        let (shown, head) =
            freecode_store::share::save_to_remote_streamed(&h.store, &id, &opts, Some(&path))
                .unwrap()
                .expect("a regular .zst file is streamed");
        assert_eq!(shown, path);
        assert_eq!(head.redactions, tree.redactions);
        let raw = std::fs::read(&path).unwrap();
        assert!(freecode_store::codec::is_compressed(&raw));
        let json = freecode_store::codec::decompress(&raw, u64::MAX).unwrap();
        want.pop();
        assert!(t(&json) == t(&want), "zst contents differ");
        want.push(b'\n');

        // Into a FIFO: streamed through a temp, then the same bytes as the tree-built bundle,
        // newline included; the FIFO stays a FIFO.
        let fifo = dir.path().join("pipe");
        assert!(
            std::process::Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap()
                .success()
        );
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read(fifo).unwrap())
        };
        let (shown, head) =
            freecode_store::share::save_to_remote_streamed(&h.store, &id, &opts, Some(&fifo))
                .unwrap()
                .expect("a FIFO is streamed");
        let got = reader.join().unwrap();
        assert_eq!(shown, fifo);
        assert_eq!(head.redactions, tree.redactions);
        assert_eq!(head.counts, tree.counts);
        assert!(t(&got) == t(&want), "FIFO bytes differ");
        use std::os::unix::fs::FileTypeExt as _;
        assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
    }
}

/// A title cut from the first prompt through a token (the first 60 characters, `…` after) is
/// cut again from the redacted prompt: no part of the token is left in `meta.title`, the
/// redaction is listed at `meta.title`, and the tree-built and streamed exports agree. A title
/// renamed by hand is redacted as it stands.
#[test]
fn a_title_cut_through_a_secret_keeps_no_part_of_it() {
    use freecode_store::share::{ExportOptions, bundle_json, export_bundle, stream_bundle};
    let h = TestHome::new();
    let id = h.create("/p");
    let token = format!("ghp_{}", "Zq8rT1vXw0yB".repeat(3));
    let prompt = format!("déploie la branche avec le jeton {token} puis relance la CI");
    let cut: String = prompt.chars().take(60).collect();
    assert!(
        cut.contains("ghp_") && !cut.contains(&token),
        "the cut goes through it"
    );
    h.store
        .update_meta(&id, |m| m.title = format!("{cut}…"))
        .unwrap();
    let line = format!(
        r#"{{"id":"u1","role":"user","parts":[{{"type":"text","content":"{prompt}\nsecond line"}}],"timestamp":1}}"#
    );
    std::fs::write(h.log_path(&id), format!("{line}\n")).unwrap();
    let tree = export_bundle(&h.store, &id, &ExportOptions::default()).unwrap();
    let title = &tree.meta.title;
    assert_eq!(
        title, "déploie la branche avec le jeton [REDACTED:github-pat]…",
        "{title}"
    );
    assert!(!title.contains("ghp_") && !title.contains(&token[4..12]));
    let at_title: Vec<_> = tree
        .redactions
        .iter()
        .filter(|n| n.location == "meta.title")
        .collect();
    assert_eq!(at_title.len(), 1, "{:?}", tree.redactions);
    assert_eq!(at_title[0].kind, "github-pat");
    let mut streamed = Vec::new();
    stream_bundle(&h.store, &id, &ExportOptions::default(), &mut streamed).unwrap();
    let mut want = bundle_json(&tree).unwrap();
    want.push(b'\n');
    assert_eq!(without_export_time(&streamed), without_export_time(&want));

    // Renamed by hand, found in no message: redacted as it stands.
    h.store
        .update_meta(&id, |m| m.title = format!("release with {token}…"))
        .unwrap();
    let tree = export_bundle(&h.store, &id, &ExportOptions::default()).unwrap();
    assert_eq!(tree.meta.title, "release with [REDACTED:github-pat]…");
}
