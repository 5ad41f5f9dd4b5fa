//! Helpers shared by the integration-test modules: throw-away homes, messages, file-tree
//! snapshots, and re-running this test binary as a child process (for crash and lock tests).
//!
//! Child processes: a parent test calls [`spawn_child`] with the full name of a child test
//! function (e.g. `crash::append_child`); the binary is re-executed running only that test, with
//! [`CHILD_ENV`] set to the name and parameters in `FREECODE_IT_<KEY>` variables. The child test
//! returns at once unless [`is_child`] says the variable names it; it reports progress with
//! [`emit`], one line per event, which the parent reads with [`ChildProc::next_event`].

use std::collections::BTreeMap;
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use freecode_core::{Part, Role, SessionId, StoredMessage};
use freecode_store::lock::LockWait;
use freecode_store::{Durability, Home, NewSession, SessionStore, StoreConfig};
use tempfile::TempDir;

/// A store over a fresh home inside a temporary directory.
///
/// The home is `<tmp>/home`, so files can be put beside it (outside the home) to check that
/// nothing escapes it.
pub struct TestHome {
    /// The temporary directory; removed on drop.
    pub tmp: TempDir,
    /// The store, fsyncing every append.
    pub store: SessionStore,
}

impl TestHome {
    /// A fresh home whose store fails at once on a held lock (`LockWait::Fail`).
    pub fn new() -> Self {
        let tmp = tempfile::Builder::new()
            .prefix("freecode-it-")
            .tempdir()
            .expect("create a temporary directory");
        // An existing (empty) home, as once freecode has run: opening a store creates nothing.
        let root = tmp.path().join("home");
        fs::DirBuilder::new()
            .mode(0o700)
            .create(&root)
            .expect("create the home");
        let store = open_store(&root, LockWait::Fail);
        Self { tmp, store }
    }

    /// The home directory.
    pub fn root(&self) -> &Path {
        self.store.home().root()
    }

    /// Creates a session in `project_path`.
    pub fn create(&self, project_path: &str) -> SessionId {
        self.store
            .create(new_session(project_path))
            .expect("create a session")
    }

    /// The session's directory.
    pub fn dir(&self, id: &SessionId) -> PathBuf {
        self.store.locate(id).expect("locate the session").dir
    }

    /// The session's `messages.jsonl`.
    pub fn log_path(&self, id: &SessionId) -> PathBuf {
        self.store
            .locate(id)
            .expect("locate the session")
            .messages()
    }
}

/// The default settings with rollout recording off: the project's tests record nothing unless
/// a test turns it on.
pub fn quiet() -> StoreConfig {
    StoreConfig {
        rollout: freecode_store::rollout::RecorderConfig::disabled(),
        ..Default::default()
    }
}

/// Settings every test uses: fsync after each append, and the given lock behaviour.
pub fn config(lock_wait: LockWait) -> StoreConfig {
    StoreConfig {
        durability: Durability::EveryAppend,
        lock_wait,
        ..quiet()
    }
}

/// A store over the home at `root` (used by child processes too).
pub fn open_store(root: &Path, lock_wait: LockWait) -> SessionStore {
    SessionStore::with_config(Home::new(root), config(lock_wait)).expect("open the store")
}

/// What a test session starts with.
pub fn new_session(project_path: &str) -> NewSession {
    NewSession {
        title: "integration test".to_owned(),
        project_path: project_path.to_owned(),
        provider: "test-provider".to_owned(),
        model: Some("test-model".to_owned()),
    }
}

/// A message with one text part.
pub fn text_msg(id: &str, role: Role, text: &str) -> StoredMessage {
    StoredMessage::new(id, role, vec![Part::text(text)], 1_700_000_000_000)
}

/// User for even `n`, assistant for odd: a conversation's turns.
pub fn role_for(n: u64) -> Role {
    if n.is_multiple_of(2) {
        Role::User
    } else {
        Role::Assistant
    }
}

/// The ids of `messages`, in order.
pub fn ids(messages: &[StoredMessage]) -> Vec<String> {
    messages.iter().map(|m| m.id.clone()).collect()
}

