//! Other agents' sessions, read into freecode's.
//!
//! Each agent's module (one per agent: `claude_code`, `codex`, `gemini_cli`, `opencode`,
//! `goose`) finds that agent's files ([`source::SourceUnit`]) and reads each into
//! [`model::ImportedSession`]s: one agent-neutral shape, a timeline of user turns, provider
//! responses (merged, usage once), tool calls with their results and times, compactions and
//! errors. What is written from it (our `meta.json`, `messages.jsonl` and a rollout log) is
//! derived from that one shape, the same for every agent.
//!
//! Readers never write to a source, stream their files line by line ([`lines`]), skip and report
//! bad input with file and line ([`source::SourceIssue`]), and never decode a project path from a
//! directory name.

pub mod codex;
pub mod gemini_cli;
pub mod goose;
pub mod lines;
pub mod model;
pub mod opencode;
pub mod source;
