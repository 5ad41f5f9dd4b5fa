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

pub mod kept;
pub mod record;
pub mod state;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::{Read as _, Seek as _, SeekFrom};
use std::path::{Path, PathBuf};

use freecode_core::{SessionId, SessionMeta};
use freecode_store::rollout::{HeldLog, events_path};
use freecode_store::session::{NewSession, SessionStore};
use freecode_store::{Home, StoreError, fsutil};
use freecode_sync::home::{Chain, Claimed, HostId, Kind, LogId, Put, Remote, SealError, SyncKey};
use schemars::JsonSchema;
use serde::Serialize;

use crate::error::{Error, Result};
use crate::progress::Progress;
use kept::Kept;
use record::{ControlRecord, Mode, Section, SectionHead, SessionRecord, What};
use state::{Mark, SessionSync, State};

/// How often a push or a pull writes its progress (`state.json`, rewritten whole): after every
/// record, the first sync of a big home would be quadratic in its sessions.
const SAVE_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// Sessions a pull applies past which it syncs the file system once a second instead of
/// fsyncing every file it writes (a first pull: 5.5 → 2.7 s for 2,000 sessions).
const BULK_SESSIONS: usize = 32;

/// Sessions a batched push plans, seals and sends at a time (two requests each window).
const BATCH_SESSIONS: usize = 256;

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
fn remote_for(home: &Home, server: &str, key: &SyncKey) -> Result<Remote> {
    let api_key = freecode_sync::client::SyncConfig::load(home)?.api_key;
    Ok(Remote::new(server, api_key)?.for_key(key))
}

fn seal_err(e: SealError) -> Error {
    Error::Failed(e.to_string())
}

/// `freecode sync init`: makes the sync key and this machine's host id, checks the server.
pub fn init(home: &Home, server: &str, force: bool) -> Result<SyncSetup> {
    let key = SyncKey::generate().map_err(seal_err)?;
    setup(home, server, key, force)
}

/// `freecode sync join`: takes the key (a phrase, or a file's hex or phrase) of the machines
/// already syncing.
pub fn join(home: &Home, server: &str, key_text: &str, force: bool) -> Result<SyncSetup> {
    let key = SyncKey::parse(key_text).map_err(|e| Error::Invalid(e.to_string()))?;
    setup(home, server, key, force)
}

fn setup(home: &Home, server: &str, key: SyncKey, force: bool) -> Result<SyncSetup> {
    let remote = remote_for(home, server, &key)?;
    remote.status()?;
    // A rotated key's phrase is completed by the ring the server keeps for it.
    let key = match remote.get_ring(&key.id())? {
        Some(ring) => key.with_ring(&ring).map_err(seal_err)?,
        None => key,
    };
    // The new key of the group this machine syncs in (rotated elsewhere): the key changes,
    // this machine's host id and progress stay.
    if let Ok(current) = state::load(home)
        && current.settings.server == remote.base()
        && key.key_ids().contains(&current.key.id())
    {
        let _turn = take_turn(home)?;
        let settings = state::Settings {
            key_id: key.id(),
            ..current.settings
        };
        state::save_key(home, &settings, &key)?;
        let mut kept = Kept::open(home)?;
        rewrap_kept(&key, &mut kept)?;
        kept.commit()?;
        return Ok(SyncSetup {
            server: settings.server,
            host: settings.host.to_string(),
            key_id: settings.key_id,
        });
    }
    home.ensure()?;
    let settings = state::Settings {
        server: remote.base().to_owned(),
        host: HostId::generate().map_err(seal_err)?,
        key_id: key.id(),
    };
    state::save_setup(home, &settings, &key, force)?;
    Ok(SyncSetup {
        server: settings.server,
        host: settings.host.to_string(),
        key_id: settings.key_id,
    })
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

/// The copies kept here moved under `key`; how many were.
fn rewrap_kept(key: &SyncKey, kept: &mut Kept) -> Result<u64> {
    let mut n = 0;
    for k in kept.logs()? {
        for (host, index, sealed) in kept.of_log(&k.log)? {
            if host != k.host {
                continue;
            }
            match key.rewrap(&host, &k.log, index, &sealed) {
                Ok(Some(new)) => {
                    kept.replace(&k.log, &host, index, &new)?;
                    n += 1;
                }
                // Slots passed over (garbage kept as the server held it) stay as they are.
                Ok(None) | Err(SealError::OtherKey { .. } | SealError::Tampered { .. }) => {}
                Err(e) => return Err(seal_err(e)),
            }
        }
    }
    Ok(n)
}

/// `freecode sync rotate`: a new sync key for the group. Every record on the server gets a
/// new key wrap (the wrap alone is sent, never the content), the new key's ring goes to the
/// server, and the other machines join again with the new phrase (`sync key`), keeping their
/// progress. A rotation cut short is finished by the next `sync rotate` (no second new key).
pub fn rotate(home: &Home) -> Result<SyncRotation> {
    let _turn = take_turn(home)?;
    let mut e = Engine::open(home)?;
    // The marker names the key being rotated to: written after that key is saved, so it
    // never outlives a key that was not (a kill before it makes the next rotation a new one).
    let marker = state::dir(home).join("rotating");
    let resuming = fsutil::read_bounded(&marker, 64, "rotation marker")?
        .is_some_and(|id| id == e.key.id().as_bytes());
    if !resuming {
        let new = e.key.rotate().map_err(seal_err)?;
        let ring = new.seal_ring().map_err(seal_err)?;
        e.remote.put_ring(&new.id(), &ring)?;
        let settings = state::Settings {
            key_id: new.id(),
            ..e.settings.clone()
        };
        state::save_key(home, &settings, &new)?;
        fsutil::write_atomic(&marker, new.id().as_bytes(), true)?;
        e.settings = settings;
        e.key = new;
    }
    // The new key's credential made the group's, the old one revoked: from here a machine on
    // the old key can neither read nor write.
    e.remote = register_credential(home, &e.settings.server, &e.key)?;
    let mut out = SyncRotation {
        server: e.settings.server.clone(),
        key_id: e.key.id(),
        rewrapped: 0,
        bytes_sent: 0,
        kept_rewrapped: 0,
        skipped: 0,
    };
    for lc in e.remote.status()? {
        let mut from = 0;
        while from < lc.count {
            let (got, next) = e.remote.get_records(&lc.log, &lc.host, from)?;
            if got.is_empty() {
                break;
            }
            for (i, sealed) in got.iter().enumerate() {
                let index = from + i as u64;
                let wrap = match e.key.rewrap(&lc.host, &lc.log, index, sealed) {
                    Ok(Some(new)) => new[freecode_sync::home::seal::WRAP_SPAN].to_vec(),
                    Ok(None) => continue,
                    Err(SealError::OtherKey { .. } | SealError::Tampered { .. }) => {
                        // A broken wrap mended from the copy kept here; garbage left.
                        let kept = e.kept.get(&lc.log, &lc.host, index)?;
                        match e.wrap_from_kept(&lc.log, &lc.host, index, sealed, kept)? {
                            Some(wrap) => wrap,
                            None => {
                                out.skipped += 1;
                                continue;
                            }
                        }
                    }
                    Err(e) => return Err(seal_err(e)),
                };
                if e.remote.rewrap_record(&lc.log, &lc.host, index, &wrap)? {
                    out.rewrapped += 1;
                    out.bytes_sent += wrap.len() as u64;
                }
            }
            from = next;
        }
    }
    out.kept_rewrapped = rewrap_kept(&e.key, &mut e.kept)?;
    e.kept.commit()?;
    fsutil::remove_file(&marker)?;
    Ok(out)
}

/// Makes `key`'s credential its group's current one on `server`, authorised by the credential
/// of a key it replaced (the newest the server still takes: a rotation cut short before its
/// marker was written left one in between that the server never knew); a client of the server
/// for `key`. Done already (a rotation resumed) is no error.
fn register_credential(home: &Home, server: &str, key: &SyncKey) -> Result<Remote> {
    let remote = remote_for(home, server, key)?;
    let hash = key.credential_hash();
    for old in key.older_credentials() {
        match remote.clone().with_credential(old).rotate_credential(&hash) {
            Ok(_) => return Ok(remote),
            Err(freecode_sync::client::ClientError::Status {
                status: 401 | 403 | 404,
                ..
            }) => {}
            Err(e) => return Err(e.into()),
        }
    }
    // Every older credential refused: registered already, if the new one is taken.
    match remote.rotate_credential(&hash) {
        Ok(_) => Ok(remote),
        Err(e) => Err(Error::Failed(format!(
            "the server took none of this group's credentials to register the new key \
             ({e}): nothing was revoked; run `freecode sync rotate` again"
        ))),
    }
}

/// The sync key as `sync key --json` prints it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SyncPhrase {
    /// The key's 24 words (a rotated key's are completed by the ring the server keeps).
    pub phrase: String,
}

