//! The binary against a hostile home and hostile outputs: planted links, a home others can
//! write, `/dev/zero` as a summary, `/dev/full` and FIFOs as output files.

use std::os::unix::fs::{FileTypeExt, PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::Output;

use crate::common::Ctx;

const S1: &str = "68d44408-94df-4f2f-ae2e-ffffdb68e297";

impl Ctx {
    fn outside(&self) -> PathBuf {
        let dir = self.path("outside");
        std::fs::create_dir_all(dir.join(S1)).unwrap();
        std::fs::write(dir.join(S1).join("keep"), b"keep me").unwrap();
        dir
    }
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn tree(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    for e in walk(dir) {
        let bytes = std::fs::read(&e).unwrap_or_default();
        out.push((e, bytes));
    }
    out.sort();
    out
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut v = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            v.extend(walk(&p));
        }
        v.push(p);
    }
    v
}

#[test]
fn purge_through_a_linked_rollout_or_memory_directory_deletes_nothing_outside() {
    for linked in ["rollout/sessions", "memory"] {
        let ctx = Ctx::fixture();
        let outside = ctx.outside();
        let link = ctx.home.join(linked);
        let _ = std::fs::remove_dir_all(&link);
        std::fs::create_dir_all(link.parent().unwrap()).unwrap();
        symlink(&outside, &link).unwrap();
        let before = tree(&outside);
        let out = ctx.run(&["session", "delete", S1, "--purge", "--yes"]);
        assert_eq!(out.status.code(), Some(1), "{linked}: {}", stderr(&out));
        assert!(
            stderr(&out).contains(&link.display().to_string()),
            "{}",
            stderr(&out)
        );
        assert!(stderr(&out).contains("symbolic link"), "{}", stderr(&out));
        assert_eq!(
            tree(&outside),
            before,
            "{linked}: purge deleted outside the home"
        );
    }
}

#[test]
fn a_linked_remote_directory_is_refused_by_export() {
    let ctx = Ctx::fixture();
    let outside = ctx.outside();
    let remote = ctx.home.join("remote");
    let _ = std::fs::remove_dir_all(&remote);
    symlink(&outside, &remote).unwrap();
    let before = tree(&outside);
    let out = ctx.run(&["session", "export", S1, "--file"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("symbolic link"), "{}", stderr(&out));
    assert_eq!(tree(&outside), before);
}

#[test]
fn a_home_others_can_write_is_refused_naming_the_fix() {
    let ctx = Ctx::fixture();
    let sessions = ctx.home.join("sessions");
    std::fs::set_permissions(&sessions, std::fs::Permissions::from_mode(0o777)).unwrap();
    for args in [
        &["session", "list"][..],
        &["search", "hello"],
        &["trace", "--list"],
    ] {
        let out = ctx.run(args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(err.contains("writable by group or others"), "{err}");
        assert!(
            err.contains(&format!("chmod go-w {}", sessions.display())),
            "{err}"
        );
    }
}

#[test]
fn a_summary_from_dev_zero_is_refused_at_its_bound() {
    let ctx = Ctx::fixture();
    let out = ctx.run(&[
        "session",
        "compact",
        S1,
        "--keep",
        "1",
        "--summary-file",
        "/dev/zero",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("larger than 16 MiB"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn export_to_dev_full_fails_and_leaves_the_device() {
    let ctx = Ctx::fixture();
    let out = ctx.run(&["session", "export", S1, "--file", "/dev/full"]);
    assert_ne!(out.status.code(), Some(0));
    let ft = std::fs::metadata("/dev/full").unwrap().file_type();
    assert!(ft.is_char_device(), "/dev/full was replaced");
}

#[test]
fn export_to_a_fifo_streams_into_it() {
    let ctx = Ctx::fixture();
    let fifo = ctx.tmp.path().join("pipe");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read(fifo).unwrap())
    };
    let out = ctx.run(&["session", "export", S1, "--file", fifo.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let bytes = reader.join().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(v["meta"]["id"], S1);
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
}

#[test]
fn export_to_dash_writes_the_bundle_to_stdout_only() {
    let ctx = Ctx::fixture();
    let remote = tree(&ctx.home.join("remote"));
    let out = ctx.run(&["session", "export", S1, "--file", "-"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["meta"]["id"], S1);
    assert!(!ctx.tmp.path().join("-").exists());
    assert_eq!(tree(&ctx.home.join("remote")), remote);
}

#[test]
fn export_into_a_missing_directory_is_an_error_not_created() {
    let ctx = Ctx::fixture();
    let target = ctx.tmp.path().join("no/such/dir/bundle.json");
    let out = ctx.run(&["session", "export", S1, "--file", target.to_str().unwrap()]);
    assert_ne!(out.status.code(), Some(0));
    assert!(stderr(&out).contains("does not exist"), "{}", stderr(&out));
    assert!(!ctx.tmp.path().join("no").exists());
}
