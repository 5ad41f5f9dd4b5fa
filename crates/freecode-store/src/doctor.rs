//! `freecode doctor`: find what crashes, older tools and careless hands leave in a home, and
//! repair it on request.
//!
//! [`examine`] walks the home once and reports [`Finding`]s; with `fix` it repairs each one it
//! safely can and says so in [`Finding::fixed`]. What it looks for:
//!
//! - **Leftovers**: `.import-*` staging directories, `.purge-*` directories of a purge cut short,
//!   and session directories without `meta.json` (a fork or create cut short). They are removed
//!   only when no process holds them: every maker holds the directory's `.lock` until the
//!   session is complete, so a free lock means nobody is making it.
//! - **Sessions**: a torn last line, a `compaction.pending` that does not parse, stale temp
//!   files (each repaired by opening the session's writer, which does this itself); a
//!   `meta.json` that does not parse, is too large, or names another id (rebuilt from the
//!   messages when there are any, else set aside); a `messages.jsonl` that is not a file (set
//!   aside); a session whose writer is held by a running process is reported, never touched.
//! - **Links** anywhere in the home (removed: the link, never its target).
//! - **Modes**: directories and files readable by group or others (tightened), writable by them
//!   or owned by another user (reported; writability is removed).
//! - **Rollout logs** with a torn tail (fenced by opening a recorder).
//! - **The index** (`state/freecode.db`): a failed `quick_check` (rebuilt).

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use freecode_core::message::Role;
use freecode_core::project_key::{ParsedKey, parse_project_dir_name};
use freecode_core::{SessionId, SessionMeta};
use serde::Serialize;

use crate::error::{Result, StoreError, chain};
use crate::fsutil;
use crate::home::Home;
use crate::lock::{LockWait, SessionLock};
use crate::session::{
    COMPACTION_JOURNAL, MESSAGES_FILE, META_FILE, META_MAX_BYTES, PROJECT_PATH_FILE, SessionStore,
    read_journal, read_messages_at,
};

/// What kind of thing a finding is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum FindingKind {
    /// A directory left by an operation cut short.
    Leftover,
    /// A log whose last line is cut.
    TornTail,
    /// A compaction journal that does not parse.
    BadJournal,
    /// Temp files of a rewrite cut short.
    StaleTemp,
    /// A `meta.json` that cannot be used.
    CorruptMeta,
    /// Something of the wrong kind where a file or directory is expected.
    WrongType,
    /// A symbolic link inside the home.
    Symlink,
    /// A mode looser than 0700/0600.
    LooseMode,
    /// Owned by another user, or writable by group or others.
    Unsafe,
    /// A session held by a running process (not a problem; nothing is touched).
    InUse,
    /// The index database failed its check.
    Index,
}

/// One thing found.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Finding {
    /// What it is.
    pub kind: FindingKind,
    /// Where.
    pub path: PathBuf,
    /// What is wrong, or what was done.
    pub detail: String,
    /// Whether `--fix` repaired it (always false without `--fix`).
    pub fixed: bool,
}

/// What [`examine`] found.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// Session directories looked at.
    pub sessions: usize,
    /// Everything found, in walk order.
    pub findings: Vec<Finding>,
}

impl Report {
    /// Findings that are problems and were not repaired.
    pub fn unresolved(&self) -> usize {
        self.findings
            .iter()
            .filter(|f| !f.fixed && f.kind != FindingKind::InUse)
            .count()
    }

    fn add(&mut self, kind: FindingKind, path: &Path, detail: impl Into<String>, fixed: bool) {
        self.findings.push(Finding {
            kind,
            path: path.to_path_buf(),
            detail: detail.into(),
            fixed,
        });
    }
}

/// Whether the file at `path` is non-empty and does not end with a newline (one byte read).
fn ends_torn(path: &Path) -> bool {
    use std::os::unix::fs::FileExt;
    let Ok(f) = fsutil::open_read(path) else {
        return false;
    };
    let len = f.metadata().map_or(0, |m| m.len());
    let mut last = [b'\n'];
    len > 0 && f.read_exact_at(&mut last, len - 1).is_ok() && last[0] != b'\n'
}

