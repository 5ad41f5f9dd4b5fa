//! Issue 11's conventions through the real binary: no panic on any input (Unicode prompts,
//! huge durations), a closed stdout ends quietly with 0, exit codes as the README states,
//! reading never changes (or creates) a home; and the conventions people expect of a
//! command-line tool: completions and manual pages, `--color`, `-q`/`-v`, id prefixes,
//! `session rename`/`archive`, listing options, `--project` by path, `run -`, and `--since`
//! words.

use crate::common;

use crate::common::{Ctx, copy_tree, fixtures};

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use proptest::prelude::*;
use serde_json::Value;

const S1: &str = "68d44408-94df-4f2f-ae2e-ffffdb68e297";

impl Ctx {
    /// A new, existing, empty home and an empty project directory beside it; the scripted
    /// provider answers at once, and the rollout is recorded.
    fn with_project() -> Self {
        let ctx = Self::empty()
            .without_env("FREECODE_ROLLOUT")
            .with_env("FREECODE_SCRIPTED_DELAY_MS", "0");
        std::fs::create_dir(ctx.project_dir()).unwrap();
        std::fs::write(ctx.project_dir().join("README.md"), "# ünïcödé 项目\n").unwrap();
        ctx
    }

    /// [`Ctx::with_project`] with the reference home.
    fn fixture_with_project() -> Self {
        let ctx = Self::with_project();
        std::fs::remove_dir(&ctx.home).unwrap();
        copy_tree(&fixtures().join("home/.freecode"), &ctx.home);
        ctx
    }

    fn project_dir(&self) -> PathBuf {
        self.path("project")
    }

    /// The stdout of `freecode args` on the thread-store `backend`, as JSON.
    fn stdout_json_on(&self, backend: &str, args: &[&str]) -> Value {
        let out = self
            .cmd(args)
            .env("FREECODE_THREAD_STORE", backend)
            .output()
            .unwrap();
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{args:?} on {backend}: stdout is not JSON ({e})"))
    }

