//! `freecode import`: units found, read, planned ([`crate::write::plan`]) and written into a
//! home through the store, incrementally and idempotently.
//!
//! Per unit: when every file stats as the watermark says ([`crate::state`]), it is skipped
//! without being opened. Otherwise it is read and each of its sessions is written by its
//! derived id: created when new (all or nothing: a hidden staging directory renamed into
//! place, [`SessionStore::put_populated`]); grown when the messages already written are a
//! prefix of the new ones and the rollout log's events a prefix of the new events (only the
//! rest appended, under the session's writer lock); left alone when nothing changed; replaced
//! all or nothing otherwise. A session continued here since its import (a turn ended after
//! `importedAt`) is never replaced. A session's `memory/<id>/memory.json` (its compactions,
//! [`Planned::memory`]) is written with it, rewritten when it changes and removed when the
//! source no longer holds one. Source files are only read. `--dry-run` plans the same and
//! writes nothing, counting what the export redactor would redact. Units are independent and
//! go through up to four threads; the report and the watermarks are folded in unit order.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use freecode_core::meta::IMPORTED_FROM;
use freecode_core::{SessionId, SessionStatus, StoredMessage};
use freecode_store::redaction::HomeRedactor;
use freecode_store::session::{Durability, NewSession, StoreConfig};
use freecode_store::{SessionStore, StoreError, fsutil};
use serde_json::Value;

use crate::model::{ImportedSession, ParentKind};
use crate::projects::{KnownRoots, ProjectHints};
use crate::source::{Agent, SourceIssue, SourceUnit};
use crate::state::{FileMark, HandoffMark, HandoffMarks, ImportState, SessionMark, UnitMark};
use crate::write::{Planned, keep_own_events, plan, session_id};

/// What to import.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Only sessions whose last activity is at or after this time, ms.
    pub since: Option<i64>,
    /// Plan and report, write nothing.
    pub dry_run: bool,
    /// The import time, ms.
    pub now: i64,
    /// The project path of sessions whose source names none, or a relative one (else they
    /// are skipped). Absolute: the front end makes the user's `--project` so.
    pub fallback_project: Option<String>,
    /// Where to look for a project the source names only by its hash (Gemini CLI), beyond the
    /// source's own registry ([`crate::projects`]); `None`: nowhere.
    pub project_hints: Option<ProjectHints>,
}

/// What happened to one session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Written for the first time.
    Imported,
    /// New messages appended.
    Updated,
    /// Written again whole (the source changed in a way appending cannot follow).
    Replaced,
    /// Nothing new.
    Unchanged,
    /// Left out (older than `--since`, continued here since its import, no project).
    Skipped,
    /// Writing it failed (the reason says why); read again next time.
    Failed,
}

impl Action {
    /// The word in the human output and in `--json`.
    pub fn name(self) -> &'static str {
        match self {
            Action::Imported => "imported",
            Action::Updated => "updated",
            Action::Replaced => "replaced",
            Action::Unchanged => "unchanged",
            Action::Skipped => "skipped",
            Action::Failed => "failed",
        }
    }
}

/// One session's outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionOutcome {
    /// Our id.
    pub id: String,
    /// The source's id.
    pub source_id: String,
    /// The file it came from.
    pub path: PathBuf,
    /// What was done (or, with `--dry-run`, would be).
    pub action: Action,
    /// Its title (empty when unknown: an unchanged unit is not read).
    pub title: String,
    /// The parent's id (subagent or fork).
    pub parent_id: Option<String>,
    /// Messages it has.
    pub messages: usize,
    /// Messages this import wrote (all of them for a new or replaced session).
    pub added_messages: usize,
    /// Rollout events it has.
    pub events: usize,
    /// Secrets the export redactor finds in its messages (counted on `--dry-run` only).
    pub redactions: usize,
    /// Of them, how many each rule found (`github-pat` → 2).
    pub redaction_rules: std::collections::BTreeMap<String, usize>,
    /// The first of them ([`MAX_FINDINGS`]): rule, place and masked preview, as an export's
    /// dry run lists them.
    pub findings: Vec<freecode_core::bundle::RedactionNote>,
    /// Last activity, ms (0 when unknown).
    pub last_activity: i64,
    /// Why it was skipped.
    pub reason: Option<String>,
    /// Where it was placed when its source names no usable project (see [`crate::place`]).
    pub placed: Option<Placed>,
}

/// Where a session whose source names no usable project was placed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placed {
    /// Its project path.
    pub project: String,
    /// `hash` (a directory the chat names has the source's project hash), `guess` (from the
    /// paths the chat names) or `unplaced` (no evidence: the home's project for those).
    pub how: &'static str,
    /// What the placement rests on, for a person.
    pub why: String,
}