/// Examines `home`; with `fix`, repairs what can be repaired safely.
pub fn examine(home: &Home, fix: bool) -> Result<Report> {
    let mut r = Report::default();
    if !home.root().exists() {
        return Ok(r);
    }
    // One walk of the home for both.
    let mut all = Vec::new();
    walk(home.root(), &mut all);
    modes(home.root(), &all, fix, &mut r);
    // Links first: what follows never walks through one.
    links(&all, fix, &mut r);
    sessions(home, fix, &mut r)?;
    rollout(home, fix, &mut r);
    index(home, fix, &mut r);
    offset_indexes(home, fix, &mut r);
    fold_checkpoints(home, fix, &mut r);
    Ok(r)
}

/// Every entry of the tree under `dir`, without following links (links are listed, not
/// entered).
fn walk(dir: &Path, out: &mut Vec<(PathBuf, std::fs::Metadata)>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.filter_map(|e| e.ok()) {
        let path = e.path();
        let Ok(m) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        let is_dir = m.is_dir();
        out.push((path.clone(), m));
        if is_dir {
            walk(&path, out);
        }
    }
}

/// Checks the modes of `root` and of every entry below it (`all`, from [`walk`]).
fn modes(root: &Path, all: &[(PathBuf, std::fs::Metadata)], fix: bool, r: &mut Report) {
    let top = std::fs::symlink_metadata(root)
        .ok()
        .map(|m| (root.to_path_buf(), m));
    let me = rustix::process::geteuid().as_raw();
    for (path, m) in top.iter().chain(all) {
        if m.file_type().is_symlink() {
            continue;
        }
        let mode = m.permissions().mode() & 0o7777;
        if m.uid() != me {
            r.add(
                FindingKind::Unsafe,
                path,
                format!(
                    "owned by uid {}, not by you (uid {me}); fix: chown -R {me} {}",
                    m.uid(),
                    path.display()
                ),
                false,
            );
            continue;
        }
        if mode & 0o077 == 0 {
            continue;
        }
        let kind = if mode & 0o022 != 0 {
            FindingKind::Unsafe
        } else {
            FindingKind::LooseMode
        };
        let fixed = fix && fsutil::tighten(path, mode & !0o077).is_ok();
        r.add(
            kind,
            path,
            format!("mode {mode:04o}; private is {:04o}", mode & !0o077),
            fixed,
        );
    }
}

/// Reports (with `fix`, removes) every link among the entries `all` (from [`walk`]).
fn links(all: &[(PathBuf, std::fs::Metadata)], fix: bool, r: &mut Report) {
    for (path, m) in all {
        if m.file_type().is_symlink() {
            let target = std::fs::read_link(path)
                .map(|t| t.display().to_string())
                .unwrap_or_default();
            let fixed = fix && fsutil::remove_file(path).is_ok();
            r.add(
                FindingKind::Symlink,
                path,
                format!("a link to {target}; freecode never follows one in its home"),
                fixed,
            );
        }
    }
}

fn who(pid: Option<u32>) -> String {
    pid.map_or("another process".into(), |p| format!("pid {p}"))
}

/// Reports the leftover directory `dir`; with `fix`, removes it if no process holds its
/// `.lock` (taking the lock first, so nobody starts on it meanwhile).
fn clear_if_free(dir: &Path, what: &str, fix: bool, r: &mut Report) {
    if !fix {
        match crate::lock::holder(dir) {
            Some(pid) => r.add(
                FindingKind::InUse,
                dir,
                format!("{what}, being made by {}", who(pid)),
                false,
            ),
            None => r.add(FindingKind::Leftover, dir, what.to_owned(), false),
        }
        return;
    }
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    match SessionLock::acquire(dir, &name, LockWait::Fail) {
        Ok(lock) => {
            let res = fsutil::remove_tree(dir);
            drop(lock);
            match res {
                Ok(_) => r.add(FindingKind::Leftover, dir, format!("{what}; removed"), true),
                Err(e) => r.add(
                    FindingKind::Leftover,
                    dir,
                    format!("{what}; {}", chain(&e)),
                    false,
                ),
            }
        }
        Err(StoreError::Locked { pid, .. }) => r.add(
            FindingKind::InUse,
            dir,
            format!("{what}, being made by {}", who(pid)),
            false,
        ),
        Err(e) => r.add(
            FindingKind::Leftover,
            dir,
            format!("{what}; {}", chain(&e)),
            false,
        ),
    }
}

