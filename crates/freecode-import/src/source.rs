//! What an importer reads (a [`SourceUnit`]: one file, or one database, with its side files),
//! which agent wrote it ([`Agent`]), and what it reports about bad input ([`SourceIssue`]).

use std::fmt;
use std::path::{Path, PathBuf};

/// The agents `freecode import` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Agent {
    /// Anthropic's Claude Code: `~/.claude/projects/<key>/<session>.jsonl`.
    ClaudeCode,
    /// OpenAI's Codex CLI: `~/.codex/sessions/YYYY/MM/DD/rollout-….jsonl`.
    Codex,
    /// Google's Gemini CLI: `~/.gemini/tmp/<project>/chats/session-….json[l]`.
    GeminiCli,
    /// opencode: `~/.local/share/opencode/` (SQLite `opencode*.db` and the older `storage/`).
    Opencode,
    /// goose: `~/.local/share/goose/sessions/` (SQLite `sessions.db` and older `.jsonl`).
    Goose,
}

impl Agent {
    /// Every agent, in the order `--detect` reports them.
    pub const ALL: [Agent; 5] = [
        Agent::ClaudeCode,
        Agent::Codex,
        Agent::GeminiCli,
        Agent::Opencode,
        Agent::Goose,
    ];

    /// The name on the command line and in `importedFrom.agent`.
    pub fn name(self) -> &'static str {
        match self {
            Agent::ClaudeCode => "claude-code",
            Agent::Codex => "codex",
            Agent::GeminiCli => "gemini-cli",
            Agent::Opencode => "opencode",
            Agent::Goose => "goose",
        }
    }

    /// The agent a command-line name stands for.
    pub fn from_name(name: &str) -> Option<Agent> {
        Agent::ALL.into_iter().find(|agent| agent.name() == name)
    }

    /// The provider its sessions are pinned to when the source names none.
    pub fn default_provider(self) -> &'static str {
        match self {
            Agent::ClaudeCode => "anthropic",
            Agent::Codex => "openai",
            Agent::GeminiCli => "google",
            Agent::Opencode | Agent::Goose => "unknown",
        }
    }
}

impl fmt::Display for Agent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One unit of import: a session file (with the side files read with it, e.g. Claude Code's
/// subagent transcripts), or a whole database. Re-import skips a unit whose files are all
/// unchanged (same inode, length and mtime), so every file a reader opens is listed here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceUnit {
    /// Which agent wrote it.
    pub agent: Agent,
    /// The main file or database: what `importedFrom.path` names.
    pub path: PathBuf,
    /// Other files this unit's sessions are read from (subagent transcripts, a database's
    /// `-wal`, opencode's per-message JSON files).
    pub side_files: Vec<PathBuf>,
}

impl SourceUnit {
    /// A unit of one file.
    pub fn file(agent: Agent, path: impl Into<PathBuf>) -> Self {
        Self {
            agent,
            path: path.into(),
            side_files: Vec::new(),
        }
    }

    /// Every file of the unit, the main one first.
    pub fn files(&self) -> impl Iterator<Item = &Path> {
        std::iter::once(self.path.as_path()).chain(self.side_files.iter().map(PathBuf::as_path))
    }
}

/// Something wrong in a source that was skipped rather than imported: a malformed line, an
/// unknown record type, a BOM, a torn tail. Never fatal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceIssue {
    /// The file it is in.
    pub path: PathBuf,
    /// Its 1-based line, when the source is line-based.
    pub line: Option<u64>,
    /// What was wrong and what was done about it.
    pub message: String,
}

impl SourceIssue {
    /// An issue at `path:line`.
    pub fn at_line(path: &Path, line: u64, message: impl Into<String>) -> Self {
        Self {
            path: path.to_owned(),
            line: Some(line),
            message: message.into(),
        }
    }

    /// An issue about a whole file or record.
    pub fn in_file(path: &Path, message: impl Into<String>) -> Self {
        Self {
            path: path.to_owned(),
            line: None,
            message: message.into(),
        }
    }
}

impl fmt::Display for SourceIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{line}: {}", self.path.display(), self.message),
            None => write!(f, "{}: {}", self.path.display(), self.message),
        }
    }
}

/// Why a source could not be read at all (a missing file, an unreadable database). A bad line is
/// not this: it is a [`SourceIssue`].
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// Opening or reading a file failed.
    #[error("{path}: {source}", path = .path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A database could not be opened or queried.
    #[error("{path}: {message}", path = .path.display())]
    Database {
        /// The database file.
        path: PathBuf,
        /// What the database said.
        message: String,
    },
    /// The file is not what this agent writes (wrong shape from the first record on).
    #[error("{path}: not a {agent} session: {message}", path = .path.display())]
    NotThisAgent {
        /// The file.
        path: PathBuf,
        /// The agent it was read as.
        agent: Agent,
        /// What was expected.
        message: String,
    },
}

impl ReadError {
    /// An I/O error on `path`.
    pub fn io(path: &Path, source: std::io::Error) -> Self {
        ReadError::Io {
            path: path.to_owned(),
            source,
        }
    }
}