/// What an import run did.
#[derive(Debug, Default)]
pub struct Report {
    /// Every session, in unit order.
    pub sessions: Vec<SessionOutcome>,
    /// Bad input, with file and line.
    pub issues: Vec<SourceIssue>,
    /// Units found.
    pub units: usize,
    /// Units skipped on their stat alone.
    pub unchanged_units: usize,
    /// Units that could not be read at all (each with an issue saying why).
    pub failed_units: usize,
    /// Bytes of the units read.
    pub bytes_read: u64,
    /// Time the final file-system sync took, ms.
    pub sync_ms: u64,
}

/// Why an import could not run at all (a bad line or one bad session is an issue instead).
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Imports the sessions of `agent` under `roots` into `store`'s home.
pub fn run(
    store: &SessionStore,
    agent: Agent,
    roots: &[PathBuf],
    opts: &Options,
) -> Result<Report, ImportError> {
    // Written without an fsync per file: the file system is synced once at the end, before
    // the watermarks are (so a power cut loses at most this run, which the next one redoes).
    let bulk = SessionStore::with_config(
        store.home().clone(),
        StoreConfig {
            durability: Durability::Never,
            ..*store.config()
        },
    )?;
    let store = &bulk;
    let mut report = Report::default();
    let mut units = Vec::new();
    for root in roots {
        let found = crate::discover(agent, root, &mut report.issues);
        if found.is_empty() && std::fs::metadata(root).is_ok_and(|m| m.is_dir()) {
            report.issues.push(SourceIssue::in_file(
                root,
                format!(
                    "no {agent} sessions below it (it looks for {}); a file named otherwise \
                     can be given as a PATH itself",
                    looks_for(agent)
                ),
            ));
        }
        units.extend(found);
    }
    units.sort_by(|a, b| a.path.cmp(&b.path));
    units.dedup_by(|a, b| a.path == b.path);
    report.units = units.len();
    // A dry run counts what an export would redact, with the home's rules (an unusable
    // `redact.toml` stops it here, as it would stop the export).
    let redactor = if opts.dry_run {
        Some(freecode_store::redaction::for_home(store.home())?)
    } else {
        None
    };
    let mut state = ImportState::load(store.home());
    let mut changed = false;
    // Units are independent (each session belongs to one): read, planned and written on a
    // few threads, folded into the report in unit order.
    let shared = Shared {
        locks: SessionLocks::default(),
        redactor: redactor.as_ref(),
        hints: opts.project_hints.as_ref(),
        known: std::sync::OnceLock::new(),
        handoffs: HandoffMarks::load(store.home()),
    };
    let results = for_each_unit(&units, |unit| {
        let key = ImportState::key(&unit.path);
        unit_pass(store, unit, state.units.get(&key), opts, &shared)
    });
    for (unit, result) in units.iter().zip(results) {
        report.issues.extend(result.issues);
        report.sessions.extend(result.sessions);
        report.bytes_read += result.bytes_read;
        if result.unchanged {
            report.unchanged_units += 1;
        }
        if result.failed {
            report.failed_units += 1;
        }
        if let Some(mark) = result.mark {
            state.units.insert(ImportState::key(&unit.path), mark);
            changed = true;
        }
    }
    if changed {
        fsutil::create_dir_private(&store.home().state_dir())?;
        let started = std::time::Instant::now();
        sync_home(store.home())?;
        report.sync_ms = started.elapsed().as_millis() as u64;
        state.save(store.home())?;
    }
    Ok(report)
}

/// Locks by session id, striped: two units can hold the same session (goose's legacy file
/// and its database, a Codex rollout in `sessions/` and `archived_sessions/`, an opencode
/// database given beside its data directory), and their threads must not create it at once:
/// the second waits, then finds it written and compares.
struct SessionLocks([std::sync::Mutex<()>; 64]);

impl Default for SessionLocks {
    fn default() -> Self {
        Self(std::array::from_fn(|_| std::sync::Mutex::new(())))
    }
}

impl SessionLocks {
    fn lock(&self, id: &str) -> std::sync::MutexGuard<'_, ()> {
        let stripe = id.bytes().fold(0usize, |h, b| {
            h.wrapping_mul(31).wrapping_add(usize::from(b))
        }) % self.0.len();
        // A panicking holder leaves nothing half-done in memory: the lock is only an order.
        self.0[stripe]
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// What the units of one run share: the session locks, the dry run's redactor, and the
/// project roots known by their hash (gathered once, when a session first needs one).
struct Shared<'a> {
    locks: SessionLocks,
    redactor: Option<&'a HomeRedactor>,
    hints: Option<&'a ProjectHints>,
    known: std::sync::OnceLock<KnownRoots>,
    /// The files `session handoff` wrote ([`HandoffMarks`]).
    handoffs: HandoffMarks,
}

