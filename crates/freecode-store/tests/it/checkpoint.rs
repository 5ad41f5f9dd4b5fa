//! Fold checkpoints (`rollout::checkpoint`): a trace (both JSON forms) and a replay read from a
//! checkpoint are, byte for byte, those read from the start, for logs cut at every line start
//! or at random bytes (torn tails) and grown in random steps; a checkpoint whose log was replaced, cut or rewritten, or
//! whose own files were corrupted, cut, replaced or locked by another process, is detected and
//! the answer is still right.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use freecode_core::SessionId;
use freecode_core::rollout::replay::ReplayBuilder;
use freecode_core::rollout::trace::TraceBuilder;
use freecode_store::Home;
use freecode_store::rollout::checkpoint::{self, Health};
use freecode_store::rollout::{
    CompactJson, JsonForm, JsonSpans, JsonTurns, PrettyJson, ReadReport, Spooled, events_path,
    fold_replay_streamed, fold_trace_streamed, write_replay_json, write_trace_json,
};
use proptest::prelude::*;

use crate::rollout_views::log;

const ID: &str = "68d44408-94df-4f2f-ae2e-ffffdb68e297";
/// Open requests are aged against this `now`, the same in both reads.
const NOW: Option<i64> = Some(2_000_000);

struct Fixture {
    _dir: tempfile::TempDir,
    home: Home,
    id: SessionId,
    log: PathBuf,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::new(dir.path().join(".freecode"));
    let id = SessionId::new(ID).unwrap();
    let log = events_path(&home, &id);
    fs::create_dir_all(log.parent().unwrap()).unwrap();
    fs::write(&log, b"").unwrap();
    Fixture {
        _dir: dir,
        home,
        id,
        log,
    }
}

fn append(path: &Path, bytes: &[u8]) {
    OpenOptions::new()
        .append(true)
        .open(path)
        .unwrap()
        .write_all(bytes)
        .unwrap();
}

/// `trace --json` (form `F`) of the log, and the read's report: from the checkpoint (made or
/// brought up to date), every log checkpointed whatever its size.
fn checkpointed<F: JsonForm + Default + Send + 'static>(f: &Fixture) -> (Vec<u8>, ReadReport) {
    let (b, report) =
        checkpoint::fold_checkpointed_from::<TraceBuilder<Spooled<F>>>(&f.home, &f.id, 0)
            .unwrap()
            .unwrap();
    let mut out = Vec::new();
    write_trace_json(&mut out, b, NOW).unwrap();
    (out, report)
}

/// `replay --json` of the log as the CLI writes it (the read's unknown events and skipped
/// lines added), from the checkpoint or (`fresh`) from the start.
fn replay(f: &Fixture, fresh: bool) -> Vec<u8> {
    let (mut b, report) = if fresh {
        fold_replay_streamed::<PrettyJson>(&f.log, ID)
    } else {
        checkpoint::fold_checkpointed_from::<ReplayBuilder<JsonTurns>>(&f.home, &f.id, 0)
    }
    .unwrap()
    .unwrap();
    for _ in 0..report.unknown {
        b.unknown_event();
    }
    for i in report.issues.iter().filter(|i| i.kind.skipped()) {
        b.skipped_line(i.line, i.offset, format!("{:?}", i.kind));
    }
    let mut out = Vec::new();
    write_replay_json(&mut out, b).unwrap();
    out
}

/// The same from the start, without a checkpoint.
fn scratch<F: JsonForm + Default + Send + 'static>(f: &Fixture) -> (Vec<u8>, ReadReport) {
    let (b, report) = fold_trace_streamed::<F>(&f.log, ID).unwrap().unwrap();
    let mut out = Vec::new();
    write_trace_json(&mut out, b, NOW).unwrap();
    (out, report)
}

fn state_file(f: &Fixture) -> PathBuf {
    checkpoint::dir(&f.home, &f.id).join("trace-pretty.state")
}

