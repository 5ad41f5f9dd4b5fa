//! What the CLI's integration tests share: the reference fixtures, a writable copy of them, and
//! the binary set up the way every test runs it.
#![allow(dead_code, unused_imports, clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

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

pub use freecode_testkit::{copy_tree, fixtures};

pub mod mock_openai;
