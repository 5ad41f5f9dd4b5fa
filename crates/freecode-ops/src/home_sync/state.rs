//! This machine's sync settings and progress, under `state/sync/` (0600 files):
//!
//! - `key`: the sync key, 64 hex characters.
//! - `config.json`: the server, this host's id and the key's id.
//! - `state.json`: per session what was last synced (each file's length and a probe of its
//!   last 4 KiB, the chain point, the meta's digest, this host's next index), and per log and
//!   host how many records were applied, and the slots that did not open. Written atomically at least every second and at the
//!   end of each push and pull; what a kill loses of it is found again (see [`super`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use freecode_remote::home_sync::{Chain, HostId, LogId, SyncKey};
use freecode_store::{Home, fsutil};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::error::{Error, Result};

/// Bytes a probe covers: the end of what was synced.
pub const PROBE: u64 = 4096;

/// The folder.
pub fn dir(home: &Home) -> PathBuf {
    home.state_dir().join("sync")
}

/// The settings `init` or `join` wrote.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Settings {
    /// The server's base URL.
    pub server: String,
    /// This machine.
    pub host: HostId,
    /// The sync key's id.
    pub key_id: String,
}

/// A file as last synced: its length and the SHA-256 of its last [`PROBE`] bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mark {
    /// Bytes synced.
    pub len: u64,
    /// Hex digest of `[len - PROBE, len)`.
    pub probe: String,
}

/// One session's sync progress.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionSync {
    /// Its log.
    pub log: LogId,
    /// The chain point of the content synced.
    pub chain: Chain,
    /// `messages.jsonl` as synced.
    pub messages: Mark,
    /// `events.jsonl` as synced.
    pub events: Mark,
    /// Digest of the `meta.json` synced.
    pub meta: Option<String>,
    /// Digest of the `memory.json` synced.
    pub memory: Option<String>,
    /// This host's next record index in the log.
    pub next: u64,
}

/// Everything synced so far.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct State {
    /// Per session id.
    pub sessions: BTreeMap<String, SessionSync>,
    /// Records applied (or pushed), per `"<log>/<host>"`.
    pub seen: BTreeMap<String, u64>,
    /// This host's next control record.
    pub control_next: u64,
    /// Sessions purged through sync: their records are never applied again.
    #[serde(default)]
    pub purged: std::collections::BTreeSet<String>,
    /// Record slots that held something that did not open (or was not a record of its log),
    /// per `"<log>/<host>/<index>"`: passed over, and tried again on every pull until they
    /// open (a wrap mended from a kept copy) or [`UNOPENED_FOR`] has passed.
    #[serde(default)]
    pub unopened: BTreeMap<String, Unopened>,
    /// Claims found naming a record not stored yet, per `"<log>/<claim slot's point>"`: when
    /// first found (seconds since the epoch). Past [`CLAIM_PATIENCE`] such a claim no longer
    /// holds a push back ([`crate::home_sync`]'s plan, `claim_stands`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pending_claims: BTreeMap<String, u64>,
}

/// How long a claim naming a record that is not stored holds the chain point: its machine
/// stores the record right after the claim (a kill between the two is mended by that machine's
/// next sync), so a claim still unfulfilled past this is a member's that never writes one.
pub const CLAIM_PATIENCE: std::time::Duration = std::time::Duration::from_secs(15 * 60);

/// The most pending claims remembered (the oldest forgotten first).
pub const PENDING_CLAIMS_MAX: usize = 1024;

/// How long a slot that does not open is tried again.
pub const UNOPENED_FOR: std::time::Duration = std::time::Duration::from_secs(30 * 24 * 3600);

/// The most slots that do not open this machine tries again (the oldest are let go first).
pub const UNOPENED_MAX: usize = 1024;

/// A record slot that did not open.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Unopened {
    /// When it was first found (seconds since the epoch).
    pub since: u64,
    /// Whether the other machines were told, so one that keeps a copy mends it.
    #[serde(default)]
    pub told: bool,
}

/// The key of [`State::unopened`].
pub fn slot_key(log: &LogId, host: &HostId, index: u64) -> String {
    format!("{log}/{host}/{index}")
}

/// The slot a key of [`State::unopened`] names.
pub fn parse_slot(key: &str) -> Option<(LogId, HostId, u64)> {
    let mut parts = key.split('/');
    let log = LogId::parse(parts.next()?)?;
    let host = HostId::parse(parts.next()?)?;
    let index = parts.next()?.parse().ok()?;
    parts.next().is_none().then_some((log, host, index))
}

/// The key of [`State::seen`].
pub fn seen_key(log: &LogId, host: &HostId) -> String {
    format!("{log}/{host}")
}

impl State {
    /// How many records of `host`'s log `log` this machine has.
    pub fn seen(&self, log: &LogId, host: &HostId) -> u64 {
        self.seen.get(&seen_key(log, host)).copied().unwrap_or(0)
    }