    /// A new session of `project` after one scripted turn on `prompt`; its id.
    fn new_session(&self, project: &std::path::Path, prompt: &str) -> String {
        let out = self.ok(&[
            "run",
            "--project",
            project.to_str().unwrap(),
            "--json",
            prompt,
        ]);
        let v: Value = serde_json::from_str(&out).unwrap();
        v["sessionId"].as_str().unwrap().to_owned()
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
fn run_then_read(h: &Ctx, prompt: &str) -> String {
    let project = h.project_dir();
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
    let h = Ctx::with_project();
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
    let project = h.project_dir();
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
        let h = Ctx::with_project();
        run_then_read(&h, &prompt);
    }
}

#[test]
fn a_huge_stall_timeout_is_a_user_error() {
    let h = Ctx::with_project();
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
fn into_closed_pipe(h: &Ctx, args: &[&str]) -> Output {
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
    let h = Ctx::fixture_with_project();
    let demo_home = h.tmp.path().join("demo-home");
    let project = h.project_dir();
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
        &["trace", "--list"],
        &["trace", S1, "--no-pager"],
        &["replay", S1],
        &["search", "dark"],
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
    let h = Ctx::fixture_with_project();
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
    let h = Ctx::fixture_with_project();
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
    let h = Ctx::fixture_with_project();
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
    let h = Ctx::with_project();
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

// The conventions of a command-line tool.

#[test]
fn bash_completion_parses_and_names_the_subcommands() {
    let ctx = Ctx::fixture();
    let script = ctx.ok(&["completions", "bash"]);
    for word in [
        "session",
        "trace",
        "search",
        "completions",
        "rename",
        "archive",
    ] {
        assert!(script.contains(word), "{word} missing");
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("freecode.bash");
    std::fs::write(&path, &script).unwrap();
    let check = Command::new("bash").arg("-n").arg(&path).output().unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
    // Tried as bash tries it: the completion function, sourced, completes words.
    let complete = |words: &str, cword: usize| {
        let out = Command::new("bash")
            .arg("-c")
            .arg(format!(
                "source {}; COMP_WORDS=({words}); COMP_CWORD={cword}; \
                 _freecode freecode \"${{COMP_WORDS[$COMP_CWORD]}}\" \"${{COMP_WORDS[$COMP_CWORD-1]}}\"; \
                 echo \"${{COMPREPLY[@]}}\"",
                path.display()
            ))
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    };
    assert_eq!(complete("freecode ses", 1), "session");
    assert_eq!(complete("freecode session re", 2), "restore rename");
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        assert!(
            ctx.ok(&["completions", shell]).contains("session"),
            "{shell}"
        );
    }
    ctx.cmd(&["completions", "tcsh"])
        .output()
        .map(|o| assert_eq!(o.status.code(), Some(2), "clap's usage error"))
        .unwrap();
}

#[test]
fn man_pages_one_per_command_and_they_render() {
    let ctx = Ctx::fixture();
    let root = ctx.ok(&["man"]);
    assert!(root.contains(".TH freecode 1"), "{root}");
    let dir = tempfile::tempdir().unwrap();
    let out = ctx.run(&["man", "--dir", dir.path().to_str().unwrap()]);
    assert!(out.status.success());
    assert!(out.stdout.is_empty(), "stdout stays empty");
    let list = dir.path().join("freecode-session-list.1");
    let page = std::fs::read_to_string(&list).unwrap();
    assert!(page.contains(".TH freecode-session-list 1"));
    assert!(dir.path().join("freecode-session-rename.1").is_file());
    assert!(dir.path().join("freecode.1").is_file());
    let have_man = Command::new("man").arg("--version").output().is_ok();
    if have_man {
        let r = Command::new("man")
            .arg("-l")
            .arg(&list)
            .env("MANPAGER", "cat")
            .env("PAGER", "cat")
            .output()
            .unwrap();
        assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
        let text = String::from_utf8_lossy(&r.stdout);
        assert!(text.contains("NAME") && text.contains("--limit"), "{text}");
    }
    let missing = dir.path().join("nope");
    let err = ctx.fails(&["man", "--dir", missing.to_str().unwrap()]);
    assert!(err.contains("not a directory"), "{err}");
}

#[test]
fn color_flag_and_force_variables() {
    let ctx = Ctx::fixture();
    let esc = |o: Output| String::from_utf8(o.stdout).unwrap().contains('\x1b');
    // The launcher sets NO_COLOR and stdout is a pipe: plain.
    assert!(!esc(ctx.run(&["session", "list"])));
    assert!(esc(ctx.run(&["--color", "always", "session", "list"])));
    assert!(
        esc(ctx.run(&["session", "list", "--color=always"])),
        "global"
    );
    for var in ["CLICOLOR_FORCE", "FORCE_COLOR"] {
        let forced = ctx
            .cmd(&["session", "list"])
            .env_remove("NO_COLOR")
            .env(var, "1")
            .output()
            .unwrap();
        assert!(esc(forced), "{var}");
        let zero = ctx
            .cmd(&["session", "list"])
            .env_remove("NO_COLOR")
            .env(var, "0")
            .output()
            .unwrap();
        assert!(!esc(zero), "{var}=0");
        let never = ctx
            .cmd(&["--color", "never", "session", "list"])
            .env_remove("NO_COLOR")
            .env(var, "1")
            .output()
            .unwrap();
        assert!(!esc(never), "--color never beats {var}");
    }
    let both = ctx
        .cmd(&["session", "list"])
        .env("FORCE_COLOR", "1")
        .output()
        .unwrap();
    assert!(!esc(both), "NO_COLOR wins under auto");
    let bad = ctx.run(&["--color", "sometimes", "session", "list"]);
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn quiet_and_verbose_set_the_log_level() {
    let ctx = Ctx::fixture();
    let err = |args: &[&str]| {
        String::from_utf8(
            ctx.cmd(args)
                .env("FREECODE_THREAD_STORE", "json")
                .output()
                .unwrap()
                .stderr,
        )
        .unwrap()
    };
    // The JSON backend is logged at info: hidden by default, shown with -v, not with -q.
    assert!(!err(&["session", "list"]).contains("INFO"));
    assert!(err(&["-v", "session", "list"]).contains("INFO"));
    assert!(err(&["session", "list", "-vv"]).contains("INFO"));
    let quiet = ctx
        .cmd(&["-q", "session", "list"])
        .env("FREECODE_THREAD_STORE", "json")
        .env("FREECODE_LOG", "info")
        .output()
        .unwrap();
    assert!(quiet.status.success());
    assert!(
        String::from_utf8(quiet.stderr).unwrap().is_empty(),
        "-q beats FREECODE_LOG"
    );
    assert_eq!(
        ctx.run(&["-q", "-v", "session", "list"]).status.code(),
        Some(2)
    );
}

#[test]
fn any_unique_id_prefix_works_and_an_ambiguous_one_lists_candidates() {
    let ctx = Ctx::fixture();
    // 68d44408-… is the only id starting with "68": show, stats, trace, replay, export take it.
    let shown = ctx.json(&["session", "show", "68d4", "--json"]);
    assert_eq!(shown["id"], S1);
    assert_eq!(
        ctx.json(&["stats", "68d", "--json"]),
        ctx.json(&["stats", S1, "--json"])
    );
    assert_eq!(
        ctx.json(&["replay", "68", "--json"]),
        ctx.json(&["replay", S1, "--json"])
    );
    // (A trace ages its hung request by the clock: compare what does not move.)
    let trace = ctx.json(&["trace", "68d44", "--json"]);
    assert_eq!(trace["sessionId"], S1);
    assert_eq!(
        trace["toolSpans"],
        ctx.json(&["trace", S1, "--json"])["toolSpans"]
    );
    let dry = ctx.ok(&["session", "export", "68d4", "--dry-run", "--file"]);
    assert!(!dry.is_empty());
    // A prefix of several (2b0084fa… and 20bab6d3… both start with "2"): exit 1, both named.
    let err = ctx.fails(&["session", "show", "2"]);
    assert!(
        err.contains("ambiguous")
            && err.contains("2b0084fa-74c0-4e03-a6d9-7e1128df064c")
            && err.contains("20bab6d3-c705-4616-a1dc-b9be1414f01e"),
        "{err}"
    );
    let err = ctx.fails(&["trace", "2"]);
    assert!(err.contains("ambiguous"), "{err}");
    // Many candidates: the first ten, then a count.
    let base = ctx.home.join("sessions/home__dev__many");
    for i in 0..12 {
        let id = format!("cccccccc-0000-4000-8000-{i:012}");
        let src = ctx
            .home
            .join(format!("sessions/home__dev__projects__my_h_app/{S1}"));
        copy_tree(&src, &base.join(&id));
        let meta = base.join(&id).join("meta.json");
        let text = std::fs::read_to_string(&meta).unwrap().replace(S1, &id);
        std::fs::write(&meta, text).unwrap();
    }
    let err = ctx.fails(&["session", "show", "cccc"]);
    assert!(
        err.contains("cccccccc-0000-4000-8000-000000000009 and 2 more")
            && !err.contains("000000000010"),
        "{err}"
    );
    // No match: not found, exit 1; an invalid one is still refused as an id.
    assert!(
        ctx.fails(&["session", "show", "ffff"])
            .contains("not found")
    );
    ctx.fails(&["session", "show", "../etc"]);
    // A prefix resumes a session in `run --session`.
    let project = tempfile::tempdir().unwrap();
    let id = ctx.new_session(project.path(), "hello");
    let out = ctx.ok(&["run", "--session", &id[..12], "--json", "again"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["sessionId"], id.as_str());
}

#[test]
fn rename_and_archive() {
    let ctx = Ctx::fixture();
    let out = ctx.ok(&["session", "rename", "68d4", "Dark mode, second try"]);
    assert!(out.contains(S1), "{out}");
    let meta = ctx.json(&["session", "show", S1, "--json"]);
    assert_eq!(meta["title"], "Dark mode, second try");
    let renamed = ctx.json(&["session", "rename", S1, "  Trimmed  ", "--json"]);
    assert_eq!(renamed["title"], "Trimmed");
    assert!(
        ctx.fails(&["session", "rename", S1, "  "])
            .contains("empty")
    );

    ctx.ok(&["session", "archive", "68d4"]);
    let archived = ctx.json(&["session", "list", "--status", "archived", "--json"]);
    assert!(archived.as_array().unwrap().iter().any(|m| m["id"] == S1));
    ctx.ok(&["session", "restore", "68d4"]);
    assert_eq!(
        ctx.json(&["session", "show", S1, "--json"])["status"],
        "active"
    );
    assert!(
        ctx.fails(&["session", "archive", "ffff"])
            .contains("not found")
    );
}

fn ids(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn list_limit_sort_and_since() {
    let ctx = Ctx::fixture();
    let all = ctx.json(&["session", "list", "--json"]);
    let n = all.as_array().unwrap().len();
    assert!(n > 3);
    let two = ctx.json(&["session", "list", "--limit", "2", "--json"]);
    assert_eq!(ids(&two), ids(&all)[..2].to_vec(), "newest activity first");
    assert!(ids(&ctx.json(&["session", "list", "--limit", "0", "--json"])).is_empty());

    let created = ctx.json(&["session", "list", "--sort", "created", "--json"]);
    let at: Vec<i64> = created
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["createdAt"].as_i64().unwrap())
        .collect();
    assert!(at.windows(2).all(|w| w[0] >= w[1]), "{at:?}");
    assert_eq!(at.len(), n);
    let titled = ctx.json(&["session", "list", "--sort", "title", "--json"]);
    let titles: Vec<String> = titled
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["title"].as_str().unwrap().to_lowercase())
        .collect();
    assert!(titles.windows(2).all(|w| w[0] <= w[1]), "{titles:?}");
    assert_eq!(
        ctx.run(&["session", "list", "--sort", "size"])
            .status
            .code(),
        Some(2)
    );

    // The fixtures are from January 2026: all since 2026-01-01, none since a week ago, until a
    // turn runs in one (now).
    let since = ctx.json(&["session", "list", "--since", "2026-01-01", "--json"]);
    assert_eq!(ids(&since), ids(&all));
    assert!(ids(&ctx.json(&["session", "list", "--since", "1w", "--json"])).is_empty());
    let project = tempfile::tempdir().unwrap();
    let new = ctx.new_session(project.path(), "hello there");
    for word in ["today", "yesterday", "3d", "12h", "1w", "Today"] {
        let recent = ctx.json(&["session", "list", "--since", word, "--json"]);
        assert_eq!(ids(&recent), vec![new.clone()], "{word}");
    }
    let err = ctx.fails(&["session", "list", "--since", "9999-12-31"]);
    assert!(err.contains("future"), "{err}");
    let err = ctx.fails(&["session", "list", "--since", "last tuesday"]);
    assert!(err.contains("expected a date"), "{err}");
    // One parser: search takes the same words.
    let hits = ctx.json(&["search", "hello", "--since", "today", "--json"]);
    assert!(!hits.as_array().unwrap().is_empty());
    // No match: `[]` and exit 1, as grep and rg.
    let none = ctx.run(&["search", "dark", "--since", "yesterday", "--json"]);
    assert_eq!(
        none.status.code(),
        Some(1),
        "the fixtures' dark-mode messages are from January"
    );
    assert_eq!(String::from_utf8_lossy(&none.stdout).trim(), "[]");
    assert!(
        !ctx.json(&["search", "dark", "--since", "2026-01-01", "--json"])
            .as_array()
            .unwrap()
            .is_empty()
    );
    ctx.fails(&["search", "dark", "--since", "9999-12-31"]);
    // --until: the messages before it, by their own time; a date counts its whole day.
    let january = ctx.json(&["search", "dark", "--until", "2026-01-31", "--json"]);
    assert!(!january.as_array().unwrap().is_empty());
    let sessions = |hits: &Value| -> Vec<String> {
        hits.as_array()
            .unwrap()
            .iter()
            .map(|h| h["sessionId"].as_str().unwrap().to_owned())
            .collect()
    };
    // "hello": the new session (now) and a fixture's (January).
    let hello = ctx.json(&["search", "hello", "--json"]);
    let all = sessions(&hello);
    assert!(all.contains(&new) && all.len() > 1, "{hello:#}");
    let at = hello
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["sessionId"] == new.as_str())
        .unwrap()["timestamp"]
        .as_i64()
        .unwrap();
    let before = sessions(&ctx.json(&["search", "hello", "--until", "2026-01-31", "--json"]));
    assert!(!before.is_empty() && !before.contains(&new), "{before:?}");
    let day = |ms: i64| {
        jiff::Timestamp::from_millisecond(ms)
            .unwrap()
            .to_zoned(jiff::tz::TimeZone::system())
            .date()
            .to_string()
    };
    let today = day(at);
    let that_day = ctx.json(&[
        "search", "hello", "--since", &today, "--until", &today, "--json",
    ]);
    assert_eq!(sessions(&that_day), vec![new.clone()]);
    let err = ctx.fails(&["search", "dark", "--until", "next tuesday"]);
    assert!(
        err.contains("--until") && err.contains("expected a date"),
        "{err}"
    );
}

#[test]
fn project_matches_the_path_or_below_it_never_a_longer_name() {
    let ctx = Ctx::fixture();
    let work = tempfile::tempdir().unwrap();
    let dirs = ["proj1", "proj10", "proj1/api", "proj19"];
    let mut by_dir = std::collections::BTreeMap::new();
    for d in dirs {
        let dir = work.path().join(d);
        std::fs::create_dir_all(&dir).unwrap();
        by_dir.insert(d, ctx.new_session(&dir, "remember the zebra"));
    }
    let proj1 = work.path().join("proj1");
    let p = proj1.to_str().unwrap();
    let mut want = vec![by_dir["proj1"].clone(), by_dir["proj1/api"].clone()];
    want.sort();
    for arg in [p.to_owned(), format!("{p}/")] {
        let mut got = ids(&ctx.json(&["session", "list", "--project", &arg, "--json"]));
        got.sort();
        assert_eq!(got, want, "{arg}");
    }
    // A relative path is taken from the current directory.
    let mut got: Vec<String> = serde_json::from_str::<Value>(
        &String::from_utf8(
            ctx.cmd(&["session", "list", "--project", "proj1", "--json"])
                .current_dir(work.path())
                .output()
                .unwrap()
                .stdout,
        )
        .unwrap(),
    )
    .map(|v| ids(&v))
    .unwrap();
    got.sort();
    assert_eq!(got, want);
    // Search and stats, on the index and on the file scan, agree.
    for backend in ["sqlite", "json"] {
        let hits = ctx.stdout_json_on(backend, &["search", "zebra", "--project", p, "--json"]);
        let mut sessions: Vec<String> = hits
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["sessionId"].as_str().unwrap().to_owned())
            .collect();
        sessions.sort();
        sessions.dedup();
        assert_eq!(sessions, want, "search on {backend}");
        let stats = ctx.stdout_json_on(backend, &["stats", "--project", p, "--json"]);
        assert_eq!(stats["sessions"], 2, "stats on {backend}: {stats}");
    }
    // The original's Windows paths split on backslashes.
    let win = ctx.json(&["session", "list", "--project", r"C:\Users\john", "--json"]);
    assert_eq!(
        ids(&win),
        vec!["85d6fcfb-e474-4660-9ed2-33698a9bf584".to_owned()]
    );
    assert!(ids(&ctx.json(&["session", "list", "--project", r"C:\Users\jo", "--json"])).is_empty());
}

#[test]
fn run_reads_the_prompt_from_stdin_and_refuses_an_empty_one() {
    let ctx = Ctx::fixture();
    let mut child = ctx
        .cmd(&["run", "--json", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"a prompt from a pipe: find the walrus\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let id = v["sessionId"].as_str().unwrap();
    let shown = ctx.json(&["session", "show", id, "--json"]);
    let first = &shown["messages"][0]["parts"][0]["content"];
    assert!(
        first.as_str().unwrap().contains("find the walrus"),
        "{shown}"
    );

    let before = ids(&ctx.json(&["session", "list", "--all", "--json"])).len();
    for args in [&["run", ""][..], &["run", "   "][..], &["run", "-"][..]] {
        // stdin is /dev/null for `-`: empty.
        let err = ctx.fails(args);
        assert!(err.contains("prompt is empty"), "{args:?}: {err}");
    }
    assert_eq!(
        ids(&ctx.json(&["session", "list", "--all", "--json"])).len(),
        before,
        "no session was created for an empty prompt"
    );
}