/// The permission bits of `path` (without following a symlink).
pub fn mode(path: &Path) -> u32 {
    fs::symlink_metadata(path)
        .unwrap_or_else(|e| panic!("stat {}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o7777
}

/// One entry of a [`snapshot`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// A directory.
    Dir,
    /// A regular file and its bytes.
    File(Vec<u8>),
    /// A symlink and its target.
    Link(PathBuf),
}

/// Every entry under `root` (not `root` itself), by path relative to `root`.
pub fn snapshot(root: &Path) -> BTreeMap<PathBuf, Entry> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Entry>) {
        let rd = fs::read_dir(dir).unwrap_or_else(|e| panic!("list {}: {e}", dir.display()));
        for e in rd {
            let path = e.expect("read a directory entry").path();
            let rel = path.strip_prefix(root).expect("under root").to_path_buf();
            let meta = fs::symlink_metadata(&path).expect("stat an entry");
            if meta.is_dir() {
                out.insert(rel, Entry::Dir);
                walk(root, &path, out);
            } else if meta.file_type().is_symlink() {
                out.insert(rel, Entry::Link(fs::read_link(&path).expect("read a link")));
            } else {
                out.insert(rel, Entry::File(fs::read(&path).expect("read a file")));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

/// The byte offset just after the last `\n` of `bytes` (0 if there is none).
pub fn after_last_newline(bytes: &[u8]) -> usize {
    bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1)
}

/// A small deterministic generator (xorshift64*) for kill points and delays.
pub struct Rng(u64);

impl Rng {
    /// Seeded from `FREECODE_IT_SEED` if set (to replay a failure), else from the clock. The
    /// seed is printed so a failing run can be replayed.
    pub fn from_env_or_clock(what: &str) -> Self {
        let seed = std::env::var("FREECODE_IT_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                let t = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos() as u64);
                t ^ u64::from(std::process::id()).rotate_left(32)
            });
        eprintln!("{what}: FREECODE_IT_SEED={seed}");
        Self(seed | 1)
    }

    /// The next value in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
}

// ----- child processes -----------------------------------------------------------------------

/// Set (to the child test's full name) in a child process's environment.
pub const CHILD_ENV: &str = "FREECODE_IT_CHILD";

/// Marks an event line on a child's stdout (libtest may print text around it).
const EVENT_MARK: &str = "@@freecode-it@@ ";

/// A child that prints nothing for this long is taken to hang; the test fails instead of
/// hanging. This is a safety net, not a timing assertion.
const HANG_GUARD: Duration = Duration::from_secs(120);

/// Whether this process is a child started to run the test `test` (its full path).
pub fn is_child(test: &str) -> bool {
    std::env::var(CHILD_ENV).is_ok_and(|v| v == test)
}

/// A parameter the parent passed to this child (`FREECODE_IT_<key>`).
pub fn child_var(key: &str) -> String {
    std::env::var(format!("FREECODE_IT_{key}"))
        .unwrap_or_else(|_| panic!("child parameter FREECODE_IT_{key} is not set"))
}

/// In a child: reports one event to the parent, flushed before returning.
pub fn emit(event: &str) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{EVENT_MARK}{event}").expect("write to stdout");
    out.flush().expect("flush stdout");
}

static CHILD_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A running child process; killed (SIGKILL) and reaped on drop if still running.
pub struct ChildProc {
    child: Child,
    events: mpsc::Receiver<String>,
    stdin: Option<ChildStdin>,
    stderr_path: PathBuf,
    status: Option<ExitStatus>,
}

/// Starts this test binary running only `test`, with `vars` as `FREECODE_IT_<key>`. Its stderr
/// goes to a file in `scratch` (outside any home) and is shown when it fails.
pub fn spawn_child(test: &str, scratch: &Path, vars: &[(&str, String)]) -> ChildProc {
    let exe = std::env::current_exe().expect("find the test binary");
    let n = CHILD_COUNTER.fetch_add(1, Ordering::Relaxed);
    let stderr_path = scratch.join(format!("child-{n}.stderr"));
    let stderr = fs::File::create(&stderr_path).expect("create the child's stderr file");
    let mut cmd = Command::new(exe);
    cmd.args(["--exact", test, "--nocapture", "--include-ignored"])
        .env(CHILD_ENV, test)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(stderr);
    for (k, v) in vars {
        cmd.env(format!("FREECODE_IT_{k}"), v);
    }
    let mut child = cmd.spawn().expect("spawn the child process");
    let stdout = child.stdout.take().expect("the child's stdout");
    let stdin = child.stdin.take();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(at) = line.find(EVENT_MARK)
                && tx.send(line[at + EVENT_MARK.len()..].to_owned()).is_err()
            {
                break;
            }
        }
    });
    ChildProc {
        child,
        events: rx,
        stdin,
        stderr_path,
        status: None,
    }
}

