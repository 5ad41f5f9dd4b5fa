//! One module per top-level command.

pub mod session;
pub mod trace;
