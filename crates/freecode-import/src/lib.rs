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

pub mod claude_code;
pub mod codex;
pub mod gemini_cli;
pub mod goose;
pub mod handback;
pub mod importer;
pub mod lines;
pub mod model;
pub mod opencode;
pub mod place;
pub mod projects;
pub mod source;
pub mod state;
pub mod write;

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::source::{Agent, ReadError, SourceIssue, SourceUnit};

/// Where `agent` keeps its sessions on this machine, honouring its variables (read through
/// `var`).
pub fn default_roots(agent: Agent, var: &dyn Fn(&str) -> Option<OsString>) -> Vec<PathBuf> {
    match agent {
        Agent::ClaudeCode => claude_code::default_roots(var),
        Agent::Codex => codex::default_roots(var),
        Agent::GeminiCli => gemini_cli::default_roots(var),
        Agent::Opencode => opencode::default_roots(var),
        Agent::Goose => goose::default_roots(var),
    }
}

/// The units of `agent` under `root`.
pub fn discover(agent: Agent, root: &Path, issues: &mut Vec<SourceIssue>) -> Vec<SourceUnit> {
    match agent {
        Agent::ClaudeCode => claude_code::discover(root, issues),
        Agent::Codex => codex::discover(root, issues),
        Agent::GeminiCli => gemini_cli::discover(root, issues),
        Agent::Opencode => opencode::discover(root, issues),
        Agent::Goose => goose::discover(root, issues),
    }
}

/// Reads one unit with its agent's reader.
pub fn read(unit: &SourceUnit) -> Result<model::Read, ReadError> {
    match unit.agent {
        Agent::ClaudeCode => claude_code::read(unit),
        Agent::Codex => codex::read(unit),
        Agent::GeminiCli => gemini_cli::read(unit),
        Agent::Opencode => opencode::read(unit),
        Agent::Goose => goose::read(unit),
    }
}