#[track_caller]
fn same(f: &Fixture) {
    assert_eq!(
        String::from_utf8_lossy(&replay(f, false)),
        String::from_utf8_lossy(&replay(f, true))
    );
    let (got, got_report) = checkpointed::<PrettyJson>(f);
    let (want, want_report) = scratch::<PrettyJson>(f);
    assert_eq!(got_report, want_report);
    assert_eq!(
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(&want)
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(120))]

    /// Grown in random steps, cut anywhere (a torn line completed by the next step), the
    /// checkpointed trace is the trace from the start, in both JSON forms, every step.
    #[test]
    fn grown_in_random_steps_the_checkpointed_trace_is_the_trace(
        bytes in log(),
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 1..6),
    ) {
        let f = fixture();
        let mut cuts: Vec<usize> = cuts.iter().map(|c| c.index(bytes.len() + 1)).collect();
        cuts.push(bytes.len());
        cuts.sort_unstable();
        let mut at = 0;
        for cut in cuts {
            append(&f.log, &bytes[at..cut]);
            at = cut;
            let (got, got_report) = checkpointed::<PrettyJson>(&f);
            let (want, want_report) = scratch::<PrettyJson>(&f);
            prop_assert_eq!(&got_report, &want_report);
            prop_assert_eq!(String::from_utf8_lossy(&got), String::from_utf8_lossy(&want));
            let (got, _) = checkpointed::<CompactJson>(&f);
            let (want, _) = scratch::<CompactJson>(&f);
            prop_assert_eq!(String::from_utf8_lossy(&got), String::from_utf8_lossy(&want));
            let (got, want) = (replay(&f, false), replay(&f, true));
            prop_assert_eq!(String::from_utf8_lossy(&got), String::from_utf8_lossy(&want));
        }
        // Read again, unchanged: the same bytes.
        let (again, _) = checkpointed::<PrettyJson>(&f);
        let (want, _) = scratch::<PrettyJson>(&f);
        prop_assert_eq!(again, want);
    }
}

/// A log of `n` model calls and tool runs, some requests left open across calls.
fn calls(from: u64, n: u64) -> Vec<u8> {
    let mut out = Vec::new();
    for k in from..from + n {
        let t = format!("\"timestamp\":{k},\"turnId\":\"tür-{k}\"");
        out.extend_from_slice(format!("{{\"type\":\"turn.started\",{t}}}\n").as_bytes());
        if k % 9 == 4 && k >= 70 {
            // A late output for a turn the replay fold handed out long ago (a patch).
            let old = k - 70;
            out.extend_from_slice(format!("{{\"type\":\"function.output\",\"timestamp\":{k},\"turnId\":\"tür-{old}\",\"tool\":\"bash\",\"callId\":\"c{old}\",\"output\":\"late\",\"duration_ms\":9}}\n").as_bytes());
        }
        out.extend_from_slice(format!("{{\"type\":\"model.request\",{t},\"provider\":\"p\",\"model\":\"m\",\"messageCount\":3}}\n").as_bytes());
        if k % 7 != 3 {
            out.extend_from_slice(
                format!(
                    "{{\"type\":\"model.response\",{t},\"duration_ms\":{},\"inputTokens\":5}}\n",
                    k % 13
                )
                .as_bytes(),
            );
        }
        out.extend_from_slice(format!("{{\"type\":\"function.call\",{t},\"tool\":\"bash\",\"callId\":\"c{k}\",\"args\":{{\"cmd\":\"ls ünï\"}}}}\n").as_bytes());
        if k % 5 != 1 {
            out.extend_from_slice(format!("{{\"type\":\"function.output\",{t},\"tool\":\"bash\",\"callId\":\"c{k}\",\"output\":\"ok\",\"duration_ms\":2}}\n").as_bytes());
        }
        if k % 11 == 0 {
            out.extend_from_slice(b"not json\n");
        }
    }
    out
}

/// Cut at every line start and read each time: the checkpoint taken up at each.
#[test]
fn cut_at_every_line_start_the_checkpointed_trace_is_the_trace() {
    let f = fixture();
    let bytes = calls(0, 40);
    let mut at = 0;
    for (i, _) in bytes.iter().enumerate().filter(|(_, b)| **b == b'\n') {
        append(&f.log, &bytes[at..=i]);
        at = i + 1;
        same(&f);
    }
}

/// `calls` without its unreadable lines (which the read's report keeps, one entry each) and,
/// unless `late`, without its late outputs (which the replay keeps as patches until its end).
fn clean_calls(from: u64, n: u64, late: bool) -> Vec<u8> {
    calls(from, n)
        .split_inclusive(|b| *b == b'\n')
        .filter(|l| *l != b"not json\n")
        .filter(|l| late || memchr::memmem::find(l, b"\"late\"").is_none())
        .flatten()
        .copied()
        .collect()
}

