//! Home sync's cost: the first sync of a big home, then an incremental sync after one new turn,
//! time and sealed bytes sent for each, beside `rsync` of the same home to an rsync daemon on
//! loopback (when `rsync` is installed).
//!
//! `cargo bench -p freecode-cli --bench sync` (2,000 sessions, 1,000,000 messages;
//! `FREECODE_BENCH_SESSIONS` and `FREECODE_BENCH_MESSAGES` scale it down). The server is the
//! real share server on loopback over a file store; the client is `freecode_ops::home_sync`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use freecode_core::{Part, Role, SessionId, StoredMessage};
use freecode_ops::Silent;
use freecode_remote::blob::StoreSpec;
use freecode_remote::server::{ServerConfig, spawn};
use freecode_store::{Durability, Home, NewSession, SessionStore, StoreConfig};

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn message(i: usize, role: Role) -> StoredMessage {
    let text = format!(
        "message {i}: the build of crate number {} failed on the linker step; retrying with \
         the incremental cache cleared and RUSTFLAGS unset, then bisecting the last commits",
        i % 97
    );
    StoredMessage::new(
        format!("m-{i}"),
        role,
        vec![Part::text(text)],
        1_700_000_000_000 + i as i64,
    )
}

/// A home of `sessions` sessions holding `messages` messages in all.
fn build_home(home: &Home, sessions: usize, messages: usize) -> Vec<SessionId> {
    let config = StoreConfig {
        durability: Durability::Never,
        ..StoreConfig::default()
    };
    let store = SessionStore::with_config(home.clone(), config).unwrap();
    let per = messages / sessions;
    let mut ids = Vec::new();
    for s in 0..sessions {
        let mut w = store
            .create_writer(NewSession {
                title: format!("session {s}"),
                project_path: format!("/work/project-{}", s % 20),
                provider: "scripted".into(),
                model: Some("scripted-1".into()),
            })
            .unwrap();
        for i in 0..per {
            let role = if i % 2 == 0 {
                Role::User
            } else {
                Role::Assistant
            };
            w.append(&message(s * per + i, role)).unwrap();
        }
        w.end_turn(10).unwrap();
        ids.push(w.id().clone());
    }
    ids
}

/// An rsync daemon on loopback taking `dest`, if rsync is installed.
struct Rsyncd {
    child: std::process::Child,
    url: String,
}

impl Rsyncd {
    fn start(dir: &Path, dest: &Path) -> Option<Self> {
        Command::new("rsync").arg("--version").output().ok()?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .ok()?
            .local_addr()
            .ok()?
            .port();
        let conf = dir.join("rsyncd.conf");
        // The daemon writes as the user running the bench (as root it would be `nobody`).
        let owner = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(dest).ok()?);
        let (uid, gid) = (
            owner,
            std::os::unix::fs::MetadataExt::gid(&std::fs::metadata(dest).ok()?),
        );
        std::fs::write(
            &conf,
            format!(
                "use chroot = no\nport = {port}\naddress = 127.0.0.1\npid file = {}\n[home]\npath = {}\nread only = no\nuid = {uid}\ngid = {gid}\n",
                dir.join("rsyncd.pid").display(),
                dest.display()
            ),
        )
        .ok()?;
        let child = Command::new("rsync")
            .args(["--daemon", "--no-detach", "--config"])
            .arg(&conf)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Some(Self {
            child,
            url: format!("rsync://127.0.0.1:{port}/home/"),
        })
    }

    /// `rsync -a --delete --stats SRC/ URL`: seconds and bytes sent.
    fn push(&self, src: &Path) -> (f64, u64) {
        let t = Instant::now();
        let out = Command::new("rsync")
            .args(["-a", "--delete", "--stats"])
            .arg(format!("{}/", src.display()))
            .arg(&self.url)
            .output()
            .unwrap();
        let secs = t.elapsed().as_secs_f64();
        assert!(
            out.status.success(),
            "rsync failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout);
        let sent = text
            .lines()
            .find_map(|l| l.strip_prefix("Total bytes sent: "))
            .map(|v| v.replace(',', "").trim().parse().unwrap_or(0))
            .unwrap_or(0);
        (secs, sent)
    }
}

