//! freecode's home on disk: the session store and the file-system rules it keeps.
//!
//! - [`Home`] resolves `~/.freecode` (or `FREECODE_HOME`, or `--home`) and names every path in
//!   it; nothing is joined from an unvalidated id.
//! - [`fsutil`] holds the durability primitives: private directories and files (0700/0600),
//!   atomic rewrites (temp → fsync → rename → fsync dir), single-`write` appends.
//! - [`lock`] is the one-writer-per-session advisory lock.
//! - [`jsonl`] reads line logs tolerantly: bad and torn lines are skipped and reported.
//! - `helper` is the long-lived thread that reads the second half of a split read.
//! - [`SessionStore`] and [`SessionWriter`] are the session operations of SPEC §8 with the
//!   §19 bugs fixed.
//! - [`settings`] holds what the store and the recorder share: [`Durability`] and
//!   [`rollout::RecorderConfig`].
//! - [`redaction`] is a home's redactor: the built-in rules, or `redact.toml` merged over them.
//! - [`share`] exports a session as a redacted bundle and imports one as a new session.
//! - [`changes`] is the change journal our writers append to, so the index's look costs what
//!   changed since the last one.
//! - [`doctor`] finds leftovers, damage and loose modes in a home, and repairs them on request.

pub mod changes;
pub mod codec;
pub mod doctor;
pub mod error;
pub mod fsutil;
mod helper;
pub mod home;
pub mod index;
pub mod iotrace;
pub mod jsonl;
pub mod lock;
pub mod redaction;
pub mod rollout;
pub mod session;
pub mod settings;
pub mod share;
pub mod threads;

pub use error::StoreError;
pub use home::Home;
pub use jsonl::{IssueKind, LineIssue};
pub use session::{
    CompactionOutcome, Durability, ListFilter, Listing, MessageLog, NewSession, SessionContext,
    SessionStore, SessionWriter, StoreConfig,
};

/// Milliseconds since the Unix epoch, the timestamp unit of every format.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}
