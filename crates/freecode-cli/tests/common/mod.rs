//! What the CLI's integration tests share: the reference fixtures, a writable copy of them, and
//! the binary set up the way every test runs it.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

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
    c
}

/// `../shared/fixtures/reference`, beside the repository.
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures/reference")
}

/// Copies a tree, making the copy the owner's: directories 0700, files 0600 (the shared
/// fixtures have no write bits).
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

pub mod mock_openai;