impl Shared<'_> {
    /// The known root whose hash is `hash`, and how many roots were tried.
    fn resolve(&self, store: &SessionStore, hash: &str) -> (Option<String>, usize) {
        match self.known(store) {
            Some(known) => (known.resolve(hash).map(str::to_owned), known.len()),
            None => (None, 0),
        }
    }

    /// The directories this machine is known to work in (gathered once), if the front end
    /// gave hints where to look.
    fn known(&self, store: &SessionStore) -> Option<&KnownRoots> {
        let hints = self.hints?;
        Some(
            self.known
                .get_or_init(|| KnownRoots::gather(hints, Some(store))),
        )
    }
}

/// What one unit gave.
#[derive(Default)]
struct UnitResult {
    sessions: Vec<SessionOutcome>,
    issues: Vec<SourceIssue>,
    bytes_read: u64,
    unchanged: bool,
    /// It could not be read at all.
    failed: bool,
    /// The new watermark, when every session of the unit was written.
    mark: Option<UnitMark>,
}

/// Runs `each` over the units on up to four threads (two per core: much of a unit's time is
/// the kernel creating its files, so threads also overlap those waits); the results in unit
/// order.
fn for_each_unit<F>(units: &[SourceUnit], each: F) -> Vec<UnitResult>
where
    F: Fn(&SourceUnit) -> UnitResult + Sync,
{
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get() * 2)
        .min(4)
        .min(units.len());
    if threads <= 1 {
        return units.iter().map(&each).collect();
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut done: Vec<(usize, UnitResult)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut out = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(unit) = units.get(i) else { break };
                        out.push((i, each(unit)));
                    }
                    out
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| match w.join() {
                Ok(out) => out,
                Err(panic) => std::panic::resume_unwind(panic),
            })
            .collect()
    });
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, r)| r).collect()
}

