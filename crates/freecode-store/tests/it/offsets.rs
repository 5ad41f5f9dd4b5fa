//! The offset index of `messages.jsonl` (`session::offsets`): a page read from it is the page a
//! full read gives, for logs cut and grown in random steps, rewritten, truncated, replaced, and
//! with the index file itself corrupted, swapped or removed.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::fs::PermissionsExt;

use freecode_core::{Role, SessionId, StoredMessage};
use freecode_store::session::offsets::{self, STRIDE};
use proptest::prelude::*;

use crate::support::{TestHome, text_msg};

/// The ids of messages `[first, first + take)` as the offset index reads them.
fn page(h: &TestHome, id: &SessionId, first: usize, take: usize) -> Vec<String> {
    let (mut blocks, mut n) = h.store.message_blocks_from(id, first).unwrap();
    assert!(
        n <= first,
        "the blocks start after the page ({n} > {first})"
    );
    let mut out = Vec::new();
    while let Some(b) = blocks.next_block().unwrap() {
        for m in b.items {
            if n >= first && out.len() < take {
                out.push(m.id.clone());
            }
            n += 1;
        }
        if out.len() == take {
            break;
        }
    }
    out
}

/// The same page from a full read.
fn full_page(h: &TestHome, id: &SessionId, first: usize, take: usize) -> Vec<String> {
    let all = h.store.messages(id).unwrap().messages;
    all.iter()
        .skip(first)
        .take(take)
        .map(|m| m.id.clone())
        .collect()
}

/// A message line of about `size` bytes, with text that is not ASCII.
fn line(n: usize, size: usize) -> Vec<u8> {
    let role = if n.is_multiple_of(2) {
        Role::User
    } else {
        Role::Assistant
    };
    let text = "ünïcødé 日本 ".repeat(size / 20 + 1);
    let m: StoredMessage = text_msg(&format!("m{n}"), role, &text);
    let mut b = serde_json::to_vec(&m).unwrap();
    b.push(b'\n');
    b
}

/// One step of a log's growth: a message of some size, or a line no reader takes.
#[derive(Debug, Clone)]
enum Step {
    Message(usize),
    Bad,
    Blank,
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    proptest::collection::vec(
        prop_oneof![
            8 => (50usize..6000).prop_map(Step::Message),
            1 => Just(Step::Bad),
            1 => Just(Step::Blank),
        ],
        1..200,
    )
}

fn bytes_of(steps: &[Step], counter: &mut usize) -> Vec<u8> {
    let mut out = Vec::new();
    for s in steps {
        match s {
            Step::Message(size) => {
                out.extend(line(*counter, *size));
                *counter += 1;
            }
            Step::Bad => out.extend_from_slice(b"{\"id\": \"torn\", \"role\n"),
            Step::Blank => out.extend_from_slice(b"\n"),
        }
    }
    out
}

fn append(path: &std::path::Path, bytes: &[u8]) {
    let mut f = OpenOptions::new().append(true).open(path).unwrap();
    f.write_all(bytes).unwrap();
}

/// Every page start the test tries: the ends, and a spread between.
fn firsts(total: usize) -> Vec<usize> {
    let mut v: Vec<usize> = (0..total + 2).step_by((total / 7).max(1)).collect();
    v.extend([total.saturating_sub(1), total, total + 1]);
    v
}

