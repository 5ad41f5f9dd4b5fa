//! Home sync: every machine's sessions in one end-to-end encrypted memory (`freecode sync`).
//!
//! Each machine is a host ([`state::Settings::host`]). Pushing turns what changed in a session
//! since it was last synced into records (see [`record`]): its `meta.json`, its memory, and the
//! bytes appended to (or the whole of, after a compaction) its `messages.jsonl` and rollout
//! log, in chunks of at most [`CHUNK`] bytes. They are sealed with the sync key and appended to
//! this host's log of that session on the server. Pulling downloads the other hosts' new
//! records, opens and checks every one of them before anything local changes, and applies
//! them.
//!
//! **Order and forks.** A session's content is a chain: every content record names the chain
//! point it extends, and before it is stored its host *claims* that point on the server with a
//! create-only write. One claim per point stands, so when two machines continue a session
//! from the same point at once, one wins; the other, on its next pull, keeps its own changes
//! as a fork of the session (`parentId` the session), cuts the session back to the point and
//! applies the winner's records. Nothing is merged silently and no message is lost. Metas are
//! merged last-writer-wins by `updatedAt` (the host id breaks ties), so renames, archives and
//! soft deletes travel with them.
//!
//! **Purges.** A session this machine synced that is gone from it (`session purge`) is purged
//! everywhere: a control record names it, the server's records of it are deleted, and every
//! other machine purges it on its next pull.
//!
//! **Faults.** Progress is saved at least every second, after every fork and purge, and at the
//! end of every push and pull (failed ones too). A record stored whose progress was not
//! saved is found again at its index (`409`) and adopted; a claim this host made for the
//! record it is about to store is its own. Applying a record twice changes nothing (the bytes
//! already there are recognised). A server that answers with fewer records than were seen
//! is refused before anything local changes.
//!
//! **Garbage.** Nothing that does not open stops a sync for good (a buggy or hostile member's
//! writes, or a server's changes): a record slot that does not open where it stands is passed
//! over, reported once and tried again on later pulls ([`state::Unopened`]); the records after
//! it apply where their chain points allow. Garbage at this host's own next index is passed
//! over for the next free one. A broken key wrap is mended by a machine that kept the record,
//! told of it through a control record ([`Engine::mend`]). A claim that does not open, or
//! names a stored record that extends another point, gives way to the next of the point's
//! claim slots ([`Engine::claim`]).
//!
//! **Steps.** Each step reads, asks the pure planning step what to do with what it read, and
//! carries that out; each module names only those above it:
//!
//! | step | module |
//! |---|---|
//! | the decisions, from what was read: no file or network I/O (table tests in `plan/tests.rs`) | [`plan`] |
//! | what changed here: the sessions, `sync.exclude`, each file against its mark | [`changes`] |
//! | the engine a sync runs in: key, server, progress, kept copies; fetch, open, claim, advance | [`engine`] |
//! | applying a session's records here (forks, meta merge, purges from elsewhere) | [`apply`] |
//! | a pull (downloads, control records, slots retried, refills), then apply | [`pull`] |
//! | a push (changes as records, claims, batches, purges everywhere) | [`push`] |
//! | set-up and the key: `init`, `join`, `rotate` | [`setup`] |
//! | the record format, the progress on disk, the copies kept | [`record`], [`state`], [`kept`] |

mod apply;
mod changes;
mod compact;
mod engine;
pub mod kept;
mod plan;
mod pull;
mod push;
pub mod record;
mod setup;
pub mod state;

use std::collections::BTreeSet;

use freecode_remote::home_sync::{Remote, SealError, SyncKey};
use freecode_store::{Home, StoreError, fsutil};
use schemars::JsonSchema;
use serde::Serialize;

use crate::error::{Error, Result};
use crate::progress::Progress;
use changes::{excluded, local_sessions};
pub use compact::compact;
use engine::Engine;
pub use setup::{init, join, rotate};

/// The most bytes of sections one record carries (the server's default body limit is 16 MiB).
pub const CHUNK: usize = 4 << 20;

/// What `init` and `join` set up.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SyncSetup {
    /// The server.
    pub server: String,
    /// This machine's host id.
    pub host: String,
    /// The sync key's id (not the key).
    pub key_id: String,
}

/// What `status` finds.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SyncStatus {
    /// The server.
    pub server: String,
    /// This machine's host id.
    pub host: String,
    /// The sync key's id.
    pub key_id: String,
    /// Machines with records on the server (this one included).
    pub hosts: usize,
    /// Sessions synced from or to this machine.
    pub synced: usize,
    /// Sessions with changes not pushed yet (new ones included).
    pub to_push: usize,
    /// Records on the server this machine has not pulled.
    pub to_pull: u64,
}

