//! The session operations: which session an id or a prefix names, list, show (whole, a page, or
//! streamed), start, fork, rename, archive, delete, restore, purge, compact, resume, and the
//! latest interrupted session.
//!
//! Listing goes through the index when it can be used ([`crate::index::indexed_or_scanned`]),
//! one stat per session and no file opened; the scan of the files gives the same answer.

use std::path::{Path, PathBuf};

use freecode_core::{SessionId, SessionMeta, SessionStatus, StoredMessage};
use freecode_store::session::MessageBlocks;
use freecode_store::{Home, ListFilter, NewSession, SessionStore, StoreError};

use crate::error::{Error, Result};
use crate::index::{indexed_or_scanned, warn_problems};
use crate::types::{
    Compaction, Deleted, InterruptedRef, JsonStyle, Resumed, SessionDetail, SessionRef,
    write_detail,
};

/// The store of `home`.
pub fn open(home: &Home) -> Result<SessionStore> {
    Ok(SessionStore::open(home.clone())?)
}

/// The session `s` names: a whole id, or any prefix of exactly one session's id (as git takes
/// short hashes); an ambiguous prefix is an [`crate::ErrorKind::Invalid`] error listing the
/// candidates.
///
/// An id (or a unique prefix of one) that names no session of ours is looked up among the
/// ids the source agents gave the sessions imported from them (`importedFrom.sourceId`: the
/// id `claude --resume` or `codex resume` shows): the whole id by the id it derives, a prefix
/// through the listing. A prefix that matches sessions of both kinds is ours.
pub fn resolve_id(store: &SessionStore, s: &str) -> Result<SessionId> {
    match store.resolve_prefix(s) {
        Err(StoreError::NotFound { .. }) => match by_source_id(store, s)? {
            Some(id) => Ok(id),
            None => Ok(store.resolve_prefix(s)?),
        },
        r => Ok(r?),
    }
}

/// The session imported from a source session whose id is `s` or starts with it; `None` when
/// there is none; ambiguous when several.
fn by_source_id(store: &SessionStore, s: &str) -> Result<Option<SessionId>> {
    let s = s.trim();
    if s.is_empty() {
        return Ok(None);
    }
    // The whole id: the session id it derives, per agent.
    let mut found: std::collections::BTreeSet<String> = freecode_import::source::Agent::ALL
        .iter()
        .filter_map(|a| freecode_import::write::session_id(*a, s).ok())
        .filter(|id| store.locate(id).is_ok())
        .map(|id| id.to_string())
        .collect();
    if found.is_empty() {
        let listed = list(
            store.home(),
            &ListRequest {
                include_deleted: true,
                ..ListRequest::default()
            },
        )?;
        let lower = s.to_ascii_lowercase();
        let matched: Vec<(&str, String)> = listed
            .sessions
            .iter()
            .filter_map(|m| {
                let src = m
                    .imported_from()
                    .and_then(|f| f.get("sourceId"))
                    .and_then(serde_json::Value::as_str)?;
                src.to_ascii_lowercase()
                    .starts_with(&lower)
                    .then(|| (src, m.id.clone()))
            })
            .collect();
        // A conversation and the branches imported from it (`<id>@<where it branched>`)
        // share the agent's id: the conversation itself is the one that id names.
        let bases: std::collections::BTreeSet<&str> = matched
            .iter()
            .map(|(src, _)| src.split('@').next().unwrap_or(src))
            .collect();
        let whole = matched.iter().find(|(src, _)| !src.contains('@'));
        found = match (bases.len(), whole) {
            (1, Some((_, id))) => std::iter::once(id.clone()).collect(),
            _ => matched.into_iter().map(|(_, id)| id).collect(),
        };
    }
    let mut found = found.into_iter();
    match (found.next(), found.next()) {
        (None, _) => Ok(None),
        (Some(id), None) => Ok(Some(SessionId::new(id)?)),
        (Some(a), Some(b)) => Err(StoreError::AmbiguousId {
            prefix: s.to_owned(),
            candidates: std::iter::once(a)
                .chain(std::iter::once(b))
                .chain(found)
                .collect(),
        }
        .into()),
    }
}

