//! `freecode import --watch` and `freecode mcp --watch`: the agents' directories followed
//! (the `notify` crate: inotify, FSEvents, ReadDirectoryChangesW) and each change imported
//! through the same incremental run as `freecode import` ([`super::run_roots`]: a unit whose
//! files stat as their watermark says is not opened, a grown one appends, a rewritten or
//! truncated one is replaced), so a watched session is current within a second of its agent
//! writing it.
//!
//! - **Roots.** Each agent's own locations ([`freecode_import::default_roots`], by its
//!   variables). A root that exists is watched recursively; one that does not yet is waited
//!   for: its nearest existing parent is watched (not recursively), and each event there or a
//!   periodic look ([`WatchRequest::rescan`]) checks again, so a root made later (or removed and
//!   made again) is picked up and imported whole.
//! - **Batches.** Events are debounced: a batch is imported once no event came for
//!   [`WatchRequest::debounce`] (250 ms), or [`MAX_DELAY`] after its first event while the agent
//!   keeps writing. Only the agents an event concerns are imported; events on files no importer
//!   reads (logs, temporary files) are ignored. Every [`WatchRequest::rescan`] all agents are
//!   imported anyway (an unchanged tree costs a stat per file), which catches what a missed or
//!   overflowed event queue left out.
//! - **Files that move.** A rotated file (renamed, a new one in its place), a truncated one, or
//!   a deleted one is nothing special: the next run reads what is there. A deleted source never
//!   deletes its imported session.
//! - **Stopping.** [`watch`] returns when `stop` is raised, after the batch in progress (the
//!   flag is looked at every [`TICK`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use freecode_import::source::Agent;
use freecode_store::Home;
use notify::event::{AccessKind, AccessMode, EventKind};
use notify::{RecursiveMode, Watcher as _};

use super::{ImportRequest, env_var, run_roots};
use crate::error::{Error, Result};
use crate::types::ImportReport;

/// The quiet time that ends a batch.
pub const DEBOUNCE: Duration = Duration::from_millis(250);
/// The longest a batch waits after its first event (an agent writing without pause).
pub const MAX_DELAY: Duration = Duration::from_millis(750);
/// How often every agent is imported without an event.
pub const RESCAN: Duration = Duration::from_secs(30);
/// How often the stop flag is looked at.
pub const TICK: Duration = Duration::from_millis(100);

/// What to follow.
#[derive(Debug, Clone)]
pub struct WatchRequest {
    /// The agents (their own locations are watched).
    pub agents: Vec<Agent>,
    /// The project of sessions whose source names none (as `import --project`).
    pub project: Option<String>,
    /// The quiet time that ends a batch ([`DEBOUNCE`]).
    pub debounce: Duration,
    /// How often everything is imported without an event ([`RESCAN`]).
    pub rescan: Duration,
}

impl WatchRequest {
    /// `agents` with the default timings.
    pub fn new(agents: Vec<Agent>, project: Option<String>) -> Self {
        Self {
            agents,
            project,
            debounce: DEBOUNCE,
            rescan: RESCAN,
        }
    }
}

/// What the watcher tells its caller.
#[derive(Debug)]
pub enum WatchEvent {
    /// `root` of `agent` is followed: watched itself (`waiting` false), or, not existing yet,
    /// through its nearest existing parent `watched`.
    Watching {
        /// The agent.
        agent: Agent,
        /// Its location.
        root: PathBuf,
        /// The directory watched for it.
        watched: PathBuf,
        /// Whether the root does not exist yet.
        waiting: bool,
    },
    /// One import run of an agent's locations (every batch, changed or not).
    Imported(ImportReport),
    /// An import run failed; the watcher goes on (the next change tries again).
    Failed {
        /// The agent.
        agent: Agent,
        /// Why.
        error: Error,
    },
}

/// One location of one agent.
#[derive(Debug)]
struct Root {
    agent: Agent,
    path: PathBuf,
    /// Its canonical form, when it exists (FSEvents reports real paths).
    real: Option<PathBuf>,
    /// Whether it exists and is watched itself.
    live: bool,
    /// What is watched for it.
    watched: Option<PathBuf>,
}

