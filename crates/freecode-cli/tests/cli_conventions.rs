//! The conventions people expect of a command-line tool, through the real binary: completions
//! and manual pages, `--color`, `-q`/`-v`, id prefixes, `session rename`/`archive`, listing
//! options, `--project` by path, `run -`, and `--since` words.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{copy_tree, fixtures};

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

struct Ctx {
    _tmp: tempfile::TempDir,
    home: PathBuf,
}

impl Ctx {
    fn fixture_home() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join(".freecode");
        copy_tree(&fixtures().join("home/.freecode"), &home);
        Self { _tmp: tmp, home }
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = common::freecode(&self.home);
        c.args(args);
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().unwrap()
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    fn fails(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stderr).unwrap()
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

    fn json(&self, args: &[&str]) -> Value {
        serde_json::from_str(&self.ok(args)).unwrap()
    }
}

const S1: &str = "68d44408-94df-4f2f-ae2e-ffffdb68e297";

#[test]
fn bash_completion_parses_and_names_the_subcommands() {
    let ctx = Ctx::fixture_home();
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
    let ctx = Ctx::fixture_home();
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
    let ctx = Ctx::fixture_home();
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
    let ctx = Ctx::fixture_home();
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
    let ctx = Ctx::fixture_home();
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
    let ctx = Ctx::fixture_home();
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
    let ctx = Ctx::fixture_home();
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
}

#[test]
fn project_matches_the_path_or_below_it_never_a_longer_name() {
    let ctx = Ctx::fixture_home();
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
        let hits: Value = serde_json::from_str(
            &String::from_utf8(
                ctx.cmd(&["search", "zebra", "--project", p, "--json"])
                    .env("FREECODE_THREAD_STORE", backend)
                    .output()
                    .unwrap()
                    .stdout,
            )
            .unwrap(),
        )
        .unwrap();
        let mut sessions: Vec<String> = hits
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["sessionId"].as_str().unwrap().to_owned())
            .collect();
        sessions.sort();
        sessions.dedup();
        assert_eq!(sessions, want, "search on {backend}");
        let stats: Value = serde_json::from_str(
            &String::from_utf8(
                ctx.cmd(&["stats", "--project", p, "--json"])
                    .env("FREECODE_THREAD_STORE", backend)
                    .output()
                    .unwrap()
                    .stdout,
            )
            .unwrap(),
        )
        .unwrap();
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
    let ctx = Ctx::fixture_home();
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
