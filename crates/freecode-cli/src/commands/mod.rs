//! One module per top-level command.

pub mod index;
pub mod session;
pub mod trace;