/// Follows `req.agents`' locations and imports each change into `home`, telling `on_event`
/// what happens, until `stop` is raised. Fails only when no watch can be set up at all.
pub fn watch(
    home: &Home,
    req: &WatchRequest,
    stop: &AtomicBool,
    on_event: &mut dyn FnMut(WatchEvent),
) -> Result<()> {
    let (tx, rx) = mpsc::channel();
    let mut watcher = notify::recommended_watcher(tx)
        .map_err(|e| Error::Failed(format!("cannot watch the file system: {e}")))?;
    let mut roots: Vec<Root> = Vec::new();
    for &agent in &req.agents {
        for path in freecode_import::default_roots(agent, &env_var) {
            let path = std::path::absolute(&path).unwrap_or(path);
            roots.push(Root {
                agent,
                path,
                real: None,
                live: false,
                watched: None,
            });
        }
    }
    let mut watches: BTreeMap<PathBuf, RecursiveMode> = BTreeMap::new();
    let mut pending: BTreeSet<Agent> = BTreeSet::new();
    arm(
        &mut watcher,
        &mut roots,
        &mut watches,
        &mut pending,
        on_event,
    );
    // The first run catches up with what was written while nobody watched.
    pending.extend(roots.iter().filter(|r| r.live).map(|r| r.agent));
    let mut first: Option<Instant> = Some(Instant::now());
    let mut last = Instant::now() - req.debounce;
    let mut last_rescan = Instant::now();
    while !stop.load(Ordering::SeqCst) {
        let now = Instant::now();
        let wait = match first {
            Some(first) if !pending.is_empty() => {
                let quiet = req.debounce.saturating_sub(now - last);
                let longest = MAX_DELAY.saturating_sub(now - first);
                quiet.min(longest).min(TICK)
            }
            _ => TICK,
        };
        match rx.recv_timeout(wait) {
            Ok(Ok(event)) => {
                let mut hit = false;
                for path in &event.paths {
                    for root in &roots {
                        if concerns(root, &event.kind, path) {
                            pending.insert(root.agent);
                            hit = true;
                        }
                    }
                }
                if hit {
                    last = Instant::now();
                    first.get_or_insert(last);
                }
            }
            Ok(Err(e)) => {
                // An overflowed queue or a watch lost: everything is looked at again.
                tracing::warn!("watching: {e}; every location is imported again");
                pending.extend(req.agents.iter().copied());
                last = Instant::now();
                first.get_or_insert(last);
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(Error::Internal("the file-system watcher stopped".into()));
            }
        }
        let now = Instant::now();
        if now - last_rescan >= req.rescan {
            last_rescan = now;
            pending.extend(req.agents.iter().copied());
            first.get_or_insert(now);
            last = now - req.debounce;
        }
        let due = first.is_some_and(|f| now - last >= req.debounce || now - f >= MAX_DELAY);
        if pending.is_empty() || !due {
            continue;
        }
        // A root made, removed or moved since: watched anew (and imported whole).
        arm(
            &mut watcher,
            &mut roots,
            &mut watches,
            &mut pending,
            on_event,
        );
        first = None;
        for agent in std::mem::take(&mut pending) {
            let live: Vec<PathBuf> = roots
                .iter()
                .filter(|r| r.agent == agent && r.live)
                .map(|r| r.path.clone())
                .collect();
            if live.is_empty() {
                continue;
            }
            let req = ImportRequest {
                agent,
                paths: Vec::new(),
                since: None,
                dry_run: false,
                project: req.project.clone(),
                now: freecode_store::now_ms(),
            };
            match run_roots(home, &req, &live) {
                Ok(report) => on_event(WatchEvent::Imported(report)),
                Err(error) => on_event(WatchEvent::Failed { agent, error }),
            }
        }
    }
    Ok(())
}

/// Watches each root as it now is: itself (recursively) when it exists, else its nearest
/// existing parent; the watches no root needs any more are dropped. A root that became live
/// puts its agent in `pending`.
fn arm(
    watcher: &mut notify::RecommendedWatcher,
    roots: &mut [Root],
    watches: &mut BTreeMap<PathBuf, RecursiveMode>,
    pending: &mut BTreeSet<Agent>,
    on_event: &mut dyn FnMut(WatchEvent),
) {
    let mut want: BTreeMap<PathBuf, RecursiveMode> = BTreeMap::new();
    for root in roots.iter_mut() {
        let exists = std::fs::metadata(&root.path).is_ok();
        let watched = if exists {
            root.path.clone()
        } else {
            nearest_existing(&root.path)
        };
        let mode = if exists {
            RecursiveMode::Recursive
        } else {
            RecursiveMode::NonRecursive
        };
        if want.get(&watched) != Some(&RecursiveMode::Recursive) {
            want.insert(watched.clone(), mode);
        }
        if exists && !root.live {
            pending.insert(root.agent);
        }
        if root.watched.as_ref() != Some(&watched) || root.live != exists {
            on_event(WatchEvent::Watching {
                agent: root.agent,
                root: root.path.clone(),
                watched: watched.clone(),
                waiting: !exists,
            });
        }
        root.live = exists;
        root.real = if exists {
            std::fs::canonicalize(&root.path).ok()
        } else {
            None
        };
        root.watched = Some(watched);
    }
    let stale: Vec<PathBuf> = watches
        .iter()
        .filter(|(p, m)| want.get(*p) != Some(*m))
        .map(|(p, _)| p.clone())
        .collect();
    for path in stale {
        // A watch on a directory since removed is already gone.
        let _ = watcher.unwatch(&path);
        watches.remove(&path);
    }
    for (path, mode) in want {
        if watches.contains_key(&path) {
            continue;
        }
        match watcher.watch(&path, mode) {
            Ok(()) => {
                watches.insert(path, mode);
            }
            // Removed in between, or unreadable: the next look tries again.
            Err(e) => tracing::warn!("cannot watch {}: {e}", path.display()),
        }
    }
}