/// `freecode sync key`: the sync key as its 24 words.
pub fn key_phrase(home: &Home) -> Result<String> {
    Ok(state::load(home)?.key.to_phrase())
}

/// `freecode sync status`.
pub fn status(home: &Home) -> Result<SyncStatus> {
    let e = Engine::open(home)?;
    let logs = e.remote.status()?;
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
fn take_turn(home: &Home) -> Result<freecode_store::lock::SessionLock> {
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

/// `sync.exclude` of `config.json`: comma-separated project path globs.
fn excluded(home: &Home) -> Result<globset::GlobSet> {
    let config = home.read_config()?;
    let mut set = globset::GlobSetBuilder::new();
    for glob in crate::keys::lookup_str(&config, "sync.exclude")
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|g| !g.is_empty())
    {
        let g = globset::GlobBuilder::new(glob)
            .literal_separator(true)
            .build()
            .map_err(|e| Error::Invalid(format!("sync.exclude: {glob:?}: {e}")))?;
        set.add(g);
    }
    set.build()
        .map_err(|e| Error::Invalid(format!("sync.exclude: {e}")))
}

/// The complete sessions in this home (any status), by id, with their directories: the
/// store's one listing ([`SessionStore::session_dirs`]), so a push costs no lookup per session.
fn local_sessions(store: &SessionStore) -> Result<BTreeMap<SessionId, PathBuf>> {
    Ok(store
        .session_dirs()?
        .into_iter()
        .filter(|(_, dir)| dir.join("meta.json").is_file())
        .collect())
}

/// A file's change since its mark.
#[derive(Debug)]
enum Change {
    Append { from: u64, bytes: Vec<u8> },
    Set(Vec<u8>),
}

/// What changed in one session.
#[derive(Debug, Default)]
struct Changes {
    meta: Option<Vec<u8>>,
    memory: Option<Vec<u8>>,
    messages: Option<Change>,
    events: Option<Change>,
}

impl Changes {
    fn is_empty(&self) -> bool {
        self.meta.is_none()
            && self.memory.is_none()
            && self.messages.is_none()
            && self.events.is_none()
    }
}

/// The bytes of `path` from `from` on (empty when it is missing or shorter).
fn read_from(path: &Path, from: u64) -> Result<Vec<u8>> {
    fsutil::refuse_link(path)?;
    let mut f = match fsutil::open_read(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io("read", path)(e)),
    };
    let len = f.metadata().map_err(Error::io("stat", path))?.len();
    if len <= from {
        return Ok(Vec::new());
    }
    f.seek(SeekFrom::Start(from))
        .map_err(Error::io("read", path))?;
    let mut out = Vec::with_capacity((len - from) as usize);
    f.read_to_end(&mut out).map_err(Error::io("read", path))?;
    Ok(out)
}

fn file_len(path: &Path) -> u64 {
    fs::symlink_metadata(path).map(|m| m.len()).unwrap_or(0)
}

/// The whole lines of `bytes` (up to its last newline).
fn whole_lines(bytes: &[u8]) -> &[u8] {
    match memchr::memrchr(b'\n', bytes) {
        Some(i) => &bytes[..=i],
        None => &[],
    }
}

/// The mark of `path`'s first `len` bytes.
fn mark_of(path: &Path, len: u64) -> Result<Mark> {
    let start = len.saturating_sub(state::PROBE);
    let tail = read_from(path, start)?;
    let have = (tail.len() as u64).min(len - start);
    Ok(state::mark(&tail[..have as usize], have).with_len(start + have))
}

impl Mark {
    fn with_len(mut self, len: u64) -> Self {
        self.len = len;
        self
    }
}

/// How `path` changed since `mark` (whole lines only).
fn change_of(path: &Path, mark: &Mark) -> Result<Option<Change>> {
    let start = mark.len.saturating_sub(state::PROBE);
    let tail = read_from(path, start)?;
    let probe_len = (mark.len - start) as usize;
    if tail.len() >= probe_len && state::digest(&tail[..probe_len]) == mark.probe {
        let new = whole_lines(&tail[probe_len..]);
        if new.is_empty() {
            return Ok(None);
        }
        return Ok(Some(Change::Append {
            from: mark.len,
            bytes: new.to_vec(),
        }));
    }
    if mark.len == 0 && tail.is_empty() {
        return Ok(None);
    }
    let all = read_from(path, 0)?;
    Ok(Some(Change::Set(whole_lines(&all).to_vec())))
}

/// Pieces of at most [`CHUNK`] bytes cut at line ends (a longer line is one piece).
fn pieces(what: What, change: Change) -> Vec<Section> {
    let (mut from, bytes, mut mode) = match change {
        Change::Append { from, bytes } => (from, bytes, Mode::Append),
        Change::Set(bytes) => (0, bytes, Mode::Set),
    };
    let mut out = Vec::new();
    let mut rest = &bytes[..];
    loop {
        let cut = if rest.len() <= CHUNK {
            rest.len()
        } else {
            memchr::memrchr(b'\n', &rest[..CHUNK])
                .map(|i| i + 1)
                .or_else(|| memchr::memchr(b'\n', rest).map(|i| i + 1))
                .unwrap_or(rest.len())
        };
        let (piece, tail) = rest.split_at(cut);
        out.push(Section {
            head: SectionHead {
                what,
                mode,
                from: if mode == Mode::Append { from } else { 0 },
                len: piece.len() as u64,
            },
            bytes: piece.to_vec(),
        });
        from = if mode == Mode::Set {
            piece.len() as u64
        } else {
            from + piece.len() as u64
        };
        mode = Mode::Append;
        rest = tail;
        if rest.is_empty() {
            break;
        }
    }
    out
}

/// The records `c` makes: sections of at most [`CHUNK`] bytes, in order; a file's pieces stay
/// in order and in records of their own.
fn records_of(c: Changes) -> Vec<Vec<Section>> {
    let mut sections = Vec::new();
    let set = |what, bytes: Vec<u8>| Section {
        head: SectionHead {
            what,
            mode: Mode::Set,
            from: 0,
            len: bytes.len() as u64,
        },
        bytes,
    };
    sections.extend(c.meta.map(|m| set(What::Meta, m)));
    sections.extend(c.memory.map(|m| set(What::Memory, m)));
    if let Some(ch) = c.messages {
        sections.extend(pieces(What::Messages, ch));
    }
    if let Some(ch) = c.events {
        sections.extend(pieces(What::Events, ch));
    }
    let mut records: Vec<Vec<Section>> = Vec::new();
    let mut size = 0;
    for s in sections {
        let same_file_twice = records
            .last()
            .is_some_and(|r| r.iter().any(|x| x.head.what == s.head.what));
        if records.is_empty() || size + s.bytes.len() > CHUNK || same_file_twice {
            records.push(Vec::new());
            size = 0;
        }
        size += s.bytes.len();
        if let Some(r) = records.last_mut() {
            r.push(s);
        }
    }
    records
}

/// The record of `sections` for session `id` at `st`'s chain point, and whether it is a
/// content record (one that extends the chain: anything but a meta alone).
fn record_at(id: &SessionId, st: &SessionSync, sections: Vec<Section>) -> (SessionRecord, bool) {
    let content = sections.iter().any(|s| s.head.what != What::Meta);
    let rec = SessionRecord {
        session: id.to_string(),
        base: content.then(|| st.chain.to_string()),
        sections,
    };
    (rec, content)
}

/// Which of a section's bytes a local file already holds.
#[derive(Debug, PartialEq, Eq)]
enum Fit {
    /// The file is at the section's start: apply it.
    Apply,
    /// The file already holds it (an earlier pull stopped before saving its progress).
    Already,
    /// The file holds other changes from that point: this machine's, not pushed.
    Diverged,
}

fn fit(path: &Path, mark: &Mark, section: &Section) -> Result<Fit> {
    match section.head.mode {
        Mode::Append => {
            let from = section.head.from;
            if mark.len != from {
                return Ok(Fit::Diverged);
            }
            let local_len = file_len(path);
            if local_len == from {
                return Ok(Fit::Apply);
            }
            let have = read_from(path, from)?;
            if have.len() >= section.bytes.len() && have[..section.bytes.len()] == section.bytes[..]
            {
                return Ok(Fit::Already);
            }
            Ok(Fit::Diverged)
        }
        Mode::Set => {
            let all = read_from(path, 0)?;
            if whole_lines(&all) == &section.bytes[..] || all == section.bytes {
                return Ok(Fit::Already);
            }
            if change_of(path, mark)?.is_none() {
                return Ok(Fit::Apply);
            }
            Ok(Fit::Diverged)
        }
    }
}

