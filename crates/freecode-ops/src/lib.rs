//! freecode's operations: every operation a front end offers, once, over a [`Home`].
//!
//! The CLI (`freecode …`), the JSON-RPC server (`freecode serve`), the MCP server
//! (`freecode mcp`) and the web viewer (`freecode ui`) each parse their input, call a function
//! here, and render what it returns; none of them does an operation itself. An agent that links
//! freecode as a library calls the same functions.
//!
//! - Requests are typed ([`sessions::ListRequest`], [`share::ExportRequest`], …) and results are
//!   the one JSON vocabulary of [`types`] (a session is the meta shape keyed `id`, a reference
//!   to one is `sessionId`, camelCase, durations end in `Ms`), with their JSON Schemas.
//! - Errors are one [`Error`] with an [`ErrorKind`] that each front end maps once: an exit
//!   status, a JSON-RPC code, an MCP `isError`, an HTTP status.
//! - Slow work reports through a [`Progress`] callback (the CLI draws bars, others draw
//!   nothing).
//! - Id and prefix resolution ([`sessions::resolve_id`]), the index-or-scan fallback
//!   ([`index::indexed_or_scanned`]), project scopes and `--since`/duration parsing
//!   ([`scope`]) live here.
//!
//! | area | module |
//! |---|---|
//! | list, show, start, fork, rename, archive, delete, restore, purge, compact, resume | [`sessions`] |
//! | search, stats, index rebuild | [`search`] |
//! | search by meaning: the embedder, its vectors, hybrid search | [`meaning`] |
//! | usage and cost: billed requests grouped and priced | [`usage`] |
//! | trace, replay, the recorded sessions, a log followed | [`trace`], [`live`] |
//! | OTLP export | [`otlp`] |
//! | export, import, share list and revoke | [`share`] |
//! | home sync across machines (end-to-end encrypted) | [`home_sync`] |
//! | other agents' sessions | [`import`] |
//! | doctor | [`doctor`] |
//! | config (the operations; the keys and their defaults: [`keys`], a leaf) | [`config`] |
//! | bounded pages for an agent (MCP) | [`page`] |
//! | text for people (sanitizer, counts, durations, times) | [`human`] |
//!
//! This crate depends on the core, the store, the importers and the share client; never on a
//! front end's libraries (clap, axum, rmcp, maud, indicatif): `tests/deps.rs` holds it to that.

pub mod config;
pub mod doctor;
pub mod error;
pub mod handoff;
pub mod home_sync;
pub mod human;
pub mod import;
pub mod index;
pub mod keys;
pub mod live;
pub mod meaning;
pub mod otlp;
pub mod output;
pub mod page;
pub mod progress;
pub mod scope;
pub mod search;
pub mod sessions;
pub mod share;
pub mod trace;
pub mod types;
pub mod usage;

pub use error::{Error, ErrorKind, Result, kind_of};
pub use freecode_store::Home;
pub use progress::{Progress, Silent};
