//! Unit tests of `seal`.

#![allow(clippy::unwrap_used)]
use super::*;

fn ids() -> (SyncKey, HostId, LogId) {
    let key = SyncKey::from_bytes([7; 32]);
    let log = key.log_id("session-a");
    (key, HostId([1; 16]), log)
}

#[test]
fn phrase_round_trips_and_checks_its_sum() {
    let key = SyncKey::generate().unwrap();
    let phrase = key.to_phrase();
    assert_eq!(phrase.split(' ').count(), 24);
    assert_eq!(SyncKey::from_phrase(&phrase).unwrap(), key);
    assert_eq!(
        SyncKey::parse(&format!("  {}\n", phrase.to_uppercase())).unwrap(),
        key
    );
    assert_eq!(SyncKey::parse(&key.to_hex()).unwrap(), key);
    // Two words swapped: the checksum (almost always) fails; a word not in the list always.
    let mut words: Vec<&str> = phrase.split(' ').collect();
    words[3] = "notaword";
    assert!(matches!(
        SyncKey::from_phrase(&words.join(" ")),
        Err(SealError::BadPhrase(_))
    ));
    assert!(SyncKey::parse("abc").is_err());
}

#[test]
fn a_record_opens_only_where_it_was_sealed() {
    let (key, host, log) = ids();
    let sealed = key.seal(Kind::Session, &host, &log, 3, b"hello").unwrap();
    let opened = key.open(&host, &log, 3, &sealed).unwrap();
    assert_eq!(opened.plaintext, b"hello");
    assert_eq!(opened.kind, Kind::Session);
    // Another index, log or host: refused.
    assert!(matches!(
        key.open(&host, &log, 4, &sealed),
        Err(SealError::Tampered { .. })
    ));
    assert!(key.open(&host, &key.log_id("b"), 3, &sealed).is_err());
    assert!(key.open(&HostId([2; 16]), &log, 3, &sealed).is_err());
    // Another kind byte, any flipped bit, a truncation: refused.
    for i in [5, 20, 60, sealed.len() - 1] {
        let mut bad = sealed.clone();
        bad[i] ^= 1;
        assert!(key.open(&host, &log, 3, &bad).is_err(), "byte {i}");
    }
    assert!(
        key.open(&host, &log, 3, &sealed[..sealed.len() - 1])
            .is_err()
    );
    // Another key: told apart from tampering.
    let other = SyncKey::from_bytes([8; 32]);
    assert!(matches!(
        other.open(&host, &log, 3, &sealed),
        Err(SealError::OtherKey { .. })
    ));
}

#[test]
fn claims_are_bound_to_their_log_and_point() {
    let (key, host, log) = ids();
    let base = key.genesis("session-a");
    let c = key.seal_claim(&log, &base, &host, 9).unwrap();
    assert_eq!(key.open_claim(&log, &base, &c).unwrap(), (host, 9));
    let moved = key.next(&base, b"x");
    assert!(key.open_claim(&log, &moved, &c).is_err());
    assert!(key.open_claim(&key.log_id("b"), &base, &c).is_err());
}

#[test]
fn a_rotated_key_keeps_the_ids_opens_the_old_records_and_rewraps_them() {
    let (key, host, log) = ids();
    let old = key.seal(Kind::Session, &host, &log, 3, b"avant").unwrap();
    let base = key.genesis("session-a");
    let claim = key.seal_claim(&log, &base, &host, 3).unwrap();
    let new = key.rotate().unwrap();
    assert_ne!(new.id(), key.id());
    assert_eq!(new.log_id("session-a"), log, "every log keeps its id");
    assert_eq!(new.genesis("session-a"), base);
    assert_eq!(new.open(&host, &log, 3, &old).unwrap().plaintext, b"avant");
    assert_eq!(new.open_claim(&log, &base, &claim).unwrap(), (host, 3));
    // Rewrapped: only the wrap's bytes change; the old key no longer opens it.
    let moved = new.rewrap(&host, &log, 3, &old).unwrap().unwrap();
    assert_eq!(moved.len(), old.len());
    assert_eq!(moved[..WRAP_SPAN.start], old[..WRAP_SPAN.start]);
    assert_eq!(moved[WRAP_SPAN.end..], old[WRAP_SPAN.end..]);
    assert_eq!(
        new.open(&host, &log, 3, &moved).unwrap().plaintext,
        b"avant"
    );
    assert!(matches!(
        key.open(&host, &log, 3, &moved),
        Err(SealError::OtherKey { .. })
    ));
    assert_eq!(new.rewrap(&host, &log, 3, &moved).unwrap(), None);
    // A rewrap cannot move a record: it is bound where it was.
    assert!(new.rewrap(&host, &log, 4, &old).is_err());
    // The phrase alone, completed by the ring, is the whole key; the file keeps it all.
    let bare = SyncKey::from_phrase(&new.to_phrase()).unwrap();
    assert_ne!(bare.log_id("session-a"), log);
    let ring = new.seal_ring().unwrap();
    assert_eq!(bare.with_ring(&ring).unwrap(), new);
    assert!(key.with_ring(&ring).is_err(), "sealed for the new key only");
    let mut bad = ring.clone();
    let last = bad.len() - 1;
    bad[last] ^= 1;
    assert!(bare.with_ring(&bad).is_err());
    assert_eq!(SyncKey::parse(&new.to_file()).unwrap(), new);
    assert_eq!(SyncKey::parse(&key.to_file()).unwrap(), key);
    // Rotated twice: both older keys open.
    let third = new.rotate().unwrap();
    assert_eq!(
        third.open(&host, &log, 3, &old).unwrap().plaintext,
        b"avant"
    );
    assert_eq!(third.key_ids().len(), 3);
}

#[test]
fn ids_are_keyed() {
    let a = SyncKey::from_bytes([1; 32]);
    let b = SyncKey::from_bytes([2; 32]);
    assert_ne!(a.log_id("s"), b.log_id("s"));
    assert_ne!(a.log_id("s"), a.log_id("t"));
    assert_ne!(a.control_log(), a.log_id(""));
    let g = a.genesis("s");
    assert_ne!(a.next(&g, b"1"), a.next(&g, b"2"));
    assert_eq!(
        LogId::parse(&a.log_id("s").to_string()),
        Some(a.log_id("s"))
    );
}