fn sessions(home: &Home, fix: bool, r: &mut Report) -> Result<()> {
    let Some(projects) = fsutil::list_dir(&home.sessions_dir())? else {
        return Ok(());
    };
    // Only a repair opens the store (which creates what is missing): a report changes nothing.
    let store = if fix {
        match SessionStore::open(home.clone()) {
            Ok(s) => Some(s),
            // Reported by the mode check already; the sessions wait until it is fixed.
            Err(StoreError::Unsafe { .. }) => return Ok(()),
            Err(e) => return Err(e),
        }
    } else {
        None
    };
    for (pname, is_dir) in projects {
        if !is_dir {
            continue;
        }
        let pdir = home.sessions_dir().join(&pname);
        let Ok(Some(children)) = fsutil::list_dir(&pdir) else {
            continue;
        };
        for (name, is_dir) in children {
            let dir = pdir.join(&name);
            let name = name.to_string_lossy().into_owned();
            if !is_dir {
                continue;
            }
            if name.starts_with(".import-") {
                clear_if_free(&dir, "an import staging directory", fix, r);
                continue;
            }
            if name.starts_with(".purge-") {
                clear_if_free(&dir, "a purge cut short", fix, r);
                continue;
            }
            let Ok(id) = SessionId::new(&name) else {
                continue;
            };
            r.sessions += 1;
            session(store.as_ref(), &pname.to_string_lossy(), &dir, &id, r);
        }
    }
    Ok(())
}