struct Engine {
    home: Home,
    store: SessionStore,
    key: SyncKey,
    host: HostId,
    settings: state::Settings,
    remote: Remote,
    state: State,
    purged: BTreeSet<String>,
    report: SyncReport,
    /// Every record pushed or applied, as sealed.
    kept: Kept,
    /// Whether this sync compared the kept records with the server's.
    refill_checked: bool,
    /// Key ids this key does not open, and whether each is a rotation of the group's key.
    foreign_keys: BTreeMap<String, bool>,
    /// Progress noted and not written yet.
    dirty: bool,
    /// Session files written (by a pull) since the file system was last synced.
    wrote_local: bool,
    /// A big pull: its writes skip their own fsyncs, and one `syncfs` makes them durable
    /// before the progress naming them is saved.
    bulk: bool,
    saved_at: std::time::Instant,
}

/// A record downloaded and opened.
struct Fetched {
    host: HostId,
    index: u64,
    sealed: Vec<u8>,
    plain: Vec<u8>,
    record: SessionRecord,
    /// A slot that did not open before, opening now (its wrap mended): applied where its
    /// chain point allows, out of its host's order.
    retried: bool,
}

/// A record downloaded: opened, or why it does not open.
enum Got {
    Opened(freecode_sync::home::Opened),
    Bad(String),
}

/// Seconds since the epoch.
fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Whether two sealed records are the same but for their key wraps.
fn same_but_wrap(a: &[u8], b: &[u8]) -> bool {
    use freecode_sync::home::seal::WRAP_SPAN;
    a.len() == b.len()
        && a.len() > WRAP_SPAN.end
        && a[..WRAP_SPAN.start] == b[..WRAP_SPAN.start]
        && a[WRAP_SPAN.end..] == b[WRAP_SPAN.end..]
}

impl Engine {
    fn open(home: &Home) -> Result<Self> {
        let loaded = state::load(home)?;
        let remote = remote_for(home, &loaded.settings.server, &loaded.key)?;
        let st = state::load_state(home)?;
        Ok(Self {
            home: home.clone(),
            store: SessionStore::open(home.clone())?,
            host: loaded.settings.host,
            key: loaded.key,
            settings: loaded.settings,
            remote,
            purged: st.purged.clone(),
            state: st,
            report: SyncReport::default(),
            kept: Kept::open(home)?,
            refill_checked: false,
            foreign_keys: BTreeMap::new(),
            dirty: false,
            wrote_local: false,
            bulk: false,
            saved_at: std::time::Instant::now(),
        })
    }

    /// Notes progress; written at most every [`SAVE_EVERY`] (see [`Engine::flush`]). Progress
    /// lost to a kill is found again: a record stored at this host's index is adopted, one
    /// applied twice is recognised.
    fn save(&mut self) -> Result<()> {
        self.dirty = true;
        if self.saved_at.elapsed() >= SAVE_EVERY {
            self.flush()?;
        }
        Ok(())
    }

    /// Writes the progress noted (after every local change that cannot be found again, and
    /// at the end of every push and pull, failed ones included).
    fn flush(&mut self) -> Result<()> {
        // The copies first: progress never names a record that is not kept.
        self.kept.commit()?;
        if self.dirty {
            // And never a change to a session that is not on the disk.
            if std::mem::take(&mut self.wrote_local) && self.bulk {
                fsutil::sync_filesystem(self.home.root())
                    .map_err(Error::io("sync the file system of", self.home.root()))?;
            }
            self.state.purged = self.purged.clone();
            state::save_state(&self.home, &self.state)?;
            self.dirty = false;
        }
        self.saved_at = std::time::Instant::now();
        Ok(())
    }

    /// `r`, after the progress is written (the first error wins).
    fn finish<T>(&mut self, r: Result<T>) -> Result<T> {
        let saved = self.flush();
        let v = r?;
        saved?;
        Ok(v)
    }

    fn fresh(&self, id: &SessionId) -> SessionSync {
        let log = self.key.log_id(id.as_str());
        SessionSync {
            log,
            chain: self.key.genesis(id.as_str()),
            messages: Mark::default(),
            events: Mark::default(),
            meta: None,
            memory: None,
            next: self.state.seen(&log, &self.host),
        }
    }

    /// Whether session `id`'s project matches `sync.exclude`.
    fn is_excluded(&self, id: &SessionId, excluded: &globset::GlobSet) -> Result<bool> {
        if excluded.is_empty() {
            return Ok(false);
        }
        match self.store.meta(id) {
            Ok(m) => Ok(excluded.is_match(&m.project_path)),
            Err(StoreError::NotFound { .. }) => Ok(true),
            Err(e) => Err(e.into()),
        }
    }

    /// What changed in session `id` since `st`.
    fn changes(&self, id: &SessionId, dir: &Path, st: &SessionSync) -> Result<Changes> {
        let paths = freecode_store::session::SessionPaths {
            dir: dir.to_owned(),
        };
        if !paths.meta().is_file() {
            return Err(StoreError::NotFound { id: id.to_string() }.into());
        }
        let meta = fsutil::read_bounded(
            &paths.meta(),
            freecode_store::session::META_MAX_BYTES,
            "meta.json",
        )?
        .unwrap_or_default();
        let memory = fsutil::read_bounded(
            &self.home.memory_file(id),
            freecode_store::session::MEMORY_MAX_BYTES,
            "memory.json",
        )?;
        Ok(Changes {
            meta: (st.meta.as_deref() != Some(&state::digest(&meta))).then_some(meta),
            memory: memory.filter(|m| st.memory.as_deref() != Some(&state::digest(m))),
            messages: change_of(&paths.messages(), &st.messages)?,
            events: change_of(&events_path(&self.home, id), &st.events)?,
        })
    }

    // ----- push ---------------------------------------------------------------------------

    fn push(&mut self, progress: &mut dyn Progress) -> Result<()> {
        let local = local_sessions(&self.store)?;
        let excluded = excluded(&self.home)?;
        // The sessions that changed, found while the server's counts come: what it lost goes
        // back first, since this host's next records follow it.
        let (status, changed) = std::thread::scope(|scope| {
            let remote = &self.remote;
            let status = (!self.refill_checked).then(|| scope.spawn(move || remote.status()));
            let mut changed = Vec::new();
            for (id, dir) in &local {
                if self.purged.contains(id.as_str()) {
                    continue;
                }
                match self.is_excluded(id, &excluded) {
                    Ok(true) => continue,
                    Ok(false) => {}
                    Err(e) => return (status.map(|h| h.join()), Err(e)),
                }
                // A session that cannot be read is tried, to report why.
                let st = self.state.sessions.get(id.as_str());
                if st.is_none_or(|st| self.changes(id, dir, st).map_or(true, |c| !c.is_empty())) {
                    changed.push((id, dir));
                }
            }
            (status.map(|h| h.join()), Ok(changed))
        });
        if let Some(status) = status {
            let logs =
                status.map_err(|_| Error::Internal("the status request panicked".into()))??;
            let (_, purged) = self.controls(&logs)?;
            self.refill(&logs, &purged)?;
        }
        let changed = changed?;
        self.push_purges(&local)?;
        let total = changed.len();
        progress.step("uploading");
        // Sessions whose change is one record go many to a request; the rest (and any a
        // batch could not settle) one by one.
        let mut alone = Vec::new();
        let mut done = 0;
        for window in changed.chunks(BATCH_SESSIONS) {
            progress.sessions(done, total);
            alone.extend(self.push_batch(window)?);
            done += window.len();
        }
        let batched = total - alone.len();
        for (n, (id, dir)) in alone.into_iter().enumerate() {
            progress.sessions(batched + n, total);
            self.push_session(id, dir)?;
        }
        progress.sessions(total, total);
        Ok(())
    }