/// A replay taken up from its checkpoint finds a turn handed out reads ago (a late output for
/// a turn 70 back, whose id only the checkpoint's id spool holds), and the checkpoint's state
/// does not grow with the log's turns: the turns and their ids live in spools that only grow,
/// so taking it up costs what is open, not the history.
#[test]
fn a_replay_checkpoint_finds_old_turns_and_its_state_stays_small() {
    let f = fixture();
    append(&f.log, &clean_calls(0, 100, true));
    same(&f);
    for step in 0..8 {
        append(&f.log, &clean_calls(100 + step * 5, 5, true));
        same(&f);
    }
    let state = checkpoint::dir(&f.home, &f.id).join("replay-pretty.state");
    let before = fs::metadata(&state).unwrap().len();
    append(&f.log, &clean_calls(140, 2_000, false));
    same(&f);
    let ids = checkpoint::dir(&f.home, &f.id).join("replay-pretty.ids");
    assert!(
        fs::metadata(&ids).unwrap().len() > 2_000 * 8,
        "the ids are not in their spool"
    );
    let after = fs::metadata(&state).unwrap().len();
    assert!(
        after < before + 1_024,
        "the state grew from {before} to {after} bytes over 2,000 turns"
    );
    // Taken up again, old turns named again: still the answer from the start.
    append(&f.log, &clean_calls(2_140, 80, true));
    same(&f);
}

/// Folds the log once so that it has a checkpoint, and checks it was made: the log last
/// written more than [`checkpoint::RACY`] before, as a log read again is (one saved sooner is
/// racy, and not trusted at the same size: see `a_same_size_edit_in_the_middle_…`).
fn with_checkpoint(f: &Fixture, n: u64) {
    append(&f.log, &calls(0, n));
    std::thread::sleep(checkpoint::RACY);
    same(f);
    assert!(state_file(f).is_file(), "no checkpoint was made");
    assert_eq!(
        checkpoint::health(&f.home, &f.id, &state_file(f)),
        Health::Good
    );
}

fn spool(f: &Fixture, which: &str) -> PathBuf {
    checkpoint::dir(&f.home, &f.id).join(format!("trace-pretty.{which}"))
}

#[test]
fn a_corrupt_state_file_is_ignored_and_replaced() {
    let f = fixture();
    with_checkpoint(&f, 300);
    let state = state_file(&f);
    let mut bytes = fs::read(&state).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x20;
    fs::write(&state, &bytes).unwrap();
    assert_eq!(
        checkpoint::health(&f.home, &f.id, &state),
        Health::Unreadable
    );
    append(&f.log, &calls(300, 20));
    same(&f);
    assert_eq!(checkpoint::health(&f.home, &f.id, &state), Health::Good);
    // Cut short, or of another version.
    fs::write(&state, &bytes[..10]).unwrap();
    same(&f);
    let mut other = fs::read(&state).unwrap();
    other[7] = b'9';
    fs::write(&state, &other).unwrap();
    same(&f);
}

#[test]
fn a_spool_cut_rewritten_replaced_or_grown_is_found() {
    let f = fixture();
    with_checkpoint(&f, 300);
    let model = spool(&f, "model");
    let len = fs::metadata(&model).unwrap().len();
    // Cut.
    OpenOptions::new()
        .write(true)
        .open(&model)
        .unwrap()
        .set_len(len - 10)
        .unwrap();
    append(&f.log, &calls(300, 5));
    same(&f);
    // Its end rewritten in place.
    let tool = spool(&f, "tool");
    let mut bytes = fs::read(&tool).unwrap();
    let last = bytes.len() - 3;
    bytes[last] ^= 1;
    fs::write(&tool, &bytes).unwrap();
    same(&f);
    // Replaced by a copy (another inode).
    let copy = fs::read(&model).unwrap();
    fs::remove_file(&model).unwrap();
    fs::write(&model, &copy).unwrap();
    same(&f);
    // Longer than saved (a save that did not finish): cut back, the answer unchanged.
    append(&spool(&f, "denied"), b"half a record");
    append(&model, b"half a record");
    same(&f);
    assert_eq!(
        checkpoint::health(&f.home, &f.id, &state_file(&f)),
        Health::Good
    );
    // A byte changed in the middle: `doctor` reads the whole spool and finds it.
    let mut bytes = fs::read(&model).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 1;
    fs::write(&model, &bytes).unwrap();
    assert!(matches!(
        checkpoint::health(&f.home, &f.id, &state_file(&f)),
        Health::Corrupt(_)
    ));
}

