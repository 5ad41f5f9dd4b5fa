//! Issue 11's conventions through the real binary: no panic on any input (Unicode prompts,
//! huge durations), a closed stdout ends quietly with 0, exit codes as the README states, and
//! reading never changes (or creates) a home.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use proptest::prelude::*;
use serde_json::Value;

const S1: &str = "68d44408-94df-4f2f-ae2e-ffffdb68e297";

struct Home {
    tmp: tempfile::TempDir,
    home: PathBuf,
}

impl Home {
    /// A new, existing, empty home and an empty project directory beside it.
    fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("h");
        std::fs::create_dir(&home).unwrap();
        std::fs::create_dir(tmp.path().join("project")).unwrap();
        std::fs::write(tmp.path().join("project/README.md"), "# ünïcödé 项目\n").unwrap();
        Self { tmp, home }
    }

    fn fixture() -> Self {
        let h = Self::new();
        std::fs::remove_dir(&h.home).unwrap();
        common::copy_tree(&common::fixtures().join("home/.freecode"), &h.home);
        h
    }

    fn project(&self) -> PathBuf {
        self.tmp.path().join("project")
    }

    fn cmd(&self, args: &[&str]) -> std::process::Command {
        let mut c = common::freecode(&self.home);
        c.args(args)
            .env_remove("FREECODE_ROLLOUT")
            .env("FREECODE_SCRIPTED_DELAY_MS", "0");
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().unwrap()
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Exits with `code`, never a panic (101), with nothing like a panic on stderr.
fn assert_exit(out: &Output, code: i32, what: &str) {
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{what}: {err}");
    assert!(!err.contains("panicked"), "{what}: {err}");
}

/// `run PROMPT` in `h`, then every reader of what it made; returns the new session's id.
fn run_then_read(h: &Home, prompt: &str) -> String {
    let project = h.project();
    let out = h.run(&[
        "run",
        "--project",
        project.to_str().unwrap(),
        "--json",
        prompt,
    ]);
    assert_exit(&out, 0, &format!("run {prompt:?}"));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let id = v["sessionId"].as_str().unwrap().to_owned();
    for args in [
        vec!["session", "show", &id],
        vec!["session", "show", &id, "--json"],
        vec!["session", "list"],
        vec!["search", prompt],
        vec!["search", prompt, "--json"],
        vec!["trace", &id],
        vec!["trace", &id, "--json"],
        vec!["replay", &id],
        vec!["replay", &id, "--json"],
    ] {
        let out = h.run(&args);
        // A prompt of only punctuation has no search term: a user error, never a panic.
        let code = if args[0] == "search" {
            out.status.code().unwrap_or(101).min(1)
        } else {
            0
        };
        assert_exit(&out, code, &format!("{args:?} after {prompt:?}"));
    }
    id
}

#[test]
fn chinese_and_russian_prompts_run_and_read_back() {
    let h = Home::new();
    for prompt in [
        "这个项目是做什么的？请详细解释",
        "Пожалуйста, объясни этот проект подробно",
    ] {
        let id = run_then_read(&h, prompt);
        let show = h.run(&["session", "show", &id, "--json"]);
        assert!(text(&show.stdout).contains(prompt));
        // The turn ended: no request left open in the trace.
        let trace: Value =
            serde_json::from_slice(&h.run(&["trace", &id, "--json"]).stdout).unwrap();
        assert!(!text(&serde_json::to_vec(&trace).unwrap()).contains("\"hung\":true"));
    }
    let project = h.project();
    let out = h
        .cmd(&[
            "demo",
            "--project",
            project.to_str().unwrap(),
            "这个项目是做什么的？请详细解释",
        ])
        .arg("--home")
        .arg(h.tmp.path().join("demo-home"))
        .output()
        .unwrap();
    assert_exit(&out, 0, "demo with a Chinese prompt");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, .. ProptestConfig::default() })]

    /// Arbitrary Unicode as the prompt (which the scripted agent quotes into its tool arguments,
    /// its answer and the session's title), through run, show, search, trace and replay.
    #[test]
    fn any_unicode_prompt_never_panics(prompt in "\\PC{1,40}") {
        prop_assume!(!prompt.starts_with('-') && !prompt.trim().is_empty());
        let h = Home::new();
        run_then_read(&h, &prompt);
    }
}

#[test]
fn a_huge_stall_timeout_is_a_user_error() {
    let h = Home::new();
    for t in ["18446744073709551615", "1e19", "604801"] {
        let out = h.run(&["run", "--stall-timeout", t, "hi"]);
        assert_exit(&out, 1, t);
        assert!(text(&out.stderr).contains("at most 604800 seconds"), "{t}");
    }
    let out = h
        .cmd(&["run", "hi"])
        .env("FREECODE_STALL_TIMEOUT_MS", "18446744073709551615")
        .output()
        .unwrap();
    assert_exit(&out, 1, "FREECODE_STALL_TIMEOUT_MS");
}

