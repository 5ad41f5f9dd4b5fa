//! The bounds of every line reader, met as a hostile home meets them: sparse files of
//! gigabytes with no newline where a line should end, read by the real binary, whose peak
//! memory is measured (the kernel's `ru_maxrss` of the child, through `python3`'s `os.wait4`).
//!
//! One cap holds everywhere (`freecode_core::limits::MAX_LINE_BYTES`, 16 MiB): a line past it
//! is skipped as a bad line without being held, and a torn tail past it is cut by truncation,
//! never copied. Each test prints its figures (`--nocapture` shows them).

use crate::common;

use std::fs::OpenOptions;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::common::Ctx;
use freecode_core::limits::MAX_LINE_BYTES;
use serde_json::Value;

const GIB: u64 = 1 << 30;
/// What a command may reach over gigabytes of input: a few blocks and a line at the cap.
const PEAK_BOUND_KIB: u64 = 256 << 10;

/// What one measured run did.
struct Measured {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    peak_kib: u64,
    secs: f64,
}

/// Runs `cmd` to its end under `python3`, which reports the child's peak RSS.
fn measured(cmd: &Command) -> Measured {
    const WAIT: &str = "import os, subprocess, sys\n\
        out = open(sys.argv[1], 'wb'); err = open(sys.argv[2], 'wb')\n\
        p = subprocess.Popen(sys.argv[3:], stdout=out, stderr=err, stdin=subprocess.DEVNULL)\n\
        _, status, ru = os.wait4(p.pid, 0)\n\
        print(os.waitstatus_to_exitcode(status), ru.ru_maxrss)\n";
    let dir = tempfile::tempdir().unwrap();
    let (out, err) = (dir.path().join("out"), dir.path().join("err"));
    let mut py = Command::new("python3");
    py.arg("-c").arg(WAIT).arg(&out).arg(&err);
    py.arg(cmd.get_program()).args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => py.env(k, v),
            None => py.env_remove(k),
        };
    }
    if let Some(d) = cmd.get_current_dir() {
        py.current_dir(d);
    }
    let t0 = Instant::now();
    let o = py
        .output()
        .expect("python3 runs the child and reports its peak memory");
    let secs = t0.elapsed().as_secs_f64();
    let report = String::from_utf8_lossy(&o.stdout).into_owned();
    let mut fields = report.split_whitespace();
    let code: Option<i32> = fields.next().and_then(|c| c.parse().ok());
    let peak_kib: u64 = fields
        .next()
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no figures from python3: {report} {o:?}"));
    Measured {
        code,
        stdout: std::fs::read_to_string(&out).unwrap_or_default(),
        stderr: std::fs::read_to_string(&err).unwrap_or_default(),
        peak_kib,
        secs,
    }
}

impl Measured {
    fn report(&self, what: &str, size: u64) {
        eprintln!(
            "{what}: {} GiB line, exit {:?} in {:.1} s, peak RSS {} MiB",
            size / GIB,
            self.code,
            self.secs,
            self.peak_kib / 1024
        );
        assert!(
            self.peak_kib < PEAK_BOUND_KIB,
            "{what}: peak RSS {} MiB over {} GiB of input: {}",
            self.peak_kib / 1024,
            size / GIB,
            self.stderr
        );
        assert!(!self.stderr.contains("panicked"), "{}", self.stderr);
    }
}

/// Extends `path` by `len` bytes of a hole (NULs, no newline) without writing them.
fn grow_sparse(path: &Path, len: u64) {
    let f = OpenOptions::new().write(true).open(path).unwrap();
    let size = f.metadata().unwrap().len();
    f.set_len(size + len).unwrap();
}

/// Bytes the file takes on disk (not its length): a hole takes none.
fn allocated(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).unwrap().blocks() * 512
}

/// A home with one session made by a scripted run in a project directory; its id and log.
fn home_with_a_session(ctx: &Ctx) -> (String, PathBuf) {
    let project = ctx.path("projet-été");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join("A.md"), "# Architecture\n").unwrap();
    let v = common::json_of(
        ctx.cmd(&["run", "--json", "lis le dépôt"])
            .current_dir(&project),
    );
    let id = v["sessionId"].as_str().unwrap().to_owned();
    let log = common::find_below(&ctx.home.join("sessions"), &id).join("messages.jsonl");
    assert!(log.exists(), "{}", log.display());
    (id, log)
}