/// One unit: skipped on its stat, or read, and each session planned and written.
fn unit_pass(
    store: &SessionStore,
    unit: &SourceUnit,
    old: Option<&UnitMark>,
    opts: &Options,
    shared: &Shared<'_>,
) -> UnitResult {
    let mut out = UnitResult::default();
    let marks: Option<Vec<FileMark>> = unit.files().map(FileMark::stat).collect();
    let Some(marks) = marks else {
        out.failed = true;
        out.issues.push(SourceIssue::in_file(
            &unit.path,
            "a file of this session cannot be read (or is not a regular file), skipped",
        ));
        return out;
    };
    if let Some(old) = old
        && old.files.len() == marks.len()
        && old.files.iter().zip(&marks).all(|(a, b)| a.same(b))
    {
        out.unchanged = true;
        for (id, mark) in &old.sessions {
            out.sessions.push(SessionOutcome {
                id: id.clone(),
                source_id: String::new(),
                path: unit.path.clone(),
                action: Action::Unchanged,
                title: String::new(),
                parent_id: None,
                messages: mark.messages,
                added_messages: 0,
                events: mark.events,
                redactions: 0,
                redaction_rules: Default::default(),
                findings: Vec::new(),
                last_activity: 0,
                reason: None,
                placed: None,
            });
        }
        return out;
    }
    out.bytes_read = marks.iter().map(|m| m.len).sum::<u64>();
    let read = match crate::read(unit) {
        Ok(r) => r,
        Err(e) => {
            out.failed = true;
            out.issues
                .push(SourceIssue::in_file(&unit.path, e.to_string()));
            return out;
        }
    };
    out.issues.extend(read.issues);
    let mut sessions = BTreeMap::new();
    // A unit with a session not written (an error, --since, one continued here) is read
    // again next time: a later run may write it.
    let mut complete = true;
    let mut planned_here: Vec<Planned> = Vec::new();
    for s in &read.sessions {
        let with_project;
        // A project named only by its hash: the directories this machine is known to work in.
        let mut unresolved = None;
        let resolved = match (&s.project_path, &s.project_hash) {
            (None, Some(hash)) => {
                let (root, tried) = shared.resolve(store, hash);
                if root.is_none() {
                    unresolved = Some(format!(
                        "its projectHash {hash} is the SHA-256 of none of the {tried} \
                         directories known here (projects.json, the current directory and its \
                         parents, the home's sessions, Claude Code's and Codex's records)"
                    ));
                }
                root
            }
            _ => None,
        };
        // `--project` stands in for a directory the source does not name, or names relative.
        let s = if let Some(root) = resolved {
            with_project = ImportedSession {
                project_path: Some(root),
                ..s.clone()
            };
            &with_project
        } else if s
            .project_path
            .as_deref()
            .is_none_or(|p| freecode_core::project_key::normalize_absolute(p).is_none())
            && let Some(project) = &opts.fallback_project
        {
            with_project = ImportedSession {
                project_path: Some(project.clone()),
                ..s.clone()
            };
            &with_project
        } else {
            s
        };
        // No usable project still: placed from the chat's own evidence, else under the home's
        // project for unplaced sessions. Never skipped for want of one.
        let mut placed = None;
        let placed_session;
        let s = if s
            .project_path
            .as_deref()
            .is_none_or(|p| freecode_core::project_key::normalize_absolute(p).is_none())
        {
            // Imported before: where it is now (placed then, or moved by the user since).
            let here = session_id(s.agent, &s.source_id)
                .ok()
                .and_then(|id| store.meta(&id).ok())
                .map(|m| m.project_path);
            let project = match here {
                Some(here) => here,
                None => {
                    let p = place_session(s, unresolved.as_deref(), shared, store);
                    let project = p.project.clone();
                    placed = Some(p);
                    project
                }
            };
            placed_session = ImportedSession {
                project_path: Some(project),
                ..s.clone()
            };
            &placed_session
        } else {
            s
        };
        let mut planned = match plan(s, opts.now) {
            Ok(mut p) => {
                if s.parent
                    .as_ref()
                    .is_some_and(|l| l.kind == ParentKind::Fork)
                    && let Some(parent) = planned_here
                        .iter()
                        .find(|q| p.parent_id.as_ref() == Some(&q.id))
                {
                    keep_own_events(&mut p, parent);
                }
                p
            }
            Err(e) => {
                // Read again next time: a run with `--project` may write it.
                complete = false;
                let mut reason = e.reason();
                if let Some(why) = &unresolved {
                    reason = format!("{why}; {reason}");
                }
                out.issues
                    .push(SourceIssue::in_file(&s.source_path, reason.clone()));
                out.sessions.push(skipped_unplanned(s, reason));
                continue;
            }
        };
        // A file a hand-back wrote: its new turns go on the session it came from.
        if let Some(mark) = shared
            .handoffs
            .handoffs
            .get(&HandoffMarks::key(s.agent, &s.source_id))
            .filter(|mark| is_handed_file(s, &planned, mark))
        {
            let outcome = {
                let _one_writer = shared.locks.lock(&mark.session);
                handed_back(store, s, &planned, mark, opts.dry_run)
            };
            if outcome.action == Action::Failed {
                complete = false;
            }
            out.sessions.push(outcome);
            planned_here.push(planned);
            continue;
        }
        let mut outcome = SessionOutcome {
            id: planned.id.to_string(),
            source_id: s.source_id.clone(),
            path: s.source_path.clone(),
            action: Action::Skipped,
            title: planned.title.clone(),
            parent_id: planned.parent_id.as_ref().map(ToString::to_string),
            messages: planned.written().len(),
            added_messages: 0,
            events: planned.events.len(),
            redactions: 0,
            redaction_rules: Default::default(),
            findings: Vec::new(),
            last_activity: planned.last_activity,
            reason: None,
            placed: placed.clone(),
        };
        if opts
            .since
            .is_some_and(|since| planned.last_activity < since)
        {
            complete = false;
            outcome.reason = Some("last activity before --since".into());
            out.sessions.push(outcome);
            planned_here.push(planned);
            continue;
        }
        if let Some(r) = shared.redactor {
            (outcome.redaction_rules, outcome.findings) =
                count_redactions(r.get(), planned.written());
            outcome.redactions = outcome.redaction_rules.values().sum();
        }
        let applied = loop {
            let one_writer = shared.locks.lock(planned.id.as_str());
            // Another file of the same source id that does not continue the session imported
            // from a file still there (a copy continued elsewhere, a file of the same name):
            // a session of its own, never one that replaces it. Decided holding the session,
            // so two such files of one run never write one session.
            if matches!(other_files_session(store, s, &planned), Ok(true))
                && let Ok(p) = crate::write::copy_session_id(s)
                    .map_err(crate::write::PlanError::from)
                    .and_then(|id| crate::write::plan_as(s, opts.now, id))
            {
                drop(one_writer);
                planned = p;
                outcome.id = planned.id.to_string();
                continue;
            }
            let prior = old.and_then(|u| u.sessions.get(planned.id.as_str()));
            break apply(store, &planned, prior, opts.dry_run);
        };
        match applied {
            Ok((action, added)) => {
                outcome.action = action;
                outcome.added_messages = added;
                if action == Action::Skipped {
                    complete = false;
                    outcome.reason = Some(
                        "continued here since its import: not replaced (fork it to keep both)"
                            .into(),
                    );
                }
            }
            Err(e) => {
                complete = false;
                outcome.action = Action::Failed;
                outcome.reason = Some(e.to_string());
                out.issues
                    .push(SourceIssue::in_file(&s.source_path, e.to_string()));
            }
        }
        sessions.insert(
            planned.id.to_string(),
            SessionMark {
                messages: planned.written().len(),
                events: planned.events.len(),
            },
        );
        out.sessions.push(outcome);
        planned_here.push(planned);
    }
    if !opts.dry_run && complete {
        let files = marks.into_iter().map(FileMark::with_extent).collect();
        out.mark = Some(UnitMark { files, sessions });
    }
    out
}