impl Drop for Rsyncd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn main() {
    let sessions = env("FREECODE_BENCH_SESSIONS", 2_000);
    let messages = env("FREECODE_BENCH_MESSAGES", 1_000_000);
    let tmp = tempfile::tempdir().unwrap();
    let a = Home::new(tmp.path().join("alpha"));
    let b = Home::new(tmp.path().join("beta"));
    let t = Instant::now();
    let ids = build_home(&a, sessions, messages);
    println!(
        "home: {sessions} sessions, {messages} messages, {:.1} MB on disk (built in {:.1} s)",
        freecode_testkit::tree_size(a.root()) as f64 / 1e6,
        t.elapsed().as_secs_f64()
    );

    let server = spawn(ServerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        store: StoreSpec::File(tmp.path().join("server")),
        ..ServerConfig::default()
    })
    .unwrap();
    freecode_ops::home_sync::init(&a, &server.url, false).unwrap();
    let phrase = freecode_ops::home_sync::key_phrase(&a).unwrap();
    freecode_ops::home_sync::join(&b, &server.url, &phrase, false).unwrap();

    let rsync_dest = tmp.path().join("rsync-dest");
    std::fs::create_dir_all(&rsync_dest).unwrap();
    let rsyncd = Rsyncd::start(tmp.path(), &rsync_dest);

    let mut rows = Vec::new();
    let timed = |f: &dyn Fn() -> freecode_ops::home_sync::SyncReport| {
        let t = Instant::now();
        let r = f();
        (t.elapsed().as_secs_f64(), r)
    };
    let (secs, r) = timed(&|| freecode_ops::home_sync::push(&a, &mut Silent).unwrap());
    rows.push(("first sync: push", secs, r.bytes_sent));
    let (secs, r) = timed(&|| freecode_ops::home_sync::pull(&b, &mut Silent).unwrap());
    rows.push((
        "first sync: pull on another machine",
        secs,
        r.bytes_received,
    ));
    let rsync_first = rsyncd.as_ref().map(|d| d.push(a.root()));

    // One new turn (a user message and an answer) in one session.
    let store = SessionStore::open(a.clone()).unwrap();
    let mut w = store.writer(&ids[ids.len() / 2]).unwrap();
    w.append(&message(messages + 1, Role::User)).unwrap();
    w.append(&message(messages + 2, Role::Assistant)).unwrap();
    w.end_turn(10).unwrap();
    drop(w);
    let (secs, r) = timed(&|| freecode_ops::home_sync::push(&a, &mut Silent).unwrap());
    rows.push(("one new turn: push", secs, r.bytes_sent));
    let (secs, r) = timed(&|| freecode_ops::home_sync::pull(&b, &mut Silent).unwrap());
    rows.push((
        "one new turn: pull on another machine",
        secs,
        r.bytes_received,
    ));
    let (secs, r) = timed(&|| freecode_ops::home_sync::now(&a, &mut Silent).unwrap());
    rows.push(("nothing new: now", secs, r.bytes_sent + r.bytes_received));
    let rsync_again = rsyncd.as_ref().map(|d| d.push(a.root()));

    let mut out = std::io::stdout().lock();
    writeln!(out, "| step | time | bytes moved |").unwrap();
    writeln!(out, "|---|---|---|").unwrap();
    for (what, secs, bytes) in rows {
        writeln!(
            out,
            "| freecode sync, {what} | {:.0} ms | {bytes} |",
            secs * 1e3
        )
        .unwrap();
    }
    match (rsync_first, rsync_again) {
        (Some((s1, b1)), Some((s2, b2))) => {
            writeln!(
                out,
                "| rsync -a to a loopback daemon, first | {:.0} ms | {b1} |",
                s1 * 1e3
            )
            .unwrap();
            writeln!(
                out,
                "| rsync -a to a loopback daemon, after the turn | {:.0} ms | {b2} |",
                s2 * 1e3
            )
            .unwrap();
        }
        _ => writeln!(out, "(rsync is not installed: no rsync rows)").unwrap(),
    }
}