    /// Pushes the sessions of `window` whose change is one record: their claims in one
    /// batch, then the records whose claims stand in another. The sessions left (more than
    /// one record, a claim lost, a record found there) are returned for [`Engine::push_session`].
    fn push_batch<'a>(
        &mut self,
        window: &[(&'a SessionId, &'a PathBuf)],
    ) -> Result<Vec<(&'a SessionId, &'a PathBuf)>> {
        struct Planned<'a> {
            id: &'a SessionId,
            dir: &'a PathBuf,
            st: SessionSync,
            after: Option<Chain>,
            sections: Vec<Section>,
            claim: Option<Vec<u8>>,
            sealed: Vec<u8>,
        }
        let mut alone = Vec::new();
        let mut planned = Vec::new();
        for &(id, dir) in window {
            let st = match self.state.sessions.get(id.as_str()) {
                Some(st) => st.clone(),
                None => self.fresh(id),
            };
            let changes = match self.changes(id, dir, &st) {
                Ok(c) if c.is_empty() => continue,
                Ok(c) => c,
                // Unreadable or gone: the one-by-one path says why, or skips it.
                Err(_) => {
                    alone.push((id, dir));
                    continue;
                }
            };
            let mut records = records_of(changes);
            if records.len() != 1 {
                alone.push((id, dir));
                continue;
            }
            let (rec, content) = record_at(id, &st, records.pop().unwrap_or_default());
            let plain = rec.encode();
            let claim = if content {
                Some(
                    self.key
                        .seal_claim(&st.log, &st.chain, &self.host, st.next)
                        .map_err(seal_err)?,
                )
            } else {
                None
            };
            let sealed = self
                .key
                .seal(Kind::Session, &self.host, &st.log, st.next, &plain)
                .map_err(seal_err)?;
            let after = content.then(|| self.key.next(&st.chain, &plain));
            // What advancing needs of the sections: their heads, and a meta's or memory's bytes.
            let sections = rec
                .sections
                .into_iter()
                .map(|mut s| {
                    if matches!(s.head.what, What::Messages | What::Events) {
                        s.bytes = Vec::new();
                    }
                    s
                })
                .collect();
            planned.push(Planned {
                id,
                dir,
                st,
                after,
                sections,
                claim,
                sealed,
            });
        }
        // The claims, then the records whose claim is this machine's.
        let claims: Vec<freecode_sync::home::BatchItem<'_>> = planned
            .iter()
            .filter_map(|p| {
                p.claim
                    .as_deref()
                    .map(|sealed| freecode_sync::home::BatchItem::Claim {
                        log: &p.st.log,
                        base: &p.st.chain,
                        sealed,
                    })
            })
            .collect();
        let mut answers = self.remote.batch(&claims)?.into_iter();
        let mut ours = Vec::with_capacity(planned.len());
        for p in &planned {
            let won = match (&p.claim, answers.next()) {
                (None, _) => true,
                (Some(_), Some(freecode_sync::home::BatchAnswer::Created)) => true,
                (Some(_), Some(freecode_sync::home::BatchAnswer::Exists(theirs))) => self
                    .key
                    .open_claim(&p.st.log, &p.st.chain, &theirs)
                    .is_ok_and(|(host, at)| host == self.host && at == p.st.next),
                (Some(_), _) => false,
            };
            ours.push(won);
        }
        let records: Vec<freecode_sync::home::BatchItem<'_>> = planned
            .iter()
            .zip(&ours)
            .filter(|(_, won)| **won)
            .map(|(p, _)| freecode_sync::home::BatchItem::Record {
                log: &p.st.log,
                host: &self.host,
                index: p.st.next,
                sealed: &p.sealed,
            })
            .collect();
        let answers = self.remote.batch(&records)?;
        let mut answers = answers.into_iter();
        for (p, won) in planned.into_iter().zip(ours) {
            let created = won
                && matches!(
                    answers.next(),
                    Some(freecode_sync::home::BatchAnswer::Created)
                );
            if !created {
                alone.push((p.id, p.dir));
                continue;
            }
            let mut st = p.st;
            let index = st.next;
            self.report.pushed += 1;
            self.report.sessions_pushed += 1;
            self.report.bytes_sent += (p.sealed.len() + p.claim.map_or(0, |c| c.len())) as u64;
            self.kept.put(&st.log, &self.host, index, &p.sealed)?;
            st.next = index + 1;
            self.state.saw(&st.log, &self.host, index + 1);
            let paths = freecode_store::session::SessionPaths { dir: p.dir.clone() };
            self.advance_by(p.id, &mut st, p.after, &p.sections, &paths)?;
        }
        Ok(alone)
    }

    fn push_session(&mut self, id: &SessionId, dir: &Path) -> Result<()> {
        let mut pushed_any = false;
        // Each pass pushes what changed; a lost claim pulls the session (making a fork of
        // this machine's changes) and tries again. A record found stored (its progress lost
        // to a kill) is adopted and the pass starts again from it: each such pass moves on
        // by one record, so only lost claims are counted.
        let mut lost = 0;
        loop {
            let mut st = match self.state.sessions.get(id.as_str()) {
                Some(st) => st.clone(),
                None => self.fresh(id),
            };
            let changes = match self.changes(id, dir, &st) {
                Ok(c) => c,
                Err(Error::Store(StoreError::NotFound { .. })) => return Ok(()),
                Err(e) => return Err(e),
            };
            if changes.is_empty() {
                break;
            }
            match self.push_changes(id, &mut st, changes)? {
                Pushed::Done => {
                    pushed_any = true;
                    break;
                }
                Pushed::Again => pushed_any = true,
                Pushed::Lost if lost < 4 => {
                    lost += 1;
                    let log = st.log;
                    self.pull(Some(&log), &mut crate::progress::Silent)?;
                }
                Pushed::Lost => break,
            }
        }
        if pushed_any {
            self.report.sessions_pushed += 1;
        }
        Ok(())
    }

    fn push_changes(&mut self, id: &SessionId, st: &mut SessionSync, c: Changes) -> Result<Pushed> {
        for sections in records_of(c) {
            let (rec, content) = record_at(id, st, sections);
            let plain = rec.encode();
            let index = st.next;
            if content {
                let me = self.host;
                match self.claim(&st.log, &st.chain, &me, index)? {
                    Claim::Ours => {}
                    Claim::Theirs => return Ok(Pushed::Lost),
                    Claim::Wedged => {
                        self.report.skipped.push(SkippedRecord {
                            host: self.host.to_string(),
                            log: st.log.to_string(),
                            index,
                            why: format!(
                                "would be session {id}'s next, not pushed: all {CLAIM_SLOTS} \
                                 claim slots of its chain point hold claims that do not open or \
                                 name no record"
                            ),
                        });
                        return Ok(Pushed::Done);
                    }
                }
            }
            let sealed = self
                .key
                .seal(Kind::Session, &self.host, &st.log, index, &plain)
                .map_err(seal_err)?;
            match self
                .remote
                .put_record(&st.log, &self.host, index, &sealed)?
            {
                Put::Created => {
                    self.report.pushed += 1;
                    self.report.bytes_sent += sealed.len() as u64;
                    self.kept.put(&st.log, &self.host, index, &sealed)?;
                    st.next = index + 1;
                    self.state.saw(&st.log, &self.host, index + 1);
                    self.advance(id, st, &rec, &plain)?;
                }
                Put::Exists => {
                    // Stored by an attempt whose progress was not saved: take it as pushed.
                    // Anything else there (a member's garbage at this machine's next index)
                    // is passed over, and the record goes to the next free one.
                    let (got, _) = self.remote.get_records(&st.log, &self.host, index)?;
                    let first = got.into_iter().next().ok_or_else(|| {
                        Error::Failed(format!("the server lost record {index} of log {}", st.log))
                    })?;
                    let me = self.host;
                    let got = self.open_record(&st.log, &me, index, &first)?;
                    let ours = self.session_record(&st.log, got).and_then(|(plain, r)| {
                        let extends = r.base.is_none()
                            || r.base.as_deref().and_then(Chain::parse) == Some(st.chain);
                        if r.session == id.as_str() && extends {
                            Ok((plain, r))
                        } else {
                            Err("is not this machine's record of its session".to_owned())
                        }
                    });
                    st.next = index + 1;
                    self.state.saw(&st.log, &self.host, index + 1);
                    match ours {
                        Ok((plain, theirs)) => {
                            self.kept.put(&st.log, &self.host, index, &first)?;
                            self.advance(id, st, &theirs, &plain)?;
                        }
                        // Kept as the server holds it (a refill puts it back where it was);
                        // never tried again: nothing but a key wrap changes a stored record.
                        Err(why) => {
                            self.kept.put(&st.log, &self.host, index, &first)?;
                            self.report.skipped.push(SkippedRecord {
                                host: self.host.to_string(),
                                log: st.log.to_string(),
                                index,
                                why,
                            });
                            self.state.sessions.insert(id.to_string(), st.clone());
                            self.save()?;
                        }
                    }
                    return Ok(Pushed::Again);
                }
            }
        }
        Ok(Pushed::Done)
    }

    /// Claims chain point `base` of `log` for record `index` of `host`. The claim that stands
    /// is the first of the point's [`CLAIM_SLOTS`] slots ([`SyncKey::claim_slot`]) holding
    /// one that opens and names a record that extends the point or is not stored yet: a
    /// slot holding garbage, or a claim whose record is there and extends something else,
    /// is passed over. So no member's write stops a session for good.
    fn claim(&mut self, log: &LogId, base: &Chain, host: &HostId, index: u64) -> Result<Claim> {
        for slot in 0..CLAIM_SLOTS {
            let point = self.key.claim_slot(base, slot);
            let sealed = self
                .key
                .seal_claim(log, &point, host, index)
                .map_err(seal_err)?;
            self.report.bytes_sent += sealed.len() as u64;
            let theirs = match self.remote.put_claim(log, &point, &sealed)? {
                Claimed::Created => return Ok(Claim::Ours),
                Claimed::Exists(theirs) => theirs,
            };
            let Ok((who, at)) = self.key.open_claim(log, &point, &theirs) else {
                continue;
            };
            // This host's, for this record (stored by an attempt whose progress was lost).
            // One of its own for an earlier index is for a slot it passed over (garbage
            // there): the record there does not extend the point, so the next slot is taken.
            if who == *host && at == index {
                return Ok(Claim::Ours);
            }
            let (got, _) = self.remote.get_records(log, &who, at)?;
            let Some(record) = got.into_iter().next() else {
                return Ok(Claim::Theirs);
            };
            let got = self.open_record(log, &who, at, &record)?;
            let extends = self
                .session_record(log, got)
                .is_ok_and(|(_, r)| r.base.as_deref().and_then(Chain::parse) == Some(*base));
            if extends {
                return Ok(Claim::Theirs);
            }
        }
        Ok(Claim::Wedged)
    }

    /// `st` after `rec` (pushed from or applied to this machine's files); saved.
    fn advance(
        &mut self,
        id: &SessionId,
        st: &mut SessionSync,
        rec: &SessionRecord,
        plain: &[u8],
    ) -> Result<()> {
        let after = rec.base.is_some().then(|| self.key.next(&st.chain, plain));
        let paths = self.store.locate(id)?;
        self.advance_by(id, st, after, &rec.sections, &paths)
    }

    /// `st` after a record of `sections` (a meta's and a memory's bytes read, the files' only
    /// their heads) that moves the chain to `after`; saved.
    fn advance_by(
        &mut self,
        id: &SessionId,
        st: &mut SessionSync,
        after: Option<Chain>,
        sections: &[Section],
        paths: &freecode_store::session::SessionPaths,
    ) -> Result<()> {
        if let Some(c) = after {
            st.chain = c;
        }
        for s in sections {
            let end = match s.head.mode {
                Mode::Set => s.head.len,
                Mode::Append => s.head.from + s.head.len,
            };
            match s.head.what {
                What::Meta => st.meta = Some(state::digest(&s.bytes)),
                What::Memory => st.memory = Some(state::digest(&s.bytes)),
                What::Messages => st.messages = mark_of(&paths.messages(), end)?,
                What::Events => st.events = mark_of(&events_path(&self.home, id), end)?,
            }
        }
        self.state.sessions.insert(id.to_string(), st.clone());
        self.save()
    }

    fn push_purges(&mut self, local: &BTreeMap<SessionId, PathBuf>) -> Result<()> {
        // Missing from the listing, and confirmed missing by a lookup.
        let gone: Vec<String> = self
            .state
            .sessions
            .keys()
            .filter(|id| {
                SessionId::new(id.as_str()).is_ok_and(|id| {
                    !local.contains_key(&id)
                        && matches!(self.store.locate(&id), Err(StoreError::NotFound { .. }))
                })
            })
            .cloned()
            .collect();
        if gone.is_empty() {
            return Ok(());
        }
        self.put_control(&ControlRecord {
            purged: gone.clone(),
            unopened: Vec::new(),
        })?;
        for id in &gone {
            if let Some(st) = self.state.sessions.get(id) {
                self.remote.delete_log(&st.log)?;
                self.kept.remove_log(&st.log)?;
                let prefix = format!("{}/", st.log);
                self.state.seen.retain(|k, _| !k.starts_with(&prefix));
            }
            self.state.sessions.remove(id);
            self.purged.insert(id.clone());
            self.report.purged.push(id.clone());
        }
        self.dirty = true;
        self.flush()
    }

    /// Stores `c` as this host's next control record.
    fn put_control(&mut self, c: &ControlRecord) -> Result<()> {
        let control = self.key.control_log();
        let plain = serde_json::to_vec(c).unwrap_or_default();
        // An index taken (by an attempt whose progress was lost, or a member's garbage): the
        // next one.
        let mut index = self.state.control_next;
        loop {
            let sealed = self
                .key
                .seal(Kind::Control, &self.host, &control, index, &plain)
                .map_err(seal_err)?;
            match self
                .remote
                .put_record(&control, &self.host, index, &sealed)?
            {
                Put::Created => {
                    self.report.bytes_sent += sealed.len() as u64;
                    self.kept.put(&control, &self.host, index, &sealed)?;
                    break;
                }
                Put::Exists => index += 1,
            }
        }
        self.state.control_next = index + 1;
        self.state.saw(&control, &self.host, index + 1);
        self.dirty = true;
        Ok(())
    }

    // ----- pull ---------------------------------------------------------------------------

    /// Downloads and applies the other hosts' new records (of `only` that log, if given).
    fn pull(&mut self, only: Option<&LogId>, progress: &mut dyn Progress) -> Result<()> {
        let mut logs = self.remote.status()?;
        // Download and open everything first: nothing local changes unless all of it opens.
        // Control logs first: a log purged everywhere is gone from the server, not stale.
        let control = self.key.control_log();
        let (mut controls, purged_logs) = self.controls(&logs)?;
        if only.is_none() && self.refill(&logs, &purged_logs)? {
            logs = self.remote.status()?;
        }
        let counts: BTreeMap<(LogId, HostId), u64> =
            logs.iter().map(|l| ((l.log, l.host), l.count)).collect();
        // A server that holds fewer records than this machine saw (and could not be refilled
        // from the copies kept here) is stale or was rolled back.
        for (key, seen) in &self.state.seen {
            let Some((log, host)) = key.split_once('/') else {
                continue;
            };
            let (Some(log), Some(host)) = (LogId::parse(log), HostId::parse(host)) else {
                continue;
            };
            let count = counts.get(&(log, host)).copied().unwrap_or(0);
            // The counts are a hint (a replica may answer from a listing a second old): the
            // log itself decides.
            if count < *seen
                && !purged_logs.contains(&log)
                && self.remote.get_records(&log, &host, seen - 1)?.0.is_empty()
            {
                return Err(Error::Failed(format!(
                    "{} holds {count} records of host {host}'s log {log}, but this machine has \
                     seen {seen}: the server returned stale or truncated data, so nothing was \
                     changed here",
                    self.settings.server
                )));
            }
        }
        let mut sessions: BTreeMap<String, Vec<Fetched>> = BTreeMap::new();
        let wanted: Vec<_> = logs
            .iter()
            .filter(|lc| {
                lc.host != self.host
                    && lc.log != control
                    && !purged_logs.contains(&lc.log)
                    && only.is_none_or(|o| *o == lc.log)
                    && lc.count > self.state.seen(&lc.log, &lc.host)
            })
            .collect();
        progress.step("downloading");
        for (session, f) in self.retry_unopened(only, &purged_logs, &mut controls)? {
            sessions.entry(session).or_default().push(f);
        }
        for (n, lc) in wanted.iter().enumerate() {
            progress.sessions(n, wanted.len());
            for (index, got, sealed) in self.fetch(lc)? {
                match self.session_record(&lc.log, got) {
                    Ok((plain, record)) => {
                        sessions
                            .entry(record.session.clone())
                            .or_default()
                            .push(Fetched {
                                host: lc.host,
                                index,
                                sealed,
                                plain,
                                record,
                                retried: false,
                            });
                    }
                    Err(why) => self.skip(&lc.log, &lc.host, index, &sealed, &why)?,
                }
            }
        }
        // Purges first, and the broken wraps the other machines found mended.
        controls.sort_by_key(|(h, i, _, _)| (*h, *i));
        for (host, index, c, sealed) in controls {
            for id in c.purged {
                self.purge_here(&id)?;
            }
            for slot in &c.unopened {
                self.mend(slot)?;
            }
            self.keep(&control, &host, index, &sealed)?;
            self.state.saw(&control, &host, index + 1);
        }
        self.dirty = true;
        self.flush()?;
        progress.sessions(wanted.len(), wanted.len());
        progress.step("applying");
        let total = sessions.len();
        if total > BULK_SESSIONS && !self.bulk {
            self.bulk = true;
            self.store = SessionStore::with_config(
                self.home.clone(),
                freecode_store::StoreConfig {
                    durability: freecode_store::Durability::Never,
                    ..freecode_store::StoreConfig::default()
                },
            )?;
        }
        for (n, (id, mut records)) in sessions.into_iter().enumerate() {
            progress.sessions(n, total);
            if self.purged.contains(&id) {
                continue;
            }
            records.sort_by_key(|f| (f.host, f.index));
            let id = SessionId::new(&id)?;
            self.apply_session(&id, records)?;
        }
        progress.sessions(total, total);
        // Past the slots that did not open where nothing after them waits.
        let slots: Vec<(LogId, HostId)> = self
            .state
            .unopened
            .keys()
            .filter_map(|k| state::parse_slot(k))
            .map(|(log, host, _)| (log, host))
            .collect();
        for (log, host) in slots {
            let next = self.state.next_to_apply(&log, &host);
            if next > self.state.seen(&log, &host) {
                self.state.saw(&log, &host, next);
                self.dirty = true;
            }
        }
        if only.is_none() {
            self.tell_unopened()?;
        }
        Ok(())
    }

    /// A downloaded record of session log `log` that opened, decoded; why not, if it is not
    /// one.
    fn session_record(
        &self,
        log: &LogId,
        got: Got,
    ) -> std::result::Result<(Vec<u8>, SessionRecord), String> {
        let opened = match got {
            Got::Opened(o) => o,
            Got::Bad(why) => return Err(why),
        };
        if opened.kind != Kind::Session {
            return Err("is of the wrong kind for its log".into());
        }
        let record = SessionRecord::decode(&opened.plaintext)
            .ok_or_else(|| "opens but is not a session record".to_owned())?;
        if self.key.log_id(&record.session) != *log || SessionId::new(&record.session).is_err() {
            return Err("names a session of another log".into());
        }
        Ok((opened.plaintext, record))
    }

    /// A downloaded control record, decoded; why not, if it is not one.
    fn control_record(got: Got) -> std::result::Result<ControlRecord, String> {
        let opened = match got {
            Got::Opened(o) => o,
            Got::Bad(why) => return Err(why),
        };
        if opened.kind != Kind::Control {
            return Err("is of the wrong kind for its log".into());
        }
        serde_json::from_slice(&opened.plaintext)
            .map_err(|_| "opens but is not a control record".to_owned())
    }

    /// Keeps record `index` of `host`'s log `log` as the server holds it, in place of a copy
    /// of that slot that did not open.
    fn keep(&mut self, log: &LogId, host: &HostId, index: u64, sealed: &[u8]) -> Result<()> {
        if self
            .state
            .unopened
            .remove(&state::slot_key(log, host, index))
            .is_some()
        {
            self.dirty = true;
            self.kept.replace(log, host, index, sealed)
        } else {
            self.kept.put(log, host, index, sealed)
        }
    }

    /// Passes over slot `index` of `host`'s log `log`, which holds `sealed`, not a record of
    /// that log (`why`): a buggy or hostile member's write, or the server's change. It is
    /// kept as the server holds it (a refill sends it back, so the log keeps its indexes),
    /// reported once, and tried again on later pulls; the records after it apply where their
    /// chain points allow, so nothing that opens waits on it.
    fn skip(
        &mut self,
        log: &LogId,
        host: &HostId,
        index: u64,
        sealed: &[u8],
        why: &str,
    ) -> Result<()> {
        self.kept.put(log, host, index, sealed)?;
        let key = state::slot_key(log, host, index);
        if self.state.unopened.contains_key(&key) {
            return Ok(());
        }
        self.state.unopened.insert(
            key,
            state::Unopened {
                since: now_secs(),
                told: false,
            },
        );
        self.dirty = true;
        self.report.skipped.push(SkippedRecord {
            host: host.to_string(),
            log: log.to_string(),
            index,
            why: why.to_owned(),
        });
        Ok(())
    }

    /// The slots that did not open, tried again (those of `only`, if given; those past
    /// [`state::UNOPENED_FOR`] or [`state::UNOPENED_MAX`], or of logs gone, let go): the
    /// control records that open now join `controls`, the session records are returned by
    /// session.
    #[allow(clippy::type_complexity)]
    fn retry_unopened(
        &mut self,
        only: Option<&LogId>,
        purged: &BTreeSet<LogId>,
        controls: &mut Vec<(HostId, u64, ControlRecord, Vec<u8>)>,
    ) -> Result<Vec<(String, Fetched)>> {
        if self.state.unopened.is_empty() {
            return Ok(Vec::new());
        }
        let now = now_secs();
        let mut by_age: Vec<(u64, String)> = self
            .state
            .unopened
            .iter()
            .map(|(k, u)| (u.since, k.clone()))
            .collect();
        by_age.sort();
        let over = by_age.len().saturating_sub(state::UNOPENED_MAX);
        let control = self.key.control_log();
        let mut out = Vec::new();
        for (n, (since, key)) in by_age.into_iter().enumerate() {
            let slot = state::parse_slot(&key);
            let expired = n < over || now.saturating_sub(since) > state::UNOPENED_FOR.as_secs();
            let Some((log, host, index)) = slot.filter(|(l, _, _)| !expired && !purged.contains(l))
            else {
                self.state.unopened.remove(&key);
                self.dirty = true;
                continue;
            };
            if only.is_some_and(|o| *o != log) {
                continue;
            }
            let (got, _) = self.remote.get_records(&log, &host, index)?;
            let Some(sealed) = got.into_iter().next() else {
                // The log is gone from the server (purged, or lost with nothing to refill).
                self.state.unopened.remove(&key);
                self.dirty = true;
                continue;
            };
            if self.kept.get(&log, &host, index)?.as_deref() == Some(&sealed[..]) {
                continue;
            }
            let got = self.open_record(&log, &host, index, &sealed)?;
            if log == control {
                if let Ok(c) = Self::control_record(got) {
                    controls.push((host, index, c, sealed));
                }
            } else if let Ok((plain, record)) = self.session_record(&log, got) {
                out.push((
                    record.session.clone(),
                    Fetched {
                        host,
                        index,
                        sealed,
                        plain,
                        record,
                        retried: true,
                    },
                ));
            }
        }
        Ok(out)
    }

    /// Tells the other machines (one control record) the slots found here that did not open,
    /// so that one keeping a copy of a record whose key wrap was broken on the server mends it.
    fn tell_unopened(&mut self) -> Result<()> {
        let me = self.host.to_string();
        let untold: Vec<String> = self
            .state
            .unopened
            .iter()
            .filter(|(k, u)| {
                !u.told && state::parse_slot(k).is_some_and(|(_, host, _)| host.to_string() != me)
            })
            .map(|(k, _)| k.clone())
            .collect();
        if untold.is_empty() {
            return Ok(());
        }
        self.put_control(&ControlRecord {
            purged: Vec::new(),
            unopened: untold.clone(),
        })?;
        for k in untold {
            if let Some(u) = self.state.unopened.get_mut(&k) {
                u.told = true;
            }
        }
        self.dirty = true;
        Ok(())
    }

    /// The key wrap that makes `theirs` (slot `index` of `host`'s log `log` on the server,
    /// which does not open) the record `kept` here again: when the copy opens and is the
    /// same bytes but for its wrap. Under this machine's key.
    fn wrap_from_kept(
        &self,
        log: &LogId,
        host: &HostId,
        index: u64,
        theirs: &[u8],
        kept: Option<Vec<u8>>,
    ) -> Result<Option<Vec<u8>>> {
        let Some(kept) = kept else {
            return Ok(None);
        };
        if !same_but_wrap(&kept, theirs) || self.key.open(host, log, index, &kept).is_err() {
            return Ok(None);
        }
        let good = match self.key.rewrap(host, log, index, &kept) {
            Ok(Some(new)) => new,
            Ok(None) => kept,
            Err(_) => return Ok(None),
        };
        Ok(Some(good[freecode_sync::home::seal::WRAP_SPAN].to_vec()))
    }

    /// Mends slot `slot` (another machine could not open it) from the copy kept here, when
    /// the server's record is the kept one with a broken key wrap.
    fn mend(&mut self, slot: &str) -> Result<()> {
        let Some((log, host, index)) = state::parse_slot(slot) else {
            return Ok(());
        };
        let Some(kept) = self.kept.get(&log, &host, index)? else {
            return Ok(());
        };
        let (got, _) = self.remote.get_records(&log, &host, index)?;
        let Some(theirs) = got.first() else {
            return Ok(());
        };
        if self.key.open(&host, &log, index, theirs).is_ok() {
            return Ok(());
        }
        if let Some(wrap) = self.wrap_from_kept(&log, &host, index, theirs, Some(kept))?
            && self.remote.rewrap_record(&log, &host, index, &wrap)?
        {
            tracing::info!(%host, %log, index, "mended a broken key wrap from the copy kept here");
            self.report.mended += 1;
        }
        Ok(())
    }

    /// The other hosts' control records this machine has not seen, opened, and the logs
    /// purged (by them or here).
    #[allow(clippy::type_complexity)]
    fn controls(
        &mut self,
        logs: &[freecode_sync::home::LogCount],
    ) -> Result<(Vec<(HostId, u64, ControlRecord, Vec<u8>)>, BTreeSet<LogId>)> {
        let control = self.key.control_log();
        let mut controls = Vec::new();
        let me = self.host;
        for lc in logs.iter().filter(|l| l.log == control && l.host != me) {
            for (index, got, sealed) in self.fetch(lc)? {
                match Self::control_record(got) {
                    Ok(c) => controls.push((lc.host, index, c, sealed)),
                    Err(why) => self.skip(&lc.log, &lc.host, index, &sealed, &why)?,
                }
            }
        }
        let purged_logs = controls
            .iter()
            .flat_map(|(_, _, c, _)| c.purged.iter().map(|id| self.key.log_id(id)))
            .chain(self.purged.iter().map(|id| self.key.log_id(id)))
            .collect();
        Ok((controls, purged_logs))
    }

    /// Sends the server again, byte for byte, every kept record it no longer holds (a server
    /// that lost its data, or a replica restored from an old copy), each content record's
    /// claim with it; logs purged are not sent. Once per sync; whether anything was sent.
    fn refill(
        &mut self,
        logs: &[freecode_sync::home::LogCount],
        purged: &BTreeSet<LogId>,
    ) -> Result<bool> {
        if std::mem::replace(&mut self.refill_checked, true) {
            return Ok(false);
        }
        let counts: BTreeMap<(LogId, HostId), u64> =
            logs.iter().map(|l| ((l.log, l.host), l.count)).collect();
        let control = self.key.control_log();
        let mut sent = false;
        for k in self.kept.logs()? {
            let have = counts.get(&(k.log, k.host)).copied().unwrap_or(0);
            if have >= k.count || purged.contains(&k.log) {
                continue;
            }
            for index in have..k.count {
                let Some(sealed) = self.kept.get(&k.log, &k.host, index)? else {
                    break;
                };
                // A slot kept as garbage (passed over) goes back as it was, without a claim.
                let base = (k.log != control)
                    .then(|| self.key.open(&k.host, &k.log, index, &sealed).ok())
                    .flatten()
                    .and_then(|opened| SessionRecord::decode(&opened.plaintext))
                    .and_then(|r| r.base)
                    .and_then(|b| Chain::parse(&b));
                if let Some(base) = base {
                    // Ours, or another's standing: either way the claim names a record.
                    self.claim(&k.log, &base, &k.host, index)?;
                }
                if self.remote.put_record(&k.log, &k.host, index, &sealed)? == Put::Created {
                    self.report.refilled += 1;
                    self.report.bytes_sent += sealed.len() as u64;
                    sent = true;
                }
            }
        }
        if sent {
            tracing::info!(
                server = %self.settings.server,
                records = self.report.refilled,
                "the server had lost records this machine keeps: sent them again"
            );
        }
        Ok(sent)
    }

    /// The records of `lc` this machine has not seen, each opened where it stands.
    fn fetch(&mut self, lc: &freecode_sync::home::LogCount) -> Result<Vec<(u64, Got, Vec<u8>)>> {
        let mut out = Vec::new();
        let mut from = self.state.seen(&lc.log, &lc.host);
        while from < lc.count {
            let (got, next) = self.remote.get_records(&lc.log, &lc.host, from)?;
            if got.is_empty() {
                return Err(Error::Failed(format!(
                    "{} lists {} records of host {}'s log {} but returned none from {from}: \
                     nothing was changed here",
                    self.settings.server, lc.count, lc.host, lc.log
                )));
            }
            for (i, sealed) in got.into_iter().enumerate() {
                let index = from + i as u64;
                self.report.bytes_received += sealed.len() as u64;
                let got = self.open_record(&lc.log, &lc.host, index, &sealed)?;
                out.push((index, got, sealed));
            }
            from = next;
        }
        Ok(out)
    }

    /// Record `index` of `host`'s log `log`, opened, or why it does not open. The one error is
    /// a record under a key rotated on another machine: this one must join again.
    fn open_record(
        &mut self,
        log: &LogId,
        host: &HostId,
        index: u64,
        sealed: &[u8],
    ) -> Result<Got> {
        match self.key.open(host, log, index, sealed) {
            Ok(o) => Ok(Got::Opened(o)),
            Err(SealError::OtherKey { .. }) if self.rotated_elsewhere(sealed)? => {
                Err(Error::Failed(format!(
                    "the sync key was rotated on another machine: run `freecode sync join \
                     --server {} PHRASE` here with the phrase `freecode sync key` prints there \
                     (this machine keeps its sessions and progress); nothing was changed here",
                    self.settings.server
                )))
            }
            Err(SealError::OtherKey { .. }) => {
                Ok(Got::Bad("is sealed with a key this group never had".into()))
            }
            Err(SealError::Tampered { .. }) => Ok(Got::Bad(
                "does not open (changed, cut short, moved, or never a record)".into(),
            )),
            Err(e) => Ok(Got::Bad(format!("does not open ({e})"))),
        }
    }

    /// Whether `sealed` (which this key does not open) is under a key rotated from this one:
    /// the server keeps a ring for the key it names. Asked once per key id.
    fn rotated_elsewhere(&mut self, sealed: &[u8]) -> Result<bool> {
        let Some(id) = freecode_sync::home::seal::key_id_of(sealed) else {
            return Ok(false);
        };
        if let Some(known) = self.foreign_keys.get(&id) {
            return Ok(*known);
        }
        let rotated = self.remote.get_ring(&id)?.is_some();
        self.foreign_keys.insert(id, rotated);
        Ok(rotated)
    }

    fn purge_here(&mut self, id: &str) -> Result<()> {
        self.wrote_local = true;
        if let Ok(sid) = SessionId::new(id) {
            match self.store.purge(&sid) {
                Ok(_) | Err(StoreError::NotFound { .. }) => {}
                Err(e) => return Err(e.into()),
            }
            if let Some(st) = self.state.sessions.remove(id) {
                let prefix = format!("{}/", st.log);
                self.state.seen.retain(|k, _| !k.starts_with(&prefix));
            }
            self.kept.remove_log(&self.key.log_id(id))?;
            if self.purged.insert(id.to_owned()) {
                self.report.purged.push(id.to_owned());
            }
        }
        Ok(())
    }

    fn apply_session(&mut self, id: &SessionId, records: Vec<Fetched>) -> Result<()> {
        let mut st = match self.state.sessions.get(id.as_str()) {
            Some(st) => st.clone(),
            None => self.fresh(id),
        };
        let mut done = vec![false; records.len()];
        let mut changed = false;
        let forks = self.report.forks.len();
        loop {
            let mut progressed = false;
            for (i, f) in records.iter().enumerate() {
                if done[i] || !(f.retried || f.index == self.state.next_to_apply(&st.log, &f.host))
                {
                    continue;
                }
                let applicable = match &f.record.base {
                    None => true,
                    Some(b) => Chain::parse(b) == Some(st.chain),
                };
                if !applicable {
                    continue;
                }
                match self.apply_record(id, &mut st, f)? {
                    Applied::Busy => {
                        self.report.busy.push(id.to_string());
                        return Ok(());
                    }
                    Applied::Done => {}
                }
                self.state.saw(&st.log, &f.host, f.index + 1);
                self.state.sessions.insert(id.to_string(), st.clone());
                self.keep(&st.log, &f.host, f.index, &f.sealed)?;
                if self.report.forks.len() == forks {
                    self.save()?;
                } else {
                    // A fork made and the session cut back: not to be made twice.
                    self.dirty = true;
                    self.flush()?;
                }
                self.report.pulled += 1;
                done[i] = true;
                progressed = true;
                changed = true;
            }
            if !progressed {
                break;
            }
        }
        if changed {
            self.report.sessions_pulled += 1;
        }
        Ok(())
    }

    /// A session forked from `id` whose messages are `messages`, byte for byte.
    fn existing_fork(&self, id: &SessionId, messages: &[u8]) -> Result<Option<SessionId>> {
        for (other, dir) in local_sessions(&self.store)? {
            let paths = freecode_store::session::SessionPaths { dir };
            let meta = match self.store.meta(&other) {
                Ok(m) => m,
                Err(_) => continue,
            };
            if meta.parent_id.as_deref() == Some(id.as_str())
                && read_from(&paths.messages(), 0)? == messages
            {
                return Ok(Some(other));
            }
        }
        Ok(None)
    }

    /// Session `id`'s messages and rollout log as synced at `st`'s chain point, rebuilt from
    /// the kept records of every host (`None` when a record on the way is not kept).
    fn synced_content(
        &self,
        id: &SessionId,
        st: &SessionSync,
    ) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let mut by_base: BTreeMap<Chain, (Vec<u8>, SessionRecord)> = BTreeMap::new();
        for (host, index, sealed) in self.kept.of_log(&st.log)? {
            // Slots passed over are kept as the server held them, and do not open.
            let Ok(opened) = self.key.open(&host, &st.log, index, &sealed) else {
                continue;
            };
            if let Some(rec) = SessionRecord::decode(&opened.plaintext)
                && let Some(base) = rec.base.as_deref().and_then(Chain::parse)
            {
                by_base.insert(base, (opened.plaintext, rec));
            }
        }
        let (mut msgs, mut evs) = (Vec::new(), Vec::new());
        let mut chain = self.key.genesis(id.as_str());
        while chain != st.chain {
            let Some((plain, rec)) = by_base.remove(&chain) else {
                return Ok(None);
            };
            for s in &rec.sections {
                let buf = match s.head.what {
                    What::Messages => &mut msgs,
                    What::Events => &mut evs,
                    What::Meta | What::Memory => continue,
                };
                match s.head.mode {
                    Mode::Set => *buf = s.bytes.clone(),
                    Mode::Append if s.head.from == buf.len() as u64 => {
                        buf.extend_from_slice(&s.bytes);
                    }
                    Mode::Append => return Ok(None),
                }
            }
            chain = self.key.next(&chain, &plain);
        }
        Ok(Some((msgs, evs)))
    }

    fn apply_record(
        &mut self,
        id: &SessionId,
        st: &mut SessionSync,
        f: &Fetched,
    ) -> Result<Applied> {
        let rec = &f.record;
        self.wrote_local = true;
        // The session, created from the record's meta when this machine does not have it.
        let exists = match self.store.locate(id) {
            Ok(_) => true,
            Err(StoreError::NotFound { .. }) => false,
            Err(e) => return Err(e.into()),
        };
        if !exists {
            let Some(meta) = rec.section(What::Meta) else {
                return Err(Error::Failed(format!(
                    "session {id}'s first record from host {} has no meta",
                    f.host
                )));
            };
            let m = parse_meta(&meta.bytes, id)?;
            let new = || NewSession {
                title: m.title.clone(),
                project_path: m.project_path.clone(),
                provider: m.provider.clone(),
                model: m.model.clone(),
            };
            match self.store.create_with_id(new(), id) {
                Ok(_) => {}
                // A creation cut short (a directory without meta.json that nobody holds): what
                // `doctor --fix` clears, cleared here, then made again.
                Err(StoreError::AlreadyExists { path, .. })
                    if !path.join("meta.json").exists()
                        && freecode_store::lock::holder(&path).is_none() =>
                {
                    fsutil::remove_tree(&path)?;
                    self.store.create_with_id(new(), id)?;
                }
                Err(e) => return Err(e.into()),
            }
        }
        let mut writer = match self.store.writer(id) {
            Ok(w) => w,
            Err(StoreError::Locked { .. }) => return Ok(Applied::Busy),
            Err(e) => return Err(e.into()),
        };
        let paths = writer.paths().clone();
        let events = events_path(&self.home, id);
        // The rollout log is held only when there is one, or the record brings one.
        let events_lock = if rec.section(What::Events).is_some() || events.exists() {
            match HeldLog::try_hold(&self.home, id)? {
                Some(l) => Some(l),
                None => return Ok(Applied::Busy),
            }
        } else {
            None
        };
        // Does this machine hold changes of its own from the record's point?
        let mut diverged = false;
        let mut fits = Vec::new();
        for s in &rec.sections {
            let fit = match s.head.what {
                What::Messages => fit(&paths.messages(), &st.messages, s)?,
                What::Events => fit(&events, &st.events, s)?,
                What::Meta | What::Memory => Fit::Apply,
            };
            diverged |= fit == Fit::Diverged;
            fits.push(fit);
        }
        if diverged {
            // A fork made by an attempt a kill cut short is the one: same parent, same bytes.
            let local_messages = read_from(&paths.messages(), 0)?;
            let fork = match self.existing_fork(id, whole_lines(&local_messages))? {
                Some(f) => f,
                None => self.store.fork(id, None)?,
            };
            let local_events = read_from(&events, 0)?;
            let fork_events = events_path(&self.home, &fork);
            if !local_events.is_empty() && read_from(&fork_events, 0)? != local_events {
                fsutil::create_dir_private(&self.home.rollout_dir(&fork))?;
                fsutil::write_atomic(&fork_events, &local_events, !self.bulk)?;
            }
            self.report.forks.push(SyncFork {
                session_id: id.to_string(),
                fork_id: fork.to_string(),
            });
            // Back to the point the record extends: cut where the files still hold it, and
            // rebuilt from the kept records where this machine rewrote them (a compaction).
            let cut = [
                (paths.messages(), &st.messages),
                (events.clone(), &st.events),
            ]
            .iter()
            .map(|(file, mark)| Ok(mark.len == 0 || mark_of(file, mark.len)? == **mark))
            .collect::<Result<Vec<bool>>>()?;
            if cut.iter().all(|c| *c) {
                writer.truncate_log(st.messages.len)?;
                if let Some(l) = &events_lock {
                    l.truncate(st.events.len)?;
                }
            } else {
                let Some((msgs, evs)) = self.synced_content(id, st)? else {
                    return Err(Error::Failed(format!(
                        "session {id} was compacted here while another machine continued it: \
                         this machine's version is kept as session {fork}, but the synced \
                         version cannot be rebuilt (its records are not all kept here)"
                    )));
                };
                writer.replace_log_bytes(&msgs)?;
                match &events_lock {
                    Some(l) => l.replace(&evs, !self.bulk)?,
                    None if evs.is_empty() => {}
                    None => {
                        return Err(Error::Internal(format!("{}: not held", events.display())));
                    }
                }
            }
            fits = rec.sections.iter().map(|_| Fit::Apply).collect();
        }
        for (s, fit) in rec.sections.iter().zip(fits) {
            if fit == Fit::Already {
                continue;
            }
            match (s.head.what, s.head.mode) {
                (What::Meta, _) => {
                    let remote = parse_meta(&s.bytes, id)?;
                    let local = writer.meta().ok();
                    let take = local.is_none_or(|l| {
                        remote.updated_at > l.updated_at
                            || (remote.updated_at == l.updated_at && f.host > self.host)
                    });
                    // Never synced a meta of this session yet: the record's is the one (a
                    // creation cut short left a fresh meta of its own).
                    if take || !exists || st.meta.is_none() {
                        writer.put_meta_bytes(&s.bytes)?;
                        // Moved to another project there (`session move`): here too.
                        writer.move_dir_to_project(&remote.project_path)?;
                    } else {
                        // Ours is newer: it stays, and goes out with the next push.
                        continue;
                    }
                }
                (What::Memory, _) => {
                    fsutil::create_dir_private(&self.home.memory_dir(id))?;
                    fsutil::write_atomic(&self.home.memory_file(id), &s.bytes, !self.bulk)?;
                }
                (What::Messages, Mode::Append) => writer.append_lines(&s.bytes)?,
                (What::Messages, Mode::Set) => writer.replace_log_bytes(&s.bytes)?,
                (What::Events, mode) => {
                    let Some(l) = &events_lock else {
                        return Err(Error::Internal(format!("{}: not held", events.display())));
                    };
                    if mode == Mode::Append {
                        l.append(&s.bytes, !self.bulk)?;
                    } else {
                        l.replace(&s.bytes, !self.bulk)?;
                    }
                }
            }
        }
        drop(events_lock);
        // Where the session is now (a meta that moved it to another project moved it).
        let paths = writer.paths().clone();
        drop(writer);
        // The meta digest is the record's only when it was taken.
        let before_meta = st.meta.clone();
        self.advance(id, st, rec, &f.plain)?;
        if let Some(meta) = rec.section(What::Meta) {
            let local = fsutil::read_bounded(
                &paths.meta(),
                freecode_store::session::META_MAX_BYTES,
                "meta.json",
            )?
            .unwrap_or_default();
            st.meta = if local == meta.bytes {
                Some(state::digest(&meta.bytes))
            } else {
                before_meta
            };
        }
        Ok(Applied::Done)
    }
}

enum Pushed {
    Done,
    Again,
    Lost,
}

/// Claim slots a chain point has (see [`Engine::claim`]).
const CLAIM_SLOTS: u32 = 8;

/// Who extends a session's chain from a point.
enum Claim {
    /// The host the claim was made for.
    Ours,
    /// Another host, whose record extends it (or will: it is not stored yet).
    Theirs,
    /// Nobody can: every slot holds a claim that does not open or names no record of it.
    Wedged,
}

enum Applied {
    Done,
    Busy,
}

fn parse_meta(bytes: &[u8], id: &SessionId) -> Result<SessionMeta> {
    let m = freecode_core::json::from_slice_lossy::<SessionMeta>(bytes)
        .map_err(|e| Error::Failed(format!("session {id}'s synced meta does not parse: {e}")))?
        .value;
    if m.id != id.as_str() {
        return Err(Error::Failed(format!(
            "a synced meta of session {id} names session {}",
            m.id
        )));
    }
    Ok(m)
}
