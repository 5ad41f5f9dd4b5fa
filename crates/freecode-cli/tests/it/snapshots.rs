//! Snapshots of what a user reads: every read command's human and `--json` output on a private
//! copy of the reference home, with the temporary paths and anything the wall clock moves
//! replaced. The stored snapshots are in `tests/it/snapshots/`; `INSTA_UPDATE=always cargo test
//! -p freecode-cli --test it snapshots::` rewrites them (read the diff), and CI (`CI=true`) fails on any change.

use crate::common;

use crate::common::Ctx;

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
    snap(
        "session_show_page",
        &ctx,
        &["session", "show", S1, "--offset", "1", "--limit", "2"],
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

/// What a write prints is read too: the new ids and the times of this run are replaced
/// (`[NEW:n]` for the n-th new id seen, `[NOW]` for a millisecond time of this run,
/// `[TODAY]` for its date).
fn snap_write(name: &str, ctx: &Ctx, args: &[&str], new_ids: &mut Vec<String>, start_ms: i64) {
    let mut out = ctx.seen(args);
    let uuid = regex_lite_uuids(&out);
    for id in uuid {
        if !ctx.fixture_ids().contains(&id) && !new_ids.contains(&id) {
            new_ids.push(id);
        }
    }
    for (n, id) in new_ids.iter().enumerate() {
        out = out.replace(id.as_str(), &format!("[NEW:{n}]"));
    }
    // Millisecond times at or after the run's start are this run's.
    let mut cleaned = String::with_capacity(out.len());
    let mut digits = String::new();
    let flush = |digits: &mut String, cleaned: &mut String| {
        match digits.parse::<i64>() {
            Ok(v) if digits.len() == 13 && v >= start_ms => cleaned.push_str("[NOW]"),
            _ => cleaned.push_str(digits),
        }
        digits.clear();
    };
    for c in out.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
        } else {
            flush(&mut digits, &mut cleaned);
            cleaned.push(c);
        }
    }
    flush(&mut digits, &mut cleaned);
    let today = time_today();
    let cleaned = cleaned.replace(&today, "[TODAY]");
    let mut s = settings();
    s.set_description(args.join(" "));
    s.bind(|| insta::assert_snapshot!(name, cleaned));
}

/// The UUID-shaped words of `s`, in order.
fn regex_lite_uuids(s: &str) -> Vec<String> {
    let b = s.as_bytes();
    let mut v = Vec::new();
    let shape = |w: &[u8]| {
        w.len() == 36
            && w.iter().enumerate().all(|(i, c)| match i {
                8 | 13 | 18 | 23 => *c == b'-',
                _ => c.is_ascii_hexdigit(),
            })
    };
    let mut i = 0;
    while i + 36 <= b.len() {
        if shape(&b[i..i + 36])
            && (i == 0 || !b[i - 1].is_ascii_alphanumeric())
            && b.get(i + 36).is_none_or(|c| !c.is_ascii_alphanumeric())
        {
            v.push(s[i..i + 36].to_owned());
            i += 36;
        } else {
            i += 1;
        }
    }
    v
}

/// Today's date as `session list` prints it (UTC: the tests run with `TZ=UTC`).
fn time_today() -> String {
    let out = std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%d"])
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

impl Ctx {
    /// The ids of the sessions in the reference home.
    fn fixture_ids(&self) -> Vec<String> {
        std::fs::read_dir(common::fixtures().join("home/.freecode/rollout/sessions"))
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .chain(
                std::fs::read_dir(common::fixtures().join("home/.freecode/sessions"))
                    .into_iter()
                    .flatten()
                    .filter_map(|e| e.ok())
                    .flat_map(|p| std::fs::read_dir(p.path()).into_iter().flatten())
                    .filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned()),
            )
            .collect()
    }
}

/// Every command that changes a home, human and `--json`, in the order a user might run them.
#[test]
fn write_commands() {
    let ctx = Ctx::fixture();
    let start_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let mut ids = Vec::new();
    let mut w = |name: &str, args: &[&str]| snap_write(name, &ctx, args, &mut ids, start_ms);
    w(
        "session_rename",
        &["session", "rename", S1, "Dark mode, round two"],
    );
    w(
        "session_rename_json",
        &["session", "rename", "68d4", "Dark mode", "--json"],
    );
    w("session_archive", &["session", "archive", S1]);
    w(
        "session_restore_json",
        &["session", "restore", S1, "--json"],
    );
    w("session_fork", &["session", "fork", S1]);
    w("session_fork_json", &["session", "fork", S3, "--json"]);
    w("session_delete", &["session", "delete", S3]);
    w("session_delete_json", &["session", "delete", S1, "--json"]);
    w("session_restore_deleted", &["session", "restore", S1]);
    w("session_show_unknown", &["session", "show", "ffffffff"]);
    w(
        "session_show_empty_id_json",
        &["session", "show", "", "--json"],
    );
    w(
        "config_set",
        &["config", "set", "syncEndpoint", "http://127.0.0.1:9"],
    );
    w(
        "config_set_json",
        &["config", "set", "syncApiKey", "k-123", "--json"],
    );
    w("config_get", &["config", "get", "syncEndpoint"]);
    w(
        "config_get_json",
        &["config", "get", "syncApiKey", "--json"],
    );
    w("config_list_json", &["config", "list", "--json"]);
    w("config_path_json", &["config", "path", "--json"]);
    w("doctor", &["doctor"]);
}