/// [`resolve_id`] for an operation that may not need a store: an id whose rollout log exists
/// is taken as it is, without opening (and so creating) anything.
pub fn resolve_recorded_id(home: &Home, s: &str) -> Result<SessionId> {
    let id = SessionId::new(s)?;
    if freecode_store::rollout::events_path(home, &id).is_file() {
        return Ok(id);
    }
    resolve_id(&open(home)?, s)
}

/// A `--status`/`status` filter: `active`, `interrupted`, `archived` or `deleted`.
pub fn parse_status(s: &str) -> Result<SessionStatus> {
    match SessionStatus::parse(s) {
        SessionStatus::Other(s) => Err(Error::Invalid(format!(
            "unknown status {s:?}: use active, interrupted, archived or deleted"
        ))),
        status => Ok(status),
    }
}

/// The order of a listing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Sort {
    /// Newest activity (`lastTurnAt`) first.
    #[default]
    Activity,
    /// Newest created first.
    Created,
    /// By title, A to Z (case-insensitive).
    Title,
}

/// What a listing selects.
#[derive(Debug, Clone, Default)]
pub struct ListRequest {
    /// Only this status (a `deleted` filter is the way to see deleted sessions).
    pub status: Option<SessionStatus>,
    /// Only sessions of this project directory or one below it, by whole components (a path
    /// made absolute by [`crate::scope::project_scope`]).
    pub within: Option<String>,
    /// Only sessions whose `projectPath` is exactly this (the original's `session.list`).
    pub project_path: Option<String>,
    /// Only sessions active (`lastTurnAt`) at or after this, ms.
    pub since: Option<i64>,
    /// Only sessions this agent wrote (`freecode`, or an import's agent).
    pub agent: Option<String>,
    /// Without a status filter, deleted sessions too.
    pub include_deleted: bool,
    /// The order.
    pub sort: Sort,
    /// At most this many.
    pub limit: Option<usize>,
    /// Answer from the files alone, never from (or into) the index: nothing at all is written
    /// (`session.list`, which the original answers by reading the files).
    pub from_files: bool,
}

/// A listing: the sessions selected, and the damaged session files left out.
#[derive(Debug, Default)]
pub struct Listed {
    /// The sessions, in the order asked for.
    pub sessions: Vec<SessionMeta>,
    /// Session directories that could not be read, with the reason.
    pub problems: Vec<(PathBuf, String)>,
}

/// The sessions `req` selects, newest activity first unless it says otherwise. The damaged
/// session files left out are logged (and returned).
pub fn list(home: &Home, req: &ListRequest) -> Result<Listed> {
    let filter = ListFilter {
        status: req.status.clone(),
        project_path: req.project_path.clone(),
        include_deleted: req.include_deleted,
        agent: req.agent.clone(),
        within: req.within.clone(),
        since: req.since,
        // In the listing's own order only: another order needs every session first.
        limit: req.limit.filter(|_| matches!(req.sort, Sort::Activity)),
    };
    let scan = || Ok(open(home)?.list(&filter)?);
    let listing = if req.from_files {
        scan()?
    } else {
        indexed_or_scanned(home, |ix| ix.list(&filter), scan)?
    };
    warn_problems(&listing.problems);
    let mut sessions: Vec<SessionMeta> = listing
        .sessions
        .into_iter()
        .filter(|m| {
            req.within
                .as_deref()
                .is_none_or(|p| freecode_core::project_key::within_project(&m.project_path, p))
        })
        .filter(|m| req.since.is_none_or(|t| m.last_turn_at >= t))
        .collect();
    match req.sort {
        // The listing is newest activity first already.
        Sort::Activity => {}
        Sort::Created => {
            sessions.sort_by(|x, y| y.created_at.cmp(&x.created_at).then(x.id.cmp(&y.id)));
        }
        Sort::Title => sessions.sort_by(|x, y| {
            x.title
                .to_lowercase()
                .cmp(&y.title.to_lowercase())
                .then(x.id.cmp(&y.id))
        }),
    }
    if let Some(n) = req.limit {
        sessions.truncate(n);
    }
    // Every session the outputs print names its agent.
    let sessions = sessions.into_iter().map(SessionMeta::with_agent).collect();
    Ok(Listed {
        sessions,
        problems: listing.problems,
    })
}