/// A session kept as a fork because another machine continued it first.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SyncFork {
    /// The session the other machine continued.
    pub session_id: String,
    /// The new session holding this machine's changes (its `parentId` is `sessionId`).
    pub fork_id: String,
}

/// What a push, a pull or both did.
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SyncReport {
    /// Records stored on the server.
    pub pushed: u64,
    /// Records applied here.
    pub pulled: u64,
    /// Sessions pushed.
    pub sessions_pushed: usize,
    /// Sessions changed here by a pull (created ones included).
    pub sessions_pulled: usize,
    /// Sealed bytes sent (records and claims).
    pub bytes_sent: u64,
    /// Sealed bytes received.
    pub bytes_received: u64,
    /// Forks made for changes another machine's won over.
    pub forks: Vec<SyncFork>,
    /// Records the server had lost, sent again from the copies kept here.
    pub refilled: u64,
    /// Sessions purged (here, or everywhere from here).
    pub purged: Vec<String>,
    /// Sessions skipped because another process holds them (synced next time).
    pub busy: Vec<String>,
    /// Record slots on the server found holding something that does not open, or that is
    /// not a record of its log (written by a buggy or hostile member, or changed by the
    /// server): passed over, and tried again on later pulls.
    pub skipped: Vec<SkippedRecord>,
    /// Records whose key wrap another machine found broken, mended here from a kept copy.
    pub mended: u64,
    /// This home was found to be a copy of another machine's (the same machine id) and took
    /// an id of its own.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub new_host: Option<SyncNewHost>,
}

/// A machine id given up because another home holds it too.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SyncNewHost {
    /// The id both homes had.
    pub was: String,
    /// This home's id now.
    pub now: String,
}

/// A record slot passed over because what it holds does not open.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SkippedRecord {
    /// The machine whose log it is in.
    pub host: String,
    /// The log (a session's, or the control log).
    pub log: String,
    /// Its index.
    pub index: u64,
    /// Why it was passed over.
    pub why: String,
}

/// A client of `server` speaking for `key`'s group.
pub(super) fn remote_for(home: &Home, server: &str, key: &SyncKey) -> Result<Remote> {
    let api_key = freecode_remote::share::SyncConfig::load(home)?.api_key;
    Ok(Remote::new(server, api_key)?.for_key(key))
}

pub(super) fn seal_err(e: SealError) -> Error {
    Error::Failed(e.to_string())
}

/// What `freecode sync compact` removed from the server.
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SyncCompaction {
    /// Each machine's log removed (none of its records opened as anything a machine writes).
    pub removed: Vec<SyncCompacted>,
    /// Records removed.
    pub records: u64,
    /// Their bytes.
    pub bytes: u64,
}

/// One machine's log removed by `sync compact`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SyncCompacted {
    /// The log.
    pub log: String,
    /// The machine whose log it was.
    pub host: String,
    /// Its records.
    pub records: u64,
}

/// What `freecode sync rotate` did.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SyncRotation {
    /// The server.
    pub server: String,
    /// The new key's id.
    pub key_id: String,
    /// Records on the server given a new key wrap (their content was not sent again).
    pub rewrapped: u64,
    /// Bytes of key wraps sent.
    pub bytes_sent: u64,
    /// The copies kept here, rewrapped.
    pub kept_rewrapped: u64,
    /// Slots on the server that do not open and that no copy kept here mends: left as they
    /// are (a buggy or hostile member's writes).
    pub skipped: u64,
}

/// The sync key as `sync key --json` prints it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SyncPhrase {
    /// The key's 24 words (a rotated key's are completed by the ring the server keeps).
    pub phrase: String,
}

/// `e`, said for a person when it is the server's `403 revoked`: which machine rotated this
/// one's key out and when (from the rotation's notice, opened with this machine's key, so
/// the server cannot make it up), that everything here is kept, and the commands that work:
/// `sync join` with the new phrase when the rotation was the person's own, else a new group
/// started from this machine's copy (`sync init --force`), which the other machines join.
pub(super) fn rotated_out(e: Error, key: &SyncKey, server: &str) -> Error {
    let Error::Client(freecode_remote::share::ClientError::RotatedOut { at, notice, .. }) = &e
    else {
        return e;
    };
    let when = at.and_then(|ms| i64::try_from(ms).ok()).map_or_else(
        || "at a time the server did not keep".to_owned(),
        |ms| format!("at {}", crate::human::local_time(ms)),
    );
    let notice = notice
        .as_deref()
        .and_then(|n| freecode_remote::home_sync::notice::open_notice(key, n));
    let who = match &notice {
        Some(n) => format!("by machine {} (its `freecode sync rotate`)", n.host),
        None => "by a request that named no machine of the group (not freecode's `sync rotate`: \
                 a member's key used by hand or by a rogue program)"
            .to_owned(),
    };
    Error::Failed(format!(
        "this machine's sync key was rotated out of its group {who} {when}. Nothing here was \
         changed or deleted. If that machine is yours, get the new phrase there (`freecode sync \
         key`) and run `freecode sync join --server {server}` here with it. If it is not (a \
         lost, stolen or rogue machine), start a new group from this machine's copy: \
         `freecode sync init --server {server} --force`, then `freecode sync now`; your other \
         machines join it with its phrase (`freecode sync join --server {server} --force`)."
    ))
}