fn texts(show: &str) -> Vec<String> {
    let v: Value = serde_json::from_str(show).unwrap();
    v["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn show_and_restore_of_a_log_ending_in_a_2_gb_torn_line_hold_no_line_and_copy_none() {
    let ctx = Ctx::empty();
    let (id, log) = home_with_a_session(&ctx);
    let before = std::fs::metadata(&log).unwrap().len();
    let shown = texts(&ctx.ok(&["session", "show", &id, "--json"]));
    grow_sparse(&log, 2 * GIB);

    let m = measured(&ctx.cmd(&["session", "show", &id, "--json"]));
    m.report("session show", 2 * GIB);
    assert_eq!(m.code, Some(0), "{}", m.stderr);
    assert_eq!(texts(&m.stdout), shown, "the complete lines are all shown");
    assert!(m.stderr.contains("torn"), "{}", m.stderr);

    // Delete and restore open the log for writing: the torn tail is cut, not copied, and of
    // each only its start is kept aside.
    let m = measured(&ctx.cmd(&["session", "delete", &id, "--yes"]));
    m.report("session delete", 2 * GIB);
    assert_eq!(m.code, Some(0), "{}", m.stderr);
    assert_eq!(std::fs::metadata(&log).unwrap().len(), before);
    grow_sparse(&log, 2 * GIB);
    let m = measured(&ctx.cmd(&["session", "restore", &id]));
    m.report("session restore", 2 * GIB);
    assert_eq!(m.code, Some(0), "{}", m.stderr);
    assert_eq!(std::fs::metadata(&log).unwrap().len(), before);
    let torn = log.with_file_name("messages.jsonl.torn");
    let kept = std::fs::metadata(&torn).unwrap().len();
    assert!(
        kept <= 2 * (64 * 1024 + 1),
        "{kept} bytes kept of the torn lines"
    );
    assert!(allocated(&torn) <= 1 << 20, "{}", allocated(&torn));
    assert_eq!(texts(&ctx.ok(&["session", "show", &id, "--json"])), shown);
}

#[test]
fn a_2_gb_line_inside_the_log_is_skipped_and_the_lines_after_it_read() {
    let ctx = Ctx::empty();
    let (id, log) = home_with_a_session(&ctx);
    let shown = texts(&ctx.ok(&["session", "show", &id, "--json"]));
    grow_sparse(&log, 2 * GIB);
    let mut f = OpenOptions::new().append(true).open(&log).unwrap();
    let after = serde_json::json!({
        "id": "après-le-trou", "role": "user", "timestamp": 1_768_468_300_000i64,
        "parts": [{"type": "text", "content": "encore là ✓"}]
    });
    writeln!(f).unwrap();
    writeln!(f, "{after}").unwrap();
    drop(f);
    let m = measured(&ctx.cmd(&["session", "show", &id, "--json"]));
    m.report("session show (a 2 GB line, then one more)", 2 * GIB);
    assert_eq!(m.code, Some(0), "{}", m.stderr);
    let mut want = shown;
    want.push("après-le-trou".into());
    assert_eq!(texts(&m.stdout), want);
    assert!(m.stderr.contains("longer than"), "{}", m.stderr);
}

#[test]
fn run_on_a_rollout_log_ending_in_a_2_gb_torn_line_cuts_it_in_place() {
    let ctx = Ctx::empty().without_env("FREECODE_ROLLOUT");
    let (id, _) = home_with_a_session(&ctx);
    let events = ctx
        .home
        .join("rollout/sessions")
        .join(&id)
        .join("events.jsonl");
    let good = std::fs::metadata(&events).unwrap().len();
    let mut f = OpenOptions::new().append(true).open(&events).unwrap();
    f.write_all(br#"{"type":"model.request","id":"cut"#)
        .unwrap();
    drop(f);
    grow_sparse(&events, 2 * GIB);
    let project = ctx.path("projet-été");
    let mut cmd = ctx.cmd(&["run", "-s", &id, "encore une fois"]);
    cmd.current_dir(&project);
    let m = measured(&cmd);
    m.report("run -s", 2 * GIB);
    assert_eq!(m.code, Some(0), "{}", m.stderr);
    let len = std::fs::metadata(&events).unwrap().len();
    assert!(len > good && len < good + (1 << 20), "{good} → {len}");
    // The log reads whole: the second run's events follow the first's.
    let trace: Value = serde_json::from_str(&ctx.ok(&["trace", &id, "--json"])).unwrap();
    assert!(trace.is_object());
    let replay = ctx.ok(&["replay", &id, "--json"]);
    assert!(replay.contains("encore une fois"), "{replay}");
}

#[test]
fn import_of_a_source_ending_in_a_1_gib_torn_line_holds_none_of_it() {
    let ctx = Ctx::empty();
    let src = ctx.path("claude/projects/-srv-app");
    std::fs::create_dir_all(&src).unwrap();
    let fixture =
        freecode_testkit::external_fixtures().join("claude-code/genuine/spotter-short.jsonl");
    let file = src.join("1b0f6b2e-0000-4000-8000-00000000c0de.jsonl");
    std::fs::copy(&fixture, &file).unwrap();
    let mut f = OpenOptions::new().append(true).open(&file).unwrap();
    f.write_all(br#"{"type":"user","message":{"role":"user","content":"coup"#)
        .unwrap();
    drop(f);
    grow_sparse(&file, GIB);
    let m = measured(&ctx.cmd(&["import", "claude-code", src.to_str().unwrap(), "--json"]));
    m.report("import claude-code", GIB);
    assert_eq!(m.code, Some(0), "{}", m.stderr);
    let v: Value = serde_json::from_str(&m.stdout).unwrap();
    assert_eq!(v["summary"]["imported"], 1, "{v}");
    let issues = v["issues"].to_string();
    assert!(issues.contains("incomplete last line"), "{issues}");
}

#[test]
fn the_cap_is_the_one_architecture_states() {
    let arch = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../ARCHITECTURE.md"),
    )
    .unwrap();
    assert_eq!(MAX_LINE_BYTES, 16 << 20);
    assert!(
        arch.contains("16 MiB") && arch.contains("MAX_LINE_BYTES"),
        "ARCHITECTURE.md states the line cap"
    );
}