/// Whether session `p.id` was imported from another file than `s`'s, one still there, whose
/// messages `s` does not continue: `s` is then a session of its own ([`crate::write::copy_session_id`]).
fn other_files_session(
    store: &SessionStore,
    s: &ImportedSession,
    p: &Planned,
) -> Result<bool, StoreError> {
    let meta = match store.meta(&p.id) {
        Ok(m) => m,
        Err(StoreError::NotFound { .. }) => return Ok(false),
        Err(e) => return Err(e),
    };
    let Some(from) = meta
        .imported_from()
        .and_then(|f| f.get("path"))
        .and_then(serde_json::Value::as_str)
        .map(std::path::Path::new)
    else {
        return Ok(false);
    };
    if from == s.source_path || std::fs::symlink_metadata(from).is_err() {
        return Ok(false);
    }
    let old = store.messages(&p.id)?.messages;
    let written = p.written();
    let continues = old.len() <= written.len() && old.iter().zip(written).all(|(a, b)| a == b);
    Ok(!continues)
}

/// Whether `s` (planned as `p`), whose agent and source id a hand-back's `mark` names, is the
/// file that hand-back wrote, or the agent's own continuation of it. Known by its content,
/// never by its name: it holds the hand-back's first message (whose id the hand-back derived
/// from a new random id, so no other file holds it unless copied from this one). Of copies,
/// the hand-back's own file, where it still is, is the one; a copy elsewhere is a session of
/// its own. A file beside the hand-back's own, with the conversation's id, is the agent's
/// continuation of it (Gemini CLI, resuming, may start a new chat file there when the minute
/// in its name has changed). A mark of a version that kept no messages knows the file by the
/// path it wrote.
fn is_handed_file(s: &ImportedSession, p: &Planned, mark: &HandoffMark) -> bool {
    if s.source_path != mark.path && s.source_path.parent() == mark.path.parent() {
        return true;
    }
    let Some(first) = mark.handed.first() else {
        return s.source_path == mark.path;
    };
    let holds = |msgs: &[StoredMessage]| msgs.iter().any(|m| &m.id == first);
    if !holds(p.written()) {
        return false;
    }
    s.source_path == mark.path || std::fs::symlink_metadata(&mark.path).is_err()
}

/// A file `session handoff` wrote, grown by the agent since (`s`, planned as `p`): the
/// messages after the hand-back (later than `mark.at`) that are neither what the hand-back
/// carried (`mark.handed`: an agent may rewrite the history it resumes, as Gemini CLI does,
/// with new times) nor already in the session it came from (by id: ids come from the source,
/// the same on every import) are appended to that session, never written as a new one. A
/// session gone since is not recreated.
fn handed_back(
    store: &SessionStore,
    s: &ImportedSession,
    p: &Planned,
    mark: &HandoffMark,
    dry_run: bool,
) -> SessionOutcome {
    let mut outcome = SessionOutcome {
        id: mark.session.clone(),
        source_id: s.source_id.clone(),
        path: s.source_path.clone(),
        action: Action::Unchanged,
        title: p.title.clone(),
        parent_id: None,
        messages: 0,
        added_messages: 0,
        events: 0,
        redactions: 0,
        redaction_rules: Default::default(),
        findings: Vec::new(),
        last_activity: p.last_activity,
        reason: None,
        placed: None,
    };
    let fail = |mut o: SessionOutcome, action: Action, why: String| {
        o.action = action;
        o.reason = Some(why);
        o
    };
    let Ok(id) = SessionId::new(mark.session.clone()) else {
        return fail(
            outcome,
            Action::Skipped,
            "a hand-back mark names no session".into(),
        );
    };
    let existing = match store.messages(&id) {
        Ok(m) => m.messages,
        Err(StoreError::NotFound { .. }) => {
            return fail(
                outcome,
                Action::Skipped,
                format!("handed back from session {id}, which is gone: not imported again"),
            );
        }
        Err(e) => return fail(outcome, Action::Failed, e.to_string()),
    };
    let mut have: std::collections::HashSet<&str> =
        existing.iter().map(|m| m.id.as_str()).collect();
    have.extend(mark.handed.iter().map(String::as_str));
    let new: Vec<&StoredMessage> = p
        .written()
        .iter()
        .filter(|m| m.timestamp > mark.at && !have.contains(m.id.as_str()))
        .collect();
    outcome.messages = existing.len() + new.len();
    if new.is_empty() {
        return outcome;
    }
    if !dry_run {
        let appended = (|| -> Result<(), StoreError> {
            let mut writer = store.writer(&id)?;
            for m in &new {
                writer.append(m)?;
            }
            writer.sync()?;
            let last = new.iter().map(|m| m.timestamp).max().unwrap_or(0);
            let turns = new
                .iter()
                .filter(|m| m.role == freecode_core::message::Role::User)
                .count();
            writer.update_meta(|m| {
                m.last_turn_at = m.last_turn_at.max(last);
                m.turn_count += turns as u64;
            })?;
            Ok(())
        })();
        if let Err(e) = appended {
            return fail(outcome, Action::Failed, e.to_string());
        }
    }
    outcome.action = Action::Updated;
    outcome.added_messages = new.len();
    outcome
}

