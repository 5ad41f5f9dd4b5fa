//! The planning step's check of what a member's record is and holds ([`super::session_record`],
//! [`super::check_content`]): every shape of bad content a member can seal, in tables, and the
//! shapes machines write.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use freecode_core::{SessionId, SessionMeta};
use freecode_remote::home_sync::{Chain, Kind, Opened, SyncKey};

use super::*;
use crate::home_sync::record::{Mode, Section, SessionRecord, What};

fn key() -> SyncKey {
    SyncKey::from_bytes([7; 32])
}

fn chain(n: u8) -> Chain {
    Chain::parse(&format!("{n:02x}").repeat(32)).unwrap()
}

fn opened(kind: Kind, plaintext: Vec<u8>) -> Got {
    Got::Opened(Opened { kind, plaintext })
}

fn sid(s: &str) -> SessionId {
    SessionId::new(s).unwrap()
}

fn record(session: &str, base: Option<Chain>, sections: Vec<Section>) -> SessionRecord {
    SessionRecord {
        session: session.to_owned(),
        base: base.map(|c| c.to_string()),
        sections,
    }
}

fn meta(id: &str, updated_at: i64) -> SessionMeta {
    let mut m = SessionMeta::new(
        &sid(id),
        "t".into(),
        "/p".into(),
        "scripted".into(),
        None,
        1,
    );
    m.updated_at = updated_at;
    m
}

#[test]
fn a_members_record_is_applied_only_when_every_section_is_what_a_machine_writes() {
    let id = sid("s1");
    let meta_of = |f: &dyn Fn(&mut serde_json::Value)| {
        let mut v = serde_json::to_value(meta("s1", 5)).unwrap();
        f(&mut v);
        serde_json::to_vec(&v).unwrap()
    };
    let line = b"{\"id\":\"m1\",\"role\":\"user\",\"content\":\"\xc3\xa9t\xc3\xa9\"}\n".to_vec();
    let ok_rows: Vec<(&str, Vec<Section>)> = vec![
        (
            "a meta alone",
            vec![Section::new(What::Meta, Mode::Set, 0, meta_of(&|_| {}))],
        ),
        (
            "a Windows project path",
            vec![Section::new(
                What::Meta,
                Mode::Set,
                0,
                meta_of(&|v| v["projectPath"] = "C:\\src\\app".into()),
            )],
        ),
        (
            "lines appended, a blank one among them, a lone surrogate read as U+FFFD",
            vec![Section::new(
                What::Messages,
                Mode::Append,
                9,
                [&line[..], b"\n", b"{\"t\":\"\\ud83d\"}\n"].concat(),
            )],
        ),
        (
            "nothing appended",
            vec![Section::new(What::Events, Mode::Append, 3, b"")],
        ),
        (
            "a memory",
            vec![Section::new(What::Memory, Mode::Set, 0, b"[1,2]")],
        ),
    ];
    for (case, sections) in ok_rows {
        assert_eq!(
            check_content(&record("s1", None, sections), &id),
            Ok(()),
            "{case}"
        );
    }
    let bad_rows: Vec<(&str, Vec<Section>, &str)> = vec![
        (
            "a meta that is not JSON",
            vec![Section::new(What::Meta, Mode::Set, 0, b"{")],
            "does not parse",
        ),
        (
            "a meta of another session",
            vec![Section::new(
                What::Meta,
                Mode::Set,
                0,
                serde_json::to_vec(&meta("s2", 5)).unwrap(),
            )],
            "another session (s2)",
        ),
        (
            "an empty project path",
            vec![Section::new(
                What::Meta,
                Mode::Set,
                0,
                meta_of(&|v| v["projectPath"] = "".into()),
            )],
            "project path is empty",
        ),
        (
            "a relative project path",
            vec![Section::new(
                What::Meta,
                Mode::Set,
                0,
                meta_of(&|v| v["projectPath"] = "work/app".into()),
            )],
            "not an absolute path",
        ),
        (
            "a project path climbing out",
            vec![Section::new(
                What::Meta,
                Mode::Set,
                0,
                meta_of(&|v| v["projectPath"] = "/w/../../etc".into()),
            )],
            "`..` step",
        ),
        (
            "a meta without a project path",
            vec![Section::new(What::Meta, Mode::Set, 0, b"{\"id\":\"s1\"}")],
            "does not parse",
        ),
        (
            "a meta past its bound",
            vec![Section::new(
                What::Meta,
                Mode::Set,
                0,
                vec![b' '; 4 << 20 | 1],
            )],
            "holds a meta of 4194305 bytes",
        ),
        (
            "a meta appended to",
            vec![Section::new(What::Meta, Mode::Append, 3, meta_of(&|_| {}))],
            "appends to a meta",
        ),
        (
            "messages ending in a torn line",
            vec![Section::new(
                What::Messages,
                Mode::Append,
                0,
                [&line[..], b"{\"id\":"].concat(),
            )],
            "messages lines that end in a torn line",
        ),
        (
            "a message line that is not JSON",
            vec![Section::new(
                What::Messages,
                Mode::Set,
                0,
                [&line[..], b"not json\n"].concat(),
            )],
            "are not JSON objects (line 2)",
        ),
        (
            "a message line that is JSON but no object",
            vec![Section::new(What::Messages, Mode::Set, 0, b"[1]\n")],
            "are not JSON objects (line 1)",
        ),
        (
            "a rollout line cut in the middle",
            vec![Section::new(
                What::Events,
                Mode::Append,
                0,
                b"{\"type\":\"x\"\n",
            )],
            "rollout log lines that are not JSON objects",
        ),
        (
            "a line no reader takes",
            vec![Section::new(
                What::Messages,
                Mode::Set,
                0,
                [
                    b"{\"a\":\"",
                    &vec![b'x'; freecode_store::jsonl::MAX_LINE_BYTES][..],
                    b"\"}\n",
                ]
                .concat(),
            )],
            "too long (line 1)",
        ),
        (
            "a memory that is not JSON",
            vec![Section::new(What::Memory, Mode::Set, 0, b"\x00")],
            "memory that is not JSON",
        ),
        (
            "a good meta, then bad lines",
            vec![
                Section::new(What::Meta, Mode::Set, 0, meta_of(&|_| {})),
                Section::new(What::Messages, Mode::Set, 0, b"\xff\xfe\n"),
            ],
            "not JSON objects",
        ),
    ];
    for (case, sections, want) in bad_rows {
        let why = check_content(&record("s1", None, sections), &id).unwrap_err();
        assert!(why.contains(want), "{case}: {why}");
    }
}