/// `args` with stdout a pipe whose reader is already gone: every write is a broken pipe.
fn into_closed_pipe(h: &Home, args: &[&str]) -> Output {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let child = h
        .cmd(args)
        .stdout(Stdio::from(writer))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn a_closed_stdout_ends_every_command_quietly_with_0() {
    let h = Home::fixture();
    let demo_home = h.tmp.path().join("demo-home");
    let project = h.project();
    let demo = [
        "--home",
        demo_home.to_str().unwrap(),
        "demo",
        "--project",
        project.to_str().unwrap(),
    ];
    for args in [
        &demo[..],
        &["session", "list"],
        &["session", "list", "--json"],
        &["session", "show", S1],
        &["session", "show", S1, "--json"],
        &["search", "dark", "--json"],
        &["stats", "--json"],
        &["trace", "--list", "--json"],
        &["session", "fork", S1],
    ] {
        let out = into_closed_pipe(&h, args);
        assert_exit(&out, 0, &format!("{args:?}"));
        assert!(
            !text(&out.stderr).contains("Broken pipe"),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
}

#[test]
fn a_successful_compaction_warns_about_no_crash() {
    let h = Home::fixture();
    let summary = h.tmp.path().join("summary.txt");
    std::fs::write(&summary, "earlier: planned").unwrap();
    let out = h.run(&[
        "session",
        "compact",
        S1,
        "--keep",
        "1",
        "--summary-file",
        summary.to_str().unwrap(),
    ]);
    assert_exit(&out, 0, "compact");
    assert!(
        !text(&out.stderr).contains("crash"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_session_without_a_log_is_a_user_error_with_nothing_on_stdout() {
    let h = Home::fixture();
    for args in [
        &["trace", "nope"][..],
        &["trace", "nope", "--json"],
        &["trace", "nope", "--follow"],
        &["replay", "nope"],
        &["replay", "nope", "--json"],
    ] {
        let out = h.run(args);
        assert_exit(&out, 1, &format!("{args:?}"));
        assert_eq!(text(&out.stdout), "", "{args:?}");
        // An id that names no session and no log: a user error naming it.
        let err = text(&out.stderr);
        assert!(
            err.contains("No recorded events for session nope")
                || err.contains("session not found: nope"),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn user_errors_exit_1() {
    let h = Home::fixture();
    let missing = h.tmp.path().join("missing");
    let missing = missing.to_str().unwrap();
    let out = h.run(&[
        "session",
        "compact",
        S1,
        "--keep",
        "1",
        "--summary-file",
        missing,
    ]);
    assert_exit(&out, 1, "missing --summary-file");
    let out = h.run(&["session", "import", missing]);
    assert_exit(&out, 1, "missing import file");

    // A corrupt meta.json is named, for the user to repair.
    let meta = h
        .home
        .join("sessions/home__dev__projects__my_h_app")
        .join(S1)
        .join("meta.json");
    std::fs::write(&meta, "{ not json").unwrap();
    let out = h.run(&["session", "show", S1]);
    assert_exit(&out, 1, "corrupt meta.json");

    // A port in use: said once.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = h.run(&["sync", "serve", "--listen", &addr]);
    assert_exit(&out, 1, "port in use");
    let err = text(&out.stderr);
    assert_eq!(err.matches("in use").count(), 1, "{err}");
}

fn tree(p: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(p).unwrap() {
        let e = e.unwrap();
        out.push(e.path());
        if e.file_type().unwrap().is_dir() {
            out.extend(tree(&e.path()));
        }
    }
    out.sort();
    out
}

#[test]
fn a_read_command_on_a_missing_home_is_an_error_and_creates_nothing() {
    let h = Home::new();
    let typo = h.tmp.path().join("typo");
    for args in [
        &["session", "list"][..],
        &["session", "list", "--json"],
        &["session", "show", S1],
        &["search", "x", "--json"],
        &["stats"],
        &["trace", "--list"],
        &["replay", S1],
        &["share", "list"],
        &["index", "rebuild"],
    ] {
        let out = common::freecode(&h.home)
            .arg("--home")
            .arg(&typo)
            .args(args)
            .output()
            .unwrap();
        assert_exit(&out, 1, &format!("{args:?}"));
        let err = text(&out.stderr);
        assert!(
            err.contains(&format!("no freecode home at {}", typo.display())),
            "{err}"
        );
        assert!(err.contains("freecode run"), "{err}");
        assert_eq!(text(&out.stdout), "", "{args:?}");
        assert!(!typo.exists(), "{args:?} created {}", typo.display());
    }
    // An existing empty home reads as empty; reading adds no `sessions/` (the index may go
    // into `state/`, nothing else).
    for args in [
        &["session", "list", "--json"][..],
        &["search", "x", "--json"],
        &["trace", "--list", "--json"],
    ] {
        let out = h.run(args);
        // A search that finds nothing exits 1, as grep does; the others succeed.
        let code = if args[0] == "search" { 1 } else { 0 };
        assert_exit(&out, code, &format!("{args:?} on an empty home"));
        let outside_state: Vec<_> = tree(&h.home)
            .into_iter()
            .filter(|p| !p.starts_with(h.home.join("state")))
            .collect();
        assert_eq!(outside_state, Vec::<PathBuf>::new(), "{args:?}");
    }
}