/// The outcome of a session that could not be planned: skipped, with the reason.
/// Where session `s`, whose source names no usable project, belongs ([`crate::place`]);
/// `unresolved` says why its project hash named no directory known here, if it did not.
fn place_session(
    s: &ImportedSession,
    unresolved: Option<&str>,
    shared: &Shared<'_>,
    store: &SessionStore,
) -> Placed {
    let known = shared.known(store);
    let roots = known.iter().flat_map(|k| k.roots());
    let (project, how, why) = match crate::place::place(s, s.project_hash.as_deref(), roots) {
        crate::place::Placement::Hash(dir) => (
            dir,
            "hash",
            "a directory the chat names has its project hash".to_owned(),
        ),
        crate::place::Placement::Guess { dir, why } => (dir, "guess", why),
        crate::place::Placement::Unplaced => (
            crate::place::unplaced_project(store.home().root()),
            "unplaced",
            match (unresolved, &s.project_path) {
                (Some(why), _) => format!("{why}, and the chat names no path to place it by"),
                (None, Some(relative)) => format!(
                    "its source names {relative:?}, not an absolute path, and the chat no path \
                     to place it by"
                ),
                (None, None) => {
                    "its source names no project, and the chat no path to place it by".to_owned()
                }
            },
        ),
    };
    Placed { project, how, why }
}

fn skipped_unplanned(s: &ImportedSession, reason: String) -> SessionOutcome {
    let id_of = |source: &str| session_id(s.agent, source).ok().map(|id| id.to_string());
    SessionOutcome {
        id: id_of(&s.source_id).unwrap_or_default(),
        source_id: s.source_id.clone(),
        path: s.source_path.clone(),
        action: Action::Skipped,
        title: s.title.clone().unwrap_or_default(),
        parent_id: s.parent.as_ref().and_then(|p| id_of(&p.source_id)),
        messages: s.message_count(),
        added_messages: 0,
        events: 0,
        redactions: 0,
        redaction_rules: Default::default(),
        findings: Vec::new(),
        last_activity: s.updated_ms.unwrap_or(0),
        reason: Some(reason),
        placed: None,
    }
}

/// What discovery looks for in a directory, for the message when it finds nothing.
fn looks_for(agent: Agent) -> &'static str {
    match agent {
        Agent::ClaudeCode => "`*.jsonl` transcripts",
        Agent::Codex => "`rollout-*.jsonl` and `rollout-*.jsonl.zst` files",
        Agent::GeminiCli => "`session-*.json` and `session-*.jsonl` chats",
        Agent::Opencode => "`opencode*.db` databases and a `storage/` tree",
        Agent::Goose => "`sessions.db` and `*.jsonl` sessions",
    }
}

/// Flushes everything written below the home to the disk (`syncfs`).
fn sync_home(home: &freecode_store::Home) -> Result<(), StoreError> {
    let root = home.root();
    let io = |e: std::io::Error| StoreError::Io {
        op: "sync",
        path: root.to_owned(),
        source: e,
    };
    let dir = std::fs::File::open(root).map_err(io)?;
    rustix::fs::syncfs(&dir).map_err(|e| io(e.into()))
}

/// Writes one planned session; returns what was done and how many messages were written.
fn apply(
    store: &SessionStore,
    p: &Planned,
    prior: Option<&SessionMark>,
    dry_run: bool,
) -> Result<(Action, usize), StoreError> {
    let written = p.written();
    let existing = match store.meta(&p.id) {
        Ok(meta) => Some(meta),
        Err(StoreError::NotFound { .. }) => None,
        // A session of ours a power cut (or anything else) damaged: written again whole.
        Err(_) if !dry_run => {
            put(store, p)?;
            return Ok((Action::Replaced, written.len()));
        }
        Err(e) => return Err(e),
    };
    let Some(meta) = existing else {
        if !dry_run {
            put(store, p)?;
        }
        return Ok((Action::Imported, written.len()));
    };
    if !meta.is_untouched_import() {
        return Ok((Action::Skipped, 0));
    }
    let old = store.messages(&p.id)?.messages;
    let old_events = prior
        .map(|m| m.events)
        .map_or_else(|| count_events(store, &p.id), Ok)?;
    let prefix = old.len() <= written.len()
        && old.iter().zip(written).all(|(a, b)| a == b)
        && old_events <= p.events.len();
    if !prefix {
        if !dry_run {
            put(store, p)?;
        }
        return Ok((Action::Replaced, written.len()));
    }
    let new_messages = &written[old.len()..];
    let new_events = &p.events[old_events..];
    // An unreadable memory file is written again.
    let same_memory = store.compaction_memory(&p.id).ok().flatten() == p.memory;
    if new_messages.is_empty() && new_events.is_empty() && same_meta(&meta, p) && same_memory {
        return Ok((Action::Unchanged, 0));
    }
    if !dry_run {
        let mut writer = store.writer(&p.id)?;
        for m in new_messages {
            writer.append(m)?;
        }
        if !new_events.is_empty() {
            let path = freecode_store::rollout::events_path(store.home(), &p.id);
            if let Some(dir) = path.parent() {
                fsutil::create_dir_private(dir)?;
            }
            let mut bytes = Vec::new();
            for e in new_events {
                bytes.extend_from_slice(&e.to_line());
            }
            let mut file = fsutil::open_append(&path)?;
            fsutil::append_bytes(&mut file, &path, &bytes).map_err(|e| StoreError::Io {
                op: "append",
                path: path.clone(),
                source: e,
            })?;
        }
        if !same_memory {
            write_memory(store, p)?;
        }
        writer.sync()?;
        writer.update_meta(|m| edit_meta(m, p, None))?;
    }
    let action = if new_messages.is_empty() && new_events.is_empty() {
        Action::Unchanged
    } else {
        Action::Updated
    };
    Ok((action, new_messages.len()))
}