    /// Records that the records of `host`'s log `log` before `next` were applied (or passed
    /// over); never less than before (a slot tried again is applied out of order).
    pub fn saw(&mut self, log: &LogId, host: &HostId, next: u64) {
        let seen = self.seen.entry(seen_key(log, host)).or_insert(0);
        *seen = (*seen).max(next);
    }

    /// Whether slot `index` of `host`'s log `log` did not open.
    pub fn is_unopened(&self, log: &LogId, host: &HostId, index: u64) -> bool {
        !self.unopened.is_empty() && self.unopened.contains_key(&slot_key(log, host, index))
    }

    /// The next index of `host`'s log `log` to apply: the first seen, past the slots that
    /// did not open.
    pub fn next_to_apply(&self, log: &LogId, host: &HostId) -> u64 {
        let mut i = self.seen(log, host);
        while self.is_unopened(log, host, i) {
            i += 1;
        }
        i
    }
}

/// Hex SHA-256.
pub fn digest(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The mark of the first `len` bytes of `bytes`.
pub fn mark(bytes: &[u8], len: u64) -> Mark {
    let end = usize::try_from(len).unwrap_or(usize::MAX).min(bytes.len());
    let start = end.saturating_sub(PROBE as usize);
    Mark {
        len: end as u64,
        probe: digest(&bytes[start..end]),
    }
}

fn write_private(path: &Path, bytes: &[u8]) -> Result<()> {
    if let Some(d) = path.parent() {
        fsutil::create_dir_private(d)?;
    }
    fsutil::write_atomic(path, bytes, true)?;
    fsutil::tighten(path, 0o600)?;
    Ok(())
}

fn read(path: &Path) -> Result<Option<Vec<u8>>> {
    Ok(fsutil::read_bounded(path, 256 << 20, "sync state")?)
}

/// This machine's sync set-up, loaded.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The settings.
    pub settings: Settings,
    /// The key.
    pub key: SyncKey,
}

/// Loads the set-up; [`Error::Failed`] telling how to make one when there is none.
pub fn load(home: &Home) -> Result<Loaded> {
    let d = dir(home);
    let (Some(cfg), Some(key)) = (read(&d.join("config.json"))?, read(&d.join("key"))?) else {
        return Err(Error::Failed(
            "this machine does not sync yet: run `freecode sync init --server URL` on the first \
             machine, or `freecode sync join --server URL` here and paste the words `freecode \
             sync key` prints there"
                .to_owned(),
        ));
    };
    let mut settings: Settings = serde_json::from_slice(&cfg)
        .map_err(|e| Error::Failed(format!("{}: {e}", d.join("config.json").display())))?;
    let key = SyncKey::parse(&String::from_utf8_lossy(&key))
        .map_err(|e| Error::Failed(format!("{}: {e}", d.join("key").display())))?;
    // A rotated key whose settings were not written yet (a kill between the two) replaces
    // the key they name.
    if !key.key_ids().contains(&settings.key_id) {
        return Err(Error::Failed(format!(
            "{}: the key does not match the key id in config.json",
            d.display()
        )));
    }
    settings.key_id = key.id();
    Ok(Loaded { settings, key })
}

/// Writes a new set-up; refused when one exists (unless `replace`).
pub fn save_setup(home: &Home, settings: &Settings, key: &SyncKey, replace: bool) -> Result<()> {
    let d = dir(home);
    if !replace && d.join("config.json").exists() {
        return Err(Error::Failed(format!(
            "this machine already syncs (with {}); pass --force to set it up again",
            d.join("config.json").display()
        )));
    }
    save_key(home, settings, key)?;
    if replace {
        let _ = fsutil::remove_file(&d.join("state.json"));
    }
    Ok(())
}

/// Writes the key and the settings naming it, keeping the progress (a rotated key of the same
/// group). The key goes first: a kill between the two leaves a rotated key whose older one
/// the settings name, which [`load`] takes.
pub fn save_key(home: &Home, settings: &Settings, key: &SyncKey) -> Result<()> {
    let d = dir(home);
    write_private(&d.join("key"), key.to_file().as_bytes())?;
    let cfg = serde_json::to_vec_pretty(settings).unwrap_or_default();
    write_private(&d.join("config.json"), &cfg)
}

/// Loads the progress (empty at first).
pub fn load_state(home: &Home) -> Result<State> {
    let path = dir(home).join("state.json");
    match read(&path)? {
        None => Ok(State::default()),
        Some(b) => serde_json::from_slice(&b)
            .map_err(|e| Error::Failed(format!("{}: {e}", path.display()))),
    }
}

/// Saves the progress.
pub fn save_state(home: &Home, state: &State) -> Result<()> {
    let bytes = serde_json::to_vec(state).unwrap_or_default();
    write_private(&dir(home).join("state.json"), &bytes)
}
