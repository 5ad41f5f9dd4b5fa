//! The rollout log: the append-only record of everything the agent did (SPEC §6, §13).
//!
//! - [`event`]: the 19 event types as one typed enum, with the original's exact field names,
//!   key order and omission rules.
//! - [`ulid`]: 26-character monotonic ULIDs for event ids.
//! - [`view`]: a borrowed view of an event line, what the folds read; the crate's line scanner
//!   (`crate::scan`) reads the recorder's lines into it in one pass, `serde_json` the rest.
//! - [`replay`] and [`trace`]: pure, streaming folds over events (typed or viewed).
//! - [`split`]: running a fold as two halves on two threads with the sequential answer.

pub mod event;
pub mod otlp;
pub mod replay;
pub mod split;
pub mod trace;
pub mod ulid;
pub mod view;

pub use event::{DenySource, Event, EventKind, EventLine, ModelErrorKind, RawEvent};