/// `memory/<id>/memory.json` as planned: written atomically, or removed when the source holds
/// no compaction (any more).
fn write_memory(store: &SessionStore, p: &Planned) -> Result<(), StoreError> {
    let path = store.home().memory_file(&p.id);
    match &p.memory {
        Some(memory) => {
            fsutil::create_dir_private(&store.home().memory_dir(&p.id))?;
            fsutil::write_atomic(&path, &memory_bytes(memory), false)
        }
        None => match std::fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(StoreError::Io {
                op: "remove",
                path,
                source: e,
            }),
        },
    }
}

/// The bytes of `memory.json`, as the session writer's compaction writes them.
fn memory_bytes(memory: &freecode_core::memory::CompactionMemory) -> Vec<u8> {
    serde_json::to_vec_pretty(memory).unwrap_or_default()
}

/// Events in the session's rollout log now (complete lines).
fn count_events(store: &SessionStore, id: &SessionId) -> Result<usize, StoreError> {
    let path = freecode_store::rollout::events_path(store.home(), id);
    let mut n = 0;
    freecode_store::rollout::read_events(&path, |_| n += 1)?;
    Ok(n)
}

fn put(store: &SessionStore, p: &Planned) -> Result<(), StoreError> {
    let new = NewSession {
        title: p.title.clone(),
        project_path: p.project_path.clone(),
        provider: p.provider.clone(),
        model: p.model.clone(),
    };
    let extra = |id: &SessionId| {
        let mut log = Vec::new();
        for e in &p.events {
            log.extend_from_slice(&e.to_line());
        }
        let mut files = vec![(freecode_store::rollout::events_path(store.home(), id), log)];
        if let Some(memory) = &p.memory {
            files.push((store.home().memory_file(id), memory_bytes(memory)));
        }
        files
    };
    store.put_populated(&p.id, new, p.written(), &extra, |m| edit_meta(m, p, None))?;
    if p.memory.is_none() {
        // A summary of an earlier import of a source that no longer holds its compaction.
        write_memory(store, p)?;
    }
    Ok(())
}

/// The meta fields an import sets (on create, replace and growth alike). `importedAt` is this
/// import's time (so `lastTurnAt`, never later than it, still marks an untouched import),
/// or `old`'s when given (to compare).
fn edit_meta(
    m: &mut freecode_core::SessionMeta,
    p: &Planned,
    old: Option<&freecode_core::SessionMeta>,
) {
    m.title = p.title.clone();
    m.project_path = p.project_path.clone();
    m.provider = p.provider.clone();
    m.model = p.model.clone();
    m.status = SessionStatus::Active;
    m.created_at = p.created_at;
    m.updated_at = p.last_activity;
    m.last_turn_at = p.last_activity;
    m.turn_count = p.turn_count;
    m.parent_id = p.parent_id.as_ref().map(ToString::to_string);
    m.aggregated_token_count = p.tokens;
    let mut from = p.imported_from.clone();
    let first = old
        .and_then(|o| o.imported_from())
        .and_then(|f| f.get("importedAt"))
        .cloned();
    if let (Some(at), Some(obj)) = (first, from.as_object_mut()) {
        obj.insert("importedAt".into(), at);
    }
    m.extra.insert(IMPORTED_FROM.to_owned(), from);
}

/// Whether the meta already says what the plan says.
fn same_meta(meta: &freecode_core::SessionMeta, p: &Planned) -> bool {
    let mut want = meta.clone();
    edit_meta(&mut want, p, Some(meta));
    want == *meta
}

/// Findings of a session listed one by one on a dry run (the count goes on past them).
pub const MAX_FINDINGS: usize = 50;

