//! What the CLI's integration tests share: the reference fixtures, a writable copy of them, and
//! the binary set up the way every test runs it.
#![allow(dead_code, unused_imports, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// The `freecode` binary with `home` as its FREECODE_HOME and nothing from the caller's
/// environment that changes its output: no colour, UTC, rollout recording off (a test that
/// wants the log removes `FREECODE_ROLLOUT`), no log filter, no provider endpoint, stdin closed.
pub fn freecode(home: &Path) -> std::process::Command {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_freecode"));
    c.env("FREECODE_HOME", home)
        .env("NO_COLOR", "1")
        .env("TZ", "UTC")
        .env("FREECODE_ROLLOUT", "off")
        .env_remove("RUST_LOG")
        .env_remove("FREECODE_LOG")
        .env_remove("OPENAI_BASE_URL")
        .stdin(std::process::Stdio::null());
    // No embedder but the one a test configures.
    for (_, var) in EMBED_ENV {
        c.env_remove(var);
    }
    c
}

/// The `embed.*` keys' environment variables (`freecode_ops::meaning::ENV`).
pub const EMBED_ENV: &[(&str, &str)] = freecode_ops::meaning::ENV;

/// A temporary home and the binary run on it: the one test context of the CLI's tests. The home
/// is `<tmp>/<name>`, so files can be put beside it ([`Ctx::path`]). [`Ctx::cmd`] is
/// [`freecode`] on the home, with this context's environment changes ([`Ctx::with_env`],
/// [`Ctx::without_env`]) and working directory ([`Ctx::in_dir`]).
pub struct Ctx {
    /// The temporary directory; removed on drop.
    pub tmp: tempfile::TempDir,
    /// The home (`FREECODE_HOME`).
    pub home: PathBuf,
    env: Vec<(&'static str, Option<String>)>,
    cwd: Option<PathBuf>,
}

impl Ctx {
    /// `<tmp>/<name>`, not created: a home that does not exist yet.
    pub fn at(name: &str) -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join(name);
        Self {
            tmp,
            home,
            env: Vec::new(),
            cwd: None,
        }
    }

    /// `<tmp>/h`, not created.
    pub fn missing() -> Self {
        Self::at("h")
    }

    /// `<tmp>/h`, an existing empty home.
    pub fn empty() -> Self {
        let ctx = Self::missing();
        std::fs::create_dir(&ctx.home).unwrap();
        ctx
    }

    /// A writable copy of the reference home, at `<tmp>/.freecode`.
    pub fn fixture() -> Self {
        let ctx = Self::at(".freecode");
        copy_tree(&fixtures().join("home/.freecode"), &ctx.home);
        ctx
    }

    /// Every command sets `key` to `value`.
    pub fn with_env(mut self, key: &'static str, value: &str) -> Self {
        self.env.push((key, Some(value.to_owned())));
        self
    }

    /// Every command runs without `key`.
    pub fn without_env(mut self, key: &'static str) -> Self {
        self.env.push((key, None));
        self
    }

    /// Every command runs in `dir`.
    pub fn in_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cwd = Some(dir.into());
        self
    }

    /// `<tmp>/<rel>`: beside the home.
    pub fn path(&self, rel: impl AsRef<Path>) -> PathBuf {
        self.tmp.path().join(rel)
    }

    /// `freecode args` on the home, not yet run.
    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = freecode(&self.home);
        c.args(args);
        for (k, v) in &self.env {
            match v {
                Some(v) => c.env(k, v),
                None => c.env_remove(k),
            };
        }
        if let Some(dir) = &self.cwd {
            c.current_dir(dir);
        }
        c
    }

    /// Runs `freecode args`.
    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().unwrap()
    }

    /// Runs `freecode args`, which must succeed; its stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Runs `freecode args`, which must succeed; its stdout as JSON.
    pub fn json(&self, args: &[&str]) -> Value {
        let out = self.ok(args);
        serde_json::from_str(&out)
            .unwrap_or_else(|e| panic!("{args:?}: stdout is not JSON ({e}): {out}"))
    }

    /// Runs `freecode args`, which must exit 1; its stderr.
    pub fn fails(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stderr).unwrap()
    }
}

pub use freecode_testkit::{copy_tree, fixtures};

pub mod logs;
pub mod mock_openai;

/// The first entry named `name` below `dir` (depth first), or a path that does not exist.
pub fn find_below(dir: &Path, name: &str) -> PathBuf {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        if e.file_name() == name {
            return e.path();
        }
        if e.file_type().unwrap().is_dir() {
            let p = find_below(&e.path(), name);
            if p.exists() {
                return p;
            }
        }
    }
    PathBuf::from("/nonexistent")
}

/// Runs `cmd`, which must succeed (else its stderr is the panic), and parses its stdout as JSON.
pub fn json_of(cmd: &mut Command) -> Value {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{cmd:?}: stdout is not JSON ({e})"))
}

/// Runs `args` with FREECODE_HOME `home` under a pseudo-terminal of `cols` × `rows` (`script`,
/// util-linux), with colour allowed, and returns everything the terminal received; the run
/// must succeed.
pub fn on_terminal(
    home: &Path,
    args: &[&str],
    cols: u16,
    rows: u16,
    env: &[(&str, &str)],
) -> String {
    let bin = env!("CARGO_BIN_EXE_freecode");
    let quoted: Vec<String> = args.iter().map(|a| format!("'{a}'")).collect();
    let inner = format!("stty cols {cols} rows {rows}; '{bin}' {}", quoted.join(" "));
    let mut c = std::process::Command::new("script");
    c.args(["-qec", &inner, "/dev/null"])
        .env("FREECODE_HOME", home)
        .env("TZ", "UTC")
        .env("FREECODE_ROLLOUT", "off")
        .env("TERM", "xterm-256color")
        .env_remove("NO_COLOR")
        .env_remove("COLUMNS")
        .env_remove("LINES")
        .env_remove("RUST_LOG")
        .env_remove("FREECODE_LOG")
        .stdin(std::process::Stdio::null());
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "{args:?} on a terminal: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Asserts that `v` conforms to `docs/schemas/<name>`.
pub fn schema_check(name: &str, v: &Value) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../docs/schemas")
        .join(name);
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator.iter_errors(v).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{name}: {errors:?}");
}