#[test]
fn what_opens_is_a_record_of_its_log_or_garbage_passed_over() {
    let k = key();
    let log_s1 = k.log_id("s1");
    let good = record(
        "s1",
        Some(chain(1)),
        vec![Section::new(What::Messages, Mode::Set, 0, b"{\"a\":1}\n")],
    );
    let other_log = record(
        "s2",
        Some(chain(1)),
        vec![Section::new(What::Messages, Mode::Set, 0, b"{\"a\":1}\n")],
    );
    let bad_id = record(
        "../x",
        None,
        vec![Section::new(What::Meta, Mode::Set, 0, b"{}")],
    );
    let rows: Vec<(&str, Got, Result<&str, &str>)> = vec![
        (
            "a session record of the log",
            opened(Kind::Session, good.encode()),
            Ok("s1"),
        ),
        (
            "a member's record of another kind",
            opened(Kind::Control, good.encode()),
            Err("is of the wrong kind for its log"),
        ),
        (
            "a member's bytes that are no record",
            opened(Kind::Session, b"{\"not\":\"a record\"}".to_vec()),
            Err("opens but is not a session record"),
        ),
        (
            "a member's record of another session moved here",
            opened(Kind::Session, other_log.encode()),
            Err("names a session of another log"),
        ),
        (
            "a session id that is not one",
            opened(Kind::Session, bad_id.encode()),
            Err("names a session of another log"),
        ),
        (
            "does not open",
            Got::Bad("tampered".into()),
            Err("tampered"),
        ),
    ];
    for (case, got, want) in rows {
        let r = session_record(&k, &log_s1, got);
        match (r, want) {
            (Ok((plain, rec)), Ok(s)) => {
                assert_eq!(rec.session, s, "{case}");
                assert_eq!(plain, good.encode(), "{case}");
            }
            (Err(why), Err(w)) => assert_eq!(why, w, "{case}"),
            (r, w) => panic!("{case}: {:?} against {w:?}", r.map(|(_, r)| r.session)),
        }
    }
}
