//! The change journal: `state/changes.log`, where this project's writers say which sessions they
//! touched, so that the index learns what changed since its last look without a `stat` per
//! session (`index::look`).
//!
//! One line per note, `<session id>\t<project directory>\n` (the directory is empty for a rollout
//! log, which has none), appended with one `write` to a file opened for append, so lines from
//! processes writing at once never interleave. A writer notes a session after it changed it,
//! at most once per [`NOTE_EVERY`] while it keeps writing, and once more when it lets go of it
//! ([`Noter`]): the index keeps re-checking a session it saw noted for a while after
//! (`index::look::RECENT_WINDOW_MS`, far longer than [`NOTE_EVERY`]), so the writes between two
//! notes are seen too.
//!
//! A note is a hint, never the truth: a note that cannot be written (a full disk, a read-only
//! `state/`) is logged at debug level and the write it follows still succeeds; the index's
//! scheduled full check sees what the journal missed. Writers that are not ours (the original
//! shares the home) write no journal at all: `index::look` has its own checks for them.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::fsutil;
use crate::home::Home;

/// The journal's file name, in `state/`.
pub const CHANGES_FILE: &str = "changes.log";

/// How often a writer that keeps writing notes its session: at most once per this.
pub const NOTE_EVERY: Duration = Duration::from_secs(1);

/// The journal of `home`.
pub fn journal_path(home: &Home) -> PathBuf {
    home.state_dir().join(CHANGES_FILE)
}

/// Appends one note: `id` (a session or rollout aggregate) in `project_dir` (empty when unknown)
/// changed. Never fails the caller (see the module doc).
pub fn note(home: &Home, id: &str, project_dir: &str) {
    let path = journal_path(home);
    let line = format!("{id}\t{project_dir}\n");
    let written = fsutil::create_dir_private(&home.state_dir())
        .and_then(|()| fsutil::open_append(&path))
        .and_then(|mut f| {
            fsutil::append_bytes(&mut f, &path, line.as_bytes()).map_err(|e| {
                crate::StoreError::Io {
                    op: "append to",
                    path: path.clone(),
                    source: e,
                }
            })
        });
    if let Err(e) = written {
        tracing::debug!(path = %path.display(), error = %e, "change journal: note not written");
    }
}

/// The notes of one writer: the first change is noted at once, later ones at most once per
/// [`NOTE_EVERY`], and a change not noted yet is noted by [`Noter::finish`] (called when the
/// writer is dropped).
#[derive(Debug, Default)]
pub struct Noter {
    last: Option<Instant>,
    pending: bool,
}

impl Noter {
    /// Says `id` in `project_dir` changed: notes it now unless it was noted less than
    /// [`NOTE_EVERY`] ago.
    pub fn changed(&mut self, home: &Home, id: &str, project_dir: &str) {
        let now = Instant::now();
        if self
            .last
            .is_some_and(|t| now.duration_since(t) < NOTE_EVERY)
        {
            self.pending = true;
            return;
        }
        note(home, id, project_dir);
        self.last = Some(now);
        self.pending = false;
    }

    /// Notes the change not noted yet, if any.
    pub fn finish(&mut self, home: &Home, id: &str, project_dir: &str) {
        if self.pending {
            note(home, id, project_dir);
            self.pending = false;
            self.last = Some(Instant::now());
        }
    }
}

/// A line of the journal: the session id and its project directory (`None` when the line has
/// none). `None` for a line that is not a note (it is skipped).
pub fn parse_line(line: &[u8]) -> Option<(String, Option<String>)> {
    let line = std::str::from_utf8(line).ok()?;
    let (id, dir) = line.split_once('\t')?;
    freecode_core::SessionId::new(id).ok()?;
    let dir = match dir {
        "" => None,
        d if freecode_core::project_key::is_project_dir_name(d) => Some(d.to_owned()),
        _ => return None,
    };
    Some((id.to_owned(), dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_names_a_session_and_maybe_its_directory() {
        let id = "0b16b16b-0000-4000-8000-000000000001";
        assert_eq!(
            parse_line(format!("{id}\t-home-dev-app").as_bytes()),
            Some((id.to_owned(), Some("-home-dev-app".to_owned())))
        );
        assert_eq!(
            parse_line(format!("{id}\t").as_bytes()),
            Some((id.to_owned(), None))
        );
        assert_eq!(parse_line(b"../etc\t-x"), None);
        assert_eq!(parse_line(format!("{id}\t../up").as_bytes()), None);
        assert_eq!(parse_line(id.as_bytes()), None);
        assert_eq!(parse_line(b"\xff\t-x"), None);
    }

    #[test]
    fn a_writer_notes_at_once_then_at_most_once_a_second_and_on_finish() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::new(dir.path());
        let mut n = Noter::default();
        for _ in 0..100 {
            n.changed(&home, "s1", "-p");
        }
        let text = std::fs::read_to_string(journal_path(&home)).unwrap();
        assert_eq!(text, "s1\t-p\n");
        n.finish(&home, "s1", "-p");
        let text = std::fs::read_to_string(journal_path(&home)).unwrap();
        assert_eq!(text, "s1\t-p\ns1\t-p\n");
        // Nothing pending: finishing again writes nothing.
        n.finish(&home, "s1", "-p");
        assert_eq!(
            std::fs::read_to_string(journal_path(&home))
                .unwrap()
                .lines()
                .count(),
            2
        );
    }
}