/// Examines one session directory; with a store (`--fix`), repairs it.
fn session(
    store: Option<&SessionStore>,
    project_dir: &str,
    dir: &Path,
    id: &SessionId,
    r: &mut Report,
) {
    let fix = store.is_some();
    let meta_path = dir.join(META_FILE);
    let log = dir.join(MESSAGES_FILE);
    let has_aside = std::fs::read_dir(dir).is_ok_and(|rd| {
        rd.filter_map(|e| e.ok()).any(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("meta.json.corrupt-")
        })
    });
    let no_meta = std::fs::symlink_metadata(&meta_path).is_err();
    if no_meta && has_aside {
        // Set aside by an earlier --fix (nothing to rebuild it from): kept for inspection.
        return;
    }
    if no_meta {
        clear_if_free(
            dir,
            "a session directory without meta.json (a fork or create cut short)",
            fix,
            r,
        );
        return;
    }
    // A session someone is writing is theirs: report it and touch nothing.
    let held = match store {
        None => crate::lock::holder(dir).map(Err),
        Some(_) => match SessionLock::acquire(dir, id.as_str(), LockWait::Fail) {
            Ok(l) => Some(Ok(l)),
            Err(StoreError::Locked { pid, .. }) => Some(Err(pid)),
            Err(e) => {
                r.add(FindingKind::WrongType, dir, chain(&e), false);
                return;
            }
        },
    };
    let lock = match held {
        Some(Err(pid)) => {
            r.add(
                FindingKind::InUse,
                dir,
                format!("held by {}; not examined", who(pid)),
                false,
            );
            return;
        }
        Some(Ok(lock)) => Some(lock),
        None => None,
    };
    if let Ok(m) = std::fs::symlink_metadata(&log)
        && !m.is_file()
    {
        let aside = dir.join(format!("{MESSAGES_FILE}.bad-{}", crate::now_ms()));
        let fixed = fix && fsutil::rename(&log, &aside).is_ok();
        let detail = if fixed {
            format!("not a regular file; set aside as {}", aside.display())
        } else {
            "not a regular file".to_owned()
        };
        r.add(FindingKind::WrongType, &log, detail, fixed);
    }
    let meta_problem = match fsutil::read_bounded(&meta_path, META_MAX_BYTES, "meta.json") {
        Ok(Some(bytes)) => {
            match freecode_core::json::from_slice_lossy::<SessionMeta>(&bytes).map(|l| l.value) {
                Ok(m) if m.id == id.as_str() => None,
                Ok(m) => Some(format!("names another id ({})", m.id)),
                Err(e) => Some(format!("does not parse: {e}")),
            }
        }
        Ok(None) => Some("is missing".to_owned()),
        Err(e) => Some(chain(&e)),
    };
    if let Some(why) = meta_problem {
        match store.map(|s| rebuild_meta(s, project_dir, dir, id)) {
            Some(Ok(done)) => r.add(
                FindingKind::CorruptMeta,
                &meta_path,
                format!("{why}; {done}"),
                true,
            ),
            Some(Err(e)) => r.add(
                FindingKind::CorruptMeta,
                &meta_path,
                format!("{why}; {e}"),
                false,
            ),
            None => r.add(FindingKind::CorruptMeta, &meta_path, why, false),
        }
    }
    let torn = ends_torn(&log);
    let journal = dir.join(COMPACTION_JOURNAL);
    // What the writer would set aside: the writer's own reading of it.
    let bad_journal = read_journal(&journal).map_or(true, |j| j.is_some_and(|j| j.is_err()));
    let temps = std::fs::read_dir(dir).map_or(0, |rd| {
        rd.filter_map(|e| e.ok())
            .filter(|e| {
                let n = e.file_name();
                let n = n.to_string_lossy();
                n.starts_with('.') && n.ends_with(".tmp")
            })
            .count()
    });
    if !(torn || bad_journal || temps > 0) {
        return;
    }
    // The writer repairs all three when it opens: cut the torn tail aside, set the garbage
    // journal aside, remove the temps.
    drop(lock);
    let fixed = store.is_some_and(|s| s.writer(id).is_ok());
    if torn {
        r.add(
            FindingKind::TornTail,
            &log,
            "the last line is cut (a crash mid-append); --fix moves it to messages.jsonl.torn",
            fixed,
        );
    }
    if bad_journal {
        r.add(
            FindingKind::BadJournal,
            &journal,
            "does not parse; --fix sets it aside",
            fixed,
        );
    }
    if temps > 0 {
        r.add(
            FindingKind::StaleTemp,
            dir,
            format!("{temps} temp file(s) of a rewrite cut short"),
            fixed,
        );
    }
}

/// Writes a new `meta.json` from the messages (the old one set aside), or sets the old one
/// aside when there are no messages to rebuild from. Returns what was done.
fn rebuild_meta(
    store: &SessionStore,
    project_dir: &str,
    dir: &Path,
    id: &SessionId,
) -> std::result::Result<String, String> {
    let meta_path = dir.join(META_FILE);
    let aside = dir.join(format!("{META_FILE}.corrupt-{}", crate::now_ms()));
    let set_aside = || -> std::result::Result<(), String> {
        if std::fs::symlink_metadata(&meta_path).is_ok() {
            fsutil::rename(&meta_path, &aside).map_err(|e| chain(&e))?;
        }
        Ok(())
    };
    let log = read_messages_at(&dir.join(MESSAGES_FILE)).map_err(|e| chain(&e))?;
    let Some(first) = log.messages.first() else {
        set_aside()?;
        return Ok(format!(
            "no messages to rebuild it from; set aside as {}",
            aside.display()
        ));
    };
    let project_path = match parse_project_dir_name(project_dir) {
        ParsedKey::Path(p) | ParsedKey::Guess(p) => p,
        ParsedKey::Hashed => {
            let side = dir.parent().unwrap_or(dir).join(PROJECT_PATH_FILE);
            fsutil::read_bounded(&side, 64 << 10, "a project-path file")
                .ok()
                .flatten()
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .unwrap_or_default()
        }
    };
    if project_path.is_empty() {
        set_aside()?;
        return Ok(format!(
            "its project path is unknown; set aside as {}",
            aside.display()
        ));
    }
    let title = log
        .messages
        .iter()
        .find(|m| m.role == Role::User)
        .and_then(|m| m.parts.iter().find_map(|p| p.text_content()))
        .map(|t| t.chars().take(60).collect::<String>().trim().to_owned())
        .filter(|t| !t.is_empty())
        .unwrap_or_else(|| "(recovered session)".to_owned());
    let last = log.messages.last().map_or(first.timestamp, |m| m.timestamp);
    let mut meta = SessionMeta::new(
        id,
        title,
        project_path,
        "unknown".to_owned(),
        None,
        first.timestamp,
    );
    meta.updated_at = last.max(first.timestamp);
    meta.last_turn_at = meta.updated_at;
    meta.turn_count = log.messages.iter().filter(|m| m.role == Role::User).count() as u64;
    set_aside()?;
    fsutil::write_atomic(
        &meta_path,
        &meta.to_pretty_json(),
        store.config().durability != crate::Durability::Never,
    )
    .map_err(|e| chain(&e))?;
    Ok(format!(
        "rebuilt from {} message(s); the old one is {}",
        log.messages.len(),
        aside.display()
    ))
}