/// `freecode sync key`: the sync key as its 24 words.
pub fn key_phrase(home: &Home) -> Result<String> {
    Ok(state::load(home)?.key.to_phrase())
}

/// `freecode sync status`.
pub fn status(home: &Home) -> Result<SyncStatus> {
    let e = Engine::open(home)?;
    let logs = e
        .remote
        .status()
        .map_err(|err| rotated_out(err.into(), &e.key, &e.settings.server))?;
    let hosts: BTreeSet<_> = logs.iter().map(|l| l.host).collect();
    let to_pull = logs
        .iter()
        .filter(|l| l.host != e.host)
        .map(|l| l.count.saturating_sub(e.state.seen(&l.log, &l.host)))
        .sum();
    let mut to_push = 0;
    let excluded = excluded(home)?;
    for (id, dir) in local_sessions(&e.store)? {
        if e.is_excluded(&id, &excluded)? {
            continue;
        }
        let st = e.state.sessions.get(id.as_str());
        if st.is_none_or(|st| e.changes(&id, &dir, st).is_ok_and(|c| !c.is_empty())) {
            to_push += 1;
        }
    }
    Ok(SyncStatus {
        server: e.settings.server.clone(),
        host: e.host.to_string(),
        key_id: e.key.id(),
        hosts: hosts.len(),
        synced: e.state.sessions.len(),
        to_push,
        to_pull,
    })
}

/// Whether this home syncs (`init` or `join` ran).
pub fn is_set_up(home: &Home) -> bool {
    state::dir(home).join("config.json").is_file()
}

/// One push, pull or `now` of a home at a time: they share its progress. The lock is
/// `state/sync/.lock` (the holder's pid inside); a sync that finds it held says so and waits.
pub(super) fn take_turn(home: &Home) -> Result<freecode_store::lock::SessionLock> {
    use freecode_store::lock::{LockWait, SessionLock};
    // Not set up: the error telling how, and nothing created.
    state::load(home)?;
    let dir = state::dir(home);
    match SessionLock::acquire(&dir, "sync", LockWait::Fail) {
        Ok(l) => Ok(l),
        Err(StoreError::Locked { pid, .. }) => {
            tracing::warn!(
                pid = pid.map_or_else(|| "unknown".to_owned(), |p| p.to_string()),
                "another sync of this home is running: waiting for it to end"
            );
            Ok(SessionLock::acquire(&dir, "sync", LockWait::Block)?)
        }
        Err(e) => Err(e.into()),
    }
}

/// `sync.auto`'s sync after a turn (`freecode sync now --auto`, started in the background):
/// `now`, after any sync running. When another one is already waiting its turn, this one does
/// nothing (`None`): that one starts after this turn was written, so it carries it too.
pub fn auto(home: &Home) -> Result<Option<SyncReport>> {
    use freecode_store::lock::{LockWait, SessionLock};
    state::load(home)?;
    let waiting = state::dir(home).join("auto");
    fsutil::create_dir_private(&waiting)?;
    let queued = match SessionLock::acquire(&waiting, "sync", LockWait::Fail) {
        Ok(l) => l,
        Err(StoreError::Locked { .. }) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let _turn = take_turn(home)?;
    drop(queued);
    let mut e = Engine::open(home)?;
    let r = e
        .pull(None, &mut crate::progress::Silent)
        .and_then(|()| e.push(&mut crate::progress::Silent));
    e.finish(r)?;
    Ok(Some(e.report))
}

/// `freecode sync push`.
pub fn push(home: &Home, progress: &mut dyn Progress) -> Result<SyncReport> {
    let _turn = take_turn(home)?;
    let mut e = Engine::open(home)?;
    let r = e.push(progress);
    e.finish(r)?;
    Ok(e.report)
}

/// `freecode sync pull`.
pub fn pull(home: &Home, progress: &mut dyn Progress) -> Result<SyncReport> {
    let _turn = take_turn(home)?;
    let mut e = Engine::open(home)?;
    let r = e.pull(None, progress);
    e.finish(r)?;
    Ok(e.report)
}

/// `freecode sync now`: pull, then push.
pub fn now(home: &Home, progress: &mut dyn Progress) -> Result<SyncReport> {
    let _turn = take_turn(home)?;
    let mut e = Engine::open(home)?;
    let r = e.pull(None, progress).and_then(|()| e.push(progress));
    e.finish(r)?;
    Ok(e.report)
}