/// Every id a prefix could also match, sorted: `listed`, every session directory of the home
/// (deleted ones included) and every rollout log — names only, one `readdir` per directory, as
/// [`SessionStore::resolve_prefix`] looks (what the shortest unique prefix of an id is
/// measured against).
pub fn known_ids(home: &Home, listed: &[SessionMeta]) -> Vec<String> {
    let names = |dir: &Path| -> Vec<String> {
        std::fs::read_dir(dir)
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .filter_map(|e| e.file_name().to_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let root = home.root();
    let sessions = root.join("sessions");
    let mut ids: Vec<String> = listed.iter().map(|m| m.id.clone()).collect();
    for project in names(&sessions) {
        ids.extend(names(&sessions.join(project)));
    }
    ids.extend(names(&root.join("rollout").join("sessions")));
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// The meta of a session that is not soft-deleted: a deleted one is not found (the original's
/// session manager lists, resumes and forks only the sessions it lists).
pub fn visible(store: &SessionStore, id: &SessionId) -> Result<SessionMeta> {
    let meta = store.meta(id)?;
    if meta.is_deleted() {
        return Err(freecode_store::StoreError::NotFound { id: id.to_string() }.into());
    }
    Ok(meta)
}

/// One session with every readable message, built whole (a JSON-RPC batch, the web viewer's
/// `/api/sessions/{id}`): [`write_session`] writes the same bytes without holding it.
pub fn detail(store: &SessionStore, id: &SessionId) -> Result<SessionDetail> {
    let meta = store.meta(id)?.with_agent();
    let messages = store.messages(id)?.messages;
    Ok(SessionDetail { meta, messages })
}

/// Session `id`'s messages, a block at a time (`session show`, rendered or not: never the
/// whole log in memory).
pub fn message_blocks(store: &SessionStore, id: &SessionId) -> Result<MessageBlocks> {
    Ok(store.message_blocks(id)?)
}

/// [`SessionDetail`] of session `id` (`meta`, read by the caller) written as it is read, in
/// `style` ([`write_detail`]): `session show --json` and `session.get`.
pub fn write_session(
    store: &SessionStore,
    id: &SessionId,
    meta: &SessionMeta,
    style: JsonStyle,
    write: impl FnMut(&[u8]) -> Result<()>,
) -> Result<()> {
    write_detail(meta, store.message_blocks(id)?, style, write)
}

/// One page of a transcript: the meta, messages `[first, first + take)`, and whether more
/// follow.
#[derive(Debug)]
pub struct TranscriptPage {
    /// The session.
    pub meta: SessionMeta,
    /// Index of the first message shown.
    pub first: usize,
    /// The page's messages.
    pub messages: Vec<StoredMessage>,
    /// Whether messages follow this page.
    pub more: bool,
    /// Messages in the whole transcript (at least `first` plus this page's).
    pub total: usize,
}

impl TranscriptPage {
    /// The page as `session show --json --offset N --limit N` answers it: the meta, the
    /// messages and where the next page starts.
    pub fn into_session_page(self) -> crate::types::SessionPage {
        let count = self.messages.len();
        crate::types::SessionPage {
            meta: self.meta,
            messages: self.messages,
            page: crate::types::page::PageInfo {
                offset: self.first,
                count,
                has_more: self.more,
                next_offset: self.more.then_some(self.first + count),
                cut_by_size: false,
            },
        }
    }
}

/// Messages `[first, first + take)` of session `id`, read from the log's offset index and
/// stopped once the page is full, so any page of any session costs a block or two.
pub fn transcript_page(
    store: &SessionStore,
    id: &SessionId,
    first: usize,
    take: usize,
) -> Result<TranscriptPage> {
    let meta = store.meta(id)?;
    let (mut blocks, mut seen) = store.message_blocks_from(id, first)?;
    let mut messages = Vec::with_capacity(take.min(1024));
    let mut more = false;
    while let Some(block) = blocks.next_block()? {
        for m in block.items {
            if seen >= first && messages.len() < take {
                messages.push(m);
            } else if messages.len() == take {
                more = true;
                break;
            }
            seen += 1;
        }
        if more {
            break;
        }
    }
    // The count costs a read past the offset index's last mark; a last page knows it already.
    let total = if more {
        let n = usize::try_from(store.message_count(id)?).unwrap_or(usize::MAX);
        n.max(first + messages.len() + 1)
    } else {
        seen.max(first + messages.len())
    };
    Ok(TranscriptPage {
        meta,
        first,
        messages,
        more,
        total,
    })
}

/// What a new session starts with (`session.start`): each field falls back to
/// `config.json`'s `current.provider` / `current.model`, the project to the working directory.
#[derive(Debug, Clone, Default)]
pub struct StartRequest {
    /// Its project directory (one that does not exist is replaced by the working directory).
    pub project_path: Option<String>,
    /// Its provider.
    pub provider: Option<String>,
    /// Its model.
    pub model: Option<String>,
    /// Its title (default: the original's `Session <id>`).
    pub title: Option<String>,
}

/// Creates a session as `req` says.
pub fn start(store: &SessionStore, req: &StartRequest) -> Result<SessionRef> {
    let current = crate::config::current(store.home())?;
    // The caller's to fix: pass one, or configure one.
    let provider = req.provider.clone().or(current.provider).ok_or_else(|| {
        Error::Invalid(
            "No provider configured. Pass provider, or set current.provider in config.json".into(),
        )
    })?;
    let project_path = match &req.project_path {
        Some(p) if Path::new(p).exists() => p.clone(),
        _ => std::env::current_dir()
            .map_err(|source| Error::Io {
                context: "cannot read the working directory".into(),
                source,
            })?
            .display()
            .to_string(),
    };
    let title = req.title.clone().filter(|t| !t.trim().is_empty());
    let id = store.create(NewSession {
        title: title.clone().unwrap_or_default(),
        project_path,
        provider,
        model: req.model.clone().or(current.model),
    })?;
    if title.is_none() {
        // The original's title: "Session <id>".
        store.update_meta(&id, |m| m.title = format!("Session {id}"))?;
    }
    Ok(SessionRef {
        session_id: id.to_string(),
    })
}

/// Copies session `id` into a new one (`parentId` set, summary carried).
pub fn fork(store: &SessionStore, id: &SessionId) -> Result<SessionRef> {
    Ok(SessionRef {
        session_id: store.fork(id, None)?.to_string(),
    })
}

/// Gives session `id` the title `title` (trimmed; not empty).
pub fn rename(store: &SessionStore, id: &SessionId, title: &str) -> Result<SessionMeta> {
    let title = title.trim();
    if title.is_empty() {
        return Err(Error::Invalid("a session's title cannot be empty".into()));
    }
    Ok(store
        .update_meta(id, |m| m.title = title.to_owned())?
        .with_agent())
}

/// Moves session `id` to project `project` (a directory; a relative one is taken from the
/// current directory), keeping its id, messages, rollout log and memory: an imported session
/// placed by a guess, or under the unplaced project, placed where it belongs.
pub fn move_to_project(store: &SessionStore, id: &SessionId, project: &str) -> Result<SessionMeta> {
    let project = project.trim();
    if project.is_empty() {
        return Err(Error::Invalid(
            "the project directory cannot be empty".into(),
        ));
    }
    let abs = std::path::absolute(project)
        .map_err(|e| Error::Invalid(format!("project {project:?}: {e}")))?;
    let abs = abs.to_string_lossy();
    let Some(normal) = freecode_core::project_key::normalize_absolute(&abs) else {
        return Err(Error::Invalid(format!(
            "project {project:?}: not a directory path this machine can name"
        )));
    };
    Ok(store.move_to_project(id, &normal)?.with_agent())
}

/// Archives session `id`: kept and listed, out of the way.
pub fn archive(store: &SessionStore, id: &SessionId) -> Result<SessionMeta> {
    Ok(store.archive(id)?.with_agent())
}

/// Undoes a soft delete or an archive of session `id`.
pub fn restore(store: &SessionStore, id: &SessionId) -> Result<SessionMeta> {
    Ok(store.restore(id)?.with_agent())
}

/// Soft-deletes session `id` (restorable).
pub fn delete(store: &SessionStore, id: &SessionId) -> Result<Deleted> {
    let meta = store.delete(id)?;
    Ok(Deleted {
        session_id: id.to_string(),
        purged: false,
        status: Some(meta.status),
        removed_paths: None,
    })
}

/// Erases session `id`: its directory, its rollout log and its compaction memory.
pub fn purge(store: &SessionStore, id: &SessionId) -> Result<Deleted> {
    // A clear "not found" before anything is removed.
    store.meta(id)?;
    let removed = store.purge(id)?;
    Ok(Deleted {
        session_id: id.to_string(),
        purged: true,
        status: None,
        removed_paths: Some(removed.len()),
    })
}

/// A compaction: trim session `id` to its last `keep` user turns, recording `summary`.
#[derive(Debug, Clone)]
pub struct CompactRequest {
    /// User turns to keep (at least 1).
    pub keep: usize,
    /// The summary of what is trimmed; `None`: the trimmed user prompts after the previous
    /// summary (no model here: extractive).
    pub summary: Option<String>,
}

/// Compacts session `id` as `req` says.
pub fn compact(store: &SessionStore, id: &SessionId, req: &CompactRequest) -> Result<Compaction> {
    let summary = match &req.summary {
        Some(s) => s.clone(),
        None => {
            let messages = store.messages(id)?.messages;
            let cut = freecode_core::compaction::keep_last_n_user_turns(&messages, req.keep)
                .map_err(|e| Error::Invalid(e.to_string()))?;
            let previous = store.compaction_memory(id)?;
            freecode_core::compaction::extractive_summary(
                previous
                    .as_ref()
                    .and_then(|m| m.latest_summary())
                    .map(|s| s.content.as_str()),
                &messages[..cut],
            )
        }
    };
    let outcome = store.compact(id, req.keep, &summary)?;
    Ok(Compaction::new(id.as_str(), outcome))
}

/// Resumes session `id` (not soft-deleted): its provider and model as the next turn will use
/// them (the pinned ones win over `config.json`'s), its messages and its summary.
pub fn resume(store: &SessionStore, id: &SessionId) -> Result<Resumed> {
    visible(store, id)?;
    let ctx = store.resume(id)?;
    let current = crate::config::current(store.home())?;
    let provider = Some(ctx.meta.provider.clone())
        .filter(|s| !s.is_empty())
        .or(current.provider)
        .ok_or_else(|| {
            Error::Failed(format!(
                "Session {id} has no provider and none is configured."
            ))
        })?;
    // The pinned model wins over the configured one (SPEC §19.24).
    let model = ctx.meta.model.clone().or(current.model);
    Ok(Resumed {
        session_id: id.to_string(),
        provider,
        model,
        status: ctx.meta.status,
        messages: ctx.messages,
        summary: ctx.summary,
    })
}

/// The latest interrupted session and its interrupted message, if any.
pub fn interrupted(store: &SessionStore) -> Result<Option<InterruptedRef>> {
    Ok(store
        .interrupted_session()?
        .map(|(meta, message_id)| InterruptedRef {
            session_id: meta.id,
            message_id,
        }))
}
