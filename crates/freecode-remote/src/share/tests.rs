//! Unit tests of `client`.

#![allow(clippy::unwrap_used)]
use std::io::Write as _;

use super::*;

#[test]
fn transport_rule() {
    for ok in [
        "https://share.example/abc",
        "http://127.0.0.1:8080/x",
        "http://localhost/x",
        "http://[::1]:9/x",
        "http://127.9.9.9/x",
    ] {
        check_transport(ok).unwrap();
    }
    assert!(matches!(
        check_transport("http://example.com/x"),
        Err(ClientError::Insecure { .. })
    ));
    assert!(matches!(
        check_transport("http://127.0.0.1.evil.com/x"),
        Err(ClientError::Insecure { .. })
    ));
    assert!(matches!(
        check_transport("http://user@evil.com/x"),
        Err(ClientError::Insecure { .. })
    ));
    assert!(check_transport("ftp://127.0.0.1/x").is_err());
    assert!(check_transport("/etc/passwd").is_err());
}

#[test]
fn the_share_log_survives_a_torn_line_and_applies_revocations() {
    let tmp = tempfile::tempdir().unwrap();
    let home = Home::new(tmp.path());
    let log = ShareLog::new(&home);
    let record = |url: &str| ShareRecord {
        url: format!("{url}#key"),
        session_id: "s".into(),
        title: String::new(),
        created_at: 1,
        expires_at: Some(2),
        delete_token: Some("t".into()),
        encrypted: true,
        revoked_at: None,
    };
    log.add(&record("https://x/a")).unwrap();
    // A crash mid-append left half a line.
    std::fs::OpenOptions::new()
        .append(true)
        .open(log.path())
        .unwrap()
        .write_all(b"{\"url\":\"https://x/b")
        .unwrap();
    log.add(&record("https://x/c")).unwrap();
    assert!(log.mark_revoked("https://x/a", 9).unwrap());
    assert!(!log.mark_revoked("https://x/zzz", 9).unwrap());
    let all = log.list().unwrap();
    let urls: Vec<&str> = all.iter().map(ShareRecord::public_url).collect();
    assert_eq!(urls, ["https://x/a", "https://x/c"]);
    assert_eq!(all[0].revoked_at, Some(9));
    assert_eq!(all[1].revoked_at, None);
}

#[test]
fn a_planted_share_log_link_never_receives_a_delete_token() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("home");
    std::fs::create_dir_all(&root).unwrap();
    let home = Home::new(&root);
    let outside = tmp.path().join("outside.txt");
    std::fs::write(&outside, b"theirs").unwrap();
    std::os::unix::fs::symlink(&outside, root.join("shares.jsonl")).unwrap();
    let log = ShareLog::new(&home);
    let record = ShareRecord {
        url: "https://x/a#key".into(),
        session_id: "s".into(),
        title: String::new(),
        created_at: 1,
        expires_at: Some(2),
        delete_token: Some("secret-delete-token".into()),
        encrypted: true,
        revoked_at: None,
    };
    let err = log.add(&record).unwrap_err().to_string();
    assert!(err.contains("symbolic link"), "{err}");
    assert_eq!(std::fs::read(&outside).unwrap(), b"theirs");
    assert!(log.list().is_err(), "a linked log is not read either");
}

#[test]
fn a_url_with_a_key_only_accepts_an_envelope() {
    let key = ShareKey::generate().unwrap();
    let plain = br#"{"meta":{"title":"t","projectPath":"/p","provider":"x"},"messages":[]}"#;
    assert!(
        decode_body(plain, None).is_ok(),
        "a plain share without a key"
    );
    assert!(
        matches!(
            decode_body(plain, Some(&key)),
            Err(ClientError::Crypto(CryptoError::NotAnEnvelope(_)))
        ),
        "a server must not swap an encrypted share for plain data"
    );
}

#[test]
fn share_url_parts() {
    let key = ShareKey::generate().unwrap();
    let u = ShareUrl::parse(&format!("http://127.0.0.1:1/abcd#{}", key.to_fragment())).unwrap();
    assert_eq!(u.url, "http://127.0.0.1:1/abcd");
    assert_eq!(u.code, "abcd");
    assert_eq!(u.key, Some(key));
    assert!(matches!(
        ShareUrl::parse("http://127.0.0.1:1/abcd#short"),
        Err(ClientError::Crypto(CryptoError::BadKey))
    ));
}