#[test]
fn a_log_replaced_cut_or_rewritten_is_folded_from_the_start() {
    let f = fixture();
    with_checkpoint(&f, 300);
    // Replaced (a compaction writes a new file): other events, same length.
    let mut other = calls(1000, 300);
    other.truncate(fs::metadata(&f.log).unwrap().len() as usize);
    let tmp = f.log.with_extension("tmp");
    fs::write(&tmp, &other).unwrap();
    fs::rename(&tmp, &f.log).unwrap();
    assert_eq!(
        checkpoint::health(&f.home, &f.id, &state_file(&f)),
        Health::Stale
    );
    same(&f);
    // Cut to half, then grown past where it was with other lines.
    let bytes = fs::read(&f.log).unwrap();
    let half = bytes.len() / 2;
    OpenOptions::new()
        .write(true)
        .open(&f.log)
        .unwrap()
        .set_len(half as u64)
        .unwrap();
    same(&f);
    append(&f.log, &calls(5000, 400));
    same(&f);
    // Rewritten in place at its end (same file, same length).
    let mut bytes = fs::read(&f.log).unwrap();
    let n = bytes.len();
    bytes[n - 19..n - 1].copy_from_slice(b"\"x\":1}\nnot json   ");
    fs::write(&f.log, &bytes).unwrap();
    same(&f);
    // Removed: no log, no trace; the checkpoint is an orphan for doctor.
    fs::remove_file(&f.log).unwrap();
    assert!(
        checkpoint::fold_checkpointed_from::<TraceBuilder<JsonSpans>>(&f.home, &f.id, 0)
            .unwrap()
            .is_none()
    );
    assert_eq!(
        checkpoint::health(&f.home, &f.id, &state_file(&f)),
        Health::Orphan
    );
}

/// Deleting the checkpoints changes no answer; another process folding with one (the lock
/// held) makes this one fold from the start, without waiting.
#[test]
fn deleted_or_locked_checkpoints_change_no_answer() {
    let f = fixture();
    with_checkpoint(&f, 200);
    fs::remove_dir_all(checkpoint::dir(&f.home, &f.id)).unwrap();
    same(&f);
    assert!(state_file(&f).is_file());
    let held = fs::File::options()
        .read(true)
        .write(true)
        .open(spool(&f, "model"))
        .unwrap();
    held.lock().unwrap();
    let before = fs::read(state_file(&f)).unwrap();
    append(&f.log, &calls(200, 10));
    same(&f);
    assert_eq!(
        fs::read(state_file(&f)).unwrap(),
        before,
        "a locked checkpoint was written"
    );
    drop(held);
    same(&f);
    assert_ne!(fs::read(state_file(&f)).unwrap(), before);
}

/// A link planted where a checkpoint file goes is never followed: the fold is still right and
/// the link's target is untouched.
#[test]
fn a_planted_link_is_not_followed() {
    let f = fixture();
    append(&f.log, &calls(0, 50));
    let dir = checkpoint::dir(&f.home, &f.id);
    fs::create_dir_all(&dir).unwrap();
    let target = f._dir.path().join("precious");
    fs::write(&target, b"keep me").unwrap();
    std::os::unix::fs::symlink(&target, dir.join("trace-pretty.model")).unwrap();
    same(&f);
    assert_eq!(fs::read(&target).unwrap(), b"keep me");
}

