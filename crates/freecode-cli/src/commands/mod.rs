//! One module per top-level command.

pub mod config;
pub mod demo;
pub mod doctor;
pub mod import;
pub mod index;
pub mod mcp;
pub mod run;
pub mod schema;
pub mod serve;
pub mod session;
pub mod share;
pub mod shell;
pub mod sync;
pub mod trace;
pub mod ui;
