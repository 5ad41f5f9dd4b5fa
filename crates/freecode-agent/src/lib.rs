//! freecode's agent, for a program to link: an OpenAI-compatible streaming client (or a
//! scripted stand-in built in), three harmless tools in a sandbox of the project directory,
//! and a loop that persists the conversation through the session store and records every model
//! call and tool in the rollout log.
//!
//! - [`AgentLoop`] is the API: open it on a new or existing session, then call
//!   [`AgentLoop::run_turn`] with a prompt and an [`InterruptFlag`]; `freecode run`, the
//!   JSON-RPC server's `session.send` and `freecode demo` all go through it. Its result is
//!   [`TurnOutcome`], of the operations' one vocabulary ([`freecode_ops::types`]).
//! - [`Interrupts`] is the process's Ctrl+C state (the pure machine of
//!   [`freecode_core::interrupt`] plus the flags of the turns in flight). Signals stay with
//!   the program: it feeds each SIGINT to [`Interrupts::on_sigint`] and carries out a forced
//!   exit ([`interrupt`] says how).
//! - [`provider`] speaks the streaming chat-completions protocol ([`sse`] parses it) and holds
//!   the pinning rules (a session keeps its provider and model); [`config`] reads what chooses
//!   one; [`tools`] holds the tools and the permission mode.
//!
//! Like [`freecode_ops`], this crate never depends on a front end's libraries (clap, axum,
//! rmcp, maud, indicatif); `freecode-ops/tests/deps.rs` holds both to that.

pub mod agent_loop;
pub mod config;
pub mod interrupt;
pub mod messages;
pub mod provider;
pub mod sse;
pub mod tools;

pub use agent_loop::{AgentConfig, AgentEvent, AgentLoop, SessionTarget};
pub use freecode_ops::types::{ToolCallSummary, TurnError, TurnOutcome, TurnStatus};
pub use interrupt::{Action, InterruptFlag, Interrupts};
pub use tools::PermissionMode;
