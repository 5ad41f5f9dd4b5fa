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
pub mod importer;
pub mod lines;
pub mod model;
pub mod source;
pub mod state;
pub mod write;

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::source::{Agent, ReadError, SourceIssue, SourceUnit};

/// Why an agent cannot be imported by this build.
#[derive(Debug, thiserror::Error)]
#[error("importing {0} sessions is not supported yet")]
pub struct NotSupported(pub Agent);

/// Where `agent` keeps its sessions on this machine, honouring its variables (read through
/// `var`).
pub fn default_roots(
    agent: Agent,
    var: &dyn Fn(&str) -> Option<OsString>,
) -> Result<Vec<PathBuf>, NotSupported> {
    match agent {
        Agent::ClaudeCode => Ok(claude_code::default_roots(var)),
        Agent::Codex | Agent::GeminiCli | Agent::Opencode | Agent::Goose => {
            Err(NotSupported(agent))
        }
    }
}

/// The units of `agent` under `root`.
pub fn discover(
    agent: Agent,
    root: &Path,
    issues: &mut Vec<SourceIssue>,
) -> Result<Vec<SourceUnit>, NotSupported> {
    match agent {
        Agent::ClaudeCode => Ok(claude_code::discover(root, issues)),
        Agent::Codex | Agent::GeminiCli | Agent::Opencode | Agent::Goose => {
            Err(NotSupported(agent))
        }
    }
}

/// Reads one unit with its agent's reader.
pub fn read(unit: &SourceUnit) -> Result<model::Read, ReadError> {
    match unit.agent {
        Agent::ClaudeCode => claude_code::read(unit),
        agent @ (Agent::Codex | Agent::GeminiCli | Agent::Opencode | Agent::Goose) => {
            Err(ReadError::NotThisAgent {
                path: unit.path.clone(),
                agent,
                message: NotSupported(agent).to_string(),
            })
        }
    }
}