fn rollout(home: &Home, fix: bool, r: &mut Report) {
    let dir = home.root().join("rollout").join("sessions");
    let Ok(Some(entries)) = fsutil::list_dir(&dir) else {
        return;
    };
    for (name, is_dir) in entries {
        let Ok(id) = SessionId::new(name.to_string_lossy()) else {
            continue;
        };
        if !is_dir {
            continue;
        }
        let path = crate::rollout::events_path(home, &id);
        let torn = ends_torn(&path);
        if torn {
            // Opening a recorder fences the torn line with a newline (the log is append-only).
            let config = crate::rollout::RecorderConfig {
                enabled: true,
                ..crate::rollout::RecorderConfig::default()
            };
            let fixed = fix && crate::rollout::Recorder::open(home, &id, config).is_ok();
            r.add(
                FindingKind::TornTail,
                &path,
                "the last event is cut (a crash mid-append); fenced by --fix",
                fixed,
            );
        }
    }
}

fn index(home: &Home, fix: bool, r: &mut Report) {
    let path = home.state_dir().join(crate::threads::DB_FILE);
    if !path.is_file() {
        return;
    }
    let flags =
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NOFOLLOW;
    let verdict = rusqlite::Connection::open_with_flags(&path, flags)
        .and_then(|c| {
            c.busy_timeout(crate::threads::BUSY_TIMEOUT)?;
            c.query_row("PRAGMA quick_check", [], |row| row.get::<_, String>(0))
        })
        .map_err(|e| e.to_string());
    let bad = match verdict {
        Ok(v) if v == "ok" => return,
        Ok(v) => v,
        Err(e) => e,
    };
    let fixed = fix
        && crate::index::SessionIndex::open(home)
            .and_then(|mut ix| ix.rebuild(|_, _| {}))
            .is_ok();
    r.add(
        FindingKind::Index,
        &path,
        format!("failed its check ({bad}); rebuilt from the files by --fix"),
        fixed,
    );
}

/// The logs' offset indexes (`state/offsets/`, derived): one that does not read or whose session
/// is gone is removed by `--fix`; a stale one (its log replaced or rewritten) is rebuilt.
fn offset_indexes(home: &Home, fix: bool, r: &mut Report) {
    use crate::session::offsets::{self, Health};
    let dir = home.state_dir().join("offsets");
    let Ok(Some(entries)) = fsutil::list_dir(&dir) else {
        return;
    };
    let store = fix.then(|| SessionStore::open(home.clone()).ok()).flatten();
    for (name, is_dir) in entries {
        let path = dir.join(&name);
        let name = name.to_string_lossy();
        if is_dir || name.starts_with('.') {
            continue;
        }
        let id = SessionId::new(name.as_ref()).ok();
        let log = id.as_ref().and_then(|id| log_of(home, id));
        let health = match &log {
            Some(log) => offsets::health(&path, log),
            None => Health::Orphan,
        };
        let (detail, fixed) = match health {
            Health::Good => continue,
            Health::Unreadable | Health::Orphan => {
                let what = if health == Health::Orphan {
                    "the offset index of a session that is gone"
                } else {
                    "an offset index that does not read (cut, corrupt or of another version)"
                };
                let fixed = fix && fsutil::remove_file(&path).is_ok();
                (format!("{what}; removed by --fix (derived)"), fixed)
            }
            Health::Stale => {
                // Removed, then built again where a long log needs one.
                let fixed = fix && fsutil::remove_file(&path).is_ok();
                if let (true, Some(store), Some(id)) = (fixed, &store, &id) {
                    let _ = store.message_blocks_from(id, usize::MAX);
                }
                (
                    "an offset index of the log as it was (replaced or rewritten since); rebuilt by --fix"
                        .to_owned(),
                    fixed,
                )
            }
        };
        r.add(FindingKind::Index, &path, detail, fixed);
    }
}

