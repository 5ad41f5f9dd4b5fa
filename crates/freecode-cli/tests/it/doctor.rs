//! `freecode doctor` on a home that crashes, older tools and careless hands left behind: the
//! report changes nothing and exits 1; `--fix` repairs what no process holds and exits 0.

use crate::common;

use std::collections::BTreeMap;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};

use crate::common::Ctx;
use serde_json::Value;

const S1: &str = "68d44408-94df-4f2f-ae2e-ffffdb68e297";
const S2: &str = "2b0084fa-74c0-4e03-a6d9-7e1128df064c";
const PROJECT: &str = "sessions/home__dev__projects__my_h_app";
const HALF_FORK: &str = "11111111-2222-3333-4444-555555555555";
const EMPTY: &str = "22222222-2222-3333-4444-555555555555";

impl Ctx {
    /// The original's fixture home, plus one of everything the doctor looks for.
    fn damaged() -> Self {
        let ctx = Self::fixture();
        let (tmp, home) = (ctx.tmp.path(), &ctx.home);
        let p = home.join(PROJECT);
        // A fork cut short (no meta.json) and an import's staging directory.
        std::fs::create_dir_all(p.join(HALF_FORK)).unwrap();
        std::fs::write(p.join(HALF_FORK).join("messages.jsonl"), "{\"id\":\"m\"}\n").unwrap();
        std::fs::create_dir_all(p.join(".import-abc")).unwrap();
        // A torn tail and a garbage compaction journal.
        let mut log = std::fs::read(p.join(S2).join("messages.jsonl")).unwrap();
        log.extend_from_slice(b"{\"id\":\"cut\",\"role\":\"us");
        std::fs::write(p.join(S2).join("messages.jsonl"), log).unwrap();
        std::fs::write(p.join(S2).join("compaction.pending"), "garbage").unwrap();
        // A meta naming another id (rebuilt from the messages) and one with nothing to
        // rebuild from (set aside).
        std::fs::write(p.join(S1).join("meta.json"), "{\"id\":\"someone-else\"}").unwrap();
        std::fs::create_dir_all(p.join(EMPTY)).unwrap();
        std::fs::write(p.join(EMPTY).join("meta.json"), "not json").unwrap();
        std::fs::write(p.join(EMPTY).join("messages.jsonl"), "").unwrap();
        // A link planted in the home.
        std::fs::create_dir_all(tmp.join("outside")).unwrap();
        symlink(tmp.join("outside"), home.join("memory/evil")).unwrap();
        ctx
    }

    /// The doctor's `--json` report and its exit code.
    fn report(&self, args: &[&str]) -> (Option<i32>, Value) {
        let out = self.run(args);
        let v = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: {e}: {}", String::from_utf8_lossy(&out.stderr)));
        (out.status.code(), v)
    }
}

/// Every path under `root` with its mode and bytes (links by their target).
fn snapshot(root: &Path) -> BTreeMap<PathBuf, (u32, Vec<u8>)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            let m = std::fs::symlink_metadata(&p).unwrap();
            let bytes = if m.file_type().is_symlink() {
                std::fs::read_link(&p)
                    .unwrap()
                    .into_os_string()
                    .into_encoded_bytes()
            } else if m.is_file() {
                std::fs::read(&p).unwrap()
            } else {
                stack.push(p.clone());
                Vec::new()
            };
            out.insert(p, (m.permissions().mode(), bytes));
        }
    }
    out
}

fn kinds(v: &Value) -> Vec<(String, String, bool)> {
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] != "looseMode")
        .map(|f| {
            let path = f["path"].as_str().unwrap();
            let tail = Path::new(path)
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned();
            (
                f["kind"].as_str().unwrap().to_owned(),
                tail,
                f["fixed"] == true,
            )
        })
        .collect()
}

#[test]
fn the_report_names_every_problem_and_changes_nothing() {
    let ctx = Ctx::damaged();
    let before = snapshot(&ctx.home);
    let (code, v) = ctx.report(&["doctor", "--json"]);
    assert_eq!(code, Some(1));
    let mut found = kinds(&v);
    found.sort();
    let want = [
        ("badJournal", "compaction.pending"),
        ("corruptMeta", "meta.json"),
        ("corruptMeta", "meta.json"),
        ("leftover", ".import-abc"),
        ("leftover", HALF_FORK),
        ("symlink", "evil"),
        ("tornTail", "messages.jsonl"),
    ];
    let got: Vec<(&str, &str)> = found
        .iter()
        .map(|(k, p, _)| (k.as_str(), p.as_str()))
        .collect();
    assert_eq!(got, want, "{v:#}");
    assert!(found.iter().all(|(_, _, fixed)| !fixed));
    // The copied tree's 0755/0644 entries are reported as loose modes.
    assert!(
        v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["kind"] == "looseMode")
    );
    assert_eq!(
        snapshot(&ctx.home),
        before,
        "a report must not change the home"
    );
}