fn check_pages(h: &TestHome, id: &SessionId) {
    let all: Vec<String> = h
        .store
        .messages(id)
        .unwrap()
        .messages
        .into_iter()
        .map(|m| m.id)
        .collect();
    let total = all.len();
    assert_eq!(
        h.store.message_count(id).unwrap(),
        total as u64,
        "the count is the full read's"
    );
    for first in firsts(total) {
        for take in [1, 50] {
            let want: Vec<String> = all.iter().skip(first).take(take).cloned().collect();
            assert_eq!(
                page(h, id, first, take),
                want,
                "page [{first}, +{take}) of {total}"
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    /// Grown in random steps (each an append the index extends over), then cut at a random
    /// line start and rewritten, then grown again: every page is a full read's.
    #[test]
    fn pages_from_the_index_are_the_full_reads(
        growth in proptest::collection::vec(steps(), 1..5),
        cut in any::<prop::sample::Index>(),
        regrow in steps(),
    ) {
        let h = TestHome::new();
        let id = h.create("/work/offsets");
        let path = h.log_path(&id);
        let mut counter = 0;
        for g in &growth {
            append(&path, &bytes_of(g, &mut counter));
            check_pages(&h, &id);
        }
        // Rewritten in place at a line start (as a writer truncating a torn tail would), then
        // grown with other messages: the index is found stale and rebuilt.
        let bytes = fs::read(&path).unwrap();
        let starts: Vec<usize> = std::iter::once(0)
            .chain(bytes.iter().enumerate().filter(|(_, b)| **b == b'\n').map(|(i, _)| i + 1))
            .collect();
        let at = starts[cut.index(starts.len())];
        let f = OpenOptions::new().write(true).open(&path).unwrap();
        f.set_len(at as u64).unwrap();
        drop(f);
        counter += 10_000;
        append(&path, &bytes_of(&regrow, &mut counter));
        check_pages(&h, &id);
    }
}

/// A log of `n` messages of about 1 KB each, with its index built.
fn long_session(n: usize) -> (TestHome, SessionId) {
    let h = TestHome::new();
    let id = h.create("/work/offsets");
    let mut bytes = Vec::new();
    for i in 0..n {
        bytes.extend(line(i, 1000));
    }
    append(&h.log_path(&id), &bytes);
    assert_eq!(page(&h, &id, n / 2, 3), full_page(&h, &id, n / 2, 3));
    (h, id)
}

#[test]
fn the_index_is_private_derived_and_covers_the_log() {
    let (h, id) = long_session(2000);
    let at = offsets::index_path(h.store.home(), &id);
    let mode = fs::metadata(&at).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{}", at.display());
    let ix = offsets::OffsetIndex::decode(&fs::read(&at).unwrap()).unwrap();
    let log_len = fs::metadata(h.log_path(&id)).unwrap().len();
    let marks = ix.marks();
    assert!(
        marks.len() as u64 >= log_len / (2 * STRIDE as u64),
        "{} marks for {log_len} bytes",
        marks.len()
    );
    // A page deep in the log starts within a stride of it.
    let (_, first) = h.store.message_blocks_from(&id, 1500).unwrap();
    assert!((1400..=1500).contains(&first), "started at {first}");
    // Deleted: the same answer, and the index is back.
    fs::remove_file(&at).unwrap();
    assert_eq!(page(&h, &id, 1500, 20), full_page(&h, &id, 1500, 20));
    assert!(at.is_file());
}

#[test]
fn a_corrupt_or_foreign_index_changes_no_answer() {
    let (h, id) = long_session(1500);
    let (h2, other) = long_session(900);
    let at = offsets::index_path(h.store.home(), &id);
    let good = fs::read(&at).unwrap();
    let foreign = fs::read(offsets::index_path(h2.store.home(), &other)).unwrap();
    let mut flipped = good.clone();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 1;
    // Empty, cut, flipped, another log's (well-formed, but of another file), noise.
    for bad in [
        Vec::new(),
        b"FCOFFS01".to_vec(),
        good[..good.len() - 1].to_vec(),
        flipped,
        foreign,
        vec![0xff; 4096],
    ] {
        fs::write(&at, &bad).unwrap();
        for first in [0, 1, 700, 1499, 1500] {
            assert_eq!(page(&h, &id, first, 9), full_page(&h, &id, first, 9));
        }
        assert_eq!(
            fs::read(&at).unwrap(),
            good,
            "the index was rebuilt as it was"
        );
    }
}

#[test]
fn a_compacted_log_is_read_anew() {
    let (h, id) = long_session(1200);
    let path = h.log_path(&id);
    // Replaced by a new file, as a compaction replaces it: other messages, another inode.
    let mut bytes = Vec::new();
    for i in 0..400 {
        bytes.extend(line(50_000 + i, 700));
    }
    let tmp = path.with_extension("new");
    fs::write(&tmp, &bytes).unwrap();
    fs::rename(&tmp, &path).unwrap();
    for first in [0, 10, 399, 400, 1100] {
        assert_eq!(page(&h, &id, first, 5), full_page(&h, &id, first, 5));
    }
}

#[test]
fn purge_removes_the_index() {
    let (h, id) = long_session(300);
    let at = offsets::index_path(h.store.home(), &id);
    assert!(at.is_file());
    h.store.purge(&id).unwrap();
    assert!(!at.exists());
}

#[test]
fn a_link_in_place_of_the_index_is_not_followed() {
    let (h, id) = long_session(400);
    let at = offsets::index_path(h.store.home(), &id);
    fs::remove_file(&at).unwrap();
    let outside = h.tmp.path().join("outside");
    fs::write(&outside, b"keep").unwrap();
    std::os::unix::fs::symlink(&outside, &at).unwrap();
    assert_eq!(page(&h, &id, 350, 10), full_page(&h, &id, 350, 10));
    assert_eq!(fs::read(&outside).unwrap(), b"keep");
}

#[test]
fn doctor_reports_and_repairs_the_indexes() {
    use freecode_store::doctor::{FindingKind, examine};
    let (h, id) = long_session(1000);
    let home = h.store.home().clone();
    let at = offsets::index_path(&home, &id);
    let good = fs::read(&at).unwrap();
    let offsets_of = |r: &freecode_store::doctor::Report| {
        r.findings
            .iter()
            .filter(|f| f.kind == FindingKind::Index && f.path.starts_with(at.parent().unwrap()))
            .map(|f| (f.path.clone(), f.fixed))
            .collect::<Vec<_>>()
    };
    assert_eq!(offsets_of(&examine(&home, false).unwrap()), vec![]);

    // Corrupt, and one of a session that is gone.
    let orphan = at.with_file_name("0b16b16b-0000-4000-8000-00000000dead");
    fs::write(&orphan, &good).unwrap();
    fs::write(&at, b"not an index").unwrap();
    let found = offsets_of(&examine(&home, false).unwrap());
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(found.iter().all(|(_, fixed)| !fixed));
    let fixed = offsets_of(&examine(&home, true).unwrap());
    assert!(fixed.iter().all(|(_, fixed)| *fixed), "{fixed:?}");
    assert!(!orphan.exists() && !at.exists());

    // Stale: the log rewritten in place after the index was made; --fix builds it again.
    assert_eq!(page(&h, &id, 900, 3), full_page(&h, &id, 900, 3));
    let path = h.log_path(&id);
    let mut bytes = fs::read(&path).unwrap();
    let first_newline = bytes.iter().position(|b| *b == b'\n').unwrap();
    bytes.drain(..=first_newline);
    fs::write(&path, &bytes).unwrap();
    let found = offsets_of(&examine(&home, false).unwrap());
    assert_eq!(found, vec![(at.clone(), false)]);
    examine(&home, true).unwrap();
    assert_eq!(offsets_of(&examine(&home, false).unwrap()), vec![]);
    assert!(at.is_file());
    assert_eq!(page(&h, &id, 900, 3), full_page(&h, &id, 900, 3));
}