/// The rollout logs' fold checkpoints (`state/folds/<id>/`, derived): each is read in full
/// against its saved checksums. One that does not read, is corrupt or is stale is removed by
/// `--fix` and folded again (a trace checkpoint is rebuilt from its log); one whose session's
/// log is gone is removed.
fn fold_checkpoints(home: &Home, fix: bool, r: &mut Report) {
    use crate::rollout::checkpoint::{self, Health};
    let dir = home.state_dir().join("folds");
    let Ok(Some(sessions)) = fsutil::list_dir(&dir) else {
        return;
    };
    for (name, is_dir) in sessions {
        let sdir = dir.join(&name);
        let name = name.to_string_lossy();
        if !is_dir || name.starts_with('.') {
            continue;
        }
        let Some(id) = SessionId::new(name.as_ref()).ok() else {
            continue;
        };
        if !crate::rollout::events_path(home, &id).is_file() {
            let fixed = fix && fsutil::remove_tree(&sdir).is_ok();
            r.add(
                FindingKind::Index,
                &sdir,
                "fold checkpoints of a rollout log that is gone; removed by --fix (derived)"
                    .to_owned(),
                fixed,
            );
            continue;
        }
        let Ok(Some(files)) = fsutil::list_dir(&sdir) else {
            continue;
        };
        for (file, _) in files {
            let file = file.to_string_lossy();
            let Some(kind) = file.strip_suffix(".state") else {
                continue;
            };
            let state = sdir.join(file.as_ref());
            let what = match checkpoint::health(home, &id, &state) {
                Health::Good => continue,
                Health::Orphan => "a fold checkpoint of a rollout log that is gone".to_owned(),
                Health::Unreadable => {
                    "a fold checkpoint that does not read (cut, corrupt or of another version)"
                        .to_owned()
                }
                Health::Stale => {
                    "a fold checkpoint of the log as it was (replaced or rewritten since)"
                        .to_owned()
                }
                Health::Corrupt(why) => format!("a fold checkpoint whose spool changed: {why}"),
            };
            let fixed = fix && {
                let mut ok = fsutil::remove_file(&state).is_ok();
                for suffix in checkpoint::spool_suffixes(kind) {
                    ok &= fsutil::remove_file(&sdir.join(format!("{kind}.{suffix}"))).is_ok();
                }
                ok && crate::rollout::rebuild_checkpoint(home, &id, kind).is_ok()
            };
            r.add(
                FindingKind::Index,
                &state,
                format!("{what}; rebuilt by --fix (derived)"),
                fixed,
            );
        }
    }
}

/// The `messages.jsonl` of session `id`, found without opening a store (a report changes
/// nothing); `None` when no session directory of that id holds one.
fn log_of(home: &Home, id: &SessionId) -> Option<PathBuf> {
    let projects = fsutil::list_dir(&home.sessions_dir()).ok().flatten()?;
    projects.into_iter().find_map(|(p, is_dir)| {
        let log = home
            .sessions_dir()
            .join(p)
            .join(id.as_str())
            .join(MESSAGES_FILE);
        (is_dir && log.is_file()).then_some(log)
    })
}
