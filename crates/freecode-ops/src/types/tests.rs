//! Unit tests of `types`.

#![allow(clippy::unwrap_used)]
use super::*;
use freecode_core::message::{Part, Role};

fn meta() -> SessionMeta {
    serde_json::from_str(
        r#"{"id":"s1","title":"t \u0001 \"q\"","projectPath":"/p","provider":"openai",
            "model":"m","createdAt":1,"updatedAt":2,"lastTurnAt":2,"turnCount":1,
            "status":"active","future":{"k":[1,2.5,null]}}"#,
    )
    .unwrap()
}

fn messages(n: usize) -> Vec<StoredMessage> {
    (0..n)
        .map(|i| {
            let mut m = StoredMessage::new(
                format!("m{i}"),
                if i % 2 == 0 {
                    Role::User
                } else {
                    Role::Assistant
                },
                vec![
                    Part::text(format!("line {i}\n\t\"quoted\" é")),
                    Part::tool("grep", serde_json::json!({"a": [i, null, 0.5]}), ""),
                ],
                i as i64,
            );
            if i % 3 == 0 {
                m.parts.clear();
            }
            m
        })
        .collect()
}

/// `msgs` as a `messages.jsonl` (with a blank and a malformed line among them), written by
/// [`write_detail`] reading it in blocks of `block` bytes.
fn streamed(meta: &SessionMeta, msgs: &[StoredMessage], block: usize, style: JsonStyle) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("messages.jsonl");
    let mut log = Vec::new();
    for (i, m) in msgs.iter().enumerate() {
        serde_json::to_writer(&mut log, m).unwrap();
        log.push(b'\n');
        if i % 5 == 1 {
            log.extend_from_slice(b"\n{\"not\": a message}\n");
        }
    }
    std::fs::write(&path, log).unwrap();
    let blocks = MessageBlocks::open(&path, block).unwrap();
    let mut out = Vec::new();
    write_detail(meta, blocks, style, |b| {
        out.extend_from_slice(b);
        Ok(())
    })
    .unwrap();
    out
}

#[test]
fn the_streamed_detail_is_the_tree_built_one_byte_for_byte() {
    let meta = meta();
    for n in [0, 1, 2, 7, 50, 301] {
        let msgs = messages(n);
        // As every output prints a session: with its agent.
        let detail = SessionDetail {
            meta: meta.clone().with_agent(),
            messages: msgs.clone(),
        };
        let pretty = serde_json::to_vec_pretty(&detail).unwrap();
        let compact = serde_json::to_vec(&detail).unwrap();
        // One line a block (both workers, blocks of nothing), a few lines, all in one.
        for block in [1, 300, 4096, 1 << 20] {
            let got = streamed(&meta, &msgs, block, JsonStyle::Pretty);
            assert_eq!(
                String::from_utf8_lossy(&got),
                String::from_utf8_lossy(&pretty),
                "n {n} block {block}"
            );
            let got = streamed(&meta, &msgs, block, JsonStyle::Compact);
            assert_eq!(got, compact, "n {n} block {block}");
        }
    }
}

#[test]
fn a_missing_log_is_a_detail_of_no_messages() {
    let meta = meta();
    let dir = tempfile::tempdir().unwrap();
    let blocks = MessageBlocks::open(&dir.path().join("messages.jsonl"), 64).unwrap();
    let mut out = Vec::new();
    write_detail(&meta, blocks, JsonStyle::Pretty, |b| {
        out.extend_from_slice(b);
        Ok(())
    })
    .unwrap();
    let want = serde_json::to_vec_pretty(&SessionDetail {
        meta: meta.clone().with_agent(),
        messages: Vec::new(),
    })
    .unwrap();
    assert_eq!(out, want);
}

#[test]
fn a_failing_output_stops_the_read_and_returns_its_error() {
    let meta = meta();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("messages.jsonl");
    let mut log = Vec::new();
    for m in messages(500) {
        serde_json::to_writer(&mut log, &m).unwrap();
        log.push(b'\n');
    }
    std::fs::write(&path, log).unwrap();
    // Blocks of one line: the workers have far more to do than the output takes.
    let blocks = MessageBlocks::open(&path, 1).unwrap();
    let mut writes = 0;
    let err = write_detail(&meta, blocks, JsonStyle::Pretty, |_| {
        writes += 1;
        if writes == 3 {
            return Err(crate::Error::Failed("disk on fire".into()));
        }
        Ok(())
    })
    .unwrap_err();
    assert_eq!(err.to_string(), "disk on fire");
    assert_eq!(writes, 3, "nothing is written after the error");
}
