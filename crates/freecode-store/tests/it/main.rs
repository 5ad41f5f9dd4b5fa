//! The store's integration tests: one binary, one module per concern.

// Test code: a failed unwrap is a failed test. The workspace denies these lints for library
// code; clippy's allow-*-in-tests settings do not reach helpers outside `#[test]` functions.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod bad_input;
mod checkpoint;
mod compat;
mod crash;
mod hostile;
mod index;
mod look;
mod offsets;
mod power_loss;
mod redaction;
mod rollout;
mod rollout_crash;
mod rollout_views;
mod share;
mod shared_home;
mod store;
mod support;
mod threads;
