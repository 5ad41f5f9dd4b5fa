//! Snapshots of what a user reads: every read command's human and `--json` output on a private
//! copy of the reference home, with the temporary paths and anything the wall clock moves
//! replaced. The stored snapshots are in `tests/snapshots/`; `INSTA_UPDATE=always cargo test
//! --test snapshots` rewrites them (read the diff), and CI (`CI=true`) fails on any change.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::Ctx;

/// Session ids of the reference home.
const S1: &str = "68d44408-94df-4f2f-ae2e-ffffdb68e297";
const S3: &str = "16aa3e15-f2e4-4fc5-bf70-a0962a62c733";

impl Ctx {
    /// Runs `freecode args` and returns what a user sees: stdout, then stderr and the exit code
    /// when they are not the quiet success, with the temporary paths replaced by `[HOME]`/`[TMP]`.
    fn seen(&self, args: &[&str]) -> String {
        let out = self.run(args);
        let code = out.status.code().unwrap_or(-1);
        let mut s = String::from_utf8(out.stdout).unwrap();
        let err = String::from_utf8(out.stderr).unwrap();
        if !err.is_empty() || code != 0 {
            s.push_str(&format!("----- stderr (exit {code}) -----\n{err}"));
        }
        // Longest first: the home is inside the temporary directory.
        let home = self.home.to_str().unwrap();
        let tmp = self.tmp.path().to_str().unwrap();
        s.replace(home, "[HOME]").replace(tmp, "[TMP]")
    }
}

/// Relative ages ("3h ago", "2mo ago", "just now") shift with the clock; the fixture's dates are
/// old enough to print as dates today, but a snapshot must not depend on it.
fn settings() -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    s.set_prepend_module_to_snapshot(false);
    s.add_filter(r"\b\d+(s|m|h|d|w|mo|y) ago\b", "[AGO]");
    s.add_filter(r"\bjust now\b", "[AGO]");
    s
}

fn snap(name: &str, ctx: &Ctx, args: &[&str]) {
    let out = ctx.seen(args);
    let mut s = settings();
    s.set_description(args.join(" "));
    s.bind(|| insta::assert_snapshot!(name, out));
}

#[test]
fn session_list() {
    let ctx = Ctx::fixture();
    snap("session_list", &ctx, &["session", "list"]);
    snap("session_list_json", &ctx, &["session", "list", "--json"]);
    snap("session_list_all", &ctx, &["session", "list", "--all"]);
}

#[test]
fn session_show() {
    let ctx = Ctx::fixture();
    snap("session_show", &ctx, &["session", "show", S1]);
    snap(
        "session_show_json",
        &ctx,
        &["session", "show", S1, "--json"],
    );
}

#[test]
fn trace() {
    let ctx = Ctx::fixture();
    snap("trace_list", &ctx, &["trace", "--list"]);
    snap("trace_list_json", &ctx, &["trace", "--list", "--json"]);
    // A closed session: every duration is in the log.
    snap("trace", &ctx, &["trace", S3]);
    snap("trace_json", &ctx, &["trace", S3, "--json"]);
    // One whose last request never closed, long ago: nothing is timed to now (the clock
    // moves nothing here), the request shows as open since its start.
    snap("trace_hung", &ctx, &["trace", S1]);
    snap("trace_hung_json", &ctx, &["trace", S1, "--json"]);
}

#[test]
fn replay() {
    let ctx = Ctx::fixture();
    snap("replay", &ctx, &["replay", S1]);
    snap("replay_json", &ctx, &["replay", S1, "--json"]);
}

#[test]
fn search() {
    let ctx = Ctx::fixture();
    snap("search", &ctx, &["search", "toggle"]);
    snap("search_json", &ctx, &["search", "toggle", "--json"]);
}

#[test]
fn stats() {
    let ctx = Ctx::fixture();
    snap("stats", &ctx, &["stats"]);
    snap("stats_json", &ctx, &["stats", "--json"]);
    snap("stats_session", &ctx, &["stats", S3]);
}

#[test]
fn doctor() {
    let ctx = Ctx::fixture();
    snap("doctor_json", &ctx, &["doctor", "--json"]);
}

#[test]
fn config_list() {
    let ctx = Ctx::fixture();
    snap("config_list", &ctx, &["config", "list"]);
}

#[test]
fn export_dry_run() {
    let ctx = Ctx::fixture();
    snap(
        "session_export_dry_run",
        &ctx,
        &["session", "export", S1, "--dry-run", "--file"],
    );
}

#[test]
fn share_list() {
    let ctx = Ctx::fixture();
    snap("share_list", &ctx, &["share", "list"]);
    snap("share_list_json", &ctx, &["share", "list", "--json"]);
}

#[test]
fn help() {
    let ctx = Ctx::fixture();
    snap("help", &ctx, &["--help"]);
    snap("session_help", &ctx, &["session", "--help"]);
}
