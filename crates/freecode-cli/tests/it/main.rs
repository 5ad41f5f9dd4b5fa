//! The CLI's integration tests: one binary (one link of the workspace), one module per concern.
//! Each runs the real `freecode` binary (`common::freecode`) on a temporary home; a module's own
//! doc says what it covers and what it needs installed (`scripts/test-deps`). Run one concern
//! with `cargo test -p freecode-cli --test it MODULE::`.

// Test code: a failed unwrap is a failed test. The workspace denies these lints for library
// code; clippy's allow-*-in-tests settings do not reach helpers outside `#[test]` functions.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod agents;
mod bounds;
mod cli;
mod common;
mod config;
mod conventions;
mod doctor;
mod hostile;
mod import;
mod import_watch;
mod index;
mod json;
mod mcp;
mod mcp_agent;
mod meaning;
mod original;
mod run;
mod serve;
mod share;
mod snapshots;
mod sync_home;
mod sync_members;
mod terminal;
mod tidy;
mod trace;
mod ui_browser;
mod ui_home;
mod ui_security;
mod usage;