/// The nearest ancestor of `path` that exists (`/` at worst).
fn nearest_existing(path: &Path) -> PathBuf {
    path.ancestors()
        .skip(1)
        .find(|a| std::fs::metadata(a).is_ok_and(|m| m.is_dir()))
        .map_or_else(|| PathBuf::from("/"), Path::to_path_buf)
}

/// Whether an event of `kind` on `path` is something `root`'s import would see: inside the
/// root, on a file an importer reads (or a directory); or, while the root does not exist, on
/// the way to it.
fn concerns(root: &Root, kind: &EventKind, path: &Path) -> bool {
    match kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => {}
        EventKind::Access(_) => return false,
        _ => {}
    }
    if !root.live {
        return root.path.starts_with(path) || path.starts_with(&root.path);
    }
    let inside = path.starts_with(&root.path)
        || root
            .real
            .as_ref()
            .is_some_and(|real| path.starts_with(real));
    if !inside {
        // The root itself moved or went away (its parent is not watched: the next look sees).
        return root.path.starts_with(path);
    }
    read_by_importers(path)
}

/// Whether the importers read a file so named: session logs and chats (`.jsonl`, `.json`,
/// `.zst`), databases and their journals (`.db`, `-wal`, `-shm`), and directories (no
/// extension), whose creation, removal and renaming move whole sessions.
fn read_by_importers(path: &Path) -> bool {
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return true;
    };
    let dir_like = Path::new(name).extension().is_none();
    dir_like
        || [".jsonl", ".json", ".zst", ".db", "-wal", "-shm"]
            .iter()
            .any(|end| name.ends_with(end))
}

#[cfg(test)]
mod tests {
    use super::*;
    use notify::event::{CreateKind, ModifyKind};

    fn root(path: &str, live: bool) -> Root {
        Root {
            agent: Agent::Codex,
            path: PathBuf::from(path),
            real: None,
            live,
            watched: None,
        }
    }

    #[test]
    fn only_what_an_importer_reads_is_a_change() {
        let live = root("/h/.codex", true);
        let data = EventKind::Modify(ModifyKind::Any);
        for (path, want) in [
            ("/h/.codex/sessions/2026/01/01/rollout-x.jsonl", true),
            ("/h/.codex/sessions/2026/01/01/rollout-x.jsonl.zst", true),
            ("/h/.codex/sessions/2026", true),
            ("/h/.codex/state.db-wal", true),
            ("/h/.codex/log/codex-tui.log", false),
            ("/h/.codex/tmp.swp", false),
            ("/h/elsewhere/rollout-x.jsonl", false),
            // The root itself removed.
            ("/h/.codex", true),
        ] {
            assert_eq!(concerns(&live, &data, Path::new(path)), want, "{path}");
        }
        // Opening or reading a file changes nothing; closing it after a write may.
        let file = Path::new("/h/.codex/sessions/rollout-x.jsonl");
        assert!(!concerns(
            &live,
            &EventKind::Access(AccessKind::Open(AccessMode::Any)),
            file
        ));
        assert!(concerns(
            &live,
            &EventKind::Access(AccessKind::Close(AccessMode::Write)),
            file
        ));
    }

    #[test]
    fn a_root_not_made_yet_is_waited_for_on_the_way_to_it() {
        let waiting = root("/h/.codex", false);
        let made = EventKind::Create(CreateKind::Folder);
        assert!(concerns(&waiting, &made, Path::new("/h/.codex")));
        assert!(concerns(&waiting, &made, Path::new("/h")));
        assert!(!concerns(&waiting, &made, Path::new("/h/.bashrc")));
    }

    #[test]
    fn the_nearest_existing_parent_is_watched_for_a_missing_root() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let missing = dir.path().join("a/b/c");
        assert_eq!(nearest_existing(&missing), dir.path());
    }
}