impl ChildProc {
    /// The child's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What the child wrote to stderr so far.
    pub fn stderr(&self) -> String {
        fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }

    /// The next event, or `None` once the child has closed its stdout (exited).
    pub fn next_event(&self) -> Option<String> {
        match self.events.recv_timeout(HANG_GUARD) {
            Ok(e) => Some(e),
            Err(mpsc::RecvTimeoutError::Disconnected) => None,
            Err(mpsc::RecvTimeoutError::Timeout) => panic!(
                "child {} printed nothing for {HANG_GUARD:?}; stderr:\n{}",
                self.pid(),
                self.stderr()
            ),
        }
    }

    /// Reads events until one equals `want`, returning those before it; fails if the child
    /// exits first.
    pub fn events_until(&self, want: &str) -> Vec<String> {
        let mut seen = Vec::new();
        loop {
            match self.next_event() {
                Some(e) if e == want => return seen,
                Some(e) => seen.push(e),
                None => panic!(
                    "child exited before {want:?} (after {seen:?}); stderr:\n{}",
                    self.stderr()
                ),
            }
        }
    }

    /// Every remaining event, up to the child closing its stdout.
    pub fn rest(&self) -> Vec<String> {
        std::iter::from_fn(|| self.next_event()).collect()
    }

    /// Writes a line to the child's stdin.
    pub fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("the child's stdin is open");
        writeln!(stdin, "{line}").expect("write to the child's stdin");
        stdin.flush().expect("flush the child's stdin");
    }

    /// Kills the child with SIGKILL and reaps it. Returns whether it was the kill that ended it
    /// (`false`: it had already finished successfully). A child that failed by itself fails the
    /// test, with its stderr.
    pub fn sigkill(&mut self) -> bool {
        // Ignore the result: the child may have exited already (it is still a zombie until
        // `wait`, so the pid cannot have been reused).
        let _ = self.child.kill();
        let status = self.reap();
        if status.signal() == Some(9) {
            return true;
        }
        assert!(
            status.success(),
            "child {} failed by itself ({status}); stderr:\n{}",
            self.pid(),
            self.stderr()
        );
        false
    }

    /// Closes stdin, collects every remaining event and waits; the child must succeed.
    pub fn finish(&mut self) -> Vec<String> {
        self.stdin = None;
        let events = self.rest();
        let status = self.reap();
        assert!(
            status.success(),
            "child {} failed ({status}); stderr:\n{}",
            self.pid(),
            self.stderr()
        );
        events
    }

    fn reap(&mut self) -> ExitStatus {
        if let Some(s) = self.status {
            return s;
        }
        let s = self.child.wait().expect("wait for the child");
        self.status = Some(s);
        s
    }
}

impl Drop for ChildProc {
    fn drop(&mut self) {
        if self.status.is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

pub use freecode_testkit::{copy_tree, fixtures};

/// Runs `f` on this thread without the capabilities that let root read and search past file
/// modes (`CAP_DAC_OVERRIDE`, `CAP_DAC_READ_SEARCH`; capabilities are per thread, and threads
/// `f` starts inherit them), then gives them back: so a test of an unreadable file tests it as
/// root too (CI runs as root). Without them already, `f` just runs.
pub fn without_file_override<R>(f: impl FnOnce() -> R) -> R {
    use rustix::thread::{CapabilitySet, capabilities, set_capabilities};
    let before = capabilities(None).unwrap();
    let mut dropped = before;
    dropped.effective -= CapabilitySet::DAC_OVERRIDE | CapabilitySet::DAC_READ_SEARCH;
    set_capabilities(None, dropped).unwrap();
    let out = f();
    set_capabilities(None, before).unwrap();
    out
}