#[test]
fn fix_repairs_it_all_and_the_home_is_clean_after() {
    let ctx = Ctx::damaged();
    let outside = ctx.tmp.path().join("outside");
    std::fs::write(outside.join("keep"), "keep").unwrap();
    let (code, v) = ctx.report(&["doctor", "--fix", "--json"]);
    assert_eq!(code, Some(0), "{v:#}");
    assert_eq!(v["unresolved"], 0);
    assert!(
        v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["fixed"] == true),
        "{v:#}"
    );
    let p = ctx.home.join(PROJECT);
    assert!(!p.join(HALF_FORK).exists() && !p.join(".import-abc").exists());
    assert!(!ctx.home.join("memory/evil").exists());
    assert_eq!(
        std::fs::read(outside.join("keep")).unwrap(),
        b"keep",
        "the link's target stays"
    );
    // The torn bytes are kept aside, the journal set aside, and the session writable again.
    let torn = std::fs::read_to_string(p.join(S2).join("messages.jsonl.torn")).unwrap();
    assert!(torn.contains("\"cut\""));
    assert!(!p.join(S2).join("compaction.pending").exists());
    assert!(ctx.run(&["session", "delete", S2]).status.success());
    // The meta with another id is rebuilt from the messages; its old bytes are kept.
    let meta: Value =
        serde_json::from_slice(&std::fs::read(p.join(S1).join("meta.json")).unwrap()).unwrap();
    assert_eq!(meta["id"], S1);
    assert_eq!(meta["projectPath"], "/home/dev/projects/my-app");
    let show = ctx.run(&["session", "show", S1]);
    assert!(show.status.success());
    // The one with nothing to rebuild from is set aside: not listed, not deleted.
    assert!(!p.join(EMPTY).join("meta.json").exists());
    assert!(std::fs::read_dir(p.join(EMPTY)).unwrap().any(|e| {
        e.unwrap()
            .file_name()
            .to_string_lossy()
            .starts_with("meta.json.corrupt-")
    }));
    // Every mode is private now, and a second look finds nothing.
    for (path, (mode, _)) in snapshot(&ctx.home) {
        assert_eq!(mode & 0o077, 0, "{} is {mode:o}", path.display());
    }
    let (code, v) = ctx.report(&["doctor", "--json"]);
    assert_eq!(
        (code, v["findings"].as_array().unwrap().len()),
        (Some(0), 0),
        "{v:#}"
    );
}

#[test]
fn fix_leaves_what_a_running_process_holds() {
    let ctx = Ctx::damaged();
    let staging = ctx.home.join(PROJECT).join(".import-abc");
    // A process making the import holds its lock (flock(1) takes the same flock(2) lock).
    let mut holder = std::process::Command::new("flock")
        .arg(staging.join(".lock"))
        .args(["sleep", "30"])
        .spawn()
        .unwrap();
    // Wait until the lock is taken.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !staging.join(".lock").exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(200));
    let (_, v) = ctx.report(&["doctor", "--fix", "--json"]);
    let _ = holder.kill();
    let _ = holder.wait();
    assert!(staging.exists(), "removed while held");
    let f = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"].as_str().unwrap().ends_with(".import-abc") && f["kind"] != "looseMode")
        .unwrap();
    assert_eq!(f["kind"], "inUse", "{f:#}");
    assert_eq!(f["fixed"], false);
}

#[test]
fn the_human_report_is_short_and_exits_1() {
    let ctx = Ctx::damaged();
    let out = ctx.run(&["doctor"]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.lines().count() < 20, "{text}");
    assert!(text.contains("more loose modes"), "{text}");
    let last = text.trim_end();
    assert!(
        last.ends_with(" problems") || last.ends_with("; 1 problem"),
        "{text}"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("freecode doctor --fix"));
    // A healthy home: one line, exit 0.
    let empty = tempfile::tempdir().unwrap();
    let out = common::freecode(&empty.path().join("h"))
        .arg("doctor")
        .output()
        .unwrap();
    assert!(out.status.success());
}