/// What the export redactor would find in `messages`: the count per rule, and the first
/// [`MAX_FINDINGS`] findings with their place (`messages[3].parts[0].result`) and a masked
/// preview, never the value.
pub fn count_redactions(
    r: &freecode_core::redact::Redactor,
    messages: &[StoredMessage],
) -> (
    std::collections::BTreeMap<String, usize>,
    Vec<freecode_core::bundle::RedactionNote>,
) {
    struct Walk<'r> {
        r: &'r freecode_core::redact::Redactor,
        counts: std::collections::BTreeMap<String, usize>,
        notes: Vec<freecode_core::bundle::RedactionNote>,
        path: Vec<String>,
    }
    impl Walk<'_> {
        fn value(&mut self, v: &Value) {
            match v {
                Value::String(s) => {
                    for f in self.r.scan(s) {
                        *self.counts.entry(f.kind.name().to_owned()).or_default() += 1;
                        if self.notes.len() < MAX_FINDINGS {
                            self.notes.push(freecode_core::bundle::RedactionNote {
                                kind: f.kind.name().to_owned(),
                                location: self.path.concat(),
                                preview: freecode_core::redact::preview(&s[f.range()]),
                            });
                        }
                    }
                }
                Value::Array(items) => {
                    for (i, x) in items.iter().enumerate() {
                        self.path.push(format!("[{i}]"));
                        self.value(x);
                        self.path.pop();
                    }
                }
                Value::Object(map) => {
                    for (k, x) in map {
                        self.path.push(format!(".{k}"));
                        self.value(x);
                        self.path.pop();
                    }
                }
                _ => {}
            }
        }
    }
    let mut walk = Walk {
        r,
        counts: Default::default(),
        notes: Vec::new(),
        path: vec!["messages".to_owned()],
    };
    for (i, m) in messages.iter().enumerate() {
        if let Ok(v) = serde_json::to_value(m) {
            walk.path.push(format!("[{i}]"));
            walk.value(&v);
            walk.path.pop();
        }
    }
    (walk.counts, walk.notes)
}

/// Where `agent` keeps its sessions on this machine, and what an import would bring.
#[derive(Debug, Clone, PartialEq)]
pub struct Detected {
    /// The agent.
    pub agent: Agent,
    /// Its default locations that exist.
    pub roots: Vec<PathBuf>,
    /// Sessions an import would bring (children included).
    pub sessions: usize,
    /// Their messages.
    pub messages: usize,
    /// Bytes of source files.
    pub bytes: u64,
}

/// [`Detected`] for every agent, its variables read through `var`.
///
/// Every unit is read whole: the counts are those an import would write (sessions after forks
/// and subagents are split off, messages after Claude Code's split lines are merged by
/// `message.id` and only the live branch kept, Codex's output items grouped per model call,
/// Gemini's records de-duplicated by id, goose's tool-response-only messages dropped), and no
/// cheaper count (lines, file sizes, `COUNT(*)` of a table's rows) gives those numbers: a line
/// count overstates Claude Code's messages several times over. Reading without writing runs at
/// several times an import's speed (`examples/import_bench.rs` prints it).
pub fn detect(
    var: &dyn Fn(&str) -> Option<std::ffi::OsString>,
    issues: &mut Vec<SourceIssue>,
) -> Vec<Detected> {
    let now = freecode_store::now_ms();
    Agent::ALL
        .into_iter()
        .map(|agent| {
            let mut d = Detected {
                agent,
                roots: Vec::new(),
                sessions: 0,
                messages: 0,
                bytes: 0,
            };
            d.roots = roots_here(agent, var);
            for root in &d.roots {
                for unit in crate::discover(agent, root, issues) {
                    d.bytes += unit_bytes(&unit);
                    if let Ok(read) = crate::read(&unit) {
                        d.sessions += read.sessions.len();
                        // What an import writes: the messages after a compaction, say, not
                        // the source's every prompt and response (the project, which the
                        // import places, changes no count).
                        d.messages += read
                            .sessions
                            .iter()
                            .map(|s| {
                                let placed;
                                let s = if s.project_path.as_deref().is_none_or(|p| {
                                    freecode_core::project_key::normalize_absolute(p).is_none()
                                }) {
                                    placed = ImportedSession {
                                        project_path: Some("/".into()),
                                        ..s.clone()
                                    };
                                    &placed
                                } else {
                                    s
                                };
                                plan(s, now)
                                    .map_or_else(|_| s.message_count(), |p| p.written().len())
                            })
                            .sum::<usize>();
                    }
                }
            }
            d
        })
        .collect()
}

/// `agent`'s own locations that exist on this machine (nothing read in them).
pub fn roots_here(agent: Agent, var: &dyn Fn(&str) -> Option<std::ffi::OsString>) -> Vec<PathBuf> {
    crate::default_roots(agent, var)
        .into_iter()
        .filter(|r| exists(r))
        .collect()
}

fn exists(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok()
}

fn unit_bytes(unit: &SourceUnit) -> u64 {
    unit.files()
        .filter_map(|f| std::fs::symlink_metadata(f).ok())
        .map(|m| m.len())
        .sum()
}

#[cfg(test)]
mod tests;