/// `doctor` finds a checkpoint that does not read, one whose spool changed in the middle and
/// one whose log is gone; `--fix` removes them and rebuilds the first two from their logs.
#[test]
fn doctor_reports_and_rebuilds_checkpoints() {
    use freecode_store::doctor::{FindingKind, examine};
    let f = fixture();
    with_checkpoint(&f, 300);
    let folds = f.home.state_dir().join("folds");
    let ours = |r: &freecode_store::doctor::Report| {
        r.findings
            .iter()
            .filter(|x| x.kind == FindingKind::Index && x.path.starts_with(&folds))
            .map(|x| (x.path.clone(), x.fixed))
            .collect::<Vec<_>>()
    };
    assert_eq!(ours(&examine(&f.home, false).unwrap()), vec![]);

    let model = spool(&f, "model");
    let mut bytes = fs::read(&model).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 1;
    fs::write(&model, &bytes).unwrap();
    let gone = folds.join("0b16b16b-0000-4000-8000-00000000dead");
    fs::create_dir_all(&gone).unwrap();
    fs::write(gone.join("trace-pretty.state"), b"x").unwrap();
    let found = ours(&examine(&f.home, false).unwrap());
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(found.iter().all(|(_, fixed)| !fixed));
    let fixed = ours(&examine(&f.home, true).unwrap());
    assert!(fixed.iter().all(|(_, fixed)| *fixed), "{fixed:?}");
    assert!(!gone.exists());
    assert_eq!(
        checkpoint::health(&f.home, &f.id, &state_file(&f)),
        Health::Good,
        "rebuilt"
    );
    same(&f);
    assert_eq!(ours(&examine(&f.home, false).unwrap()), vec![]);
}

/// Purging a session removes its checkpoints (they hold its spans).
#[test]
fn purge_removes_the_checkpoints() {
    use crate::support::TestHome;
    let h = TestHome::new();
    let id = h.create("/tmp/p");
    let log = events_path(h.store.home(), &id);
    fs::create_dir_all(log.parent().unwrap()).unwrap();
    fs::write(&log, calls(0, 50)).unwrap();
    checkpoint::fold_checkpointed_from::<TraceBuilder<JsonSpans>>(h.store.home(), &id, 0)
        .unwrap()
        .unwrap();
    let dir = checkpoint::dir(h.store.home(), &id);
    assert!(dir.join("trace-pretty.state").is_file());
    h.store.purge(&id).unwrap();
    assert!(!dir.exists());
}

/// The red-team case: the log edited in the middle, same inode, same size, the probes at both
/// ends untouched. Its change time moved, so the checkpoint is not taken up: the answer is the
/// fresh home's. A checkpoint saved right after the log's last write (racy: an edit in the same
/// timestamp tick would keep the times) is not trusted at the same size either.
#[test]
fn a_same_size_edit_in_the_middle_is_found() {
    use std::os::unix::fs::{FileExt, MetadataExt};
    let f = fixture();
    with_checkpoint(&f, 400);
    let len = fs::metadata(&f.log).unwrap().len();
    assert!(
        len > 4 * checkpoint::PROBE,
        "the middle is outside the probes"
    );
    let ino = fs::metadata(&f.log).unwrap().ino();
    let before = scratch::<PrettyJson>(&f).0;
    // A tool's duration in the middle, 2 ms made 8: still valid JSON, a different answer.
    let bytes = fs::read(&f.log).unwrap();
    let mid = usize::try_from(len / 2).unwrap();
    let needle = b"\"duration_ms\":2}";
    let at = mid
        + bytes[mid..]
            .windows(needle.len())
            .position(|w| w == needle)
            .unwrap()
        + needle.len()
        - 2;
    let new = b'8';
    std::thread::sleep(std::time::Duration::from_millis(20));
    OpenOptions::new()
        .write(true)
        .open(&f.log)
        .unwrap()
        .write_all_at(&[new], at as u64)
        .unwrap();
    let m = fs::metadata(&f.log).unwrap();
    assert_eq!((m.ino(), m.len()), (ino, len), "same inode, same size");
    assert!(
        scratch::<PrettyJson>(&f).0 != before,
        "the edit changes the answer"
    );
    assert_eq!(
        checkpoint::health(&f.home, &f.id, &state_file(&f)),
        Health::Stale
    );
    same(&f);
    // Racy: saved within RACY of the last write, then edited at the same size within the same
    // timestamp tick as far as the checkpoint can tell: the next read folds from the start.
    append(&f.log, &calls(400, 10));
    same(&f);
    OpenOptions::new()
        .write(true)
        .open(&f.log)
        .unwrap()
        .write_all_at(b"9", at as u64)
        .unwrap();
    same(&f);
    std::thread::sleep(checkpoint::RACY);
    same(&f);
    assert_eq!(
        checkpoint::health(&f.home, &f.id, &state_file(&f)),
        Health::Good
    );
}
