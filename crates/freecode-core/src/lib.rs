//! Pure types and folds of freecode's episodic memory layer.
//!
//! Nothing in this crate touches the file system, the network or the clock: it holds the
//! on-disk formats (`meta.json`, `messages.jsonl` lines, `context-cache.json`, the compaction
//! `memory.json`), the project-directory key, the history mapping the agent loop uses after a
//! reload, and the compaction selection. `freecode-store` does the I/O around them.

pub mod bundle;
pub mod compaction;
pub mod context_cache;
pub mod history;
pub mod ids;
pub mod interrupt;
pub mod json;
pub mod jsonw;
pub mod limits;
pub mod memory;
pub mod message;
pub mod meta;
pub mod prices;
pub mod project_key;
mod record;
pub mod redact;
pub mod rollout;
mod scan;
mod string_enum;

pub use ids::{IdError, SessionId};
pub use message::{Part, Role, StoredMessage, ToolRef, Usage};
pub use meta::{NATIVE_AGENT, SessionMeta, SessionStatus};
pub use record::{Extra, ExtraIter};
/// Re-exported for [`string_enum!`]'s `JsonSchema` implementation in other crates.
pub use schemars;

/// The synthetic user message a resumed, interrupted session hands the model.
pub const CONTINUE_MESSAGE: &str = "Continue from where you left off.";
