//! A small agent: an OpenAI-compatible streaming client (or a scripted stand-in built into the
//! binary), three harmless tools, and a loop that persists the conversation through the session
//! store and records every model call and tool in the rollout log.
//!
//! - [`AgentLoop`] is the reusable API: open it on a new or existing session, then call
//!   [`AgentLoop::run_turn`] with a prompt and an [`InterruptFlag`]; `freecode run` and the
//!   JSON-RPC server's `session.send` both go through it.
//! - [`Interrupts`] is the process's Ctrl+C state (the pure machine of
//!   [`freecode_core::interrupt`] plus the flags of the turns in flight);
//!   [`Interrupts::install_sigint_handler`] routes SIGINT to it through a signal-hook thread.
//! - [`provider`] speaks the streaming chat-completions protocol; [`tools`] holds the tools and
//!   the permission mode.

pub mod agent_loop;
pub mod messages;
pub mod provider;
pub mod signals;
pub mod sse;
pub mod tools;

pub use agent_loop::{AgentConfig, AgentEvent, AgentLoop, SessionTarget, TurnOutcome, TurnStatus};
pub use signals::{InterruptFlag, Interrupts};
pub use tools::PermissionMode;
