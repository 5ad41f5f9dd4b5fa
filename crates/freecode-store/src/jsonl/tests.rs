//! Unit tests of `jsonl`.

use super::*;
use serde_json::Value;

#[test]
fn line_start_is_the_first_line_start_at_or_after_the_offset() {
    let mut f = tempfile::tempfile().unwrap();
    std::io::Write::write_all(&mut f, b"ab\ncd\n\nef").unwrap();
    let len = 11;
    let starts: Vec<u64> = (0..=len)
        .map(|at| line_start(&f, at, len).unwrap())
        .collect();
    // Lines start at 0, 3, 6 and 7; past the last one there is none (the length).
    assert_eq!(starts, [0, 3, 3, 3, 6, 6, 6, 7, 11, 11, 11, 11]);
    // Only the first `len` bytes count.
    assert_eq!(line_start(&f, 4, 5).unwrap(), 5);
}

#[test]
fn parts_read_into_one_vector_number_lines_from_where_they_start() {
    let log = b"{\"a\":1}\nbad\n{\"a\":2}\n{\"a\":3}\n{\"a\"";
    let mut f = tempfile::tempfile().unwrap();
    std::io::Write::write_all(&mut f, log).unwrap();
    let len = log.len() as u64;
    let mid = line_start(&f, len / 2, len).unwrap();
    assert_eq!(mid, 20, "the fourth line");
    let mut head = Blocks::part(crate::fsutil::RangeReader::new(&f, 0, mid), 4, 1, 0);
    let mut items: Vec<Value> = Vec::new();
    let mut issues = Vec::new();
    while let Some(i) = head.next_block_into(Decode::PLAIN, &mut items).unwrap() {
        issues.extend(i);
    }
    assert_eq!(head.next_line(), 4);
    let mut tail = Blocks::part(crate::fsutil::RangeReader::new(&f, mid, len), 4, 4, mid);
    while let Some(i) = tail.next_block_into(Decode::PLAIN, &mut items).unwrap() {
        issues.extend(i);
    }
    assert_eq!(
        items,
        [
            serde_json::json!({"a":1}),
            serde_json::json!({"a":2}),
            serde_json::json!({"a":3})
        ]
    );
    let at: Vec<(u64, u64)> = issues.iter().map(|i| (i.line, i.offset)).collect();
    assert_eq!(at, [(2, 8), (5, 28)]);
    assert_eq!(issues[1].kind, IssueKind::Torn);
}

#[test]
fn raw_blocks_parsed_elsewhere_read_as_blocks_do() {
    // Bad, blank, long and torn lines; blocks smaller than a line, and larger.
    let mut log = Vec::new();
    for i in 0..40 {
        match i % 7 {
            3 => log.extend_from_slice(b"not json\n"),
            5 => log.extend_from_slice(b"\n"),
            _ => log.extend_from_slice(
                format!("{{\"a\":{i},\"pad\":\"{}\"}}\n", "x".repeat(i * 3)).as_bytes(),
            ),
        }
    }
    log.extend_from_slice(b"{\"torn\":");
    for block in [1, 10, 64, 300, 1 << 20] {
        let mut whole = Blocks::new(&log[..], block);
        let (mut want_items, mut want_issues) = (Vec::<Value>::new(), Vec::new());
        while let Some(b) = whole.next_block().unwrap() {
            want_items.extend(b.items);
            want_issues.extend(b.issues);
        }
        let mut raw = Blocks::new(&log[..], block);
        let (mut items, mut issues) = (Vec::<Value>::new(), Vec::new());
        let mut spare = Vec::new();
        let mut last_eof = false;
        while let Some(r) = raw.next_raw(spare).unwrap() {
            assert!(!last_eof, "nothing after the block that ends the file");
            last_eof = r.eof;
            let b = r.parse_with(Decode::PLAIN);
            items.extend(b.items);
            issues.extend(b.issues);
            spare = r.bytes;
        }
        assert!(last_eof);
        assert_eq!(items, want_items, "block {block}");
        assert_eq!(issues, want_issues, "block {block}");
        assert_eq!(issues.last().map(|i| &i.kind), Some(&IssueKind::Torn));
    }
}

fn both(buf: &[u8]) -> (Vec<Value>, Vec<LineIssue>) {
    let (items, issues, _) = parse_block::<Value>(buf, 1, 0, true);
    let a = (items, issues);
    let mut items = Vec::new();
    let mut issues = Vec::new();
    stream(buf, |v: Value| items.push(v), |i| issues.push(i)).unwrap();
    assert_eq!(a.0, items);
    assert_eq!(a.1, issues);
    a
}

#[test]
fn skips_and_reports_bad_lines_with_offsets() {
    let buf = b"{\"a\":1}\nnot json\n\n{\"a\":\xff}\n{\"a\":\0}\n{\"a\":2}\n{\"a\":3";
    let (items, issues) = both(buf);
    assert_eq!(items.len(), 2);
    for block in [1, 7, 16, 4096] {
        let mut got: Vec<Value> = Vec::new();
        let iss = read_blocks(&buf[..], block, |v: Vec<Value>| got.extend(v)).unwrap();
        assert_eq!((&got, &iss), (&items, &issues), "block {block}");
    }
    let got: Vec<_> = issues
        .iter()
        .map(|i| (i.line, i.offset, matches!(i.kind, IssueKind::Torn)))
        .collect();
    assert_eq!(
        got,
        vec![(2, 8, false), (4, 18, false), (5, 26, false), (7, 42, true)]
    );
}

#[test]
fn parallel_parse_numbers_lines_like_the_serial_one() {
    let mut buf = Vec::new();
    for i in 0..200_000 {
        if i % 9973 == 0 {
            buf.extend_from_slice(b"garbage\n");
        } else {
            buf.extend_from_slice(
                format!("{{\"i\":{i},\"pad\":\"................\"}}\n").as_bytes(),
            );
        }
    }
    assert!(buf.len() > PARALLEL_THRESHOLD);
    let (items, issues) = both(&buf);
    assert_eq!(items.len() + issues.len(), 200_000);
    assert_eq!(issues[1].line, 9974);
}
