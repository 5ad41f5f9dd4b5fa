//! The store's error type: every variant names the path or id it is about.

use std::path::PathBuf;

use freecode_core::IdError;
use freecode_core::compaction::CompactionError;

/// Everything that can go wrong in the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A file-system call failed.
    #[error("cannot {op} {}", path.display())]
    Io {
        /// What was attempted ("read", "create", …).
        op: &'static str,
        /// The path it was attempted on.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A session id failed validation.
    #[error(transparent)]
    InvalidId(#[from] IdError),
    /// No session has that id (or it is soft-deleted where that hides it).
    #[error("session not found: {id}")]
    NotFound {
        /// The id looked for.
        id: String,
    },
    /// An id prefix that more than one session's id starts with.
    #[error(
        "session id prefix {prefix:?} is ambiguous: it matches {}",
        some_of(candidates)
    )]
    AmbiguousId {
        /// The prefix given.
        prefix: String,
        /// Every id it matches, sorted.
        candidates: Vec<String>,
    },
    /// Creating a session whose id is taken.
    #[error("session {id} already exists at {}", path.display())]
    AlreadyExists {
        /// The id.
        id: String,
        /// Where the existing one lives.
        path: PathBuf,
    },
    /// Another writer holds the session.
    #[error("session {id} is locked by {}", holder_text(*pid))]
    Locked {
        /// The session id.
        id: String,
        /// The holder's process id, if it wrote one.
        pid: Option<u32>,
    },
    /// `meta.json` (or another JSON document) does not parse.
    #[error("cannot parse {}", path.display())]
    BadJson {
        /// The file.
        path: PathBuf,
        /// The parse error, with line and column.
        #[source]
        source: serde_json::Error,
    },
    /// A project path that cannot name a project.
    #[error("invalid project path {path:?}: {why}")]
    InvalidProjectPath {
        /// The path given.
        path: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// The SQLite database (thread store, session index) failed.
    #[error("database {}", path.display())]
    Db {
        /// The database file.
        path: PathBuf,
        /// SQLite's error.
        #[source]
        source: rusqlite::Error,
    },
    /// A counter of a file is at its largest value: the next one would wrap, so nothing was
    /// written.
    #[error("cannot append to {}: {what} {last} is the largest there is; nothing was written", path.display())]
    Exhausted {
        /// Which counter ("seq", "event id").
        what: &'static str,
        /// Its last value.
        last: String,
        /// The file.
        path: PathBuf,
    },
    /// A compaction request that would break the log.
    #[error(transparent)]
    Compaction(#[from] CompactionError),
    /// A symbolic link where the store expects a file or directory of its own: the store never
    /// writes, truncates, renames or deletes through one (nor reads through one in its home).
    #[error(
        "{} is a symbolic link: freecode never follows links inside its home (remove the link, \
         or run `freecode doctor --fix`)",
        path.display()
    )]
    Symlink {
        /// The link.
        path: PathBuf,
    },
    /// Something other than what the store expects at a path (a directory for a file, a FIFO…).
    #[error("{} is {found}, where freecode expects {expected}", path.display())]
    WrongType {
        /// The path.
        path: PathBuf,
        /// What is there ("a directory", "a FIFO", …).
        found: &'static str,
        /// What should be there ("a regular file", "a directory").
        expected: &'static str,
    },
    /// A home (or a directory or file in it) that someone else controls, as ssh's StrictModes
    /// refuses a `~/.ssh` others can write.
    #[error("refusing to use {}: {why} (fix: {fix})", path.display())]
    Unsafe {
        /// The path.
        path: PathBuf,
        /// What is wrong ("owned by uid 1001, not by you (uid 1000)", …).
        why: String,
        /// The command that fixes it.
        fix: String,
    },
    /// A user's redaction rules (`redact.toml`) that cannot be used: nothing is exported.
    #[error("{}:{line}: invalid redact.toml: {message}", path.display())]
    BadRules {
        /// The file.
        path: PathBuf,
        /// The 1-based line.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// `config.json` that is not a JSON object: every command that reads it stops here rather
    /// than run on defaults the user did not choose.
    #[error("{}:{line}:{column}: invalid config.json: {message}", path.display())]
    BadConfig {
        /// The file.
        path: PathBuf,
        /// 1-based line of the fault.
        line: usize,
        /// 1-based column of the fault.
        column: usize,
        /// What is wrong there.
        message: String,
    },
    /// A record whose line would be past [`freecode_core::limits::MAX_LINE_BYTES`]: no reader would take
    /// it back, so it is not written.
    #[error(
        "cannot append to {}: the record is {} as one line, past the {} a log line may hold; nothing was written",
        path.display(), human_bytes(*len), human_bytes(freecode_core::limits::MAX_LINE_BYTES as u64)
    )]
    LineTooLong {
        /// The log.
        path: PathBuf,
        /// The line's length, in bytes.
        len: u64,
    },
    /// A file past the size a reader accepts for it.
    #[error("{} is larger than {} ({what}); refusing to read it", path.display(), human_bytes(*cap))]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The bound, in bytes.
        cap: u64,
        /// What the file is ("meta.json", "a summary file", …).
        what: &'static str,
    },
}

impl StoreError {
    /// Whether this is a file-system "no such file or directory".
    pub fn is_not_found(&self) -> bool {
        matches!(self, Self::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
    }
}

/// An error and its sources, `: `-separated (what the CLI prints with `{:#}`).
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

/// `12 MiB`, `512 KiB`, `300 bytes`.
pub fn human_bytes(n: u64) -> String {
    if n >= 1 << 20 && n.is_multiple_of(1 << 20) {
        format!("{} MiB", n >> 20)
    } else if n >= 1 << 10 && n.is_multiple_of(1 << 10) {
        format!("{} KiB", n >> 10)
    } else {
        format!("{n} bytes")
    }
}

/// The first ten of `ids`, and how many more.
fn some_of(ids: &[String]) -> String {
    const SHOWN: usize = 10;
    let mut text = ids
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if ids.len() > SHOWN {
        text.push_str(&format!(" and {} more", ids.len() - SHOWN));
    }
    text
}

fn holder_text(pid: Option<u32>) -> String {
    match pid {
        Some(pid) if pid == std::process::id() => format!("this process (pid {pid})"),
        Some(pid) => format!("another process (pid {pid})"),
        None => "another process".to_owned(),
    }
}

/// Shorthand for results of store operations.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// Attaches an operation and a path to an `io::Error`.
pub(crate) trait IoContext<T> {
    fn ctx(self, op: &'static str, path: impl Into<PathBuf>) -> Result<T>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn ctx(self, op: &'static str, path: impl Into<PathBuf>) -> Result<T> {
        self.map_err(|source| StoreError::Io {
            op,
            path: path.into(),
            source,
        })
    }
}
