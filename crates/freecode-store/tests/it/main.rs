//! The store's integration tests: one binary, one module per concern.

mod compat;
mod store;
